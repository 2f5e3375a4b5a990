//! Writing output files without destroying anything: the primitives behind the trace writer
//! and every command that writes a file.
//!
//! * [`check_output_not_input`]: refuse an output that is one of the inputs (the same file
//!   directly, through a symlink or a hard link: same device and inode), before anything is
//!   opened for writing.
//! * [`AtomicFile`]: a derived output (`-o`, `--svg`, `--stats`) is written to a new temporary
//!   file in the destination's directory and renamed over the destination only when complete
//!   ([`AtomicFile::commit`]): an error or a crash half way leaves the previous file as it was.
//!   It gets the permissions of the file it replaces, or 0666 less the umask for a new one.
//! * [`Staged`] (used by [`crate::TraceWriter`]): the same for a trace, with mode 0600 (traces
//!   hold every process's paths and command lines), an exclusive lock that makes a second
//!   writer of the same destination refuse, and the replaced file kept as `FILE.old`
//!   ([`Existing`]).
//!
//! The destination `-` is standard output, written as a stream (refused when it is a
//! terminal); an existing destination that is not a regular file (a FIFO, `/dev/null`, a
//! terminal, `/dev/stdout`) is opened and written in place.
//!
//! Temporary files are unnamed (`O_TMPFILE`) where the file system supports it, so a crash
//! before the commit leaves nothing behind; elsewhere they are named `.NAME.latscope-PID-N`
//! next to the destination and removed when the output is dropped uncommitted.

use std::ffi::{CString, OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What can go wrong preparing or committing an output file.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The operating system refused an operation.
    #[error("{}: {op}: {source}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// What was being done.
        op: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// The output is one of the inputs.
    #[error(
        "{}: this output is the input {} ({how}): writing it would destroy the input; choose another output file",
        output.display(), input.display()
    )]
    SameAsInput {
        /// The output as given.
        output: PathBuf,
        /// The input as given.
        input: PathBuf,
        /// How they are the same file ("the same path", "through a symlink or a hard link").
        how: &'static str,
    },

    /// Another writer holds the destination's lock.
    #[error(
        "{}: another latscope{} is writing this file: stop it, or choose another file",
        path.display(), pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Busy {
        /// The destination.
        path: PathBuf,
        /// The process holding the lock, when `/proc/locks` tells.
        pid: Option<u32>,
    },

    /// The destination exists and [`Existing::Refuse`] was asked.
    #[error("{}: the file already exists: not replacing it (remove it, choose another file, or ask to replace it)", path.display())]
    Exists {
        /// The destination.
        path: PathBuf,
    },

    /// The destination is a directory.
    #[error("{}: is a directory: give a file name", path.display())]
    IsDirectory {
        /// The destination.
        path: PathBuf,
    },

    /// Binary output to a terminal.
    #[error("standard output is a terminal: redirect it to a file (> FILE) or a pipe (| latscope ... -r -)")]
    Terminal,
}

fn io_err(path: &Path, op: impl Into<String>) -> impl FnOnce(io::Error) -> OutputError + '_ {
    let op = op.into();
    move |source| OutputError::Io { path: path.to_path_buf(), op, source }
}

/// The (device, inode) of a file, following symlinks; `"-"` is standard input (for inputs) or
/// output (for outputs); `None` when it does not exist.
fn identity(path: &Path, std_fd: i32) -> Option<(u64, u64)> {
    if path.as_os_str() == "-" {
        // SAFETY: fstat on a descriptor of this process into a zeroed struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::fstat(std_fd, &mut st) } == 0;
        // Only files can be destroyed by writing; two pipes are never "the same input".
        return (ok && (st.st_mode & libc::S_IFMT) == libc::S_IFREG).then_some((st.st_dev, st.st_ino));
    }
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Refuse an output that is one of `inputs`: the same path, or the same file (device and
/// inode) through a symlink or a hard link. Call it before opening anything for writing.
/// `-` is standard input among the inputs and standard output as the output (compared when
/// they are regular files). An output that does not exist yet is never an input.
///
/// ```
/// # fn main() -> Result<(), latscope_trace::OutputError> {
/// use latscope_trace::check_output_not_input;
/// check_output_not_input(&["trace.lst"], "latency.svg")?;
/// assert!(check_output_not_input(&["trace.lst"], "./trace.lst").is_err());
/// # Ok(())
/// # }
/// ```
pub fn check_output_not_input<I: AsRef<Path>>(inputs: &[I], output: impl AsRef<Path>) -> Result<(), OutputError> {
    let output = output.as_ref();
    let out_id = identity(output, 1);
    for input in inputs {
        let input = input.as_ref();
        let same_path = input.as_os_str() != "-" && lexically_equal(input, output);
        let how = if same_path {
            "the same path"
        } else if out_id.is_some() && identity(input, 0) == out_id {
            "the same file, through a symlink or a hard link"
        } else {
            continue;
        };
        return Err(OutputError::SameAsInput { output: output.to_path_buf(), input: input.to_path_buf(), how });
    }
    Ok(())
}

/// `a` and `b` name the same path once `.` components and repeated slashes are ignored
/// (`trace.lst` and `./trace.lst`); catches a file that does not exist yet.
fn lexically_equal(a: &Path, b: &Path) -> bool {
    use std::path::Component::CurDir;
    a.components().filter(|c| *c != CurDir).eq(b.components().filter(|c| *c != CurDir))
}

/// What a trace writer does with a file already at the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Existing {
    /// Keep it as `FILE.old` (replacing an older `FILE.old`), as `perf record` does.
    #[default]
    Backup,
    /// Replace it.
    Replace,
    /// Refuse to write ([`OutputError::Exists`]).
    Refuse,
}

/// How an output is written.
#[derive(Debug)]
enum Target {
    /// A new file, not yet at the destination: an unnamed `O_TMPFILE` (`None`) or a named
    /// temporary file next to it.
    Temp(Option<PathBuf>),
    /// Committed: the file is at the destination.
    Committed,
    /// Written in place (standard output, a FIFO, a device): nothing to commit.
    Stream,
}

/// A file being written to replace a destination when committed; see the module docs.
///
/// [`AtomicFile`] is this with the user's permissions and without backup or lock;
/// [`crate::TraceWriter`] uses it with [`StagedOptions::trace`].
#[derive(Debug)]
pub struct Staged {
    dest: PathBuf,
    dir: PathBuf,
    file: File,
    target: Target,
    options: StagedOptions,
    /// The destination as found when staging (device, inode) and the lock held on it.
    existing_lock: Option<((u64, u64), Option<File>)>,
}

/// Options of [`Staged::create`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagedOptions {
    /// Permission bits of a new file (before the umask, which applies to `0o666` only:
    /// a trace's `0o600` is set as it is).
    pub mode: u32,
    /// Whether the mode applies whatever the umask, and to replaced files too (traces); when
    /// false a replaced file's permissions are kept.
    pub exact_mode: bool,
    /// What to do with an existing file.
    pub existing: Existing,
    /// Hold an exclusive lock (`flock`) on the destination from [`Staged::create`] until the
    /// output is dropped: a second writer with `lock` refuses ([`OutputError::Busy`]).
    pub lock: bool,
}

impl StagedOptions {
    /// A trace: mode 0600, locked, the existing file handled as `existing` says.
    pub fn trace(existing: Existing) -> StagedOptions {
        StagedOptions { mode: 0o600, exact_mode: true, existing, lock: true }
    }

    /// A derived output (an image, a table): the user's umask or the replaced file's
    /// permissions, replaced without backup, no lock.
    pub fn derived() -> StagedOptions {
        StagedOptions { mode: 0o666, exact_mode: false, existing: Existing::Replace, lock: false }
    }
}

/// Where standard output and friends live: written in place.
fn is_stream_path(p: &Path) -> bool {
    let s = p.as_os_str().as_bytes();
    s == b"-" || s.starts_with(b"/dev/std") || s.starts_with(b"/dev/fd/") || s.starts_with(b"/proc/")
}

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Tests: use named temporary files, as on file systems without `O_TMPFILE`.
#[cfg(test)]
static FORCE_NAMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn cstr(p: &Path) -> Result<CString, OutputError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| OutputError::Io {
        path: p.to_path_buf(),
        op: "using the path".into(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "the path contains a NUL byte"),
    })
}

fn flock(f: &File, op: libc::c_int) -> io::Result<()> {
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The pid holding an flock on (dev, ino), from `/proc/locks`.
fn lock_holder(dev: u64, ino: u64) -> Option<u32> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let want = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    locks.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"
        (f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&want.as_str())).then(|| f.get(4)?.parse().ok()).flatten()
    })
}

impl Staged {
    /// Prepare writing `dest`: check the destination, take the lock, create the temporary file.
    /// Nothing at `dest` changes until [`Staged::commit`].
    pub fn create(dest: impl AsRef<Path>, options: StagedOptions) -> Result<Staged, OutputError> {
        let dest = dest.as_ref().to_path_buf();
        if dest.as_os_str() == "-" {
            if io::stdout().is_terminal() {
                return Err(OutputError::Terminal);
            }
            // A duplicate of standard output: dropping the file leaves fd 1 open.
            // SAFETY: dup of fd 1; the new descriptor is owned by the File.
            let fd = unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) };
            if fd < 0 {
                return Err(io_err(&dest, "using standard output")(io::Error::last_os_error()));
            }
            let file = unsafe { File::from_raw_fd(fd) };
            return Ok(Staged::stream(dest, file, options));
        }
        let meta = std::fs::metadata(&dest).ok();
        if meta.as_ref().is_some_and(|m| m.is_dir()) {
            return Err(OutputError::IsDirectory { path: dest });
        }
        if is_stream_path(&dest) || meta.as_ref().is_some_and(|m| !m.is_file()) {
            let file = OpenOptions::new().write(true).open(&dest).map_err(io_err(&dest, "opening for writing"))?;
            return Ok(Staged::stream(dest, file, options));
        }
        // Through a symlink: replace the file it points to, keep the link.
        let dest = if std::fs::symlink_metadata(&dest).is_ok_and(|m| m.file_type().is_symlink()) && meta.is_some() {
            std::fs::canonicalize(&dest).map_err(io_err(&dest, "resolving the symlink"))?
        } else {
            dest
        };
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if dest.file_name().is_none() {
            return Err(OutputError::IsDirectory { path: dest });
        }
        let mut existing_lock = None;
        if let Some(m) = &meta {
            if options.lock {
                existing_lock = Some(((m.dev(), m.ino()), Self::lock_existing(&dest)?));
            }
            if options.existing == Existing::Refuse {
                return Err(OutputError::Exists { path: dest });
            }
        }
        let (file, target) = Self::temp(&dir, &dest, &options)?;
        if options.lock {
            flock(&file, libc::LOCK_EX | libc::LOCK_NB).map_err(io_err(&dest, "locking the new file"))?;
        }
        let perm = match (&meta, options.exact_mode) {
            (Some(m), false) => Some(m.permissions().mode() & 0o7777),
            (_, true) => Some(options.mode),
            (None, false) => None,
        };
        if let Some(mode) = perm {
            file.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(io_err(&dest, "setting permissions"))?;
        }
        Ok(Staged { dest, dir, file, target, options, existing_lock })
    }

    fn stream(dest: PathBuf, file: File, options: StagedOptions) -> Staged {
        Staged { dest, dir: PathBuf::new(), file, target: Target::Stream, options, existing_lock: None }
    }

    /// Open and lock the existing destination; busy when another writer holds it.
    fn lock_existing(dest: &Path) -> Result<Option<File>, OutputError> {
        let f = match File::open(dest) {
            Ok(f) => f,
            // Replaceable (the directory is writable) but not readable: no lock to take.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Ok(None),
            Err(e) => return Err(io_err(dest, "opening the existing file to lock it")(e)),
        };
        match flock(&f, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => Ok(Some(f)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let m = f.metadata().map_err(io_err(dest, "reading the existing file"))?;
                Err(OutputError::Busy { path: dest.to_path_buf(), pid: lock_holder(m.dev(), m.ino()) })
            }
            // File systems without flock: no lock.
            Err(_) => Ok(None),
        }
    }

    /// A new file in `dir`: unnamed when the file system allows, else named next to `dest`.
    fn temp(dir: &Path, dest: &Path, options: &StagedOptions) -> Result<(File, Target), OutputError> {
        let mode = if options.exact_mode { options.mode } else { 0o666 };
        #[cfg(test)]
        let unnamed = !FORCE_NAMED.load(Ordering::Relaxed);
        #[cfg(not(test))]
        let unnamed = true;
        match OpenOptions::new().read(true).write(true).mode(mode).custom_flags(libc::O_TMPFILE).open(dir) {
            Ok(f) if unnamed => return Ok((f, Target::Temp(None))),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(io_err(dest, format!("creating the file in {}", dir.display()))(e));
            }
            // Not supported here (EOPNOTSUPP, EISDIR on old kernels, EINVAL): a named file.
            Err(_) => {}
        }
        for _ in 0..100 {
            let name = Self::temp_name(dest);
            match OpenOptions::new().read(true).write(true).create_new(true).mode(mode).open(&name) {
                Ok(f) => return Ok((f, Target::Temp(Some(name)))),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err(dest, format!("creating a temporary file in {}", dir.display()))(e)),
            }
        }
        Err(io_err(dest, format!("creating a temporary file in {}", dir.display()))(io::Error::other("no free name")))
    }

    /// `.NAME.latscope-PID-N` next to `dest`.
    fn temp_name(dest: &Path) -> PathBuf {
        let mut name = OsString::from(".");
        name.push(dest.file_name().unwrap_or(OsStr::new("out")));
        name.push(format!(".latscope-{}-{}", std::process::id(), TEMP_SEQ.fetch_add(1, Ordering::Relaxed)));
        dest.with_file_name(name)
    }

    /// The destination.
    pub fn path(&self) -> &Path {
        &self.dest
    }

    /// The file being written.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Whether the output is a regular file (not a stream: truncating and syncing make sense).
    pub fn is_file(&self) -> bool {
        !matches!(self.target, Target::Stream)
    }

    /// Whether [`Staged::commit`] has put the file in place (always true for a stream).
    pub fn is_committed(&self) -> bool {
        !matches!(self.target, Target::Temp(_))
    }

    /// Put the new file at the destination: `fdatasync` it, then rename it into place
    /// atomically (the existing file as [`Existing`] says), then `fsync` the directory. Returns
    /// the backup's path when the existing file was kept as `FILE.old`. A stream or an output
    /// already committed: nothing to do (`Ok(None)`).
    pub fn commit(&mut self) -> Result<Option<PathBuf>, OutputError> {
        let named = match &self.target {
            Target::Temp(named) => named.clone(),
            _ => return Ok(None),
        };
        let dest = self.dest.clone();
        self.file.sync_data().map_err(io_err(&dest, "syncing the new file"))?;
        let dir = File::open(&self.dir).map_err(io_err(&self.dir, "opening the directory"))?;
        // Commits into one directory take turns (another writer may be committing the same name).
        let _ = flock(&dir, libc::LOCK_EX);
        let existing = match std::fs::metadata(&dest) {
            Ok(m) if m.is_dir() => return Err(OutputError::IsDirectory { path: dest }),
            Ok(m) => Some((m.dev(), m.ino())),
            Err(_) => None,
        };
        if let Some(id) = existing {
            if self.options.lock && self.existing_lock.as_ref().map(|(i, _)| *i) != Some(id) {
                // Not the file locked when staging: someone else committed meanwhile.
                self.existing_lock = Some((id, Self::lock_existing(&dest)?));
            }
            if self.options.existing == Existing::Refuse {
                return Err(OutputError::Exists { path: dest });
            }
        }
        let temp = match named {
            Some(n) => n,
            None => {
                let n = Self::temp_name(&dest);
                let from = cstr(Path::new(&format!("/proc/self/fd/{}", self.file.as_raw_fd())))?;
                let to = cstr(&n)?;
                // SAFETY: linkat with NUL-terminated paths; AT_SYMLINK_FOLLOW resolves the magic link.
                let r = unsafe {
                    libc::linkat(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::AT_SYMLINK_FOLLOW)
                };
                if r != 0 {
                    return Err(io_err(&dest, "giving the new file a name")(io::Error::last_os_error()));
                }
                self.target = Target::Temp(Some(n.clone()));
                n
            }
        };
        let backup = match (existing, self.options.existing) {
            (Some(_), Existing::Backup) => {
                let mut old = dest.clone().into_os_string();
                old.push(".old");
                let old = PathBuf::from(old);
                // Exchange, so that the destination always exists, then move the old file aside.
                match rename2(&temp, &dest, libc::RENAME_EXCHANGE) {
                    Ok(()) => std::fs::rename(&temp, &old).map_err(io_err(&old, "keeping the previous file"))?,
                    Err(_) => {
                        std::fs::rename(&dest, &old).map_err(io_err(&old, "keeping the previous file"))?;
                        std::fs::rename(&temp, &dest).map_err(io_err(&dest, "renaming the new file into place"))?;
                    }
                }
                Some(old)
            }
            (Some(_), _) => {
                std::fs::rename(&temp, &dest).map_err(io_err(&dest, "renaming the new file into place"))?;
                None
            }
            (None, _) => {
                match rename2(&temp, &dest, libc::RENAME_NOREPLACE) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        return Err(OutputError::Exists { path: dest });
                    }
                    Err(_) => {
                        std::fs::rename(&temp, &dest).map_err(io_err(&dest, "renaming the new file into place"))?
                    }
                }
                None
            }
        };
        self.target = Target::Committed;
        // The old file's lock is no longer needed: ours is on the file now at the destination.
        self.existing_lock = None;
        dir.sync_all().map_err(io_err(&self.dir, "syncing the directory"))?;
        Ok(backup)
    }
}

fn rename2(from: &Path, to: &Path, flags: libc::c_uint) -> io::Result<()> {
    let (f, t) = (
        CString::new(from.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?,
        CString::new(to.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?,
    );
    // SAFETY: renameat2 with NUL-terminated paths.
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, f.as_ptr(), libc::AT_FDCWD, t.as_ptr(), flags) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Target::Temp(Some(name)) = &self.target {
            let _ = std::fs::remove_file(name);
        }
    }
}

/// A derived output written completely before it replaces anything: see the module docs.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::io::Write;
/// use latscope_trace::{check_output_not_input, AtomicFile};
///
/// check_output_not_input(&["trace.lst"], "lat.svg")?;
/// let mut out = AtomicFile::create("lat.svg")?;
/// writeln!(out, "<svg/>")?;
/// out.commit()?; // only now is lat.svg replaced
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct AtomicFile {
    staged: Staged,
    buf: io::BufWriter<File>,
}

impl AtomicFile {
    /// Start writing `path` (`-`: standard output).
    pub fn create(path: impl AsRef<Path>) -> Result<AtomicFile, OutputError> {
        let mut staged = Staged::create(path, StagedOptions::derived())?;
        let file = staged.file().try_clone().map_err(io_err(staged.path(), "opening the new file"))?;
        Ok(AtomicFile { staged, buf: io::BufWriter::with_capacity(1 << 16, file) })
    }

    /// The destination.
    pub fn path(&self) -> &Path {
        self.staged.path()
    }

    /// Flush, `fsync` and rename into place (a stream is only flushed).
    pub fn commit(mut self) -> Result<(), OutputError> {
        let path = self.staged.path().to_path_buf();
        self.buf.flush().map_err(io_err(&path, "writing"))?;
        if self.staged.is_file() {
            self.staged.commit()?;
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.buf.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where `O_TMPFILE` is not supported the temporary file has a name next to the
    /// destination: removed when dropped, renamed when committed, the old file kept.
    #[test]
    fn named_temporary_files() {
        FORCE_NAMED.store(true, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("latscope-output-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let dest = dir.join("t.lst");
        std::fs::write(&dest, b"old").unwrap();
        let listing = || {
            let mut v: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        let mut s = Staged::create(&dest, StagedOptions::trace(Existing::Backup)).unwrap();
        s.file().write_all(b"new").unwrap();
        let names = listing();
        assert_eq!(names.len(), 2);
        assert!(names[0].starts_with(".t.lst.latscope-"), "{names:?}");
        drop(s);
        assert_eq!(listing(), ["t.lst"]);
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        let mut s = Staged::create(&dest, StagedOptions::trace(Existing::Backup)).unwrap();
        s.file().write_all(b"new").unwrap();
        assert_eq!(s.commit().unwrap(), Some(dir.join("t.lst.old")));
        drop(s);
        assert_eq!(listing(), ["t.lst", "t.lst.old"]);
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        assert_eq!(std::fs::read(dir.join("t.lst.old")).unwrap(), b"old");
        FORCE_NAMED.store(false, Ordering::Relaxed);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

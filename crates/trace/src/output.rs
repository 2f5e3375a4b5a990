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
//! * [`open_in_place`]: the safe open of a file written in place (a database, a FIFO, a
//!   device), used by [`Staged`] for non-regular destinations and by the store.
//!
//! No output follows a symlink at its final name or writes a regular file that has another
//! name (a hard link): both are refused with a message naming them ([`OutputError::Symlink`]
//! names the link's target). The destination's directory is opened once and every step works
//! on its descriptor with the final name (`openat` with `O_NOFOLLOW` then `fstat`, `O_TMPFILE`,
//! `linkat`, `renameat2` within the directory), so nothing checked in one step can be swapped
//! before the next. The directory part of the path is resolved by the kernel, whose protections
//! for symlinks in sticky world-writable directories apply to it.
//!
//! The destination `-` is standard output, written as a stream (refused when it is a
//! terminal); an existing destination that is not a regular file (a FIFO, `/dev/null`, a
//! terminal, `/dev/stdout`) is opened and written in place; a FIFO gets a few seconds for its
//! reader to open it (tried without blocking), then is refused ([`OutputError::NoReader`]).
//!
//! Temporary files are unnamed (`O_TMPFILE`) where the file system supports it, so a crash
//! before the commit leaves nothing behind; elsewhere they are named `.NAME.latscope-PID-N`
//! next to the destination and removed when the output is dropped uncommitted.

use std::ffi::{CStr, CString, OsStr};
use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
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

    /// The output is a symbolic link: never followed (it may have been planted to make a
    /// privileged writer replace its target).
    #[error(
        "{}: is a symbolic link (to {}): not writing through it; write to the target's own path, or remove the link",
        path.display(), target.display()
    )]
    Symlink {
        /// The output as given.
        path: PathBuf,
        /// Where the link leads.
        target: PathBuf,
    },

    /// The output is a regular file with more than one name: writing it would change a file
    /// elsewhere too.
    #[error(
        "{}: has {links} hard links (the same file has another name, maybe outside this directory): not writing it; remove it or choose another file",
        path.display()
    )]
    HardLinked {
        /// The output as given.
        path: PathBuf,
        /// Its link count.
        links: u64,
    },

    /// The output is a FIFO nobody reads: opening it would block.
    #[error("{}: is a FIFO with no reader (none opened it within 5 s): start the reader first (for example `latscope events -r {} &`), then write to it", path.display(), path.display())]
    NoReader {
        /// The FIFO.
        path: PathBuf,
    },

    /// The output must be a regular file and is something else.
    #[error("{}: is {kind}, not a regular file", path.display())]
    NotAFile {
        /// The output as given.
        path: PathBuf,
        /// What it is ("a character device").
        kind: &'static str,
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
    /// temporary file next to it (its name in the destination's directory).
    Temp(Option<CString>),
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
    /// The destination's directory (none for a stream).
    parent: Option<Parent>,
    file: File,
    target: Target,
    options: StagedOptions,
    /// The destination as found when staging (device, inode) and the lock held on it.
    existing_lock: Option<((u64, u64), Option<File>)>,
    /// A pipe or FIFO written through an open file description of its own, switched to
    /// non-blocking writes by [`Staged::write_all`] (a shared one, such as a `dup` of standard
    /// output, must keep the flags its other users expect).
    own_pipe: bool,
    /// Whether [`Staged::write_all`] has made the descriptor non-blocking.
    nonblocking: bool,
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
    cbytes(p, p.as_os_str().as_bytes())
}

fn cbytes(p: &Path, b: &[u8]) -> Result<CString, OutputError> {
    CString::new(b).map_err(|_| OutputError::Io {
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

fn fstat(f: &File) -> io::Result<libc::stat> {
    // SAFETY: fstat on a descriptor we own into a zeroed struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(f.as_raw_fd(), &mut st) } == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn file_kind(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFLNK => "a symbolic link",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        _ => "a special file",
    }
}

/// An output's directory, opened once, and the output's name in it. Every later step (looking
/// at what is there, opening it, creating the new file, renaming it into place) works on the
/// directory's descriptor with the final name, so nothing resolved in one step can be swapped
/// under the next. The directory part is resolved by the kernel (its protections for symlinks
/// in sticky directories apply); the final name is never followed.
#[derive(Debug)]
struct Parent {
    dest: PathBuf,
    dir: File,
    name: CString,
}

/// What is at an output's name ([`Parent::inspect`]).
enum Found {
    Missing,
    /// A regular file with one link.
    File(libc::stat),
    Dir,
    /// A FIFO, a device or a socket: written in place.
    Special(libc::stat),
}

impl Parent {
    fn open(dest: &Path) -> Result<Parent, OutputError> {
        let Some(name) = dest.file_name() else { return Err(OutputError::IsDirectory { path: dest.to_path_buf() }) };
        if dest.as_os_str().as_bytes().ends_with(b"/") {
            return Err(OutputError::IsDirectory { path: dest.to_path_buf() });
        }
        let dir_path = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let dir = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(dir_path)
            .map_err(io_err(dest, format!("creating the file in {}", dir_path.display())))?;
        Ok(Parent { dest: dest.to_path_buf(), dir, name: cbytes(dest, name.as_bytes())? })
    }

    fn stat_name(&self, name: &CStr) -> io::Result<Option<libc::stat>> {
        // SAFETY: fstatat on our directory with a NUL-terminated name into a zeroed struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::fstatat(self.dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        if r == 0 {
            Ok(Some(st))
        } else {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::NotFound {
                Ok(None)
            } else {
                Err(e)
            }
        }
    }

    /// The refusal for a symlink at the name: names the link and where it leads.
    fn symlink_error(&self) -> OutputError {
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: readlinkat into a buffer of the given size.
        let n = unsafe {
            libc::readlinkat(self.dir.as_raw_fd(), self.name.as_ptr(), buf.as_mut_ptr() as *mut libc::c_char, buf.len())
        };
        buf.truncate(n.max(0) as usize);
        OutputError::Symlink { path: self.dest.clone(), target: PathBuf::from(OsStr::from_bytes(&buf)) }
    }

    /// What is at the name, without following it; a symlink or a file with more than one link
    /// is refused.
    fn inspect(&self) -> Result<Found, OutputError> {
        let st = self.stat_name(&self.name).map_err(io_err(&self.dest, "looking at the file"))?;
        let Some(st) = st else { return Ok(Found::Missing) };
        self.judge(st)
    }

    fn judge(&self, st: libc::stat) -> Result<Found, OutputError> {
        match st.st_mode & libc::S_IFMT {
            libc::S_IFLNK => Err(self.symlink_error()),
            libc::S_IFDIR => Ok(Found::Dir),
            libc::S_IFREG if st.st_nlink > 1 => {
                Err(OutputError::HardLinked { path: self.dest.clone(), links: st.st_nlink })
            }
            libc::S_IFREG => Ok(Found::File(st)),
            _ => Ok(Found::Special(st)),
        }
    }

    /// Open the name itself (`O_NOFOLLOW`, non-blocking so that a FIFO without a reader
    /// never hangs), then check what was opened (`fstat`): the same refusals as
    /// [`Parent::inspect`], on the file actually opened. `O_NONBLOCK` is cleared afterwards.
    fn open_name(&self, flags: libc::c_int, mode: u32) -> Result<(File, libc::stat), OutputError> {
        let fl = flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: openat on our directory with a NUL-terminated name; the fd is owned by the File.
        let fd = retry_for_reader(|| unsafe {
            libc::openat(self.dir.as_raw_fd(), self.name.as_ptr(), fl, mode as libc::c_uint)
        });
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) => self.symlink_error(),
                Some(libc::ENXIO) => OutputError::NoReader { path: self.dest.clone() },
                Some(libc::EISDIR) => OutputError::IsDirectory { path: self.dest.clone() },
                _ => io_err(&self.dest, "opening")(e),
            });
        }
        let file = unsafe { File::from_raw_fd(fd) };
        let st = fstat(&file).map_err(io_err(&self.dest, "looking at the opened file"))?;
        if let Found::Dir = self.judge(st)? {
            return Err(OutputError::IsDirectory { path: self.dest.clone() });
        }
        clear_nonblock(&file).map_err(io_err(&self.dest, "opening"))?;
        Ok((file, st))
    }

    /// The directory opened again (another open file, so that a lock on it is ours alone).
    fn reopen_dir(&self) -> Option<File> {
        // SAFETY: openat on our directory; the fd is owned by the File.
        let fd = unsafe {
            libc::openat(self.dir.as_raw_fd(), c".".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC)
        };
        (fd >= 0).then(|| unsafe { File::from_raw_fd(fd) })
    }

    fn unlink(&self, name: &CStr) {
        // SAFETY: unlinkat on our directory with a NUL-terminated name.
        unsafe { libc::unlinkat(self.dir.as_raw_fd(), name.as_ptr(), 0) };
    }

    fn rename(&self, from: &CStr, to: &CStr, flags: libc::c_uint) -> io::Result<()> {
        // SAFETY: renameat2 within our directory with NUL-terminated names. A rename never
        // follows a symlink at either name: a link planted meanwhile is replaced, not its target.
        let r =
            unsafe { libc::renameat2(self.dir.as_raw_fd(), from.as_ptr(), self.dir.as_raw_fd(), to.as_ptr(), flags) };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// The name with `suffix` appended (`FILE.old`).
    fn sibling(&self, prefix: &str, suffix: &str) -> CString {
        let mut v = prefix.as_bytes().to_vec();
        v.extend_from_slice(self.name.as_bytes());
        v.extend_from_slice(suffix.as_bytes());
        CString::new(v).unwrap_or_default()
    }

    fn path_of(&self, name: &CStr) -> PathBuf {
        self.dest.with_file_name(OsStr::from_bytes(name.to_bytes()))
    }
}

fn clear_nonblock(f: &File) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    let fl = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
    if fl < 0 || unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_nonblock(f: &File) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    let fl = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
    if fl < 0 || unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn is_pipe(f: &File) -> bool {
    f.metadata().is_ok_and(|m| m.file_type().is_fifo())
}

/// How long a stream's reader may take nothing once the process is stopping.
pub const STALLED_READER: std::time::Duration = std::time::Duration::from_secs(5);

static STOPPING: std::sync::LazyLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::LazyLock::new(Default::default);

/// The flag that says the process is stopping (see [`Staged::write_all`]); register it for the
/// stop signals (`signal_hook::flag::register`) so that a signal counts while a write waits.
pub fn stopping_flag() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    STOPPING.clone()
}

static STOP_AT: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

/// Say when the process will stop (a recording's `--duration`): from then on it counts as
/// stopping (see [`set_stopping`]), even while the header is still being written.
pub fn stop_at(when: std::time::Instant) {
    *STOP_AT.lock().unwrap_or_else(|e| e.into_inner()) = Some(when);
}

fn stopping() -> bool {
    STOPPING.load(Ordering::Relaxed)
        || STOP_AT.lock().unwrap_or_else(|e| e.into_inner()).is_some_and(|t| std::time::Instant::now() >= t)
}

/// Say the process is stopping: from now on a stream whose reader takes nothing for
/// [`STALLED_READER`] is given up (see [`Staged::write_all`]).
pub fn set_stopping() {
    STOPPING.store(true, Ordering::Relaxed);
}

/// `write_all` on a non-blocking pipe: waits for room with `poll`, in short steps so that the
/// stopping flag is seen, and gives up on a reader stalled for [`STALLED_READER`] once stopping.
fn write_patiently(f: &File, mut buf: &[u8]) -> io::Result<()> {
    let mut progress = std::time::Instant::now();
    while !buf.is_empty() {
        match (&*f).write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                progress = std::time::Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if progress.elapsed() >= STALLED_READER && stopping() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "the reader took nothing for {} s and the recording is over: given up with {} bytes undelivered",
                            STALLED_READER.as_secs(),
                            buf.len()
                        ),
                    ));
                }
                let mut pfd = libc::pollfd { fd: f.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
                // SAFETY: one pollfd, valid for the call. Errors (EINTR) just retry.
                unsafe { libc::poll(&mut pfd, 1, 100) };
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How [`open_in_place`] treats a missing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InPlace {
    /// Create it with these permission bits (less the umask).
    Create(u32),
    /// Only check: a missing file is fine, nothing is opened ([`open_in_place`] returns `None`).
    CheckOnly,
}

/// Open a file to be written in place (a database, a FIFO, a device), the safe-open helper
/// behind every output that is not replaced whole: the final name is never followed
/// (`O_NOFOLLOW` on the directory's descriptor), a FIFO without a reader is refused instead of
/// blocking, and what was opened is checked with `fstat`: a symlink or a regular file with more
/// than one link (another name, perhaps outside the user's reach, for the same data) is refused
/// with [`OutputError::Symlink`] / [`OutputError::HardLinked`], and so is anything but a regular
/// file when `regular_only`.
///
/// With [`InPlace::CheckOnly`] nothing is created or opened when the file is missing, and an
/// existing one is only looked at (for files another library opens by name, such as SQLite's
/// journals): a check, so a program that can plant files in the directory between this check
/// and the library's open could still race it; use it in directories such programs cannot
/// write, or alongside [`InPlace::Create`] of the main file.
pub fn open_in_place(path: impl AsRef<Path>, how: InPlace, regular_only: bool) -> Result<Option<File>, OutputError> {
    let path = path.as_ref();
    let parent = Parent::open(path)?;
    let special = |st: &libc::stat| OutputError::NotAFile { path: path.to_path_buf(), kind: file_kind(st.st_mode) };
    match (parent.inspect()?, how) {
        (Found::Dir, _) => Err(OutputError::IsDirectory { path: path.to_path_buf() }),
        (Found::Special(st), _) if regular_only => Err(special(&st)),
        (Found::Missing, InPlace::CheckOnly) | (Found::File(_), InPlace::CheckOnly) => Ok(None),
        (Found::Special(_), InPlace::CheckOnly) => Ok(None),
        (_, InPlace::Create(mode)) => {
            let (f, st) = parent.open_name(libc::O_RDWR | libc::O_CREAT, mode)?;
            if regular_only && st.st_mode & libc::S_IFMT != libc::S_IFREG {
                return Err(special(&st));
            }
            Ok(Some(f))
        }
    }
}

/// How long an output FIFO may take to get a reader (one started just after latscope), and how
/// often it is tried meanwhile: never blocked in `open`, so signals and timers are served.
const READER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
const READER_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// Runs a non-blocking open until it no longer fails with `ENXIO` (a FIFO without a reader) or
/// [`READER_WAIT`] has passed; returns the last result (a descriptor, or -1 with `errno` set).
fn retry_for_reader(mut open: impl FnMut() -> libc::c_int) -> libc::c_int {
    let deadline = std::time::Instant::now() + READER_WAIT;
    loop {
        let fd = open();
        if fd >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ENXIO) {
            return fd;
        }
        if std::time::Instant::now() >= deadline {
            return fd;
        }
        std::thread::sleep(READER_POLL);
    }
}

/// Open a path that is a stream by nature (`/dev/stdout`, `/proc/self/fd/N`) for writing:
/// followed, since these are the kernel's own links, but never blocking on a FIFO.
fn open_stream(dest: &Path) -> Result<File, OutputError> {
    let open =
        || OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC).open(dest);
    let deadline = std::time::Instant::now() + READER_WAIT;
    let mut r = open();
    while matches!(&r, Err(e) if e.raw_os_error() == Some(libc::ENXIO)) && std::time::Instant::now() < deadline {
        std::thread::sleep(READER_POLL);
        r = open();
    }
    let file = r.map_err(|e| match e.raw_os_error() {
        Some(libc::ENXIO) => OutputError::NoReader { path: dest.to_path_buf() },
        _ => io_err(dest, "opening for writing")(e),
    })?;
    clear_nonblock(&file).map_err(io_err(dest, "opening for writing"))?;
    Ok(file)
}

impl Staged {
    /// Prepare writing `dest`: check the destination, take the lock, create the temporary file.
    /// Nothing at `dest` changes until [`Staged::commit`].
    ///
    /// A symlink at `dest` is refused ([`OutputError::Symlink`], naming its target), and so is
    /// a regular file with more than one link ([`OutputError::HardLinked`]); the final name is
    /// never followed, at creation or at the commit.
    pub fn create(dest: impl AsRef<Path>, options: StagedOptions) -> Result<Staged, OutputError> {
        let dest = dest.as_ref().to_path_buf();
        if dest.as_os_str() == "-" {
            if io::stdout().is_terminal() {
                return Err(OutputError::Terminal);
            }
            // A pipe on standard output is opened again (through /proc) for a description of
            // our own, whose flags can change without surprising the pipe's other writers.
            if let Ok(file) =
                OpenOptions::new().write(true).custom_flags(libc::O_CLOEXEC | libc::O_NOCTTY).open("/proc/self/fd/1")
            {
                if is_pipe(&file) {
                    return Ok(Staged::stream(dest, file, options, true));
                }
            }
            // A duplicate of standard output: dropping the file leaves fd 1 open.
            // SAFETY: dup of fd 1; the new descriptor is owned by the File.
            let fd = unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) };
            if fd < 0 {
                return Err(io_err(&dest, "using standard output")(io::Error::last_os_error()));
            }
            let file = unsafe { File::from_raw_fd(fd) };
            return Ok(Staged::stream(dest, file, options, false));
        }
        if is_stream_path(&dest) {
            let file = open_stream(&dest)?;
            return Ok(Staged::stream(dest, file, options, true));
        }
        let parent = Parent::open(&dest)?;
        let existing = match parent.inspect()? {
            Found::Dir => return Err(OutputError::IsDirectory { path: dest }),
            Found::Special(_) => {
                let (file, _) = parent.open_name(libc::O_WRONLY, 0)?;
                return Ok(Staged::stream(dest, file, options, true));
            }
            Found::File(st) => Some(st),
            Found::Missing => None,
        };
        let mut existing_lock = None;
        if let Some(st) = &existing {
            if options.lock {
                existing_lock = Some(((st.st_dev, st.st_ino), Self::lock_existing(&parent)?));
            }
            if options.existing == Existing::Refuse {
                return Err(OutputError::Exists { path: dest });
            }
        }
        let (file, target) = Self::temp(&parent, &options)?;
        if options.lock {
            flock(&file, libc::LOCK_EX | libc::LOCK_NB).map_err(io_err(&dest, "locking the new file"))?;
        }
        // A replaced file's permissions, without set-user-ID, set-group-ID and sticky bits: a
        // file planted with them must not hand them to what latscope writes.
        let perm = match (&existing, options.exact_mode) {
            (Some(st), false) => Some(st.st_mode & 0o777),
            (_, true) => Some(options.mode),
            (None, false) => None,
        };
        if let Some(mode) = perm {
            file.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(io_err(&dest, "setting permissions"))?;
        }
        Ok(Staged {
            dest,
            parent: Some(parent),
            file,
            target,
            options,
            existing_lock,
            own_pipe: false,
            nonblocking: false,
        })
    }

    fn stream(dest: PathBuf, file: File, options: StagedOptions, own: bool) -> Staged {
        let own_pipe = own && is_pipe(&file);
        Staged {
            dest,
            parent: None,
            file,
            target: Target::Stream,
            options,
            existing_lock: None,
            own_pipe,
            nonblocking: false,
        }
    }

    /// Write all of `buf`. To a pipe or FIFO this never blocks for good: the writes are
    /// non-blocking, waited for with `poll`, and once the process is stopping ([`set_stopping`],
    /// a stop signal) a reader that takes nothing for [`STALLED_READER`] makes it fail with
    /// [`io::ErrorKind::TimedOut`], so that a reader that stopped reading cannot hold
    /// `latscope record` past Ctrl-C or `--duration`.
    pub fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if !self.own_pipe {
            return self.file.write_all(buf);
        }
        if !self.nonblocking {
            set_nonblock(&self.file)?;
            self.nonblocking = true;
        }
        write_patiently(&self.file, buf)
    }

    /// Open and lock the existing destination; busy when another writer holds it.
    fn lock_existing(parent: &Parent) -> Result<Option<File>, OutputError> {
        let f = match parent.open_name(libc::O_RDONLY, 0) {
            Ok((f, _)) => f,
            // Replaceable (the directory is writable) but not readable: no lock to take.
            Err(OutputError::Io { source, .. }) if source.kind() == io::ErrorKind::PermissionDenied => return Ok(None),
            Err(OutputError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match flock(&f, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => Ok(Some(f)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let m = f.metadata().map_err(io_err(&parent.dest, "reading the existing file"))?;
                Err(OutputError::Busy { path: parent.dest.clone(), pid: lock_holder(m.dev(), m.ino()) })
            }
            // File systems without flock: no lock.
            Err(_) => Ok(None),
        }
    }

    /// A new file in the destination's directory: unnamed when the file system allows, else
    /// named next to the destination (created exclusively, never through a link).
    fn temp(parent: &Parent, options: &StagedOptions) -> Result<(File, Target), OutputError> {
        let mode = if options.exact_mode { options.mode } else { 0o666 };
        let dest = &parent.dest;
        let dir_shown = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        #[cfg(test)]
        let unnamed = !FORCE_NAMED.load(Ordering::Relaxed);
        #[cfg(not(test))]
        let unnamed = true;
        if unnamed {
            // SAFETY: openat on our directory; the fd is owned by the File.
            let fd = unsafe {
                libc::openat(
                    parent.dir.as_raw_fd(),
                    c".".as_ptr(),
                    libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
                    mode as libc::c_uint,
                )
            };
            if fd >= 0 {
                return Ok((unsafe { File::from_raw_fd(fd) }, Target::Temp(None)));
            }
            // Not supported here (EOPNOTSUPP, EISDIR on old kernels, EINVAL): a named file.
        }
        for _ in 0..100 {
            let name = Self::temp_name(parent);
            // SAFETY: openat on our directory with a NUL-terminated name.
            let fd = unsafe {
                libc::openat(
                    parent.dir.as_raw_fd(),
                    name.as_ptr(),
                    libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                    mode as libc::c_uint,
                )
            };
            if fd >= 0 {
                return Ok((unsafe { File::from_raw_fd(fd) }, Target::Temp(Some(name))));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::AlreadyExists {
                return Err(io_err(dest, format!("creating a temporary file in {}", dir_shown.display()))(e));
            }
        }
        Err(io_err(dest, format!("creating a temporary file in {}", dir_shown.display()))(io::Error::other(
            "no free name",
        )))
    }

    /// `.NAME.latscope-PID-N` next to the destination.
    fn temp_name(parent: &Parent) -> CString {
        parent.sibling(".", &format!(".latscope-{}-{}", std::process::id(), TEMP_SEQ.fetch_add(1, Ordering::Relaxed)))
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
    /// already committed: nothing to do (`Ok(None)`). A symlink or a hard-linked file that
    /// appeared at the destination meanwhile is refused as at [`Staged::create`].
    pub fn commit(&mut self) -> Result<Option<PathBuf>, OutputError> {
        let named = match &self.target {
            Target::Temp(named) => named.clone(),
            _ => return Ok(None),
        };
        let Some(parent) = self.parent.as_ref() else { return Ok(None) };
        let dest = self.dest.clone();
        self.file.sync_data().map_err(io_err(&dest, "syncing the new file"))?;
        // Commits into one directory take turns (another writer may be committing the same
        // name): a lock on a descriptor of our own, released when it closes at the end.
        let turn = parent.reopen_dir();
        if let Some(t) = &turn {
            let _ = flock(t, libc::LOCK_EX);
        }
        let existing = match parent.inspect()? {
            Found::Dir => return Err(OutputError::IsDirectory { path: dest }),
            Found::File(st) | Found::Special(st) => Some((st.st_dev, st.st_ino)),
            Found::Missing => None,
        };
        if let Some(id) = existing {
            if self.options.lock && self.existing_lock.as_ref().map(|(i, _)| *i) != Some(id) {
                // Not the file locked when staging: someone else committed meanwhile.
                self.existing_lock = Some((id, Self::lock_existing(parent)?));
            }
            if self.options.existing == Existing::Refuse {
                return Err(OutputError::Exists { path: dest });
            }
        }
        let temp = match named {
            Some(n) => n,
            None => {
                let n = Self::temp_name(parent);
                // SAFETY: linkat of our unnamed file into our directory (AT_EMPTY_PATH needs
                // CAP_DAC_READ_SEARCH; else through /proc's magic link to the descriptor).
                let mut r = unsafe {
                    libc::linkat(
                        self.file.as_raw_fd(),
                        c"".as_ptr(),
                        parent.dir.as_raw_fd(),
                        n.as_ptr(),
                        libc::AT_EMPTY_PATH,
                    )
                };
                if r != 0 {
                    let from = cstr(Path::new(&format!("/proc/self/fd/{}", self.file.as_raw_fd())))?;
                    r = unsafe {
                        libc::linkat(
                            libc::AT_FDCWD,
                            from.as_ptr(),
                            parent.dir.as_raw_fd(),
                            n.as_ptr(),
                            libc::AT_SYMLINK_FOLLOW,
                        )
                    };
                }
                if r != 0 {
                    return Err(io_err(&dest, "giving the new file a name")(io::Error::last_os_error()));
                }
                self.target = Target::Temp(Some(n.clone()));
                n
            }
        };
        let name = parent.name.clone();
        let renamed = |e| io_err(&dest, "renaming the new file into place")(e);
        let backup = match (existing, self.options.existing) {
            (Some(_), Existing::Backup) => {
                let old = parent.sibling("", ".old");
                let old_path = parent.path_of(&old);
                // Exchange, so that the destination always exists, then move the old file aside.
                match parent.rename(&temp, &name, libc::RENAME_EXCHANGE) {
                    Ok(()) => parent.rename(&temp, &old, 0).map_err(io_err(&old_path, "keeping the previous file"))?,
                    Err(_) => {
                        parent.rename(&name, &old, 0).map_err(io_err(&old_path, "keeping the previous file"))?;
                        parent.rename(&temp, &name, 0).map_err(renamed)?;
                    }
                }
                Some(old_path)
            }
            (Some(_), _) => {
                parent.rename(&temp, &name, 0).map_err(renamed)?;
                None
            }
            (None, _) => {
                match parent.rename(&temp, &name, libc::RENAME_NOREPLACE) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        return Err(OutputError::Exists { path: dest });
                    }
                    Err(_) => parent.rename(&temp, &name, 0).map_err(renamed)?,
                }
                None
            }
        };
        self.target = Target::Committed;
        // The old file's lock is no longer needed: ours is on the file now at the destination.
        self.existing_lock = None;
        parent.dir.sync_all().map_err(io_err(&dest, "syncing the directory"))?;
        Ok(backup)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let (Target::Temp(Some(name)), Some(parent)) = (&self.target, &self.parent) {
            parent.unlink(name);
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

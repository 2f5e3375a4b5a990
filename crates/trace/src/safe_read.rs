//! Reading files by name that other users may control: the one way latscope opens a file it did
//! not write to read what is in it (container runtimes' state, `/proc` and `/sys` files, the
//! ELF files behind a process's mappings, ...).
//!
//! * Only regular files are read. A FIFO, a device, a socket or a directory is refused
//!   ([`NotRegular`], as an [`io::Error`] of kind `InvalidInput`): the name is looked up with
//!   `O_PATH`, which opens nothing (a FIFO waits for no writer, no device's driver runs), and
//!   what it names is checked with `fstat` before it is opened for reading (`O_NONBLOCK`,
//!   through `/proc/self/fd`: the same inode, not a second lookup of the name). `/proc` and
//!   `/sys` files are regular files.
//! * The last component is not followed when it is a symlink ([`read_file`]: refused), or,
//!   below a directory ([`read_file_beneath`]), no component may lead outside it: `openat2` with
//!   `RESOLVE_IN_ROOT` (Linux 5.6) resolves `..` and absolute symlinks as if the directory were
//!   the root, so a runtime's state below `$LATSCOPE_HOST_ROOT` is read from the host's tree as
//!   its own links mean it. Where `openat2` is refused (a seccomp filter), each component is
//!   opened in turn with `O_NOFOLLOW` and symlinks and `..` are refused.
//! * At most a given number of bytes is read ([`Bounded`] says when there was more): a symlink
//!   to `/dev/zero` or a file that grows while being read cannot exhaust memory.
//!
//! [`read_file_following`] (and [`open_file_beneath_following`], inside a directory) is for the
//! kernel's own links (`/proc/PID/map_files/...`, which name
//! the file mapped, not a path) and root's configuration files: the link is followed, the rest
//! holds.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path};

/// What [`read_file`] and friends read: the bytes, and whether the file had more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bounded {
    /// At most the limit given.
    pub data: Vec<u8>,
    /// The file had more than the limit: `data` is its beginning.
    pub truncated: bool,
}

impl Bounded {
    /// The whole file, or an error (kind `InvalidData`) naming the limit when it had more.
    pub fn whole(self, what: &Path) -> io::Result<Vec<u8>> {
        if self.truncated {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is larger than the {} bytes read of it", what.display(), self.data.len()),
            ));
        }
        Ok(self.data)
    }

    /// The bytes as text (invalid UTF-8 replaced).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.data)
    }
}

/// The refusal of a file that is not a regular file, said as what it is.
#[derive(Debug)]
pub struct NotRegular {
    /// `a FIFO`, `a character device`, ...
    pub kind: &'static str,
}

impl std::fmt::Display for NotRegular {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a regular file ({}): not read", self.kind)
    }
}

impl std::error::Error for NotRegular {}

fn kind_of(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFDIR => "a directory",
        libc::S_IFLNK => "a symlink",
        _ => "not a file",
    }
}

fn cstr(p: &OsStr) -> io::Result<CString> {
    CString::new(p.as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

/// How names are looked up: `O_PATH` opens nothing (no device's driver runs, no FIFO waits);
/// the file is opened for reading only once `fstat` says it is a regular file.
const PATH_FLAGS: libc::c_int = libc::O_PATH | libc::O_CLOEXEC;

/// The regular file that the `O_PATH` descriptor `fd` (taken over) refers to, opened for
/// reading through `/proc/self/fd` (the same inode, never a new lookup of the name); anything
/// else is refused.
fn regular(fd: libc::c_int) -> io::Result<File> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor we just opened and own.
    let path = unsafe { File::from_raw_fd(fd) };
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on our descriptor into a stat buffer of the right type.
    if unsafe { libc::fstat(path.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, NotRegular { kind: kind_of(st.st_mode) }));
    }
    let c = CString::new(format!("/proc/self/fd/{}", path.as_raw_fd())).expect("no NUL");
    // SAFETY: open with a NUL-terminated path; the descriptor is owned by the File.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Open `path` for reading if it is a regular file, without following a symlink at its last
/// component and without blocking on a FIFO (see the module documentation).
pub fn open_file(path: impl AsRef<Path>) -> io::Result<File> {
    let c = cstr(path.as_ref().as_os_str())?;
    // SAFETY: open with a NUL-terminated path; the descriptor is owned by `regular`.
    regular(unsafe { libc::open(c.as_ptr(), PATH_FLAGS | libc::O_NOFOLLOW) })
}

/// Like [`open_file`], following a symlink at the last component (the kernel's own links such
/// as `/proc/PID/map_files/...`, root's configuration files).
pub fn open_file_following(path: impl AsRef<Path>) -> io::Result<File> {
    let c = cstr(path.as_ref().as_os_str())?;
    // SAFETY: as in open_file.
    regular(unsafe { libc::open(c.as_ptr(), PATH_FLAGS) })
}

/// Open `rel` below the directory `root` for reading, if it is a regular file inside it: `..`
/// and absolute symlinks resolve as if `root` were `/`; the last component is not followed.
pub fn open_file_beneath(root: impl AsRef<Path>, rel: impl AsRef<Path>) -> io::Result<File> {
    let dir = open_dir(root.as_ref())?;
    let fd = open_beneath(&dir, rel.as_ref(), PATH_FLAGS | libc::O_NOFOLLOW)?;
    regular(fd)
}

/// Like [`open_file_beneath`], following a symlink at the last component too, inside `root`
/// (a tree copied from another machine, whose links mean its own files: `--binaries DIR`).
pub fn open_file_beneath_following(root: impl AsRef<Path>, rel: impl AsRef<Path>) -> io::Result<File> {
    let dir = open_dir(root.as_ref())?;
    let fd = open_beneath(&dir, rel.as_ref(), PATH_FLAGS)?;
    regular(fd)
}

fn open_dir(p: &Path) -> io::Result<File> {
    let c = cstr(p.as_os_str())?;
    // SAFETY: open with a NUL-terminated path; the descriptor is owned by the File.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// `openat2(dir, rel, flags, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)`; where the system call
/// is refused, one component at a time, refusing symlinks and `..`. Returns the descriptor.
fn open_beneath(dir: &File, rel: &Path, flags: libc::c_int) -> io::Result<libc::c_int> {
    let c = cstr(rel.as_os_str())?;
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2 with our directory, a NUL-terminated path and an open_how of its size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    } as libc::c_int;
    if fd >= 0 {
        return Ok(fd);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // No openat2 (a seccomp filter refuses it): component by component.
        Some(libc::ENOSYS) | Some(libc::EPERM) => open_by_components(dir, rel, flags),
        _ => Err(e),
    }
}

fn open_by_components(dir: &File, rel: &Path, flags: libc::c_int) -> io::Result<libc::c_int> {
    let parts: Vec<&OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(Ok(n)),
            Component::CurDir | Component::RootDir => None,
            Component::ParentDir | Component::Prefix(_) => {
                Some(Err(io::Error::new(io::ErrorKind::InvalidInput, "`..` in a path read below a directory")))
            }
        })
        .collect::<io::Result<_>>()?;
    let Some((last, dirs)) = parts.split_last() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty path"));
    };
    // SAFETY: dup of our own descriptor; the copy is owned by `cur`.
    let mut cur = unsafe { File::from_raw_fd(libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0)) };
    for d in dirs {
        let c = cstr(d)?;
        // SAFETY: openat on our directory with a NUL-terminated name.
        let fd = unsafe {
            libc::openat(
                cur.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        cur = unsafe { File::from_raw_fd(fd) };
    }
    let c = cstr(last)?;
    // SAFETY: as above.
    let fd = unsafe { libc::openat(cur.as_raw_fd(), c.as_ptr(), flags | libc::O_NOFOLLOW) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Read at most `max` bytes of an open file (a `take` of one more byte says whether it had
/// more).
pub fn read_bounded(f: &mut File, max: usize) -> io::Result<Bounded> {
    let mut data = Vec::with_capacity(max.min(64 << 10));
    f.by_ref().take(max as u64 + 1).read_to_end(&mut data)?;
    let truncated = data.len() > max;
    data.truncate(max);
    Ok(Bounded { data, truncated })
}

/// Read at most `max` bytes of the regular file `path` ([`open_file`]).
pub fn read_file(path: impl AsRef<Path>, max: usize) -> io::Result<Bounded> {
    read_bounded(&mut open_file(path)?, max)
}

/// Read at most `max` bytes of the regular file `path`, following a symlink at its last
/// component ([`open_file_following`]).
pub fn read_file_following(path: impl AsRef<Path>, max: usize) -> io::Result<Bounded> {
    read_bounded(&mut open_file_following(path)?, max)
}

/// Read at most `max` bytes of the regular file `rel` inside directory `root`
/// ([`open_file_beneath`]).
pub fn read_file_beneath(root: impl AsRef<Path>, rel: impl AsRef<Path>, max: usize) -> io::Result<Bounded> {
    read_bounded(&mut open_file_beneath(root, rel)?, max)
}

/// The names in directory `rel` inside `root` (resolved as [`open_file_beneath`] does, the
/// directory itself may be reached through links inside `root`), at most `max` of them (`.`
/// and `..` left out).
pub fn list_dir_beneath(root: impl AsRef<Path>, rel: impl AsRef<Path>, max: usize) -> io::Result<Vec<OsString>> {
    let dir = open_dir(root.as_ref())?;
    let rel = rel.as_ref();
    let fd = if rel.as_os_str().is_empty() {
        // SAFETY: dup of our own descriptor.
        unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) }
    } else {
        open_beneath(&dir, rel, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC)?
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    list_fd(fd, max)
}

/// The names in the directory open as `fd` (taken over and closed), at most `max`.
fn list_fd(fd: libc::c_int, max: usize) -> io::Result<Vec<OsString>> {
    // SAFETY: fdopendir takes the descriptor over; closedir below releases both.
    let d = unsafe { libc::fdopendir(fd) };
    if d.is_null() {
        let e = io::Error::last_os_error();
        unsafe { libc::close(fd) };
        return Err(e);
    }
    let mut out = Vec::new();
    while out.len() < max {
        // SAFETY: readdir on the stream we opened; the entry is copied before the next call.
        let e = unsafe { libc::readdir(d) };
        if e.is_null() {
            break;
        }
        let name = unsafe { std::ffi::CStr::from_ptr((*e).d_name.as_ptr()) }.to_bytes();
        if name != b"." && name != b".." {
            out.push(OsString::from_vec(name.to_vec()));
        }
    }
    // SAFETY: the stream opened above, closed once.
    unsafe { libc::closedir(d) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mkfifo(p: &Path) {
        let c = CString::new(p.as_os_str().as_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    fn refused_as(r: io::Result<Bounded>, kind: &str) {
        let e = r.expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains(kind), "{e}");
    }

    /// A FIFO is refused at once (no writer is waited for), a device through a symlink is not
    /// followed, and a directory is not a file.
    #[test]
    fn fifos_devices_and_links_to_them_are_refused_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("state.json");
        mkfifo(&fifo);
        refused_as(read_file(&fifo, 100), "a FIFO");
        refused_as(read_file_beneath(t.path(), "state.json", 100), "a FIFO");
        refused_as(read_file("/dev/zero", 100), "a character device");
        refused_as(read_file(t.path(), 100), "a directory");
        let link = t.path().join("zero");
        symlink("/dev/zero", &link).unwrap();
        refused_as(read_file(&link, 100), "a symlink");
        // Followed where asked, and still refused as a device.
        refused_as(read_file_following(&link, 100), "a character device");
        // Below a directory, an absolute link resolves inside it: no /dev/zero there.
        std::fs::create_dir(t.path().join("d")).unwrap();
        symlink("/dev/zero", t.path().join("d/zero")).unwrap();
        assert!(read_file_beneath(t.path(), "d/zero", 100).is_err());
    }

    /// Reads stop at the limit and say so; procfs files are read whole.
    #[test]
    fn reads_are_bounded_and_say_when_the_file_had_more() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("big");
        std::fs::write(&f, vec![b'x'; 1000]).unwrap();
        let b = read_file(&f, 100).unwrap();
        assert_eq!((b.data.len(), b.truncated), (100, true));
        assert!(b.whole(&f).unwrap_err().to_string().contains("larger than the 100 bytes"));
        let b = read_file(&f, 1000).unwrap();
        assert_eq!((b.data.len(), b.truncated), (1000, false));
        let s = read_file("/proc/self/status", 1 << 20).unwrap();
        assert!(!s.truncated && s.text().contains("Name:"));
    }

    /// `..` and absolute symlinks stay inside the directory read below.
    #[test]
    fn paths_below_a_directory_stay_inside_it() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("host");
        std::fs::create_dir_all(root.join("var/lib")).unwrap();
        std::fs::create_dir_all(root.join("data/docker")).unwrap();
        std::fs::write(root.join("data/docker/c.json"), b"{}").unwrap();
        std::fs::write(t.path().join("outside"), b"secret").unwrap();
        // The host's own absolute link means the host's /data, not ours.
        symlink("/data/docker", root.join("var/lib/docker")).unwrap();
        assert_eq!(read_file_beneath(&root, "var/lib/docker/c.json", 100).unwrap().data, b"{}");
        assert!(read_file_beneath(&root, "../outside", 100).is_err());
        // A link at the last component is followed only where asked, and inside the directory.
        symlink("/data/docker/c.json", root.join("var/lib/c.json")).unwrap();
        assert!(open_file_beneath(&root, "var/lib/c.json").is_err());
        assert!(open_file_beneath_following(&root, "var/lib/c.json").is_ok());
        symlink(t.path().join("outside"), root.join("var/lib/out")).unwrap();
        assert!(open_file_beneath_following(&root, "var/lib/out").is_err());
        symlink("../../outside", root.join("var/lib/esc")).unwrap();
        assert!(read_file_beneath(&root, "var/lib/esc", 100).is_err());
        let names = list_dir_beneath(&root, "var/lib/docker", 10).unwrap();
        assert_eq!(names, vec![OsString::from("c.json")]);
        // The component-by-component way refuses links and `..` outright.
        let dir = open_dir(&root).unwrap();
        assert!(open_by_components(&dir, Path::new("var/lib/docker/c.json"), PATH_FLAGS).is_err());
        assert!(open_by_components(&dir, Path::new("data/../data/docker/c.json"), PATH_FLAGS).is_err());
        let fd = open_by_components(&dir, Path::new("data/docker/c.json"), PATH_FLAGS).unwrap();
        assert!(regular(fd).is_ok());
    }
}

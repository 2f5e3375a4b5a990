//! Files opened by name for reading, safely: only regular files, of a bounded size, and, below a
//! directory, only what is inside it.
//!
//! latscope runs as root and opens files whose names come from what it recorded (the binaries of
//! a stack's frames) or from configuration. Opened as they are, a FIFO at such a name would block
//! the open forever, a device (`/dev/zero`) would be read until memory runs out, and a path with
//! `..` or a symlink could lead out of the directory the user named. So the open never blocks
//! (`O_NONBLOCK`), what was opened is checked with `fstat` (a regular file, at most the size the
//! caller allows), and [`open_in_root`] resolves a path as if the directory were `/`
//! (`openat2(RESOLVE_IN_ROOT)`: `..` and absolute symlinks stay inside it), refusing `..` outright.

use std::fs::File;
use std::io::{Error, ErrorKind, Read};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path};

/// What a file that is not a regular one is, for messages.
fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// `file` if it is a regular file of at most `max_bytes`, made blocking again; else an error
/// naming `path` and what it is.
fn checked(file: File, path: &Path, max_bytes: u64) -> Result<File, Error> {
    let md = file.metadata()?;
    if !md.file_type().is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("{} is {}, not a regular file: refused", path.display(), kind_of(md.file_type())),
        ));
    }
    if md.len() > max_bytes {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("{} is {} bytes, more than the {max_bytes} accepted: refused", path.display(), md.len()),
        ));
    }
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let fl = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(file.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

/// Open `path` for reading if it is a regular file of at most `max_bytes`: a FIFO, a device, a
/// socket or a directory is refused without blocking, and so is a larger file. Symlinks are
/// followed (the kernel's `protected_symlinks` applies), but what they lead to is checked.
pub fn open_regular(path: &Path, max_bytes: u64) -> Result<File, Error> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    checked(file, path, max_bytes)
}

/// Read all of `path` if it is a regular file of at most `max_bytes` ([`open_regular`]); reading
/// stops at `max_bytes` even if the file grows meanwhile.
pub fn read_regular(path: &Path, max_bytes: u64) -> Result<Vec<u8>, Error> {
    let f = open_regular(path, max_bytes)?;
    let mut v = Vec::new();
    f.take(max_bytes.saturating_add(1)).read_to_end(&mut v)?;
    if v.len() as u64 > max_bytes {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("{} grew past the {max_bytes} bytes accepted while being read: refused", path.display()),
        ));
    }
    Ok(v)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_to_string(path: &Path, max_bytes: u64) -> Result<String, Error> {
    String::from_utf8(read_regular(path, max_bytes)?)
        .map_err(|_| Error::new(ErrorKind::InvalidData, format!("{} is not UTF-8 text", path.display())))
}

/// Open `path` below the directory `root` as if `root` were `/` (an absolute `path` is taken
/// relative to it), if it is a regular file of at most `max_bytes`. A `path` with a `..`
/// component is refused; symlinks on the way are resolved inside `root` (an absolute one from
/// `root`, as in a chroot), never out of it (`openat2` with `RESOLVE_IN_ROOT`; where the kernel
/// or a sandbox refuses `openat2`, symlinks are refused instead).
pub fn open_in_root(root: &Path, path: &Path, max_bytes: u64) -> Result<File, Error> {
    let shown = root.join(path.strip_prefix("/").unwrap_or(path));
    let refuse = |why: &str| Error::new(ErrorKind::InvalidInput, format!("{}: {why}", shown.display()));
    let mut rel = std::path::PathBuf::new();
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(n) => rel.push(n),
            Component::ParentDir => {
                return Err(refuse("a path with `..` is refused (it could lead out of the directory)"))
            }
            Component::Prefix(_) => return Err(refuse("not a Unix path")),
        }
    }
    if rel.as_os_str().is_empty() {
        return Err(refuse("names the directory itself"));
    }
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(root)
        .map_err(|e| Error::new(e.kind(), format!("{}: {e}", root.display())))?;
    let c_rel = std::ffi::CString::new(rel.as_os_str().as_bytes()).map_err(|_| refuse("the path holds a NUL byte"))?;
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: open_how is plain data; zeroed is a valid value that we then fill.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2 with a directory fd we own, a NUL-terminated path and an open_how of the
    // size given; the returned descriptor is owned by the File.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c_rel.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    } as i32;
    if fd >= 0 {
        return checked(unsafe { File::from_raw_fd(fd) }, &shown, max_bytes);
    }
    let err = Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOSYS) | Some(libc::EPERM) => {}
        Some(libc::EXDEV) => return Err(refuse("a symlink on the way leads out of the directory: refused")),
        _ => return Err(Error::new(err.kind(), format!("{}: {err}", shown.display()))),
    }
    // No openat2: one component at a time, symlinks refused.
    let mut cur = dir;
    let comps: Vec<_> = rel.components().collect();
    for (i, c) in comps.iter().enumerate() {
        let last = i + 1 == comps.len();
        let name = std::ffi::CString::new(c.as_os_str().as_bytes()).map_err(|_| refuse("the path holds a NUL byte"))?;
        let f = if last {
            flags | libc::O_NOFOLLOW
        } else {
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC
        };
        // SAFETY: openat on a directory fd we own with a NUL-terminated name.
        let fd = unsafe { libc::openat(cur.as_raw_fd(), name.as_ptr(), f) };
        if fd < 0 {
            let e = Error::last_os_error();
            if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
                return Err(refuse(
                    "a symlink on the way is refused (this kernel cannot resolve it inside the directory)",
                ));
            }
            return Err(Error::new(e.kind(), format!("{}: {e}", shown.display())));
        }
        // SAFETY: a descriptor just returned to us.
        cur = unsafe { File::from_raw_fd(fd) };
    }
    checked(cur, &shown, max_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("latscope-input-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let d = tmp("fifo");
        let fifo = d.join("f");
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open_regular(&fifo, 1 << 20).unwrap_err().to_string();
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
        let e = read_regular(Path::new("/dev/zero"), 1 << 20).unwrap_err().to_string();
        assert!(e.contains("/dev/zero is a character device"), "{e}");
        std::fs::write(d.join("big"), vec![0u8; 100]).unwrap();
        let e = read_regular(&d.join("big"), 99).unwrap_err().to_string();
        assert!(e.contains("is 100 bytes, more than the 99 accepted"), "{e}");
        assert_eq!(read_regular(&d.join("big"), 100).unwrap().len(), 100);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_path_below_a_root_stays_inside_it() {
        let d = tmp("root");
        let root = d.join("copy");
        std::fs::create_dir_all(root.join("usr/lib")).unwrap();
        std::fs::write(root.join("usr/lib/a.so"), b"inside").unwrap();
        std::fs::write(d.join("secret"), b"outside").unwrap();
        // The recorded absolute path is looked up below the root.
        let mut s = String::new();
        open_in_root(&root, Path::new("/usr/lib/a.so"), 1 << 20).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "inside");
        // `..` is refused.
        let e = open_in_root(&root, Path::new("/usr/../../secret"), 1 << 20).unwrap_err().to_string();
        assert!(e.contains("`..`"), "{e}");
        // An absolute symlink resolves inside the root (as in a chroot), not to the host's file.
        std::os::unix::fs::symlink(d.join("secret"), root.join("usr/lib/link.so")).unwrap();
        assert!(open_in_root(&root, Path::new("/usr/lib/link.so"), 1 << 20).is_err());
        std::os::unix::fs::symlink("/usr/lib/a.so", root.join("usr/lib/abs.so")).unwrap();
        let mut s = String::new();
        open_in_root(&root, Path::new("/usr/lib/abs.so"), 1 << 20).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "inside");
        // A relative symlink climbing out stays inside too.
        std::os::unix::fs::symlink("../../../secret", root.join("usr/lib/up.so")).unwrap();
        assert!(open_in_root(&root, Path::new("/usr/lib/up.so"), 1 << 20).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }
}

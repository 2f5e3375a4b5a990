//! The sandbox's own files (marker, trash), reached the way root must reach anything another
//! user may control: relative to a directory fd, never following a symlink, never blocking on a
//! FIFO, never opening a device, trusting only what the user running latscope owns, and
//! reading a bounded number of bytes.
//!
//! After `init --user U`, U owns the sandbox root and may put anything at these names: a
//! symlink to a directory elsewhere (root's init would then create and fill it), a FIFO (root's
//! next command would block on it), `/dev/zero` linked in (an endless read). Each such
//! refusal names what was found and what to do.

use crate::error::{ReplayError, Result};
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// The user whose files a sandbox command trusts: the one running it (root, usually).
pub(crate) fn me() -> (u32, u32) {
    // SAFETY: geteuid and getegid have no preconditions.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

fn owned(fd: i32) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful open and is owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// fstat of an fd.
pub(crate) fn fstat(fd: i32) -> std::io::Result<libc::stat> {
    // SAFETY: a zeroed stat is valid; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(errno());
    }
    Ok(st)
}

/// lstat of `name` in `dir` (not following a symlink); `None` if it does not exist.
pub(crate) fn lstat_at(dir: i32, name: &CStr) -> std::io::Result<Option<libc::stat>> {
    // SAFETY: a zeroed stat is valid; fstatat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, NUL-terminated name, valid pointer.
    if unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        let e = errno();
        return if e.raw_os_error() == Some(libc::ENOENT) { Ok(None) } else { Err(e) };
    }
    Ok(Some(st))
}

/// The target of symlink `name` in `dir` (at most 4 KiB of it).
pub(crate) fn readlink_at(dir: i32, name: &CStr) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: a buffer of buf.len() bytes, valid fd, NUL-terminated name.
    let n = unsafe { libc::readlinkat(dir, name.as_ptr(), buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if n < 0 {
        return Err(errno());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// What `st` is, in words, for messages: `a symlink (to /etc)`, `a FIFO`, `a directory owned by
/// uid 65534`, `a regular file writable by others (mode 0666)`.
pub(crate) fn describe(st: &libc::stat, dir: i32, name: &CStr) -> String {
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFLNK => {
            let t = readlink_at(dir, name).map(|t| String::from_utf8_lossy(&t).into_owned()).unwrap_or_default();
            return format!("a symbolic link (to {t:?})");
        }
        libc::S_IFIFO => "a FIFO",
        libc::S_IFSOCK => "a socket",
        libc::S_IFCHR | libc::S_IFBLK => "a device node",
        libc::S_IFDIR => "a directory",
        libc::S_IFREG => "a regular file",
        _ => "something of an unknown type",
    };
    let (uid, _) = me();
    let mut s = kind.to_string();
    if st.st_uid != uid {
        s += &format!(" owned by uid {}", st.st_uid);
    } else if st.st_mode & 0o022 != 0 {
        s += &format!(" writable by others (mode {:04o})", st.st_mode & 0o7777);
    }
    s
}

/// The refusal for `shown`: what was found instead of latscope's own `what`, and what to do.
pub(crate) fn refusal(shown: &Path, found: &str, what: &str) -> ReplayError {
    let (uid, _) = me();
    ReplayError::Sandbox(format!(
        "{} is {found}, where latscope keeps its own {what} (owned by uid {uid}): latscope did not put it there \
         (whoever owns the sandbox, e.g. the user of 'init --user', can), so it is not read, followed or moved; \
         look at it, remove it (rm -r {}) and run the command again",
        shown.display(),
        shown.display()
    ))
}

/// Reads `name` in `dir`, a regular file of at most `max` bytes owned by [`me`] with one link,
/// opened without following a symlink and without blocking (O_NONBLOCK: a FIFO put there does
/// not hang the reader). `None` if it does not exist; anything else is refused (`shown` names
/// it, `what` says what it should be).
pub(crate) fn read_own_file(dir: i32, name: &CStr, shown: &Path, what: &str, max: usize) -> Result<Option<Vec<u8>>> {
    let io = |e: std::io::Error| ReplayError::io(shown, e);
    // Looked at first, so that a device node or FIFO is never even opened.
    let Some(st) = lstat_at(dir, name).map_err(io)? else { return Ok(None) };
    let ok = |st: &libc::stat| {
        st.st_mode & libc::S_IFMT == libc::S_IFREG
            && st.st_uid == me().0
            && st.st_nlink == 1
            && st.st_size >= 0
            && st.st_size as u64 <= max as u64
    };
    if !ok(&st) {
        let mut found = describe(&st, dir, name);
        if st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_uid == me().0 {
            found = if st.st_nlink != 1 {
                format!("a file with {} hard links", st.st_nlink)
            } else {
                format!("a file of {} bytes (more than the {max} it may have)", st.st_size)
            };
        }
        return Err(refusal(shown, &found, what));
    }
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: valid fd and NUL-terminated name.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io(errno()));
    }
    let fd = owned(fd);
    // The file opened is the one looked at (not swapped meanwhile).
    let st2 = fstat(fd.as_raw_fd()).map_err(io)?;
    if !ok(&st2) || (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino) {
        return Err(refusal(shown, "a file that changed while it was opened", what));
    }
    let mut out = Vec::with_capacity(st2.st_size as usize);
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reading into a buffer of buf.len() bytes.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if n < 0 {
            let e = errno();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io(e));
        }
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n as usize]);
        if out.len() > max {
            return Err(refusal(shown, &format!("a file growing past {max} bytes"), what));
        }
    }
    Ok(Some(out))
}

/// Opens directory `name` in `dir` without following a symlink (read-only, for listing and as
/// a base for `*at` calls).
pub(crate) fn open_dir_at(dir: i32, name: &CStr) -> std::io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: valid fd and NUL-terminated name.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(errno());
    }
    Ok(owned(fd))
}

/// Opens a directory by absolute path (the operator's path up to the sandbox), following
/// symlinks in every component but the last unless `follow`.
pub(crate) fn open_dir_path(p: &str, follow: bool) -> Result<OwnedFd> {
    let c = CString::new(p).map_err(|_| ReplayError::Sandbox(format!("{p:?} holds a NUL byte")))?;
    let mut flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    // SAFETY: plain open of a NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(ReplayError::sys(format!("cannot open the sandbox directory {p}")));
    }
    Ok(owned(fd))
}

/// Directory `name` in `dir`, latscope's own: created (with `mode`) when missing and `create`,
/// else it must be a directory owned by [`me`] that nobody else can write. `None` if it is
/// missing and not created.
pub(crate) fn own_dir(
    dir: i32,
    name: &CStr,
    shown: &Path,
    what: &str,
    mode: u32,
    create: bool,
) -> Result<Option<OwnedFd>> {
    let io = |e: std::io::Error| ReplayError::io(shown, e);
    let mut made = false;
    if create {
        // SAFETY: valid fd and NUL-terminated name.
        if unsafe { libc::mkdirat(dir, name.as_ptr(), mode) } == 0 {
            made = true;
        } else if errno().raw_os_error() != Some(libc::EEXIST) {
            return Err(io(errno()));
        }
    }
    let Some(st) = lstat_at(dir, name).map_err(io)? else {
        return if create { Err(io(std::io::ErrorKind::NotFound.into())) } else { Ok(None) };
    };
    let safe = |st: &libc::stat| {
        st.st_mode & libc::S_IFMT == libc::S_IFDIR && st.st_uid == me().0 && (made || st.st_mode & 0o022 == 0)
    };
    if !safe(&st) {
        return Err(refusal(shown, &describe(&st, dir, name), what));
    }
    let fd = open_dir_at(dir, name).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP | libc::ENOTDIR) => refusal(shown, "something that changed while it was opened", what),
        _ => io(e),
    })?;
    let st2 = fstat(fd.as_raw_fd()).map_err(io)?;
    if !safe(&st2) || (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino) {
        return Err(refusal(shown, "something that changed while it was opened", what));
    }
    if made {
        // The mode asked for, whatever the umask.
        // SAFETY: fchmod on our fd.
        unsafe { libc::fchmod(fd.as_raw_fd(), mode) };
    }
    Ok(Some(fd))
}

/// Writes `name` in `dir` whole or not at all: a new file (never through a link or onto a FIFO
/// put at its name), synced, renamed over the old one.
pub(crate) fn write_file_at(dir: i32, name: &CStr, shown: &Path, bytes: &[u8]) -> Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let io = |e: std::io::Error| ReplayError::io(shown, e);
    let tmp = CString::new(format!(
        "{}.new-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
    .map_err(|e| io(std::io::Error::other(e)))?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: valid fd and NUL-terminated name.
    let fd = unsafe { libc::openat(dir, tmp.as_ptr(), flags, 0o644 as libc::c_uint) };
    if fd < 0 {
        return Err(io(errno()));
    }
    let fd = owned(fd);
    let unlink = || {
        // SAFETY: removing the name we created.
        unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
    };
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: writing from a buffer of rest.len() bytes.
        let n = unsafe { libc::write(fd.as_raw_fd(), rest.as_ptr() as *const libc::c_void, rest.len()) };
        if n <= 0 {
            let e = if n < 0 { errno() } else { std::io::ErrorKind::WriteZero.into() };
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            unlink();
            return Err(io(e));
        }
        rest = &rest[n as usize..];
    }
    // SAFETY: fchmod and fsync on our fd; renameat of names in our directory fd.
    unsafe {
        libc::fchmod(fd.as_raw_fd(), 0o644);
        if libc::fsync(fd.as_raw_fd()) != 0 || libc::renameat(dir, tmp.as_ptr(), dir, name.as_ptr()) != 0 {
            let e = errno();
            unlink();
            return Err(io(e));
        }
    }
    Ok(())
}

/// The names in directory `dir` (without `.` and `..`), read through a description of its own.
pub(crate) fn names(dir: i32) -> std::io::Result<Vec<CString>> {
    let fd = open_dir_at(dir, c".")?;
    // SAFETY: fdopendir takes over the fd (released from the OwnedFd); closedir closes it.
    let d = unsafe { libc::fdopendir(std::os::fd::IntoRawFd::into_raw_fd(fd)) };
    if d.is_null() {
        return Err(errno());
    }
    let mut out = Vec::new();
    loop {
        // SAFETY: d is an open DIR stream; readdir returns null at the end (errno unchanged).
        let e = unsafe { libc::readdir(d) };
        if e.is_null() {
            break;
        }
        // SAFETY: d_name is NUL-terminated inside the entry readdir returned.
        let n = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) };
        if n != c"." && n != c".." {
            out.push(n.to_owned());
        }
    }
    // SAFETY: closing the stream we opened.
    unsafe { libc::closedir(d) };
    Ok(out)
}

/// `name` as a C string (paths from a spec are validated: no NUL byte).
pub(crate) fn cname(name: &str) -> CString {
    CString::new(name).unwrap_or_else(|_| CString::from(c"_"))
}

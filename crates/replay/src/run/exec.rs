//! One operation, performed: the system call, with real fds from the slots and paths resolved
//! beneath the sandbox roots. Returns the result as the recording stores it (`-errno` on
//! failure). No allocation: buffers belong to the worker, paths to the plan.

use super::Shared;
use crate::op::{Op, OpKind, NONE};
use crate::sys::{self, openat2, ret, RESOLVE_SANDBOX};
use std::ffi::CStr;
use std::sync::atomic::Ordering;

const AT_SYMLINK_NOFOLLOW: u32 = libc::AT_SYMLINK_NOFOLLOW as u32;
/// Open flags openat2 accepts (it refuses unknown bits, which a recording may carry).
const VALID_OPEN_FLAGS: u64 = (libc::O_ACCMODE
    | libc::O_CREAT
    | libc::O_EXCL
    | libc::O_NOCTTY
    | libc::O_TRUNC
    | libc::O_APPEND
    | libc::O_NONBLOCK
    | libc::O_DSYNC
    | libc::O_SYNC
    | libc::O_DIRECT
    | libc::O_LARGEFILE
    | libc::O_DIRECTORY
    | libc::O_NOFOLLOW
    | libc::O_NOATIME
    | libc::O_CLOEXEC
    | libc::O_PATH
    | libc::O_TMPFILE) as u64;
const MAP_FLAGS: u32 = (libc::MAP_SHARED
    | libc::MAP_PRIVATE
    | libc::MAP_SHARED_VALIDATE
    | libc::MAP_POPULATE
    | libc::MAP_NORESERVE
    | libc::MAP_NONBLOCK
    | libc::MAP_SYNC) as u32;

/// `/proc/self/fd/N` (NUL-terminated) into `out`; its length with the NUL.
fn proc_fd_name(fd: i32, out: &mut [u8; 32]) -> usize {
    use std::io::Write;
    let mut c = std::io::Cursor::new(&mut out[..]);
    let _ = write!(c, "/proc/self/fd/{fd}\0");
    c.position() as usize
}

/// Why an operation could not be attempted.
pub(crate) enum NotDone {
    /// Its fd slot holds no fd.
    NoFd,
    /// Its mapping does not exist.
    NoMapping,
    /// It would change an extended attribute the policy leaves alone.
    Privileged,
}

/// A worker's private state for performing operations.
pub(crate) struct Worker<'a> {
    pub sh: &'a Shared<'a>,
    /// Read buffer (aligned, as large as the plan's largest read).
    pub buf: &'a mut [u8],
    /// Cached parent directory fds: (path id, generation, fd).
    dirs: Vec<(u32, u64, i32)>,
    /// Bytes written through the last msync (counted as written).
    pub msync_bytes: u64,
    /// The last operation was a clone the sandbox's file system could not make, done as a copy.
    pub clone_copied: bool,
}

const DIR_CACHE: usize = 64;

impl<'a> Worker<'a> {
    pub fn new(sh: &'a Shared<'a>, buf: &'a mut [u8]) -> Worker<'a> {
        Worker { sh, buf, dirs: vec![(NONE, 0, -1); DIR_CACHE], msync_bytes: 0, clone_copied: false }
    }

    #[inline]
    fn fd(&self, slot: u32) -> Result<i32, NotDone> {
        let fd = self.sh.slots[slot as usize].load(Ordering::Relaxed);
        if fd < 0 {
            Err(NotDone::NoFd)
        } else {
            Ok(fd)
        }
    }

    #[inline]
    fn root(&self, path: u32) -> i32 {
        self.sh.roots[self.sh.paths.root(path)]
    }

    /// The directory `path` is in, as an fd (cached; looked up again after a directory
    /// rename or removal anywhere); `Err(-errno)` if it cannot be resolved.
    fn parent(&mut self, path: u32) -> Result<i32, i64> {
        let parent = self.sh.paths.parent(path);
        if parent == NONE {
            return Ok(self.root(path));
        }
        let gen = self.sh.dir_gen.load(Ordering::Acquire);
        let i = parent as usize % DIR_CACHE;
        let (p, g, fd) = self.dirs[i];
        if p == parent && g == gen {
            return Ok(fd);
        }
        if fd >= 0 {
            // SAFETY: closing a directory fd this worker opened.
            unsafe { libc::close(fd) };
        }
        let r = openat2(
            self.root(path),
            self.sh.paths.rel(parent),
            (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
            0,
            RESOLVE_SANDBOX,
        );
        if r < 0 {
            self.dirs[i] = (NONE, 0, -1);
            return Err(r);
        }
        self.dirs[i] = (parent, gen, r as i32);
        Ok(r as i32)
    }

    /// An O_PATH fd of `path` itself, following a final symlink (inside the sandbox) unless
    /// `nofollow`.
    fn opath(&self, path: u32, nofollow: bool) -> i64 {
        let mut fl = libc::O_PATH | libc::O_CLOEXEC;
        if nofollow {
            fl |= libc::O_NOFOLLOW;
        }
        openat2(self.root(path), self.sh.paths.rel(path), fl as u64, 0, RESOLVE_SANDBOX)
    }

    /// Drop cached directory fds (at the end).
    pub fn close_dirs(&mut self) {
        for d in &mut self.dirs {
            if d.2 >= 0 {
                // SAFETY: closing a directory fd this worker opened.
                unsafe { libc::close(d.2) };
            }
            *d = (NONE, 0, -1);
        }
    }

    /// Perform `op`.
    pub fn exec(&mut self, op: &Op) -> Result<i64, NotDone> {
        use OpKind::*;
        let sh = self.sh;
        let bufp = self.buf.as_mut_ptr() as *mut libc::c_void;
        let size = op.size as usize;
        // SAFETY (every call below): plain system calls on fds the replay owns, buffers of at
        // least `size` bytes (the read buffer holds the plan's largest read, the pattern its
        // largest write), and NUL-terminated paths from the plan.
        let r: i64 = unsafe {
            match op.kind {
                Wait => 0,
                Open => {
                    let mut flags = op.flags as u64 & VALID_OPEN_FLAGS | libc::O_CLOEXEC as u64;
                    if op.flags & libc::O_CREAT as u32 == 0
                        && op.flags & libc::O_TMPFILE as u32 != libc::O_TMPFILE as u32
                    {
                        flags &= !(libc::O_CREAT as u64);
                    }
                    let creates = flags & (libc::O_CREAT as u64) != 0
                        || flags & (libc::O_TMPFILE as u64) == libc::O_TMPFILE as u64;
                    let mode = if creates { (op.mode & crate::init::SAFE_MODE) as u64 } else { 0 };
                    // A file hard-linked from outside is refused before the run (sandbox::check_tree):
                    // a check here would add calls the recording did not make.
                    let r = openat2(self.root(op.path), sh.paths.rel(op.path), flags, mode, RESOLVE_SANDBOX);
                    if r >= 0 && op.slot2 != NONE {
                        sh.slots[op.slot2 as usize].store(r as i32, Ordering::Relaxed);
                    } else if r >= 0 {
                        libc::close(r as i32);
                    }
                    r
                }
                Close => {
                    let fd = self.fd(op.slot)?;
                    sh.slots[op.slot as usize].store(-1, Ordering::Relaxed);
                    if op.has(Op::IMPLICIT) {
                        // The kernel's own close (exec, exit): a distinct call, so that a
                        // recording of the replay tells it from the program's closes.
                        ret(libc::syscall(libc::SYS_close_range, fd as u32, fd as u32, 0))
                    } else {
                        ret(libc::close(fd) as i64)
                    }
                }
                Read => ret(libc::read(self.fd(op.slot)?, bufp, size) as i64),
                Pread => ret(libc::pread(self.fd(op.slot)?, bufp, size, op.off) as i64),
                Readv => {
                    let iov = libc::iovec { iov_base: bufp, iov_len: size };
                    ret(libc::readv(self.fd(op.slot)?, &iov, 1) as i64)
                }
                Preadv => {
                    let iov = libc::iovec { iov_base: bufp, iov_len: size };
                    ret(libc::preadv(self.fd(op.slot)?, &iov, 1, op.off) as i64)
                }
                Write | Pwrite | Writev | Pwritev => {
                    let fd = self.fd(op.slot)?;
                    let data = sh.pattern.at(op.off.max(0) as u64, size);
                    let p = data.as_ptr() as *const libc::c_void;
                    let iov = libc::iovec { iov_base: p as *mut libc::c_void, iov_len: data.len() };
                    match op.kind {
                        Write => ret(libc::write(fd, p, data.len()) as i64),
                        Pwrite => ret(libc::pwrite(fd, p, data.len(), op.off) as i64),
                        Writev => ret(libc::writev(fd, &iov, 1) as i64),
                        _ => ret(libc::pwritev(fd, &iov, 1, op.off) as i64),
                    }
                }
                Lseek => ret(libc::lseek(self.fd(op.slot)?, op.off, op.flags as i32)),
                Fsync => ret(libc::fsync(self.fd(op.slot)?) as i64),
                Fdatasync => ret(libc::fdatasync(self.fd(op.slot)?) as i64),
                SyncFileRange => ret(libc::sync_file_range(self.fd(op.slot)?, op.off, op.size as i64, op.flags) as i64),
                Syncfs => {
                    if op.slot == NONE {
                        let mut r = 0;
                        for &fd in sh.roots {
                            r = r.min(ret(libc::syncfs(fd) as i64));
                        }
                        r
                    } else {
                        ret(libc::syncfs(self.fd(op.slot)?) as i64)
                    }
                }
                Ftruncate => ret(libc::ftruncate(self.fd(op.slot)?, op.size as i64) as i64),
                Truncate => {
                    let fd = openat2(
                        self.root(op.path),
                        sh.paths.rel(op.path),
                        (libc::O_WRONLY | libc::O_CLOEXEC) as u64,
                        0,
                        RESOLVE_SANDBOX,
                    );
                    if fd < 0 {
                        fd
                    } else {
                        let r = ret(libc::ftruncate(fd as i32, op.size as i64) as i64);
                        libc::close(fd as i32);
                        r
                    }
                }
                Fallocate => ret(libc::fallocate(self.fd(op.slot)?, op.mode as i32, op.off, op.size as i64) as i64),
                Fadvise => {
                    let r = libc::posix_fadvise(self.fd(op.slot)?, op.off, op.size as i64, op.flags as i32);
                    if r > 0 {
                        -(r as i64)
                    } else {
                        0
                    }
                }
                Readahead => ret(libc::readahead(self.fd(op.slot)?, op.off, size) as i64),
                Fstat | Fchmod | Fchown | Futimens if op.has(Op::PROC_FD) => {
                    let fd = self.fd(op.slot)?;
                    let mut name = [0u8; 32];
                    let n = proc_fd_name(fd, &mut name);
                    let p = CStr::from_bytes_with_nul(&name[..n]).unwrap_or(c".");
                    let nofollow = (op.flags & AT_SYMLINK_NOFOLLOW) as i32;
                    match op.kind {
                        Fstat => self.stat_at(libc::AT_FDCWD, p, op.flags & AT_SYMLINK_NOFOLLOW, op),
                        Fchmod => ret(libc::chmod(p.as_ptr(), op.mode & crate::init::SAFE_MODE) as i64),
                        Fchown => ret(libc::fchownat(libc::AT_FDCWD, p.as_ptr(), u32::MAX, u32::MAX, nofollow) as i64),
                        _ => ret(libc::utimensat(libc::AT_FDCWD, p.as_ptr(), std::ptr::null(), nofollow) as i64),
                    }
                }
                Fstat => {
                    let fd = self.fd(op.slot)?;
                    self.stat_at(fd, c"", libc::AT_EMPTY_PATH as u32, op)
                }
                Stat => {
                    let nofollow = op.flags & AT_SYMLINK_NOFOLLOW != 0;
                    match self.parent(op.path) {
                        Err(e) => e,
                        Ok(dir) => {
                            let r = self.stat_at(dir, sh.paths.base(op.path), AT_SYMLINK_NOFOLLOW, op);
                            let is_link = r == 0 && self.last_stat_was_link(op);
                            if nofollow || !is_link {
                                r
                            } else {
                                // A symlink, followed beneath the sandbox.
                                let fd = self.opath(op.path, false);
                                if fd < 0 {
                                    fd
                                } else {
                                    let r = self.stat_at(fd as i32, c"", libc::AT_EMPTY_PATH as u32, op);
                                    libc::close(fd as i32);
                                    r
                                }
                            }
                        }
                    }
                }
                Access => self.on_opath(op, |fd| {
                    let fl = libc::AT_EMPTY_PATH | (op.flags as i32 & libc::AT_EACCESS);
                    ret(libc::syscall(libc::SYS_faccessat2, fd, c"".as_ptr(), op.mode as i32, fl))
                }),
                Statfs => self.on_opath(op, |fd| {
                    let mut st: libc::statfs = std::mem::zeroed();
                    ret(libc::fstatfs(fd, &mut st) as i64)
                }),
                Fstatfs => {
                    let mut st: libc::statfs = std::mem::zeroed();
                    ret(libc::fstatfs(self.fd(op.slot)?, &mut st) as i64)
                }
                Mkdir => match self.parent(op.path) {
                    Err(e) => e,
                    Ok(d) => {
                        ret(libc::mkdirat(d, sh.paths.base(op.path).as_ptr(), op.mode & crate::init::SAFE_MODE) as i64)
                    }
                },
                Rmdir | Unlink => match self.parent(op.path) {
                    Err(e) => e,
                    Ok(d) => {
                        let fl = if op.kind == Rmdir { libc::AT_REMOVEDIR } else { 0 };
                        let r = ret(libc::unlinkat(d, sh.paths.base(op.path).as_ptr(), fl) as i64);
                        if op.has(Op::DIR_NS) {
                            sh.dir_gen.fetch_add(1, Ordering::Release);
                        }
                        r
                    }
                },
                Rename | Link => {
                    let d1 = match self.parent(op.path) {
                        Ok(d) => d,
                        Err(e) => return Ok(e),
                    };
                    let d2 = match self.parent(op.path2) {
                        Ok(d) => d,
                        Err(e) => return Ok(e),
                    };
                    let (b1, b2) = (sh.paths.base(op.path).as_ptr(), sh.paths.base(op.path2).as_ptr());
                    let r = if op.kind == Rename {
                        ret(libc::syscall(libc::SYS_renameat2, d1, b1, d2, b2, op.flags))
                    } else {
                        ret(libc::linkat(d1, b1, d2, b2, 0) as i64)
                    };
                    if op.has(Op::DIR_NS) {
                        sh.dir_gen.fetch_add(1, Ordering::Release);
                    }
                    r
                }
                Symlink => match self.parent(op.path) {
                    Err(e) => e,
                    Ok(d) => {
                        ret(libc::symlinkat(sh.paths.literal(op.path2).as_ptr(), d, sh.paths.base(op.path).as_ptr())
                            as i64)
                    }
                },
                Readlink => match self.parent(op.path) {
                    Err(e) => e,
                    Ok(d) => {
                        ret(libc::readlinkat(d, sh.paths.base(op.path).as_ptr(), bufp as *mut libc::c_char, size)
                            as i64)
                    }
                },
                Chmod => {
                    if op.flags & AT_SYMLINK_NOFOLLOW != 0 {
                        match self.parent(op.path) {
                            Err(e) => e,
                            Ok(d) => ret(libc::syscall(
                                libc::SYS_fchmodat2,
                                d,
                                sh.paths.base(op.path).as_ptr(),
                                op.mode & crate::init::SAFE_MODE,
                                libc::AT_SYMLINK_NOFOLLOW,
                            )),
                        }
                    } else {
                        self.on_opath(op, |fd| {
                            ret(libc::syscall(
                                libc::SYS_fchmodat2,
                                fd,
                                c"".as_ptr(),
                                op.mode & crate::init::SAFE_MODE,
                                libc::AT_EMPTY_PATH,
                            ))
                        })
                    }
                }
                Fchmod if op.has(Op::AT_FORM) => ret(libc::syscall(
                    libc::SYS_fchmodat2,
                    self.fd(op.slot)?,
                    c"".as_ptr(),
                    op.mode & crate::init::SAFE_MODE,
                    libc::AT_EMPTY_PATH,
                )),
                Fchmod => ret(libc::fchmod(self.fd(op.slot)?, op.mode & crate::init::SAFE_MODE) as i64),
                Chown | Utimens => {
                    let nofollow = op.flags & AT_SYMLINK_NOFOLLOW != 0;
                    let fd = self.opath(op.path, nofollow);
                    if fd < 0 {
                        fd
                    } else {
                        let fd = fd as i32;
                        let r = if op.kind == Chown {
                            ret(libc::fchownat(fd, c"".as_ptr(), u32::MAX, u32::MAX, libc::AT_EMPTY_PATH) as i64)
                        } else {
                            ret(libc::utimensat(fd, c"".as_ptr(), std::ptr::null(), libc::AT_EMPTY_PATH) as i64)
                        };
                        libc::close(fd);
                        r
                    }
                }
                Fchown if op.has(Op::AT_FORM) => {
                    let fd = self.fd(op.slot)?;
                    ret(libc::fchownat(fd, c"".as_ptr(), u32::MAX, u32::MAX, libc::AT_EMPTY_PATH) as i64)
                }
                Fchown => ret(libc::fchown(self.fd(op.slot)?, u32::MAX, u32::MAX) as i64),
                Futimens if op.has(Op::AT_FORM) => {
                    ret(libc::utimensat(self.fd(op.slot)?, c"".as_ptr(), std::ptr::null(), libc::AT_EMPTY_PATH) as i64)
                }
                Futimens => ret(libc::futimens(self.fd(op.slot)?, std::ptr::null()) as i64),
                CopyRange | Sendfile | Ficlone => {
                    let (out, inp) = (self.fd(op.slot)?, self.fd(op.slot2)?);
                    let mut off_in = op.off2();
                    let in_ptr: *mut i64 = if off_in >= 0 { &mut off_in } else { std::ptr::null_mut() };
                    match op.kind {
                        CopyRange => {
                            let mut off_out = op.off;
                            let out_ptr: *mut i64 = if off_out >= 0 { &mut off_out } else { std::ptr::null_mut() };
                            ret(libc::copy_file_range(inp, in_ptr, out, out_ptr, size, 0) as i64)
                        }
                        Sendfile => ret(libc::sendfile(out, inp, in_ptr, size) as i64),
                        _ => self.ficlone(op, out, inp),
                    }
                }
                Mknod => match self.parent(op.path) {
                    Err(e) => e,
                    Ok(d) => {
                        let mode = op.mode & (libc::S_IFMT | crate::init::SAFE_MODE);
                        ret(libc::mknodat(d, sh.paths.base(op.path).as_ptr(), mode, 0) as i64)
                    }
                },
                LinkFd => {
                    let fd = self.fd(op.slot)?;
                    match self.parent(op.path) {
                        Err(e) => e,
                        Ok(d) => {
                            let base = sh.paths.base(op.path).as_ptr();
                            let r = ret(libc::linkat(fd, c"".as_ptr(), d, base, libc::AT_EMPTY_PATH) as i64);
                            if r == -(libc::EPERM as i64) || r == -(libc::ENOENT as i64) {
                                // AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH: the way programs
                                // without it link an O_TMPFILE file.
                                let mut name = [0u8; 32];
                                let n = proc_fd_name(fd, &mut name);
                                ret(libc::linkat(
                                    libc::AT_FDCWD,
                                    name[..n].as_ptr() as *const libc::c_char,
                                    d,
                                    base,
                                    libc::AT_SYMLINK_FOLLOW,
                                ) as i64)
                            } else {
                                r
                            }
                        }
                    }
                }
                Unreplayed => -(libc::ENOTSUP as i64),
                Getxattr | Setxattr | Listxattr | Removexattr => self.xattr(op, bufp)?,
                Getdents => ret(libc::syscall(libc::SYS_getdents64, self.fd(op.slot)?, bufp, size)),
                Dup => {
                    let old = self.fd(op.slot)?;
                    let r = if op.path != NONE && sh.slots[op.path as usize].load(Ordering::Relaxed) >= 0 {
                        // dup2 onto an fd the recording had open: replaces it atomically.
                        let target = sh.slots[op.path as usize].swap(-1, Ordering::Relaxed);
                        let fl = op.flags as i32 & libc::O_CLOEXEC;
                        ret(libc::dup3(old, target, fl) as i64)
                    } else if op.has(Op::IMPLICIT) {
                        // Inheritance over fork: a distinct call (see close).
                        ret(libc::fcntl(old, libc::F_DUPFD_CLOEXEC, 0) as i64)
                    } else {
                        ret(libc::dup(old) as i64)
                    };
                    if r >= 0 && op.slot2 != NONE {
                        sh.slots[op.slot2 as usize].store(r as i32, Ordering::Relaxed);
                    }
                    r
                }
                Fcntl => {
                    let fd = self.fd(op.slot)?;
                    let r = ret(libc::fcntl(fd, op.flags as i32, op.mode as libc::c_int) as i64);
                    // The replay's own fds stay close-on-exec whatever the recording set.
                    if op.flags as i32 == libc::F_SETFD {
                        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                    }
                    r
                }
                Mmap => {
                    let fd = self.fd(op.slot)?;
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        size,
                        op.mode as i32,
                        (op.flags & MAP_FLAGS) as i32,
                        fd,
                        op.off,
                    );
                    if p == libc::MAP_FAILED {
                        sys::neg_errno()
                    } else {
                        sh.maps[op.slot2 as usize].store(p as usize, Ordering::Relaxed);
                        sh.map_off[op.slot2 as usize].store(op.off.max(0) as u64, Ordering::Relaxed);
                        p as i64
                    }
                }
                Munmap => {
                    let base = sh.maps[op.slot2 as usize].load(Ordering::Relaxed);
                    if base == 0 {
                        return Err(NotDone::NoMapping);
                    }
                    if op.has(Op::NOOP) {
                        0
                    } else {
                        let r = ret(libc::munmap((base + op.off as usize) as *mut libc::c_void, size) as i64);
                        if op.off == 0 && r == 0 && op.has(Op::IMPLICIT) {
                            sh.maps[op.slot2 as usize].store(0, Ordering::Relaxed);
                        }
                        r
                    }
                }
                Msync => {
                    let base = sh.maps[op.slot2 as usize].load(Ordering::Relaxed);
                    if base == 0 {
                        return Err(NotDone::NoMapping);
                    }
                    let addr = base + op.off as usize;
                    // The stores the program made before syncing (not recorded), with generated
                    // data; never after a divergence, which could leave the file shorter than the
                    // mapping (a store there would fault).
                    let dirty = op.mode as usize;
                    if dirty > 0 && !sh.diverged.load(Ordering::Relaxed) {
                        let file_off = sh.map_off[op.slot2 as usize].load(Ordering::Relaxed) + op.off as u64;
                        let src = sh.pattern.at(file_off, dirty);
                        std::ptr::copy_nonoverlapping(src.as_ptr(), addr as *mut u8, src.len());
                        self.msync_bytes += src.len() as u64;
                    }
                    ret(libc::msync(addr as *mut libc::c_void, size, op.flags as i32) as i64)
                }
            }
        };
        Ok(r)
    }

    /// FICLONE / FICLONERANGE as recorded; a clone the recording made that the sandbox's file
    /// system cannot make (no reflinks, another file system) is done as a copy of the same
    /// bytes, and said ([`Worker::clone_copied`]).
    unsafe fn ficlone(&mut self, op: &Op, out: i32, inp: i32) -> i64 {
        const FICLONE: u64 = 0x4004_9409;
        let r = if op.flags as u64 == FICLONE {
            ret(libc::ioctl(out, FICLONE as _, inp) as i64)
        } else {
            // struct file_clone_range { s64 src_fd; u64 src_offset, src_length, dest_offset; }
            let arg: [u64; 4] = [inp as u64, op.off2() as u64, op.size, op.off as u64];
            ret(libc::ioctl(out, op.flags as _, arg.as_ptr()) as i64)
        };
        let cannot = [libc::EOPNOTSUPP, libc::EXDEV, libc::EINVAL, libc::ENOTTY, libc::EBADF];
        if op.ret < 0 || r >= 0 || !cannot.iter().any(|&e| r == -(e as i64)) {
            return r;
        }
        self.clone_copied = true;
        let (mut from, mut to, len) = if op.flags as u64 == FICLONE {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(inp, &mut st) != 0 {
                return sys::neg_errno();
            }
            // A whole-file clone replaces the destination's contents.
            if libc::ftruncate(out, 0) != 0 {
                return sys::neg_errno();
            }
            (0i64, 0i64, st.st_size as u64)
        } else {
            let len = if op.size == 0 {
                let mut st: libc::stat = std::mem::zeroed();
                if libc::fstat(inp, &mut st) != 0 {
                    return sys::neg_errno();
                }
                (st.st_size as u64).saturating_sub(op.off2() as u64)
            } else {
                op.size
            };
            (op.off2(), op.off, len)
        };
        let mut left = len;
        while left > 0 {
            let n = libc::copy_file_range(inp, &mut from, out, &mut to, left as usize, 0);
            if n < 0 {
                return sys::neg_errno();
            }
            if n == 0 {
                break;
            }
            left -= n as u64;
        }
        0
    }

    /// An extended-attribute call on the slot's fd or, for a path, through
    /// `/proc/self/fd/N` of an `O_PATH` fd resolved beneath the sandbox (there is no `*at`
    /// form before Linux 6.13; the magic link leads to the file itself, a symlink for the `l`
    /// variants).
    unsafe fn xattr(&self, op: &Op, bufp: *mut libc::c_void) -> Result<i64, NotDone> {
        if op.kind == OpKind::Setxattr && !self.sh.xattr_ok.get(op.path2 as usize).copied().unwrap_or(false) {
            return Err(NotDone::Privileged);
        }
        let name = self.sh.paths.literal(op.path2).as_ptr();
        let size = op.size as usize;
        // The recorded value, else generated bytes of its size.
        let value = match op.off {
            v if op.kind == OpKind::Setxattr && v >= 0 => &self.sh.values[v as usize][..],
            _ => self.sh.pattern.at(0, size),
        };
        let vp = value.as_ptr() as *const libc::c_void;
        if op.slot != NONE {
            let fd = self.fd(op.slot)?;
            return Ok(match op.kind {
                OpKind::Getxattr => ret(libc::fgetxattr(fd, name, bufp, size) as i64),
                OpKind::Setxattr => ret(libc::fsetxattr(fd, name, vp, value.len(), op.flags as i32) as i64),
                OpKind::Listxattr => ret(libc::flistxattr(fd, bufp as *mut libc::c_char, size) as i64),
                _ => ret(libc::fremovexattr(fd, name) as i64),
            });
        }
        let fd = self.opath(op.path, op.mode & 1 != 0);
        if fd < 0 {
            return Ok(fd);
        }
        let mut buf = [0u8; 32];
        let n = proc_fd_name(fd as i32, &mut buf);
        let p = buf[..n].as_ptr() as *const libc::c_char;
        let r = match op.kind {
            OpKind::Getxattr => ret(libc::getxattr(p, name, bufp, size) as i64),
            OpKind::Setxattr => ret(libc::setxattr(p, name, vp, value.len(), op.flags as i32) as i64),
            OpKind::Listxattr => ret(libc::listxattr(p, bufp as *mut libc::c_char, size) as i64),
            _ => ret(libc::removexattr(p, name) as i64),
        };
        libc::close(fd as i32);
        Ok(r)
    }

    /// newfstatat or statx at (`dir`, `name`) into the worker's buffer.
    unsafe fn stat_at(&mut self, dir: i32, name: &CStr, flags: u32, op: &Op) -> i64 {
        let b = self.buf.as_mut_ptr();
        if op.has(Op::STATX) {
            let mask = if op.mode == 0 { libc::STATX_BASIC_STATS } else { op.mode };
            ret(libc::statx(dir, name.as_ptr(), flags as i32, mask, b as *mut libc::statx) as i64)
        } else {
            ret(libc::fstatat(dir, name.as_ptr(), b as *mut libc::stat, flags as i32) as i64)
        }
    }

    /// Whether the stat just made (into the buffer) found a symlink.
    fn last_stat_was_link(&self, op: &Op) -> bool {
        let b = self.buf.as_ptr();
        // SAFETY: the buffer holds the struct the last stat filled (it is at least a page).
        let mode = unsafe {
            if op.has(Op::STATX) {
                (*(b as *const libc::statx)).stx_mode as u32
            } else {
                (*(b as *const libc::stat)).st_mode
            }
        };
        mode & libc::S_IFMT == libc::S_IFLNK
    }

    /// `f` on an O_PATH fd of the operation's path (following a final symlink beneath the
    /// sandbox unless AT_SYMLINK_NOFOLLOW).
    fn on_opath(&self, op: &Op, f: impl FnOnce(i32) -> i64) -> i64 {
        let fd = self.opath(op.path, op.flags & AT_SYMLINK_NOFOLLOW != 0);
        if fd < 0 {
            return fd;
        }
        let r = f(fd as i32);
        // SAFETY: closing the fd just opened.
        unsafe { libc::close(fd as i32) };
        r
    }
}

//! Syscall names and argument layouts (x86_64).
//!
//! The layout table says, per syscall, which argument is the fd, the path, the
//! byte count, the offset, ... The probe loads it into a BPF map so that the
//! kernel side stays generic, and user space uses it to interpret events: one
//! table for both sides.

use std::sync::OnceLock;

/// Argument index meaning "this syscall has no such argument".
pub const NONE: u8 = 0xff;

/// Which syscalls a recording or a live view traces, as users choose them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SyscallSet {
    /// Every syscall.
    #[default]
    All,
    /// Those a replay of file I/O needs: they take, create or return a file descriptor, take a path,
    /// change the fd table, or sync ([`SysDesc::is_io_related`]).
    Io,
    /// No syscalls (block requests and process events only).
    None,
}

impl SyscallSet {
    /// The name stored in the trace header (`all`, `io`, `none`).
    pub fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Io => "io",
            Self::None => "none",
        }
    }

    /// Parse a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "all" => Some(Self::All),
            "io" => Some(Self::Io),
            "none" => Some(Self::None),
            _ => None,
        }
    }
}

/// Broad purpose of a syscall, for split views and `evt.is_io`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum SysClass {
    /// Not classified.
    #[default]
    Other = 0,
    /// Reads data (read, pread64, recvfrom, ...).
    Read = 1,
    /// Writes data (write, pwrite64, sendto, ...).
    Write = 2,
    /// File and directory metadata and namespace (open, stat, rename, ...).
    FileMeta = 3,
    /// Socket management (socket, connect, accept, ...).
    Net = 4,
    /// Sleeping and waiting (nanosleep, poll, epoll_wait, futex, wait4, ...).
    Wait = 5,
    /// Memory management (mmap, munmap, brk, ...).
    Memory = 6,
    /// Processes, threads and signals.
    Process = 7,
    /// Syncing data to storage (fsync, fdatasync, sync_file_range, msync).
    Sync = 8,
}

impl SysClass {
    /// Name used in output and `--by class`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Other => "other",
            Self::Read => "read",
            Self::Write => "write",
            Self::FileMeta => "file-meta",
            Self::Net => "net",
            Self::Wait => "wait",
            Self::Memory => "memory",
            Self::Process => "process",
            Self::Sync => "sync",
        }
    }
}

/// Which arguments of a syscall mean what (indices 0-5, or [`NONE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SysDesc {
    /// The fd argument.
    pub fd: u8,
    /// The directory fd of the first path (`*at` calls).
    pub dirfd: u8,
    /// The first path.
    pub path: u8,
    /// The directory fd of the second path.
    pub dirfd2: u8,
    /// The second path.
    pub path2: u8,
    /// The byte count (or the iovec pointer when [`SysDesc::IOV`] is set).
    pub count: u8,
    /// The file offset in the file of `fd` (or a pointer to it when [`SysDesc::OFF_PTR`] is set).
    pub off: u8,
    /// The file offset in the file of the second fd `addr` (a pointer to it when
    /// [`SysDesc::OFF_PTR`] is set): the input of sendfile, splice, copy_file_range.
    pub off2: u8,
    /// Flags (open flags, at-flags, lseek whence, mmap flags, fcntl command, clone flags, ...).
    pub flags: u8,
    /// Mode (open mode, mmap prot, access mode, fcntl argument, socket type).
    pub mode: u8,
    /// An address (mmap, munmap, msync), a second fd ([`SysDesc::ADDR_FD`]), or the user
    /// pointer to the two fds a call creates ([`SysDesc::FD_PAIR`]).
    pub addr: u8,
    /// Number of iovecs (readv family).
    pub iovcnt: u8,
    /// [`SysDesc::IO`] and friends.
    pub bits: u16,
    /// Broad class.
    pub class: SysClass,
    /// The argument [`SysDesc::info`] reads.
    pub infoarg: u8,
    /// What a successful call's exit adds to the event for a replay (`INFO_*`).
    pub info: u8,
}

impl SysDesc {
    /// Moves data (sysdig's `evt.is_io`).
    pub const IO: u16 = 1;
    /// Reads data.
    pub const READ: u16 = 2;
    /// Writes data.
    pub const WRITE: u16 = 4;
    /// Returns a new fd on success.
    pub const RET_FD: u16 = 8;
    /// `count` is an iovec array with `iovcnt` entries.
    pub const IOV: u16 = 16;
    /// openat2: flags and mode come from `struct open_how` at the `flags` argument.
    pub const OPENAT2: u16 = 32;
    /// `off` and `off2` are pointers to the offsets, read at entry (the kernel advances them);
    /// a NULL pointer is -1, or the file position with [`SysDesc::FILE_POS`].
    pub const OFF_PTR: u16 = 64;
    /// The offset is the file position of `fd` at entry (read, write, readv, writev; sendfile,
    /// splice, copy_file_range without an output offset).
    pub const FILE_POS: u16 = 128;
    /// Closes its fd.
    pub const CLOSE: u16 = 256;
    /// `addr` is a second fd (dup2 target, sendfile/splice/copy_file_range input).
    pub const ADDR_FD: u16 = 512;
    /// Connects a socket (connect, accept, accept4): the event carries the socket's addresses
    /// (`struct ls_sock_tuple`) where other calls carry a path, and names the fd `local->peer`.
    pub const SOCK: u16 = 1024;
    /// Creates two fds and writes them to the `int[2]` at the `addr` argument (pipe, pipe2,
    /// socketpair): the event's `fd` is the first, its `addr` the second, read at exit.
    pub const FD_PAIR: u16 = 2048;
    /// clone3: the flags are `struct clone_args.flags`, read from the `flags` argument.
    pub const CLONE_ARGS: u16 = 4096;
    /// May change the caller's command name (execve, execveat, prctl): a pushed-down
    /// command-name filter is decided when the call returns, with the name it returns with
    /// (the name events carry), not at entry.
    pub const RENAMES: u16 = 8192;
    /// Changes the fd table or who shares it without an fd argument (clone, fork, unshare):
    /// recorded by `--syscalls io`, needed to replay fds.
    pub const FD_TABLE: u16 = 16384;
    /// ioctl: for `FICLONERANGE` the probe reads `struct file_clone_range` at the argument: the
    /// source fd into `addr`, its offset into `off2`, the length into `bytes`, the destination
    /// offset into `off` (for `FICLONE` `addr` is the source fd itself).
    pub const CLONE_RANGE: u16 = 32768;

    /// [`SysDesc::info`]: the `struct stat` at `infoarg`: `st_mode` into `addr`, `st_size` into `off2`.
    pub const INFO_STAT: u8 = 1;
    /// [`SysDesc::info`]: the same from the `struct statx` at `infoarg`.
    pub const INFO_STATX: u8 = 2;
    /// [`SysDesc::info`]: the mode of the fd's file (the returned fd for calls that return one)
    /// after the call into `addr`, its size into `off2`.
    pub const INFO_FSIZE: u8 = 3;
    /// [`SysDesc::info`]: an xattr value at `infoarg` that is a minimal POSIX ACL (a mode): its
    /// permission bits, with [`SysDesc::ACL_MODE`], into `mode`.
    pub const INFO_ACL: u8 = 4;
    /// Set in `mode` by [`SysDesc::INFO_ACL`].
    pub const ACL_MODE: u32 = 0x10000;
    /// [`SysDesc::info`]: listxattr: the names the kernel wrote at `infoarg` (the result's
    /// length, at most 512 bytes) are `path2`, NUL-separated.
    pub const INFO_XLIST: u8 = 5;
    /// [`SysDesc::info`]: getxattr: the value at `infoarg` (the result's length, if at most
    /// [`SysDesc::XVALUE_MAX`] bytes) follows the name in `path2` (see [`SysDesc::split_xattr`]);
    /// setxattr ([`SysDesc::INFO_ACL`]) adds its value the same way.
    pub const INFO_XVALUE: u8 = 6;
    /// The largest extended-attribute value the probes capture.
    pub const XVALUE_MAX: usize = 256;

    const EMPTY: SysDesc = SysDesc {
        fd: NONE,
        dirfd: NONE,
        path: NONE,
        dirfd2: NONE,
        path2: NONE,
        count: NONE,
        off: NONE,
        off2: NONE,
        flags: NONE,
        mode: NONE,
        addr: NONE,
        iovcnt: NONE,
        bits: 0,
        class: SysClass::Other,
        infoarg: NONE,
        info: 0,
    };

    /// True if the bit (any of the bits) is set.
    pub fn has(&self, bit: u16) -> bool {
        self.bits & bit != 0
    }
    /// Moves data.
    pub fn is_io(&self) -> bool {
        self.has(Self::IO)
    }
    /// `path2` is an extended attribute's name, not a path.
    pub fn xattr_name(name: &str) -> bool {
        name.contains("xattr")
    }
    /// The `path2` of a getxattr or setxattr event: the attribute's name and, when the probes
    /// captured it, its value (stored after a NUL, in hexadecimal).
    pub fn split_xattr(path2: &str) -> (&str, Option<Vec<u8>>) {
        let Some((name, hex)) = path2.split_once('\0') else { return (path2, None) };
        let h = hex.as_bytes();
        if h.len() % 2 != 0 {
            return (name, None);
        }
        let digit = |c: u8| (c as char).to_digit(16);
        let v: Option<Vec<u8>> = h.chunks(2).map(|p| Some((digit(p[0])? * 16 + digit(p[1])?) as u8)).collect();
        (name, v)
    }
    /// The `path2` of a getxattr or setxattr event with a captured value (see
    /// [`SysDesc::split_xattr`]).
    pub fn join_xattr(name: &str, value: &[u8]) -> String {
        use std::fmt::Write;
        let mut s = String::with_capacity(name.len() + 1 + 2 * value.len());
        s.push_str(name);
        s.push('\0');
        for b in value {
            let _ = write!(s, "{b:02x}");
        }
        s
    }

    /// Takes, creates or returns a file descriptor, takes a path, changes the fd table, or
    /// syncs: recorded by `--syscalls io`. These are the calls a replay of file I/O needs.
    pub fn is_io_related(&self) -> bool {
        self.fd != NONE
            || self.path != NONE
            || self.has(Self::RET_FD | Self::FD_PAIR | Self::FD_TABLE)
            || self.class == SysClass::Sync
    }

    /// The argument slots, by name, for checks and messages.
    pub fn slots(&self) -> [(&'static str, u8); 13] {
        [
            ("fd", self.fd),
            ("dirfd", self.dirfd),
            ("path", self.path),
            ("dirfd2", self.dirfd2),
            ("path2", self.path2),
            ("count", self.count),
            ("off", self.off),
            ("off2", self.off2),
            ("flags", self.flags),
            ("mode", self.mode),
            ("addr", self.addr),
            ("iovcnt", self.iovcnt),
            ("infoarg", self.infoarg),
        ]
    }
}

fn describe(name: &str) -> SysDesc {
    use SysClass::*;
    let e = SysDesc::EMPTY;
    const R: u16 = SysDesc::READ | SysDesc::IO;
    const W: u16 = SysDesc::WRITE | SysDesc::IO;
    const FD: u16 = SysDesc::RET_FD;
    match name {
        "read" => SysDesc { fd: 0, count: 2, bits: R | SysDesc::FILE_POS, class: Read, ..e },
        "write" => SysDesc { fd: 0, count: 2, bits: W | SysDesc::FILE_POS, class: Write, ..e },
        "pread64" => SysDesc { fd: 0, count: 2, off: 3, bits: R, class: Read, ..e },
        "pwrite64" => SysDesc { fd: 0, count: 2, off: 3, bits: W, class: Write, ..e },
        "readv" => SysDesc { fd: 0, count: 1, iovcnt: 2, bits: R | SysDesc::IOV | SysDesc::FILE_POS, class: Read, ..e },
        "writev" => {
            SysDesc { fd: 0, count: 1, iovcnt: 2, bits: W | SysDesc::IOV | SysDesc::FILE_POS, class: Write, ..e }
        }
        "preadv" => SysDesc { fd: 0, count: 1, iovcnt: 2, off: 3, bits: R | SysDesc::IOV, class: Read, ..e },
        "pwritev" => SysDesc { fd: 0, count: 1, iovcnt: 2, off: 3, bits: W | SysDesc::IOV, class: Write, ..e },
        // offset -1: the file position; flags: RWF_*
        "preadv2" => SysDesc { fd: 0, count: 1, iovcnt: 2, off: 3, flags: 5, bits: R | SysDesc::IOV, class: Read, ..e },
        "pwritev2" => {
            SysDesc { fd: 0, count: 1, iovcnt: 2, off: 3, flags: 5, bits: W | SysDesc::IOV, class: Write, ..e }
        }
        "recvfrom" => SysDesc { fd: 0, count: 2, bits: R, class: Read, ..e },
        "sendto" => SysDesc { fd: 0, count: 2, bits: W, class: Write, ..e },
        "recvmsg" | "recvmmsg" => SysDesc { fd: 0, bits: R, class: Read, ..e },
        "sendmsg" | "sendmmsg" => SysDesc { fd: 0, bits: W, class: Write, ..e },
        // Two-fd calls: `fd` is the output, `addr` the input; `off` is the output offset (the
        // file position when the call uses it), `off2` the input offset.
        "sendfile" => SysDesc {
            fd: 0,
            addr: 1,
            off2: 2,
            count: 3,
            bits: W | SysDesc::OFF_PTR | SysDesc::FILE_POS | SysDesc::ADDR_FD,
            class: Write,
            ..e
        },
        "splice" | "copy_file_range" => SysDesc {
            fd: 2,
            addr: 0,
            off: 3,
            off2: 1,
            count: 4,
            flags: 5,
            bits: W | SysDesc::OFF_PTR | SysDesc::FILE_POS | SysDesc::ADDR_FD,
            class: Write,
            ..e
        },
        "tee" => SysDesc { fd: 1, addr: 0, count: 2, flags: 3, bits: W | SysDesc::ADDR_FD, class: Write, ..e },
        "vmsplice" => SysDesc { fd: 0, count: 1, iovcnt: 2, flags: 3, bits: W | SysDesc::IOV, class: Write, ..e },
        "getdents" | "getdents64" => SysDesc { fd: 0, count: 2, bits: R, class: Read, ..e },
        // info: the opened file's mode and size (a replay's starting tree)
        "open" => SysDesc { path: 0, flags: 1, mode: 2, bits: FD, info: SysDesc::INFO_FSIZE, class: FileMeta, ..e },
        "creat" => SysDesc { path: 0, mode: 1, bits: FD, info: SysDesc::INFO_FSIZE, class: FileMeta, ..e },
        "openat" => {
            SysDesc { dirfd: 0, path: 1, flags: 2, mode: 3, bits: FD, info: SysDesc::INFO_FSIZE, class: FileMeta, ..e }
        }
        "openat2" => SysDesc {
            dirfd: 0,
            path: 1,
            flags: 2,
            bits: FD | SysDesc::OPENAT2,
            info: SysDesc::INFO_FSIZE,
            class: FileMeta,
            ..e
        },
        "open_by_handle_at" => SysDesc { fd: 0, flags: 2, bits: FD, class: FileMeta, ..e },
        "eventfd" | "epoll_create" | "inotify_init" | "signalfd" | "io_uring_setup" | "perf_event_open" | "bpf" => {
            SysDesc { bits: FD, class: Other, ..e }
        }
        // flags: O_CLOEXEC and friends, which a replay needs
        "epoll_create1" | "inotify_init1" | "memfd_secret" | "userfaultfd" | "fanotify_init" => {
            SysDesc { flags: 0, bits: FD, class: Other, ..e }
        }
        "memfd_create" | "eventfd2" | "timerfd_create" | "pidfd_open" => {
            SysDesc { flags: 1, bits: FD, class: Other, ..e }
        }
        "signalfd4" => SysDesc { flags: 3, bits: FD, class: Other, ..e },
        "pidfd_getfd" => SysDesc { addr: 1, flags: 2, bits: FD, class: Other, ..e },
        // mode: the type; flags: its SOCK_NONBLOCK|SOCK_CLOEXEC bits (set by the decoder)
        "socket" => SysDesc { mode: 1, bits: FD, class: Net, ..e },
        "socketpair" => SysDesc { mode: 1, addr: 3, bits: SysDesc::FD_PAIR, class: Net, ..e },
        "pipe" => SysDesc { addr: 0, bits: SysDesc::FD_PAIR, class: Net, ..e },
        "pipe2" => SysDesc { addr: 0, flags: 1, bits: SysDesc::FD_PAIR, class: Net, ..e },
        "accept" | "accept4" => SysDesc { fd: 0, flags: 3, bits: FD | SysDesc::SOCK, class: Net, ..e },
        "connect" => SysDesc { fd: 0, bits: SysDesc::SOCK, class: Net, ..e },
        "bind" | "listen" | "shutdown" | "getsockname" | "getpeername" | "setsockopt" | "getsockopt" => {
            SysDesc { fd: 0, class: Net, ..e }
        }
        "dup" => SysDesc { fd: 0, bits: FD, class: FileMeta, ..e },
        "dup2" => SysDesc { fd: 0, addr: 1, bits: FD | SysDesc::ADDR_FD, class: FileMeta, ..e },
        "dup3" => SysDesc { fd: 0, addr: 1, flags: 2, bits: FD | SysDesc::ADDR_FD, class: FileMeta, ..e },
        "fcntl" => SysDesc { fd: 0, flags: 1, mode: 2, class: FileMeta, ..e },
        "close" => SysDesc { fd: 0, bits: SysDesc::CLOSE, class: FileMeta, ..e },
        "close_range" => SysDesc { fd: 0, addr: 1, flags: 2, bits: SysDesc::CLOSE, class: FileMeta, ..e },
        "lseek" => SysDesc { fd: 0, off: 1, flags: 2, class: FileMeta, ..e },
        "fsync" | "fdatasync" | "syncfs" => SysDesc { fd: 0, class: Sync, ..e },
        "sync" => SysDesc { class: Sync, ..e },
        "sync_file_range" => SysDesc { fd: 0, off: 1, count: 2, flags: 3, class: Sync, ..e },
        "msync" => SysDesc { addr: 0, count: 1, flags: 2, class: Sync, ..e },
        // The file's size after the call: a collapse or insert says how large it was.
        "fallocate" => SysDesc { fd: 0, mode: 1, off: 2, count: 3, info: SysDesc::INFO_FSIZE, class: FileMeta, ..e },
        "fadvise64" => SysDesc { fd: 0, off: 1, count: 2, flags: 3, class: FileMeta, ..e },
        "readahead" => SysDesc { fd: 0, off: 1, count: 2, class: FileMeta, ..e },
        "ftruncate" => SysDesc { fd: 0, count: 1, class: FileMeta, ..e },
        "truncate" => SysDesc { path: 0, count: 1, class: FileMeta, ..e },
        "fstat" => SysDesc { fd: 0, infoarg: 1, info: SysDesc::INFO_STAT, class: FileMeta, ..e },
        "fremovexattr" => SysDesc { fd: 0, path2: 1, class: FileMeta, ..e },
        "fstatfs" | "fchdir" | "fchown" | "file_getattr" | "file_setattr" => SysDesc { fd: 0, class: FileMeta, ..e },
        // ioctl: the request (FIOCLEX, FIONCLEX set close-on-exec) and its argument (FICLONE's
        // source fd); flock: the operation
        "ioctl" => SysDesc { fd: 0, flags: 1, addr: 2, bits: SysDesc::CLONE_RANGE, class: FileMeta, ..e },
        "flock" => SysDesc { fd: 0, flags: 1, class: FileMeta, ..e },
        // xattrs: the name is `path2` (kept as given, not a path), with the value got or set
        // when small; a set's value is read when it is a minimal POSIX ACL (a mode); the
        // names listxattr returned are `path2`
        "fgetxattr" => {
            SysDesc { fd: 0, path2: 1, count: 3, infoarg: 2, info: SysDesc::INFO_XVALUE, class: FileMeta, ..e }
        }
        "fsetxattr" => {
            SysDesc { fd: 0, path2: 1, count: 3, flags: 4, infoarg: 2, info: SysDesc::INFO_ACL, class: FileMeta, ..e }
        }
        "flistxattr" => SysDesc { fd: 0, count: 2, infoarg: 1, info: SysDesc::INFO_XLIST, class: FileMeta, ..e },
        "fchmod" => SysDesc { fd: 0, mode: 1, class: FileMeta, ..e },
        "stat" | "lstat" => SysDesc { path: 0, infoarg: 1, info: SysDesc::INFO_STAT, class: FileMeta, ..e },
        "statfs" | "chdir" | "chroot" | "rmdir" | "unlink" | "chown" | "lchown" | "utime" | "utimes" | "acct"
        | "swapon" | "swapoff" | "umount2" | "uselib" => SysDesc { path: 0, class: FileMeta, ..e },
        "removexattr" | "lremovexattr" => SysDesc { path: 0, path2: 1, class: FileMeta, ..e },
        "getxattr" | "lgetxattr" => {
            SysDesc { path: 0, path2: 1, count: 3, infoarg: 2, info: SysDesc::INFO_XVALUE, class: FileMeta, ..e }
        }
        "setxattr" | "lsetxattr" => {
            SysDesc { path: 0, path2: 1, count: 3, flags: 4, infoarg: 2, info: SysDesc::INFO_ACL, class: FileMeta, ..e }
        }
        "listxattr" | "llistxattr" => {
            SysDesc { path: 0, count: 2, infoarg: 1, info: SysDesc::INFO_XLIST, class: FileMeta, ..e }
        }
        "execve" => SysDesc { path: 0, bits: SysDesc::RENAMES, class: Process, ..e },
        "execveat" => SysDesc { dirfd: 0, path: 1, flags: 4, bits: SysDesc::RENAMES, class: Process, ..e },
        "access" | "chmod" | "mkdir" => SysDesc { path: 0, mode: 1, class: FileMeta, ..e },
        "mknod" => SysDesc { path: 0, mode: 1, addr: 2, class: FileMeta, ..e },
        // path2: the buffer, read at exit: the target
        "readlink" => SysDesc { path: 0, path2: 1, count: 2, class: FileMeta, ..e },
        "rename" | "link" | "symlink" | "pivot_root" => SysDesc { path: 0, path2: 1, class: FileMeta, ..e },
        "mount" => SysDesc { path: 0, path2: 1, flags: 3, class: FileMeta, ..e },
        "newfstatat" => {
            SysDesc { dirfd: 0, path: 1, flags: 3, infoarg: 2, info: SysDesc::INFO_STAT, class: FileMeta, ..e }
        }
        "statx" => SysDesc {
            dirfd: 0,
            path: 1,
            flags: 2,
            mode: 3,
            infoarg: 4,
            info: SysDesc::INFO_STATX,
            class: FileMeta,
            ..e
        },
        "unlinkat" => SysDesc { dirfd: 0, path: 1, flags: 2, class: FileMeta, ..e },
        "mkdirat" | "fchmodat" => SysDesc { dirfd: 0, path: 1, mode: 2, class: FileMeta, ..e },
        "mknodat" => SysDesc { dirfd: 0, path: 1, mode: 2, addr: 3, class: FileMeta, ..e },
        "fchmodat2" => SysDesc { dirfd: 0, path: 1, mode: 2, flags: 3, class: FileMeta, ..e },
        "faccessat" => SysDesc { dirfd: 0, path: 1, mode: 2, class: FileMeta, ..e },
        "faccessat2" => SysDesc { dirfd: 0, path: 1, mode: 2, flags: 3, class: FileMeta, ..e },
        "fchownat" => SysDesc { dirfd: 0, path: 1, flags: 4, class: FileMeta, ..e },
        "futimesat" | "name_to_handle_at" => SysDesc { dirfd: 0, path: 1, class: FileMeta, ..e },
        "utimensat" => SysDesc { dirfd: 0, path: 1, flags: 3, class: FileMeta, ..e },
        "readlinkat" => SysDesc { dirfd: 0, path: 1, path2: 2, count: 3, class: FileMeta, ..e },
        "renameat" => SysDesc { dirfd: 0, path: 1, dirfd2: 2, path2: 3, class: FileMeta, ..e },
        "renameat2" | "linkat" => SysDesc { dirfd: 0, path: 1, dirfd2: 2, path2: 3, flags: 4, class: FileMeta, ..e },
        "symlinkat" => SysDesc { path: 0, dirfd2: 1, path2: 2, class: FileMeta, ..e },
        "inotify_add_watch" => SysDesc { fd: 0, path: 1, flags: 2, class: FileMeta, ..e },
        "setxattrat" | "getxattrat" | "listxattrat" | "removexattrat" => {
            SysDesc { dirfd: 0, path: 1, flags: 2, class: FileMeta, ..e }
        }
        "open_tree" | "open_tree_attr" => SysDesc { dirfd: 0, path: 1, flags: 2, bits: FD, class: FileMeta, ..e },
        "mmap" => SysDesc { addr: 0, count: 1, mode: 2, flags: 3, fd: 4, off: 5, class: Memory, ..e },
        "munmap" | "mlock" | "munlock" | "mincore" => SysDesc { addr: 0, count: 1, class: Memory, ..e },
        "mprotect" => SysDesc { addr: 0, count: 1, mode: 2, class: Memory, ..e },
        "madvise" => SysDesc { addr: 0, count: 1, flags: 2, class: Memory, ..e },
        "mremap" => SysDesc { addr: 0, count: 1, flags: 3, class: Memory, ..e },
        "brk" | "mlockall" | "munlockall" | "membarrier" | "mbind" | "set_mempolicy" | "get_mempolicy"
        | "migrate_pages" | "move_pages" | "process_madvise" | "mseal" | "map_shadow_stack" => {
            SysDesc { class: Memory, ..e }
        }
        "epoll_wait" | "epoll_pwait" | "epoll_pwait2" => SysDesc { fd: 0, class: Wait, ..e },
        "epoll_ctl" => SysDesc { fd: 0, class: Other, ..e },
        "io_uring_enter" | "io_uring_register" => SysDesc { fd: 0, class: Other, ..e },
        // The futex word (which lock) and the operation.
        "futex" => SysDesc { addr: 0, flags: 1, class: Wait, ..e },
        "nanosleep" | "clock_nanosleep" | "poll" | "ppoll" | "select" | "pselect6" | "futex_waitv" | "futex_wait"
        | "futex_wake" | "futex_requeue" | "wait4" | "waitid" | "pause" | "rt_sigsuspend" | "rt_sigtimedwait"
        | "sched_yield" | "io_getevents" | "io_pgetevents" | "semop" | "semtimedop" | "msgrcv" | "mq_timedreceive" => {
            SysDesc { class: Wait, ..e }
        }
        // The child inherits or shares the fd table (CLONE_FILES), the cwd (CLONE_FS).
        "clone" => SysDesc { flags: 0, bits: SysDesc::FD_TABLE, class: Process, ..e },
        "clone3" => SysDesc { flags: 0, bits: SysDesc::FD_TABLE | SysDesc::CLONE_ARGS, class: Process, ..e },
        "fork" | "vfork" => SysDesc { bits: SysDesc::FD_TABLE, class: Process, ..e },
        "unshare" => SysDesc { flags: 0, bits: SysDesc::FD_TABLE, class: Process, ..e },
        // PR_SET_NAME renames the caller
        "prctl" => SysDesc { flags: 0, bits: SysDesc::RENAMES, class: Process, ..e },
        "exit" | "exit_group" | "kill" | "tkill" | "tgkill" | "rt_sigaction" | "rt_sigprocmask" | "rt_sigreturn"
        | "sigaltstack" | "arch_prctl" | "set_tid_address" | "setpgid" | "setsid" | "pidfd_send_signal" | "ptrace" => {
            SysDesc { class: Process, ..e }
        }
        _ => SysDesc { class: Other, ..e },
    }
}

fn table() -> &'static [SysDesc] {
    static T: OnceLock<Vec<SysDesc>> = OnceLock::new();
    T.get_or_init(|| crate::syscall_table::SYSCALL_NAMES.iter().map(|n| describe(n)).collect())
}

/// Number of syscall numbers known (the size of per-syscall tables).
pub fn syscall_count() -> usize {
    crate::syscall_table::SYSCALL_NAMES.len()
}

/// The argument layout of syscall `nr` (an empty layout for unknown numbers).
pub fn desc(nr: u16) -> &'static SysDesc {
    table().get(nr as usize).unwrap_or(&SysDesc::EMPTY)
}

/// Name of syscall `nr`.
pub fn syscall_name(nr: u16) -> Option<&'static str> {
    crate::syscall_table::SYSCALL_NAMES.get(nr as usize).copied().filter(|s| !s.is_empty())
}

/// Number of a syscall by name.
pub fn syscall_nr(name: &str) -> Option<u16> {
    crate::syscall_table::SYSCALL_NAMES.iter().position(|n| !n.is_empty() && *n == name).map(|i| i as u16)
}

/// Whether a call of syscall `nr` can wake a thread blocked in the attribution part `part` (an
/// index of [`crate::WHY_PART_NAMES`]): a lock wait (3) is ended by a futex, file-lock or
/// semaphore operation or a close; a pipe or socket wait (4) by data written or sent, a
/// connection, a shutdown or a close; any call may end the other parts' waits. The views and
/// the Perfetto export prefer such a call of the waking thread when several were in progress
/// around a wake-up.
pub fn can_wake(nr: u16, part: usize) -> bool {
    let name = syscall_name(nr).unwrap_or("");
    match part {
        3 => matches!(name, "futex" | "flock" | "fcntl" | "semop" | "semtimedop" | "close"),
        4 => matches!(
            name,
            "write"
                | "writev"
                | "pwrite64"
                | "pwritev"
                | "pwritev2"
                | "sendto"
                | "sendmsg"
                | "sendmmsg"
                | "splice"
                | "tee"
                | "vmsplice"
                | "connect"
                | "shutdown"
                | "close"
                | "mq_timedsend"
                | "msgsnd"
        ),
        _ => true,
    }
}

/// All known syscall names with numbers.
pub fn all() -> impl Iterator<Item = (u16, &'static str)> {
    crate::syscall_table::SYSCALL_NAMES.iter().enumerate().filter(|(_, n)| !n.is_empty()).map(|(i, n)| (i as u16, *n))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn lock_and_pipe_waits_are_ended_by_the_calls_that_release_or_send() {
        let n = |s| syscall_nr(s).unwrap();
        assert!(can_wake(n("futex"), 3) && !can_wake(n("write"), 3));
        assert!(can_wake(n("write"), 4) && can_wake(n("sendto"), 4) && !can_wake(n("futex"), 4));
        assert!(can_wake(n("nanosleep"), 7));
    }

    #[test]
    fn lookups() {
        assert_eq!(syscall_nr("openat"), Some(257));
        assert_eq!(syscall_name(0), Some("read"));
        assert_eq!(syscall_name(437), Some("openat2"));
        assert_eq!(syscall_name(9999), None);
        let d = desc(syscall_nr("pread64").unwrap());
        assert!(d.is_io() && d.has(SysDesc::READ));
        assert_eq!((d.fd, d.count, d.off), (0, 2, 3));
        let r = desc(syscall_nr("renameat2").unwrap());
        assert_eq!((r.dirfd, r.path, r.dirfd2, r.path2), (0, 1, 2, 3));
        assert!(desc(syscall_nr("nanosleep").unwrap()).class == SysClass::Wait);
        assert!(!desc(syscall_nr("getpid").unwrap()).is_io_related());
        assert!(desc(syscall_nr("fsync").unwrap()).is_io_related());
    }

    /// The kernel indexes the six saved arguments with these slots: each is 0-5 or NONE.
    #[test]
    fn every_slot_is_an_argument_or_none() {
        for (nr, name) in all() {
            let d = desc(nr);
            for (slot, v) in d.slots() {
                assert!(v < 6 || v == NONE, "{name}: slot {slot} = {v}");
            }
            if d.has(SysDesc::FD_PAIR) {
                assert_ne!(d.addr, NONE, "{name}: FD_PAIR needs the pointer in addr");
            }
            if d.has(SysDesc::OFF_PTR) {
                assert!(d.off != NONE || d.off2 != NONE, "{name}: OFF_PTR without an offset");
            }
            if d.has(SysDesc::CLONE_ARGS) {
                assert_ne!(d.flags, NONE, "{name}: CLONE_ARGS reads the struct at the flags argument");
            }
        }
    }

    /// The argument placement docs/TRACE_FORMAT.md promises a replay.
    #[test]
    fn replay_mapping() {
        let d = |n: &str| *desc(syscall_nr(n).unwrap());
        let s = |n: &str| {
            let d = d(n);
            (d.fd, d.addr, d.off, d.off2, d.count, d.flags, d.mode)
        };
        assert_eq!(s("dup"), (0, NONE, NONE, NONE, NONE, NONE, NONE));
        assert_eq!(s("dup2"), (0, 1, NONE, NONE, NONE, NONE, NONE));
        assert_eq!(s("dup3"), (0, 1, NONE, NONE, NONE, 2, NONE));
        assert_eq!(s("fcntl"), (0, NONE, NONE, NONE, NONE, 1, 2));
        assert_eq!(s("close_range"), (0, 1, NONE, NONE, NONE, 2, NONE));
        assert_eq!(s("clone"), (NONE, NONE, NONE, NONE, NONE, 0, NONE));
        assert!(d("clone3").has(SysDesc::CLONE_ARGS));
        assert_eq!(s("pipe2"), (NONE, 0, NONE, NONE, NONE, 1, NONE));
        assert_eq!(s("socketpair"), (NONE, 3, NONE, NONE, NONE, NONE, 1));
        for n in ["pipe", "pipe2", "socketpair"] {
            assert!(d(n).has(SysDesc::FD_PAIR) && d(n).is_io_related(), "{n}");
        }
        assert_eq!(s("truncate").4, 1);
        assert_eq!(s("ftruncate"), (0, NONE, NONE, NONE, 1, NONE, NONE));
        assert_eq!(s("fallocate"), (0, NONE, 2, NONE, 3, NONE, 1));
        assert_eq!(s("mmap"), (4, 0, 5, NONE, 1, 3, 2));
        assert_eq!(s("munmap"), (NONE, 0, NONE, NONE, 1, NONE, NONE));
        assert_eq!(s("msync"), (NONE, 0, NONE, NONE, 1, 2, NONE));
        assert_eq!(s("lseek"), (0, NONE, 1, NONE, NONE, 2, NONE));
        assert_eq!(s("copy_file_range"), (2, 0, 3, 1, 4, 5, NONE));
        assert_eq!(s("sendfile"), (0, 1, NONE, 2, 3, NONE, NONE));
        for n in ["clone", "clone3", "fork", "vfork", "unshare", "execve", "close_range"] {
            assert!(d(n).is_io_related(), "--syscalls io records {n}");
        }
        for n in ["execve", "execveat", "prctl"] {
            assert!(d(n).has(SysDesc::RENAMES), "{n}");
        }
    }
}

//! The one table of how each recorded argument of a syscall reads, as strace prints it: flags and
//! commands by name (`F_SETLK`, `O_WRONLY|O_CREAT`, `POSIX_FADV_DONTNEED`, `PROT_READ|PROT_WRITE`,
//! `MAP_PRIVATE|MAP_ANONYMOUS`), modes in octal, addresses in hex, and pointers the probes do not
//! follow left out (fcntl's `struct flock`: the command says what the call did).
//!
//! [`specs`] gives, per syscall, the argument slots of [`SysDesc`] that hold a flag, a mode or an
//! address (`flags`, `mode`, `addr`) with the name printed and the [`Show`] that decodes the
//! value; the generic slots (fd, dirfd, paths, bytes, offsets) are printed by `crate::args` for
//! every syscall alike. Every syscall whose layout records one of those slots has an entry here
//! (a test checks it), so nothing is printed raw by default. Adding a syscall, or a slot the
//! probes start recording (futex's operation and address, say), is adding a line to [`specs`].

use std::fmt::{self, Write};

/// Which recorded value an argument is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The event's `flags` column.
    Flags,
    /// The event's `mode` column.
    Mode,
    /// The event's `addr` column.
    Addr,
}

/// How a value reads.
#[derive(Debug, Clone, Copy)]
pub enum Show {
    /// A number.
    Dec,
    /// An address in hex, `NULL` for 0.
    Ptr,
    /// Permission bits in octal (`0644`).
    Octal,
    /// A file type and permissions (`S_IFREG|0644`).
    FileMode,
    /// One name of the table (`F_SETLK`); else the number with `/* PREFIX_??? */`.
    Enum(&'static [(u64, &'static str)], &'static str),
    /// Names of the table's bits joined with `|` (a multi-bit entry first when all its bits are
    /// set); bits without a name in hex; 0 as the second field (`0`, `PROT_NONE`).
    Bits(&'static [(u64, &'static str)], &'static str),
    /// Open flags: the access mode, then the other bits (`O_RDWR|O_CREAT|O_CLOEXEC`).
    OpenFlags,
    /// Open flags without the access mode (pipe2, dup3: `O_CLOEXEC|O_NONBLOCK`).
    FdFlags,
    /// An mmap type and flags (`MAP_PRIVATE|MAP_ANONYMOUS`, huge page sizes as strace writes them).
    MmapFlags,
    /// clone flags with the exit signal in the low byte (`CLONE_VM|...|SIGCHLD`).
    CloneFlags,
    /// A socket type with its flags (`SOCK_STREAM|SOCK_CLOEXEC`).
    SockType,
    /// statx's mask (`STATX_BASIC_STATS|STATX_MNT_ID`).
    StatxMask,
    /// An ioctl request: its name, else `_IOC(dir, type, nr, size)`.
    IoctlRequest,
    /// A device number (`makedev(0x1, 0x3)`).
    Dev,
    /// The last fd of close_range (`~0` for all).
    LastFd,
    /// A futex operation: the command with its private and clock flags
    /// (`FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME`).
    FutexOp,
}

/// One decoded argument of a syscall: the slot it is read from, the name printed, how it reads,
/// and when it is printed at all.
#[derive(Debug, Clone, Copy)]
pub struct ArgSpec {
    /// Where the value is.
    pub slot: Slot,
    /// Its name in the event line (`cmd=`, `advice=`).
    pub name: &'static str,
    /// How it reads.
    pub show: Show,
    /// Printed only when this holds of the event's flags and mode (a mode only with `O_CREAT`,
    /// fcntl's argument only for the commands that take a number).
    pub when: When,
}

impl ArgSpec {
    /// Its value in an event whose columns hold these `flags`, `mode` and `addr`.
    #[inline]
    pub fn value(&self, flags: u32, mode: u32, addr: u64) -> u64 {
        match self.slot {
            Slot::Flags => u64::from(flags),
            Slot::Mode => u64::from(mode),
            Slot::Addr => addr,
        }
    }
}

/// When an argument is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Always.
    Always,
    /// When the flags create a file (`O_CREAT`, `O_TMPFILE`): open's mode.
    Creates,
    /// fcntl's argument: for the commands that take a number or flags (not a pointer).
    FcntlTakesValue,
    /// ioctl's argument: for the requests whose argument is an fd (FICLONE).
    IoctlFd,
    /// mknod's device: for character and block devices.
    DeviceNode,
}

const fn a(slot: Slot, name: &'static str, show: Show) -> ArgSpec {
    ArgSpec { slot, name, show, when: When::Always }
}

const fn aw(slot: Slot, name: &'static str, show: Show, when: When) -> ArgSpec {
    ArgSpec { slot, name, show, when }
}

/// A `'static` list of argument specs (const fn calls are not promoted by themselves).
macro_rules! list {
    ($($e:expr),* $(,)?) => {{
        const L: &[ArgSpec] = &[$($e),*];
        L
    }};
}

use Show::*;
use Slot::{Addr, Flags, Mode};

const AT_FLAGS: &[(u64, &str)] = &[
    (0x100, "AT_SYMLINK_NOFOLLOW"),
    (0x400, "AT_SYMLINK_FOLLOW"),
    (0x800, "AT_NO_AUTOMOUNT"),
    (0x1000, "AT_EMPTY_PATH"),
    (0x2000, "AT_STATX_FORCE_SYNC"),
    (0x4000, "AT_STATX_DONT_SYNC"),
    (0x8000, "AT_RECURSIVE"),
];
const AT_REMOVEDIR: &[(u64, &str)] = &[(0x200, "AT_REMOVEDIR")];
const AT_EACCESS: &[(u64, &str)] = &[(0x200, "AT_EACCESS"), (0x100, "AT_SYMLINK_NOFOLLOW"), (0x1000, "AT_EMPTY_PATH")];
const ACCESS_MODE: &[(u64, &str)] = &[(4, "R_OK"), (2, "W_OK"), (1, "X_OK")];
const O_CLOEXEC: u64 = 0o2000000;
const O_NONBLOCK: u64 = 0o4000;
const CLOEXEC_ONLY: &[(u64, &str)] = &[(O_CLOEXEC, "O_CLOEXEC")];
const EPOLL_FLAGS: &[(u64, &str)] = &[(O_CLOEXEC, "EPOLL_CLOEXEC")];
const IN_INIT_FLAGS: &[(u64, &str)] = &[(O_NONBLOCK, "IN_NONBLOCK"), (O_CLOEXEC, "IN_CLOEXEC")];
const EFD_FLAGS: &[(u64, &str)] = &[(1, "EFD_SEMAPHORE"), (O_NONBLOCK, "EFD_NONBLOCK"), (O_CLOEXEC, "EFD_CLOEXEC")];
const TFD_FLAGS: &[(u64, &str)] = &[(O_NONBLOCK, "TFD_NONBLOCK"), (O_CLOEXEC, "TFD_CLOEXEC")];
const SFD_FLAGS: &[(u64, &str)] = &[(O_NONBLOCK, "SFD_NONBLOCK"), (O_CLOEXEC, "SFD_CLOEXEC")];
const SOCK_FLAGS: &[(u64, &str)] = &[(O_NONBLOCK, "SOCK_NONBLOCK"), (O_CLOEXEC, "SOCK_CLOEXEC")];
const PIDFD_FLAGS: &[(u64, &str)] = &[(O_NONBLOCK, "PIDFD_NONBLOCK"), (0o200, "PIDFD_THREAD")];
const UFFD_FLAGS: &[(u64, &str)] = &[(1, "UFFD_USER_MODE_ONLY"), (O_NONBLOCK, "O_NONBLOCK"), (O_CLOEXEC, "O_CLOEXEC")];
const MFD_FLAGS: &[(u64, &str)] =
    &[(1, "MFD_CLOEXEC"), (2, "MFD_ALLOW_SEALING"), (4, "MFD_HUGETLB"), (8, "MFD_NOEXEC_SEAL"), (0x10, "MFD_EXEC")];
const FAN_INIT: &[(u64, &str)] = &[
    (0x1, "FAN_CLOEXEC"),
    (0x2, "FAN_NONBLOCK"),
    (0x4, "FAN_CLASS_CONTENT"),
    (0x8, "FAN_CLASS_PRE_CONTENT"),
    (0x10, "FAN_UNLIMITED_QUEUE"),
    (0x20, "FAN_UNLIMITED_MARKS"),
    (0x40, "FAN_ENABLE_AUDIT"),
    (0x80, "FAN_REPORT_PIDFD"),
    (0x100, "FAN_REPORT_TID"),
    (0x200, "FAN_REPORT_FID"),
    (0x400, "FAN_REPORT_DIR_FID"),
    (0x800, "FAN_REPORT_NAME"),
    (0x1000, "FAN_REPORT_TARGET_FID"),
];
const RWF: &[(u64, &str)] = &[
    (1, "RWF_HIPRI"),
    (2, "RWF_DSYNC"),
    (4, "RWF_SYNC"),
    (8, "RWF_NOWAIT"),
    (0x10, "RWF_APPEND"),
    (0x20, "RWF_NOAPPEND"),
    (0x40, "RWF_ATOMIC"),
    (0x80, "RWF_DONTCACHE"),
];
const SPLICE: &[(u64, &str)] =
    &[(1, "SPLICE_F_MOVE"), (2, "SPLICE_F_NONBLOCK"), (4, "SPLICE_F_MORE"), (8, "SPLICE_F_GIFT")];
const FCNTL_CMD: &[(u64, &str)] = &[
    (0, "F_DUPFD"),
    (1, "F_GETFD"),
    (2, "F_SETFD"),
    (3, "F_GETFL"),
    (4, "F_SETFL"),
    (5, "F_GETLK"),
    (6, "F_SETLK"),
    (7, "F_SETLKW"),
    (8, "F_SETOWN"),
    (9, "F_GETOWN"),
    (10, "F_SETSIG"),
    (11, "F_GETSIG"),
    (15, "F_SETOWN_EX"),
    (16, "F_GETOWN_EX"),
    (17, "F_GETOWNER_UIDS"),
    (36, "F_OFD_GETLK"),
    (37, "F_OFD_SETLK"),
    (38, "F_OFD_SETLKW"),
    (1024, "F_SETLEASE"),
    (1025, "F_GETLEASE"),
    (1026, "F_NOTIFY"),
    (1027, "F_DUPFD_QUERY"),
    (1028, "F_CREATED_QUERY"),
    (1029, "F_CANCELLK"),
    (1030, "F_DUPFD_CLOEXEC"),
    (1031, "F_SETPIPE_SZ"),
    (1032, "F_GETPIPE_SZ"),
    (1033, "F_ADD_SEALS"),
    (1034, "F_GET_SEALS"),
    (1035, "F_GET_RW_HINT"),
    (1036, "F_SET_RW_HINT"),
    (1037, "F_GET_FILE_RW_HINT"),
    (1038, "F_SET_FILE_RW_HINT"),
];
/// futex(2) commands (the operation less FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME).
const FUTEX_CMD: &[(u64, &str)] = &[
    (0, "FUTEX_WAIT"),
    (1, "FUTEX_WAKE"),
    (2, "FUTEX_FD"),
    (3, "FUTEX_REQUEUE"),
    (4, "FUTEX_CMP_REQUEUE"),
    (5, "FUTEX_WAKE_OP"),
    (6, "FUTEX_LOCK_PI"),
    (7, "FUTEX_UNLOCK_PI"),
    (8, "FUTEX_TRYLOCK_PI"),
    (9, "FUTEX_WAIT_BITSET"),
    (10, "FUTEX_WAKE_BITSET"),
    (11, "FUTEX_WAIT_REQUEUE_PI"),
    (12, "FUTEX_CMP_REQUEUE_PI"),
    (13, "FUTEX_LOCK_PI2"),
];
const FUTEX_PRIVATE_FLAG: u64 = 128;
const FUTEX_CLOCK_REALTIME: u64 = 256;
const CLOSE_RANGE: &[(u64, &str)] = &[(2, "CLOSE_RANGE_UNSHARE"), (4, "CLOSE_RANGE_CLOEXEC")];
const SYNC_FILE_RANGE: &[(u64, &str)] =
    &[(1, "SYNC_FILE_RANGE_WAIT_BEFORE"), (2, "SYNC_FILE_RANGE_WRITE"), (4, "SYNC_FILE_RANGE_WAIT_AFTER")];
const MS_SYNC: &[(u64, &str)] = &[(1, "MS_ASYNC"), (2, "MS_INVALIDATE"), (4, "MS_SYNC")];
const FADV: &[(u64, &str)] = &[
    (0, "POSIX_FADV_NORMAL"),
    (1, "POSIX_FADV_RANDOM"),
    (2, "POSIX_FADV_SEQUENTIAL"),
    (3, "POSIX_FADV_WILLNEED"),
    (4, "POSIX_FADV_DONTNEED"),
    (5, "POSIX_FADV_NOREUSE"),
];
const FALLOC: &[(u64, &str)] = &[
    (1, "FALLOC_FL_KEEP_SIZE"),
    (2, "FALLOC_FL_PUNCH_HOLE"),
    (4, "FALLOC_FL_NO_HIDE_STALE"),
    (8, "FALLOC_FL_COLLAPSE_RANGE"),
    (0x10, "FALLOC_FL_ZERO_RANGE"),
    (0x20, "FALLOC_FL_INSERT_RANGE"),
    (0x40, "FALLOC_FL_UNSHARE_RANGE"),
    (0x80, "FALLOC_FL_WRITE_ZEROES"),
];
const LOCK_OP: &[(u64, &str)] = &[(1, "LOCK_SH"), (2, "LOCK_EX"), (4, "LOCK_NB"), (8, "LOCK_UN")];
const XATTR: &[(u64, &str)] = &[(1, "XATTR_CREATE"), (2, "XATTR_REPLACE")];
const EXECVEAT: &[(u64, &str)] = &[(0x100, "AT_SYMLINK_NOFOLLOW"), (0x1000, "AT_EMPTY_PATH")];
const MOUNT: &[(u64, &str)] = &[
    (0xC0ED0000, "MS_MGC_VAL"),
    (1, "MS_RDONLY"),
    (2, "MS_NOSUID"),
    (4, "MS_NODEV"),
    (8, "MS_NOEXEC"),
    (16, "MS_SYNCHRONOUS"),
    (32, "MS_REMOUNT"),
    (64, "MS_MANDLOCK"),
    (128, "MS_DIRSYNC"),
    (256, "MS_NOSYMFOLLOW"),
    (1024, "MS_NOATIME"),
    (2048, "MS_NODIRATIME"),
    (4096, "MS_BIND"),
    (8192, "MS_MOVE"),
    (16384, "MS_REC"),
    (32768, "MS_SILENT"),
    (1 << 16, "MS_POSIXACL"),
    (1 << 17, "MS_UNBINDABLE"),
    (1 << 18, "MS_PRIVATE"),
    (1 << 19, "MS_SLAVE"),
    (1 << 20, "MS_SHARED"),
    (1 << 21, "MS_RELATIME"),
    (1 << 22, "MS_KERNMOUNT"),
    (1 << 23, "MS_I_VERSION"),
    (1 << 24, "MS_STRICTATIME"),
    (1 << 25, "MS_LAZYTIME"),
];
const RENAME: &[(u64, &str)] = &[(1, "RENAME_NOREPLACE"), (2, "RENAME_EXCHANGE"), (4, "RENAME_WHITEOUT")];
const IN_MASK: &[(u64, &str)] = &[
    (0x18, "IN_CLOSE"),
    (0xc0, "IN_MOVE"),
    (1, "IN_ACCESS"),
    (2, "IN_MODIFY"),
    (4, "IN_ATTRIB"),
    (8, "IN_CLOSE_WRITE"),
    (0x10, "IN_CLOSE_NOWRITE"),
    (0x20, "IN_OPEN"),
    (0x40, "IN_MOVED_FROM"),
    (0x80, "IN_MOVED_TO"),
    (0x100, "IN_CREATE"),
    (0x200, "IN_DELETE"),
    (0x400, "IN_DELETE_SELF"),
    (0x800, "IN_MOVE_SELF"),
    (0x2000, "IN_UNMOUNT"),
    (0x4000, "IN_Q_OVERFLOW"),
    (0x8000, "IN_IGNORED"),
    (0x1000000, "IN_ONLYDIR"),
    (0x2000000, "IN_DONT_FOLLOW"),
    (0x4000000, "IN_EXCL_UNLINK"),
    (0x10000000, "IN_MASK_CREATE"),
    (0x20000000, "IN_MASK_ADD"),
    (0x40000000, "IN_ISDIR"),
    (0x80000000, "IN_ONESHOT"),
];
const OPEN_TREE: &[(u64, &str)] = &[
    (1, "OPEN_TREE_CLONE"),
    (O_CLOEXEC, "OPEN_TREE_CLOEXEC"),
    (0x100, "AT_SYMLINK_NOFOLLOW"),
    (0x800, "AT_NO_AUTOMOUNT"),
    (0x1000, "AT_EMPTY_PATH"),
    (0x8000, "AT_RECURSIVE"),
];
const PROT: &[(u64, &str)] = &[
    (1, "PROT_READ"),
    (2, "PROT_WRITE"),
    (4, "PROT_EXEC"),
    (8, "PROT_SEM"),
    (0x01000000, "PROT_GROWSDOWN"),
    (0x02000000, "PROT_GROWSUP"),
];
const MADV: &[(u64, &str)] = &[
    (0, "MADV_NORMAL"),
    (1, "MADV_RANDOM"),
    (2, "MADV_SEQUENTIAL"),
    (3, "MADV_WILLNEED"),
    (4, "MADV_DONTNEED"),
    (8, "MADV_FREE"),
    (9, "MADV_REMOVE"),
    (10, "MADV_DONTFORK"),
    (11, "MADV_DOFORK"),
    (12, "MADV_MERGEABLE"),
    (13, "MADV_UNMERGEABLE"),
    (14, "MADV_HUGEPAGE"),
    (15, "MADV_NOHUGEPAGE"),
    (16, "MADV_DONTDUMP"),
    (17, "MADV_DODUMP"),
    (18, "MADV_WIPEONFORK"),
    (19, "MADV_KEEPONFORK"),
    (20, "MADV_COLD"),
    (21, "MADV_PAGEOUT"),
    (22, "MADV_POPULATE_READ"),
    (23, "MADV_POPULATE_WRITE"),
    (24, "MADV_DONTNEED_LOCKED"),
    (25, "MADV_COLLAPSE"),
    (100, "MADV_HWPOISON"),
    (101, "MADV_SOFT_OFFLINE"),
    (102, "MADV_GUARD_INSTALL"),
    (103, "MADV_GUARD_REMOVE"),
];
const MREMAP: &[(u64, &str)] = &[(1, "MREMAP_MAYMOVE"), (2, "MREMAP_FIXED"), (4, "MREMAP_DONTUNMAP")];
const CLONE_NS: &[(u64, &str)] = &[
    (0x200, "CLONE_FS"),
    (0x400, "CLONE_FILES"),
    (0x20000, "CLONE_NEWNS"),
    (0x40000, "CLONE_SYSVSEM"),
    (0x80, "CLONE_NEWTIME"),
    (0x2000000, "CLONE_NEWCGROUP"),
    (0x4000000, "CLONE_NEWUTS"),
    (0x8000000, "CLONE_NEWIPC"),
    (0x10000000, "CLONE_NEWUSER"),
    (0x20000000, "CLONE_NEWPID"),
    (0x40000000, "CLONE_NEWNET"),
    (0x100, "CLONE_VM"),
    (0x800, "CLONE_SIGHAND"),
    (0x10000, "CLONE_THREAD"),
];
const PRCTL: &[(u64, &str)] = &[
    (1, "PR_SET_PDEATHSIG"),
    (2, "PR_GET_PDEATHSIG"),
    (3, "PR_GET_DUMPABLE"),
    (4, "PR_SET_DUMPABLE"),
    (5, "PR_GET_UNALIGN"),
    (6, "PR_SET_UNALIGN"),
    (7, "PR_GET_KEEPCAPS"),
    (8, "PR_SET_KEEPCAPS"),
    (9, "PR_GET_FPEMU"),
    (10, "PR_SET_FPEMU"),
    (11, "PR_GET_FPEXC"),
    (12, "PR_SET_FPEXC"),
    (13, "PR_GET_TIMING"),
    (14, "PR_SET_TIMING"),
    (15, "PR_SET_NAME"),
    (16, "PR_GET_NAME"),
    (19, "PR_GET_ENDIAN"),
    (20, "PR_SET_ENDIAN"),
    (21, "PR_GET_SECCOMP"),
    (22, "PR_SET_SECCOMP"),
    (23, "PR_CAPBSET_READ"),
    (24, "PR_CAPBSET_DROP"),
    (25, "PR_GET_TSC"),
    (26, "PR_SET_TSC"),
    (27, "PR_GET_SECUREBITS"),
    (28, "PR_SET_SECUREBITS"),
    (29, "PR_SET_TIMERSLACK"),
    (30, "PR_GET_TIMERSLACK"),
    (31, "PR_TASK_PERF_EVENTS_DISABLE"),
    (32, "PR_TASK_PERF_EVENTS_ENABLE"),
    (33, "PR_MCE_KILL"),
    (34, "PR_MCE_KILL_GET"),
    (35, "PR_SET_MM"),
    (36, "PR_SET_CHILD_SUBREAPER"),
    (37, "PR_GET_CHILD_SUBREAPER"),
    (38, "PR_SET_NO_NEW_PRIVS"),
    (39, "PR_GET_NO_NEW_PRIVS"),
    (40, "PR_GET_TID_ADDRESS"),
    (41, "PR_SET_THP_DISABLE"),
    (42, "PR_GET_THP_DISABLE"),
    (45, "PR_SET_FP_MODE"),
    (46, "PR_GET_FP_MODE"),
    (47, "PR_CAP_AMBIENT"),
    (50, "PR_SVE_SET_VL"),
    (51, "PR_SVE_GET_VL"),
    (52, "PR_GET_SPECULATION_CTRL"),
    (53, "PR_SET_SPECULATION_CTRL"),
    (54, "PR_PAC_RESET_KEYS"),
    (55, "PR_SET_TAGGED_ADDR_CTRL"),
    (56, "PR_GET_TAGGED_ADDR_CTRL"),
    (57, "PR_SET_IO_FLUSHER"),
    (58, "PR_GET_IO_FLUSHER"),
    (59, "PR_SET_SYSCALL_USER_DISPATCH"),
    (62, "PR_SCHED_CORE"),
    (65, "PR_SET_MDWE"),
    (66, "PR_GET_MDWE"),
    (67, "PR_SET_MEMORY_MERGE"),
    (68, "PR_GET_MEMORY_MERGE"),
    (0x41555856, "PR_GET_AUXV"),
    (0x53564d41, "PR_SET_VMA"),
    (0x59616d61, "PR_SET_PTRACER"),
];
const IOCTL: &[(u64, &str)] = &[
    (0x5401, "TCGETS"),
    (0x5402, "TCSETS"),
    (0x5403, "TCSETSW"),
    (0x5404, "TCSETSF"),
    (0x5409, "TCSBRK"),
    (0x540A, "TCXONC"),
    (0x540B, "TCFLSH"),
    (0x540E, "TIOCSCTTY"),
    (0x540F, "TIOCGPGRP"),
    (0x5410, "TIOCSPGRP"),
    (0x5411, "TIOCOUTQ"),
    (0x5413, "TIOCGWINSZ"),
    (0x5414, "TIOCSWINSZ"),
    (0x541B, "FIONREAD"),
    (0x5421, "FIONBIO"),
    (0x5422, "TIOCNOTTY"),
    (0x5429, "TIOCGSID"),
    (0x5450, "FIONCLEX"),
    (0x5451, "FIOCLEX"),
    (0x5452, "FIOASYNC"),
    (0x80045430, "TIOCGPTN"),
    (0x40045431, "TIOCSPTLCK"),
    (0x40049409, "FICLONE"),
    (0x4020940d, "FICLONERANGE"),
    (0xc020660b, "FS_IOC_FIEMAP"),
    (0x80086601, "FS_IOC_GETFLAGS"),
    (0x40086602, "FS_IOC_SETFLAGS"),
    (0x80081272, "BLKGETSIZE64"),
    (0x1260, "BLKGETSIZE"),
    (0x1268, "BLKSSZGET"),
    (0x127b, "BLKPBSZGET"),
    (0x1277, "BLKDISCARD"),
    (0x125f, "BLKRAGET"),
];
const SOCK_TYPE: &[(u64, &str)] = &[
    (1, "SOCK_STREAM"),
    (2, "SOCK_DGRAM"),
    (3, "SOCK_RAW"),
    (4, "SOCK_RDM"),
    (5, "SOCK_SEQPACKET"),
    (6, "SOCK_DCCP"),
    (10, "SOCK_PACKET"),
];
const FD_CLOEXEC: &[(u64, &str)] = &[(1, "FD_CLOEXEC")];
const LEASE: &[(u64, &str)] = &[(0, "F_RDLCK"), (1, "F_WRLCK"), (2, "F_UNLCK")];
const DN: &[(u64, &str)] = &[
    (1, "DN_ACCESS"),
    (2, "DN_MODIFY"),
    (4, "DN_CREATE"),
    (8, "DN_DELETE"),
    (0x10, "DN_RENAME"),
    (0x20, "DN_ATTRIB"),
    (0x80000000, "DN_MULTISHOT"),
];
const SEALS: &[(u64, &str)] = &[
    (1, "F_SEAL_SEAL"),
    (2, "F_SEAL_SHRINK"),
    (4, "F_SEAL_GROW"),
    (8, "F_SEAL_WRITE"),
    (0x10, "F_SEAL_FUTURE_WRITE"),
    (0x20, "F_SEAL_EXEC"),
];
const SIGNALS: &[(u64, &str)] = &[
    (1, "SIGHUP"),
    (2, "SIGINT"),
    (3, "SIGQUIT"),
    (4, "SIGILL"),
    (5, "SIGTRAP"),
    (6, "SIGABRT"),
    (7, "SIGBUS"),
    (8, "SIGFPE"),
    (9, "SIGKILL"),
    (10, "SIGUSR1"),
    (11, "SIGSEGV"),
    (12, "SIGUSR2"),
    (13, "SIGPIPE"),
    (14, "SIGALRM"),
    (15, "SIGTERM"),
    (16, "SIGSTKFLT"),
    (17, "SIGCHLD"),
    (18, "SIGCONT"),
    (19, "SIGSTOP"),
    (20, "SIGTSTP"),
    (21, "SIGTTIN"),
    (22, "SIGTTOU"),
    (23, "SIGURG"),
    (24, "SIGXCPU"),
    (25, "SIGXFSZ"),
    (26, "SIGVTALRM"),
    (27, "SIGPROF"),
    (28, "SIGWINCH"),
    (29, "SIGIO"),
    (30, "SIGPWR"),
    (31, "SIGSYS"),
];

/// [`specs`] of syscall number `nr`: each number's looked up by name once (matching names costs
/// an event line more than the rest of its arguments).
pub fn specs_nr(nr: u16) -> &'static [ArgSpec] {
    static BY_NR: std::sync::OnceLock<Vec<&'static [ArgSpec]>> = std::sync::OnceLock::new();
    let by_nr = BY_NR.get_or_init(|| (0..=u16::MAX).map(|nr| specs(crate::syscall_name(nr).unwrap_or(""))).collect());
    by_nr[usize::from(nr)]
}

/// [`specs_nr`] in the order of a JSON object's keys: by name, and of those sharing a name the
/// last first. A writer taking, of each name, the first one [`shown`] writes what [`decoded`]
/// gives, sorted by name with the last of each name kept, without building it.
pub fn specs_nr_by_name(nr: u16) -> &'static [ArgSpec] {
    static BY_NR: std::sync::OnceLock<Vec<Vec<ArgSpec>>> = std::sync::OnceLock::new();
    let by_nr = BY_NR.get_or_init(|| {
        // Up to the last number that has any (a few hundred), not every possible one.
        let last = (0..=u16::MAX).rev().find(|&nr| !specs_nr(nr).is_empty()).unwrap_or(0);
        (0..=last)
            .map(|nr| {
                let mut v: Vec<(usize, ArgSpec)> = specs_nr(nr).iter().copied().enumerate().collect();
                v.sort_by(|a, b| a.1.name.cmp(b.1.name).then(b.0.cmp(&a.0)));
                v.into_iter().map(|(_, s)| s).collect()
            })
            .collect()
    });
    by_nr.get(usize::from(nr)).map_or(&[], |v| v.as_slice())
}

/// The decoded arguments of syscall `name` (see the module docs); empty for syscalls whose
/// layout records no flag, mode or address.
pub fn specs(name: &str) -> &'static [ArgSpec] {
    const OPEN: &[ArgSpec] = &[a(Flags, "flags", OpenFlags), aw(Mode, "mode", Octal, When::Creates)];
    const AT: &[ArgSpec] = &[a(Flags, "flags", Bits(AT_FLAGS, "0"))];
    const CHMOD: &[ArgSpec] = &[a(Mode, "mode", Octal)];
    const ACCESS: &[ArgSpec] = &[a(Mode, "mode", Bits(ACCESS_MODE, "F_OK"))];
    const PTR: &[ArgSpec] = &[a(Addr, "addr", Ptr)];
    const SPLICE_ARGS: &[ArgSpec] = &[a(Flags, "flags", Bits(SPLICE, "0"))];
    match name {
        "open" | "openat" => OPEN,
        "creat" => CHMOD,
        "openat2" | "open_by_handle_at" => list![a(Flags, "flags", OpenFlags)],
        "preadv2" | "pwritev2" => list![a(Flags, "flags", Bits(RWF, "0"))],
        "splice" | "tee" | "vmsplice" => SPLICE_ARGS,
        // Must be 0 (no flag is defined).
        "copy_file_range" => list![a(Flags, "flags", Dec)],
        "pidfd_getfd" => list![a(Addr, "targetfd", Dec), a(Flags, "flags", Dec)],
        "epoll_create1" => list![a(Flags, "flags", Bits(EPOLL_FLAGS, "0"))],
        "inotify_init1" => list![a(Flags, "flags", Bits(IN_INIT_FLAGS, "0"))],
        "memfd_secret" => list![a(Flags, "flags", Bits(CLOEXEC_ONLY, "0"))],
        "userfaultfd" => list![a(Flags, "flags", Bits(UFFD_FLAGS, "0"))],
        "fanotify_init" => list![a(Flags, "flags", Bits(FAN_INIT, "FAN_CLASS_NOTIF"))],
        "memfd_create" => list![a(Flags, "flags", Bits(MFD_FLAGS, "0"))],
        "eventfd2" => list![a(Flags, "flags", Bits(EFD_FLAGS, "0"))],
        "timerfd_create" => list![a(Flags, "flags", Bits(TFD_FLAGS, "0"))],
        "pidfd_open" => list![a(Flags, "flags", Bits(PIDFD_FLAGS, "0"))],
        "signalfd4" => list![a(Flags, "flags", Bits(SFD_FLAGS, "0"))],
        // The type argument holds the flags too (the `flags` column repeats them).
        "socket" | "socketpair" => list![a(Mode, "type", SockType)],
        "pipe2" | "dup3" => list![a(Flags, "flags", FdFlags)],
        "accept4" => list![a(Flags, "flags", Bits(SOCK_FLAGS, "0"))],
        // The argument is a number or flags for some commands, a pointer (struct flock, f_owner_ex,
        // a hint) for the others: those are left out, the command says what the call did.
        "fcntl" => list![a(Flags, "cmd", Enum(FCNTL_CMD, "F_")), aw(Mode, "arg", Dec, When::FcntlTakesValue)],
        "close_range" => list![a(Addr, "last", LastFd), a(Flags, "flags", Bits(CLOSE_RANGE, "0"))],
        "lseek" => list![a(Flags, "whence", Enum(WHENCE, "SEEK_"))],
        "sync_file_range" => list![a(Flags, "flags", Bits(SYNC_FILE_RANGE, "0"))],
        "msync" => list![a(Addr, "addr", Ptr), a(Flags, "flags", Bits(MS_SYNC, "0"))],
        "fadvise64" => list![a(Flags, "advice", Enum(FADV, "POSIX_FADV_"))],
        "fallocate" => list![a(Mode, "mode", Bits(FALLOC, "0"))],
        "ioctl" => list![a(Flags, "request", IoctlRequest), aw(Addr, "src_fd", Dec, When::IoctlFd)],
        "flock" => list![a(Flags, "operation", Bits(LOCK_OP, "0"))],
        "fsetxattr" | "setxattr" | "lsetxattr" => list![a(Flags, "flags", Bits(XATTR, "0"))],
        "execveat" => list![a(Flags, "flags", Bits(EXECVEAT, "0"))],
        "access" => ACCESS,
        "faccessat" => ACCESS,
        "faccessat2" => list![a(Mode, "mode", Bits(ACCESS_MODE, "F_OK")), a(Flags, "flags", Bits(AT_EACCESS, "0"))],
        "chmod" | "mkdir" | "fchmod" | "mkdirat" | "fchmodat" => CHMOD,
        "fchmodat2" => list![a(Mode, "mode", Octal), a(Flags, "flags", Bits(AT_FLAGS, "0"))],
        "mknod" | "mknodat" => list![a(Mode, "mode", FileMode), aw(Addr, "dev", Dev, When::DeviceNode)],
        "mount" => list![a(Flags, "flags", Bits(MOUNT, "0"))],
        "newfstatat" | "fchownat" | "utimensat" | "linkat" | "setxattrat" | "getxattrat" | "listxattrat"
        | "removexattrat" => AT,
        "statx" => list![a(Flags, "flags", Bits(AT_FLAGS, "AT_STATX_SYNC_AS_STAT")), a(Mode, "mask", StatxMask)],
        "unlinkat" => list![a(Flags, "flags", Bits(AT_REMOVEDIR, "0"))],
        "renameat2" => list![a(Flags, "flags", Bits(RENAME, "0"))],
        "inotify_add_watch" => list![a(Flags, "mask", Bits(IN_MASK, "0"))],
        "open_tree" | "open_tree_attr" => list![a(Flags, "flags", Bits(OPEN_TREE, "0"))],
        "mmap" => list![a(Addr, "addr", Ptr), a(Mode, "prot", Bits(PROT, "PROT_NONE")), a(Flags, "flags", MmapFlags)],
        "mprotect" => list![a(Addr, "addr", Ptr), a(Mode, "prot", Bits(PROT, "PROT_NONE"))],
        "madvise" => list![a(Addr, "addr", Ptr), a(Flags, "advice", Enum(MADV, "MADV_"))],
        "mremap" => list![a(Addr, "old_address", Ptr), a(Flags, "flags", Bits(MREMAP, "0"))],
        "munmap" | "mlock" | "munlock" | "mincore" => PTR,
        "clone" | "clone3" => list![a(Flags, "flags", CloneFlags)],
        "unshare" => list![a(Flags, "flags", Bits(CLONE_NS, "0"))],
        "prctl" => list![a(Flags, "option", Enum(PRCTL, "PR_"))],
        // The futex word's address (which lock) and the operation; the value, timeout and second
        // address depend on the operation and are not recorded.
        "futex" => list![a(Addr, "uaddr", Ptr), a(Flags, "op", FutexOp)],
        _ => list![],
    }
}

const WHENCE: &[(u64, &str)] = &[(0, "SEEK_SET"), (1, "SEEK_CUR"), (2, "SEEK_END"), (3, "SEEK_DATA"), (4, "SEEK_HOLE")];

/// Whether argument `spec` of an event with these `flags` and `mode` is printed.
pub fn shown(spec: &ArgSpec, flags: u32, _mode: u32) -> bool {
    match spec.when {
        When::Always => true,
        // O_CREAT, or O_TMPFILE (which includes O_DIRECTORY).
        When::Creates => flags & 0o100 != 0 || flags & 0o20200000 == 0o20200000,
        When::FcntlTakesValue => {
            matches!(flags, 0 | 2 | 4 | 8 | 10 | 1024 | 1026 | 1027 | 1030 | 1031 | 1033)
        }
        When::IoctlFd => flags == 0x40049409,
        When::DeviceNode => matches!(_mode & 0o170000, 0o020000 | 0o060000),
    }
}

/// Writes value `v` of argument `spec` of a syscall whose flags and mode columns are `flags`
/// and `mode` (some arguments read as the other column says: fcntl's by its command).
pub fn write_value(w: &mut impl Write, spec: &ArgSpec, v: u64, flags: u32) -> fmt::Result {
    let show = match (spec.show, spec.name) {
        // fcntl's argument by its command.
        (Dec, "arg") => match flags {
            2 => Bits(FD_CLOEXEC, "0"),
            4 => OpenFlags,
            10 => Enum(SIGNALS, "SIG"),
            1024 => Enum(LEASE, "F_"),
            1026 => Bits(DN, "0"),
            1033 => Bits(SEALS, "0"),
            _ => Dec,
        },
        (s, _) => s,
    };
    match show {
        Dec => write!(w, "{}", v as i64),
        Ptr if v == 0 => w.write_str("NULL"),
        Ptr => write!(w, "0x{v:x}"),
        Octal => write!(w, "0{:o}", v & 0o7777),
        FileMode => write_file_mode(w, v),
        Enum(t, prefix) => match t.iter().find(|e| e.0 == v) {
            Some((_, n)) => w.write_str(n),
            None => write!(w, "0x{v:x} /* {prefix}??? */"),
        },
        Bits(t, zero) => write_bits(w, v, t, zero),
        OpenFlags => crate::args::write_open_flags(w, v as u32),
        FdFlags => {
            let mut s = String::new();
            crate::args::write_open_flags(&mut s, v as u32 & !3)?;
            match s.strip_prefix("O_RDONLY|") {
                Some(rest) => w.write_str(rest),
                None => w.write_str("0"),
            }
        }
        MmapFlags => write_mmap_flags(w, v),
        CloneFlags => write_clone_flags(w, v),
        SockType => {
            match SOCK_TYPE.iter().find(|e| e.0 == v & 0xf) {
                Some((_, n)) => w.write_str(n)?,
                None => write!(w, "{:#x} /* SOCK_??? */", v & 0xf)?,
            }
            for (bit, n) in SOCK_FLAGS {
                if v & bit != 0 {
                    write!(w, "|{n}")?;
                }
            }
            let rest = v & !0xf & !(O_NONBLOCK | O_CLOEXEC);
            if rest != 0 {
                write!(w, "|0x{rest:x}")?;
            }
            Ok(())
        }
        StatxMask => write_statx_mask(w, v),
        IoctlRequest => write_ioctl(w, v),
        Dev => write!(w, "makedev(0x{:x}, 0x{:x})", (v >> 8) & 0xfff, (v & 0xff) | ((v >> 12) & 0xfff00)),
        LastFd if v as u32 == u32::MAX => w.write_str("~0"),
        LastFd => write!(w, "{}", v as u32),
        FutexOp => write_futex_op(w, v),
    }
}

/// A futex operation as strace names it: `FUTEX_WAIT_PRIVATE`,
/// `FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME`, `0x7f /* FUTEX_??? */`.
pub fn write_futex_op(w: &mut impl Write, v: u64) -> fmt::Result {
    let cmd = v & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
    match FUTEX_CMD.iter().find(|e| e.0 == cmd) {
        Some((_, n)) => w.write_str(n)?,
        None => write!(w, "0x{cmd:x} /* FUTEX_??? */")?,
    }
    if v & FUTEX_PRIVATE_FLAG != 0 {
        w.write_str("_PRIVATE")?;
    }
    if v & FUTEX_CLOCK_REALTIME != 0 {
        w.write_str("|FUTEX_CLOCK_REALTIME")?;
    }
    Ok(())
}

/// The decoded arguments of an event of syscall `name` whose columns hold these `flags`, `mode`
/// and `addr`: `(name, text)` pairs in order, those left out skipped (for JSON).
pub fn decoded(name: &str, flags: u32, mode: u32, addr: u64) -> Vec<(&'static str, String)> {
    specs(name)
        .iter()
        .filter(|s| shown(s, flags, mode))
        .map(|s| {
            let mut t = String::new();
            let _ = write_value(&mut t, s, s.value(flags, mode, addr), flags);
            (s.name, t)
        })
        .collect()
}

/// Names of `v`'s bits from `t` joined with `|`, multi-bit entries first when all their bits are
/// set; unnamed bits in hex; `zero` for 0.
fn write_bits(w: &mut impl Write, v: u64, t: &[(u64, &str)], zero: &str) -> fmt::Result {
    if v == 0 {
        return w.write_str(zero);
    }
    let mut rest = v;
    let mut sep = "";
    for &(bits, name) in t {
        if bits != 0 && rest & bits == bits {
            write!(w, "{sep}{name}")?;
            sep = "|";
            rest &= !bits;
        }
    }
    if rest != 0 {
        write!(w, "{sep}0x{rest:x}")?;
    }
    Ok(())
}

fn write_file_mode(w: &mut impl Write, v: u64) -> fmt::Result {
    const TYPES: &[(u64, &str)] = &[
        (0o140000, "S_IFSOCK"),
        (0o120000, "S_IFLNK"),
        (0o100000, "S_IFREG"),
        (0o060000, "S_IFBLK"),
        (0o040000, "S_IFDIR"),
        (0o020000, "S_IFCHR"),
        (0o010000, "S_IFIFO"),
    ];
    let t = v & 0o170000;
    match TYPES.iter().find(|e| e.0 == t) {
        Some((_, n)) => write!(w, "{n}|0{:o}", v & 0o7777),
        None if t == 0 => write!(w, "0{:o}", v & 0o7777),
        None => write!(w, "0{:o}", v),
    }
}

fn write_mmap_flags(w: &mut impl Write, v: u64) -> fmt::Result {
    const TYPE: &[(u64, &str)] =
        &[(1, "MAP_SHARED"), (2, "MAP_PRIVATE"), (3, "MAP_SHARED_VALIDATE"), (4, "MAP_DROPPABLE")];
    const FLAGS: &[(u64, &str)] = &[
        (0x10, "MAP_FIXED"),
        (0x20, "MAP_ANONYMOUS"),
        (0x40, "MAP_32BIT"),
        (0x100, "MAP_GROWSDOWN"),
        (0x800, "MAP_DENYWRITE"),
        (0x1000, "MAP_EXECUTABLE"),
        (0x2000, "MAP_LOCKED"),
        (0x4000, "MAP_NORESERVE"),
        (0x8000, "MAP_POPULATE"),
        (0x10000, "MAP_NONBLOCK"),
        (0x20000, "MAP_STACK"),
        (0x40000, "MAP_HUGETLB"),
        (0x80000, "MAP_SYNC"),
        (0x100000, "MAP_FIXED_NOREPLACE"),
        (0x4000000, "MAP_UNINITIALIZED"),
    ];
    match TYPE.iter().find(|e| e.0 == v & 0xf) {
        Some((_, n)) => w.write_str(n)?,
        None => write!(w, "{:#x} /* MAP_??? */", v & 0xf)?,
    }
    let huge = (v >> 26) & 0x3f;
    let mut rest = v & !0xf & !(0x3f << 26);
    for &(bit, name) in FLAGS {
        if rest & bit != 0 {
            write!(w, "|{name}")?;
            rest &= !bit;
        }
    }
    if huge != 0 {
        match huge {
            21 => w.write_str("|MAP_HUGE_2MB")?,
            30 => w.write_str("|MAP_HUGE_1GB")?,
            h => write!(w, "|{h}<<MAP_HUGE_SHIFT")?,
        }
    }
    if rest != 0 {
        write!(w, "|0x{rest:x}")?;
    }
    Ok(())
}

fn write_clone_flags(w: &mut impl Write, v: u64) -> fmt::Result {
    const CLONE: &[(u64, &str)] = &[
        (0x100, "CLONE_VM"),
        (0x200, "CLONE_FS"),
        (0x400, "CLONE_FILES"),
        (0x800, "CLONE_SIGHAND"),
        (0x1000, "CLONE_PIDFD"),
        (0x2000, "CLONE_PTRACE"),
        (0x4000, "CLONE_VFORK"),
        (0x8000, "CLONE_PARENT"),
        (0x10000, "CLONE_THREAD"),
        (0x20000, "CLONE_NEWNS"),
        (0x40000, "CLONE_SYSVSEM"),
        (0x80000, "CLONE_SETTLS"),
        (0x100000, "CLONE_PARENT_SETTID"),
        (0x200000, "CLONE_CHILD_CLEARTID"),
        (0x400000, "CLONE_DETACHED"),
        (0x800000, "CLONE_UNTRACED"),
        (0x1000000, "CLONE_CHILD_SETTID"),
        (0x2000000, "CLONE_NEWCGROUP"),
        (0x4000000, "CLONE_NEWUTS"),
        (0x8000000, "CLONE_NEWIPC"),
        (0x10000000, "CLONE_NEWUSER"),
        (0x20000000, "CLONE_NEWPID"),
        (0x40000000, "CLONE_NEWNET"),
        (0x80000000, "CLONE_IO"),
    ];
    let mut s = String::new();
    write_bits(&mut s, v & !0xff, CLONE, "")?;
    let sig = v & 0xff;
    if sig != 0 {
        if !s.is_empty() {
            s.push('|');
        }
        match SIGNALS.iter().find(|e| e.0 == sig) {
            Some((_, n)) => s.push_str(n),
            None => {
                let _ = write!(s, "{sig}");
            }
        }
    }
    w.write_str(if s.is_empty() { "0" } else { &s })
}

fn write_statx_mask(w: &mut impl Write, v: u64) -> fmt::Result {
    const MASK: &[(u64, &str)] = &[
        (0x7ff, "STATX_BASIC_STATS"),
        (1, "STATX_TYPE"),
        (2, "STATX_MODE"),
        (4, "STATX_NLINK"),
        (8, "STATX_UID"),
        (0x10, "STATX_GID"),
        (0x20, "STATX_ATIME"),
        (0x40, "STATX_MTIME"),
        (0x80, "STATX_CTIME"),
        (0x100, "STATX_INO"),
        (0x200, "STATX_SIZE"),
        (0x400, "STATX_BLOCKS"),
        (0x800, "STATX_BTIME"),
        (0x1000, "STATX_MNT_ID"),
        (0x2000, "STATX_DIOALIGN"),
        (0x4000, "STATX_MNT_ID_UNIQUE"),
        (0x8000, "STATX_SUBVOL"),
        (0x10000, "STATX_WRITE_ATOMIC"),
        (0x20000, "STATX_DIO_READ_ALIGN"),
    ];
    write_bits(w, v, MASK, "0")
}

fn write_ioctl(w: &mut impl Write, v: u64) -> fmt::Result {
    if let Some((_, n)) = IOCTL.iter().find(|e| e.0 == v) {
        return w.write_str(n);
    }
    // The request's encoding, as strace writes one it has no name for.
    let (dir, size, ty, nr) = ((v >> 30) & 3, (v >> 16) & 0x3fff, (v >> 8) & 0xff, v & 0xff);
    let dir = ["_IOC_NONE", "_IOC_WRITE", "_IOC_READ", "_IOC_READ|_IOC_WRITE"][dir as usize];
    write!(w, "_IOC({dir}, 0x{ty:x}, 0x{nr:x}, 0x{size:x})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::{all, desc, NONE};

    fn show(name: &str, arg: &str, v: u64, flags: u32) -> String {
        let spec = specs(name).iter().find(|s| s.name == arg).unwrap_or_else(|| panic!("{name} {arg}"));
        let mut s = String::new();
        write_value(&mut s, spec, v, flags).unwrap();
        s
    }

    /// Every flag, mode or address slot a syscall's layout records has a decoder: none is printed
    /// raw by default.
    #[test]
    fn every_recorded_flag_mode_and_address_has_a_decoder() {
        for (nr, name) in all() {
            let d = desc(nr);
            let have = |slot: Slot| specs(name).iter().any(|s| s.slot == slot);
            if d.flags != NONE {
                // socket's are in its type; accept shares accept4's layout but has no fourth argument.
                assert!(have(Slot::Flags) || matches!(name, "socket" | "socketpair" | "accept"), "{name}: flags");
            }
            if d.mode != NONE {
                assert!(have(Slot::Mode), "{name}: mode");
            }
            let fd_like = d.has(crate::SysDesc::ADDR_FD | crate::SysDesc::FD_PAIR);
            if d.addr != NONE && !fd_like {
                assert!(have(Slot::Addr), "{name}: addr");
            }
        }
    }

    #[test]
    fn arguments_read_as_strace_prints_them() {
        assert_eq!(show("fcntl", "cmd", 6, 0), "F_SETLK");
        assert_eq!(show("fcntl", "cmd", 99, 0), "0x63 /* F_??? */");
        assert_eq!(show("fcntl", "arg", 0o4002, 4), "O_RDWR|O_NONBLOCK");
        assert_eq!(show("fcntl", "arg", 1, 2), "FD_CLOEXEC");
        assert_eq!(show("fadvise64", "advice", 4, 0), "POSIX_FADV_DONTNEED");
        assert_eq!(show("mmap", "prot", 3, 0), "PROT_READ|PROT_WRITE");
        assert_eq!(show("mmap", "prot", 0, 0), "PROT_NONE");
        assert_eq!(show("mmap", "flags", 0x22, 0), "MAP_PRIVATE|MAP_ANONYMOUS");
        assert_eq!(show("mmap", "flags", 0x812, 0), "MAP_PRIVATE|MAP_FIXED|MAP_DENYWRITE");
        assert_eq!(show("mmap", "addr", 0, 0), "NULL");
        assert_eq!(show("clone", "flags", 0x1200011, 0), "CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD");
        assert_eq!(show("socket", "type", 0o2000001, 0), "SOCK_STREAM|SOCK_CLOEXEC");
        assert_eq!(show("flock", "operation", 6, 0), "LOCK_EX|LOCK_NB");
        assert_eq!(show("access", "mode", 0, 0), "F_OK");
        assert_eq!(show("access", "mode", 6, 0), "R_OK|W_OK");
        assert_eq!(show("statx", "mask", 0x17ff, 0), "STATX_BASIC_STATS|STATX_MNT_ID");
        assert_eq!(show("ioctl", "request", 0x5401, 0), "TCGETS");
        assert_eq!(show("ioctl", "request", 0x80087601, 0), "_IOC(_IOC_READ, 0x76, 0x1, 0x8)");
        assert_eq!(show("mknod", "mode", 0o020644, 0), "S_IFCHR|0644");
        assert_eq!(show("close_range", "last", u32::MAX as u64, 0), "~0");
        assert_eq!(show("pipe2", "flags", 0o2004000, 0), "O_NONBLOCK|O_CLOEXEC");
        assert_eq!(show("madvise", "advice", 14, 0), "MADV_HUGEPAGE");
        assert_eq!(show("prctl", "option", 15, 0), "PR_SET_NAME");
        assert_eq!(show("unlinkat", "flags", 0x200, 0), "AT_REMOVEDIR");
        assert_eq!(show("inotify_add_watch", "mask", 0x18 | 0x100, 0), "IN_CLOSE|IN_CREATE");
        assert_eq!(show("futex", "op", 128, 0), "FUTEX_WAIT_PRIVATE");
        assert_eq!(show("futex", "op", 1, 0), "FUTEX_WAKE");
        assert_eq!(show("futex", "op", 9 | 128 | 256, 0), "FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME");
        assert_eq!(show("futex", "uaddr", 0x7f12_3456_7890, 0), "0x7f1234567890");
    }

    #[test]
    fn pointers_and_values_without_meaning_are_left_out() {
        let fcntl = specs("fcntl");
        let arg = fcntl.iter().find(|s| s.name == "arg").unwrap();
        // F_SETLK's argument is the struct flock pointer: not printed as a number.
        assert!(!shown(arg, 6, 0) && !shown(arg, 7, 0) && !shown(arg, 37, 0));
        assert!(shown(arg, 4, 0) && shown(arg, 0, 0));
        let open = specs("openat").iter().find(|s| s.name == "mode").unwrap();
        assert!(!shown(open, 0o2000000, 0) && shown(open, 0o101, 0));
    }
}

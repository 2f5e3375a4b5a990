//! The planner: walks the recorded events in order through a model of processes, fd tables,
//! open file descriptions and address spaces, and emits each thread's operations with the
//! dependencies that keep cross-thread causality.

mod copies;
mod files;
mod memory;
mod model;
mod paths;

use super::mapping::Mapper;
use super::res::{OpRef, Res};
use super::world::{ObjKind, World};
use crate::op::{Op, OpKind, NONE};
use crate::plan::MAX_IO_BYTES;
use crate::source::TraceEvents;
use latscope_event::syscalls::SysDesc;
use latscope_event::{syscall_name, EventKind, FdType, ProcOp};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

const O_ACCMODE: u32 = 3;
const O_CREAT: u32 = 0o100;
const O_EXCL: u32 = 0o200;
const O_TRUNC: u32 = 0o1000;
const O_APPEND: u32 = 0o2000;
const O_DIRECTORY: u32 = 0o200000;
const O_TMPFILE_DIR: u32 = 0o20000000;
const O_CLOEXEC: u32 = 0o2000000;
const AT_SYMLINK_NOFOLLOW: u32 = 0x100;
const AT_REMOVEDIR: u32 = 0x200;
const AT_EMPTY_PATH: u32 = 0x1000;
const RENAME_EXCHANGE: u32 = 2;
const CLONE_VM: u32 = 0x100;
const CLONE_FILES: u32 = 0x400;
const CLONE_THREAD: u32 = 0x10000;
const MAP_SHARED: u32 = 1;
const MAP_ANONYMOUS: u32 = 0x20;
const MAP_FIXED: u32 = 0x10;
const MAP_FIXED_NOREPLACE: u32 = 0x100000;
const PROT_WRITE: u32 = 2;
const SEEK_END: u32 = 2;
const FALLOC_FL_KEEP_SIZE: u32 = 1;
const FALLOC_FL_COLLAPSE_RANGE: u32 = 8;
const FALLOC_FL_INSERT_RANGE: u32 = 0x20;
const CLOSE_RANGE_UNSHARE: u32 = 2;
const FIOCLEX: u32 = 0x5451;
const FIONCLEX: u32 = 0x5450;
const CLOSE_RANGE_CLOEXEC: u32 = 4;
const EBADF: i64 = 9;
const ENOENT: i64 = 2;
const EEXIST: i64 = 17;
const ENOTEMPTY: i64 = 39;
const EISDIR: i64 = 21;
const ENOTDIR: i64 = 20;
const EINVAL: i64 = 22;

/// Reasons an operation is left out (printed by prepare and stored in the plan).
pub mod why {
    /// Not file I/O.
    pub const NOT_IO: &str = "not file I/O (processes, memory, waits, signals, ...)";
    /// A syscall the replay does not perform.
    pub const UNSUPPORTED: &str = "not replayed by latscope";
    /// The fd is a pipe, socket, ...
    pub const NOT_FILE: &str = "fd is not a file (pipe, socket, terminal, ...)";
    /// The fd is unknown.
    pub const UNKNOWN_FD: &str = "fd not known (opened before the recording and not in its snapshot)";
    /// The fd comes from an open the replay does not perform.
    pub const FD_NOT_REPLAYED: &str = "fd opened by an operation that is not replayed";
    /// Failed with EBADF.
    pub const EBADF: &str = "failed with EBADF in the recording (no open file to replay on)";
    /// Interrupted.
    pub const INTERRUPTED: &str = "interrupted in the recording (EINTR)";
    /// Device node.
    pub const DEVICE: &str = "device node (refused)";
    /// FIFO.
    pub const FIFO: &str = "FIFO (a replay would block on it)";
    /// Locks.
    pub const LOCKS: &str = "file locks and other fcntl commands are not replayed (the replay is one process)";
    /// exec.
    pub const EXEC: &str = "exec: programs are not run (the fds it closes are)";
    /// mknod.
    pub const MKNOD: &str = "device nodes and sockets are not created (refused)";
    /// chdir.
    pub const CWD: &str = "working directory changes need no replay (paths are recorded absolute)";
    /// Symlink leading out.
    pub const SYMLINK_OUT: &str = "symlink target outside the sandbox (refused)";
    /// dup2 onto itself.
    pub const SELF_DUP: &str = "dup2 onto itself does nothing";
    /// Anonymous memory.
    pub const ANON: &str = "anonymous memory is not file I/O";
    /// Mapping unknown.
    pub const NO_MAPPING: &str = "no file mapping at that address";
    /// Too large.
    pub const TOO_LARGE: &str = "more bytes than one call can transfer";
    /// Data into a replayed file from something else.
    pub const COPY_FROM_OTHER: &str =
        "data copied into a file from a pipe, socket or file the replay does not have (replayed as a divergence)";
    /// splice from or into a pipe the model does not know.
    pub const SPLICE_UNKNOWN: &str =
        "splice between a file and a pipe (or fd) the recording does not know (into a file: replayed as a divergence)";
    /// splice that moved nothing.
    pub const SPLICE_NOTHING: &str = "splice that moved no data (failed, or at the end of the file)";
    /// tee and vmsplice.
    pub const TEE: &str = "tee and vmsplice move data between pipes and memory, not files";
    /// io_uring.
    pub const IO_URING: &str =
        "io_uring: the operations submitted through a ring are not visible to the recording (not replayed)";
    /// Other ioctls.
    pub const IOCTL: &str = "ioctl requests other than FICLONE, FICLONERANGE, FIOCLEX and FIONCLEX are not replayed";
    /// xattrs.
    pub const XATTR: &str =
        "extended attributes: the recording holds neither names nor values (a change is replayed as a divergence)";
}

/// How each syscall is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum H {
    Open,
    Creat,
    Close,
    CloseRange,
    Read(OpKind),
    Write(OpKind),
    Lseek,
    FdSimple(OpKind),
    Sync,
    Ftruncate,
    Truncate,
    Fallocate,
    Fstat(bool),
    Stat { nofollow: bool, statx: bool, at: bool },
    Access,
    Statfs,
    Mkdir,
    Unlinkat,
    Rmdir,
    Unlink,
    Rename,
    Link,
    Symlink,
    Readlink,
    Chmod,
    Fchmod,
    Chown { nofollow: bool },
    Fchown,
    Utimens,
    Getdents,
    Dup,
    Dup2,
    Fcntl,
    Mmap,
    Munmap,
    Msync,
    Clone,
    Fork,
    Vfork,
    Pipe,
    NewFd,
    Cwd,
    Ioctl,
    Unshare,
    Exec,
    Mknod,
    Copy(OpKind),
    Splice,
    IoUring,
    Xattr(OpKind),
    Unsupported,
    NotIo,
}

fn handler(name: &str) -> H {
    use OpKind as K;
    match name {
        "open" | "openat" | "openat2" => H::Open,
        "creat" => H::Creat,
        "close" => H::Close,
        "close_range" => H::CloseRange,
        "read" => H::Read(K::Read),
        "readv" => H::Read(K::Readv),
        "pread64" => H::Read(K::Pread),
        "preadv" | "preadv2" => H::Read(K::Preadv),
        "write" => H::Write(K::Write),
        "writev" => H::Write(K::Writev),
        "pwrite64" => H::Write(K::Pwrite),
        "pwritev" | "pwritev2" => H::Write(K::Pwritev),
        "lseek" => H::Lseek,
        "fsync" => H::FdSimple(K::Fsync),
        "fdatasync" => H::FdSimple(K::Fdatasync),
        "syncfs" => H::FdSimple(K::Syncfs),
        "sync_file_range" => H::FdSimple(K::SyncFileRange),
        "fadvise64" => H::FdSimple(K::Fadvise),
        "readahead" => H::FdSimple(K::Readahead),
        "fstatfs" => H::FdSimple(K::Fstatfs),
        "sync" => H::Sync,
        "ftruncate" => H::Ftruncate,
        "truncate" => H::Truncate,
        "fallocate" => H::Fallocate,
        "fstat" => H::Fstat(false),
        "stat" => H::Stat { nofollow: false, statx: false, at: false },
        "lstat" => H::Stat { nofollow: true, statx: false, at: false },
        "newfstatat" => H::Stat { nofollow: false, statx: false, at: true },
        "statx" => H::Stat { nofollow: false, statx: true, at: true },
        "access" | "faccessat" | "faccessat2" => H::Access,
        "statfs" => H::Statfs,
        "mkdir" | "mkdirat" => H::Mkdir,
        "rmdir" => H::Rmdir,
        "unlink" => H::Unlink,
        "unlinkat" => H::Unlinkat,
        "rename" | "renameat" | "renameat2" => H::Rename,
        "link" | "linkat" => H::Link,
        "symlink" | "symlinkat" => H::Symlink,
        "readlink" | "readlinkat" => H::Readlink,
        "chmod" | "fchmodat" | "fchmodat2" => H::Chmod,
        "fchmod" => H::Fchmod,
        "chown" => H::Chown { nofollow: false },
        "lchown" => H::Chown { nofollow: true },
        "fchownat" => H::Chown { nofollow: false },
        "fchown" => H::Fchown,
        "utimensat" | "utime" | "utimes" | "futimesat" => H::Utimens,
        "getdents" | "getdents64" => H::Getdents,
        "dup" => H::Dup,
        "dup2" | "dup3" => H::Dup2,
        "fcntl" => H::Fcntl,
        "mmap" => H::Mmap,
        "munmap" => H::Munmap,
        "msync" => H::Msync,
        "clone" | "clone3" => H::Clone,
        "fork" => H::Fork,
        "vfork" => H::Vfork,
        "pipe" | "pipe2" | "socketpair" => H::Pipe,
        "socket" | "accept" | "accept4" | "eventfd" | "eventfd2" | "memfd_create" | "memfd_secret" | "epoll_create"
        | "epoll_create1" | "inotify_init" | "inotify_init1" | "timerfd_create" | "signalfd" | "signalfd4"
        | "userfaultfd" | "pidfd_open" | "fanotify_init" | "io_uring_setup" | "perf_event_open" | "bpf"
        | "open_by_handle_at" | "open_tree" | "open_tree_attr" => H::NewFd,
        "chdir" | "fchdir" => H::Cwd,
        "ioctl" => H::Ioctl,
        "unshare" => H::Unshare,
        "execve" | "execveat" => H::Exec,
        "mknod" | "mknodat" => H::Mknod,
        "copy_file_range" => H::Copy(K::CopyRange),
        "sendfile" => H::Copy(K::Sendfile),
        "splice" | "tee" | "vmsplice" => H::Splice,
        "io_uring_enter" | "io_uring_register" => H::IoUring,
        "setxattr" | "lsetxattr" | "fsetxattr" => H::Xattr(K::Setxattr),
        "getxattr" | "lgetxattr" | "fgetxattr" => H::Xattr(K::Getxattr),
        "listxattr" | "llistxattr" | "flistxattr" => H::Xattr(K::Listxattr),
        "removexattr" | "lremovexattr" | "fremovexattr" => H::Xattr(K::Removexattr),
        _ => {
            let d = latscope_event::syscalls::desc(latscope_event::syscall_nr(name).unwrap_or(u16::MAX));
            if d.is_io_related() {
                H::Unsupported
            } else {
                H::NotIo
            }
        }
    }
}

/// What an open file description refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    File,
    Dir,
    Other(FdType),
    Dropped(&'static str),
}

#[derive(Debug, Clone)]
struct Ofd {
    what: What,
    path: u32,
    obj: u32,
    append: bool,
    pos: i64,
    pos_res: Res,
}

#[derive(Debug, Clone, Copy)]
struct Fd {
    ofd: u32,
    slot: u32,
    cloexec: bool,
}

#[derive(Debug, Default)]
struct Table {
    fds: FxHashMap<i32, Fd>,
    users: u32,
    fdnum: FxHashMap<i32, Res>,
}

#[derive(Debug, Clone)]
struct Mapping {
    addr: u64,
    len: u64,
    map: u32,
}

#[derive(Debug, Default)]
struct Mm {
    maps: Vec<Mapping>,
    users: u32,
}

#[derive(Debug, Clone)]
struct MapSlot {
    /// Where the mapping started in the recording (offsets of munmap and msync are from here).
    addr0: u64,
    refs: u32,
    obj: u32,
    file_off: i64,
    shared_writable: bool,
    res: Res,
    /// The mapped file's path (for messages).
    path: u32,
    /// An msync covered part of it (stores through it were replayed there).
    synced: bool,
}

#[derive(Debug, Default, Clone)]
struct Slot {
    res: Res,
    /// A file open before the recording: (path, recorded flags if known, recorded position if known).
    pre: Option<(u32, Option<u32>, Option<i64>)>,
    /// An emitted op used it.
    used: bool,
    /// An emitted op wrote through it (for the access mode of a preopened file).
    written: bool,
    /// Recorded position of the first position-dependent op on it.
    first_pos: Option<i64>,
}

impl Slot {
    /// Holds a real fd in the replay (a preopened file only once something uses it).
    fn real(&self) -> bool {
        self.pre.is_none() || self.used
    }
}

#[derive(Debug, Clone, Copy)]
struct Proc {
    table: u32,
    mm: u32,
    /// Created by a recorded clone/fork syscall (the fork event adds nothing).
    by_clone: bool,
}

#[derive(Debug, Clone)]
struct ThreadModel {
    pid: u32,
    plan: Option<u32>,
    spawn_dep: Option<OpRef>,
    alive: bool,
}

/// One thread's emitted stream.
pub struct PlanThread {
    /// Recorded tid.
    pub tid: u32,
    /// Recorded pid.
    pub pid: u32,
    /// Command name.
    pub comm: String,
    /// Entries.
    pub ops: Vec<Op>,
    /// Operations (waits excluded).
    pub real: u32,
    waited: FxHashMap<u32, u32>,
}

/// The planner's output, before it becomes a [`crate::Plan`].
pub struct Planned {
    /// Emitted streams.
    pub threads: Vec<PlanThread>,
    /// Interned paths and the sandbox.
    pub mapper: Mapper,
    /// The world at the end (for the starting tree).
    pub world: World,
    /// Symlink targets and other literals.
    pub literals: Vec<String>,
    /// (slot, path, flags, pos) of files open before the recording that the replay uses.
    pub preopen: Vec<(u32, u32, u32, i64)>,
    /// Left out: (reason, syscall) -> count.
    pub dropped: BTreeMap<(String, String), u64>,
    /// Slots and mapping slots used.
    pub slots: u32,
    /// Mapping slots.
    pub maps: u32,
    /// Cross-thread waits emitted.
    pub waits: u64,
    /// Implicit operations emitted.
    pub implicit: u64,
    /// Largest read and write.
    pub max_read: u64,
    /// Largest write.
    pub max_write: u64,
    /// Time origin (ns, CLOCK_MONOTONIC of the recording) and the end of the last op.
    pub t0: u64,
    /// End of the last replayed op, relative to `t0`.
    pub span: u64,
    /// Events the model could not follow (a process's fd known nowhere, ...), by message.
    pub notes: BTreeMap<&'static str, u64>,
    /// Recorded extended-attribute values, by id.
    pub values: Vec<Vec<u8>>,
    /// Operations submitted through io_uring_enter (not visible, not replayed), by process.
    pub io_uring: BTreeMap<u32, u64>,
    /// Paths of files mapped shared and writable that no msync covered.
    pub unsynced: Vec<u32>,
}

/// The planner state.
pub struct Planner<'a> {
    ev: &'a TraceEvents,
    m: Mapper,
    w: World,
    handlers: Vec<H>,
    procs: FxHashMap<u32, Proc>,
    tables: Vec<Table>,
    ofds: Vec<Ofd>,
    mms: Vec<Mm>,
    maps: Vec<MapSlot>,
    slots: Vec<Slot>,
    threads: FxHashMap<u32, ThreadModel>,
    out: Vec<PlanThread>,
    seq: u32,
    t0: u64,
    span: u64,
    deps: Vec<OpRef>,
    dropped: BTreeMap<(String, String), u64>,
    literals: Vec<String>,
    waits: u64,
    implicit: u64,
    max_read: u64,
    max_write: u64,
    notes: BTreeMap<&'static str, u64>,
    /// Length of the (rewritten) target of each symlink the replay creates, by object.
    symlink_len: FxHashMap<u32, u64>,
    /// Recorded extended-attribute values that sets write, by id.
    values: Vec<Vec<u8>>,
    /// Operations submitted through io_uring_enter, by process.
    io_uring: BTreeMap<u32, u64>,
    /// The event being handled: index, selected.
    cur: usize,
    sel: bool,
}

fn errno(ret: i64) -> i64 {
    if ret < 0 {
        -ret
    } else {
        0
    }
}

impl<'a> Planner<'a> {
    /// A planner over `ev` mapping paths with `m`.
    pub fn new(ev: &'a TraceEvents, m: Mapper) -> Planner<'a> {
        let handlers = (0..latscope_event::syscalls::syscall_count() as u16)
            .map(|nr| syscall_name(nr).map(handler).unwrap_or(H::NotIo))
            .collect();
        Planner {
            ev,
            m,
            w: World::default(),
            handlers,
            procs: FxHashMap::default(),
            tables: Vec::new(),
            ofds: Vec::new(),
            mms: Vec::new(),
            maps: Vec::new(),
            slots: Vec::new(),
            threads: FxHashMap::default(),
            out: Vec::new(),
            seq: 0,
            t0: 0,
            span: 0,
            deps: Vec::new(),
            dropped: BTreeMap::new(),
            literals: Vec::new(),
            waits: 0,
            implicit: 0,
            max_read: 0,
            max_write: 0,
            notes: BTreeMap::new(),
            symlink_len: FxHashMap::default(),
            values: Vec::new(),
            io_uring: BTreeMap::new(),
            cur: 0,
            sel: false,
        }
    }

    /// Plan every event, in recorded start order.
    pub fn run(mut self) -> Planned {
        let b = &self.ev.events;
        let mut order: Vec<u32> = (0..b.len() as u32).collect();
        order.sort_by_key(|&i| (b.ts[i as usize], b.end(i as usize)));
        self.t0 = order
            .iter()
            .map(|&i| i as usize)
            .find(|&i| self.ev.selected[i] && b.kind[i] == EventKind::Syscall as u8)
            .map(|i| b.ts[i])
            .unwrap_or(0);
        self.seed_snapshot();
        for &i in &order {
            let i = i as usize;
            self.cur = i;
            self.sel = self.ev.selected[i];
            match EventKind::from_u8(b.kind[i]) {
                Some(EventKind::Syscall) => self.syscall(i),
                Some(EventKind::Proc) => self.proc_event(i),
                _ => {}
            }
        }
        self.w.executable_targets(&mut self.m);
        // Files mapped shared and writable that no msync covered: stores through the mapping
        // are not recorded, so nothing in the plan writes them.
        let mut unsynced_maps: Vec<u32> =
            self.maps.iter().filter(|m| m.shared_writable && !m.synced && m.obj != NONE).map(|m| m.path).collect();
        unsynced_maps.sort_unstable();
        unsynced_maps.dedup();
        let preopen = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.used)
            .filter_map(|(i, s)| {
                let (path, flags, pos) = s.pre?;
                let flags = flags.unwrap_or(if s.written { 2 } else { 0 });
                Some((i as u32, path, flags, pos.or(s.first_pos).unwrap_or(0)))
            })
            .collect();
        Planned {
            threads: self.out,
            mapper: self.m,
            world: self.w,
            literals: self.literals,
            preopen,
            dropped: self.dropped,
            slots: self.slots.len() as u32,
            maps: self.maps.len() as u32,
            waits: self.waits,
            implicit: self.implicit,
            max_read: self.max_read,
            max_write: self.max_write,
            t0: self.t0,
            span: self.span,
            notes: self.notes,
            values: self.values,
            io_uring: self.io_uring,
            unsynced: unsynced_maps,
        }
    }

    /// The plan thread of `tid`, created on its first operation.
    pub(super) fn plan_thread(&mut self, tid: u32, pid: u32) -> u32 {
        let comm = self.ev.events.comm.get(self.cur).to_string();
        let idx = self.out.len() as u32;
        let t = self.thread(tid, pid);
        if let Some(p) = t.plan {
            return p;
        }
        t.plan = Some(idx);
        let spawn = t.spawn_dep.take();
        self.out.push(PlanThread { tid, pid, comm, ops: Vec::new(), real: 0, waited: FxHashMap::default() });
        if let Some(d) = spawn {
            self.deps.push(d);
        }
        idx
    }
    /// Start an operation of `tid`: its reference (dependencies collect in `self.deps`).
    pub(super) fn begin(&mut self, tid: u32, pid: u32) -> OpRef {
        let t = self.plan_thread(tid, pid);
        OpRef { thread: t, idx: self.out[t as usize].real }
    }
    /// Emit `op` for `me` (from [`Planner::begin`]) after the waits its dependencies need.
    pub(super) fn finish(&mut self, me: OpRef, mut op: Op) -> OpRef {
        let i = self.cur;
        let b = &self.ev.events;
        op.ts = b.ts[i].saturating_sub(self.t0);
        self.span = self.span.max(b.end(i).saturating_sub(self.t0));
        let seq = self.seq;
        self.seq += 1;
        let th = &mut self.out[me.thread as usize];
        let mut deps = std::mem::take(&mut self.deps);
        deps.sort_unstable();
        for (k, d) in deps.iter().copied().enumerate() {
            // Per thread, only the latest operation waited for matters.
            if d.thread == me.thread || deps.get(k + 1).is_some_and(|n| n.thread == d.thread) {
                continue;
            }
            let need = d.idx + 1;
            let w = th.waited.entry(d.thread).or_insert(0);
            if *w >= need {
                continue;
            }
            *w = need;
            th.ops.push(Op::wait(d.thread, need, seq, op.ts));
            self.waits += 1;
        }
        deps.clear();
        self.deps = deps;
        op.seq = seq;
        if op.has(Op::IMPLICIT) {
            self.implicit += 1;
        }
        if op.reads_data() {
            self.max_read = self.max_read.max(op.size);
        }
        if op.writes_data() {
            self.max_write = self.max_write.max(op.size);
        }
        th.ops.push(op);
        th.real += 1;
        me
    }
    pub(super) fn drop_op(&mut self, reason: &str) {
        if !self.sel {
            return;
        }
        let i = self.cur;
        let b = &self.ev.events;
        let name = latscope_event::op_name(b.kind[i], b.nr[i]);
        *self.dropped.entry((reason.to_string(), name)).or_default() += 1;
    }
    fn syscall(&mut self, i: usize) {
        let b = &self.ev.events;
        let nr = b.nr[i];
        let h = self.handlers.get(nr as usize).copied().unwrap_or(H::NotIo);
        let (pid, tid, ret) = (b.pid[i], b.tid[i], b.ret[i]);
        self.proc_entry(pid);
        self.thread(tid, pid);
        // Interrupted calls did nothing (but close, which releases the fd anyway).
        if matches!(errno(ret), 4 | 512..=516) && h != H::Close {
            self.drop_op(why::INTERRUPTED);
            return;
        }
        match h {
            H::Open | H::Creat => self.open(i, h == H::Creat),
            H::Close => self.close(i),
            H::CloseRange => self.close_range(i),
            H::Read(k) => self.read(i, k),
            H::Write(k) => self.write(i, k),
            H::Lseek => self.lseek(i),
            H::FdSimple(k) => self.fd_simple(i, k),
            H::Sync => {
                if self.sel {
                    let me = self.begin(tid, pid);
                    self.finish(me, Op { kind: OpKind::Syncfs, ret, ..Op::blank() });
                }
            }
            H::Ftruncate => self.ftruncate(i),
            H::Fallocate => self.fallocate(i),
            H::Fstat(statx) => self.fstat(i, statx),
            H::Truncate
            | H::Stat { .. }
            | H::Access
            | H::Statfs
            | H::Mkdir
            | H::Unlinkat
            | H::Rmdir
            | H::Unlink
            | H::Readlink
            | H::Chmod
            | H::Chown { .. }
            | H::Utimens => self.path_op(i, h),
            H::Link if self.link_fd(i).is_some() => {}
            H::Rename | H::Link => self.two_paths(i, h),
            H::Symlink => self.symlink(i),
            H::Fchmod => {
                self.fd_simple(i, OpKind::Fchmod);
                if ret == 0 {
                    if let Ok(f) = self.usable(self.fd_of(pid, b.fd[i])) {
                        let o = self.obj_of(f);
                        if o != NONE {
                            self.w.mode_changed(o);
                        }
                    }
                }
            }
            H::Fchown => self.fd_simple(i, OpKind::Fchown),
            H::Getdents => self.getdents(i),
            H::Dup => self.dup(i, b.fd[i], ret, NONE as i32, 0),
            H::Dup2 => self.dup(i, b.fd[i], ret, b.addr[i] as i32, b.flags[i]),
            H::Fcntl => self.fcntl(i),
            H::Mmap => self.mmap(i),
            H::Munmap => self.munmap(i),
            H::Msync => self.msync(i),
            H::Clone => self.clone_(i, b.flags[i]),
            H::Fork => self.clone_(i, 0),
            H::Vfork => self.clone_(i, CLONE_VM),
            H::Pipe => {
                self.drop_op(why::NOT_FILE);
                if ret == 0 && b.fd[i] >= 0 {
                    let t = if nr == latscope_event::syscall_nr("socketpair").unwrap_or(0) {
                        FdType::Unix
                    } else {
                        FdType::Pipe
                    };
                    for fd in [b.fd[i], b.addr[i] as i32] {
                        self.new_other(i, fd, t);
                    }
                }
            }
            H::NewFd => {
                self.drop_op(why::NOT_FILE);
                if ret >= 0 {
                    let t = match FdType::from_u8(b.fd_type[i]) {
                        FdType::Unknown => FdType::Anon,
                        t => t,
                    };
                    self.new_other(i, ret as i32, t);
                }
            }
            H::Cwd => self.drop_op(why::CWD),
            H::Ioctl => self.ioctl(i),
            H::Copy(k) => self.copy(i, k),
            H::Splice => self.splice(i),
            H::IoUring => {
                self.drop_op(why::IO_URING);
                if self.sel && nr == latscope_event::syscall_nr("io_uring_enter").unwrap_or(u16::MAX) && ret > 0 {
                    *self.io_uring.entry(pid).or_default() += ret as u64;
                }
            }
            H::Xattr(k) => self.xattr(i, k),
            H::Unshare => {
                self.drop_op(why::NOT_IO);
                if ret == 0 && b.flags[i] & CLONE_FILES != 0 {
                    let p = self.proc_entry(pid);
                    if self.tables[p.table as usize].users > 1 {
                        let nt = self.copy_table(p.table, tid, pid);
                        self.tables[p.table as usize].users -= 1;
                        if let Some(pp) = self.procs.get_mut(&pid) {
                            pp.table = nt;
                        }
                    }
                }
            }
            H::Exec => self.exec(i),
            H::Mknod => self.mknod(i),
            H::Unsupported => {
                let fd = b.fd[i];
                let r = if fd >= 0 { self.usable(self.fd_of(pid, fd)).err() } else { None };
                self.drop_op(match r {
                    Some(why::NOT_FILE) => why::NOT_FILE,
                    _ => why::UNSUPPORTED,
                });
            }
            H::NotIo => self.drop_op(why::NOT_IO),
        }
    }
}

//! The planner: walks the recorded events in order through a model of processes, fd tables,
//! open file descriptions and address spaces, and emits each thread's operations with the
//! dependencies that keep cross-thread causality.

use super::mapping::Mapper;
use super::res::{OpRef, Res};
use super::world::{ObjKind, World};
use crate::op::{Op, OpKind, NONE};
use crate::plan::MAX_IO_BYTES;
use crate::source::TraceEvents;
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
    pub const MKNOD: &str = "device nodes and FIFOs are not created (refused)";
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
        }
    }

    // ---- the process and fd model ------------------------------------------------------

    fn note(&mut self, what: &'static str) {
        *self.notes.entry(what).or_default() += 1;
    }

    fn new_table(&mut self) -> u32 {
        self.tables.push(Table { users: 1, ..Default::default() });
        self.tables.len() as u32 - 1
    }

    fn new_mm(&mut self) -> u32 {
        self.mms.push(Mm { users: 1, ..Default::default() });
        self.mms.len() as u32 - 1
    }

    fn new_slot(&mut self) -> u32 {
        self.slots.push(Slot::default());
        self.slots.len() as u32 - 1
    }

    fn new_ofd(&mut self, what: What, path: u32, flags: u32) -> u32 {
        self.ofds.push(Ofd { what, path, obj: NONE, append: flags & O_APPEND != 0, pos: 0, pos_res: Res::default() });
        self.ofds.len() as u32 - 1
    }

    /// Processes running when the recording started, with the files they had open.
    fn seed_snapshot(&mut self) {
        let h = &self.ev.header;
        for p in &h.processes {
            self.proc_entry(p.pid);
        }
        for f in &h.fds {
            let table = self.proc_entry(f.pid).table;
            let t = FdType::from_u8(f.fd_type);
            let what = match t {
                FdType::File | FdType::Directory => match self.m.map(&f.path) {
                    Ok(_) if t == FdType::Directory => What::Dir,
                    Ok(_) => What::File,
                    Err(u) => What::Dropped(u.reason()),
                },
                other => What::Other(other),
            };
            let path = if matches!(what, What::File | What::Dir) { self.m.map(&f.path).unwrap_or(NONE) } else { NONE };
            let ofd = self.new_ofd(what, path, 0);
            let slot = if path != NONE {
                let s = self.new_slot();
                self.slots[s as usize].pre = Some((path, None, None));
                s
            } else {
                NONE
            };
            self.tables[table as usize].fds.insert(f.fd, Fd { ofd, slot, cloexec: false });
        }
    }

    fn proc_entry(&mut self, pid: u32) -> Proc {
        if let Some(p) = self.procs.get(&pid) {
            return *p;
        }
        let p = Proc { table: self.new_table(), mm: self.new_mm(), by_clone: false };
        self.procs.insert(pid, p);
        p
    }

    /// The model of thread `tid` of process `pid` (a new one when the tid was reused).
    fn thread(&mut self, tid: u32, pid: u32) -> &mut ThreadModel {
        let fresh = match self.threads.get(&tid) {
            Some(t) => t.pid != pid || !t.alive,
            None => true,
        };
        if fresh {
            self.threads.insert(tid, ThreadModel { pid, plan: None, spawn_dep: None, alive: true });
        }
        self.threads.get_mut(&tid).expect("inserted")
    }

    /// The plan thread of `tid`, created on its first operation.
    fn plan_thread(&mut self, tid: u32, pid: u32) -> u32 {
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
    fn begin(&mut self, tid: u32, pid: u32) -> OpRef {
        let t = self.plan_thread(tid, pid);
        OpRef { thread: t, idx: self.out[t as usize].real }
    }

    /// Emit `op` for `me` (from [`Planner::begin`]) after the waits its dependencies need.
    fn finish(&mut self, me: OpRef, mut op: Op) -> OpRef {
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

    fn drop_op(&mut self, reason: &str) {
        if !self.sel {
            return;
        }
        let i = self.cur;
        let b = &self.ev.events;
        let name = latscope_event::op_name(b.kind[i], b.nr[i]);
        *self.dropped.entry((reason.to_string(), name)).or_default() += 1;
    }

    fn fd_of(&self, pid: u32, fd: i32) -> Option<Fd> {
        let p = self.procs.get(&pid)?;
        self.tables[p.table as usize].fds.get(&fd).copied()
    }

    /// Why an fd cannot be replayed on, or its slot.
    fn usable(&self, f: Option<Fd>) -> Result<Fd, &'static str> {
        let Some(f) = f else { return Err(why::UNKNOWN_FD) };
        match self.ofds[f.ofd as usize].what {
            What::File | What::Dir if f.slot != NONE => Ok(f),
            What::File | What::Dir => Err(why::FD_NOT_REPLAYED),
            What::Other(_) => Err(why::NOT_FILE),
            What::Dropped(r) => Err(r),
        }
    }

    /// The world object behind an fd (a file open before the recording is looked up at its
    /// first use).
    fn obj_of(&mut self, f: Fd) -> u32 {
        let o = self.ofds[f.ofd as usize].obj;
        if o != NONE {
            return o;
        }
        let path = self.ofds[f.ofd as usize].path;
        if path == NONE {
            return NONE;
        }
        let o = self.w.present(&mut self.m, path);
        let k = if self.ofds[f.ofd as usize].what == What::Dir { ObjKind::Dir } else { ObjKind::File };
        self.w.refine(o, k);
        self.ofds[f.ofd as usize].obj = o;
        o
    }

    /// Install `fd` in `table` (replacing what was there, which is closed implicitly).
    fn install(&mut self, table: u32, fd: i32, entry: Fd, tid: u32, pid: u32) {
        if let Some(old) = self.tables[table as usize].fds.insert(fd, entry) {
            self.note("an fd number was reused without a recorded close");
            self.implicit_close(old, tid, pid);
        }
    }

    /// Close a slot the recording closed without a replayed close (exec, exit, close_range, an
    /// unselected close).
    fn implicit_close(&mut self, f: Fd, tid: u32, pid: u32) {
        if f.slot == NONE || !self.slots[f.slot as usize].real() {
            return;
        }
        let me = self.begin(tid, pid);
        self.slots[f.slot as usize].res.write(me, &mut self.deps);
        self.slots[f.slot as usize].used = true;
        self.finish(me, Op { kind: OpKind::Close, slot: f.slot, bits: Op::IMPLICIT, ..Op::blank() });
    }

    /// A copy of `table` for a new process: every replayable fd is duplicated (fork's
    /// inheritance), in the stream of `tid`.
    fn copy_table(&mut self, table: u32, tid: u32, pid: u32) -> u32 {
        let nt = self.new_table();
        let mut fds: Vec<(i32, Fd)> = self.tables[table as usize].fds.iter().map(|(&k, &v)| (k, v)).collect();
        fds.sort_by_key(|(k, _)| *k);
        for (n, f) in fds {
            let mut g = f;
            if f.slot != NONE && self.slots[f.slot as usize].real() {
                let ns = self.new_slot();
                let me = self.begin(tid, pid);
                self.slots[f.slot as usize].res.read(me, &mut self.deps);
                self.slots[ns as usize].res.write(me, &mut self.deps);
                self.finish(me, Op { kind: OpKind::Dup, slot: f.slot, slot2: ns, bits: Op::IMPLICIT, ..Op::blank() });
                g.slot = ns;
            } else if f.slot != NONE {
                // A file open before the recording and not yet used: the child gets its own
                // preopened slot if it uses it.
                let ns = self.new_slot();
                self.slots[ns as usize].pre = self.slots[f.slot as usize].pre;
                g.slot = ns;
            }
            self.tables[nt as usize].fds.insert(n, g);
        }
        nt
    }

    fn copy_mm(&mut self, mm: u32) -> u32 {
        let n = self.new_mm();
        let maps = self.mms[mm as usize].maps.clone();
        for m in &maps {
            if m.map != NONE {
                self.maps[m.map as usize].refs += 1;
            }
        }
        self.mms[n as usize].maps = maps;
        n
    }

    /// Drop a process's reference to its fd table (closing everything when it was the last).
    fn release_table(&mut self, table: u32, tid: u32, pid: u32) {
        let t = &mut self.tables[table as usize];
        t.users = t.users.saturating_sub(1);
        if t.users > 0 {
            return;
        }
        let mut fds: Vec<(i32, Fd)> = t.fds.drain().collect();
        fds.sort_by_key(|(k, _)| *k);
        for (_, f) in fds {
            self.implicit_close(f, tid, pid);
        }
    }

    fn release_mm(&mut self, mm: u32, tid: u32, pid: u32) {
        let m = &mut self.mms[mm as usize];
        m.users = m.users.saturating_sub(1);
        if m.users > 0 {
            return;
        }
        let maps = std::mem::take(&mut m.maps);
        for mp in maps {
            self.unmap_slot(mp.map, 0, mp.len, tid, pid, true);
        }
    }

    /// One reference to a mapping slot is dropped; the last one unmaps for real.
    fn unmap_slot(&mut self, map: u32, off: u64, len: u64, tid: u32, pid: u32, implicit: bool) {
        if map == NONE {
            return;
        }
        let ms = &mut self.maps[map as usize];
        ms.refs = ms.refs.saturating_sub(1);
        let noop = ms.refs > 0;
        if implicit && noop {
            return;
        }
        let me = self.begin(tid, pid);
        self.maps[map as usize].res.write(me, &mut self.deps);
        let mut bits = if implicit { Op::IMPLICIT } else { 0 };
        if noop {
            bits |= Op::NOOP;
        }
        self.finish(me, Op { kind: OpKind::Munmap, slot2: map, off: off as i64, size: len, bits, ..Op::blank() });
    }

    // ---- process events ------------------------------------------------------------------

    fn proc_event(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret) = (b.pid[i], b.tid[i], b.ret[i]);
        match ProcOp::from_u16(b.nr[i]) {
            Some(ProcOp::Fork) => {
                if self.procs.get(&pid).is_some_and(|p| p.by_clone) {
                    if let Some(p) = self.procs.get_mut(&pid) {
                        p.by_clone = false;
                    }
                    return;
                }
                let parent = self.proc_entry(ret as u32);
                // No recorded clone: the child copies its parent's fds as its first operations.
                if let Some(old) = self.procs.remove(&pid) {
                    self.release_table(old.table, tid, pid);
                    self.release_mm(old.mm, tid, pid);
                }
                self.threads.remove(&pid);
                let table = self.copy_table(parent.table, pid, pid);
                let mm = self.copy_mm(parent.mm);
                self.procs.insert(pid, Proc { table, mm, by_clone: false });
            }
            Some(ProcOp::Exec) => {
                let p = self.proc_entry(pid);
                let mut table = p.table;
                if self.tables[table as usize].users > 1 {
                    // exec unshares an fd table shared with another process.
                    let nt = self.copy_table(table, tid, pid);
                    self.tables[table as usize].users -= 1;
                    table = nt;
                }
                let mut close: Vec<(i32, Fd)> =
                    self.tables[table as usize].fds.iter().filter(|(_, f)| f.cloexec).map(|(&k, &v)| (k, v)).collect();
                close.sort_by_key(|(k, _)| *k);
                for (n, f) in close {
                    self.tables[table as usize].fds.remove(&n);
                    self.implicit_close(f, tid, pid);
                }
                self.release_mm(p.mm, tid, pid);
                let mm = self.new_mm();
                self.procs.insert(pid, Proc { table, mm, by_clone: false });
                for (t, th) in self.threads.iter_mut() {
                    if th.pid == pid && *t != tid {
                        th.alive = false;
                    }
                }
            }
            Some(ProcOp::Exit) => {
                if let Some(p) = self.procs.remove(&pid) {
                    self.release_table(p.table, tid, pid);
                    self.release_mm(p.mm, tid, pid);
                }
                for th in self.threads.values_mut() {
                    if th.pid == pid {
                        th.alive = false;
                    }
                }
            }
            None => {}
        }
    }

    // ---- syscalls --------------------------------------------------------------------------

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
            H::Rename | H::Link => self.two_paths(i, h),
            H::Symlink => self.symlink(i),
            H::Fchmod => self.fd_simple(i, OpKind::Fchmod),
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
            H::Ioctl => {
                // FIOCLEX / FIONCLEX set and clear close-on-exec; nothing else is replayed.
                let (fd, req) = (b.fd[i], b.flags[i]);
                if ret == 0 && (req == FIOCLEX || req == FIONCLEX) {
                    let table = self.proc_entry(pid).table;
                    if let Some(f) = self.tables[table as usize].fds.get_mut(&fd) {
                        f.cloexec = req == FIOCLEX;
                    }
                }
                self.drop_op(why::UNSUPPORTED);
            }
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
            H::Exec => self.drop_op(why::EXEC),
            H::Mknod => self.drop_op(why::MKNOD),
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

    fn new_other(&mut self, i: usize, fd: i32, t: FdType) {
        let b = &self.ev.events;
        let (pid, tid) = (b.pid[i], b.tid[i]);
        let ofd = self.new_ofd(What::Other(t), NONE, 0);
        let table = self.proc_entry(pid).table;
        self.install(table, fd, Fd { ofd, slot: NONE, cloexec: false }, tid, pid);
    }

    fn open(&mut self, i: usize, creat: bool) {
        let b = &self.ev.events;
        let (pid, tid, ret) = (b.pid[i], b.tid[i], b.ret[i]);
        let flags = if creat { O_CREAT | 1 | O_TRUNC } else { b.flags[i] };
        let mode = b.mode[i];
        let ok = ret >= 0;
        let t = FdType::from_u8(b.fd_type[i]);
        let table = self.proc_entry(pid).table;
        let tmpfile = flags & O_TMPFILE_DIR == O_TMPFILE_DIR;
        let dir = !tmpfile && (t == FdType::Directory || flags & O_DIRECTORY != 0);
        let mapped = self.m.map(b.path.get(i));
        let refused: Option<&'static str> = match mapped {
            Err(u) => Some(u.reason()),
            Ok(_) if ok && matches!(t, FdType::Chardev | FdType::Blockdev) => Some(why::DEVICE),
            Ok(_) if ok && t == FdType::Pipe => Some(why::FIFO),
            Ok(_) => None,
        };
        if let Some(r) = refused {
            self.drop_op(r);
            if ok {
                let ofd = self.new_ofd(What::Dropped(r), NONE, flags);
                self.install(table, ret as i32, Fd { ofd, slot: NONE, cloexec: flags & O_CLOEXEC != 0 }, tid, pid);
            }
            return;
        }
        let p = mapped.unwrap_or(NONE);
        let what = if dir { What::Dir } else { What::File };
        if !self.sel {
            if ok {
                let ofd = self.new_ofd(what, p, flags);
                self.install(table, ret as i32, Fd { ofd, slot: NONE, cloexec: flags & O_CLOEXEC != 0 }, tid, pid);
            }
            return;
        }
        let me = self.begin(tid, pid);
        let mut op = Op { kind: OpKind::Open, path: p, flags, mode, ret, ..Op::blank() };
        if !ok {
            self.w.path_deps(&mut self.m, p, false, me, &mut self.deps);
            match errno(ret) {
                ENOENT if flags & O_CREAT == 0 => self.w.absent(&mut self.m, p),
                EEXIST => {
                    self.w.present(&mut self.m, p);
                }
                ENOTDIR => {}
                _ => self.w.ancestors_are_dirs(&mut self.m, p),
            }
            self.finish(me, op);
            return;
        }
        let existed = self.w.known(p).is_some();
        let creates = flags & O_CREAT != 0 && !tmpfile && (flags & O_EXCL != 0 || !existed);
        self.w.path_deps(&mut self.m, p, creates, me, &mut self.deps);
        let obj = if tmpfile {
            let d = self.w.present(&mut self.m, p);
            self.w.refine(d, ObjKind::Dir);
            self.w.objs.push(self.w.objs[d as usize].clone());
            let o = self.w.objs.len() as u32 - 1;
            self.w.truncate(o, 0);
            o
        } else if creates {
            self.w.create(&mut self.m, p, if dir { ObjKind::Dir } else { ObjKind::File }, flags & O_EXCL == 0)
        } else {
            let o = self.w.present(&mut self.m, p);
            self.w.refine(o, if dir { ObjKind::Dir } else { ObjKind::File });
            o
        };
        if flags & O_TRUNC != 0 && flags & O_ACCMODE != 0 && !dir {
            self.w.objs[obj as usize].size_res.write(me, &mut self.deps);
            self.w.truncate(obj, 0);
        }
        let ofd = self.new_ofd(what, p, flags);
        self.ofds[ofd as usize].obj = obj;
        let slot = self.new_slot();
        self.slots[slot as usize].res.write(me, &mut self.deps);
        self.slots[slot as usize].used = true;
        self.tables[table as usize].fdnum.entry(ret as i32).or_default().write(me, &mut self.deps);
        op.slot2 = slot;
        self.finish(me, op);
        self.install(table, ret as i32, Fd { ofd, slot, cloexec: flags & O_CLOEXEC != 0 }, tid, pid);
    }

    fn close(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret, fd) = (b.pid[i], b.tid[i], b.ret[i], b.fd[i]);
        let table = self.proc_entry(pid).table;
        let entry = self.tables[table as usize].fds.remove(&fd);
        if errno(ret) == EBADF {
            if entry.is_some() {
                self.note("close failed with EBADF on an fd the model had open");
            }
            self.drop_op(why::EBADF);
            return;
        }
        let f = match self.usable(entry) {
            Ok(f) => f,
            Err(r) => {
                self.drop_op(r);
                return;
            }
        };
        if !self.sel {
            self.implicit_close(f, tid, pid);
            return;
        }
        let me = self.begin(tid, pid);
        self.slots[f.slot as usize].res.write(me, &mut self.deps);
        self.slots[f.slot as usize].used = true;
        self.tables[table as usize].fdnum.entry(fd).or_default().write(me, &mut self.deps);
        self.finish(me, Op { kind: OpKind::Close, slot: f.slot, ret, ..Op::blank() });
    }

    fn close_range(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret) = (b.pid[i], b.tid[i], b.ret[i]);
        let (first, last, flags) = (b.fd[i], b.addr[i].min(i32::MAX as u64) as i32, b.flags[i]);
        self.drop_op("close_range is replayed as the closes it implies");
        if ret != 0 || first < 0 {
            return;
        }
        let mut table = self.proc_entry(pid).table;
        if flags & CLOSE_RANGE_UNSHARE != 0 && self.tables[table as usize].users > 1 {
            let nt = self.copy_table(table, tid, pid);
            self.tables[table as usize].users -= 1;
            table = nt;
            if let Some(p) = self.procs.get_mut(&pid) {
                p.table = nt;
            }
        }
        let mut hit: Vec<i32> =
            self.tables[table as usize].fds.keys().copied().filter(|&n| n >= first && n <= last).collect();
        hit.sort_unstable();
        for n in hit {
            if flags & CLOSE_RANGE_CLOEXEC != 0 {
                if let Some(f) = self.tables[table as usize].fds.get_mut(&n) {
                    f.cloexec = true;
                }
            } else if let Some(f) = self.tables[table as usize].fds.remove(&n) {
                self.implicit_close(f, tid, pid);
            }
        }
    }

    /// The fd of event `i` if it can be replayed on (else the op is dropped).
    fn fd_for(&mut self, i: usize) -> Option<Fd> {
        let b = &self.ev.events;
        let (pid, fd, ret) = (b.pid[i], b.fd[i], b.ret[i]);
        let f = self.fd_of(pid, fd);
        if errno(ret) == EBADF {
            if f.is_some() {
                self.note("a call failed with EBADF on an fd the model had open");
            }
            self.drop_op(why::EBADF);
            return None;
        }
        match self.usable(f) {
            Ok(f) => Some(f),
            Err(r) => {
                self.drop_op(r);
                None
            }
        }
    }

    /// Common start of an operation on an fd: its reference, the slot read, the slot marked used.
    fn begin_fd(&mut self, i: usize, f: Fd) -> OpRef {
        let b = &self.ev.events;
        let me = self.begin(b.tid[i], b.pid[i]);
        let s = &mut self.slots[f.slot as usize];
        s.res.read(me, &mut self.deps);
        s.used = true;
        me
    }

    fn first_pos(&mut self, f: Fd, off: i64) {
        let s = &mut self.slots[f.slot as usize];
        if s.first_pos.is_none() && off >= 0 {
            s.first_pos = Some(off);
        }
    }

    fn read(&mut self, i: usize, k: OpKind) {
        let b = &self.ev.events;
        let (ret, bytes, roff) = (b.ret[i], b.bytes[i], b.off[i]);
        // preadv2 with offset -1 reads at the file position, as readv does.
        let k = if k == OpKind::Preadv && roff < 0 { OpKind::Readv } else { k };
        let positional = matches!(k, OpKind::Read | OpKind::Readv);
        let Some(f) = self.fd_for(i) else {
            if positional && ret > 0 {
                if let Some(f) = self.fd_of(b.pid[i], b.fd[i]) {
                    let o = &mut self.ofds[f.ofd as usize];
                    o.pos = if roff >= 0 { roff + ret } else { o.pos + ret };
                }
            }
            return;
        };
        let off = if positional && roff < 0 { self.ofds[f.ofd as usize].pos } else { roff };
        if positional {
            self.first_pos(f, off);
            if ret > 0 {
                self.ofds[f.ofd as usize].pos = off + ret;
            }
        }
        if !self.sel {
            return;
        }
        if bytes > MAX_IO_BYTES {
            self.drop_op(why::TOO_LARGE);
            return;
        }
        let me = self.begin_fd(i, f);
        if positional {
            self.ofds[f.ofd as usize].pos_res.write(me, &mut self.deps);
        }
        let obj = self.obj_of(f);
        if obj != NONE && self.ofds[f.ofd as usize].what == What::File && off >= 0 {
            let got = ret.max(0) as u64;
            let o = &mut self.w.objs[obj as usize];
            o.writers.readers_deps(off as u64, off as u64 + got, &mut self.deps);
            o.size_res.read(me, &mut self.deps);
            if ret >= 0 {
                self.w.read_evidence(obj, off as u64, bytes, got);
            }
        }
        self.finish(me, Op { kind: k, slot: f.slot, size: bytes, off, ret, ..Op::blank() });
    }

    fn write(&mut self, i: usize, k: OpKind) {
        let b = &self.ev.events;
        let (ret, bytes, roff) = (b.ret[i], b.bytes[i], b.off[i]);
        let k = if k == OpKind::Pwritev && roff < 0 { OpKind::Writev } else { k };
        let positional = matches!(k, OpKind::Write | OpKind::Writev);
        let Some(f) = self.fd_for(i) else {
            if positional && ret > 0 {
                if let Some(f) = self.fd_of(b.pid[i], b.fd[i]) {
                    let o = &mut self.ofds[f.ofd as usize];
                    o.pos = if roff >= 0 { roff + ret } else { o.pos + ret };
                }
            }
            return;
        };
        let append = self.ofds[f.ofd as usize].append;
        if !self.sel {
            if positional && ret > 0 {
                let o = &mut self.ofds[f.ofd as usize];
                o.pos = if roff >= 0 && !append { roff + ret } else { o.pos + ret };
            }
            return;
        }
        if bytes > MAX_IO_BYTES {
            self.drop_op(why::TOO_LARGE);
            return;
        }
        let me = self.begin_fd(i, f);
        let obj = self.obj_of(f);
        let cur = if obj != NONE { self.w.size(obj) } else { 0 };
        // Where the data lands: the end of the file for O_APPEND, else the offset.
        let off = if append && obj != NONE {
            cur as i64
        } else if positional && roff < 0 {
            self.ofds[f.ofd as usize].pos
        } else {
            roff
        };
        if positional {
            self.first_pos(f, roff);
            self.ofds[f.ofd as usize].pos_res.write(me, &mut self.deps);
            if ret > 0 {
                self.ofds[f.ofd as usize].pos = off + ret;
            }
        }
        if obj != NONE && off >= 0 {
            let got = ret.max(0) as u64;
            let o = &mut self.w.objs[obj as usize];
            if append || off as u64 + got > cur {
                o.size_res.write(me, &mut self.deps);
            } else {
                o.size_res.read(me, &mut self.deps);
            }
            o.writers.write(off as u64, off as u64 + got, me);
            self.w.wrote(obj, off as u64, got);
        }
        self.slots[f.slot as usize].written = true;
        self.finish(me, Op { kind: k, slot: f.slot, size: bytes, off, ret, ..Op::blank() });
    }

    fn lseek(&mut self, i: usize) {
        let b = &self.ev.events;
        let (ret, off, whence) = (b.ret[i], b.off[i], b.flags[i]);
        let Some(f) = self.fd_for(i) else {
            if ret >= 0 {
                if let Some(f) = self.fd_of(b.pid[i], b.fd[i]) {
                    self.ofds[f.ofd as usize].pos = ret;
                }
            }
            return;
        };
        if ret >= 0 {
            self.ofds[f.ofd as usize].pos = ret;
        }
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        self.ofds[f.ofd as usize].pos_res.write(me, &mut self.deps);
        let obj = self.obj_of(f);
        if obj != NONE && whence >= SEEK_END && self.ofds[f.ofd as usize].what == What::File {
            self.w.objs[obj as usize].size_res.read(me, &mut self.deps);
            if whence == SEEK_END && ret >= 0 && ret >= off {
                self.w.size_evidence(obj, (ret - off) as u64);
            }
        }
        self.finish(me, Op { kind: OpKind::Lseek, slot: f.slot, off, flags: whence, ret, ..Op::blank() });
    }

    fn fd_simple(&mut self, i: usize, k: OpKind) {
        let b = &self.ev.events;
        let Some(f) = self.fd_for(i) else { return };
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        let op = Op {
            kind: k,
            slot: f.slot,
            off: b.off[i],
            size: b.bytes[i],
            flags: b.flags[i],
            mode: b.mode[i],
            ret: b.ret[i],
            ..Op::blank()
        };
        self.finish(me, op);
    }

    fn ftruncate(&mut self, i: usize) {
        let b = &self.ev.events;
        let (ret, len) = (b.ret[i], b.bytes[i]);
        let Some(f) = self.fd_for(i) else { return };
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        let obj = self.obj_of(f);
        if obj != NONE {
            self.w.objs[obj as usize].size_res.write(me, &mut self.deps);
            if ret == 0 {
                self.w.truncate(obj, len);
            }
        }
        self.finish(me, Op { kind: OpKind::Ftruncate, slot: f.slot, size: len, ret, ..Op::blank() });
    }

    fn fallocate(&mut self, i: usize) {
        let b = &self.ev.events;
        let (ret, mode, off, len) = (b.ret[i], b.mode[i], b.off[i], b.bytes[i]);
        let Some(f) = self.fd_for(i) else { return };
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        let obj = self.obj_of(f);
        if obj != NONE && off >= 0 {
            let o = &mut self.w.objs[obj as usize];
            if mode & FALLOC_FL_KEEP_SIZE == 0 {
                o.size_res.write(me, &mut self.deps);
                if ret == 0 {
                    self.w.wrote(obj, off as u64, len);
                }
            } else {
                o.size_res.read(me, &mut self.deps);
            }
        }
        self.finish(me, Op { kind: OpKind::Fallocate, slot: f.slot, mode, off, size: len, ret, ..Op::blank() });
    }

    fn fstat(&mut self, i: usize, statx: bool) {
        let b = &self.ev.events;
        let Some(f) = self.fd_for(i) else { return };
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        let obj = self.obj_of(f);
        if obj != NONE && self.ofds[f.ofd as usize].what == What::File {
            self.w.objs[obj as usize].size_res.read(me, &mut self.deps);
        }
        let bits = if statx { Op::STATX } else { 0 };
        self.finish(me, Op { kind: OpKind::Fstat, slot: f.slot, mode: b.mode[i], bits, ret: b.ret[i], ..Op::blank() });
    }

    /// `*at` calls on the directory fd itself (AT_EMPTY_PATH, futimens): the fd, if that is what
    /// the event is.
    fn at_fd(&self, i: usize) -> Option<Fd> {
        let b = &self.ev.events;
        let dirfd = b.dirfd[i];
        if dirfd < 0 {
            return None;
        }
        let f = self.fd_of(b.pid[i], dirfd)?;
        let o = &self.ofds[f.ofd as usize];
        let name = b.path.get(i);
        let same = o.path != NONE && self.m.paths.get(o.path).is_some() && name.is_empty();
        let nr_name = syscall_name(b.nr[i]).unwrap_or("");
        let empty = b.flags[i] & AT_EMPTY_PATH != 0 || nr_name == "utimensat";
        (empty && (same || self.path_is(i, o.path))).then_some(f)
    }

    fn path_is(&self, i: usize, p: u32) -> bool {
        if p == NONE {
            return false;
        }
        let b = &self.ev.events;
        let e = &self.m.paths.entries[p as usize];
        let Some(r) = self.m.spec.roots.get(e.root as usize) else { return false };
        let rec = b.path.get(i).trim_end_matches('/');
        let mount = r.mount.trim_end_matches('/');
        let expect = if e.rel == "." { mount.to_string() } else { format!("{mount}/{}", e.rel) };
        rec == expect || (rec.is_empty() && expect.is_empty())
    }

    fn path_op(&mut self, i: usize, h: H) {
        let b = &self.ev.events;
        let (pid, tid, ret, flags) = (b.pid[i], b.tid[i], b.ret[i], b.flags[i]);
        let name = syscall_name(b.nr[i]).unwrap_or("");
        // fstatat(fd, "", AT_EMPTY_PATH), futimens(fd): an operation on the fd.
        if matches!(h, H::Stat { at: true, .. } | H::Utimens | H::Chown { .. } | H::Chmod) {
            if let Some(f) = self.at_fd(i) {
                let _ = f;
                return match h {
                    H::Stat { statx, .. } => self.fd_at(i, OpKind::Fstat, if statx { Op::STATX } else { 0 }),
                    H::Utimens => self.fd_at(i, OpKind::Futimens, 0),
                    H::Chown { .. } => self.fd_at(i, OpKind::Fchown, 0),
                    _ => self.fd_at(i, OpKind::Fchmod, 0),
                };
            }
        }
        let p = match self.m.map(b.path.get(i)) {
            Ok(p) => p,
            Err(u) => {
                self.drop_op(u.reason());
                return;
            }
        };
        if !self.sel {
            return;
        }
        let ok = ret >= 0;
        let e = errno(ret);
        let rmdir = h == H::Rmdir || h == H::Unlinkat && flags & AT_REMOVEDIR != 0;
        let unlink = h == H::Unlink || h == H::Unlinkat && !rmdir;
        let mutates = ok && (rmdir || unlink || h == H::Mkdir);
        let me = self.begin(tid, pid);
        self.w.path_deps(&mut self.m, p, mutates, me, &mut self.deps);
        let mut op = Op { path: p, ret, ..Op::blank() };
        match h {
            H::Truncate => {
                op.kind = OpKind::Truncate;
                op.size = b.bytes[i];
                if ok {
                    let o = self.w.present(&mut self.m, p);
                    self.w.objs[o as usize].size_res.write(me, &mut self.deps);
                    self.w.truncate(o, b.bytes[i]);
                }
            }
            H::Stat { nofollow, statx, .. } => {
                op.kind = OpKind::Stat;
                if statx {
                    op.bits |= Op::STATX;
                    op.mode = b.mode[i];
                }
                if nofollow || flags & AT_SYMLINK_NOFOLLOW != 0 {
                    op.flags = AT_SYMLINK_NOFOLLOW;
                }
                if ok {
                    let o = self.w.present(&mut self.m, p);
                    if self.w.objs[o as usize].kind == ObjKind::File {
                        self.w.objs[o as usize].size_res.read(me, &mut self.deps);
                    }
                }
            }
            H::Access => {
                op.kind = OpKind::Access;
                op.mode = b.mode[i];
                op.flags = if name == "faccessat2" { flags } else { 0 };
                if ok {
                    self.w.present(&mut self.m, p);
                }
            }
            H::Statfs => {
                op.kind = OpKind::Statfs;
                if ok {
                    self.w.present(&mut self.m, p);
                }
            }
            H::Mkdir => {
                op.kind = OpKind::Mkdir;
                op.mode = b.mode[i];
                if ok {
                    self.w.create(&mut self.m, p, ObjKind::Dir, false);
                } else if e == EEXIST {
                    let o = self.w.present(&mut self.m, p);
                    self.w.refine(o, ObjKind::Dir);
                }
            }
            _ if rmdir => {
                op.kind = OpKind::Rmdir;
                op.bits |= Op::DIR_NS;
                self.w.listing_deps(p, me, &mut self.deps);
                if ok {
                    self.w.remove(&mut self.m, p, ObjKind::Dir);
                } else if e == ENOTEMPTY {
                    // Its entries are not known: one the replay does not touch keeps it non-empty.
                    let o = self.w.present(&mut self.m, p);
                    self.w.refine(o, ObjKind::Dir);
                    let keep = self.m.child(p, "latscope-keep");
                    self.w.present(&mut self.m, keep);
                }
            }
            _ if unlink => {
                op.kind = OpKind::Unlink;
                if ok {
                    let k = match self.w.known(p).map(|o| self.w.objs[o as usize].kind) {
                        Some(ObjKind::Symlink) => ObjKind::Symlink,
                        _ => ObjKind::File,
                    };
                    self.w.remove(&mut self.m, p, k);
                } else if e == EISDIR {
                    let o = self.w.present(&mut self.m, p);
                    self.w.refine(o, ObjKind::Dir);
                }
            }
            H::Readlink => {
                op.kind = OpKind::Readlink;
                op.size = b.bytes[i];
                if ok {
                    let o = self.w.present(&mut self.m, p);
                    match self.symlink_len.get(&o) {
                        // Created by the replay with a rewritten target: the length may differ.
                        Some(&l) if l != ret as u64 => op.bits |= Op::SIZE_UNKNOWN,
                        Some(_) => {}
                        None => self.w.link_len(o, ret as u64),
                    }
                }
            }
            H::Chmod => {
                op.kind = OpKind::Chmod;
                op.mode = b.mode[i];
                op.flags = flags & AT_SYMLINK_NOFOLLOW;
                if ok {
                    self.w.present(&mut self.m, p);
                }
            }
            H::Chown { nofollow } => {
                op.kind = OpKind::Chown;
                op.flags = if nofollow { AT_SYMLINK_NOFOLLOW } else { flags & AT_SYMLINK_NOFOLLOW };
                if ok {
                    self.w.present(&mut self.m, p);
                }
            }
            H::Utimens => {
                op.kind = OpKind::Utimens;
                op.flags = if name == "utimensat" { flags & AT_SYMLINK_NOFOLLOW } else { 0 };
                if ok {
                    self.w.present(&mut self.m, p);
                }
            }
            _ => {}
        }
        if e == ENOENT && !matches!(h, H::Mkdir) {
            self.w.absent(&mut self.m, p);
        } else if e != 0 && e != ENOTDIR {
            self.w.ancestors_are_dirs(&mut self.m, p);
        }
        self.finish(me, op);
    }

    /// An `*at` call on a directory fd itself, as an fd operation.
    fn fd_at(&mut self, i: usize, k: OpKind, bits: u8) {
        let b = &self.ev.events;
        let (pid, dirfd) = (b.pid[i], b.dirfd[i]);
        let f = match self.usable(self.fd_of(pid, dirfd)) {
            Ok(f) => f,
            Err(r) => {
                self.drop_op(r);
                return;
            }
        };
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        if k == OpKind::Fstat {
            let obj = self.obj_of(f);
            if obj != NONE && self.ofds[f.ofd as usize].what == What::File {
                self.w.objs[obj as usize].size_res.read(me, &mut self.deps);
            }
        }
        self.finish(me, Op { kind: k, slot: f.slot, mode: b.mode[i], bits, ret: b.ret[i], ..Op::blank() });
    }

    fn two_paths(&mut self, i: usize, h: H) {
        let b = &self.ev.events;
        let (pid, tid, ret, flags) = (b.pid[i], b.tid[i], b.ret[i], b.flags[i]);
        let (src, dst) = match (self.m.map(b.path.get(i)), self.m.map(b.path2.get(i))) {
            (Ok(s), Ok(d)) => (s, d),
            (Err(u), _) | (_, Err(u)) => {
                self.drop_op(u.reason());
                return;
            }
        };
        if !self.sel {
            return;
        }
        let ok = ret == 0;
        let me = self.begin(tid, pid);
        let rename = h == H::Rename;
        self.w.path_deps(&mut self.m, src, ok && rename, me, &mut self.deps);
        self.w.path_deps(&mut self.m, dst, ok, me, &mut self.deps);
        let mut op =
            Op { kind: if rename { OpKind::Rename } else { OpKind::Link }, path: src, path2: dst, ret, ..Op::blank() };
        if rename {
            op.flags = flags;
            let is_dir = |w: &World, p| w.known(p).is_some_and(|o| w.objs[o as usize].kind == ObjKind::Dir);
            if ok {
                if is_dir(&self.w, src) || is_dir(&self.w, dst) {
                    op.bits |= Op::DIR_NS;
                }
                if flags & RENAME_EXCHANGE != 0 {
                    self.w.exchange(&mut self.m, src, dst);
                } else {
                    self.w.rename(&mut self.m, src, dst);
                }
            } else if errno(ret) == ENOENT {
                self.w.absent(&mut self.m, src);
            }
        } else {
            op.flags = 0;
            if ok {
                self.w.link(&mut self.m, src, dst);
            } else if errno(ret) == ENOENT {
                self.w.absent(&mut self.m, src);
            }
        }
        self.finish(me, op);
    }

    fn symlink(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret) = (b.pid[i], b.tid[i], b.ret[i]);
        let link = match self.m.map(b.path2.get(i)) {
            Ok(p) => p,
            Err(u) => {
                self.drop_op(u.reason());
                return;
            }
        };
        // A relative target is kept as given (it is relative to the link's directory); an
        // absolute one is rewritten relative to the link, inside the same root.
        let raw = b.path.get(i);
        let depth = self.m.paths.entries[link as usize].rel.matches('/').count();
        let target = if raw.starts_with('/') {
            self.m.relative_target(link, raw)
        } else {
            crate::plan::target_stays_inside(raw, depth).then(|| raw.to_string())
        };
        let Some(target) = target else {
            self.drop_op(why::SYMLINK_OUT);
            return;
        };
        if !self.sel {
            return;
        }
        let me = self.begin(tid, pid);
        self.w.path_deps(&mut self.m, link, ret == 0, me, &mut self.deps);
        if ret == 0 {
            let o = self.w.create(&mut self.m, link, ObjKind::Symlink, false);
            self.symlink_len.insert(o, target.len() as u64);
        } else if errno(ret) == EEXIST {
            self.w.present(&mut self.m, link);
        }
        self.literals.push(target);
        let lit = self.literals.len() as u32 - 1;
        self.finish(me, Op { kind: OpKind::Symlink, path: link, path2: lit, ret, ..Op::blank() });
    }

    fn getdents(&mut self, i: usize) {
        let b = &self.ev.events;
        let Some(f) = self.fd_for(i) else { return };
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        self.ofds[f.ofd as usize].pos_res.write(me, &mut self.deps);
        let path = self.ofds[f.ofd as usize].path;
        let mut bits = 0;
        if path != NONE {
            self.w.listing_deps(path, me, &mut self.deps);
            let obj = self.obj_of(f);
            if obj == NONE || self.w.is_pre_existing(obj) {
                // A directory that existed before the replay has entries nobody touched.
                bits |= Op::SIZE_UNKNOWN;
            }
        }
        self.finish(
            me,
            Op { kind: OpKind::Getdents, slot: f.slot, size: b.bytes[i], ret: b.ret[i], bits, ..Op::blank() },
        );
    }

    fn dup(&mut self, i: usize, old: i32, ret: i64, target: i32, flags: u32) {
        let b = &self.ev.events;
        let (pid, tid) = (b.pid[i], b.tid[i]);
        let table = self.proc_entry(pid).table;
        let newfd = ret as i32;
        if ret >= 0 && target == newfd && old == newfd {
            self.drop_op(why::SELF_DUP);
            return;
        }
        let src = self.fd_of(pid, old);
        if ret < 0 {
            if let Ok(f) = self.usable(src) {
                if self.sel {
                    let me = self.begin_fd(i, f);
                    self.finish(me, Op { kind: OpKind::Dup, slot: f.slot, flags, ret, ..Op::blank() });
                    return;
                }
            }
            self.drop_op(why::EBADF);
            return;
        }
        let cloexec = flags & O_CLOEXEC != 0;
        let Some(sf) = src else {
            self.drop_op(why::UNKNOWN_FD);
            // The new fd is as unknown as the old one.
            let ofd = self.new_ofd(What::Dropped(why::UNKNOWN_FD), NONE, 0);
            self.install(table, newfd, Fd { ofd, slot: NONE, cloexec }, tid, pid);
            return;
        };
        let replaced = self.tables[table as usize].fds.remove(&newfd);
        match self.usable(src) {
            Ok(f) if self.sel => {
                let me = self.begin_fd(i, f);
                let ns = self.new_slot();
                self.slots[ns as usize].res.write(me, &mut self.deps);
                self.slots[ns as usize].used = true;
                let mut rs = NONE;
                if let Some(r) = replaced {
                    if r.slot != NONE && self.slots[r.slot as usize].real() {
                        self.slots[r.slot as usize].res.write(me, &mut self.deps);
                        rs = r.slot;
                    }
                }
                self.tables[table as usize].fdnum.entry(newfd).or_default().write(me, &mut self.deps);
                self.finish(me, Op { kind: OpKind::Dup, slot: f.slot, slot2: ns, path: rs, flags, ret, ..Op::blank() });
                self.tables[table as usize].fds.insert(newfd, Fd { ofd: f.ofd, slot: ns, cloexec });
            }
            r => {
                if let Err(reason) = r {
                    self.drop_op(reason);
                }
                if let Some(r) = replaced {
                    self.implicit_close(r, tid, pid);
                }
                self.tables[table as usize].fds.insert(newfd, Fd { ofd: sf.ofd, slot: NONE, cloexec });
            }
        }
    }

    fn fcntl(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, fd, cmd, arg, ret) = (b.pid[i], b.fd[i], b.flags[i], b.mode[i], b.ret[i]);
        match cmd as i32 {
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
                let fl = if cmd as i32 == libc::F_DUPFD_CLOEXEC { O_CLOEXEC } else { 0 };
                self.dup(i, fd, ret, NONE as i32, fl)
            }
            libc::F_GETFD | libc::F_SETFD | libc::F_GETFL | libc::F_SETFL => {
                let table = self.proc_entry(pid).table;
                if ret >= 0 {
                    if cmd as i32 == libc::F_SETFD {
                        if let Some(f) = self.tables[table as usize].fds.get_mut(&fd) {
                            f.cloexec = arg & 1 != 0;
                        }
                    }
                    if cmd as i32 == libc::F_SETFL {
                        if let Some(f) = self.fd_of(pid, fd) {
                            self.ofds[f.ofd as usize].append = arg & O_APPEND != 0;
                        }
                    }
                }
                let Some(f) = self.fd_for(i) else { return };
                if !self.sel {
                    return;
                }
                let me = self.begin_fd(i, f);
                self.finish(me, Op { kind: OpKind::Fcntl, slot: f.slot, flags: cmd, mode: arg, ret, ..Op::blank() });
            }
            _ => {
                let r = self.usable(self.fd_of(pid, fd)).err();
                self.drop_op(if r == Some(why::NOT_FILE) { why::NOT_FILE } else { why::LOCKS });
            }
        }
    }

    fn mmap(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret, len, prot, flags, off) =
            (b.pid[i], b.tid[i], b.ret[i], b.bytes[i], b.mode[i], b.flags[i], b.off[i]);
        if flags & MAP_ANONYMOUS != 0 || b.fd[i] < 0 {
            self.drop_op(why::ANON);
            return;
        }
        let mm = self.proc_entry(pid).mm;
        let ok = !(-4095..0).contains(&ret);
        let Some(f) = self.fd_for(i) else {
            if ok {
                self.mms[mm as usize].maps.push(Mapping { addr: ret as u64, len, map: NONE });
            }
            return;
        };
        if !self.sel {
            if ok {
                self.mms[mm as usize].maps.push(Mapping { addr: ret as u64, len, map: NONE });
            }
            return;
        }
        let me = self.begin_fd(i, f);
        let obj = self.obj_of(f);
        if obj != NONE {
            self.w.objs[obj as usize].size_res.read(me, &mut self.deps);
        }
        let mut op = Op {
            kind: OpKind::Mmap,
            slot: f.slot,
            size: len,
            mode: prot,
            flags: flags & !(MAP_FIXED | MAP_FIXED_NOREPLACE),
            off,
            ret,
            ..Op::blank()
        };
        if ok {
            let map = self.maps.len() as u32;
            self.maps.push(MapSlot {
                addr0: ret as u64,
                refs: 1,
                obj,
                file_off: off,
                shared_writable: flags & MAP_SHARED != 0 && prot & PROT_WRITE != 0,
                res: Res::default(),
            });
            self.maps[map as usize].res.write(me, &mut self.deps);
            self.mms[mm as usize].maps.push(Mapping { addr: ret as u64, len, map });
            op.slot2 = map;
        } else {
            // A failed mmap needs a mapping slot to name (the executor stores nothing in it).
            op.slot2 = self.maps.len() as u32;
            self.maps.push(MapSlot {
                addr0: 0,
                refs: 0,
                obj: NONE,
                file_off: 0,
                shared_writable: false,
                res: Res::default(),
            });
        }
        let _ = tid;
        self.finish(me, op);
    }

    fn munmap(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret, addr, len) = (b.pid[i], b.tid[i], b.ret[i], b.addr[i], b.bytes[i]);
        let mm = self.proc_entry(pid).mm;
        let end = addr.saturating_add(len);
        let hits: Vec<usize> = self.mms[mm as usize]
            .maps
            .iter()
            .enumerate()
            .filter(|(_, m)| m.addr < end && addr < m.addr + m.len)
            .map(|(k, _)| k)
            .collect();
        if hits.is_empty() || ret != 0 {
            self.drop_op(why::NO_MAPPING);
            return;
        }
        let mut dropped_any = false;
        for &k in hits.iter().rev() {
            let m = self.mms[mm as usize].maps[k].clone();
            let (a, z) = (addr.max(m.addr), end.min(m.addr + m.len));
            if m.map == NONE {
                dropped_any = true;
                self.mms[mm as usize].maps.remove(k);
                continue;
            }
            if a == m.addr && z == m.addr + m.len {
                self.mms[mm as usize].maps.remove(k);
                if self.sel {
                    self.unmap_slot(m.map, 0, m.len, tid, pid, false);
                } else {
                    self.unmap_slot(m.map, 0, m.len, tid, pid, true);
                }
            } else {
                // Part of a mapping: unmapped for real only if no other process shares it.
                let shared = self.maps[m.map as usize].refs > 1;
                if self.sel {
                    let me = self.begin(tid, pid);
                    self.maps[m.map as usize].res.write(me, &mut self.deps);
                    let bits = if shared { Op::NOOP } else { 0 };
                    let off = (a - self.maps[m.map as usize].addr0) as i64;
                    let op = Op { kind: OpKind::Munmap, slot2: m.map, off, size: z - a, bits, ..Op::blank() };
                    self.finish(me, op);
                }
                let maps = &mut self.mms[mm as usize].maps;
                if a == m.addr {
                    maps[k] = Mapping { addr: z, len: m.addr + m.len - z, map: m.map };
                } else if z == m.addr + m.len {
                    maps[k] = Mapping { addr: m.addr, len: a - m.addr, map: m.map };
                } else {
                    maps[k] = Mapping { addr: m.addr, len: a - m.addr, map: m.map };
                    maps.push(Mapping { addr: z, len: m.addr + m.len - z, map: m.map });
                }
            }
        }
        if dropped_any && hits.len() == 1 {
            self.drop_op(why::FD_NOT_REPLAYED);
        }
    }

    fn msync(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret, addr, len, flags) = (b.pid[i], b.tid[i], b.ret[i], b.addr[i], b.bytes[i], b.flags[i]);
        let mm = self.proc_entry(pid).mm;
        let Some(m) = self.mms[mm as usize].maps.iter().find(|m| m.addr <= addr && addr < m.addr + m.len).cloned()
        else {
            self.drop_op(why::NO_MAPPING);
            return;
        };
        if m.map == NONE {
            self.drop_op(why::FD_NOT_REPLAYED);
            return;
        }
        if !self.sel {
            return;
        }
        let me = self.begin(tid, pid);
        self.maps[m.map as usize].res.read(me, &mut self.deps);
        let ms = self.maps[m.map as usize].clone();
        let moff = addr - ms.addr0;
        let len = len.min(m.addr + m.len - addr);
        let mut dirty = 0u64;
        if ms.shared_writable && ms.obj != NONE && ret == 0 {
            // The stores before an msync are not recorded: the replay makes them, with
            // generated data, over the part of the range inside the file.
            let file_at = ms.file_off.max(0) as u64 + moff;
            let size = self.w.size(ms.obj);
            dirty = len.min(size.saturating_sub(file_at)).min(u32::MAX as u64);
            if dirty > 0 {
                let o = &mut self.w.objs[ms.obj as usize];
                o.size_res.read(me, &mut self.deps);
                o.writers.write(file_at, file_at + dirty, me);
            }
        }
        let op = Op {
            kind: OpKind::Msync,
            slot2: m.map,
            off: moff as i64,
            size: len,
            flags,
            mode: dirty as u32,
            ret,
            ..Op::blank()
        };
        self.finish(me, op);
    }

    fn clone_(&mut self, i: usize, flags: u32) {
        let b = &self.ev.events;
        let (pid, tid, ret) = (b.pid[i], b.tid[i], b.ret[i]);
        self.drop_op(why::NOT_IO);
        if ret <= 0 {
            return;
        }
        let child = ret as u32;
        let parent = self.proc_entry(pid);
        // A clone whose flags were not recorded: the fork event (for a process) does the work.
        if flags == 0 && self.handlers[b.nr[i] as usize] == H::Clone {
            return;
        }
        // The child's first operation comes after everything its parent did before the clone.
        let spawn = self.last_op(tid);
        if flags & CLONE_THREAD != 0 {
            self.threads.insert(child, ThreadModel { pid, plan: None, spawn_dep: spawn, alive: true });
            return;
        }
        let table = if flags & CLONE_FILES != 0 {
            self.tables[parent.table as usize].users += 1;
            parent.table
        } else {
            self.copy_table(parent.table, tid, pid)
        };
        let mm = if flags & CLONE_VM != 0 {
            self.mms[parent.mm as usize].users += 1;
            parent.mm
        } else {
            self.copy_mm(parent.mm)
        };
        if let Some(old) = self.procs.insert(child, Proc { table, mm, by_clone: true }) {
            self.release_table(old.table, tid, pid);
            self.release_mm(old.mm, tid, pid);
        }
        let spawn = self.last_op(tid).or(spawn);
        self.threads.insert(child, ThreadModel { pid: child, plan: None, spawn_dep: spawn, alive: true });
    }

    /// The last operation emitted for `tid`.
    fn last_op(&self, tid: u32) -> Option<OpRef> {
        let t = self.threads.get(&tid)?.plan?;
        let real = self.out[t as usize].real;
        (real > 0).then(|| OpRef { thread: t, idx: real - 1 })
    }
}

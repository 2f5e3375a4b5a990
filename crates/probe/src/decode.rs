//! Turns raw ring-buffer records into [`EventBatch`] rows, resolving paths.
//!
//! The kernel side reports, for fd-based calls, the device and inode behind
//! the fd; this stage keeps the maps that name them: (device, inode) -> path
//! from opens and from the start snapshot, (pid, fd) -> path for the rest, and
//! each process's working directory for relative paths. With attribution, it also
//! names the file behind a call's page fault: by the inode the kernel found mapped
//! at the address, or by the process's recorded mmap calls.

use crate::skel::types::{
    ls_event, ls_ext_bits, ls_off_limits, ls_proc_op, ls_sock_tuple, ls_ucopy, ls_ucopy_limits, ls_why,
};
use latscope_event::syscalls::{desc, SysDesc, NONE};
use latscope_event::{Event, EventBatch, EventKind, FdInfo, FdType, ProcOp, ProcessInfo, TraceHeader};
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

const AT_FDCWD: i32 = -100;
/// Size of the fixed part of a record.
pub const RECORD_SIZE: usize = std::mem::size_of::<ls_event>();
/// Size of the attribution that follows the fixed part when `ext` says so.
pub const WHY_SIZE: usize = std::mem::size_of::<ls_why>();

/// A copy of the top of a user stack sent beside a frame-pointer stack (`record --call-graph
/// dwarf`, see `struct ls_ucopy`): the registers at the point the stack was taken and the
/// stack's bytes from `sp` up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserCopy {
    /// The frame-pointer stack's key it stands beside.
    pub key: u64,
    /// Instruction, stack and frame pointers.
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// The stack's bytes from `sp` up.
    pub stack: Box<[u8]>,
}

/// Copies waiting for their events, per thread: an event follows its copy at once, but a sample
/// may come between a call's copy and its event.
const PENDING_COPIES: usize = 4;

/// Decoding state: the path maps and the batch being filled.
#[derive(Default)]
pub struct Decoder {
    by_inode: FxHashMap<(u32, u64), Arc<str>>,
    by_fd: FxHashMap<(u32, i32), Arc<str>>,
    cwd: FxHashMap<u32, Arc<str>>,
    /// The files each process mapped during the recording (mmap calls seen), by start address:
    /// they name the file behind a page fault the kernel did not resolve.
    maps: FxHashMap<u32, BTreeMap<u64, Mapping>>,
    /// What live processes map (their /proc maps, read within bounds): the file behind a page
    /// fault no open named, and the files of user stacks' frames.
    pub(crate) procmaps: crate::procmaps::MapsCache,
    /// The stack keys of the events decoded since the last poll began, with the generation of
    /// the event's process then (see [`crate::procmaps::MapsCache::generation`]): an event's
    /// `kstack` / `ustack` is an index here plus 1 until the stack table names it (see
    /// `Probe::stack_key`).
    pub(crate) stack_keys: Vec<(u64, u32)>,
    /// The user stack copies of references in `stack_keys` (by index), when sent.
    pub(crate) stack_copies: FxHashMap<usize, Arc<UserCopy>>,
    /// Read the maps of processes that exec'd or mapped a file again after each poll
    /// (`--call-graph dwarf`): the unwinding of a stack needs every library mapped, and a
    /// process that exits right after its call can no longer be read when its stack is.
    pub(crate) follow_maps: bool,
    maps_grown: Vec<u32>,
    /// The processes whose maps the last poll read again (for their binaries to be read while
    /// the processes run).
    pub(crate) maps_reread: Vec<u32>,
    /// Copies not yet matched with their event, by thread.
    pending_copies: FxHashMap<u32, Vec<Arc<UserCopy>>>,
    /// User stack copies read, and those matched with their event.
    pub copies: (u64, u64),
    /// Processes that exec'd or exited in the events decoded since the last poll began.
    pub(crate) maps_changed: Vec<u32>,
    /// Processes that exited in the events decoded since the last poll began: forgotten by the
    /// maps cache when the next poll begins, once this poll's stacks (some taken just before
    /// the exit) are named.
    exited: Vec<u32>,
    /// Read /proc for a process's cwd on first sight (live recording only).
    live: bool,
    /// Files whose fd /proc did not show as the event's inode when looked up ([`Decoder::look_up_fd`]):
    /// not looked up again.
    not_found: rustc_hash::FxHashSet<(u32, u64)>,
    /// Events decoded into this batch since the last take.
    pub batch: EventBatch,
    /// When set, events other than syscalls (block requests, process events) go here instead
    /// of into `batch` (see [`crate::Probe::poll_into_split`]).
    pub other: Option<EventBatch>,
    /// Records shorter than their declared size (never expected; counted, not trusted).
    pub malformed: u64,
    /// The row being decoded, reused (boxed: it moves in and out of `record` as a pointer).
    scratch: Option<Box<Event>>,
    /// Whether `scratch` may hold attribution from the last record (else its attribution
    /// fields are all zero, and a record without attribution need not clear them).
    scratch_why: bool,
    /// This process's mount namespace (for [`Decoder::renamed_type`]).
    mnt_ns: Option<Option<std::path::PathBuf>>,
    /// Futex waits their timeout ended while a thread not seen taking the futex held it, held
    /// back until a later wait on that futex names the holder (see [`Decoder::name_held`]).
    held: std::collections::VecDeque<Held>,
    /// The latest end of a syscall decoded (ns): how long a held wait has waited for its name.
    newest_end: u64,
}

/// A futex wait held back, with the stacks its references point to (its poll's `stack_keys`
/// are gone by the time it is let out).
#[derive(Debug)]
struct Held {
    e: Event,
    stacks: [Option<(u64, u32)>; 3],
    ucopy: Option<Arc<UserCopy>>,
}

/// Held waits let out unnamed once a syscall ends this long after them (ns), or beyond this many.
const HELD_HORIZON_NS: u64 = 1_000_000_000;
const MAX_HELD: usize = 4096;

/// A file mapping made by a recorded mmap call: `[start, end)` maps `path` from byte `off`.
#[derive(Clone, Debug)]
struct Mapping {
    end: u64,
    off: u64,
    dev: u32,
    ino: u64,
    path: Arc<str>,
}

impl Decoder {
    /// A decoder primed with the open files and working directories of the start snapshot.
    pub fn new(header: &TraceHeader, live: bool) -> Self {
        let mut d = Decoder { live, batch: EventBatch::with_capacity(8192), ..Default::default() };
        d.learn(&header.processes, &header.fds);
        d
    }

    /// Learn the working directories of `processes` and the names of `fds` (from a start
    /// snapshot, or what was added to it once the probes attached).
    pub fn learn(&mut self, processes: &[ProcessInfo], fds: &[FdInfo]) {
        for p in processes {
            if !p.cwd.is_empty() {
                self.cwd.insert(p.pid, Arc::from(p.cwd.as_str()));
            }
        }
        for f in fds {
            let path: Arc<str> = Arc::from(f.path.as_str());
            let t = FdType::from_u8(f.fd_type);
            // IP sockets by `local->peer`, bound unix sockets by their path (from the snapshot).
            let named_socket =
                matches!(t, FdType::Ipv4 | FdType::Ipv6 | FdType::Unix) && !f.path.starts_with("socket:");
            if f.ino != 0
                && (named_socket
                    || matches!(
                        t,
                        FdType::File | FdType::Directory | FdType::Chardev | FdType::Blockdev | FdType::Memfd
                    ))
            {
                self.by_inode.insert((f.dev, f.ino), path.clone());
            }
            self.by_fd.insert((f.pid, f.fd), path);
        }
    }

    /// Read what processes `pids` map now (their /proc maps, within the bounds of
    /// [`crate::procmaps`]): a page fault in a file mapped before the recording started (its
    /// fd closed since) is named from them, even if the process exits before its event is
    /// read. For a recording with attribution, at its start.
    pub fn name_mapped_files(&mut self, pids: impl IntoIterator<Item = u32>) {
        for pid in pids {
            self.procmaps.prime(pid);
        }
    }

    /// A user address given as the file mapped there (see [`crate::procmaps::MapsCache::file_addr`]),
    /// named by the recording's own name for the inode when no process read maps it.
    pub(crate) fn user_addr_of_file(&mut self, dev: u32, ino: u64, off: u64) -> crate::procmaps::UserAddr {
        let known = self.by_inode.get(&(dev, ino)).cloned();
        self.procmaps.file_addr(dev, ino, off, known)
    }

    /// A new poll begins: the stack keys and the processes that changed of the last one are
    /// done with.
    pub(crate) fn begin_poll(&mut self) {
        self.stack_keys.clear();
        self.stack_copies.clear();
        if self.pending_copies.len() > 4096 {
            self.pending_copies.clear();
        }
        self.maps_changed.clear();
        for pid in self.exited.drain(..) {
            self.procmaps.exit(pid);
        }
    }

    /// An event's stack reference from the record's status and key (see `struct ls_why`).
    fn stack_ref(&mut self, status: i32, key: u64, pid: u32) -> u32 {
        if status > 0 && key != 0 {
            self.stack_keys.push((key, self.procmaps.generation(pid)));
            self.stack_keys.len() as u32
        } else if status < 0 {
            status as u32
        } else {
            0
        }
    }

    /// Read again the maps of the processes that exec'd or mapped a file in the last poll (see
    /// `follow_maps`), within the maps cache's bounds.
    pub(crate) fn reread_grown_maps(&mut self) {
        let mut grown = std::mem::take(&mut self.maps_grown);
        grown.sort_unstable();
        grown.dedup();
        self.maps_reread.clear();
        for pid in grown {
            if !self.exited.contains(&pid) && self.procmaps.reread(pid) {
                self.maps_reread.push(pid);
            }
        }
    }

    /// A user stack's reference, as [`Decoder::stack_ref`], with the copy thread `tid` sent
    /// beside it (if any).
    fn ustack_ref(&mut self, status: i32, key: u64, pid: u32, tid: u32) -> u32 {
        let r = self.stack_ref(status, key, pid);
        if (r as i32) > 0 {
            if let Some(v) = self.pending_copies.get_mut(&tid) {
                if let Some(i) = v.iter().position(|c| c.key == key) {
                    let c = v.remove(i);
                    self.copies.1 += 1;
                    self.stack_copies.insert(r as usize - 1, c);
                }
                if v.is_empty() {
                    self.pending_copies.remove(&tid);
                }
            }
        }
        r
    }

    /// A user stack copy (`struct ls_ucopy`), kept for its event.
    fn ucopy(&mut self, r: &ls_event, data: &[u8]) {
        const HEAD: usize = std::mem::size_of::<ls_ucopy>() - ls_ucopy_limits::LS_UCOPY_MAX.0 as usize;
        let n = r.bytes as usize;
        if data.len() < HEAD + n || n > ls_ucopy_limits::LS_UCOPY_MAX.0 as usize {
            self.malformed += 1;
            return;
        }
        let u64_at = |o: usize| u64::from_ne_bytes(data[o..o + 8].try_into().expect("8 bytes"));
        let o = RECORD_SIZE;
        let c = UserCopy {
            key: u64_at(o),
            ip: u64_at(o + 8),
            sp: u64_at(o + 16),
            bp: u64_at(o + 24),
            stack: data[HEAD..HEAD + n].into(),
        };
        self.copies.0 += 1;
        let v = self.pending_copies.entry(r.tid).or_default();
        if v.len() >= PENDING_COPIES {
            v.remove(0);
        }
        v.push(Arc::new(c));
    }

    /// Whether thread `tid` belongs to process `pid`: while recording, by /proc (a thread that
    /// exited since is not known); otherwise not known (false).
    fn is_thread_of(&self, pid: u32, tid: u32) -> bool {
        self.live && std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists()
    }

    /// Let out every wait held back for its holder's name, unnamed (a poll that read nothing:
    /// the recording may be ending, and nothing in the ring buffer can name them).
    pub fn release_held(&mut self) {
        while let Some(h) = self.held.pop_front() {
            self.let_out(h);
        }
    }

    /// Append a held wait to the batch, its stack references renewed for this poll.
    fn let_out(&mut self, mut h: Held) {
        for (i, (r, key)) in
            [&mut h.e.kstack, &mut h.e.ustack, &mut h.e.waker_ustack].into_iter().zip(h.stacks).enumerate()
        {
            if let Some(k) = key {
                self.stack_keys.push(k);
                *r = self.stack_keys.len() as u32;
                if let (1, Some(c)) = (i, &h.ucopy) {
                    self.stack_copies.insert(self.stack_keys.len() - 1, c.clone());
                }
            }
        }
        self.batch.push(&h.e);
    }

    /// A futex wait its timeout ended while the futex was held by a thread the programs did not
    /// see take it (CPython's GIL taken on its fast path, without a system call): held back
    /// until the holder is named, so that the wait says on whom it waited. The holder is the
    /// thread that next released that futex, the waker of the first later wait on it that
    /// another thread's wake-up ended: mutual exclusion means nobody else could release it in
    /// between. Unnamed after [`HELD_HORIZON_NS`] or when a poll reads nothing.
    fn name_held(&mut self, e: &Event) {
        if e.lock_kind == latscope_event::LockKind::Futex as u8 && e.waker_ctx == 1 && e.waker_tid != 0 {
            let mut k = 0;
            while k < self.held.len() {
                let h = &mut self.held[k].e;
                if h.pid == e.pid
                    && h.lock_addr & !7 == e.lock_addr & !7
                    && e.waker_tid != h.tid
                    && e.wait_end >= h.wait_end
                {
                    h.lock_owner = e.waker_tid;
                    (h.waker_comm_lo, h.waker_comm_hi) = (e.waker_comm_lo, e.waker_comm_hi);
                    let h = self.held.remove(k).expect("k < len");
                    self.let_out(h);
                } else {
                    k += 1;
                }
            }
        }
        // Held in the order they ended: the oldest go out first, unnamed.
        while self.held.front().is_some_and(|h| h.e.wait_end.saturating_add(HELD_HORIZON_NS) < self.newest_end) {
            let h = self.held.pop_front().expect("a front");
            self.let_out(h);
        }
    }

    fn hold(&mut self, e: &Event) {
        let key = |r: u32| (r as i32 > 0).then(|| self.stack_keys.get(r as usize - 1).copied()).flatten();
        let stacks = [key(e.kstack), key(e.ustack), key(e.waker_ustack)];
        let ucopy = (e.ustack as i32 > 0).then(|| self.stack_copies.get(&(e.ustack as usize - 1)).cloned()).flatten();
        self.held.push_back(Held { e: e.clone(), stacks, ucopy });
        if self.held.len() > MAX_HELD {
            let h = self.held.pop_front().expect("over the bound");
            self.let_out(h);
        }
    }

    /// Take the decoded events, leaving an empty batch.
    pub fn take(&mut self) -> EventBatch {
        self.settle();
        std::mem::replace(&mut self.batch, EventBatch::with_capacity(8192))
    }

    /// Completes the rows of the batches: a record without attribution was pushed without its
    /// attribution columns ([`EventBatch::push_core`]). Called before the batches are handed on.
    pub fn settle(&mut self) {
        self.batch.fill_tail();
        if let Some(o) = &mut self.other {
            o.fill_tail();
        }
    }

    fn cwd_of(&mut self, pid: u32) -> Option<Arc<str>> {
        if let Some(c) = self.cwd.get(&pid) {
            return Some(c.clone());
        }
        if !self.live {
            return None;
        }
        let c: Arc<str> = Arc::from(std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?.to_string_lossy().as_ref());
        self.cwd.insert(pid, c.clone());
        Some(c)
    }

    /// Make `raw` absolute against `dirfd` (AT_FDCWD or none: the working directory).
    fn resolve(&mut self, pid: u32, dirfd: i32, raw: &str) -> String {
        if raw.starts_with('/') {
            return raw.to_string();
        }
        if raw.is_empty() {
            // AT_EMPTY_PATH: the call works on dirfd itself.
            return if dirfd >= 0 {
                self.by_fd.get(&(pid, dirfd)).map(|p| p.to_string()).unwrap_or_default()
            } else {
                String::new()
            };
        }
        let base =
            if dirfd == AT_FDCWD || dirfd < 0 { self.cwd_of(pid) } else { self.by_fd.get(&(pid, dirfd)).cloned() };
        match base {
            Some(b) => join(&b, raw),
            None => raw.to_string(),
        }
    }

    /// The name of an fd (borrowed from the maps where it is known: no allocation per event).
    fn fd_path(&self, pid: u32, fd: i32, t: FdType, dev: u32, ino: u64) -> Option<Cow<'_, str>> {
        let known = |k| self.by_inode.get(k).map(|p: &Arc<str>| Cow::Borrowed(&**p));
        match t {
            // Named by connect/accept or the start snapshot (`local->peer`), else by inode.
            FdType::Ipv4 | FdType::Ipv6 | FdType::Unix | FdType::Netlink | FdType::Socket => {
                return known(&(dev, ino)).or_else(|| Some(Cow::Owned(format!("socket:[{ino}]"))))
            }
            // a named FIFO, else an anonymous pipe
            FdType::Pipe if ino != 0 => {
                return known(&(dev, ino)).or_else(|| Some(Cow::Owned(format!("pipe:[{ino}]"))))
            }
            FdType::Event => return Some(Cow::Borrowed("anon_inode:[eventfd]")),
            FdType::Eventpoll => return Some(Cow::Borrowed("anon_inode:[eventpoll]")),
            FdType::Signalfd => return Some(Cow::Borrowed("anon_inode:[signalfd]")),
            FdType::Timerfd => return Some(Cow::Borrowed("anon_inode:[timerfd]")),
            FdType::Inotify => return Some(Cow::Borrowed("anon_inode:inotify")),
            _ => {}
        }
        if ino != 0 {
            if let Some(p) = known(&(dev, ino)) {
                return Some(p);
            }
        }
        self.by_fd.get(&(pid, fd)).map(|p| Cow::Borrowed(&**p))
    }

    /// Name an fd whose file no event or snapshot named, from /proc while the process has it
    /// open: a file opened by a call still running when the probes attached, after the start
    /// snapshot, or received from a process the filter leaves out (`SCM_RIGHTS`). Taken only if
    /// the fd is that file still (its device and inode are the event's); each file is looked up
    /// once. Returns whether it was named.
    fn look_up_fd(&mut self, pid: u32, fd: i32, t: FdType, dev: u32, ino: u64) -> bool {
        use std::os::unix::fs::MetadataExt;
        const MAX_NOT_FOUND: usize = 1 << 16;
        if !self.live
            || fd < 0
            || ino == 0
            || !matches!(t, FdType::File | FdType::Directory | FdType::Chardev | FdType::Blockdev | FdType::Memfd)
            || self.by_inode.contains_key(&(dev, ino))
        {
            return false;
        }
        if self.not_found.len() >= MAX_NOT_FOUND {
            self.not_found.clear();
        }
        if !self.not_found.insert((dev, ino)) {
            return false;
        }
        let link = format!("/proc/{pid}/fd/{fd}");
        let same = std::fs::metadata(&link).is_ok_and(|m| (crate::snapshot::kdev(m.dev()), m.ino()) == (dev, ino));
        let Some(path) = same.then(|| std::fs::read_link(&link).ok()).flatten() else { return false };
        let path: Arc<str> = Arc::from(path.to_string_lossy().as_ref());
        self.not_found.remove(&(dev, ino));
        self.by_inode.insert((dev, ino), path.clone());
        self.by_fd.insert((pid, fd), path);
        true
    }

    /// Decode one ring-buffer record and append it to the batch.
    pub fn record(&mut self, data: &[u8]) {
        if data.len() < RECORD_SIZE {
            self.malformed += 1;
            return;
        }
        // SAFETY: length checked; ls_event is plain old data; the ring buffer gives no alignment promise.
        let r: ls_event = unsafe { std::ptr::read_unaligned(data.as_ptr() as *const ls_event) };
        if r.kind == EventKind::Proc as u8 && u32::from(r.nr) == ls_proc_op::LS_UCOPY.0 {
            self.ucopy(&r, data);
            return;
        }
        let (l1, l2) = (r.path_len as usize, r.path2_len as usize);
        // Attribution (record --why) sits between the fixed part and the paths.
        let ext = u32::from(r.ext);
        let w = if ext & ls_ext_bits::LS_EXT_WHY.0 != 0 { WHY_SIZE } else { 0 };
        let base = RECORD_SIZE + w;
        if data.len() < base + l1 + l2 {
            self.malformed += 1;
            return;
        }
        let raw1 = &data[base..base + l1];
        let raw2 = &data[base + l1..base + l1 + l2];
        let p1 = cstr(raw1);

        let mut e = self.scratch.take().unwrap_or_default();
        e.kind = r.kind;
        e.ts = r.ts;
        e.lat = r.lat;
        e.pid = r.pid;
        e.tid = r.tid;
        e.uid = r.uid;
        e.gid = r.ids.gid;
        e.loginuid = r.ids.loginuid;
        e.tty = r.ids.tty;
        e.vpid = r.ids.vpid;
        e.vtid = r.ids.vtid;
        e.nr = r.nr;
        e.ret = r.ret;
        e.fd = r.fd;
        e.fd_type = r.fd_type;
        e.dev = r.dev;
        e.ino = r.ino;
        e.bytes = r.bytes;
        e.off = r.off;
        e.flags = r.flags;
        e.mode = r.mode;
        e.dirfd = r.dirfd;
        e.addr = r.addr;
        e.cgroup = r.cgroup;
        e.qtime = r.qtime;
        e.off2 = r.off2;
        e.cpu = r.cpu;
        // The file the kernel found behind the call's fault: (device, inode, offset).
        let fault_file = if w != 0 {
            // SAFETY: length checked above; ls_why is plain old data.
            let y: ls_why = unsafe { std::ptr::read_unaligned(data[RECORD_SIZE..].as_ptr() as *const ls_why) };
            set_why(&mut e, &y);
            e.kstack = self.stack_ref(y.kstack, y.kstack_key, r.pid);
            e.ustack = self.ustack_ref(y.ustack, y.ustack_key, r.pid, r.tid);
            // The waker's process is found by its thread: /proc/TID/maps are its process's.
            e.waker_ustack = self.stack_ref(y.waker_ustack, y.waker_ustack_key, y.waker_tid);
            (y.fault_dev, y.fault_ino, y.fault_off)
        } else if ext & ls_ext_bits::LS_EXT_WHY_CPU.0 != 0 {
            // Recorded with attribution and never switched out: all of it on CPU.
            let mut y = ls_why::default();
            y.part[0] = r.lat;
            y.wake_flags = latscope_event::wake_flags::KNOWN;
            set_why(&mut e, &y);
            (0, 0, 0)
        } else {
            if self.scratch_why {
                set_why(&mut e, &ls_why::default());
            }
            (0, 0, 0)
        };
        self.scratch_why = w != 0 || ext & ls_ext_bits::LS_EXT_WHY_CPU.0 != 0;
        e.comm.clear();
        let comm = r.comm.map(|c| c as u8);
        e.comm.push_str(&cstr(&comm));
        e.path.clear();
        e.path2.clear();

        match EventKind::from_u8(r.kind) {
            Some(EventKind::Syscall) => self.syscall(&mut e, &p1, raw2, raw1),
            Some(EventKind::Proc) => self.proc(&mut e, &p1, raw2),
            _ => {}
        }
        // A robust mutex's word names a thread of the caller's process; another value with the
        // waiters bit (a condition variable's sequence) is none.
        if e.lock_owner != 0
            && e.wake_flags & latscope_event::wake_flags::HELD == 0
            && !matches!(e.lock_op & 127, 6 | 8 | 13)
            && !self.is_thread_of(e.pid, e.lock_owner)
        {
            e.lock_owner = 0;
        }
        e.fault_path.clear();
        e.fault_off = -1;
        if e.fault_addr != 0 {
            self.name_fault(&mut e, fault_file);
        }
        if e.kind == EventKind::Syscall as u8 {
            self.newest_end = self.newest_end.max(e.ts.saturating_add(e.lat));
            if !self.held.is_empty() {
                self.name_held(&e);
            }
            if latscope_event::wake_flags::held_unseen(e.waker_ctx, e.wake_flags, e.lock_owner) {
                self.hold(&e);
                self.scratch = Some(e);
                return;
            }
        }
        let to = match &mut self.other {
            Some(o) if e.kind != EventKind::Syscall as u8 => o,
            _ => &mut self.batch,
        };
        // Without attribution, its columns are left to `settle` (zeros, in bulk).
        if self.scratch_why {
            to.push(&e);
        } else {
            to.push_core(&e);
        }
        self.scratch = Some(e);
    }

    /// The file behind the call's page fault at `e.fault_addr`: the one the kernel found mapped
    /// there (`file`: device, inode, offset; inode 0 when it could not look), named by its
    /// inode; else the mapping of a recorded mmap call of the process that covers the address.
    /// While recording, an inode no open named is looked for in the process's /proc maps (a
    /// file mapped before the recording, its fd closed since; read within the bounds of
    /// [`crate::procmaps`]). Neither: left unnamed (its offset too, unless the kernel gave it).
    fn name_fault(&mut self, e: &mut Event, (dev, ino, off): (u32, u64, u64)) {
        if ino != 0 {
            e.fault_off = off as i64;
            if let Some(p) = self.by_inode.get(&(dev, ino)) {
                e.fault_path.push_str(p);
                return;
            }
            if self.live {
                if let Some((p, _)) = self.procmaps.file_at(e.pid, e.fault_addr, dev, ino) {
                    e.fault_path.push_str(&p);
                    return;
                }
            }
        }
        let addr = e.fault_addr;
        let Some((start, m)) = self.maps.get(&e.pid).and_then(|m| m.range(..=addr).next_back()) else { return };
        // The kernel's file, when it named one, must be the mapping's (else the mapping is stale).
        if addr >= m.end || (ino != 0 && m.ino != 0 && (m.dev, m.ino) != (dev, ino)) {
            return;
        }
        e.fault_path.push_str(&m.path);
        if ino == 0 {
            e.fault_off = (m.off + (addr - start)) as i64;
        }
    }

    /// Forget what process `pid` mapped in `[start, end)` (munmap, or a new mapping over it).
    fn unmap(&mut self, pid: u32, start: u64, end: u64) {
        let Some(maps) = self.maps.get_mut(&pid) else { return };
        let hit: Vec<u64> = maps.range(..end).filter(|(_, m)| m.end > start).map(|(&s, _)| s).collect();
        for s in hit {
            let Some(m) = maps.remove(&s) else { continue };
            // What lies outside the range stays mapped.
            if s < start {
                maps.insert(s, Mapping { end: start, ..m.clone() });
            }
            if m.end > end {
                let off = m.off + (end - s);
                maps.insert(end, Mapping { off, ..m });
            }
        }
    }

    /// Follow the process's mappings: mmap (of a file: kept), munmap, mremap (the old range
    /// goes; the new one is not followed).
    fn track_maps(&mut self, e: &Event, name: &str) {
        let page = |n: u64| n.saturating_add(4095) & !4095;
        match name {
            "mmap" => {
                let start = e.ret as u64;
                let end = start.saturating_add(page(e.bytes));
                self.unmap(e.pid, start, end);
                const MAP_ANONYMOUS: u32 = 0x20;
                if e.fd >= 0 && e.flags & MAP_ANONYMOUS == 0 && !e.path.is_empty() && e.off >= 0 {
                    if self.follow_maps && self.maps_grown.last() != Some(&e.pid) {
                        self.maps_grown.push(e.pid);
                    }
                    let m =
                        Mapping { end, off: e.off as u64, dev: e.dev, ino: e.ino, path: Arc::from(e.path.as_str()) };
                    self.maps.entry(e.pid).or_default().insert(start, m);
                }
            }
            "munmap" | "mremap" => self.unmap(e.pid, e.addr, e.addr.saturating_add(page(e.bytes))),
            _ => {}
        }
    }

    /// connect/accept: name the socket by the addresses the kernel sent (`raw1`), under its fd
    /// (connect's argument, accept's result) and its inode (so that dup'ed and inherited fds of
    /// the same socket get the name too). False when the event carries no addresses.
    fn name_socket(&mut self, e: &mut Event, d: &SysDesc, raw1: &[u8]) -> bool {
        let Some(name) = sock_name(raw1) else { return false };
        let fd = if d.has(SysDesc::RET_FD) { e.ret as i32 } else { e.fd };
        let name: Arc<str> = Arc::from(name);
        self.by_inode.insert((e.dev, e.ino), name.clone());
        e.path.push_str(&name);
        self.by_fd.insert((e.pid, fd), name);
        true
    }

    /// The type (`S_IFMT` bits) of what a rename just moved, by a look at its new name while
    /// recording (a replay must know a directory never read for one); 0 if it is gone already
    /// or the process sees another file system tree (another mount namespace; a process that
    /// has exited already is taken to share ours).
    fn renamed_type(&mut self, pid: u32, path: &str) -> u32 {
        use std::os::unix::fs::MetadataExt;
        if !path.starts_with('/') {
            return 0;
        }
        let ns = |p: String| std::fs::read_link(p).ok();
        let mine = self.mnt_ns.get_or_insert_with(|| ns("/proc/self/ns/mnt".into())).clone();
        if ns(format!("/proc/{pid}/ns/mnt")).is_some_and(|theirs| Some(theirs) != mine) {
            return 0;
        }
        std::fs::symlink_metadata(path).map(|m| m.mode() & libc::S_IFMT).unwrap_or(0)
    }

    fn syscall(&mut self, e: &mut Event, p1: &str, raw2: &[u8], raw1: &[u8]) {
        let p2 = &*cstr(raw2);
        let d: &SysDesc = desc(e.nr);
        let ok = e.ret >= 0;
        let t = FdType::from_u8(e.fd_type);
        let socket_named = d.has(SysDesc::SOCK) && self.name_socket(e, d, raw1);
        if socket_named && d.has(SysDesc::RET_FD) {
            return; // accept: the new fd is named; nothing else to do
        }
        let name = latscope_event::syscall_name(e.nr).unwrap_or("");
        if socket_named {
            // connect: named by its addresses
        } else if d.path != NONE && matches!(name, "symlink" | "symlinkat") {
            // The target is stored in the link as given: resolving it would change it.
            e.path.push_str(p1);
        } else if d.path != NONE {
            let dirfd = if d.dirfd != NONE { e.dirfd } else { AT_FDCWD };
            // A successful execveat relative to a directory fd: the kernel's copy of the path
            // (which the event carries) is `/dev/fd/N/PATH`.
            let fd_rel = (name == "execveat" && ok).then(|| p1.strip_prefix("/dev/fd/")).flatten().and_then(|r| {
                let (n, rest) = r.split_once('/').unwrap_or((r, ""));
                Some((n.parse::<i32>().ok()?, rest))
            });
            e.path = match fd_rel {
                Some((n, rest)) => self.resolve(e.pid, n, rest),
                None => self.resolve(e.pid, dirfd, p1),
            };
        } else if e.fd >= 0 {
            let named = self.fd_path(e.pid, e.fd, t, e.dev, e.ino).map(|p| e.path.push_str(&p)).is_some();
            if !named && self.look_up_fd(e.pid, e.fd, t, e.dev, e.ino) {
                if let Some(p) = self.fd_path(e.pid, e.fd, t, e.dev, e.ino) {
                    e.path.push_str(&p);
                }
            }
        }
        if d.info == SysDesc::INFO_XLIST && ok {
            // The names, each NUL-terminated; a list longer than what was captured keeps its
            // whole names only.
            let n = (e.ret as usize).min(raw2.len());
            let whole = raw2[..n].iter().rposition(|&c| c == 0).unwrap_or(0);
            e.path2 = String::from_utf8_lossy(&raw2[..whole]).into_owned();
        } else if d.path2 != NONE && SysDesc::xattr_name(name) {
            // The name, then the value when it was captured.
            let nul = raw2.iter().position(|&c| c == 0);
            let value = nul.and_then(|k| raw2.get(k + 1..)).filter(|v| ok && !v.is_empty());
            e.path2 = match value {
                Some(v) => SysDesc::join_xattr(p2, v),
                None => p2.to_string(),
            };
        } else if d.path2 != NONE && name.starts_with("readlink") {
            // The target the kernel wrote (not NUL-terminated: its length is the result).
            let n = (e.ret.max(0) as usize).min(p2.len());
            e.path2 = if p2.is_char_boundary(n) { p2[..n].to_string() } else { String::new() };
        } else if d.path2 != NONE {
            let dirfd2 = if d.dirfd2 != NONE { e.addr as i32 } else { AT_FDCWD };
            e.path2 = self.resolve(e.pid, dirfd2, p2);
        }
        if ok && matches!(name, "mmap" | "munmap" | "mremap") {
            self.track_maps(e, name);
        }
        if self.live && ok && matches!(name, "rename" | "renameat" | "renameat2") {
            e.mode = self.renamed_type(e.pid, &e.path2);
        }
        if matches!(name, "socket" | "socketpair") {
            // The type's SOCK_NONBLOCK and SOCK_CLOEXEC bits, the flags of pipe2 and accept4.
            e.flags = e.mode & (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u32;
        }
        if !ok {
            return;
        }
        if d.has(SysDesc::RET_FD) {
            let newfd = e.ret as i32;
            let path: Option<Arc<str>> = if d.path != NONE {
                Some(Arc::from(e.path.as_str()))
            } else if d.fd != NONE {
                // dup, accept: the new fd names what the old one does
                if e.path.is_empty() {
                    self.fd_path(e.pid, e.fd, t, e.dev, e.ino).map(|p| Arc::from(&*p))
                } else {
                    Some(Arc::from(e.path.as_str()))
                }
            } else {
                self.fd_path(e.pid, newfd, t, e.dev, e.ino).map(|p| Arc::from(&*p))
            };
            if let Some(p) = path {
                if e.ino != 0
                    && matches!(
                        t,
                        FdType::File
                            | FdType::Directory
                            | FdType::Chardev
                            | FdType::Blockdev
                            | FdType::Memfd
                            | FdType::Pipe
                    )
                    && d.path != NONE
                {
                    self.by_inode.insert((e.dev, e.ino), p.clone());
                }
                if e.path.is_empty() {
                    e.path = p.to_string();
                }
                self.by_fd.insert((e.pid, newfd), p);
            }
        } else if name == "close_range" {
            // fd = first, addr = last; CLOSE_RANGE_CLOEXEC only marks them close-on-exec.
            const CLOSE_RANGE_CLOEXEC: u32 = 4;
            if e.flags & CLOSE_RANGE_CLOEXEC == 0 {
                let (first, last) = (e.fd.max(0) as u32, e.addr.min(i32::MAX as u64) as u32);
                self.by_fd.retain(|&(p, fd), _| p != e.pid || !(first..=last).contains(&(fd as u32)));
            }
        } else if d.has(SysDesc::CLOSE) {
            self.by_fd.remove(&(e.pid, e.fd));
        } else if (name == "chdir" || name == "fchdir") && !e.path.is_empty() {
            self.cwd.insert(e.pid, Arc::from(e.path.as_str()));
        } else if name == "fcntl" && (e.flags == libc::F_DUPFD as u32 || e.flags == libc::F_DUPFD_CLOEXEC as u32) {
            if let Some(p) = self.by_fd.get(&(e.pid, e.fd)).cloned() {
                self.by_fd.insert((e.pid, e.ret as i32), p);
            }
        }
    }

    fn proc(&mut self, e: &mut Event, p1: &str, raw2: &[u8]) {
        match ProcOp::from_u16(e.nr) {
            Some(ProcOp::Fork) => {
                // The child starts in its parent's directory, with its parent's fds.
                let parent = e.ret as u32;
                if let Some(c) = self.cwd.get(&parent).cloned() {
                    self.cwd.insert(e.pid, c);
                }
                let inherited: Vec<(i32, Arc<str>)> = self
                    .by_fd
                    .iter()
                    .filter(|((p, _), _)| *p == parent)
                    .map(|((_, fd), path)| (*fd, path.clone()))
                    .collect();
                for (fd, path) in inherited {
                    self.by_fd.insert((e.pid, fd), path);
                }
                // and its mappings (a new thread shares them under the same pid)
                if let Some(m) = self.maps.get(&parent).filter(|_| parent != e.pid).cloned() {
                    self.maps.insert(e.pid, m);
                }
            }
            Some(ProcOp::Exec) => {
                self.maps.remove(&e.pid);
                // A new image: the stacks of the old one are not named from it.
                self.procmaps.exec(e.pid, e.ts.saturating_add(e.lat));
                self.maps_changed.push(e.pid);
                if self.follow_maps {
                    self.maps_grown.push(e.pid);
                }
                e.path = self.resolve(e.pid, AT_FDCWD, p1);
                // The program by its inode, as the opens name files: a process that exits
                // right after its call has its own frames named by the file at its exit
                // (the kernel names them by inode), its maps never read.
                if e.path.starts_with('/') {
                    use std::os::unix::fs::MetadataExt;
                    if let Some(m) = std::fs::metadata(&e.path).ok().filter(|m| m.is_file()) {
                        self.by_inode.insert((crate::snapshot::kdev(m.dev()), m.ino()), Arc::from(e.path.as_str()));
                    }
                }
                // The argument area: NUL-separated arguments, joined by spaces.
                for (i, a) in raw2.split(|&c| c == 0).filter(|a| !a.is_empty()).enumerate() {
                    if i > 0 {
                        e.path2.push(' ');
                    }
                    e.path2.push_str(&String::from_utf8_lossy(a));
                }
            }
            Some(ProcOp::Exit) => {
                self.cwd.remove(&e.pid);
                self.maps.remove(&e.pid);
                self.exited.push(e.pid);
                self.maps_changed.push(e.pid);
                self.by_fd.retain(|(p, _), _| *p != e.pid);
            }
            Some(ProcOp::Times | ProcOp::Sample) | None => {}
        }
    }
}

/// Copy a record's attribution into the row (all zeros: none).
fn set_why(e: &mut Event, y: &ls_why) {
    let p = &y.part;
    e.why_cpu = p[0];
    e.why_runq = p[1];
    e.why_io = p[2];
    e.why_lock = p[3];
    e.why_ipc = p[4];
    e.why_timer = p[5];
    e.why_fault = p[6];
    e.why_other = p[7];
    e.why_unknown = p[8];
    e.waker_ctx = y.waker_ctx;
    e.waker_tid = y.waker_tid;
    let c: [u8; 16] = y.waker_comm.map(|c| c as u8);
    e.waker_comm_lo = u64::from_le_bytes(c[..8].try_into().unwrap_or_default());
    e.waker_comm_hi = u64::from_le_bytes(c[8..].try_into().unwrap_or_default());
    e.runq_tid = y.rq_tid;
    e.runq_cpu = y.rq_cpu;
    e.wake_dev = y.wake_dev;
    e.wake_sector = y.wake_sector;
    // (the row is reused: a call without attribution must not keep the last one's stacks)
    e.kstack = 0;
    e.ustack = 0;
    e.waker_ustack = 0;
    e.waker_wait_part = y.waker_wait_part;
    e.waker_wait_ns = y.waker_wait_ns;
    e.wake_held_ns = y.wake_held_ns;
    e.wake_queue_ns = y.wake_queue_ns;
    e.wake_device_ns = y.wake_device_ns;
    e.fault_addr = y.fault_addr;
    e.wait_start = y.wait_start;
    e.wait_end = y.wait_end;
    e.wake_flags = y.wake_flags;
    e.lock_kind = y.lock_kind;
    e.lock_addr = y.lock_addr;
    e.lock_op = y.lock_op;
    e.lock_word = y.lock_word;
    e.lock_start = y.lock_start;
    e.lock_len = y.lock_len;
    e.waker_wait_dev = y.waker_wait_dev;
    e.lock_owner = lock_owner(y);
    set_off_cpu(e, y);
}

/// The call's intervals off its CPU into the row. A pipe/socket wait no wake-up was seen for
/// is timer time where the programs moved it there (a poll that timed out: see why_close).
fn set_off_cpu(e: &mut Event, y: &ls_why) {
    const IPC: u8 = 4;
    const TIMER: u8 = 5;
    let unseen = ls_off_limits::LS_OFF_UNSEEN.0 as u8;
    let part = |k: usize| {
        let p = y.off_part[k];
        match (p & !unseen, p & unseen != 0 && y.off_timer != 0) {
            (IPC, true) => TIMER,
            (p, _) => p,
        }
    };
    let n = usize::from(y.off_n).min(latscope_event::OFF_KEPT);
    let at = |k: usize| if k < n { (part(k), y.off_start[k], y.off_end[k]) } else { (0, 0, 0) };
    e.off_count = y.off_n;
    (e.off0_part, e.off0_start, e.off0_end) = at(0);
    (e.off1_part, e.off1_start, e.off1_end) = at(1);
    (e.off2_part, e.off2_start, e.off2_end) = at(2);
    (e.off3_part, e.off3_start, e.off3_end) = at(3);
    (e.off4_part, e.off4_start, e.off4_end) = at(4);
    (e.off5_part, e.off5_start, e.off5_end) = at(5);
    (e.off6_part, e.off6_start, e.off6_end) = at(6);
    (e.off7_part, e.off7_start, e.off7_end) = at(7);
}

/// The thread that held the lock of a call, where the lock or the programs say: a futex wait
/// its timeout ended while another thread held the futex (the programs' holder); a PI futex's
/// owner (the word holds its thread id: FUTEX_LOCK_PI, FUTEX_LOCK_PI2, FUTEX_TRYLOCK_PI); a
/// robust mutex's (the word holds its owner's id with FUTEX_WAITERS set while others wait:
/// taken when that thread is one of the caller's process). 0: not known (then the thread that
/// woke the call released it).
fn lock_owner(y: &ls_why) -> u32 {
    const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
    const FUTEX_WAITERS: u32 = 0x8000_0000;
    if y.wake_flags & latscope_event::wake_flags::HELD != 0 {
        return y.holder_tid;
    }
    if y.lock_kind != latscope_event::LockKind::Futex as u8 {
        return 0;
    }
    let cmd = y.lock_op & 127; // FUTEX_CMD_MASK (private and clock flags off)
    let owner = y.lock_word & FUTEX_TID_MASK;
    if matches!(cmd, 6 | 8 | 13) {
        return owner;
    }
    owner * u32::from(y.lock_word & FUTEX_WAITERS != 0 && owner > 0)
}

fn sock_name(raw: &[u8]) -> Option<String> {
    if raw.len() != std::mem::size_of::<ls_sock_tuple>() {
        return None;
    }
    // SAFETY: length checked; plain old data, no alignment promise from the ring buffer.
    let t: ls_sock_tuple = unsafe { std::ptr::read_unaligned(raw.as_ptr() as *const ls_sock_tuple) };
    let v6 = match t.family as i32 {
        libc::AF_INET => false,
        libc::AF_INET6 => true,
        _ => return None,
    };
    let addr = |a: [u8; 16]| -> std::net::IpAddr {
        if v6 {
            std::net::IpAddr::V6(std::net::Ipv6Addr::from(a))
        } else {
            std::net::IpAddr::V4(std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]))
        }
    };
    let peer = addr(t.raddr);
    let peer = (t.rport != 0 || !peer.is_unspecified()).then_some((peer, t.rport));
    Some(latscope_event::sock_name(latscope_event::l4_proto_name(t.proto), (addr(t.laddr), t.lport), peer))
}

fn cstr(b: &[u8]) -> Cow<'_, str> {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    // Valid UTF-8 (nearly every name) is borrowed after one check: the lossy conversion's own
    // scan was a tenth of the decoder's time.
    match std::str::from_utf8(&b[..end]) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(&b[..end]),
    }
}

/// Join a relative path onto a directory, dropping `.` components and folding `..` lexically.
pub fn join(base: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = base.split('/').filter(|s| !s.is_empty()).collect();
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut s = String::with_capacity(base.len() + rel.len() + 1);
    for p in &parts {
        s.push('/');
        s.push_str(p);
    }
    if s.is_empty() {
        s.push('/');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{syscall_nr, FdInfo, ProcessInfo};

    fn rec(e: ls_event, p1: &str, p2: &str) -> Vec<u8> {
        let mut e = e;
        let b1: Vec<u8> = if p1.is_empty() { vec![] } else { [p1.as_bytes(), &[0]].concat() };
        let b2: Vec<u8> = if p2.is_empty() { vec![] } else { [p2.as_bytes(), &[0]].concat() };
        e.path_len = b1.len() as u16;
        e.path2_len = b2.len() as u16;
        // SAFETY: ls_event is plain old data.
        let raw = unsafe { std::slice::from_raw_parts(&e as *const ls_event as *const u8, RECORD_SIZE) };
        [raw, &b1, &b2].concat()
    }

    fn ev(nr: &str, fd: i32, ret: i64) -> ls_event {
        // SAFETY: all-zero is a valid ls_event.
        let mut e: ls_event = unsafe { std::mem::zeroed() };
        e.nr = syscall_nr(nr).unwrap();
        e.fd = fd;
        e.ret = ret;
        e.pid = 10;
        e.tid = 10;
        e.dirfd = AT_FDCWD;
        e.comm[0] = b'x' as i8;
        e
    }

    /// A start snapshot where process 10 has `path` (device 5, inode 77) open as fd 3.
    fn with_file_at_fd3(path: &str) -> TraceHeader {
        let fd = FdInfo { pid: 10, fd: 3, path: path.into(), fd_type: 1, dev: 5, ino: 77, ..Default::default() };
        TraceHeader { fds: vec![fd], ..Default::default() }
    }

    #[test]
    fn paths_follow_opens_cwd_and_snapshot() {
        let h = TraceHeader {
            processes: vec![ProcessInfo { pid: 10, cwd: "/work".into(), ..Default::default() }],
            ..with_file_at_fd3("/var/log/a")
        };
        let mut d = Decoder::new(&h, false);
        // relative open resolved against the snapshot cwd; returned fd 4 named by inode afterwards
        let mut o = ev("openat", 4, 4); // the kernel reports the returned fd as the event's fd
        o.fd_type = 1;
        o.dev = 5;
        o.ino = 99;
        d.record(&rec(o, "sub/../f.txt", ""));
        let mut r = ev("read", 4, 10);
        r.fd_type = 1;
        r.dev = 5;
        r.ino = 99;
        d.record(&rec(r, "", ""));
        let mut r3 = ev("write", 3, 1);
        r3.fd_type = 1;
        r3.dev = 5;
        r3.ino = 77;
        d.record(&rec(r3, "", ""));
        let mut rn = ev("rename", -1, 0);
        rn.fd = -1;
        d.record(&rec(rn, "/a", "b"));
        let b = d.take();
        assert_eq!(b.len(), 4);
        assert_eq!(b.path.get(0), "/work/f.txt");
        assert_eq!(b.fd[0], 4);
        assert_eq!(b.path.get(1), "/work/f.txt");
        assert_eq!(b.path.get(2), "/var/log/a");
        assert_eq!((b.path.get(3), b.path2.get(3)), ("/a", "/work/b"));
        assert_eq!(b.comm.get(0), "x");
    }

    /// An fd no event or snapshot named (opened by a call running when the probes attached, or
    /// received from a process left out): named from /proc while it is that file still, and
    /// not when the fd holds another file by then.
    #[test]
    fn an_fd_nothing_named_is_looked_up_while_it_is_that_file() {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("latscope-lookup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("received.txt");
        std::fs::write(&path, b"x").unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let m = f.metadata().unwrap();
        let mut d = Decoder::new(&TraceHeader::default(), true);
        let read = |fd: i32, ino: u64| {
            let mut r = ev("pread64", fd, 1);
            r.pid = std::process::id();
            r.tid = r.pid;
            r.fd_type = FdType::File as u8;
            r.dev = crate::snapshot::kdev(m.dev());
            r.ino = ino;
            rec(r, "", "")
        };
        // Another inode at that fd: not named (not taken for the file the fd holds now).
        d.record(&read(f.as_raw_fd(), m.ino() + 1));
        d.record(&read(f.as_raw_fd(), m.ino()));
        // Offline (a trace read back): nothing to look up.
        let mut off = Decoder::new(&TraceHeader::default(), false);
        off.record(&read(f.as_raw_fd(), m.ino()));
        let b = d.take();
        assert_eq!((b.path.get(0), b.path.get(1)), ("", path.to_str().unwrap()));
        assert_eq!(off.take().path.get(0), "");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Extended attributes: the names a list returned (NUL-separated, a cut-off name left
    /// out) and the value a get returned or a set gave, after the name (in hex).
    #[test]
    fn xattr_events_carry_names_and_values() {
        let h = TraceHeader::default();
        let mut d = Decoder::new(&h, false);
        let raw = |e: ls_event, p1: &str, payload: &[u8]| {
            let mut e = e;
            let b1: Vec<u8> = [p1.as_bytes(), &[0]].concat();
            e.path_len = b1.len() as u16;
            e.path2_len = payload.len() as u16;
            // SAFETY: ls_event is plain old data.
            let head = unsafe { std::slice::from_raw_parts(&e as *const ls_event as *const u8, RECORD_SIZE) };
            [head, &b1, payload].concat()
        };
        let mut l = ev("listxattr", -1, 14);
        l.bytes = 256;
        d.record(&raw(l, "/f", b"user.a\0user.b\0"));
        let mut cut = ev("listxattr", -1, 600);
        cut.bytes = 1024;
        d.record(&raw(cut, "/f", b"user.a\0user.lo"));
        let mut g = ev("getxattr", -1, 3);
        g.bytes = 256;
        d.record(&raw(g, "/f", b"user.a\0\x00\xff\x01"));
        let mut q = ev("getxattr", -1, 3);
        q.bytes = 0;
        d.record(&raw(q, "/f", b"user.a\0"));
        let b = d.take();
        assert_eq!(b.path2.get(0), "user.a\0user.b");
        assert_eq!(b.path2.get(1), "user.a");
        assert_eq!(b.path2.get(2), "user.a\u{0}00ff01");
        assert_eq!(SysDesc::split_xattr(b.path2.get(2)), ("user.a", Some(vec![0, 0xff, 1])));
        assert_eq!(SysDesc::split_xattr(b.path2.get(3)), ("user.a", None));
    }

    /// A successful exec: the program resolved against the working directory, the arguments
    /// (NUL-separated in the record) joined by spaces; execveat relative to a directory fd.
    #[test]
    fn exec_events_carry_program_and_arguments() {
        let h = TraceHeader {
            processes: vec![ProcessInfo { pid: 10, cwd: "/work".into(), ..Default::default() }],
            fds: vec![FdInfo { pid: 10, fd: 7, path: "/opt/bin".into(), fd_type: 2, ..Default::default() }],
            ..Default::default()
        };
        let mut d = Decoder::new(&h, false);
        let mut p = ev("read", -1, 0);
        p.kind = EventKind::Proc as u8;
        p.nr = ProcOp::Exec as u16;
        let mut raw = rec(p, "./tool", "");
        let argv = b"./tool\0-v\0two words\0";
        // SAFETY: the record starts with an ls_event.
        let mut r: ls_event = unsafe { std::ptr::read_unaligned(raw.as_ptr() as *const ls_event) };
        r.path2_len = argv.len() as u16;
        // SAFETY: plain old data.
        let head = unsafe { std::slice::from_raw_parts(&r as *const ls_event as *const u8, RECORD_SIZE) };
        raw = [head, &raw[RECORD_SIZE..], argv].concat();
        d.record(&raw);
        d.record(&rec(ev("execveat", -1, 0), "/dev/fd/7/tool", ""));
        d.record(&rec(ev("execve", -1, 0), "tool", ""));
        let b = d.take();
        assert_eq!((b.path.get(0), b.path2.get(0)), ("/work/tool", "./tool -v two words"));
        assert_eq!(b.path.get(1), "/opt/bin/tool");
        assert_eq!(b.path.get(2), "/work/tool");
    }

    /// connect and accept carry the kernel's addresses and protocol: the fd is named by them,
    /// the protocol first unless it is TCP, and later calls on the fd (or its inode) share the name.
    #[test]
    fn sockets_are_named_with_their_protocol() {
        let tuple = |proto: u16, v6: bool, lport: u16, rport: u16| {
            // SAFETY: all-zero is a valid ls_sock_tuple.
            let mut t: ls_sock_tuple = unsafe { std::mem::zeroed() };
            t.family = if v6 { libc::AF_INET6 } else { libc::AF_INET } as u16;
            t.proto = proto;
            t.lport = lport;
            t.rport = rport;
            if v6 {
                t.laddr[15] = 1;
                t.raddr[15] = 1;
            } else {
                t.laddr[..4].copy_from_slice(&[10, 0, 0, 1]);
                t.raddr[..4].copy_from_slice(&[10, 0, 0, 7]);
            }
            // SAFETY: plain old data.
            unsafe { std::slice::from_raw_parts(&t as *const ls_sock_tuple as *const u8, std::mem::size_of_val(&t)) }
                .to_vec()
        };
        assert_eq!(sock_name(&tuple(6, false, 80, 5120)).as_deref(), Some("10.0.0.1:80->10.0.0.7:5120"));
        assert_eq!(sock_name(&tuple(17, false, 41000, 53)).as_deref(), Some("udp:10.0.0.1:41000->10.0.0.7:53"));
        assert_eq!(sock_name(&tuple(17, true, 53, 0)).as_deref(), Some("udp:[::1]:53->[::1]:0"));
        assert_eq!(sock_name(&tuple(255, false, 1, 0)).as_deref(), Some("raw:10.0.0.1:1->10.0.0.7:0"));
        assert_eq!(sock_name(&tuple(6, false, 80, 5120)[1..]), None);

        let mut d = Decoder::new(&TraceHeader::default(), false);
        let mut c = ev("connect", 5, 0);
        c.fd_type = FdType::Ipv4 as u8;
        c.ino = 42;
        c.path_len = std::mem::size_of::<ls_sock_tuple>() as u16;
        // SAFETY: ls_event is plain old data.
        let raw = unsafe { std::slice::from_raw_parts(&c as *const ls_event as *const u8, RECORD_SIZE) };
        d.record(&[raw, &tuple(17, false, 41000, 53)].concat());
        let mut s = ev("sendto", 5, 9);
        s.fd_type = FdType::Ipv4 as u8;
        s.ino = 42;
        d.record(&rec(s, "", ""));
        let b = d.take();
        assert_eq!(b.path.get(0), "udp:10.0.0.1:41000->10.0.0.7:53");
        assert_eq!(b.path.get(1), "udp:10.0.0.1:41000->10.0.0.7:53");
    }

    /// A record carrying attribution whose longest-waited fault was at `addr`; `file`: what the
    /// kernel resolved there (device, inode, offset), inode 0 for nothing.
    fn faulting(nr: &str, addr: u64, file: (u32, u64, u64)) -> Vec<u8> {
        let mut e = ev(nr, 5, 4096);
        e.ext = 1;
        // SAFETY: all-zero is a valid ls_why.
        let mut y: ls_why = unsafe { std::mem::zeroed() };
        y.part[6] = 1_000_000;
        y.fault_addr = addr;
        (y.fault_dev, y.fault_ino, y.fault_off) = file;
        // SAFETY: plain old data.
        let head = unsafe { std::slice::from_raw_parts(&e as *const ls_event as *const u8, RECORD_SIZE) };
        let why = unsafe { std::slice::from_raw_parts(&y as *const ls_why as *const u8, WHY_SIZE) };
        [head, why].concat()
    }

    /// A call's intervals off its CPU come out in the row in order, as many as it kept; a
    /// pipe/socket wait no wake-up was seen for is timer time where the programs moved it there.
    #[test]
    fn a_calls_intervals_off_its_cpu_are_read_and_unseen_socket_waits_of_a_timeout_are_timer_time() {
        let call = |n: u16, timer: u8| {
            let mut e = ev("poll", 0, 0);
            (e.ts, e.lat, e.ext) = (1_000, 1_000, 1);
            // SAFETY: all-zero is a valid ls_why.
            let mut y: ls_why = unsafe { std::mem::zeroed() };
            y.part[4] = 600;
            y.off_n = n;
            y.off_timer = timer;
            (y.off_start[0], y.off_end[0], y.off_part[0]) = (1_100, 1_700, 4 | ls_off_limits::LS_OFF_UNSEEN.0 as u8);
            (y.off_start[1], y.off_end[1], y.off_part[1]) = (1_700, 1_800, 1);
            (y.off_start[2], y.off_end[2], y.off_part[2]) = (1_900, 1_950, 4); // beyond n = 2: ignored
                                                                               // SAFETY: plain old data.
            let head = unsafe { std::slice::from_raw_parts(&e as *const ls_event as *const u8, RECORD_SIZE) };
            let why = unsafe { std::slice::from_raw_parts(&y as *const ls_why as *const u8, WHY_SIZE) };
            [head, why].concat()
        };
        let mut d = Decoder::new(&TraceHeader::default(), false);
        d.record(&call(2, 0));
        d.record(&call(2, 1));
        let b = d.take();
        assert_eq!(b.off_cpu(0).intervals(), [(1_100, 1_700, 4), (1_700, 1_800, 1)]);
        assert_eq!(b.off_cpu(1).intervals(), [(1_100, 1_700, 5), (1_700, 1_800, 1)]);
        assert!(b.off_cpu(0).complete());
        assert_eq!((b.off2_start[0], b.off2_part[0]), (0, 0));
    }

    /// A futex wait on `addr` by `tid`, blocked `from..to` (ns), ended by `waker` (context, tid,
    /// name) with `flags`.
    fn futex_wait(tid: u32, addr: u64, (from, to): (u64, u64), waker: (u8, u32, &str), flags: u8) -> Vec<u8> {
        let mut e = ev("futex", -1, 0);
        (e.tid, e.ts, e.lat, e.ext) = (tid, from, to - from, 1);
        // SAFETY: all-zero is a valid ls_why.
        let mut y: ls_why = unsafe { std::mem::zeroed() };
        (y.wait_start, y.wait_end, y.lock_kind, y.lock_addr, y.lock_op) = (from, to, 1, addr, 128);
        (y.waker_ctx, y.waker_tid, y.wake_flags) = (waker.0, waker.1, flags);
        for (c, b) in y.waker_comm.iter_mut().zip(waker.2.bytes()) {
            *c = b as _;
        }
        (y.kstack, y.kstack_key) = (1, 0xabc0 + u64::from(tid));
        // SAFETY: plain old data.
        let head = unsafe { std::slice::from_raw_parts(&e as *const ls_event as *const u8, RECORD_SIZE) };
        let why = unsafe { std::slice::from_raw_parts(&y as *const ls_why as *const u8, WHY_SIZE) };
        [head, why].concat()
    }

    /// A user stack copy (`--call-graph dwarf`) is no event: it goes with the next event of its
    /// thread whose user stack has its key (a sample between the two takes its own), and a copy
    /// shorter than it says is counted as malformed, not read.
    #[test]
    fn a_stack_copy_goes_with_its_thread_s_event_of_the_same_key() {
        let copy = |tid: u32, key: u64, bytes: &[u8], say: u64| {
            let mut e = ev("getpid", -1, 0);
            e.kind = EventKind::Proc as u8;
            e.nr = ls_proc_op::LS_UCOPY.0 as u16;
            e.tid = tid;
            e.bytes = say;
            // SAFETY: plain old data.
            let head = unsafe { std::slice::from_raw_parts(&e as *const ls_event as *const u8, RECORD_SIZE) };
            let regs: Vec<u8> = [key, 0x401000, 0x7ffc_0000, 0].iter().flat_map(|v| v.to_ne_bytes()).collect();
            [head, &regs, bytes].concat()
        };
        let call = |tid: u32, key: u64| {
            let mut e = ev("read", 3, 1);
            e.tid = tid;
            e.ext = ls_ext_bits::LS_EXT_WHY.0 as u16;
            let mut y = ls_why::default();
            (y.ustack, y.ustack_key) = (1, key);
            // SAFETY: plain old data.
            let head = unsafe { std::slice::from_raw_parts(&e as *const ls_event as *const u8, RECORD_SIZE) };
            let why = unsafe { std::slice::from_raw_parts(&y as *const ls_why as *const u8, WHY_SIZE) };
            [head, why].concat()
        };
        let mut d = Decoder::new(&TraceHeader::default(), false);
        d.begin_poll();
        d.record(&copy(10, 0x77, &[1, 2, 3, 4], 4));
        d.record(&copy(10, 0x88, &[5; 8], 8));
        d.record(&copy(11, 0x77, &[9; 8], 8));
        d.record(&call(10, 0x77));
        d.record(&call(10, 0x99));
        d.record(&copy(10, 0x55, &[1; 8], 64));
        assert_eq!(d.malformed, 1);
        let b = d.take();
        assert_eq!(b.len(), 2, "copies are not events");
        let c = d.stack_copies.get(&(b.ustack[0] as usize - 1)).expect("the first call's copy");
        assert_eq!((c.key, c.ip, c.sp, &*c.stack), (0x77, 0x401000, 0x7ffc_0000, &[1u8, 2, 3, 4][..]));
        assert!(!d.stack_copies.contains_key(&(b.ustack[1] as usize - 1)), "no copy of key 0x99");
        assert_eq!(d.copies, (3, 1));
    }

    /// A call without attribution (it never left the CPU) after one with a waker's stack has
    /// no stack of its own and no waker's: the decoder's row is reused, not its stacks.
    #[test]
    fn a_call_without_attribution_keeps_no_stack_of_the_call_before() {
        let mut d = Decoder::new(&TraceHeader::default(), false);
        d.begin_poll();
        let mut woken = futex_wait(11, 0x1000, (0, 5_000_000), (1, 12, "waker"), latscope_event::wake_flags::KNOWN);
        // The waker's user stack (status 1, key 0x5151) in the record's attribution.
        let o = RECORD_SIZE + std::mem::offset_of!(ls_why, waker_ustack);
        woken[o..o + 4].copy_from_slice(&1i32.to_ne_bytes());
        let o = RECORD_SIZE + std::mem::offset_of!(ls_why, waker_ustack_key);
        woken[o..o + 8].copy_from_slice(&0x5151u64.to_ne_bytes());
        d.record(&woken);
        d.record(&rec(ev("write", 4, 1), "", ""));
        let b = d.take();
        assert_eq!(b.len(), 2);
        assert!(b.waker_ustack[0] > 0 && b.kstack[0] > 0, "the woken call's stacks");
        assert_eq!((b.kstack[1], b.ustack[1], b.waker_ustack[1], b.waker_tid[1]), (0, 0, 0, 0), "the write's");
    }

    /// A futex wait its timeout ended while a thread the programs did not see take the futex
    /// held it (the GIL taken on its fast path) is held back until the next wait on that futex
    /// another thread's release ended, and names that thread, the holder; with its stack still
    /// found after the poll it was read in. Unnamed when a second passes without one, or when
    /// the decoder is told to let held waits out (a poll that read nothing).
    #[test]
    fn a_held_wait_names_the_thread_that_next_released_the_futex() {
        use latscope_event::wake_flags::{HELD, KNOWN};
        let ms = 1_000_000;
        let mut d = Decoder::new(&TraceHeader::default(), false);
        d.begin_poll();
        d.record(&futex_wait(11, 0x1000, (0, 5 * ms), (2, 0, ""), KNOWN | HELD));
        assert!(d.batch.is_empty(), "held back");
        d.record(&rec(ev("getpid", -1, 10), "", ""));
        d.begin_poll();
        // Released by 12, but a wait on another futex, and one the waiter ended itself: no name.
        d.record(&futex_wait(13, 0x2000, (ms, 6 * ms), (1, 12, "holder"), KNOWN));
        d.record(&futex_wait(12, 0x1000, (ms, 6 * ms), (1, 11, "waiter"), KNOWN));
        assert_eq!(d.batch.len(), 3);
        d.record(&futex_wait(14, 0x1004, (6 * ms, 7 * ms), (1, 12, "holder"), KNOWN));
        let b = d.take();
        assert_eq!(b.len(), 5, "let out before the wait that named its holder");
        let e = b.get(3);
        assert_eq!((e.tid, e.lock_owner), (11, 12));
        assert_eq!(latscope_event::comm_from_words(e.waker_comm_lo, e.waker_comm_hi), "holder");
        assert_eq!(d.stack_keys.get(e.kstack as usize - 1).map(|k| k.0), Some(0xabc0 + 11), "{:?}", d.stack_keys);
        assert_eq!(b.get(4).tid, 14);
        // None releases it within a second: let out unnamed, as when the decoder is told to.
        d.record(&futex_wait(11, 0x1000, (10 * ms, 15 * ms), (2, 0, ""), KNOWN | HELD));
        d.record(&futex_wait(15, 0x1000, (10 * ms, 16 * ms), (2, 0, ""), KNOWN | HELD));
        d.record(&futex_wait(16, 0x3000, (1_100 * ms, 1_100 * ms + 1), (1, 17, "x"), KNOWN));
        let b = d.take();
        assert_eq!(b.tid, [11, 15, 16]);
        assert_eq!(b.lock_owner, [0, 0, 0]);
        d.record(&futex_wait(11, 0x1000, (2_000 * ms, 2_005 * ms), (2, 0, ""), KNOWN | HELD));
        assert!(d.take().is_empty());
        d.release_held();
        assert_eq!(d.take().tid, [11]);
    }

    /// The file behind a page fault: by inode where the kernel resolved it; else by the
    /// recorded mmap call whose range holds the address (offset from the mapping's), until
    /// munmap takes it away; never a name for an address no recorded mapping covers.
    #[test]
    fn page_faults_are_named_by_inode_or_by_recorded_mmap() {
        let h = with_file_at_fd3("/data/m");
        let mut d = Decoder::new(&h, false);
        // mmap(NULL, 3 pages, PROT_READ, MAP_SHARED, 3, 8192) = 0x7000_0000
        let mut m = ev("mmap", 3, 0x7000_0000);
        (m.addr, m.bytes, m.off, m.flags, m.fd_type, m.dev, m.ino) = (0, 3 * 4096, 8192, 1, 1, 5, 77);
        d.record(&rec(m, "", ""));
        d.record(&faulting("write", 0x7000_1010, (0, 0, 0))); // not resolved: by the mapping
        d.record(&faulting("write", 0x6000_0000, (5, 77, 123))); // resolved: by inode
        d.record(&faulting("write", 0x7000_4000, (0, 0, 0))); // past the mapping
        d.record(&faulting("write", 0x6000_0000, (5, 99, 4096))); // an inode not known: offset only
        let mut u = ev("munmap", -1, 0);
        (u.addr, u.bytes) = (0x7000_0000, 4096);
        d.record(&rec(u, "", ""));
        d.record(&faulting("write", 0x7000_0010, (0, 0, 0))); // unmapped now
        d.record(&faulting("write", 0x7000_2000, (0, 0, 0))); // the rest of it stays
        d.record(&rec(ev("write", 5, 1), "", "")); // no fault
        let b = d.take();
        let got: Vec<(&str, i64)> = (1..b.len()).map(|i| (b.fault_path.get(i), b.fault_off[i])).collect();
        assert_eq!(
            got,
            [
                ("/data/m", 8192 + 0x1010),
                ("/data/m", 123),
                ("", -1),
                ("", 4096),
                ("", -1), // the munmap
                ("", -1),
                ("/data/m", 8192 + 0x2000),
                ("", -1),
            ]
        );
        assert_eq!(b.fault_addr[1], 0x7000_1010);
    }

    /// A call recorded with attribution that never left its CPU carries a bit instead of a
    /// breakdown: all of its latency on CPU, as a full breakdown would say; a call without the
    /// bit or a breakdown has none.
    #[test]
    fn a_call_that_never_blocked_is_all_on_cpu() {
        let mut d = Decoder::new(&TraceHeader::default(), false);
        let mut e = ev("read", 3, 1);
        (e.lat, e.ext) = (1234, 2);
        d.record(&rec(e, "/f", ""));
        let mut e = ev("read", 3, 1);
        e.lat = 99;
        d.record(&rec(e, "", ""));
        let b = d.take();
        assert_eq!(b.len(), 2);
        assert_eq!(b.why_parts(0), [1234, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(b.wake_flags[0], latscope_event::wake_flags::KNOWN);
        assert_eq!(b.lock_kind[0], 0);
        assert!(!b.has_why(1));
    }

    /// This process's /proc maps name its own executable at an address of its code, by the
    /// kernel's device number and inode; another inode at that address is not named.
    #[test]
    fn proc_maps_name_mapped_files_by_inode() {
        use std::os::unix::fs::MetadataExt;
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let m = std::fs::metadata(&exe).unwrap();
        let dev = crate::snapshot::kdev(m.dev());
        let code = proc_maps_name_mapped_files_by_inode as *const () as usize as u64;
        let mut d = Decoder::new(&TraceHeader::default(), true);
        d.name_mapped_files([std::process::id()]);
        let (path, _) = d.procmaps.file_at(std::process::id(), code, dev, m.ino()).expect("named");
        assert_eq!(&*path, exe.to_str().unwrap());
        assert_eq!(d.procmaps.file_at(std::process::id(), code, dev, m.ino() + 1), None);
        assert_eq!(d.procmaps.stats().reads, 1);
    }

    #[test]
    fn short_records_are_counted_not_trusted() {
        let mut d = Decoder::new(&TraceHeader::default(), false);
        d.record(&[0u8; 10]);
        let mut v = rec(ev("openat", -1, 3), "/x", "");
        v.truncate(RECORD_SIZE + 1);
        d.record(&v);
        assert_eq!(d.malformed, 2);
        assert!(d.take().is_empty());
    }

    #[test]
    fn join_paths() {
        assert_eq!(join("/a/b", "../c"), "/a/c");
        assert_eq!(join("/", "x"), "/x");
        assert_eq!(join("/a", "./b/./c"), "/a/b/c");
        assert_eq!(join("/a", ".."), "/");
    }
}

//! Column-oriented event batches and the row view of one event.

use crate::{BlockOp, FdType};

/// `fd` value of an event that has no file descriptor.
pub const NO_FD: i32 = -1;

/// What produced an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EventKind {
    /// A syscall, from entry to return.
    Syscall = 0,
    /// A block request, from issue to completion.
    Block = 1,
    /// A process lifecycle event (fork, exec, exit).
    Proc = 2,
}

impl EventKind {
    /// Decode the stored byte; unknown values are `None`.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Syscall),
            1 => Some(Self::Block),
            2 => Some(Self::Proc),
            _ => None,
        }
    }
    /// Lower-case name used in output and filters.
    pub fn name(self) -> &'static str {
        match self {
            Self::Syscall => "syscall",
            Self::Block => "block",
            Self::Proc => "proc",
        }
    }
}

/// Process lifecycle operations (the `nr` of a [`EventKind::Proc`] event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ProcOp {
    /// A new process (not thread); `ret` holds the parent's pid.
    Fork = 0,
    /// A successful exec; `path` holds the new executable.
    Exec = 1,
    /// The whole process exited; `ret` holds the exit code.
    Exit = 2,
    /// A thread's times so far, as the scheduler counts them (recordings with attribution, at
    /// their start, at the thread's exit and at their end): see [`crate::ThreadTimes`].
    Times = 3,
    /// An on-CPU sample of a thread (`record --profile`): `kstack`, `ustack` its stacks, `ret`
    /// 1 when the CPU was in the kernel, 0 in user code.
    Sample = 4,
}

impl ProcOp {
    /// Decode the stored value.
    pub fn from_u16(v: u16) -> Option<Self> {
        match v {
            0 => Some(Self::Fork),
            1 => Some(Self::Exec),
            2 => Some(Self::Exit),
            3 => Some(Self::Times),
            4 => Some(Self::Sample),
            _ => None,
        }
    }
    /// Lower-case name used in output and filters.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fork => "fork",
            Self::Exec => "exec",
            Self::Exit => "exit",
            Self::Times => "times",
            Self::Sample => "sample",
        }
    }
}

/// A column of strings stored as one byte buffer plus offsets (Arrow's layout).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StrCol {
    /// `offsets[i]..offsets[i+1]` is string `i`; always one longer than the column.
    pub offsets: Vec<u32>,
    /// UTF-8 bytes of all strings.
    pub data: Vec<u8>,
}

impl StrCol {
    /// An empty column.
    pub fn new() -> Self {
        Self { offsets: vec![0], data: Vec::new() }
    }
    /// Number of strings.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
    /// True when the column holds no strings.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Append a string.
    pub fn push(&mut self, s: &str) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.data.extend_from_slice(s.as_bytes());
        self.offsets.push(self.data.len() as u32);
    }
    /// Append raw bytes, replacing invalid UTF-8 (kernel strings are bytes).
    pub fn push_bytes(&mut self, b: &[u8]) {
        match std::str::from_utf8(b) {
            Ok(s) => self.push(s),
            Err(_) => self.push(&String::from_utf8_lossy(b)),
        }
    }
    /// String `i` as bytes (valid UTF-8), unchecked: for writers that check them their own way.
    #[inline]
    pub fn bytes(&self, i: usize) -> &[u8] {
        &self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
    /// String `i`.
    #[inline]
    pub fn get(&self, i: usize) -> &str {
        let (a, b) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        let s = &self.data[a..b];
        // Names and paths are nearly always ASCII: checked word by word, inline, instead of a
        // call to the UTF-8 validator for every string of every event printed.
        if s.is_ascii() {
            // SAFETY: ASCII bytes are valid UTF-8.
            return unsafe { std::str::from_utf8_unchecked(s) };
        }
        // Only valid UTF-8 is ever pushed (and the trace reader validates), so this cannot fail.
        std::str::from_utf8(s).unwrap_or("")
    }
    /// Append every string of `other`.
    pub fn append(&mut self, other: &StrCol) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        let base = self.data.len() as u32;
        self.data.extend_from_slice(&other.data);
        self.offsets.extend(other.offsets.iter().skip(1).map(|o| o + base));
    }
    /// Append strings `r` of `other`.
    pub fn append_range(&mut self, other: &StrCol, r: std::ops::Range<usize>) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        let (a, b) = (other.offsets[r.start], other.offsets[r.end]);
        let base = self.data.len() as u32;
        self.data.extend_from_slice(&other.data[a as usize..b as usize]);
        self.offsets.extend(other.offsets[r.start + 1..=r.end].iter().map(|&o| o - a + base));
    }
    /// Appends empty strings up to `n` strings.
    pub fn fill_to(&mut self, n: usize) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        let last = *self.offsets.last().expect("offsets are never empty here");
        if self.offsets.len() < n + 1 {
            self.offsets.resize(n + 1, last);
        }
    }
    /// Remove all strings, keeping the allocation.
    pub fn clear(&mut self) {
        self.offsets.clear();
        self.offsets.push(0);
        self.data.clear();
    }
}

macro_rules! columns {
    ($( $(#[$doc:meta])* $name:ident : $ty:ty ),* $(,)?) => {
        /// Events stored column by column; every column has [`EventBatch::len`] entries.
        ///
        /// Field meaning depends on the kind (see docs/TRACE_FORMAT.md):
        /// for block events `nr` is the [`BlockOp`], `off` the sector, `flags` the rwbs bits;
        /// for proc events `nr` is the [`ProcOp`].
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct EventBatch {
            $( $(#[$doc])* pub $name: Vec<$ty>, )*
            /// Command name (comm, at most 15 bytes).
            pub comm: StrCol,
            /// First path (the argument of path calls, the resolved path of fd calls).
            pub path: StrCol,
            /// Second path (rename, link, symlink targets).
            pub path2: StrCol,
            /// The file behind the call's page fault with the longest I/O wait (`fault_addr`),
            /// empty when there was none or it could not be named.
            pub fault_path: StrCol,
            /// Entries of the trace's stack table first used by these events (`kstack`,
            /// `ustack`): one JSON object per line (docs/TRACE_FORMAT.md), stored in the
            /// metadata of the block they are written in. Not a column: not per event.
            pub stacks: String,
            /// Entries of the trace's cgroup table ([`crate::CgroupInfo`] as JSON, one a line)
            /// for cgroups first met during the recording, stored in the metadata of the
            /// block they are written in. Not a column: not per event.
            pub cgroups: String,
        }

        impl EventBatch {
            /// Bytes an event takes in a batch beside its strings: the fixed-size columns and
            /// the four string columns' offsets.
            pub const FIXED_EVENT_BYTES: usize = 0 $( + std::mem::size_of::<$ty>() )* + 4 * 4;
            /// An empty batch with room for `n` events.
            pub fn with_capacity(n: usize) -> Self {
                Self {
                    $( $name: Vec::with_capacity(n), )*
                    comm: StrCol::new(),
                    path: StrCol::new(),
                    path2: StrCol::new(),
                    fault_path: StrCol::new(),
                    stacks: String::new(),
                    cgroups: String::new(),
                }
            }
            /// Remove all events (and stack table entries), keeping allocations.
            pub fn clear(&mut self) {
                $( self.$name.clear(); )*
                self.comm.clear();
                self.path.clear();
                self.path2.clear();
                self.fault_path.clear();
                self.stacks.clear();
                self.cgroups.clear();
            }
            /// Append one event.
            pub fn push(&mut self, e: &Event) {
                self.fill_tail();
                $( self.$name.push(e.$name); )*
                self.comm.push(&e.comm);
                self.path.push(&e.path);
                self.path2.push(&e.path2);
                self.fault_path.push(&e.fault_path);
            }
            /// Append an event whose attribution columns (everything but [`CORE_COLUMNS`]) all
            /// hold their default, without writing them: most recordings have no attribution,
            /// and a row's ~60 pushes of zeros were most of the recorder's per-event work. The
            /// batch is ragged until [`EventBatch::fill_tail`], which every method appending whole
            /// rows (`push`, `push_from`, `append`, `append_range`) calls first.
            #[inline]
            pub fn push_core(&mut self, e: &Event) {
                core_list!(push_cols, self, e);
                self.comm.push(&e.comm);
                self.path.push(&e.path);
                self.path2.push(&e.path2);
            }
            /// Extends the columns [`EventBatch::push_core`] left short with their defaults
            /// (zeros, empty strings), so that every column has a row per event again.
            pub fn fill_tail(&mut self) {
                let n = self.kind.len();
                // push_core leaves every attribution column short by the same rows.
                if self.why_cpu.len() == n {
                    return;
                }
                $( if self.$name.len() < n {
                    self.$name.resize(n, Default::default());
                } )*
                self.fault_path.fill_to(n);
            }
            /// Append event `i` of `other` (no intermediate row).
            pub fn push_from(&mut self, other: &EventBatch, i: usize) {
                self.fill_tail();
                $( self.$name.push(other.$name[i]); )*
                self.comm.push(other.comm.get(i));
                self.path.push(other.path.get(i));
                self.path2.push(other.path2.get(i));
                self.fault_path.push(other.fault_path.get(i));
            }
            /// Append all events of `other` (and its stack table entries).
            pub fn append(&mut self, other: &EventBatch) {
                self.fill_tail();
                $( self.$name.extend_from_slice(&other.$name); )*
                self.comm.append(&other.comm);
                self.path.append(&other.path);
                self.path2.append(&other.path2);
                self.fault_path.append(&other.fault_path);
                self.stacks.push_str(&other.stacks);
                self.cgroups.push_str(&other.cgroups);
            }
            /// Append events `r` of `other`, column by column.
            pub fn append_range(&mut self, other: &EventBatch, r: std::ops::Range<usize>) {
                self.fill_tail();
                $( self.$name.extend_from_slice(&other.$name[r.clone()]); )*
                self.comm.append_range(&other.comm, r.clone());
                self.path.append_range(&other.path, r.clone());
                self.path2.append_range(&other.path2, r.clone());
                self.fault_path.append_range(&other.fault_path, r);
            }
            /// Event `i` as an owned row.
            pub fn get(&self, i: usize) -> Event {
                Event {
                    $( $name: self.$name[i], )*
                    comm: self.comm.get(i).to_string(),
                    path: self.path.get(i).to_string(),
                    path2: self.path2.get(i).to_string(),
                    fault_path: self.fault_path.get(i).to_string(),
                }
            }
            /// Check that every column has the same length (used after decoding files).
            pub fn check_lengths(&self) -> Result<(), String> {
                let n = self.kind.len();
                $( if self.$name.len() != n {
                    return Err(format!("column {} has {} rows, expected {}", stringify!($name), self.$name.len(), n));
                } )*
                for (name, c) in [
                    ("comm", &self.comm),
                    ("path", &self.path),
                    ("path2", &self.path2),
                    ("fault_path", &self.fault_path),
                ] {
                    if c.len() != n {
                        return Err(format!("column {} has {} rows, expected {}", name, c.len(), n));
                    }
                }
                Ok(())
            }
        }

        /// One event as an owned row (for printing, tests and slow paths).
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Event {
            $( $(#[$doc])* pub $name: $ty, )*
            /// Command name.
            pub comm: String,
            /// First path.
            pub path: String,
            /// Second path.
            pub path2: String,
            /// The file behind the call's longest-waited page fault (empty: none, or unknown).
            pub fault_path: String,
        }
    };
}

/// Calls `$m!($args; COLUMN ...)` with the columns every event has, recorded with or without
/// attribution: the one list behind [`CORE_COLUMNS`] and [`EventBatch::push_core`].
macro_rules! core_list {
    ($m:ident, $($args:tt)*) => {
        $m!($($args)*; kind ts lat pid tid uid nr ret fd fd_type dev ino bytes off flags mode dirfd addr
            cgroup qtime off2 cpu gid loginuid tty vpid vtid fault_off)
    };
}
macro_rules! names {
    (; $($c:ident)*) => { &[$(stringify!($c)),*] };
}
macro_rules! push_cols {
    ($b:expr, $e:expr; $($c:ident)*) => { $( $b.$c.push($e.$c); )* };
}

/// The columns every event has, recorded with or without attribution: those
/// [`EventBatch::push_core`] writes (with the strings `comm`, `path` and `path2`).
pub const CORE_COLUMNS: &[&str] = core_list!(names,);

columns! {
    /// [`EventKind`] as a byte.
    kind: u8,
    /// Start time, CLOCK_MONOTONIC ns (syscall entry, block issue, proc event time).
    ts: u64,
    /// Latency in ns (syscall entry to return; block issue to completion).
    lat: u64,
    /// Process id (thread group id).
    pid: u32,
    /// Thread id.
    tid: u32,
    /// User id.
    uid: u32,
    /// Syscall number, [`BlockOp`] or [`ProcOp`].
    nr: u16,
    /// Return value (negative errno on failure); parent pid for fork; exit code for exit.
    ret: i64,
    /// File descriptor argument ([`NO_FD`] when none).
    fd: i32,
    /// [`FdType`] of `fd` (or of the returned fd for open/accept/dup).
    fd_type: u8,
    /// Device: of the file behind `fd`, or the block device; `major << 20 | minor`.
    dev: u32,
    /// Inode number of the file behind `fd`.
    ino: u64,
    /// Bytes requested (count, length); block request size.
    bytes: u64,
    /// File offset in the file of `fd` (pread/pwrite arg, file position for read/write, lseek arg); block
    /// sector; -1 if none.
    off: i64,
    /// Open/mmap/at flags, lseek whence; block rwbs bits.
    flags: u32,
    /// Open mode, mmap prot, access mode.
    mode: u32,
    /// Directory fd of `*at` calls (-100 is AT_FDCWD); [`NO_FD`] when none.
    dirfd: i32,
    /// Address (mmap/munmap/msync); second fd (dup2 target, sendfile/splice input, pipe's second fd).
    addr: u64,
    /// cgroup id of the task.
    cgroup: u64,
    /// Block queue time (insert to issue) in ns.
    qtime: u64,
    /// Second file offset: in the file of the second fd `addr` (the input of sendfile, splice,
    /// copy_file_range); -1 if none.
    off2: i64,
    /// The CPU the event ended on: the syscall's return, the block request's completion, the
    /// process event.
    cpu: u16,
    /// Attribution (`record --why`): nanoseconds of the syscall's latency spent on CPU. The
    /// `why_*` parts of a call add up to `lat`; all are 0 when the call carries no breakdown.
    why_cpu: u64,
    /// Attribution: runnable, waiting for a CPU (preempted, or woken and not yet running).
    why_runq: u64,
    /// Attribution: blocked in an I/O wait (block requests, writeback).
    why_io: u64,
    /// Attribution: blocked in a futex until another thread woke it.
    why_lock: u64,
    /// Attribution: blocked on a pipe or socket.
    why_ipc: u64,
    /// Attribution: blocked until a timer fired (sleeps, timeouts).
    why_timer: u64,
    /// Attribution: the I/O waits of a page fault taken inside the call.
    why_fault: u64,
    /// Attribution: blocked, woken by a task for another reason.
    why_other: u64,
    /// Attribution: time the probes could not attribute (a wake-up they did not see).
    why_unknown: u64,
    /// Who ended the call's longest blocked interval: 0 none, 1 a thread (`waker_tid`,
    /// `waker_comm`), 2 a timer, 3 a softirq (its number in `waker_tid`).
    waker_ctx: u8,
    /// The waking thread's id (or the softirq's number).
    waker_tid: u32,
    /// The waking thread's command name: 16 bytes, NUL-padded, little-endian in two words
    /// (see [`comm_from_words`]).
    waker_comm_lo: u64,
    /// The second word of `waker_comm_lo`.
    waker_comm_hi: u64,
    /// The thread that took the CPU on the call's longest preemption (0: none).
    runq_tid: u32,
    /// The CPU of that preemption.
    runq_cpu: u16,
    /// Device (`major << 20 | minor`) of the block request whose completion woke the call from
    /// its longest I/O wait (0: none).
    wake_dev: u32,
    /// Sector of that request.
    wake_sector: u64,
    /// The kernel stack where the call blocked (its longest blocked interval): an id in the
    /// trace's stack table (0: none). Fresh from the probes (before the recorder resolves it),
    /// the capture's reference: map id + 1, or a negative errno as `u32`.
    kstack: u32,
    /// The user stack of the call (at its entry): an id in the trace's stack table (0: none);
    /// fresh from the probes, as `kstack`.
    ustack: u32,
    /// Real group id.
    gid: u32,
    /// Audit login uid (`/proc/PID/loginuid`); `u32::MAX` when unset.
    loginuid: u32,
    /// Controlling terminal, encoded as `/proc/PID/stat`'s `tty_nr`; 0 none.
    tty: u32,
    /// Process id in the process's own pid namespace (0: not recorded).
    vpid: u32,
    /// Thread id in the thread's own pid namespace (0: not recorded).
    vtid: u32,
    /// One level of cascade: the part (an index in [`WHY_PART_NAMES`]) the waking thread was
    /// itself blocked in for the most of the call's longest blocked interval, in the traced
    /// calls it made meanwhile (`waker_wait_ns` 0: none seen).
    waker_wait_part: u8,
    /// How long (ns) the waking thread was blocked in `waker_wait_part` during that interval.
    waker_wait_ns: u64,
    /// The block requests whose completions ended the call's I/O waits (`wake_dev` names the
    /// one of the longest): of each such wait, the time (ns) before its request existed (was
    /// inserted, or issued straight to the driver: the bio was held by cgroup I/O throttling or
    /// a plug, or not yet submitted), summed over the waits.
    wake_held_ns: u64,
    /// Those requests' time queued (insert to issue; their block events' `qtime`), summed (ns).
    wake_queue_ns: u64,
    /// Those requests' time on the device (issue to completion; their block events' latency),
    /// summed (ns).
    wake_device_ns: u64,
    /// The user address of the call's page fault with the longest I/O wait (its `why_fault`
    /// time; 0: none).
    fault_addr: u64,
    /// The byte offset in the file (`fault_path`) of that fault's address (-1: unknown).
    fault_off: i64,
    /// The start (CLOCK_MONOTONIC ns) of the call's longest blocked interval, the one whose
    /// waker is kept (0: none, and in older files).
    wait_start: u64,
    /// The end of that interval: its wake-up (or the switch in, when no wake-up was seen).
    wait_end: u64,
    /// How that interval ended ([`wake_flags`]: the waker in the recording's set, a kernel
    /// thread, a timeout while a thread held the futex); 0 in older files.
    wake_flags: u8,
    /// The kind of lock the call waited for ([`LockKind`] as a byte; 0 none).
    lock_kind: u8,
    /// The lock's address: a futex's (its `uaddr`), a semaphore set's id (0: none, or a file
    /// lock: its file is the call's fd).
    lock_addr: u64,
    /// The lock operation: a futex's `op`, flock's operation, fcntl's command, a semaphore
    /// operation's `sem_op`.
    lock_op: u32,
    /// A futex's word when the call blocked; for fcntl the lock's `l_type`, `| 0x10000` when
    /// its range is counted from the end of the file.
    lock_word: u32,
    /// The thread that held the lock, where the lock says (a PI or robust futex's owner, from
    /// its word) or the programs saw it (a futex wait its timeout ended while another thread
    /// held the futex); 0 unknown: then the waker is the one that released it.
    lock_owner: u32,
    /// A file lock's range (fcntl: the start of its struct flock, absolute for `SEEK_CUR`); a
    /// semaphore's number in its set.
    lock_start: i64,
    /// A file lock's length (0: to the end of the file).
    lock_len: i64,
    /// The waking thread's user stack where it ended the call's longest wait (a lock's
    /// release): an id in the trace's stack table, as `ustack` (0: none).
    waker_ustack: u32,
    /// The device (`major << 20 | minor`) whose request's completion ended the waking kernel
    /// thread's I/O wait of `waker_wait_ns` (0: none, or not known).
    waker_wait_dev: u32,
    /// How many intervals off its CPU the call had in all (blocked, then waiting for a CPU;
    /// preempted): the `offK_*` columns keep the first 7 of them in time order and, in `off7_*`,
    /// the longest of the rest (0: none, or a recording without them).
    off_count: u16,
    /// The call's first interval off its CPU: its part (an index in [`WHY_PART_NAMES`]: run
    /// queue, or what it was blocked on).
    off0_part: u8,
    /// Its start, CLOCK_MONOTONIC ns (0: none).
    off0_start: u64,
    /// Its end (the wake-up of a blocked interval; the switch back onto a CPU of a run-queue one).
    off0_end: u64,
    /// The part of interval 2 off its CPU (as `off0_part`).
    off1_part: u8,
    /// Its start (as `off0_start`).
    off1_start: u64,
    /// Its end (as `off0_end`).
    off1_end: u64,
    /// The part of interval 3 off its CPU (as `off0_part`).
    off2_part: u8,
    /// Its start (as `off0_start`).
    off2_start: u64,
    /// Its end (as `off0_end`).
    off2_end: u64,
    /// The part of interval 4 off its CPU (as `off0_part`).
    off3_part: u8,
    /// Its start (as `off0_start`).
    off3_start: u64,
    /// Its end (as `off0_end`).
    off3_end: u64,
    /// The part of interval 5 off its CPU (as `off0_part`).
    off4_part: u8,
    /// Its start (as `off0_start`).
    off4_start: u64,
    /// Its end (as `off0_end`).
    off4_end: u64,
    /// The part of interval 6 off its CPU (as `off0_part`).
    off5_part: u8,
    /// Its start (as `off0_start`).
    off5_start: u64,
    /// Its end (as `off0_end`).
    off5_end: u64,
    /// The part of interval 7 off its CPU (as `off0_part`).
    off6_part: u8,
    /// Its start (as `off0_start`).
    off6_start: u64,
    /// Its end (as `off0_end`).
    off6_end: u64,
    /// The part of the longest of the intervals from the eighth on (as `off0_part`).
    off7_part: u8,
    /// Its start (as `off0_start`).
    off7_start: u64,
    /// Its end (as `off0_end`).
    off7_end: u64,
}

/// Intervals off the CPU a recording keeps per call (the `offK_*` columns).
pub const OFF_KEPT: usize = 8;

/// The columns of a call's intervals off its CPU ([`EventBatch::off_cpu`] reads them).
pub const OFF_COLUMNS: [&str; 1 + 3 * OFF_KEPT] = [
    "off_count",
    "off0_part",
    "off0_start",
    "off0_end",
    "off1_part",
    "off1_start",
    "off1_end",
    "off2_part",
    "off2_start",
    "off2_end",
    "off3_part",
    "off3_start",
    "off3_end",
    "off4_part",
    "off4_start",
    "off4_end",
    "off5_part",
    "off5_start",
    "off5_end",
    "off6_part",
    "off6_start",
    "off6_end",
    "off7_part",
    "off7_start",
    "off7_end",
];

/// A call's intervals off its CPU ([`EventBatch::off_cpu`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffCpu {
    /// How many the call had in all (`off_count`).
    pub count: u16,
    /// How many of `kept` are valid.
    pub len: usize,
    /// Start, end (CLOCK_MONOTONIC ns) and part (an index in [`WHY_PART_NAMES`], never on
    /// CPU) of each, in time order: the first seven, then the longest of the rest.
    pub kept: [(u64, u64, u8); OFF_KEPT],
}

impl OffCpu {
    /// The intervals kept.
    pub fn intervals(&self) -> &[(u64, u64, u8)] {
        &self.kept[..self.len]
    }
    /// Whether every interval of the call is kept: the time between them is on CPU, exactly.
    pub fn complete(&self) -> bool {
        self.len > 0 && usize::from(self.count) == self.len
    }
    /// From when the call's time may hold intervals not kept: the end of the seventh kept one
    /// (the eighth is the longest of those after it); `u64::MAX` when every one is kept.
    pub fn unkept_from(&self) -> u64 {
        if self.complete() || self.len == 0 {
            u64::MAX
        } else {
            self.kept[self.len.min(OFF_KEPT - 1) - 1].1
        }
    }
}

/// Bits of the `wake_flags` column.
pub mod wake_flags {
    /// Set by every recording that knows these bits (a call with a breakdown recorded before
    /// them has 0).
    pub const KNOWN: u8 = 1;
    /// The waking thread is in the recording's set of threads (its pid, command-name and cgroup
    /// filter keep it; a whole-machine recording has every thread but latscope's).
    pub const TRACED: u8 = 2;
    /// The waking thread is a kernel thread.
    pub const KTHREAD: u8 = 4;
    /// A futex wait its timeout ended while another thread (`lock_owner`) held the futex.
    pub const HELD: u8 = 8;

    /// Whether a call (its `waker_ctx`, these flags and its `lock_owner`) is a futex wait its
    /// timeout ended while the futex was held by a thread not seen taking it (`lock_owner` 0).
    #[inline]
    pub fn held_unseen(waker_ctx: u8, flags: u8, lock_owner: u32) -> bool {
        waker_ctx == 2 && flags & HELD != 0 && lock_owner == 0
    }
}

/// What kind of lock a call waited for (the `lock_kind` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum LockKind {
    /// None.
    None = 0,
    /// A futex (`lock_addr`, `lock_op`, `lock_word`).
    Futex = 1,
    /// flock on the call's fd.
    Flock = 2,
    /// fcntl record lock on the call's fd (`lock_start`, `lock_len`).
    Fcntl = 3,
    /// A SysV semaphore (`lock_addr` the set, `lock_start` the number).
    Sem = 4,
    /// futex_waitv (`lock_addr`: the first futex's address).
    FutexWaitv = 5,
}

impl LockKind {
    /// Decode the stored byte; unknown values are [`LockKind::None`].
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Futex,
            2 => Self::Flock,
            3 => Self::Fcntl,
            4 => Self::Sem,
            5 => Self::FutexWaitv,
            _ => Self::None,
        }
    }
    /// Lower-case name, as the filter field `lock.kind` matches it.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "",
            Self::Futex => "futex",
            Self::Flock => "flock",
            Self::Fcntl => "fcntl",
            Self::Sem => "sem",
            Self::FutexWaitv => "futex_waitv",
        }
    }
}

/// The parts of a call's latency recorded by attribution, in the order of [`WHY_PARTS`].
pub const WHY_PART_NAMES: [&str; 9] = ["cpu", "runq", "io", "lock", "ipc", "timer", "fault", "other", "unknown"];

/// Number of attribution parts.
pub const WHY_PARTS: usize = WHY_PART_NAMES.len();

/// The columns (by `EventBatch` field name) of the attribution parts, in the order of
/// [`WHY_PART_NAMES`], and of who ended the call's wait: what a view that reads a breakdown
/// projects.
pub const WHY_COLUMNS: [&str; WHY_PARTS + 2] = [
    "why_cpu",
    "why_runq",
    "why_io",
    "why_lock",
    "why_ipc",
    "why_timer",
    "why_fault",
    "why_other",
    "why_unknown",
    "waker_ctx",
    "waker_tid",
];

/// A command name stored as two little-endian words (the `waker_comm_*` columns).
pub fn comm_from_words(lo: u64, hi: u64) -> String {
    let (b, n) = comm_bytes(lo, hi);
    String::from_utf8_lossy(&b[..n]).into_owned()
}

/// The bytes of a command name stored as two little-endian words, and how many come before its
/// first NUL (all 16 without one): the kernel's bytes, not checked for UTF-8. For writers that
/// copy a name without allocating ([`comm_from_words`] makes a `String`).
#[inline]
pub fn comm_bytes(lo: u64, hi: u64) -> ([u8; 16], usize) {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&lo.to_le_bytes());
    b[8..].copy_from_slice(&hi.to_le_bytes());
    let n = b.iter().position(|&c| c == 0).unwrap_or(16);
    (b, n)
}

/// A command name as the two words of the `waker_comm_*` columns (at most 16 bytes kept).
pub fn comm_to_words(s: &str) -> (u64, u64) {
    let mut b = [0u8; 16];
    let n = s.len().min(16);
    b[..n].copy_from_slice(&s.as_bytes()[..n]);
    (
        u64::from_le_bytes(b[..8].try_into().unwrap_or_default()),
        u64::from_le_bytes(b[8..].try_into().unwrap_or_default()),
    )
}

impl EventBatch {
    /// Number of events.
    #[inline]
    pub fn len(&self) -> usize {
        self.kind.len()
    }
    /// True when there is no event.
    pub fn is_empty(&self) -> bool {
        self.kind.is_empty()
    }
    /// End time of event `i` (start plus latency).
    #[inline]
    pub fn end(&self, i: usize) -> u64 {
        self.ts[i].saturating_add(self.lat[i])
    }
    /// The columns of the attribution parts (ns, in the order of [`WHY_PART_NAMES`]).
    pub fn why_part_columns(&self) -> [&Vec<u64>; WHY_PARTS] {
        [
            &self.why_cpu,
            &self.why_runq,
            &self.why_io,
            &self.why_lock,
            &self.why_ipc,
            &self.why_timer,
            &self.why_fault,
            &self.why_other,
            &self.why_unknown,
        ]
    }
    /// The attribution parts of event `i` (ns, in the order of [`WHY_PART_NAMES`]).
    #[inline]
    pub fn why_parts(&self, i: usize) -> [u64; WHY_PARTS] {
        [
            self.why_cpu[i],
            self.why_runq[i],
            self.why_io[i],
            self.why_lock[i],
            self.why_ipc[i],
            self.why_timer[i],
            self.why_fault[i],
            self.why_other[i],
            self.why_unknown[i],
        ]
    }
    /// Whether event `i` carries an attribution breakdown.
    #[inline]
    pub fn has_why(&self, i: usize) -> bool {
        self.why_parts(i).iter().any(|&p| p != 0)
    }

    /// The window the call that woke call `i` from its longest wait was in progress in: it ended
    /// at `.0` or later and began before `.1`. Where the recording keeps that wait (`wait_start`
    /// to `wait_end`, within the call), its end is the wake-up: the waking call is the one in
    /// progress then, `(wait_end, wait_end + 1)`. Else (older recordings) the wake-up is taken to
    /// have come within the call's CPU and run-queue time (`parts` 0 and 1) before its end, as it
    /// did when that wait was the call's last: from there to the call's end.
    pub fn wake_window(&self, i: usize, parts: &[u64; WHY_PARTS]) -> (u64, u64) {
        match self.wake_instant(i) {
            Some(at) => (at, at + 1),
            None => {
                let (ts, end) = (self.ts[i], self.end(i));
                (end.saturating_sub(parts[0].saturating_add(parts[1])).max(ts), end)
            }
        }
    }

    /// The instant the waker of call `i` ended its longest wait (`wait_end`), where the
    /// recording keeps that wait and it lies within the call.
    pub fn wake_instant(&self, i: usize) -> Option<u64> {
        let (from, to) = (self.wait_start[i], self.wait_end[i]);
        (from != 0 && from < to && from >= self.ts[i] && to <= self.end(i)).then_some(to)
    }

    /// The intervals call `i` spent off its CPU as the recording keeps them (the `offK_*`
    /// columns): in time order, each within the call. Empty when none were recorded (a call
    /// that never left its CPU, a recording without them) or the columns do not describe such
    /// intervals (a damaged or synthetic file).
    pub fn off_cpu(&self, i: usize) -> OffCpu {
        let mut o = OffCpu { count: self.off_count[i], ..OffCpu::default() };
        let n = usize::from(o.count).min(OFF_KEPT);
        let cols: [(&[u8], &[u64], &[u64]); OFF_KEPT] = [
            (&self.off0_part, &self.off0_start, &self.off0_end),
            (&self.off1_part, &self.off1_start, &self.off1_end),
            (&self.off2_part, &self.off2_start, &self.off2_end),
            (&self.off3_part, &self.off3_start, &self.off3_end),
            (&self.off4_part, &self.off4_start, &self.off4_end),
            (&self.off5_part, &self.off5_start, &self.off5_end),
            (&self.off6_part, &self.off6_start, &self.off6_end),
            (&self.off7_part, &self.off7_start, &self.off7_end),
        ];
        let (mut at, end) = (self.ts[i], self.end(i));
        for (k, (part, start, stop)) in cols.iter().take(n).enumerate() {
            let (p, from, to) = (part[i], start[i], stop[i]);
            if usize::from(p) >= WHY_PARTS || p == 0 || from < at || to <= from || to > end {
                return OffCpu::default();
            }
            o.kept[k] = (from, to, p);
            at = to;
        }
        o.len = n;
        o
    }

    /// The longest blocked interval of call `i` (`wait_start` to `wait_end`: the one wait whose
    /// time a recording keeps), given its breakdown `parts` ([`EventBatch::why_parts`]): its
    /// start, its end, and its part (an index of [`WHY_PART_NAMES`]) when only one blocked part
    /// is long enough to hold it (a call that waited for one thing: most calls). `None` when
    /// none was recorded, or it does not lie within the call.
    pub fn longest_wait(&self, i: usize, parts: &[u64; WHY_PARTS]) -> Option<(u64, u64, Option<usize>)> {
        let (from, to) = (self.wait_start[i], self.wait_end[i]);
        if from == 0 || to <= from || from < self.ts[i] || to > self.end(i) {
            return None;
        }
        let d = to - from;
        // The blocked parts: all but on CPU (0) and run queue (1).
        let mut fits = (2..WHY_PARTS).filter(|&k| parts[k] >= d);
        let part = match (fits.next(), fits.next()) {
            (Some(k), None) => Some(k),
            _ => None,
        };
        Some((from, to, part))
    }
}

impl Event {
    /// The attribution parts (ns, in the order of [`WHY_PART_NAMES`]).
    pub fn why_parts(&self) -> [u64; WHY_PARTS] {
        [
            self.why_cpu,
            self.why_runq,
            self.why_io,
            self.why_lock,
            self.why_ipc,
            self.why_timer,
            self.why_fault,
            self.why_other,
            self.why_unknown,
        ]
    }
    /// The kind, if the stored byte is valid.
    pub fn event_kind(&self) -> Option<EventKind> {
        EventKind::from_u8(self.kind)
    }
    /// The fd type.
    pub fn fd_kind(&self) -> FdType {
        FdType::from_u8(self.fd_type)
    }
    /// The operation name: syscall name, block op, or proc op.
    pub fn op_name(&self) -> String {
        op_name(self.kind, self.nr)
    }
}

/// The operation name for a kind and `nr`, as `evt.type` matches it and every output prints it:
/// the syscall name (`write`), `block_` and the block op (`block_write`), `proc_` and the process
/// op (`proc_exec`). Syscalls and block requests never share a name, so a query grouping by it
/// never mixes them.
pub fn op_name(kind: u8, nr: u16) -> String {
    match EventKind::from_u8(kind) {
        Some(EventKind::Syscall) => {
            crate::syscall_name(nr).map(str::to_string).unwrap_or_else(|| format!("syscall_{nr}"))
        }
        Some(EventKind::Block) => format!("block_{}", BlockOp::from_u16(nr).name()),
        Some(EventKind::Proc) => format!("proc_{}", ProcOp::from_u16(nr).map(|p| p.name()).unwrap_or("?")),
        None => format!("kind{kind}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_append_as_rows_do() {
        let mut src = EventBatch::default();
        for i in 0..10u64 {
            let s = "x".repeat(i as usize % 4);
            src.push(&Event {
                ts: i,
                pid: i as u32 * 3,
                comm: s.clone(),
                path: format!("/p{i}ü"),
                ..Default::default()
            });
        }
        for (a, b) in [(0, 10), (3, 7), (9, 10), (5, 5)] {
            let mut by_range = EventBatch::default();
            by_range.push(&src.get(2));
            by_range.append_range(&src, a..b);
            let mut by_row = EventBatch::default();
            by_row.push(&src.get(2));
            (a..b).for_each(|i| by_row.push_from(&src, i));
            assert_eq!(by_range, by_row, "{a}..{b}");
            assert!(by_range.check_lengths().is_ok());
        }
        // Into an empty column (no offsets at all yet).
        let mut c = StrCol { offsets: Vec::new(), data: Vec::new() };
        c.append_range(&src.path, 1..3);
        assert_eq!((c.len(), c.get(0), c.get(1)), (2, "/p1ü", "/p2ü"));
    }

    #[test]
    fn core_rows_then_full_rows_read_as_pushed() {
        let core = |k: u64| Event {
            kind: 1,
            ts: k,
            lat: 2,
            pid: 3,
            tid: 4,
            uid: 5,
            nr: 6,
            ret: -7,
            fd: 8,
            fd_type: 9,
            dev: 10,
            ino: 11,
            bytes: 12,
            off: 13,
            flags: 14,
            mode: 15,
            dirfd: 16,
            addr: 17,
            cgroup: 18,
            qtime: 19,
            off2: 20,
            cpu: 21,
            gid: 22,
            loginuid: 23,
            tty: 24,
            vpid: 25,
            vtid: 26,
            fault_off: -1,
            comm: "c".into(),
            path: format!("/p{k}"),
            path2: "/q".into(),
            ..Default::default()
        };
        let full = |k: u64| Event { why_cpu: 2, off7_end: 9, waker_tid: 4, fault_path: "/f".into(), ..core(k) };
        let rows = [core(0), core(1), full(2), core(3), full(4), core(5)];
        let mut a = EventBatch::default();
        let mut b = EventBatch::default();
        for e in &rows {
            if e.why_cpu == 0 {
                a.push_core(e)
            } else {
                a.push(e)
            }
            b.push(e);
        }
        assert!(a.check_lengths().is_err(), "ragged before the tail is filled");
        a.fill_tail();
        assert!(a.check_lengths().is_ok());
        assert_eq!(a, b);
        assert_eq!(CORE_COLUMNS.len(), 28);
        a.fill_tail();
        assert_eq!(a, b);
    }

    #[test]
    fn push_get_roundtrip() {
        let mut b = EventBatch::with_capacity(4);
        let e = Event {
            kind: 0,
            ts: 10,
            lat: 5,
            pid: 1,
            tid: 2,
            nr: 17,
            comm: "cat".into(),
            path: "/tmp/x".into(),
            ..Default::default()
        };
        b.push(&e);
        b.push(&Event { comm: "ü".into(), ..e.clone() });
        assert_eq!(b.len(), 2);
        assert_eq!(b.get(0), e);
        assert_eq!(b.get(1).comm, "ü");
        assert_eq!(b.end(0), 15);
        assert!(b.check_lengths().is_ok());
        let mut c = EventBatch::default();
        c.append(&b);
        c.push_from(&b, 1);
        c.append(&EventBatch::default());
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(2), b.get(1));
        assert_eq!(c.get(0), b.get(0));
        assert!(c.check_lengths().is_ok());
        assert_eq!(e.op_name(), "pread64");
        b.clear();
        assert!(b.is_empty());
    }

    #[test]
    fn strcol_lossy() {
        let mut c = StrCol::new();
        c.push_bytes(b"ok");
        c.push_bytes(&[0xff, b'a']);
        assert_eq!(c.get(0), "ok");
        assert_eq!(c.get(1), "\u{fffd}a");
    }
}

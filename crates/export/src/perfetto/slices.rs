//! One event as one slice: its track, times, name and arguments, held until it is written.
//!
//! A syscall is a slice on its thread from entry to return, a block request a slice on its disk
//! from issue to completion, a process event (fork, exec, exit) an instant on its process: one
//! slice per event, with the event's latency as its duration, so that a trace processor's slice
//! table counts what `latscope events` prints. Its arguments are gathered as a list of
//! `(name, value)` ([`Slice`], one reused for every event) and encoded at once, as the event
//! arrives ([`Out::encode`](super::out::Out::encode)): a slice held for its links keeps its
//! bytes, not its arguments. A new column is one more `push` in [`SliceBuilder`].

use std::fmt::{self, Write as _};

use latscope_event::units::write_ns;
use latscope_event::{
    comm_bytes, dev_major_minor, errno_name, BlockOp, EventBatch, ProcOp, Rwbs, TraceHeader, WHY_PARTS,
};

use super::intern::Arg;

/// What a person reads for each attribution part (as `latscope why` says them).
pub const PART_LABELS: [&str; WHY_PARTS] =
    ["on CPU", "run queue", "block I/O", "lock", "pipe/socket", "timer/sleep", "page fault", "other wait", "unknown"];

/// The kernel's softirqs, by number.
const SOFTIRQS: [&str; 10] =
    ["hi", "timer", "net_tx", "net_rx", "block", "irq_poll", "tasklet", "sched", "hrtimer", "rcu"];

/// An argument's value.
#[derive(Debug, Clone, Copy)]
pub enum Val {
    U(u64),
    I(i64),
    /// A string in the slice's `strs`, interned in the file (repeated values: paths, names).
    Interned(u32, u32),
    /// A string in the slice's `strs`, written as it is (values that rarely repeat).
    Plain(u32, u32),
}

/// The category of a slice (an index of the interner's categories).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cat {
    Syscall = 0,
    Block = 1,
    Proc = 2,
    Latscope = 3,
}

/// What a slice says, gathered before it is encoded: its category, arguments and the slices
/// inside it.
#[derive(Debug, Default)]
pub struct Slice {
    pub cat: u8,
    pub args: Vec<(Arg, Val)>,
    pub strs: Vec<u8>,
    /// Slices inside the call, in time order, one after another: its parts as the recording
    /// keeps them ([`call_parts`]), or its longest blocked interval alone ([`longest_wait`]).
    /// Start, end, name key.
    pub parts: Vec<(u64, u64, u32)>,
}

impl Slice {
    /// Empties it for the next event (its vectors keep their room).
    pub fn clear(&mut self) {
        self.args.clear();
        self.strs.clear();
        self.parts.clear();
    }
}

/// A held slice's flows: inline up to two.
pub type Flows = smallvec::SmallVec<[u64; 2]>;

/// Bytes a slice keeps in place: a call's begin fields, with a few arguments and interning
/// entries, fit; a call with many parts or long new strings goes to the heap.
const ENC_INLINE: usize = 128;

/// A slice's encoded bytes, in place up to [`ENC_INLINE`] bytes, else in a vector (that keeps
/// its room for the next slice of the box). Copied in by two known lengths: no growth test
/// per byte slice appended.
#[derive(Debug)]
pub struct Encoded {
    len: usize,
    inline: [u8; ENC_INLINE],
    heap: Vec<u8>,
}

impl Default for Encoded {
    fn default() -> Encoded {
        Encoded { len: 0, inline: [0; ENC_INLINE], heap: Vec::new() }
    }
}

impl Encoded {
    /// Sets its bytes to `a` then `b`.
    #[inline]
    pub fn set(&mut self, a: &[u8], b: &[u8]) {
        let n = a.len() + b.len();
        self.len = n;
        if n <= ENC_INLINE {
            self.inline[..a.len()].copy_from_slice(a);
            self.inline[a.len()..n].copy_from_slice(b);
        } else {
            self.heap.clear();
            self.heap.extend_from_slice(a);
            self.heap.extend_from_slice(b);
        }
    }

    #[inline]
    pub fn bytes(&self) -> &[u8] {
        if self.len <= ENC_INLINE {
            &self.inline[..self.len]
        } else {
            &self.heap
        }
    }

    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Whether its bytes are outside the slice (for the prefetch of slices about to leave).
    #[inline]
    pub fn spilled(&self) -> bool {
        self.len > ENC_INLINE
    }
}

/// A slice waiting to be written: encoded, with what its links need.
#[derive(Debug, Default)]
pub struct Held {
    /// Arrival number (position in the hold queue).
    pub seq: u64,
    pub ts: u64,
    pub end: u64,
    /// An instant (a process event) rather than a slice.
    pub instant: bool,
    pub track: u64,
    /// The slice name's key: kind << 16 | number (see [`name_of`]).
    pub name_key: u32,
    /// Its bytes ([`Out::encode`](super::out::Out::encode)): the fields of its begin event after
    /// its type and track (`body` bytes), the packets of the slices inside it, then the interning
    /// entries it made (`interned` bytes). Inline up to a call's usual size: no allocation, and
    /// the bytes come in with the slice when it is written.
    pub enc: Encoded,
    pub body: u32,
    pub interned: u32,
    /// The interning tables were cleared before it was encoded: the sequence's state is cleared
    /// before it is written.
    pub reset: bool,
    /// How many slices of its parts are inside it (counted in its file's slices).
    pub parts: u16,
    /// Flows that start at this slice (it woke a call, its completion ended a wait).
    pub flows_out: Flows,
    /// Flows that end at this slice (what woke it).
    pub flows_in: Flows,
    /// The latest end seen when it arrived.
    pub arrived: u64,
    /// The thread (syscalls) it is indexed under for wake-up links, 0 none.
    pub tid: u32,
    /// How many arrivals before it the call of its thread before it arrived, 0 none (or too
    /// far back to be held still): the way back to calls older than those its thread's index
    /// keeps.
    pub prev_call: u32,
    /// The request key (block requests) it is indexed under, `None` none.
    pub request: Option<(u32, u64)>,
    /// The request (disk and sector) whose completion woke it while its link is not found.
    pub woken_by: Option<(u32, u64)>,
}

/// Key of the queue-time slices of block requests.
pub const QUEUED_KEY: u32 = 0xff_0000;
/// Key of the slices of calls' parts: `WAIT_KEY | part` (an index of [`PART_LABELS`]),
/// `WAIT_KEY | 0xff` a blocked interval whose part is not known, `WAIT_KEY | 0xfe` time on CPU
/// that also holds intervals off it the recording did not keep.
pub const WAIT_KEY: u32 = 0xfe_0000;
const WAIT_PART_UNKNOWN: u32 = 0xff;
const CPU_AND_OTHERS: u32 = 0xfe;

/// The name of a slice key.
pub fn name_of(key: u32) -> String {
    if key == QUEUED_KEY {
        return "queued".into();
    }
    if key & !0xff == WAIT_KEY {
        return match key & 0xff {
            0 | 1 => PART_LABELS[(key & 0xff) as usize].into(),
            CPU_AND_OTHERS => "on CPU, and shorter waits".into(),
            k => match PART_LABELS.get(k as usize) {
                Some(part) => format!("blocked: {part}"),
                None => "blocked".into(),
            },
        };
    }
    latscope_event::op_name((key >> 16) as u8, key as u16)
}

/// The longest blocked interval of call `i` ([`EventBatch::longest_wait`]) as a slice inside
/// the call: start, end and name key (`blocked: PART`, or `blocked` when its part is not known).
pub fn longest_wait(b: &EventBatch, i: usize, parts: &[u64; WHY_PARTS]) -> Option<(u64, u64, u32)> {
    let (from, to, part) = b.longest_wait(i, parts)?;
    Some((from, to, WAIT_KEY | part.map_or(WAIT_PART_UNKNOWN, |k| k as u32)))
}

/// The parts of call `i` in time order as slices inside it (into `out`, emptied first): each
/// interval off its CPU the recording keeps (`run queue`, `blocked: PART`) and, between them,
/// `on CPU`; when the call had more intervals than the recording keeps, the time holding the
/// others is `on CPU, and shorter waits`. Without kept intervals (older recordings), its
/// longest blocked interval alone ([`longest_wait`]), if any.
pub fn call_parts(b: &EventBatch, i: usize, parts: &[u64; WHY_PARTS], out: &mut Vec<(u64, u64, u32)>) {
    out.clear();
    let off = b.off_cpu(i);
    if off.len == 0 {
        if parts[2..].iter().any(|&v| v != 0) {
            out.extend(longest_wait(b, i, parts));
        }
        return;
    }
    let after = off.unkept_from();
    let gap = |from: u64| WAIT_KEY | if from >= after { CPU_AND_OTHERS } else { 0 };
    let mut at = b.ts[i];
    for &(from, to, part) in off.intervals() {
        if from > at {
            out.push((at, from, gap(at)));
        }
        out.push((from, to, WAIT_KEY | u32::from(part)));
        at = to;
    }
    let end = b.end(i);
    if end > at {
        out.push((at, end, gap(at)));
    }
}

/// Fills a [`Slice`] (reused: its vectors keep their room).
pub struct SliceBuilder<'a> {
    pub h: &'a mut Slice,
}

/// Text formatted straight into a slice's string bytes: a slice's arguments cost no allocation.
struct Strs<'a>(&'a mut Vec<u8>);

impl fmt::Write for Strs<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

impl SliceBuilder<'_> {
    /// Writes text with `f` at the end of the slice's strings: its offset and length.
    fn written(&mut self, f: impl FnOnce(&mut Strs) -> fmt::Result) -> (u32, u32) {
        let at = self.h.strs.len();
        let _ = f(&mut Strs(&mut self.h.strs));
        (at as u32, (self.h.strs.len() - at) as u32)
    }
    fn interned_with(&mut self, a: Arg, f: impl FnOnce(&mut Strs) -> fmt::Result) {
        let (o, l) = self.written(f);
        self.h.args.push((a, Val::Interned(o, l)));
    }
    fn plain_with(&mut self, a: Arg, f: impl FnOnce(&mut Strs) -> fmt::Result) {
        let (o, l) = self.written(f);
        self.h.args.push((a, Val::Plain(o, l)));
    }
    fn str_at(&mut self, s: &[u8]) -> (u32, u32) {
        let at = self.h.strs.len() as u32;
        self.h.strs.extend_from_slice(s);
        (at, s.len() as u32)
    }
    fn interned(&mut self, a: Arg, s: &str) {
        self.interned_bytes(a, s.as_bytes());
    }
    fn interned_bytes(&mut self, a: Arg, s: &[u8]) {
        let (o, l) = self.str_at(s);
        self.h.args.push((a, Val::Interned(o, l)));
    }
    fn plain(&mut self, a: Arg, s: &str) {
        let (o, l) = self.str_at(s.as_bytes());
        self.h.args.push((a, Val::Plain(o, l)));
    }
    fn u(&mut self, a: Arg, v: u64) {
        self.h.args.push((a, Val::U(v)));
    }
    fn i(&mut self, a: Arg, v: i64) {
        self.h.args.push((a, Val::I(v)));
    }

    /// A syscall: fd and path, bytes, offset, result, and the `record --why` breakdown (`parts`,
    /// [`EventBatch::why_parts`], read by the caller).
    pub fn syscall(&mut self, h: &TraceHeader, b: &EventBatch, i: usize, parts: &[u64; WHY_PARTS]) {
        self.h.cat = Cat::Syscall as u8;
        if b.fd[i] != latscope_event::NO_FD {
            self.i(Arg::Fd, i64::from(b.fd[i]));
            if b.off[i] >= 0 {
                self.i(Arg::Offset, b.off[i]);
            }
        }
        let p = b.path.bytes(i);
        if !p.is_empty() {
            self.interned_bytes(Arg::Path, p);
        }
        let p2 = b.path2.bytes(i);
        if !p2.is_empty() {
            self.interned_bytes(Arg::Path2, p2);
        }
        if b.bytes[i] != 0 {
            self.u(Arg::Bytes, b.bytes[i]);
        }
        self.i(Arg::Ret, b.ret[i]);
        if (-4095..0).contains(&b.ret[i]) {
            match errno_name(-b.ret[i]) {
                Some(name) => self.interned(Arg::Error, name),
                None => self.interned_with(Arg::Error, |w| write!(w, "E{}", -b.ret[i])),
            }
        }
        if parts.iter().all(|&v| v == 0) {
            return;
        }
        let mut main = 0;
        for (k, &v) in parts.iter().enumerate() {
            if v != 0 {
                self.u(Arg::WHY[k], v);
            }
            if v > parts[main] {
                main = k;
            }
        }
        self.interned(Arg::WhyMain, PART_LABELS[main]);
        if b.waker_ctx[i] == 1 {
            // A thread (most wakers): written without the formatting machinery, one per call.
            let at = self.h.strs.len();
            write_waker_thread(&mut self.h.strs, b, i);
            self.h.args.push((Arg::Waker, Val::Interned(at as u32, (self.h.strs.len() - at) as u32)));
        } else if (2..=3).contains(&b.waker_ctx[i]) {
            self.interned_with(Arg::Waker, |w| write_waker(w, b, i));
        }
        let part = b.waker_wait_part[i] as usize;
        if b.waker_ctx[i] == 1 && b.waker_wait_ns[i] > 0 && part < WHY_PARTS {
            self.plain_with(Arg::WakerWasIn, |w| {
                write!(w, "{} ", PART_LABELS[part])?;
                write_ns(w, b.waker_wait_ns[i])
            });
        }
        if b.runq_tid[i] != 0 {
            self.plain_with(Arg::CpuHeldBy, |w| write!(w, "tid {} on CPU {}", b.runq_tid[i], b.runq_cpu[i]));
        }
        if b.wake_dev[i] != 0 {
            let (ma, mi) = dev_major_minor(b.wake_dev[i]);
            let name = h.disk_name(b.wake_dev[i]);
            self.plain_with(Arg::WokenByRequest, |w| {
                match name {
                    Some(n) => write!(w, "{n} ({ma}:{mi})")?,
                    None => write!(w, "{ma}:{mi}")?,
                }
                write!(w, " sector {}", b.wake_sector[i])
            });
        }
        if b.fault_addr[i] != 0 {
            let fp = b.fault_path.get(i);
            self.interned(Arg::FaultPath, if fp.is_empty() { "an unknown file" } else { fp });
        }
    }

    /// A block request: disk, sector, size, time queued, flags, the process that queued it.
    pub fn block(&mut self, h: &TraceHeader, b: &EventBatch, i: usize) {
        self.h.cat = Cat::Block as u8;
        self.disk(h, b.dev[i]);
        self.i(Arg::Sector, b.off[i]); // -1: none (a flush), as `events --json` says
        self.u(Arg::Bytes, b.bytes[i]);
        self.u(Arg::QueuedNs, b.qtime[i]);
        self.interned_with(Arg::Rwbs, |w| Rwbs::write(w, BlockOp::from_u16(b.nr[i]), b.flags[i]));
        let comm = b.comm.get(i);
        if b.pid[i] != 0 || !comm.is_empty() {
            self.interned_with(Arg::Issuer, |w| write!(w, "{comm}/{}", b.pid[i]));
        }
        if b.ret[i] != 0 {
            self.i(Arg::Error, b.ret[i]);
        }
    }

    /// The disk's name, or its major:minor.
    fn disk(&mut self, h: &TraceHeader, dev: u32) {
        match h.disk_name(dev) {
            Some(n) => self.interned(Arg::Disk, n),
            None => {
                let (ma, mi) = dev_major_minor(dev);
                self.interned_with(Arg::Disk, |w| write!(w, "{ma}:{mi}"));
            }
        }
    }

    /// A process event: the parent of a fork, the program and arguments of an exec, the code
    /// of an exit.
    pub fn proc(&mut self, b: &EventBatch, i: usize) {
        self.h.cat = Cat::Proc as u8;
        match ProcOp::from_u16(b.nr[i]) {
            Some(ProcOp::Fork) => self.i(Arg::ParentPid, b.ret[i]),
            Some(ProcOp::Exec) => {
                let p = b.path.get(i);
                if !p.is_empty() {
                    self.interned(Arg::Path, p);
                }
                let a = b.path2.get(i);
                if !a.is_empty() {
                    self.plain(Arg::Args, a);
                }
            }
            Some(ProcOp::Exit) => self.i(Arg::ExitCode, b.ret[i]),
            // A thread's times so far: on CPU and runnable since it started.
            Some(ProcOp::Times) => {
                self.i(Arg::ThreadCpu, b.bytes[i] as i64);
                self.i(Arg::ThreadRunq, b.qtime[i] as i64);
            }
            // An on-CPU sample: in the kernel (1) or in user code (0).
            Some(ProcOp::Sample) => self.i(Arg::Ret, b.ret[i]),
            None => self.i(Arg::Ret, b.ret[i]),
        }
    }

    /// The queue time of block request `i` (insert to issue) as a slice of its own.
    pub fn queued(&mut self, h: &TraceHeader, b: &EventBatch, i: usize) {
        self.h.cat = Cat::Latscope as u8;
        self.disk(h, b.dev[i]);
        self.i(Arg::Sector, b.off[i]); // -1: none (a flush), as `events --json` says
        self.u(Arg::Bytes, b.bytes[i]);
    }
}

/// `comm/tid` of the thread that woke call `i` (`waker_ctx` 1), as [`write_waker`] writes it.
fn write_waker_thread(out: &mut Vec<u8>, b: &EventBatch, i: usize) {
    let (c, n) = comm_bytes(b.waker_comm_lo[i], b.waker_comm_hi[i]);
    match std::str::from_utf8(&c[..n]) {
        Ok(s) => out.extend_from_slice(s.as_bytes()),
        Err(_) => out.extend_from_slice(String::from_utf8_lossy(&c[..n]).as_bytes()),
    }
    out.push(b'/');
    out.extend_from_slice(itoa::Buffer::new().format(b.waker_tid[i]).as_bytes());
}

/// Who woke call `i` from its longest blocked interval (`waker_ctx` 1 to 3): `comm/tid`,
/// `[timer]`, `[softirq:NAME]`.
fn write_waker(w: &mut impl fmt::Write, b: &EventBatch, i: usize) -> fmt::Result {
    match b.waker_ctx[i] {
        1 => {
            let (c, n) = comm_bytes(b.waker_comm_lo[i], b.waker_comm_hi[i]);
            write!(w, "{}/{}", String::from_utf8_lossy(&c[..n]), b.waker_tid[i])
        }
        2 => w.write_str("[timer]"),
        _ => write!(w, "[softirq:{}]", SOFTIRQS.get(b.waker_tid[i] as usize).copied().unwrap_or("?")),
    }
}

#[cfg(test)]
mod tests {
    use latscope_event::Event;

    use super::*;

    /// A box's bytes in place, on the heap, and in place again after the heap (the box is
    /// reused for slices of every size): each time the two pieces, in order, and nothing else.
    #[test]
    fn encoded_bytes_are_the_two_pieces_in_place_or_not() {
        let mut e = Encoded::default();
        let bytes = |n: usize, k: u8| (0..n).map(|j| (j as u8).wrapping_mul(k)).collect::<Vec<u8>>();
        for (a, b) in [(0, 0), (70, 20), (100, 28), (100, 29), (300, 5), (1, 0), (0, 128), (64, 64), (5, 200), (3, 4)] {
            let (x, y) = (bytes(a, 3), bytes(b, 7));
            e.set(&x, &y);
            assert_eq!(e.bytes(), [x.as_slice(), y.as_slice()].concat(), "{a} + {b}");
            assert_eq!(e.spilled(), a + b > ENC_INLINE, "{a} + {b}");
        }
        e.clear();
        assert!(e.bytes().is_empty());
    }

    /// Call 0 of a batch: 1_000..2_000 with its longest wait `from..to` and `parts`.
    fn wait_of(from: u64, to: u64, parts: [u64; WHY_PARTS]) -> Option<(u64, u64, u32)> {
        let mut b = EventBatch::default();
        b.push(&Event { ts: 1_000, lat: 1_000, wait_start: from, wait_end: to, ..Default::default() });
        longest_wait(&b, 0, &parts)
    }

    #[test]
    fn a_calls_longest_wait_is_named_by_the_only_part_that_can_hold_it() {
        // Waited 600 ns for a lock and 100 ns on a pipe: the 600 ns interval is the lock's.
        let k = wait_of(1_100, 1_700, [200, 100, 0, 600, 100, 0, 0, 0, 0]).unwrap();
        assert_eq!((k.0, k.1, name_of(k.2).as_str()), (1_100, 1_700, "blocked: lock"));
        // 300 ns, and both the lock's and the pipe's totals could hold it: not named.
        let k = wait_of(1_100, 1_400, [200, 100, 0, 350, 350, 0, 0, 0, 0]).unwrap();
        assert_eq!(name_of(k.2), "blocked");
        assert_eq!(name_of(wait_of(1_000, 2_000, [0, 0, 0, 0, 0, 1_000, 0, 0, 0]).unwrap().2), "blocked: timer/sleep");
    }

    #[test]
    fn a_wait_outside_its_call_or_empty_is_no_slice() {
        let parts = [0, 0, 0, 0, 1_000, 0, 0, 0, 0];
        assert_eq!(wait_of(0, 0, parts), None, "none recorded");
        assert_eq!(wait_of(1_500, 1_500, parts), None, "empty");
        assert_eq!(wait_of(900, 1_500, parts), None, "begins before the call");
        assert_eq!(wait_of(1_500, 2_001, parts), None, "ends after it");
    }

    /// Call 0 of a batch, 1_000..2_000, with `n` intervals off its CPU in all, the first kept.
    fn parts_of(n: u16, kept: &[(u64, u64, u8)]) -> Vec<(u64, u64, String)> {
        let mut e = Event { ts: 1_000, lat: 1_000, off_count: n, ..Default::default() };
        let slots = [
            (&mut e.off0_start, &mut e.off0_end, &mut e.off0_part),
            (&mut e.off1_start, &mut e.off1_end, &mut e.off1_part),
            (&mut e.off2_start, &mut e.off2_end, &mut e.off2_part),
            (&mut e.off3_start, &mut e.off3_end, &mut e.off3_part),
            (&mut e.off4_start, &mut e.off4_end, &mut e.off4_part),
            (&mut e.off5_start, &mut e.off5_end, &mut e.off5_part),
            (&mut e.off6_start, &mut e.off6_end, &mut e.off6_part),
            (&mut e.off7_start, &mut e.off7_end, &mut e.off7_part),
        ];
        for ((s, t, p), &(from, to, part)) in slots.into_iter().zip(kept) {
            (*s, *t, *p) = (from, to, part);
        }
        let mut b = EventBatch::default();
        b.push(&e);
        let mut out = Vec::new();
        call_parts(&b, 0, &[100, 100, 0, 0, 800, 0, 0, 0, 0], &mut out);
        out.into_iter().map(|(f, t, k)| (f, t, name_of(k))).collect()
    }

    #[test]
    fn a_calls_parts_tile_it_in_time_order() {
        let got = parts_of(2, &[(1_050, 1_850, 4), (1_850, 1_950, 1)]);
        let want = [
            (1_000, 1_050, "on CPU"),
            (1_050, 1_850, "blocked: pipe/socket"),
            (1_850, 1_950, "run queue"),
            (1_950, 2_000, "on CPU"),
        ];
        assert_eq!(got, want.map(|(f, t, n)| (f, t, n.to_string())));
        // Starting at the call's start and ending at its end: no empty slice of CPU time.
        let got = parts_of(1, &[(1_000, 2_000, 5)]);
        assert_eq!(got, [(1_000, 2_000, "blocked: timer/sleep".to_string())]);
    }

    #[test]
    fn time_holding_intervals_not_kept_says_so() {
        // Ten intervals: seven kept in order, the eighth the longest of the other three.
        let mut kept: Vec<(u64, u64, u8)> = (0..7).map(|k| (1_010 + k * 20, 1_020 + k * 20, 1)).collect();
        kept.push((1_500, 1_900, 3));
        let got = parts_of(10, &kept);
        let names: Vec<&str> = got.iter().map(|p| p.2.as_str()).collect();
        assert_eq!(got.len(), 17, "{got:?}");
        assert_eq!(names[13], "run queue");
        assert_eq!(&names[14..], ["on CPU, and shorter waits", "blocked: lock", "on CPU, and shorter waits"]);
        assert!(names[..14].iter().all(|n| *n == "on CPU" || *n == "run queue"), "{names:?}");
    }

    #[test]
    fn intervals_that_do_not_fit_the_call_fall_back_to_its_longest_wait() {
        // Overlapping, outside the call, of no part: none used; no longest wait recorded either.
        for kept in [
            vec![(1_100, 1_500, 4), (1_400, 1_600, 1)],
            vec![(900, 1_500, 4)],
            vec![(1_100, 2_100, 4)],
            vec![(1_100, 1_500, 0)],
            vec![(1_100, 1_500, 9)],
        ] {
            assert_eq!(parts_of(kept.len() as u16, &kept), [], "{kept:?}");
        }
    }
}

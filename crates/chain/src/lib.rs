//! Chains of waits to their root (`record --why`, docs/WHY.md "The chain of waits").
//!
//! A slow call waited on someone: the thread that woke it from its longest blocked interval (or
//! held the lock it waited for). That thread may itself have been blocked meanwhile, in a call of
//! its own, on yet another thread, and so on: a mutex whose holder waits for the journal thread,
//! which waits for the disk. The chain follows the wake-ups through the calls the recording
//! holds, from the call down to its root: a thread that was running (its own work, or waiting
//! for a CPU), a device (the block request whose completion ended the wait), a timer, outside
//! work (a thread outside the recording, packets from the network), or a kernel thread's wait
//! (a journal thread's block I/O, from the recording's one level of cascade). Each link carries
//! the time of that link inside the window of the one before it; a thread met twice stops the
//! chain (a cycle), and so does the depth limit.
//!
//! The walk is done in user space from the recorded calls (each call keeps its longest blocked
//! interval and who ended it: `wait_start`, `wait_end`, `waker_*`), indexed by thread
//! ([`ChainIndex`]): the kernel keeps one level per call, the index any depth.
//!
//! ```
//! use latscope_chain::ChainIndex;
//! use latscope_event::EventBatch;
//! let b = EventBatch::default();
//! let mut idx = ChainIndex::default();
//! idx.add(&b);
//! assert!(b.is_empty() || idx.chain(&b, 0).is_none());
//! ```

use latscope_event::{comm_from_words, op_name, wake_flags, EventBatch, EventKind, WHY_PARTS, WHY_PART_NAMES};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Links followed at most (the call's own included).
pub const MAX_DEPTH: usize = 8;

/// Calls kept per thread (the oldest are forgotten first).
const MAX_CALLS_PER_THREAD: usize = 4096;

/// Calls are forgotten once they ended this long before the newest one indexed.
const HORIZON_NS: u64 = 600_000_000_000;

/// The part of the running time of a thread outside its recorded calls, in a link's `parts`
/// (after the `WHY_PARTS` parts of its calls).
pub const RUNNING: usize = WHY_PARTS;

/// One recorded call that blocked, as the index keeps it.
#[derive(Debug, Clone)]
struct Call {
    ts: u64,
    end: u64,
    wait_start: u64,
    wait_end: u64,
    parts: [u64; WHY_PARTS],
    nr: u16,
    waker_ctx: u8,
    waker_tid: u32,
    waker_comm: (u64, u64),
    wake_flags: u8,
    lock_owner: u32,
    wake_dev: u32,
    waker_wait_part: u8,
    waker_wait_ns: u64,
    waker_wait_dev: u32,
}

impl Call {
    fn of(b: &EventBatch, i: usize) -> Call {
        Call {
            ts: b.ts[i],
            end: b.end(i),
            wait_start: b.wait_start[i],
            wait_end: b.wait_end[i],
            parts: b.why_parts(i),
            nr: b.nr[i],
            waker_ctx: b.waker_ctx[i],
            waker_tid: b.waker_tid[i],
            waker_comm: (b.waker_comm_lo[i], b.waker_comm_hi[i]),
            wake_flags: b.wake_flags[i],
            lock_owner: b.lock_owner[i],
            wake_dev: b.wake_dev[i],
            waker_wait_part: b.waker_wait_part[i],
            waker_wait_ns: b.waker_wait_ns[i],
            waker_wait_dev: b.waker_wait_dev[i],
        }
    }

    /// The blocked part it spent the most in (block I/O, lock, pipe/socket, timer, page fault,
    /// other, unknown).
    fn part(&self) -> usize {
        (2..WHY_PARTS).max_by_key(|&k| (self.parts[k], std::cmp::Reverse(k))).unwrap_or(2)
    }

    /// Who it waited on in its longest blocked interval.
    fn waited_on(&self) -> Next {
        let p = self.part();
        if (p == 2 || p == 6) && self.wake_dev != 0 {
            return Next::Device(self.wake_dev);
        }
        let owner = self.lock_owner;
        if owner != 0 && !(self.waker_ctx == 1 && self.waker_tid == owner) {
            // The lock's holder (of the recording's process: its owner word, or the programs'
            // holder of a futex whose timeout ended the wait); a timer has no name of its own.
            let comm = if self.waker_ctx == 1 { String::new() } else { words(self.waker_comm) };
            return Next::Thread { tid: owner, comm, traced: true, kthread: false };
        }
        if self.waker_ctx == 2 && self.wake_flags & wake_flags::HELD != 0 {
            // Its timeout ended it while a thread not seen taking the lock held it.
            return Next::Unknown;
        }
        match self.waker_ctx {
            1 => Next::Thread {
                tid: self.waker_tid,
                comm: words(self.waker_comm),
                traced: self.wake_flags & wake_flags::TRACED != 0,
                kthread: self.wake_flags & wake_flags::KTHREAD != 0,
            },
            2 => Next::Timer,
            3 if self.waker_tid == 3 => Next::Network,
            3 if self.wake_dev != 0 => Next::Device(self.wake_dev),
            3 => Next::Softirq,
            _ => Next::Unknown,
        }
    }
}

fn words(w: (u64, u64)) -> String {
    comm_from_words(w.0, w.1)
}

/// What ended a wait, for the walk.
enum Next {
    Thread { tid: u32, comm: String, traced: bool, kthread: bool },
    Device(u32),
    Timer,
    Network,
    Softirq,
    Unknown,
}

/// A thread's recorded calls that blocked, in the order they ended.
#[derive(Debug, Default)]
struct Thread {
    comm: Arc<str>,
    calls: VecDeque<Call>,
}

/// The recorded calls that blocked, by thread: what the walk follows. Feed it every event of the
/// recording (not only those a filter keeps: a chain goes through other threads' calls), in the
/// order they were recorded; memory is bounded (the calls of the last ten minutes, at most 4096
/// per thread).
#[derive(Debug, Default)]
pub struct ChainIndex {
    threads: HashMap<u32, Thread>,
    newest: u64,
    added: u64,
}

/// One link of a chain: a thread, and what it was blocked in during the window of the link
/// before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The thread.
    pub tid: u32,
    /// Its command name (empty when not known).
    pub comm: String,
    /// The call it was blocked in (the syscall's name); `None` for a kernel thread's wait.
    pub op: Option<String>,
    /// The part it was blocked in (an index in `WHY_PART_NAMES`).
    pub part: usize,
    /// The window of the link, CLOCK_MONOTONIC ns: the part of its wait inside the window of
    /// the link before it.
    pub from: u64,
    /// Its end.
    pub to: u64,
    /// Time of the link (ns): for the call's own link its longest wait; for the threads after
    /// it, their time in `part` inside the window of the link before (all their recorded calls',
    /// in proportion to their overlap, at least the longest wait's).
    pub ns: u64,
    /// For the threads after the first: how the thread spent the window of the link before it,
    /// by part (its recorded calls' parts, in proportion to their overlap), the last entry
    /// ([`RUNNING`]) its time outside recorded calls (running in user space).
    pub parts: Option<[u64; WHY_PARTS + 1]>,
}

/// Where a chain ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Root {
    /// A thread of the recording that was not blocked: it ran (or waited for a CPU) while the
    /// thread before it waited.
    Running {
        /// The thread.
        tid: u32,
        /// Its command name.
        comm: String,
    },
    /// A block device: the request whose completion ended the wait (`major << 20 | minor`).
    Device(u32),
    /// A timer (a sleep, a timeout).
    Timer,
    /// Outside work: a thread outside the recording (`tid`, its name), or packets from the
    /// network (tid 0).
    Outside {
        /// The thread (0: the network).
        tid: u32,
        /// Its command name.
        comm: String,
    },
    /// A kernel thread, and the part it was in (from the one level the recording keeps).
    Kernel {
        /// The thread.
        tid: u32,
        /// Its command name.
        comm: String,
    },
    /// A wake-up the probes did not see, or a softirq other than the block and network ones.
    Unknown,
    /// The thread was met before in the chain.
    Cycle(u32),
    /// The depth limit ([`MAX_DEPTH`]).
    Depth,
}

impl Root {
    /// Short kind name (JSON, Parquet): `running`, `device`, `timer`, `outside`, `kernel`,
    /// `unknown`, `cycle`, `depth`.
    pub fn kind(&self) -> &'static str {
        match self {
            Root::Running { .. } => "running",
            Root::Device(_) => "device",
            Root::Timer => "timer",
            Root::Outside { .. } => "outside",
            Root::Kernel { .. } => "kernel",
            Root::Unknown => "unknown",
            Root::Cycle(_) => "cycle",
            Root::Depth => "depth",
        }
    }

    /// What a person reads, with `disk` naming a device: `loop0's device time`, `a timer`,
    /// `app/12 running`, `outside work (curl/77)`, ...
    pub fn label(&self, disk: impl Fn(u32) -> String) -> String {
        match self {
            Root::Running { tid, comm } => format!("{} running", thread(comm, *tid)),
            Root::Device(d) => format!("{}'s device time", disk(*d)),
            Root::Timer => "a timer".into(),
            Root::Outside { tid: 0, .. } => "outside work (the network)".into(),
            Root::Outside { tid, comm } => format!("outside work ({})", thread(comm, *tid)),
            Root::Kernel { tid, comm } => format!("kernel thread {}", thread(comm, *tid)),
            Root::Unknown => "an unseen wake-up".into(),
            Root::Cycle(t) => format!("a cycle (thread {t} again)"),
            Root::Depth => format!("the depth limit ({MAX_DEPTH} links)"),
        }
    }
}

/// `comm/tid`, or `thread tid` without a name.
pub fn thread(comm: &str, tid: u32) -> String {
    if comm.is_empty() {
        format!("thread {tid}")
    } else {
        format!("{comm}/{tid}")
    }
}

/// A call's chain of waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The call's own thread first, then each thread it waited on, down to the root.
    pub links: Vec<Link>,
    /// Where it ends.
    pub root: Root,
    /// The time (ns) of the call's longest wait that ends at the root: the last link's (for a
    /// running root, the time that thread was not blocked in it).
    pub root_ns: u64,
}

impl Chain {
    /// The call's longest wait (the first link's time), ns.
    pub fn wait_ns(&self) -> u64 {
        self.links.first().map_or(0, |l| l.ns)
    }

    /// As text: `lock 200ms on app/13 (futex: lock 190ms) on app/14 (fsync: block I/O 185ms)
    /// -> loop0's device time 185ms`; `labels` names the parts, `disk` the devices, `ns` formats
    /// a time.
    pub fn text(&self, labels: &[&str], disk: impl Fn(u32) -> String, ns: impl Fn(u64) -> String) -> String {
        let mut s = String::new();
        for (k, l) in self.links.iter().enumerate() {
            let what = labels.get(l.part).copied().unwrap_or("?");
            if k == 0 {
                s.push_str(&format!("{what} {}", ns(l.ns)));
                continue;
            }
            let op = l.op.as_deref().map_or(String::new(), |o| format!("{o}: "));
            s.push_str(&format!(" on {} ({op}{what} {})", thread(&l.comm, l.tid), ns(l.ns)));
        }
        s.push_str(&format!(" -> {} {}", self.root.label(disk), ns(self.root_ns)));
        s
    }

    /// As JSON: `{"links": [{"tid", "comm", "op", "cause", "ns", "parts_ns"}], "root": {"kind",
    /// "tid", "comm", "dev", "label", "ns"}}`; `disk` names a device for the label.
    pub fn to_json(&self, disk: impl Fn(u32) -> String) -> Value {
        let links: Vec<Value> = self
            .links
            .iter()
            .map(|l| {
                let parts = l.parts.map(|p| {
                    let mut m: serde_json::Map<String, Value> =
                        WHY_PART_NAMES.iter().zip(p).filter(|(_, v)| *v > 0).map(|(k, v)| ((*k).into(), json!(v))).collect();
                    if p[RUNNING] > 0 {
                        m.insert("running".into(), json!(p[RUNNING]));
                    }
                    Value::Object(m)
                });
                json!({"tid": l.tid, "comm": l.comm, "op": l.op, "cause": WHY_PART_NAMES.get(l.part).copied().unwrap_or("?"),
                       "ns": l.ns, "parts_ns": parts})
            })
            .collect();
        let (tid, comm, dev) = match &self.root {
            Root::Running { tid, comm } | Root::Outside { tid, comm } | Root::Kernel { tid, comm } => {
                (Some(*tid), Some(comm.clone()), None)
            }
            Root::Cycle(t) => (Some(*t), None, None),
            Root::Device(d) => (None, None, Some(*d)),
            _ => (None, None, None),
        };
        json!({"links": links, "root": {"kind": self.root.kind(), "tid": tid, "comm": comm,
            "dev": dev.map(|d| format!("{}:{}", d >> 20, d & 0xfffff)), "label": self.root.label(&disk), "ns": self.root_ns}})
    }
}

impl ChainIndex {
    /// An empty index.
    pub fn new() -> Self {
        ChainIndex::default()
    }

    /// Index every syscall of `b` that blocked (its longest blocked interval recorded).
    pub fn add(&mut self, b: &EventBatch) {
        for i in 0..b.len() {
            self.add_row(b, i);
        }
    }

    /// Index event `i` of `b` if it is a syscall that blocked.
    pub fn add_row(&mut self, b: &EventBatch, i: usize) {
        if b.kind[i] != EventKind::Syscall as u8 || b.wait_end[i] <= b.wait_start[i] || b.wait_start[i] == 0 {
            return;
        }
        let c = Call::of(b, i);
        self.newest = self.newest.max(c.end);
        let t = self.threads.entry(b.tid[i]).or_default();
        let comm = b.comm.get(i);
        if *t.comm != *comm {
            t.comm = Arc::from(comm);
        }
        // A thread's calls do not overlap: they arrive in the order they ended, but for a
        // recording's reordering across CPUs.
        let at = t.calls.iter().rposition(|x| x.end <= c.end).map_or(0, |p| p + 1);
        t.calls.insert(at, c);
        if t.calls.len() > MAX_CALLS_PER_THREAD {
            t.calls.pop_front();
        }
        self.added += 1;
        if self.added.is_multiple_of(65_536) {
            self.forget();
        }
    }

    /// Forget the calls that ended more than the horizon before the newest.
    fn forget(&mut self) {
        let before = self.newest.saturating_sub(HORIZON_NS);
        self.threads.retain(|_, t| {
            while t.calls.front().is_some_and(|c| c.end < before) {
                t.calls.pop_front();
            }
            !t.calls.is_empty()
        });
    }

    /// Thread `tid`'s calls overlapping `[from, to]`: the one whose longest wait overlaps it the
    /// most (with that overlap), and how the thread spent the window by part (its calls' parts
    /// in proportion to their overlap; the rest, outside calls, as [`RUNNING`]).
    fn overlap(&self, tid: u32, from: u64, to: u64) -> (Option<(&Call, u64)>, [u64; WHY_PARTS + 1]) {
        let mut parts = [0u64; WHY_PARTS + 1];
        let span = to.saturating_sub(from);
        let Some(t) = self.threads.get(&tid) else {
            parts[RUNNING] = span;
            return (None, parts);
        };
        let first = t.calls.partition_point(|c| c.end <= from);
        let mut best: Option<(&Call, u64)> = None;
        let mut inside = 0u64;
        for c in t.calls.iter().skip(first).take_while(|c| c.ts < to) {
            let o = c.end.min(to).saturating_sub(c.ts.max(from));
            let lat = c.end.saturating_sub(c.ts).max(1);
            inside += o;
            for (k, p) in parts.iter_mut().take(WHY_PARTS).enumerate() {
                *p += (u128::from(c.parts[k]) * u128::from(o) / u128::from(lat)) as u64;
            }
            let w = c.wait_end.min(to).saturating_sub(c.wait_start.max(from));
            if w > 0 && best.is_none_or(|(_, bw)| w > bw) {
                best = Some((c, w));
            }
        }
        parts[RUNNING] = span.saturating_sub(inside);
        (best, parts)
    }

    /// The chain of event `i` of `b` (a syscall that blocked and says who ended its longest
    /// wait), through the calls indexed; `None` for a call that never blocked or was recorded
    /// without the blocked interval.
    pub fn chain(&self, b: &EventBatch, i: usize) -> Option<Chain> {
        if b.kind[i] != EventKind::Syscall as u8 || b.wait_start[i] == 0 || b.wait_end[i] <= b.wait_start[i] {
            return None;
        }
        let first = Call::of(b, i);
        let (mut from, mut to) = (first.wait_start, first.wait_end);
        let mut links = vec![Link {
            tid: b.tid[i],
            comm: b.comm.get(i).to_string(),
            op: Some(op_name(b.kind[i], b.nr[i])),
            part: first.part(),
            from,
            to,
            ns: to - from,
            parts: None,
        }];
        let mut cur = first;
        let root = loop {
            if links.len() >= MAX_DEPTH {
                break Root::Depth;
            }
            match cur.waited_on() {
                Next::Device(d) => break Root::Device(d),
                Next::Timer => break Root::Timer,
                Next::Network => break Root::Outside { tid: 0, comm: String::new() },
                Next::Softirq | Next::Unknown => break Root::Unknown,
                Next::Thread { tid, comm, traced: false, kthread: false } => break Root::Outside { tid, comm },
                Next::Thread { tid, comm, kthread: true, .. } => {
                    // A kernel thread makes no calls: the recording's one level tells what it
                    // was in (its I/O waits, with their device).
                    let ns = cur.waker_wait_ns.min(to - from);
                    if ns == 0 {
                        break Root::Kernel { tid, comm };
                    }
                    let part = cur.waker_wait_part as usize;
                    links.push(Link { tid, comm: comm.clone(), op: None, part, from, to, ns, parts: None });
                    break if part == 2 && cur.waker_wait_dev != 0 {
                        Root::Device(cur.waker_wait_dev)
                    } else {
                        Root::Kernel { tid, comm }
                    };
                }
                Next::Thread { tid, comm, .. } => {
                    if links.iter().any(|l| l.tid == tid) {
                        break Root::Cycle(tid);
                    }
                    let comm = self.threads.get(&tid).map_or(comm.clone(), |t| {
                        if comm.is_empty() {
                            t.comm.to_string()
                        } else {
                            comm.clone()
                        }
                    });
                    let (best, parts) = self.overlap(tid, from, to);
                    let span = to - from;
                    let blocked: u64 = parts[2..WHY_PARTS].iter().sum();
                    match best {
                        // Blocked for at least half the window: follow its longest wait.
                        Some((c, w)) if blocked * 2 >= span => {
                            let (f, t) = (from.max(c.wait_start), to.min(c.wait_end));
                            // The link's time: all of the thread's time in that part inside the
                            // window (a call may wait more than once: an fsync's writeback and
                            // its flush), at least its longest wait's.
                            let part = c.part();
                            links.push(Link {
                                tid,
                                comm,
                                op: Some(op_name(EventKind::Syscall as u8, c.nr)),
                                part,
                                from: f,
                                to: t,
                                ns: parts[part].max(w).min(span),
                                parts: Some(parts),
                            });
                            (from, to) = (f, t);
                            cur = c.clone();
                        }
                        _ => {
                            links.push(Link {
                                tid,
                                comm: comm.clone(),
                                op: None,
                                part: 0,
                                from,
                                to,
                                ns: span,
                                parts: Some(parts),
                            });
                            break Root::Running { tid, comm };
                        }
                    }
                }
            }
        };
        let last = links.last().expect("the call's own link");
        let root_ns = match (&root, &last.parts) {
            (Root::Running { .. }, Some(p)) => last.ns.saturating_sub(p[2..WHY_PARTS].iter().sum()),
            _ => last.ns,
        };
        Some(Chain { links, root, root_ns })
    }
}

/// The roots of many calls' chains: how much of their waits ends where (`why`'s summary, "62 %
/// of the waits end at loop0's device time").
#[derive(Debug, Clone, Default)]
pub struct RootAgg {
    /// Chains counted.
    pub chains: u64,
    /// Their calls' longest waits (the first links), ns.
    pub wait_ns: u64,
    /// By root: (chains, ns ending there).
    pub by_root: HashMap<RootKey, (u64, u64)>,
}

/// A root as [`RootAgg`] groups it (kind and who).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RootKey(pub String, pub u32, pub String);

impl RootKey {
    fn of(r: &Root) -> RootKey {
        match r {
            Root::Running { tid, comm } | Root::Outside { tid, comm } | Root::Kernel { tid, comm } => {
                RootKey(r.kind().into(), *tid, comm.clone())
            }
            Root::Device(d) => RootKey(r.kind().into(), *d, String::new()),
            Root::Cycle(t) => RootKey(r.kind().into(), *t, String::new()),
            _ => RootKey(r.kind().into(), 0, String::new()),
        }
    }

    /// The root it stands for.
    pub fn root(&self) -> Root {
        let (k, id, comm) = (self.0.as_str(), self.1, self.2.clone());
        match k {
            "running" => Root::Running { tid: id, comm },
            "device" => Root::Device(id),
            "timer" => Root::Timer,
            "outside" => Root::Outside { tid: id, comm },
            "kernel" => Root::Kernel { tid: id, comm },
            "cycle" => Root::Cycle(id),
            "depth" => Root::Depth,
            _ => Root::Unknown,
        }
    }
}

impl RootAgg {
    /// Count a chain.
    pub fn add(&mut self, c: &Chain) {
        self.chains += 1;
        self.wait_ns += c.wait_ns();
        let e = self.by_root.entry(RootKey::of(&c.root)).or_default();
        e.0 += 1;
        e.1 += c.root_ns;
    }

    /// Roots by time, largest first: (root, chains, ns).
    pub fn ranked(&self) -> Vec<(Root, u64, u64)> {
        let mut v: Vec<(RootKey, (u64, u64))> = self.by_root.iter().map(|(k, v)| (k.clone(), *v)).collect();
        v.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
        v.into_iter().map(|(k, (n, t))| (k.root(), n, t)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{comm_to_words, syscall_nr, Event};

    const MS: u64 = 1_000_000;

    /// A call of `tid` from `ts` to `end` blocked in `part` from `ws` to `we`, woken by thread
    /// `waker` (traced), or by a block completion of `dev` when `waker` is 0.
    #[allow(clippy::too_many_arguments)]
    fn call(
        tid: u32,
        comm: &str,
        nr: &str,
        ts: u64,
        end: u64,
        part: usize,
        ws: u64,
        we: u64,
        waker: u32,
        dev: u32,
    ) -> Event {
        let mut e = Event {
            tid,
            pid: 1,
            comm: comm.into(),
            nr: syscall_nr(nr).unwrap(),
            ts,
            lat: end - ts,
            wait_start: ws,
            wait_end: we,
            wake_flags: wake_flags::KNOWN,
            ..Default::default()
        };
        e.why_cpu = (end - ts) - (we - ws);
        match part {
            2 => e.why_io = we - ws,
            3 => e.why_lock = we - ws,
            _ => e.why_other = we - ws,
        }
        if waker != 0 {
            // The threads of the tests are named a, b, c, ... by their ids 1, 2, 3, ...
            let (lo, hi) = comm_to_words(&((b'a' + (waker - 1) as u8) as char).to_string());
            (e.waker_ctx, e.waker_tid, e.waker_comm_lo, e.waker_comm_hi) = (1, waker, lo, hi);
            e.wake_flags |= wake_flags::TRACED;
        } else {
            (e.waker_ctx, e.waker_tid, e.wake_dev) = (3, 4, dev);
        }
        e
    }

    /// A waits for a lock B holds while B waits for a lock C holds across an fsync whose block
    /// I/O a device's completion ends: A -> B -> C -> the device, each link inside the one
    /// before; a thread running meanwhile ends a chain as running; a thread met twice, as a cycle.
    #[test]
    fn a_chain_follows_the_wakers_to_the_device() {
        let mut b = EventBatch::default();
        // C: fsync 10..200 ms, blocked 20..195 in block I/O on 7:0.
        b.push(&call(3, "c", "fsync", 10 * MS, 200 * MS, 2, 20 * MS, 195 * MS, 0, 7 << 20));
        // B: futex 5..201, blocked 6..200, woken by C.
        b.push(&call(2, "b", "futex", 5 * MS, 201 * MS, 3, 6 * MS, 200 * MS, 3, 0));
        // A: futex 1..202, blocked 2..201, woken by B.
        b.push(&call(1, "a", "futex", MS, 202 * MS, 3, 2 * MS, 201 * MS, 2, 0));
        // D: waits 2..50 for E, which makes no call meanwhile (it runs).
        b.push(&call(4, "d", "read", MS, 51 * MS, 4, 2 * MS, 50 * MS, 5, 0));
        let mut idx = ChainIndex::new();
        idx.add(&b);
        let c = idx.chain(&b, 2).unwrap();
        let who: Vec<(u32, u64)> = c.links.iter().map(|l| (l.tid, l.ns)).collect();
        assert_eq!(who, [(1, 199 * MS), (2, 194 * MS), (3, 175 * MS)]);
        assert_eq!(c.root, Root::Device(7 << 20));
        assert_eq!(c.root_ns, 175 * MS);
        let text = c.text(
            &["cpu", "runq", "I/O", "lock", "ipc", "timer", "fault", "other", "?"],
            |d| format!("dev{d}"),
            |n| format!("{}ms", n / MS),
        );
        assert_eq!(
            text,
            "lock 199ms on b/2 (futex: lock 194ms) on c/3 (fsync: I/O 175ms) -> dev7340032's device time 175ms"
        );
        let j = c.to_json(|_| "loop0".into());
        assert_eq!(j["root"]["dev"], "7:0");
        assert_eq!(j["root"]["label"], "loop0's device time");
        assert_eq!(j["links"][2]["op"], "fsync");
        // E ran: the chain ends there, with all of D's wait.
        let d = idx.chain(&b, 3).unwrap();
        assert_eq!(d.root, Root::Running { tid: 5, comm: "e".into() });
        assert_eq!((d.root_ns, d.links[1].parts.unwrap()[RUNNING]), (48 * MS, 48 * MS));
        // A cycle: F waits for G, which waits for F.
        let mut b2 = EventBatch::default();
        b2.push(&call(7, "g", "futex", MS, 100 * MS, 3, 2 * MS, 99 * MS, 6, 0));
        b2.push(&call(6, "f", "futex", MS, 100 * MS, 3, 3 * MS, 98 * MS, 7, 0));
        idx.add(&b2);
        assert_eq!(idx.chain(&b2, 1).unwrap().root, Root::Cycle(6));
        let mut agg = RootAgg::default();
        agg.add(&c);
        agg.add(&d);
        assert_eq!(agg.ranked()[0], (Root::Device(7 << 20), 1, 175 * MS));
        assert_eq!(agg.wait_ns, 199 * MS + 48 * MS);
    }

    /// A futex wait its timeout ended while the lock was held by a thread the recording did not
    /// see take it: the chain stops at an unseen wake-up, not at a timer; with the holder known,
    /// it goes on to the holder.
    #[test]
    fn a_held_timeout_goes_to_its_holder_or_stops_unseen() {
        let mut b = EventBatch::default();
        let mut e = call(1, "a", "futex", MS, 6 * MS, 3, MS, 6 * MS, 0, 0);
        (e.waker_ctx, e.wake_flags) = (2, wake_flags::KNOWN | wake_flags::HELD);
        b.push(&e);
        b.push(&Event { lock_owner: 2, ..e.clone() });
        let mut idx = ChainIndex::new();
        idx.add(&b);
        assert_eq!(idx.chain(&b, 0).unwrap().root, Root::Unknown);
        let named = idx.chain(&b, 1).unwrap();
        assert_eq!(named.links.iter().map(|l| l.tid).collect::<Vec<_>>(), [1, 2]);
        assert!(matches!(named.root, Root::Running { tid: 2, .. }), "{:?}", named.root);
    }
}

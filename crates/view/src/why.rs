//! Attribution views ("why was it slow"): one call's latency split into causes, and the split
//! summed over many calls, by cause, by waker and by operation (docs/WHY.md).
//!
//! The parts come from the `why_*` columns `record --why` fills; a call without them (recorded
//! without `--why`, or faster than `--why-above`) has none and is counted apart.

use crate::text::clean;
use crate::waits::wait_kind;
use latscope_chain::{ChainIndex, RootAgg};
use latscope_event::units::fmt_ns;
use latscope_event::{comm_from_words, op_name, EventBatch, EventKind, TraceHeader, WHY_PARTS, WHY_PART_NAMES};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fmt::Write;

/// What a person reads for each part.
pub const PART_LABELS: [&str; WHY_PARTS] =
    ["on CPU", "run queue", "block I/O", "lock", "pipe/socket", "timer/sleep", "page fault", "other wait", "unknown"];

/// Names of the softirqs (the kernel's order, stable since 2.6).
const SOFTIRQS: [&str; 10] =
    ["hi", "timer", "net_tx", "net_rx", "block", "irq_poll", "tasklet", "sched", "hrtimer", "rcu"];

/// Who woke a call from its longest blocked interval: `comm/tid`, `[timer]`, `[softirq:net_rx]`,
/// or `None` when nothing did (it never blocked).
pub fn waker(b: &EventBatch, i: usize) -> Option<String> {
    match b.waker_ctx[i] {
        1 => Some(format!("{}/{}", comm_from_words(b.waker_comm_lo[i], b.waker_comm_hi[i]), b.waker_tid[i])),
        2 => Some("[timer]".into()),
        3 => Some(format!("[softirq:{}]", SOFTIRQS.get(b.waker_tid[i] as usize).copied().unwrap_or("?"))),
        _ => None,
    }
}

/// The holder of a lock whose wait its timeout ended while a thread the recording did not see
/// take it held it (it took it without a system call: CPython's GIL found free, a mutex's fast
/// path).
pub const UNSEEN_HOLDER: &str = "(a thread that took it without a system call)";

/// Whether call `i` is a futex wait its timeout ended while the futex was held by a thread not
/// seen taking it (`lock_owner` 0).
pub fn held_unseen(b: &EventBatch, i: usize) -> bool {
    latscope_event::wake_flags::held_unseen(b.waker_ctx[i], b.wake_flags[i], b.lock_owner[i])
}

/// The thread call `i` waited on, where known: the holder of the lock it waited for
/// (`lock_owner`: a PI or robust futex's owner, or the thread that held a futex whose wait its
/// timeout ended), else whoever ended its longest wait ([`waker`]).
pub fn waited_on(b: &EventBatch, i: usize) -> Option<String> {
    let owner = b.lock_owner[i];
    if held_unseen(b, i) {
        return Some(UNSEEN_HOLDER.into());
    }
    if owner == 0 || (b.waker_ctx[i] == 1 && b.waker_tid[i] == owner) {
        return waker(b, i);
    }
    // A timer's wake-up has no name of its own: the recording keeps the holder's there.
    let comm =
        if b.waker_ctx[i] == 1 { String::new() } else { comm_from_words(b.waker_comm_lo[i], b.waker_comm_hi[i]) };
    Some(if comm.is_empty() { format!("thread {owner}") } else { format!("{comm}/{owner}") })
}

/// What the waking thread of call `i` was itself blocked in during the call's longest wait (one
/// level of cascade): (part index, ns), or `None` when nothing was seen.
pub fn waker_wait(b: &EventBatch, i: usize) -> Option<(usize, u64)> {
    let p = b.waker_wait_part[i] as usize;
    (b.waker_ctx[i] == 1 && b.waker_wait_ns[i] > 0 && p < WHY_PARTS).then_some((p, b.waker_wait_ns[i]))
}

/// `, which was in block I/O 190ms`: the cascade as text, or nothing.
fn waker_wait_text(w: Option<(usize, u64)>) -> String {
    w.map_or(String::new(), |(p, t)| format!(", which was in {} {}", PART_LABELS[p], fmt_ns(t)))
}

/// The breakdown of call `i` as JSON: `parts_ns` (every part, zeros included; they add up to the
/// latency), and the waker, the preempter, the waking block request and the times of the
/// requests that ended its I/O waits where known. `None` when the call carries no breakdown.
pub fn json(h: &TraceHeader, b: &EventBatch, i: usize) -> Option<Value> {
    if b.kind[i] != EventKind::Syscall as u8 || !b.has_why(i) {
        return None;
    }
    let mut parts = Map::new();
    for (name, v) in WHY_PART_NAMES.iter().zip(b.why_parts(i)) {
        parts.insert((*name).into(), json!(v));
    }
    let mut m = Map::new();
    m.insert("parts_ns".into(), Value::Object(parts));
    m.insert("wait".into(), json!(wait_kind(b, i).name()));
    if b.lock_owner[i] != 0 {
        m.insert("held_by".into(), json!({"tid": b.lock_owner[i], "name": waited_on(b, i)}));
    }
    if let Some(l) = crate::locks::lock_json(b, i) {
        m.insert("lock".into(), l);
    }
    if b.waker_ctx[i] != 0 {
        let kind = ["none", "thread", "timer", "softirq"][b.waker_ctx[i].min(3) as usize];
        m.insert(
            "waker".into(),
            json!({
                "kind": kind,
                "tid": if b.waker_ctx[i] == 1 { json!(b.waker_tid[i]) } else { Value::Null },
                "name": waker(b, i),
                "was_in": waker_wait(b, i).map(|(p, t)| json!({ "cause": WHY_PART_NAMES[p], "ns": t })),
            }),
        );
    }
    if b.runq_tid[i] != 0 {
        m.insert("cpu_held_by".into(), json!({ "tid": b.runq_tid[i], "cpu": b.runq_cpu[i] }));
    }
    if b.wake_dev[i] != 0 {
        m.insert(
            "woken_by_request".into(),
            json!({ "disk": crate::events::disk_label(h, b.wake_dev[i]), "sector": b.wake_sector[i] }),
        );
    }
    if b.wake_device_ns[i] != 0 {
        // Summed over the call's I/O waits that a request's completion ended.
        m.insert(
            "io_requests".into(),
            json!({ "held_ns": b.wake_held_ns[i], "queue_ns": b.wake_queue_ns[i], "device_ns": b.wake_device_ns[i] }),
        );
    }
    let off = b.off_cpu(i);
    if off.len > 0 {
        let kept: Vec<Value> = off
            .intervals()
            .iter()
            .map(|&(from, to, p)| json!({ "cause": WHY_PART_NAMES[usize::from(p)], "start_ns": from, "ns": to - from }))
            .collect();
        m.insert("off_cpu".into(), json!({ "count": off.count, "kept": kept }));
    }
    if b.fault_addr[i] != 0 {
        let path = b.fault_path.get(i);
        m.insert(
            "page_fault".into(),
            json!({
                "path": (!path.is_empty()).then_some(path),
                "offset_bytes": (b.fault_off[i] >= 0).then_some(b.fault_off[i]),
                "address": format!("{:#x}", b.fault_addr[i]),
            }),
        );
    }
    Some(Value::Object(m))
}

/// `page fault in /data/f at offset 262144 bytes`: the file behind call `i`'s longest-waited
/// page fault (an unknown file when the recording could not name it), or `None` without one.
pub fn fault_text(b: &EventBatch, i: usize) -> Option<String> {
    if b.fault_addr[i] == 0 {
        return None;
    }
    let path = b.fault_path.get(i);
    let mut s =
        if path.is_empty() { "page fault in an unknown file".to_string() } else { format!("page fault in {path}") };
    if b.fault_off[i] >= 0 {
        let _ = write!(s, " at offset {} bytes", b.fault_off[i]);
    }
    Some(s)
}

/// The breakdown of call `i` as one indented text line (`None` without one):
/// `    why: block I/O 9.8ms (98%), on CPU 120us (1%), ... woken by kworker/u4:1/77`.
pub fn line(h: &TraceHeader, b: &EventBatch, i: usize) -> Option<String> {
    if b.kind[i] != EventKind::Syscall as u8 || !b.has_why(i) {
        return None;
    }
    let lat = b.lat[i].max(1) as f64;
    let mut parts: Vec<(usize, u64)> = b.why_parts(i).into_iter().enumerate().filter(|&(_, v)| v > 0).collect();
    parts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut s = String::from("    why:");
    for (k, (p, v)) in parts.iter().enumerate() {
        let sep = if k == 0 { " " } else { ", " };
        let _ = write!(s, "{sep}{} {} ({:.0}%)", PART_LABELS[*p], fmt_ns(*v), *v as f64 * 100.0 / lat);
    }
    if let Some(w) = waker(b, i) {
        let _ = write!(s, "; woken by {w}{}", waker_wait_text(waker_wait(b, i)));
    }
    if let Some(l) = crate::locks::lock_text(b, i).filter(|_| b.why_lock[i] > 0) {
        let _ = write!(s, "; lock {l}");
    }
    if b.lock_owner[i] != 0 || held_unseen(b, i) {
        let holder = waited_on(b, i);
        if holder != waker(b, i) {
            let _ = write!(s, "; held by {}", holder.unwrap_or_default());
        }
    }
    let k = wait_kind(b, i);
    if k.is_idle() {
        let _ = write!(s, "; {}", k.label());
    }
    if b.runq_tid[i] != 0 {
        let _ = write!(s, "; CPU held by tid {} on cpu {}", b.runq_tid[i], b.runq_cpu[i]);
    }
    if b.wake_dev[i] != 0 {
        let _ = write!(s, "; I/O {} sector {}", crate::events::disk_label(h, b.wake_dev[i]), b.wake_sector[i]);
    }
    if b.wake_device_ns[i] != 0 {
        let _ = write!(s, "; {}", request_times(b.wake_held_ns[i], b.wake_queue_ns[i], b.wake_device_ns[i]));
    }
    if let Some(f) = fault_text(b, i) {
        let _ = write!(s, "; {f}");
    }
    Some(crate::text::clean(&s).into_owned())
}

/// `    in order: on CPU 12us, pipe/socket 20ms, run queue 40us, on CPU 8us, ...`: call `i`'s
/// time in the order it was spent, where the recording keeps its intervals off the CPU and
/// there are two or more (one wait reads from the breakdown alone). Time holding intervals the
/// recording did not keep reads `on CPU and shorter waits`.
pub fn order_line(b: &EventBatch, i: usize) -> Option<String> {
    let off = b.off_cpu(i);
    if off.len < 2 {
        return None;
    }
    let after = off.unkept_from();
    let mut s = String::from("    in order:");
    let mut at = b.ts[i];
    let mut sep = " ";
    let gap = |s: &mut String, from: u64, to: u64, sep: &mut &str| {
        if to > from {
            let what = if from >= after { "on CPU and shorter waits" } else { PART_LABELS[0] };
            let _ = write!(s, "{sep}{what} {}", fmt_ns(to - from));
            *sep = ", ";
        }
    };
    for &(from, to, p) in off.intervals() {
        gap(&mut s, at, from, &mut sep);
        let _ = write!(s, "{sep}{} {}", PART_LABELS[usize::from(p)], fmt_ns(to - from));
        sep = ", ";
        at = to;
    }
    gap(&mut s, at, b.end(i), &mut sep);
    Some(s)
}

/// `    chain: lock 200ms on app/13 (futex: lock 190ms) on app/14 (fsync: block I/O 185ms) ->
/// loop0(7:0)'s device time 185ms`: call `i`'s chain of waits as an indented line, when it goes
/// through another thread or ends at a device (`None` for a wait its own timer ended, one no
/// wake-up was seen for, a call that never blocked).
pub fn chain_line(h: &TraceHeader, chains: &ChainIndex, b: &EventBatch, i: usize) -> Option<String> {
    let c = chains.chain(b, i).filter(|c| c.links.len() > 1 || matches!(c.root, latscope_chain::Root::Device(_)))?;
    let text = c.text(&PART_LABELS, |d| crate::events::disk_label(h, d), fmt_ns);
    Some(crate::text::clean(&format!("    chain: {text}")).into_owned())
}

/// Call `i`'s chain of waits as JSON ([`Chain::to_json`], devices named as the trace's disks).
pub fn chain_json(h: &TraceHeader, chains: &ChainIndex, b: &EventBatch, i: usize) -> Option<Value> {
    Some(chains.chain(b, i)?.to_json(|d| crate::events::disk_label(h, d)))
}

/// `requests that ended the I/O waits: held 750ms before them, queued 10us, device 50us`: the
/// times of the requests whose completions ended I/O waits, summed (nothing for a trace
/// recorded before they were).
fn request_times(held: u64, queue: u64, device: u64) -> String {
    if device == 0 {
        return String::new();
    }
    format!(
        "requests that ended the I/O waits: held {} before them, queued {}, device {}",
        fmt_ns(held),
        fmt_ns(queue),
        fmt_ns(device)
    )
}

/// Time of many calls by cause, by waker and by operation (the breakdown view, `top --by
/// cause`, the `why` command).
#[derive(Debug, Clone, Default)]
pub struct WhyAgg {
    /// Calls with a breakdown.
    pub calls: u64,
    /// Their total latency (ns).
    pub total_ns: u64,
    /// Calls of the kinds that could carry one but did not (recorded without `--why`, or
    /// faster than `--why-above`).
    pub without: u64,
    /// Summed parts (ns), in the order of [`WHY_PART_NAMES`].
    pub parts: [u64; WHY_PARTS],
    /// Blocked time (ns) by waker (`comm/tid`, `[timer]`, ...) and the part it ended.
    pub by_waker: HashMap<(String, usize), u64>,
    /// What each waking thread was itself blocked in meanwhile (one level of cascade): ns by
    /// part, summed over the waits it ended.
    pub waker_waits: HashMap<String, [u64; WHY_PARTS]>,
    /// Per operation (syscall name): calls, total latency and parts.
    pub by_op: HashMap<String, OpWhy>,
    /// Count idle waits (ended by their own timeout or by outside work; without a breakdown,
    /// poll, epoll_wait, futex, nanosleep, wait4, ...: [`crate::waits`]) too; by default they
    /// are left out.
    pub with_waits: bool,
    /// Idle waits left out.
    pub waits_left_out: u64,
    /// The waits seen, by kind, and those left out ([`crate::waits::LeftOut`]).
    pub waits: crate::waits::LeftOut,
    /// Page-fault time (ns) by the file behind the faults ([`UNKNOWN_FILE`] when unnamed).
    pub fault_files: HashMap<String, u64>,
    /// Where the calls' chains of waits end (counted when added with chains).
    pub roots: RootAgg,
}

/// How the views list page-fault time whose file the recording could not name.
pub const UNKNOWN_FILE: &str = "(unknown file)";

/// The breakdown summed over the calls of one operation.
#[derive(Debug, Clone, Default)]
pub struct OpWhy {
    /// Calls.
    pub calls: u64,
    /// Total latency (ns).
    pub total_ns: u64,
    /// The slowest call (ns).
    pub max_ns: u64,
    /// Summed parts (ns).
    pub parts: [u64; WHY_PARTS],
    /// Time (ns) by the file or socket behind the call's fd (or its path).
    pub files: HashMap<String, u64>,
    /// Page-fault time (ns) by the file behind the faults ([`UNKNOWN_FILE`] when unnamed).
    pub fault_files: HashMap<String, u64>,
    /// Blocked time (ns) by waker.
    pub wakers: HashMap<String, u64>,
    /// I/O time (ns) by the device of the request that woke the call.
    pub disks: HashMap<u32, u64>,
    /// By the same device: the times of the requests that ended the calls' I/O waits, summed
    /// (ns): the waits before they existed, queued, on the device.
    pub disk_requests: HashMap<u32, [u64; 3]>,
}

impl WhyAgg {
    /// Add the rows `rows` of `b` (syscalls only; other kinds are ignored).
    pub fn add(&mut self, b: &EventBatch, rows: &[u32]) {
        self.add_with_chains(b, rows, None);
    }

    /// [`WhyAgg::add`], counting where each call's chain of waits ends (through the calls of
    /// `chains`, the recording's indexed).
    pub fn add_with_chains(&mut self, b: &EventBatch, rows: &[u32], chains: Option<&ChainIndex>) {
        for &r in rows {
            let i = r as usize;
            if b.kind[i] != EventKind::Syscall as u8 {
                continue;
            }
            if self.waits.classify(b, i, self.with_waits) {
                self.waits_left_out += 1;
                continue;
            }
            let p = b.why_parts(i);
            if p.iter().all(|&v| v == 0) {
                self.without += 1;
                continue;
            }
            self.calls += 1;
            self.total_ns += b.lat[i];
            if let Some(c) = chains.and_then(|x| x.chain(b, i)) {
                self.roots.add(&c);
            }
            let op = self.by_op.entry(op_name(b.kind[i], b.nr[i])).or_default();
            op.calls += 1;
            op.total_ns += b.lat[i];
            op.max_ns = op.max_ns.max(b.lat[i]);
            for (k, v) in p.iter().enumerate() {
                self.parts[k] += v;
                op.parts[k] += v;
            }
            let path = b.path.get(i);
            if !path.is_empty() {
                *op.files.entry(path.to_string()).or_default() += b.lat[i];
            }
            if p[6] > 0 && b.fault_addr[i] != 0 {
                let f = b.fault_path.get(i);
                let f = if f.is_empty() { UNKNOWN_FILE } else { f };
                *op.fault_files.entry(f.to_string()).or_default() += p[6];
                *self.fault_files.entry(f.to_string()).or_default() += p[6];
            }
            if b.wake_dev[i] != 0 {
                *op.disks.entry(b.wake_dev[i]).or_default() += p[2] + p[6];
                let r = op.disk_requests.entry(b.wake_dev[i]).or_default();
                r[0] += b.wake_held_ns[i];
                r[1] += b.wake_queue_ns[i];
                r[2] += b.wake_device_ns[i];
            }
            if let Some(w) = waited_on(b, i) {
                // The waker ended the call's longest blocked interval (or the lock's holder kept
                // it waiting): credit it with the blocked time of the dominant blocked part.
                let (k, v) = (2..WHY_PARTS - 1).map(|k| (k, p[k])).max_by_key(|&(_, v)| v).unwrap_or((0, 0));
                if v > 0 {
                    if let Some((wp, wt)) = waker_wait(b, i) {
                        self.waker_waits.entry(w.clone()).or_default()[wp] += wt;
                    }
                    *op.wakers.entry(w.clone()).or_default() += v;
                    *self.by_waker.entry((w, k)).or_default() += v;
                }
            }
        }
    }

    /// Parts with time, largest first: (part index, ns).
    pub fn ranked_parts(&self) -> Vec<(usize, u64)> {
        let mut v: Vec<(usize, u64)> = self.parts.iter().copied().enumerate().filter(|&(_, x)| x > 0).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// Wakers by the time they ended, largest first, at most `n`.
    pub fn ranked_wakers(&self, n: usize) -> Vec<(&str, usize, u64)> {
        let mut v: Vec<(&str, usize, u64)> = self.by_waker.iter().map(|((w, k), &t)| (w.as_str(), *k, t)).collect();
        v.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }

    /// What waker `w` was blocked in for the most while the calls it woke waited: (part, ns).
    pub fn waker_was_in(&self, w: &str) -> Option<(usize, u64)> {
        let p = self.waker_waits.get(w)?;
        let (k, &t) = p.iter().enumerate().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))?;
        (t > 0).then_some((k, t))
    }

    /// Operations by total time, largest first, at most `n`.
    pub fn ranked_ops(&self, n: usize) -> Vec<(&str, &OpWhy)> {
        let mut v: Vec<(&str, &OpWhy)> = self.by_op.iter().map(|(k, o)| (k.as_str(), o)).collect();
        v.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }

    /// The breakdown as text: time by cause (with a bar), by waker, by operation.
    pub fn render_text(&self, n: usize) -> String {
        let mut s = String::new();
        if self.calls == 0 {
            let _ = writeln!(
                s,
                "no call carries a breakdown ({} calls without one): record with `latscope record --why`",
                self.without
            );
            return s;
        }
        let total = self.total_ns.max(1) as f64;
        let _ = writeln!(s, "{} calls with a breakdown, {} in total", self.calls, fmt_ns(self.total_ns));
        if self.without > 0 {
            let _ =
                writeln!(s, "({} calls without one: faster than --why-above, or not recorded with it)", self.without);
        }
        let _ = writeln!(s, "\ntime by cause");
        for (k, v) in self.ranked_parts() {
            let pct = v as f64 * 100.0 / total;
            let bar = "#".repeat(((pct / 2.5).round() as usize).min(40));
            let _ = writeln!(s, "  {:<13} {:>9} {:>5.1}%  {bar}", PART_LABELS[k], fmt_ns(v), pct);
        }
        let wakers = self.ranked_wakers(n);
        if !wakers.is_empty() {
            let _ = writeln!(s, "\nblocked time by waker (the longest wait of each call)");
            for (w, k, t) in wakers {
                let was = waker_wait_text(self.waker_was_in(w));
                let _ = writeln!(s, "  {:<32} {:>9}  {}{was}", clean(w), fmt_ns(t), PART_LABELS[k]);
            }
        }
        let faults = largest(&self.fault_files, n);
        if !faults.is_empty() {
            let _ = writeln!(s, "\npage-fault time by file");
            for (f, t) in faults {
                let _ = writeln!(s, "  {:<32} {:>9}", clean(&f), fmt_ns(t));
            }
        }
        let _ = writeln!(s, "\nby operation (total time; its two largest causes)");
        for (op, o) in self.ranked_ops(n) {
            let _ = writeln!(
                s,
                "  {:<18} {:>7} calls {:>9} total {:>9} max  {}",
                op,
                o.calls,
                fmt_ns(o.total_ns),
                fmt_ns(o.max_ns),
                top_causes(&o.parts, o.total_ns, 2)
            );
        }
        clean_lines(&s)
    }

    /// The breakdown as JSON (all times in ns).
    pub fn to_json(&self, n: usize) -> Value {
        let parts: Map<String, Value> =
            WHY_PART_NAMES.iter().zip(self.parts).map(|(k, v)| ((*k).to_string(), json!(v))).collect();
        json!({
            "calls": self.calls,
            "calls_without_breakdown": self.without,
            "total_ns": self.total_ns,
            "parts_ns": parts,
            "wakers": self.ranked_wakers(n).into_iter().map(|(w, k, t)| json!({"waker": w, "cause": WHY_PART_NAMES[k], "blocked_ns": t,
                "was_in": self.waker_was_in(w).map(|(p, t)| json!({"cause": WHY_PART_NAMES[p], "ns": t}))})).collect::<Vec<_>>(),
            "idle_waits_left_out": self.waits_left_out,
            "waits": self.waits.to_json(),
            "chain_roots": self.roots_json(None, n),
            "page_fault_files": largest(&self.fault_files, n).into_iter().map(|(p, t)| json!({"path": p, "fault_ns": t})).collect::<Vec<_>>(),
            "operations": self.ranked_ops(n).into_iter().map(|(op, o)| json!({
                "op": op, "calls": o.calls, "total_ns": o.total_ns, "max_ns": o.max_ns,
                "files": largest(&o.files, 3).into_iter().map(|(p, t)| json!({"path": p, "total_ns": t})).collect::<Vec<_>>(),
                "page_fault_files": largest(&o.fault_files, 3).into_iter().map(|(p, t)| json!({"path": p, "fault_ns": t})).collect::<Vec<_>>(),
                "wakers": largest(&o.wakers, 3).into_iter().map(|(w, t)| json!({"waker": w, "blocked_ns": t,
                    "was_in": self.waker_was_in(&w).map(|(p, t)| json!({"cause": WHY_PART_NAMES[p], "ns": t}))})).collect::<Vec<_>>(),
                "disks": largest(&o.disks, 3).into_iter().map(|(d, t)| {
                    let r = o.disk_requests.get(&d).copied().unwrap_or_default();
                    json!({"dev": d, "io_ns": t, "requests": {"held_ns": r[0], "queue_ns": r[1], "device_ns": r[2]}})
                }).collect::<Vec<_>>(),
                "parts_ns": WHY_PART_NAMES.iter().zip(o.parts).map(|(k, v)| ((*k).to_string(), json!(v))).collect::<Map<String, Value>>(),
            })).collect::<Vec<_>>(),
        })
    }
}

/// Text with control characters escaped line by line ([`crate::text::clean`]). Names and paths
/// from the traced system are escaped where they are written, as a newline in one would have
/// split its line before this sees it; this catches what is left.
fn clean_lines(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for l in s.lines() {
        out.push_str(&crate::text::clean(l));
        out.push('\n');
    }
    out
}

/// The largest `n` entries of a map of times, largest first.
fn largest<K: Clone + Ord>(m: &HashMap<K, u64>, n: usize) -> Vec<(K, u64)> {
    let mut v: Vec<(K, u64)> = m.iter().map(|(k, &t)| (k.clone(), t)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

impl WhyAgg {
    /// What a person writes in an incident ticket, on one screen: the slowest operations by
    /// total time (idle waits left out unless [`WhyAgg::with_waits`]), each with its causes, the
    /// files, wakers and disks behind them, then the time by cause over everything.
    pub fn render_ticket(&self, h: &TraceHeader, n: usize, span_ns: u64) -> String {
        let mut s = String::new();
        if self.calls == 0 {
            let _ = writeln!(
                s,
                "no call carries a breakdown ({} without one{}): record with `latscope record --why`",
                self.without,
                if self.waits_left_out > 0 {
                    format!(", {} idle waits left out", self.waits_left_out)
                } else {
                    String::new()
                }
            );
            return s;
        }
        let _ = writeln!(s, "{} calls took {} over {}", self.calls, fmt_ns(self.total_ns), fmt_ns(span_ns));
        if let Some(n) = self.waits.note() {
            let _ = writeln!(s, "({n})");
        }
        let _ = writeln!(s, "\nslowest operations by total time:");
        for (k, (op, o)) in self.ranked_ops(n).into_iter().enumerate() {
            let _ = writeln!(
                s,
                "{}. {op}: {} calls, {} total, {} mean, {} max -- {}",
                k + 1,
                o.calls,
                fmt_ns(o.total_ns),
                fmt_ns(o.total_ns / o.calls.max(1)),
                fmt_ns(o.max_ns),
                top_causes(&o.parts, o.total_ns, 3)
            );
            let named =
                |v: Vec<(String, u64)>| v.into_iter().map(|(p, t)| format!("{} ({})", clean(&p), fmt_ns(t))).collect();
            list_line(&mut s, "files", named(largest(&o.files, 3)));
            list_line(&mut s, "page faults in", named(largest(&o.fault_files, 3)));
            let disks = largest(&o.disks, 3)
                .into_iter()
                .map(|(d, t)| {
                    let r = o.disk_requests.get(&d).copied().unwrap_or_default();
                    let times = if r[2] > 0 { format!("; {}", request_times(r[0], r[1], r[2])) } else { String::new() };
                    format!("{} ({}{times})", crate::events::disk_label(h, d), fmt_ns(t))
                })
                .collect();
            list_line(&mut s, "disks", disks);
            let wakers = largest(&o.wakers, 3)
                .into_iter()
                .map(|(w, t)| format!("{} ({}{})", clean(&w), fmt_ns(t), waker_wait_text(self.waker_was_in(&w))))
                .collect();
            list_line(&mut s, "woken by", wakers);
        }
        let _ = writeln!(s, "\ntime by cause: {}", top_causes(&self.parts, self.total_ns, WHY_PARTS));
        if let Some(r) = self.roots_text(h, 4) {
            let _ = writeln!(s, "{r}");
        }
        clean_lines(&s)
    }
}

impl WhyAgg {
    /// `where the waits end: 62% at loop0(7:0)'s device time (4 calls), 30% at app/12 running
    /// (2 calls)`: the chains' roots by their share of the calls' longest waits, the `n` largest.
    pub fn roots_text(&self, h: &TraceHeader, n: usize) -> Option<String> {
        if self.roots.chains == 0 || self.roots.wait_ns == 0 {
            return None;
        }
        let items: Vec<String> = self
            .roots
            .ranked()
            .into_iter()
            .take(n)
            .map(|(root, calls, ns)| {
                format!(
                    "{:.0}% at {} ({calls} call{})",
                    ns as f64 * 100.0 / self.roots.wait_ns as f64,
                    clean(&root.label(|d| crate::events::disk_label(h, d))),
                    if calls == 1 { "" } else { "s" }
                )
            })
            .collect();
        Some(format!("where the longest waits end (their chains of waits): {}", items.join(", ")))
    }

    /// The chains' roots as JSON: `[{"root", "kind", "calls", "ns", "share"}]`, the `n` largest;
    /// `h` names devices (without it, as `major:minor`).
    pub fn roots_json(&self, h: Option<&TraceHeader>, n: usize) -> Value {
        let disk = |d: u32| match h {
            Some(h) => crate::events::disk_label(h, d),
            None => format!("{}:{}", d >> 20, d & 0xfffff),
        };
        let total = self.roots.wait_ns.max(1) as f64;
        Value::Array(
            self.roots
                .ranked()
                .into_iter()
                .take(n)
                .map(|(root, calls, ns)| {
                    json!({"root": root.label(disk), "kind": root.kind(), "calls": calls, "ns": ns, "share": ns as f64 / total})
                })
                .collect(),
        )
    }
}

/// `   label: a, b, c` on a line of its own, when there are items.
fn list_line(s: &mut String, label: &str, items: Vec<String>) {
    if !items.is_empty() {
        let _ = writeln!(s, "   {label}: {}", items.join(", "));
    }
}

/// `block I/O 92%, on CPU 5%`: the `n` largest parts of `parts` as shares of `total`.
pub fn top_causes(parts: &[u64; WHY_PARTS], total: u64, n: usize) -> String {
    let mut v: Vec<(usize, u64)> = parts.iter().copied().enumerate().filter(|&(_, x)| x > 0).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.iter()
        .take(n)
        .map(|&(k, x)| format!("{} {:.0}%", PART_LABELS[k], x as f64 * 100.0 / total.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{comm_to_words, Event};

    fn call(lat: u64, parts: [u64; WHY_PARTS], waker: &str, tid: u32) -> Event {
        let (lo, hi) = comm_to_words(waker);
        Event {
            kind: 0,
            nr: latscope_event::syscall_nr("read").unwrap(),
            lat,
            why_cpu: parts[0],
            why_runq: parts[1],
            why_io: parts[2],
            why_lock: parts[3],
            why_ipc: parts[4],
            why_timer: parts[5],
            why_fault: parts[6],
            why_other: parts[7],
            why_unknown: parts[8],
            waker_ctx: u8::from(!waker.is_empty()),
            waker_tid: tid,
            waker_comm_lo: lo,
            waker_comm_hi: hi,
            ..Default::default()
        }
    }

    /// A futex wait its timeout ended while the lock was held: by a thread the programs saw
    /// take it (named), or by one that took it without a system call (said so); both are
    /// waits on someone, not idle.
    #[test]
    fn a_held_timeout_names_the_holder_or_says_it_took_the_lock_unseen() {
        use latscope_event::wake_flags::{HELD, KNOWN};
        let mut e = call(5_000_000, [0, 0, 0, 5_000_000, 0, 0, 0, 0, 0], "", 0);
        e.nr = latscope_event::syscall_nr("futex").unwrap();
        (e.waker_ctx, e.wake_flags, e.lock_owner) = (2, KNOWN | HELD, 0);
        let (lo, hi) = comm_to_words("worker");
        let named = Event { lock_owner: 77, waker_comm_lo: lo, waker_comm_hi: hi, ..e.clone() };
        let mut b = EventBatch::default();
        b.push(&e);
        b.push(&named);
        let h = TraceHeader::default();
        assert!(held_unseen(&b, 0) && !held_unseen(&b, 1));
        assert_eq!(waited_on(&b, 0).as_deref(), Some(UNSEEN_HOLDER));
        assert_eq!(waited_on(&b, 1).as_deref(), Some("worker/77"));
        assert!(line(&h, &b, 0).unwrap().contains(&format!("; held by {UNSEEN_HOLDER}")));
        for i in 0..2 {
            assert_eq!(wait_kind(&b, i), crate::waits::WaitKind::OnSomeone);
        }
        let j = json(&h, &b, 0).unwrap();
        assert!(j["held_by"].is_null() && j["wait"] == "on_someone", "{j}");
        assert_eq!(json(&h, &b, 1).unwrap()["held_by"]["tid"], 77);
    }

    #[test]
    fn sums_by_cause_waker_and_operation() {
        let mut b = EventBatch::default();
        b.push(&call(1000, [100, 0, 0, 0, 900, 0, 0, 0, 0], "writer", 42));
        b.push(&call(3000, [0, 0, 0, 0, 3000, 0, 0, 0, 0], "writer", 42));
        b.push(&call(500, [0; WHY_PARTS], "", 0)); // no breakdown
        let mut a = WhyAgg::default();
        a.add(&b, &[0, 1, 2]);
        assert_eq!((a.calls, a.without, a.total_ns), (2, 1, 4000));
        assert_eq!(a.ranked_parts(), vec![(4, 3900), (0, 100)]);
        assert_eq!(a.ranked_wakers(5), vec![("writer/42", 4, 3900)]);
        let t = a.render_text(5);
        assert!(t.contains("pipe/socket") && t.contains("writer/42"), "{t}");
        let j = a.to_json(5);
        assert_eq!(j["parts_ns"]["ipc"], 3900);
        let h = TraceHeader::default();
        assert_eq!(json(&h, &b, 0).unwrap()["waker"]["tid"], 42);
        assert!(line(&h, &b, 1).unwrap().contains("pipe/socket 3.00us (100%); woken by writer/42"));
        assert!(json(&h, &b, 2).is_none());
    }

    #[test]
    fn the_requests_behind_io_waits_are_shown_by_call_and_by_disk() {
        let mut e = call(800_000_000, [0, 0, 800_000_000, 0, 0, 0, 0, 0, 0], "", 0);
        (e.wake_dev, e.wake_sector) = ((7 << 20) | 1, 112);
        (e.wake_held_ns, e.wake_queue_ns, e.wake_device_ns) = (799_000_000, 10_000, 50_000);
        let mut b = EventBatch::default();
        b.push(&e);
        let h = TraceHeader::default();
        let l = line(&h, &b, 0).unwrap();
        assert!(
            l.contains(
                "sector 112; requests that ended the I/O waits: held 799ms before them, queued 10.0us, device 50.0us"
            ),
            "{l}"
        );
        let j = json(&h, &b, 0).unwrap();
        assert_eq!(j["io_requests"]["held_ns"], 799_000_000);
        assert_eq!(j["io_requests"]["device_ns"], 50_000);
        let mut a = WhyAgg::default();
        a.add(&b, &[0]);
        let d = &a.to_json(5)["operations"][0]["disks"][0];
        assert_eq!((d["io_ns"].as_u64(), d["requests"]["held_ns"].as_u64()), (Some(800_000_000), Some(799_000_000)));
        assert!(a.render_ticket(&h, 5, 1).contains("held 799ms before them"));
        // A trace recorded before the request times: none shown.
        b.wake_device_ns[0] = 0;
        assert!(!line(&h, &b, 0).unwrap().contains("held") && json(&h, &b, 0).unwrap().get("io_requests").is_none());
    }

    /// A call's page-fault time is shown with the file behind the fault (and the offset in
    /// it), summed by that file; an unnamed file is said to be unknown.
    #[test]
    fn page_fault_time_is_shown_under_its_file() {
        let mut b = EventBatch::default();
        let mut e = call(2_000_000, [100_000, 0, 0, 0, 0, 0, 1_900_000, 0, 0], "", 0);
        (e.fault_addr, e.fault_off, e.fault_path) = (0x7f00_0000_1000, 262_144, "/data/f".into());
        b.push(&e);
        (e.fault_off, e.fault_path) = (-1, String::new());
        b.push(&e);
        let h = TraceHeader::default();
        let l = line(&h, &b, 0).unwrap();
        assert!(l.ends_with("; page fault in /data/f at offset 262144 bytes"), "{l}");
        assert!(line(&h, &b, 1).unwrap().ends_with("; page fault in an unknown file"));
        let j = json(&h, &b, 0).unwrap();
        assert_eq!(
            (j["page_fault"]["path"].as_str(), j["page_fault"]["offset_bytes"].as_i64()),
            (Some("/data/f"), Some(262_144))
        );
        assert!(json(&h, &b, 1).unwrap()["page_fault"]["path"].is_null());
        let mut a = WhyAgg::default();
        a.add(&b, &[0, 1]);
        let t = a.render_ticket(&h, 5, 1);
        assert!(t.contains("page faults in: (unknown file) (1.90ms), /data/f (1.90ms)"), "{t}");
        let t = a.render_text(5);
        assert!(t.contains("page-fault time by file") && t.contains("/data/f"), "{t}");
        assert_eq!(a.to_json(5)["page_fault_files"][0]["fault_ns"], 1_900_000);
    }

    /// A newline in a waker's name, a file's path or a faulting file's path split the ticket's
    /// and the breakdown's lines before they were escaped, so the rest of the name read as a
    /// line of latscope's own. Each name is now escaped where it is written.
    #[test]
    fn a_newline_in_a_name_forges_no_line_of_the_ticket_or_the_breakdown() {
        let mut e = call(2_000_000, [0, 0, 0, 0, 1_000_000, 0, 1_000_000, 0, 0], "w\nFORGED w", 7);
        (e.path, e.fault_addr, e.fault_path) = ("/d\nFORGED d".into(), 0x1000, "/f\nFORGED f\x1b[2J".into());
        let mut b = EventBatch::default();
        b.push(&e);
        let mut a = WhyAgg::default();
        a.add(&b, &[0]);
        let h = TraceHeader::default();
        for t in [a.render_ticket(&h, 5, 1), a.render_text(5)] {
            assert!(!t.lines().any(|l| l.trim_start().starts_with("FORGED")), "{t}");
            assert!(!t.contains('\x1b') && t.contains(r"/f\nFORGED f\x1b[2J") && t.contains(r"w\nFORGED w/7"), "{t}");
        }
        assert!(a.render_ticket(&h, 5, 1).contains(r"files: /d\nFORGED d ("));
    }
}

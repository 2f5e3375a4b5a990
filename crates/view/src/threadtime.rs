//! Each thread's whole time over a recording, in and outside its calls (`why --threads`): user
//! CPU, kernel CPU outside calls (page faults, interrupts, signals), run queue between calls,
//! blocked outside calls (waiting for a page fault's I/O, stopped), and in calls, their parts by
//! cause (docs/WHY.md, "Where a thread's whole time went").
//!
//! A recording with attribution reads every traced thread's times as the scheduler counts them
//! (`proc_times` events: on CPU, runnable, user and system CPU, faults) at its start, at each
//! thread's exit and at its end. Their differences bound the thread's window and say exactly
//! how long it ran and waited for a CPU; its recorded calls say which of that was in calls and
//! how each call's blocked time divides by cause. What is left is outside calls:
//!
//! - CPU outside calls: the thread's CPU less its calls' on-CPU parts, split into user and kernel
//!   by the kernel's utime:stime ratio (sampled at ticks on most kernels: the split is as
//!   precise as that, the total is exact);
//! - run queue outside calls: its runnable time less its calls' run-queue parts;
//! - blocked outside calls: the rest of the window (page faults that waited for I/O, a stopped
//!   thread).
//!
//! A call below `--why-above` has no parts: it counts as on CPU in calls. A call the thread was
//! blocked in when the recording started (never recorded) counts, until it returned, as blocked in
//! it by what the call is (lock for a futex, pipe/socket for an epoll_wait, ...); so does a call
//! still blocked at the end.

use std::collections::{HashMap, VecDeque};

use rustc_hash::{FxHashMap, FxHashSet};
use std::fmt::Write;

use latscope_event::units::fmt_ns;
use latscope_event::waits::part_of_call;
use latscope_event::{EventBatch, EventKind, ThreadTimes, TimesAt, WHY_PARTS, WHY_PART_NAMES};
use serde_json::{json, Value};

use crate::text::clean;
use crate::why::PART_LABELS;

/// Calls of a thread kept until the start of its window is known (its start reading), at most.
const MAX_EARLY_CALLS: usize = 4096;
/// The last calls of a thread kept to clip those that ended after its end reading.
const LAST_CALLS: usize = 32;

/// One call, as far as the accounting needs it.
#[derive(Debug, Clone, Copy)]
struct Call {
    ts: u64,
    end: u64,
    /// Its parts, or `None` without a breakdown.
    parts: Option<[u64; WHY_PARTS]>,
}

impl Call {
    /// Its parts within `[lo, hi)`, in proportion to the share of the call there (the trace
    /// has each part's total, not when in the call it came); without a breakdown, all on CPU.
    fn within(&self, lo: u64, hi: u64) -> [u64; WHY_PARTS] {
        let mut out = [0u64; WHY_PARTS];
        let (a, b) = (self.ts.max(lo), self.end.min(hi));
        let lat = self.end - self.ts;
        if b <= a || lat == 0 {
            return out;
        }
        let share = |v: u64| ((v as u128 * (b - a) as u128) / lat as u128) as u64;
        match self.parts {
            Some(p) => {
                for (o, v) in out.iter_mut().zip(p) {
                    *o = share(v);
                }
            }
            None => out[0] = b - a,
        }
        out
    }
}

#[derive(Debug, Default)]
struct Acc {
    pid: u32,
    comm: String,
    start: Option<ThreadTimes>,
    birth: Option<ThreadTimes>,
    end: Option<ThreadTimes>,
    exited: bool,
    resumed: Option<ThreadTimes>,
    /// Calls seen before the start reading.
    early: Vec<Call>,
    /// Calls within the window so far (clipped at its start), and the last ones, to clip at its end.
    parts: [u64; WHY_PARTS],
    unbroken: u64,
    calls: u64,
    /// The start of its first call.
    first_call: Option<u64>,
    last: VecDeque<Call>,
    /// On-CPU samples (`record --profile`): CPU time (ns) by (user stack, kernel stack) id.
    samples: FxHashMap<(u32, u32), u64>,
    /// The functions they were taken in, most CPU first ([`ThreadTimeAgg::name_samples`]).
    hot: Vec<(String, u64)>,
}

/// Each thread's account, fed events in any order of blocks (see the module's documentation).
#[derive(Debug, Default)]
pub struct ThreadTimeAgg {
    threads: FxHashMap<u32, Acc>,
    /// Threads that had an event the filter took; every thread when `all`.
    shown: FxHashSet<u32>,
    all: bool,
    /// A thread's times were seen: calls count from there (none before the first reading, the
    /// start's, is in any window), and a trace without them costs a scan of its kinds.
    started: bool,
}

/// Where one thread's (or process's) time went over its window, ns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Account {
    pub pid: u32,
    /// 0 for a process.
    pub tid: u32,
    pub comm: String,
    /// Threads summed (1 for a thread).
    pub threads: u32,
    /// The window: from the start reading (or the thread's start) to its exit or the end.
    pub from: u64,
    pub to: u64,
    pub exited: bool,
    pub wall: u64,
    /// Outside calls.
    pub user: u64,
    pub kernel: u64,
    pub runq: u64,
    pub blocked: u64,
    /// In calls, by part (`WHY_PART_NAMES`); calls without a breakdown are in `on CPU`.
    pub in_calls: [u64; WHY_PARTS],
    pub calls: u64,
    /// Of `in_calls`: in a call begun before the recording, or not returned at its end.
    pub unrecorded: u64,
    /// The scheduler's totals over the window.
    pub cpu: u64,
    pub runnable: u64,
    pub min_flt: u64,
    pub maj_flt: u64,
    pub vcsw: u64,
    pub ivcsw: u64,
    /// What the parts counted beyond the window (the scheduler's counters lag the clock by up
    /// to a tick, and a call's parts are clipped in proportion): taken off blocked outside calls
    /// first; shown when not 0.
    pub over: u64,
    /// With on-CPU samples (`record --profile`): the functions they were taken in, with the CPU
    /// time (ns) they stand for, most first.
    pub on_cpu_in: Vec<(String, u64)>,
}

/// Sampled functions shown per thread and process in text (JSON: [`HOT_FUNCTIONS_JSON`]).
pub const HOT_FUNCTIONS: usize = 3;
const HOT_FUNCTIONS_JSON: usize = 10;

/// `by`, most first.
fn hottest(by: HashMap<String, u64>) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

impl Account {
    /// Time outside calls.
    pub fn outside(&self) -> u64 {
        self.user + self.kernel + self.runq + self.blocked
    }
    /// Time in calls.
    pub fn inside(&self) -> u64 {
        self.in_calls.iter().sum()
    }
    fn add(&mut self, o: &Account) {
        self.threads += o.threads;
        self.from = if self.from == 0 { o.from } else { self.from.min(o.from) };
        self.to = self.to.max(o.to);
        self.wall += o.wall;
        self.user += o.user;
        self.kernel += o.kernel;
        self.runq += o.runq;
        self.blocked += o.blocked;
        for (a, b) in self.in_calls.iter_mut().zip(o.in_calls) {
            *a += b;
        }
        self.calls += o.calls;
        self.unrecorded += o.unrecorded;
        self.cpu += o.cpu;
        self.runnable += o.runnable;
        self.min_flt += o.min_flt;
        self.maj_flt += o.maj_flt;
        self.vcsw += o.vcsw;
        self.ivcsw += o.ivcsw;
        self.over += o.over;
        if !o.on_cpu_in.is_empty() {
            let mut by: HashMap<String, u64> = self.on_cpu_in.drain(..).collect();
            for (f, ns) in &o.on_cpu_in {
                *by.entry(f.clone()).or_default() += ns;
            }
            self.on_cpu_in = hottest(by);
        }
    }
    fn to_json(&self) -> Value {
        let in_calls: serde_json::Map<String, Value> =
            WHY_PART_NAMES.iter().zip(self.in_calls).map(|(n, v)| (format!("{n}_ns"), json!(v))).collect();
        let mut j = json!({
            "pid": self.pid,
            "comm": self.comm,
            "wall_ns": self.wall,
            "outside_calls": {
                "user_cpu_ns": self.user,
                "kernel_cpu_ns": self.kernel,
                "runq_ns": self.runq,
                "blocked_ns": self.blocked,
                "total_ns": self.outside(),
            },
            "in_calls": {
                "calls": self.calls,
                "total_ns": self.inside(),
                "by_cause": in_calls,
                "unrecorded_ns": self.unrecorded,
            },
            "cpu_ns": self.cpu,
            "runnable_ns": self.runnable,
            "page_faults": {"minor": self.min_flt, "major": self.maj_flt},
            "switches": {"voluntary": self.vcsw, "involuntary": self.ivcsw},
            "on_cpu_functions": self.on_cpu_in.iter().take(HOT_FUNCTIONS_JSON)
                .map(|(f, ns)| json!({"function": f, "cpu_ns": ns})).collect::<Vec<_>>(),
            "over_ns": self.over,
        });
        if self.tid != 0 {
            j["tid"] = json!(self.tid);
            j["from_ns"] = json!(self.from);
            j["to_ns"] = json!(self.to);
            j["exited"] = json!(self.exited);
        } else {
            j["threads"] = json!(self.threads);
        }
        j
    }
}

impl ThreadTimeAgg {
    /// Every thread is shown, not only those with an event the filter took.
    pub fn all_threads() -> ThreadTimeAgg {
        ThreadTimeAgg { all: true, ..Default::default() }
    }

    /// Take every event of `b` (a thread's calls count whatever the filter says); `rows`: those
    /// the filter took, whose threads are shown.
    pub fn add(&mut self, b: &EventBatch, rows: &[u32]) {
        if !self.started {
            let proc = EventKind::Proc as u8;
            let times = latscope_event::ProcOp::Times as u16;
            match (0..b.len()).find(|&i| b.kind[i] == proc && b.nr[i] == times) {
                Some(_) => self.started = true,
                None => return,
            }
        }
        if !self.all {
            for &i in rows {
                self.shown.insert(b.tid[i as usize]);
            }
        }
        for i in 0..b.len() {
            match EventKind::from_u8(b.kind[i]) {
                Some(EventKind::Syscall) => {
                    let c = Call { ts: b.ts[i], end: b.end(i), parts: b.has_why(i).then(|| b.why_parts(i)) };
                    self.call(b.tid[i], c);
                }
                Some(EventKind::Proc) if b.nr[i] == latscope_event::ProcOp::Sample as u16 => {
                    let a = self.threads.entry(b.tid[i]).or_default();
                    *a.samples.entry((b.ustack[i], b.kstack[i])).or_default() += b.bytes[i];
                }
                Some(EventKind::Proc) => {
                    if let Some((t, at)) = ThreadTimes::from_row(b, i) {
                        self.reading(t, at, b.comm.get(i));
                    }
                }
                _ => {}
            }
        }
    }

    fn reading(&mut self, t: ThreadTimes, at: TimesAt, comm: &str) {
        let a = self.threads.entry(t.tid).or_default();
        a.pid = t.pid;
        if !comm.is_empty() && (a.comm.is_empty() || at != TimesAt::Start) {
            a.comm = comm.to_string();
        }
        a.birth.get_or_insert(t.at_birth());
        match at {
            TimesAt::Start => {
                if a.start.is_none_or(|s| t.ts < s.ts) {
                    a.start = Some(t);
                    let early = std::mem::take(&mut a.early);
                    for c in early {
                        add_call(a, c);
                    }
                }
            }
            TimesAt::Exit => {
                a.end = Some(t);
                a.exited = true;
            }
            TimesAt::End => {
                if !a.exited && a.end.is_none_or(|e| t.ts > e.ts) {
                    a.end = Some(t);
                }
            }
            TimesAt::Resumed => {
                if a.resumed.is_none_or(|r| t.ts < r.ts) {
                    a.resumed = Some(t);
                }
            }
        }
    }

    fn call(&mut self, tid: u32, c: Call) {
        let a = self.threads.entry(tid).or_default();
        a.first_call = Some(a.first_call.map_or(c.ts, |f| f.min(c.ts)));
        if a.start.is_none() && a.early.len() < MAX_EARLY_CALLS {
            a.early.push(c);
        } else {
            add_call(a, c);
        }
    }

    /// Whether on-CPU samples were seen (`record --profile`).
    pub fn has_samples(&self) -> bool {
        self.threads.values().any(|a| !a.samples.is_empty())
    }

    /// Name the functions each thread's on-CPU samples were taken in: `leaf` names a sample's
    /// function from its user and kernel stack ids (see `stacks::sample_leaf`).
    pub fn name_samples(&mut self, mut leaf: impl FnMut(u32, u32) -> String) {
        for a in self.threads.values_mut() {
            let mut by: HashMap<String, u64> = HashMap::new();
            for (&(u, k), &ns) in &a.samples {
                *by.entry(leaf(u, k)).or_default() += ns;
            }
            a.hot = hottest(by);
        }
    }

    /// Every shown thread's account with a window (a start and an end), most wall time first.
    pub fn threads(&self) -> Vec<Account> {
        let mut out: Vec<Account> = self
            .threads
            .iter()
            .filter(|(tid, _)| self.all || self.shown.contains(tid))
            .filter_map(|(&tid, a)| account(tid, a))
            .collect();
        out.sort_by(|a, b| b.wall.cmp(&a.wall).then(a.tid.cmp(&b.tid)));
        out
    }

    /// The accounts summed per process, most thread time first.
    pub fn processes(threads: &[Account]) -> Vec<Account> {
        let mut by: HashMap<u32, Account> = HashMap::new();
        for t in threads {
            let p = by.entry(t.pid).or_insert_with(|| Account { pid: t.pid, ..Default::default() });
            if p.comm.is_empty() || t.tid == t.pid {
                p.comm = t.comm.clone();
            }
            p.add(t);
        }
        let mut out: Vec<Account> = by.into_values().collect();
        out.sort_by(|a, b| b.wall.cmp(&a.wall).then(a.pid.cmp(&b.pid)));
        out
    }

    /// Threads seen with calls or readings but no window (no reading at the start or the end:
    /// a thread the recording did not follow from its start, or a recording cut short).
    pub fn without_window(&self) -> usize {
        self.threads
            .iter()
            .filter(|(tid, _)| self.all || self.shown.contains(tid))
            .filter(|(&tid, a)| account(tid, a).is_none())
            .count()
    }

    /// The accounts as text: the `n` threads and processes with the most wall time.
    pub fn render_text(&self, n: usize) -> String {
        let threads = self.threads();
        let procs = Self::processes(&threads);
        let mut s = String::new();
        if threads.is_empty() {
            s.push_str(
                "No thread's whole time is known: the trace has no thread times (recorded without --why, or by a \
                 version before them).\n",
            );
            return s;
        }
        let _ = writeln!(
            s,
            "Where each thread's time went, in and outside its calls ({} thread{}, {} process{}; the {} with the most wall time)",
            threads.len(),
            if threads.len() == 1 { "" } else { "s" },
            procs.len(),
            if procs.len() == 1 { "" } else { "es" },
            n.min(threads.len())
        );
        table(&mut s, "thread", &threads[..n.min(threads.len())], |a| format!("{}/{}", clean(&a.comm), a.tid));
        s.push('\n');
        table(&mut s, "process", &procs[..n.min(procs.len())], |a| {
            format!("{}/{} ({} thread{})", clean(&a.comm), a.pid, a.threads, if a.threads == 1 { "" } else { "s" })
        });
        let missing = self.without_window();
        if missing > 0 {
            let _ = writeln!(
                s,
                "\n{missing} thread{} without a reading at the start or the end of the recording (not followed from it) left out.",
                if missing == 1 { "" } else { "s" }
            );
        }
        s.push_str(
            "\nOutside calls: user and kernel CPU (split as the kernel's utime:stime), run queue, blocked (page faults' \
             I/O, stopped). In calls: their parts by cause (calls without a breakdown as on CPU).\n",
        );
        s
    }

    /// One line for the `why` ticket: the threads' time summed, outside calls by part and in
    /// calls; `None` without thread times.
    pub fn summary_line(&self) -> Option<String> {
        let threads = self.threads();
        if threads.is_empty() {
            return None;
        }
        let mut all = Account::default();
        for t in &threads {
            all.add(t);
        }
        let pct = |v: u64| if all.wall == 0 { 0.0 } else { v as f64 * 100.0 / all.wall as f64 };
        Some(format!(
            "threads' whole time: {} in {} thread{}: outside calls user CPU {:.1} %, kernel CPU {:.1} %, run queue {:.1} %, \
             blocked {:.1} %; in calls {:.1} % (why --threads: each thread and process)",
            fmt_ns(all.wall),
            all.threads,
            if all.threads == 1 { "" } else { "s" },
            pct(all.user),
            pct(all.kernel),
            pct(all.runq),
            pct(all.blocked),
            pct(all.inside())
        ))
    }

    /// The accounts as JSON: every thread and process.
    pub fn to_json(&self) -> Value {
        let threads = self.threads();
        let procs = Self::processes(&threads);
        json!({
            "threads": threads.iter().map(Account::to_json).collect::<Vec<_>>(),
            "processes": procs.iter().map(Account::to_json).collect::<Vec<_>>(),
            "threads_without_window": self.without_window(),
        })
    }
}

fn add_call(a: &mut Acc, c: Call) {
    let lo = a.start.map_or(0, |s| s.ts);
    let p = c.within(lo, u64::MAX);
    if p.iter().all(|&v| v == 0) && c.end <= lo {
        return;
    }
    a.calls += 1;
    if c.parts.is_some() {
        for (o, v) in a.parts.iter_mut().zip(p) {
            *o += v;
        }
    } else {
        a.unbroken += p[0];
    }
    a.last.push_back(c);
    if a.last.len() > LAST_CALLS {
        a.last.pop_front();
    }
}

/// A thread's account, when it has a window.
fn account(tid: u32, a: &Acc) -> Option<Account> {
    let e = a.end?;
    // From the start reading; a thread born during the recording, from its start (every
    // counter 0 then).
    let s = a.start.or(a.birth.filter(|b| a.start.is_none() && b.ts > 0))?;
    if e.ts <= s.ts {
        return None;
    }
    let (lo, hi) = (s.ts, e.ts);
    let mut parts = a.parts;
    let mut unbroken = a.unbroken;
    let mut calls = a.calls;
    // Calls never past the start reading are in `early` (no start reading came).
    for c in &a.early {
        let p = c.within(lo, hi);
        calls += 1;
        if c.parts.is_some() {
            for (o, v) in parts.iter_mut().zip(p) {
                *o += v;
            }
        } else {
            unbroken += p[0];
        }
    }
    // The last calls' time past the end reading is not in the window.
    for c in a.last.iter().filter(|c| c.end > hi) {
        let all = c.within(lo, u64::MAX);
        let kept = c.within(lo, hi);
        if c.parts.is_some() {
            for ((o, x), k) in parts.iter_mut().zip(all).zip(kept) {
                *o -= x - k;
            }
        } else {
            unbroken -= all[0] - kept[0];
        }
    }
    parts[0] += unbroken;
    let mut unrecorded = 0u64;
    // A call it was blocked in at the start: until it returned (its resumed reading, exact), or
    // else until its first recorded call or the end.
    if a.start.is_some() && s.call.is_some() && s.in_call == 0 {
        let nr = s.call.unwrap_or(0);
        // (a resumed reading after its first recorded call is another call's)
        let r = a.resumed.filter(|r| r.ts >= lo && r.ts <= hi && a.first_call.is_none_or(|f| r.ts <= f));
        let (until, cpu, runq) = match r {
            Some(r) => (r.ts, r.cpu.saturating_sub(s.cpu), r.runq.saturating_sub(s.runq)),
            None => (a.first_call.map_or(hi, |f| f.clamp(lo, hi)), 0, 0),
        };
        let d = until - lo;
        let blocked = d.saturating_sub(cpu + runq);
        let in_cpu = cpu.min(d);
        parts[0] += in_cpu;
        parts[1] += runq.min(d - in_cpu);
        parts[part_of_call(nr)] += blocked;
        unrecorded += d;
    }
    // A recorded call it had not returned from at the end: blocked in it since it began.
    if !a.exited && e.in_call > 0 {
        if let Some(nr) = e.call {
            let from = e.ts.saturating_sub(e.in_call).max(lo);
            let d = hi - from;
            parts[part_of_call(nr)] += d;
            unrecorded += d;
        }
    }
    let wall = hi - lo;
    let cpu = e.cpu.saturating_sub(s.cpu);
    let runnable = e.runq.saturating_sub(s.runq);
    let (du, ds) = (e.user.saturating_sub(s.user), e.sys.saturating_sub(s.sys));
    let out_cpu = cpu.saturating_sub(parts[0]);
    // The kernel's share of the CPU by its utime:stime ticks, less what the calls took on CPU.
    let kernel_all = if du + ds > 0 { (cpu as u128 * ds as u128 / (du + ds) as u128) as u64 } else { parts[0] };
    let kernel = kernel_all.saturating_sub(parts[0]).min(out_cpu);
    let user = out_cpu - kernel;
    let runq = runnable.saturating_sub(parts[1]);
    let counted = user + kernel + runq + parts.iter().sum::<u64>();
    let (blocked, over) = if counted <= wall { (wall - counted, 0) } else { (0, counted - wall) };
    Some(Account {
        pid: a.pid,
        tid,
        comm: a.comm.clone(),
        threads: 1,
        from: lo,
        to: hi,
        exited: a.exited,
        wall,
        user,
        kernel,
        runq,
        blocked,
        in_calls: parts,
        calls,
        unrecorded,
        cpu,
        runnable,
        min_flt: e.min_flt.saturating_sub(s.min_flt),
        maj_flt: e.maj_flt.saturating_sub(s.maj_flt),
        vcsw: u64::from(e.vcsw.saturating_sub(s.vcsw)),
        ivcsw: u64::from(e.ivcsw.saturating_sub(s.ivcsw)),
        over,
        on_cpu_in: a.hot.clone(),
    })
}

/// A table of accounts: wall time, the four parts outside calls and the time in calls, in % of
/// the wall time, and the largest causes in calls.
fn table(s: &mut String, what: &str, rows: &[Account], name: impl Fn(&Account) -> String) {
    let names: Vec<String> = rows.iter().map(&name).collect();
    let w = names.iter().map(|n| n.chars().count()).max().unwrap_or(0).max(what.len());
    let _ = writeln!(
        s,
        "  {what:<w$}  {:>9}  {:>8} {:>8} {:>8} {:>8}  {:>8}  in calls by cause",
        "wall", "user CPU", "kern CPU", "run q", "blocked", "in calls"
    );
    let _ = writeln!(s, "  {:<w$}  {:>9}  {:-^35}  {:>8}", "", "", " outside calls ", "");
    for (a, n) in rows.iter().zip(names) {
        let pct = |v: u64| if a.wall == 0 { 0.0 } else { v as f64 * 100.0 / a.wall as f64 };
        let mut causes: Vec<(usize, u64)> = a.in_calls.iter().copied().enumerate().filter(|&(_, v)| v > 0).collect();
        causes.sort_by_key(|&(_, v)| std::cmp::Reverse(v));
        let causes: Vec<String> =
            causes.iter().take(3).map(|&(p, v)| format!("{} {:.1} %", PART_LABELS[p], pct(v))).collect();
        let _ = writeln!(
            s,
            "  {n:<w$}  {:>9}  {:>6.1} % {:>6.1} % {:>6.1} % {:>6.1} %  {:>6.1} %  {}",
            fmt_ns(a.wall),
            pct(a.user),
            pct(a.kernel),
            pct(a.runq),
            pct(a.blocked),
            pct(a.inside()),
            if causes.is_empty() { "-".to_string() } else { causes.join(", ") }
        );
        if !a.on_cpu_in.is_empty() {
            let sampled: u64 = a.on_cpu_in.iter().map(|f| f.1).sum();
            let hot: Vec<String> = a
                .on_cpu_in
                .iter()
                .take(HOT_FUNCTIONS)
                .map(|(f, ns)| format!("{} {:.0} %", clean(f), *ns as f64 * 100.0 / sampled.max(1) as f64))
                .collect();
            let _ = writeln!(s, "  {:<w$}  on CPU in (samples): {}", "", hot.join(", "));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{Event, ProcOp};

    fn times(tid: u32, at: u32, ts: u64, cpu: u64, runq: u64, user: u64, sys: u64) -> Event {
        Event {
            kind: EventKind::Proc as u8,
            nr: ProcOp::Times as u16,
            ts,
            ret: 1_000,
            pid: 1,
            tid,
            comm: "app".into(),
            bytes: cpu,
            qtime: runq,
            addr: user,
            off: sys as i64,
            fd: -1,
            mode: at,
            ..Default::default()
        }
    }

    fn call(tid: u32, nr: u16, ts: u64, parts: [u64; WHY_PARTS]) -> Event {
        let lat: u64 = parts.iter().sum();
        Event {
            kind: EventKind::Syscall as u8,
            nr,
            ts,
            lat,
            pid: 1,
            tid,
            comm: "app".into(),
            why_cpu: parts[0],
            why_runq: parts[1],
            why_io: parts[2],
            why_lock: parts[3],
            why_ipc: parts[4],
            why_timer: parts[5],
            why_fault: parts[6],
            why_other: parts[7],
            why_unknown: parts[8],
            ..Default::default()
        }
    }

    fn agg(events: &[Event]) -> ThreadTimeAgg {
        let mut b = EventBatch::default();
        for e in events {
            b.push(e);
        }
        let mut a = ThreadTimeAgg::all_threads();
        a.add(&b, &[]);
        a
    }

    /// A thread over 1 s: 600 ms on CPU (100 ms of it in a call), 50 ms runnable (10 ms in the
    /// call), a 300 ms sleep: the parts are each what it was, and add up to the wall time.
    #[test]
    fn the_parts_of_a_thread_add_up_to_its_wall_time() {
        let ms = 1_000_000u64;
        let mut p = [0u64; WHY_PARTS];
        p[0] = 100 * ms;
        p[1] = 10 * ms;
        p[5] = 300 * ms;
        let a = agg(&[
            times(7, 0, 10 * ms, 0, 0, 0, 0),
            call(7, 35, 200 * ms, p),
            times(7, 2, 1010 * ms, 600 * ms, 50 * ms, 500 * ms, 100 * ms),
        ]);
        let t = &a.threads()[0];
        assert_eq!(t.wall, 1000 * ms);
        assert_eq!(t.in_calls[0], 100 * ms);
        assert_eq!(t.in_calls[5], 300 * ms);
        assert_eq!(t.user, 500 * ms);
        assert_eq!(t.kernel, 0);
        assert_eq!(t.runq, 40 * ms);
        assert_eq!(t.blocked, 1000 * ms - 500 * ms - 40 * ms - 410 * ms);
        assert_eq!(t.outside() + t.inside(), t.wall);
        assert_eq!(t.over, 0);
    }

    /// A thread born during the recording counts from its start; one blocked in a futex since
    /// before the recording counts that wait as lock time in calls until it returned.
    #[test]
    fn a_new_thread_from_its_start_and_a_wait_begun_before_until_it_returned() {
        let ms = 1_000_000u64;
        let mut born = times(8, 1, 500 * ms, 200 * ms, 0, 200 * ms, 0);
        born.ret = (100 * ms) as i64;
        let mut pre = times(9, 0, 10 * ms, 0, 0, 0, 0);
        pre.fd = 202; // futex
        let mut resumed = times(9, 3, 410 * ms, 0, 5 * ms, 0, 0);
        resumed.fd = 202;
        let a = agg(&[born, pre, resumed, times(9, 2, 1010 * ms, 100 * ms, 5 * ms, 100 * ms, 0)]);
        let ts = a.threads();
        let t8 = ts.iter().find(|t| t.tid == 8).unwrap();
        assert_eq!((t8.from, t8.to, t8.exited), (100 * ms, 500 * ms, true));
        assert_eq!(t8.user, 200 * ms);
        assert_eq!(t8.blocked, 200 * ms);
        let t9 = ts.iter().find(|t| t.tid == 9).unwrap();
        let lock = WHY_PART_NAMES.iter().position(|p| *p == "lock").unwrap();
        assert_eq!(t9.in_calls[lock], 395 * ms);
        assert_eq!(t9.in_calls[1], 5 * ms);
        assert_eq!(t9.unrecorded, 400 * ms);
        assert_eq!(t9.user, 100 * ms);
        assert_eq!(t9.outside() + t9.inside(), t9.wall);
        let p = ThreadTimeAgg::processes(&ts);
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].threads, p[0].wall), (2, 400 * ms + 1000 * ms));
    }

    /// Calls before the start reading or after the end reading count only within the window;
    /// a call still blocked at the end counts from its start.
    #[test]
    fn calls_are_clipped_to_the_window() {
        let ms = 1_000_000u64;
        let mut p = [0u64; WHY_PARTS];
        p[4] = 100 * ms;
        let mut end = times(7, 2, 1000 * ms, 0, 0, 0, 0);
        end.fd = 232;
        end.lat = 50 * ms;
        let a = agg(&[
            call(7, 232, 50 * ms, p), // 50..150, the window starts at 100
            times(7, 0, 100 * ms, 0, 0, 0, 0),
            call(7, 232, 950 * ms, p), // 950..1050, the window ends at 1000
            end,
        ]);
        let t = &a.threads()[0];
        let ipc = WHY_PART_NAMES.iter().position(|p| *p == "ipc").unwrap();
        assert_eq!(t.in_calls[ipc], 50 * ms + 50 * ms + 50 * ms);
        assert_eq!(t.wall, 900 * ms);
        assert_eq!(t.blocked, 750 * ms);
        assert_eq!(t.unrecorded, 50 * ms);
    }

    #[test]
    fn text_and_json_name_every_part() {
        let ms = 1_000_000u64;
        let a = agg(&[times(7, 0, 0, 0, 0, 0, 0), times(7, 2, 100 * ms, 50 * ms, 0, 40 * ms, 10 * ms)]);
        let txt = a.render_text(5);
        assert!(txt.contains("app/7"), "{txt}");
        assert!(txt.contains("50.0 %"), "{txt}");
        let j = a.to_json();
        assert_eq!(j["threads"][0]["outside_calls"]["user_cpu_ns"], 40 * ms);
        assert_eq!(j["threads"][0]["outside_calls"]["kernel_cpu_ns"], 10 * ms);
        assert_eq!(j["processes"][0]["threads"], 1);
        assert!(agg(&[]).render_text(5).contains("no thread times"));
        let line = a.summary_line().unwrap();
        assert!(line.contains("100ms in 1 thread: outside calls user CPU 40.0 %"), "{line}");
        assert!(agg(&[]).summary_line().is_none());
    }
}

//! Testing the triggers that look at events, batch by batch, on the thread that seals the
//! ring's blocks (the recorder's own thread only reads the ring buffer).
//!
//! A call trigger's kernel-testable clauses (its push-down: a latency bound, command names,
//! pids, syscalls) are tested first, on columns: with a latency bound, 64 events at a time
//! without a branch, and only a chunk holding a call above it is looked at closer. The ring
//! keeps every event, so nothing is saved by testing them in the kernel: the events are in
//! user space anyway.

use crate::trigger::{Counted, Trigger, TriggerKind};
use latscope_event::units::fmt_ns;
use latscope_event::{EventBatch, EventKind, TraceHeader};
use latscope_filter::{EvalContext, Filter, Pushdown};
use latscope_hist::Histogram;
use std::collections::VecDeque;

/// A trigger that fired on events.
#[derive(Debug, Clone)]
pub struct Fire {
    /// The trigger's name.
    pub trigger: String,
    /// CLOCK_MONOTONIC ns it fired at: the end of the call, or of the window measured; for a
    /// trigger fired by hand, the moment it was asked for.
    pub at_ns: u64,
    /// What fired it, in words.
    pub reason: String,
}

/// A trigger reports at most once per this much event time (a dump in progress is extended by
/// each report; the minimum gap between dumps holds the rest).
const HOLD_OFF_NS: u64 = 1_000_000_000;

/// Slots a window is cut into, at most (a slot is at least a second).
const MAX_SLOTS: u64 = 60;

struct Call {
    name: String,
    filter: Filter,
    pd: Pushdown,
    next_ok_ns: u64,
}

enum Measure {
    Percentile { q: f64, above_ns: u64, min_count: u64 },
    Rate { counted: Counted, per_sec: f64 },
}

struct Slot {
    index: u64,
    hist: Option<Box<Histogram>>,
    count: u64,
}

struct Window {
    name: String,
    measure: Measure,
    what: String,
    block: bool,
    filter: Option<(Filter, Pushdown)>,
    /// The push-down decides the subject alone: no event needs the whole filter.
    exact: bool,
    /// The rows of a batch that count (reused).
    rows: Vec<u32>,
    /// Latencies of a run of rows in one slot, recorded together (reused).
    lats: Vec<u64>,
    slot_ns: u64,
    slots_per_window: u64,
    slots: VecDeque<Slot>,
    /// Slots before this one have been evaluated.
    evaluated_to: u64,
    next_ok_ns: u64,
}

/// The event triggers of a flight recorder and the context their filters need.
pub(crate) struct Watch {
    calls: Vec<Call>,
    windows: Vec<Window>,
    ctx: EvalContext,
    header: TraceHeader,
    /// How late an event may come after one that ended later (a recorder hands over syscalls
    /// and the other kinds in separate batches, flushed together): a slot is complete this long
    /// after its end.
    late_ns: u64,
}

fn failed(ret: i64) -> bool {
    (-4095..0).contains(&ret)
}

impl Watch {
    pub(crate) fn new(triggers: &[Trigger], header: &TraceHeader, late_ns: u64) -> Watch {
        let mut calls = Vec::new();
        let mut windows = Vec::new();
        let disks =
            |pd: &mut Pushdown| pd.resolve_disks(|n| header.block_devices.iter().find(|d| d.name == n).map(|d| d.dev));
        for t in triggers {
            match &t.kind {
                TriggerKind::Call(f) => {
                    let mut pd = f.pushdown();
                    disks(&mut pd);
                    calls.push(Call { name: t.name.clone(), filter: (**f).clone(), pd, next_ok_ns: 0 });
                }
                TriggerKind::Percentile(p) => windows.push(Window::new(
                    &t.name,
                    Measure::Percentile { q: p.q, above_ns: p.above_ns, min_count: p.min_count() },
                    p.subject.block,
                    p.subject.filter.as_deref(),
                    p.window_ns,
                    &t.condition,
                    header,
                )),
                TriggerKind::Rate(r) => windows.push(Window::new(
                    &t.name,
                    Measure::Rate { counted: r.counted, per_sec: r.per_sec },
                    r.subject.block,
                    r.subject.filter.as_deref(),
                    r.window_ns,
                    &t.condition,
                    header,
                )),
                _ => {}
            }
        }
        Watch { calls, windows, ctx: EvalContext::new(header), header: header.clone(), late_ns }
    }

    /// Whether any trigger looks at events.
    pub(crate) fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.windows.is_empty()
    }

    /// Test the triggers on `b` (a recorder's batch, in order); returns those that fired.
    pub(crate) fn observe(&mut self, b: &EventBatch) -> Vec<Fire> {
        let mut fired = Vec::new();
        if self.is_empty() || b.is_empty() {
            return fired;
        }
        if !b.cgroups.is_empty() {
            let found: Vec<latscope_event::CgroupInfo> =
                b.cgroups.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
            self.ctx.add_cgroups(&found);
            self.header.cgroups.extend(found);
        }
        self.ctx.observe(b);
        for c in &mut self.calls {
            c.observe(b, &self.ctx, &self.header, &mut fired);
        }
        if !self.windows.is_empty() {
            let clock = b.ts.iter().zip(&b.lat).map(|(&t, &l)| t.saturating_add(l)).max().unwrap_or(0);
            let clock = clock.saturating_sub(self.late_ns);
            for w in &mut self.windows {
                w.observe(b, &self.ctx, clock, &mut fired);
            }
        }
        fired
    }
}

impl Call {
    fn observe(&mut self, b: &EventBatch, ctx: &EvalContext, h: &TraceHeader, fired: &mut Vec<Fire>) {
        const CHUNK: usize = 64;
        let mut hit = |i: usize, fired: &mut Vec<Fire>| {
            if !self.pd.admits(b, i) || !self.filter.matches(b, i, ctx) {
                return false;
            }
            let end = b.ts[i].saturating_add(b.lat[i]);
            if end < self.next_ok_ns {
                return false;
            }
            self.next_ok_ns = end.saturating_add(HOLD_OFF_NS);
            fired.push(Fire { trigger: self.name.clone(), at_ns: end, reason: describe_call(b, i, h) });
            true
        };
        match self.pd.min_latency_ns {
            Some(min) => {
                for (c, lats) in b.lat.chunks(CHUNK).enumerate() {
                    if !lats.iter().fold(false, |a, &l| a | (l >= min)) {
                        continue;
                    }
                    for (k, &l) in lats.iter().enumerate() {
                        if l >= min {
                            hit(c * CHUNK + k, fired);
                        }
                    }
                }
            }
            None => {
                for i in 0..b.len() {
                    hit(i, fired);
                }
            }
        }
    }
}

/// Keep the rows of events of one kind (`sys`: syscalls, else block requests) that `pd` admits:
/// [`Pushdown::admits`], one column at a time.
fn retain_admitted(pd: &Pushdown, b: &EventBatch, rows: &mut Vec<u32>, sys: bool) {
    if pd.kinds.is_some_and(|k| !(if sys { k.syscall } else { k.block })) {
        rows.clear();
        return;
    }
    if let Some(min) = pd.min_latency_ns {
        rows.retain(|&i| b.lat[i as usize] >= min);
    }
    if let Some(set) = &pd.pids {
        rows.retain(|&i| set.binary_search(&b.pid[i as usize]).is_ok());
    }
    if let Some(set) = &pd.tids {
        rows.retain(|&i| set.binary_search(&b.tid[i as usize]).is_ok());
    }
    if let Some(names) = &pd.comms {
        let (off, data) = (&b.comm.offsets, &b.comm.data);
        rows.retain(|&i| {
            let c = &data[off[i as usize] as usize..off[i as usize + 1] as usize];
            names.iter().any(|n| n.as_bytes() == c)
        });
    }
    if sys {
        if let Some(set) = &pd.syscalls {
            rows.retain(|&i| set.binary_search(&b.nr[i as usize]).is_ok());
        }
        if let Some(types) = &pd.fd_types {
            rows.retain(|&i| types.contains(&latscope_event::FdType::from_u8(b.fd_type[i as usize])));
        }
    } else if let Some(set) = &pd.block_devs {
        rows.retain(|&i| set.binary_search(&b.dev[i as usize]).is_ok());
    }
}

/// `fsync on /data/x by postgres (pid 12) took 212ms`.
fn describe_call(b: &EventBatch, i: usize, h: &TraceHeader) -> String {
    let ev = b.get(i);
    let what = match EventKind::from_u8(ev.kind) {
        Some(EventKind::Block) => {
            let (major, minor) = latscope_event::dev_major_minor(ev.dev);
            let disk = h.disk_name(ev.dev).map_or_else(|| format!("{major}:{minor}"), str::to_string);
            format!("a block {} on {disk}", latscope_event::BlockOp::from_u16(ev.nr).name())
        }
        _ => {
            let name = latscope_event::syscall_name(ev.nr).unwrap_or("syscall");
            if ev.path.is_empty() {
                name.to_string()
            } else {
                format!("{name} on {}", ev.path)
            }
        }
    };
    format!("{what} by {} (pid {}) took {}", ev.comm, ev.pid, fmt_ns(ev.lat))
}

/// The condition's words before `over` or `>` outside parentheses: "p99 of fsync on /data",
/// "errors of (evt.latency > 1ms)".
fn subject_words(condition: &str) -> String {
    let mut depth = 0i32;
    for (i, c) in condition.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '>' if depth == 0 => return condition[..i].trim().to_string(),
            ' ' if depth == 0 && condition[i..].starts_with(" over ") => return condition[..i].trim().to_string(),
            _ => {}
        }
    }
    condition.trim().to_string()
}

impl Window {
    fn new(
        name: &str,
        measure: Measure,
        block: bool,
        filter: Option<&Filter>,
        window_ns: u64,
        condition: &str,
        header: &TraceHeader,
    ) -> Window {
        let secs = window_ns.div_ceil(1_000_000_000);
        let slot_ns = secs.div_ceil(MAX_SLOTS).max(1) * 1_000_000_000;
        let filter = filter.map(|f| {
            let mut pd = f.pushdown();
            pd.resolve_disks(|n| header.block_devices.iter().find(|d| d.name == n).map(|d| d.dev));
            (f.clone(), pd)
        });
        let kind = if block { EventKind::Block } else { EventKind::Syscall };
        let exact = filter.as_ref().is_none_or(|(_, pd)| pd.is_exact(kind));
        let what = subject_words(condition);
        Window {
            name: name.to_string(),
            measure,
            what,
            block,
            filter,
            exact,
            rows: Vec::new(),
            lats: Vec::new(),
            slot_ns,
            slots_per_window: window_ns.div_ceil(slot_ns).max(1),
            slots: VecDeque::new(),
            evaluated_to: 0,
            next_ok_ns: 0,
        }
    }

    fn slot(&mut self, index: u64) -> &mut Slot {
        let pct = matches!(self.measure, Measure::Percentile { .. });
        // Events come nearly in order: look from the newest slot back.
        let pos = self.slots.iter().rposition(|s| s.index <= index);
        match pos {
            Some(p) if self.slots[p].index == index => &mut self.slots[p],
            _ => {
                let at = pos.map_or(0, |p| p + 1);
                let hist = pct.then(|| Box::new(Histogram::new()));
                self.slots.insert(at, Slot { index, hist, count: 0 });
                &mut self.slots[at]
            }
        }
    }

    fn observe(&mut self, b: &EventBatch, ctx: &EvalContext, clock_ns: u64, fired: &mut Vec<Fire>) {
        self.select(b, ctx);
        // Slots older than the window of the oldest slot still to evaluate take no events.
        let oldest = self.evaluated_to.saturating_sub(self.slots_per_window);
        let pct = matches!(self.measure, Measure::Percentile { .. });
        // Events come nearly in order: rows are taken in runs that end in one slot, each run
        // recorded at once (one slot search and one histogram update per run, not per event).
        let rows = std::mem::take(&mut self.rows);
        let mut lats = std::mem::take(&mut self.lats);
        let mut run: Option<(u64, u64)> = None; // (slot index, events in the run)
        let (mut lo, mut hi) = (1, 0); // the run's slot, [lo, hi) ns: empty at first
        for &i in &rows {
            let i = i as usize;
            let end = b.ts[i].saturating_add(b.lat[i]);
            if end < lo || end >= hi {
                if let Some((index, n)) = run.take() {
                    self.add(index, n, &lats);
                }
                lats.clear();
                let index = end / self.slot_ns;
                (lo, hi) = (index * self.slot_ns, (index + 1).saturating_mul(self.slot_ns));
                if index < oldest {
                    continue;
                }
                run = Some((index, 0));
            }
            let Some((_, n)) = &mut run else { continue };
            *n += 1;
            if pct {
                lats.push(b.lat[i]);
            }
        }
        if let Some((index, n)) = run {
            self.add(index, n, &lats);
        }
        lats.clear();
        (self.rows, self.lats) = (rows, lats);
        // Slots before the clock's (less what may come late) are complete: evaluate the windows
        // that end with each.
        let current = clock_ns / self.slot_ns;
        if self.evaluated_to == 0 {
            // The first batch: windows start here (no window reaches before the recording).
            self.evaluated_to = self.slots.front().map_or(current, |s| s.index.min(current));
        }
        while self.evaluated_to < current {
            let last = self.evaluated_to;
            self.evaluated_to += 1;
            let first = (last + 1).saturating_sub(self.slots_per_window);
            let at_ns = (last + 1) * self.slot_ns;
            if at_ns < self.next_ok_ns {
                continue;
            }
            if let Some(reason) = self.evaluate(first, last) {
                self.next_ok_ns = at_ns.saturating_add(HOLD_OFF_NS);
                fired.push(Fire { trigger: self.name.clone(), at_ns, reason });
            }
        }
        let keep_from = self.evaluated_to.saturating_sub(self.slots_per_window + 1);
        while self.slots.front().is_some_and(|s| s.index < keep_from) {
            self.slots.pop_front();
        }
    }

    /// Count `n` events in slot `index`, of latencies `lats` (a percentile's).
    fn add(&mut self, index: u64, n: u64, lats: &[u64]) {
        let s = self.slot(index);
        s.count += n;
        if let Some(h) = &mut s.hist {
            h.record_slice(lats);
        }
    }

    /// The rows of `b` the window counts, into `self.rows`: tested column by column, the
    /// push-down first, the whole filter only where the push-down does not decide alone.
    fn select(&mut self, b: &EventBatch, ctx: &EvalContext) {
        let kind = if self.block { EventKind::Block as u8 } else { EventKind::Syscall as u8 };
        let rows = &mut self.rows;
        rows.clear();
        // A recorder's batches hold syscalls or the other kinds: mostly all or none.
        let of_kind = b.kind.iter().fold(0usize, |n, &k| n + usize::from(k == kind));
        if of_kind == 0 {
            return;
        }
        if of_kind == b.len() {
            rows.extend(0..b.len() as u32);
        } else {
            rows.extend((0..b.len() as u32).filter(|&i| b.kind[i as usize] == kind));
        }
        if matches!(self.measure, Measure::Rate { counted: Counted::Errors, .. }) {
            rows.retain(|&i| failed(b.ret[i as usize]));
        }
        let Some((f, pd)) = &self.filter else { return };
        retain_admitted(pd, b, rows, !self.block);
        if !self.exact {
            rows.retain(|&i| f.matches(b, i as usize, ctx));
        }
    }

    /// Whether the window of slots `first..=last` is above the threshold, and in words.
    fn evaluate(&self, first: u64, last: u64) -> Option<String> {
        let in_window = self.slots.iter().filter(|s| s.index >= first && s.index <= last);
        let window = fmt_ns(self.slots_per_window * self.slot_ns);
        match self.measure {
            Measure::Percentile { q, above_ns, min_count } => {
                let mut h = Histogram::new();
                let mut n = 0;
                for s in in_window {
                    if let Some(x) = &s.hist {
                        h.merge(x);
                        n += s.count;
                    }
                }
                if n < min_count {
                    return None;
                }
                let v = h.value_at_quantile(q)?;
                (v > above_ns).then(|| {
                    format!("{} over {window} was {} (> {}; {n} calls)", self.what, fmt_ns(v), fmt_ns(above_ns))
                })
            }
            Measure::Rate { per_sec, .. } => {
                let n: u64 = in_window.map(|s| s.count).sum();
                let secs = (self.slots_per_window * self.slot_ns) as f64 / 1e9;
                let rate = n as f64 / secs;
                (rate > per_sec)
                    .then(|| format!("{} at {rate:.1}/s over {window} (> {per_sec}/s; {n} in all)", self.what))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::Event;

    const S: u64 = 1_000_000_000;

    fn watch(t: &str) -> Watch {
        Watch::new(&[Trigger::parse(t, "t").unwrap()], &TraceHeader::default(), S)
    }

    /// `per_sec` calls of `comm` a second for `secs` seconds from `from_s`, the first
    /// `slow_per_1000` of each thousand taking 30 ms, the rest 1 ms; every `fail_every`-th
    /// fails (0: none). One batch a second, as a recorder flushes.
    fn second(from_s: u64, per_sec: u64, slow_per_1000: u64, fail_every: u64, comm: &str) -> EventBatch {
        let nr = latscope_event::syscall_nr("clock_nanosleep").unwrap();
        let mut b = EventBatch::with_capacity(per_sec as usize);
        for i in 0..per_sec {
            let lat = if i % 1000 < slow_per_1000 { 30_000_000 } else { 1_000_000 };
            let ret = if fail_every > 0 && i % fail_every == 0 { -2 } else { 0 };
            let ts = from_s * S + i * (S / per_sec);
            b.push(&Event { kind: 0, ts, lat, nr, ret, pid: 9, comm: comm.into(), ..Default::default() });
        }
        b
    }

    #[test]
    fn a_percentile_fires_above_its_threshold_and_not_below_it() {
        let mut w = watch("p99 of (proc.name = db) over 3s > 20ms");
        // 1 % of calls at 30 ms is the 99th percentile's edge: 0.5 % keeps p99 at 1 ms.
        let mut fired = Vec::new();
        for s in 100..110 {
            fired.extend(w.observe(&second(s, 1000, 5, 0, "db")));
        }
        assert!(fired.is_empty(), "p99 is 1 ms: {fired:?}");
        // 3 % at 30 ms: p99 = 30 ms, from the first whole window that holds them.
        for s in 110..116 {
            fired.extend(w.observe(&second(s, 1000, 30, 0, "db")));
        }
        assert!(!fired.is_empty());
        let f = &fired[0];
        assert!(f.at_ns >= 111 * S && f.at_ns <= 114 * S, "{f:?}");
        assert!(f.reason.contains("was 30.") && f.reason.contains("> 20.0ms"), "{}", f.reason);
        // Other processes' slow calls are not its subject; too few calls decide nothing.
        let mut w = watch("p99 of (proc.name = db) over 3s > 20ms");
        let mut fired = Vec::new();
        for s in 100..110 {
            fired.extend(w.observe(&second(s, 1000, 30, 0, "web")));
            fired.extend(w.observe(&second(s, 20, 1000, 0, "db")));
        }
        assert!(fired.is_empty(), "{fired:?}");
    }

    #[test]
    fn a_rate_fires_above_its_threshold_and_not_below_it() {
        let mut w = watch("errors of (proc.name = db) > 100/s");
        let mut fired = Vec::new();
        for s in 100..105 {
            // 1000 calls, every 20th fails: 50 errors a second.
            fired.extend(w.observe(&second(s, 1000, 0, 20, "db")));
        }
        assert!(fired.is_empty(), "{fired:?}");
        for s in 105..108 {
            // every 5th: 200 a second.
            fired.extend(w.observe(&second(s, 1000, 0, 5, "db")));
        }
        assert!(!fired.is_empty());
        assert!(fired[0].at_ns == 106 * S, "{:?}", fired[0]);
        assert!(fired[0].reason.contains("200.0/s"), "{}", fired[0].reason);
        // Reports at most once a second of event time.
        assert!(fired.windows(2).all(|w| w[1].at_ns >= w[0].at_ns + S));
    }

    #[test]
    fn a_window_counts_what_its_filter_matches_tested_on_columns() {
        // Calls of three processes, several syscalls, some on files, and block requests.
        let names = ["db", "web", "cron"];
        let nrs = ["read", "write", "fsync"].map(|n| latscope_event::syscall_nr(n).unwrap());
        let mut b = EventBatch::with_capacity(3000);
        for i in 0..3000u64 {
            let kind = if i % 97 == 0 { EventKind::Block as u8 } else { 0 };
            b.push(&Event {
                kind,
                ts: 100 * S + i * 1000,
                lat: (i % 50) * 1_000_000,
                nr: nrs[(i % 3) as usize],
                ret: if i % 7 == 0 { -5 } else { 0 },
                pid: 9 + (i % 4) as u32,
                tid: 9 + (i % 8) as u32,
                comm: names[(i % 5 % 3) as usize].into(),
                path: if i % 2 == 0 { format!("/data/f{}", i % 4) } else { String::new() },
                ..Default::default()
            });
        }
        let header = TraceHeader::default();
        let mut ctx = EvalContext::new(&header);
        ctx.observe(&b);
        for subject in [
            "proc.name = db",
            "proc.name in (db, cron) and evt.type = read",
            "proc.pid = 10 and evt.latency > 20ms",
            "evt.rawres < 0 and proc.pid in (9, 11)",
            "proc.name = web or evt.type = fsync",
            "thread.tid = 12",
        ] {
            for t in [format!("p99 of ({subject}) over 3s > 20ms"), format!("errors of ({subject}) > 10/s")] {
                let mut w = Watch::new(&[Trigger::parse(&t, "t").unwrap()], &header, S);
                let win = &mut w.windows[0];
                win.select(&b, &ctx);
                let f = Filter::parse(subject).unwrap();
                let errors = t.starts_with("errors");
                let want: Vec<u32> = (0..b.len())
                    .filter(|&i| b.kind[i] == 0 && (!errors || failed(b.ret[i])) && f.matches(&b, i, &ctx))
                    .map(|i| i as u32)
                    .collect();
                assert!(!want.is_empty(), "{t}");
                assert_eq!(win.rows, want, "{t}");
            }
        }
    }

    #[test]
    fn a_window_counts_each_event_in_the_slot_its_call_ended_in() {
        let mut w = watch("calls of (proc.name = db) > 1000/s over 2s");
        // Two batches of 1500 calls a second, the second reaching back into the first's second.
        let mut fired = w.observe(&second(100, 1500, 0, 0, "db"));
        let mut late = second(100, 1500, 0, 0, "db");
        late.append(&second(101, 1500, 0, 0, "db"));
        fired.extend(w.observe(&late));
        let counts: Vec<(u64, u64)> = w.windows[0].slots.iter().map(|s| (s.index, s.count)).collect();
        let mut want = std::collections::BTreeMap::new();
        for b in [second(100, 1500, 0, 0, "db"), late] {
            for i in 0..b.len() {
                *want.entry(b.end(i) / S).or_insert(0) += 1;
            }
        }
        assert_eq!(counts, want.into_iter().collect::<Vec<_>>());
        assert_eq!(counts.iter().map(|c| c.1).sum::<u64>(), 4500);
        assert!(fired.is_empty() || fired[0].reason.contains("/s"), "{fired:?}");
    }

    #[test]
    fn the_help_examples_slow_call_trigger_leaves_idle_waits_out() {
        // `record --help`'s example: a slow call that was work or a wait on someone, not a
        // process waiting for a child, a timer or a request.
        let mut w = watch("slow: evt.latency > 150ms and evt.wait in (work, on_someone)");
        let mut b = EventBatch::with_capacity(8);
        for (name, why_io) in [("wait4", 0), ("futex", 0), ("clock_nanosleep", 0), ("epoll_wait", 0), ("fsync", 1)] {
            let lat = 400_000_000;
            let nr = latscope_event::syscall_nr(name).unwrap();
            b.push(&Event {
                kind: 0,
                ts: 100 * S,
                lat,
                nr,
                pid: 9,
                comm: "db".into(),
                why_io: why_io * lat,
                ..Default::default()
            });
        }
        let fired = w.observe(&b);
        assert_eq!(fired.len(), 1, "{fired:?}");
        assert!(fired[0].reason.starts_with("fsync by db"), "{}", fired[0].reason);
    }

    #[test]
    fn a_call_trigger_finds_the_one_slow_call_among_many() {
        let mut w = watch("slow: evt.latency > 100ms and proc.name = db");
        let mut b = second(100, 5000, 0, 0, "db");
        let mut slow = b.get(1234);
        slow.lat = 150_000_000;
        slow.path = "/data/x".into();
        b.push(&slow);
        let mut other = b.get(1);
        other.lat = 500_000_000;
        other.comm = "web".into();
        b.push(&other);
        let fired = w.observe(&b);
        assert_eq!(fired.len(), 1, "{fired:?}");
        assert_eq!(fired[0].at_ns, slow.ts + slow.lat);
        assert_eq!(fired[0].reason, "clock_nanosleep on /data/x by db (pid 9) took 150ms");
    }
}

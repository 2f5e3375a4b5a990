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
        let what = subject_words(condition);
        Window {
            name: name.to_string(),
            measure,
            what,
            block,
            filter,
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
        let kind = if self.block { EventKind::Block as u8 } else { EventKind::Syscall as u8 };
        let errors = matches!(self.measure, Measure::Rate { counted: Counted::Errors, .. });
        // Slots older than the window of the oldest slot still to evaluate take no events.
        let oldest = self.evaluated_to.saturating_sub(self.slots_per_window);
        for i in 0..b.len() {
            if b.kind[i] != kind || (errors && !failed(b.ret[i])) {
                continue;
            }
            if let Some((f, pd)) = &self.filter {
                if !pd.admits(b, i) || !f.matches(b, i, ctx) {
                    continue;
                }
            }
            let end = b.ts[i].saturating_add(b.lat[i]);
            let index = end / self.slot_ns;
            if index < oldest {
                continue;
            }
            let lat = b.lat[i];
            let s = self.slot(index);
            s.count += 1;
            if let Some(h) = &mut s.hist {
                h.record(lat);
            }
        }
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

//! The one rule for what a latency view counts, shared by every view: idle time is left out.
//!
//! A wait whose latency is the time the caller chose to wait, or outside work took to arrive,
//! would otherwise rank first in "what is slow", fill the top rows of a heat map and pull every
//! mean above the 99th percentile of the real work: a thread pool parked in futex, an event loop
//! in epoll_wait, an acceptor's poll. A wait that another thread of the recording ended (a
//! mutex's release, a condition signalled, a pipe written) is not idle: its caller waited on
//! someone, and it counts with the work. The rule ([`latscope_event::waits::wait_kind`]) follows
//! the wake-up where the recording kept it (`record --why`), and the syscall's name where it did
//! not.
//!
//! Every view — `heatmap`, `hist`, `top`, `timeline`, `spectrogram`, `why`, `top --by cause`, the
//! dashboard — asks [`Counted::counts`] (or [`LeftOut::classify`]) whether it counts an event, so
//! that they all count the same events, and says in its header line what it counted and left
//! out ([`Counted::headline`]: `31046 syscall events (8437 idle waits left out)`), and under its
//! table how many waits of each kind it saw and how long they took ([`LeftOut::note`]). `--waits`
//! (the dashboard's "blocking waits" box) counts the idle ones too. The rule reads the columns
//! [`columns`]; a view that projects its scan asks for them.

use latscope_event::units::fmt_ns_f;
pub use latscope_event::waits::{is_idle, wait_kind, WaitKind};
use latscope_event::{op_name, wake_flags, EventBatch, EventKind};
use serde_json::{json, Value};
use std::fmt::Write;

/// The columns the rule reads (by `EventBatch` field name): a view that projects its columns
/// adds them.
pub fn columns() -> impl Iterator<Item = &'static str> {
    ["kind", "nr", "lat", "wake_flags"].into_iter().chain(latscope_event::WHY_COLUMNS)
}

/// The flag that includes the waits, named in every note.
pub const WAITS_FLAG: &str = "--waits";

/// The syscalls idle by their name ([`latscope_event::waits::is_wait_syscall`]), for a source
/// that cannot apply the rule per event (histograms counted in the kernel): such a source leaves
/// all of them out (`latscope_live::SessionBuilder::count_without`) and its views say so.
pub fn wait_syscalls() -> Vec<u16> {
    (0..latscope_event::syscalls::syscall_count() as u16)
        .filter(|&nr| latscope_event::waits::is_wait_syscall(nr))
        .collect()
}

/// What a view counts: every event of its kind, less the idle waits unless they are asked for
/// (`--waits`); the waits seen are counted by kind, those left out by syscall, for the header
/// line and the notes.
#[derive(Debug, Clone, Default)]
pub struct Counted {
    with_waits: bool,
    left_out: LeftOut,
}

impl Counted {
    /// The rule, with the idle waits counted too when `with_waits`.
    pub fn new(with_waits: bool) -> Self {
        Counted { with_waits, left_out: LeftOut::default() }
    }

    /// Whether the idle waits are counted (`--waits`).
    pub fn with_waits(&self) -> bool {
        self.with_waits
    }

    /// Whether the view counts event `i`; a wait is remembered by its kind, and as left out when
    /// it is.
    #[inline]
    pub fn counts(&mut self, b: &EventBatch, i: usize) -> bool {
        !self.left_out.classify(b, i, self.with_waits)
    }

    /// [`Counted::counts`] with the rule of `b` decided once ([`BatchRule::of`]): the same
    /// answer, cheaper in a loop over a batch.
    #[inline]
    pub fn counts_in(&mut self, rule: BatchRule, b: &EventBatch, i: usize) -> bool {
        !self.left_out.classify_in(rule, b, i, self.with_waits)
    }

    /// The waits seen and left out.
    pub fn left_out(&self) -> &LeftOut {
        &self.left_out
    }

    /// Forgets the waits seen (live views: one table per interval).
    pub fn clear(&mut self) {
        self.left_out.clear();
    }

    /// The header line of a view that counted `n` events of `kind`: `31046 syscall events (8437
    /// idle waits left out)`, `... (idle waits included)` with `--waits`, `2983 block I/O events`.
    pub fn headline(&self, n: u64, kind: EventKind) -> String {
        let noun = if kind == EventKind::Block { "block I/O" } else { "syscall" };
        let mut s = format!("{n} {noun} events");
        if kind == EventKind::Syscall {
            let w = self.left_out.count();
            if self.with_waits {
                s.push_str(" (idle waits included)");
            } else if w > 0 {
                let _ = write!(s, " ({w} idle waits left out)");
            }
        }
        s
    }

    /// The rule and what it left out, for JSON: `{"idle_waits": "left out" | "included",
    /// "left_out": {...}}`.
    pub fn to_json(&self) -> Value {
        json!({
            "idle_waits": if self.with_waits { "included" } else { "left out" },
            "left_out": if self.with_waits { Value::Null } else { self.left_out.to_json() },
        })
    }
}

/// How the calls of one batch are classified, decided once per batch: a batch with no wake-up
/// breakdown (no event recorded with `--why` data) goes by the syscall alone, a table lookup per
/// call; any other by [`wait_kind`] per call. Either way the answer is [`wait_kind`]'s.
#[derive(Debug, Clone, Copy)]
pub enum BatchRule {
    /// No breakdown in the batch: whether each syscall number is a blocking wait.
    ByName(&'static [bool]),
    /// Some calls have a breakdown: [`wait_kind`] per call.
    PerEvent,
}

impl BatchRule {
    /// The rule for batch `b` (one pass over its `wake_flags`).
    pub fn of(b: &EventBatch) -> BatchRule {
        // A fold rather than `any`: no early exit, so the compiler vectorises it.
        let known = b.wake_flags.iter().fold(0u8, |a, &f| a | f) & wake_flags::KNOWN;
        if known == 0 {
            BatchRule::ByName(latscope_event::waits::wait_syscall_table())
        } else {
            BatchRule::PerEvent
        }
    }

    /// Whether the rule of batch `b` reads the calls' breakdowns ([`latscope_event::WHY_COLUMNS`]):
    /// only when some call of it has one. A batch decoded without those columns is classified
    /// right when this is false.
    pub fn reads_breakdown(b: &EventBatch) -> bool {
        matches!(BatchRule::of(b), BatchRule::PerEvent)
    }

    /// Whether syscall `i` of the batch the rule was decided for is an idle wait: what
    /// [`Counted::counts_in`] leaves out (without `--waits`), for a view that keeps no account
    /// of the waits it left out.
    #[inline]
    pub fn is_idle(self, b: &EventBatch, i: usize) -> bool {
        match self {
            BatchRule::ByName(t) => t.get(b.nr[i] as usize).copied().unwrap_or(false),
            BatchRule::PerEvent => wait_kind(b, i).is_idle(),
        }
    }

    /// The kind of event `i` of the batch the rule was decided for (a syscall).
    #[inline]
    fn kind(self, b: &EventBatch, i: usize) -> WaitKind {
        match self {
            BatchRule::ByName(t) if t.get(b.nr[i] as usize).copied().unwrap_or(false) => WaitKind::ByName,
            BatchRule::ByName(_) => WaitKind::Work,
            BatchRule::PerEvent => wait_kind(b, i),
        }
    }
}

/// The waits a view saw, by kind, and the idle ones it left out: how many, how long in all, and
/// of which syscalls.
#[derive(Debug, Clone, Default)]
pub struct LeftOut {
    /// Per syscall number: idle waits left out and their summed latency (ns).
    by_nr: Vec<(u16, u64, u128)>,
    /// Per [`WaitKind`] (its index in [`WaitKind::ALL`]): waits seen and their latency (ns).
    kinds: [(u64, u128); 5],
}

impl LeftOut {
    /// Classifies event `i` (a syscall) by [`wait_kind`] and counts it; true when the view leaves
    /// it out (it is idle and `with_waits` is off).
    #[inline]
    pub fn classify(&mut self, b: &EventBatch, i: usize, with_waits: bool) -> bool {
        self.classify_in(BatchRule::PerEvent, b, i, with_waits)
    }

    /// [`LeftOut::classify`] with the rule of `b` decided once ([`BatchRule::of`]).
    #[inline]
    pub fn classify_in(&mut self, rule: BatchRule, b: &EventBatch, i: usize, with_waits: bool) -> bool {
        if b.kind[i] != EventKind::Syscall as u8 {
            return false;
        }
        let k = rule.kind(b, i);
        if k == WaitKind::Work {
            return false;
        }
        self.count_wait(b, i, k, with_waits)
    }

    /// Counts wait `i` of kind `k`; true when it is left out.
    #[inline(never)]
    fn count_wait(&mut self, b: &EventBatch, i: usize, k: WaitKind, with_waits: bool) -> bool {
        let lat = b.lat[i];
        let t = &mut self.kinds[k as usize];
        t.0 += 1;
        t.1 += u128::from(lat);
        let out = !with_waits && k.is_idle();
        if out {
            let nr = b.nr[i];
            match self.by_nr.iter_mut().find(|e| e.0 == nr) {
                Some(e) => {
                    e.1 += 1;
                    e.2 += u128::from(lat);
                }
                None => self.by_nr.push((nr, 1, u128::from(lat))),
            }
        }
        out
    }

    /// Waits left out.
    pub fn count(&self) -> u64 {
        self.by_nr.iter().map(|e| e.1).sum()
    }

    /// Their summed latency, ns.
    pub fn total_ns(&self) -> u128 {
        self.by_nr.iter().map(|e| e.2).sum()
    }

    /// The waits seen of kind `k`: how many, and their summed latency (ns).
    pub fn kind(&self, k: WaitKind) -> (u64, u128) {
        self.kinds[k as usize]
    }

    /// Forgets them (live views: one table per interval).
    pub fn clear(&mut self) {
        self.by_nr.clear();
        self.kinds = Default::default();
    }

    /// The syscalls left out, most time first, with their counts: `futex 812, epoll_wait 40`.
    fn names(&self, most: usize) -> String {
        let mut v = self.by_nr.clone();
        v.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        let mut s: Vec<String> =
            v.iter().take(most).map(|e| format!("{} {}", op_name(EventKind::Syscall as u8, e.0), e.1)).collect();
        if v.len() > most {
            s.push("...".into());
        }
        s.join(", ")
    }

    /// `30 ended by their own timeout (600ms), 10 by outside work (4.10s)`: the idle kinds seen.
    fn idle_kinds(&self) -> String {
        let words = [
            (WaitKind::Timeout, "ended by their own timeout"),
            (WaitKind::Outside, "by outside work"),
            (WaitKind::ByName, "with no breakdown to say how they ended"),
        ];
        words
            .iter()
            .filter(|(k, _)| self.kind(*k).0 > 0)
            .map(|(k, w)| format!("{} {w} ({})", self.kind(*k).0, fmt_ns_f(self.kind(*k).1 as f64)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The line a view prints under its table, if it saw any wait: the waits on other threads
    /// ranked with the work, and the idle ones left out (how many of each kind, how long, of
    /// which syscalls) and how to include them (`--waits`); with `--waits`, what was ranked.
    pub fn note(&self) -> Option<String> {
        self.note_with(&format!("{WAITS_FLAG} includes them"))
    }

    /// [`LeftOut::note`] with another way to include them (`how`), for pages without flags.
    pub fn note_with(&self, how: &str) -> Option<String> {
        let (on, on_ns) = self.kind(WaitKind::OnSomeone);
        let ranked_on = (on > 0).then(|| {
            format!("{on} waits on another thread of the recording ranked with the work ({})", fmt_ns_f(on_ns as f64))
        });
        let n = self.count();
        if n > 0 {
            let mut s = format!(
                "left out: {n} blocking waits ({}; {} in all) as idle time, not work: {}",
                self.names(4),
                fmt_ns_f(self.total_ns() as f64),
                self.idle_kinds()
            );
            if let Some(r) = ranked_on {
                s.push_str("; ");
                s.push_str(&r);
            }
            s.push_str("; ");
            s.push_str(how);
            return Some(s);
        }
        let idle: u64 = [WaitKind::Timeout, WaitKind::Outside, WaitKind::ByName].iter().map(|k| self.kind(*k).0).sum();
        match (idle, ranked_on) {
            (0, None) => None,
            (0, Some(r)) => Some(r),
            (_, r) => Some(format!(
                "idle waits ranked with the work ({WAITS_FLAG}): {}{}",
                self.idle_kinds(),
                r.map(|r| format!("; {r}")).unwrap_or_default()
            )),
        }
    }

    /// The same for JSON: `{"count", "total_ns", "by_syscall": {name: count}, "include_with",
    /// "kinds": {kind: {"count", "total_ns"}}}` (the kinds of [`WaitKind::name`] seen).
    pub fn to_json(&self) -> Value {
        let by: serde_json::Map<String, Value> =
            self.by_nr.iter().map(|e| (op_name(EventKind::Syscall as u8, e.0), json!(e.1))).collect();
        json!({"count": self.count(), "total_ns": self.total_ns() as f64, "by_syscall": by, "include_with": WAITS_FLAG,
            "kinds": self.kinds_json()})
    }

    /// The waits seen by kind: `{"on_someone": {"count", "total_ns"}, "idle_timeout": ...}`.
    pub fn kinds_json(&self) -> Value {
        let m: serde_json::Map<String, Value> = WaitKind::ALL
            .iter()
            .filter(|k| **k != WaitKind::Work)
            .map(|k| (k.name().to_string(), json!({"count": self.kind(*k).0, "total_ns": self.kind(*k).1 as f64})))
            .collect();
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{syscall_nr, wake_flags, Event};

    #[test]
    fn waits_without_a_breakdown_are_idle_by_their_syscall() {
        let mut b = EventBatch::default();
        for (kind, name) in [(0, "futex"), (0, "epoll_wait"), (0, "read"), (1, "")] {
            let nr = if kind == 0 { syscall_nr(name).unwrap() } else { 0 };
            b.push(&Event { kind, nr, lat: 1_000_000, ..Default::default() });
        }
        let w: Vec<bool> = (0..b.len()).map(|i| is_idle(&b, i)).collect();
        assert_eq!(w, [true, true, false, false]);
        let mut l = LeftOut::default();
        assert!(l.note().is_none());
        assert!(l.classify(&b, 0, false) && l.classify(&b, 0, false) && l.classify(&b, 1, false));
        assert!(!l.classify(&b, 2, false));
        let n = l.note().unwrap();
        assert!(n.contains("3 blocking waits (futex 2, epoll_wait 1; 3.00ms in all)") && n.contains("--waits"), "{n}");
        assert!(n.contains("3 with no breakdown to say how they ended (3.00ms)"), "{n}");
        assert_eq!(l.to_json()["by_syscall"]["futex"], 2);
        assert_eq!(l.to_json()["kinds"]["idle_by_syscall"]["count"], 3);
    }

    /// With a breakdown, the wake-up decides: a futex released by a thread of the recording is
    /// ranked (and said to be), a poll its timeout ended is left out; both are counted, with
    /// `--waits` too.
    #[test]
    fn the_note_counts_each_kind_of_wait() {
        let mut b = EventBatch::default();
        let k = wake_flags::KNOWN;
        let on = Event {
            nr: syscall_nr("futex").unwrap(),
            lat: 2_000_000,
            why_lock: 2_000_000,
            waker_ctx: 1,
            wake_flags: k | wake_flags::TRACED,
            ..Default::default()
        };
        let timeout = Event {
            nr: syscall_nr("poll").unwrap(),
            lat: 500_000_000,
            why_timer: 500_000_000,
            waker_ctx: 2,
            wake_flags: k,
            ..Default::default()
        };
        b.push(&on);
        b.push(&timeout);
        let mut l = LeftOut::default();
        assert!(!l.classify(&b, 0, false) && l.classify(&b, 1, false));
        let n = l.note().unwrap();
        assert!(n.contains("left out: 1 blocking waits (poll 1; 500ms in all)"), "{n}");
        assert!(n.contains("1 ended by their own timeout (500ms)"), "{n}");
        assert!(n.contains("1 waits on another thread of the recording ranked with the work (2.00ms)"), "{n}");
        let mut l = LeftOut::default();
        assert!(!l.classify(&b, 0, true) && !l.classify(&b, 1, true));
        let n = l.note().unwrap();
        assert!(n.starts_with("idle waits ranked with the work (--waits): 1 ended by their own timeout"), "{n}");
    }

    /// The rule decided once per batch gives every call the answer of [`wait_kind`]: a batch
    /// with breakdowns (some calls known, some not) and the same calls with none.
    #[test]
    fn the_rule_decided_per_batch_agrees_with_the_rule_per_call() {
        let k = wake_flags::KNOWN;
        let mut mixed = EventBatch::default();
        let mut plain = EventBatch::default();
        for (n, name) in ["futex", "read", "poll", "epoll_wait", "write", "wait4", "futex"].iter().enumerate() {
            let nr = syscall_nr(name).unwrap();
            let lat = 1_000_000 + n as u64;
            plain.push(&Event { nr, lat, ..Default::default() });
            // Every other call with a breakdown: a timer wait its timeout ended, or a lock
            // another thread of the recording released.
            let e = match n % 3 {
                0 => Event { nr, lat, why_timer: lat, waker_ctx: 2, wake_flags: k, ..Default::default() },
                1 => Event {
                    nr,
                    lat,
                    why_lock: lat,
                    waker_ctx: 1,
                    wake_flags: k | wake_flags::TRACED,
                    ..Default::default()
                },
                _ => Event { nr, lat, ..Default::default() },
            };
            mixed.push(&e);
        }
        mixed.push(&Event { kind: EventKind::Block as u8, lat: 5, ..Default::default() });
        plain.push(&Event { kind: EventKind::Block as u8, lat: 5, ..Default::default() });
        assert!(matches!(BatchRule::of(&plain), BatchRule::ByName(_)));
        assert!(matches!(BatchRule::of(&mixed), BatchRule::PerEvent));
        for b in [&plain, &mixed] {
            for with_waits in [false, true] {
                let (mut per_call, mut per_batch) = (Counted::new(with_waits), Counted::new(with_waits));
                let rule = BatchRule::of(b);
                for i in 0..b.len() {
                    let counts = per_call.counts(b, i);
                    assert_eq!(counts, per_batch.counts_in(rule, b, i), "{i}");
                    if !with_waits && b.kind[i] == EventKind::Syscall as u8 {
                        assert_eq!(rule.is_idle(b, i), !counts, "{i}");
                    }
                    let by_rule = if b.kind[i] == EventKind::Syscall as u8 { rule.kind(b, i) } else { WaitKind::Work };
                    assert_eq!(by_rule, wait_kind(b, i), "{i}");
                }
                assert_eq!(per_call.to_json(), per_batch.to_json());
            }
        }
        // The plain batch leaves out its five waits by name; the mixed one its three timeouts and
        // two by name, and ranks the two waits another thread ended.
        let mut c = Counted::new(false);
        let rule = BatchRule::of(&plain);
        assert_eq!((0..plain.len()).filter(|&i| c.counts_in(rule, &plain, i)).count(), 3);
        assert_eq!(c.left_out().count(), 5);
        let mut c = Counted::new(false);
        let rule = BatchRule::of(&mixed);
        assert_eq!((0..mixed.len()).filter(|&i| c.counts_in(rule, &mixed, i)).count(), 3);
        assert_eq!(c.left_out().kind(WaitKind::OnSomeone).0, 2);
        assert_eq!(c.left_out().kind(WaitKind::Timeout).0, 3);
        assert_eq!(c.left_out().count(), 5);
    }

    #[test]
    fn the_header_line_says_what_a_view_counted_and_left_out() {
        let mut b = EventBatch::default();
        for name in ["futex", "read", "futex", "epoll_wait"] {
            b.push(&Event { kind: 0, nr: syscall_nr(name).unwrap(), lat: 1000, ..Default::default() });
        }
        let mut c = Counted::new(false);
        let n = (0..b.len()).filter(|&i| c.counts(&b, i)).count() as u64;
        assert_eq!(c.headline(n, EventKind::Syscall), "1 syscall events (3 idle waits left out)");
        let mut all = Counted::new(true);
        let n = (0..b.len()).filter(|&i| all.counts(&b, i)).count() as u64;
        assert_eq!(all.headline(n, EventKind::Syscall), "4 syscall events (idle waits included)");
        assert_eq!(Counted::new(false).headline(7, EventKind::Block), "7 block I/O events");
        assert_eq!(c.to_json()["left_out"]["count"], 3);
    }
}

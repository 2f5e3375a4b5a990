//! The one rule for what a latency view counts, shared by every view: idle waits are left out.
//!
//! Blocking waits — the syscalls of [`SysClass::Wait`]: nanosleep, clock_nanosleep, poll, ppoll,
//! select, pselect6, epoll_wait, futex, wait4, waitid, pause, io_getevents, ... — last as long as
//! their caller chooses to wait, not as long as the system makes it. A thread pool parked in
//! futex or an event loop in epoll_wait would otherwise rank first in "what is slow", fill the
//! top rows of a heat map and pull every mean above the 99th percentile of the real work.
//!
//! Every view — `heatmap`, `hist`, `top`, `timeline`, `spectrogram`, `why`, the dashboard — asks
//! [`Counted::counts`] (or [`is_wait`]) whether it counts an event, so that they all count the
//! same events, and says in its header line what it counted and left out
//! ([`Counted::headline`]: `31046 syscall events (8437 idle waits left out)`). `--waits` (the
//! dashboard's "blocking waits" box) counts the waits too. The rule reads the columns
//! [`COLUMNS`]; a view that projects its scan asks for them.

use latscope_event::syscalls::desc;
use latscope_event::units::fmt_ns_f;
use latscope_event::{op_name, EventBatch, EventKind, SysClass};
use serde_json::{json, Value};
use std::fmt::Write;

/// Whether event `i` is an idle wait: THE rule every view applies (today: a syscall of the wait
/// class; the event is passed whole so that the rule may look at more of it).
#[inline]
pub fn is_wait(b: &EventBatch, i: usize) -> bool {
    b.kind[i] == EventKind::Syscall as u8 && desc(b.nr[i]).class == SysClass::Wait
}

/// The syscalls [`is_wait`] may take for idle waits, for a source that cannot apply the rule per
/// event (histograms counted in the kernel): such a source leaves all of them out
/// (`latscope_live::SessionBuilder::count_without`) and its views say so.
pub fn wait_syscalls() -> Vec<u16> {
    (0..latscope_event::syscalls::syscall_count() as u16).filter(|&nr| desc(nr).class == SysClass::Wait).collect()
}

/// The columns [`is_wait`] reads (by `EventBatch` field name): a view projecting its scan adds
/// them.
pub const COLUMNS: &[&str] = &["kind", "nr"];

/// The flag that includes the waits, named in every note.
pub const WAITS_FLAG: &str = "--waits";

/// What a view counts: every event of its kind, less the idle waits unless they are asked for
/// (`--waits`); the waits left out are counted by syscall, for the header line and the notes.
#[derive(Debug, Clone, Default)]
pub struct Counted {
    with_waits: bool,
    left_out: LeftOut,
}

impl Counted {
    /// The rule, with the waits counted too when `with_waits`.
    pub fn new(with_waits: bool) -> Self {
        Counted { with_waits, left_out: LeftOut::default() }
    }

    /// Whether the waits are counted (`--waits`).
    pub fn with_waits(&self) -> bool {
        self.with_waits
    }

    /// Whether the view counts event `i`; a wait it leaves out is remembered as left out.
    #[inline]
    pub fn counts(&mut self, b: &EventBatch, i: usize) -> bool {
        if self.with_waits || !is_wait(b, i) {
            return true;
        }
        self.left_out.add(b, i);
        false
    }

    /// The waits left out.
    pub fn left_out(&self) -> &LeftOut {
        &self.left_out
    }

    /// Forgets the waits left out (live views: one table per interval).
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

/// The blocking waits a view left out: how many, how long in all, and of which syscalls.
#[derive(Debug, Clone, Default)]
pub struct LeftOut {
    /// Per syscall number: events and their summed latency (ns).
    by_nr: Vec<(u16, u64, u128)>,
}

impl LeftOut {
    /// Counts event `i` as left out.
    #[inline]
    pub fn add(&mut self, b: &EventBatch, i: usize) {
        let (nr, lat) = (b.nr[i], b.lat[i]);
        match self.by_nr.iter_mut().find(|e| e.0 == nr) {
            Some(e) => {
                e.1 += 1;
                e.2 += u128::from(lat);
            }
            None => self.by_nr.push((nr, 1, u128::from(lat))),
        }
    }

    /// Waits left out.
    pub fn count(&self) -> u64 {
        self.by_nr.iter().map(|e| e.1).sum()
    }

    /// Their summed latency, ns.
    pub fn total_ns(&self) -> u128 {
        self.by_nr.iter().map(|e| e.2).sum()
    }

    /// Forgets them (live views: one table per interval).
    pub fn clear(&mut self) {
        self.by_nr.clear();
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

    /// The line a view prints under its table, if it left anything out: what, how much time,
    /// why, and how to include it (`--waits`).
    pub fn note(&self) -> Option<String> {
        self.note_with(&format!("{WAITS_FLAG} includes them"))
    }

    /// [`LeftOut::note`] with another way to include them (`how`), for pages without flags.
    pub fn note_with(&self, how: &str) -> Option<String> {
        let n = self.count();
        (n > 0).then(|| {
            format!(
                "left out: {n} idle waits ({}; {} in all): time the caller chose to wait, not work; {how}",
                self.names(4),
                fmt_ns_f(self.total_ns() as f64)
            )
        })
    }

    /// The same for JSON: `{"count", "total_ns", "by_syscall": {name: count}, "include_with"}`.
    pub fn to_json(&self) -> Value {
        let by: serde_json::Map<String, Value> =
            self.by_nr.iter().map(|e| (op_name(EventKind::Syscall as u8, e.0), json!(e.1))).collect();
        json!({"count": self.count(), "total_ns": self.total_ns() as f64, "by_syscall": by, "include_with": WAITS_FLAG})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{syscall_nr, Event};

    #[test]
    fn waits_are_syscalls_of_the_wait_class_only() {
        let mut b = EventBatch::default();
        for (kind, name) in [(0, "futex"), (0, "epoll_wait"), (0, "read"), (1, "")] {
            let nr = if kind == 0 { syscall_nr(name).unwrap() } else { 0 };
            b.push(&Event { kind, nr, lat: 1_000_000, ..Default::default() });
        }
        let w: Vec<bool> = (0..b.len()).map(|i| is_wait(&b, i)).collect();
        assert_eq!(w, [true, true, false, false]);
        let mut l = LeftOut::default();
        assert!(l.note().is_none());
        l.add(&b, 0);
        l.add(&b, 0);
        l.add(&b, 1);
        let n = l.note().unwrap();
        assert!(n.contains("3 idle waits (futex 2, epoll_wait 1; 3.00ms in all)") && n.contains("--waits"), "{n}");
        assert_eq!(l.to_json()["by_syscall"]["futex"], 2);
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

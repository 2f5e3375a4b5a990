//! The one definition of an idle wait, shared by every view that ranks or summarises latency.
//!
//! Blocking waits — the syscalls of [`SysClass::Wait`]: nanosleep, clock_nanosleep, poll, ppoll,
//! select, pselect6, epoll_wait, futex, wait4, waitid, pause, io_getevents, ... — last as long as
//! their caller chooses to wait, not as long as the system makes it. A thread pool parked in
//! futex or an event loop in epoll_wait would otherwise rank first in "what is slow" and pull
//! every mean above the 99th percentile of the real work. `timeline` leaves them out of its
//! latency statistics; `top`, `hist` and the dashboard's drill-down leave them out of their rows;
//! each says how many it left out and that `--waits` includes them.

use latscope_event::syscalls::desc;
use latscope_event::units::fmt_ns_f;
use latscope_event::{op_name, EventBatch, EventKind, SysClass};
use serde_json::{json, Value};

/// Whether event `i` is a blocking wait (a syscall of class wait).
#[inline]
pub fn is_wait(b: &EventBatch, i: usize) -> bool {
    b.kind[i] == EventKind::Syscall as u8 && desc(b.nr[i]).class == SysClass::Wait
}

/// The flag that includes the waits, named in every note.
pub const WAITS_FLAG: &str = "--waits";

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
                "left out: {n} blocking waits ({}; {} in all): idle time the caller chose, not work; {how}",
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
        assert!(n.contains("3 blocking waits (futex 2, epoll_wait 1; 3.00ms in all)") && n.contains("--waits"), "{n}");
        assert_eq!(l.to_json()["by_syscall"]["futex"], 2);
    }
}

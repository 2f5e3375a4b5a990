//! Counter tracks: per interval, syscalls and block requests per second, their p50 and p99
//! latency, bytes per second, and events the recording lost.
//!
//! An event counts in the interval in which it completed (as `latscope timeline` counts it), and
//! a rate divides by the part of its interval the export covers (the recording within the
//! filter's window: the first and last intervals are partly covered), as `latscope timeline`'s
//! do.
//! Intervals are written once the latest completion read is `hold_ns` past their end (events
//! arrive in about the order they completed); an event for an interval already written is
//! counted as late and left out of the counters (never out of the slices). Blocking waits
//! (sleeps, polls, futex and child waits: their length is chosen by the caller) count as calls
//! but are left out of the latency percentiles, as in `latscope timeline`.

use std::collections::BTreeMap;

use latscope_event::syscalls::desc;
use latscope_event::{syscall_name, EventBatch, EventKind, Span, SysClass};
use latscope_hist::Histogram;

use super::tracks::Counter;

#[derive(Default)]
struct Interval {
    calls: u64,
    call_bytes: u64,
    call_lat: Option<Histogram>,
    requests: u64,
    request_bytes: u64,
    request_lat: Option<Histogram>,
    lost: u64,
}

/// The open intervals and what was written.
pub struct Counters {
    origin: u64,
    interval: u64,
    hold_ns: u64,
    open: BTreeMap<u64, Interval>,
    /// The next interval to write (those before are written).
    next: u64,
    /// The last interval written had values (a zero follows it when the next is empty).
    last_nonzero: bool,
    pool: Vec<Histogram>,
    /// Per syscall number, once looked up: [`IO`] and [`WAIT`] bits, [`KNOWN`] once set.
    class: Vec<u8>,
    /// The interval found last: its start (ns from `origin`) and number. Events come in about
    /// the order they completed, most in the interval of the one before: no division for them.
    last_start: u64,
    last_k: u64,
    /// The time the export covers, when known (see [`Counters::set_covered`]).
    covered: Option<Span>,
    /// Events that came after their interval was written.
    pub late: u64,
}

const KNOWN: u8 = 1;
/// The syscall's result counts as bytes moved ([`desc`]'s `is_io`).
const IO: u8 = 2;
/// A blocking wait ([`is_idle_wait`]).
const WAIT: u8 = 4;

/// Whether syscall `nr` is a blocking wait whose length the caller chooses.
fn is_idle_wait(nr: u16) -> bool {
    desc(nr).class == SysClass::Wait || matches!(syscall_name(nr), Some("wait4" | "waitid" | "pause"))
}

impl Counters {
    /// Intervals of `interval` ns from `origin`.
    pub fn new(origin: u64, interval: u64, hold_ns: u64) -> Counters {
        Counters {
            origin,
            interval: interval.max(1),
            hold_ns,
            open: BTreeMap::new(),
            next: 0,
            last_nonzero: false,
            pool: Vec::new(),
            class: Vec::new(),
            last_start: 0,
            last_k: 0,
            covered: None,
            late: 0,
        }
    }

    /// The time the counts cover: the recording within the filter's window (its end, once
    /// known, before the last intervals are written); an interval's rates divide by its part
    /// of it.
    pub fn set_covered(&mut self, covered: Option<Span>) {
        self.covered = covered;
    }

    /// The seconds interval `k` covers: its part of the covered time, or the whole interval when
    /// that is unknown or the interval lies outside it (calls completing after a window).
    fn covered_secs(&self, k: u64) -> f64 {
        let whole = self.interval as f64 / 1e9;
        let from = self.origin.saturating_add(k.saturating_mul(self.interval));
        match self.covered.map(|c| c.overlap_secs(from, from.saturating_add(self.interval))) {
            Some(s) if s > 0.0 => s,
            _ => whole,
        }
    }

    fn slot(&mut self, end: u64) -> Option<&mut Interval> {
        let t = end.saturating_sub(self.origin);
        let k = if t.wrapping_sub(self.last_start) < self.interval {
            self.last_k
        } else {
            let k = t / self.interval;
            (self.last_start, self.last_k) = (k * self.interval, k);
            k
        };
        if k < self.next {
            self.late += 1;
            return None;
        }
        Some(self.open.entry(k).or_default())
    }

    /// Counts event `i`.
    pub fn add(&mut self, b: &EventBatch, i: usize) {
        let kind = b.kind[i];
        let end = b.end(i);
        let lat = b.lat[i];
        if kind == EventKind::Syscall as u8 {
            let class = self.class_of(b.nr[i]);
            let bytes = if class & IO != 0 && b.ret[i] > 0 { b.ret[i] as u64 } else { 0 };
            let wait = class & WAIT != 0;
            let mut pool = std::mem::take(&mut self.pool);
            if let Some(s) = self.slot(end) {
                s.calls += 1;
                s.call_bytes += bytes;
                if !wait {
                    s.call_lat.get_or_insert_with(|| pool.pop().unwrap_or_default()).record(lat);
                }
            }
            self.pool = pool;
        } else if kind == EventKind::Block as u8 {
            let bytes = b.bytes[i];
            let mut pool = std::mem::take(&mut self.pool);
            if let Some(s) = self.slot(end) {
                s.requests += 1;
                s.request_bytes += bytes;
                s.request_lat.get_or_insert_with(|| pool.pop().unwrap_or_default()).record(lat);
            }
            self.pool = pool;
        }
    }

    /// The [`IO`] and [`WAIT`] bits of syscall `nr` (looked up by name once per number).
    #[inline]
    fn class_of(&mut self, nr: u16) -> u8 {
        let n = nr as usize;
        if let Some(&c) = self.class.get(n) {
            if c & KNOWN != 0 {
                return c;
            }
        }
        if self.class.len() <= n {
            self.class.resize(n + 1, 0);
        }
        let mut c = KNOWN;
        if desc(nr).is_io() {
            c |= IO;
        }
        if is_idle_wait(nr) {
            c |= WAIT;
        }
        self.class[n] = c;
        c
    }

    /// Counts `n` events lost by the recording, reported with a block read at `at`.
    pub fn lost(&mut self, at: u64, n: u64) {
        if let Some(s) = self.slot(at) {
            s.lost += n;
        }
    }

    /// Writes (with `out(counter, ts, value)`) every interval the watermark is `hold_ns` past, or
    /// every one with `all`.
    pub fn drain<E>(
        &mut self,
        watermark: u64,
        all: bool,
        out: &mut impl FnMut(Counter, u64, f64) -> Result<(), E>,
    ) -> Result<(), E> {
        loop {
            let Some((&k, _)) = self.open.first_key_value() else { return Ok(()) };
            let end = self.origin.saturating_add((k + 1).saturating_mul(self.interval));
            if !all && end.saturating_add(self.hold_ns) > watermark {
                return Ok(());
            }
            let Some((_, mut s)) = self.open.pop_first() else { return Ok(()) };
            let start = self.origin + k * self.interval;
            let secs = self.covered_secs(k);
            if self.last_nonzero && k > self.next {
                // Back to zero after the intervals without events.
                let t = self.origin + self.next * self.interval;
                for c in [Counter::SyscallRate, Counter::SyscallBytes, Counter::BlockRate, Counter::BlockBytes] {
                    out(c, t, 0.0)?;
                }
            }
            out(Counter::SyscallRate, start, s.calls as f64 / secs)?;
            out(Counter::SyscallBytes, start, s.call_bytes as f64 / secs)?;
            out(Counter::BlockRate, start, s.requests as f64 / secs)?;
            out(Counter::BlockBytes, start, s.request_bytes as f64 / secs)?;
            out(Counter::Lost, start, s.lost as f64)?;
            for (h, p50, p99) in [
                (s.call_lat.take(), Counter::SyscallP50, Counter::SyscallP99),
                (s.request_lat.take(), Counter::BlockP50, Counter::BlockP99),
            ] {
                if let Some(mut h) = h {
                    if let [Some(a), Some(b)] = h.percentiles(&[50.0, 99.0])[..] {
                        out(p50, start, a as f64)?;
                        out(p99, start, b as f64)?;
                    }
                    h.reset();
                    self.pool.push(h);
                }
            }
            self.last_nonzero = true;
            self.next = k + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{syscall_nr, Event};

    fn ev(kind: EventKind, nr: &str, end: u64, lat: u64, ret: i64, bytes: u64) -> Event {
        Event {
            kind: kind as u8,
            ts: end - lat,
            lat,
            nr: if kind == EventKind::Syscall { syscall_nr(nr).unwrap() } else { 0 },
            ret,
            bytes,
            ..Default::default()
        }
    }

    /// One second of 100 reads of 1..100 µs (4 KiB each), a 900 ms sleep, two block requests of
    /// 8 KiB and 7 lost events; nothing the next second; one read the second after.
    #[test]
    fn counters_are_rates_percentiles_bytes_and_losses_per_interval_and_fall_back_to_zero() {
        let s = 1_000_000_000;
        let mut b = EventBatch::default();
        for k in 0..100u64 {
            b.push(&ev(EventKind::Syscall, "read", s / 2 + k, (k + 1) * 1000, 4096, 4096));
        }
        b.push(&ev(EventKind::Syscall, "nanosleep", s - 1, 900_000_000, 0, 0));
        b.push(&ev(EventKind::Block, "", s / 4, 200_000, 0, 8192));
        b.push(&ev(EventKind::Block, "", s / 3, 300_000, 0, 8192));
        b.push(&ev(EventKind::Syscall, "read", 2 * s + 5, 1000, 10, 10));
        let mut c = Counters::new(0, s, 0);
        (0..b.len()).for_each(|i| c.add(&b, i));
        c.lost(s / 2, 7);
        let mut got: Vec<(Counter, u64, f64)> = Vec::new();
        c.drain(u64::MAX, true, &mut |k, ts, v| {
            got.push((k, ts, v));
            Ok::<(), ()>(())
        })
        .unwrap();
        let at = |k: Counter, ts: u64| -> f64 {
            let v: Vec<f64> = got.iter().filter(|g| g.0 as usize == k as usize && g.1 == ts).map(|g| g.2).collect();
            assert_eq!(v.len(), 1, "{:?} at {ts}: {v:?}", k as usize);
            v[0]
        };
        assert_eq!(at(Counter::SyscallRate, 0), 101.0, "the sleep counts as a call");
        assert_eq!(at(Counter::SyscallBytes, 0), 100.0 * 4096.0);
        assert_eq!(at(Counter::BlockRate, 0), 2.0);
        assert_eq!(at(Counter::BlockBytes, 0), 16384.0);
        assert_eq!(at(Counter::Lost, 0), 7.0);
        // Percentiles of the reads only (the sleep's length is the caller's choice), within the
        // histogram's bucket width.
        let near = |v: f64, want: f64| (v - want).abs() <= want * 0.03;
        let (p50, p99) = (at(Counter::SyscallP50, 0), at(Counter::SyscallP99, 0));
        assert!(near(p50, 50_000.0) && near(p99, 99_000.0), "p50 {p50} p99 {p99}");
        assert!(near(at(Counter::BlockP99, 0), 300_000.0));
        // The empty second falls back to zero; the next counts its own.
        assert_eq!(at(Counter::SyscallRate, s), 0.0);
        assert_eq!(at(Counter::SyscallRate, 2 * s), 1.0);
        assert_eq!(at(Counter::SyscallBytes, 2 * s), 10.0);
        assert_eq!(c.late, 0);
    }

    /// A recording that ends 250 ms into its second interval, exported from 500 ms on: the
    /// first interval's rates divide by its half covered, the last's by its quarter.
    #[test]
    fn rates_divide_by_the_part_of_the_interval_covered() {
        let s = 1_000_000_000;
        let mut b = EventBatch::default();
        for k in 0..10u64 {
            b.push(&ev(EventKind::Syscall, "read", s / 2 + k * 1000 + 500, 100, 4096, 4096));
            b.push(&ev(EventKind::Syscall, "read", s + k * 1000 + 500, 100, 4096, 4096));
        }
        let mut c = Counters::new(0, s, 0);
        c.set_covered(Some(Span::new(s / 2, s + s / 4)));
        (0..b.len()).for_each(|i| c.add(&b, i));
        let mut got: Vec<(Counter, u64, f64)> = Vec::new();
        c.drain(u64::MAX, true, &mut |k, ts, v| {
            got.push((k, ts, v));
            Ok::<(), ()>(())
        })
        .unwrap();
        let rate = |ts: u64| got.iter().find(|g| g.0 as usize == Counter::SyscallRate as usize && g.1 == ts).unwrap().2;
        let bytes =
            |ts: u64| got.iter().find(|g| g.0 as usize == Counter::SyscallBytes as usize && g.1 == ts).unwrap().2;
        assert_eq!((rate(0), rate(s)), (20.0, 40.0));
        assert_eq!((bytes(0), bytes(s)), (20.0 * 4096.0, 40.0 * 4096.0));
    }
}

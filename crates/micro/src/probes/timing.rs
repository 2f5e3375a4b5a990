//! Probes that touch only the CPU and the clocks: clock deltas, an empty call, loops.

use crate::clock::{calibrate_tsc, rdtsc, read_posix, ClockId};
use crate::error::ProbeError;
use crate::probe::{Probe, ProbeInfo, Unit};
use latscope_hist::Histogram;
use std::hint::black_box;

/// Consecutive reads of one clock; each sample is the difference between a read and the one
/// before it, so every tick of a coarse clock shows up as one sample of a whole tick.
pub(crate) struct ClockProbe {
    info: ProbeInfo,
    clock: ClockId,
    /// TSC only: nanoseconds per tick as a 32.32 fixed-point factor.
    tsc_mult: u64,
}

impl ClockProbe {
    pub(crate) fn new(name: &str, clock: ClockId) -> ClockProbe {
        let mut info = ProbeInfo::new(
            name,
            "clock",
            Unit::Nanoseconds,
            format!("difference between consecutive reads of {clock}: its granularity and read cost"),
        )
        .with("clock", clock.name());
        if let Some(res) = clock.resolution_ns() {
            info = info.with("clock_getres_ns", res);
        }
        let mut tsc_mult = 0;
        if clock == ClockId::Tsc {
            let hz = calibrate_tsc(50_000_000);
            tsc_mult = ((1e9 / hz) * 4_294_967_296.0) as u64;
            info = info.with("tsc_hz", hz.round() as u64);
        }
        ClockProbe { info, clock, tsc_mult }
    }
}

impl Probe for ClockProbe {
    fn info(&self) -> &ProbeInfo {
        &self.info
    }

    fn sample(&mut self, h: &mut Histogram, n: u64) -> Result<u64, ProbeError> {
        match self.clock.posix() {
            Some(id) => {
                let mut prev = read_posix(id);
                for _ in 0..n {
                    let now = read_posix(id);
                    // A clock stepped backwards (realtime) records 0 and counts as clamped low.
                    h.record_interval(prev, now);
                    prev = now;
                }
            }
            None => {
                let mult = u128::from(self.tsc_mult);
                let mut prev = rdtsc();
                for _ in 0..n {
                    let now = rdtsc();
                    h.record(((u128::from(now.wrapping_sub(prev)) * mult) >> 32) as u64);
                    prev = now;
                }
            }
        }
        Ok(n)
    }
}

#[inline(never)]
fn empty() {
    black_box(());
}

/// An empty function, called through a pointer the compiler cannot see through, timed by a clock.
pub(crate) struct CallProbe {
    info: ProbeInfo,
    clock: libc::clockid_t,
}

impl CallProbe {
    pub(crate) fn new(name: &str, clock: ClockId) -> CallProbe {
        let info =
            ProbeInfo::new(name, "call", Unit::Nanoseconds, format!("an empty function call timed with {clock}"))
                .with("clock", clock.name());
        CallProbe { info, clock: clock.posix().unwrap_or(libc::CLOCK_MONOTONIC) }
    }
}

impl Probe for CallProbe {
    fn info(&self) -> &ProbeInfo {
        &self.info
    }

    fn sample(&mut self, h: &mut Histogram, n: u64) -> Result<u64, ProbeError> {
        let f: fn() = black_box(empty);
        for _ in 0..n {
            let t0 = read_posix(self.clock);
            f();
            let t1 = read_posix(self.clock);
            h.record_interval(t0, t1);
        }
        Ok(n)
    }
}

/// A loop timed as a whole; the value is picoseconds per repetition.
pub(crate) struct LoopProbe {
    info: ProbeInfo,
    repetitions: u64,
    body: fn(u64) -> u64,
    /// Keeps the loops' results alive so that they are computed.
    sink: u64,
}

/// `d = d * i + i`: each iteration waits for the previous multiply (a dependency chain), so the
/// time per iteration is the latency of an integer multiply plus an add.
fn muladd_loop(repetitions: u64) -> u64 {
    let mut d: u64 = 1;
    for i in 1..=black_box(repetitions) {
        d = d.wrapping_mul(i).wrapping_add(i);
    }
    d
}

/// libm's `sin` of successive integers, summed.
fn sin_loop(repetitions: u64) -> u64 {
    let mut d = 0.0f64;
    for i in 0..black_box(repetitions) {
        d += (i as f64).sin();
    }
    d.to_bits()
}

impl LoopProbe {
    pub(crate) fn muladd(name: &str, repetitions: u64) -> LoopProbe {
        let info = ProbeInfo::new(
            name,
            "muladd",
            Unit::Picoseconds,
            format!("a dependent integer multiply-add, time per iteration of a {repetitions}-iteration loop"),
        )
        .with("repetitions", repetitions);
        LoopProbe { info, repetitions: repetitions.max(1), body: muladd_loop, sink: 0 }
    }

    pub(crate) fn sin(name: &str, repetitions: u64) -> LoopProbe {
        let info = ProbeInfo::new(
            name,
            "sin",
            Unit::Picoseconds,
            format!("libm sin(), time per call of a {repetitions}-call loop"),
        )
        .with("repetitions", repetitions);
        LoopProbe { info, repetitions: repetitions.max(1), body: sin_loop, sink: 0 }
    }
}

impl Probe for LoopProbe {
    fn info(&self) -> &ProbeInfo {
        &self.info
    }

    fn sample(&mut self, h: &mut Histogram, n: u64) -> Result<u64, ProbeError> {
        for _ in 0..n {
            let t0 = read_posix(libc::CLOCK_MONOTONIC);
            self.sink = self.sink.wrapping_add((self.body)(self.repetitions));
            let t1 = read_posix(libc::CLOCK_MONOTONIC);
            let ps = u128::from(t1.saturating_sub(t0)) * 1000 / u128::from(self.repetitions);
            h.record(ps.min(u128::from(u64::MAX)) as u64);
        }
        black_box(self.sink);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_compute_something_and_record_one_value_per_sample() {
        assert_eq!(muladd_loop(3), (2 * 2 + 2) * 3 + 3); // d = 1*1+1, then d*2+2, then d*3+3
        assert_ne!(sin_loop(10), 0);
        let mut h = Histogram::new();
        let mut p = LoopProbe::muladd("m", 1000);
        assert_eq!(p.sample(&mut h, 5).unwrap(), 5);
        assert_eq!(h.count(), 5);
        assert_eq!(p.info().params["repetitions"], 1000);
        assert_eq!(p.info().unit, Unit::Picoseconds);
    }
}

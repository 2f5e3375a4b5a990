//! The clocks a probe can read, and reading them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A clock to measure with (or to measure).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockId {
    /// `CLOCK_MONOTONIC`: fine-grained, slewed by NTP; what latscope measures with.
    Monotonic,
    /// `CLOCK_MONOTONIC_COARSE`: the time of the last kernel tick (cheap, one tick granularity).
    MonotonicCoarse,
    /// `CLOCK_MONOTONIC_RAW`: fine-grained, not slewed.
    MonotonicRaw,
    /// `CLOCK_REALTIME`: wall-clock time, fine-grained; may jump.
    Realtime,
    /// `CLOCK_REALTIME_COARSE`: wall-clock time of the last tick.
    RealtimeCoarse,
    /// `CLOCK_BOOTTIME`: monotonic including suspend.
    Boottime,
    /// The CPU's time-stamp counter (`rdtsc`), converted to nanoseconds with a frequency
    /// calibrated against `CLOCK_MONOTONIC_RAW`; x86-64 with an invariant TSC only.
    Tsc,
}

impl ClockId {
    /// Every clock, in the order `clock` probes list them.
    pub const ALL: [ClockId; 7] = [
        ClockId::Monotonic,
        ClockId::MonotonicCoarse,
        ClockId::MonotonicRaw,
        ClockId::Realtime,
        ClockId::RealtimeCoarse,
        ClockId::Boottime,
        ClockId::Tsc,
    ];

    /// The name used in probe definitions: `monotonic`, `monotonic_coarse`, ..., `tsc`.
    pub fn name(self) -> &'static str {
        match self {
            ClockId::Monotonic => "monotonic",
            ClockId::MonotonicCoarse => "monotonic_coarse",
            ClockId::MonotonicRaw => "monotonic_raw",
            ClockId::Realtime => "realtime",
            ClockId::RealtimeCoarse => "realtime_coarse",
            ClockId::Boottime => "boottime",
            ClockId::Tsc => "tsc",
        }
    }

    /// Parses [`name`](Self::name) (also `CLOCK_MONOTONIC_COARSE`-style names, any case).
    pub fn parse(s: &str) -> Result<ClockId, String> {
        let norm = s.trim().to_ascii_lowercase();
        let norm = norm.strip_prefix("clock_").unwrap_or(&norm);
        ClockId::ALL.into_iter().find(|c| c.name() == norm).ok_or_else(|| {
            let names: Vec<&str> = ClockId::ALL.iter().map(|c| c.name()).collect();
            format!("unknown clock '{s}' (one of: {})", names.join(", "))
        })
    }

    /// The POSIX clock id, `None` for the TSC.
    pub fn posix(self) -> Option<libc::clockid_t> {
        Some(match self {
            ClockId::Monotonic => libc::CLOCK_MONOTONIC,
            ClockId::MonotonicCoarse => libc::CLOCK_MONOTONIC_COARSE,
            ClockId::MonotonicRaw => libc::CLOCK_MONOTONIC_RAW,
            ClockId::Realtime => libc::CLOCK_REALTIME,
            ClockId::RealtimeCoarse => libc::CLOCK_REALTIME_COARSE,
            ClockId::Boottime => libc::CLOCK_BOOTTIME,
            ClockId::Tsc => return None,
        })
    }

    /// The resolution the kernel reports for the clock (`clock_getres`), in ns.
    pub fn resolution_ns(self) -> Option<u64> {
        let id = self.posix()?;
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid out-pointer for the call.
        let r = unsafe { libc::clock_getres(id, &mut ts) };
        (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
}

impl fmt::Display for ClockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads a POSIX clock in nanoseconds (through the vDSO: no system call for the usual clocks).
#[inline(always)]
pub fn read_posix(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer; the clock ids used are supported by every Linux.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock every timed probe measures with by default.
#[inline(always)]
pub fn monotonic_ns() -> u64 {
    read_posix(libc::CLOCK_MONOTONIC)
}

/// Why the TSC cannot be used here, if it cannot.
pub fn tsc_unavailable() -> Option<String> {
    if !cfg!(target_arch = "x86_64") {
        return Some("the TSC is an x86-64 counter".into());
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> =
        cpuinfo.lines().find(|l| l.starts_with("flags")).map(|l| l.split_whitespace().collect()).unwrap_or_default();
    for need in ["tsc", "constant_tsc", "nonstop_tsc"] {
        if !flags.contains(&need) {
            return Some(format!("the CPU does not expose an invariant TSC (no '{need}' flag in /proc/cpuinfo)"));
        }
    }
    None
}

/// Reads the time-stamp counter (0 where there is none; check [`tsc_unavailable`] first).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions; user-space access is what `tsc_unavailable` checks.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// TSC ticks per second, measured against `CLOCK_MONOTONIC_RAW` over about `span` nanoseconds.
pub fn calibrate_tsc(span_ns: u64) -> f64 {
    let raw = || read_posix(libc::CLOCK_MONOTONIC_RAW);
    let (t0, c0) = (raw(), rdtsc());
    std::thread::sleep(std::time::Duration::from_nanos(span_ns));
    let (t1, c1) = (raw(), rdtsc());
    c1.wrapping_sub(c0) as f64 * 1e9 / t1.saturating_sub(t0).max(1) as f64
}

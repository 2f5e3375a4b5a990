//! The clock probes on this machine's real clocks: a coarse clock is found coarse with the kernel's
//! tick as its granularity, a fine one fine. Compared with `clock_getres` and the kernel's CONFIG_HZ.

use latscope_hist::Histogram;
use latscope_micro::{explain, granularity, parse_probe, ClockId, Probe};

fn probe(text: &str) -> Box<dyn Probe> {
    parse_probe(text).unwrap().remove(0).build(&mut |_| {}).unwrap()
}

fn nonzero(h: &Histogram) -> u64 {
    h.iter().filter(|b| b.1 > 0).map(|b| b.2).sum()
}

/// The kernel's tick from its configuration (CONFIG_HZ), where the configuration is readable.
fn kernel_tick_ns() -> Option<u64> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let config = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("zcat /proc/config.gz 2>/dev/null || cat /boot/config-{} 2>/dev/null", release.trim()))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&config.stdout);
    let hz: u64 = text.lines().find_map(|l| l.strip_prefix("CONFIG_HZ="))?.trim().parse().ok()?;
    Some(1_000_000_000 / hz)
}

/// Samples a clock probe until `want` non-zero differences were seen (a coarse clock changes only
/// once per tick, so how many samples that takes depends on the machine).
fn sample_until(p: &mut dyn Probe, want: u64) -> Histogram {
    let mut h = Histogram::new();
    while nonzero(&h) < want {
        p.sample(&mut h, 200_000).unwrap();
    }
    h
}

#[test]
fn monotonic_coarse_is_coarse_with_the_kernels_tick_as_its_granularity() {
    let res = ClockId::MonotonicCoarse.resolution_ns().unwrap();
    if let Some(tick) = kernel_tick_ns() {
        assert_eq!(res, tick, "clock_getres(CLOCK_MONOTONIC_COARSE) is the kernel tick");
    } else {
        eprintln!("kernel configuration not readable: comparing with clock_getres only");
    }
    for clock in ["monotonic_coarse", "realtime_coarse"] {
        let mut p = probe(&format!("clock:{clock}"));
        let h = sample_until(p.as_mut(), 40);
        let g = granularity(&h).unwrap_or_else(|| panic!("{clock}: no granularity found in {h:?}"));
        assert!(g.coarse, "{clock}: {g:?}");
        assert!(g.step_low <= res && res <= g.step_high, "{clock}: step {g:?}, clock_getres {res} ns");
        assert_eq!(g.step, res, "{clock}: the roundest step in the bucket is the tick");
        assert!(g.zero_share > 0.9, "{clock}: most consecutive reads see the same tick: {g:?}");
        let e = explain(&h, "microbench", "ns", &p.info().params);
        assert!(e.notes[0].contains("coarse"), "{:?}", e.notes);
        assert_eq!(p.info().params["clock_getres_ns"], res);
    }
}

#[test]
fn monotonic_and_raw_clocks_are_fine_grained() {
    assert_eq!(ClockId::Monotonic.resolution_ns(), Some(1), "this test needs high-resolution timers");
    let mut clocks = vec!["monotonic", "monotonic_raw", "realtime", "boottime"];
    if latscope_micro::clock::tsc_unavailable().is_none() {
        clocks.push("tsc");
    }
    for clock in clocks {
        let mut p = probe(&format!("clock:{clock}"));
        let mut h = Histogram::new();
        p.sample(&mut h, 1_000_000).unwrap();
        assert_eq!(h.count(), 1_000_000);
        let g = granularity(&h).unwrap_or_else(|| panic!("{clock}: no granularity found: {h:?}"));
        // Consecutive reads of a fine clock differ by its read cost: almost never 0.
        assert!(g.zero_share < 0.5, "{clock}: {g:?}");
        let notes = explain(&h, "microbench", "ns", &p.info().params).notes;
        if clock == "tsc" {
            // The TSC's step in nanoseconds depends on the CPU and on virtualisation (10 ns on some
            // virtual machines): whatever it is, the explanation must name it.
            assert!(g.step == 1 || notes.iter().any(|n| n.contains("multiples of")), "{clock}: {g:?} {notes:?}");
            continue;
        }
        assert_eq!((g.step, g.coarse), (1, false), "{clock}: {g:?}");
        assert!(notes.iter().any(|n| n.contains("fine-grained")), "{clock}: {notes:?}");
    }
}

#[test]
fn timing_with_a_coarse_clock_reads_zero_or_whole_ticks() {
    // The write-up's null benchmark with a coarse clock: an empty call lasts 0 or one tick.
    let res = ClockId::MonotonicCoarse.resolution_ns().unwrap();
    let mut p = probe("call:monotonic_coarse");
    let h = sample_until(p.as_mut(), 20);
    let g = granularity(&h).unwrap();
    assert!(g.coarse && g.step == res, "{g:?}");
    let mut fine = probe("call");
    let mut h = Histogram::new();
    fine.sample(&mut h, 100_000).unwrap();
    assert_eq!(granularity(&h).map(|g| g.step), Some(1));
}

//! What the in-kernel aggregates keep beside their bucket counts, with both variants of the
//! syscall programs (the fast one and the one for kernels before 6.2, forced with
//! `compat_fd_naming`): a group's exact latency sum, which lies within the bounds of its
//! buckets, and its failed calls. A known workload: a child making 7 failing fchdir calls (on
//! a closed fd), 3 succeeding ones and 5 sleeps of 10 ms.

mod common;

use common::can_trace;
use latscope_event::SyscallSet;
use latscope_probe::{agg_bucket_bounds, snapshot, AggGroup, Probe, ProbeConfig, SyscallSel};
use std::io::Write;
use std::process::{Command, Stdio};

/// Waits for a line on stdin (the probes are attached by then), then the calls. The sleeps are
/// relative (the C library's `usleep`): Python's `time.sleep` sleeps to a deadline taken before
/// the call, so under emulation each call is shorter than asked by the time to make it.
const CHILD: &str = "import ctypes, os, sys\n\
libc = ctypes.CDLL(None)\n\
sys.stdin.readline()\n\
d = os.open('/', os.O_RDONLY)\n\
for _ in range(7):\n    try:\n        os.fchdir(1000)\n    except OSError:\n        pass\n\
for _ in range(3):\n    os.fchdir(d)\n\
for _ in range(5):\n    libc.usleep(10000)\n";

#[test]
fn groups_keep_exact_latency_sums_and_failed_calls() {
    if !can_trace("groups_keep_exact_latency_sums_and_failed_calls") {
        return;
    }
    let nr = |n| latscope_event::syscall_nr(n).unwrap();
    let (fchdir, sleep) = (nr("fchdir"), nr("clock_nanosleep"));
    for compat in [false, true] {
        let mut child = Command::new("python3").arg("-c").arg(CHILD).stdin(Stdio::piped()).spawn().unwrap();
        let header = snapshot::take(vec![], SyscallSet::All, false, None);
        let cfg = ProbeConfig {
            syscalls: SyscallSel::Only(vec![fchdir, sleep]),
            block: false,
            procs: false,
            pids: vec![child.id()],
            aggregate: Some(AggGroup::Syscall),
            ring_bytes: 1 << 20,
            compat_fd_naming: compat,
            ..Default::default()
        };
        let probe = Probe::start(&cfg, &header).unwrap_or_else(|e| panic!("probes load (compat {compat}): {e}"));
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(child.wait().unwrap().success());
        let snap = probe.read_agg().unwrap();
        assert_eq!(snap.sums.len(), snap.groups.len());
        let group = |nr: u16| {
            let i = snap.groups.iter().position(|(g, _)| *g == u32::from(nr)).expect("a group");
            (&snap.groups[i].1, snap.sums[i])
        };
        for (nr, calls, failed) in [(fchdir, 10, 7), (sleep, 5, 0)] {
            let (counts, sums) = group(nr);
            assert_eq!(counts.iter().sum::<u64>(), calls, "nr {nr}, compat {compat}");
            assert_eq!(sums.errors, failed, "nr {nr}, compat {compat}");
            // The exact sum lies within what the buckets allow.
            let (lo, hi) = counts.iter().enumerate().fold((0, 0), |(lo, hi), (i, &c)| {
                let (l, h) = agg_bucket_bounds(i);
                (lo + l * c, hi + h * c)
            });
            assert!(lo <= sums.lat_ns && sums.lat_ns < hi, "nr {nr}: {lo} <= {} < {hi}", sums.lat_ns);
        }
        let (_, sums) = group(sleep);
        assert!(sums.lat_ns >= 50_000_000, "5 sleeps of 10 ms: {} ns", sums.lat_ns);
        assert!(snap.block.is_empty(), "no block requests traced");
    }
}

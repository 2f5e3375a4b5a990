//! Several views counting on one shared probe set each get exactly their events: known counts
//! (20 sleeps of 10 ms, 50 one-byte writes to a file) split by syscall, fd class and filter.

mod common;

use common::can_trace;
use latscope_event::source::CountKey;
use latscope_event::EventKind;
use latscope_filter::Filter;
use latscope_live::{plan_sharing, CountBy, CountSpec, SharedCounter};
use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

fn which(tool: &str) -> std::path::PathBuf {
    let out = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().unwrap();
    std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

#[test]
fn views_sharing_one_probe_set_count_exactly_their_events() {
    if !can_trace("views_sharing_one_probe_set_count_exactly_their_events") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Two programs under one command name (the filter's process part, common to the views).
    for (dir, tool) in [("a", "sleep"), ("b", "dd")] {
        std::fs::create_dir(tmp.path().join(dir)).unwrap();
        std::fs::copy(which(tool), tmp.path().join(dir).join("lsshr_wl")).unwrap();
    }
    let p = "proc.name = lsshr_wl";
    let sys = EventKind::Syscall;
    let views = [
        (p.to_string(), CountBy::Syscall),
        (format!("{p} and evt.type = clock_nanosleep"), CountBy::All),
        (format!("{p} and evt.type in (write, clock_nanosleep)"), CountBy::Class),
        (format!("{p} and fd.type = file"), CountBy::Syscall),
        (format!("{p} and evt.type = write and fd.type = file"), CountBy::All),
    ];
    let specs: Vec<CountSpec> =
        views.iter().map(|(f, by)| CountSpec { filter: Filter::parse(f).unwrap(), kind: sys, by: *by }).collect();
    let (sets, alone) = plan_sharing(&specs, &[]);
    assert_eq!(sets, vec![vec![0, 1, 2, 3, 4]], "{alone:?}");
    let counter = SharedCounter::start(&specs).unwrap();

    let out = tmp.path().join("out");
    for _ in 0..20 {
        assert!(Command::new(tmp.path().join("a/lsshr_wl")).arg("0.01").status().unwrap().success());
    }
    let st = Command::new(tmp.path().join("b/lsshr_wl"))
        .args(["if=/dev/zero", &format!("of={}", out.display()), "bs=1", "count=50", "status=none"])
        .status()
        .unwrap();
    assert!(st.success());
    std::thread::sleep(Duration::from_millis(100));

    let counts = counter.read_counts().unwrap();
    let totals: Vec<HashMap<CountKey, u64>> =
        counts.iter().map(|v| v.iter().map(|(k, c)| (*k, c.iter().sum())).collect()).collect();
    let nr = |n| CountKey::Syscall(latscope_event::syscall_nr(n).unwrap());
    assert_eq!(totals[0].get(&nr("clock_nanosleep")), Some(&20), "{:?}", totals[0]);
    assert_eq!(totals[0].get(&nr("write")), Some(&50), "{:?}", totals[0]);
    assert_eq!(totals[1], HashMap::from([(CountKey::All, 20)]));
    assert_eq!(totals[2], HashMap::from([(CountKey::Class("file"), 50), (CountKey::Class("other"), 20)]));
    assert_eq!(totals[3].get(&nr("write")), Some(&50), "{:?}", totals[3]);
    assert_eq!(totals[3].get(&nr("clock_nanosleep")), None, "sleeps have no fd");
    assert_eq!(totals[4], HashMap::from([(CountKey::All, 50)]));
    // Latency: every sleep in a kernel bucket at or above 10 ms (a sleep lasts at least what it
    // asked for; no upper bound: a loaded or emulated machine wakes it late).
    let (_, sleeps) = &counts[1][0];
    for (i, &c) in sleeps.iter().enumerate().filter(|(_, c)| **c > 0) {
        let (lo, hi) = latscope_probe::agg_bucket_bounds(i);
        assert!(hi > 10_000_000, "{c} sleeps in [{lo}, {hi}) ns");
    }
    assert_eq!(counter.stats().lost, 0);
}

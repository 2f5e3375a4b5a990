//! `latscope replay run --graphite`: a real carbon-cache (started by the test, on loopback, one
//! point per second kept) receives the live counters of a timed replay, and whisper-fetch reads
//! them back against the run's own statistics. Without a server, the replay still completes.

mod common;
#[path = "../../export/tests/support/mod.rs"]
mod support;
use common::replay_trace::T;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use support::{free_port, wait_for, Carbon};

use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn paced_plan(dir: &Path, n: i64) -> PathBuf {
    let trace = dir.join("t.lst");
    let mut tr = T::new();
    tr.open("/app/data", 0o102, 3, 1);
    for i in 0..n {
        tr.fdop("pwrite64", 3, 4096, (i % 256) * 4096, 4096);
    }
    tr.fdop("close", 3, 0, -1, 0);
    tr.write(&trace);
    let plan = dir.join("dbload.lsr");
    latscope_ok(&["replay", "prepare", "-r", s(&trace), "-o", s(&plan), "--root", s(&dir.join("sb"))]);
    plan
}

#[test]
fn carbon_receives_the_live_counters_of_a_timed_replay() {
    let test = "carbon_receives_the_live_counters_of_a_timed_replay";
    if !require_tool(test, "carbon-cache") || !require_tool(test, "whisper-fetch") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let carbon_dir = t.path().join("carbon");
    std::fs::create_dir_all(&carbon_dir).unwrap();
    let mut carbon = Carbon::new(&carbon_dir);
    carbon.start();
    let plan = paced_plan(t.path(), 3000); // 3 s at --speed 1
    let from = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let addr = format!("127.0.0.1:{}", carbon.line_port);
    let out = latscope_ok(&[
        "replay",
        "run",
        s(&plan),
        "--init",
        "--speed",
        "1",
        "--graphite",
        &addr,
        "--graphite-interval",
        "1s",
        "--json",
        "--quiet",
    ]);
    let st: Value = serde_json::from_str(&out).unwrap();
    let done = st["ops"].as_u64().unwrap() + st["implicit"].as_u64().unwrap();
    assert_eq!(st["ops"].as_u64(), Some(3002), "{st}");
    let p = "latscope.replay.dbload";
    // ops_done ends at every operation the run counted, never decreasing on the way.
    let points = wait_for(Duration::from_secs(60), || {
        let v = carbon.fetch(&format!("{p}.ops_done"), from);
        v.last().is_some_and(|l| l.1 == done as f64).then_some(v)
    })
    .unwrap_or_else(|| {
        panic!(
            "ops_done never reached {done}: {:?}\n{}",
            carbon.fetch(&format!("{p}.ops_done"), from),
            carbon.proc.as_ref().map(|p| p.output()).unwrap_or_default()
        )
    });
    assert!(points.len() >= 3, "a 3 s run pushed every second: {points:?}");
    assert!(points.windows(2).all(|w| w[0].1 <= w[1].1), "{points:?}");
    // Every interval that pushed its rate also pushed its lateness, bounded by the run's largest.
    let max_late = st["lateness"]["max_ns"].as_f64().unwrap() / 1e9;
    let every = |name: &str| {
        wait_for(Duration::from_secs(30), || {
            let v = carbon.fetch(&format!("{p}.{name}"), from);
            (v.len() == points.len()).then_some(v)
        })
        .unwrap_or_else(|| panic!("{name} of every interval: {:?}", carbon.fetch(&format!("{p}.{name}"), from)))
    };
    assert!(every("ops_per_sec").iter().all(|r| r.1 > 0.0));
    let p99 = every("lateness.p99");
    assert!(p99.iter().all(|x| x.1 >= 0.0 && x.1 <= max_late * (1.0 + 1.0 / 128.0) + 1e-9), "{p99:?} vs {max_late}");
    assert!(every("divergences").iter().all(|x| x.1 == 0.0));
    assert!(every("errors").iter().all(|x| x.1 == 0.0));
}

#[test]
fn a_missing_server_does_not_stop_the_replay() {
    let t = tempfile::tempdir().unwrap();
    let plan = paced_plan(t.path(), 20);
    let port = free_port(); // nobody listens there
    let o = latscope(&[
        "replay",
        "run",
        s(&plan),
        "--init",
        "--quiet",
        "--graphite",
        &format!("127.0.0.1:{port}"),
        "--graphite-prefix",
        "team.replay.x",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("0 lines sent under team.replay.x") && err.contains("dropped"), "{err}");
    for (args, needle) in [
        (vec!["--graphite", "localhost"], "HOST:PORT"),
        (vec!["--graphite", "localhost:2003", "--graphite-interval", "100ms"], "1s or more"),
        (vec!["--graphite", "localhost:2003", "--graphite-prefix", "a..b"], "--graphite-prefix"),
    ] {
        let mut a = vec!["replay", "run", s(&plan)];
        a.extend(args);
        let o = latscope(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(needle), "{a:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

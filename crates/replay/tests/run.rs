//! `run` on hand-built recordings: results compared, files as recorded, dependencies kept,
//! timing, stop, divergences.

mod common;
use common::*;
use latscope_replay::{
    init, pattern, plan_events, run, InitOptions, Plan, PrepareOptions, RunOptions, SandboxChoice, Stats,
};
use std::path::Path;
use std::sync::atomic::AtomicBool;

fn plan_in(r: &Rec, root: &Path) -> Plan {
    let opts = PrepareOptions { sandbox: SandboxChoice::Root(root.to_str().unwrap().into()), filter: None };
    plan_events(&r.events(), &opts).expect("plan")
}

fn replay(p: &Plan, speed: f64) -> Stats {
    init(p, &InitOptions::default()).expect("init");
    run(p, &mut RunOptions { speed, ..Default::default() }).expect("run")
}

fn assert_faithful(s: &Stats) {
    assert_eq!(s.divergences, 0, "{}", s.text());
    assert_eq!(s.skipped, 0, "{}", s.text());
    assert_eq!(s.ops, s.planned_ops, "{}", s.text());
}

#[test]
fn a_small_workload_replays_with_the_recorded_results_and_bytes() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("sb");
    let mut r = Rec::new();
    r.path_op(100, "mkdir", "/w/d", 0);
    r.open(100, "/w/d/f", O_CREAT | O_RDWR, 3).write(100, 3, 10_000, 0, 10_000).pwrite(100, 3, 100, 20_000, 100);
    r.fdop(100, 100, "lseek", 3, 0, 0, 0);
    r.read(100, 3, 4096, 0, 4096);
    r.sys(100, 100, "ftruncate", |e| {
        e.fd = 3;
        e.bytes = 15_000;
    });
    r.pread(100, 3, 10_000, 10_000, 5_000).close(100, 3);
    r.open(100, "/w/in", O_RDONLY, 3).read(100, 3, 65536, 0, 65536).read(100, 3, 65536, 65536, 100).close(100, 3);
    r.rename(100, "/w/d/f", "/w/d/g");
    r.path_op(100, "newfstatat", "/w/d/f", -2);
    r.path_op(100, "unlink", "/w/in", 0);
    r.open(100, "/w/missing", O_RDONLY, -2);
    let p = plan_in(&r, &root);
    let s = replay(&p, 0.0);
    assert_faithful(&s);
    let g = std::fs::read(root.join("w/d/g")).unwrap();
    assert_eq!(g.len(), 15_000);
    assert!(g[..10_000].iter().enumerate().all(|(i, &b)| b == pattern::byte(i as u64)));
    assert!(g[10_000..].iter().all(|&b| b == 0), "a hole up to the truncation");
    assert!(!root.join("w/in").exists());
    assert_eq!(s.by_kind["read"].bytes, 4096 + 65536 + 100);
}

#[test]
fn threads_sharing_files_replay_concurrently_in_causal_order() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("sb");
    let mut r = Rec::new();
    r.path_op(100, "mkdir", "/w/shared", 0);
    // Four threads each create a file the next one reads, a log all append to.
    for k in 0..4u32 {
        let tid = 101 + k;
        r.open(tid, &format!("/w/shared/{k}"), O_CREAT | O_RDWR, 10 + k as i64);
        r.open(tid, "/w/shared/log", O_CREAT | O_WRONLY | O_APPEND, 20 + k as i64);
    }
    for round in 0..50u64 {
        for k in 0..4u32 {
            let tid = 101 + k;
            r.pwrite(tid, 10 + k as i32, 512, (round * 512) as i64, 512);
            r.write(tid, 20 + k as i32, 100, 0, 100);
        }
        for k in 0..4u32 {
            let tid = 101 + k;
            let other = (k + 1) % 4;
            // read the neighbour's file: its writes must have happened
            r.open(tid, &format!("/w/shared/{other}"), O_RDONLY, 30 + k as i64);
            r.pread(tid, 30 + k as i32, 512 * (round + 1), 0, (512 * (round + 1)) as i64);
            r.close(tid, 30 + k as i32);
        }
    }
    let p = plan_in(&r, &root);
    assert!(p.meta.counts.waits > 0);
    let s = replay(&p, 0.0);
    assert_faithful(&s);
    assert_eq!(std::fs::metadata(root.join("w/shared/log")).unwrap().len(), 4 * 50 * 100);
    assert_eq!((s.threads, s.workers), (5, 4), "the mkdir thread ended before the others began: it shares a worker");
}

#[test]
fn a_timed_replay_keeps_the_recorded_pace() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("sb");
    let mut r = Rec::new();
    r.open(100, "/w/f", O_CREAT | O_WRONLY, 3);
    for i in 0..20 {
        r.ts += 5_000_000; // 5 ms apart
        r.pwrite(100, 3, 100, i * 100, 100);
    }
    let p = plan_in(&r, &root);
    let s = replay(&p, 1.0);
    assert_faithful(&s);
    let l = s.lateness.as_ref().expect("timed runs measure lateness");
    assert_eq!(l.hist.count(), 21);
    // Not a timing assertion: the schedule was followed, so the run took at least the recorded span.
    assert!(s.wall_ns >= p.meta.span_ns, "{} < {}", s.wall_ns, p.meta.span_ns);
}

#[test]
fn divergences_are_counted_by_operation_and_errno() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("sb");
    let mut r = Rec::new();
    r.open(100, "/w/f", O_CREAT | O_RDWR, 3).write(100, 3, 100, 0, 100).close(100, 3);
    r.open(100, "/w/g", O_RDONLY, 4).read(100, 4, 50, 0, 50).close(100, 4);
    let p = plan_in(&r, &root);
    init(&p, &InitOptions::default()).unwrap();
    // Sabotage: the file the replay expects is gone, another one is in the way.
    std::fs::remove_file(root.join("w/g")).unwrap();
    let s = run(&p, &mut RunOptions::default()).unwrap();
    assert_eq!(s.divergences, 1, "{}", s.text());
    let d = &s.divergence_kinds[0];
    assert_eq!((d.op.as_str(), d.recorded.as_str(), d.replayed.as_str()), ("open", "ok", "ENOENT"));
    assert_eq!(s.first_divergences[0].path, "w/g");
    assert_eq!(s.skipped, 2, "the read and close of the fd that never opened: {}", s.text());
    // A used sandbox is refused until init runs again.
    let e = run(&p, &mut RunOptions::default()).unwrap_err().to_string();
    assert!(e.contains("already used"), "{e}");
}

#[test]
fn a_stop_ends_the_run_with_the_statistics_so_far() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("sb");
    let mut r = Rec::new();
    r.open(100, "/w/f", O_CREAT | O_WRONLY, 3);
    for i in 0..1000 {
        r.ts += 1_000_000;
        r.pwrite(100, 3, 10, i * 10, 10);
    }
    let p = plan_in(&r, &root);
    init(&p, &InitOptions::default()).unwrap();
    let stop = AtomicBool::new(false);
    let mut ticks = 0;
    let mut tick = |_: &latscope_replay::Live| {
        ticks += 1;
        if ticks == 2 {
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    };
    let s = run(&p, &mut RunOptions { speed: 1.0, stop: Some(&stop), on_tick: Some(&mut tick), ..Default::default() })
        .unwrap();
    assert!(s.interrupted);
    assert!(s.ops > 0 && s.ops < 1001, "{}", s.ops);
    assert_eq!(s.ops + s.skipped, 1001);
}

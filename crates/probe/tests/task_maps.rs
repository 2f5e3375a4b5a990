//! Both ways of keeping per-thread state give the same answers: task storage (tracing programs
//! have it from Linux 5.13) and the hash maps by thread id that stand in for it before, forced
//! here with `compat_task_maps`. A known workload whose calls all block, so that every one goes
//! through the per-thread state: 10 execs of `sleep 0.02` (the execve event takes its path from
//! the exec's per-thread entry) and their 10 sleeps of at least 20 ms (each one switched out
//! and taken back at its exit).

mod common;

use common::can_trace;
use latscope_event::SyscallSet;
use latscope_probe::{features, snapshot, Probe, ProbeConfig};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct Seen {
    /// Latencies (ns) of the sleeps.
    sleeps: Vec<u64>,
    /// Paths of the successful execve calls.
    execs: Vec<String>,
    lost: u64,
}

fn run_workload(hash_maps: bool) -> Seen {
    let sleep = std::fs::canonicalize("/bin/sleep").unwrap();
    let script = format!("read _; for i in 1 2 3 4 5 6 7 8 9 10; do {} 0.02; done", sleep.display());
    let mut child = Command::new("bash").arg("-c").arg(&script).stdin(Stdio::piped()).spawn().unwrap();
    let header = snapshot::take(vec![], SyscallSet::All, true, None);
    let cfg = ProbeConfig {
        pids: vec![child.id()],
        follow_children: true,
        block: false,
        compat_task_maps: hash_maps,
        ..Default::default()
    };
    let mut probe = Probe::start(&cfg, &header).unwrap_or_else(|e| panic!("probes load (hash maps: {hash_maps}): {e}"));
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    let mut seen = Seen::default();
    let deadline = Instant::now() + Duration::from_secs(20);
    while (seen.sleeps.len() < 10 || seen.execs.len() < 10) && Instant::now() < deadline {
        let b = probe.poll(Duration::from_millis(200)).unwrap();
        for i in 0..b.len() {
            let e = b.get(i);
            match e.op_name().as_str() {
                "clock_nanosleep" | "nanosleep" => seen.sleeps.push(e.lat),
                "execve" if e.ret == 0 => seen.execs.push(e.path.clone()),
                _ => {}
            }
        }
    }
    seen.lost = probe.stats().lost;
    seen
}

fn check(seen: &Seen, sleep: &str, what: &str) {
    assert_eq!(seen.sleeps.len(), 10, "{what}: {seen:?}");
    assert!(seen.sleeps.iter().all(|&ns| ns >= 20_000_000), "{what}: a sleep shorter than asked: {seen:?}");
    assert_eq!(seen.execs, vec![sleep.to_string(); 10], "{what}");
    assert_eq!(seen.lost, 0, "{what}");
}

#[test]
fn task_storage_and_hash_maps_by_thread_see_the_same_calls() {
    if !can_trace("task_storage_and_hash_maps_by_thread_see_the_same_calls") {
        return;
    }
    let sleep = std::fs::canonicalize("/bin/sleep").unwrap();
    let sleep = sleep.to_str().unwrap();
    check(&run_workload(true), sleep, "hash maps by thread id");
    if !features::KernelFeatures::probe().has(features::key::TASK_STORAGE) {
        eprintln!("this kernel has no task storage in tracing programs: only the hash-map path was checked");
        return;
    }
    check(&run_workload(false), sleep, "task storage");
}

/// Per-call attribution needs task storage: with the hash maps it is refused, saying so.
#[test]
fn why_without_task_storage_is_refused_with_the_feature_named() {
    if !can_trace("why_without_task_storage_is_refused_with_the_feature_named") {
        return;
    }
    let header = snapshot::take(vec![], SyscallSet::All, true, None);
    let cfg = ProbeConfig {
        pids: vec![std::process::id()],
        compat_task_maps: true,
        why_above_ns: Some(0),
        ..Default::default()
    };
    let err = Probe::start(&cfg, &header).err().expect("--why with hash maps must be refused").to_string();
    assert!(err.contains("--why") && err.contains("5.13"), "{err}");
}

//! `latscope bench` end to end: probes run, summaries print, the store holds every value.

mod common;

use common::{bin, latscope, latscope_ok};
use latscope_store::Store;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

fn final_line(stdout: &str) -> Value {
    let last = stdout.lines().last().expect("a JSON line");
    let v: Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["final"], true, "{last}");
    v
}

#[test]
fn bench_runs_probes_and_stores_every_value() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench.db");
    let file = dir.path().join("data");
    let out = latscope_ok(&[
        "bench",
        "clock:monotonic_coarse",
        "muladd,repetitions=10000",
        &format!("read:{},file_size=4MiB", file.display()),
        "--every",
        "0",
        "-d",
        "1500ms",
        "--report",
        "500ms",
        "--flush",
        "200ms",
        "--store",
        db.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.lines().count() >= 2, "live reports and a final one:\n{out}");
    let v = final_line(&out);
    let probes = v["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 3);
    assert_eq!(probes[1]["unit"], "ps");
    assert_eq!(probes[1]["repetitions"], 10000);
    let total: u64 = probes.iter().map(|p| p["count"].as_u64().unwrap()).sum();
    assert!(probes.iter().all(|p| p["count"].as_u64().unwrap() > 0), "{v}");
    assert_eq!(v["store"]["values_written"], total);

    let s = Store::open_read_only(&db).unwrap();
    let series = s.series().unwrap();
    assert_eq!(series.len(), 3);
    for p in probes {
        let name = p["name"].as_str().unwrap();
        let stored = series.iter().find(|s| s.spec.name == name).unwrap();
        assert_eq!(stored.count, p["count"].as_u64().unwrap(), "{name}: every value stored once");
        assert_eq!(stored.spec.kind, "microbench");
    }
    let read = series.iter().find(|s| s.spec.name.starts_with("read:")).unwrap();
    assert_eq!(read.spec.params["file_size"], 4 << 20);
    assert_eq!(read.spec.params["region"], 4 << 20);
}

#[test]
fn ctrl_c_ends_a_run_with_its_summary_and_everything_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench.db");
    let child = Command::new(bin())
        .args(["bench", "call", "--report", "0", "--json", "--store", db.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first flush (the store's series exist from the start; values come at flushes).
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = final_line(&String::from_utf8_lossy(&o.stdout));
    let count = v["probes"][0]["count"].as_u64().unwrap();
    assert!(count > 0);
    let s = Store::open_read_only(&db).unwrap();
    assert_eq!(s.series().unwrap()[0].count, count);
}

#[test]
fn text_summaries_have_units_and_explanations() {
    let out = latscope_ok(&["bench", "clock:monotonic_coarse", "clock:monotonic", "-d", "600ms", "--report", "0"]);
    assert!(out.contains("after ") && out.contains("(final)"), "{out}");
    let coarse = out.lines().skip_while(|l| !l.contains("clock:monotonic_coarse")).nth(1).unwrap_or("");
    assert!(coarse.contains("multiples of 4.00ms") || coarse.contains("multiples of"), "{out}");
    assert!(out.contains("fine-grained"), "{out}");
    assert!(out.contains("values  p50"), "{out}");
}

#[test]
fn bad_probes_configs_and_stores_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (args, want) in [
        (vec!["bench"], "no probe to run"),
        (vec!["bench", "bogus"], "unknown probe kind 'bogus'"),
        (vec!["bench", "read:/nonexistent/file"], "does not exist: give file_size"),
        (vec!["bench", "sin", "sin"], "defined twice"),
    ] {
        let o = latscope(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let cfg = dir.path().join("bench.toml");
    std::fs::write(&cfg, "[[probe]]\nkind = \"sin\"\nrepetitions = \"many\"\n").unwrap();
    let o = latscope(&["bench", "--config", cfg.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.code() == Some(2) && err.contains("bench.toml") && err.contains("line 3"), "{err}");
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, b"not a database at all").unwrap();
    let o = latscope(&["bench", "sin", "-d", "100ms", "--store", garbage.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.code() == Some(2) && err.contains("garbage.db: not a latscope store"), "{err}");
    assert_eq!(std::fs::read(&garbage).unwrap(), b"not a database at all");
}

#[test]
fn help_lists_probes_with_examples() {
    let out = latscope_ok(&["bench", "--help"]);
    for want in ["read:PATH", "clock[:CLOCK]", "Examples:", "--store", "--flush"] {
        assert!(out.contains(want), "{want} missing from:\n{out}");
    }
}

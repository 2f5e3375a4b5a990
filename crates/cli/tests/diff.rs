//! `latscope diff` and `replay compare` end to end: real recordings of a workload with a known
//! delay, twenty A/A pairs of replay runs of one plan, the pictures, and bad input. The
//! statistics themselves are tested on synthetic data of known distributions next to their code
//! (crates/stats, crates/view/src/diff).

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;

fn p(x: &Path) -> &str {
    x.to_str().unwrap()
}

/// Records `latscope load` reading a file and sleeping `sleep` per nanosleep, 1000 of each per
/// second for 1.5 s.
fn record_load(trace: &Path, file: &Path, sleep: &str) {
    let ls = bin();
    let script = format!(
        "'{ls}' load -f '{f}' --op read --size 4KiB --rate 1000 -d 1500ms >/dev/null & \
         '{ls}' load --op nanosleep --sleep {sleep} --rate 1000 -d 1500ms >/dev/null; wait",
        ls = ls.display(),
        f = file.display()
    );
    latscope_ok(&["record", "-w", p(trace), "--quiet", "--no-block", "--", "sh", "-c", &script]);
}

fn metric<'a>(j: &'a Value, by: &str, group: &str, metric: &str) -> &'a Value {
    let d = j["dims"].as_array().unwrap().iter().find(|d| d["by"] == by).unwrap_or_else(|| panic!("{by}: {j}"));
    let g =
        d["groups"].as_array().unwrap().iter().find(|g| g["name"] == group).unwrap_or_else(|| panic!("{group}: {d}"));
    g["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == metric).unwrap()
}

#[test]
fn a_slower_sleep_is_found_with_its_size_in_real_recordings_and_nothing_else_is() {
    if !require_bpf("diff of recordings") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("data");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    let (a1, a2, b) = (tmp.path().join("a1.lst"), tmp.path().join("a2.lst"), tmp.path().join("b.lst"));
    record_load(&a1, &file, "200us");
    record_load(&a2, &file, "200us");
    record_load(&b, &file, "1ms");
    let filter = "proc.name = latscope-load";
    // A/A: two recordings of one workload. On a machine shared with other work the tails of two
    // runs differ by more than 5 %: the threshold for real recordings here is 30 %.
    let j = latscope_json(&["diff", p(&a1), p(&a2), filter, "--waits", "--min-change", "30%", "--json"]);
    for (group, m) in [("nanosleep", "p50"), ("nanosleep", "rate"), ("read", "rate")] {
        let x = metric(&j, "syscall", group, m);
        assert!(!matches!(x["verdict"].as_str(), Some("increase" | "decrease")), "A/A {group} {m}: {x}");
    }
    // A/B: each sleep 800 us longer: nanosleep's p50 is about 5 times A's, the reads' rate and
    // the sleeps' rate are what they were.
    let j = latscope_json(&["diff", p(&a1), p(&b), filter, "--waits", "--min-change", "30%", "--json"]);
    let x = metric(&j, "syscall", "nanosleep", "p50");
    assert_eq!(x["verdict"], "increase", "{x}");
    let (a, bv) = (x["a"].as_f64().unwrap(), x["b"].as_f64().unwrap());
    assert!(a > 200_000.0 && a < 600_000.0 && bv > 1_000_000.0 && bv < 1_500_000.0, "{x}");
    assert!((bv - a - 800_000.0).abs() < 150_000.0, "the change is the 800 us added: {x}");
    for (group, m) in [("read", "rate"), ("nanosleep", "rate")] {
        let x = metric(&j, "syscall", group, m);
        assert!(!matches!(x["verdict"].as_str(), Some("increase" | "decrease")), "{group} {m}: {x}");
    }
    // The text says it, and the pictures are drawn.
    let (h, m) = (tmp.path().join("h.svg"), tmp.path().join("m.svg"));
    let t = latscope_ok(&["diff", p(&a1), p(&b), filter, "--waits", "--svg", p(&h), "--heatmap", p(&m)]);
    assert!(t.contains("syscall nanosleep p50") && t.contains("slower"), "{t}");
    assert!(std::fs::read_to_string(&h).unwrap().contains("class=\"panel\""));
    assert!(std::fs::read_to_string(&m).unwrap().contains("data-panel=\"B - A\""));
    // Two recordings given to hist or top: what to run instead.
    for cmd in ["hist", "top"] {
        let o = latscope(&[cmd, "-r", p(&a1), "-r", p(&b)]);
        assert_eq!(o.status.code(), Some(2));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(&format!("latscope diff {} {}", p(&a1), p(&b))), "{e}");
    }
}

/// A plan of `n` 4 KiB pwrites and preads into one file.
fn plan(tmp: &Path, root: &Path, n: i64) -> std::path::PathBuf {
    let mut tr = common::replay_trace::T::new();
    tr.open("/app/f", 0o102, 3, 1);
    for i in 0..n {
        tr.ts += 20_000;
        tr.fdop("pwrite64", 3, 4096, (i % 256) * 4096, 4096);
        tr.fdop("pread64", 3, 4096, ((i * 7) % 256) * 4096, 4096);
    }
    let trace = tmp.join("plan.lst");
    tr.write(&trace);
    let plan = tmp.join("plan.lsr");
    latscope_ok(&["replay", "prepare", "-r", p(&trace), "-o", p(&plan), "--root", p(root)]);
    plan
}

#[test]
fn twenty_pairs_of_replay_runs_of_one_plan_are_not_flagged() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sb");
    let plan = plan(tmp.path(), &root, 3000);
    let mut stats = Vec::new();
    for k in 0..40 {
        let f = tmp.path().join(format!("run{k}.json"));
        latscope_ok(&["replay", "run", p(&plan), "--init", "--quiet", "--json", "--stats", p(&f)]);
        stats.push(f);
    }
    // Each pair with the assumed run-to-run noise (`--run-noise`, 10 % by default); the
    // percentiles' values of every run, to measure this host's own noise.
    let pairs = |extra: &[&str]| -> (Vec<String>, std::collections::BTreeMap<String, Vec<f64>>) {
        let (mut flagged, mut values) = (Vec::new(), std::collections::BTreeMap::<String, Vec<f64>>::new());
        for k in 0..20 {
            let mut args = vec!["replay", "compare", p(&stats[2 * k]), p(&stats[2 * k + 1]), "--json"];
            args.extend(extra);
            let c = latscope_json(&args);
            assert!(c["differences"].as_array().unwrap().is_empty(), "{c}");
            let rows = c["rows"].as_array().unwrap();
            // Every percentile up to p99 of 3000 operations is judged; p99.9 rests on 3, the
            // open's p50 on none.
            let rw = |r: &&Value| r["metric"].as_str().unwrap().starts_with("p");
            for r in rows.iter().filter(rw) {
                let too_few = r["metric"].as_str().unwrap().ends_with(" p99.9");
                assert_eq!(r["verdict"] == "too_few", too_few, "{r}");
                if !too_few {
                    let v = values.entry(r["metric"].as_str().unwrap().to_string()).or_default();
                    v.extend([r["a"].as_f64().unwrap(), r["b"].as_f64().unwrap()]);
                }
            }
            assert!(rows.iter().any(|r| r["metric"] == "open p50" && r["verdict"] == "too_few"));
            let yes: Vec<String> =
                rows.iter().filter(|r| r["beyond_noise"] == true).map(|r| r["metric"].to_string()).collect();
            if !yes.is_empty() {
                flagged.push(format!("pair {k}: {yes:?}"));
            }
        }
        (flagged, values)
    };
    let (mut flagged, values) = pairs(&[]);
    // One run per side cannot see the run-to-run noise: the comparison assumes it. Where this
    // host's runs scatter more than assumed (a busy or shared machine), the pairs are judged again
    // with the noise measured over the forty runs, which is what a user passes there.
    let sd = |v: &[f64]| {
        let l: Vec<f64> = v.iter().map(|x| x.max(1.0).ln()).collect();
        let m = l.iter().sum::<f64>() / l.len() as f64;
        (l.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (l.len() - 1) as f64).sqrt()
    };
    let measured = values.values().map(|v| sd(v)).fold(0.0, f64::max);
    let each: Vec<String> = values.iter().map(|(m, v)| format!("{m} {:.1} %", sd(v) * 100.0)).collect();
    eprintln!("run-to-run scatter of the percentiles over 40 runs: {}", each.join(", "));
    eprintln!("A/A pairs flagged at the assumed run-to-run noise: {} of 20 {flagged:?}", flagged.len());
    if flagged.len() > 3 && measured > 0.10 {
        let noise = format!("{:.1}%", measured * 100.0);
        eprintln!(
            "{} of 20 A/A pairs flagged at the assumed 10 %: {flagged:?}; again at --run-noise {noise}",
            flagged.len()
        );
        flagged = pairs(&["--run-noise", &noise]).0;
    }
    // 5 % of pairs may be flagged by chance; more says the intervals are too narrow.
    assert!(flagged.len() <= 3, "{} of 20 A/A pairs flagged: {flagged:?} (measured noise {measured})", flagged.len());
    // The same statistics through `latscope diff`, three runs per side.
    let t = latscope_ok(&[
        "diff",
        "--a",
        p(&stats[0]),
        p(&stats[1]),
        p(&stats[2]),
        "--b",
        p(&stats[3]),
        p(&stats[4]),
        p(&stats[5]),
    ]);
    assert!(t.contains("A: ") && t.contains("(3 runs)") && t.contains("across runs"), "{t}");
}

#[test]
fn bad_diff_arguments_say_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.lst");
    latscope_trace::synth::Steady {
        seed: 1,
        secs: 0.5,
        calls: vec![latscope_trace::synth::SteadyCall::new("read", 1000.0, 20_000.0, 0.5)],
        disk: None,
    }
    .write(&a)
    .unwrap();
    let junk = tmp.path().join("junk.lst");
    std::fs::write(&junk, b"not a trace").unwrap();
    for (args, want) in [
        (vec!["diff", p(&a)], "give two sides"),
        (vec!["diff", p(&a), p(&junk)], "junk.lst"),
        (vec!["diff", p(&a), p(&a), "--min-change", "lots"], "--min-change: \"lots\": give a percentage"),
        (vec!["diff", p(&a), p(&a), "--by", "colour"], "--by: unknown grouping 'colour'"),
        (vec!["diff", p(&a), p(&a), "evt.type = = read"], "invalid filter"),
        (vec!["diff", p(&a), p(&a), "--svg", p(&a)], "a.lst"),
    ] {
        let o = latscope(&args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{e}");
    }
    // The input named as an output is refused before anything is written: it is intact.
    assert!(latscope_trace::TraceReader::open(&a).is_ok());
    // A/A of one file with itself: nothing changed, every metric "same" or too few.
    let j = latscope_json(&["diff", p(&a), p(&a), "--json"]);
    assert_eq!(j["changes"].as_array().unwrap().len(), 0, "{j}");
}

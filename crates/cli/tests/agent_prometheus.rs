//! `latscope agent` scraped by a real Prometheus (native histograms) under a known workload
//! (sleeps of 10 ms, each measured by the process making it): a series' whole run is in
//! Prometheus (its first sample is zero, so `increase()` over the run is the true count), a
//! streaming series' sums are exact, the dashboard's panels on what the agent serves return
//! data, each scraper gets the format it asked for, and `promtool check metrics` finds nothing.

mod common;
#[path = "../../export/tests/support/mod.rs"]
mod support;

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{free_port, http_get, wait_for, Proc, Prometheus};

const SLEEPS: usize = 300;

/// `[[series]]` of the sleeps of the process named `comm`: counted in the kernel by syscall, and
/// streamed (grouped by process, with exact sums).
fn config(port: u16, comm: &str) -> String {
    format!(
        "listen = \"127.0.0.1:{port}\"\ninterval = \"1s\"\nhost = \"promhost\"\n\n\
         [[series]]\nname = \"sleeps\"\nfilter = \"proc.name = {comm} and evt.type = clock_nanosleep\"\nby = \"syscall\"\n\n\
         [[series]]\nname = \"sleepers\"\nfilter = \"proc.name = {comm} and evt.type = clock_nanosleep\"\nby = \"proc\"\n\n\
         [[series]]\nname = \"disks\"\nby = \"disk\"\n"
    )
}

/// The samples of a range-vector selector: (timestamp s, count, sum) of a native histogram.
fn samples(prom: &Prometheus, sel: &str) -> Vec<(f64, f64, f64)> {
    let r = prom.query(&format!("{sel}[1h]"));
    assert_eq!(r["status"], "success", "{r}");
    let res = r["data"]["result"].as_array().unwrap();
    assert_eq!(res.len(), 1, "{sel}: {r}");
    res[0]["histograms"]
        .as_array()
        .unwrap_or_else(|| panic!("{sel}: not a native histogram: {r}"))
        .iter()
        .map(|p| {
            let f = |v: &Value| v.as_str().unwrap().parse::<f64>().unwrap();
            (p[0].as_f64().unwrap(), f(&p[1]["count"]), f(&p[1]["sum"]))
        })
        .collect()
}

fn dashboard_queries() -> Vec<(String, String)> {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/grafana/latscope.json");
    let d: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let mut out = Vec::new();
    for panel in d["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().into_iter().flatten() {
            out.push((panel["title"].as_str().unwrap().to_string(), t["expr"].as_str().unwrap().to_string()));
        }
    }
    out
}

#[test]
fn prometheus_sees_every_sleep_of_the_run_with_exact_counts_and_sums() {
    let test = "prometheus_sees_every_sleep_of_the_run_with_exact_counts_and_sums";
    if !common::require_bpf(test)
        || !common::require_tool(test, "prometheus")
        || !common::require_tool(test, "promtool")
        || !common::require_tool(test, "cc")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let load = common::compile_c("agentload.c", dir.path());
    let sleeper = dir.path().join("lsag_promsl");
    std::fs::copy(&load, &sleeper).unwrap();
    let port = free_port();
    let cfg = dir.path().join("agent.toml");
    std::fs::write(&cfg, config(port, "lsag_promsl")).unwrap();
    let agent =
        Proc::spawn(Command::new(common::bin()).args(["agent", "--config"]).arg(&cfg), &dir.path().join("agent.log"));
    // Up once every series' probes are attached (`/` does not count as a scrape of the metrics).
    let up = wait_for(Duration::from_secs(60), || http_get(port, "/", &[]).ok().filter(|r| r.0 == 200));
    assert!(up.is_some(), "the agent did not serve:\n{}", agent.output());
    let prom = Prometheus::start(&[format!("127.0.0.1:{port}")], true);
    // Half the sleeps before Prometheus' first scrape is certain, half after.
    let sleep = |n: usize| -> Vec<u64> {
        let out = Command::new(&sleeper).args(["sleep", &n.to_string()]).output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).lines().map(|l| l.trim().parse().unwrap()).collect()
    };
    let mut truth = sleep(SLEEPS / 2);
    prom.value("latscope_agent_refreshes_total");
    truth.extend(sleep(SLEEPS - SLEEPS / 2));
    assert_eq!(truth.len(), SLEEPS);
    let true_sum = truth.iter().sum::<u64>() as f64 * 1e-9;

    let kernel = "latscope_syscall_latency_seconds{series=\"sleeps\",syscall=\"clock_nanosleep\"}";
    let streamed = "latscope_syscall_latency_seconds{series=\"sleepers\",proc=\"lsag_promsl\"}";
    for sel in [kernel, streamed] {
        let n = wait_for(Duration::from_secs(60), || {
            let s = samples(&prom, sel);
            (s.last()?.1 == SLEEPS as f64).then_some(s)
        });
        let s =
            n.unwrap_or_else(|| panic!("{sel} never reached {SLEEPS}: {:?}\n{}", samples(&prom, sel), agent.output()));
        // The series started at zero: the whole run is in Prometheus.
        assert_eq!((s[0].1, s[0].2), (0.0, 0.0), "{sel}: first sample {:?}", s[0]);
        let (first, last) = (s[0].0, s.last().unwrap().0);
        let range_ms = ((last - first) * 1000.0).round() as i64;
        let inc = |f: &str| prom.value(&format!("{f}(increase({sel}[{range_ms}ms] @ {last:.3}))"));
        assert_eq!(inc("histogram_count"), SLEEPS as f64, "{sel}");
        let sum = inc("histogram_sum");
        let err = sum / true_sum - 1.0;
        eprintln!("{sel}: histogram_sum {sum:.6} s, measured {true_sum:.6} s ({:+.3} %)", err * 100.0);
        if sel == streamed {
            // Exact latencies. The sleeper's own clock also counts its way into and out of the
            // kernel (a few µs per call, more on a busy machine): the sum never exceeds what it
            // measured, and stays within 50 µs per call of it.
            let slack = 50e-6 * SLEEPS as f64 / true_sum;
            assert!(err <= 1e-4 && err > -slack, "{sel}: histogram_sum {sum} s, measured {true_sum} s");
        }
    }

    // The dashboard's panels on the latencies the agent serves have data; their variables set as
    // Grafana would (the one series of each kind, every host, syscall and disk).
    for (title, q) in dashboard_queries() {
        if !(q.contains("latscope_syscall_latency_seconds") || q.contains("latscope_block_latency_seconds")) {
            continue;
        }
        let q = q
            .replace("$__rate_interval", "1m")
            .replace("$__range", "5m")
            .replace("$host", ".*")
            .replace("$block_series", "disks")
            .replace("$series", "sleeps")
            .replace("$syscall", ".*")
            .replace("$disk", ".*");
        let got = wait_for(Duration::from_secs(60), || {
            let r = prom.query(&q);
            r["data"]["result"].as_array().filter(|a| !a.is_empty()).map(|_| ())
        });
        assert!(got.is_some(), "{title}: {q}: no data");
    }

    // Each format when asked for it; text/plain is what promtool reads, and it finds no problem.
    for (accept, want) in [
        ("text/plain;version=0.0.4", "text/plain; version=0.0.4"),
        ("application/openmetrics-text;version=1.0.0", "application/openmetrics-text"),
        (
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited",
            "application/vnd.google.protobuf",
        ),
    ] {
        let (status, ctype, _) = http_get(port, "/metrics", &[("Accept", accept)]).unwrap();
        assert!(status == 200 && ctype.starts_with(want), "{accept}: {status} {ctype}");
    }
    let (_, _, body) = http_get(port, "/metrics", &[]).unwrap();
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check.stdin.take().unwrap().write_all(&body).unwrap();
    let o = check.wait_with_output().unwrap();
    assert!(
        o.status.success() && o.stdout.is_empty() && o.stderr.is_empty(),
        "promtool check metrics:\n{}{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&body)
    );
    drop(prom);
}

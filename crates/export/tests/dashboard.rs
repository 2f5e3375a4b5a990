//! Every PromQL query of the Grafana dashboard (packaging/grafana/latscope.json) runs on a real
//! Prometheus scraping latscope's metrics, and returns data: Grafana itself is not needed to know
//! that the panels work.

mod support;

use latscope_export::prometheus::names::*;
use latscope_export::prometheus::{ExpositionServer, HistogramOptions, Metrics, SharedMetrics};
use latscope_hist::Histogram;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::*;

fn dashboard() -> Value {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/grafana/latscope.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).expect("the dashboard is JSON")
}

/// Every `expr` of every panel (rows included), with the panel's title.
fn panel_queries(d: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    fn walk(panels: &Value, out: &mut Vec<(String, String)>) {
        for p in panels.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                out.push((p["title"].as_str().unwrap_or("").to_string(), t["expr"].as_str().unwrap().to_string()));
            }
            walk(&p["panels"], out);
        }
    }
    walk(&d["panels"], &mut out);
    out
}

/// Grafana's variables as Grafana would expand them with "All" selected.
fn expand(q: &str) -> String {
    q.replace("$__rate_interval", "1m")
        .replace("$__interval", "15s")
        .replace("$__range", "5m")
        .replace("$host", ".*")
        .replace("$block_series", "disks")
        .replace("$class_series", "io_classes")
        .replace("$series", "syscalls")
        .replace("$syscall", ".*")
        .replace("$disk", ".*")
}

/// `label_values(METRIC, LABEL)` as a query with the same answer set.
fn variable_query(q: &str) -> String {
    let inner = q.strip_prefix("label_values(").and_then(|s| s.strip_suffix(')')).expect("label_values(...)");
    let (metric, label) = inner.rsplit_once(',').unwrap();
    format!("count by ({}) ({})", label.trim(), expand(metric.trim()))
}

/// The metrics of one host as the agent exposes them, `step` intervals in: a series by syscall
/// (`syscalls`), one by class (`io_classes`), one by disk (`disks`), and one without a grouping
/// (`all`), which no panel grouping by syscall or class may take in.
fn metrics(step: u64) -> Metrics {
    let mut m = Metrics::new();
    let o = HistogramOptions::default();
    let bytes = HistogramOptions::bytes();
    let grow = |base: u64| -> Histogram { (0..(50 + step * 20)).map(|i| base + (i * 7919) % base).collect() };
    let all = [(LABEL_HOST, "web1"), ("series", "all")];
    m.histogram(SYSCALL_LATENCY, "Syscall latency.", &all, &grow(1_000_000_000), &o, None).unwrap();
    for (syscall, base) in [("read", 20_000u64), ("fsync", 2_000_000)] {
        let l = [(LABEL_HOST, "web1"), ("series", "syscalls"), (LABEL_SYSCALL, syscall)];
        m.histogram(SYSCALL_LATENCY, "Syscall latency.", &l, &grow(base), &o, None).unwrap();
        m.counter(SYSCALL_ERRORS, "Failed syscalls.", &l, (step * 2) as f64).unwrap();
    }
    for (class, base) in [("file", 30_000u64), ("net", 90_000)] {
        let l = [(LABEL_HOST, "web1"), ("series", "io_classes"), ("class", class)];
        m.histogram(SYSCALL_LATENCY, "Syscall latency.", &l, &grow(base), &o, None).unwrap();
    }
    for op in ["read", "write"] {
        let l = [(LABEL_HOST, "web1"), ("series", "disks"), (LABEL_DISK, "vda"), (LABEL_OP, op)];
        m.histogram(BLOCK_LATENCY, "Block request latency.", &l, &grow(300_000), &o, None).unwrap();
        m.histogram(BLOCK_QUEUE, "Block queue time.", &l, &grow(5_000), &o, None).unwrap();
        m.histogram(BLOCK_SIZE, "Block request size.", &l, &grow(4096), &bytes, None).unwrap();
        m.counter(BLOCK_BYTES, "Block bytes.", &l, (step * 65536) as f64).unwrap();
    }
    m.counter(LOST_EVENTS, "Lost events.", &[(LABEL_HOST, "web1")], step as f64).unwrap();
    m
}

#[test]
fn every_dashboard_query_runs_on_prometheus_and_returns_data() {
    let test = "every_dashboard_query_runs_on_prometheus_and_returns_data";
    let d = dashboard();
    let queries = panel_queries(&d);
    assert!(queries.len() >= 12, "{} queries", queries.len());
    // Only metric names latscope exposes.
    let known = [
        SYSCALL_LATENCY,
        BLOCK_LATENCY,
        BLOCK_QUEUE,
        BLOCK_SIZE,
        "latscope_syscall_errors_total",
        "latscope_block_bytes_total",
        "latscope_lost_events_total",
    ];
    for (title, q) in &queries {
        // Each panel takes one series, and only the series that have the label it shows.
        if q.contains("latscope_syscall_") {
            let by_syscall = q.contains("series=\"$series\"") && q.contains("syscall!=\"\"");
            let by_class = q.contains("series=\"$class_series\"") && q.contains("class!=\"\"");
            assert!(by_syscall || by_class, "{title}: {q}");
        }
        if q.contains("latscope_block_") {
            assert!(q.contains("series=\"$block_series\"") && q.contains("disk!=\"\""), "{title}: {q}");
        }
        for w in q.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("latscope_")) {
            assert!(known.contains(&w), "{title}: unknown metric {w}");
        }
    }
    if !require_tool(test, "prometheus") {
        return;
    }
    let shared = SharedMetrics::new(metrics(0));
    let server = ExpositionServer::start("127.0.0.1:0", shared.clone()).unwrap();
    // The values grow between scrapes, as a running agent's do, so that rates are not all 0.
    let stop = Arc::new(AtomicBool::new(false));
    let (s, st) = (shared.clone(), stop.clone());
    let feeder = std::thread::spawn(move || {
        let mut step = 0;
        while !st.load(Ordering::Relaxed) {
            step += 1;
            s.set(metrics(step));
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    let prom = Prometheus::start(&[server.local_addr().to_string()], true);
    let mut all: Vec<(String, String)> = queries.iter().map(|(t, q)| (t.clone(), expand(q))).collect();
    for v in d["templating"]["list"].as_array().unwrap() {
        if v["type"] == "query" {
            all.push((format!("variable {}", v["name"]), variable_query(v["query"]["query"].as_str().unwrap())));
        }
    }
    for (title, q) in &all {
        let got = wait_for(Duration::from_secs(60), || {
            let r = prom.query(q);
            assert_eq!(r["status"], "success", "{title}: {q}: {r}");
            r["data"]["result"].as_array().filter(|a| !a.is_empty()).map(|a| a.len())
        });
        assert!(got.is_some(), "{title}: {q}: no data within 60 s\n{}", prom.proc.output());
    }
    // The slowest quantile by syscall is the fsyncs' (about 2 to 4 ms): the `all` series' 1 s
    // latencies are not taken in.
    let q = queries.iter().find(|(_, q)| q.starts_with("histogram_quantile(0.99, sum by (syscall)")).unwrap();
    let r = prom.query(&expand(&q.1));
    let worst = r["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["value"][1].as_str().unwrap().parse::<f64>().unwrap())
        .fold(0.0, f64::max);
    assert!(worst > 0.0 && worst < 0.01, "{r}");
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
}

//! `latscope agent` scraped by a real Prometheus (native histograms) under a known workload
//! (sleeps of 20 ms, each measured by the process making it; failing and succeeding calls of a
//! known number; direct reads and writes on a loop device, whose own statistics are the truth):
//! a series' whole run is in Prometheus (its first sample is zero, so `increase()` over the run
//! is the true count, and so is the difference of two instant values), sums are those of a
//! recording of the same calls (in-kernel and streamed), failed calls and block bytes, sizes and
//! queue times are served; the shipped setup (an agent run with `packaging/agent.toml`, scraped
//! by the same Prometheus) gives every panel of the shipped Grafana dashboard data; each scraper
//! gets the format it asked for, and `promtool check metrics` finds nothing.

mod common;
#[path = "../../export/tests/support/mod.rs"]
mod support;

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{free_port, http_get, wait_for, Proc, Prometheus};

const SLEEPS: usize = 500;
/// fchdir calls that fail (and as many that succeed).
const FAILS: usize = 40;
/// 4 KiB direct writes and reads on the loop device.
const WRITES: usize = 40;
const READS: usize = 30;

/// `[[series]]` of the process named `comm`: its sleeps counted in the kernel by syscall, and
/// streamed (grouped by process, with exact sums); all its calls by syscall (in the kernel);
/// its fchdir calls streamed; every disk (in the kernel), and the disks' requests of 4 KiB or
/// more (streamed: the kernel does not test sizes).
fn config(port: u16, comm: &str) -> String {
    format!(
        "listen = \"127.0.0.1:{port}\"\ninterval = \"1s\"\nhost = \"promhost\"\n\n\
         [[series]]\nname = \"sleeps\"\nfilter = \"proc.name = {comm} and evt.type = clock_nanosleep\"\nby = \"syscall\"\n\n\
         [[series]]\nname = \"sleepers\"\nfilter = \"proc.name = {comm} and evt.type = clock_nanosleep\"\nby = \"proc\"\n\n\
         [[series]]\nname = \"calls\"\nfilter = \"proc.name = {comm}\"\nby = \"syscall\"\n\n\
         [[series]]\nname = \"callers\"\nfilter = \"proc.name = {comm} and evt.type = fchdir\"\nby = \"proc\"\n\n\
         [[series]]\nname = \"disks\"\nby = \"disk\"\n\n\
         [[series]]\nname = \"bigio\"\nfilter = \"blk.bytes >= 4096\"\nby = \"disk\"\n"
    )
}

/// A loop device on a sparse image, detached when dropped.
struct Loop {
    dev: String,
    _dir: tempfile::TempDir,
}

impl Loop {
    fn new() -> Loop {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("disk.img");
        std::fs::File::create(&img).unwrap().set_len(16 << 20).unwrap();
        let o = Command::new("losetup").args(["-f", "--show"]).arg(&img).output().unwrap();
        assert!(o.status.success(), "losetup: {}", String::from_utf8_lossy(&o.stderr));
        let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let l = Loop { dev, _dir: dir };
        // A scheduler, so that requests wait in a queue (the queue time panel); best effort.
        let _ = std::fs::write(format!("/sys/block/{}/queue/scheduler", l.name()), "mq-deadline");
        l
    }

    fn name(&self) -> String {
        self.dev.trim_start_matches("/dev/").to_string()
    }

    /// (reads, read bytes, writes, written bytes) completed, from the disk's own statistics.
    fn stat(&self) -> [u64; 4] {
        let stat = std::fs::read_to_string(format!("/sys/class/block/{}/stat", self.name())).unwrap();
        let f: Vec<u64> = stat.split_whitespace().map(|v| v.parse().unwrap()).collect();
        [f[0], f[2] * 512, f[4], f[6] * 512]
    }

    fn dd(&self, args: &[&str]) {
        let st = Command::new("dd").args(args).arg("status=none").status().unwrap();
        assert!(st.success(), "dd {args:?}");
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
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

/// The shipped configuration with only its address changed (to a free port): what a new user
/// runs on an ordinary host.
fn shipped_config(port: u16) -> String {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/agent.toml");
    let text = std::fs::read_to_string(p).unwrap();
    let listen = "\nlisten = \"127.0.0.1:9465\"\n";
    assert!(text.contains(listen), "packaging/agent.toml listens on 127.0.0.1:9465");
    text.replace(listen, &format!("\nlisten = \"127.0.0.1:{port}\"\n"))
}

/// The shipped dashboard.
fn dashboard() -> Value {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/grafana/latscope.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Every query of every panel (rows included), with the panel's title.
fn dashboard_queries(d: &Value) -> Vec<(String, String)> {
    fn walk(panels: &Value, out: &mut Vec<(String, String)>) {
        for p in panels.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                out.push((p["title"].as_str().unwrap().to_string(), t["expr"].as_str().unwrap().to_string()));
            }
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&d["panels"], &mut out);
    out
}

/// `q` with Grafana's variables replaced by `vars` (longest names first: `$series` is the end
/// of `$block_series`).
fn expand(q: &str, vars: &[(String, String)]) -> String {
    let mut vars = vars.to_vec();
    vars.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    vars.iter().fold(q.to_string(), |q, (n, v)| q.replace(&format!("${n}"), v))
}

/// The dashboard's variables as Grafana sets them when the dashboard opens with `host` chosen:
/// each query variable's values from Prometheus (`label_values(METRIC, LABEL)`), then its saved
/// value (`All`: its `allValue`) when among them, else the first. Each must offer a value.
fn variables(prom: &Prometheus, d: &Value, host: &str) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> =
        vec![("__rate_interval".into(), "1m".into()), ("__range".into(), "5m".into()), ("host".into(), host.into())];
    for v in d["templating"]["list"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        if v["type"] != "query" || name == "host" {
            continue;
        }
        let q = v["query"]["query"].as_str().unwrap();
        let inner = q.strip_prefix("label_values(").and_then(|s| s.strip_suffix(')')).unwrap();
        let (metric, label) = inner.rsplit_once(',').unwrap();
        let (metric, label) = (expand(metric.trim(), &vars), label.trim());
        let offered = wait_for(Duration::from_secs(60), || {
            let r = prom.query(&format!("count by ({label}) ({metric})"));
            let mut o: Vec<String> = r["data"]["result"]
                .as_array()?
                .iter()
                .filter_map(|s| Some(s["metric"][label].as_str()?.to_string()))
                .collect();
            o.sort();
            (!o.is_empty()).then_some(o)
        });
        let offered = offered.unwrap_or_else(|| panic!("variable {name}: {q} offers nothing"));
        let saved = &v["current"]["value"];
        let value = if saved.as_array().is_some_and(|a| a.iter().any(|x| x == "$__all")) {
            v["allValue"].as_str().unwrap().to_string()
        } else {
            saved.as_str().filter(|s| offered.iter().any(|o| o == s)).unwrap_or(&offered[0]).to_string()
        };
        vars.push((name.to_string(), value));
    }
    vars
}

/// Every value of an instant query's answer (a histogram's count), once it has one that is a
/// number (within 60 s).
fn values(prom: &Prometheus, q: &str) -> Option<Vec<f64>> {
    wait_for(Duration::from_secs(60), || {
        let r = prom.query(q);
        assert_eq!(r["status"], "success", "{q}: {r}");
        let v: Vec<f64> = r["data"]["result"]
            .as_array()?
            .iter()
            // A float sample, or a native histogram's count.
            .filter_map(|s| s["value"][1].as_str().or(s["histogram"][1]["count"].as_str())?.parse::<f64>().ok())
            .filter(|v| v.is_finite())
            .collect();
        (!v.is_empty()).then_some(v)
    })
}

/// Waits until the single value of `q` is `want` (within 60 s); the last value seen otherwise.
fn expect(prom: &Prometheus, q: &str, want: impl Fn() -> f64) -> Result<(), String> {
    let mut last = None;
    let ok = wait_for(Duration::from_secs(60), || {
        let r = prom.query(q);
        let v = r["data"]["result"][0]["value"][1].as_str().and_then(|s| s.parse::<f64>().ok());
        last = v;
        (v == Some(want())).then_some(())
    });
    ok.ok_or_else(|| format!("{q}: want {}, got {last:?}", want()))
}

#[test]
fn prometheus_sees_every_sleep_of_the_run_with_exact_counts_and_sums() {
    let test = "prometheus_sees_every_sleep_of_the_run_with_exact_counts_and_sums";
    if !common::require_bpf(test)
        || !common::require_tool(test, "prometheus")
        || !common::require_tool(test, "promtool")
        || !common::require_tool(test, "cc")
        || !common::require_tool(test, "losetup")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let load = common::compile_c("agentload.c", dir.path());
    let sleeper = dir.path().join("lsag_promsl");
    std::fs::copy(&load, &sleeper).unwrap();
    // The disk exists before the agent starts (series by disk know the disks of their start),
    // and whatever probing its appearance caused is over before the counting starts.
    let disk = Loop::new();
    let _ = Command::new("udevadm").arg("settle").status();
    std::thread::sleep(Duration::from_millis(500));
    let port = free_port();
    let cfg = dir.path().join("agent.toml");
    std::fs::write(&cfg, config(port, "lsag_promsl")).unwrap();
    let stat0 = disk.stat();
    let agent =
        Proc::spawn(Command::new(common::bin()).args(["agent", "--config"]).arg(&cfg), &dir.path().join("agent.log"));
    // The shipped setup beside it, under its own host name (the machine's).
    let shipped_port = free_port();
    let shipped_cfg = dir.path().join("shipped.toml");
    std::fs::write(&shipped_cfg, shipped_config(shipped_port)).unwrap();
    let shipped = Proc::spawn(
        Command::new(common::bin()).args(["agent", "--config"]).arg(&shipped_cfg),
        &dir.path().join("shipped.log"),
    );
    // A recording of the sleeps, whose latencies the agent's sums are compared with.
    let trace = dir.path().join("sleeps.lst");
    let mut rec = Command::new(common::bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--no-block", "--quiet", "-c", "lsag_promsl", "evt.type = clock_nanosleep"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Up once every series' probes are attached (`/` does not count as a scrape of the metrics).
    for (port, p) in [(port, &agent), (shipped_port, &shipped)] {
        let up = wait_for(Duration::from_secs(60), || http_get(port, "/", &[]).ok().filter(|r| r.0 == 200));
        assert!(up.is_some(), "the agent did not serve:\n{}", p.output());
    }
    assert!(wait_for(Duration::from_secs(60), || trace.exists().then_some(())).is_some(), "record did not start");
    let prom = Prometheus::start(&[format!("127.0.0.1:{port}"), format!("127.0.0.1:{shipped_port}")], true);
    // Half the sleeps before Prometheus' first scrape is certain, half after.
    let sleep = |n: usize| -> Vec<u64> {
        let out = Command::new(&sleeper).args(["sleep", &n.to_string(), "20"]).output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).lines().map(|l| l.trim().parse().unwrap()).collect()
    };
    let mut truth = sleep(SLEEPS / 2);
    prom.value("latscope_agent_refreshes_total");
    truth.extend(sleep(SLEEPS - SLEEPS / 2));
    assert_eq!(truth.len(), SLEEPS);
    let true_sum = truth.iter().sum::<u64>() as f64 * 1e-9;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    assert!(rec.wait().unwrap().success(), "record failed");
    let t = common::latscope_json(&["top", "-r", trace.to_str().unwrap(), "--by", "syscall", "--json"]);
    let row = &t["rows"][0];
    assert_eq!((row["name"].as_str(), row["count"].as_u64()), (Some("clock_nanosleep"), Some(SLEEPS as u64)), "{t}");
    let recorded_sum = row["total_ns"].as_f64().unwrap() * 1e-9;
    assert!(Command::new(&sleeper).args(["fail", &FAILS.to_string()]).status().unwrap().success());
    let dev = disk.dev.as_str();
    disk.dd(&["if=/dev/zero", &format!("of={dev}"), "bs=4096", &format!("count={WRITES}"), "oflag=direct"]);
    disk.dd(&[&format!("if={dev}"), "of=/dev/null", "bs=4096", &format!("count={READS}"), "iflag=direct"]);

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
        // Exactly, without increase()'s extrapolation: the difference of two instant values.
        let exact =
            format!("histogram_count({sel} @ {last:.3}) - histogram_count({sel} @ {last:.3} offset {range_ms}ms)");
        assert_eq!(prom.value(&exact), SLEEPS as f64, "{exact}");
        // Sums, in the kernel as when streamed: those of a recording of the same calls, within
        // 0.1 % (each probe takes its own clock readings). The sleeper's own clock also counts
        // its way into and out of the kernel (a few µs per call, tens on a loaded machine).
        let sum = inc("histogram_sum");
        let err = sum / recorded_sum - 1.0;
        let own = sum / true_sum - 1.0;
        eprintln!(
            "{sel}: histogram_sum {sum:.6} s, recorded {recorded_sum:.6} s ({:+.4} %), the sleeper's clock {true_sum:.6} s ({:+.4} %)",
            err * 100.0,
            own * 100.0
        );
        assert!(err.abs() <= 1e-3, "{sel}: histogram_sum {sum} s, recorded {recorded_sum} s ({:+.4} %)", err * 100.0);
        assert!(own.abs() <= 1e-2, "{sel}: histogram_sum {sum} s, the sleeper's {true_sum} s ({:+.4} %)", own * 100.0);
    }

    // Failed calls: exactly the failing fchdir calls, counted in the kernel and streamed; the
    // succeeding ones are in the latency histogram only.
    let mut problems = Vec::new();
    let fails = FAILS as f64;
    for (q, want) in [
        ("latscope_syscall_errors_total{series=\"calls\",syscall=\"fchdir\"}", fails),
        ("latscope_syscall_errors_total{series=\"callers\",proc=\"lsag_promsl\"}", fails),
        ("histogram_count(latscope_syscall_latency_seconds{series=\"calls\",syscall=\"fchdir\"})", 2.0 * fails),
        ("latscope_syscall_errors_total{series=\"sleeps\",syscall=\"clock_nanosleep\"}", 0.0),
    ] {
        if let Err(e) = expect(&prom, q, || want) {
            problems.push(e);
        }
    }
    // Block requests on the loop device, against its own statistics (which count what others,
    // udev's probes, read too): requests and bytes per operation, each request's queue time.
    let name = disk.name();
    let d = &disk;
    let truth = |i: usize| move || (d.stat()[i] - stat0[i]) as f64;
    for (op, n, bytes) in [("read", 0, 1), ("write", 2, 3)] {
        let l = format!("series=\"disks\",disk=\"{name}\",op=\"{op}\"");
        for (q, want) in [
            (format!("latscope_block_bytes_total{{{l}}}"), bytes),
            (format!("histogram_count(latscope_block_size_bytes{{{l}}})"), n),
            (format!("histogram_sum(latscope_block_size_bytes{{{l}}})"), bytes),
            (format!("histogram_count(latscope_block_queue_seconds{{{l}}})"), n),
        ] {
            if let Err(e) = expect(&prom, &q, truth(want)) {
                problems.push(e);
            }
        }
    }
    assert_eq!(disk.stat()[3] - stat0[3], (WRITES * 4096) as u64, "nothing else writes to {name}");
    // Streamed (sizes are not tested in the kernel): the writes, all of 4 KiB.
    let l = format!("series=\"bigio\",disk=\"{name}\",op=\"write\"");
    for (q, want) in [
        (format!("latscope_block_bytes_total{{{l}}}"), (WRITES * 4096) as f64),
        (format!("histogram_count(latscope_block_size_bytes{{{l}}})"), WRITES as f64),
    ] {
        if let Err(e) = expect(&prom, &q, || want) {
            problems.push(e);
        }
    }
    // The median size: 4 KiB, within its native bucket (schema 4: 4.4 % wide).
    let q = format!("histogram_quantile(0.5, latscope_block_size_bytes{{{l}}})");
    let median = values(&prom, &q).unwrap_or_default();
    if median.len() != 1 || (median[0] / 4096.0 - 1.0).abs() > 0.045 {
        problems.push(format!("{q}: want 4096 within 4.5 %, got {median:?}"));
    }
    assert!(problems.is_empty(), "{}\n{}", problems.join("\n"), agent.output());

    // The shipped setup: every panel of the shipped dashboard has data from the agent run with
    // the shipped configuration, its host chosen and the other variables as the dashboard
    // opens with them.
    let r = prom.query("count by (host) (latscope_agent_refreshes_total{host!=\"promhost\"})");
    let host = r["data"]["result"][0]["metric"]["host"].as_str().unwrap_or_else(|| panic!("{r}")).to_string();
    let d = dashboard();
    let vars = variables(&prom, &d, &host);
    eprintln!("dashboard variables: {vars:?}");
    for (title, q) in dashboard_queries(&d) {
        let q = expand(&q, &vars);
        assert!(values(&prom, &q).is_some(), "{title}: {q}: no data\n{}", shipped.output());
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

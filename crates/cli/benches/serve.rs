//! Page load time of `latscope serve` with a week of hourly histograms of 50 series, in headless
//! Chromium: from the start of the navigation (Navigation Timing's time origin) to the page
//! having fetched its data and built its DOM (`data-render-ms`, `performance.now()` when the
//! page's script is done) and to the frame after that being painted (`data-paint-ms`, two
//! animation frames later). The anchor, run in the same browser and server: the same page over a
//! store of one series and one hour (what the page costs without data).
//! `cargo bench -p latscope --bench serve` (needs chromium).

#[path = "../tests/viewsupport/cdp.rs"]
mod cdp;

use latscope_hist::Histogram;
use latscope_store::{kind, unit, Hour, HourlyWriter, SeriesId, SeriesSpec, Store};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SERIES: usize = 50;
const HOURS: i64 = 7 * 24;
const VALUES: u64 = 20_000;
const RUNS: usize = 15;

fn hour_hist(series: usize, hour: i64, values: u64) -> Histogram {
    // Two tiers (a cache and a device), a little different every hour (as the store's bench).
    let mut x = (series as u64 + 1) * 0x9E37_79B9 + hour as u64;
    let mut h = Histogram::new();
    for _ in 0..values {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        let v = if x % 10 < 3 { 1_500.0 * (1.0 + u) } else { 150_000.0 * (1.0 + 3.0 * u * u) };
        h.record(v as u64);
    }
    h
}

fn make_store(path: &Path, series: usize, hours: i64) {
    let mut w = HourlyWriter::new(Store::open(path).unwrap(), Duration::from_secs(10));
    let ids: Vec<SeriesId> = (0..series)
        .map(|s| {
            let mut spec = SeriesSpec::new(format!("read-{s:02}"), kind::MICROBENCH, unit::NANOSECONDS);
            spec.params.insert("probe".into(), "read".into());
            spec.params.insert("file_size".into(), (1u64 << 30).into());
            w.series(&spec).unwrap()
        })
        .collect();
    let now = Hour::now();
    for back in (0..hours).rev() {
        for (s, id) in ids.iter().enumerate() {
            w.add(*id, now.plus(-back), &hour_hist(s, back, VALUES));
        }
        w.flush().unwrap();
    }
}

struct Serve(Child, String);

impl Serve {
    fn start(db: &Path) -> Serve {
        let mut c = Command::new(env!("CARGO_BIN_EXE_latscope"))
            .args(["serve", "--no-live", "--listen", "127.0.0.1:0", "--store"])
            .arg(db)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(c.stdout.take().unwrap()).read_line(&mut line).unwrap();
        Serve(c, line.trim().to_string())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Render and paint times (ms) of `runs` loads of `url`, each coming from `from`; the first load
/// is returned apart.
fn loads(b: &mut cdp::Browser, from: &str, url: &str, runs: usize) -> ((f64, f64), Vec<(f64, f64)>) {
    let mut out = Vec::new();
    for _ in 0..=runs {
        b.goto(from);
        b.wait_for("document.readyState === 'complete'", 30);
        b.goto(url);
        let v = b.wait_for(
            "document.body.dataset.paintMs && !document.getElementById('error').textContent && \
             [+document.body.dataset.renderMs, +document.body.dataset.paintMs]",
            120,
        );
        let a = v.as_array().unwrap();
        out.push((a[0].as_f64().unwrap(), a[1].as_f64().unwrap()));
    }
    let first = out.remove(0);
    (first, out)
}

/// Median time (ms) and size (bytes) of `runs` GETs of `path` (the server's part of a load).
fn api(url: &str, path: &str, runs: usize) -> (f64, usize) {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..runs {
        let t = std::time::Instant::now();
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
        let mut body = Vec::new();
        c.read_to_end(&mut body).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e3);
        size = body.len();
    }
    (median(times), size)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn row(name: &str, first: (f64, f64), warm: &[(f64, f64)], anchor: f64) {
    let r = median(warm.iter().map(|x| x.0).collect());
    let p = median(warm.iter().map(|x| x.1).collect());
    let worst = warm.iter().map(|x| x.1).fold(0.0, f64::max);
    println!(
        "| {name} | {:.0} ms | {r:.0} ms | {p:.0} ms | {worst:.0} ms | {:.2}x | {} |",
        first.1,
        p / anchor,
        if p < 200.0 { "met" } else { "NOT met" }
    );
}

fn main() {
    let Some(chrome) = ["chromium", "chromium-browser", "google-chrome"].iter().find_map(|n| {
        let o = Command::new("sh").arg("-c").arg(format!("command -v {n}")).output().ok()?;
        o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    }) else {
        println!("chromium is not installed: skipped (make deps-test installs it)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let week = dir.path().join("week.db");
    let tiny = dir.path().join("tiny.db");
    make_store(&week, SERIES, HOURS);
    make_store(&tiny, 1, 1);
    let (w, t) = (Serve::start(&week), Serve::start(&tiny));
    let mut b = cdp::Browser::launch(Path::new(&chrome), 1400, 1000);
    let detail = format!("{}series?id=1&hoursAgo=168&buckets=100", w.1);
    // From another page of the same server (moving about the dashboard: the page's process is
    // kept), and from a blank tab (a new renderer process starts first).
    let same = |u: &str| format!("{u}api/health");
    let (af, aw) = loads(&mut b, &same(&t.1), &t.1, RUNS);
    let (of, ow) = loads(&mut b, &same(&w.1), &w.1, RUNS);
    let (df, dw) = loads(&mut b, &same(&w.1), &detail, RUNS);
    let (_, ab) = loads(&mut b, "about:blank", &t.1, RUNS);
    let (_, ob) = loads(&mut b, "about:blank", &w.1, RUNS);
    let (_, db) = loads(&mut b, "about:blank", &detail, RUNS);
    let anchor = median(aw.iter().map(|x| x.1).collect());
    let anchor_blank = median(ab.iter().map(|x| x.1).collect());
    println!(
        "Page load in headless Chromium, {SERIES} series x {HOURS} hours of hourly histograms ({VALUES} values each); \
         {RUNS} loads after a first one (the server's caches cold), median; time from navigation start.\n"
    );
    println!("From another page of the dashboard:\n");
    println!("| page | first load, painted | rendered (median) | painted (median) | painted (worst) | vs. anchor | target 200 ms |");
    println!("|---|---|---|---|---|---|---|");
    row("anchor: overview, 1 series x 1 hour", af, &aw, anchor);
    row("overview (every series: latest histogram, p50/p99 of 168 hours)", of, &ow, anchor);
    row("series detail, 168 hours x 100 buckets", df, &dw, anchor);
    println!("\nFrom a blank tab (a renderer process starts first):\n");
    println!("| page | | rendered (median) | painted (median) | painted (worst) | vs. anchor | target 200 ms |");
    println!("|---|---|---|---|---|---|---|");
    row("anchor: overview, 1 series x 1 hour", ab[0], &ab, anchor_blank);
    row("overview", ob[0], &ob, anchor_blank);
    row("series detail", db[0], &db, anchor_blank);
    println!("\nThe server's part (median of {RUNS} GETs of the JSON, over loopback):\n");
    println!("| API | time | bytes |");
    println!("|---|---|---|");
    for (name, url, path) in [
        ("anchor: /api/overview, 1 series x 1 hour", &t.1, "/api/overview".to_string()),
        ("/api/overview, 50 series x 168 hours", &w.1, "/api/overview".to_string()),
        (
            "/api/series/detail, 168 hours x 100 buckets",
            &w.1,
            "/api/series/detail?id=1&hoursAgo=168&buckets=100".to_string(),
        ),
    ] {
        let (ms, bytes) = api(url, &path, RUNS);
        println!("| {name} | {ms:.1} ms | {bytes} |");
    }
}

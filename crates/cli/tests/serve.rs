//! `latscope serve` in a real headless Chromium: the store pages show the store's numbers, the
//! filter box points at the problem, drill-down narrows the live view (root), tokens and limits.
//! Screenshots are kept under target/test-artifacts/serve/.

mod common;
mod viewsupport;

use latscope_hist::Histogram;
use latscope_store::{kind, unit, Hour, SeriesSpec, Store};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use viewsupport::cdp::Browser;

/// Where screenshots go.
fn artifacts() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("test-artifacts/serve");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `latscope serve` on a free loopback port, stopped (SIGTERM) on drop.
struct Serve {
    child: Child,
    url: String,
}

impl Serve {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut c = Command::new(common::bin());
        c.arg("serve").args(["--listen", "127.0.0.1:0", "--live-idle", "3s"]).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("latscope serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(line.starts_with("http://127.0.0.1:"), "serve printed {line:?}");
        Serve { child, url: line.trim().to_string() }
    }

    fn addr(&self) -> String {
        self.url.trim_start_matches("http://").trim_end_matches('/').to_string()
    }

    /// Stops the server and returns what it printed on stderr.
    fn stop(mut self) -> String {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let st = self.child.wait().unwrap();
        assert!(st.success(), "serve exited with {st}");
        let mut err = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        err
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One raw HTTP/1.1 exchange: status, head, body.
fn http(addr: &str, request: &str) -> (u16, String, String) {
    common::http::exchange(addr, request.as_bytes(), Duration::from_secs(30))
}

fn get(addr: &str, path: &str, extra: &str) -> (u16, String, String) {
    common::http::get(addr, path, extra, Duration::from_secs(30))
}

/// A deterministic pseudo-random number in [0, 1).
fn unit_f(x: &mut u64) -> f64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    (*x >> 11) as f64 / (1u64 << 53) as f64
}

/// A store with known histograms over the last 30 hours: a 1 µs clock, reads of an 8 GiB file
/// with three tiers, a syscall; and a series without data.
fn fixture(path: &Path) -> Vec<(String, SeriesSpec)> {
    let mut store = Store::open(path).unwrap();
    let mut clock = SeriesSpec::new("clock-1us", kind::MICROBENCH, unit::NANOSECONDS);
    clock.params.insert("probe".into(), "clock".into());
    let mut read = SeriesSpec::new("read-8GiB", kind::MICROBENCH, unit::NANOSECONDS);
    read.description = "random 4 KiB reads of an 8 GiB file".into();
    for (k, v) in
        [("probe", Value::from("read")), ("file_size", Value::from(8u64 << 30)), ("region", Value::from(8u64 << 30))]
    {
        read.params.insert(k.into(), v);
    }
    let pread = SeriesSpec::syscall("pread64", true);
    let empty = SeriesSpec::new("declared-only", kind::MICROBENCH, unit::NANOSECONDS);
    let ids: Vec<_> = [&clock, &read, &pread, &empty].iter().map(|s| store.ensure_series(s).unwrap()).collect();
    let now = Hour::now();
    let mut x = 0x1234_5678_9abc_def1u64;
    for back in 0..30i64 {
        let hour = now.plus(-back);
        let mut c = Histogram::new();
        c.record_n(0, 800 + back as u64);
        c.record_n(1_000, 2_700);
        c.record_n(2_000, 800);
        c.record(15_000);
        let mut r = Histogram::new();
        for _ in 0..2_000 {
            let u = unit_f(&mut x);
            let t = unit_f(&mut x);
            r.record(if t < 0.06 {
                1_200.0 + 600.0 * u
            } else if t < 0.16 {
                500_000.0 + 300_000.0 * u
            } else {
                11_000_000.0 + 4_000_000.0 * u
            } as u64);
        }
        let p: Histogram = (0..300u64).map(|i| 3_000 + (i * 7919) % 5_000).collect();
        store.merge(&[(ids[0], hour, &c), (ids[1], hour, &r), (ids[2], hour, &p)]).unwrap();
    }
    vec![
        ("clock-1us".into(), clock),
        ("read-8GiB".into(), read),
        ("pread64".into(), pread),
        ("declared-only".into(), empty),
    ]
}

/// `1.08us` -> 1080.0 (the pages' number format).
fn parse_shown(s: &str) -> f64 {
    let s = s.trim();
    let (num, mult) = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)]
        .iter()
        .find_map(|(u, m)| s.strip_suffix(u).map(|n| (n, *m)))
        .unwrap_or_else(|| panic!("no unit in {s:?}"));
    num.parse::<f64>().unwrap_or_else(|_| panic!("not a number: {s:?}")) * mult
}

fn close(shown: &str, exact: u64) {
    let v = parse_shown(shown);
    let tol = (exact as f64 * 0.006).max(0.5);
    assert!((v - exact as f64).abs() <= tol, "shown {shown} for {exact}");
}

fn png_is_not_blank(png: &[u8]) {
    let img = viewsupport::decode_png(png);
    let mut colours = std::collections::BTreeSet::new();
    for p in img.rgba.iter().step_by(7) {
        colours.insert(*p);
    }
    assert!(
        img.width > 500 && img.height > 300 && colours.len() > 20,
        "{}x{}, {} colours",
        img.width,
        img.height,
        colours.len()
    );
}

#[test]
fn store_pages_show_the_stores_numbers() {
    let Some(chrome) = viewsupport::chromium("store_pages_show_the_stores_numbers") else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench.db");
    let specs = fixture(&db);
    let srv = Serve::start(&["--store", db.to_str().unwrap(), "--no-live"], &[]);
    let store = Store::open_read_only(&db).unwrap();
    let series = store.series().unwrap();
    let mut b = Browser::launch(&chrome, 1400, 1000);

    // Overview: every series, its latest hour's numbers and the hours kept.
    b.goto(&srv.url);
    b.wait_ready(30);
    let rows = b.eval(
        "[...document.querySelectorAll('tr.series')].map(tr => { const c = k => tr.querySelector('td.' + k); \
         const t = tr.querySelector('svg.trend'); return { name: tr.dataset.name, \
         count: c('count') && c('count').dataset.v, p50: c('p50') && c('p50').dataset.v, p99: c('p99') && c('p99').dataset.v, \
         max: c('max') && c('max').dataset.v, p50_text: c('p50') && c('p50').textContent, p99_text: c('p99') && c('p99').textContent, \
         hours: c('hours').dataset.v, trend_n: t.dataset.n, last_p50: t.dataset.lastP50, last_p99: t.dataset.lastP99 }; })",
    );
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), specs.len(), "{rows:?}");
    for s in &series {
        let row =
            rows.iter().find(|r| r["name"] == s.spec.name.as_str()).unwrap_or_else(|| panic!("no row {}", s.spec.name));
        assert_eq!(row["hours"].as_str().unwrap(), s.hours.to_string());
        assert_eq!(row["trend_n"].as_str().unwrap(), s.hours.to_string());
        let Some(latest) = store.latest(s.id).unwrap() else {
            assert!(row["count"].is_null(), "{row}");
            continue;
        };
        let h = &latest.histogram;
        let num = |k: &str| row[k].as_str().unwrap().parse::<u64>().unwrap();
        assert_eq!(num("count"), h.count(), "{}", s.spec.name);
        assert_eq!(num("p50"), h.value_at_quantile(0.5).unwrap(), "{}", s.spec.name);
        assert_eq!(num("p99"), h.value_at_quantile(0.99).unwrap());
        assert_eq!(num("max"), h.max().unwrap());
        assert_eq!(num("last_p50"), h.value_at_quantile(0.5).unwrap());
        assert_eq!(num("last_p99"), h.value_at_quantile(0.99).unwrap());
        close(row["p50_text"].as_str().unwrap(), h.value_at_quantile(0.5).unwrap());
        close(row["p99_text"].as_str().unwrap(), h.value_at_quantile(0.99).unwrap());
    }
    png_is_not_blank(&b.screenshot(&artifacts().join("overview.png")));

    // A series hour by hour, by name as in the write-up's op_detail page: every hour's numbers,
    // the window merged, its peaks and the explanation's notes (tiers, the cache estimate).
    let read = series.iter().find(|s| s.spec.name == "read-8GiB").unwrap();
    b.goto(&format!("{}series?op=read-8GiB&hoursAgo=48&hours=&buckets=99", srv.url));
    b.wait_ready(30);
    let hours = b.eval(
        "[...document.querySelectorAll('.hour')].map(d => [d.dataset.hour, d.dataset.count, d.dataset.p50, d.dataset.p99])",
    );
    let end = Hour::now().next();
    let stored = store.hours(read.id, end.plus(-48)..end).unwrap();
    assert_eq!(hours.as_array().unwrap().len(), stored.len());
    for (shown, h) in hours.as_array().unwrap().iter().rev().zip(&stored) {
        let v: Vec<u64> = shown.as_array().unwrap().iter().map(|x| x.as_str().unwrap().parse().unwrap()).collect();
        let hist = &h.histogram;
        assert_eq!(
            v,
            vec![
                h.hour.start_unix_secs() as u64,
                hist.count(),
                hist.value_at_quantile(0.5).unwrap(),
                hist.value_at_quantile(0.99).unwrap()
            ]
        );
    }
    let merged = store.merged(read.id, end.plus(-48)..end).unwrap();
    let m =
        b.eval("(() => { const d = document.getElementById('merged').dataset; return [d.count, d.p50, d.p99]; })()");
    assert_eq!(
        m,
        serde_json::json!([
            merged.count().to_string(),
            merged.value_at_quantile(0.5).unwrap().to_string(),
            merged.value_at_quantile(0.99).unwrap().to_string()
        ])
    );
    let ex = latscope_micro::explain(&merged, &read.spec.kind, &read.spec.unit, &read.spec.params);
    let notes = b.eval("[...document.querySelectorAll('#notes li.note')].map(l => l.textContent)");
    assert_eq!(notes, serde_json::json!(ex.notes));
    assert!(ex.notes.iter().any(|n| n.contains("are cached")), "{:?}", ex.notes);
    let peaks = b.eval("[...document.querySelectorAll('#peaks tr.peak')].map(t => [+t.dataset.modeLow, +t.dataset.modeHigh, +t.dataset.count])");
    let want: Vec<[u64; 3]> = ex.peaks.iter().map(|p| [p.mode_low, p.mode_high, p.count]).collect();
    assert_eq!(peaks, serde_json::json!(want));
    assert!(ex.peaks.len() >= 2, "{:?}", ex.peaks);
    png_is_not_blank(&b.screenshot(&artifacts().join("series-log.png")));

    // The clock on a linear axis: its granularity explained.
    let clock = series.iter().find(|s| s.spec.name == "clock-1us").unwrap();
    b.goto(&format!("{}series?id={}&hoursAgo=6&buckets=40&scale=linear", srv.url, clock.id));
    b.wait_ready(30);
    let text = b.text();
    assert!(text.contains("values are multiples of 1.00us"), "{text}");
    assert_eq!(b.eval("document.querySelectorAll('.hour').length"), serde_json::json!(6));
    png_is_not_blank(&b.screenshot(&artifacts().join("series-linear.png")));

    // Bad parameters are named.
    b.goto(&format!("{}series?id={}&buckets=5000", srv.url, clock.id));
    b.wait_ready(30);
    assert!(b.text().contains("parameter buckets"), "{}", b.text());
    drop(b);
    let err = srv.stop();
    assert!(err.contains("dashboard at"), "{err}");
}

#[test]
fn the_filter_box_points_at_the_problem() {
    let Some(chrome) = viewsupport::chromium("the_filter_box_points_at_the_problem") else { return };
    let srv = Serve::start(&[], &[]);
    let mut b = Browser::launch(&chrome, 1200, 900);
    b.goto(&format!("{}live", srv.url));
    b.wait_for("document.getElementById('filter')", 20);
    // Typed into the box and submitted with Enter, as a person would.
    b.type_into("#filter", "proc.name = x and evt.latncy > 1ms");
    b.enter();
    b.wait_for("location.search.includes('latncy')", 20);
    b.wait_for("!document.getElementById('filtererror').hidden", 20);
    let pre = b.eval("document.getElementById('filtererror').textContent");
    let lines: Vec<&str> = pre.as_str().unwrap().lines().collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].contains("unknown field 'evt.latncy'") && lines[0].contains("evt.latency"), "{lines:?}");
    assert_eq!(lines[1], "proc.name = x and evt.latncy > 1ms");
    let col = lines[1].find("evt.latncy").unwrap();
    assert_eq!(lines[2], format!("{}{}", " ".repeat(col), "^".repeat("evt.latncy".len())), "{lines:?}");
    assert_eq!(
        b.eval("document.getElementById('filter').value"),
        serde_json::json!("proc.name = x and evt.latncy > 1ms")
    );
    png_is_not_blank(&b.screenshot(&artifacts().join("live-filter-error.png")));
    // The API says the same to scripts, with the place.
    let a = srv.addr();
    let form = "filter=proc.name%20%3D%3D%3D%20x";
    let (status, _, body) = http(
        &a,
        &format!(
            "POST /api/live HTTP/1.1\r\nHost: {a}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        ),
    );
    assert_eq!(status, 400);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["filter_error"]["expr"], "proc.name === x");
    assert!(v["filter_error"]["start"].as_u64().unwrap() >= 10, "{v}");
}

#[test]
fn tokens_hosts_and_limits() {
    // Off loopback a token is required; it is never printed.
    let o = common::latscope(&["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not a loopback address") && err.contains("--token"), "{err}");
    let o = common::latscope(&["serve", "--listen", "127.0.0.1:0", "--token", "short"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("shorter than 16"), "{o:?}");

    let token = "tok-0123456789abcdef";
    let srv = Serve::start(&["--no-live"], &[("LATSCOPE_TOKEN", token)]);
    let a = srv.addr();
    assert_eq!(get(&a, "/api/overview", "").0, 401);
    assert_eq!(get(&a, "/api/overview", "Authorization: Bearer tok-0123456789abcdeX\r\n").0, 401);
    let (st, _, body) = get(&a, "/api/overview", &format!("Authorization: Bearer {token}\r\n"));
    assert_eq!(st, 200, "{body}");
    assert!(body.contains("no store"), "{body}");
    // A page without the token leads to the login form, which sets an HttpOnly cookie.
    let (st, head, _) = get(&a, "/live?filter=x", "");
    assert_eq!(st, 303);
    assert!(head.contains("Location: /login?next=%2Flive%3Ffilter%3Dx"), "{head}");
    let form = format!("token={token}&next=%2Flive");
    let (st, head, _) = http(
        &a,
        &format!(
            "POST /login HTTP/1.1\r\nHost: {a}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        ),
    );
    assert_eq!(st, 303, "{head}");
    assert!(head.contains("Location: /live") && head.contains("HttpOnly; SameSite=Strict"), "{head}");
    assert_eq!(get(&a, "/api/health", &format!("Cookie: latscope_token={token}\r\n")).0, 200);
    let bad = "token=wrong-0123456789abcdef&next=%2F%2Fevil.example";
    let (st, head, _) = http(
        &a,
        &format!(
            "POST /login HTTP/1.1\r\nHost: {a}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{bad}",
            bad.len()
        ),
    );
    assert_eq!(st, 303);
    assert!(head.contains("Location: /login?next=%2F&failed=1") && !head.contains("Set-Cookie"), "{head}");
    // Another site's name for this address, cross-site API calls, bodies and targets too large.
    let auth = format!("Authorization: Bearer {token}\r\n");
    assert_eq!(
        http(&a, &format!("GET /api/health HTTP/1.1\r\nHost: evil.example:80\r\n{auth}Connection: close\r\n\r\n")).0,
        403
    );
    assert_eq!(get(&a, "/api/health", &format!("{auth}Sec-Fetch-Site: cross-site\r\n")).0, 403);
    assert_eq!(get(&a, &format!("/api/overview?x={}", "a".repeat(5000)), &auth).0, 414);
    assert_eq!(get(&a, "/", &format!("{auth}X-Big: {}\r\n", "b".repeat(20_000))).0, 431);
    let (st, _, _) =
        http(&a, &format!("POST /login HTTP/1.1\r\nHost: {a}\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n"));
    assert_eq!(st, 413);
    assert_eq!(get(&a, "/api/series/detail?id=1&hoursAgo=99999", &auth).0, 200, "no store: said in the reply");
    let err = srv.stop();
    assert!(!err.contains(token) && !err.contains("0123456789abcdef"), "the token was printed: {err}");
}

#[test]
fn at_the_connection_cap_idle_and_slow_connections_make_room() {
    let srv = Serve::start(&["--no-live", "--max-connections", "8"], &[]);
    let a = srv.addr();
    // Five clients that send half a request and stop, three that connect and say nothing.
    let slow: Vec<TcpStream> = (0..5)
        .map(|_| {
            let mut s = TcpStream::connect(&a).unwrap();
            s.write_all(b"GET /api/health HTTP/1.1\r\nHost: ").unwrap();
            s
        })
        .collect();
    let silent: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(&a).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(500));
    // At the cap, others are still served: the silent connections are closed to make room
    // first (no 503, no waiting for the slow ones' 10 s).
    for _ in 0..3 {
        assert_eq!(get(&a, "/api/health", "").0, 200);
    }
    // The first one made room by closing a silent connection (the others found the place it
    // left free).
    let mut closed = 0;
    for mut s in silent {
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let mut buf = Vec::new();
        // Closed: the end of the stream (or a reset), not the read timeout.
        let r = s.read_to_end(&mut buf);
        let kept =
            matches!(&r, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
        closed += usize::from(!kept && buf.is_empty());
    }
    assert!(closed >= 1, "no silent connection made room");
    assert_eq!(get(&a, "/api/health", "").0, 200);
    for mut s in slow {
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut buf = String::new();
        let _ = s.read_to_string(&mut buf);
        assert!(buf.is_empty() || buf.starts_with("HTTP/1.1 408"), "{buf}");
    }
    srv.stop();
}

/// Runs `latscope load` under `name` for a while (killed on drop).
struct Load(Child);

impl Load {
    fn start(name: &str, op: &str, file: &Path) -> Load {
        let c = Command::new(common::bin())
            .args(["load", "--name", name, "--op", op, "--rate", "200", "-d", "120s", "--sleep", "200us", "-f"])
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Load(c)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn live_drill_down_narrows_the_view() {
    if !common::require_bpf("live_drill_down_narrows_the_view") {
        return;
    }
    let Some(chrome) = viewsupport::chromium("live_drill_down_narrows_the_view") else { return };
    let dir = tempfile::tempdir().unwrap();
    let _w = Load::start("lsw-write", "write", &dir.path().join("w"));
    let _s = Load::start("lsw-sleep", "nanosleep", &dir.path().join("s"));
    let srv = Serve::start(&[], &[]);
    let mut b = Browser::launch(&chrome, 1400, 1600);

    // In-kernel counting first: the heat map fills, no events are kept.
    // The sleeps are idle waits: counted when asked for.
    b.goto(&format!("{}live?filter=proc.name%3Dlsw-sleep&waits=1", srv.url));
    b.wait_ready(60);
    b.wait_for("+document.getElementById('heatmap').dataset.shown > 100", 60);
    assert_eq!(b.eval("document.body.dataset.mode"), serde_json::json!("counting"));
    let status = b.eval("document.getElementById('status').textContent");
    assert!(status.as_str().unwrap().contains("events since start (idle waits included)"), "{status}");

    // Streaming both workloads: the tables name them and their syscalls (blocking waits such as
    // nanosleep included, as asked for with waits=1).
    let filter = "proc.name in (lsw-write, lsw-sleep)";
    let q: String = form_urlencoded(filter);
    b.goto(&format!("{}live?filter={q}&stream=1&waits=1", srv.url));
    b.wait_ready(60);
    let names = |b: &mut Browser, by: &str| -> Vec<String> {
        let v = b.eval(&format!(
            "[...document.querySelectorAll('table[data-by={by}] tr[data-name]')].map(r => r.dataset.name)"
        ));
        v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
    };
    b.wait_for(
        "(() => { const n = [...document.querySelectorAll('table[data-by=syscall] tr[data-name]')].map(r => r.dataset.name); \
         return n.includes('write') && n.includes('nanosleep'); })()",
        60,
    );
    let mut procs = names(&mut b, "proc");
    procs.sort();
    assert_eq!(procs, ["lsw-sleep", "lsw-write"]);
    png_is_not_blank(&b.screenshot(&artifacts().join("live-streaming.png")));

    // Click the 'write' row of the syscall table: the filter narrows to it.
    b.click("table[data-by=syscall] tr[data-name=write]");
    b.wait_for("location.search.includes('evt.type')", 30);
    b.wait_ready(60);
    let narrowed = format!("{filter} and evt.type = write");
    assert_eq!(b.eval("document.getElementById('filter').value"), serde_json::json!(narrowed));
    b.wait_for("document.querySelectorAll('table[data-by=syscall] tr[data-name]').length > 0", 60);
    b.wait_for("+document.getElementById('heatmap').dataset.shown > 0", 60);
    assert_eq!(names(&mut b, "syscall"), ["write"]);
    assert_eq!(names(&mut b, "proc"), ["lsw-write"]);
    assert_eq!(names(&mut b, "file"), [dir.path().join("w").to_str().unwrap()]);

    // Click a heat-map cell with events: they are listed, all writes of lsw-write.
    let xy = b.eval(
        "(() => { const c = document.getElementById('heatmap'), W = c.width, H = c.height, L = 58, B = 16, n = ROWS; \
         const cw = (W - L) / n, rh = (H - B) / view.axis.cols, off = n - view.rows.length; \
         for (let k = view.rows.length - 1; k >= 0; k--) { const j = view.rows[k].counts.findIndex(x => x > 0); \
           if (j >= 0) { const r = c.getBoundingClientRect(); c.scrollIntoView({block: 'center'}); const r2 = c.getBoundingClientRect(); \
             return [r2.left + (L + (off + k + 0.5) * cw) * r2.width / W, r2.top + (H - B - (j + 0.5) * rh) * r2.height / H]; } } return null; })()",
    );
    let xy = xy.as_array().expect("a cell with events");
    b.click_at(xy[0].as_f64().unwrap(), xy[1].as_f64().unwrap());
    b.wait_for("+document.getElementById('cell').dataset.matched > 0", 30);
    let lines = b.eval("document.getElementById('events').textContent");
    let lines: Vec<&str> = lines.as_str().unwrap().lines().collect();
    assert!(!lines.is_empty());
    assert!(lines.iter().all(|l| l.contains("lsw-write") && l.contains("write")), "{lines:?}");
    png_is_not_blank(&b.screenshot(&artifacts().join("live-narrowed.png")));

    // Closed, the sessions stop after the idle time (3 s here).
    drop(b);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, _, body) = get(&srv.addr(), "/api/health", "");
        let v: Value = serde_json::from_str(&body).unwrap();
        if v["live_sessions"] == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "live sessions still running: {v}");
        std::thread::sleep(Duration::from_millis(500));
    }
    srv.stop();
}

fn form_urlencoded(s: &str) -> String {
    s.bytes()
        .map(|c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (c as char).to_string(),
            _ => format!("%{c:02X}"),
        })
        .collect()
}

/// A script that returns what is wrong with the page's layout: a table header not over its
/// values (numbers right-aligned, text left-aligned, edges within 1.5 px), a cell whose text is
/// clipped, SVG text outside its SVG or overlapping another.
const LAYOUT_PROBLEMS_JS: &str = r#"(() => {
  const out = [];
  for (const t of document.querySelectorAll('table.grid')) {
    const head = t.querySelector('tr'); if (!head) continue;
    if (head.getBoundingClientRect().height > 40) out.push(`${t.dataset.by || t.id}: the header row is stretched to ${head.getBoundingClientRect().height} px`);
    const ths = [...head.children];
    for (const tr of [...t.querySelectorAll('tr')].slice(1)) {
      let col = 0;
      [...tr.children].forEach(td => {
        const i = col; col += td.colSpan || 1;
        const th = ths[i]; if (!th || td.colSpan > 1) return;
        const a = th.getBoundingClientRect(), b = td.getBoundingClientRect();
        const num = td.classList.contains('num');
        const ta = getComputedStyle(th).textAlign, tb = getComputedStyle(td).textAlign;
        if (ta !== tb) out.push(`${t.dataset.by || t.id}: header '${th.textContent}' is aligned ${ta}, its values ${tb}`);
        if (Math.abs(num ? a.right - b.right : a.left - b.left) > 1.5) out.push(`${t.dataset.by || t.id}: column '${th.textContent}' edges differ`);
        if (td.scrollWidth > td.clientWidth + 1) out.push(`${t.dataset.by || t.id}: '${td.textContent}' is clipped`);
      });
    }
  }
  for (const svg of document.querySelectorAll('svg')) {
    const r = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')].filter(x => x.textContent.trim()).map(x => [x.textContent, x.getBoundingClientRect()]);
    for (const [s, b] of texts) if (b.left < r.left - 0.5 || b.right > r.right + 0.5 || b.top < r.top - 0.5 || b.bottom > r.bottom + 0.5) out.push(`svg text '${s}' runs off its picture`);
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
      const [s, a] = texts[i], [u, b] = texts[j];
      if (a.right - 0.5 > b.left && b.right - 0.5 > a.left && a.bottom - 0.5 > b.top && b.bottom - 0.5 > a.top) out.push(`svg texts '${s}' and '${u}' overlap`);
    }
  }
  return out;
})()"#;

fn layout_problems(b: &mut Browser) -> Vec<String> {
    let v = b.eval(LAYOUT_PROBLEMS_JS);
    v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
}

/// What is wrong with the peaks of the page's charts: a peak's label over another peak's dashed
/// line (each line starts just below its own label).
const PEAK_LINES_JS: &str = r#"(() => {
  const out = [];
  for (const svg of document.querySelectorAll('svg.chart')) {
    const lines = [...svg.querySelectorAll('line.peak')].map(l => l.getBoundingClientRect());
    const texts = [...svg.querySelectorAll('text.peak')].map(t => [t.textContent, t.getBoundingClientRect()]);
    texts.forEach(([s, r], i) => lines.forEach((l, j) => {
      const x = l.left + l.width / 2;
      if (j !== i && r.left - 1 < x && x < r.right + 1 && l.top < r.bottom) out.push(`peak label '${s}' crosses the line of peak ${j + 1}`);
    }));
  }
  return out;
})()"#;

/// What is wrong with the index's table at the window's width: the page wider than the window
/// (the table scrolls in its own box instead), a header cell on more than one line, a text outside
/// its cell or over another text.
const INDEX_TABLE_JS: &str = r#"(() => {
  const out = [], t = document.getElementById('series');
  const page = document.documentElement.scrollWidth;
  if (page > innerWidth) out.push(`the page is ${page} px wide in a ${innerWidth} px window`);
  const lines = el => { const r = document.createRange(); r.selectNodeContents(el); return new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top))).size; };
  for (const th of t.querySelectorAll('th')) if (lines(th) !== 1) out.push(`header '${th.textContent}' takes ${lines(th)} lines`);
  const boxes = [], walk = document.createTreeWalker(t, NodeFilter.SHOW_TEXT);
  for (let n; (n = walk.nextNode());) {
    if (!n.textContent.trim()) continue;
    const c = n.parentElement.closest('td, th').getBoundingClientRect(), r = document.createRange();
    r.selectNodeContents(n);
    for (const b of r.getClientRects()) {
      if (!(b.width > 0)) continue;
      if (b.left < c.left - 0.5 || b.right > c.right + 0.5 || b.top < c.top - 0.5 || b.bottom > c.bottom + 0.5) out.push(`'${n.textContent}' runs out of its cell`);
      boxes.push([n.textContent.trim(), b]);
    }
  }
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [s, a] = boxes[i], [u, b] = boxes[j];
    if (a.right - 0.5 > b.left && b.right - 0.5 > a.left && a.bottom - 0.5 > b.top && b.bottom - 0.5 > a.top) out.push(`'${s}' and '${u}' overlap`);
  }
  if (t.querySelectorAll('tbody tr.series').length < 2) out.push('no series listed');
  return out;
})()"#;

/// The series pages and the index at a wide and a narrow window: text inside the charts and
/// apart, peak labels off other peaks' lines, counts in SI units, the index's header cells each on
/// one line; three humps of a mixture are three peaks.
#[test]
fn series_page_peak_table_lines_up_and_chart_text_stays_inside() {
    let Some(chrome) = viewsupport::chromium("series_page_peak_table_lines_up_and_chart_text_stays_inside") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench.db");
    fixture(&db);
    // fsync-like latencies with humps at 0.7, 2 and 5 ms (50, 30 and 20 %), and a series whose
    // tallest bar holds tens of millions of values.
    {
        let mut store = Store::open(&db).unwrap();
        let mix = store.ensure_series(&SeriesSpec::new("fsync-mix", kind::MICROBENCH, unit::NANOSECONDS)).unwrap();
        let many = store.ensure_series(&SeriesSpec::new("clock-many", kind::MICROBENCH, unit::NANOSECONDS)).unwrap();
        let mut x = 0x0bad_cafe_f00d_d00du64;
        for back in 0..6i64 {
            let mut h = Histogram::new();
            for k in 0..3_000 {
                let c = if k % 10 < 5 {
                    700_000.0
                } else if k % 10 < 8 {
                    2_000_000.0
                } else {
                    5_000_000.0
                };
                let (u, v) = (unit_f(&mut x), unit_f(&mut x));
                h.record((c * (0.8 + 0.2 * (u + v))) as u64);
            }
            let mut m = Histogram::new();
            m.record_n(1_000, 55_440_973);
            m.record_n(2_000, 20_000_000);
            m.record_n(3_000, 7_000_000);
            store.merge(&[(mix, Hour::now().plus(-back), &h), (many, Hour::now().plus(-back), &m)]).unwrap();
        }
    }
    let srv = Serve::start(&["--store", db.to_str().unwrap(), "--no-live"], &[]);
    for (w, h) in [(1400, 900), (700, 900)] {
        let mut b = Browser::launch(&chrome, w, h);
        for page in [
            "series?op=read-8GiB&hoursAgo=48&hours=&buckets=99",
            "series?op=clock-1us&hoursAgo=6&buckets=40&scale=linear",
            "series?op=fsync-mix&hoursAgo=12&buckets=60",
            "series?op=clock-many&hoursAgo=12&buckets=40&scale=linear",
            "",
        ] {
            b.goto(&format!("{}{page}", srv.url));
            b.wait_ready(30);
            let mut problems = layout_problems(&mut b);
            let more = b.eval(if page.is_empty() { INDEX_TABLE_JS } else { PEAK_LINES_JS });
            problems.extend(more.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()));
            assert!(problems.is_empty(), "{w} px: {page}: {problems:#?}");
            if page.is_empty() {
                png_is_not_blank(&b.screenshot(&artifacts().join(format!("series-index-{w}.png"))));
            }
            // Axis ticks are round: no trailing zeros (2us, not 2.00us).
            let ticks = b.eval(
                "[...document.querySelectorAll('svg.chart text:not(.peak):not(.count)')].map(t => t.textContent)",
            );
            for t in ticks.as_array().unwrap() {
                let t = t.as_str().unwrap();
                assert!(
                    !t.contains(".0") && !t.ends_with("0us")
                        || t.starts_with("10")
                        || t.starts_with("20")
                        || t.starts_with("50"),
                    "{w} px: {page}: tick {t}"
                );
            }
        }
        // The count axis in SI units, the exact count in its tooltip.
        b.goto(&format!("{}series?op=clock-many&hoursAgo=12&buckets=40&scale=linear", srv.url));
        b.wait_ready(30);
        let top = b.eval("[...document.querySelectorAll('#mergedchart text.count')].map(t => [t.childNodes[0].nodeValue, t.querySelector('title') ? t.querySelector('title').textContent : ''])");
        assert_eq!(top[0], serde_json::json!(["333M", "332645838 values"]), "{w} px: {top}");
        // Three humps, three peaks, at their modes.
        b.goto(&format!("{}series?op=fsync-mix&hoursAgo=12&buckets=60", srv.url));
        b.wait_ready(30);
        let peaks = b.eval("[...document.querySelectorAll('#peaks tr.peak')].map(r => r.textContent)");
        assert_eq!(peaks.as_array().unwrap().len(), 3, "{w} px: {peaks}");
        b.goto(&format!("{}series?op=read-8GiB&hoursAgo=48&hours=&buckets=99", srv.url));
        b.wait_ready(30);
        assert!(b.eval("document.querySelectorAll('#peaks tr.peak').length").as_u64().unwrap() >= 2);
        png_is_not_blank(&b.screenshot(&artifacts().join(format!("series-peaks-aligned-{w}.png"))));
        drop(b);
    }
    srv.stop();
}

#[test]
fn live_first_cell_clicked_keeps_events_and_tables_line_up_with_disks_only() {
    let test = "live_first_cell_clicked_keeps_events_and_tables_line_up_with_disks_only";
    if !common::require_bpf(test) {
        return;
    }
    let Some(chrome) = viewsupport::chromium(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("a-directory-with-a-rather-long-name-for-this-test").join("and-one-more-level-below-it");
    std::fs::create_dir_all(&deep).unwrap();
    let file = deep.join("the-data-file.bin");
    let _w = Load::start("lsw-first", "write", &file);
    let srv = Serve::start(&[], &[]);
    let mut b = Browser::launch(&chrome, 1400, 900);

    // Counting in the kernel: no events kept yet.
    b.goto(&format!("{}live?filter=proc.name%3Dlsw-first", srv.url));
    b.wait_ready(60);
    b.wait_for("+document.getElementById('heatmap').dataset.shown > 100", 60);
    assert_eq!(b.eval("document.body.dataset.mode"), serde_json::json!("counting"));
    // The axis starts at the decade below the fastest event, as the command line's pictures.
    let min = b.eval("view.axis.min_ns").as_u64().unwrap();
    assert_eq!(10u64.pow(min.ilog10()), min, "{min}");
    // Every decade of the latency axis is labelled (every second or third when they would touch),
    // inside the canvas and apart from the others.
    let max = b.eval("view.axis.max_ns").as_f64().unwrap();
    let labels = b.eval(
        "(() => { const c = document.getElementById('heatmap'); return { W: c.width, H: c.height, l: JSON.parse(c.dataset.labels) }; })()",
    );
    let (cw, ch) = (labels["W"].as_f64().unwrap(), labels["H"].as_f64().unwrap());
    let l = labels["l"].as_array().unwrap();
    let decades = l.iter().filter(|x| x["text"].as_str().is_some_and(|t| !t.starts_with('-') && t != "now")).count();
    let spanned = (max / min as f64).log10().floor() as usize + 1;
    assert!(decades >= spanned.min(3) && decades >= 2, "{decades} latency labels for {spanned} decades: {l:?}");
    for (i, a) in l.iter().enumerate() {
        let r = |v: &Value, k: &str| v[k].as_f64().unwrap();
        assert!(
            r(a, "x") >= -0.5
                && r(a, "x") + r(a, "w") <= cw + 0.5
                && r(a, "y") >= -0.5
                && r(a, "y") + r(a, "h") <= ch + 0.5,
            "{a} outside {cw}x{ch}"
        );
        for z in &l[i + 1..] {
            let apart = r(a, "x") + r(a, "w") <= r(z, "x") + 0.5
                || r(z, "x") + r(z, "w") <= r(a, "x") + 0.5
                || r(a, "y") + r(a, "h") <= r(z, "y") + 0.5
                || r(z, "y") + r(z, "h") <= r(a, "y") + 0.5;
            assert!(apart, "labels {a} and {z} overlap");
        }
    }

    // The first cell clicked switches to keeping events, and says so.
    let xy = b.eval(
        "(() => { const c = document.getElementById('heatmap'), W = c.width, H = c.height, L = 58, B = 16, n = ROWS; \
         const cw = (W - L) / n, rh = (H - B) / view.axis.cols, off = n - view.rows.length; \
         for (let k = view.rows.length - 1; k >= 0; k--) { const j = view.rows[k].counts.findIndex(x => x > 0); \
           if (j >= 0) { c.scrollIntoView({block: 'center'}); const r2 = c.getBoundingClientRect(); \
             return [r2.left + (L + (off + k + 0.5) * cw) * r2.width / W, r2.top + (H - B - (j + 0.5) * rh) * r2.height / H]; } } return null; })()",
    );
    let xy = xy.as_array().expect("a cell with events");
    b.click_at(xy[0].as_f64().unwrap(), xy[1].as_f64().unwrap());
    b.wait_for("document.getElementById('cellinfo').textContent.includes('From now on the last events are kept')", 30);
    assert_eq!(b.eval("document.querySelector('input[name=stream]').checked"), serde_json::json!(true));
    assert!(b.eval("location.search").as_str().unwrap().contains("stream=1"));

    // The tables come: disks only, paths shortened in the middle, columns under their headers.
    b.wait_for("document.body.dataset.mode === 'streaming'", 60);
    b.wait_for("document.querySelectorAll('table[data-by=file] tr[data-name]').length > 0", 60);
    b.wait_for("document.querySelectorAll('table[data-by=disk] tr[data-name]').length > 0", 60);
    let disks = b.eval("[...document.querySelectorAll('table[data-by=disk] tr[data-name]')].map(r => r.dataset.name)");
    for d in disks.as_array().unwrap() {
        let d = d.as_str().unwrap();
        assert!(
            Path::new("/sys/class/block").join(d).exists() || d.contains(':') && !d.starts_with("0:"),
            "not a disk: {d}"
        );
    }
    let cell = b.eval(&format!(
        "(() => {{ const r = [...document.querySelectorAll('table[data-by=file] tr[data-name]')].find(r => r.dataset.name === {:?}); \
         return r ? [r.querySelector('td.name').textContent, r.querySelector('td.name').title] : null; }})()",
        file.to_str().unwrap()
    ));
    let cell = cell.as_array().unwrap_or_else(|| panic!("no row of {}", file.display()));
    let shown = cell[0].as_str().unwrap();
    assert!(shown.contains('…') && shown.ends_with("/the-data-file.bin") && shown.starts_with('/'), "{shown}");
    assert_eq!(cell[1].as_str().unwrap(), file.to_str().unwrap());
    let problems = layout_problems(&mut b);
    assert!(problems.is_empty(), "{problems:#?}");
    png_is_not_blank(&b.screenshot(&artifacts().join("live-first-click.png")));
    drop(b);
    srv.stop();
}

/// POST a live API request (form-encoded `pairs`): the status and the JSON answer.
fn post_live(addr: &str, path: &str, pairs: &[(&str, String)]) -> (u16, Value) {
    let form: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", form_urlencoded(v))).collect();
    let form = form.join("&");
    let (status, _, body) = http(
        addr,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        ),
    );
    (status, serde_json::from_str(&body).unwrap_or_else(|_| panic!("{path}: not JSON: {body}")))
}

/// The attribution workload (tests/why.c) under a command name of its own: the live sessions of
/// these tests filter on it, so other processes (other tests' workloads) stay out.
fn why_workload(dir: &Path, name: &str) -> PathBuf {
    let built = common::compile_c("why.c", dir);
    let named = dir.join(name);
    std::fs::rename(&built, &named).unwrap();
    named
}

/// The workload's `key value` lines (thread ids, ground truth).
fn key_values(out: &[u8]) -> std::collections::HashMap<String, i64> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// A session with `why=1` records attribution: the breakdown of a selected rectangle names the
/// true cause of a pipe read whose writer sleeps 20 ms (pipe/socket, the ground truth's time
/// within 5 % of the reads' latency), the writer as the waker (which was in timer/sleep meanwhile)
/// and the pipe read's kernel stack; the writer's sleeps are left out, and counted with `waits=1`
/// (a session of its own), each view saying which; a session without `why` is another session,
/// which counts in the kernel and says it has no breakdown.
#[test]
fn live_why_breakdown_of_a_cell_names_the_cause_and_the_waker() {
    let test = "live_why_breakdown_of_a_cell_names_the_cause_and_the_waker";
    if !common::require_bpf(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let name = "lswhy-api";
    let work = why_workload(dir.path(), name);
    let srv = Serve::start(&[], &[]);
    let a = srv.addr();
    let filter = format!("proc.name = {name}");
    // A session's query: with attribution (why=1), with idle waits counted (waits=1).
    let view = |why: bool, waits: bool| -> Vec<(&str, String)> {
        let mut v = vec![
            ("filter", filter.clone()),
            ("rows", "60".into()),
            ("cols", "30".into()),
            ("min", "1ms".into()),
            ("max", "1s".into()),
        ];
        if why {
            v.push(("why", "1".into()));
        }
        if waits {
            v.push(("waits", "1".into()));
        }
        v
    };
    let running = |why: bool, waits: bool| -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (status, v) = post_live(&a, "/api/live", &view(why, waits));
            assert_eq!(status, 200, "{v}");
            if v["state"] == "running" {
                return v;
            }
            assert_ne!(v["state"], "failed", "{v}");
            assert!(Instant::now() < deadline, "the live session did not start: {v}");
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    let v = running(true, false);
    assert_eq!(v["mode"], "streaming", "{v}");
    assert!(v["streaming_reason"].as_str().unwrap().contains("attribution"), "{v}");
    // The same view counting idle waits: a session of its own, started before the workload too.
    running(true, true);

    // Ground truth: 20 reads of a pipe whose writer sleeps 20 ms before each write.
    let out = Command::new(&work).args(["pipe", "20", "20"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let kv = key_values(&out.stdout);
    // The rows holding the reads are sealed a little after they end (the session is kept alive).
    let end = Instant::now();
    let mut v = running(true, false);
    while end.elapsed() < Duration::from_millis(1500) {
        std::thread::sleep(Duration::from_millis(300));
        v = running(true, false);
        running(true, true);
    }
    // The breakdown of every sealed row of a session.
    let all_rows = |v: &Value, waits: bool| -> Value {
        let (first, sealed) = (v["first_row"].as_u64().unwrap(), v["sealed"].as_u64().unwrap());
        let mut q = view(true, waits);
        q.extend([
            ("r0", first.to_string()),
            ("r1", (sealed - 1).to_string()),
            ("c0", "0".into()),
            ("c1", "29".into()),
        ]);
        let (status, e) = post_live(&a, "/api/live/events", &q);
        assert_eq!(status, 200, "{e}");
        e
    };
    let e = all_rows(&v, false);
    let w = &e["why"];
    let op = &w["operations"][0];
    assert_eq!(op["op"], "read", "{w}");
    assert_eq!(op["calls"], 20, "{w}");
    let (ipc, total) = (op["parts_ns"]["ipc"].as_u64().unwrap(), op["total_ns"].as_u64().unwrap());
    let truth = kv["blocked_ns"] as u64;
    assert!(ipc.abs_diff(truth) * 100 <= total * 5, "pipe/socket {ipc} ns, truth {truth} ns, of {total} ns: {w}");
    let parts = w["parts_ns"].as_object().unwrap();
    assert_eq!(parts.values().map(|x| x.as_u64().unwrap()).sum::<u64>(), w["total_ns"].as_u64().unwrap(), "{w}");
    let largest = parts.iter().max_by_key(|(_, x)| x.as_u64().unwrap()).unwrap().0;
    assert_eq!(largest, "ipc", "{w}");
    assert_eq!(w["labels"]["ipc"], "pipe/socket");
    let waker = &w["wakers"][0];
    assert_eq!(waker["waker"], format!("{name}/{}", kv["writer"]), "{w}");
    assert_eq!(waker["cause"], "ipc", "{w}");
    assert_eq!(waker["was_in"]["cause"], "timer", "the writer sleeps before each write: {w}");
    // The writer's sleeps are idle waits: the heat map leaves them out, so the cell holds the
    // reads (and, on a loaded machine, the odd other call over 1 ms) but no sleep, and the view
    // says they are left out.
    let calls = |w: &Value, names: &[&str]| -> u64 {
        let ops = w["operations"].as_array().unwrap();
        let of = |o: &&Value| names.iter().any(|n| o["op"] == *n);
        ops.iter().filter(of).map(|o| o["calls"].as_u64().unwrap()).sum()
    };
    let sleeps = ["nanosleep", "clock_nanosleep"];
    assert_eq!((calls(w, &sleeps), w["idle_waits_left_out"].as_u64()), (0, Some(0)), "{w}");
    assert!(v["counted"].as_str().unwrap().contains("idle waits left out"), "the view says so: {v}");
    // Counted when asked for (waits=1): the same reads and the writer's 20 sleeps, in the timer,
    // and the view says they are included.
    let vw = running(true, true);
    assert_eq!(vw["counted"], " (idle waits included)", "{vw}");
    let ww = &all_rows(&vw, true)["why"];
    assert_eq!((calls(ww, &["read"]), calls(ww, &sleeps)), (20, 20), "{ww}");
    assert!(ww["parts_ns"]["timer"].as_u64().unwrap() > 0, "{ww}");
    let stack = &w["stacks"]["stacks"][0];
    assert_eq!(stack["op"], "read", "{w}");
    assert!(stack["kernel"].as_array().unwrap().iter().any(|f| f.as_str().unwrap().contains("pipe_read")), "{stack}");
    // Every read blocked in it, in one user stack: libc keeps no frame pointers, and the walk's
    // frames beyond it that lead outside any mapping are dropped, not kept as noise that would
    // split the stack (the last reads' user stacks may be missing: the process exited before
    // they were read, and they say so).
    let blocked = w["stacks"]["total_blocked_ns"].as_u64().unwrap();
    assert!(blocked >= ipc, "{blocked} ns blocked with a stack, {ipc} ns in pipe reads: {w}");
    let stacks = w["stacks"]["stacks"].as_array().unwrap();
    assert_eq!(stacks.iter().filter(|s| s["user_missing"].is_null()).count(), 1, "{w}");
    assert!(stacks.iter().all(|s| s["kernel"] == stack["kernel"]), "{w}");

    // The threads view of the session (`timeline --threads` of its last seconds): the reader and
    // the writer, each write drawn waking the read it ended.
    let mut tq = view(true, false);
    tq.extend([("seconds", "60".into()), ("rows", "10".into())]);
    let (status, t) = post_live(&a, "/api/live/threads", &tq);
    assert_eq!(status, 200, "{t}");
    assert!(t["threads"].as_u64().unwrap() >= 2, "{t}");
    assert!(t["wakeups"].as_u64().unwrap() >= 15, "20 writes woke 20 reads: {t}");
    let svg = t["svg"].as_str().unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains(&format!("{name}/{}", kv["writer"])), "{svg}");

    // The same filter without why: a session of its own, counting in the kernel, no breakdown.
    let v = running(false, false);
    assert_eq!(v["mode"], "counting", "{v}");
    let mut q = view(false, false);
    q.extend([("r0", v["first_row"].to_string()), ("c0", "0".into()), ("c1", "29".into())]);
    let (status, e) = post_live(&a, "/api/live/events", &q);
    assert_eq!(status, 200, "{e}");
    assert!(e["why"].is_null() && e["why_note"].as_str().unwrap().contains("why=1"), "{e}");
    running(true, true);
    let (_, _, body) = get(&a, "/api/health", "");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["live_sessions"], 3, "{body}");
    // Attribution is per syscall: with block requests it is refused, saying so.
    let mut q = view(true, false);
    q.push(("block", "1".into()));
    let (status, e) = post_live(&a, "/api/live", &q);
    assert_eq!(status, 400);
    assert!(e["error"].as_str().unwrap().contains("uncheck block requests"), "{e}");
    srv.stop();
}

/// Text of `root` whose lines overlap (each text node's line boxes against every other's), and
/// how many line boxes there are.
const TEXT_OVERLAPS_JS: &str = r#"((root) => {
  const boxes = [];
  const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n; (n = walk.nextNode());) {
    if (!n.textContent.trim()) continue;
    const r = document.createRange(); r.selectNodeContents(n);
    for (const b of r.getClientRects()) if (b.width > 0 && b.height > 0) boxes.push([n, n.textContent.trim().slice(0, 40), b]);
  }
  const out = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [n, s, a] = boxes[i], [m, u, b] = boxes[j];
    if (n === m) continue;
    if (a.right - 0.5 > b.left && b.right - 0.5 > a.left && a.bottom - 0.5 > b.top && b.bottom - 0.5 > a.top) out.push(`'${s}' and '${u}' overlap`);
  }
  return [boxes.length, out];
})(document.getElementById('why'))"#;

/// The live page with "why was it slow": a cell of pipe reads selected (clicked, then opened with
/// `cell=busiest`) shows the breakdown, a stacked bar and tables with the pipe first and the
/// writer as the waker, and the top blocking stack, with units on every number and no text
/// overlapping.
#[test]
fn live_page_draws_the_breakdown_of_a_selected_cell() {
    let test = "live_page_draws_the_breakdown_of_a_selected_cell";
    if !common::require_bpf(test) {
        return;
    }
    let Some(chrome) = viewsupport::chromium(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    let name = "lswhy-page";
    let work = why_workload(dir.path(), name);
    let srv = Serve::start(&[], &[]);
    let mut b = Browser::launch(&chrome, 1400, 1600);
    let filter = form_urlencoded(&format!("proc.name = {name}"));
    b.goto(&format!("{}live?filter={filter}&why=1&min=1ms&max=1s", srv.url));
    b.wait_for("document.body.dataset.mode === 'streaming'", 60);
    assert_eq!(b.eval("document.querySelector('input[name=why]').checked"), serde_json::json!(true));
    // Reads of a pipe whose writer sleeps 20 ms, for up to 20 s (stopped at the end).
    let child = Command::new(&work).args(["pipe", "1000", "20"]).stdout(Stdio::null()).spawn().unwrap();
    let _load = Load(child);
    b.wait_for("+document.getElementById('heatmap').dataset.shown >= 20", 60);
    // A cell of the latest row with events holding reads (the writer's sleeps, ~20 ms too, are
    // idle waits with no breakdown unless asked for, and may fall in a column of their own).
    let xy = b.eval(
        "(async () => { const c = document.getElementById('heatmap'), W = c.width, H = c.height, L = 58, B = 16, n = ROWS; \
         const d = view, cw = (W - L) / n, rh = (H - B) / d.axis.cols, off = n - d.rows.length; \
         for (let k = d.rows.length - 1; k >= 0; k--) for (let j = 0; j < d.axis.cols; j++) { if (!d.rows[k].counts[j]) continue; \
           const e = await LS.post('/api/live/events', Object.assign({ r0: d.rows[k].i, c0: j, cols: COLS }, base, { min: d.axis.min_ns + 'ns', max: d.axis.max_ns + 'ns' })); \
           if (e.why && e.why.operations.some(o => o.op === 'read')) { c.scrollIntoView({block: 'center'}); const r2 = c.getBoundingClientRect(); \
             return [r2.left + (L + (off + k + 0.5) * cw) * r2.width / W, r2.top + (H - B - (j + 0.5) * rh) * r2.height / H]; } } return null; })()",
    );
    let xy = xy.as_array().expect("a cell with events");
    b.click_at(xy[0].as_f64().unwrap(), xy[1].as_f64().unwrap());
    b.wait_for("+document.getElementById('why').dataset.calls > 0", 30);
    b.eval("document.getElementById('why').scrollIntoView()");
    assert_eq!(b.eval("document.querySelector('#whycause tr[data-part]').dataset.part"), serde_json::json!("ipc"));
    assert_eq!(b.eval("document.querySelector('#whybar rect').dataset.part"), serde_json::json!("ipc"));
    let label = b.eval("[...document.querySelectorAll('#whybar text')].map(t => t.textContent).join('|')");
    assert!(label.as_str().unwrap().starts_with("pipe/socket "), "{label}");
    let waker = b.eval("Object.assign({}, document.querySelector('#whywaker tr[data-waker]').dataset)");
    assert!(waker["waker"].as_str().unwrap().starts_with(&format!("{name}/")), "{waker}");
    assert_eq!(waker["wasIn"], "timer", "{waker}");
    let stack = b.eval("document.querySelector('#whystacks pre.stack').textContent");
    assert!(stack.as_str().unwrap().contains("pipe_read"), "{stack}");
    // Units on every number of the tables.
    let nums = b.eval("[...document.querySelectorAll('#why td.num')].map(t => t.textContent)");
    for n in nums.as_array().unwrap() {
        let n = n.as_str().unwrap();
        assert!(["ns", "us", "ms", "s", " %", " call"].iter().any(|u| n.ends_with(u)), "no unit: {n}");
    }
    let problems = layout_problems(&mut b);
    assert!(problems.is_empty(), "{problems:#?}");
    let overlaps = b.eval(TEXT_OVERLAPS_JS);
    assert!(overlaps[0].as_u64().unwrap() > 10, "{overlaps}");
    assert!(overlaps[1].as_array().unwrap().is_empty(), "{overlaps}");
    png_is_not_blank(&b.screenshot(&artifacts().join("live-why.png")));

    // A link that opens on a drill-down (cell=busiest; blocking waits counted, as the busiest
    // cell may hold only the writer's sleeps): the same session, a breakdown drawn.
    b.goto(&format!("{}live?filter={filter}&why=1&waits=1&min=1ms&max=1s&cell=busiest", srv.url));
    b.wait_for("+document.getElementById('why').dataset.calls > 0", 30);
    let parts = b.eval("[...document.querySelectorAll('#whycause tr[data-part]')].map(r => r.dataset.part)");
    assert!(parts[0] == "ipc" || parts[0] == "timer", "{parts}");
    let problems = layout_problems(&mut b);
    assert!(problems.is_empty(), "{problems:#?}");
    drop(b);
    srv.stop();
}

/// A flight recorder's dump, as one writes it: a header saying what fired it, a slow call with
/// its breakdown among ordinary ones.
fn write_dump(path: &Path) -> u64 {
    use latscope_event::{Event, FlightInfo, TraceHeader};
    let start = 1_000_000_000_000u64;
    let slow_lat = 212_000_000;
    let header = TraceHeader {
        hostname: "db1".into(),
        start_ns: start,
        realtime_offset_ns: 1_795_000_000_000_000_000 - start as i64,
        syscalls: "all".into(),
        flight: Some(FlightInfo {
            trigger: "slow".into(),
            condition: "evt.latency > 150ms".into(),
            reason: "fsync on /data/db by pg (pid 7) took 212ms".into(),
            at_ns: start + 2_000_000_000,
            before_ns: 2_000_000_000,
            after_ns: 1_000_000_000,
        }),
        ..Default::default()
    };
    let fsync = latscope_event::syscall_nr("fsync").unwrap();
    let write = latscope_event::syscall_nr("write").unwrap();
    let mut events = Vec::new();
    for i in 0..300u64 {
        events.push(Event {
            ts: start + i * 10_000_000,
            lat: 50_000,
            nr: write,
            pid: 7,
            tid: 7,
            fd: 3,
            comm: "pg".into(),
            path: "/data/db".into(),
            ..Default::default()
        });
    }
    events.push(Event {
        ts: start + 2_000_000_000 - slow_lat,
        lat: slow_lat,
        nr: fsync,
        pid: 7,
        tid: 7,
        fd: 3,
        why_io: slow_lat - 1_000_000,
        why_cpu: 1_000_000,
        comm: "pg".into(),
        path: "/data/db".into(),
        ..Default::default()
    });
    events.sort_by_key(|e| e.ts);
    latscope_trace::synth::write_events(path, &header, &events, latscope_trace::Summary::default()).unwrap();
    slow_lat
}

/// The dumps page and a dump's views; a dump recorded with on-CPU samples also says where the
/// CPU went (its functions and flame graph).
#[test]
fn the_dumps_page_lists_each_dump_with_links_to_its_views() {
    let Some(chrome) = viewsupport::chromium("the_dumps_page_lists_each_dump_with_links_to_its_views") else { return };
    let dir = tempfile::tempdir().unwrap();
    let name = "flight-20261118T110642.000Z-slow.lst";
    let slow = write_dump(&dir.path().join(name));
    // Not dumps: a file of another name, and a link with a dump's name.
    std::fs::write(dir.path().join("notes.lst"), b"x").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("flight-20261118T110643.000Z-x.lst")).unwrap();
    let srv = Serve::start(&["--no-live", "--dumps", dir.path().to_str().unwrap()], &[]);
    let addr = srv.addr();
    let (st, _, body) = get(&addr, "/api/dumps", "");
    assert_eq!(st, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let dumps = v["dumps"].as_array().unwrap();
    assert_eq!(dumps.len(), 1, "{v}");
    assert_eq!(
        (dumps[0]["file"].as_str(), dumps[0]["trigger"].as_str(), dumps[0]["events"].as_u64()),
        (Some(name), Some("slow"), Some(301))
    );
    let (st, _, body) = get(&addr, &format!("/api/dump?d=0&f={name}"), "");
    assert_eq!(st, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["slowest"][0]["lat_ns"].as_u64(), Some(slow));
    assert!(v["slowest"][0]["why"].as_str().unwrap().starts_with("block I/O 211ms"), "{v}");
    for bad in ["../../etc/passwd", "notes.lst", "flight-20261118T110643.000Z-x.lst"] {
        let (st, _, body) = get(&addr, &format!("/api/dump?d=0&f={bad}"), "");
        assert_eq!(st, 404, "{bad}: {body}");
    }
    let (st, head, body) = get(&addr, &format!("/api/dump/heatmap.svg?d=0&f={name}"), "");
    assert!(st == 200 && head.to_ascii_lowercase().contains("content-type: image/svg+xml") && body.contains("<svg"));

    let mut b = Browser::launch(&chrome, 1400, 1000);
    b.goto(&format!("{}dumps", srv.url));
    b.wait_ready(30);
    let link = b.eval("document.querySelector('tr.dump a').getAttribute('href')");
    assert_eq!(link, serde_json::json!(format!("/dump?d=0&f={name}")));
    b.click("tr.dump a");
    b.wait_for("location.pathname === '/dump' && document.body.dataset.ready === '1'", 30);
    let t = b.text();
    assert!(t.contains("trigger slow (evt.latency > 150ms) fired at 2026-11-18 11:06:42.000 UTC"), "{t}");
    let first = b.eval("[...document.querySelectorAll('#slowest tr.call')[0].children].map(c => c.textContent)");
    assert_eq!(first[1], "212ms");
    assert_eq!(first[3], "fsync");
    b.wait_for(
        "document.getElementById('heatmap').naturalWidth > 0 && document.getElementById('why').naturalWidth > 0",
        30,
    );
    png_is_not_blank(&b.screenshot(&artifacts().join("dump.png")));
    assert!(b.eval("document.getElementById('oncpu').hidden") == serde_json::json!(true), "no samples, no section");

    // A dump with on-CPU samples (`record --profile`): where the CPU went, by function and as a
    // flame graph. The program spends its CPU 7:3 in hot_a and hot_b (tests/profile.c).
    if !common::require_bpf("the_dumps_page_lists_each_dump_with_links_to_its_views (on-CPU samples)") {
        return;
    }
    let work = dir.path().join("profile");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/profile.c");
    let st = Command::new("cc").args(["-O2", "-fomit-frame-pointer", "-o"]).arg(&work).arg(&src).status().unwrap();
    assert!(st.success(), "compiling {}", src.display());
    let cpu = "flight-20261118T110700.000Z-cpu.lst";
    let trace = dir.path().join(cpu);
    common::latscope_ok(&[
        "record",
        "-w",
        trace.to_str().unwrap(),
        "--profile",
        "499",
        "--quiet",
        "--no-block",
        "--",
        work.to_str().unwrap(),
        "0.4",
    ]);
    let (st, _, body) = get(&addr, &format!("/api/dump?d=0&f={cpu}"), "");
    assert_eq!(st, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["on_cpu"]["functions"][0]["function"], "hot_a", "{}", v["on_cpu"]);
    let (st, _, body) = get(&addr, &format!("/api/dump/flame.svg?d=0&f={cpu}"), "");
    assert!(st == 200 && body.contains("hot_a"), "{st}");
    let (st, _, _) = get(&addr, &format!("/api/dump/flame.svg?d=0&f={name}"), "");
    assert_eq!(st, 404, "a dump without samples has no flame graph");
    b.goto(&format!("{}dump?d=0&f={cpu}", srv.url));
    b.wait_for(
        "document.body.dataset.ready === '1' && !document.getElementById('oncpu').hidden && \
         document.getElementById('flame').naturalWidth > 0",
        30,
    );
    let first = b.eval("[...document.querySelectorAll('#oncpufns tr.fn')[0].children].map(c => c.textContent)");
    assert_eq!(first[0], "hot_a", "{first}");
}

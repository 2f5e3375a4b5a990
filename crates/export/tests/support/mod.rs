//! What the server tests share: tool checks with CI semantics, free ports, child processes that
//! die with the test, a minimal HTTP client, Prometheus and carbon-cache started on loopback ports.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// True if `tool` is on PATH; otherwise SKIPPED, or a failure under CI=true.
#[allow(unused_imports)] // each test file uses some
pub use latscope_testkit::require_tool;

/// A loopback port nobody listens on (right now).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child process killed when dropped; its output goes to a log file shown on failure.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(cmd: &mut Command, log: &Path) -> Proc {
        let f = std::fs::File::create(log).unwrap();
        let child = cmd
            .stdout(Stdio::from(f.try_clone().unwrap()))
            .stderr(Stdio::from(f))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        Proc { child, log: log.to_path_buf() }
    }

    /// The process's output so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encodes a query string value.
pub fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `GET path` on `127.0.0.1:port` with extra headers: (status, content type, body).
pub fn http_get(port: u16, path: &str, headers: &[(&str, &str)]) -> std::io::Result<(u16, String, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut req = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let split = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(buf.len());
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let body = buf.get(split + 4..).unwrap_or(&[]).to_vec();
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let ctype = head
        .lines()
        .find_map(|l| {
            l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-type")).map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    Ok((status, ctype, body))
}

/// Polls `f` every 200 ms until it returns `Some`, for at most `timeout`.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A Prometheus server on a loopback port scraping `targets` every second.
pub struct Prometheus {
    pub port: u16,
    pub proc: Proc,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus (with native histograms if `native`) and waits until it is ready.
    pub fn start(targets: &[String], native: bool) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("prometheus.yml");
        let list = targets.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
        std::fs::write(
            &cfg,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: latscope\n    static_configs:\n      - targets: [{list}]\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let mut cmd = Command::new("prometheus");
        cmd.arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn");
        if native {
            cmd.arg("--enable-feature=native-histograms");
        }
        let proc = Proc::spawn(&mut cmd, &dir.path().join("log"));
        let ready = wait_for(Duration::from_secs(60), || {
            http_get(port, "/-/ready", &[]).ok().filter(|r| r.0 == 200).map(|_| ())
        });
        assert!(ready.is_some(), "prometheus did not become ready:\n{}", proc.output());
        Prometheus { port, proc, _dir: dir }
    }

    /// An instant query: the API's JSON answer (status checked by the caller).
    pub fn query(&self, q: &str) -> serde_json::Value {
        let (status, _, body) = http_get(self.port, &format!("/api/v1/query?query={}", urlencode(q)), &[]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{q}: HTTP {status}, not JSON ({e}): {}", String::from_utf8_lossy(&body)));
        v
    }

    /// The single value of an instant vector query, once it has one (within 60 s).
    pub fn value(&self, q: &str) -> f64 {
        let r = wait_for(Duration::from_secs(60), || {
            let v = self.query(q);
            assert_eq!(v["status"], "success", "{q}: {v}");
            let s = v["data"]["result"][0]["value"][1].as_str()?.to_string();
            s.parse::<f64>().ok()
        });
        r.unwrap_or_else(|| panic!("{q}: no value within 60 s\n{}", self.proc.output()))
    }
}

/// carbon-cache configured by the test: root, loopback, its own directories, one point per
/// second kept for an hour.
pub struct Carbon {
    pub dir: PathBuf,
    pub line_port: u16,
    pub proc: Option<Proc>,
}

impl Carbon {
    pub fn new(dir: &Path) -> Carbon {
        let line_port = free_port();
        let conf = dir.join("conf");
        for d in ["conf", "storage/whisper", "storage/lists", "log", "run"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        std::fs::write(
            conf.join("carbon.conf"),
            format!(
                "[cache]\nSTORAGE_DIR = {d}/storage/\nLOCAL_DATA_DIR = {d}/storage/whisper/\nWHITELISTS_DIR = {d}/storage/lists/\n\
                 CONF_DIR = {d}/conf/\nLOG_DIR = {d}/log/\nPID_DIR = {d}/run/\nDATABASE = whisper\nUSER =\n\
                 ENABLE_TAGS = False\nMAX_CACHE_SIZE = inf\nMAX_UPDATES_PER_SECOND = 100000\nMAX_CREATES_PER_MINUTE = inf\n\
                 LINE_RECEIVER_INTERFACE = 127.0.0.1\nLINE_RECEIVER_PORT = {line_port}\nENABLE_UDP_LISTENER = False\n\
                 PICKLE_RECEIVER_INTERFACE = 127.0.0.1\nPICKLE_RECEIVER_PORT = {}\nCACHE_QUERY_INTERFACE = 127.0.0.1\n\
                 CACHE_QUERY_PORT = {}\nCACHE_WRITE_STRATEGY = sorted\nWHISPER_AUTOFLUSH = True\nWHISPER_FALLOCATE_CREATE = False\n",
                free_port(),
                free_port(),
                d = dir.display()
            ),
        )
        .unwrap();
        std::fs::write(conf.join("storage-schemas.conf"), "[all]\npattern = .*\nretentions = 1s:1h\n").unwrap();
        Carbon { dir: dir.to_path_buf(), line_port, proc: None }
    }

    pub fn start(&mut self) {
        let mut cmd = Command::new("carbon-cache");
        cmd.arg(format!("--config={}", self.dir.join("conf/carbon.conf").display()))
            .arg(format!("--pidfile={}", self.dir.join("run/carbon.pid").display()))
            .args(["--nodaemon", "--logfile=-", "start"]);
        let p = Proc::spawn(&mut cmd, &self.dir.join("log/out.txt"));
        let up = wait_for(Duration::from_secs(60), || std::net::TcpStream::connect(("127.0.0.1", self.line_port)).ok());
        assert!(up.is_some(), "carbon-cache did not listen:\n{}", p.output());
        self.proc = Some(p);
    }

    pub fn stop(&mut self) {
        self.proc = None;
        let _ = std::fs::remove_file(self.dir.join("run/carbon.pid"));
    }

    /// `(timestamp, value)` points of `path` (dotted) from `whisper-fetch`, nulls dropped.
    pub fn fetch(&self, path: &str, from: i64) -> Vec<(i64, f64)> {
        let file = self.dir.join("storage/whisper").join(format!("{}.wsp", path.replace('.', "/")));
        if !file.exists() {
            return Vec::new();
        }
        let o = Command::new("whisper-fetch")
            .arg(format!("--from={}", from - 1))
            .arg("--drop=nulls")
            .arg(&file)
            .output()
            .expect("whisper-fetch runs");
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| {
                let (t, v) = l.split_once('\t')?;
                Some((t.trim().parse().ok()?, v.trim().parse().ok()?))
            })
            .collect()
    }

    /// Waits for `want` (timestamp, value) points under `path`, values equal to 6 decimals (what
    /// whisper-fetch prints).
    pub fn expect(&self, path: &str, from: i64, want: &[(i64, f64)]) {
        let got = wait_for(Duration::from_secs(60), || {
            let got = self.fetch(path, from);
            let all =
                want.iter().all(|(t, v)| got.iter().any(|(gt, gv)| gt == t && (gv - v).abs() <= 1e-6 + v.abs() * 1e-9));
            all.then_some(got)
        });
        assert!(
            got.is_some(),
            "{path}: want {want:?}, whisper has {:?}\n{}",
            self.fetch(path, from),
            self.proc.as_ref().map(|p| p.output()).unwrap_or_default()
        );
    }
}

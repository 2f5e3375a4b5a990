//! A real carbon-cache receives what the Graphite client pushes (started late, stopped and
//! started again meanwhile), and whisper-fetch reads latscope's numbers back.

mod support;

use latscope_export::graphite::{metric_path, GraphiteClient, GraphiteOptions};
use latscope_hist::Histogram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::*;

/// carbon-cache configured by the test: root, loopback, its own directories, one point per
/// second kept for an hour.
struct Carbon {
    dir: PathBuf,
    line_port: u16,
    proc: Option<Proc>,
}

impl Carbon {
    fn new(dir: &Path) -> Carbon {
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

    fn start(&mut self) {
        let mut cmd = Command::new("carbon-cache");
        cmd.arg(format!("--config={}", self.dir.join("conf/carbon.conf").display()))
            .arg(format!("--pidfile={}", self.dir.join("run/carbon.pid").display()))
            .args(["--nodaemon", "--logfile=-", "start"]);
        let p = Proc::spawn(&mut cmd, &self.dir.join("log/out.txt"));
        let up = wait_for(Duration::from_secs(60), || std::net::TcpStream::connect(("127.0.0.1", self.line_port)).ok());
        assert!(up.is_some(), "carbon-cache did not listen:\n{}", p.output());
        self.proc = Some(p);
    }

    fn stop(&mut self) {
        self.proc = None;
        let _ = std::fs::remove_file(self.dir.join("run/carbon.pid"));
    }

    /// `(timestamp, value)` points of `path` (dotted) from `whisper-fetch`, nulls dropped.
    fn fetch(&self, path: &str, from: i64) -> Vec<(i64, f64)> {
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
    fn expect(&self, path: &str, from: i64, want: &[(i64, f64)]) {
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

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

#[test]
fn carbon_stores_what_the_client_pushes_across_restarts() {
    let test = "carbon_stores_what_the_client_pushes_across_restarts";
    if !require_tool(test, "carbon-cache") || !require_tool(test, "whisper-fetch") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut carbon = Carbon::new(dir.path());
    let o = GraphiteOptions {
        min_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(500),
        ..Default::default()
    };
    // The client starts before the server: lines wait in its queue.
    let client = GraphiteClient::new(&format!("127.0.0.1:{}", carbon.line_port), o).unwrap();
    let t0 = now() - 10;
    let h: Histogram = (1..=1000u64).map(|i| i * 10_000).collect(); // 10 µs .. 10 ms
    let prefix = metric_path(&["latscope", "web01.example.com", "syscall", "read"]);
    assert_eq!(prefix, "latscope.web01_example_com.syscall.read");
    client.send_histogram(&prefix, &h, t0);
    client.send("latscope.web01_example_com.lost", 0.0, t0);
    assert!(!client.flush(Duration::from_millis(300)), "nobody listens yet");
    carbon.start();
    assert!(client.flush(Duration::from_secs(30)), "{:?}", client.stats());
    let secs = |v: u64| v as f64 * 1e-9;
    carbon.expect(&format!("{prefix}.count"), t0, &[(t0, 1000.0)]);
    for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        carbon.expect(&format!("{prefix}.{name}"), t0, &[(t0, secs(h.value_at_quantile(q).unwrap()))]);
    }
    carbon.expect(&format!("{prefix}.max"), t0, &[(t0, 0.01)]);
    carbon.expect("latscope.web01_example_com.lost", t0, &[(t0, 0.0)]);

    // The server goes away and comes back: what was sent meanwhile arrives.
    carbon.stop();
    let t1 = t0 + 1;
    for i in 0..5 {
        client.send("latscope.web01_example_com.events", f64::from(100 + i), t1 + i64::from(i));
    }
    std::thread::sleep(Duration::from_millis(300));
    carbon.start();
    assert!(client.flush(Duration::from_secs(30)), "{:?}", client.stats());
    let want: Vec<(i64, f64)> = (0..5).map(|i| (t1 + i, f64::from(100 + i as u32))).collect();
    carbon.expect("latscope.web01_example_com.events", t1, &want);
    let st = client.close(Duration::from_secs(5));
    assert_eq!(st.sent, 11, "{st:?}"); // 5 histogram lines, lost, 5 events
    assert_eq!(st.dropped, 0);
    assert!(st.connects >= 2 && st.failures >= 1, "{st:?}");
}

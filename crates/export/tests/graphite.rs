//! A real carbon-cache receives what the Graphite client pushes (started late, stopped and
//! started again meanwhile), and whisper-fetch reads latscope's numbers back.

mod support;

use latscope_export::graphite::{metric_path, GraphiteClient, GraphiteOptions};
use latscope_hist::Histogram;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::*;

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

//! A real Prometheus scrapes latscope's exposition server: native histograms over protobuf (with
//! `--enable-feature=native-histograms`) and classic buckets over OpenMetrics text (without), and
//! its `histogram_count`, `histogram_sum` and `histogram_quantile` give latscope's numbers.

mod support;

use latscope_export::prometheus::{
    schema_resolution, ExpositionServer, Format, HistogramOptions, Metrics, NativeHistogram, NativeOptions,
    SharedMetrics, PROTOBUF_CONTENT_TYPE,
};
use latscope_hist::Histogram;
use std::time::{Duration, Instant};
use support::*;

/// Latencies of real sleeps, as latscope would record them.
fn sleeps(n: usize, d: Duration) -> Histogram {
    let mut h = Histogram::new();
    for _ in 0..n {
        let t = Instant::now();
        std::thread::sleep(d);
        h.record(t.elapsed().as_nanos() as u64);
    }
    h
}

/// Log-uniform values from 1 µs to ~1 s: wide enough to need the bucket limit.
fn wide() -> Histogram {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut h = Histogram::new();
    for _ in 0..5000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let e = 10 + x % 20;
        h.record((1 << e) + (x >> 20) % (1 << e));
    }
    h
}

fn fine() -> HistogramOptions {
    HistogramOptions { native: NativeOptions { schema: 8, max_buckets: 0, ..Default::default() }, ..Default::default() }
}

#[test]
fn prometheus_reads_native_histograms_and_classic_buckets_with_latscopes_numbers() {
    let test = "prometheus_reads_native_histograms_and_classic_buckets_with_latscopes_numbers";
    if !require_tool(test, "prometheus") {
        return;
    }
    let h10 = sleeps(200, Duration::from_millis(10));
    let h1 = sleeps(300, Duration::from_millis(1));
    let hw = wide();
    let mut m = Metrics::new();
    let name = "latscope_test_sleep_seconds";
    m.histogram(name, "Sleeps.", &[("sleep", "10ms")], &h10, &fine(), None).unwrap();
    m.histogram(name, "Sleeps.", &[("sleep", "1ms")], &h1, &fine(), None).unwrap();
    m.histogram("latscope_test_wide_seconds", "Wide.", &[], &hw, &HistogramOptions::default(), None).unwrap();
    m.counter("latscope_test_events", "Events.", &[("kind", "syscall")], 500.0).unwrap();
    m.gauge("latscope_test_up", "Up.", &[], 1.0).unwrap();
    let shared = SharedMetrics::new(m);
    let server = ExpositionServer::start("127.0.0.1:0", shared.clone()).unwrap();
    let target = server.local_addr().to_string();

    // What a scraper that asks for protobuf gets.
    let (status, ctype, body) = http_get(
        server.local_addr().port(),
        "/metrics",
        &[("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")],
    )
    .unwrap();
    assert_eq!((status, ctype.as_str()), (200, PROTOBUF_CONTENT_TYPE));
    assert!(!body.is_empty());
    assert_eq!(http_get(server.local_addr().port(), "/nothing", &[]).unwrap().0, 404);

    let native = Prometheus::start(std::slice::from_ref(&target), true);
    let classic = Prometheus::start(std::slice::from_ref(&target), false);

    // Native histograms: count and sum exact, quantiles within one bucket of the schema plus
    // latscope's own 1/128.
    for (label, h) in [("10ms", &h10), ("1ms", &h1)] {
        let sel = format!("{name}{{sleep=\"{label}\"}}");
        assert_eq!(native.value(&format!("histogram_count({sel})")), h.count() as f64, "{label}");
        let sum = native.value(&format!("histogram_sum({sel})"));
        assert!((sum / (h.sum() as f64 * 1e-9) - 1.0).abs() < 1e-9, "{label}: sum {sum}");
        for q in [0.5, 0.9, 0.99] {
            let got = native.value(&format!("histogram_quantile({q}, {sel})"));
            let ours = h.value_at_quantile(q).unwrap() as f64 * 1e-9;
            let tol = schema_resolution(8) + 1.0 / 128.0;
            assert!((got / ours - 1.0).abs() <= tol, "{label} q{q}: Prometheus {got}, latscope {ours}");
        }
    }
    // The wide one went through the bucket limit: at most 160 buckets, a coarser schema.
    let n = NativeHistogram::from_histogram(&hw, &NativeOptions::default());
    assert!(n.bucket_count() <= 160 && n.schema < 4, "schema {} with {} buckets", n.schema, n.bucket_count());
    assert_eq!(native.value("histogram_count(latscope_test_wide_seconds)"), hw.count() as f64);
    for q in [0.5, 0.99] {
        let got = native.value(&format!("histogram_quantile({q}, latscope_test_wide_seconds)"));
        let ours = hw.value_at_quantile(q).unwrap() as f64 * 1e-9;
        let tol = schema_resolution(n.schema) + 1.0 / 128.0;
        assert!((got / ours - 1.0).abs() <= tol, "wide q{q}: Prometheus {got}, latscope {ours} (schema {})", n.schema);
    }
    assert_eq!(native.value("latscope_test_events_total{kind=\"syscall\"}"), 500.0);

    // Classic buckets from the text format: exact counts; the 10 ms sleeps lie between the
    // 10 ms and 25 ms bounds.
    let sel = format!("{name}_count{{sleep=\"10ms\"}}");
    assert_eq!(classic.value(&sel), 200.0);
    let le = |b: &str| classic.value(&format!("{name}_bucket{{sleep=\"10ms\",le=\"{b}\"}}"));
    assert_eq!(le("0.025"), h10.to_cumulative_le(&[25_000_000])[0] as f64);
    assert_eq!(le("+Inf"), 200.0);
    let q = classic.value(&format!("histogram_quantile(0.5, {name}_bucket{{sleep=\"10ms\"}})"));
    assert!(q > 0.01 && q <= 0.025, "{q}");
    assert_eq!(classic.value("latscope_test_events_total"), 500.0);

    // Each Prometheus got the format it asked for.
    let s = server.scrapes();
    assert!(s.protobuf >= 1 && s.text >= 1, "{s:?}");
    assert_eq!(Format::negotiate(None), Format::PrometheusText);

    // An update is what the next scrape sees.
    shared.update(|m| m.counter("latscope_test_events", "Events.", &[("kind", "syscall")], 750.0)).unwrap();
    let seen =
        wait_for(Duration::from_secs(30), || (native.value("latscope_test_events_total") == 750.0).then_some(()));
    assert!(seen.is_some());
    server.stop();
}

#[test]
fn concurrent_scrapes_are_all_answered_and_stop_ends_every_worker() {
    let mut m = Metrics::new();
    for i in 0..2000 {
        m.gauge("latscope_test_gauge", "Gauge.", &[("i", &i.to_string())], f64::from(i)).unwrap();
    }
    let server = ExpositionServer::start("127.0.0.1:0", SharedMetrics::new(m)).unwrap();
    let port = server.local_addr().port();
    let clients: Vec<_> =
        (0..16).map(|_| std::thread::spawn(move || http_get(port, "/metrics", &[]).unwrap())).collect();
    for c in clients {
        let (status, _, body) = c.join().unwrap();
        assert_eq!(status, 200);
        assert!(String::from_utf8(body).unwrap().contains("latscope_test_gauge{i=\"1999\"} 1999"));
    }
    assert_eq!(server.scrapes().text, 16);
    // Returns only once every worker has stopped.
    server.stop();
}

/// A loopback connection with a 4 KiB receive buffer (set before connecting, so the window stays
/// small): answers pile up at the server at once.
fn small_window(port: u16) -> std::net::TcpStream {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a descriptor we own; the sockaddr is fully initialised.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let size: libc::c_int = 4096;
        let len = std::mem::size_of::<libc::c_int>() as u32;
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &size as *const _ as *const libc::c_void, len);
        let mut a: libc::sockaddr_in = std::mem::zeroed();
        a.sin_family = libc::AF_INET as u16;
        a.sin_port = port.to_be();
        a.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let alen = std::mem::size_of::<libc::sockaddr_in>() as u32;
        let r = libc::connect(fd, &a as *const _ as *const libc::sockaddr, alen);
        assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
        std::net::TcpStream::from_raw_fd(fd)
    }
}

#[test]
fn scrapers_that_pipeline_and_never_read_do_not_block_other_scrapes() {
    use std::io::Write;
    let mut m = Metrics::new();
    for i in 0..2000 {
        m.gauge("latscope_test_gauge", "Gauge.", &[("i", &i.to_string())], f64::from(i)).unwrap();
    }
    let server = ExpositionServer::start("127.0.0.1:0", SharedMetrics::new(m)).unwrap();
    let port = server.local_addr().port();
    // Eight clients (more than a pool of worker threads would have) ask for 20 scrapes of
    // ~80 KB each at once, and never read.
    let one = format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/plain\r\n\r\n");
    let hogs: Vec<_> = (0..8)
        .map(|_| {
            let mut s = small_window(port);
            s.write_all(one.repeat(20).as_bytes()).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // Others are answered meanwhile (the read timeout, 30 s, is longer than the 20 s the server
    // gives a client to take an answer: without it, the non-readers would be waited for).
    for i in 0..5 {
        let (status, _, body) = http_get(port, "/metrics", &[]).unwrap();
        assert_eq!(status, 200, "scrape {i}");
        assert!(String::from_utf8(body).unwrap().contains("latscope_test_gauge{i=\"1999\"} 1999"));
    }
    drop(hogs);
    server.stop();
}

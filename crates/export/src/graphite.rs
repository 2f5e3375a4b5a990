//! Graphite: a plaintext-protocol client (`path value timestamp\n` over TCP) that never makes
//! its caller wait for the network, and the lines of a latency histogram per interval.

use std::collections::VecDeque;
use std::io::Write;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use latscope_hist::Histogram;
use serde::Serialize;

use crate::ExportError;

/// The quantiles [`GraphiteClient::send_histogram`] sends, with their path names.
pub const HISTOGRAM_QUANTILES: &[(&str, f64)] = &[("p50", 0.5), ("p90", 0.9), ("p99", 0.99)];

/// Settings of a [`GraphiteClient`].
#[derive(Debug, Clone, PartialEq)]
pub struct GraphiteOptions {
    /// Lines held while the server is away; when full, the oldest are dropped (and counted).
    /// Default 100 000.
    pub queue_lines: usize,
    /// Longest wait for a connection. Default 2 s.
    pub connect_timeout: Duration,
    /// Longest wait for the server to take a write before the connection is dropped. Default 5 s.
    pub write_timeout: Duration,
    /// First wait after a failed connection; doubled after each failure up to `max_backoff`.
    /// Default 100 ms.
    pub min_backoff: Duration,
    /// Longest wait between connection attempts. Default 30 s.
    pub max_backoff: Duration,
    /// Multiplier from recorded units to the unit sent by [`GraphiteClient::send_histogram`]:
    /// default `1e-9` (nanoseconds to seconds).
    pub unit: f64,
}

impl Default for GraphiteOptions {
    fn default() -> Self {
        GraphiteOptions {
            queue_lines: 100_000,
            connect_timeout: Duration::from_secs(2),
            write_timeout: Duration::from_secs(5),
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(30),
            unit: 1e-9,
        }
    }
}

/// What a [`GraphiteClient`] has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GraphiteStats {
    /// Lines waiting to be sent.
    pub queued: u64,
    /// Lines handed to the server's connection.
    pub sent: u64,
    /// Lines dropped: the queue was full, or the line was invalid (a value that is not a finite
    /// number).
    pub dropped: u64,
    /// Connections made.
    pub connects: u64,
    /// Connection attempts or writes that failed.
    pub failures: u64,
    /// Whether a connection is open now.
    pub connected: bool,
}

struct State {
    lines: VecDeque<String>,
    /// Lines taken by the sender and not yet written.
    in_flight: usize,
    closing: bool,
    stats: GraphiteStats,
}

struct Shared {
    state: Mutex<State>,
    /// Signals new lines or closing to the sender, and progress to `flush`.
    cond: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Sends metrics to a Graphite (carbon) server with the plaintext protocol.
///
/// [`send`](Self::send) only queues the line (a lock and a push: it never waits for the
/// network); a background thread connects, writes, and after a failure reconnects with
/// exponential backoff, keeping up to [`GraphiteOptions::queue_lines`] lines meanwhile. Before
/// each write it checks that the server has not closed the connection (a write to a closed
/// connection would be accepted by the kernel and lost). Lines are sent at most once: a line
/// written to a connection that breaks afterwards may be lost (the protocol has no
/// acknowledgements); the ones not yet written go out on the next connection.
pub struct GraphiteClient {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    queue_lines: usize,
    unit: f64,
}

/// One path component made safe for Graphite: characters other than ASCII letters, digits, `_`
/// and `-` become `_` (a `.` would split the component, a space end the path); an empty
/// component becomes `_`.
pub fn sanitize_component(s: &str) -> String {
    if s.is_empty() {
        return "_".into();
    }
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// A metric path from components, each sanitised ([`sanitize_component`]) and joined with `.`:
/// `["latscope", "web01.example.com", "syscall", "/data/x"]` is
/// `latscope.web01_example_com.syscall._data_x`.
pub fn metric_path<S: AsRef<str>>(components: &[S]) -> String {
    components.iter().map(|c| sanitize_component(c.as_ref())).collect::<Vec<_>>().join(".")
}

/// Graphite's text for a value (`f64` printed without exponent, as carbon parses it).
fn format_line(path: &str, value: f64, timestamp: i64) -> String {
    // A space or line break inside the path would break the line apart; other control characters
    // (bidirectional overrides included) would reach whatever shows the path.
    let path: String = path
        .chars()
        .map(|c| if c.is_whitespace() || c.is_control() || latscope_event::escape::is_control(c) { '_' } else { c })
        .collect();
    format!("{path} {value} {timestamp}\n")
}

impl GraphiteClient {
    /// A client for the carbon server at `addr` (`host:port`, plaintext port usually 2003). The
    /// address is resolved, and the connection made, by the background thread (and again after
    /// each failure), so a server that is not up yet is not an error.
    pub fn new(addr: &str, opts: GraphiteOptions) -> Result<GraphiteClient, ExportError> {
        if addr.rsplit_once(':').is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err()) {
            return Err(ExportError::Invalid(format!(
                "Graphite address '{addr}' is not HOST:PORT (e.g. localhost:2003)"
            )));
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                lines: VecDeque::new(),
                in_flight: 0,
                closing: false,
                stats: GraphiteStats::default(),
            }),
            cond: Condvar::new(),
        });
        let s = shared.clone();
        let (addr, o) = (addr.to_string(), opts.clone());
        let thread = std::thread::Builder::new()
            .name("graphite".into())
            .spawn(move || sender(&s, &addr, &o))
            .map_err(|e| ExportError::Invalid(format!("cannot start the Graphite thread: {e}")))?;
        Ok(GraphiteClient { shared, thread: Some(thread), queue_lines: opts.queue_lines.max(1), unit: opts.unit })
    }

    /// Queues `path value timestamp` (seconds since the epoch). Returns false when the line was
    /// dropped: the value is not finite. A full queue drops its oldest line instead.
    pub fn send(&self, path: &str, value: f64, timestamp: i64) -> bool {
        let mut st = self.shared.lock();
        if !value.is_finite() {
            st.stats.dropped += 1;
            return false;
        }
        st.lines.push_back(format_line(path, value, timestamp));
        while st.lines.len() + st.in_flight > self.queue_lines && st.lines.pop_front().is_some() {
            st.stats.dropped += 1;
        }
        drop(st);
        self.shared.cond.notify_all();
        true
    }

    /// Queues the lines of one interval's histogram: `PREFIX.count` (values in the interval),
    /// and when it is not empty `PREFIX.p50`, `.p90`, `.p99` and `.max`, in the unit of
    /// [`GraphiteOptions::unit`] (seconds by default), each within the histogram's 0.78 %.
    pub fn send_histogram(&self, prefix: &str, h: &Histogram, timestamp: i64) {
        self.send(&format!("{prefix}.count"), h.count() as f64, timestamp);
        if h.count() == 0 {
            return;
        }
        for &(name, q) in HISTOGRAM_QUANTILES {
            if let Some(v) = h.value_at_quantile(q) {
                self.send(&format!("{prefix}.{name}"), v as f64 * self.unit, timestamp);
            }
        }
        if let Some(max) = h.max() {
            self.send(&format!("{prefix}.max"), max as f64 * self.unit, timestamp);
        }
    }

    /// Waits until every queued line has been written or `timeout` passed; true if all were.
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        while !st.lines.is_empty() || st.in_flight > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = self.shared.cond.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        true
    }

    /// What the client has done so far.
    pub fn stats(&self) -> GraphiteStats {
        let st = self.shared.lock();
        GraphiteStats { queued: (st.lines.len() + st.in_flight) as u64, ..st.stats }
    }

    /// Sends what is queued (waiting at most `timeout`), closes the connection and returns the
    /// final counts; lines still queued then are counted as dropped.
    pub fn close(mut self, timeout: Duration) -> GraphiteStats {
        self.flush(timeout);
        self.stop();
        let mut st = self.shared.lock();
        st.stats.dropped += (st.lines.len() + st.in_flight) as u64;
        st.lines.clear();
        GraphiteStats { queued: 0, connected: false, ..st.stats }
    }

    fn stop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.cond.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for GraphiteClient {
    /// Stops the background thread without waiting for the queue to drain (use
    /// [`GraphiteClient::close`] for that).
    fn drop(&mut self) {
        self.stop();
    }
}

fn connect(addr: &str, o: &GraphiteOptions) -> std::io::Result<TcpStream> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, format!("{addr} resolves to no address"));
    for a in addrs {
        match TcpStream::connect_timeout(&a, o.connect_timeout) {
            Ok(s) => {
                s.set_write_timeout(Some(o.write_timeout))?;
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Whether the server has closed the connection (or it failed), without blocking.
fn peer_closed(s: &TcpStream) -> bool {
    if s.set_nonblocking(true).is_err() {
        return true;
    }
    let mut b = [0u8; 1];
    let closed = match s.peek(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    closed || s.set_nonblocking(false).is_err()
}

/// Lines written per write call at most.
const BATCH_LINES: usize = 1000;

/// The background thread: connect, write what is queued, reconnect after failures.
fn sender(shared: &Shared, addr: &str, o: &GraphiteOptions) {
    let mut conn: Option<TcpStream> = None;
    let mut backoff = o.min_backoff;
    let mut buf = Vec::new();
    loop {
        let mut st = shared.lock();
        while st.lines.is_empty() && !st.closing {
            st = shared.cond.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        // `close` has flushed what it could already: closing means stop now.
        if st.closing {
            return;
        }
        if conn.is_none() {
            drop(st);
            match connect(addr, o) {
                Ok(c) => {
                    conn = Some(c);
                    backoff = o.min_backoff;
                    let mut st = shared.lock();
                    st.stats.connects += 1;
                    st.stats.connected = true;
                }
                Err(_) => {
                    let mut st = shared.lock();
                    st.stats.failures += 1;
                    if st.closing {
                        return;
                    }
                    // Sleep the backoff, waking early only to close.
                    let deadline = Instant::now() + backoff;
                    while !st.closing {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        st = shared.cond.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
                    }
                    backoff = (backoff * 2).min(o.max_backoff.max(o.min_backoff));
                }
            }
            continue;
        }
        // carbon never writes: a readable end of stream means it closed the connection, and a
        // write now would be accepted by the kernel and lost.
        if conn.as_ref().is_some_and(peer_closed) {
            conn = None;
            st.stats.failures += 1;
            st.stats.connected = false;
            continue;
        }
        let n = st.lines.len().min(BATCH_LINES);
        let batch: Vec<String> = st.lines.drain(..n).collect();
        st.in_flight = n;
        drop(st);
        buf.clear();
        for l in &batch {
            buf.extend_from_slice(l.as_bytes());
        }
        let ok = conn.as_mut().is_some_and(|c| c.write_all(&buf).is_ok());
        let mut st = shared.lock();
        st.in_flight = 0;
        if ok {
            st.stats.sent += n as u64;
        } else {
            conn = None;
            st.stats.failures += 1;
            st.stats.connected = false;
            // Not written: back to the front, in order, within the queue's bound.
            for l in batch.into_iter().rev() {
                st.lines.push_front(l);
            }
        }
        drop(st);
        shared.cond.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;

    #[test]
    fn paths_are_sanitised() {
        assert_eq!(
            metric_path(&["latscope", "web01.example.com", "syscall", "/data/x y"]),
            "latscope.web01_example_com.syscall._data_x_y"
        );
        assert_eq!(sanitize_component(""), "_");
        assert_eq!(format_line("a b\nc", 0.25, 7), "a_b_c 0.25 7\n");
        assert_eq!(format_line("x", 1e-7, 7), "x 0.0000001 7\n");
        // Names from the traced system: no control character of any kind reaches carbon.
        let evil = "lib/\x1b[31mEVIL\x1b]0;t\x07\nname.so\r\u{202e}\u{9b}";
        assert_eq!(format_line(evil, 1.0, 7), "lib/_[31mEVIL_]0;t__name.so___ 1 7\n");
        assert_eq!(metric_path(&["latscope", evil]), "latscope.lib___31mEVIL__0_t__name_so___");
    }

    #[test]
    fn bad_addresses_are_refused() {
        for a in ["localhost", ":2003", "localhost:port", "localhost:70000"] {
            assert!(GraphiteClient::new(a, GraphiteOptions::default()).is_err(), "{a}");
        }
    }

    #[test]
    fn lines_wait_for_a_late_server_and_arrive_in_order() {
        // Reserve a port, then close it: the client starts with nobody listening.
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let o = GraphiteOptions {
            min_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(50),
            ..Default::default()
        };
        let c = GraphiteClient::new(&format!("127.0.0.1:{port}"), o).unwrap();
        for i in 0..10 {
            assert!(c.send("a.b", f64::from(i), 1_700_000_000 + i64::from(i)));
        }
        assert!(!c.send("a.b", f64::NAN, 1));
        assert!(!c.flush(Duration::from_millis(100)), "nobody is listening yet");
        assert!(c.stats().failures >= 1);
        let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
        assert!(c.flush(Duration::from_secs(10)));
        let (s, _) = l.accept().unwrap();
        let lines: Vec<String> = BufReader::new(s).lines().take(10).map(|l| l.unwrap()).collect();
        assert_eq!(lines[0], "a.b 0 1700000000");
        assert_eq!(lines[9], "a.b 9 1700000009");
        let st = c.close(Duration::from_secs(1));
        assert_eq!((st.sent, st.dropped, st.connects), (10, 1, 1));
    }

    #[test]
    fn a_full_queue_drops_the_oldest_lines() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let o = GraphiteOptions { queue_lines: 3, min_backoff: Duration::from_secs(60), ..Default::default() };
        let c = GraphiteClient::new(&format!("127.0.0.1:{port}"), o).unwrap();
        for i in 0..1000 {
            c.send("x", f64::from(i), 0);
        }
        // The queue holds the 3 newest.
        let st = c.stats();
        assert_eq!(st.queued, 3);
        assert_eq!(st.dropped, 997);
        drop(c); // does not wait out the minute of backoff
    }

    #[test]
    fn histogram_lines() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = GraphiteClient::new(&l.local_addr().unwrap().to_string(), GraphiteOptions::default()).unwrap();
        let h: Histogram = (1..=100u64).map(|i| i * 1_000_000).collect();
        c.send_histogram("ls.h.read", &h, 60);
        c.send_histogram("ls.h.idle", &Histogram::new(), 60);
        assert!(c.flush(Duration::from_secs(10)));
        let (s, _) = l.accept().unwrap();
        let lines: Vec<String> = BufReader::new(s).lines().take(6).map(|l| l.unwrap()).collect();
        assert_eq!(lines[0], "ls.h.read.count 100 60");
        assert!(lines[1].starts_with("ls.h.read.p50 0.05"), "{}", lines[1]);
        assert!(lines[3].starts_with("ls.h.read.p99 0.099"), "{}", lines[3]);
        assert_eq!(lines[4], "ls.h.read.max 0.1 60");
        assert_eq!(lines[5], "ls.h.idle.count 0 60");
    }
}

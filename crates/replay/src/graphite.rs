//! A Graphite sender: lines of carbon's plaintext protocol (`path value timestamp\n`) over TCP.
//!
//! [`GraphiteSender::send`] only queues the line: a background thread connects, writes, and
//! after a failure reconnects with a growing pause (0.1 s doubling up to 5 s), keeping up to
//! [`QUEUE_LINES`] lines meanwhile (the oldest are dropped beyond). The replay never waits for
//! the network. The protocol has no acknowledgements: a line written to a connection that breaks
//! just after may be lost; lines not yet written go out on the next connection.

use std::collections::VecDeque;
use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Lines held while the server is away.
pub const QUEUE_LINES: usize = 10_000;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What a [`GraphiteSender`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendStats {
    /// Lines written to a connection.
    pub sent: u64,
    /// Lines dropped: the queue was full, or still queued at [`GraphiteSender::close`], or the
    /// value was not a finite number.
    pub dropped: u64,
    /// Connections made.
    pub connects: u64,
    /// Connection attempts and writes that failed.
    pub failures: u64,
}

#[derive(Default)]
struct State {
    lines: VecDeque<String>,
    in_flight: usize,
    closing: bool,
    stats: SendStats,
    last_error: Option<String>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    cond: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Sends lines to a carbon server (see the module docs).
pub struct GraphiteSender {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl GraphiteSender {
    /// A sender to `addr` (`HOST:PORT`; carbon's plaintext port is usually 2003). The address is
    /// resolved and connected to by the background thread, so a server that is not up yet is
    /// not an error; an address that is not `HOST:PORT` is.
    pub fn new(addr: &str) -> Result<GraphiteSender, String> {
        if addr.rsplit_once(':').is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err()) {
            return Err(format!("Graphite address '{addr}' is not HOST:PORT (e.g. localhost:2003)"));
        }
        let shared = Arc::new(Shared::default());
        let (s, addr) = (shared.clone(), addr.to_string());
        let thread = std::thread::Builder::new()
            .name("graphite".into())
            .spawn(move || sender(&s, &addr))
            .map_err(|e| format!("cannot start the Graphite thread: {e}"))?;
        Ok(GraphiteSender { shared, thread: Some(thread) })
    }

    /// Queues `path value timestamp` (seconds since the epoch); false if the value is not finite
    /// (dropped). A full queue drops its oldest line.
    pub fn send(&self, path: &str, value: f64, timestamp: i64) -> bool {
        let mut st = self.shared.lock();
        if !value.is_finite() {
            st.stats.dropped += 1;
            return false;
        }
        // `{value}` prints an f64 without exponent, as carbon parses it.
        st.lines.push_back(format!("{path} {value} {timestamp}\n"));
        while st.lines.len() + st.in_flight > QUEUE_LINES && st.lines.pop_front().is_some() {
            st.stats.dropped += 1;
        }
        drop(st);
        self.shared.cond.notify_all();
        true
    }

    /// Waits up to `timeout` for the queue to be written, stops, and returns what was done and
    /// the last connection or write error (lines still queued are counted as dropped).
    pub fn close(mut self, timeout: Duration) -> (SendStats, Option<String>) {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        while !st.lines.is_empty() || st.in_flight > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = self.shared.cond.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        drop(st);
        self.stop();
        let mut st = self.shared.lock();
        st.stats.dropped += (st.lines.len() + st.in_flight) as u64;
        st.lines.clear();
        (st.stats, st.last_error.take())
    }

    fn stop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.cond.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for GraphiteSender {
    fn drop(&mut self) {
        self.stop();
    }
}

fn connect(addr: &str) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, format!("{addr} resolves to no address"));
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(s) => {
                s.set_write_timeout(Some(WRITE_TIMEOUT))?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Whether the server closed the connection: carbon never writes, so a readable end of stream
/// means it did (and a write now would be accepted by the kernel and lost).
fn peer_closed(s: &TcpStream) -> bool {
    if s.set_nonblocking(true).is_err() {
        return true;
    }
    let closed = match s.peek(&mut [0u8; 1]) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    closed || s.set_nonblocking(false).is_err()
}

fn sender(shared: &Shared, addr: &str) {
    let mut conn: Option<TcpStream> = None;
    let mut backoff = MIN_BACKOFF;
    loop {
        let mut st = shared.lock();
        while st.lines.is_empty() && !st.closing {
            st = shared.cond.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if st.closing {
            return;
        }
        if conn.as_ref().is_some_and(peer_closed) {
            conn = None;
            st.stats.failures += 1;
            st.last_error = Some(format!("{addr} closed the connection"));
        }
        if conn.is_none() {
            drop(st);
            let r = connect(addr);
            let mut st = shared.lock();
            match r {
                Ok(c) => {
                    conn = Some(c);
                    backoff = MIN_BACKOFF;
                    st.stats.connects += 1;
                }
                Err(e) => {
                    st.stats.failures += 1;
                    st.last_error = Some(format!("cannot connect to {addr}: {e}"));
                    // Sleep the pause, waking early only to close.
                    let deadline = Instant::now() + backoff;
                    while !st.closing {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        st = shared.cond.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
            continue;
        }
        let batch: Vec<String> = st.lines.drain(..).collect();
        st.in_flight = batch.len();
        drop(st);
        let buf = batch.concat();
        let r = conn.as_mut().map(|c| c.write_all(buf.as_bytes()));
        let mut st = shared.lock();
        st.in_flight = 0;
        if let Some(Err(e)) = r {
            conn = None;
            st.stats.failures += 1;
            st.last_error = Some(format!("writing to {addr}: {e}"));
            // Not written: back to the front, in order, within the queue's bound.
            for l in batch.into_iter().rev() {
                if st.lines.len() >= QUEUE_LINES {
                    st.stats.dropped += 1;
                } else {
                    st.lines.push_front(l);
                }
            }
        } else {
            st.stats.sent += batch.len() as u64;
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
    fn bad_addresses_are_refused() {
        for a in ["localhost", ":2003", "localhost:port", "localhost:70000"] {
            assert!(GraphiteSender::new(a).is_err(), "{a}");
        }
    }

    #[test]
    fn lines_wait_for_a_late_server_then_arrive_in_order() {
        // A port nobody listens on yet.
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let g = GraphiteSender::new(&format!("127.0.0.1:{port}")).unwrap();
        for i in 0..10 {
            assert!(g.send("a.b", f64::from(i) + 0.5, 1_700_000_000 + i64::from(i)));
        }
        assert!(!g.send("a.b", f64::NAN, 1));
        std::thread::sleep(Duration::from_millis(300));
        let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let (s, _) = l.accept().unwrap();
        let lines: Vec<String> = BufReader::new(s).lines().take(10).map(|l| l.unwrap()).collect();
        assert_eq!(lines[0], "a.b 0.5 1700000000");
        assert_eq!(lines[9], "a.b 9.5 1700000009");
        let (st, _) = g.close(Duration::from_secs(5));
        assert_eq!((st.sent, st.dropped, st.connects), (10, 1, 1));
        assert!(st.failures >= 1, "{st:?}");
    }
}

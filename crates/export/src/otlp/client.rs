//! The OTLP/HTTP sender: a thread of its own POSTs the latest request, so that a collector that
//! is slow, down or failing never holds up the caller.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use prost::Message;

use super::proto::collector::metrics::v1::ExportMetricsServiceResponse;

/// The kinds of failure counted in [`OtlpStats::errors`]: `connect` (refused, unreachable,
/// unknown host), `timeout`, `http_4xx`, `http_5xx` (the collector's answer), `rejected` (an
/// answer of 200 saying some data points were refused), `other`.
pub const ERROR_KINDS: [&str; 6] = ["connect", "timeout", "http_4xx", "http_5xx", "rejected", "other"];

/// First wait after a failure; doubled on each further one up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Longest wait between attempts while the collector fails.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Where and how requests are sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpOptions {
    /// `http://HOST:PORT/PATH` (a collector's is `http://HOST:4318/v1/metrics`).
    pub endpoint: String,
    /// Extra request headers (e.g. an authorization token).
    pub headers: Vec<(String, String)>,
    /// Longest time one request may take, connecting included.
    pub timeout: Duration,
}

/// What an [`OtlpClient`] has done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtlpStats {
    /// Requests the collector accepted.
    pub sent: u64,
    /// Failed requests by kind (see [`ERROR_KINDS`]).
    pub errors: BTreeMap<&'static str, u64>,
    /// Requests never sent because a newer one replaced them while the collector failed (each
    /// holds the cumulative counts, so the newer one carries everything).
    pub replaced: u64,
}

struct State {
    pending: Option<Vec<u8>>,
    closing: bool,
    /// The sender is sending or waiting out a backoff.
    busy: bool,
    stats: OtlpStats,
    /// Lines to log: each kind of failure once until a request succeeds again.
    log: Vec<String>,
    logged: Vec<&'static str>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

/// Sends requests to an OTLP/HTTP collector (`POST`, `application/x-protobuf`) from a thread of
/// its own. [`OtlpClient::send`] never blocks: only the latest request waits to be sent. A
/// failure is counted by kind and logged once per kind ([`OtlpClient::take_log`]); attempts
/// then wait 1 s, doubling up to 60 s, while the collector keeps failing.
pub struct OtlpClient {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OtlpClient {
    /// Starts the sender (nothing is sent until [`OtlpClient::send`]).
    pub fn new(opts: OtlpOptions) -> OtlpClient {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                pending: None,
                closing: false,
                busy: false,
                stats: OtlpStats::default(),
                log: Vec::new(),
                logged: Vec::new(),
            }),
            wake: Condvar::new(),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("otlp-push".into())
            .spawn(move || sender(&s, &opts))
            .map_err(|e| shared.state.lock().unwrap().log.push(format!("otlp: cannot start the sender: {e}")))
            .ok();
        OtlpClient { shared, thread }
    }

    /// Queues `body` (an encoded `ExportMetricsServiceRequest`), replacing a request not yet sent.
    pub fn send(&self, body: Vec<u8>) {
        let mut st = self.shared.state.lock().unwrap();
        if st.pending.replace(body).is_some() {
            st.stats.replaced += 1;
        }
        self.shared.wake.notify_all();
    }

    /// The counts so far.
    pub fn stats(&self) -> OtlpStats {
        self.shared.state.lock().unwrap().stats.clone()
    }

    /// Lines worth logging since the last call: the first failure of each kind, and the first
    /// success after failures.
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut self.shared.state.lock().unwrap().log)
    }

    /// Stops, after sending the request waiting (at most `wait`, then the sender is left to
    /// finish on its own). Returns the counts.
    pub fn close(mut self, wait: Duration) -> OtlpStats {
        let deadline = Instant::now() + wait;
        let mut st = self.shared.state.lock().unwrap();
        st.closing = true;
        self.shared.wake.notify_all();
        while st.pending.is_some() || st.busy {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = self.shared.wake.wait_timeout(st, left).unwrap().0;
        }
        let stats = st.stats.clone();
        let done = st.pending.is_none() && !st.busy;
        drop(st);
        if done {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
        stats
    }
}

impl Drop for OtlpClient {
    fn drop(&mut self) {
        self.shared.state.lock().unwrap().closing = true;
        self.shared.wake.notify_all();
    }
}

fn sender(shared: &Shared, opts: &OtlpOptions) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(opts.timeout))
        .http_status_as_error(false)
        .user_agent(concat!("latscope/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let mut backoff = FIRST_BACKOFF;
    let mut failing = false;
    loop {
        let body = {
            let mut st = shared.state.lock().unwrap();
            loop {
                if let Some(b) = st.pending.take() {
                    st.busy = true;
                    break b;
                }
                if st.closing {
                    shared.wake.notify_all();
                    return;
                }
                st = shared.wake.wait(st).unwrap();
            }
        };
        let result = post(&agent, opts, &body);
        let mut st = shared.state.lock().unwrap();
        match result {
            Ok(()) => {
                st.stats.sent += 1;
                if failing {
                    st.log.push(format!("otlp: pushes to {} succeed again", opts.endpoint));
                    st.logged.clear();
                }
                failing = false;
                backoff = FIRST_BACKOFF;
                st.busy = false;
                shared.wake.notify_all();
            }
            Err((kind, why)) => {
                *st.stats.errors.entry(kind).or_default() += 1;
                if !st.logged.contains(&kind) {
                    st.logged.push(kind);
                    st.log.push(format!(
                        "otlp: push to {} failed: {why} (counted in latscope_agent_otlp_errors_total{{kind=\"{kind}\"}}; \
                         retrying with backoff, further failures of this kind are not logged)",
                        opts.endpoint
                    ));
                }
                failing = true;
                // The failed request goes again unless a newer one (holding the same counts and
                // more) came meanwhile.
                if st.pending.is_none() && !st.closing {
                    st.pending = Some(body);
                }
                if st.closing {
                    st.pending = None;
                }
                let until = Instant::now() + backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                while !st.closing {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    st = shared.wake.wait_timeout(st, left).unwrap().0;
                }
                if st.closing {
                    st.pending = None;
                }
                st.busy = false;
                shared.wake.notify_all();
            }
        }
    }
}

/// One POST; the failure's kind and description.
fn post(agent: &ureq::Agent, opts: &OtlpOptions, body: &[u8]) -> Result<(), (&'static str, String)> {
    let mut req = agent.post(&opts.endpoint).header("Content-Type", "application/x-protobuf");
    for (k, v) in &opts.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let mut resp = req.send(body).map_err(classify)?;
    let status = resp.status().as_u16();
    let answer = resp.body_mut().with_config().limit(1 << 20).read_to_vec().unwrap_or_default();
    match status {
        200..=299 => {
            // A partial success names the data points the collector refused, and why.
            match ExportMetricsServiceResponse::decode(&answer[..]).ok().and_then(|r| r.partial_success) {
                Some(p) if p.rejected_data_points > 0 => Err((
                    "rejected",
                    format!("the collector rejected {} data points: {}", p.rejected_data_points, p.error_message),
                )),
                _ => Ok(()),
            }
        }
        400..=499 => Err(("http_4xx", format!("HTTP {status}{}", detail(&answer)))),
        500..=599 => Err(("http_5xx", format!("HTTP {status}{}", detail(&answer)))),
        _ => Err(("other", format!("HTTP {status}"))),
    }
}

/// The start of a collector's error answer (a `google.rpc.Status` in protobuf, or text), printable
/// characters only.
fn detail(answer: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(answer)
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect::<String>()
        .trim()
        .to_string();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

fn classify(e: ureq::Error) -> (&'static str, String) {
    let kind = match &e {
        ureq::Error::Timeout(_) => "timeout",
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => "connect",
        ureq::Error::Io(io) => match io.kind() {
            ErrorKind::TimedOut | ErrorKind::WouldBlock => "timeout",
            ErrorKind::ConnectionRefused
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::HostUnreachable
            | ErrorKind::NetworkUnreachable
            | ErrorKind::AddrNotAvailable => "connect",
            _ => "other",
        },
        _ => "other",
    };
    (kind, e.to_string())
}

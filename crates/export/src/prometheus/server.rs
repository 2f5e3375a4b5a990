//! A small HTTP server for Prometheus to scrape: `GET /metrics`.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use tiny_http::{Header, Method, Request, Response, Server};

use super::exposition::{Format, SharedMetrics};
use crate::ExportError;

/// Serves [`SharedMetrics`] over HTTP on its own thread until stopped (or dropped):
///
/// * `GET /metrics`: the metrics, in the format the `Accept` header asks for
///   ([`Format::negotiate`](super::Format::negotiate));
/// * `GET /`: a line saying where the metrics are;
/// * anything else: 404 (405 for other methods than GET and HEAD).
///
/// [`WORKERS`] threads answer requests, so that a client slow to read its answer (or several
/// Prometheus servers scraping at once) does not hold the others back.
pub struct ExpositionServer {
    server: Arc<Server>,
    addr: SocketAddr,
    threads: Vec<JoinHandle<()>>,
    counts: Arc<Counts>,
}

/// Threads answering requests.
pub const WORKERS: usize = 4;

/// Scrapes answered so far, by format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scrapes {
    /// Answered in the Prometheus protobuf format.
    pub protobuf: u64,
    /// Answered in a text format (OpenMetrics or Prometheus text).
    pub text: u64,
}

#[derive(Debug, Default)]
struct Counts {
    protobuf: AtomicU64,
    text: AtomicU64,
}

impl ExpositionServer {
    /// Listens on `addr` (`127.0.0.1:9464`, `[::]:0` for any free port) and serves `metrics`.
    pub fn start(addr: impl ToSocketAddrs, metrics: SharedMetrics) -> Result<ExpositionServer, ExportError> {
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| ExportError::Invalid(format!("cannot resolve the listen address: {e}")))?
            .collect();
        let server = Server::http(&addrs[..]).map_err(|e| {
            ExportError::Invalid(format!(
                "cannot listen on {}: {e}",
                addrs.first().map_or("?".into(), |a| a.to_string())
            ))
        })?;
        let addr =
            server.server_addr().to_ip().ok_or_else(|| ExportError::Invalid("the server has no IP address".into()))?;
        let counts = Arc::new(Counts::default());
        let mut me = ExpositionServer { server: Arc::new(server), addr, threads: Vec::new(), counts };
        for i in 0..WORKERS {
            let (s, c, m) = (me.server.clone(), me.counts.clone(), metrics.clone());
            let t = std::thread::Builder::new()
                .name(format!("metrics-http-{i}"))
                .spawn(move || {
                    for req in s.incoming_requests() {
                        // A client that went away is nobody's problem.
                        let _ = answer(req, &m, &c);
                    }
                })
                .map_err(|e| ExportError::Invalid(format!("cannot start the HTTP threads: {e}")))?;
            me.threads.push(t);
        }
        Ok(me)
    }

    /// Scrapes of `/metrics` answered so far, by format.
    pub fn scrapes(&self) -> Scrapes {
        Scrapes {
            protobuf: self.counts.protobuf.load(Ordering::Relaxed),
            text: self.counts.text.load(Ordering::Relaxed),
        }
    }

    /// The address it listens on (with the port chosen when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL of the metrics.
    pub fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// Stops serving and waits for the threads.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        // Each unblock ends one thread's wait.
        for _ in &self.threads {
            self.server.unblock();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for ExpositionServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn header(name: &str, value: &str) -> Header {
    // Both are ASCII constants or encoder content types: never invalid.
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("valid header")
}

fn answer(req: Request, metrics: &SharedMetrics, counts: &Counts) -> std::io::Result<()> {
    let head = *req.method() == Method::Head;
    if !matches!(req.method(), Method::Get | Method::Head) {
        return req.respond(
            Response::from_string("only GET\n").with_status_code(405).with_header(header("Allow", "GET, HEAD")),
        );
    }
    let path = req.url().split('?').next().unwrap_or("");
    match path {
        "/metrics" => {
            let accept = req.headers().iter().find(|h| h.field.equiv("Accept")).map(|h| h.value.as_str().to_string());
            match metrics.render(accept.as_deref()) {
                Ok((ctype, body)) => {
                    let c = if ctype == Format::Protobuf.content_type() { &counts.protobuf } else { &counts.text };
                    c.fetch_add(1, Ordering::Relaxed);
                    let body = if head { Vec::new() } else { body };
                    req.respond(Response::from_data(body).with_header(header("Content-Type", ctype)))
                }
                Err(e) => req.respond(Response::from_string(format!("{e}\n")).with_status_code(500)),
            }
        }
        "/" => req.respond(
            Response::from_string("latscope metrics: /metrics\n")
                .with_header(header("Content-Type", "text/plain; charset=utf-8")),
        ),
        _ => req.respond(Response::from_string("not found: the metrics are at /metrics\n").with_status_code(404)),
    }
}

//! A small HTTP server for Prometheus to scrape: `GET /metrics`, on latscope's bounded HTTP
//! server (`latscope-http`, the dashboard's too).

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use latscope_http::{HttpServer, Limits, Request, Response, Running};

use super::exposition::{Format, SharedMetrics};
use crate::ExportError;

/// Serves [`SharedMetrics`] over HTTP on its own thread until stopped (or dropped):
///
/// * `GET /metrics`: the metrics, in the format the `Accept` header asks for
///   ([`Format::negotiate`](super::Format::negotiate));
/// * `GET /`: a line saying where the metrics are;
/// * anything else: 404 (405 for other methods than GET and HEAD).
///
/// Each connection has its own thread, up to [`limits`]`().max_connections`; requests are bounded
/// in size and time, and a client slow to send or to read holds only its own connection (at the
/// cap, idle and slow connections are closed first): see `latscope-http`.
pub struct ExpositionServer {
    running: Option<Running>,
    addr: SocketAddr,
    counts: Arc<Counts>,
}

/// The limits of the metrics server: a scrape is one small request; answers can be large (every
/// series of every host), so clients get the default time to take them.
pub fn limits() -> Limits {
    Limits { max_connections: 32, max_head_bytes: 8 << 10, max_body_bytes: 0, ..Limits::default() }
}

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
        let listen_err = |e: std::io::Error| {
            ExportError::Invalid(format!(
                "cannot listen on {}: {e}",
                addrs.first().map_or("?".into(), |a| a.to_string())
            ))
        };
        let listener = TcpListener::bind(&addrs[..]).map_err(listen_err)?;
        let server = HttpServer::from_listener(listener, limits()).map_err(listen_err)?;
        let addr = server.local_addr().map_err(listen_err)?;
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        let running = server
            .spawn(Arc::new(move |req: &Request| answer(req, &metrics, &c)))
            .map_err(|e| ExportError::Invalid(format!("cannot start the HTTP thread: {e}")))?;
        Ok(ExpositionServer { running: Some(running), addr, counts })
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

    /// Stops serving: closes the connections and waits for their threads.
    pub fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.stop();
        }
    }
}

fn answer(req: &Request, metrics: &SharedMetrics, counts: &Counts) -> Response {
    if !matches!(req.method.as_str(), "GET" | "HEAD") {
        return Response::text(405, "only GET\n").with_header("Allow", "GET, HEAD");
    }
    match req.path.as_str() {
        "/metrics" => match metrics.render(req.header("accept")) {
            Ok((ctype, body)) => {
                let c = if ctype == Format::Protobuf.content_type() { &counts.protobuf } else { &counts.text };
                c.fetch_add(1, Ordering::Relaxed);
                Response::new(200, ctype, body)
            }
            Err(e) => Response::text(500, format!("{e}\n")),
        },
        "/" => Response::text(200, "latscope metrics: /metrics\n"),
        _ => Response::text(404, "not found: the metrics are at /metrics\n"),
    }
}

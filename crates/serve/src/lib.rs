//! latscope's web dashboard: `latscope serve`.
//!
//! Three pages, each drawn in the browser from a JSON API of the same server (documented for
//! scripts in `docs/DASHBOARD.md`); the HTML, JavaScript and CSS are compiled into the binary, so
//! the dashboard works offline and loads nothing from elsewhere.
//!
//! | page | shows | API |
//! |---|---|---|
//! | `/` | every series of the store: its latest hour (count, p50, p99, max, the histogram as a sparkline) and its p50/p99 trend over the hours kept | `/api/overview` |
//! | `/series?id=N` (or `?op=NAME`) | one series hour by hour (`hoursAgo`, `hours`, `buckets`, `scale=log\|linear`), the window merged with its peaks annotated (mode, share, tier) and explained (clock granularity, cache tiers, cache-size estimate) | `/api/series/detail` |
//! | `/dumps`, `/dump?d=N&f=NAME` | flight recorders' dumps in the directories given (`--dumps DIR`), newest first, each with what fired it; a dump's views: the latency heat map, the breakdown by cause, the slowest calls with their why, the processes, and the file | `/api/dumps`, `/api/dump`, `/api/dump/heatmap.svg`, `/api/dump/why.svg`, `/api/dump/file` |
//! | `/live` | the host's syscall (or block request) latency now: a heat map and a spectrogram of one-second rows, a filter box, drill-down tables by process, syscall, file, disk, client, container and pod, the events of a selected cell and (with `why=1`) why they were slow: time by cause, by waker, by blocking stack; every thread's calls of the last seconds and who woke whom | `/api/live`, `/api/live/tables`, `/api/live/threads`, `/api/live/events` |
//!
//! # Data
//!
//! Store pages read the store read-only ([`latscope_store::Store::open_read_only`], a small pool
//! of connections, one per request at a time); a writer (`latscope bench --store`) may run at the
//! same time. Percentiles of hours not updated since they were last read are cached.
//!
//! The live page is served by [`live::LiveHub`]: the first request of a filter starts a
//! `latscope_live::LiveSession` on a thread of its own, counting in the kernel when the kernel can
//! apply the filter exactly, streaming events otherwise or when a viewer asks for drill-down
//! (`stream=1`). Viewers of the same filter share the session; a session nobody asked for during
//! [`live::LiveOptions::idle`] is stopped, its probes detached. Live requests are commands to that
//! thread answered within a timeout: the store pages never wait for it.
//!
//! # Security
//!
//! * The server listens on loopback unless told otherwise; any other address requires a token
//!   ([`ServeError::NeedsToken`]), at least [`auth::MIN_TOKEN_CHARS`] characters, sent as
//!   `Authorization: Bearer TOKEN` or as the cookie the login form (`/login`) sets (HttpOnly,
//!   SameSite=Strict). It is compared in constant time and never logged or echoed.
//! * On loopback without a token, only the user running the server and root are answered: the
//!   kernel says who owns each client's socket (`latscope_http::tcp_peer_uid`), so another
//!   local user cannot read what root recorded. Where it cannot say, [`Server::notice`] says so
//!   loudly at the start.
//! * On loopback, requests must name a loopback host (`localhost` or a loopback address, the
//!   one listened on included, any port), so a page of another site that rebinds its name to
//!   127.0.0.1 cannot read the API; browsers' cross-site API requests are refused
//!   (`Sec-Fetch-Site`). Pages carry a content security policy that allows this server's scripts
//!   and styles only and forbids framing.
//! * Live requests start BPF sessions: they are POSTs only, and a browser's POST must come from
//!   this server's pages ([`auth::same_origin`]). The login form's `next` stays on this site
//!   ([`auth::local_target`]); token checks are paced per client ([`auth::Pacer`]), so guesses
//!   never lock out the right token.
//! * Nothing is written: the store is opened read-only and no endpoint writes a file.
//!   A dump is read only when its name is a flight recorder's and it is a regular file in a
//!   directory given.
//! * Requests and connections are bounded by the shared server ([`http::Limits`], the crate
//!   `latscope-http`): sizes, framing, read and write deadlines, a connection cap at which idle
//!   and slow connections are closed first, with no quota per client address, and a bounded,
//!   fairly shared number of store and live requests at once (`Request::busy`).

//! # Example
//!
//! ```no_run
//! use latscope_serve::{ServeOptions, Server};
//!
//! let opts = ServeOptions { store: Some("bench.db".into()), ..ServeOptions::default() };
//! let server = Server::bind(opts)?;
//! println!("dashboard at {}", server.url());
//! let stop = server.stop_flag(); // set it (from a signal handler) to stop
//! server.run()?;
//! # Ok::<(), latscope_serve::ServeError>(())
//! ```

#![warn(missing_docs)]

mod app;
pub mod auth;
pub mod dumps;
pub mod live;
pub mod params;
pub mod stored;

/// The bounded HTTP server the dashboard runs on (the crate `latscope-http`).
pub use latscope_http as http;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub use http::Limits;
pub use live::LiveOptions;

/// Where the dashboard listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// What [`Server::bind`] needs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// The store the overview and series pages read.
    pub store: Option<PathBuf>,
    /// Access token; required unless `listen` is a loopback address.
    pub token: Option<String>,
    /// Request and connection limits.
    pub limits: Limits,
    /// Live sessions.
    pub live: LiveOptions,
    /// Serve the live page (it needs root or CAP_BPF/CAP_PERFMON).
    pub live_enabled: bool,
    /// Directories of flight recorders' dumps, listed on `/dumps`.
    pub dumps: Vec<PathBuf>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            listen: DEFAULT_LISTEN.parse().expect("valid address"),
            store: None,
            token: None,
            limits: Limits::default(),
            live: LiveOptions::default(),
            live_enabled: true,
            dumps: Vec::new(),
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without a token.
    #[error(
        "{0} is not a loopback address: anyone who can reach it could use the dashboard, so a token is required \
         (--token, or LATSCOPE_TOKEN); or listen on 127.0.0.1"
    )]
    NeedsToken(SocketAddr),
    /// The token is unusable.
    #[error("unusable token: {0}")]
    BadToken(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] latscope_store::StoreError),
    /// Serving failed.
    #[error("serving failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Whether the owner of a loopback client's socket can be found here: a connection to a
/// listener of our own on `ip` must come out as ours (`me`).
fn peer_lookup_works(ip: std::net::IpAddr, me: u32) -> Result<(), String> {
    let l = std::net::TcpListener::bind((ip, 0)).map_err(|e| e.to_string())?;
    let local = l.local_addr().map_err(|e| e.to_string())?;
    let _c = std::net::TcpStream::connect(local).map_err(|e| e.to_string())?;
    let (_s, peer) = l.accept().map_err(|e| e.to_string())?;
    match http::tcp_peer_uid(local, peer) {
        Ok(u) if u == me => Ok(()),
        Ok(u) => Err(format!("our own socket came out as uid {u}")),
        Err(e) => Err(e.to_string()),
    }
}

/// A bound dashboard server.
pub struct Server {
    http: http::HttpServer,
    app: Arc<app::App>,
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    notice: String,
}

impl Server {
    /// Checks the options (a token off loopback, the store opens) and binds the address.
    pub fn bind(opts: ServeOptions) -> Result<Server, ServeError> {
        let loopback = opts.listen.ip().is_loopback();
        match &opts.token {
            Some(t) => auth::validate_token(t).map_err(ServeError::BadToken)?,
            None if !loopback => return Err(ServeError::NeedsToken(opts.listen)),
            None => {}
        }
        let store = opts.store.as_deref().map(stored::StoreReader::open).transpose()?;
        let http = http::HttpServer::bind(opts.listen, opts.limits.clone())
            .map_err(|source| ServeError::Bind { addr: opts.listen, source })?;
        let addr = http.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut access = auth::Access::new(opts.token.clone(), loopback.then_some(addr.ip()));
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let notice = match (&opts.token, loopback) {
            (Some(_), _) => "every request needs the token".to_string(),
            (None, _) => match peer_lookup_works(addr.ip(), me) {
                Ok(()) => {
                    access = access.only_user(me);
                    format!("no token: only uid {me} (who started it) and root are answered, other local users are refused; give a token (LATSCOPE_TOKEN) to let them in with it")
                }
                Err(why) => format!(
                    "WARNING: no token, and the kernel cannot say which user a local connection belongs to ({why}): \
                     EVERY local user can read this dashboard; give a token (LATSCOPE_TOKEN)"
                ),
            },
        };
        let live = opts.live_enabled.then(|| live::LiveHub::new(opts.live.clone(), stop.clone()));
        let dumps = dumps::Dumps::new(opts.dumps.clone());
        let app = Arc::new(app::App { access, store, live, dumps });
        Ok(Server { http, app, stop, addr, notice })
    }

    /// Who is answered, in a sentence for the start of the server (a line starting with
    /// `WARNING` when every local user is).
    pub fn notice(&self) -> &str {
        &self.notice
    }

    /// The address listened on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The dashboard's URL (`http://127.0.0.1:8080/`; a wildcard address is shown as this
    /// machine's loopback).
    pub fn url(&self) -> String {
        let a = self.addr;
        let host = match a.ip() {
            ip if ip.is_unspecified() && a.is_ipv4() => "127.0.0.1".to_string(),
            ip if ip.is_unspecified() => "[::1]".to_string(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        format!("http://{host}:{}/", a.port())
    }

    /// Set this to stop the server (running requests finish, live sessions stop).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Serves until the stop flag is set.
    pub fn run(self) -> Result<(), ServeError> {
        let handler: Arc<dyn http::Handler> = self.app.clone();
        self.http.run(handler, self.stop.clone())?;
        Ok(())
    }
}

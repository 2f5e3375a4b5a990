//! latscope's HTTP/1.1 server: small, synchronous, and bounded in every way a client could use to
//! exhaust it. The dashboard (`latscope serve`) and the agent's `/metrics` both run on it.
//!
//! * **Sizes**: request line and headers ([`Limits::max_head_bytes`], refused with 431 as soon as
//!   that many bytes arrived without the end of the head, so memory never follows the client),
//!   request target (414), body (413), at most [`MAX_HEADERS`] header lines (431).
//! * **Time**: a request must arrive whole within [`Limits::request_timeout`] of its first byte
//!   (408), a kept-alive connection may stay silent for [`Limits::idle_timeout`], a response must
//!   be taken within [`Limits::write_timeout`]: a client that pipelines requests and never reads
//!   its answers holds its own connection only, and only that long.
//! * **Connections**: one thread each, at most [`Limits::max_connections`]. At the cap a new
//!   connection is not refused while another can be let go: the server closes, in this order,
//!   the connection idle the longest (kept alive between requests, or connected and silent for
//!   more than a grace of 250 ms: within its first 250 ms a connection whose first request is
//!   not yet handled is closed last, so that a client that sends at once is not cut off by its
//!   own server thread's delay in reading it), then one waiting out a penalty ([`Request::wait`]), then the one whose request has been
//!   arriving the longest, then the one slowest to take its response. While the only ones left
//!   to close are within their grace, new connections wait in the kernel's queue; only when
//!   every connection is inside its handler is the newcomer answered 503. So a crowd of slow or idle clients
//!   cannot keep out a client that sends its request and reads its answer, and there is no
//!   per-address quota to shut out everyone behind one address (a tunnel, a proxy).
//! * **Long work**: a handler about to do long work (a database query, a wait for another
//!   thread) asks for a place first ([`Request::busy`]): at most [`Limits::max_busy`] at once, at
//!   most [`Limits::max_busy_per_client`] per client ([`Client`]: on loopback the user owning the
//!   client's socket, else its address), handed out fairly (the client holding fewest first,
//!   then in order of arrival). As many requests of a client may wait as it may hold, and as
//!   many in all as there are places, though a client with nothing held or waiting always gets
//!   in line; beyond, a request is refused (the handler answers 503) after
//!   [`Limits::busy_refusal_delay`], spent like a penalty, so that a client retrying at once
//!   cannot spin the server nor crowd the connection cap with requests being handled. A waiting
//!   request can be closed at the connection cap like an idle one, and waits at most
//!   [`Limits::busy_wait`]. So a crowd of busy clients holds a bounded number of
//!   connections inside handlers, and quick pages stay answered.
//! * **Who**: on loopback, [`Request::peer_uid`] is the user owning the client's socket (asked
//!   of the kernel, see [`tcp_peer_uid`]), for servers that answer only some users.
//! * **Framing**: requests are parsed by `httparse`; a request with two `Host` or two
//!   `Content-Length` headers, a `Content-Length` that is not a plain decimal number, both
//!   `Transfer-Encoding` and `Content-Length`, or (HTTP/1.1) no `Host` is refused with 400 and the
//!   connection closed; chunked bodies are not accepted (501). Only origin-form targets (`/path`).
//! * **Responses** carry `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY`,
//!   `Referrer-Policy: no-referrer` and, unless the handler sets its own,
//!   `Content-Security-Policy: default-src 'none'; frame-ancestors 'none'`.
//!
//! # Example
//!
//! ```no_run
//! use latscope_http::{HttpServer, Limits, Request, Response};
//! use std::sync::Arc;
//!
//! let server = HttpServer::bind("127.0.0.1:0".parse().unwrap(), Limits::default())?;
//! let running = server.spawn(Arc::new(|req: &Request| match req.path.as_str() {
//!     "/" => Response::text(200, "hello\n"),
//!     _ => Response::text(404, "no such page\n"),
//! }))?;
//! println!("http://{}/", running.local_addr());
//! running.stop();
//! # Ok::<(), std::io::Error>(())
//! ```

#![warn(missing_docs)]

mod peer;

pub use peer::tcp_peer_uid;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most header lines of a request (more: 431).
pub const MAX_HEADERS: usize = 64;

/// Bounds on what clients may send and how long they may take.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections open at once. At the cap, idle and slow connections are closed to make room
    /// (see the crate documentation); a newcomer is answered 503 only when every connection is
    /// being answered.
    pub max_connections: usize,
    /// Bytes of request line and headers.
    pub max_head_bytes: usize,
    /// Bytes of the request target (path and query).
    pub max_target_bytes: usize,
    /// Bytes of a request body.
    pub max_body_bytes: usize,
    /// Time a client has to send a whole request (head and body) once its first byte arrived.
    pub request_timeout: Duration,
    /// Time a connection may stay silent before its (next) request.
    pub idle_timeout: Duration,
    /// Time a client has to take a whole response.
    pub write_timeout: Duration,
    /// Requests served on one connection before it is closed.
    pub max_requests_per_connection: u32,
    /// How long a new connection is left to send and have read its first request before it
    /// counts as idle or slow at the connection cap (until then it is closed last): a client that connects and sends at
    /// once must not lose its connection to a crowd because its server thread had not read it
    /// yet, on a loaded machine.
    pub fresh_grace: Duration,
    /// Requests doing long work at once ([`Request::busy`]; as many more may wait).
    pub max_busy: usize,
    /// Requests of one client doing long work at once (as many more may wait for a place).
    pub max_busy_per_client: usize,
    /// How long a request waits for its turn to do long work before it is answered 503.
    pub busy_wait: Duration,
    /// How long a request that may not even wait for a place (its client has as many waiting as
    /// it may hold) waits, as a penalty, before it is answered 503.
    pub busy_refusal_delay: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            max_head_bytes: 16 << 10,
            max_target_bytes: 4 << 10,
            max_body_bytes: 16 << 10,
            request_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(20),
            max_requests_per_connection: 1000,
            fresh_grace: Duration::from_millis(250),
            max_busy: 16,
            max_busy_per_client: 4,
            busy_wait: Duration::from_secs(10),
            busy_refusal_delay: Duration::from_secs(1),
        }
    }
}

/// A parsed request.
#[derive(Debug)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, percent-decoded (`/api/series`).
    pub path: String,
    /// Query parameters, decoded, in order.
    pub query: Vec<(String, String)>,
    /// Header names in lower case, with their values.
    pub headers: Vec<(String, String)>,
    /// The body (bounded by [`Limits::max_body_bytes`]).
    pub body: Vec<u8>,
    /// The client.
    pub peer: SocketAddr,
    conn: Option<Arc<Conn>>,
    /// The user owning the client's socket, once asked (or set, for requests made directly).
    uid: OnceLock<Option<u32>>,
    busy: Option<Arc<BusyGate>>,
}

/// Who a client is, for sharing out places fairly and pacing: on loopback the user owning the
/// client's socket when the kernel says, else its address (an IPv6 client's /64 network, which
/// one host usually has whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Client {
    /// A local user, by uid.
    User(u32),
    /// An address.
    Address(IpAddr),
}

impl Request {
    /// A request not read from a connection (for tests and for handlers called directly).
    pub fn new(method: &str, target: &str, headers: &[(&str, &str)], body: &[u8], peer: SocketAddr) -> Request {
        let (raw_path, raw_query) = target.split_once('?').unwrap_or((target, ""));
        Request {
            method: method.to_string(),
            path: percent_decode(raw_path).unwrap_or_else(|| raw_path.to_string()),
            query: form_urlencoded::parse(raw_query.as_bytes()).into_owned().collect(),
            headers: headers.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.to_string())).collect(),
            body: body.to_vec(),
            peer,
            conn: None,
            uid: OnceLock::new(),
            busy: None,
        }
    }

    /// The same request, as made by a client socket owned by `uid` (for tests and for handlers
    /// called directly).
    pub fn with_peer_uid(self, uid: Option<u32>) -> Request {
        let _ = self.uid.set(uid);
        self
    }

    /// The user owning the client's socket, when the client is on this machine's loopback and
    /// the kernel says (see [`tcp_peer_uid`]); looked up once per connection.
    pub fn peer_uid(&self) -> Option<u32> {
        *self.uid.get_or_init(|| {
            let c = self.conn.as_ref()?;
            *c.uid.get_or_init(|| tcp_peer_uid(c.local, self.peer).ok())
        })
    }

    /// Who the client is ([`Client`]).
    pub fn client(&self) -> Client {
        if let Some(u) = self.peer_uid() {
            return Client::User(u);
        }
        match self.peer.ip() {
            IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => {
                let mut o = v6.octets();
                o[8..].fill(0);
                Client::Address(IpAddr::from(o))
            }
            IpAddr::V6(v6) => {
                Client::Address(IpAddr::V4(v6.to_ipv4_mapped().unwrap_or(std::net::Ipv4Addr::UNSPECIFIED)))
            }
            ip => Client::Address(ip),
        }
    }

    /// A place to do long work (see the crate documentation), held until the permit is
    /// dropped; `None` when none came within [`Limits::busy_wait`] (answer 503) or the
    /// connection was closed meanwhile (nothing will be sent). While it waits, the connection
    /// is among the first closed when the server is at its connection cap.
    pub fn busy(&self) -> Option<BusyPermit> {
        let Some(gate) = &self.busy else {
            return Some(BusyPermit { gate: None, client: self.client() });
        };
        let client = self.client();
        if let Some(c) = &self.conn {
            if !c.enter(Phase::Waiting) {
                return None;
            }
        }
        let evicted = || self.conn.as_ref().is_some_and(|c| c.lock().evicted);
        // Made at once, so that the place is given back however this ends.
        let permit = match gate.acquire(client, evicted) {
            Acquired::Place => Some(BusyPermit { gate: Some(gate.clone()), client }),
            Acquired::Timeout => None,
            Acquired::Refused => {
                // Still in the waiting phase: closed first at the cap while it waits.
                let _ = self.wait(gate.refusal_delay);
                return None;
            }
        };
        if let Some(c) = &self.conn {
            if !c.enter(Phase::Handling) {
                return None;
            }
        }
        permit
    }

    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Waits `d` before answering (a penalty, e.g. for a wrong token) without holding a place
    /// the server needs: while it waits, the connection is among the first closed when the
    /// server is at its connection cap. Returns false if it was closed meanwhile (answer nothing
    /// more: the response will not be sent).
    pub fn wait(&self, d: Duration) -> bool {
        let Some(c) = &self.conn else {
            std::thread::sleep(d);
            return true;
        };
        if !c.enter(Phase::Waiting) {
            return false;
        }
        let end = Instant::now() + d;
        let mut s = c.lock();
        while !s.evicted {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = c.cv.wait_timeout(s, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        if s.evicted {
            return false;
        }
        s.phase = Phase::Handling;
        s.since = Instant::now();
        true
    }
}

/// A place to do long work, from [`Request::busy`]; given back when dropped.
#[derive(Debug)]
pub struct BusyPermit {
    gate: Option<Arc<BusyGate>>,
    client: Client,
}

impl Drop for BusyPermit {
    fn drop(&mut self) {
        if let Some(g) = &self.gate {
            g.release(self.client);
        }
    }
}

/// The places for long work, handed out fairly: when one frees, the waiting client holding the
/// fewest gets it (the earliest of its requests), no client more than its share.
#[derive(Debug)]
struct BusyGate {
    st: Mutex<BusyState>,
    cv: Condvar,
    max: usize,
    per_client: usize,
    wait: Duration,
    refusal_delay: Duration,
}

/// How a wait for a place ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Acquired {
    Place,
    /// The client may not wait: as many of its requests wait already as it may hold.
    Refused,
    /// No place came in time, or the connection was closed.
    Timeout,
}

#[derive(Debug, Default)]
struct BusyState {
    total: usize,
    held: HashMap<Client, usize>,
    /// Waiting requests: (ticket, client), in order of arrival.
    queue: Vec<(u64, Client)>,
    next: u64,
}

impl BusyState {
    /// The ticket whose turn it is, if a place is free.
    fn turn(&self, max: usize, per_client: usize) -> Option<u64> {
        if self.total >= max {
            return None;
        }
        let held = |c: &Client| self.held.get(c).copied().unwrap_or(0);
        self.queue.iter().filter(|(_, c)| held(c) < per_client).min_by_key(|(t, c)| (held(c), *t)).map(|(t, _)| *t)
    }
}

impl BusyGate {
    fn new(limits: &Limits) -> BusyGate {
        BusyGate {
            st: Mutex::new(BusyState::default()),
            cv: Condvar::new(),
            max: limits.max_busy.max(1),
            per_client: limits.max_busy_per_client.max(1),
            wait: limits.busy_wait,
            refusal_delay: limits.busy_refusal_delay,
        }
    }

    fn lock(&self) -> MutexGuard<'_, BusyState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a place for `client`; false at once when as many of its requests wait already
    /// as it may hold (or as many requests wait as there are places), else after the longest
    /// wait or once `gone()`.
    fn acquire(&self, client: Client, gone: impl Fn() -> bool) -> Acquired {
        let end = Instant::now() + self.wait;
        let mut s = self.lock();
        let queued = s.queue.iter().filter(|(_, c)| *c == client).count();
        let held = s.held.get(&client).copied().unwrap_or(0);
        // A client holding and waiting for nothing always gets in line (it is next in turn).
        if queued >= self.per_client || s.queue.len() >= self.max && queued + held > 0 {
            return Acquired::Refused;
        }
        let ticket = s.next;
        s.next += 1;
        s.queue.push((ticket, client));
        loop {
            if s.turn(self.max, self.per_client) == Some(ticket) {
                s.queue.retain(|(t, _)| *t != ticket);
                s.total += 1;
                *s.held.entry(client).or_insert(0) += 1;
                // Another place may be free for the next in turn.
                self.cv.notify_all();
                return Acquired::Place;
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() || gone() {
                s.queue.retain(|(t, _)| *t != ticket);
                self.cv.notify_all();
                return Acquired::Timeout;
            }
            // Woken when a place frees; every 50 ms to notice a closed connection.
            s = self.cv.wait_timeout(s, left.min(Duration::from_millis(50))).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    fn release(&self, client: Client) {
        let mut s = self.lock();
        s.total = s.total.saturating_sub(1);
        if let Some(n) = s.held.get_mut(&client) {
            *n -= 1;
            if *n == 0 {
                s.held.remove(&client);
            }
        }
        self.cv.notify_all();
    }
}

/// A response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Content type.
    pub content_type: &'static str,
    /// Extra headers.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A response with a body.
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response { status, content_type, headers: Vec::new(), body: body.into() }
    }

    /// A JSON document.
    pub fn json(status: u16, v: &serde_json::Value) -> Response {
        Response::new(status, "application/json", v.to_string())
    }

    /// A JSON error: `{"error": message}`.
    pub fn error(status: u16, message: impl Into<String>) -> Response {
        Response::json(status, &serde_json::json!({ "error": message.into() }))
    }

    /// Plain text.
    pub fn text(status: u16, s: impl Into<String>) -> Response {
        Response::new(status, "text/plain; charset=utf-8", s.into())
    }

    /// A redirect to `location` (303: the next request is a GET).
    pub fn redirect(location: &str) -> Response {
        let mut r = Response::new(303, "text/plain; charset=utf-8", "");
        r.headers.push(("Location", location.to_string()));
        r
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        303 => "See Other",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        414 => "URI Too Long",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Status",
    }
}

/// What handles requests (called from many connection threads at once).
pub trait Handler: Send + Sync + 'static {
    /// The response to a request.
    fn handle(&self, req: &Request) -> Response;
}

impl<F: Fn(&Request) -> Response + Send + Sync + 'static> Handler for F {
    fn handle(&self, req: &Request) -> Response {
        self(req)
    }
}

/// What the server did with its clients so far (for tests and status lines).
#[derive(Debug, Default)]
pub struct Counters {
    /// Connection threads running now.
    pub open: AtomicUsize,
    /// Connections answered 503 at once (every place taken by a request being answered).
    pub refused: AtomicUsize,
    /// Idle or slow connections closed to make room for a new one.
    pub evicted: AtomicUsize,
    /// Requests that timed out or were malformed or too large.
    pub bad_requests: AtomicUsize,
}

/// Where a connection is; also the order in which connections are closed at the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    /// Between requests, or connected and silent.
    Idle,
    /// Waiting out a penalty ([`Request::wait`]).
    Waiting,
    /// A request is arriving.
    Reading,
    /// A response is leaving.
    Writing,
    /// The handler runs: never closed from outside.
    Handling,
}

struct ConnState {
    phase: Phase,
    since: Instant,
    evicted: bool,
    /// Connected, and no request has been handled yet (its first may be arriving).
    fresh: bool,
    /// When it was accepted.
    born: Instant,
}

/// A connection as the accept loop sees it: to close it from outside and to choose whom to close.
struct Conn {
    id: u64,
    stream: TcpStream,
    /// The server's address of the connection.
    local: SocketAddr,
    /// The user owning the client's socket, once looked up.
    uid: OnceLock<Option<u32>>,
    st: Mutex<ConnState>,
    cv: Condvar,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("id", &self.id).finish()
    }
}

impl Conn {
    fn lock(&self) -> MutexGuard<'_, ConnState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Enters `phase`; false if the connection was closed from outside.
    fn enter(&self, phase: Phase) -> bool {
        let mut s = self.lock();
        if s.evicted {
            return false;
        }
        s.phase = phase;
        s.since = Instant::now();
        // A first request still being read keeps the grace: on a loaded machine its thread may have
        // begun reading it and then waited for a CPU.
        s.fresh &= matches!(phase, Phase::Idle | Phase::Reading);
        true
    }

    /// Closes it from outside: a blocked read or write returns, a wait ends.
    fn evict(&self) {
        self.lock().evicted = true;
        self.cv.notify_all();
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

#[derive(Default)]
struct Registry {
    conns: Mutex<Vec<Arc<Conn>>>,
    next_id: AtomicU64,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Vec<Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remove(&self, id: u64) {
        self.lock().retain(|c| c.id != id);
    }
}

/// A listening server; [`HttpServer::run`] serves until the stop flag is set.
pub struct HttpServer {
    listener: TcpListener,
    limits: Limits,
    counters: Arc<Counters>,
    registry: Arc<Registry>,
    busy: Arc<BusyGate>,
}

impl HttpServer {
    /// Binds `addr`.
    pub fn bind(addr: SocketAddr, limits: Limits) -> std::io::Result<HttpServer> {
        HttpServer::from_listener(TcpListener::bind(addr)?, limits)
    }

    /// Serves a socket already bound.
    pub fn from_listener(listener: TcpListener, limits: Limits) -> std::io::Result<HttpServer> {
        listener.set_nonblocking(true)?;
        let busy = Arc::new(BusyGate::new(&limits));
        Ok(HttpServer { listener, limits, counters: Arc::default(), registry: Arc::default(), busy })
    }

    /// The address bound (with the port chosen when 0 was asked for).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// What the server did so far.
    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// Serves on a thread of its own until [`Running::stop`] (or drop).
    pub fn spawn(self, handler: Arc<dyn Handler>) -> std::io::Result<Running> {
        let addr = self.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::Builder::new().name("latscope-http".into()).spawn(move || self.run(handler, s2))?;
        Ok(Running { addr, stop, thread: Some(thread) })
    }

    /// Accepts connections until `stop` is set (checked every 100 ms), each served on its own
    /// thread; then closes the connections not being answered and returns once every
    /// connection thread has ended (within the write timeout).
    pub fn run(self, handler: Arc<dyn Handler>, stop: Arc<AtomicBool>) -> std::io::Result<()> {
        while !stop.load(Ordering::Relaxed) {
            if self.only_newcomers_to_close() {
                // Leave the next connection in the kernel's queue until a thread has read one of
                // these (or its grace ends): closing one just connected to let in the next would
                // let a crowd reconnecting at once cut off clients before they are ever read.
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            match self.listener.accept() {
                Ok((stream, peer)) => self.admit(stream, peer, &handler, &stop),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    // Until a connection arrives (accepted at once) or 100 ms pass (the stop flag).
                    let mut pfd = libc::pollfd { fd: self.listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                    // SAFETY: one valid pollfd for the listener we own.
                    unsafe { libc::poll(&mut pfd, 1, 100) };
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // Out of file descriptors and the like: wait instead of spinning.
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        for c in self.registry.lock().iter() {
            if c.lock().phase != Phase::Handling {
                c.evict();
            }
        }
        let deadline = Instant::now() + self.limits.write_timeout + Duration::from_secs(1);
        while self.counters.open.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            // Those that were answering when asked to stop are closed once they have answered.
            for c in self.registry.lock().iter() {
                if c.lock().phase != Phase::Handling {
                    c.evict();
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// At the cap, and the only connections that could be closed are within their grace.
    fn only_newcomers_to_close(&self) -> bool {
        let conns = self.registry.lock();
        if conns.len() < self.limits.max_connections.max(1) {
            return false;
        }
        let mut young = false;
        for c in conns.iter() {
            let s = c.lock();
            if s.phase == Phase::Handling || s.evicted {
                continue;
            }
            if !(s.fresh && s.born.elapsed() < self.limits.fresh_grace) {
                return false;
            }
            young = true;
        }
        young
    }

    fn admit(&self, stream: TcpStream, peer: SocketAddr, handler: &Arc<dyn Handler>, stop: &Arc<AtomicBool>) {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_nodelay(true);
        let Ok(handle) = stream.try_clone() else {
            refuse(stream);
            return;
        };
        let local = stream.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let conn = Arc::new(Conn {
            id: self.registry.next_id.fetch_add(1, Ordering::Relaxed),
            stream: handle,
            local,
            uid: OnceLock::new(),
            st: Mutex::new(ConnState {
                phase: Phase::Idle,
                since: Instant::now(),
                evicted: false,
                fresh: true,
                born: Instant::now(),
            }),
            cv: Condvar::new(),
        });
        {
            let mut conns = self.registry.lock();
            if conns.len() >= self.limits.max_connections.max(1) {
                // Make room: the connection doing the least for its client goes first; one
                // just connected, within its grace, last.
                let victim = conns
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| {
                        let s = c.lock();
                        let young = s.fresh && s.born.elapsed() < self.limits.fresh_grace;
                        (s.phase != Phase::Handling && !s.evicted).then_some((young, s.phase, s.since, i))
                    })
                    .min();
                match victim {
                    Some((_, _, _, i)) => {
                        conns.swap_remove(i).evict();
                        self.counters.evicted.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {
                        drop(conns);
                        self.counters.refused.fetch_add(1, Ordering::Relaxed);
                        refuse(stream);
                        return;
                    }
                }
            }
            conns.push(conn.clone());
        }
        self.counters.open.fetch_add(1, Ordering::AcqRel);
        let (limits, counters, registry) = (self.limits.clone(), self.counters.clone(), self.registry.clone());
        let (handler, stop, busy) = (handler.clone(), stop.clone(), self.busy.clone());
        let id = conn.id;
        let spawned = std::thread::Builder::new().name("latscope-http-conn".into()).spawn(move || {
            let ctx =
                ConnCtx { limits: &limits, handler: handler.as_ref(), stop: &stop, counters: &counters, busy: &busy };
            serve_connection(stream, peer, &conn, &ctx);
            registry.remove(conn.id);
            counters.open.fetch_sub(1, Ordering::AcqRel);
        });
        if spawned.is_err() {
            self.registry.remove(id);
            self.counters.open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A server serving on its own thread.
pub struct Running {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl Running {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes the connections and waits for their threads.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Answers a connection over the cap with 503, without waiting for its request.
fn refuse(mut stream: TcpStream) {
    let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
    let body = "too many connections: try again in a few seconds\n";
    let _ = write!(
        stream,
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Retry-After: 5\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Why a request could not be read.
enum ReadError {
    /// The client closed the connection, was idle too long, or the server closed it.
    Closed,
    /// Answer with this status and close.
    Status(u16, &'static str),
}

/// What every connection of a server shares.
struct ConnCtx<'a> {
    limits: &'a Limits,
    handler: &'a dyn Handler,
    stop: &'a AtomicBool,
    counters: &'a Counters,
    busy: &'a Arc<BusyGate>,
}

fn serve_connection(mut stream: TcpStream, peer: SocketAddr, conn: &Arc<Conn>, ctx: &ConnCtx) {
    let ConnCtx { limits, handler, stop, counters, busy } = *ctx;
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    for served in 0..limits.max_requests_per_connection {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (mut req, keep) = match read_request(&mut stream, &mut buf, peer, limits, conn) {
            Ok(r) => r,
            Err(ReadError::Closed) => break,
            Err(ReadError::Status(status, msg)) => {
                counters.bad_requests.fetch_add(1, Ordering::Relaxed);
                if conn.enter(Phase::Writing) {
                    let resp = Response::text(status, format!("{msg}\n"));
                    let _ = write_response(&mut stream, &resp, false, limits, false);
                    linger(&mut stream);
                }
                break;
            }
        };
        if !conn.enter(Phase::Handling) {
            break;
        }
        req.conn = Some(conn.clone());
        req.busy = Some(busy.clone());
        let keep_alive = keep && served + 1 < limits.max_requests_per_connection && !stop.load(Ordering::Relaxed);
        let head_only = req.method == "HEAD";
        let resp = handler.handle(&req);
        if !conn.enter(Phase::Writing)
            || write_response(&mut stream, &resp, keep_alive, limits, head_only).is_err()
            || !keep_alive
            || !conn.enter(Phase::Idle)
        {
            break;
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// After an error answer to a request not read in full: stop sending, and take (and drop) what the
/// client still sends for a moment, so that closing does not reset the connection before the
/// client has read the answer. Bounded in time and bytes.
fn linger(stream: &mut TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut sink = [0u8; 8192];
    let mut taken = 0usize;
    while taken < (1 << 20) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => taken += n,
        }
    }
}

/// Reads one request (head and body): the connection may stay silent for
/// [`Limits::idle_timeout`], then has [`Limits::request_timeout`] from the request's first byte.
/// `buf` carries bytes already read past the previous request. Returns the request and whether
/// the connection may be kept alive after it.
fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    peer: SocketAddr,
    limits: &Limits,
    conn: &Conn,
) -> Result<(Request, bool), ReadError> {
    let mut deadline = Instant::now() + limits.idle_timeout;
    let mut started = false;
    let mut chunk = [0u8; 4096];
    let (head_len, method, target, version, headers) = loop {
        if !buf.is_empty() {
            if !started {
                started = true;
                deadline = Instant::now() + limits.request_timeout;
                if !conn.enter(Phase::Reading) {
                    return Err(ReadError::Closed);
                }
            }
            let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut r = httparse::Request::new(&mut hs);
            match r.parse(buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let headers: Vec<(String, String)> = r
                        .headers
                        .iter()
                        .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).trim().to_string()))
                        .collect();
                    let method = r.method.unwrap_or("").to_string();
                    let target = r.path.unwrap_or("").to_string();
                    break (n, method, target, r.version.unwrap_or(1), headers);
                }
                Ok(httparse::Status::Partial) => {}
                Err(httparse::Error::TooManyHeaders) => return Err(ReadError::Status(431, "too many headers")),
                Err(_) => return Err(ReadError::Status(400, "malformed request")),
            }
        }
        // Refused as soon as the head outgrows the limit: memory never follows the client.
        if buf.len() > limits.max_head_bytes {
            return Err(ReadError::Status(431, "request head too large"));
        }
        let n = read_some(stream, &mut chunk, deadline, !started)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    if head_len > limits.max_head_bytes {
        return Err(ReadError::Status(431, "request head too large"));
    }
    if target.len() > limits.max_target_bytes {
        return Err(ReadError::Status(414, "request target too long"));
    }
    let body_len = framing(&headers, version)?;
    if body_len > limits.max_body_bytes {
        return Err(ReadError::Status(413, "request body too large"));
    }
    buf.drain(..head_len);
    while buf.len() < body_len {
        let n = read_some(stream, &mut chunk, deadline, false)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    let body: Vec<u8> = buf.drain(..body_len).collect();
    if !target.starts_with('/') {
        return Err(ReadError::Status(400, "the request target must be a path"));
    }
    let (raw_path, raw_query) = target.split_once('?').unwrap_or((&target, ""));
    let path = percent_decode(raw_path).ok_or(ReadError::Status(400, "the path is not valid UTF-8"))?;
    let query = form_urlencoded::parse(raw_query.as_bytes()).into_owned().collect();
    let close = headers
        .iter()
        .filter(|(k, _)| k == "connection")
        .any(|(_, v)| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")));
    // HTTP/1.0 clients get one answer per connection.
    let keep = version == 1 && !close;
    Ok((Request { method, path, query, headers, body, peer, conn: None, uid: OnceLock::new(), busy: None }, keep))
}

/// Checks the headers that frame a request (RFC 9112 sections 3.2 and 6.3), returns the body's
/// length. Anything two parties could read differently is refused.
fn framing(headers: &[(String, String)], version: u8) -> Result<usize, ReadError> {
    fn all<'a>(headers: &'a [(String, String)], name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        headers.iter().filter(move |(k, _)| k == name).map(|(_, v)| v.as_str())
    }
    let hosts: Vec<&str> = all(headers, "host").collect();
    if hosts.len() > 1 {
        return Err(ReadError::Status(400, "more than one Host header"));
    }
    if hosts.is_empty() && version == 1 {
        return Err(ReadError::Status(400, "an HTTP/1.1 request needs a Host header"));
    }
    if hosts.iter().any(|h| h.bytes().any(|b| !b.is_ascii_graphic() || b"/\\@?#,\"<>{}|^`".contains(&b))) {
        return Err(ReadError::Status(400, "malformed Host header"));
    }
    let lengths: Vec<&str> = all(headers, "content-length").collect();
    if all(headers, "transfer-encoding").next().is_some() {
        if !lengths.is_empty() {
            return Err(ReadError::Status(400, "both Transfer-Encoding and Content-Length"));
        }
        return Err(ReadError::Status(501, "chunked request bodies are not accepted: send Content-Length"));
    }
    match lengths[..] {
        [] => Ok(0),
        [v] if !v.is_empty() && v.len() <= 18 && v.bytes().all(|b| b.is_ascii_digit()) => {
            v.parse().map_err(|_| ReadError::Status(400, "bad Content-Length"))
        }
        [_] => Err(ReadError::Status(400, "Content-Length must be a decimal number")),
        _ => Err(ReadError::Status(400, "more than one Content-Length header")),
    }
}

/// One read before `deadline`. Before a request (`idle`), a closed or silent connection is
/// simply closed; inside a request it is a 408.
fn read_some(stream: &mut TcpStream, chunk: &mut [u8], deadline: Instant, idle: bool) -> Result<usize, ReadError> {
    let timeout = || if idle { ReadError::Closed } else { ReadError::Status(408, "request timed out") };
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(timeout());
    }
    let _ = stream.set_read_timeout(Some(left));
    match stream.read(chunk) {
        Ok(0) => Err(ReadError::Closed),
        Ok(n) => Ok(n),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => Err(timeout()),
        Err(_) => Err(ReadError::Closed),
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Writes a response within [`Limits::write_timeout`] (a client that takes it slower is dropped).
fn write_response(
    stream: &mut TcpStream,
    r: &Response,
    keep_alive: bool,
    limits: &Limits,
    head_only: bool,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
         X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    if !r.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-security-policy")) {
        head.push_str("Content-Security-Policy: default-src 'none'; frame-ancestors 'none'\r\n");
    }
    for (k, v) in &r.headers {
        // Header values never carry line breaks (they would split the response).
        head.push_str(&format!("{k}: {}\r\n", v.replace(['\r', '\n'], " ")));
    }
    if keep_alive {
        head.push_str(&format!(
            "Connection: keep-alive\r\nKeep-Alive: timeout={}\r\n\r\n",
            limits.idle_timeout.as_secs()
        ));
    } else {
        head.push_str("Connection: close\r\n\r\n");
    }
    let deadline = Instant::now() + limits.write_timeout;
    let body: &[u8] = if head_only || r.status == 304 { &[] } else { &r.body };
    for part in [head.as_bytes(), body] {
        let mut rest = part;
        while !rest.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(std::io::ErrorKind::TimedOut.into());
            }
            stream.set_write_timeout(Some(left))?;
            let n = stream.write(&rest[..rest.len().min(64 << 10)])?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            rest = &rest[n..];
        }
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// At the cap, a connection idle between requests is closed before one just connected that
    /// has not sent its request yet, though the newcomer connected first.
    #[test]
    fn at_the_cap_a_new_connection_within_its_grace_is_closed_last() {
        let limits = Limits { max_connections: 2, fresh_grace: Duration::from_secs(60), ..Limits::default() };
        let server = HttpServer::bind("127.0.0.1:0".parse().unwrap(), limits).unwrap();
        let counters = server.counters();
        let run = server.spawn(Arc::new(|_: &Request| Response::text(200, "ok"))).unwrap();
        let addr = run.addr;
        // An answer, to the end of its body ("ok"): the head and the body may come apart.
        let read_answer = |s: &mut TcpStream| {
            let (mut text, mut buf) = (String::new(), [0u8; 512]);
            while !text.ends_with("\r\n\r\nok") {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "closed after {text:?}");
                text.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
            text
        };
        let req = format!("GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        // First a silent connection, then one served and kept alive (idle since after it).
        let mut fresh = TcpStream::connect(addr).unwrap();
        let mut kept = TcpStream::connect(addr).unwrap();
        kept.write_all(req.as_bytes()).unwrap();
        assert!(read_answer(&mut kept).starts_with("HTTP/1.1 200"));
        while counters.open.load(Ordering::Acquire) < 2 {
            std::thread::sleep(Duration::from_millis(5));
        }
        // A newcomer at the cap: the kept-alive connection makes room.
        let mut newcomer = TcpStream::connect(addr).unwrap();
        newcomer.write_all(req.as_bytes()).unwrap();
        assert!(read_answer(&mut newcomer).starts_with("HTTP/1.1 200"));
        kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(kept.read(&mut [0u8; 16]).unwrap_or(0), 0, "the kept-alive connection was closed");
        // The silent one, still open, is served.
        fresh.write_all(req.as_bytes()).unwrap();
        assert!(read_answer(&mut fresh).starts_with("HTTP/1.1 200"));
        assert_eq!(counters.evicted.load(Ordering::Relaxed), 1);
        run.stop();
    }

    /// Places for long work: a freed place goes to the waiting client holding the fewest, a
    /// client waits for no more places than its share, and a newcomer always gets in line.
    #[test]
    fn a_freed_busy_place_goes_to_the_waiting_client_holding_the_fewest() {
        let limits =
            Limits { max_busy: 2, max_busy_per_client: 2, busy_wait: Duration::from_secs(20), ..Limits::default() };
        let gate = Arc::new(BusyGate::new(&limits));
        let (a, b, c) = (Client::User(1), Client::User(2), Client::User(3));
        let place = Acquired::Place;
        assert!(gate.acquire(a, || false) == place && gate.acquire(a, || false) == place, "a holds both places");
        let (tx, rx) = std::sync::mpsc::channel();
        let waiters: Vec<_> = [a, a, b]
            .into_iter()
            .enumerate()
            .map(|(i, who)| {
                let (gate, tx) = (gate.clone(), tx.clone());
                std::thread::sleep(Duration::from_millis(50));
                std::thread::spawn(move || {
                    let got = gate.acquire(who, || false) == Acquired::Place;
                    tx.send((i, got)).unwrap();
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        // a waits for two already (its share): a third is refused without a wait for a place; c, new, gets in line.
        assert_eq!(gate.acquire(a, || false), Acquired::Refused);
        assert_eq!(gate.lock().queue.len(), 3);
        gate.release(a);
        assert_eq!(rx.recv().unwrap(), (2, true), "b, holding nothing, goes first");
        gate.release(a);
        assert_eq!(rx.recv().unwrap(), (0, true), "then a, in order of arrival");
        assert_eq!(gate.acquire(c, || true), Acquired::Timeout, "c gets in line, and leaves when its connection goes");
        gate.release(a);
        gate.release(b);
        assert_eq!(rx.recv().unwrap(), (1, true));
        for w in waiters {
            w.join().unwrap();
        }
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("/a%20b").as_deref(), Some("/a b"));
        assert_eq!(percent_decode("/a%2").as_deref(), Some("/a%2"));
        assert_eq!(percent_decode("/%zz%41").as_deref(), Some("/%zzA"));
        assert_eq!(percent_decode("/%ff"), None);
    }

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn status(r: Result<usize, ReadError>) -> Result<usize, u16> {
        r.map_err(|e| match e {
            ReadError::Status(s, _) => s,
            ReadError::Closed => 0,
        })
    }

    #[test]
    fn framing_headers_that_two_parties_could_read_differently_are_refused() {
        let host = ("host", "127.0.0.1:1");
        assert_eq!(status(framing(&h(&[host]), 1)), Ok(0));
        assert_eq!(status(framing(&h(&[host, ("content-length", "12")]), 1)), Ok(12));
        assert_eq!(status(framing(&h(&[host, ("content-length", "+5")]), 1)), Err(400));
        assert_eq!(status(framing(&h(&[host, ("content-length", "-1")]), 1)), Err(400));
        assert_eq!(status(framing(&h(&[host, ("content-length", "5, 5")]), 1)), Err(400));
        assert_eq!(status(framing(&h(&[host, ("content-length", "0x10")]), 1)), Err(400));
        assert_eq!(status(framing(&h(&[host, ("content-length", "")]), 1)), Err(400));
        assert_eq!(status(framing(&h(&[host, ("content-length", "5"), ("content-length", "6")]), 1)), Err(400));
        assert_eq!(status(framing(&h(&[host, ("content-length", "5"), ("content-length", "5")]), 1)), Err(400));
        assert_eq!(status(framing(&h(&[host, ("transfer-encoding", "chunked")]), 1)), Err(501));
        assert_eq!(
            status(framing(&h(&[host, ("transfer-encoding", "chunked"), ("content-length", "5")]), 1)),
            Err(400)
        );
        assert_eq!(status(framing(&h(&[host, ("host", "127.0.0.1:1")]), 1)), Err(400));
        assert_eq!(status(framing(&h(&[]), 1)), Err(400), "HTTP/1.1 without Host");
        assert_eq!(status(framing(&h(&[]), 0)), Ok(0), "HTTP/1.0 without Host");
        assert_eq!(status(framing(&h(&[("host", "a b")]), 1)), Err(400));
        assert_eq!(status(framing(&h(&[("host", "evil.example/x")]), 1)), Err(400));
        assert_eq!(status(framing(&h(&[("host", "[::1]:8080")]), 1)), Ok(0));
    }
}

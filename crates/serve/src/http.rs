//! A small HTTP/1.1 server on std's sockets, with the limits a dashboard exposed to a network
//! needs: a connection cap (total and per client address), a deadline for each request head, read
//! and write timeouts, bounded request lines, headers and bodies. Requests are parsed by
//! `httparse`; everything else (keep-alive, responses) is here, synchronous, one thread per
//! connection up to the cap.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bounds on what clients may send and how long they may take.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections served at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// Connections served at once from one client address.
    pub max_per_client: usize,
    /// Bytes of request line and headers.
    pub max_head_bytes: usize,
    /// Bytes of the request target (path and query).
    pub max_target_bytes: usize,
    /// Bytes of a request body.
    pub max_body_bytes: usize,
    /// Time a client has to send a whole request head (and body) once it started, or its next
    /// request on a kept-alive connection.
    pub request_timeout: Duration,
    /// Time a client has to take a whole response.
    pub write_timeout: Duration,
    /// Requests served on one connection before it is closed.
    pub max_requests_per_connection: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            max_per_client: 16,
            max_head_bytes: 16 << 10,
            max_target_bytes: 4 << 10,
            max_body_bytes: 4 << 10,
            request_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(20),
            max_requests_per_connection: 1000,
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
}

impl Request {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
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
        411 => "Length Required",
        413 => "Payload Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Status",
    }
}

/// Headers sent with every response: no sniffing, no framing, no referrers, scripts and styles
/// from this server only.
const SECURITY_HEADERS: &str = "X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n\
Referrer-Policy: no-referrer\r\nContent-Security-Policy: default-src 'self'; img-src 'self' data:; \
style-src 'self'; script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'\r\n";

/// What handles requests (called from many connection threads at once).
pub trait Handler: Send + Sync + 'static {
    /// The response to a request.
    fn handle(&self, req: &Request) -> Response;
}

/// Counters of what the server refused (for tests and status lines).
#[derive(Debug, Default)]
pub struct Counters {
    /// Connections open now.
    pub open: AtomicUsize,
    /// Connections refused because of the caps.
    pub refused: AtomicUsize,
    /// Requests that timed out or were malformed or too large.
    pub bad_requests: AtomicUsize,
}

/// A listening server; [`HttpServer::run`] serves until the stop flag is set.
pub struct HttpServer {
    listener: TcpListener,
    limits: Limits,
    counters: Arc<Counters>,
    per_client: Arc<Mutex<std::collections::HashMap<IpAddr, usize>>>,
}

impl HttpServer {
    /// Binds `addr`.
    pub fn bind(addr: SocketAddr, limits: Limits) -> std::io::Result<HttpServer> {
        let listener = TcpListener::bind(addr)?;
        Ok(HttpServer { listener, limits, counters: Arc::default(), per_client: Arc::default() })
    }

    /// The address bound (with the port chosen when 0 was asked for).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// What was refused so far.
    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// Accepts connections until `stop` is set (checked every 100 ms), each served on its own
    /// thread; returns once every connection thread has ended (they end within the request and
    /// write timeouts).
    pub fn run(self, handler: Arc<dyn Handler>, stop: Arc<AtomicBool>) -> std::io::Result<()> {
        self.listener.set_nonblocking(true)?;
        while !stop.load(Ordering::Relaxed) {
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
        let deadline = Instant::now() + self.limits.request_timeout + self.limits.write_timeout;
        while self.counters.open.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn admit(&self, stream: TcpStream, peer: SocketAddr, handler: &Arc<dyn Handler>, stop: &Arc<AtomicBool>) {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_nodelay(true);
        let ip = peer.ip();
        let admitted = {
            let mut per = self.per_client.lock().unwrap_or_else(|e| e.into_inner());
            let n = per.entry(ip).or_insert(0);
            if self.counters.open.load(Ordering::Acquire) >= self.limits.max_connections
                || *n >= self.limits.max_per_client
            {
                false
            } else {
                *n += 1;
                self.counters.open.fetch_add(1, Ordering::AcqRel);
                true
            }
        };
        if !admitted {
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
            refuse(stream);
            return;
        }
        let (limits, counters, per_client) = (self.limits.clone(), self.counters.clone(), self.per_client.clone());
        let (handler, stop) = (handler.clone(), stop.clone());
        let spawned = std::thread::Builder::new().name("latscope-http".into()).spawn(move || {
            serve_connection(stream, peer, &limits, handler.as_ref(), &stop, &counters);
            release(&per_client, &counters, ip);
        });
        if spawned.is_err() {
            release(&self.per_client, &self.counters, ip);
        }
    }
}

fn release(per_client: &Mutex<std::collections::HashMap<IpAddr, usize>>, counters: &Counters, ip: IpAddr) {
    let mut per = per_client.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = per.get_mut(&ip) {
        *n -= 1;
        if *n == 0 {
            per.remove(&ip);
        }
    }
    counters.open.fetch_sub(1, Ordering::AcqRel);
}

/// Answers a connection over the caps with 503, without waiting for its request.
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
    /// The client closed the connection (or was idle past the deadline between requests).
    Closed,
    /// Answer with this status and close.
    Status(u16, &'static str),
}

fn serve_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    limits: &Limits,
    handler: &dyn Handler,
    stop: &AtomicBool,
    counters: &Counters,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    for served in 0..limits.max_requests_per_connection {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let req = match read_request(&mut stream, &mut buf, peer, limits) {
            Ok(r) => r,
            Err(ReadError::Closed) => break,
            Err(ReadError::Status(status, msg)) => {
                counters.bad_requests.fetch_add(1, Ordering::Relaxed);
                let _ = write_response(&mut stream, &Response::text(status, format!("{msg}\n")), false, limits, false);
                linger(&mut stream);
                return;
            }
        };
        let keep_alive = served + 1 < limits.max_requests_per_connection
            && !req.header("connection").is_some_and(|c| c.eq_ignore_ascii_case("close"))
            && !stop.load(Ordering::Relaxed);
        let head_only = req.method == "HEAD";
        let resp = handler.handle(&req);
        if write_response(&mut stream, &resp, keep_alive, limits, head_only).is_err() || !keep_alive {
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

/// Reads one request (head and body) within [`Limits::request_timeout`]. `buf` carries bytes
/// already read past the previous request.
fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    peer: SocketAddr,
    limits: &Limits,
) -> Result<Request, ReadError> {
    let deadline = Instant::now() + limits.request_timeout;
    let mut chunk = [0u8; 4096];
    let (head_len, method, target, headers) = loop {
        if !buf.is_empty() {
            let mut hs = [httparse::EMPTY_HEADER; 64];
            let mut r = httparse::Request::new(&mut hs);
            match r.parse(buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let method = r.method.unwrap_or("").to_string();
                    let target = r.path.unwrap_or("").to_string();
                    if r.version != Some(1) {
                        return Err(ReadError::Status(505, "only HTTP/1.1 is served"));
                    }
                    let headers: Vec<(String, String)> = r
                        .headers
                        .iter()
                        .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned()))
                        .collect();
                    break (n, method, target, headers);
                }
                Ok(httparse::Status::Partial) => {}
                Err(httparse::Error::TooManyHeaders) => return Err(ReadError::Status(431, "too many headers")),
                Err(_) => return Err(ReadError::Status(400, "malformed request")),
            }
        }
        if buf.len() > limits.max_head_bytes {
            return Err(ReadError::Status(431, "request head too large"));
        }
        let n = read_some(stream, &mut chunk, deadline, buf.is_empty())?;
        buf.extend_from_slice(&chunk[..n]);
    };
    if head_len > limits.max_head_bytes {
        return Err(ReadError::Status(431, "request head too large"));
    }
    if target.len() > limits.max_target_bytes {
        return Err(ReadError::Status(414, "request target too long"));
    }
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    if header("transfer-encoding").is_some() {
        return Err(ReadError::Status(501, "chunked request bodies are not accepted: send Content-Length"));
    }
    let body_len = match header("content-length") {
        None => 0,
        Some(v) => v.trim().parse::<usize>().map_err(|_| ReadError::Status(400, "bad Content-Length"))?,
    };
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
    let query = form_urlencoded::parse(raw_query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    Ok(Request { method, path, query, headers, body, peer })
}

/// One read before `deadline`. Between requests (`idle`), a closed or silent connection is
/// simply closed; inside a request it is a 408.
fn read_some(stream: &mut TcpStream, chunk: &mut [u8], deadline: Instant, idle: bool) -> Result<usize, ReadError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(if idle { ReadError::Closed } else { ReadError::Status(408, "request timed out") });
    }
    let _ = stream.set_read_timeout(Some(left));
    match stream.read(chunk) {
        Ok(0) => Err(ReadError::Closed),
        Ok(n) => Ok(n),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            Err(if idle { ReadError::Closed } else { ReadError::Status(408, "request timed out") })
        }
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
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{SECURITY_HEADERS}",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    for (k, v) in &r.headers {
        // Header values never carry line breaks (they would split the response).
        head.push_str(&format!("{k}: {}\r\n", v.replace(['\r', '\n'], " ")));
    }
    head.push_str(if keep_alive {
        "Connection: keep-alive\r\nKeep-Alive: timeout=10\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
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

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("/a%20b").as_deref(), Some("/a b"));
        assert_eq!(percent_decode("/a%2").as_deref(), Some("/a%2"));
        assert_eq!(percent_decode("/%zz%41").as_deref(), Some("/%zzA"));
        assert_eq!(percent_decode("/%ff"), None);
    }
}

//! Raw HTTP/1.1 exchanges with the servers under test (the dashboard, the agent's /metrics).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Status, head and body of an answer (status 0: no connection or no answer).
pub type Reply = (u16, String, String);

/// One request on a new connection, its answer read to the end or until `timeout` passes.
pub fn exchange(addr: &str, request: &[u8], timeout: Duration) -> Reply {
    let Ok(mut s) = TcpStream::connect(addr) else { return (0, String::new(), String::new()) };
    s.set_read_timeout(Some(timeout)).unwrap();
    s.set_write_timeout(Some(timeout)).unwrap();
    // The server may answer (431, 413) and close before taking all of a request too large.
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// GET `path` with `extra` header lines (each ending in `\r\n`), on a new connection.
pub fn get(addr: &str, path: &str, extra: &str, timeout: Duration) -> Reply {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n");
    exchange(addr, req.as_bytes(), timeout)
}

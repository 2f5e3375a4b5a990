//! A crowd of clients whose requests do long work (a slow query, a wait for another thread)
//! cannot hold every connection inside a handler: long work waits for one of a bounded, fairly
//! shared number of places, waiting where the connection cap can close it, so quick requests
//! keep being answered.

use latscope_http::{HttpServer, Limits, Request, Response};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One request on a new connection; its status (0: no answer).
fn status(addr: &str, path: &str) -> u16 {
    let Ok(mut s) = TcpStream::connect(addr) else { return 0 };
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut out = Vec::new();
    let _ = s.write_all(req.as_bytes()).and_then(|_| s.read_to_end(&mut out).map(|_| ()));
    String::from_utf8_lossy(&out).split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

#[test]
fn seventy_busy_clients_do_not_make_quick_pages_fail() {
    let busy_now = Arc::new(AtomicUsize::new(0));
    let most_busy = Arc::new(AtomicUsize::new(0));
    let (b, m) = (busy_now.clone(), most_busy.clone());
    let limits = Limits { busy_wait: Duration::from_secs(2), ..Limits::default() };
    let server = HttpServer::bind("127.0.0.1:0".parse().unwrap(), limits).unwrap();
    let run = server
        .spawn(Arc::new(move |req: &Request| match req.path.as_str() {
            "/slow" => {
                let Some(_place) = req.busy() else { return Response::text(503, "busy\n") };
                let n = b.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(n, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(1500));
                b.fetch_sub(1, Ordering::SeqCst);
                Response::text(200, "done\n")
            }
            _ => Response::text(200, "ok\n"),
        }))
        .unwrap();
    let addr = run.local_addr().to_string();
    let end = Instant::now() + Duration::from_secs(6);
    let crowd: Vec<_> = (0..70)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                while Instant::now() < end {
                    status(&addr, "/slow");
                }
            })
        })
        .collect();
    // The crowd fills the server first.
    std::thread::sleep(Duration::from_millis(1500));
    let mut statuses = Vec::new();
    for _ in 0..60 {
        statuses.push(status(&addr, "/health"));
        std::thread::sleep(Duration::from_millis(50));
    }
    for c in crowd {
        c.join().unwrap();
    }
    assert!(statuses.iter().all(|&s| s == 200), "quick requests failed among busy ones: {statuses:?}");
    // Every client here is the same user: its share is 4 places at once.
    let most = most_busy.load(Ordering::SeqCst);
    assert!((1..=4).contains(&most), "{most} busy requests at once");
    run.stop();
}

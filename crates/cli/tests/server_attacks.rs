//! The dashboard (`latscope serve`) and the agent's `/metrics` under attack from loopback clients:
//! slowloris crowds, a 256 MiB header line, clients that pipeline and never read, framing tricks,
//! token guessing, a cross-site page in headless Chromium that tries to start live sessions, and
//! open redirects through the login form. Every loop is bounded in count and time.

mod common;
#[path = "../../export/tests/support/mod.rs"]
mod support;
mod viewsupport;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A server under test: a child process, its address and the path a normal client asks for.
struct Target {
    child: Child,
    addr: String,
    path: &'static str,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `latscope serve` on a free port of `listen` (an address without port), with `args`.
fn dashboard(listen: &str, args: &[&str], env: &[(&str, &str)]) -> Target {
    let mut c = Command::new(common::bin());
    c.arg("serve").args(["--listen", &format!("{listen}:0"), "--live-idle", "3s"]).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("latscope serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().trim_start_matches("http://").trim_end_matches('/').to_string();
    assert!(addr.starts_with(listen), "serve printed {line:?}");
    Target { child, addr, path: "/api/health", _dir: None }
}

/// `latscope agent` with one series, serving /metrics (None, said why, without BPF).
fn agent(test: &str) -> Option<Target> {
    if !common::require_bpf(test) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let cfg = dir.path().join("agent.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:{port}\"\ninterval = \"1s\"\nhost = \"attacked\"\n\n[[series]]\nname = \"calls\"\n\
             filter = \"proc.name = lsatk_none\"\nby = \"syscall\"\n"
        ),
    )
    .unwrap();
    let child = Command::new(common::bin())
        .args(["agent", "--config"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Target { child, addr: format!("127.0.0.1:{port}"), path: "/metrics", _dir: Some(dir) };
    let up = support::wait_for(Duration::from_secs(60), || (get(&t.addr, "/metrics", "").0 == 200).then_some(()));
    assert!(up.is_some(), "the agent did not serve /metrics");
    Some(t)
}

use common::http::exchange;
use common::require_tool;

fn get(addr: &str, path: &str, extra: &str) -> (u16, String, String) {
    common::http::get(addr, path, extra, Duration::from_secs(8))
}

fn post(addr: &str, path: &str, extra: &str, body: &str) -> (u16, String, String) {
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\n{extra}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    exchange(addr, req.as_bytes(), Duration::from_secs(30))
}

/// A /proc/PID/status field in KiB (VmRSS, VmHWM).
fn status_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// 64 connections each sending one complete request every 2 s (reading a little of each answer)
/// and 16 sending a request head one byte every 300 ms, for 8 s, while a normal client asks on a
/// new connection every 100 ms: every one of its requests is answered 200.
fn slowloris(t: &Target) {
    let end = Instant::now() + Duration::from_secs(8);
    let (addr, path) = (t.addr.clone(), t.path);
    let mut crowd = Vec::new();
    for _ in 0..64 {
        let addr = addr.clone();
        crowd.push(std::thread::spawn(move || {
            let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
            for _ in 0..100 {
                if Instant::now() > end {
                    break;
                }
                let Ok(mut s) = TcpStream::connect(&addr) else {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                };
                s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
                let mut buf = [0u8; 1024];
                for _ in 0..10 {
                    if Instant::now() > end
                        || s.write_all(req.as_bytes()).is_err()
                        || !matches!(s.read(&mut buf), Ok(n) if n > 0)
                    {
                        break;
                    }
                    std::thread::sleep(Duration::from_secs(2));
                }
            }
        }));
    }
    for _ in 0..16 {
        let addr = addr.clone();
        crowd.push(std::thread::spawn(move || {
            let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nX-Slow: {}\r\n\r\n", "z".repeat(100));
            for _ in 0..100 {
                if Instant::now() > end {
                    break;
                }
                let Ok(mut s) = TcpStream::connect(&addr) else {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                };
                for b in head.bytes() {
                    if Instant::now() > end || s.write_all(&[b]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
        }));
    }
    // The crowd connects first.
    std::thread::sleep(Duration::from_millis(1500));
    let mut statuses = Vec::new();
    while Instant::now() < end && statuses.len() < 200 {
        statuses.push(get(&addr, path, "").0);
        std::thread::sleep(Duration::from_millis(100));
    }
    for c in crowd {
        c.join().unwrap();
    }
    assert!(statuses.len() >= 5, "{statuses:?}");
    assert!(statuses.iter().all(|&s| s == 200), "a normal client was not served during the slowloris: {statuses:?}");
}

#[test]
fn a_slowloris_of_64_connections_does_not_shut_out_a_normal_client_of_the_dashboard() {
    let t = dashboard("127.0.0.1", &["--no-live"], &[]);
    slowloris(&t);
}

#[test]
fn a_slowloris_of_64_connections_does_not_shut_out_a_scraper_of_the_agent() {
    let Some(t) = agent("a_slowloris_of_64_connections_does_not_shut_out_a_scraper_of_the_agent") else { return };
    slowloris(&t);
}

/// Two connections send a 256 MiB header line: each is refused (431, or the connection closed)
/// after a small part of it, and the server's peak memory does not grow by more than 32 MiB.
fn huge_header_line(t: &Target) {
    let pid = t.child.id();
    let before = status_kib(pid, "VmHWM");
    let senders: Vec<_> = (0..2)
        .map(|_| {
            let addr = t.addr.clone();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut sent = 0usize;
                if s.write_all(format!("GET / HTTP/1.1\r\nHost: {addr}\r\nX-Big: ").as_bytes()).is_ok() {
                    let chunk = vec![b'a'; 64 << 10];
                    while sent < 256 << 20 {
                        match s.write(&chunk) {
                            Ok(n) if n > 0 => sent += n,
                            _ => break,
                        }
                    }
                }
                let mut answer = Vec::new();
                let _ = s.read_to_end(&mut answer);
                (sent, String::from_utf8_lossy(&answer).into_owned())
            })
        })
        .collect();
    for h in senders {
        let (sent, answer) = h.join().unwrap();
        assert!(sent < 64 << 20, "the server took {sent} bytes of one header line");
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 431"), "{answer}");
    }
    let after = status_kib(pid, "VmHWM");
    assert!(after < before + 32 * 1024, "peak RSS grew from {before} KiB to {after} KiB");
    assert_eq!(get(&t.addr, t.path, "").0, 200);
}

#[test]
fn a_256_mib_header_line_is_refused_early_by_the_dashboard_without_memory_growth() {
    huge_header_line(&dashboard("127.0.0.1", &["--no-live"], &[]));
}

#[test]
fn a_256_mib_header_line_is_refused_early_by_the_agent_without_memory_growth() {
    let Some(t) = agent("a_256_mib_header_line_is_refused_early_by_the_agent_without_memory_growth") else { return };
    huge_header_line(&t);
}

/// A loopback connection with a 4 KiB receive buffer (set before connecting, so the window stays
/// small): answers pile up at the server at once.
fn small_window(addr: &str) -> TcpStream {
    let sa: std::net::SocketAddrV4 = addr.parse().unwrap();
    // SAFETY: plain socket calls on a descriptor we own; the sockaddr is fully initialised.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let size: libc::c_int = 4096;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &size as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as u32,
        );
        let mut a: libc::sockaddr_in = std::mem::zeroed();
        a.sin_family = libc::AF_INET as u16;
        a.sin_port = sa.port().to_be();
        a.sin_addr.s_addr = u32::from(*sa.ip()).to_be();
        let r =
            libc::connect(fd, &a as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_in>() as u32);
        assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    }
}

/// Eight clients each pipeline 20 requests for a large answer and never read; meanwhile ten
/// normal requests are each answered within 8 s (well before the 20 s a client has to take an
/// answer: nobody waits for the non-readers).
fn pipelining_non_readers(t: &Target, big: &str) {
    let hogs: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = small_window(&t.addr);
            let one = format!("GET {big} HTTP/1.1\r\nHost: {}\r\nAccept: text/plain\r\n\r\n", t.addr);
            s.write_all(one.repeat(20).as_bytes()).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    for i in 0..10 {
        let (st, _, body) = get(&t.addr, t.path, "");
        assert_eq!(st, 200, "request {i} while clients do not read: {body}");
    }
    assert!(hogs.iter().all(|h| h.as_raw_fd() >= 0));
}

#[test]
fn clients_that_pipeline_and_never_read_do_not_block_the_dashboard() {
    let t = dashboard("127.0.0.1", &["--no-live"], &[]);
    pipelining_non_readers(&t, "/assets/live.js");
}

#[test]
fn clients_that_pipeline_and_never_read_do_not_block_the_agent() {
    let Some(t) = agent("clients_that_pipeline_and_never_read_do_not_block_the_agent") else { return };
    pipelining_non_readers(&t, "/metrics");
}

/// Requests whose framing two parties could read differently are refused with 400.
fn framing(t: &Target) {
    let a = &t.addr;
    let p = t.path;
    for (what, req) in [
        (
            "two different Content-Length",
            format!("GET {p} HTTP/1.1\r\nHost: {a}\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
        ),
        ("Content-Length: +5", format!("GET {p} HTTP/1.1\r\nHost: {a}\r\nContent-Length: +5\r\n\r\nhello")),
        ("Content-Length: -1", format!("GET {p} HTTP/1.1\r\nHost: {a}\r\nContent-Length: -1\r\n\r\n")),
        ("Content-Length: 5, 5", format!("GET {p} HTTP/1.1\r\nHost: {a}\r\nContent-Length: 5, 5\r\n\r\nhello")),
        ("two Host headers", format!("GET {p} HTTP/1.1\r\nHost: {a}\r\nHost: evil.example\r\n\r\n")),
        ("no Host in HTTP/1.1", format!("GET {p} HTTP/1.1\r\n\r\n")),
        (
            "Transfer-Encoding with Content-Length",
            format!(
                "GET {p} HTTP/1.1\r\nHost: {a}\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"
            ),
        ),
        ("a space before the colon", format!("GET {p} HTTP/1.1\r\nHost: {a}\r\nContent-Length : 5\r\n\r\nhello")),
    ] {
        let (st, head, _) = exchange(a, req.as_bytes(), Duration::from_secs(8));
        assert_eq!(st, 400, "{what}: {head}");
        assert!(head.contains("Connection: close"), "{what}: {head}");
    }
    assert_eq!(get(a, p, "").0, 200);
}

#[test]
fn duplicate_or_malformed_framing_headers_are_refused_by_the_dashboard() {
    framing(&dashboard("127.0.0.1", &["--no-live"], &[]));
}

#[test]
fn duplicate_or_malformed_framing_headers_are_refused_by_the_agent() {
    let Some(t) = agent("duplicate_or_malformed_framing_headers_are_refused_by_the_agent") else { return };
    framing(&t);
}

#[test]
fn the_login_form_redirects_only_to_a_path_of_this_site() {
    let token = "tok-0123456789abcdef";
    let t = dashboard("127.0.0.1", &["--no-live"], &[("LATSCOPE_TOKEN", token)]);
    let a = &t.addr;
    for (next, want) in [
        ("%2Flive%3Ffilter%3Dx", "/live?filter=x"),
        ("%2F%09%2Fevil.example", "/"),
        ("%09%2F%2Fevil.example", "/"),
        ("%2F%2Fevil.example", "/"),
        ("%2F%5Cevil.example", "/"),
        ("%2F%5C%2Fevil.example", "/"),
        ("https%3A%2F%2Fevil.example", "/"),
        ("%2F%0D%0ASet-Cookie%3A%20x%3D1", "/"),
        ("%2F%20%2Fevil.example", "/"),
        ("%2F%0A%2Fevil.example", "/"),
        ("javascript%3Aalert(1)", "/"),
    ] {
        let (st, head, _) = post(a, "/login", "", &format!("token={token}&next={next}"));
        assert_eq!(st, 303, "{next}: {head}");
        let loc = head.lines().find_map(|l| l.strip_prefix("Location: ")).unwrap_or_default();
        assert_eq!(loc, want, "next={next}: {head}");
    }
}

#[test]
fn wrong_bearer_tokens_are_answered_at_a_limited_rate() {
    let token = "tok-0123456789abcdef";
    let t = dashboard("127.0.0.1", &["--no-live"], &[("LATSCOPE_TOKEN", token)]);
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs(4);
    let (wrong, throttled) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let guessers: Vec<_> = (0..8)
        .map(|g| {
            let (addr, wrong, throttled) = (t.addr.clone(), wrong.clone(), throttled.clone());
            std::thread::spawn(move || {
                for i in 0..5000 {
                    if Instant::now() > end {
                        break;
                    }
                    let mut s = TcpStream::connect(&addr).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
                    let req = format!(
                        "GET /api/overview HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer guess-{g}-{i:012}\r\nConnection: close\r\n\r\n"
                    );
                    let mut out = String::new();
                    let _ = s.write_all(req.as_bytes()).and_then(|_| s.read_to_string(&mut out));
                    match out.split(' ').nth(1) {
                        Some("401") => wrong.fetch_add(1, Ordering::Relaxed),
                        Some("429") => throttled.fetch_add(1, Ordering::Relaxed),
                        _ => 0,
                    };
                }
            })
        })
        .collect();
    for g in guessers {
        g.join().unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    let answered = wrong.load(Ordering::Relaxed);
    // A burst of 10, then 5 a second: the only bound is from above (a slow machine guesses less).
    let most = 10.0 + 5.0 * secs + 1.0;
    assert!((answered as f64) <= most, "{answered} wrong tokens answered in {secs:.1} s (at most {most:.0})");
    assert!(answered >= 10, "{answered} wrong tokens answered");
    // The guesser itself gets in with the right token once its bucket refills (Retry-After).
    let mut st = (0, String::new(), String::new());
    for _ in 0..3 {
        st = get(&t.addr, "/api/health", &format!("Authorization: Bearer {token}\r\n"));
        if st.0 != 429 {
            break;
        }
        let after = st.1.lines().find_map(|l| l.strip_prefix("Retry-After: ")).and_then(|v| v.trim().parse().ok());
        std::thread::sleep(Duration::from_secs(after.unwrap_or(1)));
    }
    assert_eq!(st.0, 200, "{}", st.2);
}

/// Runs curl as uid/gid 65534 (another local user) with `args`; its child process.
fn curl_as_nobody(args: &[&str]) -> Child {
    use std::os::unix::process::CommandExt;
    Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}\\n"])
        .args(args)
        .uid(65534)
        .gid(65534)
        .current_dir("/")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("curl runs as nobody")
}

/// The status codes curl printed, counted.
fn codes(out: &std::process::Output) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        *m.entry(l.trim().to_string()).or_insert(0) += 1;
    }
    m
}

/// Another local user (uid 65534) keeps 55 connections sending wrong tokens for 5 s: its
/// guesses are answered at its own limited rate, and root's right token is answered 200 every
/// time meanwhile (token checks are paced per client, the client on loopback being the user
/// owning the socket).
#[test]
fn a_flood_of_wrong_tokens_from_another_user_does_not_lock_the_right_token_out() {
    let test = "a_flood_of_wrong_tokens_from_another_user_does_not_lock_the_right_token_out";
    if !require_tool(test, "curl") || !is_root(test) {
        return;
    }
    let token = "tok-0123456789abcdef";
    let t = dashboard("127.0.0.1", &["--no-live"], &[("LATSCOPE_TOKEN", token)]);
    let url = format!("http://{}/api/health?n=[1-100000]", t.addr);
    let t0 = Instant::now();
    let flood = curl_as_nobody(&[
        "--parallel",
        "--parallel-immediate",
        "--parallel-max",
        "55",
        "-H",
        "Authorization: Bearer wrong-guess-0123456789",
        &url,
    ]);
    std::thread::sleep(Duration::from_secs(1));
    let mut statuses = Vec::new();
    for _ in 0..25 {
        statuses.push(get(&t.addr, "/api/health", &format!("Authorization: Bearer {token}\r\n")).0);
        std::thread::sleep(Duration::from_millis(150));
    }
    // SAFETY: signalling the curl we started, by its pid.
    unsafe { libc::kill(flood.id() as i32, libc::SIGTERM) };
    let out = flood.wait_with_output().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let c = codes(&out);
    assert!(statuses.iter().all(|&s| s == 200), "the right token was refused during the flood: {statuses:?}");
    let wrong = c.get("401").copied().unwrap_or(0) as f64;
    assert!(wrong <= 10.0 + 5.0 * secs + 1.0, "{wrong} wrong tokens compared in {secs:.1} s: {c:?}");
    assert!(c.get("429").copied().unwrap_or(0) > 100, "the guesser was not paced: {c:?}");
}

/// With no token (the default on loopback), another local user reads nothing: uid 65534 is
/// answered 403 on pages and API, saying how to be let in, while root is served.
#[test]
fn without_a_token_another_local_user_is_refused_and_root_is_served() {
    let test = "without_a_token_another_local_user_is_refused_and_root_is_served";
    if !require_tool(test, "curl") || !is_root(test) {
        return;
    }
    let t = dashboard("127.0.0.1", &["--no-live"], &[]);
    for path in ["/", "/api/health", "/api/overview", "/live"] {
        assert_eq!(get(&t.addr, path, "").0, 200, "root, {path}");
        let out = curl_as_nobody(&[&format!("http://{}{path}", t.addr)]).wait_with_output().unwrap();
        assert_eq!(codes(&out).keys().collect::<Vec<_>>(), ["403"], "uid 65534, {path}");
    }
    use std::os::unix::process::CommandExt;
    let body =
        Command::new("curl").args(["-s", &format!("http://{}/api/health", t.addr)]).uid(65534).gid(65534).output();
    let text = String::from_utf8_lossy(&body.unwrap().stdout).into_owned();
    assert!(text.contains("uid 65534") && text.contains("token"), "{text}");
}

fn is_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "{test}: CI runs as root");
    eprintln!("SKIPPED {test}: acting as another user needs root");
    false
}

/// 70 clients keep asking for drill-down tables of a live session streaming every syscall
/// (each answer computed by the session's one thread, so most wait): `/` and `/api/health` are
/// answered 200 on every one of 60 tries meanwhile.
#[test]
fn seventy_busy_live_clients_do_not_make_the_overview_or_health_fail() {
    let test = "seventy_busy_live_clients_do_not_make_the_overview_or_health_fail";
    if !common::require_bpf(test) {
        return;
    }
    let t = dashboard("127.0.0.1", &[], &[]);
    let end = Instant::now() + Duration::from_secs(7);
    let served = Arc::new(AtomicUsize::new(0));
    let crowd: Vec<_> = (0..70)
        .map(|_| {
            let (addr, served) = (t.addr.clone(), served.clone());
            std::thread::spawn(move || {
                while Instant::now() < end {
                    let (st, _, _) = post(&addr, "/api/live/tables", "", "stream=1&rows=3600&limit=200");
                    if st == 200 {
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let mut statuses = Vec::new();
    for i in 0..60 {
        statuses.push(get(&t.addr, if i % 2 == 0 { "/" } else { "/api/health" }, "").0);
        std::thread::sleep(Duration::from_millis(50));
    }
    for c in crowd {
        c.join().unwrap();
    }
    assert!(statuses.iter().all(|&s| s == 200), "quick pages failed among busy clients: {statuses:?}");
    assert!(served.load(Ordering::Relaxed) > 0, "the busy clients were served too");
}

#[test]
fn serve_on_another_loopback_address_answers_its_own_printed_url() {
    let t = dashboard("127.0.0.2", &["--no-live"], &[]);
    let (st, _, body) = get(&t.addr, "/api/health", "");
    assert_eq!(st, 200, "{body}");
    let (st, _, _) = get(&t.addr, "/", "");
    assert_eq!(st, 200);
    // Still not another site's name for it.
    let req = format!(
        "GET /api/health HTTP/1.1\r\nHost: evil.example:{}\r\nConnection: close\r\n\r\n",
        t.addr.rsplit(':').next().unwrap()
    );
    assert_eq!(exchange(&t.addr, req.as_bytes(), Duration::from_secs(8)).0, 403);
}

/// A page of another site (served on `localhost`, a different site from `127.0.0.1`) that
/// points an iframe, an image, a GET form, a POST form and a no-cors fetch at `/api/live`.
fn attack_page(target: &str) -> String {
    let live = format!("http://{target}/api/live?filter=evt.type%3Dread&stream=1");
    format!(
        "<!doctype html><html><body>\
         <iframe src=\"{live}\"></iframe>\
         <img src=\"{live}&img=1\">\
         <iframe name=\"sink\"></iframe><iframe name=\"sink2\"></iframe>\
         <form id=\"g\" method=\"GET\" action=\"http://{target}/api/live\" target=\"sink\">\
           <input name=\"filter\" value=\"evt.type=write\"><input name=\"stream\" value=\"1\"></form>\
         <form id=\"p\" method=\"POST\" action=\"http://{target}/api/live\" target=\"sink2\">\
           <input name=\"filter\" value=\"evt.type=openat\"><input name=\"stream\" value=\"1\"></form>\
         <script>\
           document.getElementById('g').submit(); document.getElementById('p').submit();\
           fetch('http://{target}/api/live', {{method: 'POST', mode: 'no-cors', body: new URLSearchParams({{filter: 'evt.type=close'}})}}).catch(() => 0);\
           fetch('http://{target}/api/live/tables', {{method: 'POST', mode: 'no-cors', body: 'filter=evt.type%3Dfstat'}}).catch(() => 0);\
           setTimeout(() => {{ document.body.dataset.done = '1'; }}, 3000);\
         </script></body></html>"
    )
}

/// Serves `page` to every request on `listener` until `stop` (each request answered at once).
fn serve_page(listener: TcpListener, page: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        for _ in 0..600 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            match listener.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    let mut buf = [0u8; 8192];
                    let _ = s.read(&mut buf);
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                        page.len()
                    );
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    })
}

#[test]
fn a_cross_site_page_starts_no_live_session() {
    let test = "a_cross_site_page_starts_no_live_session";
    if !common::require_bpf(test) {
        return;
    }
    let Some(chrome) = viewsupport::chromium(test) else { return };
    let t = dashboard("127.0.0.1", &[], &[]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let page = serve_page(listener, attack_page(&t.addr), stop.clone());
    let mut b = viewsupport::cdp::Browser::launch(&chrome, 1000, 800);
    b.goto(&format!("http://localhost:{port}/"));
    b.wait_for("document.body && document.body.dataset.done", 30);
    // Give any request the page made the time to start a session.
    std::thread::sleep(Duration::from_secs(2));
    let (_, _, body) = get(&t.addr, "/api/health", "");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["live_sessions"], 0, "a page of another site started live sessions: {v}");
    drop(b);
    stop.store(true, Ordering::Relaxed);
    page.join().unwrap();
    // The dashboard's own live page still starts one (a same-origin POST).
    let (st, _, body) = post(
        &t.addr,
        "/api/live",
        &format!("Origin: http://{}\r\nSec-Fetch-Site: same-origin\r\n", t.addr),
        "filter=evt.type%3Dread",
    );
    assert_eq!(st, 200, "{body}");
    let (_, _, body) = get(&t.addr, "/api/health", "");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["live_sessions"], 1, "{v}");
    // And a GET never does.
    assert_eq!(get(&t.addr, "/api/live?filter=evt.type%3Dwrite", "").0, 405);
}

//! Who may use the dashboard: the access token (compared in constant time, taken from an
//! `Authorization: Bearer` header or a cookie set by the login form, at a limited rate), on
//! loopback the `Host` header (a page of another site that rebinds its name to 127.0.0.1 must not
//! read the API), and for requests that change something, their origin.

use crate::http::Request;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The cookie holding the token after a login.
pub const COOKIE: &str = "latscope_token";

/// Shortest token accepted.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Token comparisons per second once the burst is spent (right or wrong, from every client
/// together).
pub const GUESSES_PER_SEC: u32 = 5;
/// Wrong tokens answered at once before comparisons are spaced out.
pub const GUESS_BURST: u32 = 10;
/// The longest a request waits for its turn to be compared; beyond, it is answered 429 at once.
pub const MAX_GUESS_WAIT: Duration = Duration::from_secs(10);

/// Paces token comparisons: each reserves a turn, one every 1/[`GUESSES_PER_SEC`] s beyond a
/// burst of [`GUESS_BURST`]; a right token gives its turn back. A right token is paced like a
/// wrong one while guesses are being made (otherwise a fast answer would give the guess away),
/// and nothing is compared without a turn: at most `GUESS_BURST + GUESSES_PER_SEC x seconds`
/// guesses are ever answered, however many connections ask.
#[derive(Debug)]
pub struct Pacer {
    /// When the reserved turns end.
    busy_until: Mutex<Instant>,
    interval: Duration,
    burst: u32,
    max_wait: Duration,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new(GUESSES_PER_SEC, GUESS_BURST, MAX_GUESS_WAIT)
    }
}

impl Pacer {
    /// `per_sec` comparisons a second after a burst of `burst`, waits of at most `max_wait`.
    pub fn new(per_sec: u32, burst: u32, max_wait: Duration) -> Pacer {
        Pacer {
            busy_until: Mutex::new(Instant::now()),
            interval: Duration::from_secs(1) / per_sec.max(1),
            burst,
            max_wait,
        }
    }

    /// A turn: how long to wait before comparing, or (too many queued) how long to come back
    /// after, with no turn taken.
    pub fn reserve(&self) -> Result<Duration, Duration> {
        let now = Instant::now();
        let mut until = self.busy_until.lock().unwrap_or_else(|e| e.into_inner());
        let end = (*until).max(now) + self.interval;
        let wait = end.saturating_duration_since(now + self.interval * self.burst);
        if wait > self.max_wait {
            return Err(wait - self.max_wait + Duration::from_secs(1));
        }
        *until = end;
        Ok(wait)
    }

    /// Gives a turn back (the token was right).
    pub fn refund(&self) {
        let mut until = self.busy_until.lock().unwrap_or_else(|e| e.into_inner());
        *until = until.checked_sub(self.interval).unwrap_or(*until);
    }
}

/// Access policy of a server.
pub struct Access {
    token: Option<String>,
    /// The address a loopback server listens on (then only loopback host names are answered).
    loopback: Option<IpAddr>,
    pacer: Pacer,
}

impl std::fmt::Debug for Access {
    /// Never shows the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("loopback", &self.loopback)
            .finish()
    }
}

/// The verdict on a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Go on.
    Allowed,
    /// No valid token: log in first.
    NeedsToken,
    /// The Host header names another site (DNS rebinding): refuse.
    WrongHost,
    /// Too many token guesses: come back after this long (nothing was compared).
    Throttled(Duration),
}

impl Access {
    /// A policy: `token` if one is required, `loopback` the address when the server listens on
    /// a loopback address (then only loopback host names are answered).
    pub fn new(token: Option<String>, loopback: Option<IpAddr>) -> Access {
        Access { token, loopback, pacer: Pacer::default() }
    }

    /// Whether a token is required.
    pub fn requires_token(&self) -> bool {
        self.token.is_some()
    }

    /// Checks a request's Host header (on loopback: `localhost` or a loopback address, the one
    /// listened on included, with any port, so that an `ssh -L` tunnel's port works too).
    pub fn host_ok(&self, req: &Request) -> bool {
        match self.loopback {
            None => true,
            Some(listen) => req.header("host").is_some_and(|h| loopback_host(h, listen)),
        }
    }

    /// Checks a request's Host header and token (paced, see [`Pacer`]).
    pub fn check(&self, req: &Request) -> Verdict {
        if !self.host_ok(req) {
            return Verdict::WrongHost;
        }
        if self.token.is_none() {
            return Verdict::Allowed;
        }
        let bearer = req.header("authorization").and_then(|v| v.strip_prefix("Bearer ")).map(str::trim);
        let cookie = req.header("cookie").and_then(|c| cookie_value(c, COOKIE));
        let given: Vec<&str> = [bearer, cookie].into_iter().flatten().collect();
        self.verify(req, &given)
    }

    /// Compares the tokens `given` with the request (paced, see [`Pacer`]); none given: no turn
    /// is taken.
    pub fn verify(&self, req: &Request, given: &[&str]) -> Verdict {
        let Some(token) = &self.token else { return Verdict::Allowed };
        if given.is_empty() {
            return Verdict::NeedsToken;
        }
        match self.pacer.reserve() {
            Err(after) => return Verdict::Throttled(after),
            // Closed while waiting: nothing will be sent anyway.
            Ok(wait) if !wait.is_zero() && !req.wait(wait) => return Verdict::Throttled(wait),
            Ok(_) => {}
        }
        if given.iter().any(|g| bool::from(g.as_bytes().ct_eq(token.as_bytes()))) {
            self.pacer.refund();
            Verdict::Allowed
        } else {
            Verdict::NeedsToken
        }
    }
}

/// Whether a Host header names this machine's loopback: `localhost` or a loopback address
/// literal (or `listen`), with or without a port. A page of another site reaching this address
/// through DNS rebinding sends its own name, never one of these.
pub fn loopback_host(host: &str, listen: IpAddr) -> bool {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, "")) => (ip, None),
            Some((ip, p)) => match p.strip_prefix(':') {
                Some(p) => (ip, Some(p)),
                None => return false,
            },
            None => return false,
        }
    } else {
        match host.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host, None),
        }
    };
    if port.is_some_and(|p| p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback() || ip == listen)
}

/// Whether a request that changes something (a POST) comes from this server's own pages: a
/// browser says where a request comes from (`Sec-Fetch-Site`, `Origin`), and both must name this
/// origin. Tools that send neither (curl, scripts) are not browsers another site can drive.
pub fn same_origin(req: &Request) -> Result<(), &'static str> {
    if let Some(site) = req.header("sec-fetch-site") {
        if site != "same-origin" {
            return Err("requests that start or change something must come from this server's pages (Sec-Fetch-Site)");
        }
    }
    if let Some(origin) = req.header("origin") {
        let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
        let host = req.header("host");
        if !matches!((authority, host), (Some(a), Some(h)) if a.eq_ignore_ascii_case(h)) {
            return Err("requests that start or change something must come from this server's pages (Origin)");
        }
    }
    Ok(())
}

/// Checks a token given on the command line.
pub fn validate_token(token: &str) -> Result<(), String> {
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Err(format!(
            "the token is shorter than {MIN_TOKEN_CHARS} characters: use a random one, e.g. \
             $(head -c 18 /dev/urandom | base64)"
        ));
    }
    if token.chars().any(|c| c.is_control() || c.is_whitespace() || c == ';' || c == ',' || c == '"') {
        return Err("the token may not contain spaces, control characters, ';', ',' or '\"'".into());
    }
    Ok(())
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').filter_map(|kv| kv.trim().split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v)
}

/// A `next` target of the login form that stays on this site: an absolute path (`/live?x=1`) of
/// visible ASCII characters, without a backslash and not starting with `//` (a browser reads
/// `//evil`, `/\\evil` and `/<TAB>/evil` as another site); anything else is `/`.
pub fn local_target(next: &str) -> &str {
    let visible = next.bytes().all(|b| b.is_ascii_graphic() && b != b'\\');
    if visible && next.starts_with('/') && !next.starts_with("//") {
        next
    } else {
        "/"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)]) -> Request {
        Request::new("GET", "/", headers, b"", "127.0.0.1:1".parse().unwrap())
    }

    const LO: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn tokens_from_header_or_cookie_and_hosts() {
        let a = Access::new(Some("0123456789abcdef".into()), Some(LO));
        let host = ("host", "127.0.0.1:8080");
        assert_eq!(a.check(&req(&[host])), Verdict::NeedsToken);
        assert_eq!(a.check(&req(&[host, ("authorization", "Bearer 0123456789abcdef")])), Verdict::Allowed);
        assert_eq!(a.check(&req(&[host, ("authorization", "Bearer 0123456789abcdeF")])), Verdict::NeedsToken);
        assert_eq!(a.check(&req(&[host, ("cookie", "a=b; latscope_token=0123456789abcdef")])), Verdict::Allowed);
        assert_eq!(a.check(&req(&[host, ("cookie", "latscope_token=0123456789abcde")])), Verdict::NeedsToken);
        assert_eq!(a.check(&req(&[("host", "evil.example:8080")])), Verdict::WrongHost);
        assert_eq!(
            a.check(&req(&[("host", "localhost:8080"), ("authorization", "Bearer 0123456789abcdef")])),
            Verdict::Allowed
        );
        let open = Access::new(None, None);
        assert_eq!(open.check(&req(&[("host", "anything")])), Verdict::Allowed);
        assert!(!format!("{a:?}").contains("0123"), "the token is never printed");
        assert!(validate_token("short").is_err());
        assert!(validate_token("0123456789abcdef ").is_err());
        assert!(validate_token("0123456789abcdef").is_ok());
    }

    #[test]
    fn loopback_hosts_include_the_address_listened_on_and_tunnelled_ports() {
        let two: IpAddr = "127.0.0.2".parse().unwrap();
        for ok in ["127.0.0.2:8080", "127.0.0.1:9000", "localhost", "LOCALHOST:1", "[::1]:8080", "[::1]"] {
            assert!(loopback_host(ok, two), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "localhost.evil:1",
            "[::1]x",
            "127.0.0.1:x",
            "10.0.0.1:80",
            "",
        ] {
            assert!(!loopback_host(bad, two), "{bad}");
        }
        let v6: IpAddr = "::1".parse().unwrap();
        assert!(loopback_host("[::1]:1234", v6));
    }

    #[test]
    fn login_next_is_a_path_on_this_site_only() {
        for ok in ["/", "/live?filter=proc.name%3Dx&stream=1", "/series?id=3", "/a/b/"] {
            assert_eq!(local_target(ok), ok);
        }
        for bad in [
            "//evil.example/",
            "https://evil.example/",
            "/\\evil.example",
            "/\t/evil.example",
            "\t//evil.example",
            "/\n/evil",
            "/%09/x\t",
            "/ /evil",
            "javascript:alert(1)",
            "evil.example",
            "/\\/evil",
            "/live\u{7f}",
            "/caf\u{e9}",
            "",
        ] {
            assert_eq!(local_target(bad), "/", "{bad:?}");
        }
    }

    #[test]
    fn same_origin_posts_only() {
        let host = ("host", "127.0.0.1:8080");
        assert!(same_origin(&req(&[host])).is_ok(), "tools send neither header");
        assert!(
            same_origin(&req(&[host, ("origin", "http://127.0.0.1:8080"), ("sec-fetch-site", "same-origin")])).is_ok()
        );
        assert!(same_origin(&req(&[host, ("origin", "http://evil.example")])).is_err());
        assert!(same_origin(&req(&[host, ("origin", "null")])).is_err());
        assert!(same_origin(&req(&[host, ("origin", "http://127.0.0.1:3000")])).is_err());
        assert!(same_origin(&req(&[host, ("sec-fetch-site", "same-site")])).is_err());
        assert!(same_origin(&req(&[host, ("sec-fetch-site", "cross-site")])).is_err());
    }

    #[test]
    fn token_guesses_are_paced_after_a_burst() {
        let p = Pacer::new(5, 3, Duration::from_secs(2));
        for _ in 0..3 {
            assert_eq!(p.reserve(), Ok(Duration::ZERO));
        }
        let w = p.reserve().unwrap();
        assert!(w > Duration::ZERO && w <= Duration::from_millis(200), "{w:?}");
        // Queued up to the longest wait, then refused without a turn.
        let mut refused = false;
        for _ in 0..20 {
            if p.reserve().is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused);
    }
}

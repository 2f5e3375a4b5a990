//! Who may use the dashboard: the access token (compared in constant time, taken from an
//! `Authorization: Bearer` header or a cookie set by the login form, at a limited rate), on
//! loopback the `Host` header (a page of another site that rebinds its name to 127.0.0.1 must not
//! read the API), and for requests that change something, their origin.

use crate::http::{Client, Request};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The cookie holding the token after a login.
pub const COOKIE: &str = "latscope_token";

/// Shortest token accepted.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Token comparisons per second for one client once its burst is spent.
pub const GUESSES_PER_SEC: u32 = 5;
/// Token comparisons one client gets at once before they are spaced out.
pub const GUESS_BURST: u32 = 10;
/// Clients whose pacing is remembered at once (the longest unseen is forgotten beyond).
pub const MAX_PACED_CLIENTS: usize = 4096;

/// Paces token comparisons per client ([`Client`]: on loopback the user owning the client's
/// socket, else its address or IPv6 /64): each client has a bucket of [`GUESS_BURST`]
/// comparisons refilled at [`GUESSES_PER_SEC`]; a request with a token takes one (a right
/// token gives it back), and a client with an empty bucket is answered 429 with nothing
/// compared. So one client guesses at most `GUESS_BURST + GUESSES_PER_SEC x seconds` tokens,
/// however many connections it opens, and its guesses never make another client wait or lock
/// out the right token. A guesser with many addresses gets a bucket per address: tokens have
/// at least [`MIN_TOKEN_CHARS`] characters, far beyond guessing at any such rate.
#[derive(Debug)]
pub struct Pacer {
    buckets: Mutex<HashMap<Client, Bucket>>,
    per_sec: f64,
    burst: f64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new(GUESSES_PER_SEC, GUESS_BURST)
    }
}

impl Pacer {
    /// `per_sec` comparisons a second per client after a burst of `burst`.
    pub fn new(per_sec: u32, burst: u32) -> Pacer {
        Pacer { buckets: Mutex::new(HashMap::new()), per_sec: per_sec.max(1) as f64, burst: burst.max(1) as f64 }
    }

    fn refill(&self, b: &mut Bucket, now: Instant) {
        b.tokens = (b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * self.per_sec).min(self.burst);
        b.at = now;
    }

    /// A comparison for `who`, or (its bucket empty) how long until it has one again.
    pub fn take(&self, who: Client) -> Result<(), Duration> {
        let now = Instant::now();
        let mut m = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if !m.contains_key(&who) && m.len() >= MAX_PACED_CLIENTS {
            // Full buckets say nothing: forgotten first; else the client unseen the longest.
            m.retain(|_, b| b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * self.per_sec < self.burst);
            if m.len() >= MAX_PACED_CLIENTS {
                if let Some(k) = m.iter().min_by_key(|(_, b)| b.at).map(|(k, _)| *k) {
                    m.remove(&k);
                }
            }
        }
        let b = m.entry(who).or_insert(Bucket { tokens: self.burst, at: now });
        self.refill(b, now);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - b.tokens) / self.per_sec))
        }
    }

    /// Gives `who`'s comparison back (the token was right).
    pub fn refund(&self, who: Client) {
        let mut m = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = m.get_mut(&who) {
            b.tokens = (b.tokens + 1.0).min(self.burst);
        }
    }
}

/// Access policy of a server.
pub struct Access {
    token: Option<String>,
    /// The address a loopback server listens on (then only loopback host names are answered).
    loopback: Option<IpAddr>,
    /// Without a token: the user answered (with root), told by the owner of the client's socket.
    owner: Option<u32>,
    pacer: Pacer,
}

impl std::fmt::Debug for Access {
    /// Never shows the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("loopback", &self.loopback)
            .field("owner", &self.owner)
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
    /// No token is set and the client's socket belongs to another user than the one the server
    /// answers (`None`: the kernel did not say whose it is).
    OtherUser(Option<u32>),
}

impl Access {
    /// A policy: `token` if one is required, `loopback` the address when the server listens on
    /// a loopback address (then only loopback host names are answered).
    pub fn new(token: Option<String>, loopback: Option<IpAddr>) -> Access {
        Access { token, loopback, owner: None, pacer: Pacer::default() }
    }

    /// Without a token, answers only clients whose socket belongs to `uid` or root (on
    /// loopback: see `latscope_http::tcp_peer_uid`).
    pub fn only_user(mut self, uid: u32) -> Access {
        self.owner = Some(uid);
        self
    }

    /// The user answered without a token, if only one is.
    pub fn owner(&self) -> Option<u32> {
        self.owner
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
            return match (self.owner, req.peer_uid()) {
                (None, _) => Verdict::Allowed,
                (Some(o), Some(u)) if u == o || u == 0 => Verdict::Allowed,
                (Some(_), u) => Verdict::OtherUser(u),
            };
        }
        let bearer = req.header("authorization").and_then(|v| v.strip_prefix("Bearer ")).map(str::trim);
        let cookie = req.header("cookie").and_then(|c| cookie_value(c, COOKIE));
        let given: Vec<&str> = [bearer, cookie].into_iter().flatten().collect();
        self.verify(req, &given)
    }

    /// Compares the tokens `given` with the request (paced per client, see [`Pacer`]); none
    /// given: nothing is taken.
    pub fn verify(&self, req: &Request, given: &[&str]) -> Verdict {
        let Some(token) = &self.token else { return Verdict::Allowed };
        if given.is_empty() {
            return Verdict::NeedsToken;
        }
        let who = req.client();
        if let Err(after) = self.pacer.take(who) {
            return Verdict::Throttled(after);
        }
        if given.iter().any(|g| bool::from(g.as_bytes().ct_eq(token.as_bytes()))) {
            self.pacer.refund(who);
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
    fn token_guesses_are_paced_per_client_after_a_burst() {
        let p = Pacer::new(5, 3);
        let (guesser, user) = (Client::User(65534), Client::User(0));
        for _ in 0..3 {
            assert_eq!(p.take(guesser), Ok(()));
        }
        let w = p.take(guesser).unwrap_err();
        assert!(w > Duration::ZERO && w <= Duration::from_millis(200), "{w:?}");
        // Another client is not slowed by the guesser, and a right token gives its turn back.
        for _ in 0..10 {
            assert_eq!(p.take(user), Ok(()));
            p.refund(user);
        }
    }

    #[test]
    fn without_a_token_only_the_owner_and_root_are_answered() {
        let a = Access::new(None, Some(LO)).only_user(1000);
        let host = ("host", "127.0.0.1:8080");
        assert_eq!(a.check(&req(&[host]).with_peer_uid(Some(1000))), Verdict::Allowed);
        assert_eq!(a.check(&req(&[host]).with_peer_uid(Some(0))), Verdict::Allowed);
        assert_eq!(a.check(&req(&[host]).with_peer_uid(Some(65534))), Verdict::OtherUser(Some(65534)));
        assert_eq!(a.check(&req(&[host]).with_peer_uid(None)), Verdict::OtherUser(None));
    }
}

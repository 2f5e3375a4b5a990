//! Who may use the dashboard: the access token (compared in constant time, taken from an
//! `Authorization: Bearer` header or a cookie set by the login form) and, on loopback, the `Host`
//! header (a page of another site that rebinds its name to 127.0.0.1 must not read the API).

use crate::http::Request;
use subtle::ConstantTimeEq;

/// The cookie holding the token after a login.
pub const COOKIE: &str = "latscope_token";

/// Shortest token accepted.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Access policy of a server.
#[derive(Clone)]
pub struct Access {
    token: Option<String>,
    /// Host names a loopback server answers to (`127.0.0.1:8080`, `localhost:8080`, `[::1]:8080`);
    /// empty: any.
    hosts: Vec<String>,
}

impl std::fmt::Debug for Access {
    /// Never shows the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("hosts", &self.hosts)
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
}

impl Access {
    /// A policy: `token` if one is required, `loopback_port` when the server listens on a loopback
    /// address (then only loopback host names are answered).
    pub fn new(token: Option<String>, loopback_port: Option<u16>) -> Access {
        let hosts = match loopback_port {
            Some(p) => ["127.0.0.1", "localhost", "[::1]"].iter().map(|h| format!("{h}:{p}")).collect(),
            None => Vec::new(),
        };
        Access { token, hosts }
    }

    /// Whether a token is required.
    pub fn requires_token(&self) -> bool {
        self.token.is_some()
    }

    /// Checks a request's Host header and token.
    pub fn check(&self, req: &Request) -> Verdict {
        if !self.hosts.is_empty() {
            let host = req.header("host").unwrap_or("");
            if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
                return Verdict::WrongHost;
            }
        }
        match &self.token {
            None => Verdict::Allowed,
            Some(t) => {
                let bearer = req.header("authorization").and_then(|v| v.strip_prefix("Bearer ")).map(str::trim);
                let cookie = req.header("cookie").and_then(|c| cookie_value(c, COOKIE));
                if [bearer, cookie].into_iter().flatten().any(|given| self.token_matches_str(given, t)) {
                    Verdict::Allowed
                } else {
                    Verdict::NeedsToken
                }
            }
        }
    }

    /// Whether `given` is the token (constant time in the token's content).
    pub fn token_matches(&self, given: &str) -> bool {
        self.token.as_deref().is_some_and(|t| self.token_matches_str(given, t))
    }

    fn token_matches_str(&self, given: &str, token: &str) -> bool {
        bool::from(given.as_bytes().ct_eq(token.as_bytes()))
    }
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

/// A `next` target of the login form that stays on this site (`/live?x=1`, not `//evil` or
/// `https://evil`).
pub fn local_target(next: &str) -> &str {
    if next.starts_with('/') && !next.starts_with("//") && !next.starts_with("/\\") && !next.contains(['\r', '\n']) {
        next
    } else {
        "/"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)]) -> Request {
        Request {
            method: "GET".into(),
            path: "/".into(),
            query: Vec::new(),
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            body: Vec::new(),
            peer: "127.0.0.1:1".parse().unwrap(),
        }
    }

    #[test]
    fn tokens_from_header_or_cookie_and_hosts() {
        let a = Access::new(Some("0123456789abcdef".into()), Some(8080));
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
        assert_eq!(local_target("/live?f=1"), "/live?f=1");
        assert_eq!(local_target("//evil.example/"), "/");
        assert_eq!(local_target("https://evil.example/"), "/");
    }
}

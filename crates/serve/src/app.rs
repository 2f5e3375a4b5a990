//! Routes: the pages, their assets and the JSON API, behind the access check.

use crate::auth::{local_target, same_origin, Access, Verdict, COOKIE};
use crate::http::{Handler, Request, Response};
use crate::live::{
    Ask, CellQuery, LiveError, LiveHub, TableQuery, ThreadsQuery, ViewQuery, MAX_TABLE_ROWS, MAX_VIEW_COLS,
    MAX_VIEW_ROWS,
};
use crate::params::{ParamError, Params};
use crate::stored::{self, StoreReader, StoredError};
use serde_json::json;

/// An embedded file: its name, type and content.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:literal) => {
        Asset { name: $name, content_type: $type, body: include_bytes!(concat!("../assets/", $name)) }
    };
}

/// Everything the pages load, compiled into the binary (no network needed).
const ASSETS: &[Asset] = &[
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("common.js", "text/javascript; charset=utf-8"),
    asset!("overview.js", "text/javascript; charset=utf-8"),
    asset!("series.js", "text/javascript; charset=utf-8"),
    asset!("live.js", "text/javascript; charset=utf-8"),
    asset!("dumps.js", "text/javascript; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
];

const OVERVIEW_HTML: &str = include_str!("../assets/overview.html");
const SERIES_HTML: &str = include_str!("../assets/series.html");
const LIVE_HTML: &str = include_str!("../assets/live.html");
const DUMPS_HTML: &str = include_str!("../assets/dumps.html");
const DUMP_HTML: &str = include_str!("../assets/dump.html");
const LOGIN_HTML: &str = include_str!("../assets/login.html");

/// The dashboard's content security policy.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// FNV-1a: the entity tag of an asset (changes with its content).
fn etag(body: &[u8]) -> String {
    let h = body.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("\"{h:016x}\"")
}

/// The dashboard: pages, assets, API.
pub struct App {
    pub(crate) access: Access,
    pub(crate) store: Option<StoreReader>,
    pub(crate) live: Option<LiveHub>,
    pub(crate) dumps: crate::dumps::Dumps,
}

impl Handler for App {
    fn handle(&self, req: &Request) -> Response {
        let mut r = self.route(req);
        // Scripts and styles from this server only; never framed (clickjacking).
        r.headers.push(("Content-Security-Policy", CSP.into()));
        if !r.headers.iter().any(|(k, _)| *k == "Cache-Control") {
            r.headers.push(("Cache-Control", "no-store".into()));
        }
        r
    }
}

impl App {
    fn route(&self, req: &Request) -> Response {
        let path = req.path.as_str();
        let api = path.starts_with("/api/");
        // Other sites' pages may link here, but not call the API or post forms (browsers say
        // where a request comes from; tools such as curl say nothing).
        if let Some(site) = req.header("sec-fetch-site") {
            let navigate = req.header("sec-fetch-mode") == Some("navigate") && req.method == "GET";
            if !matches!(site, "same-origin" | "none") && !navigate {
                return Response::error(403, "cross-site requests are refused");
            }
        }
        // Whatever changes or starts something is a POST, and a browser's POST must come from
        // this server's own pages (another site's form or script cannot start probes here).
        if req.method == "POST" {
            if let Err(why) = same_origin(req) {
                return Response::error(403, why);
            }
        }
        if let Some(name) = path.strip_prefix("/assets/") {
            return asset(req, name);
        }
        if path == "/favicon.ico" {
            return asset(req, "favicon.svg");
        }
        if path == "/login" {
            return self.login(req);
        }
        // Live requests start BPF sessions: POST only, so that no link, frame, image or
        // navigation can start one.
        let live = path == "/api/live" || path.starts_with("/api/live/");
        if live && req.method != "POST" {
            return Response::error(
                405,
                format!(
                    "{} is not accepted here: live requests start probes, POST them (form-encoded parameters)",
                    req.method
                ),
            )
            .with_header("Allow", "POST");
        }
        if !live && !matches!(req.method.as_str(), "GET" | "HEAD") {
            return Response::error(405, format!("{} is not accepted here: use GET", req.method))
                .with_header("Allow", "GET, HEAD");
        }
        match self.access.check(req) {
            Verdict::Allowed => {}
            Verdict::WrongHost => {
                return Response::error(
                    403,
                    "this server answers to localhost and loopback addresses only (a page of another site renamed to this address?)",
                )
            }
            Verdict::Throttled(after) => return throttled(after),
            Verdict::OtherUser(uid) => return other_user(uid, self.access.owner()),
            Verdict::NeedsToken if api => {
                return Response::error(401, "a token is needed: send 'Authorization: Bearer TOKEN' or log in at /login")
            }
            Verdict::NeedsToken => {
                let target = match req.query.is_empty() {
                    true => path.to_string(),
                    false => format!("{path}?{}", encode_query(&req.query)),
                };
                return Response::redirect(&format!("/login?{}", encode_query(&[("next".into(), target)])));
            }
        }
        let mut pairs = req.query.clone();
        if live {
            pairs.extend(form_urlencoded::parse(&req.body).into_owned());
        }
        let p = Params::new(pairs);
        // Store queries, dumps' views (a trace file read) and live requests take long: a bounded,
        // fairly shared number at once, so that a crowd of them cannot hold every connection
        // inside a handler.
        let heavy = live
            || path.starts_with("/api/dump")
            || matches!(path, "/api/overview" | "/api/series" | "/api/series/detail");
        let _permit = match heavy {
            true => match req.busy() {
                Some(p) => Some(p),
                None => {
                    return Response::error(503, "the dashboard is busy with other requests: try again in a moment")
                        .with_header("Retry-After", "2")
                }
            },
            false => None,
        };
        match path {
            "/" => html(OVERVIEW_HTML),
            "/series" => html(SERIES_HTML),
            "/live" => html(LIVE_HTML),
            "/dumps" => html(DUMPS_HTML),
            "/dump" => html(DUMP_HTML),
            "/api/dumps" => dump_response(self.dumps.list().map(|v| Response::json(200, &v))),
            "/api/dump" => dump_response(
                self.dumps.path(&p).and_then(|f| self.dumps.views(&f)).map(|v| Response::json(200, &v.json)),
            ),
            "/api/dump/heatmap.svg" => dump_response(
                self.dumps
                    .path(&p)
                    .and_then(|f| self.dumps.views(&f))
                    .map(|v| Response::new(200, "image/svg+xml", v.heatmap.clone())),
            ),
            "/api/dump/why.svg" => dump_response(
                self.dumps
                    .path(&p)
                    .and_then(|f| self.dumps.views(&f))
                    .map(|v| Response::new(200, "image/svg+xml", v.why.clone())),
            ),
            "/api/dump/flame.svg" => {
                dump_response(self.dumps.path(&p).and_then(|f| self.dumps.views(&f)).map(|v| match &v.flame {
                    Some(svg) => Response::new(200, "image/svg+xml", svg.clone()),
                    None => Response::text(404, "this dump has no on-CPU samples (record --profile HZ takes them)"),
                }))
            }
            "/api/dump/file" => dump_response(self.dumps.path(&p).and_then(|f| download(&f))),
            "/api/health" => Response::json(
                200,
                &json!({"ok": true, "store": self.store.is_some(), "live_sessions": self.live.as_ref().map(|l| l.sessions())}),
            ),
            "/api/overview" => self.stored(|s| stored::overview(s, &p)),
            "/api/series" => self.stored(stored::series_list),
            "/api/series/detail" => self.stored(|s| stored::detail(s, &p)),
            "/api/fields" => fields(),
            "/api/live" => self.live(&p, |p| Ok(Ask::View(view_query(p)?))),
            "/api/live/events" => {
                self.live(&p, |p| Ok(Ask::Events(cell_query(p)?.ok_or(ParamError::Missing("r0, c0".into()))?)))
            }
            "/api/live/tables" => self.live(&p, |p| {
                Ok(Ask::Tables(TableQuery {
                    rows: p.int("rows", 1, MAX_VIEW_ROWS)?.unwrap_or(60) as u64,
                    cell: cell_query(p)?,
                    limit: p.int("limit", 1, MAX_TABLE_ROWS)?.unwrap_or(15) as usize,
                    filter: p.str("filter", crate::live::MAX_FILTER_CHARS)?.unwrap_or_default().trim().to_string(),
                    block: p.flag("block")?,
                    waits: p.flag("waits")?,
                }))
            }),
            "/api/live/threads" => self.live(&p, |p| {
                Ok(Ask::Threads(ThreadsQuery {
                    seconds: p.int("seconds", 1, 600)?.unwrap_or(5) as u64,
                    rows: p.int("rows", 1, 200)?.unwrap_or(30) as usize,
                }))
            }),
            _ if api => Response::error(404, format!("no API endpoint {path} (see docs/DASHBOARD.md)")),
            _ => Response::text(404, format!("no page {path}: the pages are /, /series, /live and /dumps")),
        }
    }

    fn stored(&self, f: impl FnOnce(&StoreReader) -> Result<serde_json::Value, StoredError>) -> Response {
        let Some(s) = &self.store else {
            return Response::json(200, &json!({"error": StoredError::NoStore.to_string(), "no_store": true}));
        };
        match f(s) {
            Ok(v) => Response::json(200, &v),
            Err(e @ (StoredError::Param(_) | StoredError::NoSeries(_))) => {
                Response::error(if matches!(e, StoredError::NoSeries(_)) { 404 } else { 400 }, e.to_string())
            }
            Err(e) => Response::error(500, e.to_string()),
        }
    }

    fn live(&self, p: &Params, ask: impl FnOnce(&Params) -> Result<Ask, ParamError>) -> Response {
        let Some(hub) = &self.live else {
            return Response::error(404, "the live view is off (latscope serve --no-live)");
        };
        let r = ask(p).map_err(LiveError::from).and_then(|a| hub.request(p, a));
        match r {
            Ok(v) => Response::json(200, &v),
            Err(e) => Response::json(e.status(), &e.to_json()),
        }
    }

    fn login(&self, req: &Request) -> Response {
        let no_token = !self.access.requires_token();
        match req.method.as_str() {
            "GET" | "HEAD" if no_token => Response::redirect("/"),
            "GET" | "HEAD" => html(LOGIN_HTML),
            "POST" => {
                let form: Vec<(String, String)> = form_urlencoded::parse(&req.body).into_owned().collect();
                let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
                let next = local_target(get("next").unwrap_or("/")).to_string();
                if no_token {
                    return Response::redirect(&next);
                }
                if !self.access.host_ok(req) {
                    return Response::error(403, "wrong Host");
                }
                let token = get("token").unwrap_or("");
                match self.access.verify(req, &[token]) {
                    // SameSite=Strict: other sites' pages never send it; HttpOnly: scripts never read it.
                    Verdict::Allowed => Response::redirect(&next)
                        .with_header("Set-Cookie", format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict")),
                    Verdict::Throttled(after) => throttled(after),
                    _ => Response::redirect(&format!(
                        "/login?{}",
                        encode_query(&[("next".into(), next), ("failed".into(), "1".into())])
                    )),
                }
            }
            m => Response::error(405, format!("{m} is not accepted at /login")),
        }
    }
}

/// A dump's answer, or its error with the status that fits.
fn dump_response(r: Result<Response, crate::dumps::DumpError>) -> Response {
    use crate::dumps::DumpError;
    match r {
        Ok(r) => r,
        Err(e @ DumpError::NoDirs) => Response::json(200, &json!({"error": e.to_string(), "no_dirs": true})),
        Err(e @ DumpError::Param(_)) => Response::error(400, e.to_string()),
        Err(e @ DumpError::NotFound(_)) => Response::error(404, e.to_string()),
        Err(e) => Response::error(500, e.to_string()),
    }
}

/// Largest dump handed out whole (a response is held in memory).
const MAX_DOWNLOAD: u64 = 512 << 20;

/// The dump's file, as an attachment.
fn download(path: &std::path::Path) -> Result<Response, crate::dumps::DumpError> {
    use crate::dumps::DumpError;
    let len = path.metadata().map_err(|e| DumpError::Read(e.to_string()))?.len();
    if len > MAX_DOWNLOAD {
        return Err(DumpError::Read(format!(
            "{} is {} bytes, more than this server hands out ({MAX_DOWNLOAD}): copy it from {}",
            path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            len,
            path.parent().map(|p| p.display().to_string()).unwrap_or_default()
        )));
    }
    let body = std::fs::read(path).map_err(|e| DumpError::Read(e.to_string()))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(Response::new(200, "application/vnd.apache.arrow.stream", body)
        .with_header("Content-Disposition", format!("attachment; filename=\"{name}\"")))
}

/// A local user other than the one the dashboard answers without a token: 403, saying how to
/// let them in.
fn other_user(uid: Option<u32>, owner: Option<u32>) -> Response {
    let who = uid.map_or("a user the kernel did not name".to_string(), |u| format!("uid {u}"));
    let owner = owner.map_or(String::new(), |o| format!("uid {o} and "));
    Response::error(
        403,
        format!(
            "this dashboard has no token, so it answers only {owner}root; this connection is {who}: start \
             'latscope serve' with a token (LATSCOPE_TOKEN) to let other users in with it"
        ),
    )
}

/// Too many token guesses: 429, come back later.
fn throttled(after: std::time::Duration) -> Response {
    Response::error(429, "too many wrong tokens: try again later")
        .with_header("Retry-After", after.as_secs().max(1).to_string())
}

fn html(body: &'static str) -> Response {
    Response::new(200, "text/html; charset=utf-8", body)
}

fn asset(req: &Request, name: &str) -> Response {
    let Some(a) = ASSETS.iter().find(|a| a.name == name) else {
        return Response::text(404, format!("no asset {name}"));
    };
    let tag = etag(a.body);
    // Revalidated on every load (cheap: 304 without a body), so a new binary's assets are used at once.
    if req.header("if-none-match") == Some(tag.as_str()) {
        return Response::new(304, a.content_type, Vec::new())
            .with_header("ETag", tag)
            .with_header("Cache-Control", "no-cache");
    }
    Response::new(200, a.content_type, a.body).with_header("ETag", tag).with_header("Cache-Control", "no-cache")
}

fn encode_query(pairs: &[(String, String)]) -> String {
    form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs.iter()).finish()
}

fn fields() -> Response {
    let f: Vec<serde_json::Value> = latscope_filter::fields()
        .iter()
        .map(|f| json!({"name": f.name, "applies_to": f.applies_to, "description": f.description}))
        .collect();
    Response::json(200, &json!({ "fields": f }))
}

fn view_query(p: &Params) -> Result<ViewQuery, ParamError> {
    let min_ns = p.duration_ns("min", 1, 1_000_000_000_000)?;
    let max_ns = p.duration_ns("max", 2, 10_000_000_000_000)?.unwrap_or(10_000_000_000);
    if min_ns.is_some_and(|m| m >= max_ns) {
        return Err(ParamError::Invalid("min".into(), "must be below max".into()));
    }
    Ok(ViewQuery {
        rows: p.int("rows", 1, MAX_VIEW_ROWS)?.unwrap_or(120) as usize,
        cols: p.int("cols", 2, MAX_VIEW_COLS)?.unwrap_or(56) as usize,
        min_ns,
        max_ns,
    })
}

fn cell_query(p: &Params) -> Result<Option<CellQuery>, ParamError> {
    let (Some(r0), Some(c0)) = (p.int("r0", 0, i64::MAX)?, p.int("c0", 0, MAX_VIEW_COLS)?) else {
        return Ok(None);
    };
    let r1 = p.int("r1", 0, i64::MAX)?.unwrap_or(r0);
    let c1 = p.int("c1", 0, MAX_VIEW_COLS)?.unwrap_or(c0);
    if r1.abs_diff(r0) > MAX_VIEW_ROWS as u64 {
        return Err(ParamError::Invalid("r1".into(), format!("at most {MAX_VIEW_ROWS} rows apart from r0")));
    }
    Ok(Some(CellQuery {
        view: view_query(p)?,
        r0: r0 as u64,
        r1: r1 as u64,
        c0: c0 as usize,
        c1: c1 as usize,
        limit: p.int("limit", 1, 2000)?.unwrap_or(200) as usize,
        waits: p.flag("waits")?,
    }))
}

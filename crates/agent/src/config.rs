//! The agent's configuration file (TOML): where to listen, where to push, and the named series.
//! Every error names the file and the line of the value at fault.

use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use latscope_event::EventKind;
use latscope_filter::Filter;
use serde::Deserialize;
use toml::Spanned;

/// Address `/metrics` is served on when the configuration names none: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9465";
/// Interval between reads of the counts (and Graphite pushes) when the configuration names none.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);
/// Label values a series keeps before folding the rest into `other`, unless configured.
pub const DEFAULT_MAX_LABELS: usize = 1000;
/// The label value latencies of values past a series' cap are counted under.
pub const OTHER: &str = "other";

/// How a series groups its latencies: the label its histograms carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum By {
    /// One histogram (no label besides `host` and `series`).
    All,
    /// By disk (block requests; label `disk`).
    Disk,
    /// By syscall (label `syscall`).
    Syscall,
    /// By the I/O class of the fd: file, net, ipc, other (label `class`).
    Class,
    /// By process name, the kernel's 15-character comm (label `proc`).
    Proc,
    /// By container: its name, else its short id; `host` outside containers (label `container`).
    Container,
    /// By Kubernetes pod, `namespace/name` (label `pod`; `<no pod>` outside pods).
    Pod,
    /// By cgroup v2 path (label `cgroup`).
    Cgroup,
}

impl By {
    /// The label name, or `None` for [`By::All`].
    pub fn label(self) -> Option<&'static str> {
        match self {
            By::All => None,
            By::Disk => Some("disk"),
            By::Syscall => Some("syscall"),
            By::Class => Some("class"),
            By::Proc => Some("proc"),
            By::Container => Some("container"),
            By::Pod => Some("pod"),
            By::Cgroup => Some("cgroup"),
        }
    }

    fn parse(s: &str) -> Option<By> {
        Some(match s {
            "all" => By::All,
            "disk" => By::Disk,
            "syscall" => By::Syscall,
            "class" => By::Class,
            "proc" => By::Proc,
            "container" => By::Container,
            "pod" => By::Pod,
            "cgroup" => By::Cgroup,
            _ => return None,
        })
    }
}

/// One named series: a filter and a grouping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesConfig {
    /// Name (letters, digits, `_`), the `series` label.
    pub name: String,
    /// Filter expression (sysdig syntax); empty takes every event of the kind.
    pub filter: String,
    /// Grouping.
    pub by: By,
    /// Syscalls or block requests (block for `by = "disk"`, syscalls otherwise, unless given).
    pub kind: EventKind,
    /// Label values kept before the rest fold into `other`.
    pub max_labels: usize,
}

/// Where Graphite lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphiteConfig {
    /// `host:port` of a carbon plaintext receiver.
    pub address: String,
    /// First path component (default `latscope`); then the host, the series, the label value.
    pub prefix: String,
}

impl GraphiteConfig {
    /// Whether `address` is `HOST:PORT` (resolved only when pushing: a receiver may come up after
    /// the agent); the error says what is wrong.
    pub fn check_address(address: &str) -> Result<(), String> {
        match address.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0) => Ok(()),
            _ => Err(format!("graphite address \"{address}\" is not HOST:PORT (e.g. \"localhost:2003\")")),
        }
    }
}

/// Where OpenTelemetry metrics go (`[otlp]`): a collector's OTLP/HTTP receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// `http://HOST:PORT/PATH`, e.g. `http://collector:4318/v1/metrics`.
    pub endpoint: String,
    /// Extra request headers (name, value), sorted by name.
    pub headers: Vec<(String, String)>,
    /// Time between pushes (default: the agent's interval; a multiple of it in effect, as counts
    /// are read once per interval).
    pub interval: Duration,
    /// Longest time one push may take (default [`DEFAULT_OTLP_TIMEOUT`]).
    pub timeout: Duration,
}

/// How long one OTLP push may take when the configuration says nothing (the collector's own
/// exporters default to the same).
pub const DEFAULT_OTLP_TIMEOUT: Duration = Duration::from_secs(10);

impl OtlpConfig {
    /// Whether `endpoint` is an `http://HOST[:PORT][/PATH]` URL; the error says what is wrong.
    pub fn check_endpoint(endpoint: &str) -> Result<(), String> {
        let example = "(e.g. \"http://localhost:4318/v1/metrics\")";
        if endpoint.starts_with("https://") {
            return Err(format!(
                "endpoint \"{endpoint}\": https is not supported; send over http to a collector on this host or network {example}, which can forward over TLS"
            ));
        }
        let Some(rest) = endpoint.strip_prefix("http://") else {
            return Err(format!("endpoint \"{endpoint}\" is not an http:// URL {example}"));
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host_ok = |h: &str| !h.is_empty() && !h.contains(['@', ' ']);
        let ok = match authority.rsplit_once(':') {
            _ if authority.starts_with('[') => authority.contains(']'),
            Some((h, p)) => host_ok(h) && p.parse::<u16>().is_ok_and(|p| p > 0),
            None => host_ok(authority),
        };
        if !ok || endpoint.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("endpoint \"{endpoint}\": no valid HOST[:PORT] after http:// {example}"));
        }
        if !rest.contains('/') {
            return Err(format!(
                "endpoint \"{endpoint}\" has no path: a collector receives metrics on /v1/metrics {example}"
            ));
        }
        Ok(())
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// Where `/metrics` is served.
    pub listen: SocketAddr,
    /// How often counts are read, metrics refreshed and Graphite lines pushed.
    pub interval: Duration,
    /// The `host` label (default: this machine's host name).
    pub host: String,
    /// Graphite push, if configured.
    pub graphite: Option<GraphiteConfig>,
    /// OpenTelemetry (OTLP/HTTP) push, if configured.
    pub otlp: Option<OtlpConfig>,
    /// Keep the kernel's BPF run-time statistics on, for `latscope_agent_probe_cpu_seconds_total`
    /// (they cost two clock reads per run of every BPF program on the machine: about 170 ns per
    /// syscall with the agent's probes). Off by default.
    pub probe_cpu: bool,
    /// The series, in file order.
    pub series: Vec<SeriesConfig>,
    /// The flight recorders, in file order.
    pub recorders: Vec<RecorderConfig>,
}

/// One flight recorder (`[[recorder]]`): what it keeps in its ring, its triggers, where its
/// dumps go and how many are kept (see `latscope_flight`).
#[derive(Debug, Clone, PartialEq)]
pub struct RecorderConfig {
    /// Name (letters, digits, `_`): the `recorder` label, and `latscope trigger NAME/TRIGGER`.
    pub name: String,
    /// The directory of its dumps (created, mode 0700, if missing).
    pub dir: PathBuf,
    /// What the ring keeps.
    pub ring: latscope_flight::RingSize,
    /// Which events it records (default: every one).
    pub filter: String,
    /// Which syscalls (default all).
    pub syscalls: latscope_event::SyscallSet,
    /// Block requests too (default true).
    pub block: bool,
    /// Attribution for calls at least this slow, ns (`why_above`; none by default).
    pub why_above_ns: Option<u64>,
    /// With attribution: the stacks of those calls.
    pub stacks: bool,
    /// The triggers as written (`NAME: CONDITION`), checked.
    pub triggers: Vec<String>,
    /// The window before a trigger (default: the whole ring).
    pub before: Option<Duration>,
    /// The window after it.
    pub after: Duration,
    /// Minimum time between two dumps.
    pub min_gap: Duration,
    /// At most this many dumps kept.
    pub keep: usize,
    /// At most this many bytes of dumps.
    pub disk_budget: Option<u64>,
}

/// A configuration that cannot be used: the file, the line (when the problem is at one place) and
/// what is wrong.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line of the value at fault.
    pub line: Option<usize>,
    /// What is wrong and what to do.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    listen: Option<Spanned<String>>,
    interval: Option<Spanned<String>>,
    host: Option<String>,
    max_labels: Option<Spanned<i64>>,
    probe_cpu: Option<bool>,
    graphite: Option<RawGraphite>,
    otlp: Option<RawOtlp>,
    #[serde(default)]
    series: Vec<RawSeries>,
    #[serde(default)]
    recorder: Vec<RawRecorder>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecorder {
    name: Spanned<String>,
    dir: Spanned<String>,
    ring: Spanned<String>,
    triggers: Spanned<Vec<Spanned<String>>>,
    filter: Option<Spanned<String>>,
    syscalls: Option<Spanned<String>>,
    block: Option<bool>,
    why_above: Option<Spanned<String>>,
    stacks: Option<bool>,
    before: Option<Spanned<String>>,
    after: Option<Spanned<String>>,
    min_gap: Option<Spanned<String>>,
    keep: Option<Spanned<i64>>,
    disk_budget: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGraphite {
    address: Spanned<String>,
    prefix: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOtlp {
    endpoint: Spanned<String>,
    headers: Option<Spanned<std::collections::BTreeMap<String, Spanned<String>>>>,
    interval: Option<Spanned<String>>,
    timeout: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeries {
    name: Spanned<String>,
    #[serde(default)]
    filter: Option<Spanned<String>>,
    by: Option<Spanned<String>>,
    kind: Option<Spanned<String>>,
    max_labels: Option<Spanned<i64>>,
}

impl AgentConfig {
    /// Reads and checks the configuration at `path`.
    pub fn load(path: &Path) -> Result<AgentConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: None,
            message: format!("cannot read the configuration: {e}"),
        })?;
        AgentConfig::parse(&text, path)
    }

    /// Parses and checks a configuration; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<AgentConfig, ConfigError> {
        let line_of = |span: Range<usize>| text[..span.start.min(text.len())].matches('\n').count() + 1;
        let err = |span: Option<Range<usize>>, message: String| ConfigError {
            path: path.to_path_buf(),
            line: span.map(line_of),
            message,
        };
        let raw: Raw = toml::from_str(text).map_err(|e| {
            // toml's message carries its own "line N, column M" and a snippet; keep its first
            // line and our FILE:LINE prefix.
            let msg = e.message().trim().to_string();
            err(e.span(), msg)
        })?;
        let listen = match &raw.listen {
            None => DEFAULT_LISTEN.parse().expect("the default address parses"),
            Some(s) => s.get_ref().parse().map_err(|_| {
                err(
                    Some(s.span()),
                    format!("listen = \"{}\" is not an address: write IP:PORT, e.g. \"127.0.0.1:9465\"", s.get_ref()),
                )
            })?,
        };
        let interval = match &raw.interval {
            None => DEFAULT_INTERVAL,
            Some(s) => {
                let ns = latscope_event::units::parse_duration_ns(s.get_ref())
                    .map_err(|e| err(Some(s.span()), format!("interval: {e}")))?;
                if ns < 100_000_000 {
                    return Err(err(Some(s.span()), "interval must be at least 100ms".into()));
                }
                Duration::from_nanos(ns)
            }
        };
        let cap = |v: &Option<Spanned<i64>>, default: usize| -> Result<usize, ConfigError> {
            match v {
                None => Ok(default),
                Some(n) if *n.get_ref() >= 1 && *n.get_ref() <= 1_000_000 => Ok(*n.get_ref() as usize),
                Some(n) => Err(err(Some(n.span()), format!("max_labels = {}: use 1 to 1000000", n.get_ref()))),
            }
        };
        let default_cap = cap(&raw.max_labels, DEFAULT_MAX_LABELS)?;
        let graphite = match raw.graphite {
            None => None,
            Some(g) => {
                let a = g.address.get_ref();
                GraphiteConfig::check_address(a).map_err(|m| err(Some(g.address.span()), m))?;
                Some(GraphiteConfig { address: a.clone(), prefix: g.prefix.unwrap_or_else(|| "latscope".into()) })
            }
        };
        let otlp = match &raw.otlp {
            None => None,
            Some(o) => Some(otlp(o, interval, &err)?),
        };
        if raw.series.is_empty() && raw.recorder.is_empty() {
            return Err(err(
                None,
                "no series and no recorder: add at least one [[series]] or [[recorder]] table with a name".into(),
            ));
        }
        let mut series: Vec<SeriesConfig> = Vec::new();
        for r in &raw.series {
            let name = r.name.get_ref();
            if name.is_empty()
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                || name.starts_with(|c: char| c.is_ascii_digit())
            {
                return Err(err(
                    Some(r.name.span()),
                    format!("series name \"{name}\": use letters, digits and _, not starting with a digit"),
                ));
            }
            if series.iter().any(|x| x.name == *name) {
                return Err(err(Some(r.name.span()), format!("a series named \"{name}\" is already defined")));
            }
            let by = match &r.by {
                None => By::All,
                Some(b) => By::parse(b.get_ref()).ok_or_else(|| {
                    err(
                        Some(b.span()),
                        format!(
                            "by = \"{}\" is not a grouping: use \"disk\", \"syscall\", \"class\", \"proc\", \"container\", \"pod\", \"cgroup\" or \"all\"",
                            b.get_ref()
                        ),
                    )
                })?,
            };
            let kind = match &r.kind {
                None if by == By::Disk => EventKind::Block,
                None => EventKind::Syscall,
                Some(k) => match k.get_ref().as_str() {
                    "syscall" => EventKind::Syscall,
                    "block" => EventKind::Block,
                    other => {
                        return Err(err(Some(k.span()), format!("kind = \"{other}\": use \"syscall\" or \"block\"")))
                    }
                },
            };
            let at = r.by.as_ref().map(|b| b.span()).or(r.kind.as_ref().map(|k| k.span()));
            match (by, kind) {
                (By::Disk, EventKind::Syscall) => {
                    return Err(err(at, "by = \"disk\" groups block requests: remove kind = \"syscall\"".into()))
                }
                (By::Syscall | By::Class | By::Proc | By::Container | By::Pod | By::Cgroup, EventKind::Block) => {
                    return Err(err(
                        at,
                        format!(
                            "by = \"{}\" groups syscalls; block requests group by \"disk\" (or \"all\")",
                            by.label().unwrap_or("all")
                        ),
                    ))
                }
                _ => {}
            }
            let filter = r.filter.as_ref().map(|f| f.get_ref().clone()).unwrap_or_default();
            if let Err(e) = Filter::parse(&filter) {
                let span = r.filter.as_ref().map(|f| f.span());
                return Err(err(span, format!("series \"{name}\": invalid filter:\n{e}")));
            }
            series.push(SeriesConfig {
                name: name.clone(),
                filter,
                by,
                kind,
                max_labels: cap(&r.max_labels, default_cap)?,
            });
        }
        let mut recorders: Vec<RecorderConfig> = Vec::new();
        for r in &raw.recorder {
            let rc = recorder(r, &err)?;
            if recorders.iter().any(|x| x.name == rc.name) {
                return Err(err(Some(r.name.span()), format!("a recorder named \"{}\" is already defined", rc.name)));
            }
            if recorders.iter().any(|x| x.dir == rc.dir) {
                return Err(err(
                    Some(r.dir.span()),
                    format!(
                        "dir = \"{}\" is another recorder's: each keeps its dumps in a directory of its own",
                        rc.dir.display()
                    ),
                ));
            }
            recorders.push(rc);
        }
        Ok(AgentConfig {
            listen,
            interval,
            host: raw.host.unwrap_or_else(host_name),
            graphite,
            otlp,
            probe_cpu: raw.probe_cpu.unwrap_or(false),
            series,
            recorders,
        })
    }
}

/// The `[otlp]` table, checked (`interval` is the agent's); `err` makes an error at a span.
fn otlp(
    o: &RawOtlp,
    interval: Duration,
    err: &dyn Fn(Option<Range<usize>>, String) -> ConfigError,
) -> Result<OtlpConfig, ConfigError> {
    let endpoint = o.endpoint.get_ref();
    OtlpConfig::check_endpoint(endpoint).map_err(|m| err(Some(o.endpoint.span()), format!("otlp: {m}")))?;
    let dur = |v: &Option<Spanned<String>>, what: &str| -> Result<Option<Duration>, ConfigError> {
        let Some(s) = v else { return Ok(None) };
        let ns = latscope_event::units::parse_duration_ns(s.get_ref())
            .map_err(|m| err(Some(s.span()), format!("otlp: {what}: {m}")))?;
        if ns == 0 {
            return Err(err(Some(s.span()), format!("otlp: {what} = \"{}\": give a time above 0", s.get_ref())));
        }
        Ok(Some(Duration::from_nanos(ns)))
    };
    let every = dur(&o.interval, "interval")?.unwrap_or(interval);
    if every < interval {
        return Err(err(
            o.interval.as_ref().map(|s| s.span()),
            format!(
                "otlp: interval = \"{}\" is shorter than the agent's interval ({} ms), at which counts are read: use at least that",
                o.interval.as_ref().map_or("", |s| s.get_ref()),
                interval.as_millis()
            ),
        ));
    }
    let timeout = dur(&o.timeout, "timeout")?.unwrap_or(DEFAULT_OTLP_TIMEOUT);
    let mut headers = Vec::new();
    if let Some(h) = &o.headers {
        for (name, value) in h.get_ref() {
            // RFC 9110 field names are tokens; values may not break the header block.
            let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            if name.is_empty() || !name.chars().all(token) {
                return Err(err(
                    Some(h.span()),
                    format!("otlp: header name \"{name}\": use letters, digits and - (e.g. \"Authorization\")"),
                ));
            }
            if name.eq_ignore_ascii_case("content-type") || name.eq_ignore_ascii_case("content-length") {
                return Err(err(Some(h.span()), format!("otlp: header \"{name}\" is set by the agent: remove it")));
            }
            let v = value.get_ref();
            if v.chars().any(|c| c.is_control()) {
                return Err(err(
                    Some(value.span()),
                    format!("otlp: header \"{name}\": the value has a control character"),
                ));
            }
            headers.push((name.clone(), v.clone()));
        }
    }
    Ok(OtlpConfig { endpoint: endpoint.clone(), headers, interval: every, timeout })
}

/// One `[[recorder]]` table, checked; `err` makes an error at a span.
fn recorder(
    r: &RawRecorder,
    err: &dyn Fn(Option<Range<usize>>, String) -> ConfigError,
) -> Result<RecorderConfig, ConfigError> {
    let name = r.name.get_ref();
    if name.is_empty()
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || name.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(err(
            Some(r.name.span()),
            format!("recorder name \"{name}\": use letters, digits and _, not starting with a digit"),
        ));
    }
    let at = |what: &str, m: String| format!("recorder \"{name}\": {what}: {m}");
    let dir = PathBuf::from(r.dir.get_ref());
    if !dir.is_absolute() {
        return Err(err(Some(r.dir.span()), at("dir", "give an absolute path".into())));
    }
    let ring =
        latscope_flight::RingSize::parse(r.ring.get_ref()).map_err(|m| err(Some(r.ring.span()), at("ring", m)))?;
    let dur = |v: &Option<Spanned<String>>, what: &str| -> Result<Option<Duration>, ConfigError> {
        match v {
            None => Ok(None),
            Some(s) => latscope_event::units::parse_duration_ns(s.get_ref())
                .map(|ns| Some(Duration::from_nanos(ns)))
                .map_err(|m| err(Some(s.span()), at(what, m))),
        }
    };
    let filter = r.filter.as_ref().map(|f| f.get_ref().clone()).unwrap_or_default();
    if let Err(e) = Filter::parse(&filter) {
        return Err(err(r.filter.as_ref().map(|f| f.span()), at("invalid filter", format!("\n{e}"))));
    }
    let syscalls = match &r.syscalls {
        None => latscope_event::SyscallSet::All,
        Some(s) => latscope_event::SyscallSet::parse(s.get_ref())
            .ok_or_else(|| err(Some(s.span()), at("syscalls", "use \"all\", \"io\" or \"none\"".into())))?,
    };
    let mut triggers = Vec::new();
    for (i, t) in r.triggers.get_ref().iter().enumerate() {
        let parsed = latscope_flight::Trigger::parse(t.get_ref(), &format!("t{}", i + 1))
            .map_err(|e| err(Some(t.span()), at("invalid trigger", format!("\n{e}"))))?;
        if let latscope_flight::TriggerKind::Signal(s) = parsed.kind {
            if s == libc::SIGHUP {
                return Err(err(
                    Some(t.span()),
                    at("trigger", "SIGHUP reloads the agent's configuration: use USR1 or USR2".into()),
                ));
            }
        }
        triggers.push(t.get_ref().clone());
    }
    let keep = match &r.keep {
        None => latscope_flight::DEFAULT_KEEP,
        Some(k) if *k.get_ref() >= 1 && *k.get_ref() <= 100_000 => *k.get_ref() as usize,
        Some(k) => return Err(err(Some(k.span()), at("keep", "use 1 to 100000".into()))),
    };
    let disk_budget = match &r.disk_budget {
        None => None,
        Some(b) => Some(
            latscope_event::units::parse_size(b.get_ref()).map_err(|m| err(Some(b.span()), at("disk_budget", m)))?,
        ),
    };
    let rc = RecorderConfig {
        name: name.clone(),
        dir,
        ring,
        filter,
        syscalls,
        block: r.block.unwrap_or(true),
        why_above_ns: dur(&r.why_above, "why_above")?.map(|d| d.as_nanos() as u64),
        stacks: r.stacks.unwrap_or(false),
        triggers,
        before: dur(&r.before, "before")?,
        after: dur(&r.after, "after")?.unwrap_or(latscope_flight::DEFAULT_AFTER),
        min_gap: dur(&r.min_gap, "min_gap")?.unwrap_or(latscope_flight::DEFAULT_MIN_GAP),
        keep,
        disk_budget,
    };
    // The checks a recorder makes at start that do not need its directory.
    let mut o = rc.flight_options();
    o.dir = std::env::temp_dir();
    o.check().map_err(|m| err(Some(r.triggers.span()), at("recorder", m)))?;
    Ok(rc)
}

impl RecorderConfig {
    /// The flight recorder's options.
    pub fn flight_options(&self) -> latscope_flight::FlightOptions {
        let mut o = latscope_flight::FlightOptions::new(&self.dir, self.ring);
        o.triggers = self
            .triggers
            .iter()
            .enumerate()
            .filter_map(|(i, t)| latscope_flight::Trigger::parse(t, &format!("t{}", i + 1)).ok())
            .collect();
        o.before = self.before;
        o.after = self.after;
        o.min_gap = self.min_gap;
        o.keep = Some(self.keep);
        o.disk_budget = self.disk_budget;
        o
    }
}

/// This machine's host name (the kernel's node name).
pub fn host_name() -> String {
    // uname(2): no file to read.
    let (name, _, _) = latscope_probe::snapshot::uname();
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<AgentConfig, ConfigError> {
        AgentConfig::parse(s, Path::new("agent.toml"))
    }

    #[test]
    fn a_full_configuration_parses_with_defaults_filled_in() {
        let c = parse(
            r#"
listen = "127.0.0.1:9999"
interval = "5s"
host = "web01"
max_labels = 50

[graphite]
address = "localhost:2003"

[[series]]
name = "disk_io"
by = "disk"

[[series]]
name = "postgres"
filter = "proc.name = postgres and fd.type = file"
by = "syscall"
max_labels = 20
"#,
        )
        .unwrap();
        assert_eq!(c.listen, "127.0.0.1:9999".parse().unwrap());
        assert_eq!(c.interval, Duration::from_secs(5));
        assert_eq!(c.graphite.as_ref().unwrap().prefix, "latscope");
        assert_eq!(c.series.len(), 2);
        assert_eq!((c.series[0].by, c.series[0].kind, c.series[0].max_labels), (By::Disk, EventKind::Block, 50));
        assert_eq!((c.series[1].by, c.series[1].kind, c.series[1].max_labels), (By::Syscall, EventKind::Syscall, 20));
        let d = parse("[[series]]\nname = \"all\"\n").unwrap();
        assert_eq!(d.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(
            (d.interval, d.series[0].max_labels, d.series[0].by),
            (DEFAULT_INTERVAL, DEFAULT_MAX_LABELS, By::All)
        );
    }

    #[test]
    fn the_packaged_example_parses() {
        let c = AgentConfig::parse(include_str!("../../../packaging/agent.toml"), Path::new("agent.toml")).unwrap();
        assert!(c.series.len() >= 3);
        assert_eq!(c.listen.to_string(), DEFAULT_LISTEN, "loopback by default");
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let cases = [
            ("[[series]]\nname = \"a\"\nby = \"pid\"\n", 3, "not a grouping"),
            ("[[series]]\nname = \"a\"\n\nfilter = \"proc.name = \"\n", 4, "invalid filter"),
            ("listen = \"nowhere\"\n[[series]]\nname = \"a\"\n", 1, "not an address"),
            ("[[series]]\nname = \"a\"\n[[series]]\nname = \"a\"\n", 4, "already defined"),
            ("[[series]]\nname = \"a b\"\n", 2, "letters, digits"),
            ("[[series]]\nname = \"a\"\nby = \"disk\"\nkind = \"syscall\"\n", 3, "groups block requests"),
            ("[[series]]\nname = \"a\"\ncolour = 1\n", 3, "unknown field"),
            ("interval = \"1 fortnight\"\n[[series]]\nname = \"a\"\n", 1, "interval"),
            ("[[series]]\nname = \"a\"\nmax_labels = 0\n", 3, "max_labels"),
            ("[[series]\nname = \"a\"\n", 1, ""),
        ];
        for (text, line, what) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.line, Some(line), "{text}: {e}");
            assert!(e.to_string().starts_with(&format!("agent.toml:{line}: ")), "{e}");
            assert!(e.message.contains(what), "{text}: {e}");
        }
        assert!(parse("").unwrap_err().message.contains("no series"));
    }

    #[test]
    fn an_otlp_table_parses_with_defaults_and_its_errors_name_the_key_and_line() {
        let base = "interval = \"2s\"\n[[series]]\nname = \"a\"\n";
        let c = parse(&format!("{base}[otlp]\nendpoint = \"http://collector:4318/v1/metrics\"\n")).unwrap();
        let o = c.otlp.unwrap();
        assert_eq!(
            (o.endpoint.as_str(), o.interval, o.timeout, o.headers.len()),
            ("http://collector:4318/v1/metrics", Duration::from_secs(2), DEFAULT_OTLP_TIMEOUT, 0)
        );
        let c = parse(&format!(
            "{base}[otlp]\nendpoint = \"http://[::1]:4318/v1/metrics\"\nheaders = {{ \"X-Scope-OrgID\" = \"a\", \"Authorization\" = \"Bearer t\" }}\ninterval = \"10s\"\ntimeout = \"500ms\"\n"
        ))
        .unwrap();
        let o = c.otlp.unwrap();
        assert_eq!((o.interval, o.timeout), (Duration::from_secs(10), Duration::from_millis(500)));
        assert_eq!(o.headers[0], ("Authorization".to_string(), "Bearer t".to_string()));
        assert!(parse(base).unwrap().otlp.is_none());
        let cases = [
            ("endpoint = \"collector:4318\"\n", 5, "otlp: endpoint \"collector:4318\" is not an http:// URL"),
            ("endpoint = \"https://c:4318/v1/metrics\"\n", 5, "https is not supported"),
            ("endpoint = \"http://c:4318\"\n", 5, "no path"),
            ("endpoint = \"http://:4318/v1/metrics\"\n", 5, "HOST[:PORT]"),
            ("endpoint = \"http://c:99999/v1/metrics\"\n", 5, "HOST[:PORT]"),
            (
                "endpoint = \"http://c/v1/metrics\"\ninterval = \"1s\"\n",
                6,
                "otlp: interval = \"1s\" is shorter than the agent's interval",
            ),
            ("endpoint = \"http://c/v1/metrics\"\ntimeout = \"soon\"\n", 6, "otlp: timeout"),
            ("endpoint = \"http://c/v1/metrics\"\ntimeout = \"0s\"\n", 6, "otlp: timeout"),
            (
                "endpoint = \"http://c/v1/metrics\"\nheaders = { \"Bad Name\" = \"x\" }\n",
                6,
                "otlp: header name \"Bad Name\"",
            ),
            ("endpoint = \"http://c/v1/metrics\"\nheaders = { \"Content-Type\" = \"x\" }\n", 6, "set by the agent"),
            ("endpoint = \"http://c/v1/metrics\"\nheaders = { \"A\" = \"x\\ny\" }\n", 6, "control character"),
            ("endpoint = \"http://c/v1/metrics\"\nport = 1\n", 6, "unknown field"),
            ("interval = \"10s\"\n", 4, "endpoint"),
        ];
        for (otlp, line, what) in cases {
            let text = format!("{base}[otlp]\n{otlp}");
            let e = parse(&text).expect_err(&text);
            assert_eq!(e.line, Some(line), "{text}: {e}");
            assert!(e.message.contains(what), "{text}: {e}");
        }
    }

    #[test]
    fn a_recorder_parses_and_its_errors_name_the_line() {
        let c = parse(
            r#"
[[recorder]]
name = "pg"
dir = "/var/lib/latscope/flight/pg"
ring = "30s,512MiB"
filter = "proc.name = postgres"
why_above = "50ms"
triggers = ["slow: evt.latency > 150ms", "p99 of fsync over 10s > 20ms", "usr: signal USR1"]
before = "20s"
after = "5s"
min_gap = "1m"
keep = 10
disk_budget = "2GiB"
"#,
        )
        .unwrap();
        assert!(c.series.is_empty());
        let r = &c.recorders[0];
        assert_eq!((r.name.as_str(), r.ring.span_ns, r.ring.max_bytes), ("pg", Some(30_000_000_000), 512 << 20));
        assert_eq!((r.why_above_ns, r.keep, r.disk_budget), (Some(50_000_000), 10, Some(2 << 30)));
        assert_eq!(
            (r.before, r.after, r.min_gap),
            (Some(Duration::from_secs(20)), Duration::from_secs(5), Duration::from_secs(60))
        );
        let o = r.flight_options();
        let names: Vec<&str> = o.triggers.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["slow", "t2", "usr"]);
        let base = "[[recorder]]\nname = \"a\"\ndir = \"/tmp/a\"\nring = \"30s\"\n";
        let cases = [
            (format!("{base}triggers = [\"x: manual\"]\nring2 = 1\n"), 6, "unknown field"),
            ("[[recorder]]\nname = \"a\"\ndir = \"/tmp/a\"\nring = \"lots\"\ntriggers = [\"x: manual\"]\n".to_string(), 4, "ring"),
            (format!("{base}triggers = [\n  \"x: manual\",\n  \"p99 over ten > 1ms\",\n]\n"), 7, "invalid trigger"),
            (format!("{base}triggers = [\"h: signal HUP\"]\n"), 5, "SIGHUP reloads"),
            (format!("{base}triggers = []\n"), 5, "at least one trigger"),
            (format!("{base}triggers = [\"x: manual\"]\nbefore = \"1m\"\n"), 5, "longer than the ring"),
            (format!("{base}triggers = [\"x: manual\"]\nkeep = 0\n"), 6, "keep"),
            ("[[recorder]]\nname = \"a\"\ndir = \"rel\"\nring = \"1s\"\ntriggers = [\"x: manual\"]\n".to_string(), 3, "absolute"),
            (format!("{base}triggers = [\"x: manual\"]\n[[recorder]]\nname = \"b\"\ndir = \"/tmp/a\"\nring = \"1s\"\ntriggers = [\"x: manual\"]\n"), 8, "another recorder's"),
        ];
        for (text, line, what) in cases {
            let e = parse(&text).expect_err(&text);
            assert_eq!(e.line, Some(line), "{text}: {e}");
            assert!(e.message.contains(what), "{text}: {e}");
        }
    }
}

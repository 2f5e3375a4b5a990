//! Triggers: what has a flight recorder write its window, in a small language of its own.
//!
//! ```text
//! TRIGGER    := [NAME ':'] CONDITION
//! CONDITION  := FILTER                                         a call: any filter expression
//!             | 'p'N ['of' SUBJECT] 'over' DURATION '>' DURATION  a percentile over a window
//!             | COUNTED ['of' SUBJECT] '>' N '/s' ['over' DURATION]   a rate
//!             | 'signal' SIGNAL                                   USR1, USR2 or HUP
//!             | 'file' PATH                                       a file appearing (or touched)
//!             | 'manual'                                          only `latscope trigger NAME`
//! COUNTED    := 'errors' | 'calls' | 'requests'                   failed syscalls, syscalls, block requests
//! SUBJECT    := SYSCALL[,SYSCALL...] ['on' PATH] | 'disk' NAME | 'block' | '(' FILTER ')'
//! ```
//!
//! `p99 of fsync on /var/lib/pg over 10s > 20ms` fires when the 99th percentile of the fsync
//! calls on files under /var/lib/pg, over the last 10 s, is above 20 ms; `errors > 100/s` when
//! more than 100 syscalls a second fail. Every trigger can also be fired by name with
//! `latscope trigger NAME`. Errors name the place with a caret, as filter errors do.

use latscope_filter::Filter;
use std::fmt;
use std::path::PathBuf;

/// One named trigger.
#[derive(Debug, Clone)]
pub struct Trigger {
    /// Its name (letters, digits, `_`, `-`): in messages, dump file names and `latscope trigger`.
    pub name: String,
    /// The condition as written.
    pub condition: String,
    /// What it tests.
    pub kind: TriggerKind,
}

/// What a trigger tests.
#[derive(Debug, Clone)]
pub enum TriggerKind {
    /// A call (or block request) the filter matches.
    Call(Box<Filter>),
    /// A percentile of latency over a sliding window.
    Percentile(Percentile),
    /// A count per second over a sliding window.
    Rate(Rate),
    /// A signal sent to latscope.
    Signal(i32),
    /// A file appearing, or its modification time changing.
    File(PathBuf),
    /// Nothing of its own: `latscope trigger NAME` only.
    Manual,
}

/// `pN [of SUBJECT] over W > T`.
#[derive(Debug, Clone)]
pub struct Percentile {
    /// The quantile, `0 < q < 1` (p99: 0.99).
    pub q: f64,
    /// The events it is taken over.
    pub subject: Subject,
    /// The window, ns.
    pub window_ns: u64,
    /// Fires above this latency, ns.
    pub above_ns: u64,
}

impl Percentile {
    /// Calls a window needs before its percentile is taken: with fewer, the slowest call alone
    /// would decide (p99 needs 100, p99.9 1000).
    pub fn min_count(&self) -> u64 {
        (1.0 / (1.0 - self.q)).round().max(1.0) as u64
    }
}

/// `COUNTED [of SUBJECT] > N/s [over W]`.
#[derive(Debug, Clone)]
pub struct Rate {
    /// What is counted.
    pub counted: Counted,
    /// The events counted.
    pub subject: Subject,
    /// Fires above this many per second.
    pub per_sec: f64,
    /// The window the rate is taken over, ns (default 1 s).
    pub window_ns: u64,
}

/// What a rate counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Syscalls that failed.
    Errors,
    /// Syscalls.
    Calls,
    /// Block requests.
    Requests,
}

/// The events a percentile or a rate is taken over.
#[derive(Debug, Clone)]
pub struct Subject {
    /// Syscalls or block requests.
    pub block: bool,
    /// The events of that kind it takes (`None`: all).
    pub filter: Option<Box<Filter>>,
}

/// A trigger that does not parse: the message and where, drawn with a caret under the place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerError {
    message: String,
    text: String,
    /// Byte range of the place in `text`.
    start: usize,
    end: usize,
}

impl TriggerError {
    fn new(message: impl Into<String>, text: &str, start: usize, end: usize) -> TriggerError {
        let start = floor_char(text, start.min(text.len()));
        let end = floor_char(text, end.clamp(start, text.len()));
        TriggerError { message: message.into(), text: text.to_string(), start, end }
    }
    /// The message alone.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// 1-based column (in characters) of the place.
    pub fn column(&self) -> usize {
        self.text[..self.start].chars().count() + 1
    }
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for TriggerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line: String = self.text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        let pad = self.text[..self.start].chars().count();
        let width = self.text[self.start..self.end].chars().count().max(1);
        writeln!(f, "{} (at column {})", self.message, self.column())?;
        writeln!(f, "  {line}")?;
        write!(f, "  {}{}", " ".repeat(pad), "^".repeat(width))
    }
}

impl std::error::Error for TriggerError {}

/// Signals a trigger may name, with their numbers.
pub const SIGNALS: [(&str, i32); 3] = [("USR1", libc::SIGUSR1), ("USR2", libc::SIGUSR2), ("HUP", libc::SIGHUP)];

/// The name of signal `sig` (`SIGUSR1`).
pub fn signal_name(sig: i32) -> String {
    SIGNALS.iter().find(|(_, n)| *n == sig).map_or_else(|| format!("signal {sig}"), |(s, _)| format!("SIG{s}"))
}

/// A word of the condition and where it is.
#[derive(Debug, Clone, Copy)]
struct Tok<'a> {
    s: &'a str,
    at: usize,
}

impl Tok<'_> {
    fn end(&self) -> usize {
        self.at + self.s.len()
    }
}

/// Split into words at white space; a `(...)` group (balanced, quotes respected) is one word.
fn words(text: &str, from: usize) -> Result<Vec<Tok<'_>>, TriggerError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = from;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if b[i] == b'(' {
            let mut depth = 0usize;
            let mut quote: Option<u8> = None;
            while i < b.len() {
                let c = b[i];
                match quote {
                    Some(_) if c == b'\\' => i += 1,
                    Some(q) if c == q => quote = None,
                    Some(_) => {}
                    None if c == b'\'' || c == b'"' => quote = Some(c),
                    None if c == b'(' => depth += 1,
                    None if c == b')' => {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    None => {}
                }
                i += 1;
            }
            if depth != 0 || quote.is_some() {
                return Err(TriggerError::new("unbalanced parenthesis: a ( has no )", text, start, start + 1));
            }
        } else if b[i] == b'"' || b[i] == b'\'' {
            let q = b[i];
            i += 1;
            while i < b.len() && b[i] != q {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            if i >= b.len() {
                return Err(TriggerError::new("unterminated quote", text, start, start + 1));
            }
            i += 1;
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                i += 1;
            }
        }
        out.push(Tok { s: &text[start..i.min(b.len())], at: start });
    }
    Ok(out)
}

fn unquote(s: &str) -> String {
    let b = s.as_bytes();
    if b.len() >= 2 && (b[0] == b'"' || b[0] == b'\'') && b[b.len() - 1] == b[0] {
        let inner = &s[1..s.len() - 1];
        let mut out = String::with_capacity(inner.len());
        let mut esc = false;
        for c in inner.chars() {
            if esc {
                out.push(c);
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else {
                out.push(c);
            }
        }
        out
    } else {
        s.to_string()
    }
}

/// A filter string literal for `s`.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Is `s` a trigger name: letters, digits, `_` and `-`, starting with a letter or `_`, at most
/// 64 characters?
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl Trigger {
    /// Parse `[NAME:] CONDITION`; a trigger without a name is called `default_name`.
    pub fn parse(text: &str, default_name: &str) -> Result<Trigger, TriggerError> {
        let trimmed = text.trim_start();
        let lead = text.len() - trimmed.len();
        // `NAME:` then white space: no filter starts so (fields have dots; times have digits).
        let (name, from) = match trimmed.find(':') {
            Some(i) if valid_name(&trimmed[..i]) && trimmed[i + 1..].starts_with(|c: char| c.is_whitespace()) => {
                (trimmed[..i].to_string(), lead + i + 1)
            }
            Some(i)
                if !trimmed[..i].contains(|c: char| c.is_whitespace() || c == '.' || c == '(')
                    && !trimmed[..i].is_empty()
                    && trimmed[..i].chars().next().is_some_and(|c| c.is_ascii_alphabetic()) =>
            {
                return Err(TriggerError::new(
                    format!(
                        "'{}' is not a trigger name: use letters, digits, _ and - (starting with a letter), then ': '",
                        &trimmed[..i]
                    ),
                    text,
                    lead,
                    lead + i,
                ))
            }
            _ => (default_name.to_string(), lead),
        };
        let condition = text[from..].trim().to_string();
        if condition.is_empty() {
            return Err(TriggerError::new(
                "empty trigger: give a condition (a filter such as 'evt.latency > 100ms', 'p99 over 10s > 20ms', \
                 'errors > 100/s', 'signal USR1', 'file PATH' or 'manual')",
                text,
                from,
                text.len(),
            ));
        }
        let toks = words(text, from)?;
        let first = toks[0];
        let kind = match first.s {
            "manual" if toks.len() == 1 => TriggerKind::Manual,
            "signal" => parse_signal(text, &toks)?,
            "file" => parse_file(text, &toks)?,
            "errors" | "calls" | "requests" => TriggerKind::Rate(parse_rate(text, &toks)?),
            s if is_percentile_word(s) => TriggerKind::Percentile(parse_percentile(text, &toks)?),
            _ => {
                let src = &text[first.at..];
                let f = Filter::parse(src.trim_end()).map_err(|e| {
                    let (pad, width) = e.char_span();
                    let start = src.char_indices().nth(pad).map_or(src.len(), |(i, _)| i);
                    let end = src[start..].char_indices().nth(width).map_or(src.len(), |(i, _)| start + i);
                    TriggerError::new(
                        format!("invalid filter: {}", e.message()),
                        text,
                        first.at + start,
                        first.at + end,
                    )
                })?;
                if f.is_match_all() {
                    return Err(TriggerError::new("the filter matches every event", text, first.at, text.len()));
                }
                TriggerKind::Call(Box::new(f))
            }
        };
        Ok(Trigger { name, condition, kind })
    }

    /// Whether the trigger looks at events (a call, a percentile, a rate).
    pub fn watches_events(&self) -> bool {
        matches!(self.kind, TriggerKind::Call(_) | TriggerKind::Percentile(_) | TriggerKind::Rate(_))
    }
}

fn is_percentile_word(s: &str) -> bool {
    s.len() > 1
        && (s.starts_with('p') || s.starts_with('P'))
        && s[1..].chars().all(|c| c.is_ascii_digit() || c == '.')
        && s[1..].starts_with(|c: char| c.is_ascii_digit())
}

fn err_at(text: &str, t: &Tok<'_>, msg: impl Into<String>) -> TriggerError {
    TriggerError::new(msg, text, t.at, t.end())
}

fn err_end(text: &str, msg: impl Into<String>) -> TriggerError {
    let n = text.trim_end().len();
    TriggerError::new(msg, text, n, n + 1)
}

fn parse_signal(text: &str, toks: &[Tok<'_>]) -> Result<TriggerKind, TriggerError> {
    let names = "USR1, USR2 or HUP";
    let Some(t) = toks.get(1) else {
        return Err(err_end(text, format!("'signal' needs a signal name: {names}")));
    };
    if let Some(extra) = toks.get(2) {
        return Err(err_at(text, extra, "unexpected word after the signal"));
    }
    let up = t.s.to_ascii_uppercase();
    let bare = up.strip_prefix("SIG").unwrap_or(&up);
    match SIGNALS.iter().find(|(n, _)| *n == bare) {
        Some(&(_, sig)) => Ok(TriggerKind::Signal(sig)),
        None => Err(err_at(text, t, format!("'{}' is not a signal a trigger may use: {names}", t.s))),
    }
}

fn parse_file(text: &str, toks: &[Tok<'_>]) -> Result<TriggerKind, TriggerError> {
    let Some(t) = toks.get(1) else {
        return Err(err_end(text, "'file' needs a path: the trigger fires when the file appears or is touched"));
    };
    if let Some(extra) = toks.get(2) {
        return Err(err_at(text, extra, "unexpected word after the path (quote a path with spaces)"));
    }
    let p = unquote(t.s);
    if !p.starts_with('/') {
        return Err(err_at(text, t, "the path must be absolute (it is watched whatever the working directory)"));
    }
    Ok(TriggerKind::File(PathBuf::from(p)))
}

fn duration(text: &str, t: Option<&Tok<'_>>, what: &str) -> Result<u64, TriggerError> {
    let Some(t) = t else { return Err(err_end(text, format!("{what}: a duration is missing here (like 10s)"))) };
    match latscope_event::units::parse_duration_ns(t.s) {
        Ok(0) => Err(err_at(text, t, format!("{what} must be more than 0"))),
        Ok(ns) => Ok(ns),
        Err(e) => Err(err_at(text, t, format!("{what}: {e}"))),
    }
}

/// `of SUBJECT` starting at `toks[i]` (after `of`), up to a word in `stop`; returns the subject
/// and the index of the first word after it.
fn parse_subject(text: &str, toks: &[Tok<'_>], mut i: usize, stop: &[&str]) -> Result<(Subject, usize), TriggerError> {
    let Some(first) = toks.get(i) else {
        return Err(err_end(text, "'of' needs what to measure: syscalls, 'disk NAME', 'block' or (FILTER)"));
    };
    let at = |j: usize| toks.get(j).map(|t| t.s);
    let stops = |j: usize| at(j).is_none_or(|s| stop.contains(&s) || s.starts_with('>'));
    if first.s.starts_with('(') {
        let inner = &first.s[1..first.s.len() - 1];
        let f = Filter::parse(inner).map_err(|e| {
            let (pad, width) = e.char_span();
            let start = inner.char_indices().nth(pad).map_or(inner.len(), |(k, _)| k);
            let end = inner[start..].char_indices().nth(width).map_or(inner.len(), |(k, _)| start + k);
            TriggerError::new(
                format!("invalid filter: {}", e.message()),
                text,
                first.at + 1 + start,
                first.at + 1 + end,
            )
        })?;
        let k = f.needs_kinds();
        let block = k.block && !k.syscall;
        return Ok((Subject { block, filter: Some(Box::new(f)) }, i + 1));
    }
    if first.s == "block" {
        return Ok((Subject { block: true, filter: None }, i + 1));
    }
    if first.s == "disk" {
        let Some(d) = toks.get(i + 1).filter(|_| !stops(i + 1)) else {
            return Err(err_at(text, first, "'disk' needs a disk name (vda, nvme0n1)"));
        };
        let f = Filter::parse(&format!("blk.disk = {}", quote(&unquote(d.s))))
            .map_err(|e| err_at(text, d, format!("invalid disk name: {}", e.message())))?;
        return Ok((Subject { block: true, filter: Some(Box::new(f)) }, i + 2));
    }
    // SYSCALL[,SYSCALL...] [on PATH]; commas may be followed by spaces.
    let mut names: Vec<(String, Tok<'_>)> = Vec::new();
    while !stops(i) && at(i) != Some("on") {
        let t = toks[i];
        for part in t.s.split(',').filter(|p| !p.is_empty()) {
            names.push((part.to_string(), t));
        }
        i += 1;
    }
    let mut clauses = Vec::new();
    if !names.is_empty() {
        for (n, t) in &names {
            if latscope_event::syscall_nr(n).is_none() {
                return Err(err_at(
                    text,
                    t,
                    format!(
                        "'{n}' is not a syscall (say 'disk NAME' for block requests, or give a filter in parentheses)"
                    ),
                ));
            }
        }
        let list: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
        clauses.push(format!("evt.type in ({})", list.join(", ")));
    }
    if at(i) == Some("on") {
        let Some(p) = toks.get(i + 1).filter(|_| !stops(i + 1)) else {
            return Err(err_at(text, &toks[i], "'on' needs a path (a file, or a directory for everything below it)"));
        };
        let path = unquote(p.s);
        if !path.starts_with('/') {
            return Err(err_at(text, p, "the path must be absolute"));
        }
        let dir = path.trim_end_matches('/');
        clauses.push(if dir.is_empty() {
            "fd.name startswith \"/\"".to_string()
        } else {
            format!("(fd.name = {} or fd.name startswith {})", quote(dir), quote(&format!("{dir}/")))
        });
        i += 2;
    }
    if clauses.is_empty() {
        return Err(err_at(
            text,
            first,
            "say what to measure: syscall names, 'on PATH', 'disk NAME', 'block' or (FILTER)",
        ));
    }
    let f = Filter::parse(&clauses.join(" and ")).map_err(|e| err_at(text, first, e.message().to_string()))?;
    Ok((Subject { block: false, filter: Some(Box::new(f)) }, i))
}

/// The value after `>`: in the same word (`>20ms`) or the next.
fn after_gt<'a>(text: &str, toks: &[Tok<'a>], i: usize) -> Result<(Tok<'a>, usize), TriggerError> {
    let Some(t) = toks.get(i) else { return Err(err_end(text, "'>' and a threshold are missing here")) };
    if !t.s.starts_with('>') {
        return Err(err_at(text, t, format!("expected '>' and a threshold, found '{}'", t.s)));
    }
    if t.s.starts_with(">=") {
        return Err(err_at(text, t, "use '>' (a trigger fires above its threshold)"));
    }
    if t.s.len() > 1 {
        return Ok((Tok { s: &t.s[1..], at: t.at + 1 }, i + 1));
    }
    match toks.get(i + 1) {
        Some(v) => Ok((*v, i + 2)),
        None => Err(err_end(text, "a threshold is missing after '>'")),
    }
}

fn parse_percentile(text: &str, toks: &[Tok<'_>]) -> Result<Percentile, TriggerError> {
    let p = toks[0];
    let n: f64 =
        p.s[1..].parse().map_err(|_| err_at(text, &p, format!("'{}' is not a percentile (p50, p99, p99.9)", p.s)))?;
    if !(n > 0.0 && n < 100.0) {
        return Err(err_at(
            text,
            &p,
            "a percentile is between p0 and p100, both excluded (for the slowest call, use a filter: evt.latency > 20ms)",
        ));
    }
    let mut i = 1;
    let mut subject = Subject { block: false, filter: None };
    if toks.get(i).map(|t| t.s) == Some("of") {
        let (s, next) = parse_subject(text, toks, i + 1, &["over"])?;
        subject = s;
        i = next;
    }
    match toks.get(i) {
        Some(t) if t.s == "over" => {}
        Some(t) => {
            return Err(err_at(text, t, format!("expected 'over' and a window (like 'over 10s'), found '{}'", t.s)))
        }
        None => return Err(err_end(text, "'over' and a window are missing (like 'p99 over 10s > 20ms')")),
    }
    let window_ns = duration(text, toks.get(i + 1), "the window")?;
    if window_ns < 1_000_000_000 {
        return Err(err_at(text, &toks[i + 1], "the window is at least 1s (percentiles are taken per second)"));
    }
    let (v, next) = after_gt(text, toks, i + 2)?;
    let above_ns = duration(text, Some(&v), "the threshold")?;
    if let Some(t) = toks.get(next) {
        return Err(err_at(text, t, "unexpected words after the threshold"));
    }
    Ok(Percentile { q: n / 100.0, subject, window_ns, above_ns })
}

fn parse_rate(text: &str, toks: &[Tok<'_>]) -> Result<Rate, TriggerError> {
    let counted = match toks[0].s {
        "errors" => Counted::Errors,
        "calls" => Counted::Calls,
        _ => Counted::Requests,
    };
    let mut i = 1;
    let mut subject = Subject { block: counted == Counted::Requests, filter: None };
    if toks.get(i).map(|t| t.s) == Some("of") {
        let (s, next) = parse_subject(text, toks, i + 1, &[])?;
        if s.block != (counted == Counted::Requests) {
            let what = if counted == Counted::Requests { "block requests" } else { "syscalls" };
            return Err(err_at(
                text,
                &toks[i + 1],
                format!("'{}' counts {what}: the subject must be {what} too", toks[0].s),
            ));
        }
        subject = s;
        i = next;
    }
    let (v, mut next) = after_gt(text, toks, i)?;
    let (num, per) = match v.s.split_once('/') {
        Some((n, u)) => (n, u),
        None => match toks.get(next).map(|t| t.s) {
            Some(u) if u.starts_with('/') => {
                next += 1;
                (v.s, &u[1..])
            }
            _ => return Err(err_at(text, &v, "a rate is a count per second: like 100/s (or 6000/min)")),
        },
    };
    let n: f64 = num
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| err_at(text, &v, format!("'{num}' is not a count")))?;
    let per_sec = match per {
        "s" | "sec" => n,
        "min" | "m" => n / 60.0,
        "h" => n / 3600.0,
        _ => return Err(err_at(text, &v, format!("'/{per}' is not a unit: use /s or /min"))),
    };
    let mut window_ns = 1_000_000_000;
    match toks.get(next) {
        Some(t) if t.s == "over" => {
            window_ns = duration(text, toks.get(next + 1), "the window")?;
            if window_ns < 1_000_000_000 {
                return Err(err_at(text, &toks[next + 1], "the window is at least 1s (counts are taken per second)"));
            }
            if let Some(t) = toks.get(next + 2) {
                return Err(err_at(text, t, "unexpected words after the window"));
            }
        }
        Some(t) => return Err(err_at(text, t, format!("expected 'over' and a window or nothing, found '{}'", t.s))),
        None => {}
    }
    Ok(Rate { counted, subject, per_sec, window_ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Trigger {
        Trigger::parse(s, "t1").unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn each_form_parses_with_its_name() {
        let t = parse("slowpg: evt.latency > 150ms and proc.name = postgres");
        assert_eq!(t.name, "slowpg");
        assert_eq!(t.condition, "evt.latency > 150ms and proc.name = postgres");
        let TriggerKind::Call(f) = &t.kind else { panic!("{t:?}") };
        assert!(f.pushdown().min_latency_ns.is_some_and(|ns| ns >= 150_000_000));
        let t = parse("p99 of fsync on /var/lib/pg over 10s > 20ms");
        assert_eq!(t.name, "t1");
        let TriggerKind::Percentile(p) = &t.kind else { panic!("{t:?}") };
        assert_eq!((p.q, p.window_ns, p.above_ns, p.min_count()), (0.99, 10_000_000_000, 20_000_000, 100));
        assert_eq!(
            p.subject.filter.as_ref().unwrap().source(),
            "evt.type in (fsync) and (fd.name = \"/var/lib/pg\" or fd.name startswith \"/var/lib/pg/\")"
        );
        let t = parse("e: errors > 100/s");
        let TriggerKind::Rate(r) = &t.kind else { panic!("{t:?}") };
        assert_eq!((r.counted, r.per_sec, r.window_ns), (Counted::Errors, 100.0, 1_000_000_000));
        let t = parse("errors of write,fsync >6000/min over 5s");
        let TriggerKind::Rate(r) = &t.kind else { panic!("{t:?}") };
        assert_eq!((r.per_sec, r.window_ns), (100.0, 5_000_000_000));
        let t = parse("p99.9 of disk vda over 30s >5ms");
        let TriggerKind::Percentile(p) = &t.kind else { panic!("{t:?}") };
        assert!(p.subject.block && (p.q - 0.999).abs() < 1e-12 && p.min_count() == 1000);
        let t = parse("p50 of (proc.name = nginx and evt.type = read) over 2s > 1ms");
        let TriggerKind::Percentile(p) = &t.kind else { panic!("{t:?}") };
        assert!(!p.subject.block);
        assert!(matches!(parse("u: signal usr1").kind, TriggerKind::Signal(s) if s == libc::SIGUSR1));
        assert!(
            matches!(parse("f: file /run/dump-now").kind, TriggerKind::File(ref p) if p == std::path::Path::new("/run/dump-now"))
        );
        assert!(matches!(parse("now: manual").kind, TriggerKind::Manual));
        assert!(matches!(parse("requests of disk sda > 5000/s").kind, TriggerKind::Rate(ref r) if r.subject.block));
        // A filter that starts with a time is not a name.
        assert_eq!(parse("evt.time > 2026-11-22T22:30:13Z and evt.latency > 1s").name, "t1");
    }

    #[test]
    fn errors_name_the_place_with_a_caret() {
        let cases = [
            ("p99 of fsync over ten > 20ms", "the window", "ten"),
            ("p99 of fsnyc over 10s > 20ms", "not a syscall", "fsnyc"),
            ("p99 over 10s < 20ms", "expected '>'", "<"),
            ("p150 over 10s > 1ms", "between p0 and p100", "p150"),
            ("p99 over 10s > 20 parsecs", "threshold", "parsecs"),
            ("p99 > 20ms", "expected 'over'", ">"),
            ("errors > 100", "count per second", "100"),
            ("errors > 100/fortnight", "not a unit", "100/fortnight"),
            ("requests of fsync > 10/s", "block requests", "fsync"),
            ("x: evt.latncy > 1ms", "unknown field", "evt.latncy"),
            ("slow pg: evt.latency > 1ms", "invalid filter", "slow"),
            ("signal KILL", "not a signal", "KILL"),
            ("file relative/path", "absolute", "relative/path"),
            ("x: p99 of (proc.name = ) over 1s > 1ms", "invalid filter", ")"),
            ("bad!name: manual", "not a trigger name", "bad!name"),
        ];
        for (text, what, under) in cases {
            let e = Trigger::parse(text, "t").expect_err(text);
            assert!(e.message().contains(what), "{text}: {e}");
            let shown = e.to_string();
            let lines: Vec<&str> = shown.lines().collect();
            let col = lines[2].find('^').unwrap() - 2;
            assert!(text[col..].starts_with(under), "{text}: caret at {col}: {shown}");
        }
        assert!(Trigger::parse("  ", "t").unwrap_err().message().contains("empty trigger"));
    }
}

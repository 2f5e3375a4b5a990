//! How filter fields derive their values from an event, for other stages (printing, grouping)
//! to show the same values the filter compares.

use latscope_event::{EventBatch, EventKind, StrCol};
use std::fmt::Write as _;

/// String `row` of a column without panicking (`None` when out of range or not UTF-8).
#[inline]
pub(crate) fn str_at(col: &StrCol, row: usize) -> Option<&str> {
    std::str::from_utf8(bytes_at(col, row)?).ok()
}

/// Bytes of string `row` of a column (`None` when out of range).
#[inline]
pub(crate) fn bytes_at(col: &StrCol, row: usize) -> Option<&[u8]> {
    let a = *col.offsets.get(row)? as usize;
    let b = *col.offsets.get(row + 1)? as usize;
    col.data.get(a..b)
}

/// `fd.name` of event `row`: the path of a syscall event (the file behind its fd, or its path
/// argument), `None` for other kinds or when empty.
///
/// The event model records no socket tuples yet, so sockets have no `fd.name` unless the probe
/// stored a path for them.
pub fn fd_name(batch: &EventBatch, row: usize) -> Option<&str> {
    if batch.kind.get(row).copied() != Some(EventKind::Syscall as u8) {
        return None;
    }
    str_at(&batch.path, row).filter(|s| !s.is_empty())
}

/// Split a path into `fd.directory` and `fd.filename`: `/a/b/c` gives `(Some("/a/b"), Some("c"))`,
/// `/a` gives `(Some("/"), Some("a"))`, `c` gives `(None, Some("c"))`, `/` gives `(Some("/"), None)`.
/// Trailing slashes are ignored (`/a/b/` is `/a` and `b`).
pub fn split_path(path: &str) -> (Option<&str>, Option<&str>) {
    let t = path.trim_end_matches('/');
    if t.is_empty() {
        return (path.starts_with('/').then_some("/"), None);
    }
    match t.rfind('/') {
        None => (None, Some(t)),
        Some(i) => {
            let dir = t[..i].trim_end_matches('/');
            (Some(if dir.is_empty() { "/" } else { dir }), Some(&t[i + 1..]))
        }
    }
}

/// `evt.res` of a syscall return value: `SUCCESS` when it did not fail, otherwise the errno
/// name (`ENOENT`), or `E<n>` for numbers without a name.
pub fn result_name(ret: i64) -> std::borrow::Cow<'static, str> {
    let mut s = Scratch::new();
    match write_result(&mut s, ret) {
        Some(name) => name.into(),
        None => s.as_str().to_string().into(),
    }
}

/// Writes the `E<n>` form into `w` when the result has no static name.
pub(crate) fn write_result(w: &mut Scratch, ret: i64) -> Option<&'static str> {
    if !(-4095..0).contains(&ret) {
        return Some("SUCCESS");
    }
    match latscope_event::errno_name(-ret) {
        Some(n) => Some(n),
        None => {
            let _ = write!(w, "E{}", -ret);
            None
        }
    }
}

/// `evt.datetime` of wall-clock ns since the epoch: RFC 3339 in UTC with nanoseconds
/// (`2026-11-22T22:30:13.000000500Z`); the number itself when out of chrono's range.
pub fn rfc3339(ns: i128) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let sub = ns.rem_euclid(1_000_000_000) as u32;
    i64::try_from(secs)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, sub))
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
        .unwrap_or_else(|| ns.to_string())
}

/// A date and time (RFC 3339, `2026-11-22T22:30:13Z`, with or without a fraction and a zone
/// (UTC without one); `T`, `t` or a space between date and time; or a date alone, at midnight
/// UTC) as ns since the Unix epoch. `None` when `s` does not look like a date at all, an error
/// when it does but is not a valid one.
pub(crate) fn parse_clock_time(s: &str) -> Option<Result<i128, String>> {
    let t = s.trim();
    let b = t.as_bytes();
    // YYYY-MM...: anything else is a number or a duration.
    if !(b.len() >= 7 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[5].is_ascii_digit()) {
        return None;
    }
    let ns = |d: chrono::DateTime<chrono::Utc>| {
        i128::from(d.timestamp()) * 1_000_000_000 + i128::from(d.timestamp_subsec_nanos())
    };
    if let Ok(d) = chrono::DateTime::parse_from_rfc3339(t) {
        return Some(Ok(ns(d.to_utc())));
    }
    let naive = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dt%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"]
        .iter()
        .find_map(|fmt| chrono::NaiveDateTime::parse_from_str(t, fmt).ok())
        .or_else(|| chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d").ok()?.and_hms_opt(0, 0, 0));
    Some(match naive {
        Some(d) => Ok(ns(d.and_utc())),
        None => Err(format!(
            "'{t}' is not a valid date and time; write RFC 3339 (2026-11-22T22:30:13Z, 2026-11-22T22:30:13.250+01:00, or without a zone for UTC)"
        )),
    })
}

/// `blk.dev` of a device number: `major:minor`.
pub fn dev_string(dev: u32) -> String {
    let (ma, mi) = latscope_event::dev_major_minor(dev);
    format!("{ma}:{mi}")
}

/// A buffer for values that must be formatted (hex ids, `major:minor`, argument strings), so that
/// evaluating a filter does not allocate: short values stay on the stack; longer ones (`evt.args`
/// with a long path) go to a string the thread keeps between uses, allocated once and grown
/// when needed.
pub(crate) struct Scratch {
    buf: [u8; 48],
    len: usize,
    heap: Option<String>,
}

thread_local! {
    /// The heap buffer between uses (empty when a `Scratch` holds it).
    static SPARE: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
}

impl Scratch {
    pub(crate) fn new() -> Self {
        Self { buf: [0; 48], len: 0, heap: None }
    }
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match &self.heap {
            Some(h) => h.as_bytes(),
            None => &self.buf[..self.len],
        }
    }
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
}

impl std::fmt::Write for Scratch {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if let Some(h) = &mut self.heap {
            h.push_str(s);
            return Ok(());
        }
        let end = self.len + s.len();
        if let Some(dst) = self.buf.get_mut(self.len..end) {
            dst.copy_from_slice(s.as_bytes());
            self.len = end;
            return Ok(());
        }
        let mut h = SPARE.with(|c| c.take());
        h.clear();
        h.push_str(std::str::from_utf8(&self.buf[..self.len]).map_err(|_| std::fmt::Error)?);
        h.push_str(s);
        self.heap = Some(h);
        Ok(())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(h) = self.heap.take() {
            SPARE.with(|c| c.set(h));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::Event;

    #[test]
    fn paths() {
        assert_eq!(split_path("/a/b/c"), (Some("/a/b"), Some("c")));
        assert_eq!(split_path("/a"), (Some("/"), Some("a")));
        assert_eq!(split_path("/a/b/"), (Some("/a"), Some("b")));
        assert_eq!(split_path("//a"), (Some("/"), Some("a")));
        assert_eq!(split_path("a/b"), (Some("a"), Some("b")));
        assert_eq!(split_path("c"), (None, Some("c")));
        assert_eq!(split_path("/"), (Some("/"), None));
        assert_eq!(split_path(""), (None, None));
    }

    #[test]
    fn clock_times() {
        let t = |s: &str| parse_clock_time(s).map(|r| r.map_err(|e| e.split(';').next().unwrap_or("").to_string()));
        // 2026-11-22T22:30:13Z
        let base: i128 = 1_795_386_613 * 1_000_000_000;
        assert_eq!(t("2026-11-22T22:30:13Z"), Some(Ok(base)));
        assert_eq!(t("2026-11-22t22:30:13z"), Some(Ok(base)));
        assert_eq!(t("2026-11-22 22:30:13Z"), Some(Ok(base)));
        assert_eq!(t("2026-11-22T22:30:13.5Z"), Some(Ok(base + 500_000_000)));
        assert_eq!(t("2026-11-22T22:30:13.000000001Z"), Some(Ok(base + 1)));
        assert_eq!(t("2026-11-22T23:30:13+01:00"), Some(Ok(base)));
        assert_eq!(t("2026-11-22T20:30:13.25-02:00"), Some(Ok(base + 250_000_000)));
        // Without a zone: UTC.
        assert_eq!(t("2026-11-22T22:30:13"), Some(Ok(base)));
        assert_eq!(t("2026-11-22 22:30:13.5"), Some(Ok(base + 500_000_000)));
        assert_eq!(t("2026-11-22"), Some(Ok(base - (22 * 3600 + 30 * 60 + 13) * 1_000_000_000)));
        assert_eq!(t("1969-12-31T23:59:59Z"), Some(Ok(-1_000_000_000)));
        assert_eq!(t("2026-13-22T22:30:13Z"), Some(Err("'2026-13-22T22:30:13Z' is not a valid date and time".into())));
        assert!(matches!(t("2026-11-22T22:30"), Some(Err(_))));
        // Not dates: numbers and durations.
        assert_eq!(t("1795386613000000000"), None);
        assert_eq!(t("5s"), None);
        assert_eq!(t("2026"), None);
        assert_eq!(rfc3339(base + 500), "2026-11-22T22:30:13.000000500Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59.999999999Z");
        assert_eq!(rfc3339(i128::MAX), i128::MAX.to_string());
    }

    #[test]
    fn names() {
        assert_eq!(result_name(3), "SUCCESS");
        assert_eq!(result_name(-2), "ENOENT");
        assert_eq!(result_name(-4000), "E4000");
        assert_eq!(result_name(-5000), "SUCCESS");
        assert_eq!(dev_string((8 << 20) | 16), "8:16");
        // Long values move to the thread's spare string, which is reused.
        let mut s = Scratch::new();
        std::fmt::Write::write_str(&mut s, &"x".repeat(40)).unwrap();
        std::fmt::Write::write_str(&mut s, &"y".repeat(40)).unwrap();
        assert_eq!(s.as_str(), format!("{}{}", "x".repeat(40), "y".repeat(40)));
        let cap = s.heap.as_ref().unwrap().capacity();
        drop(s);
        let mut t = Scratch::new();
        std::fmt::Write::write_str(&mut t, &"z".repeat(60)).unwrap();
        assert_eq!((t.as_str(), t.heap.as_ref().unwrap().capacity()), (&*"z".repeat(60), cap));
    }

    #[test]
    fn fd_names() {
        let mut b = EventBatch::with_capacity(3);
        b.push(&Event { kind: 0, path: "/tmp/x".into(), ..Default::default() });
        b.push(&Event { kind: 1, path: "/tmp/x".into(), ..Default::default() });
        b.push(&Event { kind: 0, ..Default::default() });
        assert_eq!(fd_name(&b, 0), Some("/tmp/x"));
        assert_eq!(fd_name(&b, 1), None);
        assert_eq!(fd_name(&b, 2), None);
        assert_eq!(fd_name(&b, 3), None);
    }
}

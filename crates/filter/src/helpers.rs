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

/// `container.id` of a cgroup id: `host` for the root cgroup (id 0 or 1), otherwise the id in
/// lower-case hex (`1a2b`). The event model records cgroup ids, not container runtimes' ids.
pub fn container_id(cgroup: u64) -> String {
    let mut s = String::new();
    write_container_id(&mut s, cgroup);
    s
}

pub(crate) fn write_container_id(w: &mut impl std::fmt::Write, cgroup: u64) {
    let _ = if cgroup <= 1 { w.write_str("host") } else { write!(w, "{cgroup:x}") };
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

/// `blk.dev` of a device number: `major:minor`.
pub fn dev_string(dev: u32) -> String {
    let (ma, mi) = latscope_event::dev_major_minor(dev);
    format!("{ma}:{mi}")
}

/// A small stack buffer for values that must be formatted (hex ids, `major:minor`), so that
/// evaluating a filter never allocates.
pub(crate) struct Scratch {
    buf: [u8; 48],
    len: usize,
}

impl Scratch {
    pub(crate) fn new() -> Self {
        Self { buf: [0; 48], len: 0 }
    }
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
}

impl std::fmt::Write for Scratch {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
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
    fn names() {
        assert_eq!(container_id(0), "host");
        assert_eq!(container_id(1), "host");
        assert_eq!(container_id(0x1a2b), "1a2b");
        assert_eq!(container_id(u64::MAX), "ffffffffffffffff");
        assert_eq!(result_name(3), "SUCCESS");
        assert_eq!(result_name(-2), "ENOENT");
        assert_eq!(result_name(-4000), "E4000");
        assert_eq!(result_name(-5000), "SUCCESS");
        assert_eq!(dev_string((8 << 20) | 16), "8:16");
        let mut s = Scratch::new();
        assert!(std::fmt::Write::write_str(&mut s, &"x".repeat(49)).is_err());
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

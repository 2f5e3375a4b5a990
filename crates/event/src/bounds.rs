//! Bounds on every size the traced system controls.
//!
//! Any user of the recorded machine chooses command lines, paths, process and container names,
//! cgroup paths and the libraries their stacks run through. Unbounded, one of them makes a
//! trace's header or a block's metadata larger than any reader accepts (every recording becomes
//! unreadable), or a reader's tables larger than its memory. So each such value is cut at a
//! bound where it is written (the snapshot, the recorder, the trace writer) and again where it is
//! read, and each table a reader builds from a trace has a bound of its own. A value cut ends
//! with a marker saying how much was cut ([`cut`]: `…[cut 1948576 bytes]`), and the counts are
//! kept ([`Truncation`]: in the header for the header, in the summary for the blocks; `latscope
//! info` shows both).

use serde::{Deserialize, Serialize};

/// Longest path kept (executables, working directories, open files, mount points and sources,
/// cgroup paths, the files of stack frames): the kernel's `PATH_MAX`.
pub const MAX_PATH: usize = 4096;
/// Longest command line kept (a process's, in the start snapshot). Long Java class paths fit.
pub const MAX_CMDLINE: usize = 32 << 10;
/// Longest name kept: command, user, group and host names, container names, ids and images, pod
/// names, namespaces and uids, runtimes, disk names, build ids.
pub const MAX_NAME: usize = 256;
/// Longest other text kept: a kernel frame's symbol, mount options, why a stack is missing, each
/// argument of the recording's command line.
pub const MAX_TEXT: usize = 4096;
/// Longest filter expression kept in the header.
pub const MAX_FILTER: usize = 64 << 10;
/// Most arguments of the recording's command line kept.
pub const MAX_ARGS: usize = 4096;
/// Most frames of one stack kept (the probes capture 64); outer frames past it are cut and the
/// stack marked truncated.
pub const MAX_FRAMES: usize = 128;
/// Most bytes of one stack or cgroup table entry, as its JSON line: outer frames are cut until
/// it fits. Several fit in a block's metadata.
pub const MAX_ENTRY_JSON: usize = 128 << 10;
/// Most bytes of the header as JSON. Readers accept 64 MiB of header metadata; past this, the
/// largest tables' values are cut shorter, then their last entries dropped.
pub const MAX_HEADER_JSON: usize = 56 << 20;
/// Most stacks in a trace's stack table: the recorder stops adding new ones past it (their calls
/// refer to one entry saying the table is full) and readers ignore the rest.
pub const MAX_STACKS: usize = 1 << 19;
/// Most frames, all stacks of the table together.
pub const MAX_STACK_FRAMES: usize = 1 << 21;
/// Most bytes of the stack table's JSON lines, all blocks together.
pub const MAX_STACK_TABLE_BYTES: usize = 64 << 20;
/// Most cgroups a trace names (the header's and those met during the recording together).
pub const MAX_CGROUPS: usize = 1 << 20;

/// What was cut to keep within the bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truncation {
    /// Values cut short (each ends with the [`cut`] marker).
    #[serde(default)]
    pub values: u64,
    /// Bytes those values lost.
    #[serde(default)]
    pub bytes: u64,
    /// Entries left out whole (table rows past a table's bound: processes, open files and cgroups
    /// of the header past its size, stacks past the stack table's, cgroups past [`MAX_CGROUPS`]).
    #[serde(default)]
    pub entries: u64,
}

impl Truncation {
    /// Nothing was cut.
    pub fn is_empty(&self) -> bool {
        *self == Truncation::default()
    }

    /// Add `other`'s counts.
    pub fn add(&mut self, other: &Truncation) {
        self.values += other.values;
        self.bytes += other.bytes;
        self.entries += other.entries;
    }

    /// Words for `info` and warnings: `3 values cut (1.9 MB), 2 entries left out`; empty when
    /// nothing was.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.values > 0 {
            parts.push(format!(
                "{} value{} cut short ({} bytes)",
                self.values,
                if self.values == 1 { "" } else { "s" },
                self.bytes
            ));
        }
        if self.entries > 0 {
            parts.push(format!("{} entr{} left out", self.entries, if self.entries == 1 { "y" } else { "ies" }));
        }
        parts.join(", ")
    }
}

/// The marker a value cut at a bound ends with: `…[cut N bytes]`, N the bytes removed.
pub fn cut_marker(removed: usize) -> String {
    format!("…[cut {removed} bytes]")
}

/// Whether `s` ends with the marker of a value cut at a bound.
pub fn is_cut(s: &str) -> bool {
    s.strip_suffix(" bytes]")
        .and_then(|r| r.rsplit_once("…[cut "))
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The largest char boundary of `s` at or below `at`.
fn floor_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Cut `s` to at most `max` bytes, the [`cut_marker`] included, counting it in `t`; `s` as it
/// was when it fits.
pub fn cut(s: &mut String, max: usize, t: &mut Truncation) {
    if s.len() <= max {
        return;
    }
    let removed_guess = s.len() - max;
    // The marker's length depends on the count: size it for the count it will say.
    let mut keep = max.saturating_sub(cut_marker(removed_guess + 32).len());
    keep = floor_boundary(s, keep);
    let removed = s.len() - keep;
    s.truncate(keep);
    s.push_str(&cut_marker(removed));
    t.values += 1;
    t.bytes += removed as u64;
}

/// As [`cut`], for a value read up to a bound of which `unread` more bytes were never read (a
/// file read in part): marked and counted when anything was cut or left unread.
pub fn cut_read(s: &mut String, max: usize, unread: u64, t: &mut Truncation) {
    if unread == 0 {
        return cut(s, max, t);
    }
    let keep = floor_boundary(s, max.saturating_sub(cut_marker(usize::MAX).len()));
    let removed = (s.len() - keep) as u64 + unread;
    s.truncate(keep);
    s.push_str(&format!("…[cut {removed} bytes]"));
    t.values += 1;
    t.bytes += removed;
}

/// Cut an optional value (see [`cut`]).
pub fn cut_opt(s: &mut Option<String>, max: usize, t: &mut Truncation) {
    if let Some(s) = s {
        cut(s, max, t);
    }
}

/// The length of `v` as JSON, without building the text.
pub fn json_len<T: Serialize + ?Sized>(v: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_cut_says_so_and_keeps_within_the_bound() {
        let mut t = Truncation::default();
        let mut s = "a".repeat(1_948_576);
        cut(&mut s, 4096, &mut t);
        assert!(s.len() <= 4096, "{}", s.len());
        assert!(s.ends_with(&format!("…[cut {} bytes]", 1_948_576 - s.find('…').unwrap())), "{}", &s[4000..]);
        assert!(is_cut(&s));
        assert_eq!((t.values, t.bytes as usize), (1, 1_948_576 - s.find('…').unwrap()));
        // Cut at a character boundary.
        let mut s = "é".repeat(100);
        cut(&mut s, 50, &mut t);
        assert!(s.len() <= 50 && s.starts_with('é'), "{s}");
        // A value within the bound is left as it is.
        let mut s = "short".to_string();
        cut(&mut s, 5, &mut t);
        assert_eq!(s, "short");
        assert!(!is_cut("libx.so") && !is_cut("…[cut  bytes]"));
        assert_eq!(t.values, 2);
        assert_eq!(
            Truncation { values: 2, bytes: 10, entries: 1 }.describe(),
            "2 values cut short (10 bytes), 1 entry left out"
        );
    }

    #[test]
    fn json_len_is_the_serialized_length() {
        let v = vec!["a\u{1b}b".to_string(), "ü".into()];
        assert_eq!(json_len(&v), serde_json::to_string(&v).unwrap().len());
    }
}

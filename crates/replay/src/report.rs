//! Text descriptions of plans, for people.

use crate::plan::Plan;
use latscope_event::units::{fmt_bytes, fmt_ns};
use std::fmt::Write;

/// What a plan holds: operations by kind, the starting tree, the sandbox, and what was left out
/// and why, with counts.
pub fn describe_plan(p: &Plan) -> String {
    let m = &p.meta;
    let mut s = String::new();
    let c = &m.counts;
    let _ = writeln!(
        s,
        "{} operations in {} threads ({} workers), recorded over {} on {} ({})",
        c.ops,
        p.threads.len(),
        m.lanes,
        fmt_ns(m.span_ns),
        if m.trace.hostname.is_empty() { "?" } else { &m.trace.hostname },
        m.trace.kernel
    );
    if let Some(f) = &m.filter {
        let _ = writeln!(s, "filter: {f}");
    }
    let _ = writeln!(
        s,
        "plus {} implicit operations (fds inherited over fork, closed at exec and exit), {} cross-thread dependencies",
        c.implicit, c.waits
    );
    let mut kinds: Vec<(&String, &u64)> = c.by_kind.iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let list: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
    if !list.is_empty() {
        let _ = writeln!(s, "by kind: {}", list.join(", "));
    }
    let _ = writeln!(
        s,
        "starting tree: {} directories, {} files ({}), {} symlinks, {} extended attributes; {} files open before the recording",
        c.init_dirs,
        c.init_files,
        fmt_bytes(c.init_bytes),
        c.init_symlinks,
        p.xattrs.len(),
        p.preopen.len()
    );
    let _ = writeln!(s, "sandbox ({}):", m.sandbox.mode);
    for r in &m.sandbox.roots {
        let _ = writeln!(
            s,
            "  {} -> {} ({} when recorded)",
            r.mount,
            r.dir,
            if r.fstype.is_empty() { "?" } else { &r.fstype }
        );
    }
    let total: u64 = m.dropped.iter().map(|d| d.count).sum();
    if total > 0 {
        let _ = writeln!(s, "left out: {total} recorded events");
        let w = m.dropped.iter().map(|d| d.count.to_string().len()).max().unwrap_or(1);
        for d in &m.dropped {
            let _ = writeln!(s, "  {:>w$} {:<16} {}", d.count, d.op, d.reason);
        }
    } else {
        let _ = writeln!(s, "left out: nothing");
    }
    for w in &m.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

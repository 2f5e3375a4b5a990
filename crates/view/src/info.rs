//! What a recording holds: its header, event counts per kind and type, time span and losses.

use latscope_event::source::Chunk;
use latscope_event::units::{fmt_bytes, fmt_ns};
use latscope_event::{dev_major_minor, op_name, EventKind, TraceHeader};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Event counts of a recording (or of the events a filter kept).
#[derive(Debug, Default, Clone)]
pub struct Census {
    by_type: BTreeMap<(u8, u16), u64>,
    by_kind: BTreeMap<u8, u64>,
    first: Option<u64>,
    last: u64,
    total: u64,
}

impl Census {
    /// Counts nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Count the chunk's rows.
    pub fn add(&mut self, c: Chunk<'_>) {
        let b = c.batch;
        for &i in c.rows {
            let i = i as usize;
            *self.by_type.entry((b.kind[i], b.nr[i])).or_default() += 1;
            *self.by_kind.entry(b.kind[i]).or_default() += 1;
            self.first = Some(self.first.map_or(b.ts[i], |f| f.min(b.ts[i])));
            self.last = self.last.max(b.end(i));
            self.total += 1;
        }
    }

    /// Events counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// From the first start to the last end, ns.
    pub fn span_ns(&self) -> u64 {
        self.first.map_or(0, |f| self.last.saturating_sub(f))
    }
}

/// Facts about the file itself, from the reader.
#[derive(Debug, Clone, Default)]
pub struct FileFacts {
    /// The file as named.
    pub path: String,
    /// Its size.
    pub bytes: u64,
    /// Blocks read.
    pub blocks: u64,
    /// The recording was closed cleanly (it has a summary).
    pub closed_cleanly: bool,
    /// Events the probes lost (at least, when not closed cleanly).
    pub lost: u64,
    /// Warnings of the reader.
    pub warnings: Vec<String>,
    /// The counts are of the events a filter kept.
    pub filtered: bool,
}

fn kind_name(k: u8) -> &'static str {
    EventKind::from_u8(k).map(|k| k.name()).unwrap_or("?")
}

/// The report as JSON. `verbose` lists the start snapshot's processes and open files.
pub fn to_json(h: &TraceHeader, c: &Census, f: &FileFacts, verbose: bool) -> Value {
    let counts: Vec<Value> = c
        .by_type
        .iter()
        .map(|((k, nr), n)| json!({"kind": kind_name(*k), "type": op_name(*k, *nr), "count": n}))
        .collect();
    let mut hj = serde_json::to_value(h).unwrap_or(Value::Null);
    if !verbose {
        hj["processes"] = json!(h.processes.len());
        hj["fds"] = json!(h.fds.len());
    }
    json!({
        "file": f.path,
        "file_bytes": f.bytes,
        "header": hj,
        "events": c.total,
        "lost": f.lost,
        "first_ns": c.first,
        "span_ns": c.span_ns(),
        "counts": counts,
        "closed_cleanly": f.closed_cleanly,
        "blocks": f.blocks,
        "warnings": f.warnings,
    })
}

/// The report as text, types sorted by count (the first 25 unless `verbose`).
pub fn render_text(h: &TraceHeader, c: &Census, f: &FileFacts, verbose: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "file:        {} ({})", f.path, fmt_bytes(f.bytes));
    let _ =
        writeln!(o, "format:      latscope trace v{}, written by latscope {}", h.format_version, h.latscope_version);
    let _ = writeln!(o, "host:        {} ({} {}, {} CPUs)", h.hostname, h.kernel, h.machine, h.cpus);
    let _ = writeln!(o, "recorded:    {}", h.command_line.join(" "));
    let _ = writeln!(
        o,
        "syscalls:    {}   block: {}   filter: {}",
        h.syscalls,
        if h.block { "yes" } else { "no" },
        h.filter.as_deref().unwrap_or("(none)")
    );
    let _ = writeln!(o, "events:      {}{}", c.total, if f.filtered { " matching the filter" } else { "" });
    let _ = writeln!(o, "span:        {} ({} blocks)", fmt_ns(c.span_ns()), f.blocks);
    if f.closed_cleanly {
        let warn = if f.lost > 0 { "  <-- incomplete recording" } else { "" };
        let _ = writeln!(o, "lost:        {} events (ring buffer full){warn}", f.lost);
    } else {
        let _ =
            writeln!(o, "lost:        at least {} events; the recording was not closed cleanly (no summary)", f.lost);
    }
    for (k, n) in &c.by_kind {
        let _ = writeln!(o, "  {:8} {n}", kind_name(*k));
    }
    let mut top: Vec<_> = c.by_type.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1));
    let _ = writeln!(o, "by type:");
    let shown = if verbose { usize::MAX } else { 25 };
    for ((k, nr), n) in top.iter().take(shown) {
        let kind = if *k == EventKind::Syscall as u8 { "" } else { kind_name(*k) };
        let _ = writeln!(o, "  {:>10}  {}{}{}", n, kind, if kind.is_empty() { "" } else { " " }, op_name(*k, *nr));
    }
    if top.len() > shown {
        let _ = writeln!(o, "  ... {} more types (-v lists all)", top.len() - shown);
    }
    let _ = writeln!(o, "block devices:");
    // Unattached loop devices and the like (size 0) are noise here; --json lists them all.
    for d in h.block_devices.iter().filter(|d| d.size_bytes > 0) {
        let (ma, mi) = dev_major_minor(d.dev);
        let _ = writeln!(
            o,
            "  {:12} {ma}:{mi}  {:>10}  {}{}",
            d.name,
            fmt_bytes(d.size_bytes),
            d.scheduler.as_deref().map(|s| format!("scheduler {s}")).unwrap_or_default(),
            if d.rotational { " rotational" } else { "" }
        );
    }
    let mut fs: Vec<&str> = h.mounts.iter().map(|m| m.fstype.as_str()).collect();
    fs.sort();
    fs.dedup();
    let _ = writeln!(o, "mounts:      {} (file systems: {})", h.mounts.len(), fs.join(", "));
    if verbose {
        for m in &h.mounts {
            let _ = writeln!(o, "  {} on {} type {} ({})", m.source, m.mount_point, m.fstype, m.options);
        }
        let _ = writeln!(o, "processes at start: {}", h.processes.len());
        for p in &h.processes {
            let _ = writeln!(o, "  {:>7} {:>7} {:<16} {}", p.pid, p.ppid, p.comm, p.cmdline);
        }
    } else {
        let _ = writeln!(o, "processes:   {} at start, {} open files (-v lists them)", h.processes.len(), h.fds.len());
    }
    for w in &f.warnings {
        let _ = writeln!(o, "warning:     {w}");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{Event, EventBatch};

    #[test]
    fn counts_kinds_types_and_span_of_the_rows_given() {
        let mut b = EventBatch::default();
        let read = latscope_event::syscall_nr("read").unwrap();
        b.push(&Event { kind: 0, nr: read, ts: 100, lat: 10, ..Default::default() });
        b.push(&Event { kind: 0, nr: read, ts: 200, lat: 50, ..Default::default() });
        b.push(&Event { kind: 1, nr: 1, ts: 150, lat: 5, ..Default::default() });
        let mut c = Census::new();
        c.add(Chunk { batch: &b, rows: &[0, 2], zone: Default::default() });
        assert_eq!(c.total(), 2);
        assert_eq!(c.span_ns(), 55);
        let f = FileFacts { path: "t.lst".into(), closed_cleanly: true, ..Default::default() };
        let text = render_text(&TraceHeader::default(), &c, &f, false);
        assert!(text.contains("events:      2\n"), "{text}");
        assert!(text.contains("block write"), "{text}");
        let j = to_json(&TraceHeader::default(), &c, &f, false);
        assert_eq!(j["events"], 2);
        assert_eq!(j["counts"].as_array().unwrap().len(), 2);
    }
}

//! Drill-down tables: per process, syscall, file, directory, disk, operation or client, the count,
//! rate, total and percentile latency and bytes, sorted and limited — the "by client, then by
//! operation, then by file" analysis of storage analytics, from a trace or live.

use crate::group::{GroupBy, Grouper};
use crate::heatmap::moved_bytes;
use crate::latagg::LatAgg;
use latscope_event::source::Chunk;
use latscope_event::units::{fmt_bytes, fmt_count, fmt_ns, fmt_ns_f};
use latscope_event::{EventBatch, EventKind, TraceHeader};
use serde_json::{json, Value};
use std::fmt::Write;

/// One row of the table.
#[derive(Debug, Clone, Default)]
pub struct TopRow {
    /// Group name.
    pub name: String,
    /// Events.
    pub count: u64,
    /// Sum of latencies, ns.
    pub total_ns: u128,
    /// Latency distribution.
    pub lat: LatAgg,
    /// Bytes moved (syscall results of data calls, block request sizes).
    pub bytes: u64,
    /// Failed syscalls.
    pub errors: u64,
}

impl TopRow {
    /// Mean latency in ns.
    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.count as f64
        }
    }
}

/// What to sort by (descending, except `name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Events.
    Count,
    /// Events per second (same order as count).
    Rate,
    /// Total latency.
    Total,
    /// Mean latency.
    Avg,
    /// Median latency.
    P50,
    /// 99th percentile latency.
    P99,
    /// Largest latency.
    Max,
    /// Bytes.
    Bytes,
    /// Errors.
    Errors,
    /// Name, ascending.
    Name,
}

impl SortKey {
    /// Parse a `--sort` value.
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "count" | "ops" | "iops" => Self::Count,
            "rate" => Self::Rate,
            "total" | "time" => Self::Total,
            "avg" | "mean" => Self::Avg,
            "p50" | "median" => Self::P50,
            "p99" => Self::P99,
            "max" => Self::Max,
            "bytes" => Self::Bytes,
            "errors" | "err" => Self::Errors,
            "name" => Self::Name,
            _ => {
                return Err(format!(
                    "unknown sort key '{s}' (use count, rate, total, avg, p50, p99, max, bytes, errors or name)"
                ))
            }
        })
    }
}

/// The aggregation behind a table.
#[derive(Debug)]
pub struct Top {
    grouper: Grouper,
    rows: Vec<TopRow>,
    first_ts: Option<u64>,
    last_end: u64,
}

/// Percentiles shown per row.
const TOP_PCT: [f64; 2] = [50.0, 99.0];

impl Top {
    /// An empty table grouped by `by`.
    pub fn new(by: GroupBy) -> Self {
        Top { grouper: Grouper::new(by), rows: Vec::new(), first_ts: None, last_end: 0 }
    }

    /// The grouping.
    pub fn by(&self) -> GroupBy {
        self.grouper.by()
    }

    /// Adds event `i` (process events are ignored).
    #[inline]
    pub fn add(&mut self, b: &EventBatch, i: usize, h: &TraceHeader) {
        let kind = b.kind[i];
        if kind == EventKind::Proc as u8 {
            return;
        }
        let g = self.grouper.group(b, i, h);
        if g >= self.rows.len() {
            self.rows.resize_with(g + 1, TopRow::default);
            self.rows[g].name = self.grouper.names()[g].clone();
        }
        let r = &mut self.rows[g];
        let lat = b.lat[i];
        r.count += 1;
        r.total_ns += u128::from(lat);
        r.lat.record(lat);
        if kind == EventKind::Block as u8 {
            r.bytes += b.bytes[i];
        } else {
            r.bytes += moved_bytes(b, i);
            if (-4095..0).contains(&b.ret[i]) {
                r.errors += 1;
            }
        }
        let ts = b.ts[i];
        self.first_ts = Some(self.first_ts.map_or(ts, |f| f.min(ts)));
        self.last_end = self.last_end.max(b.end(i));
    }

    /// Adds the events of `kind` among the chunk's rows.
    pub fn add_chunk(&mut self, c: Chunk<'_>, kind: EventKind, h: &TraceHeader) {
        let k = kind as u8;
        for &i in c.rows {
            if c.batch.kind[i as usize] == k {
                self.add(c.batch, i as usize, h);
            }
        }
    }

    /// Forgets the counts (live mode: one table per interval), keeping group names.
    pub fn reset(&mut self) {
        for r in &mut self.rows {
            let name = std::mem::take(&mut r.name);
            *r = TopRow { name, ..Default::default() };
        }
        self.first_ts = None;
        self.last_end = 0;
    }

    /// Seconds between the first event's start and the last event's end (at least 1 ns).
    pub fn span_secs(&self) -> f64 {
        match self.first_ts {
            Some(f) => (self.last_end.saturating_sub(f)).max(1) as f64 / 1e9,
            None => 0.0,
        }
    }

    /// Events in all groups.
    pub fn total_count(&self) -> u64 {
        self.rows.iter().map(|r| r.count).sum()
    }

    /// The non-empty rows sorted by `key`, at most `n`.
    pub fn sorted(&self, key: SortKey, n: usize) -> Vec<(&TopRow, [Option<u64>; 2])> {
        let mut v: Vec<(&TopRow, [Option<u64>; 2])> = self
            .rows
            .iter()
            .filter(|r| r.count > 0)
            .map(|r| {
                let p = r.lat.percentiles(&TOP_PCT);
                (r, [p[0], p[1]])
            })
            .collect();
        let k = |x: &(&TopRow, [Option<u64>; 2])| -> f64 {
            let (r, p) = x;
            match key {
                SortKey::Count | SortKey::Rate => r.count as f64,
                SortKey::Total => r.total_ns as f64,
                SortKey::Avg => r.mean_ns(),
                SortKey::P50 => p[0].unwrap_or(0) as f64,
                SortKey::P99 => p[1].unwrap_or(0) as f64,
                SortKey::Max => r.lat.max().unwrap_or(0) as f64,
                SortKey::Bytes => r.bytes as f64,
                SortKey::Errors => r.errors as f64,
                SortKey::Name => 0.0,
            }
        };
        if key == SortKey::Name {
            v.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        } else {
            v.sort_by(|a, b| k(b).total_cmp(&k(a)).then_with(|| a.0.name.cmp(&b.0.name)));
        }
        v.truncate(n);
        v
    }

    /// The table as text; `secs` is the time the rates are over.
    pub fn render_text(&self, key: SortKey, n: usize, secs: f64) -> String {
        let rows = self.sorted(key, n);
        let name_w = rows.iter().map(|(r, _)| r.name.chars().count()).max().unwrap_or(4).clamp(8, 48);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<name_w$} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>7}",
            self.by().heading(),
            "COUNT",
            "RATE/s",
            "TOTAL",
            "AVG",
            "P50",
            "P99",
            "MAX",
            "BYTES",
            "ERRORS"
        );
        for (r, p) in &rows {
            let rate = if secs > 0.0 { r.count as f64 / secs } else { 0.0 };
            let _ = writeln!(
                s,
                "{:<name_w$} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>7}",
                shorten(&r.name, name_w),
                r.count,
                fmt_count((rate * 10.0).round() / 10.0),
                fmt_ns_f(r.total_ns as f64),
                fmt_ns_f(r.mean_ns()),
                p[0].map(fmt_ns).unwrap_or_else(|| "-".into()),
                p[1].map(fmt_ns).unwrap_or_else(|| "-".into()),
                r.lat.max().map(fmt_ns).unwrap_or_else(|| "-".into()),
                fmt_bytes(r.bytes),
                r.errors
            );
        }
        let shown = rows.len();
        let groups = self.rows.iter().filter(|r| r.count > 0).count();
        if groups > shown {
            let _ = writeln!(s, "({} more {} groups; -n to show more)", groups - shown, self.by().name());
        }
        s
    }

    /// The table as JSON.
    pub fn to_json(&self, key: SortKey, n: usize, secs: f64) -> Value {
        let rows: Vec<Value> = self
            .sorted(key, n)
            .iter()
            .map(|(r, p)| {
                json!({
                    "name": r.name,
                    "count": r.count,
                    "rate_per_s": if secs > 0.0 { r.count as f64 / secs } else { 0.0 },
                    "total_ns": r.total_ns as f64,
                    "avg_ns": r.mean_ns(),
                    "p50_ns": p[0],
                    "p99_ns": p[1],
                    "max_ns": r.lat.max(),
                    "bytes": r.bytes,
                    "errors": r.errors,
                })
            })
            .collect();
        json!({
            "by": self.by().name(),
            "seconds": secs,
            "events": self.total_count(),
            "groups": self.rows.iter().filter(|r| r.count > 0).count(),
            "rows": rows,
        })
    }
}

/// Cuts a long name to `w` characters, keeping its end (the file name of a path).
pub fn shorten(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        return s.to_string();
    }
    let tail: String = s.chars().skip(n - (w - 1)).collect();
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::Event;

    #[test]
    fn groups_sorted_and_limited() {
        let read = latscope_event::syscall_nr("read").unwrap();
        let open = latscope_event::syscall_nr("openat").unwrap();
        let mut b = EventBatch::with_capacity(8);
        for k in 0..10u64 {
            b.push(&Event {
                kind: 0,
                nr: read,
                ts: k * 100_000_000,
                lat: 1000 * (k + 1),
                ret: 100,
                comm: "a".into(),
                ..Default::default()
            });
        }
        b.push(&Event { kind: 0, nr: open, ts: 5, lat: 5_000_000, ret: -2, comm: "b".into(), ..Default::default() });
        b.push(&Event { kind: 1, nr: 0, ts: 6, lat: 300, bytes: 4096, comm: "a".into(), ..Default::default() });
        b.push(&Event { kind: 2, ts: 7, comm: "a".into(), ..Default::default() });
        let h = TraceHeader::default();
        let mut t = Top::new(GroupBy::Syscall);
        for i in 0..b.len() {
            t.add(&b, i, &h);
        }
        assert_eq!(t.total_count(), 12);
        let rows = t.sorted(SortKey::Total, 10);
        assert_eq!(rows[0].0.name, "openat");
        assert_eq!(rows[0].0.errors, 1);
        assert_eq!(rows[1].0.name, "read");
        assert_eq!(rows[1].0.count, 10);
        assert_eq!(rows[1].0.bytes, 1000);
        assert_eq!(rows[1].1, [Some(5000), Some(10_000)]);
        assert_eq!(rows[1].0.total_ns, 55_000);
        let rows = t.sorted(SortKey::Count, 1);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].0.name, "read");
        let txt = t.render_text(SortKey::Count, 2, t.span_secs());
        assert!(txt.starts_with("SYSCALL"), "{txt}");
        assert!(txt.contains("(1 more syscall groups"), "{txt}");
        let j = t.to_json(SortKey::Bytes, 10, 1.0);
        assert_eq!(j["rows"][0]["name"], "blk:read");
        assert_eq!(j["rows"][0]["bytes"], 4096);
        t.reset();
        assert_eq!(t.total_count(), 0);
        assert!(SortKey::parse("nope").is_err());
        assert_eq!(shorten("/very/long/path/file.txt", 10), "…/file.txt");
    }
}

//! Drill-down tables: per process, syscall, file, directory, disk, operation or client, the count,
//! rate, total and percentile latency and bytes, sorted and limited — the "by client, then by
//! operation, then by file" analysis of storage analytics, from a trace or live.

use crate::group::{GroupBy, Grouper};
use crate::heatmap::moved_bytes;
use crate::latagg::LatAgg;
use crate::waits::{Counted, LeftOut};
use latscope_event::source::Chunk;
use latscope_event::units::{fmt_bytes, fmt_count, fmt_ns, fmt_ns_f};
use latscope_event::{EventBatch, EventKind, Span, TraceHeader};
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
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SortKey {
    /// Events.
    Count,
    /// Events per second (same order as count).
    Rate,
    /// Total latency.
    Total,
    /// Mean latency.
    Avg,
    /// A percentile of the latency (`p50`, `p99`, `p99.9`).
    Pct(f64),
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
            "median" => Self::Pct(50.0),
            p if p.starts_with('p') && p[1..].parse::<f64>().is_ok_and(|q| q > 0.0 && q <= 100.0) => {
                Self::Pct(p[1..].parse().unwrap_or(50.0))
            }
            "max" => Self::Max,
            "bytes" => Self::Bytes,
            "errors" | "err" => Self::Errors,
            "name" => Self::Name,
            _ => {
                return Err(format!(
                    "unknown sort key '{s}' (use count, rate, total, avg, a percentile such as p50 or p99.9, max, \
                     bytes, errors or name)"
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
    pcts: Vec<f64>,
    /// What the table counts ([`crate::waits`]): idle waits left out unless asked for.
    counted: Counted,
    /// The idle waits left out, by group (shown only when nothing else matched).
    wait_rows: Vec<TopRow>,
}

/// Percentiles shown per row unless others are asked for.
pub const DEFAULT_PERCENTILES: [f64; 2] = [50.0, 99.0];

/// Parses a list of percentiles such as `50,90,99,99.9` (each above 0 and at most 100).
pub fn parse_percentiles(s: &str) -> Result<Vec<f64>, String> {
    let v: Vec<f64> = s
        .split(',')
        .map(|p| {
            let p = p.trim().trim_start_matches('p');
            match p.parse::<f64>() {
                Ok(q) if q > 0.0 && q <= 100.0 => Ok(q),
                _ => Err(format!("'{p}' is not a percentile (a number above 0 and at most 100, e.g. 99.9)")),
            }
        })
        .collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err("no percentile given (e.g. 50,90,99,99.9)".into());
    }
    Ok(v)
}

/// The name of a percentile: `p50`, `p99.9`.
pub fn pct_name(q: f64) -> String {
    format!("p{}", crate::svg::fmt_num(q))
}

impl Top {
    /// An empty table grouped by `by`.
    pub fn new(by: GroupBy) -> Self {
        Top {
            grouper: Grouper::new(by),
            rows: Vec::new(),
            first_ts: None,
            last_end: 0,
            pcts: DEFAULT_PERCENTILES.to_vec(),
            counted: Counted::new(false),
            wait_rows: Vec::new(),
        }
    }

    /// Ranks blocking waits ([`crate::waits`]) with the work (by default they are left out, and
    /// the table says so).
    pub fn with_waits(mut self, yes: bool) -> Self {
        self.counted = Counted::new(yes);
        self
    }

    /// The idle waits left out.
    pub fn left_out(&self) -> &LeftOut {
        self.counted.left_out()
    }

    /// The header line: what the table counted and left out (`65792 syscall events (1444 idle
    /// waits left out)`), for the events of `kind` it was given.
    pub fn headline(&self, kind: EventKind) -> String {
        if self.showing_waits() {
            return format!("{} syscall events, all idle waits (nothing else matched)", self.total_count());
        }
        self.counted.headline(self.total_count(), kind)
    }

    /// Whether the rows shown are the blocking waits, because nothing else matched (a filter that
    /// asks for them: `evt.type = futex`).
    pub fn showing_waits(&self) -> bool {
        !self.rows.iter().any(|r| r.count > 0) && self.wait_rows.iter().any(|r| r.count > 0)
    }

    fn shown(&self) -> &[TopRow] {
        if self.showing_waits() {
            &self.wait_rows
        } else {
            &self.rows
        }
    }

    /// What was left out and how to include it, if anything: the line under the table.
    pub fn waits_note(&self) -> Option<String> {
        self.waits_note_with(&format!("{} includes them", crate::waits::WAITS_FLAG))
    }

    /// [`Top::waits_note`] with another way to include the waits (`how`).
    pub fn waits_note_with(&self, how: &str) -> Option<String> {
        if self.showing_waits() {
            return Some(format!(
                "only idle waits matched: shown ({} of time the callers chose to wait)",
                fmt_ns_f(self.left_out().total_ns() as f64)
            ));
        }
        self.left_out().note_with(how)
    }

    /// Shows these percentiles (default p50 and p99).
    pub fn with_percentiles(mut self, pcts: Vec<f64>) -> Self {
        if !pcts.is_empty() {
            self.pcts = pcts;
        }
        self
    }

    /// The grouping.
    pub fn by(&self) -> GroupBy {
        self.grouper.by()
    }

    /// Adds event `i` (process events are ignored); returns its group, `None` for a blocking
    /// wait left out (or a process event).
    #[inline]
    pub fn add(&mut self, b: &EventBatch, i: usize, h: &TraceHeader) -> Option<usize> {
        let kind = b.kind[i];
        if kind == EventKind::Proc as u8 {
            return None;
        }
        let g = self.grouper.group(b, i, h);
        let wait = !self.counted.counts(b, i);
        let rows = if wait { &mut self.wait_rows } else { &mut self.rows };
        if g >= rows.len() {
            let names = self.grouper.names();
            let from = rows.len();
            rows.resize_with(g + 1, TopRow::default);
            for (k, r) in rows.iter_mut().enumerate().skip(from) {
                r.name = names[k].clone();
            }
        }
        let r = &mut rows[g];
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
        (!wait).then_some(g)
    }

    /// Adds the events of `kind` among the chunk's rows.
    pub fn add_chunk(&mut self, c: Chunk<'_>, kind: EventKind, h: &TraceHeader) {
        let k = kind as u8;
        for &i in c.rows {
            if c.batch.kind[i as usize] == k {
                let _ = self.add(c.batch, i as usize, h);
            }
        }
    }

    /// Forgets the counts (live mode: one table per interval), keeping group names.
    pub fn reset(&mut self) {
        for r in self.rows.iter_mut().chain(&mut self.wait_rows) {
            let name = std::mem::take(&mut r.name);
            *r = TopRow { name, ..Default::default() };
        }
        self.counted.clear();
        self.first_ts = None;
        self.last_end = 0;
    }

    /// The non-empty rows shown, with their group numbers (as [`Top::add`] returns them).
    pub fn rows(&self) -> impl Iterator<Item = (usize, &TopRow)> {
        self.shown().iter().enumerate().filter(|(_, r)| r.count > 0)
    }

    /// The events' own span, from the first start to the last end: the time covered by an
    /// input that does not say how long it was recorded (see [`latscope_event::span`]).
    pub fn span(&self) -> Option<Span> {
        self.first_ts.map(|f| Span::new(f, self.last_end.max(f.saturating_add(1))))
    }

    /// Events in all groups shown (blocking waits left out are not counted).
    pub fn total_count(&self) -> u64 {
        self.shown().iter().map(|r| r.count).sum()
    }

    /// The percentile columns of a table sorted by `key`: those asked for, and the one sorted by
    /// when it is not among them (a table is never sorted by a column it does not show), in
    /// ascending order.
    pub fn percentile_columns(&self, key: SortKey) -> Vec<f64> {
        let mut v = self.pcts.clone();
        if let SortKey::Pct(q) = key {
            if !v.contains(&q) {
                v.push(q);
                v.sort_by(f64::total_cmp);
            }
        }
        v
    }

    /// The non-empty rows sorted by `key`, at most `n`, each with its percentiles (those of
    /// [`Top::percentile_columns`], in order).
    pub fn sorted(&self, key: SortKey, n: usize) -> Vec<(&TopRow, Vec<Option<u64>>)> {
        let pcts = self.percentile_columns(key);
        let mut v: Vec<(&TopRow, Vec<Option<u64>>, f64)> = self
            .shown()
            .iter()
            .filter(|r| r.count > 0)
            .map(|r| {
                let p = r.lat.percentiles(&pcts);
                let k = match key {
                    SortKey::Count | SortKey::Rate => r.count as f64,
                    SortKey::Total => r.total_ns as f64,
                    SortKey::Avg => r.mean_ns(),
                    SortKey::Pct(q) => r.lat.percentiles(&[q])[0].unwrap_or(0) as f64,
                    SortKey::Max => r.lat.max().unwrap_or(0) as f64,
                    SortKey::Bytes => r.bytes as f64,
                    SortKey::Errors => r.errors as f64,
                    SortKey::Name => 0.0,
                };
                (r, p, k)
            })
            .collect();
        if key == SortKey::Name {
            v.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        } else {
            v.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.name.cmp(&b.0.name)));
        }
        v.truncate(n);
        v.into_iter().map(|(r, p, _)| (r, p)).collect()
    }

    /// The table as text, in columns as wide as their widest cell; `secs` is the time the rates
    /// are over. Names (escaped, [`crate::text::clean`]) longer than 48 characters keep their end.
    pub fn render_text(&self, key: SortKey, n: usize, secs: f64) -> String {
        let rows = self.sorted(key, n);
        let mut head: Vec<String> =
            vec![self.by().heading().into(), "COUNT".into(), "RATE/s".into(), "TOTAL".into(), "AVG".into()];
        head.extend(self.percentile_columns(key).iter().map(|&q| pct_name(q).to_uppercase()));
        head.extend(["MAX".into(), "BYTES".into(), "ERRORS".into()]);
        let dash = || "-".to_string();
        let mut cells = vec![head];
        for (r, p) in &rows {
            let rate = if secs > 0.0 { r.count as f64 / secs } else { 0.0 };
            let mut line = vec![
                shorten(&crate::text::clean(&r.name), 48),
                r.count.to_string(),
                fmt_count((rate * 10.0).round() / 10.0),
                fmt_ns_f(r.total_ns as f64),
                fmt_ns_f(r.mean_ns()),
            ];
            line.extend(p.iter().map(|v| v.map(fmt_ns).unwrap_or_else(dash)));
            line.extend([r.lat.max().map(fmt_ns).unwrap_or_else(dash), fmt_bytes(r.bytes), r.errors.to_string()]);
            cells.push(line);
        }
        let mut right = vec![true; cells[0].len()];
        right[0] = false;
        let mut s = crate::text::table(&cells, &right, 0, 2);
        let shown = rows.len();
        let groups = self.shown().iter().filter(|r| r.count > 0).count();
        if groups > shown {
            let _ = writeln!(s, "({} more {} groups; -n to show more)", groups - shown, self.by().name());
        }
        if let Some(n) = self.waits_note() {
            let _ = writeln!(s, "({n})");
        }
        s
    }

    /// The table as JSON: per row the count, rate, total, mean, each percentile asked for
    /// (`p50_ns`, `p99.9_ns`), max, bytes and errors.
    pub fn to_json(&self, key: SortKey, n: usize, secs: f64) -> Value {
        let rows: Vec<Value> = self
            .sorted(key, n)
            .iter()
            .map(|(r, p)| {
                let mut row = json!({
                    "name": r.name,
                    "count": r.count,
                    "rate_per_s": if secs > 0.0 { r.count as f64 / secs } else { 0.0 },
                    "total_ns": r.total_ns as f64,
                    "avg_ns": r.mean_ns(),
                    "max_ns": r.lat.max(),
                    "bytes": r.bytes,
                    "errors": r.errors,
                });
                for (q, v) in self.percentile_columns(key).iter().zip(p) {
                    row[format!("{}_ns", pct_name(*q))] = json!(v);
                }
                row
            })
            .collect();
        json!({
            "by": self.by().name(),
            "seconds": secs,
            "events": self.total_count(),
            "groups": self.shown().iter().filter(|r| r.count > 0).count(),
            "percentiles": self.percentile_columns(key),
            "rows": rows,
            "counted": self.counted.to_json(),
            "waits_left_out": if self.counted.with_waits() || self.showing_waits() { Value::Null } else { self.left_out().to_json() },
            "wait_kinds": self.left_out().kinds_json(),
            "note": self.waits_note(),
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
            let _ = t.add(&b, i, &h);
        }
        assert_eq!(t.total_count(), 12);
        let rows = t.sorted(SortKey::Total, 10);
        assert_eq!(rows[0].0.name, "openat");
        assert_eq!(rows[0].0.errors, 1);
        assert_eq!(rows[1].0.name, "read");
        assert_eq!(rows[1].0.count, 10);
        assert_eq!(rows[1].0.bytes, 1000);
        // p50 is the histogram's: the top of the bucket holding 5000 (5000 ..= 5023).
        assert_eq!(rows[1].1, [Some(5023), Some(10_000)]);

        assert_eq!(rows[1].0.total_ns, 55_000);
        let rows = t.sorted(SortKey::Count, 1);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].0.name, "read");
        let txt = t.render_text(SortKey::Count, 2, t.span().unwrap().secs());
        assert!(txt.starts_with("SYSCALL"), "{txt}");
        assert!(txt.contains("(1 more syscall groups"), "{txt}");
        let j = t.to_json(SortKey::Bytes, 10, 1.0);
        assert_eq!(j["rows"][0]["name"], "block_read");
        assert_eq!(j["rows"][0]["bytes"], 4096);
        t.reset();
        assert_eq!(t.total_count(), 0);
        assert!(SortKey::parse("nope").is_err());
        assert_eq!(SortKey::parse("p99.9"), Ok(SortKey::Pct(99.9)));
        assert!(SortKey::parse("p0").is_err() && SortKey::parse("p101").is_err());
        // Other percentiles, in columns as wide as their widest cell.
        let mut t = Top::new(GroupBy::Syscall).with_percentiles(parse_percentiles("50,90,99,99.9").unwrap());
        for i in 0..b.len() {
            let _ = t.add(&b, i, &h);
        }
        let txt = t.render_text(SortKey::Pct(90.0), 10, 1.0);
        let lines: Vec<&str> = txt.lines().collect();
        assert!(lines[0].contains("P50") && lines[0].contains("P90") && lines[0].contains("P99.9"), "{txt}");
        // Every line is as long as the header, right-aligned columns end where their heading ends.
        let end = |l: &str, w: &str| l.find(w).unwrap() + w.len();
        let max_col = end(lines[0], "MAX");
        for l in &lines[1..4] {
            assert!(
                l[..max_col].ends_with("us") || l[..max_col].ends_with("ms") || l[..max_col].ends_with("ns"),
                "{txt}"
            );
        }
        let j = t.to_json(SortKey::Count, 10, 1.0);
        assert_eq!(j["rows"][0]["p99.9_ns"], 10_000);
        assert_eq!(j["rows"][0]["p90_ns"], 9_023);
        assert!(parse_percentiles("50,abc").is_err() && parse_percentiles("0").is_err());
        assert_eq!(shorten("/very/long/path/file.txt", 10), "…/file.txt");
    }

    #[test]
    fn a_table_sorted_by_a_percentile_shows_that_percentile() {
        let read = latscope_event::syscall_nr("read").unwrap();
        let mut b = EventBatch::with_capacity(8);
        for (k, comm) in ["a", "a", "b"].iter().enumerate() {
            b.push(&Event {
                kind: 0,
                nr: read,
                ts: k as u64,
                lat: 1000 * (k as u64 + 1),
                comm: (*comm).into(),
                ..Default::default()
            });
        }
        let h = TraceHeader::default();
        let mut t = Top::new(GroupBy::Proc);
        for i in 0..b.len() {
            t.add(&b, i, &h);
        }
        let key = SortKey::parse("p99.9").unwrap();
        assert_eq!(t.percentile_columns(key), [50.0, 99.0, 99.9]);
        let txt = t.render_text(key, 10, 1.0);
        assert!(txt.lines().next().unwrap().contains("P99.9"), "{txt}");
        assert_eq!(t.to_json(key, 10, 1.0)["rows"][0]["p99.9_ns"], 3000);
        assert_eq!(t.percentile_columns(SortKey::Pct(99.0)), [50.0, 99.0]);
    }
}

//! The spectrogram's data: one row per interval, each with a latency histogram per group.
//!
//! Rows are kept as counts per log-linear bucket ([`Buckets`]), independent of any screen, and
//! are turned into columns only when drawn ([`Spectrogram::columns`]). Every interval between the
//! first and the last has a row, empty or not: gaps in the activity show as empty rows.

use super::scale::{Axis, Buckets, ColumnMap};
use std::collections::{BTreeMap, VecDeque};

/// The sparse histogram of one group in one row: `(bucket, count)` sorted by bucket.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hist {
    /// The bucket scheme of `cells`.
    pub buckets: Option<Buckets>,
    /// Non-zero buckets, sorted.
    pub cells: Vec<(u16, u32)>,
}

impl Hist {
    /// Build from dense counts (index = bucket).
    pub fn from_dense<T: Copy + Into<u64>>(buckets: Buckets, counts: &[T]) -> Hist {
        let cells = counts
            .iter()
            .enumerate()
            .filter_map(|(i, &c)| {
                let c: u64 = c.into();
                (c > 0).then(|| (i.min(u16::MAX as usize) as u16, c.min(u32::MAX as u64) as u32))
            })
            .collect();
        Hist { buckets: Some(buckets), cells }
    }

    /// Total count.
    pub fn total(&self) -> u64 {
        self.cells.iter().map(|&(_, c)| c as u64).sum()
    }

    /// Count of bucket `b`.
    pub fn get(&self, b: u16) -> u32 {
        self.cells.binary_search_by_key(&b, |&(k, _)| k).map_or(0, |i| self.cells[i].1)
    }

    /// Add `n` to bucket `b` (the slow path, for events that arrive after their row was sealed).
    pub fn add(&mut self, b: u16, n: u32) {
        match self.cells.binary_search_by_key(&b, |&(k, _)| k) {
            Ok(i) => self.cells[i].1 = self.cells[i].1.saturating_add(n),
            Err(i) => self.cells.insert(i, (b, n)),
        }
    }
}

/// One interval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    /// Histograms by group id, sorted by group (a group may appear once per bucket scheme).
    pub groups: Vec<(u32, Hist)>,
}

impl Row {
    /// Events in the row (all groups).
    pub fn total(&self) -> u64 {
        self.groups.iter().map(|(_, h)| h.total()).sum()
    }
    /// Events of group `g`.
    pub fn group_total(&self, g: u32) -> u64 {
        self.groups.iter().filter(|(k, _)| *k == g).map(|(_, h)| h.total()).sum()
    }
    /// True when no event fell in the interval.
    pub fn is_empty(&self) -> bool {
        self.groups.iter().all(|(_, h)| h.cells.is_empty())
    }
    fn hist_mut(&mut self, g: u32, buckets: Buckets) -> &mut Hist {
        let pos = self.groups.iter().position(|(k, h)| *k == g && h.buckets == Some(buckets));
        match pos {
            Some(i) => &mut self.groups[i].1,
            None => {
                let at = self.groups.partition_point(|(k, _)| *k <= g);
                self.groups.insert(at, (g, Hist { buckets: Some(buckets), cells: Vec::new() }));
                &mut self.groups[at].1
            }
        }
    }
}

/// A row still receiving events: dense counts per group.
#[derive(Debug, Clone)]
struct OpenRow {
    index: u64,
    groups: Vec<(u32, Vec<u32>)>,
}

/// The order in which groups are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupOrder {
    /// By group id (fixed sets: fd classes, disks).
    ById,
    /// Busiest first (open sets: processes, syscalls).
    ByTotal,
}

/// Rows of latency histograms, one per interval of `interval_ns` starting at `origin_ns`.
#[derive(Debug, Clone)]
pub struct Spectrogram {
    interval_ns: u64,
    origin_ns: u64,
    /// Index of `rows[0]`.
    first: u64,
    /// Sealed rows `first..sealed`.
    rows: VecDeque<Row>,
    max_rows: usize,
    open: Vec<OpenRow>,
    // Fast path: the (open row, group) the last event went to, and that row's end-time range.
    cur_lo: u64,
    cur_hi: u64,
    cur_group: u32,
    cur_open: usize,
    cur_slot: usize,
    names: BTreeMap<u32, String>,
    order: GroupOrder,
    totals: BTreeMap<u32, u64>,
    /// Events counted (including late ones).
    pub events: u64,
    /// Events whose row had already been dropped from the history.
    pub too_late: u64,
}

const FINE: Buckets = Buckets::FINE;

impl Spectrogram {
    /// Rows of `interval_ns` (at least 1 µs) starting at `origin_ns`, keeping at most `max_rows`
    /// sealed rows (the oldest are dropped).
    pub fn new(interval_ns: u64, origin_ns: u64, max_rows: usize) -> Spectrogram {
        Spectrogram {
            interval_ns: interval_ns.max(1_000),
            origin_ns,
            first: 0,
            rows: VecDeque::new(),
            max_rows: max_rows.max(1),
            open: Vec::new(),
            cur_lo: 1,
            cur_hi: 0,
            cur_group: 0,
            cur_open: 0,
            cur_slot: 0,
            names: BTreeMap::new(),
            order: GroupOrder::ById,
            totals: BTreeMap::new(),
            events: 0,
            too_late: 0,
        }
    }

    /// Interval length in ns.
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }
    /// Start of row 0 (same clock as the event timestamps).
    pub fn origin_ns(&self) -> u64 {
        self.origin_ns
    }
    /// Index of the oldest row kept.
    pub fn first_index(&self) -> u64 {
        self.first
    }
    /// Index one past the last sealed row: rows `first_index()..sealed()` can be drawn.
    pub fn sealed(&self) -> u64 {
        self.first + self.rows.len() as u64
    }
    /// Sealed row `index`, if kept.
    pub fn row(&self, index: u64) -> Option<&Row> {
        index.checked_sub(self.first).and_then(|i| self.rows.get(i as usize))
    }
    /// The row an event ending at `end_ns` belongs to.
    #[inline]
    pub fn row_of(&self, end_ns: u64) -> u64 {
        end_ns.saturating_sub(self.origin_ns) / self.interval_ns
    }
    /// Start time of row `index`.
    pub fn row_start(&self, index: u64) -> u64 {
        self.origin_ns + index * self.interval_ns
    }

    /// Name group `g` (shown above its strip).
    pub fn set_group_name(&mut self, g: u32, name: impl Into<String>) {
        self.names.insert(g, name.into());
    }
    /// The name of group `g` (its number if unnamed).
    pub fn group_name(&self, g: u32) -> String {
        self.names.get(&g).cloned().unwrap_or_else(|| g.to_string())
    }
    /// How groups are ordered by [`Spectrogram::top_groups`].
    pub fn set_group_order(&mut self, order: GroupOrder) {
        self.order = order;
    }
    /// The groups to show, at most `n`: every group seen (named groups always, ordered by id),
    /// or the busiest (ordered by total) with [`GroupOrder::ByTotal`].
    pub fn top_groups(&self, n: usize) -> Vec<u32> {
        match self.order {
            GroupOrder::ById => {
                let mut v: Vec<u32> = self.names.keys().copied().collect();
                for g in self.totals.keys() {
                    if !v.contains(g) {
                        v.push(*g);
                    }
                }
                v.sort_unstable();
                v.truncate(n);
                v
            }
            GroupOrder::ByTotal => {
                let mut v: Vec<(u32, u64)> = self.totals.iter().map(|(&g, &t)| (g, t)).collect();
                v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                v.into_iter().take(n).map(|(g, _)| g).collect()
            }
        }
    }
    /// Number of distinct groups seen.
    pub fn group_count(&self) -> usize {
        let mut n = self.totals.len();
        n += self.names.keys().filter(|g| !self.totals.contains_key(g)).count();
        n
    }

    /// Count one event of latency `lat_ns` that ended at `end_ns`, in group `group`.
    /// Latency 0 (no measurement) is not counted.
    #[inline]
    pub fn add(&mut self, end_ns: u64, lat_ns: u64, group: u32) {
        if end_ns >= self.cur_lo && end_ns < self.cur_hi && group == self.cur_group {
            let b = FINE.index(lat_ns);
            // The slot exists: the fast path is only armed by `add_slow`, and any change
            // to `open` disarms it.
            self.open[self.cur_open].groups[self.cur_slot].1[b] += 1;
            return;
        }
        self.add_slow(end_ns, lat_ns, group);
    }

    /// Count a batch: `end[i]`, `lat[i]`, `group[i]` for the listed rows.
    pub fn add_many(&mut self, ends: impl Iterator<Item = (u64, u64, u32)>) {
        for (e, l, g) in ends {
            self.add(e, l, g);
        }
    }

    #[cold]
    fn add_slow(&mut self, end_ns: u64, lat_ns: u64, group: u32) {
        if lat_ns == 0 {
            return;
        }
        let index = self.row_of(end_ns);
        if index < self.sealed() {
            self.events += 1;
            *self.totals.entry(group).or_default() += 1;
            let b = FINE.index(lat_ns) as u16;
            match index.checked_sub(self.first) {
                Some(i) => self.rows[i as usize].hist_mut(group, FINE).add(b, 1),
                None => self.too_late += 1,
            }
            return;
        }
        let oi = match self.open.binary_search_by_key(&index, |r| r.index) {
            Ok(i) => i,
            Err(i) => {
                self.open.insert(i, OpenRow { index, groups: Vec::new() });
                i
            }
        };
        let row = &mut self.open[oi];
        let slot = match row.groups.iter().position(|(g, _)| *g == group) {
            Some(s) => s,
            None => {
                row.groups.push((group, vec![0u32; FINE.len()]));
                row.groups.len() - 1
            }
        };
        row.groups[slot].1[FINE.index(lat_ns)] += 1;
        // Events of open rows are counted into `events` and the group totals when the row is
        // sealed (the fast path does not count).
        self.cur_lo = self.origin_ns.saturating_add(index * self.interval_ns);
        self.cur_hi = self.cur_lo.saturating_add(self.interval_ns);
        if index == 0 {
            self.cur_lo = 0;
        }
        self.cur_group = group;
        self.cur_open = oi;
        self.cur_slot = slot;
        // Latency 0 may take the fast path: it lands in bucket 0, which sealing drops.
    }

    /// Add the counts of an in-kernel histogram (or any bucketed source) to row `index`,
    /// group `group`. Rows are sealed by [`Spectrogram::seal_until`] as usual.
    pub fn add_counts(&mut self, index: u64, group: u32, buckets: Buckets, counts: &[u64]) {
        let total: u64 = counts.iter().skip(1).sum();
        if total == 0 {
            return;
        }
        if index < self.sealed() {
            self.events += total;
            *self.totals.entry(group).or_default() += total;
            if let Some(i) = index.checked_sub(self.first) {
                let h = self.rows[i as usize].hist_mut(group, buckets);
                for (b, &c) in counts.iter().enumerate().skip(1) {
                    if c > 0 {
                        h.add(b as u16, c.min(u32::MAX as u64) as u32);
                    }
                }
            } else {
                self.too_late += total;
            }
            return;
        }
        // Not sealed yet: seal rows up to it as empty, then store it sealed right away.
        self.seal_until(index);
        let mut row = Row::default();
        let mut h = Hist::from_dense(buckets, counts);
        h.cells.retain(|&(b, _)| b != 0);
        row.groups.push((group, h));
        self.events += total;
        *self.totals.entry(group).or_default() += total;
        self.push_sealed(row);
        self.disarm();
    }

    /// Add a whole row of in-kernel histograms at once: `groups` are `(group, counts)`.
    pub fn add_row_counts(&mut self, index: u64, buckets: Buckets, groups: &[(u32, Vec<u64>)]) {
        self.seal_until(index);
        for (g, c) in groups {
            self.add_counts(index, *g, buckets, c);
        }
        self.seal_until(index + 1);
    }

    fn disarm(&mut self) {
        self.cur_lo = 1;
        self.cur_hi = 0;
    }

    fn push_sealed(&mut self, row: Row) {
        self.rows.push_back(row);
        while self.rows.len() > self.max_rows {
            self.rows.pop_front();
            self.first += 1;
        }
    }

    /// Seal every row before `index`: they will not receive events any more (late events are
    /// still added to them, slowly) and can be drawn. Empty intervals become empty rows.
    pub fn seal_until(&mut self, index: u64) {
        if index <= self.sealed() {
            return;
        }
        self.disarm();
        let n_open = self.open.partition_point(|r| r.index < index);
        let done: Vec<OpenRow> = self.open.drain(..n_open).collect();
        let mut done = done.into_iter().peekable();
        // Rows before `keep_from` would be dropped from the history as soon as they are added:
        // count their events and skip them (a long idle gap costs nothing).
        let mut next = self.sealed();
        let keep_from = index.saturating_sub(self.max_rows as u64);
        if keep_from > next {
            while let Some(o) = done.next_if(|r| r.index < keep_from) {
                for (g, dense) in o.groups {
                    let t: u64 = dense.iter().skip(1).map(|&c| c as u64).sum();
                    self.events += t;
                    *self.totals.entry(g).or_default() += t;
                }
            }
            self.rows.clear();
            self.first = keep_from;
            next = keep_from;
        }
        while next < index {
            let mut row = Row::default();
            if done.peek().is_some_and(|r| r.index == next) {
                let o = done.next().expect("peeked");
                for (g, dense) in o.groups {
                    let mut h = Hist::from_dense(FINE, &dense);
                    h.cells.retain(|&(b, _)| b != 0);
                    let t = h.total();
                    if t > 0 {
                        self.events += t;
                        *self.totals.entry(g).or_default() += t;
                        row.groups.push((g, h));
                    }
                }
                row.groups.sort_by_key(|(g, _)| *g);
            }
            self.push_sealed(row);
            next += 1;
        }
    }

    /// Counts per column of row `index` for `axis`: all groups (`group = None`) or one.
    /// Returns the counts and the number of events below and above the axis.
    pub fn columns(&self, index: u64, group: Option<u32>, maps: &mut MapCache) -> (Vec<u64>, u64, u64) {
        let mut out = vec![0u64; maps.axis.cols()];
        let (mut below, mut above) = (0, 0);
        let Some(row) = self.row(index) else { return (out, 0, 0) };
        for (g, h) in &row.groups {
            if group.is_some_and(|want| want != *g) {
                continue;
            }
            let Some(b) = h.buckets else { continue };
            let map = maps.get(b);
            for &(bucket, c) in &h.cells {
                match map.bucket_col.get(bucket as usize).copied().unwrap_or(ColumnMap::ABOVE) {
                    ColumnMap::BELOW => below += c as u64,
                    ColumnMap::ABOVE => above += c as u64,
                    col => out[col as usize] += c as u64,
                }
            }
            for (col, f) in map.fill.iter().enumerate() {
                if let Some(bucket) = f {
                    out[col] += h.get(*bucket as u16) as u64;
                }
            }
        }
        (out, below, above)
    }

    /// The latencies `[low, high)` of the sealed rows' events: the lowest bound of the fastest
    /// bucket and the upper bound of the slowest, or `None` when no row holds an event.
    pub fn lat_span(&self) -> Option<(u64, u64)> {
        let mut span: Option<(u64, u64)> = None;
        for row in &self.rows {
            for (_, h) in &row.groups {
                let (Some(b), Some(first), Some(last)) = (h.buckets, h.cells.first(), h.cells.last()) else {
                    continue;
                };
                let (lo, hi) = (b.bounds(first.0 as usize).0, b.bounds(last.0 as usize).1);
                span = Some(span.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))));
            }
        }
        span
    }

    /// Events in rows `from..to` (sealed rows only), all groups or one.
    pub fn events_in(&self, from: u64, to: u64, group: Option<u32>) -> u64 {
        (from..to)
            .filter_map(|i| self.row(i))
            .map(|r| match group {
                None => r.total(),
                Some(g) => r.group_total(g),
            })
            .sum()
    }
}

/// Column maps of the bucket schemes for one axis (recomputed when the axis changes).
#[derive(Debug, Clone)]
pub struct MapCache {
    /// The axis.
    pub axis: Axis,
    maps: Vec<ColumnMap>,
}

impl MapCache {
    /// Maps for `axis`, built on demand.
    pub fn new(axis: Axis) -> MapCache {
        MapCache { axis, maps: Vec::new() }
    }
    /// The map of scheme `b`.
    pub fn get(&mut self, b: Buckets) -> &ColumnMap {
        let i = match self.maps.iter().position(|m| m.buckets == b) {
            Some(i) => i,
            None => {
                self.maps.push(ColumnMap::new(&self.axis, b));
                self.maps.len() - 1
            }
        };
        &self.maps[i]
    }
    /// The latency range of columns `c0..=c1` for scheme `b`.
    pub fn lat_range(&mut self, b: Buckets, c0: usize, c1: usize) -> (u64, u64) {
        self.get(b).lat_range(c0, c1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn events_land_in_rows_by_end_time_and_gaps_are_rows() {
        let mut s = Spectrogram::new(500 * MS, 1_000 * MS, 100);
        // Row 0: two events; row 3: one; rows 1, 2 empty.
        s.add(1_000 * MS + 10, 150_000, 0);
        s.add(1_400 * MS, 150_000, 0);
        s.add(2_600 * MS, 10 * MS, 0);
        s.add(2_600 * MS, 0, 0); // latency 0: not counted
        assert_eq!(s.sealed(), 0);
        s.seal_until(4);
        assert_eq!(s.sealed(), 4);
        assert_eq!(s.row(0).unwrap().total(), 2);
        assert!(s.row(1).unwrap().is_empty() && s.row(2).unwrap().is_empty());
        assert_eq!(s.row(3).unwrap().total(), 1);
        assert_eq!(s.events, 3);
        // A late event for a sealed row is still counted there.
        s.add(1_200 * MS, 150_000, 0);
        assert_eq!(s.row(0).unwrap().total(), 3);
        let mut maps = MapCache::new(Axis::new(1, 10_000 * MS, 100));
        let (cols, below, above) = s.columns(0, None, &mut maps);
        assert_eq!((below, above), (0, 0));
        let c = maps.axis.col_of(150_000.0).unwrap();
        assert_eq!(cols[c], 3);
        assert_eq!(cols.iter().sum::<u64>(), 3);
    }

    #[test]
    fn groups_and_history_cap() {
        let mut s = Spectrogram::new(MS, 0, 3);
        s.set_group_name(2, "net");
        for i in 0..10u64 {
            s.add(i * MS + 1, 1000, (i % 2) as u32);
        }
        s.seal_until(10);
        assert_eq!((s.first_index(), s.sealed()), (7, 10));
        assert_eq!(s.top_groups(5), vec![0, 1, 2]);
        s.set_group_order(GroupOrder::ByTotal);
        s.add(9 * MS + 5, 1000, 1);
        assert_eq!(s.top_groups(1), vec![1]);
        assert_eq!(s.group_name(2), "net");
        assert_eq!(s.group_name(7), "7");
        assert_eq!(s.events_in(7, 10, Some(1)), 3);
        // Too late for the history.
        s.add(MS, 1000, 0);
        assert_eq!(s.too_late, 1);
    }

    #[test]
    fn kernel_counts_rows() {
        let mut s = Spectrogram::new(500 * MS, 0, 100);
        let mut c = vec![0u64; Buckets::KERNEL.len()];
        c[Buckets::KERNEL.index(10 * MS)] = 40;
        s.add_row_counts(2, Buckets::KERNEL, &[(1, c.clone())]);
        assert_eq!(s.sealed(), 3);
        assert_eq!(s.row(2).unwrap().group_total(1), 40);
        assert!(s.row(0).unwrap().is_empty());
        let mut maps = MapCache::new(Axis::new(1, 10_000 * MS, 100));
        let (cols, _, _) = s.columns(2, Some(1), &mut maps);
        let want = maps.axis.col_of(Buckets::KERNEL.representative(Buckets::KERNEL.index(10 * MS))).unwrap();
        assert_eq!(cols[want], 40);
    }

    #[test]
    fn long_gaps_do_not_allocate_forever() {
        let mut s = Spectrogram::new(MS, 0, 10);
        s.add(1, 5, 0);
        s.add(1_000_000 * MS, 5, 0);
        s.seal_until(1_000_001);
        assert_eq!(s.sealed(), 1_000_001);
        assert_eq!(s.row(1_000_000).unwrap().total(), 1);
        assert_eq!(s.first_index(), 1_000_001 - 10);
    }
}

//! Histograms per label value with a cap: past `max` values, latencies are counted under
//! [`OTHER`](crate::config::OTHER), so memory is bounded whatever the cardinality.

use latscope_hist::Histogram;
use std::collections::HashMap;

/// The cumulative histogram of one label value, and the one of the current interval.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// Since the series started.
    pub total: Histogram,
    /// Since the last [`CappedGroups::take_interval`] (only kept when intervals are wanted).
    pub interval: Option<Histogram>,
    /// What else is counted for the label value since the series started.
    pub extras: Extras,
}

/// Since the series started: failed syscalls, and block requests by operation.
#[derive(Debug, Clone, Default)]
pub(crate) struct Extras {
    /// Syscalls that returned a negative value.
    pub errors: u64,
    /// Block requests, one per operation of [`latscope_probe::AGG_OPS`] (empty for syscall series).
    pub ops: Vec<OpStats>,
}

/// Block requests of one operation.
#[derive(Debug, Clone, Default)]
pub(crate) struct OpStats {
    /// Queue time (insert to issue), ns.
    pub queue: Histogram,
    /// Bytes of each request.
    pub size: Histogram,
    /// Bytes moved.
    pub bytes: u64,
}

/// Histograms by label value, at most `max` values plus `other`.
#[derive(Debug, Clone)]
pub(crate) struct CappedGroups {
    max: usize,
    intervals: bool,
    /// Block requests: each value keeps [`OpStats`] per operation.
    block: bool,
    groups: HashMap<String, Group>,
    other: Option<Group>,
    folded: u64,
}

impl CappedGroups {
    /// At most `max` label values; `intervals` keeps per-interval histograms too (for Graphite);
    /// `block`: values of block requests, with queue times, sizes and bytes per operation.
    pub fn new(max: usize, intervals: bool, block: bool) -> Self {
        CappedGroups { max: max.max(1), intervals, block, groups: HashMap::new(), other: None, folded: 0 }
    }

    /// Keeps per-interval histograms from now on (or stops keeping them).
    pub fn set_intervals(&mut self, on: bool) {
        self.intervals = on;
        if !on {
            self.groups.values_mut().chain(self.other.as_mut()).for_each(|g| g.interval = None);
        }
    }

    /// Calls `f` on the histograms of `label` (or of `other` once the cap is reached and `label`
    /// is new). `n` is the number of events `f` records, for the folded count.
    #[cfg(test)]
    pub fn with(&mut self, label: &str, n: u64, f: impl FnMut(&mut Histogram)) {
        self.with_extras(label, n, f, |_| {});
    }

    /// [`CappedGroups::with`], and `e` on the value's [`Extras`].
    pub fn with_extras(&mut self, label: &str, n: u64, mut f: impl FnMut(&mut Histogram), e: impl FnOnce(&mut Extras)) {
        let (intervals, block) = (self.intervals, self.block);
        let fresh = || Group {
            total: Histogram::new(),
            interval: intervals.then(Histogram::new),
            extras: Extras {
                errors: 0,
                ops: if block { vec![OpStats::default(); latscope_probe::AGG_OPS.len()] } else { Vec::new() },
            },
        };
        let g = if let Some(g) = self.groups.get_mut(label) {
            g
        } else if label == crate::config::OTHER {
            // A value that is itself "other" (the fd class): shares the bucket, not folded.
            self.other.get_or_insert_with(fresh)
        } else if self.groups.len() < self.max {
            self.groups.entry(label.to_string()).or_insert_with(fresh)
        } else {
            self.folded += n;
            self.other.get_or_insert_with(fresh)
        };
        f(&mut g.total);
        e(&mut g.extras);
        if let Some(i) = &mut g.interval {
            f(i);
        } else if intervals {
            let mut h = Histogram::new();
            f(&mut h);
            g.interval = Some(h);
        }
    }

    /// Every label value and its histograms, `other` last.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Group)> {
        let mut v: Vec<(&str, &Group)> = self.groups.iter().map(|(k, g)| (k.as_str(), g)).collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v.into_iter().chain(self.other.as_ref().map(|g| (crate::config::OTHER, g)))
    }

    /// The interval histograms (label, histogram), each reset afterwards.
    pub fn take_interval(&mut self) -> Vec<(String, Histogram)> {
        let mut out = Vec::new();
        let named = self.groups.iter_mut().map(|(k, g)| (k.as_str(), g));
        for (k, g) in named.chain(self.other.as_mut().map(|g| (crate::config::OTHER, g))) {
            if let Some(h) = &mut g.interval {
                if !h.is_empty() {
                    out.push((k.to_string(), std::mem::take(h)));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Label values with a histogram, `other` included when it has one: at most `max + 1`.
    pub fn values(&self) -> usize {
        self.groups.len() + usize::from(self.other.is_some())
    }

    /// Events counted under `other` because the cap was reached.
    pub fn folded(&self) -> u64 {
        self.folded
    }

    /// Events counted, all values.
    #[cfg(test)]
    pub fn events(&self) -> u64 {
        self.groups.values().chain(self.other.as_ref()).map(|g| g.total.count()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_past_the_cap_fold_into_other() {
        let mut g = CappedGroups::new(3, true, false);
        for i in 0..10u64 {
            g.with(&format!("p{i}"), 2, |h| h.record_n(1000 * (i + 1), 2));
        }
        g.with("p0", 1, |h| h.record(5));
        g.with("other", 1, |h| h.record(5));
        assert_eq!(g.values(), 4, "other has a histogram");
        assert_eq!(g.folded(), 14);
        assert_eq!(g.events(), 22, "a value named other is counted, not folded");
        let labels: Vec<&str> = g.iter().map(|(k, _)| k).collect();
        assert_eq!(labels, ["p0", "p1", "p2", "other"]);
        assert_eq!(g.iter().last().unwrap().1.total.count(), 15);
        let iv = g.take_interval();
        assert_eq!(iv.iter().map(|(_, h)| h.count()).sum::<u64>(), 22);
        assert!(g.take_interval().is_empty(), "intervals restart empty");
        assert_eq!(g.events(), 22, "totals stay");
    }
}

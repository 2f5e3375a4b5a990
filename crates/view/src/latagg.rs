//! A latency distribution that costs little when it holds few values.
//!
//! Drill-down tables and per-interval charts keep one distribution per group or interval; most
//! groups (files, processes) see few events, and a full [`Histogram`] is 34 KiB. [`LatAgg`] keeps
//! up to [`LatAgg::EXACT_LIMIT`] values as they are and moves to a histogram beyond. Percentiles
//! follow one rule either way, the histogram's ([`latscope_hist::quantile_of_sorted`]): `top`,
//! `timeline` and `hist` give the same p50 for the same events.

use latscope_hist::Histogram;

/// Values kept exactly, or a histogram.
#[derive(Debug, Clone)]
pub enum LatAgg {
    /// Up to [`LatAgg::EXACT_LIMIT`] values.
    Few(Vec<u64>),
    /// Many values.
    Many(Box<Histogram>),
}

impl Default for LatAgg {
    fn default() -> Self {
        LatAgg::Few(Vec::new())
    }
}

impl LatAgg {
    /// Values kept before moving to a histogram.
    pub const EXACT_LIMIT: usize = 256;

    /// Records a value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        match self {
            LatAgg::Few(vs) => {
                if vs.len() < Self::EXACT_LIMIT {
                    vs.push(v);
                } else {
                    let mut h = Histogram::new();
                    h.extend(vs.iter().copied());
                    h.record(v);
                    *self = LatAgg::Many(Box::new(h));
                }
            }
            LatAgg::Many(h) => h.record(v),
        }
    }

    /// Records every value of `vs`: the same as [`LatAgg::record`] for each, faster for many
    /// (a histogram records them as a column).
    pub fn record_all(&mut self, vs: &[u64]) {
        if let LatAgg::Few(few) = self {
            let room = (Self::EXACT_LIMIT - few.len()).min(vs.len());
            few.extend_from_slice(&vs[..room]);
            match vs.get(room..) {
                Some(rest) if !rest.is_empty() => {
                    let mut h = Histogram::new();
                    h.record_slice(few);
                    h.record_slice(rest);
                    *self = LatAgg::Many(Box::new(h));
                }
                _ => {}
            }
            return;
        }
        if let LatAgg::Many(h) = self {
            h.record_slice(vs);
        }
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        match self {
            LatAgg::Few(v) => v.len() as u64,
            LatAgg::Many(h) => h.count(),
        }
    }

    /// Largest value.
    pub fn max(&self) -> Option<u64> {
        match self {
            LatAgg::Few(v) => v.iter().copied().max(),
            LatAgg::Many(h) => h.max(),
        }
    }

    /// Values at percentiles `ps` (e.g. `99.0`), by [`Histogram::value_at_quantile`]'s rule
    /// whether the values are kept or counted.
    pub fn percentiles(&self, ps: &[f64]) -> Vec<Option<u64>> {
        match self {
            LatAgg::Few(v) => {
                if v.is_empty() {
                    return vec![None; ps.len()];
                }
                let mut s = v.clone();
                s.sort_unstable();
                ps.iter().map(|p| latscope_hist::quantile_of_sorted(&s, p / 100.0)).collect()
            }
            LatAgg::Many(h) => h.percentiles(ps),
        }
    }

    /// The distribution as a histogram.
    pub fn to_histogram(&self) -> Histogram {
        match self {
            LatAgg::Few(v) => v.iter().copied().collect(),
            LatAgg::Many(h) => (**h).clone(),
        }
    }

    /// Adds `other`'s values.
    pub fn merge(&mut self, other: &LatAgg) {
        match other {
            LatAgg::Few(v) => v.iter().for_each(|&x| self.record(x)),
            LatAgg::Many(h) => {
                let mut mine = self.to_histogram();
                mine.merge(h);
                *self = LatAgg::Many(Box::new(mine));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_then_histogram() {
        let mut a = LatAgg::default();
        assert_eq!(a.percentiles(&[50.0]), vec![None]);
        for v in 1..=100u64 {
            a.record(v * 1000);
        }
        assert!(matches!(a, LatAgg::Few(_)));
        // The histogram's answers: the top of the bucket of the value of rank ceil(q n).
        let h = a.to_histogram();
        assert_eq!(a.percentiles(&[50.0, 99.0, 100.0]), h.percentiles(&[50.0, 99.0, 100.0]));
        assert_eq!(a.percentiles(&[50.0, 100.0]), vec![Some(50_175), Some(100_000)]);
        for v in 101..=1000u64 {
            a.record(v * 1000);
        }
        assert!(matches!(a, LatAgg::Many(_)));
        assert_eq!(a.count(), 1000);
        let p = a.percentiles(&[50.0])[0].unwrap();
        assert!((500_000..=500_000 + 500_000 / 128).contains(&p), "{p}");
        assert_eq!(a.max(), Some(1_000_000));
        // Recorded as a column, the same distribution, whether it stays exact or not.
        for n in [10u64, 256, 257, 1000] {
            let (mut one, mut all) = (LatAgg::default(), LatAgg::default());
            let vs: Vec<u64> = (1..=n).map(|v| v * 997 % 5000).collect();
            vs.iter().for_each(|&v| one.record(v));
            all.record_all(&vs[..3]);
            all.record_all(&vs[3..]);
            assert_eq!(one.count(), all.count());
            assert_eq!(one.to_histogram(), all.to_histogram(), "{n}");
            assert_eq!(matches!(one, LatAgg::Few(_)), matches!(all, LatAgg::Few(_)), "{n}");
        }
        let mut b = LatAgg::default();
        b.record(7);
        b.merge(&a);
        assert_eq!(b.count(), 1001);
    }
}

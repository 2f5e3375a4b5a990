//! [`Runner`]: runs probes continuously on one thread, hands out interval histograms (for a
//! store) and report points (for a live summary).

use crate::probe::{Probe, ProbeInfo};
use latscope_hist::Histogram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How a run goes.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOptions {
    /// Pause between samples of a probe without its own `every`; zero: back to back.
    pub every: Duration,
    /// Stop after this long (`None`: until stopped).
    pub duration: Option<Duration>,
    /// How often [`Event::Report`] comes (`None`: only at the end).
    pub report_every: Option<Duration>,
    /// How often [`Event::Interval`] comes; intervals are also cut at every UTC hour, so each
    /// lies within one hour.
    pub interval: Duration,
    /// Back-to-back probes run in batches of about this long, in turn.
    pub slice: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            every: Duration::ZERO,
            duration: None,
            report_every: Some(Duration::from_secs(1)),
            interval: Duration::from_secs(10),
            slice: Duration::from_millis(10),
        }
    }
}

/// A probe's state in a run.
#[derive(Clone, Debug)]
pub struct ProbeState {
    /// What it measures.
    pub info: ProbeInfo,
    /// Its pause between samples.
    pub every: Duration,
    /// Every value since the start.
    pub total: Histogram,
    /// Values since the previous report.
    pub recent: Histogram,
    /// Samples that completed but failed (commands that exited non-zero).
    pub failures: u64,
    /// Why the probe stopped, if it did.
    pub error: Option<String>,
}

/// What a run hands out as it goes.
#[derive(Debug)]
pub enum Event<'a> {
    /// The values of one interval, `deltas[i]` for probe `i`, measured between `start` and `end`
    /// (wall-clock time, both within one UTC hour except for the last sample batch).
    Interval {
        /// Wall-clock start.
        start: SystemTime,
        /// Wall-clock end.
        end: SystemTime,
        /// Per probe.
        deltas: &'a [Histogram],
    },
    /// Time for a summary (`last`: the run is over).
    Report {
        /// Since the start.
        elapsed: Duration,
        /// Per probe; `recent` is emptied after this event.
        probes: &'a [ProbeState],
        /// The final report.
        last: bool,
    },
}

/// Runs probes in turn on the calling thread.
pub struct Runner {
    probes: Vec<Box<dyn Probe>>,
    state: Vec<ProbeState>,
    opts: RunOptions,
}

impl Runner {
    /// A runner of `probes`, each with its own pause between samples or the run's default.
    pub fn new(probes: Vec<(Box<dyn Probe>, Option<Duration>)>, opts: RunOptions) -> Runner {
        let state = probes
            .iter()
            .map(|(p, every)| ProbeState {
                info: p.info().clone(),
                every: every.unwrap_or(opts.every),
                total: Histogram::new(),
                recent: Histogram::new(),
                failures: 0,
                error: None,
            })
            .collect();
        Runner { probes: probes.into_iter().map(|(p, _)| p).collect(), state, opts }
    }

    /// The probes' states.
    pub fn probes(&self) -> &[ProbeState] {
        &self.state
    }

    /// Runs until the duration is over, `stop` is set, or every probe has failed; calls `on` at
    /// each interval and report (and once more of each at the end). An error from `on` ends the
    /// run and is returned.
    pub fn run<E>(&mut self, stop: &AtomicBool, mut on: impl FnMut(Event<'_>) -> Result<(), E>) -> Result<(), E> {
        let n = self.probes.len();
        let start = Instant::now();
        let end = self.opts.duration.map(|d| start + d);
        let mut current: Vec<Histogram> = (0..n).map(|_| Histogram::new()).collect();
        let mut interval: Vec<Histogram> = current.clone();
        let mut interval_start = SystemTime::now();
        let mut next_interval = interval_end(Instant::now(), interval_start, self.opts.interval);
        let mut next_report = self.opts.report_every.map(|r| start + r);
        let mut due = vec![start; n];
        let mut batch = vec![1u64; n];
        loop {
            if stop.load(Ordering::Relaxed) || end.is_some_and(|e| Instant::now() >= e) {
                break;
            }
            for i in 0..n {
                let now = Instant::now();
                if self.state[i].error.is_some() || now < due[i] {
                    continue;
                }
                let paced = !self.state[i].every.is_zero();
                // A back-to-back batch ends by the next paced probe's slot, so that paced probes
                // keep their pace next to back-to-back ones.
                let next_paced = (0..n)
                    .filter(|&j| j != i && self.state[j].error.is_none() && !self.state[j].every.is_zero())
                    .map(|j| due[j])
                    .min();
                let budget =
                    next_paced.map_or(self.opts.slice, |d| d.saturating_duration_since(now).min(self.opts.slice));
                let want = if paced {
                    1
                } else {
                    let share = budget.as_secs_f64() / self.opts.slice.as_secs_f64().max(1e-9);
                    ((batch[i] as f64 * share) as u64).max(1)
                };
                if let Err(e) = self.probes[i].sample(&mut current[i], want) {
                    self.state[i].error = Some(e.to_string());
                }
                self.state[i].failures = self.probes[i].failures();
                let after = Instant::now();
                if paced {
                    due[i] += self.state[i].every;
                    if due[i] < after {
                        due[i] = after + self.state[i].every; // missed slots are skipped, not caught up
                    }
                } else {
                    batch[i] = next_batch(batch[i], want, after - now, self.opts.slice);
                    due[i] = after;
                }
            }
            let now = Instant::now();
            let interval_due = now >= next_interval;
            let report_due = next_report.is_some_and(|r| now >= r);
            if interval_due || report_due {
                self.fold(&mut current, &mut interval);
            }
            if interval_due {
                let end = SystemTime::now();
                on(Event::Interval { start: interval_start, end, deltas: &interval })?;
                interval.iter_mut().for_each(Histogram::reset);
                interval_start = end;
                next_interval = interval_end(now, end, self.opts.interval);
            }
            if report_due {
                on(Event::Report { elapsed: now - start, probes: &self.state, last: false })?;
                self.state.iter_mut().for_each(|s| s.recent.reset());
                let every = self.opts.report_every.unwrap_or_default();
                next_report = next_report.map(|r| if r + every > now { r + every } else { now + every });
            }
            if self.state.iter().all(|s| s.error.is_some()) {
                break;
            }
            // Sleep until the next thing to do, waking at least every 100 ms to notice `stop`.
            let live = (0..n).filter(|&i| self.state[i].error.is_none()).map(|i| due[i]);
            let next = live.chain([next_interval]).chain(next_report).chain(end).min().unwrap_or(now);
            let now = Instant::now();
            if next > now {
                std::thread::sleep((next - now).min(Duration::from_millis(100)));
            }
        }
        self.fold(&mut current, &mut interval);
        if interval.iter().any(|h| !h.is_empty()) {
            on(Event::Interval { start: interval_start, end: SystemTime::now(), deltas: &interval })?;
        }
        on(Event::Report { elapsed: start.elapsed(), probes: &self.state, last: true })
    }

    /// Moves the values recorded since the last fold into the totals, the report and the interval.
    fn fold(&mut self, current: &mut [Histogram], interval: &mut [Histogram]) {
        for ((c, s), i) in current.iter_mut().zip(&mut self.state).zip(interval) {
            if c.is_empty() {
                continue;
            }
            s.total.merge(c);
            s.recent.merge(c);
            i.merge(c);
            c.reset();
        }
    }
}

/// The batch that should take about `slice`, given that `n` samples took `took` (growing at most
/// fourfold from the previous batch `prev`, so that one fast batch does not make the next one very
/// long).
fn next_batch(prev: u64, n: u64, took: Duration, slice: Duration) -> u64 {
    let took = took.as_secs_f64().max(1e-9);
    let ideal = n as f64 * slice.as_secs_f64() / took;
    (ideal.min(prev as f64 * 4.0).max(1.0)) as u64
}

/// When the interval starting now ends: after `interval`, or at the next UTC hour if sooner.
fn interval_end(now: Instant, wall: SystemTime, interval: Duration) -> Instant {
    let secs = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
    let into_hour = Duration::new(secs.as_secs() % 3600, secs.subsec_nanos());
    let to_hour = Duration::from_secs(3600) - into_hour;
    now + interval.min(to_hour).max(Duration::from_millis(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{ProbeKind, ProbeSpec};

    #[test]
    fn batches_adapt_to_the_slice() {
        let ms = Duration::from_millis;
        assert_eq!(next_batch(1000, 1000, ms(5), ms(10)), 2000);
        assert_eq!(next_batch(1000, 1000, Duration::from_nanos(1), ms(10)), 4000);
        assert_eq!(next_batch(1000, 1000, Duration::from_secs(1), ms(10)), 10);
        assert_eq!(next_batch(1, 1, Duration::from_secs(5), ms(10)), 1);
        // A batch cut short by a paced probe's slot still tells the rate.
        assert_eq!(next_batch(1000, 100, ms(1), ms(10)), 1000);
    }

    #[test]
    fn intervals_end_at_the_hour() {
        let now = Instant::now();
        let wall = UNIX_EPOCH + Duration::from_secs(3600 * 1000 + 3595);
        assert_eq!(interval_end(now, wall, Duration::from_secs(10)) - now, Duration::from_secs(5));
        let wall = UNIX_EPOCH + Duration::from_secs(3600 * 1000 + 10);
        assert_eq!(interval_end(now, wall, Duration::from_secs(10)) - now, Duration::from_secs(10));
    }

    #[test]
    fn every_value_goes_to_exactly_one_interval_and_the_totals() {
        let spec = |k| ProbeSpec::new(k);
        let probes = vec![
            (spec(ProbeKind::MulAdd { repetitions: 1000 }).build(&mut |_| {}).unwrap(), None),
            (spec(ProbeKind::Sin { repetitions: 100 }).build(&mut |_| {}).unwrap(), Some(Duration::from_millis(2))),
        ];
        let opts = RunOptions {
            duration: Some(Duration::from_millis(300)),
            report_every: Some(Duration::from_millis(50)),
            interval: Duration::from_millis(20),
            ..RunOptions::default()
        };
        let mut r = Runner::new(probes, opts);
        let (mut in_intervals, mut in_reports, mut intervals) = ([0u64; 2], [0u64; 2], 0);
        let mut last_seen = false;
        r.run(&AtomicBool::new(false), |e| {
            match e {
                Event::Interval { start, end, deltas } => {
                    assert!(start <= end);
                    intervals += 1;
                    for (k, d) in deltas.iter().enumerate() {
                        in_intervals[k] += d.count();
                    }
                }
                Event::Report { probes, last, .. } => {
                    last_seen = last;
                    for (k, p) in probes.iter().enumerate() {
                        in_reports[k] += p.recent.count();
                    }
                }
            }
            Ok::<(), ()>(())
        })
        .unwrap();
        assert!(last_seen && intervals >= 2);
        for k in 0..2 {
            let total = r.probes()[k].total.count();
            assert!(total > 0);
            assert_eq!(in_intervals[k], total, "probe {k}");
            assert_eq!(in_reports[k], total, "probe {k}");
        }
        // The paced probe took one sample per slot at most.
        assert!(r.probes()[1].total.count() <= 300 / 2 + 1);
    }

    #[test]
    fn a_failing_probe_stops_alone_and_stop_ends_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 8192]).unwrap();
        let read = ProbeSpec::new(ProbeKind::Read {
            path: path.clone(),
            file_size: None,
            region: None,
            block_size: 4096,
            direct: false,
        });
        let probes = vec![
            (read.build(&mut |_| {}).unwrap(), None),
            (ProbeSpec::new(ProbeKind::MulAdd { repetitions: 100 }).build(&mut |_| {}).unwrap(), None),
        ];
        std::fs::write(&path, b"").unwrap(); // the file shrinks under the probe
        let stop = AtomicBool::new(false);
        let mut r =
            Runner::new(probes, RunOptions { report_every: Some(Duration::from_millis(10)), ..RunOptions::default() });
        let mut reports = 0;
        r.run(&stop, |e| {
            if let Event::Report { .. } = e {
                reports += 1;
                if reports == 3 {
                    stop.store(true, Ordering::Relaxed);
                }
            }
            Ok::<(), ()>(())
        })
        .unwrap();
        let e = r.probes()[0].error.as_deref().unwrap();
        assert!(e.contains("shrank"), "{e}");
        assert!(r.probes()[1].error.is_none() && r.probes()[1].total.count() > 0);
    }
}

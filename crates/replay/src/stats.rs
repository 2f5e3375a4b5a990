//! Statistics of a replay: what each worker counts without sharing anything, and the merged
//! report (text and JSON).

use crate::op::{Op, OpKind};
use crate::plan::Plan;
use latscope_event::units::{fmt_bytes, fmt_count, fmt_ns};
use latscope_hist::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Number of operation kinds (size of per-kind arrays).
pub(crate) const N_KINDS: usize = 55;

/// Width of a throughput window (ns): completions are counted per window for the noise
/// estimate of `compare`.
pub const WINDOW_NS: u64 = 10_000_000;

/// Most throughput windows a report holds.
const MAX_WINDOWS: usize = 1000;

/// Why an operation was skipped at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Skip {
    /// Its fd is not open in the replay (the open or dup diverged).
    NoFd = 0,
    /// Its mapping does not exist in the replay.
    NoMapping = 1,
    /// The run was stopped.
    Stopped = 2,
    /// It sets an extended attribute of a namespace that can grant privilege.
    Privileged = 3,
}

const SKIP_REASONS: [&str; 4] = [
    "its fd is not open in the replay (the open or dup that made it diverged)",
    "its mapping does not exist in the replay (the mmap diverged)",
    "the run was stopped (Ctrl-C)",
    "it sets an extended attribute whose namespace can grant privilege (trusted, security, system: \
     only with --xattr-namespaces; security.capability never)",
];

/// One worker's counts (no sharing, no locks; merged at the end).
pub(crate) struct Collector {
    pub performed: [u64; N_KINDS],
    pub implicit: [u64; N_KINDS],
    pub failed: [u64; N_KINDS],
    pub bytes: [u64; N_KINDS],
    pub skipped: [[u64; 4]; N_KINDS],
    pub refused: u64,
    pub lat: Vec<Option<Box<Histogram>>>,
    pub lateness: Option<Box<Histogram>>,
    pub divergences: BTreeMap<(u8, i64, i64), u64>,
    pub examples: Vec<Example>,
    pub windows: Vec<u64>,
    pub clones_copied: u64,
}

/// A divergence seen by a worker.
#[derive(Debug, Clone)]
pub(crate) struct Example {
    pub thread: u32,
    pub index: u32,
    pub op: Op,
    pub got: i64,
}

/// How many divergences a worker keeps as examples.
const EXAMPLES: usize = 10;

impl Collector {
    pub fn new(timed: bool) -> Collector {
        Collector {
            performed: [0; N_KINDS],
            implicit: [0; N_KINDS],
            failed: [0; N_KINDS],
            bytes: [0; N_KINDS],
            skipped: [[0; 4]; N_KINDS],
            refused: 0,
            lat: (0..N_KINDS).map(|_| None).collect(),
            lateness: timed.then(|| Box::new(Histogram::new())),
            divergences: BTreeMap::new(),
            examples: Vec::new(),
            windows: Vec::with_capacity(1024),
            clones_copied: 0,
        }
    }

    /// An operation done: its latency, result, bytes moved, the window it ended in.
    #[inline]
    pub fn done(&mut self, op: &Op, got: i64, lat_ns: u64, end_rel_ns: u64) {
        let k = op.kind as usize;
        if op.has(Op::IMPLICIT) {
            self.implicit[k] += 1;
        } else {
            self.performed[k] += 1;
        }
        if got < 0 {
            self.failed[k] += 1;
        } else if op.reads_data() || op.writes_data() || op.copies() {
            self.bytes[k] += got as u64;
        }
        match &mut self.lat[k] {
            Some(h) => h.record(lat_ns),
            slot => {
                let mut h = Box::new(Histogram::new());
                h.record(lat_ns);
                *slot = Some(h);
            }
        }
        let w = (end_rel_ns / WINDOW_NS) as usize;
        if w >= self.windows.len() {
            self.windows.resize(w + 1, 0);
        }
        self.windows[w] += 1;
    }

    pub fn skip(&mut self, op: &Op, why: Skip) {
        self.skipped[op.kind as usize][why as usize] += 1;
    }

    pub fn diverged(&mut self, thread: u32, index: u32, op: &Op, got: i64) {
        let class = |v: i64| if v < 0 { v } else { 0 };
        *self.divergences.entry((op.kind as u8, class(op.ret), class(got))).or_default() += 1;
        if self.examples.len() < EXAMPLES {
            self.examples.push(Example { thread, index, op: *op, got });
        }
    }
}

/// Statistics of one replay run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// The plan file (as given).
    pub plan: String,
    /// The plan's checksum.
    pub plan_id: String,
    /// Recorded operations in the plan.
    pub planned_ops: u64,
    /// Recorded events left out by prepare.
    pub dropped_at_prepare: u64,
    /// Recorded threads and workers.
    pub threads: u32,
    /// Worker threads.
    pub workers: u32,
    /// Speed factor (0: as fast as dependencies allow).
    pub speed: f64,
    /// Page cache dropped before the run.
    pub drop_caches: bool,
    /// Workers ran under SCHED_FIFO (`--realtime`).
    #[serde(default)]
    pub realtime: bool,
    /// The user the replay ran as.
    pub user: Option<String>,
    /// Stopped before the end (Ctrl-C).
    pub interrupted: bool,
    /// The kernel, the sandbox's file systems and the disks' queue settings.
    #[serde(default)]
    pub env: crate::env::RunEnv,
    /// Wall time of the replay (ns).
    pub wall_ns: u64,
    /// Recorded time of the replayed operations (ns).
    pub recorded_ns: u64,
    /// Recorded operations performed.
    pub ops: u64,
    /// Recorded operations per second of wall time.
    pub ops_per_sec: f64,
    /// Implicit operations performed (fork inheritance, exec and exit closes).
    pub implicit: u64,
    /// Operations skipped at run time.
    pub skipped: u64,
    /// Clones (FICLONE, FICLONERANGE) the recording made that the sandbox's file system could
    /// not make, done as copies of the same bytes.
    #[serde(default)]
    pub clones_copied: u64,
    /// Skipped, by reason.
    pub skip_reasons: BTreeMap<String, u64>,
    /// Operations refused because their path led out of the sandbox.
    pub refused: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Operations whose result differed from the recorded one.
    pub divergences: u64,
    /// Divergences by operation and outcome.
    pub divergence_kinds: Vec<DivergenceCount>,
    /// The first divergences (in recorded order).
    pub first_divergences: Vec<DivergenceExample>,
    /// Highest 1-minute load average seen during the run.
    pub max_loadavg: f64,
    /// Lateness of operations against their schedule (timed runs).
    pub lateness: Option<Lateness>,
    /// Per operation kind.
    pub by_kind: BTreeMap<String, KindStats>,
    /// Width of a throughput window (ns): 10 ms, wider for runs of more than 10 s (at most 1000
    /// windows).
    pub window_ns: u64,
    /// Operations completed per window.
    pub windows: Vec<u64>,
}

/// Divergences of one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DivergenceCount {
    /// Operation.
    pub op: String,
    /// Recorded outcome: `ok` or an errno name.
    pub recorded: String,
    /// Replayed outcome: `ok` (another size or value) or an errno name.
    pub replayed: String,
    /// How many.
    pub count: u64,
}

/// One divergence.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DivergenceExample {
    /// Recorded thread id.
    pub tid: u32,
    /// Index of the operation in its thread.
    pub index: u32,
    /// Operation.
    pub op: String,
    /// Path (sandbox-relative), if the operation has one.
    pub path: String,
    /// Recorded result.
    pub recorded: String,
    /// Replayed result.
    pub replayed: String,
}

/// Lateness against the schedule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    /// Median (ns).
    pub p50_ns: u64,
    /// 99th percentile (ns).
    pub p99_ns: u64,
    /// Maximum (ns).
    pub max_ns: u64,
    /// Mean (ns).
    pub mean_ns: f64,
    /// Distribution.
    pub hist: Histogram,
}

/// Statistics of one kind of operation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KindStats {
    /// Recorded operations performed.
    pub performed: u64,
    /// Implicit operations performed.
    pub implicit: u64,
    /// Skipped at run time.
    pub skipped: u64,
    /// Failed in the replay (recorded failures included).
    pub failed: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Latency percentiles (ns): p50, p90, p99, p99.9, max.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Maximum.
    pub max_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Latency distribution (latscope's histogram: 1/128 relative resolution).
    pub latency: Histogram,
}

fn outcome(v: i64) -> String {
    if v < 0 {
        latscope_event::errno_name(-v).map(str::to_string).unwrap_or_else(|| format!("E{}", -v))
    } else {
        "ok".to_string()
    }
}

fn result(v: i64) -> String {
    if v < 0 {
        outcome(v)
    } else {
        v.to_string()
    }
}

impl Stats {
    /// Merge worker collectors into the report.
    pub(crate) fn merge(plan: &Plan, cols: Vec<Collector>, wall_ns: u64) -> Stats {
        let mut s = Stats {
            plan_id: format!("{:08x}", plan.id),
            planned_ops: plan.meta.counts.ops,
            dropped_at_prepare: plan.meta.dropped.iter().map(|d| d.count).sum(),
            threads: plan.threads.len() as u32,
            workers: plan.meta.lanes,
            wall_ns,
            recorded_ns: plan.meta.span_ns,
            window_ns: WINDOW_NS,
            ..Default::default()
        };
        let mut lateness: Option<Histogram> = None;
        let mut divs: BTreeMap<(u8, i64, i64), u64> = BTreeMap::new();
        let mut examples: Vec<Example> = Vec::new();
        let mut lat: Vec<Option<Histogram>> = (0..N_KINDS).map(|_| None).collect();
        let (mut performed, mut implicit, mut failed, mut bytes) =
            ([0u64; N_KINDS], [0u64; N_KINDS], [0u64; N_KINDS], [0u64; N_KINDS]);
        let mut skipped = [[0u64; 4]; N_KINDS];
        for c in cols {
            for k in 0..N_KINDS {
                performed[k] += c.performed[k];
                implicit[k] += c.implicit[k];
                failed[k] += c.failed[k];
                bytes[k] += c.bytes[k];
                for (acc, n) in skipped[k].iter_mut().zip(c.skipped[k]) {
                    *acc += n;
                }
                if let Some(h) = &c.lat[k] {
                    lat[k].get_or_insert_with(Histogram::new).merge(h);
                }
            }
            s.refused += c.refused;
            s.clones_copied += c.clones_copied;
            if let Some(h) = &c.lateness {
                lateness.get_or_insert_with(Histogram::new).merge(h);
            }
            for (k, n) in c.divergences {
                *divs.entry(k).or_default() += n;
            }
            examples.extend(c.examples);
            if s.windows.len() < c.windows.len() {
                s.windows.resize(c.windows.len(), 0);
            }
            for (w, n) in c.windows.iter().enumerate() {
                s.windows[w] += n;
            }
        }
        for &kind in OpKind::ALL {
            let k = kind as usize;
            if kind == OpKind::Wait || performed[k] + implicit[k] + skipped[k].iter().sum::<u64>() == 0 {
                continue;
            }
            let h = lat[k].take().unwrap_or_default();
            let pct = |q| h.value_at_quantile(q).unwrap_or(0);
            s.by_kind.insert(
                kind.name().to_string(),
                KindStats {
                    performed: performed[k],
                    implicit: implicit[k],
                    skipped: skipped[k].iter().sum(),
                    failed: failed[k],
                    bytes: bytes[k],
                    p50_ns: pct(0.5),
                    p90_ns: pct(0.9),
                    p99_ns: pct(0.99),
                    p999_ns: pct(0.999),
                    max_ns: h.max().unwrap_or(0),
                    mean_ns: h.mean().unwrap_or(0.0),
                    latency: h,
                },
            );
            s.ops += performed[k];
            s.implicit += implicit[k];
            if matches!(kind, OpKind::Read | OpKind::Pread | OpKind::Readv | OpKind::Preadv) {
                s.bytes_read += bytes[k];
            }
            if matches!(
                kind,
                OpKind::Msync
                    | OpKind::Write
                    | OpKind::Pwrite
                    | OpKind::Writev
                    | OpKind::Pwritev
                    | OpKind::CopyRange
                    | OpKind::Sendfile
            ) {
                s.bytes_written += bytes[k];
            }
        }
        for (r, name) in SKIP_REASONS.iter().enumerate() {
            let n: u64 = skipped.iter().map(|k| k[r]).sum();
            if n > 0 {
                s.skip_reasons.insert(name.to_string(), n);
                s.skipped += n;
            }
        }
        // At most MAX_WINDOWS windows in the report: long runs get wider ones.
        let k = s.windows.len().div_ceil(MAX_WINDOWS).max(1);
        if k > 1 {
            s.windows = s.windows.chunks(k).map(|c| c.iter().sum()).collect();
            s.window_ns = WINDOW_NS * k as u64;
        }
        s.ops_per_sec = if wall_ns > 0 { s.ops as f64 * 1e9 / wall_ns as f64 } else { 0.0 };
        s.lateness = lateness.map(|h| Lateness {
            p50_ns: h.value_at_quantile(0.5).unwrap_or(0),
            p99_ns: h.value_at_quantile(0.99).unwrap_or(0),
            max_ns: h.max().unwrap_or(0),
            mean_ns: h.mean().unwrap_or(0.0),
            hist: h,
        });
        let mut dk: Vec<DivergenceCount> = divs
            .into_iter()
            .map(|((k, want, got), count)| {
                s.divergences += count;
                DivergenceCount {
                    op: OpKind::from_u8(k).map(|k| k.name()).unwrap_or("?").to_string(),
                    recorded: outcome(want),
                    replayed: outcome(got),
                    count,
                }
            })
            .collect();
        dk.sort_by(|a, b| b.count.cmp(&a.count).then(a.op.cmp(&b.op)));
        s.divergence_kinds = dk;
        // Paths of slots, from the opens that fill them (for the examples).
        examples.sort_by_key(|e| e.op.seq);
        examples.truncate(EXAMPLES);
        let slot_path = |slot: u32| plan.ops.iter().find(|o| o.kind == OpKind::Open && o.slot2 == slot).map(|o| o.path);
        for e in examples {
            let path = if e.op.uses_path() {
                Some(e.op.path)
            } else if e.op.uses_slot() {
                slot_path(e.op.slot)
            } else {
                None
            };
            s.first_divergences.push(DivergenceExample {
                tid: plan.threads.get(e.thread as usize).map(|t| t.tid).unwrap_or(0),
                index: e.index,
                op: if e.op.kind == OpKind::Unreplayed {
                    format!("{} (not replayed)", latscope_event::syscall_name(e.op.flags as u16).unwrap_or("?"))
                } else {
                    e.op.kind.name().to_string()
                },
                path: path.and_then(|p| plan.paths.get(p)).map(|p| p.rel.clone()).unwrap_or_default(),
                recorded: result(e.op.ret),
                replayed: result(e.got),
            });
        }
        s
    }

    /// The report as text.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let speed = if self.speed == 0.0 {
            "as fast as dependencies allow".to_string()
        } else {
            format!("{}x the recorded pace", self.speed)
        };
        let speed = if self.realtime { format!("{speed}, real-time workers (SCHED_FIFO)") } else { speed };
        let _ = writeln!(
            o,
            "replay of {} ({} threads on {} workers), speed: {speed}",
            self.plan, self.threads, self.workers
        );
        if self.interrupted {
            let _ = writeln!(o, "INTERRUPTED: the statistics cover the operations done before the stop");
        }
        let _ = writeln!(
            o,
            "wall time {} (recorded {}), {} operations, {} ops/s",
            fmt_ns(self.wall_ns),
            fmt_ns(self.recorded_ns),
            self.ops,
            fmt_count(self.ops_per_sec)
        );
        let _ = writeln!(
            o,
            "performed {} of {} planned recorded operations, plus {} implicit; skipped {}; refused {}; left out by prepare {}",
            self.ops, self.planned_ops, self.implicit, self.skipped, self.refused, self.dropped_at_prepare
        );
        for (r, n) in &self.skip_reasons {
            let _ = writeln!(o, "  skipped {n}: {r}");
        }
        if self.clones_copied > 0 {
            let _ = writeln!(
                o,
                "{} clones (FICLONE) done as copies: the sandbox's file system cannot clone what the recording cloned",
                self.clones_copied
            );
        }
        let _ = writeln!(o, "read {}, wrote {}", fmt_bytes(self.bytes_read), fmt_bytes(self.bytes_written));
        let _ = writeln!(o, "highest load average: {:.2}", self.max_loadavg);
        if let Some(l) = &self.lateness {
            let _ = writeln!(
                o,
                "lateness against the schedule: p50 {}, p99 {}, max {}",
                fmt_ns(l.p50_ns),
                fmt_ns(l.p99_ns),
                fmt_ns(l.max_ns)
            );
        }
        let _ = writeln!(o, "divergences from the recorded results: {}", self.divergences);
        for d in &self.divergence_kinds {
            let _ = writeln!(o, "  {:>8} {:<12} recorded {:<10} replayed {}", d.count, d.op, d.recorded, d.replayed);
        }
        if !self.first_divergences.is_empty() {
            let _ = writeln!(o, "first divergences:");
            for e in &self.first_divergences {
                let _ = writeln!(
                    o,
                    "  thread {} op #{} {} {}: recorded {}, replayed {}",
                    e.tid, e.index, e.op, e.path, e.recorded, e.replayed
                );
            }
        }
        let _ = writeln!(
            o,
            "{:<16} {:>10} {:>9} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "operation", "count", "implicit", "failed", "bytes", "p50", "p90", "p99", "p99.9", "max"
        );
        let mut kinds: Vec<(&String, &KindStats)> = self.by_kind.iter().collect();
        kinds.sort_by(|a, b| (b.1.performed + b.1.implicit).cmp(&(a.1.performed + a.1.implicit)).then(a.0.cmp(b.0)));
        for (k, v) in kinds {
            let _ = writeln!(
                o,
                "{:<16} {:>10} {:>9} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
                k,
                v.performed,
                v.implicit,
                v.failed,
                fmt_bytes(v.bytes),
                fmt_ns(v.p50_ns),
                fmt_ns(v.p90_ns),
                fmt_ns(v.p99_ns),
                fmt_ns(v.p999_ns),
                fmt_ns(v.max_ns)
            );
        }
        o
    }
}

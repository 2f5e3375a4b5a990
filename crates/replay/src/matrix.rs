//! A matrix of replays: one block-device setting takes each of a list of values; for each,
//! init and run, repeated; then each value is compared with the first. Every setting the
//! matrix touches is restored afterwards, on error and on Ctrl-C too.

use crate::compare::{compare_with, Comparison, Side};
use crate::error::{ReplayError, Result};
use crate::init::{init, InitOptions};
use crate::plan::Plan;
use crate::run::{run, RunOptions};
use crate::stats::Stats;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// Queue settings a matrix may vary (files under `/sys/block/DEV/queue/`).
pub const SETTINGS: [&str; 3] = ["scheduler", "read_ahead_kb", "nr_requests"];

/// Options of [`run_matrix`].
pub struct MatrixOptions<'a> {
    /// The disk (`vda`, `nvme0n1`; a partition means its disk).
    pub device: String,
    /// Which setting.
    pub setting: String,
    /// Its values, the first being the baseline.
    pub values: Vec<String>,
    /// Runs per value.
    pub repeat: usize,
    /// Sandbox override (`root` plans).
    pub root: Option<PathBuf>,
    /// Speed of each run.
    pub speed: f64,
    /// Drop the page cache before each run.
    pub drop_caches: bool,
    /// Workers of timed runs under SCHED_FIFO ([`RunOptions::realtime`]).
    pub realtime: bool,
    /// Raised to stop (Ctrl-C).
    pub stop: Option<&'a AtomicBool>,
    /// Told about each step ("scheduler=bfq run 2 of 3").
    pub on_step: Option<&'a mut dyn FnMut(&str)>,
    /// The plan file's name, for the reports.
    pub plan_name: String,
    /// Override of `/sys/block` (tests).
    pub sys_block: PathBuf,
    /// How the comparisons are judged.
    pub settings: latscope_stats::Settings,
}

/// The matrix's results.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MatrixResult {
    /// The disk.
    pub device: String,
    /// The setting varied.
    pub setting: String,
    /// Every queue setting as found before the matrix (and restored after it).
    pub original: Vec<(String, String)>,
    /// Per value, its runs.
    pub sides: Vec<Side>,
    /// Each value against the first.
    pub comparisons: Vec<Comparison>,
    /// Stopped before the end.
    pub interrupted: bool,
}

/// Restores queue settings when dropped.
struct Restore {
    dir: PathBuf,
    saved: Vec<(String, String)>,
}

impl Restore {
    fn restore(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        for (k, v) in self.saved.drain(..) {
            if let Err(e) = std::fs::write(self.dir.join(&k), &v) {
                errors.push(format!("cannot restore {}/{k} to {v}: {e}", self.dir.display()));
            }
        }
        errors
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        for e in self.restore() {
            eprintln!("latscope: {e}");
        }
    }
}

/// The queue directory of a disk (a partition resolves to its disk).
pub fn queue_dir(sys_block: &std::path::Path, device: &str) -> Result<PathBuf> {
    let name = device.trim_start_matches("/dev/");
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(ReplayError::Usage(format!("device {device:?}: give a disk name such as vda or nvme0n1")));
    }
    let q = sys_block.join(name).join("queue");
    if q.is_dir() {
        return Ok(q);
    }
    // A partition: /sys/class/block/<part> links into its disk's directory.
    let class = sys_block.parent().map(|p| p.join("class/block").join(name)).unwrap_or_default();
    if let Ok(real) = std::fs::canonicalize(&class) {
        if let Some(q) = real.parent().map(|d| d.join("queue")).filter(|q| q.is_dir()) {
            return Ok(q);
        }
    }
    Err(ReplayError::Usage(format!("no block device {name} (no {}): see lsblk", q.display())))
}

/// The current value of a queue setting (the selected scheduler for `scheduler`).
pub fn current(q: &std::path::Path, setting: &str) -> Result<String> {
    let p = q.join(setting);
    let s = std::fs::read_to_string(&p).map_err(|e| ReplayError::io(&p, e))?;
    let s = s.trim();
    if setting == "scheduler" {
        if let Some(sel) = s.split_whitespace().find(|w| w.starts_with('[')) {
            return Ok(sel.trim_matches(|c| c == '[' || c == ']').to_string());
        }
    }
    Ok(s.to_string())
}

/// Run the matrix.
pub fn run_matrix(plan: &Plan, opts: &mut MatrixOptions) -> Result<MatrixResult> {
    if !SETTINGS.contains(&opts.setting.as_str()) {
        return Err(ReplayError::Usage(format!("setting {:?}: one of {}", opts.setting, SETTINGS.join(", "))));
    }
    if opts.values.is_empty() || opts.repeat == 0 {
        return Err(ReplayError::Usage("give at least one value and --repeat 1 or more".into()));
    }
    let q = queue_dir(&opts.sys_block, &opts.device)?;
    let mut saved = Vec::new();
    for s in SETTINGS {
        if q.join(s).exists() {
            saved.push((s.to_string(), current(&q, s)?));
        }
    }
    let mut guard = Restore { dir: q.clone(), saved: saved.clone() };
    let mut res = MatrixResult {
        device: opts.device.clone(),
        setting: opts.setting.clone(),
        original: saved,
        ..Default::default()
    };
    let local = AtomicBool::new(false);
    let stop = opts.stop.unwrap_or(&local);
    'values: for v in &opts.values {
        let p = q.join(&opts.setting);
        let before: Vec<(&str, Option<String>)> = SETTINGS.iter().map(|s| (*s, current(&q, s).ok())).collect();
        std::fs::write(&p, v).map_err(|e| ReplayError::Sys {
            what: format!("cannot set {} to {v:?} (is it a valid value for this device?)", p.display()),
            source: e,
        })?;
        if current(&q, &opts.setting)? != *v && opts.setting == "scheduler" {
            return Err(ReplayError::Usage(format!("{} did not take {v}", p.display())));
        }
        // What the kernel changed by itself with it (nr_requests with the scheduler): derived.
        let derived = before
            .iter()
            .filter(|(k, _)| *k != opts.setting)
            .filter_map(|(k, was)| {
                let now = current(&q, k).ok()?;
                (Some(&now) != was.as_ref()).then(|| format!("{k}={now}"))
            })
            .collect();
        let mut side = Side { name: format!("{}={v}", opts.setting), runs: Vec::new(), derived };
        for r in 0..opts.repeat {
            if stop.load(Ordering::Relaxed) {
                res.interrupted = true;
                break 'values;
            }
            if let Some(f) = opts.on_step.as_mut() {
                f(&format!("{}={v} run {} of {}", opts.setting, r + 1, opts.repeat));
            }
            init(plan, &InitOptions { root: opts.root.clone(), ..Default::default() })?;
            let stats: Stats = run(
                plan,
                &mut RunOptions {
                    root: opts.root.clone(),
                    speed: opts.speed,
                    drop_caches: opts.drop_caches,
                    realtime: opts.realtime,
                    stop: Some(stop),
                    plan_name: opts.plan_name.clone(),
                    ..Default::default()
                },
            )?;
            if stats.interrupted {
                res.interrupted = true;
                break 'values;
            }
            side.runs.push(stats);
        }
        res.sides.push(side);
    }
    let errors = guard.restore();
    if !errors.is_empty() {
        return Err(ReplayError::Sandbox(errors.join("; ")));
    }
    if let Some(base) = res.sides.first().filter(|s| !s.runs.is_empty()) {
        for s in res.sides.iter().skip(1).filter(|s| !s.runs.is_empty()) {
            let mut c = compare_with(base, s, &opts.settings);
            // The setting the matrix varies is the difference it measures.
            let varied = format!(" {}:", opts.setting);
            c.differences.retain(|d| !(d.starts_with("block ") && d.contains(&varied)));
            res.comparisons.push(c);
        }
    }
    Ok(res)
}

impl MatrixResult {
    /// The results as text.
    pub fn text(&self) -> String {
        let mut o = format!("{} on {}: ", self.setting, self.device);
        let vals: Vec<String> = self
            .sides
            .iter()
            .map(|s| {
                let ops: Vec<f64> = s.runs.iter().map(|r| r.ops_per_sec).collect();
                format!(
                    "{} {} ops/s ({} runs)",
                    s.name,
                    latscope_event::units::fmt_count(ops.iter().sum::<f64>() / ops.len().max(1) as f64),
                    ops.len()
                )
            })
            .collect();
        o += &vals.join(", ");
        o.push('\n');
        if self.interrupted {
            o += "INTERRUPTED: the results cover the runs completed before the stop\n";
        }
        let orig: Vec<String> = self.original.iter().map(|(k, v)| format!("{k}={v}")).collect();
        o += &format!("restored {}\n", orig.join(" "));
        for c in &self.comparisons {
            o.push('\n');
            o += &c.text();
        }
        o
    }
}

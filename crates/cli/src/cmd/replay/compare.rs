//! `latscope replay compare` (two runs, or a matrix of block-device settings).

use super::Place;
use anyhow::{bail, Context, Result};
use latscope_replay::compare::{read_side, Side};
use latscope_replay::matrix::{run_matrix, MatrixOptions};
use latscope_replay::read_plan;
use latscope_stats::Settings;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Put two replays side by side (ops/s, and p50, p90, p99, p99.9 latency per operation kind)
/// and say whether each difference is a change beyond noise, as `latscope diff` does: a 95 %
/// interval of each change (with several runs per side, files holding lists of runs or the
/// matrix's repeats, from the runs' scatter; with one run per side from the spread inside the
/// runs, which under-states noise: repeat runs), a change only beyond --min-change (5 %) after
/// the correction for the number of metrics (Benjamini-Hochberg), "too few to tell" for a
/// percentile resting on fewer than 10 operations. A timed run that fell behind its pace is
/// marked and its rates are not compared. With --matrix, runs init + run for each value of a
/// block-device setting, --repeat times each, compares every value with the first (settings the
/// kernel derives from it, such as nr_requests after a scheduler change, are said as derived),
/// and restores every setting afterwards, even on Ctrl-C.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope replay compare before.json after.json
  latscope replay compare --matrix plan.lsr --device vda --set scheduler=none,mq-deadline,bfq,kyber --repeat 3 -o sched.json
  latscope replay compare --matrix plan.lsr --device nvme0n1 --set read_ahead_kb=0,128,1024 --speed 1")]
pub struct CompareArgs {
    /// Two statistics files ('latscope replay run --json --stats FILE'; a file may hold a list of runs).
    #[arg(value_name = "STATS", num_args = 0..=2)]
    files: Vec<PathBuf>,
    /// Run a matrix of this plan instead.
    #[arg(long, value_name = "PLAN", requires_all = ["device", "set"], conflicts_with = "files")]
    matrix: Option<PathBuf>,
    /// The disk whose queue settings the matrix changes (vda, nvme0n1; a partition means its disk).
    #[arg(long, value_name = "DEV")]
    device: Option<String>,
    /// SETTING=V1,V2,...: scheduler, read_ahead_kb or nr_requests, and the values to try (the first is the baseline).
    #[arg(long = "set", value_name = "SETTING=VALUES")]
    set: Option<String>,
    /// Runs per value.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Speed of each run (0: as fast as possible).
    #[arg(short, long, default_value_t = 0.0)]
    speed: f64,
    /// Drop the page cache before each run.
    #[arg(long)]
    drop_caches: bool,
    /// Workers of timed runs under SCHED_FIFO, as 'latscope replay run --realtime' (needs root).
    #[arg(long)]
    realtime: bool,
    #[command(flatten)]
    place: Place,
    /// Write the matrix's runs and comparisons (JSON) here.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// The smallest change that counts, in percent.
    #[arg(long, default_value = "5%", value_name = "PERCENT")]
    min_change: String,
    /// The run-to-run noise assumed for a side of one recording (or run), in percent: two
    /// recordings of one workload differ by more than the noise inside each; measure yours with
    /// an A/A comparison. Sides of several recordings measure it instead.
    #[arg(long, default_value = "10%", value_name = "PERCENT")]
    run_noise: String,
    /// JSON.
    #[arg(long)]
    json: bool,
}

/// Compares the runs in the files of side A with those of side B and prints the comparison.
pub fn compare_files(fa: &[PathBuf], fb: &[PathBuf], s: &Settings, json: bool) -> Result<ExitCode> {
    let side = |files: &[PathBuf]| -> Result<Side> {
        let mut side = Side::default();
        for f in files {
            let one = read_side(f)?;
            side.name = if side.name.is_empty() { one.name } else { format!("{},{}", side.name, one.name) };
            side.runs.extend(one.runs);
        }
        Ok(side)
    };
    let c = latscope_replay::compare::compare_with(&side(fa)?, &side(fb)?, s);
    print!("{}", if json { serde_json::to_string_pretty(&c)? + "\n" } else { c.text() });
    Ok(ExitCode::SUCCESS)
}

pub fn compare(a: CompareArgs) -> Result<ExitCode> {
    let settings = Settings {
        min_change: crate::cmd::diff::parse_percent(&a.min_change).context("--min-change")?,
        run_noise: crate::cmd::diff::parse_percent(&a.run_noise).context("--run-noise")?,
        ..Default::default()
    };
    let Some(plan_file) = a.matrix else {
        let [fa, fb] = a.files.as_slice() else {
            bail!("give two statistics files (or --matrix PLAN --device DEV --set SETTING=VALUES)");
        };
        return compare_files(std::slice::from_ref(fa), std::slice::from_ref(fb), &settings, a.json);
    };
    crate::args::check_output(Some(&plan_file), a.output.as_deref())?;
    let plan = read_plan(&plan_file)?;
    let set = a.set.unwrap_or_default();
    let Some((setting, values)) = set.split_once('=') else {
        bail!("--set {set:?}: write SETTING=V1,V2 (e.g. scheduler=none,mq-deadline)");
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    let mut step = |s: &str| eprintln!("matrix: {s}");
    let mut opts = MatrixOptions {
        device: a.device.unwrap_or_default(),
        setting: setting.to_string(),
        values: values.split(',').map(str::to_string).filter(|v| !v.is_empty()).collect(),
        repeat: a.repeat,
        root: a.place.root,
        speed: a.speed,
        drop_caches: a.drop_caches,
        realtime: a.realtime,
        stop: Some(&stop),
        on_step: Some(&mut step),
        plan_name: plan_file.display().to_string(),
        sys_block: PathBuf::from("/sys/block"),
        settings,
    };
    let res = run_matrix(&plan, &mut opts)?;
    if let Some(o) = &a.output {
        crate::args::write_output(Some(o), serde_json::to_string_pretty(&res)?.as_bytes())?;
    }
    print!("{}", if a.json { serde_json::to_string_pretty(&res)? + "\n" } else { res.text() });
    Ok(if res.interrupted { ExitCode::from(130) } else { ExitCode::SUCCESS })
}

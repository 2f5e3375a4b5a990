//! Flight recorders' dumps (`latscope serve --dumps DIR`): the list of the dumps in the
//! directories given, newest first, and each dump's views (what fired it, the latency heat map,
//! the breakdown by cause, the slowest calls with their why, the processes), computed once per
//! dump and kept.
//!
//! A dump is named by its directory's index and its file name, which must be one of a flight
//! recorder's names (`flight-TIME-TRIGGER.lst`) and a regular file in that directory: no other
//! file is read.

use crate::params::{ParamError, Params};
use latscope_event::source::{Chunk, Zone};
use latscope_event::StackTable;
use latscope_event::{EventBatch, EventKind, TraceHeader};
use latscope_flight::files::{self, DUMP_PREFIX};
use latscope_trace::{Column, ReadOptions, TraceReader};
use latscope_view::group::GroupBy;
use latscope_view::heatmap::{
    render_svg, EventMapBuilder, EventMapOptions, RenderOptions, YArgs, YField, YSpec, YUnit,
};
use latscope_view::stacks::{self, StackAgg, StackNames};
use latscope_view::top::{SortKey, Top};
use latscope_view::why::WhyAgg;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Dumps whose views are kept.
const CACHED: usize = 16;
/// The slowest calls listed per dump.
const SLOWEST: usize = 25;

/// What a dump page failed on.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// The server was started without `--dumps`.
    #[error("no dump directory: start latscope serve with --dumps DIR (a flight recorder's -w DIR)")]
    NoDirs,
    /// A parameter is wrong.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// No such dump.
    #[error("no dump {0}")]
    NotFound(String),
    /// The dump could not be read.
    #[error("{0}")]
    Read(String),
}

/// A dump's views, computed once.
pub struct Views {
    /// Facts and tables (JSON).
    pub json: Value,
    /// The latency heat map (SVG).
    pub heatmap: String,
    /// The breakdown by cause (SVG).
    pub why: String,
    /// With on-CPU samples (`record --profile`): the flame graph of where the CPU went (SVG).
    pub flame: Option<Vec<u8>>,
}

type Key = (PathBuf, u64, i64);

/// The directories of dumps and the views computed so far.
pub struct Dumps {
    dirs: Vec<PathBuf>,
    cache: Mutex<Vec<(Key, Arc<Views>)>>,
    /// Facts of listed dumps, by path, size and modification time.
    facts: Mutex<HashMap<Key, Value>>,
}

impl Dumps {
    /// Serve the dumps in `dirs`.
    pub fn new(dirs: Vec<PathBuf>) -> Dumps {
        Dumps { dirs, cache: Mutex::new(Vec::new()), facts: Mutex::new(HashMap::new()) }
    }

    /// Every dump, newest first (`/api/dumps`).
    pub fn list(&self) -> Result<Value, DumpError> {
        if self.dirs.is_empty() {
            return Err(DumpError::NoDirs);
        }
        let mut rows = Vec::new();
        for (d, dir) in self.dirs.iter().enumerate() {
            for l in files::list(dir, DUMP_PREFIX) {
                let name = l.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let key = key(&l.path);
                let cached = self.facts.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
                let mut row = match cached {
                    Some(v) => v,
                    None => {
                        let v = facts(&l.path);
                        let mut f = self.facts.lock().unwrap_or_else(|p| p.into_inner());
                        if f.len() > 4096 {
                            f.clear();
                        }
                        f.insert(key, v.clone());
                        v
                    }
                };
                row["d"] = json!(d);
                row["file"] = json!(name);
                row["bytes"] = json!(l.bytes);
                rows.push(row);
            }
        }
        // Names carry the trigger's time: newest first.
        rows.sort_by(|a, b| b["file"].as_str().cmp(&a["file"].as_str()));
        Ok(json!({"dirs": self.dirs, "dumps": rows}))
    }

    /// The dump named by `d` and `f`: its path, checked.
    pub fn path(&self, p: &Params) -> Result<PathBuf, DumpError> {
        if self.dirs.is_empty() {
            return Err(DumpError::NoDirs);
        }
        let d = p.int("d", 0, self.dirs.len() as i64 - 1)?.unwrap_or(0) as usize;
        let f = p.str("f", 200)?.ok_or(ParamError::Missing("f".into()))?;
        if f.contains('/') || !files::is_ours(&f, DUMP_PREFIX) {
            return Err(DumpError::NotFound(f));
        }
        let path = self.dirs[d].join(&f);
        match path.symlink_metadata() {
            Ok(m) if m.is_file() => Ok(path),
            _ => Err(DumpError::NotFound(f)),
        }
    }

    /// The views of the dump at `path` (computed, or kept from before).
    pub fn views(&self, path: &Path) -> Result<Arc<Views>, DumpError> {
        let k = key(path);
        if let Some((_, v)) = self.cache.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(x, _)| *x == k) {
            return Ok(v.clone());
        }
        let v = Arc::new(compute(path)?);
        let mut c = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        c.push((k, v.clone()));
        if c.len() > CACHED {
            c.remove(0);
        }
        Ok(v)
    }
}

fn key(path: &Path) -> Key {
    let m = path.metadata().ok();
    let len = m.as_ref().map_or(0, |m| m.len());
    let mtime = m.and_then(|m| m.modified().ok()).and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    (path.to_path_buf(), len, mtime.map_or(0, |d| d.as_nanos() as i64))
}

/// What the header and the summary say, read without decoding events.
fn facts(path: &Path) -> Value {
    let mut r = match TraceReader::open_with(path, ReadOptions { projection: Some(Vec::new()), skip_corrupt: true }) {
        Ok(r) => r,
        Err(e) => return json!({"error": e.to_string()}),
    };
    let h = r.header().clone();
    let mut b = EventBatch::default();
    while r.next_batch_pruned(&mut b, |_| Column::ALL).is_some() {}
    let s = r.summary();
    let mut v = flight_json(&h);
    v["events"] = json!(s.map_or(r.stats().events, |s| s.events));
    v["lost"] = json!(s.map(|s| s.lost));
    v["complete"] = json!(s.is_some());
    v["from_wall_ns"] = json!(h.wall_ns(h.start_ns));
    v["to_wall_ns"] = json!(s.map(|s| h.wall_ns(s.end_ns)));
    v
}

fn flight_json(h: &TraceHeader) -> Value {
    match &h.flight {
        Some(f) => json!({
            "trigger": f.trigger,
            "condition": f.condition,
            "reason": f.reason,
            "at_wall_ns": h.wall_ns(f.at_ns),
            "before_ns": f.before_ns,
            "after_ns": f.after_ns,
            "host": h.hostname,
        }),
        None => json!({"host": h.hostname}),
    }
}

/// One pass over the dump: the heat map, the breakdown, the processes, the slowest calls.
fn compute(path: &Path) -> Result<Views, DumpError> {
    let mut r = TraceReader::open_with(path, ReadOptions { projection: None, skip_corrupt: true })
        .map_err(|e| DumpError::Read(e.to_string()))?;
    let h = r.header().clone();
    let yargs = YArgs { rows: 48, ..Default::default() };
    let opts = EventMapOptions {
        kind: EventKind::Syscall,
        y: YField::Latency,
        yspec: YSpec::from_args(&yargs, YField::Latency, YUnit::Nanos, true).map_err(DumpError::Read)?,
        step_sec: None,
        max_col: None,
        per: GroupBy::All,
        max_maps: 1,
        title: "Syscall latency".into(),
        waits: false,
    };
    let mut map = EventMapBuilder::new(opts.clone(), &h);
    let mut why = WhyAgg::default();
    let mut top = Top::new(GroupBy::Proc);
    let mut slowest: Vec<(u64, Value)> = Vec::new();
    let mut rows: Vec<u32> = Vec::new();
    // On-CPU samples (`record --profile`): where the CPU went, named from the stack table.
    let mut cpu = StackAgg { samples: true, on_cpu: true, ..Default::default() };
    let mut table = StackTable::default();
    let mut all_rows: Vec<u32> = Vec::new();
    let (mut first, mut last, mut corrupt) = (u64::MAX, 0u64, 0u64);
    let mut header = h.clone();
    while let Some(b) = r.next_batch() {
        let b = match b {
            Ok(b) => b,
            Err(_) => {
                corrupt += 1;
                continue;
            }
        };
        // Cgroups met during the recording are in the reader's header by now.
        header.cgroups.clone_from(&r.header().cgroups);
        rows.clear();
        rows.extend((0..b.len() as u32).filter(|&i| b.kind[i as usize] == EventKind::Syscall as u8));
        for &i in &rows {
            let i = i as usize;
            first = first.min(b.ts[i]);
            last = last.max(b.end(i));
            let lat = b.lat[i];
            if slowest.len() < SLOWEST || lat > slowest.last().map_or(0, |s| s.0) {
                let e = b.get(i);
                let row = json!({
                    "wall_ns": header.wall_ns(e.ts),
                    "lat_ns": lat,
                    "proc": e.comm,
                    "pid": e.pid,
                    "tid": e.tid,
                    "op": latscope_event::syscall_name(e.nr).unwrap_or("?"),
                    "path": e.path,
                    "res": e.ret,
                    "why": latscope_view::why::line(&header, &b, i).map(|l| l.trim().trim_start_matches("why: ").to_string()),
                });
                slowest.push((lat, row));
                slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
                slowest.truncate(SLOWEST);
            }
        }
        if !b.stacks.is_empty() && table.add_lines(&b.stacks).is_err() {
            corrupt += 1;
        }
        all_rows.clear();
        all_rows.extend(0..b.len() as u32);
        cpu.add(&b, &all_rows);
        let chunk = Chunk { batch: &b, rows: &rows, zone: Zone::default() };
        map.add(chunk, &header);
        why.add(&b, &rows);
        top.add_chunk(Chunk { batch: &b, rows: &rows, zone: Zone::default() }, EventKind::Syscall, &header);
    }
    let summary = r.summary();
    let wall = (h.realtime_offset_ns != 0).then(|| h.wall_ns(h.start_ns));
    let maps = map.finish(wall).map_err(DumpError::Read)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let sub = match &h.flight {
        Some(f) => format!("{name}; trigger {} ({}): {}", f.trigger, f.condition, f.reason),
        None => name.clone(),
    };
    let heatmap = render_svg(
        &maps.maps,
        &RenderOptions { title: opts.title.clone(), subtitle: Some(sub.clone()), ..Default::default() },
    );
    let why_svg = latscope_view::whysvg::render_svg(&why, 10, &format!("Why was it slow: {name}"));
    let secs = last.saturating_sub(first.min(last)) as f64 / 1e9;
    let mut json = flight_json(&h);
    json["file"] = json!(name);
    json["events"] = json!(summary.map_or(r.stats().events, |s| s.events));
    json["lost"] = json!(summary.map(|s| s.lost));
    json["complete"] = json!(summary.is_some());
    json["corrupt_blocks"] = json!(corrupt);
    json["warnings"] = json!(r.warnings().iter().map(|w| w.to_string()).collect::<Vec<_>>());
    json["from_wall_ns"] = json!(h.wall_ns(if first == u64::MAX { h.start_ns } else { first }));
    json["to_wall_ns"] = json!(h.wall_ns(last.max(h.start_ns)));
    json["why"] = why.to_json(10);
    json["top"] = top.to_json(SortKey::Total, 15, secs);
    json["slowest"] = json!(slowest.into_iter().map(|s| s.1).collect::<Vec<_>>());
    json["command_line"] = json!(h.command_line);
    let mut flame = None;
    if cpu.counted() > 0 {
        let mut names = StackNames::new(table, None);
        let hot = stacks::hottest_functions(&cpu, &mut names, 15);
        json["on_cpu"] = stacks::samples_json(&cpu, &hot);
        flame = stacks::flame_svg(&stacks::folded(&cpu, &mut names), &format!("On-CPU time by stack: {name}")).ok();
    }
    Ok(Views { json, heatmap, why: why_svg, flame })
}

//! `prepare`: a trace becomes a replay plan.

mod mapping;
mod planner;
mod res;
mod world;

pub use mapping::PSEUDO_FS;

use crate::error::{ReplayError, Result};
use crate::op::{OpKind, NONE};
use crate::plan::{Dropped, Plan, PlanCounts, PlanMeta, Preopen, ThreadInfo, TraceInfo, PLAN_VERSION};
use crate::source::{read_trace, TraceEvents};
use latscope_event::TraceHeader;
use std::path::Path;

/// Where the replay will happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxChoice {
    /// Every recorded path under this absolute directory.
    Root(String),
    /// Under `<mount>/.latscope/<NAME>/` for each recorded mount.
    Name(String),
}

/// Options of [`prepare`].
#[derive(Debug, Clone)]
pub struct PrepareOptions {
    /// Where the replay will happen.
    pub sandbox: SandboxChoice,
    /// Filter expression selecting the events to replay (`None`: all).
    pub filter: Option<String>,
}

/// Why a trace cannot be replayed faithfully, if it cannot.
pub fn readiness(ev: &TraceEvents) -> std::result::Result<(), String> {
    let h = &ev.header;
    if ev.lost > 0 {
        return Err(format!(
            "{} events were lost while recording (ring buffer full): a replay would miss operations and break its fd model; record again with a larger --buffer-size",
            ev.lost
        ));
    }
    if ev.corrupt_blocks > 0 {
        return Err(format!(
            "{} blocks of the trace are corrupt: a replay would miss their operations",
            ev.corrupt_blocks
        ));
    }
    if h.syscalls == "none" {
        return Err("it was recorded without syscalls (--syscalls none)".into());
    }
    header_readiness(h)
}

/// What the trace header says about its completeness for replay.
fn header_readiness(h: &TraceHeader) -> std::result::Result<(), String> {
    let _ = h;
    Ok(())
}

/// Read `trace` and make a plan from it.
pub fn prepare(trace: &Path, opts: &PrepareOptions) -> Result<Plan> {
    let ev = read_trace(trace, opts.filter.as_deref())?;
    readiness(&ev).map_err(ReplayError::NotReplayable)?;
    let mut plan = plan_events(&ev, opts)?;
    plan.meta.trace.file = trace.display().to_string();
    if !ev.complete {
        plan.meta.warnings.push(
            "the trace has no summary (the recording was not closed cleanly): it is replayed up to where it ends"
                .into(),
        );
    }
    plan.meta.warnings.extend(ev.warnings.iter().cloned());
    Ok(plan)
}

/// Make a plan from events already read.
pub fn plan_events(ev: &TraceEvents, opts: &PrepareOptions) -> Result<Plan> {
    let (root, name) = match &opts.sandbox {
        SandboxChoice::Root(d) => (Some(d.as_str()), None),
        SandboxChoice::Name(n) => {
            if !crate::sandbox::valid_name(n) {
                return Err(ReplayError::Usage(format!(
                    "test name {n:?}: use letters, digits, '.', '_' and '-', not starting with '.'"
                )));
            }
            (None, Some(n.as_str()))
        }
    };
    let mapper = mapping::Mapper::new(&ev.header, root, name);
    if let Some(r) = root {
        crate::sandbox::validate_spec(&mapper.spec).map_err(|_| {
            ReplayError::Usage(format!("--root {r}: give an absolute directory other than /, /proc, /sys or /dev"))
        })?;
    }
    let p = planner::Planner::new(ev, mapper).run();
    let mut literals = p.literals;
    let mut values = p.values;
    let init = p.world.init_entries(&p.mapper, &mut literals);
    let xattrs = p.world.init_xattrs(&p.mapper, &mut literals, &mut values);

    let mut counts =
        PlanCounts { implicit: p.implicit, waits: p.waits, init_xattrs: xattrs.len() as u64, ..Default::default() };
    for e in &init {
        match e.kind {
            crate::plan::InitKind::Dir => counts.init_dirs += 1,
            crate::plan::InitKind::File => {
                counts.init_files += 1;
                counts.init_bytes += e.size;
            }
            crate::plan::InitKind::Symlink => counts.init_symlinks += 1,
        }
    }
    // Lanes: threads that never overlap in the recording share a worker (interval partitioning
    // by plan order); a thread starts on its lane only after the previous one ended, which
    // cannot deadlock because every wait points to an earlier operation.
    let mut threads = Vec::with_capacity(p.threads.len());
    let mut ops = Vec::with_capacity(p.threads.iter().map(|t| t.ops.len()).sum());
    let mut spans: Vec<(u32, u32, usize)> = Vec::new();
    for (i, t) in p.threads.iter().enumerate() {
        let first = t.ops.first().map(|o| o.seq).unwrap_or(0);
        let last = t.ops.last().map(|o| o.seq).unwrap_or(0);
        spans.push((first, last, i));
    }
    spans.sort();
    let mut lane_of = vec![0u32; p.threads.len()];
    let mut lane_end: std::collections::BinaryHeap<std::cmp::Reverse<(u32, u32)>> = Default::default();
    let mut lanes = 0u32;
    for &(first, last, i) in &spans {
        let lane = match lane_end.peek() {
            Some(&std::cmp::Reverse((end, l))) if end < first => {
                lane_end.pop();
                l
            }
            _ => {
                lanes += 1;
                lanes - 1
            }
        };
        lane_of[i] = lane;
        lane_end.push(std::cmp::Reverse((last, lane)));
    }
    for (i, t) in p.threads.into_iter().enumerate() {
        for op in &t.ops {
            if op.kind != OpKind::Wait && !op.has(crate::op::Op::IMPLICIT) {
                counts.ops += 1;
                *counts.by_kind.entry(op.kind.name().to_string()).or_default() += 1;
            }
        }
        threads.push(ThreadInfo {
            tid: t.tid,
            pid: t.pid,
            start: ops.len() as u64,
            len: t.ops.len() as u64,
            ops: t.real,
            lane: lane_of[i],
            comm: t.comm,
        });
        ops.extend(t.ops);
    }
    let mut dropped: Vec<Dropped> =
        p.dropped.into_iter().map(|((reason, op), count)| Dropped { reason, op, count }).collect();
    dropped.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)).then(a.op.cmp(&b.op)));
    let mut warnings: Vec<String> = Vec::new();
    for (what, n) in p.world.disagreements.iter().chain(p.notes.iter()) {
        warnings.push(format!("{n} times: {what}"));
    }
    if !p.io_uring.is_empty() {
        let (n, procs): (u64, usize) = (p.io_uring.values().sum(), p.io_uring.len());
        warnings.push(format!(
            "{n} operations were submitted through io_uring by {procs} processes: the recording does not see them and they are \
             not replayed, so files they read or wrote are replayed without them (their contents and sizes may differ)"
        ));
    }
    if !p.unsynced.is_empty() {
        let name = |q: u32| match p.mapper.paths.get(q) {
            Some(e) => match p.mapper.spec.roots.get(e.root as usize) {
                Some(r) => format!("{}/{}", r.dir.trim_end_matches('/'), e.rel),
                None => e.rel.clone(),
            },
            None => "?".into(),
        };
        let names: Vec<String> = p.unsynced.iter().take(5).map(|&q| name(q)).collect();
        warnings.push(format!(
            "{} files were mapped shared and writable without an msync ({}{}): stores through a mapping are not recorded, \
             so the replayed files' contents may differ where the program stored (only what msync covered is written)",
            p.unsynced.len(),
            names.join(", "),
            if p.unsynced.len() > 5 { ", ..." } else { "" }
        ));
    }
    let h = &ev.header;
    let meta = PlanMeta {
        plan_version: PLAN_VERSION,
        latscope_version: env!("CARGO_PKG_VERSION").to_string(),
        trace: TraceInfo {
            file: String::new(),
            hostname: h.hostname.clone(),
            kernel: h.kernel.clone(),
            start_wall_ns: h.wall_ns(p.t0),
            events: ev.events.len() as u64,
        },
        filter: opts.filter.clone().filter(|f| !f.trim().is_empty()),
        sandbox: p.mapper.spec.clone(),
        counts,
        dropped,
        warnings,
        max_read: p.max_read,
        max_write: p.max_write,
        span_ns: p.span,
        slots: p.slots,
        maps: p.maps,
        lanes,
    };
    let preopen = p.preopen.into_iter().map(|(slot, path, flags, pos)| Preopen { slot, path, flags, pos }).collect();
    let plan = Plan { id: 0, meta, paths: p.mapper.paths, literals, threads, ops, init, preopen, values, xattrs };
    debug_assert!(plan.ops.iter().all(|o| o.kind != OpKind::Wait || o.slot != NONE));
    plan.validate()?;
    Ok(plan)
}

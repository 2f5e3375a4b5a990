//! Reading a trace for a replay: every syscall and process event, in recorded order, each
//! marked as selected by the filter or not (the fd and process model needs all of them).

use crate::error::{ReplayError, Result};
use latscope_event::{EventBatch, EventKind, TraceHeader};
use latscope_filter::Filter;
use latscope_scan::{InputFormat, Scan, ScanError, ScanOptions};
use std::path::Path;

/// The events of a trace, ready for planning.
#[derive(Debug, Default)]
pub struct TraceEvents {
    /// The recorded machine.
    pub header: TraceHeader,
    /// Syscall and process events (block requests left out), in file order.
    pub events: EventBatch,
    /// Per event: whether the filter selected it for replay.
    pub selected: Vec<bool>,
    /// Events the probes lost during the recording.
    pub lost: u64,
    /// Corrupt blocks met (skipped).
    pub corrupt_blocks: u64,
    /// Whether the recording was closed cleanly (it has a summary).
    pub complete: bool,
    /// Reader warnings (file cut short, ...).
    pub warnings: Vec<String>,
}

/// Read every syscall and process event of `path`, marking those `filter` selects.
pub fn read_trace(path: &Path, filter: Option<&str>) -> Result<TraceEvents> {
    let filter = Filter::parse(filter.unwrap_or("")).map_err(|e| ReplayError::Filter(e.to_string()))?;
    let all = filter.is_match_all();
    let serr = |e: ScanError| ReplayError::Trace { path: path.to_path_buf(), detail: e.to_string() };
    // Every column: a chunk's batch holds every event of its block, its rows the selected ones.
    let mut scan =
        Scan::open(path, InputFormat::Trace, ScanOptions { filter, columns: None, zone: None }).map_err(serr)?;
    let mut out = TraceEvents { header: scan.header().clone(), ..Default::default() };
    let mut sel: Vec<bool> = Vec::new();
    scan.for_each(|c| {
        let b = c.batch;
        sel.clear();
        sel.resize(b.len(), all);
        if !all {
            for &r in c.rows {
                sel[r as usize] = true;
            }
        }
        for (i, &s) in sel.iter().enumerate() {
            if b.kind[i] != EventKind::Block as u8 {
                out.events.push_from(b, i);
                out.selected.push(s);
            }
        }
        Ok::<(), ScanError>(())
    })
    .map_err(serr)?;
    let rep = scan.report();
    out.lost = rep.lost;
    out.corrupt_blocks = rep.corrupt.len() as u64;
    out.complete = rep.summary.is_some();
    out.warnings.extend(rep.corrupt);
    out.warnings.extend(rep.warnings);
    Ok(out)
}

//! Reading a trace for a replay: every syscall and process event, in recorded order, each
//! marked as selected by the filter or not (the fd and process model needs all of them).

use crate::error::{ReplayError, Result};
use latscope_event::{EventBatch, EventKind, TraceHeader};
use latscope_filter::{EvalContext, Filter};
use latscope_trace::{Column, ReadOptions, TraceReader};
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
    let terr = |source| ReplayError::Trace { path: path.to_path_buf(), source };
    let mut reader =
        TraceReader::open_with(path, ReadOptions { skip_corrupt: true, ..Default::default() }).map_err(terr)?;
    let mut ctx = EvalContext::new(reader.header());
    let all = filter.is_match_all();
    let mut out = TraceEvents { header: reader.header().clone(), ..Default::default() };
    let mut batch = EventBatch::default();
    let mut only_block = false;
    while let Some(r) = reader.next_batch_pruned(&mut batch, |m| {
        // Blocks of block requests only: nothing of them is read.
        only_block = m.only_kind(EventKind::Block as u8);
        if only_block {
            &Column::ALL[..]
        } else {
            &[][..]
        }
    }) {
        match r {
            Ok(()) => {}
            Err(e) if e.is_corrupt_block() => {
                out.corrupt_blocks += 1;
                out.warnings.push(e.to_string());
                continue;
            }
            Err(e) => return Err(terr(e)),
        }
        if only_block {
            continue;
        }
        if !all {
            ctx.observe(&batch);
        }
        for i in 0..batch.len() {
            if batch.kind[i] == EventKind::Block as u8 {
                continue;
            }
            out.events.push_from(&batch, i);
            out.selected.push(all || filter.matches(&batch, i, &ctx));
        }
    }
    out.lost = reader.summary().map(|s| s.lost).unwrap_or_else(|| reader.stats().lost_total);
    out.complete = reader.summary().is_some();
    out.warnings.extend(reader.warnings().iter().map(|w| w.to_string()));
    Ok(out)
}

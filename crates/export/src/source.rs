//! Where exported events come from: the one function of this crate that reads a trace.
//!
//! Everything else works on the blocks it hands over, so that replacing it by the shared
//! filtered scan (projection, zone maps, filter, batches) changes no exporter.

use std::path::Path;

use latscope_event::{EventBatch, TraceHeader};
use latscope_filter::{EvalContext, Filter};
use latscope_trace::{ReadOptions, TraceReader};

use crate::ExportError;

/// The events of one block that the filter took.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Rows<'a> {
    /// Every event of the block.
    All,
    /// These rows of the block, ascending.
    Some(&'a [u32]),
}

impl Rows<'_> {
    /// How many events.
    pub(crate) fn len(&self, batch: &EventBatch) -> usize {
        match self {
            Rows::All => batch.len(),
            Rows::Some(r) => r.len(),
        }
    }
}

/// Where the scan is, for progress reports.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Position {
    /// File bytes consumed so far.
    pub bytes: u64,
    /// Size of the file.
    pub file_size: u64,
}

/// What a scan read.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScanReport {
    /// The trace header.
    pub header: TraceHeader,
    /// Events decoded.
    pub events_read: u64,
    /// Events the filter took.
    pub events_matched: u64,
    /// Corrupt blocks skipped.
    pub corrupt_blocks: u64,
    /// Reader warnings (file cut short, no summary, ...) and skipped blocks, as sentences.
    pub warnings: Vec<String>,
    /// Events the probes lost while recording, as of the last block read.
    pub lost: u64,
    /// Recording duration in ns, from the summary of a cleanly closed trace.
    pub duration_ns: Option<u64>,
    /// CLOCK_MONOTONIC ns of the end of the recording, from the summary.
    pub end_ns: Option<u64>,
}

/// Reads every block of the trace at `path` and calls `on_block(batch, rows, header, position)`
/// with the rows `filter` takes (blocks with none are not passed on). Corrupt blocks are skipped,
/// counted and reported; an error from `on_block` ends the scan.
pub(crate) fn scan(
    path: &Path,
    filter: &Filter,
    mut on_block: impl FnMut(&EventBatch, Rows<'_>, &TraceHeader, Position) -> Result<(), ExportError>,
) -> Result<ScanReport, ExportError> {
    let mut reader = TraceReader::open_with(path, ReadOptions { skip_corrupt: true, projection: None })?;
    let mut report = ScanReport { header: reader.header().clone(), ..Default::default() };
    let mut ctx = EvalContext::new(reader.header());
    let take_all = filter.is_match_all();
    let mut batch = EventBatch::default();
    let mut selected: Vec<u32> = Vec::new();
    while let Some(r) = reader.next_batch_into(&mut batch) {
        match r {
            Ok(()) => {}
            Err(e) if e.is_corrupt_block() => {
                report.corrupt_blocks += 1;
                report.warnings.push(format!("{e} (skipped)"));
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        report.events_read += batch.len() as u64;
        let stats = reader.stats();
        let pos = Position { bytes: stats.bytes, file_size: stats.file_size };
        let rows = if take_all {
            Rows::All
        } else {
            ctx.observe(&batch);
            selected.clear();
            selected.extend((0..batch.len()).filter(|&i| filter.matches(&batch, i, &ctx)).map(|i| i as u32));
            if selected.len() == batch.len() {
                Rows::All
            } else {
                Rows::Some(&selected)
            }
        };
        let n = rows.len(&batch);
        if n == 0 {
            continue;
        }
        report.events_matched += n as u64;
        on_block(&batch, rows, reader.header(), pos)?;
    }
    report.warnings.extend(reader.warnings().iter().map(|w| w.to_string()));
    report.lost = reader.summary().map_or(reader.stats().lost_total, |s| s.lost);
    report.duration_ns = reader.summary().map(|s| s.duration_ns);
    report.end_ns = reader.summary().map(|s| s.end_ns);
    Ok(report)
}

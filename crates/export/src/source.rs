//! Where exported events come from: the one function of this crate that reads a trace.
//!
//! Everything else works on the blocks it hands over; the reading itself is the shared filtered
//! scan (`latscope-scan`), as for every other reader of traces.

use std::path::Path;

use latscope_event::{EventBatch, TraceHeader};
use latscope_filter::Filter;
use latscope_scan::{InputFormat, Scan, ScanOptions};

use crate::ExportError;

/// The events of one block that the filter took.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Rows<'a> {
    /// Every event of the block.
    All,
    /// These rows of the block, ascending.
    Some(&'a [u32]),
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
    /// The trace header, with the cgroups the recording met after it began (read with the
    /// blocks).
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
    /// The trace's stack table (`record --why`), from every block read, filtered out or not.
    pub stacks: latscope_event::StackTable,
}

/// Reads every block of the trace at `path` through the shared filtered scan
/// ([`latscope_scan::Scan`]) and calls `on_block(batch, rows, header, position)` with the rows
/// `filter` takes (blocks with none are not passed on). `header` is the trace's as known once the
/// block is read: the cgroups of containers started during the recording arrive with the blocks
/// (their tables are in the blocks' metadata), so the header the trace opened with lacks them.
/// Corrupt blocks are skipped, counted and reported; an error from `on_block` ends the scan.
///
/// `on_block` may take the batch over, leaving another in its place (one it is done with): the
/// next block is decoded into whatever it leaves, so batches handed to another thread are
/// neither copied nor allocated afresh.
pub(crate) fn scan(
    path: &Path,
    filter: &Filter,
    mut on_block: impl FnMut(&mut EventBatch, Rows<'_>, &TraceHeader, Position) -> Result<(), ExportError>,
) -> Result<ScanReport, ExportError> {
    // Every column but a call's intervals off the CPU, which no export here writes (25 columns:
    // decoding them cost the Parquet export 5 % more).
    let columns =
        latscope_trace::Column::ALL.into_iter().filter(|c| !latscope_event::OFF_COLUMNS.contains(&c.name())).collect();
    let opts = ScanOptions { filter: filter.clone(), columns: Some(columns), zone: None };
    let mut scan = Scan::open(path, InputFormat::Trace, opts)?;
    let mut report = ScanReport::default();
    let mut held = EventBatch::default();
    let mut rows: Vec<u32> = Vec::new();
    loop {
        // Where the reader is before this block (the chunk borrows the scan): progress lags one
        // block, which a progress line does not show.
        let pos = scan
            .reader()
            .map(|r| {
                let st = r.stats();
                Position { bytes: st.bytes, file_size: st.file_size }
            })
            .unwrap_or_default();
        let Some(chunk) = scan.next_batch() else { break };
        let chunk = chunk?;
        let total = chunk.batch.len();
        if !chunk.batch.stacks.is_empty() {
            if let Err(e) = report.stacks.add_lines(&chunk.batch.stacks) {
                report.warnings.push(format!("{}: {e} (those stacks are left out)", path.display()));
            }
        }
        report.events_read += total as u64;
        let n = chunk.rows.len();
        if n == 0 {
            continue;
        }
        let all = n == total;
        if !all {
            rows.clear();
            rows.extend_from_slice(chunk.rows);
        }
        report.events_matched += n as u64;
        // `held` is empty between blocks: it takes the block for `on_block`, then gives the scan
        // what `on_block` left (the block, or a batch to decode the next one into).
        scan.swap_batch(&mut held);
        let r = on_block(&mut held, if all { Rows::All } else { Rows::Some(&rows) }, scan.header(), pos);
        scan.swap_batch(&mut held);
        r?;
    }
    report.header = scan.header().clone();
    let r = scan.report();
    report.corrupt_blocks = r.corrupt.len() as u64;
    let cut = report.stacks.truncation();
    if !cut.is_empty() {
        report.warnings.push(format!(
            "{}: the stack table is past its bounds: {} (their calls show a missing stack)",
            path.display(),
            cut.describe()
        ));
    }
    let stacks = std::mem::take(&mut report.warnings);
    report.warnings = r.corrupt.iter().map(|c| format!("{c} (skipped)")).chain(r.warnings).chain(stacks).collect();
    report.lost = r.lost;
    report.duration_ns = r.summary.map(|s| s.duration_ns);
    report.end_ns = r.summary.map(|s| s.end_ns);
    Ok(report)
}

//! Traces to Parquet: the events table (one row per event), and the processes, disks and traces
//! tables, in one file or partitioned Hive-style by host, date and hour.

mod chunk;
mod convert;
mod schema;
mod sink;
mod tables;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use latscope_chain::ChainIndex;
use latscope_event::{EventBatch, StackTable, TraceHeader, WHY_PART_NAMES};
use latscope_filter::Filter;
use latscope_scan::{InputFormat, Scan, ScanOptions};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use serde::Serialize;

pub use schema::{
    ColumnDoc, DISK_COLUMNS, EVENT_COLUMNS, PARTITION_KEYS, PROCESS_COLUMNS, STACK_COLUMNS, TRACE_COLUMNS,
};
pub use sink::WrittenFile;

use chunk::Derived;
use convert::{Sel, TraceContext};
use sink::{EventSink, PartWriter, Partitions};

use crate::source::{scan, Position, Rows};
use crate::ExportError;

/// Rows per row group of the events table (see [`ParquetOptions::row_group_rows`]).
pub const DEFAULT_ROW_GROUP_ROWS: usize = 1 << 20;
/// zstd level of the Parquet pages.
pub const DEFAULT_ZSTD_LEVEL: i32 = 1;
/// Partition files open at once in a partitioned export (each buffers up to one row group).
pub const MAX_OPEN_PARTITIONS: usize = 4;
/// Blocks waiting between the reading thread and the Parquet encoder (besides the one each is
/// working on): one keeps both busy.
const PIPELINE_BLOCKS: usize = 1;
/// Event batches in use at most: the one the reader decodes into, the one waiting, the one being
/// encoded. A fixed set goes round (the reader waits for one back rather than making another):
/// batches made and dropped by turns left the heap's peak to the threads' timing (one to three
/// batches' worth, 20 MiB each, more from one run to the next).
const BATCHES: usize = PIPELINE_BLOCKS + 2;
/// Largest block handed to the encoder as it is (a recording's blocks may hold up to 1 Mi
/// events); bigger ones go in parts of this many events.
const HANDOVER_ROWS: usize = 1 << 16;

/// Where the Parquet output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// The events in this one file (replaced if it exists); the other tables next to it as
    /// `STEM.processes.parquet`, `STEM.disks.parquet` and `STEM.traces.parquet`.
    File(PathBuf),
    /// A directory: `events/host=H/date=YYYY-MM-DD/hour=0..23/part-N.parquet` and
    /// `processes/host=H/part-N.parquet` (likewise `disks`, `traces`). New parts are numbered
    /// after those already there: exporting into the same directory again adds files and never
    /// replaces one. The partition keys ([`PARTITION_KEYS`]) are not columns of the files.
    Partitioned(PathBuf),
}

impl Output {
    /// A path ending in `.parquet` is one file, anything else a partitioned directory.
    pub fn from_path(p: impl Into<PathBuf>) -> Output {
        let p = p.into();
        if p.extension().is_some_and(|e| e == "parquet") {
            Output::File(p)
        } else {
            Output::Partitioned(p)
        }
    }

    /// The path given.
    pub fn path(&self) -> &Path {
        match self {
            Output::File(p) | Output::Partitioned(p) => p,
        }
    }

    /// Where a side table (`processes`, `disks`, `traces`) of one file output goes.
    fn side_file(file: &Path, table: &str) -> PathBuf {
        let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        file.with_file_name(format!("{stem}.{table}.parquet"))
    }
}

/// How to export.
#[derive(Debug, Clone)]
pub struct ParquetOptions {
    /// Where to.
    pub output: Output,
    /// Only the events this filter takes go to the events table (the other tables are whole).
    pub filter: Filter,
    /// Host name to write instead of each trace header's.
    pub host: Option<String>,
    /// Rows per row group (default [`DEFAULT_ROW_GROUP_ROWS`], 1 Mi). Row groups are what query
    /// engines split work by and prune with min/max statistics: about 1 Mi events compress to
    /// 10-30 MB, large enough for long sequential reads of each column chunk (~1 MB each) and
    /// few footers, small enough to parallelise a single hour of a busy host and to skip by time.
    pub row_group_rows: usize,
    /// zstd level, 1 (fast, default) to 22.
    pub zstd_level: i32,
    /// Also write the processes, disks, traces and stacks tables (default true).
    pub tables: bool,
    /// Names the frames of the stacks table (user frames symbolized from the binaries at hand,
    /// as the views do); without it, kernel frames as named when recording and user frames as
    /// `file+0xoffset`.
    pub frame_names: Option<FrameNamer>,
}

/// The frame names of a trace's stacks, by stack id, innermost first, one per frame (a stack
/// without frames: one name saying why). The CLI passes the views' symbolizer.
#[derive(Clone)]
pub struct FrameNamer(pub Arc<NameFrames>);

/// What a [`FrameNamer`] calls: frame names by stack id for a trace's stack table.
pub type NameFrames = dyn Fn(&StackTable) -> std::collections::HashMap<u32, Vec<String>> + Send + Sync;

impl std::fmt::Debug for FrameNamer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FrameNamer")
    }
}

impl ParquetOptions {
    /// Every event to `output`, with the defaults.
    pub fn new(output: Output) -> ParquetOptions {
        ParquetOptions {
            output,
            filter: Filter::parse("").expect("the empty filter parses"),
            host: None,
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
            zstd_level: DEFAULT_ZSTD_LEVEL,
            tables: true,
            frame_names: None,
        }
    }
}

/// What was exported from one trace.
#[derive(Debug, Clone, Serialize)]
pub struct TraceExport {
    /// The trace file.
    pub path: PathBuf,
    /// Host name written for its events.
    pub host: String,
    /// Events read from it.
    pub events_read: u64,
    /// Events written (those the filter took).
    pub events_exported: u64,
    /// Events the probes lost while recording.
    pub events_lost: u64,
    /// Damaged blocks skipped.
    pub corrupt_blocks: u64,
    /// Warnings of the reader (file cut short, ...), as sentences.
    pub warnings: Vec<String>,
    #[serde(skip)]
    header: TraceHeader,
    #[serde(skip)]
    end_ns: Option<u64>,
    #[serde(skip)]
    stacks: StackTable,
}

/// What an export did.
#[derive(Debug, Clone, Serialize)]
pub struct ParquetSummary {
    /// Per trace, in the order given.
    pub traces: Vec<TraceExport>,
    /// Every file written, events first.
    pub files: Vec<WrittenFile>,
    /// Events written in all.
    pub events_exported: u64,
    /// Bytes of all files written.
    pub bytes_written: u64,
}

/// Where an export is, for progress reports.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// The trace being read.
    pub path: &'a Path,
    /// Its index in the list, from 0.
    pub trace_index: usize,
    /// Number of traces.
    pub traces: usize,
    /// Bytes of it read so far.
    pub bytes_read: u64,
    /// Its size.
    pub file_size: u64,
    /// Events written so far, all traces.
    pub events_exported: u64,
}

/// Writer settings of every table.
fn writer_properties(o: &ParquetOptions) -> Result<Arc<WriterProperties>, ExportError> {
    let level = ZstdLevel::try_new(o.zstd_level)
        .map_err(|_| ExportError::Invalid(format!("zstd level {} is not in 1..=22", o.zstd_level)))?;
    if o.row_group_rows == 0 {
        return Err(ExportError::Invalid("row groups need at least one row".into()));
    }
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_max_row_group_row_count(Some(o.row_group_rows))
        .set_created_by(format!("latscope {}", env!("CARGO_PKG_VERSION")))
        .set_write_batch_size(8192)
        .set_statistics_enabled(EnabledStatistics::Chunk);
    // Encodings chosen per column by measuring size and encoding time on realistic events
    // (docs/EXPORT.md): increasing times and wide-ranging latencies and offsets are smaller and
    // several times faster delta-encoded than through a dictionary; columns that are almost
    // always 0 cost least plain; the rest (small sets of values) take the default dictionary.
    for c in ["time", "time_ns", "lat", "off"] {
        b = b
            .set_column_dictionary_enabled(ColumnPath::from(c), false)
            .set_column_encoding(ColumnPath::from(c), Encoding::DELTA_BINARY_PACKED);
    }
    let plain = [
        "flags",
        "mode",
        "addr",
        "qtime",
        "wake_sector",
        "wake_held_ns",
        "wake_queue_ns",
        "wake_device_ns",
        "waker_was_in_ns",
        "fault_off",
    ]
    .map(String::from);
    for c in plain.into_iter().chain(WHY_PART_NAMES.iter().map(|p| format!("why_{p}"))) {
        b = b.set_column_dictionary_enabled(ColumnPath::from(c), false);
    }
    // Min/max of strings cost a comparison per row (a third of their encoding time) and prune
    // nothing useful (row groups mix operations, paths and kinds); the host's are kept.
    for c in [
        "kind",
        "op",
        "comm",
        "fd_type",
        "path",
        "path2",
        "disk",
        "waker_kind",
        "waker_comm",
        "waker_was_in",
        "fault_path",
    ] {
        b = b.set_column_statistics_enabled(ColumnPath::from(c), EnabledStatistics::None);
    }
    Ok(Arc::new(b.build()))
}

/// Opens every trace first, so that an unreadable one stops the export before anything is written.
fn check_traces(traces: &[PathBuf]) -> Result<Vec<TraceHeader>, ExportError> {
    traces.iter().map(|p| Ok(Scan::open(p, InputFormat::Trace, ScanOptions::default())?.header().clone())).collect()
}

/// Exports `traces` to Parquet as `opts` says, calling `progress` after every block read.
///
/// Memory stays bounded whatever the traces' sizes: the block being read, three batches of up
/// to 64 Ki events going round (one being decoded into, one waiting, one being encoded), and one
/// row group per open output file. The events are
/// encoded on a second thread, straight from the batches the reader decoded, while the next
/// block is read. Nothing is left under a final name unless complete: files are
/// written under a temporary name and moved into place when finished; on error the files being
/// written are removed (in a partitioned export, the parts finished before stay: each is a
/// complete file).
pub fn export_parquet(
    traces: &[PathBuf],
    opts: &ParquetOptions,
    progress: &mut dyn FnMut(&Progress<'_>),
) -> Result<ParquetSummary, ExportError> {
    if traces.is_empty() {
        return Err(ExportError::Invalid("no trace to export".into()));
    }
    let props = writer_properties(opts)?;
    let headers = check_traces(traces)?;
    let schema = schema::event_schema();
    let sink = match &opts.output {
        Output::File(p) => {
            if p.is_dir() {
                return Err(ExportError::Invalid(format!(
                    "{} is a directory: name a .parquet file, or a directory without the .parquet extension",
                    p.display()
                )));
            }
            let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if !parent.is_dir() {
                return Err(ExportError::Invalid(format!(
                    "cannot write {}: directory {} does not exist",
                    p.display(),
                    parent.display()
                )));
            }
            EventSink::Single(Box::new(PartWriter::create_file(p, "events", schema, props.clone())?))
        }
        Output::Partitioned(dir) => {
            if dir.exists() && !dir.is_dir() {
                return Err(ExportError::Invalid(format!("{} exists and is not a directory", dir.display())));
            }
            // The host is in the directory names, not in the files (see `PARTITION_KEYS`).
            let schema = schema::without_partition_keys(&schema);
            EventSink::Partitioned(Partitions::new(dir.join("events"), schema, props.clone(), MAX_OPEN_PARTITIONS))
        }
    };

    let (tx, rx) = sync_channel::<Block>(PIPELINE_BLOCKS);
    // Batches the encoder is done with go back to the reader, to be decoded into again, with
    // the columns derived for them, to be filled again.
    let (back_tx, back_rx) = sync_channel::<(EventBatch, Derived)>(BATCHES);
    // The scan decodes into a batch of its own: the others are made as the pipeline fills.
    let mut made = 1;
    let mut spare_batch = || match back_rx.try_recv() {
        Ok(bd) => bd,
        Err(_) if made < BATCHES => {
            made += 1;
            Default::default()
        }
        // Closed: the encoder failed, and the next send says so.
        Err(_) => back_rx.recv().unwrap_or_default(),
    };
    let encoder = std::thread::Builder::new()
        .name("parquet-encode".into())
        .spawn(move || encode_events(sink, rx, back_tx))
        .map_err(|e| ExportError::Invalid(format!("cannot start the encoding thread: {e}")))?;

    let mut done = Vec::with_capacity(traces.len());
    let mut exported = 0u64;
    let mut result = Ok(());
    for (i, (path, header)) in traces.iter().zip(&headers).enumerate() {
        let host: Arc<str> = Arc::from(opts.host.as_deref().unwrap_or(header.hostname.as_str()));
        let mut cx = Arc::new(TraceContext::new(header, &host));
        // The calls of every block read, for the chains of waits (which go through them).
        let mut chains = ChainIndex::new();
        let scanned = scan(path, &opts.filter, |batch, rows, now, pos: Position| {
            // Containers started during the recording: their cgroups arrive with the blocks
            // (the table only grows). The encoder maps dictionary keys by value, so blocks
            // encoded with the larger table share row groups with the earlier ones.
            if now.cgroups.len() != cx.cgroups_known() {
                cx = Arc::new(TraceContext::new(now, &host));
            }
            chains.add(batch);
            let mut send = |batch: EventBatch, rows: Option<Vec<u32>>, mut derived: Derived| {
                exported += rows.as_ref().map_or(batch.len(), Vec::len) as u64;
                derive(header, &chains, &batch, rows.as_deref(), &mut derived);
                let block = Block { host: host.clone(), cx: cx.clone(), batch, rows, derived };
                // A closed channel means the encoder failed: its error is reported below.
                tx.send(block).map_err(|_| ExportError::Invalid("the Parquet encoder stopped".into()))
            };
            if batch.len() <= HANDOVER_ROWS {
                let rows = match rows {
                    Rows::All => None,
                    Rows::Some(r) => Some(r.to_vec()),
                };
                let (spare, derived) = spare_batch();
                send(std::mem::replace(batch, spare), rows, derived)?;
            } else {
                // A big block goes in copied parts, so that memory holds a few parts, not blocks.
                let n = match rows {
                    Rows::All => batch.len(),
                    Rows::Some(r) => r.len(),
                };
                for at in (0..n).step_by(HANDOVER_ROWS) {
                    let end = n.min(at + HANDOVER_ROWS);
                    let (mut part, derived) = spare_batch();
                    part.clear();
                    match rows {
                        Rows::All => part.append_range(batch, at..end),
                        Rows::Some(r) => r[at..end].iter().for_each(|&i| part.push_from(batch, i as usize)),
                    }
                    send(part, None, derived)?;
                }
            }
            progress(&Progress {
                path,
                trace_index: i,
                traces: traces.len(),
                bytes_read: pos.bytes,
                file_size: pos.file_size,
                events_exported: exported,
            });
            Ok(())
        });
        match scanned {
            Ok(r) => done.push(TraceExport {
                path: path.clone(),
                host: host.to_string(),
                events_read: r.events_read,
                events_exported: r.events_matched,
                events_lost: r.lost,
                corrupt_blocks: r.corrupt_blocks,
                warnings: r.warnings,
                header: r.header,
                end_ns: r.end_ns,
                stacks: r.stacks,
            }),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    drop(tx);
    let encoded = encoder.join().map_err(|_| ExportError::Invalid("the Parquet encoder panicked".into()))?;
    // The encoder's own error explains a failed send better than the send does.
    let mut files = match (encoded, result) {
        (Err(e), _) | (Ok(_), Err(e)) => return Err(e),
        (Ok(files), Ok(())) => files,
    };

    if opts.tables {
        files.extend(write_tables(&done, opts, &props)?);
    }
    Ok(ParquetSummary {
        events_exported: done.iter().map(|t| t.events_exported).sum(),
        bytes_written: files.iter().map(|f| f.bytes).sum(),
        traces: done,
        files,
    })
}

/// A block's events on their way to the encoder.
struct Block {
    host: Arc<str>,
    cx: Arc<TraceContext>,
    batch: EventBatch,
    /// The rows the filter took (`None`: all).
    rows: Option<Vec<u32>>,
    /// What the batch alone cannot give (the chains of waits), by row of `batch`.
    derived: Derived,
}

/// Into `d` (emptied first): the chains of waits of the rows `rows` of `b` (all: `None`), by row
/// of `b` (empty for the others), through the calls `chains` indexed; devices named by `h`'s
/// disks. `d` is one an earlier block used: columns of a block's length made per block and
/// freed by the other thread left the heap's peak to chance.
fn derive(h: &TraceHeader, chains: &ChainIndex, b: &EventBatch, rows: Option<&[u32]>, d: &mut Derived) {
    d.chain.clear();
    d.chain_root.clear();
    d.chain_root_ns.clear();
    d.chain_root_ns.resize(b.len(), 0);
    let mut want = vec![rows.is_none(); b.len()];
    for &r in rows.unwrap_or(&[]) {
        want[r as usize] = true;
    }
    let disk = |dev: u32| {
        let mut s = String::new();
        let _ = latscope_event::args::write_disk(&mut s, dev, h.disk_name(dev));
        s
    };
    for (i, w) in want.iter().enumerate() {
        match chains.chain(b, i).filter(|_| *w) {
            Some(c) => {
                d.chain.push(&c.to_json(disk).to_string());
                d.chain_root.push(&c.root.label(disk));
                d.chain_root_ns[i] = c.root_ns as i64;
            }
            None => {
                d.chain.push("");
                d.chain_root.push("");
            }
        }
    }
}

/// The encoding thread: writes every block it receives and hands its batch back, then finishes
/// the files. On error it returns at once, which closes the channel and stops the reader.
fn encode_events(
    mut sink: EventSink,
    rx: Receiver<Block>,
    back: SyncSender<(EventBatch, Derived)>,
) -> Result<Vec<WrittenFile>, ExportError> {
    for b in rx {
        let sel = match &b.rows {
            None => Sel::Range(0, b.batch.len()),
            Some(r) => Sel::Idx(r),
        };
        sink.write(&b.host, &b.cx, &b.batch, Some(&b.derived), sel)?;
        // Never full (it has room for every batch); closed when the reader stopped.
        let _ = back.try_send((b.batch, b.derived));
    }
    sink.finish()
}

/// The processes, disks, traces and stacks tables.
fn write_tables(
    done: &[TraceExport],
    opts: &ParquetOptions,
    props: &Arc<WriterProperties>,
) -> Result<Vec<WrittenFile>, ExportError> {
    let filter = (!opts.filter.is_match_all()).then(|| opts.filter.source());
    // One file per table, or one part per table and host.
    let groups: Vec<Vec<&TraceExport>> = match opts.output {
        Output::File(_) => vec![done.iter().collect()],
        Output::Partitioned(_) => {
            let mut hosts: Vec<&str> = done.iter().map(|t| t.host.as_str()).collect();
            hosts.sort_unstable();
            hosts.dedup();
            hosts.iter().map(|h| done.iter().filter(|t| t.host == *h).collect()).collect()
        }
    };
    let mut files = Vec::new();
    for table in ["processes", "disks", "traces", "stacks"] {
        for group in &groups {
            let mut batch = match table {
                "processes" => tables::processes(group)?,
                "disks" => tables::disks(group)?,
                "stacks" => tables::stacks(group, opts.frame_names.as_ref())?,
                _ => tables::traces(group, filter)?,
            };
            let mut w = match &opts.output {
                Output::File(p) => {
                    PartWriter::create_file(&Output::side_file(p, table), table, batch.schema(), props.clone())?
                }
                Output::Partitioned(dir) => {
                    let d = dir.join(table).join(format!("host={}", sink::hive_escape(&group[0].host)));
                    // The host is in the directory name, not in the file (see `PARTITION_KEYS`).
                    let cols: Vec<usize> = (0..batch.num_columns())
                        .filter(|&i| !schema::PARTITION_KEYS.contains(&batch.schema().field(i).name().as_str()))
                        .collect();
                    batch = batch.project(&cols).map_err(|e| ExportError::Invalid(format!("{table} table: {e}")))?;
                    PartWriter::create_part(&d, table, batch.schema(), props.clone())?
                }
            };
            w.write(&batch)?;
            files.push(w.finish()?);
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, Int64Type};
    use arrow_array::RecordBatch;
    use latscope_trace::{synth, Summary, TraceWriter};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    /// `(time_ns, pid, path)` of every row of the events file at `path`.
    fn rows_of(path: &Path) -> Vec<(i64, i32, String)> {
        let f = std::fs::File::open(path).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(f).unwrap().build().unwrap();
        let got: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        let mut rows = Vec::new();
        for b in &got {
            let t = b.column_by_name("time_ns").unwrap().as_primitive::<Int64Type>();
            let pid = b.column_by_name("pid").unwrap().as_primitive::<Int32Type>();
            let path = b.column_by_name("path").unwrap().as_string::<i32>();
            rows.extend((0..b.num_rows()).map(|i| (t.value(i), pid.value(i), path.value(i).to_string())));
        }
        rows
    }

    /// Blocks bigger than the encoder takes whole (copied in parts) and small ones (handed
    /// over), whole and filtered: every event the filter takes arrives once, in order.
    #[test]
    fn big_and_small_blocks_arrive_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.lst");
        let header = synth::sample_header();
        let mut rng = synth::Rng::new(11);
        let mut w = TraceWriter::create(&trace, &header).unwrap();
        let mut all = EventBatch::default();
        for n in [HANDOVER_ROWS * 2 + 17, 5, HANDOVER_ROWS, HANDOVER_ROWS + 1, 3000] {
            let mut b = synth::random_batch(&mut rng, n);
            let first = all.len();
            for (i, t) in b.ts.iter_mut().enumerate() {
                *t = 1_000_000_000 + (first + i) as u64 * 1000;
            }
            w.write_batch(&b, 0).unwrap();
            all.append(&b);
        }
        w.finish(Summary::default()).unwrap();
        let expect = |keep: &dyn Fn(usize) -> bool| -> Vec<(i64, i32, String)> {
            (0..all.len())
                .filter(|&i| keep(i))
                .map(|i| (all.ts[i] as i64 + header.realtime_offset_ns, all.pid[i] as i32, all.path.get(i).to_string()))
                .collect()
        };

        let out = dir.path().join("all.parquet");
        let s =
            export_parquet(std::slice::from_ref(&trace), &ParquetOptions::new(Output::File(out.clone())), &mut |_| {})
                .unwrap();
        assert_eq!(s.events_exported, all.len() as u64);
        assert_eq!(rows_of(&out), expect(&|_| true));

        let out = dir.path().join("some.parquet");
        let mut opts = ParquetOptions::new(Output::File(out.clone()));
        opts.filter = Filter::parse("proc.pid < 2000000").unwrap();
        export_parquet(&[trace], &opts, &mut |_| {}).unwrap();
        let some = expect(&|i| all.pid[i] < 2_000_000);
        assert!(some.len() > all.len() / 4 && some.len() < all.len() * 3 / 4);
        assert_eq!(rows_of(&out), some);
    }

    /// Past 32,766 cgroups in a trace, the container columns of the events in the others were
    /// silently empty (16-bit dictionary keys): every cgroup the trace names has its values.
    #[test]
    fn events_in_any_of_forty_thousand_cgroups_carry_their_container_columns() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.lst");
        let mut header = synth::sample_header();
        let n = 40_000u64;
        header.cgroups = (1..=n)
            .map(|i| latscope_event::CgroupInfo {
                id: 1000 + i,
                path: format!("/c{i}"),
                container_id: format!("{i:064x}"),
                container_name: format!("web-{i}"),
                ..Default::default()
            })
            .collect();
        let mut rng = synth::Rng::new(12);
        let mut b = synth::random_batch(&mut rng, 4);
        for (c, i) in b.cgroup.iter_mut().zip([1u64, 32_766, 32_767, n]) {
            *c = 1000 + i;
        }
        let mut w = TraceWriter::create(&trace, &header).unwrap();
        w.write_batch(&b, 0).unwrap();
        w.finish(Summary::default()).unwrap();
        let out = dir.path().join("c.parquet");
        export_parquet(&[trace], &ParquetOptions::new(Output::File(out.clone())), &mut |_| {}).unwrap();
        let f = std::fs::File::open(&out).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(f).unwrap().build().unwrap();
        let mut names = Vec::new();
        for rb in reader {
            let rb = rb.unwrap();
            let d = rb.column_by_name("container_name").unwrap().as_dictionary::<Int32Type>();
            let values = d.values().as_string::<i32>();
            names.extend(d.keys().values().iter().map(|&k| values.value(k as usize).to_string()));
        }
        assert_eq!(names, ["web-1", "web-32766", "web-32767", "web-40000"]);
    }

    /// A container started during the recording: its cgroup is in the metadata of a later block,
    /// not in the header the export opens. Its rows carry its names, in one file and in
    /// partitions, and the rows of the cgroup known from the start keep theirs.
    #[test]
    fn cgroups_met_during_the_recording_name_their_rows() {
        use latscope_event::CgroupInfo;
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.lst");
        let (early_id, late_id) = ("a".repeat(64), "b".repeat(64));
        let mut early = CgroupInfo::from_path(100, &format!("/system.slice/docker-{early_id}.scope"));
        early.container_name = "early".into();
        let mut late = CgroupInfo::from_path(200, &format!("/system.slice/docker-{late_id}.scope"));
        late.container_name = "late".into();
        late.image = "busybox:1.36".into();
        let mut header = synth::sample_header();
        header.cgroups = vec![early.clone()];
        let mut rng = synth::Rng::new(5);
        let mut w = TraceWriter::create(&trace, &header).unwrap();
        for (n, id) in [(300usize, 100u64), (200, 200), (100, 100)] {
            let mut b = synth::random_batch(&mut rng, n);
            b.cgroup.iter_mut().for_each(|c| *c = id);
            if id == 200 {
                b.cgroups = serde_json::to_string(&late).unwrap() + "\n";
            }
            w.write_batch(&b, 0).unwrap();
        }
        w.finish(Summary::default()).unwrap();

        let want = std::collections::BTreeMap::from([
            ([early_id, "early".into(), String::new(), early.path.clone()], 400),
            ([late_id, "late".into(), "busybox:1.36".into(), late.path.clone()], 200),
        ]);
        for out in [Output::File(dir.path().join("one.parquet")), Output::Partitioned(dir.path().join("fleet"))] {
            export_parquet(std::slice::from_ref(&trace), &ParquetOptions::new(out.clone()), &mut |_| {}).unwrap();
            let mut files = Vec::new();
            let mut stack = vec![match &out {
                Output::File(p) => p.clone(),
                Output::Partitioned(d) => d.join("events"),
            }];
            while let Some(p) = stack.pop() {
                match std::fs::read_dir(&p) {
                    Ok(entries) => stack.extend(entries.map(|e| e.unwrap().path())),
                    Err(_) => files.push(p),
                }
            }
            let mut got = std::collections::BTreeMap::new();
            for f in files {
                let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&f).unwrap()).unwrap();
                for rb in reader.build().unwrap() {
                    let rb = rb.unwrap();
                    let col = |name: &str, i: usize| {
                        let d = rb.column_by_name(name).unwrap().as_dictionary::<Int32Type>();
                        d.values().as_string::<i32>().value(d.keys().value(i) as usize).to_string()
                    };
                    for i in 0..rb.num_rows() {
                        let key: [String; 4] =
                            ["container_id", "container_name", "container_image", "cgroup_path"].map(|c| col(c, i));
                        *got.entry(key).or_insert(0) += 1;
                    }
                }
            }
            assert_eq!(got, want, "{out:?}");
        }
    }
}

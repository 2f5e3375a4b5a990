//! A trace as a Perfetto trace (protobuf `TracePacket`s) for ui.perfetto.dev and trace_processor:
//! every thread's calls over time, what woke them, the disks' requests, counters.
//!
//! - A track per process (named, with its command line and container as process labels) and
//!   per thread (named by its command name); each syscall a slice on its thread, entry to
//!   return, named by the syscall, with its fd, path, bytes, result and, from `record --why`,
//!   its breakdown (the parts' totals: the trace records how long each part took, not when, so
//!   they are arguments), waker and what the waker was in; inside it, the call's longest wait,
//!   the one wait whose time the trace records, as a slice (category `latscope`).
//! - A track per disk, each block request a slice from issue to completion, its queue time on
//!   the disk's queue lanes.
//! - Process events (fork, exec, exit) as instants on their process.
//! - Wake-ups as flows from the waking thread's call to the woken call, and from a block
//!   request to the call its completion woke; chains of wake-ups follow as chains of flows
//!   (see [`links`](self) for how a waking call is found, and when none is).
//! - Counter tracks per interval: syscalls and block requests per second, p50 and p99 latency,
//!   bytes per second, events lost.
//!
//! One slice per event, its duration the event's latency: a trace processor's slice table (less
//! the `latscope`-category queue and wait slices) holds what `latscope events` prints for the
//! same filter. Streamed: the trace is read once, slices are held only while their links may still come
//! (bounded by count), interning tables are cleared when they grow; memory does not grow with
//! the trace. A file larger than [`PerfettoOptions::max_bytes`] is refused, or cut into parts
//! by time with [`PerfettoOptions::split`].

mod counters;
mod intern;
mod links;
mod out;
mod proto;
mod slices;
mod tracks;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use foldhash::fast::RandomState;
use latscope_event::hint::prefetch_row;
use latscope_event::{EventBatch, EventKind, ProcOp, Span, TraceHeader, OFF_COLUMNS};
use latscope_filter::Filter;
use latscope_scan::{InputFormat, Scan, ScanOptions};
use latscope_trace::Column;
use serde::Serialize;

pub use links::LinkStats;
pub use out::WrittenPart;

use counters::Counters;
use links::Linker;
use out::Out;
use slices::{Held, Slice, SliceBuilder, QUEUED_KEY};
use tracks::Tracks;

use crate::ExportError;

/// A flow with one end written (with `--split`): the file it is in ([`OpenFlow::LEFT_OUT`]: the
/// flow is left out), and that end's slice (track, start) and side (the flow's start or its end).
#[derive(Clone, Copy)]
struct OpenFlow {
    part: u32,
    track: u64,
    ts: u64,
    began: bool,
}

impl OpenFlow {
    /// A flow left out of the export because its ends would fall in two files.
    const LEFT_OUT: OpenFlow = OpenFlow { part: u32::MAX, track: 0, ts: 0, began: false };
}

/// Most bytes of the instant that closes a flow where a file is cut ([`Out::flow_cut`]): kept
/// free in a file for each flow open, so that closing them keeps it within its size.
const FLOW_CUT_ROOM: u64 = 96;

/// Largest file written by default: the Perfetto UI runs in a browser, where a trace takes two
/// to four times its size in memory and about 2 GB is available.
pub const DEFAULT_MAX_BYTES: u64 = 512 << 20;
/// How long (ns of the trace, past their arrival) slices wait for the other end of their links:
/// a recording writes syscalls and block requests in blocks of their own, flushed every second.
pub const DEFAULT_HOLD_NS: u64 = 2_000_000_000;
/// Most slices held for links at once.
pub const DEFAULT_MAX_HELD: usize = 1 << 17;
/// Interval of the counter tracks.
pub const DEFAULT_INTERVAL_NS: u64 = 1_000_000_000;

/// How to export.
#[derive(Debug, Clone)]
pub struct PerfettoOptions {
    /// The file (with [`PerfettoOptions::split`], parts `STEM.partN.EXT` beside it).
    pub output: PathBuf,
    /// Only the events this filter takes.
    pub filter: Filter,
    /// Largest file: a larger export is refused ([`ExportError::TooLarge`]) or, with `split`,
    /// continued in a new file.
    pub max_bytes: u64,
    /// Cut the export into files of at most `max_bytes` by time.
    pub split: bool,
    /// Interval of the counter tracks (ns).
    pub interval_ns: u64,
    /// How long slices wait for their links (ns of trace time past their arrival).
    pub hold_ns: u64,
    /// Most slices waiting for links at once (the export's memory bound).
    pub max_held: usize,
}

impl PerfettoOptions {
    /// Every event to `output`, with the defaults.
    pub fn new(output: impl Into<PathBuf>) -> PerfettoOptions {
        PerfettoOptions {
            output: output.into(),
            filter: Filter::parse("").expect("the empty filter parses"),
            max_bytes: DEFAULT_MAX_BYTES,
            split: false,
            interval_ns: DEFAULT_INTERVAL_NS,
            hold_ns: DEFAULT_HOLD_NS,
            max_held: DEFAULT_MAX_HELD,
        }
    }
}

/// What an export did.
#[derive(Debug, Clone, Serialize)]
pub struct PerfettoSummary {
    /// The trace read.
    pub trace: PathBuf,
    /// The files written, in time order.
    pub files: Vec<WrittenPart>,
    /// Bytes of all files.
    pub bytes_written: u64,
    /// Events read.
    pub events_read: u64,
    /// Events exported (one slice each).
    pub events_exported: u64,
    /// Queue-time slices of block requests (besides the events' slices).
    pub queue_slices: u64,
    /// Slices of calls' parts (on CPU, run queue, blocked: what on), inside the calls, in time
    /// order (besides the events' slices).
    pub part_slices: u64,
    /// Calls with such slices.
    pub part_calls: u64,
    /// Events the recording lost.
    pub events_lost: u64,
    /// Damaged blocks skipped.
    pub corrupt_blocks: u64,
    /// Processes, threads and disks with a track.
    pub processes: usize,
    /// Threads with a track.
    pub threads: usize,
    /// Disks with a track.
    pub disks: usize,
    /// Wake-ups and requests linked as flows, and those that could not be.
    pub links: LinkStats,
    /// Flows left out because their ends fell, or would have fallen, in two files (with
    /// `--split`: a file is cut at a moment no flow crosses, or at its size, where the flows
    /// open are closed by an instant in it).
    pub flows_cut_between_files: u64,
    /// Events left out of the counter tracks (they came after their interval was written).
    pub counter_events_late: u64,
    /// Times the interning tables were cleared because they grew.
    pub interning_resets: u64,
    /// Reader warnings (file cut short, ...), as sentences.
    pub warnings: Vec<String>,
}

/// Where an export is, for progress reports.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Bytes of the trace read.
    pub bytes_read: u64,
    /// Its size.
    pub file_size: u64,
    /// Events exported so far.
    pub events_exported: u64,
    /// Bytes written so far.
    pub bytes_written: u64,
}

/// The columns the export reads (with no filter, only those are decoded).
const OWN_COLUMNS: &[&str] = &[
    "kind",
    "ts",
    "lat",
    "pid",
    "tid",
    "nr",
    "ret",
    "fd",
    "off",
    "dev",
    "bytes",
    "flags",
    "cgroup",
    "qtime",
    "comm",
    "path",
    "path2",
    "waker_comm_lo",
    "waker_comm_hi",
    "runq_tid",
    "runq_cpu",
    "wake_dev",
    "wake_sector",
    "waker_wait_part",
    "waker_wait_ns",
    "fault_addr",
    "fault_path",
    "wait_start",
    "wait_end",
];

/// Every column the export reads: its own and the breakdown's.
fn columns() -> impl Iterator<Item = &'static str> {
    OWN_COLUMNS.iter().copied().chain(latscope_event::WHY_COLUMNS).chain(OFF_COLUMNS)
}

/// How many rows ahead of the one exported its columns are asked for (see [`prefetch_rows`]),
/// and every how many rows: 8 rows are a cache line of a 64-bit column.
const PREFETCH_ROWS: usize = 16;
const ROWS_PER_PREFETCH: usize = 8;

/// Asks the CPU for row `i` of the columns an event's slice is made of. The export reads some
/// 40 columns row by row, more streams than the hardware follows: each new line of each column
/// would otherwise be waited for. A hint: rows past the end are asked for harmlessly.
#[inline]
fn prefetch_rows(b: &EventBatch, i: usize) {
    macro_rules! ask {
        ($($c:ident),*) => { $( prefetch_row(&b.$c, i); )* };
    }
    ask!(kind, ts, lat, pid, tid, nr, ret, fd, off, dev, bytes, flags, cgroup, qtime);
    ask!(why_cpu, why_runq, why_io, why_lock, why_ipc, why_timer, why_fault, why_other, why_unknown);
    ask!(waker_ctx, waker_tid, waker_comm_lo, waker_comm_hi, waker_wait_part, waker_wait_ns);
    ask!(runq_tid, runq_cpu, wake_dev, wake_sector, fault_addr, wait_start, wait_end);
    for c in [&b.comm, &b.path, &b.path2] {
        prefetch_row(&c.offsets, i);
    }
}

/// The columns read only for a call that carries a breakdown, was woken by a thread, or was
/// woken by a block request (its waker's name, the wait it was in, the CPU's holder, the
/// page fault, its longest wait, the request's sector); with [`OFF_COLUMNS`], read from the
/// first block [`explained`] says has such a call: most recordings have none, and decoding
/// their zeros would cost a plain export a sixth more.
const EXPLAINED_ONLY: [&str; 11] = [
    "waker_comm_lo",
    "waker_comm_hi",
    "runq_tid",
    "runq_cpu",
    "wake_sector",
    "waker_wait_part",
    "waker_wait_ns",
    "fault_addr",
    "fault_path",
    "wait_start",
    "wait_end",
];

/// Whether a call of `b` carries a breakdown, a waking thread or a waking request: then the
/// block is read with [`EXPLAINED_ONLY`] and [`OFF_COLUMNS`].
fn explained(b: &EventBatch) -> bool {
    b.why_part_columns().iter().any(|c| c.iter().any(|&v| v != 0))
        || b.waker_ctx.iter().any(|&v| v != 0)
        || b.wake_dev.iter().any(|&v| v != 0)
}

/// Whether the recording was made with attribution (`--why`, `--why-above`, `--stacks`, or
/// `latscope why`): its calls may carry wake-ups to link.
fn recorded_why(h: &TraceHeader) -> bool {
    h.command_line.get(1).is_some_and(|c| c == "why")
        || h.command_line.iter().any(|a| a.starts_with("--why") || a == "--stacks")
}

/// The state of one export.
struct Export<'a> {
    header: TraceHeader,
    opts: &'a PerfettoOptions,
    tracks: Tracks,
    linker: Linker,
    counters: Counters,
    out: Out,
    /// Flows with one end written, by id.
    flow_file: HashMap<u64, OpenFlow, RandomState>,
    /// Flows with one end written in the file being written and the other still to come.
    flows_open: u64,
    flows_cut: u64,
    exported: u64,
    queue_slices: u64,
    /// The event being made into a slice (reused).
    slice: Slice,
}

impl Export<'_> {
    /// Takes event `i` of `b`.
    fn add(&mut self, b: &EventBatch, i: usize) {
        self.exported += 1;
        self.counters.add(b, i);
        let (ts, end) = (b.ts[i], b.end(i));
        let mut h = self.linker.blank();
        h.ts = ts;
        h.end = end;
        h.name_key = u32::from(b.kind[i]) << 16 | u32::from(b.nr[i]);
        let mut wake = None;
        let mut request = None;
        self.slice.clear();
        match EventKind::from_u8(b.kind[i]) {
            Some(EventKind::Syscall) => {
                let tid = b.tid[i];
                h.track = self.tracks.thread_lane(b.pid[i], tid, b.comm.bytes(i), b.cgroup[i], ts, end);
                h.tid = tid;
                // The breakdown, read once (zeros in most recordings).
                let parts = b.why_parts(i);
                SliceBuilder { h: &mut self.slice }.syscall(&self.header, b, i, &parts);
                if parts[1..].iter().any(|&v| v != 0) {
                    slices::call_parts(b, i, &parts, &mut self.slice.parts);
                }
                if b.waker_ctx[i] == 1 && b.waker_tid[i] != 0 && b.waker_tid[i] != tid {
                    // The wake-up's instant known: the call in progress then woke it, whatever
                    // its kind. Else the blocked part the call spent the most in (io, lock,
                    // ipc, ...) chooses among the calls of the window.
                    let part = match b.wake_instant(i) {
                        Some(_) => links::ANY_PART,
                        None => (2..parts.len()).fold(2, |m, k| if parts[k] > parts[m] { k } else { m }),
                    };
                    wake = Some((b.waker_tid[i], b.wake_window(i, &parts), part));
                }
                if b.wake_dev[i] != 0 {
                    request = Some((b.wake_dev[i], b.wake_sector[i]));
                }
                if (wake.is_some() || request.is_some()) && !self.linker.linking() {
                    self.linker.start_linking(self.opts.hold_ns);
                }
            }
            Some(EventKind::Block) => {
                let dev = b.dev[i];
                if b.qtime[i] > 0 && b.qtime[i] <= ts {
                    let mut q = self.linker.blank();
                    q.ts = ts - b.qtime[i];
                    q.end = ts;
                    q.name_key = QUEUED_KEY;
                    q.track = self.tracks.disk_lane(&self.header, dev, q.ts, q.end, true);
                    SliceBuilder { h: &mut self.slice }.queued(&self.header, b, i);
                    self.out.encode(&self.slice, &mut q);
                    self.slice.clear();
                    self.linker.push(q, None, None);
                    self.queue_slices += 1;
                }
                h.track = self.tracks.disk_lane(&self.header, dev, ts, end, false);
                h.request = Some((dev, b.off[i] as u64));
                SliceBuilder { h: &mut self.slice }.block(&self.header, b, i);
            }
            Some(EventKind::Proc) | None => {
                let pid = b.pid[i];
                h.track = self.tracks.process(pid, b.comm.get(i), b.cgroup[i]);
                h.instant = true;
                h.end = ts;
                if b.nr[i] == ProcOp::Exec as u16 {
                    let args = b.path2.get(i);
                    self.tracks.rename_process(pid, b.comm.get(i), (!args.is_empty()).then_some(args));
                }
                SliceBuilder { h: &mut self.slice }.proc(b, i);
            }
        }
        self.out.encode(&self.slice, &mut h);
        self.linker.push(h, wake, request);
    }

    /// Writes what is due (everything with `all`).
    fn drain(&mut self, all: bool) -> Result<(), ExportError> {
        let Export { tracks, linker, counters, out, flow_file, flows_open, flows_cut, opts, header, .. } = self;
        let start = header.start_ns;
        let mut keep_out: Vec<u64> = Vec::new();
        let mut keep_in: Vec<u64> = Vec::new();
        linker.drain(all, &mut |h: &Held| {
            if !opts.split {
                // One file: every flow has both ends in it.
                out.slice(tracks, h, &h.flows_out, &h.flows_in)?;
                if out.bytes() >= opts.max_bytes {
                    return Err(ExportError::TooLarge { limit: opts.max_bytes, at_ns: h.ts.saturating_sub(start) });
                }
                return Ok(());
            }
            let part = out.part_number().max(1);
            // Past 90 % of the size (counting the room to close the flows open) the file is cut
            // at the first moment no flow is open, or at its size: no flow begins in it any
            // more, and those still open at its size are closed in it.
            let closing = out.bytes() + *flows_open * FLOW_CUT_ROOM >= opts.max_bytes / 10 * 9;
            keep_out.clear();
            keep_in.clear();
            for (list, keep, began) in [(&h.flows_out, &mut keep_out, true), (&h.flows_in, &mut keep_in, false)] {
                for &f in list {
                    match flow_file.remove(&f) {
                        None if closing => {
                            flow_file.insert(f, OpenFlow::LEFT_OUT);
                            *flows_cut += 1;
                        }
                        None => {
                            flow_file.insert(f, OpenFlow { part, track: h.track, ts: h.ts, began });
                            *flows_open += 1;
                            keep.push(f);
                        }
                        Some(o) if o.part == part => {
                            *flows_open -= 1;
                            keep.push(f);
                        }
                        // Left out when it began, or closed where a file was cut.
                        Some(_) => {}
                    }
                }
            }
            out.slice(tracks, h, &keep_out, &keep_in)?;
            let bytes = out.bytes();
            if closing && (*flows_open == 0 || bytes + *flows_open * FLOW_CUT_ROOM >= opts.max_bytes) {
                if *flows_open > 0 {
                    // Cut at its size with flows open (their other ends held longer than the
                    // last tenth of the file took to write): each is closed by an instant in
                    // this file, in the order of the flows, and left out of the next.
                    let mut open: Vec<(u64, OpenFlow)> =
                        flow_file.iter().filter(|(_, o)| o.part == part).map(|(&f, &o)| (f, o)).collect();
                    open.sort_unstable_by_key(|&(f, _)| f);
                    for (f, o) in open {
                        out.flow_cut(tracks, o.track, o.ts, f, o.began)?;
                        flow_file.insert(f, OpenFlow::LEFT_OUT);
                        *flows_cut += 1;
                    }
                }
                *flows_open = 0;
                out.close_part()?;
                out.open_part()?;
            }
            Ok(())
        })?;
        counters.drain(linker.watermark(), all, &mut |c, ts, v| out.counter(tracks, tracks.counter(c), ts, v))
    }
}

/// Exports the trace at `path` as `opts` says, calling `progress` after every block read.
///
/// Nothing is left under a final name unless complete: each file is written under a
/// temporary name and moved into place when finished; on error the file being written is
/// removed (with `split`, the parts finished before stay: each is a complete trace).
pub fn export_perfetto(
    path: &Path,
    opts: &PerfettoOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<PerfettoSummary, ExportError> {
    if opts.max_bytes < 1 << 20 {
        return Err(ExportError::Invalid(format!(
            "a Perfetto file of at most {} bytes holds too little: allow 1 MiB or more",
            opts.max_bytes
        )));
    }
    if opts.interval_ns == 0 {
        return Err(ExportError::Invalid("the counters' interval must be positive".into()));
    }
    let columns = opts.filter.is_match_all().then(|| columns().filter_map(Column::from_name).collect::<Vec<_>>());
    let mut scan =
        Scan::open(path, InputFormat::Trace, ScanOptions { filter: opts.filter.clone(), columns, zone: None })?;
    let deferred = OFF_COLUMNS.iter().chain(EXPLAINED_ONLY.iter());
    scan.set_deferred(deferred.filter_map(|c| Column::from_name(c)).collect(), explained);
    let header = scan.header().clone();
    let hold = if recorded_why(&header) { opts.hold_ns } else { 0 };
    let mut ex = Export {
        tracks: Tracks::new(&header),
        linker: Linker::new(hold, opts.max_held),
        counters: Counters::new(header.start_ns, opts.interval_ns, opts.hold_ns),
        out: Out::new(&opts.output, opts.split, opts.max_bytes, header.start_ns, header.realtime_offset_ns),
        header,
        opts,
        flow_file: HashMap::default(),
        flows_open: 0,
        flows_cut: 0,
        exported: 0,
        queue_slices: 0,
        slice: Slice::default(),
    };
    // The covered time's start and the window's end are known now; the recording's end once
    // it is read (before the last intervals are written).
    let window = opts.filter.time_window().monotonic(ex.header.realtime_offset_ns, ex.header.start_ns);
    let open_ended = Span::new(ex.header.start_ns, u64::MAX);
    ex.counters.set_covered(Some(window.map_or(open_ended, |(lo, hi)| open_ended.within(lo, hi))));
    let mut read = 0u64;
    let mut lost_seen = 0u64;
    while let Some(r) = scan.next_batch_and_header() {
        let (chunk, h) = r?;
        ex.tracks.learn_cgroups(h);
        let b = chunk.batch;
        read += b.len() as u64;
        // Each slice due is written as the next arrives, so that the slices written are reused
        // for the next ones while they are still in the cache.
        if chunk.all_rows() {
            for i in 0..b.len() {
                if i % ROWS_PER_PREFETCH == 0 {
                    prefetch_rows(b, i + PREFETCH_ROWS);
                }
                ex.add(b, i);
                ex.drain(false)?;
            }
        } else {
            for &i in chunk.rows.iter() {
                ex.add(b, i as usize);
                ex.drain(false)?;
            }
        }
        let (bytes, size, lost) =
            scan.reader().map(|r| r.stats()).map_or((0, 0, 0), |s| (s.bytes, s.file_size, s.lost_total));
        if lost > lost_seen {
            ex.counters.lost(ex.linker.watermark(), lost - lost_seen);
            lost_seen = lost;
        }
        ex.drain(false)?;
        progress(&Progress {
            bytes_read: bytes,
            file_size: size,
            events_exported: ex.exported,
            bytes_written: ex.out.bytes(),
        });
    }
    ex.counters.set_covered(scan.covered(Some(Span::new(ex.header.start_ns, ex.linker.watermark()))));
    ex.drain(true)?;
    let report = scan.report();
    // A window that begins after the recording ended holds nothing: said, rather than an empty
    // trace written in place of the file named.
    if let (0, Some((lo, _)), Some(rec)) = (ex.exported, window, report.recording_span(&ex.header)) {
        if lo >= rec.end_ns {
            return Err(ExportError::Invalid(format!(
                "the window begins {:.3} s into the recording, which ended {:.3} s into it: no event began in \
                 the window, and nothing was written",
                (lo - ex.header.start_ns) as f64 / 1e9,
                rec.secs()
            )));
        }
    }
    let (processes, threads, disks) = ex.tracks.counts();
    let interning_resets = ex.out.interning_resets;
    let part_slices = ex.out.part_slices;
    let part_calls = ex.out.part_calls;
    let files = ex.out.finish()?;
    Ok(PerfettoSummary {
        trace: path.to_path_buf(),
        bytes_written: files.iter().map(|f| f.bytes).sum(),
        files,
        events_read: read,
        events_exported: ex.exported,
        queue_slices: ex.queue_slices,
        part_slices,
        part_calls,
        events_lost: report.lost,
        corrupt_blocks: report.corrupt.len() as u64,
        processes,
        threads,
        disks,
        links: ex.linker.stats,
        flows_cut_between_files: ex.flows_cut,
        counter_events_late: ex.counters.late,
        interning_resets,
        warnings: report.corrupt.iter().map(|c| format!("{c} (skipped)")).chain(report.warnings).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_column_read_exists() {
        for c in columns().chain(EXPLAINED_ONLY) {
            assert!(Column::from_name(c).is_some(), "{c}");
        }
    }
}

//! What the view commands (heatmap, hist, top, timeline) share: reading events from a trace file
//! or from `perf script` text through a filter, choosing syscalls or block requests, and writing
//! the output to a file or stdout.

use crate::input::{parse_filter, Input};
use anyhow::{Context, Result};
use latscope_event::{EventBatch, EventKind, TraceHeader};
use latscope_filter::{EvalContext, Filter};
use latscope_trace::{BlockMeta, Column};
use latscope_view::perfscript::{parse_perf_script, PerfStats};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Input formats.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    /// A latscope trace file (latscope record).
    Trace,
    /// trace2heatmap.pl's two numeric columns "time value" (heatmap and hist only).
    Text,
    /// `perf script` output of block:block_rq_issue and block:block_rq_complete (and block_rq_insert).
    Perf,
}

/// Events from a trace or from perf script text, through a filter.
pub enum Source {
    /// A trace file.
    Trace(Box<Input>),
    /// Events parsed from text, held in memory.
    Memory(Box<Memory>),
}

/// Events held in memory.
pub struct Memory {
    /// The events.
    batch: EventBatch,
    /// A header describing their origin.
    header: TraceHeader,
    /// The filter.
    filter: Filter,
}

/// Reads the whole of `path` (`-` is stdin).
pub fn read_all(path: &Path) -> Result<Vec<u8>> {
    if path == Path::new("-") {
        let mut v = Vec::new();
        std::io::stdin().read_to_end(&mut v).context("cannot read stdin")?;
        Ok(v)
    } else {
        std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
    }
}

impl Source {
    /// Opens a trace reading only `columns` (plus what the filter needs), or parses perf text.
    pub fn open(path: &Path, format: InputFormat, filter: Option<&str>, columns: &[Column]) -> Result<Source> {
        match format {
            InputFormat::Trace => Ok(Source::Trace(Box::new(Input::open(path, filter, Some(columns))?))),
            InputFormat::Perf => {
                let filter = parse_filter(filter)?;
                let data = read_all(path)?;
                let (batch, header, st) = parse_perf_script(&data, &path.display().to_string())?;
                report_perf(&st);
                Ok(Source::Memory(Box::new(Memory { batch, header, filter })))
            }
            InputFormat::Text => {
                anyhow::bail!("two-column text input has no events: it works with heatmap and hist only")
            }
        }
    }

    /// The header.
    pub fn header(&self) -> &TraceHeader {
        match self {
            Source::Trace(i) => i.header(),
            Source::Memory(m) => &m.header,
        }
    }

    /// Calls `f` with each batch and its matching rows.
    pub fn for_each(&mut self, mut f: impl FnMut(&EventBatch, &[u32], &TraceHeader) -> Result<()>) -> Result<()> {
        match self {
            Source::Trace(i) => i.for_each(f),
            Source::Memory(m) => {
                let Memory { batch, header, filter } = &**m;
                let mut ctx = EvalContext::new(header);
                ctx.observe(batch);
                let rows: Vec<u32> =
                    (0..batch.len()).filter(|&i| filter.matches(batch, i, &ctx)).map(|i| i as u32).collect();
                f(batch, &rows, header)
            }
        }
    }

    /// Like [`Source::for_each`], with zone maps for trace files (see [`Input::for_each_zoned`]);
    /// events held in memory get `D::default()`.
    pub fn for_each_zoned<D: Default>(
        &mut self,
        zone: impl FnMut(&BlockMeta) -> (D, &'static [Column]),
        mut f: impl FnMut(&EventBatch, &[u32], &TraceHeader, D) -> Result<()>,
    ) -> Result<()> {
        match self {
            Source::Trace(i) => i.for_each_zoned(zone, f),
            Source::Memory(_) => self.for_each(|b, rows, h| f(b, rows, h, D::default())),
        }
    }

    /// Seconds the input covers, when the file says (a cleanly closed trace).
    pub fn recorded_secs(&self) -> Option<f64> {
        match self {
            Source::Trace(i) => i.reader().summary().map(|s| s.duration_ns as f64 / 1e9).filter(|&s| s > 0.0),
            Source::Memory(_) => None,
        }
    }

    /// Reports warnings and returns the exit code.
    pub fn finish(&self) -> ExitCode {
        match self {
            Source::Trace(i) => {
                i.report_warnings();
                i.exit_code()
            }
            Source::Memory(_) => ExitCode::SUCCESS,
        }
    }

    /// The filter text, if any.
    pub fn filter_text(&self) -> Option<String> {
        let f = match self {
            Source::Trace(i) => i.filter(),
            Source::Memory(m) => &m.filter,
        };
        (!f.is_match_all()).then(|| f.source().to_string())
    }
}

fn report_perf(st: &PerfStats) {
    eprintln!("latscope: perf script: {}", st.summary());
}

/// Which events a view takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kinds {
    /// Syscalls only.
    Syscalls,
    /// Block requests only.
    Block,
}

impl Kinds {
    /// From `--block`, or block for perf input.
    pub fn new(block: bool, format: InputFormat) -> Self {
        if block || format == InputFormat::Perf {
            Kinds::Block
        } else {
            Kinds::Syscalls
        }
    }

    /// Does event `i` belong?
    #[inline]
    pub fn takes(self, b: &EventBatch, i: usize) -> bool {
        let k = b.kind[i];
        match self {
            Kinds::Syscalls => k == EventKind::Syscall as u8,
            Kinds::Block => k == EventKind::Block as u8,
        }
    }

    /// The kind byte of the events taken.
    pub fn code(self) -> u8 {
        match self {
            Kinds::Syscalls => EventKind::Syscall as u8,
            Kinds::Block => EventKind::Block as u8,
        }
    }

    /// `syscall` or `block I/O`, for titles.
    pub fn noun(self) -> &'static str {
        match self {
            Kinds::Syscalls => "syscall",
            Kinds::Block => "block I/O",
        }
    }
}

/// What a block's zone map (its [`BlockMeta`]) says about the events a view takes, so that the
/// view can skip decoding columns: the default says nothing (decode as usual).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Zone {
    /// No event of the block has the wanted kind: nothing to count (nothing decoded).
    pub empty: bool,
    /// Every event of the block has the wanted kind (`kind` not decoded).
    pub all_kind: bool,
    /// Every event of the block falls in the time bucket of this time (`ts` not decoded).
    pub at: Option<u64>,
}

impl Zone {
    /// The zone of a block for events of kind `kind` bucketed by time: `bucket(t)` is the bucket
    /// of time `t` (start time, or end time with `by_end`), monotonic in `t`. `at` is only set
    /// when the whole block is of the wanted kind if `at_needs_all_kind`. Returns the decision
    /// and the columns it makes unnecessary.
    pub fn of(
        m: &BlockMeta,
        kind: u8,
        by_end: bool,
        at_needs_all_kind: bool,
        bucket: impl Fn(u64) -> Option<u64>,
    ) -> (Zone, &'static [Column]) {
        let Some(k) = m.kinds else { return (Zone::default(), &[]) };
        if k.get(kind as usize).is_none_or(|&n| n == 0) {
            return (Zone { empty: true, all_kind: false, at: None }, &Column::ALL);
        }
        let all_kind = m.only_kind(kind);
        let (lo, hi) = if by_end { (m.end_min, m.end_max) } else { (m.ts_min, m.ts_max) };
        let at = match (lo, hi) {
            (Some(lo), Some(hi)) if all_kind || !at_needs_all_kind => {
                bucket(lo).filter(|&b| Some(b) == bucket(hi)).map(|_| if by_end { hi } else { lo })
            }
            _ => None,
        };
        let skip: &'static [Column] = match (all_kind, at.is_some()) {
            (true, true) => &[Column::Kind, Column::Ts],
            (true, false) => &[Column::Kind],
            (false, true) => &[Column::Ts],
            (false, false) => &[],
        };
        (Zone { empty: false, all_kind, at }, skip)
    }
}

/// Trace columns by `EventBatch` field name (unknown names are ignored).
pub fn columns(names: &[&str]) -> Vec<Column> {
    let mut v: Vec<Column> = names.iter().filter_map(|n| Column::from_name(n)).collect();
    v.sort();
    v.dedup();
    v
}

/// Writes `data` to `out` (a file, or stdout for `None` or `-`).
pub fn write_output(out: Option<&PathBuf>, data: &[u8]) -> Result<()> {
    match out {
        Some(p) if p.as_os_str() != "-" => {
            std::fs::write(p, data).with_context(|| format!("cannot write {}", p.display()))
        }
        _ => {
            let mut o = std::io::stdout().lock();
            o.write_all(data)?;
            o.flush()?;
            Ok(())
        }
    }
}

/// The file name for messages.
pub fn shown(p: Option<&PathBuf>) -> String {
    match p {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "stdout".into(),
    }
}

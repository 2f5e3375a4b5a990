//! Parquet files being written: one named file, or numbered parts in Hive-style partition
//! directories. A file becomes visible under its final name only once complete.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, ErrorKind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use latscope_event::EventBatch;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use serde::Serialize;

use super::chunk::{Derived, DirectWriter};
use super::convert::{Sel, TraceContext};
use crate::ExportError;

/// A Parquet file the export wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WrittenFile {
    /// Where it is.
    pub path: PathBuf,
    /// Which table it belongs to: `events`, `processes`, `disks` or `traces`.
    pub table: &'static str,
    /// Rows in it.
    pub rows: u64,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Where a finished file goes.
enum Dest {
    /// This name, replacing what is there (written as a staged output: never through a link).
    Replace(Box<latscope_trace::Staged>),
    /// `part-N.parquet` in this directory, with the first N free when it is finished.
    NextPart { dir: PathBuf, n: u32 },
}

/// One Parquet file being written under a temporary name; removed unless finished.
pub(crate) struct PartWriter {
    /// The file's name in messages: the destination, or the temporary part's name.
    tmp: PathBuf,
    /// Whether `tmp` is a temporary name of ours (removed unless finished).
    owns_tmp: bool,
    dest: Dest,
    table: &'static str,
    writer: Option<Backend>,
    rows: u64,
}

/// The encoder behind a file: the events table's own column encoder, or the Arrow writer for the
/// small tables.
enum Backend {
    Events(DirectWriter<BufWriter<File>>),
    Arrow(ArrowWriter<BufWriter<File>>),
}

/// `part-N.parquet`.
fn part_name(n: u32) -> String {
    format!("part-{n}.parquet")
}

/// Smallest N such that no `part-M.parquet` or `.part-M.parquet.tmp` with M >= N exists in `dir`.
fn next_part(dir: &Path) -> Result<u32, ExportError> {
    let mut next = 0u32;
    let rd = std::fs::read_dir(dir).map_err(|e| ExportError::io("list", dir, e))?;
    for entry in rd.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let digits = name.trim_start_matches('.').strip_prefix("part-").and_then(|s| s.split('.').next());
        if let Some(n) = digits.and_then(|d| d.parse::<u32>().ok()) {
            next = next.max(n.saturating_add(1));
        }
    }
    Ok(next)
}

impl PartWriter {
    /// A file that will replace `path` when finished (written next to it meanwhile).
    pub(crate) fn create_file(
        path: &Path,
        table: &'static str,
        schema: SchemaRef,
        props: Arc<WriterProperties>,
    ) -> Result<PartWriter, ExportError> {
        let mut staged = latscope_trace::Staged::create(path, latscope_trace::StagedOptions::derived())?;
        let file = staged.file().try_clone().map_err(|e| ExportError::io("create", path, e))?;
        Self::start(file, path.to_path_buf(), false, Dest::Replace(Box::new(staged)), table, schema, props)
    }

    /// A new `part-N.parquet` in `dir` (created if missing), numbered after the parts there.
    pub(crate) fn create_part(
        dir: &Path,
        table: &'static str,
        schema: SchemaRef,
        props: Arc<WriterProperties>,
    ) -> Result<PartWriter, ExportError> {
        std::fs::create_dir_all(dir).map_err(|e| ExportError::io("create directory", dir, e))?;
        let mut n = next_part(dir)?;
        loop {
            // Claiming the temporary name with create_new keeps concurrent exports apart.
            let tmp = dir.join(format!(".{}.tmp", part_name(n)));
            match OpenOptions::new().write(true).create_new(true).open(&tmp) {
                Ok(file) => {
                    return Self::start(
                        file,
                        tmp,
                        true,
                        Dest::NextPart { dir: dir.to_path_buf(), n },
                        table,
                        schema,
                        props,
                    )
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    n = n
                        .checked_add(1)
                        .ok_or_else(|| ExportError::Invalid(format!("{}: no free part number", dir.display())))?
                }
                Err(e) => return Err(ExportError::io("create a file in", dir, e)),
            }
        }
    }

    fn start(
        file: File,
        tmp: PathBuf,
        owns_tmp: bool,
        dest: Dest,
        table: &'static str,
        schema: SchemaRef,
        props: Arc<WriterProperties>,
    ) -> Result<PartWriter, ExportError> {
        let mut w = PartWriter { tmp, owns_tmp, dest, table, writer: None, rows: 0 };
        let out = BufWriter::with_capacity(1 << 20, file);
        let writer = if table == "events" {
            DirectWriter::try_new(out, &schema, &props).map(Backend::Events)
        } else {
            ArrowWriter::try_new(out, schema, Some((*props).clone())).map(Backend::Arrow)
        };
        w.writer = Some(writer.map_err(|e| ExportError::parquet(&w.tmp, e))?);
        Ok(w)
    }

    /// Appends the rows of a small table.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<(), ExportError> {
        let Some(w) = self.writer.as_mut() else { return Ok(()) };
        match w {
            Backend::Arrow(w) => w.write(batch).map_err(|e| ExportError::parquet(&self.tmp, e))?,
            Backend::Events(_) => return Err(ExportError::Invalid("events are written from event batches".into())),
        }
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Appends the selected events of `b`, a batch of the trace `cx` describes.
    pub(crate) fn write_events(
        &mut self,
        cx: &TraceContext,
        b: &EventBatch,
        d: Option<&Derived>,
        sel: Sel<'_>,
    ) -> Result<(), ExportError> {
        let Some(w) = self.writer.as_mut() else { return Ok(()) };
        match w {
            Backend::Events(w) => w.write_events(cx, b, d, sel).map_err(|e| ExportError::parquet(&self.tmp, e))?,
            Backend::Arrow(_) => return Err(ExportError::Invalid(format!("the {} table holds no events", self.table))),
        }
        self.rows += sel.len() as u64;
        Ok(())
    }

    /// Bytes buffered for the row group in progress.
    pub(crate) fn buffered_bytes(&self) -> usize {
        match &self.writer {
            Some(Backend::Events(w)) => w.memory_size(),
            Some(Backend::Arrow(w)) => w.memory_size(),
            None => 0,
        }
    }

    /// Writes the footer, syncs and moves the file to its final name.
    pub(crate) fn finish(mut self) -> Result<WrittenFile, ExportError> {
        let Some(w) = self.writer.take() else { return Err(ExportError::Invalid("file finished twice".into())) };
        let buf = match w {
            Backend::Events(w) => w.into_inner(),
            Backend::Arrow(w) => w.into_inner(),
        }
        .map_err(|e| ExportError::parquet(&self.tmp, e))?;
        let file = buf.into_inner().map_err(|e| ExportError::io("write", &self.tmp, e.into_error()))?;
        file.sync_all().map_err(|e| ExportError::io("sync", &self.tmp, e))?;
        let bytes = file.metadata().map_err(|e| ExportError::io("stat", &self.tmp, e))?.len();
        drop(file);
        let path = match &mut self.dest {
            Dest::Replace(staged) => {
                staged.commit()?;
                staged.path().to_path_buf()
            }
            Dest::NextPart { dir, n } => loop {
                // A hard link never replaces: a part another export finished meanwhile is kept.
                let p = dir.join(part_name(*n));
                match std::fs::hard_link(&self.tmp, &p) {
                    Ok(()) => {
                        std::fs::remove_file(&self.tmp).map_err(|e| ExportError::io("remove", &self.tmp, e))?;
                        break p;
                    }
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => *n += 1,
                    Err(e) => return Err(ExportError::io("link into place", &p, e)),
                }
            },
        };
        self.owns_tmp = false;
        Ok(WrittenFile { path, table: self.table, rows: self.rows, bytes })
    }
}

impl Drop for PartWriter {
    fn drop(&mut self) {
        if self.owns_tmp {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// `YYYY-MM-DD` of a day number (days since 1970-01-01), proleptic Gregorian calendar; the
/// number itself past chrono's range (±262,000 years: no event time reaches it).
pub(crate) fn civil_date(days: i64) -> String {
    days.checked_mul(86_400)
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map_or_else(|| days.to_string(), |t| t.format("%Y-%m-%d").to_string())
}

/// A partition directory value escaped as Hive does (`%XX` for characters that are not letters,
/// digits, `.`, `_` or `-`); `__HIVE_DEFAULT_PARTITION__` for an empty value.
pub(crate) fn hive_escape(v: &str) -> String {
    if v.is_empty() {
        return "__HIVE_DEFAULT_PARTITION__".into();
    }
    let mut s = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

const NS_PER_HOUR: i64 = 3_600_000_000_000;

/// The events table being written: one file, or files partitioned by host, date and hour.
pub(crate) enum EventSink {
    /// Every event in one file.
    Single(Box<PartWriter>),
    /// `root/host=H/date=YYYY-MM-DD/hour=0..23/part-N.parquet`.
    Partitioned(Partitions),
}

/// Open partition files, the least recently used closed first when too many are open.
pub(crate) struct Partitions {
    root: PathBuf,
    schema: SchemaRef,
    props: Arc<WriterProperties>,
    max_open: usize,
    open: Vec<OpenPart>,
    tick: u64,
    /// Files finished so far.
    pub(crate) done: Vec<WrittenFile>,
}

struct OpenPart {
    host: Arc<str>,
    hour: i64,
    last_used: u64,
    writer: PartWriter,
}

impl Partitions {
    /// Partitions under `root`, at most `max_open` files open at once (each buffers at most one
    /// row group).
    pub(crate) fn new(root: PathBuf, schema: SchemaRef, props: Arc<WriterProperties>, max_open: usize) -> Self {
        Partitions { root, schema, props, max_open: max_open.max(1), open: Vec::new(), tick: 0, done: Vec::new() }
    }

    fn dir(&self, host: &str, hour: i64) -> PathBuf {
        self.root
            .join(format!("host={}", hive_escape(host)))
            .join(format!("date={}", civil_date(hour.div_euclid(24))))
            .join(format!("hour={}", hour.rem_euclid(24)))
    }

    fn writer(&mut self, host: &Arc<str>, hour: i64) -> Result<&mut PartWriter, ExportError> {
        self.tick += 1;
        let i = match self.open.iter().position(|p| p.hour == hour && *p.host == **host) {
            Some(i) => i,
            None => {
                if self.open.len() >= self.max_open {
                    let lru = (0..self.open.len()).min_by_key(|&i| self.open[i].last_used).unwrap_or(0);
                    let p = self.open.swap_remove(lru);
                    self.done.push(p.writer.finish()?);
                }
                let w =
                    PartWriter::create_part(&self.dir(host, hour), "events", self.schema.clone(), self.props.clone())?;
                self.open.push(OpenPart { host: host.clone(), hour, last_used: 0, writer: w });
                self.open.len() - 1
            }
        };
        self.open[i].last_used = self.tick;
        Ok(&mut self.open[i].writer)
    }

    /// Routes the selected events of `b` (a batch of the trace `cx` describes, from `host`) to
    /// their hour's file.
    pub(crate) fn write(
        &mut self,
        host: &Arc<str>,
        cx: &TraceContext,
        b: &EventBatch,
        d: Option<&Derived>,
        sel: Sel<'_>,
    ) -> Result<(), ExportError> {
        if sel.len() == 0 {
            return Ok(());
        }
        let hour = |ts: u64| cx.wall_ns(ts).div_euclid(NS_PER_HOUR);
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        match sel {
            Sel::Range(a, e) => b.ts[a..e].iter().for_each(|&t| (lo, hi) = (lo.min(t), hi.max(t))),
            Sel::Idx(r) => r.iter().for_each(|&i| (lo, hi) = (lo.min(b.ts[i as usize]), hi.max(b.ts[i as usize]))),
        }
        let (first, last) = (hour(lo), hour(hi));
        if first == last {
            return self.writer(host, first)?.write_events(cx, b, d, sel);
        }
        // A block across an hour boundary (rare): the rows of each hour present, in order.
        let rows: Vec<u32> = match sel {
            Sel::Range(a, e) => (a as u32..e as u32).collect(),
            Sel::Idx(r) => r.to_vec(),
        };
        let mut hours: Vec<i64> = rows.iter().map(|&i| hour(b.ts[i as usize])).collect();
        hours.sort_unstable();
        hours.dedup();
        for h in hours {
            let part: Vec<u32> = rows.iter().copied().filter(|&i| hour(b.ts[i as usize]) == h).collect();
            self.writer(host, h)?.write_events(cx, b, d, Sel::Idx(&part))?;
        }
        Ok(())
    }

    /// Finishes every open file.
    pub(crate) fn finish(mut self) -> Result<Vec<WrittenFile>, ExportError> {
        self.open.sort_by(|a, b| (&*a.host, a.hour).cmp(&(&*b.host, b.hour)));
        for p in self.open.drain(..) {
            self.done.push(p.writer.finish()?);
        }
        Ok(std::mem::take(&mut self.done))
    }

    /// Bytes buffered in open files.
    pub(crate) fn buffered_bytes(&self) -> usize {
        self.open.iter().map(|p| p.writer.buffered_bytes()).sum()
    }
}

impl EventSink {
    /// Writes the selected events of `b` (a batch of the trace `cx` describes, from `host`).
    pub(crate) fn write(
        &mut self,
        host: &Arc<str>,
        cx: &TraceContext,
        b: &EventBatch,
        d: Option<&Derived>,
        sel: Sel<'_>,
    ) -> Result<(), ExportError> {
        match self {
            EventSink::Single(w) => w.write_events(cx, b, d, sel),
            EventSink::Partitioned(p) => p.write(host, cx, b, d, sel),
        }
    }

    /// Finishes every file.
    pub(crate) fn finish(self) -> Result<Vec<WrittenFile>, ExportError> {
        match self {
            EventSink::Single(w) => Ok(vec![w.finish()?]),
            EventSink::Partitioned(p) => p.finish(),
        }
    }

    /// Bytes buffered for row groups in progress.
    #[allow(dead_code)]
    pub(crate) fn buffered_bytes(&self) -> usize {
        match self {
            EventSink::Single(w) => w.buffered_bytes(),
            EventSink::Partitioned(p) => p.buffered_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_of_days() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(-1), "1969-12-31");
        assert_eq!(civil_date(19_675), "2023-11-14");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(11_017), "2000-03-01");
    }

    #[test]
    fn hive_values_are_escaped() {
        assert_eq!(hive_escape("web-01.example.com"), "web-01.example.com");
        assert_eq!(hive_escape("a/b=c d"), "a%2Fb%3Dc%20d");
        assert_eq!(hive_escape(""), "__HIVE_DEFAULT_PARTITION__");
    }

    #[test]
    fn parts_are_numbered_after_existing_ones_and_never_replace() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("part-3.parquet"), b"x").unwrap();
        std::fs::write(dir.path().join("other.txt"), b"x").unwrap();
        assert_eq!(next_part(dir.path()).unwrap(), 4);
        let schema = super::super::schema::table_schema(super::super::schema::TRACE_COLUMNS);
        let props = Arc::new(WriterProperties::builder().build());
        let a = PartWriter::create_part(dir.path(), "traces", schema.clone(), props.clone()).unwrap();
        let b = PartWriter::create_part(dir.path(), "traces", schema.clone(), props.clone()).unwrap();
        // Someone else finishes part-4 while `a` is open.
        std::fs::write(dir.path().join("part-4.parquet"), b"theirs").unwrap();
        let fa = a.finish().unwrap();
        let fb = b.finish().unwrap();
        assert_eq!(fa.path, dir.path().join("part-5.parquet"));
        assert_eq!(fb.path, dir.path().join("part-6.parquet"));
        assert_eq!(std::fs::read(dir.path().join("part-4.parquet")).unwrap(), b"theirs");
        // An abandoned writer leaves nothing behind.
        drop(PartWriter::create_part(dir.path(), "traces", schema, props).unwrap());
        let mut names: Vec<_> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["other.txt", "part-3.parquet", "part-4.parquet", "part-5.parquet", "part-6.parquet"]);
    }
}

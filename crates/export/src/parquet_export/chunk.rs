//! The events table's column chunks, encoded directly from the trace's event batches.
//!
//! The generic Arrow writer spends most of an export interning every value of every column (its
//! dictionary encoder hashes and compares each string and integer) and building levels for
//! columns that have none. The events table's shape is fixed: every column is required,
//! low-cardinality strings arrive as dictionary keys already, times increase. So each column is
//! encoded here with the encoding measured best for it:
//!
//! | columns | encoding |
//! |---|---|
//! | `time`, `time_ns`, `lat`, `off` | `DELTA_BINARY_PACKED` |
//! | `flags`, `mode`, `addr`, `qtime`, the `why_*` parts, `wake_sector`, the `wake_*_ns` times, `waker_was_in_ns` and `fault_off` (almost always one value) | a one-entry dictionary while the chunk holds one value, then `PLAIN` |
//! | other integers | dictionary (`PLAIN` when a sample of the chunk's first values is too varied); past 1 MiB of dictionary, `PLAIN` pages for the rest of the chunk |
//! | `host`, `kind`, `op`, `fd_type`, `disk`, `waker_kind`, `waker_was_in` | dictionary of the values used, from the keys |
//! | `comm`, `path`, `path2`, `waker_comm`, `fault_path` | dictionary; past 1 MiB, `PLAIN` pages for the rest of the chunk |
//!
//! Each column's values are read from the event batch as the trace reader decoded it (wall-clock
//! times, names and signed types are derived on the way), with no Arrow record batch in between.
//! Pages are encoded and compressed as rows arrive, so the row group in progress costs its
//! encoded size in memory (about 12 bytes per event), not its rows, and the reading thread's
//! batches go back to it at once. The dictionary page is put in front of the chunk's data
//! pages when the row group ends; each index page has the bit width of the dictionary at the time
//! it was written.
//!
//! The parquet crate's page writer writes the page headers, and `append_column` splices each
//! chunk into the row group and writes the footer, so the file is standard Parquet (version 1
//! data pages, zstd) with the same schema as the Arrow writer's and the Arrow schema in its
//! metadata, minus page indexes. Integer and `host`/`kind`/`op`/`fd_type`/`disk` columns carry
//! min/max statistics per chunk.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Arc;

use arrow_array::cast::AsArray;
#[cfg(test)]
use arrow_array::types::{Int16Type, Int32Type, Int64Type, Int8Type, TimestampMicrosecondType};
use arrow_array::{Array, StringArray};
#[cfg(test)]
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, SchemaRef};
use bytes::Bytes;
use foldhash::fast::RandomState;
use latscope_event::{EventBatch, StrCol, WHY_PART_NAMES};
use parquet::arrow::{add_encoded_arrow_schema_to_metadata, ArrowSchemaConverter};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::data_type::ByteArray;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::statistics::Statistics;
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;

use super::convert::{
    dictionaries, fd_type_key, kind_key, op_key, waker_comm, waker_kind_key, waker_was_in_key, waker_was_in_ns, Sel,
    TraceContext,
};

/// Values per data page: pages of at most 512 KiB of integers before compression.
const PAGE_ROWS: usize = 1 << 16;
/// Largest dictionary kept, in bytes of its page; beyond it the column chunk is written plain
/// (the Arrow writer's default limit).
const DICT_LIMIT: usize = 1 << 20;
/// Integer columns spanning fewer values than this build their dictionary through a table
/// indexed by value (256 KiB of slots), not a hash map.
const DIRECT_RANGE: u64 = 1 << 16;
/// Values looked at to decide whether an integer column chunk is worth a dictionary.
const SAMPLE: usize = 8192;
/// A data page of strings is cut when its values pass this many bytes.
const PAGE_BYTES: usize = 1 << 20;
/// Groups of 8 values per bit-packed run header: 63 keeps the header one byte, as the reference
/// implementation writes it.
const MAX_GROUPS: usize = 63;

/// How a column is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Enc {
    Delta,
    Plain,
    IntDict,
    KeyDict,
    Strings,
}

fn encoding_of(name: &str, t: &DataType) -> Enc {
    match t {
        DataType::Dictionary(_, _) => Enc::KeyDict,
        DataType::Utf8 => Enc::Strings,
        DataType::Int64 | DataType::Timestamp(_, _) if matches!(name, "time" | "time_ns" | "lat" | "off") => Enc::Delta,
        _ if matches!(
            name,
            "flags" | "mode" | "addr" | "qtime" | "wake_sector" | "lock_addr" | "lock_owner" | "chain_root_ns"
        ) || name.starts_with("why_")
            || (name.starts_with("wake_") && name.ends_with("_ns"))
            || name == "waker_was_in_ns"
            || name == "fault_off" =>
        {
            Enc::Plain
        }
        _ => Enc::IntDict,
    }
}

/// Where a column of the events table comes from in an event batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Src {
    Host,
    Time,
    TimeNs,
    Lat,
    Kind,
    Op,
    Nr,
    Pid,
    Tid,
    Uid,
    Comm,
    Ret,
    Fd,
    FdType,
    Path,
    Path2,
    FaultPath,
    FaultOff,
    Dev,
    Disk,
    Ino,
    Bytes,
    Off,
    Flags,
    Mode,
    Dirfd,
    Addr,
    Cgroup,
    Qtime,
    /// One of the cgroup table's columns (`CGROUP_COLUMNS[i]`).
    CgroupInfo(u8),
    /// A `why_*` part, by its index in `WHY_PART_NAMES`.
    Why(u8),
    WakerKind,
    WakerTid,
    WakerComm,
    RunqTid,
    RunqCpu,
    WakeDev,
    WakeSector,
    Kstack,
    Ustack,
    WakeHeld,
    WakeQueue,
    WakeDevice,
    WakerWasIn,
    WakerWasInNs,
    Wait,
    Lock,
    LockAddr,
    LockOwner,
    /// Derived by the reader (the chain goes through other blocks' calls): see [`Derived`].
    Chain,
    ChainRoot,
    ChainRootNs,
}

/// Values of the events table that the batch alone cannot give, by row of the batch: the
/// chain of waits of each event (through calls of earlier blocks), computed by the reader.
#[derive(Debug, Default)]
pub(crate) struct Derived {
    /// The chain as JSON (empty: none).
    pub(crate) chain: StrCol,
    /// Its root's label.
    pub(crate) chain_root: StrCol,
    /// The ns ending at the root.
    pub(crate) chain_root_ns: Vec<i64>,
}

impl Src {
    /// The source of the events table's column `name`.
    fn of(name: &str) -> Option<Src> {
        Some(match name {
            "host" => Src::Host,
            "time" => Src::Time,
            "time_ns" => Src::TimeNs,
            "lat" => Src::Lat,
            "kind" => Src::Kind,
            "op" => Src::Op,
            "nr" => Src::Nr,
            "pid" => Src::Pid,
            "tid" => Src::Tid,
            "uid" => Src::Uid,
            "comm" => Src::Comm,
            "ret" => Src::Ret,
            "fd" => Src::Fd,
            "fd_type" => Src::FdType,
            "path" => Src::Path,
            "path2" => Src::Path2,
            "fault_path" => Src::FaultPath,
            "fault_off" => Src::FaultOff,
            "dev" => Src::Dev,
            "disk" => Src::Disk,
            "ino" => Src::Ino,
            "bytes" => Src::Bytes,
            "off" => Src::Off,
            "flags" => Src::Flags,
            "mode" => Src::Mode,
            "dirfd" => Src::Dirfd,
            "addr" => Src::Addr,
            "cgroup" => Src::Cgroup,
            "qtime" => Src::Qtime,
            "waker_kind" => Src::WakerKind,
            "waker_tid" => Src::WakerTid,
            "waker_comm" => Src::WakerComm,
            "runq_tid" => Src::RunqTid,
            "runq_cpu" => Src::RunqCpu,
            "wake_dev" => Src::WakeDev,
            "wake_sector" => Src::WakeSector,
            "kstack" => Src::Kstack,
            "ustack" => Src::Ustack,
            "wake_held_ns" => Src::WakeHeld,
            "wake_queue_ns" => Src::WakeQueue,
            "wake_device_ns" => Src::WakeDevice,
            "waker_was_in" => Src::WakerWasIn,
            "waker_was_in_ns" => Src::WakerWasInNs,
            "wait" => Src::Wait,
            "lock" => Src::Lock,
            "lock_addr" => Src::LockAddr,
            "lock_owner" => Src::LockOwner,
            "chain" => Src::Chain,
            "chain_root" => Src::ChainRoot,
            "chain_root_ns" => Src::ChainRootNs,
            c if super::schema::CGROUP_COLUMNS.contains(&c) => {
                Src::CgroupInfo(super::schema::CGROUP_COLUMNS.iter().position(|&x| x == c)? as u8)
            }
            _ => {
                let part = name.strip_prefix("why_")?;
                Src::Why(WHY_PART_NAMES.iter().position(|p| *p == part)? as u8)
            }
        })
    }
}

/// The selected values of an integer column, as the events table types them (unsigned trace
/// fields as signed integers of the same width or wider, times on the wall clock).
fn gather_events(src: Src, cx: &TraceContext, b: &EventBatch, d: Option<&Derived>, sel: Sel<'_>, out: &mut Vec<i64>) {
    out.clear();
    out.reserve(sel.len());
    match src {
        Src::Time => sel.gather(&b.ts, out, |t| cx.wall_ns(t).div_euclid(1000)),
        Src::TimeNs => sel.gather(&b.ts, out, |t| cx.wall_ns(t)),
        Src::Lat => sel.gather(&b.lat, out, |v| v as i64),
        Src::Nr => sel.gather(&b.nr, out, i64::from),
        Src::Pid => sel.gather(&b.pid, out, |v| i64::from(v as i32)),
        Src::Tid => sel.gather(&b.tid, out, |v| i64::from(v as i32)),
        Src::Uid => sel.gather(&b.uid, out, i64::from),
        Src::Ret => sel.gather(&b.ret, out, |v| v),
        Src::Fd => sel.gather(&b.fd, out, i64::from),
        Src::Dev => sel.gather(&b.dev, out, i64::from),
        Src::Ino => sel.gather(&b.ino, out, |v| v as i64),
        Src::Bytes => sel.gather(&b.bytes, out, |v| v as i64),
        Src::Off => sel.gather(&b.off, out, |v| v),
        Src::Flags => sel.gather(&b.flags, out, i64::from),
        Src::Mode => sel.gather(&b.mode, out, i64::from),
        Src::Dirfd => sel.gather(&b.dirfd, out, i64::from),
        Src::Addr => sel.gather(&b.addr, out, |v| v as i64),
        Src::Cgroup => sel.gather(&b.cgroup, out, |v| v as i64),
        Src::Qtime => sel.gather(&b.qtime, out, |v| v as i64),
        Src::Why(k) => {
            let col = match k {
                0 => &b.why_cpu,
                1 => &b.why_runq,
                2 => &b.why_io,
                3 => &b.why_lock,
                4 => &b.why_ipc,
                5 => &b.why_timer,
                6 => &b.why_fault,
                7 => &b.why_other,
                _ => &b.why_unknown,
            };
            sel.gather(col, out, |v| v as i64)
        }
        // A thread's id only: for a softirq the trace keeps its number there.
        Src::WakerTid => match sel {
            Sel::Range(a, e) => out.extend(b.waker_ctx[a..e].iter().zip(&b.waker_tid[a..e]).map(|(&c, &t)| {
                if c == 1 {
                    i64::from(t as i32)
                } else {
                    0
                }
            })),
            Sel::Idx(r) => out.extend(r.iter().map(|&i| {
                let i = i as usize;
                if b.waker_ctx[i] == 1 {
                    i64::from(b.waker_tid[i] as i32)
                } else {
                    0
                }
            })),
        },
        Src::RunqTid => sel.gather(&b.runq_tid, out, |v| i64::from(v as i32)),
        Src::RunqCpu => sel.gather(&b.runq_cpu, out, i64::from),
        Src::WakeDev => sel.gather(&b.wake_dev, out, i64::from),
        Src::WakeSector => sel.gather(&b.wake_sector, out, |v| v as i64),
        Src::Kstack => sel.gather(&b.kstack, out, |v| cx.stack_key(v)),
        Src::Ustack => sel.gather(&b.ustack, out, |v| cx.stack_key(v)),
        Src::WakeHeld => sel.gather(&b.wake_held_ns, out, |v| v as i64),
        Src::WakeQueue => sel.gather(&b.wake_queue_ns, out, |v| v as i64),
        Src::WakeDevice => sel.gather(&b.wake_device_ns, out, |v| v as i64),
        Src::WakerWasInNs => each_row(sel, out, |i| waker_was_in_ns(b, i)),
        Src::FaultOff => sel.gather(&b.fault_off, out, |v| v),
        Src::LockAddr => {
            each_row(sel, out, |i| if matches!(b.lock_kind[i], 1 | 4 | 5) { b.lock_addr[i] as i64 } else { 0 })
        }
        Src::LockOwner => sel.gather(&b.lock_owner, out, |v| i64::from(v as i32)),
        Src::ChainRootNs => match d {
            Some(d) if !d.chain_root_ns.is_empty() => sel.gather(&d.chain_root_ns, out, |v| v),
            _ => out.resize(sel.len(), 0),
        },
        Src::Host
        | Src::Kind
        | Src::Op
        | Src::FdType
        | Src::Disk
        | Src::Comm
        | Src::Path
        | Src::Path2
        | Src::FaultPath
        | Src::CgroupInfo(_)
        | Src::WakerKind
        | Src::WakerComm
        | Src::WakerWasIn
        | Src::Wait
        | Src::Lock
        | Src::Chain
        | Src::ChainRoot => {}
    }
}

/// `f` of each selected row's index, appended to `out`: for values derived from several fields.
fn each_row<U>(sel: Sel<'_>, out: &mut Vec<U>, f: impl FnMut(usize) -> U) {
    match sel {
        Sel::Range(a, e) => out.extend((a..e).map(f)),
        Sel::Idx(r) => out.extend(r.iter().map(|&i| i as usize).map(f)),
    }
}

/// The selected rows' keys of a dictionary column into `out` (cleared first).
fn gather_keys(src: Src, cx: &TraceContext, b: &EventBatch, sel: Sel<'_>, out: &mut Vec<i32>) {
    out.clear();
    match src {
        Src::Kind => sel.gather(&b.kind, out, |k| i32::from(kind_key(k))),
        Src::FdType => sel.gather(&b.fd_type, out, |t| i32::from(fd_type_key(t))),
        Src::Op => match sel {
            Sel::Range(a, e) => {
                out.extend(b.kind[a..e].iter().zip(&b.nr[a..e]).map(|(&k, &nr)| i32::from(op_key(k, nr))))
            }
            Sel::Idx(r) => out.extend(r.iter().map(|&i| i32::from(op_key(b.kind[i as usize], b.nr[i as usize])))),
        },
        Src::Disk => cx.disk_keys(&b.dev, sel, out),
        Src::CgroupInfo(_) => cx.cgroup_keys(&b.cgroup, sel, out),
        Src::WakerKind => sel.gather(&b.waker_ctx, out, |c| i32::from(waker_kind_key(c))),
        Src::WakerWasIn => each_row(sel, out, |i| i32::from(waker_was_in_key(b, i))),
        Src::Wait => each_row(sel, out, |i| latscope_event::waits::wait_kind(b, i) as i32),
        _ => out.resize(sel.len(), 0),
    }
}

/// A Parquet file of events, written one row group at a time.
pub(crate) struct DirectWriter<W: Write + Send> {
    file: SerializedFileWriter<W>,
    columns: Vec<Column>,
    /// Where each column comes from in an event batch (`None`: a schema other than the events
    /// table's, written from record batches in tests).
    srcs: Option<Vec<Src>>,
    /// Rows in the row group in progress.
    rows: usize,
    row_group_rows: usize,
    pager: Pager,
}

/// What every column's pages are made with: the compressor, the zstd level written in the
/// metadata, and buffers reused from one page to the next.
struct Pager {
    zstd: zstd::bulk::Compressor<'static>,
    level: ZstdLevel,
    ints: Vec<i64>,
    keys: Vec<i32>,
    raw: Vec<u8>,
    /// A page's compressed bytes, shared with the page writer while it copies them and then
    /// used again (see [`Column::reuse_pages`]).
    out: Arc<Vec<u8>>,
    /// Strings derived per row (`waker_comm`).
    names: StrCol,
}

/// [`Pager::out`] as the owner of a page's [`Bytes`].
struct SharedOut(Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedOut {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// A finished column chunk as the row group reads it: its dictionary page, then its data
/// pages, where each was written (no copy of the chunk into one buffer).
struct ChunkParts<'a> {
    head: &'a [u8],
    pages: &'a [u8],
}

impl Length for ChunkParts<'_> {
    fn len(&self) -> u64 {
        (self.head.len() + self.pages.len()) as u64
    }
}

impl<'a> ChunkReader for ChunkParts<'a> {
    type T = std::io::Chain<&'a [u8], &'a [u8]>;

    fn get_read(&self, start: u64) -> Result<Self::T> {
        let start = usize::try_from(start).map_err(|_| ParquetError::General("chunk offset too large".into()))?;
        let (head, pages) = match start.checked_sub(self.head.len()) {
            None => (&self.head[start..], self.pages),
            Some(at) => (&self.head[..0], self.pages.get(at..).unwrap_or_default()),
        };
        Ok(head.chain(pages))
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes> {
        let mut v = Vec::with_capacity(length);
        self.get_read(start)?.take(length as u64).read_to_end(&mut v)?;
        if v.len() != length {
            return Err(ParquetError::EOF(format!("{length} bytes at {start} past the chunk's end")));
        }
        Ok(Bytes::from(v))
    }
}

impl<W: Write + Send> DirectWriter<W> {
    /// A writer of `schema` (the events schema: required integers, timestamps, strings and
    /// string dictionaries) to `w`, with `props`' row group size and zstd level.
    pub(crate) fn try_new(w: W, schema: &SchemaRef, props: &WriterProperties) -> Result<Self> {
        let level = match props.compression(&"time".into()) {
            Compression::ZSTD(l) => l,
            c => return Err(ParquetError::General(format!("the events table is written with zstd, not {c}"))),
        };
        let mut props = props.clone();
        add_encoded_arrow_schema_to_metadata(schema, &mut props);
        let descr = ArrowSchemaConverter::new().convert(schema)?;
        let file = SerializedFileWriter::new(w, descr.root_schema_ptr(), Arc::new(props.clone()))?;
        let columns = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                if f.is_nullable() {
                    return Err(ParquetError::General(format!("column {} may hold NULL", f.name())));
                }
                let wide = !matches!(f.data_type(), DataType::Int32);
                Ok(Column::new(file.schema_descr().column(i), encoding_of(f.name(), f.data_type()), wide))
            })
            .collect::<Result<Vec<_>>>()?;
        let zstd = zstd::bulk::Compressor::new(level.compression_level())
            .map_err(|e| ParquetError::General(format!("zstd: {e}")))?;
        let srcs = schema.fields().iter().map(|f| Src::of(f.name())).collect();
        Ok(DirectWriter {
            file,
            columns,
            srcs,
            rows: 0,
            row_group_rows: props.max_row_group_row_count().unwrap_or(1 << 20).max(1),
            pager: Pager {
                zstd,
                level,
                ints: Vec::new(),
                keys: Vec::new(),
                raw: Vec::new(),
                out: Arc::default(),
                names: StrCol::new(),
            },
        })
    }

    /// Encodes the selected events of `b`, a batch of the trace `cx` describes, into the row
    /// group in progress; a full row group is written.
    pub(crate) fn write_events(
        &mut self,
        cx: &TraceContext,
        b: &EventBatch,
        d: Option<&Derived>,
        sel: Sel<'_>,
    ) -> Result<()> {
        if self.srcs.is_none() {
            return Err(ParquetError::General("not the events table's schema".into()));
        }
        let n = sel.len();
        let mut at = 0;
        while at < n {
            let take = (n - at).min(self.row_group_rows - self.rows);
            let part = sel.part(at, at + take);
            for (c, &s) in self.columns.iter_mut().zip(self.srcs.iter().flatten()) {
                c.add_events(s, cx, b, d, part, &mut self.pager)?;
            }
            self.rows += take;
            at += take;
            if self.rows == self.row_group_rows {
                self.flush_row_group()?;
            }
        }
        Ok(())
    }

    /// Encodes rows into the row group in progress; a full row group is written.
    #[cfg(test)]
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let n = batch.num_rows();
        let mut at = 0;
        while at < n {
            let take = (n - at).min(self.row_group_rows - self.rows);
            let part = if take == n { batch.clone() } else { batch.slice(at, take) };
            for (c, a) in self.columns.iter_mut().zip(part.columns()) {
                c.add(a, &mut self.pager)?;
            }
            self.rows += take;
            at += take;
            if self.rows == self.row_group_rows {
                self.flush_row_group()?;
            }
        }
        Ok(())
    }

    /// Bytes held for the row group in progress: its encoded pages, dictionaries, and the values
    /// waiting for a page.
    pub(crate) fn memory_size(&self) -> usize {
        self.columns.iter().map(Column::memory_size).sum()
    }

    /// Writes the last row group and the footer, and gives the sink back.
    pub(crate) fn into_inner(mut self) -> Result<W> {
        if self.rows > 0 {
            self.flush_row_group()?;
        }
        self.file.into_inner()
    }

    /// Ends every column chunk and writes the row group.
    fn flush_row_group(&mut self) -> Result<()> {
        let rows = std::mem::take(&mut self.rows);
        let mut chunks = Vec::with_capacity(self.columns.len());
        for c in &mut self.columns {
            chunks.push(c.finish(rows, &mut self.pager)?);
        }
        let mut rg = self.file.next_row_group()?;
        for (c, (head, close)) in self.columns.iter_mut().zip(chunks) {
            rg.append_column(&ChunkParts { head: &head, pages: c.pages.inner() }, close)?;
            c.reuse_pages();
        }
        rg.close()?;
        Ok(())
    }
}

/// The dictionary of a column chunk, values in first-seen order.
enum Dict {
    None,
    Ints(IntDict),
    Strs(StrDict),
}

impl Dict {
    fn len(&self) -> usize {
        match self {
            Dict::None => 0,
            Dict::Ints(d) => d.values.len(),
            Dict::Strs(d) => d.len,
        }
    }
}

/// Integers: by value in a table for those near the first ones seen (pids, tids, fds, syscall
/// numbers: no hashing), in a hash map for the others.
struct IntDict {
    values: Vec<i64>,
    map: HashMap<i64, u32, RandomState>,
    /// The value of slot 0, and the slots (`u32::MAX`: not in the dictionary yet).
    direct: Option<(i64, Vec<u32>)>,
    /// Slots of an earlier chunk's table, every one `u32::MAX` again (or none).
    spare_slots: Vec<u32>,
}

impl IntDict {
    /// A dictionary for a column whose first values span `min..=max`, in the allocations of
    /// `old` (the column's dictionary of an earlier chunk, [`IntDict::emptied`]) if given.
    fn new(min: i64, max: i64, old: Option<IntDict>) -> IntDict {
        let mut d = old.unwrap_or_else(|| IntDict {
            values: Vec::new(),
            map: HashMap::default(),
            direct: None,
            spare_slots: Vec::new(),
        });
        let range = (max as u64).wrapping_sub(min as u64);
        if range < DIRECT_RANGE {
            let slots = match std::mem::take(&mut d.spare_slots) {
                s if s.len() == DIRECT_RANGE as usize => s,
                _ => vec![u32::MAX; DIRECT_RANGE as usize],
            };
            // Room below the first values too (fds reused, pids of older processes).
            d.direct = Some((min.saturating_sub(((DIRECT_RANGE - range) / 4) as i64), slots));
        }
        d
    }

    /// Empty, its allocations kept for the next chunk: a row group's worth of dictionaries made
    /// and freed per row group (256 KiB of slots each, and their values) left the heap's peak to
    /// chance. Only the slots that were set are cleared.
    fn emptied(mut self) -> IntDict {
        if let Some((base, mut slots)) = self.direct.take() {
            for &v in &self.values {
                if let Some(s) = slots.get_mut(v.wrapping_sub(base) as u64 as usize) {
                    *s = u32::MAX;
                }
            }
            self.spare_slots = slots;
        }
        self.values.clear();
        self.map.clear();
        self
    }

    /// The index of `v` if the table by value holds it.
    #[inline]
    fn known(&self, v: i64) -> Option<u32> {
        let (base, slots) = self.direct.as_ref()?;
        let &s = slots.get(v.wrapping_sub(*base) as u64 as usize)?;
        (s != u32::MAX).then_some(s)
    }

    #[inline]
    fn index(&mut self, v: i64) -> u32 {
        let values = &mut self.values;
        let mut add = || {
            values.push(v);
            (values.len() - 1) as u32
        };
        if let Some((base, slots)) = &mut self.direct {
            if let Some(s) = slots.get_mut(v.wrapping_sub(*base) as u64 as usize) {
                if *s == u32::MAX {
                    *s = add();
                }
                return *s;
            }
        }
        *self.map.entry(v).or_insert_with(add)
    }
}

/// Strings: the dictionary page's body is built as values arrive.
struct StrDict {
    /// Each value's index, and where its bytes start in `page`.
    map: HashMap<Box<[u8]>, (u32, usize), RandomState>,
    /// The values, length-prefixed (PLAIN), as the dictionary page holds them.
    page: Vec<u8>,
    len: usize,
    /// The values looked up lately, by their [`StrKey`]: most lookups (a few command names and
    /// paths over and over) end here without hashing the whole string or probing the map.
    recent: Vec<Recent>,
}

/// Bits of the slot number of [`StrDict::recent`] (256 slots).
const RECENT_BITS: u32 = 8;

/// A string's length and its first and last 8 bytes (fewer for shorter strings): the whole
/// string for strings of up to 16 bytes, a filter for longer ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StrKey {
    len: usize,
    head: u64,
    tail: u64,
}

impl StrKey {
    #[inline]
    fn of(v: &[u8]) -> StrKey {
        let n = v.len();
        let le8 = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        let le4 = |b: &[u8]| u64::from(u32::from_le_bytes(b.try_into().expect("4 bytes")));
        let (head, tail) = if n >= 8 {
            (le8(&v[..8]), le8(&v[n - 8..]))
        } else if n >= 4 {
            (le4(&v[..4]), le4(&v[n - 4..]))
        } else {
            (v.iter().rev().fold(0, |a, &c| (a << 8) | u64::from(c)), 0)
        };
        StrKey { len: n, head, tail }
    }

    /// Whether the key is the whole string.
    fn exact(&self) -> bool {
        self.len <= 16
    }

    fn slot(&self) -> usize {
        let h = (self.head ^ self.tail.rotate_left(29) ^ self.len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> (64 - RECENT_BITS)) as usize
    }
}

/// A slot of [`StrDict::recent`].
#[derive(Debug, Clone, Copy)]
struct Recent {
    key: StrKey,
    idx: u32,
    /// Where the value's bytes start in the dictionary page.
    at: usize,
}

/// A slot that matches no string (no slice is `usize::MAX` bytes long).
const NO_RECENT: Recent = Recent { key: StrKey { len: usize::MAX, head: 0, tail: 0 }, idx: 0, at: 0 };

impl Default for StrDict {
    fn default() -> StrDict {
        StrDict { map: HashMap::default(), page: Vec::new(), len: 0, recent: vec![NO_RECENT; 1 << RECENT_BITS] }
    }
}

impl StrDict {
    /// Empty, its allocations kept for the next chunk (see [`IntDict::emptied`]).
    fn emptied(mut self) -> StrDict {
        self.map.clear();
        self.page.clear();
        self.len = 0;
        self.recent.fill(NO_RECENT);
        self
    }

    #[inline]
    fn index(&mut self, v: &[u8]) -> u32 {
        self.index_keyed(v, StrKey::of(v))
    }

    /// The index of `v`, whose key is `key`.
    #[inline]
    fn index_keyed(&mut self, v: &[u8], key: StrKey) -> u32 {
        let slot = key.slot();
        let r = self.recent[slot];
        if r.key == key && (key.exact() || self.page.get(r.at..r.at + v.len()) == Some(v)) {
            return r.idx;
        }
        self.look_up(v, key, slot)
    }

    /// The index of `v` from the map, or a new one; remembered in `recent[slot]`.
    #[inline(never)]
    fn look_up(&mut self, v: &[u8], key: StrKey, slot: usize) -> u32 {
        let (idx, at) = match self.map.get(v) {
            Some(&e) => e,
            None => {
                let e = (self.len as u32, self.page.len() + 4);
                self.map.insert(v.into(), e);
                put_bytes(v, &mut self.page);
                self.len += 1;
                e
            }
        };
        self.recent[slot] = Recent { key, idx, at };
        idx
    }

    fn full(&self) -> bool {
        self.len > DICT_LIMIT / 8 || self.page.len() > DICT_LIMIT
    }
}

/// One column of the row group in progress: the pages encoded so far, and the values waiting
/// for a page. Pages are encoded as rows arrive, so a row group costs its encoded size in memory,
/// not its rows.
struct Column {
    descr: ColumnDescPtr,
    enc: Enc,
    /// 64-bit integers (else 32-bit).
    wide: bool,
    /// Data pages written (headers and compressed bodies); the dictionary page goes before them
    /// when the chunk ends.
    pages: TrackedWrite<Vec<u8>>,
    uncompressed: i64,
    encodings: Vec<Encoding>,
    min_max: Option<(i64, i64)>,
    dict: Dict,
    /// Whether a data page refers to the dictionary.
    dict_used: bool,
    /// Whether the integer column chunk has chosen between a dictionary and plain pages.
    decided: bool,
    /// Past the dictionary's limit (or not worth one): plain pages from here on.
    plain: bool,
    /// The integer dictionary of an earlier chunk, emptied, for the next one to fill.
    spare_dict: Option<IntDict>,
    /// Values waiting for a page: dictionary indices, integers, length-prefixed strings.
    idx: Vec<u32>,
    ints: Vec<i64>,
    strs: Vec<u8>,
    strs_n: usize,
}

impl Column {
    fn new(descr: ColumnDescPtr, enc: Enc, wide: bool) -> Column {
        let dict = match enc {
            Enc::KeyDict | Enc::Strings => Dict::Strs(StrDict::default()),
            _ => Dict::None,
        };
        Column {
            descr,
            enc,
            wide,
            pages: TrackedWrite::new(Vec::new()),
            uncompressed: 0,
            encodings: vec![Encoding::RLE],
            min_max: None,
            dict,
            dict_used: false,
            decided: enc == Enc::Delta,
            plain: enc == Enc::Delta,
            spare_dict: None,
            idx: Vec::new(),
            ints: Vec::new(),
            strs: Vec::new(),
            strs_n: 0,
        }
    }

    fn memory_size(&self) -> usize {
        let dict = match &self.dict {
            Dict::None => 0,
            Dict::Ints(d) => d.values.len() * 24 + d.direct.as_ref().map_or(0, |(_, s)| s.len() * 4),
            Dict::Strs(d) => d.page.len() * 2 + d.len * 16,
        };
        self.pages.bytes_written() + dict + self.idx.len() * 4 + self.ints.len() * 8 + self.strs.len()
    }

    /// Largest dictionary, in entries, before the chunk goes on with plain pages. `Plain`
    /// columns (almost always 0) keep a dictionary only while they hold one value.
    fn dict_limit(&self) -> usize {
        match self.enc {
            Enc::Plain => 1,
            _ if self.wide => DICT_LIMIT / 8,
            _ => DICT_LIMIT / 4,
        }
    }

    /// The selected rows of `b`'s column `src`.
    fn add_events(
        &mut self,
        src: Src,
        cx: &TraceContext,
        b: &EventBatch,
        d: Option<&Derived>,
        sel: Sel<'_>,
        p: &mut Pager,
    ) -> Result<()> {
        match (self.enc, src) {
            (Enc::Strings, Src::Chain | Src::ChainRoot) => {
                match d.map(|d| if src == Src::Chain { &d.chain } else { &d.chain_root }) {
                    Some(c) if c.len() == b.len() => self.add_str_col(c, sel, p),
                    _ => self.add_derived_strings(sel, p, |_, _| {}),
                }
            }
            (Enc::Strings, Src::Lock) => self.add_derived_strings(sel, p, |i, out| {
                if let Some(l) = latscope_event::locks::lock_text(b, i) {
                    out.extend_from_slice(l.as_bytes());
                }
            }),
            (Enc::Strings, Src::Comm) => self.add_str_col(&b.comm, sel, p),
            (Enc::Strings, Src::Path) => self.add_str_col(&b.path, sel, p),
            (Enc::Strings, Src::Path2) => self.add_str_col(&b.path2, sel, p),
            (Enc::Strings, Src::FaultPath) => self.add_str_col(&b.fault_path, sel, p),
            (Enc::Strings, Src::WakerComm) => {
                let mut names = std::mem::take(&mut p.names);
                names.clear();
                let mut one = Vec::with_capacity(16);
                let mut push = |i: usize| {
                    waker_comm(b, i, &mut one);
                    names.data.extend_from_slice(&one);
                    names.offsets.push(names.data.len() as u32);
                };
                match sel {
                    Sel::Range(a, e) => (a..e).for_each(&mut push),
                    Sel::Idx(r) => r.iter().for_each(|&i| push(i as usize)),
                }
                let r = self.add_str_col(&names, Sel::Range(0, names.len()), p);
                p.names = names;
                r
            }
            (Enc::KeyDict, _) => {
                let d = dictionaries();
                let values = match src {
                    Src::Host => &cx.host,
                    Src::Kind => &d.kind,
                    Src::Op => &d.op,
                    Src::FdType => &d.fd_type,
                    Src::Disk => &cx.disk_names,
                    Src::CgroupInfo(i) => &cx.cgroup_values[i as usize],
                    Src::WakerKind => &d.waker_kind,
                    Src::WakerWasIn => &d.waker_was_in,
                    Src::Wait => &d.wait,
                    s => return Err(ParquetError::General(format!("{s:?} is not a dictionary column"))),
                };
                let mut keys = std::mem::take(&mut p.keys);
                gather_keys(src, cx, b, sel, &mut keys);
                let r = self.remap_keys(&keys, values.as_string::<i32>());
                p.keys = keys;
                r?;
                self.index_pages(p, false)
            }
            (Enc::Strings, s) => Err(ParquetError::General(format!("{s:?} is not a string column"))),
            _ => {
                // 64-bit signed columns need no conversion: a range of them is encoded in place.
                if let Sel::Range(a, e) = sel {
                    match src {
                        Src::Ret => return self.add_ints(&b.ret[a..e], p),
                        Src::Off => return self.add_ints(&b.off[a..e], p),
                        _ => {}
                    }
                }
                let mut vals = std::mem::take(&mut p.ints);
                gather_events(src, cx, b, d, sel, &mut vals);
                let r = self.add_ints(&vals, p);
                p.ints = vals;
                r
            }
        }
    }

    /// The selected strings of `c`.
    /// A string column made per row by `f` (which appends row `i`'s value to the buffer).
    fn add_derived_strings(
        &mut self,
        sel: Sel<'_>,
        p: &mut Pager,
        mut f: impl FnMut(usize, &mut Vec<u8>),
    ) -> Result<()> {
        let mut names = std::mem::take(&mut p.names);
        names.clear();
        let mut push = |i: usize| {
            f(i, &mut names.data);
            names.offsets.push(names.data.len() as u32);
        };
        match sel {
            Sel::Range(a, e) => (a..e).for_each(&mut push),
            Sel::Idx(r) => r.iter().for_each(|&i| push(i as usize)),
        }
        let r = self.add_str_col(&names, Sel::Range(0, names.len()), p);
        p.names = names;
        r
    }

    fn add_str_col(&mut self, c: &StrCol, sel: Sel<'_>, p: &mut Pager) -> Result<()> {
        let at = |j: usize| &c.data[c.offsets[j] as usize..c.offsets[j + 1] as usize];
        match sel {
            Sel::Range(a, e) => self.add_strings(e - a, |i| at(a + i), p),
            Sel::Idx(r) => self.add_strings(r.len(), |i| at(r[i] as usize), p),
        }
    }

    #[cfg(test)]
    fn add(&mut self, a: &ArrayRef, p: &mut Pager) -> Result<()> {
        match self.enc {
            Enc::KeyDict => self.add_keys(a, p),
            Enc::Strings => {
                let a = a.as_string::<i32>();
                self.add_strings(a.len(), |i| a.value(i).as_bytes(), p)
            }
            _ => {
                let mut vals = std::mem::take(&mut p.ints);
                let r = gather_ints(a, &mut vals).and_then(|()| self.add_ints(&vals, p));
                p.ints = vals;
                r
            }
        }
    }

    fn add_ints(&mut self, v: &[i64], p: &mut Pager) -> Result<()> {
        let Some(&first) = v.first() else { return Ok(()) };
        self.min_max = Some(min_max(v, self.min_max.unwrap_or((first, first))));
        if self.decided && !self.plain {
            return self.dict_ints(v, p, false);
        }
        self.ints.extend_from_slice(v);
        self.settle_ints(p, false)
    }

    /// Chooses the integer chunk's encoding once `SAMPLE` values (or the chunk's end) are in,
    /// then writes the full pages (all of them at the chunk's end, `last`).
    fn settle_ints(&mut self, p: &mut Pager, last: bool) -> Result<()> {
        if !self.decided {
            if self.ints.len() < SAMPLE && !last {
                return Ok(());
            }
            self.decided = true;
            let sample = &self.ints[..self.ints.len().min(SAMPLE)];
            // A sample with more than one distinct value in eight (inode numbers, sizes, return
            // values of reads) says a dictionary would not pay.
            self.plain = self.enc == Enc::IntDict && {
                let mut seen: HashMap<i64, (), RandomState> = HashMap::default();
                sample.iter().any(|&x| seen.insert(x, ()).is_none() && seen.len() > sample.len() / 8)
            };
            if !self.plain {
                let (min, max) = sample.iter().fold((i64::MAX, i64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
                self.dict = Dict::Ints(IntDict::new(min, max, self.spare_dict.take()));
                // What the dictionary does not take comes back into `self.ints`.
                let v = std::mem::take(&mut self.ints);
                return self.dict_ints(&v, p, last);
            }
        }
        let (wide, delta_pages) = (self.wide, self.enc == Enc::Delta);
        while self.ints.len() >= PAGE_ROWS || (last && !self.ints.is_empty()) {
            let n = self.ints.len().min(PAGE_ROWS);
            p.raw.clear();
            let encoding = if delta_pages {
                delta(&self.ints[..n], &mut p.raw);
                Encoding::DELTA_BINARY_PACKED
            } else {
                put_plain(&self.ints[..n], wide, &mut p.raw);
                Encoding::PLAIN
            };
            self.data_page(p, n, encoding)?;
            self.ints.drain(..n);
        }
        Ok(())
    }

    /// `v` through the dictionary; past its limit, the rest of the chunk is plain.
    fn dict_ints(&mut self, v: &[i64], p: &mut Pager, last: bool) -> Result<()> {
        let limit = self.dict_limit();
        let Dict::Ints(d) = &mut self.dict else { return Err(ParquetError::General("no dictionary".into())) };
        let mut taken = v.len();
        if let Some(x) = same(v) {
            // Columns most events leave at one value (0 flags, no inode, ...): one lookup.
            let i = d.index(x);
            if d.values.len() > limit {
                taken = 0;
            } else {
                self.idx.resize(self.idx.len() + v.len(), i);
            }
        } else {
            self.idx.reserve(v.len());
            let mut cur: Option<(i64, u32)> = None;
            for (k, &x) in v.iter().enumerate() {
                let i = match d.known(x) {
                    // Values in the table by value: one load, a branch that is almost always
                    // taken.
                    Some(i) => i,
                    None => match cur {
                        // Runs of one value are common (a thread's pid, tid, fd): no lookup.
                        Some((c, i)) if c == x => i,
                        _ => {
                            let i = d.index(x);
                            if d.values.len() > limit {
                                taken = k;
                                break;
                            }
                            cur = Some((x, i));
                            i
                        }
                    },
                };
                self.idx.push(i);
            }
        }
        if taken == v.len() {
            return self.index_pages(p, last);
        }
        self.index_pages(p, true)?;
        self.plain = true;
        self.ints.extend_from_slice(&v[taken..]);
        self.settle_ints(p, last)
    }

    /// Dictionary arrays of strings: each array's keys map through a table as long as its
    /// dictionary to the chunk dictionary's indices.
    #[cfg(test)]
    fn add_keys(&mut self, a: &ArrayRef, p: &mut Pager) -> Result<()> {
        match a.data_type() {
            DataType::Dictionary(k, _) if **k == DataType::Int32 => {
                let d = a.as_dictionary::<Int32Type>();
                self.remap_keys(d.keys().values(), d.values().as_string::<i32>())?;
            }
            DataType::Dictionary(k, _) if **k == DataType::Int16 => {
                let d = a.as_dictionary::<Int16Type>();
                self.remap_keys(d.keys().values(), d.values().as_string::<i32>())?;
            }
            DataType::Dictionary(k, _) if **k == DataType::Int8 => {
                let d = a.as_dictionary::<Int8Type>();
                self.remap_keys(d.keys().values(), d.values().as_string::<i32>())?;
            }
            t => return Err(ParquetError::General(format!("no direct encoding for {t}"))),
        }
        self.index_pages(p, false)
    }

    fn remap_keys<K: Copy + PartialEq + TryInto<usize> + std::fmt::Display>(
        &mut self,
        keys: &[K],
        values: &StringArray,
    ) -> Result<()> {
        let Dict::Strs(d) = &mut self.dict else { return Err(ParquetError::General("no dictionary".into())) };
        let mut remap = vec![u32::MAX; values.len()];
        let mut slot = |k: K| -> Result<u32> {
            let s = k.try_into().ok().and_then(|k: usize| remap.get_mut(k).map(|s| (k, s)));
            let (k_, s) = s.ok_or_else(|| ParquetError::General(format!("dictionary key {k} out of range")))?;
            if *s == u32::MAX {
                *s = d.index(values.value(k_).as_bytes());
            }
            Ok(*s)
        };
        if let Some(k) = same(keys) {
            let i = slot(k)?;
            self.idx.resize(self.idx.len() + keys.len(), i);
        } else {
            for &k in keys {
                let i = slot(k)?;
                self.idx.push(i);
            }
        }
        Ok(())
    }

    /// `n` strings, `value(0..n)`, through the dictionary until it is full, then plain.
    fn add_strings<'v>(&mut self, n: usize, value: impl Fn(usize) -> &'v [u8], p: &mut Pager) -> Result<()> {
        let mut i = 0;
        if !self.plain {
            let Dict::Strs(d) = &mut self.dict else { return Err(ParquetError::General("no dictionary".into())) };
            self.idx.reserve(n);
            let mut prev = (NO_RECENT.key, 0);
            while i < n {
                let v = value(i);
                let key = StrKey::of(v);
                let k = if key == prev.0 && key.exact() {
                    // Runs of one value are common (a process's comm, no second path).
                    prev.1
                } else {
                    let k = d.index_keyed(v, key);
                    if d.full() {
                        break;
                    }
                    prev = (key, k);
                    k
                };
                self.idx.push(k);
                i += 1;
            }
            let full = d.full();
            self.index_pages(p, full)?;
            if !full {
                return Ok(());
            }
            self.plain = true;
        }
        for j in i..n {
            put_bytes(value(j), &mut self.strs);
            self.strs_n += 1;
            if self.strs_n == PAGE_ROWS || self.strs.len() >= PAGE_BYTES {
                self.strings_page(p)?;
            }
        }
        Ok(())
    }

    fn strings_page(&mut self, p: &mut Pager) -> Result<()> {
        let n = std::mem::take(&mut self.strs_n);
        let raw = std::mem::take(&mut self.strs);
        let r = self.page(p, &raw, n, Encoding::PLAIN, false);
        self.strs = raw;
        self.strs.clear();
        r
    }

    /// Pages of the dictionary indices waiting: full ones, or all (`all`).
    fn index_pages(&mut self, p: &mut Pager, all: bool) -> Result<()> {
        while self.idx.len() >= PAGE_ROWS || (all && !self.idx.is_empty()) {
            let n = self.idx.len().min(PAGE_ROWS);
            let width = bit_width(self.dict.len().saturating_sub(1) as u64).max(1);
            p.raw.clear();
            p.raw.push(width);
            rle_hybrid(&self.idx[..n], width, &mut p.raw);
            self.dict_used = true;
            self.data_page(p, n, Encoding::PLAIN_DICTIONARY)?;
            self.idx.drain(..n);
        }
        Ok(())
    }

    /// `p.raw` as a data page of `n` values.
    fn data_page(&mut self, p: &mut Pager, n: usize, encoding: Encoding) -> Result<()> {
        let raw = std::mem::take(&mut p.raw);
        let r = self.page(p, &raw, n, encoding, false);
        p.raw = raw;
        r
    }

    /// Compresses `raw` and writes it as a data page, or as the dictionary page into `sink`.
    fn page(&mut self, p: &mut Pager, raw: &[u8], num_values: usize, encoding: Encoding, dict: bool) -> Result<()> {
        let spec = write_page(&mut self.pages, p, raw, num_values, encoding, dict)?;
        self.uncompressed += spec;
        if !self.encodings.contains(&encoding) {
            self.encodings.push(encoding);
        }
        Ok(())
    }

    /// Writes what waits, and gives the chunk's dictionary page (its data pages stay in
    /// [`Column::pages`] for the row group to read) and its metadata; the column is then ready for
    /// the next row group, once [`Column::reuse_pages`] is called.
    fn finish(&mut self, rows: usize, p: &mut Pager) -> Result<(Vec<u8>, ColumnCloseResult)> {
        match self.enc {
            Enc::KeyDict => self.index_pages(p, true)?,
            Enc::Strings => {
                self.index_pages(p, true)?;
                if self.strs_n > 0 {
                    self.strings_page(p)?;
                }
            }
            _ => {
                self.settle_ints(p, true)?;
                self.index_pages(p, true)?;
            }
        }
        let mut stats = self.min_max.map(|(min, max)| int_stats(min, max, self.wide));
        let mut head = TrackedWrite::new(Vec::new());
        let mut dict_offset = None;
        if self.dict_used {
            p.raw.clear();
            let n = match &self.dict {
                Dict::None => 0,
                Dict::Ints(d) => {
                    put_plain(&d.values, self.wide, &mut p.raw);
                    d.values.len()
                }
                Dict::Strs(d) => {
                    p.raw.extend_from_slice(&d.page);
                    if self.enc == Enc::KeyDict {
                        if let (Some(min), Some(max)) = (d.map.keys().min(), d.map.keys().max()) {
                            let ba = |v: &[u8]| Some(ByteArray::from(v.to_vec()));
                            stats = Some(Statistics::byte_array(ba(min), ba(max), None, Some(0), false));
                        }
                    }
                    d.len
                }
            };
            let raw = std::mem::take(&mut p.raw);
            let r = write_page(&mut head, p, &raw, n, Encoding::PLAIN_DICTIONARY, true);
            p.raw = raw;
            self.uncompressed += r?;
            dict_offset = Some(0);
        }
        let data_offset = head.bytes_written() as i64;
        let head = head.into_inner()?;
        self.pages.flush()?;
        let size = head.len() + self.pages.inner().len();
        let mut b = ColumnChunkMetaData::builder(self.descr.clone())
            .set_encodings(std::mem::replace(&mut self.encodings, vec![Encoding::RLE]))
            .set_num_values(rows as i64)
            .set_compression(Compression::ZSTD(p.level))
            .set_total_compressed_size(size as i64)
            .set_total_uncompressed_size(std::mem::take(&mut self.uncompressed))
            .set_data_page_offset(data_offset)
            .set_dictionary_page_offset(dict_offset);
        if let Some(s) = stats {
            b = b.set_statistics(s);
        }
        let close = ColumnCloseResult {
            bytes_written: size as u64,
            rows_written: rows as u64,
            metadata: b.build()?,
            bloom_filter: None,
            column_index: None,
            offset_index: None,
        };
        // Ready for the next chunk.
        self.min_max = None;
        self.dict = match (self.enc, std::mem::replace(&mut self.dict, Dict::None)) {
            (Enc::KeyDict | Enc::Strings, Dict::Strs(d)) => Dict::Strs(d.emptied()),
            (Enc::KeyDict | Enc::Strings, _) => Dict::Strs(StrDict::default()),
            (_, Dict::Ints(d)) => {
                self.spare_dict = Some(d.emptied());
                Dict::None
            }
            _ => Dict::None,
        };
        self.dict_used = false;
        self.decided = self.enc == Enc::Delta;
        self.plain = self.enc == Enc::Delta;
        Ok((head, close))
    }

    /// Empties [`Column::pages`] for the next chunk, keeping its buffer: buffers of a chunk's
    /// size (100 KB to a few MB) allocated and freed per chunk, among the many that live through
    /// a row group, left the heap's peak to chance; kept, they grow in the first row group only.
    fn reuse_pages(&mut self) {
        let mut v = std::mem::take(self.pages.inner_mut());
        v.clear();
        self.pages = TrackedWrite::new(v);
    }
}

/// Compresses `raw` and writes it to `sink` as a dictionary page (`dict`) or a data page;
/// returns its uncompressed size (header included).
fn write_page(
    sink: &mut TrackedWrite<Vec<u8>>,
    p: &mut Pager,
    raw: &[u8],
    num_values: usize,
    encoding: Encoding,
    dict: bool,
) -> Result<i64> {
    // The page writer dropped its handle of the previous page: no copy here.
    let out = Arc::make_mut(&mut p.out);
    out.clear();
    out.reserve(zstd::zstd_safe::compress_bound(raw.len()));
    p.zstd.compress_to_buffer(raw, out).map_err(|e| ParquetError::General(format!("zstd: {e}")))?;
    let buf = Bytes::from_owner(SharedOut(Arc::clone(&p.out)));
    let num_values = u32::try_from(num_values).map_err(|_| ParquetError::General("page too large".into()))?;
    let page = if dict {
        Page::DictionaryPage { buf, num_values, encoding, is_sorted: false }
    } else {
        Page::DataPage {
            buf,
            num_values,
            encoding,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        }
    };
    let spec = SerializedPageWriter::new(sink).write_page(CompressedPage::new(page, raw.len()))?;
    Ok(spec.uncompressed_size as i64)
}

fn int_stats(min: i64, max: i64, wide: bool) -> Statistics {
    if wide {
        Statistics::int64(Some(min), Some(max), None, Some(0), false)
    } else {
        Statistics::int32(Some(min as i32), Some(max as i32), None, Some(0), false)
    }
}

/// The integer values of `a` (widened to i64) into `into`.
#[cfg(test)]
fn gather_ints(a: &ArrayRef, into: &mut Vec<i64>) -> Result<()> {
    into.clear();
    match a.data_type() {
        DataType::Int64 => into.extend_from_slice(a.as_primitive::<Int64Type>().values()),
        DataType::Timestamp(_, _) => into.extend_from_slice(a.as_primitive::<TimestampMicrosecondType>().values()),
        DataType::Int32 => into.extend(a.as_primitive::<Int32Type>().values().iter().map(|&v| i64::from(v))),
        t => return Err(ParquetError::General(format!("no direct encoding for {t}"))),
    }
    Ok(())
}

/// The least and greatest of `v` and `from`.
fn min_max(v: &[i64], from: (i64, i64)) -> (i64, i64) {
    // Eight independent lanes without branches: x86-64 has no 64-bit vector min/max before
    // AVX-512, so a single chain of compares is what bounds the loop otherwise.
    let (mut lo, mut hi) = ([from.0; 8], [from.1; 8]);
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for k in 0..8 {
            lo[k] = if c[k] < lo[k] { c[k] } else { lo[k] };
            hi[k] = if c[k] > hi[k] { c[k] } else { hi[k] };
        }
    }
    let rest = chunks.remainder().iter();
    let lo = lo.into_iter().chain(rest.clone().copied()).min().unwrap_or(from.0);
    let hi = hi.into_iter().chain(rest.copied()).max().unwrap_or(from.1);
    (lo, hi)
}

/// The value of every element of `v`, if they are all the same.
fn same<T: Copy + PartialEq>(v: &[T]) -> Option<T> {
    let &first = v.first()?;
    // Blocks of 64 compared without an early exit (the compiler vectorizes them); a column that
    // varies stops at its first block.
    let mut blocks = v.chunks_exact(64);
    for b in &mut blocks {
        if !b.iter().fold(true, |all, &x| all & (x == first)) {
            return None;
        }
    }
    blocks.remainder().iter().all(|&x| x == first).then_some(first)
}

fn put_plain(v: &[i64], wide: bool, raw: &mut Vec<u8>) {
    let width = if wide { 8 } else { 4 };
    let start = raw.len();
    raw.resize(start + v.len() * width, 0);
    let dst = &mut raw[start..];
    if wide {
        for (d, x) in dst.chunks_exact_mut(8).zip(v) {
            d.copy_from_slice(&x.to_le_bytes());
        }
    } else {
        for (d, &x) in dst.chunks_exact_mut(4).zip(v) {
            d.copy_from_slice(&(x as i32).to_le_bytes());
        }
    }
}

fn put_bytes(v: &[u8], raw: &mut Vec<u8>) {
    raw.extend_from_slice(&(v.len() as u32).to_le_bytes());
    raw.extend_from_slice(v);
}

/// Bits needed for `v`.
fn bit_width(v: u64) -> u8 {
    (64 - v.leading_zeros()) as u8
}

fn uleb(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Packs `values` (each below 2^width) little-endian, least significant bit first, as Parquet's
/// bit-packing does; `values.len() * width` must be a multiple of 8.
fn bitpack(values: impl Iterator<Item = u64>, width: u8, out: &mut Vec<u8>) {
    let w = u32::from(width);
    if w == 0 {
        return;
    }
    if w <= 32 {
        // Narrow values (dictionary indices, most deltas): a 64-bit accumulator, 32 bits out at
        // a time.
        let mut acc = 0u64;
        let mut bits = 0u32;
        for v in values {
            acc |= v << bits;
            bits += w;
            if bits >= 32 {
                out.extend_from_slice(&(acc as u32).to_le_bytes());
                acc >>= 32;
                bits -= 32;
            }
        }
        out.extend_from_slice(&acc.to_le_bytes()[..bits.div_ceil(8) as usize]);
        return;
    }
    let mut acc: u128 = 0;
    let mut bits = 0u32;
    for v in values {
        acc |= u128::from(v) << bits;
        bits += w;
        if bits >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            bits -= 64;
        }
    }
    let tail = bits.div_ceil(8) as usize;
    out.extend_from_slice(&(acc as u64).to_le_bytes()[..tail]);
}

/// `v` bit-packed in groups of 8 (the last one padded with zeros), as [`bitpack`] does.
fn pack_groups(v: &[u32], width: u8, out: &mut Vec<u8>) {
    let w = u32::from(width);
    if w > 16 {
        let pad = v.len().div_ceil(8) * 8 - v.len();
        bitpack(v.iter().map(|&x| u64::from(x)).chain(std::iter::repeat_n(0, pad)), width, out);
        return;
    }
    // Dictionaries of up to 65536 entries: a group of 8 fits in 128 bits and is `w` bytes; in
    // 64 bits (cheaper to shift) up to 256 entries.
    macro_rules! groups {
        ($acc:ty) => {
            for g in v.chunks(8) {
                let mut acc: $acc = 0;
                for (k, &x) in g.iter().enumerate() {
                    acc |= <$acc>::from(x) << (k as u32 * w);
                }
                out.extend_from_slice(&acc.to_le_bytes()[..w as usize]);
            }
        };
    }
    if w <= 8 {
        groups!(u64);
    } else {
        groups!(u128);
    }
}

/// Parquet's RLE / bit-packing hybrid of `v` (without the length prefix): runs of 16 or more
/// equal values as RLE runs, the rest bit-packed in groups of 8 (the last one padded).
fn rle_hybrid(v: &[u32], width: u8, out: &mut Vec<u8>) {
    put_hybrid(v, width, long_runs(v), out);
}

/// The maximal runs of 16 or more equal values of `v`, in order, as `(start, end)`.
fn long_runs(v: &[u32]) -> impl Iterator<Item = (usize, usize)> + '_ {
    // A run of 16 or more covers a whole block of 8 aligned on 8: look for those (without a
    // branch per value), then widen each to its run.
    let mut blk = 0;
    std::iter::from_fn(move || {
        while blk + 8 <= v.len() {
            let x = v[blk];
            if !v[blk..blk + 8].iter().fold(true, |all, &y| all & (y == x)) {
                blk += 8;
                continue;
            }
            let (mut i, mut j) = (blk, blk + 8);
            while i > 0 && v[i - 1] == x {
                i -= 1;
            }
            while j < v.len() && v[j] == x {
                j += 1;
            }
            blk = j.next_multiple_of(8);
            if j - i >= 16 {
                return Some((i, j));
            }
        }
        None
    })
}

/// `v` as the hybrid with `runs` (maximal runs of 16 or more, in order) as RLE runs and the rest
/// bit-packed.
fn put_hybrid(v: &[u32], width: u8, runs: impl IntoIterator<Item = (usize, usize)>, out: &mut Vec<u8>) {
    let value_bytes = usize::from(width).div_ceil(8);
    let packed = |lits: &[u32], out: &mut Vec<u8>| {
        for part in lits.chunks(MAX_GROUPS * 8) {
            let groups = part.len().div_ceil(8);
            uleb(((groups as u64) << 1) | 1, out);
            pack_groups(part, width, out);
        }
    };
    let mut lit_start = 0;
    for (i, j) in runs {
        // The literals before the run must fill whole groups of 8: lend them the run's first
        // values.
        let lend = (8 - (i - lit_start) % 8) % 8;
        if i + lend > lit_start {
            packed(&v[lit_start..i + lend], out);
        }
        uleb(((j - i - lend) as u64) << 1, out);
        out.extend_from_slice(&v[i].to_le_bytes()[..value_bytes]);
        lit_start = j;
    }
    if lit_start < v.len() {
        packed(&v[lit_start..], out);
    }
}

/// 32 values below 2^`width` packed as [`bitpack`] packs them (`4 * width` bytes), with shifts
/// the compiler knows for each width: a delta miniblock.
fn pack32(v: &[u64; 32], width: u8, out: &mut Vec<u8>) {
    #[inline(always)]
    fn pack<const W: u32>(v: &[u64; 32], out: &mut Vec<u8>) {
        let mut words = [0u64; 33];
        for (k, &x) in v.iter().enumerate() {
            let bit = k as u32 * W;
            let (i, s) = ((bit / 64) as usize, bit % 64);
            words[i] |= x << s;
            if s + W > 64 {
                words[i + 1] |= x >> (64 - s);
            }
        }
        let (start, n) = (out.len(), 4 * W as usize);
        for w in &words[..n.div_ceil(8)] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.truncate(start + n);
    }
    macro_rules! widths {
        ($($w:literal)*) => {
            match width {
                $($w => pack::<$w>(v, out),)*
                _ => unreachable!("a width of {width} bits"),
            }
        };
    }
    widths!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64);
}

/// `DELTA_BINARY_PACKED` of `v`: blocks of 128 deltas in 4 miniblocks of 32.
fn delta(v: &[i64], out: &mut Vec<u8>) {
    const BLOCK: usize = 128;
    const MINI: usize = 32;
    uleb(BLOCK as u64, out);
    uleb((BLOCK / MINI) as u64, out);
    uleb(v.len() as u64, out);
    uleb(zigzag(v.first().copied().unwrap_or(0)), out);
    let mut deltas = [0i64; BLOCK];
    let mut rest = v;
    while rest.len() > 1 {
        let n = (rest.len() - 1).min(BLOCK);
        for k in 0..n {
            deltas[k] = rest[k + 1].wrapping_sub(rest[k]);
        }
        let min = deltas[..n].iter().copied().min().unwrap_or(0);
        uleb(zigzag(min), out);
        let mut widths = [0u8; BLOCK / MINI];
        for (m, w) in widths.iter_mut().enumerate() {
            let part = &deltas[(m * MINI).min(n)..((m + 1) * MINI).min(n)];
            let max = part.iter().map(|&d| d.wrapping_sub(min) as u64).max().unwrap_or(0);
            *w = bit_width(max);
        }
        out.extend_from_slice(&widths);
        for (m, &w) in widths.iter().enumerate() {
            let (a, b) = (m * MINI, ((m + 1) * MINI).min(n));
            if a >= n {
                break; // miniblocks past the last value have no body
            }
            let mut vals = [0u64; MINI];
            for (x, &d) in vals.iter_mut().zip(&deltas[a..b]) {
                *x = d.wrapping_sub(min) as u64;
            }
            pack32(&vals, w, out);
        }
        rest = &rest[n..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int16Type;
    use arrow_array::{DictionaryArray, Int16Array, Int32Array, Int64Array, TimestampMicrosecondArray};
    use arrow_schema::{Field, Schema, TimeUnit};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use latscope_trace::synth::Rng;

    fn schema() -> SchemaRef {
        let dict = DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8));
        Arc::new(Schema::new(vec![
            Field::new("time", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), false),
            Field::new("lat", DataType::Int64, false),
            Field::new("op", dict, false),
            Field::new("pid", DataType::Int32, false),
            Field::new("ino", DataType::Int64, false),
            Field::new("flags", DataType::Int64, false),
            Field::new("fd", DataType::Int32, false),
            Field::new("path", DataType::Utf8, false),
            Field::new("qtime", DataType::Int64, false),
            Field::new("dev", DataType::Int64, false),
            Field::new("host", DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8)), false),
            Field::new("nr", DataType::Int32, false),
            Field::new("mode", DataType::Int64, false),
            Field::new("ret", DataType::Int64, false),
        ]))
    }

    /// Batches with every shape the encoders meet: increasing and wrapping times, extreme
    /// integers, runs and alternations, dictionaries that differ between batches, many distinct
    /// strings (forcing the plain fallback) and empty ones, columns of one value (in a chunk, or
    /// only in each batch), integers spanning just below and just above the range indexed by
    /// value, columns whose dictionary fills up in the middle of a chunk (which goes on plain).
    fn batches(rows: &[usize], distinct_paths: u64) -> Vec<RecordBatch> {
        let mut r = Rng::new(42);
        let mut t = -5i64;
        let mut row = 0u64;
        let ops: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec!["read", "write", "unknown", "openat"])),
            Arc::new(StringArray::from(vec!["openat", "fsync"])),
        ];
        rows.iter()
            .enumerate()
            .map(|(bi, &n)| {
                let time: Vec<i64> = (0..n)
                    .map(|i| {
                        t = if i == 7 { t.wrapping_add(i64::MAX) } else { t + (r.next_u64() % 3000) as i64 };
                        t
                    })
                    .collect();
                let lat: Vec<i64> = (0..n)
                    .map(|i| if i % 1000 == 3 { i64::MIN } else { (r.next_u64() >> (r.next_u64() % 60)) as i64 })
                    .collect();
                let dict = &ops[bi % 2];
                let keys: Vec<i16> =
                    (0..n).map(|i| if i % 100 < 40 { 0 } else { (r.next_u64() % dict.len() as u64) as i16 }).collect();
                let pid: Vec<i32> =
                    (0..n).map(|i| if i % 50 < 30 { 100 } else { (r.next_u64() % 7) as i32 - 3 }).collect();
                let ino: Vec<i64> = (0..n).map(|_| r.next_u64() as i64).collect();
                let flags: Vec<i64> = (0..n).map(|i| if i % 9 == 0 { 0o101 } else { 0 }).collect();
                let fd: Vec<i32> = (0..n).map(|i| [i32::MIN, -1, 0, 3, i32::MAX][i % 5]).collect();
                let path: Vec<String> =
                    (0..n)
                        .map(|i| {
                            if i % 4 == 0 {
                                String::new()
                            } else {
                                format!("/data/f{}", r.next_u64() % distinct_paths)
                            }
                        })
                        .collect();
                let dev = vec![bi as i64; n];
                let hosts: ArrayRef = Arc::new(StringArray::from(vec!["h0", "h1"]));
                let host = DictionaryArray::<Int16Type>::new(Int16Array::from(vec![1i16; n]), hosts);
                let top = DIRECT_RANGE as i32 - 1 + (bi % 2) as i32;
                let nr: Vec<i32> = (0..n).map(|i| [0, 1, top][i % 3]).collect();
                // One value, then several (past a `PLAIN` column's dictionary of one).
                let mode: Vec<i64> = (0..n).map(|i| if bi < 4 { 0o644 } else { (i % 3) as i64 }).collect();
                // A few values, then a new one every row (past the dictionary's limit).
                let ret: Vec<i64> = (0..n)
                    .map(|i| {
                        row += 1;
                        if row < 20_000 {
                            (i % 5) as i64
                        } else {
                            -(row as i64)
                        }
                    })
                    .collect();
                RecordBatch::try_new(
                    schema(),
                    vec![
                        Arc::new(TimestampMicrosecondArray::from(time).with_timezone("UTC")),
                        Arc::new(Int64Array::from(lat)),
                        Arc::new(DictionaryArray::<Int16Type>::new(Int16Array::from(keys), dict.clone())),
                        Arc::new(Int32Array::from(pid)),
                        Arc::new(Int64Array::from(ino)),
                        Arc::new(Int64Array::from(flags)),
                        Arc::new(Int32Array::from(fd)),
                        Arc::new(StringArray::from(path)),
                        Arc::new(Int64Array::from(vec![0i64; n])),
                        Arc::new(Int64Array::from(dev)),
                        Arc::new(host),
                        Arc::new(Int32Array::from(nr)),
                        Arc::new(Int64Array::from(mode)),
                        Arc::new(Int64Array::from(ret)),
                    ],
                )
                .unwrap()
            })
            .collect()
    }

    fn write(batches: &[RecordBatch], row_group: usize) -> Bytes {
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap()))
            .set_max_row_group_row_count(Some(row_group))
            .build();
        let mut w = DirectWriter::try_new(Vec::new(), &schema(), &props).unwrap();
        for b in batches {
            w.write(b).unwrap();
        }
        Bytes::from(w.into_inner().unwrap())
    }

    /// Every value read back by the parquet crate's own reader, with the schema's types.
    fn round_trip(rows: &[usize], row_group: usize, distinct_paths: u64) -> parquet::file::metadata::ParquetMetaData {
        let input = batches(rows, distinct_paths);
        let file = write(&input, row_group);
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(file.clone()).unwrap().with_batch_size(1 << 20).build().unwrap();
        let got: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        let total: usize = rows.iter().sum();
        assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), total);
        let expect = arrow_select::concat::concat_batches(&schema(), &input).unwrap();
        let got = arrow_select::concat::concat_batches(&got[0].schema(), &got).unwrap();
        for (i, f) in schema().fields().iter().enumerate() {
            let (e, g) = (expect.column(i), got.column(i));
            if let DataType::Dictionary(_, _) = f.data_type() {
                let e = arrow_cast_strings(e);
                let g = arrow_cast_strings(g);
                assert_eq!(e, g, "column {}", f.name());
            } else {
                assert_eq!(e.to_data(), g.to_data(), "column {}", f.name());
            }
        }
        let meta = SerializedFileReader::new(file).unwrap().metadata().clone();
        assert_eq!(meta.num_row_groups(), total.div_ceil(row_group));
        for rg in meta.row_groups() {
            let s = rg.column(1).statistics().expect("integer columns have statistics");
            assert!(s.min_bytes_opt().is_some() && s.max_bytes_opt().is_some());
            // A column of one value: its statistics, and a dictionary of one entry.
            let q = rg.column(8);
            assert_eq!(q.statistics().unwrap().min_bytes_opt(), Some(&0i64.to_le_bytes()[..]));
            assert_eq!(q.statistics().unwrap().max_bytes_opt(), Some(&0i64.to_le_bytes()[..]));
            assert!(q.dictionary_page_offset().is_some());
            assert_eq!(rg.column(10).statistics().unwrap().min_bytes_opt(), Some(&b"h1"[..]));
        }
        meta
    }

    fn arrow_cast_strings(a: &ArrayRef) -> Vec<String> {
        let d = a.as_dictionary::<Int16Type>();
        let v = d.values().as_string::<i32>();
        d.keys().values().iter().map(|&k| v.value(k as usize).to_string()).collect()
    }

    /// The direct path (event batches, selections, row groups cut inside a batch, two traces of
    /// different hosts and disks in one file) writes the very bytes the reference conversion to
    /// record batches does.
    #[test]
    fn events_written_directly_match_the_reference_conversion() {
        use super::super::convert::reference::EventConverter;
        use crate::source::Rows;
        use latscope_event::BlockDevice;
        use latscope_trace::synth;

        let mut rng = synth::Rng::new(7);
        let disk = (259 << 20) | 3;
        let headers = [synth::sample_header(), {
            let mut h = synth::sample_header();
            h.hostname = "other".into();
            h.realtime_offset_ns = -5_000_000_000;
            h.block_devices.push(BlockDevice { dev: disk, name: "nvme0n1".into(), ..Default::default() });
            h
        }];
        let cxs: Vec<TraceContext> = headers.iter().map(|h| TraceContext::new(h, &h.hostname)).collect();
        let blocks: Vec<(usize, EventBatch, Option<Vec<u32>>)> = [3000usize, 1, 7000, 2500, 40_000]
            .iter()
            .enumerate()
            .map(|(k, &n)| {
                let mut b = synth::random_batch(&mut rng, n);
                for i in 0..n {
                    // Runs of one value, kinds and file types past the names, known disks.
                    if i % 5 != 0 {
                        b.pid[i] = 4242;
                    }
                    match i % 7 {
                        0 => b.kind[i] = 9,
                        1 => b.fd_type[i] = 200,
                        2 => b.dev[i] = disk,
                        3 => b.dev[i] = 253 << 20,
                        4 => b.nr[i] = 5000,
                        5 => b.dev[i] = 0,
                        _ => {}
                    }
                    b.ts[i] = 1_000 + (i as u64) * 977;
                }
                let rows = (k % 2 == 1).then(|| (0..n as u32).filter(|i| i % 3 != 1).collect::<Vec<u32>>());
                (k % 2, b, rows)
            })
            .collect();
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap()))
            .set_max_row_group_row_count(Some(4096))
            .build();
        let schema = super::super::schema::event_schema();

        let mut direct = DirectWriter::try_new(Vec::new(), &schema, &props).unwrap();
        for (t, b, rows) in &blocks {
            let sel = match rows {
                None => Sel::Range(0, b.len()),
                Some(r) => Sel::Idx(r),
            };
            direct.write_events(&cxs[*t], b, None, sel).unwrap();
        }
        let direct = direct.into_inner().unwrap();

        let conv = EventConverter::new();
        let mut reference = DirectWriter::try_new(Vec::new(), &schema, &props).unwrap();
        for (t, b, rows) in &blocks {
            let rows = rows.as_deref().map_or(Rows::All, Rows::Some);
            let mut out = Vec::new();
            conv.convert(&cxs[*t], b, rows, &mut out);
            for r in &out {
                reference.write(r).unwrap();
            }
        }
        let reference = reference.into_inner().unwrap();
        assert!(direct.len() > 100_000);
        assert!(direct == reference, "the direct path's file differs from the reference");

        // And what it wrote is what the reference conversion says, value for value.
        let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(direct)).unwrap().build().unwrap();
        let got: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        let expect: usize = blocks.iter().map(|(_, b, r)| r.as_ref().map_or(b.len(), Vec::len)).sum();
        assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), expect);
    }

    #[test]
    fn every_encoding_reads_back_exactly() {
        round_trip(&[1, 2, 129, 1000, 70_000, 33], 50_000, 40);
    }

    #[test]
    fn many_distinct_strings_fall_back_to_plain_and_read_back() {
        let meta = round_trip(&[200_000], 300_000, 1 << 40);
        // The dictionary's first pages, then plain ones, in one column chunk.
        for c in [7, 13] {
            let e = meta.row_group(0).column(c).encodings().collect::<Vec<_>>();
            assert!(e.contains(&Encoding::PLAIN) && e.contains(&Encoding::PLAIN_DICTIONARY), "column {c}: {e:?}");
            assert!(meta.row_group(0).column(c).dictionary_page_offset().is_some());
        }
    }

    #[test]
    fn one_row_and_empty_batches() {
        round_trip(&[1], 10, 3);
        round_trip(&[0, 5, 0], 2, 3);
    }

    #[test]
    fn min_max_of_every_length_and_position() {
        let mut r = Rng::new(9);
        for n in 0..40 {
            let v: Vec<i64> = (0..n).map(|_| r.next_u64() as i64).collect();
            let from = (r.next_u64() as i64, r.next_u64() as i64);
            let from = (from.0.min(from.1), from.0.max(from.1));
            let expect = v.iter().fold(from, |(a, b), &x| (a.min(x), b.max(x)));
            assert_eq!(min_max(&v, from), expect, "n = {n}");
        }
        assert_eq!(min_max(&[i64::MIN, 0, i64::MAX], (5, 5)), (i64::MIN, i64::MAX));
    }

    #[test]
    fn hybrid_runs_and_groups() {
        // Long run after 3 literals, a run too short for RLE, a run at the end.
        let mut v = vec![1, 2, 3];
        v.extend(std::iter::repeat_n(5, 40));
        v.extend([6, 6, 6, 7]);
        v.extend(std::iter::repeat_n(2, 20));
        let mut out = Vec::new();
        rle_hybrid(&v, 3, &mut out);
        assert_eq!(decode_hybrid(&out, 3, v.len()), v);
        let many: Vec<u32> = (0..5000).map(|i| (i * 7 % 13) as u32).collect();
        let mut out = Vec::new();
        rle_hybrid(&many, 4, &mut out);
        assert_eq!(decode_hybrid(&out, 4, many.len()), many);
        // Every width, groups packed 8 at a time (up to 16 bits) and value by value (wider).
        for width in 1..=32u8 {
            let max = if width == 32 { u32::MAX } else { (1u32 << width) - 1 };
            let v: Vec<u32> =
                (0..1003u32).map(|i| if i % 3 == 0 { max } else { i.wrapping_mul(2_654_435_761) & max }).collect();
            let mut out = Vec::new();
            rle_hybrid(&v, width, &mut out);
            assert_eq!(decode_hybrid(&out, width, v.len()), v, "width {width}");
        }
    }

    /// Maximal runs of 16 or more found value by value, the way the hybrid was first written:
    /// the block-wise search must find the same runs.
    fn long_runs_value_by_value(v: &[u32]) -> Vec<(usize, usize)> {
        let (mut runs, mut i) = (Vec::new(), 0);
        while i < v.len() {
            let mut j = i + 1;
            while j < v.len() && v[j] == v[i] {
                j += 1;
            }
            if j - i >= 16 {
                runs.push((i, j));
            }
            i = j;
        }
        runs
    }

    #[test]
    fn runs_found_blockwise_are_the_runs_found_value_by_value() {
        let mut rng = Rng::new(7);
        for case in 0..2000 {
            // Runs of 1 to 40 values at every alignment, from 2 to 300 distinct values.
            let distinct = 2 + case % 299;
            let mut v = Vec::new();
            let len = rng.next_u64() as usize % 700;
            while v.len() < len {
                let run = 1 + rng.next_u64() as usize % if case % 2 == 0 { 40 } else { 18 };
                let x = (rng.next_u64() % distinct as u64) as u32;
                v.extend(std::iter::repeat_n(x, run));
            }
            let width = bit_width(distinct as u64 - 1).max(1);
            assert_eq!(long_runs(&v).collect::<Vec<_>>(), long_runs_value_by_value(&v), "case {case}: {v:?}");
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            rle_hybrid(&v, width, &mut fast);
            put_hybrid(&v, width, long_runs_value_by_value(&v), &mut slow);
            assert_eq!(fast, slow, "case {case}: {v:?}");
            assert_eq!(decode_hybrid(&fast, width, v.len()), v);
        }
    }

    #[test]
    fn miniblocks_pack_as_values_do_one_by_one() {
        let mut rng = Rng::new(11);
        for width in 0..=64u8 {
            let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
            for _ in 0..20 {
                let mut v = [0u64; 32];
                v.iter_mut().for_each(|x| *x = rng.next_u64() & mask);
                v[31] = mask; // the widest value, last
                let (mut fast, mut slow) = (vec![0xaa], vec![0xaa]);
                pack32(&v, width, &mut fast);
                bitpack(v.iter().copied(), width, &mut slow);
                assert_eq!(fast, slow, "width {width}");
                assert_eq!(fast.len(), 1 + 4 * usize::from(width));
            }
        }
    }

    #[test]
    fn strings_alike_at_both_ends_keep_their_own_indices() {
        // Same length, first and last 8 bytes: only the middle differs (the recent table's key
        // then is a filter, not the string); short strings of zero bytes; many strings sharing
        // recent-table slots. Indices are first-seen order, as a plain map gives them.
        let mut vals: Vec<Vec<u8>> =
            vec![vec![], vec![0], vec![0, 0], vec![0, 0, 0], vec![0; 4], vec![0; 8], vec![0; 16]];
        for m in 0..40u8 {
            vals.push([b"/var/lib/".as_slice(), &[b'a' + m % 26, b'0' + m / 26], b"/data.file".as_slice()].concat());
        }
        vals.extend((0..2000).map(|i| format!("/srv/{i}").into_bytes()));
        let mut rng = Rng::new(5);
        let mut d = StrDict::default();
        let mut expected: HashMap<Vec<u8>, u32> = HashMap::new();
        for _ in 0..50_000 {
            let v = &vals[rng.next_u64() as usize % vals.len()];
            let n = expected.len() as u32;
            let want = *expected.entry(v.clone()).or_insert(n);
            assert_eq!(d.index(v), want, "{:?}", String::from_utf8_lossy(v));
        }
        assert_eq!(d.len, expected.len());
    }

    /// A reference decoder written from the format's description.
    fn decode_hybrid(mut b: &[u8], width: u8, n: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let read_uleb = |b: &mut &[u8]| {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let x = b[0];
                *b = &b[1..];
                v |= u64::from(x & 0x7f) << shift;
                shift += 7;
                if x < 0x80 {
                    return v;
                }
            }
        };
        while out.len() < n {
            let h = read_uleb(&mut b);
            if h & 1 == 0 {
                let nb = usize::from(width).div_ceil(8);
                let mut x = [0u8; 4];
                x[..nb].copy_from_slice(&b[..nb]);
                b = &b[nb..];
                out.extend(std::iter::repeat_n(u32::from_le_bytes(x), (h >> 1) as usize));
            } else {
                let count = (h >> 1) as usize * 8;
                let bytes = count * usize::from(width) / 8;
                for k in 0..count {
                    let mut v = 0u32;
                    for bit in 0..usize::from(width) {
                        let pos = k * usize::from(width) + bit;
                        v |= u32::from((b[pos / 8] >> (pos % 8)) & 1) << bit;
                    }
                    out.push(v);
                }
                b = &b[bytes..];
            }
        }
        out.truncate(n);
        out
    }
}

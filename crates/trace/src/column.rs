//! The trace's Arrow schema and the conversions between [`EventBatch`] and Arrow record batches.

#[cfg(test)]
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::RecordBatch;
#[cfg(test)]
use arrow_array::{ArrayRef, PrimitiveArray, RecordBatchOptions, StringArray};
#[cfg(test)]
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema};
use latscope_event::{EventBatch, StrCol};

/// Calls `$mac!` with the fixed-width columns, `(Variant, field, ArrowType, DataType, missing)`,
/// in two groups: those of the first version of the format, which precede the three string
/// columns `comm`, `path`, `path2` in the schema, and those added since, which follow them
/// (and precede the later string column `fault_path`, the last).
/// `missing` is the value of a later column in a file written before it existed.
macro_rules! with_prim_columns {
    ($mac:ident) => {
        $mac! {
            [
                (Kind, kind, UInt8Type, UInt8, 0),
                (Ts, ts, UInt64Type, UInt64, 0),
                (Lat, lat, UInt64Type, UInt64, 0),
                (Pid, pid, UInt32Type, UInt32, 0),
                (Tid, tid, UInt32Type, UInt32, 0),
                (Uid, uid, UInt32Type, UInt32, 0),
                (Nr, nr, UInt16Type, UInt16, 0),
                (Ret, ret, Int64Type, Int64, 0),
                (Fd, fd, Int32Type, Int32, 0),
                (FdType, fd_type, UInt8Type, UInt8, 0),
                (Dev, dev, UInt32Type, UInt32, 0),
                (Ino, ino, UInt64Type, UInt64, 0),
                (Bytes, bytes, UInt64Type, UInt64, 0),
                (Off, off, Int64Type, Int64, 0),
                (Flags, flags, UInt32Type, UInt32, 0),
                (Mode, mode, UInt32Type, UInt32, 0),
                (Dirfd, dirfd, Int32Type, Int32, 0),
                (Addr, addr, UInt64Type, UInt64, 0),
                (Cgroup, cgroup, UInt64Type, UInt64, 0),
                (Qtime, qtime, UInt64Type, UInt64, 0)
            ]
            [
                (Cpu, cpu, UInt16Type, UInt16, 0),
                (Off2, off2, Int64Type, Int64, -1),
                (WhyCpu, why_cpu, UInt64Type, UInt64, 0),
                (WhyRunq, why_runq, UInt64Type, UInt64, 0),
                (WhyIo, why_io, UInt64Type, UInt64, 0),
                (WhyLock, why_lock, UInt64Type, UInt64, 0),
                (WhyIpc, why_ipc, UInt64Type, UInt64, 0),
                (WhyTimer, why_timer, UInt64Type, UInt64, 0),
                (WhyFault, why_fault, UInt64Type, UInt64, 0),
                (WhyOther, why_other, UInt64Type, UInt64, 0),
                (WhyUnknown, why_unknown, UInt64Type, UInt64, 0),
                (WakerCtx, waker_ctx, UInt8Type, UInt8, 0),
                (WakerTid, waker_tid, UInt32Type, UInt32, 0),
                (WakerCommLo, waker_comm_lo, UInt64Type, UInt64, 0),
                (WakerCommHi, waker_comm_hi, UInt64Type, UInt64, 0),
                (RunqTid, runq_tid, UInt32Type, UInt32, 0),
                (RunqCpu, runq_cpu, UInt16Type, UInt16, 0),
                (WakeDev, wake_dev, UInt32Type, UInt32, 0),
                (WakeSector, wake_sector, UInt64Type, UInt64, 0),
                (Kstack, kstack, UInt32Type, UInt32, 0),
                (Ustack, ustack, UInt32Type, UInt32, 0),
                (Gid, gid, UInt32Type, UInt32, 0),
                (Loginuid, loginuid, UInt32Type, UInt32, u32::MAX),
                (Tty, tty, UInt32Type, UInt32, 0),
                (Vpid, vpid, UInt32Type, UInt32, 0),
                (Vtid, vtid, UInt32Type, UInt32, 0),
                (WakerWaitPart, waker_wait_part, UInt8Type, UInt8, 0),
                (WakerWaitNs, waker_wait_ns, UInt64Type, UInt64, 0),
                (WakeHeldNs, wake_held_ns, UInt64Type, UInt64, 0),
                (WakeQueueNs, wake_queue_ns, UInt64Type, UInt64, 0),
                (WakeDeviceNs, wake_device_ns, UInt64Type, UInt64, 0),
                (FaultAddr, fault_addr, UInt64Type, UInt64, 0),
                (FaultOff, fault_off, Int64Type, Int64, -1),
                (WaitStart, wait_start, UInt64Type, UInt64, 0),
                (WaitEnd, wait_end, UInt64Type, UInt64, 0),
                (WakeFlags, wake_flags, UInt8Type, UInt8, 0),
                (LockKind, lock_kind, UInt8Type, UInt8, 0),
                (LockAddr, lock_addr, UInt64Type, UInt64, 0),
                (LockOp, lock_op, UInt32Type, UInt32, 0),
                (LockWord, lock_word, UInt32Type, UInt32, 0),
                (LockOwner, lock_owner, UInt32Type, UInt32, 0),
                (LockStart, lock_start, Int64Type, Int64, 0),
                (LockLen, lock_len, Int64Type, Int64, 0),
                (WakerUstack, waker_ustack, UInt32Type, UInt32, 0),
                (WakerWaitDev, waker_wait_dev, UInt32Type, UInt32, 0),
                (OffCount, off_count, UInt16Type, UInt16, 0),
                (Off0Part, off0_part, UInt8Type, UInt8, 0),
                (Off0Start, off0_start, UInt64Type, UInt64, 0),
                (Off0End, off0_end, UInt64Type, UInt64, 0),
                (Off1Part, off1_part, UInt8Type, UInt8, 0),
                (Off1Start, off1_start, UInt64Type, UInt64, 0),
                (Off1End, off1_end, UInt64Type, UInt64, 0),
                (Off2Part, off2_part, UInt8Type, UInt8, 0),
                (Off2Start, off2_start, UInt64Type, UInt64, 0),
                (Off2End, off2_end, UInt64Type, UInt64, 0),
                (Off3Part, off3_part, UInt8Type, UInt8, 0),
                (Off3Start, off3_start, UInt64Type, UInt64, 0),
                (Off3End, off3_end, UInt64Type, UInt64, 0),
                (Off4Part, off4_part, UInt8Type, UInt8, 0),
                (Off4Start, off4_start, UInt64Type, UInt64, 0),
                (Off4End, off4_end, UInt64Type, UInt64, 0),
                (Off5Part, off5_part, UInt8Type, UInt8, 0),
                (Off5Start, off5_start, UInt64Type, UInt64, 0),
                (Off5End, off5_end, UInt64Type, UInt64, 0),
                (Off6Part, off6_part, UInt8Type, UInt8, 0),
                (Off6Start, off6_start, UInt64Type, UInt64, 0),
                (Off6End, off6_end, UInt64Type, UInt64, 0),
                (Off7Part, off7_part, UInt8Type, UInt8, 0),
                (Off7Start, off7_start, UInt64Type, UInt64, 0),
                (Off7End, off7_end, UInt64Type, UInt64, 0)
            ]
        }
    };
}
pub(crate) use with_prim_columns;

macro_rules! define_column {
    ([$(($var:ident, $field:ident, $aty:ty, $dt:ident, $miss:expr)),*]
     [$(($lvar:ident, $lfield:ident, $laty:ty, $ldt:ident, $lmiss:expr)),*]) => {
        /// One column of the trace: one field of [`EventBatch`], with the same name.
        ///
        /// Used to ask a [`crate::TraceReader`] for a subset of the columns
        /// ([`crate::TraceReader::open_projected`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Column {
            $(
                #[doc = concat!("The `", stringify!($field), "` column (`EventBatch::", stringify!($field), "`).")]
                $var,
            )*
            /// The `comm` column (`EventBatch::comm`).
            Comm,
            /// The `path` column (`EventBatch::path`).
            Path,
            /// The `path2` column (`EventBatch::path2`).
            Path2,
            $(
                #[doc = concat!("The `", stringify!($lfield), "` column (`EventBatch::", stringify!($lfield),
                    "`), added after the first version: a file without it reads as `", stringify!($lmiss), "`.")]
                $lvar,
            )*
            /// The `fault_path` column (`EventBatch::fault_path`), added after the first
            /// version: a file without it reads as empty strings.
            FaultPath,
        }

        /// Number of columns of the schema this crate writes ([`Column::ALL`]).
        pub const COLUMN_COUNT: usize =
            [$(stringify!($var),)* "comm", "path", "path2", $(stringify!($lvar),)* "fault_path"].len();

        impl Column {
            /// Every column, in schema order.
            pub const ALL: [Column; COLUMN_COUNT] =
                [$(Column::$var,)* Column::Comm, Column::Path, Column::Path2, $(Column::$lvar,)* Column::FaultPath];

            /// The column's name in the schema (the [`EventBatch`] field name).
            pub fn name(self) -> &'static str {
                match self {
                    $(Column::$var => stringify!($field),)*
                    Column::Comm => "comm",
                    Column::Path => "path",
                    Column::Path2 => "path2",
                    $(Column::$lvar => stringify!($lfield),)*
                    Column::FaultPath => "fault_path",
                }
            }

            /// The Arrow type the column is stored as.
            pub fn data_type(self) -> DataType {
                match self {
                    $(Column::$var => DataType::$dt,)*
                    Column::Comm | Column::Path | Column::Path2 | Column::FaultPath => DataType::Utf8,
                    $(Column::$lvar => DataType::$ldt,)*
                }
            }

            /// Whether a file may lack the column (it was added after the first version of the
            /// format); a reader then gives every event the column's "not recorded" value.
            pub fn optional(self) -> bool {
                match self {
                    $(Column::$lvar => true,)*
                    Column::FaultPath => true,
                    _ => false,
                }
            }
        }

        /// Give column `c` of `b` its "not recorded" value in `n` rows (the column is missing
        /// from the file; only optional columns can be).
        pub(crate) fn fill_missing(b: &mut EventBatch, c: Column, n: usize) {
            match c {
                $(Column::$lvar => {
                    b.$lfield.clear();
                    b.$lfield.resize(n, $lmiss);
                })*
                Column::FaultPath => {
                    b.fault_path.data.clear();
                    b.fault_path.offsets.clear();
                    b.fault_path.offsets.resize(n + 1, 0);
                }
                _ => {}
            }
        }

        /// Build the Arrow columns of a batch (one copy of each column), in schema order.
        #[cfg(test)]
        fn batch_columns(b: &EventBatch) -> Result<Vec<ArrayRef>, String> {
            let mut cols: Vec<ArrayRef> = Vec::with_capacity(COLUMN_COUNT);
            $(cols.push(Arc::new(PrimitiveArray::<$aty>::new(ScalarBuffer::from(b.$field.clone()), None)));)*
            let n = b.len();
            cols.push(string_array(&b.comm, n, "comm")?);
            cols.push(string_array(&b.path, n, "path")?);
            cols.push(string_array(&b.path2, n, "path2")?);
            $(cols.push(Arc::new(PrimitiveArray::<$laty>::new(ScalarBuffer::from(b.$lfield.clone()), None)));)*
            cols.push(string_array(&b.fault_path, n, "fault_path")?);
            Ok(cols)
        }

        /// Convert a decoded record batch back; `index[c]` is the position of column `c`
        /// in `rb`, or `None` for a column that was not read (zero-filled).
        fn from_columns(rb: &RecordBatch, index: &[Option<usize>; COLUMN_COUNT]) -> Result<EventBatch, String> {
            let n = rb.num_rows();
            $(
                let $field: Vec<_> = prim_col::<$aty>(rb, index[Column::$var.index()], n, Column::$var)?;
            )*
            $(
                let $lfield: Vec<_> = prim_col::<$laty>(rb, index[Column::$lvar.index()], n, Column::$lvar)?;
            )*
            let comm = string_col(rb, index[Column::Comm.index()], n, "comm")?;
            let path = string_col(rb, index[Column::Path.index()], n, "path")?;
            let path2 = string_col(rb, index[Column::Path2.index()], n, "path2")?;
            let fault_path = string_col(rb, index[Column::FaultPath.index()], n, "fault_path")?;
            Ok(EventBatch {
                $($field,)* $($lfield,)* comm, path, path2, fault_path, stacks: String::new(), cgroups: String::new()
            })
        }
    };
}

with_prim_columns!(define_column);

/// The values of numeric column `c` at `pos` in `rb`, or `n` zeros when it was not read.
fn prim_col<T: arrow_array::ArrowPrimitiveType>(
    rb: &RecordBatch,
    pos: Option<usize>,
    n: usize,
    c: Column,
) -> Result<Vec<T::Native>, String> {
    Ok(match pos {
        Some(pos) => rb
            .column(pos)
            .as_primitive_opt::<T>()
            .ok_or_else(|| format!("column {c} is not {}", c.data_type()))?
            .values()
            .to_vec(),
        None => vec![T::Native::default(); n],
    })
}

impl Column {
    /// The column with this schema name.
    pub fn from_name(name: &str) -> Option<Column> {
        Column::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Position of the column in [`Column::ALL`] (and in the schema this crate writes).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Bytes one row takes in a decoded [`EventBatch`], strings' data aside: the fixed-width columns
/// and the string offsets (the unit of [`crate::MAX_BLOCK_BYTES`]).
pub(crate) fn decoded_row_bytes() -> u64 {
    Column::ALL.iter().map(|c| c.data_type().primitive_width().unwrap_or(4) as u64).sum()
}

/// The Arrow schema of a trace: one non-nullable column per [`Column`], no metadata.
pub fn arrow_schema() -> Schema {
    Schema::new(Column::ALL.iter().map(|c| Field::new(c.name(), c.data_type(), false)).collect::<Vec<_>>())
}

#[cfg(test)]
fn string_array(c: &StrCol, n: usize, name: &str) -> Result<ArrayRef, String> {
    // A default (never pushed to) StrCol has no offsets at all: that is an empty column.
    let offsets: &[u32] = if c.offsets.is_empty() { &[0] } else { &c.offsets };
    if offsets.len() != n + 1 {
        return Err(format!("column {name} has {} strings, expected {n}", offsets.len() - 1));
    }
    if c.data.len() > i32::MAX as usize {
        return Err(format!(
            "column {name} holds {} bytes of strings, at most {} fit in one block",
            c.data.len(),
            i32::MAX
        ));
    }
    let mut prev = offsets[0];
    for &o in offsets {
        if o < prev {
            return Err(format!("column {name} has decreasing string offsets"));
        }
        prev = o;
    }
    if prev as usize > c.data.len() {
        return Err(format!("column {name} has offsets past its {} data bytes", c.data.len()));
    }
    let offs: Vec<i32> = offsets.iter().map(|&o| o as i32).collect();
    let arr = StringArray::try_new(
        OffsetBuffer::new(ScalarBuffer::from(offs)),
        Buffer::from_vec(c.data[..prev as usize].to_vec()),
        None,
    )
    .map_err(|e| format!("column {name}: {e}"))?;
    Ok(Arc::new(arr))
}

fn string_col(rb: &RecordBatch, pos: Option<usize>, n: usize, name: &str) -> Result<StrCol, String> {
    let Some(pos) = pos else {
        return Ok(StrCol { offsets: vec![0; n + 1], data: Vec::new() });
    };
    let arr = rb.column(pos).as_string_opt::<i32>().ok_or_else(|| format!("column {name} is not Utf8"))?;
    // A validated Arrow string array has n+1 non-decreasing offsets within its data.
    let offs = arr.value_offsets();
    let (first, last) = match (offs.first(), offs.last()) {
        (Some(&f), Some(&l)) if f >= 0 && l >= f && offs.len() == n + 1 => (f as usize, l as usize),
        _ => return Err(format!("column {name} has invalid offsets")),
    };
    let data = arr.value_data().get(first..last).ok_or_else(|| format!("column {name} has offsets past its data"))?;
    Ok(StrCol { offsets: offs.iter().map(|&o| (o as usize - first) as u32).collect(), data: data.to_vec() })
}

/// Convert an [`EventBatch`] to an Arrow record batch of `schema` (which must be [`arrow_schema`],
/// possibly with metadata). Errors describe an inconsistent batch. (The writer encodes blocks
/// directly; this is the reference it is tested against.)
#[cfg(test)]
pub(crate) fn to_record_batch(b: &EventBatch, schema: &Arc<Schema>) -> Result<RecordBatch, String> {
    b.check_lengths()?;
    let cols = batch_columns(b)?;
    RecordBatch::try_new_with_options(schema.clone(), cols, &RecordBatchOptions::new().with_row_count(Some(b.len())))
        .map_err(|e| e.to_string())
}

/// Convert a decoded (possibly projected) record batch to an [`EventBatch`].
pub(crate) fn from_record_batch(rb: &RecordBatch, index: &[Option<usize>; COLUMN_COUNT]) -> Result<EventBatch, String> {
    let b = from_columns(rb, index)?;
    b.check_lengths()?;
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::Event;

    #[test]
    fn names_and_order_match_event_batch() {
        assert_eq!(Column::ALL.len(), COLUMN_COUNT);
        // The columns of the first version keep their places; later ones follow path2.
        assert_eq!(Column::Path2.index(), 22);
        assert!(Column::ALL[..23].iter().all(|c| !c.optional()));
        assert!(Column::ALL[23..].iter().all(|c| c.optional()));
        for (i, c) in Column::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
            assert_eq!(Column::from_name(c.name()), Some(*c));
        }
        assert_eq!(Column::FdType.name(), "fd_type");
        assert_eq!(Column::Path2.data_type(), DataType::Utf8);
        assert_eq!(Column::from_name("nope"), None);
    }

    #[test]
    fn record_batch_roundtrip_and_projection() {
        let mut b = EventBatch::with_capacity(2);
        b.push(&Event { ts: 5, lat: 7, ret: -2, comm: "ls".into(), path: "/ü".into(), ..Default::default() });
        b.push(&Event { ts: 6, lat: 8, off: -1, comm: "".into(), path2: "x".into(), ..Default::default() });
        let schema = Arc::new(arrow_schema());
        let rb = to_record_batch(&b, &schema).unwrap();
        let all: [Option<usize>; COLUMN_COUNT] = std::array::from_fn(Some);
        assert_eq!(from_record_batch(&rb, &all).unwrap(), b);

        let proj = rb.project(&[Column::Ts.index(), Column::Path.index()]).unwrap();
        let mut idx = [None; COLUMN_COUNT];
        idx[Column::Ts.index()] = Some(0);
        idx[Column::Path.index()] = Some(1);
        let p = from_record_batch(&proj, &idx).unwrap();
        assert_eq!(p.ts, b.ts);
        assert_eq!(p.lat, vec![0, 0]);
        assert_eq!(p.path.get(0), "/ü");
        assert_eq!(p.comm.get(1), "");
    }

    #[test]
    fn inconsistent_batches_are_errors() {
        let schema = Arc::new(arrow_schema());
        let mut b = EventBatch::with_capacity(1);
        b.push(&Event::default());
        b.ts.push(1);
        assert!(to_record_batch(&b, &schema).is_err());
        let mut b = EventBatch::with_capacity(1);
        b.push(&Event { comm: "abc".into(), ..Default::default() });
        b.comm.offsets[1] = 99;
        assert!(to_record_batch(&b, &schema).is_err());
        b.comm.offsets = vec![2, 1];
        assert!(to_record_batch(&b, &schema).is_err());
        // A default batch (StrCol without the leading 0) is a valid empty batch.
        assert_eq!(to_record_batch(&EventBatch::default(), &schema).unwrap().num_rows(), 0);
    }
}

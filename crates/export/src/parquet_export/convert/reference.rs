//! The reference for the direct encoder: the same rows converted into Arrow record batches of
//! the events table, which the generic writer (and `DirectWriter::write`) takes. Tests check that
//! the direct path writes the very file this conversion does.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::types::{Int16Type, Int32Type, Int8Type};
use arrow_array::{
    ArrayRef, DictionaryArray, Int16Array, Int32Array, Int64Array, Int8Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::SchemaRef;
use latscope_event::{EventBatch, StrCol};

use super::super::schema::event_schema;
use super::{
    dictionaries, fd_type_key, kind_key, op_key, waker_comm, waker_kind_key, waker_was_in_key, waker_was_in_ns, Sel,
    TraceContext,
};
use crate::source::Rows;

/// Largest number of rows converted into one record batch: keeps every string column's bytes far
/// below the 2 GiB that 32-bit Arrow offsets address, whatever the trace holds.
const CHUNK_ROWS: usize = 1 << 16;
/// A chunk is cut earlier when one string column would exceed this many bytes.
const CHUNK_STRING_BYTES: u64 = 1 << 30;

#[inline]
fn map<T: Copy, U>(col: &[T], sel: Sel<'_>, mut f: impl FnMut(T) -> U) -> Vec<U> {
    match sel {
        Sel::Range(a, b) => col[a..b].iter().map(|&v| f(v)).collect(),
        Sel::Idx(r) => r.iter().map(|&i| f(col[i as usize])).collect(),
    }
}

fn strings(c: &StrCol, sel: Sel<'_>) -> ArrayRef {
    let (offsets, data): (Vec<i32>, Vec<u8>) = match sel {
        Sel::Range(a, b) => {
            let base = c.offsets[a];
            let offsets = c.offsets[a..=b].iter().map(|&o| (o - base) as i32).collect();
            (offsets, c.data[base as usize..c.offsets[b] as usize].to_vec())
        }
        Sel::Idx(rows) => {
            let mut offsets = Vec::with_capacity(rows.len() + 1);
            let mut data = Vec::new();
            offsets.push(0);
            for &i in rows {
                let i = i as usize;
                data.extend_from_slice(&c.data[c.offsets[i] as usize..c.offsets[i + 1] as usize]);
                offsets.push(data.len() as i32);
            }
            (offsets, data)
        }
    };
    // The trace reader has validated the UTF-8 and the offsets; `try_new` checks them again.
    match StringArray::try_new(OffsetBuffer::new(ScalarBuffer::from(offsets)), Buffer::from_vec(data), None) {
        Ok(a) => Arc::new(a),
        // Unreachable for a batch the reader produced; an empty string keeps the row count.
        Err(_) => Arc::new(StringArray::from(vec![""; sel.len()])),
    }
}

/// Converts event batches to record batches of the events table.
pub(crate) struct EventConverter {
    schema: SchemaRef,
}

impl EventConverter {
    pub(crate) fn new() -> EventConverter {
        EventConverter { schema: event_schema() }
    }

    /// The selected rows of `b` as record batches of at most [`CHUNK_ROWS`] rows, in order.
    pub(crate) fn convert(&self, cx: &TraceContext, b: &EventBatch, rows: Rows<'_>, out: &mut Vec<RecordBatch>) {
        let n = match rows {
            Rows::All => b.len(),
            Rows::Some(r) => r.len(),
        };
        let mut start = 0;
        while start < n {
            let end = self.chunk_end(b, rows, start, n);
            let sel = match rows {
                Rows::All => Sel::Range(start, end),
                Rows::Some(r) => Sel::Idx(&r[start..end]),
            };
            out.push(self.batch(cx, b, sel));
            start = end;
        }
    }

    /// End of the chunk starting at `start`: at most [`CHUNK_ROWS`] rows and
    /// [`CHUNK_STRING_BYTES`] bytes in each string column.
    fn chunk_end(&self, b: &EventBatch, rows: Rows<'_>, start: usize, n: usize) -> usize {
        let end = n.min(start + CHUNK_ROWS);
        let bytes = |c: &StrCol, r: Range<usize>| -> u64 {
            match rows {
                Rows::All => u64::from(c.offsets[r.end] - c.offsets[r.start]),
                Rows::Some(idx) => {
                    idx[r].iter().map(|&i| u64::from(c.offsets[i as usize + 1] - c.offsets[i as usize])).sum()
                }
            }
        };
        let fits = |e: usize| {
            [&b.comm, &b.path, &b.path2, &b.fault_path].iter().all(|c| bytes(c, start..e) <= CHUNK_STRING_BYTES)
        };
        if fits(end) {
            return end;
        }
        // Rare (strings of megabytes): halve until it fits; one row always does.
        let mut e = end;
        while e > start + 1 && !fits(e) {
            e = start + (e - start) / 2;
        }
        e
    }

    fn batch(&self, cx: &TraceContext, b: &EventBatch, sel: Sel<'_>) -> RecordBatch {
        let d = dictionaries();
        let n = sel.len();
        let time_ns = map(&b.ts, sel, |t| cx.wall_ns(t));
        let time: Vec<i64> = time_ns.iter().map(|t| t.div_euclid(1000)).collect();
        let op_keys: Vec<i16> = match sel {
            Sel::Range(a, e) => b.kind[a..e].iter().zip(&b.nr[a..e]).map(|(&k, &nr)| op_key(k, nr)).collect(),
            Sel::Idx(r) => r.iter().map(|&i| op_key(b.kind[i as usize], b.nr[i as usize])).collect(),
        };
        let mut disk_keys = Vec::with_capacity(n);
        cx.disk_keys(&b.dev, sel, &mut disk_keys);
        let mut cgroup_keys = Vec::with_capacity(n);
        cx.cgroup_keys(&b.cgroup, sel, &mut cgroup_keys);
        let dict16 = |keys: Vec<i16>, values: &ArrayRef| -> ArrayRef {
            Arc::new(DictionaryArray::<Int16Type>::new(Int16Array::from(keys), values.clone()))
        };
        let dict32 = |keys: Vec<i32>, values: &ArrayRef| -> ArrayRef {
            Arc::new(DictionaryArray::<Int32Type>::new(Int32Array::from(keys), values.clone()))
        };
        let dict8 = |keys: Vec<i8>, values: &ArrayRef| -> ArrayRef {
            Arc::new(DictionaryArray::<Int8Type>::new(Int8Array::from(keys), values.clone()))
        };
        let i64s = |v: Vec<i64>| -> ArrayRef { Arc::new(Int64Array::from(v)) };
        let i32s = |v: Vec<i32>| -> ArrayRef { Arc::new(Int32Array::from(v)) };
        let mut columns: Vec<ArrayRef> = vec![
            dict16(vec![0; n], &cx.host),
            Arc::new(TimestampMicrosecondArray::from(time).with_timezone("UTC")),
            i64s(time_ns),
            i64s(map(&b.lat, sel, |v| v as i64)),
            dict8(map(&b.kind, sel, |k| kind_key(k) as i8), &d.kind),
            dict16(op_keys, &d.op),
            i32s(map(&b.nr, sel, i32::from)),
            i32s(map(&b.pid, sel, |v| v as i32)),
            i32s(map(&b.tid, sel, |v| v as i32)),
            i64s(map(&b.uid, sel, i64::from)),
            strings(&b.comm, sel),
            i64s(map(&b.ret, sel, |v| v)),
            i32s(map(&b.fd, sel, |v| v)),
            dict8(map(&b.fd_type, sel, |t| fd_type_key(t) as i8), &d.fd_type),
            strings(&b.path, sel),
            strings(&b.path2, sel),
            i64s(map(&b.dev, sel, i64::from)),
            dict16(disk_keys.iter().map(|&k| k as i16).collect(), &cx.disk_names),
            i64s(map(&b.ino, sel, |v| v as i64)),
            i64s(map(&b.bytes, sel, |v| v as i64)),
            i64s(map(&b.off, sel, |v| v)),
            i64s(map(&b.flags, sel, i64::from)),
            i64s(map(&b.mode, sel, i64::from)),
            i32s(map(&b.dirfd, sel, |v| v)),
            i64s(map(&b.addr, sel, |v| v as i64)),
            i64s(map(&b.cgroup, sel, |v| v as i64)),
            i64s(map(&b.qtime, sel, |v| v as i64)),
        ];
        columns.extend(cx.cgroup_values.iter().map(|v| dict32(cgroup_keys.clone(), v)));
        for col in b.why_part_columns() {
            columns.push(i64s(map(col, sel, |v| v as i64)));
        }
        let rows: Vec<usize> = match sel {
            Sel::Range(a, e) => (a..e).collect(),
            Sel::Idx(r) => r.iter().map(|&i| i as usize).collect(),
        };
        columns.push(dict8(map(&b.waker_ctx, sel, |c| waker_kind_key(c) as i8), &d.waker_kind));
        columns.push(i32s(rows.iter().map(|&i| if b.waker_ctx[i] == 1 { b.waker_tid[i] as i32 } else { 0 }).collect()));
        let mut one = Vec::new();
        let names: Vec<String> = rows
            .iter()
            .map(|&i| {
                waker_comm(b, i, &mut one);
                String::from_utf8_lossy(&one).into_owned()
            })
            .collect();
        columns.push(Arc::new(StringArray::from(names)));
        columns.push(i32s(map(&b.runq_tid, sel, |v| v as i32)));
        columns.push(i32s(map(&b.runq_cpu, sel, i32::from)));
        columns.push(i64s(map(&b.wake_dev, sel, i64::from)));
        columns.push(i64s(map(&b.wake_sector, sel, |v| v as i64)));
        columns.push(i64s(map(&b.kstack, sel, |v| cx.stack_key(v))));
        columns.push(i64s(map(&b.ustack, sel, |v| cx.stack_key(v))));
        columns.push(i64s(map(&b.wake_held_ns, sel, |v| v as i64)));
        columns.push(i64s(map(&b.wake_queue_ns, sel, |v| v as i64)));
        columns.push(i64s(map(&b.wake_device_ns, sel, |v| v as i64)));
        columns.push(dict8(rows.iter().map(|&i| waker_was_in_key(b, i) as i8).collect(), &d.waker_was_in));
        columns.push(i64s(rows.iter().map(|&i| waker_was_in_ns(b, i)).collect()));
        columns.push(strings(&b.fault_path, sel));
        columns.push(i64s(map(&b.fault_off, sel, |v| v)));
        columns.push(dict8(rows.iter().map(|&i| latscope_event::waits::wait_kind(b, i) as i8).collect(), &d.wait));
        let locks: Vec<String> =
            rows.iter().map(|&i| latscope_event::locks::lock_text(b, i).unwrap_or_default()).collect();
        columns.push(Arc::new(StringArray::from(locks)));
        columns.push(i64s(
            rows.iter().map(|&i| if matches!(b.lock_kind[i], 1 | 4 | 5) { b.lock_addr[i] as i64 } else { 0 }).collect(),
        ));
        columns.push(i32s(map(&b.lock_owner, sel, |v| v as i32)));
        // The chains go through other blocks' calls: this reference has none (the writer is
        // given none either).
        columns.push(Arc::new(StringArray::from(vec![""; rows.len()])));
        columns.push(Arc::new(StringArray::from(vec![""; rows.len()])));
        columns.push(i64s(vec![0; rows.len()]));
        // The columns follow `EVENT_COLUMNS` one for one, with the schema's types.
        RecordBatch::try_new(self.schema.clone(), columns).expect("columns match the events schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    use latscope_event::{BlockDevice, Event, TraceHeader};

    fn header() -> TraceHeader {
        TraceHeader {
            hostname: "h1".into(),
            realtime_offset_ns: 1_700_000_000_000_000_000,
            block_devices: vec![BlockDevice { dev: (254 << 20) | 1, name: "vda1".into(), ..Default::default() }],
            ..Default::default()
        }
    }

    fn string_at(a: &ArrayRef, i: usize) -> String {
        let d = a.as_dictionary::<Int16Type>();
        let k = d.keys().value(i) as usize;
        d.values().as_string::<i32>().value(k).to_string()
    }

    #[test]
    fn rows_convert_with_names_wall_clock_and_disks() {
        let mut b = EventBatch::default();
        let read = latscope_event::syscall_nr("read").unwrap();
        b.push(&Event {
            kind: 0,
            ts: 1_234,
            lat: 5_000,
            nr: read,
            pid: 7,
            dev: (254 << 20) | 1,
            fd_type: 1,
            ino: u64::MAX,
            comm: "cat".into(),
            path: "/etc/passwd".into(),
            ..Default::default()
        });
        b.push(&Event { kind: 1, ts: 2_500, lat: 9, nr: 1, dev: 5, comm: "kworker".into(), ..Default::default() });
        b.push(&Event { kind: 2, ts: 3_000, nr: 1, path: "/bin/ls".into(), ..Default::default() });
        let cx = TraceContext::new(&header(), "h1");
        let conv = EventConverter::new();
        let mut out = Vec::new();
        conv.convert(&cx, &b, Rows::All, &mut out);
        assert_eq!(out.len(), 1);
        let r = &out[0];
        assert_eq!(r.num_rows(), 3);
        let col = |n: &str| r.column_by_name(n).unwrap().clone();
        assert_eq!(string_at(&col("host"), 2), "h1");
        assert_eq!(string_at(&col("op"), 0), "read");
        assert_eq!(string_at(&col("op"), 1), "block_write");
        assert_eq!(string_at(&col("op"), 2), "proc_exec");
        assert_eq!(string_at(&col("disk"), 0), "vda1");
        assert_eq!(string_at(&col("disk"), 1), "");
        let kind = col("kind");
        let kind = kind.as_dictionary::<Int8Type>();
        assert_eq!(kind.values().as_string::<i32>().value(kind.keys().value(1) as usize), "block");
        let t = col("time_ns");
        assert_eq!(t.as_primitive::<arrow_array::types::Int64Type>().value(0), 1_700_000_000_000_001_234);
        let us = col("time");
        assert_eq!(us.as_primitive::<arrow_array::types::TimestampMicrosecondType>().value(1), 1_700_000_000_000_002);
        assert_eq!(col("ino").as_primitive::<arrow_array::types::Int64Type>().value(0), -1);
        assert_eq!(col("path").as_string::<i32>().value(2), "/bin/ls");
        // A selection converts only its rows.
        let mut out = Vec::new();
        conv.convert(&cx, &b, Rows::Some(&[0, 2]), &mut out);
        assert_eq!(out[0].num_rows(), 2);
        assert_eq!(out[0].column_by_name("comm").unwrap().as_string::<i32>().value(1), "");
        assert_eq!(out[0].column_by_name("path").unwrap().as_string::<i32>().value(1), "/bin/ls");
        assert!(out[0].column_by_name("path").unwrap().nulls().is_none());
    }

    #[test]
    fn big_batches_are_cut_in_chunks() {
        let mut b = EventBatch::default();
        for i in 0..(CHUNK_ROWS as u64 * 2 + 5) {
            b.push(&Event { ts: i, path: "/x".into(), ..Default::default() });
        }
        let cx = TraceContext::new(&header(), "h");
        let mut out = Vec::new();
        EventConverter::new().convert(&cx, &b, Rows::All, &mut out);
        assert_eq!(out.iter().map(|r| r.num_rows()).collect::<Vec<_>>(), vec![CHUNK_ROWS, CHUNK_ROWS, 5]);
        let last = out[2].column_by_name("time_ns").unwrap();
        assert_eq!(
            last.as_primitive::<arrow_array::types::Int64Type>().value(4),
            1_700_000_000_000_000_000 + CHUNK_ROWS as i64 * 2 + 4
        );
    }
}

//! The block decoder: projections, recycled batches (`next_batch_into`), and streams written by
//! other tools with other layouts (extra columns, other column order, nulls, with and without
//! compression).

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{
    new_null_array, Array, ArrayRef, BooleanArray, FixedSizeBinaryArray, Int32Array, LargeStringArray, ListArray,
    RecordBatch, StringArray, UInt64Array,
};
use arrow_ipc::writer::{IpcWriteOptions, StreamWriter};
use arrow_ipc::CompressionType;
use arrow_schema::{DataType, Field, Schema};
use common::*;
use latscope_event::{Event, EventBatch};
use latscope_trace::{
    Column, Summary, TraceReader, TraceWriter, COLUMN_COUNT, KEY_FORMAT_VERSION, KEY_HEADER, KEY_HEADER_CRC,
};

/// `b` with only `cols` kept, the other columns zero (empty strings): what a projected read returns.
fn project(b: &EventBatch, cols: &[Column]) -> EventBatch {
    let mut out = EventBatch::with_capacity(b.len());
    for i in 0..b.len() {
        let e = b.get(i);
        let mut p = Event::default();
        for c in cols {
            match c {
                Column::Kind => p.kind = e.kind,
                Column::Ts => p.ts = e.ts,
                Column::Lat => p.lat = e.lat,
                Column::Pid => p.pid = e.pid,
                Column::Tid => p.tid = e.tid,
                Column::Uid => p.uid = e.uid,
                Column::Nr => p.nr = e.nr,
                Column::Ret => p.ret = e.ret,
                Column::Fd => p.fd = e.fd,
                Column::FdType => p.fd_type = e.fd_type,
                Column::Dev => p.dev = e.dev,
                Column::Ino => p.ino = e.ino,
                Column::Bytes => p.bytes = e.bytes,
                Column::Off => p.off = e.off,
                Column::Flags => p.flags = e.flags,
                Column::Mode => p.mode = e.mode,
                Column::Dirfd => p.dirfd = e.dirfd,
                Column::Addr => p.addr = e.addr,
                Column::Cgroup => p.cgroup = e.cgroup,
                Column::Qtime => p.qtime = e.qtime,
                Column::Comm => p.comm = e.comm.clone(),
                Column::Path => p.path = e.path.clone(),
                Column::Path2 => p.path2 = e.path2.clone(),
                Column::Off2 => p.off2 = e.off2,
                Column::Cpu => p.cpu = e.cpu,
                Column::WhyCpu => p.why_cpu = e.why_cpu,
                Column::WhyRunq => p.why_runq = e.why_runq,
                Column::WhyIo => p.why_io = e.why_io,
                Column::WhyLock => p.why_lock = e.why_lock,
                Column::WhyIpc => p.why_ipc = e.why_ipc,
                Column::WhyTimer => p.why_timer = e.why_timer,
                Column::WhyFault => p.why_fault = e.why_fault,
                Column::WhyOther => p.why_other = e.why_other,
                Column::WhyUnknown => p.why_unknown = e.why_unknown,
                Column::WakerCtx => p.waker_ctx = e.waker_ctx,
                Column::WakerTid => p.waker_tid = e.waker_tid,
                Column::WakerCommLo => p.waker_comm_lo = e.waker_comm_lo,
                Column::WakerCommHi => p.waker_comm_hi = e.waker_comm_hi,
                Column::RunqTid => p.runq_tid = e.runq_tid,
                Column::RunqCpu => p.runq_cpu = e.runq_cpu,
                Column::WakeDev => p.wake_dev = e.wake_dev,
                Column::WakeSector => p.wake_sector = e.wake_sector,
                Column::Kstack => p.kstack = e.kstack,
                Column::Ustack => p.ustack = e.ustack,
                Column::Gid => p.gid = e.gid,
                Column::Loginuid => p.loginuid = e.loginuid,
                Column::Tty => p.tty = e.tty,
                Column::Vpid => p.vpid = e.vpid,
                Column::Vtid => p.vtid = e.vtid,
                Column::WakerWaitPart => p.waker_wait_part = e.waker_wait_part,
                Column::WakerWaitNs => p.waker_wait_ns = e.waker_wait_ns,
                Column::WakeHeldNs => p.wake_held_ns = e.wake_held_ns,
                Column::WakeQueueNs => p.wake_queue_ns = e.wake_queue_ns,
                Column::WakeDeviceNs => p.wake_device_ns = e.wake_device_ns,
                Column::FaultAddr => p.fault_addr = e.fault_addr,
                Column::FaultOff => p.fault_off = e.fault_off,
                Column::FaultPath => p.fault_path = e.fault_path.clone(),
                Column::WaitStart => p.wait_start = e.wait_start,
                Column::WaitEnd => p.wait_end = e.wait_end,
                Column::WakeFlags => p.wake_flags = e.wake_flags,
                Column::LockKind => p.lock_kind = e.lock_kind,
                Column::LockAddr => p.lock_addr = e.lock_addr,
                Column::LockOp => p.lock_op = e.lock_op,
                Column::LockWord => p.lock_word = e.lock_word,
                Column::LockOwner => p.lock_owner = e.lock_owner,
                Column::LockStart => p.lock_start = e.lock_start,
                Column::LockLen => p.lock_len = e.lock_len,
                Column::WakerUstack => p.waker_ustack = e.waker_ustack,
                Column::WakerWaitDev => p.waker_wait_dev = e.waker_wait_dev,
                Column::OffCount => p.off_count = e.off_count,
                Column::Off0Part => p.off0_part = e.off0_part,
                Column::Off0Start => p.off0_start = e.off0_start,
                Column::Off0End => p.off0_end = e.off0_end,
                Column::Off1Part => p.off1_part = e.off1_part,
                Column::Off1Start => p.off1_start = e.off1_start,
                Column::Off1End => p.off1_end = e.off1_end,
                Column::Off2Part => p.off2_part = e.off2_part,
                Column::Off2Start => p.off2_start = e.off2_start,
                Column::Off2End => p.off2_end = e.off2_end,
                Column::Off3Part => p.off3_part = e.off3_part,
                Column::Off3Start => p.off3_start = e.off3_start,
                Column::Off3End => p.off3_end = e.off3_end,
                Column::Off4Part => p.off4_part = e.off4_part,
                Column::Off4Start => p.off4_start = e.off4_start,
                Column::Off4End => p.off4_end = e.off4_end,
                Column::Off5Part => p.off5_part = e.off5_part,
                Column::Off5Start => p.off5_start = e.off5_start,
                Column::Off5End => p.off5_end = e.off5_end,
                Column::Off6Part => p.off6_part = e.off6_part,
                Column::Off6Start => p.off6_start = e.off6_start,
                Column::Off6End => p.off6_end = e.off6_end,
                Column::Off7Part => p.off7_part = e.off7_part,
                Column::Off7Start => p.off7_start = e.off7_start,
                Column::Off7End => p.off7_end = e.off7_end,
            }
        }
        out.push(&p);
    }
    out
}

fn projections() -> Vec<Vec<Column>> {
    let mut p = vec![
        Column::ALL.to_vec(),
        vec![Column::Ts, Column::Lat],
        vec![Column::Path, Column::Kind, Column::Qtime],
        vec![Column::Comm, Column::Path2, Column::FdType, Column::Nr],
        vec![],
    ];
    p.extend(Column::ALL.iter().map(|&c| vec![c]));
    p
}

fn read_new(path: &Path, cols: &[Column]) -> Vec<EventBatch> {
    let mut r = TraceReader::open_projected(path, cols).unwrap();
    let v: Vec<EventBatch> = r.by_ref().map(|b| b.unwrap()).collect();
    assert!(r.warnings().iter().all(|w| w.to_string().contains("without a summary")), "{:?}", r.warnings());
    v
}

/// Read with one recycled batch that starts full of other events and is scribbled on between
/// blocks (also in the columns that are not read): every block must still come out exact.
fn read_recycled(path: &Path, cols: &[Column], rng: &mut Rng) -> Vec<EventBatch> {
    let mut r = TraceReader::open_projected(path, cols).unwrap();
    let mut b = random_batch(rng, 3000);
    let mut out = Vec::new();
    let mut i = 0u64;
    while let Some(res) = r.next_batch_into(&mut b) {
        res.unwrap();
        assert!(b.check_lengths().is_ok());
        out.push(b.clone());
        // Scribble: sometimes on a column of each kind, sometimes nothing.
        i += 1;
        if !b.is_empty() && !i.is_multiple_of(3) {
            let k = rng.below(b.len() as u64) as usize;
            b.ino[k] = 99;
            b.kind[k] = 1;
            b.fd[k] = -7;
            b.comm.data.push(b'x');
            let last = b.comm.offsets.len() - 1;
            b.comm.offsets[last] += 1;
        }
    }
    out
}

#[test]
fn next_batch_into_equals_next_batch_for_every_projection() {
    let dir = tmpdir("into");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(21);
    let batches: Vec<EventBatch> = [1000, 0, 1, 4097, 33, 4097].iter().map(|&n| random_batch(&mut rng, n)).collect();
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    for b in &batches {
        w.write_batch(b, 0).unwrap();
    }
    w.finish(Summary::default()).unwrap();
    for cols in projections() {
        let expected: Vec<EventBatch> = batches.iter().map(|b| project(b, &cols)).collect();
        assert_eq!(read_new(&path, &cols), expected, "{cols:?}");
        assert_eq!(read_recycled(&path, &cols, &mut rng), expected, "{cols:?} recycled");
    }
}

/// Blocks of two sizes in turn, as a recording writes them (syscalls, then block requests), some
/// columns zero in every block (stored as zero frames) and some zero in one kind only: a
/// recycled batch, scribbled on, keeps each column's second vector for the other size, and
/// every block still comes out exact.
#[test]
fn columns_of_zeros_in_blocks_of_two_sizes_come_out_exact_from_a_recycled_batch() {
    let dir = tmpdir("into-zeros");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(23);
    let batches: Vec<EventBatch> = (0..8)
        .map(|k| {
            let mut b = random_batch(&mut rng, if k % 2 == 0 { 4097 } else { 33 });
            // Zero in every block.
            b.ino.iter_mut().for_each(|v| *v = 0);
            b.why_lock.iter_mut().for_each(|v| *v = 0);
            // Zero in the small blocks only, and in the large ones only.
            if k % 2 == 1 {
                b.fd.iter_mut().for_each(|v| *v = 0);
                b.kind.iter_mut().for_each(|v| *v = 0);
            } else {
                b.off.iter_mut().for_each(|v| *v = 0);
            }
            b
        })
        .collect();
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    for b in &batches {
        w.write_batch(b, 0).unwrap();
    }
    w.finish(Summary::default()).unwrap();
    for cols in [Column::ALL.to_vec(), vec![Column::Ino, Column::Fd, Column::Off, Column::Kind], vec![Column::Ts]] {
        let expected: Vec<EventBatch> = batches.iter().map(|b| project(b, &cols)).collect();
        assert_eq!(read_new(&path, &cols), expected, "{cols:?}");
        assert_eq!(read_recycled(&path, &cols, &mut rng), expected, "{cols:?} recycled");
    }
}

#[test]
fn a_recycled_batch_is_empty_after_an_error() {
    let dir = tmpdir("into-err");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(22);
    let batches: Vec<EventBatch> = (0..3).map(|_| random_batch(&mut rng, 500)).collect();
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    for b in &batches {
        w.write_batch(b, 0).unwrap();
    }
    w.finish(Summary::default()).unwrap();
    // Damage the middle of the file (block 1's body; every column is read, so whichever column
    // the byte is in, the block is reported).
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&path, bytes).unwrap();
    let opts = latscope_trace::ReadOptions { projection: None, skip_corrupt: true };
    let mut r = TraceReader::open_with(&path, opts).unwrap();
    let mut b = EventBatch::default();
    let mut got = Vec::new();
    while let Some(res) = r.next_batch_into(&mut b) {
        match res {
            Ok(()) => got.push(b.clone()),
            Err(e) => {
                assert!(e.is_corrupt_block(), "{e}");
                assert!(b.is_empty() && b.check_lengths().is_ok());
            }
        }
    }
    assert_eq!(r.stats().corrupt_blocks, 1);
    assert_eq!(got, vec![batches[0].clone(), batches[2].clone()]);
}

/// The Arrow columns of `b` (through a trace written by the crate and read by arrow-ipc).
fn arrow_columns(dir: &Path, b: &EventBatch) -> (Vec<Arc<Field>>, Vec<ArrayRef>) {
    let tmp = dir.join("cols.lst");
    let mut w = TraceWriter::create(&tmp, &sample_header()).unwrap();
    w.write_batch(b, 0).unwrap();
    w.finish(Summary::default()).unwrap();
    let r = arrow_ipc::reader::StreamReader::try_new(std::fs::File::open(&tmp).unwrap(), None).unwrap();
    let fields = r.schema().fields().iter().cloned().collect();
    let rb = r.into_iter().next().unwrap().unwrap();
    (fields, rb.columns().to_vec())
}

/// Write one record batch of `fields`/`cols` as an Arrow stream with the latscope schema metadata.
fn write_stream(path: &Path, fields: Vec<Arc<Field>>, cols: Vec<ArrayRef>, compression: Option<CompressionType>) {
    let header = serde_json::to_string(&sample_header()).unwrap();
    let md: HashMap<String, String> = [
        (KEY_FORMAT_VERSION.to_string(), "1".to_string()),
        (KEY_HEADER_CRC.to_string(), format!("{:08x}", crc32c::crc32c(header.as_bytes()))),
        (KEY_HEADER.to_string(), header),
    ]
    .into_iter()
    .collect();
    let schema = Arc::new(Schema::new(fields).with_metadata(md));
    let opts = IpcWriteOptions::default().try_with_compression(compression).unwrap();
    let f = std::fs::File::create(path).unwrap();
    let mut w = StreamWriter::try_new_with_options(f, &schema, opts).unwrap();
    w.write(&RecordBatch::try_new(schema.clone(), cols).unwrap()).unwrap();
    w.finish().unwrap();
}

fn check_all_projections(path: &Path, expected: &EventBatch, rng: &mut Rng, what: &str) {
    for cols in projections() {
        let e = project(expected, &cols);
        assert_eq!(read_new(path, &cols), vec![e.clone()], "{what} {cols:?}");
        assert_eq!(read_recycled(path, &cols, rng), vec![e], "{what} {cols:?} recycled");
    }
}

#[test]
fn streams_with_other_layouts_are_read() {
    let dir = tmpdir("layouts");
    let mut rng = Rng::new(23);
    let n = 300;
    let b = random_batch(&mut rng, n);
    let (fields, cols) = arrow_columns(&dir, &b);
    let extra: Vec<(Field, ArrayRef)> = vec![
        (Field::new("x_i32", DataType::Int32, false), Arc::new(Int32Array::from_iter_values(0..n as i32))),
        (
            Field::new("x_str", DataType::Utf8, true),
            Arc::new(StringArray::from_iter((0..n).map(|i| (!i.is_multiple_of(3)).then(|| format!("s{i}"))))),
        ),
        (
            Field::new("x_bool", DataType::Boolean, false),
            Arc::new(BooleanArray::from_iter((0..n).map(|i| Some(i % 2 == 0)))),
        ),
        (Field::new("x_null", DataType::Null, true), new_null_array(&DataType::Null, n)),
        (
            Field::new("x_fsb", DataType::FixedSizeBinary(3), false),
            Arc::new(FixedSizeBinaryArray::try_from_iter((0..n).map(|i| [i as u8, 1, 2])).unwrap()),
        ),
        (
            Field::new("x_large", DataType::LargeUtf8, false),
            Arc::new(LargeStringArray::from_iter_values((0..n).map(|i| format!("ü{i}")))),
        ),
    ];
    for compression in [None, Some(CompressionType::ZSTD)] {
        // Extra columns of flat types around the trace's, which come in reverse order.
        let mut f: Vec<Arc<Field>> = Vec::new();
        let mut c: Vec<ArrayRef> = Vec::new();
        for (i, (ef, ec)) in extra.iter().enumerate() {
            f.push(Arc::new(ef.clone()));
            c.push(ec.clone());
            // Interleave: after each extra column, a few trace columns (from the last).
            for k in (0..COLUMN_COUNT).rev().skip(i * 4).take(4) {
                f.push(fields[k].clone());
                c.push(cols[k].clone());
            }
        }
        for k in (0..COLUMN_COUNT).rev().skip(extra.len() * 4) {
            f.push(fields[k].clone());
            c.push(cols[k].clone());
        }
        assert_eq!(f.len(), COLUMN_COUNT + extra.len());
        let p = dir.join("flat.lst");
        write_stream(&p, f, c, compression);
        check_all_projections(&p, &b, &mut rng, &format!("flat extra columns, {compression:?}"));

        // A nested extra column: decoded by arrow-ipc.
        let list = ListArray::from_iter_primitive::<arrow_array::types::Int32Type, _, _>(
            (0..n).map(|i| Some(vec![Some(i as i32), None])),
        );
        let mut f = vec![Arc::new(Field::new("x_list", list.data_type().clone(), false))];
        let mut c: Vec<ArrayRef> = vec![Arc::new(list)];
        f.extend(fields.iter().cloned());
        c.extend(cols.iter().cloned());
        let p = dir.join("nested.lst");
        write_stream(&p, f, c, compression);
        check_all_projections(&p, &b, &mut rng, &format!("nested extra column, {compression:?}"));

        // Nullable trace columns with nulls: the null slots read as what Arrow stores there
        // (0, ""), as before.
        let f: Vec<Arc<Field>> = fields.iter().map(|x| Arc::new(x.as_ref().clone().with_nullable(true))).collect();
        let mut c = cols.clone();
        let ts = UInt64Array::from_iter((0..n).map(|i| (i % 5 != 1).then(|| b.ts[i])));
        let path = StringArray::from_iter((0..n).map(|i| (i % 7 != 2).then(|| b.path.get(i).to_string())));
        c[Column::Ts.index()] = Arc::new(ts);
        c[Column::Path.index()] = Arc::new(path);
        let mut expected = b.clone();
        for i in 0..n {
            if i % 5 == 1 {
                expected.ts[i] = 0;
            }
        }
        let mut strings = latscope_event::StrCol::new();
        for i in 0..n {
            strings.push(if i % 7 == 2 { "" } else { b.path.get(i) });
        }
        expected.path = strings;
        let p = dir.join("nulls.lst");
        write_stream(&p, f, c, compression);
        check_all_projections(&p, &expected, &mut rng, &format!("nulls, {compression:?}"));
    }
}

/// A file written before the later columns existed (only the first version's 23 columns) reads
/// with every projection: the missing columns hold their "not recorded" value, the others are
/// exact.
#[test]
fn files_without_later_columns_read_as_not_recorded() {
    let dir = tmpdir("old-columns");
    let mut rng = Rng::new(7);
    let n = 200;
    let b = random_batch(&mut rng, n);
    let (fields, cols) = arrow_columns(&dir, &b);
    let (f, c): (Vec<_>, Vec<_>) =
        fields.into_iter().zip(cols).filter(|(f, _)| !Column::from_name(f.name()).unwrap().optional()).unzip();
    assert_eq!(f.len(), 23);
    let mut expected = b.clone();
    expected.off2 = vec![-1; n];
    expected.cpu = vec![0; n];
    expected.why_cpu = vec![0; n];
    expected.why_runq = vec![0; n];
    expected.why_io = vec![0; n];
    expected.why_lock = vec![0; n];
    expected.why_ipc = vec![0; n];
    expected.why_timer = vec![0; n];
    expected.why_fault = vec![0; n];
    expected.why_other = vec![0; n];
    expected.why_unknown = vec![0; n];
    expected.waker_comm_lo = vec![0; n];
    expected.waker_comm_hi = vec![0; n];
    expected.wake_sector = vec![0; n];
    expected.waker_ctx = vec![0; n];
    expected.waker_tid = vec![0; n];
    expected.runq_tid = vec![0; n];
    expected.runq_cpu = vec![0; n];
    expected.wake_dev = vec![0; n];
    expected.kstack = vec![0; n];
    expected.ustack = vec![0; n];
    expected.gid = vec![0; n];
    expected.loginuid = vec![u32::MAX; n];
    expected.tty = vec![0; n];
    expected.vpid = vec![0; n];
    expected.vtid = vec![0; n];
    expected.waker_wait_part = vec![0; n];
    expected.waker_wait_ns = vec![0; n];
    expected.wake_held_ns = vec![0; n];
    expected.wake_queue_ns = vec![0; n];
    expected.wake_device_ns = vec![0; n];
    expected.fault_addr = vec![0; n];
    expected.fault_off = vec![-1; n];
    expected.fault_path = latscope_event::StrCol { offsets: vec![0; n + 1], data: Vec::new() };
    expected.wait_start = vec![0; n];
    expected.wait_end = vec![0; n];
    expected.wake_flags = vec![0; n];
    expected.lock_kind = vec![0; n];
    expected.lock_addr = vec![0; n];
    expected.lock_op = vec![0; n];
    expected.lock_word = vec![0; n];
    expected.lock_owner = vec![0; n];
    expected.lock_start = vec![0; n];
    expected.lock_len = vec![0; n];
    expected.waker_ustack = vec![0; n];
    expected.waker_wait_dev = vec![0; n];
    expected.off_count = vec![0; n];
    expected.off0_part = vec![0; n];
    expected.off0_start = vec![0; n];
    expected.off0_end = vec![0; n];
    expected.off1_part = vec![0; n];
    expected.off1_start = vec![0; n];
    expected.off1_end = vec![0; n];
    expected.off2_part = vec![0; n];
    expected.off2_start = vec![0; n];
    expected.off2_end = vec![0; n];
    expected.off3_part = vec![0; n];
    expected.off3_start = vec![0; n];
    expected.off3_end = vec![0; n];
    expected.off4_part = vec![0; n];
    expected.off4_start = vec![0; n];
    expected.off4_end = vec![0; n];
    expected.off5_part = vec![0; n];
    expected.off5_start = vec![0; n];
    expected.off5_end = vec![0; n];
    expected.off6_part = vec![0; n];
    expected.off6_start = vec![0; n];
    expected.off6_end = vec![0; n];
    expected.off7_part = vec![0; n];
    expected.off7_start = vec![0; n];
    expected.off7_end = vec![0; n];
    for compression in [None, Some(CompressionType::ZSTD)] {
        let p = dir.join("v1.lst");
        write_stream(&p, f.clone(), c.clone(), compression);
        check_all_projections(&p, &expected, &mut rng, &format!("first-version columns, {compression:?}"));
    }
}

#[test]
fn readers_can_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<TraceReader>();
}

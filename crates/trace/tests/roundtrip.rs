//! Writing and reading back: data, header, metadata, summary, projection, the threaded writer.

mod common;

use common::*;
use latscope_event::EventBatch;
use latscope_trace::{
    Column, Compression, ReadOptions, Summary, ThreadedTraceWriter, TraceReader, TraceWriter, WriterOptions,
};

fn read_all_batches(r: &mut TraceReader) -> Vec<EventBatch> {
    r.map(|b| b.unwrap()).collect()
}

#[test]
fn roundtrip_random_batches() {
    let dir = tmpdir("roundtrip");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(1);
    let header = sample_header();
    let batches: Vec<EventBatch> = [1000, 0, 1, 4097, 33].iter().map(|&n| random_batch(&mut rng, n)).collect();
    let mut w = TraceWriter::create(&path, &header).unwrap();
    for (i, b) in batches.iter().enumerate() {
        w.write_batch(b, i as u64 * 10).unwrap();
    }
    let s = w.finish(Summary { lost: 7, duration_ns: 99, end_ns: 1234, ..Default::default() }).unwrap();
    let total: usize = batches.iter().map(|b| b.len()).sum();
    assert_eq!(s.events, total as u64);
    assert_eq!(s.blocks, 5);
    assert_eq!(s.lost, 40);
    assert_eq!((s.duration_ns, s.end_ns), (99, 1234));
    assert!(s.bytes > 0 && s.bytes < std::fs::metadata(&path).unwrap().len());

    let mut r = TraceReader::open(&path).unwrap();
    assert_eq!(r.header(), &header);
    assert_eq!(r.format_version(), 1);
    let got = read_all_batches(&mut r);
    assert_eq!(got, batches);
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    assert_eq!(r.summary(), Some(&s));
    let st = r.stats();
    assert_eq!((st.blocks, st.events, st.corrupt_blocks, st.unchecked_blocks), (5, total as u64, 0, 0));
    assert_eq!(st.bytes, st.file_size);
    assert_eq!(st.lost_total, 40);
    assert_eq!(st.events_total, total as u64);

    // read_all concatenates.
    let all = TraceReader::open(&path).unwrap().read_all().unwrap();
    assert_eq!(all, concat(&batches));
    assert!(all.check_lengths().is_ok());
}

#[test]
fn block_metadata() {
    let dir = tmpdir("blockmeta");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(2);
    let b = random_batch(&mut rng, 50);
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    w.write_batch(&b, 3).unwrap();
    w.write_batch(&b, 5).unwrap();
    w.finish(Summary::default()).unwrap();
    let mut r = TraceReader::open(&path).unwrap();
    r.next_batch().unwrap().unwrap();
    let m = r.last_block_meta().unwrap().clone();
    assert_eq!(m.seq, Some(0));
    assert_eq!(m.events_total, Some(50));
    assert_eq!(m.lost_total, Some(3));
    assert_eq!(m.ts_min, b.ts.iter().min().copied());
    assert_eq!(m.ts_max, b.ts.iter().max().copied());
    assert!(m.crc32c.is_some() && m.meta_crc32c.is_some());
    r.next_batch().unwrap().unwrap();
    assert_eq!(r.last_block_meta().unwrap().seq, Some(1));
    assert_eq!(r.last_block_meta().unwrap().events_total, Some(100));
    assert!(r.next_batch().is_none());
    let m = r.last_block_meta().unwrap();
    assert_eq!(m.seq, Some(2));
    assert!(m.summary.is_some());
    assert_eq!(r.summary().unwrap().lost, 5);
}

/// The stack table travels in the metadata of the blocks whose events first use its entries:
/// read back whole without decoding a column, checked by the block's metadata checksum.
#[test]
fn stack_table_roundtrips_in_block_metadata() {
    use latscope_event::{Frame, StackEntry, StackKind};
    let dir = tmpdir("stacks");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(3);
    let k = StackEntry {
        id: 1,
        kind: StackKind::Kernel,
        frames: vec![Frame { addr: 0xffff_ffff_8100_1000, sym: Some("io_schedule+0x12".into()), ..Default::default() }],
        truncated: true,
        missing: None,
        cut: None,
    };
    let u = StackEntry {
        id: 2,
        kind: StackKind::User,
        frames: vec![Frame {
            addr: 0x5555_0000_1234,
            file: Some("/usr/bin/app".into()),
            build_id: Some("abcd".into()),
            off: Some(0x1234),
            ..Default::default()
        }],
        truncated: false,
        missing: None,
        cut: Some("a frame in no known mapping".into()),
    };
    let gone = StackEntry {
        id: 3,
        kind: StackKind::User,
        frames: vec![],
        truncated: false,
        missing: Some("exited".into()),
        cut: None,
    };
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    let mut b = random_batch(&mut rng, 20);
    b.stacks = k.to_line() + &u.to_line();
    w.write_batch(&b, 0).unwrap();
    let mut b2 = random_batch(&mut rng, 20);
    b2.stacks = gone.to_line();
    w.write_batch(&b2, 0).unwrap();
    w.write_batch(&random_batch(&mut rng, 5), 0).unwrap();
    w.finish(Summary::default()).unwrap();
    let t = TraceReader::open(&path).unwrap().read_stack_table().unwrap();
    assert_eq!(t.len(), 3);
    assert_eq!((t.get(1), t.get(2), t.get(3)), (Some(&k), Some(&u), Some(&gone)));
    // Decoding a block hands its entries along with its events.
    let got = read_all_batches(&mut TraceReader::open(&path).unwrap());
    assert_eq!(got[0].stacks, b.stacks);
    assert_eq!(got[1].stacks, b2.stacks);
    assert!(got[2].stacks.is_empty());
}

#[test]
fn projection_returns_right_values_and_fills_the_rest() {
    let dir = tmpdir("projection");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(3);
    let batches: Vec<EventBatch> = (0..3).map(|_| random_batch(&mut rng, 777)).collect();
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    for b in &batches {
        w.write_batch(b, 0).unwrap();
    }
    w.finish(Summary::default()).unwrap();

    let mut r = TraceReader::open_projected(&path, &[Column::Lat, Column::Ts, Column::Path, Column::Lat]).unwrap();
    let got = read_all_batches(&mut r);
    assert_eq!(got.len(), 3);
    for (g, b) in got.iter().zip(&batches) {
        assert!(g.check_lengths().is_ok());
        assert_eq!(g.ts, b.ts);
        assert_eq!(g.lat, b.lat);
        assert_eq!(g.path, b.path);
        assert_eq!(g.pid, vec![0; b.len()]);
        assert_eq!(g.ret, vec![0; b.len()]);
        assert_eq!(g.comm.len(), b.len());
        assert!((0..b.len()).all(|i| g.comm.get(i).is_empty() && g.path2.get(i).is_empty()));
    }
    assert!(r.summary().is_some());

    // Every single column, alone.
    for c in Column::ALL {
        let mut r = TraceReader::open_projected(&path, &[c]).unwrap();
        let g = r.next_batch().unwrap().unwrap();
        let b = &batches[0];
        for i in [0, 1, 500, 776] {
            let (ge, be) = (g.get(i), b.get(i));
            let name = c.name();
            let same = match c {
                Column::Kind => ge.kind == be.kind,
                Column::Ts => ge.ts == be.ts,
                Column::Lat => ge.lat == be.lat,
                Column::Pid => ge.pid == be.pid,
                Column::Tid => ge.tid == be.tid,
                Column::Uid => ge.uid == be.uid,
                Column::Nr => ge.nr == be.nr,
                Column::Ret => ge.ret == be.ret,
                Column::Fd => ge.fd == be.fd,
                Column::FdType => ge.fd_type == be.fd_type,
                Column::Dev => ge.dev == be.dev,
                Column::Ino => ge.ino == be.ino,
                Column::Bytes => ge.bytes == be.bytes,
                Column::Off => ge.off == be.off,
                Column::Flags => ge.flags == be.flags,
                Column::Mode => ge.mode == be.mode,
                Column::Dirfd => ge.dirfd == be.dirfd,
                Column::Addr => ge.addr == be.addr,
                Column::Cgroup => ge.cgroup == be.cgroup,
                Column::Qtime => ge.qtime == be.qtime,
                Column::Comm => ge.comm == be.comm,
                Column::Path => ge.path == be.path,
                Column::Path2 => ge.path2 == be.path2,
                Column::Off2 => ge.off2 == be.off2,
                Column::Cpu => ge.cpu == be.cpu,
                Column::WhyCpu => ge.why_cpu == be.why_cpu,
                Column::WhyRunq => ge.why_runq == be.why_runq,
                Column::WhyIo => ge.why_io == be.why_io,
                Column::WhyLock => ge.why_lock == be.why_lock,
                Column::WhyIpc => ge.why_ipc == be.why_ipc,
                Column::WhyTimer => ge.why_timer == be.why_timer,
                Column::WhyFault => ge.why_fault == be.why_fault,
                Column::WhyOther => ge.why_other == be.why_other,
                Column::WhyUnknown => ge.why_unknown == be.why_unknown,
                Column::WakerCtx => ge.waker_ctx == be.waker_ctx,
                Column::WakerTid => ge.waker_tid == be.waker_tid,
                Column::WakerCommLo => ge.waker_comm_lo == be.waker_comm_lo,
                Column::WakerCommHi => ge.waker_comm_hi == be.waker_comm_hi,
                Column::RunqTid => ge.runq_tid == be.runq_tid,
                Column::RunqCpu => ge.runq_cpu == be.runq_cpu,
                Column::WakeDev => ge.wake_dev == be.wake_dev,
                Column::WakeSector => ge.wake_sector == be.wake_sector,
                Column::Kstack => ge.kstack == be.kstack,
                Column::Ustack => ge.ustack == be.ustack,
                Column::Gid => ge.gid == be.gid,
                Column::Loginuid => ge.loginuid == be.loginuid,
                Column::Tty => ge.tty == be.tty,
                Column::Vpid => ge.vpid == be.vpid,
                Column::Vtid => ge.vtid == be.vtid,
                Column::WakerWaitPart => ge.waker_wait_part == be.waker_wait_part,
                Column::WakerWaitNs => ge.waker_wait_ns == be.waker_wait_ns,
                Column::WakeHeldNs => ge.wake_held_ns == be.wake_held_ns,
                Column::WakeQueueNs => ge.wake_queue_ns == be.wake_queue_ns,
                Column::WakeDeviceNs => ge.wake_device_ns == be.wake_device_ns,
                Column::FaultAddr => ge.fault_addr == be.fault_addr,
                Column::FaultOff => ge.fault_off == be.fault_off,
                Column::FaultPath => ge.fault_path == be.fault_path,
                Column::WaitStart => ge.wait_start == be.wait_start,
                Column::WaitEnd => ge.wait_end == be.wait_end,
                Column::WakeFlags => ge.wake_flags == be.wake_flags,
                Column::LockKind => ge.lock_kind == be.lock_kind,
                Column::LockAddr => ge.lock_addr == be.lock_addr,
                Column::LockOp => ge.lock_op == be.lock_op,
                Column::LockWord => ge.lock_word == be.lock_word,
                Column::LockOwner => ge.lock_owner == be.lock_owner,
                Column::LockStart => ge.lock_start == be.lock_start,
                Column::LockLen => ge.lock_len == be.lock_len,
                Column::WakerUstack => ge.waker_ustack == be.waker_ustack,
                Column::WakerWaitDev => ge.waker_wait_dev == be.waker_wait_dev,
                Column::OffCount => ge.off_count == be.off_count,
                Column::Off0Part => ge.off0_part == be.off0_part,
                Column::Off0Start => ge.off0_start == be.off0_start,
                Column::Off0End => ge.off0_end == be.off0_end,
                Column::Off1Part => ge.off1_part == be.off1_part,
                Column::Off1Start => ge.off1_start == be.off1_start,
                Column::Off1End => ge.off1_end == be.off1_end,
                Column::Off2Part => ge.off2_part == be.off2_part,
                Column::Off2Start => ge.off2_start == be.off2_start,
                Column::Off2End => ge.off2_end == be.off2_end,
                Column::Off3Part => ge.off3_part == be.off3_part,
                Column::Off3Start => ge.off3_start == be.off3_start,
                Column::Off3End => ge.off3_end == be.off3_end,
                Column::Off4Part => ge.off4_part == be.off4_part,
                Column::Off4Start => ge.off4_start == be.off4_start,
                Column::Off4End => ge.off4_end == be.off4_end,
                Column::Off5Part => ge.off5_part == be.off5_part,
                Column::Off5Start => ge.off5_start == be.off5_start,
                Column::Off5End => ge.off5_end == be.off5_end,
                Column::Off6Part => ge.off6_part == be.off6_part,
                Column::Off6Start => ge.off6_start == be.off6_start,
                Column::Off6End => ge.off6_end == be.off6_end,
                Column::Off7Part => ge.off7_part == be.off7_part,
                Column::Off7Start => ge.off7_start == be.off7_start,
                Column::Off7End => ge.off7_end == be.off7_end,
            };
            assert!(same, "column {name} row {i}");
        }
    }

    // An empty projection reads only row counts.
    let mut r = TraceReader::open_projected(&path, &[]).unwrap();
    let g = r.next_batch().unwrap().unwrap();
    assert_eq!(g.len(), 777);
    assert!(g.check_lengths().is_ok());
}

#[test]
fn big_batches_are_split_into_blocks() {
    let dir = tmpdir("split");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(4);
    let b = random_batch(&mut rng, 2500);
    let opts = WriterOptions { max_block_events: 1000, ..Default::default() };
    let mut w = TraceWriter::create_with(&path, &sample_header(), opts).unwrap();
    w.write_batch(&b, 1).unwrap();
    assert_eq!(w.blocks(), 3);
    assert_eq!(w.events(), 2500);
    w.finish(Summary::default()).unwrap();
    let mut r = TraceReader::open(&path).unwrap();
    let got = read_all_batches(&mut r);
    assert_eq!(got.iter().map(|b| b.len()).collect::<Vec<_>>(), vec![1000, 1000, 500]);
    assert_eq!(concat(&got), b);
    assert!(r.warnings().is_empty());
}

#[test]
fn uncompressed_and_other_levels_roundtrip() {
    let dir = tmpdir("levels");
    let mut rng = Rng::new(5);
    let b = random_batch(&mut rng, 300);
    for c in [Compression::None, Compression::Zstd(1), Compression::Zstd(3), Compression::Zstd(-5)] {
        let path = dir.join(format!("{c:?}.lst"));
        let opts = WriterOptions { compression: c, ..Default::default() };
        let mut w = TraceWriter::create_with(&path, &sample_header(), opts).unwrap();
        w.write_batch(&b, 0).unwrap();
        w.finish(Summary::default()).unwrap();
        assert_eq!(TraceReader::open(&path).unwrap().read_all().unwrap(), b, "{c:?}");
    }
    assert!(TraceWriter::create_with(
        dir.join("bad.lst"),
        &sample_header(),
        WriterOptions { compression: Compression::Zstd(99), ..Default::default() }
    )
    .is_err());
}

#[test]
fn invalid_batches_are_refused_without_damaging_the_file() {
    let dir = tmpdir("invalid");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(6);
    let good = random_batch(&mut rng, 10);
    let mut bad = good.clone();
    bad.ts.pop();
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    w.write_batch(&good, 0).unwrap();
    let e = w.write_batch(&bad, 0).unwrap_err();
    assert!(e.to_string().contains("invalid event batch"), "{e}");
    assert!(e.to_string().contains("t.lst"), "{e}");
    w.write_batch(&good, 0).unwrap();
    w.finish(Summary::default()).unwrap();
    let all = TraceReader::open(&path).unwrap().read_all().unwrap();
    assert_eq!(all.len(), 20);
}

#[test]
fn threaded_writer_roundtrip_and_recycling() {
    let dir = tmpdir("threaded");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(7);
    let batches: Vec<EventBatch> = (0..20).map(|i| random_batch(&mut rng, 100 + i * 13)).collect();
    let mut w = ThreadedTraceWriter::create_with(&path, &sample_header(), WriterOptions::default(), 2).unwrap();
    let mut recycled = 0;
    for (i, b) in batches.iter().enumerate() {
        let mut spare = w.spare_batch();
        if spare.kind.capacity() > 0 {
            recycled += 1;
        }
        assert!(spare.is_empty());
        for j in 0..b.len() {
            spare.push(&b.get(j));
        }
        w.write_batch(spare, i as u64).unwrap();
        if i == 10 {
            w.flush().unwrap();
        }
    }
    let s = w.finish(Summary::default()).unwrap();
    assert!(recycled > 0, "no batch was recycled");
    assert_eq!(s.blocks, 20);
    assert_eq!(s.lost, 19);
    let mut r = TraceReader::open(&path).unwrap();
    assert_eq!(read_all_batches(&mut r), batches);
    assert!(r.warnings().is_empty());

    // try_write_batch hands the batch back or queues it; nothing is lost.
    let path2 = dir.join("t2.lst");
    let mut w = ThreadedTraceWriter::create_with(&path2, &sample_header(), WriterOptions::default(), 1).unwrap();
    let mut written = 0u64;
    for b in &batches {
        let mut pending = b.clone();
        loop {
            match w.try_write_batch(pending, 0).unwrap() {
                None => break,
                Some(back) => {
                    pending = back;
                    std::thread::yield_now();
                }
            }
        }
        written += b.len() as u64;
    }
    let s = w.finish(Summary::default()).unwrap();
    assert_eq!(s.events, written);
    assert_eq!(TraceReader::open(&path2).unwrap().read_all().unwrap(), concat(&batches));
}

#[test]
fn threaded_writer_dropped_without_finish_leaves_a_readable_file() {
    let dir = tmpdir("threaded-drop");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(8);
    let b = random_batch(&mut rng, 100);
    {
        let mut w = ThreadedTraceWriter::create(&path, &sample_header()).unwrap();
        w.write_batch(b.clone(), 0).unwrap();
        w.write_batch(b.clone(), 0).unwrap();
    }
    let mut r = TraceReader::open(&path).unwrap();
    assert_eq!(r.read_all().unwrap().len(), 200);
    assert!(r.summary().is_none());
    assert_eq!(r.warnings().len(), 1);
    let w = r.warnings()[0].to_string();
    assert!(w.contains("not closed cleanly"), "{w}");
}

#[test]
fn skip_corrupt_option_on_clean_file_changes_nothing() {
    let dir = tmpdir("skipclean");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(9);
    let b = random_batch(&mut rng, 100);
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    w.write_batch(&b, 0).unwrap();
    w.finish(Summary::default()).unwrap();
    let mut r = TraceReader::open_with(&path, ReadOptions { skip_corrupt: true, projection: None }).unwrap();
    assert_eq!(r.read_all().unwrap(), b);
    assert!(r.warnings().is_empty());
}

#[test]
fn threaded_writer_reports_errors_of_the_writer_thread() {
    let dir = tmpdir("threaded-error");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(10);
    let good = random_batch(&mut rng, 10);
    let mut bad = good.clone();
    bad.lat.pop();
    let mut w = ThreadedTraceWriter::create(&path, &sample_header()).unwrap();
    w.write_batch(good.clone(), 0).unwrap();
    // The bad batch is queued; its error comes back from a later call.
    let _ = w.write_batch(bad, 0);
    let e = w.flush().unwrap_err();
    assert!(e.to_string().contains("invalid event batch"), "{e}");
    let e = w.write_batch(good.clone(), 0).unwrap_err();
    assert!(e.to_string().contains("already"), "{e}");
    drop(w);
    let mut r = TraceReader::open(&path).unwrap();
    assert_eq!(r.read_all().unwrap(), good);
}

/// With helper threads encoding every other batch, blocks are written in order, numbered
/// consecutively, big batches split, every event kept; flushes and a drop without finish too.
#[test]
fn threaded_writer_with_encoding_threads_writes_blocks_in_order() {
    let dir = tmpdir("threaded-helpers");
    let mut rng = Rng::new(11);
    let batches: Vec<EventBatch> = (0..40).map(|i| random_batch(&mut rng, [0, 1, 50, 700, 2500][i % 5])).collect();
    for threads in [1, 2, 3] {
        let path = dir.join(format!("t{threads}.lst"));
        let opts = WriterOptions { threads, max_block_events: 1000, ..Default::default() };
        let mut w = ThreadedTraceWriter::create_with(&path, &sample_header(), opts, 3).unwrap();
        for (i, b) in batches.iter().enumerate() {
            w.write_batch(b.clone(), i as u64).unwrap();
            if i % 7 == 0 {
                w.flush().unwrap();
            }
        }
        let s = w.finish(Summary::default()).unwrap();
        let want_blocks: u64 = batches.iter().map(|b| b.len().div_ceil(1000).max(1) as u64).sum();
        assert_eq!(s.blocks, want_blocks, "{threads} threads");
        let mut r = TraceReader::open(&path).unwrap();
        let got = read_all_batches(&mut r);
        assert_eq!(concat(&got), concat(&batches), "{threads} threads");
        assert!(r.warnings().is_empty(), "{threads} threads: {:?}", r.warnings());
        assert_eq!(r.stats().blocks, want_blocks);

        // Dropped without finish: every queued batch is written.
        let path = dir.join(format!("d{threads}.lst"));
        {
            let mut w = ThreadedTraceWriter::create_with(&path, &sample_header(), opts, 3).unwrap();
            for b in &batches[..9] {
                w.write_batch(b.clone(), 0).unwrap();
            }
        }
        let mut r = TraceReader::open(&path).unwrap();
        assert_eq!(r.read_all().unwrap(), concat(&batches[..9]), "{threads} threads, dropped");
    }
}

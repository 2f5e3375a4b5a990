//! A recording that ends with a large backlog in the ring buffer keeps every event: the end of
//! a recording reads the buffer to its end, whatever it holds.

mod common;

use common::can_trace;
use latscope_live::{Recorder, RecorderOptions, SessionBuilder, StopReason, SyscallSet};
use latscope_trace::{ThreadedTraceWriter, TraceReader};
use std::time::{Duration, Instant};

#[test]
fn a_backlog_left_in_the_ring_buffer_at_the_end_is_recorded_whole() {
    if !can_trace("a_backlog_left_in_the_ring_buffer_at_the_end_is_recorded_whole") {
        return;
    }
    // dd moves N single bytes: N reads on fd 0 and N writes on fd 1 (it reopens its input and
    // output there). Far more records than a few polls read.
    const N: usize = 200_000;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t.lst");
    let argv = ["dd", "if=/dev/zero", "of=/dev/null", "bs=1"].iter().map(|s| s.to_string());
    let session = SessionBuilder::new()
        .syscalls(SyscallSet::Io)
        .block(false)
        .ring_bytes(256 << 20)
        .command(argv.chain([format!("count={N}")]).collect())
        .stop_on(&[])
        .start()
        .expect("session starts");
    let pid = session.command_pid().expect("the command runs");
    let writer = ThreadedTraceWriter::create(&path, session.header()).unwrap();
    let rec = Recorder::new(session, writer, RecorderOptions::default());
    // Nothing reads the ring buffer while dd runs: wait for it to end (a zombie until the
    // recorder reaps it).
    let start = Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        if stat.rsplit(')').next().unwrap().trim_start().starts_with('Z') {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(300), "dd did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = rec.finish(StopReason::CommandExited).unwrap();
    assert_eq!(r.command_status, Some(0));
    assert_eq!(r.stats.lost, 0, "the ring buffer is large enough for the whole run");

    let mut reads = 0;
    let mut writes = 0;
    let mut events = 0;
    for b in TraceReader::open(&path).unwrap() {
        let b = b.unwrap();
        events += b.len() as u64;
        for i in 0..b.len() {
            match (b.nr[i], b.fd[i], b.bytes[i], b.ret[i]) {
                (0, 0, 1, 1) => reads += 1,
                (1, 1, 1, 1) => writes += 1,
                _ => {}
            }
        }
    }
    assert_eq!(events, r.events, "the file holds what the recorder says it wrote");
    assert_eq!((reads, writes), (N, N), "every read and write of the run is in the trace");
}

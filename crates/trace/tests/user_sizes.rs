//! Sizes the recorded machine's users control (command lines, container names, stack and cgroup
//! tables) never make a trace unreadable, and no crafted table makes a reader slow or large.

mod common;

use common::*;
use latscope_event::bounds::{is_cut, MAX_CMDLINE, MAX_HEADER_JSON, MAX_NAME, MAX_STACK_FRAMES};
use latscope_event::{CgroupInfo, EventBatch, FdInfo, Frame, ProcessInfo, StackEntry, StackKind};
use latscope_trace::{Summary, TraceReader, TraceWriter, WarningKind, MAX_HEADER_BYTES};

/// 40 processes with 1.95 MB command lines and an 80 MB container name once made the header
/// 160 MB, which every reader refused ("metadata length ... is more than the 67108864 bytes the
/// header may have"): the writer cuts them, marks each cut, and counts it.
#[test]
fn huge_command_lines_and_container_names_leave_the_trace_readable() {
    let dir = tmpdir("huge-header");
    let path = dir.join("t.lst");
    let mut h = sample_header();
    for pid in 100..140 {
        h.processes.push(ProcessInfo { pid, comm: "big".into(), cmdline: "x".repeat(1_950_000), ..Default::default() });
    }
    h.cgroups.push(CgroupInfo {
        id: 77,
        path: "/system.slice/docker-x.scope".into(),
        container_name: "n".repeat(80 << 20),
        ..Default::default()
    });
    let mut w = TraceWriter::create(&path, &h).unwrap();
    assert!(w.bytes() < MAX_HEADER_BYTES, "{}", w.bytes());
    let mut rng = Rng::new(5);
    let b = random_batch(&mut rng, 50);
    w.write_batch(&b, 0).unwrap();
    w.finish(Summary::default()).unwrap();

    let mut r = TraceReader::open(&path).unwrap();
    let got = r.header().clone();
    assert_eq!(r.read_all().unwrap(), b);
    let big: Vec<&ProcessInfo> = got.processes.iter().filter(|p| p.comm == "big").collect();
    assert_eq!(big.len(), 40);
    for p in big {
        assert!(p.cmdline.len() <= MAX_CMDLINE && is_cut(&p.cmdline), "{}", &p.cmdline[p.cmdline.len() - 30..]);
        assert!(p.cmdline.ends_with(&format!("…[cut {} bytes]", 1_950_000 - p.cmdline.find('…').unwrap())));
    }
    let c = got.cgroups.iter().find(|c| c.id == 77).unwrap();
    assert!(c.container_name.len() <= MAX_NAME && is_cut(&c.container_name));
    assert_eq!(got.truncated.values, 41, "{:?}", got.truncated);
    assert!(got.truncated.bytes > 80 << 20);
    // Nothing else changed.
    assert_eq!(got.processes[0], sample_header().processes[0]);
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
}

/// A header still too large once every value is within its bound (a million open files) loses
/// the last entries of its largest tables, counted, and stays readable.
#[test]
fn a_header_past_its_total_bound_keeps_its_first_entries_and_counts_the_others() {
    let dir = tmpdir("many-fds");
    let path = dir.join("t.lst");
    let mut h = sample_header();
    let n = 700_000;
    h.fds = (0..n)
        .map(|i| FdInfo { pid: 1, fd: i, path: format!("/srv/data/file-{i:08}"), ..Default::default() })
        .collect();
    let w = TraceWriter::create(&path, &h).unwrap();
    w.finish(Summary::default()).unwrap();
    let r = TraceReader::open(&path).unwrap();
    let got = r.header();
    assert!(got.fds.len() < n as usize && got.fds.len() > n as usize / 3, "{}", got.fds.len());
    assert_eq!(got.fds[..100], h.fds[..100]);
    assert_eq!(got.truncated.entries, (n as usize - got.fds.len()) as u64);
    assert!(serde_json::to_string(got).unwrap().len() <= MAX_HEADER_JSON);
}

fn big_stack(id: u32, frames: usize) -> StackEntry {
    StackEntry {
        id,
        kind: StackKind::User,
        frames: (0..frames)
            .map(|i| Frame {
                addr: i as u64,
                file: Some(format!("/usr/lib/lib{}.so", "z".repeat(200))),
                off: Some(i as u64),
                ..Default::default()
            })
            .collect(),
        truncated: false,
        missing: None,
        cut: None,
    }
}

/// The stack table entries of one batch can take more than a block's metadata may hold (1 MiB):
/// those that do not fit go in blocks of 0 events before the batch's, so that every entry is
/// still stored no later than the events that use it.
#[test]
fn stack_tables_larger_than_a_blocks_metadata_go_in_blocks_before_their_events() {
    let dir = tmpdir("big-table");
    let path = dir.join("t.lst");
    let mut rng = Rng::new(6);
    let mut b = random_batch(&mut rng, 100);
    for id in 1..=300 {
        b.stacks.push_str(&big_stack(id, 64).to_line());
    }
    assert!(b.stacks.len() > 4 << 20, "{}", b.stacks.len());
    b.ustack.iter_mut().enumerate().for_each(|(i, u)| *u = 1 + (i as u32 % 300));
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    w.write_batch(&b, 0).unwrap();
    let s = w.finish(Summary::default()).unwrap();
    assert!(s.blocks > 4, "{s:?}");
    assert!(s.truncated.is_empty(), "{s:?}");

    let mut r = TraceReader::open(&path).unwrap();
    let mut table = latscope_event::StackTable::default();
    let mut events = EventBatch::default();
    while let Some(x) = r.next_batch() {
        let x = x.unwrap();
        table.add_lines(&x.stacks).unwrap();
        if !x.is_empty() {
            // Every stack the events use is known by the time they are read.
            assert!(x.ustack.iter().all(|&u| table.get(u).is_some()));
            events = x;
        }
    }
    assert_eq!(events.len(), 100);
    assert_eq!(table.len(), 300);
    assert_eq!(table.get(7), Some(&big_stack(7, 64)));
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
}

/// A crafted trace of 28 MB of stack table could make a reader hold gigabytes: the table keeps
/// at most its bounds (here the frames) and counts what it left out.
#[test]
fn a_crafted_stack_table_is_bounded_when_read() {
    let dir = tmpdir("crafted-stacks");
    let path = dir.join("t.lst");
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    let per_stack = 128;
    let stacks = MAX_STACK_FRAMES / per_stack + 2000;
    let mut next = 1u32;
    while (next as usize) < stacks {
        let mut b = EventBatch::default();
        for _ in 0..2000 {
            let e = StackEntry {
                id: next,
                kind: StackKind::Kernel,
                frames: (0..per_stack).map(|i| Frame { addr: i as u64, ..Default::default() }).collect(),
                truncated: false,
                missing: None,
                cut: None,
            };
            b.stacks.push_str(&e.to_line());
            next += 1;
        }
        w.write_batch(&b, 0).unwrap();
    }
    w.finish(Summary::default()).unwrap();
    let t = TraceReader::open(&path).unwrap().read_stack_table().unwrap();
    assert_eq!(t.len(), MAX_STACK_FRAMES / per_stack);
    assert_eq!(t.truncation().entries as usize, next as usize - 1 - t.len());
    assert!(t.iter().map(|e| e.frames.len()).sum::<usize>() <= MAX_STACK_FRAMES);
}

/// Cgroups met during a recording travel in block metadata and join the header's table: a
/// crafted trace with hundreds of thousands of them once took minutes (each added after a linear
/// search of the table); they are added by id.
#[test]
fn hundreds_of_thousands_of_cgroups_in_block_metadata_read_in_linear_time() {
    let dir = tmpdir("cgroups");
    let path = dir.join("t.lst");
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    let n = 300_000u64;
    let mut b = EventBatch::default();
    for id in 10..10 + n {
        b.cgroups.push_str(
            &serde_json::to_string(&CgroupInfo { id, path: format!("/c{id}"), ..Default::default() }).unwrap(),
        );
        b.cgroups.push('\n');
        // Listed twice: added once.
        if id % 1000 == 0 {
            b.cgroups.push_str(&format!("{{\"id\":{id},\"path\":\"/dup\"}}\n"));
        }
    }
    w.write_batch(&b, 0).unwrap();
    w.finish(Summary::default()).unwrap();
    let mut r = TraceReader::open(&path).unwrap();
    r.read_all().unwrap();
    assert_eq!(r.header().cgroups.len() as u64, n);
    assert_eq!(r.header().cgroups.iter().find(|c| c.id == 5000).unwrap().path, "/c5000");
    assert!(r.warnings().iter().all(|w| !matches!(w.kind, WarningKind::Bounded { .. })));
}

//! Push-down extraction, the per-clause split, the kernel's exactness, and the explanation.

use latscope_event::{syscalls::syscall_nr, EventKind, FdType};
use latscope_filter::{Exactness, Filter, InexactReason, KernelTest, KindSet, Pushdown, Residual};

fn p(f: &str) -> Pushdown {
    Filter::parse(f).unwrap_or_else(|e| panic!("{e}")).pushdown()
}

#[test]
fn three_clause_filter() {
    let mut d = p("proc.name=httpd and fd.type=file and evt.latency > 1ms");
    let clauses = std::mem::take(&mut d.clauses);
    assert_eq!(
        d,
        Pushdown {
            kinds: Some(KindSet { syscall: true, block: false, proc: false }),
            comms: Some(vec!["httpd".into()]),
            fd_types: Some(vec![FdType::File]),
            min_latency_ns: Some(1_000_001),
            ..Default::default()
        }
    );
    let split: Vec<_> = clauses.iter().map(|c| (c.span.clone(), c.text.as_str(), c.kernel.clone())).collect();
    assert_eq!(
        split,
        vec![
            (0..15, "proc.name=httpd", Ok(KernelTest::Comms(vec!["httpd".into()]))),
            (20..32, "fd.type=file", Ok(KernelTest::FdTypes(vec![FdType::File]))),
            (37..54, "evt.latency > 1ms", Ok(KernelTest::MinLatency { ns: 1_000_001, exact: true })),
        ]
    );
}

#[test]
fn clauses_say_where_each_part_is_tested() {
    let src = "proc.pid in (1, 2) and (fd.name contains /x or evt.failed) and not proc.name = a and proc.exe = /b and proc.pid != 3 and (thread.tid = 4 and blk.disk = vda)";
    let d = p(src);
    let got: Vec<_> = d.clauses.iter().map(|c| (&src[c.span.clone()], c.kernel.clone())).collect();
    assert_eq!(
        got,
        vec![
            ("proc.pid in (1, 2)", Ok(KernelTest::Pids(vec![1, 2]))),
            ("(fd.name contains /x or evt.failed)", Err(Residual::Or)),
            ("not proc.name = a", Err(Residual::Not)),
            ("proc.exe = /b", Err(Residual::Field { field: "proc.exe" })),
            ("proc.pid != 3", Err(Residual::Operator { field: "proc.pid", op: "!=" })),
            // A parenthesised `and` is flattened into the top level.
            ("thread.tid = 4", Ok(KernelTest::Tids(vec![4]))),
            ("blk.disk = vda", Ok(KernelTest::BlockDisks { names: vec!["vda".into()], devs: None })),
        ]
    );
    assert!(d.clauses.iter().all(|c| c.text == src[c.span.clone()]));
    assert_eq!(d.kernel_clauses().count(), 3);
    assert_eq!(d.residual_clauses().map(|c| c.text.as_str()).collect::<Vec<_>>()[3], "proc.pid != 3");
    assert!(p("").clauses.is_empty());
    assert_eq!(p("proc.pid = 1 or proc.pid = 2").clauses.len(), 1);
}

/// What `latscope spectrogram` asks before counting in the kernel: does the kernel pass exactly
/// the events the filter keeps?
#[test]
fn which_filters_the_kernel_applies_exactly() {
    let why = |s: &str, kind: EventKind| match p(s).exactness(kind) {
        Exactness::Exact => None,
        Exactness::Inexact(w) => Some(w),
    };
    let exact = |s: &str, kind| why(s, kind).is_none();
    let sys = EventKind::Syscall;
    let blk = EventKind::Block;
    // The spectrogram post's examples.
    assert!(exact("", sys));
    assert!(exact("proc.name=httpd", sys));
    assert!(exact("proc.name=httpd and fd.type=file", sys));
    assert!(exact("proc.name=httpd and fd.type=file and evt.latency > 1000000", sys));
    assert!(exact("evt.latency > 1000000", sys));
    assert!(exact("evt.is_io_write=true", sys));
    let w = why("proc.name=test and evt.is_io_write=true and fd.name contains /mnt", sys).unwrap();
    assert_eq!(w.reason, InexactReason::Residual(Residual::Field { field: "fd.name" }));
    assert_eq!(w.clause, Some((44..65, "fd.name contains /mnt".to_string())));
    assert_eq!(w.to_string(), "fd.name has no kernel test: fd.name contains /mnt");
    let w = why("evt.latency = 5ms", sys).unwrap();
    assert_eq!(w.reason, InexactReason::LatencyLowerBound);
    assert_eq!(w.to_string(), "the kernel tests only a lower bound of the latency: evt.latency = 5ms");
    assert_eq!(why("evt.latency in (1ms, 2ms)", blk).unwrap().reason, InexactReason::LatencyLowerBound);
    assert_eq!(why("proc.name=a or proc.name=b", sys).unwrap().reason, InexactReason::Residual(Residual::Or));
    assert_eq!(why("thread.tid=5", sys).unwrap().reason, InexactReason::ThreadInUserSpace);
    assert_eq!(why("proc.name=dd", blk).unwrap().reason, InexactReason::BlockProcessInUserSpace);
    assert_eq!(why("proc.pid=7", blk).unwrap().reason, InexactReason::BlockProcessInUserSpace);
    assert!(exact("proc.pid=7", sys));
    assert!(exact("evt.latency >= 1ms", blk));
    // `evt.type = write` is a syscall number in the kernel, and matches no block request;
    // `block_write` requests are told apart in user space.
    assert!(exact("evt.type = write", sys));
    assert!(exact("evt.type = write", blk));
    assert_eq!(why("evt.type = block_write", blk).unwrap().reason, InexactReason::BlockOpInUserSpace);
    // Kinds the filter cannot match are dropped whole: exact.
    assert!(exact("fd.type = file and proc.exe = /x", blk));
    assert!(exact("blk.op = write", sys));
    assert!(!exact("blk.op = write", blk));
    assert!(exact("evt.is_io and thread.tid = 3", blk));
    // A clause that is always true on a kind does not make it inexact.
    assert!(exact("evt.latency > 1ms and not blk.op = write", sys));
    assert!(!exact("evt.latency > 1ms and not blk.op = write", blk));
    assert_eq!(why("fd.type in (file, unknown)", sys).unwrap().reason, InexactReason::UnknownFdType);
    // Disk names count once resolved, and only if every name resolves.
    let mut d = p("blk.disk = vda and evt.latency > 1ms");
    assert_eq!(
        d.exactness(blk),
        Exactness::Inexact(latscope_filter::Inexact {
            reason: InexactReason::UnresolvedDisks,
            clause: Some((0..14, "blk.disk = vda".into()))
        })
    );
    assert!(d.is_exact(sys));
    d.resolve_disks(|n| (n == "vda").then_some(253 << 20));
    assert!(d.is_exact(blk));
    let mut d = p("blk.disk in (vda, sdz)");
    d.resolve_disks(|n| (n == "vda").then_some(253 << 20));
    assert!(!d.is_exact(blk));
    // Process events always pass.
    assert!(p("").is_exact(EventKind::Proc));
    assert_eq!(why("proc.pid = 1", EventKind::Proc).unwrap().reason, InexactReason::ProcEvents);
}

#[test]
fn fields_used_and_fd_names() {
    let f = |s: &str| Filter::parse(s).unwrap();
    let names = |s: &str| f(s).fields_used().iter().map(|i| i.name).collect::<Vec<_>>();
    assert_eq!(
        names("proc.name = a and (fd.name contains x or not proc.name = b) and evt.failed"),
        ["proc.name", "fd.name", "evt.failed"]
    );
    assert!(names("").is_empty());
    for s in ["fd.name = /x", "fd.directory = /x", "not fd.filename = x", "proc.pid = 1 or fd.sip = 1.2.3.4"] {
        assert!(f(s).tests_fd_names(), "{s}");
    }
    // Words in values are not fields.
    for s in ["proc.name = 'fd.name'", "proc.exe contains fd.name", "fd.type = file", "fd.num = 3"] {
        assert!(!f(s).tests_fd_names(), "{s}");
    }
}

#[test]
fn sets_and_intersections() {
    assert_eq!(p("proc.pid = 5").pids, Some(vec![5]));
    assert_eq!(p("proc.pid in (3, 1, 2) and proc.pid in (2, 3, 4)").pids, Some(vec![2, 3]));
    assert_eq!(p("proc.pid = 1 and proc.pid = 2").pids, Some(vec![]));
    assert_eq!(p("proc.pid in (-1, 7)").pids, Some(vec![7]));
    assert_eq!(p("thread.tid in (9, 8)").tids, Some(vec![8, 9]));
    assert_eq!(p("proc.name in (nginx, httpd)").comms, Some(vec!["httpd".into(), "nginx".into()]));
    assert_eq!(p("proc.name = a-very-long-process-name").comms, Some(vec!["a-very-long-pro".into()]));
    assert_eq!(p("evt.type in (openat, read)").syscalls, Some(vec![0, 257]));
    let d = p("evt.type = read");
    assert_eq!((d.syscalls, d.kinds), (Some(vec![0]), Some(KindSet { syscall: true, block: false, proc: false })));
    let d = p("evt.type = block_flush");
    assert_eq!((d.syscalls, d.kinds), (Some(vec![]), Some(KindSet { syscall: false, block: true, proc: false })));
    let w = p("evt.is_io_write = true").syscalls.unwrap();
    assert!(w.contains(&1) && w.contains(&syscall_nr("pwrite64").unwrap()) && !w.contains(&0));
    let both = p("evt.is_io = true and evt.type in (read, openat)").syscalls;
    assert_eq!(both, Some(vec![0]));
    assert_eq!(p("evt.is_io_read").syscalls.map(|s| s.contains(&0)), Some(true));
    assert_eq!(p("evt.is_io = false").syscalls, None);
    assert_eq!(p("evt.latency >= 250us").min_latency_ns, Some(250_000));
    assert_eq!(p("evt.latency > 1ms and evt.latency >= 5ms").min_latency_ns, Some(5_000_000));
    assert_eq!(p("evt.latency = 3ms").min_latency_ns, Some(3_000_000));
    assert_eq!(p("evt.latency in (3ms, 2ms)").min_latency_ns, Some(2_000_000));
    assert_eq!(p("evt.latency > -5").min_latency_ns, Some(0));
    assert_eq!(p("evt.latency < 5ms").min_latency_ns, None);
    assert_eq!(p("blk.latency > 1ms").min_latency_ns, Some(1_000_001));
    assert_eq!(p("fd.type in (ipv4, ipv6)").fd_types, Some(vec![FdType::Ipv4, FdType::Ipv6]));
    assert_eq!(p("blk.dev in (8:0, 253:1)").block_devs, Some(vec![8 << 20, (253 << 20) | 1]));
}

#[test]
fn or_and_not_stay_in_user_space() {
    assert_eq!(p("proc.pid = 1 or proc.pid = 2").pids, None);
    assert_eq!(p("not proc.pid = 1").pids, None);
    assert_eq!(p("proc.pid != 1").pids, None);
    assert_eq!(p("(proc.pid = 1 or proc.pid = 2) and proc.name = x").pids, None);
    assert_eq!(p("(proc.pid = 1 and proc.pid = 1) and proc.name = x").pids, Some(vec![1]));
    assert_eq!(p("proc.name startswith ht").comms, None);
    assert_eq!(p(""), Pushdown::default());
}

#[test]
fn disks_resolve_through_a_map() {
    let mut d = p("blk.disk in (vda, loop0)");
    assert_eq!(d.block_disks, Some(vec!["loop0".into(), "vda".into()]));
    assert_eq!(d.block_devs, None);
    let map = [("vda", 253 << 20), ("loop0", 7 << 20)];
    d.resolve_disks(|n| map.iter().find(|(k, _)| *k == n).map(|(_, v)| *v));
    assert_eq!(d.block_devs, Some(vec![7 << 20, 253 << 20]));
    // An unknown name leaves the devices unrestricted.
    let mut d = p("blk.disk in (vda, sdz)");
    d.resolve_disks(|n| map.iter().find(|(k, _)| *k == n).map(|(_, v)| *v));
    assert_eq!(d.block_devs, None);
}

#[test]
fn explain_shows_the_split() {
    let f = Filter::parse("proc.name=httpd and fd.type=file and evt.latency > 1ms and (proc.pid=1 or proc.pid=2) and proc.exe startswith /usr").unwrap();
    let e = f.explain();
    println!("{e}");
    assert!(e.starts_with("filter: proc.name=httpd"));
    assert!(e.contains("event kinds: syscall "));
    assert!(e.contains("comm in {\"httpd\"}") && e.contains("<- proc.name=httpd"));
    assert!(e.contains("fd type in {file}") && e.contains("<- fd.type=file"));
    assert!(e.contains("latency >= 1000001ns (1.00ms)") && e.contains("<- evt.latency > 1ms"));
    assert!(e.contains("(proc.pid=1 or proc.pid=2)  (under 'or')"));
    assert!(e.contains("proc.exe startswith /usr  (proc.exe has no kernel test)"));
    assert!(e.contains("kernel verdict"), "{e}");
    assert!(e.contains("syscall events: not exact, 'or' is tested in user space: (proc.pid=1 or proc.pid=2)"), "{e}");
    assert!(!e.contains("block events"), "{e}");
    let t = Filter::parse("thread.tid = 5 and evt.latency > 1ms").unwrap().explain();
    assert!(
        t.contains("tid in {5} (in user space)")
            && t.contains("syscall events: not exact, thread.tid is tested in user space: thread.tid = 5"),
        "{t}"
    );
    assert!(t.contains("block events: not exact"), "{t}");
    let b = Filter::parse("blk.disk = vda").unwrap();
    let mut d = b.pushdown();
    d.resolve_disks(|_| Some(253 << 20));
    assert!(d.to_string().contains("disk in {vda} = device in {253:0}"), "{d}");
    assert!(d.to_string().contains("block events: exact"), "{d}");
    assert!(Filter::parse("proc.pid != 1")
        .unwrap()
        .explain()
        .contains("proc.pid != 1  (operator '!=' on proc.pid has no kernel test)"));
    let all = Filter::parse("proc.pid = 5").unwrap().explain();
    assert!(all.contains("pid in {5}") && all.contains("no clause is left to user space alone"), "{all}");
    assert!(
        all.contains("syscall events: exact")
            && all.contains(
                "block events: not exact, the process of a block request is known in user space only: proc.pid = 5"
            ),
        "{all}"
    );
    assert!(Filter::parse("").unwrap().explain().contains("matches every event"));
    let io = Filter::parse("evt.is_io_write").unwrap().explain();
    assert!(io.contains("syscall in {write, pwrite64"), "{io}");
}

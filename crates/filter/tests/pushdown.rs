//! Push-down extraction and explanation.

use latscope_event::{syscalls::syscall_nr, FdType};
use latscope_filter::{Filter, KindSet, Pushdown};

fn p(f: &str) -> Pushdown {
    Filter::parse(f).unwrap_or_else(|e| panic!("{e}")).pushdown()
}

#[test]
fn three_clause_filter() {
    let d = p("proc.name=httpd and fd.type=file and evt.latency > 1ms");
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
    assert_eq!((d.syscalls, d.kinds), (Some(vec![0]), None));
    let d = p("evt.type = flush");
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
    assert!(Filter::parse("proc.pid != 1")
        .unwrap()
        .explain()
        .contains("proc.pid != 1  (operator '!=' on proc.pid has no kernel test)"));
    let all = Filter::parse("proc.pid = 5").unwrap().explain();
    assert!(all.contains("pid in {5}") && all.contains("no clause is left to user space alone"), "{all}");
    assert!(Filter::parse("").unwrap().explain().contains("matches every event"));
    let io = Filter::parse("evt.is_io_write").unwrap().explain();
    assert!(io.contains("syscall in {write, pwrite64"), "{io}");
}

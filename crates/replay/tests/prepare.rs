//! `prepare` on hand-built recordings: the fd model, the starting tree and the dependencies.

mod common;
use common::*;
use latscope_replay::{plan_events, InitKind, OpKind, Plan, PrepareOptions, SandboxChoice, NONE};

fn plan(r: &Rec) -> Plan {
    let opts = PrepareOptions { sandbox: SandboxChoice::Root("/sb".into()), filter: None };
    plan_events(&r.events(), &opts).expect("plan")
}

fn kinds(p: &Plan) -> Vec<OpKind> {
    ops(p).into_iter().map(|(_, o)| o.kind).collect()
}

fn dropped(p: &Plan, reason_part: &str) -> u64 {
    p.meta.dropped.iter().filter(|d| d.reason.contains(reason_part)).map(|d| d.count).sum()
}

#[test]
fn a_file_created_written_and_read_back_needs_no_starting_tree() {
    let mut r = Rec::new();
    r.open(100, "/w/d/f", O_CREAT | O_RDWR, 3).write(100, 3, 4096, 0, 4096).pread(100, 3, 4096, 0, 4096).close(100, 3);
    let p = plan(&r);
    assert_eq!(kinds(&p), [OpKind::Open, OpKind::Write, OpKind::Pread, OpKind::Close]);
    let o = ops(&p);
    assert_eq!(rel(&p, o[0].1.path), "w/d/f");
    assert_eq!(o[1].1.slot, o[0].1.slot2, "write uses the slot the open filled");
    assert_eq!((o[1].1.size, o[1].1.off), (4096, 0));
    assert_eq!(init_tree(&p), [("w".into(), InitKind::Dir, 0), ("w/d".into(), InitKind::Dir, 0)]);
    assert_eq!(p.meta.counts.ops, 4);
    assert_eq!(p.threads.len(), 1);
}

#[test]
fn files_read_before_written_exist_at_the_size_read() {
    let mut r = Rec::new();
    // Read from offset 0 (I/O Riot gives such files size 0), contiguous ranges (it loses the first
    // block), a later range at a lower offset (it truncates the earlier one).
    r.open(100, "/w/a", O_RDONLY, 3).read(100, 3, 4096, 0, 4096).read(100, 3, 4096, 4096, 4096);
    r.pread(100, 3, 100, 50_000, 100).pread(100, 3, 10, 5, 10).close(100, 3);
    // A short read says where the file ended.
    r.open(100, "/w/b", O_RDONLY, 3).read(100, 3, 8192, 0, 1000).close(100, 3);
    // Written first, then read: no data needed at the start.
    r.open(100, "/w/c", O_RDWR, 3).pwrite(100, 3, 4096, 0, 4096).pread(100, 3, 4096, 0, 4096).close(100, 3);
    let p = plan(&r);
    let tree = init_tree(&p);
    assert!(tree.contains(&("w/a".into(), InitKind::File, 50_100)), "{tree:?}");
    assert!(tree.contains(&("w/b".into(), InitKind::File, 1000)), "{tree:?}");
    assert!(tree.contains(&("w/c".into(), InitKind::File, 0)), "{tree:?}");
}

#[test]
fn stat_rename_unlink_and_plain_open_need_the_path_to_exist_enoent_does_not() {
    let mut r = Rec::new();
    r.path_op(100, "newfstatat", "/w/s", 0);
    r.path_op(100, "unlink", "/w/u", 0);
    r.rename(100, "/w/r", "/w/r2");
    r.open(100, "/w/o", O_RDONLY, 3).close(100, 3);
    r.path_op(100, "newfstatat", "/w/missing", -2);
    r.path_op(100, "rmdir", "/w/dd", 0);
    let p = plan(&r);
    let tree: Vec<_> = init_tree(&p).into_iter().map(|(p, k, _)| (p, k)).collect();
    for f in ["w/s", "w/u", "w/r", "w/o"] {
        assert!(tree.contains(&(f.into(), InitKind::File)), "{f}: {tree:?}");
    }
    assert!(tree.contains(&("w/dd".into(), InitKind::Dir)), "rmdir of a pre-existing directory: {tree:?}");
    assert!(!tree.iter().any(|(p, _)| p == "w/missing" || p == "w/r2"));
    // rmdir is replayed as rmdir (I/O Riot replays it as mkdir).
    assert!(kinds(&p).contains(&OpKind::Rmdir) && !kinds(&p).contains(&OpKind::Mkdir));
}

#[test]
fn pseudo_file_systems_come_from_the_recorded_mount_table() {
    let mut r = Rec::new();
    r.header.mounts.push(latscope_event::Mount {
        mount_point: "/data".into(),
        fstype: "proc".into(),
        ..Default::default()
    });
    r.open(100, "/proc/self/stat", O_RDONLY, 3).read(100, 3, 100, 0, 100).close(100, 3);
    r.open(100, "/data/x", O_RDONLY, 4).close(100, 4);
    r.open(100, "/w/a/../etc/passwd", O_RDONLY, 5).close(100, 5);
    let p = plan(&r);
    assert!(kinds(&p).is_empty(), "{:?}", kinds(&p));
    assert_eq!(dropped(&p, "pseudo"), 5, "{:?}", p.meta.dropped);
    assert_eq!(dropped(&p, "'..'"), 2);
}

#[test]
fn dup_shares_the_file_position_across_threads() {
    let mut r = Rec::new();
    r.open(100, "/w/f", O_RDWR | O_CREAT, 3);
    r.sys(100, 100, "dup", |e| {
        e.fd = 3;
        e.ret = 4;
        e.fd_type = 1;
    });
    r.write(100, 3, 100, 0, 100);
    r.write(101, 4, 100, 100, 100); // another thread, the dup'd fd: same position
    r.write(100, 3, 100, 200, 100);
    let p = plan(&r);
    let o = ops(&p);
    let dup = o.iter().find(|(_, o)| o.kind == OpKind::Dup).unwrap().1;
    assert_eq!(dup.slot, o[0].1.slot2);
    let w2 = o.iter().find(|(t, o)| *t == 1 && o.kind == OpKind::Write).unwrap().1;
    assert_eq!(w2.slot, dup.slot2, "the second thread writes through the dup");
    // Thread 1's write waits for thread 0's first write (shared position); thread 0's second
    // write waits for thread 1's.
    assert_eq!(waits_before(&p, 1, OpKind::Write, 0), vec![(0, 3)]);
    assert_eq!(waits_before(&p, 0, OpKind::Write, 1), vec![(1, 1)]);
}

#[test]
fn cross_thread_causality_create_mkdir_rename_close() {
    let mut r = Rec::new();
    // mkdir before a create inside it, by another thread
    r.path_op(100, "mkdir", "/w/d", 0);
    r.open(101, "/w/d/f", O_CREAT | O_WRONLY, 3);
    // create before open of the same path
    r.open(102, "/w/d/f", O_RDONLY, 4);
    // rename before open of the new name
    r.rename(100, "/w/d/f", "/w/d/g");
    r.open(102, "/w/d/g", O_RDONLY, 5);
    // close before the fd number is reused (same process: one fd table)
    r.close(101, 3);
    r.open(102, "/w/d/h", O_CREAT | O_WRONLY, 3);
    let p = plan(&r);
    let t = |tid: u32| p.threads.iter().position(|t| t.tid == tid).unwrap() as u32;
    assert_eq!(waits_before(&p, t(101) as usize, OpKind::Open, 0), vec![(t(100), 1)], "create after mkdir");
    assert!(waits_before(&p, t(102) as usize, OpKind::Open, 0).contains(&(t(101), 1)), "open after create");
    assert!(
        waits_before(&p, t(100) as usize, OpKind::Rename, 0).contains(&(t(102), 1)),
        "rename after the open of the old name"
    );
    assert!(
        waits_before(&p, t(102) as usize, OpKind::Open, 1).contains(&(t(100), 2)),
        "open of the new name after the rename"
    );
    assert!(waits_before(&p, t(102) as usize, OpKind::Open, 2).contains(&(t(101), 2)), "fd 3 reused after its close");
    assert_eq!(p.meta.lanes, 3);
}

#[test]
fn reads_wait_for_the_writes_they_overlap_and_appends_for_each_other() {
    let mut r = Rec::new();
    r.open(100, "/w/log", O_CREAT | O_WRONLY | O_APPEND, 3);
    r.open(101, "/w/log", O_RDONLY, 4);
    r.write(100, 3, 100, 0, 100);
    r.pread(101, 4, 100, 0, 100);
    r.pread(101, 4, 10, 500, 0); // at the end: no writer in range, but the size
    r.write(100, 3, 50, 100, 50);
    let p = plan(&r);
    assert_eq!(waits_before(&p, 1, OpKind::Pread, 0), vec![(0, 2)], "read after the write of its range");
    assert_eq!(waits_before(&p, 0, OpKind::Write, 1), vec![(1, 3)], "the append after the reads of the old size");
    let o = ops(&p);
    let appends: Vec<i64> = o.iter().filter(|(_, o)| o.kind == OpKind::Write).map(|(_, o)| o.off).collect();
    assert_eq!(appends, [0, 100], "appends land at the end of the file");
    assert!(init_tree(&p).iter().all(|(p, _, _)| p != "w/log"), "created by the replay");
}

#[test]
fn fork_inherits_fds_and_exec_closes_cloexec_ones() {
    let mut r = Rec::new();
    r.open(100, "/w/out", O_CREAT | O_WRONLY, 3);
    r.open(100, "/w/cx", O_CREAT | O_WRONLY | O_CLOEXEC, 4);
    r.sys(100, 100, "clone", |e| {
        e.flags = 0x01200011; // SIGCHLD | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID
        e.ret = 200;
    });
    r.proc(200, 200, 0, 100, "");
    r.fdop(200, 200, "write", 3, 10, 0, 10);
    r.proc(200, 200, 1, 0, "/bin/x");
    r.fdop(200, 200, "write", 3, 10, 10, 10);
    r.fdop(200, 200, "write", 4, 10, 0, -9); // EBADF: closed by exec
    r.proc(200, 200, 2, 0, "");
    r.close(100, 3);
    let p = plan(&r);
    let o = ops(&p);
    let implicit: Vec<OpKind> =
        o.iter().filter(|(_, o)| o.has(latscope_replay::Op::IMPLICIT)).map(|(_, o)| o.kind).collect();
    // fork: two dups; exec: close of the CLOEXEC one; exit: close of the other
    assert_eq!(implicit, [OpKind::Dup, OpKind::Dup, OpKind::Close, OpKind::Close], "{o:#?}");
    let child = p.threads.iter().position(|t| t.pid == 200).unwrap();
    let writes: Vec<u32> =
        o.iter().filter(|(t, o)| *t == child && o.kind == OpKind::Write).map(|(_, o)| o.slot).collect();
    let dup_out = o.iter().find(|(_, o)| o.kind == OpKind::Dup).unwrap().1;
    assert_eq!(writes, [dup_out.slot2, dup_out.slot2], "the child writes through its inherited copy");
    assert_eq!(dropped(&p, "EBADF"), 1);
    // the parent's close of fd 3 waits for the child's writes through the shared description
    assert_eq!(p.meta.counts.implicit, 4);
}

#[test]
fn files_open_before_the_recording_are_preopened() {
    let mut r = Rec::new();
    r.snapshot_fd(100, 7, "/w/log", 1);
    r.snapshot_fd(100, 1, "/dev/pts/0", 13);
    r.write(100, 7, 100, 5000, 100);
    r.write(100, 1, 10, 0, 10);
    let p = plan(&r);
    assert_eq!(p.preopen.len(), 1);
    let pre = p.preopen[0];
    assert_eq!((rel(&p, pre.path).as_str(), pre.pos, pre.flags & 3), ("w/log", 5000, 2));
    assert_eq!(ops(&p)[0].1.slot, pre.slot);
    assert!(init_tree(&p).iter().any(|(p, k, _)| p == "w/log" && *k == InitKind::File));
    assert_eq!(dropped(&p, "not a file") + dropped(&p, "pseudo"), 1);
}

#[test]
fn preopened_files_take_the_snapshot_position_and_flags() {
    let mut r = Rec::new();
    r.snapshot_fd_at(100, 7, "/w/log", 777, O_WRONLY | O_APPEND | 0o100000); // O_LARGEFILE, as fdinfo shows it
    r.write(100, 7, 100, -1, 100); // no position in the event itself
    let p = plan(&r);
    assert_eq!(p.preopen.len(), 1);
    let pre = p.preopen[0];
    assert_eq!((pre.pos, pre.flags & 3), (777, 1), "the snapshot's, not a guess");
    assert_ne!(pre.flags & O_APPEND, 0);
}

#[test]
fn a_filter_replays_some_events_while_the_model_sees_all() {
    let mut r = Rec::new();
    r.open(100, "/w/f", O_CREAT | O_RDWR, 3); // left out by the filter
    r.write(101, 3, 10, 0, 10);
    r.path_op(101, "newfstatat", "/w/f", 0);
    let mut ev = r.events();
    ev.selected = vec![false, true, true];
    let p = plan_events(&ev, &PrepareOptions { sandbox: SandboxChoice::Root("/sb".into()), filter: None }).unwrap();
    assert_eq!(kinds(&p), [OpKind::Stat]);
    assert_eq!(dropped(&p, "not replayed"), 1, "{:?}", p.meta.dropped);
    assert!(init_tree(&p).iter().any(|(p, _, _)| p == "w/f"), "the stat needs the file");
}

#[test]
fn name_mode_uses_one_sandbox_per_recorded_mount() {
    let mut r = Rec::new();
    r.header.mounts.push(latscope_event::Mount {
        mount_point: "/data".into(),
        fstype: "xfs".into(),
        ..Default::default()
    });
    r.open(100, "/data/x", O_CREAT | O_WRONLY, 3).open(100, "/w/y", O_CREAT | O_WRONLY, 4);
    let p =
        plan_events(&r.events(), &PrepareOptions { sandbox: SandboxChoice::Name("t1".into()), filter: None }).unwrap();
    let dirs: Vec<_> = p.meta.sandbox.roots.iter().map(|r| r.dir.as_str()).collect();
    assert_eq!(dirs, ["/data/.latscope/t1", "/.latscope/t1"]);
    let e = plan_events(&r.events(), &PrepareOptions { sandbox: SandboxChoice::Name("../x".into()), filter: None });
    assert!(e.is_err());
}

#[test]
fn mmap_and_msync_carry_the_dirty_range() {
    let mut r = Rec::new();
    r.open(100, "/w/m", O_CREAT | O_RDWR, 3);
    r.sys(100, 100, "ftruncate", |e| {
        e.fd = 3;
        e.bytes = 8192;
    });
    r.sys(100, 100, "mmap", |e| {
        e.fd = 3;
        e.bytes = 8192;
        e.mode = 3; // PROT_READ|PROT_WRITE
        e.flags = 1; // MAP_SHARED
        e.off = 0;
        e.ret = 0x7f00_0000_0000;
    });
    r.sys(100, 100, "msync", |e| {
        e.addr = 0x7f00_0000_1000;
        e.bytes = 4096;
        e.flags = 4; // MS_SYNC
    });
    r.sys(100, 100, "munmap", |e| {
        e.addr = 0x7f00_0000_0000;
        e.bytes = 8192;
    });
    let p = plan(&r);
    let o = ops(&p);
    let ms = o.iter().find(|(_, o)| o.kind == OpKind::Msync).unwrap().1;
    assert_eq!((ms.off, ms.size, ms.mode), (4096, 4096, 4096));
    let mm = o.iter().find(|(_, o)| o.kind == OpKind::Mmap).unwrap().1;
    assert_eq!(mm.slot2, ms.slot2);
    assert!(kinds(&p).contains(&OpKind::Munmap));
    assert_ne!(mm.slot2, NONE);
}

#[test]
fn incomplete_traces_are_refused_with_the_reason() {
    let r = Rec::new();
    let mut ev = r.events();
    ev.lost = 12;
    let e = latscope_replay::readiness(&ev).unwrap_err();
    assert!(e.contains("12 events were lost"), "{e}");
}

#[test]
fn a_lookup_below_a_path_proves_it_is_a_directory() {
    let mut r = Rec::new();
    // The loader's pattern: lookups below a library directory fail, then the directory is stat'ed.
    r.open(100, "/w/lib/hw/libc.so.6", O_RDONLY, -2);
    r.path_op(100, "newfstatat", "/w/lib", 0);
    r.path_op(100, "newfstatat", "/w/other", 0);
    r.path_op(100, "newfstatat", "/w/other/x", -2);
    let p = plan(&r);
    let tree = init_tree(&p);
    assert!(tree.contains(&("w/lib".into(), InitKind::Dir, 0)), "{tree:?}");
    assert!(tree.contains(&("w/other".into(), InitKind::Dir, 0)), "{tree:?}");
}

#[test]
fn symlink_targets_stay_as_given_or_are_refused() {
    let mut r = Rec::new();
    let sym = |r: &mut Rec, target: &str, link: &str| {
        r.sys(100, 100, "symlinkat", |e| {
            e.path = target.into();
            e.path2 = link.into();
            e.dirfd = AT_FDCWD;
        });
    };
    sym(&mut r, "e/f1", "/w/d/link");
    sym(&mut r, "../../..", "/w/d/up");
    sym(&mut r, "/w/t", "/w/d/abs");
    let p = plan(&r);
    let targets: Vec<&str> = ops(&p).iter().map(|(_, o)| p.literals[o.path2 as usize].as_str()).collect();
    assert_eq!(targets, ["e/f1", "../t"]);
    assert_eq!(dropped(&p, "symlink target outside"), 1);
}

#[test]
fn ioctl_fioclex_marks_an_fd_for_exec_and_preadv2_without_offset_reads_at_the_position() {
    let mut r = Rec::new();
    r.open(100, "/w/f", O_CREAT | O_RDWR, 3);
    r.sys(100, 100, "ioctl", |e| {
        e.fd = 3;
        e.flags = 0x5451; // FIOCLEX
    });
    r.fdop(100, 100, "preadv2", 3, 10, -1, 0);
    r.proc(100, 100, 1, 0, "/bin/x"); // exec: closes fd 3
    let p = plan(&r);
    let k = kinds(&p);
    assert_eq!(k, [OpKind::Open, OpKind::Readv, OpKind::Close], "{k:?}");
    assert!(ops(&p)[2].1.has(latscope_replay::Op::IMPLICIT));
}

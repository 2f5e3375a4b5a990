//! Parser and evaluator tests: every operator, every field, the seed's examples, and errors.

use latscope_event::{BlockDevice, CgroupInfo, Event, EventBatch, FdType, ProcessInfo, TraceHeader};
use latscope_filter::{fields, EvalContext, FieldType, Filter, KindSet};

fn header() -> TraceHeader {
    TraceHeader {
        start_ns: 1_000,
        realtime_offset_ns: 1_000_000,
        processes: vec![
            ProcessInfo { pid: 100, ppid: 1, exe: "/usr/sbin/httpd".into(), ..Default::default() },
            ProcessInfo { pid: 200, ppid: 100, exe: "/opt/test/bin/test".into(), ..Default::default() },
        ],
        users: [(0, "root".to_string()), (1000, "alice".to_string())].into_iter().collect(),
        groups: [(0, "root".to_string()), (1000, "staff".to_string())].into_iter().collect(),
        block_devices: vec![BlockDevice { dev: 253 << 20, name: "vda".into(), ..Default::default() }],
        cgroups: vec![CgroupInfo {
            container_name: "web".into(),
            image: "nginx:1.27".into(),
            ..CgroupInfo::from_path(0x1a2b, &format!("/system.slice/docker-{CONTAINER}.scope"))
        }],
        ..Default::default()
    }
}

/// The docker container of cgroup 0x1a2b.
const CONTAINER: &str = "1a2b3c4d5e6f00112233445566778899aabbccddeeff00112233445566778899";

/// A syscall event: httpd (pid 100) reading 4 KiB from a file under /mnt in 2 ms.
fn sys() -> Event {
    Event {
        kind: 0,
        ts: 5_000,
        lat: 2_000_000,
        pid: 100,
        tid: 101,
        uid: 1000,
        nr: 0, // read
        ret: 4096,
        fd: 3,
        fd_type: FdType::File as u8,
        bytes: 4096,
        cgroup: 1,
        comm: "httpd".into(),
        path: "/mnt/data/access.log".into(),
        ..Default::default()
    }
}

/// A block event: a 64 KiB write to vda (253:0) taking 3 ms.
fn blk() -> Event {
    Event {
        kind: 1,
        ts: 9_000,
        lat: 3_000_000,
        pid: 200,
        tid: 200,
        uid: 0,
        nr: 1, // write
        dev: 253 << 20,
        bytes: 65536,
        off: 2048,
        qtime: 50_000,
        cgroup: 0x1a2b,
        comm: "test".into(),
        ..Default::default()
    }
}

struct T {
    b: EventBatch,
    ctx: EvalContext,
}

impl T {
    fn new(events: &[Event]) -> T {
        T::with_header(events, &header())
    }
    fn with_header(events: &[Event], h: &TraceHeader) -> T {
        let mut b = EventBatch::with_capacity(events.len());
        for e in events {
            b.push(e);
        }
        let mut ctx = EvalContext::new(h);
        ctx.observe(&b);
        T { b, ctx }
    }
    fn m(&self, f: &str, row: usize) -> bool {
        let f = Filter::parse(f).unwrap_or_else(|e| panic!("{e}"));
        f.matches(&self.b, row, &self.ctx)
    }
}

/// Assert which rows of `t` match each filter: `rows` is a string of 0/1, one per row.
fn check(t: &T, cases: &[(&str, &str)]) {
    for (f, want) in cases {
        let got: String = (0..t.b.len()).map(|r| if t.m(f, r) { '1' } else { '0' }).collect();
        assert_eq!(&got, want, "filter {f:?}");
    }
}

fn err(f: &str) -> String {
    match Filter::parse(f) {
        Ok(_) => panic!("{f:?} parsed"),
        Err(e) => {
            let shown = e.to_string();
            assert_eq!(shown.lines().count(), 3, "{shown}");
            e.message().to_string()
        }
    }
}

#[test]
fn seed_examples() {
    let mut slow_httpd = sys();
    slow_httpd.lat = 1_500_000_000;
    let fast_httpd = Event { lat: 500_000, ..sys() };
    let httpd_pipe = Event { fd_type: FdType::Pipe as u8, ..sys() };
    let test_write = Event { comm: "test".into(), nr: 1, ..sys() };
    let test_write_elsewhere = Event { path: "/ebs1/x".into(), ..test_write.clone() };
    let test_read = Event { comm: "test".into(), ..sys() };
    let t = T::new(&[sys(), slow_httpd, fast_httpd, httpd_pipe, test_write, test_write_elsewhere, test_read, blk()]);
    check(
        &t,
        &[
            ("proc.name=httpd", "11110000"),
            ("proc.name=httpd and fd.type=file", "11100000"),
            ("proc.name=httpd and fd.type=file and evt.latency > 1000000", "11000000"),
            ("evt.latency > 1000000000", "01000000"),
            ("proc.name=test and evt.is_io_write=true and fd.name contains /mnt", "00001000"),
        ],
    );
}

#[test]
fn comparison_operators() {
    let t = T::new(&[sys(), blk()]);
    check(
        &t,
        &[
            ("evt.latency = 2000000", "10"),
            ("evt.latency == 2ms", "10"),
            ("evt.latency != 2ms", "01"),
            ("evt.latency < 3ms", "10"),
            ("evt.latency <= 3ms", "11"),
            ("evt.latency > 2ms", "01"),
            ("evt.latency >= 2ms", "11"),
            ("evt.latency >= 2 ms", "11"),
            ("evt.latency > 1.5ms", "11"),
            ("evt.latency > 250us", "11"),
            ("evt.latency < -1", "00"),
            ("evt.latency != -1", "11"),
            ("evt.latency in (2ms, 7ms)", "10"),
            ("evt.buflen >= 4KiB", "11"),
            ("evt.buflen > 4KiB", "01"),
            ("evt.buflen = 64k", "01"),
            ("proc.pid in (100, 7)", "10"),
            ("proc.pid in (100 200)", "11"),
            ("proc.pid = 0x64", "10"),
            ("proc.pid > -5", "11"),
        ],
    );
}

#[test]
fn string_operators() {
    let t = T::new(&[sys(), blk()]);
    check(
        &t,
        &[
            ("fd.name = /mnt/data/access.log", "10"),
            ("fd.name = '/mnt/data/access.log'", "10"),
            ("fd.name != /mnt/data/access.log", "00"),
            ("fd.name != /x", "10"),
            ("fd.name contains data", "10"),
            ("fd.name contains DATA", "00"),
            ("fd.name icontains DATA", "10"),
            ("fd.name startswith /mnt/", "10"),
            ("fd.name endswith .log", "10"),
            ("fd.name glob '/mnt/*.log'", "10"),
            ("fd.name glob '/mnt/?ata/[a-c]ccess.log'", "10"),
            ("fd.name glob '*.txt'", "00"),
            ("fd.name in (/a, /mnt/data/access.log)", "10"),
            ("fd.name in ('/a', \"/b\")", "00"),
            ("fd.name pmatch (/mnt)", "10"),
            ("fd.name pmatch (/mnt/data/, /etc)", "10"),
            ("fd.name pmatch (/mn)", "00"),
            ("fd.name pmatch (/)", "10"),
            // Each component of a pmatch path may be a glob (libsinsp's path prefix search).
            ("fd.name pmatch (/mnt/*)", "10"),
            ("fd.name pmatch (/*/d?ta)", "10"),
            ("fd.name pmatch (/mnt/dat[a])", "10"),
            ("fd.name pmatch (/mnt/dat[!a])", "00"),
            ("fd.name pmatch (/*/*/*)", "10"),
            ("fd.name pmatch (/*/*/*/*)", "00"),
            ("fd.name pmatch (/mnt/*/x)", "00"),
            ("fd.name pmatch (/m*)", "10"),
            ("fd.name pmatch (/mnt/da)", "00"),
            ("proc.name startswith htt", "10"),
            ("proc.name in (httpd, test)", "11"),
            ("proc.name != httpd", "01"),
            ("proc.name glob 't*'", "01"),
        ],
    );
}

#[test]
fn logic_and_precedence() {
    let t = T::new(&[sys(), blk()]);
    check(
        &t,
        &[
            ("proc.name=httpd or proc.name=test", "11"),
            ("not proc.name=httpd", "01"),
            ("NOT proc.name=httpd AND proc.pid=200", "01"),
            // `and` binds tighter than `or`.
            ("proc.name=test or proc.name=httpd and proc.pid=7", "01"),
            ("(proc.name=test or proc.name=httpd) and proc.pid=7", "00"),
            ("not (proc.name=test or proc.name=httpd)", "00"),
            ("not not proc.name=httpd", "10"),
            ("((((proc.pid=100))))", "10"),
            // An absent field is false for every operator; `not` negates that.
            ("blk.sector != 5", "01"),
            ("not blk.sector = 5", "11"),
            ("", "11"),
            ("   ", "11"),
        ],
    );
    assert!(Filter::parse("").unwrap().is_match_all());
    assert!(!Filter::parse("proc.pid=1").unwrap().is_match_all());
}

#[test]
fn evt_fields() {
    let failed = Event { ret: -2, nr: 257, path: "/nope".into(), fd: -1, fd_type: 0, ..sys() };
    let odd = Event { ret: -4000, nr: 1000, cpu: 3, ..sys() };
    let fork =
        Event { kind: 2, nr: 0, pid: 300, tid: 300, ret: 100, lat: 0, comm: "httpd".into(), ..Default::default() };
    let t = T::new(&[sys(), failed, odd, blk(), fork]);
    check(
        &t,
        &[
            ("evt.type = read", "10000"),
            ("evt.type = openat", "01000"),
            // A syscall name is the syscall only (as in sysdig); the block write and the process
            // event have their own names, as events print them.
            ("evt.type = write", "00000"),
            ("evt.type = block_write", "00010"),
            ("evt.type = fork", "00000"),
            ("evt.type = proc_fork", "00001"),
            ("evt.type in (openat, proc_fork, syscall_1000)", "01101"),
            ("evt.type startswith block_", "00010"),
            ("evt.type != read", "01111"),
            ("evt.type startswith open", "01000"),
            ("evt.type = syscall_1000", "00100"),
            ("evt.type glob 'syscall_*'", "00100"),
            ("evt.kind = syscall", "11100"),
            ("evt.kind in (block, proc)", "00011"),
            ("evt.kind != block", "11101"),
            ("evt.category = read", "10000"),
            ("evt.category = file-meta", "01000"),
            ("evt.category = block", "00010"),
            ("evt.category = proc", "00001"),
            ("evt.res = SUCCESS", "10000"),
            ("evt.res = ENOENT", "01000"),
            ("evt.res = E4000", "00100"),
            ("evt.res != SUCCESS", "01100"),
            ("evt.res in (ENOENT, E4000)", "01100"),
            ("evt.res startswith E", "01100"),
            ("evt.rawres = -2", "01000"),
            ("evt.rawres = ENOENT", "01000"),
            ("evt.rawres > 0", "10000"),
            ("evt.failed = true", "01100"),
            ("evt.failed", "01100"),
            ("evt.failed = false", "10000"),
            ("evt.failed != true", "10000"),
            ("evt.is_io = true", "10000"),
            ("evt.is_io = false", "01100"),
            ("evt.is_io_read = true", "10000"),
            ("evt.is_io_write = true", "00000"),
            ("evt.is_io_write = false", "11100"),
            ("evt.latency exists", "11110"),
            ("evt.buflen exists", "11110"),
            ("evt.time = 1005000", "11100"),
            ("evt.time > 1005000", "00010"),
            ("evt.time < 1001000", "00001"),
            ("evt.reltime = 4us", "11100"),
            ("evt.reltime < 0", "00001"),
            ("evt.cpu = 3", "00100"),
            ("evt.cpu in (0, 1)", "11011"),
            // Dates and times: the header's clock offset is 1 ms, the syscalls start 5 us later.
            ("evt.time = 1970-01-01T00:00:00.001005Z", "11100"),
            ("evt.time = '1970-01-01 00:00:00.001005'", "11100"),
            ("evt.time > 1970-01-01T01:00:00.001005+01:00", "00010"),
            ("evt.time >= 1970-01-01", "11111"),
            ("evt.time < 1969-12-31T23:59:00.001-00:01", "00000"),
            ("evt.time <= 1969-12-31T23:59:00.001-00:01", "00001"),
            ("evt.datetime < 1970-01-01T00:00:00.001001Z", "00001"),
            ("evt.datetime in (1970-01-01T00:00:00.001009Z, 1005000)", "11110"),
            ("evt.datetime exists", "11111"),
        ],
    );
}

#[test]
fn kernel_internal_errnos_by_name() {
    let restart = Event { ret: -514, nr: 7, ..sys() };
    let notsupp = Event { ret: -524, nr: 16, ..sys() };
    let t = T::new(&[restart, notsupp, sys()]);
    check(
        &t,
        &[
            ("evt.res = ERESTARTNOHAND", "100"),
            ("evt.res in (ENOTSUPP, ERESTARTSYS)", "010"),
            ("evt.rawres = ERESTARTNOHAND", "100"),
            ("evt.rawres = -524", "010"),
            ("evt.failed", "110"),
        ],
    );
    let res = fields().iter().find(|f| f.name == "evt.res").unwrap();
    assert_eq!(res.value(&t.b, 0, &t.ctx).as_deref(), Some("ERESTARTNOHAND"));
    assert_eq!(
        err("evt.res = ERESTARTNOHANDD"),
        "unknown result 'ERESTARTNOHANDD' at column 11; did you mean ERESTARTNOHAND?"
    );
}

#[test]
fn proc_user_container_fields() {
    let unknown =
        Event { pid: 999, uid: 5, cgroup: 0, comm: "a-very-long-process-name".chars().take(15).collect(), ..sys() };
    let t = T::new(&[sys(), blk(), unknown]);
    check(
        &t,
        &[
            ("proc.name = httpd", "100"),
            ("proc.name = a-very-long-process-name", "001"),
            ("proc.name in (a-very-long-process-name, test)", "011"),
            ("proc.pid = 100", "100"),
            ("proc.ppid = 1", "100"),
            ("proc.ppid = 100", "010"),
            ("proc.ppid exists", "110"),
            ("proc.exe = /usr/sbin/httpd", "100"),
            ("proc.exe pmatch (/opt/test)", "010"),
            ("proc.exe exists", "110"),
            ("thread.tid = 101", "101"),
            ("thread.tid != 101", "010"),
            ("user.uid = 1000", "100"),
            ("user.name = alice", "100"),
            ("user.name = root", "010"),
            ("user.name exists", "110"),
            ("container.id = host", "101"),
            ("container.id = 1a2b3c4d5e6f", "010"),
            ("container.id = 1a2b", "000"),
            ("container.id != host", "010"),
            ("container.id in (host, 1a2b3c4d5e6f)", "111"),
            ("container.id startswith 1a", "010"),
            ("container.id = 1A2B3C4D5E6F", "000"),
            ("container.name = web", "010"),
            ("container.name = host", "101"),
            ("container.type = docker", "010"),
            ("container.image.repository = nginx and container.image.tag = 1.27", "010"),
            ("cgroup.id = 6699", "010"),
            ("cgroup.path = /", "101"),
            ("cgroup.path startswith /system.slice/docker-", "010"),
            ("container.image.tag = 1.27", "010"),
            ("container.image = nginx:1.27", "010"),
            ("container.full_id = host", "101"),
            ("k8s.pod.name exists", "000"),
            ("k8s.ns.name exists", "000"),
            ("k8s.pod.uid exists", "000"),
        ],
    );
    // A full id compares as its short id, in every form that lists values.
    check(
        &t,
        &[
            (&format!("container.id = {CONTAINER}"), "010"),
            (&format!("container.id in (host, {CONTAINER})"), "111"),
            (&format!("container.full_id = {CONTAINER}"), "010"),
        ],
    );
}

/// `proc.cmdline` (command name and arguments) and `proc.args`: from the start snapshot, inherited
/// at fork, replaced at exec (the exec event's name and argv).
#[test]
fn task_identity_fields() {
    // httpd: gid 1000, logged in as 1000, on /dev/pts/1, in a pid namespace (vpid 7, vtid 8);
    // the block event's issuer: root, no login uid, no tty, the initial namespace; the third
    // from a trace recorded before the columns existed (vpid, vtid 0: absent).
    let a = Event { gid: 1000, loginuid: 1000, tty: 34817, vpid: 7, vtid: 8, ..sys() };
    let b = Event { gid: 0, loginuid: u32::MAX, tty: 0, vpid: 200, vtid: 200, ..blk() };
    let c = Event { gid: 5, loginuid: u32::MAX, ..sys() };
    let t = T::new(&[a, b, c]);
    check(
        &t,
        &[
            ("proc.tty = 34817", "100"),
            ("proc.tty = 0", "011"),
            ("proc.tty != 0", "100"),
            ("user.loginuid = 1000", "100"),
            ("user.loginuid = -1", "011"),
            ("user.loginuid < 0", "011"),
            ("group.gid = 1000", "100"),
            ("group.gid in (0, 5)", "011"),
            ("group.name = staff", "100"),
            ("group.name = root", "010"),
            ("group.name exists", "110"),
            ("proc.vpid = 7", "100"),
            ("thread.vtid = 8", "100"),
            ("proc.vpid = val(proc.pid)", "010"),
            ("proc.vpid exists", "110"),
            ("thread.vtid exists", "110"),
        ],
    );
    let get = |name: &str, row| fields().iter().find(|f| f.name == name).unwrap().value(&t.b, row, &t.ctx);
    assert_eq!(get("user.loginuid", 1).as_deref(), Some("-1"));
    assert_eq!(get("group.name", 0).as_deref(), Some("staff"));
    assert_eq!(get("proc.vpid", 2), None);
}

/// The idle rule and the lock a call waited for (record --why): a futex wait a thread of the
/// recording ended, with its address and owner; an flock; a poll its timeout ended; a block event
/// (neither); a call recorded without attribution (idle by its syscall when a wait).
#[test]
fn wait_and_lock_fields() {
    use latscope_event::wake_flags::{KNOWN, TRACED};
    let nr = |n: &str| latscope_event::syscall_nr(n).unwrap();
    let fx = Event {
        nr: nr("futex"),
        lat: 1000,
        why_lock: 1000,
        waker_ctx: 1,
        wake_flags: KNOWN | TRACED,
        lock_kind: 1,
        lock_addr: 0x7f00_1000,
        lock_owner: 42,
        ..sys()
    };
    let fl =
        Event { nr: nr("flock"), lat: 1000, why_lock: 1000, waker_ctx: 1, wake_flags: KNOWN, lock_kind: 2, ..sys() };
    let poll = Event { nr: nr("poll"), lat: 1000, why_timer: 1000, waker_ctx: 2, wake_flags: KNOWN, ..sys() };
    let old = Event { nr: nr("epoll_wait"), lat: 1000, ..sys() };
    let t = T::new(&[fx, fl, poll, blk(), old]);
    check(
        &t,
        &[
            ("evt.wait = on_someone", "10000"),
            ("evt.wait = idle_outside", "01000"),
            ("evt.wait = idle_timeout", "00100"),
            ("evt.wait startswith idle", "01101"),
            ("evt.wait = idle_by_syscall", "00001"),
            ("evt.wait exists", "11101"),
            ("lock.kind = futex", "10000"),
            ("lock.kind in (futex, flock)", "11000"),
            ("lock.kind exists", "11000"),
            ("lock.addr = 2130710528", "10000"),
            ("lock.addr exists", "10000"),
            ("lock.owner = 42", "10000"),
            ("lock.owner exists", "10000"),
        ],
    );
}

#[test]
fn cmdline_fields() {
    let mut h = header();
    h.processes = vec![
        ProcessInfo {
            pid: 100,
            comm: "httpd".into(),
            cmdline: "/usr/sbin/httpd -DFOREGROUND -k start".into(),
            ..Default::default()
        },
        ProcessInfo { pid: 300, comm: "kworker/0:1".into(), ..Default::default() },
    ];
    let proc = |nr, pid, ret, comm: &str, path: &str, path2: &str| Event {
        kind: 2,
        nr,
        pid,
        tid: pid,
        ret,
        comm: comm.into(),
        path: path.into(),
        path2: path2.into(),
        ..Default::default()
    };
    let at = |pid| Event { pid, tid: pid, ..sys() };
    let events = [
        at(100),
        proc(0, 400, 100, "httpd", "", ""),
        proc(0, 401, 100, "httpd", "", ""),
        proc(1, 401, 0, "ls", "/usr/bin/ls", "ls -l '/tmp/a b'"),
        at(400),
        at(401),
        at(300),
        proc(1, 500, 0, "cat", "/usr/bin/cat", ""),
        at(999),
    ];
    let t = T::with_header(&events, &h);
    check(
        &t,
        &[
            // One batch: its process events apply before its events are tested (the fork of 401
            // sees the exec that follows it).
            ("proc.cmdline = 'httpd -DFOREGROUND -k start'", "110010000"),
            ("proc.args = '-DFOREGROUND -k start'", "110010000"),
            ("proc.args contains FOREGROUND", "110010000"),
            ("proc.cmdline = \"ls -l '/tmp/a b'\"", "001101000"),
            ("proc.args startswith -l", "001101000"),
            ("proc.cmdline = kworker/0:1", "000000100"),
            ("proc.args = ''", "000000100"),
            ("proc.args exists", "111111100"),
            ("proc.cmdline exists", "111111100"),
            ("not proc.cmdline exists", "000000011"),
        ],
    );
}

/// sysdig's per-syscall argument names and the argument string, as `latscope events` prints them.
#[test]
fn argument_fields() {
    let nr = |n: &str| latscope_event::syscall_nr(n).unwrap();
    let call = |name: &str| Event { nr: nr(name), fd: -1, fd_type: 0, path: String::new(), bytes: 0, off: -1, ..sys() };
    let events = [
        Event {
            dirfd: -100,
            path: "/tmp/x".into(),
            flags: 0o101,
            mode: 0o644,
            ret: 3,
            fd: 3,
            fd_type: 1,
            ..call("openat")
        },
        Event { fd: 3, fd_type: 1, path: "/data".into(), bytes: 4096, off: 8192, ret: 4096, ..call("pread64") },
        Event { fd: 4, off: 10, flags: 2, ret: 10, ..call("lseek") },
        Event { path: "/a".into(), path2: "/b c".into(), ret: -2, ..call("rename") },
        Event { fd: 5, bytes: 100, off: 7, ret: -514, ..call("read") },
        blk(),
        Event {
            kind: 2,
            nr: 1,
            pid: 300,
            tid: 300,
            ret: 0,
            path: "/usr/bin/ls".into(),
            comm: "ls".into(),
            ..Default::default()
        },
        Event { ret: 42, ..call("getpid") },
    ];
    let t = T::new(&events);
    check(
        &t,
        &[
            ("evt.arg.fd = 3", "01000000"),
            ("evt.arg.fd exists", "01101000"),
            ("evt.arg.fd in (4, 5)", "00101000"),
            ("evt.arg.size = 4KiB", "01000000"),
            ("evt.arg.size < 1k", "00001000"),
            ("evt.arg.name = /tmp/x", "10000000"),
            ("evt.arg.path startswith /tmp", "10000000"),
            ("evt.arg.name exists", "10010000"),
            ("evt.arg.oldpath = /a", "00010000"),
            ("evt.arg.newpath = '/b c'", "00010000"),
            ("evt.arg.newpath exists", "00010000"),
            ("evt.arg.flags contains O_CREAT", "10000000"),
            ("evt.arg.flags = O_WRONLY|O_CREAT", "10000000"),
            ("evt.arg.flags exists", "10000000"),
            ("evt.arg.mode = 0644", "10000000"),
            ("evt.arg.offset = 8192", "01000000"),
            ("evt.arg.pos >= 7", "01101000"),
            ("evt.arg.whence = SEEK_END", "00100000"),
            ("evt.arg.whence exists", "00100000"),
            ("evt.arg.dirfd = AT_FDCWD", "10000000"),
            ("evt.arg.dirfd = -100", "10000000"),
            ("evt.arg.res = 4096", "01000000"),
            ("evt.arg.res in (ENOENT, ERESTARTNOHAND)", "00011000"),
            ("evt.arg.res = 42", "00000001"),
            ("evt.args = 'fd=3(<file>/data) bytes=4096 off=8192'", "01000000"),
            ("evt.args contains 'flags=O_WRONLY|O_CREAT'", "10000000"),
            ("evt.args contains 'path2=/b c'", "00010000"),
            ("evt.args startswith 'dev=vda(253:0)'", "00000100"),
            ("evt.args = 'path=/usr/bin/ls'", "00000010"),
            ("evt.args = ''", "00000001"),
            ("evt.args exists", "11111111"),
        ],
    );
    let get = |name: &str, row| fields().iter().find(|f| f.name == name).unwrap().value(&t.b, row, &t.ctx);
    assert_eq!(
        get("evt.args", 0).as_deref(),
        Some("fd=3(<file>) dirfd=AT_FDCWD path=/tmp/x flags=O_WRONLY|O_CREAT mode=0644")
    );
    assert_eq!(get("evt.arg.res", 4).as_deref(), Some("ERESTARTNOHAND"));
    assert_eq!(get("evt.arg.flags", 2), None);
    assert!(err("evt.arg.dirfd = cwd").contains("expected an integer or AT_FDCWD"));
    assert_eq!(err("evt.arg.sise = 1"), "unknown field 'evt.arg.sise' at column 1; did you mean evt.arg.size?");
    // Long argument strings (here a long path) are compared whole.
    let long = format!("/{}", "d/".repeat(300));
    let t = T::new(&[Event { fd: 3, fd_type: 1, path: long.clone(), bytes: 1, off: 0, ..call("pread64") }]);
    check(&t, &[(&format!("evt.args = 'fd=3(<file>{long}) bytes=1 off=0'"), "1"), ("evt.args endswith 'off=0'", "1")]);
}

/// As sysdig: a failed call that creates an fd has its result as fd.num (libsinsp's
/// `signed_int_compare` test: an open returning -1 has `fd.num < 0`, not `fd.num < -1`).
#[test]
fn fd_num_of_a_failed_open_is_its_result() {
    let nr = |n: &str| latscope_event::syscall_nr(n).unwrap();
    let call = |name: &str| Event { nr: nr(name), fd: -1, fd_type: 0, path: String::new(), bytes: 0, off: -1, ..sys() };
    let failed = Event { fd: -1, fd_type: 0, ret: -1, path: "/tmp/the_file".into(), ..call("openat") };
    let enoent = Event { ret: -2, ..failed.clone() };
    let read_failed = Event { fd: 3, ret: -9, ..call("read") };
    let t = T::new(&[failed, enoent, read_failed]);
    check(
        &t,
        &[
            ("fd.num < 0", "110"),
            ("fd.num = -1", "100"),
            ("fd.num < -1", "010"),
            ("fd.num > -65535", "111"),
            ("fd.num = 3", "001"),
        ],
    );
}

#[test]
fn fd_fields() {
    let nofd = Event { fd: -1, fd_type: 0, path: String::new(), nr: 39, ..sys() };
    let sock = Event { fd: 5, fd_type: FdType::Ipv4 as u8, path: String::new(), ..sys() };
    let rel = Event { path: "x.txt".into(), fd_type: 200, ..sys() };
    let t = T::new(&[sys(), nofd, sock, rel, blk()]);
    check(
        &t,
        &[
            ("fd.num = 3", "10010"),
            ("fd.num exists", "10110"),
            ("fd.num > 4", "00100"),
            ("fd.num < 0", "00000"),
            ("fd.type = file", "10000"),
            ("fd.type in (file, ipv4)", "10100"),
            ("fd.type != file", "00110"),
            ("fd.type = unknown", "00010"),
            ("fd.type exists", "10110"),
            ("fd.name exists", "10010"),
            ("fd.name = x.txt", "00010"),
            ("fd.directory = /mnt/data", "10000"),
            ("fd.directory exists", "10000"),
            ("fd.filename = access.log", "10000"),
            ("fd.filename in (access.log, x.txt)", "10010"),
            ("fd.filename glob '*.txt'", "00010"),
            ("fd.directory pmatch (/mnt)", "10000"),
            // Files have no socket addresses.
            ("fd.sip exists", "00000"),
            ("not fd.sport exists", "11111"),
        ],
    );
}

/// Socket fields from names `local->peer`: which end is the server's comes from the listening
/// sockets of the start snapshot and the connect/accept calls seen, else from the ports.
#[test]
fn socket_fields() {
    let s =
        |nr: u16, fd_type: FdType, path: &str| Event { nr, fd: 5, fd_type: fd_type as u8, path: path.into(), ..sys() };
    let (read, connect, accept) = (0, 42, 43);
    let events = [
        // 0: the server end of a connection (lower port: the server's)
        s(read, FdType::Ipv4, "10.0.0.1:80->10.0.0.7:5120"),
        // 1: its client end
        s(read, FdType::Ipv4, "10.0.0.7:5120->10.0.0.1:80"),
        // 2: UDP, connected
        s(read, FdType::Ipv4, "udp:10.0.0.7:41000->10.0.0.53:53"),
        // 3: UDP, no peer: a server socket
        s(read, FdType::Ipv4, "udp:0.0.0.0:53"),
        // 4: IPv6 to a port the snapshot saw listening on any address: local is the server
        s(read, FdType::Ipv6, "[::1]:8080->[::1]:9"),
        // 5, 6: connect made 10.0.0.9:50000 a server address, though its port is the higher
        s(connect, FdType::Ipv4, "10.0.0.1:45000->10.0.0.9:50000"),
        s(read, FdType::Ipv4, "10.0.0.1:45000->10.0.0.9:50000"),
        // 7, 8: accept made 10.0.0.5:60000 one
        Event { ret: 6, ..s(accept, FdType::Ipv4, "10.0.0.5:60000->10.0.0.6:1000") },
        s(read, FdType::Ipv4, "10.0.0.5:60000->10.0.0.6:1000"),
        // 9: a unix socket; 10: an IPv4 socket without a name; 11: a file
        s(read, FdType::Unix, "socket:[77]"),
        s(read, FdType::Ipv4, "socket:[78]"),
        sys(),
    ];
    let mut h = header();
    h.fds.push(latscope_event::FdInfo {
        pid: 1,
        fd: 3,
        path: "[::]:8080".into(),
        fd_type: FdType::Ipv6 as u8,
        ..Default::default()
    });
    let t = T::with_header(&events, &h);
    check(
        &t,
        &[
            ("fd.sip = 10.0.0.1", "110000000000"),
            ("fd.sport = 80", "110000000000"),
            ("fd.cip = 10.0.0.7", "111000000000"),
            ("fd.cport = 5120", "110000000000"),
            ("fd.sport = 53", "001100000000"),
            ("fd.sip = 0.0.0.0", "000100000000"),
            ("fd.cip exists", "111011111000"),
            ("fd.sip exists", "111111111000"),
            ("fd.sport = 8080 and fd.sip = ::1", "000010000000"),
            ("fd.sip = 0:0:0:0:0:0:0:1", "000010000000"),
            ("fd.cport = 9", "000010000000"),
            ("fd.sport = 50000", "000001100000"),
            ("fd.cport = 45000", "000001100000"),
            ("fd.sport = 60000", "000000011000"),
            ("fd.cip = 10.0.0.6", "000000011000"),
            ("fd.sip in (10.0.0.9, 10.0.0.5)", "000001111000"),
            ("fd.sip startswith 10.0.0.", "111001111000"),
            ("fd.sip != 10.0.0.1", "001111111000"),
            // Local and remote, whatever the roles.
            ("fd.lip = 10.0.0.7", "011000000000"),
            ("fd.lport = 80", "100000000000"),
            ("fd.rip = 10.0.0.1", "010000000000"),
            ("fd.rport = 80", "010000000000"),
            ("fd.rport exists", "111011111000"),
            ("fd.lport exists", "111111111000"),
            ("fd.lip = ::1 and fd.rip = ::1", "000010000000"),
            // Either port; != is neither.
            ("fd.port = 80", "110000000000"),
            ("fd.port in (53, 9)", "001110000000"),
            ("fd.port != 80", "001111111000"),
            ("fd.port > 59999", "000000011000"),
            ("not fd.port = 80", "001111111111"),
            ("fd.port exists", "111111111000"),
            ("fd.l4proto = tcp", "110011111000"),
            ("fd.l4proto = udp", "001100000000"),
            ("fd.l4proto in (unix, udp)", "001100000100"),
            ("fd.l4proto exists", "111111111100"),
            ("fd.type = ipv6 and fd.l4proto = tcp", "000010000000"),
        ],
    );
    let get = |name: &str, row| fields().iter().find(|f| f.name == name).unwrap().value(&t.b, row, &t.ctx);
    assert_eq!(get("fd.port", 0).as_deref(), Some("80,5120"));
    assert_eq!(get("fd.port", 3).as_deref(), Some("53"));
    assert_eq!(get("fd.sip", 1).as_deref(), Some("10.0.0.1"));
    assert_eq!(get("fd.cport", 1).as_deref(), Some("5120"));
    assert_eq!(get("fd.l4proto", 2).as_deref(), Some("udp"));
    let roles = t.ctx.sock_roles(&latscope_event::parse_sock_name("10.0.0.7:5120->10.0.0.1:80").unwrap());
    assert!(!roles.local_is_server);
    assert_eq!((roles.server.port, roles.client.map(|c| c.port)), (80, Some(5120)));
    assert!(err("fd.sip = 10.0.0.300")
        .starts_with("bad IP address '10.0.0.300' at column 10: fd.sip takes an IPv4 or IPv6 address"));
    assert_eq!(err("fd.l4proto = tpc"), "unknown protocol 'tpc' at column 14; did you mean tcp?");
}

#[test]
fn block_fields() {
    let other_dev = Event { dev: (8 << 20) | 1, nr: 0, lat: 500, ..blk() };
    let flush = Event { nr: 2, bytes: 0, ..blk() };
    let zone = Event { nr: 77, ..blk() };
    let t = T::new(&[sys(), blk(), other_dev, flush, zone]);
    check(
        &t,
        &[
            ("blk.dev = 253:0", "01011"),
            ("blk.dev = 8:1", "00100"),
            ("blk.dev in (8:1, 253:0)", "01111"),
            ("blk.dev != 8:1", "01011"),
            ("blk.dev startswith 253", "01011"),
            ("blk.disk = vda", "01011"),
            ("blk.disk exists", "01011"),
            ("blk.disk in (vda, sdb)", "01011"),
            ("blk.op = write", "01000"),
            ("blk.op = read", "00100"),
            ("blk.op in (flush, other)", "00011"),
            ("blk.op != write", "00111"),
            ("evt.type = write", "00000"),
            ("evt.type = block_write", "01000"),
            ("evt.type = block_other", "00001"),
            ("blk.sector = 2048", "01111"),
            ("blk.bytes >= 64KiB", "01101"),
            ("blk.bytes exists", "01111"),
            ("blk.latency > 1ms", "01011"),
            ("blk.latency < 1us", "00100"),
            ("blk.qtime = 50us", "01111"),
            ("evt.buflen = 0", "00010"),
            ("evt.latency > 1ms", "11011"),
            // Syscall-only fields are absent on block events.
            ("evt.failed = false", "10000"),
            ("fd.type exists", "10000"),
        ],
    );
}

#[test]
fn every_field_is_tested_somewhere() {
    let here = include_str!("filters.rs");
    for f in fields() {
        assert!(
            here.matches(&format!("\"{} ", f.name)).count()
                + here.matches(&format!("({} ", f.name)).count()
                + here.matches(&format!("\"{}[", f.name)).count()
                + here.matches(&format!("\"{}.", f.name)).count()
                > 0,
            "{}",
            f.name
        );
        let with_arg = match f.name {
            "evt.arg" => "evt.arg[0]".to_string(),
            "evt.rawarg" => "evt.rawarg.fd".to_string(),
            n => n.to_string(),
        };
        let _ = Filter::parse(&format!("{with_arg} exists")).unwrap();
    }
}

#[test]
fn field_listing_and_values() {
    let list = fields();
    assert!(list.len() >= 36);
    let lat = list.iter().find(|f| f.name == "evt.latency").unwrap();
    assert_eq!(lat.ty, FieldType::Duration);
    assert_eq!(lat.ty.name(), "duration");
    let t = T::new(&[sys(), blk()]);
    let get = |name: &str, row| list.iter().find(|f| f.name == name).unwrap().value(&t.b, row, &t.ctx);
    assert_eq!(get("evt.type", 0).as_deref(), Some("read"));
    assert_eq!(get("evt.latency", 0).as_deref(), Some("2000000"));
    assert_eq!(get("evt.is_io", 0).as_deref(), Some("true"));
    assert_eq!(get("blk.dev", 1).as_deref(), Some("253:0"));
    assert_eq!(get("container.id", 1).as_deref(), Some("1a2b3c4d5e6f"));
    assert_eq!(get("blk.dev", 0), None);
    assert_eq!(get("evt.time", 0).as_deref(), Some("1005000"));
    assert_eq!(get("evt.datetime", 0).as_deref(), Some("1970-01-01T00:00:00.001005000Z"));
}

#[test]
fn keywords_ignore_case_and_spacing() {
    let t = T::new(&[sys()]);
    for f in [
        "proc.name=httpd AND fd.type=file",
        "proc.name = httpd aNd  fd.type   =   file",
        "PROC.NAME=httpd",
        "fd.name CONTAINS /mnt",
        "proc.pid IN (100)",
        "fd.name PMATCH (/mnt)",
        "proc.name Exists",
        "evt.is_io_write=FALSE",
        "\tproc.name=httpd\n",
    ] {
        assert!(t.m(f, 0), "{f}");
    }
}

#[test]
fn errors_point_at_the_place() {
    let e = Filter::parse("proc.nme=httpd").unwrap_err();
    assert_eq!(e.message(), "unknown field 'proc.nme' at column 1; did you mean proc.name?");
    assert_eq!(
        e.to_string(),
        "unknown field 'proc.nme' at column 1; did you mean proc.name?\n  proc.nme=httpd\n  ^^^^^^^^"
    );
    assert_eq!(e.column(), 1);

    let e = Filter::parse("evt.latency contains x").unwrap_err();
    assert_eq!(e.message(), "operator 'contains' needs a string field; evt.latency is a duration");
    assert_eq!(e.to_string().lines().nth(2), Some("              ^^^^^^^^"));

    assert!(err("evt.latency > 5 parsecs")
        .starts_with("bad value '5 parsecs' for evt.latency at column 15: unknown duration unit 'parsecs'"));
    assert!(err("evt.buflen > 4 KiBs").contains("unknown size unit"));
    assert_eq!(err("fd.type = fiel"), "unknown fd type 'fiel' at column 11; did you mean file?");
    assert_eq!(err("fd.type in (file, pipe, sockt)"), "unknown fd type 'sockt' at column 25; did you mean socket?");
    assert_eq!(err("evt.type = opneat"), "unknown event type 'opneat' at column 12; did you mean openat?");
    assert_eq!(err("evt.res = ENOENTT"), "unknown result 'ENOENTT' at column 11; did you mean ENOENT?");
    assert!(err("blk.op = wirte").ends_with("did you mean write?"));
    assert!(err("evt.kind = blok").ends_with("did you mean block?"));
    assert!(err("blk.dev = vda").contains("use blk.disk for names"));
    assert!(err("evt.category = nett").ends_with("did you mean net?"));
    assert_eq!(err("(proc.pid = 1"), "unbalanced parentheses: '(' at column 1 is never closed");
    assert_eq!(err("proc.pid = 1)"), "unbalanced parentheses: ')' at column 13 has no matching '('");
    assert!(err("(proc.pid = 1 proc.pid = 2)")
        .starts_with("unexpected 'proc.pid' at column 15; expected 'and', 'or' or ')'"));
    assert_eq!(err("()"), "empty parentheses at column 1");
    assert!(err("proc.pid = 1 and").starts_with("expected a field name at column 17, found end of filter"));
    assert!(err("and proc.pid = 1").starts_with("expected a field name at column 1, found 'and'"));
    assert!(err("proc.name =").starts_with("missing value after '=' at column 11"));
    assert!(err("proc.name = and proc.pid = 1").starts_with("missing value after '='"));
    assert!(err("proc.name = (a, b)").contains("lists take 'in (a, b)'"));
    assert!(err("proc.name httpd").starts_with("expected an operator after proc.name at column 11, found 'httpd'"));
    assert!(err("proc.name in httpd").starts_with("expected '(' after 'in'"));
    assert!(err("proc.name in (a,)").starts_with("a value is missing before ')'"));
    assert!(err("proc.name in (,a)").starts_with("a value is missing before ','"));
    assert!(err("proc.name in (a, b").contains("never closed"));
    assert!(err("proc.name = my app").contains("quote values that contain spaces"));
    assert!(err("proc.name = 'httpd").starts_with("unterminated string starting at column 13"));
    assert_eq!(err("evt.failed < 1"), "operator '<' needs a number or a string; evt.failed is a boolean");
    assert_eq!(err("proc.pid contains 1"), "operator 'contains' needs a string field; proc.pid is a number");
    assert!(err("evt.failed = maybe").contains("expected true or false"));
    assert!(err("proc.pid = abc").contains("expected an integer"));
    assert!(err("evt.time > 2026-13-22T22:30:13Z").starts_with(
        "bad value '2026-13-22T22:30:13Z' for evt.time at column 12: '2026-13-22T22:30:13Z' is not a valid date and time; write RFC 3339"
    ));
    assert!(err("evt.time > yesterday").contains("a time is ns since the Unix epoch or a date and time"));
    assert!(err("evt.time > 2026-11-22 22:30:13").contains("quote values that contain spaces"));
    assert!(err("proc.pid = 99999999999999999999999").contains("out of range"));
    // A duration past what 64 bits of nanoseconds hold is refused like an out-of-range pid.
    assert!(err("evt.latency > 18446744073709551615s").contains("out of range (at most about 584 years)"));
    assert!(err("evt.latency > 18446744073709551616ns").contains("out of range"));
    assert!(err("proc.name[1] = x").starts_with("field proc.name takes no argument"));
    assert!(err("httpd").starts_with("unknown field 'httpd'"));
    // Quotes around the whole filter (the shell's job) and typographic quotes pasted from a blog post.
    assert!(err("'proc.name=httpd'").contains("drop the quotes around the whole filter"));
    assert!(err("\u{201c}proc.name=httpd and fd.type=file\u{201d}").contains("typographic quotes"));
    assert!(err("proc.name == 'a' or").starts_with("expected a field name"));
    let deep = format!("{}proc.pid=1{}", "(".repeat(500), ")".repeat(500));
    assert!(err(&deep).contains("nested too deeply"));
    let nots = format!("{}proc.pid=1", "not ".repeat(500));
    assert!(err(&nots).contains("nested too deeply"));
}

#[test]
fn needs_kinds() {
    let k = |f: &str| Filter::parse(f).unwrap().needs_kinds();
    let sys = KindSet { syscall: true, block: false, proc: false };
    let blk = KindSet { syscall: false, block: true, proc: false };
    assert_eq!(k(""), KindSet::ALL);
    assert_eq!(k("proc.name=httpd"), KindSet::ALL);
    assert_eq!(k("proc.name=httpd and fd.type=file"), sys);
    assert_eq!(k("evt.latency > 1ms"), KindSet { syscall: true, block: true, proc: false });
    assert_eq!(k("blk.disk = vda"), blk);
    assert_eq!(k("evt.type = openat"), sys);
    assert_eq!(k("evt.type = read"), sys);
    assert_eq!(k("evt.type = block_read"), blk);
    assert_eq!(k("evt.type = proc_exec"), KindSet { syscall: false, block: false, proc: true });
    assert!(err("evt.type = exec").contains("did you mean proc_exec?"));
    assert!(err("evt.type = flush").contains("did you mean block_flush?"));
    assert_eq!(k("evt.kind = block or fd.type = file"), KindSet { syscall: true, block: true, proc: false });
    assert_eq!(k("not evt.kind = block"), KindSet { syscall: true, block: false, proc: true });
    assert_eq!(k("not fd.type = file"), KindSet::ALL);
    assert_eq!(k("fd.sip = 1.2.3.4"), sys);
}

/// The rest of libsinsp's language: transformers, val(), list modifiers, regex, iglob,
/// intersects, indexed fields, empty lists, escapes; and the refusals (NUL bytes, byte-buffer
/// operators on text, modifiers without their spaces).
#[test]
fn libsinsp_language() {
    let h = TraceHeader {
        processes: vec![
            ProcessInfo { pid: 1, ppid: 0, comm: "systemd".into(), exe: "/sbin/init".into(), ..Default::default() },
            ProcessInfo {
                pid: 50,
                ppid: 1,
                comm: "bash".into(),
                exe: "/usr/bin/bash".into(),
                cmdline: "bash -l".into(),
                ..Default::default()
            },
            ProcessInfo {
                pid: 100,
                ppid: 50,
                comm: "httpd".into(),
                exe: "/usr/sbin/httpd".into(),
                ..Default::default()
            },
        ],
        ..header()
    };
    let tcp = Event {
        nr: 44, // sendto
        fd_type: FdType::Ipv4 as u8,
        path: "10.0.0.1:80->192.168.1.7:5120".into(),
        ..sys()
    };
    let open = Event {
        nr: 257, // openat
        path: "/etc/Hosts".into(),
        flags: 0o101, // O_WRONLY|O_CREAT
        mode: 0o644,
        dirfd: -100,
        ..sys()
    };
    let t = T::with_header(&[sys(), tcp, open, blk()], &h);
    check(
        &t,
        &[
            // Transformers.
            ("tolower(fd.name) = /etc/hosts", "0010"),
            ("toupper(proc.name) = HTTPD", "1110"),
            ("basename(fd.name) = access.log", "1000"),
            ("len(fd.name) = 10", "0010"),
            ("len(fd.name) > 10", "1100"),
            ("concat(proc.name, \"-\", fd.filename) = httpd-Hosts", "0010"),
            ("join(\"->\", (proc.name, fd.filename)) = httpd->access.log", "1000"),
            ("b64(concat(\"aHR0\", \"cGQ=\")) = httpd", "1111"),
            ("toupper(tolower(proc.name)) = TEST", "0001"),
            // A transformer yields a value without some of its fields.
            ("join(\"-\", (fd.name, proc.name)) = test", "0001"),
            // val(): a field against another.
            ("proc.name = val(proc.name)", "1111"),
            ("fd.filename = val(proc.name)", "0000"),
            ("evt.buflen = val(evt.arg.size)", "1100"),
            ("proc.pid > val(thread.tid)", "0000"),
            // Modifiers.
            ("proc.name == oneof (httpd, bash)", "1110"),
            ("proc.name == oneof (httpd, httpd)", "0000"),
            ("proc.name == anyof (bash, test)", "0001"),
            ("proc.name != allof (bash, sh)", "1111"),
            // An empty list: no modifier holds for it (as in libsinsp; `allof ()` is not vacuously true).
            ("proc.name == allof ()", "0000"),
            ("proc.name != allof ()", "0000"),
            ("proc.name == anyof ()", "0000"),
            ("proc.name != oneof ()", "0000"),
            ("fd.name contains allof (/mnt, access)", "1000"),
            ("fd.name startswith anyof (/etc, /var)", "0010"),
            // regex (whole value), iglob, intersects, ordering on strings, in on booleans.
            ("proc.name regex 'h.*d'", "1110"),
            ("proc.name regex 'tt'", "0000"),
            ("fd.name iglob '/ETC/h*'", "0010"),
            ("proc.name intersects (httpd, x)", "1110"),
            ("proc.name < i", "1110"),
            ("proc.name >= test", "0001"),
            ("evt.is_io in (true)", "1100"),
            // Empty lists match nothing.
            ("proc.name in ()", "0000"),
            ("proc.pid intersects ()", "0000"),
            // Ancestry and the parent.
            ("proc.aname[0] = httpd", "1110"),
            ("proc.aname[1] = bash", "1110"),
            ("proc.aname[2] = systemd", "1110"),
            ("proc.aname = systemd", "1110"),
            ("proc.aname = httpd", "0000"),
            ("proc.apid[1] = 50", "1110"),
            ("proc.apid = 1", "1110"),
            ("proc.pname = bash", "1110"),
            ("proc.pexe = /usr/bin/bash", "1110"),
            ("proc.pcmdline = 'bash -l'", "1110"),
            ("proc.exepath = /usr/sbin/httpd", "1110"),
            // Arguments by index and raw.
            ("evt.arg[0] startswith 3", "1110"),
            ("evt.arg[fd] startswith 3", "1110"),
            ("evt.rawarg.size = 4096", "1100"),
            ("evt.rawarg.flags = 65", "0010"),
            ("evt.rawarg.mode = 420", "0010"),
            ("evt.rawarg.dirfd = -100", "0010"),
            ("evt.rawarg.res = 4096", "1110"),
            // Sockets.
            ("fd.ip = 192.168.1.7", "0100"),
            ("fd.ip = 10.0.0.1", "0100"),
            ("fd.ip != 10.0.0.1", "0000"),
            ("fd.net = 192.168.0.0/16", "0100"),
            ("fd.net in (172.16.0.0/12, 10.0.0.0/8)", "0100"),
            ("fd.snet = 10.0.0.0/8", "0100"),
            ("fd.cnet = 192.168.1.0/24", "0100"),
            ("fd.cnet = 10.0.0.0/8", "0000"),
            ("fd.connected = true", "0100"),
            ("fd.typechar = f", "1010"),
            ("fd.typechar = 4", "0100"),
            // Event fields.
            ("evt.num = 2", "0100"),
            ("evt.num > 2", "0011"),
            ("evt.rawtime = val(evt.time)", "1111"),
            ("evt.dir = '<'", "1111"),
            ("evt.source = syscall", "1111"),
            ("evt.latency.ns = 2000000", "1110"),
            ("evt.latency.s = 0", "1111"),
            ("evt.latency.human = 2.00ms", "1110"),
            ("evt.is_wait = false", "1110"),
            ("fs.path.name = /etc/Hosts", "0010"),
            ("fs.path.nameraw exists", "0010"),
            ("fs.path.source exists", "0000"),
            ("fs.path.sourceraw exists", "0000"),
            ("fs.path.target exists", "0000"),
            ("fs.path.targetraw exists", "0000"),
            // Escapes.
            ("proc.name = \"\\x68ttpd\"", "1110"),
            ("proc.name = 'h\\x74tpd'", "1110"),
        ],
    );
    assert!(err("proc.name = \"\\x00\"").starts_with("NUL byte in a string at column 14"));
    assert!(err("proc.name contains 'a\\0'").starts_with("NUL byte in a string"));
    assert!(err("fd.name bcontains 303000").starts_with("operator 'bcontains' needs a byte-buffer field"));
    assert!(err("fd.ip contains 10.0").starts_with("operator 'contains' needs a string field; fd.ip is an address"));
    assert!(err("fd.net = 10.0.0.0/33").contains("expected a network"));
    assert!(err("proc.name ==oneof (a, b)").starts_with("white space must surround the list modifier"));
    assert!(err("proc.name == oneof(a, b)").starts_with("white space must surround the list modifier"));
    assert!(err("proc.pid > oneof (1, 2)").contains("takes no 'oneof' list modifier"));
    assert!(err("val(proc.name) exists").starts_with("val() at column 1 compares with a field"));
    assert!(err("proc.name = val(tolower(proc.name))").contains("not a transformer"));
    assert!(err("proc.pid = val(proc.name)")
        .starts_with("cannot compare proc.pid, a number, with val(proc.name), a string"));
    assert!(
        err("nosuch(proc.name) exists").starts_with("expected an operator after nosuch")
            || err("nosuch(proc.name) exists").starts_with("unknown field")
    );
    assert!(err("getopt(proc.args) exists").starts_with("unknown transformer 'getopt'"));
    let e = err("proc.name regex '('");
    assert!(e.starts_with("bad regular expression at column 17"), "{e}");
    assert!(err("proc.aname[x] = a").contains("takes a number in brackets"));
    assert!(err("evt.rawarg.data = a").contains("latscope records the arguments"));
    assert!(err("evt.arg exists").contains("takes an argument"));
    let f = Filter::parse("join(\"-\", (fd.name, proc.name)) = test").unwrap();
    assert!(f.needs_kinds().block, "{:?}", f.needs_kinds());
    // Nothing new reaches the kernel.
    let f =
        Filter::parse("proc.name == anyof (httpd) and tolower(proc.name) = httpd and proc.aname[1] = bash").unwrap();
    assert!(f.pushdown().kernel_clauses().next().is_none(), "{}", f.explain());
}

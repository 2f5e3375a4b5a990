//! Ground truth for `latscope record`: a workload doing exactly known operations is recorded,
//! and the trace must hold exactly those events with the right paths, sizes, offsets, results
//! and latencies, and the right block requests on a loop device.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// `latscope record -w trace ARGS...` in the background, its output captured.
fn spawn_recorder(trace: &Path, args: &[&str]) -> Child {
    Command::new(bin())
        .args(["record", "-w"])
        .arg(trace)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait until the recorders have attached their probes (at least the six of a `--no-block`
/// recording: sched_switch, sys_enter, sys_exit, fork, exec, exit), seen as BPF link fds. A fixed
/// sleep was not enough on a loaded machine, where loading the programs can take seconds.
fn wait_attached(recorders: &[&Child]) {
    let links = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy() == "anon_inode:bpf_link")
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    for _ in 0..1200 {
        if recorders.iter().all(|c| links(c.id()) >= 6) {
            std::thread::sleep(std::time::Duration::from_millis(300));
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the recorders did not attach within 60 s");
}

/// Stop a recorder as Ctrl-C would and return its output; it must have succeeded.
fn stop_recorder(rec: Child) -> Output {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let o = rec.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

const N: usize = 20;

fn of_type<'a>(ev: &'a [Value], pid: u64, types: &[&str]) -> Vec<&'a Value> {
    ev.iter().filter(|e| e["pid"] == pid && types.contains(&e["type"].as_str().unwrap_or(""))).collect()
}

#[test]
fn record_ground_truth() {
    if !require_bpf("record_ground_truth") || !require_tool("record_ground_truth", "mkfs.ext4") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = compile_c("workload.c", tmp.path());
    let lfs = LoopFs::new("ext4", 64);
    let dir = tmp.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    let trace = tmp.path().join("t.lst");
    let summary_file = tmp.path().join("summary.json");
    let summary = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .arg("--quiet")
        .arg(format!("--json={}", summary_file.display()))
        .arg("--")
        .arg(&work)
        .arg(&dir)
        .arg(&lfs.mnt)
        .arg(N.to_string())
        .output()
        .unwrap();
    assert!(summary.status.success(), "record failed: {}", String::from_utf8_lossy(&summary.stderr));
    let s: Value = serde_json::from_slice(&std::fs::read(&summary_file).unwrap()).expect("summary is JSON");
    assert_eq!(s["lost"], 0, "no event may be lost: {s}");
    assert_eq!(s["command_status"], 0, "workload failed: {s}");
    // The flush machinery's completions without data (fsync on the loop device's ext4) are
    // counted as such, not as completions without an issue.
    assert!(s["block_flush_ends"].as_u64().unwrap() >= 1, "{s}");

    let ev = json_lines(&latscope_ok(&["events", "-r", trace.to_str().unwrap(), "--json"]));
    // Syscalls and the other kinds are written in separate blocks (readers skip kinds by block).
    let mut reader = latscope_trace::TraceReader::open(&trace).unwrap();
    let mut kinds_seen = std::collections::BTreeSet::new();
    while let Some(b) = reader.next_batch() {
        let b = b.unwrap();
        let syscalls = b.kind.iter().filter(|&&k| k == 0).count();
        assert!(syscalls == 0 || syscalls == b.len(), "a block mixes syscalls with other kinds");
        kinds_seen.extend(b.kind.iter().copied());
    }
    assert!(kinds_seen.len() >= 2, "syscall and block events recorded: {kinds_seen:?}");
    // The workload is the process that exec'd our helper.
    let exec = ev
        .iter()
        .find(|e| e["type"] == "proc_exec" && e["path"].as_str().unwrap_or("").ends_with("/workload"))
        .expect("exec of the workload recorded");
    let pid = exec["pid"].as_u64().unwrap();
    let data = dir.join("data").to_string_lossy().into_owned();
    let renamed = dir.join("renamed").to_string_lossy().into_owned();
    let on = |types: &[&str], path: &str| -> Vec<&Value> {
        let mut v: Vec<&Value> = of_type(&ev, pid, types).into_iter().filter(|e| e["path"] == path).collect();
        v.sort_by_key(|e| e["ts_ns"].as_u64());
        v
    };

    let opens = on(&["openat"], &data);
    assert_eq!(opens.len(), N, "openat of {data}");
    for o in &opens {
        assert!(o["ret"].as_i64().unwrap() >= 3);
        assert_eq!(o["flags"].as_u64().unwrap() & 0o303, 0o102, "O_CREAT|O_RDWR"); // access mode + O_CREAT
        assert_eq!(o["mode"], 0o640);
        assert_eq!(o["dirfd"], -100);
        assert_eq!(o["fd_type"], "file");
    }
    let pw = on(&["pwrite64"], &data);
    assert_eq!(pw.len(), N, "pwrite64 on {data}");
    for (i, e) in pw.iter().enumerate() {
        assert_eq!(
            (e["bytes"].as_u64(), e["offset"].as_i64(), e["ret"].as_i64()),
            (Some(4096), Some(i as i64 * 4096), Some(4096))
        );
        assert_eq!(e["fd"], opens[i]["ret"], "pwrite uses the fd openat returned");
    }
    let pr = on(&["pread64"], &data);
    assert_eq!(pr.len(), N);
    for (i, e) in pr.iter().enumerate() {
        let want = 1000 + i as i64;
        assert_eq!((e["bytes"].as_i64(), e["offset"].as_i64(), e["ret"].as_i64()), (Some(want), Some(0), Some(want)));
    }
    assert_eq!(on(&["fsync"], &data).len(), N, "fsync, named by the fd's inode");
    assert_eq!(on(&["close"], &data).len(), N);
    let rn = on(&["rename"], &data);
    assert_eq!(rn.len(), 1);
    assert_eq!(rn[0]["path2"], renamed.as_str());
    assert_eq!(rn[0]["ret"], 0);
    // Arguments named as strace names them: fcntl's command (its struct flock pointer left out),
    // fadvise's advice, futex's word and operation.
    let lock = on(&["fcntl"], &renamed);
    assert_eq!(lock.len(), 1, "one fcntl on {renamed}");
    assert_eq!(lock[0]["args"]["cmd"], "F_SETLK", "{}", lock[0]);
    assert!(lock[0]["args"].get("arg").is_none(), "the struct flock pointer is left out: {}", lock[0]);
    let adv = on(&["fadvise64"], &renamed);
    assert_eq!(adv.len(), 1, "one fadvise64 on {renamed}");
    assert_eq!(adv[0]["args"]["advice"], "POSIX_FADV_DONTNEED", "{}", adv[0]);
    let word = std::fs::read_to_string(dir.join("futex_addr")).unwrap();
    let fx: Vec<&Value> =
        of_type(&ev, pid, &["futex"]).into_iter().filter(|e| e["args"]["uaddr"] == word.as_str()).collect();
    assert_eq!(fx.len(), 1, "one futex on the word at {word}");
    assert_eq!(
        (fx[0]["args"]["op"].as_str(), fx[0]["ret"].as_i64()),
        (Some("FUTEX_WAIT_PRIVATE"), Some(-11)),
        "{}",
        fx[0]
    );
    let sub = dir.join("sub").to_string_lossy().into_owned();
    let mk = on(&["mkdir"], &sub);
    assert_eq!(mk.len(), 1);
    assert_eq!(mk[0]["mode"], 0o750);
    assert_eq!(on(&["rmdir"], &sub).len(), 1);

    // Sleeps: glibc's nanosleep() is the clock_nanosleep syscall.
    let mut sleeps = of_type(&ev, pid, &["nanosleep", "clock_nanosleep"]);
    sleeps.sort_by_key(|e| e["ts_ns"].as_u64());
    assert_eq!(sleeps.len(), 10, "ten sleeps");
    for (i, e) in sleeps.iter().enumerate() {
        let want = if i < 5 { 10_000_000.0 } else { 1_000_000.0 };
        let lat = e["latency_ns"].as_f64().unwrap();
        assert!(lat >= want, "sleep {i}: {lat} ns < {want} ns requested");
    }
    let mut ten: Vec<f64> = sleeps[..5].iter().map(|e| e["latency_ns"].as_f64().unwrap()).collect();
    ten.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert!(ten[2] < 10_000_000.0 * 1.05, "median 10 ms sleep measured {} ns (more than 5% off)", ten[2]);

    // O_DIRECT writes on the loop device's ext4, and the block requests they caused.
    let direct = lfs.mnt.join("direct").to_string_lossy().into_owned();
    let dw = on(&["pwrite64"], &direct);
    assert_eq!(dw.len(), 8);
    for (k, e) in dw.iter().enumerate() {
        assert_eq!(
            (e["bytes"].as_u64(), e["offset"].as_i64(), e["ret"].as_i64()),
            (Some(65536), Some(k as i64 * 65536), Some(65536))
        );
    }
    let loop_name = lfs.name();
    let blk: Vec<&Value> = ev
        .iter()
        .filter(|e| {
            e["kind"] == "block" && e["disk"] == loop_name.as_str() && e["op"] == "write" && e["bytes"] == 65536
        })
        .collect();
    assert!(
        blk.len() >= 8,
        "expected the 8 O_DIRECT 64 KiB writes as block requests on {loop_name}, got {}",
        blk.len()
    );
    for b in &blk {
        assert!(b["latency_ns"].as_u64().unwrap() > 0);
    }

    // info agrees on totals and reports a clean close.
    let info = latscope_json(&["info", "-r", trace.to_str().unwrap(), "--json"]);
    assert_eq!(info["events"].as_u64().unwrap() as usize, ev.len());
    assert_eq!(info["closed_cleanly"], true);
    assert_eq!(info["lost"], 0);
}

#[test]
fn record_filters_in_kernel_and_by_comm() {
    if !require_bpf("record_filters_in_kernel_and_by_comm") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("f.lst");
    let out = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--quiet", "--no-block", "evt.type = openat and evt.latency >= 0", "--", "cat", "/etc/hostname"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ev = json_lines(&latscope_ok(&["events", "-r", trace.to_str().unwrap(), "--json", "evt.kind = syscall"]));
    assert!(!ev.is_empty());
    assert!(ev.iter().all(|e| e["type"] == "openat"), "only openat recorded");
    assert!(ev.iter().any(|e| e["path"] == "/etc/hostname"));
}

/// `-c NAME` is decided per task in the kernel and the verdict cached in the task's storage: a
/// process that renames itself (prctl PR_SET_NAME) mid-run must be recorded from the rename on
/// and not before, and one renamed away must stop being recorded.
#[test]
fn record_comm_filter_follows_renames() {
    if !require_bpf("record_comm_filter_follows_renames") || !require_tool("record_comm_filter", "python3") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("c.lst");
    let rec = spawn_recorder(&trace, &["--quiet", "--no-block", "--duration", "60", "-c", "lsrenamed"]);
    wait_attached(&[&rec]);
    let marks = tmp.path().join("mark");
    // Many syscalls under each name, so a stale cached verdict would show.
    let script = format!(
        r#"
import ctypes, os
libc = ctypes.CDLL(None)
def name(n): libc.prctl(15, ctypes.c_char_p(n), 0, 0, 0)
def touch(tag):
    for i in range(20): os.close(os.open("{m}-" + tag, os.O_CREAT | os.O_WRONLY, 0o600))
touch("before")
name(b"lsrenamed")
touch("during")
name(b"lsother")
touch("after")
"#,
        m = marks.display()
    );
    let st = Command::new("python3").arg("-c").arg(&script).status().unwrap();
    assert!(st.success());
    std::thread::sleep(std::time::Duration::from_millis(500));
    stop_recorder(rec);
    let ev = json_lines(&latscope_ok(&["events", "-r", trace.to_str().unwrap(), "--json", "evt.type = openat"]));
    let count = |tag: &str| {
        let p = format!("{}-{tag}", marks.display());
        ev.iter().filter(|e| e["path"] == p.as_str()).count()
    };
    assert_eq!(count("before"), 0, "not recorded before the rename");
    assert_eq!(count("during"), 20, "every open under the filtered name");
    assert_eq!(count("after"), 0, "not recorded after renaming away");
    assert!(ev.iter().all(|e| e["comm"] == "lsrenamed"), "only the filtered name: {ev:?}");
}

/// TCP sockets are named by their addresses (`local->peer`): a connection made during the
/// recording (connect/accept carry the addresses from the kernel) and one open before it started
/// (named from /proc/net/tcp in the start snapshot); `top --by client` groups by the peer host.
#[test]
fn record_names_sockets_by_address() {
    if !require_bpf("record_names_sockets_by_address") || !require_tool("record_names_sockets", "python3") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("s.lst");
    let (ready, go) = (tmp.path().join("ready"), tmp.path().join("go"));
    let script = format!(
        r#"
import os, socket, threading, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(8)
port = srv.getsockname()[1]
old_c = socket.create_connection(("127.0.0.1", port)); old_s, _ = srv.accept()
open("{ready}", "w").write(str(port))
while not os.path.exists("{go}"): time.sleep(0.02)
for i in range(5):
    old_c.sendall(b"o" * 7); old_s.recv(7)
def serve():
    c, _ = srv.accept()
    for i in range(5): c.sendall(c.recv(9))
    c.close()
t = threading.Thread(target=serve); t.start()
new_c = socket.create_connection(("127.0.0.1", port))
for i in range(5):
    new_c.sendall(b"n" * 9); new_c.recv(9)
t.join()
print(old_c.getsockname()[1], new_c.getsockname()[1])
"#,
        ready = ready.display(),
        go = go.display()
    );
    let py = Command::new("python3").arg("-c").arg(&script).stdout(std::process::Stdio::piped()).spawn().unwrap();
    for _ in 0..200 {
        if ready.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let port: u16 = std::fs::read_to_string(&ready).unwrap().trim().parse().unwrap();
    let rec = spawn_recorder(&trace, &["--quiet", "--no-block", "--duration", "60", "-p", &py.id().to_string()]);
    wait_attached(&[&rec]);
    std::fs::write(&go, "").unwrap();
    let out = py.wait_with_output().unwrap();
    assert!(out.status.success());
    let ports: Vec<u16> = String::from_utf8_lossy(&out.stdout).split_whitespace().map(|p| p.parse().unwrap()).collect();
    let (old_port, new_port) = (ports[0], ports[1]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    stop_recorder(rec);

    let f = trace.to_str().unwrap();
    let ev = json_lines(&latscope_ok(&["events", "-r", f, "--json", "fd.type = ipv4"]));
    let named = |ty: &str, path: &str| ev.iter().filter(|e| e["type"] == ty && e["path"] == path).count();
    let (srv, old, new) =
        (format!("127.0.0.1:{port}"), format!("127.0.0.1:{old_port}"), format!("127.0.0.1:{new_port}"));
    // Open before the recording: named from the snapshot, on both ends.
    assert_eq!(named("sendto", &format!("{old}->{srv}")), 5, "old client end: {ev:?}");
    assert_eq!(named("recvfrom", &format!("{srv}->{old}")), 5, "old server end");
    // Made during the recording: connect and accept name it from the kernel's addresses.
    assert_eq!(named("connect", &format!("{new}->{srv}")), 1, "connect: {ev:?}");
    assert!(
        ev.iter()
            .any(|e| e["type"].as_str().unwrap_or("").starts_with("accept")
                && e["path"] == format!("{srv}->{new}").as_str()),
        "accept"
    );
    assert_eq!(named("recvfrom", &format!("{srv}->{new}")), 5, "new server end");
    assert_eq!(named("sendto", &format!("{new}->{srv}")), 5, "new client end");
    // The server's view by client: the peer host.
    let top = latscope_ok(&["top", "-r", f, "--by", "client", "--json", &format!("fd.name startswith \"{srv}->\"")]);
    let v: Value = serde_json::from_str(&top).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{top}");
    assert_eq!(rows[0]["name"], "127.0.0.1", "{top}");
}

/// Socket fields on a recording: a TCP connection and a UDP socket connected, made by a command
/// recorded from its start. The protocol comes from the kernel (`udp:` names), the server and
/// client ends from connect and accept, whatever the (random) port numbers; counts are the
/// messages sent.
#[test]
fn record_socket_fields_know_protocol_and_roles() {
    if !require_bpf("record_socket_fields_know_protocol_and_roles")
        || !require_tool("record_socket_fields_know_protocol_and_roles", "python3")
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("s.lst");
    let ports = tmp.path().join("ports");
    let script = format!(
        r#"
import socket, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(8)
usrv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); usrv.bind(("127.0.0.1", 0))
def serve():
    c, _ = srv.accept()
    for i in range(4): c.sendall(c.recv(9))
    c.close()
t = threading.Thread(target=serve); t.start()
tc = socket.create_connection(srv.getsockname())
for i in range(4):
    tc.sendall(b"n" * 9); tc.recv(9)
t.join()
uc = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); uc.connect(usrv.getsockname())
for i in range(3):
    uc.send(b"u" * 5); usrv.recvfrom(5)
open("{ports}", "w").write("%d %d %d %d" % (srv.getsockname()[1], tc.getsockname()[1], usrv.getsockname()[1], uc.getsockname()[1]))
"#,
        ports = ports.display()
    );
    let out = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--quiet", "--no-block", "--", "python3", "-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let p: Vec<u16> = std::fs::read_to_string(&ports).unwrap().split_whitespace().map(|p| p.parse().unwrap()).collect();
    let (srv, cli, usrv, ucli) = (p[0], p[1], p[2], p[3]);

    let f = trace.to_str().unwrap();
    let count = |filter: &str| json_lines(&latscope_ok(&["events", "-r", f, "--json", filter])).len();
    let io = "evt.type in (sendto, recvfrom, read, write)";
    let socks = latscope_ok(&["events", "-r", f, "fd.type = ipv4"]);
    // TCP, both ends: 4 messages each way, a send and a receive per message per end.
    assert_eq!(
        count(&format!("{io} and fd.sport = {srv} and fd.cport = {cli}")),
        16,
        "tcp by role, ports {p:?}:\n{socks}"
    );
    assert_eq!(count(&format!("{io} and fd.lport = {srv} and fd.rport = {cli}")), 8, "tcp server end");
    assert_eq!(
        count(&format!("{io} and fd.lport = {cli} and fd.sip = 127.0.0.1 and fd.sport = {srv}")),
        8,
        "client end"
    );
    assert_eq!(count(&format!("{io} and fd.port = {srv} and fd.l4proto = tcp")), 16);
    assert_eq!(count(&format!("evt.type = connect and fd.l4proto = tcp and fd.cport = {cli}")), 1);
    assert_eq!(count(&format!("evt.type in (accept, accept4) and fd.lport = {srv} and fd.cport = {cli}")), 1);
    // UDP: the connect names the client's socket with its protocol. The server's socket, bound
    // during the recording and never connected, has no name (bind names no socket; one bound
    // before the recording is named by the start snapshot, `udp:127.0.0.1:PORT`).
    let ev = json_lines(&latscope_ok(&["events", "-r", f, "--json", "evt.type = connect and fd.l4proto = udp"]));
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["path"], format!("udp:127.0.0.1:{ucli}->127.0.0.1:{usrv}").as_str());
    assert_eq!(
        count(&format!("evt.type = sendto and fd.sport = {usrv} and fd.cport = {ucli}")),
        3,
        "ports {p:?}:\n{socks}"
    );
    assert_eq!(count("evt.type = recvfrom and fd.type = ipv4 and not fd.l4proto exists"), 3);
}

/// Entries of syscalls in flight wait in a per-CPU slot and move to task storage when their
/// task is switched out: with 8 threads on few CPUs, calls block, are preempted and migrate,
/// and every call must still be recorded once, with its own latency.
#[test]
fn record_many_threads_every_call_once_with_its_own_latency() {
    if !require_bpf("record_many_threads_every_call_once_with_its_own_latency") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = compile_c("threads.c", tmp.path());
    let trace = tmp.path().join("t.lst");
    const THREADS: usize = 8;
    const CALLS: usize = 5000;
    const SLEEPS: usize = 20;
    let out = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--quiet", "--json", "--no-block", "--"])
        .arg(&work)
        .args([THREADS.to_string(), CALLS.to_string(), SLEEPS.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_str(String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or_default())
        .expect("the summary: stderr's last line, with a command");
    assert_eq!(summary["lost"], 0, "{summary}");
    let ev = json_lines(&latscope_ok(&[
        "events",
        "-r",
        trace.to_str().unwrap(),
        "--json",
        "proc.name = threads and evt.type in (getppid, clock_nanosleep, nanosleep)",
    ]));
    let mut per_tid: std::collections::BTreeMap<u64, (usize, usize)> = Default::default();
    for e in &ev {
        let lat = e["latency_ns"].as_u64().unwrap();
        let slot = per_tid.entry(e["tid"].as_u64().unwrap()).or_default();
        if e["type"] == "getppid" {
            slot.0 += 1;
            assert!(lat < 100_000_000, "a getppid of {lat} ns: another call's entry? {e}");
        } else {
            slot.1 += 1;
            assert!(lat >= 1_000_000, "a 1 ms sleep measured {lat} ns: {e}");
        }
    }
    let workers: Vec<_> = per_tid.iter().filter(|(_, c)| c.0 > 0).collect();
    assert_eq!(workers.len(), THREADS, "{per_tid:?}");
    for (tid, (calls, sleeps)) in workers {
        assert_eq!(*calls, CALLS, "getppid calls of thread {tid}");
        assert_eq!(*sleeps, SLEEPS, "sleeps of thread {tid}");
    }
}

#[test]
fn record_refuses_without_root_with_one_clear_line() {
    if !require_bpf("record_refuses_without_root_with_one_clear_line") || !require_tool("record_refuses", "setpriv") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("x.lst");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"])
        .arg(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("root"), "{err}");
    assert!(!trace.exists(), "no file written when recording cannot start");
}

/// Two recorders watch the same workload: one with a filter pushed into the kernel, one with no
/// filter. The pushed-down one sees far fewer events cross its ring buffer (counted by the
/// kernel), and its output equals the unfiltered trace filtered afterwards, event for event.
#[test]
fn pushdown_reduces_ring_buffer_traffic_with_the_same_output() {
    if !require_bpf("pushdown_reduces_ring_buffer_traffic_with_the_same_output") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = compile_c("workload.c", tmp.path());
    let dir = tmp.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    let filter = "proc.name = workload and evt.type in (openat, pwrite64, pread64) and evt.latency >= 0";
    let (ta, tb) = (tmp.path().join("a.lst"), tmp.path().join("b.lst"));
    let opts = ["--quiet", "--json", "--no-block", "--duration", "60"];
    let a = spawn_recorder(&ta, &[&opts[..], &[filter]].concat());
    let b = spawn_recorder(&tb, &opts);
    wait_attached(&[&a, &b]);
    let st = Command::new(&work).arg(&dir).arg(tmp.path()).arg("10").status().unwrap();
    assert!(st.success());
    std::thread::sleep(std::time::Duration::from_millis(500));
    let stop = |c: Child| serde_json::from_slice::<Value>(&stop_recorder(c).stdout).unwrap();
    let (sa, sb) = (stop(a), stop(b));
    let (ra, rb) = (sa["ring_events"].as_u64().unwrap(), sb["ring_events"].as_u64().unwrap());
    assert_eq!(sa["lost"], 0);
    assert_eq!(sb["lost"], 0);
    // The workload alone makes well over 40 syscalls the filter rejects (fsync, close, sleeps,
    // mkdir, rename, the loader's mmaps...): none of them may cross the filtered ring buffer.
    assert!(ra + 40 <= rb, "push-down must cut ring-buffer traffic: {ra} filtered vs {rb} unfiltered");
    // Each recorder's programs read the clock themselves, so timestamps differ by the time one
    // program takes to run: compare everything else, in order.
    let key = |e: &Value| {
        (
            e["tid"].as_u64(),
            e["type"].to_string(),
            e["path"].to_string(),
            e["ret"].as_i64(),
            e["bytes"].as_u64(),
            e["offset"].as_i64(),
        )
    };
    let ea: Vec<_> = json_lines(&latscope_ok(&["events", "-r", ta.to_str().unwrap(), "--json", "evt.kind = syscall"]))
        .iter()
        .map(key)
        .collect();
    let eb: Vec<_> =
        json_lines(&latscope_ok(&["events", "-r", tb.to_str().unwrap(), "--json", filter])).iter().map(key).collect();
    let data = format!("{:?}", dir.join("data").to_string_lossy());
    for ty in ["\"openat\"", "\"pwrite64\"", "\"pread64\""] {
        let n = ea.iter().filter(|k| k.1 == ty && k.2 == data).count();
        assert_eq!(n, 10, "10 x {ty} on {data}: {ea:?}");
    }
    assert_eq!(ea, eb, "pushed-down output equals filtering afterwards");
}

/// A command-name filter pushed into the kernel keeps every event the full filter keeps, also for
/// the calls that give a process the name: the execve that turns a shell into the program (at
/// its entry the name is still the shell's) and a prctl(PR_SET_NAME). Filtered at record time ==
/// recorded unfiltered and filtered afterwards, event for event.
#[test]
fn pushdown_keeps_the_calls_that_rename_a_process() {
    if !require_bpf("pushdown_keeps_the_calls_that_rename_a_process")
        || !require_tool("pushdown_keeps_the_calls_that_rename_a_process", "python3")
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let prog = tmp.path().join("lsexeccat");
    std::fs::copy("/bin/cat", &prog).unwrap();
    let filter = "proc.name = lsexeccat";
    let (ta, tb) = (tmp.path().join("a.lst"), tmp.path().join("b.lst"));
    let opts = ["--quiet", "--json", "--no-block", "--duration", "60"];
    let a = spawn_recorder(&ta, &[&opts[..], &[filter]].concat());
    let b = spawn_recorder(&tb, &opts);
    wait_attached(&[&a, &b]);
    let rename = r#"import ctypes; ctypes.CDLL(None).prctl(15, b"lsexeccat", 0, 0, 0); open("/etc/hostname").read()"#;
    let script = format!("{p} /etc/hostname; {p} /etc/hostname >/dev/null; python3 -c '{rename}'", p = prog.display());
    let st = Command::new("sh").arg("-c").arg(&script).stdout(Stdio::null()).status().unwrap();
    assert!(st.success());
    std::thread::sleep(std::time::Duration::from_millis(500));
    let stop = |c: Child| serde_json::from_slice::<Value>(&stop_recorder(c).stdout).unwrap();
    let (sa, sb) = (stop(a), stop(b));
    assert_eq!((&sa["lost"], &sb["lost"]), (&Value::from(0), &Value::from(0)));
    // An fd's name comes from the call that opened it, which the pushed-down recording does not
    // see when it was made under another name (the shell opening a redirection): fds are
    // compared by number and inode, paths where the call takes one (not relative to an fd).
    let key = |e: &Value| {
        let takes_path = e["kind"] == "syscall"
            && e["dirfd"].as_i64().is_none_or(|d| d < 0)
            && e["nr"]
                .as_u64()
                .is_some_and(|nr| latscope_event::syscalls::desc(nr as u16).path != latscope_event::syscalls::NONE);
        (
            e["tid"].as_u64(),
            e["type"].to_string(),
            if takes_path || e["kind"] != "syscall" { e["path"].to_string() } else { String::new() },
            (e["fd"].as_i64(), e["ino"].as_u64()),
            e["ret"].as_i64(),
            e["bytes"].as_u64(),
            e["offset"].as_i64(),
            e["flags"].as_u64(),
        )
    };
    // Syscalls and process events are in blocks of their own, flushed together: how they
    // interleave in a file depends on when each recorder flushed. Each kind in order, then.
    let events = |t: &Path, f: &str| {
        let all = json_lines(&latscope_ok(&["events", "-r", t.to_str().unwrap(), "--json", f]));
        let (sys, other): (Vec<_>, Vec<_>) = all.iter().partition(|e| e["kind"] == "syscall");
        sys.into_iter().chain(other).map(key).collect::<Vec<_>>()
    };
    let (ea, eb) = (events(&ta, "evt.kind != block"), events(&tb, filter));
    let count = |ty: &str| ea.iter().filter(|k| k.1 == format!("{ty:?}")).count();
    assert_eq!(count("execve"), 2, "the execve of each lsexeccat: {ea:?}");
    assert_eq!(count("prctl"), 1, "the prctl that renames python: {ea:?}");
    if let Some(i) = (0..ea.len().max(eb.len())).find(|&i| ea.get(i) != eb.get(i)) {
        panic!(
            "pushed-down output differs from filtering afterwards at event {i} ({} vs {} events):\nfiltered:   {:?}\nafterwards: {:?}",
            ea.len(),
            eb.len(),
            &ea[i.min(ea.len())..(i + 3).min(ea.len())],
            &eb[i.min(eb.len())..(i + 3).min(eb.len())]
        );
    }
}

/// The write-up's filter (`proc.name=test and evt.is_io_write=true and fd.name contains /mnt`) at
/// record time: the syscall set is pushed down, yet the files opened during the recording are
/// still named (the fd-naming calls stay enabled in the kernel and are dropped afterwards).
#[test]
fn record_with_the_seed_filter_names_new_files() {
    if !require_bpf("record_with_the_seed_filter_names_new_files") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("mnt-like").join("out.bin");
    std::fs::create_dir(target.parent().unwrap()).unwrap();
    let trace = tmp.path().join("seed.lst");
    let filter = "proc.name=latscope-load and evt.is_io_write=true and fd.name contains /mnt-like";
    let o = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--quiet", "--json", filter, "--"])
        .arg(bin())
        .args(["load", "-f"])
        .arg(&target)
        .args(["--size", "1KiB", "-n", "200"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ev = json_lines(&latscope_ok(&["events", "-r", trace.to_str().unwrap(), "--json"]));
    let writes: Vec<_> = ev.iter().filter(|e| e["kind"] == "syscall").collect();
    assert!(writes.len() >= 200, "the 200 writes are recorded, got {}", writes.len());
    assert!(writes.iter().all(|e| e["path"] == target.to_str().unwrap() && e["comm"] == "latscope-load"));
}

/// A shell that execs known programs (by absolute path, relative to its directory, and by
/// replacing itself): every successful execve carries its program (the path argument's memory
/// is gone by the syscall's exit; the kernel's copy is used), every exec event its arguments.
#[test]
fn record_exec_events_carry_program_and_arguments() {
    if !require_bpf("record_exec_events_carry_program_and_arguments") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("x.lst");
    let script = "/bin/true one two; /usr/bin/printf %s x >/dev/null; cd /bin && ./true rel; /nonexistent/prog; exec /bin/cat /etc/hostname";
    let o = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--quiet", "--json", "--no-block", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = trace.to_str().unwrap();
    let execs = json_lines(&latscope_ok(&["events", "-r", f, "--json", "evt.type = proc_exec"]));
    let got: Vec<(&str, &str)> =
        execs.iter().map(|e| (e["path"].as_str().unwrap(), e["args"].as_str().unwrap())).collect();
    let want_tail = [
        ("/bin/true", "/bin/true one two"),
        ("/usr/bin/printf", "/usr/bin/printf %s x"),
        ("/bin/true", "./true rel"),
        ("/bin/cat", "/bin/cat /etc/hostname"),
    ];
    assert_eq!(got.len(), want_tail.len() + 1, "sh and its four programs: {got:?}");
    assert!(got[0].0.ends_with("/sh") && got[0].1 == format!("sh -c {script}"), "{got:?}");
    assert_eq!(&got[1..], &want_tail[..]);

    let calls = json_lines(&latscope_ok(&["events", "-r", f, "--json", "evt.type = execve"]));
    let ok: Vec<&str> = calls.iter().filter(|e| e["ret"] == 0).map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(ok.len(), got.len(), "one successful execve per exec event: {calls:?}");
    for (c, (path, _)) in ok.iter().zip(&got) {
        assert_eq!(c, path, "the successful execve names its program");
    }
    let failed: Vec<&str> = calls.iter().filter(|e| e["ret"] != 0).map(|e| e["path"].as_str().unwrap()).collect();
    assert!(failed.contains(&"/nonexistent/prog"), "a failed execve keeps its argument: {failed:?}");
    assert!(failed.iter().all(|p| !p.is_empty()), "{failed:?}");
}

/// `cpu` is the CPU a call returned on: a program pinned to one CPU (taskset) has every call
/// there, and `evt.cpu` selects them.
#[test]
fn record_cpu_is_where_each_call_returned() {
    if !require_bpf("record_cpu_is_where_each_call_returned") || !require_tool("record_cpu", "taskset") {
        return;
    }
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let last = cpus - 1;
    let tmp = tempfile::tempdir().unwrap();
    let prog = tmp.path().join("lspinned");
    std::fs::copy("/bin/cat", &prog).unwrap();
    let trace = tmp.path().join("cpu.lst");
    let o = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--quiet", "--no-block", "--", "taskset", "-c", &last.to_string()])
        .arg(&prog)
        .arg("/etc/hostname")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = trace.to_str().unwrap();
    let ev = json_lines(&latscope_ok(&["events", "-r", f, "--json", "proc.name = lspinned and evt.kind = syscall"]));
    assert!(ev.len() > 20, "the pinned program's calls: {}", ev.len());
    assert!(ev.iter().all(|e| e["cpu"].as_u64() == Some(last as u64)), "all on CPU {last}: {ev:?}");
    let on_last = json_lines(&latscope_ok(&[
        "events",
        "-r",
        f,
        "--json",
        &format!("proc.name = lspinned and evt.kind = syscall and evt.cpu = {last}"),
    ]));
    assert_eq!(on_last.len(), ev.len());
}

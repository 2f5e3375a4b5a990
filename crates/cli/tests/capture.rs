//! What a trace holds for replay: a helper makes the fd- and file-changing calls with known
//! arguments and writes down what the kernel gave it (fds, addresses, child ids); the recorded
//! events must carry each in the column docs/TRACE_FORMAT.md promises, and the header must say
//! whether the trace is complete for replay.

mod common;
use common::*;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// The helper's "name key=value ..." lines: name -> key -> value.
fn truth(path: &Path) -> HashMap<String, HashMap<String, i64>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next()?.to_string();
            let kv = it.filter_map(|w| w.split_once('=')).map(|(k, v)| (k.to_string(), v.parse().unwrap())).collect();
            Some((name, kv))
        })
        .collect()
}

fn record(trace: &Path, extra: &[&str], cmd: &[&Path]) -> Value {
    // The summary to a file of its own (`--json=FILE`): with a command, stdout is the command's.
    let summary = trace.with_extension("json");
    let o = Command::new(bin())
        .args(["record", "-w"])
        .arg(trace)
        .args(["--quiet", "--no-block"])
        .arg(format!("--json={}", summary.display()))
        .args(extra)
        .arg("--")
        .args(cmd)
        .output()
        .unwrap();
    assert!(o.status.success(), "record failed: {}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    assert_eq!(s["lost"], 0, "{s}");
    assert_eq!(s["command_status"], 0, "{s}");
    s
}

#[test]
fn every_fd_and_file_call_carries_what_a_replay_needs() {
    if !require_bpf("every_fd_and_file_call_carries_what_a_replay_needs") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = compile_c("capture.c", tmp.path());
    let dir = tmp.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    let truth_file = tmp.path().join("truth");
    let trace = tmp.path().join("t.lst");
    record(&trace, &[], &[&work, &dir, &truth_file]);
    let t = truth(&truth_file);
    assert!(t.contains_key("done"), "the helper ran to the end: {t:?}");
    let v = |name: &str, key: &str| t[name][key];

    let header = latscope_trace::TraceReader::open(&trace).unwrap().header().clone();
    assert_eq!(header.capture, vec![latscope_event::CAPTURE_REPLAY_V1.to_string()]);
    assert_eq!(header.replay_readiness(), Ok(()));

    let f = trace.to_str().unwrap();
    let ev = json_lines(&latscope_ok(&["events", "-r", f, "--json"]));
    let pid = ev
        .iter()
        .find(|e| e["type"] == "proc_exec" && e["path"].as_str().unwrap_or("").ends_with("/capture"))
        .expect("exec of the helper")["pid"]
        .as_u64()
        .unwrap();
    let calls = |ty: &str| -> Vec<&Value> { ev.iter().filter(|e| e["pid"] == pid && e["type"] == ty).collect() };
    let one = |ty: &str| -> &Value {
        let c = calls(ty);
        assert_eq!(c.len(), 1, "one {ty}: {c:?}");
        c[0]
    };
    let a = dir.join("a").to_string_lossy().into_owned();
    let b = dir.join("b").to_string_lossy().into_owned();

    // The fds the kernel wrote to user memory, read at exit.
    let p2 = one("pipe2");
    assert_eq!((p2["fd"].as_i64(), p2["addr"].as_i64()), (Some(v("pipe2", "fd0")), Some(v("pipe2", "fd1"))));
    assert_eq!(p2["flags"].as_i64(), Some(v("pipe2", "flags")));
    assert_eq!(p2["fd_type"], "pipe");
    let p = one("pipe");
    assert_eq!((p["fd"].as_i64(), p["addr"].as_i64()), (Some(v("pipe", "fd0")), Some(v("pipe", "fd1"))));
    let sp = one("socketpair");
    assert_eq!((sp["fd"].as_i64(), sp["addr"].as_i64()), (Some(v("socketpair", "fd0")), Some(v("socketpair", "fd1"))));
    assert_eq!(sp["mode"].as_i64(), Some(v("socketpair", "type")));
    assert_eq!(sp["flags"].as_i64(), Some(libc::SOCK_CLOEXEC as i64));
    assert_eq!(sp["fd_type"], "unix");

    // dup family and fcntl.
    let fa = v("dup", "old");
    let d = one("dup");
    assert_eq!((d["fd"].as_i64(), d["ret"].as_i64()), (Some(fa), Some(v("dup", "new"))));
    assert_eq!(d["path"], a.as_str(), "the new fd names the same file");
    let d2 = one("dup2");
    assert_eq!((d2["fd"].as_i64(), d2["addr"].as_i64(), d2["ret"].as_i64()), (Some(fa), Some(50), Some(50)));
    let d3 = one("dup3");
    assert_eq!(
        (d3["addr"].as_i64(), d3["flags"].as_i64(), d3["ret"].as_i64()),
        (Some(51), Some(libc::O_CLOEXEC as i64), Some(51))
    );
    let fc = calls("fcntl");
    let dupfd = fc.iter().find(|e| e["flags"] == libc::F_DUPFD_CLOEXEC).expect("fcntl F_DUPFD_CLOEXEC");
    assert_eq!(
        (dupfd["fd"].as_i64(), dupfd["mode"].as_i64(), dupfd["ret"].as_i64()),
        (Some(fa), Some(60), Some(v("fcntl_dupfd", "new")))
    );
    let setfd = fc.iter().find(|e| e["flags"] == libc::F_SETFD).expect("fcntl F_SETFD");
    assert_eq!(setfd["mode"].as_i64(), Some(libc::FD_CLOEXEC as i64));
    assert_eq!(one("ioctl")["flags"].as_u64(), Some(libc::FIONCLEX));
    let cr = one("close_range");
    assert_eq!((cr["fd"].as_i64(), cr["addr"].as_i64(), cr["flags"].as_i64()), (Some(50), Some(51), Some(0)));

    // Sizes, offsets, whence.
    assert_eq!(one("ftruncate")["bytes"], 12345);
    let tr = one("truncate");
    assert_eq!((tr["path"].as_str(), tr["bytes"].as_u64()), (Some(b.as_str()), Some(8192)));
    let fl = one("fallocate");
    assert_eq!((fl["mode"].as_i64(), fl["offset"].as_i64(), fl["bytes"].as_u64()), (Some(1), Some(4096), Some(65536)));
    assert_eq!(fl["path"], b.as_str());
    let ls = calls("lseek");
    assert!(ls.iter().any(|e| e["offset"] == 100 && e["flags"] == 0 && e["ret"] == 100), "lseek: {ls:?}");

    // Memory maps of a file.
    let mm: Vec<_> = calls("mmap").into_iter().filter(|e| e["fd"].as_i64() == Some(fa)).collect();
    assert_eq!(mm.len(), 1, "{mm:?}");
    let addr = v("mmap", "addr");
    assert_eq!(
        (
            mm[0]["bytes"].as_u64(),
            mm[0]["mode"].as_i64(),
            mm[0]["flags"].as_i64(),
            mm[0]["offset"].as_i64(),
            mm[0]["ret"].as_i64()
        ),
        (Some(8192), Some(3), Some(libc::MAP_SHARED as i64), Some(4096), Some(addr))
    );
    let ms = one("msync");
    assert_eq!(
        (ms["addr"].as_i64(), ms["bytes"].as_u64(), ms["flags"].as_i64()),
        (Some(addr), Some(8192), Some(libc::MS_SYNC as i64))
    );
    assert!(calls("munmap").iter().any(|e| e["addr"].as_i64() == Some(addr) && e["bytes"] == 8192));

    // Two-fd calls: offsets behind pointers as they were at entry (the kernel advances them).
    let sf = one("sendfile");
    assert_eq!((sf["fd"].as_i64(), sf["addr"].as_i64()), (Some(v("socketpair", "fd0")), Some(fa)));
    assert_eq!((sf["offset2"].as_i64(), sf["bytes"].as_u64(), sf["ret"].as_i64()), (Some(5), Some(10), Some(10)));
    let cf = one("copy_file_range");
    assert_eq!((cf["offset"].as_i64(), cf["offset2"].as_i64(), cf["bytes"].as_u64()), (Some(100), Some(3), Some(50)));
    assert_eq!((cf["path"].as_str(), cf["addr"].as_i64()), (Some(b.as_str()), Some(fa)));
    let spl = one("splice");
    assert_eq!(
        (spl["fd"].as_i64(), spl["addr"].as_i64(), spl["offset2"].as_i64()),
        (Some(v("pipe2", "fd1")), Some(fa), Some(7))
    );
    let pw = one("pwritev2");
    assert_eq!(
        (pw["offset"].as_i64(), pw["bytes"].as_u64(), pw["flags"].as_i64()),
        (Some(512), Some(64), Some(libc::RWF_DSYNC as i64))
    );

    // A symlink's target is kept as given.
    let sl = one("symlink");
    assert_eq!(
        (sl["path"].as_str(), sl["path2"].as_str()),
        (Some("rel/target"), Some(dir.join("link").to_str().unwrap()))
    );

    // Where children come from: fork is clone(SIGCHLD|...) returning the child, whose own
    // calls carry its pid; a thread is clone3 with CLONE_THREAD, returning its tid.
    let child = v("fork", "child");
    let cl: Vec<_> = calls("clone").into_iter().filter(|e| e["ret"].as_i64() == Some(child)).collect();
    assert_eq!(cl.len(), 1, "clone returning the child {child}");
    assert_eq!(cl[0]["flags"].as_i64().unwrap() & 0xff, libc::SIGCHLD as i64);
    assert!(ev.iter().any(|e| e["pid"].as_i64() == Some(child) && e["type"] == "close"), "the child's close");
    let tid = v("thread", "tid");
    let c3 = one("clone3");
    assert_eq!(c3["ret"].as_i64(), Some(tid));
    let fl = c3["flags"].as_i64().unwrap();
    assert_eq!(
        fl & (libc::CLONE_THREAD | libc::CLONE_FILES) as i64,
        (libc::CLONE_THREAD | libc::CLONE_FILES) as i64,
        "{fl:x}"
    );
    assert!(ev.iter().any(|e| e["tid"].as_i64() == Some(tid) && e["pid"].as_u64() == Some(pid)), "the thread's calls");
    assert_eq!(one("unshare")["flags"].as_i64(), Some(libc::CLONE_FILES as i64));
}

/// A recording that leaves calls out says so, and how to record properly.
#[test]
fn a_filtered_recording_is_not_ready_for_replay() {
    if !require_bpf("a_filtered_recording_is_not_ready_for_replay") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("f.lst");
    record(&trace, &["fd.type = file"], &[Path::new("true")]);
    let h = latscope_trace::TraceReader::open(&trace).unwrap().header().clone();
    assert!(h.capture.is_empty());
    let e = h.replay_readiness().unwrap_err();
    assert!(e.contains("the filter `fd.type = file`") && e.contains("latscope record -w FILE"), "{e}");
    let io = tmp.path().join("io.lst");
    record(&io, &["--syscalls", "io"], &[Path::new("true")]);
    let h = latscope_trace::TraceReader::open(&io).unwrap().header().clone();
    assert_eq!(h.replay_readiness(), Ok(()));
}

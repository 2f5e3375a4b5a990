//! `record -- CMD`: record exits with the command's status (as strace and time do), and the
//! command never outlives a recording that stops early (a signal, a full disk, a failed start)
//! unless `--detach` says so.

mod common;

use common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `pid` is a running process (a zombie waiting for its parent is not).
fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

fn wait_for(p: &Path) -> i32 {
    let t0 = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(p).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_gone(pids: &[i32]) -> Vec<i32> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if pids.iter().all(|&p| !running(p)) {
            return Vec::new();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    pids.iter().copied().filter(|&p| running(p)).collect()
}

/// A command that writes its pid and a background child's pid, then loops forever (its output
/// goes nowhere, so that a child left running does not hold record's stderr open).
fn lingering(dir: &Path) -> String {
    format!(
        "exec </dev/null >/dev/null 2>&1; echo $$ > {d}/parent.tmp && mv {d}/parent.tmp {d}/parent; sleep 1000 & echo $! > {d}/child.tmp && mv {d}/child.tmp {d}/child; while :; do cat /etc/hostname > /dev/null; done",
        d = dir.display()
    )
}

fn record(dir: &Path, trace: &Path, extra: &[&str], cmd: &str) -> Child {
    Command::new(bin())
        .args(["record", "-q", "--no-block", "-w"])
        .arg(trace)
        .args(extra)
        .args(["--", "sh", "-c", cmd])
        .current_dir(dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn record_exits_with_the_commands_status() {
    if !require_bpf("record_exits_with_the_commands_status") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t.lst");
    let t = t.to_str().unwrap();
    for (cmd, want) in [("exit 0", 0), ("exit 1", 1), ("exit 3", 3), ("kill -TERM $$", 128 + 15)] {
        let o = latscope(&["record", "-q", "--no-block", "-w", t, "--", "sh", "-c", cmd]);
        assert_eq!(o.status.code(), Some(want), "{cmd}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let o = latscope(&["record", "-q", "--no-block", "-w", t, "--", "/nonexistent/program"]);
    assert_eq!(o.status.code(), Some(127), "a missing command: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn sigterm_to_record_stops_the_command_and_its_children() {
    if !require_bpf("sigterm_to_record_stops_the_command_and_its_children") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t.lst");
    let rec = record(tmp.path(), &t, &[], &lingering(tmp.path()));
    let (parent, child) = (wait_for(&tmp.path().join("parent")), wait_for(&tmp.path().join("child")));
    assert!(running(parent) && running(child));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(rec.id() as i32, libc::SIGTERM) };
    let o = rec.wait_with_output().unwrap();
    assert_eq!(wait_gone(&[parent, child]), Vec::<i32>::new(), "the command outlived record");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
    latscope_ok(&["info", "-r", t.to_str().unwrap()]);
}

#[test]
fn detach_leaves_the_command_running_and_says_so() {
    if !require_bpf("detach_leaves_the_command_running_and_says_so") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t.lst");
    let rec = Command::new(bin())
        .args(["record", "--no-block", "--detach", "-d", "2s", "-w"])
        .arg(&t)
        .args(["--", "sh", "-c", &lingering(tmp.path())])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (parent, child) = (wait_for(&tmp.path().join("parent")), wait_for(&tmp.path().join("child")));
    let o = rec.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let alive = running(parent) && running(child);
    for p in [parent, child] {
        // SAFETY: cleaning up the test's own processes.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    assert!(alive, "--detach: the command should still run: {err}");
    assert!(err.contains("detach") || err.contains("still running") || err.contains("left running"), "{err}");
}

#[test]
fn a_full_disk_stops_record_and_the_command_and_keeps_the_trace_readable() {
    if !require_bpf("a_full_disk_stops_record_and_the_command_and_keeps_the_trace_readable") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    assert!(Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "latscope-full"])
        .arg(&mnt)
        .status()
        .unwrap()
        .success());
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _u = Unmount(mnt.clone());
    let t = mnt.join("t.lst");
    let rec = record(tmp.path(), &t, &["--flush-every", "100ms"], &lingering(tmp.path()));
    let (parent, child) = (wait_for(&tmp.path().join("parent")), wait_for(&tmp.path().join("child")));
    let t0 = Instant::now();
    let mut rec = rec;
    let status = loop {
        if let Some(st) = rec.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = rec.kill();
            panic!("record did not stop when the disk filled up");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(rec.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "record succeeded on a full disk: {err}");
    assert!(err.contains("No space left"), "the error says why: {err}");
    assert_eq!(wait_gone(&[parent, child]), Vec::<i32>::new(), "the command outlived record");
    // What was written before the disk filled up reads back.
    let o = latscope(&["info", "-r", t.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("events"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_failed_start_never_runs_the_command() {
    if !require_bpf("a_failed_start_never_runs_the_command") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("ran");
    let o = latscope(&[
        "record",
        "-q",
        "-w",
        tmp.path().join("t.lst").to_str().unwrap(),
        "--buffer-size",
        "1",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(!marker.exists(), "the command ran although recording never started");
    assert!(!tmp.path().join("t.lst").exists(), "a failed start created the trace");
}

/// `check` says, feature by feature, what the probes need; where they load (root and BTF here),
/// it says every probe runs, and it names every feature with the kernel that introduced it.
#[test]
fn check_lists_the_kernel_features_and_what_runs() {
    if !require_bpf("check_lists_the_kernel_features_and_what_runs") {
        return;
    }
    let out = latscope(&["check", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["probes"]["syscalls"], true, "{v}");
    assert_eq!(v["probes"]["block"], true, "{v}");
    let features = v["features"].as_array().unwrap();
    let keys: Vec<&str> = features.iter().map(|f| f["key"].as_str().unwrap()).collect();
    for k in
        ["btf", "ringbuf", "task_storage_map", "current_task_btf", "task_storage_tracing", "rdonly_cast", "find_vma"]
    {
        assert!(keys.contains(&k), "{k} in {keys:?}");
    }
    assert!(features.iter().all(|f| f["since"].as_str().is_some_and(|s| s.contains('.'))), "{v}");
    // A missing feature is either one with a fallback or named in the notes.
    for f in features.iter().filter(|f| f["present"] == false) {
        assert!(!f["fallback"].is_null(), "{f}: every probe runs, so what is missing has a fallback");
    }
    // Steal time: none on bare metal; under a hypervisor (the CPU flag the kernel shows), the
    // steal clock is read or said unreadable.
    let guest = std::fs::read_to_string("/proc/cpuinfo").unwrap().split_whitespace().any(|w| w == "hypervisor");
    let steal = v["steal_clock"].as_str().unwrap_or_default();
    assert_eq!(steal == "none (bare metal)", !guest, "{steal}");
    let text = latscope_ok(&["check"]);
    assert!(text.contains("syscall probes:           run"), "{text}");
    assert!(text.contains(&format!("steal time:               {steal}")), "{text}");
}

#[test]
fn a_command_is_execed_once_and_the_json_summary_never_mixes_with_its_output() {
    if !require_bpf("a_command_is_execed_once_and_the_json_summary_never_mixes_with_its_output") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t.lst");
    let ts = t.to_str().unwrap();
    // `echo` is found in the third PATH entry: execvp would try two execve calls first.
    let path = "/nonexistent/a:/nonexistent/b:/usr/bin:/bin";
    let o = Command::new(bin())
        .args(["record", "-q", "--no-block", "--json", "-w", ts, "--", "echo", "hello"])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // stdout is the command's alone; the summary is stderr's last line.
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello\n");
    let err = String::from_utf8_lossy(&o.stderr);
    let last: serde_json::Value = serde_json::from_str(err.lines().last().unwrap()).expect("a JSON summary");
    assert_eq!(last["command_status"], 0);
    assert!(last.get("block_completions_without_issue").is_some(), "{last}");
    assert!(last["wakeups_unseen"].is_u64(), "{last}");
    let execs = json_lines(&latscope_ok(&["events", "-r", ts, "--json", "evt.type = execve"]));
    assert_eq!(execs.len(), 1, "one execve, no failed PATH tries: {execs:?}");
    assert_eq!(execs[0]["ret"], 0, "{:?}", execs[0]);
    // --json=FILE: the summary in the file, nothing of it on either stream.
    let sum = tmp.path().join("sum.json");
    let o = Command::new(bin())
        .args(["record", "-q", "--no-block", &format!("--json={}", sum.display()), "-w", ts, "--", "echo", "hi"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hi\n");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("command_status"));
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&sum).unwrap()).unwrap();
    assert_eq!(s["command_status"], 0);
    // Without a command, stdout as before.
    let o = latscope(&["record", "-q", "--no-block", "--json", "-d", "200ms", "-c", "no-such-comm", "-w", ts]);
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert!(s["events"].is_u64());
    // info says what the -c recording kept and why, not just "filter: (none)".
    let info = latscope_ok(&["info", "-r", ts]);
    assert!(
        info.contains("selection:   syscalls of processes named no-such-comm (-c); fork/exec/exit of every process"),
        "{info}"
    );
    let j = latscope_json(&["info", "-r", ts, "--json"]);
    assert!(j["selection"].as_str().unwrap().contains("block requests of every process"), "{j}");
    // The summary's count of block completions without an issue is kept in the trace for info.
    assert!(j["block_completions_without_issue"].is_u64(), "{j}");
    assert!(j["wakeups_unseen"].is_u64(), "{j}");
}

/// A relative path opened by the command before it changes directory names the file it opened:
/// the command's working directory at start is known, not read from /proc after the `cd`.
#[test]
fn a_relative_open_before_a_cd_names_the_file_in_the_first_directory() {
    let t = "a_relative_open_before_a_cd_names_the_file_in_the_first_directory";
    if !require_bpf(t) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("sub")).unwrap();
    std::fs::write(tmp.path().join("first.txt"), "1").unwrap();
    std::fs::write(tmp.path().join("sub/second.txt"), "2").unwrap();
    let trace = tmp.path().join("t.lst");
    let o = Command::new(bin())
        .args(["record", "-q", "--no-block", "-w"])
        .arg(&trace)
        .args(["--", "sh", "-c", "cat first.txt; cd sub; cat second.txt; sleep 0.3"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let opens = json_lines(&latscope_ok(&[
        "events",
        "-r",
        trace.to_str().unwrap(),
        "--json",
        "evt.type = openat and fd.name contains .txt",
    ]));
    let paths: Vec<&str> = opens.iter().filter_map(|e| e["path"].as_str()).collect();
    let dir = tmp.path().canonicalize().unwrap();
    assert_eq!(
        paths,
        [format!("{}/first.txt", dir.display()), format!("{}/sub/second.txt", dir.display())],
        "{opens:?}"
    );
}

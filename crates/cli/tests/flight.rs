//! `record --ring` (the flight recorder), `latscope trigger` and `record --rotate`, run as a user
//! runs them: dumps that survive `kill -9`, files that rotate, options refused before anything
//! starts.

mod common;

use common::*;
use latscope_trace::{TraceReader, WarningKind};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Lines of a child's standard error, as they come.
fn lines(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    rx
}

fn wait_line(rx: &mpsc::Receiver<String>, seen: &mut Vec<String>, what: &str) -> String {
    let t = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(l) => {
                seen.push(l.clone());
                if l.contains(what) {
                    return l;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(e) => panic!("waiting for '{what}': {e}: {seen:?}"),
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no '{what}' within 60 s: {seen:?}");
    }
}

fn fire(socket: &Path, name: &str) -> String {
    let o = latscope(&["trigger", name, "--socket", socket.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `DIR/flight-...lst` named in "dumping to PATH".
fn dump_path(answer: &str) -> PathBuf {
    PathBuf::from(answer.split("dumping to ").nth(1).unwrap_or_else(|| panic!("{answer}")).trim())
}

#[test]
fn kill_9_during_a_dump_leaves_every_earlier_dump_readable() {
    if !require_bpf("kill_9_during_a_dump_leaves_every_earlier_dump_readable") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("t.sock");
    let dumps = dir.path().join("dumps");
    std::fs::create_dir(&dumps).unwrap();
    let mut child = Command::new(bin())
        .args(["record", "--no-block", "--ring", "10s", "--trigger", "now: manual", "--after", "3s", "--min-gap", "0"])
        .arg("-w")
        .arg(&dumps)
        .arg("--socket")
        .arg(&socket)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines(&mut child);
    let mut seen = Vec::new();
    wait_line(&rx, &mut seen, "dumps go to");
    std::thread::sleep(Duration::from_secs(1));
    let first = dump_path(&fire(&socket, "now"));
    wait_line(&rx, &mut seen, "latscope: wrote");
    // The recorder says its triggers; a name it does not have fires nothing, and says so.
    let list = latscope_ok(&["trigger", "--list", "--socket", socket.to_str().unwrap()]);
    assert!(list.lines().any(|l| l.ends_with(": now")), "{list}");
    let o = latscope(&["trigger", "nope", "--socket", socket.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("'nope'"), "{err}");
    let second = dump_path(&fire(&socket, "now"));
    // The window before the trigger is written at once: the file is at its name.
    let t = Instant::now();
    while !second.exists() {
        assert!(t.elapsed() < Duration::from_secs(10), "{} never appeared", second.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();

    let mut r = TraceReader::open(&first).unwrap();
    let b = r.read_all().unwrap();
    assert!(!b.is_empty() && r.warnings().is_empty() && r.summary().is_some(), "{:?}", r.warnings());
    assert_eq!(r.header().flight.as_ref().unwrap().trigger, "now");
    let mut r = TraceReader::open(&second).unwrap();
    let b = r.read_all().unwrap();
    assert!(!b.is_empty(), "the window before the trigger");
    assert!(r.warnings().iter().any(|w| matches!(w.kind, WarningKind::NotClosed { .. })), "{:?}", r.warnings());
    // Every command reads a dump.
    let info = latscope_ok(&["info", "-r", first.to_str().unwrap()]);
    assert!(info.contains("dump of:") && info.contains("trigger now (manual) fired at"), "{info}");
    // Nothing else was written.
    let n = std::fs::read_dir(&dumps).unwrap().count();
    assert_eq!(n, 2);
    // The socket of the process killed answers no more.
    let o = latscope(&["trigger", "now", "--socket", socket.to_str().unwrap()]);
    assert!(!o.status.success());
}

#[test]
fn rotation_writes_complete_files_and_keeps_the_newest() {
    if !require_bpf("rotation_writes_complete_files_and_keeps_the_newest") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A steady workload, so every file has calls of its own even on an idle machine.
    let mut busy = Command::new("sh").args(["-c", "while :; do sleep 0.02; done"]).spawn().unwrap();
    let o = Command::new(bin())
        .args(["record", "--no-block", "--rotate", "1s", "--keep", "2", "-d", "6s", "--json", "-w"])
        .arg(dir.path())
        .output()
        .unwrap();
    let _ = busy.kill();
    let _ = busy.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let events: Vec<serde_json::Value> =
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let closed = events.iter().filter(|e| e["event"] == "closed").count();
    let deleted = events.iter().filter(|e| e["event"] == "deleted").count();
    assert!(closed >= 3 && deleted == closed - 2, "{events:?}");
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for f in files {
        let mut r = TraceReader::open(&f).unwrap();
        let b = r.read_all().unwrap();
        assert!(!b.is_empty() && r.warnings().is_empty(), "{}: {:?}", f.display(), r.warnings());
        assert_eq!(r.summary().unwrap().events as usize, b.len(), "{}", f.display());
        // A later file starts where its events do.
        let (first, last) = (*b.ts.iter().min().unwrap(), *b.ts.iter().max().unwrap());
        let start = r.header().start_ns;
        assert!((first..=last).contains(&start), "{}: events {first}..={last} ns, start {start} ns", f.display());
    }
}

#[test]
fn flight_options_are_checked_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let file = dir.path().join("f.lst");
    std::fs::write(&file, b"x").unwrap();
    let f = file.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["record", "-w", f, "--trigger", "a: manual"], "--trigger is an option of the flight recorder: add --ring"),
        (&["record", "-w", d, "--ring", "30s"], "needs at least one trigger"),
        (&["record", "-w", f, "--ring", "30s", "--trigger", "a: manual"], "is not a directory"),
        (&["record", "-w", d, "--ring", "30s", "--before", "1m", "--trigger", "a: manual"], "longer than the ring"),
        (&["record", "-w", d, "--ring", "1KiB", "--trigger", "a: manual"], "under the smallest ring"),
        (
            &["record", "-w", d, "--ring", "30s", "--trigger", "a: manual", "--trigger", "a: signal USR1"],
            "two triggers are named 'a'",
        ),
        (&["record", "-w", d, "--ring", "30s", "--trigger", "p99 of fsync over ten > 20ms"], "the window"),
        (&["record", "-w", d, "--ring", "30s", "--rotate", "1GiB"], "cannot be used with"),
        (&["record", "-w", d, "--rotate", "10"], "give a unit"),
        (&["record", "-w", d, "--ring", "30s", "--trigger", "a: manual", "--json=out.json"], "bare --json"),
        (&["trigger", "x", "--socket", "/nonexistent/latscope.sock"], "no flight recorder answered"),
    ];
    for (args, what) in cases {
        let o = latscope(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
    }
    // The caret is under the place.
    let o = latscope(&["record", "-w", d, "--ring", "30s", "--trigger", "p99 of fsnyc over 10s > 20ms"]);
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    let i = lines.iter().position(|l| l.contains("not a syscall")).unwrap_or_else(|| panic!("{err}"));
    assert_eq!(lines[i + 2].find('^'), lines[i + 1].find("fsnyc"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "nothing written");
}

/// `--why-above` and `--stacks` in ring mode, against real probes: a thread waits for a lock
/// another holds 150 ms (tests/why_stacks.c, built with frame pointers); the call trigger fires on
/// the wait, and the dump's `why --stacks` names the futex wait under the workload's own
/// waiting function.
#[test]
fn a_dump_of_a_ring_with_stacks_names_the_stack_of_the_slow_call() {
    if !require_bpf("a_dump_of_a_ring_with_stacks_names_the_stack_of_the_slow_call") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("why_stacks");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/why_stacks.c");
    let st = Command::new("cc")
        .args(["-O2", "-g", "-fno-omit-frame-pointer", "-pthread", "-o"])
        .arg(&work)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let dumps = dir.path().join("dumps");
    std::fs::create_dir(&dumps).unwrap();
    let o = Command::new(bin())
        .args(["record", "--no-block", "--ring", "30s", "--why-above", "2ms", "--stacks", "--after", "1s"])
        .args(["--trigger", "slow: evt.latency > 100ms and evt.type = futex", "--json", "-w"])
        .arg(&dumps)
        .arg("--socket")
        .arg(dir.path().join("t.sock"))
        .arg("--")
        .arg(&work)
        .args(["3", "150"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    // The workload's `key value` lines go to the same output.
    let events: Vec<serde_json::Value> = out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let main = out.lines().find_map(|l| l.strip_prefix("main ")).expect("the workload's main thread").trim();
    let dumped: Vec<&serde_json::Value> = events.iter().filter(|e| e["event"] == "dumped").collect();
    assert_eq!(dumped.len(), 1, "{out}");
    let file = dumped[0]["file"].as_str().unwrap();
    let v = latscope_json(&["why", "-r", file, "--stacks", "--json", &format!("thread.tid = {main}")]);
    let top = &v["stacks"][0];
    let frames = |k: &str| -> Vec<String> {
        top[k].as_array().unwrap_or(&Vec::new()).iter().filter_map(|f| f.as_str().map(String::from)).collect()
    };
    assert_eq!(top["op"], "futex", "{v}");
    assert!(frames("kernel").iter().any(|f| f.starts_with("futex_wait") || f.starts_with("futex_do_wait")), "{v}");
    assert_eq!(frames("user").first().map(String::as_str), Some("wait_for_holder"), "{v}");
}

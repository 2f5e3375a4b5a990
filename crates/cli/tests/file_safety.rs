//! Nothing latscope writes destroys a file the user has: outputs that are the input are refused
//! (directly, through a symlink, through a hard link) before anything is written; `record -w`
//! keeps the file it replaces as FILE.old, creates traces 0600, refuses a second recorder of
//! the same file, and leaves the old file untouched when it fails to start. Each case compares
//! the bytes before and after.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn hash(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A short real recording.
fn recorded(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let o = Command::new(bin())
        .args(["record", "-q", "-w"])
        .arg(&p)
        .args(["--", "sh", "-c", "ls / >/dev/null; cat /etc/hostname >/dev/null"])
        .output()
        .unwrap();
    assert!(o.status.success(), "record: {}", String::from_utf8_lossy(&o.stderr));
    p
}

#[test]
fn an_output_that_is_the_input_is_refused_and_the_input_kept() {
    if !require_bpf("an_output_that_is_the_input_is_refused_and_the_input_kept") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let t = recorded(tmp.path(), "t.lst");
    let before = hash(&t);
    let link = tmp.path().join("link.lst");
    std::os::unix::fs::symlink(&t, &link).unwrap();
    let hard = tmp.path().join("hard.lst");
    std::fs::hard_link(&t, &hard).unwrap();
    let ts = t.to_str().unwrap();
    for out in [&t, &link, &hard] {
        let o = out.to_str().unwrap();
        for args in [
            vec!["heatmap", "-r", ts, "-o", o],
            vec!["hist", "-r", ts, "--svg", o],
            vec!["timeline", "-r", ts, "-o", o],
            vec!["spectrogram", "-r", ts, "--svg", o],
            vec!["top", "-r", ts, "--by", "cause", "--svg", o],
            vec!["why", "-r", ts, "--svg", o],
        ] {
            let r = latscope(&args);
            let err = String::from_utf8_lossy(&r.stderr);
            assert!(!r.status.success(), "{args:?} succeeded");
            assert!(err.contains("would destroy the input"), "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{args:?}: {err}");
            assert_eq!(hash(&t), before, "{args:?} changed the trace");
        }
    }
    // A derived output elsewhere is written whole, with the umask's mode (not the trace's 0600).
    let svg = tmp.path().join("h.svg");
    latscope_ok(&["heatmap", "-r", ts, "-o", svg.to_str().unwrap()]);
    assert!(hash(&svg).starts_with(b"<?xml") || hash(&svg).starts_with(b"<svg"));
    let mode = std::fs::metadata(&svg).unwrap().permissions().mode() & 0o777;
    assert_ne!(mode, 0o600, "derived outputs keep the umask");
}

#[test]
fn record_keeps_the_old_trace_and_makes_new_ones_private() {
    if !require_bpf("record_keeps_the_old_trace_and_makes_new_ones_private") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let t = recorded(tmp.path(), "t.lst");
    assert_eq!(std::fs::metadata(&t).unwrap().permissions().mode() & 0o777, 0o600, "traces are 0600");
    let first = hash(&t);

    // A start that fails (an impossible ring buffer) leaves the file as it was.
    let o = latscope(&["record", "-q", "-w", t.to_str().unwrap(), "--buffer-size", "1", "--", "true"]);
    assert!(!o.status.success());
    assert_eq!(hash(&t), first, "a failed start touched the trace");
    assert!(!tmp.path().join("t.lst.old").exists());

    // A second recording keeps the first as FILE.old, byte for byte.
    recorded(tmp.path(), "t.lst");
    assert_eq!(hash(&tmp.path().join("t.lst.old")), first);
    assert_ne!(hash(&t), first);
    latscope_ok(&["info", "-r", t.to_str().unwrap()]);
}

#[test]
fn a_second_recorder_of_the_same_file_refuses() {
    if !require_bpf("a_second_recorder_of_the_same_file_refuses") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("busy.lst");
    let mut first = Command::new(bin())
        .args(["record", "-q", "-w"])
        .arg(&t)
        .args(["--duration", "30s", "--no-block", "-c", "nothing-here"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first recorder's trace to be in place.
    for _ in 0..300 {
        if t.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(t.exists(), "the first recorder never created its trace");
    let o = latscope(&["record", "-q", "-w", t.to_str().unwrap(), "--duration", "1s", "--no-block"]);
    let err = String::from_utf8_lossy(&o.stderr);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(first.id() as i32, libc::SIGINT) };
    let st = first.wait().unwrap();
    assert!(!o.status.success(), "the second recorder succeeded: {err}");
    assert!(err.contains("lock") || err.contains("another"), "{err}");
    assert!(st.success(), "the first recorder failed");
    // The first recorder's trace is whole and nothing was left as FILE.old by the second.
    latscope_ok(&["info", "-r", t.to_str().unwrap()]);
    assert!(!tmp.path().join("busy.lst.old").exists());
}

/// Every command that writes a file, run by root with its output in a world-writable sticky
/// directory (as /tmp) where another user planted a symlink to a precious file, a dangling
/// symlink, and a hard link to the precious file: each refuses, naming the output (and the
/// symlink's target), the precious file keeps its bytes and mode, and no dangling link's target
/// is created.
#[test]
fn outputs_planted_as_links_in_a_sticky_directory_are_never_written_through() {
    use std::os::unix::fs::MetadataExt;
    let t = tempfile::tempdir().unwrap();
    let trace = t.path().join("t.lst");
    let mut tr = common::replay_trace::T::new();
    tr.open("/app/data", 0o102, 3, 1);
    tr.fdop("pwrite64", 3, 4096, 0, 4096);
    tr.fdop("close", 3, 0, -1, 0);
    tr.write(&trace);
    let plan = t.path().join("p.lsr");
    let root = t.path().join("sb");
    let ts = trace.to_str().unwrap();
    let o = latscope(&["replay", "prepare", "-r", ts, "-o", plan.to_str().unwrap(), "--root", root.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let shared = t.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let precious = t.path().join("precious");
    std::fs::write(&precious, b"keep me").unwrap();
    let mode = std::fs::metadata(&precious).unwrap().mode();
    let missing = t.path().join("made-by-the-link");
    let plant = |target: &Path, link: &Path| {
        std::os::unix::fs::symlink(target, link).unwrap();
        let _ = std::os::unix::fs::lchown(link, Some(65534), Some(65534));
    };
    let mut n = 0;
    for kind in ["symlink", "dangling", "hard"] {
        let mut cmds: Vec<Vec<String>> = vec![
            vec!["heatmap", "-r", ts, "-o", "OUT"],
            vec!["hist", "-r", ts, "--svg", "OUT"],
            vec!["timeline", "-r", ts, "-o", "OUT"],
            vec!["replay", "prepare", "-r", ts, "--root", root.to_str().unwrap(), "-o", "OUT"],
            vec!["export", "-r", ts, "--parquet", "OUT.parquet"],
        ]
        .into_iter()
        .map(|v| v.into_iter().map(String::from).collect())
        .collect();
        if bpf_unavailable().is_none() {
            cmds.push(["record", "-q", "-w", "OUT", "-d", "200ms"].map(String::from).to_vec());
        }
        for args in cmds {
            n += 1;
            let out = shared.join(format!("out{n}"));
            let suffix = if args[0] == "export" { ".parquet" } else { "" };
            let named = PathBuf::from(format!("{}{suffix}", out.display()));
            match kind {
                "symlink" => plant(&precious, &named),
                "dangling" => plant(&missing, &named),
                _ => std::fs::hard_link(&precious, &named).unwrap(),
            }
            let args: Vec<String> = args.iter().map(|a| a.replace("OUT", out.to_str().unwrap())).collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let r = latscope(&args);
            let err = String::from_utf8_lossy(&r.stderr);
            assert!(!r.status.success(), "{kind}: {args:?} succeeded");
            assert!(err.contains(named.to_str().unwrap()), "{kind}: {args:?}: {err}");
            let why = if kind == "hard" { "hard links" } else { "symbolic link (to " };
            assert!(err.contains(why), "{kind}: {args:?}: {err}");
            assert!(!err.contains("panicked"), "{args:?}: {err}");
            assert_eq!(hash(&precious), b"keep me", "{kind}: {args:?} wrote the precious file");
            assert_eq!(std::fs::metadata(&precious).unwrap().mode(), mode, "{kind}: {args:?}");
            assert!(!missing.exists(), "{kind}: {args:?} created the dangling link's target");
        }
    }
    // replay run --stats and the store, through a planted symlink too.
    let stats = shared.join("stats.json");
    plant(&precious, &stats);
    let r =
        latscope(&["replay", "run", plan.to_str().unwrap(), "--init", "--quiet", "--stats", stats.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success() && err.contains("symbolic link (to "), "{err}");
    assert_eq!(hash(&precious), b"keep me");
}

/// `record -w FIFO` with nobody reading is refused at once (not a hang in open() with the
/// probes attached, deaf to Ctrl-C and -d), and a recording whose reader closes the pipe
/// (`record -w - | head -c 10`) says so and exits non-zero, its command stopped.
#[test]
fn a_fifo_without_a_reader_and_a_closed_pipe_are_reported() {
    if !require_bpf("a_fifo_without_a_reader_and_a_closed_pipe_are_reported") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("p");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut child = Command::new(bin())
        .args(["record", "-q", "-d", "60s", "-w"])
        .arg(&fifo)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("record -w FIFO without a reader is still waiting after 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(!status.success() && err.contains("FIFO with no reader"), "{status:?}: {err}");

    // A closed pipe: the reader takes 10 bytes and leaves.
    let marker = tmp.path().join("still-running");
    let script = format!("while :; do ls / >/dev/null; sleep 0.01; done; touch {}", marker.display());
    let mut child = Command::new(bin())
        .args(["record", "-q", "-d", "60s", "-w", "-", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut ten = [0u8; 10];
    std::io::Read::read_exact(&mut out, &mut ten).unwrap();
    drop(out);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "exit 0 after the reader left: {err}");
    assert!(err.contains("closed the pipe") && err.to_lowercase().contains("broken pipe"), "{err}");
    // The recorded command was stopped with the recording (its loop never ends by itself).
    let comm_left = std::process::Command::new("pgrep").args(["-f", &script]).output().unwrap();
    assert!(comm_left.stdout.is_empty(), "the recorded command is still running");
}

/// Unmounts a file system mounted by a test, whatever happens to the test.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A trace disk that fills up ends the recording with the error, says that the recorded command
/// was stopped with it (pid and signal), and leaves the blocks already written readable.
#[test]
fn a_full_trace_disk_says_the_command_was_stopped_and_keeps_what_was_written() {
    if !require_bpf("a_full_trace_disk_says_the_command_was_stopped_and_keeps_what_was_written") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let st = Command::new("mount").args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"]).arg(&mnt).status().unwrap();
    assert!(st.success(), "mount tmpfs");
    let _guard = Mounted(mnt.clone());
    let trace = mnt.join("t.lst");
    // A command that never ends by itself: only the recording's end can stop it.
    let marker = tmp.path().join("finished");
    let script =
        format!("i=0; while [ $i -lt 100000 ]; do ls / >/dev/null; i=$((i+1)); done; touch {}", marker.display());
    let o = Command::new(bin())
        .args(["record", "-q", "-w"])
        .arg(&trace)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a full disk must fail the recording: {err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains("stopped, and with it the recorded command (pid "), "the command's stop is not said: {err}");
    assert!(err.contains("stay readable"), "{err}");
    assert!(!marker.exists(), "the command ran to its end although the recording failed");
    let info = Command::new(bin()).args(["info", "--json", "-r"]).arg(&trace).output().unwrap();
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.status.success(),
        "the blocks written before the disk filled are unreadable: {}",
        String::from_utf8_lossy(&info.stderr)
    );
    let j: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("info --json: {e}: {text}"));
    assert!(j["events"].as_u64().unwrap_or(0) > 0, "no events kept: {text}");
}

/// A reader that opened the FIFO (or the pipe) and takes nothing cannot hold the recording:
/// `--duration` and Ctrl-C end it, a few seconds later at most, with a message saying the
/// reader was given up.
#[test]
fn a_reader_that_stops_reading_cannot_hold_the_recording_past_its_end() {
    if !require_bpf("a_reader_that_stops_reading_cannot_hold_the_recording_past_its_end") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("p");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // The reader: opens the FIFO and never reads (held open by this test).
    let opener = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::File::open(fifo).unwrap())
    };
    let wait = |mut child: std::process::Child, what: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
                return (st, err);
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("{what}: still running 60 s after its end with a reader that reads nothing");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let loop_cmd = ["--", "sh", "-c", "while :; do ls / >/dev/null; done"];
    let child = Command::new(bin())
        .args(["record", "-q", "-d", "2s", "-w"])
        .arg(&fifo)
        .args(loop_cmd)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let held = opener.join().unwrap();
    let (st, err) = wait(child, "record -d 2s -w FIFO");
    assert!(!st.success() && err.contains("the reader took nothing"), "{st:?}: {err}");
    drop(held);

    // The same on a pipe, ended by SIGINT: the pipe's reader (kept by this test) reads nothing.
    let mut child = Command::new(bin())
        .args(["record", "-q", "-w", "-"])
        .args(loop_cmd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _pipe = child.stdout.take().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill on our child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let (st, err) = wait(child, "record -w - after SIGINT");
    assert!(!st.success() && err.contains("the reader took nothing"), "{st:?}: {err}");
}

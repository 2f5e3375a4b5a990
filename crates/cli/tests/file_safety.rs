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

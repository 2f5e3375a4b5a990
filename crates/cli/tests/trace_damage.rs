//! Damaged trace files at the command line: a file cut short reads up to its last complete block
//! with a warning; a corrupted block is reported with its offset and a non-zero exit; nothing
//! panics; bad arguments get a clear message.

mod common;
use common::*;
use std::process::Command;

/// A real recording of a short command (needs BPF), as bytes.
fn recorded(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    if !require_bpf("trace_damage") {
        return None;
    }
    let t = dir.join("orig.lst");
    let o = Command::new(bin())
        .args(["record", "-w"])
        .arg(&t)
        .args([
            "--quiet",
            "--",
            "sh",
            "-c",
            "for i in 1 2 3 4 5 6 7 8; do ls -R /usr/share/doc >/dev/null; sleep 0.3; done",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some(t)
}

#[test]
fn truncated_and_corrupted_files() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(orig) = recorded(tmp.path()) else { return };
    let bytes = std::fs::read(&orig).unwrap();
    let total: usize = latscope_ok(&["events", "-r", orig.to_str().unwrap()]).lines().count();
    assert!(total > 100);

    // Cut at 60%: fewer events, a warning, exit 0, no panic.
    let cut = tmp.path().join("cut.lst");
    std::fs::write(&cut, &bytes[..bytes.len() * 6 / 10]).unwrap();
    let o = latscope(&["events", "-r", cut.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let n = String::from_utf8_lossy(&o.stdout).lines().count();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(n < total, "cut file has fewer events ({n} of {total})");
    assert!(err.contains("warning"), "a warning says the file is cut short: {err}");
    assert!(!err.contains("panicked"));
    let info = latscope(&["info", "-r", cut.to_str().unwrap()]);
    assert!(info.status.success());
    assert!(String::from_utf8_lossy(&info.stdout).contains("not closed cleanly"));

    // Flip bytes in the middle of the file: an error naming a byte offset, non-zero exit, no panic.
    // A reader checks the buffers of the columns it reads (a block's body checksum is checked by
    // readers of every column): 16 bytes at every 4 KiB of the middle fifth damage some column
    // `events` prints, wherever the blocks' buffers happen to lie.
    let bad = tmp.path().join("bad.lst");
    let mut b = bytes.clone();
    for at in (b.len() * 2 / 5..b.len() * 3 / 5).step_by(4096) {
        for x in &mut b[at..at + 16] {
            *x ^= 0x5a;
        }
    }
    std::fs::write(&bad, &b).unwrap();
    let o = latscope(&["events", "-r", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a corrupt block makes the exit non-zero");
    assert!(err.contains("offset") || err.contains("byte"), "the message names the place: {err}");
    assert!(!err.contains("panicked"));

    // spectrogram -r says the same as the other readers: a warning for the cut file (exit 0)...
    let o = latscope(&["spectrogram", "-r", cut.to_str().unwrap(), "--plain", "--no-pace"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("warning") && err.contains("not closed cleanly"), "spectrogram warns on a cut file: {err}");
    // ... and an error with a non-zero exit for damage in the columns it reads (a byte in every
    // KiB of the middle fifth of the file: every buffer there, `ts` and `lat` included).
    let worse = tmp.path().join("worse.lst");
    let mut w = bytes.clone();
    for i in (w.len() * 2 / 5..w.len() * 3 / 5).step_by(1024) {
        w[i] ^= 0xff;
    }
    std::fs::write(&worse, &w).unwrap();
    let o = latscope(&["spectrogram", "-r", worse.to_str().unwrap(), "--plain", "--no-pace"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "spectrogram -r exits non-zero on corrupt blocks: {err}");
    assert!(err.contains("corrupt") && err.contains("byte"), "names the place: {err}");
    assert!(!err.contains("panicked"));

    // A trace given as text input says what it is.
    for input in ["perf", "text"] {
        let o = latscope(&["hist", "--input", input, "-r", orig.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert!(err.contains("this is a latscope trace") && err.contains("drop --input"), "--input {input}: {err}");
    }

    // Not a trace at all.
    let junk = tmp.path().join("junk.lst");
    std::fs::write(&junk, b"time latency\n1 2\n").unwrap();
    let o = latscope(&["info", "-r", junk.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("junk.lst"), "names the file: {err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn bad_arguments_and_filters() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing.lst");
    let o = latscope(&["events", "-r", missing.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.lst"));

    let o = latscope(&["events", "-r", missing.to_str().unwrap(), "proc.nme = x"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("proc.name"), "suggests the right field: {err}");
    assert!(err.contains('^'), "caret under the column: {err}");

    let o = latscope(&["record"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--write"));

    let o = latscope(&["record", "-w", "/tmp/x.lst", "--duration", "5 parsecs"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("parsecs"));

    // A recording where the filter goes, without -r: every command reading with -r says what to
    // type, before clap asks for --read and before top starts a live session.
    let trace = tmp.path().join("trace.lst");
    std::fs::write(&trace, b"").unwrap();
    let t = trace.to_str().unwrap();
    for args in [&["hist", t][..], &["top", t], &["hist", "--by", "syscall", t], &["heatmap", "later.lst"]] {
        let o = latscope(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        let name = args.last().unwrap();
        assert!(err.contains(&format!("to read a recording, use -r {name}")), "{args:?}: {err}");
        assert!(!err.contains("--read <FILE>") && !err.contains("unknown field"), "{args:?}: {err}");
    }
    // The value of an option is no filter.
    let o = latscope(&["hist", "--svg", t]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("stands where the filter goes"));

    for cmd in ["record", "events", "info", "fields"] {
        let h = latscope_ok(&[cmd, "--help"]);
        assert!(h.contains("Examples:"), "{cmd} --help has examples");
    }
}

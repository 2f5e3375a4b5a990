//! The start of a recording: the line that says it started (terminal or not), and files opened
//! while the probes load (before they could see the open) or in the command's first
//! milliseconds are named all the same.

mod common;
use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn every_fd_open_when_recording_starts_is_named() {
    if !require_bpf("every_fd_open_when_recording_starts_is_named") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let opener = compile_c("opener.c", tmp.path());
    let (early, cmd_dir) = (tmp.path().join("early"), tmp.path().join("cmd"));
    std::fs::create_dir(&early).unwrap();
    std::fs::create_dir(&cmd_dir).unwrap();
    // A process that keeps opening files while the probes load: a new one every 5 ms, each
    // written to every round after.
    let mut bg = Command::new(&opener).arg(&early).args(["400", "5", "0"]).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let trace = tmp.path().join("t.lst");
    let mut rec = Command::new(bin())
        .args(["record", "--no-block", "-w"])
        .arg(&trace)
        .args(["-p", &bg.id().to_string(), "--"])
        // The command opens a file each millisecond from its start, 20 in all, then writes on.
        .arg(&opener)
        .arg(&cmd_dir)
        .args(["20", "1", "60"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let opened_at_spawn = std::fs::read_dir(&early).unwrap().count();
    let mut err = BufReader::new(rec.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    // Said on stderr although it is a pipe, not a terminal.
    assert!(first.starts_with("latscope: recording to ") && first.contains(" since "), "{first}");
    let opened_at_attach = std::fs::read_dir(&early).unwrap().count();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let st = rec.wait().unwrap();
    let _ = bg.kill();
    let _ = bg.wait();
    assert!(st.success(), "{first}{rest}");

    let writes = |filter: &str| -> Vec<Value> {
        let o = Command::new(bin()).args(["events", "--json", "-r"]).arg(&trace).arg(filter).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o.stdout.lines().map(|l| serde_json::from_str(&l.unwrap()).unwrap()).collect()
    };
    let all = writes("evt.type = write");
    let paths = |dir: &std::path::Path| -> std::collections::BTreeSet<String> {
        let d = dir.to_string_lossy().into_owned();
        all.iter().filter_map(|e| e["path"].as_str()).filter(|p| p.starts_with(&d)).map(String::from).collect()
    };
    assert_eq!(paths(&cmd_dir).len(), 20, "the command's files, each written to");
    // Files the early process opened while the probes loaded (after record started, before it
    // said so) were written to and named.
    assert!(opened_at_attach > opened_at_spawn, "no file opened during the load ({opened_at_spawn} files)");
    assert!(paths(&early).len() >= opened_at_attach, "{} of {opened_at_attach}", paths(&early).len());
    let unnamed: Vec<_> = all.iter().filter(|e| e["path"].as_str().unwrap_or("").is_empty()).collect();
    assert!(unnamed.is_empty(), "{} of {} writes on an unnamed fd: {:?}", unnamed.len(), all.len(), unnamed.first());
    assert!(writes("fd.named = false").is_empty());
    assert_eq!(writes("evt.type = write and fd.named = true").len(), all.len());
}

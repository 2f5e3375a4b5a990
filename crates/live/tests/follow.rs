//! Following processes keeps the kernel's pid filter bounded: each child forked below a
//! followed process is in it while it lives and leaves it when it exits.

mod common;

use common::can_trace;
use latscope_live::{SessionBuilder, SyscallSet};
use std::process::Command;
use std::time::Duration;

#[test]
fn followed_children_leave_the_pid_filter_when_they_exit() {
    if !can_trace("followed_children_leave_the_pid_filter_when_they_exit") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let go = tmp.path().join("go");
    let done = tmp.path().join("done");
    // 300 short-lived children (fork, exit), one long-lived (sleep), then a flag; the script
    // waits to be told to end.
    let script = format!(
        "while [ ! -e {go} ]; do sleep 0.05; done; i=0; while [ $i -lt 300 ]; do (:); i=$((i+1)); done; \
         sleep 600 & : > {done}; wait",
        go = go.display(),
        done = done.display()
    );
    let mut sh = Command::new("sh").arg("-c").arg(&script).spawn().unwrap();
    let session = SessionBuilder::new()
        .syscalls(SyscallSet::Io)
        .block(false)
        .ring_bytes(1 << 20)
        .pids(vec![sh.id()])
        .follow(true)
        .stop_on(&[])
        .start()
        .expect("session starts");
    // The script and the `sleep 0.05` it may be running.
    assert!((1..=2).contains(&session.followed_now()), "{}", session.followed_now());
    std::fs::write(&go, b"").unwrap();
    for _ in 0..1200 {
        if done.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(done.exists(), "the script ran its children");
    // 300 children came and went: the script and its sleep are left.
    assert_eq!(session.followed_now(), 2);
    assert_eq!(session.stats().not_followed, 0);
    // End the sleep, by its pid (the script's only child now), and the script with it.
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", sh.id())).unwrap();
    for pid in children.split_whitespace() {
        // SAFETY: signalling a process this test started (the script's child).
        unsafe { libc::kill(pid.parse().unwrap(), libc::SIGTERM) };
    }
    sh.wait().unwrap();
    assert_eq!(session.followed_now(), 0, "the followed process left the filter when it exited");
}

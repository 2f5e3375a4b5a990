//! Both ways of naming fds in the kernel give the same answers: the fast one (bpf_rdonly_cast,
//! Linux 6.2 and later) and the one for older kernels (probe reads), forced here with
//! `compat_fd_naming`. A known workload: 20 writes of 4096 bytes to a file, reads from
//! /dev/zero, a TCP connection to a listener of this test, a pipe.

mod common;

use common::can_trace;
use latscope_event::{FdType, SyscallSet};
use latscope_probe::{features, snapshot, Probe, ProbeConfig};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the probes saw of the workload: (syscall, fd type, file inode, bytes) of the writes to
/// the file, the fd types of reads and of the connect, the pipe's.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    file_writes: Vec<(FdType, u64, u64)>,
    zero_reads: usize,
    connect: Vec<FdType>,
    pipe_writes: usize,
}

fn run_workload(compat: bool) -> Seen {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Waits for a line on stdin (the probes are attached by then), then runs the workload.
    let script = format!(
        "read _; exec 3<>/dev/tcp/127.0.0.1/{port}; exec 3>&-; echo piped | cat >/dev/null; \
         exec dd if=/dev/zero of={} bs=4096 count=20 status=none",
        out.display()
    );
    let mut child = Command::new("bash").arg("-c").arg(&script).stdin(Stdio::piped()).spawn().unwrap();
    let header = snapshot::take(vec![], SyscallSet::All, true, None);
    let cfg = ProbeConfig {
        pids: vec![child.id()],
        follow_children: true,
        block: false,
        compat_fd_naming: compat,
        // The variant for older kernels with attribution too: recordings take it there, and
        // this kernel's verifier checks it here (the CLI's tests take the fast one).
        why_above_ns: compat.then_some(0),
        ..Default::default()
    };
    let mut probe = Probe::start(&cfg, &header).unwrap_or_else(|e| panic!("probes load (compat {compat}): {e}"));
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let _conn = listener.accept().unwrap();
    assert!(child.wait().unwrap().success());
    let meta = std::fs::metadata(&out).unwrap();
    let (dev, ino) = (snapshot::kdev(meta.dev()), meta.ino());
    let mut seen = Seen { file_writes: vec![], zero_reads: 0, connect: vec![], pipe_writes: 0 };
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.file_writes.len() < 20 && Instant::now() < deadline {
        let b = probe.poll(Duration::from_millis(200)).unwrap();
        for i in 0..b.len() {
            let e = b.get(i);
            match e.op_name().as_str() {
                "write" if (e.dev, e.ino) == (dev, ino) => seen.file_writes.push((e.fd_kind(), e.ino, e.bytes)),
                "write" if e.fd_kind() == FdType::Pipe => seen.pipe_writes += 1,
                "read" if e.fd_kind() == FdType::Chardev => seen.zero_reads += 1,
                "connect" => seen.connect.push(e.fd_kind()),
                _ => {}
            }
        }
    }
    seen
}

#[test]
fn both_fd_naming_paths_name_the_same_fds() {
    if !can_trace("both_fd_naming_paths_name_the_same_fds") {
        return;
    }
    let compat = run_workload(true);
    assert_eq!(compat.file_writes.len(), 20, "{compat:?}");
    assert!(compat.file_writes.iter().all(|&(t, _, bytes)| t == FdType::File && bytes == 4096), "{compat:?}");
    assert!(compat.zero_reads >= 20, "{compat:?}");
    assert_eq!(compat.connect, vec![FdType::Ipv4], "{compat:?}");
    assert!(compat.pipe_writes >= 1, "{compat:?}");
    if !features::KernelFeatures::probe().has(features::key::RDONLY_CAST) {
        eprintln!("this kernel has no bpf_rdonly_cast: only the probe-read path was checked");
        return;
    }
    let fast = run_workload(false);
    assert_eq!(
        (fast.file_writes.len(), fast.zero_reads >= 20, &fast.connect, fast.pipe_writes >= 1),
        (20, true, &compat.connect, true),
        "{fast:?}"
    );
    assert!(fast.file_writes.iter().all(|&(t, _, bytes)| t == FdType::File && bytes == 4096), "{fast:?}");
}

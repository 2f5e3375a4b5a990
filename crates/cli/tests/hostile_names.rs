//! What the recorded machine's users choose (command lines, library names and paths, cgroup
//! tables) at the command line: a recording stays readable, names are escaped in every output,
//! no file a stack names makes a reader wait or read outside `--binaries`, and crafted tables
//! stay cheap to read.

mod common;

use common::*;
use latscope_event::{CgroupInfo, Event, EventBatch, EventKind, Frame, StackEntry, StackKind};
use latscope_trace::{synth, Summary, TraceWriter};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A library named to attack terminals and parsers.
const EVIL: &str = "lib/\x1b[31mEVIL\x1b]0;t\x07\nname.so";

/// A trace with one blocked call whose user stack runs through `file` (and a kernel stack), by a
/// command named with control characters and a `;`.
fn trace_with_frame(dir: &Path, file: &str) -> PathBuf {
    let path = dir.join("t.lst");
    let k = StackEntry {
        id: 1,
        kind: StackKind::Kernel,
        frames: vec![Frame { addr: 0xffff_ffff_8100_0000, sym: Some("futex_wait+0x67".into()), ..Default::default() }],
        truncated: false,
        missing: None,
        cut: None,
    };
    let u = StackEntry {
        id: 2,
        kind: StackKind::User,
        frames: vec![
            Frame { addr: 0x1000, file: Some(file.into()), off: Some(0x10), ..Default::default() },
            Frame { addr: 0x2000, file: Some(format!("/opt/{EVIL}")), off: Some(0x20), ..Default::default() },
        ],
        truncated: false,
        missing: None,
        cut: None,
    };
    let mut b = EventBatch::default();
    b.push(&Event {
        kind: EventKind::Syscall as u8,
        nr: latscope_event::syscall_nr("read").unwrap(),
        ts: 1_000_000,
        lat: 3_000_000,
        why_io: 3_000_000,
        kstack: 1,
        ustack: 2,
        pid: 7,
        tid: 7,
        comm: "a;b\x1b[2J".into(),
        fd: -1,
        dirfd: -1,
        off: -1,
        off2: -1,
        ..Default::default()
    });
    b.stacks = k.to_line() + &u.to_line();
    let mut w = TraceWriter::create(&path, &synth::sample_header()).unwrap();
    w.write_batch(&b, 0).unwrap();
    w.finish(Summary::default()).unwrap();
    path
}

/// Run latscope, killing it (and failing) if it has not finished within `limit`: a reader that
/// waits on a FIFO never would.
fn latscope_within(args: &[&str], limit: Duration) -> std::process::Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("latscope {args:?} still ran after {limit:?}: it waits on something");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(p: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// `why --folded -` printed raw ESC and BEL bytes, and `why --flame` wrote SVG that was not
/// well-formed XML: every frame is escaped by one rule (one stack per line), and the flame graph
/// is well-formed XML without a character XML forbids (checked by Python's XML parser).
#[test]
fn why_folded_and_flame_escape_hostile_names() {
    let tmp = tempfile::tempdir().unwrap();
    let t = trace_with_frame(tmp.path(), &format!("/srv/{EVIL}"));
    let t = t.to_str().unwrap();
    let o = latscope(&["why", "-r", t, "--folded", "-"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!o.stdout.iter().any(|&b| b < 0x20 && b != b'\n'), "{:?}", String::from_utf8_lossy(&o.stdout));
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), 1, "{out:?}");
    let (stack, us) = out.trim_end().rsplit_once(' ').unwrap();
    assert_eq!(us, "3000");
    assert_eq!(stack.split(';').count(), 4, "{stack}");
    assert!(stack.starts_with("a\\x3bb\\x1b[2J;"), "{stack}");
    assert!(stack.contains("\\x1b[31mEVIL\\x1b]0\\x3bt\\x07\\nname.so+0x20"), "{stack}");

    let svg = tmp.path().join("f.svg");
    latscope_ok(&["why", "-r", t, "--flame", svg.to_str().unwrap()]);
    let bytes = std::fs::read(&svg).unwrap();
    assert!(!bytes.iter().any(|&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t')));
    if require_tool("why_folded_and_flame_escape_hostile_names", "python3") {
        let st = Command::new("python3")
            .args(["-c", "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])"])
            .arg(&svg)
            .status()
            .unwrap();
        assert!(st.success(), "the flame graph is not well-formed XML");
    }
    // The text view and JSON: nothing a terminal acts on.
    let text = latscope_ok(&["why", "-r", t, "--stacks"]);
    assert!(!text.bytes().any(|b| b < 0x20 && b != b'\n'), "{text:?}");
    let json = latscope_ok(&["why", "-r", t, "--stacks", "--json"]);
    assert!(!json.bytes().any(|b| b < 0x20 && b != b'\n'), "{json:?}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["stacks"][0]["comm"], "a;b\x1b[2J");
}

/// A user frame's file naming a FIFO hung `why --stacks`, `--flame`, `--folded` and `export`
/// (opening it waited for a writer); a device would be read without end. Both are refused at
/// once, with a note, and the frames shown as file offsets.
#[test]
fn a_frame_file_naming_a_fifo_or_a_device_makes_no_reader_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("libfifo.so");
    mkfifo(&fifo);
    for file in [fifo.to_str().unwrap(), "/dev/zero"] {
        let dir = tempfile::tempdir().unwrap();
        let t = trace_with_frame(dir.path(), file);
        let t = t.to_str().unwrap();
        let limit = Duration::from_secs(60);
        let o = latscope_within(&["why", "-r", t, "--stacks"], limit);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
        assert!(text.contains("not a regular file ("), "{text}");
        let f = dir.path().join("f.svg");
        let o = latscope_within(&["why", "-r", t, "--folded", "-", "--flame", f.to_str().unwrap()], limit);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = dir.path().join("x.parquet");
        let o = latscope_within(&["export", "-r", t, "--parquet", out.to_str().unwrap(), "--quiet"], limit);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}

/// A binary's debug link is a name its builder chose: one naming a FIFO beside it (or a DWARF
/// package, `libw.so.dwp`, that is one) made the symbolizer wait for a writer. The debug file
/// is looked for by the rules binaries are opened by, and the symbolizer reads copies that
/// have no neighbours.
#[test]
fn a_debug_link_naming_a_fifo_makes_no_reader_wait() {
    let test = "a_debug_link_naming_a_fifo_makes_no_reader_wait";
    if !latscope_testkit::require_tool(test, "cc") || !latscope_testkit::require_tool(test, "objcopy") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("lib.c");
    std::fs::write(&src, "int work(int x) { return x * 3; }\n").unwrap();
    let so = tmp.path().join("libw.so");
    let link = tmp.path().join("libw.debug");
    let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
    ok(Command::new("cc").args(["-O2", "-shared", "-fPIC", "-Wl,--build-id=none", "-o"]).arg(&so).arg(&src));
    std::fs::write(&link, b"x").unwrap();
    ok(Command::new("objcopy").arg(format!("--add-gnu-debuglink={}", link.display())).arg(&so));
    std::fs::remove_file(&link).unwrap();
    mkfifo(&link);
    mkfifo(&tmp.path().join("libw.so.dwp"));
    let dir = tempfile::tempdir().unwrap();
    let t = trace_with_frame(dir.path(), so.to_str().unwrap());
    let o = latscope_within(&["why", "-r", t.to_str().unwrap(), "--stacks"], Duration::from_secs(60));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A newline in a process's name, a waker's or lock holder's name or a file's path split the
/// lines of `why`, `top --by lock` and `timeline --threads` before they were escaped: the rest of
/// the name read as a line of latscope's own. Every name is escaped where it is written.
#[test]
fn a_newline_in_a_name_forges_no_line_of_why_locks_or_threads() {
    const FORGED: &str = "FORGED 99% of the time";
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t.lst");
    let (lo, hi) = latscope_event::comm_to_words(&format!("h\n{}", &FORGED[..6]));
    let base = Event {
        kind: EventKind::Syscall as u8,
        ts: 1_000_000,
        pid: 7,
        tid: 7,
        comm: format!("a\n{}", &FORGED[..6]),
        waker_ctx: 1,
        waker_tid: 8,
        waker_comm_lo: lo,
        waker_comm_hi: hi,
        wake_flags: latscope_event::wake_flags::KNOWN | latscope_event::wake_flags::TRACED,
        fd: -1,
        dirfd: -1,
        off: -1,
        off2: -1,
        ..Default::default()
    };
    let mut b = EventBatch::default();
    // A read of a file named to forge a line, its time in block I/O and a page fault in another.
    b.push(&Event {
        nr: latscope_event::syscall_nr("read").unwrap(),
        lat: 3_000_000,
        why_io: 2_000_000,
        why_fault: 1_000_000,
        path: format!("/d\n{FORGED}"),
        fault_addr: 0x7f00_0000_1000,
        fault_path: format!("/f\n{FORGED}"),
        ..base.clone()
    });
    // A wait for an fcntl lock on such a file, held by such a thread.
    b.push(&Event {
        nr: latscope_event::syscall_nr("fcntl").unwrap(),
        ts: 5_000_000,
        lat: 2_000_000,
        why_lock: 2_000_000,
        lock_kind: 3,
        lock_op: 7,
        lock_len: 1,
        lock_word: 1,
        path: format!("/db\n{FORGED}"),
        ..base
    });
    let mut w = TraceWriter::create(&path, &synth::sample_header()).unwrap();
    w.write_batch(&b, 0).unwrap();
    w.finish(Summary::default()).unwrap();
    let t = path.to_str().unwrap();
    for args in [
        &["why", "-r", t][..],
        &["why", "-r", t, "--waits"],
        &["top", "-r", t, "--by", "lock"],
        &["timeline", "-r", t, "--threads"],
    ] {
        let out = latscope_ok(args);
        assert!(!out.lines().any(|l| l.trim_start().starts_with(&FORGED[..6])), "{args:?}: {out}");
    }
    let threads = latscope_ok(&["timeline", "-r", t, "--threads"]);
    assert!(threads.contains(r"a\nFORGED/7 |"), "{threads}");
    let why = latscope_ok(&["why", "-r", t]);
    for name in [r"/d\nFORGED 99%", r"/f\nFORGED 99%", r"h\nFORGED/8"] {
        assert!(why.contains(name), "{name} in {why}");
    }
    let locks = latscope_ok(&["top", "-r", t, "--by", "lock"]);
    for name in [r"/db\nFORGED 99%", r"held by h\nFORGED/8"] {
        assert!(locks.contains(name), "{name} in {locks}");
    }
}

/// `--binaries DIR` with a recorded path `../../..` read a file outside DIR: `..` is refused,
/// and a symlink inside DIR resolves inside it (as in a chroot), never to the host's file.
#[test]
fn binaries_dir_is_never_left() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("copy");
    std::fs::create_dir_all(root.join("lib")).unwrap();
    // A real ELF file outside the directory: were it read, its frames would be named.
    let outside = tmp.path().join("outside.so");
    std::fs::copy(bin(), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("lib/link.so")).unwrap();
    for (file, note) in [("/lib/../../outside.so", "`..`"), ("/lib/link.so", "is not at hand")] {
        let dir = tempfile::tempdir().unwrap();
        let t = trace_with_frame(dir.path(), file);
        let out = latscope_ok(&["why", "-r", t.to_str().unwrap(), "--stacks", "--binaries", root.to_str().unwrap()]);
        assert!(out.contains(note), "{file}: {out}");
        assert!(out.contains("+0x10"), "{file}: {out}");
    }
}

/// A crafted header with a quarter of a million cgroups, and as many cgroups among its events,
/// once made `top --by cgroup` search the table for each (quadratic); it looks them up by id.
#[test]
fn top_by_cgroup_of_a_crafted_cgroup_table_finishes() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t.lst");
    let n = 250_000u64;
    let mut h = synth::sample_header();
    h.cgroups = (0..n).map(|i| CgroupInfo { id: 100 + i, path: format!("/c{i}"), ..Default::default() }).collect();
    let mut b = EventBatch::default();
    for i in 0..n {
        b.push(&Event {
            kind: EventKind::Syscall as u8,
            nr: 0,
            ts: 1000 + i,
            lat: 1000 + (i % 7),
            cgroup: 100 + (n - 1 - i),
            fd: -1,
            dirfd: -1,
            off: -1,
            off2: -1,
            ..Default::default()
        });
    }
    let mut w = TraceWriter::create(&path, &h).unwrap();
    w.write_batch(&b, 0).unwrap();
    w.finish(Summary::default()).unwrap();
    let out = latscope_ok(&["top", "-r", path.to_str().unwrap(), "--by", "cgroup", "-n", "3"]);
    assert!(out.contains("/c"), "{out}");
}

/// 40 processes with 1.95 MB command lines made every recording's header 78 MB, which every
/// reader refused: a real recording with them running reads, with their command lines cut and
/// counted.
#[test]
fn processes_with_huge_command_lines_leave_recordings_readable() {
    if !require_bpf("processes_with_huge_command_lines_leave_recordings_readable") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // 15 arguments of 130,000 bytes each (an argument may have 128 KiB).
    let arg = "y".repeat(130_000);
    let mut kids = Vec::new();
    for _ in 0..40 {
        // `; :` keeps the shell (and its command line) alive rather than exec'ing sleep.
        kids.push(Command::new("sh").args(["-c", "sleep 30; :", "sh"]).args(vec![&arg; 15]).spawn().unwrap());
    }
    std::thread::sleep(Duration::from_millis(300));
    let t = tmp.path().join("t.lst");
    let o = Command::new(bin())
        .args(["record", "-w"])
        .arg(&t)
        .args(["--quiet", "--no-block", "--", "true"])
        .output()
        .unwrap();
    for mut k in kids {
        let _ = k.kill();
        let _ = k.wait();
    }
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let info = latscope_ok(&["info", "-r", t.to_str().unwrap()]);
    assert!(info.contains("truncated:   header: 40 values cut short"), "{info}");
    let v = latscope_json(&["info", "-r", t.to_str().unwrap(), "--json", "-v"]);
    let cut: Vec<&str> = v["header"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["cmdline"].as_str())
        .filter(|c| c.starts_with("sh -c sleep 30; : sh yyy"))
        .collect();
    assert_eq!(cut.len(), 40);
    assert!(cut.iter().all(|c| c.len() <= 32 << 10 && c.contains("…[cut ")), "{}", &cut[0][cut[0].len() - 40..]);
}

/// A library deleted while its code ran was recorded under its path as if still there (the
/// " (deleted)" of /proc/PID/maps dropped): a recorded user frame in it says so, and `why`
/// shows it.
#[test]
fn a_library_deleted_while_mapped_is_shown_as_deleted() {
    if !require_bpf("a_library_deleted_while_mapped_is_shown_as_deleted")
        || !require_tool("a_library_deleted_while_mapped_is_shown_as_deleted", "cc")
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // The blocking call is made from the library itself (a raw syscall, no libc wrapper), so
    // the stack's innermost frame is in it.
    std::fs::write(
        d.join("slow.c"),
        "#include <time.h>\n\
         void slow(void) { struct timespec t = {0, 30000000}; long r;\n\
         __asm__ volatile (\"syscall\" : \"=a\"(r) : \"a\"(35L), \"D\"(&t), \"S\"(0L) : \"rcx\", \"r11\", \"memory\"); (void)r; }\n",
    )
    .unwrap();
    std::fs::write(
        d.join("main.c"),
        "#include <dlfcn.h>\n#include <unistd.h>\n#include <stdio.h>\n\
         int main(int c, char **v) { void *h = dlopen(v[1], RTLD_NOW); if (!h) { puts(dlerror()); return 1; }\n\
         void (*f)(void) = (void (*)(void))dlsym(h, \"slow\"); unlink(v[1]);\n\
         for (int i = 0; i < 5; i++) f(); return 0; }\n",
    )
    .unwrap();
    let lib = d.join("libslow.so");
    for (args, what) in [
        (vec!["-shared", "-fPIC", "-O1", "-fno-omit-frame-pointer", "-o", lib.to_str().unwrap(), "slow.c"], "libslow"),
        (vec!["-O1", "-fno-omit-frame-pointer", "-o", "main", "main.c", "-ldl"], "main"),
    ] {
        let st = Command::new("cc").args(&args).current_dir(d).status().unwrap();
        assert!(st.success(), "compiling {what}");
    }
    let t = d.join("t.lst");
    let o = Command::new(bin())
        .args(["record", "-w"])
        .arg(&t)
        .args(["--why-above", "10ms", "--stacks", "--quiet", "--no-block", "--"])
        .arg(d.join("main"))
        .arg(&lib)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!lib.exists());
    let v = latscope_json(&["why", "-r", t.to_str().unwrap(), "--stacks", "--waits", "--json"]);
    let user: Vec<String> = v["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["user"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()))
        .collect();
    assert!(user.iter().any(|f| f.starts_with("libslow.so (deleted)+0x")), "{user:?}");
}

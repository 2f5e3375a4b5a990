//! `latscope replay` on hand-written traces and plans (no BPF needed): the command line end to
//! end, and hostile input: path traversal, device nodes, /proc, symlinks planted in the sandbox
//! between prepare and run, truncated, bit-flipped and forged plans. Each is refused with a clear
//! message, and a decoy tree outside the sandbox is hashed before and after: nothing there may
//! change.

mod common;
use common::replay_trace::T;
use common::*;
use std::path::{Path, PathBuf};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every file under `dir` with its bytes, mode and link target: changes to any show.
fn hash_tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut es: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()).collect();
        es.sort();
        for p in es {
            let md = std::fs::symlink_metadata(&p).unwrap();
            use std::os::unix::fs::MetadataExt;
            let mut sig = format!("{:o} {} {}", md.mode(), md.len(), md.mtime_nsec()).into_bytes();
            if md.is_dir() {
                stack.push(p.clone());
            } else if md.file_type().is_symlink() {
                sig.extend(std::fs::read_link(&p).unwrap().to_string_lossy().bytes());
            } else {
                sig.extend(std::fs::read(&p).unwrap());
            }
            v.push((p, sig));
        }
    }
    v
}

fn decoy(dir: &Path) -> PathBuf {
    let d = dir.join("decoy");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("secret"), b"precious data").unwrap();
    std::fs::write(d.join("sub/other"), b"more").unwrap();
    d
}

/// A prepared plan of a hand-written trace, all in one directory.
struct Prepared {
    trace: PathBuf,
    plan: PathBuf,
    root: PathBuf,
    /// What `replay prepare` printed.
    out: String,
}

/// Writes `tr` to `dir`/t.lst and prepares it into `dir`/p.lsr with the sandbox `dir`/sb.
fn prepare(dir: &Path, tr: &T) -> Prepared {
    let (trace, plan, root) = (dir.join("t.lst"), dir.join("p.lsr"), dir.join("sb"));
    tr.write(&trace);
    let out = latscope_ok(&["replay", "prepare", "-r", s(&trace), "-o", s(&plan), "--root", s(&root)]);
    Prepared { trace, plan, root, out }
}

fn fails_with(args: &[&str], needle: &str) {
    let o = latscope(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} succeeded: {}", String::from_utf8_lossy(&o.stdout));
    assert!(err.contains(needle), "{args:?}: expected {needle:?} in:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn prepare_init_run_compare_from_the_command_line() {
    let t = tempfile::tempdir().unwrap();
    let mut tr = T::new();
    tr.open("/app/data", 0o102, 3, 1);
    for i in 0..200 {
        tr.fdop("pwrite64", 3, 4096, i * 4096, 4096);
        tr.fdop("pread64", 3, 4096, i * 2048, 4096);
    }
    tr.fdop("close", 3, 0, -1, 0);
    let Prepared { trace, plan, root, out } = prepare(t.path(), &tr);
    assert!(out.contains("402 operations in 1 threads"), "{out}");
    let info = latscope_json(&["replay", "info", s(&plan), "--json"]);
    assert_eq!(info["counts"]["ops"], 402);
    let mut files = Vec::new();
    for k in 0..2 {
        latscope_ok(&["replay", "init", s(&plan), "--quiet"]);
        let f = t.path().join(format!("run{k}.json"));
        let st = latscope_json(&["replay", "run", s(&plan), "--json", "--quiet", "--stats", s(&f)]);
        assert_eq!((st["divergences"].as_u64(), st["ops"].as_u64()), (Some(0), Some(402)), "{st}");
        files.push(f);
    }
    let text = latscope_ok(&["replay", "run", s(&plan), "--init", "--quiet"]);
    assert!(text.contains("divergences from the recorded results: 0"), "{text}");
    let c = latscope_json(&["replay", "compare", s(&files[0]), s(&files[1]), "--json"]);
    let metrics: Vec<&str> = c["rows"].as_array().unwrap().iter().map(|r| r["metric"].as_str().unwrap()).collect();
    assert!(metrics.contains(&"ops/s") && metrics.contains(&"pread p99"), "{metrics:?}");
    let text = latscope_ok(&["replay", "compare", s(&files[0]), s(&files[1])]);
    assert!(text.contains("beyond noise?"), "{text}");
    latscope_ok(&["replay", "purge", s(&plan)]);
    // Bad input: clear messages, no panic.
    fails_with(&["replay", "compare", s(&files[0])], "give two statistics files");
    fails_with(&["replay", "compare", s(&plan), s(&files[0])], "not JSON");
    fails_with(&["replay", "run", s(&plan), "--speed=-1"], "--speed -1");
    fails_with(&["replay", "run", s(&plan), "--realtime"], "--realtime is for timed runs");
    // An output that is the input is refused before anything is written.
    let (trace_bytes, plan_bytes) = (std::fs::read(&trace).unwrap(), std::fs::read(&plan).unwrap());
    fails_with(&["replay", "prepare", "-r", s(&trace), "-o", s(&trace), "--root", s(&root)], "would destroy the input");
    fails_with(&["replay", "run", s(&plan), "--stats", s(&plan)], "would destroy the input");
    assert_eq!((std::fs::read(&trace).unwrap(), std::fs::read(&plan).unwrap()), (trace_bytes, plan_bytes));
    fails_with(&["replay", "prepare", "-r", s(&trace), "-o", s(&plan), "--root", "/"], "--root");
    fails_with(&["replay", "prepare", "-r", s(&trace), "-o", s(&plan), "--name", "../x"], "test name");
    let other = t.path().join("other.lsr");
    fails_with(&["replay", "prepare", "-r", s(&plan), "-o", s(&other), "--root", s(&root)], "cannot read the trace");
    assert!(!other.exists(), "nothing written for a bad trace");
}

#[test]
fn hostile_traces_touch_nothing_outside_the_sandbox() {
    let t = tempfile::tempdir().unwrap();
    let d = decoy(t.path());
    let before = hash_tree(&d);
    let dp = s(&d).to_string();
    let mut tr = T::new();
    // Traversal out of the sandbox, device nodes, /proc, a symlink to outside.
    tr.open(&format!("/app/../../..{dp}/secret"), 0o1101, 3, 1); // O_WRONLY|O_CREAT|O_TRUNC
    tr.fdop("write", 3, 100, 0, 100);
    tr.open("/dev/sda", 2, 4, 14);
    tr.fdop("write", 4, 4096, 0, 4096);
    tr.open("/proc/sysrq-trigger", 1, 5, 1);
    tr.fdop("write", 5, 1, 0, 1);
    tr.sys(100, "symlinkat", |e| {
        e.path = "../../../../../../../../..".into();
        e.path2 = "/app/up".into();
    });
    tr.sys(100, "unlink", |e| e.path = format!("/app/up/{dp}/secret"));
    tr.sys(100, "mknodat", |e| {
        e.path = "/app/dev".into();
        e.mode = libc::S_IFCHR | 0o600; // a character device: never created
    });
    // And paths that map inside the sandbox although they name the decoy.
    tr.open(&format!("{dp}/sub/other"), 0o1101, 6, 1);
    tr.fdop("write", 6, 10, 0, 10);
    let Prepared { plan, root, out, .. } = prepare(t.path(), &tr);
    for why in [
        "'..' components (refused)",
        "pseudo file system",
        "symlink target outside the sandbox (refused)",
        "device nodes and sockets are not created (refused)",
    ] {
        assert!(out.contains(why), "{why} not reported:\n{out}");
    }
    latscope_ok(&["replay", "init", s(&plan), "--quiet"]);
    let st = latscope_json(&["replay", "run", s(&plan), "--json", "--quiet"]);
    // The device node the recording made is not made: the one divergence, said, never silent.
    assert_eq!(st["divergences"], 1, "{st}");
    assert_eq!(st["first_divergences"][0]["op"], "mknodat (not replayed)", "{st}");
    assert_eq!(hash_tree(&d), before, "the decoy changed");
    // The decoy's name inside the sandbox is where the write went.
    let inside = root.join(dp.trim_start_matches('/')).join("sub/other");
    assert_eq!(std::fs::metadata(inside).unwrap().len(), 10);
}

#[test]
fn symlinks_planted_between_prepare_and_run_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let d = decoy(t.path());
    let before = hash_tree(&d);
    let mut tr = T::new();
    tr.sys(100, "mkdir", |e| e.path = "/app/dir".into());
    tr.open("/app/dir/file", 0o1101, 3, 1);
    tr.fdop("write", 3, 100, 0, 100);
    tr.fdop("close", 3, 0, -1, 0);
    tr.open("/app/existing/file", 0o1101, 3, 1);
    tr.fdop("write", 3, 100, 0, 100);
    let Prepared { plan, root, .. } = prepare(t.path(), &tr);
    for (name, target) in
        [("app/dir", d.clone()), ("app/dir", PathBuf::from("../../decoy")), ("app/existing", d.clone())]
    {
        latscope_ok(&["replay", "init", s(&plan), "--quiet"]);
        let link = root.join(name);
        let _ = std::fs::remove_dir_all(&link);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        fails_with(&["replay", "run", s(&plan), "--quiet"], "symlink leading out of the sandbox");
        assert_eq!(hash_tree(&d), before, "the decoy changed ({name} -> {})", target.display());
    }
    // A FIFO (a replay would block on it) and a device node are refused too.
    latscope_ok(&["replay", "init", s(&plan), "--quiet"]);
    let fifo = std::ffi::CString::new(s(&root.join("app/existing/f"))).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    fails_with(&["replay", "run", s(&plan), "--quiet"], "a FIFO or socket");
}

#[test]
fn damaged_and_forged_plans_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let d = decoy(t.path());
    let before = hash_tree(&d);
    let mut tr = T::new();
    tr.open("/app/f", 0o1101, 3, 1);
    tr.fdop("write", 3, 100, 0, 100);
    let Prepared { plan, root, .. } = prepare(t.path(), &tr);
    let good = std::fs::read(&plan).unwrap();
    let bad = t.path().join("bad.lsr");
    for cut in [0, 5, 20, good.len() / 2, good.len() - 1] {
        std::fs::write(&bad, &good[..cut]).unwrap();
        let needle = if cut == 0 { "empty" } else { "cut short" };
        for cmd in ["info", "init", "run"] {
            fails_with(&["replay", cmd, s(&bad)], needle);
        }
    }
    for at in [3, 12, 40, good.len() / 2, good.len() - 30, good.len() - 2] {
        let mut b = good.clone();
        b[at] ^= 0x10;
        std::fs::write(&bad, &b).unwrap();
        let o = latscope(&["replay", "init", s(&bad)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(s(&bad)) && !err.contains("panicked"), "byte {at}: {err}");
    }
    // A forged plan: valid checksums, a root that is the decoy, then a path out.
    let mut p = latscope_replay::read_plan(&plan).unwrap();
    p.meta.sandbox.roots[0].dir = s(&d).to_string();
    latscope_replay::write_plan(&p, &bad).unwrap();
    fails_with(&["replay", "init", s(&bad)], "not a latscope sandbox");
    fails_with(&["replay", "run", s(&bad)], "not an initialised sandbox");
    let mut p = latscope_replay::read_plan(&plan).unwrap();
    p.paths.entries[0].rel = "../decoy".into();
    latscope_replay::write_plan(&p, &bad).unwrap();
    fails_with(&["replay", "init", s(&bad)], "not a plain relative path");
    let mut p = latscope_replay::read_plan(&plan).unwrap();
    p.meta.sandbox.roots[0].dir = "/".into();
    latscope_replay::write_plan(&p, &bad).unwrap();
    fails_with(&["replay", "run", s(&bad)], "is not allowed");
    assert_eq!(hash_tree(&d), before, "the decoy changed");
    assert!(
        !root.exists() || std::fs::read_dir(&root).unwrap().count() == 0 || root.join(".latscope-sandbox").exists()
    );
}

#[test]
fn a_user_who_cannot_write_the_sandbox_is_refused() {
    if !require_bpf("a_user_who_cannot_write_the_sandbox_is_refused") {
        return; // needs root to switch users
    }
    let t = tempfile::tempdir().unwrap();
    let mut tr = T::new();
    tr.open("/app/f", 0o1101, 3, 1);
    let Prepared { plan, .. } = prepare(t.path(), &tr);
    // tempdir is 0700 root: nobody cannot even reach the sandbox.
    latscope_ok(&["replay", "init", s(&plan), "--quiet"]);
    fails_with(&["replay", "run", s(&plan), "--user", "nobody"], "cannot write the sandbox");
    // Initialised for nobody, in a directory nobody can reach: the replay runs as nobody.
    let open = t.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(t.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let root2 = open.join("sb");
    latscope_ok(&["replay", "init", s(&plan), "--root", s(&root2), "--user", "nobody", "--quiet"]);
    let st = latscope_json(&["replay", "run", s(&plan), "--root", s(&root2), "--user", "nobody", "--json", "--quiet"]);
    assert_eq!(st["divergences"], 0, "{st}");
    assert_eq!(st["user"], "nobody");
}

#[test]
fn realtime_workers_replay_a_timed_run() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "realtime: CI runs as root");
        eprintln!("SKIPPED realtime_workers_replay_a_timed_run: SCHED_FIFO needs root");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let mut tr = T::new();
    tr.open("/app/data", 0o102, 3, 1);
    for i in 0..50 {
        tr.fdop("pwrite64", 3, 4096, i * 4096, 4096);
    }
    tr.fdop("close", 3, 0, -1, 0);
    let plan = prepare(t.path(), &tr).plan;
    let st = latscope_json(&["replay", "run", s(&plan), "--init", "--speed", "10", "--realtime", "--json", "--quiet"]);
    assert_eq!((st["divergences"].as_u64(), st["ops"].as_u64()), (Some(0), Some(52)), "{st}");
    assert_eq!(st["realtime"], true);
    assert!(st["lateness"]["p99_ns"].is_u64(), "a timed run reports lateness: {st}");
    let text = latscope_ok(&["replay", "run", s(&plan), "--init", "--speed", "10", "--realtime", "--quiet"]);
    assert!(text.contains("real-time workers (SCHED_FIFO)"), "{text}");
}

/// A hard link planted in the sandbox after `replay init`, at a file the plan opens with
/// O_TRUNC, to a precious file outside: `replay run` refuses before it writes anything, and
/// the outside file keeps its bytes.
#[test]
fn a_hard_link_planted_in_the_sandbox_is_refused_before_any_write() {
    let t = tempfile::tempdir().unwrap();
    let d = decoy(t.path());
    let before = hash_tree(&d);
    let mut tr = T::new();
    // O_WRONLY|O_TRUNC of a file that existed (init creates it), and O_CREAT|O_TRUNC of a new one.
    tr.open("/app/existing/file", 0o1001, 3, 1);
    tr.fdop("write", 3, 100, 0, 100);
    tr.fdop("close", 3, 0, -1, 0);
    tr.open("/app/existing/new", 0o1101, 3, 1);
    tr.fdop("write", 3, 100, 0, 100);
    tr.fdop("close", 3, 0, -1, 0);
    let Prepared { plan, root, .. } = prepare(t.path(), &tr);
    for name in ["file", "new"] {
        latscope_ok(&["replay", "init", s(&plan), "--quiet"]);
        let victim = root.join("app/existing").join(name);
        assert_eq!(victim.exists(), name == "file", "init created the file that existed, not the new one");
        let _ = std::fs::remove_file(&victim);
        std::fs::hard_link(d.join("secret"), &victim).unwrap();
        fails_with(&["replay", "run", s(&plan), "--quiet"], "hard links");
        assert_eq!(hash_tree(&d), before, "{name}: the file outside the sandbox changed");
    }
}

/// After `init --user nobody`, nobody owns the sandbox and puts a FIFO where root keeps the
/// marker: root's next `run` and `init` say what they found at once instead of blocking on it
/// (or reading /dev/zero through a symlink). Attribute
/// namespaces are named on the command line.
#[test]
fn a_fifo_planted_as_the_marker_by_the_sandbox_user_hangs_neither_run_nor_init() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "CI runs as root");
        eprintln!("SKIPPED a_fifo_planted_as_the_marker_by_the_sandbox_user_hangs_neither_run_nor_init: needs root");
        return;
    }
    use std::os::unix::process::CommandExt;
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut tr = T::new();
    tr.open("/app/f", 0o1101, 3, 1);
    let Prepared { plan, root, .. } = prepare(t.path(), &tr);
    fails_with(&["replay", "init", s(&plan), "--xattr-namespaces", "capability"], "not a namespace");
    latscope_ok(&["replay", "init", s(&plan), "--user", "nobody", "--xattr-namespaces", "user,system", "--quiet"]);
    let marker = root.join(".latscope-sandbox");
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("rm {0} && mkfifo {0}", s(&marker)))
        .uid(65534)
        .gid(65534)
        .status()
        .unwrap();
    assert!(st.success());
    for args in
        [vec!["replay", "run", s(&plan), "--user", "nobody", "--quiet"], vec!["replay", "init", s(&plan), "--quiet"]]
    {
        let mut child = std::process::Command::new(bin())
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("{args:?} blocked on the FIFO");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("is a FIFO owned by uid 65534"), "{args:?}: {err}");
    }
}

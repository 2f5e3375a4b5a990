//! Replay fidelity, end to end on this machine: a workload is recorded with latscope, prepared,
//! initialised and replayed (itself recorded with latscope), and the replay must perform the
//! same multiset of operations (type, mapped path, size, offset, result), leave the same tree
//! (names, sizes, bytes: the workload writes the replay's generated pattern), and diverge
//! nowhere. Then real programs nobody here wrote: tar, git, sqlite3.

mod common;
use common::*;
use latscope_event::{syscall_name, EventBatch};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `latscope record -w trace --quiet -- argv...` (all syscalls, as a replay needs them).
fn record(trace: &Path, argv: &[&str], env: &[(&str, &str)]) {
    let mut c = Command::new(bin());
    c.args(["record", "-w"]).arg(trace).args(["--quiet", "--json", "--no-block", "--"]).args(argv);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "record {argv:?}: {}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_slice(&o.stdout).expect("record summary");
    assert_eq!(s["lost"], 0, "{s}");
    assert_eq!(s["command_status"], 0, "{argv:?} failed: {s}");
}

fn read_events(trace: &Path) -> EventBatch {
    latscope_trace::TraceReader::open(trace).unwrap().read_all().unwrap()
}

/// prepare + init + run --json; the run's statistics.
fn replay(trace: &Path, plan: &Path, root: &Path, extra: &[&str]) -> Value {
    let out = latscope_ok(&["replay", "prepare", "-r", p(trace), "-o", p(plan), "--root", p(root)]);
    eprintln!("{out}");
    latscope_ok(&["replay", "init", p(plan), "--quiet"]);
    let mut args = vec!["replay", "run", p(plan), "--json", "--quiet"];
    args.extend_from_slice(extra);
    serde_json::from_str(&latscope_ok(&args)).expect("run statistics are JSON")
}

fn p(x: &Path) -> &str {
    x.to_str().unwrap()
}

/// Operation type as the replay groups syscalls (the replay issues the `*at` forms).
fn op_type(name: &str, flags: u32) -> Option<&'static str> {
    Some(match name {
        "open" | "openat" | "openat2" | "creat" => "open",
        "close" => "close",
        "dup" | "dup2" | "dup3" => "dup",
        "fcntl" if flags == libc::F_DUPFD as u32 => "dup",
        "newfstatat" | "stat" | "lstat" | "statx" | "fstat" => "stat",
        "mkdir" | "mkdirat" => "mkdir",
        "rename" | "renameat" | "renameat2" => "rename",
        "unlink" => "unlink",
        "rmdir" => "rmdir",
        "unlinkat" if flags & libc::AT_REMOVEDIR as u32 != 0 => "rmdir",
        "unlinkat" => "unlink",
        "read" | "write" | "pread64" | "pwrite64" | "readv" | "writev" | "lseek" | "fsync" | "fdatasync"
        | "ftruncate" | "mmap" | "munmap" | "msync" | "getdents64" => {
            // 'static names
            [
                "read",
                "write",
                "pread64",
                "pwrite64",
                "readv",
                "writev",
                "lseek",
                "fsync",
                "fdatasync",
                "ftruncate",
                "mmap",
                "munmap",
                "msync",
                "getdents64",
            ]
            .into_iter()
            .find(|n| *n == name)?
        }
        _ => return None,
    })
}

/// (type, path, bytes, offset, result) of every file operation under `under` (mapped by
/// `map`), plus munmap/msync of mappings of such files; `keep` selects the events.
fn op_multiset(
    b: &EventBatch,
    under: &str,
    map: impl Fn(&str) -> String,
    keep: impl Fn(usize) -> bool,
) -> BTreeMap<(String, String, u64, i64, String), u64> {
    let mut m = BTreeMap::new();
    let mut helper_fds: HashSet<(u32, i32)> = HashSet::new();
    let mut mappings: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    let mut order: Vec<usize> = (0..b.len()).filter(|&i| b.kind[i] == 0).collect();
    order.sort_by_key(|&i| b.ts[i]);
    for i in order {
        if !keep(i) {
            continue;
        }
        let name = syscall_name(b.nr[i]).unwrap_or("");
        let (pid, fd, ret, flags) = (b.pid[i], b.fd[i], b.ret[i], b.flags[i]);
        let path = b.path.get(i);
        // The replay's own lookups: O_PATH fds of directories, and their closes.
        if name == "openat2" && flags & libc::O_PATH as u32 != 0 {
            if ret >= 0 {
                helper_fds.insert((pid, ret as i32));
            }
            continue;
        }
        if name == "close" && helper_fds.remove(&(pid, fd)) {
            continue;
        }
        let Some(t) = op_type(name, flags) else { continue };
        let inside = path == under || path.starts_with(&format!("{under}/"));
        let mapped_mem = matches!(t, "munmap" | "msync")
            && mappings.get(&pid).is_some_and(|v| v.iter().any(|&(a, l)| b.addr[i] >= a && b.addr[i] < a + l));
        if !inside && !mapped_mem {
            continue;
        }
        if t == "mmap" && ret > 0 {
            mappings.entry(pid).or_default().push((ret as u64, b.bytes[i]));
        }
        let result = match t {
            "open" | "dup" | "mmap" => {
                if ret >= 0 {
                    "ok".to_string()
                } else {
                    ret.to_string()
                }
            }
            _ => ret.to_string(),
        };
        let off = if matches!(t, "stat" | "open" | "close" | "mkdir" | "rename" | "unlink" | "rmdir" | "fsync") {
            -1
        } else {
            b.off[i]
        };
        let bytes = if matches!(
            t,
            "read"
                | "write"
                | "pread64"
                | "pwrite64"
                | "readv"
                | "writev"
                | "mmap"
                | "munmap"
                | "msync"
                | "ftruncate"
                | "getdents64"
        ) {
            b.bytes[i]
        } else {
            0
        };
        let key = (t.to_string(), if inside { map(path) } else { String::new() }, bytes, off, result);
        *m.entry(key).or_default() += 1;
    }
    m
}

fn diff(
    a: &BTreeMap<(String, String, u64, i64, String), u64>,
    b: &BTreeMap<(String, String, u64, i64, String), u64>,
) -> String {
    let mut s = String::new();
    for (k, &n) in a {
        let m = b.get(k).copied().unwrap_or(0);
        if n != m {
            s += &format!("  recorded {n} replayed {m}: {k:?}\n");
        }
    }
    for (k, &m) in b {
        if !a.contains_key(k) {
            s += &format!("  recorded 0 replayed {m}: {k:?}\n");
        }
    }
    s
}

/// Every entry under `dir`: relative name -> (is_dir, size, bytes of regular files).
fn tree(dir: &Path) -> BTreeMap<String, (bool, u64, Option<Vec<u8>>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let path = e.path();
            let md = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if md.is_dir() {
                stack.push(path.clone());
                out.insert(rel, (true, 0, None));
            } else {
                out.insert(rel, (false, md.len(), Some(std::fs::read(&path).unwrap())));
            }
        }
    }
    out
}

fn under_root(root: &Path, abs: &Path) -> PathBuf {
    root.join(abs.strip_prefix("/").unwrap())
}

#[test]
fn replay_reproduces_a_workload_operation_for_operation_and_byte_for_byte() {
    if !require_bpf("replay_reproduces_a_workload") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = compile_c("replay_workload.c", tmp.path());
    let dir = tmp.path().join("orig");
    std::fs::create_dir(&dir).unwrap();
    let mut input = vec![0u8; 100_000];
    latscope_replay::pattern::fill(&mut input, 0);
    std::fs::write(dir.join("input"), &input).unwrap();
    let trace = tmp.path().join("t.lst");
    record(&trace, &[p(&work), p(&dir)], &[]);

    let root = tmp.path().join("sb");
    let plan = tmp.path().join("plan.lsr");
    let rtrace = tmp.path().join("replay.lst");
    latscope_ok(&["replay", "prepare", "-r", p(&trace), "-o", p(&plan), "--root", p(&root)]);
    latscope_ok(&["replay", "init", p(&plan), "--quiet"]);
    // The replay, recorded by latscope's own probes (run --trace).
    let stats: Value =
        serde_json::from_str(&latscope_ok(&["replay", "run", p(&plan), "--json", "--quiet", "--trace", p(&rtrace)]))
            .unwrap();
    assert_eq!(stats["divergences"], 0, "{}", serde_json::to_string_pretty(&stats["first_divergences"]).unwrap());
    assert_eq!(stats["skipped"], 0);
    assert_eq!(stats["ops"], stats["planned_ops"]);

    // Same operations.
    let orig_dir = p(&dir).to_string();
    let rep_dir = p(&under_root(&root, &dir)).to_string();
    let ev = read_events(&trace);
    let a = op_multiset(&ev, &orig_dir, |x| x.to_string(), |_| true);
    let rev = read_events(&rtrace);
    let b = op_multiset(
        &rev,
        &rep_dir,
        |x| format!("{orig_dir}{}", &x[rep_dir.len()..]),
        |i| rev.comm.get(i).starts_with("replay-"),
    );
    assert!(a.values().sum::<u64>() > 150, "the workload's operations were recorded: {a:?}");
    assert!(a == b, "replayed operations differ from the recorded ones:\n{}", diff(&a, &b));

    // Same tree, same bytes.
    let ta = tree(&dir);
    let tb = tree(&under_root(&root, &dir));
    for (name, (is_dir, size, bytes)) in &ta {
        let Some((d2, s2, b2)) = tb.get(name) else { panic!("{name} missing from the replayed tree") };
        assert_eq!((is_dir, size), (d2, s2), "{name}");
        assert!(bytes == b2, "{name}: contents differ");
    }
    assert_eq!(ta.keys().collect::<Vec<_>>(), tb.keys().collect::<Vec<_>>());
}

#[test]
fn tar_extracting_an_archive_replays_without_divergence() {
    if !require_bpf("tar_replays") || !require_tool("tar_replays", "tar") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    for d in 0..5 {
        std::fs::create_dir_all(src.join(format!("d{d}/e"))).unwrap();
        for f in 0..20 {
            let mut b = vec![0u8; 1000 * (f + 1)];
            latscope_replay::pattern::fill(&mut b, f as u64);
            std::fs::write(src.join(format!("d{d}/e/f{f}")), b).unwrap();
        }
    }
    let tarball = tmp.path().join("a.tar");
    let st = Command::new("tar").arg("cf").arg(&tarball).arg("-C").arg(tmp.path()).arg("src").status().unwrap();
    assert!(st.success());
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let trace = tmp.path().join("t.lst");
    record(&trace, &["tar", "xf", p(&tarball), "-C", p(&out)], &[]);
    let stats = replay(&trace, &tmp.path().join("p.lsr"), &tmp.path().join("sb"), &[]);
    assert_eq!(stats["divergences"], 0, "{}", serde_json::to_string_pretty(&stats).unwrap());
    assert!(stats["ops"].as_u64().unwrap() > 300, "{stats}");
    let replayed = under_root(&tmp.path().join("sb"), &out.join("src"));
    assert_eq!(tree(&replayed).keys().collect::<Vec<_>>(), tree(&out.join("src")).keys().collect::<Vec<_>>());
}

#[test]
fn git_committing_a_tree_replays_without_divergence() {
    if !require_bpf("git_replays") || !require_tool("git_replays", "git") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(repo.join("src/sub")).unwrap();
    for f in 0..30 {
        std::fs::write(repo.join(format!("src/sub/f{f}.txt")), format!("line {f}\n").repeat(50 * (f + 1))).unwrap();
    }
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let env = [
        ("HOME", p(&home)),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_AUTHOR_NAME", "t"),
        ("GIT_AUTHOR_EMAIL", "t@example.com"),
        ("GIT_COMMITTER_NAME", "t"),
        ("GIT_COMMITTER_EMAIL", "t@example.com"),
        ("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z"),
        ("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z"),
    ];
    let st = Command::new("git").arg("-C").arg(&repo).args(["init", "-q"]).envs(env).status().unwrap();
    assert!(st.success());
    let trace = tmp.path().join("t.lst");
    let script = format!("cd {} && git add -A && git commit -q -m replay && git gc -q --auto", p(&repo));
    record(&trace, &["sh", "-c", &script], &env);
    let stats = replay(&trace, &tmp.path().join("p.lsr"), &tmp.path().join("sb"), &[]);
    assert_eq!(stats["divergences"], 0, "{}", serde_json::to_string_pretty(&stats).unwrap());
    assert!(stats["ops"].as_u64().unwrap() > 200, "{stats}");
}

#[test]
fn sqlite_inserting_rows_replays_without_divergence() {
    if !require_bpf("sqlite_replays") || !require_tool("sqlite_replays", "sqlite3") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("d/db.sqlite");
    std::fs::create_dir(tmp.path().join("d")).unwrap();
    let mut sql = String::from("create table t(a integer primary key, b text);\n");
    for batch in 0..20 {
        sql += "begin;\n";
        for k in 0..50 {
            sql += &format!("insert into t(b) values('row {batch} {k} {}');\n", "x".repeat(k * 7));
        }
        sql += "commit;\n";
    }
    sql += "select count(*), sum(length(b)) from t;\n";
    let sqlf = tmp.path().join("ins.sql");
    std::fs::write(&sqlf, sql).unwrap();
    let trace = tmp.path().join("t.lst");
    record(&trace, &["sh", "-c", &format!("sqlite3 {} < {} > /dev/null", p(&db), p(&sqlf))], &[]);
    let stats = replay(&trace, &tmp.path().join("p.lsr"), &tmp.path().join("sb"), &[]);
    assert_eq!(stats["divergences"], 0, "{}", serde_json::to_string_pretty(&stats).unwrap());
    assert!(
        stats["by_kind"]["fsync"]["performed"].as_u64().unwrap_or(0)
            + stats["by_kind"]["fdatasync"]["performed"].as_u64().unwrap_or(0)
            >= 20,
        "{stats}"
    );
    let replayed = under_root(&tmp.path().join("sb"), &db);
    assert_eq!(std::fs::metadata(&replayed).unwrap().len(), std::fs::metadata(&db).unwrap().len());
}

/// A plan replaying `n` writes `gap_ms` apart into files under `dir`.
fn synthetic_plan(tmp: &Path, dir: &Path, n: i64, gap_ms: u64) -> PathBuf {
    let mut tr = common::replay_trace::T::new();
    tr.open("/app/f", 0o1102, 3, 1);
    for i in 0..n {
        tr.ts += gap_ms * 1_000_000;
        tr.fdop("pwrite64", 3, 4096, i * 4096, 4096);
        tr.fdop("fsync", 3, 0, -1, 0);
    }
    let trace = tmp.join("syn.lst");
    tr.write(&trace);
    let plan = tmp.join("syn.lsr");
    latscope_ok(&["replay", "prepare", "-r", p(&trace), "-o", p(&plan), "--root", p(dir)]);
    plan
}

fn queue(dev: &str, what: &str) -> String {
    let s = std::fs::read_to_string(format!("/sys/block/{dev}/queue/{what}")).unwrap();
    s.trim().to_string()
}

#[test]
fn a_matrix_of_schedulers_runs_each_and_restores_every_setting() {
    if !require_bpf("matrix") || !require_tool("matrix", "mkfs.ext4") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let lfs = LoopFs::new("ext4", 64);
    let dev = lfs.name();
    std::fs::write(format!("/sys/block/{dev}/queue/read_ahead_kb"), "96").unwrap();
    let before = (queue(&dev, "scheduler"), queue(&dev, "read_ahead_kb"), queue(&dev, "nr_requests"));
    let plan = synthetic_plan(tmp.path(), &lfs.mnt.join("sb"), 50, 0);
    let out = tmp.path().join("m.json");
    let o = latscope_ok(&[
        "replay",
        "compare",
        "--matrix",
        p(&plan),
        "--device",
        &dev,
        "--set",
        "scheduler=none,mq-deadline",
        "--repeat",
        "2",
        "-o",
        p(&out),
    ]);
    assert!(o.contains("scheduler=mq-deadline"), "{o}");
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(m["sides"].as_array().unwrap().len(), 2);
    for side in m["sides"].as_array().unwrap() {
        assert_eq!(side["runs"].as_array().unwrap().len(), 2);
        for r in side["runs"].as_array().unwrap() {
            assert_eq!(r["divergences"], 0);
        }
    }
    assert!(m["comparisons"][0]["method"].as_str().unwrap().contains("across runs"));
    assert_eq!((queue(&dev, "scheduler"), queue(&dev, "read_ahead_kb"), queue(&dev, "nr_requests")), before);

    // Ctrl-C in the middle of a timed run: stopped, statistics so far, settings restored.
    let slow = synthetic_plan(tmp.path(), &lfs.mnt.join("sb2"), 300, 20);
    let child = Command::new(bin())
        .args([
            "replay",
            "compare",
            "--matrix",
            p(&slow),
            "--device",
            &dev,
            "--set",
            "read_ahead_kb=0,4096",
            "--speed",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(queue(&dev, "read_ahead_kb"), "0", "the matrix set the first value");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("INTERRUPTED"));
    assert_eq!((queue(&dev, "scheduler"), queue(&dev, "read_ahead_kb"), queue(&dev, "nr_requests")), before);
}

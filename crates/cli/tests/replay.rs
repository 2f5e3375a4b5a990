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
    let s: Value = serde_json::from_str(String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or_default())
        .expect("the summary: stderr's last line, with a command");
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
    latscope_json(&args)
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
    let stats = latscope_json(&["replay", "run", p(&plan), "--json", "--quiet", "--trace", p(&rtrace)]);
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
    // What the kernel changed with the scheduler (nr_requests) is derived, not a second
    // difference: the runs are comparable.
    assert_eq!(m["comparisons"][0]["differences"], serde_json::json!([]), "{}", m["comparisons"][0]);
    let derived = m["sides"][1]["derived"].as_array().unwrap();
    eprintln!("derived with scheduler=mq-deadline: {derived:?}");
    for d in derived {
        let key = d.as_str().unwrap().split('=').next().unwrap();
        assert!(
            m["comparisons"][0]["derived"].to_string().contains(key)
                || m["sides"][0]["derived"].to_string().contains(key),
            "{m}"
        );
    }
    assert!(!o.contains("NOT COMPARABLE"), "{o}");
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

/// Everyday programs on one tree, each recorded in one run of a shell script: the copies
/// (`copy_file_range`, `sendfile`, cp's FICLONE attempts), moves, links, modes, sizes,
/// extended attributes, FIFOs and `O_TMPFILE` files they make.
const EVERYDAY: &str = r#"set -e
cd "$1"
mkdir -p src/sub
dd if=/dev/zero of=src/a bs=4096 count=5 conv=fsync status=none
head -c 30000 /dev/urandom > src/sub/b
printf 'hello\n' > src/c
cp src/a a.copy
cp -r src dst_r
cp -a src dst_a
cp --reflink=auto src/sub/b b.reflink
rsync -a src/ rs/
mkdir mvdir
mv dst_r mvdir/
mv a.copy mvdir/
mv pre/olddir mvdir/
install -m 0755 src/c bin.c
ln src/a a.hard
ln -s src/c c.sym
ln -s ../src/sub/b mvdir/b.sym
truncate -s 10000 trunc
truncate -s 5000 src/c
fallocate -l 65536 falloc
fallocate -c -o 0 -l 4096 pre/big
python3 -c "import shutil; shutil.copyfile('src/sub/b', 'py.copyfile'); shutil.copy2('src/a', 'py.copy2')"
python3 -c "
import os
fd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o640)
os.write(fd, b'x' * 3000)
# A directory fd makes CPython call linkat with AT_SYMLINK_FOLLOW (plain link() would link the
# /proc magic link itself, EXDEV).
d = os.open('.', os.O_RDONLY | os.O_DIRECTORY)
os.link('/proc/self/fd/%d' % fd, 'tmpfile.linked', dst_dir_fd=d)
"
setfattr -n user.note -v hello src/c
getfattr -d src/c > /dev/null
mkfifo fifo
tar cf t.tar src
mkdir tx
tar xf t.tar -C tx
pre/tool.sh
dd if=src/a of=dd.out bs=4096 conv=fsync status=none
git init -q g
cp src/a src/c g/
git -C g add -A
git -C g commit -q -m everyday
sqlite3 db.sqlite 'create table t(a, b); begin; insert into t values(1, 2); insert into t values(3, 4); commit;'
rm dst_a/c
rmdir tx/src/sub 2>/dev/null || rm -r tx/src/sub
"#;

/// Every entry under `dir`: relative name -> (type, permission bits, size of a regular file,
/// symlink target, link count of a regular file, extended attributes as (name, value size,
/// value where the probes capture it: up to 256 bytes)).
type Entry = (char, u32, u64, String, u64, Vec<Xattr>);
type Xattr = (String, usize, Option<Vec<u8>>);
fn full_tree(dir: &Path) -> BTreeMap<String, Entry> {
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            let md = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let ft = md.file_type();
            let t = if ft.is_dir() {
                'd'
            } else if ft.is_symlink() {
                'l'
            } else if ft.is_file() {
                'f'
            } else {
                'o'
            };
            if t == 'd' {
                stack.push(path.clone());
            }
            let target = if t == 'l' {
                std::fs::read_link(&path).unwrap().to_string_lossy().into_owned()
            } else {
                String::new()
            };
            let (size, nlink) = if t == 'f' { (md.len(), md.nlink()) } else { (0, 0) };
            out.insert(rel, (t, md.mode() & 0o7777, size, target, nlink, xattrs(&path)));
        }
    }
    out
}

/// (name, value size, small value) of each extended attribute of `p` (not following a symlink).
fn xattrs(p: &Path) -> Vec<Xattr> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let mut names = vec![0u8; 4096];
    // SAFETY: a buffer of names.len() bytes and a NUL-terminated path.
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr() as *mut libc::c_char, names.len()) };
    if n <= 0 {
        return Vec::new();
    }
    let mut out: Vec<Xattr> = names[..n as usize]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|name| {
            let cn = std::ffi::CString::new(name).unwrap();
            let mut v = vec![0u8; 65536];
            // SAFETY: a buffer of v.len() bytes and NUL-terminated strings.
            let size =
                unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), v.as_mut_ptr() as *mut libc::c_void, v.len()) };
            v.truncate(size.max(0) as usize);
            let small = (v.len() <= 256).then_some(v);
            (String::from_utf8_lossy(name).into_owned(), size.max(0) as usize, small)
        })
        .collect();
    out.sort();
    out
}

fn tree_diff(a: &BTreeMap<String, Entry>, b: &BTreeMap<String, Entry>) -> String {
    let mut s = String::new();
    for k in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        if a.get(k) != b.get(k) {
            s += &format!("  {k}: recorded {:?}, replayed {:?}\n", a.get(k), b.get(k));
        }
    }
    s
}

#[test]
fn everyday_programs_replay_without_divergence_and_leave_the_same_tree() {
    let t = "everyday_programs_replay";
    if !require_bpf(t) {
        return;
    }
    for tool in ["rsync", "python3", "git", "sqlite3", "tar", "setfattr", "getfattr", "fallocate", "install"] {
        if !require_tool(t, tool) {
            return;
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    // What the workload finds: a directory it only moves, a file it only collapses (never
    // read), a script it only runs.
    std::fs::create_dir_all(w.join("pre/olddir")).unwrap();
    std::fs::write(w.join("pre/big"), vec![7u8; 16384]).unwrap();
    std::fs::write(w.join("pre/tool.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(w.join("pre/big"), std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::set_permissions(w.join("pre/tool.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = tmp.path().join("everyday.sh");
    std::fs::write(&script, EVERYDAY).unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let env = [
        ("HOME", p(&home)),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_AUTHOR_NAME", "t"),
        ("GIT_AUTHOR_EMAIL", "t@example.com"),
        ("GIT_COMMITTER_NAME", "t"),
        ("GIT_COMMITTER_EMAIL", "t@example.com"),
    ];
    let trace = tmp.path().join("t.lst");
    record(&trace, &["sh", p(&script), p(&w)], &env);
    let plan = tmp.path().join("p.lsr");
    let root = tmp.path().join("sb");
    let stats = replay(&trace, &plan, &root, &[]);
    assert_eq!(stats["divergences"], 0, "{}", serde_json::to_string_pretty(&stats["first_divergences"]).unwrap());
    assert_eq!(stats["skipped"], 0, "{stats}");
    // The copies were replayed as copies, by the calls the programs made.
    let kinds = &stats["by_kind"];
    for k in ["copy_file_range", "sendfile", "ficlone", "link_fd", "mknod", "setxattr", "rename", "link", "symlink"] {
        assert!(kinds[k]["performed"].as_u64().unwrap_or(0) > 0, "no {k} replayed: {kinds}");
    }
    let info = latscope_json(&["replay", "info", p(&plan), "--json"]);
    let dropped = info["dropped"].as_array().unwrap();
    assert!(
        !dropped
            .iter()
            .any(|d| ["copy_file_range", "sendfile", "fsetxattr", "setxattr"].contains(&d["op"].as_str().unwrap())),
        "a copy or attribute change was left out: {dropped:?}"
    );
    let (a, b) = (full_tree(&w), full_tree(&under_root(&root, &w)));
    assert!(a.len() > 60, "{a:?}");
    assert!(a == b, "the replayed tree differs from the recorded one:\n{}", tree_diff(&a, &b));
    assert_eq!(a["mvdir/olddir"].0, 'd', "a moved directory stays a directory");
    assert_eq!(a["a.hard"].4, 2);
    assert_eq!(a["src/c"].5, vec![("user.note".to_string(), 5, Some(b"hello".to_vec()))]);
}

/// Record `script` (run by sh with the work directory as its argument) over `w`, prepare,
/// initialise and replay it under `tmp/sb`: the run's statistics, and the recorded and
/// replayed trees of `w`.
fn replay_script(
    tmp: &Path,
    w: &Path,
    script: &str,
) -> (Value, BTreeMap<String, Entry>, BTreeMap<String, Entry>, String) {
    let sh = tmp.join("workload.sh");
    std::fs::write(&sh, script).unwrap();
    let trace = tmp.join("t.lst");
    record(&trace, &["sh", p(&sh), p(w)], &[]);
    let plan = tmp.join("p.lsr");
    let root = tmp.join("sb");
    let prep = latscope_ok(&["replay", "prepare", "-r", p(&trace), "-o", p(&plan), "--root", p(&root)]);
    latscope_ok(&["replay", "init", p(&plan), "--quiet"]);
    let stats = latscope_json(&["replay", "run", p(&plan), "--json", "--quiet"]);
    (stats, full_tree(w), full_tree(&under_root(&root, w)), prep)
}

fn set_xattr(path: &Path, name: &str, value: &[u8]) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    // SAFETY: NUL-terminated strings and a value of value.len() bytes.
    let r = unsafe { libc::setxattr(c.as_ptr(), n.as_ptr(), value.as_ptr() as *const libc::c_void, value.len(), 0) };
    assert_eq!(r, 0, "setxattr {}: {}", path.display(), std::io::Error::last_os_error());
}

/// Attributes a file or directory had before the recording, which the workload only read or
/// copied (`cp -a`, `rsync -aX`, `getfattr`), are part of the starting tree: the copies the
/// replay makes get them, with the recorded values (up to 256 bytes) or values of the recorded
/// size, and nothing diverges.
#[test]
fn attributes_found_before_the_recording_are_in_the_starting_tree() {
    let t = "xattrs_before_recording";
    if !require_bpf(t) {
        return;
    }
    for tool in ["rsync", "getfattr", "setfattr"] {
        if !require_tool(t, tool) {
            return;
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir_all(w.join("src/d")).unwrap();
    std::fs::write(w.join("src/f"), vec![3u8; 5000]).unwrap();
    std::fs::write(w.join("src/plain"), b"no attributes").unwrap();
    std::fs::write(w.join("src/d/g"), b"inside").unwrap();
    set_xattr(&w.join("src/f"), "user.note", b"hello");
    set_xattr(&w.join("src/f"), "user.bin", &[0, 0xff, 1]);
    set_xattr(&w.join("src/f"), "user.big", &[7u8; 1000]);
    set_xattr(&w.join("src/d"), "user.dir", b"x");
    set_xattr(&w.join("src/d/g"), "user.g", b"");
    let script = r#"set -e
cd "$1"
cp -a src cp_a
rsync -aX src/ rs/
getfattr -d -R src > /dev/null
getfattr -n user.note --only-values src/f > note.txt
"#;
    let (stats, a, b, prep) = replay_script(tmp.path(), &w, script);
    assert_eq!(stats["divergences"], 0, "{}", serde_json::to_string_pretty(&stats["first_divergences"]).unwrap());
    assert!(prep.contains("5 extended attributes"), "{prep}");
    let big = |t: &BTreeMap<String, Entry>, k: &str| t[k].5.iter().find(|x| x.0 == "user.big").map(|x| x.1);
    // The 1000-byte value is not captured: init and the copies write generated bytes of its
    // size, so the large values are compared by size.
    for k in ["src/f", "cp_a/f", "rs/f"] {
        assert_eq!(big(&a, k), Some(1000), "{k}");
    }
    assert_eq!(a["cp_a/f"].5, a["src/f"].5, "cp -a copied every attribute");
    assert_eq!(a["rs/d"].5, vec![("user.dir".to_string(), 1, Some(b"x".to_vec()))]);
    assert!(a == b, "the replayed tree differs from the recorded one:\n{}", tree_diff(&a, &b));
}

/// Copies through a pipe with splice (file to pipe to file, at the file positions and at
/// explicit offsets) are replayed as a read of the source and a write of the same bytes to the
/// destination: the replayed tree equals the recorded one, and nothing diverges.
#[test]
fn splice_copies_through_a_pipe_replay_with_their_effect_on_the_tree() {
    let t = "splice_copies_replay";
    if !require_bpf(t) || !require_tool(t, "python3") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir(&w).unwrap();
    std::fs::write(w.join("src"), vec![5u8; 300_000]).unwrap();
    let script = r#"set -e
cd "$1"
python3 - <<'EOF'
import os
r, wr = os.pipe()
src = os.open('src', os.O_RDONLY)
dst = os.open('copy', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
while True:
    n = os.splice(src, wr, 65536)
    if n == 0:
        break
    while n:
        n -= os.splice(r, dst, n)
# A range at explicit offsets on both sides.
part = os.open('part', os.O_WRONLY | os.O_CREAT, 0o644)
n = os.splice(src, wr, 10000, offset_src=4096)
assert os.splice(r, part, n, offset_dst=50000) == n
os.close(part)
os.close(dst)
EOF
cat copy > /dev/null
"#;
    let (stats, a, b, prep) = replay_script(tmp.path(), &w, script);
    assert_eq!(stats["divergences"], 0, "{}", serde_json::to_string_pretty(&stats["first_divergences"]).unwrap());
    assert!(stats["by_kind"]["write"]["performed"].as_u64().unwrap_or(0) >= 5, "{stats}");
    assert!(!prep.contains("splice between"), "{prep}");
    assert_eq!(a["copy"].2, 300_000);
    assert_eq!(a["part"].2, 60_000);
    assert!(a == b, "the replayed tree differs from the recorded one:\n{}", tree_diff(&a, &b));
}

/// Data spliced into a file from a pipe the recording does not know (received from another
/// process over a socket) is a change the replay cannot make: it diverges, never a silently
/// short file.
#[test]
fn a_splice_from_an_unknown_pipe_diverges() {
    let t = "unreplayable_change_diverges";
    if !require_bpf(t) || !require_tool(t, "python3") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir(&w).unwrap();
    let code = format!(
        "import os, socket\na, b = socket.socketpair()\nr, wr = os.pipe()\nsocket.send_fds(a, [b'p'], [r])\n_, fds, _, _ = socket.recv_fds(b, 1, 1)\nos.write(wr, b'x' * 1000)\nfd = os.open('{}/spliced', os.O_WRONLY | os.O_CREAT, 0o644)\nassert os.splice(fds[0], fd, 1000) == 1000\n",
        p(&w)
    );
    let trace = tmp.path().join("t.lst");
    record(&trace, &["python3", "-c", &code], &[]);
    let stats = replay(&trace, &tmp.path().join("p.lsr"), &tmp.path().join("sb"), &[]);
    assert!(stats["divergences"].as_u64().unwrap() >= 1, "{stats}");
    let first = &stats["first_divergences"][0];
    assert_eq!(first["op"], "splice (not replayed)", "{stats}");
    assert!(first["path"].as_str().unwrap().ends_with("w/spliced"), "{first}");
}

/// What the recording cannot see is said by prepare: stores through a shared writable mapping
/// without an msync (the file is named), and operations submitted through io_uring (counted as
/// not replayed, with the reason). A mapping that is msync'ed is replayed as a write of the
/// synced range: the replayed tree equals the recorded one.
#[test]
fn mappings_and_io_uring_are_replayed_or_said() {
    let t = "mmap_io_uring_said";
    if !require_bpf(t) || !require_tool(t, "python3") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir(&w).unwrap();
    std::fs::write(w.join("synced"), vec![1u8; 16384]).unwrap();
    std::fs::write(w.join("unsynced"), vec![1u8; 8192]).unwrap();
    let script = r#"set -e
cd "$1"
python3 - <<'EOF'
import mmap, os
fd = os.open('synced', os.O_RDWR)
m = mmap.mmap(fd, 16384)
m[100:5000] = b'y' * 4900
m.flush(0, 8192)
m.close()
os.close(fd)
fd = os.open('unsynced', os.O_RDWR)
m = mmap.mmap(fd, 8192)
m[0:10] = b'z' * 10
m.close()
os.close(fd)
EOF
"#;
    let (stats, a, b, prep) = replay_script(tmp.path(), &w, script);
    assert_eq!(stats["divergences"], 0, "{}", serde_json::to_string_pretty(&stats["first_divergences"]).unwrap());
    assert!(stats["by_kind"]["msync"]["performed"].as_u64().unwrap_or(0) >= 1, "{stats}");
    assert!(prep.contains("mapped shared and writable without an msync") && prep.contains("w/unsynced"), "{prep}");
    assert!(!prep.contains("w/synced"), "the msync'ed file is not named: {prep}");
    assert!(a == b, "the replayed tree differs from the recorded one:\n{}", tree_diff(&a, &b));
    if !require_tool(t, "fio") {
        return;
    }
    let trace = tmp.path().join("u.lst");
    let f = format!("--filename={}", p(&w.join("ring")));
    let argv =
        ["fio", "--name=ring", "--ioengine=io_uring", "--rw=write", "--bs=4k", "--size=64k", &f, "--output=/dev/null"];
    record(&trace, &argv, &[]);
    let plan = tmp.path().join("u.lsr");
    let out =
        latscope_ok(&["replay", "prepare", "-r", p(&trace), "-o", p(&plan), "--root", p(&tmp.path().join("sb2"))]);
    assert!(out.contains("submitted through io_uring"), "{out}");
    assert!(out.contains("io_uring: the operations submitted through a ring are not visible"), "{out}");
}

/// A clone the recording made on a file system with reflinks (XFS), replayed in a sandbox that
/// has none (ext4): done as a copy of the same bytes, counted and said, no divergence.
#[test]
fn a_clone_replays_as_a_copy_where_the_sandbox_cannot_clone() {
    let t = "clone_replays_as_copy";
    if !require_bpf(t) || !require_tool(t, "mkfs.xfs") || !require_tool(t, "mkfs.ext4") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let xfs = LoopFs::new("xfs", 300);
    let ext4 = LoopFs::new("ext4", 64);
    let src = xfs.mnt.join("src");
    let mut data = vec![0u8; 200_000];
    latscope_replay::pattern::fill(&mut data, 0);
    std::fs::write(&src, &data).unwrap();
    let trace = tmp.path().join("t.lst");
    let script = format!("cp --reflink=always {0}/src {0}/clone && cat {0}/clone > /dev/null", p(&xfs.mnt));
    record(&trace, &["sh", "-c", &script], &[]);
    let root = ext4.mnt.join("sb");
    let stats = replay(&trace, &tmp.path().join("p.lsr"), &root, &[]);
    assert_eq!(stats["divergences"], 0, "{stats}");
    assert_eq!(stats["by_kind"]["ficlone"]["performed"], 1, "{stats}");
    assert_eq!(stats["clones_copied"], 1, "{stats}");
    let text = latscope_ok(&["replay", "run", p(&tmp.path().join("p.lsr")), "--init", "--quiet"]);
    assert!(text.contains("1 clones (FICLONE) done as copies"), "{text}");
    let clone = std::fs::read(under_root(&root, &xfs.mnt.join("clone"))).unwrap();
    assert_eq!(clone.len(), data.len());
    assert!(clone == data, "the copy has the source's bytes (the generated pattern init wrote)");
}

/// A script run by a relative path before it changes directory, rsync mirroring into a
/// directory it reaches through an `O_PATH` fd (`utimensat(fd, ".")`) with `--delete`, sort's
/// temporary files, sqlite3 in WAL mode, `git mv`: zero divergences and the same tree.
#[test]
fn rsync_mirrors_sort_and_sqlite_wal_replay_without_divergence() {
    let t = "rsync_mirrors_sort_and_sqlite_wal_replay";
    if !require_bpf(t) {
        return;
    }
    for tool in ["rsync", "git", "sqlite3", "tar", "install"] {
        if !require_tool(t, tool) {
            return;
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir_all(w.join("src/a/b")).unwrap();
    for i in 1..=5 {
        std::fs::write(w.join(format!("src/a/f{i}")), vec![i as u8; i * 3000]).unwrap();
    }
    std::fs::write(w.join("src/a/b/g"), "hi\n").unwrap();
    std::fs::write(tmp.path().join("mirror.sh"), MIRRORS).unwrap();
    let trace = tmp.path().join("t.lst");
    let mut c = Command::new(bin());
    c.args(["record", "-w"]).arg(&trace).args(["--quiet", "--no-block", "--", "sh", "mirror.sh"]).arg(&w);
    let o = c.current_dir(tmp.path()).env("GIT_CONFIG_NOSYSTEM", "1").env("HOME", tmp.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let root = tmp.path().join("sb");
    let stats = replay(&trace, &tmp.path().join("p.lsr"), &root, &[]);
    assert_eq!(stats["divergences"], 0, "{}", serde_json::to_string_pretty(&stats["first_divergences"]).unwrap());
    let (a, b) = (full_tree(&w), full_tree(&under_root(&root, &w)));
    assert!(a == b, "the replayed tree differs from the recorded one:\n{}", tree_diff(&a, &b));
    // The script was read from where it was run, not from the directory it moved to.
    assert!(!under_root(&root, &w).join("mirror.sh").exists());
    assert!(under_root(&root, tmp.path()).join("mirror.sh").exists());
}

const MIRRORS: &str = r#"set -e
cd "$1"
cp -al src hl
rsync -a --delete src/ mirror/
rm src/a/f1
rsync -a --delete src/ mirror/
install -D -m 755 src/a/f2 bin/tool
truncate -s 100 src/a/f3
mkdir tmpd
seq 1 200000 | TMPDIR=$PWD/tmpd sort -S 64k -o sorted.txt
sqlite3 db.sqlite 'PRAGMA journal_mode=WAL; create table t(a); insert into t values(1),(2),(3);' >/dev/null
sqlite3 db.sqlite 'PRAGMA wal_checkpoint(TRUNCATE); delete from t where a=2;' >/dev/null
git init -q repo && cp -r src repo/ && git -C repo add -A
git -C repo -c user.name=a -c user.email=b@c commit -qm m
git -C repo mv src moved && git -C repo -c user.name=a -c user.email=b@c commit -qm mv
tar cf src.tar src && mkdir x && tar xf src.tar -C x && mv x/src x/moved
"#;

/// A command whose output goes to a file opened before the recording (`record -- CMD > log`):
/// the file is in the starting tree even when the command only closes it, and the run replays
/// without divergence.
#[test]
fn a_command_writing_to_a_file_opened_before_the_recording_replays() {
    let t = "a_command_writing_to_a_file_opened_before_the_recording_replays";
    if !require_bpf(t) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("res")).unwrap();
    let log = std::fs::File::create(tmp.path().join("res/record.log")).unwrap();
    let trace = tmp.path().join("t.lst");
    let out = tmp.path().join("out");
    let o = Command::new(bin())
        .args(["record", "--quiet", "--no-block", "-w"])
        .arg(&trace)
        .args(["--", "sh", "-c"])
        .arg(format!("echo start; dd if=/dev/zero of={} bs=4096 count=25 status=none; echo done", out.display()))
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .status()
        .unwrap();
    assert!(o.success());
    let root = tmp.path().join("sb");
    let stats = replay(&trace, &tmp.path().join("p.lsr"), &root, &[]);
    assert_eq!(stats["divergences"], 0, "{}", serde_json::to_string_pretty(&stats["first_divergences"]).unwrap());
    assert_eq!(std::fs::metadata(under_root(&root, &out)).unwrap().len(), 25 * 4096);
    // The command's two lines were written to the log in the replay too.
    assert_eq!(std::fs::metadata(under_root(&root, &tmp.path().join("res/record.log"))).unwrap().len(), 11);
}

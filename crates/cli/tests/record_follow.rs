//! Following a service: `record -p PID --follow` records the process, the workers it had at the
//! start and every process forked below it afterwards, with exact counts; without --follow only
//! the process itself. `record --cgroup` records exactly the tasks of a cgroup v2 cgroup and of
//! the cgroups below it. Wrong pids, cgroups and option combinations are refused by name.

mod common;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// A process tree: waits for DIR/go, then each process opens its own marker DIR/TAG-NAME a known
/// number of times with the shell's `: < FILE` (one openat in that process): the script itself
/// (parent, 2), a worker forked before the recorder started (worker, 5), the worker's child
/// forked later (workerchild, 6), a child (child, 3) and an exec'd grandchild (grand, 4).
const TREE: &str = r#"
D=$1; T=$2
opens() { i=0; while [ $i -lt $2 ]; do : < "$D/$T-$1"; i=$((i+1)); done; }
waitgo() { while [ ! -e "$D/go" ]; do sleep 0.05; done; }
if [ "$3" = grand ]; then opens grand 4; exit 0; fi
( waitgo; opens worker 5; ( opens workerchild 6; true ); true ) &
worker=$!
: > "$D/$T-ready"
waitgo
opens parent 2
( opens child 3; sh "$0" "$D" "$T" grand; true )
wait $worker
"#;

/// What TREE opens, by marker name.
const TREE_COUNTS: [(&str, usize); 5] = [("parent", 2), ("worker", 5), ("workerchild", 6), ("child", 3), ("grand", 4)];

/// One process and its child, each opening its marker: parent 3 times, child 2 times.
const PAIR: &str = r#"
D=$1; T=$2
opens() { i=0; while [ $i -lt $2 ]; do : < "$D/$T-$1"; i=$((i+1)); done; }
while [ ! -e "$D/go" ]; do sleep 0.05; done
opens parent 3
( opens child 2; true )
"#;

/// Start `script` (by sh) with DIR and TAG, its markers created.
fn start_script(dir: &Path, script: &str, tag: &str, names: &[&str]) -> Child {
    let path = dir.join(format!("{tag}.sh"));
    std::fs::write(&path, script).unwrap();
    for n in names {
        std::fs::write(dir.join(format!("{tag}-{n}")), b"").unwrap();
    }
    Command::new("sh").arg(&path).arg(dir).arg(tag).spawn().unwrap()
}

/// Wait until `file` exists (a script is ready, a recorder has started), up to 60 s.
fn wait_for(file: &Path, what: &str) {
    for _ in 0..1200 {
        if file.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what}: {} did not appear within 60 s", file.display());
}

/// `latscope record -w TRACE --no-block --quiet --json ARGS` in the background. The trace file
/// appears once the probes are attached and the processes below the followed ones are in.
fn spawn_recorder(trace: &Path, args: &[&str]) -> Child {
    Command::new(bin())
        .args(["record", "-w"])
        .arg(trace)
        .args(["--no-block", "--quiet", "--json", "--duration", "120"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Stop a recorder as Ctrl-C would; it must have succeeded, lost nothing and followed every child.
fn stop_recorder(rec: Child) -> Output {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let o = rec.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_slice(&o.stdout).expect("summary is JSON");
    assert_eq!(s["lost"], 0, "{s}");
    assert_eq!(s["not_followed"], 0, "{s}");
    o
}

/// Successful opens of the markers in `dir` recorded in `trace`: marker file name -> pids, one
/// entry per open.
fn marker_opens(trace: &Path, dir: &Path) -> BTreeMap<String, Vec<u64>> {
    let ev = json_lines(&latscope_ok(&["events", "-r", trace.to_str().unwrap(), "--json", "evt.type = openat"]));
    let mut m: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in &ev {
        let Some(p) = e["path"].as_str().map(PathBuf::from) else { continue };
        if p.parent() == Some(dir) && e["ret"].as_i64().unwrap_or(-1) >= 0 {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            // The scripts themselves (a grandchild runs one), their ready flags and the traces
            // are not markers.
            if [".sh", ".lst", "-ready"].iter().any(|s| name.ends_with(s)) {
                continue;
            }
            m.entry(name).or_default().push(e["pid"].as_u64().unwrap());
        }
    }
    m
}

/// The counts of `opens` by marker, and each marker's single pid.
fn counts(opens: &BTreeMap<String, Vec<u64>>) -> (BTreeMap<String, usize>, BTreeMap<String, u64>) {
    let mut n = BTreeMap::new();
    let mut pid = BTreeMap::new();
    for (k, v) in opens {
        n.insert(k.clone(), v.len());
        assert!(v.iter().all(|p| *p == v[0]), "{k} opened by one process: {v:?}");
        pid.insert(k.clone(), v[0]);
    }
    (n, pid)
}

#[test]
fn follow_records_workers_children_and_grandchildren_exactly_and_without_it_only_the_process() {
    if !require_bpf("follow_records_workers_children_and_grandchildren_exactly_and_without_it_only_the_process") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let names: Vec<&str> = TREE_COUNTS.iter().map(|c| c.0).collect();
    // Three copies of the tree: followed, not followed, and an outsider nobody asked for.
    let mut followed = start_script(&dir, TREE, "f", &names);
    let mut plain = start_script(&dir, TREE, "p", &names);
    let mut outsider = start_script(&dir, TREE, "o", &names);
    for t in ["f", "p", "o"] {
        wait_for(&dir.join(format!("{t}-ready")), "the script forks its worker");
    }
    let (tf, tp) = (dir.join("f.lst"), dir.join("p.lst"));
    let rf = spawn_recorder(&tf, &["-p", &followed.id().to_string(), "--follow"]);
    let rp = spawn_recorder(&tp, &["-p", &plain.id().to_string()]);
    wait_for(&tf, "the following recorder starts");
    wait_for(&tp, "the plain recorder starts");
    std::fs::write(dir.join("go"), b"").unwrap();
    for c in [&mut followed, &mut plain, &mut outsider] {
        assert!(c.wait().unwrap().success());
    }
    // The last events are in the ring buffer by now; a stop drains it.
    let _ = (stop_recorder(rf), stop_recorder(rp));

    let (n, pid) = counts(&marker_opens(&tf, &dir));
    let want: BTreeMap<String, usize> = TREE_COUNTS.iter().map(|(k, c)| (format!("f-{k}"), *c)).collect();
    assert_eq!(n, want, "--follow: every process of the tree, exactly, and nothing of the others");
    // Five processes: the script, its worker (there before the start), the worker's child, a
    // child and its exec'd child.
    let f = followed.id() as u64;
    assert_eq!(pid["f-parent"], f);
    let mut all: Vec<u64> = pid.values().copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 5, "five distinct processes: {pid:?}");

    let (n, pid) = counts(&marker_opens(&tp, &dir));
    assert_eq!(n, BTreeMap::from([("p-parent".to_string(), 2)]), "without --follow: the process alone");
    assert_eq!(pid["p-parent"], plain.id() as u64);
}

/// The cgroup2 mount: /sys/fs/cgroup on unified systems, /sys/fs/cgroup/unified on hybrid ones.
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mounts: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split(' ').nth(4)?;
            (right.starts_with("cgroup2 ")).then(|| PathBuf::from(point))
        })
        .collect();
    mounts.iter().find(|m| m.starts_with("/sys/fs/cgroup")).or(mounts.first()).cloned()
}

/// A cgroup made for a test, removed (its processes moved back to the root first) on drop.
struct TestCgroup {
    dirs: Vec<PathBuf>,
    root: PathBuf,
}

impl TestCgroup {
    fn new(root: &Path, name: &str) -> TestCgroup {
        let dir = root.join(name);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        TestCgroup { dirs: vec![dir], root: root.to_path_buf() }
    }
    fn sub(&mut self, name: &str) -> PathBuf {
        let d = self.dirs[0].join(name);
        std::fs::create_dir(&d).unwrap();
        self.dirs.push(d.clone());
        d
    }
    fn path(&self) -> &Path {
        &self.dirs[0]
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for d in self.dirs.iter().rev() {
            if let Ok(procs) = std::fs::read_to_string(d.join("cgroup.procs")) {
                for p in procs.lines() {
                    let _ = std::fs::write(self.root.join("cgroup.procs"), p);
                }
            }
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Move process `pid` into the cgroup at `dir`.
fn move_into(dir: &Path, pid: u32) {
    std::fs::write(dir.join("cgroup.procs"), pid.to_string()).unwrap();
}

#[test]
fn cgroup_records_exactly_the_tasks_of_the_cgroup_and_the_cgroups_below_it() {
    let test = "cgroup_records_exactly_the_tasks_of_the_cgroup_and_the_cgroups_below_it";
    if !require_bpf(test) {
        return;
    }
    let Some(root) = cgroup2_mount() else {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{test}: no cgroup2 file system is mounted");
        }
        eprintln!("SKIPPED {test}: no cgroup2 file system is mounted");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let name = format!("latscope-test-{}", std::process::id());
    let mut cg = TestCgroup::new(&root, &name);
    let sub = cg.sub("sub");
    let names = ["parent", "child"];
    let mut inside = start_script(&dir, PAIR, "in", &names);
    let mut below = start_script(&dir, PAIR, "sub", &names);
    let mut outside = start_script(&dir, PAIR, "out", &names);
    move_into(cg.path(), inside.id());
    move_into(&sub, below.id());
    let trace = dir.join("c.lst");
    // Named relative to the cgroup2 mount, as `system.slice/nginx.service` would be.
    let rec = spawn_recorder(&trace, &["--cgroup", &name]);
    wait_for(&trace, "the recorder starts");
    std::fs::write(dir.join("go"), b"").unwrap();
    for c in [&mut inside, &mut below, &mut outside] {
        assert!(c.wait().unwrap().success());
    }
    let _ = stop_recorder(rec);
    let (n, pid) = counts(&marker_opens(&trace, &dir));
    let want: BTreeMap<String, usize> = [("in-parent", 3), ("in-child", 2), ("sub-parent", 3), ("sub-child", 2)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    assert_eq!(n, want, "the cgroup's tasks and those below it, exactly; none outside");
    assert_eq!(pid["in-parent"], inside.id() as u64);
    assert_eq!(pid["sub-parent"], below.id() as u64);
    assert_ne!(pid["in-child"], pid["in-parent"], "the child is a process of its own");
}

/// Runs `latscope ARGS` expecting a refusal; returns stderr.
fn refused(args: &[&str]) -> String {
    let o = latscope(args);
    assert!(!o.status.success(), "latscope {args:?} should fail");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn follow_without_pid_and_unknown_pids_and_cgroups_are_refused_by_name() {
    // Options are checked before the probes load: no root needed, no file written.
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("x.lst");
    let t = trace.to_str().unwrap();
    let err = refused(&["record", "-w", t, "--follow"]);
    assert!(err.contains("--follow") && err.contains("-p PID"), "{err}");
    let err = refused(&["top", "-f", "--count", "1"]);
    assert!(err.contains("--follow") && err.contains("-p PID"), "top shares the live options: {err}");
    // Above the largest pid Linux hands out (2^22).
    let err = refused(&["record", "-w", t, "-p", "4194305", "--follow"]);
    assert!(err.contains("4194305") && err.contains("running"), "{err}");
    let err = refused(&["spectrogram", "--plain", "--cgroup", "latscope-no-such.slice/none"]);
    assert!(
        err.contains("latscope-no-such.slice/none") && (err.contains("no such cgroup") || err.contains("no cgroup v2")),
        "{err}"
    );
    let err = refused(&["record", "-w", t, "--cgroup", "latscope-no-such-unit.service"]);
    assert!(err.contains("latscope-no-such-unit.service"), "{err}");
    let err = refused(&["record", "-w", t, "--cgroup", "/proc"]);
    assert!(err.contains("/proc") && (err.contains("not a cgroup") || err.contains("no cgroup v2")), "{err}");
    assert!(!trace.exists(), "nothing written when the options are refused");
}

//! Shared helpers for latscope's integration tests: privilege checks with CI semantics,
//! loop-device file systems, running the binary.
#![allow(dead_code)]

pub mod http;
pub mod replay_trace;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The latscope binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_latscope"))
}

/// Run latscope with arguments; returns the output (never panics on non-zero exit).
pub fn latscope(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("latscope runs")
}

/// Like [`latscope`] but asserts success and returns stdout.
pub fn latscope_ok(args: &[&str]) -> String {
    run_ok(Command::new(bin()).args(args))
}

/// Runs `cmd`, asserts it succeeded, returns its standard output.
pub fn run_ok(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Like [`latscope_ok`], with standard output parsed as one JSON document.
pub fn latscope_json(args: &[&str]) -> serde_json::Value {
    let out = latscope_ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("latscope {args:?}: output is not JSON ({e}):\n{out}"))
}

/// Privilege and tool checks with CI semantics (skipped here, a failure under CI=true).
#[allow(unused_imports)] // each test file uses some
pub use latscope_testkit::{bpf_unavailable, require_bpf, require_tool};

/// A file system on a loop device, mounted on a temporary directory; torn down on drop.
pub struct LoopFs {
    pub dir: tempfile::TempDir,
    pub mnt: PathBuf,
    pub dev: String,
    image: PathBuf,
}

fn sh(cmd: &str) -> Result<String, String> {
    let o = Command::new("sh").arg("-c").arg(cmd).output().map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
    } else {
        Err(format!("{cmd}: {}", String::from_utf8_lossy(&o.stderr)))
    }
}

impl LoopFs {
    /// Make a `size_mb` image with `fstype` (ext4, xfs, ...), attach and mount it.
    pub fn new(fstype: &str, size_mb: u64) -> LoopFs {
        let dir = tempfile::tempdir().expect("tempdir");
        let image = dir.path().join("image");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        sh(&format!("truncate -s {size_mb}M {}", image.display())).unwrap();
        let dev = sh(&format!("losetup -f --show {}", image.display())).expect("losetup");
        let mkfs = match fstype {
            "ext4" => format!("mkfs.ext4 -q -F {dev}"),
            "xfs" => format!("mkfs.xfs -q -f {dev}"),
            other => format!("mkfs.{other} {dev}"),
        };
        if let Err(e) = sh(&mkfs) {
            let _ = sh(&format!("losetup -d {dev}"));
            panic!("{e}");
        }
        if let Err(e) = sh(&format!("mount {dev} {}", mnt.display())) {
            let _ = sh(&format!("losetup -d {dev}"));
            panic!("{e}");
        }
        LoopFs { dir, mnt, dev, image }
    }
    /// The loop device's kernel name (`loop3`).
    pub fn name(&self) -> String {
        self.dev.trim_start_matches("/dev/").to_string()
    }
    /// The loop device's `major:minor`.
    #[allow(dead_code)] // each test file uses some
    pub fn majmin(&self) -> String {
        majmin(&self.dev)
    }
}

/// `major:minor` of a block device (`/dev/loop3`).
pub fn majmin(dev: &str) -> String {
    sh(&format!("lsblk -dno MAJ:MIN {dev}")).expect("lsblk").replace(' ', "")
}

/// A loop device over an image of `size_mb` MiB, without a file system; detached when dropped.
pub struct LoopDev {
    /// The device (`/dev/loop3`).
    pub dev: String,
    /// Its `major:minor`.
    pub majmin: String,
    _dir: tempfile::TempDir,
}

impl LoopDev {
    #[allow(dead_code)] // each test file uses some
    pub fn new(size_mb: u64) -> LoopDev {
        let dir = tempfile::tempdir().expect("tempdir");
        let image = dir.path().join("image");
        std::fs::File::create(&image).unwrap().set_len(size_mb << 20).unwrap();
        let dev = sh(&format!("losetup -f --show {}", image.display())).expect("losetup");
        let majmin = majmin(&dev);
        LoopDev { dev, majmin, _dir: dir }
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = sh(&format!("losetup -d {}", self.dev));
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = sh(&format!("umount {}", self.mnt.display()));
        let _ = sh(&format!("losetup -d {}", self.dev));
        let _ = std::fs::remove_file(&self.image);
    }
}

/// Compile a C helper from tests/ into `dir`, returning the binary path.
pub fn compile_c(src: &str, dir: &Path) -> PathBuf {
    let out = dir.join(Path::new(src).file_stem().unwrap());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(src);
    let st = Command::new("cc").args(["-O2", "-Wall", "-pthread", "-o"]).arg(&out).arg(&src).status().expect("cc runs");
    assert!(st.success(), "compiling {} failed", src.display());
    out
}

/// Parse JSON lines.
pub fn json_lines(s: &str) -> Vec<serde_json::Value> {
    s.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("valid JSON line")).collect()
}

/// Runs a shell command when dropped (cleanup that must happen when an assertion fails).
#[allow(dead_code)] // each test file uses some
pub struct Defer(pub String);

impl Drop for Defer {
    fn drop(&mut self) {
        let _ = Command::new("sh").arg("-c").arg(&self.0).status();
    }
}

/// A loop device throttled to 20 write I/Os per second (blkio cgroup v1, or io.max on cgroup v2)
/// in a cgroup of its own: `dev` and `pre`, a shell command that moves the shell into the
/// cgroup. Dropping it removes both. `None` (said) where there is no controller to throttle with.
#[allow(dead_code)] // each test file uses some
pub struct ThrottledLoop {
    /// The device (`/dev/loop3`).
    pub dev: String,
    /// A shell command that moves the shell into the device's cgroup.
    pub pre: String,
    _rm: Defer,
    _lo: LoopDev,
}

#[allow(dead_code)] // each test file uses some
pub fn throttled_loop(test: &str) -> Option<ThrottledLoop> {
    let lo = LoopDev::new(64);
    let (dev, majmin) = (lo.dev.clone(), &lo.majmin);
    let name = format!("latscope-why-{}-{test}", std::process::id());
    let v1 = Path::new("/sys/fs/cgroup/blkio");
    let (cg, limit) = if v1.join("blkio.throttle.write_iops_device").exists() {
        (v1.join(&name), ("blkio.throttle.write_iops_device", format!("{majmin} 20")))
    } else {
        let root = Path::new("/sys/fs/cgroup");
        if !std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default().contains("io") {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{test}: no blkio (v1) or io (v2) controller to throttle a device with");
            }
            eprintln!("SKIPPED {test}: no blkio (v1) or io (v2) controller to throttle a device with");
            return None;
        }
        let _ = std::fs::write(root.join("cgroup.subtree_control"), "+io");
        (root.join(&name), ("io.max", format!("{majmin} wiops=20")))
    };
    std::fs::create_dir(&cg).unwrap();
    let rm = Defer(format!("rmdir {}", cg.display()));
    std::fs::write(cg.join(limit.0), limit.1).unwrap();
    let pre = format!("echo $$ > {}/cgroup.procs", cg.display());
    Some(ThrottledLoop { dev, pre, _rm: rm, _lo: lo })
}

/// A stack of `why --stacks --json` whose kernel stack is missing because the kernel did not
/// report its thread's switch back onto a CPU, where that stack is read (some kernels skip the
/// tracepoint for a few switches in a thousand; the call's time is still attributed). Tests
/// allow one such call: more would be a fault of latscope's, not a rare skip of the kernel's.
pub fn switch_unseen(s: &serde_json::Value) -> bool {
    s["kernel_missing"].as_str().is_some_and(|m| m.contains("switch back onto a CPU"))
}

/// The calls of `stacks` (a `why --stacks --json` list) that [`switch_unseen`] holds, checked
/// to be at most one.
pub fn calls_with_switch_unseen(stacks: &[serde_json::Value]) -> u64 {
    let n: u64 = stacks.iter().filter(|s| switch_unseen(s)).map(|s| s["calls"].as_u64().unwrap_or(0)).sum();
    assert!(n <= 1, "{n} calls without their kernel stack (switch back unseen): {stacks:?}");
    n
}

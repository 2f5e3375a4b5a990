//! The sandbox: the directories a replay may touch, and nothing else.
//!
//! * `root` mode: one directory `DIR`; recorded path `/a/b` is `DIR/a/b`.
//! * `name` mode: per recorded mount `M`, the directory `M/.latscope/NAME/`; recorded path
//!   `M/a/b` is `M/.latscope/NAME/a/b` (as I/O Riot lays out its tests).
//!
//! Each root holds a marker file, [`MARKER`], written by `init`: a root without it is not a
//! latscope sandbox and is never written to (a plan naming `/etc` as its root is refused
//! there). `init` moves what an earlier init of the same test left into a trash directory
//! (`DIR/.latscope-trash/` or `M/.latscope/.trash/NAME-*`), which `purge` empties. Another
//! test name's directories are never touched.
//!
//! At run time every path is resolved with `openat2(root_fd, path, RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)`, and before the run starts [`check_tree`] refuses a
//! sandbox that holds device nodes, FIFOs, sockets, mount points or symlinks leading out.

use crate::error::{ReplayError, Result};
use crate::plan::{target_stays_inside, RootSpec, SandboxSpec};
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Name of the marker file in each sandbox root.
pub const MARKER: &str = ".latscope-sandbox";
/// Trash directory inside a `root`-mode sandbox.
pub const ROOT_TRASH: &str = ".latscope-trash";
/// Names a replayed path may not start with (they belong to the sandbox's bookkeeping).
pub const RESERVED_PREFIX: &str = ".latscope";

const SYSTEM_DIRS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// True for an absolute path without empty, `.` or `..` components or a trailing slash.
pub fn is_normal_abs(p: &str) -> bool {
    p == "/"
        || (p.starts_with('/')
            && !p.ends_with('/')
            && p[1..].split('/').all(|c| !c.is_empty() && c != "." && c != ".."))
}

fn under(p: &str, dir: &str) -> bool {
    p == dir || p.starts_with(&format!("{dir}/"))
}

/// A test name: letters, digits, `.`, `_`, `-`; not starting with `.`; at most 64 bytes.
pub fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && !n.starts_with('.')
        && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// The sandbox root of test `name` on mount `mount`.
pub fn named_root(mount: &str, name: &str) -> String {
    format!("{}/.latscope/{name}", mount.trim_end_matches('/'))
}

/// Check a sandbox description (from a plan file, perhaps hostile).
pub fn validate_spec(s: &SandboxSpec) -> std::result::Result<(), String> {
    let system = |d: &str| SYSTEM_DIRS.iter().any(|s| under(d, s));
    match s.mode.as_str() {
        "root" => {
            let [r] = s.roots.as_slice() else { return Err(format!("root mode with {} roots", s.roots.len())) };
            if !is_normal_abs(&r.dir) || r.dir == "/" || system(&r.dir) {
                return Err(format!(
                    "sandbox root {:?} is not allowed (an absolute directory other than /, /proc, /sys, /dev)",
                    r.dir
                ));
            }
            if r.mount != "/" {
                return Err(format!("root mode maps mount {:?}", r.mount));
            }
        }
        "name" => {
            let name = s.name.as_deref().unwrap_or("");
            if !valid_name(name) {
                return Err(format!("test name {name:?} is not valid"));
            }
            let mut seen = std::collections::HashSet::new();
            for r in &s.roots {
                if !is_normal_abs(&r.mount) || system(&r.mount) || !seen.insert(&r.mount) {
                    return Err(format!("mount {:?} is not allowed", r.mount));
                }
                if r.dir != named_root(&r.mount, name) {
                    return Err(format!("sandbox root {:?} is not {:?}", r.dir, named_root(&r.mount, name)));
                }
            }
        }
        m => return Err(format!("unknown sandbox mode {m:?}")),
    }
    Ok(())
}

/// `spec` with its root directory replaced (`--root DIR` at init or run).
pub fn with_root(spec: &SandboxSpec, dir: &Path) -> Result<SandboxSpec> {
    if spec.mode != "root" {
        return Err(ReplayError::Usage(
            "--root applies to plans prepared with --root; this plan uses per-mount test directories (--name)".into(),
        ));
    }
    let dir = absolute(dir)?;
    let s = SandboxSpec {
        mode: "root".into(),
        name: None,
        roots: vec![RootSpec {
            dir,
            mount: "/".into(),
            fstype: spec.roots.first().map(|r| r.fstype.clone()).unwrap_or_default(),
        }],
    };
    validate_spec(&s).map_err(ReplayError::Sandbox)?;
    Ok(s)
}

/// A lexically normalised absolute form of `p` (relative to the working directory).
pub fn absolute(p: &Path) -> Result<String> {
    let s = p.to_str().ok_or_else(|| ReplayError::Usage(format!("{} is not UTF-8", p.display())))?;
    let base = if s.starts_with('/') {
        String::from("/")
    } else {
        std::env::current_dir().map_err(|e| ReplayError::io(".", e))?.to_string_lossy().into_owned()
    };
    let mut parts: Vec<&str> =
        if s.starts_with('/') { Vec::new() } else { base.split('/').filter(|c| !c.is_empty()).collect() };
    for c in s.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// The marker's content.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Marker {
    /// Always 1.
    pub latscope_sandbox: u32,
    /// The test name (`name` mode) or `None`.
    pub name: Option<String>,
    /// Checksum of the plan the tree was built for.
    pub plan: String,
    /// `ready` after init, `used` once a run started.
    pub state: String,
    /// Wall-clock ns of the init.
    pub initialised_ns: i64,
}

fn read_marker(dir: &Path) -> Option<Marker> {
    let s = std::fs::read_to_string(dir.join(MARKER)).ok()?;
    serde_json::from_str(&s).ok()
}

fn write_marker(dir: &Path, m: &Marker) -> Result<()> {
    use std::io::Write;
    let p = dir.join(MARKER);
    // The safe output: never through a link planted at the marker's name.
    let mut f = latscope_trace::AtomicFile::create(&p)?;
    f.write_all(&serde_json::to_vec(m).unwrap_or_default()).map_err(|e| ReplayError::io(&p, e))?;
    Ok(f.commit()?)
}

fn wall_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// The open sandbox roots.
#[derive(Debug)]
pub struct Sandbox {
    /// The description.
    pub spec: SandboxSpec,
    /// One directory fd per root, in spec order.
    pub roots: Vec<OwnedFd>,
}

fn open_dir(p: &str) -> Result<OwnedFd> {
    let c = CString::new(p).map_err(|_| ReplayError::Sandbox(format!("{p:?} holds a NUL byte")))?;
    // SAFETY: plain open of a NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(ReplayError::sys(format!("cannot open the sandbox directory {p}")));
    }
    // SAFETY: we own the fd just opened.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Sandbox {
    /// Make fresh, empty roots for a plan (for `init`): what an earlier init of the same test
    /// left goes to the trash. Returns the sandbox and, per root, where the old tree went.
    pub fn create_fresh(
        spec: &SandboxSpec,
        plan_id: u32,
        owner: Option<(u32, u32)>,
    ) -> Result<(Sandbox, Vec<PathBuf>)> {
        validate_spec(spec).map_err(ReplayError::Sandbox)?;
        let stamp = wall_ns();
        let mut trashed = Vec::new();
        let mut roots = Vec::new();
        for r in &spec.roots {
            let dir = PathBuf::from(&r.dir);
            if spec.mode == "name" {
                let m = Path::new(&r.mount);
                if !m.is_dir() {
                    return Err(ReplayError::Sandbox(format!(
                        "the recorded mount point {} does not exist here: create it (or mount the file system to test there), or prepare the plan with --root DIR",
                        r.mount
                    )));
                }
                let base = m.join(".latscope");
                mkdir_p(&base, None)?;
                if dir.symlink_metadata().is_ok() {
                    if read_marker(&dir).is_none() {
                        return Err(ReplayError::Sandbox(format!(
                            "{} exists but is not a latscope sandbox (no {MARKER}): it was not made by 'latscope replay init'; move it away",
                            dir.display()
                        )));
                    }
                    let trash = base.join(".trash");
                    mkdir_p(&trash, None)?;
                    let to = trash.join(format!("{}-{stamp}", spec.name.as_deref().unwrap_or("")));
                    std::fs::rename(&dir, &to).map_err(|e| ReplayError::io(&dir, e))?;
                    trashed.push(to);
                }
                mkdir_p(&dir, owner)?;
            } else if dir.symlink_metadata().is_ok() {
                let md = dir.symlink_metadata().map_err(|e| ReplayError::io(&dir, e))?;
                if !md.is_dir() {
                    return Err(ReplayError::Sandbox(format!("{} is not a directory", dir.display())));
                }
                let entries: Vec<_> = std::fs::read_dir(&dir)
                    .map_err(|e| ReplayError::io(&dir, e))?
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name())
                    .collect();
                let ours = read_marker(&dir).is_some();
                if !ours && !entries.is_empty() {
                    return Err(ReplayError::Sandbox(format!(
                        "{} is not empty and is not a latscope sandbox (no {MARKER}): give an empty or new directory",
                        dir.display()
                    )));
                }
                let old: Vec<_> = entries.into_iter().filter(|n| n != ROOT_TRASH && n != MARKER).collect();
                if !old.is_empty() {
                    let to = dir.join(ROOT_TRASH).join(stamp.to_string());
                    mkdir_p(&to, None)?;
                    for n in old {
                        let from = dir.join(&n);
                        std::fs::rename(&from, to.join(&n)).map_err(|e| ReplayError::io(&from, e))?;
                    }
                    trashed.push(to);
                }
            } else {
                mkdir_p(&dir, owner)?;
            }
            if let Some((u, g)) = owner {
                chown(&dir, u, g)?;
            }
            write_marker(
                &dir,
                &Marker {
                    latscope_sandbox: 1,
                    name: spec.name.clone(),
                    plan: format!("{plan_id:08x}"),
                    state: "building".into(),
                    initialised_ns: stamp,
                },
            )?;
            roots.push(open_dir(&r.dir)?);
        }
        Ok((Sandbox { spec: spec.clone(), roots }, trashed))
    }

    /// Mark every root ready for a run of `plan_id` (the end of `init`).
    pub fn mark(&self, plan_id: u32, state: &str) -> Result<()> {
        for r in &self.spec.roots {
            let dir = Path::new(&r.dir);
            let mut m = read_marker(dir).ok_or_else(|| ReplayError::Sandbox(format!("{} lost its marker", r.dir)))?;
            m.plan = format!("{plan_id:08x}");
            m.state = state.into();
            write_marker(dir, &m)?;
        }
        Ok(())
    }

    /// Open the roots `init` built for `plan_id` (for `run`), refusing a missing, foreign,
    /// unfinished or already used sandbox.
    pub fn open_ready(spec: &SandboxSpec, plan_id: u32) -> Result<Sandbox> {
        validate_spec(spec).map_err(ReplayError::Sandbox)?;
        let mut roots = Vec::new();
        for r in &spec.roots {
            let dir = Path::new(&r.dir);
            let Some(m) = read_marker(dir) else {
                return Err(ReplayError::Sandbox(format!(
                    "{} is not an initialised sandbox: run 'latscope replay init PLAN' first",
                    r.dir
                )));
            };
            if m.name != spec.name {
                return Err(ReplayError::Sandbox(format!("{} belongs to another test", r.dir)));
            }
            if m.plan != format!("{plan_id:08x}") {
                return Err(ReplayError::Sandbox(format!(
                    "{} was initialised for another plan: run 'latscope replay init PLAN' with this plan",
                    r.dir
                )));
            }
            match m.state.as_str() {
                "ready" => {}
                "used" => {
                    return Err(ReplayError::Sandbox(format!(
                    "{} was already used by a run: initialise it again ('latscope replay init PLAN', or 'run --init')",
                    r.dir
                )))
                }
                _ => {
                    return Err(ReplayError::Sandbox(format!(
                        "{} was not completely initialised: run 'latscope replay init PLAN' again",
                        r.dir
                    )))
                }
            }
            roots.push(open_dir(&r.dir)?);
        }
        Ok(Sandbox { spec: spec.clone(), roots })
    }

    /// Whether the current (effective) user can write every root.
    pub fn check_writable(&self) -> Result<()> {
        for (r, fd) in self.spec.roots.iter().zip(&self.roots) {
            // SAFETY: faccessat on our directory fd.
            let ok =
                unsafe { libc::faccessat(fd.as_raw_fd(), c".".as_ptr(), libc::W_OK | libc::X_OK, libc::AT_EACCESS) };
            if ok != 0 {
                // SAFETY: geteuid has no preconditions.
                let uid = unsafe { libc::geteuid() };
                return Err(ReplayError::Sandbox(format!(
                    "user {uid} cannot write the sandbox {}: initialise it with 'init --user USER' for that user, or run as its owner",
                    r.dir
                )));
            }
        }
        Ok(())
    }
}

/// The uid and gid of a user given by name or number.
pub fn lookup_user(user: &str) -> Result<(u32, u32)> {
    let c = CString::new(user).map_err(|_| ReplayError::Usage(format!("user {user:?} holds a NUL byte")))?;
    // SAFETY: getpwnam/getpwuid return a pointer to static storage or null; read at once.
    unsafe {
        let mut pw = libc::getpwnam(c.as_ptr());
        if pw.is_null() {
            if let Ok(uid) = user.parse::<u32>() {
                pw = libc::getpwuid(uid);
                if pw.is_null() {
                    return Ok((uid, uid));
                }
            }
        }
        if pw.is_null() {
            return Err(ReplayError::Usage(format!("no user {user:?} on this machine")));
        }
        Ok(((*pw).pw_uid, (*pw).pw_gid))
    }
}

/// Empty the trash of a sandbox; returns the directories removed.
pub fn purge(spec: &SandboxSpec) -> Result<Vec<PathBuf>> {
    validate_spec(spec).map_err(ReplayError::Sandbox)?;
    let mut removed = Vec::new();
    for r in &spec.roots {
        if spec.mode == "root" {
            let t = Path::new(&r.dir).join(ROOT_TRASH);
            if t.symlink_metadata().is_ok() {
                std::fs::remove_dir_all(&t).map_err(|e| ReplayError::io(&t, e))?;
                removed.push(t);
            }
        } else {
            let trash = Path::new(&r.mount).join(".latscope").join(".trash");
            let prefix = format!("{}-", spec.name.as_deref().unwrap_or(""));
            let Ok(rd) = std::fs::read_dir(&trash) else { continue };
            for e in rd.filter_map(|e| e.ok()) {
                let n = e.file_name().to_string_lossy().into_owned();
                // NAME-<digits> only: another test's "NAME-x-<digits>" is not ours.
                if n.strip_prefix(&prefix).is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())) {
                    let p = e.path();
                    std::fs::remove_dir_all(&p).map_err(|e| ReplayError::io(&p, e))?;
                    removed.push(p);
                }
            }
        }
    }
    Ok(removed)
}

fn mkdir_p(p: &Path, owner: Option<(u32, u32)>) -> Result<()> {
    match std::fs::create_dir_all(p) {
        Ok(()) => {}
        Err(e) => return Err(ReplayError::io(p, e)),
    }
    let md = p.symlink_metadata().map_err(|e| ReplayError::io(p, e))?;
    if !md.is_dir() {
        return Err(ReplayError::Sandbox(format!("{} is not a directory", p.display())));
    }
    if let Some((u, g)) = owner {
        chown(p, u, g)?;
    }
    Ok(())
}

fn chown(p: &Path, uid: u32, gid: u32) -> Result<()> {
    std::os::unix::fs::lchown(p, Some(uid), Some(gid)).map_err(|e| ReplayError::io(p, e))
}

/// Refuse a sandbox tree that could lead a replay out: device nodes, FIFOs, sockets, mount
/// points, symlinks whose target leaves the root, files with more than one hard link. Walks without following symlinks; the trash
/// and the marker are not part of the tree.
pub fn check_tree(root: &Path) -> Result<u64> {
    let root_dev = root.symlink_metadata().map_err(|e| ReplayError::io(root, e))?.dev();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    let mut n = 0u64;
    while let Some((dir, depth)) = stack.pop() {
        let rd = std::fs::read_dir(&dir).map_err(|e| ReplayError::io(&dir, e))?;
        for e in rd {
            let e = e.map_err(|e| ReplayError::io(&dir, e))?;
            let name = e.file_name();
            if depth == 0 && name.to_string_lossy().starts_with(RESERVED_PREFIX) {
                continue;
            }
            let p = e.path();
            let md = p.symlink_metadata().map_err(|e| ReplayError::io(&p, e))?;
            let ft = md.file_type();
            n += 1;
            let refuse = |what: &str| {
                Err(ReplayError::Sandbox(format!(
                    "{} is {what}: a replay never creates one, so the sandbox was altered; refusing to run (run 'latscope replay init PLAN' again)",
                    p.display()
                )))
            };
            if ft.is_block_device() || ft.is_char_device() {
                return refuse("a device node");
            }
            if ft.is_fifo() || ft.is_socket() {
                return refuse("a FIFO or socket");
            }
            if md.dev() != root_dev {
                return refuse("on another file system (a mount point)");
            }
            if !ft.is_dir() && md.nlink() > 1 {
                // A replay opens files for writing (O_TRUNC too): through a hard link planted
                // here it would write a file outside the sandbox.
                return refuse(&format!(
                    "a file with {} hard links (the same file has another name, maybe outside the sandbox)",
                    md.nlink()
                ));
            }
            if ft.is_symlink() {
                let t = std::fs::read_link(&p).map_err(|e| ReplayError::io(&p, e))?;
                if !t.to_str().is_some_and(|t| target_stays_inside(t, depth)) {
                    return refuse(&format!("a symlink leading out of the sandbox (to {})", t.display()));
                }
            } else if ft.is_dir() {
                stack.push((p, depth + 1));
            }
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_spec(dir: &str) -> SandboxSpec {
        SandboxSpec {
            mode: "root".into(),
            name: None,
            roots: vec![RootSpec { dir: dir.into(), mount: "/".into(), fstype: String::new() }],
        }
    }

    #[test]
    fn specs_are_checked() {
        assert!(validate_spec(&root_spec("/tmp/x")).is_ok());
        for bad in ["/", "/proc/x", "/dev", "tmp/x", "/tmp/../etc", "/tmp/x/"] {
            assert!(validate_spec(&root_spec(bad)).is_err(), "{bad}");
        }
        let named = |mount: &str, dir: &str, name: &str| SandboxSpec {
            mode: "name".into(),
            name: Some(name.into()),
            roots: vec![RootSpec { dir: dir.into(), mount: mount.into(), fstype: String::new() }],
        };
        assert!(validate_spec(&named("/", "/.latscope/t1", "t1")).is_ok());
        assert!(validate_spec(&named("/data", "/data/.latscope/t1", "t1")).is_ok());
        assert!(validate_spec(&named("/data", "/data/.latscope/t2", "t1")).is_err(), "another test's directory");
        assert!(validate_spec(&named("/data", "/etc", "t1")).is_err());
        assert!(validate_spec(&named("/data", "/data/.latscope/..", "..")).is_err());
    }

    #[test]
    fn init_refuses_foreign_directories_and_trashes_its_own() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("sb");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("precious"), b"x").unwrap();
        let spec = root_spec(dir.to_str().unwrap());
        let e = Sandbox::create_fresh(&spec, 1, None).unwrap_err().to_string();
        assert!(e.contains("not a latscope sandbox"), "{e}");
        assert!(dir.join("precious").exists());
        std::fs::remove_file(dir.join("precious")).unwrap();

        let (sb, trashed) = Sandbox::create_fresh(&spec, 7, None).unwrap();
        assert!(trashed.is_empty());
        let e = Sandbox::open_ready(&spec, 7).unwrap_err().to_string();
        assert!(e.contains("not completely initialised"), "{e}");
        sb.mark(7, "ready").unwrap();
        std::fs::write(dir.join("old"), b"x").unwrap();
        assert!(Sandbox::open_ready(&spec, 8).unwrap_err().to_string().contains("another plan"));
        let run = Sandbox::open_ready(&spec, 7).unwrap();
        run.mark(7, "used").unwrap();
        assert!(Sandbox::open_ready(&spec, 7).unwrap_err().to_string().contains("already used"));

        let (_sb, trashed) = Sandbox::create_fresh(&spec, 7, None).unwrap();
        assert_eq!(trashed.len(), 1);
        assert!(trashed[0].join("old").exists() && !dir.join("old").exists());
        assert_eq!(purge(&spec).unwrap().len(), 1);
        assert!(!dir.join(ROOT_TRASH).exists());
    }

    #[test]
    fn tree_check_finds_what_leads_out() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("a/b")).unwrap();
        std::os::unix::fs::symlink("../x", r.join("a/ok")).unwrap();
        assert_eq!(check_tree(r).unwrap(), 3);
        std::os::unix::fs::symlink("../../..", r.join("a/b/up")).unwrap();
        assert!(check_tree(r).unwrap_err().to_string().contains("leading out"));
        std::fs::remove_file(r.join("a/b/up")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", r.join("abs")).unwrap();
        assert!(check_tree(r).is_err());
        std::fs::remove_file(r.join("abs")).unwrap();
        let fifo = CString::new(r.join("a/p").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(check_tree(r).unwrap_err().to_string().contains("FIFO"));
    }
}

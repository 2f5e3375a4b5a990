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

mod at;

use crate::error::{ReplayError, Result};
use crate::plan::{target_stays_inside, RootSpec, SandboxSpec};
use serde::{Deserialize, Serialize};
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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

/// Most bytes a marker may have (it holds a few short fields).
const MARKER_MAX: usize = 4096;

/// The marker of the root open as `dir` (`shown` names it): `None` when there is none; anything
/// but a small regular file of ours at its name is refused ([`at::read_own_file`]).
fn read_marker(dir: i32, shown: &Path) -> Result<Option<Marker>> {
    let p = shown.join(MARKER);
    let Some(bytes) = at::read_own_file(dir, &at::cname(MARKER), &p, "sandbox marker", MARKER_MAX)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        ReplayError::Sandbox(format!(
            "{} is not a latscope sandbox marker ({e}): remove it and run 'latscope replay init PLAN' again",
            p.display()
        ))
    })
}

fn write_marker(dir: i32, shown: &Path, m: &Marker) -> Result<()> {
    at::write_file_at(dir, &at::cname(MARKER), &shown.join(MARKER), &serde_json::to_vec(m).unwrap_or_default())
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

fn renameat(from_dir: i32, from: &CStr, to_dir: i32, to: &CStr) -> std::io::Result<()> {
    // SAFETY: valid directory fds and NUL-terminated names.
    if unsafe { libc::renameat(from_dir, from.as_ptr(), to_dir, to.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn mkdir_at(dir: i32, name: &CStr, shown: &Path) -> Result<OwnedFd> {
    // SAFETY: valid fd and NUL-terminated name.
    if unsafe { libc::mkdirat(dir, name.as_ptr(), 0o755) } != 0 {
        return Err(ReplayError::io(shown, std::io::Error::last_os_error()));
    }
    let fd = at::open_dir_at(dir, name).map_err(|e| ReplayError::io(shown, e))?;
    // 0755 whatever the umask: nobody else may change what a replay finds.
    // SAFETY: fchmod on our fd.
    unsafe { libc::fchmod(fd.as_raw_fd(), 0o755) };
    Ok(fd)
}

/// A fresh root in `name` mode: `M/.latscope` (ours: nobody else may write it) holds the
/// sandboxes; an earlier tree of the test (with a marker of ours) moves to `M/.latscope/.trash`.
fn fresh_named(spec: &SandboxSpec, r: &RootSpec, stamp: i64, trashed: &mut Vec<PathBuf>) -> Result<OwnedFd> {
    let m = Path::new(&r.mount);
    if !m.is_dir() {
        return Err(ReplayError::Sandbox(format!(
            "the recorded mount point {} does not exist here: create it (or mount the file system to test there), or prepare the plan with --root DIR",
            r.mount
        )));
    }
    let mfd = at::open_dir_path(&r.mount, true)?;
    let base_shown = m.join(".latscope");
    let base = at::own_dir(mfd.as_raw_fd(), c".latscope", &base_shown, "directory of sandboxes", 0o755, true)?
        .ok_or_else(|| ReplayError::Sandbox(format!("{} vanished", base_shown.display())))?;
    let base = base.as_raw_fd();
    let name = spec.name.as_deref().unwrap_or("");
    let cn = at::cname(name);
    let dir = PathBuf::from(&r.dir);
    if let Some(st) = at::lstat_at(base, &cn).map_err(|e| ReplayError::io(&dir, e))? {
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(at::refusal(&dir, &at::describe(&st, base, &cn), "sandbox directory"));
        }
        let old = at::open_dir_at(base, &cn).map_err(|e| ReplayError::io(&dir, e))?;
        if read_marker(old.as_raw_fd(), &dir)?.is_none() {
            return Err(ReplayError::Sandbox(format!(
                "{} exists but is not a latscope sandbox (no {MARKER}): it was not made by 'latscope replay init'; move it away",
                dir.display()
            )));
        }
        drop(old);
        let tshown = base_shown.join(".trash");
        let trash = at::own_dir(base, c".trash", &tshown, "trash directory", 0o700, true)?
            .ok_or_else(|| ReplayError::Sandbox(format!("{} vanished", tshown.display())))?;
        let to = format!("{name}-{stamp}");
        renameat(base, &cn, trash.as_raw_fd(), &at::cname(&to)).map_err(|e| ReplayError::io(&dir, e))?;
        trashed.push(tshown.join(to));
    }
    mkdir_at(base, &cn, &dir)
}

/// A fresh root in `root` mode: the directory (created if missing) must be empty or hold a
/// marker of ours; it is taken over (owned by us, writable by nobody else) before what an
/// earlier init left moves to `DIR/.latscope-trash/<time>/`.
fn fresh_root(dir: &Path, stamp: i64, trashed: &mut Vec<PathBuf>) -> Result<OwnedFd> {
    let (Some(parent), Some(base)) = (dir.parent(), dir.file_name()) else {
        return Err(ReplayError::Sandbox(format!("{} is not a directory a sandbox can be in", dir.display())));
    };
    std::fs::create_dir_all(parent).map_err(|e| ReplayError::io(dir, e))?;
    let pfd = at::open_dir_path(&parent.to_string_lossy(), true)?;
    let pfd = pfd.as_raw_fd();
    let cb = at::cname(&base.to_string_lossy());
    let fd = match at::lstat_at(pfd, &cb).map_err(|e| ReplayError::io(dir, e))? {
        None => return mkdir_at(pfd, &cb, dir),
        Some(st) if st.st_mode & libc::S_IFMT != libc::S_IFDIR => {
            return Err(ReplayError::Sandbox(format!(
                "{} is {}, not a directory",
                dir.display(),
                at::describe(&st, pfd, &cb)
            )))
        }
        Some(_) => at::open_dir_at(pfd, &cb).map_err(|e| ReplayError::io(dir, e))?,
    };
    let d = fd.as_raw_fd();
    let entries = at::names(d).map_err(|e| ReplayError::io(dir, e))?;
    let ours = read_marker(d, dir)?.is_some();
    if !ours && !entries.is_empty() {
        return Err(ReplayError::Sandbox(format!(
            "{} is not empty and is not a latscope sandbox (no {MARKER}): give an empty or new directory",
            dir.display()
        )));
    }
    // Taken over before anything moves: whoever owned it (the user of an earlier 'init --user',
    // or whoever made the empty directory) can no longer add, swap or plant anything while the
    // old tree moves out and the new one is built.
    let st = at::fstat(d).map_err(|e| ReplayError::io(dir, e))?;
    let (uid, gid) = at::me();
    // SAFETY: fchown and fchmod on our fd.
    unsafe {
        if st.st_uid != uid && libc::fchown(d, uid, gid) != 0 {
            return Err(ReplayError::sys(format!(
                "cannot take over the sandbox {} (owned by uid {})",
                dir.display(),
                st.st_uid
            )));
        }
        libc::fchmod(d, st.st_mode & 0o755);
    }
    // Listed again: what its owner added meanwhile goes to the trash too.
    let entries = at::names(d).map_err(|e| ReplayError::io(dir, e))?;
    let old: Vec<CString> = entries
        .into_iter()
        .filter(|n| n.as_bytes() != ROOT_TRASH.as_bytes() && n.as_bytes() != MARKER.as_bytes())
        .collect();
    if !old.is_empty() {
        let tshown = dir.join(ROOT_TRASH);
        let trash = at::own_dir(d, &at::cname(ROOT_TRASH), &tshown, "trash directory", 0o700, true)?
            .ok_or_else(|| ReplayError::Sandbox(format!("{} vanished", tshown.display())))?;
        let sname = stamp.to_string();
        let to_shown = tshown.join(&sname);
        let to = at::own_dir(trash.as_raw_fd(), &at::cname(&sname), &to_shown, "trash directory", 0o700, true)?
            .ok_or_else(|| ReplayError::Sandbox(format!("{} vanished", to_shown.display())))?;
        for n in old {
            renameat(d, &n, to.as_raw_fd(), &n)
                .map_err(|e| ReplayError::io(dir.join(n.to_string_lossy().as_ref()), e))?;
        }
        trashed.push(to_shown);
    }
    Ok(fd)
}

/// The root directory of an initialised sandbox (`None`: it does not exist).
fn open_root(spec: &SandboxSpec, r: &RootSpec) -> Result<Option<OwnedFd>> {
    let dir = Path::new(&r.dir);
    let missing = |e: &std::io::Error| e.raw_os_error() == Some(libc::ENOENT);
    if spec.mode == "name" {
        let mfd = match at::open_dir_path(&r.mount, true) {
            Ok(f) => f,
            Err(ReplayError::Sys { source, .. }) if missing(&source) => return Ok(None),
            Err(e) => return Err(e),
        };
        let base_shown = Path::new(&r.mount).join(".latscope");
        let Some(base) =
            at::own_dir(mfd.as_raw_fd(), c".latscope", &base_shown, "directory of sandboxes", 0o755, false)?
        else {
            return Ok(None);
        };
        let cn = at::cname(spec.name.as_deref().unwrap_or(""));
        return match at::open_dir_at(base.as_raw_fd(), &cn) {
            Ok(f) => Ok(Some(f)),
            Err(e) if missing(&e) => Ok(None),
            Err(e) => Err(ReplayError::io(dir, e)),
        };
    }
    match at::open_dir_path(&r.dir, false) {
        Ok(f) => Ok(Some(f)),
        Err(ReplayError::Sys { source, .. }) if missing(&source) => Ok(None),
        Err(e) => Err(e),
    }
}

impl Sandbox {
    /// Make fresh, empty roots for a plan (for `init`): what an earlier init of the same test
    /// left goes to the trash. Returns the sandbox and, per root, where the old tree went. The
    /// roots stay ours until [`Sandbox::hand_over`].
    pub fn create_fresh(spec: &SandboxSpec, plan_id: u32) -> Result<(Sandbox, Vec<PathBuf>)> {
        validate_spec(spec).map_err(ReplayError::Sandbox)?;
        let stamp = wall_ns();
        let mut trashed = Vec::new();
        let mut roots = Vec::new();
        for r in &spec.roots {
            let dir = PathBuf::from(&r.dir);
            let fd = if spec.mode == "name" {
                fresh_named(spec, r, stamp, &mut trashed)?
            } else {
                fresh_root(&dir, stamp, &mut trashed)?
            };
            let m = Marker {
                latscope_sandbox: 1,
                name: spec.name.clone(),
                plan: format!("{plan_id:08x}"),
                state: "building".into(),
                initialised_ns: stamp,
            };
            write_marker(fd.as_raw_fd(), &dir, &m)?;
            roots.push(fd);
        }
        Ok((Sandbox { spec: spec.clone(), roots }, trashed))
    }

    /// Gives every root to `owner` (uid, gid), the end of `init --user`: from then on that
    /// user may change the tree, and nothing in it is trusted by root (the marker stays ours).
    pub fn hand_over(&self, owner: (u32, u32)) -> Result<()> {
        for (r, fd) in self.spec.roots.iter().zip(&self.roots) {
            // SAFETY: fchown on our directory fd.
            if unsafe { libc::fchown(fd.as_raw_fd(), owner.0, owner.1) } != 0 {
                return Err(ReplayError::sys(format!("cannot give the sandbox {} to uid {}", r.dir, owner.0)));
            }
        }
        Ok(())
    }

    /// Mark every root `state` for `plan_id` (`ready` at the end of `init`, `used` by `run`).
    pub fn mark(&self, plan_id: u32, state: &str) -> Result<()> {
        for (r, fd) in self.spec.roots.iter().zip(&self.roots) {
            let dir = Path::new(&r.dir);
            let mut m = read_marker(fd.as_raw_fd(), dir)?
                .ok_or_else(|| ReplayError::Sandbox(format!("{} lost its marker", r.dir)))?;
            m.plan = format!("{plan_id:08x}");
            m.state = state.into();
            write_marker(fd.as_raw_fd(), dir, &m)?;
        }
        Ok(())
    }

    /// Open the roots `init` built for `plan_id` (for `run`), refusing a missing, foreign,
    /// unfinished or already used sandbox.
    pub fn open_ready(spec: &SandboxSpec, plan_id: u32) -> Result<Sandbox> {
        validate_spec(spec).map_err(ReplayError::Sandbox)?;
        let mut roots = Vec::new();
        for r in &spec.roots {
            let not_ready = || {
                ReplayError::Sandbox(format!(
                    "{} is not an initialised sandbox: run 'latscope replay init PLAN' first",
                    r.dir
                ))
            };
            let fd = open_root(spec, r)?.ok_or_else(not_ready)?;
            let m = read_marker(fd.as_raw_fd(), Path::new(&r.dir))?.ok_or_else(not_ready)?;
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
            roots.push(fd);
        }
        Ok(Sandbox { spec: spec.clone(), roots })
    }

    /// Refuses to run as a user other than the one owning the roots: the owner can change the
    /// tree while the replay runs (a FIFO where a file was opens forever), so root replays
    /// another user's sandbox only as that user (`run --user`).
    pub fn check_owner(&self, user: Option<(u32, u32)>) -> Result<()> {
        let me = at::me().0;
        let runs_as = user.map(|u| u.0).unwrap_or(me);
        for (r, fd) in self.spec.roots.iter().zip(&self.roots) {
            let st = at::fstat(fd.as_raw_fd()).map_err(|e| ReplayError::io(&r.dir, e))?;
            if st.st_uid != me && st.st_uid != runs_as {
                return Err(ReplayError::Sandbox(format!(
                    "{} belongs to uid {} (an 'init --user'), and the replay would run as uid {runs_as}: run it as \
                     its owner ('run --user {}'), or initialise it again for this user",
                    r.dir, st.st_uid, st.st_uid
                )));
            }
        }
        Ok(())
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

/// Removes `name` in directory `dir` and everything below it, without following a symlink
/// (through `/proc/self/fd/N`, which pins the directory checked).
fn remove_tree_at(dir: i32, name: &CStr, shown: &Path) -> Result<()> {
    let p = PathBuf::from(format!("/proc/self/fd/{dir}/{}", name.to_string_lossy()));
    std::fs::remove_dir_all(&p).map_err(|e| ReplayError::io(shown, e))
}

/// Empty the trash of a sandbox; returns the directories removed. A trash that is not ours (a
/// symlink, another user's directory) is refused, not followed.
pub fn purge(spec: &SandboxSpec) -> Result<Vec<PathBuf>> {
    validate_spec(spec).map_err(ReplayError::Sandbox)?;
    let mut removed = Vec::new();
    for r in &spec.roots {
        if spec.mode == "root" {
            let Some(root) = open_root(spec, r)? else { continue };
            let t = Path::new(&r.dir).join(ROOT_TRASH);
            let ct = at::cname(ROOT_TRASH);
            if at::own_dir(root.as_raw_fd(), &ct, &t, "trash directory", 0o700, false)?.is_some() {
                remove_tree_at(root.as_raw_fd(), &ct, &t)?;
                removed.push(t);
            }
        } else {
            let Ok(mfd) = at::open_dir_path(&r.mount, true) else { continue };
            let base_shown = Path::new(&r.mount).join(".latscope");
            let Some(base) =
                at::own_dir(mfd.as_raw_fd(), c".latscope", &base_shown, "directory of sandboxes", 0o755, false)?
            else {
                continue;
            };
            let tshown = base_shown.join(".trash");
            let Some(trash) = at::own_dir(base.as_raw_fd(), c".trash", &tshown, "trash directory", 0o700, false)?
            else {
                continue;
            };
            let prefix = format!("{}-", spec.name.as_deref().unwrap_or(""));
            for n in at::names(trash.as_raw_fd()).map_err(|e| ReplayError::io(&tshown, e))? {
                let s = n.to_string_lossy().into_owned();
                // NAME-<digits> only: another test's "NAME-x-<digits>" is not ours.
                if s.strip_prefix(&prefix).is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())) {
                    let p = tshown.join(&s);
                    remove_tree_at(trash.as_raw_fd(), &n, &p)?;
                    removed.push(p);
                }
            }
        }
    }
    Ok(removed)
}

/// Refuse a sandbox tree that could lead a replay out: device nodes, FIFOs, sockets, mount
/// points, symlinks whose target leaves the root, files with more than one hard link, and
/// anything another user than the root's owner owns (they could change it while the replay
/// runs: init and the replay only ever make things of the root's owner). Walks
/// from the root's fd without following symlinks (a directory swapped for a symlink meanwhile
/// is refused, not followed); the trash and the marker are not part of the tree.
pub fn check_tree(root: &Path) -> Result<u64> {
    let fd = at::open_dir_path(&root.to_string_lossy(), false)?;
    check_tree_at(fd.as_raw_fd(), root)
}

/// [`check_tree`] of the root open as `root` (`shown` names it).
pub fn check_tree_at(root: i32, shown: &Path) -> Result<u64> {
    let root_st = at::fstat(root).map_err(|e| ReplayError::io(shown, e))?;
    let (root_dev, root_uid) = (root_st.st_dev, root_st.st_uid);
    // Directories to look into, as paths (bytes) relative to the root.
    let mut stack: Vec<(Vec<u8>, usize)> = vec![(Vec::new(), 0)];
    let mut n = 0u64;
    while let Some((rel, depth)) = stack.pop() {
        let rel_s = String::from_utf8_lossy(&rel).into_owned();
        let dshown = if rel.is_empty() { shown.to_path_buf() } else { shown.join(&rel_s) };
        let changed = |e: std::io::Error| {
            ReplayError::Sandbox(format!(
                "{} cannot be checked ({e}): it changed while the sandbox was checked, or lies too deep; refusing to run (run 'latscope replay init PLAN' again)",
                dshown.display()
            ))
        };
        let dir = if rel.is_empty() {
            at::open_dir_at(root, c".").map_err(changed)?
        } else {
            let flags = (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64;
            let resolve = crate::sys::RESOLVE_SANDBOX | libc::RESOLVE_NO_SYMLINKS;
            let c = CString::new(rel.clone()).map_err(|e| changed(std::io::Error::other(e)))?;
            let r = crate::sys::openat2(root, &c, flags, 0, resolve);
            if r < 0 {
                return Err(changed(std::io::Error::from_raw_os_error((-r) as i32)));
            }
            // SAFETY: the fd was just opened and is ours.
            unsafe { OwnedFd::from_raw_fd(r as i32) }
        };
        let d = dir.as_raw_fd();
        for name in at::names(d).map_err(changed)? {
            if depth == 0 && name.as_bytes().starts_with(RESERVED_PREFIX.as_bytes()) {
                continue;
            }
            let p = dshown.join(name.to_string_lossy().as_ref());
            let Some(st) = at::lstat_at(d, &name).map_err(|e| ReplayError::io(&p, e))? else { continue };
            n += 1;
            let refuse = |what: &str| {
                Err(ReplayError::Sandbox(format!(
                    "{} is {what}: a replay never creates one, so the sandbox was altered; refusing to run (run 'latscope replay init PLAN' again)",
                    p.display()
                )))
            };
            let ft = st.st_mode & libc::S_IFMT;
            if ft == libc::S_IFBLK || ft == libc::S_IFCHR {
                return refuse("a device node");
            }
            if ft == libc::S_IFIFO || ft == libc::S_IFSOCK {
                return refuse("a FIFO or socket");
            }
            if st.st_dev != root_dev {
                return refuse("on another file system (a mount point)");
            }
            if st.st_uid != root_uid {
                return refuse(&format!(
                    "owned by uid {}, not by the sandbox's owner (uid {root_uid}), who could change it meanwhile",
                    st.st_uid
                ));
            }
            if ft != libc::S_IFDIR && st.st_nlink > 1 {
                // A replay opens files for writing (O_TRUNC too): through a hard link planted
                // here it would write a file outside the sandbox.
                return refuse(&format!(
                    "a file with {} hard links (the same file has another name, maybe outside the sandbox)",
                    st.st_nlink
                ));
            }
            if ft == libc::S_IFLNK {
                let t = at::readlink_at(d, &name).map_err(|e| ReplayError::io(&p, e))?;
                let t = String::from_utf8_lossy(&t);
                if !target_stays_inside(&t, depth) {
                    return refuse(&format!("a symlink leading out of the sandbox (to {t})"));
                }
            } else if ft == libc::S_IFDIR {
                let mut child = rel.clone();
                if !child.is_empty() {
                    child.push(b'/');
                }
                child.extend_from_slice(name.as_bytes());
                stack.push((child, depth + 1));
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
        let e = Sandbox::create_fresh(&spec, 1).unwrap_err().to_string();
        assert!(e.contains("not a latscope sandbox"), "{e}");
        assert!(dir.join("precious").exists());
        std::fs::remove_file(dir.join("precious")).unwrap();

        let (sb, trashed) = Sandbox::create_fresh(&spec, 7).unwrap();
        assert!(trashed.is_empty());
        let e = Sandbox::open_ready(&spec, 7).unwrap_err().to_string();
        assert!(e.contains("not completely initialised"), "{e}");
        sb.mark(7, "ready").unwrap();
        std::fs::write(dir.join("old"), b"x").unwrap();
        assert!(Sandbox::open_ready(&spec, 8).unwrap_err().to_string().contains("another plan"));
        let run = Sandbox::open_ready(&spec, 7).unwrap();
        run.mark(7, "used").unwrap();
        assert!(Sandbox::open_ready(&spec, 7).unwrap_err().to_string().contains("already used"));

        let (_sb, trashed) = Sandbox::create_fresh(&spec, 7).unwrap();
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

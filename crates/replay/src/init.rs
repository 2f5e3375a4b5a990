//! `init`: the starting tree of a plan, built in a fresh sandbox.

use crate::cpaths::CPaths;
use crate::error::{ReplayError, Result};
use crate::op::NONE;
use crate::pattern::{Pattern, PERIOD};
use crate::plan::{InitKind, Plan};
use crate::sandbox::{self, Sandbox};
use crate::sys;
use crate::xattrs::{self, XattrLimits, XattrPolicy};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Permission bits a plan may give what a replay creates or changes (init, and the run's
/// creates, chmods and mknods): never set-user-ID or set-group-ID (a root-owned setuid file
/// would be root's to anyone who runs it), and never write permission for the group or others
/// (a root-owned file that other users can write, or a directory where they can plant things,
/// would let them change what root replays, reads or later runs).
pub(crate) const SAFE_MODE: u32 = 0o1755;

/// Options of [`init`].
#[derive(Default)]
pub struct InitOptions<'a> {
    /// Use this directory instead of the plan's root (`root` plans only).
    pub root: Option<PathBuf>,
    /// Give everything to this user and group (for runs as that user).
    pub owner: Option<(u32, u32)>,
    /// Namespaces of extended attributes restored besides `user.*` (never
    /// `security.capability`).
    pub xattrs: XattrPolicy,
    /// Bounds on the extended attributes restored, checked before anything is written.
    pub xattr_limits: XattrLimits,
    /// Called as bytes are written: (done, total).
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
}

/// What [`init`] did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct InitReport {
    /// Directories created.
    pub dirs: u64,
    /// Files created.
    pub files: u64,
    /// Symlinks created.
    pub symlinks: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Extended attributes set.
    pub xattrs: u64,
    /// Extended attributes that could not be set (path, name and why): the sandbox's file
    /// system may not support them; the replay's calls on them diverge.
    pub xattr_failures: Vec<String>,
    /// Extended attributes of the starting tree left out because their namespace can grant
    /// privilege (see [`XattrPolicy`]); the replay's calls on them diverge.
    pub xattrs_refused: u64,
    /// The first few of them: `name (why)`.
    pub xattrs_refused_names: Vec<String>,
    /// Where earlier trees of this test went.
    pub trashed: Vec<PathBuf>,
    /// The sandbox roots.
    pub roots: Vec<String>,
    /// Wall time (ns).
    pub elapsed_ns: u64,
}

/// The sandbox a plan runs in, with a `--root` override.
pub fn sandbox_spec(plan: &Plan, root: Option<&Path>) -> Result<crate::plan::SandboxSpec> {
    match root {
        Some(d) => sandbox::with_root(&plan.meta.sandbox, d),
        None => Ok(plan.meta.sandbox.clone()),
    }
}

/// Build the starting tree of `plan` (identified by `plan.id`) in a fresh sandbox.
pub fn init(plan: &Plan, opts: &InitOptions) -> Result<InitReport> {
    let t0 = sys::now_ns();
    let spec = sandbox_spec(plan, opts.root.as_deref())?;
    // What the attributes would cost is known before anything is written.
    let budget = xattrs::budget(plan, &opts.xattrs, &opts.xattr_limits)?;
    let (sb, trashed) = Sandbox::create_fresh(&spec, plan.id)?;
    let paths = CPaths::new(plan);
    let mut rep = InitReport {
        trashed,
        roots: spec.roots.iter().map(|r| r.dir.clone()).collect(),
        xattrs_refused: budget.refused_init,
        xattrs_refused_names: budget.refused_names,
        ..Default::default()
    };
    let total: u64 = plan.init.iter().filter(|e| e.kind == InitKind::File).map(|e| e.size).sum();
    let chunk = (PERIOD as usize).min(total.max(1) as usize);
    let pattern = Pattern::new(chunk as u64);
    let mut parent_cache: Option<(u32, i32)> = None;
    // Messages name the paths under the roots in use (`--root` when given), not the plan's.
    let mut shown_meta = plan.meta.clone();
    shown_meta.sandbox = spec.clone();
    let fail = |what: &str, id: u32, r: i64| ReplayError::Sys {
        what: format!("init: cannot {what} {}", plan.paths.display(&shown_meta, id)),
        source: std::io::Error::from_raw_os_error((-r) as i32),
    };
    for e in &plan.init {
        let root = sb.roots[paths.root(e.path)].as_raw_fd();
        let parent = paths.parent(e.path);
        // The directory the entry goes in (kept open while entries of the same directory follow).
        let dirfd = if parent == NONE {
            root
        } else {
            match parent_cache {
                Some((p, fd)) if p == parent => fd,
                _ => {
                    if let Some((_, fd)) = parent_cache.take() {
                        // SAFETY: closing the directory fd we opened.
                        unsafe { libc::close(fd) };
                    }
                    let r = sys::openat2(
                        root,
                        paths.rel(parent),
                        (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
                        0,
                        sys::RESOLVE_SANDBOX,
                    );
                    if r < 0 {
                        return Err(fail("open the directory of", e.path, r));
                    }
                    parent_cache = Some((parent, r as i32));
                    r as i32
                }
            }
        };
        let base = paths.base(e.path);
        match e.kind {
            InitKind::Dir => {
                // SAFETY: mkdirat with a directory fd and a NUL-terminated name.
                let r = sys::ret(unsafe { libc::mkdirat(dirfd, base.as_ptr(), e.mode & SAFE_MODE) } as i64);
                if r < 0 && r != -(libc::EEXIST as i64) {
                    return Err(fail("create the directory", e.path, r));
                }
                // The recorded mode whatever the umask (see SAFE_MODE), on the directory itself.
                let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
                // SAFETY: openat of a name in our directory fd; fchmod, fchown and close on
                // the fd just opened.
                unsafe {
                    let fd = libc::openat(dirfd, base.as_ptr(), flags);
                    if fd < 0 {
                        return Err(fail("open the directory", e.path, sys::neg_errno()));
                    }
                    libc::fchmod(fd, e.mode & SAFE_MODE);
                    if let Some((u, g)) = opts.owner {
                        libc::fchown(fd, u, g);
                    }
                    libc::close(fd);
                }
                rep.dirs += 1;
            }
            InitKind::File => {
                let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW;
                let fd = sys::openat2(
                    root,
                    paths.rel(e.path),
                    flags as u64,
                    (e.mode & SAFE_MODE) as u64,
                    sys::RESOLVE_SANDBOX,
                );
                if fd < 0 {
                    return Err(fail("create the file", e.path, fd));
                }
                let fd = fd as i32;
                let mut off = 0u64;
                while off < e.size {
                    let n = ((e.size - off) as usize).min(chunk);
                    let buf = pattern.at(off, n);
                    // SAFETY: writing from a buffer of at least n bytes.
                    let w = unsafe { libc::pwrite(fd, buf.as_ptr() as *const libc::c_void, n, off as i64) };
                    if w <= 0 {
                        let r = sys::ret(w as i64);
                        // SAFETY: closing the fd we opened.
                        unsafe { libc::close(fd) };
                        return Err(fail("write", e.path, if r < 0 { r } else { -(libc::EIO as i64) }));
                    }
                    off += w as u64;
                    rep.bytes += w as u64;
                    if let Some(p) = opts.progress {
                        p(rep.bytes, total);
                    }
                }
                if let Some((u, g)) = opts.owner {
                    // SAFETY: fchown on our fd.
                    unsafe { libc::fchown(fd, u, g) };
                }
                // The recorded mode, whatever the umask (see SAFE_MODE).
                // SAFETY: fchmod on our fd.
                unsafe { libc::fchmod(fd, e.mode & SAFE_MODE) };
                // SAFETY: closing the fd we opened.
                unsafe { libc::close(fd) };
                rep.files += 1;
            }
            InitKind::Symlink => {
                let target = paths.literal(e.target);
                // SAFETY: symlinkat with NUL-terminated strings and a directory fd.
                let r = sys::ret(unsafe { libc::symlinkat(target.as_ptr(), dirfd, base.as_ptr()) } as i64);
                if r < 0 {
                    return Err(fail("create the symlink", e.path, r));
                }
                rep.symlinks += 1;
            }
        }
        if let (Some((u, g)), InitKind::Symlink) = (opts.owner, e.kind) {
            // SAFETY: fchownat on a name in our directory fd, not following symlinks.
            unsafe { libc::fchownat(dirfd, base.as_ptr(), u, g, libc::AT_SYMLINK_NOFOLLOW) };
        }
    }
    if let Some((_, fd)) = parent_cache.take() {
        // SAFETY: closing the directory fd we opened.
        unsafe { libc::close(fd) };
    }
    set_xattrs(plan, &paths, &sb, &mut rep, &shown_meta, &opts.xattrs);
    for fd in &sb.roots {
        // Written data reaches the disk now, not during the run.
        // SAFETY: syncfs on our directory fd.
        unsafe { libc::syncfs(fd.as_raw_fd()) };
    }
    sb.mark(plan.id, "ready")?;
    // Only now the user gets the roots: nothing they do can meddle with the build.
    if let Some(owner) = opts.owner {
        sb.hand_over(owner)?;
    }
    rep.elapsed_ns = sys::now_ns() - t0;
    Ok(rep)
}

/// The extended attributes the starting tree had: on each entry through `/proc/self/fd/N` of an
/// `O_PATH` fd resolved beneath the sandbox (which reaches a symlink itself, too).
fn set_xattrs(
    plan: &Plan,
    paths: &CPaths,
    sb: &Sandbox,
    rep: &mut InitReport,
    shown: &crate::plan::PlanMeta,
    policy: &XattrPolicy,
) {
    let mut generated = Vec::new();
    for x in &plan.xattrs {
        let root = sb.roots[paths.root(x.path)].as_raw_fd();
        let name = paths.literal(x.name);
        // Counted by the budget; the name the kernel sees is the one checked.
        if policy.allows(name.to_bytes()).is_err() {
            continue;
        }
        let value: &[u8] = if x.value != NONE {
            &plan.values[x.value as usize]
        } else {
            generated.resize(x.size as usize, 0);
            crate::pattern::fill(&mut generated, 0);
            &generated
        };
        let flags = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let fd = sys::openat2(root, paths.rel(x.path), flags as u64, 0, sys::RESOLVE_SANDBOX);
        let r = if fd < 0 {
            fd
        } else {
            let proc = std::ffi::CString::new(format!("/proc/self/fd/{fd}")).unwrap_or_default();
            // SAFETY: NUL-terminated strings and a value of value.len() bytes; closing our fd.
            unsafe {
                let r =
                    libc::setxattr(proc.as_ptr(), name.as_ptr(), value.as_ptr() as *const libc::c_void, value.len(), 0);
                let r = sys::ret(r as i64);
                libc::close(fd as i32);
                r
            }
        };
        if r < 0 {
            let e = std::io::Error::from_raw_os_error((-r) as i32);
            rep.xattr_failures.push(format!("{} {}: {e}", plan.paths.display(shown, x.path), name.to_string_lossy()));
        } else {
            rep.xattrs += 1;
        }
    }
}

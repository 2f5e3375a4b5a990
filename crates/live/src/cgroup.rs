//! Naming a cgroup v2 cgroup: a directory of the cgroup2 file system (absolute, or relative to
//! where it is mounted), or a systemd unit (`nginx.service`, `session-3.scope`) found by name in
//! it. The kernel knows a cgroup by its id, which is the directory's inode number.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// `statfs` magic of the cgroup2 file system.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
/// `statfs` magic of a cgroup v1 hierarchy.
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
/// Where cgroup file systems are mounted by convention.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// A cgroup v2 cgroup, resolved from what the user named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    /// As the user named it.
    pub spec: String,
    /// Its directory.
    pub path: PathBuf,
    /// Its id (the directory's inode number; `bpf_get_current_cgroup_id` in the kernel).
    pub id: u64,
}

impl Cgroup {
    /// Resolves `spec`: an absolute directory in a cgroup2 file system; a path relative to the
    /// cgroup2 mount (`system.slice/nginx.service`) or to /sys/fs/cgroup; or a unit name ending
    /// in `.service`, `.scope` or `.slice`, looked up by name in the cgroup2 tree. The error says
    /// what was looked for and what to do.
    pub fn resolve(spec: &str) -> Result<Cgroup, String> {
        let Some((v2, _)) = latscope_probe::containers::cgroup2_mount() else {
            return Err(format!(
                "--cgroup {spec}: this system has no cgroup v2 hierarchy mounted (--cgroup needs cgroup v2; \
                 only cgroup v1 is in use here): mount it (mount -t cgroup2 none {CGROUP_ROOT}/unified) or \
                 boot with systemd.unified_cgroup_hierarchy=1"
            ));
        };
        let v2 = v2.as_path();
        let given = Path::new(spec);
        let candidates: Vec<PathBuf> = if given.is_absolute() {
            vec![given.to_path_buf()]
        } else {
            let rel = spec.trim_start_matches("./");
            vec![v2.join(rel), Path::new(CGROUP_ROOT).join(rel)]
        };
        for c in &candidates {
            if c.is_dir() {
                return Self::at(spec, c, v2);
            }
        }
        let spec_shown = shown(spec);
        if !spec.contains('/') && [".service", ".scope", ".slice"].iter().any(|s| spec.ends_with(s)) {
            let found = find_named(v2, spec);
            // A unit of the system's manager sits in slices only (`system.slice/nginx.service`);
            // a cgroup of the same name in a subtree delegated to a user (below `user@1000.service`,
            // a container's) is that user's doing, and must not make the unit ambiguous.
            let managed: Vec<&PathBuf> = found.iter().filter(|p| in_slices_only(v2, p)).collect();
            let pick = if managed.len() == 1 { Some(managed[0]) } else { found.first().filter(|_| found.len() == 1) };
            return match (pick, found.len()) {
                (Some(p), _) => Self::at(spec, p, v2),
                (None, 0) => Err(format!(
                    "--cgroup {spec_shown}: no cgroup named {spec_shown} under {} (is the unit running? \
                     `systemctl status {spec_shown}` says; or give the cgroup's path)",
                    shown_path(v2)
                )),
                (None, n) => Err(format!(
                    "--cgroup {spec_shown}: {n} cgroups are named {spec_shown}: {}; give the path of the one to record",
                    found.iter().take(10).map(|p| shown_path(p)).collect::<Vec<_>>().join(", ")
                        + if n > 10 { ", ..." } else { "" }
                )),
            };
        }
        let looked: Vec<String> = candidates.iter().map(|p| shown_path(p)).collect();
        Err(format!(
            "--cgroup {spec_shown}: no such cgroup (looked for {}): give a directory of the cgroup v2 \
             hierarchy at {} (absolute or relative to it), or a unit name such as nginx.service",
            looked.join(" and "),
            shown_path(v2)
        ))
    }

    /// The cgroup at directory `dir`, which must be in a cgroup2 file system.
    fn at(spec: &str, dir: &Path, v2: &Path) -> Result<Cgroup, String> {
        let spec_shown = shown(spec);
        let spec = &*spec_shown;
        let path = dir.canonicalize().map_err(|e| format!("--cgroup {spec}: {}: {e}", shown_path(dir)))?;
        match fs_magic(&path) {
            Some(CGROUP2_SUPER_MAGIC) => {}
            Some(CGROUP_SUPER_MAGIC) => {
                return Err(format!(
                    "--cgroup {spec}: {} is in a cgroup v1 hierarchy; --cgroup needs cgroup v2, whose \
                     hierarchy here is at {}",
                    shown_path(&path),
                    shown_path(v2)
                ))
            }
            _ => {
                return Err(format!(
                    "--cgroup {spec}: {} is not a cgroup (not in a cgroup2 file system; the cgroup v2 \
                     hierarchy here is at {})",
                    shown_path(&path),
                    shown_path(v2)
                ))
            }
        }
        let id = std::fs::metadata(&path).map_err(|e| format!("--cgroup {spec}: {}: {e}", shown_path(&path)))?.ino();
        Ok(Cgroup { spec: spec.to_string(), path, id })
    }
}

/// The cgroups a live session knows, and the ones that appear while it runs: events of a cgroup
/// the start snapshot did not list (a container started since) name it before any view sees
/// them, and what is found joins the session's header and filter context. A new cgroup is named
/// from its id alone ([`latscope_probe::containers::CgroupNamer`]): the cost is that of the
/// cgroups met, not of the tree, however many cgroups there are. Where the kernel does not open
/// cgroups by id, the tree is walked again instead, at most every [`REWALK_EVERY`]. An id not
/// found (the cgroup is gone) is not looked for again. At most [`LEARN_MAX`] cgroups are learnt
/// in a session (a long one where cgroups come and go): the rest keep their ids.
pub(crate) struct CgroupWatch {
    known: std::collections::HashSet<u64>,
    /// Ids looked for and not found (the cgroup was gone): not looked for again.
    missed: std::collections::HashSet<u64>,
    namer: Option<latscope_probe::containers::CgroupNamer>,
    last_walk: Option<std::time::Instant>,
    /// Full walks of the tree so far (where cgroups cannot be opened by id).
    pub(crate) walks: u64,
    learned: usize,
}

/// Without cgroups by id: the tree is walked again at most this often.
pub(crate) const REWALK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// Cgroups learnt per poll, at most.
pub(crate) const LEARN_PER_POLL: usize = 32;
/// Cgroups a session learns after its start, at most.
pub(crate) const LEARN_MAX: usize = 4 * latscope_probe::containers::MAX_CGROUPS;

impl CgroupWatch {
    pub(crate) fn new(h: &latscope_event::TraceHeader) -> Self {
        CgroupWatch {
            known: h.cgroups.iter().map(|c| c.id).collect(),
            missed: Default::default(),
            namer: latscope_probe::containers::CgroupNamer::new(),
            last_walk: None,
            walks: 0,
            learned: 0,
        }
    }

    fn is_new(&self, id: u64) -> bool {
        id > 1 && !self.known.contains(&id) && !self.missed.contains(&id)
    }

    /// Learn the cgroups of `ids` (the `cgroup` column of events just polled) that are new;
    /// returns the entries found (empty when none was new).
    pub(crate) fn learn(
        &mut self,
        ids: &[u64],
        h: &mut latscope_event::TraceHeader,
        ctx: &mut latscope_filter::EvalContext,
    ) -> Vec<latscope_event::CgroupInfo> {
        // Consecutive events mostly share a cgroup: compare with the last one first.
        let mut last = 0;
        let mut fresh: Vec<u64> = Vec::new();
        for &c in ids {
            if c != last && self.is_new(c) && !fresh.contains(&c) {
                fresh.push(c);
            }
            last = c;
        }
        if fresh.is_empty() || self.learned >= LEARN_MAX {
            return Vec::new();
        }
        // A bounded number per poll: their entries travel in the metadata of one block, which
        // readers take up to 1 MiB; the others are met again in the next polls.
        fresh.truncate(LEARN_PER_POLL);
        let found = match self.namer.as_mut().filter(|n| n.by_handle()) {
            Some(n) => fresh.iter().filter_map(|&id| n.name(id)).collect(),
            None => {
                if self.last_walk.is_some_and(|t| t.elapsed() < REWALK_EVERY) {
                    return Vec::new();
                }
                self.last_walk = Some(std::time::Instant::now());
                self.walks += 1;
                let mut all = latscope_probe::containers::snapshot_new(&|id| self.known.contains(&id));
                // Those met first; the others at a later walk.
                all.sort_by_key(|c| !fresh.contains(&c.id));
                all.truncate(LEARN_PER_POLL);
                all
            }
        };
        let mut found: Vec<latscope_event::CgroupInfo> =
            found.into_iter().filter(|c| self.known.insert(c.id)).collect();
        // Names come from files the containers' owners write: each within its bounds, and the
        // table within its own (what is cut or left out is counted in the header).
        let room = latscope_event::bounds::MAX_CGROUPS.saturating_sub(h.cgroups.len());
        if found.len() > room {
            h.truncated.entries += (found.len() - room) as u64;
            found.truncate(room);
        }
        for c in &mut found {
            c.bound(latscope_event::bounds::MAX_PATH, &mut h.truncated);
        }
        self.learned += found.len();
        ctx.add_cgroups(&found);
        h.cgroups.extend(found.iter().cloned());
        if self.missed.len() >= LEARN_MAX {
            self.missed.clear();
        }
        for c in fresh {
            if self.is_new(c) {
                self.missed.insert(c);
            }
        }
        found
    }
}

/// Directories named `name` below `dir`, in path order: depth first without recursion and
/// without a depth limit (a delegated subtree is as deep as its owner makes it), looking at
/// most at [`latscope_probe::containers::MAX_CGROUPS`] directories.
fn find_named(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    let mut seen = 0;
    while let Some(d) = todo.pop() {
        seen += 1;
        if seen > latscope_probe::containers::MAX_CGROUPS {
            break;
        }
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        let mut subs: Vec<PathBuf> =
            rd.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()).collect();
        subs.sort();
        found.extend(subs.iter().filter(|p| p.file_name().is_some_and(|n| n == name)).cloned());
        todo.extend(subs.into_iter().rev());
    }
    found.sort();
    found
}

/// Whether every directory between the cgroup2 mount `v2` and `p` is a slice: the place of a
/// unit of the system's manager (`system.slice/nginx.service`, `machine.slice/x.scope`).
fn in_slices_only(v2: &Path, p: &Path) -> bool {
    let Ok(rel) = p.strip_prefix(v2) else { return false };
    let parts: Vec<_> = rel.components().collect();
    parts.len() > 1 && parts[..parts.len() - 1].iter().all(|c| c.as_os_str().to_string_lossy().ends_with(".slice"))
}

/// A name as messages print it: control and text-reordering characters escaped.
fn shown(s: &str) -> std::borrow::Cow<'_, str> {
    latscope_event::escape::escape_controls(s)
}

fn shown_path(p: &Path) -> String {
    shown(&p.to_string_lossy()).into_owned()
}

/// The `f_type` of the file system `path` is in.
fn fs_magic(path: &Path) -> Option<i64> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statfs buffer of the right type.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_type as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_cgroup_is_named_with_what_to_do() {
        if latscope_probe::containers::cgroup2_mount().is_none() {
            let e = Cgroup::resolve("x").unwrap_err();
            assert!(e.contains("no cgroup v2"), "{e}");
            return;
        }
        let e = Cgroup::resolve("no-such.slice/nothing-here").unwrap_err();
        assert!(e.contains("no-such.slice/nothing-here") && e.contains("no such cgroup"), "{e}");
        let e = Cgroup::resolve("latscope-no-such-unit.service").unwrap_err();
        assert!(e.contains("no cgroup named latscope-no-such-unit.service"), "{e}");
        let e = Cgroup::resolve("/proc").unwrap_err();
        assert!(e.contains("is not a cgroup"), "{e}");
    }

    #[test]
    fn the_root_cgroup_resolves_to_its_inode() {
        let Some((v2, _)) = latscope_probe::containers::cgroup2_mount() else { return };
        let c = Cgroup::resolve(v2.to_str().unwrap()).unwrap();
        assert_eq!(c.id, std::fs::metadata(&v2).unwrap().ino());
        // Relative to the mount: "." is the root itself.
        assert_eq!(Cgroup::resolve(".").unwrap().id, c.id);
    }

    /// A test tree of cgroups below the cgroup2 mount, removed deepest first on drop.
    struct Tree(Vec<PathBuf>);

    impl Tree {
        /// Make `p` and what is missing above it.
        fn mk(&mut self, p: PathBuf) -> PathBuf {
            let mut missing = Vec::new();
            let mut q = p.clone();
            while !q.exists() {
                missing.push(q.clone());
                if !q.pop() {
                    break;
                }
            }
            for d in missing.into_iter().rev() {
                std::fs::create_dir(&d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
                self.0.push(d);
            }
            p
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            for d in self.0.iter().rev() {
                let _ = std::fs::remove_dir(d);
            }
        }
    }

    /// The cgroup2 mount, if this test may make cgroups in it (root).
    fn writable_v2(test: &str) -> Option<PathBuf> {
        let Some((v2, _)) = latscope_probe::containers::cgroup2_mount() else {
            latscope_testkit::skip(test, "no cgroup2 file system is mounted");
            return None;
        };
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            latscope_testkit::skip(test, "making cgroups needs root");
            return None;
        }
        Some(v2)
    }

    /// A cgroup a user makes in a subtree delegated to it (below `user@UID.service`), named
    /// like a system unit, does not make `--cgroup UNIT` ambiguous: the unit of the system's
    /// manager (in slices only) is the one; two such units are ambiguous, said with the names
    /// escaped.
    #[test]
    fn a_same_named_cgroup_in_a_delegated_subtree_does_not_make_a_unit_ambiguous() {
        let test = "a_same_named_cgroup_in_a_delegated_subtree_does_not_make_a_unit_ambiguous";
        let Some(v2) = writable_v2(test) else { return };
        let me = std::process::id();
        let unit = format!("latscope-unit-{me}.service");
        let mut t = Tree(Vec::new());
        let real = t.mk(v2.join(format!("latscope-sys-{me}.slice")).join(&unit));
        let user = v2.join(format!("latscope-user-{me}.slice/user@65534.service/app.slice"));
        t.mk(user.join(&unit));
        let c = Cgroup::resolve(&unit).unwrap();
        assert_eq!(c.path, real.canonicalize().unwrap());
        // Two units of the manager: ambiguous, and the error prints no raw escape sequences.
        let evil = format!("latscope-\u{1b}]0;t\u{7}-{me}.service");
        t.mk(v2.join(format!("latscope-a-{me}.slice")).join(&evil));
        t.mk(v2.join(format!("latscope-b-{me}.slice")).join(&evil));
        let e = Cgroup::resolve(&evil).unwrap_err();
        assert!(e.contains("2 cgroups are named"), "{e}");
        assert!(!e.contains('\u{1b}') && !e.contains('\u{7}') && e.contains("\\x1b]0;t\\x07"), "{e:?}");
        let e = Cgroup::resolve(&format!("latscope-\u{1b}[31m-none-{me}.service")).unwrap_err();
        assert!(!e.contains('\u{1b}'), "{e:?}");
    }

    /// Cgroups made while a session runs, among thousands, are named from their ids alone:
    /// the tree is not walked again (where the kernel opens cgroups by id), whatever its size;
    /// one 40 levels deep is named with its whole path.
    #[test]
    fn new_cgroups_among_thousands_are_named_without_walking_the_tree() {
        let test = "new_cgroups_among_thousands_are_named_without_walking_the_tree";
        let Some(v2) = writable_v2(test) else { return };
        let me = std::process::id();
        let top = v2.join(format!("latscope-many-{me}"));
        let mut t = Tree(Vec::new());
        for i in 0..2000 {
            t.mk(top.join(format!("c{i}")));
        }
        let mut h =
            latscope_event::TraceHeader { cgroups: latscope_probe::containers::snapshot(), ..Default::default() };
        let mut ctx = latscope_filter::EvalContext::new(&h);
        let mut w = CgroupWatch::new(&h);
        if !w.namer.as_ref().is_some_and(|n| n.by_handle()) {
            latscope_testkit::skip(test, "the kernel does not open cgroups by id here");
            return;
        }
        let mut deep = top.join("deep");
        for i in 0..40 {
            deep = deep.join(format!("d{i}"));
        }
        let mut new: Vec<PathBuf> = (0..10).map(|i| t.mk(top.join(format!("new{i}")))).collect();
        new.push(t.mk(deep));
        let ids: Vec<u64> = new.iter().map(|p| std::fs::metadata(p).unwrap().ino()).collect();
        // Each event's cgroup, many events each.
        let events: Vec<u64> = ids.iter().flat_map(|&id| std::iter::repeat_n(id, 100)).collect();
        let found = w.learn(&events, &mut h, &mut ctx);
        assert_eq!(w.walks, 0);
        let rel = |p: &PathBuf| format!("/{}", p.strip_prefix(&v2).unwrap().display());
        let mut got: Vec<(u64, String)> = found.iter().map(|c| (c.id, c.path.clone())).collect();
        got.sort();
        let mut want: Vec<(u64, String)> = ids.iter().zip(&new).map(|(&id, p)| (id, rel(p))).collect();
        want.sort();
        if latscope_probe::containers::cgroup2_mount().is_some_and(|(_, root)| root == "/") {
            assert_eq!(got, want);
        } else {
            assert_eq!(got.len(), want.len());
        }
        // Known now: met again, nothing is looked up.
        assert!(w.learn(&events, &mut h, &mut ctx).is_empty());
    }
}

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
        if !spec.contains('/') && [".service", ".scope", ".slice"].iter().any(|s| spec.ends_with(s)) {
            let mut found = Vec::new();
            find_named(v2, spec, 0, &mut found);
            return match found.len() {
                1 => Self::at(spec, &found[0], v2),
                0 => Err(format!(
                    "--cgroup {spec}: no cgroup named {spec} under {} (is the unit running? \
                     `systemctl status {spec}` says; or give the cgroup's path)",
                    v2.display()
                )),
                _ => Err(format!(
                    "--cgroup {spec}: {} cgroups are named {spec}: {}; give the path of the one to record",
                    found.len(),
                    found.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
                )),
            };
        }
        let looked: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        Err(format!(
            "--cgroup {spec}: no such cgroup (looked for {}): give a directory of the cgroup v2 \
             hierarchy at {} (absolute or relative to it), or a unit name such as nginx.service",
            looked.join(" and "),
            v2.display()
        ))
    }

    /// The cgroup at directory `dir`, which must be in a cgroup2 file system.
    fn at(spec: &str, dir: &Path, v2: &Path) -> Result<Cgroup, String> {
        let path = dir.canonicalize().map_err(|e| format!("--cgroup {spec}: {}: {e}", dir.display()))?;
        match fs_magic(&path) {
            Some(CGROUP2_SUPER_MAGIC) => {}
            Some(CGROUP_SUPER_MAGIC) => {
                return Err(format!(
                    "--cgroup {spec}: {} is in a cgroup v1 hierarchy; --cgroup needs cgroup v2, whose \
                     hierarchy here is at {}",
                    path.display(),
                    v2.display()
                ))
            }
            _ => {
                return Err(format!(
                    "--cgroup {spec}: {} is not a cgroup (not in a cgroup2 file system; the cgroup v2 \
                     hierarchy here is at {})",
                    path.display(),
                    v2.display()
                ))
            }
        }
        let id = std::fs::metadata(&path).map_err(|e| format!("--cgroup {spec}: {}: {e}", path.display()))?.ino();
        Ok(Cgroup { spec: spec.to_string(), path, id })
    }
}

/// The cgroups a live session knows, and the ones that appear while it runs: events of a cgroup
/// the start snapshot did not list (a container started since) make it walk the cgroup tree
/// again, before any view sees them, and add what it finds to the session's header and filter
/// context. An id the walk does not find (the cgroup is gone) is not looked for again.
#[derive(Debug)]
pub(crate) struct CgroupWatch {
    known: std::collections::HashSet<u64>,
    /// Ids looked for and not found (the cgroup was gone before the walk): not looked for again.
    missed: std::collections::HashSet<u64>,
}

impl CgroupWatch {
    pub(crate) fn new(h: &latscope_event::TraceHeader) -> Self {
        CgroupWatch { known: h.cgroups.iter().map(|c| c.id).collect(), missed: Default::default() }
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
        let fresh = ids.iter().any(|&c| {
            let new = c != last && self.is_new(c);
            last = c;
            new
        });
        if !fresh {
            return Vec::new();
        }
        let mut found = latscope_probe::containers::snapshot_new(&|id| self.known.contains(&id));
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
        self.known.extend(found.iter().map(|c| c.id));
        ctx.add_cgroups(&found);
        h.cgroups.extend(found.iter().cloned());
        for &c in ids {
            if self.is_new(c) {
                self.missed.insert(c);
            }
        }
        found
    }
}

/// Directories named `name` below `dir` (cgroup trees are shallow; the depth bound is a guard).
fn find_named(dir: &Path, name: &str, depth: usize, found: &mut Vec<PathBuf>) {
    if depth > latscope_probe::CGROUP_DEPTH {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let p = e.path();
        if e.file_name() == name {
            found.push(p.clone());
        }
        find_named(&p, name, depth + 1, found);
    }
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
}

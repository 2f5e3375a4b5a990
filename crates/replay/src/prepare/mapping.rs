//! Recorded paths to sandbox paths, using the mount table recorded in the trace.

use crate::op::NONE;
use crate::plan::{PathEntry, PathTable, RootSpec, SandboxSpec};
use crate::sandbox::{named_root, RESERVED_PREFIX};
use latscope_event::{Mount, TraceHeader};
use rustc_hash::FxHashMap;

/// File-system types that are views of the kernel, not storage: never replayed.
pub const PSEUDO_FS: &[&str] = &[
    "proc",
    "sysfs",
    "devtmpfs",
    "devpts",
    "cgroup",
    "cgroup2",
    "debugfs",
    "tracefs",
    "securityfs",
    "pstore",
    "bpf",
    "configfs",
    "fusectl",
    "mqueue",
    "hugetlbfs",
    "autofs",
    "binfmt_misc",
    "efivarfs",
    "nsfs",
    "rpc_pipefs",
    "selinuxfs",
    "nfsd",
];

/// Why a recorded path is not replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmapped {
    /// The call had no path (or the recording could not name the fd).
    NoPath,
    /// A relative path the recording could not make absolute.
    Relative,
    /// A `..` component.
    DotDot,
    /// On a pseudo file system (proc, sysfs, devtmpfs, ...).
    Pseudo,
    /// A name reserved for the sandbox's bookkeeping.
    Reserved,
    /// Under no recorded mount (name mode).
    NoMount,
}

impl Unmapped {
    /// The reason as printed.
    pub fn reason(self) -> &'static str {
        match self {
            Unmapped::NoPath => "no path recorded",
            Unmapped::Relative => "relative path the recording could not resolve",
            Unmapped::DotDot => "path has '..' components (refused)",
            Unmapped::Pseudo => "pseudo file system (/proc, /sys, /dev, ...)",
            Unmapped::Reserved => "path uses a name reserved for the sandbox (refused)",
            Unmapped::NoMount => "path under no recorded mount",
        }
    }
}

/// Maps recorded absolute paths into the sandbox and interns them.
pub struct Mapper {
    name: Option<String>,
    mounts: Vec<Mount>,
    /// Root index per recorded mount point.
    root_of: FxHashMap<String, u16>,
    /// The sandbox being described.
    pub spec: SandboxSpec,
    /// Interned sandbox paths.
    pub paths: PathTable,
    index: FxHashMap<(u16, String), u32>,
    cache: FxHashMap<String, Result<u32, Unmapped>>,
}

impl Mapper {
    /// A mapper for `root` mode (`dir`, absolute) or `name` mode.
    pub fn new(header: &TraceHeader, root_dir: Option<&str>, name: Option<&str>) -> Mapper {
        let mut spec = SandboxSpec { mode: "name".into(), name: name.map(str::to_string), roots: Vec::new() };
        let mut root_of = FxHashMap::default();
        if let Some(dir) = root_dir {
            spec.mode = "root".into();
            let fstype = header.mount_of("/").map(|m| m.fstype.clone()).unwrap_or_default();
            spec.roots.push(RootSpec { dir: dir.to_string(), mount: "/".into(), fstype });
            root_of.insert("/".to_string(), 0);
        }
        Mapper {
            name: name.map(str::to_string),
            mounts: header.mounts.clone(),
            root_of,
            spec,
            paths: PathTable::default(),
            index: FxHashMap::default(),
            cache: FxHashMap::default(),
        }
    }

    /// The mount a path is on (longest mount-point prefix).
    fn mount_of(&self, path: &str) -> Option<&Mount> {
        self.mounts
            .iter()
            .filter(|m| {
                let mp = m.mount_point.trim_end_matches('/');
                mp.is_empty() || path == mp || path.starts_with(mp) && path.as_bytes().get(mp.len()) == Some(&b'/')
            })
            .max_by_key(|m| m.mount_point.len())
    }

    /// The sandbox path id of recorded absolute path `p`.
    pub fn map(&mut self, p: &str) -> Result<u32, Unmapped> {
        if let Some(r) = self.cache.get(p) {
            return *r;
        }
        let r = self.map_uncached(p);
        self.cache.insert(p.to_string(), r);
        r
    }

    fn map_uncached(&mut self, p: &str) -> Result<u32, Unmapped> {
        if p.is_empty() {
            return Err(Unmapped::NoPath);
        }
        if !p.starts_with('/') {
            return Err(Unmapped::Relative);
        }
        let comps: Vec<&str> = p.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
        if comps.contains(&"..") {
            return Err(Unmapped::DotDot);
        }
        let norm = format!("/{}", comps.join("/"));
        let (mount_point, fstype) = match self.mount_of(&norm) {
            Some(m) => (m.mount_point.trim_end_matches('/').to_string(), m.fstype.clone()),
            None if self.mounts.is_empty() => {
                // No mount table (a trace from another tool): the usual pseudo file systems by place.
                if ["/proc", "/sys", "/dev"].iter().any(|d| norm == *d || norm.starts_with(&format!("{d}/"))) {
                    return Err(Unmapped::Pseudo);
                }
                (String::new(), String::new())
            }
            None => return Err(Unmapped::NoMount),
        };
        if PSEUDO_FS.contains(&fstype.as_str()) {
            return Err(Unmapped::Pseudo);
        }
        let (root, rel_comps): (u16, &[&str]) = match &self.name {
            None => (0, &comps[..]),
            Some(name) => {
                let mp = if mount_point.is_empty() { "/".to_string() } else { mount_point.clone() };
                let depth = mp.split('/').filter(|c| !c.is_empty()).count();
                let root = match self.root_of.get(&mp) {
                    Some(&r) => r,
                    None => {
                        let r = self.spec.roots.len() as u16;
                        self.spec.roots.push(RootSpec { dir: named_root(&mp, name), mount: mp.clone(), fstype });
                        self.root_of.insert(mp, r);
                        r
                    }
                };
                (root, &comps[depth..])
            }
        };
        if rel_comps.first().is_some_and(|c| c.starts_with(RESERVED_PREFIX)) {
            return Err(Unmapped::Reserved);
        }
        Ok(self.intern(root, rel_comps))
    }

    /// The path id of `rel_comps` under root `root` (parents interned first).
    pub fn intern(&mut self, root: u16, rel_comps: &[&str]) -> u32 {
        let rel = if rel_comps.is_empty() { ".".to_string() } else { rel_comps.join("/") };
        if let Some(&id) = self.index.get(&(root, rel.clone())) {
            return id;
        }
        let parent = if rel_comps.len() <= 1 {
            NONE
        } else {
            // The root itself (".") is a path of its own, but not anyone's parent entry.
            self.intern(root, &rel_comps[..rel_comps.len() - 1])
        };
        let id = self.paths.entries.len() as u32;
        self.paths.entries.push(PathEntry { root, parent, rel: rel.clone() });
        self.index.insert((root, rel), id);
        id
    }

    /// The root path (".") of `root`.
    pub fn root_path(&mut self, root: u16) -> u32 {
        self.intern(root, &[])
    }

    /// The id of `base` inside directory `dir` (a path id).
    pub fn child(&mut self, dir: u32, base: &str) -> u32 {
        let e = &self.paths.entries[dir as usize];
        let root = e.root;
        let rel = if e.rel == "." { base.to_string() } else { format!("{}/{base}", e.rel) };
        let comps: Vec<String> = rel.split('/').map(str::to_string).collect();
        let refs: Vec<&str> = comps.iter().map(String::as_str).collect();
        self.intern(root, &refs)
    }

    /// The parent directory of path `id` (the root path for top-level entries); `None` for a root.
    pub fn parent(&mut self, id: u32) -> Option<u32> {
        let e = &self.paths.entries[id as usize];
        if e.rel == "." {
            return None;
        }
        Some(if e.parent == NONE { self.root_path(e.root) } else { e.parent })
    }

    /// Rewrite a symlink target recorded as an absolute path (or resolved against the working
    /// directory) as a path relative to the link's directory, if both are in the same root.
    pub fn relative_target(&mut self, link: u32, target_abs: &str) -> Option<String> {
        let t = self.map(target_abs).ok()?;
        let (le, te) = (&self.paths.entries[link as usize], &self.paths.entries[t as usize]);
        if le.root != te.root {
            return None;
        }
        let dir: Vec<&str> = le.rel.split('/').collect();
        let dir = &dir[..dir.len().saturating_sub(1)];
        let tgt: Vec<&str> = if te.rel == "." { Vec::new() } else { te.rel.split('/').collect() };
        let common = dir.iter().zip(&tgt).take_while(|(a, b)| a == b).count();
        let mut parts: Vec<&str> = vec![".."; dir.len() - common];
        parts.extend_from_slice(&tgt[common..]);
        Some(if parts.is_empty() { ".".to_string() } else { parts.join("/") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> TraceHeader {
        let m = |mp: &str, fs: &str| Mount { mount_point: mp.into(), fstype: fs.into(), ..Default::default() };
        TraceHeader {
            mounts: vec![
                m("/", "ext4"),
                m("/proc", "proc"),
                m("/data", "xfs"),
                m("/dev", "devtmpfs"),
                m("/tmp", "tmpfs"),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn root_mode_maps_everything_under_one_root() {
        let mut m = Mapper::new(&header(), Some("/sb"), None);
        let id = m.map("/data/x/./y").unwrap();
        assert_eq!(m.paths.entries[id as usize].rel, "data/x/y");
        let parent = m.paths.entries[id as usize].parent;
        assert_eq!(m.paths.entries[parent as usize].rel, "data/x");
        assert_eq!(m.map("/proc/self/stat"), Err(Unmapped::Pseudo));
        assert_eq!(m.map("/dev/null"), Err(Unmapped::Pseudo));
        assert_eq!(m.map("/a/../etc/passwd"), Err(Unmapped::DotDot));
        assert_eq!(m.map("rel/x"), Err(Unmapped::Relative));
        assert_eq!(m.map("/.latscope-trash/x"), Err(Unmapped::Reserved));
        assert!(m.map("/tmp/f").is_ok(), "tmpfs is storage");
        let root = m.map("/").unwrap();
        assert_eq!(m.paths.entries[root as usize].rel, ".");
        assert_eq!(m.spec.roots.len(), 1);
    }

    #[test]
    fn name_mode_makes_one_root_per_recorded_mount() {
        let mut m = Mapper::new(&header(), None, Some("t1"));
        let a = m.map("/data/x").unwrap();
        let b = m.map("/home/u/f").unwrap();
        let (ea, eb) = (&m.paths.entries[a as usize], &m.paths.entries[b as usize]);
        assert_eq!((ea.rel.as_str(), eb.rel.as_str()), ("x", "home/u/f"));
        assert_ne!(ea.root, eb.root);
        let dirs: Vec<_> = m.spec.roots.iter().map(|r| r.dir.as_str()).collect();
        assert_eq!(dirs, ["/data/.latscope/t1", "/.latscope/t1"]);
        assert!(crate::sandbox::validate_spec(&m.spec).is_ok());
    }

    #[test]
    fn symlink_targets_become_relative() {
        let mut m = Mapper::new(&header(), Some("/sb"), None);
        let l = m.map("/a/b/link").unwrap();
        assert_eq!(m.relative_target(l, "/a/c/t").as_deref(), Some("../c/t"));
        assert_eq!(m.relative_target(l, "/a/b/t").as_deref(), Some("t"));
        assert_eq!(m.relative_target(l, "/").as_deref(), Some("../.."));
        assert_eq!(m.relative_target(l, "/proc/1"), None);
    }
}

//! The cgroup v2 tree at the start of a recording, and the containers and pods in it: each
//! cgroup's id and path from the cgroup2 file system, the container and pod its path names
//! ([`latscope_event::container`]), and the names and images the runtimes' state on disk gives
//! (docker's `config.v2.json`, the `containers.json` of podman's and CRI-O's storage, the OCI
//! bundle annotations containerd and CRI-O write, kubelet's pod log directories).
//!
//! The runtimes' files are read below `$LATSCOPE_HOST_ROOT` when it is set (`/host` when
//! latscope runs in a container with the host's root mounted there), else below `/`, through
//! [`latscope_trace::safe_read`]: anyone who can create a container (or write where a runtime
//! keeps its state) chooses them, so only regular files are read (a FIFO or a device is
//! refused without blocking), inside that root (links resolve as the host's), a bounded number
//! of bytes each.
//!
//! The tree is walked at the start, without a depth limit (a delegated subtree is as deep as
//! its owner makes it) and at most [`MAX_CGROUPS`] cgroups; a cgroup met later is named by
//! its id alone ([`CgroupNamer`]: the id is the file handle of its directory), never by walking
//! the tree again.

use crate::snapshot::{read_text, unescape, TABLE};
use latscope_event::CgroupInfo;
use latscope_trace::safe_read;
use serde_json::Value;
use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Environment variable naming the directory the runtimes' state is read below.
pub const HOST_ROOT_ENV: &str = "LATSCOPE_HOST_ROOT";

/// At most this many cgroups go into a header (a guard: real trees hold hundreds).
pub const MAX_CGROUPS: usize = 65_536;

/// Bytes read of a runtime's state file about one container (docker's `config.v2.json`, an
/// OCI bundle's `config.json`): real ones are a few KiB.
const STATE_FILE: usize = 4 << 20;
/// Bytes read of a runtime's list of containers (`containers.json`).
const STATE_LIST: usize = 32 << 20;
/// Entries read of a runtime's directory (containerd's namespaces, kubelet's pod logs).
const STATE_DIR: usize = 100_000;
/// A runtime's lists are read again at most this often (for a container they did not name).
const STATE_REREAD: Duration = Duration::from_secs(10);

/// Where cgroup file systems are mounted by convention.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The cgroup2 mount to use and the path of its root within the hierarchy (`/` unless the
/// mount shows a subtree), from /proc/self/mountinfo: /sys/fs/cgroup when the unified
/// hierarchy is there, else its hybrid place below it (/sys/fs/cgroup/unified), else any.
pub fn cgroup2_mount() -> Option<(PathBuf, String)> {
    preferred_mount(cgroup2_mounts(&read_text("/proc/self/mountinfo", TABLE)?))
}

/// The cgroup2 mounts of a mountinfo text: (mount point, root within the hierarchy).
fn cgroup2_mounts(info: &str) -> Vec<(PathBuf, String)> {
    info.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            if right.split(' ').next()? != "cgroup2" {
                return None;
            }
            let f: Vec<&str> = left.split(' ').collect();
            Some((PathBuf::from(unescape(f.get(4)?)), unescape(f.get(3)?)))
        })
        .collect()
}

fn preferred_mount(mounts: Vec<(PathBuf, String)>) -> Option<(PathBuf, String)> {
    let root = Path::new(CGROUP_ROOT);
    let rank = |p: &Path| {
        if p == root {
            0
        } else if p.starts_with(root) {
            1
        } else {
            2
        }
    };
    // The first of the best rank (min_by_key keeps the first of equals).
    mounts.into_iter().min_by_key(|(p, _)| rank(p))
}

/// Every cgroup of the cgroup2 hierarchy, with its container and pod (empty when no cgroup2
/// file system is mounted).
pub fn snapshot() -> Vec<CgroupInfo> {
    snapshot_new(&|_| false)
}

/// Like [`snapshot`], for the cgroups not `known` (by id) only: the runtimes' state is read for
/// those alone. (A live session names the cgroups it meets later with a [`CgroupNamer`], which
/// does not walk the tree.)
pub fn snapshot_new(known: &dyn Fn(u64) -> bool) -> Vec<CgroupInfo> {
    let Some((mount, root)) = cgroup2_mount() else { return Vec::new() };
    let mut out = Vec::new();
    walk(&mount, &root, &mut out);
    out.retain(|c| !known(c.id));
    let mut state = RuntimeState::new(&host_root());
    for c in &mut out {
        state.fill(c);
    }
    out
}

fn host_root() -> PathBuf {
    std::env::var_os(HOST_ROOT_ENV).map_or_else(|| PathBuf::from("/"), PathBuf::from)
}

/// The cgroups below `dir` (`path` in the hierarchy), itself first, depth first in name order,
/// at most [`MAX_CGROUPS`] in `out`. No recursion and no depth limit: a delegated subtree is as
/// deep as its owner makes it. (A directory whose path is longer than the kernel takes,
/// `PATH_MAX`, is left out with what is below it; [`CgroupNamer`] names such cgroups when
/// they are met.)
fn walk(dir: &Path, path: &str, out: &mut Vec<CgroupInfo>) {
    let mut todo = vec![(dir.to_path_buf(), path.to_string())];
    while let Some((dir, path)) = todo.pop() {
        if out.len() >= MAX_CGROUPS {
            return;
        }
        let Ok(md) = fs::symlink_metadata(&dir) else { continue };
        if !md.is_dir() {
            continue;
        }
        out.push(CgroupInfo::from_path(md.ino(), &path));
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        let mut subs: Vec<(PathBuf, String)> = rd
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let p = if path.ends_with('/') { format!("{path}{name}") } else { format!("{path}/{name}") };
                (e.path(), p)
            })
            .collect();
        // Popped in name order.
        subs.sort_by(|a, b| b.cmp(a));
        todo.extend(subs);
    }
}

/// Names the cgroups a live session meets after its start, one id at a time: the cgroup2 file
/// system's file handle of a directory is its cgroup id (`name_to_handle_at` gives
/// `FILEID_KERNFS`, 8 bytes of id), so `open_by_handle_at` opens the cgroup's directory from
/// its id, at any depth, and its path is the link `/proc/self/fd/N` (or, past `PATH_MAX`, the
/// names found walking up its parents). The cost is that of the cgroups met, not of the tree;
/// the runtimes' state for a new container is read once (their lists at most every
/// `STATE_REREAD`). Needs `CAP_DAC_READ_SEARCH` (root has it); where the kernel refuses,
/// [`CgroupNamer::by_handle`] says so.
pub struct CgroupNamer {
    mount: PathBuf,
    root: String,
    dir: fs::File,
    state: RuntimeState,
    by_handle: bool,
}

/// `FILEID_KERNFS`: the file handle type of kernfs (cgroup2) directories.
const FILEID_KERNFS: i32 = 0xfe;

impl CgroupNamer {
    /// The namer of the cgroup2 hierarchy mounted here; `None` without one.
    pub fn new() -> Option<CgroupNamer> {
        let (mount, root) = cgroup2_mount()?;
        let dir = fs::File::open(&mount).ok()?;
        let mut n = CgroupNamer { mount, root, dir, state: RuntimeState::new(&host_root()), by_handle: true };
        // The mount's own root tells whether the kernel opens cgroups by handle here.
        n.by_handle = fs::metadata(&n.mount).is_ok_and(|m| n.open(m.ino()).is_some());
        Some(n)
    }

    /// Whether the kernel opens cgroups by their id here (else [`CgroupNamer::name`] finds
    /// nothing, and a caller walks the tree instead).
    pub fn by_handle(&self) -> bool {
        self.by_handle
    }

    /// The cgroup with id `id`, with its container and pod; `None` when it is gone (or the
    /// kernel does not open cgroups by handle).
    pub fn name(&mut self, id: u64) -> Option<CgroupInfo> {
        let f = self.open(id)?;
        let rel = self.path_below_mount(&f)?;
        let mut c = CgroupInfo::from_path(id, &join_hierarchy(&self.root, &rel));
        self.state.fill(&mut c);
        Some(c)
    }

    fn open(&self, id: u64) -> Option<fs::File> {
        use std::os::fd::{AsRawFd, FromRawFd};
        #[repr(C)]
        struct Handle {
            bytes: u32,
            kind: i32,
            id: u64,
        }
        let mut h = Handle { bytes: 8, kind: FILEID_KERNFS, id };
        // SAFETY: a file_handle with 8 bytes of handle, on the mount's open directory; the fd
        // is owned by the File.
        let fd = unsafe {
            libc::open_by_handle_at(
                self.dir.as_raw_fd(),
                &mut h as *mut Handle as *mut libc::file_handle,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        (fd >= 0).then(|| unsafe { fs::File::from_raw_fd(fd) })
    }

    /// The path of the open cgroup directory `f` below the mount (`a/b`; empty for its root).
    fn path_below_mount(&self, f: &fs::File) -> Option<String> {
        use std::os::fd::AsRawFd;
        match fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())) {
            Ok(p) => {
                // A cgroup removed meanwhile.
                if p.to_string_lossy().ends_with(" (deleted)") {
                    return None;
                }
                Some(p.strip_prefix(&self.mount).ok()?.to_string_lossy().into_owned())
            }
            // Longer than the kernel's PATH_MAX: the names, walking up.
            Err(_) => self.walk_up(f),
        }
    }

    /// The names from the mount's root down to `f`, found from `f` up: each directory's name is
    /// the entry of its parent with its inode.
    fn walk_up(&self, f: &fs::File) -> Option<String> {
        use std::os::fd::{AsRawFd, FromRawFd};
        use std::os::unix::fs::DirEntryExt;
        let top = fs::metadata(&self.mount).ok()?.ino();
        let mut names: Vec<String> = Vec::new();
        let mut cur = f.try_clone().ok()?;
        for _ in 0..100_000 {
            let ino = cur.metadata().ok()?.ino();
            if ino == top {
                names.reverse();
                return Some(names.join("/"));
            }
            // SAFETY: openat of ".." on our directory; the fd is owned by the File.
            let fd = unsafe {
                libc::openat(cur.as_raw_fd(), c"..".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC)
            };
            if fd < 0 {
                return None;
            }
            let parent = unsafe { fs::File::from_raw_fd(fd) };
            let entries = fs::read_dir(format!("/proc/self/fd/{}", parent.as_raw_fd())).ok()?;
            let name =
                entries.flatten().find(|e| e.ino() == ino && e.file_type().is_ok_and(|t| t.is_dir()))?.file_name();
            names.push(name.to_string_lossy().into_owned());
            cur = parent;
        }
        None
    }
}

/// `root` (the hierarchy's path the mount shows) joined with `rel` (a path below the mount).
fn join_hierarchy(root: &str, rel: &str) -> String {
    match (root.trim_end_matches('/'), rel) {
        ("", "") => "/".to_string(),
        ("", rel) => format!("/{rel}"),
        (r, "") => r.to_string(),
        (r, rel) => format!("{r}/{rel}"),
    }
}

/// The runtimes' state files below a host root. The lists of all containers (containers/storage,
/// kubelet's pod directories) are read once, and again for a container they do not name, at
/// most every `STATE_REREAD`.
struct RuntimeState {
    root: PathBuf,
    /// Containers of the containers/storage library (podman, CRI-O): id to (name, image).
    storage: Option<StateList>,
    /// Kubelet's pod log directories: pod uid to (namespace, name).
    pods: Option<StateList>,
}

/// A list of a runtime's state (a key to two names), and when it was read.
type StateList = (Instant, HashMap<String, (String, String)>);

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn set(slot: &mut String, v: &str) {
    if slot.is_empty() && !v.is_empty() {
        *slot = v.to_string();
    }
}

/// A cached list, read again when `key` is not in it and it is older than `STATE_REREAD`.
fn lookup(
    cache: &mut Option<StateList>,
    key: &str,
    read: impl FnOnce() -> HashMap<String, (String, String)>,
) -> Option<(String, String)> {
    let stale = cache.as_ref().is_none_or(|(at, m)| !m.contains_key(key) && at.elapsed() >= STATE_REREAD);
    if stale {
        *cache = Some((Instant::now(), read()));
    }
    cache.as_ref().and_then(|(_, m)| m.get(key).cloned())
}

impl RuntimeState {
    fn new(root: &Path) -> Self {
        RuntimeState { root: root.to_path_buf(), storage: None, pods: None }
    }

    /// The JSON file `rel` below the root: a regular file inside it, whole, at most `max` bytes.
    fn read_json(&self, rel: &str, max: usize) -> Option<Value> {
        let b = safe_read::read_file_beneath(&self.root, rel, max).ok()?;
        if b.truncated {
            return None;
        }
        serde_json::from_slice(&b.data).ok()
    }

    /// Names, image and pod of `c`'s container from whichever runtime's state has it.
    fn fill(&mut self, c: &mut CgroupInfo) {
        if !c.container_id.is_empty() {
            let id = c.container_id.clone();
            self.docker(&id, c);
            self.oci_bundles(&id, c);
            if c.container_name.is_empty() || c.image.is_empty() {
                let root = self.root.clone();
                if let Some((name, image)) = lookup(&mut self.storage, &id, || read_storage(&root)) {
                    set(&mut c.container_name, &name);
                    set(&mut c.image, &image);
                }
            }
        }
        if !c.pod_uid.is_empty() && c.pod_name.is_empty() {
            let root = self.root.clone();
            if let Some((ns, name)) = lookup(&mut self.pods, &c.pod_uid, || read_pods(&root)) {
                set(&mut c.pod_namespace, &ns);
                set(&mut c.pod_name, &name);
            }
        }
    }

    /// docker: /var/lib/docker/containers/ID/config.v2.json (`Name` is `/web`).
    fn docker(&self, id: &str, c: &mut CgroupInfo) {
        let Some(v) = self.read_json(&format!("var/lib/docker/containers/{id}/config.v2.json"), STATE_FILE) else {
            return;
        };
        set(&mut c.container_name, str_at(&v, "/Name").trim_start_matches('/'));
        set(&mut c.image, str_at(&v, "/Config/Image"));
        set(&mut c.pod_name, str_at(&v, "/Config/Labels/io.kubernetes.pod.name"));
        set(&mut c.pod_namespace, str_at(&v, "/Config/Labels/io.kubernetes.pod.namespace"));
    }

    /// The annotations of the OCI bundle's config.json: containerd's CRI plugin
    /// (`io.kubernetes.cri.*`), CRI-O (`io.kubernetes.container.name`, `io.kubernetes.pod.*`),
    /// nerdctl (`nerdctl/name`).
    fn oci_bundles(&self, id: &str, c: &mut CgroupInfo) {
        let mut bundles = vec![
            format!("run/containers/storage/overlay-containers/{id}/userdata/config.json"),
            format!("var/lib/containers/storage/overlay-containers/{id}/userdata/config.json"),
        ];
        // containerd: one directory per namespace (k8s.io, moby, default).
        const TASKS: &str = "run/containerd/io.containerd.runtime.v2.task";
        if let Ok(namespaces) = safe_read::list_dir_beneath(&self.root, TASKS, STATE_DIR) {
            bundles.extend(namespaces.iter().map(|ns| format!("{TASKS}/{}/{id}/config.json", ns.to_string_lossy())));
        }
        for b in bundles {
            let Some(v) = self.read_json(&b, STATE_FILE) else { continue };
            let Some(a) = v.get("annotations") else { continue };
            let get = |k: &str| a.get(k).and_then(Value::as_str).unwrap_or("");
            set(&mut c.container_name, get("io.kubernetes.cri.container-name"));
            set(&mut c.container_name, get("io.kubernetes.container.name"));
            set(&mut c.container_name, get("nerdctl/name"));
            set(&mut c.image, get("io.kubernetes.cri.image-name"));
            set(&mut c.image, get("io.kubernetes.cri-o.ImageName"));
            set(&mut c.pod_name, get("io.kubernetes.cri.sandbox-name"));
            set(&mut c.pod_name, get("io.kubernetes.pod.name"));
            set(&mut c.pod_namespace, get("io.kubernetes.cri.sandbox-namespace"));
            set(&mut c.pod_namespace, get("io.kubernetes.pod.namespace"));
            set(&mut c.pod_uid, get("io.kubernetes.cri.sandbox-uid"));
            set(&mut c.pod_uid, get("io.kubernetes.pod.uid"));
        }
    }
}

/// containers/storage's list (podman, CRI-O): `[{"id", "names": [..], "metadata": "{\"image-name\": ..}"}]`,
/// for root (/var/lib) and CRI-O's run directory.
fn read_storage(root: &Path) -> HashMap<String, (String, String)> {
    let st = RuntimeState::new(root);
    let mut m = HashMap::new();
    for rel in [
        "var/lib/containers/storage/overlay-containers/containers.json",
        "run/containers/storage/overlay-containers/containers.json",
    ] {
        let Some(Value::Array(list)) = st.read_json(rel, STATE_LIST) else { continue };
        for e in list {
            let id = str_at(&e, "/id").to_string();
            let name = str_at(&e, "/names/0").to_string();
            let meta: Value = serde_json::from_str(str_at(&e, "/metadata")).unwrap_or(Value::Null);
            let image = str_at(&meta, "/image-name").to_string();
            m.entry(id).or_insert((name, image));
        }
    }
    m
}

/// Kubelet's pod log directories, `/var/log/pods/NAMESPACE_NAME_UID`.
fn read_pods(root: &Path) -> HashMap<String, (String, String)> {
    let mut m = HashMap::new();
    for n in safe_read::list_dir_beneath(root, "var/log/pods", STATE_DIR).unwrap_or_default() {
        let n = n.to_string_lossy();
        let mut parts = n.splitn(3, '_');
        if let (Some(ns), Some(name), Some(uid)) = (parts.next(), parts.next(), parts.next()) {
            m.insert(uid.to_string(), (ns.to_string(), name.to_string()));
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f4e8a2b9c1d0e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f";

    #[test]
    fn the_unified_mount_is_preferred() {
        let line = |point: &str, fs: &str| format!("30 1 0:26 / {point} rw,nosuid - {fs} {fs} rw\n");
        let pick = |lines: &[String]| preferred_mount(cgroup2_mounts(&lines.concat())).map(|(p, _)| p);
        let other = line("/other", "cgroup2");
        let unified = line("/sys/fs/cgroup", "cgroup2");
        let hybrid = line("/sys/fs/cgroup/unified", "cgroup2");
        assert_eq!(pick(&[other.clone(), unified]), Some(PathBuf::from("/sys/fs/cgroup")));
        assert_eq!(pick(&[other.clone(), hybrid]), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert_eq!(pick(&[other.clone(), line("/sys/fs/cgroup/cpu", "cgroup")]), Some(PathBuf::from("/other")));
        assert_eq!(pick(&[]), None);
        // Escaped mount points, and the root of a mount that shows a subtree.
        let sub = "31 1 0:26 /kubepods/pod\\0401 /mnt/a\\040b rw - cgroup2 cgroup2 rw\n";
        assert_eq!(cgroup2_mounts(sub), vec![(PathBuf::from("/mnt/a b"), "/kubepods/pod 1".to_string())]);
    }

    /// Each runtime's files as it writes them give the name, image and pod.
    #[test]
    fn runtime_state_files() {
        let t = tempfile::tempdir().unwrap();
        let w = |rel: &str, text: &str| {
            let p = t.path().join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        w(
            &format!("var/lib/docker/containers/{ID}/config.v2.json"),
            r#"{"ID":"x","Name":"/web","Config":{"Image":"nginx:1.27","Labels":{}}}"#,
        );
        let mut st = RuntimeState::new(t.path());
        let mut c = CgroupInfo::from_path(5, &format!("/system.slice/docker-{ID}.scope"));
        st.fill(&mut c);
        assert_eq!((c.container_name.as_str(), c.image.as_str()), ("web", "nginx:1.27"));

        let id2 = ID.replace('3', "4");
        w(
            "var/lib/containers/storage/overlay-containers/containers.json",
            &format!(
                r#"[{{"id":"{id2}","names":["db"],"image":"abc","metadata":"{{\"image-name\":\"docker.io/library/postgres:16\",\"name\":\"db\"}}"}}]"#
            ),
        );
        let mut c = CgroupInfo::from_path(6, &format!("/machine.slice/libpod-{id2}.scope/container"));
        st.fill(&mut c);
        assert_eq!((c.container_name.as_str(), c.image.as_str()), ("db", "docker.io/library/postgres:16"));

        let id3 = ID.replace('3', "5");
        let uid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
        w(
            &format!("run/containerd/io.containerd.runtime.v2.task/k8s.io/{id3}/config.json"),
            &format!(
                r#"{{"ociVersion":"1.0.2","annotations":{{"io.kubernetes.cri.container-type":"container","io.kubernetes.cri.container-name":"api","io.kubernetes.cri.image-name":"registry.local/api:v2","io.kubernetes.cri.sandbox-name":"api-7d9f","io.kubernetes.cri.sandbox-namespace":"shop","io.kubernetes.cri.sandbox-uid":"{uid}"}}}}"#
            ),
        );
        let path = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{id3}.scope",
            uid.replace('-', "_")
        );
        let mut c = CgroupInfo::from_path(7, &path);
        st.fill(&mut c);
        assert_eq!(
            (c.container_name.as_str(), c.image.as_str(), c.pod_name.as_str(), c.pod_namespace.as_str()),
            ("api", "registry.local/api:v2", "api-7d9f", "shop")
        );
        assert_eq!(c.pod_uid, uid);

        // The pod's own cgroup: named from kubelet's log directory.
        let uid2 = "1f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
        fs::create_dir_all(t.path().join(format!("var/log/pods/kube-system_coredns-55_{uid2}/coredns"))).unwrap();
        let mut c = CgroupInfo::from_path(8, &format!("/kubepods/burstable/pod{uid2}"));
        st.fill(&mut c);
        assert_eq!((c.pod_namespace.as_str(), c.pod_name.as_str()), ("kube-system", "coredns-55"));
    }

    /// A FIFO planted as a container's `config.v2.json` is refused at once (nothing waits for
    /// a writer), a link to /dev/zero is not followed out of the host root, a state file larger
    /// than its bound is not read; a link the host's own tree makes resolves inside it.
    #[test]
    fn planted_fifos_devices_and_huge_files_as_runtime_state_are_refused_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        let dir = |rel: &str| {
            let p = t.path().join(rel);
            fs::create_dir_all(&p).unwrap();
            p
        };
        let ids: Vec<String> = (0..4).map(|i| ID.replace('3', &i.to_string())).collect();
        let fifo = dir(&format!("var/lib/docker/containers/{}", ids[0])).join("config.v2.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
        let zero = dir(&format!("var/lib/docker/containers/{}", ids[1])).join("config.v2.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let huge = dir(&format!("var/lib/docker/containers/{}", ids[2])).join("config.v2.json");
        let mut text = br#"{"Name":"/huge","Config":{"Image":""#.to_vec();
        text.resize(STATE_FILE + 10, b'x');
        text.extend_from_slice(br#""}}"#);
        fs::write(&huge, text).unwrap();
        // The host's /var/lib/docker is a link to its /data/docker: followed inside the root.
        let data = dir(&format!("data/docker/containers/{}", ids[3]));
        fs::write(data.join("config.v2.json"), br#"{"Name":"/web","Config":{"Image":"nginx"}}"#).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let root = t.path().to_path_buf();
        let ids2 = ids.clone();
        std::thread::spawn(move || {
            let mut st = RuntimeState::new(&root);
            let named: Vec<String> = ids2
                .iter()
                .map(|id| {
                    let mut c = CgroupInfo::from_path(5, &format!("/system.slice/docker-{id}.scope"));
                    st.fill(&mut c);
                    c.container_name
                })
                .collect();
            let _ = tx.send(named);
        });
        // Without the refusals the thread waits for the FIFO's writer for ever.
        let named = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("runtime state read without blocking");
        assert_eq!(named[..3], ["", "", ""]);
        // (The link is made after the thread ran: a second state reads it.)
        std::os::unix::fs::symlink("/data/docker", t.path().join("var/lib/docker.tmp")).unwrap();
        fs::rename(t.path().join("var/lib/docker"), t.path().join("var/lib/docker.old")).unwrap();
        fs::rename(t.path().join("var/lib/docker.tmp"), t.path().join("var/lib/docker")).unwrap();
        let mut c = CgroupInfo::from_path(5, &format!("/system.slice/docker-{}.scope", ids[3]));
        RuntimeState::new(t.path()).fill(&mut c);
        assert_eq!((c.container_name.as_str(), c.image.as_str()), ("web", "nginx"));
        assert_eq!(named[3], "");
    }

    /// A cgroup 40 levels deep is in the snapshot with its path, and a cgroup made after it,
    /// deeper still, is named from its id alone.
    #[test]
    fn cgroups_of_any_depth_are_named() {
        let Some((mount, root)) = cgroup2_mount() else {
            latscope_testkit::skip("cgroups_of_any_depth_are_named", "no cgroup2 file system is mounted");
            return;
        };
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            latscope_testkit::skip("cgroups_of_any_depth_are_named", "making cgroups needs root");
            return;
        }
        let top = mount.join(format!("latscope-deep-{}", std::process::id()));
        let mut d = top.clone();
        let mut made = vec![];
        for i in 0..40 {
            if i > 0 {
                d = d.join(format!("l{i}"));
            }
            fs::create_dir(&d).unwrap();
            made.push(d.clone());
        }
        let id = fs::metadata(&d).unwrap().ino();
        let rel = d.strip_prefix(&mount).unwrap().to_str().unwrap().to_string();
        let want = join_hierarchy(&root, &rel);
        let snap = snapshot();
        let found = snap.iter().find(|c| c.id == id).map(|c| c.path.clone());
        let mut namer = CgroupNamer::new().unwrap();
        let deeper = d.join("l40").join("l41");
        fs::create_dir_all(&deeper).unwrap();
        made.push(d.join("l40"));
        made.push(deeper.clone());
        let named = namer.by_handle().then(|| namer.name(fs::metadata(&deeper).unwrap().ino()).map(|c| c.path));
        for m in made.iter().rev() {
            let _ = fs::remove_dir(m);
        }
        assert_eq!(found.as_deref(), Some(want.as_str()));
        if let Some(named) = named {
            assert_eq!(named, Some(format!("{want}/l40/l41")));
        }
        assert!(namer.name(u64::MAX - 7).is_none());
    }
}

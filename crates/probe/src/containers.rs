//! The cgroup v2 tree at the start of a recording, and the containers and pods in it: each
//! cgroup's id and path from the cgroup2 file system, the container and pod its path names
//! ([`latscope_event::container`]), and the names and images the runtimes' state on disk gives
//! (docker's `config.v2.json`, the `containers.json` of podman's and CRI-O's storage, the OCI
//! bundle annotations containerd and CRI-O write, kubelet's pod log directories).
//!
//! The runtimes' files are read below `$LATSCOPE_HOST_ROOT` when it is set (`/host` when
//! latscope runs in a container with the host's root mounted there), else below `/`.

use crate::snapshot::unescape;
use latscope_event::CgroupInfo;
use serde_json::Value;
use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Environment variable naming the directory the runtimes' state is read below.
pub const HOST_ROOT_ENV: &str = "LATSCOPE_HOST_ROOT";

/// At most this many cgroups go into a header (a guard: real trees hold hundreds).
const MAX_CGROUPS: usize = 65_536;
/// Cgroup trees are shallow; deeper directories are not walked.
const MAX_DEPTH: usize = 32;

/// Where cgroup file systems are mounted by convention.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The cgroup2 mount to use and the path of its root within the hierarchy (`/` unless the
/// mount shows a subtree), from /proc/self/mountinfo: /sys/fs/cgroup when the unified
/// hierarchy is there, else its hybrid place below it (/sys/fs/cgroup/unified), else any.
pub fn cgroup2_mount() -> Option<(PathBuf, String)> {
    preferred_mount(cgroup2_mounts(&fs::read_to_string("/proc/self/mountinfo").ok()?))
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
/// those alone (a live session that meets a cgroup made after it started).
pub fn snapshot_new(known: &dyn Fn(u64) -> bool) -> Vec<CgroupInfo> {
    let Some((mount, root)) = cgroup2_mount() else { return Vec::new() };
    let mut out = Vec::new();
    walk(&mount, &root, 0, &mut out);
    out.retain(|c| !known(c.id));
    let host = std::env::var_os(HOST_ROOT_ENV).map_or_else(|| PathBuf::from("/"), PathBuf::from);
    let mut state = RuntimeState::new(&host);
    for c in &mut out {
        state.fill(c);
    }
    out
}

fn walk(dir: &Path, path: &str, depth: usize, out: &mut Vec<CgroupInfo>) {
    if out.len() >= MAX_CGROUPS {
        return;
    }
    let Ok(md) = fs::metadata(dir) else { return };
    out.push(CgroupInfo::from_path(md.ino(), path));
    if depth >= MAX_DEPTH {
        return;
    }
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut subs: Vec<(PathBuf, String)> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let p = if path.ends_with('/') { format!("{path}{name}") } else { format!("{path}/{name}") };
            (e.path(), p)
        })
        .collect();
    subs.sort();
    for (d, p) in subs {
        walk(&d, &p, depth + 1, out);
    }
}

/// The runtimes' state files below a host root, read once each.
struct RuntimeState {
    root: PathBuf,
    /// Containers of the containers/storage library (podman, CRI-O): id to (name, image).
    storage: Option<HashMap<String, (String, String)>>,
    /// Kubelet's pod log directories: pod uid to (namespace, name).
    pods: Option<HashMap<String, (String, String)>>,
}

fn read_json(p: &Path) -> Option<Value> {
    serde_json::from_slice(&fs::read(p).ok()?).ok()
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn set(slot: &mut String, v: &str) {
    if slot.is_empty() && !v.is_empty() {
        *slot = v.to_string();
    }
}

impl RuntimeState {
    fn new(root: &Path) -> Self {
        RuntimeState { root: root.to_path_buf(), storage: None, pods: None }
    }

    fn at(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Names, image and pod of `c`'s container from whichever runtime's state has it.
    fn fill(&mut self, c: &mut CgroupInfo) {
        if !c.container_id.is_empty() {
            let id = c.container_id.clone();
            self.docker(&id, c);
            self.oci_bundles(&id, c);
            if c.container_name.is_empty() || c.image.is_empty() {
                if let Some((name, image)) = self.storage().get(&id) {
                    set(&mut c.container_name, name);
                    set(&mut c.image, image);
                }
            }
        }
        if !c.pod_uid.is_empty() && c.pod_name.is_empty() {
            if let Some((ns, name)) = self.pods().get(&c.pod_uid) {
                set(&mut c.pod_namespace, ns);
                set(&mut c.pod_name, name);
            }
        }
    }

    /// docker: /var/lib/docker/containers/ID/config.v2.json (`Name` is `/web`).
    fn docker(&self, id: &str, c: &mut CgroupInfo) {
        let Some(v) = read_json(&self.at(&format!("var/lib/docker/containers/{id}/config.v2.json"))) else {
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
            self.at(&format!("run/containers/storage/overlay-containers/{id}/userdata/config.json")),
            self.at(&format!("var/lib/containers/storage/overlay-containers/{id}/userdata/config.json")),
        ];
        // containerd: one directory per namespace (k8s.io, moby, default).
        if let Ok(rd) = fs::read_dir(self.at("run/containerd/io.containerd.runtime.v2.task")) {
            bundles.extend(rd.flatten().map(|ns| ns.path().join(id).join("config.json")));
        }
        for b in bundles {
            let Some(v) = read_json(&b) else { continue };
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

    /// containers/storage's list (podman, CRI-O): `[{"id", "names": [..], "metadata": "{\"image-name\": ..}"}]`,
    /// for root (/var/lib) and CRI-O's run directory.
    fn storage(&mut self) -> &HashMap<String, (String, String)> {
        let root = self.root.clone();
        self.storage.get_or_insert_with(|| {
            let mut m = HashMap::new();
            for rel in [
                "var/lib/containers/storage/overlay-containers/containers.json",
                "run/containers/storage/overlay-containers/containers.json",
            ] {
                let Some(Value::Array(list)) = read_json(&root.join(rel)) else { continue };
                for e in list {
                    let id = str_at(&e, "/id").to_string();
                    let name = str_at(&e, "/names/0").to_string();
                    let meta: Value = serde_json::from_str(str_at(&e, "/metadata")).unwrap_or(Value::Null);
                    let image = str_at(&meta, "/image-name").to_string();
                    m.entry(id).or_insert((name, image));
                }
            }
            m
        })
    }

    /// Kubelet's pod log directories, `/var/log/pods/NAMESPACE_NAME_UID`.
    fn pods(&mut self) -> &HashMap<String, (String, String)> {
        let dir = self.at("var/log/pods");
        self.pods.get_or_insert_with(|| {
            let mut m = HashMap::new();
            for e in fs::read_dir(dir).into_iter().flatten().flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                let mut parts = n.splitn(3, '_');
                if let (Some(ns), Some(name), Some(uid)) = (parts.next(), parts.next(), parts.next()) {
                    m.insert(uid.to_string(), (ns.to_string(), name.to_string()));
                }
            }
            m
        })
    }
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
}

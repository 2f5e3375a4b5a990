//! Containers and Kubernetes pods, as a cgroup's path names them.
//!
//! Container runtimes put each container's processes in a cgroup named after the container's
//! id: `system.slice/docker-<id>.scope` (docker, systemd driver), `docker/<id>` (docker,
//! cgroupfs driver), `kubepods.slice/.../cri-containerd-<id>.scope` (containerd's CRI plugin),
//! `crio-<id>.scope` (CRI-O), `machine.slice/libpod-<id>.scope` or `libpod_parent/libpod-<id>`
//! (podman), `kubepods/<qos>/pod<uid>/<id>` (any CRI runtime, cgroupfs driver). Kubelet puts a
//! pod's containers below a cgroup named after the pod's uid (`kubepods-burstable-pod<uid>.slice`,
//! with `_` for `-`, or `pod<uid>`). [`parse_cgroup_path`] reads those names; the recorder adds
//! what the runtimes' state on disk says (names, images, pods) and stores the result in the trace
//! header as [`CgroupInfo`].

use crate::bounds::{cut, json_len, Truncation, MAX_ENTRY_JSON, MAX_NAME};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One cgroup v2 cgroup of the recorded machine, and the container and pod it belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupInfo {
    /// The cgroup's id (its directory's inode number; the `cgroup` column).
    pub id: u64,
    /// Its path below the cgroup2 root, from `/` (`/system.slice/docker-<id>.scope`).
    pub path: String,
    /// The container runtime: `docker`, `containerd`, `cri-o`, `podman`, `cri` (a CRI runtime
    /// the path does not name); empty outside containers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub runtime: String,
    /// The container's full id (64 hex digits); empty outside containers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_id: String,
    /// The container's name, from the runtime's state (empty when unknown).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_name: String,
    /// The image the container runs, as configured (`docker.io/library/nginx:1.27`; empty when
    /// unknown).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    /// The Kubernetes pod's name (empty when unknown or not in a pod).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_name: String,
    /// The pod's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_namespace: String,
    /// The pod's uid (from the cgroup path).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_uid: String,
}

impl CgroupInfo {
    /// A cgroup at `path` (below the cgroup2 root), with the container and pod its path names.
    pub fn from_path(id: u64, path: &str) -> Self {
        let mut c = CgroupInfo { id, path: path.to_string(), ..Default::default() };
        if let Some(m) = parse_cgroup_path(path) {
            c.runtime = m.runtime.to_string();
            c.container_id = m.container_id;
            c.pod_uid = m.pod_uid;
        }
        c
    }

    /// Cut the path to `path` bytes and the names to [`crate::bounds::MAX_NAME`], each cut marked
    /// and counted in `t` (a container's name, image or pod comes from files its owner writes).
    pub fn bound(&mut self, path: usize, t: &mut Truncation) {
        cut(&mut self.path, path, t);
        for s in [
            &mut self.runtime,
            &mut self.container_id,
            &mut self.container_name,
            &mut self.image,
            &mut self.pod_name,
            &mut self.pod_namespace,
            &mut self.pod_uid,
        ] {
            cut(s, MAX_NAME, t);
        }
        // Escaped as JSON a value can take six bytes per byte: keep the line within its bound.
        if json_len(self) > MAX_ENTRY_JSON {
            cut(&mut self.path, MAX_ENTRY_JSON / 12, t);
        }
    }

    /// The short container id sysdig shows: the first 12 digits (empty outside containers).
    pub fn short_id(&self) -> &str {
        self.container_id.get(..12).unwrap_or(&self.container_id)
    }

    /// The image without its tag or digest (`docker.io/library/nginx`).
    pub fn image_repository(&self) -> &str {
        split_image(&self.image).0
    }

    /// The image's tag (`1.27`; empty without one).
    pub fn image_tag(&self) -> &str {
        split_image(&self.image).1
    }

    /// The container's label in views: its name, else its short id; `host` outside containers.
    pub fn container_label(&self) -> &str {
        if self.container_id.is_empty() {
            "host"
        } else if !self.container_name.is_empty() {
            &self.container_name
        } else {
            self.short_id()
        }
    }

    /// The pod's label in views: `namespace/name`, else `pod <uid>`; `None` outside pods.
    pub fn pod_label(&self) -> Option<String> {
        if !self.pod_name.is_empty() {
            Some(format!("{}/{}", self.pod_namespace, self.pod_name))
        } else if !self.pod_uid.is_empty() {
            Some(format!("pod {}", self.pod_uid))
        } else {
            None
        }
    }
}

/// Cgroups by id over a table that only grows (a trace header's `cgroups`, to which readers
/// append the cgroups met during the recording): each lookup in constant time, the first entry
/// of an id winning, as a linear search would.
#[derive(Debug, Clone, Default)]
pub struct CgroupIndex {
    by_id: HashMap<u64, usize>,
    indexed: usize,
}

impl CgroupIndex {
    /// The entry of cgroup `id` in `table` (indexing the entries added since the last call).
    pub fn get<'a>(&mut self, table: &'a [CgroupInfo], id: u64) -> Option<&'a CgroupInfo> {
        if table.len() < self.indexed {
            // Another table: start over.
            self.by_id.clear();
            self.indexed = 0;
        }
        for (i, c) in table.iter().enumerate().skip(self.indexed) {
            self.by_id.entry(c.id).or_insert(i);
        }
        self.indexed = table.len();
        self.by_id.get(&id).and_then(|&i| table.get(i))
    }
}

/// Image reference split into repository and tag: `registry:5000/app:v1@sha256:..` gives
/// (`registry:5000/app`, `v1`).
fn split_image(image: &str) -> (&str, &str) {
    let no_digest = image.split_once('@').map_or(image, |(a, _)| a);
    let slash = no_digest.rfind('/').map_or(0, |i| i + 1);
    match no_digest[slash..].rfind(':') {
        Some(i) => (&no_digest[..slash + i], &no_digest[slash + i + 1..]),
        None => (no_digest, ""),
    }
}

/// What a cgroup path says about a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathMatch {
    /// The runtime (see [`CgroupInfo::runtime`]); empty when only a pod was found.
    pub runtime: &'static str,
    /// The container's full id; empty when only a pod was found.
    pub container_id: String,
    /// The pod's uid, with dashes; empty outside kubepods.
    pub pod_uid: String,
}

fn is_full_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The container id in one path component, with the runtime its prefix names.
fn component_id(c: &str) -> Option<(&'static str, &str)> {
    const PREFIXES: [(&str, &str); 6] = [
        ("docker-", "docker"),
        ("cri-containerd-", "containerd"),
        ("crio-", "cri-o"),
        ("libpod-", "podman"),
        ("nerdctl-", "containerd"),
        ("containerd-", "containerd"),
    ];
    let base = c.strip_suffix(".scope").unwrap_or(c);
    for (prefix, runtime) in PREFIXES {
        if let Some(id) = base.strip_prefix(prefix).filter(|id| is_full_id(id)) {
            return Some((runtime, id));
        }
    }
    is_full_id(base).then_some(("", base))
}

/// The pod uid a kubepods component names: `kubepods-burstable-pod<uid>.slice` (`_` for `-`)
/// or `pod<uid>`.
fn component_pod(c: &str) -> Option<String> {
    let base = c.strip_suffix(".slice").unwrap_or(c);
    let at = if base.starts_with("pod") { 0 } else { base.rfind("-pod")? + 1 };
    let uid = base[at + 3..].replace('_', "-");
    let ok = uid.len() == 36 && uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    ok.then_some(uid)
}

/// The container and pod a cgroup path names (the deepest container-shaped component wins:
/// podman and others put the container's processes in a child such as `.../libpod-<id>.scope/container`).
/// `None` for cgroups that are neither in a container nor in a pod.
pub fn parse_cgroup_path(path: &str) -> Option<PathMatch> {
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    // Anywhere in the path: kubelet's tree may sit below another (kind, nested runtimes).
    let kube = comps.iter().any(|c| c.starts_with("kubepods"));
    let pod_uid = if kube { comps.iter().find_map(|c| component_pod(c)).unwrap_or_default() } else { String::new() };
    let found = comps.iter().enumerate().rev().find_map(|(i, c)| component_id(c).map(|(r, id)| (i, r, id)));
    match found {
        Some((i, runtime, id)) => {
            let runtime = if !runtime.is_empty() {
                runtime
            } else if kube {
                "cri"
            } else if comps[..i].contains(&"docker") {
                "docker"
            } else {
                // A bare id elsewhere is no runtime layout we know: not taken for a container.
                return (!pod_uid.is_empty()).then(|| PathMatch { runtime: "", container_id: String::new(), pod_uid });
            };
            Some(PathMatch { runtime, container_id: id.to_string(), pod_uid })
        }
        None => (!pod_uid.is_empty()).then(|| PathMatch { runtime: "", container_id: String::new(), pod_uid }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f4e8a2b9c1d0e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f";

    fn m(path: &str) -> Option<(&'static str, String, String)> {
        parse_cgroup_path(path).map(|m| (m.runtime, m.container_id, m.pod_uid))
    }

    #[test]
    fn runtime_layouts() {
        let id = ID.to_string();
        let none = String::new();
        assert_eq!(m(&format!("/system.slice/docker-{ID}.scope")), Some(("docker", id.clone(), none.clone())));
        assert_eq!(m(&format!("/docker/{ID}")), Some(("docker", id.clone(), none.clone())));
        assert_eq!(
            m(&format!("/machine.slice/libpod-{ID}.scope/container")),
            Some(("podman", id.clone(), none.clone()))
        );
        assert_eq!(m(&format!("/libpod_parent/libpod-{ID}")), Some(("podman", id.clone(), none.clone())));
        let uid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
        let slice = uid.replace('-', "_");
        assert_eq!(
            m(&format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{slice}.slice/cri-containerd-{ID}.scope"
            )),
            Some(("containerd", id.clone(), uid.to_string()))
        );
        assert_eq!(
            m(&format!("/kubepods.slice/kubepods-pod{slice}.slice/crio-{ID}.scope")),
            Some(("cri-o", id.clone(), uid.to_string()))
        );
        assert_eq!(m(&format!("/kubepods/besteffort/pod{uid}/{ID}")), Some(("cri", id.clone(), uid.to_string())));
        // The pod's own cgroup: a pod, no container.
        assert_eq!(m(&format!("/kubepods/besteffort/pod{uid}")), Some(("", none.clone(), uid.to_string())));
        // Not containers: conmon, system services, a bare hex name outside any runtime's tree.
        assert_eq!(m(&format!("/machine.slice/libpod-conmon-{ID}.scope")), None);
        assert_eq!(m("/system.slice/nginx.service"), None);
        assert_eq!(m(&format!("/user.slice/{ID}")), None);
        assert_eq!(m(&format!("/system.slice/docker-{}.scope", &ID[..12])), None);
        assert_eq!(m("/"), None);
    }

    #[test]
    fn images_and_labels() {
        let mut c = CgroupInfo::from_path(7, &format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(c.short_id(), &ID[..12]);
        assert_eq!(c.container_label(), &ID[..12]);
        c.container_name = "web".into();
        assert_eq!(c.container_label(), "web");
        for (img, repo, tag) in [
            ("nginx", "nginx", ""),
            ("nginx:1.27", "nginx", "1.27"),
            ("registry:5000/team/app:v1", "registry:5000/team/app", "v1"),
            ("registry:5000/app", "registry:5000/app", ""),
            ("docker.io/library/busybox:latest@sha256:abcd", "docker.io/library/busybox", "latest"),
        ] {
            c.image = img.into();
            assert_eq!((c.image_repository(), c.image_tag()), (repo, tag), "{img}");
        }
        assert_eq!(CgroupInfo::from_path(2, "/system.slice/x.service").container_label(), "host");
        assert_eq!(c.pod_label(), None);
    }
}

//! What the running kernel offers the probes, found by looking, not by its version number:
//! distributions backport BPF features, so a version says little. Everything is read from the
//! kernel's BTF (`/sys/kernel/btf/vmlinux`), which needs no privileges.

use libbpf_rs::btf::types::{Composite, DataSec, Enum, Func, Var};
use libbpf_rs::btf::Btf;

/// One kernel feature the probes use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    /// Short identifier (stable, for scripts): `btf`, `ringbuf`, ...
    pub key: &'static str,
    /// What it is, as the kernel names it.
    pub what: &'static str,
    /// The mainline kernel that introduced it.
    pub since: &'static str,
    /// Whether this kernel has it.
    pub present: bool,
    /// What latscope cannot do without it.
    pub needed_for: &'static str,
    /// What latscope does instead when it is missing, if it can do without.
    pub fallback: Option<&'static str>,
}

impl Feature {
    /// Missing, and nothing takes its place: the capabilities of [`Feature::needed_for`] are lost.
    pub fn blocks(&self) -> bool {
        !self.present && self.fallback.is_none()
    }

    /// One line for an error or a warning: the feature, since when, what it costs.
    pub fn describe_missing(&self) -> String {
        match self.fallback {
            Some(f) => format!("this kernel lacks {} (Linux {} and later): {f}", self.what, self.since),
            None => format!(
                "this kernel lacks {} (Linux {} and later), which {} need{}",
                self.what,
                self.since,
                self.needed_for,
                if self.needed_for.ends_with('s') { "" } else { "s" }
            ),
        }
    }
}

/// The kernel features the probes use, probed on the running kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelFeatures {
    /// Every feature, in the order the probes depend on them.
    pub features: Vec<Feature>,
}

/// `key`s of [`KernelFeatures`].
pub mod key {
    /// Kernel BTF.
    pub const BTF: &str = "btf";
    /// The BPF ring buffer.
    pub const RINGBUF: &str = "ringbuf";
    /// Task local storage maps (created with the probes' object).
    pub const TASK_STORAGE_MAP: &str = "task_storage_map";
    /// bpf_get_current_ancestor_cgroup_id.
    pub const ANCESTOR_CGROUP: &str = "ancestor_cgroup_id";
    /// bpf_get_current_task_btf.
    pub const TASK_BTF: &str = "current_task_btf";
    /// Task local storage in tracing programs.
    pub const TASK_STORAGE: &str = "task_storage_tracing";
    /// The bpf_rdonly_cast kfunc.
    pub const RDONLY_CAST: &str = "rdonly_cast";
    /// The bpf_find_vma helper.
    pub const FIND_VMA: &str = "find_vma";
}

const SYSCALLS: &str = "syscall probes (record's syscall events, top, spectrogram, agent's syscall views)";

impl KernelFeatures {
    /// Look at the running kernel.
    pub fn probe() -> KernelFeatures {
        let btf = if std::fs::metadata("/sys/kernel/btf/vmlinux").is_ok() { Btf::from_vmlinux().ok() } else { None };
        Self::from_btf(btf.as_ref())
    }

    fn from_btf(btf: Option<&Btf<'_>>) -> KernelFeatures {
        let enum_has = |ty: &str, member: &str| {
            btf.and_then(|b| b.type_by_name::<Enum>(ty))
                .is_some_and(|e| e.iter().any(|m| m.name.is_some_and(|n| n == member)))
        };
        let struct_has = |ty: &str, member: &str| {
            btf.and_then(|b| b.type_by_name::<Composite>(ty))
                .is_some_and(|s| s.iter().any(|m| m.name.is_some_and(|n| n == member)))
        };
        let func = |name: &str| btf.and_then(|b| b.type_by_name::<Func>(name)).is_some();
        let features = vec![
            Feature {
                key: key::BTF,
                what: "kernel BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF=y)",
                since: "5.4",
                present: btf.is_some(),
                needed_for: "all probes",
                fallback: None,
            },
            Feature {
                key: key::RINGBUF,
                what: "the BPF ring buffer (BPF_MAP_TYPE_RINGBUF)",
                since: "5.8",
                present: enum_has("bpf_map_type", "BPF_MAP_TYPE_RINGBUF"),
                needed_for: "all probes",
                fallback: None,
            },
            Feature {
                key: key::TASK_STORAGE_MAP,
                what: "task local storage maps (BPF_MAP_TYPE_TASK_STORAGE)",
                since: "5.11",
                present: enum_has("bpf_map_type", "BPF_MAP_TYPE_TASK_STORAGE"),
                needed_for: "all probes",
                fallback: None,
            },
            Feature {
                key: key::ANCESTOR_CGROUP,
                what: "the bpf_get_current_ancestor_cgroup_id helper",
                since: "5.6",
                present: enum_has("bpf_func_id", "BPF_FUNC_get_current_ancestor_cgroup_id"),
                needed_for: "the cgroup filter",
                fallback: None,
            },
            Feature {
                key: key::TASK_BTF,
                what: "the bpf_get_current_task_btf helper",
                since: "5.11",
                present: enum_has("bpf_func_id", "BPF_FUNC_get_current_task_btf"),
                needed_for: SYSCALLS,
                fallback: None,
            },
            Feature {
                key: key::TASK_STORAGE,
                what: "task local storage in tracing programs (task_struct.bpf_storage)",
                since: "5.13",
                present: struct_has("task_struct", "bpf_storage"),
                needed_for: "per-call attribution (record --why)",
                fallback: Some(
                    "syscall probes keep a call that blocks in a hash map by thread id instead (32,768 \
                     threads blocked in syscalls at once at most; more are counted lost); record --why \
                     needs it",
                ),
            },
            Feature {
                key: key::RDONLY_CAST,
                what: "the bpf_rdonly_cast kfunc",
                since: "6.2",
                present: func("bpf_rdonly_cast"),
                needed_for: "the fast path of fd naming",
                fallback: Some(
                    "syscall probes name fds with bpf_probe_read_kernel instead (same results, a little more \
                     time per syscall on an fd)",
                ),
            },
            Feature {
                key: key::FIND_VMA,
                what: "the bpf_find_vma helper",
                since: "5.17",
                present: enum_has("bpf_func_id", "BPF_FUNC_find_vma"),
                needed_for: "naming the file behind a page fault in the kernel (record --why)",
                fallback: Some(
                    "the file behind a page fault is named by the recorded mmap calls only (a file mapped \
                     before the recording stays unknown)",
                ),
            },
        ];
        KernelFeatures { features }
    }

    /// The feature called `key`.
    pub fn get(&self, key: &str) -> Option<&Feature> {
        self.features.iter().find(|f| f.key == key)
    }

    /// Whether the feature called `key` is there.
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some_and(|f| f.present)
    }

    /// Missing features that no probe can do without, first first.
    pub fn missing_for_all(&self) -> impl Iterator<Item = &Feature> {
        self.features.iter().filter(|f| f.blocks() && f.needed_for == "all probes")
    }

    /// Missing features the syscall probes cannot do without.
    pub fn missing_for_syscalls(&self) -> impl Iterator<Item = &Feature> {
        self.features.iter().filter(|f| f.blocks() && f.needed_for == SYSCALLS)
    }
}

/// Where the programs read the hypervisor's steal clock (see `steal_clock` in compat.bpf.h):
/// the distance in bytes from a CPU's `runqueues` to its `steal_time`, both per-CPU variables,
/// from their offsets in the kernel's BTF. `None` on bare metal (no hypervisor, no steal) and
/// on kernels without those variables in their BTF. On a guest of a hypervisor other than KVM,
/// or of a KVM host that does not offer the clock, the variable is never written and reads 0:
/// the programs then file nothing, at the cost of the reads.
pub fn steal_clock_offset() -> Option<i64> {
    match steal_clock() {
        StealClock::Read(off) => Some(off),
        _ => None,
    }
}

/// Whether `record --why` can tell the time a hypervisor takes from a call's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StealClock {
    /// No hypervisor: nothing is taken.
    BareMetal,
    /// Under a hypervisor, read at this distance from the run queue (it stays 0 where the
    /// hypervisor is not KVM or does not offer it).
    Read(i64),
    /// Under a hypervisor, but this kernel's BTF lacks the per-CPU variables or the task's run
    /// queue (`CONFIG_FAIR_GROUP_SCHED`): such time counts as on CPU.
    Unreadable,
}

/// Look at this machine for the steal clock.
pub fn steal_clock() -> StealClock {
    if !under_hypervisor() {
        return StealClock::BareMetal;
    }
    let Ok(btf) = Btf::from_vmlinux() else { return StealClock::Unreadable };
    let has = |ty: &str, member: &str| {
        btf.type_by_name::<Composite>(ty).is_some_and(|s| s.iter().any(|m| m.name.is_some_and(|n| n == member)))
    };
    match percpu_distance(&btf, "runqueues", "steal_time") {
        Some(off) if has("sched_entity", "cfs_rq") && has("cfs_rq", "rq") => StealClock::Read(off),
        _ => StealClock::Unreadable,
    }
}

/// The distance from per-CPU variable `from` to `to` (their offsets in DATASEC .data..percpu).
fn percpu_distance(btf: &Btf<'_>, from: &str, to: &str) -> Option<i64> {
    let sec = btf.type_by_name::<DataSec>(".data..percpu")?;
    let (mut a, mut b) = (None, None);
    for v in sec.iter() {
        let name = btf.type_by_id::<Var>(v.ty).and_then(|t| t.name().map(|n| n.to_os_string()));
        let name = name.as_ref().and_then(|n| n.to_str());
        if name == Some(from) {
            a = Some(i64::from(v.offset));
        }
        if name == Some(to) {
            b = Some(i64::from(v.offset));
        }
    }
    Some(b? - a?)
}

/// Whether this machine runs under a hypervisor: CPUID leaf 1's "hypervisor present" bit (ECX
/// bit 31), which every hypervisor sets for its guests.
#[cfg(target_arch = "x86_64")]
fn under_hypervisor() -> bool {
    #[allow(unused_unsafe)] // (safe in newer Rust)
    let leaf = unsafe { std::arch::x86_64::__cpuid(1) };
    leaf.ecx & (1 << 31) != 0
}

#[cfg(not(target_arch = "x86_64"))]
fn under_hypervisor() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_btf_everything_is_missing_and_named() {
        let k = KernelFeatures::from_btf(None);
        assert!(k.features.iter().all(|f| !f.present));
        assert_eq!(k.missing_for_all().next().unwrap().key, key::BTF);
        let msg = k.get(key::TASK_STORAGE).unwrap().describe_missing();
        assert!(msg.contains("5.13") && msg.contains("hash map by thread id") && msg.contains("--why"), "{msg}");
        assert!(!k.get(key::TASK_STORAGE).unwrap().blocks());
        // A missing kfunc with a fallback costs speed, not a capability.
        assert!(!k.get(key::RDONLY_CAST).unwrap().blocks());
    }

    /// The distance between two per-CPU variables every kernel with BTF has, read as the
    /// kernel's per-CPU area lays them out (the symbols' addresses, where kallsyms has them).
    #[test]
    fn per_cpu_variables_are_found_at_their_offsets() {
        let Ok(btf) = Btf::from_vmlinux() else {
            eprintln!("SKIPPED per_cpu_variables_are_found_at_their_offsets: no kernel BTF");
            return;
        };
        assert_eq!(percpu_distance(&btf, "runqueues", "runqueues"), Some(0));
        assert_eq!(percpu_distance(&btf, "runqueues", "no_such_variable"), None);
        let d = percpu_distance(&btf, "runqueues", "current_task")
            .or_else(|| percpu_distance(&btf, "runqueues", "cpu_number"));
        assert!(d.is_some_and(|d| d != 0), "{d:?}");
    }
}

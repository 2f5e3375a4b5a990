//! The trace file header: what the recorded machine looked like.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the trace format this build writes (see docs/TRACE_FORMAT.md).
pub const TRACE_FORMAT_VERSION: u32 = 1;

/// Everything about the recorded machine and the recording that events refer to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Trace format version.
    pub format_version: u32,
    /// latscope version that wrote the file.
    pub latscope_version: String,
    /// Host name of the recorded machine.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Machine architecture (`uname -m`).
    pub machine: String,
    /// Number of CPUs online.
    pub cpus: u32,
    /// Wall-clock time of boot, ns since the Unix epoch.
    pub boot_time_ns: u64,
    /// Add to a CLOCK_MONOTONIC timestamp to get wall-clock ns since the epoch.
    pub realtime_offset_ns: i64,
    /// CLOCK_MONOTONIC ns when recording started.
    pub start_ns: u64,
    /// The latscope command line.
    pub command_line: Vec<String>,
    /// Which syscalls were recorded: `all`, `io` or `none` ([`crate::SyscallSet::name`]).
    pub syscalls: String,
    /// Whether block requests were recorded.
    pub block: bool,
    /// Filter given at record time, if any.
    pub filter: Option<String>,
    /// Mount table of the recorded machine.
    pub mounts: Vec<Mount>,
    /// Block devices of the recorded machine.
    pub block_devices: Vec<BlockDevice>,
    /// Processes running when recording started.
    pub processes: Vec<ProcessInfo>,
    /// File descriptors open when recording started.
    pub fds: Vec<FdInfo>,
    /// User names by uid.
    pub users: BTreeMap<u32, String>,
}

/// One mount.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// Device of the file system, `major << 20 | minor`.
    pub dev: u32,
    /// Mount point.
    pub mount_point: String,
    /// File system type.
    pub fstype: String,
    /// Source (device path, or `tmpfs`, ...).
    pub source: String,
    /// Mount options.
    pub options: String,
}

/// One block device (disk or partition).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockDevice {
    /// Device number, `major << 20 | minor`.
    pub dev: u32,
    /// Kernel name (`vda`, `loop0`, `nvme0n1p1`).
    pub name: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Active I/O scheduler (disks only).
    pub scheduler: Option<String>,
    /// Whether the device says it is rotational.
    pub rotational: bool,
    /// The whole disk this partition belongs to (`None` for disks).
    pub parent: Option<String>,
}

/// One process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Command name.
    pub comm: String,
    /// Executable path.
    pub exe: String,
    /// Real user id.
    pub uid: u32,
    /// Command line.
    pub cmdline: String,
    /// Working directory.
    pub cwd: String,
}

/// One open file descriptor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FdInfo {
    /// Process id.
    pub pid: u32,
    /// Descriptor number.
    pub fd: i32,
    /// Path (or `socket:[ino]`, `pipe:[ino]`, ...).
    pub path: String,
    /// [`crate::FdType`] code.
    pub fd_type: u8,
    /// Device, `major << 20 | minor`.
    pub dev: u32,
    /// Inode.
    pub ino: u64,
}

impl TraceHeader {
    /// Name of a block device by number (`"vda"`), if the header knows it.
    pub fn disk_name(&self, dev: u32) -> Option<&str> {
        self.block_devices.iter().find(|d| d.dev == dev).map(|d| d.name.as_str())
    }
    /// Wall-clock ns since the epoch for a monotonic timestamp.
    pub fn wall_ns(&self, mono_ns: u64) -> i64 {
        mono_ns as i64 + self.realtime_offset_ns
    }
    /// The mount whose mount point is the longest prefix of `path`.
    pub fn mount_of(&self, path: &str) -> Option<&Mount> {
        self.mounts
            .iter()
            .filter(|m| {
                path == m.mount_point
                    || m.mount_point == "/"
                    || path.starts_with(&format!("{}/", m.mount_point.trim_end_matches('/')))
            })
            .max_by_key(|m| m.mount_point.len())
    }
}

/// `major:minor` from the packed device number.
pub fn dev_major_minor(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & 0xfffff)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn json_roundtrip_and_lookups() {
        let h = TraceHeader {
            format_version: TRACE_FORMAT_VERSION,
            hostname: "h".into(),
            mounts: vec![
                Mount { mount_point: "/".into(), ..Default::default() },
                Mount { mount_point: "/mnt/a".into(), fstype: "ext4".into(), ..Default::default() },
            ],
            block_devices: vec![BlockDevice { dev: (7 << 20) | 1, name: "loop1".into(), ..Default::default() }],
            ..Default::default()
        };
        let s = serde_json::to_string(&h).unwrap();
        let back: TraceHeader = serde_json::from_str(&s).unwrap();
        assert_eq!(back, h);
        assert_eq!(h.mount_of("/mnt/a/x").unwrap().fstype, "ext4");
        assert_eq!(h.mount_of("/mnt/ab").unwrap().mount_point, "/");
        assert_eq!(h.disk_name((7 << 20) | 1), Some("loop1"));
        assert_eq!(dev_major_minor((7 << 20) | 1), (7, 1));
    }
}

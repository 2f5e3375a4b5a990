//! Where a run ran: the kernel, the sandbox's file systems and the queue settings of the disks
//! under them, so that `compare` can say when two runs are not comparable.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The environment of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnv {
    /// `uname -r`.
    pub kernel: String,
    /// File system type of each sandbox root (`ext4`, `xfs`, `tmpfs`, ... or a magic number).
    pub sandbox_fs: Vec<String>,
    /// Queue settings of the disks the sandbox roots are on: `DISK scheduler` -> `mq-deadline`,
    /// `DISK read_ahead_kb`, `DISK nr_requests`.
    pub block: BTreeMap<String, String>,
}

/// A file system's name from its magic number (statfs(2)).
fn fs_name(magic: i64) -> String {
    match magic as u64 & 0xffff_ffff {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x794C_7630 => "overlay",
        0xF2F5_2010 => "f2fs",
        0x2FC1_2FC1 => "zfs",
        0x6969 => "nfs",
        0x6573_5546 => "fuse",
        0x4d44 => "vfat",
        m => return format!("0x{m:x}"),
    }
    .to_string()
}

/// The environment of a run whose sandbox roots are these directory fds.
pub fn collect(roots: &[i32]) -> RunEnv {
    let mut env = RunEnv::default();
    // SAFETY: uname fills the struct; the fields are NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) == 0 {
            env.kernel = std::ffi::CStr::from_ptr(u.release.as_ptr()).to_string_lossy().into_owned();
        }
    }
    for &fd in roots {
        // SAFETY: fstatfs and fstat on our directory fds into zeroed structs.
        let (sfs, st) = unsafe {
            let mut sfs: libc::statfs = std::mem::zeroed();
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstatfs(fd, &mut sfs) != 0 || libc::fstat(fd, &mut st) != 0 {
                continue;
            }
            (sfs, st)
        };
        let name = fs_name(sfs.f_type);
        if !env.sandbox_fs.contains(&name) {
            env.sandbox_fs.push(name);
        }
        let (maj, min) = (libc::major(st.st_dev), libc::minor(st.st_dev));
        let dev = std::path::PathBuf::from(format!("/sys/dev/block/{maj}:{min}"));
        // A partition's queue is its disk's.
        let disk = if dev.join("partition").exists() { dev.join("..") } else { dev };
        let Ok(disk) = disk.canonicalize() else { continue };
        let dname = disk.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        for s in ["scheduler", "read_ahead_kb", "nr_requests"] {
            if let Ok(v) = crate::matrix::current(&disk.join("queue"), s) {
                env.block.insert(format!("{dname} {s}"), v);
            }
        }
    }
    env
}

//! The trace file header: what the recorded machine looked like.

use crate::bounds::{
    cut, cut_opt, json_len, Truncation, MAX_ARGS, MAX_CGROUPS, MAX_CMDLINE, MAX_FILTER, MAX_HEADER_JSON, MAX_NAME,
    MAX_PATH, MAX_TEXT,
};
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
    /// What the recording captured completely, as tags ([`CAPTURE_REPLAY_V1`]); empty in traces
    /// written before the field existed. See [`TraceHeader::replay_readiness`].
    #[serde(default)]
    pub capture: Vec<String>,
    /// The cgroup v2 cgroups of the recorded machine, with the containers and pods they belong
    /// to (`container.*`, `k8s.*`, `cgroup.path`, `--by container`); empty in traces written
    /// before the field existed or where no cgroup2 file system was mounted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cgroups: Vec<crate::CgroupInfo>,
    /// Group names by gid (`group.name`); empty in traces written before the field existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: BTreeMap<u32, String>,
    /// Set in a flight recorder's dump (`record --ring`): the trigger that had the window
    /// written. Its `processes`, `fds` and `cgroups` are then those known when the dump was
    /// taken (the recording's start, and what was learned since), and `start_ns` is the
    /// window's first event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flight: Option<FlightInfo>,
    /// What the writer cut to keep the header within its bounds ([`TraceHeader::bound`]): values
    /// cut short end with a marker (`…[cut N bytes]`). Absent when nothing was.
    #[serde(default, skip_serializing_if = "Truncation::is_empty")]
    pub truncated: Truncation,
}

/// What had a flight recorder write a dump (see [`TraceHeader::flight`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlightInfo {
    /// The trigger's name.
    pub trigger: String,
    /// The trigger as configured (`evt.latency > 150ms`, `p99 of fsync over 10s > 20ms`, ...).
    pub condition: String,
    /// What fired it, in words (the call, the percentile measured, who asked).
    pub reason: String,
    /// CLOCK_MONOTONIC ns it fired at: the end of the call that fired it, the end of the
    /// window measured, or the moment it was asked for.
    pub at_ns: u64,
    /// The window asked for before `at_ns` and after it, ns (the dump holds whole blocks: a
    /// little more).
    pub before_ns: u64,
    /// See `before_ns`.
    pub after_ns: u64,
}

/// Capture tag: every syscall that touches files or fds was recorded, unfiltered, with the
/// arguments a replay needs (docs/TRACE_FORMAT.md, "What a replay needs from a trace").
pub const CAPTURE_REPLAY_V1: &str = "replay-v1";

/// The command that records a trace a replay can use, for messages.
const RECORD_FOR_REPLAY: &str = "record it again with `latscope record -w FILE -- COMMAND` (or `-p PID`), \
     with no filter expression, no -c and --syscalls all or io";

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
    /// File position when recording started (`pos` in /proc/PID/fdinfo); -1 when unknown
    /// (unreadable, or a trace written before the field existed).
    #[serde(default = "unknown_pos")]
    pub pos: i64,
    /// Open flags (`flags` in /proc/PID/fdinfo: access mode, O_APPEND, O_NONBLOCK,
    /// O_CLOEXEC, ...); 0 in traces written before the field existed.
    #[serde(default)]
    pub flags: u32,
}

impl ProcessInfo {
    /// Cut the command line to `cmdline` bytes, the paths to `path`, the name to
    /// [`crate::bounds::MAX_NAME`], counting in `t`.
    pub fn bound(&mut self, cmdline: usize, path: usize, t: &mut Truncation) {
        cut(&mut self.comm, MAX_NAME, t);
        cut(&mut self.exe, path, t);
        cut(&mut self.cmdline, cmdline, t);
        cut(&mut self.cwd, path, t);
    }
}

fn unknown_pos() -> i64 {
    -1
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
    /// Whether the trace holds everything a replay of its file I/O needs (the
    /// [`CAPTURE_REPLAY_V1`] tag). The error says what is missing and how to record properly.
    /// Losses are not in the header: check the trace's summary (`lost`) as well.
    pub fn replay_readiness(&self) -> Result<(), String> {
        if self.capture.iter().any(|c| c == CAPTURE_REPLAY_V1) {
            return Ok(());
        }
        let why = if self.flight.is_some() {
            "it is a flight recorder's dump (record --ring): it starts in the middle of a recording, with files \
             already open and processes already running"
                .to_string()
        } else if self.syscalls == "none" {
            "it was recorded with --syscalls none: it holds no syscalls".to_string()
        } else if let Some(f) = &self.filter {
            format!("it was recorded with the filter `{f}`, which drops calls a replay needs (the opens, closes, dups and forks that give the kept calls their fds)")
        } else if self.command_line.iter().any(|a| a == "-c" || a == "--comm" || a.starts_with("--comm=")) {
            "it was recorded with -c (only some command names): a process's calls before it took that name are missing"
                .to_string()
        } else if self.syscalls != "all" && self.syscalls != "io" && !self.syscalls.is_empty() {
            format!("it was recorded with --syscalls {}, which leaves out calls a replay needs", self.syscalls)
        } else {
            let by = if self.latscope_version.is_empty() {
                "a latscope".to_string()
            } else {
                format!("latscope {}", self.latscope_version)
            };
            format!(
                "it was recorded by {by} without the `{CAPTURE_REPLAY_V1}` capture (an older version, which did not record every argument a replay needs: pipe fds, clone flags, offsets behind pointers, exec paths)"
            )
        };
        Err(format!("this trace cannot be replayed faithfully: {why}; {RECORD_FOR_REPLAY}"))
    }

    /// Cut every value the recorded machine controls to its bound ([`crate::bounds`]), each cut
    /// marked, and count what was cut in [`TraceHeader::truncated`] (added to what it held);
    /// returns this call's counts. Cheap when nothing is over its bound; readers apply it to
    /// every header they read.
    pub fn bound_fields(&mut self) -> Truncation {
        let mut t = Truncation::default();
        for s in
            [&mut self.latscope_version, &mut self.hostname, &mut self.kernel, &mut self.machine, &mut self.syscalls]
        {
            cut(s, MAX_NAME, &mut t);
        }
        if self.command_line.len() > MAX_ARGS {
            t.entries += (self.command_line.len() - MAX_ARGS) as u64;
            self.command_line.truncate(MAX_ARGS);
        }
        for a in &mut self.command_line {
            cut(a, MAX_TEXT, &mut t);
        }
        cut_opt(&mut self.filter, MAX_FILTER, &mut t);
        for m in &mut self.mounts {
            cut(&mut m.mount_point, MAX_PATH, &mut t);
            cut(&mut m.source, MAX_PATH, &mut t);
            cut(&mut m.fstype, MAX_NAME, &mut t);
            cut(&mut m.options, MAX_TEXT, &mut t);
        }
        for d in &mut self.block_devices {
            cut(&mut d.name, MAX_NAME, &mut t);
            cut_opt(&mut d.scheduler, MAX_NAME, &mut t);
            cut_opt(&mut d.parent, MAX_NAME, &mut t);
        }
        for p in &mut self.processes {
            p.bound(MAX_CMDLINE, MAX_PATH, &mut t);
        }
        for f in &mut self.fds {
            cut(&mut f.path, MAX_PATH, &mut t);
        }
        for v in self.users.values_mut().chain(self.groups.values_mut()) {
            cut(v, MAX_NAME, &mut t);
        }
        for c in &mut self.capture {
            cut(c, MAX_NAME, &mut t);
        }
        if self.cgroups.len() > MAX_CGROUPS {
            t.entries += (self.cgroups.len() - MAX_CGROUPS) as u64;
            self.cgroups.truncate(MAX_CGROUPS);
        }
        for c in &mut self.cgroups {
            c.bound(MAX_PATH, &mut t);
        }
        self.truncated.add(&t);
        t
    }

    /// [`TraceHeader::bound_fields`], then, while the header as JSON is larger than
    /// [`crate::bounds::MAX_HEADER_JSON`], the values of its largest tables cut shorter (command
    /// lines, then paths), then the last entries of its tables dropped (open files, then
    /// processes, cgroups, users, groups, mounts, block devices), so that every reader accepts it.
    /// Returns this call's counts (also added to [`TraceHeader::truncated`]). What the trace
    /// writer calls on every header it writes.
    pub fn bound(&mut self) -> Truncation {
        let mut t = self.bound_fields();
        let mut size = json_len(self);
        // Shorter and shorter values of the tables that grow with the machine.
        for (cmdline, path) in [(4096, MAX_PATH), (256, 1024), (64, 256)] {
            if size <= MAX_HEADER_JSON {
                break;
            }
            let mut step = Truncation::default();
            for p in &mut self.processes {
                p.bound(cmdline, path, &mut step);
            }
            for f in &mut self.fds {
                cut(&mut f.path, path, &mut step);
            }
            for c in &mut self.cgroups {
                c.bound(path, &mut step);
            }
            t.add(&step);
            self.truncated.add(&step);
            size = json_len(self);
        }
        // Then whole entries, from the end of each table, until the rest fits.
        macro_rules! drop_tail {
            ($v:expr) => {
                while size > MAX_HEADER_JSON && !$v.is_empty() {
                    let over = size - MAX_HEADER_JSON;
                    let (mut freed, mut n) = (0, 0);
                    for e in $v.iter().rev() {
                        if freed >= over {
                            break;
                        }
                        freed += json_len(e) + 1;
                        n += 1;
                    }
                    let keep = $v.len() - n;
                    $v.truncate(keep);
                    t.entries += n as u64;
                    self.truncated.entries += n as u64;
                    size = json_len(self);
                }
            };
        }
        drop_tail!(self.fds);
        drop_tail!(self.processes);
        drop_tail!(self.cgroups);
        drop_tail!(self.mounts);
        drop_tail!(self.block_devices);
        drop_tail!(self.command_line);
        for map in [&mut self.users, &mut self.groups] {
            while size > MAX_HEADER_JSON {
                let Some((&k, v)) = map.iter().next_back() else { break };
                size = size.saturating_sub(json_len(&k) + json_len(v) + 4);
                map.remove(&k);
                t.entries += 1;
                self.truncated.entries += 1;
            }
        }
        t
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
    fn old_headers_read_with_defaults() {
        // A header as written before `capture` and the fd `pos`/`flags` existed.
        let old = r#"{"format_version":1,"latscope_version":"0.1.0","hostname":"h","kernel":"k","machine":"x86_64",
            "cpus":2,"boot_time_ns":0,"realtime_offset_ns":0,"start_ns":0,"command_line":["latscope","record"],
            "syscalls":"all","block":true,"filter":null,"mounts":[],"block_devices":[],"processes":[],
            "fds":[{"pid":1,"fd":0,"path":"/dev/null","fd_type":13,"dev":5,"ino":4}],"users":{}}"#;
        let h: TraceHeader = serde_json::from_str(old).unwrap();
        assert!(h.capture.is_empty());
        assert_eq!((h.fds[0].pos, h.fds[0].flags), (-1, 0));
        let e = h.replay_readiness().unwrap_err();
        assert!(e.contains("latscope 0.1.0 without the `replay-v1` capture"), "{e}");
        assert!(e.contains("latscope record -w FILE"), "{e}");
    }

    #[test]
    fn replay_readiness_says_what_is_missing() {
        let ok = TraceHeader { syscalls: "all".into(), capture: vec![CAPTURE_REPLAY_V1.into()], ..Default::default() };
        assert_eq!(ok.replay_readiness(), Ok(()));
        let none = TraceHeader { syscalls: "none".into(), ..Default::default() };
        assert!(none.replay_readiness().unwrap_err().contains("--syscalls none"));
        let filtered =
            TraceHeader { syscalls: "all".into(), filter: Some("fd.type = file".into()), ..Default::default() };
        assert!(filtered.replay_readiness().unwrap_err().contains("the filter `fd.type = file`"));
        let comm = TraceHeader {
            syscalls: "all".into(),
            command_line: vec!["latscope".into(), "record".into(), "-c".into(), "x".into()],
            ..Default::default()
        };
        assert!(comm.replay_readiness().unwrap_err().contains("-c"));
    }

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

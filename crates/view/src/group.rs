//! Drill-down keys: which group an event belongs to for `--by` / `--per` (process, syscall, file,
//! directory, disk, operation, client).
//!
//! [`Grouper`] maps events to small group numbers without allocating for groups it has seen, so
//! that per-group aggregation stays fast on large traces.

use latscope_event::source::CountKey;
use latscope_event::{dev_major_minor, op_name, EventBatch, EventKind, FdType, TraceHeader};
use rustc_hash::FxHashMap;

/// What to group events by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupBy {
    /// One group for everything.
    All,
    /// Process name (comm).
    Proc,
    /// Process: name and pid (`postgres[812]`).
    Pid,
    /// Syscall name; block requests by their `evt.type` (`block_read`, `block_write`).
    Syscall,
    /// File: the path of the fd or the path argument (`<pipe>`, `<socket>`... for unnamed fds).
    File,
    /// Directory of the file.
    Dir,
    /// Disk: the block device of a block request, or the device of the file behind an fd.
    Disk,
    /// Operation: syscall name, or block request type (`block_read`); the same as `syscall`.
    Op,
    /// Client: the peer address of a socket fd where the trace knows it (from an fd name
    /// `local->peer`, port dropped: one group per host, all its connections together), else the
    /// process (`comm[pid]`).
    Client,
    /// The I/O class of the fd: `file`, `net`, `ipc`, `other`; block requests are `block`.
    Class,
    /// Container: its name, else its short id; `host` outside containers (from the trace's
    /// cgroup table).
    Container,
    /// Kubernetes pod: `namespace/name`, else `pod <uid>`; `<no pod>` outside pods.
    Pod,
    /// cgroup v2 cgroup, by path (`/system.slice/nginx.service`).
    Cgroup,
}

impl GroupBy {
    /// Parse a `--by` / `--per` value.
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "all" | "none" => Self::All,
            "proc" | "process" | "comm" => Self::Proc,
            "pid" => Self::Pid,
            "syscall" | "sys" => Self::Syscall,
            "file" => Self::File,
            "dir" | "directory" => Self::Dir,
            "disk" | "dev" | "device" => Self::Disk,
            "op" | "operation" => Self::Op,
            "client" => Self::Client,
            "class" => Self::Class,
            "container" => Self::Container,
            "pod" => Self::Pod,
            "cgroup" => Self::Cgroup,
            _ => {
                return Err(format!(
                    "unknown grouping '{s}' (use proc, pid, syscall, file, dir, disk, op, client, class, container, pod or cgroup)"
                ))
            }
        })
    }

    /// Name as given on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Proc => "proc",
            Self::Pid => "pid",
            Self::Syscall => "syscall",
            Self::File => "file",
            Self::Dir => "dir",
            Self::Disk => "disk",
            Self::Op => "op",
            Self::Client => "client",
            Self::Class => "class",
            Self::Container => "container",
            Self::Pod => "pod",
            Self::Cgroup => "cgroup",
        }
    }

    /// Column heading.
    pub fn heading(self) -> &'static str {
        match self {
            Self::All => "ALL",
            Self::Proc => "PROCESS",
            Self::Pid => "PROCESS[PID]",
            Self::Syscall => "SYSCALL",
            Self::File => "FILE",
            Self::Dir => "DIRECTORY",
            Self::Disk => "DISK",
            Self::Op => "OPERATION",
            Self::Client => "CLIENT",
            Self::Class => "CLASS",
            Self::Container => "CONTAINER",
            Self::Pod => "POD",
            Self::Cgroup => "CGROUP",
        }
    }

    /// The trace columns this grouping reads (by `EventBatch` field name).
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            Self::All => &[],
            Self::Proc => &["comm"],
            Self::Pid | Self::Client => &["comm", "pid", "fd_type", "path"],
            Self::Syscall | Self::Op => &["kind", "nr"],
            Self::File | Self::Dir => &["kind", "path", "fd_type", "fd"],
            Self::Disk => &["kind", "dev", "fd_type"],
            Self::Class => &["kind", "fd_type"],
            Self::Container | Self::Pod | Self::Cgroup => &["cgroup"],
        }
    }
}

#[derive(Hash, PartialEq, Eq, Clone, Copy)]
enum NumKey {
    Pid(u32),
    Op(u8, u16),
    Dev(u32),
    FdType(u8),
}

/// Assigns group numbers to events (0, 1, 2, ... in order of first appearance).
#[derive(Debug, Default)]
pub struct Grouper {
    by: Option<GroupBy>,
    names: Vec<String>,
    strs: FxHashMap<Box<[u8]>, usize>,
    nums: FxHashMap<u64, usize>,
    /// The last string key and its group: consecutive events often share a process or file.
    last_str: Vec<u8>,
    last_str_group: Option<usize>,
    /// `comm[pid]` groups: the command name in the label, which follows exec (the label is the
    /// latest name of the process, whatever events a filter let through before).
    pid_comm: FxHashMap<usize, Box<[u8]>>,
    /// Groups of `--by container/pod/cgroup` by cgroup id.
    cgroups: FxHashMap<u64, usize>,
    /// The header's cgroup table by id (it grows as a trace is read).
    cgroup_index: latscope_event::CgroupIndex,
    /// `--by syscall`: the group of each syscall number seen, per kind (`u32::MAX`: not seen),
    /// an index per event instead of a hash.
    ops: [Vec<u32>; 3],
    /// `--by disk`: the last device and its group (block requests come from few disks).
    last_dev: Option<(u32, usize)>,
}

/// The groups of `--by class`, in display order.
pub const CLASSES: [&str; 5] = ["file", "net", "ipc", "other", "block"];

/// The bytes of string `i` of a column, without the UTF-8 check of `StrCol::get` (keys only).
#[inline]
fn str_bytes(c: &latscope_event::StrCol, i: usize) -> &[u8] {
    let (a, b) = (c.offsets[i] as usize, c.offsets[i + 1] as usize);
    c.data.get(a..b).unwrap_or(&[])
}

impl NumKey {
    fn pack(self) -> u64 {
        match self {
            NumKey::Pid(p) => (1 << 60) | u64::from(p),
            NumKey::Op(k, n) => (2 << 60) | (u64::from(k) << 16) | u64::from(n),
            NumKey::Dev(d) => (3 << 60) | u64::from(d),
            NumKey::FdType(t) => (4 << 60) | u64::from(t),
        }
    }
}

impl Grouper {
    /// A grouper for `by`. Classes are numbered in [`CLASSES`] order from the start.
    pub fn new(by: GroupBy) -> Self {
        let mut g = Grouper { by: Some(by), ..Default::default() };
        if by == GroupBy::Class {
            for c in CLASSES {
                g.text(c);
            }
        }
        g
    }

    /// The grouping.
    pub fn by(&self) -> GroupBy {
        self.by.unwrap_or(GroupBy::All)
    }

    /// Names of the groups, by number.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Number of groups so far.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True before the first event.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    fn num(&mut self, k: NumKey, name: impl FnOnce() -> String) -> usize {
        let p = k.pack();
        if let Some(&g) = self.nums.get(&p) {
            return g;
        }
        let g = self.names.len();
        self.names.push(name());
        self.nums.insert(p, g);
        g
    }

    fn text(&mut self, s: &str) -> usize {
        self.bytes(s.as_bytes())
    }

    #[inline]
    fn bytes(&mut self, s: &[u8]) -> usize {
        if let Some(g) = self.last_str_group {
            if self.last_str == s {
                return g;
            }
        }
        let g = match self.strs.get(s) {
            Some(&g) => g,
            None => {
                let g = self.names.len();
                self.names.push(String::from_utf8_lossy(s).into_owned());
                self.strs.insert(s.into(), g);
                g
            }
        };
        self.last_str.clear();
        self.last_str.extend_from_slice(s);
        self.last_str_group = Some(g);
        g
    }

    /// Group number of event `i`.
    #[inline]
    pub fn group(&mut self, b: &EventBatch, i: usize, h: &TraceHeader) -> usize {
        match self.by {
            // A syscall seen before: an index, without the call.
            Some(GroupBy::Syscall | GroupBy::Op) => {
                if let Some(&g) = self.ops.get(b.kind[i] as usize).and_then(|v| v.get(b.nr[i] as usize)) {
                    if g != u32::MAX {
                        return g as usize;
                    }
                }
            }
            // The disk of the event before: a comparison, without the call.
            Some(GroupBy::Disk) => {
                if let Some((d, g)) = self.last_dev {
                    if d == b.dev[i] {
                        return g;
                    }
                }
            }
            _ => {}
        }
        self.group_any(b, i, h)
    }

    #[inline(never)]
    fn group_any(&mut self, b: &EventBatch, i: usize, h: &TraceHeader) -> usize {
        match self.by() {
            GroupBy::All => {
                if self.names.is_empty() {
                    self.names.push("all".into());
                }
                0
            }
            GroupBy::Proc => {
                let c = str_bytes(&b.comm, i);
                self.bytes(if c.is_empty() { b"?" } else { c })
            }
            GroupBy::Pid => self.pid_group(b, i),
            GroupBy::Syscall | GroupBy::Op => {
                let (k, n) = (b.kind[i], b.nr[i]);
                match self.ops.get(k as usize).and_then(|v| v.get(n as usize)) {
                    Some(&g) if g != u32::MAX => g as usize,
                    _ => {
                        let g = self.num(NumKey::Op(k, n), || op_name(k, n));
                        if let Some(v) = self.ops.get_mut(k as usize) {
                            if v.len() <= n as usize {
                                v.resize(n as usize + 1, u32::MAX);
                            }
                            v[n as usize] = g as u32;
                        }
                        g
                    }
                }
            }
            GroupBy::File | GroupBy::Dir => {
                if b.kind[i] == EventKind::Block as u8 {
                    return self.text("<block device>");
                }
                let p = b.path.get(i);
                if p.is_empty() {
                    let t = b.fd_type[i];
                    return self.num(NumKey::FdType(t), || unnamed(t, b.fd[i]));
                }
                if self.by() == GroupBy::Dir {
                    self.text(dir_of(p))
                } else {
                    self.bytes(str_bytes(&b.path, i))
                }
            }
            GroupBy::Disk => {
                let d = b.dev[i];
                if let Some((last, g)) = self.last_dev {
                    if last == d {
                        return g;
                    }
                }
                let t = (b.kind[i] == EventKind::Syscall as u8).then(|| b.fd_type[i]);
                let g = self.num(NumKey::Dev(d), || device_name(h, d, t));
                self.last_dev = Some((d, g));
                g
            }
            GroupBy::Client => {
                let t = FdType::from_u8(b.fd_type[i]);
                let p = b.path.get(i);
                if matches!(t, FdType::Ipv4 | FdType::Ipv6 | FdType::Unix | FdType::Socket) {
                    if let Some(peer) = peer_of(p) {
                        return self.text(peer);
                    }
                }
                self.pid_group(b, i)
            }
            GroupBy::Container | GroupBy::Pod | GroupBy::Cgroup => {
                let id = b.cgroup[i];
                if let Some(&g) = self.cgroups.get(&id) {
                    return g;
                }
                let by = self.by();
                let label = cgroup_label_of(by, self.cgroup_index.get(&h.cgroups, id), id);
                let g = self.text(&label);
                self.cgroups.insert(id, g);
                g
            }
            GroupBy::Class => {
                if b.kind[i] == EventKind::Block as u8 {
                    return 4;
                }
                match FdType::from_u8(b.fd_type[i]).io_class() {
                    "file" => 0,
                    "net" => 1,
                    "ipc" => 2,
                    _ => 3,
                }
            }
        }
    }

    /// The `comm[pid]` group of event `i`, renamed when the process's name changed (exec).
    #[inline]
    fn pid_group(&mut self, b: &EventBatch, i: usize) -> usize {
        let pid = b.pid[i];
        let g = self.num(NumKey::Pid(pid), || format!("{}[{pid}]", b.comm.get(i)));
        let comm = str_bytes(&b.comm, i);
        match self.pid_comm.get(&g) {
            Some(c) if **c == *comm => {}
            _ => {
                self.pid_comm.insert(g, comm.into());
                self.names[g] = format!("{}[{pid}]", b.comm.get(i));
            }
        }
        g
    }

    /// The group of in-kernel counts (which have no events to look at).
    pub fn group_of_key(&mut self, key: CountKey, h: &TraceHeader) -> usize {
        match key {
            CountKey::All => {
                if self.names.is_empty() {
                    self.names.push("all".into());
                }
                0
            }
            CountKey::Class(c) => self.text(c),
            CountKey::Syscall(nr) => self.num(NumKey::Op(EventKind::Syscall as u8, nr), || op_name(0, nr)),
            CountKey::Dev(d) => self.num(NumKey::Dev(d), || disk_name(h, d)),
        }
    }
}

/// The group of cgroup `id` for `--by container`, `pod` or `cgroup`, from the header's cgroup table
/// (a linear search: [`latscope_event::CgroupIndex`] looks up many).
pub fn cgroup_label(by: GroupBy, h: &TraceHeader, id: u64) -> String {
    cgroup_label_of(by, h.cgroups.iter().find(|c| c.id == id), id)
}

/// The group of cgroup `id` whose table entry is `c` (`None`: the table does not know it).
pub fn cgroup_label_of(by: GroupBy, c: Option<&latscope_event::CgroupInfo>, id: u64) -> String {
    let Some(c) = c else {
        return match by {
            _ if id <= 1 && by == GroupBy::Cgroup => "/".into(),
            GroupBy::Container if id <= 1 => "host".into(),
            GroupBy::Pod if id <= 1 => "<no pod>".into(),
            _ => format!("<cgroup {id}>"),
        };
    };
    match by {
        GroupBy::Container => c.container_label().to_string(),
        GroupBy::Pod => c.pod_label().unwrap_or_else(|| "<no pod>".into()),
        _ => c.path.clone(),
    }
}

/// The peer host of a connection name `local->peer` (`10.0.0.2:5555` -> `10.0.0.2`,
/// `[::1]:80` -> `[::1]`), if the name has one: clients are hosts, their ports are ephemeral.
pub fn peer_of(name: &str) -> Option<&str> {
    let (_, peer) = name.split_once("->")?;
    let peer = peer.trim();
    let host = match peer.rsplit_once(':') {
        Some((h, port)) if !port.is_empty() && port.bytes().all(|c| c.is_ascii_digit()) && !h.is_empty() => h,
        _ => peer,
    };
    (!host.is_empty()).then_some(host)
}

/// `/a/b` for `/a/b/c`, `/` for `/c`, `.` for a relative name without a slash.
pub fn dir_of(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) => "/",
        Some(k) => &p[..k],
        None => ".",
    }
}

fn unnamed(t: u8, fd: i32) -> String {
    let t = FdType::from_u8(t);
    if t == FdType::Unknown {
        if fd < 0 {
            "<no file>".into()
        } else {
            "<unknown fd>".into()
        }
    } else {
        format!("<{}>", t.name())
    }
}

/// A block device's name from the header (`vda`), or `major:minor`.
pub fn disk_name(h: &TraceHeader, dev: u32) -> String {
    device_name(h, dev, None)
}

/// The name of device `dev` for `--by disk`: the block device's (`vda`); for a file system without
/// one (major 0), its type and mount point from the header's mount table (`tmpfs /dev/shm`), or
/// for the kernel's internal ones, which are not mounted, the kind of file an event of it used
/// (`fd_type`): `pipefs`, `sockfs`, `anon_inodefs`; else `major:minor`.
pub fn device_name(h: &TraceHeader, dev: u32, fd_type: Option<u8>) -> String {
    if let Some(n) = h.disk_name(dev) {
        return n.to_string();
    }
    if dev == 0 {
        return "<none>".into();
    }
    // The shortest mount point of the device (bind mounts repeat it deeper).
    if let Some(m) = h.mounts.iter().filter(|m| m.dev == dev).min_by_key(|m| m.mount_point.len()) {
        return format!("{} {}", m.fstype, m.mount_point);
    }
    let (ma, mi) = dev_major_minor(dev);
    if ma == 0 {
        let internal = match fd_type.map(FdType::from_u8) {
            Some(FdType::Pipe) => Some("pipefs"),
            Some(FdType::Ipv4 | FdType::Ipv6 | FdType::Unix | FdType::Netlink | FdType::Socket) => Some("sockfs"),
            Some(FdType::Event | FdType::Eventpoll | FdType::Signalfd | FdType::Timerfd | FdType::Inotify) => {
                Some("anon_inodefs")
            }
            _ => None,
        };
        if let Some(n) = internal {
            return format!("{n} ({ma}:{mi})");
        }
    }
    format!("{ma}:{mi}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{BlockDevice, Event};

    fn batch() -> EventBatch {
        let mut b = EventBatch::with_capacity(4);
        let read = latscope_event::syscall_nr("read").unwrap();
        b.push(&Event {
            kind: 0,
            nr: read,
            comm: "cat".into(),
            pid: 7,
            path: "/etc/hosts".into(),
            fd: 3,
            fd_type: 1,
            ..Default::default()
        });
        b.push(&Event { kind: 0, nr: read, comm: "cat".into(), pid: 8, fd: 0, fd_type: 6, ..Default::default() });
        b.push(&Event { kind: 1, nr: 1, comm: "kworker".into(), dev: (254 << 20), ..Default::default() });
        b.push(&Event {
            kind: 0,
            nr: read,
            comm: "srv".into(),
            pid: 9,
            fd: 5,
            fd_type: 3,
            path: "10.0.0.1:80->10.0.0.2:5555".into(),
            ..Default::default()
        });
        b
    }

    #[test]
    fn devices_without_a_disk_are_named_by_their_mount_or_kind() {
        let h = TraceHeader {
            block_devices: vec![BlockDevice { dev: 254 << 20, name: "vda".into(), ..Default::default() }],
            mounts: vec![
                latscope_event::Mount {
                    dev: 27,
                    mount_point: "/dev/shm".into(),
                    fstype: "tmpfs".into(),
                    ..Default::default()
                },
                latscope_event::Mount {
                    dev: 27,
                    mount_point: "/run/x/dev/shm".into(),
                    fstype: "tmpfs".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(device_name(&h, 254 << 20, None), "vda");
        assert_eq!(device_name(&h, 27, Some(FdType::File as u8)), "tmpfs /dev/shm");
        assert_eq!(device_name(&h, 9, Some(FdType::Unix as u8)), "sockfs (0:9)");
        assert_eq!(device_name(&h, 15, Some(FdType::Pipe as u8)), "pipefs (0:15)");
        assert_eq!(device_name(&h, 16, Some(FdType::Eventpoll as u8)), "anon_inodefs (0:16)");
        assert_eq!(device_name(&h, 40, Some(FdType::File as u8)), "0:40");
        assert_eq!(device_name(&h, 0, None), "<none>");
        assert_eq!(device_name(&h, (8 << 20) | 1, None), "8:1");
    }

    #[test]
    fn keys() {
        let b = batch();
        let h = TraceHeader {
            block_devices: vec![BlockDevice { dev: 254 << 20, name: "vda".into(), ..Default::default() }],
            ..Default::default()
        };
        let names = |by| {
            let mut g = Grouper::new(by);
            let ids: Vec<usize> = (0..b.len()).map(|i| g.group(&b, i, &h)).collect();
            ids.iter().map(|&k| g.names()[k].clone()).collect::<Vec<_>>()
        };
        assert_eq!(names(GroupBy::Proc), ["cat", "cat", "kworker", "srv"]);
        assert_eq!(names(GroupBy::Pid), ["cat[7]", "cat[8]", "kworker[0]", "srv[9]"]);
        assert_eq!(names(GroupBy::Syscall), ["read", "read", "block_write", "read"]);
        assert_eq!(names(GroupBy::Op), ["read", "read", "block_write", "read"]);
        assert_eq!(names(GroupBy::File), ["/etc/hosts", "<pipe>", "<block device>", "10.0.0.1:80->10.0.0.2:5555"]);
        assert_eq!(names(GroupBy::Dir)[0], "/etc");
        assert_eq!(names(GroupBy::Disk)[2], "vda");
        assert_eq!(names(GroupBy::Client), ["cat[7]", "cat[8]", "kworker[0]", "10.0.0.2"]);
        assert_eq!(peer_of("[::1]:80->[::1]:41000"), Some("[::1]"));
        assert_eq!(peer_of("/run/x.sock"), None);
        assert_eq!(names(GroupBy::All), ["all", "all", "all", "all"]);
        assert!(GroupBy::parse("bogus").is_err());
        assert_eq!(dir_of("/x"), "/");
        assert_eq!(dir_of("x"), ".");
    }
}

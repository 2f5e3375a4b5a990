//! What a filter needs to know beyond the event itself: the process table, user and disk names,
//! and the trace's clocks.

use latscope_event::syscalls::{desc, SysDesc};
use latscope_event::{
    parse_sock_name, CgroupInfo, EventBatch, EventKind, FdType, ProcOp, SockEnd, SockName, TraceHeader,
};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A fast hasher for small integer keys (pids, uids, device numbers).
#[derive(Default, Clone, Copy)]
pub(crate) struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(v)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

pub(crate) type IntMap<V> = HashMap<u32, V, BuildHasherDefault<IntHasher>>;

/// Server addresses by port: the protocol and the IP (`0.0.0.0` or `::` for any address).
type Servers = HashMap<u16, Vec<(&'static str, Box<str>)>, BuildHasherDefault<IntHasher>>;

/// One process as the filter sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Proc {
    ppid: Option<u32>,
    exe: Option<String>,
    /// `proc.cmdline`: the command name, a space and the arguments (the name alone without any).
    cmdline: Option<Box<str>>,
    /// Where the arguments start in `cmdline` (`proc.args`).
    args_at: usize,
    /// The command name (`proc.pname`, `proc.aname` of descendants).
    comm: Option<Box<str>>,
}

impl Proc {
    /// Set the command line from the command name and argv joined by spaces (argv[0] first).
    fn set_cmdline(&mut self, comm: &str, argv: &str) {
        let args = argv.split_once(' ').map_or("", |(_, a)| a);
        if args.is_empty() {
            self.cmdline = Some(comm.into());
            self.args_at = comm.len();
        } else {
            self.cmdline = Some(format!("{comm} {args}").into());
            self.args_at = comm.len() + 1;
        }
    }
}

/// The two ends of a connection by role (see [`EvalContext::sock_roles`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockRoles<'a> {
    /// The server's end: the accepting or listening side.
    pub server: SockEnd<'a>,
    /// The client's end: the connecting side; `None` for a socket without a peer.
    pub client: Option<SockEnd<'a>>,
    /// Is the local end the server's?
    pub local_is_server: bool,
}

/// State a filter evaluates against: built from the [`TraceHeader`], kept up to date from the
/// process and socket events of each batch with [`EvalContext::observe`].
///
/// `proc.ppid`, `proc.exe`, `proc.cmdline` and `proc.args` come from the process table (the
/// header's processes, then forks and execs seen since), `user.name` from the header's users, `blk.disk` from its block devices,
/// `evt.time` and `evt.reltime` from its clocks, and the server and client ends of sockets
/// (`fd.sip`, `fd.cport`, ...) from the server addresses it knows (see
/// [`EvalContext::sock_roles`]).
#[derive(Debug, Clone)]
pub struct EvalContext {
    procs: IntMap<Proc>,
    /// The syscalls that name sockets (connect, accept, accept4), padded with `u16::MAX`:
    /// compared directly, so that `observe` costs next to nothing on other syscalls.
    sock_nrs: [u16; 4],
    servers: Servers,
    /// Pids whose exit was seen in the last batch (`[0]`) and the one before (`[1]`): dropped
    /// two `observe`s later, so that events that precede the exit still find their process,
    /// in the same batch and in the next one. A recording writes each flush's process events
    /// in a block of their own before its syscalls: the syscalls of a process that exited in
    /// that flush come in the block after its exit.
    exited: [Vec<u32>; 2],
    users: IntMap<String>,
    groups: IntMap<String>,
    disks: IntMap<String>,
    realtime_offset_ns: i64,
    start_ns: u64,
    /// `evt.num` of the first row of the batch observed last, less one.
    num_base: u64,
    /// Rows observed so far.
    num_next: u64,
    /// The cgroups of the header, by id (`container.*`, `k8s.*`, `cgroup.path`).
    cgroups: HashMap<u64, CgroupInfo>,
    /// The root cgroup (ids 0 and 1) when the header does not list it: the host.
    root_cgroup: CgroupInfo,
}

impl EvalContext {
    /// The context of a trace (or of a live session) described by `header`.
    pub fn new(header: &TraceHeader) -> Self {
        let mut procs = IntMap::default();
        for p in &header.processes {
            let exe = (!p.exe.is_empty()).then(|| p.exe.clone());
            let comm = (!p.comm.is_empty()).then(|| p.comm.as_str().into());
            let mut proc = Proc { ppid: Some(p.ppid), exe, comm, ..Default::default() };
            proc.set_cmdline(&p.comm, &p.cmdline);
            procs.insert(p.pid, proc);
        }
        let mut servers = HashMap::default();
        for f in &header.fds {
            if !matches!(FdType::from_u8(f.fd_type), FdType::Ipv4 | FdType::Ipv6) {
                continue;
            }
            // Listening (or bound, unconnected) sockets open at the start.
            if let Some(SockName { proto, local, peer: None }) = parse_sock_name(&f.path) {
                add_server(&mut servers, proto, local);
            }
        }
        let mut sock_nrs = [u16::MAX; 4];
        for (slot, nr) in sock_nrs
            .iter_mut()
            .zip((0..latscope_event::syscalls::syscall_count() as u16).filter(|&nr| desc(nr).has(SysDesc::SOCK)))
        {
            *slot = nr;
        }
        Self {
            procs,
            sock_nrs,
            servers,
            exited: [Vec::new(), Vec::new()],
            users: header.users.iter().map(|(&u, n)| (u, n.clone())).collect(),
            groups: header.groups.iter().map(|(&g, n)| (g, n.clone())).collect(),
            disks: header.block_devices.iter().map(|d| (d.dev, d.name.clone())).collect(),
            realtime_offset_ns: header.realtime_offset_ns,
            start_ns: header.start_ns,
            num_base: 0,
            num_next: 0,
            cgroups: header.cgroups.iter().map(|c| (c.id, c.clone())).collect(),
            root_cgroup: CgroupInfo { id: 1, path: "/".into(), ..Default::default() },
        }
    }

    /// Learn cgroups the header did not list (cgroups that appeared during the recording).
    pub fn add_cgroups(&mut self, cgroups: &[CgroupInfo]) {
        for c in cgroups {
            self.cgroups.insert(c.id, c.clone());
        }
    }

    /// The cgroup with id `id`, with its container and pod: the trace's table, or the host for
    /// the root cgroup (ids 0 and 1); `None` for cgroups the trace does not know.
    pub fn cgroup(&self, id: u64) -> Option<&CgroupInfo> {
        match self.cgroups.get(&id) {
            Some(c) => Some(c),
            None if id <= 1 => Some(&self.root_cgroup),
            None => None,
        }
    }

    /// Update the process table from the process events (kind 2) of `batch`: forks add a process
    /// (parent pid from `ret`, executable and command line inherited from the parent), execs set
    /// the executable (from `path`) and the command line (the event's command name and the
    /// arguments from `path2`, argv joined by spaces), exits remove the process at the *next* call (so events of this batch still
    /// see it). Successful `accept`/`accept4` calls make their socket's local address a server
    /// address, `connect` calls their peer's. Call once per batch, before evaluating filters on it.
    pub fn observe(&mut self, batch: &EventBatch) {
        for pid in self.exited[1].drain(..) {
            self.procs.remove(&pid);
        }
        self.exited.swap(0, 1);
        self.num_base = self.num_next;
        self.num_next += batch.kind.len() as u64;
        // Most blocks hold neither process events nor connects and accepts: find the chunks
        // that do with a branch-free (vectorised) pass, and look at their rows only.
        const CHUNK: usize = 64;
        let [s0, s1, s2, s3] = self.sock_nrs;
        let (proc_kind, sys_kind) = (EventKind::Proc as u8, EventKind::Syscall as u8);
        for (c, (kinds, nrs)) in batch.kind.chunks(CHUNK).zip(batch.nr.chunks(CHUNK)).enumerate() {
            let hit = kinds
                .iter()
                .zip(nrs)
                .fold(false, |acc, (&k, &n)| acc | (k == proc_kind) | (n == s0) | (n == s1) | (n == s2) | (n == s3));
            if !hit {
                continue;
            }
            for (i, (&kind, &nr)) in kinds.iter().zip(nrs).enumerate() {
                let row = c * CHUNK + i;
                if kind == sys_kind {
                    if self.sock_nrs.contains(&nr) {
                        self.observe_socket(batch, row);
                    }
                } else if kind == proc_kind {
                    self.observe_proc(batch, row);
                }
            }
        }
    }

    /// fork, exec, exit: update the process table.
    fn observe_proc(&mut self, batch: &EventBatch, row: usize) {
        let (Some(&pid), Some(&nr)) = (batch.pid.get(row), batch.nr.get(row)) else { return };
        match ProcOp::from_u16(nr) {
            Some(ProcOp::Fork) => {
                // The child runs its parent's program with its parent's arguments.
                let parent = batch.ret.get(row).and_then(|&r| u32::try_from(r).ok());
                let mut child = parent.and_then(|pp| self.procs.get(&pp)).cloned().unwrap_or_default();
                child.ppid = parent;
                self.procs.insert(pid, child);
                for e in &mut self.exited {
                    e.retain(|&p| p != pid);
                }
            }
            Some(ProcOp::Exec) => {
                let exe = crate::helpers::str_at(&batch.path, row).unwrap_or_default();
                let argv = crate::helpers::str_at(&batch.path2, row).unwrap_or_default();
                let comm = crate::helpers::str_at(&batch.comm, row).unwrap_or_default();
                let entry = self.procs.entry(pid).or_default();
                entry.exe = (!exe.is_empty()).then(|| exe.to_string());
                entry.comm = (!comm.is_empty()).then(|| comm.into());
                // Traces without the exec's argv: the arguments are unknown, not empty.
                if argv.is_empty() {
                    entry.cmdline = None;
                } else {
                    entry.set_cmdline(comm, argv);
                }
            }
            Some(ProcOp::Exit) => self.exited[0].push(pid),
            Some(ProcOp::Times | ProcOp::Sample) | None => {}
        }
    }

    /// connect/accept: learn the server's address from the socket's name.
    #[inline]
    fn observe_socket(&mut self, batch: &EventBatch, row: usize) {
        let Some(&nr) = batch.nr.get(row) else { return };
        let d = desc(nr);
        if !d.has(SysDesc::SOCK) {
            return;
        }
        let ret = batch.ret.get(row).copied().unwrap_or(-1);
        let accept = d.has(SysDesc::RET_FD);
        // connect: also a non-blocking one in progress (EINPROGRESS).
        if !(ret >= 0 || (!accept && ret == -115)) {
            return;
        }
        let Some(name) = crate::helpers::str_at(&batch.path, row).and_then(parse_sock_name) else { return };
        let end = if accept { Some(name.local) } else { name.peer };
        if let Some(end) = end {
            add_server(&mut self.servers, name.proto, end);
        }
    }

    /// Is `end` (of a socket of protocol `proto`) a server address: a listening socket of the
    /// start snapshot, the local end of an accepted connection or the peer of a connect seen so
    /// far (same port, same address or a listener on any address)?
    fn is_server(&self, proto: &str, end: &SockEnd<'_>) -> bool {
        self.servers
            .get(&end.port)
            .is_some_and(|v| v.iter().any(|(p, ip)| *p == proto && (is_any(ip) || **ip == *end.ip)))
    }

    /// Which end of socket `name` is the server's (sysdig's roles: the server accepts or listens,
    /// the client connects). A socket without a peer (listening or unconnected) is a server. For
    /// a connection: the end at a known server address (see `is_server`), the local one first;
    /// when neither is known, the end with the lower port (services listen on low or registered
    /// ports, clients get ephemeral ones, 32768-60999 by default on Linux); on equal ports, the peer.
    pub fn sock_roles<'a>(&self, name: &SockName<'a>) -> SockRoles<'a> {
        let Some(peer) = name.peer else {
            return SockRoles { server: name.local, client: None, local_is_server: true };
        };
        let local_is_server = if self.is_server(name.proto, &name.local) {
            true
        } else if self.is_server(name.proto, &peer) {
            false
        } else {
            name.local.port < peer.port
        };
        if local_is_server {
            SockRoles { server: name.local, client: Some(peer), local_is_server }
        } else {
            SockRoles { server: peer, client: Some(name.local), local_is_server }
        }
    }

    /// Parent pid of `pid`, if known.
    pub(crate) fn ppid(&self, pid: u32) -> Option<u32> {
        self.procs.get(&pid)?.ppid
    }
    /// Executable of `pid`, if known.
    pub(crate) fn exe(&self, pid: u32) -> Option<&str> {
        self.procs.get(&pid)?.exe.as_deref()
    }
    /// `proc.cmdline` of `pid` (command name and arguments), if known.
    pub(crate) fn cmdline(&self, pid: u32) -> Option<&str> {
        self.procs.get(&pid)?.cmdline.as_deref()
    }
    /// `proc.args` of `pid`, if known.
    pub(crate) fn args(&self, pid: u32) -> Option<&str> {
        let p = self.procs.get(&pid)?;
        p.cmdline.as_deref()?.get(p.args_at..)
    }
    /// Command name of `pid`, if known.
    pub(crate) fn comm(&self, pid: u32) -> Option<&str> {
        self.procs.get(&pid)?.comm.as_deref()
    }
    /// `evt.num` of row `row` of the batch observed last: rows count from 1 across batches.
    pub(crate) fn event_number(&self, row: usize) -> i128 {
        i128::from(self.num_base) + row as i128 + 1
    }
    /// User name of `uid`, if known.
    pub(crate) fn user(&self, uid: u32) -> Option<&str> {
        self.users.get(&uid).map(String::as_str)
    }

    /// Group name of `gid`, if known.
    pub(crate) fn group(&self, gid: u32) -> Option<&str> {
        self.groups.get(&gid).map(String::as_str)
    }
    /// Name of block device `dev`, if known.
    pub(crate) fn disk(&self, dev: u32) -> Option<&str> {
        self.disks.get(&dev).map(String::as_str)
    }
    /// Wall-clock ns of a monotonic timestamp.
    pub(crate) fn wall(&self, ts: u64) -> i128 {
        i128::from(ts) + i128::from(self.realtime_offset_ns)
    }
    /// ns since the start of the trace.
    pub(crate) fn rel(&self, ts: u64) -> i128 {
        i128::from(ts) - i128::from(self.start_ns)
    }
}

impl Default for EvalContext {
    /// The context of an empty header: no processes, users, disks or clock offset.
    fn default() -> Self {
        EvalContext::new(&TraceHeader::default())
    }
}

/// `0.0.0.0` or `::`: a listener on every address.
fn is_any(ip: &str) -> bool {
    ip == "0.0.0.0" || ip == "::"
}

fn add_server(servers: &mut Servers, proto: &'static str, end: SockEnd<'_>) {
    if end.port == 0 {
        return;
    }
    let v = servers.entry(end.port).or_default();
    if !v.iter().any(|(p, ip)| *p == proto && **ip == *end.ip) {
        v.push((proto, end.ip.into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{BlockDevice, Event, ProcessInfo};

    #[test]
    fn header_and_proc_events() {
        let h = TraceHeader {
            processes: vec![ProcessInfo { pid: 10, ppid: 1, exe: "/usr/bin/bash".into(), ..Default::default() }],
            users: [(0, "root".to_string())].into_iter().collect(),
            block_devices: vec![BlockDevice { dev: 8 << 20, name: "sda".into(), ..Default::default() }],
            realtime_offset_ns: 1000,
            start_ns: 50,
            ..Default::default()
        };
        let mut c = EvalContext::new(&h);
        assert_eq!(
            (c.ppid(10), c.exe(10), c.user(0), c.disk(8 << 20)),
            (Some(1), Some("/usr/bin/bash"), Some("root"), Some("sda"))
        );
        assert_eq!((c.wall(5), c.rel(40)), (1005, -10));
        let mut b = EventBatch::with_capacity(4);
        let p = |nr, pid, ret, path: &str| Event {
            kind: 2,
            nr,
            pid,
            tid: pid,
            ret,
            path: path.into(),
            ..Default::default()
        };
        b.push(&p(0, 11, 10, ""));
        b.push(&p(1, 11, 0, "/usr/bin/cat"));
        b.push(&p(0, 12, 10, ""));
        b.push(&p(2, 12, 0, ""));
        c.observe(&b);
        assert_eq!((c.ppid(11), c.exe(11)), (Some(10), Some("/usr/bin/cat")));
        // The exit is applied two batches later: the next batch (a recording's syscall block
        // after its process block) still sees the process.
        assert_eq!((c.ppid(12), c.exe(12)), (Some(10), Some("/usr/bin/bash")));
        c.observe(&EventBatch::default());
        assert_eq!(c.ppid(12), Some(10));
        c.observe(&EventBatch::default());
        assert_eq!(c.ppid(12), None);
        assert_eq!(c.ppid(11), Some(10));
    }

    /// Process and socket events are found wherever they are in a batch (across the chunks
    /// observe scans first).
    #[test]
    fn observe_finds_events_in_every_chunk() {
        let mut c = EvalContext::default();
        let mut b = EventBatch::default();
        let connect = latscope_event::syscall_nr("connect").unwrap();
        for i in 0..200u32 {
            let e = match i {
                63 => Event { kind: 2, nr: 0, pid: 500, ret: 1, ..Default::default() },
                64 => Event {
                    kind: 0,
                    nr: connect,
                    fd_type: latscope_event::FdType::Ipv4 as u8,
                    path: "10.0.0.1:40000->10.0.0.2:50000".into(),
                    ..Default::default()
                },
                199 => Event { kind: 2, nr: 0, pid: 501, ret: 1, ..Default::default() },
                _ => {
                    Event { kind: if i % 3 == 0 { 1 } else { 0 }, nr: 42 + (i % 2) as u16 * 1000, ..Default::default() }
                }
            };
            b.push(&e);
        }
        c.observe(&b);
        assert_eq!((c.ppid(500), c.ppid(501)), (Some(1), Some(1)));
        let name = parse_sock_name("10.0.0.2:50000->10.0.0.1:40000").unwrap();
        assert!(c.sock_roles(&name).local_is_server, "the connect's peer is a server address");
    }

    #[test]
    fn every_socket_naming_syscall_is_watched() {
        let c = EvalContext::default();
        let socks: Vec<u16> =
            (0..latscope_event::syscalls::syscall_count() as u16).filter(|&nr| desc(nr).has(SysDesc::SOCK)).collect();
        assert!(socks.len() < c.sock_nrs.len(), "{socks:?}");
        assert!(socks.iter().all(|nr| c.sock_nrs.contains(nr)));
        let names: Vec<_> = socks.iter().filter_map(|&nr| latscope_event::syscall_name(nr)).collect();
        assert_eq!(names, ["connect", "accept", "accept4"]);
    }

    #[test]
    fn command_lines_follow_forks_and_execs() {
        let h = TraceHeader {
            processes: vec![ProcessInfo {
                pid: 10,
                comm: "bash".into(),
                cmdline: "-bash".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut c = EvalContext::new(&h);
        assert_eq!((c.cmdline(10), c.args(10)), (Some("bash"), Some("")));
        let ev = |nr, ret, comm: &str, argv: &str| Event {
            kind: 2,
            nr,
            pid: 11,
            ret,
            comm: comm.into(),
            path2: argv.into(),
            ..Default::default()
        };
        let mut b = EventBatch::default();
        b.push(&ev(0, 10, "bash", ""));
        c.observe(&b);
        assert_eq!((c.cmdline(11), c.args(11)), (Some("bash"), Some("")));
        let mut b = EventBatch::default();
        b.push(&ev(1, 0, "python3", "/usr/bin/python3 -m http.server 8000"));
        c.observe(&b);
        assert_eq!((c.cmdline(11), c.args(11)), (Some("python3 -m http.server 8000"), Some("-m http.server 8000")));
        // An exec without its argv (older traces): unknown, not the previous program's.
        let mut b = EventBatch::default();
        b.push(&ev(1, 0, "sleep", ""));
        c.observe(&b);
        assert_eq!((c.cmdline(11), c.args(11)), (None, None));
        assert_eq!(c.cmdline(12), None);
    }
}

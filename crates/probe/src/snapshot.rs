//! A snapshot of the machine being recorded: clocks, mounts, block devices,
//! processes and their open files. It goes into the trace header so that a
//! trace can be read (and replayed) on another machine.
//!
//! Every file is read through [`latscope_trace::safe_read`]: regular files only (a FIFO or a
//! device is refused without blocking), a bounded number of bytes each ([`read_text`]).

use latscope_event::bounds::{cut_read, MAX_CMDLINE, MAX_PATH};
use latscope_event::{
    BlockDevice, FdInfo, FdType, Mount, ProcessInfo, SyscallSet, TraceHeader, Truncation, TRACE_FORMAT_VERSION,
};
use latscope_trace::safe_read;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;

/// Pack a user-space `dev_t` into the kernel's `major << 20 | minor` form the probes report.
pub fn kdev(st_dev: u64) -> u32 {
    let major = libc::major(st_dev);
    let minor = libc::minor(st_dev);
    (major << 20) | (minor & 0xfffff)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC now, in ns (the probes' clock).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Wall-clock minus monotonic, in ns: add it to a probe timestamp to get epoch ns.
pub fn realtime_offset_ns() -> i64 {
    // Take the smaller of a few readings' spans so a preemption between the two reads does not skew it.
    let mut best = (u64::MAX, 0i64);
    for _ in 0..5 {
        let a = clock_ns(libc::CLOCK_MONOTONIC);
        let r = clock_ns(libc::CLOCK_REALTIME);
        let b = clock_ns(libc::CLOCK_MONOTONIC);
        if b - a < best.0 {
            best = (b - a, r as i64 - ((a + b) / 2) as i64);
        }
    }
    best.1
}

/// Bytes read of a /proc or /sys file by default: their text is short (a status, a number).
pub(crate) const SMALL: usize = 64 << 10;
/// Bytes read of a table that grows with the machine (mountinfo, /proc/net/*, /etc/passwd):
/// a bound far above real ones; a longer one is read to there.
pub(crate) const TABLE: usize = 32 << 20;

/// The text of the regular file `path`, at most `max` bytes of it (invalid UTF-8 replaced),
/// not following a symlink at its last component; `None` when it cannot be read or is not a
/// regular file.
pub(crate) fn read_text(path: &str, max: usize) -> Option<String> {
    safe_read::read_file(path, max).ok().map(|b| b.text().into_owned())
}

fn read_trim(path: &str) -> Option<String> {
    read_text(path, SMALL).map(|s| s.trim().to_string())
}

/// Host name, kernel release and machine (`uname -n -r -m`).
pub fn uname() -> (String, String, String) {
    // SAFETY: uname fills the struct we own.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    unsafe { libc::uname(&mut u) };
    let s = |a: &[libc::c_char]| {
        let b: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    (s(&u.nodename), s(&u.release), s(&u.machine))
}

/// Mounts from /proc/self/mountinfo (device numbers included, unlike /proc/mounts).
pub fn mounts() -> Vec<Mount> {
    let Some(text) = read_text("/proc/self/mountinfo", TABLE) else { return Vec::new() };
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split(' ').collect();
            let r: Vec<&str> = right.split(' ').collect();
            let (maj, min) = f.get(2)?.split_once(':')?;
            let dev = (maj.parse::<u32>().ok()? << 20) | min.parse::<u32>().ok()?;
            Some(Mount {
                dev,
                mount_point: unescape(f.get(4)?),
                fstype: r.first()?.to_string(),
                source: unescape(r.get(1).unwrap_or(&"")),
                options: f.get(5).unwrap_or(&"").to_string(),
            })
        })
        .collect()
}

/// A path or source field of /proc/self/mountinfo with its octal escapes undone (the kernel
/// writes space, tab, newline and backslash as `\ooo`).
pub(crate) fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        // Three octal digits of at most 0o377.
        let esc = b[i] == b'\\'
            && i + 3 < b.len()
            && (b'0'..=b'3').contains(&b[i + 1])
            && b[i + 2..i + 4].iter().all(|c| (b'0'..=b'7').contains(c));
        if esc {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Block devices from /sys/class/block.
pub fn block_devices() -> Vec<BlockDevice> {
    let Ok(dir) = fs::read_dir("/sys/class/block") else { return Vec::new() };
    let mut v: Vec<BlockDevice> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let base = format!("/sys/class/block/{name}");
            let (maj, min) =
                read_trim(&format!("{base}/dev"))?.split_once(':').map(|(a, b)| (a.to_string(), b.to_string()))?;
            let dev = (maj.parse::<u32>().ok()? << 20) | min.parse::<u32>().ok()?;
            let sectors: u64 = read_trim(&format!("{base}/size")).and_then(|s| s.parse().ok()).unwrap_or(0);
            let is_part = fs::metadata(format!("{base}/partition")).is_ok();
            let parent = if is_part {
                fs::canonicalize(&base)
                    .ok()
                    .and_then(|p| p.parent().and_then(|pp| pp.file_name()).map(|n| n.to_string_lossy().into_owned()))
            } else {
                None
            };
            let scheduler = read_trim(&format!("{base}/queue/scheduler")).and_then(|s| {
                s.split_whitespace()
                    .find(|w| w.starts_with('['))
                    .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
            });
            let rotational = read_trim(&format!("{base}/queue/rotational")).as_deref() == Some("1");
            Some(BlockDevice { dev, name, size_bytes: sectors * 512, scheduler, rotational, parent })
        })
        .collect();
    v.sort_by_key(|d| d.dev);
    v
}

/// One process from /proc/PID.
pub fn process(pid: u32) -> Option<ProcessInfo> {
    process_bounded(pid, &mut Truncation::default())
}

/// The command line of a process, arguments joined by spaces, read up to
/// [`latscope_event::bounds::MAX_CMDLINE`] bytes (its owner chooses its length: megabytes are a
/// few `execve` arguments away); a longer one is cut with a marker, counted in `t`.
fn cmdline(path: &str, t: &mut Truncation) -> String {
    use std::io::Read;
    let Ok(mut f) = safe_read::open_file(path) else { return String::new() };
    let mut buf = Vec::new();
    let _ = (&mut f).take(MAX_CMDLINE as u64).read_to_end(&mut buf);
    let unread = std::io::copy(&mut f, &mut std::io::sink()).unwrap_or(0);
    let mut s = buf
        .split(|&c| c == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    cut_read(&mut s, MAX_CMDLINE, unread, t);
    s
}

/// [`process`], counting what was cut to its bounds in `t`.
pub fn process_bounded(pid: u32, t: &mut Truncation) -> Option<ProcessInfo> {
    let base = format!("/proc/{pid}");
    let status = read_text(&format!("{base}/status"), SMALL)?;
    let mut p = ProcessInfo { pid, ..Default::default() };
    for l in status.lines() {
        if let Some(v) = l.strip_prefix("Name:\t") {
            p.comm = v.to_string();
        } else if let Some(v) = l.strip_prefix("PPid:\t") {
            p.ppid = v.trim().parse().unwrap_or(0);
        } else if let Some(v) = l.strip_prefix("Uid:\t") {
            p.uid = v.split_whitespace().next().and_then(|x| x.parse().ok()).unwrap_or(0);
        }
    }
    p.exe = fs::read_link(format!("{base}/exe")).map(|x| x.to_string_lossy().into_owned()).unwrap_or_default();
    p.cwd = fs::read_link(format!("{base}/cwd")).map(|x| x.to_string_lossy().into_owned()).unwrap_or_default();
    p.cmdline = cmdline(&format!("{base}/cmdline"), t);
    p.bound(MAX_CMDLINE, MAX_PATH, t);
    Some(p)
}

/// Every process's numeric pid under /proc.
pub fn pids() -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else { return Vec::new() };
    let mut v: Vec<u32> = dir.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
    v.sort_unstable();
    v
}

/// Open file descriptors of one process; sockets are looked up in `sockets` (see [`sockets`]).
pub fn fds_of(pid: u32, sockets: &Sockets) -> Vec<FdInfo> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| {
            let fd: i32 = e.file_name().to_str()?.parse().ok()?;
            let link = fs::read_link(e.path()).ok()?.to_string_lossy().into_owned();
            let md = fs::metadata(e.path()).ok();
            let is_dir = md.as_ref().map(|m| m.is_dir()).unwrap_or(false);
            let (dev, ino) = md.as_ref().map(|m| (kdev(m.dev()), m.ino())).unwrap_or((0, 0));
            let mut t = FdType::from_proc_link(&link, is_dir);
            let mut path = link;
            if t == FdType::Socket {
                if let Some((family, name)) = sockets.get(&ino) {
                    t = *family;
                    if let Some(n) = name {
                        path = n.clone(); // `local->peer`, as connect/accept events name sockets
                    }
                }
            }
            let (pos, flags) = fdinfo(pid, fd).unwrap_or((-1, 0));
            Some(FdInfo { pid, fd, path, fd_type: t as u8, dev, ino, pos, flags })
        })
        .collect()
}

/// File position and open flags of one fd, from /proc/PID/fdinfo/FD (`pos:` decimal, `flags:`
/// octal, O_CLOEXEC included).
pub fn fdinfo(pid: u32, fd: i32) -> Option<(i64, u32)> {
    parse_fdinfo(&read_text(&format!("/proc/{pid}/fdinfo/{fd}"), SMALL)?)
}

fn parse_fdinfo(text: &str) -> Option<(i64, u32)> {
    let (mut pos, mut flags) = (None, None);
    for l in text.lines() {
        if let Some(v) = l.strip_prefix("pos:") {
            pos = v.trim().parse().ok();
        } else if let Some(v) = l.strip_prefix("flags:") {
            flags = u32::from_str_radix(v.trim(), 8).ok();
        }
    }
    Some((pos?, flags?))
}

/// Socket inode -> family and, for IP sockets, the name (`local->peer`, see
/// [`latscope_event::sock_name`]); for bound unix sockets, their path.
pub type Sockets = BTreeMap<u64, (FdType, Option<String>)>;

/// The sockets of the /proc/net tables, read now.
pub fn sockets() -> Sockets {
    let mut m = BTreeMap::new();
    for (file, t, proto, col) in [
        ("/proc/net/tcp", FdType::Ipv4, "tcp", 9),
        ("/proc/net/udp", FdType::Ipv4, "udp", 9),
        ("/proc/net/udplite", FdType::Ipv4, "udplite", 9),
        ("/proc/net/tcp6", FdType::Ipv6, "tcp", 9),
        ("/proc/net/udp6", FdType::Ipv6, "udp", 9),
        ("/proc/net/udplite6", FdType::Ipv6, "udplite", 9),
        ("/proc/net/unix", FdType::Unix, "", 6),
        ("/proc/net/netlink", FdType::Netlink, "", 9),
    ] {
        if let Some(s) = read_text(file, TABLE) {
            for l in s.lines().skip(1) {
                let f: Vec<&str> = l.split_whitespace().collect();
                if let Some(i) = f.get(col).and_then(|x| x.parse::<u64>().ok()) {
                    let name = match t {
                        FdType::Ipv4 | FdType::Ipv6 => proc_net_name(proto, f.get(1).copied(), f.get(2).copied()),
                        // A bound unix socket (and the sockets accepted on it): its path (`@...`
                        // for an abstract one).
                        FdType::Unix => f.get(7).map(|p| p.to_string()),
                        _ => None,
                    };
                    m.insert(i, (t, name));
                }
            }
        }
    }
    m
}

/// The socket's name (`local->peer`, or `local` for a listening or unconnected socket; the
/// protocol first unless it is `tcp`) from the address columns of /proc/net/tcp*, udp*:
/// `0100007F:1F90` (IPv4) or 32 hex digits (IPv6), each 32-bit word in the kernel's byte order,
/// then the port.
fn proc_net_name(proto: &str, local: Option<&str>, remote: Option<&str>) -> Option<String> {
    fn parse(s: &str) -> Option<(std::net::IpAddr, u16)> {
        let (a, p) = s.split_once(':')?;
        let port = u16::from_str_radix(p, 16).ok()?;
        let mut bytes = Vec::with_capacity(16);
        for i in (0..a.len()).step_by(8) {
            bytes.extend_from_slice(&u32::from_str_radix(a.get(i..i + 8)?, 16).ok()?.to_ne_bytes());
        }
        let ip = match bytes.len() {
            4 => std::net::IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?),
            16 => std::net::IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?),
            _ => return None,
        };
        Some((ip, port))
    }
    let (lip, lport) = parse(local?)?;
    let (rip, rport) = parse(remote?)?;
    let peer = (rport != 0 || !rip.is_unspecified()).then_some((rip, rport));
    Some(latscope_event::sock_name(proto, (lip, lport), peer))
}

/// User names by uid from /etc/passwd.
pub fn users() -> BTreeMap<u32, String> {
    names_by_id("/etc/passwd")
}

/// Group names by gid from /etc/group.
pub fn groups() -> BTreeMap<u32, String> {
    names_by_id("/etc/group")
}

/// `name:x:ID:...` lines of a passwd-format file, by id.
fn names_by_id(path: &str) -> BTreeMap<u32, String> {
    // Root's own files, which some systems make links: followed.
    safe_read::read_file_following(path, TABLE)
        .map(|b| b.text().into_owned())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((f.get(2)?.parse().ok()?, f.first()?.to_string()))
        })
        .collect()
}

/// The full header for a recording that starts now.
pub fn take(command_line: Vec<String>, syscalls: SyscallSet, block: bool, filter: Option<String>) -> TraceHeader {
    let (hostname, kernel, machine) = uname();
    let realtime_offset_ns = realtime_offset_ns();
    let start_ns = monotonic_ns();
    let boottime = clock_ns(libc::CLOCK_BOOTTIME);
    let boot_time_ns = (clock_ns(libc::CLOCK_REALTIME)).saturating_sub(boottime);
    let pids = pids();
    let mut truncated = Truncation::default();
    let processes: Vec<ProcessInfo> = pids.iter().filter_map(|&p| process_bounded(p, &mut truncated)).collect();
    let socks = sockets();
    let fds: Vec<FdInfo> = pids.iter().flat_map(|&p| fds_of(p, &socks)).collect();
    let mut h = TraceHeader {
        format_version: TRACE_FORMAT_VERSION,
        latscope_version: env!("CARGO_PKG_VERSION").to_string(),
        hostname,
        kernel,
        machine,
        cpus: std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1),
        boot_time_ns,
        realtime_offset_ns,
        start_ns,
        command_line,
        syscalls: syscalls.name().to_string(),
        block,
        filter,
        mounts: mounts(),
        block_devices: block_devices(),
        processes,
        fds,
        users: users(),
        capture: Vec::new(),
        cgroups: crate::containers::snapshot(),
        groups: groups(),
        flight: None,
        truncated,
    };
    // Names of containers, users and files come from files anyone may write: each within its
    // bound for live views too (the trace writer also bounds the whole header).
    h.bound_fields();
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_sees_this_process() {
        let me = std::process::id();
        let h = take(vec!["test".into()], SyscallSet::All, true, None);
        let p = h.processes.iter().find(|p| p.pid == me).expect("own process in the table");
        assert!(!p.comm.is_empty());
        assert!(h.fds.iter().any(|f| f.pid == me && f.fd == 0));
        assert!(h.mounts.iter().any(|m| m.mount_point == "/"));
        assert!(!h.hostname.is_empty());
        // monotonic + offset is close to now (within a minute: clocks, not wall time, are compared)
        let wall = h.wall_ns(monotonic_ns());
        let now = clock_ns(libc::CLOCK_REALTIME) as i64;
        assert!((wall - now).abs() < 60_000_000_000);
    }

    /// A bound unix socket, and the fds of it in the snapshot, are named by its path.
    #[test]
    fn bound_unix_sockets_are_named_by_their_path() {
        use std::os::fd::AsRawFd;
        let path = std::env::temp_dir().join(format!("latscope-snap-{}.sock", std::process::id()));
        let _ = fs::remove_file(&path);
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let link = fs::read_link(format!("/proc/self/fd/{}", l.as_raw_fd())).unwrap();
        let ino: u64 = link.to_str().unwrap().trim_start_matches("socket:[").trim_end_matches(']').parse().unwrap();
        let socks = sockets();
        assert_eq!(socks.get(&ino), Some(&(FdType::Unix, Some(path.display().to_string()))));
        let fds = fds_of(std::process::id(), &socks);
        let f = fds.iter().find(|f| f.fd == l.as_raw_fd()).expect("the socket's fd");
        assert_eq!(f.path, path.display().to_string());
        drop(l);
        let _ = fs::remove_file(&path);
    }

    /// The position and flags of an fd open before the snapshot, O_APPEND and O_CLOEXEC included.
    #[test]
    fn snapshot_fds_have_position_and_flags() {
        use std::io::{Seek, Write};
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let dir = std::env::temp_dir().join(format!("latscope-snap-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(dir.join("a"))
            .unwrap();
        f.write_all(b"hello world").unwrap();
        let mut r = fs::File::open(dir.join("a")).unwrap();
        r.seek(std::io::SeekFrom::Start(6)).unwrap();
        let fds = fds_of(std::process::id(), &sockets());
        let of = |fd: i32| fds.iter().find(|x| x.fd == fd).unwrap().clone();
        let (w, rd) = (of(f.as_raw_fd()), of(r.as_raw_fd()));
        assert_eq!(w.pos, 11);
        assert_eq!(w.flags & 0o3, libc::O_WRONLY as u32);
        let want = (libc::O_APPEND | libc::O_NONBLOCK | libc::O_CLOEXEC) as u32;
        assert_eq!(w.flags & want, want, "{:o}", w.flags);
        assert_eq!((rd.pos, rd.flags & 0o3), (6, libc::O_RDONLY as u32));
        assert_eq!(parse_fdinfo("pos:\t42\nflags:\t02100002\nmnt_id:\t30\n"), Some((42, 0o2100002)));
        assert_eq!(parse_fdinfo("garbage"), None);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn proc_net_addresses() {
        // /proc/net/tcp prints each 32-bit word of the address in the kernel's byte order.
        let lo = format!("{:08X}", u32::from_ne_bytes([127, 0, 0, 1]));
        assert_eq!(
            proc_net_name("tcp", Some(&format!("{lo}:1F90")), Some(&format!("{lo}:D431"))).as_deref(),
            Some("127.0.0.1:8080->127.0.0.1:54321")
        );
        assert_eq!(proc_net_name("tcp", Some("00000000:0016"), Some("00000000:0000")).as_deref(), Some("0.0.0.0:22"));
        assert_eq!(
            proc_net_name("udp", Some("00000000:0035"), Some("00000000:0000")).as_deref(),
            Some("udp:0.0.0.0:53")
        );
        let one = format!("{:08X}", u32::from_ne_bytes([0, 0, 0, 1]));
        let v6_lo = format!("000000000000000000000000{one}");
        assert_eq!(
            proc_net_name("tcp", Some(&format!("{v6_lo}:0050")), Some(&format!("{}:0000", "0".repeat(32)))).as_deref(),
            Some("[::1]:80")
        );
        assert_eq!(proc_net_name("tcp", Some("zz:1"), Some("00000000:0000")), None);
    }

    /// A TCP connection open before the snapshot is named by its addresses on both ends.
    #[test]
    fn snapshot_names_open_tcp_connections() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        use std::os::fd::AsRawFd;
        let fds = fds_of(std::process::id(), &sockets());
        let name = |fd: i32| fds.iter().find(|f| f.fd == fd).map(|f| f.path.clone()).unwrap();
        let (lp, cp) = (l.local_addr().unwrap().port(), c.local_addr().unwrap().port());
        assert_eq!(name(l.as_raw_fd()), format!("127.0.0.1:{lp}"));
        assert_eq!(name(c.as_raw_fd()), format!("127.0.0.1:{cp}->127.0.0.1:{lp}"));
        assert_eq!(name(a.as_raw_fd()), format!("127.0.0.1:{lp}->127.0.0.1:{cp}"));
        // UDP sockets carry their protocol; an unconnected one has no peer.
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let v = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        v.connect(u.local_addr().unwrap()).unwrap();
        let fds = fds_of(std::process::id(), &sockets());
        let name = |fd: i32| fds.iter().find(|f| f.fd == fd).map(|f| f.path.clone()).unwrap();
        let (up, vp) = (u.local_addr().unwrap().port(), v.local_addr().unwrap().port());
        assert_eq!(name(u.as_raw_fd()), format!("udp:127.0.0.1:{up}"));
        assert_eq!(name(v.as_raw_fd()), format!("udp:127.0.0.1:{vp}->127.0.0.1:{up}"));
    }

    #[test]
    fn mountinfo_unescape() {
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/x\\"), "/x\\");
        assert_eq!(unescape("/end\\04"), "/end\\04");
        assert_eq!(unescape("/not\\400octal\\08"), "/not\\400octal\\08");
    }
}

//! File descriptor types, named as sysdig's `fd.type` names them.

/// What a file descriptor refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum FdType {
    /// Not known (no fd, or not resolved).
    #[default]
    Unknown = 0,
    /// Regular file.
    File = 1,
    /// Directory.
    Directory = 2,
    /// IPv4 socket.
    Ipv4 = 3,
    /// IPv6 socket.
    Ipv6 = 4,
    /// Unix domain socket.
    Unix = 5,
    /// Pipe or FIFO.
    Pipe = 6,
    /// eventfd.
    Event = 7,
    /// signalfd.
    Signalfd = 8,
    /// epoll instance.
    Eventpoll = 9,
    /// inotify instance.
    Inotify = 10,
    /// timerfd.
    Timerfd = 11,
    /// memfd.
    Memfd = 12,
    /// Character device.
    Chardev = 13,
    /// Block device.
    Blockdev = 14,
    /// Netlink socket.
    Netlink = 15,
    /// Socket of another family.
    Socket = 16,
    /// Other anonymous inode (bpf, io_uring, pidfd, ...).
    Anon = 17,
}

impl FdType {
    /// Every type, in code order.
    pub const ALL: [FdType; 18] = [
        Self::Unknown,
        Self::File,
        Self::Directory,
        Self::Ipv4,
        Self::Ipv6,
        Self::Unix,
        Self::Pipe,
        Self::Event,
        Self::Signalfd,
        Self::Eventpoll,
        Self::Inotify,
        Self::Timerfd,
        Self::Memfd,
        Self::Chardev,
        Self::Blockdev,
        Self::Netlink,
        Self::Socket,
        Self::Anon,
    ];

    /// Decode the stored byte (unknown values map to `Unknown`).
    pub fn from_u8(v: u8) -> Self {
        Self::ALL.get(v as usize).copied().unwrap_or(Self::Unknown)
    }
    /// The sysdig-style name (`file`, `ipv4`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::File => "file",
            Self::Directory => "directory",
            Self::Ipv4 => "ipv4",
            Self::Ipv6 => "ipv6",
            Self::Unix => "unix",
            Self::Pipe => "pipe",
            Self::Event => "event",
            Self::Signalfd => "signalfd",
            Self::Eventpoll => "eventpoll",
            Self::Inotify => "inotify",
            Self::Timerfd => "timerfd",
            Self::Memfd => "memfd",
            Self::Chardev => "chardev",
            Self::Blockdev => "blockdev",
            Self::Netlink => "netlink",
            Self::Socket => "socket",
            Self::Anon => "anon",
        }
    }
    /// Parse a name as printed by [`FdType::name`].
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|t| t.name() == s)
    }
    /// The I/O class used by split views: disk (files, block devices), net, ipc, other.
    pub fn io_class(self) -> &'static str {
        match self {
            Self::File | Self::Directory | Self::Blockdev | Self::Memfd => "file",
            Self::Ipv4 | Self::Ipv6 | Self::Socket | Self::Netlink => "net",
            Self::Unix | Self::Pipe | Self::Event | Self::Signalfd => "ipc",
            _ => "other",
        }
    }
    /// The type a `/proc/PID/fd/N` link target names (`socket:[123]`, `pipe:[4]`, `anon_inode:[eventfd]`).
    /// Sockets need the family, which the link does not show: they map to `Socket`.
    pub fn from_proc_link(target: &str, is_dir: bool) -> Self {
        if target.starts_with("socket:") {
            Self::Socket
        } else if target.starts_with("pipe:") {
            Self::Pipe
        } else if let Some(rest) = target.strip_prefix("anon_inode:") {
            match rest.trim_matches(|c| c == '[' || c == ']') {
                "eventfd" => Self::Event,
                "signalfd" => Self::Signalfd,
                "eventpoll" => Self::Eventpoll,
                "inotify" => Self::Inotify,
                "timerfd" => Self::Timerfd,
                _ => Self::Anon,
            }
        } else if target.starts_with("/memfd:") {
            Self::Memfd
        } else if target.starts_with("/dev/") {
            Self::Chardev
        } else if is_dir {
            Self::Directory
        } else if target.starts_with('/') {
            Self::File
        } else {
            Self::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn names_roundtrip() {
        for t in FdType::ALL {
            assert_eq!(FdType::from_name(t.name()), Some(t));
            assert_eq!(FdType::from_u8(t as u8), t);
        }
        assert_eq!(FdType::from_proc_link("anon_inode:[eventfd]", false), FdType::Event);
        assert_eq!(FdType::from_proc_link("/tmp/a", false), FdType::File);
    }
}

/// A socket address as latscope names it in fd names: `10.0.0.1:80`, `[2001:db8::1]:443`;
/// IPv4-mapped IPv6 addresses (`::ffff:10.0.0.1`, dual-stack sockets) are shown as IPv4.
pub fn sock_addr(ip: std::net::IpAddr, port: u16) -> String {
    match ip {
        std::net::IpAddr::V4(a) => format!("{a}:{port}"),
        std::net::IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => format!("{v4}:{port}"),
            None => format!("[{a}]:{port}"),
        },
    }
}

/// Transport protocols of IP sockets as socket names and `fd.l4proto` spell them, in the
/// kernel's `IPPROTO_*` numbering.
const L4_PROTOS: [(u16, &str); 8] = [
    (6, "tcp"),
    (17, "udp"),
    (136, "udplite"),
    (132, "sctp"),
    (262, "mptcp"),
    (1, "icmp"),
    (58, "icmpv6"),
    (255, "raw"),
];

/// The name of an IP protocol number (`IPPROTO_TCP` 6 is `tcp`, 17 `udp`, 136 `udplite`, 132
/// `sctp`, 262 `mptcp`, 1 `icmp`, 58 `icmpv6`); `raw` for raw sockets (`IPPROTO_RAW` 255) and any
/// other number.
pub fn l4_proto_name(ipproto: u16) -> &'static str {
    L4_PROTOS.iter().find(|(n, _)| *n == ipproto).map_or("raw", |(_, name)| name)
}

/// The name latscope gives an IP socket (the `path` of its events): `local->peer`, or `local`
/// alone for a socket without a peer (listening, or not connected); TCP sockets as such
/// (`10.0.0.1:80->10.0.0.7:5120`), sockets of other protocols with the protocol first
/// (`udp:10.0.0.1:53->10.0.0.2:41000`, `udp:0.0.0.0:53`). See [`sock_addr`] for addresses.
pub fn sock_name(proto: &str, local: (std::net::IpAddr, u16), peer: Option<(std::net::IpAddr, u16)>) -> String {
    let mut s = String::new();
    if proto != "tcp" {
        s.push_str(proto);
        s.push(':');
    }
    s.push_str(&sock_addr(local.0, local.1));
    if let Some((ip, port)) = peer {
        s.push_str("->");
        s.push_str(&sock_addr(ip, port));
    }
    s
}

/// One end of a socket, as written in its name: the address without brackets (`10.0.0.1`,
/// `2001:db8::1`) and the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockEnd<'a> {
    /// The IP address as written (IPv6 without its brackets).
    pub ip: &'a str,
    /// The port.
    pub port: u16,
}

/// A socket name taken apart (see [`sock_name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockName<'a> {
    /// The protocol: `tcp` for names without one.
    pub proto: &'static str,
    /// This end.
    pub local: SockEnd<'a>,
    /// The other end, if the socket has one.
    pub peer: Option<SockEnd<'a>>,
}

/// Take a socket name apart (`udp:10.0.0.1:53->10.0.0.2:41000`, `[::1]:80`), without
/// allocating. `None` for anything else (`socket:[123]`, a path).
pub fn parse_sock_name(name: &str) -> Option<SockName<'_>> {
    let (proto, rest) = match name.split_once(':') {
        Some((p, rest)) if p.bytes().all(|c| c.is_ascii_lowercase()) => {
            (L4_PROTOS.iter().find(|(_, n)| *n == p)?.1, rest)
        }
        _ => ("tcp", name),
    };
    let (local, peer) = match rest.split_once("->") {
        Some((l, p)) => (l, Some(p)),
        None => (rest, None),
    };
    fn end(s: &str) -> Option<SockEnd<'_>> {
        let (ip, port) = match s.strip_prefix('[') {
            Some(v6) => {
                let (ip, port) = v6.split_once("]:")?;
                (ip, port)
            }
            None => {
                let (ip, port) = s.rsplit_once(':')?;
                if ip.contains(':') {
                    return None;
                }
                (ip, port)
            }
        };
        let addr_chars = |c: u8| c.is_ascii_hexdigit() || c == b'.' || c == b':';
        if ip.is_empty() || !ip.bytes().all(addr_chars) || port.is_empty() || !port.bytes().all(|c| c.is_ascii_digit())
        {
            return None;
        }
        Some(SockEnd { ip, port: port.parse().ok()? })
    }
    let local = end(local)?;
    let peer = match peer {
        Some(p) => Some(end(p)?),
        None => None,
    };
    Some(SockName { proto, local, peer })
}

#[cfg(test)]
mod sock_addr_tests {
    use super::sock_addr;

    #[test]
    fn formats() {
        assert_eq!(sock_addr("10.0.0.1".parse().unwrap(), 80), "10.0.0.1:80");
        assert_eq!(sock_addr("2001:db8::1".parse().unwrap(), 443), "[2001:db8::1]:443");
        assert_eq!(sock_addr("::ffff:10.0.0.2".parse().unwrap(), 5), "10.0.0.2:5");
        assert_eq!(sock_addr("::1".parse().unwrap(), 8080), "[::1]:8080");
    }

    #[test]
    fn names_and_parsing() {
        use super::{l4_proto_name, parse_sock_name, sock_name, SockEnd, SockName};
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert_eq!(sock_name("tcp", (ip("10.0.0.1"), 80), Some((ip("10.0.0.7"), 5120))), "10.0.0.1:80->10.0.0.7:5120");
        assert_eq!(sock_name("udp", (ip("0.0.0.0"), 53), None), "udp:0.0.0.0:53");
        assert_eq!(sock_name(l4_proto_name(17), (ip("::1"), 53), Some((ip("::1"), 9))), "udp:[::1]:53->[::1]:9");
        assert_eq!((l4_proto_name(6), l4_proto_name(262), l4_proto_name(4)), ("tcp", "mptcp", "raw"));
        let end = |ip, port| SockEnd { ip, port };
        assert_eq!(
            parse_sock_name("10.0.0.1:80->10.0.0.7:5120"),
            Some(SockName { proto: "tcp", local: end("10.0.0.1", 80), peer: Some(end("10.0.0.7", 5120)) })
        );
        assert_eq!(
            parse_sock_name("udp:[2001:db8::1]:53->[::1]:41000"),
            Some(SockName { proto: "udp", local: end("2001:db8::1", 53), peer: Some(end("::1", 41000)) })
        );
        assert_eq!(parse_sock_name("[::]:22"), Some(SockName { proto: "tcp", local: end("::", 22), peer: None }));
        assert_eq!(parse_sock_name("sctp:10.0.0.1:9").map(|n| n.proto), Some("sctp"));
        for bad in [
            "socket:[123]",
            "/tmp/x",
            "",
            "10.0.0.1",
            "10.0.0.1:",
            "10.0.0.1:99999",
            "x:1",
            "ftp:1.2.3.4:5",
            "1.2.3.4:5->",
            "::1:80",
            "[::1]80",
            "pipe:[4]",
        ] {
            assert_eq!(parse_sock_name(bad), None, "{bad}");
        }
    }
}

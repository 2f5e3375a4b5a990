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
}

//! Who is at the other end of a loopback connection: the user owning the client's socket.
//!
//! On loopback both ends are sockets of this machine, so the kernel knows the client socket's
//! owner (the user that created it). It says so through the socket-diagnostics netlink
//! interface (`NETLINK_SOCK_DIAG`, see sock_diag(7)): an exact lookup of the client's TCP
//! socket by its four addresses returns `idiag_uid`. Where that interface is missing, the same
//! line of `/proc/net/tcp` (or `tcp6`) has it. A socket no longer held by any process (closed,
//! or in `TIME_WAIT`, which the kernel reports as uid 0) is unknown, never root.

use std::io::{Error, ErrorKind, Result};
use std::net::{IpAddr, SocketAddr};

/// The uid owning the TCP socket at `peer` connected to `local` (both on this machine).
pub fn tcp_peer_uid(local: SocketAddr, peer: SocketAddr) -> Result<u32> {
    if !peer.ip().is_loopback() && !is_local_address(peer.ip()) {
        return Err(Error::new(ErrorKind::Unsupported, "the client is on another machine"));
    }
    match sock_diag_uid(local, peer) {
        Ok(uid) => Ok(uid),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(e),
        Err(_) => proc_net_uid(local, peer),
    }
}

/// Whether `ip` is a loopback address, or an IPv4-mapped one.
fn is_local_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        IpAddr::V4(_) => false,
    }
}

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const TCP_TIME_WAIT: u8 = 6;
const TCP_NEW_SYN_RECV: u8 = 12;

/// The 48-byte `struct inet_diag_sockid` of a socket whose own address is `src`.
fn sockid(src: SocketAddr, dst: SocketAddr) -> [u8; 48] {
    let mut id = [0u8; 48];
    id[0..2].copy_from_slice(&src.port().to_be_bytes());
    id[2..4].copy_from_slice(&dst.port().to_be_bytes());
    let put = |out: &mut [u8], ip: IpAddr| match ip {
        IpAddr::V4(v4) => out[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out.copy_from_slice(&v6.octets()),
    };
    put(&mut id[4..20], src.ip());
    put(&mut id[20..36], dst.ip());
    // Interface 0: any; cookie INET_DIAG_NOCOOKIE: an exact lookup by addresses.
    id[40..48].copy_from_slice(&[0xff; 8]);
    id
}

/// The exact lookup over `NETLINK_SOCK_DIAG`.
fn sock_diag_uid(local: SocketAddr, peer: SocketAddr) -> Result<u32> {
    let family = if peer.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 } as u8;
    // struct nlmsghdr (16) + struct inet_diag_req_v2 (56).
    let mut req = Vec::with_capacity(72);
    req.extend_from_slice(&72u32.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes());
    req.extend_from_slice(&[family, libc::IPPROTO_TCP as u8, 0, 0]);
    req.extend_from_slice(&u32::MAX.to_ne_bytes());
    req.extend_from_slice(&sockid(peer, local));
    // SAFETY: a plain socket call; the fd is closed below.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG) };
    if fd < 0 {
        return Err(Error::last_os_error());
    }
    let fd = {
        use std::os::fd::FromRawFd;
        // SAFETY: the fd was just created and is ours.
        unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }
    };
    use std::os::fd::AsRawFd;
    let tv = libc::timeval { tv_sec: 1, tv_usec: 0 };
    let mut buf = [0u8; 8192];
    // SAFETY: setsockopt with a timeval; send and recv with buffers of their lengths.
    let n = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
        if libc::send(fd.as_raw_fd(), req.as_ptr() as *const libc::c_void, req.len(), 0) < 0 {
            return Err(Error::last_os_error());
        }
        libc::recv(fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0)
    };
    if n < 0 {
        return Err(Error::last_os_error());
    }
    let msg = &buf[..n as usize];
    let u32_at = |o: usize| msg.get(o..o + 4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    let kind = msg.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    if kind == Some(libc::NLMSG_ERROR as u16) {
        let code = u32_at(16).unwrap_or(0) as i32;
        return Err(match -code {
            libc::ENOENT => Error::new(ErrorKind::NotFound, "no such socket"),
            e => Error::from_raw_os_error(e),
        });
    }
    if kind != Some(SOCK_DIAG_BY_FAMILY) || msg.len() < 16 + 72 {
        return Err(Error::new(ErrorKind::InvalidData, "unexpected sock_diag answer"));
    }
    // struct inet_diag_msg after the header: family, state, timer, retrans, sockid (48),
    // expires, rqueue, wqueue, uid, inode.
    let state = msg[17];
    let (uid, inode) = (u32_at(16 + 64).unwrap_or(0), u32_at(16 + 68).unwrap_or(0));
    if state == TCP_TIME_WAIT || state == TCP_NEW_SYN_RECV || inode == 0 {
        return Err(Error::new(ErrorKind::NotFound, "the client's socket is held by no process"));
    }
    Ok(uid)
}

/// The same from `/proc/net/tcp` or `tcp6`: the line whose local address is the client's and
/// remote address ours (addresses as the kernel prints them: each 32-bit word in host order).
fn proc_net_uid(local: SocketAddr, peer: SocketAddr) -> Result<u32> {
    let hex = |a: SocketAddr| -> String {
        let words: Vec<u32> = match a.ip() {
            IpAddr::V4(v4) => vec![u32::from_ne_bytes(v4.octets())],
            IpAddr::V6(v6) => v6.octets().chunks(4).map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect(),
        };
        let ip: String = words.iter().map(|w| format!("{w:08X}")).collect();
        format!("{ip}:{:04X}", a.port())
    };
    let file = if peer.is_ipv4() { "/proc/net/tcp" } else { "/proc/net/tcp6" };
    let text = std::fs::read_to_string(file)?;
    let (want_local, want_remote) = (hex(peer), hex(local));
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() > 9 && f[1] == want_local && f[2] == want_remote {
            let state = u8::from_str_radix(f[3], 16).unwrap_or(0);
            if state == TCP_TIME_WAIT || f[9] == "0" {
                break;
            }
            return f[7].parse().map_err(|_| Error::new(ErrorKind::InvalidData, "bad uid in /proc/net/tcp"));
        }
    }
    Err(Error::new(ErrorKind::NotFound, "no such socket"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn the_owner_of_a_loopback_client_socket_is_found_both_ways() {
        for addr in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(l) = TcpListener::bind(addr) else { continue };
            let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (_s, peer) = l.accept().unwrap();
            let local = l.local_addr().unwrap();
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            assert_eq!(sock_diag_uid(local, peer).unwrap(), me, "{addr}");
            assert_eq!(proc_net_uid(local, peer).unwrap(), me, "{addr}");
            drop(c);
            let other = SocketAddr::new(local.ip(), 1);
            assert!(tcp_peer_uid(local, other).is_err(), "no such socket");
        }
    }
}

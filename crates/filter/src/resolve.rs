//! Names of enumerated string fields resolved to the numbers stored in events, so that
//! `evt.type = openat` compares syscall numbers and `fd.type = file` compares a byte.

use crate::error::suggest;
use crate::fields::{category_names, Field, BLOCK_OP_NAMES};
use latscope_event::{errno_name, syscalls, FdType, ProcOp};

/// What an `evt.type` name selects in each kind of event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TypeSel {
    /// Syscall number.
    pub sys: Option<u16>,
    /// Block op mask bit (see [`crate::fields::blk_op_bit`]).
    pub blk: u8,
    /// Proc op mask bit.
    pub proc: u8,
}

const PROC_OPS: [ProcOp; 5] = [ProcOp::Fork, ProcOp::Exec, ProcOp::Exit, ProcOp::Times, ProcOp::Sample];

/// The `evt.type` names of block and process events (as [`latscope_event::op_name`] prints them).
const TYPE_NAMES: [&str; 12] = [
    "block_read",
    "block_write",
    "block_flush",
    "block_discard",
    "block_secure_erase",
    "block_write_zeroes",
    "block_other",
    "proc_fork",
    "proc_exec",
    "proc_exit",
    "proc_times",
    "proc_sample",
];

/// `evt.type` name, as events print it: a syscall name (or `syscall_N` for unnamed numbers)
/// matches syscalls only, `block_write` (`block_` and a `blk.op` name) block requests only,
/// `proc_exec` (`proc_` and fork, exec, exit, times or sample) process events only — as in sysdig, where
/// `evt.type = write` is the syscall.
pub(crate) fn evt_type(s: &str) -> Option<TypeSel> {
    let sys = syscalls::syscall_nr(s).or_else(|| {
        let n: u16 = s.strip_prefix("syscall_")?.parse().ok()?;
        (n.to_string() == s["syscall_".len()..] && syscalls::syscall_name(n).is_none()).then_some(n)
    });
    let blk = s.strip_prefix("block_").and_then(blk_op).unwrap_or(0);
    let proc =
        s.strip_prefix("proc_").and_then(|s| PROC_OPS.iter().find(|p| p.name() == s)).map_or(0, |p| 1 << (*p as u16));
    (sys.is_some() || blk != 0 || proc != 0).then_some(TypeSel { sys, blk, proc })
}

/// `blk.op` name to its mask bit.
pub(crate) fn blk_op(s: &str) -> Option<u8> {
    BLOCK_OP_NAMES.iter().position(|n| *n == s).map(|i| 1 << i)
}

/// `fd.type` name to its code.
pub(crate) fn fd_type(s: &str) -> Option<u8> {
    FdType::from_name(s).map(|t| t as u8)
}

/// `evt.kind` name to its kind bit.
pub(crate) fn evt_kind(s: &str) -> Option<u8> {
    ["syscall", "block", "proc"].iter().position(|n| *n == s).map(|i| 1 << i)
}

/// An `evt.res` value: `SUCCESS` (`None`) or an errno number.
pub(crate) fn evt_res(s: &str) -> Option<Option<i64>> {
    if s == "SUCCESS" {
        return Some(None);
    }
    if let Some(e) = latscope_event::errno_value(s).filter(|&e| errno_name(e) == Some(s)) {
        return Some(Some(e));
    }
    // `E4000`: numbers without a name, as `evt.res` prints them.
    let n: i64 = s.strip_prefix('E')?.parse().ok()?;
    let canonical = n.to_string() == s[1..];
    (canonical && (1..=4095).contains(&n) && errno_name(n).is_none()).then_some(Some(n))
}

/// A `blk.dev` value `major:minor` to the packed device number.
pub(crate) fn blk_dev(s: &str) -> Option<u32> {
    let (ma, mi) = s.split_once(':')?;
    let (a, b): (u32, u32) = (ma.parse().ok()?, mi.parse().ok()?);
    let canonical = a.to_string() == ma && b.to_string() == mi;
    (canonical && a < (1 << 12) && b < (1 << 20)).then_some((a << 20) | b)
}

/// A `container.id` value as compared: a full 64-digit id stands for its short id (the first
/// 12 digits, which is what the field holds).
pub(crate) fn container_id(s: &str) -> &str {
    let full = s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if full {
        &s[..12]
    } else {
        s
    }
}

/// Names `fd.l4proto` takes.
pub(crate) const L4_PROTOS: [&str; 9] = ["tcp", "udp", "udplite", "sctp", "mptcp", "icmp", "icmpv6", "raw", "unix"];

/// Fields whose values are IP addresses.
pub(crate) fn is_ip_field(f: Field) -> bool {
    matches!(f, Field::FdSip | Field::FdCip | Field::FdLip | Field::FdRip)
}

/// An IP address as socket names write it (`sock_addr`): IPv4 dotted, IPv6 compressed in lower
/// case, IPv4-mapped IPv6 as IPv4. `None` for text that is not an address.
pub(crate) fn ip(s: &str) -> Option<String> {
    let a: std::net::IpAddr = s.parse().ok()?;
    Some(match a {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        v4 => v4.to_string(),
    })
}

/// A value given to `=`, `!=` or `in` as compared: IP addresses in their canonical form, other
/// values as written.
pub(crate) fn canonical(field: Field, s: &str) -> String {
    if is_ip_field(field) {
        if let Some(a) = ip(s) {
            return a;
        }
    }
    s.to_string()
}

/// Check a value given to `=`, `!=` or `in` on an enumerated field. On error: what is wrong, and
/// either a suggestion or the list of valid names.
pub(crate) fn validate(field: Field, s: &str) -> Result<(), (String, String)> {
    let fail = |what: &str, names: Vec<&str>| -> Result<(), (String, String)> {
        let tail = match suggest(s, names.iter().copied()) {
            Some(n) => format!("; did you mean {n}?"),
            None if names.len() <= 20 => format!(" (known: {})", names.join(", ")),
            None => String::new(),
        };
        Err((format!("unknown {what} '{s}'"), tail))
    };
    match field {
        Field::EvtType if evt_type(s).is_none() => {
            // A block or process op without its prefix (`flush`, `exec`): name the event type.
            for (pre, other) in [("block_", "blk.op"), ("proc_", "")] {
                let t = format!("{pre}{s}");
                if evt_type(&t).is_some() {
                    let alt = if other.is_empty() { String::new() } else { format!(", or {other} = {s}") };
                    return Err((
                        format!("unknown event type '{s}'"),
                        format!("; did you mean {t}? (evt.type names syscalls; block requests are block_<op>{alt})"),
                    ));
                }
            }
            let mut names: Vec<&str> = syscalls::all().map(|(_, n)| n).collect();
            names.extend(TYPE_NAMES);
            fail("event type", names)
        }
        Field::FdType if fd_type(s).is_none() => fail("fd type", FdType::ALL.iter().map(|t| t.name()).collect()),
        Field::BlkOp if blk_op(s).is_none() => fail("block op", BLOCK_OP_NAMES.to_vec()),
        Field::EvtKind if evt_kind(s).is_none() => fail("event kind", vec!["syscall", "block", "proc"]),
        Field::EvtCategory if !category_names().any(|c| c == s) => fail("category", category_names().collect()),
        Field::EvtRes if evt_res(s).is_none() => {
            let mut names: Vec<&str> = (1..4096).filter_map(errno_name).collect();
            names.push("SUCCESS");
            fail("result", names)
        }
        Field::FdL4proto if !L4_PROTOS.contains(&s) => fail("protocol", L4_PROTOS.to_vec()),
        f if is_ip_field(f) && ip(s).is_none() => Err((
            format!("bad IP address '{s}'"),
            format!(
                ": {} takes an IPv4 or IPv6 address (10.0.0.1, ::1); use startswith or glob for parts",
                f.info().name
            ),
        )),
        Field::BlkDev if blk_dev(s).is_none() => {
            Err((format!("bad device '{s}'"), ": blk.dev takes major:minor (8:0); use blk.disk for names (vda)".into()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names() {
        assert_eq!(evt_type("openat"), Some(TypeSel { sys: Some(257), blk: 0, proc: 0 }));
        // A syscall name selects the syscall only; block and process events have their own names.
        assert_eq!(evt_type("read"), Some(TypeSel { sys: Some(0), blk: 0, proc: 0 }));
        assert_eq!(evt_type("write"), Some(TypeSel { sys: Some(1), blk: 0, proc: 0 }));
        assert_eq!(evt_type("block_write"), Some(TypeSel { sys: None, blk: 2, proc: 0 }));
        assert_eq!(evt_type("exit"), Some(TypeSel { sys: Some(60), blk: 0, proc: 0 }));
        assert_eq!(evt_type("proc_exit"), Some(TypeSel { sys: None, blk: 0, proc: 4 }));
        assert_eq!(evt_type("block_flush"), Some(TypeSel { sys: None, blk: 4, proc: 0 }));
        assert_eq!(evt_type("proc_exec"), Some(TypeSel { sys: None, blk: 0, proc: 2 }));
        assert_eq!(evt_type("block_other"), Some(TypeSel { sys: None, blk: 64, proc: 0 }));
        assert_eq!(evt_type("flush"), None);
        assert_eq!(evt_type("exec"), None);
        assert_eq!(evt_type("syscall_1000"), Some(TypeSel { sys: Some(1000), blk: 0, proc: 0 }));
        assert_eq!(evt_type("syscall_0"), None);
        assert_eq!(evt_type("syscall_01000"), None);
        assert_eq!(evt_type("opneat"), None);
    }

    #[test]
    fn other_names() {
        assert_eq!(fd_type("file"), Some(1));
        assert_eq!(fd_type("FILE"), None);
        assert_eq!(evt_kind("block"), Some(2));
        assert_eq!(evt_res("SUCCESS"), Some(None));
        assert_eq!(evt_res("ENOENT"), Some(Some(2)));
        assert_eq!(evt_res("enoent"), None);
        assert_eq!(evt_res("E4000"), Some(Some(4000)));
        assert_eq!(evt_res("E2"), None);
        assert_eq!(blk_dev("8:16"), Some((8 << 20) | 16));
        assert_eq!(blk_dev("08:16"), None);
        assert_eq!(blk_dev("vda"), None);
        assert_eq!(container_id("host"), "host");
        assert_eq!(container_id(&"ab".repeat(32)), "abababababab");
        assert_eq!(container_id("abababababab"), "abababababab");
    }

    #[test]
    fn validation_messages() {
        assert_eq!(validate(Field::FdType, "fiel").unwrap_err().1, "; did you mean file?");
        assert_eq!(validate(Field::EvtType, "opneat").unwrap_err().1, "; did you mean openat?");
        assert!(validate(Field::EvtKind, "zzzzzzzz").unwrap_err().1.contains("known: syscall, block, proc"));
        assert_eq!(validate(Field::EvtRes, "ENOENTT").unwrap_err().1, "; did you mean ENOENT?");
        assert!(validate(Field::ProcName, "anything").is_ok());
        assert!(validate(Field::EvtCategory, "file-meta").is_ok());
        assert_eq!(validate(Field::FdL4proto, "tpc").unwrap_err().1, "; did you mean tcp?");
        assert!(validate(Field::FdSip, "10.0.0.300").unwrap_err().0.contains("bad IP address"));
        assert!(validate(Field::FdRip, "::1").is_ok());
        assert_eq!(canonical(Field::FdSip, "::FFFF:10.0.0.1"), "10.0.0.1");
        assert_eq!(canonical(Field::FdCip, "0:0:0:0:0:0:0:1"), "::1");
        assert_eq!(canonical(Field::FdCip, "2001:DB8::1"), "2001:db8::1");
        assert_eq!(canonical(Field::ProcName, "::1"), "::1");
    }
}

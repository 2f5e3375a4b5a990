//! The event model every latscope stage shares.
//!
//! Probes produce [`EventBatch`]es, the trace file stores them, filters and
//! aggregations read them. A batch is column-oriented (one `Vec` per field) so
//! that readers which need two fields (say time and latency for a heat map) touch
//! only those, and so that the Arrow trace format maps onto it one to one.

pub mod argnames;
pub mod args;
mod batch;
mod block;
pub mod bounds;
pub mod container;
mod errno_table;
pub mod escape;
mod fdtype;
mod header;
pub mod hint;
pub mod locks;
pub mod source;
pub mod span;
mod stacks;
mod syscall_table;
pub mod syscalls;
mod times;
pub mod units;
pub mod waits;

pub use batch::{
    comm_bytes, comm_from_words, comm_to_words, op_name, wake_flags, Event, EventBatch, EventKind, LockKind, OffCpu,
    ProcOp, StrCol, CORE_COLUMNS, NO_FD, OFF_COLUMNS, OFF_KEPT, WHY_COLUMNS, WHY_PARTS, WHY_PART_NAMES,
};
pub use block::{BlockOp, Rwbs};
pub use bounds::Truncation;
pub use container::{CgroupIndex, CgroupInfo};
pub use fdtype::{l4_proto_name, parse_sock_name, sock_addr, sock_name, FdType, SockEnd, SockName};
pub use header::{
    dev_major_minor, BlockDevice, FdInfo, FlightInfo, Mount, ProcessInfo, TraceHeader, CAPTURE_REPLAY_V1,
    TRACE_FORMAT_VERSION,
};
pub use span::Span;
pub use stacks::{Frame, StackEntry, StackKind, StackTable};
pub use syscalls::{can_wake, syscall_name, syscall_nr, SysClass, SysDesc, SyscallSet};
pub use times::{ThreadTimes, TimesAt};

/// The symbolic name of an errno value (`ENOENT` for 2, `ERESTARTSYS` for 512), if it has one:
/// the user-visible errnos and the kernel-internal ones (512 to 531) a tracer sees at syscall exit.
pub fn errno_name(errno: i64) -> Option<&'static str> {
    use errno_table::{ERRNO_NAMES, KERNEL_ERRNO_BASE, KERNEL_ERRNO_NAMES};
    let i = usize::try_from(errno).ok()?;
    let name = match i.checked_sub(KERNEL_ERRNO_BASE) {
        Some(k) => KERNEL_ERRNO_NAMES.get(k),
        None => ERRNO_NAMES.get(i),
    };
    name.copied().filter(|s| !s.is_empty())
}

/// The errno number of a symbolic name (`2` for `ENOENT`, `514` for `ERESTARTNOHAND`), ignoring
/// ASCII case.
pub fn errno_value(name: &str) -> Option<i64> {
    use errno_table::{ERRNO_NAMES, KERNEL_ERRNO_BASE, KERNEL_ERRNO_NAMES};
    let find = |names: &[&str]| names.iter().position(|n| !n.is_empty() && n.eq_ignore_ascii_case(name));
    find(&ERRNO_NAMES).or_else(|| find(&KERNEL_ERRNO_NAMES).map(|k| k + KERNEL_ERRNO_BASE)).map(|i| i as i64)
}

/// A syscall result as users read it: `SUCCESS`/the value, or the errno name.
pub fn format_result(ret: i64) -> String {
    if (-4095..0).contains(&ret) {
        match errno_name(-ret) {
            Some(n) => n.to_string(),
            None => format!("E{}", -ret),
        }
    } else {
        ret.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name round-trips through the two words: short, exactly 16 bytes (no NUL), empty, and
    /// bytes that are not UTF-8 (kept as bytes, made valid only by the `String` maker).
    #[test]
    fn command_names_in_two_words() {
        for name in ["kworker/0:1", "0123456789abcdef", ""] {
            let (lo, hi) = comm_to_words(name);
            let (b, n) = comm_bytes(lo, hi);
            assert_eq!(&b[..n], name.as_bytes());
            assert_eq!(comm_from_words(lo, hi), name);
        }
        let lo = u64::from_le_bytes([b'a', 0xff, b'b', 0, b'x', b'y', 0, 0]);
        let (b, n) = comm_bytes(lo, 0);
        assert_eq!(&b[..n], [b'a', 0xff, b'b']);
        assert_eq!(comm_from_words(lo, 0), "a\u{fffd}b");
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(2), Some("ENOENT"));
        assert_eq!(errno_value("enoent"), Some(2));
        assert_eq!(format_result(-2), "ENOENT");
        assert_eq!(format_result(42), "42");
        assert_eq!(errno_name(0), None);
        assert_eq!(errno_name(134), None);
    }

    #[test]
    fn kernel_internal_errnos() {
        assert_eq!(errno_name(512), Some("ERESTARTSYS"));
        assert_eq!(errno_name(514), Some("ERESTARTNOHAND"));
        assert_eq!(errno_name(516), Some("ERESTART_RESTARTBLOCK"));
        assert_eq!(errno_name(520), None);
        assert_eq!(errno_name(521), Some("EBADHANDLE"));
        assert_eq!(errno_name(524), Some("ENOTSUPP"));
        assert_eq!(errno_name(531), Some("ENOGRACE"));
        assert_eq!((errno_name(511), errno_name(532)), (None, None));
        assert_eq!(errno_value("ERESTARTNOHAND"), Some(514));
        assert_eq!(errno_value("enotsupp"), Some(524));
        assert_eq!(format_result(-514), "ERESTARTNOHAND");
        assert_eq!(format_result(-520), "E520");
        // Every name maps back to its number.
        for e in 1..4096 {
            if let Some(n) = errno_name(e) {
                assert_eq!(errno_value(n), Some(e), "{n}");
            }
        }
    }
}

/// A line of a text input (trace2heatmap.pl's two columns, `perf script` output) that could not
/// be read: names the file, the line and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// File name as given.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// What was wrong and what was expected.
    pub msg: String,
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.msg)
    }
}

impl std::error::Error for InputError {}

//! An event's arguments as `latscope events` prints them (`fd=3(<file>/etc/hosts) bytes=4096
//! off=0`), written into any [`fmt::Write`] so that the filter's `evt.args` and `evt.arg.*`
//! fields compare the very text the event lines show, without allocating per event.

use crate::argnames;
use crate::syscalls::{desc, SysDesc, NONE};
use crate::units::{write_bytes, write_ns, write_u64};
use crate::{dev_major_minor, BlockOp, EventBatch, EventKind, FdType, ProcOp, Rwbs};
use std::fmt::{self, Write};

const OPEN_FLAGS: [(u32, &str); 14] = [
    (0o100, "O_CREAT"),
    (0o200, "O_EXCL"),
    (0o400, "O_NOCTTY"),
    (0o1000, "O_TRUNC"),
    (0o2000, "O_APPEND"),
    (0o4000, "O_NONBLOCK"),
    (0o10000, "O_DSYNC"),
    (0o40000, "O_DIRECT"),
    (0o100000, "O_LARGEFILE"),
    (0o200000, "O_DIRECTORY"),
    (0o400000, "O_NOFOLLOW"),
    (0o1000000, "O_NOATIME"),
    (0o2000000, "O_CLOEXEC"),
    (0o10000000, "O_PATH"),
];

/// Open flags as `O_WRONLY|O_CREAT|O_TRUNC` (bits without a name as `|0x...`).
pub fn write_open_flags(w: &mut impl Write, f: u32) -> fmt::Result {
    w.write_str(match f & 3 {
        0 => "O_RDONLY",
        1 => "O_WRONLY",
        2 => "O_RDWR",
        _ => "O_ACCMODE",
    })?;
    let mut rest = f & !3;
    // O_SYNC is O_DSYNC plus one more bit.
    if rest & 0o4010000 == 0o4010000 {
        w.write_str("|O_SYNC")?;
        rest &= !0o4010000;
    }
    if rest & 0o20200000 == 0o20200000 {
        w.write_str("|O_TMPFILE")?;
        rest &= !0o20200000;
    }
    for (bit, name) in OPEN_FLAGS {
        if rest & bit != 0 {
            w.write_char('|')?;
            w.write_str(name)?;
            rest &= !bit;
        }
    }
    if rest != 0 {
        write!(w, "|0x{rest:x}")?;
    }
    Ok(())
}

/// [`write_open_flags`] into a new string.
pub fn open_flags(f: u32) -> String {
    let mut s = String::new();
    let _ = write_open_flags(&mut s, f);
    s
}

/// An lseek `whence` value: `SEEK_SET`, `SEEK_CUR`, `SEEK_END`, `SEEK_DATA`, `SEEK_HOLE`, or `?`.
pub fn whence_name(whence: u32) -> &'static str {
    match whence {
        0 => "SEEK_SET",
        1 => "SEEK_CUR",
        2 => "SEEK_END",
        3 => "SEEK_DATA",
        4 => "SEEK_HOLE",
        _ => "?",
    }
}

/// A directory fd argument: `AT_FDCWD` for -100, else the number.
pub fn write_dirfd(w: &mut impl Write, dirfd: i32) -> fmt::Result {
    if dirfd == -100 {
        w.write_str("AT_FDCWD")
    } else {
        write_i64(w, i64::from(dirfd))
    }
}

/// A signed integer in decimal, as `Display` writes it.
fn write_i64(w: &mut impl Write, v: i64) -> fmt::Result {
    if v < 0 {
        w.write_char('-')?;
    }
    write_u64(w, v.unsigned_abs())
}

/// Whether syscall `name` is one of the opens (its `flags` are open flags).
pub fn is_open(name: &str) -> bool {
    matches!(name, "open" | "openat" | "openat2" | "creat")
}

/// The `flags` argument of syscall event `i` as printed (decoded by [`crate::argnames`]: open
/// flags, `F_SETLK`, `MAP_PRIVATE|MAP_ANONYMOUS`, ...); nothing when the syscall has no flags
/// argument or it is lseek's `whence`.
pub fn write_flags(w: &mut impl Write, b: &EventBatch, i: usize) -> Option<fmt::Result> {
    let nr = *b.nr.get(i)?;
    let name = crate::syscall_name(nr).unwrap_or("");
    if desc(nr).flags == NONE || name == "lseek" {
        return None;
    }
    let spec = argnames::specs_nr(nr).iter().find(|s| s.slot == argnames::Slot::Flags)?;
    let f = *b.flags.get(i)?;
    Some(argnames::write_value(w, spec, u64::from(f), f))
}

/// The `mode` column of syscall event `i` as printed (decoded by [`crate::argnames`]: `0644`,
/// `PROT_READ|PROT_WRITE`, `SOCK_STREAM`, fcntl's argument by its command, ...); nothing when
/// the syscall has no such argument or the event line leaves it out (open's mode without
/// `O_CREAT`, fcntl's `struct flock` pointer).
pub fn write_mode(w: &mut impl Write, b: &EventBatch, i: usize) -> Option<fmt::Result> {
    let nr = *b.nr.get(i)?;
    if desc(nr).mode == NONE {
        return None;
    }
    let spec = argnames::specs_nr(nr).iter().find(|s| s.slot == argnames::Slot::Mode)?;
    let (f, m) = (*b.flags.get(i)?, *b.mode.get(i)?);
    argnames::shown(spec, f, m).then(|| argnames::write_value(w, spec, u64::from(m), f))
}

/// The arguments part of syscall event `i` (`fd=3(<file>/etc/hosts) bytes=4096 off=0`): the fd
/// with its type and name, then the arguments the syscall has (see [`SysDesc`]). Nothing for
/// rows out of range.
pub fn write_syscall_args<W: Write>(w: &mut W, b: &EventBatch, i: usize) -> fmt::Result {
    let (Some(&nr), Some(&fd)) = (b.nr.get(i), b.fd.get(i)) else { return Ok(()) };
    if i + 1 >= b.path.offsets.len() || i + 1 >= b.path2.offsets.len() {
        return Ok(());
    }
    let col = |v: Option<&u64>| v.copied().unwrap_or(0);
    let d: &SysDesc = desc(nr);
    let path = b.path.get(i);
    // Integers and names written piece by piece: this runs for every event line (no
    // `format_args!` through a `dyn Write`).
    let mut sep = "";
    if fd >= 0 {
        let t = FdType::from_u8(b.fd_type.get(i).copied().unwrap_or(0));
        w.write_str("fd=")?;
        write_i64(w, i64::from(fd))?;
        if t != FdType::Unknown || !path.is_empty() {
            w.write_str("(<")?;
            w.write_str(t.name())?;
            w.write_char('>')?;
            w.write_str(if d.path == NONE { path } else { "" })?;
            w.write_char(')')?;
        }
        sep = " ";
    }
    let mut item = |w: &mut W, name: &str| -> fmt::Result {
        w.write_str(sep)?;
        sep = " ";
        w.write_str(name)
    };
    if d.dirfd != NONE {
        item(w, "dirfd=")?;
        write_dirfd(w, b.dirfd.get(i).copied().unwrap_or(-1))?;
    }
    // An empty path (AT_EMPTY_PATH, an unreadable argument) reads `path=""`, not a dangling `=`.
    fn quoted(p: &str) -> &str {
        if p.is_empty() {
            "\"\""
        } else {
            p
        }
    }
    if d.path != NONE {
        item(w, "path=")?;
        w.write_str(quoted(path))?;
    }
    if d.path2 != NONE {
        item(w, "path2=")?;
        w.write_str(quoted(b.path2.get(i)))?;
    }
    if d.count != NONE || d.has(SysDesc::IOV) {
        item(w, "bytes=")?;
        write_u64(w, col(b.bytes.get(i)))?;
    }
    let off = b.off.get(i).copied().unwrap_or(-1);
    if off >= 0 && (d.off != NONE || d.has(SysDesc::FILE_POS)) {
        item(w, "off=")?;
        write_i64(w, off)?;
    }
    let off2 = b.off2.get(i).copied().unwrap_or(-1);
    if off2 >= 0 && d.off2 != NONE {
        item(w, "off2=")?;
        write_i64(w, off2)?;
    }
    // Flags, modes and addresses, decoded by the one table (pointers it does not follow left out).
    let (flags, mode) = (b.flags.get(i).copied().unwrap_or(0), b.mode.get(i).copied().unwrap_or(0));
    let addr = col(b.addr.get(i));
    for spec in argnames::specs_nr(nr) {
        if !argnames::shown(spec, flags, mode) {
            continue;
        }
        let v = match spec.slot {
            argnames::Slot::Flags => u64::from(flags),
            argnames::Slot::Mode => u64::from(mode),
            argnames::Slot::Addr => addr,
        };
        item(w, spec.name)?;
        w.write_char('=')?;
        argnames::write_value(w, spec, v, flags)?;
    }
    if d.addr != NONE && d.has(SysDesc::ADDR_FD | SysDesc::FD_PAIR) {
        item(w, "fd2=")?;
        write_i64(w, addr as i64)?;
    }
    Ok(())
}

/// [`write_syscall_args`] into a new string.
pub fn syscall_args(b: &EventBatch, i: usize) -> String {
    let mut s = String::new();
    let _ = write_syscall_args(&mut s, b, i);
    s
}

/// A block device as printed: `vda(254:0)` when its name is known, else `254:0`.
pub fn write_disk(w: &mut impl Write, dev: u32, name: Option<&str>) -> fmt::Result {
    let (ma, mi) = dev_major_minor(dev);
    if let Some(n) = name {
        w.write_str(n)?;
        w.write_char('(')?;
    }
    write_u64(w, u64::from(ma))?;
    w.write_char(':')?;
    write_u64(w, u64::from(mi))?;
    if name.is_some() {
        w.write_char(')')?;
    }
    Ok(())
}

/// The details of block event `i`: `dev=vda(254:0) sector=2048 bytes=4096 (4.00KiB) rwbs=WS
/// qtime=10.0us`, then ` error=N` for a failed request. `disk` is the device's name, if known.
pub fn write_block_args(w: &mut impl Write, b: &EventBatch, i: usize, disk: Option<&str>) -> fmt::Result {
    let (Some(&nr), Some(&dev)) = (b.nr.get(i), b.dev.get(i)) else { return Ok(()) };
    let op = BlockOp::from_u16(nr);
    let bytes = b.bytes.get(i).copied().unwrap_or(0);
    // Piece by piece, as the syscall arguments (no `format_args!`: a line per request).
    w.write_str("dev=")?;
    write_disk(w, dev, disk)?;
    w.write_str(" sector=")?;
    write_i64(w, b.off.get(i).copied().unwrap_or(0))?;
    w.write_str(" bytes=")?;
    write_u64(w, bytes)?;
    w.write_str(" (")?;
    write_bytes(w, bytes)?;
    w.write_str(") rwbs=")?;
    Rwbs::write(w, op, b.flags.get(i).copied().unwrap_or(0))?;
    w.write_str(" qtime=")?;
    write_ns(w, b.qtime.get(i).copied().unwrap_or(0))?;
    match b.ret.get(i) {
        Some(&r) if r != 0 => {
            w.write_str(" error=")?;
            write_i64(w, r)
        }
        _ => Ok(()),
    }
}

/// The details of process event `i`: `parent=PID` (fork), `path=EXE` (exec), `code=N` (exit),
/// the thread's counters (times).
pub fn write_proc_args(w: &mut impl Write, b: &EventBatch, i: usize) -> fmt::Result {
    let (Some(&nr), Some(&ret)) = (b.nr.get(i), b.ret.get(i)) else { return Ok(()) };
    match ProcOp::from_u16(nr) {
        Some(ProcOp::Fork) => write!(w, "parent={ret}"),
        Some(ProcOp::Exec) if i + 1 < b.path.offsets.len() && i + 1 < b.path2.offsets.len() => {
            let path = b.path.get(i);
            write!(w, "path={}", if path.is_empty() { "\"\"" } else { path })?;
            let args = b.path2.get(i);
            if !args.is_empty() {
                write!(w, " args={args}")?;
            }
            Ok(())
        }
        Some(ProcOp::Exit) => write!(w, "code={ret}"),
        Some(ProcOp::Sample) => w.write_str(if ret == 1 { "in=kernel" } else { "in=user" }),
        Some(ProcOp::Times) => match crate::ThreadTimes::from_row(b, i) {
            // Written piece by piece: filters format this (evt.args) without allocating.
            Some((t, at)) => {
                use crate::units::write_ns;
                write!(w, "at={} cpu=", at.name())?;
                write_ns(w, t.cpu)?;
                w.write_str(" runq=")?;
                write_ns(w, t.runq)?;
                w.write_str(" user=")?;
                write_ns(w, t.user)?;
                w.write_str(" sys=")?;
                write_ns(w, t.sys)?;
                write!(w, " faults={}/{} switches={}/{}", t.min_flt, t.maj_flt, t.vcsw, t.ivcsw)?;
                if let Some(nr) = t.call {
                    write!(w, " in_call={}", crate::syscall_name(nr).unwrap_or("?"))?;
                    if t.in_call > 0 {
                        w.write_char('/')?;
                        write_ns(w, t.in_call)?;
                    }
                }
                Ok(())
            }
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// The arguments of event `i` of any kind, as the event line prints them after the operation's
/// name ([`write_syscall_args`], [`write_block_args`], [`write_proc_args`]). `disk` names the
/// device of a block event.
pub fn write_args(w: &mut impl Write, b: &EventBatch, i: usize, disk: Option<&str>) -> fmt::Result {
    match b.kind.get(i).copied().and_then(EventKind::from_u8) {
        Some(EventKind::Syscall) => write_syscall_args(w, b, i),
        Some(EventKind::Block) => write_block_args(w, b, i, disk),
        Some(EventKind::Proc) => write_proc_args(w, b, i),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{syscall_nr, Event};

    fn one(e: Event) -> EventBatch {
        let mut b = EventBatch::default();
        b.push(&e);
        b
    }

    #[test]
    fn syscall_arguments() {
        let b = one(Event {
            kind: 0,
            nr: syscall_nr("openat").unwrap(),
            ret: -2,
            fd: -1,
            dirfd: -100,
            flags: 0o2000101,
            path: "/nope".into(),
            ..Default::default()
        });
        assert_eq!(syscall_args(&b, 0), "dirfd=AT_FDCWD path=/nope flags=O_WRONLY|O_CREAT|O_CLOEXEC mode=00");
        // Without O_CREAT the mode means nothing and is left out, as strace does.
        let b = one(Event {
            kind: 0,
            nr: syscall_nr("openat").unwrap(),
            fd: -1,
            dirfd: -100,
            flags: 0o2000000,
            path: "/etc".into(),
            mode: 0o777,
            ..Default::default()
        });
        assert_eq!(syscall_args(&b, 0), "dirfd=AT_FDCWD path=/etc flags=O_RDONLY|O_CLOEXEC");
        // fcntl(F_SETLK) names its command and leaves out the struct flock pointer.
        let b = one(Event {
            kind: 0,
            nr: syscall_nr("fcntl").unwrap(),
            fd: 3,
            fd_type: 1,
            flags: 6,
            mode: 0x2553_1277,
            path: "/db".into(),
            ..Default::default()
        });
        assert_eq!(syscall_args(&b, 0), "fd=3(<file>/db) cmd=F_SETLK");
        let b = one(Event {
            kind: 0,
            nr: syscall_nr("fadvise64").unwrap(),
            fd: 3,
            off: 0,
            bytes: 0,
            flags: 4,
            ..Default::default()
        });
        assert_eq!(syscall_args(&b, 0), "fd=3 bytes=0 off=0 advice=POSIX_FADV_DONTNEED");
        let b = one(Event {
            kind: 0,
            nr: syscall_nr("pread64").unwrap(),
            fd: 3,
            fd_type: 1,
            bytes: 4096,
            off: 8192,
            path: "/data".into(),
            ..Default::default()
        });
        assert_eq!(syscall_args(&b, 0), "fd=3(<file>/data) bytes=4096 off=8192");
        let b =
            one(Event { kind: 0, nr: syscall_nr("lseek").unwrap(), fd: 4, off: 10, flags: 2, ..Default::default() });
        assert_eq!(syscall_args(&b, 0), "fd=4 off=10 whence=SEEK_END");
        let b = one(Event { kind: 0, nr: syscall_nr("getpid").unwrap(), fd: -1, ..Default::default() });
        assert_eq!(syscall_args(&b, 0), "");
        let b = one(Event { kind: 0, nr: syscall_nr("dup2").unwrap(), fd: 3, addr: 1, ..Default::default() });
        assert_eq!(syscall_args(&b, 0), "fd=3 fd2=1");
        assert_eq!(syscall_args(&b, 1), "");
        let mut s = String::new();
        assert_eq!(write_flags(&mut s, &b, 0).map(|r| r.is_ok()), None);
    }

    #[test]
    fn block_and_proc_details() {
        let b = one(Event {
            kind: 1,
            nr: 1,
            flags: Rwbs::SYNC,
            dev: 7 << 20,
            off: 2048,
            bytes: 4096,
            qtime: 10_000,
            ..Default::default()
        });
        let mut s = String::new();
        write_args(&mut s, &b, 0, Some("loop0")).unwrap();
        assert_eq!(s, "dev=loop0(7:0) sector=2048 bytes=4096 (4.00KiB) rwbs=WS qtime=10.0us");
        let b = one(Event { kind: 2, nr: 1, path: "/usr/bin/ls".into(), ..Default::default() });
        let mut s = String::new();
        write_args(&mut s, &b, 0, None).unwrap();
        assert_eq!(s, "path=/usr/bin/ls");
    }

    #[test]
    fn flags() {
        assert_eq!(open_flags(0), "O_RDONLY");
        assert_eq!(open_flags(0o4010002), "O_RDWR|O_SYNC");
        assert_eq!(open_flags(0o40001), "O_WRONLY|O_DIRECT");
        assert_eq!(open_flags(0o20200000), "O_RDONLY|O_TMPFILE");
        assert_eq!(open_flags(0o100000000 | 1), "O_WRONLY|0x1000000");
        assert_eq!(whence_name(9), "?");
    }
}

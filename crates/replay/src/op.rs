//! The unit of a replay plan: one operation of one recorded thread.
//!
//! An [`Op`] is a fixed 64-byte record. Which fields an operation uses depends on its
//! [`OpKind`] (see the table in docs/REPLAY.md); unused fields are 0, or [`NONE`] for slot and
//! path fields.

/// "No slot / no path" in the u32 fields of an [`Op`].
pub const NONE: u32 = u32::MAX;

macro_rules! kinds {
    ($( $(#[$doc:meta])* $name:ident = $v:expr, $s:expr; )*) => {
        /// What an operation does. The discriminant is the byte stored in a plan file.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        #[repr(u8)]
        pub enum OpKind {
            $( $(#[$doc])* $name = $v, )*
        }

        impl OpKind {
            /// Every kind, in discriminant order.
            pub const ALL: &'static [OpKind] = &[$(OpKind::$name,)*];

            /// Decode a stored byte.
            pub fn from_u8(v: u8) -> Option<OpKind> {
                match v {
                    $( $v => Some(OpKind::$name), )*
                    _ => None,
                }
            }

            /// Lower-case name used in statistics and JSON.
            pub fn name(self) -> &'static str {
                match self {
                    $( OpKind::$name => $s, )*
                }
            }

            /// The kind with this [`OpKind::name`].
            pub fn from_name(s: &str) -> Option<OpKind> {
                match s {
                    $( $s => Some(OpKind::$name), )*
                    _ => None,
                }
            }
        }
    };
}

kinds! {
    /// Not an operation: wait until thread `slot` has completed `size` operations.
    #[default]
    Wait = 0, "wait";
    /// openat2(`path`, `flags`, `mode`) -> slot `slot2`.
    Open = 1, "open";
    /// close(`slot`).
    Close = 2, "close";
    /// read(`slot`, `size`) at the file position; `off` is the offset the data lands at.
    Read = 3, "read";
    /// write(`slot`, `size`) at the file position; `off` is where the data lands (for its pattern).
    Write = 4, "write";
    /// pread64(`slot`, `size`, `off`).
    Pread = 5, "pread";
    /// pwrite64(`slot`, `size`, `off`).
    Pwrite = 6, "pwrite";
    /// readv(`slot`, one buffer of `size` bytes).
    Readv = 7, "readv";
    /// writev(`slot`, one buffer of `size` bytes); `off` as for write.
    Writev = 8, "writev";
    /// preadv(`slot`, `size`, `off`).
    Preadv = 9, "preadv";
    /// pwritev(`slot`, `size`, `off`).
    Pwritev = 10, "pwritev";
    /// lseek(`slot`, `off`, whence `flags`).
    Lseek = 11, "lseek";
    /// fsync(`slot`).
    Fsync = 12, "fsync";
    /// fdatasync(`slot`).
    Fdatasync = 13, "fdatasync";
    /// sync_file_range(`slot`, `off`, `size`, `flags`).
    SyncFileRange = 14, "sync_file_range";
    /// syncfs(`slot`), or of every sandbox root when `slot` is [`NONE`] (a recorded `sync`).
    Syncfs = 15, "syncfs";
    /// ftruncate(`slot`, `size`).
    Ftruncate = 16, "ftruncate";
    /// truncate(`path`, `size`).
    Truncate = 17, "truncate";
    /// fallocate(`slot`, mode `mode`, `off`, `size`).
    Fallocate = 18, "fallocate";
    /// posix_fadvise(`slot`, `off`, `size`, advice `flags`).
    Fadvise = 19, "fadvise";
    /// readahead(`slot`, `off`, `size`).
    Readahead = 20, "readahead";
    /// fstat(`slot`) (statx with [`Op::STATX`], mask `mode`).
    Fstat = 21, "fstat";
    /// stat(`path`), not following a final symlink when `flags` has AT_SYMLINK_NOFOLLOW
    /// (statx with [`Op::STATX`], mask `mode`).
    Stat = 22, "stat";
    /// faccessat2(`path`, `mode`, `flags`).
    Access = 23, "access";
    /// statfs(`path`).
    Statfs = 24, "statfs";
    /// fstatfs(`slot`).
    Fstatfs = 25, "fstatfs";
    /// mkdir(`path`, `mode`).
    Mkdir = 26, "mkdir";
    /// rmdir(`path`).
    Rmdir = 27, "rmdir";
    /// unlink(`path`).
    Unlink = 28, "unlink";
    /// renameat2(`path`, `path2`, `flags`).
    Rename = 29, "rename";
    /// link(`path`, `path2`): a new name `path2` for `path`.
    Link = 30, "link";
    /// symlink: a link at `path` whose target is literal `path2`.
    Symlink = 31, "symlink";
    /// readlink(`path`, `size`).
    Readlink = 32, "readlink";
    /// chmod(`path`, `mode`).
    Chmod = 33, "chmod";
    /// fchmod(`slot`, `mode`).
    Fchmod = 34, "fchmod";
    /// chown(`path`, unchanged owner), not following with AT_SYMLINK_NOFOLLOW in `flags`.
    Chown = 35, "chown";
    /// fchown(`slot`, unchanged owner).
    Fchown = 36, "fchown";
    /// utimensat(`path`, now), `flags` as recorded.
    Utimens = 37, "utimens";
    /// futimens(`slot`, now).
    Futimens = 38, "futimens";
    /// getdents64(`slot`, `size`).
    Getdents = 39, "getdents";
    /// dup/dup2/dup3(`slot`) -> slot `slot2`; `path` is the slot whose fd number it replaces
    /// (dup2 onto an open fd), or [`NONE`]; `flags` are dup3's flags.
    Dup = 40, "dup";
    /// fcntl(`slot`, cmd `flags`, arg `mode`): F_GETFL, F_SETFL, F_GETFD, F_SETFD.
    Fcntl = 41, "fcntl";
    /// mmap(`slot`, `size`, prot `mode`, `flags`, `off`) -> mapping `slot2`.
    Mmap = 42, "mmap";
    /// munmap(mapping `slot2` + `off`, `size`).
    Munmap = 43, "munmap";
    /// msync(mapping `slot2` + `off`, `size`, `flags`); the first `mode` bytes of the range are
    /// written with generated data first (stores to a shared mapping are not recorded).
    Msync = 44, "msync";
    /// copy_file_range(in `slot2` at [`Op::off2`], out `slot` at `off`, `size`); an offset of -1
    /// is the fd's file position (which the call advances).
    CopyRange = 45, "copy_file_range";
    /// sendfile(out `slot` at its position, in `slot2` at [`Op::off2`] (-1: its position), `size`).
    Sendfile = 46, "sendfile";
    /// ioctl(`slot`, FICLONE, `slot2`), or FICLONERANGE (`flags`) of `size` bytes from
    /// [`Op::off2`] to `off`; where the sandbox cannot clone, a copy of the same bytes.
    Ficlone = 47, "ficlone";
    /// mknodat(`path`, `mode`): a FIFO or an empty regular file (devices are not created).
    Mknod = 48, "mknod";
    /// linkat(`slot`, "", `path`, AT_EMPTY_PATH): a name for an open file (`O_TMPFILE`).
    LinkFd = 49, "link_fd";
    /// A change to the tree the replay cannot make (syscall number `flags`, `size` bytes, on
    /// `path` if known): always a divergence, so that a run never looks faithful without it.
    Unreplayed = 50, "unreplayed";
    /// getxattr(`path`, or fgetxattr(`slot`), name literal `path2`, `size`); `mode` 1: not
    /// following a final symlink (the `l` variants).
    Getxattr = 51, "getxattr";
    /// setxattr(`path` or `slot`, name literal `path2`, `size` bytes of generated data, `flags`);
    /// `mode` as for getxattr.
    Setxattr = 52, "setxattr";
    /// listxattr(`path` or `slot`, `size`); `mode` as for getxattr.
    Listxattr = 53, "listxattr";
    /// removexattr(`path` or `slot`, name literal `path2`); `mode` as for getxattr.
    Removexattr = 54, "removexattr";
}

/// One operation. 64 bytes on disk, little-endian, in field order; in memory the same 64 bytes
/// (`repr(C)`: the two bytes after `bits` are padding), so that a little-endian machine decodes
/// a plan's operations straight into place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Op {
    /// Recorded start time, ns after the plan's time origin.
    pub ts: u64,
    /// Byte count or length.
    pub size: u64,
    /// File offset (or offset into a mapping).
    pub off: i64,
    /// Recorded result (negative errno on failure).
    pub ret: i64,
    /// The fd slot operated on (or, for [`OpKind::Wait`], the thread waited for).
    pub slot: u32,
    /// The slot (or mapping) created.
    pub slot2: u32,
    /// Path id (see [`crate::PathTable`]).
    pub path: u32,
    /// Second path id, or literal id for a symlink target.
    pub path2: u32,
    /// Flags (open flags, whence, at-flags, fcntl cmd, mmap flags, ...).
    pub flags: u32,
    /// Mode (open mode, mmap prot, fcntl arg, statx mask, msync dirty length).
    pub mode: u32,
    /// What the operation does.
    pub kind: OpKind,
    /// [`Op::IMPLICIT`] and the other bits.
    pub bits: u8,
    /// Position in the plan's global order (dependencies point to lower positions only).
    pub seq: u32,
}

/// Size of an [`Op`] in a plan file.
pub const OP_BYTES: usize = 64;

// The in-memory layout is the file's (see `plan::file`).
const _: () = assert!(std::mem::size_of::<Op>() == OP_BYTES && std::mem::align_of::<Op>() == 8);
const _: () = assert!(std::mem::offset_of!(Op, slot) == 32 && std::mem::offset_of!(Op, mode) == 52);
const _: () = assert!(std::mem::offset_of!(Op, kind) == 56 && std::mem::offset_of!(Op, bits) == 57);
const _: () = assert!(std::mem::offset_of!(Op, seq) == 60);

impl Op {
    /// Not a recorded syscall but what the kernel did implicitly: fds inherited over fork,
    /// closed at exec or exit; mappings dropped at exit.
    pub const IMPLICIT: u8 = 1;
    /// Compare only success or failure with the recording, not the value returned.
    pub const SIZE_UNKNOWN: u8 = 2;
    /// Renames or removes a directory: cached directory fds must be looked up again.
    pub const DIR_NS: u8 = 4;
    /// Counted as performed but issues no syscall (munmap of a mapping other processes share).
    pub const NOOP: u8 = 8;
    /// Stat through statx rather than newfstatat.
    pub const STATX: u8 = 16;
    /// An fd operation recorded in its `*at(fd, "", AT_EMPTY_PATH)` form (which works on an
    /// `O_PATH` fd, where fchmod and futimens fail with EBADF).
    pub const AT_FORM: u8 = 32;
    /// An fd operation recorded as a path call on `/proc/self/fd/N` (chmod, utimensat, ...),
    /// replayed the same way (`flags`: AT_SYMLINK_NOFOLLOW as recorded).
    pub const PROC_FD: u8 = 64;

    /// A dependency marker: wait until thread `thread` has completed `count` operations.
    pub fn wait(thread: u32, count: u32, seq: u32, ts: u64) -> Op {
        Op { kind: OpKind::Wait, slot: thread, size: count as u64, seq, ts, ..Op::blank() }
    }

    /// An op of kind `kind` with every slot and path field [`NONE`].
    pub fn blank() -> Op {
        Op { slot: NONE, slot2: NONE, path: NONE, path2: NONE, ..Op::default() }
    }

    /// True for bits set.
    pub fn has(&self, bit: u8) -> bool {
        self.bits & bit != 0
    }

    /// The offset in the input file of a two-fd copy ([`OpKind::CopyRange`],
    /// [`OpKind::Sendfile`], [`OpKind::Ficlone`]), stored in `path` (low 32 bits) and `path2`
    /// (high); -1: the input fd's file position.
    pub fn off2(&self) -> i64 {
        ((self.path2 as u64) << 32 | self.path as u64) as i64
    }

    /// Set [`Op::off2`].
    pub fn set_off2(&mut self, off: i64) {
        self.path = off as u64 as u32;
        self.path2 = ((off as u64) >> 32) as u32;
    }

    /// An extended-attribute call.
    pub fn xattr(&self) -> bool {
        matches!(self.kind, OpKind::Getxattr | OpKind::Setxattr | OpKind::Listxattr | OpKind::Removexattr)
    }

    /// A two-fd copy: `slot2` is its input fd.
    pub fn copies(&self) -> bool {
        matches!(self.kind, OpKind::CopyRange | OpKind::Sendfile | OpKind::Ficlone)
    }

    /// Append the 64-byte little-endian encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.ts.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.off.to_le_bytes());
        out.extend_from_slice(&self.ret.to_le_bytes());
        for v in [self.slot, self.slot2, self.path, self.path2, self.flags, self.mode] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.push(self.kind as u8);
        out.push(self.bits);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.seq.to_le_bytes());
    }

    /// Decode 64 bytes; `None` for an unknown kind or non-zero padding.
    pub fn decode(b: &[u8; OP_BYTES]) -> Option<Op> {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or_default());
        if b[58] != 0 || b[59] != 0 {
            return None;
        }
        Some(Op {
            ts: u64_at(0),
            size: u64_at(8),
            off: u64_at(16) as i64,
            ret: u64_at(24) as i64,
            slot: u32_at(32),
            slot2: u32_at(36),
            path: u32_at(40),
            path2: u32_at(44),
            flags: u32_at(48),
            mode: u32_at(52),
            kind: OpKind::from_u8(b[56])?,
            bits: b[57],
            seq: u32_at(60),
        })
    }

    /// How the replayed result is compared with the recorded one.
    pub fn compare_mode(&self) -> Compare {
        if self.has(Op::SIZE_UNKNOWN) {
            return Compare::Success;
        }
        match self.kind {
            OpKind::Open | OpKind::Dup | OpKind::Mmap => Compare::Success,
            // F_GETFL returns flags the replay opens differently (O_CLOEXEC, O_LARGEFILE).
            OpKind::Fcntl => Compare::Success,
            _ => Compare::Value,
        }
    }

    /// Uses the fd in `slot`.
    pub fn uses_slot(&self) -> bool {
        use OpKind::*;
        matches!(
            self.kind,
            Close
                | Read
                | Write
                | Pread
                | Pwrite
                | Readv
                | Writev
                | Preadv
                | Pwritev
                | Lseek
                | Fsync
                | Fdatasync
                | SyncFileRange
                | Ftruncate
                | Fallocate
                | Fadvise
                | Readahead
                | Fstat
                | Fstatfs
                | Fchmod
                | Fchown
                | Futimens
                | Getdents
                | Dup
                | Fcntl
                | CopyRange
                | Sendfile
                | Ficlone
                | LinkFd
        ) || (self.kind == Mmap || self.kind == Syncfs || self.xattr()) && self.slot != NONE
    }

    /// Reads data into a buffer of `size` bytes.
    pub fn reads_data(&self) -> bool {
        matches!(
            self.kind,
            OpKind::Read
                | OpKind::Pread
                | OpKind::Readv
                | OpKind::Preadv
                | OpKind::Getdents
                | OpKind::Readlink
                | OpKind::Getxattr
                | OpKind::Listxattr
        )
    }

    /// Writes `size` bytes of generated data.
    pub fn writes_data(&self) -> bool {
        matches!(self.kind, OpKind::Write | OpKind::Pwrite | OpKind::Writev | OpKind::Pwritev | OpKind::Setxattr)
    }

    /// Takes a path argument.
    pub fn uses_path(&self) -> bool {
        use OpKind::*;
        matches!(
            self.kind,
            Open | Truncate
                | Stat
                | Access
                | Statfs
                | Mkdir
                | Rmdir
                | Unlink
                | Rename
                | Link
                | Symlink
                | Readlink
                | Chmod
                | Chown
                | Utimens
                | Mknod
                | LinkFd
        ) || (self.kind == Unreplayed || self.xattr()) && self.path != NONE
    }
}

/// How a replayed result is compared with the recorded one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// Both succeeded, or both failed with the same errno.
    Success,
    /// The same value (bytes transferred, new position, ...), or the same errno.
    Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_roundtrips_through_64_bytes() {
        let op = Op {
            ts: 1 << 40,
            size: 4096,
            off: -1,
            ret: -2,
            slot: 7,
            slot2: NONE,
            path: 3,
            path2: 9,
            flags: 0o102,
            mode: 0o644,
            kind: OpKind::Open,
            bits: Op::IMPLICIT | Op::STATX,
            seq: 123,
        };
        let mut v = Vec::new();
        op.encode(&mut v);
        assert_eq!(v.len(), OP_BYTES);
        assert_eq!(Op::decode(v.as_slice().try_into().unwrap()), Some(op));
        v[56] = 200;
        assert_eq!(Op::decode(v.as_slice().try_into().unwrap()), None, "unknown kind");
    }

    #[test]
    fn kind_names_are_unique_and_roundtrip() {
        for &k in OpKind::ALL {
            assert_eq!(OpKind::from_u8(k as u8), Some(k));
            assert_eq!(OpKind::from_name(k.name()), Some(k));
        }
        let mut names: Vec<_> = OpKind::ALL.iter().map(|k| k.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), OpKind::ALL.len());
    }
}

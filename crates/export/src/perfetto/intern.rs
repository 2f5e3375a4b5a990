//! Interning per sequence (Perfetto's `InternedData`): slice names, categories, argument names
//! and repeated string values (paths, error names) are written once and referred to by number.
//!
//! The tables are bounded: past [`MAX_STRINGS`] string values or [`MAX_BYTES`] of them, the next
//! packet clears the sequence's incremental state (`SEQ_INCREMENTAL_STATE_CLEARED`) and the
//! tables start afresh, as Perfetto's own `TraceWriter` does; a trace of any length holds at
//! most that much in them.

use std::collections::HashMap;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;

use super::proto::{self, interned};

/// Most string values interned before the tables are cleared.
pub const MAX_STRINGS: usize = 32_768;
/// Most bytes of interned strings before the tables are cleared.
pub const MAX_BYTES: usize = 2 << 20;

/// A string value of at most [`Short::MAX`] bytes (most: labels, wakers, errors), with its
/// length in the last byte: compared and hashed as three words, without a call.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Short([u64; 3]);

impl std::hash::Hash for Short {
    /// Three words (an array would be hashed as bytes, through the hasher's long path).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for w in self.0 {
            state.write_u64(w);
        }
    }
}

impl Short {
    const MAX: usize = 23;

    /// Its place in [`Interner::recent`].
    #[inline]
    fn slot(&self) -> usize {
        let [a, b, c] = self.0;
        ((a ^ b.rotate_left(21) ^ c.rotate_left(42)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - RECENT_BITS)) as usize
    }

    /// `s`, of at most [`Short::MAX`] bytes.
    #[inline]
    fn new(s: &[u8]) -> Short {
        let (a, rest) = s.split_at(s.len().min(8));
        let (b, c) = rest.split_at(rest.len().min(8));
        Short([word(a), word(b), word(c) | (s.len() as u64) << 56])
    }
}

/// Up to 8 bytes as a little-endian word, read whole rather than copied byte by byte through
/// memory (a copy then a wider read stalls the store buffer).
#[inline]
pub(super) fn word(s: &[u8]) -> u64 {
    let n = s.len();
    let u32_at = |k: usize| u64::from(u32::from_le_bytes(s[k..k + 4].try_into().expect("4 bytes")));
    match n {
        8.. => u64::from_le_bytes(s[..8].try_into().expect("8 bytes")),
        // Two reads that overlap: the bytes they share are the same in both.
        4..=7 => u32_at(0) | u32_at(n - 4) << (8 * (n - 4)),
        1..=3 => u64::from(s[0]) | u64::from(s[n / 2]) << (8 * (n / 2)) | u64::from(s[n - 1]) << (8 * (n - 1)),
        0 => 0,
    }
}

/// Places in [`Interner::recent`]: 2^this.
const RECENT_BITS: u32 = 8;
/// Slice names found by index rather than hashed: kinds 0 to 2, numbers below this.
const DIRECT_NAMES: u32 = 512;

/// The argument names of slices (debug annotations), interned once per generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Arg {
    Fd,
    Path,
    Path2,
    Bytes,
    Ret,
    Error,
    Offset,
    WhyCpu,
    WhyRunq,
    WhyIo,
    WhyLock,
    WhyIpc,
    WhyTimer,
    WhyFault,
    WhyOther,
    WhyUnknown,
    WhyMain,
    Waker,
    WakerWasIn,
    CpuHeldBy,
    WokenByRequest,
    FaultPath,
    Disk,
    Sector,
    QueuedNs,
    Rwbs,
    Issuer,
    ExitCode,
    ParentPid,
    ThreadCpu,
    ThreadRunq,
    Args,
}

impl Arg {
    const ALL: usize = Arg::Args as usize + 1;

    /// The name shown in Perfetto's argument list (`debug.NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Arg::Fd => "fd",
            Arg::Path => "path",
            Arg::Path2 => "path2",
            Arg::Bytes => "bytes",
            Arg::Ret => "ret",
            Arg::Error => "error",
            Arg::Offset => "offset",
            Arg::WhyCpu => "why.cpu_ns",
            Arg::WhyRunq => "why.runq_ns",
            Arg::ThreadCpu => "thread.cpu_ns",
            Arg::ThreadRunq => "thread.runq_ns",
            Arg::WhyIo => "why.io_ns",
            Arg::WhyLock => "why.lock_ns",
            Arg::WhyIpc => "why.ipc_ns",
            Arg::WhyTimer => "why.timer_ns",
            Arg::WhyFault => "why.fault_ns",
            Arg::WhyOther => "why.other_ns",
            Arg::WhyUnknown => "why.unknown_ns",
            Arg::WhyMain => "why.main",
            Arg::Waker => "why.waker",
            Arg::WakerWasIn => "why.waker_was_in",
            Arg::CpuHeldBy => "why.cpu_held_by",
            Arg::WokenByRequest => "why.woken_by_request",
            Arg::FaultPath => "why.page_fault_in",
            Arg::Disk => "disk",
            Arg::Sector => "sector",
            Arg::QueuedNs => "queued_ns",
            Arg::Rwbs => "rwbs",
            Arg::Issuer => "issuer",
            Arg::ExitCode => "exit_code",
            Arg::ParentPid => "parent_pid",
            Arg::Args => "args",
        }
    }

    /// The attribution parts, in the order of `WHY_PART_NAMES`.
    pub const WHY: [Arg; 9] = [
        Arg::WhyCpu,
        Arg::WhyRunq,
        Arg::WhyIo,
        Arg::WhyLock,
        Arg::WhyIpc,
        Arg::WhyTimer,
        Arg::WhyFault,
        Arg::WhyOther,
        Arg::WhyUnknown,
    ];
}

/// A long string value interned: its iid and its bytes' place in [`Interner::long`].
#[derive(Clone, Copy)]
struct Long {
    iid: u64,
    at: u32,
    len: u32,
}

/// The interning tables of one sequence.
pub struct Interner {
    /// Slice names by key (kind and operation number, or a fixed name's key): most by index
    /// (0: not yet), the others hashed.
    direct_names: Vec<u64>,
    names: HashMap<u32, u64, RandomState>,
    categories: [u64; 4],
    args: [u64; Arg::ALL],
    /// String values by their bytes: those of up to [`Short::MAX`] bytes; the others by the
    /// hash of their bytes, which are kept in `long` (one buffer, reused by every generation:
    /// no allocation per path), and the rare one whose hash another has, by its bytes.
    short: HashMap<Short, u64, RandomState>,
    strings: HashMap<u64, Long, RandomState>,
    long: Vec<u8>,
    collided: HashMap<Box<[u8]>, u64, RandomState>,
    hasher: RandomState,
    /// Short strings looked up lately, each at a place given by its words (iid 0: none): a
    /// slice's values are mostly a few repeated ones (labels, wakers), found here without
    /// hashing and probing the table. Holds only entries of `short`.
    recent: Box<[(Short, u64)]>,
    string_bytes: usize,
    /// Bytes of the entries of this generation, as written (`InternedData` fields), and the most
    /// allowed before the tables are cleared ([`Interner::limit_entries`]).
    entry_bytes: usize,
    max_entry_bytes: usize,
    next_iid: u64,
    /// Entries added since the last [`Interner::clear_new`], encoded as `InternedData` fields.
    new: Vec<u8>,
    /// The tables were cleared: the next packet must say so.
    cleared: bool,
    /// Times the tables were cleared because they were full.
    pub resets: u64,
}

impl Default for Interner {
    fn default() -> Self {
        Interner {
            direct_names: vec![0; 3 * DIRECT_NAMES as usize],
            names: HashMap::default(),
            categories: [0; 4],
            args: [0; Arg::ALL],
            short: HashMap::default(),
            recent: vec![(Short([0; 3]), 0); 1 << RECENT_BITS].into_boxed_slice(),
            strings: HashMap::default(),
            long: Vec::new(),
            collided: HashMap::default(),
            hasher: RandomState::default(),
            string_bytes: 0,
            entry_bytes: 0,
            max_entry_bytes: usize::MAX,
            next_iid: 1,
            new: Vec::new(),
            cleared: true,
            resets: 0,
        }
    }
}

impl Interner {
    fn add(&mut self, field: u32, s: &[u8]) -> u64 {
        let iid = self.next_iid;
        self.next_iid += 1;
        let out = &mut self.new;
        let at = out.len();
        let m = proto::begin(out, field);
        proto::uint(out, interned::IID, iid);
        proto::bytes(out, interned::NAME, s);
        proto::end(out, m);
        self.entry_bytes += out.len() - at;
        iid
    }

    /// Clears the tables once the entries of a generation take `bytes` as written. A file cut
    /// into parts starts each part with the entries of the generation so far (slices encoded
    /// before the cut use them): were those near the size of a part, every part would be cut
    /// again at its first slice.
    pub fn limit_entries(&mut self, bytes: usize) {
        self.max_entry_bytes = bytes;
    }

    /// Clears the tables when full (before a packet's entries are interned, so that one packet
    /// never refers to two generations). They keep their room: the next generation fills them
    /// without growing them again.
    pub fn maybe_reset(&mut self) {
        if self.short.len() + self.strings.len() + self.collided.len() >= MAX_STRINGS
            || self.string_bytes >= MAX_BYTES
            || self.entry_bytes >= self.max_entry_bytes
        {
            self.resets += 1;
            self.direct_names.fill(0);
            self.names.clear();
            self.categories = [0; 4];
            self.args = [0; Arg::ALL];
            self.short.clear();
            self.strings.clear();
            self.long.clear();
            self.collided.clear();
            self.recent.fill((Short([0; 3]), 0));
            self.string_bytes = 0;
            self.entry_bytes = 0;
            self.next_iid = 1;
            self.new.clear();
            self.cleared = true;
        }
    }

    /// The iid of the slice name under `key`, made by `name` the first time.
    #[inline]
    pub fn name(&mut self, key: u32, name: impl FnOnce() -> String) -> u64 {
        let (kind, nr) = (key >> 16, key & 0xffff);
        let direct = (kind < 3 && nr < DIRECT_NAMES).then(|| (kind * DIRECT_NAMES + nr) as usize);
        if let Some(&iid) = direct.and_then(|i| self.direct_names.get(i)).filter(|&&iid| iid != 0) {
            return iid;
        }
        if let Some(&iid) = self.names.get(&key) {
            return iid;
        }
        let iid = self.add(interned::EVENT_NAMES, name().as_bytes());
        match direct.and_then(|i| self.direct_names.get_mut(i)) {
            Some(d) => *d = iid,
            None => {
                self.names.insert(key, iid);
            }
        }
        iid
    }

    /// The iid of category `i` (0 syscall, 1 block, 2 proc, 3 latscope).
    #[inline]
    pub fn category(&mut self, i: usize) -> u64 {
        if self.categories[i] == 0 {
            let name = ["syscall", "block", "proc", "latscope"][i];
            self.categories[i] = self.add(interned::EVENT_CATEGORIES, name.as_bytes());
        }
        self.categories[i]
    }

    /// The iid of an argument name.
    #[inline]
    pub fn arg(&mut self, a: Arg) -> u64 {
        let i = a as usize;
        if self.args[i] == 0 {
            self.args[i] = self.add(interned::DEBUG_ANNOTATION_NAMES, a.name().as_bytes());
        }
        self.args[i]
    }

    /// The iid of a string value (UTF-8 bytes).
    #[inline]
    pub fn string(&mut self, s: &[u8]) -> u64 {
        if s.len() <= Short::MAX {
            let k = Short::new(s);
            let slot = k.slot();
            if let Some(&(Short(r), iid)) = self.recent.get(slot) {
                // Word by word, in registers (an array compare goes through memory).
                if (iid != 0) & (r[0] == k.0[0]) & (r[1] == k.0[1]) & (r[2] == k.0[2]) {
                    return iid;
                }
            }
            let iid = match self.short.get(&k) {
                Some(&iid) => iid,
                None => {
                    let iid = self.add(interned::DEBUG_ANNOTATION_STRING_VALUES, s);
                    self.string_bytes += s.len();
                    self.short.insert(k, iid);
                    iid
                }
            };
            if let Some(r) = self.recent.get_mut(slot) {
                *r = (k, iid);
            }
            return iid;
        }
        let hash = self.hasher.hash_one(s);
        match self.strings.get(&hash) {
            Some(l) if &self.long[l.at as usize..(l.at + l.len) as usize] == s => return l.iid,
            Some(_) => {
                if let Some(&iid) = self.collided.get(s) {
                    return iid;
                }
                let iid = self.add(interned::DEBUG_ANNOTATION_STRING_VALUES, s);
                self.string_bytes += s.len();
                self.collided.insert(s.into(), iid);
                return iid;
            }
            None => {}
        }
        let iid = self.add(interned::DEBUG_ANNOTATION_STRING_VALUES, s);
        self.string_bytes += s.len();
        let at = self.long.len() as u32;
        self.long.extend_from_slice(s);
        self.strings.insert(hash, Long { iid, at, len: s.len() as u32 });
        iid
    }

    /// Whether the next packet starts a generation (it must carry `SEQ_INCREMENTAL_STATE_CLEARED`
    /// and the packet defaults); reading it says it will.
    pub fn take_cleared(&mut self) -> bool {
        std::mem::take(&mut self.cleared)
    }

    /// The entries added since the last [`Interner::clear_new`], as the body of an
    /// `InternedData` (empty: none).
    pub fn new_entries(&self) -> &[u8] {
        &self.new
    }

    /// Forgets the entries added: they were written.
    pub fn clear_new(&mut self) {
        self.new.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_string_is_its_bytes_and_length() {
        let all = b"abcdefghijklmnopqrstuvw";
        for n in 0..=Short::MAX {
            let mut b = [0u8; 24];
            b[..n].copy_from_slice(&all[..n]);
            b[23] = n as u8;
            let w = |k: usize| u64::from_le_bytes(b[k * 8..k * 8 + 8].try_into().unwrap());
            assert!(Short::new(&all[..n]) == Short([w(0), w(1), w(2)]), "{n} bytes");
        }
    }

    #[test]
    fn a_string_has_one_iid_short_or_long() {
        let mut it = Interner::default();
        let long = "a path longer than twenty-three bytes";
        let (a, b, c) = (it.string(b"lock"), it.string(long.as_bytes()), it.string(b""));
        assert_eq!((it.string(b"lock"), it.string(long.as_bytes()), it.string(b"")), (a, b, c));
        assert_eq!(it.string(b"lock\0"), c + 1, "a new string");
        assert_eq!(it.string_bytes, 4 + long.len() + 5);
    }

    /// Long strings are found by the hash of their bytes: one whose hash another has (made so
    /// here) still gets an iid of its own, the same each time.
    #[test]
    fn a_long_string_whose_hash_another_has_gets_its_own_iid() {
        let mut it = Interner::default();
        let (a, b) = (b"/usr/share/doc/one/changelog.gz".as_slice(), b"/usr/share/doc/two/changelog.gz".as_slice());
        let ia = it.string(a);
        let first = *it.strings.values().next().unwrap();
        it.strings.insert(it.hasher.hash_one(b), first);
        let ib = it.string(b);
        assert_ne!(ia, ib);
        assert_eq!((it.string(a), it.string(b)), (ia, ib));
        assert_eq!(it.collided.len(), 1);
    }

    /// A full table starts a new generation: iids from 1 again, entries written again, and the
    /// next packet told to clear the sequence's state.
    #[test]
    fn a_reset_starts_the_tables_afresh() {
        let mut it = Interner::default();
        it.take_cleared();
        let long = b"/a/path/longer/than/twenty-three/bytes";
        let first = (it.string(long), it.string(b"short"), it.arg(Arg::Fd));
        it.clear_new();
        for k in 0..MAX_STRINGS {
            it.string(format!("/a/long/path/number/{k:08}").as_bytes());
        }
        it.clear_new();
        it.maybe_reset();
        assert!(it.take_cleared());
        assert_eq!((it.string(long), it.string(b"short"), it.arg(Arg::Fd)), first);
        assert!(!it.new_entries().is_empty(), "written again in the new generation");
        it.maybe_reset();
        assert!(!it.take_cleared(), "not full: no reset");
    }
}

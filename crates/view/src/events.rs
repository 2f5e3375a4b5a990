//! One line per event, like sysdig's default output, or one JSON object per event, in the order
//! of their start (or end) time ([`Reorder`]).
//!
//! [`write_line`] and [`write_json`] append to a reused buffer without allocating per event (the
//! JSON members in the order `serde_json` writes a map's: sorted by name); [`line`] and [`json`]
//! are the same as a `String` and a `serde_json::Value`.

use latscope_chain::ChainIndex;
use latscope_event::escape::{json_ascii_controls, printable_ascii};
use latscope_event::syscalls::desc;
use latscope_event::units::{write_bytes, write_ns};
use latscope_event::{
    args, dev_major_minor, errno_name, format_result, op_name, syscall_name, BlockOp, EventBatch, EventKind, FdType,
    ProcOp, Rwbs, TraceHeader, WHY_PARTS, WHY_PART_NAMES,
};
use serde_json::{json, Map, Value};
use std::fmt::Write;

pub use crate::reorder::{Reorder, SortBy};

/// How to print the time column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeFormat {
    /// Wall-clock time of day, `HH:MM:SS.nnnnnnnnn` (UTC).
    Wall,
    /// Seconds since the start of the recording.
    Relative,
    /// Raw CLOCK_MONOTONIC ns.
    Monotonic,
}

/// Open flags as `O_WRONLY|O_CREAT|O_TRUNC` (the event crate's, shared with the filter's fields).
pub use latscope_event::args::open_flags;

/// Format a monotonic timestamp per `fmt`.
pub fn fmt_time(h: &TraceHeader, ts: u64, fmt: TimeFormat) -> String {
    let mut s = String::new();
    Buf::new(&mut s).time(h, ts, fmt);
    s
}

/// An integer's sign and magnitude, for [`push_int`].
pub(crate) trait Decimal: Copy {
    /// Whether it is negative, and its magnitude.
    fn split(self) -> (bool, u64);
}

macro_rules! decimal {
    (unsigned: $($t:ty),*; signed: $($s:ty),*) => {
        $( impl Decimal for $t {
            #[inline(always)]
            fn split(self) -> (bool, u64) {
                (false, self as u64)
            }
        } )*
        $( impl Decimal for $s {
            #[inline(always)]
            fn split(self) -> (bool, u64) {
                (self < 0, self.unsigned_abs() as u64)
            }
        } )*
    };
}
decimal!(unsigned: u8, u16, u32, u64, usize; signed: i8, i16, i32, i64, isize);

/// The two-digit numbers 00 to 99, each as its two ASCII digits.
const DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819202122232425262728293031323334353637383940414243444546474849\
5051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";

/// The eight decimal digits of `v` (below 10^8, zero-padded) as the bytes of a `u64` from its
/// lowest byte up (the first digit lowest): found in the lanes of one integer (two halves of four
/// digits, then four pairs, then eight digits) by a few multiplications, where dividing by 100
/// pair after pair is a chain of dependent ones (the longest latency of writing an event).
#[inline(always)]
fn eight_digits(v: u32) -> u64 {
    debug_assert!(v < 100_000_000);
    let v = u64::from(v);
    // Lanes of 32 bits: the first four digits, the last four.
    let x = (v / 10_000) | ((v % 10_000) << 32);
    // Divided by 100 per lane (exact below 43 699); the remainders into lanes of 16 bits.
    let hi = ((x * 10_486) >> 20) & 0x0000_007f_0000_007f;
    let x = hi | ((x - hi * 100) << 16);
    // Divided by 10 per lane (exact below 179); the remainders into bytes.
    let hi = ((x * 103) >> 10) & 0x000f_000f_000f_000f;
    let x = hi | ((x - hi * 10) << 8);
    x + 0x3030_3030_3030_3030
}

/// Writes `v` below 10^8 as its `n` digits (1 to 8) at `out`, and 8 - `n` bytes of no meaning
/// after them.
///
/// # Safety
/// `out` must be valid for writes of 8 bytes.
#[inline(always)]
unsafe fn write_short(out: *mut u8, v: u32, n: usize) {
    debug_assert!((1..=8).contains(&n));
    let d = eight_digits(v) >> (8 * (8 - n));
    // SAFETY: the caller's.
    unsafe { std::ptr::write_unaligned(out as *mut [u8; 8], d.to_le_bytes()) };
}

/// Writes `v` in decimal at `out` as `Display` writes it, and returns its length; up to 20 bytes
/// are written (those after the number mean nothing).
///
/// # Safety
/// `out` must be valid for writes of 20 bytes.
#[inline(always)]
unsafe fn write_int(out: *mut u8, v: u64) -> usize {
    const E8: u64 = 100_000_000;
    // SAFETY (all): the pieces end at most 20 bytes after `out` (4 + 8 + 8 at most).
    unsafe {
        if v < E8 {
            let n = digit_count(v);
            write_short(out, v as u32, n);
            n
        } else if v < E8 * E8 {
            let (hi, lo) = ((v / E8) as u32, (v % E8) as u32);
            let n = digit_count(u64::from(hi));
            write_short(out, hi, n);
            write_short(out.add(n), lo, 8);
            n + 8
        } else {
            let (top, mid, lo) = ((v / (E8 * E8)) as u32, (v / E8 % E8) as u32, (v % E8) as u32);
            let n = digit_count(u64::from(top));
            write_short(out, top, n);
            write_short(out.add(n), mid, 8);
            write_short(out.add(n + 8), lo, 8);
            n + 16
        }
    }
}

/// Writes `v` as exactly `n` decimal digits, zero-padded (`v` below 10^`n`) at `out`: with `n`
/// its digit count, the number as `Display` writes it.
///
/// # Safety
/// `out` must be valid for writes of `n` bytes.
#[inline(always)]
unsafe fn write_fixed(out: *mut u8, mut v: u64, n: usize) {
    let mut k = n;
    // Eight at a time from the end (the nanoseconds of a time), then pairs.
    while k >= 8 {
        k -= 8;
        let d = eight_digits((v % 100_000_000) as u32);
        v /= 100_000_000;
        // SAFETY: k + 8 <= n.
        unsafe { std::ptr::write_unaligned(out.add(k) as *mut [u8; 8], d.to_le_bytes()) };
    }
    while k >= 2 {
        let d = (v % 100) as usize * 2;
        v /= 100;
        k -= 2;
        // SAFETY: k + 1 < n.
        unsafe {
            *out.add(k) = DIGIT_PAIRS[d];
            *out.add(k + 1) = DIGIT_PAIRS[d + 1];
        }
    }
    if k == 1 {
        // SAFETY: n >= 1.
        unsafe { *out = b'0' + (v % 10) as u8 };
    }
}

/// How many decimal digits `v` has: from its bit length (times log10 2, 1233 / 4096) and one
/// comparison, where `ilog10` compares step by step.
#[inline(always)]
fn digit_count(v: u64) -> usize {
    const POW10: [u64; 20] = {
        let mut p = [1u64; 20];
        let mut k = 1;
        while k < 20 {
            p[k] = p[k - 1] * 10;
            k += 1;
        }
        p
    };
    let t = (((64 - (v | 1).leading_zeros()) * 1233) >> 12) as usize;
    (t + usize::from(v >= POW10[t])).max(1)
}

/// An integer in decimal, as `Display` writes it.
#[inline(always)]
fn push_int<T: Decimal>(s: &mut String, v: T) {
    let (neg, v) = v.split();
    if neg {
        s.push('-');
    }
    // Most numbers of an event are one digit (zeros of fields a call does not have).
    if v < 10 {
        s.push(char::from(b'0' + v as u8));
        return;
    }
    // The digits are written in place: no formatted copy to append (a call to `memcpy` per
    // number cost `events --json` a tenth of its time).
    // SAFETY: only ASCII digits are written, so the string stays UTF-8.
    let buf = unsafe { s.as_mut_vec() };
    buf.reserve(20);
    let len = buf.len();
    // SAFETY: `reserve` made room for 20 bytes after `len`; the digits are written before the
    // length covers them.
    unsafe {
        let n = write_int(buf.as_mut_ptr().add(len), v);
        buf.set_len(len + n);
    }
}

/// The operation's name as [`op_name`] spells it.
fn write_op_name(s: &mut String, kind: u8, nr: u16) {
    match EventKind::from_u8(kind) {
        Some(EventKind::Syscall) => match syscall_name(nr) {
            Some(n) => s.push_str(n),
            None => {
                s.push_str("syscall_");
                push_int(s, nr);
            }
        },
        Some(EventKind::Block) => {
            s.push_str("block_");
            s.push_str(BlockOp::from_u16(nr).name());
        }
        Some(EventKind::Proc) => {
            s.push_str("proc_");
            s.push_str(ProcOp::from_u16(nr).map(|p| p.name()).unwrap_or("?"));
        }
        None => {
            s.push_str("kind");
            push_int(s, kind);
        }
    }
}

/// Name of a block device: `vda (254:0)` or just `254:0` when the header does not know it.
pub fn disk_label(h: &TraceHeader, dev: u32) -> String {
    let mut s = String::new();
    let _ = args::write_disk(&mut s, dev, h.disk_name(dev));
    s
}

/// The arguments part of a syscall line: `fd=3(<file>/etc/hosts) bytes=4096 off=0` (formatted by
/// [`latscope_event::args`], which the filter's `evt.args` field uses too).
pub fn syscall_args(b: &EventBatch, i: usize) -> String {
    args::syscall_args(b, i)
}

/// One event as a text line, with control characters escaped ([`crate::text::clean`]).
pub fn line(h: &TraceHeader, b: &EventBatch, i: usize, tf: TimeFormat) -> String {
    let mut s = String::with_capacity(160);
    write_line(&mut s, h, b, i, tf);
    s
}

/// The columns [`write_line`] reads (a scan of a trace need decode no other).
pub const LINE_COLUMNS: &[&str] = &[
    "kind", "ts", "lat", "comm", "pid", "tid", "nr", "ret", "fd", "fd_type", "path", "path2", "dirfd", "bytes", "off",
    "off2", "flags", "mode", "addr", "dev", "qtime",
];

/// [`line`] appended to `s`.
pub fn write_line(s: &mut String, h: &TraceHeader, b: &EventBatch, i: usize, tf: TimeFormat) {
    let from = s.len();
    {
        // Written through a [`Buf`], each column padded as it is written (no text moved after).
        let mut o = Buf::new(s);
        o.time(h, b.ts[i], tf);
        o.ch(' ');
        let mut lat = Small::new();
        let _ = write_ns(&mut lat, b.lat[i]);
        o.spaces(8usize.saturating_sub(lat.len));
        o.raw(lat.bytes());
        o.ch(' ');
        let comm = b.comm.get(i);
        o.put(comm);
        o.spaces(15usize.saturating_sub(chars(comm)));
        o.ch(' ');
        o.int_right(b.pid[i], 7);
        o.ch('/');
        o.int_left(b.tid[i], 7);
        o.ch(' ');
        match EventKind::from_u8(b.kind[i]) {
            Some(EventKind::Syscall) => {
                let nr = b.nr[i];
                match syscall_name(nr) {
                    Some(n) => o.put(n),
                    None => {
                        o.put("syscall_");
                        o.int(nr);
                    }
                }
                let at = o.pos;
                o.ch(' ');
                let _ = args::write_syscall_args(&mut o, b, i);
                if o.pos == at + 1 {
                    o.pos = at; // no arguments: no second space
                }
                o.put(" = ");
                let ret = b.ret[i];
                o.result(ret);
                if ret > 0 && desc(nr).is_io() {
                    o.put(" (");
                    let _ = write_bytes(&mut o, ret as u64);
                    o.ch(')');
                }
            }
            Some(EventKind::Block) => {
                o.put("block_");
                o.put(BlockOp::from_u16(b.nr[i]).name());
                o.ch(' ');
                let _ = args::write_block_args(&mut o, b, i, h.disk_name(b.dev[i]));
            }
            Some(EventKind::Proc) => match ProcOp::from_u16(b.nr[i]) {
                Some(op) => {
                    o.put("proc_");
                    o.put(op.name());
                    o.ch(' ');
                    let _ = args::write_proc_args(&mut o, b, i);
                }
                None => o.put("proc_?"),
            },
            None => {
                let _ = write!(o, "unknown kind {}", b.kind[i]);
            }
        }
    }
    // Names and paths come from the traced system: no control character reaches the terminal.
    if !printable_ascii(&s.as_bytes()[from..]) {
        if let std::borrow::Cow::Owned(c) = crate::text::clean(&s[from..]) {
            s.truncate(from);
            s.push_str(&c);
        }
    }
}

/// How many characters `v` has (its length when ASCII, as names nearly always are).
#[inline(always)]
fn chars(v: &str) -> usize {
    if v.is_ascii() {
        v.len()
    } else {
        v.chars().count()
    }
}

/// A short text formatted on the stack (a latency, before it is padded).
struct Small {
    b: [u8; 48],
    len: usize,
}

impl Small {
    #[inline(always)]
    fn new() -> Small {
        Small { b: [0; 48], len: 0 }
    }

    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        &self.b[..self.len]
    }
}

impl Write for Small {
    #[inline(always)]
    fn write_str(&mut self, v: &str) -> std::fmt::Result {
        let to = self.b.get_mut(self.len..self.len + v.len()).ok_or(std::fmt::Error)?;
        // SAFETY: `to` has `v.len()` bytes, and is not `v`'s.
        unsafe { copy_short(v.as_ptr(), to.as_mut_ptr(), v.len()) };
        self.len += v.len();
        Ok(())
    }
}

/// Copies `n` bytes from `src` to `dst` (not overlapping) without a call to `memcpy` when `n` is
/// at most 32: two overlapping moves of the largest size that fits (a name, a path, a number's
/// digits; a call per piece cost a line a tenth of its time).
///
/// # Safety
/// `src` valid for reads and `dst` for writes of `n` bytes, not overlapping.
#[inline(always)]
unsafe fn copy_short(src: *const u8, dst: *mut u8, n: usize) {
    use std::ptr::{read_unaligned as rd, write_unaligned as wr};
    // SAFETY (every arm): both moves lie within the first `n` bytes of `src` and `dst`.
    unsafe {
        if n >= 16 {
            if n > 32 {
                std::ptr::copy_nonoverlapping(src, dst, n);
                return;
            }
            let (a, z) = (rd(src as *const [u8; 16]), rd(src.add(n - 16) as *const [u8; 16]));
            wr(dst as *mut [u8; 16], a);
            wr(dst.add(n - 16) as *mut [u8; 16], z);
        } else if n >= 8 {
            let (a, z) = (rd(src as *const u64), rd(src.add(n - 8) as *const u64));
            wr(dst as *mut u64, a);
            wr(dst.add(n - 8) as *mut u64, z);
        } else if n >= 4 {
            let (a, z) = (rd(src as *const u32), rd(src.add(n - 4) as *const u32));
            wr(dst as *mut u32, a);
            wr(dst.add(n - 4) as *mut u32, z);
        } else if n > 0 {
            // 1 to 3 bytes: the first, the middle and the last (some the same).
            let (a, m, z) = (*src, *src.add(n / 2), *src.add(n - 1));
            *dst = a;
            *dst.add(n / 2) = m;
            *dst.add(n - 1) = z;
        }
    }
}

/// Appends to a string through a pointer, room and position of its own, held in registers while
/// an event is written: appending to a `String` stores its length and reloads its pointer and
/// capacity at every piece (some 70 an event), a tenth of `events --json`'s time. Every write
/// checks the room; the string's length is brought up to date when it is dropped (and around
/// [`Buf::string`]).
struct Buf<'a> {
    s: &'a mut String,
    ptr: *mut u8,
    cap: usize,
    pos: usize,
}

impl<'a> Buf<'a> {
    #[inline(always)]
    fn new(s: &'a mut String) -> Buf<'a> {
        // SAFETY: only UTF-8 is ever written through it (see `raw`).
        let v = unsafe { s.as_mut_vec() };
        let (ptr, cap, pos) = (v.as_mut_ptr(), v.capacity(), v.len());
        Buf { s, ptr, cap, pos }
    }

    /// Makes room for `n` more bytes.
    #[inline(always)]
    fn room(&mut self, n: usize) {
        if self.cap - self.pos < n {
            self.grow(n);
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: usize) {
        self.sync();
        // SAFETY: as in `new`.
        let v = unsafe { self.s.as_mut_vec() };
        v.reserve(n);
        (self.ptr, self.cap) = (v.as_mut_ptr(), v.capacity());
    }

    /// Appends bytes that are UTF-8 (a `str`'s, or checked ASCII).
    #[inline(always)]
    fn raw(&mut self, b: &[u8]) {
        self.room(b.len());
        // SAFETY: `room` made room for `b.len()` bytes at `pos`; `b` is not in this buffer
        // (borrowed mutably here).
        unsafe { copy_short(b.as_ptr(), self.ptr.add(self.pos), b.len()) };
        self.pos += b.len();
    }

    /// Appends `n` spaces (at most 32).
    #[inline(always)]
    fn spaces(&mut self, n: usize) {
        const SPACES: [u8; 32] = [b' '; 32];
        debug_assert!(n <= 32);
        self.room(32);
        // SAFETY: room for 32 bytes at `pos`: all 32 are written (one move), `n` of them kept.
        unsafe { std::ptr::write_unaligned(self.ptr.add(self.pos) as *mut [u8; 32], SPACES) };
        self.pos += n.min(32);
    }

    /// An integer right-aligned in `width` characters (`{:>width$}`).
    #[inline(always)]
    fn int_right<T: Decimal>(&mut self, v: T, width: usize) {
        let (neg, m) = v.split();
        self.spaces(width.saturating_sub(digit_count(m) + usize::from(neg)));
        self.int(v);
    }

    /// An integer left-aligned in `width` characters (`{:<width$}`).
    #[inline(always)]
    fn int_left<T: Decimal>(&mut self, v: T, width: usize) {
        let at = self.pos;
        self.int(v);
        self.spaces(width.saturating_sub(self.pos - at));
    }

    /// A monotonic timestamp per `fmt`: raw ns, seconds since the recording began with nine
    /// decimals, or the wall-clock time of day (`HH:MM:SS.nnnnnnnnn`).
    #[inline(always)]
    fn time(&mut self, h: &TraceHeader, ts: u64, fmt: TimeFormat) {
        match fmt {
            TimeFormat::Monotonic => self.int(ts),
            TimeFormat::Relative => {
                let rel = ts.saturating_sub(h.start_ns);
                self.int(rel / 1_000_000_000);
                self.room(10);
                // SAFETY: room for the dot and 9 digits.
                unsafe {
                    let p = self.ptr.add(self.pos);
                    *p = b'.';
                    write_fixed(p.add(1), rel % 1_000_000_000, 9);
                }
                self.pos += 10;
            }
            TimeFormat::Wall => {
                let w = h.wall_ns(ts).max(0) as u64;
                let day = w / 1_000_000_000 % 86_400;
                self.room(18);
                // SAFETY: room for `HH:MM:SS.nnnnnnnnn`, 18 bytes.
                unsafe {
                    let p = self.ptr.add(self.pos);
                    write_fixed(p, day / 3600, 2);
                    *p.add(2) = b':';
                    write_fixed(p.add(3), day / 60 % 60, 2);
                    *p.add(5) = b':';
                    write_fixed(p.add(6), day % 60, 2);
                    *p.add(8) = b'.';
                    write_fixed(p.add(9), w % 1_000_000_000, 9);
                }
                self.pos += 18;
            }
        }
    }

    /// A syscall's result as [`format_result`] spells it.
    #[inline(always)]
    fn result(&mut self, ret: i64) {
        if (-4095..0).contains(&ret) {
            match errno_name(-ret) {
                Some(n) => self.put(n),
                None => {
                    self.ch('E');
                    self.int(-ret);
                }
            }
        } else {
            self.int(ret);
        }
    }

    /// Appends a string.
    #[inline(always)]
    fn put(&mut self, v: &str) {
        self.raw(v.as_bytes());
    }

    /// Appends an ASCII character.
    #[inline(always)]
    fn ch(&mut self, c: char) {
        debug_assert!(c.is_ascii());
        self.room(1);
        // SAFETY: room for one byte at `pos`.
        unsafe { *self.ptr.add(self.pos) = c as u8 };
        self.pos += 1;
    }

    /// [`push_int`].
    #[inline(always)]
    fn int<T: Decimal>(&mut self, v: T) {
        self.room(21);
        // SAFETY: room for 21 bytes at `pos`.
        unsafe { self.int_in_room(v) };
    }

    /// [`Buf::int`] where room was made for it.
    ///
    /// # Safety
    /// Room for 21 bytes at `pos` (the sign and at most 20 digits).
    #[inline(always)]
    unsafe fn int_in_room<T: Decimal>(&mut self, v: T) {
        let (neg, v) = v.split();
        // SAFETY (all three): the caller made room for the sign and the digits.
        if neg {
            unsafe { *self.ptr.add(self.pos) = b'-' };
            self.pos += 1;
        }
        if v < 10 {
            unsafe { *self.ptr.add(self.pos) = b'0' + v as u8 };
            self.pos += 1;
            return;
        }
        self.pos += unsafe { write_int(self.ptr.add(self.pos), v) };
    }

    /// [`Buf::put`] where room was made for it.
    ///
    /// # Safety
    /// Room for `v.len()` bytes at `pos`.
    #[inline(always)]
    unsafe fn put_in_room(&mut self, v: &str) {
        // SAFETY: the caller made room; `v` is not in this buffer.
        unsafe { copy_short(v.as_ptr(), self.ptr.add(self.pos), v.len()) };
        self.pos += v.len();
    }

    /// A name of ours in quotes, where room was made for it.
    ///
    /// # Safety
    /// Room for `v.len() + 2` bytes at `pos`.
    #[inline(always)]
    unsafe fn quoted_in_room(&mut self, v: &str) {
        // SAFETY: the caller made room for the quotes and the name.
        unsafe {
            *self.ptr.add(self.pos) = b'"';
            copy_short(v.as_ptr(), self.ptr.add(self.pos + 1), v.len());
            *self.ptr.add(self.pos + 1 + v.len()) = b'"';
        }
        self.pos += v.len() + 2;
    }

    /// A device number as `"major:minor"` (`null` for 0), where room was made for it.
    ///
    /// # Safety
    /// Room for 45 bytes at `pos` (the quotes, the colon and two numbers as [`Buf::int_in_room`]
    /// writes them).
    #[inline(always)]
    unsafe fn dev_in_room(&mut self, dev: u32) {
        // SAFETY (all): within the 45 bytes the caller made room for.
        unsafe {
            if dev == 0 {
                self.put_in_room("null");
                return;
            }
            let (ma, mi) = dev_major_minor(dev);
            *self.ptr.add(self.pos) = b'"';
            self.pos += 1;
            self.int_in_room(ma);
            *self.ptr.add(self.pos) = b':';
            self.pos += 1;
            self.int_in_room(mi);
            *self.ptr.add(self.pos) = b'"';
            self.pos += 1;
        }
    }

    /// [`push_json_bytes`].
    #[inline(always)]
    fn json_bytes(&mut self, v: &[u8]) {
        self.keyed_json_bytes("", v);
    }

    /// `k` (a key of ours) and [`Buf::json_bytes`] of `v`, with one room check.
    #[inline(always)]
    fn keyed_json_bytes(&mut self, k: &'static str, v: &[u8]) {
        if plain_json(v) {
            self.room(k.len() + v.len() + 2);
            // SAFETY: room for all four pieces; `v` is printable ASCII (UTF-8), not in this
            // buffer.
            unsafe {
                self.put_in_room(k);
                *self.ptr.add(self.pos) = b'"';
                copy_short(v.as_ptr(), self.ptr.add(self.pos + 1), v.len());
                *self.ptr.add(self.pos + 1 + v.len()) = b'"';
            }
            self.pos += v.len() + 2;
        } else {
            self.put(k);
            self.string(|s| push_json_bytes(s, v));
        }
    }

    /// What `write` writes, as a JSON string: in place, checked afterwards (escaped through
    /// [`push_json_bytes`] in the rare case it needs to be).
    #[inline(always)]
    fn json_with(&mut self, write: impl FnOnce(&mut Self) -> std::fmt::Result) {
        self.ch('"');
        let at = self.pos;
        let _ = write(self);
        // SAFETY: `at..pos` was written by `write`, within the capacity.
        let text = unsafe { std::slice::from_raw_parts(self.ptr.add(at), self.pos - at) };
        if plain_json(text) {
            self.ch('"');
        } else {
            let text = text.to_vec();
            self.pos = at - 1;
            self.json_bytes(&text);
        }
    }

    /// [`push_json_str`].
    #[inline(always)]
    fn json_str(&mut self, v: &str) {
        self.json_bytes(v.as_bytes());
    }

    /// [`push_opt_str`].
    #[inline(always)]
    fn opt_str(&mut self, v: Option<&str>) {
        match v {
            Some(v) => self.json_str(v),
            None => self.put("null"),
        }
    }

    /// What `write` appends to the string itself (the rare and the long pieces).
    #[inline]
    fn string<R>(&mut self, write: impl FnOnce(&mut String) -> R) -> R {
        self.sync();
        let r = write(self.s);
        // SAFETY: as in `new`.
        let v = unsafe { self.s.as_mut_vec() };
        (self.ptr, self.cap, self.pos) = (v.as_mut_ptr(), v.capacity(), v.len());
        r
    }

    /// Brings the string's length up to date.
    #[inline(always)]
    fn sync(&mut self) {
        // SAFETY: the bytes up to `pos` were written (within the capacity), and are UTF-8.
        unsafe { self.s.as_mut_vec().set_len(self.pos) };
    }
}

impl Write for Buf<'_> {
    #[inline(always)]
    fn write_str(&mut self, v: &str) -> std::fmt::Result {
        self.put(v);
        Ok(())
    }

    #[inline(always)]
    fn write_char(&mut self, c: char) -> std::fmt::Result {
        if c.is_ascii() {
            self.ch(c);
        } else {
            self.put(c.encode_utf8(&mut [0; 4]));
        }
        Ok(())
    }
}

impl Drop for Buf<'_> {
    fn drop(&mut self) {
        self.sync();
    }
}

/// JSON members appended to a buffer, in the order given (which must be `serde_json`'s: sorted).
struct Members<'a> {
    b: Buf<'a>,
}

/// A member's key as written after another member, `,"name":`: a constant, copied without a call
/// to `memcpy` (a branch on "is it the first?" would make its length a variable).
macro_rules! k {
    ($name:literal) => {
        concat!(",\"", $name, "\":")
    };
}

/// The first member's key of an object opened here, `{"name":`.
macro_rules! kopen {
    ($name:literal) => {
        concat!("{\"", $name, "\":")
    };
}

/// The first member's key, `"name":`.
macro_rules! k0 {
    ($name:literal) => {
        concat!("\"", $name, "\":")
    };
}

/// Members of bounded length (integers, names of ours, a device number), written after one room
/// check for all of them: a check per member was some 90 compare-and-branch pairs an event, a
/// fiftieth of `events --json`'s instructions. Each is `int KEY, VALUE`, `name KEY, VALUE` (a
/// `&'static str` that needs no escape; evaluated twice, so a pure expression) or `dev KEY,
/// VALUE` (`"major:minor"`, or `null` for 0), keys written with [`k!`], [`k0!`] or [`kopen!`].
macro_rules! bounded {
    ($m:expr; $( $kind:ident $k:expr, $v:expr );+ $(;)?) => {{
        let need = 0 $( + bounded!(@room $kind $k, $v) )+;
        $m.b.room(need);
        // SAFETY: `need` covers every member's key and the longest form of its value.
        unsafe { $( bounded!(@put $m; $kind $k, $v); )+ }
    }};
    (@room int $k:expr, $v:expr) => { $k.len() + 21 };
    (@room name $k:expr, $v:expr) => { $k.len() + 2 + $v.len() };
    (@room dev $k:expr, $v:expr) => { $k.len() + 2 * 21 + 3 };
    (@put $m:expr; int $k:expr, $v:expr) => {{
        $m.b.put_in_room($k);
        $m.b.int_in_room($v);
    }};
    (@put $m:expr; name $k:expr, $v:expr) => {{
        $m.b.put_in_room($k);
        $m.b.quoted_in_room($v);
    }};
    (@put $m:expr; dev $k:expr, $v:expr) => {{
        $m.b.put_in_room($k);
        $m.b.dev_in_room($v);
    }};
}

impl Members<'_> {
    #[inline(always)]
    fn key(&mut self, tok: &'static str) {
        self.b.put(tok);
    }
    #[inline(always)]
    fn int(&mut self, k: &'static str, v: impl Decimal) {
        // One room check for the key and the number.
        self.b.room(k.len() + 21);
        // SAFETY: room for both.
        unsafe {
            self.b.put_in_room(k);
            self.b.int_in_room(v);
        }
    }
    #[inline(always)]
    fn str(&mut self, k: &'static str, v: &str) {
        self.b.keyed_json_bytes(k, v.as_bytes());
    }
    /// A member whose value is string `i` of a column.
    #[inline(always)]
    fn col(&mut self, k: &'static str, c: &latscope_event::StrCol, i: usize) {
        self.b.keyed_json_bytes(k, c.bytes(i));
    }
    /// A member whose value is a name of ours (needs no escape).
    #[inline(always)]
    fn name(&mut self, k: &'static str, v: &'static str) {
        self.b.room(k.len() + v.len() + 2);
        // SAFETY: room for the key, the name and its quotes.
        unsafe {
            self.b.put_in_room(k);
            self.b.put_in_room("\"");
            self.b.put_in_room(v);
            self.b.put_in_room("\"");
        }
    }
    #[inline(always)]
    fn op_name(&mut self, k: &'static str, kind: u8, nr: u16) {
        self.key(k);
        self.b.ch('"');
        self.b.string(|s| write_op_name(s, kind, nr));
        self.b.ch('"');
    }
    #[inline(always)]
    fn dev(&mut self, k: &'static str, dev: u32) {
        let (ma, mi) = dev_major_minor(dev);
        self.key(k);
        self.b.ch('"');
        self.b.int(ma);
        self.b.ch(':');
        self.b.int(mi);
        self.b.ch('"');
    }
}

/// `v` as a JSON string, as `serde_json` writes it and [`json_ascii_controls`] shows it.
fn push_json_str(s: &mut String, v: &str) {
    push_json_bytes(s, v.as_bytes());
}

/// Whether `b` goes into a JSON string as it is: printable ASCII, no quote nor backslash.
/// One pass over the bytes.
#[inline]
fn plain_json(b: &[u8]) -> bool {
    // No early exit: the loop is vectorised, and names and paths are short.
    !b.iter().fold(false, |bad, &x| bad | !(0x20..0x7f).contains(&x) | (x == b'"') | (x == b'\\'))
}

/// UTF-8 bytes `v` (a string column's) as [`push_json_str`] writes them.
#[inline]
fn push_json_bytes(s: &mut String, v: &[u8]) {
    if plain_json(v) {
        // SAFETY: printable ASCII is UTF-8.
        let buf = unsafe { s.as_mut_vec() };
        buf.reserve(v.len() + 2);
        buf.push(b'"');
        buf.extend_from_slice(v);
        buf.push(b'"');
    } else {
        // The columns hold UTF-8 only (the reader checks); "" as `StrCol::get` would give.
        let v = std::str::from_utf8(v).unwrap_or("");
        s.push_str(&json_ascii_controls(serde_json::to_string(v).unwrap_or_default()));
    }
}

/// [`json`] serialised, as `serde_json` writes it with [`json_ascii_controls`] applied, appended
/// to `s`; with `chains`, a call's breakdown carries its chain of waits (`"why":{"chain":...}`).
pub fn write_json(s: &mut String, h: &TraceHeader, b: &EventBatch, i: usize, chains: Option<&ChainIndex>) {
    let kind = EventKind::from_u8(b.kind[i]);
    let mut m = Members { b: Buf::new(s) };
    m.b.ch('{');
    let loginuid = if b.loginuid[i] == u32::MAX { -1 } else { i64::from(b.loginuid[i]) };
    match kind {
        Some(EventKind::Syscall) => {
            m.int(k0!("addr"), b.addr[i]);
            // The flags, modes and addresses as the line prints them, keys in serde_json's order.
            m.key(k!("args"));
            m.b.ch('{');
            // Of each name the last shown (a map keeps a key's last value), in the keys' order;
            // written in place (most calls, read, write, close..., have none).
            let (flags, mode, addr) = (b.flags[i], b.mode[i], b.addr[i]);
            let mut last: &str = "";
            for spec in latscope_event::argnames::specs_nr_by_name(b.nr[i]) {
                if spec.name == last || !latscope_event::argnames::shown(spec, flags, mode) {
                    continue;
                }
                if !last.is_empty() {
                    m.b.ch(',');
                }
                last = spec.name;
                m.b.json_str(spec.name);
                m.b.ch(':');
                m.b.json_with(|w| latscope_event::argnames::write_value(w, spec, spec.value(flags, mode, addr), flags));
            }
            bounded!(m;
                int concat!("}", k!("bytes")), b.bytes[i];
                int k!("cgroup"), b.cgroup[i]);
            m.col(k!("comm"), &b.comm, i);
            let fd_type = FdType::from_u8(b.fd_type[i]).name();
            bounded!(m;
                int k!("cpu"), b.cpu[i];
                dev k!("dev"), b.dev[i];
                int k!("dirfd"), b.dirfd[i];
                int k!("fd"), b.fd[i];
                name k!("fd_type"), fd_type;
                int k!("flags"), b.flags[i];
                int k!("gid"), b.gid[i];
                int k!("ino"), b.ino[i];
                name k!("kind"), "syscall";
                int k!("latency_ns"), b.lat[i];
                int k!("loginuid"), loginuid;
                int k!("mode"), b.mode[i];
                int k!("nr"), b.nr[i];
                int k!("offset"), b.off[i];
                int k!("offset2"), b.off2[i]);
            m.col(k!("path"), &b.path, i);
            m.col(k!("path2"), &b.path2, i);
            m.int(k!("pid"), b.pid[i]);
            m.key(k!("res"));
            m.b.ch('"');
            if (-4095..0).contains(&b.ret[i]) {
                m.b.result(b.ret[i]);
            } else {
                m.b.put("SUCCESS");
            }
            m.b.ch('"');
            m.int(k!("ret"), b.ret[i]);
        }
        Some(EventKind::Block) => {
            m.int(k0!("bytes"), b.bytes[i]);
            m.int(k!("cgroup"), b.cgroup[i]);
            m.col(k!("comm"), &b.comm, i);
            m.int(k!("cpu"), b.cpu[i]);
            m.dev(k!("dev"), b.dev[i]);
            m.key(k!("disk"));
            match h.disk_name(b.dev[i]) {
                Some(d) => m.b.json_str(d),
                None => m.b.put("null"),
            }
            m.int(k!("error"), b.ret[i]);
            m.int(k!("gid"), b.gid[i]);
            m.name(k!("kind"), "block");
            m.int(k!("latency_ns"), b.lat[i]);
            m.int(k!("loginuid"), loginuid);
            let op = BlockOp::from_u16(b.nr[i]);
            m.name(k!("op"), op.name());
            m.int(k!("pid"), b.pid[i]);
            m.int(k!("qtime_ns"), b.qtime[i]);
            m.key(k!("rwbs"));
            m.b.ch('"');
            let _ = m.b.string(|s| Rwbs::write(s, op, b.flags[i]));
            m.b.ch('"');
            m.int(k!("sector"), b.off[i]);
        }
        Some(EventKind::Proc) => {
            if b.nr[i] == ProcOp::Exec as u16 {
                m.col(k0!("args"), &b.path2, i);
                m.int(k!("cgroup"), b.cgroup[i]);
            } else {
                m.int(k0!("cgroup"), b.cgroup[i]);
            }
            m.col(k!("comm"), &b.comm, i);
            m.int(k!("cpu"), b.cpu[i]);
            m.int(k!("gid"), b.gid[i]);
            m.name(k!("kind"), "proc");
            m.int(k!("latency_ns"), b.lat[i]);
            m.int(k!("loginuid"), loginuid);
            m.col(k!("path"), &b.path, i);
            m.int(k!("pid"), b.pid[i]);
            m.int(k!("ret"), b.ret[i]);
        }
        None => {
            m.int(k0!("cgroup"), b.cgroup[i]);
            m.col(k!("comm"), &b.comm, i);
            m.int(k!("cpu"), b.cpu[i]);
            m.int(k!("gid"), b.gid[i]);
            m.name(k!("kind"), "unknown");
            m.int(k!("latency_ns"), b.lat[i]);
            m.int(k!("loginuid"), loginuid);
            m.int(k!("pid"), b.pid[i]);
        }
    }
    bounded!(m;
        int k!("tid"), b.tid[i];
        int k!("time_ns"), h.wall_ns(b.ts[i]));
    if kind == Some(EventKind::Proc) {
        if let Some(t) = times_json(b, i) {
            m.key(k!("times"));
            m.b.put(&t.to_string());
        }
    }
    bounded!(m;
        int k!("ts_ns"), b.ts[i];
        int k!("tty"), b.tty[i]);
    m.op_name(k!("type"), b.kind[i], b.nr[i]);
    bounded!(m;
        int k!("uid"), b.uid[i];
        int k!("vpid"), b.vpid[i];
        int k!("vtid"), b.vtid[i]);
    if kind == Some(EventKind::Syscall) {
        // The breakdown read once: whether there is one, and its parts.
        let parts = b.why_parts(i);
        if parts.iter().any(|&p| p != 0) {
            m.key(k!("why"));
            write_why_json(&mut m, h, b, i, &parts, chains);
        }
    }
    m.b.ch('}');
}

/// The parts' keys in the order `serde_json` writes a map's (sorted by name), as written
/// (constants), with the index of each part (a test checks them against `WHY_PART_NAMES`).
const PARTS_KEYS: [(&str, usize); WHY_PARTS] = [
    (kopen!("cpu"), 0),
    (k!("fault"), 6),
    (k!("io"), 2),
    (k!("ipc"), 4),
    (k!("lock"), 3),
    (k!("other"), 7),
    (k!("runq"), 1),
    (k!("timer"), 5),
    (k!("unknown"), 8),
];

/// Room for the members of `parts_ns`: their keys and numbers.
const PARTS_ROOM: usize = {
    let (mut n, mut k) = (0, 0);
    while k < WHY_PARTS {
        n += PARTS_KEYS[k].0.len() + 21;
        k += 1;
    }
    n
};

/// A string member's value, or `null`.
fn push_opt_str(s: &mut String, v: Option<&str>) {
    match v {
        Some(v) => push_json_str(s, v),
        None => s.push_str("null"),
    }
}

/// `why::waker` of call `i` as a JSON string (or `null`): a thread's `comm/tid` written in place
/// when its name needs no escape, the rest as `why::waker` says them.
fn push_waker_name(s: &mut String, b: &EventBatch, i: usize) {
    if b.waker_ctx[i] == 1 {
        let (c, n) = latscope_event::comm_bytes(b.waker_comm_lo[i], b.waker_comm_hi[i]);
        let comm = &c[..n];
        if printable_ascii(comm) && !comm.iter().any(|&x| x == b'"' || x == b'\\') {
            s.push('"');
            // Printable ASCII: valid UTF-8.
            s.push_str(std::str::from_utf8(comm).unwrap_or_default());
            s.push('/');
            push_int(s, b.waker_tid[i]);
            s.push('"');
            return;
        }
    }
    push_opt_str(s, crate::why::waker(b, i).as_deref());
}

/// A value `serde_json` writes (the rare nested ones: a lock, a chain of waits), as
/// [`json_ascii_controls`] shows it.
fn push_value(s: &mut String, v: &Value) {
    s.push_str(&json_ascii_controls(serde_json::to_string(v).unwrap_or_default()));
}

/// Asks the CPU for the cache lines of row `i` of the columns [`write_json`] reads of a syscall
/// (and of its breakdown): some 40 columns read row by row are more streams than the hardware
/// follows, so each new line of each column would otherwise be waited for. A hint: rows past
/// the end are asked for harmlessly, nothing is read.
#[inline]
pub fn prefetch_json_row(b: &EventBatch, i: usize) {
    use latscope_event::hint::prefetch_row;
    macro_rules! cols {
        ($($c:ident),*) => { $( prefetch_row(&b.$c, i); )* };
    }
    cols!(kind, ts, lat, pid, tid, nr, ret, fd, off, off2, dev, ino, bytes, flags, mode, addr, dirfd, cgroup);
    cols!(cpu, gid, uid, loginuid, tty, vpid, vtid, fd_type);
    cols!(why_cpu, why_runq, why_io, why_lock, why_ipc, why_timer, why_fault, why_other, why_unknown);
    for c in [&b.comm, &b.path, &b.path2] {
        prefetch_row(&c.offsets, i);
    }
}

/// `why::json` of call `i`, whose breakdown `parts` is not all zero, with its chain of waits from `chains`,
/// as `serde_json` writes it (members sorted by name) and [`json_ascii_controls`] shows it:
/// written member by member rather than built as a tree of maps, which cost `events --json` of
/// a `--why` recording most of its time.
fn write_why_json(
    m: &mut Members,
    h: &TraceHeader,
    b: &EventBatch,
    i: usize,
    parts: &[u64; WHY_PARTS],
    chains: Option<&ChainIndex>,
) {
    m.b.ch('{');
    // The members before `parts_ns` may all be absent: a comma before each but the first.
    let mut first = true;
    let mut key = |m: &mut Members, tok: &'static str| {
        if !std::mem::take(&mut first) {
            m.b.ch(',');
        }
        m.key(tok);
    };
    if let Some(ch) = chains.and_then(|c| crate::why::chain_json(h, c, b, i)) {
        key(m, k0!("chain"));
        m.b.string(|s| push_value(s, &ch));
    }
    if b.runq_tid[i] != 0 {
        key(m, k0!("cpu_held_by"));
        m.int(kopen!("cpu"), b.runq_cpu[i]);
        m.int(k!("tid"), b.runq_tid[i]);
        m.b.ch('}');
    }
    if b.lock_owner[i] != 0 {
        key(m, k0!("held_by"));
        m.key(kopen!("name"));
        m.b.opt_str(crate::why::waited_on(b, i).as_deref());
        m.int(k!("tid"), b.lock_owner[i]);
        m.b.ch('}');
    }
    if b.wake_device_ns[i] != 0 {
        key(m, k0!("io_requests"));
        m.int(kopen!("device_ns"), b.wake_device_ns[i]);
        m.int(k!("held_ns"), b.wake_held_ns[i]);
        m.int(k!("queue_ns"), b.wake_queue_ns[i]);
        m.b.ch('}');
    }
    if let Some(l) = crate::locks::lock_json(b, i) {
        key(m, k0!("lock"));
        m.b.string(|s| push_value(s, &l));
    }
    let off = b.off_cpu(i);
    if off.len > 0 {
        key(m, k0!("off_cpu"));
        m.int(kopen!("count"), off.count);
        m.key(k!("kept"));
        m.b.ch('[');
        for (n, &(from, to, p)) in off.intervals().iter().enumerate() {
            if n > 0 {
                m.b.ch(',');
            }
            m.name(kopen!("cause"), WHY_PART_NAMES[usize::from(p)]);
            m.int(k!("ns"), to - from);
            m.int(k!("start_ns"), from);
            m.b.ch('}');
        }
        m.b.put("]}");
    }
    if b.fault_addr[i] != 0 {
        key(m, k0!("page_fault"));
        m.key(kopen!("address"));
        let _ = m.b.string(|s| write!(s, "\"{:#x}\"", b.fault_addr[i]));
        m.key(k!("offset_bytes"));
        if b.fault_off[i] >= 0 {
            m.b.int(b.fault_off[i]);
        } else {
            m.b.put("null");
        }
        let path = b.fault_path.get(i);
        m.key(k!("path"));
        m.b.opt_str((!path.is_empty()).then_some(path));
        m.b.ch('}');
    }
    key(m, k0!("parts_ns"));
    m.b.room(PARTS_ROOM);
    for &(tok, k) in &PARTS_KEYS {
        // SAFETY: `PARTS_ROOM` covers every key and number.
        unsafe {
            m.b.put_in_room(tok);
            m.b.int_in_room(parts[k]);
        }
    }
    let wait = latscope_event::waits::wait_kind_of(b, i, parts).name();
    bounded!(m; name concat!("}", k!("wait")), wait);
    if b.waker_ctx[i] != 0 {
        m.key(k!("waker"));
        let ctx = b.waker_ctx[i];
        m.name(kopen!("kind"), ["none", "thread", "timer", "softirq"][ctx.min(3) as usize]);
        m.key(k!("name"));
        m.b.string(|s| push_waker_name(s, b, i));
        m.key(k!("tid"));
        if ctx == 1 {
            m.b.int(b.waker_tid[i]);
        } else {
            m.b.put("null");
        }
        m.key(k!("was_in"));
        match crate::why::waker_wait(b, i) {
            Some((p, t)) => {
                m.name(kopen!("cause"), WHY_PART_NAMES[p]);
                m.int(k!("ns"), t);
                m.b.ch('}');
            }
            None => m.b.put("null"),
        }
        m.b.ch('}');
    }
    if b.wake_dev[i] != 0 {
        m.key(k!("woken_by_request"));
        m.str(kopen!("disk"), &disk_label(h, b.wake_dev[i]));
        m.int(k!("sector"), b.wake_sector[i]);
        m.b.ch('}');
    }
    m.b.ch('}');
}

/// One event as a JSON object (all columns plus decoded names).
pub fn json(h: &TraceHeader, b: &EventBatch, i: usize) -> Value {
    let kind = EventKind::from_u8(b.kind[i]);
    let mut m = Map::new();
    m.insert("kind".into(), json!(kind.map(|k| k.name()).unwrap_or("unknown")));
    m.insert("type".into(), json!(op_name(b.kind[i], b.nr[i])));
    m.insert("ts_ns".into(), json!(b.ts[i]));
    m.insert("time_ns".into(), json!(h.wall_ns(b.ts[i])));
    m.insert("latency_ns".into(), json!(b.lat[i]));
    m.insert("pid".into(), json!(b.pid[i]));
    m.insert("tid".into(), json!(b.tid[i]));
    m.insert("uid".into(), json!(b.uid[i]));
    m.insert("gid".into(), json!(b.gid[i]));
    // As sysdig's user.loginuid: -1 when unset.
    m.insert("loginuid".into(), json!(if b.loginuid[i] == u32::MAX { -1 } else { i64::from(b.loginuid[i]) }));
    m.insert("tty".into(), json!(b.tty[i]));
    m.insert("vpid".into(), json!(b.vpid[i]));
    m.insert("vtid".into(), json!(b.vtid[i]));
    m.insert("comm".into(), json!(b.comm.get(i)));
    m.insert("cgroup".into(), json!(b.cgroup[i]));
    m.insert("cpu".into(), json!(b.cpu[i]));
    match kind {
        Some(EventKind::Syscall) => {
            m.insert("nr".into(), json!(b.nr[i]));
            m.insert("ret".into(), json!(b.ret[i]));
            m.insert(
                "res".into(),
                json!(if (-4095..0).contains(&b.ret[i]) { format_result(b.ret[i]) } else { "SUCCESS".into() }),
            );
            m.insert("fd".into(), json!(b.fd[i]));
            m.insert("fd_type".into(), json!(FdType::from_u8(b.fd_type[i]).name()));
            m.insert("path".into(), json!(b.path.get(i)));
            m.insert("path2".into(), json!(b.path2.get(i)));
            m.insert("bytes".into(), json!(b.bytes[i]));
            m.insert("offset".into(), json!(b.off[i]));
            m.insert("offset2".into(), json!(b.off2[i]));
            m.insert("flags".into(), json!(b.flags[i]));
            m.insert("mode".into(), json!(b.mode[i]));
            m.insert("dirfd".into(), json!(b.dirfd[i]));
            m.insert("addr".into(), json!(b.addr[i]));
            // The flags, modes and addresses as the event line prints them (the raw columns
            // above hold the numbers; a pointer the probes do not follow is left out here).
            let name = latscope_event::syscall_name(b.nr[i]).unwrap_or("");
            let decoded: Map<String, Value> = latscope_event::argnames::decoded(name, b.flags[i], b.mode[i], b.addr[i])
                .into_iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            m.insert("args".into(), Value::Object(decoded));
            // The file's device as block requests spell theirs (`major:minor`); 0 (no file) is null.
            let (ma, mi) = dev_major_minor(b.dev[i]);
            m.insert("dev".into(), if b.dev[i] == 0 { Value::Null } else { json!(format!("{ma}:{mi}")) });
            m.insert("ino".into(), json!(b.ino[i]));
            if let Some(w) = crate::why::json(h, b, i) {
                m.insert("why".into(), w);
            }
        }
        Some(EventKind::Block) => {
            let op = BlockOp::from_u16(b.nr[i]);
            let (ma, mi) = dev_major_minor(b.dev[i]);
            m.insert("op".into(), json!(op.name()));
            m.insert("rwbs".into(), json!(Rwbs::format(op, b.flags[i])));
            m.insert("dev".into(), json!(format!("{ma}:{mi}")));
            m.insert("disk".into(), json!(h.disk_name(b.dev[i])));
            m.insert("sector".into(), json!(b.off[i]));
            m.insert("bytes".into(), json!(b.bytes[i]));
            m.insert("qtime_ns".into(), json!(b.qtime[i]));
            m.insert("error".into(), json!(b.ret[i]));
        }
        Some(EventKind::Proc) => {
            m.insert("ret".into(), json!(b.ret[i]));
            m.insert("path".into(), json!(b.path.get(i)));
            if b.nr[i] == ProcOp::Exec as u16 {
                m.insert("args".into(), json!(b.path2.get(i)));
            }
            if let Some(t) = times_json(b, i) {
                m.insert("times".into(), t);
            }
        }
        None => {}
    }
    Value::Object(m)
}

/// A thread's times (a `proc_times` event) as JSON: its counters since it started, and the call
/// it was in when they were read.
fn times_json(b: &EventBatch, i: usize) -> Option<Value> {
    let (t, at) = latscope_event::ThreadTimes::from_row(b, i)?;
    let mut j = json!({
        "at": at.name(),
        "started_ns": t.started,
        "cpu_ns": t.cpu,
        "runq_ns": t.runq,
        "user_ns": t.user,
        "sys_ns": t.sys,
        "minor_faults": t.min_flt,
        "major_faults": t.maj_flt,
        "voluntary_switches": t.vcsw,
        "involuntary_switches": t.ivcsw,
    });
    if let Some(nr) = t.call {
        j["in_call"] = json!(latscope_event::syscall_name(nr).map_or_else(|| format!("syscall_{nr}"), str::to_string));
        j["in_call_ns"] = json!(t.in_call);
    }
    Some(j)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{syscall_nr, BlockDevice, Event};

    #[test]
    fn numbers_are_written_as_display_writes_them() {
        let mut s = String::from("x");
        for v in [0i64, 7, 10, 99, 100, 12345, -1, -10, -987654321, i64::MAX, i64::MIN] {
            s.truncate(1);
            push_int(&mut s, v);
            assert_eq!(s, format!("x{v}"));
        }
        // Every digit count, at both of its ends.
        let edges = (0..20).flat_map(|k| [10u64.pow(k).saturating_sub(1), 10u64.pow(k), 10u64.pow(k) + 1]);
        for v in [9u64, 42, 1_000_000_007, u64::MAX].into_iter().chain(edges.clone()) {
            s.truncate(1);
            push_int(&mut s, v);
            assert_eq!(s, format!("x{v}"));
        }
        for v in [u8::MAX as i64, i32::MIN as i64, -100, -99] {
            s.truncate(1);
            push_int(&mut s, v as i32);
            assert_eq!(s, format!("x{}", v as i32));
        }
        // Times: every format, at the edges of seconds, minutes, hours and days.
        let h = TraceHeader { start_ns: 1_000, realtime_offset_ns: 1_795_868_479_000_000_000, ..Default::default() };
        for ts in [
            1_000u64,
            1_001,
            999_999_999,
            1_000_000_000,
            59_999_999_999,
            3_599_999_999_999,
            86_399_999_999_999,
            u64::MAX / 4,
        ] {
            let rel = ts - h.start_ns;
            assert_eq!(fmt_time(&h, ts, TimeFormat::Monotonic), ts.to_string());
            assert_eq!(
                fmt_time(&h, ts, TimeFormat::Relative),
                format!("{}.{:09}", rel / 1_000_000_000, rel % 1_000_000_000)
            );
            let w = h.wall_ns(ts).max(0) as u64;
            let day = w / 1_000_000_000 % 86_400;
            let want = format!("{:02}:{:02}:{:02}.{:09}", day / 3600, day / 60 % 60, day % 60, w % 1_000_000_000);
            assert_eq!(fmt_time(&h, ts, TimeFormat::Wall), want);
        }
        for v in [0u64, 1, 9, 10, 11, 99, 100, 101, u64::MAX].into_iter().chain(edges.clone()) {
            assert_eq!(digit_count(v), v.to_string().len(), "{v}");
        }
        // The lane-parallel writer: every digit count at both ends, and numbers spread over the
        // whole range (a multiplicative walk).
        let mut walk = 1u64;
        let spread = std::iter::from_fn(|| {
            walk = walk.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            Some(walk >> (walk % 64))
        });
        for v in edges.clone().chain([u64::MAX, 12_345_678, 87_654_321]).chain(spread.take(100_000)) {
            let mut out = [b'x'; 20];
            // SAFETY: 20 bytes of room.
            let n = unsafe { write_int(out.as_mut_ptr(), v) };
            assert_eq!(&out[..n], v.to_string().as_bytes(), "{v}");
        }
        for v in (0..100_000_000u32).step_by(9_973).chain([99_999_999]) {
            assert_eq!(eight_digits(v).to_le_bytes(), *format!("{v:08}").as_bytes(), "{v}");
        }
        for (v, w) in [
            (0u64, 2),
            (7, 2),
            (59, 2),
            (0, 9),
            (123, 9),
            (999_999_999, 9),
            (5, 1),
            (42, 3),
            (123_456_789_012, 12),
            (u64::MAX, 20),
        ] {
            let mut out = [b'x'; 24];
            // SAFETY: 24 bytes of room.
            unsafe { write_fixed(out.as_mut_ptr(), v, w) };
            assert_eq!(&out[..w], format!("{v:0w$}").as_bytes());
            assert!(out[w..].iter().all(|&c| c == b'x'));
        }
        // Buffer pieces: every short copy's length, padding on either side, grown buffers.
        let src: Vec<u8> = (b'a'..=b'z').chain(b'A'..=b'Z').collect();
        for n in 0..=src.len() {
            let mut t = String::from("[");
            {
                let mut o = Buf::new(&mut t);
                o.raw(&src[..n]);
                o.int_right(-42i64, 6);
                o.int_left(7u32, 3);
                o.spaces(0);
                o.ch(']');
            }
            let want = format!("[{}{:>6}{:<3}]", std::str::from_utf8(&src[..n]).unwrap(), -42, 7);
            assert_eq!(t, want, "{n}");
        }
    }

    /// Events of every kind and shape: errors, unknown errnos and syscalls, escapes, empty and
    /// non-ASCII names, unset and set login uids, devices with and without names.
    fn assorted() -> (TraceHeader, EventBatch) {
        let h = TraceHeader {
            start_ns: 1_000,
            realtime_offset_ns: 1_795_868_479_000_000_000,
            block_devices: vec![BlockDevice { dev: 7 << 20, name: "loop\"0\u{85}".into(), ..Default::default() }],
            ..Default::default()
        };
        let mut b = EventBatch::default();
        let names = ["cat", "", "évil\x1b[2J\u{202e}", "a\"b\\c\u{7f}", "kworker/u4:1-events_unbound"];
        let paths = ["/etc/hosts", "", "/tmp/x\ny\t\u{2028}", "/日本/ü"];
        let nrs: Vec<u16> = ["read", "openat", "pread64", "getpid", "lseek", "renameat2", "futex", "mmap"]
            .iter()
            .map(|n| syscall_nr(n).unwrap())
            .chain([999, 4000])
            .collect();
        let mut k = 0u64;
        for kind in [0u8, 1, 2, 9] {
            for (n, &nr) in nrs.iter().enumerate() {
                for ret in [-2i64, -512, -4000, -4096, 0, 4096, 1 << 40] {
                    k += 1;
                    let nr = if kind == 2 {
                        (n % 4) as u16
                    } else if kind == 1 {
                        (n % 5) as u16
                    } else {
                        nr
                    };
                    b.push(&Event {
                        kind,
                        ts: 1_000 + k * 1_234_567_891,
                        lat: k * k * 7919,
                        pid: k as u32 * 31,
                        tid: k as u32 * 37,
                        uid: 1000,
                        loginuid: if k.is_multiple_of(2) { u32::MAX } else { 1000 },
                        nr,
                        ret,
                        fd: (k % 5) as i32 - 1,
                        fd_type: (k % 4) as u8,
                        dirfd: -100,
                        flags: (k * 0o101) as u32,
                        bytes: k * 4096,
                        off: k as i64 * 512 - 1,
                        off2: -1,
                        dev: if k.is_multiple_of(3) {
                            0
                        } else if k % 3 == 1 {
                            7 << 20
                        } else {
                            (254 << 20) | 3
                        },
                        ino: k * 11,
                        qtime: k * 13,
                        comm: names[k as usize % names.len()].into(),
                        path: paths[k as usize % paths.len()].into(),
                        path2: paths[(k as usize + 1) % paths.len()].into(),
                        ..Default::default()
                    });
                }
            }
        }
        (h, b)
    }

    /// Every event of `b` as [`write_json`] writes it against `serde_json`'s writing of [`json`].
    fn assert_written_json_is_serde_jsons(h: &TraceHeader, b: &EventBatch) {
        let mut s = String::new();
        for i in 0..b.len() {
            s.clear();
            write_json(&mut s, h, b, i, None);
            let want = json_ascii_controls(serde_json::to_string(&json(h, b, i)).unwrap());
            assert_eq!(s, want, "event {i}");
        }
    }

    /// Members written after one room check for a group ([`bounded!`]): the longest value of
    /// every number and device, each event into a string with no room yet (every check grows it).
    #[test]
    fn extreme_values_are_written_whole_from_an_empty_string() {
        let h = TraceHeader::default();
        let mut b = EventBatch::default();
        for (k, (big, small)) in
            [(u64::MAX, i64::MIN), (9_999_999_999_999_999_999, -9_999_999_999)].into_iter().enumerate()
        {
            b.push(&Event {
                kind: 0,
                ts: big,
                lat: big,
                pid: u32::MAX,
                tid: u32::MAX,
                uid: u32::MAX,
                gid: u32::MAX,
                loginuid: u32::MAX - 1,
                tty: u32::MAX,
                vpid: u32::MAX,
                vtid: u32::MAX,
                cpu: u16::MAX,
                nr: 0,
                ret: small,
                fd: i32::MIN,
                fd_type: 255,
                dirfd: i32::MIN,
                flags: u32::MAX,
                mode: u32::MAX,
                bytes: big,
                off: small,
                off2: small,
                dev: [u32::MAX, 0][k],
                ino: big,
                cgroup: big,
                why_cpu: big / 16,
                why_runq: big / 16,
                why_io: big / 16,
                why_lock: big / 16,
                why_ipc: big / 16,
                why_timer: big / 16,
                why_fault: big / 16,
                why_other: big / 16,
                why_unknown: big / 16,
                ..Default::default()
            });
        }
        for i in 0..b.len() {
            let mut s = String::new();
            write_json(&mut s, &h, &b, i, None);
            let want = json_ascii_controls(serde_json::to_string(&json(&h, &b, i)).unwrap());
            assert_eq!(s, want, "event {i}");
        }
    }

    #[test]
    fn written_json_is_what_serde_json_writes_for_the_value() {
        let (h, b) = assorted();
        assert_written_json_is_serde_jsons(&h, &b);
    }

    #[test]
    fn written_arguments_are_the_values_for_every_syscall() {
        // Every number with decoded arguments, with flags and modes that show each kind of them
        // (creating opens, fcntl commands, the ioctl that takes an fd, device nodes, unnamed bits).
        let h = TraceHeader::default();
        let mut b = EventBatch::default();
        let flags = [0u32, 0o100, 0o20200000, 2, 4, 10, 1024, 1026, 1033, 0x40049409, 0xdead_beef, u32::MAX];
        let modes = [0u32, 0o644, 0o020600, 0o060600, 0o100755, u32::MAX];
        for nr in (0..600u16).filter(|&nr| !latscope_event::argnames::specs_nr(nr).is_empty()) {
            for (k, &f) in flags.iter().enumerate() {
                for &m in &modes {
                    b.push(&Event { nr, flags: f, mode: m, addr: (k as u64) << 40, ..Default::default() });
                }
            }
        }
        assert!(b.len() > 1000, "few syscalls with arguments: {}", b.len());
        assert_written_json_is_serde_jsons(&h, &b);
    }

    /// Calls of three threads with every kind of breakdown member: parts, each waker kind (hostile
    /// names among them), cascades, preempters, waking requests (of a named disk and not), their
    /// times, intervals off the CPU, page faults (with and without a file), locks and their
    /// holders, and waits whose wakers' own waits make chains.
    fn assorted_why() -> (TraceHeader, EventBatch) {
        let h = TraceHeader {
            block_devices: vec![BlockDevice { dev: 7 << 20, name: "loop\"0\u{85}".into(), ..Default::default() }],
            ..Default::default()
        };
        let names = ["cat", "", "évil\x1b[2J\u{202e}", "a\"b\\c\u{7f}", "kworker/u4:1-events_unbound"];
        let mut b = EventBatch::default();
        for k in 0..400u64 {
            let ts = 1_000_000 + k * 10_000;
            let lat = 8_000 + (k % 7) * 100;
            let tid = 100 + (k % 3) as u32;
            let (lo, hi) = latscope_event::comm_to_words(names[k as usize % names.len()]);
            let mut e = Event {
                kind: 0,
                ts,
                lat,
                pid: 100,
                tid,
                nr: syscall_nr(["read", "futex", "flock", "openat"][k as usize % 4]).unwrap(),
                ret: if k % 5 == 0 { -11 } else { 1 },
                fd: 3,
                comm: names[(k as usize + 1) % names.len()].into(),
                path: ["/etc/hosts", "", "/tmp/x\ny"][k as usize % 3].into(),
                why_cpu: if k % 11 == 0 { 0 } else { 1_000 },
                why_runq: (k % 3) * 500,
                why_io: (k % 2) * 2_000,
                why_lock: lat - 1_000 - (k % 3) * 500 - (k % 2) * 2_000,
                waker_ctx: (k % 4) as u8,
                waker_tid: if k % 4 == 3 { (k % 12) as u32 } else { 100 + ((k + 1) % 3) as u32 },
                waker_comm_lo: lo,
                waker_comm_hi: hi,
                waker_wait_part: (k % 10) as u8,
                waker_wait_ns: (k % 3) * 777,
                runq_tid: (k % 5 == 1) as u32 * 4242,
                runq_cpu: (k % 2) as u16,
                wake_dev: [0, 7 << 20, (8 << 20) | 1][k as usize % 3],
                wake_sector: k * 8,
                wake_held_ns: k,
                wake_queue_ns: 2 * k,
                wake_device_ns: (k % 4 != 0) as u64 * 3 * k,
                fault_addr: (k % 6 == 5) as u64 * (0x7f00_0000_0000 + k),
                fault_off: if k % 12 == 5 { -1 } else { k as i64 * 4096 },
                fault_path: if k % 18 == 5 { String::new() } else { "/usr/lib/libc.so.6".into() },
                lock_kind: (k % 4 == 1) as u8,
                lock_addr: 0x5000 + k,
                lock_word: 2,
                lock_owner: if k % 8 == 1 {
                    100 + ((k + 1) % 3) as u32
                } else if k % 8 == 5 {
                    9_999
                } else {
                    0
                },
                wait_start: ts + 500,
                wait_end: ts + lat - 500,
                ..Default::default()
            };
            if k % 3 == 0 {
                e.off_count = 2 + (k % 10) as u16;
                (e.off0_start, e.off0_end, e.off0_part) = (ts + 100, ts + 600, 1);
                (e.off1_start, e.off1_end, e.off1_part) = (ts + 600, ts + lat - 500, 3);
            }
            b.push(&e);
        }
        (h, b)
    }

    #[test]
    fn the_parts_keys_are_the_sorted_names() {
        let mut names = WHY_PART_NAMES.to_vec();
        names.sort_unstable();
        for (n, &(tok, k)) in PARTS_KEYS.iter().enumerate() {
            let sep = if n == 0 { "{" } else { "," };
            assert_eq!(tok, format!("{sep}\"{}\":", names[n]));
            assert_eq!(WHY_PART_NAMES[k], names[n]);
        }
    }

    #[test]
    fn written_why_json_is_what_serde_json_writes_for_the_value() {
        let (h, b) = assorted_why();
        let mut chains = ChainIndex::new();
        chains.add(&b);
        let mut s = String::new();
        let mut with_chain = 0;
        for i in 0..b.len() {
            for c in [None, Some(&chains)] {
                s.clear();
                write_json(&mut s, &h, &b, i, c);
                let mut v = json(&h, &b, i);
                if let Some(ch) = c.and_then(|c| crate::why::chain_json(&h, c, &b, i)) {
                    v["why"]["chain"] = ch;
                    with_chain += 1;
                }
                let want = json_ascii_controls(serde_json::to_string(&v).unwrap());
                assert_eq!(s, want, "event {i}, chains {}", c.is_some());
            }
        }
        assert!(with_chain > 0, "some calls' chains are written");
    }

    #[test]
    fn written_lines_are_what_formatting_wrote() {
        // The line as it was formatted with `format!` before it was written by hand.
        fn formatted(h: &TraceHeader, b: &EventBatch, i: usize, tf: TimeFormat) -> String {
            let time = match tf {
                TimeFormat::Monotonic => b.ts[i].to_string(),
                TimeFormat::Relative => {
                    let rel = b.ts[i].saturating_sub(h.start_ns);
                    format!("{}.{:09}", rel / 1_000_000_000, rel % 1_000_000_000)
                }
                TimeFormat::Wall => {
                    let w = h.wall_ns(b.ts[i]).max(0) as u64;
                    let day = w / 1_000_000_000 % 86_400;
                    format!("{:02}:{:02}:{:02}.{:09}", day / 3600, day / 60 % 60, day % 60, w % 1_000_000_000)
                }
            };
            let mut s = format!(
                "{} {:>8} {:<15} {:>7}/{:<7} ",
                time,
                latscope_event::units::fmt_ns(b.lat[i]),
                b.comm.get(i),
                b.pid[i],
                b.tid[i]
            );
            match EventKind::from_u8(b.kind[i]) {
                Some(EventKind::Syscall) => {
                    s.push_str(&op_name(b.kind[i], b.nr[i]));
                    let args = args::syscall_args(b, i);
                    if !args.is_empty() {
                        s.push(' ');
                        s.push_str(&args);
                    }
                    let _ = write!(s, " = {}", format_result(b.ret[i]));
                    if desc(b.nr[i]).is_io() && b.ret[i] > 0 {
                        let _ = write!(s, " ({})", latscope_event::units::fmt_bytes(b.ret[i] as u64));
                    }
                }
                Some(EventKind::Block) => {
                    let _ = write!(s, "block_{} ", BlockOp::from_u16(b.nr[i]).name());
                    let _ = args::write_block_args(&mut s, b, i, h.disk_name(b.dev[i]));
                }
                Some(EventKind::Proc) => match ProcOp::from_u16(b.nr[i]) {
                    Some(op) => {
                        let _ = write!(s, "proc_{} ", op.name());
                        let _ = args::write_proc_args(&mut s, b, i);
                    }
                    None => s.push_str("proc_?"),
                },
                None => {
                    let _ = write!(s, "unknown kind {}", b.kind[i]);
                }
            }
            crate::text::clean(&s).into_owned()
        }
        let (h, b) = assorted();
        for tf in [TimeFormat::Wall, TimeFormat::Relative, TimeFormat::Monotonic] {
            for i in 0..b.len() {
                assert_eq!(line(&h, &b, i, tf), formatted(&h, &b, i, tf), "event {i}");
            }
        }
    }

    #[test]
    fn syscall_line() {
        let h = TraceHeader { start_ns: 1_000, ..Default::default() };
        let mut b = EventBatch::default();
        b.push(&Event {
            kind: 0,
            ts: 1_500,
            lat: 2_500,
            pid: 7,
            tid: 8,
            nr: syscall_nr("openat").unwrap(),
            ret: -2,
            fd: -1,
            dirfd: -100,
            flags: 0o2000101,
            comm: "cat".into(),
            path: "/nope".into(),
            ..Default::default()
        });
        b.push(&Event {
            kind: 0,
            nr: syscall_nr("pread64").unwrap(),
            ret: 4096,
            fd: 3,
            fd_type: 1,
            bytes: 4096,
            off: 8192,
            path: "/data".into(),
            comm: "db".into(),
            ..Default::default()
        });
        let l = line(&h, &b, 0, TimeFormat::Relative);
        assert!(l.starts_with("0.000000500 "), "{l}");
        assert!(
            l.contains("openat dirfd=AT_FDCWD path=/nope flags=O_WRONLY|O_CREAT|O_CLOEXEC mode=00 = ENOENT"),
            "{l}"
        );
        let l = line(&h, &b, 1, TimeFormat::Monotonic);
        assert!(l.contains("pread64 fd=3(<file>/data) bytes=4096 off=8192 = 4096 (4.00KiB)"), "{l}");
        let j = json(&h, &b, 0);
        assert_eq!(j["res"], "ENOENT");
        assert_eq!(j["type"], "openat");
    }

    #[test]
    fn lines_have_no_dangling_equals_nor_double_spaces_nor_control_characters() {
        let h = TraceHeader::default();
        let mut b = EventBatch::default();
        let ev = |nr: &str, path: &str, comm: &str| Event {
            kind: 0,
            nr: syscall_nr(nr).unwrap(),
            ret: 42,
            fd: -1,
            dirfd: 0,
            flags: 0x1000,
            comm: comm.into(),
            path: path.into(),
            ..Default::default()
        };
        b.push(&ev("getpid", "", "sh"));
        b.push(&ev("newfstatat", "", "sh"));
        b.push(&ev("openat", "/tmp/a\x1b[2Jb\nfake 12:00:00 line", "evil\x1b]0;x\x07"));
        b.push(&Event { kind: 2, nr: ProcOp::Exec as u16, path: "".into(), comm: "x".into(), ..Default::default() });
        let lines: Vec<String> = (0..b.len()).map(|i| line(&h, &b, i, TimeFormat::Relative)).collect();
        assert!(lines[0].ends_with(" getpid = 42"), "{}", lines[0]);
        assert!(lines[1].contains(" newfstatat dirfd=0 path=\"\" flags=AT_EMPTY_PATH = 42"), "{}", lines[1]);
        assert!(
            lines[2].contains("path=/tmp/a\\x1b[2Jb\\nfake 12:00:00 line") && lines[2].contains("evil\\x1b]0;x\\x07"),
            "{}",
            lines[2]
        );
        assert!(lines[3].ends_with("proc_exec path=\"\""), "{}", lines[3]);
        for l in &lines {
            let after_pid = &l[l.find('/').unwrap()..];
            let op = after_pid.trim_start_matches(|c: char| c != ' ').trim_start();
            assert!(!op.contains("  ") && !op.contains("= =") && !op.ends_with('='), "{l}");
            assert!(!l.chars().any(|c| c.is_control()), "{l:?}");
        }
        // JSON keeps the bytes as they are, escaped by JSON's rules.
        let j = serde_json::to_string(&json(&h, &b, 2)).unwrap();
        assert!(j.contains("\\u001b[2Jb\\nfake") && !j.contains('\x1b'), "{j}");
    }

    #[test]
    fn block_line() {
        let h = TraceHeader {
            block_devices: vec![BlockDevice { dev: 7 << 20, name: "loop0".into(), ..Default::default() }],
            ..Default::default()
        };
        let mut b = EventBatch::default();
        b.push(&Event {
            kind: 1,
            nr: 1,
            flags: Rwbs::SYNC,
            dev: 7 << 20,
            off: 2048,
            bytes: 4096,
            lat: 90_000,
            ..Default::default()
        });
        let l = line(&h, &b, 0, TimeFormat::Monotonic);
        assert!(l.contains("block_write dev=loop0(7:0) sector=2048 bytes=4096 (4.00KiB) rwbs=WS"), "{l}");
        assert_eq!(json(&h, &b, 0)["disk"], "loop0");
    }

    #[test]
    fn flags() {
        assert_eq!(open_flags(0), "O_RDONLY");
        assert_eq!(open_flags(0o4010002), "O_RDWR|O_SYNC");
        assert_eq!(open_flags(0o40001), "O_WRONLY|O_DIRECT");
    }
}

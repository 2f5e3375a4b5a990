//! The data a replay writes: the byte at file offset `o` is [`byte`]`(o)`, never zero, the same
//! whoever writes it and in whatever order. A workload that writes this pattern can be checked
//! byte for byte against its replay.
//!
//! ```text
//! x = (o mod 2^20) * 2654435761 mod 2^32
//! byte(o) = 1 + (x >> 16) mod 255
//! ```

/// The pattern repeats every `PERIOD` bytes (a multiple of every block size, so that a slice
/// for an aligned offset is aligned too).
pub const PERIOD: u64 = 1 << 20;

/// Alignment of pattern and read buffers (O_DIRECT needs the logical block size; 4 KiB covers it).
pub const ALIGN: usize = 4096;

/// The byte at file offset `o`.
#[inline]
pub fn byte(o: u64) -> u8 {
    let x = ((o & (PERIOD - 1)) as u32).wrapping_mul(2_654_435_761);
    1 + ((x >> 16) % 255) as u8
}

/// Fill `buf` with the pattern starting at file offset `off`.
pub fn fill(buf: &mut [u8], off: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = byte(off + i as u64);
    }
}

/// A page-aligned, zero-initialised buffer (freed on drop).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is plain memory owned by this value.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only read it.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `len` bytes (at least one page), aligned to [`ALIGN`].
    pub fn new(len: usize) -> AlignedBuf {
        let len = len.max(ALIGN).next_multiple_of(ALIGN);
        let layout = std::alloc::Layout::from_size_align(len, ALIGN).expect("valid layout");
        // SAFETY: non-zero size, valid layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, len }
    }
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes while self lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    /// The bytes, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
    /// Start of the buffer.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Never true (at least one page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len, ALIGN).expect("valid layout");
        // SAFETY: allocated with this layout in new().
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

/// The pattern, generated once, from which every write takes its bytes without copying.
pub struct Pattern {
    buf: AlignedBuf,
}

impl Pattern {
    /// A pattern serving writes of up to `max_len` bytes at any offset.
    pub fn new(max_len: u64) -> Pattern {
        let mut buf = AlignedBuf::new((PERIOD + max_len) as usize);
        let s = buf.as_mut_slice();
        // One period computed, then copied (the rest repeats it).
        let (p, total) = (PERIOD as usize, s.len());
        fill(&mut s[..p.min(total)], 0);
        let mut done = p.min(total);
        while done < total {
            let n = (total - done).min(done);
            s.copy_within(..n, done);
            done += n;
        }
        Pattern { buf }
    }

    /// The `len` pattern bytes for file offset `off` (aligned when `off` is).
    #[inline]
    pub fn at(&self, off: u64, len: usize) -> &[u8] {
        let start = (off % PERIOD) as usize;
        let s = self.buf.as_slice();
        &s[start..(start + len).min(s.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_non_zero_periodic_and_aligned() {
        assert!((0..3 * PERIOD).all(|o| byte(o) != 0));
        assert_eq!(byte(5), byte(5 + PERIOD));
        let p = Pattern::new(10_000);
        for off in [0u64, 1, 4095, 4096, PERIOD - 3, 7 * PERIOD + 12_345] {
            let s = p.at(off, 9_000);
            assert_eq!(s.len(), 9_000);
            assert!(s.iter().enumerate().all(|(i, &b)| b == byte(off + i as u64)), "offset {off}");
        }
        assert_eq!(p.at(8192, 1).as_ptr() as usize % ALIGN, 0);
        let distinct: std::collections::HashSet<u8> = (0..4096).map(byte).collect();
        assert!(distinct.len() > 200, "varied bytes, not a constant");
    }
}

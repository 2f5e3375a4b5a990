//! Cache hints for readers that walk a batch's columns row by row: some 40 columns are more
//! streams than the hardware's prefetcher follows, so each new cache line of each column would
//! otherwise be waited for.

/// Asks the CPU for the cache line at `p` (a hint: nothing is read, any address may be given).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and faults on no address; SSE is part of x86-64.
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks for row `i` of column `c` (rows past the end are asked for harmlessly).
#[inline(always)]
pub fn prefetch_row<T>(c: &[T], i: usize) {
    prefetch(c.as_ptr().wrapping_add(i));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_past_the_end_or_at_null_are_harmless() {
        let c = [1u64, 2, 3];
        for i in [0, 2, 3, 1 << 20, usize::MAX / 16] {
            prefetch_row(&c, i);
        }
        prefetch(std::ptr::null::<u8>());
        assert_eq!(c, [1, 2, 3]);
    }
}

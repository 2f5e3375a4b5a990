//! Thin wrappers over the system calls the standard library does not offer. Each returns the
//! raw result: a value, or `-errno`, as the recording stores results.

use std::ffi::CStr;
use std::sync::atomic::AtomicU32;

/// Resolution flags of every path lookup in a sandbox: stay beneath the root directory fd
/// (`..` and absolute symlinks that would leave it fail with EXDEV), follow no /proc magic
/// links, cross no mount point.
pub const RESOLVE_SANDBOX: u64 = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_XDEV;

/// `-errno` of the last failed call.
#[inline]
pub fn neg_errno() -> i64 {
    -(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) as i64)
}

/// A raw syscall result (`-1` + errno) as `-errno`.
#[inline]
pub fn ret(r: i64) -> i64 {
    if r == -1 {
        neg_errno()
    } else {
        r
    }
}

/// openat2(dirfd, path, {flags, mode, resolve}).
pub fn openat2(dirfd: i32, path: &CStr, flags: u64, mode: u64, resolve: u64) -> i64 {
    // SAFETY: open_how is plain old data; all-zero is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags;
    how.mode = mode;
    how.resolve = resolve;
    // SAFETY: how and path outlive the call; the kernel reads `size_of(how)` bytes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    ret(r)
}

/// CLOCK_MONOTONIC in ns (the clock of recorded timestamps).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleep until CLOCK_MONOTONIC reaches `ns`.
pub fn sleep_until(ns: u64) {
    let ts =
        libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long };
    // SAFETY: valid timespec; EINTR just returns early (the caller re-checks the time).
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
}

/// Sleep while `*word == val`, until woken or for at most 50 ms (so that a stop raised
/// between a check and the sleep is seen soon).
pub fn futex_wait(word: &AtomicU32, val: u32) {
    let ts = libc::timespec { tv_sec: 0, tv_nsec: 50_000_000 };
    // SAFETY: the address is a valid, aligned u32 for the lifetime of the call.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            val,
            &ts as *const libc::timespec,
        )
    };
}

/// Wake every thread sleeping on `word`.
pub fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: the address is a valid, aligned u32.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX) };
}

/// Advise the kernel to back `len` bytes at `ptr` (fresh, untouched anonymous memory) with
/// transparent huge pages: a large buffer then costs a few page faults instead of one per 4 KiB.
/// Only the 2 MiB-aligned part is advised; where THP is off this does nothing.
pub fn advise_huge_pages(ptr: *mut u8, len: usize) {
    const HUGE: usize = 2 << 20;
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + len) & !(HUGE - 1);
    if end > start {
        // SAFETY: advice on memory the caller owns; it changes no contents.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// The signal that interrupts a worker blocked in a system call once the run is stopped.
const INTERRUPT: libc::c_int = libc::SIGURG;

extern "C" fn on_interrupt(_: libc::c_int) {}

/// Installs a handler of [`INTERRUPT`] that does nothing, without `SA_RESTART`: a system call
/// it interrupts (an open that waits for a FIFO's other end, say) fails with `EINTR` instead of
/// waiting on, so a stopped run ends.
pub fn install_interrupt_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: a zeroed sigaction with a handler that does nothing (async-signal-safe).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(INTERRUPT, &sa, std::ptr::null_mut());
        }
    });
}

/// The calling thread, for [`interrupt`].
pub fn this_thread() -> u64 {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

/// Interrupts a system call `thread` (a running, not yet joined thread) is blocked in.
pub fn interrupt(thread: u64) {
    // SAFETY: the caller guarantees the thread has not been joined, so its id is valid.
    unsafe { libc::pthread_kill(thread as libc::pthread_t, INTERRUPT) };
}

/// Ask for precise timer wake-ups (the default slack is 50 µs).
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

/// The 1-minute load average.
pub fn loadavg1() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Whether this process may use SCHED_FIFO (tried on a throwaway thread).
pub fn can_realtime() -> bool {
    std::thread::spawn(set_realtime).join().unwrap_or(false)
}

/// Put the calling thread under SCHED_FIFO, priority 1; false if not allowed.
pub fn set_realtime() -> bool {
    let p = libc::sched_param { sched_priority: 1 };
    // SAFETY: setting the calling thread's own scheduling policy.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) == 0 }
}

#[cfg(test)]
mod tests {
    #[test]
    fn set_realtime_puts_the_thread_under_sched_fifo() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED set_realtime_puts_the_thread_under_sched_fifo: SCHED_FIFO needs root");
            return;
        }
        assert!(super::can_realtime());
        let policy = std::thread::spawn(|| {
            assert!(super::set_realtime());
            // SAFETY: querying the calling thread's own policy.
            unsafe { libc::sched_getscheduler(0) }
        })
        .join()
        .unwrap();
        assert_eq!(policy, libc::SCHED_FIFO);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER, "only that thread");
    }
}

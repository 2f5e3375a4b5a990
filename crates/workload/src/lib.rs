//! Built-in workloads with known behaviour, to watch with latscope and to test it against: the
//! storage test of the spectrogram write-up (write or read buffers of a size at a rate, or as fast
//! as possible, optionally with O_SYNC / O_DIRECT) and a timer workload (nanosleep of a known
//! length). Each operation is timed around the call, so the latency the kernel probes measure can
//! be compared with what the program saw.
//!
//! ```no_run
//! use latscope_workload::{Load, LoadOp};
//! use std::time::Duration;
//!
//! let load = Load { op: LoadOp::Nanosleep { sleep: Duration::from_micros(100) }, rate: 2000.0, ..Load::default() };
//! let report = load.run(&Default::default())?;
//! println!("{} ops, p99 {:?} ns", report.ops, report.latency.value_at_quantile(0.99));
//! # Ok::<(), latscope_workload::LoadError>(())
//! ```

#![warn(missing_docs)]

use latscope_hist::Histogram;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What each operation is.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadOp {
    /// write() a buffer to the file, sequentially, wrapping at the file size.
    Write {
        /// The file (created if missing).
        path: PathBuf,
    },
    /// read() a buffer from the file, sequentially, wrapping (the file is filled first if short).
    Read {
        /// The file.
        path: PathBuf,
    },
    /// nanosleep() for a known time (no file).
    Nanosleep {
        /// How long each sleep asks for.
        sleep: Duration,
    },
}

/// A workload: one operation repeated at a rate for a while.
#[derive(Debug, Clone)]
pub struct Load {
    /// The operation.
    pub op: LoadOp,
    /// Bytes per write or read.
    pub size: u64,
    /// Operations per second (0: as fast as possible).
    pub rate: f64,
    /// How long to run.
    pub duration: Duration,
    /// Stop after this many operations.
    pub count: Option<u64>,
    /// Open with O_SYNC.
    pub sync: bool,
    /// Open with O_DIRECT (sizes must be multiples of the device's block size).
    pub direct: bool,
    /// Offset at which writes and reads wrap around to the start of the file.
    pub file_size: u64,
}

impl Default for Load {
    fn default() -> Self {
        Load {
            op: LoadOp::Nanosleep { sleep: Duration::from_micros(100) },
            size: 1024,
            rate: 0.0,
            duration: Duration::from_secs(10),
            count: None,
            sync: false,
            direct: false,
            file_size: 64 << 20,
        }
    }
}

/// Why a workload could not run (or stopped).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// An option is out of range.
    #[error("{0}")]
    Invalid(String),
    /// The file could not be prepared or opened.
    #[error("cannot open {path}: {message}")]
    Open {
        /// The file.
        path: PathBuf,
        /// What went wrong, with a hint.
        message: String,
    },
}

/// What a workload did.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// Operations completed.
    pub ops: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Time from the first operation to the end.
    pub elapsed: Duration,
    /// Latency of each operation as measured around the call, ns.
    pub latency: Histogram,
    /// Why it stopped early, if an operation failed (with a hint).
    pub error: Option<String>,
}

/// A buffer aligned for O_DIRECT.
struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    fn new(size: usize) -> Result<AlignedBuf, LoadError> {
        let layout = std::alloc::Layout::from_size_align(size.max(1), 4096)
            .map_err(|_| LoadError::Invalid(format!("a {size}-byte buffer is too large")))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(LoadError::Invalid(format!("cannot allocate a {size}-byte buffer")));
        }
        // Not all zeros, so that nothing can shortcut the data.
        // SAFETY: ptr points to `size` bytes we own.
        unsafe {
            for i in 0..size {
                *ptr.add(i) = (i as u8).wrapping_mul(31).wrapping_add(7);
            }
        }
        Ok(AlignedBuf { ptr, layout })
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sleep_until(t_ns: u64) {
    let ts = libc::timespec { tv_sec: (t_ns / 1_000_000_000) as _, tv_nsec: (t_ns % 1_000_000_000) as _ };
    // SAFETY: valid timespec; an interrupted sleep just returns early.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
}

/// Name the calling thread (its comm, 15 characters at most) so that filters such as
/// `proc.name = latscope-load` select it, and make its sleeps end when asked (timer slack 1 ns),
/// so that their latency is known.
pub fn set_comm(name: &str) {
    let mut b: Vec<u8> = name.as_bytes().iter().copied().take(15).collect();
    b.push(0);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes; PR_SET_TIMERSLACK
    // takes a number.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, b.as_ptr() as libc::c_ulong, 0, 0, 0);
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

impl Load {
    fn hint(&self, e: &std::io::Error) -> String {
        match e.raw_os_error() {
            Some(libc::EINVAL) if self.direct => format!(
                "{e}: O_DIRECT needs the size ({} bytes) and offsets to be multiples of the device's block size \
                 (try a size of 4KiB) and a file system that supports it",
                self.size
            ),
            Some(libc::ENOSPC) => format!("{e}: the file system is full (try a smaller file size)"),
            _ => e.to_string(),
        }
    }

    fn open(&self) -> Result<libc::c_int, LoadError> {
        let (path, write) = match &self.op {
            LoadOp::Write { path } => (path, true),
            LoadOp::Read { path } => (path, false),
            LoadOp::Nanosleep { .. } => return Ok(-1),
        };
        let fail = |message: String| LoadError::Open { path: path.clone(), message };
        let wrap = self.file_size.max(self.size);
        if !write {
            // Make sure there is something to read: fill the file up to the wrap size.
            let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            if len < wrap {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| fail(e.to_string()))?;
                let chunk = vec![0x5au8; 1 << 20];
                let mut left = wrap - len;
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    f.write_all(&chunk[..n]).map_err(|e| fail(self.hint(&e)))?;
                    left -= n as u64;
                }
                f.sync_all().ok();
            }
        }
        let cpath =
            CString::new(path.as_os_str().as_bytes()).map_err(|_| fail("the path contains a NUL byte".into()))?;
        let mut flags = libc::O_CLOEXEC | if write { libc::O_WRONLY | libc::O_CREAT } else { libc::O_RDONLY };
        if self.sync {
            flags |= libc::O_SYNC;
        }
        if self.direct {
            flags |= libc::O_DIRECT;
        }
        // SAFETY: valid NUL-terminated path.
        let fd = unsafe { libc::open(cpath.as_ptr(), flags, 0o644) };
        if fd < 0 {
            return Err(fail(self.hint(&std::io::Error::last_os_error())));
        }
        Ok(fd)
    }

    /// Run until the duration, the count, or `stop` (set it from a signal handler).
    pub fn run(&self, stop: &AtomicBool) -> Result<LoadReport, LoadError> {
        let is_sleep = matches!(self.op, LoadOp::Nanosleep { .. });
        if self.size == 0 && !is_sleep {
            return Err(LoadError::Invalid("the size must be at least 1 byte".into()));
        }
        if self.rate < 0.0 || self.rate.is_nan() {
            return Err(LoadError::Invalid(
                "the rate must be 0 (as fast as possible) or a positive number of operations per second".into(),
            ));
        }
        let size = self.size as usize;
        let wrap = self.file_size.max(self.size);
        let buf = AlignedBuf::new(if is_sleep { 1 } else { size })?;
        let fd = self.open()?;
        let sleep = match self.op {
            LoadOp::Nanosleep { sleep } => sleep,
            _ => Duration::ZERO,
        };
        let sleep_ts = libc::timespec { tv_sec: sleep.as_secs() as _, tv_nsec: sleep.subsec_nanos() as _ };
        let mut latency = Histogram::new();
        let (mut bytes, mut pos, mut ops) = (0u64, 0u64, 0u64);
        let period = if self.rate > 0.0 { 1e9 / self.rate } else { 0.0 };
        let max_ops = self.count.unwrap_or(u64::MAX);
        let start = now_ns();
        let end = start.saturating_add(self.duration.as_nanos().min(u64::MAX as u128) as u64);
        let mut error = None;
        while ops < max_ops && !stop.load(Ordering::Relaxed) {
            if period > 0.0 {
                let due = start + (ops as f64 * period) as u64;
                if due >= end {
                    break;
                }
                if now_ns() < due {
                    sleep_until(due);
                }
            }
            let t0 = now_ns();
            if t0 >= end {
                break;
            }
            if !is_sleep && pos + self.size > wrap {
                // SAFETY: lseek on our fd.
                unsafe { libc::lseek(fd, 0, libc::SEEK_SET) };
                pos = 0;
            }
            // SAFETY: `buf` holds `size` bytes; the timespec is valid; `fd` is ours.
            let r: isize = unsafe {
                match self.op {
                    LoadOp::Write { .. } => libc::write(fd, buf.ptr as *const _, size),
                    LoadOp::Read { .. } => libc::read(fd, buf.ptr as *mut _, size),
                    LoadOp::Nanosleep { .. } => libc::syscall(
                        libc::SYS_nanosleep,
                        &sleep_ts as *const libc::timespec,
                        std::ptr::null_mut::<libc::timespec>(),
                    ) as isize,
                }
            };
            let t1 = now_ns();
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                error = Some(self.hint(&e));
                break;
            }
            if matches!(self.op, LoadOp::Read { .. }) && r == 0 {
                // End of file before the wrap size (the file shrank): start over.
                // SAFETY: lseek on our fd.
                unsafe { libc::lseek(fd, 0, libc::SEEK_SET) };
                pos = 0;
                continue;
            }
            if !is_sleep {
                bytes += r as u64;
                pos += r as u64;
            }
            latency.record(t1 - t0);
            ops += 1;
        }
        let elapsed = Duration::from_nanos((now_ns() - start).max(1));
        if fd >= 0 {
            // SAFETY: closing our fd.
            unsafe { libc::close(fd) };
        }
        Ok(LoadReport { ops, bytes, elapsed, latency, error })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_are_never_shorter_than_asked_and_counted() {
        let load = Load {
            op: LoadOp::Nanosleep { sleep: Duration::from_micros(200) },
            count: Some(50),
            duration: Duration::from_secs(30),
            ..Load::default()
        };
        let r = load.run(&AtomicBool::new(false)).unwrap();
        assert_eq!(r.ops, 50);
        assert_eq!(r.latency.count(), 50);
        assert!(r.latency.min().unwrap() >= 200_000, "{:?}", r.latency.min());
    }

    #[test]
    fn writes_wrap_at_the_file_size_and_count_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let load = Load {
            op: LoadOp::Write { path: path.clone() },
            size: 4096,
            file_size: 16384,
            count: Some(10),
            duration: Duration::from_secs(30),
            ..Load::default()
        };
        let r = load.run(&AtomicBool::new(false)).unwrap();
        assert_eq!((r.ops, r.bytes), (10, 40960));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16384, "never grows beyond the wrap size");
    }

    #[test]
    fn a_read_of_a_missing_directory_is_a_clear_error() {
        let load = Load { op: LoadOp::Read { path: "/nonexistent/dir/f".into() }, ..Load::default() };
        let e = load.run(&AtomicBool::new(false)).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/dir/f"), "{e}");
    }
}

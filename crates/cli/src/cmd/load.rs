//! `latscope load`: the storage test program of the spectrogram write-up, built in: write (or
//! read) buffers of a given size at a given rate or as fast as possible, optionally with O_SYNC
//! or O_DIRECT, and report what it did with the latency it measured itself (to compare with what
//! latscope measures in the kernel). Also a timer workload (`--op nanosleep`) with known latency.

use anyhow::{bail, Context, Result};
use latscope_event::units::{fmt_bytes, fmt_count, fmt_ns, parse_duration_ns, parse_duration_secs_default, parse_size};
use latscope_view::spectrogram::Buckets;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What each operation is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// write() a buffer (sequentially, wrapping at --file-size).
    Write,
    /// read() a buffer (sequentially, wrapping; the file is filled first if too short).
    Read,
    /// nanosleep() for --sleep (a latency known in advance; no file).
    Nanosleep,
}

/// A test workload: write (or read) buffers of --size to a file at --rate operations per second
/// (or as fast as possible), for --duration, optionally with O_SYNC / O_DIRECT; then print the
/// operations, bytes, achieved rate and the latency percentiles measured around each call.
///
/// The process is named `latscope-load` (its comm), so `proc.name=latscope-load` selects it in
/// filters. Pacing uses clock_nanosleep, so `evt.type=nanosleep` selects only the operations of
/// `--op nanosleep`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples (the spectrogram write-up's three tests):
  latscope load -f /mnt/test/f --size 1KiB --rate 1000 -d 30s        # moderate activity
  latscope load -f /mnt/test/f --size 100KiB -d 30s                  # as fast as possible
  latscope load -f /mnt/test/f --size 100KiB --sync --direct -d 30s  # caching disabled
Watch them with:
  latscope spectrogram 'proc.name=latscope-load and evt.is_io_write=true and fd.name contains /mnt'
Timer workload with a known latency:
  latscope load --op nanosleep --sleep 100us --rate 2000 -d 10s")]
pub struct Args {
    /// File to write or read (created if missing; never grows beyond --file-size).
    #[arg(short = 'f', long, value_name = "PATH")]
    pub path: Option<PathBuf>,
    /// The operation.
    #[arg(long, value_enum, default_value = "write")]
    pub op: Op,
    /// Bytes per operation.
    #[arg(short, long, default_value = "1KiB", value_parser = parse_size, value_name = "SIZE")]
    pub size: u64,
    /// Operations per second (0: as fast as possible).
    #[arg(long, default_value_t = 0.0, value_name = "OPS")]
    pub rate: f64,
    /// How long to run (e.g. 10s, 2m; a bare number is seconds).
    #[arg(short, long, default_value = "10s", value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub duration: u64,
    /// Stop after this many operations (whichever of this and --duration comes first).
    #[arg(short = 'n', long, value_name = "N")]
    pub count: Option<u64>,
    /// Open with O_SYNC (each write returns once the data is on the device).
    #[arg(long)]
    pub sync: bool,
    /// Open with O_DIRECT (bypass the page cache; sizes must be multiples of the block size).
    #[arg(long)]
    pub direct: bool,
    /// Offset at which writes and reads wrap around to the start of the file.
    #[arg(long, default_value = "64MiB", value_parser = parse_size, value_name = "SIZE")]
    pub file_size: u64,
    /// --op nanosleep: how long each sleep asks for.
    #[arg(long, default_value = "100us", value_parser = parse_duration_ns, value_name = "DURATION")]
    pub sleep: u64,
    /// Process name (comm) to run under.
    #[arg(long, default_value = "latscope-load", value_name = "NAME")]
    pub name: String,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A buffer aligned for O_DIRECT.
struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    fn new(size: usize) -> Result<AlignedBuf> {
        let layout = std::alloc::Layout::from_size_align(size.max(1), 4096).context("buffer size too large")?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            bail!("cannot allocate a {} buffer", fmt_bytes(size as u64));
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

fn set_comm(name: &str) {
    let mut b: Vec<u8> = name.as_bytes().iter().copied().take(15).collect();
    b.push(0);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes; PR_SET_TIMERSLACK
    // takes a number (1 ns: sleeps end when asked, so their latency is known).
    unsafe {
        libc::prctl(libc::PR_SET_NAME, b.as_ptr() as libc::c_ulong, 0, 0, 0);
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Latency histogram of the load's own measurements.
struct Lat {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Lat {
    fn new() -> Lat {
        Lat { counts: vec![0; Buckets::FINE.len()], n: 0, sum: 0, min: u64::MAX, max: 0 }
    }
    fn add(&mut self, v: u64) {
        self.counts[Buckets::FINE.index(v)] += 1;
        self.n += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
    /// The value at quantile `q` (upper bound of its bucket, at most the maximum).
    fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = Buckets::FINE.bounds(i);
                return (lo + (hi - lo) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

fn errno_hint(e: &std::io::Error, a: &Args) -> String {
    match e.raw_os_error() {
        Some(libc::EINVAL) if a.direct => format!(
            "{e}: O_DIRECT needs the size ({}) and offsets to be multiples of the device's block size \
             (try --size 4KiB) and a file system that supports it",
            fmt_bytes(a.size)
        ),
        Some(libc::ENOSPC) => format!("{e}: the file system is full (try a smaller --file-size)"),
        _ => e.to_string(),
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    if a.size == 0 && a.op != Op::Nanosleep {
        bail!("--size must be at least 1 byte");
    }
    if a.rate < 0.0 || a.rate.is_nan() {
        bail!("--rate must be 0 (as fast as possible) or a positive number of operations per second");
    }
    let size = a.size as usize;
    let wrap = a.file_size.max(a.size);
    set_comm(&a.name);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    let buf = AlignedBuf::new(size)?;
    let mut fd = -1;
    if a.op != Op::Nanosleep {
        let Some(path) = &a.path else { bail!("--path is needed for --op write and --op read") };
        let cpath = CString::new(path.as_os_str().as_bytes()).context("the path contains a NUL byte")?;
        if a.op == Op::Read {
            // Make sure there is something to read: fill the file up to the wrap size.
            let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            if len < wrap {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                let chunk = vec![0x5au8; 1 << 20];
                let mut left = wrap - len;
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    f.write_all(&chunk[..n]).with_context(|| format!("cannot fill {}", path.display()))?;
                    left -= n as u64;
                }
                f.sync_all().ok();
            }
        }
        let mut flags = libc::O_CLOEXEC;
        flags |= if a.op == Op::Write { libc::O_WRONLY | libc::O_CREAT } else { libc::O_RDONLY };
        if a.sync {
            flags |= libc::O_SYNC;
        }
        if a.direct {
            flags |= libc::O_DIRECT;
        }
        // SAFETY: valid NUL-terminated path.
        fd = unsafe { libc::open(cpath.as_ptr(), flags, 0o644) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            bail!("cannot open {}: {}", path.display(), errno_hint(&e, &a));
        }
    }

    let mut lat = Lat::new();
    let mut bytes: u64 = 0;
    let mut pos: u64 = 0;
    let period = if a.rate > 0.0 { 1e9 / a.rate } else { 0.0 };
    let max_ops = a.count.unwrap_or(u64::MAX);
    let sleep_ts = libc::timespec { tv_sec: (a.sleep / 1_000_000_000) as _, tv_nsec: (a.sleep % 1_000_000_000) as _ };
    let start = now_ns();
    let end = start + a.duration;
    let mut ops: u64 = 0;
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
        let r: isize = match a.op {
            Op::Write => {
                if pos + a.size > wrap {
                    // SAFETY: lseek on our fd.
                    unsafe { libc::lseek(fd, 0, libc::SEEK_SET) };
                    pos = 0;
                }
                // SAFETY: buf holds `size` bytes.
                unsafe { libc::write(fd, buf.ptr as *const _, size) }
            }
            Op::Read => {
                if pos + a.size > wrap {
                    // SAFETY: lseek on our fd.
                    unsafe { libc::lseek(fd, 0, libc::SEEK_SET) };
                    pos = 0;
                }
                // SAFETY: buf has room for `size` bytes.
                unsafe { libc::read(fd, buf.ptr as *mut _, size) }
            }
            // SAFETY: the raw nanosleep syscall with a valid timespec.
            Op::Nanosleep => unsafe {
                libc::syscall(
                    libc::SYS_nanosleep,
                    &sleep_ts as *const libc::timespec,
                    std::ptr::null_mut::<libc::timespec>(),
                ) as isize
            },
        };
        let t1 = now_ns();
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            error = Some(errno_hint(&e, &a));
            break;
        }
        if a.op == Op::Read && r == 0 {
            // End of file before the wrap size (the file shrank): start over.
            // SAFETY: lseek on our fd.
            unsafe { libc::lseek(fd, 0, libc::SEEK_SET) };
            pos = 0;
            continue;
        }
        if a.op != Op::Nanosleep {
            bytes += r as u64;
            pos += r as u64;
        }
        lat.add(t1 - t0);
        ops += 1;
    }
    let elapsed = (now_ns() - start).max(1);
    if fd >= 0 {
        // SAFETY: closing our fd.
        unsafe { libc::close(fd) };
    }
    let secs = elapsed as f64 / 1e9;
    let what = match a.op {
        Op::Write => format!("write {}", fmt_bytes(a.size)),
        Op::Read => format!("read {}", fmt_bytes(a.size)),
        Op::Nanosleep => format!("nanosleep {}", fmt_ns(a.sleep)),
    };
    let mut mode = Vec::new();
    if a.sync {
        mode.push("O_SYNC");
    }
    if a.direct {
        mode.push("O_DIRECT");
    }
    let q = |p: f64| lat.quantile(p);
    if a.json {
        let j = serde_json::json!({
            "op": format!("{:?}", a.op).to_lowercase(),
            "path": a.path,
            "size": a.size,
            "sync": a.sync,
            "direct": a.direct,
            "target_rate": a.rate,
            "ops": ops,
            "bytes": bytes,
            "duration_s": secs,
            "ops_per_s": ops as f64 / secs,
            "bytes_per_s": bytes as f64 / secs,
            "latency_ns": {
                "min": if lat.n > 0 { lat.min } else { 0 },
                "mean": if lat.n > 0 { (lat.sum / lat.n as u128) as u64 } else { 0 },
                "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "p999": q(0.999),
                "max": lat.max,
            },
            "error": error,
        });
        println!("{j}");
    } else {
        let target = if a.rate > 0.0 { format!("target {}", fmt_count(a.rate)) } else { "as fast as possible".into() };
        let place = a.path.as_ref().map(|p| format!(" on {}", p.display())).unwrap_or_default();
        let modes = if mode.is_empty() { String::new() } else { format!(" ({})", mode.join("|")) };
        println!(
            "latscope load: {what}{place}{modes}: {ops} ops in {secs:.2} s = {} ops/s ({target})",
            fmt_count((ops as f64 / secs).round())
        );
        if a.op != Op::Nanosleep {
            println!("  {} transferred, {}/s", fmt_bytes(bytes), fmt_bytes((bytes as f64 / secs) as u64));
        }
        if lat.n > 0 {
            println!(
                "  latency (measured around each call): min {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
                fmt_ns(lat.min),
                fmt_ns(q(0.5)),
                fmt_ns(q(0.9)),
                fmt_ns(q(0.99)),
                fmt_ns(q(0.999)),
                fmt_ns(lat.max)
            );
        }
    }
    if let Some(e) = error {
        eprintln!("latscope load: stopped after {ops} ops: {e}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let mut l = Lat::new();
        for v in 1..=1000u64 {
            l.add(v * 1000);
        }
        let p50 = l.quantile(0.5) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.01, "{p50}");
        assert_eq!(l.quantile(1.0), 1_000_000);
        assert!(l.quantile(0.0) >= 1000);
    }
}

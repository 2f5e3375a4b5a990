//! The read probe on a real file system on a real (loop) device: a file partly in the page cache
//! shows two tiers as two peaks, and the memory tier's share estimates the cached share (checked
//! against `mincore`). O_DIRECT reads show only the device; a hot region only memory.
//!
//! Needs root (loop device, mount); skipped with a message otherwise, and fails under `CI=true`.

use latscope_hist::Histogram;
use latscope_micro::{explain, parse_probe, Explanation, Probe, Tier};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

const FILE_SIZE: u64 = 256 << 20;

/// ext4 on a loop device whose reads go to the backing file with O_DIRECT (`--direct-io=on`), so
/// that a read the page cache misses really reaches the disk below.
struct LoopFs {
    _dir: tempfile::TempDir,
    mnt: PathBuf,
    dev: String,
}

fn run(cmd: &str, args: &[&str]) -> String {
    let o = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(o.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

impl LoopFs {
    fn new(test: &str) -> Option<LoopFs> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            latscope_testkit::skip(test, "not running as root (needs a loop device)");
            return None;
        }
        if !["losetup", "mkfs.ext4", "mount"].iter().all(|t| latscope_testkit::require_tool(test, t)) {
            return None;
        }
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let img = dir.path().join("disk.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        std::fs::File::create(&img).unwrap().set_len(FILE_SIZE + (96 << 20)).unwrap();
        let dev = run("losetup", &["--direct-io=on", "-f", "--show", img.to_str().unwrap()]);
        let fs = LoopFs { _dir: dir, mnt, dev };
        run("mkfs.ext4", &["-q", "-F", &fs.dev]);
        run("mount", &[&fs.dev, fs.mnt.to_str().unwrap()]);
        Some(fs)
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// Share of the file's pages in the page cache (`mincore`): the ground truth.
fn resident_share(path: &Path) -> f64 {
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    let page = 4096;
    // SAFETY: a read-only shared mapping of a file we keep open, unmapped below; mincore writes
    // one byte per page into a vector of that many bytes.
    unsafe {
        let addr = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        assert_ne!(addr, libc::MAP_FAILED);
        let mut vec = vec![0u8; len.div_ceil(page)];
        assert_eq!(libc::mincore(addr, len, vec.as_mut_ptr()), 0);
        libc::munmap(addr, len);
        vec.iter().filter(|&&b| b & 1 == 1).count() as f64 / vec.len() as f64
    }
}

fn evict(path: &Path) {
    let f = std::fs::File::open(path).unwrap();
    // SAFETY: a valid fd; advice only.
    assert_eq!(unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }, 0);
}

/// Reads the first `bytes` of the file into the page cache (large reads, no read-ahead beyond).
fn warm(path: &Path, bytes: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).unwrap();
    // SAFETY: a valid fd; advice only.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < bytes {
        let n = (bytes - at).min(buf.len() as u64) as usize;
        assert_eq!(f.read_at(&mut buf[..n], at).unwrap(), n);
        at += n as u64;
    }
}

fn run_probe(text: &str, samples: u64) -> (Histogram, Explanation) {
    let mut p: Box<dyn Probe> = parse_probe(text).unwrap().remove(0).build(&mut |_| {}).unwrap();
    let mut h = Histogram::new();
    p.sample(&mut h, samples).unwrap();
    let e = explain(&h, "microbench", "ns", &p.info().params);
    eprintln!("{text}: {} reads, p50 {:?} ns\n  {}", h.count(), h.value_at_quantile(0.5), e.notes.join("\n  "));
    (h, e)
}

fn memory_share(e: &Explanation) -> f64 {
    e.peaks.iter().filter(|p| p.tier == Some(Tier::Memory)).map(|p| p.share).sum()
}

#[test]
fn a_partly_cached_file_shows_two_tiers_and_the_cached_share() {
    let Some(fs) = LoopFs::new("a_partly_cached_file_shows_two_tiers_and_the_cached_share") else { return };
    let path = fs.mnt.join("data");
    // The probe creates the file (256 MiB of pseudo-random data).
    parse_probe(&format!("read:{},file_size=256MiB", path.display())).unwrap()[0].build(&mut |_| {}).unwrap();
    evict(&path);
    assert!(resident_share(&path) < 0.01, "eviction failed: {}", resident_share(&path));
    warm(&path, FILE_SIZE * 3 / 10);
    let before = resident_share(&path);
    assert!((0.28..0.35).contains(&before), "warming cached {before}");

    // Buffered random reads over the whole file: hits at memory speed, misses at the device's;
    // each miss caches one more block, so the true share grows a little during the run.
    let (_, e) = run_probe(&format!("read:{}", path.display()), 3000);
    let after = resident_share(&path);
    let truth = (before + after) / 2.0;
    assert!(e.peaks.len() >= 2, "two tiers, two peaks: {e:#?}");
    assert_eq!(e.peaks[0].tier, Some(Tier::Memory), "{e:#?}");
    assert_eq!(e.peaks.last().unwrap().tier, Some(Tier::Device), "{e:#?}");
    let c = e.cache.expect("a cache estimate for buffered reads of a known region");
    assert_eq!(c.region_bytes, FILE_SIZE);
    assert!(
        (c.hit_share - truth).abs() <= 0.2 * truth,
        "estimated cached share {:.3}, true share {truth:.3} (mincore: {before:.3} before, {after:.3} after)",
        c.hit_share
    );

    // O_DIRECT bypasses the cache: every read goes to the device, whatever is cached.
    let (h, e) = run_probe(&format!("read:{},direct", path.display()), 1000);
    assert!(memory_share(&e) < 0.02, "O_DIRECT reads came from memory: {e:#?}");
    assert!(e.cache.is_none());
    // Not one percent of them at page-cache speed (a hit takes 1-2 us here; a loop device's
    // round trip through the block layer, even from the host's cache, takes ~30 us: it can
    // fall either side of the tier boundary, so the bound is well below it).
    assert!(h.value_at_quantile(0.01).unwrap() >= 10_000, "{h:?}");

    // A hot region inside the cached part: only the memory tier, and the estimate is the region.
    let (_, e) = run_probe(&format!("read:{},region=512KiB", path.display()), 2000);
    assert!(memory_share(&e) > 0.98, "{e:#?}");
    assert!(e.cache.unwrap().cached_bytes as f64 >= 0.98 * (512 << 10) as f64, "{e:#?}");
}

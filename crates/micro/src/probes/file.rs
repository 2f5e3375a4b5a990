//! Probes on files: random block reads (page cache or O_DIRECT) and fsync'd writes.

use crate::clock::monotonic_ns;
use crate::error::ProbeError;
use crate::probe::{size_name, Probe, ProbeInfo, Unit};
use latscope_hist::Histogram;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// A heap buffer aligned for O_DIRECT (4 KiB, or the block size if larger and a power of two).
struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

// SAFETY: the buffer is owned exclusively by its probe.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let align = if len.is_power_of_two() { len.max(4096) } else { 4096 };
        let layout = std::alloc::Layout::from_size_align(len.max(1), align).expect("valid buffer layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, layout }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` points to `layout.size()` initialised bytes owned by `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

fn seed() -> u64 {
    (monotonic_ns() ^ (u64::from(std::process::id()) << 32)) | 1
}

/// Random aligned reads of one block from the first `region` bytes of a file.
pub(crate) struct ReadProbe {
    info: ProbeInfo,
    file: File,
    path: PathBuf,
    buf: AlignedBuf,
    block_size: u64,
    blocks: u64,
    /// Offsets and file contents (no statistical subtlety needed, only speed).
    rng: fastrand::Rng,
}

impl ReadProbe {
    pub(crate) fn open(
        name: &str,
        path: &Path,
        file_size: Option<u64>,
        region: Option<u64>,
        block_size: u64,
        direct: bool,
        note: &mut dyn FnMut(&str),
    ) -> Result<ReadProbe, ProbeError> {
        let invalid = |why: String| ProbeError::Invalid { probe: name.to_string(), why };
        let io =
            |op: &str, source| ProbeError::Io { probe: name.to_string(), op: op.into(), path: path.into(), source };
        if block_size == 0 || (direct && !block_size.is_multiple_of(512)) {
            return Err(invalid(format!("block size {block_size} bytes: use a multiple of 512 (O_DIRECT needs one)")));
        }
        let existing = match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => return Err(invalid(format!("{} is not a regular file", path.display()))),
            Ok(m) => Some(m.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io("cannot read", e)),
        };
        let size = match (file_size, existing) {
            (Some(want), have) if have.unwrap_or(0) < want => {
                note(&format!(
                    "writing {} of pseudo-random data to {} for probe {name}",
                    size_name(want - have.unwrap_or(0)),
                    path.display()
                ));
                fill(path, have.unwrap_or(0), want).map_err(|e| io("cannot write", e))?;
                want
            }
            (Some(want), _) => want,
            (None, Some(have)) => have,
            (None, None) => {
                return Err(invalid(format!("{} does not exist: give file_size=SIZE to create it", path.display())))
            }
        };
        let region = region.unwrap_or(size).min(size);
        if region < block_size {
            return Err(invalid(format!(
                "the region read ({}) is smaller than one block ({})",
                size_name(region),
                size_name(block_size)
            )));
        }
        let mut o = OpenOptions::new();
        o.read(true);
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        let file = o.open(path).map_err(|e| io("cannot open", e))?;
        if !direct {
            // Random reads: no read-ahead, which would cache blocks the probe did not ask for.
            // SAFETY: a valid fd; advice only.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        }
        let how = if direct { "O_DIRECT" } else { "through the page cache" };
        let info = ProbeInfo::new(
            name,
            "read",
            Unit::Nanoseconds,
            format!(
                "random {}-aligned {} reads from the first {} of {} ({}), {how}",
                size_name(block_size),
                size_name(block_size),
                size_name(region),
                path.display(),
                size_name(size)
            ),
        )
        .with("path", path.display().to_string())
        .with("file_size", size)
        .with("region", region)
        .with("block_size", block_size)
        .with("direct", direct);
        Ok(ReadProbe {
            info,
            file,
            path: path.to_path_buf(),
            buf: AlignedBuf::new(block_size as usize),
            block_size,
            blocks: region / block_size,
            rng: fastrand::Rng::with_seed(seed()),
        })
    }
}

/// Appends pseudo-random bytes to `path` from `from` to `to` (real data: a sparse or zero-filled
/// file would be read without touching the device), then syncs them.
fn fill(path: &Path, from: u64, to: u64) -> std::io::Result<()> {
    let mut f = OpenOptions::new().create(true).write(true).truncate(false).open(path)?;
    f.seek(SeekFrom::Start(from))?;
    let mut rng = fastrand::Rng::with_seed(seed());
    let mut chunk = vec![0u8; 1 << 20];
    let mut at = from;
    while at < to {
        let n = (to - at).min(chunk.len() as u64) as usize;
        for w in chunk[..n].chunks_mut(8) {
            let v = rng.u64(..).to_le_bytes();
            w.copy_from_slice(&v[..w.len()]);
        }
        f.write_all(&chunk[..n])?;
        at += n as u64;
    }
    f.sync_all()
}

impl Probe for ReadProbe {
    fn info(&self) -> &ProbeInfo {
        &self.info
    }

    fn sample(&mut self, h: &mut Histogram, n: u64) -> Result<u64, ProbeError> {
        let bs = self.block_size as usize;
        for k in 0..n {
            let offset = self.rng.u64(..self.blocks) * self.block_size;
            let buf = &mut self.buf.as_mut()[..bs];
            let t0 = monotonic_ns();
            let r = self.file.read_at(buf, offset);
            let t1 = monotonic_ns();
            match r {
                Ok(got) if got == bs => h.record_interval(t0, t1),
                Ok(got) => {
                    return Err(ProbeError::Invalid {
                        probe: self.info.name.clone(),
                        why: format!(
                            "read of {bs} bytes at offset {offset} of {} returned {got} (the file shrank?) after {k} samples",
                            self.path.display()
                        ),
                    })
                }
                Err(e) => {
                    return Err(ProbeError::Io {
                        probe: self.info.name.clone(),
                        op: format!("read at offset {offset} of"),
                        path: self.path.clone(),
                        source: e,
                    })
                }
            }
        }
        Ok(n)
    }
}

/// Every block the fsync probe writes starts with this, and a file it reuses must too: the probe
/// never overwrites a file it did not create.
const FSYNC_MARK: &[u8] = b"latscope fsync probe\n";

/// Writes of `size` bytes, each followed by `fsync`, cycling through the first `file_size` bytes.
pub(crate) struct FsyncProbe {
    info: ProbeInfo,
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    slots: u64,
    next: u64,
}

impl FsyncProbe {
    pub(crate) fn open(name: &str, path: &Path, size: u64, file_size: u64) -> Result<FsyncProbe, ProbeError> {
        let invalid = |why: String| ProbeError::Invalid { probe: name.to_string(), why };
        let io =
            |op: &str, source| ProbeError::Io { probe: name.to_string(), op: op.into(), path: path.into(), source };
        if size < FSYNC_MARK.len() as u64 || size > file_size {
            return Err(invalid(format!(
                "write size {size} bytes: use {} bytes to file_size ({})",
                FSYNC_MARK.len(),
                size_name(file_size)
            )));
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io("cannot open", e))?;
        let len = file.metadata().map_err(|e| io("cannot read", e))?.len();
        if len > 0 {
            let mut head = vec![0u8; FSYNC_MARK.len()];
            let ours = file.read_exact(&mut head).is_ok() && head == FSYNC_MARK;
            if !ours {
                return Err(invalid(format!(
                    "{} exists and was not written by an fsync probe: name a new file (the probe overwrites it)",
                    path.display()
                )));
            }
        }
        let mut buf = vec![0xA5u8; size as usize];
        buf[..FSYNC_MARK.len()].copy_from_slice(FSYNC_MARK);
        // The first block now, so that the file is marked as the probe's before any timing.
        file.write_all_at(&buf, 0).map_err(|e| io("cannot write", e))?;
        let info = ProbeInfo::new(
            name,
            "fsync",
            Unit::Nanoseconds,
            format!("a {}-byte write then fsync() to {}", size, path.display()),
        )
        .with("path", path.display().to_string())
        .with("size", size)
        .with("file_size", file_size);
        Ok(FsyncProbe { info, file, path: path.to_path_buf(), buf, slots: file_size / size, next: 0 })
    }
}

impl Probe for FsyncProbe {
    fn info(&self) -> &ProbeInfo {
        &self.info
    }

    fn sample(&mut self, h: &mut Histogram, n: u64) -> Result<u64, ProbeError> {
        for _ in 0..n {
            let offset = self.next * self.buf.len() as u64;
            self.next = (self.next + 1) % self.slots;
            let t0 = monotonic_ns();
            let r = self.file.write_all_at(&self.buf, offset).and_then(|_| self.file.sync_all());
            let t1 = monotonic_ns();
            if let Err(e) = r {
                return Err(ProbeError::Io {
                    probe: self.info.name.clone(),
                    op: format!("write and fsync at offset {offset} of"),
                    path: self.path.clone(),
                    source: e,
                });
            }
            h.record_interval(t0, t1);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_probe_creates_a_file_of_real_data_and_reads_inside_the_region() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut notes = Vec::new();
        let mut p =
            ReadProbe::open("r", &path, Some(1 << 20), Some(64 << 10), 4096, false, &mut |s| notes.push(s.to_string()))
                .unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        let data = std::fs::read(&path).unwrap();
        assert_eq!(data.len(), 1 << 20);
        assert!(data.iter().filter(|&&b| b == 0).count() < data.len() / 100, "not pseudo-random");
        let mut h = Histogram::new();
        assert_eq!(p.sample(&mut h, 100).unwrap(), 100);
        assert_eq!(h.count(), 100);
        assert_eq!(p.blocks, 16);
        assert_eq!(p.info().params["region"], 65536);
        // An existing file is used as it is, and never shrunk.
        let again = ReadProbe::open("r", &path, None, None, 4096, false, &mut |_| panic!("no writing")).unwrap();
        assert_eq!(again.info().params["file_size"], 1 << 20);
        assert!(ReadProbe::open("r", &path, None, Some(100), 4096, false, &mut |_| {}).is_err());
        let e = ReadProbe::open("r", &dir.path().join("missing"), None, None, 4096, false, &mut |_| {}).err().unwrap();
        assert!(e.to_string().contains("file_size"), "{e}");
    }

    #[test]
    fn fsync_probe_never_overwrites_a_file_it_did_not_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w");
        let mut p = FsyncProbe::open("w", &path, 4096, 16384).unwrap();
        let mut h = Histogram::new();
        p.sample(&mut h, 6).unwrap();
        assert_eq!((h.count(), std::fs::metadata(&path).unwrap().len()), (6, 16384));
        FsyncProbe::open("w", &path, 4096, 16384).unwrap();
        let precious = dir.path().join("precious");
        std::fs::write(&precious, b"keep me").unwrap();
        let e = FsyncProbe::open("w", &precious, 4096, 16384).err().unwrap();
        assert!(e.to_string().contains("not written by an fsync probe"), "{e}");
        assert_eq!(std::fs::read(&precious).unwrap(), b"keep me");
    }
}

//! Unwinding user stacks from a copy of their top (`record --call-graph dwarf`), as
//! `perf record --call-graph dwarf` does: the probes send the registers where the stack was
//! taken and the stack's bytes from the stack pointer up; the unwinder follows the binaries'
//! call frame information (`.eh_frame`, `.eh_frame_hdr`, `.debug_frame`), read from the files
//! the process maps, through that copy (framehop). Code without frame pointers (most of a
//! distribution's libraries, interpreters and servers) unwinds this way; a frame without unwind
//! information (JIT code) is walked by its frame pointer.
//!
//! A stack is cut short where the copy ends (a deeper stack needs a larger copy), or where the
//! unwinding finds nothing it can follow; [`Unwound::cut`] says which.

use crate::elf::Load;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder as _};
use object::{Object, ObjectSection};
use std::collections::HashMap;
use std::ops::{Deref, Range};
use std::path::PathBuf;
use std::sync::Arc;

/// Frames unwound at most.
pub const MAX_FRAMES: usize = 128;
/// Files whose unwind information is kept, and their bytes; the cache starts over past either.
const MAX_FILES: usize = 512;
const MAX_FILE_BYTES: usize = 256 << 20;
/// Processes whose modules are kept; the cache starts over past it.
const MAX_PROCS: usize = 4096;
/// Code mappings of a process taken as modules (a process mapping more, a JIT's files, has the
/// rest walked by frame pointers).
const MAX_MODULES: usize = 2048;

/// A file mapping of a process (a line of `/proc/PID/maps` with a file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped {
    /// Its first address.
    pub start: u64,
    /// The address past its last.
    pub end: u64,
    /// The offset in the file of `start`.
    pub off: u64,
    /// The file's device (the kernel's encoding: major << 20 | minor).
    pub dev: u32,
    /// The file's inode.
    pub ino: u64,
    /// Executable (the `x` of its permissions).
    pub exec: bool,
    /// Where to open the file, in order (`/proc/PID/map_files/START-END` opens it whatever its
    /// name or mount namespace, and if it was deleted, while the process lives; then its path):
    /// the first that is the mapped file (its device and inode) is read.
    pub open: Vec<PathBuf>,
}

/// The registers a stack is unwound from, and its copy.
#[derive(Debug, Clone, Copy)]
pub struct StackCopy<'a> {
    /// The instruction pointer.
    pub ip: u64,
    /// The stack pointer.
    pub sp: u64,
    /// The frame pointer.
    pub bp: u64,
    /// The stack's bytes from `sp` up.
    pub stack: &'a [u8],
}

/// A stack unwound: its frames (the instruction pointer, then return addresses) and, when it
/// stopped before the stack's outermost frame, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwound {
    /// Innermost first.
    pub frames: Vec<u64>,
    /// Why the stack was cut short (`None`: it reached its outermost frame).
    pub cut: Option<String>,
}

/// Section bytes shared between the processes that map a file.
#[derive(Clone)]
pub struct Bytes(Arc<[u8]>);

impl Default for Bytes {
    fn default() -> Self {
        Bytes(Arc::from(&[][..]))
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// What unwinding needs of a file: its unwind sections, code and segments.
struct FileData {
    loads: Vec<Load>,
    text: Option<(Range<u64>, Bytes)>,
    eh_frame: Option<(Range<u64>, Bytes)>,
    eh_frame_hdr: Option<(Range<u64>, Bytes)>,
    debug_frame: Option<Bytes>,
    got: Option<Range<u64>>,
    /// The entry point (`e_entry`, linked address): `_start`, a main thread's outermost frame.
    entry: u64,
}

impl FileData {
    fn read(open: &[PathBuf], dev: u32, ino: u64) -> Option<FileData> {
        use std::os::unix::fs::MetadataExt;
        // The file mapped, not another at its name now: a process's map_files entry is the
        // mapping itself (on an overlayfs its inode is the file beneath, where the maps show the
        // overlay's); a path must be the inode the maps show.
        let f = open.iter().find_map(|p| {
            let f = std::fs::File::open(p).ok()?;
            let st = f.metadata().ok()?;
            let mapped = p.starts_with("/proc/") && p.to_string_lossy().contains("/map_files/");
            (mapped || (st.ino() == ino && kdev(st.dev()) == dev)).then_some(f)
        })?;
        // Only the headers and the sections used are read (not the whole file, and no mapping
        // of it that a file truncated meanwhile would turn into a fault).
        let cache = object::read::ReadCache::new(f);
        Self::parse(&cache)
    }

    fn parse<'data, R: object::ReadRef<'data>>(data: R) -> Option<FileData> {
        let f = object::read::elf::ElfFile64::<object::Endianness, R>::parse(data).ok()?;
        let section = |name: &str| {
            let s = f.section_by_name(name)?;
            let bytes = s.uncompressed_data().ok()?;
            Some((s.address()..s.address() + s.size(), Bytes(Arc::from(&*bytes))))
        };
        Some(FileData {
            loads: crate::elf::loads_of(&f),
            text: section(".text"),
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            debug_frame: section(".debug_frame").map(|s| s.1),
            got: f.section_by_name(".got").map(|s| s.address()..s.address() + s.size()),
            entry: f.entry(),
        })
    }

    /// Bytes held.
    fn bytes(&self) -> usize {
        let n = |b: &Option<(Range<u64>, Bytes)>| b.as_ref().map_or(0, |b| b.1.len());
        n(&self.text) + n(&self.eh_frame) + n(&self.eh_frame_hdr) + self.debug_frame.as_ref().map_or(0, |b| b.len())
    }

    /// Where the file's linked address 0 is in the process, mapped as `m`: the mapping's
    /// start less the address its offset is linked at.
    fn base(&self, m: &Mapped) -> Option<u64> {
        m.start.checked_sub(svma_of(&self.loads, m.off, m.exec)?)
    }

    fn module(&self, name: String, m: &Mapped) -> Option<Module<Bytes>> {
        let base = self.base(m)?;
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.as_ref().map(|t| t.0.clone()),
            text: self.text.as_ref().map(|t| t.1.clone()),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|t| t.0.clone()),
            eh_frame: self.eh_frame.as_ref().map(|t| t.1.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|t| t.0.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|t| t.1.clone()),
            debug_frame: self.debug_frame.clone(),
            ..Default::default()
        };
        Some(Module::new(name, m.start..m.end, base, info))
    }
}

/// The linked address of file offset `off` at the start of a mapping: a segment is mapped from
/// the page its offset is in, so the mapping's offset may lie before the segment's own (in the
/// bytes of the segment before it); the segment with the mapping's permission is the one.
fn svma_of(loads: &[Load], off: u64, exec: bool) -> Option<u64> {
    let holds = |l: &&Load| off >= l.offset & !0xfff && off < l.offset + l.filesz.max(1);
    let l = loads.iter().filter(|l| l.exec == exec).find(holds).or_else(|| loads.iter().find(holds))?;
    (off + l.vaddr).checked_sub(l.offset)
}

/// The kernel's encoding of a device number (as the probes report it).
fn kdev(d: u64) -> u32 {
    let (major, minor) = (libc::major(d), libc::minor(d));
    (major << 20) | (minor & 0xfffff)
}

/// Unwinds the user stacks of the processes of a recording, keeping each file's unwind
/// information and each process's modules between stacks.
pub struct UserUnwinder {
    files: HashMap<(u32, u64), Option<Arc<FileData>>>,
    file_bytes: usize,
    /// pid -> (the version of its mappings, its unwinder, its files' entry points as mapped).
    procs: HashMap<u32, (u64, UnwinderX86_64<Bytes>, Vec<u64>)>,
    cache: Box<CacheX86_64>,
    /// Stacks unwound, and of them those cut short.
    pub stats: (u64, u64),
}

impl Default for UserUnwinder {
    fn default() -> Self {
        UserUnwinder {
            files: HashMap::new(),
            file_bytes: 0,
            procs: HashMap::new(),
            cache: Box::new(CacheX86_64::new()),
            stats: (0, 0),
        }
    }
}

impl UserUnwinder {
    /// An unwinder with nothing read yet.
    pub fn new() -> UserUnwinder {
        UserUnwinder::default()
    }

    /// Process `pid` exited or ran another program: its modules are forgotten.
    pub fn forget(&mut self, pid: u32) {
        self.procs.remove(&pid);
    }

    /// Read the unwind information of process `pid`'s binaries now (`maps`, read at
    /// `version`), while it runs: through its `/proc/PID/map_files`, which go with it.
    pub fn preload(&mut self, pid: u32, version: u64, maps: &[Mapped]) {
        if self.procs.get(&pid).is_none_or(|p| p.0 != version) {
            let (u, entries) = self.modules(maps);
            if self.procs.len() >= MAX_PROCS {
                self.procs.clear();
            }
            self.procs.insert(pid, (version, u, entries));
        }
    }

    /// Unwind `copy`, a stack of process `pid` whose file mappings are `maps` (read at
    /// `version`: a new version replaces the modules kept for it).
    pub fn unwind(&mut self, pid: u32, version: u64, maps: &[Mapped], copy: StackCopy<'_>) -> Unwound {
        self.preload(pid, version, maps);
        let (_, unwinder, entries) = &self.procs[&pid];
        let (sp, stack) = (copy.sp, copy.stack);
        let mut read = |addr: u64| -> Result<u64, ()> {
            let o = addr.checked_sub(sp).ok_or(())? as usize;
            let b = stack.get(o..o.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(b.try_into().map_err(|_| ())?))
        };
        let regs = UnwindRegsX86_64::new(copy.ip, copy.sp, copy.bp);
        let mut it = unwinder.iter_frames(copy.ip, regs, &mut self.cache, &mut read);
        let mut frames = Vec::new();
        let cut = loop {
            if frames.len() >= MAX_FRAMES {
                break Some(format!("stopped at {MAX_FRAMES} frames"));
            }
            match it.next() {
                Ok(Some(f)) => frames.push(f.address()),
                Ok(None) => break None,
                Err(framehop::Error::CouldNotReadStack(_)) => {
                    break Some(format!(
                        "the copy of the stack ended ({} bytes from the stack pointer; \
                         --call-graph dwarf,BYTES copies more)",
                        stack.len()
                    ))
                }
                // A main thread's stack ends in its program's (or the dynamic loader's)
                // `_start`, whose caller is no one: no rule leads further, and none should.
                Err(_) if frames.len() > 1 && at_entry(entries, frames[frames.len() - 1]) => break None,
                Err(e) => break Some(format!("unwinding stopped: {e}")),
            }
        };
        self.stats.0 += 1;
        self.stats.1 += u64::from(cut.is_some());
        Unwound { frames, cut }
    }

    /// An unwinder for the executable file mappings `maps`, and their files' entry points
    /// where they are mapped.
    fn modules(&mut self, maps: &[Mapped]) -> (UnwinderX86_64<Bytes>, Vec<u64>) {
        let mut u = UnwinderX86_64::new();
        let mut entries = Vec::new();
        for m in maps.iter().filter(|m| m.exec).take(MAX_MODULES) {
            let data = match self.files.get(&(m.dev, m.ino)) {
                Some(d) => d.clone(),
                None => {
                    let d = FileData::read(&m.open, m.dev, m.ino).map(Arc::new);
                    let n = d.as_ref().map_or(0, |d| d.bytes());
                    // (the processes' modules keep what they use)
                    if self.files.len() >= MAX_FILES || self.file_bytes + n > MAX_FILE_BYTES {
                        self.files.clear();
                        self.file_bytes = 0;
                    }
                    self.file_bytes += n;
                    self.files.insert((m.dev, m.ino), d.clone());
                    d
                }
            };
            let name = m.open.last().map(|p| p.display().to_string()).unwrap_or_default();
            if let Some(d) = data {
                if let Some(entry) = d.base(m).map(|b| b.wrapping_add(d.entry)).filter(|e| (m.start..m.end).contains(e))
                {
                    entries.push(entry);
                }
                if let Some(module) = d.module(name, m) {
                    u.add_module(module);
                }
            }
        }
        (u, entries)
    }
}

/// Whether return address `ra` is in the first bytes of an entry point of `entries`: a call
/// `_start` makes (glibc's, the dynamic loader's) returns within them.
fn at_entry(entries: &[u64], ra: u64) -> bool {
    entries.iter().any(|&e| ra > e && ra - e <= 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_unwinds_through_its_own_frames() {
        // The test's own stack, copied as the probes would copy another thread's.
        #[inline(never)]
        fn inner() -> Unwound {
            let (ip, sp, bp): (u64, u64, u64);
            // SAFETY: reads three registers.
            unsafe {
                std::arch::asm!("lea {ip}, [rip]", "mov {sp}, rsp", "mov {bp}, rbp", ip = out(reg) ip, sp = out(reg) sp, bp = out(reg) bp);
            }
            // Up to 16 KiB, within the mapping that holds the stack (a test thread's frames
            // may be fewer: what lies above its mapping may be unmapped, or a guard page).
            let end = std::fs::read_to_string("/proc/self/maps")
                .unwrap()
                .lines()
                .filter_map(|l| l.split_whitespace().next()?.split_once('-'))
                .filter_map(|(s, e)| Some((u64::from_str_radix(s, 16).ok()?, u64::from_str_radix(e, 16).ok()?)))
                .find(|&(s, e)| (s..e).contains(&sp))
                .expect("the stack's mapping")
                .1;
            let len = (end - sp).min(16384) as usize;
            // SAFETY: the stack from sp up to `len` is this thread's own mapping, live.
            let stack = unsafe { std::slice::from_raw_parts(sp as *const u8, len) }.to_vec();
            let maps = own_maps();
            let mut u = UserUnwinder::new();
            u.unwind(std::process::id(), 1, &maps, StackCopy { ip, sp, bp, stack: &stack })
        }
        let w = inner();
        assert!(w.frames.len() >= 3, "{w:?}");
        // Every frame is in this test binary or a library it maps.
        let maps = own_maps();
        for f in &w.frames {
            assert!(maps.iter().any(|m| m.exec && (m.start..m.end).contains(f)), "{f:#x} in no code mapping: {w:?}");
        }
    }

    /// The entry points kept are where the kernel says the program starts (`AT_ENTRY`), and a
    /// return address just past a call there is a stack's end.
    #[test]
    fn the_program_s_entry_point_is_found_where_it_is_mapped() {
        // SAFETY: reads the auxiliary vector.
        let entry = unsafe { libc::getauxval(libc::AT_ENTRY) };
        let (_, entries) = UserUnwinder::new().modules(&own_maps());
        assert!(entries.contains(&entry), "{entry:#x} not in {entries:x?}");
        assert!(at_entry(&entries, entry + 8) && !at_entry(&entries, entry) && !at_entry(&entries, entry + 65));
    }

    fn own_maps() -> Vec<Mapped> {
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        text.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let path = f.get(5)?;
                if !path.starts_with('/') {
                    return None;
                }
                let (s, e) = f[0].split_once('-')?;
                let (maj, min) = f[3].split_once(':')?;
                let dev = (u32::from_str_radix(maj, 16).ok()? << 20) | u32::from_str_radix(min, 16).ok()?;
                Some(Mapped {
                    start: u64::from_str_radix(s, 16).ok()?,
                    end: u64::from_str_radix(e, 16).ok()?,
                    off: u64::from_str_radix(f[2], 16).ok()?,
                    dev,
                    ino: f[4].parse().ok()?,
                    exec: f[1].contains('x'),
                    open: vec![PathBuf::from(path)],
                })
            })
            .collect()
    }
}

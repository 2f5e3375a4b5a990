//! What processes map, for the recorder: the file, offset and build id behind a user stack's
//! return addresses, and the file behind a page fault. Read from `/proc/PID/maps` while the
//! process runs, and bounded so that no process can make the recorder spend its time here:
//!
//! * each process's mappings are read once and kept (parsed, sorted by address): an address
//!   they cover costs a binary search, however many new addresses a process calls from;
//! * they are read again only for an address they do not cover, for a stack taken after they
//!   were read (a library loaded since), and per process at most at [`MapsLimits::proc_bytes_per_sec`]
//!   (a process with a few KiB of mappings is read again within milliseconds, one with
//!   megabytes about once a second, and never more often than [`MapsLimits::refresh_every`]):
//!   an address that mappings read after its stack was taken do not cover is no return address
//!   ([`UserAddr::Unmapped`]); where they could not be read again, the answer says it is not
//!   verified ([`Normalized::verified`]) and a caller does not keep it;
//! * a process that execs gets a new generation ([`MapsCache::exec`], from the decoder's exec
//!   events): a stack of an image that is gone is not named from its successor's mappings;
//! * every read takes at most [`MapsLimits::read_max`] bytes (a process may have 65,530
//!   mappings: about 6 MB), and all reads together at most [`MapsLimits::bytes_per_sec`] on
//!   average (a token bucket): past it, an address no kept mapping covers is left unnamed
//!   rather than read for;
//! * build ids are read once per file (device, inode), through `/proc/PID/map_files` (the file
//!   mapped, not whatever now has its name), as regular files only, a few KiB each
//!   ([`latscope_trace::safe_read`]), never mapped into memory (a file truncated meanwhile
//!   cannot fault the recorder);
//! * what is kept is bounded ([`MapsLimits::max_mappings`] in all, processes dropped whole).
//!
//! [`MapsStats`] counts the reads and what the limits refused.

use latscope_trace::safe_read;
use rustc_hash::FxHashMap;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The bounds of a [`MapsCache`].
#[derive(Debug, Clone, Copy)]
pub struct MapsLimits {
    /// Bytes read of one `/proc/PID/maps` at most; mappings past it are not known.
    pub read_max: usize,
    /// A process's mappings are read again at most this often (for an address not covered).
    pub refresh_every: Duration,
    /// And at most this many bytes of one process's mappings per second (on average).
    pub proc_bytes_per_sec: u64,
    /// Bytes of `/proc/PID/maps` read per second, on average over all processes.
    pub bytes_per_sec: u64,
    /// Bytes that may be read at once after a quiet time (the bucket's size).
    pub burst_bytes: u64,
    /// Mappings kept, all processes together.
    pub max_mappings: usize,
    /// Build ids read per second (new files), on average.
    pub build_ids_per_sec: u64,
}

impl Default for MapsLimits {
    fn default() -> Self {
        MapsLimits {
            read_max: 8 << 20,
            refresh_every: Duration::from_millis(10),
            proc_bytes_per_sec: 4 << 20,
            bytes_per_sec: 16 << 20,
            burst_bytes: 32 << 20,
            max_mappings: 1 << 20,
            build_ids_per_sec: 1024,
        }
    }
}

/// What a [`MapsCache`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapsStats {
    /// Reads of a `/proc/PID/maps`.
    pub reads: u64,
    /// Bytes read of them.
    pub bytes: u64,
    /// Reads cut at [`MapsLimits::read_max`].
    pub truncated: u64,
    /// Reads not done: the process's last read was too recent, or the byte budget was spent.
    pub refused: u64,
    /// Build ids read (files opened).
    pub build_ids: u64,
}

/// What [`MapsCache::normalize`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// What each address is.
    pub addrs: Vec<UserAddr>,
    /// Every [`UserAddr::Unmapped`] was checked against mappings read after the stack was
    /// taken; `false` when they could not be read again (the limits): a library loaded since
    /// may hold such an address, so the answer is not to be kept.
    pub verified: bool,
}

/// Why a process's addresses cannot be named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// The process exited.
    Exited,
    /// The process exec'd since the stack was taken: its image then is gone.
    Execd,
}

/// What an address of a process is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserAddr {
    /// In a mapping of `path`, at byte `off` of the file, whose GNU build id is `build_id` (hex)
    /// when it has one.
    File {
        /// The file's path, as the kernel names it, without the ` (deleted)` it adds to a file
        /// deleted (removed, or replaced at its path) while mapped.
        path: Arc<str>,
        /// The offset in the file.
        off: u64,
        /// The GNU build id, lowercase hex.
        build_id: Option<Arc<str>>,
        /// The file had been deleted while mapped (`/proc/PID/maps` shows `PATH (deleted)`; a
        /// file whose name itself ends so, still at its path, is not).
        deleted: bool,
    },
    /// In a mapping with no file (anonymous memory, JIT code, `[vdso]`, the stack).
    Anonymous,
    /// In no readable or executable mapping: not a return address (a frame-pointer walk that
    /// followed data).
    Unmapped,
    /// Not known: past what was read of a process's mappings, or not read for (the limits).
    Unknown,
}

#[derive(Debug, Clone)]
struct Mapping {
    start: u64,
    end: u64,
    off: u64,
    dev: u32,
    ino: u64,
    exec: bool,
    /// `None`: no file (anonymous, `[vdso]`, ...).
    path: Option<Arc<str>>,
}

/// A file mapping of a process, for unwinding its stacks (see [`MapsCache::file_mappings`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMapping {
    /// Its first address, and the one past its last.
    pub start: u64,
    /// The address past its last.
    pub end: u64,
    /// The offset in the file of `start`.
    pub off: u64,
    /// The file's device (major << 20 | minor) and inode.
    pub dev: u32,
    /// The file's inode.
    pub ino: u64,
    /// Executable.
    pub exec: bool,
    /// The file's path as the process maps it (`None`: no path).
    pub path: Option<Arc<str>>,
}

#[derive(Debug)]
struct Proc {
    maps: Vec<Mapping>,
    read_at: Instant,
    /// Bytes of the last read.
    bytes: usize,
    /// When it was read, CLOCK_MONOTONIC ns (the probes' clock).
    read_ns: u64,
    /// The read was cut: addresses past the last mapping are unknown, not unmapped.
    truncated: bool,
}

/// Bytes allowed now, refilled with time.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    rate: f64,
    cap: f64,
    at: Instant,
}

impl Bucket {
    fn new(rate: u64, cap: u64) -> Bucket {
        Bucket { tokens: cap as f64, rate: rate as f64, cap: cap as f64, at: Instant::now() }
    }
    fn refill(&mut self) {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * self.rate).min(self.cap);
        self.at = now;
    }
    /// Room for something: any positive balance (the cost is paid after, as it is known).
    fn allows(&mut self) -> bool {
        self.refill();
        self.tokens > 0.0
    }
    fn pay(&mut self, n: u64) {
        self.tokens -= n as f64;
    }
}

/// The mappings of the processes met, bounded (see the module documentation).
#[derive(Debug)]
pub struct MapsCache {
    limits: MapsLimits,
    procs: FxHashMap<u32, Proc>,
    /// Execs seen per process (its generation); processes that never exec'd are at 0.
    /// Per process: the execs seen of it, and when the last one ended (CLOCK_MONOTONIC ns).
    gens: FxHashMap<u32, (u32, u64)>,
    mappings: usize,
    bytes: Bucket,
    ids: Bucket,
    build_ids: FxHashMap<(u32, u64), Option<Arc<str>>>,
    paths: FxHashMap<Arc<str>, ()>,
    stats: MapsStats,
    /// The last process whose maps read empty (its memory gone: it is exiting).
    emptied: Option<u32>,
    /// Processes found gone, and when (CLOCK_MONOTONIC ns): a stack taken before that is of
    /// the gone process, without asking /proc again for each of its events.
    gone: FxHashMap<u32, u64>,
}

/// Gone processes remembered; the table starts over past it.
const MAX_GONE: usize = 4096;

impl Default for MapsCache {
    fn default() -> Self {
        MapsCache::new(MapsLimits::default())
    }
}

/// Build ids kept (files); the table starts over past it.
const MAX_BUILD_IDS: usize = 1 << 16;
/// Paths interned; the table starts over past it.
const MAX_PATHS: usize = 1 << 16;

impl MapsCache {
    /// An empty cache with these limits.
    pub fn new(limits: MapsLimits) -> MapsCache {
        MapsCache {
            limits,
            procs: FxHashMap::default(),
            gens: FxHashMap::default(),
            mappings: 0,
            bytes: Bucket::new(limits.bytes_per_sec, limits.burst_bytes.max(limits.read_max as u64)),
            ids: Bucket::new(limits.build_ids_per_sec, limits.build_ids_per_sec * 4),
            build_ids: FxHashMap::default(),
            paths: FxHashMap::default(),
            stats: MapsStats::default(),
            emptied: None,
            gone: FxHashMap::default(),
        }
    }

    /// What the cache did so far.
    pub fn stats(&self) -> MapsStats {
        self.stats
    }

    fn forget(&mut self, pid: u32) {
        if let Some(p) = self.procs.remove(&pid) {
            self.mappings -= p.maps.len();
        }
    }

    /// Process `pid` exec'd, the new image running from `at_ns` (CLOCK_MONOTONIC) on: its
    /// mappings are forgotten and its generation moves on.
    pub fn exec(&mut self, pid: u32, at_ns: u64) {
        self.forget(pid);
        if self.gens.len() >= self.limits.max_mappings {
            self.gens.clear();
        }
        let g = self.gens.entry(pid).or_default();
        *g = (g.0 + 1, at_ns);
    }

    /// Process `pid` exited: its mappings and generation are forgotten.
    pub fn exit(&mut self, pid: u32) {
        self.forget(pid);
        self.gens.remove(&pid);
    }

    /// Process `pid`'s generation: the execs seen of it (see [`MapsCache::normalize`]).
    pub fn generation(&self, pid: u32) -> u32 {
        self.gens.get(&pid).map_or(0, |g| g.0)
    }

    /// Read process `pid`'s mappings now if they are not kept (within the limits): at the start
    /// of a recording, for the processes already running. `false`: not read (gone, or limits).
    pub fn prime(&mut self, pid: u32) -> bool {
        self.procs.contains_key(&pid) || self.read(pid)
    }

    /// Read process `pid`'s mappings again now (it mapped a file, or exec'd), within the
    /// limits. `false`: not read (gone, or limits).
    pub fn reread(&mut self, pid: u32) -> bool {
        self.read(pid)
    }

    /// What each of `addrs` is in process `pid`, for a stack taken at `at_ns` (CLOCK_MONOTONIC)
    /// in generation `gen` of the process ([`MapsCache::generation`] when its event was
    /// decoded); [`Gone`] when the process exited or exec'd since.
    pub fn normalize(&mut self, pid: u32, gen: u32, at_ns: u64, addrs: &[u64]) -> Result<Normalized, Gone> {
        // An event decoded before its process's exec event (the two may be read in either
        // order) has the old generation; its stack, taken after the exec, is of the new image.
        let after_exec = self.gens.get(&pid).is_some_and(|g| g.1 <= at_ns);
        if gen != self.generation(pid) && !after_exec {
            return Err(Gone::Execd);
        }
        // (pid 0 is no process: its "stack" is none to read)
        if pid == 0 || self.gone.get(&pid).is_some_and(|&t| at_ns <= t) {
            return Err(Gone::Exited);
        }
        if !self.procs.contains_key(&pid) && !self.read(pid) {
            // Gone (exited, or exited and not yet reaped: no memory to map), or not read for
            // (the limits): say which.
            let exiting = self.emptied == Some(pid) || memory_gone(pid);
            return if std::path::Path::new(&format!("/proc/{pid}")).exists() && !exiting {
                Ok(Normalized { addrs: vec![UserAddr::Unknown; addrs.len()], verified: false })
            } else {
                if self.gone.len() >= MAX_GONE {
                    self.gone.clear();
                }
                self.gone.insert(pid, crate::snapshot::monotonic_ns());
                Err(Gone::Exited)
            };
        }
        let mut found: Vec<Option<usize>> = addrs.iter().map(|&a| self.find(pid, a)).collect();
        // A miss may be a mapping made after the read: read again (within the limits).
        let stale = |c: &MapsCache| c.procs.get(&pid).is_none_or(|p| p.read_ns < at_ns);
        if found.iter().any(Option::is_none) && stale(self) && self.refresh(pid) {
            found = addrs.iter().map(|&a| self.find(pid, a)).collect();
        }
        let verified = !stale(self) || found.iter().all(Option::is_some);
        let Some(p) = self.procs.get(&pid) else { return Err(Gone::Exited) };
        let last_end = p.maps.last().map_or(0, |m| m.end);
        let read_ns = p.read_ns;
        let p_read_before = |at: u64| read_ns < at;
        let truncated = p.truncated;
        let hits: Vec<Option<Mapping>> = found.iter().map(|i| i.map(|i| p.maps[i].clone())).collect();
        // One look at /proc per mapping, not per frame (a stack's frames share few mappings).
        let mut unlinked_at: Vec<(u64, bool)> = Vec::new();
        let addrs = addrs
            .iter()
            .zip(hits)
            .map(|(&a, m)| match m {
                Some(m) => match &m.path {
                    Some(path) => {
                        let path = self.unescaped(path, &m);
                        let (path, mut deleted) = self.deleted(&path, &m);
                        // Deleted since the maps were read (they are read as a process maps a
                        // file, before it may unlink it): its mapping's file has no link left.
                        if !deleted && p_read_before(at_ns) {
                            deleted = match unlinked_at.iter().find(|&&(s, _)| s == m.start) {
                                Some(&(_, d)) => d,
                                None => {
                                    let d = unlinked(pid, &m);
                                    unlinked_at.push((m.start, d));
                                    d
                                }
                            };
                        }
                        UserAddr::File { path, off: a - m.start + m.off, build_id: self.build_id(pid, &m), deleted }
                    }
                    None => UserAddr::Anonymous,
                },
                None if truncated && a >= last_end => UserAddr::Unknown,
                None => UserAddr::Unmapped,
            })
            .collect();
        Ok(Normalized { addrs, verified })
    }

    /// Process `pid`'s file mappings as last read, and when they were read (CLOCK_MONOTONIC ns:
    /// another read, another value), read again first if `addr` (a stack's instruction pointer)
    /// is in none of them and the read is older than `at_ns` (a library loaded since).
    pub fn file_mappings(&mut self, pid: u32, addr: u64, at_ns: u64) -> Option<(u64, Vec<FileMapping>)> {
        if !self.procs.contains_key(&pid) && !self.read(pid) {
            return None;
        }
        if self.find(pid, addr).is_none() && self.procs.get(&pid).is_some_and(|p| p.read_ns < at_ns) {
            self.refresh(pid);
        }
        let p = self.procs.get(&pid)?;
        let maps = p
            .maps
            .iter()
            .filter(|m| m.path.is_some())
            .map(|m| FileMapping {
                start: m.start,
                end: m.end,
                off: m.off,
                dev: m.dev,
                ino: m.ino,
                exec: m.exec,
                path: m.path.clone(),
            })
            .collect();
        Some((p.read_ns, maps))
    }

    /// The file process `pid` maps at `addr`, if it is file `(dev, ino)` (the one the kernel
    /// found there), and the offset in it: the page fault's file.
    pub fn file_at(&mut self, pid: u32, addr: u64, dev: u32, ino: u64) -> Option<(Arc<str>, u64)> {
        if !self.procs.contains_key(&pid) && !self.read(pid) {
            return None;
        }
        let hit = |c: &MapsCache| {
            c.find(pid, addr).and_then(|i| {
                let m = &c.procs[&pid].maps[i];
                let same = ino == 0 || (m.dev, m.ino) == (dev, ino);
                m.path.clone().filter(|_| same).map(|p| (p, addr - m.start + m.off, m.clone()))
            })
        };
        let (path, off, m) = match hit(self) {
            Some(r) => r,
            None if self.refresh(pid) => hit(self)?,
            None => return None,
        };
        Some((self.unescaped(&path, &m), off))
    }

    fn find(&self, pid: u32, addr: u64) -> Option<usize> {
        let maps = &self.procs.get(&pid)?.maps;
        let i = maps.partition_point(|m| m.start <= addr);
        (i > 0 && addr < maps[i - 1].end).then(|| i - 1)
    }

    /// Read `pid`'s mappings again, if its last read is old enough and the budget allows.
    fn refresh(&mut self, pid: u32) -> bool {
        let l = self.limits;
        let recent = self.procs.get(&pid).is_some_and(|p| {
            let paced = Duration::from_secs_f64(p.bytes as f64 / l.proc_bytes_per_sec.max(1) as f64);
            p.read_at.elapsed() < l.refresh_every.max(paced)
        });
        if recent {
            self.stats.refused += 1;
            return false;
        }
        self.read(pid)
    }

    fn read(&mut self, pid: u32) -> bool {
        self.emptied = None;
        if !self.bytes.allows() {
            self.stats.refused += 1;
            return false;
        }
        // Mappings read from here on cover what the process maps at the time of the read.
        let Ok(b) = safe_read::read_file(format!("/proc/{pid}/maps"), self.limits.read_max) else {
            self.forget(pid);
            return false;
        };
        // No mappings at all: the process has exited and is not yet reaped (a zombie's memory
        // is gone; its /proc entry stays), not a process whose every address is unmapped. What
        // was read of it before stays.
        if b.data.is_empty() {
            self.stats.reads += 1;
            self.emptied = Some(pid);
            return false;
        }
        self.bytes.pay(b.data.len() as u64);
        self.stats.reads += 1;
        self.stats.bytes += b.data.len() as u64;
        self.stats.truncated += u64::from(b.truncated);
        // A cut read ends in a partial line: left out.
        let text = match (b.truncated, b.data.iter().rposition(|&c| c == b'\n')) {
            (true, Some(nl)) => &b.data[..nl],
            _ => &b.data[..],
        };
        let mut maps: Vec<Mapping> =
            text.split(|&c| c == b'\n').filter_map(|l| self.parse_line(&String::from_utf8_lossy(l))).collect();
        maps.sort_by_key(|m| m.start);
        self.forget(pid);
        self.mappings += maps.len();
        let read_ns = crate::snapshot::monotonic_ns();
        let bytes = b.data.len();
        self.procs.insert(pid, Proc { maps, read_at: Instant::now(), bytes, read_ns, truncated: b.truncated });
        self.evict(pid);
        true
    }

    /// Drop other processes until the mappings kept are within bounds.
    fn evict(&mut self, keep: u32) {
        if self.mappings <= self.limits.max_mappings {
            return;
        }
        let victims: Vec<u32> = self.procs.keys().copied().filter(|&p| p != keep).collect();
        for p in victims {
            self.forget(p);
            if self.mappings <= self.limits.max_mappings / 2 {
                break;
            }
        }
    }

    /// One line of /proc/PID/maps: `start-end perms offset major:minor inode   path` (numbers in
    /// hex but the inode); only readable or executable mappings (others hold no code).
    fn parse_line(&mut self, l: &str) -> Option<Mapping> {
        let mut f = l.splitn(6, ' ');
        let (range, perms, off, dev, ino) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
        let path = f.next().unwrap_or("").trim_start();
        let p = perms.as_bytes();
        if p.len() < 3 || (p[0] != b'r' && p[2] != b'x') {
            return None;
        }
        let (s, e) = range.split_once('-')?;
        let (major, minor) = dev.split_once(':')?;
        let dev = crate::snapshot::kdev(libc::makedev(
            u32::from_str_radix(major, 16).ok()?,
            u32::from_str_radix(minor, 16).ok()?,
        ));
        let ino: u64 = ino.parse().ok()?;
        let path = (ino != 0 && path.starts_with('/')).then(|| self.intern(path));
        Some(Mapping {
            start: u64::from_str_radix(s, 16).ok()?,
            end: u64::from_str_radix(e, 16).ok()?,
            off: u64::from_str_radix(off, 16).ok()?,
            dev,
            ino,
            exec: p[2] == b'x',
            path,
        })
    }

    fn intern(&mut self, p: &str) -> Arc<str> {
        if let Some((k, _)) = self.paths.get_key_value(p) {
            return k.clone();
        }
        if self.paths.len() >= MAX_PATHS {
            self.paths.clear();
        }
        let k: Arc<str> = Arc::from(p);
        self.paths.insert(k.clone(), ());
        k
    }

    /// `path` of mapping `m` with the kernel's `\012` read back as the newline it stands for:
    /// /proc/PID/maps writes a newline in a path so and escapes nothing else, so a name may also
    /// hold `\012` itself. The name as written is kept when it is the mapped file (its device
    /// and inode, by `stat`, which opens nothing); otherwise the newline, the kernel's escape
    /// (the file may be gone). A name holding both reads as all newlines. Looked at only for the
    /// addresses of a stack or a fault, as [`MapsCache::deleted`].
    fn unescaped(&mut self, path: &Arc<str>, m: &Mapping) -> Arc<str> {
        use std::os::unix::fs::MetadataExt;
        if !path.contains("\\012") {
            return path.clone();
        }
        let literal =
            std::fs::metadata(&**path).is_ok_and(|st| (crate::snapshot::kdev(st.dev()), st.ino()) == (m.dev, m.ino));
        if literal {
            path.clone()
        } else {
            self.intern(&path.replace("\\012", "\n"))
        }
    }

    /// `path` of mapping `m` without the kernel's ` (deleted)`, and whether it was deleted: the
    /// kernel adds it to the name of a file unlinked while mapped, and a file may be named so
    /// too (then it is at that path, with the mapping's inode). Looked at only for the
    /// addresses of a stack, with `stat`, which opens nothing.
    fn deleted(&mut self, path: &Arc<str>, m: &Mapping) -> (Arc<str>, bool) {
        use std::os::unix::fs::MetadataExt;
        let Some(base) = path.strip_suffix(" (deleted)") else { return (path.clone(), false) };
        let same =
            std::fs::metadata(&**path).is_ok_and(|st| (crate::snapshot::kdev(st.dev()), st.ino()) == (m.dev, m.ino));
        if same {
            (path.clone(), false)
        } else {
            (self.intern(base), true)
        }
    }

    /// What a user address was, given as the file mapped there (device, inode, byte offset:
    /// what the kernel found when its process exited or exec'd before its maps were read): the
    /// file named as a process read maps it, else `known` (the recording's own name for the
    /// inode), with its build id when the file at that path is still that inode.
    pub fn file_addr(&mut self, dev: u32, ino: u64, off: u64, known: Option<Arc<str>>) -> UserAddr {
        if ino == 0 {
            // No file there: a frame-pointer walk that followed data (or anonymous code).
            return UserAddr::Unmapped;
        }
        let find = |c: &MapsCache| {
            c.procs
                .values()
                .flat_map(|p| p.maps.iter())
                .find(|m| m.dev == dev && m.ino == ino)
                .and_then(|m| m.path.clone())
        };
        let mut path = find(self).or(known);
        if path.is_none() && self.prime(std::process::id()) {
            // The recorder's own mappings: the C library and the dynamic loader, which nearly
            // every frame of a program goes through, as the kernel names their files.
            path = find(self);
        }
        let Some(path) = path else { return UserAddr::Unknown };
        let build_id = self.build_id_at(dev, ino, &path);
        UserAddr::File { path, off, build_id, deleted: false }
    }

    /// The build id of the file at `path` if it is inode `ino` of device `dev` (read once per file).
    fn build_id_at(&mut self, dev: u32, ino: u64, path: &str) -> Option<Arc<str>> {
        use std::os::unix::fs::MetadataExt;
        if let Some(b) = self.build_ids.get(&(dev, ino)) {
            return b.clone();
        }
        if !self.ids.allows() {
            return None;
        }
        self.ids.pay(1);
        self.stats.build_ids += 1;
        let f = safe_read::open_file_following(path).ok()?;
        let m = f.metadata().ok()?;
        if m.ino() != ino || crate::snapshot::kdev(m.dev()) != dev {
            return None;
        }
        let id = elf_build_id(&f).map(|b| Arc::from(b.iter().map(|x| format!("{x:02x}")).collect::<String>()));
        if self.build_ids.len() >= MAX_BUILD_IDS {
            self.build_ids.clear();
        }
        self.build_ids.insert((dev, ino), id.clone());
        id
    }

    /// The build id of mapping `m`'s file, read once per file, within the budget.
    fn build_id(&mut self, pid: u32, m: &Mapping) -> Option<Arc<str>> {
        if let Some(b) = self.build_ids.get(&(m.dev, m.ino)) {
            return b.clone();
        }
        if !self.ids.allows() {
            return None; // not kept: tried again for a later stack
        }
        self.ids.pay(1);
        self.stats.build_ids += 1;
        let link = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
        let id = safe_read::open_file_following(link)
            .ok()
            .and_then(|f| elf_build_id(&f))
            .map(|b| Arc::from(b.iter().map(|x| format!("{x:02x}")).collect::<String>()));
        if self.build_ids.len() >= MAX_BUILD_IDS {
            self.build_ids.clear();
        }
        self.build_ids.insert((m.dev, m.ino), id.clone());
        id
    }
}

/// Whether the file of process `pid`'s mapping `m` has no link left (unlinked while mapped): its
/// `/proc/PID/map_files` entry is the file itself, whatever its name became.
fn unlinked(pid: u32, m: &Mapping) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end)).is_ok_and(|st| st.nlink() == 0)
}

/// The GNU build id of an ELF file (its `NT_GNU_BUILD_ID` note), read with a few bounded
/// `pread`s: the ELF header, the program headers, the note segments.
pub fn elf_build_id(f: &std::fs::File) -> Option<Vec<u8>> {
    let mut h = [0u8; 64];
    f.read_exact_at(&mut h[..52], 0).ok()?;
    let _ = f.read_exact_at(&mut h[52..], 52);
    if &h[..4] != b"\x7fELF" {
        return None;
    }
    let (wide, le) = (h[4] == 2, h[5] == 1);
    let u16_at = |b: &[u8], i: usize| {
        let v = [b[i], b[i + 1]];
        if le {
            u16::from_le_bytes(v)
        } else {
            u16::from_be_bytes(v)
        }
    };
    let u32_at = |b: &[u8], i: usize| {
        let v = [b[i], b[i + 1], b[i + 2], b[i + 3]];
        if le {
            u32::from_le_bytes(v)
        } else {
            u32::from_be_bytes(v)
        }
    };
    let u64_at = |b: &[u8], i: usize| {
        let v: [u8; 8] = b[i..i + 8].try_into().expect("8 bytes");
        if le {
            u64::from_le_bytes(v)
        } else {
            u64::from_be_bytes(v)
        }
    };
    let (phoff, phentsize, phnum) = if wide {
        (u64_at(&h, 32), u16_at(&h, 54) as usize, u16_at(&h, 56) as usize)
    } else {
        (u32_at(&h, 28) as u64, u16_at(&h, 42) as usize, u16_at(&h, 44) as usize)
    };
    let min_ent = if wide { 56 } else { 32 };
    if phentsize < min_ent || phnum == 0 || phnum > 512 {
        return None;
    }
    let mut ph = vec![0u8; phentsize * phnum];
    f.read_exact_at(&mut ph, phoff).ok()?;
    for e in ph.chunks_exact(phentsize) {
        if u32_at(e, 0) != 4 {
            continue; // not PT_NOTE
        }
        let (off, size, align) = if wide {
            (u64_at(e, 8), u64_at(e, 32), u64_at(e, 48))
        } else {
            (u32_at(e, 4) as u64, u32_at(e, 16) as u64, u32_at(e, 28) as u64)
        };
        if size == 0 || size > 64 << 10 {
            continue;
        }
        let mut n = vec![0u8; size as usize];
        if f.read_exact_at(&mut n, off).is_err() {
            continue;
        }
        let pad = if align == 8 { 8 } else { 4 };
        let up = |x: usize| x.div_ceil(pad) * pad;
        let mut i = 0;
        while i + 12 <= n.len() {
            let (namesz, descsz, kind) = (u32_at(&n, i) as usize, u32_at(&n, i + 4) as usize, u32_at(&n, i + 8));
            let name_at = i + 12;
            let desc_at = name_at.checked_add(up(namesz))?;
            let next = desc_at.checked_add(up(descsz))?;
            if desc_at + descsz > n.len() {
                break;
            }
            if kind == 3 && namesz == 4 && &n[name_at..name_at + 4] == b"GNU\0" && (1..=64).contains(&descsz) {
                return Some(n[desc_at..desc_at + descsz].to_vec());
            }
            i = next;
        }
    }
    None
}

/// Whether process `pid` has no memory left: it exited and is not yet reaped (a zombie, `Z` or
/// `X` in `/proc/PID/stat`), so its mappings can no longer be read.
fn memory_gone(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return true };
    // `pid (comm) S ...`: the state follows the last `)` (a command name may hold one).
    let state = stat.rfind(')').and_then(|i| stat[i + 1..].trim_start().chars().next());
    matches!(state, Some('Z' | 'X'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test binary's own code is named by its file and build id (the one `file` reads),
    /// a stack address is anonymous, address 16 is unmapped; one read of /proc/self/maps serves
    /// every later address it covers.
    #[test]
    fn addresses_are_named_from_one_read_of_the_maps() {
        let me = std::process::id();
        let code = addresses_are_named_from_one_read_of_the_maps as *const () as usize as u64;
        let local = 0u64;
        let stack = &local as *const u64 as u64;
        let mut c = MapsCache::default();
        let got = c.normalize(me, 0, 0, &[code, stack, 16]).unwrap().addrs;
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        match &got[0] {
            UserAddr::File { path, build_id, .. } => {
                assert_eq!(&**path, exe.to_str().unwrap());
                let want = elf_build_id(&std::fs::File::open(&exe).unwrap());
                let want = want.map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>());
                assert_eq!(build_id.as_deref(), want.as_deref());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(got[1], UserAddr::Anonymous);
        assert_eq!(got[2], UserAddr::Unmapped);
        for k in 0..1000 {
            c.normalize(me, 0, 0, &[code + k]).unwrap();
        }
        assert_eq!(c.stats().reads, 1, "{:?}", c.stats());
        // After an exec, the old image's stacks are not named from the new one.
        c.exec(me, u64::MAX);
        assert_eq!(c.normalize(me, 0, 0, &[code]), Err(Gone::Execd));
        assert!(c.normalize(me, 1, 0, &[code]).is_ok());
        // An event decoded before its exec event has the old generation: its stack, taken after
        // the exec, is of the new image; one taken before is not.
        c.exec(me, 100);
        assert!(c.normalize(me, 1, 200, &[code]).is_ok());
        assert_eq!(c.normalize(me, 1, 50, &[code]), Err(Gone::Execd));
    }

    /// An address no mapping covers: unmapped for a stack taken before the maps were read;
    /// for one taken after, read again, at most once per interval, else not verified (a
    /// library loaded since may hold it).
    #[test]
    fn a_miss_reads_again_at_most_once_per_interval() {
        let mut c = MapsCache::new(MapsLimits { refresh_every: Duration::from_secs(3600), ..Default::default() });
        let me = std::process::id();
        let unmapped = |verified| Normalized { addrs: vec![UserAddr::Unmapped], verified };
        assert_eq!(c.normalize(me, 0, 0, &[16]).unwrap(), unmapped(true));
        let later = crate::snapshot::monotonic_ns() + 1_000_000_000;
        for a in 0..100 {
            assert_eq!(c.normalize(me, 0, 0, &[32 + a]).unwrap(), unmapped(true));
            assert_eq!(c.normalize(me, 0, later, &[32 + a]).unwrap(), unmapped(false));
        }
        assert_eq!(c.stats().reads, 1);
        assert_eq!(c.stats().refused, 100);
        // A gone process has no mappings; its later stacks of before that are said gone without
        // asking /proc again; pid 0 is none.
        assert_eq!(c.normalize(u32::MAX - 1, 0, 0, &[16]), Err(Gone::Exited));
        let found = *c.gone.get(&(u32::MAX - 1)).expect("remembered gone");
        assert_eq!(c.normalize(u32::MAX - 1, 0, found, &[16]), Err(Gone::Exited));
        // (a stack of after that may be another process's under the pid: /proc is asked)
        assert_eq!(c.normalize(u32::MAX - 1, 0, found + 1, &[16]), Err(Gone::Exited));
        assert!(c.gone[&(u32::MAX - 1)] > found);
        assert_eq!(c.normalize(0, 0, 5, &[16]), Err(Gone::Exited));
        assert!(!c.gone.contains_key(&0));
    }

    /// A process that exited and is not yet reaped still has its /proc entry, and empty maps:
    /// its addresses are gone with it, not unmapped (which cut its stacks at their first frame).
    #[test]
    fn a_zombie_has_exited() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while !memory_gone(pid) && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists(), "not reaped yet");
        let mut c = MapsCache::default();
        assert_eq!(c.normalize(pid, 0, 0, &[0x1000]), Err(Gone::Exited));
        child.wait().unwrap();
        assert!(!memory_gone(std::process::id()));
    }

    /// A library removed while mapped was recorded under its path as if it were still there:
    /// it is named without the kernel's ` (deleted)` and said to be deleted; a file whose name
    /// itself ends in ` (deleted)` keeps its name and is not taken for deleted.
    #[test]
    fn a_file_deleted_while_mapped_is_named_as_deleted() {
        use std::os::fd::AsRawFd;
        let map = |path: &std::path::Path| {
            let f = std::fs::File::open(path).unwrap();
            // SAFETY: a private read-only mapping of a file we opened, never unmapped (the test
            // ends); the page is only looked up, never read.
            let p =
                unsafe { libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_PRIVATE, f.as_raw_fd(), 0) };
            assert_ne!(p, libc::MAP_FAILED);
            p as u64
        };
        let t = tempfile::tempdir().unwrap();
        let gone = t.path().join("x.so");
        std::fs::write(&gone, vec![1u8; 4096]).unwrap();
        let a1 = map(&gone);
        std::fs::remove_file(&gone).unwrap();
        let named = t.path().join("y.so (deleted)");
        std::fs::write(&named, vec![2u8; 4096]).unwrap();
        let a2 = map(&named);
        let mut c = MapsCache::default();
        let got = c.normalize(std::process::id(), 0, 0, &[a1 + 8, a2 + 8]).unwrap().addrs;
        let file = |a: &UserAddr| match a {
            UserAddr::File { path, off, deleted, .. } => (path.to_string(), *off, *deleted),
            other => panic!("{other:?}"),
        };
        assert_eq!(file(&got[0]), (gone.display().to_string(), 8, true));
        assert_eq!(file(&got[1]), (named.display().to_string(), 8, false));
    }

    /// A newline in a mapped file's name reads `\012` in /proc/PID/maps: the name was kept so,
    /// naming no file (the binary was "not at hand"). It is read back as the newline, for a
    /// stack's address and a fault's; a file whose name holds `\012` itself keeps it.
    #[test]
    fn a_newline_in_a_mapped_files_name_is_read_back() {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let t = tempfile::tempdir().unwrap();
        let map = |name: &str| {
            let path = t.path().join(name);
            std::fs::write(&path, vec![1u8; 4096]).unwrap();
            let f = std::fs::File::open(&path).unwrap();
            // SAFETY: a private read-only mapping of a file we opened, never unmapped (the test
            // ends); the page is only looked up, never read.
            let p =
                unsafe { libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_PRIVATE, f.as_raw_fd(), 0) };
            assert_ne!(p, libc::MAP_FAILED);
            (path.display().to_string(), p as u64)
        };
        let (newline, a1) = map("lib\nx.so");
        let (literal, a2) = map(r"lib\012y.so");
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert!(maps.contains(r"lib\012x.so") && !maps.contains("lib\nx.so"), "the kernel's escape");
        let mut c = MapsCache::default();
        let got = c.normalize(std::process::id(), 0, 0, &[a1 + 8, a2 + 8]).unwrap().addrs;
        let file = |a: &UserAddr| match a {
            UserAddr::File { path, off, deleted, .. } => (path.to_string(), *off, *deleted),
            other => panic!("{other:?}"),
        };
        assert_eq!(file(&got[0]), (newline.clone(), 8, false));
        assert_eq!(file(&got[1]), (literal, 8, false));
        let st = std::fs::metadata(&newline).unwrap();
        let fault = c.file_at(std::process::id(), a1 + 8, crate::snapshot::kdev(st.dev()), st.ino());
        assert_eq!(fault.map(|(p, o)| (p.to_string(), o)), Some((newline, 8)));
    }

    /// Reads stop at the limit; what lies past it is unknown, not unmapped.
    #[test]
    fn a_read_cut_at_the_limit_leaves_later_addresses_unknown() {
        let mut c = MapsCache::new(MapsLimits { read_max: 200, ..Default::default() });
        let got = c.normalize(std::process::id(), 0, 0, &[u64::MAX - 4096]).unwrap().addrs;
        assert_eq!(got, vec![UserAddr::Unknown]);
        assert_eq!(c.stats().truncated, 1);
    }
}

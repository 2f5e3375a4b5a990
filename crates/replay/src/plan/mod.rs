//! The replay plan: what `prepare` writes and `init` and `run` read.
//!
//! A [`Plan`] holds, per recorded thread, its operations in order, with dependency markers
//! ([`OpKind::Wait`]) where another thread's progress must come first; the sandbox paths they
//! use ([`PathTable`]); the starting tree ([`InitEntry`]); the files that were open before the
//! recording ([`Preopen`]); and what was left out and why ([`PlanMeta::dropped`]).
//!
//! [`Plan::validate`] checks every rule the executor relies on, so that a plan file that
//! decodes but was altered cannot make the replay touch anything outside its sandbox,
//! index out of bounds, or deadlock.

mod file;

pub use file::{read_plan, write_plan, PLAN_MAGIC, PLAN_VERSION};

use crate::error::{ReplayError, Result};
use crate::op::{Op, OpKind, NONE};
use serde::{Deserialize, Serialize};

/// Largest byte count of one replayed read or write (what Linux transfers in one call at most).
pub const MAX_IO_BYTES: u64 = 0x7fff_f000;

/// A replay plan in memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Checksum of the file the plan was read from (0 for a plan made in memory): the sandbox
    /// remembers which plan it was initialised for.
    pub id: u32,
    /// Description, counts, what was dropped.
    pub meta: PlanMeta,
    /// Sandbox paths, by id.
    pub paths: PathTable,
    /// Literal strings (symlink targets), by id.
    pub literals: Vec<String>,
    /// Recorded threads; thread `i`'s operations are `ops[start .. start + len]`.
    pub threads: Vec<ThreadInfo>,
    /// Every operation, grouped by thread, each thread's in program order.
    pub ops: Vec<Op>,
    /// The tree `init` builds, parents before children.
    pub init: Vec<InitEntry>,
    /// Files open before the recording started that the replay uses: opened before the run.
    pub preopen: Vec<Preopen>,
    /// Extended-attribute values the recording captured, by id (setxattr operations and
    /// [`InitXattr`] refer to them).
    pub values: Vec<Vec<u8>>,
    /// Extended attributes of the starting tree, in path order.
    pub xattrs: Vec<InitXattr>,
}

/// The plan's description (stored as JSON in the plan file).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanMeta {
    /// Plan format version ([`PLAN_VERSION`]).
    pub plan_version: u32,
    /// latscope version that wrote it.
    pub latscope_version: String,
    /// The recording it comes from.
    pub trace: TraceInfo,
    /// Filter expression that selected the replayed events, if any.
    pub filter: Option<String>,
    /// Where the replay happens.
    pub sandbox: SandboxSpec,
    /// Counts.
    pub counts: PlanCounts,
    /// Left out, by reason and operation.
    pub dropped: Vec<Dropped>,
    /// Things the user should know (model disagreements, assumptions).
    pub warnings: Vec<String>,
    /// Largest read of one operation (bytes): the size of each thread's read buffer.
    pub max_read: u64,
    /// Largest write of one operation (bytes).
    pub max_write: u64,
    /// Recorded time from the first replayed operation's start to the last one's end (ns).
    pub span_ns: u64,
    /// fd slots (one per fd the recording created and the replay uses).
    pub slots: u32,
    /// Memory-mapping slots.
    pub maps: u32,
    /// Worker threads the replay needs: recorded threads that never ran at the same time share one.
    pub lanes: u32,
}

/// The recording a plan comes from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceInfo {
    /// Trace file as given to prepare.
    pub file: String,
    /// Host name of the recorded machine.
    pub hostname: String,
    /// Its kernel.
    pub kernel: String,
    /// Wall-clock time of the first replayed operation, ns since the epoch.
    pub start_wall_ns: i64,
    /// Events read from the trace.
    pub events: u64,
}

/// Where a replay happens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// `root`: every path under one directory; `name`: under `<mount>/.latscope/<name>/` per
    /// recorded mount.
    pub mode: String,
    /// The test name (`name` mode).
    pub name: Option<String>,
    /// Sandbox roots; path entries refer to them by index.
    pub roots: Vec<RootSpec>,
}

/// One sandbox root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootSpec {
    /// The local directory (absolute).
    pub dir: String,
    /// The recorded mount point it stands for (`/` in root mode).
    pub mount: String,
    /// The recorded file-system type.
    pub fstype: String,
}

/// Plan counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanCounts {
    /// Recorded operations the replay performs.
    pub ops: u64,
    /// Operations the kernel did implicitly in the recording (fork inheritance, exec and exit
    /// closes, exit unmaps) that the replay performs explicitly.
    pub implicit: u64,
    /// Cross-thread dependencies.
    pub waits: u64,
    /// Recorded operations per kind.
    pub by_kind: std::collections::BTreeMap<String, u64>,
    /// Directories, files and symlinks init creates, and the bytes it writes.
    pub init_dirs: u64,
    /// Files init creates.
    pub init_files: u64,
    /// Symlinks init creates.
    pub init_symlinks: u64,
    /// Bytes init writes.
    pub init_bytes: u64,
    /// Extended attributes init sets.
    #[serde(default)]
    pub init_xattrs: u64,
}

/// Operations left out of the plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// Why (a sentence).
    pub reason: String,
    /// The recorded syscall.
    pub op: String,
    /// How many.
    pub count: u64,
}

/// One recorded thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadInfo {
    /// Recorded thread id.
    pub tid: u32,
    /// Recorded process id.
    pub pid: u32,
    /// Index of its first entry in [`Plan::ops`].
    pub start: u64,
    /// Entries (operations and waits).
    pub len: u64,
    /// Operations (entries other than waits): what other threads' waits count.
    pub ops: u32,
    /// Worker that runs it.
    pub lane: u32,
    /// Command name.
    pub comm: String,
}

/// What init creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum InitKind {
    /// A directory.
    Dir = 0,
    /// A regular file of `size` bytes of generated data.
    File = 1,
    /// A symlink to literal `target`.
    Symlink = 2,
}

/// One entry of the starting tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitEntry {
    /// Path id.
    pub path: u32,
    /// Directory, file or symlink.
    pub kind: InitKind,
    /// Permission bits.
    pub mode: u32,
    /// File size in bytes.
    pub size: u64,
    /// Literal id of a symlink's target ([`NONE`] otherwise).
    pub target: u32,
}

/// An extended attribute a path of the starting tree had when the recording started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitXattr {
    /// Path id (an entry of the starting tree).
    pub path: u32,
    /// Literal id of the attribute's name.
    pub name: u32,
    /// Value id ([`Plan::values`]) of the recorded value, or [`NONE`]: `size` bytes of
    /// generated data.
    pub value: u32,
    /// Size of the value in bytes (when it was not captured).
    pub size: u32,
}

/// The largest extended-attribute value a plan holds (Linux's `XATTR_SIZE_MAX`).
pub const MAX_XATTR_VALUE: usize = 65536;

/// A file open before the recording started, opened by the run before its clock starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preopen {
    /// The slot it fills.
    pub slot: u32,
    /// Path id.
    pub path: u32,
    /// Open flags (access mode, O_APPEND, O_DIRECT, ...).
    pub flags: u32,
    /// File position to seek to.
    pub pos: i64,
}

/// Sandbox paths: each is a root index and a path relative to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathTable {
    /// The entries, by id.
    pub entries: Vec<PathEntry>,
}

/// One sandbox path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathEntry {
    /// Index into [`SandboxSpec::roots`].
    pub root: u16,
    /// Id of the parent directory's entry; [`NONE`] when the parent is the root itself.
    pub parent: u32,
    /// Relative path (`.` for the root itself), `/`-separated, without `.`/`..` components.
    pub rel: String,
}

impl PathEntry {
    /// The last component.
    pub fn base(&self) -> &str {
        self.rel.rsplit('/').next().unwrap_or(&self.rel)
    }
}

impl PathTable {
    /// Number of paths.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Entry `id`.
    pub fn get(&self, id: u32) -> Option<&PathEntry> {
        self.entries.get(id as usize)
    }
    /// `root:rel` for messages.
    pub fn display(&self, meta: &PlanMeta, id: u32) -> String {
        match self.get(id) {
            Some(e) => match meta.sandbox.roots.get(e.root as usize) {
                Some(r) if e.rel == "." => r.dir.clone(),
                Some(r) => format!("{}/{}", r.dir.trim_end_matches('/'), e.rel),
                None => e.rel.clone(),
            },
            None => format!("<path {id}>"),
        }
    }
}

/// True for a relative path made of plain components (no empty, `.` or `..` component, no NUL).
pub fn is_plain_relative(rel: &str) -> bool {
    !rel.is_empty()
        && !rel.starts_with('/')
        && !rel.contains('\0')
        && rel.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Whether a symlink target, relative to the link's directory `link_dir_depth` levels below its
/// root, stays inside the root when followed lexically.
pub fn target_stays_inside(target: &str, link_dir_depth: usize) -> bool {
    if target.is_empty() || target.starts_with('/') || target.contains('\0') {
        return false;
    }
    let mut depth = link_dir_depth as i64;
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => depth += 1,
        }
    }
    true
}

fn bad(msg: String) -> ReplayError {
    ReplayError::PlanInvalid(msg)
}

/// The most one read or write moves (Linux's `MAX_RW_COUNT`): a plan's larger limits are forged.
pub const MAX_IO: u64 = 0x7fff_f000;

impl Plan {
    /// Check every rule the executor relies on (see the module documentation).
    pub fn validate(&self) -> Result<()> {
        let m = &self.meta;
        if m.plan_version != PLAN_VERSION {
            return Err(bad(format!("plan_version {} in a version-{PLAN_VERSION} file", m.plan_version)));
        }
        crate::sandbox::validate_spec(&m.sandbox).map_err(|e| bad(e.to_string()))?;
        let nroots = m.sandbox.roots.len();
        let npaths = self.paths.len() as u32;
        for (id, p) in self.paths.entries.iter().enumerate() {
            if p.root as usize >= nroots {
                return Err(bad(format!("path {id} refers to root {} of {nroots}", p.root)));
            }
            if p.rel != "." && !is_plain_relative(&p.rel) {
                return Err(bad(format!("path {id} {:?} is not a plain relative path", p.rel)));
            }
            if p.parent == NONE && p.rel.starts_with(crate::sandbox::RESERVED_PREFIX) {
                return Err(bad(format!("path {id} {:?} uses a name reserved for the sandbox", p.rel)));
            }
            let dir = p.rel.rsplit_once('/').map(|(d, _)| d);
            match (p.parent, dir) {
                (NONE, None) => {}
                (NONE, Some(_)) | (_, None) => return Err(bad(format!("path {id} {:?} has a wrong parent", p.rel))),
                (q, Some(d)) => match self.paths.get(q) {
                    Some(pe) if pe.rel == d && pe.root == p.root && (q as usize) < id => {}
                    _ => return Err(bad(format!("path {id} {:?} has a wrong parent", p.rel))),
                },
            }
        }
        for (i, l) in self.literals.iter().enumerate() {
            if l.contains('\0') {
                return Err(bad(format!("literal {i} holds a NUL byte")));
            }
        }
        // Limits the executor allocates by (buffers, slot tables): checked against what one
        // system call can move and what the plan holds, before anything is allocated.
        if m.max_read > MAX_IO || m.max_write > MAX_IO {
            return Err(bad(format!(
                "max_read {} / max_write {} bytes: above the {MAX_IO} bytes one read or write can move",
                m.max_read, m.max_write
            )));
        }
        let entries = self.ops.len() as u64 + self.preopen.len() as u64;
        if m.slots as u64 > entries || m.maps as u64 > self.ops.len() as u64 {
            return Err(bad(format!(
                "{} fd slots and {} mapping slots for {entries} operations and open files",
                m.slots, m.maps
            )));
        }
        let (mut files, mut dirs, mut links, mut bytes) = (0u64, 0u64, 0u64, 0u64);
        for e in &self.init {
            match e.kind {
                InitKind::File => files += 1,
                InitKind::Dir => dirs += 1,
                InitKind::Symlink => links += 1,
            }
            if e.kind == InitKind::File {
                bytes = bytes.checked_add(e.size).ok_or_else(|| bad("init sizes overflow".into()))?;
            }
        }
        let c = &m.counts;
        if (files, dirs, links, bytes) != (c.init_files, c.init_dirs, c.init_symlinks, c.init_bytes) {
            return Err(bad(format!(
                "the starting tree holds {files} files ({bytes} bytes), {dirs} directories and {links} symlinks, \
                 the header says {} files ({} bytes), {} directories and {} symlinks",
                c.init_files, c.init_bytes, c.init_dirs, c.init_symlinks
            )));
        }
        if c.init_xattrs != self.xattrs.len() as u64 {
            return Err(bad(format!(
                "the starting tree holds {} extended attributes, the header says {}",
                self.xattrs.len(),
                c.init_xattrs
            )));
        }
        let nlit = self.literals.len() as u32;
        for x in &self.xattrs {
            let value_ok = if x.value == NONE {
                x.size as usize <= MAX_XATTR_VALUE
            } else {
                (x.value as usize) < self.values.len()
            };
            if x.path as usize >= self.paths.len() || x.name >= nlit || !value_ok {
                return Err(bad(format!(
                    "a starting attribute names path {}, name {}, value {} (size {}) out of range",
                    x.path, x.name, x.value, x.size
                )));
            }
        }
        if self.values.iter().any(|v| v.len() > MAX_XATTR_VALUE) {
            return Err(bad(format!("an attribute value above {MAX_XATTR_VALUE} bytes")));
        }
        let nthreads = self.threads.len() as u32;
        if m.lanes == 0 && nthreads > 0 || m.lanes > nthreads {
            return Err(bad(format!("{} lanes for {nthreads} threads", m.lanes)));
        }
        let mut next = 0u64;
        let mut lane_last: Vec<Option<u32>> = vec![None; m.lanes as usize];
        let mut order: Vec<usize> = (0..self.threads.len()).collect();
        let first_seq = |t: &ThreadInfo| self.ops.get(t.start as usize).map(|o| o.seq).unwrap_or(0);
        for (i, t) in self.threads.iter().enumerate() {
            if t.start != next || t.len == 0 || t.start.checked_add(t.len).is_none_or(|e| e > self.ops.len() as u64) {
                return Err(bad(format!(
                    "thread {i} covers entries {}+{} (expected to start at {next})",
                    t.start, t.len
                )));
            }
            next = t.start + t.len;
            if t.lane >= m.lanes {
                return Err(bad(format!("thread {i} runs on lane {} of {}", t.lane, m.lanes)));
            }
            let body = &self.ops[t.start as usize..next as usize];
            let real = body.iter().filter(|o| o.kind != OpKind::Wait).count() as u64;
            if real != t.ops as u64 {
                return Err(bad(format!("thread {i} claims {} operations, has {real}", t.ops)));
            }
            if body.windows(2).any(|w| w[1].seq < w[0].seq) {
                return Err(bad(format!("thread {i}: operations out of order")));
            }
        }
        if next != self.ops.len() as u64 {
            return Err(bad(format!("{} entries belong to no thread", self.ops.len() as u64 - next)));
        }
        // Threads of one lane run one after the other: each must start after the previous ended.
        order.sort_by_key(|&i| first_seq(&self.threads[i]));
        for &i in &order {
            let t = &self.threads[i];
            let (first, last) = (first_seq(t), self.ops[(t.start + t.len - 1) as usize].seq);
            if let Some(prev) = lane_last[t.lane as usize] {
                if first <= prev {
                    return Err(bad(format!("thread {i} overlaps another thread of lane {}", t.lane)));
                }
            }
            lane_last[t.lane as usize] = Some(last);
        }
        // The seq of each thread's k-th operation, to check that waits point backwards.
        let mut op_seq: Vec<Vec<u32>> = Vec::with_capacity(self.threads.len());
        for t in &self.threads {
            let body = &self.ops[t.start as usize..(t.start + t.len) as usize];
            op_seq.push(body.iter().filter(|o| o.kind != OpKind::Wait).map(|o| o.seq).collect());
        }
        for (ti, t) in self.threads.iter().enumerate() {
            let body = &self.ops[t.start as usize..(t.start + t.len) as usize];
            for (j, op) in body.iter().enumerate() {
                self.validate_op(op, npaths)
                    .map_err(|e| bad(format!("thread {ti} entry {j} ({}): {e}", op.kind.name())))?;
                if op.kind == OpKind::Wait {
                    let (u, n) = (op.slot, op.size);
                    let target = op_seq.get(u as usize).and_then(|v| (n >= 1).then(|| v.get(n as usize - 1)).flatten());
                    match target {
                        Some(&s) if u as usize != ti && s < op.seq => {}
                        _ => {
                            return Err(bad(format!(
                                "thread {ti} entry {j} waits for {n} operations of thread {u}, which is not earlier"
                            )))
                        }
                    }
                }
            }
        }
        for p in &self.preopen {
            if p.slot >= m.slots || p.path >= npaths {
                return Err(bad(format!("preopened slot {} / path {} out of range", p.slot, p.path)));
            }
        }
        for e in &self.init {
            if e.path >= npaths {
                return Err(bad(format!("init path {} out of range", e.path)));
            }
            if e.kind == InitKind::Symlink {
                let depth = self.paths.get(e.path).map(|p| p.rel.matches('/').count()).unwrap_or(0);
                match self.literals.get(e.target as usize) {
                    Some(t) if target_stays_inside(t, depth) => {}
                    _ => return Err(bad(format!("init symlink {} leads out of the sandbox", e.path))),
                }
            }
        }
        Ok(())
    }

    fn validate_op(&self, op: &Op, npaths: u32) -> std::result::Result<(), String> {
        let m = &self.meta;
        if op.uses_slot() && op.slot >= m.slots {
            return Err(format!("slot {} of {}", op.slot, m.slots));
        }
        if matches!(op.kind, OpKind::Open | OpKind::Dup) && op.slot2 != NONE && op.slot2 >= m.slots {
            return Err(format!("new slot {} of {}", op.slot2, m.slots));
        }
        if op.copies() && op.slot2 >= m.slots {
            return Err(format!("input slot {} of {}", op.slot2, m.slots));
        }
        if op.kind == OpKind::Mknod && !matches!(op.mode & libc::S_IFMT, libc::S_IFIFO | libc::S_IFREG | 0) {
            return Err("mknod of something other than a FIFO or a regular file".into());
        }
        if op.kind == OpKind::Dup && op.path != NONE && op.path >= m.slots {
            return Err(format!("replaced slot {} of {}", op.path, m.slots));
        }
        if matches!(op.kind, OpKind::Mmap | OpKind::Munmap | OpKind::Msync) && op.slot2 >= m.maps {
            return Err(format!("mapping {} of {}", op.slot2, m.maps));
        }
        if op.uses_path() && op.path >= npaths {
            return Err(format!("path {} of {npaths}", op.path));
        }
        if matches!(op.kind, OpKind::Rename | OpKind::Link) && op.path2 >= npaths {
            return Err(format!("second path {} of {npaths}", op.path2));
        }
        if matches!(op.kind, OpKind::Getxattr | OpKind::Setxattr | OpKind::Removexattr)
            && op.path2 as usize >= self.literals.len()
        {
            return Err(format!("attribute name {} of {}", op.path2, self.literals.len()));
        }
        if op.kind == OpKind::Setxattr && op.off != -1 && !(op.off >= 0 && (op.off as usize) < self.values.len()) {
            return Err(format!("attribute value {} of {}", op.off, self.values.len()));
        }
        if op.xattr() && op.slot == NONE && op.path == NONE {
            return Err("an attribute call on neither an fd nor a path".into());
        }
        if op.kind == OpKind::Symlink {
            let depth = self.paths.get(op.path).map(|p| p.rel.matches('/').count()).unwrap_or(0);
            match self.literals.get(op.path2 as usize) {
                Some(t) if target_stays_inside(t, depth) => {}
                _ => return Err("symlink target leads out of the sandbox".into()),
            }
        }
        if (op.reads_data() || op.writes_data()) && op.size > MAX_IO_BYTES {
            return Err(format!("{} bytes in one call", op.size));
        }
        if op.reads_data() && op.size > m.max_read || op.writes_data() && op.size > m.max_write {
            return Err(format!("{} bytes exceed the plan's buffer size", op.size));
        }
        if op.kind == OpKind::Msync && op.mode as u64 > op.size {
            return Err("msync fills more than its range".into());
        }
        Ok(())
    }

    /// Thread `i`'s entries.
    pub fn thread_ops(&self, i: usize) -> &[Op] {
        let t = &self.threads[i];
        &self.ops[t.start as usize..(t.start + t.len) as usize]
    }
}

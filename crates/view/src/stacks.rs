//! Blocked time by stack (`why --stacks`, folded stacks, flame graphs): the calls recorded with
//! `record --why` and stacks, each weighed by its blocked time (its latency less on CPU and run
//! queue), grouped by its user stack and the kernel stack where it blocked.
//!
//! User frames are symbolized here, from the binaries at hand (blazesym, on the file offsets
//! the recording stored); kernel frames carry the names kallsyms gave them when recording.

use crate::text::clean;
use latscope_event::units::fmt_ns;
use latscope_event::{op_name, EventBatch, EventKind, StackEntry, StackKind, StackTable};
use latscope_stacks::debugfile::{BinaryInfo, DebugSearch};
use latscope_stacks::Symbols;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Blocked time summed by (user stack, kernel stack).
#[derive(Debug, Clone, Default)]
pub struct StackAgg {
    /// Count idle waits (poll, futex, sleeps, ...) too, as [`crate::why::WhyAgg::with_waits`].
    pub with_waits: bool,
    /// Idle waits left out.
    pub waits_left_out: u64,
    /// The waits seen, by kind ([`crate::waits`]).
    pub waits: crate::waits::LeftOut,
    /// Calls with a breakdown that blocked but carry no stack (recorded without `--stacks`).
    pub without_stack: u64,
    /// Weigh calls by their time on CPU instead (by user stack and operation: where a call was
    /// on CPU in the kernel is not recorded, so the kernel stack is left out).
    pub on_cpu: bool,
    /// Weigh on-CPU samples (`record --profile`) instead, by their user and kernel stacks, each
    /// for the CPU time it stands for (its period); calls are left out.
    pub samples: bool,
    /// Blocked time (ns) of all calls counted.
    pub total_ns: u64,
    /// Per (user stack id, kernel stack id): calls, blocked ns, and the operation with the most.
    pub by_stack: HashMap<(u32, u32), StackSum>,
}

/// The calls of one stack pair.
#[derive(Debug, Clone, Default)]
pub struct StackSum {
    /// Calls.
    pub calls: u64,
    /// Their blocked time (ns).
    pub blocked_ns: u64,
    /// Blocked time by operation (syscall name) and by command name.
    pub ops: HashMap<String, u64>,
    /// Blocked time by command name.
    pub comms: HashMap<String, u64>,
}

/// A call's blocked time: its latency less on CPU and run queue (0 without a breakdown).
pub fn blocked_ns(b: &EventBatch, i: usize) -> u64 {
    let p = b.why_parts(i);
    if p.iter().all(|&v| v == 0) {
        return 0;
    }
    p[2..].iter().sum()
}

impl StackAgg {
    /// Calls (or, with `samples`, samples) counted with a stack.
    pub fn counted(&self) -> u64 {
        self.by_stack.values().map(|x| x.calls).sum()
    }

    /// Add rows `rows` of `b` (syscalls with a breakdown and blocked time).
    pub fn add(&mut self, b: &EventBatch, rows: &[u32]) {
        for &r in rows {
            let i = r as usize;
            if self.samples {
                self.add_sample(b, i);
                continue;
            }
            if b.kind[i] != EventKind::Syscall as u8 {
                continue;
            }
            let t = if self.on_cpu { b.why_parts(i)[0] } else { blocked_ns(b, i) };
            if t == 0 {
                continue;
            }
            if self.waits.classify(b, i, self.with_waits) {
                self.waits_left_out += 1;
                continue;
            }
            if b.kstack[i] == 0 && b.ustack[i] == 0 {
                self.without_stack += 1;
                continue;
            }
            self.total_ns += t;
            let key = (b.ustack[i], if self.on_cpu { 0 } else { b.kstack[i] });
            let s = self.by_stack.entry(key).or_default();
            s.calls += 1;
            s.blocked_ns += t;
            *s.ops.entry(op_name(b.kind[i], b.nr[i])).or_default() += t;
            *s.comms.entry(b.comm.get(i).to_string()).or_default() += t;
        }
    }

    fn add_sample(&mut self, b: &EventBatch, i: usize) {
        if b.kind[i] != EventKind::Proc as u8 || b.nr[i] != latscope_event::ProcOp::Sample as u16 {
            return;
        }
        if b.kstack[i] == 0 && b.ustack[i] == 0 {
            self.without_stack += 1;
            return;
        }
        let t = b.bytes[i];
        self.total_ns += t;
        let s = self.by_stack.entry((b.ustack[i], b.kstack[i])).or_default();
        s.calls += 1;
        s.blocked_ns += t;
        *s.ops.entry(if b.ret[i] == 1 { "in the kernel" } else { "in user code" }.to_string()).or_default() += t;
        *s.comms.entry(b.comm.get(i).to_string()).or_default() += t;
    }

    /// Stack pairs by blocked time, largest first.
    pub fn ranked(&self) -> Vec<(&(u32, u32), &StackSum)> {
        let mut v: Vec<_> = self.by_stack.iter().collect();
        v.sort_by(|a, b| b.1.blocked_ns.cmp(&a.1.blocked_ns).then(a.0.cmp(b.0)));
        v
    }
}

fn largest(m: &HashMap<String, u64>) -> &str {
    m.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map_or("", |(k, _)| k.as_str())
}

/// Frame names of the trace's stacks, innermost first, user frames symbolized on demand.
///
/// The binaries are opened by the names the recording stored, which any user of the recorded
/// machine chooses: each is opened without blocking and used only if it is a regular file of at
/// most [`MAX_BINARY_BYTES`] (a FIFO or a device there is refused, not waited on or read), below
/// the `--binaries` directory only inside it ([`latscope_trace::safe_read`]; a path with `..` is
/// refused). Its separate debug file, if it has one at hand ([`latscope_stacks::debugfile`]),
/// is opened by the same rules and used only with the binary's build id (or its debug link's
/// CRC). The symbolizer reads a private copy of each file checked (a memfd): blazesym follows
/// the debug links, alternate debug files and DWARF packages of the files it reads by the names
/// they give, next to their real paths, which a copy without a path leaves it none of.
pub struct StackNames {
    table: StackTable,
    /// Where the recorded binaries are: their recorded paths are looked up under it (None: as
    /// recorded, on this machine).
    root: Option<PathBuf>,
    symbols: Symbols,
    cache: HashMap<u32, Vec<NamedFrame>>,
    /// Files whose build id differs from the recorded one (not symbolized), and files missing.
    pub notes: Vec<String>,
    /// Per recorded file and build id: the copy's path (`/proc/self/fd/N`) to symbolize from,
    /// and its debug file's copy with the binary's segments, or none when the file is not usable.
    checked: HashMap<String, Option<Binary>>,
    /// Where debug files are looked for.
    debug: DebugSearch,
    /// The binaries opened: kept open so that their descriptors' paths stay theirs.
    open: Vec<std::fs::File>,
    /// Bytes copied into memory so far ([`MAX_COPIED_BYTES`]).
    copied: u64,
    /// Largest file copied ([`MAX_COPY_BYTES`]; tests lower it).
    copy_max: u64,
}

/// A frame as the views show it: its name (a function, `file+0xoffset` when it could not be
/// named, or a bracketed note), where the debug information places it, and whether it is a
/// function inlined into the next frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedFrame {
    /// The function, or what stands for it.
    pub name: String,
    /// `file:line` from the debug information, when it has them.
    pub source: Option<String>,
    /// Inlined into the next (outer) frame.
    pub inlined: bool,
    /// The recorded frame it comes from (its position in the stack table's entry).
    pub frame: usize,
}

impl NamedFrame {
    fn plain(name: String, frame: usize) -> NamedFrame {
        NamedFrame { name, source: None, inlined: false, frame }
    }
}

/// A binary at hand to name frames from.
#[derive(Debug, Clone)]
struct Binary {
    /// Its copy's path (`/proc/self/fd/N`), or the file's own descriptor's when it is too
    /// large to copy (then only its symbol tables are read: reading its DWARF would follow the
    /// debug files it names).
    path: PathBuf,
    /// Only the symbol tables of `path` are read.
    symtab_only: bool,
    /// Its separate debug file's copy, and the binary's segments (file offsets to addresses).
    debug: Option<(PathBuf, Vec<latscope_stacks::elf::Load>)>,
}

/// Largest file copied into memory to be read (binaries and debug files), and most bytes
/// copied in all: past them a binary is named from its symbol tables alone, and a debug file
/// is not used.
const MAX_COPY_BYTES: u64 = 512 << 20;
const MAX_COPIED_BYTES: u64 = 2 << 30;

/// Largest binary (or debug file) read to name frames.
pub const MAX_BINARY_BYTES: u64 = 4 << 30;

/// Most binaries opened to name frames (each stays open while names are made).
const MAX_BINARIES: usize = 512;

/// How a stack is shown when it has no frames.
pub fn missing_frame(e: Option<&StackEntry>, kind: StackKind) -> String {
    let what = if kind == StackKind::Kernel { "kernel" } else { "user" };
    match e.and_then(|e| e.missing.as_deref()) {
        Some(why) => format!("[{what} stack missing: {why}]"),
        None => format!("[no {what} stack]"),
    }
}

impl StackNames {
    /// Names for the stacks of `table`; binaries are read under `root` when given.
    pub fn new(table: StackTable, root: Option<&Path>) -> StackNames {
        StackNames {
            table,
            root: root.map(Path::to_path_buf),
            symbols: Symbols::new(),
            cache: HashMap::new(),
            notes: Vec::new(),
            checked: HashMap::new(),
            debug: DebugSearch::system(),
            open: Vec::new(),
            copied: 0,
            copy_max: MAX_COPY_BYTES,
        }
    }

    /// Add stack table entries (JSON lines, as a block's or a live batch's `stacks`); ids are
    /// unique within a recording, so names already made stay right.
    pub fn add_lines(&mut self, text: &str) -> Result<(), String> {
        self.table.add_lines(text)
    }

    /// The stack table.
    pub fn table(&self) -> &StackTable {
        &self.table
    }

    /// The notes ([`StackNames::notes`]), and one saying what the stack table left out or cut to
    /// stay within its bounds, if anything.
    pub fn all_notes(&self) -> Vec<String> {
        let mut v = self.notes.clone();
        let t = self.table.truncation();
        if !t.is_empty() {
            v.push(format!(
                "the trace's stack table is past its bounds: {} (their calls show a missing stack)",
                t.describe()
            ));
        }
        v
    }

    /// The frame names of stack `id`, innermost first, functions inlined at an address before
    /// the function they were inlined into (one bracketed frame when it has none; a last
    /// `[truncated]` or `[cut short: ...]` frame when the capture or the unwinding stopped early).
    pub fn frames(&mut self, id: u32, kind: StackKind) -> Vec<String> {
        self.detailed(id, kind).into_iter().map(|f| f.name).collect()
    }

    /// One name per recorded frame of stack `id` (the function containing the address, with
    /// the innermost function inlined there in front: `leaf <- outer`), as a table of frames
    /// wants them; a stack without frames has one name saying why.
    pub fn frame_names(&mut self, id: u32, kind: StackKind) -> Vec<String> {
        let d = self.detailed(id, kind);
        let Some(e) = self.table.get(id) else { return d.into_iter().map(|f| f.name).collect() };
        if e.frames.is_empty() {
            return d.into_iter().take(1).map(|f| f.name).collect();
        }
        (0..e.frames.len())
            .map(|k| {
                let at: Vec<&NamedFrame> = d.iter().filter(|f| f.frame == k).collect();
                match (at.first(), at.last()) {
                    (Some(inner), Some(outer)) if at.len() > 1 => format!("{} <- {}", inner.name, outer.name),
                    (Some(f), _) => f.name.clone(),
                    _ => format!("{:#x}", e.frames[k].addr),
                }
            })
            .collect()
    }

    /// The frames of stack `id` with their source lines (see [`StackNames::frames`]).
    pub fn detailed(&mut self, id: u32, kind: StackKind) -> Vec<NamedFrame> {
        if let Some(v) = self.cache.get(&id) {
            return v.clone();
        }
        let e = self.table.get(id).cloned();
        let mut v = match &e {
            Some(e) if !e.frames.is_empty() => match e.kind {
                StackKind::Kernel => e
                    .frames
                    .iter()
                    .enumerate()
                    .map(|(k, f)| NamedFrame::plain(f.sym.clone().unwrap_or_else(|| format!("{:#x}", f.addr)), k))
                    .collect(),
                StackKind::User => self.user_frames(e),
            },
            _ => vec![NamedFrame::plain(missing_frame(e.as_ref(), kind), 0)],
        };
        let n = e.as_ref().map_or(0, |e| e.frames.len());
        if let Some(cut) = e.as_ref().and_then(|e| e.cut.as_deref()) {
            v.push(NamedFrame::plain(format!("[cut short: {cut}]"), n));
        } else if e.as_ref().is_some_and(|e| e.truncated) {
            v.push(NamedFrame::plain("[truncated]".into(), n));
        }
        self.cache.insert(id, v.clone());
        v
    }

    /// The binary to symbolize `file` (as recorded) from, if it is at hand, safe to read and has
    /// the recorded build id.
    fn usable(&mut self, file: &str, build_id: Option<&str>) -> Option<Binary> {
        let key = format!("{file}\0{}", build_id.unwrap_or(""));
        if let Some(p) = self.checked.get(&key) {
            return p.clone();
        }
        let p = self.check(file, build_id);
        self.checked.insert(key, p.clone());
        p
    }

    fn check(&mut self, file: &str, build_id: Option<&str>) -> Option<Binary> {
        let shown = match &self.root {
            Some(r) => r.join(file.trim_start_matches('/')),
            None => PathBuf::from(file),
        };
        if self.open.len() >= MAX_BINARIES {
            self.notes.push(format!(
                "{}: more than {MAX_BINARIES} binaries: its frames are shown as file offsets",
                shown.display()
            ));
            return None;
        }
        // A recorded path is absolute and plain (the kernel's name of a mapped file): one with
        // `..` is crafted, and could lead out of the --binaries directory.
        if self.root.is_some() && Path::new(file).components().any(|c| c == std::path::Component::ParentDir) {
            self.notes.push(format!(
                "{}: a path with `..` is refused (it could lead out of --binaries): its frames are shown as file offsets",
                shown.display()
            ));
            return None;
        }
        let f = match self.open_recorded(Path::new(file)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.notes.push(format!("{} is not at hand: its frames are shown as file offsets", shown.display()));
                return None;
            }
            Err(e) => {
                self.notes.push(format!("{}: {e}: its frames are shown as file offsets", shown.display()));
                return None;
            }
        };
        let size = f.metadata().map_or(u64::MAX, |m| m.len());
        if size > MAX_BINARY_BYTES {
            self.notes.push(format!(
                "{} is {size} bytes, more than the {MAX_BINARY_BYTES} read of a binary: its frames are shown as file offsets",
                shown.display()
            ));
            return None;
        }
        let Ok(info) = BinaryInfo::read(&f) else {
            self.notes.push(format!("{} is not an ELF file: its frames are shown as file offsets", shown.display()));
            return None;
        };
        if let Some(want) = build_id {
            let have = info.build_id.as_deref().map(latscope_stacks::elf::hex);
            if have.as_deref() != Some(want) {
                self.notes.push(format!(
                    "{} is not the recorded binary (build id {} here, {want} recorded): its frames are shown as file offsets",
                    shown.display(),
                    have.as_deref().unwrap_or("none")
                ));
                return None;
            }
        }
        if !self.copyable(size) {
            use std::os::fd::AsRawFd;
            self.notes.push(format!(
                "{} is too large to copy into memory ({size} bytes): it is named from its symbol tables only",
                shown.display()
            ));
            let path = PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()));
            self.open.push(f);
            return Some(Binary { path, symtab_only: true, debug: None });
        }
        let path = match self.private_copy(&f) {
            Ok(p) => p,
            Err(e) => {
                self.notes.push(format!(
                    "{}: cannot copy it to read it: {e}: its frames are shown as file offsets",
                    shown.display()
                ));
                return None;
            }
        };
        let debug = if info.has_dwarf { None } else { self.debug_file(file, &info) };
        Some(Binary { path, symtab_only: false, debug })
    }

    /// Whether a file of `size` bytes may be copied into memory (within the bounds).
    fn copyable(&self, size: u64) -> bool {
        size <= self.copy_max && self.copied.saturating_add(size) <= MAX_COPIED_BYTES
    }

    /// The separate debug file of the binary recorded at `file`, copied, with the binary's
    /// segments: the first candidate that opens by the rules binaries do and is the binary's.
    fn debug_file(&mut self, file: &str, info: &BinaryInfo) -> Option<(PathBuf, Vec<latscope_stacks::elf::Load>)> {
        let recorded = Path::new(file);
        for c in self.debug.candidates(recorded, info.build_id.as_deref(), info.link.as_ref()) {
            if self.open.len() >= MAX_BINARIES {
                return None;
            }
            // A debuginfod cache is this machine's, wherever the binaries come from.
            let opened = if c.cache {
                latscope_trace::safe_read::open_file_following(&c.path)
            } else {
                self.open_recorded(&c.path)
            };
            let Ok(mut f) = opened else { continue };
            if !self.copyable(f.metadata().map_or(u64::MAX, |m| m.len())) || !info.is_debug_file(&mut f, MAX_COPY_BYTES)
            {
                continue;
            }
            match self.private_copy(&f) {
                Ok(p) => return Some((p, info.loads.clone())),
                Err(_) => return None,
            }
        }
        None
    }

    /// Opens a path of the recorded machine: under `--binaries` inside it, else as it is.
    fn open_recorded(&self, path: &Path) -> std::io::Result<std::fs::File> {
        use latscope_trace::safe_read::{open_file_beneath_following, open_file_following};
        match &self.root {
            Some(r) => open_file_beneath_following(r, path.strip_prefix("/").unwrap_or(path)),
            None => open_file_following(path),
        }
    }

    /// A copy of `f` in memory (a memfd, kept open), as the path the symbolizer reads.
    fn private_copy(&mut self, f: &std::fs::File) -> std::io::Result<PathBuf> {
        use std::io::{Read, Seek, SeekFrom};
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: a NUL-terminated name; the descriptor, if any, is owned by the File below.
        let fd = unsafe { libc::memfd_create(c"latscope-binary".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor nothing else owns.
        let mut copy = unsafe { std::fs::File::from_raw_fd(fd) };
        let mut src = f;
        src.seek(SeekFrom::Start(0))?;
        let n = std::io::copy(&mut Read::take(src, self.copy_max), &mut copy)?;
        self.copied = self.copied.saturating_add(n);
        let p = PathBuf::from(format!("/proc/self/fd/{}", copy.as_raw_fd()));
        self.open.push(copy);
        Ok(p)
    }

    fn user_frames(&mut self, e: &StackEntry) -> Vec<NamedFrame> {
        let mut out = Vec::with_capacity(e.frames.len());
        for (n, f) in e.frames.iter().enumerate() {
            let (Some(file), Some(off)) = (&f.file, f.off) else {
                out.push(NamedFrame::plain(format!("{:#x}", f.addr), n));
                continue;
            };
            let base = file.rsplit('/').next().unwrap_or(file);
            let base = if f.deleted { format!("{base} (deleted)") } else { base.to_string() };
            // User stacks are taken in system calls: the first address is the one after the
            // `syscall` instruction, the others return addresses, after their calls. One byte
            // back is the instruction itself (in the function inlined there, on its line).
            let o = off.saturating_sub(1);
            let names = self.usable(file, f.build_id.as_deref()).and_then(|b| match &b.debug {
                _ if b.symtab_only => self.symbols.name_symtab(&b.path, o),
                Some((debug, loads)) => match latscope_stacks::elf::vaddr_of(loads, o) {
                    Some(va) => self.symbols.name_split(&b.path, o, debug, va),
                    None => self.symbols.name(&b.path, o),
                },
                None => self.symbols.name(&b.path, o),
            });
            match names {
                Some(names) => out.extend(names.into_iter().map(|x| {
                    // A binary is anyone's: its names (function, file) are bounded like others.
                    let bound = |mut t: String| {
                        latscope_event::bounds::cut(&mut t, latscope_event::bounds::MAX_TEXT, &mut Default::default());
                        t
                    };
                    NamedFrame { source: x.source().map(bound), name: bound(x.function), inlined: x.inlined, frame: n }
                })),
                None => out.push(NamedFrame::plain(format!("{base}+{off:#x}"), n)),
            }
        }
        out
    }
}

/// A frame name as folded stacks hold it, one rule for every frame (command names, functions,
/// files): a backslash is written `\\`, a `;` (which separates frames) `\x3b`, and control
/// characters as terminals show them ([`latscope_event::escape::escape_controls`]: `\n`, `\r`,
/// `\t`, `\x1b`, `\u{202e}`, ...), so that a line is one stack whatever the names hold and no
/// byte of it acts on a terminal or breaks a flame graph's XML.
pub fn folded_frame(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\x3b"),
            c => latscope_event::escape::push_escaped(&mut out, c),
        }
    }
    out
}

/// The folded stacks ("frame;frame;... count", outermost frame first), weighed by blocked time
/// in microseconds: the command name, the user frames, then the kernel frames (suffixed `_[k]`,
/// which flame graph tools color as kernel code). What flamegraph.pl, inferno and speedscope read.
pub fn folded(agg: &StackAgg, names: &mut StackNames) -> String {
    let mut lines: HashMap<String, u64> = HashMap::new();
    for (&(u, k), s) in agg.ranked() {
        let mut frames = vec![folded_frame(largest(&s.comms))];
        let mut user = names.detailed(u, StackKind::User);
        user.reverse();
        // Inlined functions marked as flame graph tools mark them (`_[i]`, drawn in aqua).
        frames.extend(user.iter().map(|f| {
            let n = folded_frame(&f.name);
            if f.inlined {
                n + "_[i]"
            } else {
                n
            }
        }));
        if agg.on_cpu && !agg.samples {
            // The call itself stands for the kernel code it ran.
            frames.push(format!("{}_[k]", folded_frame(largest(&s.ops))));
        } else if !(agg.samples && k == 0) {
            // (a sample in user code has no kernel stack)
            let mut kernel = names.frames(k, StackKind::Kernel);
            kernel.reverse();
            // Functions without their offsets: one box per function, as flame graphs draw them.
            frames.extend(kernel.iter().map(|f| format!("{}_[k]", folded_frame(f.split('+').next().unwrap_or(f)))));
        }
        let us = s.blocked_ns.div_ceil(1000);
        *lines.entry(frames.join(";")).or_default() += us;
    }
    let mut v: Vec<(String, u64)> = lines.into_iter().collect();
    v.sort();
    let mut out = String::new();
    for (stack, us) in v {
        let _ = writeln!(out, "{stack} {us}");
    }
    out
}

/// The function an on-CPU sample was taken in: its innermost frame, the kernel's (`name
/// [kernel]`) for a sample in the kernel (`k`, its kernel stack, not 0), else its user stack's.
pub fn sample_leaf(names: &mut StackNames, u: u32, k: u32) -> String {
    let leaf = if k != 0 {
        let f = names.frames(k, StackKind::Kernel);
        f.first().map(|f| format!("{} [kernel]", f.split('+').next().unwrap_or(f)))
    } else {
        names.detailed(u, StackKind::User).first().map(|f| f.name.clone())
    };
    leaf.unwrap_or_else(|| "[unknown]".to_string())
}

/// The `n` functions the most CPU time was sampled in (self time, `record --profile`): each
/// sample's innermost frame, the kernel's (`name [kernel]`) for a sample in the kernel, with the
/// CPU time (ns) of their samples, largest first.
pub fn hottest_functions(agg: &StackAgg, names: &mut StackNames, n: usize) -> Vec<(String, u64)> {
    let mut by: HashMap<String, u64> = HashMap::new();
    for (&(u, k), s) in agg.ranked() {
        *by.entry(sample_leaf(names, u, k)).or_default() += s.blocked_ns;
    }
    let mut v: Vec<(String, u64)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

/// On-CPU samples as JSON: their count, the CPU time they stand for, and `hot` (from
/// [`hottest_functions`]).
pub fn samples_json(agg: &StackAgg, hot: &[(String, u64)]) -> Value {
    json!({
        "samples": agg.counted(),
        "cpu_ns": agg.total_ns,
        "functions": hot.iter().map(|(f, ns)| json!({"function": f, "cpu_ns": ns})).collect::<Vec<_>>(),
    })
}

/// On-CPU samples and blocked time in one set of folded stacks (a hot/cold flame graph): each
/// stack's first frame says which it is, `[on CPU]` or `[blocked]`, both in microseconds.
pub fn hot_cold_folded(on_cpu: &StackAgg, blocked: &StackAgg, names: &mut StackNames) -> String {
    let mut out = String::new();
    for (root, agg) in [("[on CPU]", on_cpu), ("[blocked]", blocked)] {
        for line in folded(agg, names).lines() {
            let _ = writeln!(out, "{root};{line}");
        }
    }
    out
}

/// An interactive flame graph (SVG, inferno) of folded stacks weighed in microseconds.
pub fn flame_svg(folded: &str, title: &str) -> Result<Vec<u8>, String> {
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = title.to_string();
    opt.count_name = "us blocked".to_string();
    opt.deterministic = true;
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opt, folded.lines(), &mut out).map_err(|e| e.to_string())?;
    // Names come from the traced system: what is written must be XML a browser opens.
    crate::svg::check_xml(&out).map_err(|e| format!("the flame graph is not valid SVG ({e}); nothing was written"))?;
    Ok(out)
}

/// The `n` stacks with the most blocked time (or, for on-CPU samples, CPU time), as text.
pub fn render_text(agg: &StackAgg, names: &mut StackNames, n: usize) -> String {
    let mut s = String::new();
    let left_out = |sep: &str, how: &str| {
        if agg.waits_left_out > 0 {
            format!("{sep} {} idle waits left out{how}", agg.waits_left_out)
        } else {
            String::new()
        }
    };
    if agg.by_stack.is_empty() {
        let _ = match agg.samples {
            true => writeln!(
                s,
                "no on-CPU sample ({} without a stack): record with `latscope record --profile HZ`",
                agg.without_stack
            ),
            false => writeln!(
                s,
                "no blocked call carries a stack ({} without one{}): record with `latscope record --why --stacks`",
                agg.without_stack,
                left_out(",", ": --waits counts them")
            ),
        };
        return s;
    }
    // What the weight is, what a unit of it is, and how its row reads.
    let (what, unit, (sep, of), kernel_title) = match agg.samples {
        true => ("On-CPU time", "samples", (",", "of"), "kernel:"),
        false => ("Blocked time", "calls", (":", "by"), "kernel (where it blocked):"),
    };
    let _ = writeln!(
        s,
        "{what} by stack: {} in {} {unit} ({} distinct stacks){}",
        fmt_ns(agg.total_ns),
        agg.counted(),
        agg.by_stack.len(),
        left_out(";", " (--waits counts them)")
    );
    for (rank, (&(u, k), st)) in agg.ranked().into_iter().take(n).enumerate() {
        let share = 100.0 * st.blocked_ns as f64 / agg.total_ns.max(1) as f64;
        let _ = writeln!(
            s,
            "\n{}. {} {} ({share:.1}%) in {} {unit}{sep} {} {of} {}",
            rank + 1,
            fmt_ns(st.blocked_ns),
            if agg.samples { "on CPU" } else { "blocked" },
            st.calls,
            largest(&st.ops),
            clean(largest(&st.comms))
        );
        // (a sample taken in user code has no kernel stack)
        let kernel = if agg.samples && k == 0 { Vec::new() } else { names.frames(k, StackKind::Kernel) };
        if !(agg.samples && kernel.is_empty()) {
            let _ = writeln!(s, "   {kernel_title}");
            for f in kernel {
                let _ = writeln!(s, "     {}", clean(&f));
            }
        }
        let _ = writeln!(s, "   user:");
        write_user_frames(&mut s, names, u);
    }
    for note in names.all_notes() {
        let _ = writeln!(s, "\nnote: {}", clean(&note));
    }
    s
}

/// The user frames of stack `u`, one a line, with their source lines and inlined functions
/// marked.
pub fn write_user_frames(s: &mut String, names: &mut StackNames, u: u32) {
    for f in names.detailed(u, StackKind::User) {
        let _ = match (&f.source, f.inlined) {
            (Some(src), true) => writeln!(s, "     {}  ({src}, inlined)", clean(&f.name)),
            (Some(src), false) => writeln!(s, "     {}  ({src})", clean(&f.name)),
            (None, true) => writeln!(s, "     {}  (inlined)", clean(&f.name)),
            (None, false) => writeln!(s, "     {}", clean(&f.name)),
        };
    }
}

/// The frames of stack `id` as JSON objects: `name`, `source` (`file:line`, null when
/// unknown), `inlined`.
pub fn frames_json(names: &mut StackNames, id: u32, kind: StackKind) -> Value {
    Value::Array(
        names
            .detailed(id, kind)
            .into_iter()
            .map(|f| json!({"name": f.name, "source": f.source, "inlined": f.inlined}))
            .collect(),
    )
}

/// The `n` stacks with the most blocked time, as JSON.
pub fn to_json(agg: &StackAgg, names: &mut StackNames, n: usize) -> Value {
    let stacks: Vec<Value> = agg
        .ranked()
        .into_iter()
        .take(n)
        .map(|(&(u, k), st)| {
            let ke = names.table().get(k).cloned();
            let ue = names.table().get(u).cloned();
            json!({
                "blocked_ns": st.blocked_ns,
                "share": st.blocked_ns as f64 / agg.total_ns.max(1) as f64,
                "calls": st.calls,
                "op": largest(&st.ops),
                "comm": largest(&st.comms),
                "kernel": names.frames(k, StackKind::Kernel),
                "kernel_truncated": ke.as_ref().is_some_and(|e| e.truncated),
                "kernel_missing": ke.and_then(|e| e.missing),
                "user": names.frames(u, StackKind::User),
                "user_frames": frames_json(names, u, StackKind::User),
                "user_truncated": ue.as_ref().is_some_and(|e| e.truncated),
                "user_cut": ue.as_ref().and_then(|e| e.cut.clone()),
                "user_missing": ue.and_then(|e| e.missing),
            })
        })
        .collect();
    if agg.samples {
        // On-CPU samples: the same shape, their CPU time where blocked time would be.
        let stacks: Vec<Value> = stacks
            .into_iter()
            .map(|mut v| {
                if let Some(o) = v.as_object_mut() {
                    let ns = o.remove("blocked_ns").unwrap_or_default();
                    o.insert("on_cpu_ns".into(), ns);
                    let c = o.remove("calls").unwrap_or_default();
                    o.insert("samples".into(), c);
                    let op = o.remove("op").unwrap_or_default();
                    o.insert("in".into(), op);
                }
                v
            })
            .collect();
        return json!({
            "total_on_cpu_ns": agg.total_ns,
            "samples_without_stack": agg.without_stack,
            "stacks": stacks,
            "notes": names.all_notes(),
        });
    }
    json!({
        "total_blocked_ns": agg.total_ns,
        "calls_without_stack": agg.without_stack,
        "idle_waits_left_out": agg.waits_left_out,
        "stacks": stacks,
        "notes": names.all_notes(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{Event, Frame};

    fn call(nr: &str, lat: u64, cpu: u64, lock: u64, k: u32, u: u32) -> Event {
        Event {
            kind: EventKind::Syscall as u8,
            nr: latscope_event::syscall_nr(nr).unwrap(),
            lat,
            why_cpu: cpu,
            why_lock: lock,
            kstack: k,
            ustack: u,
            comm: "app".into(),
            ..Default::default()
        }
    }

    #[test]
    fn blocked_time_by_stack_folds_outermost_first() {
        let mut t = StackTable::default();
        let k = StackEntry {
            id: 1,
            kind: StackKind::Kernel,
            frames: ["schedule+0x23", "futex_wait+0x67"]
                .iter()
                .map(|s| Frame { sym: Some(s.to_string()), ..Default::default() })
                .collect(),
            truncated: false,
            missing: None,
            cut: None,
        };
        let u = StackEntry {
            id: 2,
            kind: StackKind::User,
            frames: vec![],
            truncated: false,
            missing: Some("gone".into()),
            cut: None,
        };
        t.add_lines(&(k.to_line() + &u.to_line())).unwrap();
        let mut b = EventBatch::default();
        b.push(&call("futex", 3_000_000, 1_000_000, 2_000_000, 1, 2));
        b.push(&call("futex", 1_000_000, 0, 1_000_000, 1, 2));
        b.push(&call("read", 5_000, 5_000, 0, 0, 0)); // never blocked: no weight
        let rows: Vec<u32> = (0..b.len() as u32).collect();
        let mut agg = StackAgg { with_waits: true, ..Default::default() };
        agg.add(&b, &rows);
        assert_eq!(agg.total_ns, 3_000_000);
        let mut names = StackNames::new(t, None);
        let f = folded(&agg, &mut names);
        assert_eq!(f, "app;[user stack missing: gone];futex_wait_[k];schedule_[k] 3000\n");
        // On CPU: by user stack and call.
        let mut cpu = StackAgg { with_waits: true, on_cpu: true, ..Default::default() };
        cpu.add(&b, &rows);
        assert_eq!((cpu.total_ns, cpu.without_stack), (1_000_000, 1));
        let f = folded(&cpu, &mut names);
        assert_eq!(f, "app;[user stack missing: gone];futex_[k] 1000\n");
        // Idle waits are left out unless asked for.
        let mut agg = StackAgg::default();
        agg.add(&b, &rows);
        assert_eq!((agg.total_ns, agg.waits_left_out), (0, 2));
    }

    /// A library named to attack terminals and parsers, as a stack's user frame and a command name.
    const EVIL: &str = "lib/\x1b[31mEVIL\x1b]0;t\x07\nname.so";

    fn hostile_table(file: &str) -> (StackAgg, StackNames) {
        let mut t = StackTable::default();
        let k = StackEntry {
            id: 1,
            kind: StackKind::Kernel,
            frames: vec![Frame { sym: Some("sched;ule\u{202e}+0x23".into()), ..Default::default() }],
            truncated: false,
            missing: None,
            cut: None,
        };
        let u = StackEntry {
            id: 2,
            kind: StackKind::User,
            frames: vec![
                Frame { addr: 1, file: Some(file.into()), off: Some(0x10), ..Default::default() },
                Frame { addr: 2, file: Some("/x.so".into()), off: Some(0x20), deleted: true, ..Default::default() },
            ],
            truncated: false,
            missing: None,
            cut: None,
        };
        t.add_lines(&(k.to_line() + &u.to_line())).unwrap();
        let mut b = EventBatch::default();
        let mut e = call("read", 3_000_000, 0, 3_000_000, 1, 2);
        e.comm = "a;b\x1b\\c".into();
        b.push(&e);
        let mut agg = StackAgg { with_waits: true, ..Default::default() };
        agg.add(&b, &[0]);
        (agg, StackNames::new(t, None))
    }

    /// `why --folded -` printed raw ESC and BEL bytes and let a `;` or a newline in a name split a
    /// frame: one stack is one line, every frame escaped by one rule.
    #[test]
    fn folded_stacks_escape_names_one_stack_per_line() {
        let (agg, mut names) = hostile_table(&format!("/tmp/{EVIL}"));
        let f = folded(&agg, &mut names);
        assert!(!f.bytes().any(|b| b < 0x20 && b != b'\n'), "{f:?}");
        assert!(!f.chars().any(|c| c != '\n' && latscope_event::escape::is_control(c)), "{f:?}");
        let lines: Vec<&str> = f.lines().collect();
        assert_eq!(lines.len(), 1, "{f:?}");
        let (stack, us) = lines[0].rsplit_once(' ').unwrap();
        assert_eq!(us, "3000");
        let frames: Vec<&str> = stack.split(';').collect();
        assert_eq!(
            frames,
            [
                "a\\x3bb\\x1b\\\\c",
                "x.so (deleted)+0x20",
                "\\x1b[31mEVIL\\x1b]0\\x3bt\\x07\\nname.so+0x10",
                "sched\\x3bule\\u{202e}_[k]"
            ],
            "{f:?}"
        );
        assert_eq!(folded_frame("a\\b;c\nd"), "a\\\\b\\x3bc\\nd");
    }

    /// `why --flame` wrote SVG that was not well-formed XML from such names: it is now, and a
    /// document that is not would be refused rather than written.
    #[test]
    fn flame_graphs_of_hostile_names_are_well_formed_xml() {
        let (agg, mut names) = hostile_table(&format!("/tmp/{EVIL}"));
        let svg = flame_svg(&folded(&agg, &mut names), "t").unwrap();
        crate::svg::check_xml(&svg).unwrap();
        let text = String::from_utf8(svg).unwrap();
        assert!(text.contains("x.so (deleted)+0x20"), "{text}");
        // Raw names fed to inferno directly would not pass the check.
        let raw = format!("{};x {}\n", EVIL.replace(['\n', ';'], ":"), 10);
        assert!(flame_svg(&raw, "t").unwrap_err().contains("not valid SVG"));
    }

    /// A user frame's file naming a FIFO hung `why --stacks` (opening it waited for a writer):
    /// it is refused at once, and a device likewise.
    #[test]
    fn a_frame_file_naming_a_fifo_or_a_device_is_refused_without_waiting() {
        use std::os::unix::ffi::OsStrExt;
        let d = std::env::temp_dir().join(format!("latscope-stacks-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let fifo = d.join("lib.so");
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for file in [fifo.to_str().unwrap(), "/dev/zero"] {
            let (agg, mut names) = hostile_table(file);
            let text = render_text(&agg, &mut names, 5);
            assert!(text.contains("+0x10"), "{text}");
            assert!(text.contains("not a regular file ("), "{text}");
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    /// With `--binaries DIR`, a recorded path with `..` read a file outside DIR: it is refused,
    /// and a symlink inside DIR leads nowhere outside it.
    #[test]
    fn binaries_below_a_directory_never_come_from_outside_it() {
        let d = std::env::temp_dir().join(format!("latscope-stacks-root-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let root = d.join("copy");
        std::fs::create_dir_all(root.join("lib")).unwrap();
        std::fs::copy("/proc/self/exe", d.join("outside.so")).unwrap();
        std::os::unix::fs::symlink(d.join("outside.so"), root.join("lib/link.so")).unwrap();
        for (file, note) in [("/lib/../../outside.so", "`..`"), ("/lib/link.so", "not at hand")] {
            let mut t = StackTable::default();
            let u = StackEntry {
                id: 2,
                kind: StackKind::User,
                frames: vec![Frame { addr: 1, file: Some(file.into()), off: Some(0x10), ..Default::default() }],
                truncated: false,
                missing: None,
                cut: None,
            };
            t.add_lines(&u.to_line()).unwrap();
            let mut names = StackNames::new(t, Some(&root));
            let f = names.frames(2, StackKind::User);
            assert!(f[0].ends_with("+0x10"), "{file}: {f:?}");
            assert!(names.notes.iter().any(|n| n.contains(note)), "{file}: {:?}", names.notes);
        }
        let _ = std::fs::remove_dir_all(&d);
    }
    /// A binary too large to copy into memory is named from its symbol tables alone (its DWARF,
    /// and the debug files it names, are not read), with a note; one within the bound is copied
    /// and named as usual.
    #[test]
    fn a_binary_too_large_to_copy_is_named_from_its_symbol_tables() {
        // libc's clock_nanosleep, as this process maps it: its file and offset.
        let at = libc::clock_nanosleep as *const () as usize as u64;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let (file, off) = maps
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let (lo, hi) = f[0].split_once('-')?;
                let (lo, hi) = (u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi, 16).ok()?);
                (f.len() == 6 && (lo..hi).contains(&at))
                    .then(|| (f[5].to_string(), at - lo + u64::from_str_radix(f[2], 16).unwrap()))
            })
            .expect("libc's mapping");
        for copy_max in [0, MAX_COPY_BYTES] {
            let mut t = StackTable::default();
            let u = StackEntry {
                id: 3,
                kind: StackKind::User,
                // Named one byte back: the address after a call.
                frames: vec![Frame { addr: at, file: Some(file.clone()), off: Some(off + 1), ..Default::default() }],
                truncated: false,
                missing: None,
                cut: None,
            };
            t.add_lines(&u.to_line()).unwrap();
            let mut names = StackNames::new(t, None);
            names.copy_max = copy_max;
            let f = names.detailed(3, StackKind::User);
            assert_eq!(f.last().unwrap().name, "clock_nanosleep", "{copy_max}: {f:?}");
            let noted = names.notes.iter().any(|n| n.contains("too large to copy into memory"));
            assert_eq!(noted, copy_max == 0, "{:?}", names.notes);
        }
    }

    /// A user stack whose walk was cut (the recorder says where) ends in a frame saying so,
    /// outermost in the folded output; frames of a file not at hand are its offsets, with a note.
    #[test]
    fn a_cut_user_stack_says_where_it_stops() {
        let mut t = StackTable::default();
        let u = StackEntry {
            id: 1,
            kind: StackKind::User,
            frames: vec![Frame {
                addr: 0x1000,
                file: Some("/nonexistent/app".into()),
                build_id: None,
                off: Some(0x1234),
                ..Default::default()
            }],
            truncated: true,
            missing: None,
            cut: Some("after frame 1".into()),
        };
        t.add_lines(&u.to_line()).unwrap();
        let mut names = StackNames::new(t, None);
        assert_eq!(names.frames(1, StackKind::User), ["app+0x1234", "[cut short: after frame 1]"]);
        assert_eq!(names.frame_names(1, StackKind::User), ["app+0x1234"]);
        assert!(names.notes.iter().any(|n| n.contains("/nonexistent/app is not at hand")), "{:?}", names.notes);
        let mut b = EventBatch::default();
        b.push(&call("futex", 2_000_000, 0, 2_000_000, 0, 1));
        let mut agg = StackAgg { with_waits: true, ..Default::default() };
        agg.add(&b, &[0]);
        assert_eq!(folded(&agg, &mut names), "app;[cut short: after frame 1];app+0x1234;[no kernel stack]_[k] 2000\n");
    }
}

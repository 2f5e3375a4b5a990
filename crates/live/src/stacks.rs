//! The recorder's (and a streaming live session's) side of stacks (`record --why`, the
//! dashboard's `why=1`): the probes hand over stack map ids; each new
//! stack is read from its map once, its kernel frames symbolized from kallsyms and its user
//! frames normalized (file, build id, file offset) while the process still runs, deduplicated
//! into the trace's stack table, and the events' `kstack`/`ustack` rewritten to its ids.

use blazesym::normalize::{NormalizeOpts, Normalizer, Reason, UserMeta};
use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::{MaybeDefault, Pid};
use latscope_event::bounds::{MAX_STACKS, MAX_STACK_FRAMES, MAX_STACK_TABLE_BYTES};
use latscope_event::{EventBatch, EventKind, Frame, StackEntry, StackKind, Truncation};
use latscope_probe::{Probe, STACK_DEPTH};
use std::collections::HashMap;

/// Builds the stack table while recording.
pub(crate) struct StackResolver {
    /// Kernel stack map id -> table id.
    kernel: HashMap<u32, u32>,
    /// (pid, user stack map id) -> table id: user addresses mean something only in their process.
    user: HashMap<(u32, u32), u32>,
    /// An entry's content (its line with id 0) -> table id: one entry per distinct stack.
    by_content: HashMap<String, u32>,
    next: u32,
    symbolizer: Option<Symbolizer>,
    normalizer: Option<Normalizer>,
    /// Frames and JSON bytes of the table so far: it stays within what readers keep.
    frames: usize,
    bytes: usize,
    /// The entry the calls get once the table is full (created then).
    full: Option<u32>,
    /// Entries cut to their bounds, and stacks left out because the table was full.
    truncated: Truncation,
}

impl StackResolver {
    /// `warm`: stacks will come; read kallsyms now (tens of ms), not when the first stack
    /// arrives, while processes whose user stacks wait behind it may exit.
    pub(crate) fn new(warm: bool) -> StackResolver {
        let mut r = StackResolver {
            kernel: HashMap::new(),
            user: HashMap::new(),
            by_content: HashMap::new(),
            next: 1,
            symbolizer: None,
            normalizer: None,
            frames: 0,
            bytes: 0,
            full: None,
            truncated: Truncation::default(),
        };
        if warm {
            r.symbolize_kernel(&[0]);
        }
        r
    }

    /// Rewrite the stack references of events `from..` of `b` to table ids, appending the new
    /// table entries to `b.stacks`.
    pub(crate) fn resolve(&mut self, probe: &Probe, b: &mut EventBatch, from: usize) {
        // User stacks first: their processes may exit any time, kernel stacks keep.
        for i in from..b.len() {
            if b.kind[i] == EventKind::Syscall as u8 && b.ustack[i] != 0 {
                b.ustack[i] = self.user_stack(probe, b.pid[i], b.ustack[i] as i32, &mut b.stacks);
            }
        }
        for i in from..b.len() {
            if b.kind[i] == EventKind::Syscall as u8 && b.kstack[i] != 0 {
                b.kstack[i] = self.kernel_stack(probe, b.kstack[i] as i32, &mut b.stacks);
            }
        }
    }

    fn kernel_stack(&mut self, probe: &Probe, r: i32, out: &mut String) -> u32 {
        if r < 0 {
            return self.add(missing(StackKind::Kernel, r), out);
        }
        let id = (r - 1) as u32;
        if let Some(&t) = self.kernel.get(&id) {
            return t;
        }
        let e = match probe.stack(false, id) {
            Some(addrs) => {
                let truncated = addrs.len() >= STACK_DEPTH;
                let syms = self.symbolize_kernel(&addrs);
                // The frames of the capture itself (the BPF program and the tracepoint's call
                // into it) come first: where the call blocked starts after them.
                let frames: Vec<Frame> = addrs
                    .iter()
                    .zip(syms)
                    .map(|(&addr, sym)| Frame { addr, sym, ..Default::default() })
                    .skip_while(|f| f.sym.as_deref().is_some_and(is_capture_frame))
                    .collect();
                StackEntry { id: 0, kind: StackKind::Kernel, frames, truncated, missing: None }
            }
            None => gone(StackKind::Kernel, "not in the kernel's stack map when read"),
        };
        let t = self.add(e, out);
        self.kernel.insert(id, t);
        t
    }

    fn user_stack(&mut self, probe: &Probe, pid: u32, r: i32, out: &mut String) -> u32 {
        if r < 0 {
            return self.add(missing(StackKind::User, r), out);
        }
        let id = (r - 1) as u32;
        if let Some(&t) = self.user.get(&(pid, id)) {
            return t;
        }
        let e = match probe.stack(true, id) {
            Some(addrs) => {
                let truncated = addrs.len() >= STACK_DEPTH;
                match self.normalize(pid, &addrs) {
                    Some(frames) => StackEntry { id: 0, kind: StackKind::User, frames, truncated, missing: None },
                    None => gone(StackKind::User, "the process had exited before its stack was read"),
                }
            }
            None => gone(StackKind::User, "not in the user stack map when read"),
        };
        let t = self.add(e, out);
        self.user.insert((pid, id), t);
        t
    }

    /// `function+0xoff` of each address, from kallsyms.
    fn symbolize_kernel(&mut self, addrs: &[u64]) -> Vec<Option<String>> {
        let sym = self.symbolizer.get_or_insert_with(|| Symbolizer::builder().enable_code_info(false).build());
        let src = Source::Kernel(Kernel { vmlinux: MaybeDefault::None, debug_syms: false, ..Default::default() });
        match sym.symbolize(&src, Input::AbsAddr(addrs)) {
            Ok(v) => v
                .into_iter()
                .map(|s| match s {
                    Symbolized::Sym(s) => Some(format!("{}+{:#x}", s.name, s.offset)),
                    Symbolized::Unknown(_) => None,
                })
                .collect(),
            Err(_) => vec![None; addrs.len()],
        }
    }

    /// The file, build id and file offset of each address in process `pid`; `None` when the
    /// process is gone.
    fn normalize(&mut self, pid: u32, addrs: &[u64]) -> Option<Vec<Frame>> {
        let n = self
            .normalizer
            .get_or_insert_with(|| Normalizer::builder().enable_build_ids(true).enable_build_id_caching(true).build());
        let opts = NormalizeOpts { sorted_addrs: false, map_files: false, ..Default::default() };
        let out = n.normalize_user_addrs_opts(Pid::from(pid), addrs, &opts).ok()?;
        // Each file's name as the kernel has it: the normalizer drops the " (deleted)" of a file
        // removed or replaced while mapped (and of a file named so).
        let maps = std::fs::File::open(format!("/proc/{pid}/maps")).ok();
        let mut names: HashMap<usize, Option<(String, bool)>> = HashMap::new();
        let frames = addrs
            .iter()
            .zip(&out.outputs)
            // An address in no mapping is no return address: the frame-pointer walk went astray
            // (code built without frame pointers leaves data in the register). Frames from
            // there on would differ call by call and split one stack into many.
            .take_while(|&(_, &(_, meta))| {
                !matches!(out.meta.get(meta), Some(UserMeta::Unknown(u)) if u.reason == Reason::Unmapped)
            })
            .map(|(&addr, &(off, meta))| match out.meta.get(meta) {
                Some(UserMeta::Elf(elf)) => {
                    let path = elf.path.to_string_lossy().into_owned();
                    let kernel = names.entry(meta).or_insert_with(|| maps.as_ref().and_then(|m| mapped_file(m, addr)));
                    let (file, deleted) = match kernel {
                        Some((name, deleted)) => (name.clone(), *deleted),
                        // Without the ioctl (before Linux 6.11): a file no longer at its path.
                        None => (path.clone(), std::fs::symlink_metadata(&path).is_err()),
                    };
                    Frame {
                        addr,
                        file: Some(file),
                        build_id: elf.build_id.as_ref().map(|b| b.iter().map(|x| format!("{x:02x}")).collect()),
                        off: Some(off),
                        deleted,
                        ..Default::default()
                    }
                }
                _ => Frame { addr, ..Default::default() },
            })
            .collect();
        Some(frames)
    }

    /// What was cut or left out to keep the table within its bounds.
    pub(crate) fn truncation(&self) -> Truncation {
        self.truncated
    }

    /// The table id of `e`'s content, adding it (to the table and `out`) when new. Past the
    /// table's bounds (which readers apply too) a new stack gets the one entry saying the table is
    /// full, and is counted as left out.
    fn add(&mut self, mut e: StackEntry, out: &mut String) -> u32 {
        e.bound(&mut self.truncated);
        let key = e.to_line();
        if let Some(&t) = self.by_content.get(&key) {
            return t;
        }
        // Room is kept for the entry that says the table is full.
        let room = (self.next as usize) < MAX_STACKS - 1
            && self.frames + e.frames.len() <= MAX_STACK_FRAMES
            && self.bytes + key.len() + 256 <= MAX_STACK_TABLE_BYTES;
        if !room {
            self.truncated.entries += 1;
            return self.table_full(out);
        }
        e.id = self.next;
        self.next += 1;
        let line = e.to_line();
        self.frames += e.frames.len();
        self.bytes += line.len();
        out.push_str(&line);
        self.by_content.insert(key, e.id);
        e.id
    }

    /// The id of the entry that stands for the stacks left out of a full table.
    fn table_full(&mut self, out: &mut String) -> u32 {
        if let Some(id) = self.full {
            return id;
        }
        let e = StackEntry {
            id: self.next,
            kind: StackKind::User,
            frames: Vec::new(),
            truncated: false,
            missing: Some(format!(
                "the trace's stack table was full ({MAX_STACKS} stacks, {MAX_STACK_FRAMES} frames or \
                 {MAX_STACK_TABLE_BYTES} bytes): later new stacks were not kept"
            )),
        };
        self.next += 1;
        out.push_str(&e.to_line());
        self.full = Some(e.id);
        e.id
    }
}

/// The name the kernel gives the file process `pid` maps at `addr`, and whether it had been
/// deleted (removed, or replaced at its path), as `/proc/PID/maps` shows it (`PATH (deleted)`),
/// which the normalizer's path leaves out. Asked with the `PROCMAP_QUERY` ioctl (Linux 6.11), one
/// call per file, not by reading the process's whole map; `None` where it cannot tell.
fn mapped_file(maps: &std::fs::File, addr: u64) -> Option<(String, bool)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    #[repr(C)]
    #[derive(Default)]
    struct ProcmapQuery {
        size: u64,
        query_flags: u64,
        query_addr: u64,
        vma_start: u64,
        vma_end: u64,
        vma_flags: u64,
        vma_page_size: u64,
        vma_offset: u64,
        inode: u64,
        dev_major: u32,
        dev_minor: u32,
        vma_name_size: u32,
        build_id_size: u32,
        vma_name_addr: u64,
        build_id_addr: u64,
    }
    // _IOWR(PROCFS_IOCTL_MAGIC 0x9f, 17, struct procmap_query)
    const PROCMAP_QUERY: libc::c_ulong = 0xc068_6611;
    let mut name = vec![0u8; libc::PATH_MAX as usize + 16];
    let mut q = ProcmapQuery {
        size: std::mem::size_of::<ProcmapQuery>() as u64,
        query_addr: addr,
        vma_name_size: name.len() as u32,
        vma_name_addr: name.as_mut_ptr() as u64,
        ..Default::default()
    };
    // SAFETY: the kernel writes the struct (of the size it is told) and at most `vma_name_size`
    // bytes at `vma_name_addr`, both ours and alive for the call.
    let r = unsafe { libc::ioctl(maps.as_raw_fd(), PROCMAP_QUERY, &mut q as *mut ProcmapQuery) };
    if r != 0 || q.vma_name_size == 0 || q.inode == 0 {
        return None;
    }
    name.truncate(q.vma_name_size.saturating_sub(1) as usize);
    let name = String::from_utf8_lossy(&name).into_owned();
    let Some(base) = name.strip_suffix(" (deleted)") else { return Some((name, false)) };
    // A file whose name itself ends in " (deleted)" is still there, with the mapping's inode.
    let dev = libc::makedev(q.dev_major, q.dev_minor);
    let same = std::fs::metadata(&name).is_ok_and(|m| m.ino() == q.inode && m.dev() == dev);
    Some(if same { (name, false) } else { (base.to_string(), true) })
}

/// A kernel frame of the capture machinery, not of the traced call.
fn is_capture_frame(sym: &str) -> bool {
    ["bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_", "bpf_get_stack"].iter().any(|p| sym.starts_with(p))
}

fn gone(kind: StackKind, why: &str) -> StackEntry {
    StackEntry { id: 0, kind, frames: Vec::new(), truncated: false, missing: Some(why.to_string()) }
}

/// The entry of a capture that failed with `-errno`.
fn missing(kind: StackKind, r: i32) -> StackEntry {
    let why = match -r {
        libc::EEXIST => "the stack map's slot for it held another stack (a hash collision)".to_string(),
        libc::ENOMEM | libc::E2BIG => "the stack map was full".to_string(),
        libc::EFAULT => "the stack could not be read (no user stack, or its memory was not mapped)".to_string(),
        e => format!("the capture failed: {}", std::io::Error::from_raw_os_error(e)),
    };
    gone(kind, &why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Map `path` (one page) into this process; the address.
    fn map(path: &std::path::Path) -> (std::fs::File, u64) {
        let f = std::fs::File::open(path).unwrap();
        // SAFETY: a private read-only mapping of a file we opened; never unmapped (the test ends).
        let p = unsafe { libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_PRIVATE, f.as_raw_fd(), 0) };
        assert_ne!(p, libc::MAP_FAILED);
        (f, p as u64)
    }

    /// A library removed while mapped was recorded under its path as if it were still there (the
    /// normalizer drops `/proc/PID/maps`' " (deleted)"): the frame says it was deleted; a file
    /// whose name itself ends in " (deleted)" keeps its name and is not taken for deleted.
    #[test]
    fn a_file_deleted_while_mapped_is_named_as_deleted() {
        let maps = std::fs::File::open("/proc/self/maps").unwrap();
        let d = std::env::temp_dir().join(format!("latscope-mapped-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let gone = d.join("x.so");
        std::fs::write(&gone, vec![1u8; 4096]).unwrap();
        let (_f1, a1) = map(&gone);
        std::fs::remove_file(&gone).unwrap();
        let named = d.join("y.so (deleted)");
        std::fs::write(&named, vec![2u8; 4096]).unwrap();
        let (_f2, a2) = map(&named);
        match mapped_file(&maps, a1) {
            // Kernels before 6.11 lack the ioctl: the recorder falls back on the path's existence.
            None => println!("SKIPPED the PROCMAP_QUERY part: this kernel lacks the ioctl"),
            Some(got) => {
                assert_eq!(got, (gone.display().to_string(), true));
                assert_eq!(mapped_file(&maps, a2), Some((named.display().to_string(), false)));
            }
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}

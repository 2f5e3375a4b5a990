//! The recorder's (and a streaming live session's) side of stacks (`record --why`, the
//! dashboard's `why=1`): the probes hand over stack map ids; each new
//! stack is read from its map once, its kernel frames symbolized from kallsyms and its user
//! frames normalized (file, build id, file offset) while the process still runs, deduplicated
//! into the trace's stack table, and the events' `kstack`/`ustack` rewritten to its ids.

use blazesym::normalize::{NormalizeOpts, Normalizer, Reason, UserMeta};
use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::{MaybeDefault, Pid};
use latscope_event::{EventBatch, EventKind, Frame, StackEntry, StackKind};
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
                StackEntry { id: 0, kind: StackKind::Kernel, frames, truncated, missing: None, cut: None }
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
                    Some((frames, cut)) => {
                        StackEntry { id: 0, kind: StackKind::User, frames, truncated, missing: None, cut }
                    }
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

    /// The file, build id and file offset of each address in process `pid`, and where and why
    /// the frames stop early; `None` when the process is gone.
    fn normalize(&mut self, pid: u32, addrs: &[u64]) -> Option<(Vec<Frame>, Option<String>)> {
        let n = self
            .normalizer
            .get_or_insert_with(|| Normalizer::builder().enable_build_ids(true).enable_build_id_caching(true).build());
        let opts = NormalizeOpts { sorted_addrs: false, map_files: false, ..Default::default() };
        let out = n.normalize_user_addrs_opts(Pid::from(pid), addrs, &opts).ok()?;
        // An address in no mapping is no return address: the frame-pointer walk went astray
        // (code built without frame pointers leaves data in the register). Frames from there on
        // would differ call by call and split one stack into many: the stack is cut there.
        let good = out
            .outputs
            .iter()
            .take_while(
                |&&(_, meta)| !matches!(out.meta.get(meta), Some(UserMeta::Unknown(u)) if u.reason == Reason::Unmapped),
            )
            .count();
        // Said without the stray address, which differs call by call.
        let cut = (good < addrs.len()).then(|| {
            format!("the frame-pointer walk left the mapped code after frame {good} (code without frame pointers)")
        });
        let frames = addrs
            .iter()
            .zip(&out.outputs)
            .take(good)
            .map(|(&addr, &(off, meta))| match out.meta.get(meta) {
                Some(UserMeta::Elf(elf)) => Frame {
                    addr,
                    file: Some(elf.path.to_string_lossy().into_owned()),
                    build_id: elf.build_id.as_ref().map(|b| b.iter().map(|x| format!("{x:02x}")).collect()),
                    off: Some(off),
                    ..Default::default()
                },
                _ => Frame { addr, ..Default::default() },
            })
            .collect();
        Some((frames, cut))
    }

    /// The table id of `e`'s content, adding it (to the table and `out`) when new.
    fn add(&mut self, mut e: StackEntry, out: &mut String) -> u32 {
        let key = e.to_line();
        if let Some(&t) = self.by_content.get(&key) {
            return t;
        }
        e.id = self.next;
        self.next += 1;
        out.push_str(&e.to_line());
        self.by_content.insert(key, e.id);
        e.id
    }
}

/// A kernel frame of the capture machinery, not of the traced call.
fn is_capture_frame(sym: &str) -> bool {
    ["bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_", "bpf_get_stack"].iter().any(|p| sym.starts_with(p))
}

fn gone(kind: StackKind, why: &str) -> StackEntry {
    StackEntry { id: 0, kind, frames: Vec::new(), truncated: false, missing: Some(why.to_string()), cut: None }
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

//! The recorder's (and a streaming live session's) side of stacks (`record --why`, the
//! dashboard's `why=1`): the probes hand over stack keys and drain the kernel's stack maps
//! after each poll (`latscope_probe`, `bpf/why.bpf.h`); each new stack is read once, its kernel
//! frames symbolized from kallsyms and its user frames normalized (file, build id, file offset)
//! from the process's mappings while it still runs ([`latscope_probe::procmaps`], bounded),
//! deduplicated into the trace's stack table, and the events' `kstack`/`ustack` rewritten to
//! its ids.
//!
//! The table is bounded ([`MAX_STACKS`], a quarter of it per user, and the frames and bytes
//! readers keep: [`latscope_event::bounds`]), each entry is cut to its own bounds (counted in
//! [`StackResolver::truncation`]), and every stack that could not be recorded is an entry
//! saying why, counted by reason ([`StackStats::missing`]) for the recording's summary: nothing
//! is dropped silently.

use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::MaybeDefault;
use latscope_event::bounds::{MAX_STACK_FRAMES, MAX_STACK_TABLE_BYTES};
use latscope_event::{EventBatch, EventKind, Frame, StackEntry, StackKind, Truncation};
use latscope_probe::procmaps::{Gone, Normalized, UserAddr};
use latscope_probe::{Probe, STACK_DEPTH};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// Distinct stacks a trace's table holds at most; each user (uid) may add a quarter of them.
/// Past that, or past the frames and bytes readers keep of a table
/// ([`MAX_STACK_FRAMES`], [`MAX_STACK_TABLE_BYTES`]), new stacks are missing ("the trace's
/// stack table was full"). Readers keep more stacks than this
/// ([`latscope_event::bounds::MAX_STACKS`]).
pub const MAX_STACKS: u32 = 1 << 16;
/// (pid, key) pairs remembered; the memory starts over past it (the table keeps its ids).
const MAX_USER_KEYS: usize = 1 << 20;

/// What the stack table did (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackStats {
    /// Distinct entries in the table (missing ones included).
    pub entries: u64,
    /// Stack references of events that are missing, by reason.
    pub missing: latscope_trace::StacksMissing,
    /// Reads of processes' /proc maps, and what their bounds refused.
    pub maps: latscope_probe::procmaps::MapsStats,
    /// `--call-graph dwarf`: user stacks unwound from their copies, and of those the ones cut
    /// short (the copy ended, or no unwind information).
    pub unwound: (u64, u64),
    /// `--call-graph dwarf`: user stacks with no copy beside them (the ring buffer was busy, or
    /// the stack could not be read), walked by frame pointers only.
    pub fp_only: u64,
}

/// Why a stack is missing: the summary's key and the table entry's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missing {
    Collision,
    SwitchUnseen,
    MapFull,
    UserQuota,
    Unreadable,
    Capture(i32),
    NotHeld,
    Exited,
    Execd,
    TableFull,
}

impl Missing {
    fn of_errno(e: i32) -> Missing {
        match e {
            libc::EEXIST => Missing::Collision,
            libc::ESRCH => Missing::SwitchUnseen,
            libc::ENOMEM | libc::E2BIG => Missing::MapFull,
            libc::EDQUOT => Missing::UserQuota,
            libc::EFAULT => Missing::Unreadable,
            e => Missing::Capture(e),
        }
    }
    fn count(self, m: &mut latscope_trace::StacksMissing) {
        let n = match self {
            Missing::Collision => &mut m.hash_collision,
            Missing::MapFull => &mut m.map_full,
            Missing::UserQuota => &mut m.user_quota,
            Missing::Unreadable => &mut m.unreadable,
            Missing::Capture(_) | Missing::SwitchUnseen => &mut m.capture_failed,
            Missing::NotHeld => &mut m.not_held,
            Missing::Exited | Missing::Execd => &mut m.process_exited,
            Missing::TableFull => &mut m.table_full,
        };
        *n += 1;
    }
    fn words(self) -> String {
        match self {
            Missing::Collision => "the stack map held another stack under its hash (a hash collision)".into(),
            Missing::MapFull => "the stack map was full".into(),
            Missing::UserQuota => "its user had stored more new stacks than its share of the stack map since the \
                                   recorder last read it"
                .into(),
            Missing::Unreadable => "the stack could not be read (no user stack, or its memory was not mapped)".into(),
            Missing::Capture(e) => format!("the capture failed: {}", std::io::Error::from_raw_os_error(e)),
            Missing::SwitchUnseen => "the kernel did not report the thread's switch back onto a CPU, where the \
                                      kernel stack of its wait is read"
                .into(),
            Missing::NotHeld => "its frames were no longer held when its event was read".into(),
            Missing::Exited => "the process had exited before its stack was read".into(),
            Missing::Execd => "the process had run another program (exec) before its stack was read".into(),
            Missing::TableFull => {
                format!(
                    "the trace's stack table was full ({MAX_STACKS} stacks, {} per user, {MAX_STACK_FRAMES} \
                     frames or {MAX_STACK_TABLE_BYTES} bytes)",
                    MAX_STACKS / 4
                )
            }
        }
    }
}

/// Builds the stack table while recording.
pub(crate) struct StackResolver {
    /// Kernel stack key -> table id.
    kernel: HashMap<u64, u32>,
    /// pid -> (its generation, user stack key -> table id): user addresses mean something only
    /// in their process and its image (a new generation after an exec; forgotten at its exit).
    user: HashMap<u32, (u32, HashMap<u64, u32>)>,
    user_keys: usize,
    /// A 128-bit hash of an entry's content (its line with id 0) -> table id: one entry per
    /// distinct stack, without keeping every line.
    by_content: HashMap<u128, u32>,
    /// Entries each user added.
    per_uid: HashMap<u32, u32>,
    next: u32,
    missing: latscope_trace::StacksMissing,
    symbolizer: Option<Symbolizer>,
    /// Frames and JSON bytes of the table so far: it stays within what readers keep.
    frames: usize,
    bytes: usize,
    /// Entries cut to their bounds.
    truncated: Truncation,
    /// `--call-graph dwarf`: unwinds the copies of user stacks sent beside them.
    unwinder: Option<latscope_stacks::unwind::UserUnwinder>,
    /// (pid, generation, frame-pointer key) -> the table id of the stack last unwound from a
    /// copy beside that key: a stack with that key and no copy (the probes copy a thread's
    /// stack again only when it changed, another key or depth; and not while the ring buffer
    /// is busy) is that stack, not a second, shorter one from its frame pointers.
    unwound_keys: HashMap<(u32, u32, u64), u32>,
    fp_only: u64,
}

impl StackResolver {
    /// `warm`: stacks will come; read kallsyms now (tens of ms), not when the first stack
    /// arrives, while processes whose user stacks wait behind it may exit.
    /// `dwarf`: user stacks come with copies to unwind (`--call-graph dwarf`).
    pub(crate) fn new(warm: bool, dwarf: bool) -> StackResolver {
        let mut r = StackResolver {
            kernel: HashMap::new(),
            user: HashMap::new(),
            user_keys: 0,
            by_content: HashMap::new(),
            per_uid: HashMap::new(),
            next: 1,
            missing: Default::default(),
            symbolizer: None,
            frames: 0,
            bytes: 0,
            truncated: Truncation::default(),
            unwinder: dwarf.then(latscope_stacks::unwind::UserUnwinder::new),
            unwound_keys: HashMap::new(),
            fp_only: 0,
        };
        if warm {
            r.symbolize_kernel(&[0]);
        }
        r
    }

    /// What was cut from entries to keep each within its bounds (frames, names).
    pub(crate) fn truncation(&self) -> Truncation {
        self.truncated
    }

    /// What the table did so far.
    pub(crate) fn stats(&self, probe: &Probe) -> StackStats {
        StackStats {
            entries: u64::from(self.next - 1),
            missing: self.missing,
            maps: probe.maps_stats(),
            unwound: self.unwinder.as_ref().map_or((0, 0), |u| u.stats),
            fp_only: self.fp_only,
        }
    }

    /// Rewrite the stack references of events `from..` of `b` (those of the probe's last poll)
    /// to table ids, appending the new table entries to `b.stacks`.
    pub(crate) fn resolve(&mut self, probe: &Probe, b: &mut EventBatch, from: usize) {
        self.resolve_within(probe, b, from, usize::MAX);
    }

    /// Like [`StackResolver::resolve`], event by event, stopping before an event (not the
    /// batch's first) once the batch's metadata (its new stack entries and cgroups) has
    /// reached `budget` bytes; returns where it stopped (`b.len()`: done). A block's metadata
    /// stays within what readers take whatever the stacks (the recorder cuts the block there).
    pub(crate) fn resolve_within(&mut self, probe: &Probe, b: &mut EventBatch, from: usize, budget: usize) -> usize {
        if from == 0 {
            self.preload_binaries(probe);
        }
        for i in from..b.len() {
            if i > 0 && b.stacks.len() + b.cgroups.len() >= budget {
                self.forget_changed(probe);
                return i;
            }
            // Calls, and on-CPU samples (whose stacks are taken at their time).
            let sample = b.kind[i] == EventKind::Proc as u8 && b.nr[i] == latscope_event::ProcOp::Sample as u16;
            if b.kind[i] != EventKind::Syscall as u8 && !sample {
                continue;
            }
            // User stacks first: their processes may exit any time, kernel stacks keep.
            if b.ustack[i] != 0 {
                // The stack is taken at the call's exit.
                let at = b.ts[i].saturating_add(b.lat[i]);
                b.ustack[i] = self.user_stack(probe, (b.pid[i], b.uid[i], at), true, b.ustack[i], &mut b.stacks);
            }
            if b.kstack[i] != 0 {
                b.kstack[i] = self.kernel_stack(probe, b.uid[i], b.kstack[i], &mut b.stacks);
            }
            // The waker's, where it ended the wait: read in its thread's /proc entry (its
            // process's maps), the waker's process not being recorded; in the table under
            // the waiting call's user.
            if b.waker_ustack[i] != 0 {
                let at = b.ts[i].saturating_add(b.lat[i]);
                b.waker_ustack[i] =
                    self.user_stack(probe, (b.waker_tid[i], b.uid[i], at), false, b.waker_ustack[i], &mut b.stacks);
            }
        }
        self.forget_changed(probe);
        b.len()
    }

    /// Processes that exited or exec'd: their pids may be another process's, or image, from
    /// now on.
    fn forget_changed(&mut self, probe: &Probe) {
        for pid in probe.maps_changed() {
            self.forget_user(pid);
            if let Some(u) = &mut self.unwinder {
                u.forget(pid);
            }
        }
    }

    fn missing(&mut self, kind: StackKind, why: Missing, out: &mut String) -> u32 {
        why.count(&mut self.missing);
        let e = StackEntry { id: 0, kind, frames: Vec::new(), truncated: false, missing: Some(why.words()), cut: None };
        self.add(e, u32::MAX, out)
    }

    fn kernel_stack(&mut self, probe: &Probe, uid: u32, r: u32, out: &mut String) -> u32 {
        if (r as i32) < 0 {
            return self.missing(StackKind::Kernel, Missing::of_errno(-(r as i32)), out);
        }
        let Some((key, _)) = probe.stack_key(r) else {
            return self.missing(StackKind::Kernel, Missing::NotHeld, out);
        };
        if let Some(&t) = self.kernel.get(&key) {
            return t;
        }
        let Some(addrs) = probe.stack_frames(false, key) else {
            return self.missing(StackKind::Kernel, Missing::NotHeld, out);
        };
        let truncated = addrs.len() >= STACK_DEPTH;
        let syms = self.symbolize_kernel(&addrs);
        // The frames of the capture itself (the BPF program and the tracepoint's call into it)
        // come first: where the call blocked starts after them.
        let frames: Vec<Frame> = addrs
            .iter()
            .zip(syms)
            .map(|(&addr, sym)| Frame { addr, sym, ..Default::default() })
            .skip_while(|f| f.sym.as_deref().is_some_and(is_capture_frame))
            .collect();
        let e = StackEntry { id: 0, kind: StackKind::Kernel, frames, truncated, missing: None, cut: None };
        let t = self.add(e, uid, out);
        if t != 0 {
            self.kernel.insert(key, t);
            return t;
        }
        self.missing(StackKind::Kernel, Missing::TableFull, out)
    }

    fn forget_user(&mut self, pid: u32) {
        if let Some((_, m)) = self.user.remove(&pid) {
            self.user_keys -= m.len();
        }
    }

    /// The table id of the user stack `r` of an event of process `pid` (user `uid`) taken at
    /// `at` ns; `own`: the event's own stack (not its waker's, which has no copy).
    fn user_stack(
        &mut self,
        probe: &Probe,
        (pid, uid, at): (u32, u32, u64),
        own: bool,
        r: u32,
        out: &mut String,
    ) -> u32 {
        if (r as i32) < 0 {
            return self.missing(StackKind::User, Missing::of_errno(-(r as i32)), out);
        }
        let Some((key, gen)) = probe.stack_key(r) else { return self.missing(StackKind::User, Missing::NotHeld, out) };
        if self.unwinder.is_some() && own {
            match probe.stack_copy(r) {
                Some(c) => {
                    if let Some(t) = self.unwound_stack(probe, (pid, uid, at), gen, &c, out) {
                        if self.unwound_keys.len() >= MAX_USER_KEYS {
                            self.unwound_keys.clear();
                        }
                        self.unwound_keys.insert((pid, gen, key), t);
                        return t;
                    }
                }
                None => match self.unwound_keys.get(&(pid, gen, key)) {
                    Some(&t) => return t,
                    None => self.fp_only += 1,
                },
            }
        }
        if let Some(&t) = self.user.get(&pid).filter(|(g, _)| *g == gen).and_then(|(_, m)| m.get(&key)) {
            return t;
        }
        let Some(addrs) = probe.stack_frames(true, key) else {
            return self.missing(StackKind::User, Missing::NotHeld, out);
        };
        let truncated = addrs.len() >= STACK_DEPTH;
        let norm = match probe.normalize_user(pid, gen, at, &addrs) {
            Ok(n) if n.verified => n,
            // The process is gone, or its maps could not be read again for a library loaded
            // since they were, but the kernel named the stack's frames as files when it exited
            // or exec'd (Linux 5.17 and later).
            res => match probe.user_stack_files(key) {
                Some(mut files) => {
                    files.resize(addrs.len(), UserAddr::Unmapped);
                    Normalized { addrs: files, verified: true }
                }
                None => match res {
                    Ok(n) => n,
                    Err(Gone::Exited) => return self.missing(StackKind::User, Missing::Exited, out),
                    Err(Gone::Execd) => return self.missing(StackKind::User, Missing::Execd, out),
                },
            },
        };
        // What the bounds kept from being read or checked may be named later: not kept.
        let complete = norm.verified && !norm.addrs.contains(&UserAddr::Unknown);
        let norm = norm.addrs;
        // An address in no mapping is no return address: the frame-pointer walk went astray
        // (code built without frame pointers leaves data in the register). Frames from there on
        // would differ call by call and split one stack into many: the stack is cut there, and
        // says so (without the stray address, which differs call by call).
        let good = norm.iter().take_while(|a| **a != UserAddr::Unmapped).count();
        let cut = (good < norm.len()).then(|| {
            format!("the frame-pointer walk left the mapped code after frame {good} (code without frame pointers)")
        });
        let frames: Vec<Frame> = addrs.iter().zip(norm).take(good).map(|(&addr, a)| user_frame(addr, a)).collect();
        let e = StackEntry { id: 0, kind: StackKind::User, frames, truncated, missing: None, cut };
        let t = self.add(e, uid, out);
        if t == 0 {
            return self.missing(StackKind::User, Missing::TableFull, out);
        }
        if complete {
            if self.user_keys >= MAX_USER_KEYS {
                self.user.clear();
                self.user_keys = 0;
            }
            let slot = self.user.entry(pid).or_insert_with(|| (gen, HashMap::new()));
            if slot.0 != gen {
                self.user_keys -= slot.1.len();
                *slot = (gen, HashMap::new());
            }
            if slot.1.insert(key, t).is_none() {
                self.user_keys += 1;
            }
        }
        t
    }

    /// `--call-graph dwarf`: the binaries of the processes that exec'd or mapped a file in the
    /// last poll, read now, while they run (a process that exits right after its call is gone
    /// when its stack is unwound, and its files may be unreachable by their paths).
    fn preload_binaries(&mut self, probe: &Probe) {
        if self.unwinder.is_none() {
            return;
        }
        for pid in probe.maps_reread() {
            if let Some((version, maps)) = probe.file_mappings(pid, 0, 0) {
                let maps = mapped(pid, maps);
                if let Some(u) = self.unwinder.as_mut() {
                    u.preload(pid, version, &maps);
                }
            }
        }
    }

    /// The table id of the user stack unwound from copy `c` (`--call-graph dwarf`); `None`: not
    /// unwound (the process is gone, or its maps unread), the frame-pointer stack stands.
    fn unwound_stack(
        &mut self,
        probe: &Probe,
        (pid, uid, at): (u32, u32, u64),
        gen: u32,
        c: &latscope_probe::UserCopy,
        out: &mut String,
    ) -> Option<u32> {
        let (version, maps) = probe.file_mappings(pid, c.ip, at)?;
        let maps = mapped(pid, maps);
        let copy = latscope_stacks::unwind::StackCopy { ip: c.ip, sp: c.sp, bp: c.bp, stack: &c.stack };
        let mut w = self.unwinder.as_mut()?.unwind(pid, version, &maps, copy);
        // An unwinding that ended in code none of the maps holds (the maps were read before
        // the dynamic loader mapped that library, and the unwinder fell back to a frame
        // pointer that said "end") is tried again on maps read since, or said cut short.
        let outside = |maps: &[latscope_stacks::unwind::Mapped], w: &latscope_stacks::unwind::Unwound| {
            let last = match w.frames.len() {
                0 | 1 => return None,
                _ => w.frames[w.frames.len() - 1].saturating_sub(1),
            };
            // (maps in address order, as /proc lists them)
            let i = maps.partition_point(|m| m.start <= last);
            let held = i > 0 && maps[i - 1].exec && last < maps[i - 1].end;
            (w.cut.is_none() && !held).then_some(last)
        };
        if let Some(last) = outside(&maps, &w) {
            w = match probe.file_mappings(pid, last, at) {
                Some((v, again)) if v != version => {
                    let again = mapped(pid, again);
                    let w = self.unwinder.as_mut()?.unwind(pid, v, &again, copy);
                    match outside(&again, &w) {
                        Some(_) => cut_outside(w, last),
                        None => w,
                    }
                }
                _ => cut_outside(w, last),
            };
        }
        // (`None` when the process has exited or run another image since: the frame-pointer
        // stack, named by the kernel at the exit, stands)
        let norm = probe.normalize_user(pid, gen, at, &w.frames).ok().filter(|n| n.verified)?;
        let good = norm.addrs.iter().take_while(|a| **a != UserAddr::Unmapped).count();
        let cut = match (&w.cut, good < norm.addrs.len()) {
            (_, true) => Some(format!("unwinding left the mapped code after frame {good}")),
            (Some(why), _) => Some(why.clone()),
            (None, false) => None,
        };
        let frames: Vec<Frame> =
            w.frames.iter().zip(norm.addrs).take(good).map(|(&addr, a)| user_frame(addr, a)).collect();
        let e = StackEntry { id: 0, kind: StackKind::User, frames, truncated: false, missing: None, cut };
        match self.add(e, uid, out) {
            0 => Some(self.missing(StackKind::User, Missing::TableFull, out)),
            t => Some(t),
        }
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

    /// The table id of `e`'s content (cut to its bounds), adding it (to the table and `out`)
    /// when new; 0 when it is new and the table has no room for it (in all, or for user `uid`;
    /// `u32::MAX`: the entries that say a stack is missing, which are few and always fit).
    fn add(&mut self, mut e: StackEntry, uid: u32, out: &mut String) -> u32 {
        let mut cut = self.truncated;
        e.bound(&mut cut);
        let line = e.to_line();
        let key = content_hash(&line);
        if let Some(&t) = self.by_content.get(&key) {
            return t;
        }
        if uid != u32::MAX {
            // Room is kept for the entries that say why stacks are missing.
            let fits = self.frames + e.frames.len() <= MAX_STACK_FRAMES
                && self.bytes + line.len() + (64 << 10) <= MAX_STACK_TABLE_BYTES;
            let used = self.per_uid.entry(uid).or_default();
            if self.next > MAX_STACKS || *used >= MAX_STACKS / 4 || !fits {
                return 0;
            }
            *used += 1;
        }
        self.truncated = cut;
        self.frames += e.frames.len();
        self.bytes += line.len();
        e.id = self.next;
        self.next += 1;
        out.push_str(&e.to_line());
        self.by_content.insert(key, e.id);
        e.id
    }
}

/// 128 bits of SipHash over `s` (two keys): distinct contents never share one in practice.
fn content_hash(s: &str) -> u128 {
    let h = |seed: u64| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        seed.hash(&mut h);
        s.hash(&mut h);
        h.finish()
    };
    (u128::from(h(0x5eed)) << 64) | u128::from(h(0xfeed))
}

/// Process `pid`'s file mappings as the unwinder opens them: by its `map_files`, then by path.
fn mapped(pid: u32, maps: Vec<latscope_probe::procmaps::FileMapping>) -> Vec<latscope_stacks::unwind::Mapped> {
    maps.into_iter()
        .map(|m| latscope_stacks::unwind::Mapped {
            open: std::iter::once(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end).into())
                .chain(m.path.as_deref().map(Into::into))
                .collect(),
            start: m.start,
            end: m.end,
            off: m.off,
            dev: m.dev,
            ino: m.ino,
            exec: m.exec,
        })
        .collect()
}

/// `w`, said cut short at `addr`, code outside every mapping its process's maps were read with.
fn cut_outside(mut w: latscope_stacks::unwind::Unwound, addr: u64) -> latscope_stacks::unwind::Unwound {
    w.cut = Some(format!("the unwinding reached {addr:#x}, outside the code the process's maps held when read"));
    w
}

/// A user frame at `addr`, as what is mapped there.
fn user_frame(addr: u64, a: UserAddr) -> Frame {
    match a {
        UserAddr::File { path, off, build_id, deleted } => Frame {
            addr,
            file: Some(path.to_string()),
            build_id: build_id.map(|b| b.to_string()),
            off: Some(off),
            deleted,
            ..Default::default()
        },
        _ => Frame { addr, ..Default::default() },
    }
}

/// A kernel frame of the capture machinery, not of the traced call.
fn is_capture_frame(sym: &str) -> bool {
    ["bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_", "bpf_get_stack"].iter().any(|p| sym.starts_with(p))
}

//! Blocked time by stack (`why --stacks`, folded stacks, flame graphs): the calls recorded with
//! `record --why` and stacks, each weighed by its blocked time (its latency less on CPU and run
//! queue), grouped by its user stack and the kernel stack where it blocked.
//!
//! User frames are symbolized here, from the binaries at hand (blazesym, on the file offsets
//! the recording stored); kernel frames carry the names kallsyms gave them when recording.

use crate::text::clean;
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use latscope_event::units::fmt_ns;
use latscope_event::{op_name, EventBatch, EventKind, StackEntry, StackKind, StackTable};
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
    /// Calls with a breakdown that blocked but carry no stack (recorded without `--stacks`).
    pub without_stack: u64,
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
    /// Add rows `rows` of `b` (syscalls with a breakdown and blocked time).
    pub fn add(&mut self, b: &EventBatch, rows: &[u32]) {
        for &r in rows {
            let i = r as usize;
            if b.kind[i] != EventKind::Syscall as u8 {
                continue;
            }
            let t = blocked_ns(b, i);
            if t == 0 {
                continue;
            }
            if !self.with_waits && crate::waits::is_wait(b, i) {
                self.waits_left_out += 1;
                continue;
            }
            if b.kstack[i] == 0 && b.ustack[i] == 0 {
                self.without_stack += 1;
                continue;
            }
            self.total_ns += t;
            let s = self.by_stack.entry((b.ustack[i], b.kstack[i])).or_default();
            s.calls += 1;
            s.blocked_ns += t;
            *s.ops.entry(op_name(b.kind[i], b.nr[i])).or_default() += t;
            *s.comms.entry(b.comm.get(i).to_string()).or_default() += t;
        }
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
pub struct StackNames {
    table: StackTable,
    /// Where the recorded binaries are: their recorded paths are looked up under it (None: as
    /// recorded, on this machine).
    root: Option<PathBuf>,
    symbolizer: Symbolizer,
    cache: HashMap<u32, Vec<String>>,
    /// Files whose build id differs from the recorded one (not symbolized), and files missing.
    pub notes: Vec<String>,
    checked: HashMap<String, bool>,
}

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
            symbolizer: Symbolizer::builder().enable_code_info(false).build(),
            cache: HashMap::new(),
            notes: Vec::new(),
            checked: HashMap::new(),
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

    /// The frames of stack `id`, innermost first (one bracketed frame when it has none; a last
    /// `[truncated]` frame when the capture was cut).
    pub fn frames(&mut self, id: u32, kind: StackKind) -> Vec<String> {
        if let Some(v) = self.cache.get(&id) {
            return v.clone();
        }
        let e = self.table.get(id).cloned();
        let mut v = match &e {
            Some(e) if !e.frames.is_empty() => match e.kind {
                StackKind::Kernel => {
                    e.frames.iter().map(|f| f.sym.clone().unwrap_or_else(|| format!("{:#x}", f.addr))).collect()
                }
                StackKind::User => self.user_frames(e),
            },
            _ => vec![missing_frame(e.as_ref(), kind)],
        };
        if e.as_ref().is_some_and(|e| e.truncated) {
            v.push("[truncated]".into());
        }
        self.cache.insert(id, v.clone());
        v
    }

    /// Whether `file` (as recorded) is at hand with the recorded build id.
    fn usable(&mut self, file: &str, build_id: Option<&str>) -> Option<PathBuf> {
        let p = match &self.root {
            Some(r) => r.join(file.trim_start_matches('/')),
            None => PathBuf::from(file),
        };
        let key = format!("{}\0{}", p.display(), build_id.unwrap_or(""));
        let ok = *self.checked.entry(key).or_insert_with(|| {
            let found = blazesym::helper::read_elf_build_id(&p);
            match (found, build_id) {
                (Err(_), _) => {
                    self.notes.push(format!("{} is not at hand: its frames are shown as file offsets", p.display()));
                    false
                }
                (Ok(have), Some(want)) => {
                    let have: Option<String> = have.map(|b| b.iter().map(|x| format!("{x:02x}")).collect());
                    if have.as_deref() != Some(want) {
                        self.notes.push(format!(
                            "{} is not the recorded binary (build id {} here, {want} recorded): its frames are shown as file offsets",
                            p.display(),
                            have.as_deref().unwrap_or("none")
                        ));
                        return false;
                    }
                    true
                }
                (Ok(_), None) => true,
            }
        });
        ok.then_some(p)
    }

    fn user_frames(&mut self, e: &StackEntry) -> Vec<String> {
        let mut out = Vec::with_capacity(e.frames.len());
        for (n, f) in e.frames.iter().enumerate() {
            let (Some(file), Some(off)) = (&f.file, f.off) else {
                out.push(format!("{:#x}", f.addr));
                continue;
            };
            let base = file.rsplit('/').next().unwrap_or(file);
            let name = self.usable(file, f.build_id.as_deref()).and_then(|p| {
                // A return address points after its call: look up the call itself.
                let o = if n > 0 { off.saturating_sub(1) } else { off };
                let src = Source::Elf(Elf::new(p));
                match self.symbolizer.symbolize(&src, Input::FileOffset(&[o])).ok()?.pop()? {
                    Symbolized::Sym(s) => Some(s.name.to_string()),
                    Symbolized::Unknown(_) => None,
                }
            });
            out.push(name.unwrap_or_else(|| format!("{base}+{off:#x}")));
        }
        out
    }
}

/// A frame name as folded stacks can hold it (no `;`, no line break).
fn folded_frame(s: &str) -> String {
    s.replace([';', '\n', '\r'], ":")
}

/// The folded stacks ("frame;frame;... count", outermost frame first), weighed by blocked time
/// in microseconds: the command name, the user frames, then the kernel frames (suffixed `_[k]`,
/// which flame graph tools color as kernel code). What flamegraph.pl, inferno and speedscope read.
pub fn folded(agg: &StackAgg, names: &mut StackNames) -> String {
    let mut lines: HashMap<String, u64> = HashMap::new();
    for (&(u, k), s) in agg.ranked() {
        let mut frames = vec![folded_frame(largest(&s.comms))];
        let mut user = names.frames(u, StackKind::User);
        user.reverse();
        frames.extend(user.iter().map(|f| folded_frame(f)));
        let mut kernel = names.frames(k, StackKind::Kernel);
        kernel.reverse();
        // Functions without their offsets: one box per function, as flame graphs draw them.
        frames.extend(kernel.iter().map(|f| format!("{}_[k]", folded_frame(f.split('+').next().unwrap_or(f)))));
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

/// An interactive flame graph (SVG, inferno) of folded stacks weighed in microseconds.
pub fn flame_svg(folded: &str, title: &str) -> Result<Vec<u8>, String> {
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = title.to_string();
    opt.count_name = "us blocked".to_string();
    opt.deterministic = true;
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opt, folded.lines(), &mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// The `n` stacks with the most blocked time, as text.
pub fn render_text(agg: &StackAgg, names: &mut StackNames, n: usize) -> String {
    let mut s = String::new();
    if agg.by_stack.is_empty() {
        let _ = writeln!(
            s,
            "no blocked call carries a stack ({} without one{}): record with `latscope record --why --stacks`",
            agg.without_stack,
            if agg.waits_left_out > 0 {
                format!(", {} idle waits left out: --waits counts them", agg.waits_left_out)
            } else {
                String::new()
            }
        );
        return s;
    }
    let _ = writeln!(
        s,
        "Blocked time by stack: {} in {} calls ({} distinct stacks){}",
        fmt_ns(agg.total_ns),
        agg.by_stack.values().map(|x| x.calls).sum::<u64>(),
        agg.by_stack.len(),
        if agg.waits_left_out > 0 {
            format!("; {} idle waits left out (--waits counts them)", agg.waits_left_out)
        } else {
            String::new()
        }
    );
    for (rank, (&(u, k), st)) in agg.ranked().into_iter().take(n).enumerate() {
        let share = 100.0 * st.blocked_ns as f64 / agg.total_ns.max(1) as f64;
        let _ = writeln!(
            s,
            "\n{}. {} blocked ({share:.1}%) in {} calls: {} by {}",
            rank + 1,
            fmt_ns(st.blocked_ns),
            st.calls,
            largest(&st.ops),
            clean(largest(&st.comms))
        );
        let _ = writeln!(s, "   kernel (where it blocked):");
        for f in names.frames(k, StackKind::Kernel) {
            let _ = writeln!(s, "     {}", clean(&f));
        }
        let _ = writeln!(s, "   user:");
        for f in names.frames(u, StackKind::User) {
            let _ = writeln!(s, "     {}", clean(&f));
        }
    }
    for note in &names.notes {
        let _ = writeln!(s, "\nnote: {}", clean(note));
    }
    s
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
                "user_truncated": ue.as_ref().is_some_and(|e| e.truncated),
                "user_missing": ue.and_then(|e| e.missing),
            })
        })
        .collect();
    json!({
        "total_blocked_ns": agg.total_ns,
        "calls_without_stack": agg.without_stack,
        "idle_waits_left_out": agg.waits_left_out,
        "stacks": stacks,
        "notes": names.notes,
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
        };
        let u =
            StackEntry { id: 2, kind: StackKind::User, frames: vec![], truncated: false, missing: Some("gone".into()) };
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
        // Idle waits are left out unless asked for.
        let mut agg = StackAgg::default();
        agg.add(&b, &rows);
        assert_eq!((agg.total_ns, agg.waits_left_out), (0, 2));
    }
}

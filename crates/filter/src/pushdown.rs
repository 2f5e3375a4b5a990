//! The part of a filter the kernel can test cheaply, and the explanation of the split.

use crate::compile::{comm_value, range, SysSet};
use crate::fields::{Field, K_BLK, K_PROC, K_SYS};
use crate::helpers::{bytes_at, dev_string};
use crate::parser::{Check, Expr, ExprKind, Lit, Op};
use crate::resolve;
use latscope_event::{syscalls, units, EventBatch, EventKind, FdType};
use std::fmt::Write as _;

/// A set of event kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KindSet {
    /// Syscall events.
    pub syscall: bool,
    /// Block request events.
    pub block: bool,
    /// Process lifecycle events.
    pub proc: bool,
}

impl KindSet {
    /// Every kind.
    pub const ALL: KindSet = KindSet { syscall: true, block: true, proc: true };

    pub(crate) fn from_mask(m: u8) -> Self {
        Self { syscall: m & K_SYS != 0, block: m & K_BLK != 0, proc: m & K_PROC != 0 }
    }

    /// Does the set hold `kind`?
    pub fn contains(&self, kind: EventKind) -> bool {
        match kind {
            EventKind::Syscall => self.syscall,
            EventKind::Block => self.block,
            EventKind::Proc => self.proc,
        }
    }

    fn names(&self) -> String {
        let v: Vec<&str> = [(self.syscall, "syscall"), (self.block, "block"), (self.proc, "proc")]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    }
}

/// What the kernel side may test before copying an event out: each `Some` field is a necessary
/// condition of the filter, taken from a top-level `and` clause (anything under `or` or `not`
/// stays in user space). `None` means "no restriction".
///
/// The sets apply to the kinds named in their docs; process events (fork, exec, exit) are never
/// dropped, because the process table needs them. User space still evaluates the whole filter on
/// every event the kernel passes, so correctness never depends on the kernel applying any of
/// this: dropping early is only an optimisation. [`Pushdown::admits`] is the reference for what
/// the kernel test means.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pushdown {
    /// Event kinds that can match (`None`: syscall and block events both can).
    pub kinds: Option<KindSet>,
    /// Process ids (syscall and block events), sorted.
    pub pids: Option<Vec<u32>>,
    /// Thread ids (syscall and block events), sorted.
    pub tids: Option<Vec<u32>>,
    /// Command names, at most 15 bytes each (syscall and block events), sorted.
    pub comms: Option<Vec<String>>,
    /// Syscall numbers (syscall events only), sorted.
    pub syscalls: Option<Vec<u16>>,
    /// Minimum latency in ns (syscall and block events).
    pub min_latency_ns: Option<u64>,
    /// Fd types (syscall events only), sorted.
    pub fd_types: Option<Vec<FdType>>,
    /// Block devices, `major << 20 | minor` (block events only), sorted.
    pub block_devs: Option<Vec<u32>>,
    /// Disk names from `blk.disk` clauses; [`Pushdown::resolve_disks`] turns them into
    /// `block_devs` (they are not tested until then).
    pub block_disks: Option<Vec<String>>,
}

impl Pushdown {
    /// The kernel's test, simulated: `false` only for events the filter cannot match.
    pub fn admits(&self, batch: &EventBatch, row: usize) -> bool {
        let Some(&kind) = batch.kind.get(row) else { return false };
        let sys = kind == EventKind::Syscall as u8;
        if !sys && kind != EventKind::Block as u8 {
            return true;
        }
        if let Some(k) = self.kinds {
            if !(if sys { k.syscall } else { k.block }) {
                return false;
            }
        }
        let has = |set: &Option<Vec<u32>>, v: Option<&u32>| match (set, v) {
            (Some(s), Some(v)) => s.binary_search(v).is_ok(),
            (Some(_), None) => false,
            (None, _) => true,
        };
        if !has(&self.pids, batch.pid.get(row)) || !has(&self.tids, batch.tid.get(row)) {
            return false;
        }
        if let Some(comms) = &self.comms {
            let Some(c) = bytes_at(&batch.comm, row) else { return false };
            if !comms.iter().any(|n| n.as_bytes() == c) {
                return false;
            }
        }
        if let Some(min) = self.min_latency_ns {
            if batch.lat.get(row).is_none_or(|&l| l < min) {
                return false;
            }
        }
        if sys {
            if let Some(set) = &self.syscalls {
                if batch.nr.get(row).is_none_or(|nr| set.binary_search(nr).is_err()) {
                    return false;
                }
            }
            if let Some(types) = &self.fd_types {
                if batch.fd_type.get(row).is_none_or(|&t| !types.contains(&FdType::from_u8(t))) {
                    return false;
                }
            }
        } else if !has(&self.block_devs, batch.dev.get(row)) {
            return false;
        }
        true
    }

    /// Turn `block_disks` names into device numbers with `lookup` (name to `major << 20 | minor`),
    /// e.g. `|n| header.block_devices.iter().find(|d| d.name == n).map(|d| d.dev)`. If any name
    /// does not resolve, devices are left unrestricted (the user-space filter still applies).
    pub fn resolve_disks(&mut self, lookup: impl Fn(&str) -> Option<u32>) {
        let Some(names) = &self.block_disks else { return };
        let devs: Option<Vec<u32>> = names.iter().map(|n| lookup(n)).collect();
        if let Some(devs) = devs {
            intersect(&mut self.block_devs, devs);
        }
    }
}

/// Keep in `slot` only the values also in `new` (sorted, deduplicated).
fn intersect<T: Ord + Clone>(slot: &mut Option<Vec<T>>, mut new: Vec<T>) {
    new.sort();
    new.dedup();
    *slot = Some(match slot.take() {
        None => new,
        Some(old) => old.into_iter().filter(|v| new.binary_search(v).is_ok()).collect(),
    });
}

fn strs(c: &Check) -> Vec<&str> {
    c.vals
        .iter()
        .filter_map(|v| match v {
            Lit::Str(s) => Some(s.as_str()),
            _ => None,
        })
        .collect()
}

fn u32s(c: &Check) -> Vec<u32> {
    c.vals
        .iter()
        .filter_map(|v| match v {
            Lit::Num(n) => u32::try_from(*n).ok(),
            _ => None,
        })
        .collect()
}

fn short_list<T>(items: &[T], show: impl Fn(&T) -> String) -> String {
    const MAX: usize = 8;
    let mut s: Vec<String> = items.iter().take(MAX).map(show).collect();
    if items.len() > MAX {
        s.push(format!("... {} in all", items.len()));
    }
    format!("{{{}}}", s.join(", "))
}

fn syscall_label(nr: &u16) -> String {
    syscalls::syscall_name(*nr).map_or_else(|| format!("syscall_{nr}"), str::to_string)
}

/// Apply one top-level clause to `p`; returns how the kernel tests it, or why it cannot.
fn push_check(p: &mut Pushdown, c: &Check) -> Result<String, String> {
    let eq_or_in = matches!(c.op, Op::Eq | Op::In);
    let name = c.field.info().name;
    let bool_true = |c: &Check| {
        matches!((c.op, c.vals.first()), (Op::Eq, Some(Lit::Bool(true))) | (Op::Ne, Some(Lit::Bool(false))))
    };
    match c.field {
        Field::ProcPid | Field::ThreadTid if eq_or_in => {
            let mut v = u32s(c);
            v.sort_unstable();
            v.dedup();
            let how = format!(
                "{} in {}",
                if c.field == Field::ProcPid { "pid" } else { "tid" },
                short_list(&v, u32::to_string)
            );
            intersect(if c.field == Field::ProcPid { &mut p.pids } else { &mut p.tids }, v);
            Ok(how)
        }
        Field::ProcName if eq_or_in => {
            let mut v: Vec<String> = strs(c).iter().map(|s| comm_value(s).to_string()).collect();
            v.sort();
            v.dedup();
            let how = format!("comm in {}", short_list(&v, |s| format!("{s:?}")));
            intersect(&mut p.comms, v);
            Ok(how)
        }
        Field::EvtType if eq_or_in => {
            let v: Vec<u16> = strs(c).iter().filter_map(|s| resolve::evt_type(s)?.sys).collect();
            let how = format!("syscall in {} (bitmap)", short_list(&v, syscall_label));
            intersect(&mut p.syscalls, v);
            Ok(how)
        }
        Field::EvtIsIo | Field::EvtIsIoRead | Field::EvtIsIoWrite if bool_true(c) => {
            let bits = match c.field {
                Field::EvtIsIo => syscalls::SysDesc::IO,
                Field::EvtIsIoRead => syscalls::SysDesc::READ,
                _ => syscalls::SysDesc::WRITE,
            };
            let v: Vec<u16> = SysSet::with_bits(bits).iter().collect();
            let how = format!("syscall in {} (bitmap)", short_list(&v, syscall_label));
            intersect(&mut p.syscalls, v);
            Ok(how)
        }
        Field::EvtLatency | Field::BlkLatency if matches!(c.op, Op::Gt | Op::Ge | Op::Eq | Op::In) => {
            let lo = c
                .vals
                .iter()
                .filter_map(|v| match v {
                    Lit::Num(n) => Some(range(if c.op == Op::In { Op::Eq } else { c.op }, *n).0),
                    _ => None,
                })
                .min()
                .unwrap_or(0);
            let min = lo.clamp(0, i128::from(u64::MAX)) as u64;
            let new = p.min_latency_ns.map_or(min, |m| m.max(min));
            p.min_latency_ns = Some(new);
            Ok(format!("latency >= {min}ns ({})", units::fmt_ns(min)))
        }
        Field::FdType if eq_or_in => {
            let v: Vec<FdType> = strs(c).iter().filter_map(|s| resolve::fd_type(s)).map(FdType::from_u8).collect();
            let how = format!("fd type in {}", short_list(&v, |t| t.name().to_string()));
            intersect(&mut p.fd_types, v);
            Ok(how)
        }
        Field::BlkDev if eq_or_in => {
            let v: Vec<u32> = strs(c).iter().filter_map(|s| resolve::blk_dev(s)).collect();
            let how = format!("device in {}", short_list(&v, |d| dev_string(*d)));
            intersect(&mut p.block_devs, v);
            Ok(how)
        }
        Field::BlkDisk if eq_or_in => {
            let v: Vec<String> = strs(c).iter().map(|s| s.to_string()).collect();
            let how = format!("disk in {} (resolved to device numbers)", short_list(&v, String::clone));
            intersect(&mut p.block_disks, v);
            Ok(how)
        }
        Field::ProcPid
        | Field::ThreadTid
        | Field::ProcName
        | Field::EvtType
        | Field::FdType
        | Field::BlkDev
        | Field::BlkDisk
        | Field::EvtLatency
        | Field::BlkLatency
        | Field::EvtIsIo
        | Field::EvtIsIoRead
        | Field::EvtIsIoWrite => Err(format!("operator '{}' on {name} has no kernel test", c.op.name())),
        _ => Err(format!("{name} has no kernel test")),
    }
}

/// One top-level clause: its text, and how the kernel tests it or why it cannot.
type Clause = (String, Result<String, String>);

/// The push-down of a filter, with one explanation line per top-level clause.
pub(crate) fn analyze(expr: Option<&Expr>, src: &str, kinds: u8) -> (Pushdown, Vec<Clause>) {
    let mut p = Pushdown::default();
    let mut lines = Vec::new();
    let ks = KindSet::from_mask(kinds);
    if !(ks.syscall && ks.block) {
        p.kinds = Some(ks);
    }
    let Some(expr) = expr else { return (p, Vec::new()) };
    let clauses: Vec<&Expr> = match &expr.kind {
        ExprKind::And(items) => items.iter().collect(),
        _ => vec![expr],
    };
    for e in clauses {
        let text = src.get(e.start..e.end).unwrap_or("").to_string();
        let kernel = match &e.kind {
            ExprKind::Check(c) => push_check(&mut p, c),
            ExprKind::Or(_) => Err("under 'or'".into()),
            ExprKind::Not(_) => Err("under 'not'".into()),
            ExprKind::And(_) => Err("nested 'and'".into()),
        };
        lines.push((text, kernel));
    }
    (p, lines)
}

/// The explanation text of a filter.
pub(crate) fn explain(src: &str, expr: Option<&Expr>, kinds: u8) -> String {
    let mut out = String::new();
    if expr.is_none() {
        out.push_str("filter: (empty: matches every event)\nkernel: nothing to push down\n");
        return out;
    }
    let (p, lines) = analyze(expr, src, kinds);
    let _ = writeln!(out, "filter: {}", src.trim());
    out.push_str("kernel (drops events early; process events always pass):\n");
    let width = lines.iter().filter_map(|(_, k)| k.as_ref().ok()).map(|h| h.chars().count()).max().unwrap_or(0).max(24);
    match p.kinds {
        Some(k) => {
            let _ = writeln!(out, "  {:<width$}  <- whole filter", format!("event kinds: {}", k.names()));
        }
        None => {
            let _ = writeln!(out, "  {:<width$}  <- whole filter", "event kinds: syscall, block");
        }
    }
    for (text, k) in &lines {
        if let Ok(how) = k {
            let _ = writeln!(out, "  {how:<width$}  <- {text}");
        }
    }
    out.push_str("user space (the whole filter is checked on every event the kernel passes):\n");
    let kept: Vec<_> = lines.iter().filter_map(|(t, k)| k.as_ref().err().map(|why| (t, why))).collect();
    if kept.is_empty() {
        out.push_str("  no clause is left to user space alone\n");
    }
    for (text, why) in kept {
        let _ = writeln!(out, "  {text}  ({why})");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersections() {
        let mut s = None;
        intersect(&mut s, vec![3, 1, 2, 2]);
        assert_eq!(s, Some(vec![1, 2, 3]));
        intersect(&mut s, vec![2, 3, 4]);
        assert_eq!(s, Some(vec![2, 3]));
        intersect(&mut s, vec![9]);
        assert_eq!(s, Some(vec![]));
    }

    #[test]
    fn short_lists() {
        assert_eq!(short_list(&[1, 2], |v| v.to_string()), "{1, 2}");
        let many: Vec<u32> = (0..10).collect();
        assert_eq!(short_list(&many, |v| v.to_string()), "{0, 1, 2, 3, 4, 5, 6, 7, ... 10 in all}");
    }
}

//! The part of a filter the kernel can test cheaply, the part left to user space, and whether the
//! kernel's verdict is exact for each kind of event.

use crate::compile::{self, comm_value, range, SysSet};
use crate::fields::{kind_bit, Field, K_ALL, K_BLK, K_PROC, K_SYS};
use crate::helpers::{bytes_at, dev_string};
use crate::parser::{Check, Expr, ExprKind, Lit, Op};
use crate::resolve;
use latscope_event::{syscalls, units, EventBatch, EventKind, FdType};
use std::fmt::{self, Write as _};
use std::ops::Range;

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

/// How the kernel tests one top-level clause: a necessary condition of the clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelTest {
    /// The process id is one of these, sorted (`proc.pid = / in`).
    Pids(Vec<u32>),
    /// The thread id is one of these, sorted (`thread.tid = / in`). The kernel side tests no thread
    /// ids today: the set is a user-space pre-filter ([`Pushdown::admits`]).
    Tids(Vec<u32>),
    /// The command name is one of these, each at most 15 bytes, sorted (`proc.name = / in`).
    Comms(Vec<String>),
    /// The syscall number is one of these, sorted (`evt.type = / in`, `evt.is_io*`); syscall events
    /// only: block requests are not tested.
    Syscalls(Vec<u16>),
    /// The latency is at least `ns` (`evt.latency`, `blk.latency` with `>`, `>=`, `=`, `in`).
    MinLatency {
        /// The bound in ns.
        ns: u64,
        /// The clause is exactly the bound (`>`, `>=`); `=` and `in` only imply it.
        exact: bool,
    },
    /// The fd type is one of these (`fd.type = / in`); syscall events only.
    FdTypes(Vec<FdType>),
    /// The block device, `major << 20 | minor`, is one of these, sorted (`blk.dev = / in`).
    BlockDevs(Vec<u32>),
    /// The disk is one of these names (`blk.disk = / in`): tested as device numbers once
    /// [`Pushdown::resolve_disks`] has found them all (`devs`), not before.
    BlockDisks {
        /// The names, sorted.
        names: Vec<String>,
        /// Their device numbers, sorted, once resolved.
        devs: Option<Vec<u32>>,
    },
}

impl KernelTest {
    /// Does the kernel test mean exactly the clause on events of `kind`? (Only asked for kinds the
    /// clause can be false on and the filter can match.)
    fn exactness(&self, kind: EventKind) -> Result<(), InexactReason> {
        let block = kind == EventKind::Block;
        match self {
            KernelTest::Tids(_) => Err(InexactReason::ThreadInUserSpace),
            KernelTest::Pids(_) | KernelTest::Comms(_) if block => Err(InexactReason::BlockProcessInUserSpace),
            KernelTest::Syscalls(_) if block => Err(InexactReason::BlockOpInUserSpace),
            KernelTest::MinLatency { exact: false, .. } => Err(InexactReason::LatencyLowerBound),
            KernelTest::FdTypes(t) if t.contains(&FdType::Unknown) => Err(InexactReason::UnknownFdType),
            KernelTest::BlockDisks { devs: None, .. } => Err(InexactReason::UnresolvedDisks),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for KernelTest {
    /// How the test reads in [`Filter::explain`](crate::Filter::explain): `comm in {"httpd"}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelTest::Pids(v) => write!(f, "pid in {}", short_list(v, u32::to_string)),
            KernelTest::Tids(v) => write!(f, "tid in {} (in user space)", short_list(v, u32::to_string)),
            KernelTest::Comms(v) => write!(f, "comm in {}", short_list(v, |s| format!("{s:?}"))),
            KernelTest::Syscalls(v) => write!(f, "syscall in {} (bitmap)", short_list(v, syscall_label)),
            KernelTest::MinLatency { ns, .. } => write!(f, "latency >= {ns}ns ({})", units::fmt_ns(*ns)),
            KernelTest::FdTypes(v) => write!(f, "fd type in {}", short_list(v, |t| t.name().to_string())),
            KernelTest::BlockDevs(v) => write!(f, "device in {}", short_list(v, |d| dev_string(*d))),
            KernelTest::BlockDisks { names, devs: None } => {
                write!(f, "disk in {} (resolved to device numbers)", short_list(names, String::clone))
            }
            KernelTest::BlockDisks { names, devs: Some(d) } => write!(
                f,
                "disk in {} = device in {}",
                short_list(names, String::clone),
                short_list(d, |d| dev_string(*d))
            ),
        }
    }
}

/// Why a top-level clause is left to user space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residual {
    /// The field has no kernel test (`proc.exe`, `fd.name`, ...).
    Field {
        /// The field's name.
        field: &'static str,
    },
    /// The field has a kernel test, but not with this operator (`proc.pid != 1`).
    Operator {
        /// The field's name.
        field: &'static str,
        /// The operator (`!=`, `startswith`, ...).
        op: &'static str,
    },
    /// An `or`: the kernel tests a conjunction of conditions only.
    Or,
    /// A `not`.
    Not,
}

impl fmt::Display for Residual {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Residual::Field { field } => write!(f, "{field} has no kernel test"),
            Residual::Operator { field, op } => write!(f, "operator '{op}' on {field} has no kernel test"),
            Residual::Or => f.write_str("under 'or'"),
            Residual::Not => f.write_str("under 'not'"),
        }
    }
}

/// One top-level clause of a filter: an operand of its top-level `and` (or the whole filter when
/// it is not an `and`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// Byte range of the clause in the filter's source ([`Filter::source`](crate::Filter::source)).
    pub span: Range<usize>,
    /// The clause as written.
    pub text: String,
    /// How the kernel tests it, or why only user space does.
    pub kernel: Result<KernelTest, Residual>,
    /// Kind bits on which the clause may be false: on the others it is always true, so leaving
    /// it to user space costs nothing there.
    may_false: u8,
}

impl Clause {
    /// Does the kernel test this clause (in some form)?
    pub fn is_kernel(&self) -> bool {
        self.kernel.is_ok()
    }
}

/// Why the kernel's verdict is not exact for a kind of event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InexactReason {
    /// `thread.tid`: the kernel tests no thread ids.
    ThreadInUserSpace,
    /// `proc.pid`, `proc.name` on block requests: the process that queued a request is known
    /// in user space only.
    BlockProcessInUserSpace,
    /// `evt.type` on block requests: the kernel tests syscall numbers, not block operations.
    BlockOpInUserSpace,
    /// `blk.disk` names not (all) resolved to device numbers by [`Pushdown::resolve_disks`].
    UnresolvedDisks,
    /// `evt.latency = 5ms`, `in (...)`: the kernel tests only the lower bound.
    LatencyLowerBound,
    /// `fd.type = unknown`: the kernel cannot tell an fd of unknown type from no fd at all.
    UnknownFdType,
    /// A clause the kernel does not test.
    Residual(Residual),
    /// Process events (fork, exec, exit) always pass the kernel.
    ProcEvents,
}

impl fmt::Display for InexactReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ThreadInUserSpace => f.write_str("thread.tid is tested in user space"),
            Self::BlockProcessInUserSpace => f.write_str("the process of a block request is known in user space only"),
            Self::BlockOpInUserSpace => f.write_str("the type of a block request is tested in user space"),
            Self::UnresolvedDisks => f.write_str("blk.disk names need resolving into device numbers"),
            Self::LatencyLowerBound => f.write_str("the kernel tests only a lower bound of the latency"),
            Self::UnknownFdType => f.write_str("fd.type = unknown also passes calls without an fd"),
            Self::Residual(Residual::Or) => f.write_str("'or' is tested in user space"),
            Self::Residual(Residual::Not) => f.write_str("'not' is tested in user space"),
            Self::Residual(r) => write!(f, "{r}"),
            Self::ProcEvents => f.write_str("process events always pass the kernel"),
        }
    }
}

/// The kernel passes more events of a kind than the filter keeps: why, and which clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inexact {
    /// Why.
    pub reason: InexactReason,
    /// The clause responsible (its span and text), if one is.
    pub clause: Option<(Range<usize>, String)>,
}

impl fmt::Display for Inexact {
    /// `the kernel tests only a lower bound of the latency: evt.latency = 5ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.reason)?;
        if let Some((_, text)) = &self.clause {
            write!(f, ": {text}")?;
        }
        Ok(())
    }
}

/// Whether the kernel, applying a [`Pushdown`], passes exactly the events the filter matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exactness {
    /// It passes an event of this kind if and only if the filter matches it: counting in the
    /// kernel (histograms) counts what the filter keeps.
    Exact,
    /// It passes a superset (never less): the filter must run in user space on the events.
    Inexact(Inexact),
}

/// What the kernel side may test before copying an event out, clause by clause.
///
/// Each `Some` field is a necessary condition of the filter, taken from a top-level `and` clause
/// (anything under `or` or `not` stays in user space); `None` means "no restriction". The sets
/// apply to the kinds named in their docs; process events (fork, exec, exit) are never dropped,
/// because the process table needs them. [`Pushdown::clauses`] says the same per clause, with
/// its place in the source, and [`Pushdown::exactness`] whether the kernel's verdict is the
/// filter's.
///
/// User space still evaluates the whole filter on every event the kernel passes, so correctness
/// never depends on the kernel applying any of this: dropping early is only an optimisation.
/// [`Pushdown::admits`] is the reference for what the kernel test means. Its tests are on the
/// event as recorded: the command name is the one at syscall return, which for a successful
/// `execve`/`execveat` is the new program's (a kernel side that tests names at syscall entry
/// must test these calls again at return).
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
    /// The filter's top-level clauses, in source order.
    pub clauses: Vec<Clause>,
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
    /// does not resolve, devices are left unrestricted (the user-space filter still applies) and
    /// the kernel's verdict on block events stays inexact.
    pub fn resolve_disks(&mut self, lookup: impl Fn(&str) -> Option<u32>) {
        for c in &mut self.clauses {
            if let Ok(KernelTest::BlockDisks { names, devs }) = &mut c.kernel {
                let found: Option<Vec<u32>> = names.iter().map(|n| lookup(n)).collect();
                *devs = found.map(|mut d| {
                    d.sort_unstable();
                    d.dedup();
                    d
                });
            }
        }
        let Some(names) = &self.block_disks else { return };
        let devs: Option<Vec<u32>> = names.iter().map(|n| lookup(n)).collect();
        if let Some(devs) = devs {
            intersect(&mut self.block_devs, devs);
        }
    }

    /// The clauses the kernel tests (in some form; see [`Pushdown::exactness`] for how exactly).
    pub fn kernel_clauses(&self) -> impl Iterator<Item = &Clause> {
        self.clauses.iter().filter(|c| c.is_kernel())
    }

    /// The clauses only user space tests.
    pub fn residual_clauses(&self) -> impl Iterator<Item = &Clause> {
        self.clauses.iter().filter(|c| !c.is_kernel())
    }

    /// Does the kernel, applying this push-down, pass exactly the events of `kind` that the
    /// filter matches? If not, the first reason in source order. Kinds the filter cannot match
    /// are exact (the kernel drops them all); process events are exact only for the empty filter
    /// (they always pass). Resolve disk names first ([`Pushdown::resolve_disks`]) for `blk.disk`
    /// clauses to count as exact.
    pub fn exactness(&self, kind: EventKind) -> Exactness {
        if kind == EventKind::Proc {
            if self.clauses.is_empty() && self.kinds.is_none() {
                return Exactness::Exact;
            }
            return Exactness::Inexact(Inexact { reason: InexactReason::ProcEvents, clause: None });
        }
        if !self.kinds.unwrap_or(KindSet { syscall: true, block: true, proc: false }).contains(kind) {
            return Exactness::Exact;
        }
        let bit = kind_bit(kind as u8);
        for c in &self.clauses {
            if c.may_false & bit == 0 {
                continue;
            }
            let why = match &c.kernel {
                Err(r) => Some(InexactReason::Residual(*r)),
                Ok(t) => t.exactness(kind).err(),
            };
            if let Some(reason) = why {
                return Exactness::Inexact(Inexact { reason, clause: Some((c.span.clone(), c.text.clone())) });
            }
        }
        Exactness::Exact
    }

    /// [`Pushdown::exactness`] as a yes/no.
    pub fn is_exact(&self, kind: EventKind) -> bool {
        self.exactness(kind) == Exactness::Exact
    }
}

impl fmt::Display for Pushdown {
    /// The split, one line per clause: what the kernel tests (and for which clause), what only
    /// user space tests (and why), and for syscall and block events whether the kernel's verdict
    /// is exact. [`Filter::explain`](crate::Filter::explain) prints this under the filter.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.clauses.is_empty() && self.kinds.is_none() {
            return f.write_str("kernel: nothing to push down\n");
        }
        let kernel: Vec<(String, &Clause)> =
            self.clauses.iter().filter_map(|c| c.kernel.as_ref().ok().map(|t| (t.to_string(), c))).collect();
        let width = kernel.iter().map(|(how, _)| how.chars().count()).max().unwrap_or(0).max(24);
        f.write_str("kernel (drops events early; process events always pass):\n")?;
        let kinds = match self.kinds {
            Some(k) => format!("event kinds: {}", k.names()),
            None => "event kinds: syscall, block".into(),
        };
        writeln!(f, "  {kinds:<width$}  <- whole filter")?;
        for (how, c) in &kernel {
            writeln!(f, "  {how:<width$}  <- {}", c.text)?;
        }
        f.write_str("user space (the whole filter is checked on every event the kernel passes):\n")?;
        let mut any = false;
        for c in self.residual_clauses() {
            if let Err(why) = &c.kernel {
                writeln!(f, "  {}  ({why})", c.text)?;
                any = true;
            }
        }
        if !any {
            f.write_str("  no clause is left to user space alone\n")?;
        }
        let kinds = self.kinds.unwrap_or(KindSet { syscall: true, block: true, proc: false });
        let mut verdicts = String::new();
        for (kind, name) in [(EventKind::Syscall, "syscall"), (EventKind::Block, "block")] {
            if !kinds.contains(kind) {
                continue;
            }
            let _ = match self.exactness(kind) {
                Exactness::Exact => writeln!(verdicts, "  {name} events: exact"),
                Exactness::Inexact(why) => writeln!(verdicts, "  {name} events: not exact, {why}"),
            };
        }
        if !verdicts.is_empty() {
            f.write_str("kernel verdict (does the kernel pass just the events the filter keeps?):\n")?;
            f.write_str(&verdicts)?;
        }
        Ok(())
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

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v.dedup();
    v
}

/// The kernel test of one top-level clause, or why it has none.
fn kernel_test(c: &Check) -> Result<KernelTest, Residual> {
    let eq_or_in = matches!(c.op, Op::Eq | Op::In);
    let bool_true = |c: &Check| {
        matches!((c.op, c.vals.first()), (Op::Eq, Some(Lit::Bool(true))) | (Op::Ne, Some(Lit::Bool(false))))
    };
    Ok(match c.field {
        Field::ProcPid if eq_or_in => KernelTest::Pids(sorted(u32s(c))),
        Field::ThreadTid if eq_or_in => KernelTest::Tids(sorted(u32s(c))),
        Field::ProcName if eq_or_in => {
            KernelTest::Comms(sorted(strs(c).iter().map(|s| comm_value(s).to_string()).collect()))
        }
        Field::EvtType if eq_or_in => {
            KernelTest::Syscalls(sorted(strs(c).iter().filter_map(|s| resolve::evt_type(s)?.sys).collect()))
        }
        Field::EvtIsIo | Field::EvtIsIoRead | Field::EvtIsIoWrite if bool_true(c) => {
            let bits = match c.field {
                Field::EvtIsIo => syscalls::SysDesc::IO,
                Field::EvtIsIoRead => syscalls::SysDesc::READ,
                _ => syscalls::SysDesc::WRITE,
            };
            KernelTest::Syscalls(SysSet::with_bits(bits).iter().collect())
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
            let ns = lo.clamp(0, i128::from(u64::MAX)) as u64;
            KernelTest::MinLatency { ns, exact: matches!(c.op, Op::Gt | Op::Ge) }
        }
        Field::FdType if eq_or_in => KernelTest::FdTypes(sorted(
            strs(c).iter().filter_map(|s| resolve::fd_type(s)).map(FdType::from_u8).collect(),
        )),
        Field::BlkDev if eq_or_in => {
            KernelTest::BlockDevs(sorted(strs(c).iter().filter_map(|s| resolve::blk_dev(s)).collect()))
        }
        Field::BlkDisk if eq_or_in => {
            KernelTest::BlockDisks { names: sorted(strs(c).iter().map(|s| s.to_string()).collect()), devs: None }
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
        | Field::EvtIsIoWrite => return Err(Residual::Operator { field: c.field.info().name, op: c.op.name() }),
        _ => return Err(Residual::Field { field: c.field.info().name }),
    })
}

/// Fold one kernel test into the per-field sets of `p`.
fn apply(p: &mut Pushdown, t: &KernelTest) {
    match t {
        KernelTest::Pids(v) => intersect(&mut p.pids, v.clone()),
        KernelTest::Tids(v) => intersect(&mut p.tids, v.clone()),
        KernelTest::Comms(v) => intersect(&mut p.comms, v.clone()),
        KernelTest::Syscalls(v) => intersect(&mut p.syscalls, v.clone()),
        KernelTest::MinLatency { ns, .. } => p.min_latency_ns = Some(p.min_latency_ns.map_or(*ns, |m| m.max(*ns))),
        KernelTest::FdTypes(v) => intersect(&mut p.fd_types, v.clone()),
        KernelTest::BlockDevs(v) => intersect(&mut p.block_devs, v.clone()),
        KernelTest::BlockDisks { names, .. } => intersect(&mut p.block_disks, names.clone()),
    }
}

/// The operands of the top-level `and` (nested ones flattened), or the expression itself.
fn top_clauses<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match &e.kind {
        ExprKind::And(items) => items.iter().for_each(|i| top_clauses(i, out)),
        _ => out.push(e),
    }
}

/// The push-down of a filter whose expression is `expr` (`None`: the empty filter), source `src`,
/// that can be true on the kinds in mask `kinds`.
pub(crate) fn analyze(expr: Option<&Expr>, src: &str, kinds: u8) -> Pushdown {
    let mut p = Pushdown::default();
    let ks = KindSet::from_mask(kinds);
    if !(ks.syscall && ks.block) {
        p.kinds = Some(ks);
    }
    let Some(expr) = expr else { return p };
    let mut tops = Vec::new();
    top_clauses(expr, &mut tops);
    for e in tops {
        let kernel = match &e.kind {
            ExprKind::Check(c) => kernel_test(c),
            // Transformers, val(), modifiers, indexed fields: never tested in the kernel.
            ExprKind::Rich(r) => Err(match r.lhs.field() {
                Some(f) => Residual::Operator { field: f.info().name, op: r.op.name() },
                None => Residual::Field { field: "a transformer" },
            }),
            ExprKind::Or(_) => Err(Residual::Or),
            ExprKind::Not(_) => Err(Residual::Not),
            ExprKind::And(_) => unreachable!("flattened by top_clauses"),
        };
        if let Ok(t) = &kernel {
            apply(&mut p, t);
        }
        let may_false = compile::compile(e).1.may_false & K_ALL;
        p.clauses.push(Clause {
            span: e.start..e.end,
            text: src.get(e.start..e.end).unwrap_or("").to_string(),
            kernel,
            may_false,
        });
    }
    p
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

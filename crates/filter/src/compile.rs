//! Compilation of the expression tree into an evaluation tree over event columns.
//!
//! Names are resolved once here (syscall names to numbers, fd type names to codes, errno names
//! to numbers, `major:minor` to device numbers), numeric comparisons become inclusive ranges, and
//! the children of `and`/`or` are ordered cheapest first. Evaluation then reads only the columns
//! a test needs and never allocates.

use crate::context::EvalContext;
use crate::fields::{blk_op_bit, kind_bit, proc_op_bit, Field, K_ALL, K_BLK, K_PROC, K_SYS};
use crate::helpers::{bytes_at, Scratch};
use crate::parser::{Check, Expr, ExprKind, Lit, Op};
use crate::resolve;
use crate::strops;
use latscope_event::{syscalls, EventBatch};

/// Length of a command name (TASK_COMM_LEN - 1).
pub(crate) const COMM_LEN: usize = 15;

/// A set of syscall numbers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SysSet(Box<[u64]>);

impl SysSet {
    pub(crate) fn from_nrs(nrs: impl IntoIterator<Item = u16>) -> Self {
        let mut words: Vec<u64> = Vec::new();
        for nr in nrs {
            let w = usize::from(nr) / 64;
            if words.len() <= w {
                words.resize(w + 1, 0);
            }
            words[w] |= 1 << (nr % 64);
        }
        Self(words.into_boxed_slice())
    }
    /// Syscalls whose layout has all the `bits`.
    pub(crate) fn with_bits(bits: u16) -> Self {
        Self::from_nrs((0..syscalls::syscall_count() as u16).filter(|&nr| syscalls::desc(nr).bits & bits == bits))
    }
    #[inline]
    pub(crate) fn contains(&self, nr: u16) -> bool {
        self.0.get(usize::from(nr) / 64).is_some_and(|w| w >> (nr % 64) & 1 != 0)
    }
    pub(crate) fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        self.0
            .iter()
            .enumerate()
            .flat_map(|(w, bits)| (0..64).filter(move |b| bits >> b & 1 != 0).map(move |b| (w * 64 + b) as u16))
    }
}

/// A string test on a field value.
#[derive(Debug, Clone)]
pub(crate) enum StrTest {
    Eq(Box<[u8]>),
    In(Box<[Box<[u8]>]>),
    Contains(Box<[u8]>),
    IContains(Box<[u8]>),
    StartsWith(Box<[u8]>),
    EndsWith(Box<[u8]>),
    Glob(Box<[u8]>),
    Pmatch(Box<[Box<[u8]>]>),
}

impl StrTest {
    #[inline(always)]
    fn test(&self, v: &[u8]) -> bool {
        match self {
            StrTest::Eq(s) => v == &s[..],
            StrTest::In(set) => set.iter().any(|s| v == &s[..]),
            StrTest::Contains(s) => strops::contains(v, s),
            StrTest::IContains(s) => strops::icontains(v, s),
            StrTest::StartsWith(s) => v.starts_with(s),
            StrTest::EndsWith(s) => v.ends_with(s),
            StrTest::Glob(p) => strops::glob(p, v),
            StrTest::Pmatch(dirs) => dirs.iter().any(|d| strops::pmatch(v, d)),
        }
    }
}

/// The evaluation tree. Every test is false when the event does not have the field; `neg` turns
/// `=`/`in` into `!=`/`not in` for events that have it.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Const(bool),
    And(Box<[Node]>),
    Or(Box<[Node]>),
    Not(Box<Node>),
    Exists(Field),
    /// The general form (see [`crate::rich`]).
    Rich(Box<crate::rich::Rich>),
    /// Numeric field within `lo..=hi`.
    Range {
        field: Field,
        lo: i128,
        hi: i128,
        neg: bool,
    },
    /// Latency (syscall or block, per `kinds`) within `lo..=hi`: the hot case, read directly.
    Lat {
        kinds: u8,
        lo: u64,
        hi: u64,
        neg: bool,
    },
    NumIn {
        field: Field,
        vals: Box<[i128]>,
        neg: bool,
    },
    /// `fd.port`: either port of the socket within `lo..=hi` (`neg`, from `!=`: neither).
    PortEither {
        lo: i128,
        hi: i128,
        neg: bool,
    },
    /// `fd.port in (...)`: either port in the list.
    PortIn {
        vals: Box<[i128]>,
    },
    /// `evt.failed`.
    Failed {
        want: bool,
    },
    /// Syscall events whose number is in the set (`evt.is_io*`).
    SysBits {
        set: SysSet,
        neg: bool,
    },
    /// `evt.type`: per-kind selections.
    EvtType {
        sys: SysSet,
        blk: u8,
        proc: u8,
        neg: bool,
    },
    /// `evt.kind`.
    Kind {
        mask: u8,
        neg: bool,
    },
    /// `fd.type`: bit per fd type code.
    FdType {
        mask: u32,
        neg: bool,
    },
    /// `blk.op`: bit per op name.
    BlkOp {
        mask: u8,
        neg: bool,
    },
    /// `evt.res`: success and/or errno numbers.
    Res {
        success: bool,
        errnos: Box<[i64]>,
        neg: bool,
    },
    /// `blk.dev`.
    Dev {
        devs: Box<[u32]>,
        neg: bool,
    },
    /// `proc.name` equal to one of the names.
    Comm {
        names: Box<[Box<[u8]>]>,
        neg: bool,
    },
    /// Any other string test.
    Str {
        field: Field,
        test: StrTest,
        neg: bool,
        /// The field formats its value ([`Field::formats`]): tested out of line, with a buffer.
        formats: bool,
    },
}

#[inline]
fn row_kind(b: &EventBatch, row: usize) -> u8 {
    b.kind.get(row).copied().unwrap_or(u8::MAX)
}

impl Node {
    /// Evaluate on event `row` (which must be in range; out-of-range rows read as absent fields).
    #[inline]
    pub(crate) fn eval(&self, b: &EventBatch, row: usize, ctx: &EvalContext) -> bool {
        match self {
            Node::Const(v) => *v,
            Node::And(items) => items.iter().all(|n| n.eval(b, row, ctx)),
            Node::Or(items) => items.iter().any(|n| n.eval(b, row, ctx)),
            Node::Not(n) => !n.eval(b, row, ctx),
            Node::Exists(f) => f.exists(b, row, ctx),
            Node::Rich(r) => r.eval(b, row, ctx),
            Node::Lat { kinds, lo, hi, neg } => {
                if kind_bit(row_kind(b, row)) & kinds == 0 {
                    return false;
                }
                match b.lat.get(row) {
                    Some(v) => (*lo <= *v && *v <= *hi) != *neg,
                    None => false,
                }
            }
            Node::Range { field, lo, hi, neg } => match field.num(b, row, ctx) {
                Some(v) => (*lo <= v && v <= *hi) != *neg,
                None => false,
            },
            Node::NumIn { field, vals, neg } => match field.num(b, row, ctx) {
                Some(v) => vals.contains(&v) != *neg,
                None => false,
            },
            Node::PortEither { lo, hi, neg } => port_either(b, row, *lo, *hi, *neg),
            Node::PortIn { vals } => port_in(b, row, vals),
            Node::Failed { want } => match Field::EvtFailed.boolean(b, row) {
                Some(v) => v == *want,
                None => false,
            },
            Node::SysBits { set, neg } => {
                row_kind(b, row) == 0 && b.nr.get(row).is_some_and(|&nr| set.contains(nr) != *neg)
            }
            Node::EvtType { sys, blk, proc, neg } => {
                let Some(&nr) = b.nr.get(row) else { return false };
                let hit = match row_kind(b, row) {
                    0 => sys.contains(nr),
                    1 => blk_op_bit(nr) & blk != 0,
                    2 => {
                        let bit = proc_op_bit(nr);
                        if bit == 0 {
                            return false;
                        }
                        bit & proc != 0
                    }
                    _ => return false,
                };
                hit != *neg
            }
            Node::Kind { mask, neg } => {
                let k = row_kind(b, row);
                k < 3 && (kind_bit(k) & mask != 0) != *neg
            }
            Node::FdType { mask, neg } => {
                if row_kind(b, row) != 0 {
                    return false;
                }
                let (Some(&t), Some(&fd)) = (b.fd_type.get(row), b.fd.get(row)) else { return false };
                if t == 0 && fd == latscope_event::NO_FD {
                    return false;
                }
                let code = if usize::from(t) < latscope_event::FdType::ALL.len() { t } else { 0 };
                (mask >> code & 1 != 0) != *neg
            }
            Node::BlkOp { mask, neg } => {
                row_kind(b, row) == 1 && b.nr.get(row).is_some_and(|&nr| (blk_op_bit(nr) & mask != 0) != *neg)
            }
            Node::Res { success, errnos, neg } => {
                if row_kind(b, row) != 0 {
                    return false;
                }
                let Some(&ret) = b.ret.get(row) else { return false };
                let hit = if (-4095..0).contains(&ret) { errnos.contains(&-ret) } else { *success };
                hit != *neg
            }
            Node::Dev { devs, neg } => {
                row_kind(b, row) == 1 && b.dev.get(row).is_some_and(|d| devs.contains(d) != *neg)
            }
            Node::Comm { names, neg } => match bytes_at(&b.comm, row) {
                Some(v) => names.iter().any(|n| v == &n[..]) != *neg,
                None => false,
            },
            Node::Str { field, test, neg, formats } => {
                if *formats {
                    return formatted_test(*field, test, *neg, b, row, ctx);
                }
                match field.string(b, row, ctx, None) {
                    Some(v) => test.test(v) != *neg,
                    None => false,
                }
            }
        }
    }

    /// Rough cost of evaluating the node, to run cheap tests first.
    fn cost(&self) -> u32 {
        match self {
            Node::Const(_) => 0,
            Node::Rich(_) => 60,
            Node::And(v) | Node::Or(v) => v.iter().map(Node::cost).sum(),
            Node::Not(n) => n.cost(),
            Node::Lat { .. }
            | Node::Kind { .. }
            | Node::FdType { .. }
            | Node::BlkOp { .. }
            | Node::SysBits { .. }
            | Node::EvtType { .. }
            | Node::Res { .. }
            | Node::Dev { .. }
            | Node::Failed { .. } => 2,
            Node::PortEither { .. } | Node::PortIn { .. } => 12,
            Node::Range { field, .. } | Node::NumIn { field, .. } | Node::Exists(field) => {
                if uses_context(*field) {
                    12
                } else {
                    3
                }
            }
            Node::Comm { names, .. } => 4 + names.len() as u32,
            Node::Str { field, test, .. } => {
                let base = match field {
                    // Formats every argument.
                    Field::EvtArgs => 40,
                    f if uses_context(*f) => 12,
                    _ => 6,
                };
                base + match test {
                    StrTest::Eq(_) | StrTest::StartsWith(_) | StrTest::EndsWith(_) => 1,
                    StrTest::In(v) | StrTest::Pmatch(v) => 1 + v.len() as u32,
                    StrTest::Contains(_) | StrTest::IContains(_) | StrTest::Glob(_) => 8,
                }
            }
        }
    }
}

/// Fields read through a hash lookup in the context, or by taking a name apart.
fn uses_context(f: Field) -> bool {
    f.of_cgroup()
        || matches!(
            f,
            Field::ProcPpid
                | Field::ProcExe
                | Field::ProcCmdline
                | Field::ProcArgs
                | Field::UserName
                | Field::GroupName
                | Field::BlkDisk
        )
        || f.of_socket()
}

/// A string test on a field that formats its value, out of line: its buffer would otherwise
/// enlarge the frame of every `eval` (fields that borrow their value are tested in `eval`).
#[inline(never)]
fn formatted_test(field: Field, test: &StrTest, neg: bool, b: &EventBatch, row: usize, ctx: &EvalContext) -> bool {
    let mut buf = Scratch::new();
    match field.string(b, row, ctx, Some(&mut buf)) {
        Some(v) => test.test(v) != neg,
        None => false,
    }
}

/// `fd.port` compared with a range: either end (`neg`: neither).
#[inline(never)]
fn port_either(b: &EventBatch, row: usize, lo: i128, hi: i128, neg: bool) -> bool {
    match socket_ports(b, row) {
        Some((l, r)) => {
            let hit = |p: Option<u16>| p.is_some_and(|p| (lo..=hi).contains(&i128::from(p)));
            (hit(Some(l)) || hit(r)) != neg
        }
        None => false,
    }
}

/// `fd.port in (...)`: either end.
#[inline(never)]
fn port_in(b: &EventBatch, row: usize, vals: &[i128]) -> bool {
    match socket_ports(b, row) {
        Some((l, r)) => [Some(l), r].iter().flatten().any(|&p| vals.contains(&i128::from(p))),
        None => false,
    }
}

/// The local and (if any) remote port of the socket of syscall event `row`.
#[inline]
fn socket_ports(b: &EventBatch, row: usize) -> Option<(u16, Option<u16>)> {
    if row_kind(b, row) != 0 {
        return None;
    }
    let n = crate::fields::sock(b, row)?;
    Some((n.local.port, n.peer.map(|p| p.port)))
}

/// For each node: the kinds of events on which it may be true, and on which it may be false.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kinds {
    pub may_true: u8,
    pub may_false: u8,
}

/// Compile an expression into an evaluation tree and the kinds analysis of its root.
pub(crate) fn compile(e: &Expr) -> (Node, Kinds) {
    match &e.kind {
        ExprKind::And(items) => {
            let mut nodes: Vec<(Node, Kinds)> = items.iter().map(compile).collect();
            let t = nodes.iter().fold(K_ALL, |m, (_, k)| m & k.may_true);
            let f = nodes.iter().fold(0, |m, (_, k)| m | k.may_false);
            nodes.sort_by_key(|(n, _)| n.cost());
            (Node::And(nodes.into_iter().map(|(n, _)| n).collect()), Kinds { may_true: t, may_false: f })
        }
        ExprKind::Or(items) => {
            let mut nodes: Vec<(Node, Kinds)> = items.iter().map(compile).collect();
            let t = nodes.iter().fold(0, |m, (_, k)| m | k.may_true);
            let f = nodes.iter().fold(K_ALL, |m, (_, k)| m & k.may_false);
            nodes.sort_by_key(|(n, _)| n.cost());
            (Node::Or(nodes.into_iter().map(|(n, _)| n).collect()), Kinds { may_true: t, may_false: f })
        }
        ExprKind::Not(inner) => {
            let (n, k) = compile(inner);
            (Node::Not(Box::new(n)), Kinds { may_true: k.may_false, may_false: k.may_true })
        }
        ExprKind::Rich(r) => {
            // An absent field makes a check false: on a field, it can be true only where the
            // field is. Transformers may yield a value without one of their fields (`join`).
            let may_true = match &r.lhs {
                crate::rich::Operand::Field { field, .. } => field.info().kinds,
                _ => K_ALL,
            };
            (Node::Rich(r.clone()), Kinds { may_true, may_false: K_ALL })
        }
        ExprKind::Check(c) => {
            let node = check(c);
            let present = c.field.info().kinds;
            let may_true = match &node {
                Node::Const(false) => 0,
                // `evt.kind = x` is exactly true on the selected kinds.
                Node::Kind { mask, neg: false } => *mask,
                Node::Kind { mask, neg: true } => present & !mask,
                Node::EvtType { sys, blk, proc, neg: false } => {
                    let mut m = 0;
                    if sys.iter().next().is_some() {
                        m |= K_SYS;
                    }
                    if *blk != 0 {
                        m |= K_BLK;
                    }
                    if *proc != 0 {
                        m |= K_PROC;
                    }
                    m
                }
                _ => present,
            };
            let may_false = match &node {
                Node::Kind { mask, neg: false } => K_ALL & !mask,
                Node::Kind { mask, neg: true } => *mask | (K_ALL & !present),
                _ => K_ALL,
            };
            (node, Kinds { may_true, may_false })
        }
    }
}

fn strs(vals: &[Lit]) -> impl Iterator<Item = &str> {
    vals.iter().filter_map(|v| match v {
        Lit::Str(s) => Some(s.as_str()),
        _ => None,
    })
}

fn nums(vals: &[Lit]) -> impl Iterator<Item = i128> + '_ {
    vals.iter().filter_map(|v| match v {
        Lit::Num(n) => Some(*n),
        _ => None,
    })
}

/// `proc.name` value as compared with comm: cut to 15 bytes (at a character boundary).
pub(crate) fn comm_value(s: &str) -> &str {
    if s.len() <= COMM_LEN {
        return s;
    }
    let mut n = COMM_LEN;
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

/// The start times `n` can match ([`crate::Filter::time_window`]).
pub(crate) fn time_window(n: &Node) -> crate::TimeWindow {
    type W = Option<(i128, i128)>;
    let meet = |a: W, b: W| match (a, b) {
        (Some(a), Some(b)) => Some((a.0.max(b.0), a.1.min(b.1))),
        (a, None) => a,
        (None, b) => b,
    };
    match n {
        Node::Range { field, lo, hi, neg: false } => match field {
            Field::EvtTime | Field::EvtDatetime | Field::EvtRawtime => {
                crate::TimeWindow { wall: Some((*lo, *hi)), rel: None }
            }
            Field::EvtReltime => crate::TimeWindow { wall: None, rel: Some((*lo, *hi)) },
            _ => crate::TimeWindow::default(),
        },
        Node::And(children) => children.iter().map(time_window).fold(crate::TimeWindow::default(), |a, b| {
            crate::TimeWindow { wall: meet(a.wall, b.wall), rel: meet(a.rel, b.rel) }
        }),
        Node::Or(children) if !children.is_empty() => {
            // The hull of the branches, for a field every branch bounds.
            let ws: Vec<crate::TimeWindow> = children.iter().map(time_window).collect();
            let hull = |get: fn(&crate::TimeWindow) -> W| -> W {
                ws.iter().map(get).try_fold(None::<(i128, i128)>, |acc, w| {
                    let w = w?;
                    Some(Some(acc.map_or(w, |a| (a.0.min(w.0), a.1.max(w.1)))))
                })?
            };
            crate::TimeWindow { wall: hull(|w| w.wall), rel: hull(|w| w.rel) }
        }
        _ => crate::TimeWindow::default(),
    }
}

/// Inclusive numeric range of an ordering/equality operator.
pub(crate) fn range(op: Op, v: i128) -> (i128, i128) {
    match op {
        Op::Lt => (i128::MIN, v - 1),
        Op::Le => (i128::MIN, v),
        Op::Gt => (v + 1, i128::MAX),
        Op::Ge => (v, i128::MAX),
        _ => (v, v),
    }
}

fn bytes(s: &str) -> Box<[u8]> {
    s.as_bytes().into()
}

fn check(c: &Check) -> Node {
    let neg = c.op == Op::Ne;
    let field = c.field;
    if c.op == Op::Exists {
        return Node::Exists(field);
    }
    let info = field.info();
    if info.kinds == 0 {
        // fd.sip and friends: never present, so every test is false.
        return Node::Const(false);
    }
    match info.ty {
        crate::FieldType::Bool => {
            let want = matches!(c.vals.first(), Some(Lit::Bool(true))) != neg;
            let bits = match field {
                Field::EvtIsIo => syscalls::SysDesc::IO,
                Field::EvtIsIoRead => syscalls::SysDesc::READ,
                Field::EvtIsIoWrite => syscalls::SysDesc::WRITE,
                Field::EvtFailed => return Node::Failed { want },
                Field::EvtIsWait => {
                    let wait = (0..syscalls::syscall_count() as u16)
                        .filter(|&nr| syscalls::desc(nr).class == latscope_event::SysClass::Wait);
                    return Node::SysBits { set: SysSet::from_nrs(wait), neg: !want };
                }
                _ => {
                    // Other booleans (evt.is_wait, fd.connected): the general check.
                    let vals = vec![crate::rich::V::B(want)];
                    let lhs = crate::rich::Operand::Field { field, arg: crate::rich::FieldArg::None };
                    let rhs = crate::rich::Rhs::Vals(vals, Vec::new());
                    return Node::Rich(Box::new(crate::rich::Rich { lhs, op: Op::Eq, modifier: None, rhs }));
                }
            };
            Node::SysBits { set: SysSet::with_bits(bits), neg: !want }
        }
        crate::FieldType::String => string_check(c, neg),
        _ => {
            if c.op == Op::In {
                if field == Field::FdPort {
                    return Node::PortIn { vals: nums(&c.vals).collect() };
                }
                return Node::NumIn { field, vals: nums(&c.vals).collect(), neg: false };
            }
            let v = nums(&c.vals).next().unwrap_or(0);
            let (lo, hi) = range(c.op, v);
            if field == Field::FdPort {
                return Node::PortEither { lo, hi, neg };
            }
            let lat_kinds = match field {
                Field::EvtLatency => K_SYS | K_BLK,
                Field::BlkLatency => K_BLK,
                _ => 0,
            };
            if lat_kinds != 0 {
                // Clamp to the column's u64 domain.
                if hi < 0 || lo > i128::from(u64::MAX) {
                    return if neg {
                        Node::Lat { kinds: lat_kinds, lo: 0, hi: u64::MAX, neg: false }
                    } else {
                        Node::Const(false)
                    };
                }
                let lo = lo.max(0) as u64;
                let hi = hi.min(i128::from(u64::MAX)) as u64;
                return Node::Lat { kinds: lat_kinds, lo, hi, neg };
            }
            Node::Range { field, lo, hi, neg }
        }
    }
}

fn string_check(c: &Check, neg: bool) -> Node {
    let field = c.field;
    let mut vals: Vec<&str> = strs(&c.vals).collect();
    if field == Field::ContainerId && matches!(c.op, Op::Eq | Op::Ne | Op::In) {
        vals = vals.into_iter().map(resolve::container_id).collect();
    }
    let first = vals.first().copied().unwrap_or("");
    if matches!(c.op, Op::Eq | Op::Ne | Op::In) {
        // Enumerated fields compare the stored numbers.
        match field {
            Field::EvtType => {
                let sels: Vec<_> = vals.iter().filter_map(|v| resolve::evt_type(v)).collect();
                return Node::EvtType {
                    sys: SysSet::from_nrs(sels.iter().filter_map(|s| s.sys)),
                    blk: sels.iter().fold(0, |m, s| m | s.blk),
                    proc: sels.iter().fold(0, |m, s| m | s.proc),
                    neg,
                };
            }
            Field::EvtKind => {
                return Node::Kind { mask: vals.iter().filter_map(|v| resolve::evt_kind(v)).fold(0, |m, b| m | b), neg }
            }
            Field::FdType => {
                let mask = vals.iter().filter_map(|v| resolve::fd_type(v)).fold(0u32, |m, t| m | 1 << t);
                return Node::FdType { mask, neg };
            }
            Field::BlkOp => {
                return Node::BlkOp { mask: vals.iter().filter_map(|v| resolve::blk_op(v)).fold(0, |m, b| m | b), neg }
            }
            Field::EvtRes => {
                let res: Vec<Option<i64>> = vals.iter().filter_map(|v| resolve::evt_res(v)).collect();
                return Node::Res {
                    success: res.contains(&None),
                    errnos: res.iter().flatten().copied().collect(),
                    neg,
                };
            }
            Field::BlkDev => return Node::Dev { devs: vals.iter().filter_map(|v| resolve::blk_dev(v)).collect(), neg },
            Field::ProcName => return Node::Comm { names: vals.iter().map(|v| bytes(comm_value(v))).collect(), neg },
            _ => {}
        }
    }
    let test = match c.op {
        Op::Eq | Op::Ne => StrTest::Eq(bytes(first)),
        Op::In => StrTest::In(vals.iter().map(|v| bytes(v)).collect()),
        Op::Contains => StrTest::Contains(bytes(first)),
        Op::IContains => StrTest::IContains(first.to_ascii_lowercase().into_bytes().into()),
        Op::StartsWith => StrTest::StartsWith(bytes(first)),
        Op::EndsWith => StrTest::EndsWith(bytes(first)),
        Op::Glob => StrTest::Glob(bytes(first)),
        Op::Pmatch => StrTest::Pmatch(vals.iter().map(|v| strops::normalize_dir(v).into_boxed_slice()).collect()),
        // Ordering operators and `exists` never reach here (type-checked / handled above).
        // Ordering operators, `exists` and the general forms never reach here (type-checked, handled
        // above, or compiled as `Node::Rich`).
        Op::Exists
        | Op::Lt
        | Op::Le
        | Op::Gt
        | Op::Ge
        | Op::Intersects
        | Op::IGlob
        | Op::Regex
        | Op::BContains
        | Op::BStartsWith => return Node::Exists(field),
    };
    Node::Str { field, test, neg, formats: field.formats() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysset() {
        let s = SysSet::from_nrs([0, 63, 64, 469]);
        assert!(s.contains(0) && s.contains(63) && s.contains(64) && s.contains(469));
        assert!(!s.contains(1) && !s.contains(470) && !s.contains(u16::MAX));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 63, 64, 469]);
        let io = SysSet::with_bits(syscalls::SysDesc::IO);
        assert!(io.contains(0) && io.contains(1) && !io.contains(257));
    }

    #[test]
    fn comm_cut() {
        assert_eq!(comm_value("httpd"), "httpd");
        assert_eq!(comm_value("a-very-long-process-name"), "a-very-long-pro");
        assert_eq!(comm_value("ééééééééé"), "ééééééé");
    }

    #[test]
    fn ranges() {
        assert_eq!(range(Op::Gt, 5), (6, i128::MAX));
        assert_eq!(range(Op::Le, 5), (i128::MIN, 5));
        assert_eq!(range(Op::Eq, 5), (5, 5));
    }
}

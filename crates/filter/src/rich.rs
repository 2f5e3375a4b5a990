//! The general form of a check, for what the column fast paths of `compile` do not cover:
//! transformers (`tolower(proc.name)`), comparisons between fields (`val(...)`), list modifiers
//! (`== anyof (...)`), `regex`, `iglob`, fields with an argument (`proc.aname[2]`,
//! `evt.rawarg.size`) or several values (`fd.ip`, `fd.net`), and the operators libsinsp allows
//! on types the fast paths do not (`<` on strings, `in` on booleans). Values are computed per
//! event and may allocate: these checks are slower, and the kernel never tests them.

use crate::context::EvalContext;
use crate::fields::{sock, Field, FieldType};
use crate::helpers::Scratch;
use crate::parser::Op;
use crate::strops;
use latscope_event::EventBatch;
use std::cmp::Ordering;

/// A value as the general checks compare it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum V {
    S(Vec<u8>),
    N(i128),
    B(bool),
}

/// A field transformer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Xform {
    ToLower,
    ToUpper,
    B64,
    Basename,
    Len,
    Concat,
    Join,
}

impl Xform {
    pub(crate) fn from_name(s: &str) -> Option<Xform> {
        Some(match s {
            "tolower" => Xform::ToLower,
            "toupper" => Xform::ToUpper,
            "b64" => Xform::B64,
            "basename" => Xform::Basename,
            "len" => Xform::Len,
            "concat" => Xform::Concat,
            "join" => Xform::Join,
            _ => return None,
        })
    }
}

/// The argument of a field (`[2]`, `.size`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FieldArg {
    None,
    Index(usize),
    Name(String),
}

/// Something that yields values for an event: a field, a literal, a transformer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Operand {
    Field { field: Field, arg: FieldArg },
    Lit(V),
    Xf { xf: Xform, args: Vec<Operand> },
}

impl Operand {
    /// The type of the values: fields' own, `len` a number, other transformers strings.
    pub(crate) fn ty(&self) -> FieldType {
        match self {
            Operand::Field { field: Field::EvtRawarg, arg: FieldArg::Name(n) } => {
                rawarg(n).map_or(FieldType::Number, |f| f.info().ty)
            }
            Operand::Field { field, .. } => field.info().ty,
            Operand::Lit(V::N(_)) => FieldType::Number,
            Operand::Lit(V::B(_)) => FieldType::Bool,
            Operand::Lit(V::S(_)) => FieldType::String,
            Operand::Xf { xf: Xform::Len, .. } => FieldType::Number,
            Operand::Xf { .. } => FieldType::String,
        }
    }

    /// The first field read, if any.
    pub(crate) fn field(&self) -> Option<Field> {
        match self {
            Operand::Field { field, .. } => Some(*field),
            Operand::Lit(_) => None,
            Operand::Xf { args, .. } => args.iter().find_map(Operand::field),
        }
    }

    /// Every field read, in order.
    pub(crate) fn fields(&self, out: &mut Vec<Field>) {
        match self {
            Operand::Field { field: Field::EvtRawarg, arg: FieldArg::Name(n) } => {
                out.push(rawarg(n).filter(|&f| f != Field::EvtRawarg).unwrap_or(Field::EvtRawarg))
            }
            Operand::Field { field: Field::EvtArgN, .. } => out.push(Field::EvtArgs),
            Operand::Field { field: Field::FdIp | Field::FdNet | Field::FdSnet | Field::FdCnet, .. } => {
                out.push(Field::FdSip)
            }
            Operand::Field { field, .. } => out.push(*field),
            Operand::Lit(_) => {}
            Operand::Xf { args, .. } => args.iter().for_each(|a| a.fields(out)),
        }
    }

    /// The values for event `row` (none: the event does not have the field).
    pub(crate) fn values(&self, b: &EventBatch, row: usize, ctx: &EvalContext) -> Vec<V> {
        match self {
            Operand::Lit(v) => vec![v.clone()],
            Operand::Field { field, arg } => field_values(*field, arg, b, row, ctx),
            Operand::Xf { xf, args } => {
                let one = |i: usize| args.get(i).map(|a| a.values(b, row, ctx)).unwrap_or_default();
                let text = |v: &V| match v {
                    V::S(s) => s.clone(),
                    V::N(n) => n.to_string().into_bytes(),
                    V::B(x) => x.to_string().into_bytes(),
                };
                match xf {
                    Xform::ToLower => map_str(one(0), |s| s.to_ascii_lowercase()),
                    Xform::ToUpper => map_str(one(0), |s| s.to_ascii_uppercase()),
                    Xform::Basename => map_str(one(0), |s| {
                        let cut = s.iter().rposition(|&c| c == b'/').map_or(0, |i| i + 1);
                        s[cut..].to_vec()
                    }),
                    Xform::B64 => one(0)
                        .into_iter()
                        .filter_map(|v| match v {
                            V::S(s) => b64_decode(&s).map(V::S),
                            _ => None,
                        })
                        .collect(),
                    Xform::Len => {
                        let v = one(0);
                        match (&args[0], v.as_slice()) {
                            (Operand::Field { arg: FieldArg::None, field }, vals) if field.is_rich() => {
                                vec![V::N(vals.len() as i128)]
                            }
                            (_, [V::S(s)]) => vec![V::N(s.len() as i128)],
                            (_, []) => vec![],
                            (_, vals) => vec![V::N(vals.len() as i128)],
                        }
                    }
                    Xform::Concat => {
                        let mut out = Vec::new();
                        for a in args {
                            match a.values(b, row, ctx).first() {
                                Some(v) => out.extend(text(v)),
                                None => return vec![],
                            }
                        }
                        vec![V::S(out)]
                    }
                    Xform::Join => {
                        let sep = one(0).first().map(text).unwrap_or_default();
                        let mut parts: Vec<Vec<u8>> = Vec::new();
                        for a in &args[1..] {
                            parts.extend(a.values(b, row, ctx).iter().map(text));
                        }
                        vec![V::S(parts.join(&sep[..]))]
                    }
                }
            }
        }
    }
}

fn map_str(vals: Vec<V>, f: impl Fn(&[u8]) -> Vec<u8>) -> Vec<V> {
    vals.into_iter()
        .map(|v| match v {
            V::S(s) => V::S(f(&s)),
            other => other,
        })
        .collect()
}

/// Standard base64 (with or without padding); `None` when the text is not base64.
fn b64_decode(s: &[u8]) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let body = s.strip_suffix(b"==").or_else(|| s.strip_suffix(b"=")).unwrap_or(s);
    if body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// The field `evt.rawarg.NAME` reads.
pub(crate) fn rawarg(name: &str) -> Option<Field> {
    Some(match name {
        "fd" => Field::EvtArgFd,
        "size" | "len" => Field::EvtArgSize,
        "offset" | "pos" => Field::EvtArgOffset,
        "dirfd" => Field::EvtArgDirfd,
        "res" => Field::EvtRawres,
        "flags" | "mode" => Field::EvtRawarg,
        "name" | "path" => Field::EvtArgPath,
        "oldpath" => Field::EvtArgOldpath,
        "newpath" => Field::EvtArgNewpath,
        _ => return None,
    })
}

/// One value of a field that needs no argument.
fn plain(field: Field, b: &EventBatch, row: usize, ctx: &EvalContext) -> Option<V> {
    match field.info().ty {
        FieldType::String => {
            let mut s = Scratch::new();
            field.string(b, row, ctx, Some(&mut s)).map(|v| V::S(v.to_vec()))
        }
        FieldType::Bool => field.boolean(b, row).map(V::B),
        _ => field.num(b, row, ctx).map(V::N),
    }
}

/// The IP addresses of the socket of `row` that field `f` reads (fd.ip, fd.net: both ends;
/// fd.snet: the server's; fd.cnet: the client's).
fn sock_ips(f: Field, b: &EventBatch, row: usize, ctx: &EvalContext) -> Vec<V> {
    if b.kind.get(row) != Some(&0) {
        return vec![];
    }
    let Some(n) = sock(b, row) else { return vec![] };
    let ips: Vec<&str> = match f {
        Field::FdSnet => vec![ctx.sock_roles(&n).server.ip],
        Field::FdCnet => ctx.sock_roles(&n).client.map(|c| c.ip).into_iter().collect(),
        _ => std::iter::once(n.local.ip).chain(n.peer.map(|p| p.ip)).collect(),
    };
    ips.into_iter().map(|ip| V::S(ip.as_bytes().to_vec())).collect()
}

fn field_values(field: Field, arg: &FieldArg, b: &EventBatch, row: usize, ctx: &EvalContext) -> Vec<V> {
    match field {
        Field::FdIp | Field::FdNet | Field::FdSnet | Field::FdCnet => sock_ips(field, b, row, ctx),
        Field::FdPort if b.kind.get(row) == Some(&0) => match sock(b, row) {
            Some(n) => std::iter::once(n.local.port).chain(n.peer.map(|p| p.port)).map(|p| V::N(p.into())).collect(),
            None => vec![],
        },
        Field::ProcAname | Field::ProcApid => {
            let Some(&pid) = b.pid.get(row) else { return vec![] };
            let name = field == Field::ProcAname;
            // Ancestor 0 is the process itself; stop at loops and unknown parents.
            let mut out = Vec::new();
            let mut cur = Some(pid);
            let mut seen = 0;
            while let Some(p) = cur {
                if seen > 64 || (seen > 0 && p == 0) {
                    break;
                }
                let v = if name {
                    let c = if seen == 0 { crate::helpers::bytes_at(&b.comm, row).map(<[u8]>::to_vec) } else { None };
                    match c.or_else(|| ctx.comm(p).map(|s| s.as_bytes().to_vec())) {
                        Some(c) => V::S(c),
                        None => break,
                    }
                } else {
                    V::N(p.into())
                };
                out.push(v);
                seen += 1;
                cur = ctx.ppid(p);
            }
            match arg {
                FieldArg::Index(i) => out.into_iter().nth(*i).into_iter().collect(),
                // Without an index: the ancestors, not the process itself (as sysdig).
                _ => out.into_iter().skip(1).collect(),
            }
        }
        Field::EvtArgN => {
            let mut s = Scratch::new();
            let Some(all) = Field::EvtArgs.string(b, row, ctx, Some(&mut s)) else { return vec![] };
            let all = String::from_utf8_lossy(all);
            let v = match arg {
                FieldArg::Index(i) => nth_arg(&all, *i),
                FieldArg::Name(n) => named_arg(&all, n),
                FieldArg::None => None,
            };
            match v {
                Some(v) => vec![V::S(v.as_bytes().to_vec())],
                None => vec![],
            }
        }
        Field::EvtRawarg => {
            let FieldArg::Name(n) = arg else { return vec![] };
            match n.as_str() {
                "flags" | "mode" => {
                    if b.kind.get(row) != Some(&0) {
                        return vec![];
                    }
                    let d = latscope_event::syscalls::desc(b.nr.get(row).copied().unwrap_or(u16::MAX));
                    let (has, v) = if n == "flags" {
                        (d.flags != latscope_event::syscalls::NONE, b.flags.get(row).map(|&f| i128::from(f)))
                    } else {
                        (d.mode != latscope_event::syscalls::NONE, b.mode.get(row).map(|&m| i128::from(m)))
                    };
                    match (has, v) {
                        (true, Some(v)) => vec![V::N(v)],
                        _ => vec![],
                    }
                }
                other => match rawarg(other) {
                    Some(f) => plain(f, b, row, ctx).into_iter().collect(),
                    None => vec![],
                },
            }
        }
        f => plain(f, b, row, ctx).into_iter().collect(),
    }
}

/// The value of the `i`th `name=value` argument of an argument string as `latscope events`
/// prints it.
fn nth_arg(all: &str, i: usize) -> Option<&str> {
    all.split(' ').filter(|p| p.contains('=')).nth(i).and_then(|p| p.split_once('=')).map(|(_, v)| v)
}

/// The value of argument `name` of an argument string as `latscope events` prints it.
fn named_arg<'a>(all: &'a str, name: &str) -> Option<&'a str> {
    all.split(' ').find_map(|p| p.split_once('=').filter(|(n, _)| *n == name).map(|(_, v)| v))
}

/// A list modifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Modifier {
    /// Exactly one value satisfies the operator.
    One,
    /// At least one does.
    Any,
    /// Every one does.
    All,
}

/// The right-hand side of a general check.
#[derive(Debug, Clone)]
pub(crate) enum Rhs {
    /// Values typed at parse time (and compiled regular expressions for `regex`).
    Vals(Vec<V>, Vec<regex::bytes::Regex>),
    /// `val(field)` or a transformer: computed per event.
    Operand(Operand),
    /// `exists`.
    None,
}

impl PartialEq for Rhs {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Rhs::Vals(a, _), Rhs::Vals(b, _)) => a == b,
            (Rhs::Operand(a), Rhs::Operand(b)) => a == b,
            (Rhs::None, Rhs::None) => true,
            _ => false,
        }
    }
}
impl Eq for Rhs {}

/// A general check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rich {
    pub lhs: Operand,
    pub op: Op,
    pub modifier: Option<Modifier>,
    pub rhs: Rhs,
}

/// An IPv4/IPv6 network: address bits and prefix length.
pub(crate) fn parse_net(s: &str) -> Option<(std::net::IpAddr, u8)> {
    let (ip, len) = match s.split_once('/') {
        Some((ip, l)) => (ip, l.parse::<u8>().ok()?),
        None => (s, if s.contains(':') { 128 } else { 32 }),
    };
    let ip: std::net::IpAddr = ip.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((ip, len))
}

fn in_net(ip: &[u8], net: &[u8]) -> bool {
    let (Some(ip), Some((n, len))) = (
        std::str::from_utf8(ip).ok().and_then(|s| s.parse::<std::net::IpAddr>().ok()),
        std::str::from_utf8(net).ok().and_then(parse_net),
    ) else {
        return false;
    };
    let bits = |a: std::net::IpAddr| -> (u128, u32) {
        match a {
            std::net::IpAddr::V4(v) => (u128::from(u32::from(v)), 32),
            std::net::IpAddr::V6(v) => (u128::from(v), 128),
        }
    };
    let ((a, wa), (b, wb)) = (bits(ip), bits(n));
    if wa != wb {
        return false;
    }
    let shift = wa - u32::from(len);
    if shift >= 128 {
        return true;
    }
    (a >> shift) == (b >> shift)
}

impl Rich {
    fn is_net(&self) -> bool {
        matches!(self.lhs, Operand::Field { field: Field::FdNet | Field::FdSnet | Field::FdCnet, .. })
    }

    /// Does one left value satisfy the operator against one right value (`i`: its index)?
    fn one(&self, l: &V, r: &V, i: usize) -> bool {
        let ord = match (l, r) {
            (V::S(a), V::S(b)) => a.cmp(b),
            (V::N(a), V::N(b)) => a.cmp(b),
            (V::B(a), V::B(b)) => a.cmp(b),
            _ => return false,
        };
        let (ls, rs) = match (l, r) {
            (V::S(a), V::S(b)) => (&a[..], &b[..]),
            _ => (&[][..], &[][..]),
        };
        match self.op {
            Op::Eq | Op::In | Op::Intersects if self.is_net() => in_net(ls, rs),
            Op::Ne if self.is_net() => !in_net(ls, rs),
            Op::Eq | Op::In | Op::Intersects => ord == Ordering::Equal,
            Op::Ne => ord != Ordering::Equal,
            Op::Lt => ord == Ordering::Less,
            Op::Le => ord != Ordering::Greater,
            Op::Gt => ord == Ordering::Greater,
            Op::Ge => ord != Ordering::Less,
            Op::Contains => strops::contains(ls, rs),
            Op::IContains => strops::icontains(ls, &rs.to_ascii_lowercase()),
            Op::StartsWith | Op::BStartsWith => ls.starts_with(rs),
            Op::EndsWith => ls.ends_with(rs),
            Op::BContains => strops::contains(ls, rs),
            Op::Glob => strops::glob(rs, ls),
            Op::IGlob => strops::glob(&rs.to_ascii_lowercase(), &ls.to_ascii_lowercase()),
            Op::Pmatch => strops::pmatch(ls, &strops::normalize_dir(&String::from_utf8_lossy(rs))),
            Op::Regex => match &self.rhs {
                Rhs::Vals(_, res) => res.get(i).is_some_and(|re| re.is_match(ls)),
                _ => false,
            },
            Op::Exists => true,
        }
    }

    /// Evaluate on event `row`.
    pub(crate) fn eval(&self, b: &EventBatch, row: usize, ctx: &EvalContext) -> bool {
        let lhs = self.lhs.values(b, row, ctx);
        if lhs.is_empty() {
            return false;
        }
        let owned;
        let rhs: &[V] = match &self.rhs {
            Rhs::None => return true,
            Rhs::Vals(v, _) => v,
            Rhs::Operand(o) => {
                owned = o.values(b, row, ctx);
                if owned.is_empty() {
                    return false;
                }
                &owned
            }
        };
        // `!=` without a modifier: no value equals (neither end of fd.ip, no ancestor).
        if self.op == Op::Ne && self.modifier.is_none() {
            let eq = Rich { op: Op::Eq, ..self.clone() };
            return !lhs.iter().any(|l| rhs.iter().enumerate().any(|(i, r)| eq.one(l, r, i)));
        }
        lhs.iter().any(|l| {
            let hits = || rhs.iter().enumerate().filter(|(i, r)| self.one(l, r, *i));
            match self.modifier {
                Some(Modifier::One) => hits().count() == 1,
                Some(Modifier::Any) => hits().next().is_some(),
                // As libsinsp: `allof ()` holds for no value (no empty truth).
                Some(Modifier::All) => !rhs.is_empty() && hits().count() == rhs.len(),
                None => hits().next().is_some(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64() {
        assert_eq!(b64_decode(b"aGVsbG8="), Some(b"hello".to_vec()));
        assert_eq!(b64_decode(b"YWFhLWJiYg"), Some(b"aaa-bbb".to_vec()));
        assert_eq!(b64_decode(b"a"), None);
        assert_eq!(b64_decode(b"a!bc"), None);
    }

    #[test]
    fn networks() {
        assert!(in_net(b"10.1.2.3", b"10.0.0.0/8"));
        assert!(!in_net(b"11.1.2.3", b"10.0.0.0/8"));
        assert!(in_net(b"::1", b"::1/128"));
        assert!(!in_net(b"::1", b"10.0.0.0/8"));
        assert!(in_net(b"1.2.3.4", b"0.0.0.0/0"));
        assert!(parse_net("10.0.0.0/33").is_none());
    }

    #[test]
    fn args_by_index() {
        assert_eq!(nth_arg("fd=3(<f>/etc/hosts) bytes=4096 off=0", 1), Some("4096"));
        assert_eq!(nth_arg("fd=3", 1), None);
    }
}

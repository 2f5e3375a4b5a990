//! Parsing and type-checking: source text to an expression tree with typed values.

use crate::error::{column_of, did_you_mean, FilterError};
use crate::fields::{self, Field, FieldInfo, FieldType};
use crate::lexer::{lex, Sym, Tok, Token};
use crate::resolve;

/// Deepest nesting of parentheses and `not` accepted (keeps recursion bounded).
pub(crate) const MAX_DEPTH: usize = 200;

/// Largest magnitude of a numeric value (keeps range arithmetic exact).
const MAX_ABS: i128 = 1 << 64;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Exists,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Contains,
    IContains,
    StartsWith,
    EndsWith,
    Glob,
    In,
    Pmatch,
}

impl Op {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Exists => "exists",
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Contains => "contains",
            Op::IContains => "icontains",
            Op::StartsWith => "startswith",
            Op::EndsWith => "endswith",
            Op::Glob => "glob",
            Op::In => "in",
            Op::Pmatch => "pmatch",
        }
    }
    fn from_word(w: &str) -> Option<Op> {
        Some(match w.to_ascii_lowercase().as_str() {
            "exists" => Op::Exists,
            "contains" => Op::Contains,
            "icontains" => Op::IContains,
            "startswith" => Op::StartsWith,
            "endswith" => Op::EndsWith,
            "glob" => Op::Glob,
            "in" => Op::In,
            "pmatch" => Op::Pmatch,
            _ => return None,
        })
    }
    fn is_string_op(self) -> bool {
        matches!(self, Op::Contains | Op::IContains | Op::StartsWith | Op::EndsWith | Op::Glob | Op::Pmatch)
    }
    fn is_order_op(self) -> bool {
        matches!(self, Op::Lt | Op::Le | Op::Gt | Op::Ge)
    }
}

/// A typed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lit {
    Num(i128),
    Str(String),
    Bool(bool),
}

/// One field test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Check {
    pub field: Field,
    pub op: Op,
    pub vals: Vec<Lit>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExprKind {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    Check(Check),
}

/// An expression and the byte range of its source text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    pub start: usize,
    pub end: usize,
}

struct Parser<'s> {
    src: &'s str,
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
}

/// Parse a filter; `Ok(None)` for an empty (match-all) filter.
pub(crate) fn parse(src: &str) -> Result<Option<Expr>, FilterError> {
    let toks = lex(src)?;
    if toks.len() == 1 {
        return Ok(None);
    }
    let mut p = Parser { src, toks, pos: 0, depth: 0 };
    let e = p.or()?;
    let t = p.peek();
    match t.tok {
        Tok::Eof => Ok(Some(e)),
        Tok::RParen => {
            Err(p.err_at(&t, format!("unbalanced parentheses: ')' at column {} has no matching '('", p.col(t.start))))
        }
        _ => {
            let hint = if matches!(t.tok, Tok::Word(_)) { " (quote values that contain spaces)" } else { "" };
            Err(p.err_at(
                &t,
                format!(
                    "unexpected {} at column {}; expected 'and', 'or' or the end of the filter{hint}",
                    t.describe(src),
                    p.col(t.start)
                ),
            ))
        }
    }
}

fn is_connective(t: &Token) -> bool {
    t.is_kw("and") || t.is_kw("or")
}

impl<'s> Parser<'s> {
    fn peek(&self) -> Token {
        self.toks[self.pos.min(self.toks.len() - 1)].clone()
    }
    fn bump(&mut self) -> Token {
        let t = self.peek();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }
    fn col(&self, byte: usize) -> usize {
        column_of(self.src, byte)
    }
    fn err_at(&self, t: &Token, msg: String) -> FilterError {
        FilterError::new(msg, self.src, t.start, t.end)
    }
    fn err(&self, start: usize, end: usize, msg: String) -> FilterError {
        FilterError::new(msg, self.src, start, end)
    }

    fn enter(&mut self, t: &Token) -> Result<(), FilterError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err_at(t, format!("filter nested too deeply (more than {MAX_DEPTH} levels)")));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        let first = self.and()?;
        let mut items = vec![first];
        while self.peek().is_kw("or") {
            self.bump();
            items.push(self.and()?);
        }
        Ok(join(items, ExprKind::Or))
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        let first = self.not()?;
        let mut items = vec![first];
        while self.peek().is_kw("and") {
            self.bump();
            items.push(self.not()?);
        }
        Ok(join(items, ExprKind::And))
    }

    fn not(&mut self) -> Result<Expr, FilterError> {
        let t = self.peek();
        if t.is_kw("not") {
            self.enter(&t)?;
            self.bump();
            let inner = self.not()?;
            self.depth -= 1;
            let end = inner.end;
            return Ok(Expr { kind: ExprKind::Not(Box::new(inner)), start: t.start, end });
        }
        if t.tok == Tok::LParen {
            self.enter(&t)?;
            self.bump();
            if self.peek().tok == Tok::RParen {
                let r = self.peek();
                return Err(self.err(t.start, r.end, format!("empty parentheses at column {}", self.col(t.start))));
            }
            let mut inner = self.or()?;
            self.depth -= 1;
            let close = self.peek();
            if close.tok != Tok::RParen {
                if close.tok == Tok::Eof {
                    return Err(self.err_at(
                        &t,
                        format!("unbalanced parentheses: '(' at column {} is never closed", self.col(t.start)),
                    ));
                }
                return Err(self.err_at(
                    &close,
                    format!(
                        "unexpected {} at column {}; expected 'and', 'or' or ')' to close the '(' at column {}",
                        close.describe(self.src),
                        self.col(close.start),
                        self.col(t.start)
                    ),
                ));
            }
            self.bump();
            inner.start = t.start;
            inner.end = close.end;
            return Ok(inner);
        }
        self.check()
    }

    fn check(&mut self) -> Result<Expr, FilterError> {
        let t = self.bump();
        let word = match &t.tok {
            Tok::Word(w) if !is_connective(&t) && !t.is_kw("not") => w.clone(),
            _ => {
                let extra = match &t.tok {
                    Tok::Eof => "",
                    Tok::Quoted(_) => "; drop the quotes around the whole filter (quote values only)",
                    _ => " (a filter is field, operator, value: proc.name = httpd)",
                };
                return Err(self.err_at(
                    &t,
                    format!(
                        "expected a field name at column {}, found {}{extra}",
                        self.col(t.start),
                        t.describe(self.src)
                    ),
                ));
            }
        };
        let info = self.field(&t, &word)?;
        let op_tok = self.peek();
        let op = match &op_tok.tok {
            Tok::Sym(s) => match s {
                Sym::Eq => Op::Eq,
                Sym::Ne => Op::Ne,
                Sym::Lt => Op::Lt,
                Sym::Le => Op::Le,
                Sym::Gt => Op::Gt,
                Sym::Ge => Op::Ge,
            },
            Tok::Word(w) if Op::from_word(w).is_some() => Op::from_word(w).unwrap_or(Op::Exists),
            // Extension: a boolean field alone means `= true`.
            Tok::Eof | Tok::RParen if info.ty == FieldType::Bool => {
                return Ok(self.bool_shorthand(info, &t));
            }
            Tok::Word(_) if info.ty == FieldType::Bool && is_connective(&op_tok) => {
                return Ok(self.bool_shorthand(info, &t));
            }
            _ => {
                return Err(self.err_at(
                    &op_tok,
                    format!(
                        "expected an operator after {} at column {}, found {} (operators: = != < <= > >= contains icontains startswith endswith glob in pmatch exists)",
                        info.name,
                        self.col(op_tok.start),
                        op_tok.describe(self.src)
                    ),
                ));
            }
        };
        self.bump();
        self.type_check(info, op, &op_tok)?;
        let mut end = op_tok.end;
        let vals = match op {
            Op::Exists => Vec::new(),
            Op::In | Op::Pmatch => {
                let (vals, e) = self.list(info, op, &op_tok)?;
                end = e;
                vals
            }
            _ => {
                let (v, e) = self.value(info, op, &op_tok)?;
                end = e;
                vec![v]
            }
        };
        Ok(Expr { kind: ExprKind::Check(Check { field: info.field, op, vals }), start: t.start, end })
    }

    fn bool_shorthand(&self, info: &FieldInfo, t: &Token) -> Expr {
        Expr {
            kind: ExprKind::Check(Check { field: info.field, op: Op::Eq, vals: vec![Lit::Bool(true)] }),
            start: t.start,
            end: t.end,
        }
    }

    /// Resolve a field name (with an optional `[argument]`, which no field takes yet).
    fn field(&self, t: &Token, word: &str) -> Result<&'static FieldInfo, FilterError> {
        let (name, arg) = match word.find('[') {
            Some(i) => (&word[..i], Some(&word[i..])),
            None => (word, None),
        };
        let lower = name.to_ascii_lowercase();
        let Some(info) = fields::lookup(&lower) else {
            let names = fields::fields().iter().map(|f| f.name);
            if name.contains(['\u{201c}', '\u{201d}', '\u{2018}', '\u{2019}']) {
                return Err(self.err(
                    t.start,
                    t.start + name.len(),
                    format!(
                        "unknown field '{name}' at column {}: typographic quotes (\u{201c} \u{201d}) are not quotes; use ' or \" around values, and none around the whole filter",
                        self.col(t.start)
                    ),
                ));
            }
            return Err(self.err(
                t.start,
                t.start + name.len(),
                format!("unknown field '{name}' at column {}{}", self.col(t.start), did_you_mean(&lower, names)),
            ));
        };
        if let Some(arg) = arg {
            let s = t.start + name.len();
            return Err(self.err(
                s,
                s + arg.len(),
                format!("field {} takes no argument (at column {})", info.name, self.col(s)),
            ));
        }
        Ok(info)
    }

    fn type_check(&self, info: &FieldInfo, op: Op, t: &Token) -> Result<(), FilterError> {
        let ty = info.ty;
        let msg = if op.is_string_op() && ty != FieldType::String {
            Some(format!("operator '{}' needs a string field; {} is {}", op.name(), info.name, ty.with_article()))
        } else if op.is_order_op() && !ty.is_numeric() {
            Some(format!("operator '{}' needs a numeric field; {} is {}", op.name(), info.name, ty.with_article()))
        } else if op == Op::In && ty == FieldType::Bool {
            Some(format!("operator 'in' does not apply to {}, a boolean; use = true or = false", info.name))
        } else {
            None
        };
        match msg {
            Some(m) => Err(self.err_at(t, m)),
            None => Ok(()),
        }
    }

    /// `( v, v, ... )` after `in` / `pmatch`; commas are optional.
    fn list(&mut self, info: &FieldInfo, op: Op, op_tok: &Token) -> Result<(Vec<Lit>, usize), FilterError> {
        let open = self.bump();
        if open.tok != Tok::LParen {
            return Err(self.err_at(
                &open,
                format!(
                    "expected '(' after '{}' at column {}, found {}: write {} {} (a, b)",
                    op.name(),
                    self.col(open.start),
                    open.describe(self.src),
                    info.name,
                    op.name()
                ),
            ));
        }
        let mut vals = Vec::new();
        loop {
            let t = self.bump();
            match &t.tok {
                Tok::RParen if vals.is_empty() => {
                    return Err(self.err(
                        open.start,
                        t.end,
                        format!("empty list after '{}' at column {}", op.name(), self.col(op_tok.start)),
                    ));
                }
                Tok::RParen => return Ok((vals, t.end)),
                Tok::Comma if !vals.is_empty() => {}
                Tok::Word(w) => vals.push(self.typed(info, op, w, false, t.start, t.end)?),
                Tok::Quoted(s) => vals.push(self.typed(info, op, s, true, t.start, t.end)?),
                Tok::Eof => {
                    return Err(self.err_at(
                        &open,
                        format!(
                            "unbalanced parentheses: the list '(' at column {} is never closed",
                            self.col(open.start)
                        ),
                    ));
                }
                _ => {
                    return Err(self.err_at(
                        &t,
                        format!("unexpected {} in the list at column {}", t.describe(self.src), self.col(t.start)),
                    ));
                }
            }
        }
    }

    /// One value after a comparison operator.
    fn value(&mut self, info: &FieldInfo, op: Op, op_tok: &Token) -> Result<(Lit, usize), FilterError> {
        let t = self.peek();
        match &t.tok {
            Tok::Quoted(s) => {
                self.bump();
                Ok((self.typed(info, op, s, true, t.start, t.end)?, t.end))
            }
            Tok::Word(w) if !is_connective(&t) => {
                self.bump();
                let mut text = w.clone();
                let mut end = t.end;
                // `5 ms`, `5 parsecs`: a number followed by a word is one value with a unit.
                let next = self.peek();
                if let Tok::Word(unit) = &next.tok {
                    let unit_type = matches!(info.ty, FieldType::Duration | FieldType::Size | FieldType::Timestamp);
                    let numeric = !w.is_empty() && w.chars().all(|c| c.is_ascii_digit() || c == '.' || c == '_');
                    if unit_type && numeric && !is_connective(&next) {
                        self.bump();
                        text = format!("{w} {unit}");
                        end = next.end;
                    }
                }
                Ok((self.typed(info, op, &text, false, t.start, end)?, end))
            }
            _ => {
                let hint = if t.tok == Tok::LParen { "; lists take 'in (a, b)'" } else { "" };
                Err(self.err_at(
                    &t,
                    format!(
                        "missing value after '{}' at column {}, found {}{hint}",
                        op.name(),
                        self.col(op_tok.start),
                        t.describe(self.src)
                    ),
                ))
            }
        }
    }

    /// Convert value text to the field's type, checking names of enumerated fields.
    fn typed(
        &self,
        info: &FieldInfo,
        op: Op,
        text: &str,
        quoted: bool,
        start: usize,
        end: usize,
    ) -> Result<Lit, FilterError> {
        let bad = |why: String| {
            let shown = if quoted { format!("{text:?}") } else { format!("'{text}'") };
            self.err(start, end, format!("bad value {shown} for {} at column {}: {why}", info.name, self.col(start)))
        };
        match info.ty {
            FieldType::String => {
                if matches!(op, Op::Eq | Op::Ne | Op::In) {
                    resolve::validate(info.field, text).map_err(|(what, tail)| {
                        self.err(start, end, format!("{what} at column {}{tail}", self.col(start)))
                    })?;
                    return Ok(Lit::Str(resolve::canonical(info.field, text)));
                }
                Ok(Lit::Str(text.to_string()))
            }
            FieldType::Bool => match text.to_ascii_lowercase().as_str() {
                "true" | "1" => Ok(Lit::Bool(true)),
                "false" | "0" => Ok(Lit::Bool(false)),
                _ => Err(bad("expected true or false".into())),
            },
            ty => {
                let v = parse_number(info.field, ty, text).map_err(bad)?;
                if v.abs() > MAX_ABS {
                    return Err(bad("out of range".into()));
                }
                Ok(Lit::Num(v))
            }
        }
    }
}

/// Build an and/or node, flattening nested ones of the same kind.
fn join(items: Vec<Expr>, make: fn(Vec<Expr>) -> ExprKind) -> Expr {
    if items.len() == 1 {
        return items.into_iter().next().expect("one item");
    }
    let start = items.first().map_or(0, |e| e.start);
    let end = items.last().map_or(0, |e| e.end);
    let is_and = matches!(make(Vec::new()), ExprKind::And(_));
    let mut flat = Vec::with_capacity(items.len());
    for e in items {
        match e.kind {
            ExprKind::And(v) if is_and => flat.extend(v),
            ExprKind::Or(v) if !is_and => flat.extend(v),
            kind => flat.push(Expr { kind, ..e }),
        }
    }
    Expr { kind: make(flat), start, end }
}

/// An integer in decimal or `0x` hex, with an optional sign and `_` separators.
fn parse_int(s: &str) -> Option<i128> {
    let s: String = s.chars().filter(|&c| c != '_').collect();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(&s)),
    };
    if body.is_empty() || body.len() > 40 {
        return None;
    }
    let v = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i128::from_str_radix(h, 16).ok()?
    } else if body.bytes().all(|b| b.is_ascii_digit()) {
        body.parse::<i128>().ok()?
    } else {
        return None;
    };
    Some(if neg { -v } else { v })
}

/// Parse a numeric value of type `ty` for `field`.
fn parse_number(field: Field, ty: FieldType, text: &str) -> Result<i128, String> {
    if let Some(v) = parse_int(text) {
        return Ok(v);
    }
    let t = text.trim();
    match ty {
        FieldType::Timestamp => match crate::helpers::parse_clock_time(t) {
            Some(r) => r,
            None => latscope_event::units::parse_duration_ns(t).map(i128::from).map_err(|e| {
                format!("{e}; a time is ns since the Unix epoch or a date and time (2026-11-22T22:30:13Z)")
            }),
        },
        FieldType::Duration => latscope_event::units::parse_duration_ns(t).map(i128::from),
        FieldType::Size => latscope_event::units::parse_size(t).map(i128::from),
        _ => {
            if field == Field::EvtArgDirfd {
                return if t == "AT_FDCWD" { Ok(-100) } else { Err("expected an integer or AT_FDCWD".into()) };
            }
            if field == Field::EvtRawres {
                if let Some(e) = latscope_event::errno_value(t).filter(|_| t.starts_with(['E', 'e'])) {
                    return Ok(-i128::from(e));
                }
                return Err("expected an integer or an errno name (ENOENT)".into());
            }
            Err("expected an integer".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints() {
        assert_eq!(parse_int("42"), Some(42));
        assert_eq!(parse_int("-42"), Some(-42));
        assert_eq!(parse_int("+1_000"), Some(1000));
        assert_eq!(parse_int("0x1F"), Some(31));
        assert_eq!(parse_int("1ms"), None);
        assert_eq!(parse_int("-"), None);
        assert_eq!(parse_int(&"9".repeat(60)), None);
    }

    #[test]
    fn numbers_by_type() {
        assert_eq!(parse_number(Field::EvtLatency, FieldType::Duration, "1ms"), Ok(1_000_000));
        assert_eq!(parse_number(Field::EvtLatency, FieldType::Duration, "250us"), Ok(250_000));
        assert!(parse_number(Field::EvtLatency, FieldType::Duration, "5 parsecs").unwrap_err().contains("parsecs"));
        assert_eq!(parse_number(Field::EvtBuflen, FieldType::Size, "4KiB"), Ok(4096));
        assert_eq!(parse_number(Field::EvtRawres, FieldType::Number, "ENOENT"), Ok(-2));
        assert!(parse_number(Field::ProcPid, FieldType::Number, "ENOENT").is_err());
        assert!(parse_number(Field::ProcPid, FieldType::Number, "1ms").is_err());
    }

    #[test]
    fn flattening_and_spans() {
        let e = parse("a.b = 1").err().unwrap();
        assert!(e.message().starts_with("unknown field 'a.b'"));
        let e = parse("(proc.pid=1 and proc.pid=2) and (thread.tid=3 or thread.tid=4)").unwrap().unwrap();
        let ExprKind::And(items) = &e.kind else { panic!("{e:?}") };
        assert_eq!(items.len(), 3);
        assert_eq!((items[2].start, items[2].end), (32, 62));
        assert!(parse("   ").unwrap().is_none());
    }
}

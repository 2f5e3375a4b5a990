//! Parsing and type-checking: source text to an expression tree with typed values.

use crate::error::{column_of, did_you_mean, FilterError};
use crate::fields::{self, Field, FieldInfo, FieldType};
use crate::lexer::{lex, Sym, Tok, Token};
use crate::resolve;
use crate::rich::{self, FieldArg, Modifier, Operand, Rhs, Rich, Xform, V};

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
    Intersects,
    IGlob,
    Regex,
    BContains,
    BStartsWith,
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
            Op::Intersects => "intersects",
            Op::IGlob => "iglob",
            Op::Regex => "regex",
            Op::BContains => "bcontains",
            Op::BStartsWith => "bstartswith",
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
            "intersects" => Op::Intersects,
            "iglob" => Op::IGlob,
            "regex" => Op::Regex,
            "bcontains" => Op::BContains,
            "bstartswith" => Op::BStartsWith,
            _ => return None,
        })
    }
    fn is_string_op(self) -> bool {
        matches!(
            self,
            Op::Contains
                | Op::IContains
                | Op::StartsWith
                | Op::EndsWith
                | Op::Glob
                | Op::Pmatch
                | Op::IGlob
                | Op::Regex
        )
    }
    fn is_list_op(self) -> bool {
        matches!(self, Op::In | Op::Intersects | Op::Pmatch)
    }
    /// Operators a list modifier (`oneof`, `anyof`, `allof`) may follow.
    fn takes_modifier(self) -> bool {
        !(self.is_order_op() || self.is_list_op() || self == Op::Exists)
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
    /// The general form (transformers, `val()`, modifiers, ...): see [`crate::rich`].
    Rich(Box<Rich>),
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
        let (lhs, info) = if self.call_follows(&t) {
            if word == "val" {
                return Err(self.err_at(
                    &t,
                    format!(
                        "val() at column {} compares with a field: it goes right of the operator",
                        self.col(t.start)
                    ),
                ));
            }
            (self.transformer(&t, &word, 0)?, None)
        } else {
            let (info, arg) = self.field_ref(&t, &word)?;
            (Operand::Field { field: info.field.canonical(), arg }, Some(info))
        };
        let ty = lhs.ty();
        let name = match info {
            Some(i) => i.name.to_string(),
            None => self.src[t.start..t.end].to_string() + "(...)",
        };
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
            Tok::Eof | Tok::RParen if ty == FieldType::Bool && info.is_some() => {
                return Ok(self.bool_shorthand(info.unwrap_or(fields::fields().first().expect("fields")), &t));
            }
            Tok::Word(_) if ty == FieldType::Bool && info.is_some() && is_connective(&op_tok) => {
                return Ok(self.bool_shorthand(info.unwrap_or(fields::fields().first().expect("fields")), &t));
            }
            _ => {
                return Err(self.err_at(
                    &op_tok,
                    format!(
                        "expected an operator after {name} at column {}, found {} (operators: = != < <= > >= contains icontains startswith endswith glob iglob regex in intersects pmatch exists)",
                        self.col(op_tok.start),
                        op_tok.describe(self.src)
                    ),
                ));
            }
        };
        self.bump();
        self.type_check(&name, &lhs, op, &op_tok)?;
        let mut end = op_tok.end;
        let mut modifier = None;
        let rhs = if op == Op::Exists {
            Rhs::None
        } else if let Some(m) = self.modifier(op, &op_tok)? {
            modifier = Some(m);
            let (vals, e) = self.list(&lhs, info, op, &op_tok)?;
            end = e;
            self.rhs_vals(&lhs, op, vals)?
        } else if op.is_list_op() {
            let (vals, e) = self.list(&lhs, info, op, &op_tok)?;
            end = e;
            self.rhs_vals(&lhs, op, vals)?
        } else {
            let v = self.peek();
            if matches!(&v.tok, Tok::Word(_)) && self.call_follows_peeked(&v) {
                self.bump();
                let Tok::Word(w) = &v.tok else { unreachable!("matched a word") };
                let rhs = if w == "val" { self.val(&v)? } else { self.transformer(&v, w, 0)? };
                end = self.toks[self.pos.saturating_sub(1)].end;
                let (a, b) = (class(ty), class(rhs.ty()));
                if a != b {
                    return Err(self.err(
                        v.start,
                        end,
                        format!(
                            "cannot compare {name}, {}, with {}, {}",
                            ty.with_article(),
                            &self.src[v.start..end],
                            rhs.ty().with_article()
                        ),
                    ));
                }
                Rhs::Operand(rhs)
            } else {
                let (lit, e) = self.value(&lhs, info, op, &op_tok)?;
                end = e;
                self.rhs_vals(&lhs, op, vec![(lit, v.start, e)])?
            }
        };
        // The column fast paths take plain fields with the operators and types they know.
        let simple = match (&lhs, &rhs) {
            (Operand::Field { field, arg: FieldArg::None }, Rhs::Vals(..) | Rhs::None) => {
                !field.is_rich()
                    && modifier.is_none()
                    && match op {
                        Op::Exists => true,
                        Op::Eq | Op::Ne => true,
                        Op::In | Op::Intersects => ty != FieldType::Bool,
                        o if o.is_order_op() => ty.is_numeric(),
                        Op::Contains | Op::IContains | Op::StartsWith | Op::EndsWith | Op::Glob | Op::Pmatch => true,
                        _ => false,
                    }
            }
            _ => false,
        };
        let kind = if simple {
            let field = lhs.field().expect("a plain field");
            let vals = match rhs {
                Rhs::Vals(v, _) => v.into_iter().map(lit_of).collect(),
                _ => Vec::new(),
            };
            let op = if op == Op::Intersects { Op::In } else { op };
            ExprKind::Check(Check { field, op, vals })
        } else {
            ExprKind::Rich(Box::new(Rich { lhs, op, modifier, rhs }))
        };
        Ok(Expr { kind, start: t.start, end })
    }

    /// Is token `t` a name directly followed by `(` (a transformer or `val`)?
    fn call_follows(&self, t: &Token) -> bool {
        let next = self.peek();
        next.tok == Tok::LParen && next.start == t.end && matches!(&t.tok, Tok::Word(w) if is_call_name(w))
    }
    /// [`Parser::call_follows`] for the token under the cursor.
    fn call_follows_peeked(&self, t: &Token) -> bool {
        let next = &self.toks[(self.pos + 1).min(self.toks.len() - 1)];
        next.tok == Tok::LParen && next.start == t.end && matches!(&t.tok, Tok::Word(w) if is_call_name(w))
    }

    /// A list modifier after `op`, if one is there (`== anyof (a, b)`).
    fn modifier(&mut self, op: Op, op_tok: &Token) -> Result<Option<Modifier>, FilterError> {
        let t = self.peek();
        let m = match &t.tok {
            Tok::Word(w) if w == "oneof" => Modifier::One,
            Tok::Word(w) if w == "anyof" => Modifier::Any,
            Tok::Word(w) if w == "allof" => Modifier::All,
            _ => return Ok(None),
        };
        let next = self.toks[(self.pos + 1).min(self.toks.len() - 1)].clone();
        if next.tok != Tok::LParen {
            // A value that happens to read `oneof`.
            return Ok(None);
        }
        if next.start == t.end || t.start == op_tok.end {
            return Err(self.err_at(
                &t,
                format!(
                    "white space must surround the list modifier {} at column {}: {} {} (a, b)",
                    t.describe(self.src),
                    self.col(t.start),
                    op.name(),
                    t.describe(self.src).trim_matches('\'')
                ),
            ));
        }
        if !op.takes_modifier() {
            return Err(self.err_at(
                &t,
                format!(
                    "operator '{}' takes no {} list modifier (=, !=, contains, startswith, glob, ... do)",
                    op.name(),
                    t.describe(self.src)
                ),
            ));
        }
        self.bump();
        Ok(Some(m))
    }

    /// `val(field)` (the name and `(` read): the field's value on the same event.
    fn val(&mut self, name: &Token) -> Result<Operand, FilterError> {
        self.bump();
        let t = self.bump();
        let Tok::Word(w) = &t.tok else {
            return Err(self.err_at(
                &t,
                format!("val() takes a field at column {}, found {}", self.col(t.start), t.describe(self.src)),
            ));
        };
        if self.call_follows(&t) {
            return Err(
                self.err_at(&t, format!("val() takes a field, not a transformer (column {})", self.col(t.start)))
            );
        }
        let (info, arg) = self.field_ref(&t, w)?;
        self.close(name)?;
        Ok(Operand::Field { field: info.field.canonical(), arg })
    }

    /// Expect the `)` closing the call opened by `name`.
    fn close(&mut self, name: &Token) -> Result<Token, FilterError> {
        let t = self.bump();
        if t.tok != Tok::RParen {
            return Err(self.err_at(
                &t,
                format!(
                    "expected ')' to close {}( at column {}, found {}",
                    self.src.get(name.start..name.end).unwrap_or("?"),
                    self.col(name.start),
                    t.describe(self.src)
                ),
            ));
        }
        Ok(t)
    }

    /// A transformer call (the name read, `(` next): `tolower(proc.name)`, `len(fd.name)`,
    /// `concat(a, b)`, `join("-", (a, b))`.
    fn transformer(&mut self, name: &Token, word: &str, depth: usize) -> Result<Operand, FilterError> {
        let Some(xf) = Xform::from_name(word) else {
            let known = "tolower, toupper, b64, basename, len, concat, join";
            return Err(self.err_at(
                name,
                format!("unknown transformer '{word}' at column {} (latscope knows {known})", self.col(name.start)),
            ));
        };
        if depth > 16 {
            return Err(self.err_at(name, "transformers nested too deeply".into()));
        }
        self.bump();
        let mut args = Vec::new();
        match xf {
            Xform::Concat => loop {
                args.push(self.xf_arg(depth, false)?);
                let t = self.peek();
                if t.tok == Tok::Comma {
                    self.bump();
                    continue;
                }
                if args.len() < 2 {
                    return Err(self.err_at(&t, "concat() takes at least two arguments".into()));
                }
                break;
            },
            Xform::Join => {
                // The separator: a string, a field or a transformer.
                args.push(self.xf_arg(depth, false)?);
                let c = self.bump();
                let open = self.bump();
                if c.tok != Tok::Comma || open.tok != Tok::LParen {
                    return Err(self.err_at(&open, "join() takes a list second: join(\"-\", (a, b))".into()));
                }
                if self.peek().tok == Tok::RParen {
                    self.bump();
                } else {
                    loop {
                        args.push(self.xf_arg(depth, false)?);
                        let t = self.bump();
                        match t.tok {
                            Tok::Comma => continue,
                            Tok::RParen => break,
                            _ => {
                                return Err(self.err_at(
                                    &t,
                                    format!("expected ',' or ')' in join()'s list, found {}", t.describe(self.src)),
                                ))
                            }
                        }
                    }
                }
            }
            _ => {
                let a = self.xf_arg(depth, true)?;
                if xf != Xform::Len && a.ty() != FieldType::String {
                    return Err(self.err_at(name, format!("{word}() takes a string, not {}", a.ty().with_article())));
                }
                args.push(a);
            }
        }
        self.close(name)?;
        Ok(Operand::Xf { xf, args })
    }

    /// One argument of a transformer: a field or a transformer; also quoted strings and numbers
    /// unless `field_only`.
    fn xf_arg(&mut self, depth: usize, field_only: bool) -> Result<Operand, FilterError> {
        let t = self.bump();
        match &t.tok {
            Tok::Word(w) if self.call_follows(&t) => {
                if w == "val" {
                    return Err(self.err_at(&t, "val() cannot be nested in a transformer".into()));
                }
                self.transformer(&t, &w.clone(), depth + 1)
            }
            Tok::Word(w) if !field_only && parse_int(w).is_some() => Ok(Operand::Lit(V::N(parse_int(w).unwrap_or(0)))),
            Tok::Word(w) if w.contains('.') => {
                let (info, arg) = self.field_ref(&t, w)?;
                Ok(Operand::Field { field: info.field.canonical(), arg })
            }
            Tok::Quoted(s) if !field_only => Ok(Operand::Lit(V::S(s.clone().into_bytes()))),
            _ => Err(self.err_at(
                &t,
                format!(
                    "expected a field or a transformer at column {}, found {}",
                    self.col(t.start),
                    t.describe(self.src)
                ),
            )),
        }
    }

    fn bool_shorthand(&self, info: &FieldInfo, t: &Token) -> Expr {
        Expr {
            kind: ExprKind::Check(Check { field: info.field.canonical(), op: Op::Eq, vals: vec![Lit::Bool(true)] }),
            start: t.start,
            end: t.end,
        }
    }

    /// Resolve a field name with its argument: `proc.aname[2]`, `evt.arg[0]`, `evt.rawarg.size`.
    fn field_ref(&self, t: &Token, word: &str) -> Result<(&'static FieldInfo, FieldArg), FilterError> {
        let (name, arg) = match word.find('[') {
            Some(i) => (&word[..i], Some(&word[i..])),
            None => (word, None),
        };
        let lower = name.to_ascii_lowercase();
        if let Some(raw) = lower.strip_prefix("evt.rawarg.") {
            if arg.is_none() && rich::rawarg(raw).is_some() {
                return Ok((Field::EvtRawarg.info(), FieldArg::Name(raw.to_string())));
            }
            return Err(self.err(
                t.start,
                t.end,
                format!(
                    "evt.rawarg.{raw} at column {}: latscope records the arguments fd, size, offset, pos, dirfd, flags, mode, res, name, path, oldpath, newpath",
                    self.col(t.start)
                ),
            ));
        }
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
        let indexed = matches!(info.field, Field::ProcAname | Field::ProcApid | Field::EvtArgN);
        let s = t.start + name.len();
        match arg {
            None if info.field == Field::EvtArgN || info.field == Field::EvtRawarg => Err(self.err(
                t.start,
                t.end,
                format!("{} at column {} takes an argument: evt.arg[0], evt.rawarg.size", info.name, self.col(t.start)),
            )),
            None => Ok((info, FieldArg::None)),
            Some(a) => {
                let inner = a
                    .strip_prefix('[')
                    .and_then(|x| x.strip_suffix(']'))
                    .filter(|x| !x.is_empty() && !x.contains(['[', ']', '"', '\'']));
                let Some(inner) = inner else {
                    return Err(self.err(
                        s,
                        s + a.len(),
                        format!("bad field argument {a} at column {}: write {}[N]", self.col(s), info.name),
                    ));
                };
                if !indexed {
                    return Err(self.err(
                        s,
                        s + a.len(),
                        format!("field {} takes no argument (at column {})", info.name, self.col(s)),
                    ));
                }
                match inner.parse::<usize>() {
                    Ok(i) if i < 4096 => Ok((info, FieldArg::Index(i))),
                    // evt.arg[fd]: an argument by name.
                    Err(_)
                        if info.field == Field::EvtArgN
                            && inner.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') =>
                    {
                        Ok((info, FieldArg::Name(inner.to_string())))
                    }
                    _ => Err(self.err(
                        s,
                        s + a.len(),
                        format!(
                            "{} takes a number in brackets at column {} ({}[1])",
                            info.name,
                            self.col(s),
                            info.name
                        ),
                    )),
                }
            }
        }
    }

    /// Which operators a value type takes, as libsinsp decides: every type `exists`, `=`, `!=`,
    /// `in`, `intersects`; numbers and strings the orderings; strings the string operators;
    /// addresses and networks (`fd.ip`, `fd.net`) only the equality and list ones; no field
    /// latscope records is a byte buffer (`bcontains`, `bstartswith`).
    fn type_check(&self, name: &str, lhs: &Operand, op: Op, t: &Token) -> Result<(), FilterError> {
        let ty = lhs.ty();
        let addr =
            matches!(lhs, Operand::Field { field: Field::FdIp | Field::FdNet | Field::FdSnet | Field::FdCnet, .. });
        let msg = match op {
            Op::Exists | Op::Eq | Op::Ne | Op::In | Op::Intersects => None,
            Op::BContains | Op::BStartsWith => Some(format!(
                "operator '{}' needs a byte-buffer field (evt.buffer); {name} is {}, and latscope records no buffers",
                op.name(),
                ty.with_article()
            )),
            o if o.is_order_op() && (ty == FieldType::Bool || addr) => Some(format!(
                "operator '{}' needs a number or a string; {name} is {}",
                o.name(),
                if addr { "an address" } else { ty.with_article() }
            )),
            o if o.is_string_op() && (ty != FieldType::String || addr) => Some(format!(
                "operator '{}' needs a string field; {name} is {}",
                o.name(),
                if addr { "an address" } else { ty.with_article() }
            )),
            _ => None,
        };
        match msg {
            Some(m) => Err(self.err_at(t, m)),
            None => Ok(()),
        }
    }

    /// `( v, v, ... )` after `in`, `intersects`, `pmatch` or a modifier: commas between values
    /// are optional, but none may lead, trail or double; the list may be empty.
    fn list(
        &mut self,
        lhs: &Operand,
        info: Option<&FieldInfo>,
        op: Op,
        op_tok: &Token,
    ) -> Result<(Vec<Spanned>, usize), FilterError> {
        let open = self.bump();
        if open.tok != Tok::LParen {
            return Err(self.err_at(
                &open,
                format!(
                    "expected '(' after '{}' at column {}, found {}: write {} (a, b)",
                    op.name(),
                    self.col(open.start),
                    open.describe(self.src),
                    op.name()
                ),
            ));
        }
        let mut vals = Vec::new();
        let mut after_comma = false;
        loop {
            let t = self.bump();
            match &t.tok {
                Tok::RParen if after_comma => {
                    return Err(
                        self.err_at(&t, format!("a value is missing before ')' at column {}", self.col(t.start)))
                    );
                }
                Tok::RParen => return Ok((vals, t.end)),
                Tok::Comma if !vals.is_empty() && !after_comma => after_comma = true,
                Tok::Comma => {
                    return Err(
                        self.err_at(&t, format!("a value is missing before ',' at column {}", self.col(t.start)))
                    );
                }
                Tok::Word(w) => {
                    vals.push((self.typed_for(lhs, info, op, w, false, t.start, t.end)?, t.start, t.end));
                    after_comma = false;
                }
                Tok::Quoted(s) => {
                    vals.push((self.typed_for(lhs, info, op, s, true, t.start, t.end)?, t.start, t.end));
                    after_comma = false;
                }
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
                    let _ = op_tok;
                    return Err(self.err_at(
                        &t,
                        format!("unexpected {} in the list at column {}", t.describe(self.src), self.col(t.start)),
                    ));
                }
            }
        }
    }

    /// A value typed for the left side: by its field ([`Parser::typed`]) or, for transformers,
    /// as text (a number for `len`).
    #[allow(clippy::too_many_arguments)]
    fn typed_for(
        &self,
        lhs: &Operand,
        info: Option<&FieldInfo>,
        op: Op,
        text: &str,
        quoted: bool,
        start: usize,
        end: usize,
    ) -> Result<Lit, FilterError> {
        let net = matches!(lhs, Operand::Field { field: Field::FdNet | Field::FdSnet | Field::FdCnet, .. });
        let ip = matches!(lhs, Operand::Field { field: Field::FdIp, .. });
        let ordered = op.is_order_op();
        if net || ip {
            let ok = if net { rich::parse_net(text).is_some() } else { resolve::ip(text).is_some() };
            if !ok {
                let what =
                    if net { "a network (10.0.0.0/8, fe80::/10, or an address)" } else { "an IPv4 or IPv6 address" };
                return Err(self.err(
                    start,
                    end,
                    format!("bad value '{text}' at column {}: expected {what}", self.col(start)),
                ));
            }
            return Ok(Lit::Str(if ip { resolve::canonical(Field::FdSip, text) } else { text.to_string() }));
        }
        match (info, lhs) {
            (Some(info), Operand::Field { arg: FieldArg::None, .. }) if !(ordered && info.ty == FieldType::String) => {
                self.typed(info, op, text, quoted, start, end)
            }
            _ => match lhs.ty() {
                FieldType::String => Ok(Lit::Str(text.to_string())),
                FieldType::Bool => match text {
                    "true" => Ok(Lit::Bool(true)),
                    "false" => Ok(Lit::Bool(false)),
                    _ => Err(self.err(
                        start,
                        end,
                        format!("bad value '{text}' at column {}: expected true or false", self.col(start)),
                    )),
                },
                _ => parse_int(text).map(Lit::Num).ok_or_else(|| {
                    self.err(
                        start,
                        end,
                        format!("bad value '{text}' at column {}: expected an integer", self.col(start)),
                    )
                }),
            },
        }
    }

    /// The typed values as the right side, with `regex` patterns compiled.
    fn rhs_vals(&self, lhs: &Operand, op: Op, vals: Vec<Spanned>) -> Result<Rhs, FilterError> {
        let mut res = Vec::new();
        if op == Op::Regex {
            for (v, start, end) in &vals {
                let Lit::Str(p) = v else { continue };
                let re = regex::bytes::RegexBuilder::new(&format!("^(?:{p})$")).size_limit(1 << 20).build().map_err(
                    |e| {
                        let why = e.to_string();
                        let last = why.lines().last().unwrap_or("").trim().to_string();
                        self.err(*start, *end, format!("bad regular expression at column {}: {last}", self.col(*start)))
                    },
                )?;
                res.push(re);
            }
        }
        let _ = lhs;
        Ok(Rhs::Vals(vals.into_iter().map(|(l, _, _)| val_of(l)).collect(), res))
    }

    /// One value after a comparison operator.
    fn value(
        &mut self,
        lhs: &Operand,
        info: Option<&FieldInfo>,
        op: Op,
        op_tok: &Token,
    ) -> Result<(Lit, usize), FilterError> {
        let t = self.peek();
        match &t.tok {
            Tok::Quoted(s) => {
                self.bump();
                Ok((self.typed_for(lhs, info, op, s, true, t.start, t.end)?, t.end))
            }
            Tok::Word(w) if !is_connective(&t) => {
                self.bump();
                let mut text = w.clone();
                let mut end = t.end;
                // As in libsinsp, a bare value runs on through '<' and '>' written without a
                // space (`a->b`); '=' still ends it.
                loop {
                    let n = self.peek();
                    let glue = matches!(n.tok, Tok::Sym(Sym::Lt | Sym::Gt) | Tok::Word(_))
                        && !self.src[n.start..n.end].contains('=');
                    if n.start != end || !glue {
                        break;
                    }
                    self.bump();
                    text.push_str(&self.src[n.start..n.end]);
                    end = n.end;
                }
                // `5 ms`, `5 parsecs`: a number followed by a word is one value with a unit.
                let next = self.peek();
                if let Tok::Word(unit) = &next.tok {
                    let unit_type = matches!(lhs.ty(), FieldType::Duration | FieldType::Size | FieldType::Timestamp);
                    let numeric = !w.is_empty() && w.chars().all(|c| c.is_ascii_digit() || c == '.' || c == '_');
                    if unit_type && numeric && !is_connective(&next) {
                        self.bump();
                        text = format!("{w} {unit}");
                        end = next.end;
                    }
                }
                Ok((self.typed_for(lhs, info, op, &text, false, t.start, end)?, end))
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

/// A value and the byte range it was written at.
type Spanned = (Lit, usize, usize);

/// Names that open a call when `(` follows them directly.
fn is_call_name(w: &str) -> bool {
    w == "val" || Xform::from_name(w).is_some() || w == "getopt"
}

/// Values compared by the general checks: the class a type belongs to (so that `val()` compares
/// numbers with numbers, strings with strings).
fn class(ty: FieldType) -> u8 {
    match ty {
        FieldType::String => 0,
        FieldType::Bool => 1,
        _ => 2,
    }
}

fn val_of(l: Lit) -> V {
    match l {
        Lit::Num(n) => V::N(n),
        Lit::Str(s) => V::S(s.into_bytes()),
        Lit::Bool(b) => V::B(b),
    }
}

fn lit_of(v: V) -> Lit {
    match v {
        V::N(n) => Lit::Num(n),
        V::S(s) => Lit::Str(String::from_utf8(s).unwrap_or_default()),
        V::B(b) => Lit::Bool(b),
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

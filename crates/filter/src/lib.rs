//! sysdig-compatible filter expressions over latscope event batches.
//!
//! ```
//! use latscope_event::{Event, EventBatch, TraceHeader};
//! use latscope_filter::{EvalContext, Filter};
//!
//! let f = Filter::parse("proc.name=httpd and fd.type=file and evt.latency > 1ms").unwrap();
//! let mut batch = EventBatch::with_capacity(1);
//! batch.push(&Event { kind: 0, lat: 2_000_000, fd: 3, fd_type: 1, comm: "httpd".into(), ..Default::default() });
//! let mut ctx = EvalContext::new(&TraceHeader::default());
//! ctx.observe(&batch);
//! assert!(f.matches(&batch, 0, &ctx));
//! println!("{}", f.explain());
//! ```
//!
//! # Grammar
//!
//! The grammar is libsinsp's (falcosecurity/libs, `userspace/libsinsp/filter/parser.h`):
//!
//! ```text
//! expr  := or
//! or    := and ('or' and)*
//! and   := not ('and' not)*
//! not   := 'not' not | '(' expr ')' | check
//! check := lhs 'exists'
//!        | lhs op rhs
//!        | lhs op ('oneof' | 'anyof' | 'allof') list     (op: = != and the string operators)
//!        | lhs ('in' | 'intersects' | 'pmatch') list
//!        | boolfield                      (extension: same as boolfield = true)
//! op    := '=' | '==' | '!=' | '<' | '<=' | '>' | '>=' | 'contains' | 'icontains' | 'startswith'
//!        | 'endswith' | 'glob' | 'iglob' | 'regex' | 'bcontains' | 'bstartswith'
//! lhs   := field | xform
//! rhs   := value | 'val(' field ')' | xform
//! xform := ('tolower' | 'toupper' | 'b64' | 'basename' | 'len') '(' (field | xform) ')'
//!        | 'concat(' arg (',' arg)+ ')' | 'join(' arg ',' '(' (arg (',' arg)*)? ')' ')'
//! list  := '(' (value (','? value)*)? ')'
//! field := name ('.' name)+ ('[' arg ']')?        (proc.aname[2], evt.arg[0], evt.rawarg.size)
//! value := bare word | 'single quoted' | "double quoted"
//! ```
//!
//! Transformers, `val()`, modifiers, `regex`, `iglob`, fields with an argument or several values
//! (`proc.aname`, `fd.ip`, `fd.net`), orderings on strings and `in` on booleans are evaluated by a
//! general path that computes values per event (and may allocate); the kernel never tests them.
//! Operators by type follow libsinsp: every field takes `exists = != in intersects`; numbers and
//! strings the orderings; strings the string operators; `fd.ip` and the network fields only the
//! equality and list ones; `bcontains`/`bstartswith` need a byte buffer, which no field is.
//!
//! - Keywords (`and`, `or`, `not`, `exists`, `in`, `contains`, ...) ignore case; field names too.
//! - A bare value ends at white space or one of `( ) , = ' "` (`<` and `>` written without a space
//!   run on: `a->b`); quote anything else. Quoted strings take the escapes `\\ \' \" \n \t \r
//!   \xHH` (several `\xHH` may spell one UTF-8 character); other backslashes stay as written. A
//!   NUL byte (`\x00`, `\0`) is refused, as libsinsp refuses it.
//! - Values are typed by their field (see [`fields()`]): durations take units (`evt.latency > 1ms`,
//!   `>= 250us`, `> 5 ms`; a bare number is ns), sizes take units (`evt.buflen >= 4KiB`), booleans
//!   are `true`/`false`, `evt.res` takes `SUCCESS` or errno names (`ENOENT`), `evt.rawres` takes
//!   numbers or errno names (`evt.rawres = ENOENT` means -2), `evt.type` takes syscall names
//!   (syscalls only), `block_write`-style block ops or `proc_exec`-style proc ops, `fd.type` takes fd type names. Unknown names are errors, with suggestions.
//! - Times (`evt.time`, `evt.datetime`) take ns since the Unix epoch or a date and time in RFC 3339
//!   (`evt.time > 2026-11-22T22:30:13Z`, `>= 2026-11-22T23:30:13.250+01:00`, `< 2026-11-23`);
//!   without a zone the time is UTC, the zone `latscope events` prints times in (`T` or a space
//!   between date and time; quote values with a space). Events carry monotonic timestamps: the
//!   context's clock offset from the trace header turns them into wall-clock time.
//! - `pmatch (/a, /b)` is true when the value is one of the directories or under one of them;
//!   each component of a directory may be a glob (`/opt/*/bin`).
//! - `glob` is a shell glob: `*` (matches `/` too), `?`, `[a-z]`, `[!x]`, `\` quotes.
//! - A test on a field the event does not have is false, whatever the operator (`!=` included);
//!   `not` negates that. Block fields are absent on syscall events and syscall fields on block
//!   events.
//! - Socket fields read the name of an IPv4/IPv6 socket (`local->peer`, the protocol first unless
//!   it is TCP: `udp:10.0.0.1:53->10.0.0.2:41000`). `fd.lip`, `fd.lport`, `fd.rip`, `fd.rport`
//!   are this process's end and the peer's; `fd.sip`, `fd.sport`, `fd.cip`, `fd.cport` the
//!   server's (accepting or listening) end and the client's (connecting) end, as
//!   [`EvalContext::sock_roles`] tells them apart: a socket without a peer is a server; else the
//!   end at a known server address (a listening socket of the start snapshot, the local end of an
//!   `accept`, the peer of a `connect`), else the end with the lower port. `fd.port` matches
//!   either port (`!=`: neither). IP values are compared in canonical form (`::ffff:10.0.0.1` is
//!   `10.0.0.1`, `0:0::1` is `::1`); `=`, `!=` and `in` take addresses only, use `startswith` or
//!   `glob` for parts.
//! - `proc.name` is the kernel's comm (at most 15 bytes): values given to `=`, `!=` and `in` are cut
//!   to 15 bytes so that long process names still match.
//! - An empty filter matches every event.
//!
//! # Evaluation and push-down
//!
//! [`Filter::parse`] resolves names to the numbers stored in events once (`evt.type = openat`
//! compares syscall numbers, `fd.type = file` one byte), orders the clauses of every `and`/`or`
//! cheapest first, and [`Filter::matches`] then tests one row of a column batch without
//! allocating. [`Filter::pushdown`] extracts the conditions the kernel can apply before copying
//! events out, as data: per top-level clause ([`Clause`]) its place in the source and either the
//! kernel's test ([`KernelTest`]) or why it stays in user space ([`Residual`]), and per kind of
//! event whether the kernel then passes exactly the events the filter keeps
//! ([`Pushdown::exactness`]; in-kernel histograms need that). [`Filter::explain`] renders it.
//! [`Filter::fields_used`] and [`Filter::tests_fd_names`] say which fields the filter reads.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod compile;
mod context;
mod error;
mod fields;
#[doc(hidden)]
pub mod fuzz_support;
pub mod helpers;
mod lexer;
mod parser;
mod pushdown;
mod resolve;
mod rich;
mod strops;

pub use context::{EvalContext, SockRoles};
pub use error::FilterError;
pub use fields::{fields, FieldInfo, FieldType};
pub use pushdown::{Clause, Exactness, Inexact, InexactReason, KernelTest, KindSet, Pushdown, Residual};

use compile::Node;
use latscope_event::EventBatch;
use parser::{Expr, ExprKind};

/// A parsed and compiled filter expression.
#[derive(Debug, Clone)]
pub struct Filter {
    src: String,
    expr: Option<Expr>,
    root: Node,
    /// Kinds (bit mask) on which the filter may be true.
    kinds: u8,
}

impl Default for Filter {
    /// The filter that takes every event.
    fn default() -> Self {
        Filter::parse("").expect("the empty filter always parses")
    }
}

impl Filter {
    /// Parse and compile `src`. An empty (or all-blank) string is the filter that matches every
    /// event. Errors point at the offending column (see [`FilterError`]).
    pub fn parse(src: &str) -> Result<Filter, FilterError> {
        let expr = parser::parse(src)?;
        let (root, kinds) = match &expr {
            Some(e) => {
                let (n, k) = compile::compile(e);
                (n, k.may_true)
            }
            None => (Node::Const(true), fields::K_ALL),
        };
        Ok(Filter { src: src.to_string(), expr, root, kinds })
    }

    /// Does event `row` of `batch` match? `ctx` must have observed `batch` (and the batches before
    /// it) for `proc.ppid` and `proc.exe` to be current. Rows out of range never match.
    #[inline]
    pub fn matches(&self, batch: &EventBatch, row: usize, ctx: &EvalContext) -> bool {
        row < batch.kind.len() && self.root.eval(batch, row, ctx)
    }

    /// The event kinds the filter can match: recording can skip the others (a filter on
    /// `blk.*` fields needs no syscall tracing, `fd.type = file` no block tracing).
    pub fn needs_kinds(&self) -> KindSet {
        KindSet::from_mask(self.kinds)
    }

    /// The conditions the kernel can test early, clause by clause, and whether its verdict is
    /// exact for each kind of event (see [`Pushdown`]).
    pub fn pushdown(&self) -> Pushdown {
        pushdown::analyze(self.expr.as_ref(), &self.src, self.kinds)
    }

    /// A readable account of which clauses go to the kernel (and as what test), which stay in
    /// user space (and why), and whether the kernel's verdict is exact for syscall and block
    /// events: the filter, then [`Pushdown`]'s `Display`.
    pub fn explain(&self) -> String {
        if self.expr.is_none() {
            return "filter: (empty: matches every event)\nkernel: nothing to push down\n".into();
        }
        format!("filter: {}\n{}", self.src.trim(), self.pushdown())
    }

    /// The fields the filter tests, each once, in the order they first appear.
    pub fn fields_used(&self) -> Vec<&'static FieldInfo> {
        fn walk(e: &Expr, out: &mut Vec<&'static FieldInfo>) {
            match &e.kind {
                ExprKind::And(v) | ExprKind::Or(v) => v.iter().for_each(|i| walk(i, out)),
                ExprKind::Not(i) => walk(i, out),
                ExprKind::Check(c) => {
                    let info = c.field.info();
                    if !out.iter().any(|f| f.name == info.name) {
                        out.push(info);
                    }
                }
                ExprKind::Rich(r) => {
                    let mut fs = Vec::new();
                    r.lhs.fields(&mut fs);
                    if let rich::Rhs::Operand(o) = &r.rhs {
                        o.fields(&mut fs);
                    }
                    for f in fs {
                        let info = f.info();
                        if !out.iter().any(|x| x.name == info.name) {
                            out.push(info);
                        }
                    }
                }
            }
        }
        let mut out = Vec::new();
        if let Some(e) = &self.expr {
            walk(e, &mut out);
        }
        out
    }

    /// Does the filter test a field whose value is the name of an fd (see
    /// [`FieldInfo::reads_fd_names`])? The names are learnt from the calls that open, accept,
    /// connect, duplicate and close fds and change directory, so a recording for such a filter
    /// must not drop those calls in the kernel.
    pub fn tests_fd_names(&self) -> bool {
        self.fields_used().iter().any(|f| f.reads_fd_names())
    }

    /// The start times the filter can match, from its clauses on `evt.time` (`evt.datetime`,
    /// `evt.rawtime`) and `evt.reltime` that every match must pass (those joined by `and` at the
    /// top, or within an `or` whose every branch bounds the same field). A view dividing by the
    /// time it covers ([`latscope_event::Span`]) cuts the recording to this window.
    pub fn time_window(&self) -> TimeWindow {
        compile::time_window(&self.root)
    }

    /// The filter text as given.
    pub fn source(&self) -> &str {
        &self.src
    }

    /// True for the empty filter, which matches every event.
    pub fn is_match_all(&self) -> bool {
        self.expr.is_none()
    }
}

/// The start times a filter can match ([`Filter::time_window`]), inclusive bounds; `None` when
/// the filter does not bound them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeWindow {
    /// Wall-clock ns since the Unix epoch (`evt.time`).
    pub wall: Option<(i128, i128)>,
    /// ns since the start of the recording (`evt.reltime`).
    pub rel: Option<(i128, i128)>,
}

impl TimeWindow {
    /// The window as CLOCK_MONOTONIC start times of a recording whose clocks differ by
    /// `realtime_offset_ns` and which started at `start_ns`: inclusive bounds, `None` when the
    /// filter does not bound start times.
    pub fn monotonic(&self, realtime_offset_ns: i64, start_ns: u64) -> Option<(u64, u64)> {
        let clamp = |v: i128| v.clamp(0, i128::from(u64::MAX)) as u64;
        let off = i128::from(realtime_offset_ns);
        let from_wall = self.wall.map(|(lo, hi)| (lo - off, hi - off));
        let from_rel =
            self.rel.map(|(lo, hi)| (lo.saturating_add(i128::from(start_ns)), hi.saturating_add(i128::from(start_ns))));
        let w = match (from_wall, from_rel) {
            (Some(a), Some(b)) => (a.0.max(b.0), a.1.min(b.1)),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return None,
        };
        Some((clamp(w.0), clamp(w.1)))
    }
}

impl std::str::FromStr for Filter {
    type Err = FilterError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Filter::parse(s)
    }
}

impl std::fmt::Display for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.src)
    }
}

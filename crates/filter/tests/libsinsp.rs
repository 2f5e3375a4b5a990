//! Compatibility with libsinsp's filter language, measured on the expressions of its own unit
//! tests: `tests/libsinsp/expressions.jsonl`, extracted by `tests/libsinsp/extract.py` from
//! https://github.com/falcosecurity/libs (the header line names the commit). Each expression is
//! parsed and the verdict compared with libsinsp's: accepted (`accept`, or evaluated to `true`
//! / `false` on the test's event) or refused (`reject`).
//!
//! An expression is in scope when every field it names is one latscope has: on those, at least
//! 90 % of what libsinsp accepts must parse, and everything libsinsp refuses must be refused
//! (expressions on fields latscope lacks are refused for that reason alone, and are counted
//! apart). `LIBSINSP_EXPRESSIONS=path` measures another extract (a fresh one from a newer
//! checkout); `LIBSINSP_REPORT=1` prints every expression latscope and libsinsp disagree on.

use latscope_filter::{fields, Filter};

/// Accepted by libsinsp, refused by latscope on purpose; each gap is listed in docs/FILTERS.md
/// ("Compatibility with libsinsp"): bytes that are not UTF-8 (`\xff`), and Falco's named lists
/// after a modifier (`== oneof allowed_processes`).
fn known_gap(expr: &str) -> bool {
    let named_list = ["oneof ", "anyof ", "allof "]
        .iter()
        .any(|m| expr.match_indices(m).any(|(i, _)| !expr[i + m.len()..].trim_start().starts_with('(')));
    expr.contains("\\x") || named_list
}

/// Candidate field names of an expression: dotted words outside quotes that start where a field
/// can start (after white space, `(` or `,`, or at the beginning).
fn field_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = expr.as_bytes();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if c == b'"' || c == b'\'' {
            quote = Some(c);
            i += 1;
            continue;
        }
        let starts = c.is_ascii_alphabetic() && (i == 0 || matches!(b[i - 1], b' ' | b'\t' | b'\n' | b'(' | b','));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] == b'.') {
            j += 1;
        }
        let w = &expr[i..j];
        let dotted = w.contains('.') && w.split('.').all(|p| p.starts_with(|c: char| c.is_ascii_alphabetic()));
        if dotted {
            out.push(w.to_ascii_lowercase());
        }
        i = j.max(i + 1);
    }
    out
}

fn known_field(name: &str) -> bool {
    fields().iter().any(|f| f.name == name)
        || name.strip_prefix("evt.rawarg.").is_some_and(|a| {
            [
                "fd", "size", "len", "offset", "pos", "dirfd", "flags", "mode", "res", "name", "path", "oldpath",
                "newpath",
            ]
            .contains(&a)
        })
}

#[test]
fn libsinsp_test_expressions() {
    let text = match std::env::var("LIBSINSP_EXPRESSIONS") {
        Ok(p) => std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}")),
        Err(_) => include_str!("libsinsp/expressions.jsonl").to_string(),
    };
    let mut lines = text.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().expect("a header line")).expect("header");
    let report = std::env::var_os("LIBSINSP_REPORT").is_some();
    let (mut acc_in, mut acc_ok, mut rej_in, mut rej_ok, mut out_scope, mut gaps) = (0, 0, 0, 0, 0, 0);
    let (mut rej_all, mut rej_all_ok) = (0, 0);
    let mut wrong_accepts = Vec::new();
    let mut missed = Vec::new();
    for line in lines {
        let row: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let expr = row["expr"].as_str().expect("expr");
        let expect = row["expect"].as_str().expect("expect");
        let src = row["src"].as_str().unwrap_or("?");
        let ours = Filter::parse(expr);
        let libsinsp_accepts = expect != "reject";
        let names = field_names(expr);
        let in_scope = !names.is_empty() && names.iter().all(|n| known_field(n));
        if !libsinsp_accepts {
            rej_all += 1;
            if ours.is_err() {
                rej_all_ok += 1;
            } else {
                wrong_accepts.push(format!("{src}: {expr:?}"));
            }
        }
        if !in_scope {
            out_scope += 1;
            continue;
        }
        if libsinsp_accepts {
            acc_in += 1;
            match &ours {
                Ok(_) => acc_ok += 1,
                Err(e) => {
                    if known_gap(expr) {
                        gaps += 1;
                    }
                    missed.push(format!("{src}: {expr:?}: {}", e.message()));
                }
            }
        } else {
            rej_in += 1;
            if ours.is_err() {
                rej_ok += 1;
            }
        }
    }
    let pct = |a: usize, b: usize| if b == 0 { 100.0 } else { 100.0 * a as f64 / b as f64 };
    println!(
        "libsinsp {} (commit {}): {} expressions, {out_scope} name fields latscope lacks",
        header["source"], header["commit"], header["expressions"]
    );
    println!(
        "in scope: libsinsp accepts {acc_in}, latscope parses {acc_ok} ({:.1} %; {gaps} of the others are documented gaps)",
        pct(acc_ok, acc_in)
    );
    println!("in scope: libsinsp refuses {rej_in}, latscope refuses {rej_ok}");
    println!("all: libsinsp refuses {rej_all}, latscope refuses {rej_all_ok}");
    if report {
        for m in &missed {
            println!("refused by latscope only: {m}");
        }
    }
    for w in &wrong_accepts {
        println!("accepted by latscope only: {w}");
    }
    assert!(pct(acc_ok, acc_in) >= 90.0, "only {acc_ok} of {acc_in} parse:\n{}", missed.join("\n"));
    assert!(wrong_accepts.is_empty(), "latscope accepts what libsinsp refuses:\n{}", wrong_accepts.join("\n"));
}

//! Which of libsinsp's test expressions latscope is measured on, shared by the parse test
//! (`crates/filter/tests/libsinsp.rs`) and the evaluation on recorded events
//! (`crates/cli/tests/libsinsp_eval.rs`).
#![allow(dead_code)] // each of the two tests uses part of it

use latscope_filter::fields;

/// Accepted by libsinsp, refused by latscope on purpose; each gap is listed in docs/FILTERS.md
/// ("Compatibility with libsinsp"): bytes that are not UTF-8 (`\xff`), and Falco's named lists
/// after a modifier (`== oneof allowed_processes`).
pub fn known_gap(expr: &str) -> bool {
    let named_list = ["oneof ", "anyof ", "allof "]
        .iter()
        .any(|m| expr.match_indices(m).any(|(i, _)| !expr[i + m.len()..].trim_start().starts_with('(')));
    expr.contains("\\x") || named_list
}

/// Candidate field names of an expression: dotted words outside quotes that start where a field
/// can start (after white space, `(` or `,`, or at the beginning).
pub fn field_names(expr: &str) -> Vec<String> {
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

pub fn known_field(name: &str) -> bool {
    fields().iter().any(|f| f.name == name)
        || name.strip_prefix("evt.rawarg.").is_some_and(|a| {
            [
                "fd", "size", "len", "offset", "pos", "dirfd", "flags", "mode", "res", "name", "path", "oldpath",
                "newpath",
            ]
            .contains(&a)
        })
}

/// Whether an expression is in scope: it names fields, all of them fields latscope has.
pub fn in_scope(expr: &str) -> bool {
    let names = field_names(expr);
    !names.is_empty() && names.iter().all(|n| known_field(n))
}

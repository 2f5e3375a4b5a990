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

use latscope_filter::Filter;

#[path = "libsinsp/scope.rs"]
mod scope;
use scope::{in_scope, known_gap};

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
        let in_scope = in_scope(expr);
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

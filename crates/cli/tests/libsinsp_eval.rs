//! libsinsp's filter tests evaluated on real recorded events: every expression of
//! `crates/filter/tests/libsinsp/expressions.jsonl` (extracted from falcosecurity/libs' unit tests
//! by `extract.py`) that names only fields latscope has and for which libsinsp's test expects
//! `true` or `false` on an event it built by hand is evaluated on the same event made for real:
//! `libsinsp_events.c` makes each of those events (same syscall, arguments, paths under a
//! chroot, command names and process tree, addresses in a network namespace of its own) while
//! `latscope record` runs, and `latscope events` says whether the expression keeps that event.
//!
//! The events that cannot be made on a real kernel are listed, with why, and measured apart (see
//! docs/FILTERS.md, "Compatibility with libsinsp"). `LIBSINSP_EXPRESSIONS=path` measures another
//! extract; `LIBSINSP_REPORT=1` prints every expression and its verdict.

mod common;

#[path = "../../filter/tests/libsinsp/scope.rs"]
mod scope;

use common::{bin, compile_c, latscope, require_bpf, require_tool};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// The workload context that makes the event a libsinsp test evaluates on, or why none can.
fn context_of(row: &Value) -> Result<&'static str, String> {
    let expr = row["expr"].as_str().unwrap_or("");
    if scope::field_names(expr).iter().any(|f| f == "evt.num") {
        return Err("evt.num numbers the events of the whole recording; libsinsp's test event is its first".into());
    }
    let test = row["test"].as_str().unwrap_or("?");
    let Some(ev) = row.get("event") else {
        return Err(format!("test {test} evaluates on no event of its own"));
    };
    let call = ev["call"].as_str().unwrap_or("");
    let ty = ev["type"].as_str().unwrap_or("");
    let params: Vec<&str> =
        ev["params"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let p = |i: usize| params.get(i).copied().unwrap_or("");
    let tree = ev["tree"].as_bool().unwrap_or(false);
    let ctx = match (call, ty) {
        ("generate_getcwd_failed_entry_event", _) => "getcwd",
        (_, "PPME_SYSCALL_EPOLL_CREATE_X") if p(0).contains("22") || p(0).contains("EINVAL") => "epoll_einval",
        (_, "PPME_SYSCALL_EPOLL_CREATE_X") if p(1).contains("-22") => "epoll_size",
        (_, "PPME_SYSCALL_SIGNALFD4_X") => "signalfd4",
        (_, "PPME_SYSCALL_TIMERFD_CREATE_X") => "timerfd_create",
        (_, "PPME_SYSCALL_SPLICE_X") => "splice",
        (_, "PPME_SYSCALL_OPEN_X") if p(1) == "\"/tmp/the_file\"" && p(0).contains("-1") => "open_eperm",
        (_, "PPME_SYSCALL_OPEN_X") if p(1) == "\"/opt/dir/SUBDIR/file.txt\"" => "open_creat",
        (_, "PPME_SYSCALL_OPEN_X") if p(1) == "\"/opt/dir/subdir/file.txt\"" => "open_subdir",
        (_, "PPME_SYSCALL_OPEN_X") if p(1) == "file_to_run" => "open_file_to_run",
        (_, "PPME_SYSCALL_OPEN_X") if p(1) == r#""/p\xff/q\xff""# => "open_not_utf8",
        ("generate_execve_exit_event_with_default_params", _) if p(1) == r#""/bin/bad\xff""# => "exec_not_utf8",
        ("generate_execve_enter_and_exit_event", _) if p(5) == "\"/myexe\"" && !tree => "exec_myexe",
        ("generate_execve_enter_and_exit_event", _) if p(5) == "\"/good-exe\"" && tree => "exec_tree",
        (_, "PPME_SOCKET_CONNECT_X") if test == "net_ipv4_compare" || test == "net_modifier_ip_compare" => "net4",
        (_, "PPME_SOCKET_CONNECT_X") if test == "net_ipv6_compare" => "net6",
        _ => {
            let what = if ty.is_empty() { call } else { ty };
            return Err(format!("no workload makes test {test}'s {what}({})", params.join(", ")));
        }
    };
    Ok(ctx)
}

/// The syscalls whose event is the context's (what `evt.type` selects in the recording).
fn syscalls(ctx: &str) -> &'static str {
    match ctx {
        "getcwd" => "getcwd",
        "epoll_einval" | "epoll_size" => "epoll_create",
        "signalfd4" => "signalfd4",
        "timerfd_create" => "timerfd_create",
        "splice" => "splice",
        "exec_myexe" | "exec_tree" | "exec_not_utf8" => "execve",
        "net4" | "net6" => "accept, accept4",
        _ => "openat",
    }
}

/// The number of events `events -r trace filter` prints, or the error it gives.
fn count(trace: &Path, filter: &str) -> Result<usize, String> {
    let o = latscope(&["events", "-r", trace.to_str().unwrap(), "--json", filter]);
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&o.stdout).lines().filter(|l| !l.trim().is_empty()).count())
}

#[test]
fn libsinsp_test_expressions_evaluate_as_libsinsp_on_recorded_events() {
    let test = "libsinsp_test_expressions_evaluate_as_libsinsp_on_recorded_events";
    if !require_bpf(test) || !require_tool(test, "ip") {
        return;
    }
    let text = match std::env::var("LIBSINSP_EXPRESSIONS") {
        Ok(p) => std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}")),
        Err(_) => include_str!("../../filter/tests/libsinsp/expressions.jsonl").to_string(),
    };
    let report = std::env::var_os("LIBSINSP_REPORT").is_some();

    // libsinsp's file tree below a chroot, and the workload under libsinsp's command names.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    for d in ["root/tmp", "root/test/dir", "root/opt/dir/SUBDIR", "root/opt/dir/subdir"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    for f in ["root/tmp/file_to_run", "root/tmp/the_file", "root/opt/dir/subdir/file.txt"] {
        std::fs::write(dir.join(f), b"").unwrap();
    }
    use std::os::unix::fs::PermissionsExt;
    for d in [&dir, &dir.join("root"), &dir.join("root/tmp")] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(dir.join("root/tmp/the_file"), std::fs::Permissions::from_mode(0o644)).unwrap();
    // A path and a program name with a byte that is not UTF-8 (0xff), as libsinsp's tests use.
    use std::os::unix::ffi::OsStrExt;
    let not_utf8 = |s: &[u8]| std::ffi::OsStr::from_bytes(s).to_os_string();
    std::fs::create_dir_all(dir.join("root").join(not_utf8(b"p\xff"))).unwrap();
    std::fs::write(dir.join("root").join(not_utf8(b"p\xff")).join(not_utf8(b"q\xff")), b"").unwrap();
    let exe = compile_c("libsinsp_events.c", &dir);
    for name in ["myexe", "init", "bash", "good-exe"] {
        std::fs::copy(&exe, dir.join(name)).unwrap();
    }
    std::fs::copy(&exe, dir.join(not_utf8(b"bad\xff"))).unwrap();

    // One recording for every context.
    let trace = dir.join("t.lst");
    let summary = dir.join("summary.json");
    let o = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .arg(format!("--json={}", summary.display()))
        .args(["--no-block", "--quiet", "--"])
        .arg(&exe)
        .arg("all")
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "record: {}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(s["lost"], 0, "{s}");
    let tids: BTreeMap<String, u64> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let (c, t) = l.split_once(' ')?;
            Some((c.to_string(), t.trim().parse().ok()?))
        })
        .collect();

    // Each context's event is in the recording, once.
    let mut selectors = BTreeMap::new();
    for (ctx, tid) in &tids {
        let sel = format!("thread.tid = {tid} and evt.type in ({})", syscalls(ctx));
        assert_eq!(count(&trace, &sel), Ok(1), "context {ctx}: {sel}");
        selectors.insert(ctx.clone(), sel);
    }

    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().expect("a header line")).expect("header");
    let (mut with_result, mut evaluated, mut agree) = (0, 0, 0);
    let mut not_reproducible: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut disagree = Vec::new();
    for line in lines {
        let row: Value = serde_json::from_str(line).expect("a JSON line");
        let expr = row["expr"].as_str().expect("expr");
        let expect = row["expect"].as_str().expect("expect");
        let src = row["src"].as_str().unwrap_or("?");
        if !matches!(expect, "true" | "false") || !scope::in_scope(expr) {
            continue;
        }
        with_result += 1;
        // What latscope refuses disagrees, whatever the event (the bytes that are not UTF-8).
        let ours = match latscope_filter::Filter::parse(expr) {
            Err(e) => Err(format!("refused: {}", e.message())),
            Ok(_) => match context_of(&row) {
                Ok(ctx) => {
                    let sel = selectors.get(ctx).unwrap_or_else(|| panic!("the workload did not run context {ctx}"));
                    evaluated += 1;
                    count(&trace, &format!("{sel} and ({expr})")).map(|n| (n == 1).to_string())
                }
                Err(why) => {
                    not_reproducible.entry(why).or_default().push(format!("{src}: {expr}"));
                    continue;
                }
            },
        };
        let ok = ours.as_deref() == Ok(expect);
        if ok {
            agree += 1;
        } else {
            disagree.push(format!("{src}: {expr:?}: libsinsp {expect}, latscope {}", ours.unwrap_or_else(|e| e)));
        }
        if report {
            println!("{src} {expr:?}: {}", if ok { "agrees" } else { "DISAGREES" });
        }
    }
    let pct = |a: usize, b: usize| if b == 0 { 100.0 } else { 100.0 * a as f64 / b as f64 };
    println!("libsinsp {} (commit {})", header["source"], header["commit"]);
    println!(
        "in scope with a result on an event: {with_result}; evaluated on a recorded event: {evaluated}; \
         agree: {agree} ({:.1} % of evaluated, {:.1} % of all with a result)",
        pct(agree, evaluated),
        pct(agree, with_result)
    );
    for (why, exprs) in &not_reproducible {
        println!("not reproducible ({} expressions): {why}", exprs.len());
        if report {
            for e in exprs {
                println!("  {e}");
            }
        }
    }
    for d in &disagree {
        println!("disagree: {d}");
    }
    assert!(
        pct(agree, with_result) >= 90.0,
        "only {agree} of {with_result} agree with libsinsp:\n{}",
        disagree.join("\n")
    );
}

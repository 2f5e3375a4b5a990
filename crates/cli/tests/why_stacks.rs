//! Stacks of `record --why` against ground truth: a thread waits for a lock another thread holds
//! for known times, then sleeps a known time, each from a function of its own (tests/why_stacks.c,
//! built with frame pointers). The stack views name the futex wait in the kernel and the
//! waiting function in user space, with the lock's share of the blocked time; the folded output
//! parses and the flame graph draws without overlapping text in headless Chromium. The Parquet
//! export carries the same breakdowns and stacks, joined by DuckDB. A third thread's naps name
//! a function inlined into another with their source lines, and libc's clock_nanosleep through
//! libc's dynamic symbol table. One recording serves every test.

mod common;
mod exportsupport;
mod viewsupport;

use common::{bin, latscope_json, latscope_ok, require_bpf};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use viewsupport::{assert_text_fits, chromium, layout};

/// The workload built with frame pointers and recorded with attribution and stacks, once for
/// all the tests of this file (under Cargo's directory for test files); the trace and the
/// workload's `key value` lines (main and napper thread ids, lock and nap times).
fn recording() -> &'static (PathBuf, HashMap<String, i64>) {
    static REC: OnceLock<(PathBuf, HashMap<String, i64>)> = OnceLock::new();
    REC.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("why_stacks");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        record(&dir)
    })
}

fn record(tmp: &Path) -> (PathBuf, HashMap<String, i64>) {
    let work = tmp.join("why_stacks");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/why_stacks.c");
    let st = Command::new("cc")
        .args(["-O2", "-g", "-fno-omit-frame-pointer", "-pthread", "-Wall", "-o"])
        .arg(&work)
        .arg(&src)
        .status()
        .expect("cc runs");
    assert!(st.success(), "compiling {} failed", src.display());
    let trace = tmp.join("t.lst");
    let out = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--why-above", "2ms", "--stacks", "--quiet", "--no-block", "--"])
        .arg(&work)
        .args(["10", "20"])
        .output()
        .unwrap();
    assert!(out.status.success(), "record failed: {}", String::from_utf8_lossy(&out.stderr));
    let kv = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect();
    (trace, kv)
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect()
}

/// The lock wait is the main thread's top blocking stack: the kernel's futex wait under the
/// workload's own waiting function, with the lock's true share of the blocked time (within 5 %);
/// the sleep is the other stack, under its own function. The folded output says the same.
#[test]
fn why_stacks_name_the_futex_wait_and_the_waiting_function_with_its_share() {
    if !require_bpf("why_stacks_name_the_futex_wait_and_the_waiting_function_with_its_share") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (trace, kv) = recording();
    let t = trace.to_str().unwrap();
    let main = format!("thread.tid = {}", kv["main"]);
    let v = latscope_json(&["why", "-r", t, "--stacks", "--waits", "--json", &main]);
    let stacks = v["stacks"].as_array().unwrap();
    assert!(stacks.len() >= 2, "{v}");
    let (lock, nap) = (kv["lock_ns"] as f64, kv["nap_ns"] as f64);
    let total = v["total_blocked_ns"].as_f64().unwrap();

    let top = &stacks[0];
    let kernel = strs(&top["kernel"]);
    let user = strs(&top["user"]);
    assert!(kernel.iter().any(|f| f.starts_with("futex_wait") || f.starts_with("futex_do_wait")), "{kernel:?}");
    assert!(kernel.iter().any(|f| f.starts_with("__x64_sys_futex")), "{kernel:?}");
    assert_eq!(user.first().map(String::as_str), Some("wait_for_holder"), "{user:?}");
    assert_eq!(top["op"], "futex");
    let unseen = common::calls_with_switch_unseen(stacks);
    let calls = top["calls"].as_i64().unwrap();
    assert!(calls == kv["lock_waits"] || calls + unseen as i64 == kv["lock_waits"], "{top}");
    // The lock's time and share, against the workload's clocks.
    let got = top["blocked_ns"].as_f64().unwrap();
    assert!((got - lock).abs() <= 0.05 * lock, "futex stack {got} ns blocked, the lock was held {lock} ns");
    let share = top["share"].as_f64().unwrap();
    let truth = lock / (lock + nap);
    assert!((share - truth).abs() <= 0.05, "futex stack share {share:.3}, true share {truth:.3}");
    assert!((total - (lock + nap)).abs() <= 0.05 * (lock + nap), "blocked {total} ns, true {} ns", lock + nap);

    let second = &stacks[1];
    // The sleep's path (do_nanosleep, a scheduler function, is left out by the kernel).
    assert!(strs(&second["kernel"]).iter().any(|f| f.starts_with("hrtimer_nanosleep")), "{second}");
    assert_eq!(strs(&second["user"]).first().map(String::as_str), Some("take_a_nap"), "{second}");
    for s in stacks {
        assert_eq!(s["kernel_truncated"], false);
        assert!(s["user_missing"].is_null() && (s["kernel_missing"].is_null() || common::switch_unseen(s)), "{s}");
    }

    // Folded stacks: strict "frame;frame;... count" lines, outermost first, weighed in us.
    let folded = tmp.path().join("b.folded");
    latscope_ok(&["why", "-r", t, "--waits", "--folded", folded.to_str().unwrap(), &main]);
    let text = std::fs::read_to_string(&folded).unwrap();
    let re = regex_lite_line();
    let mut sum = 0u64;
    let mut lock_us = 0u64;
    for line in text.lines() {
        assert!(re(line), "not a folded line: {line:?}");
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        sum += n;
        let frames: Vec<&str> = stack.split(';').collect();
        if frames.contains(&"wait_for_holder") {
            // The user function above the kernel's frames, the futex wait the innermost part.
            let u = frames.iter().position(|f| *f == "wait_for_holder").unwrap();
            let k = frames.iter().position(|f| f.starts_with("futex_wait") && f.ends_with("_[k]")).unwrap();
            assert!(u < k, "{line}");
            lock_us += n;
        }
    }
    assert!((sum as f64 - total / 1000.0).abs() <= 0.01 * total / 1000.0 + 10.0, "folded {sum} us of {total} ns");
    assert!((lock_us as f64 * 1000.0 - lock).abs() <= 0.05 * lock, "folded lock {lock_us} us, true {lock} ns");

    // top --by cause over the same filter: the lock and the sleep by cause, with the same truth;
    // without --waits the lock's waits (on its holder, a thread of the recording) stay and the
    // naps (ended by their own timer) are idle, left out and counted as such.
    let c = latscope_json(&["top", "-r", t, "--by", "cause", "--waits", "--json", &main]);
    let all = c["total_ns"].as_f64().unwrap();
    let lock_part = c["parts_ns"]["lock"].as_f64().unwrap();
    let timer_part = c["parts_ns"]["timer"].as_f64().unwrap();
    assert!((lock_part - lock).abs() <= 0.05 * all, "lock part {lock_part} ns, true {lock} ns");
    assert!((timer_part - nap).abs() <= 0.05 * all, "timer part {timer_part} ns, true {nap} ns");
    assert_eq!(c["operations"][0]["op"], "futex", "{c}");
    let c = latscope_json(&["top", "-r", t, "--by", "cause", "--json", &main]);
    // The thread's other calls (its execve, slowed by the run queue on a loaded machine) may
    // remain; the naps may not.
    let ops = c["operations"].as_array().unwrap();
    assert_eq!(ops[0]["op"], "futex", "{c}");
    assert!(ops.iter().all(|o| o["op"] != "clock_nanosleep" && o["op"] != "nanosleep"), "{c}");
    assert!(c["idle_waits_left_out"].as_u64().unwrap() >= 10, "{c}");
    assert!(c["waits"]["kinds"]["idle_timeout"]["count"].as_u64().unwrap() >= 10, "{c}");
}

/// The line of the first line of the workload's source containing `text`.
fn line_of(text: &str) -> usize {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/why_stacks.c")).unwrap();
    1 + src.lines().position(|l| l.contains(text)).unwrap_or_else(|| panic!("no {text:?} in why_stacks.c"))
}

/// The napper thread's naps: the `syscall` instruction of nap_inline, inlined into nap_outer,
/// is named by both functions, innermost first, each with its line in the source (the
/// instruction's, the call's); its clock_nanosleep calls through libc are named
/// `clock_nanosleep` (libc's exported name, from its dynamic symbol table), never
/// `libc.so.6+0x...`. The text view and the folded output say the same.
#[test]
fn why_stacks_name_inlined_functions_with_their_lines_and_libc_functions() {
    let test = "why_stacks_name_inlined_functions_with_their_lines_and_libc_functions";
    if !require_bpf(test) {
        return;
    }
    let (trace, kv) = recording();
    let t = trace.to_str().unwrap();
    let napper = format!("thread.tid = {}", kv["napper"]);
    let v = latscope_json(&["why", "-r", t, "--stacks", "--waits", "--json", &napper]);
    let stacks = v["stacks"].as_array().unwrap();
    let (syscall_line, call_line) = (line_of("nap_inline's syscall"), line_of("\tnap_inline(ms);"));
    // Five calls, all with this user stack; a nap preempted on a loaded machine has another
    // kernel stack for its longest wait (the run queue), so it may be a group of its own.
    let naps: Vec<&Value> = stacks.iter().filter(|s| s["op"] == "nanosleep").collect();
    assert_eq!(naps.iter().map(|s| s["calls"].as_u64().unwrap()).sum::<u64>(), 5, "{v}");
    for inline in naps {
        let f = inline["user_frames"].as_array().unwrap();
        assert_eq!(f[0]["name"], "nap_inline", "{inline}");
        assert_eq!(f[0]["inlined"], true, "{inline}");
        assert_eq!(f[0]["source"], format!("why_stacks.c:{syscall_line}"), "{inline}");
        assert_eq!((&f[1]["name"], &f[1]["inlined"]), (&"nap_outer".into(), &false.into()), "{inline}");
        assert_eq!(f[1]["source"], format!("why_stacks.c:{call_line}"), "{inline}");
        assert_eq!(f[2]["name"], "napper", "{inline}");
        assert_eq!(strs(&inline["user"])[..3], ["nap_inline", "nap_outer", "napper"]);
    }

    // libc's frames: clock_nanosleep first (its callers in the workload may be skipped: libc
    // keeps no frame pointer for the walk), five calls in all; the workload's frames named.
    let libc: Vec<&Value> = stacks.iter().filter(|s| s["op"] == "clock_nanosleep").collect();
    assert_eq!(libc.iter().map(|s| s["calls"].as_u64().unwrap()).sum::<u64>(), 5, "{v}");
    for s in &libc {
        let user = strs(&s["user"]);
        assert_eq!(user[0], "clock_nanosleep", "{s}");
        assert!(user.iter().all(|f| !f.starts_with("why_stacks+0x")), "a frame not named: {user:?}");
    }
    // A function libc does not export, the thread's start_thread, is named from libc's
    // separate debug file (Debian's libc6-dbg, by build id), with its line.
    let dbg = Command::new("dpkg-query").args(["-W", "-f=${Status}", "libc6-dbg"]).output();
    if dbg.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed")) {
        for s in &libc {
            let f = s["user_frames"].as_array().unwrap();
            let start =
                f.iter().find(|f| f["name"] == "start_thread").unwrap_or_else(|| panic!("no start_thread: {s}"));
            assert!(start["source"].as_str().is_some_and(|l| l.starts_with("pthread_create.c:")), "{s}");
        }
    } else {
        latscope_testkit::skip(test, "libc6-dbg is not installed (make test installs it): start_thread not checked");
    }

    let text = latscope_ok(&["why", "-r", t, "--stacks", "--waits", &napper]);
    assert!(text.contains(&format!("     nap_inline  (why_stacks.c:{syscall_line}, inlined)\n")), "{text}");
    assert!(text.contains(&format!("     nap_outer  (why_stacks.c:{call_line})\n")), "{text}");
    assert!(text.contains("     clock_nanosleep"), "{text}");
    let folded = latscope_ok(&["why", "-r", t, "--waits", "--folded", "-", &napper]);
    // Outermost first; an inlined function marked `_[i]` as flame graph tools mark them.
    assert!(folded.lines().any(|l| l.contains(";napper;nap_outer;nap_inline_[i];") && l.contains("_[k]")), "{folded}");
    assert!(folded.lines().any(|l| l.contains(";clock_nanosleep;") && l.contains("_[k]")), "{folded}");
}

/// A strict check of one folded line: non-empty frames without `;`, one space, a count.
fn regex_lite_line() -> impl Fn(&str) -> bool {
    |line: &str| {
        let Some((stack, n)) = line.rsplit_once(' ') else { return false };
        !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
            && !stack.is_empty()
            && stack.split(';').all(|f| !f.is_empty() && !f.contains('\n'))
    }
}

/// The flame graph (inferno's SVG) opens in headless Chromium with its frames named, and no two
/// texts overlap or run off the picture.
#[test]
fn why_flame_graph_draws_without_overlapping_text() {
    if !require_bpf("why_flame_graph_draws_without_overlapping_text") {
        return;
    }
    let Some(chrome) = chromium("why_flame_graph_draws_without_overlapping_text") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (trace, _) = recording();
    let svg = tmp.path().join("flame.svg");
    let folded = tmp.path().join("blocked.folded");
    latscope_ok(&[
        "why",
        "-r",
        trace.to_str().unwrap(),
        "--waits",
        "--flame",
        svg.to_str().unwrap(),
        "--folded",
        folded.to_str().unwrap(),
    ]);
    let doc = std::fs::read_to_string(&svg).unwrap();
    assert!(doc.contains("wait_for_holder"), "the flame graph names the waiting function");
    let l = layout(&chrome, &svg, "");
    let named: Vec<_> = l.iter().filter(|e| e.tag == "text" && e.visible && e.text.contains("futex")).collect();
    assert!(!named.is_empty(), "a frame shows the futex wait");
    assert_text_fits(&l, "flame graph");

    // Brendan Gregg's flamegraph.pl (as Debian ships it, with Devel::NYTProf) draws the folded
    // output: every line taken, the total its samples.
    let fg = Path::new("/usr/share/perl5/Devel/NYTProf/flamegraph.pl");
    if !fg.exists() {
        latscope_testkit::skip(
            "why_flame_graph_draws_without_overlapping_text",
            "flamegraph.pl (libdevel-nytprof-perl) is not installed (make test installs it)",
        );
        return;
    }
    let text = std::fs::read_to_string(&folded).unwrap();
    let total: u64 =
        text.lines().map(|l| l.rsplit_once(' ').expect("`stack count` lines").1.parse::<u64>().unwrap()).sum();
    assert!(total > 0, "{text}");
    let out = Command::new("perl").arg(fg).arg(&folded).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("Ignored"), "flamegraph.pl refused the folded output: {err}");
    let pl = String::from_utf8_lossy(&out.stdout);
    assert!(pl.contains("wait_for_holder"), "flamegraph.pl names the waiting function");
    let all = format!("all ({} samples, 100%)", thousands(total));
    assert!(pl.contains(&all), "flamegraph.pl's total is not the folded total {total}");
}

/// 1234567 as flamegraph.pl prints counts: 1,234,567.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The calls of a thread in a Parquet export, and the frames of their stacks, read by DuckDB:
/// `{"calls": [[time_ns, op, lat, parts..., waker_kind, waker_tid, waker_comm, runq_tid],
/// ...], "futex": [[user frame 0, [kernel frames innermost first]], ...]}`.
const DUCK_WHY: &str = r#"
import sys, json, duckdb
pq, stacks, tid = sys.argv[1], sys.argv[2], int(sys.argv[3])
con = duckdb.connect()
con.execute(f"CREATE VIEW events AS SELECT * FROM '{pq}'")
con.execute(f"CREATE VIEW stacks AS SELECT * FROM '{stacks}'")
parts = ["why_cpu", "why_runq", "why_io", "why_lock", "why_ipc", "why_timer", "why_fault", "why_other", "why_unknown"]
calls = con.execute(f"SELECT time_ns, op, lat, {', '.join(parts)}, waker_kind, waker_tid, waker_comm, runq_tid, "
                    f"waker_was_in, waker_was_in_ns "
                    f"FROM events WHERE kind = 'syscall' AND tid = {tid} ORDER BY time_ns").fetchall()
futex = con.execute(f"""
    SELECT u.symbol, list(k.symbol ORDER BY k.frame)
    FROM events e
    JOIN stacks u ON u.stack_id = e.ustack AND u.frame = 0
    JOIN stacks k ON k.stack_id = e.kstack
    WHERE e.tid = {tid} AND e.op = 'futex' AND e.why_lock > 0
    GROUP BY e.time_ns, u.symbol""").fetchall()
print(json.dumps({"calls": calls, "futex": futex}))
"#;

/// `export --parquet` of a `record --why` trace: every call's parts in the events table add up
/// to its latency and equal what `events --why --json` says, with the same waker and what that
/// waker was itself blocked in (`waker_was_in`, `waker_was_in_ns`); a DuckDB join
/// of the futex waits to the stacks table names the waiting function and the kernel's futex
/// wait, as `why --stacks` does.
#[test]
fn why_parquet_export_carries_the_breakdowns_and_the_stacks() {
    let test = "why_parquet_export_carries_the_breakdowns_and_the_stacks";
    if !require_bpf(test) || !exportsupport::require_python(test, &["duckdb", "pytz"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (trace, kv) = recording();
    let t = trace.to_str().unwrap();
    let pq = tmp.path().join("why.parquet");
    latscope_ok(&["export", "-r", t, "--parquet", pq.to_str().unwrap(), "-q"]);
    let main = kv["main"];

    // What `events --why --json` says of the main thread's calls, by start time.
    let mut want: HashMap<i64, Value> = HashMap::new();
    for line in latscope_ok(&["events", "-r", t, "--why", "--json", &format!("thread.tid = {main}")]).lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["kind"] != "syscall" {
            continue;
        }
        want.insert(v["time_ns"].as_i64().unwrap(), v);
    }
    let got: Value = serde_json::from_str(&exportsupport::python(
        DUCK_WHY,
        &[pq.to_str().unwrap(), tmp.path().join("why.stacks.parquet").to_str().unwrap(), &main.to_string()],
    ))
    .unwrap();
    let calls = got["calls"].as_array().unwrap();
    assert_eq!(calls.len(), want.len(), "the same calls in Parquet and in `events`");
    let names = ["cpu", "runq", "io", "lock", "ipc", "timer", "fault", "other", "unknown"];
    let mut with_why = 0;
    let mut cascades = Vec::new();
    for c in calls {
        let c = c.as_array().unwrap();
        let w = &want[&c[0].as_i64().unwrap()];
        assert_eq!(c[2], w["latency_ns"], "{c:?}");
        let parts: Vec<u64> = c[3..12].iter().map(|v| v.as_u64().unwrap()).collect();
        let Some(why) = w.get("why") else {
            assert!(parts.iter().all(|&p| p == 0), "a call without a breakdown has no parts: {c:?}");
            assert_eq!((c[16].as_str(), c[17].as_u64()), (Some(""), Some(0)), "nor a cascade: {c:?}");
            continue;
        };
        with_why += 1;
        assert_eq!(parts.iter().sum::<u64>(), c[2].as_u64().unwrap(), "parts add up to the latency: {c:?}");
        for (k, n) in names.iter().enumerate() {
            assert_eq!(parts[k], why["parts_ns"][n].as_u64().unwrap(), "{n} of {c:?}");
        }
        match why.get("waker") {
            Some(wk) => {
                assert_eq!(c[12], wk["kind"], "{c:?}");
                if wk["kind"] == "thread" {
                    assert_eq!(c[13], wk["tid"], "{c:?}");
                    let name = wk["name"].as_str().unwrap();
                    assert_eq!(format!("{}/{}", c[14].as_str().unwrap(), c[13]), name);
                }
            }
            None => assert_eq!(c[12], "", "{c:?}"),
        }
        assert_eq!(c[15], why.get("cpu_held_by").map_or(serde_json::json!(0), |p| p["tid"].clone()), "{c:?}");
        // The one-level cascade: `was_in` {cause, ns}, or an empty name and 0.
        match why.get("waker").and_then(|wk| wk.get("was_in")).filter(|v| !v.is_null()) {
            Some(was) => {
                assert_eq!((&c[16], &c[17]), (&was["cause"], &was["ns"]), "{c:?}");
                cascades.push(c[16].as_str().unwrap().to_string());
            }
            None => assert_eq!((c[16].as_str(), c[17].as_u64()), (Some(""), Some(0)), "{c:?}"),
        }
    }
    // Ten lock waits and ten naps at least (--why-above 2ms keeps them).
    assert!(with_why >= 20, "{with_why} calls with a breakdown");
    // The holder sleeps with the lock held: the lock waits' waker was asleep.
    assert!(cascades.iter().any(|c| c == "timer"), "no cascade through the holder's sleep: {cascades:?}");

    let futex = got["futex"].as_array().unwrap();
    assert_eq!(futex.len() as i64, kv["lock_waits"], "each lock wait joins its stacks: {futex:?}");
    for f in futex {
        assert_eq!(f[0], "wait_for_holder", "{f}");
        let kernel = strs(&f[1]);
        assert!(kernel.iter().any(|k| k.starts_with("futex_wait") || k.starts_with("futex_do_wait")), "{kernel:?}");
        assert!(kernel.iter().any(|k| k.starts_with("__x64_sys_futex")), "{kernel:?}");
    }
}

/// `why --stacks`, `--folded` and `--flame` on a trace read from standard input (`-r -`) say
/// what they say of the same trace as a file: the stack table is read from the blocks as they
/// come.
#[test]
fn why_stacks_of_a_trace_on_standard_input_are_those_of_the_file() {
    if !require_bpf("why_stacks_of_a_trace_on_standard_input_are_those_of_the_file") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (trace, _) = recording();
    let piped = |args: &[&str]| -> String {
        let out = Command::new(bin())
            .args(["why", "-r", "-"])
            .args(args)
            .stdin(std::fs::File::open(trace).unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "why -r - {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let t = trace.to_str().unwrap();
    let json = piped(&["--stacks", "--waits", "--json"]);
    assert_eq!(json, latscope_ok(&["why", "-r", t, "--stacks", "--waits", "--json"]));
    let v: Value = serde_json::from_str(&json).unwrap();
    // The futex wait's stack (the sleep's has about as much blocked time: either may come first).
    let futex = v["stacks"].as_array().unwrap().iter().find(|s| s["op"] == "futex").expect("a futex stack");
    assert_eq!(strs(&futex["user"]).first().map(String::as_str), Some("wait_for_holder"), "{v}");
    let folded = piped(&["--waits", "--folded", "-"]);
    assert!(folded.contains("wait_for_holder;") && folded.contains("futex"), "{folded}");
    assert_eq!(folded, latscope_ok(&["why", "-r", t, "--waits", "--folded", "-"]));
    let svg = tmp.path().join("stdin.svg");
    piped(&["--waits", "--flame", svg.to_str().unwrap()]);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("wait_for_holder"));
}

/// The breakdown as a picture (`top --by cause --svg`, `why --svg`) opens in headless Chromium
/// with a bar per operation labelled by name and total time, the causes in the legend, a time
/// axis with units, the wakers, and no text overlapping another or running off the drawing.
#[test]
fn why_breakdown_svg_draws_causes_and_wakers_without_overlapping_text() {
    let test = "why_breakdown_svg_draws_causes_and_wakers_without_overlapping_text";
    if !require_bpf(test) {
        return;
    }
    let Some(chrome) = chromium(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (trace, kv) = recording();
    let t = trace.to_str().unwrap();
    let main = format!("thread.tid = {}", kv["main"]);
    let top_svg = tmp.path().join("top.svg");
    latscope_ok(&["top", "-r", t, "--by", "cause", "--waits", "--svg", top_svg.to_str().unwrap(), &main]);
    let why_svg = tmp.path().join("why.svg");
    latscope_ok(&["why", "-r", t, "--waits", "--svg", why_svg.to_str().unwrap(), &main]);
    for svg in [&top_svg, &why_svg] {
        let l = layout(&chrome, svg, "");
        let texts: Vec<&str> = l.iter().filter(|e| e.tag == "text" && e.visible).map(|e| e.text.as_str()).collect();
        for want in ["futex", "lock", "timer/sleep", "all operations", "[timer]"] {
            assert!(texts.contains(&want), "{}: no text {want:?} in {texts:?}", svg.display());
        }
        // The futex bar's value: its calls, with a unit.
        let calls = format!("ms in {} calls", kv["lock_waits"]);
        assert!(texts.iter().any(|t| t.ends_with(&calls)), "{texts:?}");
        // The time axis: a tick in ms, and the holder thread woke the lock waits.
        assert!(texts.iter().any(|t| t.ends_with("00ms")), "{texts:?}");
        assert!(texts.iter().any(|t| t.ends_with("ms blocked")), "{texts:?}");
        let holder = texts.iter().filter(|t| t.contains('/') && !t.starts_with('[')).count();
        assert!(holder >= 1, "the lock's holder thread as a waker: {texts:?}");
        assert_text_fits(&l, "breakdown");
    }
    // The lock's share of the futex bar is the recorded one: the futex calls were all lock.
    let doc = std::fs::read_to_string(&top_svg).unwrap();
    assert!(doc.contains("<title>futex, lock: "), "a tooltip names the futex bar's lock time");
    // --svg belongs to --by cause.
    let out = common::latscope(&["top", "-r", t, "--by", "file", "--svg", tmp.path().join("x.svg").to_str().unwrap()]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--by cause"));
    assert!(!tmp.path().join("x.svg").exists());
}

/// Build `tests/NAME.c` into `dir` with frame pointers; returns the program.
fn build(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/{name}.c"));
    let st = Command::new("cc")
        .args(["-O2", "-g", "-fno-omit-frame-pointer", "-pthread", "-Wall", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("cc runs");
    assert!(st.success(), "compiling {} failed", src.display());
    out
}

/// An unprivileged process with 36,000 mappings that calls from ever new addresses (a new user
/// stack per call: 18,000, more than the kernel's stack maps hold) does not blind `record --why
/// --stacks`: no event is lost, its /proc maps are read a bounded number of times (not once per
/// stack), a workload started after it flooded the maps still gets every stack, and the
/// flooder's stacks past its share of the trace's stack table are missing, counted by reason in
/// the summaries `record` and `info` print.
#[test]
fn a_process_calling_from_ever_new_addresses_does_not_blind_record_why_stacks() {
    let test = "a_process_calling_from_ever_new_addresses_does_not_blind_record_why_stacks";
    if !require_bpf(test) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (flood, victim) = (build(tmp.path(), "stack_flood"), build(tmp.path(), "why_stacks"));
    let pages = 18_000;
    let (fout, vout) = (tmp.path().join("flood.out"), tmp.path().join("victim.out"));
    // The victim starts once the flooder has made 10,000 new stacks (its second line).
    let script = format!(
        "{} {pages} 1 65534 | {{ read ready; read flooded; {} 10 20 > {v}; cat > {f}; }}",
        flood.display(),
        victim.display(),
        f = fout.display(),
        v = vout.display()
    );
    let (trace, json) = (tmp.path().join("t.lst"), tmp.path().join("rec.json"));
    let out = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--why", "--stacks", "--quiet", "--no-block", "--buffer-size", "8MiB"])
        .arg(format!("--json={}", json.display()))
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "record failed: {}", String::from_utf8_lossy(&out.stderr));
    let flood_out = std::fs::read_to_string(&fout).unwrap();
    assert!(flood_out.contains(&format!("calls {pages}")), "the flooder ran to its end: {flood_out}");
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(rec["lost"], 0, "events lost while a process flooded the stacks: {rec}");

    // Its maps were read a few times, not once per stack: every process at the start (the
    // recorder reads what they map then), the few processes since, and a process's maps again
    // at most at 4 MiB/s (the flooder's are megabytes: about once a second).
    let t = trace.to_str().unwrap();
    let info = latscope_json(&["info", "-r", t, "--json"]);
    let at_start = info["header"]["processes"].as_u64().unwrap();
    let reads = rec["stacks"]["maps_reads"].as_u64().unwrap();
    let secs = rec["duration_s"].as_f64().unwrap().ceil() as u64;
    assert!(
        reads <= at_start + 20 + 2 * secs,
        "{reads} reads of /proc maps ({at_start} processes at the start, {secs} s): {rec}"
    );

    // The victim's stacks are all there: its lock waits under its waiting function.
    let main: i64 = std::fs::read_to_string(&vout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("main ").and_then(|v| v.trim().parse().ok()))
        .expect("the victim's main thread");
    let v = latscope_json(&["why", "-r", t, "--stacks", "--waits", "--json", &format!("thread.tid = {main}")]);
    let futex = v["stacks"].as_array().unwrap().iter().find(|s| s["op"] == "futex").expect("the futex stack");
    assert_eq!(strs(&futex["user"]).first().map(String::as_str), Some("wait_for_holder"), "{v}");
    let waits: i64 = std::fs::read_to_string(&vout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("lock_waits ").and_then(|v| v.trim().parse().ok()))
        .expect("the victim's lock waits");
    let unseen = common::calls_with_switch_unseen(v["stacks"].as_array().unwrap()) as i64;
    // A wait whose stack copy was not taken (the ring a quarter full while the flooder ran)
    // keeps its frame-pointer stack, which skips `main` under the frameless leaf: a stack of
    // its own, with the same leaf.
    let calls: i64 = v["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["op"] == "futex" && strs(&s["user"]).first().map(String::as_str) == Some("wait_for_holder"))
        .map(|s| s["calls"].as_i64().unwrap())
        .sum();
    assert!(calls == waits || calls + unseen == waits, "{v}");
    for s in v["stacks"].as_array().unwrap() {
        let kernel_ok = s["kernel_missing"].is_null() || common::switch_unseen(s);
        assert!(s["user_missing"].is_null() && kernel_ok, "the victim lost a stack: {s}");
    }

    // The flooder's stacks past its share are missing, and said so with their reason, the
    // same in record's summary and in `info`.
    let missing = &rec["stacks"]["missing"];
    let total: u64 = missing.as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
    let share = u64::from(latscope_live::MAX_STACKS / 4);
    assert!(total >= (pages - share) / 2, "{total} missing stacks of {pages} distinct ones: {rec}");
    assert_eq!(&info["stacks_missing"], missing, "{info}");
    let text = latscope_ok(&["info", "-r", t]);
    assert!(text.contains(&format!("stacks:      {total} stack references missing (")), "{text}");
}

/// coreutils' `sleep`, 8 times: each exits right after its one blocking call, before the
/// recorder reads its maps (a program such as `dd conv=fsync` lost every stack so). From Linux
/// 5.17 the kernel names the frames of the stacks not yet read as files at the exit: every
/// sleep's user stack is named, starting at libc's nanosleep, and none is missing; so are a
/// frame in a library on an overlayfs and one in the program itself.
#[test]
fn stacks_of_processes_that_exit_right_after_their_call_are_named() {
    let test = "stacks_of_processes_that_exit_right_after_their_call_are_named";
    if !require_bpf(test) {
        return;
    }
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut v = rel.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse::<u32>().ok());
    if (v.next().unwrap_or(0), v.next().unwrap_or(0)) < (5, 17) {
        latscope_testkit::skip(test, "bpf_find_vma needs Linux 5.17 (vmtest checks the older kernels' answer)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.lst");
    let t = trace.to_str().unwrap();
    let script = "for i in 1 2 3 4 5 6 7 8; do sleep 0.02; done";
    latscope_ok(&["record", "-w", t, "--why", "--stacks", "--quiet", "--no-block", "--", "sh", "-c", script]);
    let v = latscope_json(&["why", "-r", t, "--stacks", "--waits", "-n", "20", "--json", "proc.name = sleep"]);
    let sleeps: Vec<&Value> =
        v["stacks"].as_array().unwrap().iter().filter(|s| s["op"].as_str().unwrap().contains("nanosleep")).collect();
    assert_eq!(sleeps.iter().map(|s| s["calls"].as_u64().unwrap()).sum::<u64>(), 8, "{v}");
    for s in &sleeps {
        let user = strs(&s["user"]);
        assert!(user[0].contains("nanosleep"), "a sleep's user stack not named: {s}");
        assert!(user.iter().all(|f| !f.contains("missing")), "{s}");
    }

    // The same from an overlayfs (a container's files): the mapping holds the file beneath,
    // the process opened and /proc maps show the overlay's (Linux 6.8 and later): a library
    // there, loaded by the program, named in the frames of the stack kept at its exit.
    let d = tmp.path();
    for x in ["lower", "upper", "work", "merged"] {
        std::fs::create_dir(d.join(x)).unwrap();
    }
    let (lower, merged) = (d.join("lower"), d.join("merged"));
    std::fs::write(
        d.join("nap.c"),
        "#include <time.h>\n\
         __attribute__((noinline)) void inner_nap(void) { struct timespec t = {0, 20000000}; nanosleep(&t, 0); __asm__ volatile(\"\"); }\n\
         __attribute__((noinline)) void outer_nap(void) { inner_nap(); __asm__ volatile(\"\"); }\n",
    )
    .unwrap();
    std::fs::write(d.join("main.c"), "void outer_nap(void);\nint main(void) { outer_nap(); return 0; }\n").unwrap();
    let cc = |args: &[&str]| {
        let st =
            Command::new("cc").args(["-O1", "-g", "-fno-omit-frame-pointer"]).args(args).status().expect("cc runs");
        assert!(st.success(), "cc {args:?}");
    };
    let lib = lower.join("libnap.so");
    cc(&["-shared", "-fPIC", "-o", lib.to_str().unwrap(), d.join("nap.c").to_str().unwrap()]);
    let rpath = format!("-Wl,-rpath,{}", merged.display());
    let prog = lower.join("napper");
    cc(&["-o", prog.to_str().unwrap(), d.join("main.c").to_str().unwrap(), lib.to_str().unwrap(), &rpath]);
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        d.join("upper").display(),
        d.join("work").display()
    );
    let st = Command::new("mount").args(["-t", "overlay", "overlay", "-o", &opts]).arg(&merged).status().unwrap();
    assert!(st.success(), "mounting an overlay");
    let t2 = d.join("ovl.lst");
    let rec = common::latscope(&[
        "record",
        "-w",
        t2.to_str().unwrap(),
        "--why",
        "--stacks",
        "--quiet",
        "--no-block",
        "--",
        merged.join("napper").to_str().unwrap(),
    ]);
    let f = "proc.name = napper and evt.type in (nanosleep, clock_nanosleep)";
    let why = common::latscope(&["why", "-r", t2.to_str().unwrap(), "--stacks", "--waits", "--json", f]);
    let _ = Command::new("umount").arg(&merged).status();
    assert!(rec.status.success(), "{}", String::from_utf8_lossy(&rec.stderr));
    assert!(why.status.success(), "{}", String::from_utf8_lossy(&why.stderr));
    let v: Value = serde_json::from_slice(&why.stdout).unwrap();
    let user = strs(&v["stacks"][0]["user"]);
    assert!(user.iter().any(|f| f.starts_with("outer_nap")), "the overlay's library named: {v}");
    // and the program's own frame, by the file its exec named
    assert!(user.iter().any(|f| f.starts_with("main")), "the program named: {v}");
}

/// On-CPU samples (`record --profile`): a program built without frame pointers spends its CPU in
/// two leaf functions, 7 parts to 3; the samples name both, and split the CPU time between them
/// as the program's own CPU clock does, within 5 % of the whole; their stacks are unwound to main
/// from the program's unwind tables. `--hot-cold` puts them in one graph beside the blocked time.
#[test]
fn on_cpu_samples_split_the_cpu_between_two_functions_as_their_own_clock() {
    if !require_bpf("on_cpu_samples_split_the_cpu_between_two_functions_as_their_own_clock") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("profile");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/profile.c");
    let st = Command::new("cc")
        .args(["-O2", "-g", "-fomit-frame-pointer", "-Wall", "-o"])
        .arg(&work)
        .arg(&src)
        .status()
        .expect("cc runs");
    assert!(st.success(), "compiling {} failed", src.display());
    let trace = tmp.path().join("p.lst");
    let out = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--profile", "499", "--quiet", "--no-block", "--"])
        .arg(&work)
        .arg("1.5")
        .output()
        .unwrap();
    assert!(out.status.success(), "record failed: {}", String::from_utf8_lossy(&out.stderr));
    let kv: HashMap<String, i64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect();
    let t = trace.to_str().unwrap();
    // Folded stacks: the leaf (last frame) of each, weighed in microseconds.
    let folded = latscope_ok(&["why", "-r", t, "--on-cpu", "--folded", "-", "proc.name = profile"]);
    let (mut a, mut b, mut all, mut under_main) = (0u64, 0u64, 0u64, 0u64);
    for l in folded.lines() {
        let (stack, us) = l.rsplit_once(' ').unwrap();
        let us: u64 = us.parse().unwrap();
        all += us;
        // (a sample in the kernel ends in its kernel frames, `_[k]`)
        match stack.rsplit(';').find(|f| !f.ends_with("_[k]")).unwrap() {
            "hot_a" => a += us,
            "hot_b" => b += us,
            _ => continue,
        }
        // Unwound from the program's tables (no frame pointers): under main, under libc's start.
        if stack.contains(";main;hot_") {
            under_main += us;
        }
    }
    assert!(a > 0 && b > 0, "both functions sampled: {folded}");
    assert!(
        under_main * 10 >= (a + b) * 9,
        "the leaves' stacks unwound to main ({under_main} of {} us): {folded}",
        a + b
    );
    assert!((a + b) * 10 >= all * 8, "most samples in the two functions ({a} + {b} of {all} us): {folded}");
    let want = kv["a_ns"] as f64 / (kv["a_ns"] + kv["b_ns"]) as f64;
    let got = a as f64 / (a + b) as f64;
    assert!((got - want).abs() <= 0.05, "hot_a's share {got:.3} by samples, {want:.3} by its clock: {folded}");
    let text = latscope_ok(&["why", "-r", t, "--on-cpu", "-n", "3"]);
    assert!(text.contains("On-CPU time by stack") && text.contains("hot_a"), "{text}");
    let hc = latscope_ok(&["why", "-r", t, "--hot-cold", "--folded", "-"]);
    assert!(hc.lines().any(|l| l.starts_with("[on CPU];profile;")), "{hc}");
    assert!(hc.lines().all(|l| l.starts_with("[on CPU];") || l.starts_with("[blocked];")), "{hc}");
    let j: Value = serde_json::from_str(&latscope_ok(&["why", "-r", t, "--on-cpu", "--json"])).unwrap();
    assert!(j["total_on_cpu_ns"].as_u64() > Some(0) && j["stacks"][0]["samples"].as_u64() > Some(0), "{j}");
    // `top --by cause` opens the on-CPU time into the functions it was spent in.
    let top = latscope_json(&["top", "-r", t, "--by", "cause", "-n", "2", "--json", "proc.name = profile"]);
    let f: Vec<&str> = top["on_cpu_samples"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap())
        .collect();
    assert_eq!(f, ["hot_a", "hot_b"], "{top}");
    // and each thread's account its user CPU.
    let th = latscope_json(&["why", "-r", t, "--threads", "--json", "proc.name = profile"]);
    let f: Vec<&str> = th["threads"][0]["on_cpu_functions"].as_array().unwrap()[..2]
        .iter()
        .map(|f| f["function"].as_str().unwrap())
        .collect();
    assert_eq!(f, ["hot_a", "hot_b"], "{th}");
}

/// User stacks of code built without frame pointers (`--call-graph dwarf`, the default), unwound
/// from the binaries' unwind tables: a C program built with -O2 -fomit-frame-pointer sleeps
/// three functions deep and waits for a lock in a second thread, then exits at once; Debian's
/// Python (built without frame pointers) sleeps in a Python function. Each stack names the
/// program's functions from the C library's frames back to main (and the thread's start) in
/// call order, and the interpreter's from the sleep back to Py_BytesMain; the program had
/// exited before its stacks were read. With `--call-graph fp` the same sleep stops in libc.
#[test]
fn stacks_of_code_without_frame_pointers_are_unwound_from_its_tables() {
    let test = "stacks_of_code_without_frame_pointers_are_unwound_from_its_tables";
    if !require_bpf(test) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("unwind");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/unwind.c");
    let st = Command::new("cc")
        .args(["-O2", "-fomit-frame-pointer", "-pthread", "-Wall", "-o"])
        .arg(&work)
        .arg(&src)
        .status()
        .expect("cc runs");
    assert!(st.success(), "compiling {} failed", src.display());
    let python = Path::new("/usr/bin/python3");
    // (it lives on after its sleep: a process that execs, sleeps and exits before the recorder
    // reads its maps keeps its frame-pointer stack, docs/WHY.md)
    let py = "import time\ndef napping_function():\n    time.sleep(0.03)\nnapping_function()\ntime.sleep(0.5)\n";
    let script = if python.exists() {
        format!("{} && {} -c '{py}'", work.display(), python.display())
    } else {
        work.display().to_string()
    };
    let trace = tmp.path().join("u.lst");
    let t = trace.to_str().unwrap();
    let out = Command::new(bin())
        .args(["record", "-w", t, "--why-above", "10ms", "--stacks", "--quiet", "--no-block", "--", "sh", "-c"])
        .arg(&script)
        .output()
        .unwrap();
    assert!(out.status.success(), "record failed: {}", String::from_utf8_lossy(&out.stderr));
    // Each of `want` in the stack, in this order (innermost first).
    let in_order = |user: &[String], want: &[&str]| {
        let at: Vec<Option<usize>> =
            want.iter().map(|w| user.iter().position(|f| f.split_whitespace().next() == Some(*w))).collect();
        at.iter().all(Option::is_some) && at.windows(2).all(|p| p[0] < p[1])
    };
    let v = latscope_json(&["why", "-r", t, "--stacks", "--waits", "-n", "20", "--json", "proc.name = unwind"]);
    let stacks = v["stacks"].as_array().unwrap();
    let sleep = stacks.iter().find(|s| s["op"].as_str().unwrap().contains("nanosleep")).expect("the sleep");
    let user = strs(&sleep["user"]);
    assert!(in_order(&user, &["leaf_sleep", "middle_layer", "outer_layer", "main"]), "{sleep}");
    assert!(user[0].contains("nanosleep") && sleep["user_cut"].is_null(), "{sleep}");
    assert_eq!(sleep["calls"], 2, "{sleep}");
    let lock = stacks
        .iter()
        .find(|s| s["op"] == "futex" && strs(&s["user"]).iter().any(|f| f.starts_with("wait_for_lock")))
        .unwrap_or_else(|| panic!("the lock wait: {v}"));
    assert!(in_order(&strs(&lock["user"]), &["wait_for_lock", "lock_thread"]), "{lock}");

    if python.exists() {
        let f = "proc.name = python3 and evt.type in (nanosleep, clock_nanosleep, select)";
        let p = latscope_json(&["why", "-r", t, "--stacks", "--waits", "--json", f]);
        for s in p["stacks"].as_array().unwrap() {
            assert!(in_order(&strs(&s["user"]), &["_PyEval_EvalFrameDefault", "Py_BytesMain"]), "{p}");
        }
    } else {
        latscope_testkit::skip(test, "no /usr/bin/python3: Debian's Python part not run");
    }

    // Frame pointers only: the same sleep stops in the C library.
    let t2 = tmp.path().join("fp.lst");
    let t2 = t2.to_str().unwrap();
    latscope_ok(
        &["record", "-w", t2, "--why-above", "10ms", "--stacks", "--call-graph", "fp", "--quiet", "--no-block", "--"]
            .into_iter()
            .chain([work.to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    let v = latscope_json(&["why", "-r", t2, "--stacks", "--waits", "--json", "proc.name = unwind"]);
    let sleep =
        v["stacks"].as_array().unwrap().iter().find(|s| s["op"].as_str().unwrap().contains("nanosleep")).unwrap();
    assert!(!strs(&sleep["user"]).iter().any(|f| f.starts_with("outer_layer")), "{sleep}");
}

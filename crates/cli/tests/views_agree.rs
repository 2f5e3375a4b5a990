//! Views agree with each other and with the ground truth: rates divide by the time covered, every
//! view counts the same events and says what it left out, one percentile rule, arguments named as
//! strace names them, units kept. Each test runs the binary on a trace of known events.

mod common;
mod viewsupport;

use common::{latscope, latscope_json, latscope_ok};
use latscope_event::{syscall_nr, Event, EventKind};
use viewsupport::write_trace;

const START: u64 = 1_000_000_000_000;
/// The wall clock of `START` in the fixtures' header.
const WALL: u64 = 1_700_000_000_000_000_000;
const SEC: u64 = 1_000_000_000;

fn sys(name: &str, ts: u64, lat: u64) -> Event {
    Event {
        kind: EventKind::Syscall as u8,
        ts,
        lat,
        nr: syscall_nr(name).unwrap(),
        ret: 4096,
        fd: 3,
        fd_type: 1,
        bytes: 4096,
        pid: 10,
        tid: 10,
        comm: "app".into(),
        path: "/data/f".into(),
        ..Default::default()
    }
}

/// A recording of 19.208 s: 2000 writes spread over it and a burst of 1032 reads in its sixth
/// second (5 s to 6 s). The recording ends at the last event's end (the fixtures' summary).
fn burst_trace(dir: &std::path::Path) -> std::path::PathBuf {
    let mut ev = Vec::new();
    for k in 0..2000u64 {
        ev.push(sys("write", START + k * 9_604_000, 10_000));
    }
    for k in 0..1032u64 {
        ev.push(sys("read", START + 5 * SEC + k * 968_000, 5_000));
    }
    // The end of the recording.
    ev.push(Event {
        kind: EventKind::Proc as u8,
        nr: 3,
        ts: START + 19_208_000_000,
        comm: "app".into(),
        ..Default::default()
    });
    ev.sort_by_key(|e| e.ts + e.lat);
    let p = dir.join("burst.lst");
    write_trace(&p, START, &ev);
    p
}

fn rate(j: &serde_json::Value, name: &str) -> f64 {
    let row = j["rows"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("{name}: {j}"));
    row["rate_per_s"].as_f64().unwrap()
}

#[test]
fn rates_divide_by_the_time_covered_recording_filter_window_and_last_interval() {
    let dir = tempfile::tempdir().unwrap();
    let p = burst_trace(dir.path());
    let p = p.to_str().unwrap();
    // The recording's duration is one number: info's, and what top divides by.
    let info = latscope_json(&["info", "-r", p, "--json"]);
    assert_eq!(info["duration_ns"], 19_208_000_000u64, "{info}");
    assert!(latscope_ok(&["info", "-r", p]).contains("duration:    19.2s"));
    let j = latscope_json(&["top", "-r", p, "--by", "syscall", "--json"]);
    assert!((j["seconds"].as_f64().unwrap() - 19.208).abs() < 1e-9, "{j}");
    assert!((rate(&j, "write") - 2000.0 / 19.208).abs() < 1e-6, "{j}");
    // A filter's window of one second: 1032 reads in it are 1032 per second, not 1032 / 19.2 s.
    let window = format!("evt.time >= {} and evt.time < {}", WALL + 5 * SEC, WALL + 6 * SEC);
    let j = latscope_json(&["top", "-r", p, "--by", "syscall", "--json", &window]);
    assert!((j["seconds"].as_f64().unwrap() - 1.0).abs() < 1e-9, "{j}");
    assert!((rate(&j, "read") - 1032.0).abs() < 1e-6, "{j}");
    let text = latscope_ok(&["top", "-r", p, "--by", "syscall", &window]);
    assert!(text.contains("in 1.000 s (the filter's time window, within the recording)"), "{text}");
    assert!(text.lines().nth(1).unwrap().contains("RATE/s") && text.contains(" 1.03k "), "{text}");
    // A window reaching past the recording's end covers only its part inside the recording.
    let j = latscope_json(&["top", "-r", p, "--by", "syscall", "--json", "evt.reltime >= 19s"]);
    assert!((j["seconds"].as_f64().unwrap() - 0.208).abs() < 1e-9, "{j}");
    // The timeline's last interval covers 0.208 s: its rate is per second of that.
    let t = latscope_json(&["timeline", "-r", p, "--json", "evt.type = write"]);
    let pts = t["points"].as_array().unwrap();
    let last = pts.last().unwrap();
    assert_eq!(last["t_s"], 19.0, "{t}");
    assert!((last["covered_s"].as_f64().unwrap() - 0.208).abs() < 1e-9, "{last}");
    let n = last["count"].as_f64().unwrap();
    let truth = (0..2000u64).filter(|k| k * 9_604_000 + 10_000 >= 19 * SEC).count() as f64;
    assert_eq!(n, truth);
    assert!((last["ops_per_s"].as_f64().unwrap() - n / 0.208).abs() < 1e-6, "{last}");
    // Whole intervals divide by their length.
    assert_eq!(pts[3]["covered_s"], 1.0);
    let text = latscope_ok(&["timeline", "-r", p, "evt.type = write"]);
    assert!(text.contains("the interval at 19s covers 208ms of its 1s"), "{text}");
    // The timeline's rates over the filter's window: the burst's second is 1032/s.
    let t = latscope_json(&["timeline", "-r", p, "--json", &format!("evt.type = read and {window}")]);
    let busy: Vec<&serde_json::Value> =
        t["points"].as_array().unwrap().iter().filter(|x| x["count"].as_u64() > Some(0)).collect();
    assert_eq!(busy.len(), 1, "{t}");
    assert!((busy[0]["ops_per_s"].as_f64().unwrap() - 1032.0).abs() < 1e-6, "{t}");
}

/// 400 reads (the work), 20 futex and 20 epoll_wait calls (idle waits).
fn work_and_waits(dir: &std::path::Path) -> std::path::PathBuf {
    let mut ev = Vec::new();
    for k in 0..400u64 {
        ev.push(sys("read", START + k * 2_000_000, 20_000 + k * 50));
        if k % 20 == 0 {
            let mut f = sys("futex", START + k * 2_000_000 + 1, 300_000_000);
            f.fd = -1;
            ev.push(f);
            let mut e = sys("epoll_wait", START + k * 2_000_000 + 2, 100_000_000);
            e.fd = -1;
            ev.push(e);
        }
    }
    ev.sort_by_key(|e| e.ts + e.lat);
    let p = dir.join("waits.lst");
    write_trace(&p, START, &ev);
    p
}

#[test]
fn every_view_counts_the_same_events_and_says_what_it_left_out_in_its_header() {
    let dir = tempfile::tempdir().unwrap();
    counts_in(&dir);
}

fn counts_in<'a>(dir: &'a tempfile::TempDir) {
    let p: &'a str = Box::leak(work_and_waits(dir.path()).to_str().unwrap().to_string().into_boxed_str());
    let svg: &'a str = Box::leak(dir.path().join("m.svg").to_str().unwrap().to_string().into_boxed_str());
    for (waits, head) in
        [(false, "400 syscall events (40 idle waits left out)"), (true, "440 syscall events (idle waits included)")]
    {
        let with = |mut v: Vec<&'a str>| {
            if waits {
                v.push("--waits");
            }
            v
        };
        let first = |args: Vec<&str>| latscope_ok(&args).lines().next().unwrap_or("").to_string();
        assert!(first(with(vec!["top", "-r", p, "--by", "syscall"])).starts_with(head), "top");
        assert!(first(with(vec!["hist", "-r", p])).starts_with(head), "hist");
        assert!(first(with(vec!["timeline", "-r", p])).starts_with(head), "timeline");
        let h = latscope_json(&with(vec!["heatmap", "-r", p, "--json"]));
        assert!(h["subtitle"].as_str().unwrap().contains(head), "heatmap: {}", h["subtitle"]);
        let total: u64 = h["maps"].as_array().unwrap().iter().map(|m| m["total"].as_u64().unwrap()).sum();
        assert_eq!(total, if waits { 440 } else { 400 });
        latscope_ok(&with(vec!["heatmap", "-r", p, "-o", svg]));
        assert!(std::fs::read_to_string(svg).unwrap().contains(head), "heatmap svg");
        let sp = latscope_ok(&with(vec!["spectrogram", "-r", p, "--plain", "--no-pace", "--width", "100"]));
        let tail = sp.lines().last().unwrap();
        let want = if waits { "# 440 events (idle waits included)" } else { "# 400 events (40 idle waits left out)" };
        assert!(tail.starts_with(want), "spectrogram: {tail}");
        // The JSON of each says the rule too.
        let t = latscope_json(&with(vec!["top", "-r", p, "--json"]));
        assert_eq!(t["counted"]["idle_waits"], if waits { "included" } else { "left out" });
        assert_eq!(t["events"], if waits { 440 } else { 400 });
    }
}

#[test]
fn top_and_hist_give_the_same_percentiles_of_the_same_events() {
    let dir = tempfile::tempdir().unwrap();
    // 101 calls: few enough for a table to keep them one by one.
    let ev: Vec<Event> = (0..101u64).map(|k| sys("read", START + k * 1000, 76_000 + k * 37)).collect();
    let p = dir.path().join("few.lst");
    write_trace(&p, START, &ev);
    let p = p.to_str().unwrap();
    let top = latscope_json(&["top", "-r", p, "--by", "syscall", "--json", "--percentiles", "50,90,99"]);
    let hist = latscope_json(&["hist", "-r", p, "--json"]);
    let tl = latscope_json(&["timeline", "-r", p, "--json"]);
    for q in ["p50", "p90", "p99"] {
        assert_eq!(top["rows"][0][format!("{q}_ns")], hist["groups"][0]["stats"][format!("{q}_ns")], "{q}");
    }
    assert_eq!(tl["points"][0]["p50_ns"], hist["groups"][0]["stats"]["p50_ns"]);
    // The rule: the top of the 1/128 bucket holding the value of rank ceil(q n).
    let exact = 76_000 + 50 * 37;
    let p50 = hist["groups"][0]["stats"]["p50_ns"].as_u64().unwrap();
    assert!(p50 >= exact && p50 as f64 <= exact as f64 * (1.0 + 1.0 / 128.0), "{p50}");
    // A table sorted by a percentile it was not asked for shows it.
    let t = latscope_ok(&["top", "-r", p, "--sort", "p99.9"]);
    assert!(t.lines().nth(1).unwrap().contains("P99.9"), "{t}");
}

#[test]
fn hist_of_two_column_text_keeps_fractions_and_reads_time_units() {
    let dir = tempfile::tempdir().unwrap();
    let txt = dir.path().join("lat.txt");
    std::fs::write(&txt, "1 0.784\n2 1.5\n3 2.25\n4 0.9\n").unwrap();
    let t = txt.to_str().unwrap();
    let plain = latscope_ok(&["hist", "--input", "text", "-r", t]);
    assert!(plain.contains("min 0.784 ") && plain.contains("max 2.25"), "{plain}");
    let ms = latscope_ok(&["hist", "--input", "text", "-r", t, "--unitslat", "ms"]);
    assert!(ms.contains("min 784us ") && ms.contains("max 2.25ms"), "{ms}");
}

#[test]
fn arguments_read_as_strace_names_them_and_pointers_are_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut lock = sys("fcntl", START + 10, 1000);
    (lock.flags, lock.mode, lock.path) = (6, 0x3255_3127, "/db/main.db".into());
    let mut adv = sys("fadvise64", START + 20, 1000);
    (adv.flags, adv.off, adv.bytes) = (4, 0, 0);
    let mut map = sys("mmap", START + 30, 1000);
    (map.fd, map.fd_type, map.mode, map.flags, map.addr, map.bytes, map.path) = (-1, 0, 3, 0x22, 0, 8192, "".into());
    let mut fx = sys("futex", START + 40, 1000);
    (fx.fd, fx.fd_type, fx.addr, fx.flags, fx.ret, fx.path) = (-1, 0, 0x7f3a_5c00_10a8, 128, -11, "".into());
    let p = dir.path().join("args.lst");
    write_trace(&p, START, &[lock, adv, map, fx]);
    let p = p.to_str().unwrap();
    let lines = latscope_ok(&["events", "-r", p]);
    let l: Vec<&str> = lines.lines().collect();
    assert!(l[0].contains("fcntl fd=3(<file>/db/main.db) cmd=F_SETLK = 4096") && !l[0].contains("mode="), "{}", l[0]);
    assert!(l[1].contains("advice=POSIX_FADV_DONTNEED"), "{}", l[1]);
    assert!(l[2].contains("addr=NULL prot=PROT_READ|PROT_WRITE flags=MAP_PRIVATE|MAP_ANONYMOUS"), "{}", l[2]);
    assert!(
        l[3].contains("futex uaddr=0x7f3a5c0010a8 op=FUTEX_WAIT_PRIVATE = ") && l[3].contains("EAGAIN"),
        "{}",
        l[3]
    );
    let j = common::json_lines(&latscope_ok(&["events", "-r", p, "--json"]));
    assert_eq!(j[0]["args"]["cmd"], "F_SETLK");
    assert!(j[0]["args"].get("arg").is_none(), "{}", j[0]);
    assert_eq!(j[1]["args"]["advice"], "POSIX_FADV_DONTNEED");
    // The filter compares the names the lines show.
    assert_eq!(latscope_ok(&["events", "-r", p, "evt.arg.flags = F_SETLK"]).lines().count(), 1);
    assert_eq!(latscope_ok(&["events", "-r", p, "evt.arg.flags = FUTEX_WAIT_PRIVATE"]).lines().count(), 1);
    assert_eq!(latscope_ok(&["events", "-r", p, "evt.arg.mode = 'PROT_READ|PROT_WRITE'"]).lines().count(), 1);
    // A value the line leaves out is absent to the filter too: fcntl(F_SETLK)'s struct flock.
    assert_eq!(latscope_ok(&["events", "-r", p, "evt.type = fcntl and evt.arg.mode exists"]).lines().count(), 0);
}

#[test]
fn events_why_on_a_trace_recorded_without_it_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plain.lst");
    write_trace(&p, START, &[sys("fsync", START + 10, 2_000_000)]);
    let o = latscope(&["events", "-r", p.to_str().unwrap(), "--why"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("none of these 1 calls carries a breakdown: the trace was recorded without --why"), "{err}");
}

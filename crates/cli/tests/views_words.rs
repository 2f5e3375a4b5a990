//! What a person reads around the numbers: rankings of work rather than idleness, event types
//! that mean one thing, and `--help` examples that copy and paste at any terminal width. Each
//! test runs the binary on a trace of known events.

mod common;
mod viewsupport;

use common::{bin, latscope_json, latscope_ok};
use latscope_event::{syscall_nr, Event, EventKind};
use serde_json::Value;
use std::process::Command;
use viewsupport::write_trace;

const START: u64 = 1_000_000_000_000;

/// A server's day: 400 short reads and writes on files (the work), 20 futex waits of 500 ms and
/// 20 epoll_waits of 300 ms (idle threads), 100 block writes of 4 ms, one exec.
fn server_trace(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("t.lst");
    let (read, write, futex, epoll) = (
        syscall_nr("read").unwrap(),
        syscall_nr("write").unwrap(),
        syscall_nr("futex").unwrap(),
        syscall_nr("epoll_wait").unwrap(),
    );
    let mut ev = Vec::new();
    let mut t = START + 1000;
    for i in 0..400u64 {
        t += 1_000_000;
        let (nr, path) = if i % 2 == 0 { (read, "/data/a") } else { (write, "/data/b") };
        ev.push(Event {
            kind: EventKind::Syscall as u8,
            ts: t,
            lat: 20_000 + i * 10,
            nr,
            ret: 4096,
            fd: 3,
            fd_type: 1,
            bytes: 4096,
            pid: 10,
            tid: 10,
            comm: "srv".into(),
            path: path.into(),
            dev: (8 << 20) | 1,
            ..Default::default()
        });
        if i % 4 == 0 {
            ev.push(Event {
                kind: EventKind::Block as u8,
                ts: t + 1,
                lat: 4_000_000,
                nr: 1,
                dev: 254 << 20,
                bytes: 4096,
                comm: "kworker".into(),
                fd: -1,
                ..Default::default()
            });
        }
        if i % 20 == 0 {
            for (nr, lat) in [(futex, 500_000_000), (epoll, 300_000_000)] {
                ev.push(Event {
                    kind: EventKind::Syscall as u8,
                    ts: t + 2,
                    lat,
                    nr,
                    fd: -1,
                    pid: 10,
                    tid: 11,
                    comm: "srv".into(),
                    ..Default::default()
                });
            }
        }
    }
    ev.push(Event { kind: EventKind::Proc as u8, ts: START + 5, nr: 1, comm: "srv".into(), ..Default::default() });
    write_trace(&path, START, &ev);
    path
}

fn names(rows: &Value) -> Vec<String> {
    rows.as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn rankings_leave_out_idle_waits_and_say_how_to_include_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = server_trace(dir.path());
    let p = p.to_str().unwrap();
    // top --by syscall ranks the work: futex and epoll_wait (20 s of sleeping) are not first.
    let j = latscope_json(&["top", "-r", p, "--by", "syscall", "--json"]);
    assert_eq!(names(&j["rows"]), ["write", "read"], "{j}");
    assert_eq!(j["waits_left_out"]["count"], 40);
    assert_eq!(j["waits_left_out"]["by_syscall"]["futex"], 20);
    let t = latscope_ok(&["top", "-r", p, "--by", "syscall"]);
    assert!(
        t.contains("left out: 40 blocking waits (futex 20, epoll_wait 20;") && t.contains("--waits includes them"),
        "{t}"
    );
    // By file: no "<no file>" row made of sleeping threads.
    let j = latscope_json(&["top", "-r", p, "--by", "file", "--json"]);
    assert_eq!(names(&j["rows"]), ["/data/b", "/data/a"], "{j}");
    // --waits ranks them with the work, first by total time.
    let j = latscope_json(&["top", "-r", p, "--by", "syscall", "--waits", "--json"]);
    assert_eq!(names(&j["rows"])[..2], ["futex", "epoll_wait"], "{j}");
    // ... and still say what kinds of waits they are.
    assert!(
        j["note"].as_str().unwrap().starts_with("idle waits ranked with the work (--waits): 40 with no breakdown"),
        "{j}"
    );
    // A filter asking for waits gets them.
    let t = latscope_ok(&["top", "-r", p, "--by", "syscall", "evt.type = futex"]);
    assert!(t.contains("futex") && t.contains("only idle waits matched"), "{t}");
    // hist --by syscall agrees, in text, JSON and SVG.
    let j = latscope_json(&["hist", "-r", p, "--by", "syscall", "--json"]);
    let groups: Vec<&str> = j["groups"].as_array().unwrap().iter().map(|g| g["group"].as_str().unwrap()).collect();
    assert_eq!(groups, ["read", "write"], "{j}");
    assert_eq!(j["waits_left_out"]["count"], 40);
    let t = latscope_ok(&["hist", "-r", p, "--by", "syscall"]);
    assert!(t.contains("left out: 40 blocking waits") && t.contains("--waits"), "{t}");
    let svg = dir.path().join("h.svg");
    latscope_ok(&["hist", "-r", p, "--by", "syscall", "--svg", svg.to_str().unwrap()]);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("left out: 40 blocking waits"));
    let j = latscope_json(&["hist", "-r", p, "--json"]);
    assert_eq!(j["groups"][0]["stats"]["count"], 400, "{j}");
    let j = latscope_json(&["hist", "-r", p, "--waits", "--json"]);
    assert_eq!(j["groups"][0]["stats"]["count"], 440, "{j}");
}

#[test]
fn evt_type_names_the_syscall_and_block_requests_have_their_own_names() {
    let dir = tempfile::tempdir().unwrap();
    let p = server_trace(dir.path());
    let p = p.to_str().unwrap();
    let count = |f: &str| latscope_ok(&["events", "-r", p, f]).lines().count();
    // 200 write syscalls, and no block write among them.
    assert_eq!(count("evt.type in (write, pwrite64)"), 200);
    assert_eq!(count("evt.type = block_write"), 100);
    assert_eq!(count("evt.type = proc_exec"), 1);
    let lines = latscope_ok(&["events", "-r", p, "evt.type = write"]);
    assert!(!lines.contains("block_write"), "{lines}");
    // The name a line prints is the name the filter takes, in JSON too.
    let j: Value =
        serde_json::from_str(latscope_ok(&["events", "-r", p, "--json", "evt.kind = block"]).lines().next().unwrap())
            .unwrap();
    assert_eq!(j["type"], "block_write");
    // Views group them apart under the same names.
    let j = latscope_json(&["top", "-r", p, "--by", "op", "--block", "--json"]);
    assert_eq!(names(&j["rows"]), ["block_write"]);
    // A bare block op is not a type: the error names the one meant.
    let o = common::latscope(&["events", "-r", p, "evt.type = flush"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("did you mean block_flush?"));
    // info spells types as events does.
    let info = latscope_ok(&["info", "-r", p]);
    assert!(info.contains("proc_exec") && info.contains("block_write") && !info.contains("proc exec"), "{info}");
}

/// The examples of a help text: the indented lines after `Examples`, continuation lines (ending
/// in `\`) joined.
fn examples(help: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cont = false;
    for l in help.lines().skip_while(|l| !l.starts_with("Examples")).skip(1) {
        if !l.starts_with("  ") && !cont {
            // A heading within the examples (`Watch them with:`), or their end.
            if l.ends_with(':') {
                continue;
            }
            break;
        }
        if cont {
            let last = out.last_mut().unwrap();
            last.push('\n');
            last.push_str(l);
        } else {
            out.push(l.trim_start().to_string());
        }
        cont = l.ends_with('\\');
    }
    out
}

fn help(cmd: &[&str], columns: u32) -> String {
    let o = Command::new(bin()).args(cmd).arg("--help").env("COLUMNS", columns.to_string()).output().unwrap();
    assert!(o.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.strip_prefix("  ").filter(|r| r.starts_with(|c: char| c.is_ascii_lowercase())))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help" && !c.is_empty())
        .collect()
}

#[test]
fn help_examples_are_verbatim_and_parse_as_shell_at_any_width() {
    let mut all: Vec<Vec<String>> = vec![vec![]];
    for c in commands(&help(&[], 200)) {
        let subs = commands(&help(&[&c], 200));
        all.push(vec![c.clone()]);
        all.extend(subs.into_iter().map(|s| vec![c.clone(), s]));
    }
    assert!(all.len() > 15, "{all:?}");
    let mut lines = 0;
    for cmd in &all {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let wide = examples(&help(&args, 200));
        let narrow = examples(&help(&args, 60));
        assert!(!wide.is_empty(), "latscope {cmd:?} --help has no examples");
        assert_eq!(wide, narrow, "latscope {cmd:?} --help: examples differ at 60 and 200 columns");
        for ex in &wide {
            lines += 1;
            let o = Command::new("bash").args(["-n", "-c", ex]).output().unwrap();
            assert!(
                o.status.success(),
                "latscope {cmd:?} --help: example does not parse as shell: {ex}\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
    assert!(lines > 60, "{lines} example lines");
}

/// Writes as `find | xargs cat` and dd would make them: 8000 to a pipe (about 2 us), 2000
/// buffered (about 40 us), 70 with O_DIRECT (about 220 us) and 40 with O_DIRECT|O_DSYNC (about
/// 4 ms). Each slow population is under 1 % of the writes, the two together just over it. With
/// `sparse`, 40 more spread evenly (on a log axis) over 5-30 us: a few in each bin.
fn mixed_writes(dir: &std::path::Path, sparse: bool) -> std::path::PathBuf {
    let path = dir.join("w.lst");
    let write = syscall_nr("write").unwrap();
    let mut ev = Vec::new();
    let mut t = START + 1000;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut unit = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 1_000_000) as f64 / 1_000_000.0
    };
    for (n, base, spread, file) in [
        (8000, 2_000.0, 0.5, "pipe:[1]"),
        (2000, 40_000.0, 0.2, "/data/log"),
        (70, 220_000.0, 0.06, "/data/f1"),
        (40, 4e6, 0.04, "/data/f2"),
    ] {
        for _ in 0..n {
            t += 100_000;
            // Triangular around the base: one population, no internal structure.
            let lat = base * (1.0 + spread * (unit() + unit() - 1.0));
            ev.push(Event {
                kind: EventKind::Syscall as u8,
                ts: t,
                lat: lat as u64,
                nr: write,
                ret: 4096,
                fd: 3,
                fd_type: 1,
                bytes: 4096,
                pid: 20,
                tid: 20,
                comm: "dd".into(),
                path: file.into(),
                ..Default::default()
            });
        }
    }
    for k in 0..40 * u64::from(sparse) {
        t += 100_000;
        let lat = 5_000.0 * 6f64.powf(k as f64 / 40.0);
        ev.push(Event { ts: t, lat: lat as u64, ..ev[0].clone() });
    }
    write_trace(&path, START, &ev);
    path
}

/// `226us`, `4.00ms`, `1.5s` -> ns.
fn ns(s: &str) -> f64 {
    let i = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or_else(|| panic!("no unit in {s}"));
    let (v, u) = s.split_at(i);
    let v: f64 = v.parse().unwrap_or_else(|_| panic!("not a number: {s}"));
    v * match u {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => panic!("unit {u} in {s}"),
    }
}

#[test]
fn each_peak_names_one_population_by_mode_marker_label_and_range() {
    let dir = tempfile::tempdir().unwrap();
    let p = mixed_writes(dir.path(), false);

    let p = p.to_str().unwrap();
    let t = latscope_ok(&["hist", "-r", p, "evt.type = write"]);
    // Peak lines: `peak N: mode X[..Y], ...; 80% of it within A .. B (...)`.
    let mut peaks = Vec::new();
    for l in t.lines().map(str::trim).filter(|l| l.starts_with("peak ")) {
        let k: usize = l[5..l.find(':').unwrap()].parse().unwrap();
        let mode = ns(l.split("mode ").nth(1).unwrap().split(',').next().unwrap().split("..").next().unwrap());
        let core = l.split("within ").nth(1).unwrap().split(" (").next().unwrap();
        let (a, b) = core.split_once(" .. ").unwrap();
        peaks.push((k, mode, ns(a), ns(b), l.to_string()));
    }
    // The 220 us and the 4 ms writes are peaks of their own, each range one population.
    for want in [220_000.0, 4e6] {
        let (_, mode, a, b, l) = peaks
            .iter()
            .find(|(_, m, ..)| (want * 0.9..want * 1.1).contains(m))
            .unwrap_or_else(|| panic!("no peak at {want} ns:\n{t}"));
        assert!(*a >= want * 0.9 && *b <= want * 1.1 && a <= mode && mode <= b, "{l}\n{t}");
    }
    for (k, mode, a, b, l) in &peaks {
        // No range spans two populations: the narrowest is 2 us +-50 %, so 3x at most.
        assert!(b / a < 3.0 && a <= mode && mode <= b, "{l}\n{t}");
        // The marker sits on a bar holding the mode.
        let bar = t.lines().find(|x| x.ends_with(&format!("◀ peak {k}"))).unwrap_or_else(|| panic!("peak {k}:\n{t}"));
        let mut w = bar.split_whitespace();
        let (lo, _, hi) = (ns(w.next().unwrap()), w.next(), ns(w.next().unwrap()));
        assert!(lo <= *mode && *mode < hi * 1.01, "peak {k} mode {mode} marked on {bar}\n{t}");
    }
    // The SVG: each dashed line stands in the bar holding its label's value.
    let svg_path = dir.path().join("w.svg");
    latscope_ok(&["hist", "-r", p, "evt.type = write", "--svg", svg_path.to_str().unwrap()]);
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let bars: Vec<(f64, f64, f64, f64)> = svg
        .lines()
        .filter(|l| l.contains(r#"class="bar""#))
        .map(|l| {
            let f = |n| viewsupport::attr(l, n).unwrap().parse::<f64>().unwrap();
            (f("data-lo"), f("data-hi"), f("x"), f("x") + f("width"))
        })
        .collect();
    let labels: Vec<&str> = svg
        .split(r#"class="peaklabel""#)
        .skip(1)
        .map(|s| &s[s.find('>').unwrap() + 1..s.find("</").unwrap()])
        .collect();
    let lines: Vec<f64> = svg
        .lines()
        .filter(|l| l.contains(r#"class="peak""#))
        .map(|l| viewsupport::attr(l, "x1").unwrap().parse().unwrap())
        .collect();
    assert_eq!(labels.len(), peaks.len(), "{svg}");
    for (label, x) in labels.iter().zip(&lines) {
        let v = ns(label.split(": ").nth(1).unwrap().split(' ').next().unwrap());
        let bar = bars.iter().find(|b| b.0 <= v * 1.005 && v < b.1).unwrap_or_else(|| panic!("no bar holds {label}"));
        assert!(bar.2 - 0.5 <= *x && *x <= bar.3 + 0.5, "{label}: line at x={x}, its bar {bar:?}");
    }
}

/// Bars of an SVG as (panel, lowest value, x, width, height, fill).
fn svg_bars(svg: &str) -> Vec<(usize, f64, f64, f64, f64, String)> {
    let mut panel = 0;
    let mut out = Vec::new();
    for l in svg.lines() {
        if l.contains(r#"<g class="hist""#) {
            panel += 1;
        }
        if l.contains(r#"class="bar""#) {
            let f = |n| viewsupport::attr(l, n).unwrap().parse::<f64>().unwrap();
            out.push((
                panel,
                f("data-lo"),
                f("x"),
                f("width"),
                f("height"),
                viewsupport::attr(l, "fill").unwrap().into(),
            ));
        }
    }
    out
}

#[test]
fn hist_svg_panels_share_one_value_axis_one_colour_and_can_show_tails_on_a_log_axis() {
    let dir = tempfile::tempdir().unwrap();
    let p = server_trace(dir.path());
    let (p, svg) = (p.to_str().unwrap(), dir.path().join("h.svg"));
    let s = svg.to_str().unwrap();
    // read (20-24 us) and write (20-24 us) and, with --waits, futex (500 ms) and epoll_wait (300 ms).
    latscope_ok(&["hist", "-r", p, "--by", "syscall", "--waits", "--svg", s]);
    let doc = std::fs::read_to_string(&svg).unwrap();
    let bars = svg_bars(&doc);
    // The same value is at the same x in every panel: read's and futex's bars are placed on one axis.
    let x_of = |panel: usize| bars.iter().filter(|b| b.0 == panel).map(|b| (b.1, b.2)).collect::<Vec<_>>();
    let (first, last) = (x_of(1), x_of(4));
    let scale = (last[0].1 - first[0].1) / (last[0].0.ln() - first[0].0.ln());
    assert!(scale > 0.0, "{first:?} {last:?}");
    for panel in 1..=4 {
        for (v, x) in x_of(panel) {
            let want = first[0].1 + (v.ln() - first[0].0.ln()) * scale;
            assert!((x - want).abs() < 0.6, "panel {panel}: {v} ns at x={x}, on the shared axis {want}");
        }
    }
    // One colour: the panels are one measure of different groups.
    assert!(bars.iter().all(|b| b.5 == bars[0].5), "{:?}", bars.iter().map(|b| &b.5).collect::<Vec<_>>());
    // --own-x: each panel spans its own data (futex's bars start at the left edge).
    latscope_ok(&["hist", "-r", p, "--by", "syscall", "--waits", "--own-x", "--svg", s]);
    let own = svg_bars(&std::fs::read_to_string(&svg).unwrap());
    let lefts: Vec<f64> =
        (1..=4).map(|k| own.iter().filter(|b| b.0 == k).map(|b| b.2).fold(f64::MAX, f64::min)).collect();
    assert!(lefts.iter().all(|x| (x - lefts[0]).abs() < 0.6), "{lefts:?}");
    // --log-y: a bar of one event stays visible beside one of 1700 (the 4 ms writes' tail).
    let w = mixed_writes(dir.path(), false);
    let w = w.to_str().unwrap();
    let ratio = |doc: &str| {
        let h: Vec<f64> = svg_bars(doc).iter().map(|b| b.4).collect();
        h.iter().copied().fold(f64::MAX, f64::min) / h.iter().copied().fold(0.0, f64::max)
    };
    latscope_ok(&["hist", "-r", w, "--svg", s]);
    let lin = ratio(&std::fs::read_to_string(&svg).unwrap());
    latscope_ok(&["hist", "-r", w, "--log-y", "--svg", s]);
    let log_doc = std::fs::read_to_string(&svg).unwrap();
    let log = ratio(&log_doc);
    assert!(log > 0.05 && log > 10.0 * lin, "smallest/tallest bar: log {log}, linear {lin}");
    assert!(log_doc.contains("events on a log axis"), "the axis says so");
    // --log-y without a picture is refused.
    assert!(!common::latscope(&["hist", "-r", p, "--log-y"]).status.success());
}

#[test]
fn hist_text_collapses_runs_of_near_empty_bins_and_says_what_they_hold() {
    let dir = tempfile::tempdir().unwrap();
    let p = mixed_writes(dir.path(), true);
    let t = latscope_ok(&["hist", "-r", p.to_str().unwrap()]);
    // Every event is in a printed bar or a collapsed line that counts it.
    let mut total = 0u64;
    let mut collapsed = 0;
    for l in t.lines().skip(5).take_while(|l| !l.contains(" peaks — ")) {
        if let Some(r) = l.split(" bins, ").nth(1) {
            collapsed += 1;
            total += r.split(' ').next().unwrap().parse::<u64>().unwrap();
            assert!(l.ends_with("events, each under 0.5%)"), "{l}");
        } else if !l.contains("empty)") {
            total += l.split_whitespace().nth(3).unwrap().parse::<u64>().unwrap_or_else(|_| panic!("{l}"));
        }
    }
    assert_eq!(total, 10_150, "{t}");
    assert!(collapsed >= 1, "{t}");
    // Four populations over three decades: a screenful, not a page per decade.
    assert!(t.lines().count() < 40, "{} lines:\n{t}", t.lines().count());
    for k in 1..=4 {
        assert!(t.contains(&format!("◀ peak {k}")), "peak {k} is marked:\n{t}");
    }
}

/// At the default width and at a narrow one (labels then stack in more rows or turn left; the
/// statistics line drops whole items).
#[test]
fn hist_svg_peak_labels_never_cross_another_peaks_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = mixed_writes(dir.path(), false);
    let Some(chrome) = viewsupport::chromium("hist_svg_peak_labels_never_cross_another_peaks_line") else {
        return;
    };
    for width in ["900", "480"] {
        let svg = dir.path().join(format!("w{width}.svg"));
        latscope_ok(&["hist", "-r", p.to_str().unwrap(), "--svg", svg.to_str().unwrap(), "--svg-width", width]);
        let doc = std::fs::read_to_string(&svg).unwrap();
        assert!(doc.contains(&format!(r#"width="{width}""#)), "{width}: the picture's width");
        let layout = viewsupport::layout(&chrome, &svg, "");
        let lines: Vec<_> = layout.iter().filter(|e| e.class == "peak").collect();
        let labels: Vec<_> = layout.iter().filter(|e| e.class == "peaklabel").collect();
        assert_eq!((lines.len(), labels.len()), (4, 4), "{width}");
        for (k, label) in labels.iter().enumerate() {
            for (j, line) in lines.iter().enumerate() {
                let x = line.x + line.w / 2.0;
                let crosses = label.x - 1.0 < x && x < label.x + label.w + 1.0 && line.y < label.y + label.h;
                assert!(
                    j == k || !crosses,
                    "{width}: label {:?} crosses the line of peak {} at x={x}: {label:?} {line:?}",
                    label.text,
                    j + 1
                );
            }
        }
        viewsupport::assert_text_fits(&layout, &format!("hist at {width} px"));
        // The statistics line keeps whole items (a number cut in the middle reads as another):
        // narrow, the far percentiles and the mean are left out, min, p50, p99 and max stay.
        let stats = doc.split(r#"class="stats">"#).nth(1).unwrap().split('<').next().unwrap();
        let items: Vec<Vec<&str>> = stats.split("   ").map(|i| i.split(' ').collect()).collect();
        assert!(items.iter().all(|i| i.len() == 2 && i[1].ends_with('s') && !i[1].contains('…')), "{width}: {stats}");
        for name in ["min", "p50", "p99", "max"] {
            assert!(items.iter().any(|i| i[0] == name), "{width}: {name} left out: {stats}");
        }
    }
}

#[test]
fn json_spells_each_field_one_way_dev_as_major_minor_and_percentiles_with_their_unit() {
    let dir = tempfile::tempdir().unwrap();
    let p = server_trace(dir.path());
    let p = p.to_str().unwrap();
    let first = |f: &str| -> Value {
        serde_json::from_str(latscope_ok(&["events", "-r", p, "--json", f]).lines().next().unwrap()).unwrap()
    };
    // A file's device and a block request's device read alike.
    assert_eq!(first("evt.type = read")["dev"], "8:1");
    assert_eq!(first("evt.type = block_write")["dev"], "254:0");
    assert!(first("evt.type = futex")["dev"].is_null());
    // Percentiles carry their unit in hist as in top and timeline.
    let j = latscope_json(&["hist", "-r", p, "--json"]);
    let st = &j["groups"][0]["stats"];
    for k in ["p50_ns", "p99_ns", "min_ns", "mean_ns", "max_ns"] {
        assert!(st[k].is_number(), "{k}: {st}");
    }
    assert!(st.get("p50").is_none(), "{st}");
    let j = latscope_json(&["hist", "-r", p, "--json", "--field", "size"]);
    assert!(j["groups"][0]["stats"]["p50_bytes"].is_number(), "{j}");
    let j = latscope_json(&["top", "-r", p, "--by", "syscall", "--json"]);
    assert!(j["rows"][0]["p50_ns"].is_number(), "{j}");
}

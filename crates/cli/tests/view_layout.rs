//! Heat maps fit their data and their drawing: column widths chosen for the time the data span,
//! round tick labels, text that neither overlaps nor runs off the picture in headless Chromium,
//! a log colour scale where one cell would wash out the rest.

mod common;
mod viewsupport;

use common::{latscope, latscope_ok};
use latscope_event::{Event, EventKind};
use serde_json::Value;
use std::path::{Path, PathBuf};
use viewsupport::*;

const START: u64 = 1_000_000_000_000;

/// A trace of `n` syscalls spread evenly over `span_ns`, their latencies from `lat(i)`, named
/// `comm(i)` with path `path(i)`.
fn trace(
    dir: &Path,
    name: &str,
    n: u64,
    span_ns: u64,
    lat: impl Fn(u64) -> u64,
    comm: impl Fn(u64) -> String,
) -> PathBuf {
    let read = latscope_event::syscall_nr("pread64").unwrap();
    let events: Vec<Event> = (0..n)
        .map(|i| Event {
            kind: EventKind::Syscall as u8,
            ts: START + 1000 + i * (span_ns / n.max(1)),
            lat: lat(i),
            pid: 100 + (i % 3) as u32,
            tid: 1,
            nr: read,
            ret: 4096,
            fd: 3,
            fd_type: 1,
            bytes: 4096,
            off: ((i * 7919) % 50_000) as i64 * 4096,
            comm: comm(i),
            path: format!("/srv/data/some/rather/long/directory/name/for/the/file/number/{}.dat", i % 4),
            ..Default::default()
        })
        .collect();
    let p = dir.join(name);
    write_trace(&p, START, &events);
    p
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&latscope_ok(args)).unwrap()
}

const ROUND_STEPS: [f64; 17] =
    [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0];

#[test]
fn heatmap_columns_fit_the_time_the_data_span() {
    let dir = tempfile::tempdir().unwrap();
    for (span_s, step) in [(0.3, 0.002), (7.0, 0.05), (9.5, 0.05), (65.0, 0.5), (3700.0, 20.0)] {
        let span = (span_s * 1e9) as u64;
        let t = trace(dir.path(), "t.lst", 4000, span, |i| 1000 + i * 37 % 90_000, |_| "app".into());
        let t = t.to_str().unwrap();
        for extra in [&[][..], &["--linear"], &["--per", "proc"], &["--y", "offset"]] {
            let mut args = vec!["heatmap", "-r", t, "--json"];
            args.extend(extra);
            let j = json(&args);
            let x = &j["maps"][0]["x"];
            let (got, cols) = (x["step"].as_f64().unwrap(), x["cols"].as_u64().unwrap());
            assert!(ROUND_STEPS.iter().any(|s| (s - got).abs() < 1e-12), "{span_s} s {extra:?}: step {got}");
            assert!((got - step).abs() < 1e-12, "{span_s} s {extra:?}: step {got}, wanted {step}");
            assert!((100..=201).contains(&cols) || span_s < 0.5, "{span_s} s {extra:?}: {cols} columns");
            // Every event is in a cell.
            let total: u64 = j["maps"].as_array().unwrap().iter().map(|m| m["total"].as_u64().unwrap()).sum();
            assert_eq!(total, 4000, "{span_s} s {extra:?}");
        }
        // --stepsec keeps its meaning, and --maxcol counts 1 s columns.
        let j = json(&["heatmap", "-r", t, "--json", "--stepsec", "1"]);
        assert_eq!(j["maps"][0]["x"]["step"], 1.0);
        let last_ns = 1000 + 3999 * (span / 4000);
        assert_eq!(j["maps"][0]["x"]["cols"].as_u64().unwrap(), last_ns / 1_000_000_000 + 1);
        let j = json(&["heatmap", "-r", t, "--json", "--maxcol", "0"]);
        assert_eq!((j["maps"][0]["x"]["step"].as_f64(), j["maps"][0]["x"]["cols"].as_u64()), (Some(1.0), Some(1)));
    }
    // Two-column text chooses too, in its own time unit; trace2heatmap.pl's option names work.
    let text = dir.path().join("lat.txt");
    let lines: String = (0..3000).map(|i| format!("{} {}\n", i * 2500, 100 + i % 700)).collect();
    std::fs::write(&text, lines).unwrap();
    let tx = text.to_str().unwrap();
    let j = json(&["heatmap", "--input", "text", "-r", tx, "--unitstime=us", "--unitslabel=us", "--json"]);
    assert_eq!(j["maps"][0]["x"]["step"], 0.05, "7.5 s of text in 50 ms columns");
    assert_eq!(j["maps"][0]["y"]["unit"], "us");
    let j = json(&["heatmap", "--input", "text", "-r", tx, "--unitstime=us", "--unitslatency=us", "--json"]);
    assert_eq!(j["maps"][0]["y"]["unit"], "us");
    let out = dir.path().join("t.svg");
    latscope_ok(&[
        "heatmap",
        "--input",
        "text",
        "-r",
        tx,
        "--unitstime=us",
        "--titletext=T2H",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(std::fs::read_to_string(&out).unwrap().contains(">T2H</text>"));
}

/// The tick labels of an SVG.
fn ticks(svg: &str) -> Vec<String> {
    svg.lines()
        .filter(|l| l.contains("class=\"tick"))
        .map(|l| l[l.find('>').unwrap() + 1..l.rfind("</text>").unwrap()].to_string())
        .collect()
}

#[test]
fn heatmap_ticks_are_round_values() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path(), "t.lst", 20_000, 7_000_000_000, |i| 800 + (i * 7919) % 3_000_000, |_| "app".into());
    let t = t.to_str().unwrap();
    let time = regex_like(r"^\d+(\.\d)?(ns|us|ms|s)$");
    let bytes = regex_like(r"^\d+(B|KiB|MiB|GiB|TiB)$");
    for (extra, bytes_axis) in [
        (&[][..], false),
        (&["--linear"][..], false),
        (&["--linear", "--maxlat", "15ms"][..], false),
        (&["--y", "offset"][..], true),
        (&["--y", "offset", "--log"][..], true),
        (&["--y", "size"][..], true),
    ] {
        let out = dir.path().join("m.svg");
        let mut args = vec!["heatmap", "-r", t, "-o", out.to_str().unwrap()];
        args.extend(extra);
        latscope_ok(&args);
        let svg = std::fs::read_to_string(&out).unwrap();
        let svg_ticks = ticks(&svg);
        let (y, x): (Vec<_>, Vec<_>) =
            svg.lines().filter(|l| l.contains("class=\"tick")).partition(|l| l.contains("ytick"));
        assert!(y.len() >= 2 && x.len() >= 3, "{extra:?}: {svg_ticks:?}");
        for l in &svg_ticks {
            let is_y = y.iter().any(|yl| yl.contains(&format!(">{l}</text>")));
            let ok = if is_y && bytes_axis { bytes(l) } else { time(l) };
            assert!(ok, "{extra:?}: tick label {l:?} is not a round value ({svg_ticks:?})");
            assert!(!l.contains(".0"), "{extra:?}: {l:?}");
        }
    }
}

/// A tiny matcher for the two patterns above (the tests need no regex crate).
fn regex_like(p: &'static str) -> impl Fn(&str) -> bool {
    move |s: &str| {
        let units: &[&str] =
            if p.contains("KiB") { &["TiB", "GiB", "MiB", "KiB", "B"] } else { &["ns", "us", "ms", "s"] };
        let Some(u) = units.iter().find(|u| s.ends_with(*u)) else { return false };
        let num = &s[..s.len() - u.len()];
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        let decimals_ok = if p.contains("KiB") { frac.is_empty() && !num.contains('.') } else { frac.len() <= 1 };
        !int.is_empty()
            && int.chars().all(|c| c.is_ascii_digit())
            && frac.chars().all(|c| c.is_ascii_digit())
            && decimals_ok
    }
}

#[test]
fn heatmap_text_stays_inside_and_apart_in_chromium() {
    let Some(chrome) = chromium("heatmap_text_stays_inside_and_apart_in_chromium") else { return };
    let dir = tempfile::tempdir().unwrap();
    let long = "a-process-with-a-very-long-name-that-goes-on";
    let t = trace(
        dir.path(),
        "t.lst",
        6000,
        6_000_000_000,
        |i| 900 + (i * 7919) % 5_000_000,
        |i| {
            if i % 2 == 0 {
                long.to_string()
            } else {
                format!("p{}", i % 5)
            }
        },
    );
    let short = trace(dir.path(), "s.lst", 300, 1_000_000_000, |i| 1000 + i * 1000, |_| "x".into());
    let (t, short) = (t.to_str().unwrap(), short.to_str().unwrap());
    let filter = "proc.name != nothing and fd.name contains /srv/data and evt.latency > 0 and evt.type = pread64";
    let cases: Vec<Vec<&str>> = vec![
        vec!["-r", t],
        vec![
            "-r",
            t,
            filter,
            "--title",
            "A title that is far too long to fit above the heat map when the map is narrow, and then some more words",
        ],
        vec!["-r", t, "--per", "proc"],
        vec!["-r", t, "--per", "file", "--linear", "--rows", "12"],
        vec!["-r", t, "--y", "offset", "--stepsec", "1", "--rows", "8"],
        vec!["-r", short, "--stepsec", "1", "--fontsize", "16"],
    ];
    for (k, case) in cases.iter().enumerate() {
        let out = dir.path().join(format!("m{k}.svg"));
        let mut args = vec!["heatmap"];
        args.extend(case);
        args.extend(["-o", out.to_str().unwrap()]);
        latscope_ok(&args);
        let svg = std::fs::read_to_string(&out).unwrap();
        let cols: usize = attr(svg.lines().find(|l| l.contains("<g class=\"heatmap\"")).unwrap(), "data-cols")
            .unwrap()
            .parse()
            .unwrap();
        let rows: usize = attr(svg.lines().find(|l| l.contains("<g class=\"heatmap\"")).unwrap(), "data-rows")
            .unwrap()
            .parse()
            .unwrap();
        // Hover over the corners, where the box and the details line are longest or nearest the edge.
        for hash in [
            "".to_string(),
            format!("#hover={},{}", cols - 1, rows - 1),
            "#hover=0,0".into(),
            format!("#hover={},0", cols - 1),
        ] {
            let l = layout(&chrome, &out, &hash);
            assert_text_fits(&l, &format!("case {k} {case:?} {hash}"));
            if !hash.is_empty() {
                let details = l.iter().find(|e| e.id == "details").unwrap();
                assert!(details.text.contains("count "), "case {k}: {details:?}");
                let tip = l.iter().find(|e| e.id == "tipbg").unwrap();
                assert!(
                    tip.x >= 0.0 && tip.x + tip.w <= l.width + 0.5 && tip.y + tip.h <= l.height + 0.5,
                    "case {k} {hash}: {tip:?}"
                );
            }
        }
    }
}

#[test]
fn heatmap_colours_on_a_log_scale_when_one_cell_would_wash_out_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    // A burst: 20,000 calls of 5 us in the first 10 ms, then one call every 10 ms at varied latency.
    let read = latscope_event::syscall_nr("read").unwrap();
    let mut events: Vec<Event> = (0..20_000u64)
        .map(|i| Event {
            kind: 0,
            ts: START + i * 500,
            lat: 5_000,
            nr: read,
            comm: "burst".into(),
            ..Default::default()
        })
        .collect();
    events.extend((0..500u64).map(|i| Event {
        kind: 0,
        ts: START + 20_000_000 + i * 10_000_000,
        lat: 10_000 + (i * 7919) % 2_000_000,
        nr: read,
        comm: "steady".into(),
        ..Default::default()
    }));
    let hot = dir.path().join("hot.lst");
    write_trace(&hot, START, &events);
    let even = trace(dir.path(), "even.lst", 20_000, 5_000_000_000, |i| 1000 + (i % 50) * 1000, |_| "app".into());
    let svg = |p: &Path, extra: &[&str]| {
        let out = dir.path().join("c.svg");
        let mut args = vec!["heatmap", "-r", p.to_str().unwrap(), "-o", out.to_str().unwrap()];
        args.extend(extra);
        latscope_ok(&args);
        std::fs::read_to_string(&out).unwrap()
    };
    assert!(svg(&hot, &[]).contains(">count (log)</text>"), "a hot cell turns the scale logarithmic");
    assert!(svg(&even, &[]).contains(">count</text>"), "an even map stays linear");
    assert!(svg(&hot, &["--color", "linear"]).contains(">count</text>"));
    assert!(svg(&even, &["--color", "log"]).contains(">count (log)</text>"));
    // On the log scale a cell of 1 is visibly coloured next to the hot one (not near-white).
    let s = svg(&hot, &[]);
    let one = s.lines().find(|l| l.contains("data-n=\"1\"")).unwrap();
    let g: u8 = one.split("rgb(255,").nth(1).unwrap().split(',').next().unwrap().parse().unwrap();
    assert!(g < 230, "{one}");
}

#[test]
fn heatmap_refuses_to_write_svg_to_a_terminal() {
    if !common::require_tool("heatmap_refuses_to_write_svg_to_a_terminal", "script") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path(), "t.lst", 100, 1_000_000_000, |i| 1000 + i, |_| "app".into());
    let cmd = format!("{} heatmap -r {}", common::bin().display(), t.display());
    let o = std::process::Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().unwrap();
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{said}");
    assert!(said.contains("not for a terminal") && said.contains("-o FILE"), "{said}");
    assert!(!said.contains("<svg"), "{said}");
    // JSON to a terminal, and SVG to a pipe, are fine.
    let o =
        std::process::Command::new("script").args(["-qec", &format!("{cmd} --json"), "/dev/null"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(latscope(&["heatmap", "-r", t.to_str().unwrap()]).stdout.starts_with(b"<?xml"));
}

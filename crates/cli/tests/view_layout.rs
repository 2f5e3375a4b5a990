//! Heat maps fit their data and their drawing: column widths chosen for the time the data span,
//! round tick labels, text that neither overlaps nor runs off the picture in headless Chromium,
//! a log colour scale where one cell would wash out the rest.

mod common;
mod viewsupport;

use common::{latscope, latscope_json, latscope_ok};
use latscope_event::{Event, EventKind};
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
            let j = latscope_json(&args);
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
        let j = latscope_json(&["heatmap", "-r", t, "--json", "--stepsec", "1"]);
        assert_eq!(j["maps"][0]["x"]["step"], 1.0);
        let last_ns = 1000 + 3999 * (span / 4000);
        assert_eq!(j["maps"][0]["x"]["cols"].as_u64().unwrap(), last_ns / 1_000_000_000 + 1);
        let j = latscope_json(&["heatmap", "-r", t, "--json", "--maxcol", "0"]);
        assert_eq!((j["maps"][0]["x"]["step"].as_f64(), j["maps"][0]["x"]["cols"].as_u64()), (Some(1.0), Some(1)));
    }
    // Two-column text chooses too, in its own time unit; trace2heatmap.pl's option names work.
    let text = dir.path().join("lat.txt");
    let lines: String = (0..3000).map(|i| format!("{} {}\n", i * 2500, 100 + i % 700)).collect();
    std::fs::write(&text, lines).unwrap();
    let tx = text.to_str().unwrap();
    let j = latscope_json(&["heatmap", "--input", "text", "-r", tx, "--unitstime=us", "--unitslabel=us", "--json"]);
    assert_eq!(j["maps"][0]["x"]["step"], 0.05, "7.5 s of text in 50 ms columns");
    assert_eq!(j["maps"][0]["y"]["unit"], "us");
    let j = latscope_json(&["heatmap", "--input", "text", "-r", tx, "--unitstime=us", "--unitslatency=us", "--json"]);
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
        // Linear size rows (log is the default for sizes: one size here would be one row).
        (&["--y", "size", "--linear"][..], true),
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

/// The `(x, label)` of each tick of an SVG whose tick texts carry `class="tick xtick"`.
fn xticks(svg: &str) -> Vec<(f64, String)> {
    svg.lines()
        .filter(|l| l.contains("class=\"tick xtick\""))
        .map(|l| {
            let x: f64 = attr(l, "x").unwrap().parse().unwrap();
            (x, l[l.find('>').unwrap() + 1..l.rfind("</text>").unwrap()].to_string())
        })
        .collect()
}

#[test]
fn spectrogram_svg_fills_its_frame_from_the_fastest_event_to_a_labelled_right_edge() {
    let dir = tempfile::tempdir().unwrap();
    let chrome = chromium("spectrogram_svg_fills_its_frame_from_the_fastest_event_to_a_labelled_right_edge");
    // Latencies from 2us to 5ms; 10, 29 and 300 rows.
    for (rows, interval_ms) in [(10u64, 100u64), (29, 100), (300, 10)] {
        let t = trace(
            dir.path(),
            "t.lst",
            3000,
            rows * interval_ms * 1_000_000,
            |i| 2_000 + (i * 7919) % 5_000_000,
            |_| "app".into(),
        );
        let out = dir.path().join(format!("s{rows}.svg"));
        let o = latscope(&[
            "spectrogram",
            "-r",
            t.to_str().unwrap(),
            "--no-pace",
            &interval_ms.to_string(),
            "--svg",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let svg = std::fs::read_to_string(&out).unwrap();
        // The strip: a sensible height whatever the number of rows.
        let strip = svg.lines().find(|l| l.contains("fill=\"black\"")).unwrap();
        let h: f64 = attr(strip, "height").unwrap().parse().unwrap();
        let (x0, w): (f64, f64) =
            (attr(strip, "x").unwrap().parse().unwrap(), attr(strip, "width").unwrap().parse().unwrap());
        assert!((240.0..=420.0).contains(&h), "{rows} rows drawn {h} px high");
        // The axis starts at the decade below the fastest event (no empty third) and its right
        // edge is labelled.
        let ticks = xticks(&svg);
        assert_eq!(ticks.first().map(|t| (t.0, t.1.as_str())), Some((x0, "1us")), "{rows}: {ticks:?}");
        assert_eq!(ticks.last().map(|t| (t.0, t.1.as_str())), Some((x0 + w, "10ms")), "{rows}: {ticks:?}");
        // Row labels on round times, written so: 0.1s, 0.2s (0.5s apart for 300 rows of 10 ms).
        let labels: Vec<&str> = svg
            .lines()
            .filter(|l| l.contains("class=\"rowlabel\""))
            .map(|l| &l[l.find('>').unwrap() + 1..l.rfind("</text>").unwrap()])
            .collect();
        assert!(labels.len() >= 4, "{rows}: {labels:?}");
        for l in &labels {
            let (int, frac) = l.trim_end_matches('s').split_once('.').unwrap();
            assert!(frac.len() == 1 && int.parse::<u32>().is_ok(), "{rows}: row label {l} ({labels:?})");
        }
        // Every row's cells lie in the strip.
        for l in svg.lines().filter(|l| l.contains("<rect") && l.contains("<title>")) {
            let (x, y): (f64, f64) = (attr(l, "x").unwrap().parse().unwrap(), attr(l, "y").unwrap().parse().unwrap());
            let y0: f64 = attr(strip, "y").unwrap().parse().unwrap();
            assert!(x >= x0 && x < x0 + w && y >= y0 && y < y0 + h, "{rows}: cell outside the strip: {l}");
        }
        if let Some(chrome) = &chrome {
            assert_text_fits(&layout(chrome, &out, ""), &format!("spectrogram of {rows} rows"));
        }
    }
    // --min and --max are kept as given.
    let t = trace(dir.path(), "t.lst", 100, 1_000_000_000, |i| 2_000 + i, |_| "app".into());
    let out = dir.path().join("given.svg");
    let t = t.to_str().unwrap();
    latscope_ok(&["spectrogram", "-r", t, "--no-pace", "--min", "1ns", "--max", "1s", "--svg", out.to_str().unwrap()]);
    let ticks = xticks(&std::fs::read_to_string(&out).unwrap());
    assert_eq!((ticks[0].1.as_str(), ticks.last().unwrap().1.as_str()), ("1ns", "1s"), "{ticks:?}");
}

#[test]
fn heatmap_time_axis_names_its_unit_and_few_columns_still_get_round_ticks() {
    let dir = tempfile::tempdir().unwrap();
    let chrome = chromium("heatmap_time_axis_names_its_unit_and_few_columns_still_get_round_ticks");
    let t = trace(dir.path(), "t.lst", 3000, 15_000_000_000, |i| 1000 + (i * 7919) % 900_000, |_| "app".into());
    let t = t.to_str().unwrap();
    for extra in [&["--stepsec", "1"][..], &["--y", "subsecond"], &[], &["--y", "size"]] {
        let out = dir.path().join("m.svg");
        let mut args = vec!["heatmap", "-r", t, "-o", out.to_str().unwrap()];
        args.extend(extra);
        latscope_ok(&args);
        let svg = std::fs::read_to_string(&out).unwrap();
        let x: Vec<String> = xticks(&svg).into_iter().map(|t| t.1).collect();
        assert!(x.len() >= 3, "{extra:?}: x ticks {x:?}");
        assert!(x.iter().all(|l| !l.contains(".0")), "{extra:?}: {x:?}");
        // The ticks carry their unit (ms, s); the title does not claim another.
        let xlabel = svg.lines().find(|l| l.contains("class=\"xlabel\"")).unwrap();
        assert!(xlabel.contains(">Time since the start<"), "{extra:?}: {xlabel}");
        // No cell past the plot's frame.
        let plot = svg.lines().find(|l| l.contains("class=\"plot\"")).unwrap();
        let f = |l: &str, k: &str| -> f64 { attr(l, k).unwrap().parse().unwrap() };
        let (px, py, pw, ph) = (f(plot, "x"), f(plot, "y"), f(plot, "width"), f(plot, "height"));
        for l in svg.lines().filter(|l| l.contains("data-n=")) {
            let (x, y, w, h) = (f(l, "x"), f(l, "y"), f(l, "width"), f(l, "height"));
            assert!(
                x >= px - 0.05 && y >= py - 0.05 && x + w <= px + pw + 0.05 && y + h <= py + ph + 0.05,
                "{extra:?}: cell past the frame: {l}"
            );
        }
        if let Some(chrome) = &chrome {
            assert_text_fits(&layout(chrome, &out, ""), &format!("{extra:?}"));
        }
    }
}

#[test]
fn heatmap_size_rows_are_logarithmic_by_default_and_offsets_say_what_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let read = latscope_event::syscall_nr("pread64").unwrap();
    // 4 KiB, 16 KiB and 64 KiB reads, and some without an offset.
    let events: Vec<Event> = (0..3000u64)
        .map(|i| Event {
            kind: EventKind::Syscall as u8,
            ts: START + 1000 + i * 1_000_000,
            lat: 5_000,
            nr: read,
            ret: 4096 << (2 * (i % 3)),
            bytes: 4096 << (2 * (i % 3)),
            fd: 3,
            fd_type: 1,
            off: if i % 10 == 0 { -1 } else { (i * 4096) as i64 },
            comm: "app".into(),
            path: "/srv/f".into(),
            ..Default::default()
        })
        .collect();
    let t = dir.path().join("sizes.lst");
    write_trace(&t, START, &events);
    let t = t.to_str().unwrap();
    let j = latscope_json(&["heatmap", "-r", t, "--y", "size", "--json"]);
    let y = &j["maps"][0]["y"];
    assert_eq!(y["scale"], "log", "{y}");
    let bounds = y["row_bounds"].as_array().unwrap();
    let row_of =
        |v: f64| bounds.iter().position(|b| b[0].as_f64().unwrap() <= v && v < b[1].as_f64().unwrap()).expect("a row");
    let rows = [row_of(4096.0), row_of(16384.0), row_of(65536.0)];
    assert!(rows[0] < rows[1] && rows[1] < rows[2], "each size has its own row: {rows:?}");
    assert_eq!(
        latscope_json(&["heatmap", "-r", t, "--y", "size", "--linear", "--json"])["maps"][0]["y"]["scale"],
        "linear"
    );
    let out = dir.path().join("size.svg");
    latscope_ok(&["heatmap", "-r", t, "--y", "size", "-o", out.to_str().unwrap()]);
    let svg = std::fs::read_to_string(&out).unwrap();
    let y: Vec<String> = svg
        .lines()
        .filter(|l| l.contains("class=\"tick ytick\""))
        .map(|l| l[l.find('>').unwrap() + 1..l.rfind("</text>").unwrap()].to_string())
        .collect();
    assert!(y.contains(&"4KiB".to_string()) && y.contains(&"64KiB".to_string()), "{y:?}");
    assert!(svg.contains(">I/O size (log)</text>"));
    let out = dir.path().join("off.svg");
    latscope_ok(&["heatmap", "-r", t, "--y", "offset", "-o", out.to_str().unwrap()]);
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.contains("300 events without an offset"), "{}", svg.lines().find(|l| l.contains("subtitle")).unwrap());
}

#[test]
fn timeline_ticks_are_round_values_and_the_time_axis_names_its_origin() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path(), "t.lst", 40_000, 7_000_000_000, |i| 800 + (i * 7919) % 3_000_000, |_| "app".into());
    let out = dir.path().join("tl.svg");
    latscope_ok(&["timeline", "-r", t.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let svg = std::fs::read_to_string(&out).unwrap();
    let labels = ticks(&svg);
    assert!(labels.len() > 10, "{labels:?}");
    for l in &labels {
        assert!(!l.contains(".0"), "tick label {l:?} is not written round ({labels:?})");
    }
    assert!(svg.contains("Time since the start") && !svg.contains("Time (s)"));
}

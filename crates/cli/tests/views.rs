//! Heat maps, histograms, drill-down tables and timelines, end to end through the binary, against
//! ground truth: known events give known cells, percentiles match the exact sorted values, and
//! trace2heatmap.pl's binning rule (computed here independently) gives the same cells.

mod common;
mod viewsupport;

use common::{bin, latscope, latscope_json, latscope_ok};
use latscope_event::{Event, EventKind};
use latscope_trace::synth::Rng;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use viewsupport::*;

// ---------------------------------------------------------------------------------------------
// trace2heatmap.pl's rule, written from its source's documented behaviour (github.com/brendangregg/HeatMap):
// first line skipped if it has letters; start = the first line's time; max latency defaults to the
// largest; step = int((max - min) / rows); a latency below min or above max is skipped;
// col = int(((t - start) / timefactor) / stepsec); row = int((lat - min) / step); it then draws
// columns 0 .. largest_col - 1 and rows 0 .. int((max - min) / step) - 1.

struct T2h {
    map: BTreeMap<(usize, usize), u64>,
    largest_col: usize,
    largest_row: usize,
}

fn t2h_rule(
    text: &str,
    timefactor: f64,
    stepsec: f64,
    rows: f64,
    min: f64,
    max: Option<f64>,
    step: Option<f64>,
) -> T2h {
    let mut lines: Vec<&str> = text.lines().collect();
    if lines[0].chars().any(|c| c.is_ascii_alphabetic()) {
        lines.remove(0);
    }
    let pairs: Vec<(f64, f64)> = lines
        .iter()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect();
    let start = pairs[0].0;
    let largest = pairs.iter().map(|p| p.1).fold(0.0, f64::max);
    let max = max.unwrap_or(largest);
    let step = step.unwrap_or(((max - min) / rows).trunc());
    let mut map = BTreeMap::new();
    let mut largest_col = 0;
    for &(t, l) in &pairs {
        if l < min || l > max {
            continue;
        }
        let col = (((t - start) / timefactor) / stepsec).trunc() as usize;
        let row = ((l - min) / step).trunc() as usize;
        *map.entry((col, row)).or_insert(0) += 1;
        largest_col = largest_col.max(col);
    }
    T2h { map, largest_col, largest_row: ((max - min) / step).trunc() as usize }
}

/// "time latency" text in us: ~30 s of events, integer and fractional latencies, a header line.
fn t2h_text() -> String {
    let mut r = Rng::new(0x5eed_1234);
    let mut s = String::from("time latency\n");
    let mut t: u64 = 17_442_020_318_913;
    for i in 0..30_000 {
        t += r.below(2000);
        let lat = match r.below(10) {
            0..=5 => 200 + r.below(3000),
            6..=8 => 8000 + r.below(4000),
            _ => 20_000 + r.below(30_000),
        };
        if i % 7 == 0 {
            s.push_str(&format!("{t} {lat}.5\n"));
        } else {
            s.push_str(&format!("{t} {lat}\n"));
        }
    }
    s
}

fn cells_of_map0(svg: &str) -> BTreeMap<(usize, usize), u64> {
    svg_cells(svg).into_iter().filter(|((m, _, _), _)| *m == 0).map(|((_, c, r), n)| ((c, r), n)).collect()
}

fn map_attr(svg: &str, name: &str) -> usize {
    let line = svg.lines().find(|l| l.contains(r#"<g class="heatmap""#)).expect("a map");
    attr(line, name).unwrap().parse().unwrap()
}

#[test]
fn heatmap_text_cells_equal_trace2heatmap_rule() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("out.lat_us");
    let text = t2h_text();
    std::fs::write(&input, &text).unwrap();
    let inp = input.to_str().unwrap();
    // (our extra args, rule arguments)
    type Case<'a> = (Vec<&'a str>, f64, f64, f64, f64, Option<f64>, Option<f64>);
    let cases: Vec<Case> = vec![
        (vec!["--stepsec", "1"], 1e6, 1.0, 50.0, 0.0, None, None),
        (
            vec!["--rows", "37", "--minlat", "500", "--maxlat", "15000", "--stepsec", "0.25"],
            1e6,
            0.25,
            37.0,
            500.0,
            Some(15000.0),
            None,
        ),
        (vec!["--steplat", "700", "--stepsec", "2"], 1e6, 2.0, 50.0, 0.0, None, Some(700.0)),
        (vec!["--rows", "64", "--maxlat", "12ms", "--stepsec=1"], 1e6, 1.0, 64.0, 0.0, Some(12000.0), None),
    ];
    for (k, (extra, tf, ss, rows, min, max, step)) in cases.into_iter().enumerate() {
        let out = dir.path().join(format!("h{k}.svg"));
        let mut args =
            vec!["heatmap", "--input", "text", "-r", inp, "--unitstime=us", "--unitslat=us", "--linear", "-o"];
        args.push(out.to_str().unwrap());
        args.extend(extra.iter().copied());
        latscope_ok(&args);
        let svg = std::fs::read_to_string(&out).unwrap();
        let ours = cells_of_map0(&svg);
        let rule = t2h_rule(&text, tf, ss, rows, min, max, step);
        assert_eq!(ours, rule.map, "case {k}: cells differ from trace2heatmap's rule ({extra:?})");
        // trace2heatmap draws columns < largest_col and rows < largest_row; we draw one more of each.
        assert_eq!(map_attr(&svg, "data-cols"), rule.largest_col + 1, "case {k}");
        assert_eq!(map_attr(&svg, "data-rows"), rule.largest_row + 1, "case {k}");
        let last_col: u64 = ours.iter().filter(|((c, _), _)| *c == rule.largest_col).map(|(_, n)| n).sum();
        assert!(last_col > 0, "case {k}: the last column holds events trace2heatmap.pl would not draw");
        if max.is_none() && step.is_none() {
            let top: u64 = ours.iter().filter(|((_, r), _)| *r == rule.largest_row).map(|(_, n)| n).sum();
            assert!(top > 0, "case {k}: the top row holds the largest latency");
        }
        // The JSON matrix says the same.
        let mut args: Vec<&str> = args.iter().copied().filter(|a| *a != "-o" && *a != out.to_str().unwrap()).collect();
        args.push("--json");
        let j = latscope_json(&args);
        let m = &j["maps"][0];
        let mut from_json = BTreeMap::new();
        for (c, col) in m["counts"].as_array().unwrap().iter().enumerate() {
            for (r, n) in col.as_array().unwrap().iter().enumerate() {
                if n.as_u64().unwrap() > 0 {
                    from_json.insert((c, r), n.as_u64().unwrap());
                }
            }
        }
        assert_eq!(from_json, rule.map, "case {k}: JSON");
    }
}

#[test]
fn heatmap_text_input_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "time latency\n1 10\n2 x20\n").unwrap();
    let o = latscope(&["heatmap", "--input", "text", "-r", bad.to_str().unwrap(), "-o", "/dev/null"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.txt:3: the value 'x20' is not a number (expected two numbers: TIME VALUE)"), "{err}");
    std::fs::write(&bad, "1 10\n2\n").unwrap();
    let o = latscope(&["heatmap", "--input", "text", "-r", bad.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad.txt:2: only one field"), "{o:?}");
    // ns times read as seconds: a clear error, as trace2heatmap.pl's "Too many columns".
    std::fs::write(&bad, "1000000000 5\n9000000000000 7\n").unwrap();
    let o = latscope(&["heatmap", "--input", "text", "-r", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--unitstime"), "{o:?}");
    let o = latscope(&["heatmap", "--input", "text", "-r", "/nonexistent/x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read /nonexistent/x"));
    let o = latscope(&["heatmap", "--input", "text", "-r", bad.to_str().unwrap(), "--stepsec", "0"]);
    assert_eq!(o.status.code(), Some(2));
    let perf = dir.path().join("p.txt");
    std::fs::write(&perf, "a 1 [000] 1.0: block:block_rq_issue: 8,0 R 0 () 8 + 8 [a]\nb 2 [000] 1.5: block:block_rq_complete: 8,0 R () z + 8 [0]\n").unwrap();
    let o = latscope(&["heatmap", "--input", "perf", "-r", perf.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("p.txt:2: sector 'z' is not a number"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Chromium: the SVG renders, and hovering shows the cell's numbers.

#[test]
fn heatmap_svg_renders_in_headless_chromium() {
    let Some(chrome) = chromium("heatmap_svg_renders_in_headless_chromium") else { return };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("lat.txt");
    std::fs::write(&input, t2h_text()).unwrap();
    let svg = dir.path().join("h.svg");
    latscope_ok(&[
        "heatmap",
        "--input",
        "text",
        "-r",
        input.to_str().unwrap(),
        "--unitstime=us",
        "--unitslat=us",
        "--grid",
        "-o",
        svg.to_str().unwrap(),
    ]);
    let png = screenshot(&chrome, &file_url(&svg), &dir.path().join("h.png"), 900, 700);
    let img = decode_png(&png);
    assert_eq!((img.width, img.height), (900, 700));
    let n = img.rgba.len();
    let non_white = img.rgba.iter().filter(|p| p[0] < 235 || p[1] < 235 || p[2] < 235).count();
    let hot = img.rgba.iter().filter(|p| p[0] > 200 && p[1] < 120 && p[2] < 110).count();
    assert!(non_white * 50 > n, "screenshot looks blank: {non_white} of {n} pixels are not white");
    assert!(hot > 100, "no hot (red) cells visible: {hot}");
    // A blank SVG of the same size is indeed white: the check can tell.
    let blank = dir.path().join("blank.svg");
    std::fs::write(&blank, r#"<svg xmlns="http://www.w3.org/2000/svg" width="900" height="700"><rect width="900" height="700" fill="white"/></svg>"#).unwrap();
    let img = decode_png(&screenshot(&chrome, &file_url(&blank), &dir.path().join("b.png"), 900, 700));
    assert_eq!(img.rgba.iter().filter(|p| p[0] < 235 || p[1] < 235 || p[2] < 235).count(), 0);
}

#[test]
fn heatmap_hover_shows_time_range_count_and_percentile() {
    let Some(chrome) = chromium("heatmap_hover_shows_time_range_count_and_percentile") else { return };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("lat.txt");
    let text = t2h_text();
    std::fs::write(&input, &text).unwrap();
    let svg = dir.path().join("h.svg");
    latscope_ok(&[
        "heatmap",
        "--input",
        "text",
        "-r",
        input.to_str().unwrap(),
        "--unitstime=us",
        "--unitslat=us",
        "--linear",
        "--stepsec=1",
        "-o",
        svg.to_str().unwrap(),
    ]);
    let rule = t2h_rule(&text, 1e6, 1.0, 50.0, 0.0, None, None);
    // The busiest cell of column 5, and the last column's top row region.
    let col = 5;
    let (&(_, row), &n) = rule.map.range((col, 0)..(col + 1, 0)).max_by_key(|(_, n)| **n).unwrap();
    let tot: u64 = rule.map.range((col, 0)..(col + 1, 0)).map(|(_, n)| n).sum();
    let acc: u64 = rule.map.range((col, 0)..=(col, row)).map(|(_, n)| n).sum();
    let dom = dump_dom(&chrome, &format!("{}#hover={col},{row}", file_url(&svg)));
    let tip_start = dom.find("<g id=\"tip\"").expect("tooltip in DOM");
    let tip = &dom[tip_start..dom[tip_start..].find("</g>").unwrap() + tip_start];
    assert!(tip.contains("visibility=\"visible\""), "{tip}");
    assert!(tip.contains(&format!("time {col}s - {}s", col + 1)), "{tip}");
    assert!(tip.contains(&format!("count {n} (")), "{tip}");
    assert!(tip.contains(&format!("of the column's {tot})")), "{tip}");
    assert!(tip.contains(&format!("accumulated {acc} (")), "{tip}");
    assert!(tip.contains("percentile"), "{tip}");
    // The latency range of the row, in the input's unit.
    let largest =
        text.lines().skip(1).filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()).fold(0.0, f64::max);
    let st = (largest / 50.0).trunc();
    let lo = row as f64 * st;
    assert!(tip.contains(&format!("latency {}-{}us", lo as u64, (lo + st) as u64)), "{tip}");
    // The details line says the same.
    assert!(dom.contains(&format!("count {n} (")));
    // The last column answers too (trace2heatmap.pl drops it).
    let last = rule.largest_col;
    let dom = dump_dom(&chrome, &format!("{}#hover={last},0", file_url(&svg)));
    assert!(dom.contains(&format!("time {last}s - {}s", last + 1)), "last column hover");
}

// ---------------------------------------------------------------------------------------------
// perf script input

fn perf_text() -> (String, Vec<(u64, u64, u64, u64)>) {
    // (issue ns, latency ns, bytes, sector)
    let mut r = Rng::new(99);
    let mut s = String::from("# captured with perf\n");
    let mut truth = Vec::new();
    let base: u64 = 2_199_495_000_000_000;
    let mut t = base;
    for i in 0..400u64 {
        t += 1_000_000 + r.below(20_000_000);
        let lat = if i % 4 == 0 { 5_000_000 + r.below(1_000_000) } else { 100_000 + r.below(50_000) };
        let sectors = [8u64, 16, 256][(i % 3) as usize];
        let sector = 1000 + i * 512;
        let fmt_t = |ns: u64| format!("{}.{:06}", ns / 1_000_000_000, (ns % 1_000_000_000) / 1000);
        // perf prints microseconds: the truth is what the text says.
        let issue = t / 1000 * 1000;
        let done = (t + lat) / 1000 * 1000;
        s.push_str(&format!(
            "  tar 16072 [001] {}: block:block_rq_issue: 202,16 R 0 () {sector} + {sectors} [tar]\n",
            fmt_t(issue)
        ));
        s.push_str(&format!(
            "  swapper 0 [000] {}: block:block_rq_complete: 202,16 R () {sector} + {sectors} [0]\n",
            fmt_t(done)
        ));
        truth.push((issue, done - issue, sectors * 512, sector));
    }
    (s, truth)
}

/// Expected counts from ground truth and the JSON's own bounds: each value must fall in exactly
/// one row and each time in exactly one column.
fn expected_from_bounds(m: &Value, pts: &[(f64, f64)]) -> Vec<Vec<u64>> {
    let cols: Vec<(f64, f64)> = m["x"]["col_bounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b[0].as_f64().unwrap(), b[1].as_f64().unwrap()))
        .collect();
    let rows: Vec<(f64, f64)> = m["y"]["row_bounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b[0].as_f64().unwrap(), b[1].as_f64().unwrap()))
        .collect();
    let ymax = m["y"]["max"].as_f64().unwrap();
    let mut out = vec![vec![0u64; rows.len()]; cols.len()];
    for &(t, v) in pts {
        let c = cols
            .iter()
            .position(|&(a, b)| t >= a - 1e-9 && t < b - 1e-9)
            .unwrap_or_else(|| panic!("time {t} in no column"));
        let r = rows
            .iter()
            .position(|&(a, b)| v >= a && (v < b || (v == ymax && b > ymax)))
            .unwrap_or_else(|| panic!("value {v} in no row"));
        out[c][r] += 1;
    }
    out
}

fn counts(m: &Value) -> Vec<Vec<u64>> {
    m["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect())
        .collect()
}

#[test]
fn heatmap_from_perf_script_pairs_issue_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let (text, truth) = perf_text();
    let p = dir.path().join("out.blockio");
    std::fs::write(&p, &text).unwrap();
    let ps = p.to_str().unwrap();
    let base = truth[0].0;
    for (y, linear) in [("latency", true), ("latency", false), ("size", true), ("offset", true)] {
        let mut args = vec!["heatmap", "--input", "perf", "-r", ps, "--json", "--y", y];
        if linear {
            args.push("--linear");
        }
        let j = latscope_json(&args);
        let m = &j["maps"][0];
        assert_eq!(m["total"], 400, "{y}");
        let pts: Vec<(f64, f64)> = truth
            .iter()
            .map(|&(ts, lat, bytes, sector)| {
                let v = match y {
                    "latency" => lat as f64,
                    "size" => bytes as f64,
                    _ => sector as f64 * 512.0,
                };
                ((ts - base) as f64 / 1e9, v)
            })
            .collect();
        assert_eq!(counts(m), expected_from_bounds(m, &pts), "{y} linear={linear}");
    }
    // The SVG and a latency histogram from the same text.
    let svg = dir.path().join("p.svg");
    latscope_ok(&["heatmap", "--input", "perf", "-r", ps, "-o", svg.to_str().unwrap()]);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("Block I/O Latency Heat Map"));
    let j = latscope_json(&["hist", "--input", "perf", "-r", ps, "--json"]);
    assert_eq!(j["groups"][0]["stats"]["count"], 400);
    assert_eq!(j["groups"][0]["peaks"].as_array().unwrap().len(), 2, "{}", j["groups"][0]["peaks"]);
    let out = latscope_ok(&["timeline", "--input", "perf", "-r", ps, "--json"]);
    let j: Value = serde_json::from_str(&out).unwrap();
    let total: u64 = j["points"].as_array().unwrap().iter().map(|p| p["count"].as_u64().unwrap()).sum();
    assert_eq!(total, 400);
}

// ---------------------------------------------------------------------------------------------
// latscope traces with known events

const START: u64 = 1_000_000_000_000;

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    events: Vec<Event>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.lst");
    let read = latscope_event::syscall_nr("read").unwrap();
    let pread = latscope_event::syscall_nr("pread64").unwrap();
    let openat = latscope_event::syscall_nr("openat").unwrap();
    let mut r = Rng::new(7);
    let mut events = Vec::new();
    let mut t = START + 1000;
    for i in 0..20_000u64 {
        t += 200_000 + r.below(300_000);
        // 80 %: a cache hit around 15 us; 20 %: a disk read around 1 ms.
        let (nr, lat, comm, path) = match i % 10 {
            0 | 1 => (pread, 1_000_000 + r.below(200_000), "beta", "/data/db/table1"),
            2 => (openat, 15_000 + r.below(3_000), "alpha", "/etc/hosts"),
            _ => (read, 15_000 + r.below(3_000), "alpha", "/data/logs/app.log"),
        };
        events.push(Event {
            kind: EventKind::Syscall as u8,
            ts: t,
            lat,
            pid: if comm == "alpha" { 100 } else { 200 },
            tid: 1,
            nr,
            ret: if nr == openat { 3 } else { 4096 },
            fd: 3,
            fd_type: 1,
            bytes: 4096,
            off: (i * 4096) as i64,
            comm: comm.into(),
            path: path.into(),
            ..Default::default()
        });
        if i % 5 == 0 {
            let dev = if i % 10 == 0 { 254 << 20 } else { (7 << 20) | 3 };
            events.push(Event {
                kind: EventKind::Block as u8,
                ts: t + 1,
                lat: 50_000 + r.below(2_000_000),
                nr: (i % 2) as u16,
                dev,
                bytes: 4096 * (1 + r.below(4)),
                off: (r.below(1 << 20)) as i64,
                qtime: r.below(10_000),
                comm: "kworker".into(),
                fd: -1,
                ..Default::default()
            });
        }
    }
    // One process event, which no view counts.
    events.push(Event { kind: EventKind::Proc as u8, ts: START + 5, comm: "x".into(), ..Default::default() });
    write_trace(&path, START, &events);
    Fixture { _dir: dir, path, events }
}

fn sys(f: &Fixture) -> Vec<&Event> {
    f.events.iter().filter(|e| e.kind == EventKind::Syscall as u8).collect()
}

fn blk(f: &Fixture) -> Vec<&Event> {
    f.events.iter().filter(|e| e.kind == EventKind::Block as u8).collect()
}

#[test]
fn heatmap_from_trace_known_events_known_cells() {
    let f = fixture();
    let p = f.path.to_str().unwrap();
    let sys_pts: Vec<(f64, f64)> = sys(&f).iter().map(|e| ((e.ts - START) as f64 / 1e9, e.lat as f64)).collect();
    for extra in [
        vec![],
        vec!["--linear"],
        vec!["--stepsec", "0.5", "--rows", "80"],
        vec!["--linear", "--maxlat", "1.1ms", "--minlat", "10us"],
    ] {
        let mut args = vec!["heatmap", "-r", p, "--json"];
        args.extend(extra.iter().copied());
        let j = latscope_json(&args);
        let m = &j["maps"][0];
        let (ymin, ymax) = (m["y"]["min"].as_f64().unwrap(), m["y"]["max"].as_f64().unwrap());
        let pts: Vec<(f64, f64)> = sys_pts.iter().copied().filter(|&(_, v)| v >= ymin && v <= ymax).collect();
        assert_eq!(m["total"].as_u64().unwrap(), pts.len() as u64, "{extra:?}");
        assert_eq!(counts(m), expected_from_bounds(m, &pts), "{extra:?}");
        let not_shown = m["not_shown"]["below_min"].as_u64().unwrap() + m["not_shown"]["above_max"].as_u64().unwrap();
        assert_eq!(not_shown as usize + pts.len(), sys_pts.len(), "{extra:?}");
    }
    // Log rows by default for latency; a decade is a row edge.
    let j = latscope_json(&["heatmap", "-r", p, "--json"]);
    assert_eq!(j["maps"][0]["y"]["scale"], "log");
    let edges: Vec<f64> =
        j["maps"][0]["y"]["row_bounds"].as_array().unwrap().iter().map(|b| b[0].as_f64().unwrap()).collect();
    assert!(edges.contains(&100_000.0), "{edges:?}");
    // A filter: only alpha's events.
    let j = latscope_json(&["heatmap", "-r", p, "proc.name = alpha", "--json"]);
    assert_eq!(j["maps"][0]["total"].as_u64().unwrap(), sys(&f).iter().filter(|e| e.comm == "alpha").count() as u64);
}

#[test]
fn heatmap_per_disk_offset_size_and_subsecond_cells_match_the_events() {
    let f = fixture();
    let p = f.path.to_str().unwrap();
    let j = latscope_json(&["heatmap", "-r", p, "--block", "--per", "disk", "--json"]);
    let maps = j["maps"].as_array().unwrap();
    assert_eq!(maps.len(), 2);
    for m in maps {
        let name = m["group"].as_str().unwrap();
        let dev = if name == "disk vda" { 254 << 20 } else { (7 << 20) | 3 };
        assert!(name == "disk vda" || name == "disk loop3", "{name}");
        let pts: Vec<(f64, f64)> =
            blk(&f).iter().filter(|e| e.dev == dev).map(|e| ((e.ts - START) as f64 / 1e9, e.lat as f64)).collect();
        assert_eq!(counts(m), expected_from_bounds(m, &pts), "{name}");
        // Shared axes.
        assert_eq!(m["x"]["cols"], maps[0]["x"]["cols"]);
        assert_eq!(m["y"]["row_bounds"], maps[0]["y"]["row_bounds"]);
    }
    let by_offset: fn(&Event) -> f64 = |e| e.off as f64 * 512.0;
    let by_size: fn(&Event) -> f64 = |e| e.bytes as f64;
    for (y, val) in [("offset", by_offset), ("size", by_size)] {
        let j = latscope_json(&["heatmap", "-r", p, "--block", "--y", y, "--json"]);
        let m = &j["maps"][0];
        // Sizes take log rows by default (4 KiB and 64 KiB apart), offsets linear ones.
        assert_eq!(m["y"]["scale"], if y == "size" { "log" } else { "linear" });
        let pts: Vec<(f64, f64)> = blk(&f).iter().map(|e| ((e.ts - START) as f64 / 1e9, val(e))).collect();
        assert_eq!(counts(m), expected_from_bounds(m, &pts), "{y}");
    }
    // Subsecond: 50 rows of 20 ms, one column per wall-clock second.
    let j = latscope_json(&["heatmap", "-r", p, "--y", "subsecond", "--json"]);
    let m = &j["maps"][0];
    assert_eq!(m["y"]["rows"], 50);
    assert_eq!(m["y"]["row_bounds"][1][0].as_f64().unwrap(), 20_000_000.0);
    let off = 1_700_000_000_000_000_000i64 - START as i64;
    let first_sec = ((sys(&f)[0].ts as i64 + off) / 1_000_000_000) as f64;
    let pts: Vec<(f64, f64)> = sys(&f)
        .iter()
        .map(|e| {
            let w = e.ts as i64 + off;
            ((w / 1_000_000_000) as f64 - first_sec, (w % 1_000_000_000) as f64)
        })
        .collect();
    assert_eq!(counts(m), expected_from_bounds(m, &pts));
    // One SVG with two maps.
    let out = f.path.with_extension("svg");
    latscope_ok(&["heatmap", "-r", p, "--block", "--per", "disk", "-o", out.to_str().unwrap()]);
    let svg = std::fs::read_to_string(&out).unwrap();
    assert_eq!(svg.matches(r#"<g class="heatmap""#).count(), 2);
    let total: u64 = svg_cells(&svg).values().sum();
    assert_eq!(total, blk(&f).len() as u64);
}

#[test]
fn hist_percentiles_match_exact_values_and_peaks_are_found() {
    let f = fixture();
    let p = f.path.to_str().unwrap();
    let j = latscope_json(&["hist", "-r", p, "--json"]);
    let g = &j["groups"][0];
    let mut lats: Vec<u64> = sys(&f).iter().map(|e| e.lat).collect();
    lats.sort_unstable();
    let st = &g["stats"];
    assert_eq!(st["count"].as_u64().unwrap(), lats.len() as u64);
    assert_eq!(st["min_ns"].as_f64().unwrap(), lats[0] as f64);
    assert_eq!(st["max_ns"].as_f64().unwrap(), *lats.last().unwrap() as f64);
    let mean = lats.iter().sum::<u64>() as f64 / lats.len() as f64;
    assert!((st["mean_ns"].as_f64().unwrap() - mean).abs() < 1e-6 * mean);
    for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999), ("p99.99", 0.9999)] {
        let rank = ((q * lats.len() as f64).ceil() as usize).max(1);
        let exact = lats[rank - 1] as f64;
        let got = st[format!("{name}_ns").as_str()].as_f64().unwrap();
        assert!(got >= exact && got <= exact * (1.0 + 1.0 / 128.0), "{name}: {got} vs exact {exact}");
    }
    let peaks = g["peaks"].as_array().unwrap();
    assert_eq!(peaks.len(), 2, "{peaks:?}");
    // The 80 % cache-hit peak at ~16 us comes first, the 20 % disk peak at ~1.1 ms second.
    assert!((peaks[0]["share"].as_f64().unwrap() - 0.8).abs() < 0.01);
    assert!((15_000..=18_000).contains(&peaks[0]["mode_low"].as_u64().unwrap()));
    assert!((1_000_000..=1_200_000).contains(&peaks[1]["mode_low"].as_u64().unwrap()));
    // Bins and buckets both hold every event.
    let sum = |k: &str| g[k].as_array().unwrap().iter().map(|b| b[2].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("bins"), lats.len() as u64);
    assert_eq!(sum("buckets"), lats.len() as u64);
    // Text: stats, peaks pointed at.
    let t = latscope_ok(&["hist", "-r", p]);
    for s in ["20000 events", "p50 ", "p99.99 ", "◀ peak 1", "◀ peak 2", "2 peaks", "80.0% of events"] {
        assert!(t.contains(s), "missing {s:?} in:\n{t}");
    }
    // Per group.
    let j = latscope_json(&["hist", "-r", p, "--by", "syscall", "--json"]);
    let names: Vec<&str> = j["groups"].as_array().unwrap().iter().map(|g| g["group"].as_str().unwrap()).collect();
    assert_eq!(names, ["read", "pread64", "openat"]);
    assert_eq!(j["groups"][1]["stats"]["count"], 4000);
    // Linear bins over a given range, and the SVG.
    let j = latscope_json(&["hist", "-r", p, "--linear", "--min", "0", "--max", "20us", "--bins", "20", "--json"]);
    let bins = j["groups"][0]["bins"].as_array().unwrap();
    assert_eq!(bins[0][0].as_f64().unwrap(), 0.0);
    assert_eq!(bins[0][1].as_f64().unwrap(), 1000.0);
    assert_eq!(j["groups"][0]["outside_range"].as_u64().unwrap(), 4000);
    let svg = f.path.with_extension("hist.svg");
    latscope_ok(&["hist", "-r", p, "--block", "--by", "disk", "--svg", svg.to_str().unwrap()]);
    let s = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(s.matches(r#"<g class="hist""#).count(), 2);
    assert!(s.contains("peak 1:"));
    // Block queue time.
    let j = latscope_json(&["hist", "-r", p, "--block", "--field", "qtime", "--json"]);
    let qmax = blk(&f).iter().map(|e| e.qtime).max().unwrap();
    assert_eq!(j["groups"][0]["stats"]["max_ns"].as_f64().unwrap(), qmax as f64);
    // Misuse is an error, not a panic.
    let o = latscope(&["hist", "-r", p, "--field", "qtime"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn top_groups_match_the_events_and_sort_and_limit_by_any_key() {
    let f = fixture();
    let p = f.path.to_str().unwrap();
    let j = latscope_json(&["top", "-r", p, "--by", "proc", "--json"]);
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    // beta: 4000 preads of ~1.1 ms: the most total time.
    assert_eq!(rows[0]["name"], "beta");
    let all = sys(&f);
    let beta: Vec<&&Event> = all.iter().filter(|e| e.comm == "beta").collect();
    let beta_total: u64 = beta.iter().map(|e| e.lat).sum();
    assert_eq!(rows[0]["count"].as_u64().unwrap(), beta.len() as u64);
    assert_eq!(rows[0]["total_ns"].as_f64().unwrap(), beta_total as f64);
    assert_eq!(rows[0]["bytes"].as_u64().unwrap(), 4096 * beta.len() as u64);
    let max = beta.iter().map(|e| e.lat).max().unwrap();
    assert_eq!(rows[0]["max_ns"].as_u64().unwrap(), max);
    let mut l: Vec<u64> = beta.iter().map(|e| e.lat).collect();
    l.sort_unstable();
    let p99 = rows[0]["p99_ns"].as_u64().unwrap() as f64;
    let exact = l[(0.99 * l.len() as f64).ceil() as usize - 1] as f64;
    assert!(p99 >= exact && p99 <= exact * (1.0 + 1.0 / 128.0));
    // Rate over the recording.
    let secs = j["seconds"].as_f64().unwrap();
    assert!((rows[0]["rate_per_s"].as_f64().unwrap() - beta.len() as f64 / secs).abs() < 1e-6);
    // By file, sorted by count, limited.
    let j = latscope_json(&["top", "-r", p, "--by", "file", "--sort", "count", "-n", "1", "--json"]);
    assert_eq!(j["rows"].as_array().unwrap().len(), 1);
    assert_eq!(j["rows"][0]["name"], "/data/logs/app.log");
    assert_eq!(j["groups"], 3);
    // By directory, by disk (block), drill-down with a filter.
    let t = latscope_ok(&["top", "-r", p, "--by", "dir"]);
    assert!(t.contains("/data/db") && t.contains("/data/logs") && t.contains("/etc"), "{t}");
    let j = latscope_json(&["top", "-r", p, "--block", "--by", "disk", "--json"]);
    let names: Vec<&str> = j["rows"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"vda") && names.contains(&"loop3"), "{names:?}");
    let j = latscope_json(&["top", "-r", p, "proc.name = alpha", "--by", "syscall", "--json"]);
    let names: Vec<&str> = j["rows"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["read", "openat"]);
    let t = latscope_ok(&["top", "-r", p, "--by", "client", "-n", "5"]);
    assert!(t.contains("alpha[100]") && t.contains("CLIENT"), "{t}");
    let o = latscope(&["top", "-r", p, "--sort", "bogus"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn timeline_counts_by_completion_interval() {
    let f = fixture();
    let p = f.path.to_str().unwrap();
    let j = latscope_json(&["timeline", "-r", p, "--interval", "500ms", "--json"]);
    let pts = j["points"].as_array().unwrap();
    let mut expect: BTreeMap<usize, (u64, u64, u64)> = BTreeMap::new();
    let openat = latscope_event::syscall_nr("openat").unwrap();
    for e in sys(&f) {
        let k = ((e.ts + e.lat - START) / 500_000_000) as usize;
        let x = expect.entry(k).or_default();
        x.0 += 1;
        if e.nr != openat {
            x.1 += e.ret.max(0) as u64;
        }
        x.2 = x.2.max(e.lat);
    }
    assert_eq!(pts.len(), expect.keys().max().unwrap() + 1);
    for (k, (n, bytes, max)) in expect {
        assert_eq!(pts[k]["count"].as_u64().unwrap(), n, "interval {k}");
        assert_eq!(pts[k]["bytes"].as_u64().unwrap(), bytes, "interval {k}");
        assert_eq!(pts[k]["max_ns"].as_u64().unwrap(), max, "interval {k}");
        // Per second of the time the interval covers: all of it, but where the recording ends.
        let covered = pts[k]["covered_s"].as_f64().unwrap();
        assert!(covered > 0.0 && covered <= 0.5, "interval {k}: {covered}");
        assert!(k + 1 == pts.len() || covered == 0.5, "interval {k}: {covered}");
        assert!((pts[k]["ops_per_s"].as_f64().unwrap() - n as f64 / covered).abs() < 1e-9);
    }
    let svg = f.path.with_extension("tl.svg");
    latscope_ok(&["timeline", "-r", p, "--block", "-o", svg.to_str().unwrap()]);
    let s = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(s.matches(r#"class="panel""#).count(), 3);
    assert!(s.contains(r#"data-series="p99""#));
    let t = latscope_ok(&["timeline", "-r", p]);
    assert!(t.lines().nth(1).unwrap().contains("OPS/s"), "{t}");
}

#[test]
fn every_svg_parses_in_chromium() {
    let Some(chrome) = chromium("every_svg_parses_in_chromium") else { return };
    let f = fixture();
    let p = f.path.to_str().unwrap();
    let dir = f.path.parent().unwrap();
    let out = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let runs: Vec<Vec<String>> = vec![
        vec!["heatmap".into(), "-r".into(), p.into(), "--grid".into(), "-o".into(), out("a.svg")],
        vec!["heatmap".into(), "-r".into(), p.into(), "--linear".into(), "-o".into(), out("b.svg")],
        vec![
            "heatmap".into(),
            "-r".into(),
            p.into(),
            "--per".into(),
            "proc".into(),
            "--title".into(),
            "<T&'\"x>".into(),
            "-o".into(),
            out("c.svg"),
        ],
        vec!["heatmap".into(), "-r".into(), p.into(), "--y".into(), "subsecond".into(), "-o".into(), out("d.svg")],
        vec!["hist".into(), "-r".into(), p.into(), "--by".into(), "file".into(), "--svg".into(), out("e.svg")],
        vec!["timeline".into(), "-r".into(), p.into(), "-o".into(), out("f.svg")],
        vec![
            "timeline".into(),
            "-r".into(),
            p.into(),
            "--block".into(),
            "--title".into(),
            "a<b".into(),
            "-o".into(),
            out("g.svg"),
        ],
    ];
    for (k, args) in runs.iter().enumerate() {
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        latscope_ok(&a);
        let file = args.last().unwrap();
        let dom = dump_dom(&chrome, &file_url(Path::new(file)));
        assert!(dom.contains("<svg"), "run {k}: no svg in DOM");
        assert!(
            !dom.contains("parsererror") && !dom.contains("This page contains the following errors"),
            "run {k} ({args:?}): XML error:\n{}",
            &dom[..dom.len().min(600)]
        );
    }
}

#[test]
fn every_view_help_has_examples() {
    for c in ["heatmap", "hist", "top", "timeline"] {
        let h = latscope_ok(&[c, "--help"]);
        assert!(h.contains("Examples:"), "{c} --help has no examples");
        assert!(h.contains(&format!("latscope {c}")), "{c}");
    }
}

#[test]
fn demo_views_script_writes_everything() {
    let f = fixture();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../demo/views.sh");
    let out = f.path.parent().unwrap().join("views");
    let o = std::process::Command::new("bash")
        .arg(&script)
        .arg(&f.path)
        .arg(&out)
        .env("LATSCOPE", common::bin())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains(out.to_str().unwrap()), "does not say where: {said}");
    for name in
        ["syscall-latency.svg", "block-latency-per-disk.svg", "hist-syscalls.txt", "timeline-block.svg", "top-proc.txt"]
    {
        let p = out.join(name);
        assert!(p.exists() && std::fs::metadata(&p).unwrap().len() > 0, "{name} missing");
    }
}

#[test]
fn live_top_shows_a_table() {
    if !common::require_bpf("live_top_shows_a_table") {
        return;
    }
    let mut load = std::process::Command::new("sh")
        .arg("-c")
        .arg("for i in $(seq 1 3000); do cat /etc/hostname > /dev/null; done")
        .spawn()
        .unwrap();
    let o = latscope(&["top", "--by", "proc", "--count", "2", "--interval", "700ms", "--json", "--syscalls", "io"]);
    let _ = load.kill();
    let _ = load.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<Value> = common::json_lines(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["by"], "proc");
    let events: u64 = lines.iter().map(|l| l["events"].as_u64().unwrap()).sum();
    assert!(events > 0, "{lines:?}");
}

// ---------------------------------------------------------------------------------------------
// Zone maps: views that skip decoding `ts` (and `kind`) for blocks inside one column give the same
// cells, counts and rows as decoding everything.

/// Events in phases: syscalls only (blocks inside one 1 s column, and blocks straddling column
/// boundaries), syscalls mixed with block requests, block requests only, a process event; with
/// latencies from 1 us to 300 ms so that end times cross boundaries too.
fn zone_events() -> Vec<Event> {
    let read = latscope_event::syscall_nr("read").unwrap();
    let mut r = Rng::new(99);
    let mut v = Vec::new();
    let mut t = START + 100;
    for i in 0..60_000u64 {
        let phase = i / 15_000;
        t += 1_000 + r.below(if phase == 0 { 60_000 } else { 200_000 });
        let lat = match r.below(10) {
            0 => 1_000_000 + r.below(300_000_000),
            1..=3 => 100_000 + r.below(1_000_000),
            _ => 1_000 + r.below(20_000),
        };
        let block = match phase {
            0 => false,
            1 => i % 7 == 0,
            2 => true,
            _ => i % 2 == 0,
        };
        v.push(Event {
            kind: if block { EventKind::Block as u8 } else { EventKind::Syscall as u8 },
            ts: t,
            lat,
            pid: 100,
            nr: if block { (i % 2) as u16 } else { read },
            ret: 4096,
            bytes: 4096,
            dev: if block { 254 << 20 } else { 0 },
            fd: if block { -1 } else { 3 },
            comm: "zone".into(),
            ..Default::default()
        });
        if i == 40_000 {
            v.push(Event { kind: EventKind::Proc as u8, ts: t, comm: "zone".into(), ..Default::default() });
        }
    }
    v
}

#[test]
fn zone_maps_give_the_same_views_as_decoding_everything() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("zone"), dir.path().join("plain"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let events = zone_events();
    let (za, zb) = (a.join("t.lst"), b.join("t.lst"));
    write_trace_blocks(&za, START, &events, 1_000, true);
    write_trace_blocks(&zb, START, &events, 1_000, false);
    let run = |file: &Path, args: &[&str]| {
        let f = file.to_str().unwrap();
        let mut v: Vec<&str> = vec![args[0], "-r", f];
        v.extend(&args[1..]);
        latscope_ok(&v).replace(file.parent().unwrap().to_str().unwrap(), "DIR")
    };
    let cases: Vec<Vec<&str>> = vec![
        vec!["heatmap", "--json"],
        vec!["heatmap", "--json", "--stepsec", "0.01"],
        vec!["heatmap", "--json", "--stepsec", "0.25", "--minlat", "10us", "--maxlat", "2ms", "--maxcol", "20"],
        vec!["heatmap", "--json", "--block"],
        vec!["heatmap", "--json", "--y", "size"],
        vec!["hist", "--json"],
        vec!["hist", "--json", "--block"],
        vec!["hist", "--json", "--full"],
        vec!["spectrogram", "--plain", "--no-pace", "--width", "120"],
        vec!["spectrogram", "--plain", "--no-pace", "--width", "120", "100"],
        vec!["spectrogram", "--plain", "--no-pace", "--width", "120", "--block"],
        vec!["timeline", "--json"],
        vec!["timeline", "--json", "-i", "10ms"],
        vec!["timeline", "--json", "--block"],
    ];
    for c in &cases {
        let (x, y) = (run(&za, c), run(&zb, c));
        assert!(!x.is_empty(), "{c:?}");
        assert_eq!(x, y, "{c:?}: with zone maps vs without");
    }
    // A filter needs every event's fields: no shortcut, same cells as the shortcut without one.
    let all = "evt.latency >= 0";
    let maps = |s: &str| serde_json::from_str::<Value>(s).unwrap()["maps"].clone();
    assert_eq!(maps(&run(&za, &["heatmap", "--json"])), maps(&run(&za, &["heatmap", "--json", all])));
    let groups = |s: &str| serde_json::from_str::<Value>(s).unwrap()["groups"].clone();
    assert_eq!(groups(&run(&za, &["hist", "--json"])), groups(&run(&za, &["hist", "--json", all])));
    let points = |s: &str| serde_json::from_str::<Value>(s).unwrap()["points"].clone();
    for c in [["timeline", "--json", "-i", "1s"], ["timeline", "--json", "-i", "10ms"]] {
        let mut f = c.to_vec();
        f.push(all);
        assert_eq!(points(&run(&za, &c)), points(&run(&za, &f)), "{c:?}");
    }
    let rows = |s: &str| s.lines().filter(|l| !l.contains("filter")).map(str::to_string).collect::<Vec<_>>();
    let sp = ["spectrogram", "--plain", "--no-pace", "--width", "120"];
    let mut spf = sp.to_vec();
    spf.push(all);
    assert_eq!(rows(&run(&za, &sp)), rows(&run(&za, &spf)));
}

/// Output cut short by the reader (`| head`) ends the command quietly, as with other Unix tools:
/// no panic message, killed by SIGPIPE like `cat` would be.
#[test]
fn closed_output_pipe_ends_quietly() {
    use std::io::Read;
    let f = fixture();
    for args in [vec!["events", "-r"], vec!["info", "-v", "-r"], vec!["top", "--by", "file", "-r"]] {
        let mut child = std::process::Command::new(bin())
            .args(&args)
            .arg(&f.path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 16];
        child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
        drop(child.stdout.take()); // the reader goes away
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!out.status.success() || err.is_empty(), "{args:?}: {err}");
    }
}

#[test]
fn min_above_max_is_an_error_with_units_in_every_view() {
    let f = fixture();
    let p = f.path.to_str().unwrap();
    let dir = f.path.parent().unwrap();
    let text = dir.join("two.txt");
    std::fs::write(&text, "1 5\n2 7\n").unwrap();
    let svg = dir.join("never.svg");
    let s = svg.to_str().unwrap();
    let t = text.to_str().unwrap();
    let cases: [(&[&str], &[&str]); 7] = [
        (&["heatmap", "-r", p, "--minlat", "2ms", "--maxlat", "1ms", "-o", s], &["--minlat (2ms)", "--maxlat (1ms)"]),
        (&["heatmap", "-r", p, "--linear", "--minlat", "2ms", "--maxlat", "1ms", "-o", s], &["--minlat (2ms)"]),
        (&["heatmap", "-r", p, "--y", "size", "--minlat", "8KiB", "--maxlat", "4KiB", "-o", s], &["(8KiB)", "(4KiB)"]),
        (
            &["heatmap", "--input", "text", "-r", t, "--unitslat", "us", "--minlat", "9ms", "--maxlat", "3", "-o", s],
            &["(9000us)", "(3us)"],
        ),
        (&["hist", "-r", p, "--linear", "--min", "2ms", "--max", "1ms"], &["--min (2ms) is above --max (1ms)"]),
        (&["hist", "-r", p, "--field", "size", "--linear", "--min", "8KiB", "--max", "1KiB"], &["(8KiB)", "(1KiB)"]),
        (&["spectrogram", "-r", p, "--no-pace", "--min", "2ms", "--max", "1ms"], &["--min (2ms) is above --max (1ms)"]),
    ];
    for (args, wants) in cases {
        let o = latscope(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        for w in wants {
            assert!(err.contains(w), "{args:?}: {err:?} lacks {w:?}");
        }
        assert!(o.stdout.is_empty() && !svg.exists(), "{args:?} wrote something");
    }
    let o = latscope(&["spectrogram", "-r", p, "--min", "1ms", "--max", "1ms"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--min (1ms) must be below --max (1ms)"));
}

#[test]
fn info_shows_the_start_and_warns_on_a_file_cut_short() {
    let f = fixture();
    let p = f.path.to_str().unwrap();
    let out = latscope_ok(&["info", "-r", p]);
    // The fixture's clock: start 1000 s after boot, realtime offset 1.7e18 - start.
    assert!(out.contains("started:     2023-11-14 22:13:20.000 UTC"), "{out}");
    assert!(out.contains("ended:       2023-11-14 22:13:"), "{out}");
    // Aligned: the counts of the kinds end in one column.
    let kinds: Vec<&str> =
        out.lines().skip_while(|l| *l != "by kind:").skip(1).take_while(|l| l.starts_with("  ")).collect();
    assert!(
        kinds.len() >= 2 && kinds.iter().all(|l| l.find(char::is_alphabetic) == kinds[0].find(char::is_alphabetic)),
        "{kinds:?}"
    );
    // A copy cut short: the same warning on stderr as every reader gives.
    let data = std::fs::read(&f.path).unwrap();
    let cut = f.path.with_extension("cut.lst");
    std::fs::write(&cut, &data[..data.len() * 2 / 3]).unwrap();
    let c = cut.to_str().unwrap();
    let o = latscope(&["info", "-r", c]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("latscope: warning: ") && err.contains("not closed cleanly"), "{err}");
    let top = latscope(&["top", "-r", c]);
    let top_err = String::from_utf8_lossy(&top.stderr);
    let first_warning = |s: &str| s.lines().find(|l| l.contains("warning")).map(str::to_string);
    assert_eq!(first_warning(&err), first_warning(&top_err), "info warns like top");
    assert!(String::from_utf8_lossy(&o.stdout).contains("not closed cleanly (no summary)"));
}

#[test]
fn top_shows_the_percentiles_asked_for_in_aligned_columns() {
    let f = fixture();
    let p = f.path.to_str().unwrap();
    let t = latscope_ok(&["top", "-r", p, "--by", "syscall", "--percentiles", "50,90,99,99.9", "--sort", "p99.9"]);
    let lines: Vec<&str> = t.lines().skip(1).collect();
    assert!(lines[0].contains("P50") && lines[0].contains("P90") && lines[0].contains("P99.9"), "{t}");
    // Every right-aligned column ends where its heading ends.
    for h in ["COUNT", "P90", "P99.9", "MAX", "ERRORS"] {
        let end = lines[0].find(h).unwrap() + h.len();
        for l in &lines[1..4] {
            assert!(
                l.len() >= end && l.as_bytes()[end - 1] != b' ' && l[end..].starts_with(' ') || l.len() == end,
                "{h}: {t}"
            );
        }
    }
    let j = latscope_json(&["top", "-r", p, "--by", "syscall", "--percentiles", "50,90,99,99.9", "--json"]);
    let mut lats: Vec<u64> =
        sys(&f).iter().filter(|e| e.nr == latscope_event::syscall_nr("read").unwrap()).map(|e| e.lat).collect();
    lats.sort_unstable();
    let read = j["rows"].as_array().unwrap().iter().find(|r| r["name"] == "read").unwrap();
    let exact = lats[((0.999 * lats.len() as f64).ceil() as usize).max(1) - 1] as f64;
    let got = read["p99.9_ns"].as_f64().unwrap();
    assert!(got >= exact && got <= exact * (1.0 + 1.0 / 128.0), "{got} vs {exact}");
    let o = latscope(&["top", "-r", p, "--percentiles", "50,abc"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("'abc' is not a percentile"));
}

/// `timeline --threads` refuses what it cannot draw, saying what to do: a window after the
/// recording, `--waits` (it draws every call), an output it does not write.
#[test]
fn timeline_threads_refuses_what_it_cannot_draw() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("busy.lst");
    latscope_trace::synth::BusyServer { events: 2_000, block_every: 20, layout: latscope_trace::synth::Layout::ByKind }
        .write(&trace)
        .unwrap();
    let t = trace.to_str().unwrap();
    let png = dir.path().join("x.png");
    for (args, want) in [
        (vec!["--from", "100s", "--to", "200s"], "no call in the window"),
        (vec!["--waits"], "--threads draws every call"),
        (vec!["-o", png.to_str().unwrap()], "SVG (-o FILE.svg)"),
    ] {
        let mut a = vec!["timeline", "-r", t, "--threads"];
        a.extend(args);
        let o = latscope(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{a:?}: {err}");
    }
    assert!(!png.exists());
    // A window given only its end, before the first call: from the recording's start.
    let j = latscope_json(&["timeline", "-r", t, "--threads", "--json", "--to", "1ns"]);
    assert_eq!(j["from_ns"], j["origin_ns"], "{j}");
}

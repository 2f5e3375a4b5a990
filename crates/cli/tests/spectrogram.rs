//! Ground truth for `latscope spectrogram` and `latscope load`: rows read back from the plain
//! output (trace files, no privilege needed; live, root and BPF) and from the terminal UI through
//! tmux (colours, a resize, a drill-down). The workloads sleep: the views count their sleeps, idle
//! waits, with `--waits`.

mod common;

use common::{bin, latscope, latscope_ok, require_bpf, require_tool};
use latscope_event::{syscall_nr, Event, TraceHeader, TRACE_FORMAT_VERSION};
use latscope_trace::{synth, Summary};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;
/// Trace start in the synthetic traces.
const T0: u64 = 1_000 * MS;
/// Time column width of plain rows.
const GUTTER: usize = 9;

/// A trace with 500 ms rows 0, 1, 3 busy (row 2 empty, a gap sysdig would collapse):
/// per row 1000 calls of ~110 us and 20 of ~11 ms by "a", 5 of ~1.1 us by "b", one block write
/// of ~1.1 ms; then an idle stretch and one last call in row 7.
fn synthetic_trace(path: &Path) {
    let header = TraceHeader { format_version: TRACE_FORMAT_VERSION, start_ns: T0, ..Default::default() };
    let sleep_nr = syscall_nr("nanosleep").unwrap();
    let read_nr = syscall_nr("read").unwrap();
    let ev = |kind: u8, end: u64, lat: u64, nr: u16, comm: &str| Event {
        kind,
        ts: end - lat,
        lat,
        pid: 10,
        tid: 10,
        nr,
        fd: -1,
        comm: comm.into(),
        ..Default::default()
    };
    let mut events = Vec::new();
    for row in [0u64, 1, 3] {
        let base = T0 + row * 500 * MS;
        for i in 0..1000u64 {
            events.push(ev(0, base + MS + i * 400 * US, 110 * US + i % 9, sleep_nr, "a"));
        }
        for i in 0..20u64 {
            events.push(ev(0, base + 20 * MS + i * 20 * MS, 11 * MS + i, sleep_nr, "a"));
        }
        for i in 0..5u64 {
            events.push(ev(0, base + 30 * MS + i * MS, 1_100 + i, read_nr, "b"));
        }
        events.push(ev(1, base + 250 * MS, 1_100 * US, 1, "a"));
    }
    events.push(ev(0, T0 + 7 * 500 * MS + 100 * MS, 110 * US, sleep_nr, "a"));
    synth::write_events(path, &header, &events, Summary::default()).unwrap();
}

/// Plain rows: (time label, cells).
fn rows(out: &str, cols: usize) -> Vec<(String, Vec<char>)> {
    out.lines()
        .filter(|l| !l.starts_with('#') && !l.trim_start().starts_with("time"))
        .map(|l| {
            let cells: Vec<char> = l.chars().skip(GUTTER).take(cols).collect();
            (l.chars().take(GUTTER).collect::<String>().trim().to_string(), cells)
        })
        .collect()
}

/// Columns of a row that are not blank.
fn marked(cells: &[char]) -> Vec<(usize, char)> {
    cells.iter().enumerate().filter(|(_, c)| **c != ' ').map(|(i, c)| (i, *c)).collect()
}

#[test]
fn file_rows_land_in_the_right_columns_with_gaps_kept() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.lst");
    synthetic_trace(&f);
    let fs = f.to_str().unwrap();
    // 100 columns for 1 ns..10 s: 10 per decade, 100 us at column 50, 10 ms at 70.
    let out = latscope_ok(&["spectrogram", "--waits", "-r", fs, "--plain", "--width", "109", "--colors", "none"]);
    assert!(out.contains("100 columns (10.0 per decade)"), "{out}");
    assert!(out.lines().any(|l| l.contains("|100us") && l.contains("|10ms")), "{out}");
    let r = rows(&out, 100);
    assert_eq!(r.len(), 8, "rows 0..7, idle ones included:\n{out}");
    let times: Vec<&str> = r.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(times, ["0.0s", "0.5s", "1.0s", "1.5s", "2.0s", "2.5s", "3.0s", "3.5s"]);
    for i in [0, 1, 3] {
        // 1000 calls in one cell: '#' (1000-9999, red); 20: ':' (10-99, green); 5: '.'.
        assert_eq!(marked(&r[i].1), vec![(30, '.'), (50, '#'), (70, ':')], "row {i}:\n{out}");
    }
    for i in [2, 4, 5, 6] {
        assert!(marked(&r[i].1).is_empty(), "row {i} should be empty:\n{out}");
    }
    assert_eq!(marked(&r[7].1), vec![(50, '.')]);
    assert!(out.contains("# 3076 events (idle waits included) in 8 rows"), "{out}");

    // Block requests instead of syscalls.
    let out = latscope_ok(&["spectrogram", "-r", fs, "--block", "--plain", "--width", "109", "--colors", "none"]);
    let r = rows(&out, 100);
    assert_eq!(marked(&r[0].1), vec![(60, '.')], "{out}");

    // A filter, a zoomed axis (10 us .. 100 ms over 40 columns: 10 per decade from 10 us).
    let out = latscope_ok(&[
        "spectrogram",
        "--waits",
        "-r",
        fs,
        "--plain",
        "--width",
        "49",
        "--colors",
        "none",
        "--min",
        "10us",
        "--max",
        "100ms",
        "proc.name=a",
    ]);
    let r = rows(&out, 40);
    assert_eq!(marked(&r[0].1), vec![(10, '#'), (30, ':')], "{out}");
    // The filter of the seed: evt.latency > 1ms keeps only the 11 ms calls; '100' is the interval.
    let out = latscope_ok(&[
        "spectrogram",
        "--waits",
        "-r",
        fs,
        "100",
        "evt.latency > 1000000",
        "--plain",
        "--width",
        "109",
        "--colors",
        "none",
    ]);
    let r = rows(&out, 100);
    // 100 ms rows up to the last matching call (1.9 s): 20; the calls end 20..400 ms into each
    // busy 500 ms, so 5 rows of each have one cell, at 10 ms.
    assert_eq!(r.len(), 20, "{out}");
    assert!(r.iter().all(|(_, c)| marked(c).iter().all(|&(i, _)| i == 70)), "{out}");
    assert_eq!(r.iter().filter(|(_, c)| !marked(c).is_empty()).count(), 15, "{out}");

    // Colour output keeps the cells' positions; SGR 48;5;N backgrounds from the documented scale.
    let out = latscope_ok(&["spectrogram", "--waits", "-r", fs, "--plain", "--width", "109", "--colors", "256"]);
    let line = out.lines().find(|l| l.trim_start().starts_with("0.0s")).unwrap();
    let bg = sgr_backgrounds(line);
    assert_eq!(bg[GUTTER + 50], Some(202), "{line:?}"); // 1000-2999: red-orange
    assert_eq!(bg[GUTTER + 70], Some(46), "{line:?}"); // 16-31: green
    assert_eq!(bg[GUTTER + 60], Some(16), "{line:?}"); // empty: black

    // Split by process: one line per group present in the row.
    let out = latscope_ok(&[
        "spectrogram",
        "--waits",
        "-r",
        fs,
        "--by",
        "proc",
        "--plain",
        "--width",
        "122",
        "--colors",
        "none",
    ]);
    let first: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("0.0s")).collect();
    assert_eq!(first.len(), 2, "{out}");
    assert!(first[0].contains(" a ") && first[1].contains(" b "), "{out}");

    // SVG snapshot.
    let svg = dir.path().join("s.svg");
    latscope_ok(&["spectrogram", "--waits", "-r", fs, "--no-pace", "--plain", "--svg", svg.to_str().unwrap()]);
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.contains("1000 events") && s.contains(">10ms</text>"), "{s}");
}

#[test]
fn file_drill_down_lists_the_events_of_a_rectangle() {
    // The drill-down of a trace file re-reads it: exercised through the TUI test below when tmux
    // and root are there; here through the errors users meet.
    let o = latscope(&["spectrogram", "-r", "/nonexistent/t.lst"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read /nonexistent/t.lst"));
    let o = latscope(&["spectrogram", "-r", "/dev/null", "proc.name ="]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid filter"));
    let o = latscope(&["spectrogram", "--min", "1s", "--max", "1ms", "-r", "/dev/null"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--min"));
    let help = latscope_ok(&["spectrogram", "--help"]);
    assert!(help.contains("Examples:") && help.contains("--by"));
    let help = latscope_ok(&["load", "--help"]);
    assert!(help.contains("Examples") && help.contains("--direct"));
}

/// Background palette index of every character cell of a line with SGR sequences.
fn sgr_backgrounds(line: &str) -> Vec<Option<u8>> {
    let mut out = Vec::new();
    let mut bg: Option<u8> = None;
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == 0x1b && b.get(i + 1) == Some(&b'[') {
            let end = (i + 2..b.len()).find(|&k| b[k].is_ascii_alphabetic()).unwrap_or(b.len() - 1);
            if b[end] == b'm' {
                let params: Vec<u32> = line[i + 2..end].split(';').map(|p| p.parse().unwrap_or(0)).collect();
                let mut k = 0;
                while k < params.len() {
                    match params[k] {
                        0 | 49 => bg = None,
                        48 if params.get(k + 1) == Some(&5) => {
                            bg = params.get(k + 2).map(|&v| v as u8);
                            k += 2;
                        }
                        38 if params.get(k + 1) == Some(&5) => k += 2,
                        _ => {}
                    }
                    k += 1;
                }
            }
            i = end + 1;
            continue;
        }
        let ch_len = line[i..].chars().next().map_or(1, |c| c.len_utf8());
        out.push(bg);
        i += ch_len;
    }
    out
}

/// A live spectrogram printing plain rows; returns once it has attached its probes (its header
/// line is printed then).
struct Live {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    header: String,
}

impl Live {
    fn start(args: &[&str]) -> Live {
        let mut child = Command::new(bin())
            .args(["spectrogram", "--waits"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("latscope runs");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let header = rx.recv_timeout(Duration::from_secs(60)).expect("the spectrogram starts within a minute");
        Live { child, lines: rx, header }
    }
    /// Everything printed, once it exits.
    fn finish(mut self) -> String {
        let st = self.child.wait().unwrap();
        let mut out = self.header.clone();
        out.push('\n');
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            out.push_str(&l);
            out.push('\n');
        }
        assert!(st.success(), "{out}");
        out
    }
}

fn load(args: &[&str]) -> Child {
    Command::new(bin()).arg("load").args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("load runs")
}

fn class(c: char) -> u8 {
    match c {
        ' ' => 0,
        '.' | ':' => 1,
        'o' => 2,
        _ => 3,
    }
}

#[test]
fn live_kernel_histograms_match_known_sleeps() {
    if !require_bpf("live_kernel_histograms_match_known_sleeps") {
        return;
    }
    let spec = Live::start(&[
        "500",
        "proc.name=latscope-load and evt.type=nanosleep",
        "--plain",
        "--width",
        "109",
        "--colors",
        "none",
        "-d",
        "4.2s",
    ]);
    sleep(Duration::from_millis(600));
    // 1500/s of 100 us: 750 per row (yellow: at least 100 in a cell unless spread over more
    // than 7 columns, never 1000); 40/s of 10 ms: 20 per row (green).
    let a = load(&["--op", "nanosleep", "--sleep", "100us", "--rate", "1500", "-d", "3s"]);
    let b = load(&["--op", "nanosleep", "--sleep", "10ms", "--rate", "40", "-d", "3s"]);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success() && b.status.success());
    let out = spec.finish();
    assert!(out.contains("source: live: in-kernel aggregation"), "{out}");
    let r = rows(&out, 100);
    assert!(r.len() >= 8, "{out}");
    // Rows fully inside the load (1 s .. 3 s after the start of the view).
    let full: Vec<&Vec<char>> = r.iter().skip(3).take(3).map(|(_, c)| c).collect();
    for cells in &full {
        let m = marked(cells);
        // Nothing sleeps less than asked: no cell left of 100 us.
        assert!(m.iter().all(|&(i, _)| i >= 50), "{out}");
        // The 100 us calls: yellow (100-999 per cell) in 100-200 us, never red (750 in all).
        let top = (50..=52).map(|i| class(cells[i])).max().unwrap();
        assert_eq!(top, 2, "{out}");
        // The 10 ms calls: green at 10 ms (10.0-12.6 ms), none in the column before.
        assert!(matches!(cells[70], ':' | '.'), "{out}");
        assert!(cells[69] == ' ' || cells[69] == '.', "{out}");
    }
}

#[test]
fn live_filter_with_user_space_part_streams_events() {
    if !require_bpf("live_filter_with_user_space_part_streams_events") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("f");
    let filter =
        format!("proc.name=latscope-load and evt.is_io_write=true and fd.name contains {}", dir.path().display());
    let spec = Live::start(&["500", &filter, "--plain", "--width", "109", "--colors", "none", "-d", "3.5s"]);
    sleep(Duration::from_millis(300));
    let w = load(&["-f", target.to_str().unwrap(), "--size", "4KiB", "--rate", "200", "-d", "2s"])
        .wait_with_output()
        .unwrap();
    assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
    // Writes elsewhere by the same program do not count.
    let other = tempfile::tempdir().unwrap();
    load(&["-f", other.path().join("g").to_str().unwrap(), "--rate", "200", "-d", "0.5s"]).wait().unwrap();
    let out = spec.finish();
    assert!(out.contains("source: live: event stream"), "{out}");
    let total: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("# ").and_then(|l| l.split_once(" events")).and_then(|(n, _)| n.parse().ok()))
        .unwrap_or_else(|| panic!("no summary line:\n{out}"));
    assert!((380..=402).contains(&total), "400 writes expected, saw {total}:\n{out}");
}

struct Tmux(String);

impl Tmux {
    fn start(name: &str, w: u16, h: u16, cmd: &str) -> Tmux {
        let _ = Command::new("tmux").args(["kill-session", "-t", name]).output();
        let st = Command::new("tmux")
            .args(["new-session", "-d", "-s", name, "-x", &w.to_string(), "-y", &h.to_string(), cmd])
            .status()
            .unwrap();
        assert!(st.success());
        let _ = Command::new("tmux").args(["set-option", "-t", name, "window-size", "manual"]).output();
        Tmux(name.to_string())
    }
    fn capture(&self) -> Vec<String> {
        let o = Command::new("tmux").args(["capture-pane", "-e", "-p", "-t", &self.0]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect()
    }
    fn text(&self) -> Vec<String> {
        let o = Command::new("tmux").args(["capture-pane", "-p", "-t", &self.0]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect()
    }
    /// The screen's text once a line contains `what`, or after `secs` seconds (the caller asserts).
    fn wait_for(&self, what: &str, secs: u64) -> Vec<String> {
        let until = std::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let text = self.text();
            if text.iter().any(|l| l.contains(what)) || std::time::Instant::now() > until {
                return text;
            }
            sleep(Duration::from_millis(100));
        }
    }
    fn keys(&self, keys: &[&str]) {
        let st = Command::new("tmux").args(["send-keys", "-t", &self.0]).args(keys).status().unwrap();
        assert!(st.success());
        sleep(Duration::from_millis(300));
    }
    fn resize(&self, w: u16, h: u16) {
        let st = Command::new("tmux")
            .args(["resize-window", "-t", &self.0, "-x", &w.to_string(), "-y", &h.to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.0]).output();
    }
}

/// In a frozen view `width` columns wide: selects the 10 ms column over the three rows above the
/// newest and lists their events. Returns how many listed lines are nanosleeps of `comm`, and the
/// screen (which must show the listing).
fn list_10ms_events(t: &Tmux, width: usize, comm: &str) -> (usize, String) {
    let start_col = (width - GUTTER) / 2; // the cursor starts mid-axis on the newest row
    let target = screen_col(1e7, width) - GUTTER;
    let moves: Vec<&str> = vec!["Right"; target - start_col];
    t.keys(&["Up"]);
    t.keys(&moves);
    t.keys(&["v", "Up", "Up", "Enter"]);
    let text = t.text();
    let listing = text.join("\n");
    assert!(listing.contains("events ending"), "{listing}");
    (text.iter().filter(|l| l.contains(comm) && l.contains("nanosleep")).count(), listing)
}

/// Green, yellow or red class (1, 2, 3) of a palette index of the scale; 0 for black.
fn heat(idx: Option<u8>) -> u8 {
    match idx {
        Some(22 | 28 | 34 | 40 | 46 | 82 | 118) => 1,
        Some(226 | 220 | 214) => 2,
        Some(202 | 196 | 197 | 199) => 3,
        _ => 0,
    }
}

/// Screen column of the latency `v` on a terminal `w` wide (1 ns .. 10 s over w - 9 columns).
fn screen_col(v: f64, w: usize) -> usize {
    let cols = (w - GUTTER) as f64;
    GUTTER + ((v.log10() * cols / 10.0) + 1e-9).floor() as usize
}

/// Latest rows (bottom-most lines with a time label) with their background classes.
fn latest_rows(screen: &[String], n: usize) -> Vec<Vec<u8>> {
    let rows: Vec<Vec<u8>> = screen
        .iter()
        .filter(|l| {
            let plain: String = strip(l);
            plain.len() > 8
                && plain[..8].trim_start().ends_with('s')
                && plain[..8].trim().parse::<f64>().is_err()
                && plain[..8].trim().trim_end_matches('s').parse::<f64>().is_ok()
        })
        .map(|l| {
            let mut v: Vec<u8> = sgr_backgrounds(l).into_iter().map(heat).collect();
            v.resize(v.len().max(200), 0);
            v
        })
        .collect();
    rows.into_iter().rev().skip(1).take(n).collect()
}

fn strip(l: &str) -> String {
    let mut s = String::new();
    let mut esc = false;
    for c in l.chars() {
        if c == '\x1b' {
            esc = true;
        } else if esc {
            if c.is_ascii_alphabetic() {
                esc = false;
            }
        } else {
            s.push(c);
        }
    }
    s
}

#[test]
fn tui_colours_follow_a_resize_and_drill_down_lists_events() {
    if !require_bpf("tui_colours_follow_a_resize_and_drill_down_lists_events")
        || !require_tool("tui_colours_follow_a_resize_and_drill_down_lists_events", "tmux")
    {
        return;
    }
    let cmd = format!(
        "{} spectrogram --waits 250 --stream --colors 256 'proc.name=latscope-load and evt.type=nanosleep'; sleep 60",
        bin().display()
    );
    let t = Tmux::start("latscope-spectrogram-test", 120, 30, &cmd);
    // Wait for the probes to attach (the status bar shows then; its title is shortened to fit,
    // the interval is always there).
    let text = t.wait_for("250ms/row", 60);
    assert!(text.iter().any(|l| l.contains("250ms/row")), "the view did not start:\n{text:#?}");
    sleep(Duration::from_millis(300));
    let a = load(&["--op", "nanosleep", "--sleep", "100us", "--rate", "1500", "-d", "5s"]);
    let b = load(&["--op", "nanosleep", "--sleep", "10ms", "--rate", "40", "-d", "5s"]);
    sleep(Duration::from_millis(2000));
    let scr = t.capture();
    let text = t.text();
    let axis = text.iter().find(|l| l.trim_start().starts_with("latency")).unwrap_or_else(|| panic!("{text:#?}"));
    let c10ms = screen_col(1e7, 120);
    assert_eq!(&axis[c10ms..c10ms + 5], "|10ms", "{axis}");
    for r in latest_rows(&scr, 3) {
        // 375 calls of ~100 us per row: yellow; 10 calls of 10 ms: green; nothing faster.
        assert!((screen_col(1e5, 120)..=screen_col(2e5, 120)).any(|x| r[x] == 2), "{r:?}\n{text:#?}");
        assert_eq!(r[c10ms], 1, "{r:?}\n{text:#?}");
        assert!((GUTTER..screen_col(1e5, 120)).all(|x| r[x] == 0), "{r:?}");
    }

    // Wider: the axis and the cells move to the new columns.
    t.resize(160, 30);
    sleep(Duration::from_millis(1200));
    let scr = t.capture();
    let text = t.text();
    let axis = text.iter().find(|l| l.trim_start().starts_with("latency")).unwrap_or_else(|| panic!("{text:#?}"));
    let c10ms = screen_col(1e7, 160);
    assert_eq!(&axis[c10ms..c10ms + 5], "|10ms", "{axis}");
    assert!(axis.trim_end().len() > 140, "{axis}");
    let mut r = latest_rows(&scr, 1).remove(0);
    // tmux leaves out trailing cells; they are black.
    r.resize(160, 0);
    assert_eq!(r[c10ms], 1, "{r:?}\n{text:#?}");

    // Drill-down: freeze, select the 10 ms column over 3 rows, list its events.
    t.keys(&["Space"]);
    let (n, listing) = list_10ms_events(&t, 160, "latscope-load");
    assert!(n >= 20, "3 rows of 10 ms calls at 40/s should list ~30 events:\n{listing}");
    t.keys(&["Escape", "q"]);
    let _ = a.wait_with_output();
    let _ = b.wait_with_output();
}

#[test]
fn tui_exits_when_the_terminal_goes_away() {
    if !require_tool("tui_exits_when_the_terminal_goes_away", "tmux") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.lst");
    synthetic_trace(&f);
    let marker = dir.path().join("pid");
    // A trace drawn at once, then waiting for keys: the pane is killed under it.
    let cmd = format!(
        "echo $$ > {}; exec {} spectrogram --waits -r {} --no-pace",
        marker.display(),
        bin().display(),
        f.display()
    );
    let t = Tmux::start("latscope-spectrogram-hup", 100, 30, &cmd);
    let mut pid = None;
    for _ in 0..100 {
        if let Some(p) = std::fs::read_to_string(&marker).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
            if t.text().iter().any(|l| l.contains("end of input")) {
                pid = Some(p);
                break;
            }
        }
        sleep(Duration::from_millis(100));
    }
    let pid = pid.unwrap_or_else(|| panic!("the view did not start:\n{:#?}", t.text()));
    // The screen shows every row, the empty ones too.
    let text = t.text();
    assert!(text.iter().any(|l| l.trim_start().starts_with("2.5s")), "{text:#?}");
    drop(t);
    let alive = |p: i32| {
        Path::new(&format!("/proc/{p}")).exists()
            && !std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default().contains(") Z ")
    };
    for _ in 0..100 {
        if !alive(pid) {
            return;
        }
        sleep(Duration::from_millis(100));
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    // Do not leave it spinning.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    panic!("latscope spectrogram kept running after its terminal went away: {stat}\n{status}");
}

#[test]
fn live_duration_draws_its_last_interval() {
    if !require_bpf("live_duration_draws_its_last_interval") {
        return;
    }
    // 500 sleeps of 1 ms per second for longer than both views last.
    let mut l = load(&["--op", "nanosleep", "--sleep", "1ms", "--rate", "500", "-d", "15s"]);
    sleep(Duration::from_millis(300));
    for (args, rows_wanted) in [(&["-d", "2s"][..], 4usize), (&["-d", "1.2s", "--stream"][..], 3)] {
        let mut a = vec![
            "spectrogram",
            "--waits",
            "500",
            "proc.name=latscope-load",
            "--plain",
            "--colors",
            "none",
            "--width",
            "109",
        ];
        a.extend(args);
        let out = latscope_ok(&a);
        let r = rows(&out, 100);
        assert_eq!(r.len(), rows_wanted, "{args:?}: every interval of -d, the last too:\n{out}");
        // Each row, the last (partial) one too, holds the sleeps near 1 ms.
        for (t, cells) in &r {
            assert!(marked(cells).iter().any(|&(i, _)| (60..=63).contains(&i)), "{args:?}: row {t} is empty:\n{out}");
        }
    }
    let _ = l.kill();
    let _ = l.wait();
}

#[test]
fn tui_status_and_hints_fit_80_columns() {
    if !require_tool("tui_status_and_hints_fit_80_columns", "tmux") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("a-rather-long-directory-name-for-recordings").join("of-this-week");
    std::fs::create_dir_all(&deep).unwrap();
    let f = deep.join("ext4-sustained-writes.lst");
    synthetic_trace(&f);
    let filter = "proc.name != nothing-at-all and evt.type in (nanosleep, read, write) and evt.latency >= 0";
    let cmd = format!("{} spectrogram -r {} --no-pace --by proc '{filter}'; sleep 60", bin().display(), f.display());
    let t = Tmux::start("latscope-spectrogram-80", 80, 24, &cmd);
    let text = t.wait_for("end of input", 10);
    let check = |text: &[String], what: &str| {
        let top = &text[0];
        let bottom = text.iter().rev().find(|l| !l.trim().is_empty()).unwrap();
        for l in text {
            assert!(l.chars().count() <= 80, "{what}: {l}");
        }
        // The file's name and the filter's start are shown, cut with a mark where needed.
        assert!(top.contains("ext4-sustained-writes.lst") && top.contains("filter: proc.name"), "{what}: {top}");
        assert!(top.trim_end().chars().count() < 80 || top.trim_end().ends_with('…'), "{what}: {top}");
        assert!(bottom.contains("q: quit") && bottom.contains("?: help"), "{what}: {bottom}");
        assert!(!bottom.contains("drops"), "a file drops nothing: {bottom}");
        let legend = text.iter().find(|l| l.starts_with("count per cell")).unwrap();
        assert!(legend.contains(" 1k ") && legend.contains(" 10k ") && !legend.contains("1.00k"), "{legend}");
    };
    check(&text, "running");
    // Frozen: the longer hints still fit.
    t.keys(&["Space"]);
    let text = t.text();
    check(&text, "frozen");
    assert!(text.iter().any(|l| l.contains("FROZEN")), "{text:#?}");
    t.keys(&["q"]);
}

#[test]
fn tui_first_drill_down_of_kernel_histograms_keeps_events_from_then_on_and_says_so_in_full() {
    let test = "tui_first_drill_down_of_kernel_histograms_keeps_events_from_then_on_and_says_so_in_full";
    if !require_bpf(test) || !require_tool(test, "tmux") {
        return;
    }
    let name = "lsc-drill-first";
    let cmd = format!(
        "{} spectrogram --waits 250 --colors 256 'proc.name={name} and evt.type=nanosleep'; sleep 60",
        bin().display()
    );
    let t = Tmux::start("latscope-spectrogram-first-drill", 80, 24, &cmd);
    let text = t.wait_for("250ms/row", 60);
    assert!(text.iter().any(|l| l.contains("250ms/row")), "the view did not start:\n{text:#?}");
    let l = load(&["--name", name, "--op", "nanosleep", "--sleep", "10ms", "--rate", "40", "-d", "12s"]);
    sleep(Duration::from_millis(1500));
    let text = t.text();
    assert!(text.iter().any(|l| l.contains("in-kernel")), "counting in the kernel first:\n{text:#?}");
    // The first drill-down: no "press s" cut at the edge, but the whole explanation, wrapped.
    t.keys(&["Space"]);
    t.keys(&["Enter"]);
    // Switching attaches the streaming probes: a moment.
    let text = t.wait_for("events are kept from now on", 10);
    let screen = text.join("\n");
    assert!(screen.contains("events are kept from now on"), "{screen}");
    let said: String = text.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
    assert!(said.contains("keeps no events") && said.contains("to list their events."), "{screen}");
    assert!(text.iter().all(|l| l.chars().count() <= 80), "{screen}");
    // Resume, let rows of events come, and drill down again: the events are listed.
    t.keys(&["Escape"]);
    t.keys(&["Space"]);
    sleep(Duration::from_millis(2500));
    t.keys(&["Space"]);
    let (n, listing) = list_10ms_events(&t, 80, name);
    assert!(n >= 10, "3 rows of 10 ms sleeps at 40/s should list ~30 events:\n{listing}");
    t.keys(&["Escape", "q"]);
    let mut l = l;
    let _ = l.kill();
    let _ = l.wait();
}

#[test]
fn svg_of_a_file_on_a_terminal_says_it_is_drawn_at_once() {
    if !require_tool("svg_of_a_file_on_a_terminal_says_it_is_drawn_at_once", "tmux") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.lst");
    synthetic_trace(&f);
    let svg = dir.path().join("t.svg");
    let cmd = format!("{} spectrogram -r {} --svg {}; sleep 60", bin().display(), f.display(), svg.display());
    let t = Tmux::start("latscope-spectrogram-svg-pace", 160, 24, &cmd);
    let text = t.wait_for("end of input", 10);
    let screen = text.join("\n");
    assert!(screen.contains("drawn at once, not at the recording's pace"), "said on screen:\n{screen}");
    t.keys(&["q"]);
    sleep(Duration::from_millis(500));
    let after = t.text().join("\n");
    assert!(after.contains("latscope: note: the file was drawn at once"), "said when done:\n{after}");
    assert!(svg.exists());
}

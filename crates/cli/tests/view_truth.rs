//! Views of recorded workloads with known behaviour: sleeps of known lengths (histogram peaks),
//! overlapping long and short calls (event order).

mod common;
mod viewsupport;
use common::*;
use latscope_event::units::parse_duration_ns;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Records `script` (run by sh) into `dir/name.lst`, following its children; the recording must
/// lose nothing.
fn record(dir: &Path, name: &str, script: &str) -> PathBuf {
    let trace = dir.join(format!("{name}.lst"));
    let o = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--quiet", "--json", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert!(o.status.success(), "record failed: {}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_str(String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or_default())
        .expect("the summary: stderr's last line, with a command");
    assert_eq!(s["lost"], 0, "no event may be lost: {s}");
    assert_eq!(s["command_status"], 0, "workload failed: {s}");
    trace
}

/// `(from, to, count, marked peak)` of each bin line of `latscope hist` text.
fn bin_lines(text: &str) -> Vec<(String, String, u64, Option<u32>)> {
    text.lines()
        .filter(|l| l.contains('%') && l.contains(" - ") && !l.contains("peak ") || l.contains("◀ peak"))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let count = w.get(3)?.parse().ok()?;
            let peak = l.split("◀ peak ").nth(1).map(|p| p.trim().parse().unwrap());
            Some((w[0].to_string(), w[2].to_string(), count, peak))
        })
        .collect()
}

#[test]
fn hist_peaks_sit_on_the_bars_of_known_sleeps() {
    if !require_bpf("hist_peaks_sit_on_the_bars_of_known_sleeps") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ls = bin();
    let ls = ls.display();
    let trace = record(
        tmp.path(),
        "sleeps",
        &format!("{ls} load --op nanosleep --sleep 100us -n 1000 >/dev/null && {ls} load --op nanosleep --sleep 1ms -n 1000 >/dev/null"),
    );
    let t = trace.to_str().unwrap();
    let filter = "proc.name = latscope-load and evt.type = nanosleep";
    let j = latscope_json(&["hist", "-r", t, filter, "--json"]);
    let g = &j["groups"][0];
    assert_eq!(g["stats"]["count"], 2000, "every sleep counted once");
    assert_eq!(j["filter"], filter);
    let mut peaks = g["peaks"].as_array().unwrap().clone();
    assert_eq!(peaks.len(), 2, "{peaks:#?}");
    peaks.sort_by_key(|p| p["mode_low"].as_u64().unwrap());
    // A sleep lasts at least what it asked for, plus the timer slack (50 us by default) and the
    // wake-up: the modes are just above 100 us and 1 ms.
    for (p, asked) in peaks.iter().zip([100_000u64, 1_000_000]) {
        let (lo, hi) = (p["mode_low"].as_u64().unwrap(), p["mode_high"].as_u64().unwrap());
        assert!(lo >= asked && hi <= asked + asked / 2 + 100_000, "mode {lo}..{hi} for {asked}: {p}");
        assert!((p["share"].as_f64().unwrap() - 0.5).abs() < 0.05, "{p}");
        // The mode lies inside the range of the middle 80 % of the peak's events.
        assert!(p["p10"].as_u64().unwrap() <= lo && hi <= p["p90"].as_u64().unwrap(), "{p}");
    }
    // Text, log bins and every bucket: the marker of each peak is on the tallest bar of its
    // region (the bars below 500 us for the short sleeps, above for the long ones; with every
    // bucket, within counting noise of it), and in --full the labels of neighbouring buckets
    // differ.
    for extra in [None, Some("--full"), Some("--per-decade=7")] {
        let mut args = vec!["hist", "-r", t, filter];
        args.extend(extra);
        let text = latscope_ok(&args);
        // The first line says what was counted (only waits matched: they are shown), then the panel.
        assert!(text.lines().next().unwrap().starts_with("2000 syscall events, all idle waits"), "{text}");
        assert!(text.contains(&format!("\nsyscall latency of '{filter}': 2000 events")), "{text}");
        let lines = bin_lines(&text);
        let ns = |s: &str| parse_duration_ns(s).unwrap();
        for (k, region) in [(2u32, 0..500_000u64), (1, 500_000..u64::MAX)] {
            let in_region: Vec<_> = lines.iter().filter(|l| region.contains(&ns(&l.0))).collect();
            let tallest = in_region.iter().map(|l| l.2).max().unwrap();
            let marked: Vec<_> = in_region.iter().filter(|l| l.3.is_some()).collect();
            assert_eq!(marked.len(), 1, "{extra:?}: one marker in {region:?}:\n{text}");
            if extra == Some("--full") {
                // Every bucket: the bars of a flat top differ by counting noise alone, so the
                // mode's bar (the peak finder smooths the counts) is within that noise of the
                // tallest one, not always the tallest.
                let noise = 3.0 * (tallest as f64).sqrt();
                assert!(
                    marked[0].2 as f64 >= tallest as f64 - noise,
                    "{extra:?}: peak {k} marked on a {} bar, tallest {tallest}:\n{text}",
                    marked[0].2
                );
            } else {
                assert_eq!(
                    marked[0].2, tallest,
                    "{extra:?}: peak {k} marked on a {} bar, tallest {tallest}:\n{text}",
                    marked[0].2
                );
            }
        }
        if extra == Some("--full") {
            assert!(lines.iter().all(|l| l.0 != l.1), "a bucket reads 'x - x':\n{text}");
            assert!(lines.windows(2).all(|w| w[0].0 != w[1].0), "neighbours read alike:\n{text}");
        }
    }
    // SVG: each peak's dashed line passes through the tallest bar of the peak, in Chromium too.
    let svg = tmp.path().join("h.svg");
    latscope_ok(&["hist", "-r", t, filter, "--svg", svg.to_str().unwrap()]);
    let doc = std::fs::read_to_string(&svg).unwrap();
    assert!(doc.contains(&format!("of &#39;{filter}&#39;")), "the title names the filter");
    // (x from, x to, lowest value, count) of each bar; the lines' x.
    let bars: Vec<(f64, f64, f64, u64)> = doc
        .lines()
        .filter(|l| l.contains(r#"class="bar""#))
        .map(|l| {
            let n = |k: &str| -> f64 { viewsupport::attr(l, k).unwrap().parse().unwrap() };
            (n("x"), n("x") + n("width"), n("data-lo"), n("data-n") as u64)
        })
        .collect();
    let lines: Vec<f64> = doc
        .lines()
        .filter(|l| l.contains(r#"class="peak""#))
        .map(|l| viewsupport::attr(l, "x1").unwrap().parse().unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for x in &lines {
        let bar = bars.iter().find(|b| b.0 <= *x && *x <= b.1).expect("each peak line is on a bar");
        let short = bar.2 < 500_000.0;
        let tallest = bars.iter().filter(|b| (b.2 < 500_000.0) == short).map(|b| b.3).max().unwrap();
        assert_eq!(bar.3, tallest, "the line at x={x} is on a {}-event bar, the tallest holds {tallest}", bar.3);
    }
    if let Some(chrome) = viewsupport::chromium("hist_peaks_sit_on_the_bars_of_known_sleeps") {
        let layout = viewsupport::layout(&chrome, &svg, "");
        // The drawn bars, in the document's order: those of the SVG above.
        let drawn: Vec<_> = layout.iter().filter(|b| b.class == "bar").collect();
        assert_eq!(drawn.len(), bars.len());
        let short = |i: usize| bars[i].2 < 500_000.0;
        for l in layout.iter().filter(|e| e.class == "peak") {
            let x = l.x + l.w / 2.0;
            // The tallest bar as drawn of the peak's region (a busy machine widens the short
            // sleeps' peak, so its top may be lower than the long sleeps').
            let under: Vec<usize> =
                (0..drawn.len()).filter(|&i| drawn[i].x - 0.5 <= x && x <= drawn[i].x + drawn[i].w + 0.5).collect();
            assert!(!under.is_empty(), "a peak line at x={x} is on no bar as drawn");
            let top = (0..drawn.len()).filter(|&j| short(j) == short(under[0])).map(|j| drawn[j].h).fold(0.0, f64::max);
            assert!(
                under.iter().any(|&i| drawn[i].h >= top - 0.5),
                "a peak line at x={x} is on a bar {:?} px tall as drawn, the tallest of its region {top} px",
                under.iter().map(|&i| drawn[i].h).collect::<Vec<_>>()
            );
        }
        viewsupport::assert_text_fits(&layout, "hist");
    }
}

/// `(start, end)` of each event of `latscope events --json ARGS`, as printed.
fn printed(args: &[&str]) -> Vec<(u64, u64, bool)> {
    let mut a = vec!["events", "--json"];
    a.extend(args);
    json_lines(&latscope_ok(&a))
        .iter()
        .map(|e| {
            let ts = e["ts_ns"].as_u64().unwrap();
            (ts, ts + e["latency_ns"].as_u64().unwrap(), e["late"] == true)
        })
        .collect()
}

fn inversions(keys: impl Iterator<Item = u64>) -> usize {
    let v: Vec<u64> = keys.collect();
    v.windows(2).filter(|w| w[1] < w[0]).count()
}

#[test]
fn events_print_in_start_order_with_overlapping_long_and_short_calls() {
    if !require_bpf("events_print_in_start_order_with_overlapping_long_and_short_calls")
        || !require_tool("events_print_in_start_order_with_overlapping_long_and_short_calls", "mkfs.ext4")
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let lfs = LoopFs::new("ext4", 64);
    // Two sleeps (0.8 s and 0.3 s) overlap hundreds of short calls and direct writes whose block
    // requests are recorded in blocks of their own.
    let script = format!(
        "sleep 0.8 & sleep 0.3 & for i in $(seq 200); do cat /etc/hostname >/dev/null; done; \
         dd if=/dev/zero of={}/f bs=64k count=64 oflag=direct 2>/dev/null; wait",
        lfs.mnt.display()
    );
    let trace = record(tmp.path(), "overlap", &script);
    let t = trace.to_str().unwrap();
    let by_start = printed(&["-r", t]);
    assert!(by_start.len() > 2000, "{} events", by_start.len());
    let long = by_start.iter().filter(|e| e.1 - e.0 >= 700_000_000).count();
    let during = |e: &(u64, u64, bool)| by_start.iter().filter(|s| s.0 > e.0 && s.1 < e.1).count();
    assert!(by_start.iter().any(|e| e.1 - e.0 >= 700_000_000 && during(e) > 1000), "{long} long calls");
    // The file holds them in completion order, with the two streams interleaved: not start order.
    let by_end = printed(&["-r", t, "--sort", "end"]);
    assert!(inversions(by_end.iter().map(|e| e.0)) > 0, "the workload has no overlapping calls");
    // Start order by default, completion order with --sort end: every event once, no inversion,
    // nothing late.
    assert_eq!(inversions(by_start.iter().map(|e| e.0)), 0);
    assert_eq!(inversions(by_end.iter().map(|e| e.1)), 0);
    assert!(by_start.iter().chain(&by_end).all(|e| !e.2));
    let mut a: Vec<_> = by_start.iter().map(|e| (e.0, e.1)).collect();
    let mut b: Vec<_> = by_end.iter().map(|e| (e.0, e.1)).collect();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b);
    // A window shorter than the sleeps: they come out late and marked, the rest in order.
    let short = printed(&["-r", t, "--window", "100ms"]);
    assert_eq!(short.len(), by_start.len());
    let late: Vec<_> = short.iter().filter(|e| e.2).collect();
    assert!(late.iter().any(|e| e.1 - e.0 >= 700_000_000), "the 0.8 s sleep is late: {late:?}");
    assert_eq!(inversions(short.iter().filter(|e| !e.2).map(|e| e.0)), 0);
    let o = latscope(&["events", "-r", t, "--window", "100ms"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.lines().filter(|l| l.ends_with(" [late]")).count(), late.len());
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("{} events printed late", late.len())));
}

#[test]
fn timeline_latency_leaves_out_blocking_waits_and_says_so() {
    if !require_bpf("timeline_latency_leaves_out_blocking_waits_and_says_so") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // A 0.6 s sleep and the shell's wait for it, next to 20,000 reads of 4 KiB from /dev/zero.
    let trace =
        record(tmp.path(), "waits", "sleep 0.6 & dd if=/dev/zero of=/dev/null bs=4k count=20000 2>/dev/null; wait");
    let t = trace.to_str().unwrap();
    let j = latscope_json(&["timeline", "-r", t, "--json"]);
    let pts = j["points"].as_array().unwrap();
    let waits: u64 = pts.iter().map(|p| p["waits"].as_u64().unwrap()).sum();
    assert!(waits >= 2, "the sleep and the wait are blocking waits: {waits}");
    for p in pts.iter().filter(|p| p["count"].as_u64().unwrap() > 0 && !p["max_ns"].is_null()) {
        // Without the waits no latency statistic holds the 0.6 s sleep, and p50 <= p99 <= max.
        let (p50, p99, max) =
            (p["p50_ns"].as_u64().unwrap(), p["p99_ns"].as_u64().unwrap(), p["max_ns"].as_u64().unwrap());
        assert!(max < 500_000_000, "{p}");
        assert!(p50 <= p99 && p99 <= max, "{p}");
    }
    let text = latscope_ok(&["timeline", "-r", t]);
    assert!(
        text.lines().next().unwrap().contains("idle waits left out")
            && text.lines().nth(1).unwrap().contains("P50")
            && text.contains("blocking waits")
            && text.contains("--waits"),
        "{text}"
    );
    // Asked for, the waits are in: the sleep is the largest latency, and if the mean rises
    // above the p99 somewhere the table says why.
    let j = latscope_json(&["timeline", "-r", t, "--json", "--waits"]);
    let max = j["points"].as_array().unwrap().iter().filter_map(|p| p["max_ns"].as_u64()).max().unwrap();
    assert!(max >= 600_000_000, "{max}");
    let text = latscope_ok(&["timeline", "-r", t, "--waits"]);
    let above = text.lines().skip(1).filter(|l| l.split_whitespace().count() == 8).any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        let ns = |s: &str| parse_duration_ns(s).ok();
        matches!((ns(w[5]), ns(w[7])), (Some(p99), Some(mean)) if mean > p99)
    });
    assert_eq!(above, text.contains("MEAN is above P99"), "{text}");
    // The chart draws p50, p99 and max, and the note.
    let svg = tmp.path().join("tl.svg");
    latscope_ok(&["timeline", "-r", t, "-o", svg.to_str().unwrap()]);
    let doc = std::fs::read_to_string(&svg).unwrap();
    for s in ["data-series=\"p50\"", "data-series=\"p99\"", "data-series=\"max\"", "blocking waits"] {
        assert!(doc.contains(s), "{s}");
    }
    if let Some(chrome) = viewsupport::chromium("timeline_latency_leaves_out_blocking_waits_and_says_so") {
        viewsupport::assert_text_fits(&viewsupport::layout(&chrome, &svg, ""), "timeline");
    }
}

#[test]
fn top_names_pseudo_file_systems_and_unix_sockets() {
    if !require_bpf("top_names_pseudo_file_systems_and_unix_sockets")
        || !require_tool("top_names_pseudo_file_systems_and_unix_sockets", "python3")
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("srv.sock");
    // A unix socket server bound before the recording: the snapshot names it by its path (the
    // calls on the listening socket itself show it).
    let server = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.bind({:?})\ns.listen(8)\n\
         for _ in range(3):\n    c = s.accept()[0]\n    s.getsockname()\n    c.recv(16)\n    c.close()\n",
        sock.display().to_string()
    );
    let mut srv = Command::new("python3").args(["-c", &server]).spawn().unwrap();
    for _ in 0..100 {
        if sock.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let shm = format!("/dev/shm/latscope-test-{}", std::process::id());
    let trace = tmp.path().join("names.lst");
    let rec = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--quiet", "-c", "python3", "-c", "sh", "-c", "cat", "--duration", "60s"])
        .spawn()
        .unwrap();
    // Attached: the file exists, then the probes get time to load.
    for _ in 0..200 {
        if trace.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    let client = format!(
        "import socket\nfor _ in range(3):\n    c = socket.socket(socket.AF_UNIX)\n    c.connect({:?})\n    c.send(b'x')\n    c.close()\n",
        sock.display().to_string()
    );
    assert!(Command::new("python3").args(["-c", &client]).status().unwrap().success());
    let sh = format!("echo hello | cat > {shm}; cat {shm} > /dev/null; rm {shm}");
    assert!(Command::new("sh").args(["-c", &sh]).status().unwrap().success());
    // The work is done: stopping the recorder (it drains what the probes saw) beats waiting out a
    // fixed duration.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let o = rec.wait_with_output().unwrap();
    assert!(o.status.success());
    let _ = srv.wait();
    let t = trace.to_str().unwrap();
    let ours = "proc.name in (python3, sh, cat)";
    let disks = latscope_ok(&["top", "-r", t, "--by", "disk", "-n", "50", ours]);
    for name in ["pipefs (0:", "sockfs (0:", "tmpfs /dev/shm"] {
        assert!(disks.contains(name), "no {name}:\n{disks}");
    }
    assert!(!disks.lines().skip(2).any(|l| l.starts_with("0:")), "an unnamed pseudo file system:\n{disks}");
    let ev = latscope_ok(&["events", "-r", t, "proc.name = python3 and evt.type = getsockname"]);
    assert!(ev.lines().any(|l| l.contains(&format!("fd=3(<unix>{})", sock.display()))), "{ev}");
    let files = latscope_ok(&["top", "-r", t, "--by", "file", "-n", "500", "proc.name = python3"]);
    assert!(files.contains(&sock.display().to_string()), "the unix socket by its path:\n{files}");
}

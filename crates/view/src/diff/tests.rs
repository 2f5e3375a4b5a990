use super::*;
use latscope_event::source::Zone;
use latscope_event::EventBatch;
use latscope_stats::Correction;
use latscope_trace::synth::{Steady, SteadyCall};

/// read, pread64 and write of one process on their own files, and block reads on vda.
fn workload(seed: u64, secs: f64) -> Steady {
    Steady {
        seed,
        secs,
        calls: vec![
            SteadyCall::new("read", 2000.0, 20_000.0, 0.6),
            SteadyCall::new("pread64", 1000.0, 50_000.0, 0.5),
            SteadyCall::new("write", 500.0, 80_000.0, 0.7),
        ],
        disk: Some(SteadyCall::new("", 150.0, 500_000.0, 0.4)),
    }
}

fn opts() -> DiffOptions {
    DiffOptions { dims: vec![Dim::Syscall, Dim::Proc, Dim::File, Disk], ..Default::default() }
}

/// Recordings drawn from a known distribution have no run-to-run noise: none is assumed.
fn exact() -> DiffOptions {
    DiffOptions { settings: Settings { run_noise: 0.0, ..Settings::default() }, ..opts() }
}
use Dim::Disk;

/// A recording of `w`, read as `latscope diff` reads one (latency scaled by `scale`).
fn run(w: &Steady, o: &DiffOptions, scale: f64) -> Run {
    let h = w.header();
    let mut b = EventBatch::default();
    for mut e in w.events() {
        e.lat = (e.lat as f64 * scale) as u64;
        b.push(&e);
    }
    let rows: Vec<u32> = (0..b.len() as u32).collect();
    let mut agg = RunAgg::new(o, &h);
    for part in rows.chunks(65_536) {
        agg.add(Chunk { batch: &b, rows: part, zone: Zone::default() }, &h);
    }
    agg.finish(&format!("seed{}", w.seed), Some((w.secs * 1e9) as u64), None)
}

fn changed(d: &Diff) -> Vec<String> {
    d.changes().iter().map(|(dim, g, m)| format!("{} {} {}", dim.by, g.name, m.metric)).collect()
}

#[test]
fn twenty_a_a_pairs_of_one_workload_give_no_verdict_of_change() {
    let o = opts();
    let strict =
        DiffOptions { settings: Settings { min_change: 0.0, run_noise: 0.0, ..Settings::default() }, ..opts() };
    let mut flagged_strict = 0;
    for k in 0..20 {
        let (a, b) = (run(&workload(2 * k, 3.0), &o, 1.0), run(&workload(2 * k + 1, 3.0), &o, 1.0));
        let d = diff(std::slice::from_ref(&a), std::slice::from_ref(&b), &o);
        assert!(d.comparisons >= 40, "{}", d.comparisons);
        assert!(changed(&d).is_empty(), "pair {k}: {:?}\n{}", changed(&d), text::render_text(&d));
        // What rests on fewer than 10 operations (the p99.9 of 1500 writes) is too few to tell.
        for m in d.dims.iter().flat_map(|x| &x.groups).flat_map(|g| &g.metrics) {
            let few = m.outcome.support.0 < 10 || m.outcome.support.1 < 10;
            assert_eq!(m.outcome.verdict == Verdict::TooFew, few, "{m:?}");
        }
        // Without the practical threshold, the correction alone keeps false verdicts at 5 %.
        let d = diff(&[a], &[b], &strict);
        flagged_strict += usize::from(!changed(&d).is_empty());
    }
    assert!(flagged_strict <= 2, "{flagged_strict} of 20 A/A pairs flagged without a threshold");
}

#[test]
fn a_delay_in_one_call_type_is_found_with_its_size_and_nothing_else() {
    let o = exact();
    let a = run(&workload(100, 4.0), &o, 1.0);
    let mut w = workload(101, 4.0);
    w.calls[1].delay_ns = 25_000.0;
    let b = run(&w, &o, 1.0);
    let d = diff(&[a], &[b], &o);
    let ch = changed(&d);
    for (name, q) in PERCENTILES {
        let z = latscope_stats::dist::normal_quantile(q);
        let truth = w.calls[1].quantile_ns(z) / (w.calls[1].quantile_ns(z) - 25_000.0) - 1.0;
        for (by, group) in [("syscall", "pread64"), ("file", "/data/pread64")] {
            let g = d.dims.iter().find(|x| x.by == by).unwrap().groups.iter().find(|g| g.name == group).unwrap();
            let m = g.metrics.iter().find(|m| m.metric == name).unwrap();
            if m.outcome.verdict == Verdict::TooFew {
                continue;
            }
            assert!((m.outcome.change - truth).abs() < 0.04, "{by} {group} {name}: {truth} vs {:?}", m.outcome);
            if truth > 0.15 {
                assert_eq!(m.outcome.verdict, Verdict::Increase, "{by} {group} {name}: {:?}", m.outcome);
            }
        }
    }
    assert!(ch.contains(&"syscall pread64 p50".to_string()), "{ch:?}");
    // Only pread64 and what holds it (the process, all syscalls) changed, and no rate.
    for c in &ch {
        let ok = c.contains("pread64") || c.starts_with("proc app ") || c.starts_with("all syscalls ");
        assert!(ok && !c.ends_with(" rate"), "{c} flagged: {ch:?}\n{}", text::render_text(&d));
    }
}

#[test]
fn a_slower_disk_is_found_on_the_disk_alone() {
    let o = exact();
    let a = run(&workload(200, 4.0), &o, 1.0);
    let mut w = workload(201, 4.0);
    w.disk.as_mut().unwrap().median_ns *= 1.5;
    let b = run(&w, &o, 1.0);
    let d = diff(&[a], &[b], &o);
    let ch = changed(&d);
    assert!(ch.contains(&"disk vda p50".to_string()) && ch.contains(&"disk vda p90".to_string()), "{ch:?}");
    for c in &ch {
        assert!(c.starts_with("disk vda p") || c.starts_with("all block I/O all p"), "{c}: {ch:?}");
    }
    let g = &d.dims.iter().find(|x| x.by == "disk").unwrap().groups[0];
    assert!((g.metrics[0].outcome.change - 0.5).abs() < 0.08, "{:?}", g.metrics[0].outcome);
}

#[test]
fn groups_on_one_side_only_are_listed_and_rates_are_per_second() {
    let o = exact();
    let mut wa = workload(300, 2.0);
    wa.calls.push(SteadyCall::new("fsync", 50.0, 2_000_000.0, 0.3));
    // B recorded twice as long at the same rates: nothing changed per second.
    let (a, b) = (run(&wa, &o, 1.0), run(&workload(301, 4.0), &o, 1.0));
    let d = diff(&[a], &[b], &o);
    let sys = d.dims.iter().find(|x| x.by == "syscall").unwrap();
    assert_eq!(sys.only_a.len(), 1, "{:?}", sys.only_a);
    assert_eq!(sys.only_a[0].name, "fsync");
    assert!((sys.only_a[0].rate - 50.0).abs() < 12.0, "{:?}", sys.only_a[0]);
    assert!(sys.only_b.is_empty());
    let read = sys.groups.iter().find(|g| g.name == "read").unwrap();
    let r = read.metrics.iter().find(|m| m.metric == "rate").unwrap();
    assert!((r.outcome.change).abs() < 0.05 && !r.outcome.verdict.changed(), "{:?}", r.outcome);
    assert!((read.count.1 / read.count.0 - 2.0).abs() < 0.1, "{:?}", read.count);
    let t = text::render_text(&d);
    assert!(t.contains("only in A: fsync ("), "{t}");
}

#[test]
fn recordings_repeated_per_side_put_run_to_run_noise_in_the_interval() {
    // Each recording's latencies scaled by its own factor (10 % run to run, as a page cache or
    // CPU frequency does): one recording per side, with no threshold, is often flagged; three
    // per side, whose scatter the interval takes in, seldom.
    let o = DiffOptions {
        dims: vec![Dim::Syscall],
        settings: Settings { min_change: 0.0, correction: Correction::None, run_noise: 0.0, ..Settings::default() },
        ..Default::default()
    };
    let mut rng = latscope_trace::synth::Rng::new(7);
    let mut factor = || {
        let u = |r: &mut latscope_trace::synth::Rng| ((r.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let z = (-2.0 * u(&mut rng).ln()).sqrt() * (2.0 * std::f64::consts::PI * u(&mut rng)).cos();
        (0.1 * z).exp()
    };
    let (mut single, mut repeated) = (0, 0);
    let trials = 12;
    for t in 0..trials {
        let w = |k: u64| Steady {
            calls: vec![SteadyCall::new("read", 3000.0, 20_000.0, 0.5)],
            disk: None,
            ..workload(1000 + 10 * t + k, 1.0)
        };
        let a: Vec<Run> = (0..3).map(|k| run(&w(k), &o, factor())).collect();
        let b: Vec<Run> = (3..6).map(|k| run(&w(k), &o, factor())).collect();
        let p50 = |d: &Diff| d.dims[0].groups[0].metrics[0].outcome.verdict.changed();
        single += usize::from(p50(&diff(&a[..1], &b[..1], &o)));
        repeated += usize::from(p50(&diff(&a, &b, &o)));
    }
    assert!(single >= trials as usize / 2, "{single} of {trials}");
    assert!(repeated <= 1, "{repeated} of {trials}");
}

#[test]
fn a_diff_reads_as_text_json_and_pictures() {
    let o = DiffOptions { heatmap: true, ..exact() };
    let a = run(&workload(400, 2.0), &o, 1.0);
    let mut w = workload(401, 2.0);
    w.calls[0].delay_ns = 30_000.0;
    let b = run(&w, &o, 1.0);
    let d = diff(std::slice::from_ref(&a), std::slice::from_ref(&b), &o);
    let t = text::render_text(&d);
    assert!(t.starts_with("A: seed400 (2.0 s, "), "{t}");
    assert!(t.contains("what changed (") && t.contains("syscall read p50"), "{t}");
    assert!(t.contains("slower") && t.contains("how to read it: 95% intervals"), "{t}");
    let j = text::to_json(&d);
    assert_eq!(j["settings"]["min_change"], 0.05);
    assert!(j["changes"].as_array().unwrap().iter().any(|c| c["group"] == "read" && c["verdict"] == "increase"), "{j}");
    assert_eq!(j["dims"][0]["by"], "all syscalls");
    // Overlaid histograms: one panel per group, both sides drawn, percentiles marked.
    let panels: Vec<svg::Panel> = ["read", "write"]
        .iter()
        .map(|g| svg::Panel {
            name: format!("syscall {g}"),
            a: svg::merged(std::slice::from_ref(&a), &|r| r.dims.first(), g),
            b: svg::merged(std::slice::from_ref(&b), &|r| r.dims.first(), g),
        })
        .collect();
    let h = svg::histograms(&panels, "t", "s");
    assert_eq!(h.matches("<g class=\"panel\"").count(), 2);
    assert_eq!(h.matches("class=\"side0\"").count() + h.matches("class=\"side1\"").count(), 4);
    assert_eq!(h.matches("class=\"pct\"").count(), 8);
    // Heat maps: A and B on one scale, and their difference.
    let (ma, mb) = svg::heat_maps(std::slice::from_ref(&a), std::slice::from_ref(&b)).unwrap().unwrap();
    assert_eq!((ma.bins.cols, ma.rows), (mb.bins.cols, mb.rows));
    assert_eq!(ma.total, a.syscalls());
    let hs = svg::heat_svg(&ma, &mb, "t", "s");
    for p in ["A", "B", "B - A"] {
        assert!(hs.contains(&format!("data-panel=\"{p}\"")), "{p}");
    }
    // A differential flame graph keeps the stacks that disappeared.
    let fa = "app;read;vfs_read_[k] 900\napp;fsync;ext4_sync_[k] 300\n";
    let fb = "app;read;vfs_read_[k] 1800\n";
    let df = svg::diff_folded(&[(fa, 1.0)], &[(fb, 1.0)]);
    assert_eq!(df, "app;fsync;ext4_sync_[k] 300 0\napp;read;vfs_read_[k] 900 1800\n");
    let flame = String::from_utf8(svg::diff_flame(&df, "t", "us blocked").unwrap()).unwrap();
    // inferno names kernel frames without their `_[k]`; the stack only A has is drawn (blue).
    assert!(flame.contains("ext4_sync (300 us blocked") && flame.contains("vfs_read (1,800 us blocked"), "{flame}");
}

#[test]
fn time_by_cause_is_compared_per_second_of_recording() {
    // Every call a quarter on CPU and three quarters in block I/O; in B the I/O part doubled.
    let o = DiffOptions { dims: vec![Dim::Syscall, Dim::Cause], ..exact() };
    let why = |w: &Steady, io_scale: f64| -> Run {
        let h = w.header();
        let mut b = EventBatch::default();
        for mut e in w.events() {
            e.why_cpu = e.lat / 4;
            e.why_io = ((e.lat - e.lat / 4) as f64 * io_scale) as u64;
            e.lat = e.why_cpu + e.why_io;
            b.push(&e);
        }
        let rows: Vec<u32> = (0..b.len() as u32).collect();
        let mut agg = RunAgg::new(&o, &h);
        agg.add(Chunk { batch: &b, rows: &rows, zone: Zone::default() }, &h);
        agg.finish("why", Some((w.secs * 1e9) as u64), None)
    };
    let d = diff(&[why(&workload(500, 3.0), 1.0)], &[why(&workload(501, 3.0), 2.0)], &o);
    let cause = d.dims.iter().find(|x| x.by == "cause").expect("a cause grouping");
    let get = |name: &str| &cause.groups.iter().find(|g| g.name == name).unwrap().metrics[0];
    let io = get("block I/O");
    assert_eq!(io.outcome.verdict, Verdict::Increase, "{:?}", io.outcome);
    assert!((io.outcome.change - 1.0).abs() < 0.15, "{:?}", io.outcome);
    assert!(!get("on CPU").outcome.verdict.changed(), "{:?}", get("on CPU").outcome);
    assert!(text::render_text(&d).contains("time by cause (per second of recording)"));
}

#[test]
fn a_block_spread_over_its_span_gives_each_window_its_share() {
    let mut w = Vec::new();
    // Within one window: all there.
    spread(&mut w, 7, 12, 18, 10);
    assert_eq!(w, [0, 7]);
    // Across three windows, 10 ns in the first, 10 in the second, 5 in the third.
    let mut w = Vec::new();
    spread(&mut w, 100, 10, 34, 10);
    assert_eq!(w, [0, 40, 40, 20]);
    // Rounded shares still add up.
    let mut w = vec![1];
    spread(&mut w, 10, 3, 29, 10);
    assert_eq!(w.iter().sum::<u32>(), 11);
    assert_eq!(w, [3, 4, 4]);
}

/// [`run`], each chunk placed in time by the span of its events' ends (as a trace's zone maps
/// give it, `ts` not decoded).
fn run_spanned(w: &Steady, o: &DiffOptions) -> Run {
    let h = w.header();
    let mut b = EventBatch::default();
    for e in w.events() {
        b.push(&e);
    }
    let rows: Vec<u32> = (0..b.len() as u32).collect();
    let mut agg = RunAgg::new(o, &h);
    assert!(agg.by_span());
    // Blocks of about half a second, as a busy recording's.
    for part in rows.chunks(2048) {
        let ends = part.iter().map(|&i| b.end(i as usize));
        let span = (ends.clone().min().unwrap(), ends.max().unwrap());
        agg.add_spanned(Chunk { batch: &b, rows: part, zone: Zone::default() }, &h, Some(span));
    }
    agg.finish(&format!("seed{}", w.seed), Some((w.secs * 1e9) as u64), None)
}

#[test]
fn rates_placed_by_block_span_judge_as_rates_placed_by_event() {
    let o = exact();
    for k in 0..6 {
        let (wa, wb) = (workload(2 * k, 10.0), workload(2 * k + 1, 10.0));
        let by_event = diff(&[run(&wa, &o, 1.0)], &[run(&wb, &o, 1.0)], &o);
        let (sa, sb) = (run_spanned(&wa, &o), run_spanned(&wb, &o));
        // The same events, latencies and counts per group.
        assert_eq!((sa.syscalls(), sa.blocks()), (run(&wa, &o, 1.0).syscalls(), run(&wa, &o, 1.0).blocks()));
        let by_span = diff(&[sa], &[sb], &o);
        assert!(changed(&by_span).is_empty(), "pair {k}: {:?}", changed(&by_span));
        for (x, y) in by_event.dims.iter().flat_map(|d| &d.groups).zip(by_span.dims.iter().flat_map(|d| &d.groups)) {
            assert_eq!(x.name, y.name);
            for (m, n) in x.metrics.iter().zip(&y.metrics) {
                assert_eq!(m.outcome.verdict, n.outcome.verdict, "{} {}", x.name, m.metric);
                // Rates' intervals rest on the over-dispersion seen (at least Poisson's).
                if let (Some(p), Some(q)) = (m.outcome.ci, n.outcome.ci) {
                    let near = (p.0 - q.0).abs() < 0.02 && (p.1 - q.1).abs() < 0.02;
                    assert!(near, "{} {}: {p:?} {q:?}", x.name, m.metric);
                }
            }
        }
    }
}

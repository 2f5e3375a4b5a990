//! The flight recorder fed as a recorder feeds it (batches through its `BlockSink`), with events
//! stamped with the clock's time: what it keeps, when it writes, what it writes, and the guards.
//! No probes needed; `tests/live.rs` runs it on real workloads.

use latscope_event::{Event, EventBatch, StackEntry, StackKind, TraceHeader};
use latscope_flight::{FlightEvent, FlightOptions, FlightRecorder, Outcome, RingSize, Trigger};
use latscope_live::BlockSink;
use latscope_probe::snapshot::{monotonic_ns, realtime_offset_ns};
use latscope_trace::{Summary, TraceReader};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;

fn header() -> TraceHeader {
    TraceHeader {
        hostname: "ring-test".into(),
        start_ns: monotonic_ns(),
        realtime_offset_ns: realtime_offset_ns(),
        syscalls: "all".into(),
        ..Default::default()
    }
}

/// `n` calls of process "bg" spread over the last `span_ns` up to now, 1 ms each, numbers and
/// paths varying as a busy server's do (they compress to a few bytes an event).
fn background(n: usize, span_ns: u64, seq: &mut u64) -> EventBatch {
    let now = monotonic_ns();
    let nr = latscope_event::syscall_nr("pwrite64").unwrap();
    let mut b = EventBatch::with_capacity(n);
    for i in 0..n as u64 {
        *seq += 1;
        let ts = now - span_ns + i * span_ns / n as u64;
        b.push(&Event {
            kind: 0,
            ts,
            lat: MS + (*seq * 7919) % 500_000,
            nr,
            pid: 100 + (*seq % 4) as u32,
            tid: 100 + (*seq % 16) as u32,
            fd: 3,
            off: (*seq * 4096) as i64,
            bytes: 4096,
            comm: "bg".into(),
            path: format!("/data/f{}", *seq % 8),
            ..Default::default()
        });
    }
    b
}

/// A call of "stall" that took `lat_ns` and ended now.
fn stall(lat_ns: u64) -> Event {
    Event {
        kind: 0,
        ts: monotonic_ns() - lat_ns,
        lat: lat_ns,
        nr: latscope_event::syscall_nr("fsync").unwrap(),
        pid: 7,
        tid: 7,
        why_io: lat_ns,
        comm: "stall".into(),
        path: "/data/db".into(),
        kstack: 1,
        ..Default::default()
    }
}

type Events = Arc<Mutex<Vec<FlightEvent>>>;

fn start(opts: FlightOptions) -> (FlightRecorder, Events) {
    let events: Events = Arc::default();
    let e = events.clone();
    let rec = FlightRecorder::start(&header(), opts, "test", move |x| e.lock().unwrap().push(x.clone())).unwrap();
    (rec, events)
}

fn wait_for(events: &Events, what: &str, timeout: Duration, f: impl Fn(&[FlightEvent]) -> bool) {
    let t = Instant::now();
    while !f(&events.lock().unwrap()) {
        assert!(t.elapsed() < timeout, "{what}: not within {timeout:?}: {:?}", events.lock().unwrap());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn dumps(dir: &Path) -> Vec<PathBuf> {
    latscope_flight::files::list(dir, latscope_flight::files::DUMP_PREFIX).into_iter().map(|l| l.path).collect()
}

fn done(events: &[FlightEvent]) -> Vec<latscope_flight::DumpReport> {
    events.iter().filter_map(|e| if let FlightEvent::Done(r) = e { Some(r.clone()) } else { None }).collect()
}

fn outcomes(events: &[FlightEvent]) -> Vec<Outcome> {
    events
        .iter()
        .filter_map(|e| if let FlightEvent::Fired { outcome, .. } = e { Some(outcome.clone()) } else { None })
        .collect()
}

#[test]
fn a_trigger_writes_the_window_before_and_after_it_as_an_ordinary_trace_and_extends_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = FlightOptions::new(dir.path(), RingSize::parse("1s").unwrap());
    o.triggers.push(Trigger::parse("slow: evt.latency > 100ms and proc.name = stall", "t1").unwrap());
    o.before = Some(Duration::from_millis(800));
    o.after = Duration::from_millis(1200);
    o.flush_every = Duration::from_millis(50);
    let (mut rec, events) = start(o);
    let mut seq = 0;
    let mut at = Vec::new();
    // 4.5 s of background at 20 k events/s, a batch every 50 ms; slow calls at 1.5 s (dumped),
    // 2.5 s (in the window after: extends the dump to 3.7 s), 4.3 s (the dump is over, but
    // within the minimum gap: deferred, dumped when the recording stops). A trigger reports
    // once a second at most.
    for i in 0..90 {
        let mut b = background(1000, 50 * MS, &mut seq);
        if i == 0 {
            // A stack first met long before the trigger: its entry leaves the ring with its block.
            let e = StackEntry {
                id: 1,
                kind: StackKind::Kernel,
                frames: Vec::new(),
                truncated: false,
                missing: Some("t".into()),
                cut: None,
            };
            b.stacks = e.to_line();
        }
        if [30, 50, 86].contains(&i) {
            let s = stall(150 * MS);
            at.push(s.ts + s.lat);
            b.push(&s);
        }
        rec.write_batch(b, 0).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    rec.finish(Summary::default()).unwrap();
    let ev = events.lock().unwrap().clone();
    let o = outcomes(&ev);
    assert!(
        matches!(o[..], [Outcome::Dumping(_), Outcome::Extended(_), Outcome::Deferred(ref why), Outcome::Dumping(_)] if why.contains("minimum gap")),
        "{o:?}"
    );
    let d = done(&ev);
    assert_eq!(d.len(), 2, "{ev:?}");
    assert_eq!(dumps(dir.path()), vec![d[0].path.clone(), d[1].path.clone()], "nothing else written");
    // The deferred one: its own window before it, cut where the recording stopped.
    let b = TraceReader::open(&d[1].path).unwrap().read_all().unwrap();
    assert!((0..b.len()).any(|i| b.comm.get(i) == "stall" && b.end(i) == at[2]));
    assert!(d[1].short.as_deref().unwrap_or("").contains("stopped"), "{:?}", d[1].short);
    assert_eq!(d[0].triggers, ["slow"]);
    assert!(d[0].first_readable <= d[0].took);

    let mut r = TraceReader::open(&d[0].path).unwrap();
    let h = r.header().clone();
    let b = r.read_all().unwrap();
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    assert_eq!(r.summary().unwrap().events as usize, b.len());
    let f = h.flight.as_ref().unwrap();
    assert_eq!((f.trigger.as_str(), f.at_ns), ("slow", at[0]));
    assert_eq!(f.reason, "fsync on /data/db by stall (pid 7) took 150ms");
    let first = *b.ts.iter().min().unwrap();
    let last = (0..b.len()).map(|i| b.end(i)).max().unwrap();
    assert!(first <= at[0] - 700 * MS, "the window before: from {} ms before", (at[0] - first) / MS);
    assert!(last >= at[1] + 1100 * MS, "the window after the second, extending trigger");
    assert_eq!(h.start_ns, first, "the header starts with the window");
    let stalls: Vec<usize> = (0..b.len()).filter(|&i| b.comm.get(i) == "stall").collect();
    assert_eq!(stalls.len(), 2, "the two slow calls, with their breakdown");
    assert!(stalls.iter().all(|&i| b.why_io[i] == 150 * MS));
    // The stack entry met 1.5 s before (its block long evicted) is in the dump's table.
    let table = TraceReader::open(&d[0].path).unwrap().read_stack_table().unwrap();
    assert!(table.get(1).is_some());
}

#[test]
fn a_trigger_within_the_minimum_gap_is_dumped_when_the_gap_ends_with_its_own_window() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = FlightOptions::new(dir.path(), RingSize::parse("10s").unwrap());
    o.triggers.push(Trigger::parse("slow: evt.latency > 100ms and proc.name = stall", "t1").unwrap());
    o.triggers.push(Trigger::parse("other: evt.latency > 100ms and proc.name = stall2", "t2").unwrap());
    o.before = Some(Duration::from_millis(500));
    o.after = Duration::from_millis(200);
    o.min_gap = Duration::from_secs(4);
    o.flush_every = Duration::from_millis(50);
    let (mut rec, events) = start(o);
    let mut seq = 0;
    let mut at = Vec::new();
    // 5 s at 20 k events/s; stalls at 0.5 s (dumped), 1.7 s (after the first dump's window and
    // the trigger's hold-off, within the gap: deferred to 4.5 s), 2.0 s (another trigger's: joins
    // the deferred dump).
    for i in 0..100 {
        let mut b = background(1000, 50 * MS, &mut seq);
        if [10, 34, 40].contains(&i) {
            let mut s = stall(150 * MS);
            if i == 40 {
                s.comm = "stall2".into();
            }
            at.push(s.ts + s.lat);
            b.push(&s);
        }
        rec.write_batch(b, 0).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for(&events, "two dumps", Duration::from_secs(10), |e| done(e).len() == 2);
    rec.finish(Summary::default()).unwrap();
    let ev = events.lock().unwrap().clone();
    let o = outcomes(&ev);
    assert!(
        matches!(&o[..], [Outcome::Dumping(_), Outcome::Deferred(w), Outcome::Deferred(j), Outcome::Dumping(_)]
            if w.contains("dumped, with the window before this trigger, when it ends") && j.contains("joins")),
        "{o:?}"
    );
    let d = done(&ev);
    assert_eq!(d[1].at_ns, at[1], "named and timed by the stall it waited for");
    assert_eq!(d[1].triggers, ["slow", "other"]);
    assert!(d[1].short.is_none(), "{:?}", d[1].short);
    let b = TraceReader::open(&d[1].path).unwrap().read_all().unwrap();
    let ends: Vec<u64> = (0..b.len()).filter(|&i| b.comm.get(i).starts_with("stall")).map(|i| b.end(i)).collect();
    assert_eq!(ends, [at[1], at[2]], "the stall it waited for and the one that joined it");
    let first = *b.ts.iter().min().unwrap();
    assert!(first <= at[1] - 400 * MS, "the window before the stall it waited for");
    assert!((0..b.len()).map(|i| b.end(i)).max().unwrap() >= at[2] + 150 * MS, "the window after the last");
}

#[test]
fn memory_stays_inside_the_ring_whatever_the_rate() {
    let dir = tempfile::tempdir().unwrap();
    let max = 6 << 20;
    let mut o = FlightOptions::new(dir.path(), RingSize::parse("6MiB").unwrap());
    o.triggers.push(Trigger::parse("m: manual", "t1").unwrap());
    let (mut rec, _) = start(o);
    let h = rec.handle();
    let mut seq = 0;
    let mut fed = 0;
    let mut peak = 0;
    // 120 batches of 32 Ki events (4 M events, far more than 6 MiB hold), as fast as it takes them.
    for _ in 0..120 {
        let b = background(32_768, 100 * MS, &mut seq);
        fed += b.len() as u64;
        rec.write_batch(b, 0).unwrap();
        peak = peak.max(h.stats().ring_bytes);
    }
    let s = rec.finish(Summary::default()).unwrap();
    let st = h.stats();
    assert_eq!((s.events, st.events), (fed, fed), "every event went through");
    assert!(peak <= max && st.ring_bytes <= max, "peak {peak} > {max}");
    assert!(st.ring_bytes > max / 2, "the ring was used: {}", st.ring_bytes);
    assert!(dumps(dir.path()).is_empty(), "nothing written without a trigger");
}

#[test]
fn keep_and_the_disk_budget_delete_the_oldest_dumps_and_only_them() {
    let dir = tempfile::tempdir().unwrap();
    // Three old dumps of 1 MiB and a file that is not ours.
    for (i, n) in [
        "flight-20200101T000000.000Z-old.lst",
        "flight-20200102T000000.000Z-old.lst",
        "flight-20200103T000000.000Z-old.lst",
        "notes.lst",
    ]
    .iter()
    .enumerate()
    {
        std::fs::write(dir.path().join(n), vec![i as u8; 1 << 20]).unwrap();
    }
    let mut o = FlightOptions::new(dir.path(), RingSize::parse("2s").unwrap());
    o.triggers.push(Trigger::parse("now: manual", "t1").unwrap());
    o.after = Duration::from_millis(100);
    o.flush_every = Duration::from_millis(50);
    o.min_gap = Duration::ZERO;
    o.keep = Some(3);
    o.disk_budget = Some((2 << 20) + (512 << 10));
    let (rec, events) = start(o);
    let h = rec.handle();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let feeder = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rec = rec;
            let mut seq = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                rec.write_batch(background(200, 50 * MS, &mut seq), 0).unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
            rec.finish(Summary::default()).unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    for n in 1..=3 {
        let o = h.fire("now", "test").unwrap();
        assert!(matches!(o, Outcome::Dumping(_)), "{o}");
        wait_for(&events, "a dump", Duration::from_secs(10), |e| done(e).len() == n);
    }
    assert!(h.fire("nothing", "test").unwrap_err().contains("no trigger 'nothing'"));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    feeder.join().unwrap();
    let left: Vec<String> =
        dumps(dir.path()).iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    // The budget (2.5 MiB) took the oldest old dump at the first trigger; --keep 3 the next two.
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(left.iter().all(|n| !n.contains("-old")), "{left:?}");
    assert!(dir.path().join("notes.lst").exists(), "not ours: untouched");
    let deleted: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            FlightEvent::Deleted { why, .. } => Some(why.clone()),
            _ => None,
        })
        .collect();
    assert!(deleted[0].contains("disk budget"), "{deleted:?}");
    assert!(deleted.iter().any(|w| w.contains("--keep 3")), "{deleted:?}");
    assert_eq!(h.stats().dumps, 3);
}

/// Root: a small tmpfs for the full disk.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let d = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(d.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs(d))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = std::process::Command::new("umount").arg(self.0.path()).status().is_ok_and(|s| s.success());
        if !ok {
            let _ = std::process::Command::new("umount").arg("-l").arg(self.0.path()).status();
        }
    }
}

/// Write zeros into `path` until the file system is full.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 << 10];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
}

#[test]
fn a_full_disk_stops_the_dump_with_a_message_and_the_ring_runs_on() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        latscope_testkit::skip(
            "a_full_disk_stops_the_dump_with_a_message_and_the_ring_runs_on",
            "mounting a tmpfs needs root",
        );
        return;
    }
    let Some(fs) = Tmpfs::mount("4m") else {
        latscope_testkit::skip(
            "a_full_disk_stops_the_dump_with_a_message_and_the_ring_runs_on",
            "mount -t tmpfs failed",
        );
        return;
    };
    let dir = fs.0.path().to_path_buf();
    let mut o = FlightOptions::new(&dir, RingSize::parse("2s").unwrap());
    o.triggers.push(Trigger::parse("now: manual", "t1").unwrap());
    o.after = Duration::from_secs(1);
    o.flush_every = Duration::from_millis(50);
    o.min_gap = Duration::ZERO;
    let (rec, events) = start(o);
    let h = rec.handle();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let feeder = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rec = rec;
            let mut seq = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                rec.write_batch(background(3000, 50 * MS, &mut seq), 0).unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
            rec.finish(Summary::default()).unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let o = h.fire("now", "test").unwrap();
    let Outcome::Dumping(first) = o else { panic!("{o}") };
    // The disk fills while the window after the trigger is written.
    let filler = dir.join("filler");
    fill(&filler);
    wait_for(&events, "the failure", Duration::from_secs(10), |e| {
        e.iter().any(|x| matches!(x, FlightEvent::Failed { .. }))
    });
    let failed = events.lock().unwrap().iter().find_map(|x| match x {
        FlightEvent::Failed { path, error, kept } => Some((path.clone(), error.clone(), *kept)),
        _ => None,
    });
    let (path, error, kept) = failed.unwrap();
    assert_eq!(path.as_ref(), Some(&first));
    assert!(error.contains("disk is full") && error.contains("ring keeps running"), "{error}");
    assert!(kept);
    // What was written is readable: the window before the trigger at least.
    let b = TraceReader::open(&first).unwrap().read_all().unwrap();
    assert!(!b.is_empty());
    // No room: the next trigger writes nothing, and says why.
    let o = h.fire("now", "test").unwrap();
    assert!(matches!(&o, Outcome::Suppressed(w) if w.contains("not enough disk space")), "{o}");
    let before = h.stats().events;
    std::thread::sleep(Duration::from_millis(300));
    assert!(h.stats().events > before, "the ring runs on");
    // Room again: dumps resume.
    std::fs::remove_file(&filler).unwrap();
    let o = h.fire("now", "test").unwrap();
    assert!(matches!(o, Outcome::Dumping(_)), "{o}");
    wait_for(&events, "a dump", Duration::from_secs(10), |e| !done(e).is_empty());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    feeder.join().unwrap();
    let d = done(&events.lock().unwrap());
    let mut r = TraceReader::open(&d[0].path).unwrap();
    r.read_all().unwrap();
    assert!(r.warnings().is_empty() && r.summary().is_some());
    drop(r);
    drop(fs);
}

#[test]
fn a_signal_and_a_file_appearing_fire_their_triggers_and_a_file_already_there_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let dumps_dir = dir.path().join("dumps");
    std::fs::create_dir(&dumps_dir).unwrap();
    let (go, already) = (dir.path().join("go"), dir.path().join("already"));
    std::fs::write(&already, b"").unwrap();
    let mut o = FlightOptions::new(&dumps_dir, RingSize::parse("2s").unwrap());
    o.triggers.push(Trigger::parse("sig: signal USR2", "t1").unwrap());
    o.triggers.push(Trigger::parse(&format!("f: file {}", go.display()), "t2").unwrap());
    o.triggers.push(Trigger::parse(&format!("old: file {}", already.display()), "t3").unwrap());
    o.after = Duration::from_millis(100);
    o.flush_every = Duration::from_millis(50);
    o.min_gap = Duration::ZERO;
    let (rec, events) = start(o);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let feeder = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rec = rec;
            let mut seq = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                rec.write_batch(background(200, 50 * MS, &mut seq), 0).unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
            rec.finish(Summary::default()).unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(400));
    // SAFETY: raise has no preconditions; the recorder handles SIGUSR2 (the process lives on).
    assert_eq!(unsafe { libc::raise(libc::SIGUSR2) }, 0);
    wait_for(&events, "the signal's dump", Duration::from_secs(10), |e| done(e).len() == 1);
    std::fs::write(&go, b"").unwrap();
    wait_for(&events, "the file's dump", Duration::from_secs(10), |e| done(e).len() == 2);
    // A second more: the file already there when the recorder started still fires nothing.
    std::thread::sleep(Duration::from_millis(600));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    feeder.join().unwrap();
    let ev = events.lock().unwrap().clone();
    let fired: Vec<(String, String)> = ev
        .iter()
        .filter_map(|e| match e {
            FlightEvent::Fired { trigger, reason, .. } => Some((trigger.clone(), reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(fired.len(), 2, "{fired:?}");
    assert_eq!(fired[0], ("sig".to_string(), "SIGUSR2 received".to_string()));
    assert_eq!(fired[1], ("f".to_string(), format!("{} appeared or was touched", go.display())));
    let d = done(&ev);
    assert_eq!(dumps(&dumps_dir), vec![d[0].path.clone(), d[1].path.clone()], "one dump each, nothing else");
    for (r, name) in d.iter().zip(["sig", "f"]) {
        let mut t = TraceReader::open(&r.path).unwrap();
        assert!(!t.read_all().unwrap().is_empty() && t.warnings().is_empty(), "{:?}", t.warnings());
        assert_eq!(t.header().flight.as_ref().unwrap().trigger, name);
    }
}

#[test]
fn rotation_by_size_closes_each_file_at_its_size_and_every_file_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let every = latscope_flight::RotateEvery::parse("1MiB").unwrap();
    let log: Arc<Mutex<Vec<latscope_flight::RotateEvent>>> = Arc::default();
    let l = log.clone();
    let mut rot = latscope_flight::Rotator::start(&header(), dir.path().to_path_buf(), every, Some(3), move |e| {
        l.lock().unwrap().push(e.clone())
    })
    .unwrap();
    let closed = |log: &[latscope_flight::RotateEvent]| {
        log.iter()
            .filter_map(|e| match e {
                latscope_flight::RotateEvent::Closed { path, events, bytes } => Some((path.clone(), *events, *bytes)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    // Batches of 8 Ki calls until five files have been closed at their size.
    let (mut seq, mut fed, mut batches) = (0, 0u64, 0);
    while closed(&log.lock().unwrap()).len() < 5 {
        assert!(batches < 2000, "five files of 1 MiB not closed after {fed} events: {:?}", log.lock().unwrap());
        let b = background(8192, 10 * MS, &mut seq);
        fed += b.len() as u64;
        rot.write_batch(b, 0).unwrap();
        batches += 1;
    }
    rot.finish(Summary::default()).unwrap();
    let log = log.lock().unwrap().clone();
    let c = closed(&log);
    // Every file but the last was closed once it held 1 MiB, not much later (a batch's blocks).
    for (path, _, bytes) in &c[..c.len() - 1] {
        assert!((1 << 20..3 << 20).contains(bytes), "{}: {bytes} bytes", path.display());
    }
    assert_eq!(c.iter().map(|(_, e, _)| e).sum::<u64>(), fed, "every event in one file");
    let deleted: Vec<PathBuf> = log
        .iter()
        .filter_map(|e| match e {
            latscope_flight::RotateEvent::Deleted { path } => Some(path.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted.len(), c.len() - 3, "--keep 3");
    let left: Vec<PathBuf> = latscope_flight::files::list(dir.path(), latscope_flight::files::ROTATE_PREFIX)
        .into_iter()
        .map(|l| l.path)
        .collect();
    assert_eq!(left, c[c.len() - 3..].iter().map(|(p, _, _)| p.clone()).collect::<Vec<_>>(), "the newest 3");
    for (path, events, bytes) in &c[c.len() - 3..] {
        let mut r = TraceReader::open(path).unwrap();
        let b = r.read_all().unwrap();
        assert!(r.warnings().is_empty(), "{}: {:?}", path.display(), r.warnings());
        assert_eq!((b.len() as u64, r.summary().unwrap().events), (*events, *events));
        assert_eq!(std::fs::metadata(path).unwrap().len(), *bytes);
    }
}

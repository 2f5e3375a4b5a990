//! The flight recorder on the probes, with real workloads of known behaviour: rare stalls of a
//! known length under steady background I/O, and a percentile and an error rate that cross
//! their thresholds at a known moment. Root and BPF.

use latscope_flight::{DumpReport, FlightEvent, FlightOptions, FlightRecorder, Outcome, RingSize, Trigger};
use latscope_live::{Recorder, RecorderOptions, SessionBuilder};
use latscope_trace::TraceReader;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MS: u64 = 1_000_000;

/// A Python workload that names itself `comm` first (prctl), then runs `body`.
fn python(comm: &str, body: &str) -> Command {
    let code = format!("import ctypes, os, sys, time\nctypes.CDLL(None).prctl(15, b'{comm}', 0, 0, 0)\n{body}\n");
    let mut c = Command::new("python3");
    c.arg("-c").arg(code).stdout(Stdio::piped());
    c
}

type Events = Arc<Mutex<Vec<FlightEvent>>>;

/// Record for `secs` with `opts` while `workloads` run (started once the probes are attached);
/// returns the flight recorder's events and the workloads' standard output lines.
fn record(
    opts: FlightOptions,
    comms: &[&str],
    why_above: Option<u64>,
    secs: u64,
    workloads: Vec<Command>,
) -> (Vec<FlightEvent>, Vec<String>) {
    let events: Events = Arc::default();
    let e = events.clone();
    let comms: Vec<String> = comms.iter().map(|s| s.to_string()).collect();
    let (started, wait) = std::sync::mpsc::channel();
    // A session stays on the thread that started it (its probes are not Send).
    let rec = std::thread::spawn(move || {
        let session = SessionBuilder::new().comms(comms).why(why_above).start().expect("probes");
        let ring =
            FlightRecorder::start(session.header(), opts, "test", move |x| e.lock().unwrap().push(x.clone())).unwrap();
        let ropts = RecorderOptions { duration: Some(Duration::from_secs(secs)), ..Default::default() };
        let rec = Recorder::new(session, ring, ropts);
        started.send(()).unwrap();
        rec.run(|_| {}).unwrap()
    });
    wait.recv().unwrap();
    let mut children: Vec<_> = workloads.into_iter().map(|mut c| c.spawn().unwrap()).collect();
    let mut lines = Vec::new();
    for c in &mut children {
        let out = c.stdout.take().unwrap();
        lines.extend(std::io::BufReader::new(out).lines().map_while(Result::ok));
        c.wait().unwrap();
    }
    let r = rec.join().unwrap();
    assert_eq!(r.stats.lost, 0, "events lost");
    let ev = events.lock().unwrap().clone();
    (ev, lines)
}

fn done(events: &[FlightEvent]) -> Vec<DumpReport> {
    events.iter().filter_map(|e| if let FlightEvent::Done(r) = e { Some(r.clone()) } else { None }).collect()
}

#[test]
fn every_stall_is_in_a_dump_with_the_seconds_before_it_and_its_breakdown_and_nothing_else_is_written() {
    if !latscope_testkit::require_bpf("every_stall_is_in_a_dump_...")
        || !latscope_testkit::require_python("every_stall_is_in_a_dump_...", &["ctypes"])
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut o = FlightOptions::new(dir.path(), RingSize::parse("5s").unwrap());
    o.triggers.push(Trigger::parse("stall: evt.latency > 200ms and proc.name = lsflt_stall", "t1").unwrap());
    o.before = Some(Duration::from_secs(2));
    o.after = Duration::from_secs(1);
    o.min_gap = Duration::from_secs(1);
    // Steady background I/O: a 4 KiB write and an fsync every 10 ms, for 10 s.
    let bg = python(
        "lsflt_bg",
        &format!(
            "f = os.open('{}/bg', os.O_WRONLY | os.O_CREAT, 0o600)\nend = time.monotonic() + 10\n\
             while time.monotonic() < end:\n    os.write(f, b'x' * 4096); os.fsync(f); time.sleep(0.01)",
            data.path().display()
        ),
    );
    // Two stalls of 300 ms, at moments the recorder does not know: 3.5 s and 7 s in (it waits
    // in calls of 100 ms, too short to fire).
    let stall = python(
        "lsflt_stall",
        "def wait(s):\n    for _ in range(int(s * 10)): time.sleep(0.1)\n\
         wait(3.5)\nprint(time.monotonic_ns(), flush=True)\ntime.sleep(0.3)\nwait(3.2)\n\
         print(time.monotonic_ns(), flush=True)\ntime.sleep(0.3)\nwait(2)",
    );
    let (events, lines) = record(o, &["lsflt_bg", "lsflt_stall"], Some(100 * MS), 11, vec![bg, stall]);
    let stalls: Vec<u64> = lines.iter().filter_map(|l| l.trim().parse().ok()).collect();
    assert_eq!(stalls.len(), 2, "{lines:?}");
    let d = done(&events);
    assert_eq!(d.len(), 2, "one dump per stall: {events:?}");
    let written: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(written.len(), 2, "nothing else written: {written:?}");
    for (r, &began) in d.iter().zip(&stalls) {
        let mut rd = TraceReader::open(&r.path).unwrap();
        let b = rd.read_all().unwrap();
        assert!(rd.warnings().is_empty() && rd.summary().is_some(), "{:?}", rd.warnings());
        assert_eq!(rd.header().flight.as_ref().unwrap().trigger, "stall");
        let slow: Vec<usize> =
            (0..b.len()).filter(|&i| b.comm.get(i) == "lsflt_stall" && b.lat[i] >= 290 * MS).collect();
        assert_eq!(slow.len(), 1, "{}: the stall, once", r.path.display());
        let i = slow[0];
        assert!(b.ts[i] >= began, "the stall that began at {began}");
        // Its breakdown: a sleep is time until a timer.
        let parts = [
            b.why_cpu[i],
            b.why_runq[i],
            b.why_io[i],
            b.why_lock[i],
            b.why_ipc[i],
            b.why_timer[i],
            b.why_fault[i],
            b.why_other[i],
            b.why_unknown[i],
        ];
        assert_eq!(parts.iter().sum::<u64>(), b.lat[i], "the parts add up to the latency");
        assert!(b.why_timer[i] >= 250 * MS, "{parts:?}");
        // The seconds before it: the background's fsyncs from 2 s before the stall ended on.
        let end = b.end(i);
        let bg_first = (0..b.len()).filter(|&j| b.comm.get(j) == "lsflt_bg").map(|j| b.ts[j]).min().unwrap();
        assert!(bg_first <= end - 1800 * MS, "background from {} ms before", (end - bg_first) / MS);
        let bg_last = (0..b.len()).filter(|&j| b.comm.get(j) == "lsflt_bg").map(|j| b.ts[j]).max().unwrap();
        assert!(bg_last >= end + 800 * MS, "and the second after");
    }
}

#[test]
fn percentile_and_rate_triggers_fire_once_the_workload_crosses_them_and_not_before() {
    if !latscope_testkit::require_bpf("percentile_and_rate_triggers_...")
        || !latscope_testkit::require_python("percentile_and_rate_triggers_...", &["ctypes"])
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut o = FlightOptions::new(dir.path(), RingSize::parse("4s").unwrap());
    o.triggers.push(Trigger::parse("p99: p99 of (proc.name = lsflt_pct) over 2s > 50ms", "t1").unwrap());
    o.triggers.push(Trigger::parse("errs: errors of (proc.name = lsflt_err) > 100/s", "t2").unwrap());
    o.after = Duration::from_millis(500);
    o.min_gap = Duration::ZERO;
    // Instant calls (getppid) and 100 ms ones (select timing out): 0.5 % slow for 4 s (p99 is
    // a few us), then 3 % (p99 is 100 ms).
    let pct = python(
        "lsflt_pct",
        "import select\n\
         def phase(every, secs):\n    end = time.monotonic() + secs\n    i = 0\n\
         \x20   while time.monotonic() < end:\n        if i % every == 0:\n            select.select([], [], [], 0.1)\n\
         \x20       else:\n            os.getppid()\n        i += 1\n\
         phase(200, 4)\nprint(time.monotonic_ns(), flush=True)\nphase(33, 4)",
    );
    // Failed stat calls: at most 50 a second for 4 s, then hundreds.
    let err = python(
        "lsflt_err",
        "def phase(n, pause, secs):\n    end = time.monotonic() + secs\n    while time.monotonic() < end:\n\
         \x20       for _ in range(n):\n            try: os.stat('/nonexistent-latscope')\n            except OSError: pass\n\
         \x20       time.sleep(pause)\n\
         phase(1, 0.02, 4)\nprint(time.monotonic_ns(), flush=True)\nphase(50, 0.05, 4)",
    );
    let (events, lines) = record(o, &["lsflt_pct", "lsflt_err"], None, 10, vec![pct, err]);
    let crossed: Vec<u64> = lines.iter().filter_map(|l| l.trim().parse().ok()).collect();
    assert_eq!(crossed.len(), 2, "{lines:?}");
    let fired = |name: &str| -> Vec<u64> {
        events
            .iter()
            .filter_map(|e| match e {
                FlightEvent::Fired { trigger, at_ns, outcome, .. } if trigger == name => {
                    assert!(!matches!(outcome, Outcome::Failed(_)), "{outcome}");
                    Some(*at_ns)
                }
                _ => None,
            })
            .collect()
    };
    // The children's lines in order: the percentile workload's crossing, then the errors'.
    for (name, at) in [("p99", crossed[0]), ("errs", crossed[1])] {
        let f = fired(name);
        assert!(!f.is_empty(), "{name} never fired: {events:?}");
        assert!(f.iter().all(|&t| t >= at), "{name} fired before its workload crossed it: {f:?} vs {at}");
        assert!(f[0] <= at + 3_000 * MS, "{name} fired late: {} ms after", (f[0] - at) / MS);
    }
}

//! One writer and many readers at once (threads and processes), and `kill -9` of a writer in the
//! middle of its work. Child processes are this test binary run again with `STORE_CHILD` set
//! (see [`child_process`]).

use latscope_hist::Histogram;
use latscope_store::{kind, unit, Hour, HourlyWriter, SeriesId, SeriesSpec, Store};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Series every writer writes to; each flush adds [`PER_INTERVAL`] values to each of them in one
/// transaction, so any snapshot must show the same count in all.
const SERIES: usize = 24;
const PER_INTERVAL: u64 = 300;
/// The writers move to the next hour every this many intervals.
const INTERVALS_PER_HOUR: u64 = 25;

fn base() -> Hour {
    Hour::from_unix_secs(1_700_000_000)
}

fn specs() -> Vec<SeriesSpec> {
    (0..SERIES)
        .map(|k| {
            let mut s = SeriesSpec::new(format!("s{k:02}"), kind::MICROBENCH, unit::NANOSECONDS);
            s.host = "h".into();
            s
        })
        .collect()
}

/// The values of interval `i` for series `k`: spread over many buckets so that merges do real work.
fn interval_hist(i: u64, k: usize) -> Histogram {
    (0..PER_INTERVAL).map(|j| 1_000 + ((i * PER_INTERVAL + j) * 7_919 + k as u64 * 104_729) % 20_000_000).collect()
}

/// Writes `intervals` intervals (forever if `None`) starting at interval `first`, one flush each;
/// before and after each flush appends `flushing T` / `flushed T` (T = values this writer has
/// flushed, per series) to `progress`.
fn write_intervals(path: &Path, first: u64, intervals: Option<u64>, progress: Option<&Path>) {
    let mut w = HourlyWriter::new(Store::open(path).unwrap(), Duration::from_secs(3600));
    let ids: Vec<SeriesId> = specs().iter().map(|s| w.series(s).unwrap()).collect();
    let mut log = progress.map(|p| std::fs::OpenOptions::new().create(true).append(true).open(p).unwrap());
    let mut i = first;
    while intervals.is_none_or(|n| i < first + n) {
        for (k, &id) in ids.iter().enumerate() {
            w.add(id, base().plus((i / INTERVALS_PER_HOUR) as i64), &interval_hist(i, k));
        }
        let total = (i + 1 - first) * PER_INTERVAL;
        if let Some(f) = log.as_mut() {
            writeln!(f, "flushing {total}").unwrap();
        }
        w.flush().unwrap();
        if let Some(f) = log.as_mut() {
            writeln!(f, "flushed {total}").unwrap();
        }
        i += 1;
    }
}

/// Counts per series in one snapshot; panics unless all are equal (a flush is all or nothing).
fn counts_in_snapshot(s: &Store) -> u64 {
    let series = s.series().unwrap();
    let counts: Vec<u64> = series.iter().map(|s| s.count).collect();
    if counts.is_empty() {
        return 0;
    }
    assert!(counts.iter().all(|&c| c == counts[0]), "a snapshot shows part of a flush: {counts:?}");
    assert_eq!(counts[0] % PER_INTERVAL, 0, "{counts:?}");
    counts[0]
}

/// Reads until `stop` exists; returns the distinct totals seen (each read checked for consistency).
fn read_until(path: &Path, stop: &Path) -> Vec<u64> {
    let s = Store::open_read_only(path).unwrap();
    let mut seen: Vec<u64> = Vec::new();
    loop {
        let done = stop.exists();
        let total = counts_in_snapshot(&s);
        assert!(seen.last().is_none_or(|&l| l <= total), "the count went down: {seen:?} then {total}");
        if seen.last() != Some(&total) {
            seen.push(total);
        }
        // The latest hours come from one snapshot too: every series at the same hour and count.
        let latest = s.latest_all().unwrap();
        if let Some(first) = latest.first() {
            assert!(latest.iter().all(|h| h.hour == first.hour && h.histogram.count() == first.histogram.count()));
        }
        if done {
            return seen;
        }
    }
}

/// Entry point of the child processes (does nothing in a normal test run).
#[test]
fn child_process() {
    let Ok(role) = std::env::var("STORE_CHILD") else { return };
    let path = PathBuf::from(std::env::var("STORE_PATH").unwrap());
    match role.as_str() {
        "writer" => {
            let first: u64 = std::env::var("STORE_FIRST").unwrap().parse().unwrap();
            let n = std::env::var("STORE_INTERVALS").ok().map(|s| s.parse().unwrap());
            let progress = std::env::var("STORE_PROGRESS").ok().map(PathBuf::from);
            write_intervals(&path, first, n, progress.as_deref());
        }
        "reader" => {
            let stop = PathBuf::from(std::env::var("STORE_STOP").unwrap());
            let seen = read_until(&path, &stop);
            std::fs::write(std::env::var("STORE_REPORT").unwrap(), format!("{}", seen.len())).unwrap();
        }
        other => panic!("unknown child role {other}"),
    }
}

fn spawn(role: &str, env: &[(&str, String)]) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    // Its full name in the test binary: the module path without the crate's name.
    c.args([
        "--exact",
        concat!(module_path!(), "::child_process").split_once("::").unwrap().1,
        "--nocapture",
        "--test-threads=1",
    ])
    .env("STORE_CHILD", role);
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdout(Stdio::null()).spawn().unwrap()
}

fn wait_ok(mut c: Child, what: &str) {
    let status = c.wait().unwrap();
    assert!(status.success(), "{what} failed: {status}");
}

#[test]
fn readers_in_threads_see_whole_flushes_while_a_writer_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let stop = dir.path().join("stop");
    Store::open(&path).unwrap();
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || read_until(&path, &stop))
        })
        .collect();
    write_intervals(&path, 0, Some(120), None);
    std::fs::write(&stop, b"").unwrap();
    for r in readers {
        let seen = r.join().unwrap();
        assert_eq!(*seen.last().unwrap(), 120 * PER_INTERVAL, "the last read sees everything");
    }
    let s = Store::open_read_only(&path).unwrap();
    assert_eq!(s.verify().unwrap().values, 120 * PER_INTERVAL * SERIES as u64);
}

#[test]
fn readers_in_processes_see_whole_flushes_while_a_writer_process_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let stop = dir.path().join("stop");
    Store::open(&path).unwrap();
    let p = path.display().to_string();
    let readers: Vec<(Child, PathBuf)> = (0..2)
        .map(|k| {
            let report = dir.path().join(format!("report{k}"));
            let env = [
                ("STORE_PATH", p.clone()),
                ("STORE_STOP", stop.display().to_string()),
                ("STORE_REPORT", report.display().to_string()),
            ];
            (spawn("reader", &env), report)
        })
        .collect();
    let writer =
        spawn("writer", &[("STORE_PATH", p.clone()), ("STORE_FIRST", "0".into()), ("STORE_INTERVALS", "150".into())]);
    wait_ok(writer, "writer");
    std::fs::write(&stop, b"").unwrap();
    for (r, report) in readers {
        wait_ok(r, "reader");
        let distinct: usize = std::fs::read_to_string(report).unwrap().parse().unwrap();
        assert!(distinct >= 1);
    }
    let s = Store::open_read_only(&path).unwrap();
    assert_eq!(counts_in_snapshot(&s), 150 * PER_INTERVAL);
    assert_eq!(s.verify().unwrap().hours, (150 / INTERVALS_PER_HOUR) * SERIES as u64);
}

fn progress_lines(p: &Path) -> Vec<(bool, u64)> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (what, n) = l.split_once(' ')?;
            Some((what == "flushed", n.parse().ok()?))
        })
        .collect()
}

#[test]
fn kill_9_of_a_writer_loses_at_most_the_current_interval_and_never_corrupts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let p = path.display().to_string();
    let mut stored = 0u64; // values per series in the store so far
    let mut next_interval = 0u64;
    // Kill after different numbers of flushes and at different moments within an interval.
    for (round, (flushes, delay_us)) in
        [(2u64, 0u64), (5, 700), (9, 1_300), (3, 2_900), (14, 4_100), (6, 250)].into_iter().enumerate()
    {
        let progress = dir.path().join(format!("progress{round}"));
        let child = spawn(
            "writer",
            &[
                ("STORE_PATH", p.clone()),
                ("STORE_FIRST", next_interval.to_string()),
                ("STORE_PROGRESS", progress.display().to_string()),
            ],
        );
        while progress_lines(&progress).iter().filter(|l| l.0).count() < flushes as usize {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_micros(delay_us));
        let mut child = child;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let lines = progress_lines(&progress);
        let flushed = lines.iter().rev().find(|l| l.0).map_or(0, |l| l.1);
        let attempted = lines.last().map_or(0, |l| l.1);
        // Reopen as the next writer would, then check every page and every histogram.
        let s = Store::open(&path).unwrap();
        let report = s.verify().unwrap();
        let now = counts_in_snapshot(&s) - stored;
        assert!(
            now == flushed || now == attempted,
            "round {round}: store gained {now} values per series; the writer had flushed {flushed} \
             and was flushing {attempted}"
        );
        assert_eq!(report.values, (stored + now) * SERIES as u64, "round {round}");
        stored += now;
        next_interval += now / PER_INTERVAL;
        // What the store holds is exactly intervals 0..next_interval.
        let ids: Vec<SeriesId> = s.series().unwrap().iter().map(|s| s.id).collect();
        let mut want = Histogram::new();
        for i in 0..next_interval {
            want.merge(&interval_hist(i, 3));
        }
        assert_eq!(s.merged(ids[3], base()..base().plus(1000)).unwrap(), want, "round {round}");
    }
    assert!(stored > 0);
}

//! The store's behaviour on intact files: merging, reading, series, retention, the writer.

use latscope_hist::Histogram;
use latscope_store::{kind, unit, Hour, HourlyWriter, OpenOptions, SeriesId, SeriesSpec, Store, StoreError, HOUR_SECS};
use std::time::{Duration, SystemTime};

fn spec(name: &str) -> SeriesSpec {
    let mut s = SeriesSpec::new(name, kind::MICROBENCH, unit::NANOSECONDS);
    s.host = "testhost".into();
    s
}

fn hist(values: impl IntoIterator<Item = u64>) -> Histogram {
    values.into_iter().collect()
}

/// An hour some days ago, so that tests do not depend on the clock beyond "now is after 2001".
fn base() -> Hour {
    Hour::from_unix_secs(1_000_000_000)
}

#[test]
fn merging_into_an_hour_adds_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path().join("s.db")).unwrap();
    let a = s.ensure_series(&spec("a")).unwrap();
    let b = s.ensure_series(&spec("b")).unwrap();
    let (h1, h2) = (hist([1, 2, 3, 1_000_000]), hist([5, 7_000]));
    s.merge(&[(a, base(), &h1), (b, base(), &h2)]).unwrap();
    s.merge(&[(a, base(), &h2), (a, base().next(), &h1), (b, base(), &Histogram::new())]).unwrap();

    let mut want = h1.clone();
    want.merge(&h2);
    let hours = s.hours(a, base()..base().plus(5)).unwrap();
    assert_eq!(hours.len(), 2);
    assert_eq!((hours[0].series, hours[0].hour, &hours[0].histogram), (a, base(), &want));
    assert_eq!((hours[1].hour, &hours[1].histogram), (base().next(), &h1));
    // Ranges are half-open.
    assert_eq!(s.hours(a, base()..base().next()).unwrap().len(), 1);
    assert!(s.hours(a, base().plus(2)..base().plus(9)).unwrap().is_empty());
    assert_eq!(s.latest(a).unwrap().unwrap().hour, base().next());
    assert_eq!(s.latest(b).unwrap().unwrap().histogram, h2);
    let latest: Vec<(SeriesId, Hour)> = s.latest_all().unwrap().iter().map(|h| (h.series, h.hour)).collect();
    assert_eq!(latest, vec![(a, base().next()), (b, base())]);
    let mut all = want.clone();
    all.merge(&h1);
    assert_eq!(s.merged(a, base()..base().plus(2)).unwrap(), all);
    assert_eq!(s.hours_all(base()..base().next()).unwrap().len(), 2);

    let stats = s.hour_stats(a, base()..base().plus(2)).unwrap();
    assert_eq!(stats.len(), 2);
    assert_eq!((stats[0].count, stats[0].sum, stats[0].min, stats[0].max), (6, 1_007_011, 1, 1_000_000));
    let listed = s.series().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!((listed[0].spec.name.as_str(), listed[0].hours, listed[0].count), ("a", 2, 10));
    assert_eq!((listed[0].first_hour, listed[0].last_hour), (Some(base()), Some(base().next())));
    assert_eq!((listed[1].hours, listed[1].count), (1, 2));
    assert_eq!(s.verify().unwrap().values, 12);
}

#[test]
fn series_metadata_round_trips_and_the_last_declaration_wins() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let mut s = Store::open(&path).unwrap();
    let mut sp = spec("read-4k");
    sp.description = "random 4 KiB reads".into();
    sp.params.insert("file_size".into(), 268_435_456u64.into());
    sp.params.insert("direct".into(), false.into());
    let id = s.ensure_series(&sp).unwrap();
    assert_eq!(s.series_by_id(id).unwrap().spec, sp);
    assert_eq!(s.series_by_id(id).unwrap().first_hour, None);
    sp.params.insert("file_size".into(), 1024u64.into());
    sp.unit = unit::PICOSECONDS.into();
    assert_eq!(s.ensure_series(&sp).unwrap(), id, "same host and name: same series");
    let mut other_host = sp.clone();
    other_host.host = "elsewhere".into();
    let other = s.ensure_series(&other_host).unwrap();
    assert_ne!(other, id);
    drop(s);
    let r = Store::open_read_only(&path).unwrap();
    assert_eq!(r.find_series("testhost", "read-4k").unwrap().unwrap().spec, sp);
    assert_eq!(r.find_series("elsewhere", "read-4k").unwrap().unwrap().id, other);
    assert!(r.find_series("testhost", "nope").unwrap().is_none());
    assert!(matches!(r.series_by_id(SeriesId(999)), Err(StoreError::NoSuchSeries { id: 999, .. })));
    let json = serde_json::to_value(r.series().unwrap()).unwrap();
    assert_eq!(json[0]["params"]["file_size"], 1024);
    assert_eq!(json[0]["name"], "read-4k");
}

#[test]
fn invalid_series_and_unknown_ids_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path().join("s.db")).unwrap();
    for bad in ["", "a\nb", &"x".repeat(300)] {
        assert!(matches!(s.ensure_series(&spec(bad)), Err(StoreError::InvalidSeries(_))), "{bad:?}");
    }
    let id = s.ensure_series(&spec("ok")).unwrap();
    let h = hist([1]);
    let e = s.merge(&[(id, base(), &h), (SeriesId(77), base(), &h)]).unwrap_err();
    assert!(matches!(e, StoreError::NoSuchSeries { id: 77, .. }), "{e}");
    // The failed merge was one transaction: nothing of it stayed.
    assert!(s.latest(id).unwrap().is_none());
}

#[test]
fn read_only_stores_refuse_writes_and_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let e = Store::open_read_only(&path).unwrap_err();
    assert!(matches!(e, StoreError::Io { .. }) && e.to_string().contains("s.db"), "{e}");
    assert!(!path.exists(), "a read-only open must not create the file");
    Store::open(&path).unwrap();
    let mut r = Store::open_read_only(&path).unwrap();
    assert!(r.is_read_only());
    let e = r.ensure_series(&spec("a")).unwrap_err();
    assert!(matches!(e, StoreError::ReadOnly { .. }), "{e}");
    assert!(e.to_string().contains("read-only") && e.to_string().contains("s.db"), "{e}");
    assert!(matches!(r.merge(&[]), Err(StoreError::ReadOnly { .. })));
    assert!(matches!(r.drop_before(base()), Err(StoreError::ReadOnly { .. })));
}

#[test]
fn an_empty_file_becomes_a_store_only_when_opened_for_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.db");
    std::fs::write(&path, b"").unwrap();
    let e = Store::open_read_only(&path).unwrap_err();
    assert!(matches!(e, StoreError::NotAStore { .. }) && e.to_string().contains("empty"), "{e}");
    let mut s = Store::open(&path).unwrap();
    s.ensure_series(&spec("a")).unwrap();
    drop(s);
    assert_eq!(Store::open_read_only(&path).unwrap().series().unwrap().len(), 1);
}

#[test]
fn retention_drops_hours_older_than_n_days() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path().join("s.db")).unwrap();
    let id = s.ensure_series(&spec("a")).unwrap();
    let now = Hour::from_unix_secs(1_700_000_000);
    let h = hist([10]);
    // One histogram per hour over the last 5 days.
    let items: Vec<(SeriesId, Hour, &Histogram)> = (0..5 * 24).map(|k| (id, now.plus(-k), &h)).collect();
    s.merge(&items).unwrap();
    assert_eq!(s.retention_days().unwrap(), None);
    assert_eq!(s.prune(now.start()).unwrap(), 0, "no retention: everything is kept");
    s.set_retention_days(Some(2)).unwrap();
    assert_eq!(s.retention_days().unwrap(), Some(2));
    // Kept: the current hour and the 48 before it.
    assert_eq!(s.prune(now.start() + Duration::from_secs(1800)).unwrap(), 5 * 24 - 49);
    let left = s.hours(id, now.plus(-1000)..now.next()).unwrap();
    assert_eq!((left.len(), left[0].hour), (49, now.plus(-48)));
    s.set_retention_days(None).unwrap();
    assert_eq!(s.retention_days().unwrap(), None);
    assert_eq!(s.drop_before(now).unwrap(), 48);
}

#[test]
fn writer_accumulates_per_hour_and_flushes_everything_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let mut w = HourlyWriter::new(Store::open(&path).unwrap(), Duration::from_secs(3600));
    let a = w.series(&spec("a")).unwrap();
    let t = base().start() + Duration::from_secs(HOUR_SECS as u64 - 1);
    w.record(a, t, 100);
    w.record(a, t + Duration::from_secs(1), 200); // the next hour
    w.add(a, base(), &hist([300, 400]));
    assert_eq!(w.pending_values(), 4);
    assert_eq!(w.flush_if_due().unwrap(), None, "the interval has not passed");
    let stats = w.flush().unwrap();
    assert_eq!((stats.histograms, stats.values), (2, 4));
    assert_eq!(w.pending_values(), 0);
    assert_eq!(w.flush().unwrap().values, 0, "nothing is flushed twice");
    let r = Store::open_read_only(&path).unwrap();
    let hours = r.hours(a, base()..base().plus(2)).unwrap();
    assert_eq!(hours[0].histogram, hist([100, 300, 400]));
    assert_eq!(hours[1].histogram, hist([200]));
    let mut due = HourlyWriter::new(Store::open(&path).unwrap(), Duration::ZERO);
    due.record(a, t, 1);
    assert_eq!(due.flush_if_due().unwrap().map(|s| s.values), Some(1));
    // Values left in a dropped writer are flushed by its drop.
    due.record(a, t, 2);
    drop(due);
    assert_eq!(r.latest(a).unwrap().unwrap().histogram.count(), 1);
    assert_eq!(r.hours(a, base()..base().next()).unwrap()[0].histogram.count(), 5);
}

#[test]
fn a_failed_flush_keeps_its_values_for_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let quick = OpenOptions { busy_timeout: Duration::from_millis(50), ..OpenOptions::default() };
    let mut w = HourlyWriter::new(Store::open_with(&path, &quick).unwrap(), Duration::ZERO);
    let a = w.series(&spec("a")).unwrap();
    w.add(a, base(), &hist([1, 2, 3]));
    // Another connection holds the write lock.
    let blocker = rusqlite::Connection::open(&path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let e = w.flush().unwrap_err();
    assert!(matches!(e, StoreError::Busy { .. }), "{e}");
    assert!(e.to_string().contains("locked by another writer"), "{e}");
    assert_eq!(w.pending_values(), 3);
    blocker.execute_batch("ROLLBACK").unwrap();
    w.add(a, base(), &hist([4]));
    assert_eq!(w.flush().unwrap().values, 4);
    assert_eq!(w.store().latest(a).unwrap().unwrap().histogram, hist([1, 2, 3, 4]));
}

#[test]
fn writers_on_separate_connections_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let id = Store::open(&path).unwrap().ensure_series(&spec("shared")).unwrap();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut s = Store::open(&path).unwrap();
                for i in 0..50u64 {
                    s.merge(&[(id, base(), &hist([t * 1000 + i]))]).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let h = Store::open_read_only(&path).unwrap().latest(id).unwrap().unwrap().histogram;
    assert_eq!(h.count(), 200);
    assert_eq!(h.sum(), (0..4u128).map(|t| 50 * t * 1000 + (0..50).sum::<u128>()).sum::<u128>());
}

#[test]
fn recordings_declare_a_series_per_syscall_device_and_class() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path().join("s.db")).unwrap();
    let specs = [
        SeriesSpec::syscall("pread64", true),
        SeriesSpec::block("vda"),
        SeriesSpec::class("pg", "proc.name = postgres"),
    ];
    let ids: Vec<SeriesId> = specs.iter().map(|sp| s.ensure_series(sp).unwrap()).collect();
    let listed = s.series().unwrap();
    assert_eq!(listed.len(), 3);
    for (id, sp) in ids.iter().zip(&specs) {
        let got = s.series_by_id(*id).unwrap().spec;
        assert_eq!(&got, sp);
        assert_eq!(got.unit, unit::NANOSECONDS);
    }
    assert_eq!(specs[0].kind, kind::SYSCALL);
    assert_eq!(specs[0].params["io"], true);
    assert_eq!(specs[1].kind, kind::BLOCK);
    assert_eq!(specs[2].params["filter"], "proc.name = postgres");
}

#[test]
fn hours_are_utc_hours() {
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(999_997_200 + 1234);
    assert_eq!(Hour::containing(t), base());
    assert_eq!(base().to_string(), "2001-09-09T01:00Z");
}

/// A world-writable sticky directory (as /tmp) and a precious file outside it.
fn sticky() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let precious = dir.path().join("precious");
    std::fs::write(&precious, b"keep me").unwrap();
    (dir, shared, precious)
}

fn plant(target: &std::path::Path, link: &std::path::Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
    // Owned by another user, as one would plant it (only possible as root).
    let _ = std::os::unix::fs::lchown(link, Some(65534), Some(65534));
}

/// Links planted where a store will be opened (the store's name, or the journal, WAL and
/// shared-memory files SQLite creates beside it) are refused with both names, and nothing is
/// created or written through them: a dangling link's target stays missing, a link to
/// /dev/zero makes no /dev/zero-journal, a hard link to a precious file leaves it intact.
#[test]
fn links_planted_at_a_store_or_its_side_files_are_refused() {
    let (dir, shared, precious) = sticky();
    let missing = dir.path().join("made-by-the-link");
    let zero_side_before: Vec<bool> =
        ["-journal", "-wal", "-shm"].iter().map(|s| std::path::Path::new(&format!("/dev/zero{s}")).exists()).collect();
    plant(&missing, &shared.join("dangling.db"));
    plant(std::path::Path::new("/dev/zero"), &shared.join("zero.db"));
    std::fs::hard_link(&precious, shared.join("hard.db")).unwrap();
    for name in ["dangling.db", "zero.db", "hard.db"] {
        let p = shared.join(name);
        let e = Store::open(&p).map(|_| ()).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, StoreError::UnsafePath(_)), "{name}: {msg}");
        assert!(msg.contains(p.to_str().unwrap()), "{name}: {msg}");
        if name != "hard.db" {
            assert!(msg.contains("symbolic link (to "), "{name}: {msg}");
        }
    }
    // Side files: a store whose journal or WAL name is a planted link.
    for side in ["-journal", "-wal", "-shm"] {
        let p = shared.join(format!("s{side}.db"));
        plant(&missing, &std::path::PathBuf::from(format!("{}{side}", p.display())));
        let e = Store::open(&p).map(|_| ()).unwrap_err();
        assert!(e.to_string().contains(&format!("s{side}.db{side}")), "{side}: {e}");
    }
    // Directly at a device: not a regular file.
    let e = Store::open("/dev/zero").map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("character device"), "{e}");
    assert!(!missing.exists(), "a link's target was created");
    assert_eq!(std::fs::read(&precious).unwrap(), b"keep me");
    let zero_side_after: Vec<bool> =
        ["-journal", "-wal", "-shm"].iter().map(|s| std::path::Path::new(&format!("/dev/zero{s}")).exists()).collect();
    assert_eq!(zero_side_before, zero_side_after, "SQLite created a file beside /dev/zero");
}

/// A directory nobody may write: a read-only bind mount of itself (as root, to whom permissions
/// do not apply), or mode 0555. Undone on drop.
struct ReadOnlyDir {
    dir: std::path::PathBuf,
    mounted: bool,
}

impl ReadOnlyDir {
    fn new(dir: &std::path::Path) -> ReadOnlyDir {
        use std::os::unix::fs::PermissionsExt;
        let sh = |c: &str| std::process::Command::new("sh").arg("-c").arg(c).status().is_ok_and(|s| s.success());
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let d = dir.display();
        let mounted = root && sh(&format!("mount --bind '{d}' '{d}' && mount -o remount,bind,ro '{d}'"));
        if !mounted {
            assert!(!root, "cannot make {d} a read-only mount");
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        ReadOnlyDir { dir: dir.to_path_buf(), mounted }
    }
}

impl Drop for ReadOnlyDir {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if self.mounted {
            let _ = std::process::Command::new("umount").arg(&self.dir).status();
        } else {
            let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o755));
        }
    }
}

#[test]
fn a_store_in_a_read_only_directory_can_be_read() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("ro");
    std::fs::create_dir(&dir).unwrap();
    let path = dir.join("bench.db");
    let id = {
        let mut s = Store::open(&path).unwrap();
        let id = s.ensure_series(&spec("reads")).unwrap();
        s.merge(&[(id, base(), &hist([10, 20, 30]))]).unwrap();
        id
    };
    let listing = |d: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect();
        v.sort();
        v
    };
    let files = listing(&dir);
    let _ro = ReadOnlyDir::new(&dir);
    let s = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.hours(id, base()..base().next()).unwrap()[0].histogram.count(), 3);
    assert_eq!(s.series().unwrap().len(), 1);
    drop(s);
    assert_eq!(listing(&dir), files, "nothing was created next to the store");
}

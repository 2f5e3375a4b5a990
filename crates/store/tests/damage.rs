//! Bad store files: garbage, other databases, other schema versions, altered schemas, truncation,
//! flipped bytes. Each is a clear error naming the file, never a panic, never a wrong histogram.

use latscope_hist::Histogram;
use latscope_store::{kind, unit, Hour, SeriesSpec, Store, StoreError, APPLICATION_ID, SCHEMA_VERSION};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A store with `series` series of `hours` hours each, closed cleanly (the log folded back into
/// the file). Returns every stored histogram by (series name, hour).
fn build(path: &Path, series: usize, hours: i64) -> HashMap<(String, Hour), Histogram> {
    let mut s = Store::open(path).unwrap();
    let base = Hour::from_unix_secs(1_700_000_000);
    let mut all = HashMap::new();
    for k in 0..series {
        let name = format!("series-{k}");
        let id = s.ensure_series(&SeriesSpec::new(&name, kind::MICROBENCH, unit::NANOSECONDS)).unwrap();
        for hr in 0..hours {
            let h: Histogram = (0..500u64).map(|i| 1000 + (i * 7919 + k as u64 * 31 + hr as u64) % 3_000_000).collect();
            s.merge(&[(id, base.plus(hr), &h)]).unwrap();
            all.insert((name.clone(), base.plus(hr)), h);
        }
    }
    drop(s);
    assert!(!latscope_store_wal(path).exists(), "a clean close removes the log");
    all
}

fn latscope_store_wal(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", path.display()))
}

/// Opens (read-only) and reads everything; every histogram returned must be one that was written
/// for that series and hour.
fn read_all(path: &Path, written: &HashMap<(String, Hour), Histogram>) -> Result<usize, StoreError> {
    let s = Store::open_read_only(path)?;
    let mut n = 0;
    for series in s.series()? {
        for h in s.hours(series.id, Hour::from_unix_secs(0)..Hour::from_unix_secs(4_000_000_000))? {
            if let Some(w) = written.get(&(series.spec.name.clone(), h.hour)) {
                assert_eq!(&h.histogram, w, "a damaged file returned a histogram that was never written");
            } else {
                // A flipped byte may rename a series or move an hour; its histogram must still be
                // one that was written.
                assert!(written.values().any(|w| w == &h.histogram), "unknown histogram returned");
            }
            n += 1;
        }
    }
    s.latest_all()?;
    Ok(n)
}

fn assert_names_file(e: &StoreError, path: &Path) {
    let msg = e.to_string();
    assert!(msg.starts_with(&path.display().to_string()), "error does not name the file: {msg}");
}

#[test]
fn garbage_files_are_not_stores() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.db");
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let random: Vec<u8> = (0..10_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let cases: [(&str, &[u8]); 4] = [
        ("random bytes", &random),
        ("text", b"host,series,hour\nweb1,read,0\n"),
        ("short", b"SQLite"),
        ("a trace file", b"\xff\xff\xff\xff\x10\x00\x00\x00ARROW1"),
    ];
    for (what, bytes) in cases {
        std::fs::write(&path, bytes).unwrap();
        for read_only in [true, false] {
            let r = if read_only { Store::open_read_only(&path) } else { Store::open(&path) };
            let e = r.unwrap_err();
            assert!(matches!(e, StoreError::NotAStore { .. }), "{what}: {e}");
            assert_names_file(&e, &path);
            assert!(e.to_string().contains("not an SQLite database"), "{what}: {e}");
        }
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{what}: the file must be left as it was");
    }
    let e = Store::open(dir.path()).unwrap_err();
    assert!(e.to_string().contains("directory"), "{e}");
}

#[test]
fn another_applications_database_is_not_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch("CREATE TABLE users (id INTEGER, name TEXT); INSERT INTO users VALUES (1, 'x');").unwrap();
    drop(c);
    let before = std::fs::read(&path).unwrap();
    let e = Store::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::NotAStore { .. }), "{e}");
    assert_names_file(&e, &path);
    assert!(e.to_string().contains("another application") && e.to_string().contains("users"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "the other database must not be touched");
    // An empty SQLite database is refused by readers (writers make a store of it).
    let empty = dir.path().join("empty-sqlite.db");
    rusqlite::Connection::open(&empty).unwrap().execute_batch("PRAGMA user_version = 0; VACUUM;").unwrap();
    let e = Store::open_read_only(&empty).unwrap_err();
    assert!(e.to_string().contains("no latscope tables"), "{e}");
}

#[test]
fn schema_versions_other_than_this_builds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    build(&path, 1, 1);
    let set_version = |v: i64| {
        rusqlite::Connection::open(&path).unwrap().pragma_update(None, "user_version", v).unwrap();
    };
    set_version(SCHEMA_VERSION + 1);
    for e in [Store::open(&path).unwrap_err(), Store::open_read_only(&path).unwrap_err()] {
        assert!(
            matches!(e, StoreError::NewerSchema { found, supported, .. } if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION),
            "{e}"
        );
        assert_names_file(&e, &path);
        assert!(e.to_string().contains("use a newer latscope"), "{e}");
    }
    set_version(0);
    let e = Store::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::Corrupt { .. }) && e.to_string().contains("schema version 0"), "{e}");
    set_version(SCHEMA_VERSION);
    Store::open(&path).unwrap();
    // The application id is what makes a file a store.
    rusqlite::Connection::open(&path).unwrap().pragma_update(None, "application_id", APPLICATION_ID + 1).unwrap();
    assert!(matches!(Store::open(&path).unwrap_err(), StoreError::NotAStore { .. }));
}

#[test]
fn altered_schemas_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let alterations = [
        ("CREATE TABLE extra (x)", "unexpected table extra"),
        ("CREATE TRIGGER t AFTER INSERT ON hist BEGIN DELETE FROM series; END", "unexpected trigger t"),
        ("CREATE VIEW v AS SELECT * FROM hist", "unexpected view v"),
        ("DROP INDEX hist_by_hour", "index hist_by_hour is missing"),
        ("ALTER TABLE series ADD COLUMN colour TEXT", "table series differs"),
    ];
    for (i, (sql, want)) in alterations.iter().enumerate() {
        let path = dir.path().join(format!("s{i}.db"));
        build(&path, 1, 1);
        rusqlite::Connection::open(&path).unwrap().execute_batch(sql).unwrap();
        for e in [Store::open(&path).unwrap_err(), Store::open_read_only(&path).unwrap_err()] {
            assert!(matches!(e, StoreError::Corrupt { .. }), "{sql}: {e}");
            assert_names_file(&e, &path);
            assert!(e.to_string().contains(want), "{sql}: {e}");
        }
    }
}

#[test]
fn rows_edited_behind_the_stores_back_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let written = build(&path, 2, 2);
    let edits = [
        ("UPDATE hist SET count = count + 1 WHERE rowid = 1", "disagree"),
        ("UPDATE hist SET data = X'00' WHERE rowid = 2", "histogram encoding too short"),
        (
            "UPDATE hist SET data = CAST(substr(data, 1, 10) || X'7F' || substr(data, 12) AS BLOB) WHERE rowid = 2",
            "checksum",
        ),
        ("UPDATE hist SET hour = hour + 1 WHERE rowid = 3", "multiple of 3600"),
        ("UPDATE series SET params = '[1]' WHERE id = 1", "not a JSON object"),
    ];
    for (sql, want) in edits {
        let copy = dir.path().join("edited.db");
        std::fs::copy(&path, &copy).unwrap();
        rusqlite::Connection::open(&copy).unwrap().execute_batch(sql).unwrap();
        let e = read_all(&copy, &written).unwrap_err();
        assert!(matches!(e, StoreError::Corrupt { .. }), "{sql}: {e}");
        assert_names_file(&e, &copy);
        assert!(e.to_string().contains(want), "{sql}: {e}");
        // verify() finds it too.
        assert!(Store::open_read_only(&copy).unwrap().verify().is_err(), "{sql}");
    }
}

#[test]
fn truncated_stores_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let written = build(&path, 4, 12);
    let full = std::fs::read(&path).unwrap();
    assert_eq!(read_all(&path, &written).unwrap(), 48);
    let page = 4096;
    let mut cuts: Vec<usize> = vec![1, 15, 16, 50, 99, 100, 101, 512, page - 1, page, page + 1, full.len() - 1];
    cuts.extend((2..full.len() / page).map(|k| k * page));
    cuts.extend((1..10).map(|k| full.len() * k / 10));
    for cut in cuts {
        let copy = dir.path().join("cut.db");
        std::fs::write(&copy, &full[..cut]).unwrap();
        for read_only in [true, false] {
            let e = if read_only { Store::open_read_only(&copy) } else { Store::open(&copy) }.unwrap_err();
            assert!(matches!(e, StoreError::NotAStore { .. } | StoreError::Corrupt { .. }), "cut at {cut}: {e}");
            assert_names_file(&e, &copy);
            if cut >= 100 {
                assert!(e.to_string().contains("truncated"), "cut at {cut}: {e}");
            }
        }
        assert_eq!(std::fs::read(&copy).unwrap().len(), cut, "a refused file must not be changed");
    }
}

#[test]
fn flipped_bytes_never_panic_nor_yield_histograms_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let written = build(&path, 3, 8);
    let full = std::fs::read(&path).unwrap();
    let (mut errors, mut intact) = (0, 0);
    for at in (0..full.len()).step_by(97) {
        let mut bytes = full.clone();
        bytes[at] ^= 0x5A;
        let copy = dir.path().join("flipped.db");
        std::fs::write(&copy, &bytes).unwrap();
        match read_all(&copy, &written) {
            Ok(_) => intact += 1,
            Err(e) => {
                assert_names_file(&e, &copy);
                errors += 1;
            }
        }
    }
    // Flips in free space and unused parts of pages change nothing that is read.
    assert!(errors > 0 && intact > 0, "{errors} errors, {intact} reads without error");
}

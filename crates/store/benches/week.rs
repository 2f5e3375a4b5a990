//! A week of hourly histograms of 50 series: how fast the store writes and reads them, against
//! the floor of the same SQLite work without histograms (raw inserts and selects of the same
//! blobs, run in the same process). `cargo bench -p latscope-store --bench week`.

use latscope_hist::Histogram;
use latscope_store::{kind, unit, Hour, HourlyWriter, SeriesId, SeriesSpec, Store};
use std::time::{Duration, Instant};

const SERIES: usize = 50;
const HOURS: i64 = 7 * 24;
/// Values per series and hour: one sample every 10 s would be 360; continuous probes record far
/// more. The blob size depends on the buckets used, not on this count.
const VALUES: u64 = 20_000;

fn hour_hist(series: usize, hour: i64) -> Histogram {
    // Two tiers (a cache and a device), a little different every hour.
    let mut x = (series as u64 + 1) * 0x9E37_79B9 + hour as u64;
    let mut h = Histogram::new();
    for _ in 0..VALUES {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        let v = if x % 10 < 3 { 1_500.0 * (1.0 + u) } else { 150_000.0 * (1.0 + 3.0 * u * u) };
        h.record(v as u64);
    }
    h
}

fn per_sec(n: u64, d: Duration) -> String {
    format!("{:.0}", n as f64 / d.as_secs_f64())
}

fn main() {
    let dir = std::env::temp_dir().join(format!("latscope-store-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = Hour::from_unix_secs(1_700_000_000);
    let hists: Vec<Vec<Histogram>> = (0..HOURS).map(|hr| (0..SERIES).map(|s| hour_hist(s, hr)).collect()).collect();
    let rows = (SERIES as u64) * HOURS as u64;
    let blob_bytes: usize = hists.iter().flatten().map(|h| h.to_bytes().len()).sum();

    // The store: one flush per hour of 50 new rows, through the writer.
    let path = dir.join("week.db");
    let t = Instant::now();
    let mut w = HourlyWriter::new(Store::open(&path).unwrap(), Duration::from_secs(10));
    let ids: Vec<SeriesId> = (0..SERIES)
        .map(|s| w.series(&SeriesSpec::new(format!("series-{s:02}"), kind::MICROBENCH, unit::NANOSECONDS)).unwrap())
        .collect();
    for (hr, hs) in hists.iter().enumerate() {
        for (s, h) in hs.iter().enumerate() {
            w.add(ids[s], base.plus(hr as i64), h);
        }
        w.flush().unwrap();
    }
    drop(w);
    let write = t.elapsed();
    let file_bytes = std::fs::metadata(&path).unwrap().len();

    // Steady state: a flush that merges 10 s of values into the current hour of every series.
    let mut w = HourlyWriter::new(Store::open(&path).unwrap(), Duration::from_secs(10));
    let small: Vec<Histogram> = (0..SERIES)
        .map(|s| {
            hour_hist(s, 999).iter().take(40).fold(Histogram::new(), |mut h, (lo, _, c)| {
                h.record_n(lo, c);
                h
            })
        })
        .collect();
    let flushes = 50;
    let t = Instant::now();
    for _ in 0..flushes {
        for (s, h) in small.iter().enumerate() {
            w.add(ids[s], base.plus(HOURS - 1), h);
        }
        w.flush().unwrap();
    }
    let merge = t.elapsed() / flushes;
    drop(w);

    // Reads: every hour of every series decoded (what a week-long dashboard view needs).
    let r = Store::open_read_only(&path).unwrap();
    let t = Instant::now();
    let mut values = 0;
    for &id in &ids {
        for h in r.hours(id, base..base.plus(HOURS)).unwrap() {
            values += h.histogram.count();
        }
    }
    let read = t.elapsed();
    assert_eq!(values, rows * VALUES + flushes as u64 * small.iter().map(Histogram::count).sum::<u64>());
    let t = Instant::now();
    let latest = r.latest_all().unwrap();
    let latest_t = t.elapsed();
    assert_eq!(latest.len(), SERIES);
    let t = Instant::now();
    let mut stats = 0;
    for &id in &ids {
        stats += r.hour_stats(id, base..base.plus(HOURS)).unwrap().len();
    }
    let stats_t = t.elapsed();
    assert_eq!(stats as u64, rows);
    let t = Instant::now();
    let listed = r.series().unwrap();
    let series_t = t.elapsed();
    assert_eq!(listed.len(), SERIES);

    // The floor: the same blobs inserted and selected with plain SQLite, same journal settings.
    let raw_path = dir.join("raw.db");
    let blobs: Vec<Vec<Vec<u8>>> = hists.iter().map(|hs| hs.iter().map(Histogram::to_bytes).collect()).collect();
    let t = Instant::now();
    let mut c = rusqlite::Connection::open(&raw_path).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE hist (series INTEGER NOT NULL, hour INTEGER NOT NULL, data BLOB NOT NULL,
                            PRIMARY KEY (series, hour)) STRICT;",
    )
    .unwrap();
    for (hr, bs) in blobs.iter().enumerate() {
        let tx = c.transaction().unwrap();
        {
            let mut st = tx.prepare_cached("INSERT INTO hist VALUES (?1, ?2, ?3)").unwrap();
            for (s, b) in bs.iter().enumerate() {
                st.execute(rusqlite::params![s as i64, base.plus(hr as i64).start_unix_secs(), b]).unwrap();
            }
        }
        tx.commit().unwrap();
    }
    let raw_write = t.elapsed();
    let t = Instant::now();
    let mut raw_bytes = 0usize;
    for s in 0..SERIES {
        let mut st = c.prepare_cached("SELECT data FROM hist WHERE series = ?1 ORDER BY hour").unwrap();
        let mut q = st.query([s as i64]).unwrap();
        while let Some(row) = q.next().unwrap() {
            raw_bytes += row.get_ref(0).unwrap().as_blob().unwrap().len();
        }
    }
    let raw_read = t.elapsed();
    assert_eq!(raw_bytes, blob_bytes);

    println!(
        "A week of hourly histograms: {SERIES} series x {HOURS} hours = {rows} histograms of {VALUES} values \
         ({:.1} KiB encoded on average; store file {:.1} MiB)\n",
        blob_bytes as f64 / rows as f64 / 1024.0,
        file_bytes as f64 / (1 << 20) as f64
    );
    println!("| operation | store | plain SQLite (same blobs) | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| write a week (one flush per hour of {SERIES} new rows) | {:.0} ms, {} histograms/s | {:.0} ms | {:.2}x |",
        write.as_secs_f64() * 1e3,
        per_sec(rows, write),
        raw_write.as_secs_f64() * 1e3,
        write.as_secs_f64() / raw_write.as_secs_f64()
    );
    println!(
        "| read a week, every histogram decoded | {:.0} ms, {} histograms/s | {:.0} ms (blobs only) | {:.2}x |",
        read.as_secs_f64() * 1e3,
        per_sec(rows, read),
        raw_read.as_secs_f64() * 1e3,
        read.as_secs_f64() / raw_read.as_secs_f64()
    );
    println!(
        "| one flush merging into the current hour of {SERIES} series | {:.2} ms ({:.3} % of a 10 s interval) | | |",
        merge.as_secs_f64() * 1e3,
        merge.as_secs_f64() / 10.0 * 100.0
    );
    println!("| latest hour of every series | {:.2} ms | | |", latest_t.as_secs_f64() * 1e3);
    println!("| hourly count/sum/min/max of a week, all series | {:.2} ms | | |", stats_t.as_secs_f64() * 1e3);
    println!("| series list with extents | {:.2} ms | | |", series_t.as_secs_f64() * 1e3);
    std::fs::remove_dir_all(&dir).unwrap();
}

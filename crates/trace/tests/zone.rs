//! Zone maps: the per-block metadata (events per kind, time, latency and end-time ranges), and
//! reading with `next_batch_pruned`, which skips columns per block but still checks every block.

mod common;

use common::*;
use latscope_event::EventBatch;
use latscope_trace::{
    BlockMeta, Column, ReadOptions, Summary, TraceError, TraceReader, TraceWriter, WriterOptions, KEY_KINDS,
};

/// Three blocks: mixed kinds, syscalls only, block requests only; and an empty one.
fn batches() -> Vec<EventBatch> {
    let mut rng = Rng::new(5);
    let mut v: Vec<EventBatch> = [50, 40, 30, 0].iter().map(|&n| random_batch(&mut rng, n)).collect();
    for (i, k) in v[0].kind.iter_mut().enumerate() {
        *k = (i % 3) as u8;
    }
    v[1].kind.iter_mut().for_each(|k| *k = 0);
    v[2].kind.iter_mut().for_each(|k| *k = 1);
    v
}

fn write(path: &std::path::Path, b: &[EventBatch], zone_maps: bool) {
    let opts = WriterOptions { zone_maps, sync_on_finish: false, ..Default::default() };
    let mut w = TraceWriter::create_with(path, &sample_header(), opts).unwrap();
    for x in b {
        w.write_batch(x, 0).unwrap();
    }
    w.finish(Summary::default()).unwrap();
}

fn metas(path: &std::path::Path) -> Vec<BlockMeta> {
    let mut r = TraceReader::open_projected(path, &[Column::Lat]).unwrap();
    let mut out = Vec::new();
    let mut b = EventBatch::default();
    while let Some(res) = r.next_batch_pruned(&mut b, |m| {
        out.push(m.clone());
        []
    }) {
        res.unwrap();
    }
    out
}

#[test]
fn writer_stores_zone_maps_and_reader_shows_them_before_decoding() {
    let dir = tmpdir("zone-meta");
    let path = dir.join("t.lst");
    let b = batches();
    write(&path, &b, true);
    let m = metas(&path);
    assert_eq!(m.len(), 5, "4 blocks and the summary");
    for (x, meta) in b.iter().zip(&m) {
        if x.is_empty() {
            assert_eq!((meta.kinds, meta.ts_min, meta.lat_min, meta.end_max), (None, None, None, None));
            continue;
        }
        let count = |k| x.kind.iter().filter(|&&y| y == k).count() as u64;
        assert_eq!(meta.kinds, Some([count(0), count(1), count(2)]));
        assert_eq!(meta.ts_min, x.ts.iter().min().copied());
        assert_eq!(meta.ts_max, x.ts.iter().max().copied());
        assert_eq!(meta.lat_min, x.lat.iter().min().copied());
        assert_eq!(meta.lat_max, x.lat.iter().max().copied());
        assert_eq!(meta.end_min, (0..x.len()).map(|i| x.end(i)).min());
        assert_eq!(meta.end_max, (0..x.len()).map(|i| x.end(i)).max());
    }
    assert!(!m[0].only_kind(0) && !m[0].only_kind(1));
    assert!(m[1].only_kind(0) && !m[1].only_kind(1));
    assert!(m[2].only_kind(1) && !m[2].only_kind(0));
    assert!(m[4].summary.is_some());

    // Without zone maps (as before they existed): only the time range; nothing to prune on.
    let old = dir.join("old.lst");
    write(&old, &b, false);
    let m = metas(&old);
    assert!(m.iter().all(|x| x.kinds.is_none() && x.lat_min.is_none() && x.end_max.is_none()));
    assert_eq!(m[1].ts_min, b[1].ts.iter().min().copied());
    assert!(!m[1].only_kind(0));
    let raw = std::fs::read(&old).unwrap();
    assert!(!raw.windows(KEY_KINDS.len()).any(|w| w == KEY_KINDS.as_bytes()));
    // The data is the same.
    let all = |p| TraceReader::open(p).unwrap().read_all().unwrap();
    assert_eq!(all(&path), all(&old));
}

#[test]
fn pruned_columns_are_skipped_per_block_and_the_rest_is_exact() {
    let dir = tmpdir("zone-prune");
    let path = dir.join("t.lst");
    let b = batches();
    write(&path, &b, true);
    let mut r = TraceReader::open_projected(&path, &[Column::Kind, Column::Ts, Column::Lat]).unwrap();
    let mut got = EventBatch::default();
    let mut i = 0;
    // Block 1 (syscalls only): skip kind and ts; the others: skip nothing.
    while let Some(res) =
        r.next_batch_pruned(&mut got, |m| if m.only_kind(0) { vec![Column::Kind, Column::Ts] } else { vec![] })
    {
        res.unwrap();
        assert_eq!(got.len(), b[i].len());
        assert_eq!(got.lat, b[i].lat, "block {i}");
        if i != 1 {
            assert_eq!((&got.kind, &got.ts), (&b[i].kind, &b[i].ts), "block {i}");
        }
        got.check_lengths().unwrap();
        i += 1;
    }
    assert_eq!(i, 4);
    assert!(r.warnings().is_empty());
}

#[test]
fn pruning_still_verifies_every_body_checksum() {
    let dir = tmpdir("zone-crc");
    let path = dir.join("t.lst");
    let b = batches();
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    let mut bounds = vec![w.bytes()];
    for x in &b {
        w.write_batch(x, 0).unwrap();
        bounds.push(w.bytes());
    }
    w.finish(Summary::default()).unwrap();
    // Flip a bit in the last byte of block 1's body: whatever column it belongs to, pruning
    // every column must not hide it.
    let mut data = std::fs::read(&path).unwrap();
    data[bounds[2] as usize - 1] ^= 0x01;
    let bad = dir.join("bad.lst");
    std::fs::write(&bad, &data).unwrap();
    let mut r = TraceReader::open_with(
        &bad,
        ReadOptions { projection: Some(vec![Column::Kind, Column::Lat]), skip_corrupt: true },
    )
    .unwrap();
    let mut got = EventBatch::default();
    let (mut ok, mut errors) = (0, Vec::new());
    while let Some(res) = r.next_batch_pruned(&mut got, |_| Column::ALL) {
        match res {
            Ok(()) => ok += 1,
            Err(e) => errors.push(e),
        }
    }
    assert_eq!(ok, 0, "blocks with every column pruned are verified and passed over, not returned");
    assert_eq!(errors.len(), 1);
    assert!(matches!(errors[0], TraceError::Checksum { block: 1, .. }), "{}", errors[0]);
    assert!(r.summary().is_some());
}

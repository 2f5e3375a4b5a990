//! Zone maps: the per-block metadata (events per kind, time, latency and end-time ranges), and
//! reading with `next_batch_pruned`, which skips columns per block and verifies what it reads.

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

/// Writes `b` as one block each; returns the block boundaries (header end, end of each block).
fn write(path: &std::path::Path, b: &[EventBatch], zone_maps: bool) -> Vec<u64> {
    let opts = WriterOptions { zone_maps, sync_on_finish: false, ..Default::default() };
    let mut w = TraceWriter::create_with(path, &sample_header(), opts).unwrap();
    let mut bounds = vec![w.bytes()];
    for x in b {
        w.write_batch(x, 0).unwrap();
        bounds.push(w.bytes());
    }
    w.finish(Summary::default()).unwrap();
    bounds
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

/// A block read again (`reread_last_block`) comes back whole, with the columns pruned the
/// first time, and is counted once: the statistics and warnings are those of one reading.
#[test]
fn a_block_is_read_again_with_the_columns_it_turned_out_to_need() {
    let dir = tmpdir("zone-reread");
    let path = dir.join("t.lst");
    let b = batches();
    write(&path, &b, true);
    let mut r = TraceReader::open(&path).unwrap();
    assert!(!r.reread_last_block(), "no block read yet");
    let mut got: Vec<EventBatch> = Vec::new();
    let mut out = EventBatch::default();
    let mut prune = true;
    let mut again = 0;
    while let Some(res) = r.next_batch_pruned(&mut out, |_| if prune { vec![Column::Lat, Column::Ts] } else { vec![] })
    {
        res.unwrap();
        if prune && got.len() == 1 {
            // The second block needs them after all: it and those after it are read with them.
            assert!(r.reread_last_block());
            assert!(!r.reread_last_block(), "once per block returned");
            prune = false;
            again += 1;
            continue;
        }
        got.push(out.clone());
    }
    assert_eq!(again, 1);
    assert_eq!(got.len(), 4);
    assert_eq!((&got[0].kind, &got[0].nr, &got[0].pid), (&b[0].kind, &b[0].nr, &b[0].pid));
    assert_eq!(&got[1..], &b[1..]);
    let mut plain = TraceReader::open(&path).unwrap();
    while let Some(res) = plain.next_batch_into(&mut out) {
        res.unwrap();
    }
    assert_eq!(r.stats(), plain.stats());
    assert_eq!(r.summary(), plain.summary());
    assert!(r.warnings().is_empty());
}

/// Block `block`'s body range in `data` and the file offset of each of its buffers' bytes.
fn buffers_of_block(data: &[u8], start: usize) -> Vec<std::ops::Range<usize>> {
    let meta_len = i32::from_le_bytes(data[start + 4..start + 8].try_into().unwrap()) as usize;
    let msg = arrow_ipc::root_as_message(&data[start + 8..start + 8 + meta_len]).unwrap();
    let body = start + 8 + meta_len;
    let rb = msg.header_as_record_batch().unwrap();
    rb.buffers()
        .unwrap()
        .iter()
        .map(|b| body + b.offset() as usize..body + (b.offset() + b.length()) as usize)
        .collect()
}

/// The index of the values buffer of `col` (the data buffer for strings) in a block.
fn values_buffer(path: &std::path::Path, col: Column) -> usize {
    let r = TraceReader::open(path).unwrap();
    let mut n = 0;
    for f in r.arrow_schema().fields() {
        let utf8 = f.data_type() == &arrow_schema::DataType::Utf8;
        if f.name() == col.name() {
            return n + if utf8 { 2 } else { 1 };
        }
        n += if utf8 { 3 } else { 2 };
    }
    panic!("no column {col}")
}

/// Reads `path` projected on kind and lat, pruning what `prune` says: (blocks returned, errors).
fn read_lat(path: &std::path::Path, prune: &[Column]) -> (Vec<EventBatch>, Vec<TraceError>) {
    let opts = ReadOptions { projection: Some(vec![Column::Kind, Column::Lat]), skip_corrupt: true };
    let mut r = TraceReader::open_with(path, opts).unwrap();
    let mut got = EventBatch::default();
    let (mut ok, mut errors) = (Vec::new(), Vec::new());
    while let Some(res) = r.next_batch_pruned(&mut got, |_| prune) {
        match res {
            Ok(()) => ok.push(got.clone()),
            Err(e) => errors.push(e),
        }
    }
    assert!(r.summary().is_some());
    (ok, errors)
}

/// With per-buffer checksums a projected read fetches and verifies only the buffers it decodes:
/// damage in one of them is reported (naming the column), damage elsewhere is not read, and a full
/// read still checks the whole body. Files without them (older writers) are verified whole.
#[test]
fn projected_reads_verify_the_buffers_they_read() {
    let dir = tmpdir("zone-crc");
    let b = batches();
    for zone_maps in [true, false] {
        let path = dir.join("t.lst");
        let bounds = write(&path, &b, zone_maps);
        let data = std::fs::read(&path).unwrap();
        let bufs = buffers_of_block(&data, bounds[1] as usize);
        let flip = |col: Column| {
            let r = bufs[values_buffer(&path, col)].clone();
            assert!(r.len() > 16, "{col} buffer of block 1 is {} bytes", r.len());
            let mut d = data.clone();
            d[(r.start + r.end) / 2] ^= 0x04;
            let bad = dir.join(format!("bad-{col}.lst"));
            std::fs::write(&bad, d).unwrap();
            bad
        };
        let (bad_lat, bad_path) = (flip(Column::Lat), flip(Column::Path));
        let want = |i: usize| (b[i].kind.clone(), b[i].lat.clone());
        let got = |v: &[EventBatch]| v.iter().map(|x| (x.kind.clone(), x.lat.clone())).collect::<Vec<_>>();

        // Damage in a column read: block 1 is reported, the others come back.
        let (ok, errors) = read_lat(&bad_lat, &[]);
        assert_eq!(got(&ok), vec![want(0), want(2), want(3)]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].block(), Some(1));
        let msg = errors[0].to_string();
        assert!(msg.contains("checksum mismatch"), "{msg}");
        if zone_maps {
            assert!(matches!(errors[0], TraceError::CorruptBlock { .. }) && msg.contains("column lat"), "{msg}");
        } else {
            assert!(matches!(errors[0], TraceError::Checksum { .. }), "{msg}");
        }

        // Damage in a column not read: with per-buffer checksums it is not read at all and the
        // data returned is intact; without, the whole body is verified and block 1 is reported.
        let (ok, errors) = read_lat(&bad_path, &[]);
        if zone_maps {
            assert!(errors.is_empty(), "{errors:?}");
            assert_eq!(got(&ok), (0..4).map(want).collect::<Vec<_>>());
        } else {
            assert_eq!(errors.len(), 1);
            assert!(matches!(errors[0], TraceError::Checksum { block: 1, .. }), "{}", errors[0]);
        }

        // Every column pruned: nothing returned. Without per-buffer checksums the body is still
        // read and verified.
        let (ok, errors) = read_lat(&bad_lat, &Column::ALL);
        assert!(ok.is_empty());
        assert_eq!(errors.len(), usize::from(!zone_maps), "{errors:?}");

        // Reading every column still verifies the whole body.
        let mut r = TraceReader::open_with(&bad_path, ReadOptions { projection: None, skip_corrupt: true }).unwrap();
        let errors: Vec<TraceError> = r.by_ref().filter_map(|x| x.err()).collect();
        assert_eq!(errors.len(), 1);
        assert!(matches!(errors[0], TraceError::Checksum { block: 1, .. }), "{}", errors[0]);
    }
}

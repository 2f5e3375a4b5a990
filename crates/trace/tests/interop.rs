//! Other tools read traces: pyarrow, DuckDB and Polars (each skipped when not installed).
//!
//! The Python interpreter is `$LATSCOPE_PYTHON`, or `python3`.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use latscope_event::EventBatch;
use latscope_trace::{Summary, TraceReader, TraceWriter};

fn python() -> String {
    std::env::var("LATSCOPE_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// True when `module` imports; otherwise prints why the check is skipped.
fn have(module: &str) -> bool {
    let ok =
        Command::new(python()).args(["-c", &format!("import {module}")]).output().is_ok_and(|o| o.status.success());
    if !ok {
        println!("SKIPPED: {module} not installed (pip install {module})");
    }
    ok
}

fn run_python(script: &str, path: &Path) -> serde_json::Value {
    let out = Command::new(python()).args(["-c", script]).arg(path).output().expect("run python");
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// A trace of three blocks; returns them.
fn write_trace(path: &Path) -> Vec<EventBatch> {
    let mut rng = Rng::new(42);
    let batches: Vec<EventBatch> = [500, 0, 1234].iter().map(|&n| random_batch(&mut rng, n)).collect();
    let mut w = TraceWriter::create(path, &sample_header()).unwrap();
    for (i, b) in batches.iter().enumerate() {
        w.write_batch(b, i as u64).unwrap();
    }
    w.finish(Summary { end_ns: 77, ..Default::default() }).unwrap();
    batches
}

const PYARROW: &str = r#"
import json, sys
import pyarrow as pa, pyarrow.ipc as ipc, pyarrow.compute as pc
path = sys.argv[1]
t = ipc.open_stream(path).read_all()
md = t.schema.metadata
r = ipc.open_stream(path)
blocks = []
while True:
    try:
        b, m = r.read_next_batch_with_custom_metadata()
    except StopIteration:
        break
    blocks.append({"rows": b.num_rows, "meta": {k.decode(): v.decode() for k, v in (m or {}).items()}})
print(json.dumps({
    "rows": t.num_rows,
    "lat_sum": pc.sum(t["lat"]).as_py(),
    "ino_first": t["ino"][0].as_py(),
    "ret_min": pc.min(t["ret"]).as_py(),
    "path": t["path"].to_pylist(),
    "types": {f.name: str(f.type) for f in t.schema},
    "nullable": any(f.nullable for f in t.schema),
    "version": md[b"latscope.format_version"].decode(),
    "hostname": json.loads(md[b"latscope.header"])["hostname"],
    "blocks": blocks,
}))
"#;

#[test]
fn pyarrow_reads_traces() {
    if !have("pyarrow") {
        return;
    }
    let dir = tmpdir("pyarrow");
    let path = dir.join("t.lst");
    let batches = write_trace(&path);
    let all = concat(&batches);
    let v = run_python(PYARROW, &path);
    assert_eq!(v["rows"], all.len() as u64);
    assert_eq!(v["lat_sum"], all.lat.iter().sum::<u64>());
    assert_eq!(v["ino_first"], all.ino[0]);
    assert_eq!(v["ret_min"], *all.ret.iter().min().unwrap());
    let paths: Vec<String> = (0..all.len()).map(|i| all.path.get(i).to_string()).collect();
    assert_eq!(v["path"], serde_json::json!(paths));
    assert_eq!(v["types"]["kind"], "uint8");
    assert_eq!(v["types"]["ret"], "int64");
    assert_eq!(v["types"]["comm"], "string");
    assert_eq!(v["nullable"], false);
    assert_eq!(v["version"], "1");
    assert_eq!(v["hostname"], "höst-1");
    let blocks = v["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 4, "3 data blocks and the summary block");
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!(b["meta"]["latscope.seq"], i.to_string());
        assert_eq!(b["meta"]["latscope.crc32c"].as_str().unwrap().len(), 8);
    }
    assert_eq!(blocks[2]["rows"], 1234);
    assert_eq!(blocks[2]["meta"]["latscope.events_total"], "1734");
    assert_eq!(blocks[2]["meta"]["latscope.lost_total"], "2");
    assert_eq!(blocks[3]["rows"], 0);
    let summary: serde_json::Value =
        serde_json::from_str(blocks[3]["meta"]["latscope.summary"].as_str().unwrap()).unwrap();
    assert_eq!(summary["events"], 1734);
    assert_eq!(summary["end_ns"], 77);
}

const DUCKDB: &str = r#"
import json, sys
import duckdb, pyarrow.ipc as ipc
events = ipc.open_stream(sys.argv[1]).read_all()
n, s, p = duckdb.sql("SELECT count(*), sum(lat), count(*) FILTER (WHERE path = '/etc/passwd') FROM events").fetchall()[0]
print(json.dumps({"rows": n, "lat_sum": int(s), "passwd": p}))
"#;

#[test]
fn duckdb_reads_traces() {
    if !have("pyarrow") || !have("duckdb") {
        return;
    }
    let dir = tmpdir("duckdb");
    let path = dir.join("t.lst");
    let all = concat(&write_trace(&path));
    let v = run_python(DUCKDB, &path);
    assert_eq!(v["rows"], all.len() as u64);
    assert_eq!(v["lat_sum"], all.lat.iter().sum::<u64>());
    assert_eq!(v["passwd"], (0..all.len()).filter(|&i| all.path.get(i) == "/etc/passwd").count());
}

const POLARS: &str = r#"
import json, sys
import polars as pl
df = pl.read_ipc_stream(sys.argv[1])
print(json.dumps({"rows": df.height, "lat_sum": int(df["lat"].sum()), "comm0": df["comm"][0]}))
"#;

#[test]
fn polars_reads_traces() {
    if !have("polars") {
        return;
    }
    let dir = tmpdir("polars");
    let path = dir.join("t.lst");
    let all = concat(&write_trace(&path));
    let v = run_python(POLARS, &path);
    assert_eq!(v["rows"], all.len() as u64);
    assert_eq!(v["lat_sum"], all.lat.iter().sum::<u64>());
    assert_eq!(v["comm0"], all.comm.get(0));
}

/// Blocks whose every column holds one value (the writer stores such buffers as zstd frames it
/// builds itself), with sizes around zstd's 128 KiB block: the tools decode them exactly.
fn write_constant_trace(path: &Path) -> EventBatch {
    let mut w = TraceWriter::create(path, &sample_header()).unwrap();
    let mut all = EventBatch::default();
    for (i, n) in [1usize, 2, 3, 17, 16_384, 16_385, 65_536, 140_000].into_iter().enumerate() {
        let i = i as u64;
        let e = latscope_event::Event {
            kind: (i % 3) as u8,
            ts: 1_700_000_000_000_000_000 + i,
            lat: i * 1000 + 7,
            pid: 0x0102_0304 + i as u32,
            tid: 0,
            uid: u32::MAX - i as u32,
            nr: 0x0101,
            ret: -1 - i as i64,
            fd: -1,
            fd_type: 0xff,
            dev: (8 << 20) | i as u32,
            ino: u64::MAX,
            bytes: 4096 << i,
            off: -1,
            flags: 0x8000_0000,
            mode: 0o644,
            dirfd: -100,
            addr: 0x7f00_0000_0000 + i,
            cgroup: 1,
            qtime: 0,
            off2: -1 - i as i64,
            cpu: 3 + i as u16,
            comm: format!("comm-{i}"),
            path: if i.is_multiple_of(2) { String::new() } else { "/var/lib/x".into() },
            path2: String::new(),
            ..Default::default()
        };
        let mut b = EventBatch::with_capacity(n);
        for _ in 0..n {
            b.push(&e);
        }
        w.write_batch(&b, 0).unwrap();
        all.append(&b);
    }
    w.finish(Summary::default()).unwrap();
    all
}

/// Per column, each value (as JSON text) and how many events have it.
fn value_counts(all: &EventBatch) -> serde_json::Value {
    use std::collections::BTreeMap;
    let mut out = serde_json::Map::new();
    macro_rules! num {
        ($($f:ident),*) => { $(
            let mut m: BTreeMap<String, u64> = BTreeMap::new();
            for v in &all.$f {
                *m.entry(v.to_string()).or_default() += 1;
            }
            out.insert(stringify!($f).into(), serde_json::json!(m));
        )* };
    }
    num!(
        kind,
        ts,
        lat,
        pid,
        tid,
        uid,
        nr,
        ret,
        fd,
        fd_type,
        dev,
        ino,
        bytes,
        off,
        flags,
        mode,
        dirfd,
        addr,
        cgroup,
        qtime,
        off2,
        cpu,
        why_cpu,
        why_runq,
        why_io,
        why_lock,
        why_ipc,
        why_timer,
        why_fault,
        why_other,
        why_unknown,
        waker_ctx,
        waker_tid,
        waker_comm_lo,
        waker_comm_hi,
        runq_tid,
        runq_cpu,
        wake_dev,
        wake_sector,
        kstack,
        ustack,
        gid,
        loginuid,
        tty,
        vpid,
        vtid,
        waker_wait_part,
        waker_wait_ns,
        wake_held_ns,
        wake_queue_ns,
        wake_device_ns,
        fault_addr,
        fault_off,
        wait_start,
        wait_end,
        wake_flags,
        lock_kind,
        lock_addr,
        lock_op,
        lock_word,
        lock_owner,
        lock_start,
        lock_len,
        waker_ustack,
        waker_wait_dev,
        off_count,
        off0_part,
        off0_start,
        off0_end,
        off1_part,
        off1_start,
        off1_end,
        off2_part,
        off2_start,
        off2_end,
        off3_part,
        off3_start,
        off3_end,
        off4_part,
        off4_start,
        off4_end,
        off5_part,
        off5_start,
        off5_end,
        off6_part,
        off6_start,
        off6_end,
        off7_part,
        off7_start,
        off7_end
    );
    for (name, col) in
        [("comm", &all.comm), ("path", &all.path), ("path2", &all.path2), ("fault_path", &all.fault_path)]
    {
        let mut m: BTreeMap<String, u64> = BTreeMap::new();
        for i in 0..all.len() {
            *m.entry(col.get(i).to_string()).or_default() += 1;
        }
        out.insert(name.into(), serde_json::json!(m));
    }
    serde_json::Value::Object(out)
}

const PYARROW_COUNTS: &str = r#"
import json, sys
import pyarrow.ipc as ipc, pyarrow.compute as pc
t = ipc.open_stream(sys.argv[1]).read_all()
out = {}
for name in t.column_names:
    out[name] = {str(d["values"]): d["counts"] for d in pc.value_counts(t[name]).to_pylist()}
print(json.dumps(out))
"#;

const POLARS_COUNTS: &str = r#"
import json, sys
import polars as pl
df = pl.read_ipc_stream(sys.argv[1])
out = {}
for name in df.columns:
    vc = df[name].value_counts()
    out[name] = {str(v): int(c) for v, c in zip(vc[name].to_list(), vc["count"].to_list())}
print(json.dumps(out))
"#;

#[test]
fn tools_read_constant_columns_exactly() {
    let dir = tmpdir("constant");
    let path = dir.join("t.lst");
    let all = write_constant_trace(&path);
    assert_eq!(TraceReader::open(&path).unwrap().read_all().unwrap(), all);
    let want = value_counts(&all);
    for (module, script) in [("pyarrow", PYARROW_COUNTS), ("polars", POLARS_COUNTS)] {
        if have(module) {
            assert_eq!(run_python(script, &path), want, "{module}");
        }
    }
}

//! `latscope export --parquet` read back by real engines (pyarrow, DuckDB): every event and column
//! as in the trace, partitions, and the queries of docs/EXPORT.md returning latscope's numbers.

mod common;
mod exportsupport;

use common::{latscope, latscope_ok};
use exportsupport::*;
use std::path::{Path, PathBuf};

/// Events per host of the fixture fleet (small: debug builds encode Parquet slowly).
const EVENTS: usize = 12_000;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Compares every exported row and column with the traces, read by pyarrow.
const COMPARE: &str = r#"
import sys, json
import pyarrow.ipc as ipc, pyarrow.parquet as pq, pyarrow.compute as pc
pqf, traces = sys.argv[1], sys.argv[2:]
f = pq.ParquetFile(pqf)
t = f.read()
OPS = {(0, 0): "read", (0, 17): "pread64", (0, 1): "write", (0, 257): "openat", (0, 74): "fsync", (0, 3): "close",
       (1, 0): "read", (1, 1): "write", (2, 0): "fork", (2, 1): "exec", (2, 2): "exit"}
KINDS = ["syscall", "block", "proc"]
FDT = {0: "unknown", 1: "file", 3: "ipv4"}
total = 0
for tr in traces:
    src = ipc.open_stream(tr).read_all()
    hdr = json.loads(src.schema.metadata[b"latscope.header"])
    off = hdr["realtime_offset_ns"]
    disks = {d["dev"]: d["name"] for d in hdr["block_devices"]}
    part = t.filter(pc.equal(t["host"], hdr["hostname"]))
    assert part.num_rows == src.num_rows, (part.num_rows, src.num_rows)
    total += part.num_rows
    # Events are grouped by kind within each block as recorded; compare as multisets of rows.
    def rows(tab, names):
        cols = [tab[n].to_pylist() for n in names]
        return sorted(zip(*cols))
    same = ["lat", "pid", "tid", "uid", "nr", "ret", "fd", "dev", "ino", "bytes", "off", "flags", "mode",
            "dirfd", "addr", "cgroup", "qtime", "comm", "path", "path2"]
    a = rows(part, ["time_ns"] + same + ["kind", "op", "fd_type", "disk"])
    kinds = src["kind"].to_pylist(); nrs = src["nr"].to_pylist(); fdt = src["fd_type"].to_pylist()
    devs = src["dev"].to_pylist()
    srcrows = zip([v + off for v in src["ts"].to_pylist()], *[src[n].to_pylist() for n in same],
                  [KINDS[k] for k in kinds], [OPS[(k, n)] for k, n in zip(kinds, nrs)],
                  [FDT[x] for x in fdt], [disks.get(d, "") for d in devs])
    b = sorted(srcrows)
    assert a == b, "rows differ for " + tr
    us = part["time"].cast("int64").to_pylist()
    assert us == [v // 1000 for v in part["time_ns"].to_pylist()]
assert total == t.num_rows
# Types: signed integers only, UTC microsecond time, zstd everywhere.
sch = t.schema
assert str(sch.field("time").type) == "timestamp[us, tz=UTC]", sch.field("time").type
for fld in sch:
    assert not str(fld.type).startswith("uint"), fld
md = f.metadata
for g in range(md.num_row_groups):
    for c in range(md.num_columns):
        assert md.row_group(g).column(c).compression == "ZSTD"
print(md.num_row_groups, t.num_rows)
"#;

#[test]
fn every_event_and_column_of_every_trace_is_exported() {
    if !require_python("every_event_and_column_of_every_trace_is_exported", &["pyarrow"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let traces = write_fleet(dir.path(), EVENTS);
    let out = dir.path().join("fleet.parquet");
    let text = latscope_ok(&[
        "export",
        "-r",
        s(&traces[0]),
        "-r",
        s(&traces[1]),
        "--parquet",
        s(&out),
        "--row-group-rows",
        "5000",
    ]);
    assert!(text.contains(&format!("exported {} of {} events from 2 trace(s)", 2 * EVENTS, 2 * EVENTS)), "{text}");
    let got = python(COMPARE, &[s(&out), s(&traces[0]), s(&traces[1])]);
    // 24 000 rows in row groups of 5000.
    assert_eq!(got.trim(), format!("5 {}", 2 * EVENTS));
    for side in ["processes", "disks", "traces"] {
        assert!(dir.path().join(format!("fleet.{side}.parquet")).exists(), "{side}");
    }
}

/// Runs SQL on DuckDB over the export; prints JSON rows.
const DUCK: &str = r#"
import sys, json, duckdb
con = duckdb.connect()
for stmt in sys.argv[2:-1]:
    con.execute(stmt)
rows = con.execute(sys.argv[-1]).fetchall()
print(json.dumps([[str(v) if not isinstance(v, (int, float)) or isinstance(v, bool) else v for v in r] for r in rows]))
"#;

fn duck(setup: &[String], query: &str) -> Vec<Vec<serde_json::Value>> {
    let mut args: Vec<&str> = vec!["-"];
    args.extend(setup.iter().map(String::as_str));
    args.push(query);
    serde_json::from_str(&python(DUCK, &args)).unwrap()
}

fn views(root: &Path) -> Vec<String> {
    let mut v = vec!["SET TimeZone = 'UTC'".to_string()];
    v.extend(["events", "processes", "disks", "traces"].iter().map(|t| {
        format!(
            "CREATE VIEW {t} AS SELECT * FROM read_parquet('{}/{t}/**/*.parquet', hive_partitioning = true)",
            root.display()
        )
    }));
    v
}

#[test]
fn partitions_are_hive_style_by_host_date_and_hour_and_exports_add_parts() {
    if !require_python("partitions_are_hive_style_by_host_date_and_hour_and_exports_add_parts", &["duckdb", "pytz"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let traces = write_fleet(dir.path(), EVENTS);
    let out = dir.path().join("fleet");
    latscope_ok(&["export", "-r", s(dir.path()), "--parquet", s(&out), "-q"]);
    // The traces start at 09:59:50 UTC and last 20 s: two hours per host.
    for host in ["web1", "db1.example.com"] {
        for hour in ["09", "10"] {
            let p = out.join(format!("events/host={host}/date=2024-03-10/hour={hour}/part-0.parquet"));
            assert!(p.exists(), "{}", p.display());
        }
        assert!(out.join(format!("processes/host={host}/part-0.parquet")).exists());
    }
    let per_hour = duck(&views(&out), "SELECT host, hour, count(*), min(time) >= TIMESTAMPTZ '2024-03-10 09:59:50+00' FROM events GROUP BY ALL ORDER BY ALL");
    let n = |h: &str, hour: &str| -> i64 {
        per_hour.iter().find(|r| r[0] == h && r[1] == hour).map_or(0, |r| r[2].as_i64().unwrap())
    };
    // 10 of the 20 seconds fall in each hour (give or take an event at the edge).
    for host in ["web1", "db1.example.com"] {
        assert_eq!(n(host, "09") + n(host, "10"), EVENTS as i64);
        assert!((n(host, "09") - EVENTS as i64 / 2).abs() <= 2, "{per_hour:?}");
    }
    // Hour partitions agree with the time column.
    let wrong = duck(
        &views(&out),
        "SELECT count(*) FROM events WHERE hour(time) <> CAST(hour AS INTEGER) OR CAST(time AS DATE) <> date",
    );
    assert_eq!(wrong[0][0], 0);
    // Exporting one trace again adds parts next to the first ones, replacing none.
    latscope_ok(&["export", "-r", s(&traces[0]), "--parquet", s(&out), "-q"]);
    assert!(out.join("events/host=web1/date=2024-03-10/hour=10/part-1.parquet").exists());
    let total = duck(&views(&out), "SELECT count(*) FROM events");
    assert_eq!(total[0][0], 3 * EVENTS as i64);
    let t = duck(&views(&out), "SELECT count(*), sum(events_exported) FROM traces");
    assert_eq!(t[0], vec![serde_json::json!(3), serde_json::json!(3 * EVENTS as i64)]);
}

#[test]
fn a_filter_exports_only_matching_events() {
    if !require_python("a_filter_exports_only_matching_events", &["duckdb"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let traces = write_fleet(dir.path(), EVENTS);
    let out = dir.path().join("slow.parquet");
    let j = latscope_ok(&[
        "export",
        "-r",
        s(&traces[0]),
        "--parquet",
        s(&out),
        "--json",
        "evt.latency > 1ms and evt.type = fsync",
    ]);
    let j: serde_json::Value = serde_json::from_str(&j).unwrap();
    let want = host_events(&fleet_hosts(EVENTS)[0])
        .iter()
        .filter(|e| e.kind == 0 && e.lat > 1_000_000 && e.nr == latscope_event::syscall_nr("fsync").unwrap())
        .count() as i64;
    assert!(want > 100);
    assert_eq!(j["events_exported"], want);
    assert_eq!(j["traces"][0]["events_read"], EVENTS as i64);
    let got = duck(
        &[],
        &format!("SELECT count(*), min(lat) > 1000000, count(DISTINCT op) FROM read_parquet('{}')", out.display()),
    );
    assert_eq!(got[0], vec![serde_json::json!(want), serde_json::json!("True"), serde_json::json!(1)]);
    let t = duck(
        &[],
        &format!(
            "SELECT export_filter, events_read, events_exported FROM read_parquet('{}')",
            dir.path().join("slow.traces.parquet").display()
        ),
    );
    assert_eq!(t[0][0], "evt.latency > 1ms and evt.type = fsync");
}

#[test]
fn bad_input_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let traces = write_fleet(dir.path(), 100);
    let out = dir.path().join("out.parquet");
    std::fs::write(&out, b"precious").unwrap();
    let junk = dir.path().join("junk.lst");
    std::fs::write(&junk, b"not a trace at all").unwrap();
    // A bad second trace: nothing written, the existing output untouched.
    let o = latscope(&["export", "-r", s(&traces[0]), "-r", s(&junk), "--parquet", s(&out)]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("junk.lst") && err.contains("not a latscope trace"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    // A bad filter says where.
    let o = latscope(&["export", "-r", s(&traces[0]), "--parquet", s(&out), "evt.latency >> 3"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid filter"), "{}", String::from_utf8_lossy(&o.stderr));
    // Bad options.
    for args in [vec!["--zstd-level", "99"], vec!["--row-group-rows", "0"]] {
        let mut a = vec!["export", "-r", s(&traces[0]), "--parquet", s(&out)];
        a.extend(args);
        let o = latscope(&a);
        assert!(!o.status.success());
        assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
    }
    let missing = dir.path().join("nowhere/out.parquet");
    let o = latscope(&["export", "-r", s(&traces[0]), "--parquet", s(&missing)]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nowhere"), "{}", String::from_utf8_lossy(&o.stderr));
    // Only what was named is there: no temporary files left.
    let mut names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["db1.example.com.lst", "junk.lst", "out.parquet", "web1.lst"]);
}

/// Path of a file next to the crate (docs and packaging live at the workspace root).
pub fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)
}

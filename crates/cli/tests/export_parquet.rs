//! `latscope export --parquet` read back by real engines (pyarrow, DuckDB): every event and column
//! as in the trace, partitions, and the queries of docs/EXPORT.md returning latscope's numbers.

mod common;
mod exportsupport;

use common::{latscope, latscope_json, latscope_ok};
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
       (1, 0): "block_read", (1, 1): "block_write", (2, 0): "proc_fork", (2, 1): "proc_exec", (2, 2): "proc_exit"}
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
    for side in ["processes", "disks", "traces", "stacks"] {
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
    v.extend(["events", "processes", "disks", "traces", "stacks"].iter().map(|t| {
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
        // Hours unpadded, so that every engine reads them as the same integer.
        for hour in ["9", "10"] {
            let p = out.join(format!("events/host={host}/date=2024-03-10/hour={hour}/part-0.parquet"));
            assert!(p.exists(), "{}", p.display());
        }
        assert!(out.join(format!("processes/host={host}/part-0.parquet")).exists());
    }
    let per_hour = duck(&views(&out), "SELECT host, hour, count(*), min(time) >= TIMESTAMPTZ '2024-03-10 09:59:50+00' FROM events GROUP BY ALL ORDER BY ALL");
    let n = |h: &str, hour: i64| -> i64 {
        per_hour.iter().find(|r| r[0] == h && r[1] == hour).map_or(0, |r| r[2].as_i64().unwrap())
    };
    // 10 of the 20 seconds fall in each hour (give or take an event at the edge).
    for host in ["web1", "db1.example.com"] {
        assert_eq!(n(host, 9) + n(host, 10), EVENTS as i64);
        assert!((n(host, 9) - EVENTS as i64 / 2).abs() <= 2, "{per_hour:?}");
    }
    // Hour partitions agree with the time column.
    let wrong =
        duck(&views(&out), "SELECT count(*) FROM events WHERE hour(time) <> hour OR CAST(time AS DATE) <> date");
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
    assert_eq!(err.matches("not a latscope trace").count(), 1, "said once: {err}");
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
    // The output is an input (through a symlink named .parquet): refused, the trace untouched.
    let link = dir.path().join("link.parquet");
    std::os::unix::fs::symlink(&traces[0], &link).unwrap();
    let before = std::fs::read(&traces[0]).unwrap();
    let o = latscope(&["export", "-r", s(&link), "--parquet", s(&link)]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("link.parquet"), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&traces[0]).unwrap(), before);
    std::fs::remove_file(&link).unwrap();
    let missing = dir.path().join("nowhere/out.parquet");
    let o = latscope(&["export", "-r", s(&traces[0]), "--parquet", s(&missing)]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nowhere"), "{}", String::from_utf8_lossy(&o.stderr));
    // A directory that takes no new files: the message names the file asked for, not a temporary.
    let o = latscope(&["export", "-r", s(&traces[0]), "--parquet", "/proc/latscope-test.parquet"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/proc/latscope-test.parquet:") && !err.contains("tmp"), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "said once: {err}");
    // Only what was named is there: no temporary files left.
    let mut names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["db1.example.com.lst", "junk.lst", "out.parquet", "web1.lst"]);
}

#[test]
fn a_trace_cut_short_is_exported_up_to_its_last_whole_block_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let traces = write_fleet(dir.path(), EVENTS);
    let cut = dir.path().join("cut.lst");
    let bytes = std::fs::read(&traces[0]).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let o = latscope(&["export", "-r", s(&cut), "--parquet", s(&dir.path().join("cut.parquet"))]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{err}");
    // The warning names the file once and says what was kept.
    let warning = err.lines().find(|l| l.starts_with("latscope: warning:")).unwrap_or_else(|| panic!("{err}"));
    assert_eq!(warning.matches("cut.lst").count(), 1, "{warning}");
    assert!(warning.contains("complete blocks were read"), "{warning}");
    let kept: u64 = out
        .split("exported ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(kept > 0 && kept < EVENTS as u64, "{out}");
}

/// Path of a file next to the crate (docs and packaging live at the workspace root).
pub fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)
}

/// The SQL blocks of docs/EXPORT.md: (name, text).
fn documented_queries() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(repo_file("docs/EXPORT.md")).unwrap();
    let mut out = Vec::new();
    for block in doc.split("```sql\n").skip(1) {
        let sql = block.split("```").next().unwrap();
        let first = sql.lines().next().unwrap_or("");
        // Each engine's setup (DuckDB's runs here, Spark's in export_readers.rs), then the queries.
        let name = match first {
            "-- setup: duckdb" => "setup",
            "-- setup: spark" => continue,
            _ => first.strip_prefix("-- name: ").expect("each query starts with -- name:"),
        };
        out.push((name.trim().to_string(), sql.to_string()));
    }
    out
}

fn num(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// latscope's value `ls` (ns) for a percentile DuckDB gave as `duck` (in units of `scale` ns) is
/// the same rank within the histogram's resolution.
fn same_percentile(what: &str, duck: f64, scale: f64, ls: f64) {
    let exact = (duck * scale).round();
    assert!(
        exact <= ls + 0.5 && ls <= exact * (1.0 + 1.0 / 128.0) + 0.5,
        "{what}: DuckDB {exact} ns, latscope {ls} ns"
    );
}

#[test]
fn documented_queries_run_and_return_latscopes_numbers() {
    if !require_python("documented_queries_run_and_return_latscopes_numbers", &["duckdb", "pytz"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let traces = write_fleet(dir.path(), EVENTS);
    let out = dir.path().join("fleet");
    latscope_ok(&["export", "-r", s(dir.path()), "--parquet", s(&out), "-q"]);
    let queries = documented_queries();
    let setup: Vec<String> = queries
        .iter()
        .find(|q| q.0 == "setup")
        .expect("a setup block")
        .1
        .replace("'fleet/", &format!("'{}/", out.display()))
        .split(';')
        .map(|st| st.lines().filter(|l| !l.starts_with("--")).collect::<Vec<_>>().join("\n"))
        .filter(|st| !st.trim().is_empty())
        .collect();
    let mut results = std::collections::HashMap::new();
    for (name, sql) in queries.iter().filter(|q| q.0 != "setup") {
        let rows = duck(&setup, sql);
        assert!(!rows.is_empty(), "{name} returned nothing");
        results.insert(name.as_str(), rows);
    }
    for want in [
        "events_per_host",
        "capture_quality",
        "disk_latency_by_host",
        "syscall_latency_by_host",
        "slowest_files",
        "latency_heat_map",
        "errors",
    ] {
        assert!(results.contains_key(want), "docs/EXPORT.md lost the query {want}");
    }
    let hosts = fleet_hosts(EVENTS);
    let truth: Vec<Vec<latscope_event::Event>> = hosts.iter().map(host_events).collect();

    // Time by cause: the fsyncs of the fixture carry a breakdown (block I/O, CPU, run queue),
    // every part summed as the events have it.
    for (h, ev) in hosts.iter().zip(&truth) {
        let fs: Vec<&latscope_event::Event> = ev.iter().filter(|e| e.kind == 0 && e.why_io > 0).collect();
        let rows: Vec<_> = results["time_by_cause"].iter().filter(|r| r[0] == h.name).collect();
        assert_eq!(rows.len(), 1, "only the fsyncs carry a breakdown: {rows:?}");
        let r = rows[0];
        assert_eq!((r[1].as_str(), num(&r[2])), (Some("fsync"), fs.len() as f64));
        let sum = |f: fn(&latscope_event::Event) -> u64| fs.iter().map(|e| f(e)).sum::<u64>() as f64 / 1e6;
        assert!((num(&r[3]) - sum(|e| e.lat)).abs() < 1e-6);
        assert!((num(&r[4]) - sum(|e| e.why_cpu)).abs() < 1e-6);
        assert!((num(&r[5]) - sum(|e| e.why_runq)).abs() < 1e-6);
        assert!((num(&r[6]) - sum(|e| e.why_io)).abs() < 1e-6);
        assert!((num(&r[11]) - sum(|e| e.why_unknown)).abs() < 1e-6);
        let parts: f64 = (4..12).map(|c| num(&r[c])).sum();
        assert!((parts - num(&r[3])).abs() < 1e-6, "parts add up to the latency: {r:?}");
        // Blocked time by stack: the calls of stack 3 (user, in a binary not at hand: named by
        // file and offset) under each kernel function of their kernel stack.
        let blocked = |e: &&&latscope_event::Event| e.ustack == 3;
        let want = fs.iter().filter(blocked).map(|e| e.lat - e.why_cpu - e.why_runq).sum::<u64>() as f64 / 1e6;
        let row = |kf: &str| {
            results["blocked_time_by_stack"]
                .iter()
                .find(|r| r[0] == h.name && r[1] == "postgres+0x1234" && r[2] == kf)
                .unwrap_or_else(|| panic!("{} {kf}: {:?}", h.name, results["blocked_time_by_stack"]))
                .clone()
        };
        let io = row("io_schedule");
        assert_eq!(num(&io[3]), fs.iter().filter(blocked).count() as f64);
        assert!((num(&io[4]) - want).abs() < 1e-6, "{io:?} vs {want}");
        let jbd2 = row("jbd2_log_wait_commit");
        assert_eq!(num(&jbd2[3]), fs.iter().filter(blocked).filter(|e| e.kstack == 2).count() as f64);
    }

    // Counts per host and kind, and what the recordings lost.
    for (h, ev) in hosts.iter().zip(&truth) {
        for (k, kind) in ["syscall", "block", "proc"].iter().enumerate() {
            let want = ev.iter().filter(|e| e.kind as usize == k).count() as f64;
            let row = results["events_per_host"].iter().find(|r| r[0] == h.name && r[1] == *kind).unwrap();
            assert_eq!(num(&row[2]), want, "{} {kind}", h.name);
        }
        let q = results["capture_quality"].iter().find(|r| r[0] == h.name).unwrap();
        assert_eq!((num(&q[3]), num(&q[4]), num(&q[5])), (EVENTS as f64, EVENTS as f64, 0.0));
        let failed = results["errors"].iter().filter(|r| r[0] == h.name).map(|r| num(&r[3])).sum::<f64>();
        assert_eq!(failed, ev.iter().filter(|e| e.kind == 0 && e.ret < 0).count() as f64);
    }

    for (h, trace) in hosts.iter().zip(&traces) {
        // p99 by disk: latscope hist --block --by disk.
        let j = latscope_json(&["hist", "-r", s(trace), "--block", "--by", "disk", "-n", "100", "--json"]);
        for g in j["groups"].as_array().unwrap() {
            let disk = g["group"].as_str().unwrap();
            let row = results["disk_latency_by_host"].iter().find(|r| r[0] == h.name && r[1] == disk).unwrap();
            assert_eq!(num(&row[2]), num(&g["stats"]["count"]), "{} {disk}", h.name);
            for (col, p) in [(3, "p50"), (4, "p90"), (5, "p99")] {
                same_percentile(
                    &format!("{} {disk} {p}", h.name),
                    num(&row[col]),
                    1e6,
                    num(&g["stats"][format!("{p}_ns").as_str()]),
                );
            }
            assert_eq!((num(&row[6]) * 1e6).round(), num(&g["stats"]["max_ns"]));
        }
        // Syscall latency by operation: latscope hist --by syscall.
        let j = latscope_json(&["hist", "-r", s(trace), "--by", "syscall", "-n", "100", "--json"]);
        let groups = j["groups"].as_array().unwrap();
        assert_eq!(groups.len(), 6);
        for g in groups {
            let op = g["group"].as_str().unwrap();
            let row = results["syscall_latency_by_host"].iter().find(|r| r[0] == h.name && r[1] == op).unwrap();
            assert_eq!(num(&row[2]), num(&g["stats"]["count"]), "{} {op}", h.name);
            same_percentile(&format!("{} {op} p50", h.name), num(&row[3]), 1e3, num(&g["stats"]["p50_ns"]));
            same_percentile(&format!("{} {op} p99", h.name), num(&row[4]), 1e3, num(&g["stats"]["p99_ns"]));
            assert_eq!((num(&row[5]) * 1e3).round(), num(&g["stats"]["max_ns"]));
        }
        // Slowest files: latscope top --by file (each file path belongs to one host here).
        let j = latscope_json(&["top", "-r", s(trace), "--by", "file", "-n", "1000", "--json", "fd.type = file"]);
        let rows = j["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 12);
        for t in rows.iter().take(5) {
            let path = t["name"].as_str().unwrap();
            let Some(row) = results["slowest_files"].iter().find(|r| r[0] == path) else { continue };
            assert_eq!(num(&row[1]), 1.0);
            assert_eq!(num(&row[2]), num(&t["count"]), "{path}");
            same_percentile(path, num(&row[3]), 1e6, num(&t["p99_ns"]));
            assert_eq!((num(&row[4]) * 1e6).round(), num(&t["max_ns"]));
            assert!((num(&row[5]) * 1e9 - num(&t["total_ns"])).abs() < 1e3, "{path}");
            assert_eq!(num(&row[6]), num(&t["errors"]));
        }
        // The heat map: latscope heatmap's matrix, cell by cell (10 log rows per decade, 1 s
        // columns as the query's seconds).
        // Six decades in 60 rows: 10 per decade, as the query's rows.
        let j = latscope_json(&[
            "heatmap",
            "-r",
            s(trace),
            "--json",
            "--minlat",
            "100ns",
            "--maxlat",
            "100ms",
            "--rows",
            "60",
            "--stepsec",
            "1",
        ]);
        let m = &j["maps"][0];
        assert_eq!(m["not_shown"], serde_json::json!({"above_max": 0, "after_maxcol": 0, "below_min": 0}));
        let bounds = m["y"]["row_bounds"].as_array().unwrap();
        let r0 = (num(&bounds[0][0]).log10() * 10.0).round() as i64;
        for (r, b) in bounds.iter().enumerate() {
            let want = 10f64.powf((r0 + r as i64) as f64 / 10.0);
            assert!((num(&b[0]) / want - 1.0).abs() < 1e-9, "latscope's rows are 10 per decade here");
        }
        let start_s = num(&m["x"]["start_wall_ns"]) / 1e9;
        let mut sql_cells = std::collections::HashMap::new();
        for row in results["latency_heat_map"].iter().filter(|r| r[0] == h.name) {
            // "2024-03-10 10:00:07+00:00": the fixture stays within one day.
            let t = row[1].as_str().unwrap();
            assert!(t.starts_with("2024-03-10 ") && t.ends_with("+00:00"), "{t}");
            let hms: Vec<f64> = t[11..19].split(':').map(|x| x.parse().unwrap()).collect();
            let day_s = (START_WALL_NS / 1_000_000_000 / 86_400 * 86_400) as f64;
            let col = day_s + hms[0] * 3600.0 + hms[1] * 60.0 + hms[2] - start_s;
            sql_cells.insert((col as i64, num(&row[2]) as i64 - r0), num(&row[4]) as i64);
        }
        let mut diff = 0;
        let mut total = 0;
        // counts[column][row]
        for (c, counts) in m["counts"].as_array().unwrap().iter().enumerate() {
            for (r, n) in counts.as_array().unwrap().iter().enumerate() {
                let n = n.as_i64().unwrap();
                total += n;
                diff += (n - sql_cells.get(&(c as i64, r as i64)).copied().unwrap_or(0)).abs();
            }
        }
        assert_eq!(total, sql_cells.values().sum::<i64>(), "{}: same events in both", h.name);
        // Only values within half a histogram bucket (0.39 %) of a row boundary may sit one row
        // apart (latscope places whole 1/128-wide buckets).
        let near = duck(&setup, &format!(
            "SELECT count(*) FROM events WHERE host = '{}' AND kind = 'syscall' AND abs(log10(lat) * 10 - round(log10(lat) * 10)) < 10 * log10(1.004)", h.name));
        assert!(
            diff <= 2 * num(&near[0][0]) as i64,
            "{}: {diff} cells' worth differ, {} events near a row boundary",
            h.name,
            near[0][0]
        );
    }
}

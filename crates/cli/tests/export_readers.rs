//! A partitioned `latscope export --parquet` read the way docs/EXPORT.md says, by every reader
//! installed (pyarrow two ways, pandas, Polars, DuckDB, Spark): the same columns, partitions
//! included, with the same values (full-column checksums), and the documented queries returning
//! the same rows in Spark as in DuckDB (whose rows `export_parquet.rs` checks against latscope's
//! own `hist`, `top` and `heatmap`).

mod common;
mod exportsupport;

use common::latscope_ok;
use exportsupport::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Events per host of the fixture fleet (two hosts, two hours each).
const EVENTS: usize = 6_000;

const READERS: &str = include_str!("exportsupport/readers.py");

/// The engines Python reads with here, as docs/EXPORT.md spells each one's call.
const ENGINES: &[&str] = &["pyarrow-dataset", "pyarrow-read_table", "pandas", "polars", "duckdb"];

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A partitioned export of the fixture fleet: (its root, the traces).
fn fleet_export(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let traces = write_fleet(dir, EVENTS);
    let out = dir.join("pq");
    latscope_ok(&["export", "-r", s(&traces[0]), "-r", s(&traces[1]), "--parquet", s(&out), "-q"]);
    (out, traces)
}

fn read_with(engine: &str, root: &Path, extra: &[&str]) -> Value {
    let mut args = vec![engine, s(root)];
    args.extend(extra);
    serde_json::from_str(&python(READERS, &args)).unwrap()
}

/// The columns each table has once read: the files' (without the partition keys) and the keys.
fn expected_columns() -> BTreeMap<&'static str, Vec<&'static str>> {
    use latscope_export::parquet_export::{
        DISK_COLUMNS, EVENT_COLUMNS, PARTITION_KEYS, PROCESS_COLUMNS, STACK_COLUMNS, TRACE_COLUMNS,
    };
    let mut m = BTreeMap::new();
    for (t, cols, keys) in [
        ("events", EVENT_COLUMNS, &["host", "date", "hour"][..]),
        ("processes", PROCESS_COLUMNS, &["host"][..]),
        ("disks", DISK_COLUMNS, &["host"][..]),
        ("traces", TRACE_COLUMNS, &["host"][..]),
        ("stacks", STACK_COLUMNS, &["host"][..]),
    ] {
        let mut v: Vec<&str> = cols.iter().map(|c| c.name).filter(|n| !PARTITION_KEYS.contains(n)).collect();
        v.extend(keys);
        v.sort_unstable();
        m.insert(t, v);
    }
    m
}

/// Asserts that `got` (one engine's reading) has every table's columns, rows and checksums as
/// `want` (the reference engine's).
fn same_as(engine: &str, got: &Value, want: &Value) {
    for (table, cols) in expected_columns() {
        let g = &got[table];
        let mut names: Vec<&str> = g["checksums"].as_object().unwrap().keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, cols, "{engine}: columns of {table}");
        assert_eq!(g["rows"], want[table]["rows"], "{engine}: rows of {table}");
        for c in cols {
            assert_eq!(
                g["checksums"][c], want[table]["checksums"][c],
                "{engine}: {table}.{c} differs (read as {}, reference {})",
                g["types"][c], want[table]["types"][c]
            );
        }
    }
}

#[test]
fn every_reader_reads_the_partitioned_export_alike() {
    let test = "every_reader_reads_the_partitioned_export_alike";
    if !require_python(test, &["pyarrow", "pandas", "polars", "duckdb", "pytz"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (root, _) = fleet_export(dir.path());
    let reference = read_with(ENGINES[0], &root, &[]);
    assert_eq!(reference["events"]["rows"], 2 * EVENTS);
    assert_eq!(reference["traces"]["rows"], 2);
    // Two hosts' stack tables of 4 + 3 + 2 + 1 frame rows (exportsupport::STACK_TABLE).
    assert_eq!(reference["stacks"]["rows"], 20);
    // The partition keys as each engine types them (docs/EXPORT.md, "Partitions").
    let mut key_types = BTreeMap::new();
    for engine in ENGINES {
        let got = if *engine == ENGINES[0] { reference.clone() } else { read_with(engine, &root, &[]) };
        same_as(engine, &got, &reference);
        let t = |c: &str| got["events"]["types"][c].as_str().unwrap().to_string();
        key_types.insert(*engine, (t("host"), t("date"), t("hour"), t("time")));
    }
    let want = |h: &str, d: &str, hr: &str, t: &str| (h.to_string(), d.to_string(), hr.to_string(), t.to_string());
    assert_eq!(key_types["duckdb"], want("VARCHAR", "DATE", "BIGINT", "TIMESTAMP WITH TIME ZONE"));
    assert_eq!(key_types["polars"], want("String", "Date", "Int64", "Datetime(time_unit='us', time_zone='UTC')"));
    assert_eq!(key_types["pyarrow-dataset"], want("string", "string", "int32", "timestamp[us, tz=UTC]"));
    let dict = |v: &str| format!("dictionary<values={v}, indices=int32, ordered=0>");
    assert_eq!(
        key_types["pyarrow-read_table"],
        want(&dict("string"), &dict("string"), &dict("int32"), "timestamp[us, tz=UTC]")
    );
    assert_eq!(key_types["pandas"], want("category", "category", "category", "datetime64[us, UTC]"));
}

/// The documented queries (common to DuckDB and Spark SQL) and each engine's setup, with the
/// export's root in place of `fleet/`.
fn documented(root: &Path) -> (Vec<String>, Vec<String>, BTreeMap<String, String>) {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/EXPORT.md")).unwrap();
    let (mut duck, mut spark, mut queries) = (Vec::new(), Vec::new(), BTreeMap::new());
    let statements = |sql: &str| -> Vec<String> {
        sql.replace("'fleet/", &format!("'{}/", root.display()))
            .split(';')
            .map(|st| st.lines().filter(|l| !l.starts_with("--")).collect::<Vec<_>>().join("\n"))
            .filter(|st| !st.trim().is_empty())
            .collect()
    };
    for block in doc.split("```sql\n").skip(1) {
        let sql = block.split("```").next().unwrap();
        let first = sql.lines().next().unwrap();
        if first == "-- setup: duckdb" {
            duck = statements(sql);
        } else if first == "-- setup: spark" {
            spark = statements(sql);
        } else {
            let name = first.strip_prefix("-- name: ").expect("each query starts with -- name:");
            queries.insert(name.to_string(), sql.trim().trim_end_matches(';').to_string());
        }
    }
    assert!(!duck.is_empty() && !spark.is_empty(), "docs/EXPORT.md has a setup for DuckDB and for Spark");
    (duck, spark, queries)
}

/// Rows equal as multisets, numbers within 1e-9 (engines sum and divide in their own order).
fn same_rows(name: &str, a: &Value, b: &Value) {
    let key = |r: &Value| -> String {
        r.as_array()
            .unwrap()
            .iter()
            .map(|v| match v.as_f64() {
                Some(f) => format!("{:.6e}", f),
                None => v.to_string(),
            })
            .collect::<Vec<_>>()
            .join("|")
    };
    let mut x: Vec<&Value> = a.as_array().unwrap().iter().collect();
    let mut y: Vec<&Value> = b.as_array().unwrap().iter().collect();
    assert_eq!(x.len(), y.len(), "{name}: row counts differ");
    assert!(!x.is_empty(), "{name}: no rows");
    x.sort_by_key(|r| key(r));
    y.sort_by_key(|r| key(r));
    for (r, t) in x.iter().zip(&y) {
        let (r, t) = (r.as_array().unwrap(), t.as_array().unwrap());
        assert_eq!(r.len(), t.len(), "{name}");
        for (u, v) in r.iter().zip(t) {
            match (u.as_f64(), v.as_f64()) {
                (Some(p), Some(q)) => {
                    assert!((p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0), "{name}: {r:?} vs {t:?}")
                }
                _ => assert_eq!(u, v, "{name}: {r:?} vs {t:?}"),
            }
        }
    }
}

/// One Spark session (one JVM: Spark starts slowly) reads the export as documented
/// (`spark.read.parquet`), with the same values as pyarrow, and runs every documented query,
/// which returns the rows DuckDB returns for the same text.
#[test]
fn spark_reads_the_export_and_runs_the_documented_queries() {
    let test = "spark_reads_the_export_and_runs_the_documented_queries";
    if !latscope_testkit::require_tool(test, "java") {
        return;
    }
    if !require_python(test, &["pyspark", "pyarrow", "duckdb", "pytz"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (root, _) = fleet_export(dir.path());
    let (duck_setup, spark_setup, mut queries) = documented(&root);
    assert!(queries.len() >= 13, "{:?}", queries.keys());
    let qfile = dir.path().join("queries.json");
    // `blocked_time_by_stack` ties (every frame of a kernel stack has its calls' whole blocked
    // time): its LIMIT, moved to where it cuts through ties (found in DuckDB's whole answer),
    // keeps the same rows in both engines.
    let stacks = queries["blocked_time_by_stack"].clone();
    assert!(stacks.ends_with("LIMIT 20"), "{stacks}");
    let whole = BTreeMap::from([("whole".to_string(), stacks.trim_end_matches("LIMIT 20").to_string())]);
    std::fs::write(&qfile, serde_json::json!({"setup": duck_setup, "queries": whole}).to_string()).unwrap();
    let rows = read_with("duckdb-queries", &root, &[s(&qfile)])["queries"]["whole"].as_array().unwrap().clone();
    let blocked = |i: usize| rows[i][4].as_f64().unwrap();
    let cuts: Vec<usize> = (1..rows.len()).filter(|&k| blocked(k - 1) == blocked(k)).collect();
    assert!(!cuts.is_empty(), "the fixture's stacks tie: {rows:?}");
    for k in cuts.iter().take(3) {
        queries.insert(format!("blocked_time_by_stack LIMIT {k}"), stacks.replace("LIMIT 20", &format!("LIMIT {k}")));
    }
    let spec = |setup: &[String]| serde_json::json!({"setup": setup, "queries": queries});
    std::fs::write(&qfile, spec(&spark_setup).to_string()).unwrap();
    let spark = read_with("spark", &root, &[s(&qfile)]);
    same_as("spark", &spark, &read_with("pyarrow-dataset", &root, &[]));
    let t = |c: &str| spark["events"]["types"][c].as_str().unwrap().to_string();
    assert_eq!(
        (t("host"), t("date"), t("hour"), t("time")),
        ("string".into(), "date".into(), "int".into(), "timestamp".into())
    );
    std::fs::write(&qfile, spec(&duck_setup).to_string()).unwrap();
    let duck = read_with("duckdb-queries", &root, &[s(&qfile)]);
    for name in queries.keys() {
        same_rows(name, &spark["queries"][name], &duck["queries"][name]);
    }
}

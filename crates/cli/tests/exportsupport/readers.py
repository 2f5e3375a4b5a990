# Reads a partitioned latscope export with one engine, the way docs/EXPORT.md says, and prints
# JSON: per table, the row count, each column's type as the engine reports it, and a checksum of
# each column's values (rows put in one canonical order first, so that engines reading files in
# different orders agree). Values are made canonical per type: integers as integers, strings as
# strings, timestamps as microseconds since the epoch, dates as YYYY-MM-DD.
#
#   python3 readers.py ENGINE ROOT [QUERIES_JSON]
#
# ENGINE: pyarrow-read_table, pyarrow-dataset, pandas, polars, duckdb, spark, duckdb-queries.
# With spark and a queries file ({"setup": [...], "queries": {name: sql}}), the queries also run
# in the same JVM session (Spark starts slowly); duckdb-queries runs only the queries. Their
# rows are printed under "queries", numbers as floats and times as microseconds.
import datetime
import hashlib
import json
import sys

TABLES = ["events", "processes", "disks", "traces", "stacks"]
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def canon(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        d = v - EPOCH
        return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
    if isinstance(v, datetime.date):
        return v.isoformat()
    if hasattr(v, "item"):  # numpy scalars
        return canon(v.item())
    if hasattr(v, "value") and hasattr(v, "tz_convert"):  # pandas Timestamp
        return int(v.value) // 1000
    return v


def result(v):
    """A value of a query's row, comparable between engines: numbers as floats, times as
    microseconds since the epoch, text as text."""
    import decimal

    v = canon(v)
    if isinstance(v, (int, float, decimal.Decimal)):
        return float(v)
    return v


def duckdb_queries(queries_file):
    import duckdb

    q = json.load(open(queries_file))
    con = duckdb.connect()
    for st in q["setup"]:
        con.execute(st)
    return {"queries": {name: [[result(v) for v in r] for r in con.execute(sql).fetchall()] for name, sql in q["queries"].items()}}


def summary(names, types, columns):
    """names, types: lists; columns: list of lists of values (one list per column)."""
    cols = [[canon(v) for v in c] for c in columns]
    n = len(cols[0]) if cols else 0
    order = sorted(range(n), key=lambda i: tuple(json.dumps(c[i]) for c in cols))
    out = {"rows": n, "types": {}, "checksums": {}}
    for name, t, c in zip(names, types, cols):
        out["types"][name] = t
        out["checksums"][name] = hashlib.sha256(json.dumps([c[i] for i in order]).encode()).hexdigest()
    return out


def arrow_summary(t):
    t = t.combine_chunks()
    return summary(t.column_names, [str(f.type) for f in t.schema], [t[c].to_pylist() for c in t.column_names])


def read(engine, root):
    out = {}
    if engine == "pyarrow-read_table":
        import pyarrow.parquet as pq

        for tab in TABLES:
            out[tab] = arrow_summary(pq.read_table(f"{root}/{tab}"))
    elif engine == "pyarrow-dataset":
        import pyarrow.dataset as ds

        for tab in TABLES:
            out[tab] = arrow_summary(ds.dataset(f"{root}/{tab}", partitioning="hive").to_table())
    elif engine == "pandas":
        import pandas as pd

        for tab in TABLES:
            df = pd.read_parquet(f"{root}/{tab}")
            cols = []
            for c in df.columns:
                s = df[c]
                if str(s.dtype).startswith("datetime64"):
                    vals = [None if x is pd.NaT else int(x.value) // 1000 for x in s]
                else:
                    vals = [None if (x is None or (isinstance(x, float) and x != x)) else x for x in s.tolist()]
                cols.append(vals)
            out[tab] = summary(list(df.columns), [str(df[c].dtype) for c in df.columns], cols)
    elif engine == "polars":
        import polars as pl

        for tab in TABLES:
            df = pl.scan_parquet(f"{root}/{tab}/**/*.parquet", hive_partitioning=True).collect()
            out[tab] = summary(df.columns, [str(t) for t in df.dtypes], [df[c].to_list() for c in df.columns])
    elif engine == "duckdb":
        import duckdb

        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        for tab in TABLES:
            rel = con.sql(f"SELECT * FROM read_parquet('{root}/{tab}/**/*.parquet', hive_partitioning = true)")
            names, types = rel.columns, [str(t) for t in rel.types]
            rows = rel.fetchall()
            out[tab] = summary(names, types, [list(c) for c in zip(*rows)] if rows else [[] for _ in names])
    else:
        raise SystemExit(f"unknown engine {engine}")
    return out


def spark(root, queries_file):
    import os

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    s = (
        SparkSession.builder.master("local[2]")
        .appName("latscope-export-test")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    out = {}
    for tab in TABLES:
        df = s.read.parquet(f"{root}/{tab}")
        names = df.columns
        # Timestamps as microseconds since the epoch, exactly (collect() would go through the
        # Python time zone).
        sel = [f"unix_micros(`{n}`) AS `{n}`" if t.startswith("timestamp") else f"`{n}`" for n, t in df.dtypes]
        rows = df.selectExpr(*sel).collect()
        out[tab] = summary(names, [t for _, t in df.dtypes], [list(c) for c in zip(*rows)] if rows else [[] for _ in names])
    if queries_file:
        q = json.load(open(queries_file))
        for st in q["setup"]:
            s.sql(st)
        res = {}
        for name, sql in q["queries"].items():
            rows = s.sql(sql).collect()
            res[name] = [[result(v) for v in r] for r in rows]
        out["queries"] = res
    s.stop()
    return out


if __name__ == "__main__":
    engine, root = sys.argv[1], sys.argv[2]
    if engine == "spark":
        print(json.dumps(spark(root, sys.argv[3] if len(sys.argv) > 3 else None)))
    elif engine == "duckdb-queries":
        print(json.dumps(duckdb_queries(sys.argv[3])))
    else:
        print(json.dumps(read(engine, root)))

//! [`Store`]: opening (with every check), series, merging hours in, reading them out, retention.

use crate::error::{Result, StoreError};
use crate::hour::{Hour, HOUR_SECS};
use crate::schema::{self, APPLICATION_ID, DDL, SCHEMA_VERSION};
use crate::series::{Series, SeriesId, SeriesSpec};
use latscope_hist::Histogram;
use rusqlite::{ffi::ErrorCode, params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use serde::Serialize;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a writer waits for another writer's transaction before giving up with
/// [`StoreError::Busy`] (flushes take milliseconds; this covers a slow disk).
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How to open a store.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Open for reading only: the file must exist and be a store; nothing is ever written.
    pub read_only: bool,
    /// See [`DEFAULT_BUSY_TIMEOUT`].
    pub busy_timeout: Duration,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions { read_only: false, busy_timeout: DEFAULT_BUSY_TIMEOUT }
    }
}

/// Whether SQLite can use (or create) the `-shm` file of the store at `path`: it exists, or its
/// directory can be written.
fn shm_possible(path: &Path) -> bool {
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    if Path::new(&shm).exists() {
        return true;
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return true };
    // SAFETY: a valid NUL-terminated path. access() also says EROFS on a read-only mount, even
    // to root.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// `path` as the path of an SQLite `file:` URI (RFC 3986: everything but unreserved characters
/// and `/` percent-encoded), made absolute.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = String::new();
    for &b in abs.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One stored hourly histogram.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HourHistogram {
    /// The series it belongs to.
    pub series: SeriesId,
    /// The hour it covers.
    pub hour: Hour,
    /// When it was last merged into, in milliseconds since the Unix epoch.
    pub updated_ms: i64,
    /// The values recorded in that hour.
    pub histogram: Histogram,
}

/// The summary columns of one stored hour, read without decoding its histogram (cheap: for
/// sparklines and counts over long ranges). Values above `i64::MAX` read as `i64::MAX`; the
/// histogram holds them exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HourStats {
    /// The series.
    pub series: SeriesId,
    /// The hour.
    pub hour: Hour,
    /// Values recorded.
    pub count: u64,
    /// Their sum.
    pub sum: u64,
    /// The smallest.
    pub min: u64,
    /// The largest.
    pub max: u64,
    /// Last merge, milliseconds since the Unix epoch.
    pub updated_ms: i64,
}

/// What [`Store::verify`] checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Series declared.
    pub series: u64,
    /// Hourly histograms decoded and cross-checked.
    pub hours: u64,
    /// Values in them.
    pub values: u64,
}

/// An open store file. See the crate docs for the format and the guarantees.
///
/// A `Store` is one SQLite connection: use one per thread (open the file again in each thread;
/// readers never block the writer or each other).
pub struct Store {
    conn: Connection,
    path: PathBuf,
    read_only: bool,
    busy_timeout: Duration,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).field("read_only", &self.read_only).finish()
    }
}

const HIST_COLUMNS: &str = "series, hour, count, sum, min, max, updated, data";

/// SQLite's files beside a database (rollback journal, write-ahead log, shared memory).
const SIDE_FILES: [&str; 3] = ["-journal", "-wal", "-shm"];

/// Refuse a store path, or a side file SQLite opens by name beside it, that is a symlink, a file
/// with another hard link or not a regular file: SQLite resolves symlinks itself and creates
/// its side files with `O_CREAT`, so a link planted there would make it create or write a file
/// elsewhere. A writable store's file is created here (`O_NOFOLLOW`, mode 0644 less the umask)
/// before SQLite opens it.
fn check_paths(path: &Path, read_only: bool) -> Result<()> {
    use latscope_trace::{open_in_place, InPlace};
    let mut path = path.to_path_buf();
    if read_only {
        // Only read: a link to a store may be followed, and SQLite's side files are then
        // beside the file it leads to.
        if let Ok(real) = std::fs::canonicalize(&path) {
            path = real;
        }
    } else {
        // Looked at before anything is created.
        open_in_place(&path, InPlace::CheckOnly, true)?;
    }
    for side in SIDE_FILES {
        let mut p = path.as_os_str().to_owned();
        p.push(side);
        open_in_place(std::path::PathBuf::from(p), InPlace::CheckOnly, true)?;
    }
    if !read_only {
        open_in_place(&path, InPlace::Create(0o644), true)?;
    }
    Ok(())
}

impl Store {
    /// Opens `path` for reading and writing, creating an empty store if it does not exist (or is
    /// an empty file).
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(path, &OpenOptions::default())
    }

    /// Opens an existing store for reading only.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(path, &OpenOptions { read_only: true, ..OpenOptions::default() })
    }

    /// Opens a store. Refuses, with an error naming the file and the problem, anything that is not
    /// an intact store of a schema version this build reads.
    pub fn open_with(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        let io = |op: &str, source| StoreError::Io { path: path.clone(), op: op.to_string(), source };
        check_paths(&path, opts.read_only)?;
        match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !opts.read_only => {}
            Err(e) => return Err(io("opening the store", e)),
            Ok(m) if m.is_dir() => {
                return Err(StoreError::NotAStore { path, detail: "it is a directory".into() });
            }
            Ok(m) if m.len() > 0 => schema::precheck(&path, m.len())?,
            Ok(_) if opts.read_only => {
                return Err(StoreError::NotAStore { path, detail: "empty file (0 bytes)".into() });
            }
            Ok(_) => {}
        }
        let flags = if opts.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = if opts.read_only && !shm_possible(&path) {
            // Reading a WAL store needs its shared-memory file (`-shm`), which SQLite creates next
            // to it; in a directory nobody can write (a read-only mount, a snapshot) with no
            // `-shm` there, no writer can be running either: read the file as it is.
            let uri = format!("file:{}?immutable=1", uri_path(&path));
            Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
        } else {
            Connection::open_with_flags(&path, flags)
        }
        .map_err(|e| map_err(&path, "opening the store", e))?;
        let store = Store { conn, path, read_only: opts.read_only, busy_timeout: opts.busy_timeout };
        store.configure()?;
        store.identify()?;
        Ok(store)
    }

    /// Connection settings: waiting on writers, and SQLite's defences against a hostile file.
    fn configure(&self) -> Result<()> {
        let c = &self.conn;
        let e = |e| self.err("configuring the connection", e);
        c.busy_timeout(self.busy_timeout).map_err(e)?;
        // A crafted file must not make queries run its own SQL (triggers, views, functions in the
        // schema) or let SQL corrupt the file on purpose.
        c.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true).map_err(e)?;
        c.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false).map_err(e)?;
        c.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false).map_err(e)?;
        c.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false).map_err(e)?;
        c.pragma_update(None, "foreign_keys", true).map_err(e)?;
        Ok(())
    }

    /// Checks the application id, the schema version and every schema object; sets up a new store.
    fn identify(&self) -> Result<()> {
        let c = &self.conn;
        let e = |e| self.err("reading the store's header", e);
        let app_id: i32 = c.pragma_query_value(None, "application_id", |r| r.get(0)).map_err(e)?;
        let version: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(e)?;
        let objects = schema::objects(c).map_err(e)?;
        if app_id == 0 && version == 0 && objects.is_empty() {
            if self.read_only {
                return Err(self.not_a_store("an empty SQLite database (no latscope tables)".into()));
            }
            return self.create();
        }
        if app_id != APPLICATION_ID {
            let tables: Vec<&str> = objects.iter().filter(|o| o.0 == "table").map(|o| o.1.as_str()).collect();
            return Err(self.not_a_store(format!(
                "an SQLite database of another application (application id {app_id:#010x}, tables: {})",
                if tables.is_empty() { "none".to_string() } else { tables.join(", ") }
            )));
        }
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema { path: self.path.clone(), found: version, supported: SCHEMA_VERSION });
        }
        if version < 1 {
            return Err(self.corrupt(format!("schema version {version} (latscope stores start at 1)")));
        }
        let expected = schema::expected_objects();
        if objects != expected {
            let name = |o: &schema::Object| format!("{} {}", o.0, o.1);
            let detail = match objects.iter().find(|o| !expected.contains(o)) {
                Some(o) if expected.iter().any(|x| x.1 == o.1) => format!("{} differs from schema version 1", name(o)),
                Some(o) => format!("unexpected {}", name(o)),
                None => format!(
                    "{} is missing",
                    expected.iter().find(|o| !objects.contains(o)).map(name).unwrap_or_default()
                ),
            };
            return Err(self.corrupt(format!("schema: {detail}")));
        }
        if !self.read_only {
            self.use_wal()?;
        }
        Ok(())
    }

    /// A new store: WAL mode, then the schema in one transaction (another process may be creating
    /// the same file at the same time: the second one finds it done).
    fn create(&self) -> Result<()> {
        self.use_wal()?;
        let c = &self.conn;
        let e = |e| self.err("creating the store", e);
        c.execute_batch("BEGIN IMMEDIATE").map_err(e)?;
        let r = (|| {
            let n: i64 = c.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))?;
            if n == 0 {
                c.execute_batch(DDL)?;
                c.pragma_update(None, "application_id", APPLICATION_ID)?;
                c.pragma_update(None, "user_version", SCHEMA_VERSION)?;
                c.execute("INSERT INTO meta (key, value) VALUES ('created', ?1)", [unix_ms(SystemTime::now())])?;
            }
            c.execute_batch("COMMIT")
        })();
        if let Err(err) = r {
            let _ = c.execute_batch("ROLLBACK");
            return Err(e(err));
        }
        self.identify()
    }

    /// Write-ahead logging: one writer and any number of readers at once, and a commit is atomic
    /// across a crash. `synchronous = NORMAL` syncs at checkpoints, not at every commit: a killed
    /// process loses nothing committed, a power failure may lose the last commits, neither corrupts.
    fn use_wal(&self) -> Result<()> {
        let c = &self.conn;
        let e = |e| self.err("switching to write-ahead logging", e);
        let mode: String = c.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)).map_err(e)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(self.corrupt(format!("cannot use write-ahead logging (journal mode stays {mode})")));
        }
        c.pragma_update(None, "synchronous", "NORMAL").map_err(e)?;
        Ok(())
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Declares a series (or updates its kind, unit, description and parameters: the last
    /// declaration wins) and returns its id.
    pub fn ensure_series(&mut self, spec: &SeriesSpec) -> Result<SeriesId> {
        spec.validate().map_err(StoreError::InvalidSeries)?;
        self.writable("declare a series")?;
        let params = serde_json::Value::Object(spec.params.clone()).to_string();
        let e = |e| self.err("declaring a series", e);
        let id: i64 = self
            .conn
            .prepare_cached(
                "INSERT INTO series (host, name, kind, unit, description, params) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (host, name) DO UPDATE SET kind = excluded.kind, unit = excluded.unit,
                   description = excluded.description, params = excluded.params
                 RETURNING id",
            )
            .and_then(|mut st| {
                st.query_row(params![spec.host, spec.name, spec.kind, spec.unit, spec.description, params], |r| {
                    r.get(0)
                })
            })
            .map_err(e)?;
        Ok(SeriesId(id))
    }

    /// Every series with the extent of its data, ordered by host and name.
    pub fn series(&self) -> Result<Vec<Series>> {
        self.query_series("", [])
    }

    /// The series `name` of `host`, if declared.
    pub fn find_series(&self, host: &str, name: &str) -> Result<Option<Series>> {
        Ok(self.query_series("WHERE s.host = ?1 AND s.name = ?2", [host, name])?.pop())
    }

    /// The series with id `id`.
    pub fn series_by_id(&self, id: SeriesId) -> Result<Series> {
        self.query_series("WHERE s.id = ?1", [id.0])?
            .pop()
            .ok_or(StoreError::NoSuchSeries { path: self.path.clone(), id: id.0 })
    }

    fn query_series<P: rusqlite::Params>(&self, filter: &str, p: P) -> Result<Vec<Series>> {
        let sql = format!(
            "SELECT s.id, s.host, s.name, s.kind, s.unit, s.description, s.params,
                    min(h.hour), max(h.hour), count(h.hour), total(h.count)
             FROM series s LEFT JOIN hist h ON h.series = s.id {filter}
             GROUP BY s.id ORDER BY s.host, s.name"
        );
        let e = |e| self.err("reading the series", e);
        let mut st = self.conn.prepare_cached(&sql).map_err(e)?;
        let rows = st
            .query_map(p, |r| {
                let params: String = r.get(6)?;
                Ok((
                    r.get::<_, i64>(0)?,
                    SeriesSpec {
                        host: r.get(1)?,
                        name: r.get(2)?,
                        kind: r.get(3)?,
                        unit: r.get(4)?,
                        description: r.get(5)?,
                        params: serde_json::Map::new(),
                    },
                    params,
                    r.get::<_, Option<i64>>(7)?,
                    r.get::<_, Option<i64>>(8)?,
                    r.get::<_, i64>(9)?,
                    r.get::<_, f64>(10)?,
                ))
            })
            .map_err(e)?;
        let mut out = Vec::new();
        for row in rows {
            let (id, mut spec, params, first, last, hours, count) = row.map_err(e)?;
            spec.params = match serde_json::from_str(&params) {
                Ok(serde_json::Value::Object(m)) => m,
                _ => return Err(self.corrupt(format!("series {id} ({}): parameters are not a JSON object", spec.name))),
            };
            out.push(Series {
                id: SeriesId(id),
                spec,
                first_hour: first.map(Hour::from_unix_secs),
                last_hour: last.map(Hour::from_unix_secs),
                hours: hours as u64,
                count: count as u64,
            });
        }
        Ok(out)
    }

    /// Adds each histogram into the stored one of its series and hour (creating it if needed), all
    /// in one transaction: after a crash either every histogram of the call was added or none.
    /// Empty histograms are skipped.
    pub fn merge(&mut self, items: &[(SeriesId, Hour, &Histogram)]) -> Result<()> {
        self.writable("add histograms")?;
        let path = self.path.clone();
        let timeout_ms = self.busy_timeout.as_millis() as u64;
        let e = |err| map_err_busy(&path, "adding histograms", err, timeout_ms);
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(e)?;
        let now = unix_ms(SystemTime::now());
        {
            let mut select = tx.prepare_cached("SELECT data FROM hist WHERE series = ?1 AND hour = ?2").map_err(e)?;
            let mut upsert = tx
                .prepare_cached(
                    "INSERT INTO hist (series, hour, count, sum, min, max, updated, data)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                     ON CONFLICT (series, hour) DO UPDATE SET count = excluded.count, sum = excluded.sum,
                       min = excluded.min, max = excluded.max, updated = excluded.updated, data = excluded.data",
                )
                .map_err(e)?;
            for &(id, hour, h) in items {
                if h.is_empty() {
                    continue;
                }
                let stored: Option<Vec<u8>> =
                    select.query_row(params![id.0, hour.start_unix_secs()], |r| r.get(0)).optional().map_err(e)?;
                let merged = match stored {
                    Some(bytes) => {
                        let mut m = decode(&path, id, hour, &bytes)?;
                        m.merge(h);
                        m
                    }
                    None => h.clone(),
                };
                let (count, sum, min, max) = columns(&merged);
                upsert
                    .execute(params![id.0, hour.start_unix_secs(), count, sum, min, max, now, merged.to_bytes()])
                    .map_err(|err| match err.sqlite_error_code() {
                        Some(ErrorCode::ConstraintViolation) => {
                            StoreError::NoSuchSeries { path: path.clone(), id: id.0 }
                        }
                        _ => e(err),
                    })?;
            }
        }
        tx.commit().map_err(e)
    }

    /// The histograms of series `id` for the hours in `range`, oldest first.
    pub fn hours(&self, id: SeriesId, range: Range<Hour>) -> Result<Vec<HourHistogram>> {
        self.query_hists(
            &format!("SELECT {HIST_COLUMNS} FROM hist WHERE series = ?1 AND hour >= ?2 AND hour < ?3 ORDER BY hour"),
            params![id.0, range.start.start_unix_secs(), range.end.start_unix_secs()],
        )
    }

    /// The histograms of every series for the hours in `range`, by series then hour.
    pub fn hours_all(&self, range: Range<Hour>) -> Result<Vec<HourHistogram>> {
        self.query_hists(
            &format!("SELECT {HIST_COLUMNS} FROM hist WHERE hour >= ?1 AND hour < ?2 ORDER BY series, hour"),
            params![range.start.start_unix_secs(), range.end.start_unix_secs()],
        )
    }

    /// The latest stored hour of series `id`.
    pub fn latest(&self, id: SeriesId) -> Result<Option<HourHistogram>> {
        Ok(self
            .query_hists(
                &format!("SELECT {HIST_COLUMNS} FROM hist WHERE series = ?1 ORDER BY hour DESC LIMIT 1"),
                params![id.0],
            )?
            .pop())
    }

    /// The latest stored hour of every series that has one, by series id (one consistent snapshot).
    pub fn latest_all(&self) -> Result<Vec<HourHistogram>> {
        self.query_hists(
            &format!(
                "SELECT {HIST_COLUMNS} FROM hist
                 WHERE (series, hour) IN (SELECT series, max(hour) FROM hist GROUP BY series) ORDER BY series"
            ),
            [],
        )
    }

    /// Every hour of series `id` in `range` added into one histogram (empty if there is none).
    pub fn merged(&self, id: SeriesId, range: Range<Hour>) -> Result<Histogram> {
        let mut total = Histogram::new();
        for h in self.hours(id, range)? {
            total.merge(&h.histogram);
        }
        Ok(total)
    }

    /// The summary columns of series `id` for the hours in `range`, without decoding histograms.
    pub fn hour_stats(&self, id: SeriesId, range: Range<Hour>) -> Result<Vec<HourStats>> {
        let e = |e| self.err("reading hourly statistics", e);
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT series, hour, count, sum, min, max, updated FROM hist
                 WHERE series = ?1 AND hour >= ?2 AND hour < ?3 ORDER BY hour",
            )
            .map_err(e)?;
        let rows = st
            .query_map(params![id.0, range.start.start_unix_secs(), range.end.start_unix_secs()], |r| {
                Ok(HourStats {
                    series: SeriesId(r.get(0)?),
                    hour: Hour::from_unix_secs(r.get(1)?),
                    count: r.get::<_, i64>(2)?.max(0) as u64,
                    sum: r.get::<_, i64>(3)?.max(0) as u64,
                    min: r.get::<_, i64>(4)?.max(0) as u64,
                    max: r.get::<_, i64>(5)?.max(0) as u64,
                    updated_ms: r.get(6)?,
                })
            })
            .map_err(e)?;
        rows.collect::<rusqlite::Result<_>>().map_err(e)
    }

    fn query_hists<P: rusqlite::Params>(&self, sql: &str, p: P) -> Result<Vec<HourHistogram>> {
        let e = |e| self.err("reading hourly histograms", e);
        let mut st = self.conn.prepare_cached(sql).map_err(e)?;
        let mut rows = st.query(p).map_err(e)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(e)? {
            let id = SeriesId(r.get(0).map_err(e)?);
            let hour_secs: i64 = r.get(1).map_err(e)?;
            let hour = Hour::from_unix_secs(hour_secs);
            let stored: [i64; 4] =
                [r.get(2).map_err(e)?, r.get(3).map_err(e)?, r.get(4).map_err(e)?, r.get(5).map_err(e)?];
            let updated_ms: i64 = r.get(6).map_err(e)?;
            let bytes = r.get_ref(7).map_err(e)?.as_blob().map_err(|err| e(err.into()))?;
            let histogram = decode(&self.path, id, hour, bytes)?;
            let (count, sum, min, max) = columns(&histogram);
            if hour_secs != hour.start_unix_secs() || stored != [count, sum, min, max] {
                return Err(self.corrupt(format!(
                    "series {id}, hour {hour_secs}: the columns (count, sum, min, max) = {stored:?} disagree with \
                     its histogram's ({count}, {sum}, {min}, {max}) or the hour is not a multiple of {HOUR_SECS} s"
                )));
            }
            out.push(HourHistogram { series: id, hour, updated_ms, histogram });
        }
        Ok(out)
    }

    /// Days of history kept (`None`: everything is kept), as stored in the file so that every
    /// writer of it applies the same.
    pub fn retention_days(&self) -> Result<Option<u32>> {
        let v: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'retention_days'", [], |r| r.get(0))
            .optional()
            .map_err(|e| self.err("reading the retention", e))?;
        match v {
            None => Ok(None),
            Some(s) => s
                .parse()
                .map(Some)
                .map_err(|_| self.corrupt(format!("meta retention_days = {s:?} is not a number of days"))),
        }
    }

    /// Sets the days of history kept (`None` or 0: keep everything). Applied by [`prune`](Self::prune).
    pub fn set_retention_days(&mut self, days: Option<u32>) -> Result<()> {
        self.writable("set the retention")?;
        let r = match days.filter(|&d| d > 0) {
            Some(d) => self.conn.execute(
                "INSERT INTO meta (key, value) VALUES ('retention_days', ?1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [d.to_string()],
            ),
            None => self.conn.execute("DELETE FROM meta WHERE key = 'retention_days'", []),
        };
        r.map(|_| ()).map_err(|e| self.err("setting the retention", e))
    }

    /// Drops the hours that ended more than the retention's days before `now`; returns how many.
    pub fn prune(&mut self, now: SystemTime) -> Result<u64> {
        let Some(days) = self.retention_days()? else { return Ok(0) };
        let cutoff = Hour::containing(now).plus(-(i64::from(days) * 24));
        self.drop_before(cutoff)
    }

    /// Drops every hour before `hour` (of every series); returns how many.
    pub fn drop_before(&mut self, hour: Hour) -> Result<u64> {
        self.writable("drop old hours")?;
        let n = self
            .conn
            .execute("DELETE FROM hist WHERE hour < ?1", [hour.start_unix_secs()])
            .map_err(|e| self.err("dropping old hours", e))?;
        Ok(n as u64)
    }

    /// Checks the whole file: SQLite's own integrity check of every page, then every histogram
    /// decoded (checksum included) and cross-checked with its row. Reads everything: use it after
    /// a crash or on a file of unknown origin, not on every open.
    pub fn verify(&self) -> Result<VerifyReport> {
        let e = |e| self.err("checking integrity", e);
        let mut st = self.conn.prepare("PRAGMA integrity_check").map_err(e)?;
        let problems: Vec<String> =
            st.query_map([], |r| r.get(0)).map_err(e)?.collect::<rusqlite::Result<_>>().map_err(e)?;
        if problems != ["ok"] {
            let shown: Vec<&str> = problems.iter().take(3).map(String::as_str).collect();
            return Err(self.corrupt(format!("integrity check: {}", shown.join("; "))));
        }
        let series = self.series()?;
        let mut report = VerifyReport { series: series.len() as u64, ..Default::default() };
        for s in &series {
            for h in self.hours(s.id, Hour::from_unix_secs(i64::MIN / 2)..Hour::from_unix_secs(i64::MAX / 2))? {
                report.hours += 1;
                report.values += h.histogram.count();
            }
        }
        let rows: i64 = self.conn.query_row("SELECT count(*) FROM hist", [], |r| r.get(0)).map_err(e)?;
        if rows as u64 != report.hours {
            return Err(self.corrupt(format!("{} hourly rows belong to no series", rows as u64 - report.hours)));
        }
        Ok(report)
    }

    fn writable(&self, op: &str) -> Result<()> {
        if self.read_only {
            return Err(StoreError::ReadOnly { path: self.path.clone(), op: op.to_string() });
        }
        Ok(())
    }

    fn err(&self, op: &str, e: rusqlite::Error) -> StoreError {
        map_err_busy(&self.path, op, e, self.busy_timeout.as_millis() as u64)
    }

    fn corrupt(&self, detail: String) -> StoreError {
        StoreError::Corrupt { path: self.path.clone(), detail }
    }

    fn not_a_store(&self, detail: String) -> StoreError {
        StoreError::NotAStore { path: self.path.clone(), detail }
    }
}

/// The summary columns of a histogram, saturated to SQLite's signed 64-bit integers.
fn columns(h: &Histogram) -> (i64, i64, i64, i64) {
    let sat = |v: u64| v.min(i64::MAX as u64) as i64;
    (sat(h.count()), h.sum().min(i64::MAX as u128) as i64, sat(h.min().unwrap_or(0)), sat(h.max().unwrap_or(0)))
}

fn decode(path: &Path, id: SeriesId, hour: Hour, bytes: &[u8]) -> Result<Histogram> {
    Histogram::from_bytes(bytes).map_err(|err| StoreError::Corrupt {
        path: path.to_path_buf(),
        detail: format!("series {id}, hour {hour}: {err}"),
    })
}

fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn map_err(path: &Path, op: &str, e: rusqlite::Error) -> StoreError {
    map_err_busy(path, op, e, DEFAULT_BUSY_TIMEOUT.as_millis() as u64)
}

/// Sorts SQLite's failures into the error kinds a user can act on.
fn map_err_busy(path: &Path, op: &str, e: rusqlite::Error, timeout_ms: u64) -> StoreError {
    let path = path.to_path_buf();
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt { path, detail: format!("{op}: {e}") },
        Some(ErrorCode::NotADatabase) => StoreError::NotAStore { path, detail: e.to_string() },
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StoreError::Busy { path, op: op.to_string(), timeout_ms }
        }
        _ => match e {
            // Values of the wrong type can only come from a file edited behind latscope's back.
            rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::IntegralValueOutOfRange(..) => {
                StoreError::Corrupt { path, detail: format!("{op}: {e}") }
            }
            _ => StoreError::Sqlite { path, op: op.to_string(), source: e },
        },
    }
}

//! The schema (version 1), how a file is recognised as a store, and how a new one is set up.

use crate::error::{Result, StoreError};
use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

/// The schema version this build writes and reads (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// `PRAGMA application_id` of every latscope store: `"LSTS"` (latscope time series).
pub const APPLICATION_ID: i32 = 0x4C53_5453;

/// The tables and indexes of schema version 1. `docs/STORE.md` documents them.
pub(crate) const DDL: &str = "
CREATE TABLE meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) STRICT;
CREATE TABLE series (
    id          INTEGER PRIMARY KEY,
    host        TEXT NOT NULL,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    unit        TEXT NOT NULL,
    description TEXT NOT NULL,
    params      TEXT NOT NULL,
    UNIQUE (host, name)
) STRICT;
CREATE TABLE hist (
    series  INTEGER NOT NULL REFERENCES series (id),
    hour    INTEGER NOT NULL,
    count   INTEGER NOT NULL,
    sum     INTEGER NOT NULL,
    min     INTEGER NOT NULL,
    max     INTEGER NOT NULL,
    updated INTEGER NOT NULL,
    data    BLOB NOT NULL,
    PRIMARY KEY (series, hour)
) STRICT;
CREATE INDEX hist_by_hour ON hist (hour);
";

/// The SQLite file header is 100 bytes; these are the fields the pre-check reads.
const HEADER_LEN: usize = 100;
const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// `(type, name, tbl_name, sql)` of a schema object, as in `sqlite_schema`.
pub(crate) type Object = (String, String, String, Option<String>);

/// `(type, name, tbl_name, sql)` of every schema object a version-1 store has, as SQLite itself
/// stores them (normalised), obtained by creating the schema in a scratch in-memory database.
pub(crate) fn expected_objects() -> &'static [Object] {
    static EXPECTED: OnceLock<Vec<Object>> = OnceLock::new();
    EXPECTED.get_or_init(|| {
        let conn = rusqlite::Connection::open_in_memory().expect("in-memory SQLite opens");
        conn.execute_batch(DDL).expect("the built-in schema is valid SQL");
        objects(&conn).expect("sqlite_schema of an in-memory database reads")
    })
}

/// The schema objects of `conn`'s main database, sorted by name.
pub(crate) fn objects(conn: &rusqlite::Connection) -> rusqlite::Result<Vec<Object>> {
    let mut st = conn.prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name")?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    rows.collect()
}

/// Looks at the raw file before SQLite does, so that the commonest damage gets a precise message:
/// a file that is not SQLite at all, and a store cut short (by a copy, a full disk, a truncate).
/// `len` is the file's size (non-zero).
pub(crate) fn precheck(path: &Path, len: u64) -> Result<()> {
    let io = |op: &str, source| StoreError::Io { path: path.to_path_buf(), op: op.to_string(), source };
    let mut header = [0u8; HEADER_LEN];
    let n = std::fs::File::open(path)
        .and_then(|f| f.take(HEADER_LEN as u64).read(&mut header))
        .map_err(|e| io("reading the file header", e))?;
    let not_a_store = |detail: String| StoreError::NotAStore { path: path.to_path_buf(), detail };
    if n < MAGIC.len() || &header[..MAGIC.len()] != MAGIC {
        let shown: String = header[..n.min(16)]
            .iter()
            .map(|&b| if b.is_ascii_graphic() || b == b' ' { char::from(b) } else { '.' })
            .collect();
        return Err(not_a_store(format!("not an SQLite database (it starts with {shown:?}, {len} bytes)")));
    }
    let corrupt = |detail: String| StoreError::Corrupt { path: path.to_path_buf(), detail };
    if n < HEADER_LEN {
        return Err(corrupt(format!("only {len} bytes: the file was cut short inside its header")));
    }
    let be16 = |at: usize| u32::from(u16::from_be_bytes([header[at], header[at + 1]]));
    let be32 = |at: usize| u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
    let page_size = match be16(16) {
        1 => 65_536,
        p if (512..=32_768).contains(&p) && p.is_power_of_two() => p,
        p => return Err(corrupt(format!("page size {p} in the header is invalid"))),
    };
    // The header's page count is trustworthy only when its validity counter matches the change
    // counter, and the file alone is complete only when no write-ahead log holds newer pages.
    let pages = be32(28);
    let wal_has_frames = wal_path(path).metadata().is_ok_and(|m| m.len() > 0);
    if pages > 0 && be32(24) == be32(92) && !wal_has_frames {
        let want = u64::from(pages) * u64::from(page_size);
        if len < want {
            return Err(corrupt(format!(
                "truncated: its header counts {pages} pages of {page_size} bytes ({want} bytes) but the \
                 file has {len} bytes"
            )));
        }
    }
    Ok(())
}

/// SQLite's write-ahead log next to the store.
pub(crate) fn wal_path(path: &Path) -> std::path::PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push("-wal");
    s.into()
}

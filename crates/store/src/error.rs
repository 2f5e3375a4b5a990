//! Errors of the store. Every message names the store file and says what is wrong and, where
//! there is something to do, what to do.

use std::path::PathBuf;

/// Everything that can go wrong opening, reading or writing a store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The operating system refused an operation on the file (missing, no permission, full disk).
    #[error("{}: {op}: {source}", path.display())]
    Io {
        /// The store file.
        path: PathBuf,
        /// What was being done.
        op: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The store or one of SQLite's files beside it is a symbolic link, has another hard
    /// link, or is not a regular file: never written through (the message names both ends).
    #[error("{0}")]
    UnsafePath(#[from] latscope_trace::OutputError),

    /// The file is not a latscope store: not SQLite at all, or an SQLite database of something else.
    #[error("{}: not a latscope store: {detail}", path.display())]
    NotAStore {
        /// The store file.
        path: PathBuf,
        /// What was found instead.
        detail: String,
    },

    /// The store was written by a newer latscope with a schema this build cannot read.
    #[error(
        "{}: store schema version {found} is newer than this latscope reads (version {supported}): \
         use a newer latscope",
        path.display()
    )]
    NewerSchema {
        /// The store file.
        path: PathBuf,
        /// The version in the file.
        found: i64,
        /// The version this build reads and writes.
        supported: i64,
    },

    /// The file is a latscope store that was damaged: truncated, overwritten, edited by hand.
    #[error("{}: damaged store: {detail}", path.display())]
    Corrupt {
        /// The store file.
        path: PathBuf,
        /// What is wrong, and where (table, series, hour).
        detail: String,
    },

    /// Another process held the write lock for longer than the busy timeout.
    #[error(
        "{}: {op}: the store stayed locked by another writer for more than {timeout_ms} ms",
        path.display()
    )]
    Busy {
        /// The store file.
        path: PathBuf,
        /// What was being done.
        op: String,
        /// How long this writer waited.
        timeout_ms: u64,
    },

    /// A write was asked of a store opened read-only.
    #[error("{}: cannot {op}: the store was opened read-only", path.display())]
    ReadOnly {
        /// The store file.
        path: PathBuf,
        /// What was asked.
        op: String,
    },

    /// No series has this id.
    #[error("{}: no series with id {id}", path.display())]
    NoSuchSeries {
        /// The store file.
        path: PathBuf,
        /// The id asked for.
        id: i64,
    },

    /// A series declaration the store does not accept (empty name, control characters, ...).
    #[error("invalid series: {0}")]
    InvalidSeries(String),

    /// Any other SQLite failure.
    #[error("{}: {op}: {source}", path.display())]
    Sqlite {
        /// The store file.
        path: PathBuf,
        /// What was being done.
        op: String,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
}

/// Result of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

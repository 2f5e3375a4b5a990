//! The errors of every exporter.

use std::path::PathBuf;

/// Everything that can go wrong exporting. Every message names the file or the option at fault and
/// what was found.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Scanning a trace failed (the message names the file).
    #[error(transparent)]
    Scan(#[from] latscope_scan::ScanError),

    /// The operating system refused an operation on an output file or directory.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was being done (`"create"`, `"rename into place"`, ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// An output file could not be prepared or put in place (the message names it; a symlink
    /// or a hard-linked file at the destination is refused).
    #[error(transparent)]
    Output(#[from] latscope_trace::OutputError),

    /// The Parquet encoder failed.
    #[error("cannot write Parquet file {}: {source}", path.display())]
    Parquet {
        /// The file being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: parquet::errors::ParquetError,
    },

    /// An option or argument is unusable; the message says which and why.
    #[error("{0}")]
    Invalid(String),

    /// A metric, label or Graphite path name is not allowed.
    #[error("invalid {what} '{name}': {why}")]
    Name {
        /// `"metric name"`, `"label name"`, ...
        what: &'static str,
        /// The name given.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },

    /// A Perfetto trace would be larger than allowed (`at_ns`: how far into the recording the
    /// export had got, ns since its start).
    #[error("the Perfetto trace would be larger than {limit} bytes (passed at {:.3} s into the recording)", *at_ns as f64 / 1e9)]
    TooLarge {
        /// The limit, bytes.
        limit: u64,
        /// The start of the event being written when the file reached it, ns since the start
        /// of the recording.
        at_ns: u64,
    },

    /// The metrics encoder failed.
    #[error("cannot encode metrics: {0}")]
    Encode(String),
}

impl ExportError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ExportError::Io { op, path: path.into(), source }
    }

    pub(crate) fn parquet(path: impl Into<PathBuf>, source: parquet::errors::ParquetError) -> Self {
        ExportError::Parquet { path: path.into(), source }
    }
}

//! Errors of the replay stages.

use std::path::PathBuf;

/// What went wrong while preparing, loading, initialising or running a replay.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An output file could not be written safely (it is the input, or the new file could not be
    /// made or renamed into place).
    #[error(transparent)]
    Output(#[from] latscope_trace::OutputError),
    /// The plan file is not a plan, is cut short, or is damaged.
    #[error("{}: {detail}", path.display())]
    PlanFile {
        /// The plan file.
        path: PathBuf,
        /// What is wrong, and where.
        detail: String,
    },
    /// The plan decodes but breaks a rule the executor relies on (a hostile or buggy plan).
    #[error("the plan is inconsistent: {0}; it was not written by 'latscope replay prepare', or was altered")]
    PlanInvalid(String),
    /// The trace cannot be read.
    #[error("cannot read the trace {}: {detail}", path.display())]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// The cause.
        detail: String,
    },
    /// The trace lacks what a replay needs.
    #[error("the trace cannot be replayed: {0}")]
    NotReplayable(String),
    /// The filter expression does not parse.
    #[error("invalid filter:\n{0}")]
    Filter(String),
    /// The sandbox is missing, foreign, unsafe or not writable.
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// A bad option value.
    #[error("{0}")]
    Usage(String),
    /// A system call the replay needs failed (not one of the replayed operations).
    #[error("{what}: {source}")]
    Sys {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl ReplayError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> ReplayError {
        ReplayError::Io { path: path.into(), source }
    }
    /// A failed system call, with the last OS error.
    pub fn sys(what: impl Into<String>) -> ReplayError {
        ReplayError::Sys { what: what.into(), source: std::io::Error::last_os_error() }
    }
}

/// Result of the replay stages.
pub type Result<T, E = ReplayError> = std::result::Result<T, E>;

//! Errors of probes and of probe definitions.

use std::path::PathBuf;

/// A probe that cannot be built or cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// This machine does not offer what the probe needs.
    #[error("probe {probe}: not available here: {why}")]
    Unsupported {
        /// The probe's name.
        probe: String,
        /// What is missing.
        why: String,
    },
    /// Parameters that cannot work together (a region smaller than a block, an unaligned O_DIRECT size).
    #[error("probe {probe}: {why}")]
    Invalid {
        /// The probe's name.
        probe: String,
        /// What is wrong and what to do.
        why: String,
    },
    /// An operation on the probe's file or command failed.
    #[error("probe {probe}: {op} {}: {source}", path.display())]
    Io {
        /// The probe's name.
        probe: String,
        /// What was being done.
        op: String,
        /// The file or command.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// A probe definition (flag or config file) that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct ConfigError {
    /// Where: the flag text, or `FILE` / `FILE: probe 3`.
    pub origin: String,
    /// What is wrong, with the accepted values.
    pub message: String,
}

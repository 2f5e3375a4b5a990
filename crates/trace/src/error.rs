//! Errors and warnings of trace reading and writing.

use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong reading or writing a trace file.
///
/// Every message names the file, says where (the byte offset, and the block
/// number for block problems) and what was found, and what to do when there is
/// something to do.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The operating system refused an operation on the file.
    #[error("{}: {op}: {source}", path.display())]
    Io {
        /// The trace file.
        path: PathBuf,
        /// What was being done (`"opening"`, `"reading block 3 at byte 4096"`, ...).
        op: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The file has no bytes at all.
    #[error(
        "{}: empty file (0 bytes), not a trace: the recording was stopped before it wrote its header",
        path.display()
    )]
    Empty {
        /// The trace file.
        path: PathBuf,
    },

    /// A stream (pipe, FIFO, device) that ended before its first byte.
    #[error(
        "{}: {what} ended before its first byte: no trace came through (did the writing side fail? its \
         messages are on its own standard error)",
        path.display()
    )]
    EmptyStream {
        /// The stream's name (`-` for standard input).
        path: PathBuf,
        /// What it is ("standard input", "the FIFO", ...).
        what: String,
    },

    /// Something that cannot hold a trace: a directory, a socket, a terminal.
    #[error("{}: cannot read a trace from {what}", path.display())]
    NotReadable {
        /// The path given.
        path: PathBuf,
        /// What it is, and what to do.
        what: String,
    },

    /// The file is not a latscope trace (not Arrow at all, or an Arrow stream of something else).
    #[error("{}: not a latscope trace: {detail}", path.display())]
    NotATrace {
        /// The trace file.
        path: PathBuf,
        /// What was found instead.
        detail: String,
    },

    /// The file was written by a newer latscope, in a format version this build cannot read.
    #[error(
        "{}: trace format version {found} is newer than this latscope reads (up to version {supported}): \
         read it with a newer latscope",
        path.display()
    )]
    UnsupportedVersion {
        /// The trace file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },

    /// The file ends before the end of its header: nothing was recorded.
    #[error(
        "{}: file ends inside the trace header at byte {offset} (the header needs {needed} bytes): \
         the recording was stopped before it wrote any event; there is nothing to read",
        path.display()
    )]
    HeaderTruncated {
        /// The trace file.
        path: PathBuf,
        /// File size.
        offset: u64,
        /// Bytes the header message needs.
        needed: u64,
    },

    /// The header (schema and machine description) is damaged or inconsistent.
    #[error("{}: bad trace header at byte {offset}: {detail}", path.display())]
    BadHeader {
        /// The trace file.
        path: PathBuf,
        /// Offset of the header message.
        offset: u64,
        /// What is wrong.
        detail: String,
    },

    /// A block's stored CRC-32C does not match its contents.
    #[error(
        "{}: block {block} at byte {offset} is corrupt: checksum mismatch (stored crc32c {stored:08x}, \
         computed {computed:08x} over {body_len} bytes); the other blocks can still be read by skipping corrupt blocks",
        path.display()
    )]
    Checksum {
        /// The trace file.
        path: PathBuf,
        /// Block number (0-based).
        block: u64,
        /// Offset of the block's message in the file.
        offset: u64,
        /// CRC stored in the block's metadata.
        stored: u32,
        /// CRC of the bytes in the file.
        computed: u32,
        /// Length of the checksummed body.
        body_len: u64,
    },

    /// A block cannot be decoded (damaged framing, metadata or data).
    #[error(
        "{}: block {block} at byte {offset} is corrupt: {detail}; the other blocks can still be read by skipping corrupt blocks",
        path.display()
    )]
    CorruptBlock {
        /// The trace file.
        path: PathBuf,
        /// Block number (0-based; the expected number when the block's own metadata is unreadable).
        block: u64,
        /// Offset of the block's message in the file.
        offset: u64,
        /// What is wrong.
        detail: String,
    },

    /// An [`latscope_event::EventBatch`] given to the writer is inconsistent (columns of different lengths, bad offsets).
    #[error("{}: cannot write block {block}: invalid event batch: {detail}", path.display())]
    InvalidBatch {
        /// The trace file.
        path: PathBuf,
        /// Number the block would have had.
        block: u64,
        /// What is wrong.
        detail: String,
    },

    /// Arrow could not encode a block (should not happen for a valid batch).
    #[error("{}: cannot encode block {block}: {detail}", path.display())]
    Encode {
        /// The trace file.
        path: PathBuf,
        /// Number the block would have had.
        block: u64,
        /// Arrow's message.
        detail: String,
    },

    /// The events asked for do not fit in one [`latscope_event::EventBatch`] (more than 4 GiB of strings).
    #[error("{}: {detail}: read the trace block by block instead", path.display())]
    TooLarge {
        /// The trace file.
        path: PathBuf,
        /// What does not fit.
        detail: String,
    },

    /// The output file could not be prepared or put in place (busy, exists, same as an input,
    /// permissions).
    #[error(transparent)]
    Output(#[from] crate::OutputError),

    /// The writer failed earlier and accepts no more blocks.
    #[error(
        "{}: the trace writer stopped after an earlier error ({first}); the file holds the {blocks} blocks written \
         before it and can be read up to there",
        path.display()
    )]
    WriterFailed {
        /// The trace file.
        path: PathBuf,
        /// The first error.
        first: String,
        /// Complete blocks in the file.
        blocks: u64,
    },
}

impl TraceError {
    /// True for problems confined to one block ([`TraceError::Checksum`], [`TraceError::CorruptBlock`]):
    /// a reader opened with [`crate::ReadOptions::skip_corrupt`] continues after them.
    pub fn is_corrupt_block(&self) -> bool {
        matches!(self, TraceError::Checksum { .. } | TraceError::CorruptBlock { .. })
    }

    /// The byte offset the error is about, if it is about one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            TraceError::HeaderTruncated { offset, .. }
            | TraceError::BadHeader { offset, .. }
            | TraceError::Checksum { offset, .. }
            | TraceError::CorruptBlock { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// The block number the error is about, if it is about one.
    pub fn block(&self) -> Option<u64> {
        match self {
            TraceError::Checksum { block, .. }
            | TraceError::CorruptBlock { block, .. }
            | TraceError::InvalidBatch { block, .. }
            | TraceError::Encode { block, .. } => Some(*block),
            _ => None,
        }
    }
}

/// Something a reader noticed that does not stop it from returning the events it could read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The trace file.
    pub path: PathBuf,
    /// What was noticed.
    pub kind: WarningKind,
}

/// The kinds of [`Warning`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WarningKind {
    /// The file ends inside a block (the recording was killed or the disk filled up while writing it).
    Truncated {
        /// Number of the incomplete block.
        block: u64,
        /// Offset where the incomplete block starts.
        offset: u64,
        /// Bytes of the incomplete block present in the file (ignored).
        ignored_bytes: u64,
        /// Complete blocks read.
        blocks_read: u64,
        /// Events read from the complete blocks.
        events_read: u64,
    },
    /// The file ends cleanly after a block, but without the summary a clean close writes.
    NotClosed {
        /// Offset of the end of the file.
        offset: u64,
        /// Complete blocks read.
        blocks_read: u64,
        /// Events read.
        events_read: u64,
    },
    /// The summary is there but the end-of-stream marker after it is not (harmless).
    NoEndMarker {
        /// Offset where the marker should be.
        offset: u64,
    },
    /// Bytes follow the end-of-stream marker (ignored).
    TrailingData {
        /// Offset of the first ignored byte.
        offset: u64,
        /// Number of bytes ignored.
        bytes: u64,
    },
    /// Block numbers jump: blocks are missing (for example skipped as unreadable).
    MissingBlocks {
        /// The block number expected.
        expected: u64,
        /// The block number found.
        found: u64,
        /// Offset of the block found.
        offset: u64,
    },
    /// After a corrupt block no further intact block was found: the rest of the file was skipped.
    Unreadable {
        /// Offset of the first skipped byte.
        offset: u64,
        /// Number of bytes skipped.
        bytes: u64,
    },
    /// Something the file holds is past a reader's bound (a value longer than its bound, a table
    /// with more entries than its bound): it was cut short or left out, as `detail` says.
    Bounded {
        /// What was cut or left out, and where.
        detail: String,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.kind)
    }
}

impl fmt::Display for WarningKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WarningKind::Truncated { block, offset, ignored_bytes, blocks_read, events_read } => write!(
                f,
                "file ends inside block {block} at byte {offset}: {ignored_bytes} bytes of an incomplete block ignored; \
                 the recording was not closed cleanly (no summary); {events_read} events in {blocks_read} complete blocks were read"
            ),
            WarningKind::NotClosed { offset, blocks_read: 0, .. } => write!(
                f,
                "file ends after the header at byte {offset} without any block or summary: the recording was not \
                 closed cleanly (killed, crashed or disk full) and holds no events"
            ),
            WarningKind::NotClosed { offset, blocks_read, events_read } => write!(
                f,
                "file ends after block {} at byte {offset} without a summary: the recording was not closed cleanly \
                 (killed, crashed or disk full); {events_read} events in {blocks_read} complete blocks were read, \
                 events recorded after them were never written",
                blocks_read - 1
            ),
            WarningKind::NoEndMarker { offset } => {
                write!(f, "the end-of-stream marker is missing at byte {offset} (the summary is complete; harmless)")
            }
            WarningKind::TrailingData { offset, bytes } => {
                write!(f, "{bytes} bytes after the end of the trace at byte {offset} ignored")
            }
            WarningKind::MissingBlocks { expected, found, offset } => write!(
                f,
                "block {found} at byte {offset} found where block {expected} was expected: {} blocks are missing",
                found.saturating_sub(*expected)
            ),
            WarningKind::Unreadable { offset, bytes } => write!(
                f,
                "no intact block found in the {bytes} bytes from byte {offset} to the end of the file: they were skipped"
            ),
            WarningKind::Bounded { detail } => f.write_str(detail),
        }
    }
}

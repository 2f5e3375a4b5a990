//! The latscope trace file: compressed, versioned, crash-safe.
//!
//! A trace is an [Arrow IPC stream](https://arrow.apache.org/docs/format/Columnar.html#ipc-streaming-format)
//! that pyarrow, Polars and DuckDB read as it is:
//!
//! * the schema message has one non-nullable column per [`EventBatch`](latscope_event::EventBatch)
//!   field ([`Column`]) and carries the format version and the
//!   [`TraceHeader`](latscope_event::TraceHeader) (machine, mounts, block devices, processes) as JSON
//!   in its metadata;
//! * every block is one record batch message with zstd-compressed buffers, whose message
//!   metadata holds its number, the CRC-32C of its body, and running event and loss counts;
//! * a cleanly closed trace ends with a 0-row record batch holding the [`Summary`], then the
//!   end-of-stream marker.
//!
//! A file cut short (`kill -9`, full disk) is readable up to its last complete block, with a
//! [`Warning`]; a corrupt block is reported with its number and offset and can be skipped.
//! The full format is described in `docs/TRACE_FORMAT.md`.
//!
//! Writing never destroys a file ([`Staged`] outputs): a trace is written to a
//! new file (mode 0600) that is renamed into place when the writer commits, at once or, with
//! [`WriterOptions::staged`], when the caller says so ([`TraceWriter::commit`]); the file it
//! replaces is kept as `FILE.old` ([`Existing`]); a second writer of the same file refuses
//! ([`OutputError::Busy`]). `-` is standard output, written as a stream. Derived outputs use
//! [`AtomicFile`], and [`check_output_not_input`] refuses an output that is an input.
//!
//! Reading takes a file, or a stream (a pipe, a FIFO, standard input as `-`, or any
//! [`std::io::Read`] with [`TraceReader::from_reader`]). No input makes a reader panic or
//! allocate beyond one block's bounds ([`MAX_BLOCK_ROWS`], [`MAX_BLOCK_BYTES`]).
//!
//! Files latscope reads by name that other users may control (container runtimes' state,
//! `/proc` and `/sys` files, the files behind a process's mappings) are read through
//! [`safe_read`]: regular files only, never blocking on a FIFO, inside the directory they
//! belong to, and a bounded number of bytes.
//!
//! The writer encodes blocks straight from [`EventBatch`](latscope_event::EventBatch) columns;
//! [`ThreadedTraceWriter`] does it off the caller's thread, on one thread per CPU
//! ([`WriterOptions::threads`]).
//!
//! Reading is fastest with a projection (only the buffers of the columns asked for are read,
//! verified against their own checksums and decompressed) and one
//! recycled batch ([`TraceReader::next_batch_into`]), which saves allocating every column of
//! every block. Every block's metadata also holds a zone map ([`BlockMeta`]: its time, latency
//! and end-time ranges and its events per kind); with [`TraceReader::next_batch_pruned`] a caller
//! sees it before the block is decoded and skips the columns it makes unnecessary.
//!
//! Synthetic traces for tests, benchmarks and examples (seeded, deterministic) are in
//! [`synth`].
//!
//! ```no_run
//! use latscope_event::{EventBatch, TraceHeader};
//! use latscope_trace::{Column, Summary, TraceReader, TraceWriter};
//!
//! # fn main() -> Result<(), latscope_trace::TraceError> {
//! let mut w = TraceWriter::create("/tmp/t.lst", &TraceHeader::default())?;
//! w.write_batch(&EventBatch::with_capacity(0), 0)?;
//! w.finish(Summary::default())?;
//!
//! let mut r = TraceReader::open_projected("/tmp/t.lst", &[Column::Ts, Column::Lat])?;
//! while let Some(batch) = r.next_batch() {
//!     let batch = batch?;
//!     println!("{} events", batch.len());
//! }
//! for w in r.warnings() {
//!     eprintln!("warning: {w}");
//! }
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod column;
mod decode;
mod encode;
mod error;
#[doc(hidden)]
pub mod fuzz_support;
mod meta;
mod output;
mod reader;
pub mod safe_read;
mod sealed;
mod source;
pub mod synth;
mod tables;
mod threaded;
mod writer;

pub use column::{arrow_schema, Column, COLUMN_COUNT};
pub use error::{TraceError, Warning, WarningKind};
pub use meta::{
    meta_digest, schema_digest, BlockMeta, StacksMissing, Summary, KEY_BUFFER_CRCS, KEY_CRC, KEY_END_MAX, KEY_END_MIN,
    KEY_EVENTS_TOTAL, KEY_FORMAT_VERSION, KEY_HEADER, KEY_HEADER_CRC, KEY_KINDS, KEY_LAT_MAX, KEY_LAT_MIN,
    KEY_LOST_TOTAL, KEY_META_CRC, KEY_SCHEMA_CRC, KEY_SEQ, KEY_SUMMARY, KEY_TS_MAX, KEY_TS_MIN,
};
pub use output::{
    check_output_not_input, open_in_place, set_stopping, stop_at, stopping_flag, AtomicFile, Existing, InPlace,
    OutputError, Staged, StagedOptions, STALLED_READER,
};
pub use reader::{BlockZone, ReadOptions, ReadStats, TraceReader, MAX_BLOCK_BYTES, MAX_BLOCK_ROWS, MAX_HEADER_BYTES};
pub use sealed::{BlockSealer, SealedBlock};
pub use threaded::{ThreadedTraceWriter, DEFAULT_QUEUE_BATCHES};
pub use writer::{Compression, TraceWriter, WriterOptions, DEFAULT_MAX_BLOCK_EVENTS, MAX_ENCODE_THREADS};

/// The trace format version this build writes, and the newest it reads.
pub use latscope_event::TRACE_FORMAT_VERSION;

//! The interface between where events come from and what consumes them.
//!
//! Sources (a trace file scanned through a filter, the live probes) hand out [`Chunk`]s: a batch,
//! the rows of it that matched the filter, and what the block's zone map says about them.
//! Consumers (heat maps, histograms, the spectrogram, the replay planner) take chunks and never
//! learn which source produced them; that is what lets a view run on a file and live alike.
//!
//! In-kernel aggregation has no events: it is a [`CountSource`] of histogram counts per group.

use crate::{EventBatch, TraceHeader};
use std::time::Duration;

/// An error from a source, with its context already in the message (file, block, offset).
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

/// What a block's zone map says about the events a consumer asked for (see
/// [`ZonePlan`]): enough to skip decoding columns. The default says nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Zone {
    /// No event of the block has the wanted kind: nothing to count (nothing was decoded).
    pub empty: bool,
    /// Every event of the block has the wanted kind (`kind` was not decoded).
    pub all_kind: bool,
    /// Every wanted event of the block falls in the bucket of this time (`ts` was not decoded).
    pub at: Option<u64>,
}

/// A bucketing of time (a heat-map column, a spectrogram row, a timeline interval).
pub type Bucket = std::sync::Arc<dyn Fn(u64) -> Option<u64> + Send + Sync>;

/// What a consumer counts, so that a source with zone maps can skip columns and blocks: events of
/// `kind`, bucketed by start time (or end time with `by_end`) with `bucket`.
#[derive(Clone)]
pub struct ZonePlan {
    /// The kind counted.
    pub kind: crate::EventKind,
    /// Bucket by end time (start plus latency) instead of start time.
    pub by_end: bool,
    /// Only claim a block lies in one bucket when every event of the block has the kind (the
    /// consumer then reads `lat` alone; otherwise it reads `kind` too).
    pub at_needs_all_kind: bool,
    /// The time bucketing, or `None` when the consumer has no time axis.
    pub bucket: Option<Bucket>,
}

impl std::fmt::Debug for ZonePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZonePlan")
            .field("kind", &self.kind)
            .field("by_end", &self.by_end)
            .field("at_needs_all_kind", &self.at_needs_all_kind)
            .field("bucket", &self.bucket.is_some())
            .finish()
    }
}

impl ZonePlan {
    /// Counting events of `kind` without a time axis (a histogram).
    pub fn timeless(kind: crate::EventKind) -> Self {
        ZonePlan { kind, by_end: false, at_needs_all_kind: false, bucket: None }
    }

    /// The bucket of time `t`, if the plan has a time axis.
    pub fn bucket_of(&self, t: u64) -> Option<u64> {
        self.bucket.as_ref().and_then(|b| b(t))
    }
}

/// Events handed from a source to a consumer.
#[derive(Debug, Clone, Copy)]
pub struct Chunk<'a> {
    /// The batch. Columns the consumer did not ask for may hold zeros.
    pub batch: &'a EventBatch,
    /// The rows of `batch` that match the source's filter, in order.
    pub rows: &'a [u32],
    /// What the block's zone map says (only from sources that have one, and only with no filter).
    pub zone: Zone,
}

impl Chunk<'_> {
    /// True when every row of the batch matched (no filter, or everything passed).
    pub fn all_rows(&self) -> bool {
        self.rows.len() == self.batch.len()
    }
}

/// A source of events: a trace file read through a filter, or the live probes.
pub trait EventSource {
    /// The header: the machine, the recording, the snapshot taken at its start.
    fn header(&self) -> &TraceHeader;

    /// The next chunk, waiting at most `wait` for one (files do not wait). `Ok(None)` when the
    /// source is exhausted (the end of a file); live sources return empty chunks instead.
    fn next_chunk(&mut self, wait: Duration) -> Result<Option<Chunk<'_>>, SourceError>;

    /// [`EventSource::next_chunk`], with the header when reading the chunk may have added to
    /// it (cgroups met since the start: containers started since); `None` when it stays as
    /// it was. Sources that learn while reading (a live session, a trace) override this.
    fn next_chunk_and_header(
        &mut self,
        wait: Duration,
    ) -> Result<Option<(Chunk<'_>, Option<&TraceHeader>)>, SourceError> {
        Ok(self.next_chunk(wait)?.map(|c| (c, None)))
    }

    /// Events lost before they reached the source (ring buffer full), so far.
    fn lost(&self) -> u64 {
        0
    }

    /// A short description for status lines: the file name, or "live: event stream".
    fn describe(&self) -> String;

    /// What a recorded source met so far that its reader must be told: damage skipped (the
    /// output is incomplete) and warnings (a file cut short). Live sources report losses
    /// through [`EventSource::lost`] instead.
    fn damage(&self) -> SourceDamage {
        SourceDamage::default()
    }
}

/// Damage and warnings met by a recorded source ([`EventSource::damage`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceDamage {
    /// Parts that could not be read and were skipped, one message each.
    pub skipped: Vec<String>,
    /// Warnings about the input (cut short, not closed cleanly).
    pub warnings: Vec<String>,
}

/// What in-kernel histogram counts belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CountKey {
    /// Everything.
    All,
    /// An fd's I/O class: `file`, `net`, `ipc` or `other` ([`crate::FdType::io_class`]).
    Class(&'static str),
    /// A syscall number.
    Syscall(u16),
    /// A block device (`major << 20 | minor`).
    Dev(u32),
}

/// Cumulative histogram counts per group, from in-kernel aggregation.
pub trait CountSource {
    /// Counts since the start, per group: one count per kernel bucket (the log-linear scheme of
    /// the probes: 16 sub-buckets per power of two).
    fn read_counts(&mut self) -> Result<Vec<(CountKey, Vec<u64>)>, SourceError>;

    /// Switch to streaming events (aggregation keeps none, drill-down needs them). The counts
    /// read so far stay valid; the returned source yields events from now on.
    fn into_events(self: Box<Self>) -> Result<Box<dyn EventSource>, SourceError>;

    /// A short description for status lines.
    fn describe(&self) -> String;
}

//! Blocks encoded apart from any file, written later into one: what a flight recorder keeps in
//! memory and dumps, and what rotating files are made of.
//!
//! A [`SealedBlock`] is a block exactly as a trace file holds it (compressed buffers, checksums,
//! zone map, the stack and cgroup table entries its events brought), minus the three things
//! that depend on the file it ends up in: its number and the running event and loss counts.
//! [`TraceWriter::write_sealed`] gives it those and writes its body unchanged, so a window cut
//! from the middle of a recording is an ordinary trace whose blocks are numbered from 0, read
//! without a warning by every reader.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use latscope_event::EventBatch;

use crate::encode::{validate_batch, EncodedBlock, Encoder};
use crate::meta::BlockMeta;
use crate::writer::decoded_bytes;
use crate::{Compression, TraceError, DEFAULT_MAX_BLOCK_EVENTS};

/// One encoded block kept apart from any file (see the module documentation).
#[derive(Debug, Clone)]
pub struct SealedBlock {
    /// The framed message as encoded (number and running counts are rewritten when written).
    pub(crate) frame: Vec<u8>,
    /// The body: compressed buffers, written as they are.
    pub(crate) body: Vec<u8>,
    /// The metadata the frame holds.
    pub(crate) meta: BlockMeta,
    events: usize,
    lost_total: u64,
}

impl SealedBlock {
    /// Events in the block.
    pub fn events(&self) -> usize {
        self.events
    }
    /// Bytes the block takes in a file (its metadata may differ by a few bytes once renumbered).
    pub fn file_bytes(&self) -> u64 {
        (self.frame.len() + self.body.len()) as u64
    }
    /// Bytes of memory the block holds.
    pub fn mem_bytes(&self) -> u64 {
        (self.frame.capacity()
            + self.body.capacity()
            + self.meta.stacks.as_ref().map_or(0, |s| s.capacity())
            + self.meta.cgroups.as_ref().map_or(0, |s| s.capacity())
            + self.meta.buffer_crc32c.as_ref().map_or(0, |v| v.capacity() * 4)
            + std::mem::size_of::<SealedBlock>()) as u64
    }
    /// Smallest and largest start time (`ts`) of its events; `None` for an empty block.
    pub fn ts_range(&self) -> Option<(u64, u64)> {
        self.meta.ts_min.zip(self.meta.ts_max)
    }
    /// Largest end time (`ts + lat`) of its events.
    pub fn end_max(&self) -> Option<u64> {
        self.meta.end_max
    }
    /// Events per kind: syscalls, block requests, process events.
    pub fn kinds(&self) -> [u64; 3] {
        self.meta.kinds.unwrap_or_default()
    }
    /// Events the probes had lost when it was sealed, since the recording started.
    pub fn lost_total(&self) -> u64 {
        self.lost_total
    }
    /// The stack table entries first used by its events (one JSON object per line).
    pub fn stacks(&self) -> &str {
        self.meta.stacks.as_deref().unwrap_or("")
    }
    /// The cgroup table entries it carries (one JSON object per line).
    pub fn cgroups(&self) -> &str {
        self.meta.cgroups.as_deref().unwrap_or("")
    }
}

/// Encodes batches into [`SealedBlock`]s, as [`TraceWriter`](crate::TraceWriter) encodes them
/// for a file (same compression, zone maps, checksums and block size bound).
pub struct BlockSealer {
    enc: Encoder,
    scratch: EncodedBlock,
    max_block_events: usize,
    /// What blocks are sealed for, in messages.
    name: PathBuf,
    sealed: u64,
}

impl std::fmt::Debug for BlockSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockSealer").field("name", &self.name).field("sealed", &self.sealed).finish_non_exhaustive()
    }
}

impl BlockSealer {
    /// A sealer compressing as `compression`; `name` says in error messages what the blocks are
    /// for (a ring, a directory).
    pub fn new(compression: Compression, name: impl AsRef<Path>) -> Result<BlockSealer, TraceError> {
        let name = name.as_ref().to_path_buf();
        let enc =
            Encoder::new(compression).map_err(|detail| TraceError::Encode { path: name.clone(), block: 0, detail })?;
        Ok(BlockSealer {
            enc,
            scratch: EncodedBlock::default(),
            max_block_events: DEFAULT_MAX_BLOCK_EVENTS,
            name,
            sealed: 0,
        })
    }

    /// Seal `batch` (with `lost_total`, the events the probes had lost so far) into one block,
    /// or several when it holds more than a block may; its stack and cgroup table entries go
    /// with the first. An empty batch seals nothing.
    pub fn seal(&mut self, batch: &EventBatch, lost_total: u64) -> Result<Vec<Arc<SealedBlock>>, TraceError> {
        validate_batch(batch).map_err(|detail| TraceError::InvalidBatch {
            path: self.name.clone(),
            block: self.sealed,
            detail,
        })?;
        let n = batch.len();
        let mut out = Vec::with_capacity(1);
        let mut start = 0;
        while start < n {
            let mut len = (n - start).min(self.max_block_events);
            while len > 1 && decoded_bytes(batch, start..start + len) > crate::MAX_BLOCK_BYTES {
                len /= 2;
            }
            let first = start == 0;
            let meta = BlockMeta {
                stacks: (first && !batch.stacks.is_empty()).then(|| batch.stacks.clone()),
                cgroups: (first && !batch.cgroups.is_empty()).then(|| batch.cgroups.clone()),
                ..Default::default()
            };
            let block = self.sealed;
            self.enc
                .encode(batch, start..start + len, meta, true, &mut self.scratch)
                .map_err(|detail| TraceError::Encode { path: self.name.clone(), block, detail })?;
            let meta = self.enc.frame_meta(&self.scratch.frame).map_err(|detail| TraceError::Encode {
                path: self.name.clone(),
                block,
                detail,
            })?;
            // Exact-size copies: the scratch buffers keep the room zstd reserves.
            out.push(Arc::new(SealedBlock {
                frame: self.scratch.frame.clone(),
                body: self.scratch.body.clone(),
                meta,
                events: len,
                lost_total,
            }));
            self.sealed += 1;
            start += len;
        }
        Ok(out)
    }
}

//! The ring: the last blocks of a recording, in memory, bounded in bytes and in time.

use latscope_trace::SealedBlock;
use std::collections::VecDeque;
use std::sync::Arc;

/// How much a ring keeps: the newest blocks covering at most `span_ns` (when set) and taking at
/// most `max_bytes` of memory, whichever is less.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSize {
    /// Time kept, ns (`None`: as much as `max_bytes` holds).
    pub span_ns: Option<u64>,
    /// Memory the blocks may take, bytes.
    pub max_bytes: u64,
}

/// The memory a ring given as a time alone may take.
pub const DEFAULT_RING_BYTES: u64 = 256 << 20;
/// The smallest ring: a few blocks.
pub const MIN_RING_BYTES: u64 = 4 << 20;

impl RingSize {
    /// `30s`, `2GiB`, or both (`30s,1GiB`): a time alone keeps at most
    /// [`DEFAULT_RING_BYTES`].
    pub fn parse(s: &str) -> Result<RingSize, String> {
        let mut span = None;
        let mut bytes = None;
        for part in s.split(',').map(str::trim) {
            match time_or_size(part)? {
                Amount::Time(ns) => {
                    if ns < 1_000_000_000 {
                        return Err(format!("ring time '{part}' is under a second: blocks are cut every second"));
                    }
                    if span.replace(ns).is_some() {
                        return Err(format!("'{s}': two times; give a time, a size, or one of each"));
                    }
                }
                Amount::Size(b) => {
                    if b < MIN_RING_BYTES {
                        return Err(format!(
                            "ring size {} is under the smallest ring, {}",
                            latscope_event::units::fmt_bytes(b),
                            latscope_event::units::fmt_bytes(MIN_RING_BYTES)
                        ));
                    }
                    if bytes.replace(b).is_some() {
                        return Err(format!("'{s}': two sizes; give a time, a size, or one of each"));
                    }
                }
            }
        }
        Ok(RingSize { span_ns: span, max_bytes: bytes.unwrap_or(DEFAULT_RING_BYTES) })
    }

    /// `30.0s or 256MiB, whichever is less`.
    pub fn describe(&self) -> String {
        let b = latscope_event::units::fmt_bytes(self.max_bytes);
        match self.span_ns {
            Some(ns) => format!("the last {} or {b} (whichever is less)", latscope_event::units::fmt_ns(ns)),
            None => format!("the last {b}"),
        }
    }
}

/// A time or a size, as `--ring` and `--rotate` take them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// A time, ns.
    Time(u64),
    /// A size, bytes.
    Size(u64),
}

/// `30s`, `10m` (minutes), `1h` are times; `512MiB`, `2GiB`, `1G` sizes. A bare number is
/// neither: say which.
pub fn time_or_size(part: &str) -> Result<Amount, String> {
    let part = part.trim();
    let unit = part.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '_').trim();
    if part.is_empty() || unit.is_empty() {
        return Err(format!("'{part}' is neither a time (30s, 10m, 1h) nor a size (512MiB, 2GiB): give a unit"));
    }
    if let Ok(ns) = latscope_event::units::parse_duration_ns(part) {
        return Ok(Amount::Time(ns));
    }
    latscope_event::units::parse_size(part)
        .map(Amount::Size)
        .map_err(|_| format!("'{part}' is neither a time (30s, 10m, 1h) nor a size (512MiB, 2GiB)"))
}

/// A block in the ring, numbered in arrival order.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub id: u64,
    pub block: Arc<SealedBlock>,
    /// CLOCK_MONOTONIC ns when it was sealed.
    pub sealed_ns: u64,
}

/// The ring (see [`RingSize`]).
#[derive(Debug)]
pub(crate) struct Ring {
    size: RingSize,
    slots: VecDeque<Slot>,
    bytes: u64,
    next_id: u64,
    /// Stack table entries of the blocks evicted: a dump's first block needs them.
    evicted_stacks: String,
    /// Losses counted when the newest evicted block was sealed.
    evicted_lost: u64,
    /// Events that have passed through.
    pub events_in: u64,
    /// Blocks evicted so far.
    pub evicted: u64,
}

impl Ring {
    pub(crate) fn new(size: RingSize) -> Ring {
        Ring {
            size,
            slots: VecDeque::new(),
            bytes: 0,
            next_id: 0,
            evicted_stacks: String::new(),
            evicted_lost: 0,
            events_in: 0,
            evicted: 0,
        }
    }

    /// Add blocks sealed at `now_ns`, then evict what no longer fits.
    pub(crate) fn push(&mut self, blocks: Vec<Arc<SealedBlock>>, now_ns: u64) {
        for b in blocks {
            self.bytes += b.mem_bytes();
            self.events_in += b.events() as u64;
            self.slots.push_back(Slot { id: self.next_id, block: b, sealed_ns: now_ns });
            self.next_id += 1;
        }
        self.evict(now_ns);
    }

    fn evict(&mut self, now_ns: u64) {
        let oldest_kept = self.size.span_ns.map(|s| now_ns.saturating_sub(s));
        while let Some(front) = self.slots.front() {
            let too_big = self.bytes > self.size.max_bytes && self.slots.len() > 1;
            // A block is out of the time kept once its last event has ended before it.
            let last = front.block.end_max().unwrap_or(front.sealed_ns);
            let too_old = oldest_kept.is_some_and(|t| last < t);
            if !(too_big || too_old) {
                break;
            }
            let s = self.slots.pop_front().expect("front exists");
            self.bytes -= s.block.mem_bytes();
            self.evicted_stacks.push_str(s.block.stacks());
            self.evicted_lost = s.block.lost_total();
            self.evicted += 1;
        }
    }

    /// Memory the blocks take.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Blocks kept.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The time the ring covers now: first event to last end, ns.
    pub(crate) fn span_ns(&self) -> u64 {
        let first = self.slots.iter().filter_map(|s| s.block.ts_range()).map(|r| r.0).min();
        let last = self.slots.iter().filter_map(|s| s.block.end_max()).max();
        match (first, last) {
            (Some(a), Some(z)) => z.saturating_sub(a),
            _ => 0,
        }
    }

    /// The blocks a window from `from_ns` on takes (each with an event ending at or after it),
    /// with what comes before them: the stack table entries of every earlier block and the
    /// losses counted when the block before the first was sealed.
    pub(crate) fn window(&self, from_ns: u64) -> (Vec<Slot>, String, u64) {
        let first = self.slots.iter().position(|s| s.block.end_max().is_some_and(|e| e >= from_ns));
        let Some(first) = first else { return (Vec::new(), String::new(), self.last_lost()) };
        let mut stacks = self.evicted_stacks.clone();
        let mut lost = self.evicted_lost;
        for s in self.slots.iter().take(first) {
            stacks.push_str(s.block.stacks());
            lost = s.block.lost_total();
        }
        (self.slots.iter().skip(first).cloned().collect(), stacks, lost)
    }

    /// The blocks that arrived after block `id`.
    pub(crate) fn after(&self, id: u64) -> Vec<Slot> {
        self.slots.iter().filter(|s| s.id > id).cloned().collect()
    }

    /// Losses counted when the newest block was sealed.
    pub(crate) fn last_lost(&self) -> u64 {
        self.slots.back().map_or(self.evicted_lost, |s| s.block.lost_total())
    }

    /// Bytes per second of recording the ring holds, for estimating a dump's size.
    pub(crate) fn bytes_per_sec(&self) -> f64 {
        let span = self.span_ns();
        if span == 0 {
            return 0.0;
        }
        let file: u64 = self.slots.iter().map(|s| s.block.file_bytes()).sum();
        file as f64 / (span as f64 / 1e9)
    }

    /// File bytes of the blocks a window from `from_ns` on takes.
    pub(crate) fn file_bytes_from(&self, from_ns: u64) -> u64 {
        self.slots
            .iter()
            .filter(|s| s.block.end_max().is_some_and(|e| e >= from_ns))
            .map(|s| s.block.file_bytes())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_sizes_parse_as_times_sizes_or_both() {
        assert_eq!(
            RingSize::parse("30s").unwrap(),
            RingSize { span_ns: Some(30_000_000_000), max_bytes: DEFAULT_RING_BYTES }
        );
        assert_eq!(RingSize::parse("2GiB").unwrap(), RingSize { span_ns: None, max_bytes: 2 << 30 });
        assert_eq!(
            RingSize::parse("10m, 512MiB").unwrap(),
            RingSize { span_ns: Some(600_000_000_000), max_bytes: 512 << 20 }
        );
        for (bad, what) in [
            ("500ms", "under a second"),
            ("1KiB", "under the smallest"),
            ("30s,1m", "two times"),
            ("lots", "neither a time"),
            ("", "neither"),
            ("512", "give a unit"),
        ] {
            let e = RingSize::parse(bad).unwrap_err();
            assert!(e.contains(what), "{bad}: {e}");
        }
    }
}

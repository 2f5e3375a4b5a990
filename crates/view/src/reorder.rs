//! Events put back in the order of their start (or end) time with bounded memory ([`Reorder`]),
//! and the text of held events kept without an allocation per event ([`OrderedWriter`]).

use std::collections::{BTreeMap, VecDeque};
use std::io::{IoSlice, Write};

/// Most in-order queues a [`Reorder`] keeps (each stream of events that arrive in order fills
/// one: syscalls, block requests, and a few calls that end long after they began).
pub const QUEUES: usize = 4;

/// Which time events are printed in the order of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    /// When the call or request began (the time printed).
    Start,
    /// When it completed.
    End,
}

/// Puts events back in the order of their start (or end) time, with bounded memory.
///
/// Recordings hold events in the order they completed, and the syscall and block request streams
/// are interleaved block by block, so a long call, or a block of the other stream, arrives after
/// events that began later. `Reorder` holds each event until the latest completion seen (the
/// watermark) is `window` past its key, or until it holds `max_held` events (then the earliest
/// goes out): every event whose key is within the window of its arrival comes out in order.
/// An event whose key is before that of one already released (a call longer than the window
/// minus the interleaving, a few seconds' worth) comes out at once, marked late.
///
/// Held events are ordered by (key, arrival number). Events arrive nearly in key order, as a few
/// interleaved streams (syscalls and block requests, block by block) each in order: an event is
/// appended to the queue (of up to [`QUEUES`]) whose last key is the latest not after its own,
/// the few that fit none go into a B-tree, and the next out is the first of the queues' fronts
/// and the tree (a B-tree of all of them cost a tenth of `events`' time, and one queue sent
/// every event of the second stream into it; a binary heap of a million events misses the cache
/// on every level of every pop).
pub struct Reorder<T> {
    by: SortBy,
    window_ns: u64,
    max_held: usize,
    /// Runs in order by (key, arrival number): events that arrived in order after the last one.
    queues: Vec<VecDeque<(u64, u64, T)>>,
    held: BTreeMap<(u64, u64), T>,
    /// Events held in the queues and the tree.
    n_held: usize,
    seq: u64,
    watermark: u64,
    released: Option<u64>,
    late: u64,
    peak: usize,
}

impl<T> Reorder<T> {
    /// Orders by `by`, holding events until the watermark is `window_ns` past them, at most
    /// `max_held` at a time (at least 1).
    pub fn new(by: SortBy, window_ns: u64, max_held: usize) -> Self {
        Reorder {
            by,
            window_ns,
            max_held: max_held.max(1),
            queues: (0..QUEUES).map(|_| VecDeque::new()).collect(),
            held: BTreeMap::new(),
            n_held: 0,
            seq: 0,
            watermark: 0,
            released: None,
            late: 0,
            peak: 0,
        }
    }

    /// Takes an event that began at `start` and ended at `end`; calls `out(item, late)` for every
    /// event that can go out now, in order.
    pub fn push<E>(
        &mut self,
        start: u64,
        end: u64,
        item: T,
        out: &mut impl FnMut(T, bool) -> Result<(), E>,
    ) -> Result<(), E> {
        let key = match self.by {
            SortBy::Start => start,
            SortBy::End => end,
        };
        self.watermark = self.watermark.max(end);
        if self.released.is_some_and(|r| key < r) {
            self.late += 1;
            return out(item, true);
        }
        self.seq += 1;
        // The queue whose last key is the latest not after this one (an empty one otherwise).
        let mut best: Option<(usize, u64)> = None;
        let mut empty = None;
        for (q, queue) in self.queues.iter().enumerate() {
            match queue.back() {
                Some(b) if b.0 <= key && best.is_none_or(|(_, k)| b.0 > k) => best = Some((q, b.0)),
                Some(_) => {}
                None => empty = empty.or(Some(q)),
            }
        }
        match best.map(|(q, _)| q).or(empty) {
            Some(q) => self.queues[q].push_back((key, self.seq, item)),
            None => {
                self.held.insert((key, self.seq), item);
            }
        }
        self.n_held += 1;
        self.peak = self.peak.max(self.n_held);
        let due = self.watermark.saturating_sub(self.window_ns);
        // The next out found once per event let out (and once more for the one kept).
        while let Some((from, first)) = self.next_out() {
            if first > due && self.n_held <= self.max_held {
                break;
            }
            let Some((k, item)) = self.take(from) else { break };
            self.released = Some(k);
            out(item, false)?;
        }
        Ok(())
    }

    /// Where the next event out is, and its key: the first of the queues' fronts and the tree by
    /// (key, arrival number). `Some(q)` for queue `q`, `None` for the tree.
    #[inline]
    fn next_out(&self) -> Option<(Option<usize>, u64)> {
        let mut from: Option<(usize, (u64, u64))> = None;
        for (q, queue) in self.queues.iter().enumerate() {
            if let Some(f) = queue.front() {
                if from.is_none_or(|(_, k)| (f.0, f.1) < k) {
                    from = Some((q, (f.0, f.1)));
                }
            }
        }
        match (from, self.held.first_key_value()) {
            (Some((_, k)), Some((t, _))) if *t < k => Some((None, t.0)),
            (Some((q, k)), _) => Some((Some(q), k.0)),
            (None, Some((t, _))) => Some((None, t.0)),
            (None, None) => None,
        }
    }

    /// Takes the next event out from where [`Reorder::next_out`] found it (`None` only if it
    /// is no longer there, which `next_out` just ruled out).
    #[inline]
    fn take(&mut self, from: Option<usize>) -> Option<(u64, T)> {
        let (k, item) = match from {
            Some(q) => self.queues.get_mut(q)?.pop_front().map(|(k, _, item)| (k, item)),
            None => self.held.pop_first().map(|((k, _), item)| (k, item)),
        }?;
        self.n_held -= 1;
        Some((k, item))
    }

    /// Lets out, in order, every held event whose key is before `bound`: the caller knows that
    /// no event to come has a key before it (a trace's zone maps say where the blocks still to
    /// be read begin). The output is what it would have been without; only less is held.
    pub fn release_before<E>(&mut self, bound: u64, out: &mut impl FnMut(T, bool) -> Result<(), E>) -> Result<(), E> {
        while let Some((from, first)) = self.next_out() {
            if first >= bound {
                break;
            }
            let Some((k, item)) = self.take(from) else { break };
            self.released = Some(k);
            out(item, false)?;
        }
        Ok(())
    }

    /// The most events held at once.
    pub fn peak_held(&self) -> usize {
        self.peak
    }

    /// Lets every held event out, in order.
    pub fn finish<E>(&mut self, out: &mut impl FnMut(T, bool) -> Result<(), E>) -> Result<(), E> {
        while let Some((from, _)) = self.next_out() {
            let Some((k, item)) = self.take(from) else { break };
            self.released = Some(k);
            out(item, false)?;
        }
        Ok(())
    }

    /// Events that came out late (out of order).
    pub fn late(&self) -> u64 {
        self.late
    }
}

/// For each block of a trace, the earliest time (start or end, as the order goes) of any event
/// in the blocks after it that is to come out in order, from their zone maps: once a block has
/// been read, every held event before that time can go out ([`Reorder::release_before`]). A
/// recording of seconds is then printed holding a few blocks' worth of events instead of the
/// whole reorder window's.
///
/// An event that began more than the window before the latest completion in the blocks before
/// its own (a wait longer than the window) is late by the window's rule, so it does not hold
/// back the bound: without that, one shell waiting for its command through a whole recording
/// would keep every event of the window held. Each block is bounded by its own zone's earliest
/// time, or by the latest completion before it less the window if that is later.
#[derive(Debug, Default)]
pub struct Lookahead {
    after: rustc_hash::FxHashMap<u64, u64>,
}

impl Lookahead {
    /// From the zones of a trace's blocks, in file order, for a reorder window of `window_ns`.
    /// A block whose zone is unknown (a file written before zone maps) bounds every block before
    /// it at 0 (nothing is let out early), or at the window's own bound where an earlier block's
    /// latest completion is known.
    pub fn new(zones: &[latscope_trace::BlockZone], by: SortBy, window_ns: u64) -> Lookahead {
        let mut after = rustc_hash::FxHashMap::default();
        let mut bound = u64::MAX;
        let mut totals: Vec<Option<u64>> = zones.iter().map(|z| z.events_total).collect();
        // Each block's own event count, where the running totals say it.
        for k in (1..totals.len()).rev() {
            totals[k] = totals[k].zip(totals[k - 1]).map(|(a, b)| a.saturating_sub(b));
        }
        // The latest completion in the blocks before each one: its events that began more than
        // the window before it are late whatever else is held.
        let mut ended = Vec::with_capacity(zones.len());
        let mut latest = 0u64;
        for z in zones {
            ended.push(latest);
            latest = latest.max(z.end_max.unwrap_or(0));
        }
        for (k, mut z) in zones.iter().copied().enumerate().rev() {
            if let Some(seq) = z.seq {
                // The last block has no known successor: a file still being written grows.
                if k + 1 < zones.len() {
                    after.insert(seq, bound);
                }
            }
            let key = *zone_key(&mut z, by);
            let in_order_from = ended[k].saturating_sub(window_ns);
            bound = match key {
                Some(t) => bound.min(t.max(in_order_from)),
                None if totals[k] == Some(0) => bound,
                None => bound.min(in_order_from),
            };
        }
        Lookahead { after }
    }

    /// [`Lookahead::new`] from the blocks of trace `r` (opened to decode `ts` and `lat` alone):
    /// a block whose zone begins more than the window before the latest completion before it
    /// holds a call longer than the window, so its own `ts` and `lat` are decoded to bound it by
    /// its other events (a recording where such calls end every second would otherwise hold
    /// the window). Other blocks are read for their metadata only.
    pub fn read(mut r: latscope_trace::TraceReader, by: SortBy, window_ns: u64) -> Lookahead {
        let mut zones: Vec<latscope_trace::BlockZone> = Vec::new();
        let mut batch = latscope_event::EventBatch::default();
        let mut latest = 0u64;
        loop {
            let mut long = None;
            let res = r.next_batch_pruned(&mut batch, |m| {
                let mut z = latscope_trace::BlockZone::of(m);
                let key = *zone_key(&mut z, by);
                let from = latest.saturating_sub(window_ns);
                latest = latest.max(z.end_max.unwrap_or(0));
                zones.push(z);
                if key.is_some_and(|t| t < from) {
                    long = Some(from);
                    &[][..]
                } else {
                    &latscope_trace::Column::ALL[..]
                }
            });
            let Some(res) = res else { break };
            // A block that cannot be decoded keeps its zone (the scan passes over it too).
            if let (Some(from), Ok(())) = (long, res) {
                let b = &batch;
                let keys = (0..b.len()).map(|i| match by {
                    SortBy::Start => b.ts[i],
                    SortBy::End => b.end(i),
                });
                let first = keys.filter(|&t| t >= from).min();
                // Every event late: the block bounds nothing (as an empty one).
                *zone_key(zones.last_mut().expect("pushed above"), by) = Some(first.unwrap_or(u64::MAX));
            }
        }
        Lookahead::new(&zones, by, window_ns)
    }

    /// The earliest time of any event after block `seq`, if known.
    pub fn after(&self, seq: u64) -> Option<u64> {
        self.after.get(&seq).copied()
    }
}

/// A block zone's earliest time in the order `by` (to read or to refine).
fn zone_key(z: &mut latscope_trace::BlockZone, by: SortBy) -> &mut Option<u64> {
    match by {
        SortBy::Start => &mut z.ts_min,
        SortBy::End => &mut z.end_min,
    }
}

/// Where a held text is in a [`HeldText`].
#[derive(Debug, Clone, Copy)]
pub struct TextRef {
    chunk: u32,
    start: u32,
    len: u32,
}

/// Texts held for reordering, written straight into chunks of 4 MiB that are reused once every
/// text in them has gone out (events leave roughly in the order they came): no allocation or copy
/// per event, and no more memory than the text itself.
pub struct HeldText {
    chunks: Vec<(String, u32)>,
    free: Vec<u32>,
    cur: u32,
}

const CHUNK_BYTES: usize = 4 << 20;
/// Room left in a chunk before an event is written into it (longer texts grow the chunk).
const ROOM: usize = 64 << 10;

/// A chunk, backed by huge pages where the kernel offers them on request (transparent huge
/// pages in `madvise` mode): a million held events fill hundreds of megabytes, and faulting them
/// in 4 KiB pages costs as much as formatting them.
fn new_chunk() -> String {
    let s = String::with_capacity(CHUNK_BYTES);
    const HUGE: usize = 2 << 20;
    let p = s.as_ptr() as usize;
    let start = p.next_multiple_of(HUGE);
    let end = (p + CHUNK_BYTES) / HUGE * HUGE;
    if end > start {
        // SAFETY: advice on memory this String owns and has not touched; it changes how the kernel
        // backs the pages, not their contents or validity. Refused advice is harmless.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
    s
}

impl Default for HeldText {
    fn default() -> Self {
        HeldText { chunks: vec![(new_chunk(), 0)], free: Vec::new(), cur: 0 }
    }
}

impl HeldText {
    /// Keeps the text `write` appends to the string it is given.
    pub fn write(&mut self, write: impl FnOnce(&mut String)) -> TextRef {
        let (buf, _) = &self.chunks[self.cur as usize];
        if !buf.is_empty() && buf.len() + ROOM > buf.capacity() {
            self.cur = match self.free.pop() {
                Some(k) => k,
                None => {
                    self.chunks.push((new_chunk(), 0));
                    (self.chunks.len() - 1) as u32
                }
            };
        }
        let (buf, live) = &mut self.chunks[self.cur as usize];
        let start = buf.len();
        write(buf);
        *live += 1;
        TextRef { chunk: self.cur, start: start as u32, len: (buf.len() - start) as u32 }
    }

    /// Keeps a copy of `text`.
    pub fn push(&mut self, text: &str) -> TextRef {
        self.write(|s| s.push_str(text))
    }

    /// The text `r` refers to (until it is released).
    pub fn get(&self, r: TextRef) -> &[u8] {
        &self.chunks[r.chunk as usize].0.as_bytes()[r.start as usize..(r.start + r.len) as usize]
    }

    /// Lets `r`'s room be reused once the rest of its chunk has gone too.
    pub fn release(&mut self, r: TextRef) {
        self.release_n(r.chunk, 1);
    }

    /// [`HeldText::release`] of `n` texts of chunk `chunk`.
    fn release_n(&mut self, chunk: u32, n: u32) {
        let (buf, live) = &mut self.chunks[chunk as usize];
        *live -= n;
        if *live == 0 {
            buf.clear();
            if chunk != self.cur {
                self.free.push(chunk);
            }
        }
    }
}

/// Event texts (lines, or JSON objects) written to `out` in the order of [`Reorder`], each
/// followed by a newline, at most `limit` of them. A late event is marked: ` [late]` at the end of
/// its first line, or `"late":true` as the JSON object's last member.
pub struct OrderedWriter<W: Write> {
    order: Reorder<TextRef>,
    state: Out<W>,
}

struct Out<W: Write> {
    held: HeldText,
    out: W,
    left: u64,
    json: bool,
    /// Texts that went out in order, not yet written: they lie one after the other in one chunk
    /// (events leave nearly in the order they came), so they are written from there in one go,
    /// not copied into the output's buffer one by one. Their room is released once written.
    run: Option<Run>,
    /// Runs that ended, not yet written (their room still held): written together, from where
    /// they are, by one vectored write once they add up to more than the output's buffer. Runs
    /// are short when events leave in another order than they came (by start, from threads
    /// reported at their ends), and copying each into the buffer cost a tenth of the time.
    ended: Vec<Run>,
    ended_bytes: usize,
}

/// Ended runs are written once they hold this much (at least the output's buffer, so that it is
/// bypassed) or this many runs (well below the kernel's limit of iovecs per write).
const ENDED_BYTES: usize = 1 << 17;
const ENDED_RUNS: usize = 128;

/// Texts `start..end` of chunk `chunk`: `n` of them.
#[derive(Clone, Copy)]
struct Run {
    chunk: u32,
    start: u32,
    end: u32,
    n: u32,
}

impl<W: Write> Out<W> {
    fn emit(&mut self, r: TextRef, late: bool) -> std::io::Result<()> {
        if self.left == 0 {
            self.held.release(r);
            return Ok(());
        }
        self.left -= 1;
        if !late {
            match &mut self.run {
                Some(run) if run.chunk == r.chunk && run.end == r.start => {
                    run.end += r.len;
                    run.n += 1;
                    return Ok(());
                }
                _ => {
                    self.end_run()?;
                    self.run = Some(Run { chunk: r.chunk, start: r.start, end: r.start + r.len, n: 1 });
                    return Ok(());
                }
            }
        }
        self.write_run()?;
        // Held with its newline.
        let text = self.held.get(r);
        if late && self.json {
            let body = text.strip_suffix(b"}\n").unwrap_or(text);
            self.out.write_all(body)?;
            self.out.write_all(b",\"late\":true}\n")?;
        } else {
            // After the event's own line (a --why breakdown follows it on the next line).
            let at = text.iter().position(|&c| c == b'\n').unwrap_or(text.len());
            self.out.write_all(&text[..at])?;
            self.out.write_all(b" [late]")?;
            self.out.write_all(&text[at..])?;
        }
        self.held.release(r);
        Ok(())
    }

    /// Ends [`Out::run`]: among the runs to write, written once they are enough.
    fn end_run(&mut self) -> std::io::Result<()> {
        self.keep_run();
        if self.ended_bytes >= ENDED_BYTES || self.ended.len() >= ENDED_RUNS {
            self.write_ended()?;
        }
        Ok(())
    }

    /// Moves [`Out::run`] among the ended runs.
    fn keep_run(&mut self) {
        if let Some(run) = self.run.take() {
            self.ended_bytes += (run.end - run.start) as usize;
            self.ended.push(run);
        }
    }

    /// Writes the texts of [`Out::run`] and of the ended runs, and lets their room go.
    fn write_run(&mut self) -> std::io::Result<()> {
        self.keep_run();
        self.write_ended()
    }

    /// Writes the ended runs in one vectored write (a few when the output takes less) and lets
    /// their room go.
    fn write_ended(&mut self) -> std::io::Result<()> {
        if self.ended.is_empty() {
            return Ok(());
        }
        let chunks = &self.held.chunks;
        let mut slices: Vec<IoSlice<'_>> = self
            .ended
            .iter()
            .map(|r| IoSlice::new(&chunks[r.chunk as usize].0.as_bytes()[r.start as usize..r.end as usize]))
            .collect();
        let mut left = &mut slices[..];
        while !left.is_empty() {
            match self.out.write_vectored(left) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut left, n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        drop(slices);
        for r in self.ended.drain(..) {
            self.held.release_n(r.chunk, r.n);
        }
        self.ended_bytes = 0;
        Ok(())
    }
}

impl<W: Write> OrderedWriter<W> {
    /// Writes to `out` (give it a large buffer) at most `limit` events, reordered as
    /// [`Reorder::new`] says; `json` says how late events are marked.
    pub fn new(by: SortBy, window_ns: u64, max_held: usize, out: W, limit: u64, json: bool) -> Self {
        OrderedWriter {
            order: Reorder::new(by, window_ns, max_held),
            state: Out {
                held: HeldText::default(),
                out,
                left: limit,
                json,
                run: None,
                ended: Vec::new(),
                ended_bytes: 0,
            },
        }
    }

    /// Takes the text of an event that began at `start` and ended at `end` (without a trailing
    /// newline) and writes what can go out now.
    pub fn push(&mut self, start: u64, end: u64, text: &str) -> std::io::Result<()> {
        self.push_with(start, end, |s| s.push_str(text))
    }

    /// [`OrderedWriter::push`] of the text `write` appends to the string it is given (held
    /// where it is written: no copy).
    pub fn push_with(&mut self, start: u64, end: u64, write: impl FnOnce(&mut String)) -> std::io::Result<()> {
        let r = self.state.held.write(|s| {
            write(s);
            s.push('\n');
        });
        let st = &mut self.state;
        self.order.push(start, end, r, &mut |r, late| st.emit(r, late))
    }

    /// Whether `limit` events have been written (nothing more will be).
    pub fn full(&self) -> bool {
        self.state.left == 0
    }

    /// Writes every held event that began (or, by end, ended) before `bound`, which no event
    /// still to come precedes (see [`Reorder::release_before`]).
    pub fn release_before(&mut self, bound: u64) -> std::io::Result<()> {
        let st = &mut self.state;
        self.order.release_before(bound, &mut |r, late| st.emit(r, late))
    }

    /// The most events held at once.
    pub fn peak_held(&self) -> usize {
        self.order.peak_held()
    }

    /// Writes every held event, flushes and returns the writer and how many events came out late.
    pub fn finish(mut self) -> std::io::Result<(W, u64)> {
        let st = &mut self.state;
        self.order.finish(&mut |r, late| st.emit(r, late))?;
        self.state.write_run()?;
        self.state.out.flush()?;
        Ok((self.state.out, self.order.late()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events as (start, end) in the order they arrive, through a reorder window; returns
    /// (start, late) as they come out.
    fn reorder(by: SortBy, window: u64, max: usize, events: &[(u64, u64)]) -> Vec<(u64, bool)> {
        let mut r = Reorder::new(by, window, max);
        let mut got = Vec::new();
        let mut out = |x: (u64, u64), late: bool| {
            got.push((if by == SortBy::Start { x.0 } else { x.1 }, late));
            Ok::<(), ()>(())
        };
        for &(s, e) in events {
            r.push(s, e, (s, e), &mut out).unwrap();
        }
        r.finish(&mut out).unwrap();
        got
    }

    #[test]
    fn reorder_sorts_within_the_window_and_marks_what_is_longer() {
        // Completion order of two streams interleaved: syscalls [0..10] ms, then block requests
        // that began earlier, calls every 100 ms to 9.9 s, then an 11 s call that began at the
        // very start.
        let mut ev: Vec<(u64, u64)> = (0..10).map(|k| (k * 1_000_000 + 500_000, (k + 1) * 1_000_000)).collect();
        ev.extend((0..5).map(|k| (k * 1_500_000, k * 1_500_000 + 100_000)));
        ev.extend((1..100).map(|k| (k * 100_000_000, k * 100_000_000 + 1000)));
        ev.push((10, 11_000_000_000));
        ev.extend((0..3).map(|k| (11_000_000_000 + k, 11_000_000_100 + k)));
        let got = reorder(SortBy::Start, 2_000_000_000, 1000, &ev);
        assert_eq!(got.len(), ev.len());
        let starts: Vec<u64> = got.iter().map(|g| g.0).collect();
        let mut sorted = starts.clone();
        sorted.sort_unstable();
        // Everything is in start order except the 10 s call, longer than the window: it comes
        // out as soon as it arrives, after events that began later, marked late.
        let late: Vec<_> = got.iter().filter(|g| g.1).collect();
        assert_eq!(late, vec![&(10, true)]);
        let on_time: Vec<u64> = got.iter().filter(|g| !g.1).map(|g| g.0).collect();
        assert!(on_time.windows(2).all(|w| w[0] <= w[1]), "{on_time:?}");
        // A window longer than the call: everything in order, nothing late.
        let got = reorder(SortBy::Start, 20_000_000_000, 1000, &ev);
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), sorted);
        assert!(got.iter().all(|g| !g.1));
        // By end time.
        let got = reorder(SortBy::End, 2_000_000_000, 1000, &ev);
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0) && got.iter().all(|g| !g.1), "{got:?}");
        let got = reorder(SortBy::Start, u64::MAX, 3, &[(5, 6), (4, 7), (3, 8), (2, 9), (1, 10)]);
        // Memory is bounded: with room for 3, the earliest held goes out when a fourth comes, and
        // one that began before it is late.
        assert_eq!(got, vec![(2, false), (1, true), (3, false), (4, false), (5, false)]);
    }

    #[test]
    fn reorder_lets_events_out_as_one_ordered_map_of_all_held_would() {
        // The rule with every held event in one map by (key, arrival), as a reference.
        fn one_map(window: u64, max: usize, events: &[(u64, u64)]) -> Vec<(u64, bool)> {
            let (mut held, mut got) = (BTreeMap::new(), Vec::new());
            let (mut watermark, mut released, mut seq) = (0u64, None::<u64>, 0u64);
            for &(s, e) in events {
                watermark = watermark.max(e);
                if released.is_some_and(|r| s < r) {
                    got.push((s, true));
                    continue;
                }
                seq += 1;
                held.insert((s, seq), ());
                while let Some((&(k, _), _)) = held.first_key_value() {
                    if k > watermark.saturating_sub(window) && held.len() <= max {
                        break;
                    }
                    held.pop_first();
                    released = Some(k);
                    got.push((k, false));
                }
            }
            got.extend(held.into_keys().map(|(k, _)| (k, false)));
            got
        }
        // Mostly in order, some calls long, equal starts, two interleaved streams.
        let mut x = 12345u64;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for (window, max) in [(0, 100), (50, 100), (500, 7), (5_000, 1_000_000)] {
            let mut ev = Vec::new();
            for k in 0..20_000u64 {
                let lat = if rnd(20) == 0 { rnd(3_000) } else { rnd(5) };
                let start = k * 3 / 2 + rnd(2) - lat.min(k * 3 / 2);
                ev.push((start, start + lat));
            }
            assert_eq!(reorder(SortBy::Start, window, max, &ev), one_map(window, max, &ev), "window {window}");
        }
    }

    #[test]
    fn releasing_before_a_known_bound_changes_nothing_but_what_is_held() {
        // Blocks of 100 events in completion order; a call every 1000 events lasts 50 blocks.
        let mut ev = Vec::new();
        for k in 0..20_000u64 {
            let lat = if k % 1000 == 999 { 5_000 } else { 3 };
            ev.push((k * 10 + 100_000 - lat.min(k * 10 + 100_000), k * 10 + 100_000));
        }
        let blocks: Vec<&[(u64, u64)]> = ev.chunks(100).collect();
        // The smallest start of every later block.
        let mut after = vec![u64::MAX; blocks.len()];
        for b in (0..blocks.len() - 1).rev() {
            after[b] = after[b + 1].min(blocks[b + 1].iter().map(|e| e.0).min().unwrap());
        }
        for (window, max) in [(u64::MAX / 2, 1_000_000), (2_000, 1_000_000), (u64::MAX / 2, 300)] {
            let want = reorder(SortBy::Start, window, max, &ev);
            let mut r = Reorder::new(SortBy::Start, window, max);
            let mut got = Vec::new();
            let mut out = |x: (u64, u64), late: bool| {
                got.push((x.0, late));
                Ok::<(), ()>(())
            };
            for (b, block) in blocks.iter().enumerate() {
                for &(s, e) in *block {
                    r.push(s, e, (s, e), &mut out).unwrap();
                }
                r.release_before(after[b], &mut out).unwrap();
            }
            r.finish(&mut out).unwrap();
            assert_eq!(got, want, "window {window}, max {max}");
            if max > 1000 {
                assert!(r.peak_held() <= 700, "held {} of {}", r.peak_held(), ev.len());
            }
        }
    }

    #[test]
    fn lookahead_bounds_each_block_by_the_blocks_after_it_and_trusts_no_unknown_zone() {
        use latscope_trace::BlockZone;
        let z = |seq, ts: Option<u64>, total| BlockZone {
            seq: Some(seq),
            ts_min: ts,
            end_min: ts.map(|t| t + 5),
            end_max: ts.map(|t| t + 10),
            events_total: Some(total),
        };
        // Blocks 0..4: the third is empty, the last is the summary (no events).
        let zones = [z(0, Some(100), 10), z(1, Some(50), 20), z(2, None, 20), z(3, Some(70), 30), z(4, None, 30)];
        let l = Lookahead::new(&zones, SortBy::Start, 1000);
        assert_eq!(
            [l.after(0), l.after(1), l.after(2), l.after(3), l.after(4)],
            [Some(50), Some(70), Some(70), Some(u64::MAX), None]
        );
        assert_eq!(Lookahead::new(&zones, SortBy::End, 1000).after(0), Some(55));
        // A block with events but no zone map (an older writer): nothing before it is let out early.
        let zones = [z(0, Some(100), 10), z(1, None, 20), z(2, Some(300), 30)];
        let l = Lookahead::new(&zones, SortBy::Start, 1000);
        assert_eq!((l.after(0), l.after(1)), (Some(0), Some(300)));
        // ... but where a block before it ended long after the window, what began before the
        // window goes out.
        assert_eq!(Lookahead::new(&zones, SortBy::Start, 50).after(0), Some(60));
    }

    /// A call longer than the window (a shell's wait for its command) in a late block bounds
    /// the blocks before it at the latest completion before its block less the window, not at
    /// its own start: it is late by the window's rule anyway.
    #[test]
    fn a_call_longer_than_the_window_does_not_hold_back_the_lookahead() {
        use latscope_trace::BlockZone;
        // Blocks of 1 s each from t = 0; block 9 holds a call that began at 0.5 s.
        let zones: Vec<BlockZone> = (0..10u64)
            .map(|k| {
                let s = k * 1_000_000_000;
                BlockZone {
                    seq: Some(k),
                    ts_min: Some(if k == 9 { 500_000_000 } else { s }),
                    end_min: Some(s + 1000),
                    end_max: Some(s + 999_999_000),
                    events_total: Some((k + 1) * 100),
                }
            })
            .collect();
        let win = 3_000_000_000;
        let l = Lookahead::new(&zones, SortBy::Start, win);
        // Block 9 bounds everything before it at 9 s (end of block 8) less the window.
        assert_eq!(l.after(0), Some(1_000_000_000));
        assert_eq!(l.after(5), Some(5_999_999_000));
        assert_eq!(l.after(7), Some(5_999_999_000));
        // With a window longer than the recording, the call is in order: nothing goes out early.
        let l = Lookahead::new(&zones, SortBy::Start, 60_000_000_000);
        assert_eq!(l.after(0), Some(500_000_000));
        assert_eq!(l.after(7), Some(500_000_000));
    }

    #[test]
    fn held_texts_come_out_in_order_marked_late_and_their_room_is_reused() {
        let mut w = OrderedWriter::new(SortBy::Start, 100, 1_000_000, Vec::new(), u64::MAX, false);
        // 200 000 lines of ~40 bytes (several chunks), each arriving 1 ns after it began; one that
        // began long before arrives after its window and is late.
        for k in 0..200_000u64 {
            let s = 1000 + k * 10;
            w.push(s, s + 1, &format!("line {k:>8} began at {s:>12}")).unwrap();
        }
        w.push(5, 2_000_000, "old\n    why: a second line").unwrap();
        let chunks = w.state.held.chunks.len();
        assert!(chunks <= 3, "{chunks} chunks for a window of ~10 events");
        let (out, late) = w.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 200_002);
        assert_eq!(late, 1);
        let old = lines.iter().position(|l| l.starts_with("old")).unwrap();
        assert_eq!(lines[old], "old [late]");
        assert_eq!(lines[old + 1], "    why: a second line");
        let on_time: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with("line")).collect();
        assert!(on_time.iter().enumerate().all(|(k, l)| l.starts_with(&format!("line {k:>8} "))));
        // JSON: the mark is the object's last member; a limit stops the output.
        let mut w = OrderedWriter::new(SortBy::Start, 0, 10, Vec::new(), 2, true);
        w.push(10, 11, "{\"a\":1}").unwrap();
        w.push(5, 12, "{\"a\":2}").unwrap();
        w.push(20, 21, "{\"a\":3}").unwrap();
        assert!(w.full());
        let (out, late) = w.finish().unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "{\"a\":1}\n{\"a\":2,\"late\":true}\n");
        assert_eq!(late, 1);
    }

    /// Takes at most 1000 bytes per call, of at most two slices: vectored writes of the held
    /// runs must go on where each stopped.
    struct Stingy(Vec<u8>);
    impl Write for Stingy {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let n = b.len().min(1000);
            self.0.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
            let mut n = 0;
            for b in bufs.iter().filter(|b| !b.is_empty()).take(2) {
                n += self.write(&b[..b.len().min(1000 - n)])?;
            }
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn short_runs_out_of_order_are_written_whole_and_in_order() {
        // Pairs arriving swapped (each run one text long), among late texts, through an output
        // that takes a little at a time.
        let mut w = OrderedWriter::new(SortBy::Start, 1000, 1_000_000, Stingy(Vec::new()), u64::MAX, false);
        for k in 0..100_000u64 {
            let s = 10_000 + (k ^ 1) * 10;
            w.push(s, s + 1, &format!("text {:>7}", k ^ 1)).unwrap();
            if k % 9_999 == 0 {
                w.push(1, s + 2, "late").unwrap();
            }
        }
        let (out, late) = w.finish().unwrap();
        let text = String::from_utf8(out.0).unwrap();
        let on_time: Vec<&str> = text.lines().filter(|l| l.starts_with("text")).collect();
        assert_eq!(on_time.len(), 100_000);
        assert!(on_time.iter().enumerate().all(|(k, l)| *l == format!("text {k:>7}")));
        // The first came before anything went out: in order.
        assert_eq!(text.lines().filter(|l| l.starts_with("late")).count(), 11);
        assert_eq!(text.lines().filter(|l| *l == "late [late]").count() as u64, late);
        assert_eq!(late, 10);
    }
}

//! Wake-ups and block requests as flows, found while the slices wait to be written.
//!
//! A trace holds events in the order they completed, syscalls and block requests in blocks of
//! their own, so a call arrives before or after the call of another thread that woke it, and
//! before or after the block request whose completion ended its wait. Slices are therefore held
//! for a while ([`Linker`]: until the latest completion read is `hold_ns` past their arrival,
//! at most `max_held` of them) and written in the order they arrived; a link found while both
//! ends are held becomes a flow (Perfetto `flow_ids` on the start of the waking slice,
//! `terminating_flow_ids` on the end of the woken one, so that a trace processor, which reads
//! events in time order, always meets the waker first).
//!
//! Which call woke a call: `record --why` keeps, for each call that blocked, the thread that
//! ended its longest blocked interval (`waker_tid`), not the instant. The wake-up came at the
//! end of that interval, and after it the call ran (or waited for a CPU) until it returned:
//! when that interval was the call's last, the wake-up lies within the call's CPU and run-queue
//! time before its end. The waking call is the waker thread's first call (calls of one thread
//! follow each other) that began before the woken call ended and ended inside that last stretch:
//! the one in progress at the wake-up when the waker was in a traced call then. A wake-up that
//! came from outside a traced call (an exiting child, a call the filter left out) or at the end
//! of an earlier interval finds none and is counted as not linked rather than guessed.
//!
//! Which request: the call's `wake_dev` and `wake_sector` name the request whose completion
//! ended its longest I/O wait; the request of that disk and sector that completed inside the
//! call (the latest such, when the sector was written again) is it.

use std::collections::{HashMap, VecDeque};

use foldhash::fast::RandomState;
use serde::Serialize;

use latscope_event::can_wake;
use latscope_event::hint::prefetch;

use super::slices::Held;

/// How many links were made, and how many could not be.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LinkStats {
    /// Calls whose waking thread's call was found: one flow each.
    pub wakeups_linked: u64,
    /// Calls woken by a thread whose waking call was not found (not traced, filtered out,
    /// outside the window, or the wake-up did not end the call's last wait).
    pub wakeups_not_linked: u64,
    /// Calls whose waking block request was found: one flow each.
    pub requests_linked: u64,
    /// Calls woken by a block request that was not found in the export.
    pub requests_not_linked: u64,
}

/// Most held calls of a thread (or requests of a sector) looked at for one link, latest first: a
/// recording's calls of one thread follow each other, so the look-up stops at the first that
/// ended before the window anyway; traces whose calls overlap on a thread are cut short.
const MAX_CANDIDATES: usize = 64;
/// Most calls waiting at once for a call of one thread.
const MAX_WAITING: usize = 64;
/// Most calls waiting at once for a request of one sector: every fsync of a disk waits for a
/// cache flush, which has no sector, and a trace's calls are read ahead of its requests by up to
/// a block.
const MAX_WAITING_REQUEST: usize = 4096;
/// How many requests of a sector completed after a call's end are looked at all the same: the
/// order they are held in is that of their completion as recorded, nearly that of their ends.
const REQUEST_DISORDER: usize = 8;
/// Slices written kept for reuse, with the room of their vectors: slices leave in bursts (a
/// watermark that jumps), and refilling an emptied pool costs an allocation per vector. The pool
/// keeps up to this many beyond the room the hold queue left (slices held and pooled together
/// never pass `max_held + POOL`, the bound a full queue and a full pool had).
const POOL: usize = 1024;

/// Most retired thread entries kept for reuse.
const SPARE_THREADS: usize = 256;

/// How many places before the front a slice's box is asked for (see [`Linker::prefetch`]), and
/// its arguments: a slice leaves per slice arriving, each some hundreds of ns apart, so a few
/// places cover the memory's latency (2 to 12 places measured the same, within about 1 %).
const PREFETCH_BOX: usize = 4;
const PREFETCH_DATA: usize = 2;
/// How many places before the front the hold queue's own entry is asked for: the queue is larger
/// than the cache too, and its entry at [`PREFETCH_BOX`] is read for the address of the box.
const PREFETCH_ENTRY: usize = 32;

/// Set in a [`Linker::wake_masks`] entry looked up.
const MASK_KNOWN: u16 = 1 << 15;
/// The part of a wait whose waking call is known by the instant of its wake-up: any call in
/// progress then woke it, whatever its kind (every mask has its bit).
pub const ANY_PART: usize = 14;
const _: () = assert!(ANY_PART >= latscope_event::WHY_PARTS && ANY_PART < 15);

fn wake_mask(masks: &mut Vec<u16>, nr: u16) -> u16 {
    let i = usize::from(nr);
    if masks.len() <= i {
        masks.resize(i + 1, 0);
    }
    if masks[i] & MASK_KNOWN == 0 {
        masks[i] = (0..latscope_event::WHY_PARTS)
            .filter(|&k| can_wake(nr, k))
            .fold(MASK_KNOWN | 1 << ANY_PART, |m, k| m | 1 << k);
    }
    masks[i]
}

/// [`can_wake`], each syscall looked up once.
fn can_wake_cached(masks: &mut Vec<u16>, nr: u16, part: usize) -> bool {
    (wake_mask(masks, nr) >> part) & 1 != 0
}

/// 40 bytes: a call arriving reads the part of its thread's list (up to [`MAX_WAITING`]
/// entries) whose windows end after it begins.
#[derive(Clone, Copy)]
struct Pending {
    c_seq: u64,
    lo: u64,
    hi: u64,
    /// The woken call's main blocked part (for [`can_wake`]; 0 for requests) in the top byte;
    /// below it, 1 + the arrival number of a call in the window that cannot end such a wait by
    /// its kind (taken if no call that can comes before one of the two leaves or a call of the
    /// waker's thread begins after the window), 0 none.
    part_fallback: u64,
    /// At least the latest `hi` of this entry and those before it in its list, and never less
    /// than the previous entry's (see [`Waiters`]).
    max_hi: u64,
}

const _: () = assert!(std::mem::size_of::<Pending>() == 40);

impl Pending {
    fn new(c_seq: u64, lo: u64, hi: u64, part: usize, fallback: Option<u64>) -> Pending {
        Pending { c_seq, lo, hi, part_fallback: (part as u64) << 56 | fallback.map_or(0, |f| f + 1), max_hi: hi }
    }

    #[inline]
    fn part(&self) -> usize {
        (self.part_fallback >> 56) as usize
    }

    #[inline]
    fn fallback(&self) -> Option<u64> {
        (self.part_fallback << 8 >> 8).checked_sub(1)
    }

    /// Whether it has no fallback yet.
    #[inline]
    fn no_fallback(&self) -> bool {
        self.part_fallback << 8 == 0
    }
}

/// The calls waiting for a call of one thread, in arrival order but for entries moved by a
/// removal, with what lets a call of that thread read only the entries it may change: their
/// windows end (`hi`) in about the order they arrived, so the entries whose running `max_hi` is
/// at most the call's start (a prefix: the maximum only grows along the list) end before it
/// and are left alone;
/// and the earliest arrival, which tells whether some entry's call left. Both are bounds, not
/// exact: removals leave them as they are (still bounds), and each edit pass makes them exact.
struct Waiters {
    list: VecDeque<Pending>,
    /// At most the earliest arrival listed.
    min_c_seq: u64,
}

impl Default for Waiters {
    fn default() -> Waiters {
        Waiters { list: VecDeque::new(), min_c_seq: u64::MAX }
    }
}

impl Waiters {
    fn push_back(&mut self, mut p: Pending) {
        p.max_hi = self.list.back().map_or(p.hi, |b| b.max_hi.max(p.hi));
        self.min_c_seq = self.min_c_seq.min(p.c_seq);
        self.list.push_back(p);
    }

    /// Removes entry `at`, the last taking its place.
    fn swap_remove_back(&mut self, at: usize) {
        if self.list.swap_remove_back(at).is_none() {
            return;
        }
        // The last entry moved to `at` (unless it was the one removed): its running maximum is
        // that of the entries before it, and those after it take its window.
        let Some(hi) = self.list.get(at).map(|m| m.hi) else { return };
        let before = at.checked_sub(1).map_or(0, |i| self.list[i].max_hi);
        self.list[at].max_hi = before.max(hi);
        for q in self.list.range_mut(at + 1..) {
            q.max_hi = q.max_hi.max(hi);
        }
    }

    /// Whether a call of the waker thread from `ts` to `end`, that can end the waits of the
    /// parts in `wakes`, changes an entry: takes it (as waker or fallback) or finds it gone
    /// (arrived before `front`). Without branches over the entries: most calls change none.
    #[inline]
    fn edited_by(&self, ts: u64, end: u64, wakes: u16, front: u64) -> bool {
        if self.min_c_seq < front {
            return true;
        }
        let mut edits = false;
        // From the last entry back to the first whose running maximum ends before `ts`: a few
        // entries, fewer steps than a bisection's chain of dependent reads.
        for p in self.list.iter().rev() {
            if p.max_hi <= ts {
                break;
            }
            let window = (ts < p.hi) & (end >= p.lo);
            edits |= window & (((wakes >> p.part()) & 1 != 0) | p.no_fallback());
        }
        edits
    }

    /// The pass [`Waiters::edited_by`] calls for, by a call of the waker thread from `ts` to
    /// `end` that arrived `seq`th and can end the waits of the parts in `wakes`: the entries it
    /// ends go to `found`, those whose call left (arrived before `front`) go, and it becomes the
    /// fallback of those whose window it is in that have none; the bounds are made exact. One
    /// branch per entry ended, none per entry: whether a call is in a window, and what it can
    /// end, follow no pattern a predictor learns (a pass that tested each entry by branches was
    /// mispredicted about 16 times).
    fn edit(&mut self, ts: u64, end: u64, wakes: u16, front: u64, seq: u64, found: &mut Vec<Pending>) {
        let v = self.list.make_contiguous();
        let (mut kept, mut max_hi, mut min_c_seq) = (0, 0, u64::MAX);
        for j in 0..v.len() {
            let mut p = v[j];
            let live = p.c_seq >= front;
            let window = (ts < p.hi) & (end >= p.lo);
            let ends = live & window & ((wakes >> p.part()) & 1 != 0);
            if ends {
                found.push(p);
            }
            let keep = live & !ends;
            p.part_fallback |= u64::from(window & keep & p.no_fallback()) * (seq + 1);
            max_hi = if keep { max_hi.max(p.hi) } else { max_hi };
            p.max_hi = max_hi;
            min_c_seq = if keep { min_c_seq.min(p.c_seq) } else { min_c_seq };
            v[kept] = p;
            kept += usize::from(keep);
        }
        self.list.truncate(kept);
        self.min_c_seq = min_c_seq;
    }
}

/// A thread's held calls and the calls waiting for one of them: one look-up for both.
#[derive(Default)]
struct Thread {
    /// Its latest calls, in arrival order: the [`MAX_CANDIDATES`] a look-up reads (and one, a
    /// call looking among its own thread's calls, that skips itself), those that left among
    /// them (the oldest, skipped). Kept small, in the cache, rather than all its calls held.
    calls: VecDeque<Indexed>,
    waiters: Waiters,
}

/// A held slice in the index of its thread (or request): what a look-up reads of it, so that
/// the candidates' boxes, scattered over the hold queue, are not read.
#[derive(Clone, Copy)]
struct Indexed {
    seq: u64,
    ts: u64,
    end: u64,
    nr: u16,
}

/// A waiting call `p` leaves its list other than through the settling of its fallback: the call
/// it took as its fallback on arrival (one held before it) has one taker less.
fn untake(queue: &mut VecDeque<(Box<Held>, Waiting)>, front: u64, p: &Pending) {
    if let Some(d) = p.fallback().filter(|&d| d < p.c_seq) {
        if let Some((_, w)) = d.checked_sub(front).and_then(|i| queue.get_mut(i as usize)) {
            w.fallbacks = w.fallbacks.saturating_sub(1);
        }
    }
}

/// The syscall number of a call's slice.
fn nr(h: &Held) -> u16 {
    h.name_key as u16
}

/// What a held slice waits for (its links not yet found: the waking thread; the request is in
/// the slice, [`Held::woken_by`]), and who waits for it. Small, beside the slice's box in the
/// hold queue: written when other slices arrive, the box being far from the cache by then.
#[derive(Debug, Clone, Copy, Default)]
struct Waiting {
    waker: Option<u32>,
    /// How many calls held took it as their fallback waker on arrival and still wait (at most
    /// [`MAX_WAITING`]: they are in its thread's list).
    fallbacks: u16,
    /// Its entry in the waker's (request's) waiting list gave way to a newer one: the list need
    /// not be searched for it.
    waker_dropped: bool,
    request_dropped: bool,
}

const _: () = assert!(std::mem::size_of::<(Box<Held>, Waiting)>() == 24);

/// The hold queue and the indexes that find links (see the module documentation).
pub struct Linker {
    /// Boxed: a slice is filled, held and written without its 320 bytes being moved.
    queue: VecDeque<(Box<Held>, Waiting)>,
    front_seq: u64,
    hold_ns: u64,
    max_held: usize,
    watermark: u64,
    /// By thread: its calls held and the calls waiting for one of them (an entry goes when both
    /// are empty).
    threads: HashMap<u32, Thread, RandomState>,
    by_request: HashMap<(u32, u64), VecDeque<Indexed>, RandomState>,
    waiting_request: HashMap<(u32, u64), VecDeque<Pending>, RandomState>,
    /// Calls settled with a fallback leaving (reused: no allocation per slice).
    settling: Vec<u64>,
    /// The waiting calls a call arriving ends (reused: an allocation per link otherwise).
    found: Vec<Pending>,
    /// The calls a block request arriving woke (reused, as `found`).
    found_requests: Vec<u64>,
    /// Per syscall number, the parts its call can end a wait in (bit k: [`can_wake`] of part
    /// k), [`MASK_KNOWN`] once looked up.
    wake_masks: Vec<u16>,
    next_flow: u64,
    /// Entries of threads retired, kept for reuse ([`Linker::retire`]).
    spare_threads: Vec<Thread>,
    /// Boxed as in the queue: a slice goes from the pool to the queue and back as a pointer.
    #[allow(clippy::vec_box)]
    pool: Vec<Box<Held>>,
    /// Links made and missed.
    pub stats: LinkStats,
}

impl Linker {
    /// Holds slices until the latest end read is `hold_ns` past their arrival, at most
    /// `max_held` at a time (`hold_ns` 0: written at once, nothing linked).
    pub fn new(hold_ns: u64, max_held: usize) -> Linker {
        Linker {
            queue: VecDeque::new(),
            front_seq: 0,
            hold_ns,
            max_held: max_held.max(1),
            watermark: 0,
            threads: HashMap::default(),
            by_request: HashMap::default(),
            waiting_request: HashMap::default(),
            settling: Vec::new(),
            found: Vec::new(),
            found_requests: Vec::new(),
            wake_masks: Vec::new(),
            spare_threads: Vec::new(),
            next_flow: 1,
            pool: Vec::new(),
            stats: LinkStats::default(),
        }
    }

    /// Whether slices are held for links.
    pub fn linking(&self) -> bool {
        self.hold_ns > 0
    }

    /// Starts holding slices for links (a trace that turned out to carry wake-ups).
    pub fn start_linking(&mut self, hold_ns: u64) {
        self.hold_ns = hold_ns;
    }

    /// An empty slice to fill (its vectors keep the room of a slice written before).
    pub fn blank(&mut self) -> Box<Held> {
        self.pool.pop().unwrap_or_default()
    }

    /// The latest end time read.
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    fn held_mut(&mut self, seq: u64) -> Option<&mut Held> {
        let i = seq.checked_sub(self.front_seq)?;
        self.queue.get_mut(i as usize).map(|(h, _)| &mut **h)
    }

    /// The parts a call of syscall `nr` can end a wait in, as bits.
    fn wakes(&mut self, nr: u16) -> u16 {
        wake_mask(&mut self.wake_masks, nr)
    }

    fn flow(&mut self) -> u64 {
        let f = self.next_flow;
        self.next_flow += 1;
        f
    }

    /// Takes a slice. `wake`: the thread that woke it, the window its waking call must be in
    /// progress in (`(lo, hi)`: it ended at `lo` or later and began before `hi`) and the part it
    /// was blocked in; `request`: the disk and sector of the request whose completion woke it.
    /// A call's slice carries its thread in `h.tid` (it may itself be a waker); a request's its
    /// disk and sector in `h.request`.
    pub fn push(&mut self, mut h: Box<Held>, wake: Option<(u32, (u64, u64), usize)>, request: Option<(u32, u64)>) {
        let seq = self.front_seq + self.queue.len() as u64;
        h.seq = seq;
        self.watermark = self.watermark.max(h.end);
        h.arrived = self.watermark;
        if self.hold_ns == 0 {
            self.queue.push_back((h, Waiting::default()));
            return;
        }
        let mut waiting = Waiting::default();
        let me = Indexed { seq, ts: h.ts, end: h.end, nr: nr(&h) };
        // This call as the waker of calls that arrived before it.
        if h.tid != 0 {
            let front = self.front_seq;
            let wakes = self.wakes(nr(&h));
            let t = self.threads.entry(h.tid).or_insert_with(|| self.spare_threads.pop().unwrap_or_default());
            // The waits whose windows all ended before this call began (a prefix, by their
            // running maximum): no later call of this thread can end them (its calls follow one
            // another), so they are settled now, with their fallback or as not linked, rather
            // than looked at by every call of the thread until they leave.
            while let Some(p) = t.waiters.list.front().copied().filter(|p| p.max_hi <= h.ts) {
                t.waiters.list.pop_front();
                if p.c_seq < front {
                    continue;
                }
                untake(&mut self.queue, front, &p);
                let fallback = p.fallback().filter(|&d| d >= front && d != p.c_seq);
                let i = (p.c_seq - front) as usize;
                match fallback.and_then(|d| self.queue.get_mut((d - front) as usize)) {
                    Some((d, _)) => {
                        let f = self.next_flow;
                        self.next_flow += 1;
                        d.flows_out.push(f);
                        if let Some((q, w)) = self.queue.get_mut(i) {
                            q.flows_in.push(f);
                            w.waker = None;
                        }
                        self.stats.wakeups_linked += 1;
                    }
                    None => {
                        if let Some((_, w)) = self.queue.get_mut(i) {
                            w.waker_dropped = true;
                        }
                    }
                }
            }
            // Indexed now (one look-up): a call is no candidate waker of itself, skipped below.
            h.prev_call = t.calls.back().and_then(|c| u32::try_from(seq - c.seq).ok()).unwrap_or(0);
            if t.calls.len() > MAX_CANDIDATES {
                t.calls.pop_front();
            }
            t.calls.push_back(me);
            let w = &mut t.waiters;
            // Most calls change nothing in the list (their windows are other calls', or have
            // a fallback already): told before the pass that edits it.
            let found = &mut self.found;
            found.clear();
            if w.edited_by(h.ts, h.end, wakes, front) {
                w.edit(h.ts, h.end, wakes, front, seq, found);
            }
            for k in 0..self.found.len() {
                let p = self.found[k];
                untake(&mut self.queue, self.front_seq, &p);
                let f = self.flow();
                h.flows_out.push(f);
                if let Some(q) = self.queue.get_mut((p.c_seq - self.front_seq) as usize) {
                    q.0.flows_in.push(f);
                    q.1.waker = None;
                }
                self.stats.wakeups_linked += 1;
            }
        }
        // This request as the one that woke calls that arrived before it.
        if let Some(key) = h.request {
            let front = self.front_seq;
            if let Some(list) = self.waiting_request.get_mut(&key) {
                let found = &mut self.found_requests;
                found.clear();
                list.retain(|p| {
                    if p.c_seq < front {
                        return false;
                    }
                    if h.end >= p.lo && h.end <= p.hi && h.ts < p.hi {
                        found.push(p.c_seq);
                        return false;
                    }
                    true
                });
                if list.is_empty() {
                    self.waiting_request.remove(&key);
                }
                for k in 0..self.found_requests.len() {
                    let c = self.found_requests[k];
                    let f = self.flow();
                    h.flows_out.push(f);
                    if let Some(q) = self.queue.get_mut((c - self.front_seq) as usize) {
                        q.0.flows_in.push(f);
                        q.0.woken_by = None;
                    }
                    self.stats.requests_linked += 1;
                }
            }
        }
        // Its own waker among the calls held: the first in the window that can end its wait,
        // else wait for one (the first in the window is the fallback).
        if let Some((wtid, (lo, hi), part)) = wake {
            let (mut best, mut first) = (None, None);
            let own = usize::from(h.tid != 0 && h.tid == wtid);
            // One look-up for the candidates and, when none can end the wait, the waiting list:
            // an entry made here has no calls, so the call waits in it.
            let t = self.threads.entry(wtid).or_insert_with(|| self.spare_threads.pop().unwrap_or_default());
            {
                // Latest first: calls of one thread end in the order they began.
                let (front, back) = (self.front_seq, seq);
                let mut older = None;
                for c in t.calls.iter().rev().skip(own).take(MAX_CANDIDATES) {
                    let s = c.seq;
                    older = Some(s);
                    if s < front || s >= back {
                        continue;
                    }
                    if c.end < lo {
                        older = None;
                        break;
                    }
                    if c.ts < hi {
                        first = Some(s);
                        if can_wake_cached(&mut self.wake_masks, c.nr, part) {
                            best = Some(s);
                        }
                    }
                }
                // The window reaches past the calls the index keeps (the waker made more calls
                // while the woken one waited for a CPU): the older ones, through the queue.
                let mut next = older.filter(|&s| s >= front).and_then(|s| self.queue.get((s - front) as usize));
                while let Some(c) = next
                    .filter(|(d, _)| d.prev_call > 0)
                    .and_then(|(d, _)| d.seq.checked_sub(u64::from(d.prev_call)))
                    .filter(|&s| s >= front)
                {
                    let Some(e) = self.queue.get((c - front) as usize) else { break };
                    let d = &e.0;
                    if d.end < lo {
                        break;
                    }
                    if d.ts < hi {
                        first = Some(c);
                        if can_wake_cached(&mut self.wake_masks, nr(d), part) {
                            best = Some(c);
                        }
                    }
                    next = Some(e);
                }
            }
            match best {
                Some(s) => {
                    let f = self.flow();
                    if let Some(d) = self.held_mut(s) {
                        d.flows_out.push(f);
                    }
                    h.flows_in.push(f);
                    self.stats.wakeups_linked += 1;
                }
                None => {
                    if let Some((_, w)) =
                        first.and_then(|d| d.checked_sub(self.front_seq)).and_then(|i| self.queue.get_mut(i as usize))
                    {
                        w.fallbacks += 1;
                    }
                    let list = &mut t.waiters;
                    if list.list.len() >= MAX_WAITING {
                        // The oldest gives way (counted as not linked when it leaves).
                        if let Some(gone) = list.list.pop_front() {
                            if let Some(q) =
                                gone.c_seq.checked_sub(self.front_seq).and_then(|i| self.queue.get_mut(i as usize))
                            {
                                q.1.waker_dropped = true;
                            }
                            untake(&mut self.queue, self.front_seq, &gone);
                        }
                    }
                    list.push_back(Pending::new(seq, lo, hi, part, first));
                    waiting.waker = Some(wtid);
                }
            }
        }
        if let Some(key) = request {
            let (lo, hi) = (h.ts, h.end);
            let mut best: Option<(u64, u64)> = None;
            if let Some(d) = self.by_request.get(&key) {
                let (front, back) = (self.front_seq, seq);
                // From the last that completed by the call's end: a disk's requests are held in
                // about the order they completed, and those that completed after the call (a
                // trace's block requests are read ahead of its calls by up to a block) can be
                // many more than the candidates read (a cache flush per fsync).
                let to = (d.partition_point(|r| r.end <= hi) + REQUEST_DISORDER).min(d.len());
                for r in d.range(..to).rev().take(MAX_CANDIDATES) {
                    let s = r.seq;
                    if s < front || s >= back {
                        continue;
                    }
                    if r.end >= lo && r.end <= hi && r.ts < hi && best.is_none_or(|(_, e)| r.end >= e) {
                        best = Some((s, r.end));
                    }
                }
            }
            match best {
                Some((s, _)) => {
                    let f = self.flow();
                    if let Some(r) = self.held_mut(s) {
                        r.flows_out.push(f);
                    }
                    h.flows_in.push(f);
                    self.stats.requests_linked += 1;
                }
                None => {
                    let list = self.waiting_request.entry(key).or_default();
                    if list.len() >= MAX_WAITING_REQUEST {
                        if let Some(gone) = list.pop_front() {
                            if let Some(q) =
                                gone.c_seq.checked_sub(self.front_seq).and_then(|i| self.queue.get_mut(i as usize))
                            {
                                q.1.request_dropped = true;
                            }
                        }
                    }
                    list.push_back(Pending::new(seq, lo, hi, 0, None));
                    h.woken_by = Some(key);
                }
            }
        }
        if let Some(key) = h.request {
            self.by_request.entry(key).or_default().push_back(me);
        }
        self.queue.push_back((h, waiting));
    }

    /// Writes (with `out`) every slice due: those the watermark is `hold_ns` past, and the oldest
    /// beyond `max_held`; every slice with `all`.
    pub fn drain<E>(&mut self, all: bool, out: &mut impl FnMut(&Held) -> Result<(), E>) -> Result<(), E> {
        // Those over the bound first, counted: a full queue lets one leave per arrival, and a
        // loop of a known count ends the same way each time, where a test per slice that is
        // true and then false at every arrival is mispredicted about once per slice.
        let over =
            if all || self.hold_ns == 0 { self.queue.len() } else { self.queue.len().saturating_sub(self.max_held) };
        for _ in 0..over {
            self.leave(out)?;
        }
        // Then those the watermark is `hold_ns` past.
        while self.queue.front().is_some_and(|(h, _)| h.arrived.saturating_add(self.hold_ns) <= self.watermark) {
            self.leave(out)?;
        }
        Ok(())
    }

    /// Writes the slice at the front (with `out`) and keeps its box for reuse.
    #[inline]
    fn leave<E>(&mut self, out: &mut impl FnMut(&Held) -> Result<(), E>) -> Result<(), E> {
        if self.hold_ns > 0 {
            self.prefetch();
        }
        let Some((mut h, mut waiting)) = self.queue.pop_front() else { return Ok(()) };
        self.front_seq += 1;
        if self.hold_ns > 0 {
            self.settle(&mut h, &mut waiting);
            self.forget(&h, waiting);
        }
        let r = out(&h);
        h.enc.clear();
        h.reset = false;
        h.parts = 0;
        h.flows_out.clear();
        h.flows_in.clear();
        h.tid = 0;
        h.prev_call = 0;
        h.request = None;
        h.woken_by = None;
        // Only process events set it: a call's slice filled in this box after an instant's
        // would be written as an instant, its flows on its start.
        h.instant = false;
        if self.pool.len() + self.queue.len() < self.max_held + POOL {
            self.pool.push(h);
        }
        r
    }

    /// Asks the CPU for the slices about to leave: a full hold queue is far larger than the cache,
    /// so each slice's box would otherwise be read from memory as it is written. The box of the
    /// slice [`PREFETCH_BOX`] places from the front; the bytes or flows that did not fit in it of
    /// the one [`PREFETCH_DATA`] places from it, whose box came in meanwhile.
    #[inline]
    fn prefetch(&self) {
        if let Some(e) = self.queue.get(PREFETCH_ENTRY) {
            prefetch(e as *const (Box<Held>, Waiting));
        }
        if let Some((h, _)) = self.queue.get(PREFETCH_BOX) {
            let p = (&**h as *const Held).cast::<u8>();
            for k in (0..std::mem::size_of::<Held>()).step_by(64) {
                prefetch(p.wrapping_add(k));
            }
        }
        // Its bytes and flows are in the box unless they outgrew it (rarely): those elsewhere.
        if let Some((h, _)) = self.queue.get(PREFETCH_DATA) {
            if h.enc.spilled() {
                let enc = h.enc.bytes();
                for k in (0..enc.len()).step_by(64) {
                    prefetch(enc.as_ptr().wrapping_add(k));
                }
            }
            if h.flows_in.spilled() | h.flows_out.spilled() {
                prefetch(h.flows_in.as_ptr());
                prefetch(h.flows_out.as_ptr());
            }
        }
    }

    /// Links a slice about to leave with its fallback: as the fallback waker of calls still
    /// waiting, and as a woken call still waiting with a fallback (which came after it, so is
    /// still held).
    fn settle(&mut self, h: &mut Held, waiting: &mut Waiting) {
        // The calls that took it as their fallback when they arrived (after it: still held) are
        // those of its thread's waiting list naming it and later than it (a call naming a later
        // one leaves before it); in arrival order, as they took it. The count spares the look-up
        // to most slices, and to those whose takers were all linked or gave way meanwhile.
        if waiting.fallbacks > 0 {
            let mut cs = std::mem::take(&mut self.settling);
            cs.clear();
            if let Some(t) = self.threads.get(&h.tid) {
                cs.extend(
                    t.waiters.list.iter().filter(|p| p.fallback() == Some(h.seq) && p.c_seq > h.seq).map(|p| p.c_seq),
                );
            }
            cs.sort_unstable();
            for &c in &cs {
                let Some((q, w)) = c.checked_sub(self.front_seq).and_then(|i| self.queue.get_mut(i as usize)) else {
                    continue;
                };
                let Some(wtid) = w.waker.filter(|&t| t == h.tid) else { continue };
                let Some(list) = self.threads.get_mut(&wtid).map(|t| &mut t.waiters) else { continue };
                let Some(at) = list.list.iter().position(|p| p.c_seq == c && p.fallback() == Some(h.seq)) else {
                    continue;
                };
                list.swap_remove_back(at);
                let f = self.next_flow;
                self.next_flow += 1;
                h.flows_out.push(f);
                q.flows_in.push(f);
                w.waker = None;
                self.stats.wakeups_linked += 1;
            }
            self.settling = cs;
        }
        let Some(wtid) = waiting.waker.filter(|_| !waiting.waker_dropped) else { return };
        let Some(list) = self.threads.get_mut(&wtid).map(|t| &mut t.waiters) else { return };
        let Some(at) = list.list.iter().position(|p| p.c_seq == h.seq) else { return };
        let Some(d) = list.list[at].fallback().filter(|&d| d >= self.front_seq) else { return };
        list.swap_remove_back(at);
        let f = self.flow();
        if let Some(d) = self.held_mut(d) {
            d.flows_out.push(f);
            h.flows_in.push(f);
            waiting.waker = None;
            self.stats.wakeups_linked += 1;
        }
    }

    /// Removes the entry of a thread with no calls held and none waiting, keeping its lists'
    /// room for a thread to come: most threads' entries come and go as their calls do.
    fn retire(&mut self, tid: u32) {
        if let Some(mut t) = self.threads.remove(&tid) {
            if self.spare_threads.len() < SPARE_THREADS {
                t.calls.clear();
                t.waiters.list.clear();
                t.waiters.min_c_seq = u64::MAX;
                self.spare_threads.push(t);
            }
        }
    }

    /// Takes a slice that leaves out of the indexes, and counts its link as missed if it waited.
    fn forget(&mut self, h: &Held, waiting: Waiting) {
        if h.tid != 0 {
            // Its thread's calls have all left when it was the latest.
            if let Some(t) = self.threads.get_mut(&h.tid).filter(|t| t.calls.back().is_none_or(|c| c.seq == h.seq)) {
                t.calls.clear();
                if t.waiters.list.is_empty() {
                    self.retire(h.tid);
                }
            }
        }
        if let Some(key) = h.request {
            if let Some(d) = self.by_request.get_mut(&key) {
                d.pop_front();
                if d.is_empty() {
                    self.by_request.remove(&key);
                }
            }
        }
        // Its own entry, if still listed (one at most: sequence numbers are unique), leaves its
        // list in place (the others keep their order).
        if let Some(w) = waiting.waker {
            self.stats.wakeups_not_linked += 1;
            if !waiting.waker_dropped {
                if let Some(t) = self.threads.get_mut(&w) {
                    // Removed in place: the bounds stay bounds.
                    let list = &mut t.waiters.list;
                    if let Some(at) = list.iter().position(|p| p.c_seq == h.seq) {
                        list.remove(at);
                    }
                    if list.is_empty() {
                        t.waiters.min_c_seq = u64::MAX;
                        if t.calls.is_empty() {
                            self.retire(w);
                        }
                    }
                }
            }
        }
        if let Some(key) = h.woken_by {
            self.stats.requests_not_linked += 1;
            if !waiting.request_dropped {
                if let Some(list) = self.waiting_request.get_mut(&key) {
                    if let Some(at) = list.iter().position(|p| p.c_seq == h.seq) {
                        list.remove(at);
                    }
                    if list.is_empty() {
                        self.waiting_request.remove(&key);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(l: &mut Linker, tid: u32, ts: u64, end: u64) -> Box<Held> {
        let mut h = l.blank();
        h.ts = ts;
        h.end = end;
        h.tid = tid;
        h
    }

    /// A slice written: its thread, start, flows out and flows in.
    type Written = (u32, u64, Vec<u64>, Vec<u64>);

    /// Drains everything; returns each slice written, in order.
    fn all(l: &mut Linker) -> Vec<Written> {
        let mut v = Vec::new();
        l.drain(true, &mut |h: &Held| {
            v.push((h.tid, h.ts, h.flows_out.to_vec(), h.flows_in.to_vec()));
            Ok::<(), ()>(())
        })
        .unwrap();
        v
    }

    /// One call that woke more calls than a slice keeps flows in place (a futex waking every
    /// waiter): each woken call gets its own flow, and the waker all of them.
    #[test]
    fn a_call_waking_many_keeps_every_flow() {
        for woken_first in [true, false] {
            let mut l = Linker::new(1_000, 100);
            let woken = |l: &mut Linker| {
                for k in 0..7u32 {
                    let c = call(l, 10 + k, 0, 60 + u64::from(k));
                    l.push(c, Some((2, (50, 60), ANY_PART)), None);
                }
            };
            if woken_first {
                woken(&mut l);
            }
            let w = call(&mut l, 2, 40, 55);
            l.push(w, None, None);
            if !woken_first {
                woken(&mut l);
            }
            let v = all(&mut l);
            let w = v.iter().find(|x| x.0 == 2).unwrap();
            let ins: Vec<u64> = v.iter().filter(|x| x.0 >= 10).flat_map(|x| x.3.clone()).collect();
            assert_eq!(ins.len(), 7, "every woken call has its flow ({woken_first}): {v:?}");
            let (mut outs, mut ins_sorted) = (w.2.clone(), ins);
            outs.sort_unstable();
            ins_sorted.sort_unstable();
            assert_eq!(outs, ins_sorted, "the waker has them all ({woken_first}): {v:?}");
            assert_eq!(l.stats.wakeups_linked, 7);
        }
    }

    #[test]
    fn the_waking_call_is_the_wakers_first_call_ending_after_the_window_opens() {
        for waker_first in [true, false] {
            let mut l = Linker::new(1_000, 100);
            // Thread 2's calls: one before the window, the one in progress at the wake-up, one after.
            let waker = [(10, 20), (40, 55), (58, 90)];
            if waker_first {
                for (a, b) in waker {
                    let h = call(&mut l, 2, a, b);
                    l.push(h, None, None);
                }
            }
            let woken = call(&mut l, 1, 0, 60);
            l.push(woken, Some((2, (50, 60), 7)), None);
            if !waker_first {
                for (a, b) in waker {
                    let h = call(&mut l, 2, a, b);
                    l.push(h, None, None);
                }
            }
            let v = all(&mut l);
            let w = v.iter().find(|x| x.0 == 1).unwrap();
            let d = v.iter().find(|x| x.0 == 2 && x.1 == 40).unwrap();
            assert_eq!(w.3.len(), 1, "{v:?}");
            assert_eq!(d.2, w.3, "the call 40..55 woke it ({waker_first}): {v:?}");
            assert_eq!(l.stats.wakeups_linked, 1);
            assert!(v.iter().filter(|x| x.0 == 2 && x.1 != 40).all(|x| x.2.is_empty()));
        }
    }

    /// A lock wait is ended by a futex: of the waker's calls in the window, its futex is taken,
    /// held before the woken call or arriving after it; a write alone is taken for want of one.
    #[test]
    fn a_call_that_can_end_the_wait_is_preferred_to_the_first_in_the_window() {
        let futex = latscope_event::syscall_nr("futex").unwrap();
        let write = latscope_event::syscall_nr("write").unwrap();
        for (futex_first, with_futex) in [(true, true), (false, true), (true, false)] {
            let mut l = Linker::new(1_000, 100);
            let mut calls = vec![(write, 40, 52)];
            if with_futex {
                calls.push((futex, 53, 58));
            }
            let mk = |l: &mut Linker, (nr, a, b): (u16, u64, u64)| {
                let mut h = call(l, 2, a, b);
                h.name_key = u32::from(nr);
                h
            };
            if futex_first {
                for c in calls.clone() {
                    let h = mk(&mut l, c);
                    l.push(h, None, None);
                }
            }
            let woken = call(&mut l, 1, 0, 60);
            l.push(woken, Some((2, (50, 60), 3)), None);
            if !futex_first {
                for c in calls.clone() {
                    let h = mk(&mut l, c);
                    l.push(h, None, None);
                }
            }
            let v = all(&mut l);
            let w = v.iter().find(|x| x.0 == 1).unwrap();
            let want = if with_futex { 53 } else { 40 };
            let d = v.iter().find(|x| x.0 == 2 && x.1 == want).unwrap();
            assert_eq!((w.3.len(), &d.2), (1, &w.3), "({futex_first}, {with_futex}): {v:?}");
        }
    }

    /// Windows listed out of the order of their ends: a call of the waker finds the one it falls
    /// in, listed after one that ends later, and its own thread's calls are no candidates.
    #[test]
    fn a_waiting_window_listed_after_a_later_one_is_still_found() {
        let mut l = Linker::new(1_000, 100);
        let late = call(&mut l, 1, 0, 200);
        l.push(late, Some((2, (100, 200), 7)), None);
        let early = call(&mut l, 3, 0, 50);
        l.push(early, Some((2, (10, 50), 7)), None);
        let waker = call(&mut l, 2, 20, 40);
        l.push(waker, Some((2, (0, 40), 7)), None);
        let v = all(&mut l);
        let (e, w) = (v.iter().find(|x| x.0 == 3).unwrap(), v.iter().find(|x| x.0 == 2).unwrap());
        assert_eq!((e.3.len(), &w.2), (1, &e.3), "{v:?}");
        assert!(v.iter().find(|x| x.0 == 1).unwrap().3.is_empty(), "{v:?}");
        assert!(w.3.is_empty(), "not its own waker: {v:?}");
    }

    /// Once the waker's thread has a call that began after a wait's window, nothing later can
    /// end the wait: it takes its fallback then, and newer waits on that thread (more than a
    /// list holds) do not push it out unlinked.
    #[test]
    fn a_wait_the_wakers_thread_has_passed_takes_its_fallback_before_newer_waits_come() {
        let write = latscope_event::syscall_nr("write").unwrap();
        let mut l = Linker::new(1_000_000, 1_000);
        let mut w = call(&mut l, 2, 40, 55);
        w.name_key = u32::from(write);
        l.push(w, None, None);
        let woken = call(&mut l, 1, 0, 60);
        // Blocked on a lock (3): a write cannot end that, so it is only the fallback.
        l.push(woken, Some((2, (50, 60), 3)), None);
        let next = call(&mut l, 2, 70, 80);
        l.push(next, None, None);
        for k in 0..MAX_WAITING as u64 + 8 {
            let c = call(&mut l, 100 + k as u32, 1_000, 2_000 + k);
            l.push(c, Some((2, (1_500, 2_000 + k), 3)), None);
        }
        let v = all(&mut l);
        let woken = v.iter().find(|x| x.0 == 1).unwrap();
        let write = v.iter().find(|x| x.0 == 2 && x.1 == 40).unwrap();
        assert_eq!((woken.3.len(), &write.2), (1, &woken.3), "{v:?}");
        assert_eq!(l.stats.wakeups_linked, 1);
        assert_eq!(l.stats.wakeups_not_linked, MAX_WAITING as u64 + 8);
    }

    #[test]
    fn a_wakeup_whose_waker_made_no_call_then_is_counted_not_guessed() {
        let mut l = Linker::new(1_000, 100);
        let early = call(&mut l, 2, 10, 20);
        l.push(early, None, None);
        let woken = call(&mut l, 1, 0, 60);
        l.push(woken, Some((2, (50, 60), 7)), None);
        let late = call(&mut l, 2, 70, 80);
        l.push(late, None, None);
        let v = all(&mut l);
        assert!(v.iter().all(|x| x.2.is_empty() && x.3.is_empty()), "{v:?}");
        assert_eq!((l.stats.wakeups_linked, l.stats.wakeups_not_linked), (0, 1));
    }

    /// The wake-up's instant known (a recording keeps the end of the wait its waker ended): the
    /// waking call is the one in progress then, even when a later call of the waker could end
    /// such a wait by its kind (PostgreSQL wakes a backend's `epoll_wait` with `kill`, then
    /// `sendto`s on its own socket).
    #[test]
    fn the_call_in_progress_at_a_known_wakeup_is_the_waking_call() {
        let kill = latscope_event::syscall_nr("kill").unwrap();
        let sendto = latscope_event::syscall_nr("sendto").unwrap();
        for exact in [true, false] {
            let mut l = Linker::new(1_000, 100);
            for (nr, a, b) in [(kill, 40, 52), (sendto, 55, 58)] {
                let mut h = call(&mut l, 2, a, b);
                h.name_key = u32::from(nr);
                l.push(h, None, None);
            }
            let woken = call(&mut l, 1, 0, 60);
            // Woken at 50, in an IPC wait (4); without the instant, from 50 to its end.
            let (window, part) = if exact { ((50, 51), ANY_PART) } else { ((50, 60), 4) };
            l.push(woken, Some((2, window, part)), None);
            let v = all(&mut l);
            let w = v.iter().find(|x| x.0 == 1).unwrap();
            let want = if exact { 40 } else { 55 };
            let d = v.iter().find(|x| x.0 == 2 && x.1 == want).unwrap();
            assert_eq!((w.3.len(), &d.2), (1, &w.3), "exact {exact}: {v:?}");
        }
    }

    #[test]
    fn a_request_link_takes_the_latest_completion_inside_the_call() {
        let mut l = Linker::new(1_000, 100);
        for (ts, end) in [(5, 8), (20, 30), (32, 45), (70, 80)] {
            let mut r = l.blank();
            r.ts = ts;
            r.end = end;
            r.request = Some((7, 100));
            l.push(r, None, None);
        }
        let c = call(&mut l, 1, 10, 60);
        l.push(c, None, Some((7, 100)));
        let v = all(&mut l);
        let got: Vec<u64> = v.iter().filter(|x| !x.2.is_empty()).map(|x| x.1).collect();
        assert_eq!(got, vec![32]);
        assert_eq!(l.stats.requests_linked, 1);
    }

    /// The waker made more calls while the woken call waited for a CPU than its thread's index
    /// keeps: the waking futex, older than all of them, is still found (through the queue), not
    /// one of the writes after it.
    #[test]
    fn a_waker_that_made_many_calls_since_the_wakeup_is_still_found() {
        let futex = latscope_event::syscall_nr("futex").unwrap();
        let write = latscope_event::syscall_nr("write").unwrap();
        let mut l = Linker::new(1_000_000, 10_000);
        let mut h = call(&mut l, 2, 30, 38);
        h.name_key = u32::from(write);
        l.push(h, None, None);
        let mut h = call(&mut l, 2, 40, 45);
        h.name_key = u32::from(futex);
        l.push(h, None, None);
        for k in 0..MAX_CANDIDATES as u64 * 4 {
            let mut h = call(&mut l, 2, 50 + 2 * k, 51 + 2 * k);
            h.name_key = u32::from(write);
            l.push(h, None, None);
        }
        let woken = call(&mut l, 1, 0, 1_000);
        l.push(woken, Some((2, (41, 1_000), 3)), None);
        let v = all(&mut l);
        let w = v.iter().find(|x| x.0 == 1).unwrap();
        let d = v.iter().find(|x| x.0 == 2 && x.1 == 40).unwrap();
        assert_eq!((w.3.len(), &d.2), (1, &w.3), "{:?}", &v[..4]);
        assert_eq!((l.stats.wakeups_linked, l.stats.wakeups_not_linked), (1, 0));
    }

    /// Cache flushes have no sector, so every fsync of a disk waits for a request of the same
    /// key; a trace's requests are read ahead of its calls. Each call still gets the flush that
    /// completed inside it: many flushes completed after it, many calls waiting at once.
    #[test]
    fn every_fsync_finds_its_flush_among_many() {
        const FLUSH: (u32, u64) = (7, u64::MAX);
        let n = MAX_CANDIDATES as u64 * 3;
        let flush = |l: &mut Linker, k: u64| {
            let mut r = l.blank();
            r.ts = 100 * k + 50;
            r.end = 100 * k + 60;
            r.request = Some(FLUSH);
            r
        };
        let fsync = |l: &mut Linker, k: u64| call(l, 1 + k as u32, 100 * k + 10, 100 * k + 90);
        for requests_first in [true, false] {
            let mut l = Linker::new(1_000_000, 10_000);
            for k in 0..n {
                if requests_first {
                    let r = flush(&mut l, k);
                    l.push(r, None, None);
                } else {
                    let c = fsync(&mut l, k);
                    l.push(c, None, Some(FLUSH));
                }
            }
            for k in 0..n {
                if requests_first {
                    let c = fsync(&mut l, k);
                    l.push(c, None, Some(FLUSH));
                } else {
                    let r = flush(&mut l, k);
                    l.push(r, None, None);
                }
            }
            let v = all(&mut l);
            // Each call's flow comes from the flush that began 40 ns into it.
            let by_start: HashMap<u64, &Written> = v.iter().filter(|x| x.0 == 0).map(|x| (x.1, x)).collect();
            for c in v.iter().filter(|x| x.0 != 0) {
                let r = by_start[&(c.1 + 40)];
                assert_eq!((c.3.len(), &r.2), (1, &c.3), "requests first {requests_first}: {c:?}");
            }
            assert_eq!((l.stats.requests_linked, l.stats.requests_not_linked), (n, 0), "{requests_first}");
        }
    }

    /// A box reused after a process event's instant comes back as a slice: a call filled in it
    /// keeps its end and ends its flows there, after the call that woke it began.
    #[test]
    fn a_blank_after_an_instant_is_no_instant() {
        let mut l = Linker::new(100, 10);
        let mut p = l.blank();
        p.instant = true;
        l.push(p, None, None);
        l.drain(true, &mut |_: &Held| Ok::<(), ()>(())).unwrap();
        assert!(!l.blank().instant);
    }

    #[test]
    fn slices_leave_in_arrival_order_once_the_watermark_passes_or_the_queue_is_full() {
        let mut l = Linker::new(100, 3);
        let mut out = Vec::new();
        for i in 0..10u64 {
            let h = call(&mut l, 1 + i as u32, i * 50, i * 50 + 10);
            l.push(h, None, None);
            l.drain(false, &mut |h: &Held| {
                out.push(h.ts);
                Ok::<(), ()>(())
            })
            .unwrap();
            assert!(l.queue.len() <= 3);
        }
        // The hold is 100 ns: a slice leaves two arrivals (100 ns) later.
        assert_eq!(out, (0..8).map(|j| j * 50).collect::<Vec<u64>>());
    }

    /// The edit pass without branches does what the rule says, entry by entry: a call in the
    /// window of a wait it can end takes it (in list order), a waiting call that left goes, a
    /// call in the window of a wait with no fallback becomes its fallback, the others are kept
    /// as they were, in order, with exact bounds. Lists made by a small generator, wrapped
    /// round the deque's end or not.
    #[test]
    fn the_edit_pass_follows_the_rule_entry_by_entry() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for round in 0..2000 {
            let mut w = Waiters::default();
            // Rotates the deque's storage so that some lists wrap round its end.
            for _ in 0..next(8) {
                w.list.push_back(Pending::new(0, 0, 0, 0, None));
                w.list.pop_front();
            }
            let n = next(20) as usize;
            for k in 0..n as u64 {
                let lo = next(100);
                let fallback = (next(3) == 0).then(|| next(50));
                w.push_back(Pending::new(10 + k, lo, lo + next(60), next(9) as usize, fallback));
            }
            let (ts, end) = {
                let a = next(150);
                (a, a + next(40))
            };
            let (wakes, front, seq) = (next(1 << 9) as u16, 10 + next(6), 100 + round);
            // The rule, entry by entry.
            let (mut want_found, mut want) = (Vec::new(), Vec::new());
            for p in w.list.iter().copied() {
                if p.c_seq < front {
                    continue;
                }
                let window = ts < p.hi && end >= p.lo;
                if window && (wakes >> p.part()) & 1 != 0 {
                    want_found.push(p.c_seq);
                    continue;
                }
                let fallback = if window && p.fallback().is_none() { Some(seq) } else { p.fallback() };
                want.push((p.c_seq, p.lo, p.hi, p.part(), fallback));
            }
            let mut found = Vec::new();
            w.edit(ts, end, wakes, front, seq, &mut found);
            assert_eq!(found.iter().map(|p| p.c_seq).collect::<Vec<_>>(), want_found, "round {round}");
            let got: Vec<_> = w.list.iter().map(|p| (p.c_seq, p.lo, p.hi, p.part(), p.fallback())).collect();
            assert_eq!(got, want, "round {round}");
            let mut max_hi = 0;
            for p in &w.list {
                max_hi = max_hi.max(p.hi);
                assert_eq!(p.max_hi, max_hi, "round {round}: running maximum");
            }
            assert_eq!(w.min_c_seq, w.list.iter().map(|p| p.c_seq).min().unwrap_or(u64::MAX), "round {round}");
        }
    }
}

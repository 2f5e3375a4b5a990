//! The per-CPU rings, and their merge with the shared ring buffer in time order.
//!
//! A plain event (no path, no attribution) is written in place in a ring of the CPU its call
//! ended on (`pcpu_reserve` in latscope.bpf.c): no helper call reserves or commits it. Every
//! other record goes to the shared ring buffer, and so does a plain event whose CPU's ring is
//! full. The decoder matches records in the order they happened (a file named by its `open`
//! before the `read` on its fd, a `close` before the fd's reuse), so the sources are merged by
//! each record's time: a call's or a block request's end, a process event's time.
//!
//! A record is handed on only once no source can still produce an earlier one: its time is at
//! least [`MARGIN_NS`] before the poll began (a program takes its time a few hundred ns before
//! it publishes the record), and, when the shared ring buffer was not read to its end, no later
//! than the latest record read from it. Once the probes are detached, everything goes.

use crate::decode::RECORD_SIZE;
use crate::skel::types::ls_event;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

/// How long before a poll began a record's time must be for it to be handed on: the longest a
/// program is expected to take from reading the clock to publishing its record, interrupts
/// included. A record later than that is still read; it may come after a neighbour of the
/// other source that in fact followed it (as with the shared ring buffer alone, whose order is
/// that of the records' reservations).
pub const MARGIN_NS: u64 = 2_000_000;

/// The control block of a CPU's ring (`struct ls_pcpu_ctl`): head at byte 0, tail at byte 64.
const CTL_SIZE: usize = 128;
const TAIL_OFFSET: usize = 64;

/// A mapped BPF array (`BPF_F_MMAPABLE`): its values from offset 0.
struct Mapped {
    ptr: *mut u8,
    len: usize,
}

impl Mapped {
    fn new(fd: i32, len: usize) -> std::io::Result<Mapped> {
        // SAFETY: a fresh shared mapping of the map's values; the kernel checks the length.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapped { ptr: ptr as *mut u8, len })
    }

    #[cfg(test)]
    fn anon(len: usize) -> Mapped {
        // SAFETY: a fresh private anonymous mapping (zeroed).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        Mapped { ptr: ptr as *mut u8, len }
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        assert!(off + 8 <= self.len && off.is_multiple_of(8));
        // SAFETY: in bounds and aligned (checked); the mapping lives as long as self, and the
        // word is only ever accessed atomically (the programs write it with one store).
        unsafe { AtomicU64::from_ptr(self.ptr.add(off) as *mut u64) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// The page-rounded length of a mapped array of `entries` values of `value` bytes.
pub fn mapped_len(value: usize, entries: usize) -> usize {
    let page = page_size();
    (value.next_multiple_of(8) * entries).next_multiple_of(page)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// The time a record is ordered by: the end of a call or of a block request, the time of a
/// process event (whose `lat` may hold something else). A record too short to read comes first:
/// the decoder counts it.
pub fn key(data: &[u8]) -> u64 {
    if data.len() < RECORD_SIZE {
        return 0;
    }
    let at = |off: usize| u64::from_ne_bytes(data[off..off + 8].try_into().expect("8 bytes"));
    let ts = at(std::mem::offset_of!(ls_event, ts));
    if data[std::mem::offset_of!(ls_event, kind)] == latscope_event::EventKind::Proc as u8 {
        ts
    } else {
        ts.saturating_add(at(std::mem::offset_of!(ls_event, lat)))
    }
}

/// The per-CPU rings, mapped, and the records read from the shared ring buffer not yet handed
/// on.
pub struct Merge {
    ctl: Mapped,
    slots: Mapped,
    ncpus: usize,
    /// Slots per CPU (a power of two).
    per_cpu: u64,
    /// Bytes between slots: the event's size rounded up to 8, as the array lays values out.
    stride: usize,
    /// Each CPU's head as last read, and its tail as this side has it (written back after each
    /// poll).
    heads: Vec<u64>,
    tails: Vec<u64>,
    /// Records read from the shared ring buffer, in its order: (time, start, length) in `bytes`.
    shared: VecDeque<(u64, usize, usize)>,
    bytes: Vec<u8>,
    /// The latest time among the records read from the shared ring buffer so far: what it still
    /// holds is later (give or take its own order, that of the records' reservations).
    shared_newest: u64,
}

impl Merge {
    /// Map the rings: `ctl_fd` the control blocks' array (one per CPU), `slots_fd` the slots'
    /// (`per_cpu` per CPU, CPU after CPU).
    pub fn new(ctl_fd: i32, slots_fd: i32, ncpus: usize, per_cpu: u64) -> std::io::Result<Merge> {
        let ctl = Mapped::new(ctl_fd, mapped_len(CTL_SIZE, ncpus))?;
        let slots = Mapped::new(slots_fd, mapped_len(RECORD_SIZE, ncpus * per_cpu as usize))?;
        Ok(Merge::over(ctl, slots, ncpus, per_cpu))
    }

    fn over(ctl: Mapped, slots: Mapped, ncpus: usize, per_cpu: u64) -> Merge {
        assert!(per_cpu.is_power_of_two());
        Merge {
            ctl,
            slots,
            ncpus,
            per_cpu,
            stride: RECORD_SIZE.next_multiple_of(8),
            heads: vec![0; ncpus],
            tails: vec![0; ncpus],
            shared: VecDeque::new(),
            bytes: Vec::new(),
            shared_newest: 0,
        }
    }

    /// Start a poll: read every CPU's head (what its ring holds from now on is read by
    /// [`Merge::emit`]).
    pub fn begin(&mut self) {
        for c in 0..self.ncpus {
            // Acquire: the slots written before the head are seen.
            self.heads[c] = self.ctl.word(c * CTL_SIZE).load(Ordering::Acquire);
        }
    }

    /// Keep a record read from the shared ring buffer until its turn.
    pub fn stage(&mut self, data: &[u8]) {
        let k = key(data);
        self.shared_newest = self.shared_newest.max(k);
        let start = self.bytes.len();
        self.bytes.extend_from_slice(data);
        self.shared.push_back((k, start, data.len()));
    }

    /// Records read from the shared ring buffer and not handed on yet.
    pub fn staged(&self) -> usize {
        self.shared.len()
    }

    /// The latest time among the records the shared ring buffer gave so far.
    pub fn shared_newest(&self) -> u64 {
        self.shared_newest
    }

    fn slot(&self, cpu: usize, seq: u64) -> &[u8] {
        let i = cpu * self.per_cpu as usize + (seq & (self.per_cpu - 1)) as usize;
        let off = i * self.stride;
        assert!(off + RECORD_SIZE <= self.slots.len);
        // SAFETY: in bounds (checked); a slot between the tail and the head read with acquire
        // ordering is complete and not written again until the tail passes it.
        unsafe { std::slice::from_raw_parts(self.slots.ptr.add(off), RECORD_SIZE) }
    }

    /// Hand on, in time order, at most `limit` records of time `watermark` or earlier, from
    /// every source; the number handed on. Each CPU's freed slots go back to its programs.
    pub fn emit(&mut self, watermark: u64, limit: usize, mut f: impl FnMut(&[u8])) -> usize {
        // Sources: 0 the shared ring buffer's records, 1 + c CPU c's ring.
        let mut heap = BinaryHeap::with_capacity(self.ncpus + 1);
        if let Some(&(k, _, _)) = self.shared.front() {
            heap.push(Reverse((k, 0usize)));
        }
        for c in 0..self.ncpus {
            if self.tails[c] != self.heads[c] {
                heap.push(Reverse((key(self.slot(c, self.tails[c])), c + 1)));
            }
        }
        let mut n = 0;
        while n < limit {
            let Some(Reverse((first, src))) = heap.pop() else { break };
            if first > watermark {
                break;
            }
            // A run of the earliest source's records, up to the next source's head: one busy CPU
            // gives long runs, each taken without the heap.
            let bound = heap.peek().map_or(watermark, |Reverse((next, _))| (*next).min(watermark));
            if src == 0 {
                loop {
                    let (_, start, len) = self.shared.pop_front().expect("a staged record");
                    f(&self.bytes[start..start + len]);
                    n += 1;
                    match self.shared.front() {
                        Some(&(next, _, _)) if next <= bound && n < limit => {}
                        Some(&(next, _, _)) => {
                            heap.push(Reverse((next, 0)));
                            break;
                        }
                        None => break,
                    }
                }
            } else {
                let c = src - 1;
                loop {
                    f(self.slot(c, self.tails[c]));
                    self.tails[c] += 1;
                    n += 1;
                    if self.tails[c] == self.heads[c] {
                        break;
                    }
                    let k = key(self.slot(c, self.tails[c]));
                    if k > bound || n >= limit {
                        heap.push(Reverse((k, src)));
                        break;
                    }
                }
            }
        }
        for c in 0..self.ncpus {
            // Release: the slots read are given back only after they were read.
            self.ctl.word(c * CTL_SIZE + TAIL_OFFSET).store(self.tails[c], Ordering::Release);
        }
        match self.shared.front() {
            None => self.bytes.clear(),
            // Keep the bytes from growing: drop what was handed on once it is most of them.
            Some(&(_, start, _)) if start > self.bytes.len() / 2 => {
                self.bytes.drain(..start);
                for r in self.shared.iter_mut() {
                    r.1 -= start;
                }
            }
            Some(_) => {}
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: u8, ts: u64, lat: u64) -> Vec<u8> {
        let e = ls_event { kind, ts, lat, ..Default::default() };
        // SAFETY: ls_event is plain old data.
        unsafe { std::slice::from_raw_parts(&e as *const ls_event as *const u8, RECORD_SIZE) }.to_vec()
    }

    /// Rings in plain memory, written as the programs write them.
    fn rings(ncpus: usize, per_cpu: u64) -> Merge {
        let ctl = Mapped::anon(mapped_len(CTL_SIZE, ncpus));
        let slots = Mapped::anon(mapped_len(RECORD_SIZE, ncpus * per_cpu as usize));
        Merge::over(ctl, slots, ncpus, per_cpu)
    }

    /// What pcpu_reserve and pcpu_commit do: false when the ring is full.
    fn write(m: &Merge, cpu: usize, ts: u64, lat: u64) -> bool {
        let head = m.ctl.word(cpu * CTL_SIZE).load(Ordering::Relaxed);
        let tail = m.ctl.word(cpu * CTL_SIZE + TAIL_OFFSET).load(Ordering::Acquire);
        if head - tail > m.per_cpu - 1 {
            return false;
        }
        let i = cpu * m.per_cpu as usize + (head & (m.per_cpu - 1)) as usize;
        let r = rec(0, ts, lat);
        // SAFETY: slot i is in the mapping (the test's sizes).
        unsafe { std::ptr::copy_nonoverlapping(r.as_ptr(), m.slots.ptr.add(i * m.stride), RECORD_SIZE) };
        m.ctl.word(cpu * CTL_SIZE).store(head + 1, Ordering::Release);
        true
    }

    fn ends(m: &mut Merge, watermark: u64, limit: usize) -> Vec<u64> {
        let mut v = Vec::new();
        m.emit(watermark, limit, |d| v.push(key(d)));
        v
    }

    #[test]
    fn the_sources_are_merged_by_time_up_to_the_watermark() {
        let mut m = rings(2, 4);
        assert!(write(&m, 0, 10, 0));
        assert!(write(&m, 0, 30, 0));
        assert!(write(&m, 1, 20, 0));
        assert!(write(&m, 1, 45, 0));
        m.begin();
        m.stage(&rec(2, 25, 0));
        m.stage(&rec(0, 35, 5)); // ends at 40
        assert_eq!(m.shared_newest(), 40);
        // Written after the poll began: not read before the next.
        assert!(write(&m, 0, 12, 0));
        assert_eq!(ends(&mut m, 40, usize::MAX), [10, 20, 25, 30, 40]);
        assert_eq!(m.staged(), 0);
        m.begin();
        // What the shared ring buffer gave is remembered across polls: the bound of what it
        // still holds, when it was not read to its end.
        assert_eq!(m.shared_newest(), 40);
        assert_eq!(ends(&mut m, u64::MAX, usize::MAX), [12, 45]);
        assert_eq!(ends(&mut m, u64::MAX, usize::MAX), Vec::<u64>::new());
    }

    #[test]
    fn runs_of_one_source_stop_at_the_next_source_s_head() {
        let mut m = rings(2, 16);
        for t in [1, 2, 3, 7, 8, 12] {
            assert!(write(&m, 0, t, 0));
        }
        for t in [4, 5, 9, 13] {
            assert!(write(&m, 1, t, 0));
        }
        m.begin();
        m.stage(&rec(2, 6, 0));
        m.stage(&rec(2, 10, 0));
        m.stage(&rec(2, 11, 0));
        assert_eq!(ends(&mut m, 12, 6), [1, 2, 3, 4, 5, 6]);
        assert_eq!(ends(&mut m, 12, usize::MAX), [7, 8, 9, 10, 11, 12]);
        assert_eq!(ends(&mut m, u64::MAX, usize::MAX), [13]);
    }

    #[test]
    fn a_ring_is_full_until_its_records_are_handed_on_and_the_limit_holds() {
        let mut m = rings(1, 4);
        for t in 1..=4 {
            assert!(write(&m, 0, t, 0));
        }
        // Full: the program sends the event to the shared ring buffer instead.
        assert!(!write(&m, 0, 5, 0));
        m.begin();
        m.stage(&rec(0, 5, 0));
        assert_eq!(ends(&mut m, u64::MAX, 3), [1, 2, 3]);
        // The slots handed on are free again.
        assert!(write(&m, 0, 6, 0));
        assert_eq!(ends(&mut m, u64::MAX, 10), [4, 5]);
        m.begin();
        assert_eq!(ends(&mut m, u64::MAX, 10), [6]);
    }

    #[test]
    fn records_past_the_watermark_wait_and_the_staged_bytes_stay_small() {
        let mut m = rings(1, 8);
        m.begin();
        for t in 10..1010u64 {
            m.stage(&rec(2, t, 0));
            let got = ends(&mut m, t - 3, usize::MAX);
            assert_eq!(got, if t >= 13 { vec![t - 3] } else { vec![] });
            assert!(m.bytes.len() <= 8 * RECORD_SIZE, "{} bytes staged", m.bytes.len());
        }
        assert_eq!(ends(&mut m, u64::MAX, usize::MAX), [1007, 1008, 1009]);
        assert!(m.bytes.is_empty());
    }

    #[test]
    fn calls_are_ordered_by_their_end_process_events_by_their_time() {
        assert_eq!(key(&rec(0, 100, 50)), 150);
        assert_eq!(key(&rec(1, 100, 50)), 150);
        // A process event's lat is not a duration to add (the thread-times event's pending call).
        assert_eq!(key(&rec(2, 100, 50)), 100);
        assert_eq!(key(&[0u8; 8]), 0);
    }
}

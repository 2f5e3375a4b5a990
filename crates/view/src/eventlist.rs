//! The output of `latscope events`: the rows of a scan's chunks -> one line (or JSON object) per
//! event, with `--why` breakdowns under calls, in the order of their start (or end) time.
//!
//! The per-event work lives here, not in the command, so that it is compiled with the library's
//! optimisation (and the output writer is one concrete type: no generic code left for the
//! command's crate to instantiate).

use crate::chain::ChainIndex;
use crate::events::{write_json, write_line, TimeFormat};
use crate::reorder::{OrderedWriter, SortBy};
use crate::why;
use latscope_event::{EventBatch, EventKind, TraceHeader};
use std::io::{BufWriter, Write};

/// How [`EventList`] prints.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// One JSON object per event (with its breakdown as `"why"`) instead of a line.
    pub json: bool,
    /// Lines: under each call recorded with `record --why`, its breakdown and chain of waits.
    pub why: bool,
    /// The time column of lines.
    pub time: TimeFormat,
    /// The order of the output.
    pub sort: SortBy,
    /// The reorder window, ns.
    pub window_ns: u64,
    /// Most events held for reordering.
    pub max_held: usize,
    /// Most events written.
    pub limit: u64,
}

/// The columns `events --json` reads only for a call that carries a breakdown (its waker's
/// name, the CPU's holder, the lock, the page fault, the request, the intervals off the CPU):
/// most recordings have none, and decoding these zeros took a tenth of its time. Read from the
/// first block where [`needs_why_columns`] says a call may use them.
pub const WHY_ONLY_COLUMNS: [&str; 26] = [
    "waker_comm_lo",
    "waker_comm_hi",
    "runq_tid",
    "runq_cpu",
    "wake_dev",
    "wake_sector",
    "kstack",
    "ustack",
    "waker_wait_part",
    "waker_wait_ns",
    "wake_held_ns",
    "wake_queue_ns",
    "wake_device_ns",
    "fault_addr",
    "fault_off",
    "fault_path",
    "wake_flags",
    "lock_kind",
    "lock_addr",
    "lock_op",
    "lock_word",
    "lock_owner",
    "lock_start",
    "lock_len",
    "waker_ustack",
    "waker_wait_dev",
];

/// Whether a call of `b` (decoded without [`WHY_ONLY_COLUMNS`] and `OFF_COLUMNS`) carries a
/// breakdown, or a wait the chains of waits index (which reads its waker): then the block is
/// read with them.
pub fn needs_why_columns(b: &EventBatch) -> bool {
    b.why_part_columns().iter().any(|c| c.iter().any(|&v| v != 0)) || b.wait_start.iter().any(|&v| v != 0)
}

/// What [`EventList::finish`] counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Events printed out of order (marked late).
    pub late: u64,
    /// Syscalls formatted with `--why`.
    pub calls: u64,
    /// Those of them that carried a breakdown.
    pub explained: u64,
    /// The most events held at once for reordering.
    pub peak_held: usize,
}

/// Events formatted and written in order to an output (buffered here: give it the raw stream).
pub struct EventList<'a> {
    header: TraceHeader,
    o: Options,
    w: OrderedWriter<BufWriter<Box<dyn Write + 'a>>>,
    /// The calls of every block read (not only those the filter took): chains of waits go
    /// through them.
    chains: ChainIndex,
    calls: u64,
    explained: u64,
}

impl<'a> EventList<'a> {
    /// Prints the events of a trace with header `header` to `out`.
    pub fn new(header: TraceHeader, o: Options, out: Box<dyn Write + 'a>) -> Self {
        // Runs of events longer than the buffer go out from where they are held, uncopied.
        let out = BufWriter::with_capacity(1 << 16, out);
        let w = OrderedWriter::new(o.sort, o.window_ns, o.max_held, out, o.limit, o.json);
        EventList { header, o, w, chains: ChainIndex::new(), calls: 0, explained: 0 }
    }

    /// Writes every held event before `bound` (ns, of the order's time): no event still to be
    /// given begins (or, by end, ends) before it. Only what is held changes, not the output.
    pub fn release_before(&mut self, bound: u64) -> std::io::Result<()> {
        self.w.release_before(bound)
    }

    /// Whether the limit has been reached (nothing more will be written).
    pub fn full(&self) -> bool {
        self.w.full()
    }

    /// Takes rows `rows` of `b` (a block of the trace, in the order read) and writes what can go
    /// out now.
    pub fn batch(&mut self, b: &EventBatch, rows: &[u32]) -> std::io::Result<()> {
        let (json, why, tf) = (self.o.json, self.o.why, self.o.time);
        if json || why {
            self.chains.add(b);
        }
        let (h, chains) = (&self.header, &self.chains);
        let (calls, explained) = (&mut self.calls, &mut self.explained);
        for (k, &i) in rows.iter().enumerate() {
            let i = i as usize;
            // The row some 16 ahead: its columns' lines arrive while these rows are written.
            if k % 8 == 0 {
                if let Some(&a) = rows.get(k + 16) {
                    crate::events::prefetch_json_row(b, a as usize);
                }
            }
            self.w.push_with(b.ts[i], b.end(i), |s| {
                if json {
                    write_json(s, h, b, i, Some(chains));
                    return;
                }
                write_line(s, h, b, i, tf);
                if why {
                    *calls += u64::from(b.kind[i] == EventKind::Syscall as u8);
                    let line = why::line(h, b, i);
                    *explained += u64::from(line.is_some());
                    for extra in [line, why::order_line(b, i), why::chain_line(h, chains, b, i)].into_iter().flatten() {
                        s.push('\n');
                        s.push_str(&extra);
                    }
                }
            })?;
        }
        Ok(())
    }

    /// Writes every held event, flushes, and says how many were late and, with `--why`, how
    /// many calls carried a breakdown.
    pub fn finish(self) -> std::io::Result<Summary> {
        let peak_held = self.w.peak_held();
        let (_, late) = self.w.finish()?;
        Ok(Summary { late, calls: self.calls, explained: self.explained, peak_held })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reorder::Lookahead;
    use latscope_trace::synth::{BusyServer, Layout};
    use latscope_trace::{TraceReader, TraceWriter};

    /// Prints the trace at `path` as `events` prints it, with the blocks' zone maps read ahead or
    /// not: the output and the most events held.
    fn print(path: &std::path::Path, json: bool, sort: SortBy, window_ns: u64, ahead: bool) -> (Vec<u8>, Summary) {
        let mut r = TraceReader::open(path).unwrap();
        let header = r.header().clone();
        let la = ahead.then(|| {
            let ro = latscope_trace::ReadOptions {
                projection: Some(vec![latscope_trace::Column::Ts, latscope_trace::Column::Lat]),
                skip_corrupt: true,
            };
            Lookahead::read(TraceReader::open_with(path, ro).unwrap(), sort, window_ns)
        });
        let o = Options {
            json,
            why: false,
            time: crate::events::TimeFormat::Relative,
            sort,
            window_ns,
            max_held: 1_000_000,
            limit: u64::MAX,
        };
        let mut out = Vec::new();
        let mut list = EventList::new(header, o, Box::new(&mut out));
        while let Some(b) = r.next_batch() {
            let b = b.unwrap();
            let rows: Vec<u32> = (0..b.len() as u32).collect();
            list.batch(&b, &rows).unwrap();
            let seq = r.last_block_meta().and_then(|m| m.seq);
            if let Some(bound) = la.as_ref().zip(seq).and_then(|(l, s)| l.after(s)) {
                list.release_before(bound).unwrap();
            }
        }
        let s = list.finish().unwrap();
        (out, s)
    }

    /// A busy server's trace of 300 000 events, `long` of whose calls in its last block began at
    /// its start (a shell's wait for its command): its path and its span, ns.
    fn busy_trace(name: &str, long: usize) -> (std::path::PathBuf, u64) {
        let path = std::env::temp_dir().join(format!("latscope-{name}-{}.lst", std::process::id()));
        let server = BusyServer { events: 300_000, block_every: 20, layout: Layout::ByKind };
        let mut batches = Vec::new();
        let summary = server
            .for_each_batch(|b| {
                batches.push(b.clone());
                Ok::<(), ()>(())
            })
            .unwrap();
        let first = batches.iter().flat_map(|b| b.ts.iter()).copied().min().unwrap();
        let last = batches.iter().flat_map(|b| (0..b.len()).map(|i| b.end(i))).max().unwrap();
        let b = batches.last_mut().unwrap();
        let calls: Vec<usize> = (0..b.len()).filter(|&i| b.kind[i] == EventKind::Syscall as u8).take(long).collect();
        for (k, i) in calls.into_iter().enumerate() {
            let end = b.end(i);
            b.ts[i] = first + 1000 * k as u64;
            b.lat[i] = end - b.ts[i];
        }
        // Blocks of 2048 events: many to a window.
        let mut w = TraceWriter::create(&path, &server.header()).unwrap();
        for b in &batches {
            for from in (0..b.len()).step_by(2048) {
                let mut part = latscope_event::EventBatch::default();
                part.append_range(b, from..(from + 2048).min(b.len()));
                w.write_batch(&part, 0).unwrap();
            }
        }
        w.finish(summary).unwrap();
        (path, last - first)
    }

    /// A busy server's trace, printed as `events` prints it: with the blocks' zone maps read
    /// ahead, the output is the same byte for byte, in JSON and in lines, by start and by end,
    /// and a few blocks' worth of events are held instead of the whole window's.
    #[test]
    fn reading_the_zone_maps_ahead_changes_only_what_is_held() {
        let (path, _) = busy_trace("lookahead", 0);
        for (json, sort) in [(true, SortBy::Start), (false, SortBy::Start), (false, SortBy::End)] {
            let (all, s_all) = print(&path, json, sort, 5_000_000_000, false);
            let (ahead, s_ahead) = print(&path, json, sort, 5_000_000_000, true);
            assert!(all == ahead, "json {json}, {sort:?}: the output differs");
            assert_eq!(s_all.peak_held, 300_000, "a 5 s window over a shorter trace holds it all");
            assert!(s_ahead.peak_held < 300_000 / 3, "json {json}, {sort:?}: {} held", s_ahead.peak_held);
        }
        let _ = std::fs::remove_file(&path);
    }

    /// Calls longer than the window that end in the last block (shells waiting for their
    /// commands) are late either way; with the zone maps read ahead they do not hold back every
    /// event before them: the same output, and no more held than without them.
    #[test]
    fn calls_longer_than_the_window_do_not_hold_back_the_zone_maps() {
        let (plain, span) = busy_trace("lookahead-plain", 0);
        let (path, _) = busy_trace("lookahead-long", 3);
        let window = span / 4;
        for (json, sort) in [(true, SortBy::Start), (false, SortBy::Start)] {
            let (all, s_all) = print(&path, json, sort, window, false);
            let (ahead, s_ahead) = print(&path, json, sort, window, true);
            // The late calls go out when read, which is after more of the others here; the
            // others come out in the same order.
            let split = |out: &[u8]| {
                let text = String::from_utf8(out.to_vec()).unwrap();
                let (late, timely): (Vec<String>, Vec<String>) =
                    text.lines().map(str::to_string).partition(|l| l.contains("\"late\":true") || l.contains("[late]"));
                (late, timely)
            };
            let ((late_all, all), (late_ahead, ahead)) = (split(&all), split(&ahead));
            assert!(all == ahead, "json {json}, {sort:?}: the output differs");
            assert_eq!(late_all, late_ahead, "json {json}, {sort:?}");
            assert_eq!((late_all.len(), s_all.late, s_ahead.late), (3, 3, 3), "the three long calls are late");
            let (_, s_plain) = print(&plain, json, sort, window, true);
            assert!(s_all.peak_held > 300_000 / 5, "json {json}: the window holds {}", s_all.peak_held);
            assert!(
                s_ahead.peak_held <= s_plain.peak_held + 2048 && s_ahead.peak_held < s_all.peak_held / 2,
                "json {json}, {sort:?}: {} held, {} without the long calls, {} by the window alone",
                s_ahead.peak_held,
                s_plain.peak_held,
                s_all.peak_held
            );
        }
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&plain);
    }
}

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

/// What [`EventList::finish`] counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Events printed out of order (marked late).
    pub late: u64,
    /// Syscalls formatted with `--why`.
    pub calls: u64,
    /// Those of them that carried a breakdown.
    pub explained: u64,
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
        for &i in rows {
            let i = i as usize;
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
                    for extra in [line, why::chain_line(h, chains, b, i)].into_iter().flatten() {
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
        let (_, late) = self.w.finish()?;
        Ok(Summary { late, calls: self.calls, explained: self.explained })
    }
}

//! Reading events from a trace file through a filter: the part every file-reading command shares.

use anyhow::{anyhow, Context, Result};
use latscope_event::{EventBatch, TraceHeader};
use latscope_filter::{EvalContext, Filter};
use latscope_trace::{BlockMeta, Column, ReadOptions, TraceReader};
use std::path::Path;

/// Parse a filter expression; the error shows the expression with a caret under the problem.
pub fn parse_filter(expr: Option<&str>) -> Result<Filter> {
    let e = expr.unwrap_or("");
    Filter::parse(e).map_err(|err| anyhow!("invalid filter:\n{err}"))
}

/// A trace file opened for reading with a filter applied.
pub struct Input {
    reader: TraceReader,
    filter: Filter,
    ctx: EvalContext,
    selected: Vec<u32>,
    corrupt: u64,
    /// Recycled for every block: no allocation per block on the read path.
    batch: EventBatch,
}

impl Input {
    /// Open `path` and parse `filter`. `columns` limits decoding to what the caller reads (plus what the
    /// filter needs); `None` decodes everything.
    pub fn open(path: &Path, filter: Option<&str>, columns: Option<&[Column]>) -> Result<Input> {
        let filter = parse_filter(filter)?;
        let mut opts = ReadOptions { skip_corrupt: true, ..Default::default() };
        if let Some(cols) = columns {
            if filter.is_match_all() {
                opts.projection = Some(cols.to_vec());
            }
        }
        let reader = TraceReader::open_with(path, opts).with_context(|| format!("cannot read {}", path.display()))?;
        let ctx = EvalContext::new(reader.header());
        Ok(Input { reader, filter, ctx, selected: Vec::new(), corrupt: 0, batch: EventBatch::default() })
    }

    /// The trace header.
    pub fn header(&self) -> &TraceHeader {
        self.reader.header()
    }

    /// The filter.
    pub fn filter(&self) -> &Filter {
        &self.filter
    }

    /// Call `f` with each batch and the rows of it that match the filter. Stops at the first error
    /// from `f`; corrupt blocks are reported on stderr and skipped.
    pub fn for_each(&mut self, mut f: impl FnMut(&EventBatch, &[u32], &TraceHeader) -> Result<()>) -> Result<()> {
        self.for_each_zoned(|_| ((), &[]), |b, rows, h, ()| f(b, rows, h))
    }

    /// Like [`Input::for_each`], with zone maps: when the filter takes every event, `zone` sees
    /// each block's metadata before the block is decoded and returns a decision `D` and the
    /// columns the decision makes unnecessary (see [`TraceReader::next_batch_pruned`]); `f`
    /// then gets the block with that decision. With a filter (which needs per-event fields),
    /// `zone` is not called and `f` gets `D::default()`, which must mean "decode as usual".
    pub fn for_each_zoned<D: Default>(
        &mut self,
        mut zone: impl FnMut(&BlockMeta) -> (D, &'static [Column]),
        mut f: impl FnMut(&EventBatch, &[u32], &TraceHeader, D) -> Result<()>,
    ) -> Result<()> {
        let all = self.filter.is_match_all();
        loop {
            let mut decision = D::default();
            let r = self.reader.next_batch_pruned(&mut self.batch, |m| {
                if !all {
                    return &[][..];
                }
                let (d, skip) = zone(m);
                decision = d;
                skip
            });
            let Some(r) = r else { break };
            match r {
                Ok(()) => {}
                Err(e) if e.is_corrupt_block() => {
                    self.corrupt += 1;
                    eprintln!("latscope: error: {e} (skipped)");
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
            let batch = &self.batch;
            let n = batch.len();
            if all {
                // Every row: 0..n, kept from block to block (no per-event work; the filter
                // context is only for the filter).
                if self.selected.len() < n {
                    self.selected.clear();
                    self.selected.extend(0..n as u32);
                }
                f(batch, &self.selected[..n], self.reader.header(), decision)?;
                continue;
            }
            self.ctx.observe(batch);
            self.selected.clear();
            for i in 0..n {
                if self.filter.matches(batch, i, &self.ctx) {
                    self.selected.push(i as u32);
                }
            }
            f(batch, &self.selected, self.reader.header(), decision)?;
        }
        Ok(())
    }

    /// Print the reader's warnings (file cut short, ...) to stderr.
    pub fn report_warnings(&self) {
        for w in self.reader.warnings() {
            eprintln!("latscope: warning: {w}");
        }
    }

    /// The exit code for a command that read this input: failure when blocks were corrupt.
    pub fn exit_code(&self) -> std::process::ExitCode {
        if self.corrupt > 0 {
            eprintln!("latscope: {} corrupt block(s) skipped; the output above is incomplete", self.corrupt);
            std::process::ExitCode::FAILURE
        } else {
            std::process::ExitCode::SUCCESS
        }
    }

    /// The underlying reader (for stats and summary).
    pub fn reader(&self) -> &TraceReader {
        &self.reader
    }
}

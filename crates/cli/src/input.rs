//! Reading events from a trace file through a filter: the part every file-reading command shares.

use anyhow::{anyhow, Context, Result};
use latscope_event::{EventBatch, TraceHeader};
use latscope_filter::{EvalContext, Filter};
use latscope_trace::{Column, ReadOptions, TraceReader};
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
        while let Some(r) = self.reader.next_batch_into(&mut self.batch) {
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
            self.ctx.observe(batch);
            self.selected.clear();
            if self.filter.is_match_all() {
                self.selected.extend(0..batch.len() as u32);
            } else {
                for i in 0..batch.len() {
                    if self.filter.matches(batch, i, &self.ctx) {
                        self.selected.push(i as u32);
                    }
                }
            }
            f(batch, &self.selected, self.reader.header())?;
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

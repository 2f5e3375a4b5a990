//! Reading the two sides: replay statistics told apart from traces, and every recording read
//! into a run (several at once).

use crate::args::{finish_scan, parse_filter};
use anyhow::{Context, Result};
use latscope_scan::{InputFormat, Scan, ScanOptions};
use latscope_view::diff::{DiffOptions, Run, RunAgg};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Whether a file holds replay statistics (JSON) rather than a trace.
pub(super) fn is_json(p: &Path) -> bool {
    use std::io::Read;
    let mut buf = [0u8; 64];
    let n = std::fs::File::open(p).and_then(|mut f| f.read(&mut buf)).unwrap_or(0);
    buf[..n].iter().find(|c| !c.is_ascii_whitespace()).is_some_and(|c| *c == b'{' || *c == b'[')
}

/// One recording's run, once a reader thread has read it.
type Slot = std::sync::Mutex<Option<Result<(Run, ExitCode)>>>;

/// Reads every recording (several at once), each into a run.
pub(super) fn read_runs(
    files: &[&PathBuf],
    filter: &str,
    o: &DiffOptions,
    binaries: Option<&Path>,
) -> Result<(Vec<Run>, ExitCode)> {
    let filter = parse_filter(filter)?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(files.len()).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Slot> = files.iter().map(|_| Default::default()).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(path) = files.get(k) else { break };
                let r = (|| -> Result<(Run, ExitCode)> {
                    let probe = RunAgg::new(o, &Default::default());
                    let opts = ScanOptions {
                        filter: filter.clone(),
                        columns: Some(crate::args::columns(&probe.columns())),
                        zone: None,
                    };
                    let mut scan = Scan::open(path, InputFormat::Trace, opts)?;
                    let mut agg = RunAgg::new(o, scan.header());
                    // Without a filter, the blocks' zone maps place the events in time for the
                    // rates' noise: `ts` is not decoded (RunAgg::add_spanned says why that is sound).
                    scan.set_spans(agg.by_span());
                    // Most recordings have no breakdown of calls (`record --why`): its columns
                    // are decoded from the first block whose wake-ups say it has.
                    let deferred = crate::args::columns(&agg.deferred_columns());
                    scan.set_deferred(deferred, latscope_view::waits::BatchRule::reads_breakdown);
                    scan.for_each_with_span(|c, h, span| {
                        agg.add_spanned(c, h, span);
                        Ok::<(), anyhow::Error>(())
                    })?;
                    let report = scan.report();
                    let code = finish_scan(&report);
                    let name = path.display().to_string();
                    Ok((agg.finish(&name, report.summary.map(|s| s.duration_ns), binaries), code))
                })();
                *results[k].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    let mut runs = Vec::new();
    let mut code = ExitCode::SUCCESS;
    for (r, path) in results.into_iter().zip(files) {
        let r = r.into_inner().unwrap_or_else(|e| e.into_inner()).context("a reader thread stopped")?;
        let (run, c) = r.with_context(|| format!("cannot read {}", path.display()))?;
        if c != ExitCode::SUCCESS {
            code = c;
        }
        runs.push(run);
    }
    Ok((runs, code))
}

//! `latscope top --by cause` and `--by lock`: the attribution of a trace recorded with `record
//! --why`, summed by cause (with wakers and operations) or by lock (with waiters and holders).

use super::top::Args;
use crate::args::{finish_scan, write_output, FilterArg, InputArg, ReadArgs};
use anyhow::{bail, Result};
use latscope_event::StackTable;
use latscope_view::chain::ChainIndex;
use latscope_view::locks::LockAgg;
use latscope_view::stacks::StackNames;
use std::io::Write;
use std::process::ExitCode;

/// `--by cause`: the recorded breakdowns of the calls that match, summed by cause, waker and
/// operation; idle waits left out unless --waits, as in the other rankings.
pub fn run_cause(a: &Args) -> Result<ExitCode> {
    let Some(f) = &a.source.file else {
        bail!("--by cause reads a trace recorded with `latscope record --why` (-r FILE); live sessions count in the kernel and record no breakdown (`latscope why` records one and shows it)");
    };
    if a.source.input != InputArg::Trace || a.source.block {
        bail!("--by cause applies to syscalls of a latscope trace (not --block, not --input perf)");
    }
    crate::args::check_output(Some(f), a.output.svg.as_deref())?;
    if a.output.svg.is_some() {
        crate::args::refuse_terminal(a.output.svg.as_deref(), "the breakdown", "--svg FILE")?;
    }
    let read = ReadArgs { file: f.clone(), input: a.source.input, filter: a.source.filter.clone() };
    let mut scan = read.open_all("top")?;
    let mut agg = latscope_view::why::WhyAgg { with_waits: a.rank.waits, ..Default::default() };
    // On-CPU samples (`record --profile`): where the on-CPU time went, by function.
    let mut cpu = latscope_view::stacks::StackAgg { samples: true, on_cpu: true, ..Default::default() };
    let mut table = StackTable::default();
    scan.for_each(|c| {
        agg.add(c.batch, c.rows);
        cpu.add(c.batch, c.rows);
        if !c.batch.stacks.is_empty() {
            table.add_lines(&c.batch.stacks).map_err(|e| anyhow::anyhow!("the trace's stack table: {e}"))?;
        }
        Ok::<(), anyhow::Error>(())
    })?;
    let report = scan.report();
    let samples = cpu.counted();
    let hottest = if samples > 0 {
        let mut names = StackNames::new(table, None);
        latscope_view::stacks::hottest_functions(&cpu, &mut names, a.rank.limit)
    } else {
        Vec::new()
    };
    if let Some(p) = &a.output.svg {
        let title = breakdown_title(&read.file, &read.filter);
        write_output(Some(p), latscope_view::whysvg::render_svg(&agg, a.rank.limit, &title).as_bytes())?;
        if p.as_os_str() == "-" {
            return Ok(finish_scan(&report));
        }
    }
    let mut o = std::io::stdout().lock();
    if a.output.json.json {
        let mut j = agg.to_json(a.rank.limit);
        j["source"] = serde_json::json!(read.file.display().to_string());
        if samples > 0 {
            j["on_cpu_samples"] = latscope_view::stacks::samples_json(&cpu, &hottest);
        }
        writeln!(o, "{}", latscope_event::escape::json_ascii_controls(serde_json::to_string(&j)?))?;
    } else {
        write!(o, "{}", agg.render_text(a.rank.limit))?;
        if samples > 0 {
            writeln!(
                o,
                "\non-CPU samples: {samples} ({} of CPU), by function (self time; `why --on-cpu` for the stacks)",
                latscope_event::units::fmt_ns(cpu.total_ns)
            )?;
            for (f, ns) in &hottest {
                let pct = *ns as f64 * 100.0 / cpu.total_ns.max(1) as f64;
                writeln!(
                    o,
                    "  {:<40} {:>9} {pct:>5.1}%",
                    latscope_view::text::clean(f),
                    latscope_event::units::fmt_ns(*ns)
                )?;
            }
        }
        if let Some(n) = agg.waits.note() {
            writeln!(o, "\n{n}")?;
        }
    }
    o.flush()?;
    Ok(finish_scan(&report))
}

/// `--by lock`: the waits that blocked on a lock, by lock (a futex by its address, a file lock
/// by its file and range, a semaphore by its set), with their waiters, holders, what the holders
/// did meanwhile (through the chains of waits) and the stacks at the wait and the release.
pub fn run_lock(a: &Args) -> Result<ExitCode> {
    let Some(f) = &a.source.file else {
        bail!("--by lock reads a trace recorded with `latscope record --why` (-r FILE): the lock of a wait is known only with the breakdown");
    };
    if a.source.input != InputArg::Trace || a.source.block || a.output.svg.is_some() {
        bail!("--by lock applies to syscalls of a latscope trace (not --block, --input perf or --svg)");
    }
    let read = ReadArgs { file: f.clone(), input: a.source.input, filter: a.source.filter.clone() };
    let mut scan = read.open_all("top")?;
    let (mut agg, mut chains, mut table) = (LockAgg::default(), ChainIndex::new(), StackTable::default());
    scan.for_each(|c| {
        // Every call of the block, not only those the filter took: the holders' calls.
        chains.add(c.batch);
        if !c.batch.stacks.is_empty() {
            table.add_lines(&c.batch.stacks).map_err(|e| anyhow::anyhow!("the trace's stack table: {e}"))?;
        }
        agg.add(c.batch, c.rows, Some(&chains));
        Ok::<(), anyhow::Error>(())
    })?;
    let mut names = StackNames::new(table, None);
    let mut o = std::io::stdout().lock();
    if a.output.json.json {
        let mut j = agg.to_json(&mut names, a.rank.limit);
        j["source"] = serde_json::json!(read.file.display().to_string());
        writeln!(o, "{}", latscope_event::escape::json_ascii_controls(serde_json::to_string(&j)?))?;
    } else {
        write!(o, "{}", agg.render_text(&mut names, a.rank.limit))?;
    }
    o.flush()?;
    Ok(finish_scan(&scan.report()))
}

/// The title of a breakdown picture: the trace and the filter.
pub fn breakdown_title(file: &std::path::Path, filter: &FilterArg) -> String {
    let f = filter.filter.as_deref().unwrap_or("");
    let name = file.file_name().map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into_owned());
    if f.trim().is_empty() {
        format!("Why was it slow: {name}")
    } else {
        format!("Why was it slow: {name}, {f}")
    }
}

//! `latscope top -r FILE`: the table of a recording, and `--by cause`, its time by cause.

use super::Args;
use crate::args::{finish_scan, write_output, FilterArg, InputArg, ReadArgs, ScanPlan};
use anyhow::{bail, Result};
use latscope_view::group::GroupBy;
use std::io::Write;
use std::process::ExitCode;

/// The table of a recording: rates over the time its counts cover (the recording, within the
/// filter's time window), the header line saying what was counted.
pub(super) fn run_file(a: &Args, by: GroupBy, read: &ReadArgs) -> Result<ExitCode> {
    let kind = read.kind(a.source.block);
    let mut cols = vec!["kind", "ts", "lat", "bytes", "nr", "ret"];
    cols.extend(by.columns());
    cols.extend(latscope_view::waits::COLUMNS);
    let mut scan = read.open("top", ScanPlan { columns: &cols, zone: None })?;
    let mut top = a.table(by)?;
    scan.for_each_with_header(|c, header| {
        top.add_chunk(c, kind, header);
        Ok::<(), anyhow::Error>(())
    })?;
    let report = scan.report();
    let covered = scan.covered(top.span());
    let secs = covered.map_or(0.0, |c| c.secs());
    let (sort, limit) = (a.rank.sort, a.rank.limit);
    let mut o = std::io::stdout().lock();
    if a.output.json.json {
        let mut j = top.to_json(sort, limit, secs);
        j["source"] = serde_json::json!(read.file.display().to_string());
        writeln!(o, "{}", serde_json::to_string(&j)?)?;
    } else {
        let f = scan.filter();
        let matching = if f.is_match_all() { String::new() } else { format!(" matching '{}'", f.source()) };
        let window = match f.time_window().monotonic(0, 0) {
            Some(_) => " (the filter's time window, within the recording)",
            None => "",
        };
        writeln!(o, "{} in {secs:.3} s{window} from {}{matching}", top.headline(kind), read.file.display())?;
        write!(o, "{}", top.render_text(sort, limit, secs))?;
    }
    o.flush()?;
    Ok(finish_scan(&report))
}

/// `--by cause`: the recorded breakdowns of the calls that match, summed by cause, waker and
/// operation; idle waits left out unless --waits, as in the other rankings.
pub(super) fn run_cause(a: &Args) -> Result<ExitCode> {
    let Some(f) = &a.source.file else {
        bail!("--by cause reads a trace recorded with `latscope record --why` (-r FILE); live sessions count in the kernel and record no breakdown (`latscope why` records one and shows it)");
    };
    if a.source.input != InputArg::Trace || a.source.block {
        bail!("--by cause applies to syscalls of a latscope trace (not --block, not --input perf)");
    }
    let svg = a.output.svg.as_deref();
    crate::args::check_output(Some(f), svg)?;
    if svg.is_some() {
        crate::args::refuse_terminal(svg, "the breakdown", "--svg FILE")?;
    }
    let read = a.read(f);
    let mut scan = read.open_all("top")?;
    let mut agg = latscope_view::why::WhyAgg { with_waits: a.rank.waits, ..Default::default() };
    scan.for_each(|c| {
        agg.add(c.batch, c.rows);
        Ok::<(), anyhow::Error>(())
    })?;
    let report = scan.report();
    if let Some(p) = svg {
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
        writeln!(o, "{}", serde_json::to_string(&j)?)?;
    } else {
        write!(o, "{}", agg.render_text(a.rank.limit))?;
        if agg.waits_left_out > 0 {
            writeln!(
                o,
                "\n{} idle waits (poll, futex, sleeps, wait4, ...) left out: --waits counts them",
                agg.waits_left_out
            )?;
        }
    }
    o.flush()?;
    Ok(finish_scan(&report))
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

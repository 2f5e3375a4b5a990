//! `latscope top -r FILE`: the table of a recording.

use super::Args;
use crate::args::{finish_scan, ReadArgs, ScanPlan};
use anyhow::Result;
use latscope_view::group::GroupBy;
use std::io::Write;
use std::process::ExitCode;

/// The table of a recording: rates over the time its counts cover (the recording, within the
/// filter's time window), the header line saying what was counted.
pub(super) fn run_file(a: &Args, by: GroupBy, read: &ReadArgs) -> Result<ExitCode> {
    let kind = read.kind(a.source.block);
    let mut cols = vec!["kind", "ts", "lat", "bytes", "nr", "ret"];
    cols.extend(by.columns());
    cols.extend(latscope_view::waits::columns());
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
        writeln!(o, "{}", latscope_event::escape::json_ascii_controls(serde_json::to_string(&j)?))?;
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

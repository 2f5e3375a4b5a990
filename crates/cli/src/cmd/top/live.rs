//! `latscope top` without -r: live tables, one per interval, each over the time it covers.

use super::Args;
use crate::args::print_warnings;
use anyhow::Result;
use latscope_event::EventKind;
use latscope_view::group::GroupBy;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

pub(super) fn run_live(a: &Args, by: GroupBy) -> Result<ExitCode> {
    let block = a.source.block;
    let kind = if block { EventKind::Block } else { EventKind::Syscall };
    let mut builder =
        a.live.session(a.source.filter.parse()?).need_fd_names(matches!(by, GroupBy::File | GroupBy::Dir));
    builder = if block { builder.syscalls(latscope_event::SyscallSet::None) } else { builder.block(false) };
    let mut session = builder.start()?;
    print_warnings(session.warnings());
    let json = a.output.json.json;
    let tty = std::io::stdout().is_terminal() && !json;
    let interval = Duration::from_nanos(a.refresh.interval.max(10_000_000));
    let header = session.header().clone();
    let mut top = a.table(by)?;
    let (sort, limit) = (a.rank.sort, a.rank.limit);
    let mut tables = 0u64;
    let (mut next, mut last) = (Instant::now() + interval, Instant::now());
    while !session.stop_requested() {
        let wait = next.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
        // The session's header: it learns the cgroups of containers started since.
        if let Some((c, h)) = session.next_chunk_and_header(wait).map_err(|e| anyhow::anyhow!("{e}"))? {
            top.add_chunk(c, kind, h);
        }
        if Instant::now() < next {
            continue;
        }
        // The rates of a table divide by the time it covers, measured.
        let secs = last.elapsed().as_secs_f64();
        (last, next) = (Instant::now(), next + interval);
        let stats = session.stats();
        let (lost, not_followed) = (stats.lost, stats.not_followed);
        let mut o = std::io::stdout().lock();
        if json {
            let mut j = top.to_json(sort, limit, secs);
            j["lost"] = serde_json::json!(lost);
            j["not_followed"] = serde_json::json!(not_followed);
            writeln!(o, "{}", latscope_event::escape::json_ascii_controls(serde_json::to_string(&j)?))?;
        } else {
            if tty {
                write!(o, "\x1b[H\x1b[2J")?;
            }
            let now = header.wall_ns(latscope_probe::snapshot::monotonic_ns());
            let mut lost = if lost > 0 { format!(" — {lost} events lost so far") } else { String::new() };
            if not_followed > 0 {
                lost.push_str(&format!(" — {not_followed} child processes not followed (pid filter full)"));
            }
            let when = latscope_view::svg::fmt_wall(now);
            writeln!(o, "latscope top — by {} — {} in {secs:.2} s — {when}{lost}", by.name(), top.headline(kind))?;
            write!(o, "{}", top.render_text(sort, limit, secs))?;
            if !tty {
                writeln!(o)?;
            }
        }
        o.flush()?;
        top.reset();
        tables += 1;
        if a.refresh.count.is_some_and(|c| tables >= c) {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

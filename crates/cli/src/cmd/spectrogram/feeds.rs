//! Where the spectrogram's rows come from: a trace file (paced or at once) or the live probes
//! (in-kernel histograms when the filter allows, else the event stream).

use super::Args;
use crate::args::{columns, print_warnings};
use anyhow::Result;
use latscope_event::{EventKind, SyscallSet};
use latscope_live::CountBy;
use latscope_scan::{InputFormat, Scan, ScanOptions};
use latscope_view::group::GroupBy;
use latscope_view::spectrogram::{CountFeed, Feed, FeedOptions, FileFeed, Spectrogram, StreamFeed};
use std::path::Path;

pub(super) fn file_feed(
    path: &Path,
    a: &Args,
    filter: latscope_filter::Filter,
    kind: EventKind,
    interval_ns: u64,
    plain: bool,
) -> Result<(Spectrogram, Box<dyn Feed>)> {
    let mut cols = vec!["kind", "ts", "lat"];
    cols.extend(a.view.by.map(|b| b.columns()).unwrap_or(&[]));
    cols.extend(latscope_view::waits::columns());
    let filter_text = if filter.is_match_all() { String::new() } else { filter.source().to_string() };
    let opts = ScanOptions { filter: filter.clone(), columns: Some(columns(&cols)), zone: None };
    let mut scan = Scan::open(path, InputFormat::Trace, opts)?;
    let mut spec = Spectrogram::new(interval_ns, scan.header().start_ns, 10_000_000);
    scan.set_zone(FileFeed::zone_plan(kind, &spec, a.view.by, !filter.is_match_all()));
    let reopen_path = path.to_path_buf();
    let reopen: latscope_view::spectrogram::sources::Reopen = Box::new(move || {
        let o = ScanOptions { filter: filter.clone(), ..Default::default() };
        Ok(Box::new(Scan::open(&reopen_path, InputFormat::Trace, o)?))
    });
    let pace = (!plain && !a.trace.no_pace && a.draw.svg.is_none()).then_some(a.trace.speed);
    let o = FeedOptions { kind, by: a.view.by, filter: filter_text, keep: a.run.keep, waits: a.view.waits };
    let mut feed = FileFeed::new(Box::new(scan), reopen, &o, pace, &mut spec);
    if svg_unpaced(a, plain) {
        feed.note = SVG_UNPACED.into();
    }
    Ok((spec, Box::new(feed)))
}

/// Whether --svg is what stops the file from being drawn at the recording's pace (on a terminal,
/// without --no-pace): said on screen and when done, as it is not what the terminal would do.
pub(super) fn svg_unpaced(a: &Args, plain: bool) -> bool {
    a.file.is_some() && a.draw.svg.is_some() && !plain && !a.trace.no_pace
}

pub(super) const SVG_UNPACED: &str =
    "drawn at once, not at the recording's pace: --svg needs every row (--no-pace to say so)";

pub(super) type Live = (Spectrogram, Box<dyn Feed>, std::sync::Arc<std::sync::atomic::AtomicBool>);

pub(super) fn live_feed(a: &Args, filter: latscope_filter::Filter, kind: EventKind, interval_ns: u64) -> Result<Live> {
    let filter_text = if filter.is_match_all() { String::new() } else { filter.source().to_string() };
    let mut b = a.live.session(filter).stop_on(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
    b = if kind == EventKind::Block { b.syscalls(SyscallSet::None).block(true) } else { b.block(false) };
    if !a.run.stream && a.view.by != Some(GroupBy::Proc) {
        let by = match a.view.by {
            Some(GroupBy::Class) => CountBy::Class,
            Some(GroupBy::Syscall) => CountBy::Syscall,
            Some(GroupBy::Disk) => CountBy::Disk,
            _ => CountBy::All,
        };
        b = b.count_in_kernel(by, kind);
        if kind == EventKind::Syscall && !a.view.waits {
            // The kernel's histograms cannot tell idle waits apart: it does not count them.
            b = b.count_without(latscope_view::waits::wait_syscalls());
        }
    }
    let session = b.start()?;
    print_warnings(session.warnings());
    let stop = session.stop_flag();
    let mut spec = Spectrogram::new(interval_ns, session.header().start_ns, 200_000);
    let o = FeedOptions { kind, by: a.view.by, filter: filter_text, keep: a.run.keep, waits: a.view.waits };
    let feed: Box<dyn Feed> = if session.is_counting() {
        let (header, devs) = (session.header().clone(), session.count_devices().to_vec());
        Box::new(CountFeed::new(Box::new(session), &header, &devs, &o, &mut spec))
    } else {
        let why = match session.streaming_reason() {
            _ if a.run.stream => "--stream".to_string(),
            _ if a.view.by == Some(GroupBy::Proc) => "--by proc needs the events".to_string(),
            Some(r) => r.to_string(),
            None => "events kept for drill-down".to_string(),
        };
        let mut s = StreamFeed::new(Box::new(session), &o, &mut spec);
        s.note = format!("streaming: {why}");
        Box::new(s)
    };
    Ok((spec, feed, stop))
}

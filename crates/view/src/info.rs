//! What a recording holds: its header, event counts per kind and type, time span and losses.

use crate::svg::fmt_wall;
use crate::text::{clean, table};
use latscope_event::source::Chunk;
use latscope_event::units::{fmt_bytes, fmt_ns};
use latscope_event::{dev_major_minor, op_name, EventKind, Span, TraceHeader};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Event counts of a recording (or of the events a filter kept).
#[derive(Debug, Default, Clone)]
pub struct Census {
    by_type: BTreeMap<(u8, u16), u64>,
    by_kind: BTreeMap<u8, u64>,
    first: Option<u64>,
    last: u64,
    total: u64,
}

impl Census {
    /// Counts nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Count the chunk's rows.
    pub fn add(&mut self, c: Chunk<'_>) {
        let b = c.batch;
        for &i in c.rows {
            let i = i as usize;
            *self.by_type.entry((b.kind[i], b.nr[i])).or_default() += 1;
            *self.by_kind.entry(b.kind[i]).or_default() += 1;
            self.first = Some(self.first.map_or(b.ts[i], |f| f.min(b.ts[i])));
            self.last = self.last.max(b.end(i));
            self.total += 1;
        }
    }

    /// Events counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// From the first start to the last end, ns.
    pub fn span_ns(&self) -> u64 {
        self.first.map_or(0, |f| self.last.saturating_sub(f))
    }

    /// The first start and the last end (CLOCK_MONOTONIC ns), if any event was counted.
    pub fn times(&self) -> Option<(u64, u64)> {
        self.first.map(|f| (f, self.last))
    }
}

/// Facts about the file itself, from the reader.
#[derive(Debug, Clone, Default)]
pub struct FileFacts {
    /// The file as named.
    pub path: String,
    /// Its size.
    pub bytes: u64,
    /// Blocks read.
    pub blocks: u64,
    /// The recording was closed cleanly (it has a summary).
    pub closed_cleanly: bool,
    /// Events the probes lost (at least, when not closed cleanly).
    pub lost: u64,
    /// Warnings of the reader.
    pub warnings: Vec<String>,
    /// The counts are of the events a filter kept.
    pub filtered: bool,
    /// The recording's span, from the probes attaching to its stop (its summary's end): the
    /// duration of the trace ([`latscope_event::span`]).
    pub recording: Option<Span>,
    /// Block completions without an issue, from the summary.
    pub block_completions_without_issue: Option<u64>,
    /// With attribution: wake-ups the probes did not see, from the summary.
    pub wakeups_unseen: Option<u64>,
    /// Runs of the probes' programs the kernel skipped, from the summary (where it counts them).
    pub program_runs_skipped: Option<u64>,
    /// What the writer cut from the blocks' stack and cgroup tables, from the summary.
    pub blocks_truncated: latscope_event::Truncation,
    /// With stacks: events' stack references that are missing, by reason (those that count),
    /// from the summary.
    pub stacks_missing: Vec<(String, u64)>,
}

fn kind_name(k: u8) -> &'static str {
    EventKind::from_u8(k).map(|k| k.name()).unwrap_or("?")
}

/// The report as JSON. `verbose` lists the start snapshot's processes and open files.
pub fn to_json(h: &TraceHeader, c: &Census, f: &FileFacts, verbose: bool) -> Value {
    let counts: Vec<Value> = c
        .by_type
        .iter()
        .map(|((k, nr), n)| json!({"kind": kind_name(*k), "type": op_name(*k, *nr), "count": n}))
        .collect();
    let mut hj = serde_json::to_value(h).unwrap_or(Value::Null);
    if !verbose {
        hj["processes"] = json!(h.processes.len());
        hj["fds"] = json!(h.fds.len());
    }
    json!({
        "file": f.path,
        "file_bytes": f.bytes,
        "header": hj,
        "events": c.total,
        "lost": f.lost,
        "first_ns": c.first,
        "start_wall_ns": (h.realtime_offset_ns != 0).then(|| h.wall_ns(h.start_ns)),
        "end_ns": f.recording.map(|r| r.end_ns),
        "duration_ns": f.recording.map(|r| r.ns()),
        "span_ns": c.span_ns(),
        "counts": counts,
        "closed_cleanly": f.closed_cleanly,
        "blocks": f.blocks,
        "warnings": f.warnings,
        "selection": selection(&h.command_line),
        "block_completions_without_issue": f.block_completions_without_issue,
        "wakeups_unseen": f.wakeups_unseen,
        "program_runs_skipped": f.program_runs_skipped,
        "truncated": {"header": h.truncated, "blocks": f.blocks_truncated},
        "stacks_missing": f.stacks_missing.iter().map(|(k, n)| (k.clone(), json!(n))).collect::<serde_json::Map<_, _>>(),
    })
}

/// What a recording kept, from the options on its command line (`-c`, `-p`, `-f`, `--cgroup`, a
/// command after `--`), and why it kept more than they name; `None` for a recording of the whole
/// system. The probes select syscalls by process; process events by pid and cgroup only (a
/// process has its name only once it runs: the fork and exec of a future `nginx` are seen so that
/// its pid is known); block requests by device only (a request is often issued by a kernel
/// thread on behalf of the process it is for).
pub fn selection(command_line: &[String]) -> Option<String> {
    let args = command_line.iter().skip_while(|a| *a != "record").skip(1);
    let (mut comms, mut pids, mut cgroups, mut follow, mut command) = (vec![], vec![], vec![], false, false);
    let mut it = args.peekable();
    while let Some(a) = it.next() {
        let mut value = |long: &str, short: Option<&str>| -> Option<String> {
            if a == long || short == Some(a.as_str()) {
                return it.next().cloned();
            }
            if let Some(v) = a.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
                return Some(v.to_string());
            }
            short.and_then(|s| a.strip_prefix(s)).filter(|v| !v.is_empty() && !a.starts_with("--")).map(str::to_string)
        };
        if a == "--" {
            command = true;
            break;
        } else if a == "-f" || a == "--follow" {
            follow = true;
        } else if let Some(v) = value("--comm", Some("-c")) {
            comms.push(v);
        } else if let Some(v) = value("--pid", Some("-p")) {
            pids.push(v);
        } else if let Some(v) = value("--cgroup", None) {
            cgroups.push(v);
        }
    }
    let mut of = Vec::new();
    if command {
        of.push("the command and its children".to_string());
    }
    if !pids.is_empty() {
        of.push(format!("pid {}{}", pids.join(", "), if follow { " and their children (-f)" } else { "" }));
    }
    if !cgroups.is_empty() {
        of.push(format!("cgroup {}", cgroups.join(", ")));
    }
    let blocks =
        "block requests of every process (a request is often issued by a kernel thread for the process it serves)";
    if comms.is_empty() {
        if of.is_empty() {
            return None;
        }
        return Some(format!("syscalls, fork/exec/exit of {}; {blocks}", of.join(" in ")));
    }
    let named = format!("processes named {}", comms.join(", "));
    let procs = if of.is_empty() { "every process".to_string() } else { of.join(" in ") };
    let scope = if of.is_empty() { named.clone() } else { format!("{named} among {procs}") };
    Some(format!(
        "syscalls of {scope} (-c); fork/exec/exit of {procs} (a process has its name only once it runs: \
         these say which pids became {}); {blocks}",
        comms.join(", ")
    ))
}

/// The report as text, types sorted by count (the first 25 unless `verbose`), every table in
/// aligned columns, every name from the traced system escaped ([`clean`]). The reader's warnings
/// are not in it: the caller prints them (to stderr) as every reader does.
pub fn render_text(h: &TraceHeader, c: &Census, f: &FileFacts, verbose: bool) -> String {
    let mut o = String::new();
    let mut field = |name: &str, value: String| {
        let _ = writeln!(o, "{:<13}{value}", format!("{name}:"));
    };
    field("file", format!("{} ({})", clean(&f.path), fmt_bytes(f.bytes)));
    field("format", format!("latscope trace v{}, written by latscope {}", h.format_version, h.latscope_version));
    field("host", format!("{} ({} {}, {} CPUs)", clean(&h.hostname), clean(&h.kernel), clean(&h.machine), h.cpus));
    field("recorded", clean(&h.command_line.join(" ")).into_owned());
    if let Some(fl) = &h.flight {
        // A flight recorder's dump: what fired, and the window around it.
        let at = if h.realtime_offset_ns != 0 { fmt_wall(h.wall_ns(fl.at_ns)) } else { format!("{} ns", fl.at_ns) };
        field(
            "dump of",
            format!(
                "a flight recorder: trigger {} ({}) fired at {at}: {}; window {} before, {} after",
                clean(&fl.trigger),
                clean(&fl.condition),
                clean(&fl.reason),
                fmt_ns(fl.before_ns),
                fmt_ns(fl.after_ns)
            ),
        );
    }
    if h.realtime_offset_ns != 0 {
        let start = h.wall_ns(h.start_ns);
        field("started", fmt_wall(start));
        if let Some(r) = f.recording {
            field("ended", format!("{} ({} later)", fmt_wall(h.wall_ns(r.end_ns)), fmt_ns(r.ns())));
        }
    }
    match f.recording {
        Some(r) => field(
            "duration",
            format!("{} (from the probes attaching to the stop: every rate divides by this time)", fmt_ns(r.ns())),
        ),
        None => field("duration", "unknown (the recording was not closed cleanly: no summary)".into()),
    }
    field(
        "syscalls",
        format!(
            "{}   block: {}   filter: {}",
            h.syscalls,
            if h.block { "yes" } else { "no" },
            clean(h.filter.as_deref().unwrap_or("(none)"))
        ),
    );
    if let Some(sel) = selection(&h.command_line) {
        field("selection", clean(&sel).into_owned());
    }
    field("events", format!("{}{}", c.total, if f.filtered { " matching the filter" } else { "" }));
    let rel = |t: u64| {
        let d = t as i128 - h.start_ns as i128;
        format!("{}{}", if d < 0 { "-" } else { "" }, fmt_ns(d.unsigned_abs() as u64))
    };
    match c.times() {
        Some((first, last)) => field(
            "times",
            format!(
                "the events start {} and end {} after the start ({} blocks; calls under way at the start began before it)",
                rel(first),
                rel(last),
                f.blocks
            ),
        ),
        None => field("times", format!("no events ({} blocks)", f.blocks)),
    }
    if f.closed_cleanly {
        let warn = if f.lost > 0 { "  <-- incomplete recording" } else { "" };
        field("lost", format!("{} events (ring buffer full){warn}", f.lost));
    } else {
        field("lost", format!("at least {} events; the recording was not closed cleanly (no summary)", f.lost));
    }
    if let Some(n) = f.block_completions_without_issue.filter(|&n| n > 0) {
        field(
            "unpaired",
            format!(
                "{n} block completions without an issue (not lost: requests issued before the recording \
                 started, or completed twice by their driver)"
            ),
        );
    }
    if let Some(n) = f.wakeups_unseen.filter(|&n| n > 0) {
        field(
            "unseen",
            format!("{n} wake-ups not seen by the probes (--why): attributed from the call alone, with no waker"),
        );
    }
    if let Some(n) = f.program_runs_skipped.filter(|&n| n > 0) {
        field("skipped", format!("{n} program runs (the kernel does not re-enter a program on a CPU)"));
    }
    // Names past their bounds (command lines, container names, stack tables): cut, and said.
    for (what, t) in [("header", &h.truncated), ("blocks", &f.blocks_truncated)] {
        if !t.is_empty() {
            field(
                "truncated",
                format!(
                    "{what}: {} to stay within what readers accept (cut values end with …[cut N bytes])",
                    t.describe()
                ),
            );
        }
    }
    if !f.stacks_missing.is_empty() {
        let n: u64 = f.stacks_missing.iter().map(|(_, n)| n).sum();
        let parts: Vec<String> = f.stacks_missing.iter().map(|(k, n)| format!("{k} {n}")).collect();
        field(
            "stacks",
            format!("{n} stack references missing ({}): each missing stack's entry says why", parts.join(", ")),
        );
    }
    let kinds: Vec<Vec<String>> =
        c.by_kind.iter().map(|(k, n)| vec![n.to_string(), kind_name(*k).to_string()]).collect();
    let _ = writeln!(o, "by kind:");
    o.push_str(&table(&kinds, &[true, false], 2, 2));
    let mut top: Vec<_> = c.by_type.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1));
    let _ = writeln!(o, "by type:");
    let shown = if verbose { usize::MAX } else { 25 };
    let types: Vec<Vec<String>> =
        top.iter().take(shown).map(|((k, nr), n)| vec![n.to_string(), op_name(*k, *nr)]).collect();
    o.push_str(&table(&types, &[true, false], 2, 2));
    if top.len() > shown {
        let _ = writeln!(o, "  ... {} more types (-v lists all)", top.len() - shown);
    }
    let _ = writeln!(o, "block devices:");
    // Unattached loop devices and the like (size 0) are noise here; --json lists them all.
    let mut devs = vec![vec!["NAME".into(), "DEVICE".into(), "SIZE".into(), "SCHEDULER".into(), "ROTATIONAL".into()]];
    for d in h.block_devices.iter().filter(|d| d.size_bytes > 0) {
        let (ma, mi) = dev_major_minor(d.dev);
        devs.push(vec![
            clean(&d.name).into_owned(),
            format!("{ma}:{mi}"),
            fmt_bytes(d.size_bytes),
            clean(d.scheduler.as_deref().unwrap_or("-")).into_owned(),
            if d.rotational { "yes" } else { "no" }.into(),
        ]);
    }
    o.push_str(&table(&devs, &[false, true, true, false, false], 2, 2));
    let mut fs: Vec<&str> = h.mounts.iter().map(|m| m.fstype.as_str()).collect();
    fs.sort();
    fs.dedup();
    let _ = writeln!(o, "{:<13}{} (file systems: {})", "mounts:", h.mounts.len(), clean(&fs.join(", ")));
    if verbose {
        let mut rows = vec![vec!["SOURCE".into(), "MOUNT POINT".into(), "TYPE".into(), "OPTIONS".into()]];
        rows.extend(h.mounts.iter().map(|m| {
            [&m.source, &m.mount_point, &m.fstype, &m.options].iter().map(|s| clean(s).into_owned()).collect()
        }));
        o.push_str(&table(&rows, &[false, false, false, false], 2, 2));
        let _ = writeln!(o, "processes at start: {}", h.processes.len());
        let mut rows = vec![vec!["PID".into(), "PPID".into(), "COMM".into(), "COMMAND LINE".into()]];
        rows.extend(h.processes.iter().map(|p| {
            vec![p.pid.to_string(), p.ppid.to_string(), clean(&p.comm).into_owned(), clean(&p.cmdline).into_owned()]
        }));
        o.push_str(&table(&rows, &[true, true, false, false], 2, 2));
        let _ = writeln!(o, "open files at start: {}", h.fds.len());
        let mut rows = vec![vec!["PID".into(), "FD".into(), "TYPE".into(), "NAME".into()]];
        rows.extend(h.fds.iter().map(|f| {
            vec![
                f.pid.to_string(),
                f.fd.to_string(),
                latscope_event::FdType::from_u8(f.fd_type).name().to_string(),
                clean(&f.path).into_owned(),
            ]
        }));
        o.push_str(&table(&rows, &[true, true, false, false], 2, 2));
    } else {
        let _ = writeln!(
            o,
            "{:<13}{} at start, {} open files (-v lists them)",
            "processes:",
            h.processes.len(),
            h.fds.len()
        );
    }
    // Warnings (a file cut short, ...) go to stderr like every reader's; the JSON lists them.
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{Event, EventBatch};

    #[test]
    fn values_cut_to_their_bounds_are_counted() {
        let h = TraceHeader {
            truncated: latscope_event::Truncation { values: 40, bytes: 78_000_000, entries: 0 },
            ..Default::default()
        };
        let f = FileFacts {
            blocks_truncated: latscope_event::Truncation { values: 0, bytes: 0, entries: 3 },
            ..Default::default()
        };
        let t = render_text(&h, &Census::new(), &f, false);
        assert!(t.contains("truncated:   header: 40 values cut short (78000000 bytes)"), "{t}");
        assert!(t.contains("truncated:   blocks: 3 entries left out"), "{t}");
        let j = to_json(&h, &Census::new(), &f, false);
        assert_eq!(j["truncated"]["header"]["values"], 40);
        assert_eq!(j["truncated"]["blocks"]["entries"], 3);
        assert!(
            !render_text(&TraceHeader::default(), &Census::new(), &FileFacts::default(), false).contains("truncated")
        );
    }

    #[test]
    fn block_completions_without_an_issue_are_shown_and_not_called_lost() {
        let h = TraceHeader::default();
        let c = Census::new();
        let f = FileFacts { closed_cleanly: true, block_completions_without_issue: Some(5), ..Default::default() };
        let t = render_text(&h, &c, &f, false);
        assert!(t.contains("unpaired:    5 block completions without an issue (not lost:"), "{t}");
        assert!(t.contains("lost:        0 events"), "{t}");
        assert_eq!(to_json(&h, &c, &f, false)["block_completions_without_issue"], 5);
        let none = FileFacts { block_completions_without_issue: Some(0), ..f };
        assert!(!render_text(&h, &c, &none, false).contains("unpaired"));
    }

    #[test]
    fn unseen_wake_ups_and_skipped_program_runs_are_shown_when_there_are_any() {
        let h = TraceHeader::default();
        let c = Census::new();
        let f = FileFacts { wakeups_unseen: Some(3), program_runs_skipped: Some(2), ..Default::default() };
        let t = render_text(&h, &c, &f, false);
        assert!(t.contains("unseen:      3 wake-ups not seen by the probes (--why)"), "{t}");
        assert!(t.contains("skipped:     2 program runs (the kernel does not re-enter"), "{t}");
        let j = to_json(&h, &c, &f, false);
        assert_eq!((j["wakeups_unseen"].clone(), j["program_runs_skipped"].clone()), (3.into(), 2.into()));
        let none = FileFacts { wakeups_unseen: Some(0), program_runs_skipped: None, ..f };
        let t = render_text(&h, &c, &none, false);
        assert!(!t.contains("unseen") && !t.contains("skipped") && !t.contains("stacks:"), "{t}");
        assert!(to_json(&h, &c, &none, false)["program_runs_skipped"].is_null());
    }

    /// Missing stacks are said with their reasons, in the text and the JSON.
    #[test]
    fn missing_stacks_are_said_with_their_reasons() {
        let h = TraceHeader::default();
        let c = Census::new();
        let missing = vec![("user_quota".to_string(), 5), ("hash_collision".to_string(), 1)];
        let f = FileFacts { stacks_missing: missing, ..Default::default() };
        let t = render_text(&h, &c, &f, false);
        assert!(t.contains("stacks:      6 stack references missing (user_quota 5, hash_collision 1)"), "{t}");
        let j = to_json(&h, &c, &f, false);
        assert_eq!(
            (j["stacks_missing"]["user_quota"].clone(), j["stacks_missing"]["hash_collision"].clone()),
            (5.into(), 1.into())
        );
    }

    #[test]
    fn selection_says_what_each_kind_of_event_was_recorded_for() {
        let cl = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(selection(&cl("latscope record -w t.lst")), None);
        assert_eq!(selection(&cl("latscope record -w t.lst fd.type=file")), None);
        let s = selection(&cl("latscope record -w t.lst -c nginx --duration 30s")).unwrap();
        assert!(s.starts_with("syscalls of processes named nginx (-c); fork/exec/exit of every process"), "{s}");
        assert!(s.contains("block requests of every process"), "{s}");
        let s = selection(&cl("latscope record -w t.lst --comm=pg -p 12 -f")).unwrap();
        assert!(s.starts_with("syscalls of processes named pg among pid 12 and their children (-f)"), "{s}");
        let s = selection(&cl("latscope record -w t.lst -- make -c x")).unwrap();
        assert!(s.starts_with("syscalls, fork/exec/exit of the command and its children;"), "{s}");
        let s = selection(&cl("latscope record -w t.lst --cgroup nginx.service")).unwrap();
        assert!(s.contains("of cgroup nginx.service"), "{s}");
    }

    #[test]
    fn counts_kinds_types_and_span_of_the_rows_given() {
        let mut b = EventBatch::default();
        let read = latscope_event::syscall_nr("read").unwrap();
        b.push(&Event { kind: 0, nr: read, ts: 100, lat: 10, ..Default::default() });
        b.push(&Event { kind: 0, nr: read, ts: 200, lat: 50, ..Default::default() });
        b.push(&Event { kind: 1, nr: 1, ts: 150, lat: 5, ..Default::default() });
        let mut c = Census::new();
        c.add(Chunk { batch: &b, rows: &[0, 2], zone: Default::default() });
        assert_eq!(c.total(), 2);
        assert_eq!(c.span_ns(), 55);
        let f = FileFacts { path: "t.lst".into(), closed_cleanly: true, ..Default::default() };
        let text = render_text(&TraceHeader::default(), &c, &f, false);
        assert!(text.contains("events:      2\n"), "{text}");
        // Columns line up; names are escaped.
        let h = TraceHeader {
            realtime_offset_ns: 1_700_000_000_000_000_000,
            hostname: "evil\x1b]0;owned\x07".into(),
            block_devices: vec![
                latscope_event::BlockDevice {
                    dev: 254 << 20,
                    name: "vda".into(),
                    size_bytes: 1 << 30,
                    ..Default::default()
                },
                latscope_event::BlockDevice {
                    dev: 7 << 20 | 3,
                    name: "loop3".into(),
                    size_bytes: 1 << 20,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let rec = Span::recording(h.start_ns, 2_000_000_000);
        let text = render_text(&h, &c, &FileFacts { recording: Some(rec), ..f.clone() }, false);
        assert!(text.contains("duration:    2.00s (from the probes attaching to the stop"), "{text}");
        assert!(text.contains("started:     2023-11-14 22:13:20.000 UTC"), "{text}");
        assert!(text.contains("ended:       2023-11-14 22:13:22.000 UTC (2.00s later)"), "{text}");
        assert!(text.contains("evil\\x1b]0;owned\\x07") && !text.contains('\x1b'), "{text}");
        let devs: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("block devices")).skip(1).take(3).collect();
        let col = |l: &str, w: &str| l.find(w).unwrap();
        assert_eq!(col(devs[1], "254:0") + 5, col(devs[2], "7:3") + 3, "{devs:#?}");
        // Types are spelled as `events` prints them and `evt.type` matches them.
        assert!(text.contains("block_write") && !text.contains("block write"), "{text}");
        let j = to_json(&TraceHeader::default(), &c, &f, false);
        assert_eq!(j["events"], 2);
        assert_eq!(j["counts"].as_array().unwrap().len(), 2);
    }

    /// `-v` lists what the short report counts: the processes and the open files at start.
    #[test]
    fn verbose_lists_the_open_files_it_counts() {
        let h = TraceHeader {
            fds: vec![latscope_event::FdInfo {
                pid: 7,
                fd: 3,
                path: "/var/log/app.log".into(),
                fd_type: latscope_event::FdType::File as u8,
                ..Default::default()
            }],
            ..Default::default()
        };
        let f = FileFacts::default();
        assert!(render_text(&h, &Census::new(), &f, false).contains("1 open files (-v lists them)"));
        let t = render_text(&h, &Census::new(), &f, true);
        assert!(t.contains("open files at start: 1"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.contains("7") && l.contains("3") && l.contains("file") && l.contains("/var/log/app.log")),
            "{t}"
        );
    }
}

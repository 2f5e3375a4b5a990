//! Block requests from `perf script` text, so that existing captures need not be recorded again.
//!
//! Input: the output of
//!
//! ```text
//! perf record -e block:block_rq_issue -e block:block_rq_complete [-e block:block_rq_insert] -a sleep 60
//! perf script > out.blockio
//! ```
//!
//! whose lines look like (the fields after the event name changed a little across kernels; all of
//! these are read):
//!
//! ```text
//!  tar 16072 [001] 2199495.030133: block:block_rq_issue: 202,16 R 0 () 21997888 + 8 [tar]
//!  swapper 0 [000] 2199495.030286: block:block_rq_complete: 202,16 R () 21997888 + 8 [0]
//!  fio 812 [001] 5123.000100000: block:block_rq_issue: 259,0 WS 4096 () 1234 + 8 none,0,0 [fio]
//! ```
//!
//! An issue and a completion are paired by (device, sector), as Brendan Gregg's awk one-liner does
//! (a second issue of the same sector before its completion replaces the first). The pair becomes
//! one block event: start = issue time, latency = completion - issue, size = the issue's sector
//! count * 512 (or its byte count when it has one), offset = the sector, op and flags from the
//! rwbs field, the process from the issue line. With `block_rq_insert` lines, an insert and the
//! following issue of the same (device, sector) give the queue time.
//!
//! Lines of other events, blank lines and `#` comments are skipped; a block line that does not
//! have the expected fields is an error naming the line and what was expected.

use latscope_event::InputError;
use latscope_event::{Event, EventBatch, EventKind, Rwbs, TraceHeader};
use std::collections::HashMap;

/// What was read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerfStats {
    /// Lines read.
    pub lines: u64,
    /// `block_rq_insert` lines.
    pub inserts: u64,
    /// `block_rq_issue` lines.
    pub issues: u64,
    /// `block_rq_complete` lines.
    pub completes: u64,
    /// Completions paired with an issue (events produced).
    pub paired: u64,
    /// Completions without an issue (issued before the capture started).
    pub unpaired_completes: u64,
    /// Issues never completed (still in flight when the capture ended).
    pub pending_issues: u64,
    /// Lines of other events, comments and blank lines.
    pub skipped: u64,
}

impl PerfStats {
    /// A one-line account for the user.
    pub fn summary(&self) -> String {
        format!(
            "{} block requests paired from {} issues and {} completions ({} completions without an issue, {} issues never completed)",
            self.paired, self.issues, self.completes, self.unpaired_completes, self.pending_issues
        )
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ev {
    Insert,
    Issue,
    Complete,
}

struct Pending {
    ts: u64,
    pid: u32,
    op: u16,
    flags: u32,
    bytes: u64,
    qtime: u64,
    comm: String,
}

/// One parsed block line.
struct Line<'a> {
    ev: Ev,
    ts: u64,
    pid: u32,
    comm: &'a str,
    dev: u32,
    rwbs: &'a str,
    bytes: u64,
    sector: u64,
    sectors: u64,
}

/// Parses perf script text into block events (in completion order) and a header whose `start_ns`
/// is the first timestamp of the file. `name` is used in errors.
pub fn parse_perf_script(data: &[u8], name: &str) -> Result<(EventBatch, TraceHeader, PerfStats), InputError> {
    let text = String::from_utf8_lossy(data);
    let mut st = PerfStats::default();
    let mut batch = EventBatch::with_capacity(1024);
    let mut inflight: HashMap<(u32, u64), Pending> = HashMap::new();
    let mut inserted: HashMap<(u32, u64), u64> = HashMap::new();
    let mut first_ts: Option<u64> = None;
    for (k, line) in text.lines().enumerate() {
        st.lines += 1;
        let lineno = k + 1;
        let Some(l) = parse_line(line).map_err(|msg| InputError { file: name.into(), line: lineno, msg })? else {
            st.skipped += 1;
            continue;
        };
        first_ts = Some(first_ts.map_or(l.ts, |f| f.min(l.ts)));
        let key = (l.dev, l.sector);
        match l.ev {
            Ev::Insert => {
                st.inserts += 1;
                inserted.insert(key, l.ts);
            }
            Ev::Issue => {
                st.issues += 1;
                let (op, flags) = Rwbs::parse(l.rwbs).ok_or_else(|| InputError {
                    file: name.into(),
                    line: lineno,
                    msg: format!("'{}' is not an rwbs field (expected letters like R, WS, FWFS)", l.rwbs),
                })?;
                let qtime = inserted.remove(&key).map(|t| l.ts.saturating_sub(t)).unwrap_or(0);
                let bytes = if l.bytes > 0 { l.bytes } else { l.sectors * 512 };
                inflight.insert(
                    key,
                    Pending { ts: l.ts, pid: l.pid, op: op.code(), flags, bytes, qtime, comm: l.comm.to_string() },
                );
            }
            Ev::Complete => {
                st.completes += 1;
                match inflight.remove(&key) {
                    Some(p) => {
                        st.paired += 1;
                        batch.push(&Event {
                            kind: EventKind::Block as u8,
                            ts: p.ts,
                            lat: l.ts.saturating_sub(p.ts),
                            pid: p.pid,
                            tid: p.pid,
                            nr: p.op,
                            dev: l.dev,
                            bytes: p.bytes,
                            off: l.sector as i64,
                            flags: p.flags,
                            fd: -1,
                            dirfd: -1,
                            qtime: p.qtime,
                            comm: p.comm,
                            ..Default::default()
                        });
                    }
                    None => st.unpaired_completes += 1,
                }
            }
        }
    }
    st.pending_issues = inflight.len() as u64;
    if st.issues + st.completes == 0 {
        return Err(InputError {
            file: name.into(),
            line: st.lines as usize,
            msg: "no block:block_rq_issue or block:block_rq_complete lines found (record them with \
                  'perf record -e block:block_rq_issue -e block:block_rq_complete -a', then 'perf script > FILE')"
                .into(),
        });
    }
    let header = TraceHeader {
        hostname: format!("perf script {name}"),
        start_ns: first_ts.unwrap_or(0),
        block: true,
        ..Default::default()
    };
    Ok((batch, header, st))
}

/// `Ok(None)` for lines that are not block request events.
fn parse_line(line: &str) -> Result<Option<Line<'_>>, String> {
    let ev = if line.contains("block_rq_issue:") {
        Ev::Issue
    } else if line.contains("block_rq_complete:") {
        Ev::Complete
    } else if line.contains("block_rq_insert:") {
        Ev::Insert
    } else {
        return Ok(None);
    };
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let evname = match ev {
        Ev::Issue => "block_rq_issue:",
        Ev::Complete => "block_rq_complete:",
        Ev::Insert => "block_rq_insert:",
    };
    let Some(ei) = tokens.iter().position(|t| t.ends_with(evname)) else {
        // The name appears inside another field (a comm, a path): not one of ours.
        return Ok(None);
    };
    // The timestamp: the last "NNN.NNN:" token before the event.
    let ti = tokens[..ei]
        .iter()
        .rposition(|t| t.ends_with(':') && parse_ts(&t[..t.len() - 1]).is_some())
        .ok_or_else(|| format!("no timestamp (SECONDS.FRACTION:) before {}", tokens[ei]))?;
    let ts = parse_ts(&tokens[ti][..tokens[ti].len() - 1]).unwrap_or(0);
    // "comm pid [cpu]" or "comm pid/tid [cpu]" before the timestamp; comm may hold spaces.
    let mut j = ti;
    if j > 0 && tokens[j - 1].starts_with('[') && tokens[j - 1].ends_with(']') {
        j -= 1;
    }
    let (pid, comm) = if j > 0 {
        let p = tokens[j - 1].split('/').next().unwrap_or("");
        match p.parse::<u32>() {
            Ok(pid) if j > 1 => (pid, line_span(line, tokens[0], tokens[j - 2])),
            Ok(pid) => (pid, ""),
            Err(_) => (0, line_span(line, tokens[0], tokens[j - 1])),
        }
    } else {
        (0, "")
    };
    let rest = &tokens[ei + 1..];
    let expected = match ev {
        Ev::Complete => "'MAJOR,MINOR RWBS (CMD) SECTOR + SECTORS [ERROR]'",
        _ => "'MAJOR,MINOR RWBS BYTES (CMD) SECTOR + SECTORS [COMM]'",
    };
    let bad = |what: &str| format!("{what}: expected {expected} after {}", tokens[ei]);
    let dev = rest.first().and_then(|d| parse_dev(d)).ok_or_else(|| bad("no MAJOR,MINOR device"))?;
    let rwbs = *rest.get(1).ok_or_else(|| bad("no rwbs field"))?;
    let plus = rest.iter().position(|t| *t == "+").ok_or_else(|| bad("no 'SECTOR + SECTORS'"))?;
    if plus < 3 {
        return Err(bad("no 'SECTOR + SECTORS'"));
    }
    let sector =
        rest[plus - 1].parse::<u64>().map_err(|_| bad(&format!("sector '{}' is not a number", rest[plus - 1])))?;
    let sectors = rest
        .get(plus + 1)
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| bad("the sector count after '+' is not a number"))?;
    // Issue and insert carry a byte count (0 for file system requests) before "(cmd)".
    let bytes = if ev != Ev::Complete { rest.get(2).and_then(|b| b.parse::<u64>().ok()).unwrap_or(0) } else { 0 };
    Ok(Some(Line { ev, ts, pid, comm, dev, rwbs, bytes, sector, sectors }))
}

/// The text of `line` from the start of token `first` to the end of token `last` (both slices of it).
fn line_span<'a>(line: &'a str, first: &'a str, last: &'a str) -> &'a str {
    let a = first.as_ptr() as usize - line.as_ptr() as usize;
    let b = last.as_ptr() as usize - line.as_ptr() as usize + last.len();
    line.get(a..b).unwrap_or("")
}

/// `202,16` (or `202:16`) to `major << 20 | minor`.
fn parse_dev(s: &str) -> Option<u32> {
    let (a, b) = s.split_once(',').or_else(|| s.split_once(':'))?;
    let (ma, mi) = (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?);
    (ma < 4096 && mi < (1 << 20)).then_some((ma << 20) | mi)
}

/// `2199495.030133` seconds to ns, exactly (up to 9 decimals).
fn parse_ts(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || !int.bytes().all(|c| c.is_ascii_digit()) || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if frac.len() > 9 {
        return None;
    }
    let secs: u64 = int.parse().ok()?;
    let mut ns: u64 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    for _ in frac.len()..9 {
        ns *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::BlockOp;

    const SAMPLE: &str = "\
# ========
# captured on: x
    tar 16072 [001] 2199495.030133: block:block_rq_issue: 202,16 R 0 () 21997888 + 8 [tar]
 swapper     0 [000] 2199495.030286: block:block_rq_complete: 202,16 R () 21997888 + 8 [0]
    tar 16072 [001] 2199495.030327: block:block_rq_issue: 202,16 R 0 () 21997896 + 8 [tar]
 kworker/u4:2  99 [000] 2199495.030400: sched:sched_switch: whatever
 swapper     0 [000] 2199495.030512: block:block_rq_complete: 202,16 R () 21997896 + 8 [0]
 swapper     0 [000] 2199495.030600: block:block_rq_complete: 202,16 W () 5 + 8 [0]
 Web Content 4242/4243 [001] 2199495.100000100: block:block_rq_insert: 259,0 WS 4096 () 1234 + 8 none,0,0 [Web Content]
 Web Content 4242/4243 [001] 2199495.100000200: block:block_rq_issue: 259,0 WS 4096 () 1234 + 8 none,0,0 [Web Content]
 swapper 0 [000] 2199495.100100200: block:block_rq_complete: 259,0 WS () 1234 + 8 none,0,0 [0]
 jbd2/vda1-8   301 [000] 2199495.200000000:          1 block:block_rq_issue: 254,0 FWFS 0 () 0 + 0 [jbd2/vda1-8]
";

    #[test]
    fn pairs_issue_and_complete() {
        let (b, h, st) = parse_perf_script(SAMPLE.as_bytes(), "out.blockio").unwrap();
        assert_eq!(st.issues, 4);
        assert_eq!(st.completes, 4);
        assert_eq!(st.paired, 3);
        assert_eq!(st.unpaired_completes, 1);
        assert_eq!(st.pending_issues, 1);
        assert_eq!(st.inserts, 1);
        assert_eq!(b.len(), 3);
        assert_eq!(h.start_ns, 2_199_495_030_133_000);
        let e = b.get(0);
        assert_eq!(e.ts, 2_199_495_030_133_000);
        assert_eq!(e.lat, 153_000);
        assert_eq!(e.dev, (202 << 20) | 16);
        assert_eq!(e.off, 21_997_888);
        assert_eq!(e.bytes, 4096);
        assert_eq!(e.comm, "tar");
        assert_eq!(e.pid, 16072);
        assert_eq!(BlockOp::from_u16(e.nr), BlockOp::Read);
        let w = b.get(2);
        assert_eq!(w.comm, "Web Content");
        assert_eq!(w.pid, 4242);
        assert_eq!(w.lat, 100_000);
        assert_eq!(w.qtime, 100);
        assert_eq!(w.flags, Rwbs::SYNC);
        assert_eq!(BlockOp::from_u16(w.nr), BlockOp::Write);
        assert!(st.summary().contains("3 block requests"));
    }

    #[test]
    fn errors_name_the_line() {
        let bad = "a 1 [000] 1.0: block:block_rq_issue: 8,0 R 0 () x + 8 [a]\n";
        let e = parse_perf_script(bad.as_bytes(), "p.txt").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.to_string().starts_with("p.txt:1: sector 'x' is not a number"), "{e}");
        let e = parse_perf_script(b"x 1 [000] 1.0: block:block_rq_complete: sda R () 1 + 8 [0]\n", "p").unwrap_err();
        assert!(e.msg.contains("MAJOR,MINOR"), "{e}");
        let e = parse_perf_script(b"x 1 [000] 1.0: block:block_rq_issue: 8,0 Q 0 () 1 + 8 [0]\n", "p").unwrap_err();
        assert!(e.msg.contains("rwbs"), "{e}");
        let e = parse_perf_script(b"x 1 [000] 1.0: sched:sched_switch: a\n", "p").unwrap_err();
        assert!(e.msg.contains("no block:block_rq_issue"), "{e}");
        let e = parse_perf_script(b"x 1 [000] block:block_rq_issue: 8,0 R 0 () 1 + 8 [0]\n", "p").unwrap_err();
        assert!(e.msg.contains("timestamp"), "{e}");
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_ts("1.5"), Some(1_500_000_000));
        assert_eq!(parse_ts("2199495.030133"), Some(2_199_495_030_133_000));
        assert_eq!(parse_ts("7.000000001"), Some(7_000_000_001));
        assert_eq!(parse_ts("12"), Some(12_000_000_000));
        assert_eq!(parse_ts("1.2.3"), None);
        assert_eq!(parse_ts("x"), None);
        assert_eq!(parse_dev("202,16"), Some((202 << 20) | 16));
    }
}

//! What a recording says when it ends: its summary (text, or one JSON object for scripts), and
//! the warnings about what it could not record.

use super::Args;
use anyhow::Result;
use latscope_event::units::{fmt_bytes, fmt_count};
use latscope_live::Recording;
use std::io::Write;

/// The summary of a finished recording, then its warnings (always, even with --quiet).
pub(super) fn report(a: &Args, rec: &Recording, attach_s: f64) -> Result<()> {
    let secs = rec.duration.as_secs_f64().max(1e-9);
    let bytes = std::fs::metadata(&a.file).map(|m| m.len()).unwrap_or(rec.summary.bytes);
    let s = &rec.stats;
    if a.json.is_some() {
        let mut j = serde_json::json!({
            "file": a.file,
            "reason": rec.reason.describe(),
            "events": rec.events,
            "ring_events": s.events,
            "lost": s.lost,
            "path_faults": s.path_faults,
            "block_completions_without_issue": s.blk_unpaired,
            "block_flush_ends": s.blk_flush_ends,
            "not_followed": s.not_followed,
            "malformed": rec.malformed,
            "bytes": bytes,
            "duration_s": secs,
            "events_per_s": rec.events as f64 / secs,
            "command_status": rec.command_status,
            "wakeups_unseen": s.wakeups_unseen,
            "attach_s": attach_s,
        });
        // Only where the kernel counts them: never a 0 that was not measured.
        if let Some(n) = rec.program_runs_skipped {
            j["program_runs_skipped"] = n.into();
        }
        if let Some(st) = &rec.stacks {
            j["stacks"] = serde_json::json!({
                "distinct": st.entries, "missing": st.missing,
                "maps_reads": st.maps.reads, "maps_bytes": st.maps.bytes, "maps_reads_refused": st.maps.refused,
                "unwound": st.unwound.0, "unwound_cut_short": st.unwound.1, "frame_pointers_only": st.fp_only,
            });
        }
        match a.json.as_deref() {
            Some(p) if p.as_os_str() != "-" => crate::args::write_output(Some(p), format!("{j}\n").as_bytes())?,
            _ if !a.command.is_empty() => eprintln!("{j}"),
            _ => println!("{j}"),
        }
    } else if !a.quiet {
        eprintln!(
            "latscope: {}: recorded {} events in {secs:.2} s ({} events/s) to {} ({}, {:.1} B/event)",
            rec.reason.describe(),
            rec.events,
            fmt_count(rec.events as f64 / secs),
            a.file.display(),
            fmt_bytes(bytes),
            bytes as f64 / rec.events.max(1) as f64
        );
        if s.lost == 0 {
            eprintln!("latscope: lost 0 events");
        }
        if s.path_faults > 0 {
            eprintln!("latscope: {} path arguments could not be read from user memory", s.path_faults);
        }
        if s.blk_unpaired > 0 {
            eprintln!(
                "latscope: {} block completions had no issue to pair with (not a loss: requests issued \
                 before the recording started, or completed twice by their driver)",
                s.blk_unpaired
            );
        }
        if s.wakeups_unseen > 0 {
            eprintln!(
                "latscope: {} wake-ups not seen (--why): those blocked intervals are attributed from the call \
                 alone (its syscall, fd, I/O wait), with no waker",
                s.wakeups_unseen
            );
        }
        if let Some(m) = rec.stacks.as_ref().map(|st| st.missing).filter(|m| !m.is_none()) {
            eprintln!("latscope: {} (each missing stack's entry says why: see `why --stacks`)", m.describe());
        }
        if let Some(st) = rec.stacks.as_ref().filter(|st| st.fp_only > 0) {
            eprintln!(
                "latscope: {} user stacks walked by frame pointers only: no copy of the stack came with them \
                 (the ring buffer was busy); code without frame pointers shows its innermost frames only there",
                st.fp_only
            );
        }
        if let Some(n) = rec.program_runs_skipped.filter(|&n| n > 0) {
            eprintln!("latscope: {n} program runs skipped: the kernel does not re-enter a program on a CPU");
        }
        if let Some(st) = rec.command_status {
            eprintln!("latscope: the command exited with status {st}");
        }
    }
    if s.not_followed > 0 {
        eprintln!(
            "latscope: warning: {} child processes were NOT followed: the kernel's pid filter was full \
             ({} processes); their events are missing",
            s.not_followed,
            latscope_probe::PIDS_MAX
        );
    }
    if s.lost > 0 {
        eprintln!(
            "latscope: LOST {} events: the ring buffer was full (try --buffer-size 256MiB, or a narrower filter)",
            s.lost
        );
    }
    let _ = std::io::stderr().flush();
    Ok(())
}

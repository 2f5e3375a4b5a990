//! The line that says a recording has started: on stderr, terminal or not (scripts and logs
//! learn when the probes were attached and how long that took), or a JSON object where the
//! command prints JSON. With `LATSCOPE_START_TIMES` set, also the time each step of the start
//! took (see docs/PERFORMANCE.md).

use latscope_live::LiveSession;
use latscope_probe::starttimes;

/// Where the start is reported.
pub enum Announce {
    /// Nothing (`--quiet`).
    Quiet,
    /// One line of text on stderr.
    Text,
    /// One JSON object on stderr (stdout holds other output).
    JsonStderr,
    /// One JSON object on stdout (a stream of JSON events there).
    JsonStdout,
}

/// Report that `session` records from now on, writing to `to` (a file, directory or `-`).
pub fn announce(session: &LiveSession, to: &std::path::Path, how: Announce) {
    let times = session.start_times();
    let start = session.header().start_ns;
    let wall = session.header().wall_ns(start);
    let attach_s = times.total().as_secs_f64();
    match how {
        Announce::Quiet => {}
        Announce::Text => eprintln!(
            "latscope: recording to {} since {} (probes attached in {:.0} ms)",
            to.display(),
            latscope_view::svg::fmt_wall(wall),
            attach_s * 1e3
        ),
        Announce::JsonStderr | Announce::JsonStdout => {
            let j = serde_json::json!({
                "event": "recording", "file": to, "start_ns": start, "wall_ns": wall, "attach_s": attach_s,
            });
            if matches!(how, Announce::JsonStdout) {
                println!("{j}");
            } else {
                eprintln!("{j}");
            }
        }
    }
    if starttimes::wanted() {
        eprint!("latscope: start times ({}):\n{}", starttimes::ENV, times.describe());
    }
}

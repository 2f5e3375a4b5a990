//! Printing and writing: `--json`, `--time`, output files (never the input, never an SVG on a
//! terminal).

use anyhow::{bail, Context, Result};
use std::path::Path;

/// `--json`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct JsonArg {
    /// Print JSON (for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// How to print times.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeArg {
    /// Wall-clock time of day (UTC).
    Wall,
    /// Seconds since the recording started.
    Rel,
    /// Raw CLOCK_MONOTONIC ns.
    Mono,
}

/// `--time`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct TimeFormatArg {
    /// How to print times.
    #[arg(long, value_enum, default_value = "wall")]
    pub time: TimeArg,
}

impl TimeFormatArg {
    /// The view's time format.
    pub fn format(&self) -> latscope_view::events::TimeFormat {
        use latscope_view::events::TimeFormat;
        match self.time {
            TimeArg::Wall => TimeFormat::Wall,
            TimeArg::Rel => TimeFormat::Relative,
            TimeArg::Mono => TimeFormat::Monotonic,
        }
    }
}

/// Writes `data` to `out` (a file, or stdout for `None` or `-`).
pub fn write_output(out: Option<&Path>, data: &[u8]) -> Result<()> {
    use std::io::Write;
    match out {
        Some(p) if p.as_os_str() != "-" => {
            // A new file renamed over the old one when complete: an interrupted command never
            // leaves a half-written output over a good one.
            let mut f = latscope_trace::AtomicFile::create(p)?;
            f.write_all(data).with_context(|| format!("cannot write {}", p.display()))?;
            f.commit()?;
            Ok(())
        }
        _ => {
            let mut o = std::io::stdout().lock();
            o.write_all(data)?;
            o.flush()?;
            Ok(())
        }
    }
}

/// Refuses to write `what` (an SVG document) to standard output when that is a terminal, where
/// it would be a screenful of markup: says to use `how` instead.
pub fn refuse_terminal(out: Option<&Path>, what: &str, how: &str) -> Result<()> {
    use std::io::IsTerminal;
    if out.is_none_or(|p| p.as_os_str() == "-") && std::io::stdout().is_terminal() {
        bail!("{what} is an SVG document, not for a terminal: write it to a file with {how}");
    }
    Ok(())
}

/// Refuse an output file that is the input (the same path, or the same file through a symlink
/// or a hard link), before anything is read or written.
pub fn check_output(input: Option<&Path>, output: Option<&Path>) -> Result<()> {
    match (input, output) {
        (Some(i), Some(o)) if i.as_os_str() != "-" && o.as_os_str() != "-" => {
            Ok(latscope_trace::check_output_not_input(&[i], o)?)
        }
        _ => Ok(()),
    }
}

/// The output's name for messages.
pub fn shown(p: Option<&Path>) -> String {
    match p {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "stdout".into(),
    }
}

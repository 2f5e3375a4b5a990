//! The `latscope` command: parses arguments and wires the stages together
//! (probes -> trace file or aggregates -> filter -> aggregations -> views).

mod args;
mod cmd;

use clap::{CommandFactory, Parser, Subcommand};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// A Linux latency observatory: record every syscall's and block request's latency with eBPF,
/// see it as spectrograms, heat maps and histograms, and drill down by process, file and disk.
#[derive(Parser)]
#[command(name = "latscope", version, propagate_version = true, arg_required_else_help = true)]
#[command(after_help = "Examples:
  latscope record -w trace.lst -- tar cf /tmp/x.tar /usr/share/doc
  latscope events -r trace.lst 'evt.latency > 1ms and fd.type = file'
  latscope info -r trace.lst
  latscope spectrogram 'proc.name = postgres'
  latscope heatmap -r trace.lst --block -o disk.svg
  latscope diff before.lst after.lst
  latscope export -r trace.lst --parquet trace.parquet
Run 'latscope COMMAND --help' for each command's options.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Record syscalls and block requests into a trace file.
    Record(cmd::record::Args),
    /// Print the events of a trace file, one per line (or JSON lines).
    Events(cmd::events::Args),
    /// Print a trace file's header, event counts, time span and losses.
    Info(cmd::info::Args),
    /// List the fields filter expressions can use.
    Fields(cmd::fields::Args),
    /// Draw latency as a spectrogram (rows of time, columns of latency), live or from a trace.
    Spectrogram(cmd::spectrogram::Args),
    /// A storage (or timer) test workload: write or read buffers at a rate, report latency.
    Load(cmd::load::Args),
    Heatmap(cmd::heatmap::Args),
    Hist(cmd::hist::Args),
    Top(cmd::top::Args),
    /// Why was it slow: the slowest operations and their causes, recorded now or from a trace.
    Why(cmd::why::Args),
    /// Did it get worse? Two recordings (or sets of repeats) compared, with intervals and verdicts.
    Diff(cmd::diff::Args),
    Timeline(cmd::timeline::Args),
    /// Run micro-benchmark probes continuously; summaries live, hourly histograms to a store.
    Bench(cmd::bench::Args),
    /// Replay recorded file I/O in a sandbox: prepare a plan, init its tree, run it, compare runs.
    Replay(cmd::replay::Args),
    /// Serve the web dashboard: a store's hourly histograms explained, latency live.
    Serve(cmd::serve::Args),
    Export(cmd::export::Args),
    Agent(cmd::agent::Args),
    /// Check this machine for what the probes need, feature by feature.
    Check(cmd::check::Args),
    /// Fire a running flight recorder's trigger by name (record --ring, the agent's recorders).
    Trigger(cmd::trigger::Args),
    #[command(hide = true)]
    Generate(cmd::generate::Args),
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if let Some(hint) = second_read(&argv).or_else(|| args::file_as_filter(&Cli::command(), &argv)) {
        eprintln!("{hint}");
        return ExitCode::from(2);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return help_or_error(e),
    };
    // `latscope hist ... | head` should end quietly like other Unix tools, not panic on a closed
    // pipe: restore the default SIGPIPE action (Rust ignores it). Not for record and bench, which
    // must close their trace file or store cleanly whatever happens to their standard output, not
    // for serve, whose clients may close their connections while it writes to them, and not for
    // events, whose output is long and piped most: it stops at the closed pipe's error and exits
    // with status 0, as ripgrep does, so that `set -o pipefail` scripts see no failure.
    if !matches!(cli.command, Command::Record(_) | Command::Bench(_) | Command::Serve(_) | Command::Events(_)) {
        // SAFETY: setting a signal disposition before any thread is started.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    // A trace cut short because its reader went away is an error to report, not a quiet end.
    let recording = matches!(cli.command, Command::Record(_));
    let r = match cli.command {
        Command::Record(a) => cmd::record::run(a),
        Command::Events(a) => cmd::events::run(a),
        Command::Info(a) => cmd::info::run(a),
        Command::Fields(a) => cmd::fields::run(a),
        Command::Spectrogram(a) => cmd::spectrogram::run(a),
        Command::Load(a) => cmd::load::run(a),
        Command::Heatmap(a) => cmd::heatmap::run(a),
        Command::Hist(a) => cmd::hist::run(a),
        Command::Top(a) => cmd::top::run(a),
        Command::Why(a) => cmd::why::run(a),
        Command::Diff(a) => cmd::diff::run(a),
        Command::Timeline(a) => cmd::timeline::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Replay(a) => cmd::replay::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Export(a) => cmd::export::run(a),
        Command::Agent(a) => cmd::agent::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Trigger(a) => cmd::trigger::run(a),
        Command::Generate(a) => cmd::generate::run(a),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            // A closed pipe (`latscope events | head`) is not an error worth a message.
            let broken_pipe = e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            });
            if broken_pipe && !recording {
                return ExitCode::SUCCESS;
            }
            eprintln!("latscope: {}", message(&e));
            if let Some(hint) = e.downcast_ref::<Hint>() {
                eprintln!("latscope: {}", hint.0);
            }
            if broken_pipe {
                eprintln!("latscope: the trace's reader closed the pipe before the recording ended: the trace it got is incomplete");
            }
            ExitCode::from(2)
        }
    }
}

/// What follows from an error, or what to do about it, attached with `anyhow::Context`: printed
/// on its own line after the error's message.
#[derive(Debug)]
pub(crate) struct Hint(pub String);

impl std::fmt::Display for Hint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The error and its causes joined by ": ", leaving out a cause whose text the message already
/// holds (errors that quote their source in their own text would otherwise say it twice).
pub(crate) fn message(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    // A hint is said on a line of its own, after the error it follows from.
    let skip = usize::from(e.downcast_ref::<Hint>().is_some());
    for cause in e.chain().skip(skip) {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg
}

/// `hist` or `top` given two recordings (`-r A -r B`): what to run instead, `diff` with them.
fn second_read(args: &[String]) -> Option<String> {
    let cmd = args.get(1).filter(|c| *c == "hist" || *c == "top")?;
    let mut files = Vec::new();
    let mut by = None;
    let mut it = args.iter().skip(2);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-r" | "--read" => files.extend(it.next().cloned()),
            "--by" => by = it.next().cloned(),
            _ if a.starts_with("--read=") => files.push(a["--read=".len()..].to_string()),
            _ if a.starts_with("--by=") => by = Some(a["--by=".len()..].to_string()),
            _ if a.starts_with("-r") && a.len() > 2 && !a.starts_with("--") => files.push(a[2..].to_string()),
            _ => {}
        }
    }
    if files.len() < 2 {
        return None;
    }
    let by = by
        .filter(|b| ["syscall", "proc", "file", "disk", "cause"].contains(&b.as_str()))
        .map(|b| format!(" --by {b}"))
        .unwrap_or_default();
    let quote =
        |f: &str| if f.contains(|c: char| c.is_whitespace() || c == '\'') { format!("'{f}'") } else { f.to_string() };
    Some(format!(
        "latscope: {cmd} reads one recording (-r); to compare two, run:\n  latscope diff {} {} [FILTER]{by}\n\
         It gives, per group and percentile (p50, p90, p99, p99.9) and rate, the change with a 95% interval and a verdict\n\
         (--svg draws both histograms overlaid, --heatmap both heat maps and their difference;\n\
         several recordings per side: --a A1 A2 --b B1 B2).",
        quote(&files[0]),
        quote(&files[1])
    ))
}

/// Prints a help text with its examples verbatim, or clap's error. clap wraps every section of a
/// help text to the terminal's width, and would split a quoted argument or a pipeline of an
/// example over two lines that no longer copy and paste: the examples are left out of what clap
/// wraps and printed as written.
fn help_or_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let (code, to_stderr) = match e.kind() {
        ErrorKind::DisplayHelp => (0, false),
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => (2, true),
        _ => e.exit(),
    };
    let mut root = Cli::command();
    root.build();
    // The command whose help is asked for: the subcommand names among the arguments.
    let mut cmd = &root;
    for a in std::env::args().skip(1).filter(|a| !a.starts_with('-') && a != "help") {
        match cmd.find_subcommand(&a) {
            Some(s) => cmd = s,
            None => break,
        }
    }
    let tty = if to_stderr { std::io::stderr().is_terminal() } else { std::io::stdout().is_terminal() };
    let styled = |h: clap::builder::StyledStr| if tty { h.ansi().to_string() } else { h.to_string() };
    // clap's text (short or long help, as clap chose) without its wrapped copy of the examples,
    // then the examples as written.
    let clap_text = e.render().to_string();
    let long = cmd.clone().render_long_help().to_string() == clap_text;
    let short = !long && cmd.clone().render_help().to_string() == clap_text;
    let text = match cmd.get_after_help().map(|h| h.to_string()) {
        Some(ex) if long || short => {
            let mut bare = cmd.clone().after_help(clap::builder::Resettable::<clap::builder::StyledStr>::Reset);
            let mut t = styled(if long { bare.render_long_help() } else { bare.render_help() });
            t.truncate(t.trim_end().len());
            t.push_str("\n\n");
            t.push_str(ex.trim_end());
            t.push('\n');
            t
        }
        _ => styled(e.render()),
    };
    let written = if to_stderr {
        std::io::stderr().lock().write_all(text.as_bytes())
    } else {
        let mut o = std::io::stdout().lock();
        o.write_all(text.as_bytes()).and_then(|_| o.flush())
    };
    if written.is_err() && !to_stderr {
        return ExitCode::from(1);
    }
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::message;

    /// An error that quotes its source in its own text, as many of the library crates' do.
    #[derive(Debug)]
    struct Quotes(std::io::Error);

    impl std::fmt::Display for Quotes {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot read {}", self.0)
        }
    }

    impl std::error::Error for Quotes {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_is_said_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "x.lst: no such file");
        // Quoted by its wrapper: said once.
        let e = anyhow::Error::new(Quotes(io())).context("hist");
        assert_eq!(message(&e), "hist: cannot read x.lst: no such file");
        // Not quoted: every cause, in order.
        let e = anyhow::Error::new(io()).context("opening").context("hist");
        assert_eq!(message(&e), "hist: opening: x.lst: no such file");
    }
}

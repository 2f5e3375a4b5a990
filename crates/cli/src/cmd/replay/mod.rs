//! `latscope replay`: prepare a plan from a trace, build its starting tree, replay it, compare runs.
//! One module per step; each parses its arguments, calls `latscope_replay` and prints.

pub(crate) mod compare;
mod plan;
mod push;
mod run;
mod tree;

use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// Replay recorded file I/O in a sandbox: the same operations, threads and dependencies, at
/// the recorded speed or as fast as possible, with statistics.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope replay prepare -r trace.lst -o plan.lsr --root /mnt/test/sb
  latscope replay init plan.lsr
  latscope replay run plan.lsr --speed 1 --stats run.json --json
  latscope replay compare before.json after.json
Steps: prepare (on any machine) -> init (before every run) -> run -> compare; purge empties the trash.")]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
enum Cmd {
    /// Make a replay plan from a trace: operations per thread, dependencies, sandbox paths.
    Prepare(plan::PrepareArgs),
    /// Describe a plan: operations, starting tree, sandbox, what was left out.
    Info(plan::InfoArgs),
    /// Build a plan's starting tree in a fresh sandbox (before every run).
    Init(tree::InitArgs),
    /// Empty the trash where init moves what earlier runs of the test left.
    Purge(tree::PurgeArgs),
    /// Replay a plan in its initialised sandbox and report what happened.
    Run(run::RunArgs),
    /// Compare two runs (or sets of runs), or run a matrix of block-device settings.
    Compare(compare::CompareArgs),
}

/// Where the sandbox is, if not where the plan says.
#[derive(clap::Args, Debug)]
pub struct Place {
    /// Use this sandbox directory instead of the plan's (plans prepared with --root).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
}

/// Which extended attributes init and run set.
#[derive(clap::Args, Debug)]
pub struct Xattrs {
    /// Namespaces of extended attributes restored and replayed besides user.* (comma-separated:
    /// trusted, security, system, or all). Each can grant privilege, so only user.* is by
    /// default: trusted.* holds metadata the kernel trusts (overlayfs redirects and whiteouts),
    /// security.* labels (SELinux, Smack, AppArmor, IMA/EVM) decide what a program may do,
    /// system.* POSIX ACLs can give any user access to a file. security.capability (file
    /// capabilities) is never set. Attributes left out are said, and setting them skipped.
    #[arg(long, value_name = "LIST", default_value = "user", value_parser = latscope_replay::XattrPolicy::parse)]
    xattr_namespaces: latscope_replay::XattrPolicy,
}

pub fn run(a: Args) -> Result<ExitCode> {
    match a.cmd {
        Cmd::Compare(a) => compare::compare(a),
        Cmd::Run(a) => run::replay(a),
        Cmd::Prepare(a) => plan::prepare(a),
        Cmd::Info(a) => plan::info(a),
        Cmd::Init(a) => tree::init(a),
        Cmd::Purge(a) => tree::purge(a),
    }
}

/// A progress line on stderr (only on a terminal), at most every 100 ms.
pub fn progress_line(quiet: bool) -> Option<impl Fn(&str)> {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let last = std::sync::Mutex::new(std::time::Instant::now() - std::time::Duration::from_secs(1));
    Some(move |s: &str| {
        let mut l = last.lock().unwrap_or_else(|e| e.into_inner());
        if l.elapsed() >= std::time::Duration::from_millis(100) {
            *l = std::time::Instant::now();
            eprint!("\r\x1b[K{s}");
        }
    })
}

//! `latscope replay prepare` and `info`.

use anyhow::{Context, Result};
use latscope_replay::{describe_plan, read_plan, write_plan, PrepareOptions, SandboxChoice};
use std::path::PathBuf;
use std::process::ExitCode;

/// Make a replay plan from a trace: each recorded thread's file operations in order, the
/// dependencies that keep cross-thread causality, every path mapped into a sandbox, every fd
/// resolved, the starting tree. Prints what was left out and why. Refuses traces that are not
/// complete for replay (lost events, corrupt blocks), saying why.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope replay prepare -r trace.lst -o plan.lsr --root /mnt/test/sb
  latscope replay prepare -r trace.lst -o plan.lsr --name nightly        # <mount>/.latscope/nightly/
  latscope replay prepare -r trace.lst -o plan.lsr --root /tmp/sb 'proc.name = postgres'")]
#[command(group(clap::ArgGroup::new("sandbox").required(true).args(["root", "name"])))]
pub struct PrepareArgs {
    /// Trace file to read.
    #[arg(short = 'r', long = "read", value_name = "TRACE")]
    trace: PathBuf,
    /// Plan file to write.
    #[arg(short = 'o', long = "output", value_name = "PLAN")]
    output: PathBuf,
    /// Replay every recorded path under this directory (recorded /a/b becomes DIR/a/b).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Replay under <mount>/.latscope/NAME/ for each recorded mount.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Print the plan's description as JSON.
    #[arg(long)]
    json: bool,
    /// Filter expression: the events to replay (see 'latscope fields').
    #[arg(value_name = "FILTER")]
    filter: Option<String>,
}

/// Describe a plan.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope replay info plan.lsr
  latscope replay info plan.lsr --json | jq .counts")]
pub struct InfoArgs {
    /// Plan file.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    /// JSON.
    #[arg(long)]
    json: bool,
}

pub fn prepare(a: PrepareArgs) -> Result<ExitCode> {
    let sandbox = match (a.root, a.name) {
        (Some(d), _) => SandboxChoice::Root(latscope_replay::sandbox::absolute(&d)?),
        (None, Some(n)) => SandboxChoice::Name(n),
        (None, None) => unreachable!("clap requires one"),
    };
    crate::args::check_output(Some(&a.trace), Some(&a.output))?;
    let opts = PrepareOptions { sandbox, filter: a.filter };
    let plan = latscope_replay::prepare(&a.trace, &opts)?;
    let bytes = write_plan(&plan, &a.output).context("cannot write the plan")?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&plan.meta)?);
    } else {
        print!("{}", describe_plan(&plan));
        println!("wrote {} ({bytes} bytes)", a.output.display());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn info(a: InfoArgs) -> Result<ExitCode> {
    let plan = read_plan(&a.plan)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&plan.meta)?);
    } else {
        print!("{}", describe_plan(&plan));
    }
    Ok(ExitCode::SUCCESS)
}

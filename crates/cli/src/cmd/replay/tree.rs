//! `latscope replay init` and `purge`.

use super::{progress_line, Place, Xattrs};
use anyhow::Result;
use latscope_event::units::{fmt_bytes, fmt_ns};
use latscope_replay::{read_plan, InitOptions};
use std::path::PathBuf;
use std::process::ExitCode;

/// Build a plan's starting tree in a fresh sandbox: every file and directory used before it is
/// created, each file as large as what is read of it before being written, filled with
/// generated non-zero data. What an earlier init of the same test left moves to a trash
/// directory ('latscope replay purge' empties it). Run it before every replay.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope replay init plan.lsr
  latscope replay init plan.lsr --root /mnt/xfs/sb      # elsewhere than the plan says (--root plans)
  latscope replay init plan.lsr --user postgres         # for 'run --user postgres'
  latscope replay init plan.lsr --xattr-namespaces system   # POSIX ACLs too")]
pub struct InitArgs {
    /// Plan file.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    #[command(flatten)]
    place: Place,
    #[command(flatten)]
    xattrs: Xattrs,
    /// Give the tree to this user (name or uid), for runs as that user.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// No progress line.
    #[arg(short, long)]
    quiet: bool,
    /// Print what was done as JSON.
    #[arg(long)]
    json: bool,
}

/// Empty the sandbox's trash (what init moved away).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope replay purge plan.lsr")]
pub struct PurgeArgs {
    /// Plan file (says where the sandbox is).
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    #[command(flatten)]
    place: Place,
}

pub fn init(a: InitArgs) -> Result<ExitCode> {
    let plan = read_plan(&a.plan)?;
    let owner = a.user.as_deref().map(latscope_replay::sandbox::lookup_user).transpose()?;
    let line = progress_line(a.quiet);
    let progress = |done: u64, total: u64| {
        if let Some(l) = &line {
            l(&format!("init: {} of {} written", fmt_bytes(done), fmt_bytes(total)));
        }
    };
    let opts = InitOptions {
        root: a.place.root,
        owner,
        progress: Some(&progress),
        xattrs: a.xattrs.xattr_namespaces,
        ..Default::default()
    };
    let rep = latscope_replay::init(&plan, &opts)?;
    if line.is_some() {
        eprint!("\r\x1b[K");
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
        return Ok(ExitCode::SUCCESS);
    }
    for t in &rep.trashed {
        println!("moved the previous tree to {}", t.display());
    }
    println!(
        "created {} directories, {} files ({}), {} symlinks, {} extended attributes in {} ({})",
        rep.dirs,
        rep.files,
        fmt_bytes(rep.bytes),
        rep.symlinks,
        rep.xattrs,
        rep.roots.join(", "),
        fmt_ns(rep.elapsed_ns)
    );
    warn_xattrs(&rep);
    Ok(ExitCode::SUCCESS)
}

/// Says which attributes of the starting tree were not set, and why.
pub fn warn_xattrs(rep: &latscope_replay::InitReport) {
    for f in &rep.xattr_failures {
        eprintln!("warning: an extended attribute of the starting tree could not be set (its calls will diverge): {f}");
    }
    if rep.xattrs_refused > 0 {
        eprintln!(
            "warning: {} extended attributes of the starting tree were not set, as their namespace can grant \
             privilege (its calls will diverge): {}",
            rep.xattrs_refused,
            rep.xattrs_refused_names.join(", ")
        );
    }
}

pub fn purge(a: PurgeArgs) -> Result<ExitCode> {
    let plan = read_plan(&a.plan)?;
    let spec = latscope_replay::sandbox_spec(&plan, a.place.root.as_deref())?;
    let removed = latscope_replay::sandbox::purge(&spec)?;
    for r in &removed {
        println!("removed {}", r.display());
    }
    if removed.is_empty() {
        println!("the trash is empty");
    }
    Ok(ExitCode::SUCCESS)
}

//! `latscope generate` (hidden): man pages and shell completions made from the CLI's own clap
//! definition, so packages (`make deb`, `make install`) ship what `--help` says, never a copy
//! that drifts from it.

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use std::path::PathBuf;
use std::process::ExitCode;

/// Write the man pages (one per command, `latscope.1`, `latscope-record.1`, ...) into DIR, or
/// print a shell's completion script.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope generate man /tmp/man1
  latscope generate bash > /usr/share/bash-completion/completions/latscope")]
pub struct Args {
    /// What to generate.
    #[arg(value_enum)]
    pub what: What,
    /// The directory the man pages are written to (man only).
    #[arg(value_name = "DIR", required_if_eq("what", "man"))]
    pub dir: Option<PathBuf>,
}

/// Man pages or one shell's completion script.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum What {
    Man,
    Bash,
    Zsh,
    Fish,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let cmd = crate::Cli::command();
    let shell = match a.what {
        What::Man => {
            let dir = a.dir.context("name the directory the man pages go to")?;
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir)
                .with_context(|| format!("cannot write the man pages to {}", dir.display()))?;
            return Ok(ExitCode::SUCCESS);
        }
        What::Bash => Shell::Bash,
        What::Zsh => Shell::Zsh,
        What::Fish => Shell::Fish,
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd.clone(), "latscope", &mut script);
    use std::io::Write;
    std::io::stdout().lock().write_all(&script).context("cannot write the completion script")?;
    Ok(ExitCode::SUCCESS)
}

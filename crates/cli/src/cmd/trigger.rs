//! `latscope trigger`: fire a running flight recorder's trigger by name (crates/flight, control).

use anyhow::{bail, Result};
use latscope_flight::control;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;

/// Fire a flight recorder's trigger by hand: every running `latscope record --ring` (and agent
/// recorder) that has a trigger of that name writes the window around now, as if it had fired
/// (the minimum gap and the other guards apply).
///
/// Recorders listen on local sockets in /run/latscope (mode 0700; only root and the user
/// latscope runs as are answered). Any trigger can be fired so, whatever its condition; a
/// trigger whose condition is 'manual' fires only so.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope record -w /var/tmp/flight --ring 30s --trigger 'now: manual' &
  latscope trigger now              # dump the last 30 s (and 5 s more) now
  latscope trigger pg/slow          # only the agent recorder named pg
  latscope trigger --list           # the recorders running and their triggers")]
pub struct Args {
    /// The trigger's name, or RECORDER/NAME for one recorder's.
    #[arg(value_name = "NAME", required_unless_present = "list")]
    pub name: Option<String>,
    /// List the recorders running and their triggers instead.
    #[arg(long)]
    pub list: bool,
    /// Talk to this socket only (default: every socket in /run/latscope).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Print the answers as JSON (one object per socket answering).
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let sockets = match &a.socket {
        Some(s) => vec![s.clone()],
        None => control::sockets(),
    };
    let request = match (&a.name, a.list) {
        (_, true) => "list".to_string(),
        (Some(n), false) => {
            if n.trim().is_empty() || n.contains(char::is_whitespace) {
                bail!("'{n}' is not a trigger name (names have no spaces; see latscope trigger --list)");
            }
            format!("fire {n}")
        }
        (None, false) => bail!("name the trigger to fire, or --list"),
    };
    let mut answers: Vec<(PathBuf, Value)> = Vec::new();
    let mut problems = Vec::new();
    for s in &sockets {
        match control::ask(s, &request) {
            Ok(v) => answers.push((s.clone(), v)),
            // A socket left by a process that is gone: nobody to ask.
            Err(e) if e.contains("Connection refused") && a.socket.is_none() => {}
            Err(e) => problems.push(e),
        }
    }
    for p in &problems {
        eprintln!("latscope: warning: {p}");
    }
    if answers.is_empty() {
        bail!(
            "no flight recorder answered{}: start one with `latscope record -w DIR --ring 30s --trigger 'NAME: CONDITION'` \
             (or the agent's [[recorder]])",
            if a.socket.is_none() { format!(" in {}", control::SOCKET_DIR) } else { String::new() }
        );
    }
    if a.json {
        for (s, v) in &answers {
            println!("{}", serde_json::json!({"socket": s, "answer": v}));
        }
    }
    let mut fired = 0;
    let mut known: Vec<String> = Vec::new();
    for (_, v) in &answers {
        for r in v["recorders"].as_array().into_iter().flatten() {
            let name = r["recorder"].as_str().unwrap_or("?");
            let triggers: Vec<&str> =
                r["triggers"].as_array().into_iter().flatten().filter_map(|t| t.as_str()).collect();
            known.push(format!("{name}: {}", triggers.join(", ")));
        }
        for r in v["results"].as_array().into_iter().flatten() {
            let (rec, t) = (r["recorder"].as_str().unwrap_or("?"), r["trigger"].as_str().unwrap_or("?"));
            match (r["outcome"].as_str(), r["error"].as_str()) {
                (Some(o), _) => {
                    fired += 1;
                    if !a.json {
                        println!("{rec}: trigger {t}: {o}");
                    }
                }
                (_, Some(e)) => eprintln!("latscope: {rec}: trigger {t}: {e}"),
                _ => {}
            }
        }
        if let Some(e) = v["error"].as_str().filter(|_| !a.list) {
            if !a.json {
                eprintln!("latscope: {e}");
            }
        }
    }
    if a.list {
        if !a.json {
            for k in &known {
                println!("{k}");
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if fired == 0 {
        let name = a.name.as_deref().unwrap_or("");
        if known.is_empty() {
            bail!("no recorder has a trigger '{name}'");
        }
        bail!("no recorder has a trigger '{name}'; the recorders running have:\n  {}", known.join("\n  "));
    }
    Ok(ExitCode::SUCCESS)
}

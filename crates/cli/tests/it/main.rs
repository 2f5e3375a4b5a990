//! Every integration test of this crate, in one test binary: one link instead of one per file.
//! Each `tests/<name>.rs` is a module of its own. Made by `scripts/test-binaries.py` (run it
//! after adding a test file; `scripts/run-tests.py` refuses a file left out). The files are as
//! they were as binaries of their own: each loads the shared helpers with its own `mod common;`.
#![allow(clippy::duplicate_mod)]

#[path = "../agent.rs"]
mod agent;

#[path = "../agent_prometheus.rs"]
mod agent_prometheus;

#[path = "../bench.rs"]
mod bench;

#[path = "../capture.rs"]
mod capture;

#[path = "../containers.rs"]
mod containers;

#[path = "../diff.rs"]
mod diff;

#[path = "../export_parquet.rs"]
mod export_parquet;

#[path = "../export_readers.rs"]
mod export_readers;

#[path = "../file_safety.rs"]
mod file_safety;

#[path = "../flight.rs"]
mod flight;

#[path = "../hostile_names.rs"]
mod hostile_names;

#[path = "../libsinsp_eval.rs"]
mod libsinsp_eval;

#[path = "../package.rs"]
mod package;

#[path = "../perfetto.rs"]
mod perfetto;

#[path = "../record_command.rs"]
mod record_command;

#[path = "../record_follow.rs"]
mod record_follow;

#[path = "../record_pressure.rs"]
mod record_pressure;

#[path = "../record_start.rs"]
mod record_start;

#[path = "../record_truth.rs"]
mod record_truth;

#[path = "../replay.rs"]
mod replay;

#[path = "../replay_graphite.rs"]
mod replay_graphite;

#[path = "../replay_safety.rs"]
mod replay_safety;

#[path = "../serve.rs"]
mod serve;

#[path = "../server_attacks.rs"]
mod server_attacks;

#[path = "../spectrogram.rs"]
mod spectrogram;

#[path = "../task_ids.rs"]
mod task_ids;

#[path = "../trace_damage.rs"]
mod trace_damage;

#[path = "../view_layout.rs"]
mod view_layout;

#[path = "../view_truth.rs"]
mod view_truth;

#[path = "../views.rs"]
mod views;

#[path = "../views_agree.rs"]
mod views_agree;

#[path = "../views_words.rs"]
mod views_words;

#[path = "../why.rs"]
mod why;

#[path = "../why_stacks.rs"]
mod why_stacks;

#[path = "../why_waits.rs"]
mod why_waits;

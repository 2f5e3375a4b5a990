//! Every integration test of this crate, in one test binary: one link instead of one per file.
//! Each `tests/<name>.rs` is a module of its own. Made by `scripts/test-binaries.py` (run it
//! after adding a test file; `scripts/run-tests.py` refuses a file left out). The files are as
//! they were as binaries of their own: each loads the shared helpers with its own `mod common;`.
#![allow(clippy::duplicate_mod)]

#[path = "../agg_sums.rs"]
mod agg_sums;

#[path = "../fd_naming.rs"]
mod fd_naming;

#[path = "../task_maps.rs"]
mod task_maps;

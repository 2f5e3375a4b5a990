//! Every integration test of this crate, in one test binary: one link instead of one per file.
//! Each `tests/<name>.rs` is a module of its own. Made by `scripts/test-binaries.py` (run it
//! after adding a test file; `scripts/run-tests.py` refuses a file left out). The files are as
//! they were as binaries of their own: each loads the shared helpers with its own `mod common;`.
#![allow(clippy::duplicate_mod)]

#[path = "../dashboard.rs"]
mod dashboard;

#[path = "../graphite.rs"]
mod graphite;

#[path = "../prometheus.rs"]
mod prometheus;

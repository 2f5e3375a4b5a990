//! Every integration test of this crate, in one test binary: one link instead of one per file.
//! Each `tests/<name>.rs` is a module of its own. Made by `scripts/test-binaries.py` (run it
//! after adding a test file; `scripts/run-tests.py` refuses a file left out). The files are as
//! they were as binaries of their own: each loads the shared helpers with its own `mod common;`.
#![allow(clippy::duplicate_mod)]

#[path = "../filters.rs"]
mod filters;

#[path = "../fuzz_seeded.rs"]
mod fuzz_seeded;

#[path = "../libsinsp.rs"]
mod libsinsp;

#[path = "../properties.rs"]
mod properties;

#[path = "../pushdown.rs"]
mod pushdown;

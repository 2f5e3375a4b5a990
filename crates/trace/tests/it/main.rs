//! Every integration test of this crate, in one test binary: one link instead of one per file.
//! Each `tests/<name>.rs` is a module of its own. Made by `scripts/test-binaries.py` (run it
//! after adding a test file; `scripts/run-tests.py` refuses a file left out). The files are as
//! they were as binaries of their own: each loads the shared helpers with its own `mod common;`.
#![allow(clippy::duplicate_mod)]

#[path = "../damage.rs"]
mod damage;

#[path = "../decode.rs"]
mod decode;

#[path = "../interop.rs"]
mod interop;

#[path = "../output.rs"]
mod output;

#[path = "../roundtrip.rs"]
mod roundtrip;

#[path = "../sealed.rs"]
mod sealed;

#[path = "../stream.rs"]
mod stream;

#[path = "../user_sizes.rs"]
mod user_sizes;

#[path = "../zone.rs"]
mod zone;

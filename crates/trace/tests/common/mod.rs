//! Shared helpers of the integration tests: temporary directories, and the synthetic events and
//! headers of [`latscope_trace::synth`].
#![allow(dead_code)]

use std::path::PathBuf;

use latscope_event::EventBatch;
// Not every test uses every helper.
#[allow(unused_imports)]
pub use latscope_trace::synth::{random_batch, sample_header, Rng};

/// A temporary directory, removed when dropped.
pub struct TmpDir(PathBuf);

impl std::ops::Deref for TmpDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh temporary directory for one test.
pub fn tmpdir(name: &str) -> TmpDir {
    let d = std::env::temp_dir().join(format!("latscope-trace-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TmpDir(d)
}

/// Concatenate batches (via rows: slow, tests only).
pub fn concat(batches: &[EventBatch]) -> EventBatch {
    let mut out = EventBatch::with_capacity(0);
    for b in batches {
        for i in 0..b.len() {
            out.push(&b.get(i));
        }
    }
    out
}

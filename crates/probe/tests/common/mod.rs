//! What the root tests of this crate share.

/// Root and BTF, or skipped (a failure under CI=true, where a root test that cannot run fails).
#[allow(unused_imports)] // each test file uses some
pub use latscope_testkit::require_bpf as can_trace;

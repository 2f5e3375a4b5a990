//! What the probe crate's integration tests share.

/// Root and BTF, or skipped (a failure under CI=true, where a root test that cannot run fails).
pub fn can_trace(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let why = if unsafe { libc::geteuid() } != 0 {
        "not running as root"
    } else if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        "kernel has no BTF"
    } else {
        return true;
    };
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: cannot run under CI: {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
    false
}

//! What latscope's test suites share: one place that decides whether a test can run here.
//!
//! A test that needs root, BPF or an external tool, run where there is none, says it was skipped
//! and why, and returns early; under CI (`CI=true`, where `make test` has installed everything and
//! runs as root) the same condition is a failure, never a silent pass.

use std::path::Path;
use std::process::Command;

/// Whether this run is under CI (`CI=true`), where a test that cannot run fails.
pub fn under_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// The verdict on a test that cannot run for `why`: prints `SKIPPED test: why` and returns
/// false, or panics under CI.
pub fn skip(test: &str, why: &str) -> bool {
    verdict(test, why, under_ci())
}

fn verdict(test: &str, why: &str, ci: bool) -> bool {
    if ci {
        panic!("{test}: cannot run under CI: {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
    false
}

/// Why this machine cannot load and attach latscope's BPF programs, if it cannot.
pub fn bpf_unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root".into());
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Some("kernel has no BTF".into());
    }
    None
}

/// True if the test may trace (root and BTF); otherwise [`skip`].
pub fn require_bpf(test: &str) -> bool {
    match bpf_unavailable() {
        None => true,
        Some(why) => skip(test, &why),
    }
}

/// True if `tool` is on PATH; otherwise [`skip`] (under CI: `make test` installs it).
pub fn require_tool(test: &str, tool: &str) -> bool {
    let found =
        Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().is_ok_and(|o| o.status.success());
    found || skip(test, &format!("{tool} is not installed (make test installs it)"))
}

/// True if `python3 -c 'import M; ...'` works for every module; otherwise [`skip`].
pub fn require_python(test: &str, modules: &[&str]) -> bool {
    let code = modules.iter().map(|m| format!("import {m}")).collect::<Vec<_>>().join("; ");
    let ok = Command::new("python3").args(["-c", &code]).output().is_ok_and(|o| o.status.success());
    ok || skip(test, &format!("python3 with {modules:?} is not installed (make test installs it)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_present_tool_is_found_and_python_modules_are_checked_all_together() {
        assert!(require_tool("t", "sh"));
        assert!(!verdict("t", "no reason", false));
        if !under_ci() {
            assert!(!require_tool("t", "latscope-no-such-tool-here"));
            assert!(!require_python("t", &["sys", "latscope_no_such_module"]));
        }
    }

    #[test]
    #[should_panic(expected = "cannot run under CI")]
    fn under_ci_a_test_that_cannot_run_fails() {
        verdict("t", "no reason", true);
    }
}

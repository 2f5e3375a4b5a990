//! Where the time from `record` start to "recording" goes: each step of loading and attaching
//! the probes, timed, and (with [`ENV`] set) the kernel verifier's own time per program, read
//! from its statistics log (`BPF_LOG_STATS`, "verification time N usec").

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Set this environment variable (to anything) to have the verifier's time per program
/// measured too: the programs are then loaded with the kernel's statistics log, which costs a
/// log buffer per program and nothing once loaded.
pub const ENV: &str = "LATSCOPE_START_TIMES";

/// Whether [`ENV`] is set.
pub fn wanted() -> bool {
    std::env::var_os(ENV).is_some()
}

/// Steps of a start, each with how long it took, in order.
#[derive(Debug, Clone)]
pub struct StartTimes {
    last: Instant,
    /// (step, time it took).
    pub steps: Vec<(String, Duration)>,
    /// With [`ENV`] set: (program, time the kernel's verifier took on it), in load order.
    pub verifier: Vec<(String, Duration)>,
}

impl Default for StartTimes {
    fn default() -> Self {
        Self::begin()
    }
}

impl StartTimes {
    /// Start timing now.
    pub fn begin() -> Self {
        StartTimes { last: Instant::now(), steps: Vec::new(), verifier: Vec::new() }
    }

    /// The step `name` ended now (it began where the last one ended).
    pub fn step(&mut self, name: &str) {
        let now = Instant::now();
        self.steps.push((name.to_string(), now - self.last));
        self.last = now;
    }

    /// Append another start's steps (the probes' within a session's).
    pub fn extend(&mut self, other: &StartTimes) {
        self.steps.extend(other.steps.iter().cloned());
        self.verifier.extend(other.verifier.iter().cloned());
        self.last = Instant::now();
    }

    /// The sum of the steps.
    pub fn total(&self) -> Duration {
        self.steps.iter().map(|s| s.1).sum()
    }

    /// One line per step (`  12.3 ms  loading ...`), then the verifier's time per program.
    pub fn describe(&self) -> String {
        let ms = |d: &Duration| d.as_secs_f64() * 1e3;
        let mut s = String::new();
        for (name, d) in &self.steps {
            s.push_str(&format!("{:8.1} ms  {name}\n", ms(d)));
        }
        s.push_str(&format!("{:8.1} ms  total\n", ms(&self.total())));
        for (name, d) in &self.verifier {
            s.push_str(&format!("{:8.1} ms    verifier: {name}\n", ms(d)));
        }
        s
    }
}

/// The verifier's log lines libbpf hands to its print callback while a load runs.
static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn capture(level: libbpf_rs::PrintLevel, msg: String) {
    if msg.contains("PROG LOAD LOG") {
        LOG.lock().unwrap_or_else(|e| e.into_inner()).push(msg);
    } else if level == libbpf_rs::PrintLevel::Warn {
        // What libbpf would have printed anyway.
        eprint!("{msg}");
    }
}

/// Capture of the verifier's statistics while one load runs (only with [`ENV`] set).
pub struct VerifierLog {
    previous: Option<(libbpf_rs::PrintLevel, libbpf_rs::PrintCallback)>,
}

impl VerifierLog {
    /// With [`ENV`] set: ask for the statistics log of each program about to load and capture
    /// what libbpf prints of it; `None` otherwise.
    pub fn install<'a>(progs: impl Iterator<Item = libbpf_rs::OpenProgramMut<'a>>) -> Option<VerifierLog> {
        if !wanted() {
            return None;
        }
        for mut p in progs {
            // BPF_LOG_STATS: the verifier's totals, no per-instruction trace.
            p.set_log_level(4);
        }
        LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let previous = libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, capture)));
        Some(VerifierLog { previous })
    }

    /// Stop capturing: (program, verification time) of each program loaded.
    pub fn finish(self) -> Vec<(String, Duration)> {
        libbpf_rs::set_print(self.previous);
        let logs = std::mem::take(&mut *LOG.lock().unwrap_or_else(|e| e.into_inner()));
        logs.iter().filter_map(|m| parse(m)).collect()
    }
}

/// `prog 'NAME': -- BEGIN PROG LOAD LOG -- ... verification time N usec ...`.
/// The program is named with the verifier's counts (`processed N insns ... peak_states N`).
fn parse(msg: &str) -> Option<(String, Duration)> {
    let name = msg.split_once("prog '")?.1.split_once('\'')?.0;
    let us = msg.split_once("verification time ")?.1.split_whitespace().next()?.parse().ok()?;
    let counts = msg.lines().find_map(|l| l.strip_prefix("processed ")).map(|c| c.replace(" (limit 1000000)", ""));
    let name = match counts {
        Some(c) => format!("{name} (processed {c})"),
        None => name.to_string(),
    };
    Some((name, Duration::from_micros(us)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_log_gives_the_program_and_its_verification_time() {
        let m = "libbpf: prog 'ls_sys_exit': -- BEGIN PROG LOAD LOG --\nverification time 1234 usec\n\
                 stack depth 312\nprocessed 73730 insns\n-- END PROG LOAD LOG --\n";
        let want = "ls_sys_exit (processed 73730 insns)".to_string();
        assert_eq!(parse(m), Some((want, Duration::from_micros(1234))));
        assert_eq!(parse("libbpf: prog 'x': -- BEGIN PROG LOAD LOG --\n-- END"), None);
    }

    #[test]
    fn steps_sum_to_the_total() {
        let mut t = StartTimes::begin();
        t.step("a");
        t.step("b");
        assert_eq!(t.total(), t.steps[0].1 + t.steps[1].1);
        assert!(t.describe().contains("total"));
    }
}

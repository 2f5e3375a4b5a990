//! A user's command, timed from start to exit.

use crate::clock::monotonic_ns;
use crate::error::ProbeError;
use crate::probe::{Probe, ProbeInfo, Unit};
use latscope_hist::Histogram;
use std::process::{Command, Stdio};

/// `sh -c COMMAND` with no input and its output discarded; each sample is its wall time.
pub(crate) struct CommandProbe {
    info: ProbeInfo,
    command: String,
    failures: u64,
}

impl CommandProbe {
    pub(crate) fn new(name: &str, command: &str) -> CommandProbe {
        let info = ProbeInfo::new(name, "command", Unit::Nanoseconds, format!("wall time of `sh -c '{command}'`"))
            .with("command", command);
        CommandProbe { info, command: command.to_string(), failures: 0 }
    }
}

impl Probe for CommandProbe {
    fn info(&self) -> &ProbeInfo {
        &self.info
    }

    fn sample(&mut self, h: &mut Histogram, n: u64) -> Result<u64, ProbeError> {
        for _ in 0..n {
            let t0 = monotonic_ns();
            let status = Command::new("sh")
                .arg("-c")
                .arg(&self.command)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let t1 = monotonic_ns();
            let status = status.map_err(|e| ProbeError::Io {
                probe: self.info.name.clone(),
                op: "cannot run".into(),
                path: "sh".into(),
                source: e,
            })?;
            if !status.success() {
                self.failures += 1;
            }
            h.record_interval(t0, t1);
        }
        Ok(n)
    }

    fn failures(&self) -> u64 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_timed_and_failures_counted() {
        let mut h = Histogram::new();
        let mut ok = CommandProbe::new("c", "sleep 0.01");
        ok.sample(&mut h, 2).unwrap();
        assert_eq!((h.count(), ok.failures()), (2, 0));
        assert!(h.min().unwrap() >= 10_000_000, "a 10 ms sleep measured {:?} ns", h.min());
        let mut bad = CommandProbe::new("c", "exit 3");
        bad.sample(&mut h, 3).unwrap();
        assert_eq!((h.count(), bad.failures()), (5, 3));
    }
}

//! Probe sets shared by series: the series whose filters the kernel applies exactly and that
//! have the same process filter and minimum latency count on one set of probes
//! ([`latscope_live::SharedCounter`]); the others run probes of their own.

use std::collections::HashMap;

use latscope_filter::Filter;
use latscope_live::{plan_sharing, CountBy, CountSpec, SharedCounter, ViewAggregates};

use crate::config::{By, SeriesConfig};

/// How the kernel groups a series' latencies, or `None` when only user space can (by process).
pub(crate) fn count_by(by: By) -> Option<CountBy> {
    match by {
        By::All => Some(CountBy::All),
        By::Disk => Some(CountBy::Disk),
        By::Syscall => Some(CountBy::Syscall),
        By::Class => Some(CountBy::Class),
        By::Proc | By::Container | By::Pod | By::Cgroup => None,
    }
}

fn spec(s: &SeriesConfig) -> Option<CountSpec> {
    Some(CountSpec { filter: Filter::parse(&s.filter).unwrap_or_default(), kind: s.kind, by: count_by(s.by)? })
}

/// Which series share probe sets (each inner list shares one, in configuration order) and which
/// run probes of their own, with why.
pub(crate) fn plan(series: &[SeriesConfig]) -> (Vec<Vec<SeriesConfig>>, Vec<(String, String)>) {
    let mut specs = Vec::new();
    let mut index = Vec::new();
    let mut alone = Vec::new();
    for s in series {
        match spec(s) {
            Some(c) => {
                specs.push(c);
                index.push(s);
            }
            None => alone.push((s.name.clone(), "grouping by process is done in user space".to_string())),
        }
    }
    let (sets, unshared) = plan_sharing(&specs, &latscope_probe::snapshot::block_devices());
    alone.extend(unshared.into_iter().map(|(i, why)| (index[i].name.clone(), why)));
    (sets.into_iter().map(|m| m.into_iter().map(|i| index[i].clone()).collect()).collect(), alone)
}

/// A probe set and the series it counts for.
pub(crate) struct ProbeSet {
    /// The series, in the order of the counts [`ProbeSet::read`] returns.
    pub members: Vec<SeriesConfig>,
    counter: Option<SharedCounter>,
    /// Restarts after a failure.
    pub restarts: u64,
    /// Probe CPU time of counters that ended, ns.
    cpu_base: u64,
}

impl ProbeSet {
    /// Starts the probes of `members` (series [`plan`] put in one set).
    pub fn start(members: Vec<SeriesConfig>) -> Result<ProbeSet, String> {
        let mut set = ProbeSet { members, counter: None, restarts: 0, cpu_base: 0 };
        set.attach()?;
        Ok(set)
    }

    fn names(&self) -> String {
        self.members.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    fn attach(&mut self) -> Result<(), String> {
        let specs: Vec<CountSpec> = self.members.iter().filter_map(spec).collect();
        let c = SharedCounter::start(&specs).map_err(|e| format!("series {}: {e}", self.names()))?;
        self.counter = Some(c);
        Ok(())
    }

    /// Whether a member groups by disk (the probes have a group per disk known at their start).
    pub fn counts_by_disk(&self) -> bool {
        self.members.iter().any(|m| m.by == By::Disk)
    }

    /// Replaces the probes by `fresh`'s (the same members, started anew), keeping the restart
    /// count and the CPU time so far.
    pub fn take_over(&mut self, mut fresh: ProbeSet) {
        self.cpu_base += self.counter.take().map_or(0, |c| c.probe_run_time_ns());
        self.counter = fresh.counter.take();
    }

    /// Starts the probes again after a failure.
    pub fn restart(&mut self) -> Result<(), String> {
        self.attach()?;
        self.restarts += 1;
        Ok(())
    }

    pub fn is_running(&self) -> bool {
        self.counter.is_some()
    }

    /// Cumulative aggregates of the running probes, per member.
    pub fn read(&self) -> Result<Vec<ViewAggregates>, String> {
        let c = self.counter.as_ref().ok_or_else(|| format!("series {}: probes not running", self.names()))?;
        c.read_aggregates().map_err(|e| format!("series {}: reading the in-kernel counts: {e}", self.names()))
    }

    /// Ends the probes after an error; [`ProbeSet::restart`] starts them again.
    pub fn fail(&mut self) {
        if let Some(c) = self.counter.take() {
            self.cpu_base += c.probe_run_time_ns();
        }
    }

    /// CPU time of the probes in the kernel, ns, all counters so far.
    pub fn cpu_ns(&self) -> u64 {
        self.cpu_base + self.counter.as_ref().map_or(0, |c| c.probe_run_time_ns())
    }

    /// Disk names by device number.
    pub fn disks(&self) -> HashMap<u32, String> {
        self.counter
            .as_ref()
            .map_or_else(HashMap::new, |c| c.devices().iter().map(|d| (d.dev, d.name.clone())).collect())
    }
}

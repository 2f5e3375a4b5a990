//! The agent: series running, metrics refreshed every interval, served and pushed; reloads.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use latscope_event::EventKind;
use latscope_export::graphite::{metric_path, GraphiteClient, GraphiteOptions, GraphiteStats};
use latscope_export::prometheus::{names, ExpositionServer, HistogramOptions, Metrics, SharedMetrics};
use latscope_export::ExportError;
use latscope_hist::Histogram;

use crate::config::{AgentConfig, By, GraphiteConfig, SeriesConfig};
use crate::groups::{Extras, Group};
use crate::otlp::OtlpPush;
use crate::recorders::RecorderRun;
use crate::series::SeriesRun;
use crate::sets::{self, ProbeSet};

/// How often streaming series are read between refreshes.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// Why the agent could not start (or apply a configuration).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The configuration is unusable.
    #[error(transparent)]
    Config(#[from] crate::ConfigError),
    /// A series' probes could not be started (the message names the series).
    #[error("{0}")]
    Series(String),
    /// The metrics server or the Graphite client could not be set up.
    #[error(transparent)]
    Export(#[from] ExportError),
}

/// What a reload changed, by series name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadSummary {
    /// Unchanged series: still running, their counts kept.
    pub kept: Vec<String>,
    /// New or changed series: started (a changed series starts from zero).
    pub started: Vec<String>,
    /// Series no longer in the configuration: stopped, their metrics gone.
    pub stopped: Vec<String>,
}

/// A running agent (see the crate documentation).
pub struct Agent {
    cfg: AgentConfig,
    series: Vec<SeriesRun>,
    /// Probe sets shared by series (see [`crate::sets`]).
    sets: Vec<ProbeSet>,
    /// Series with probes of their own, and why.
    own: Vec<(String, String)>,
    shared: SharedMetrics,
    server: Option<ExpositionServer>,
    graphite: Option<(GraphiteConfig, GraphiteClient)>,
    /// OpenTelemetry push, if configured.
    otlp: Option<OtlpPush>,
    /// What earlier OTLP clients (before reloads) did: the counters go on from there.
    otlp_before: latscope_export::otlp::OtlpStats,
    /// Keeps the kernel's BPF run-time statistics on while the agent runs.
    run_time_stats: Option<OwnedFd>,
    reloads_ok: u64,
    reloads_failed: u64,
    refreshes: u64,
    /// Block devices (numbers, sorted) when the probes last learnt them.
    disks_seen: Vec<u32>,
    /// The flight recorders.
    recorders: Vec<RecorderRun>,
    /// The socket `latscope trigger` fires the recorders' triggers through, and why there is
    /// none when it could not be made.
    control: Result<latscope_flight::ControlServer, String>,
}

/// The numbers of `disks`, sorted.
fn disk_numbers(disks: &[latscope_event::BlockDevice]) -> Vec<u32> {
    let mut v: Vec<u32> = disks.iter().map(|d| d.dev).collect();
    v.sort_unstable();
    v
}

fn graphite_client(g: &GraphiteConfig) -> Result<GraphiteClient, ExportError> {
    GraphiteClient::new(&g.address, GraphiteOptions::default())
}

impl Agent {
    /// Starts every series' probes, the `/metrics` server and the Graphite client. Fails when a
    /// series cannot start (no BPF, no root, a filter that leaves nothing to trace).
    pub fn start(cfg: AgentConfig) -> Result<Agent, AgentError> {
        let intervals = cfg.graphite.is_some();
        // Before the probes start: a disk that appears meanwhile is seen at the first refresh.
        let disks_seen = disk_numbers(&latscope_probe::snapshot::block_devices());
        let (plan, own) = sets::plan(&cfg.series);
        let mut probe_sets = Vec::with_capacity(plan.len());
        for members in plan {
            probe_sets.push(ProbeSet::start(members).map_err(AgentError::Series)?);
        }
        let mut series = Vec::with_capacity(cfg.series.len());
        for s in &cfg.series {
            let mut run = SeriesRun::new(s.clone(), intervals);
            if !probe_sets.iter().any(|p| p.members.iter().any(|m| m.name == s.name)) {
                run.start().map_err(AgentError::Series)?;
            }
            series.push(run);
        }
        for set in &probe_sets {
            adopt(set, &mut series);
        }
        let mut recorders = Vec::with_capacity(cfg.recorders.len());
        for r in &cfg.recorders {
            let mut run = RecorderRun::new(r.clone());
            run.start().map_err(AgentError::Series)?;
            recorders.push(run);
        }
        let control = if recorders.is_empty() {
            Err("no recorder".to_string())
        } else {
            latscope_flight::ControlServer::start(None, "agent")
        };
        let shared = SharedMetrics::default();
        let server = ExpositionServer::start(cfg.listen, shared.clone())?;
        let graphite = match &cfg.graphite {
            Some(g) => Some((g.clone(), graphite_client(g)?)),
            None => None,
        };
        let otlp = cfg.otlp.clone().map(|o| OtlpPush::new(o, cfg.interval));
        let mut agent = Agent {
            otlp,
            otlp_before: Default::default(),
            run_time_stats: if cfg.probe_cpu { latscope_probe::enable_run_time_stats().ok() } else { None },
            cfg,
            series,
            sets: probe_sets,
            own,
            shared,
            server: Some(server),
            graphite,
            reloads_ok: 0,
            reloads_failed: 0,
            refreshes: 0,
            disks_seen,
            recorders,
            control,
        };
        agent.hand_recorders();
        agent.publish();
        Ok(agent)
    }

    /// The configuration in force.
    pub fn config(&self) -> &AgentConfig {
        &self.cfg
    }

    /// The address `/metrics` is served on.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(|s| s.local_addr())
    }

    /// The metrics as the last refresh left them.
    pub fn metrics(&self) -> std::sync::Arc<Metrics> {
        self.shared.get()
    }

    /// Why each series that streams events does not count in the kernel: (series, reason).
    pub fn streaming(&self) -> Vec<(String, String)> {
        self.series.iter().filter_map(|s| s.streaming_reason.clone().map(|r| (s.cfg.name.clone(), r))).collect()
    }

    /// The series that share probes: one list per probe set (each set's probes run once per
    /// event, whatever the number of its series).
    pub fn probe_sets(&self) -> Vec<Vec<String>> {
        self.sets.iter().map(|p| p.members.iter().map(|m| m.name.clone()).collect()).collect()
    }

    /// The series that run probes of their own, and why they do not share: (series, reason).
    pub fn own_probes(&self) -> Vec<(String, String)> {
        self.own.clone()
    }

    /// The socket `latscope trigger` fires the recorders' triggers through, or why there is
    /// none.
    pub fn trigger_socket(&self) -> Result<&std::path::Path, &str> {
        self.control.as_ref().map(|c| c.path()).map_err(String::as_str)
    }

    /// What the flight recorders said since the last call (triggers fired, dumps written,
    /// failed, deleted), one line each.
    pub fn recorder_log(&mut self) -> Vec<String> {
        self.recorders.iter().flat_map(|r| r.take_log()).collect()
    }

    /// The flight recorders' counters, by name.
    pub fn recorder_stats(&self) -> Vec<(String, latscope_flight::FlightStats)> {
        self.recorders.iter().map(|r| (r.cfg.name.clone(), r.stats())).collect()
    }

    /// Give the trigger socket the running recorders' handles.
    fn hand_recorders(&self) {
        if let Ok(c) = &self.control {
            c.set(self.recorders.iter().filter_map(RecorderRun::handle).collect());
        }
    }

    /// Reads the events of streaming series (call often: their ring buffers are bounded).
    pub fn poll(&mut self) {
        for s in &mut self.series {
            s.poll();
        }
    }

    /// Reads the counts, restarts series whose probes failed, refreshes `/metrics` and pushes
    /// the interval to Graphite. Returns what went wrong, one line per problem.
    pub fn refresh(&mut self) -> Vec<String> {
        // Every event that completed before the refresh began is counted in it: a streaming
        // series' probes hand events on only once they are this old.
        let complete = Instant::now() + latscope_probe::HANDOFF_DELAY;
        let mut problems = self.follow_disks();
        for set in &mut self.sets {
            if !set.is_running() {
                match set.restart() {
                    Ok(()) => {
                        adopt(set, &mut self.series);
                        for s in self.series.iter_mut().filter(|s| set.members.iter().any(|m| m.name == s.cfg.name)) {
                            s.restarts += 1;
                            problems.push(format!("series {}: probes restarted", s.cfg.name));
                        }
                    }
                    Err(e) => {
                        problems.push(format!("{e} (retrying next interval)"));
                        continue;
                    }
                }
            }
            match set.read() {
                Ok(counts) => {
                    for (m, c) in set.members.iter().zip(counts) {
                        if let Some(s) = self.series.iter_mut().find(|s| s.cfg.name == m.name) {
                            s.add_counts(c);
                        }
                    }
                }
                Err(e) => {
                    set.fail();
                    problems.push(e);
                }
            }
            let share = set.cpu_ns() / set.members.len().max(1) as u64;
            for s in self.series.iter_mut().filter(|s| set.members.iter().any(|m| m.name == s.cfg.name)) {
                s.shared_cpu_ns = share;
            }
        }
        if self.series.iter().any(|s| s.is_running() && !s.is_counting()) {
            std::thread::sleep(complete.saturating_duration_since(Instant::now()));
        }
        for s in &mut self.series {
            if !s.is_running() {
                match s.start() {
                    Ok(()) => problems.push(format!("series {}: probes restarted", s.cfg.name)),
                    Err(e) => problems.push(format!("{e} (retrying next interval)")),
                }
            }
            s.refresh();
            if let Some(e) = s.last_error.take() {
                problems.push(e);
            }
        }
        let mut restarted = false;
        for r in &mut self.recorders {
            if let Some(why) = r.reap() {
                problems.push(why);
            }
            if !r.is_running() {
                match r.start() {
                    Ok(()) => {
                        r.restarts += 1;
                        restarted = true;
                        problems.push(format!("recorder {}: restarted", r.cfg.name));
                    }
                    Err(e) => problems.push(format!("{e} (retrying next interval)")),
                }
            }
        }
        if restarted {
            self.hand_recorders();
        }
        self.refreshes += 1;
        self.publish();
        self.push_graphite();
        problems.extend(self.push_otlp(false));
        problems
    }

    /// Queues the series' counts for the OTLP collector when a push is due (or `force`d); the
    /// client's lines worth logging.
    fn push_otlp(&mut self, force: bool) -> Vec<String> {
        let host = self.cfg.host.as_str();
        self.otlp.as_mut().map_or_else(Vec::new, |o| o.after_refresh(host, &self.series, force))
    }

    /// What the OTLP push has done, when configured.
    pub fn otlp_stats(&self) -> Option<latscope_export::otlp::OtlpStats> {
        self.otlp.as_ref().map(|o| {
            let mut st = o.stats();
            st.sent += self.otlp_before.sent;
            st.replaced += self.otlp_before.replaced;
            for (k, n) in &self.otlp_before.errors {
                *st.errors.entry(k).or_default() += n;
            }
            st
        })
    }

    /// When block devices appeared or went away since the probes learnt them: starts the probes
    /// of series grouped by disk again, so that a new disk gets a group (and a label) of its own
    /// rather than falling outside them. Their counts are kept. Returns what happened, one line
    /// per series, and what went wrong.
    fn follow_disks(&mut self) -> Vec<String> {
        let disks = latscope_probe::snapshot::block_devices();
        let now = disk_numbers(&disks);
        if now == self.disks_seen {
            return Vec::new();
        }
        let mut lines = Vec::new();
        let mut all_done = true;
        for set in self.sets.iter_mut().filter(|p| p.counts_by_disk()) {
            let fresh = match ProbeSet::start(set.members.clone()) {
                Ok(f) => f,
                Err(e) => {
                    lines.push(format!("{e} (disks changed; retrying next interval)"));
                    all_done = false;
                    continue;
                }
            };
            // The old probes' last counts, then the new ones' first as the point to count from
            // (both are attached meanwhile).
            if let Ok(counts) = set.read() {
                for (m, c) in set.members.iter().zip(counts) {
                    if let Some(s) = self.series.iter_mut().find(|s| s.cfg == *m) {
                        s.add_counts(c);
                    }
                }
            }
            set.take_over(fresh);
            adopt(set, &mut self.series);
            for m in set.members.iter().filter(|m| m.by == By::Disk) {
                lines.push(format!("series {}: disks changed, probes started again for them", m.name));
            }
        }
        for s in self.series.iter_mut().filter(|s| s.cfg.by == By::Disk && !s.shared && s.is_running()) {
            match s.follow_disks(&disks) {
                Ok(true) => lines.push(format!("series {}: disks changed, probes started again for them", s.cfg.name)),
                Ok(false) => {}
                Err(e) => {
                    lines.push(format!("{e} (disks changed; retrying next interval)"));
                    all_done = false;
                }
            }
        }
        if all_done {
            self.disks_seen = now;
        }
        lines
    }

    /// Rebuilds the metric set from the series.
    ///
    /// Prometheus takes the first sample of a series as its start: counts a series already holds
    /// when first scraped are never in an `increase()`. So every series is published from the
    /// start (a series without a grouping, and the counters, at zero), and a label value that
    /// appears later is published at zero until a scrape has seen it, with its counts after.
    fn publish(&mut self) {
        let host = self.cfg.host.clone();
        let mut m = Metrics::new();
        let opts = HistogramOptions::default();
        let cpu_measured = self.run_time_stats.is_some();
        let scraped = self.shared.scrapes();
        let empty = Histogram::new();
        let mut fresh: Vec<(usize, String)> = Vec::new();
        for (i, s) in self.series.iter().enumerate() {
            let name = s.cfg.name.as_str();
            let family = match s.cfg.kind {
                EventKind::Block => names::BLOCK_LATENCY,
                _ => names::SYSCALL_LATENCY,
            };
            let help = match s.cfg.kind {
                EventKind::Block => "Block request latency (issue to completion), seconds.",
                _ => "Syscall latency (entry to exit), seconds.",
            };
            let mut values: Vec<(&str, Option<&Group>)> = s.groups.iter().map(|(l, g)| (l, Some(g))).collect();
            if s.cfg.by.label().is_none() && values.is_empty() {
                values.push(("", None));
            }
            // The events and folded counters agree with the histograms published.
            let (mut shown, mut other_held) = (0, false);
            for (label, g) in values {
                let mut labels = vec![(names::LABEL_HOST, host.as_str()), (crate::names::LABEL_SERIES, name)];
                if let Some(l) = s.cfg.by.label() {
                    labels.push((l, label));
                }
                let g = match s.exposed.get(label) {
                    Some(&at) if scraped > at => g,
                    Some(_) => None,
                    None => {
                        fresh.push((i, label.to_string()));
                        None
                    }
                };
                let h = g.map_or(&empty, |g| &g.total);
                shown += h.count();
                other_held |= label == crate::config::OTHER && h.is_empty();
                // Names and labels are checked by the configuration; a failure here is a bug.
                let _ = m.histogram(family, help, &labels, h, &opts, Some(s.created));
                publish_extras(&mut m, s, &labels, g.map(|g| &g.extras), &empty);
            }
            let l = [(names::LABEL_HOST, host.as_str()), (crate::names::LABEL_SERIES, name)];
            let _ = m.counter(crate::names::EVENTS, "Events counted, all label values.", &l, shown as f64);
            let _ = m.counter(
                crate::names::FOLDED,
                "Events counted under the label value `other` because the series reached its max_labels.",
                &l,
                if other_held { 0.0 } else { s.groups.folded() as f64 },
            );
            let _ = m.gauge(
                crate::names::LABEL_VALUES,
                "Label values the series exposes a histogram for, `other` included (at most max_labels + 1).",
                &l,
                s.groups.values() as f64,
            );
            let _ = m.gauge(
                crate::names::PROBE_SET_SERIES,
                "Series counted by the probes this series uses (1: probes of its own).",
                &l,
                s.set_size as f64,
            );
            let _ = m.counter(names::LOST_EVENTS, "Events the probes lost (ring buffer full).", &l, s.lost() as f64);
            // Only when measured: a counter stuck at 0 would read as "free".
            if cpu_measured {
                let _ = m.counter(
                    crate::names::PROBE_CPU,
                    "CPU time the series' eBPF programs ran in the kernel, seconds.",
                    &l,
                    s.cpu_ns() as f64 * 1e-9,
                );
            }
            let _ = m.counter(
                crate::names::RESTARTS,
                "Times the series' probes were restarted after a failure.",
                &l,
                s.restarts as f64,
            );
            let _ = m.gauge(
                crate::names::IN_KERNEL,
                "1 when the series counts in the kernel, 0 when it streams events to user space.",
                &l,
                if s.is_counting() { 1.0 } else { 0.0 },
            );
        }
        let h = [(names::LABEL_HOST, host.as_str())];
        for (result, n) in [("ok", self.reloads_ok), ("failed", self.reloads_failed)] {
            let _ = m.counter(
                crate::names::RELOADS,
                "Configuration reloads (SIGHUP), by result.",
                &[(names::LABEL_HOST, host.as_str()), ("result", result)],
                n as f64,
            );
        }
        let _ =
            m.counter(crate::names::REFRESHES, "Intervals the agent has read its series.", &h, self.refreshes as f64);
        if let Some(st) = self.otlp_stats() {
            let _ = m.counter(
                crate::names::OTLP_PUSHES,
                "Pushes the OpenTelemetry collector accepted.",
                &h,
                st.sent as f64,
            );
            for kind in latscope_export::otlp::ERROR_KINDS {
                let _ = m.counter(
                    crate::names::OTLP_ERRORS,
                    "Pushes to the OpenTelemetry collector that failed, by kind.",
                    &[(names::LABEL_HOST, host.as_str()), ("kind", kind)],
                    st.errors.get(kind).copied().unwrap_or(0) as f64,
                );
            }
        }
        self.publish_recorders(&mut m, &host);
        self.shared.set(m);
        // Scrapes counted from here on saw the new values at zero.
        let now = self.shared.scrapes();
        for (i, label) in fresh {
            self.series[i].exposed.insert(label, now);
        }
    }

    /// Pushes each series' interval (all values merged, then per value) to Graphite.
    /// The flight recorders' counters and gauges, labelled `host`, `recorder`.
    fn publish_recorders(&self, m: &mut Metrics, host: &str) {
        use crate::names as n;
        for r in &self.recorders {
            let s = r.stats();
            let l = [(names::LABEL_HOST, host), (n::LABEL_RECORDER, r.cfg.name.as_str())];
            let counters: [(&str, &str, u64); 8] = [
                (n::FLIGHT_FIRED, "Triggers of the flight recorder fired.", s.fired),
                (n::FLIGHT_DUMPS, "Dumps the flight recorder wrote (complete files).", s.dumps),
                (n::FLIGHT_DUMP_BYTES, "Bytes of the dumps written.", s.bytes_written),
                (n::FLIGHT_SUPPRESSED, "Triggers that wrote nothing (no disk space).", s.suppressed),
                (n::FLIGHT_FAILED, "Dumps that stopped on an error (a full disk).", s.failed),
                (n::FLIGHT_DELETED, "Old dumps deleted (keep, disk_budget).", s.deleted),
                (n::FLIGHT_EVENTS, "Events that went through the ring.", s.events),
                (n::FLIGHT_RESTARTS, "Restarts of the recorder after a failure.", r.restarts),
            ];
            for (name, help, v) in counters {
                let _ = m.counter(name, help, &l, v as f64);
            }
            let _ = m.gauge(n::FLIGHT_KEPT, "Dumps in the recorder's directory.", &l, r.dumps_kept() as f64);
            let _ = m.gauge(n::FLIGHT_RING_BYTES, "Memory the ring's blocks take, bytes.", &l, s.ring_bytes as f64);
            let _ =
                m.gauge(n::FLIGHT_RING_SECONDS, "The time the ring covers, seconds.", &l, s.ring_span_ns as f64 * 1e-9);
        }
    }

    fn push_graphite(&mut self) {
        let Some((g, client)) = &self.graphite else { return };
        let ts = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        for s in &mut self.series {
            let interval = s.groups.take_interval();
            let mut all = Histogram::new();
            for (_, h) in &interval {
                all.merge(h);
            }
            client.send_histogram(&metric_path(&[g.prefix.as_str(), &self.cfg.host, &s.cfg.name]), &all, ts);
            if s.cfg.by.label().is_some() {
                for (label, h) in &interval {
                    client.send_histogram(
                        &metric_path(&[g.prefix.as_str(), &self.cfg.host, &s.cfg.name, label]),
                        h,
                        ts,
                    );
                }
            }
        }
    }

    /// Applies a new configuration: unchanged series keep running with their counts; changed and
    /// new ones start (from zero); removed ones stop. The listen address and Graphite target
    /// change when they differ. On error nothing changes (the old configuration stays in force).
    pub fn reload(&mut self, cfg: AgentConfig) -> Result<ReloadSummary, AgentError> {
        let r = self.try_reload(cfg);
        match &r {
            Ok(_) => self.reloads_ok += 1,
            Err(_) => self.reloads_failed += 1,
        }
        self.publish();
        r
    }

    fn try_reload(&mut self, cfg: AgentConfig) -> Result<ReloadSummary, AgentError> {
        let intervals = cfg.graphite.is_some();
        let server = if cfg.listen != self.cfg.listen {
            Some(ExpositionServer::start(cfg.listen, self.shared.clone())?)
        } else {
            None
        };
        let graphite = match (&cfg.graphite, &self.graphite) {
            (Some(new), Some((old, _))) if new == old => None,
            (Some(new), _) => Some(Some((new.clone(), graphite_client(new)?))),
            (None, _) => Some(None),
        };
        // Start the new probe sets and the new and changed series' own probes before stopping
        // anything, so that a failure leaves the running configuration as it was. Sets whose
        // series are all the same keep running.
        // New and changed recorders start first: one that cannot start changes nothing.
        let mut new_recorders = Vec::new();
        for r in cfg.recorders.iter().filter(|r| !self.recorders.iter().any(|x| x.cfg == **r)) {
            let mut run = RecorderRun::new(r.clone());
            run.start().map_err(AgentError::Series)?;
            new_recorders.push(run);
        }
        let (plan, own) = sets::plan(&cfg.series);
        let mut kept_sets = Vec::new();
        let mut new_sets = Vec::new();
        for members in plan {
            match self.sets.iter().position(|p| p.members == members) {
                Some(i) => kept_sets.push(i),
                None => new_sets.push(ProbeSet::start(members).map_err(AgentError::Series)?),
            }
        }
        let in_set = |s: &SeriesConfig| own.iter().all(|(n, _)| *n != s.name);
        let mut started = Vec::new();
        for s in &cfg.series {
            let kept = self.series.iter().any(|r| r.cfg == *s);
            let mut run = SeriesRun::new(s.clone(), intervals);
            if !in_set(s) && !self.series.iter().any(|r| r.cfg == *s && !r.shared) {
                run.start().map_err(AgentError::Series)?;
                started.push(run);
            } else if !kept {
                started.push(run);
            }
        }
        // Kept series moving to new probes: the old probes' last counts, then the new ones'
        // first as the point to count from (both sets are attached meanwhile).
        for set in self.sets.iter_mut().enumerate().filter(|(i, _)| !kept_sets.contains(i)).map(|(_, p)| p) {
            if let Ok(counts) = set.read() {
                for (m, c) in set.members.iter().zip(counts) {
                    if let Some(s) = self.series.iter_mut().find(|s| s.cfg == *m) {
                        s.add_counts(c);
                    }
                }
            }
        }
        let mut summary = ReloadSummary::default();
        let mut old: Vec<SeriesRun> = std::mem::take(&mut self.series);
        for s in &cfg.series {
            // A series with probes of its own now (a new one, or one leaving a set) has a run
            // started above; the histograms of a kept one stay.
            let fresh = started.iter().position(|r| r.cfg == *s).map(|i| started.swap_remove(i));
            if let Some(i) = old.iter().position(|r| r.cfg == *s) {
                let mut run = old.swap_remove(i);
                if let Some(f) = fresh {
                    run.adopt_session(f);
                }
                run.groups.set_intervals(intervals);
                summary.kept.push(s.name.clone());
                self.series.push(run);
            } else if let Some(f) = fresh {
                summary.started.push(s.name.clone());
                self.series.push(f);
            }
        }
        let mut sets_now: Vec<ProbeSet> = Vec::new();
        for (i, set) in std::mem::take(&mut self.sets).into_iter().enumerate() {
            if kept_sets.contains(&i) {
                sets_now.push(set);
            }
        }
        for set in &new_sets {
            adopt(set, &mut self.series);
        }
        sets_now.extend(new_sets);
        self.sets = sets_now;
        self.own = own;
        if cfg.probe_cpu != self.cfg.probe_cpu {
            self.run_time_stats = if cfg.probe_cpu { latscope_probe::enable_run_time_stats().ok() } else { None };
        }
        summary.stopped = old.into_iter().map(|r| r.cfg.name).collect();
        let mut recorders = Vec::new();
        for r in std::mem::take(&mut self.recorders) {
            if cfg.recorders.contains(&r.cfg) {
                summary.kept.push(r.cfg.name.clone());
                recorders.push(r);
            } else if !cfg.recorders.iter().any(|x| x.name == r.cfg.name) {
                summary.stopped.push(r.cfg.name.clone());
            }
        }
        for r in new_recorders {
            summary.started.push(r.cfg.name.clone());
            recorders.push(r);
        }
        self.recorders = recorders;
        if self.control.is_err() && !self.recorders.is_empty() {
            self.control = latscope_flight::ControlServer::start(None, "agent");
        }
        self.hand_recorders();
        if let Some(server) = server {
            if let Some(s) = self.server.replace(server) {
                s.stop();
            }
        }
        if let Some(g) = graphite {
            if let Some((_, c)) = std::mem::replace(&mut self.graphite, g) {
                c.close(Duration::from_secs(2));
            }
        }
        let same_otlp = self.otlp.as_ref().map(|o| &o.cfg) == cfg.otlp.as_ref() && cfg.interval == self.cfg.interval;
        if !same_otlp {
            // The old client finishes its request on its own thread; its counts stay.
            if let Some(st) = self.otlp_stats() {
                self.otlp_before = st;
            }
            self.otlp = cfg.otlp.clone().map(|o| OtlpPush::new(o, cfg.interval));
        }
        self.cfg = cfg;
        Ok(summary)
    }

    /// Runs until `stop` is set: polls streaming series, refreshes every interval, and when `hup`
    /// is set applies the configuration `load` returns (a configuration that cannot be loaded or
    /// applied is logged and the old one kept). `log` gets one line per event worth logging.
    pub fn run(
        &mut self,
        load: &mut dyn FnMut() -> Result<AgentConfig, String>,
        stop: &AtomicBool,
        hup: &AtomicBool,
        log: &mut dyn FnMut(&str),
    ) {
        let mut next = Instant::now() + self.cfg.interval;
        while !stop.load(Ordering::Relaxed) {
            if hup.swap(false, Ordering::Relaxed) {
                match load() {
                    Ok(c) => match self.reload(c) {
                        Ok(s) => log(&format!(
                            "configuration reloaded: kept {:?}, started {:?}, stopped {:?}",
                            s.kept, s.started, s.stopped
                        )),
                        Err(e) => log(&format!("reload failed, keeping the running configuration: {e}")),
                    },
                    Err(e) => {
                        self.reloads_failed += 1;
                        self.publish();
                        log(&format!("reload failed, keeping the running configuration: {e}"));
                    }
                }
                next = next.min(Instant::now() + self.cfg.interval);
            }
            self.poll();
            for l in self.recorder_log() {
                log(&l);
            }
            if Instant::now() >= next {
                for p in self.refresh() {
                    log(&p);
                }
                next += self.cfg.interval;
                if next < Instant::now() {
                    next = Instant::now() + self.cfg.interval;
                }
            }
            let left = next.saturating_duration_since(Instant::now());
            std::thread::sleep(POLL_EVERY.min(left).max(Duration::from_millis(1)));
        }
    }

    /// Makes the probes of `series` fail as a failed read does (tests of the restart path).
    #[cfg(test)]
    pub(crate) fn break_probes(&mut self, series: &str) {
        if let Some(set) = self.sets.iter_mut().find(|p| p.members.iter().any(|m| m.name == series)) {
            set.fail();
        } else if let Some(s) = self.series.iter_mut().find(|s| s.cfg.name == series) {
            s.fail(format!("series {series}: probes broken by a test"));
        }
    }

    /// Stops: a last refresh (pushed to the OTLP collector too), the server, and the Graphite
    /// and OTLP clients (waiting up to `flush` for what is queued). Returns what Graphite sent
    /// and dropped.
    pub fn stop(mut self, flush: Duration) -> Option<GraphiteStats> {
        self.refresh();
        self.push_otlp(true);
        if let Some(o) = self.otlp.take() {
            o.close(flush);
        }
        for r in &mut self.recorders {
            r.stop();
        }
        if let Some(s) = self.server.take() {
            s.stop();
        }
        self.graphite.take().map(|(_, c)| c.close(flush))
    }
}

/// The families beside a label value's latency histogram, with its labels (zero when `extras` is
/// `None`: a value not yet seen at zero by a scrape): failed syscalls for syscall series; queue
/// time, size and bytes per operation (label `op`) for block series.
fn publish_extras(m: &mut Metrics, s: &SeriesRun, labels: &[(&str, &str)], extras: Option<&Extras>, empty: &Histogram) {
    if s.cfg.kind != EventKind::Block {
        let errors = extras.map_or(0, |e| e.errors);
        let _ = m.counter(
            names::SYSCALL_ERRORS,
            "Syscalls that failed (returned a negative value).",
            labels,
            errors as f64,
        );
        return;
    }
    for (i, op) in latscope_probe::AGG_OPS.iter().enumerate() {
        let mut l = labels.to_vec();
        l.push((names::LABEL_OP, op));
        let o = extras.and_then(|e| e.ops.get(i));
        let _ = m.histogram(
            names::BLOCK_QUEUE,
            "Block request queue time (insert to issue; 0 when issued directly), seconds.",
            &l,
            o.map_or(empty, |o| &o.queue),
            &HistogramOptions::default(),
            Some(s.created),
        );
        let _ = m.histogram(
            names::BLOCK_SIZE,
            "Block request size, bytes.",
            &l,
            o.map_or(empty, |o| &o.size),
            &HistogramOptions::bytes(),
            Some(s.created),
        );
        let _ = m.counter(names::BLOCK_BYTES, "Bytes moved by block requests.", &l, o.map_or(0, |o| o.bytes) as f64);
    }
}

/// Hands the series of a newly started probe set to it: they count from its first counts on.
fn adopt(set: &ProbeSet, series: &mut [SeriesRun]) {
    let counts = set.read().unwrap_or_default();
    let disks = set.disks();
    for (i, m) in set.members.iter().enumerate() {
        if let Some(s) = series.iter_mut().find(|s| s.cfg == *m) {
            s.use_shared(set.members.len());
            s.disks = disks.clone();
            s.set_baseline(counts.get(i).cloned().unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    use latscope_testkit::require_bpf as can_trace;

    /// A copy of `sleep` under `name`, so a filter on `proc.name` picks out this test's calls.
    fn renamed_sleep(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
        let to = dir.join(name);
        let sleep = Command::new("sh").arg("-c").arg("command -v sleep").output().unwrap();
        std::fs::copy(String::from_utf8_lossy(&sleep.stdout).trim(), &to).unwrap();
        to
    }

    fn events(agent: &Agent, series: &str) -> (u64, u64) {
        let s = agent.series.iter().find(|s| s.cfg.name == series).unwrap();
        (s.groups.events(), s.restarts)
    }

    /// Probes that fail (as a failed read of the counts does) restart on the next interval:
    /// the counts so far are kept, the restart counter rises, and counting goes on, for series
    /// sharing a probe set and for a series with probes of its own.
    #[test]
    fn failed_probes_restart_keeping_their_counts() {
        if !can_trace("failed_probes_restart_keeping_their_counts") {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let sleeper = renamed_sleep(tmp.path(), "lsag_rst");
        let sleeps = |n: usize| {
            for _ in 0..n {
                assert!(Command::new(&sleeper).arg("0.01").status().unwrap().success());
            }
        };
        let cfg = AgentConfig::parse(
            r#"
            listen = "127.0.0.1:0"
            [[series]]
            name = "a"
            filter = "proc.name = lsag_rst and evt.type = clock_nanosleep"
            by = "syscall"
            [[series]]
            name = "b"
            filter = "proc.name = lsag_rst and evt.type = clock_nanosleep"
            [[series]]
            name = "c"
            filter = "proc.name = lsag_rst and evt.type = clock_nanosleep"
            by = "proc"
            "#,
            "agent.toml".as_ref(),
        )
        .unwrap();
        let mut agent = Agent::start(cfg).unwrap();
        assert_eq!(agent.probe_sets(), vec![vec!["a".to_string(), "b".to_string()]]);
        assert_eq!(agent.own_probes().len(), 1);
        sleeps(5);
        agent.refresh();
        for s in ["a", "b", "c"] {
            assert_eq!(events(&agent, s), (5, 0), "{s}");
        }
        agent.break_probes("a");
        agent.break_probes("c");
        let problems = agent.refresh();
        assert_eq!(problems.iter().filter(|p| p.contains("probes restarted")).count(), 3, "{problems:?}");
        for s in ["a", "b", "c"] {
            assert_eq!(events(&agent, s), (5, 1), "{s}: counts kept, one restart");
        }
        sleeps(5);
        agent.refresh();
        for s in ["a", "b", "c"] {
            assert_eq!(events(&agent, s), (10, 1), "{s}: counting goes on");
        }
        let m = agent.metrics();
        let text = String::from_utf8(m.encode(latscope_export::prometheus::Format::OpenMetricsText).unwrap()).unwrap();
        assert!(text.contains("latscope_agent_probe_restarts_total{host="), "{text}");
        assert!(
            text.lines().any(|l| l.starts_with("latscope_agent_probe_restarts_total") && l.ends_with(" 1.0")),
            "{text}"
        );
    }

    /// A refresh counts every event that completed before it began, also in a series that
    /// streams its events (whose probes hand an event on only once it is some ms old): a
    /// process that has exited before the refresh is in it, each time.
    #[test]
    fn a_refresh_counts_every_call_that_ended_before_it() {
        if !can_trace("a_refresh_counts_every_call_that_ended_before_it") {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let sleeper = renamed_sleep(tmp.path(), "lsag_hof");
        let cfg = AgentConfig::parse(
            r#"
            listen = "127.0.0.1:0"
            [[series]]
            name = "p"
            filter = "proc.name = lsag_hof and evt.type = clock_nanosleep"
            by = "proc"
            "#,
            "agent.toml".as_ref(),
        )
        .unwrap();
        let mut agent = Agent::start(cfg).unwrap();
        assert!(!agent.streaming().is_empty(), "grouping by process streams events");
        for k in 1..=8 {
            assert!(Command::new(&sleeper).arg("0.001").status().unwrap().success());
            agent.refresh();
            assert_eq!(events(&agent, "p"), (k, 0), "after {k} runs");
        }
    }

    /// A loop device created (and removed) through /dev/loop-control.
    struct NewLoop(u32);

    impl NewLoop {
        fn attach(backing: &std::path::Path) -> NewLoop {
            let n = (100..).find(|i| !std::path::Path::new(&format!("/sys/class/block/loop{i}")).exists()).unwrap();
            // losetup creates /dev/loopN when it does not exist.
            let ok = Command::new("losetup").arg(format!("/dev/loop{n}")).arg(backing).status().unwrap();
            assert!(ok.success(), "losetup /dev/loop{n}");
            NewLoop(n)
        }

        /// Requests completed (reads and writes), from the disk's own statistics.
        fn requests(&self) -> u64 {
            let stat = std::fs::read_to_string(format!("/sys/class/block/loop{}/stat", self.0)).unwrap();
            let f: Vec<u64> = stat.split_whitespace().map(|v| v.parse().unwrap()).collect();
            f[0] + f[4]
        }
    }

    impl Drop for NewLoop {
        fn drop(&mut self) {
            let _ = Command::new("losetup").arg("-d").arg(format!("/dev/loop{}", self.0)).status();
            // LOOP_CTL_REMOVE: leave the machine's devices as they were.
            if let Ok(ctl) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/loop-control") {
                use std::os::fd::AsRawFd;
                // SAFETY: an ioctl on a file we own, with an integer argument.
                unsafe { libc::ioctl(ctl.as_raw_fd(), 0x4C81, libc::c_ulong::from(self.0)) };
            }
        }
    }

    /// A disk that appears while the agent runs gets a label of its own in series grouped by
    /// disk from the next refresh on, with every request on it counted (the disk's statistics
    /// in /sys are the ground truth); the counts so far are kept and nothing counts as a
    /// failure.
    #[test]
    fn a_disk_added_while_running_gets_a_label_of_its_own() {
        if !can_trace("a_disk_added_while_running_gets_a_label_of_its_own") {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let img = tmp.path().join("disk.img");
        std::fs::File::create(&img).unwrap().set_len(8 << 20).unwrap();
        let cfg = AgentConfig::parse(
            r#"
            listen = "127.0.0.1:0"
            [[series]]
            name = "disks"
            by = "disk"
            [[series]]
            name = "io"
            kind = "block"
            [[series]]
            name = "big"
            filter = "blk.bytes >= 4096"
            by = "disk"
            "#,
            "agent.toml".as_ref(),
        )
        .unwrap();
        let mut agent = Agent::start(cfg).unwrap();
        assert_eq!(agent.probe_sets(), vec![vec!["disks".to_string(), "io".to_string()]]);
        agent.refresh();
        let before = (events(&agent, "disks").0, events(&agent, "io").0);
        let dev = NewLoop::attach(&img);
        let name = format!("loop{}", dev.0);
        let problems = agent.refresh();
        assert!(problems.iter().any(|p| p.contains("series disks: disks changed")), "{problems:?}");
        assert!(!problems.iter().any(|p| p.contains("series io") || p.contains("series big")), "{problems:?}");
        let start = dev.requests();
        let dd = |args: &[&str]| assert!(Command::new("dd").args(args).arg("status=none").status().unwrap().success());
        dd(&["if=/dev/zero", &format!("of=/dev/{name}"), "bs=4096", "count=40", "oflag=direct"]);
        dd(&[&format!("if=/dev/{name}"), "of=/dev/null", "bs=4096", "count=30", "iflag=direct"]);
        agent.refresh();
        let done = dev.requests() - start;
        assert!(done >= 70, "{done} requests");
        let s = agent.series.iter().find(|s| s.cfg.name == "disks").unwrap();
        let on_it = s.groups.iter().find(|(l, _)| *l == name).map_or(0, |(_, g)| g.total.count());
        assert_eq!(on_it, done, "requests on {name}");
        // A series streaming its events (the kernel cannot test sizes) sees the disk anyway and
        // now knows its name.
        let s = agent.series.iter().find(|s| s.cfg.name == "big").unwrap();
        assert!(s.streaming_reason.is_some());
        let on_it = s.groups.iter().find(|(l, _)| *l == name).map_or(0, |(_, g)| g.total.count());
        assert_eq!(on_it, done, "requests on {name}, streamed: {:?}", s.groups.iter().map(|g| g.0).collect::<Vec<_>>());
        let after = (events(&agent, "disks"), events(&agent, "io"));
        assert!(after.0 .0 >= before.0 + done, "counts kept: {before:?} -> {after:?}");
        assert!(after.1 .0 >= before.1 + done, "{before:?} -> {after:?}");
        assert_eq!((after.0 .1, after.1 .1), (0, 0), "no restart counted as a failure");
    }

    /// The probe CPU counter is there, and rising, with `probe_cpu = true`; without it the
    /// counter is absent rather than a misleading 0.
    #[test]
    fn probe_cpu_is_exposed_only_when_measured() {
        if !can_trace("probe_cpu_is_exposed_only_when_measured") {
            return;
        }
        for on in [true, false] {
            let cfg = AgentConfig::parse(
                &format!(
                    r#"
                    listen = "127.0.0.1:0"
                    probe_cpu = {on}
                    [[series]]
                    name = "all"
                    "#
                ),
                "agent.toml".as_ref(),
            )
            .unwrap();
            let mut agent = Agent::start(cfg).unwrap();
            for _ in 0..2000 {
                let _ = std::fs::metadata("/");
            }
            agent.refresh();
            let text = String::from_utf8(
                agent.metrics().encode(latscope_export::prometheus::Format::OpenMetricsText).unwrap(),
            )
            .unwrap();
            let line = text.lines().find(|l| l.starts_with("latscope_agent_probe_cpu_seconds_total{"));
            if on {
                let v: f64 = line.expect("counter exposed").rsplit(' ').next().unwrap().parse().unwrap();
                assert!(v > 0.0, "{text}");
            } else {
                assert!(line.is_none(), "{text}");
            }
        }
    }

    #[test]
    fn a_recorder_dumps_when_fired_keeps_its_dumps_and_metrics_count_them() {
        if !can_trace("a_recorder_dumps_when_fired_keeps_its_dumps_and_metrics_count_them") {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pg");
        let cfg = AgentConfig::parse(
            &format!(
                r#"
                listen = "127.0.0.1:0"
                [[recorder]]
                name = "pg"
                dir = "{}"
                ring = "5s"
                filter = "proc.name = lsag_none"
                triggers = ["now: manual"]
                after = "200ms"
                min_gap = "0s"
                keep = 2
                "#,
                dir.display()
            ),
            "agent.toml".as_ref(),
        )
        .unwrap();
        let mut agent = Agent::start(cfg).unwrap();
        assert!(dir.is_dir(), "the directory is made");
        for n in 1..=3u64 {
            let o = agent.recorders[0].fire("now").unwrap();
            assert!(matches!(o, latscope_flight::Outcome::Dumping(_)), "{o}");
            let t = Instant::now();
            while agent.recorder_stats()[0].1.dumps < n {
                assert!(t.elapsed() < Duration::from_secs(20), "dump {n} not written");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // The oldest dump goes once the third is complete: said just after it is counted (the
        // log is taken, so it is gathered).
        let t = Instant::now();
        let mut log = agent.recorder_log();
        while !log.iter().any(|l| l.contains("--keep 2")) && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
            log.extend(agent.recorder_log());
        }
        assert!(log.iter().any(|l| l.starts_with("recorder pg: trigger now fired")), "{log:?}");
        assert!(log.iter().any(|l| l.contains("--keep 2")), "the oldest goes: {log:?}");
        agent.refresh();
        let text =
            String::from_utf8(agent.metrics().encode(latscope_export::prometheus::Format::OpenMetricsText).unwrap())
                .unwrap();
        let value = |name: &str| -> Option<f64> {
            text.lines()
                .find(|l| l.starts_with(name) && l.contains("recorder=\"pg\""))
                .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        };
        assert_eq!(value("latscope_agent_flight_dumps_total"), Some(3.0), "{text}");
        assert_eq!(value("latscope_agent_flight_dumps_kept"), Some(2.0), "{text}");
        assert_eq!(value("latscope_agent_flight_dumps_deleted_total"), Some(1.0), "{text}");
        assert!(value("latscope_agent_flight_ring_bytes").is_some());
        // `latscope trigger pg/now` reaches it through the agent's socket.
        let sock = agent.trigger_socket().unwrap().to_path_buf();
        let v = latscope_flight::control::ask(&sock, "fire pg/now").unwrap();
        assert!(v["results"][0]["outcome"].as_str().unwrap().starts_with("dumping to"), "{v}");
        agent.stop(Duration::from_secs(1));
        assert!(!sock.exists(), "the socket goes with the agent");
    }
}

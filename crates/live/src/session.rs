//! A live session: the probes attached with a configuration built from what the user asked
//! for, handing out filtered events (or in-kernel histogram counts) until asked to stop.

use crate::cgroup::{Cgroup, CgroupWatch};
use crate::command::{Command, CommandError};
use crate::shared::{snapshot_groups, KeyAggregate};
use crate::{config, follow};
use latscope_event::source::{Chunk, CountKey, CountSource, EventSource, SourceError, Zone};
use latscope_event::{EventBatch, EventKind, SyscallSet, TraceHeader};
use latscope_filter::{EvalContext, Filter};
use latscope_probe::starttimes::StartTimes;
use latscope_probe::{snapshot, AggGroup, Probe, ProbeConfig, ProbeError, ProbeStats, SyscallSel, FD_CLASS_NAMES};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Smallest and largest ring buffer a session accepts, in bytes.
pub const RING_BYTES_RANGE: (usize, usize) = (1 << 20, 1 << 30);

/// Why a session could not start.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The probes could not be loaded or attached (or this machine cannot run them).
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// The command to run could not be started.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// The options and the filter leave nothing to trace.
    #[error("nothing to trace: {0}")]
    Nothing(String),
    /// An option is out of range or names something that does not exist.
    #[error("{0}")]
    Invalid(String),
    /// Signal handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
}

/// How in-kernel aggregation groups the latencies it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountBy {
    /// One histogram.
    All,
    /// By the I/O class of the fd: file, net, ipc, other.
    Class,
    /// By syscall.
    Syscall,
    /// By block device (the devices present at the start).
    Disk,
}

/// Builds a [`LiveSession`]: what to trace, through which filter, and how.
#[derive(Debug, Clone)]
pub struct SessionBuilder {
    syscalls: SyscallSet,
    block: bool,
    pids: Vec<u32>,
    follow: bool,
    cgroups: Vec<String>,
    comms: Vec<String>,
    command: Option<Vec<String>>,
    filter: Filter,
    ring_bytes: usize,
    need_fd_names: bool,
    count: Option<(CountBy, EventKind)>,
    count_without: Vec<u16>,
    signals: Vec<i32>,
    command_line: Vec<String>,
    why_above_ns: Option<u64>,
    why_stacks: bool,
    profile_hz: Option<u32>,
    ucopy_bytes: u32,
}

impl Default for SessionBuilder {
    fn default() -> Self {
        SessionBuilder {
            syscalls: SyscallSet::All,
            block: true,
            pids: Vec::new(),
            follow: false,
            cgroups: Vec::new(),
            comms: Vec::new(),
            command: None,
            filter: Filter::default(),
            ring_bytes: 64 << 20,
            need_fd_names: false,
            count: None,
            count_without: Vec::new(),
            signals: vec![libc::SIGINT, libc::SIGTERM],
            command_line: std::env::args().collect(),
            why_above_ns: None,
            why_stacks: false,
            profile_hz: None,
            ucopy_bytes: 0,
        }
    }
}

impl SessionBuilder {
    /// Every syscall and block request, no filter, a 64 MiB ring buffer, stop on SIGINT/SIGTERM.
    pub fn new() -> Self {
        Self::default()
    }
    /// Which syscalls to trace.
    pub fn syscalls(mut self, s: SyscallSet) -> Self {
        self.syscalls = s;
        self
    }
    /// Trace block requests.
    pub fn block(mut self, on: bool) -> Self {
        self.block = on;
        self
    }
    /// Only these processes (thread group ids).
    pub fn pids(mut self, pids: Vec<u32>) -> Self {
        self.pids = pids;
        self
    }
    /// Follow the processes of [`SessionBuilder::pids`], as `strace -f` does: the processes
    /// below them when the session starts (found in /proc) and every process they fork from then
    /// on, children of children included, are traced too; each leaves the kernel's filter when it
    /// exits. Children that do not fit in the filter are counted
    /// ([`ProbeStats::not_followed`]), never dropped silently.
    pub fn follow(mut self, on: bool) -> Self {
        self.follow = on;
        self
    }
    /// Only tasks in these cgroup v2 cgroups or below them: directories of the cgroup2 file
    /// system (absolute or relative to its mount) or systemd unit names (see [`Cgroup::resolve`]).
    /// Block requests are not limited (see [`SessionBuilder::pids`]).
    pub fn cgroups(mut self, specs: Vec<String>) -> Self {
        self.cgroups = specs;
        self
    }
    /// Only these command names (15 characters at most are compared, as the kernel keeps them).
    pub fn comms(mut self, comms: Vec<String>) -> Self {
        self.comms = comms;
        self
    }
    /// Run this command under the probes: it is held until the probes are attached and
    /// released by [`LiveSession::release_command`]; its children are followed.
    pub fn command(mut self, argv: Vec<String>) -> Self {
        self.command = (!argv.is_empty()).then_some(argv);
        self
    }
    /// Only events this filter keeps; its kernel-testable clauses are tested in the kernel.
    pub fn filter(mut self, f: Filter) -> Self {
        self.filter = f;
        self
    }
    /// Ring buffer size in bytes ([`RING_BYTES_RANGE`]; rounded up to a power of two).
    pub fn ring_bytes(mut self, n: usize) -> Self {
        self.ring_bytes = n;
        self
    }
    /// Keep the calls that name fds even when the filter drops them (a view shows file names).
    pub fn need_fd_names(mut self, on: bool) -> Self {
        self.need_fd_names = on;
        self
    }
    /// Count latencies of `kind` in the kernel, grouped by `by`, instead of streaming events,
    /// when the kernel can apply the filter exactly; otherwise stream (see
    /// [`LiveSession::streaming_reason`]).
    pub fn count_in_kernel(mut self, by: CountBy, kind: EventKind) -> Self {
        self.count = Some((by, kind));
        self
    }
    /// When the session counts in the kernel: these syscalls are not counted (the kernel does not
    /// see them), for views that leave them out (the idle waits) and cannot tell them apart in
    /// a histogram. A streaming session is not affected: its views tell them apart per event.
    pub fn count_without(mut self, nrs: Vec<u16>) -> Self {
        self.count_without = nrs;
        self
    }
    /// Signals that request a stop (default SIGINT and SIGTERM).
    pub fn stop_on(mut self, signals: &[i32]) -> Self {
        self.signals = signals.to_vec();
        self
    }
    /// Per-call attribution: syscalls at least this slow (ns; 0: all) carry the breakdown of their
    /// latency into causes (see docs/WHY.md). Streaming sessions only: with it,
    /// [`SessionBuilder::count_in_kernel`] streams syscalls (see [`LiveSession::streaming_reason`]).
    pub fn why(mut self, above_ns: Option<u64>) -> Self {
        self.why_above_ns = above_ns;
        self
    }
    /// With attribution: also record the kernel stack where each call blocked and its user
    /// stack, into the trace's stack table (see docs/WHY.md).
    pub fn why_stacks(mut self, on: bool) -> Self {
        self.why_stacks = on;
        self
    }
    /// With attribution and stacks: on-CPU samples of every traced thread, `hz` a second, with
    /// their stacks (see [`latscope_probe::ProbeConfig::profile_hz`]).
    pub fn profile(mut self, hz: Option<u32>) -> Self {
        self.profile_hz = hz;
        self
    }
    /// With stacks: copy `bytes` of each user stack beside it and unwind it from the binaries'
    /// unwind tables (`--call-graph dwarf`; see [`latscope_probe::ProbeConfig::ucopy_bytes`]).
    /// 0: frame pointers only.
    pub fn unwind_copy(mut self, bytes: u32) -> Self {
        self.ucopy_bytes = bytes;
        self
    }
    /// The command line stored in the header (default: this process's).
    pub fn command_line(mut self, argv: Vec<String>) -> Self {
        self.command_line = argv;
        self
    }

    fn check(&self) -> Result<(Vec<String>, Vec<Cgroup>), SessionError> {
        let (lo, hi) = RING_BYTES_RANGE;
        if !(lo..=hi).contains(&self.ring_bytes) {
            return Err(SessionError::Invalid(format!(
                "ring buffer size {} is out of range: use {} to {}",
                latscope_event::units::fmt_bytes(self.ring_bytes as u64),
                latscope_event::units::fmt_bytes(lo as u64),
                latscope_event::units::fmt_bytes(hi as u64)
            )));
        }
        for &p in &self.pids {
            if std::fs::metadata(format!("/proc/{p}")).is_err() {
                return Err(SessionError::Invalid(format!(
                    "no process {p} is running (-p takes the pid of a running process: see pgrep NAME or ps -e)"
                )));
            }
        }
        if self.follow && self.pids.is_empty() && self.command.is_none() {
            return Err(SessionError::Invalid(
                "--follow follows the processes given with -p: add -p PID (a command run by record is followed anyway)"
                    .into(),
            ));
        }
        let mut cgroups = Vec::new();
        for spec in &self.cgroups {
            let c = Cgroup::resolve(spec).map_err(SessionError::Invalid)?;
            if !cgroups.iter().any(|k: &Cgroup| k.id == c.id) {
                cgroups.push(c);
            }
        }
        if cgroups.len() > latscope_probe::CGROUPS_MAX {
            return Err(SessionError::Invalid(format!(
                "{} cgroups given: at most {} (name a parent cgroup instead: its descendants are in)",
                cgroups.len(),
                latscope_probe::CGROUPS_MAX
            )));
        }
        let mut warnings = Vec::new();
        for c in &self.comms {
            if c.len() > 15 {
                warnings.push(format!(
                    "command name '{c}' is longer than the 15 characters the kernel keeps: matching '{}'",
                    &c[..c.char_indices().take_while(|(i, _)| *i < 15).last().map_or(0, |(i, ch)| i + ch.len_utf8())]
                ));
            }
        }
        Ok((warnings, cgroups))
    }

    /// Check the environment and the options, take the start snapshot, load and attach the
    /// probes. The command, if any, is started but held until [`LiveSession::release_command`].
    pub fn start(self) -> Result<LiveSession, SessionError> {
        let mut times = StartTimes::begin();
        let (mut warnings, cgroups) = self.check()?;
        latscope_probe::check_environment()?;
        times.step("checking the options and the kernel");
        let filter_text = (!self.filter.is_match_all()).then(|| self.filter.source().to_string());
        let mut header = snapshot::take(self.command_line.clone(), self.syscalls, self.block, filter_text);
        times.step("the /proc snapshot (processes, fds, mounts, disks)");
        let mut cfg = config::base(self.syscalls, self.block);
        cfg.pids = self.pids.clone();
        cfg.follow_children = self.follow && !self.pids.is_empty();
        cfg.cgroups = cgroups.iter().map(|c| c.id).collect();
        cfg.comms = self.comms.clone();
        cfg.ring_bytes = self.ring_bytes;
        cfg.why_above_ns = self.why_above_ns;
        cfg.why_stacks = self.why_stacks;
        cfg.profile_hz = self.profile_hz;
        cfg.ucopy_bytes = self.ucopy_bytes;
        let command = match &self.command {
            Some(argv) => {
                let c = Command::spawn(argv)?;
                // The snapshot was taken before the command existed: its working directory (which
                // relative paths resolve against) must be known now, not read from /proc after
                // it may have changed it.
                if let Some(p) = snapshot::process(c.pid()) {
                    header.fds.extend(snapshot::fds_of(c.pid(), &snapshot::sockets()));
                    header.processes.push(p);
                }
                cfg.pids.push(c.pid());
                cfg.follow_children = true;
                Some(c)
            }
            None => None,
        };
        let mut streaming_reason = None;
        let mut count_by = None;
        if let Some((by, kind)) = self.count {
            streaming_reason = config::inexact(&self.filter, &header, kind, cfg.follow_children);
            if streaming_reason.is_none() && self.why_above_ns.is_some() && kind == EventKind::Syscall {
                // The kernel's histograms keep no per-call breakdown.
                streaming_reason = Some("attribution (why) is recorded per call".into());
            }
            if streaming_reason.is_none() {
                count_by = Some(by);
            }
        }
        config::apply_filter(&mut cfg, &self.filter, &header, self.need_fd_names);
        if let Some((_, kind)) = self.count {
            // A view of one kind: the probes of the other kind stay off.
            match kind {
                EventKind::Block => cfg.syscalls = SyscallSel::Off,
                _ => cfg.block = false,
            }
        }
        if cfg.syscalls == SyscallSel::Off && !cfg.block {
            return Err(SessionError::Nothing(
                "the filter and the options exclude every syscall and block request".into(),
            ));
        }
        let mut devs = Vec::new();
        if let Some(by) = count_by {
            if !self.count_without.is_empty() {
                let keep = |n: &u16| !self.count_without.contains(n);
                cfg.syscalls = match &cfg.syscalls {
                    SyscallSel::All => SyscallSel::Only(
                        (0..latscope_event::syscalls::syscall_count() as u16)
                            .filter(|n| latscope_event::syscall_name(*n).is_some() && keep(n))
                            .collect(),
                    ),
                    SyscallSel::Io => SyscallSel::Only(
                        (0..latscope_event::syscalls::syscall_count() as u16)
                            .filter(|&n| latscope_event::syscalls::desc(n).is_io_related() && keep(&n))
                            .collect(),
                    ),
                    SyscallSel::Only(v) => SyscallSel::Only(v.iter().copied().filter(keep).collect()),
                    SyscallSel::Off => SyscallSel::Off,
                };
            }
            cfg.procs = false;
            cfg.aggregate = Some(match by {
                CountBy::All | CountBy::Disk => AggGroup::All,
                CountBy::Class => AggGroup::FdClass,
                CountBy::Syscall => AggGroup::Syscall,
            });
            if by == CountBy::Disk && cfg.devs.is_empty() {
                cfg.devs = header.block_devices.iter().map(|d| d.dev).collect();
            }
            devs = cfg.devs.clone();
        }
        let stop = Arc::new(AtomicBool::new(false));
        for &sig in &self.signals {
            signal_hook::flag::register(sig, stop.clone()).map_err(SessionError::Signals)?;
            // A trace written to a pipe whose reader stopped reading gives up once stopping.
            signal_hook::flag::register(sig, latscope_trace::stopping_flag()).map_err(SessionError::Signals)?;
        }
        if self.filter.is_match_all() && cfg.captures_for_replay() {
            header.capture.push(latscope_event::CAPTURE_REPLAY_V1.to_string());
        }
        times.step("configuring");
        let mut probe = Probe::start(&cfg, &header)?;
        header.start_ns = probe.attached_ns();
        times.extend(probe.start_times());
        // What opened between the snapshot and the attach is named too (a file opened in that
        // gap would otherwise stay unnamed: its open was never seen).
        let (procs, fds) = snapshot::reconcile(&mut header);
        header.bound_fields();
        probe.learn(&procs, &fds);
        times.step("naming what opened during the load (second /proc pass)");
        // Forks are followed from here on; the descendants of the given pids already running
        // join now (the pids map was filled before the programs attached).
        let mut followed = Vec::new();
        let mut not_followed = 0;
        if self.follow && !self.pids.is_empty() {
            followed = follow::add_descendants(&self.pids, |p| {
                if !probe.add_pid(p)? {
                    not_followed += 1;
                }
                Ok::<_, ProbeError>(())
            })?;
            if not_followed > 0 {
                warnings.push(format!(
                    "{not_followed} of the {} processes below the followed ones are not followed: the kernel's pid filter                      holds {} processes",
                    followed.len(),
                    latscope_probe::PIDS_MAX
                ));
            }
        }
        // With attribution, each thread's times now: with those at its exit or at the end, they
        // bound its whole time, in and outside its calls.
        if let Err(e) = probe.read_thread_times(latscope_probe::ThreadTimesAt::Start) {
            warnings.push(format!("{e}: each thread's time outside its calls is not accounted for"));
        }
        Ok(LiveSession {
            ctx: EvalContext::new(&header),
            cgroups: CgroupWatch::new(&header),
            probe,
            cfg,
            header,
            filter: self.filter,
            batch: EventBatch::default(),
            rows: Vec::new(),
            command,
            stop,
            count_by,
            devs,
            streaming_reason,
            warnings,
            followed,
            not_followed,
            stacks: None,
            start_times: times,
        })
    }
}

/// Attached probes and what they are filtered by (see [`SessionBuilder`]).
///
/// Streaming sessions are an [`EventSource`]; counting sessions a [`CountSource`].
pub struct LiveSession {
    pub(crate) probe: Probe,
    cfg: ProbeConfig,
    header: TraceHeader,
    pub(crate) filter: Filter,
    pub(crate) ctx: EvalContext,
    /// Cgroups that appear during the session, added to the header and the filter's context.
    cgroups: CgroupWatch,
    batch: EventBatch,
    rows: Vec<u32>,
    command: Option<Command>,
    stop: Arc<AtomicBool>,
    count_by: Option<CountBy>,
    devs: Vec<u32>,
    streaming_reason: Option<String>,
    warnings: Vec<String>,
    followed: Vec<u32>,
    not_followed: u64,
    /// Stacks of the events handed out (attribution with stacks; made at the first poll: a
    /// recorder reads the probes itself and keeps its own).
    stacks: Option<crate::stacks::StackResolver>,
    /// How long each step of the start took.
    start_times: StartTimes,
}

impl LiveSession {
    /// Whether calls carry stacks (attribution with stacks).
    pub fn why_stacks(&self) -> bool {
        self.cfg.why_stacks && self.cfg.why_above_ns.is_some()
    }

    /// Whether user stacks come with copies to unwind (`--call-graph dwarf`).
    pub fn unwinds_copies(&self) -> bool {
        self.why_stacks() && self.cfg.ucopy_bytes > 0
    }
    /// How long each step of the start took: the snapshot, the probes' load and attach
    /// ([`latscope_probe::starttimes`]).
    pub fn start_times(&self) -> &StartTimes {
        &self.start_times
    }
    /// The start snapshot; `start_ns` is when the probes were attached.
    pub fn header(&self) -> &TraceHeader {
        &self.header
    }
    /// The filter.
    pub fn filter(&self) -> &Filter {
        &self.filter
    }
    /// Set when a stop signal arrived (or [`LiveSession::request_stop`] was called).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }
    /// Has a stop been requested?
    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
    /// Ask the session's users to stop.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        latscope_trace::set_stopping();
    }
    /// Warnings about the options (a command name longer than the kernel keeps, ...).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
    /// Whether the latencies are counted in the kernel (no events are streamed).
    pub fn is_counting(&self) -> bool {
        self.count_by.is_some()
    }
    /// Why the session streams events although counting in the kernel was asked for.
    pub fn streaming_reason(&self) -> Option<&str> {
        self.streaming_reason.as_deref()
    }
    /// The devices of a [`CountBy::Disk`] session, in group order.
    pub fn count_devices(&self) -> &[u32] {
        &self.devs
    }
    /// The in-kernel counters (events, losses, unreadable paths, unpaired block completions,
    /// processes not followed; those found at the start that did not fit are counted too).
    pub fn stats(&self) -> ProbeStats {
        let mut s = self.probe.stats();
        s.not_followed += self.not_followed;
        s
    }
    /// Processes the kernel's pid filter holds now (with [`SessionBuilder::follow`], the given
    /// ones and their descendants alive; 0 without a pid filter).
    pub fn followed_now(&self) -> usize {
        self.probe.pid_filter_len()
    }
    /// With [`SessionBuilder::follow`]: the processes below the given ones that were running at
    /// the start and are followed with them (found in /proc).
    pub fn followed_at_start(&self) -> &[u32] {
        &self.followed
    }
    /// CPU time the session's probes have run in the kernel, in ns; it only grows while
    /// run-time statistics are on ([`latscope_probe::enable_run_time_stats`]).
    pub fn probe_run_time_ns(&self) -> u64 {
        self.probe.run_time_ns()
    }
    /// Ring-buffer records the decoder could not read (never expected).
    pub fn malformed(&self) -> u64 {
        self.probe.malformed()
    }
    /// The command's pid, if the session runs one.
    pub fn command_pid(&self) -> Option<u32> {
        self.command.as_ref().map(|c| c.pid())
    }
    /// Let the command run (it was held until now so that the probes see it from its start).
    pub fn release_command(&mut self) {
        if let Some(c) = &mut self.command {
            c.release();
        }
    }
    /// The command's exit status once it has ended (the code, or 128 + signal).
    pub fn command_status(&mut self) -> Option<i32> {
        self.command.as_mut().and_then(|c| c.try_status())
    }
    /// Stop the command (its process group): `signal`, then SIGKILL after a grace period.
    pub fn stop_command(&mut self, signal: i32) -> Option<i32> {
        self.command.as_mut().map(|c| c.stop(signal))
    }
    /// End the command when the session ends early: stop it (SIGTERM to its group, SIGKILL after
    /// a grace period) unless it was detached. Returns its status when it ended.
    pub fn end_command(&mut self) -> Option<i32> {
        let c = self.command.as_mut()?;
        if c.is_detached() {
            return None;
        }
        Some(c.stop(libc::SIGTERM))
    }
    /// Leave the command running when the session ends.
    pub fn detach_command(&mut self) {
        if let Some(c) = &mut self.command {
            c.detach();
        }
    }

    /// Learn the cgroups of `ids` the session does not know yet (see `CgroupWatch`): they join
    /// its header and filter context; returns the new entries (for the trace's cgroup table).
    pub(crate) fn learn_cgroups(&mut self, ids: &[u64]) -> Vec<latscope_event::CgroupInfo> {
        self.cgroups.learn(ids, &mut self.header, &mut self.ctx)
    }

    fn poll(&mut self, wait: Duration) -> Result<(), ProbeError> {
        self.batch.clear();
        self.probe.poll_into(&mut self.batch, wait)?;
        if self.why_stacks() {
            // Stack references become ids of a stack table whose new entries travel in
            // `batch.stacks`, as in a recorded trace.
            let r =
                self.stacks.get_or_insert_with(|| crate::stacks::StackResolver::new(true, self.cfg.ucopy_bytes > 0));
            r.resolve(&self.probe, &mut self.batch, 0);
        }
        self.cgroups.learn(&self.batch.cgroup, &mut self.header, &mut self.ctx);
        self.ctx.observe(&self.batch);
        self.rows.clear();
        let all = self.filter.is_match_all();
        for i in 0..self.batch.len() {
            if all || self.filter.matches(&self.batch, i, &self.ctx) {
                self.rows.push(i as u32);
            }
        }
        Ok(())
    }
}

impl LiveSession {
    /// [`EventSource::next_chunk`], with the header as it is after the poll: cgroups met since
    /// the start (containers started since) are in it.
    pub fn next_chunk_and_header(&mut self, wait: Duration) -> Result<Option<(Chunk<'_>, &TraceHeader)>, SourceError> {
        if self.count_by.is_some() {
            return Err("these probes count in the kernel and stream no events".into());
        }
        self.poll(wait)?;
        Ok(Some((Chunk { batch: &self.batch, rows: &self.rows, zone: Zone::default() }, &self.header)))
    }
}

impl EventSource for LiveSession {
    fn header(&self) -> &TraceHeader {
        &self.header
    }

    fn next_chunk(&mut self, wait: Duration) -> Result<Option<Chunk<'_>>, SourceError> {
        if self.count_by.is_some() {
            return Err("these probes count in the kernel and stream no events".into());
        }
        self.poll(wait)?;
        Ok(Some(Chunk { batch: &self.batch, rows: &self.rows, zone: Zone::default() }))
    }

    fn next_chunk_and_header(
        &mut self,
        wait: Duration,
    ) -> Result<Option<(Chunk<'_>, Option<&TraceHeader>)>, SourceError> {
        Ok(LiveSession::next_chunk_and_header(self, wait)?.map(|(c, h)| (c, Some(h))))
    }

    fn lost(&self) -> u64 {
        self.probe.stats().lost
    }

    fn describe(&self) -> String {
        "live: event stream".into()
    }
}

impl LiveSession {
    /// A counting session's cumulative aggregates per key: latency buckets, exact sums, failed
    /// syscalls, and for block requests their queue times, sizes and bytes per operation.
    pub fn read_aggregates(&mut self) -> Result<Vec<(CountKey, KeyAggregate)>, SourceError> {
        let snap = self.probe.read_agg()?;
        let by = self.count_by.ok_or("events are streamed: the kernel keeps no counts for this view")?;
        let mut out: Vec<(CountKey, KeyAggregate)> = Vec::new();
        for (g, counts, sums, block) in snapshot_groups(&snap) {
            let key = match by {
                CountBy::All => CountKey::All,
                CountBy::Class => CountKey::Class(FD_CLASS_NAMES.get(g as usize).copied().unwrap_or("other")),
                CountBy::Syscall => CountKey::Syscall(g as u16),
                CountBy::Disk => CountKey::Dev(self.devs.get(g as usize).copied().unwrap_or(g)),
            };
            // Groups are distinct keys except for All over several disks: those add up.
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some((_, a)) => a.add(counts, sums, block),
                None => {
                    let mut a = KeyAggregate::default();
                    a.add(counts, sums, block);
                    out.push((key, a));
                }
            }
        }
        Ok(out)
    }
}

impl CountSource for LiveSession {
    fn read_counts(&mut self) -> Result<Vec<(CountKey, Vec<u64>)>, SourceError> {
        let snap = self.probe.read_agg()?;
        let by = self.count_by.ok_or("events are streamed: the kernel keeps no counts for this view")?;
        Ok(snap
            .groups
            .into_iter()
            .map(|(g, c)| {
                let key = match by {
                    CountBy::All => CountKey::All,
                    CountBy::Class => CountKey::Class(FD_CLASS_NAMES.get(g as usize).copied().unwrap_or("other")),
                    CountBy::Syscall => CountKey::Syscall(g as u16),
                    CountBy::Disk => CountKey::Dev(self.devs.get(g as usize).copied().unwrap_or(g)),
                };
                (key, c)
            })
            .collect())
    }

    fn into_events(self: Box<Self>) -> Result<Box<dyn EventSource>, SourceError> {
        let s = *self;
        let mut cfg = s.cfg.clone();
        cfg.aggregate = None;
        cfg.procs = true;
        // The counting probes detach first: both sets at once would count twice.
        drop(s.probe);
        let mut probe = Probe::start(&cfg, &s.header)?;
        let mut header = s.header;
        // Files opened while counting were never seen opening: named from /proc now.
        let (procs, fds) = snapshot::reconcile(&mut header);
        header.bound_fields();
        probe.learn(&procs, &fds);
        // The children the counting probes followed are not in the new filter: find them again.
        let mut not_followed = s.not_followed;
        if cfg.follow_children {
            follow::add_descendants(&cfg.pids, |p| {
                if !probe.add_pid(p)? {
                    not_followed += 1;
                }
                Ok::<_, ProbeError>(())
            })?;
        }
        Ok(Box::new(LiveSession {
            ctx: EvalContext::new(&header),
            cgroups: CgroupWatch::new(&header),
            start_times: probe.start_times().clone(),
            probe,
            cfg,
            header,
            filter: s.filter,
            batch: EventBatch::default(),
            rows: Vec::new(),
            command: s.command,
            stop: s.stop,
            count_by: None,
            devs: Vec::new(),
            streaming_reason: Some("switched from in-kernel counting to keep events".into()),
            warnings: s.warnings,
            followed: s.followed,
            not_followed,
            stacks: None,
        }))
    }

    fn describe(&self) -> String {
        "live: in-kernel aggregation".into()
    }
}

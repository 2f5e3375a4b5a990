//! One running series: its capped histograms, and either a share of a probe set (see
//! [`crate::sets`]) or a live session of its own (counting in the kernel when the kernel can
//! apply the filter exactly and has the grouping, streaming otherwise).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use latscope_event::source::CountKey;
use latscope_event::{syscall_name, EventKind, FdType, SyscallSet, TraceHeader};
use latscope_filter::Filter;
use latscope_hist::Histogram;
use latscope_live::{CountBy, KeyAggregate, LiveSession, SessionBuilder};

use crate::config::{By, SeriesConfig};
use crate::groups::CappedGroups;

/// Ring buffer of a streaming series (a counting one needs the minimum).
const STREAM_RING_BYTES: usize = 16 << 20;
/// Chunks read per poll at most, so that one busy series does not starve the others.
const MAX_CHUNKS_PER_POLL: usize = 64;

/// A series and its state.
pub(crate) struct SeriesRun {
    pub cfg: SeriesConfig,
    filter: Filter,
    session: Option<LiveSession>,
    /// Cumulative kernel aggregates of the current session, per key, at the last read.
    prev: HashMap<CountKey, KeyAggregate>,
    pub groups: CappedGroups,
    pub created: SystemTime,
    /// Sessions started after a failure.
    pub restarts: u64,
    /// Sessions started so far.
    starts: u64,
    pub last_error: Option<String>,
    /// Lost events and probe CPU time of sessions that ended.
    lost_base: u64,
    cpu_base: u64,
    pub disks: HashMap<u32, String>,
    /// Why the series streams events instead of counting in the kernel.
    pub streaming_reason: Option<String>,
    /// Counted by a shared probe set (the agent hands it its counts), not by a session of its own.
    pub shared: bool,
    /// Its share of the probe set's CPU time, ns (set by the agent).
    pub shared_cpu_ns: u64,
    /// Series counted by the probes this series uses (1: probes of its own).
    pub set_size: usize,
    /// Label values published so far, with the scrape count ([`SharedMetrics::scrapes`]) right
    /// after they were first published at zero: a value shows its counts once a later scrape
    /// has seen it at zero, so that Prometheus sees the start of every series.
    ///
    /// [`SharedMetrics::scrapes`]: latscope_export::prometheus::SharedMetrics::scrapes
    pub exposed: HashMap<String, u64>,
    /// The label of each cgroup id met, for the groupings by container, pod and cgroup (only
    /// those the session's cgroup table names: an unknown one may be named later).
    cgroup_labels: HashMap<u64, String>,
    /// The session's cgroup table by id (its header's `cgroups`, indexed as they are appended:
    /// a label is found without scanning the table, however many cgroups there are).
    cgroup_index: CgroupIndex,
}

/// Where each cgroup id is in a header's cgroup table, kept up to date as the table grows.
#[derive(Debug, Default)]
struct CgroupIndex {
    at: HashMap<u64, usize>,
    indexed: usize,
}

impl CgroupIndex {
    /// The entry of `id` in `h`'s table, indexing the entries appended since the last call.
    fn get<'h>(&mut self, h: &'h TraceHeader, id: u64) -> Option<&'h latscope_event::CgroupInfo> {
        if h.cgroups.len() < self.indexed {
            // Another session's table.
            *self = CgroupIndex::default();
        }
        for (i, c) in h.cgroups.iter().enumerate().skip(self.indexed) {
            self.at.insert(c.id, i);
        }
        self.indexed = h.cgroups.len();
        h.cgroups.get(*self.at.get(&id)?).filter(|c| c.id == id)
    }
}

/// Cgroup labels remembered per series; the memory starts over past it.
const MAX_CGROUP_LABELS: usize = 1 << 16;

impl SeriesRun {
    /// A series, not started yet; `intervals` keeps per-interval histograms (for Graphite).
    pub fn new(cfg: SeriesConfig, intervals: bool) -> SeriesRun {
        let filter = Filter::parse(&cfg.filter).unwrap_or_default();
        SeriesRun {
            groups: CappedGroups::new(cfg.max_labels, intervals, cfg.kind == EventKind::Block),
            cfg,
            filter,
            session: None,
            prev: HashMap::new(),
            created: SystemTime::now(),
            restarts: 0,
            starts: 0,
            last_error: None,
            lost_base: 0,
            cpu_base: 0,
            disks: HashMap::new(),
            streaming_reason: None,
            shared: false,
            shared_cpu_ns: 0,
            set_size: 1,
            exposed: HashMap::new(),
            cgroup_labels: HashMap::new(),
            cgroup_index: CgroupIndex::default(),
        }
    }

    /// Whether its probes run (a shared series' are the probe set's: always true here).
    pub fn is_running(&self) -> bool {
        self.shared || self.session.is_some()
    }

    pub fn is_counting(&self) -> bool {
        self.shared || self.session.as_ref().is_some_and(|s| s.is_counting())
    }

    /// Counts from a probe set from now on (its own session, if any, ends).
    pub fn use_shared(&mut self, set_size: usize) {
        if let Some(s) = self.session.take() {
            self.lost_base += s.stats().lost;
            self.cpu_base += s.probe_run_time_ns();
        }
        self.shared = true;
        self.set_size = set_size;
        self.streaming_reason = None;
    }

    /// Takes over the session of `fresh` (the same series, started anew): counts so far are kept.
    pub fn adopt_session(&mut self, fresh: SeriesRun) {
        self.session = fresh.session;
        self.cgroup_index = CgroupIndex::default();
        self.disks = fresh.disks;
        self.streaming_reason = fresh.streaming_reason;
        self.shared = false;
        self.set_size = 1;
        self.prev.clear();
    }

    /// Takes `counts` (cumulative, of probes just started) as the point the next counts are
    /// added from.
    pub fn set_baseline(&mut self, counts: Vec<(CountKey, KeyAggregate)>) {
        self.prev = counts.into_iter().collect();
    }

    /// Starts the session (again, after a failure). Counts so far are kept.
    pub fn start(&mut self) -> Result<(), String> {
        self.shared = false;
        self.set_size = 1;
        let block = self.cfg.kind == EventKind::Block;
        let mut b = SessionBuilder::new()
            .syscalls(if block { SyscallSet::None } else { SyscallSet::All })
            .block(block)
            .filter(self.filter.clone())
            .stop_on(&[])
            .command_line(vec!["latscope".into(), "agent".into(), format!("series={}", self.cfg.name)]);
        let count_by = match self.cfg.by {
            By::All => Some(CountBy::All),
            By::Disk => Some(CountBy::Disk),
            By::Syscall => Some(CountBy::Syscall),
            By::Class => Some(CountBy::Class),
            // The kernel has no per-process (or per-cgroup) grouping: events are streamed and
            // grouped here.
            By::Proc | By::Container | By::Pod | By::Cgroup => None,
        };
        b = match count_by {
            Some(by) => b.count_in_kernel(by, self.cfg.kind).ring_bytes(latscope_live::RING_BYTES_RANGE.0),
            None => b.ring_bytes(STREAM_RING_BYTES),
        };
        let session = b.start().map_err(|e| format!("series {}: {e}", self.cfg.name))?;
        self.disks = session.header().block_devices.iter().map(|d| (d.dev, d.name.clone())).collect();
        self.streaming_reason = match (count_by, session.streaming_reason()) {
            (None, _) => Some(format!("grouping by {} is done in user space", self.cfg.by.label().unwrap_or("all"))),
            (Some(_), r) => r.map(str::to_string),
        };
        self.prev.clear();
        if self.starts > 0 {
            self.restarts += 1;
        }
        self.starts += 1;
        self.session = Some(session);
        self.cgroup_index = CgroupIndex::default();
        Ok(())
    }

    /// Follows the block devices there are now (`disks`): a series counting by disk in the
    /// kernel starts probes that know them (counts kept; returns true); a streaming one learns
    /// their names.
    pub fn follow_disks(&mut self, disks: &[latscope_event::BlockDevice]) -> Result<bool, String> {
        if !self.is_counting() {
            self.disks = disks.iter().map(|d| (d.dev, d.name.clone())).collect();
            return Ok(false);
        }
        let mut fresh = SeriesRun::new(self.cfg.clone(), false);
        fresh.start()?;
        // The old probes' last counts, then the new ones' first as the point to count from.
        self.refresh();
        if let Some(s) = self.session.take() {
            self.lost_base += s.stats().lost;
            self.cpu_base += s.probe_run_time_ns();
        }
        let first = match fresh.session.as_mut().map(|s| s.read_aggregates()) {
            Some(Ok(c)) => c,
            _ => Vec::new(),
        };
        self.adopt_session(fresh);
        self.set_baseline(first);
        Ok(true)
    }

    /// Ends the session after an error; the next [`SeriesRun::start`] restarts it.
    pub fn fail(&mut self, e: String) {
        if let Some(s) = self.session.take() {
            self.lost_base += s.stats().lost;
            self.cpu_base += s.probe_run_time_ns();
        }
        self.last_error = Some(e);
    }

    /// Events the probes lost (ring buffer full), all sessions.
    pub fn lost(&self) -> u64 {
        self.lost_base + self.session.as_ref().map_or(0, |s| s.stats().lost)
    }

    /// CPU time of the probes in the kernel, ns, all sessions.
    pub fn cpu_ns(&self) -> u64 {
        self.cpu_base + self.shared_cpu_ns + self.session.as_ref().map_or(0, |s| s.probe_run_time_ns())
    }

    fn disk_name(&self, dev: u32) -> String {
        self.disks.get(&dev).cloned().unwrap_or_else(|| format!("{}:{}", dev >> 20, dev & 0xfffff))
    }

    /// Reads the events a streaming session has (a bounded number of chunks). Counting sessions
    /// have nothing to read here.
    pub fn poll(&mut self) {
        if self.is_counting() {
            return;
        }
        let kind = self.cfg.kind as u8;
        let by = self.cfg.by;
        let mut error = None;
        if let Some(s) = self.session.as_mut() {
            for _ in 0..MAX_CHUNKS_PER_POLL {
                // The header as the session knows it now: cgroups made since it started are in it.
                let (c, header) = match s.next_chunk_and_header(Duration::ZERO) {
                    Ok(Some(c)) => c,
                    Ok(None) => break,
                    Err(e) => {
                        error = Some(format!("series {}: reading events: {e}", self.cfg.name));
                        break;
                    }
                };
                if c.batch.is_empty() {
                    break;
                }
                let b = c.batch;
                let mut unknown = String::new();
                for &r in c.rows {
                    let r = r as usize;
                    if b.kind[r] != kind {
                        continue;
                    }
                    let lat = b.lat[r];
                    let label: std::borrow::Cow<'_, str> = match by {
                        By::All => "".into(),
                        By::Proc => b.comm.get(r).into(),
                        By::Container | By::Pod | By::Cgroup => {
                            let id = b.cgroup[r];
                            if self.cgroup_labels.len() >= MAX_CGROUP_LABELS {
                                self.cgroup_labels.clear();
                            }
                            if let std::collections::hash_map::Entry::Vacant(e) = self.cgroup_labels.entry(id) {
                                let (l, known) = cgroup_label(by, self.cgroup_index.get(header, id), id);
                                if known {
                                    e.insert(l);
                                } else {
                                    unknown = l;
                                }
                            }
                            self.cgroup_labels.get(&id).map_or(unknown.as_str(), String::as_str).into()
                        }
                        By::Syscall => {
                            syscall_name(b.nr[r]).map_or_else(|| format!("nr{}", b.nr[r]).into(), Into::into)
                        }
                        By::Class => FdType::from_u8(b.fd_type[r]).io_class().into(),
                        By::Disk => self.disks.get(&b.dev[r]).map_or_else(
                            || format!("{}:{}", b.dev[r] >> 20, b.dev[r] & 0xfffff).into(),
                            |n| n.as_str().into(),
                        ),
                    };
                    let failed = kind == EventKind::Syscall as u8 && b.ret[r] < 0;
                    let (op, qtime, bytes) = (latscope_probe::agg_op(b.nr[r]), b.qtime[r], b.bytes[r]);
                    self.groups.with_extras(
                        &label,
                        1,
                        |h| h.record(lat),
                        |e| {
                            e.errors += u64::from(failed);
                            if let Some(o) = e.ops.get_mut(op) {
                                o.queue.record(qtime);
                                o.size.record(bytes);
                                o.bytes += bytes;
                            }
                        },
                    );
                }
            }
        }
        if let Some(e) = error {
            self.fail(e);
        }
    }

    /// Adds what the kernel counted since the last read (counting sessions), or polls (streaming).
    pub fn refresh(&mut self) {
        if self.shared {
            return; // the agent hands over the probe set's counts
        }
        if !self.is_counting() {
            self.poll();
            return;
        }
        let Some(s) = self.session.as_mut() else { return };
        let counts = match s.read_aggregates() {
            Ok(c) => c,
            Err(e) => {
                let e = format!("series {}: reading the in-kernel counts: {e}", self.cfg.name);
                self.fail(e);
                return;
            }
        };
        self.add_counts(counts);
    }

    /// Adds what cumulative kernel aggregates hold beyond the previous ones.
    pub fn add_counts(&mut self, counts: Vec<(CountKey, KeyAggregate)>) {
        for (key, now) in counts {
            let prev = self.prev.entry(key).or_default();
            let d = delta(&now, prev);
            *prev = now;
            let n: u64 = d.buckets.iter().sum();
            if n == 0 && d.block.iter().all(|b| b.requests() == 0) {
                continue;
            }
            let label = match key {
                CountKey::All => String::new(),
                CountKey::Class(c) => c.to_string(),
                CountKey::Syscall(nr) => syscall_name(nr).map_or_else(|| format!("nr{nr}"), str::to_string),
                CountKey::Dev(d) => self.disk_name(d),
            };
            let lat = from_buckets(&d.buckets, d.lat_ns);
            self.groups.with_extras(
                &label,
                n,
                |h| h.merge(&lat),
                |e| {
                    e.errors += d.errors;
                    for (op, b) in e.ops.iter_mut().zip(&d.block) {
                        op.queue.merge(&from_buckets(&b.queue, b.queue_ns));
                        op.size.merge(&from_buckets(&b.size, b.bytes));
                        op.bytes += b.bytes;
                    }
                },
            );
        }
    }
}

/// What `now` holds beyond `prev` (cumulative aggregates of the same probes).
fn delta(now: &KeyAggregate, prev: &KeyAggregate) -> KeyAggregate {
    let sub = |a: &[u64], b: &[u64]| -> Vec<u64> {
        a.iter().enumerate().map(|(i, v)| v.saturating_sub(b.get(i).copied().unwrap_or(0))).collect()
    };
    KeyAggregate {
        buckets: sub(&now.buckets, &prev.buckets),
        lat_ns: now.lat_ns.saturating_sub(prev.lat_ns),
        errors: now.errors.saturating_sub(prev.errors),
        block: now
            .block
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let p = prev.block.get(i).cloned().unwrap_or_default();
                latscope_probe::BlockAgg {
                    bytes: b.bytes.saturating_sub(p.bytes),
                    queue_ns: b.queue_ns.saturating_sub(p.queue_ns),
                    queue: sub(&b.queue, &p.queue),
                    size: sub(&b.size, &p.size),
                }
            })
            .collect(),
    }
}

/// A histogram of in-kernel bucket counts: each bucket's values at its middle (the kernel's
/// buckets are 3 to 6 % wide), the sum the exact one the kernel kept.
fn from_buckets(counts: &[u64], sum: u64) -> Histogram {
    let mut h = Histogram::new();
    for (i, &k) in counts.iter().enumerate().filter(|(_, k)| **k > 0) {
        let (lo, hi) = latscope_probe::agg_bucket_bounds(i);
        h.record_n(lo + (hi - lo) / 2, k);
    }
    h.set_sum(u128::from(sum));
    h
}

/// The label of cgroup `id` in a series grouped `by` container, pod or cgroup, from its entry
/// in the cgroup table (the same names as `top --by`), and whether the table knows the cgroup.
fn cgroup_label(by: By, entry: Option<&latscope_event::CgroupInfo>, id: u64) -> (String, bool) {
    let Some(c) = entry else {
        let l = match by {
            // The root cgroup (id 1) is the host's.
            By::Cgroup if id <= 1 => "/".into(),
            By::Container if id <= 1 => "host".into(),
            By::Pod if id <= 1 => "<no pod>".into(),
            _ => format!("<cgroup {id}>"),
        };
        return (l, id <= 1);
    };
    let l = match by {
        By::Container => c.container_label().to_string(),
        By::Pod => c.pod_label().unwrap_or_else(|| "<no pod>".into()),
        _ => c.path.clone(),
    };
    (l, true)
}

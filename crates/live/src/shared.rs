//! Several counting views on one probe set: each syscall and block request is counted once, in
//! composite groups, and every view is the sum of the groups it covers.
//!
//! A view ([`CountSpec`]: a filter, a kind, a grouping) can share when the kernel applies its
//! filter exactly and the filter's process part (pids, command names) and minimum latency are
//! those of the other views on the set ([`share_key`]); what still differs between the views
//! (syscalls, fd types, disks, the kind, the grouping) is told apart by the groups:
//!
//! - a syscall counts in one group per distinct *signature* of the views that do not look at the
//!   fd (which of them take it, and under which label), and in one group per signature and fd
//!   group for the views that do (an fd filter or grouping by class), fd groups a view of the
//!   signature counts only, views by syscall apart from the others (two increments rather than
//!   a group per syscall and class); fd groups are the fd types that no view tells apart, so a
//!   by-class view costs four groups, not eighteen, and a by-syscall view with an fd filter one
//!   per syscall;
//! - a block request counts in the group of its device.
//!
//! The probes run once per event whatever the number of views; the per-CPU histogram map holds
//! only the groups in use ([`SharedCounter::groups`], at most [`AGG_GROUPS`]).

use std::collections::HashMap;

use latscope_event::source::CountKey;
use latscope_event::{syscall_name, BlockDevice, EventKind, FdType, TraceHeader};
use latscope_filter::Filter;
use latscope_probe::{
    AggGroup, AggLayout, AggSnapshot, AggSums, BlockAgg, Probe, ProbeConfig, ProbeError, ProbeStats, SyscallSel,
    AGG_GROUPS, AGG_NONE,
};

use crate::session::{CountBy, SessionError};

/// Syscall numbers the probes' tables cover.
const NR_MAX: usize = 512;

/// One view's cumulative counts: (key, one count per kernel bucket) per label with any count.
pub type ViewCounts = Vec<(CountKey, Vec<u64>)>;

/// One view's cumulative in-kernel aggregates per label with any count.
pub type ViewAggregates = Vec<(CountKey, KeyAggregate)>;

/// What the kernel counted for one label of a view, since the probes started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyAggregate {
    /// Latencies: one count per kernel bucket ([`latscope_probe::agg_bucket_bounds`]).
    pub buckets: Vec<u64>,
    /// The exact sum of those latencies, ns.
    pub lat_ns: u64,
    /// Syscalls that returned a negative value (failed).
    pub errors: u64,
    /// Block requests: queue times, sizes and bytes, one per operation of
    /// [`latscope_probe::AGG_OPS`] (empty for syscalls).
    pub block: Vec<BlockAgg>,
}

impl KeyAggregate {
    /// Adds a group's counts (its latency buckets and sums, and its block aggregates if any).
    pub(crate) fn add(&mut self, buckets: &[u64], sums: AggSums, block: Option<&[BlockAgg]>) {
        add_words(&mut self.buckets, buckets);
        self.lat_ns += sums.lat_ns;
        self.errors += sums.errors;
        if let Some(ops) = block {
            self.block.resize_with(ops.len().max(self.block.len()), BlockAgg::default);
            for (mine, b) in self.block.iter_mut().zip(ops) {
                mine.bytes += b.bytes;
                mine.queue_ns += b.queue_ns;
                add_words(&mut mine.queue, &b.queue);
                add_words(&mut mine.size, &b.size);
            }
        }
    }
}

fn add_words(to: &mut Vec<u64>, from: &[u64]) {
    if to.len() < from.len() {
        to.resize(from.len(), 0);
    }
    for (t, f) in to.iter_mut().zip(from) {
        *t += f;
    }
}

/// The snapshot's groups as (group, buckets, sums, block aggregates).
pub(crate) fn snapshot_groups(snap: &AggSnapshot) -> impl Iterator<Item = (u32, &[u64], AggSums, Option<&[BlockAgg]>)> {
    snap.groups.iter().enumerate().map(|(i, (g, c))| {
        let block = snap.block.iter().find(|(bg, _)| bg == g).map(|(_, b)| b.as_slice());
        (*g, c.as_slice(), snap.sums.get(i).copied().unwrap_or_default(), block)
    })
}

/// A syscall's signature among views by fd: (view, the syscall's number if the view groups by it).
type RowSig = Vec<(usize, Option<u16>)>;

/// One view counted on a shared probe set.
#[derive(Debug, Clone)]
pub struct CountSpec {
    /// Events the view takes (applied exactly by the kernel: see [`share_key`]).
    pub filter: Filter,
    /// Syscalls or block requests.
    pub kind: EventKind,
    /// Grouping ([`CountBy::Disk`] for block requests; [`CountBy::Syscall`] and
    /// [`CountBy::Class`] for syscalls; [`CountBy::All`] for either).
    pub by: CountBy,
}

/// What views must have in common to share a probe set: the filter's process part and minimum
/// latency, which the kernel tests before counting.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShareKey {
    pids: Option<Vec<u32>>,
    comms: Option<Vec<String>>,
    min_lat_ns: u64,
}

/// A view reduced to what the groups tell apart.
#[derive(Debug, Clone)]
struct Parsed {
    kind: EventKind,
    by: CountBy,
    /// Syscalls taken (syscall views), by number.
    sys: Vec<bool>,
    /// Fd types taken, or `None` for any (syscall views).
    fds: Option<Vec<FdType>>,
    /// Devices taken (block views).
    devs: Vec<u32>,
    /// Takes every device, those that appear later too (a block view without a disk filter).
    all_devs: bool,
}

impl Parsed {
    fn needs_fd(&self) -> bool {
        self.fds.is_some() || self.by == CountBy::Class
    }
}

fn header_of(devices: &[BlockDevice]) -> TraceHeader {
    TraceHeader { block_devices: devices.to_vec(), ..Default::default() }
}

/// The key of the probe set `spec` can share (views with equal keys share one), or why it
/// cannot count on a shared set. `devices`: the block devices, to resolve disk names.
pub fn share_key(spec: &CountSpec, devices: &[BlockDevice]) -> Result<ShareKey, String> {
    parse(spec, devices).map(|(k, _)| k)
}

fn parse(spec: &CountSpec, devices: &[BlockDevice]) -> Result<(ShareKey, Parsed), String> {
    match (spec.kind, spec.by) {
        (EventKind::Syscall, CountBy::Disk) => return Err("syscalls have no disk".into()),
        (EventKind::Block, CountBy::Syscall | CountBy::Class) => {
            return Err("block requests have no syscall or fd class".into())
        }
        (EventKind::Proc, _) => return Err("process events have no latency".into()),
        _ => {}
    }
    if let Some(why) = crate::config::inexact(&spec.filter, &header_of(devices), spec.kind, false) {
        return Err(why);
    }
    let mut p = spec.filter.pushdown();
    p.resolve_disks(|name| devices.iter().find(|d| d.name == name).map(|d| d.dev));
    let block = spec.kind == EventKind::Block;
    let takes_kind = p.kinds.is_none_or(|k| if block { k.block } else { k.syscall });
    let key = ShareKey {
        // The process part is not tested for block requests (the filter is exact without one).
        pids: if block { None } else { p.pids.clone() },
        comms: if block { None } else { p.comms.clone() },
        min_lat_ns: p.min_latency_ns.unwrap_or(0),
    };
    let sys = (0..NR_MAX)
        .map(|nr| {
            takes_kind
                && !block
                && syscall_name(nr as u16).is_some()
                && p.syscalls.as_ref().is_none_or(|v| v.contains(&(nr as u16)))
        })
        .collect();
    let devs = if !block || !takes_kind {
        Vec::new()
    } else {
        match &p.block_devs {
            Some(v) => v.clone(),
            None => devices.iter().map(|d| d.dev).collect(),
        }
    };
    let all_devs = block && takes_kind && p.block_devs.is_none();
    Ok((key, Parsed { kind: spec.kind, by: spec.by, sys, fds: p.fd_types.clone(), devs, all_devs }))
}

/// The groups of a probe set and what each adds to which view.
#[derive(Debug, Clone)]
struct Plan {
    layout: AggLayout,
    /// Per group: (view, the view's key) it adds into.
    contrib: Vec<Vec<(usize, CountKey)>>,
    /// Syscalls any view takes.
    syscalls: Vec<u16>,
    /// Devices any view takes, in group order from `layout.dev_base`.
    devs: Vec<u32>,
}

fn label(by: CountBy, nr: u16, class: &'static str, dev: u32) -> CountKey {
    match by {
        CountBy::All => CountKey::All,
        CountBy::Syscall => CountKey::Syscall(nr),
        CountBy::Class => CountKey::Class(class),
        CountBy::Disk => CountKey::Dev(dev),
    }
}

fn plan(views: &[Parsed]) -> Plan {
    let sys_views: Vec<usize> = (0..views.len()).filter(|&i| views[i].kind == EventKind::Syscall).collect();
    let (fd_views, plain): (Vec<usize>, Vec<usize>) = sys_views.iter().partition(|&&i| views[i].needs_fd());
    let mut contrib: Vec<Vec<(usize, CountKey)>> = Vec::new();
    let mut layout = AggLayout {
        sys_group: vec![AGG_NONE; NR_MAX],
        sys_fd_base: [vec![AGG_NONE; NR_MAX], vec![AGG_NONE; NR_MAX]],
        sys_fd_mask: [vec![0; NR_MAX], vec![0; NR_MAX]],
        fd_group: vec![0; 32],
        dev_other: AGG_NONE,
        ..Default::default()
    };
    // Views that do not look at the fd: one group per signature of a syscall.
    let mut seen: HashMap<Vec<(usize, CountKey)>, usize> = HashMap::new();
    for nr in 0..NR_MAX {
        let sig: Vec<(usize, CountKey)> =
            plain.iter().filter(|&&i| views[i].sys[nr]).map(|&i| (i, label(views[i].by, nr as u16, "", 0))).collect();
        if sig.is_empty() {
            continue;
        }
        let g = *seen.entry(sig.clone()).or_insert_with(|| {
            contrib.push(sig);
            contrib.len() - 1
        });
        layout.sys_group[nr] = g as u16;
    }
    // Fd groups: fd types no fd-looking view tells apart share one.
    let mut fd_sigs: Vec<Vec<(bool, &'static str)>> = Vec::new();
    let mut fd_class: Vec<&'static str> = Vec::new();
    for t in FdType::ALL {
        let sig: Vec<(bool, &'static str)> = fd_views
            .iter()
            .map(|&i| {
                let v = &views[i];
                let takes = v.fds.as_ref().is_none_or(|f| f.contains(&t));
                (takes, if v.by == CountBy::Class { t.io_class() } else { "" })
            })
            .collect();
        let g = match fd_sigs.iter().position(|s| *s == sig) {
            Some(g) => g,
            None => {
                fd_sigs.push(sig);
                fd_class.push(t.io_class());
                fd_sigs.len() - 1
            }
        };
        layout.fd_group[t as usize] = g as u32;
    }
    // Views that do, in two factors (views by syscall, the others: a view by class next to a
    // view by syscall would otherwise need a group per syscall and class): per signature of a
    // syscall, one group per fd group some view of the signature counts.
    let (by_sys, by_other): (Vec<usize>, Vec<usize>) = fd_views.iter().partition(|&&i| views[i].by == CountBy::Syscall);
    for (k, factor) in [by_other, by_sys].into_iter().enumerate() {
        let mut rows: HashMap<RowSig, (usize, u32)> = HashMap::new();
        for nr in 0..NR_MAX {
            let sig: RowSig = factor
                .iter()
                .filter(|&&i| views[i].sys[nr])
                .map(|&i| (i, (views[i].by == CountBy::Syscall).then_some(nr as u16)))
                .collect();
            if sig.is_empty() {
                continue;
            }
            let (base, mask) = match rows.get(&sig) {
                Some(&r) => r,
                None => {
                    let base = contrib.len();
                    let mut mask = 0u32;
                    for (g, fsig) in fd_sigs.iter().enumerate() {
                        let adds: Vec<(usize, CountKey)> = sig
                            .iter()
                            .filter(|(i, _)| fsig[fd_views.iter().position(|v| v == i).unwrap_or(0)].0)
                            .map(|&(i, _)| (i, label(views[i].by, nr as u16, fd_class[g], 0)))
                            .collect();
                        if !adds.is_empty() {
                            mask |= 1 << g;
                            contrib.push(adds);
                        }
                    }
                    rows.insert(sig, (base, mask));
                    (base, mask)
                }
            };
            if mask != 0 {
                layout.sys_fd_base[k][nr] = base as u16;
                layout.sys_fd_mask[k][nr] = mask;
            }
        }
    }
    // Block requests: one group per device.
    let mut devs: Vec<u32> = views.iter().flat_map(|v| v.devs.iter().copied()).collect();
    devs.sort_unstable();
    devs.dedup();
    layout.dev_base = contrib.len() as u32;
    for &d in &devs {
        contrib.push(
            (0..views.len())
                .filter(|&i| views[i].devs.contains(&d))
                .map(|i| (i, label(views[i].by, 0, "", d)))
                .collect(),
        );
    }
    // Disks that appear after the start: the views of every disk without a grouping count them
    // (a view by disk knows the disks of the start only, as a session of its own does).
    let later: Vec<(usize, CountKey)> = (0..views.len())
        .filter(|&i| views[i].all_devs && views[i].by == CountBy::All)
        .map(|i| (i, CountKey::All))
        .collect();
    if !later.is_empty() {
        layout.dev_other = contrib.len() as u16;
        contrib.push(later);
    }
    layout.groups = contrib.len();
    let syscalls = (0..NR_MAX)
        .filter(|&nr| layout.sys_group[nr] != AGG_NONE || layout.sys_fd_base.iter().any(|b| b[nr] != AGG_NONE))
        .map(|nr| nr as u16)
        .collect();
    Plan { layout, contrib, syscalls, devs }
}

/// Splits views into probe sets: each inner list (indices into `specs`, in order) shares one
/// probe set; the views that cannot share are returned with why. A set holds at most
/// [`AGG_GROUPS`] groups: a view that would take a set past it starts another.
pub fn plan_sharing(specs: &[CountSpec], devices: &[BlockDevice]) -> (Vec<Vec<usize>>, Vec<(usize, String)>) {
    let mut sets: Vec<(ShareKey, Vec<usize>, Vec<Parsed>)> = Vec::new();
    let mut alone = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let (key, parsed) = match parse(spec, devices) {
            Ok(k) => k,
            Err(why) => {
                alone.push((i, why));
                continue;
            }
        };
        let fits = |views: &[Parsed]| {
            let mut v = views.to_vec();
            v.push(parsed.clone());
            plan(&v).layout.groups <= AGG_GROUPS
        };
        match sets.iter_mut().find(|(k, _, views)| *k == key && fits(views)) {
            Some((_, members, views)) => {
                members.push(i);
                views.push(parsed);
            }
            None if plan(std::slice::from_ref(&parsed)).layout.groups <= AGG_GROUPS => {
                sets.push((key, vec![i], vec![parsed]))
            }
            None => alone.push((i, format!("it needs more than the {AGG_GROUPS} histogram groups of a probe set"))),
        }
    }
    (sets.into_iter().map(|(_, m, _)| m).collect(), alone)
}

/// One probe set counting in the kernel for several views (see the module documentation).
pub struct SharedCounter {
    probe: Probe,
    plan: Plan,
    views: usize,
    devices: Vec<BlockDevice>,
}

impl SharedCounter {
    /// Loads and attaches the probes for `specs`, which must all share one [`share_key`]
    /// (see [`plan_sharing`]).
    pub fn start(specs: &[CountSpec]) -> Result<SharedCounter, SessionError> {
        latscope_probe::check_environment()?;
        let devices = latscope_probe::snapshot::block_devices();
        let mut key = None;
        let mut views = Vec::with_capacity(specs.len());
        for s in specs {
            let (k, p) = parse(s, &devices).map_err(SessionError::Invalid)?;
            if key.as_ref().is_some_and(|key| *key != k) {
                return Err(SessionError::Invalid(
                    "views with different process filters or minimum latencies cannot share probes".into(),
                ));
            }
            key = Some(k);
            views.push(p);
        }
        let key = key.ok_or_else(|| SessionError::Nothing("no view to count".into()))?;
        let plan = plan(&views);
        if plan.layout.groups > AGG_GROUPS {
            return Err(SessionError::Invalid(format!(
                "the views need {} histogram groups: a probe set holds {AGG_GROUPS}",
                plan.layout.groups
            )));
        }
        if plan.syscalls.is_empty() && plan.devs.is_empty() && plan.layout.dev_other == AGG_NONE {
            return Err(SessionError::Nothing("the filters exclude every syscall and block request".into()));
        }
        let nonempty = |v: Option<Vec<u32>>| v.map(|v| if v.is_empty() { vec![u32::MAX] } else { v });
        let cfg = ProbeConfig {
            syscalls: if plan.syscalls.is_empty() { SyscallSel::Off } else { SyscallSel::Only(plan.syscalls.clone()) },
            block: !plan.devs.is_empty() || plan.layout.dev_other != AGG_NONE,
            procs: false,
            pids: nonempty(key.pids).unwrap_or_default(),
            comms: key.comms.map(|c| if c.is_empty() { vec!["\u{1}".into()] } else { c }).unwrap_or_default(),
            min_lat_ns: key.min_lat_ns,
            devs: plan.devs.clone(),
            aggregate: Some(AggGroup::Composite),
            agg_layout: Some(plan.layout.clone()),
            ring_bytes: crate::RING_BYTES_RANGE.0,
            ..Default::default()
        };
        let probe = Probe::start(&cfg, &header_of(&devices))?;
        Ok(SharedCounter { probe, plan, views: specs.len(), devices })
    }

    /// Cumulative counts since the start, for each view in the order given to
    /// [`SharedCounter::start`].
    pub fn read_counts(&self) -> Result<Vec<ViewCounts>, ProbeError> {
        Ok(self.read_aggregates()?.into_iter().map(|v| v.into_iter().map(|(k, a)| (k, a.buckets)).collect()).collect())
    }

    /// Cumulative aggregates since the start (latency buckets, exact sums, failed syscalls,
    /// block queue times, sizes and bytes), for each view in the order given to
    /// [`SharedCounter::start`].
    pub fn read_aggregates(&self) -> Result<Vec<ViewAggregates>, ProbeError> {
        let snap = self.probe.read_agg()?;
        let mut out: Vec<HashMap<CountKey, KeyAggregate>> = vec![HashMap::new(); self.views];
        for (g, counts, sums, block) in snapshot_groups(&snap) {
            for (view, key) in self.plan.contrib.get(g as usize).map_or(&[][..], |c| c.as_slice()) {
                out[*view].entry(*key).or_default().add(counts, sums, block);
            }
        }
        Ok(out.into_iter().map(|m| m.into_iter().collect()).collect())
    }

    /// Histogram groups the set uses (each [`latscope_probe::AGG_BUCKETS`] counters of 8 bytes
    /// per CPU in the kernel).
    pub fn groups(&self) -> usize {
        self.plan.layout.groups
    }

    /// The block devices present at the start (to name [`CountKey::Dev`] keys).
    pub fn devices(&self) -> &[BlockDevice] {
        &self.devices
    }

    /// The in-kernel counters of the probes.
    pub fn stats(&self) -> ProbeStats {
        self.probe.stats()
    }

    /// CPU time the probes have run in the kernel, ns (see [`crate::LiveSession::probe_run_time_ns`]).
    pub fn probe_run_time_ns(&self) -> u64 {
        self.probe.run_time_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(f: &str, kind: EventKind, by: CountBy) -> CountSpec {
        CountSpec { filter: Filter::parse(f).unwrap(), kind, by }
    }

    fn disks() -> Vec<BlockDevice> {
        ["vda", "vdb"]
            .iter()
            .enumerate()
            .map(|(i, n)| BlockDevice { dev: (253 << 20) | i as u32, name: n.to_string(), ..Default::default() })
            .collect()
    }

    fn nr(name: &str) -> u16 {
        latscope_event::syscall_nr(name).unwrap()
    }

    /// Sums the groups an event falls in, as the kernel counts them, into each view.
    fn count(plan: &Plan, views: usize, events: &[(u16, FdType)]) -> Vec<HashMap<CountKey, u64>> {
        let mut out = vec![HashMap::new(); views];
        for &(n, t) in events {
            let mut groups = Vec::new();
            if plan.layout.sys_group[n as usize] != AGG_NONE {
                groups.push(plan.layout.sys_group[n as usize] as usize);
            }
            for k in 0..2 {
                let (base, mask, g) = (
                    plan.layout.sys_fd_base[k][n as usize],
                    plan.layout.sys_fd_mask[k][n as usize],
                    plan.layout.fd_group[t as usize],
                );
                if base != AGG_NONE && mask & (1 << g) != 0 {
                    groups.push(base as usize + (mask & ((1 << g) - 1)).count_ones() as usize);
                }
            }
            for g in groups {
                for (v, k) in &plan.contrib[g] {
                    *out[*v].entry(*k).or_insert(0) += 1;
                }
            }
        }
        out
    }

    #[test]
    fn each_view_gets_exactly_its_events_from_the_shared_groups() {
        let sys = EventKind::Syscall;
        let specs = [
            spec("", sys, CountBy::Syscall),
            spec("", sys, CountBy::Class),
            spec("evt.type in (read, write)", sys, CountBy::All),
            spec("fd.type = file and evt.type = write", sys, CountBy::Syscall),
            spec("fd.type in (ipv4, ipv6)", sys, CountBy::Class),
            spec("", EventKind::Block, CountBy::Disk),
            spec("blk.disk = vdb", EventKind::Block, CountBy::All),
            spec("", EventKind::Block, CountBy::All),
        ];
        let views: Vec<Parsed> = specs.iter().map(|s| parse(s, &disks()).unwrap().1).collect();
        let p = plan(&views);
        // All syscalls for the first view, four classes by two fd views, two disks: far below
        // one group per (syscall, fd type).
        assert!(p.layout.groups < 400 + 4 * 4 + 3, "{} groups", p.layout.groups);
        assert_eq!(p.devs.len(), 2);
        let (r, w, o) = (nr("read"), nr("write"), nr("openat"));
        let events = [
            (r, FdType::File),
            (r, FdType::Ipv4),
            (w, FdType::File),
            (w, FdType::File),
            (w, FdType::Pipe),
            (o, FdType::Unknown),
            (o, FdType::Ipv6),
        ];
        let got = count(&p, specs.len(), &events);
        let m = |v: &[(CountKey, u64)]| v.iter().copied().collect::<HashMap<_, _>>();
        assert_eq!(got[0], m(&[(CountKey::Syscall(r), 2), (CountKey::Syscall(w), 3), (CountKey::Syscall(o), 2)]));
        assert_eq!(
            got[1],
            m(&[
                (CountKey::Class("file"), 3),
                (CountKey::Class("net"), 2),
                (CountKey::Class("ipc"), 1),
                (CountKey::Class("other"), 1)
            ])
        );
        assert_eq!(got[2], m(&[(CountKey::All, 5)]));
        assert_eq!(got[3], m(&[(CountKey::Syscall(w), 2)]));
        assert_eq!(got[4], m(&[(CountKey::Class("net"), 2)]));
        // Block requests: one group per device, each disk view sums its own.
        let vdb = disks()[1].dev;
        let g = p.layout.dev_base as usize + p.devs.iter().position(|&d| d == vdb).unwrap();
        assert_eq!(p.contrib[g], vec![(5, CountKey::Dev(vdb)), (6, CountKey::All), (7, CountKey::All)]);
        // Disks that appear later: in the view of every disk without a grouping only.
        assert_eq!(p.contrib[p.layout.dev_other as usize], vec![(7, CountKey::All)]);
    }

    #[test]
    fn views_share_by_process_filter_and_say_why_they_cannot() {
        let sys = EventKind::Syscall;
        let specs = [
            spec("proc.name = db", sys, CountBy::Syscall),
            spec("", sys, CountBy::All),
            spec("proc.name = db and fd.type = file", sys, CountBy::Class),
            spec("fd.name contains /var", sys, CountBy::All),
            spec("evt.type = read", sys, CountBy::Syscall),
            spec("evt.latency > 1ms", sys, CountBy::All),
            spec("", EventKind::Block, CountBy::Disk),
        ];
        let (sets, alone) = plan_sharing(&specs, &disks());
        assert_eq!(sets, vec![vec![0, 2], vec![1, 4, 6], vec![5]]);
        assert_eq!(alone.len(), 1);
        assert_eq!(alone[0].0, 3);
        assert!(alone[0].1.contains("fd.name"), "{}", alone[0].1);
        // Views by syscall and by class, all syscalls, with and without fd filters: one set.
        let specs = [
            spec("", sys, CountBy::Syscall),
            spec("", sys, CountBy::Class),
            spec("fd.type = file", sys, CountBy::Syscall),
            spec("fd.type in (ipv4, ipv6)", sys, CountBy::Class),
        ];
        let (sets, alone) = plan_sharing(&specs, &disks());
        assert_eq!((sets, alone), (vec![vec![0, 1, 2, 3]], vec![]));
    }
}

//! The tracks of an exported trace: a process track per process, a thread track per thread
//! (with extra lanes for calls that overlap on one thread), a track per disk (lanes for requests
//! in flight at once, lanes for their queue time), and the counter tracks.
//!
//! Slices on one track must nest strictly (Perfetto's rule for thread and async tracks alike).
//! A call of a thread goes on the first of its thread's lanes whose last slice ended strictly
//! before the call began, a new lane when none did: a recording's calls on one thread never
//! overlap (the thread is in one call at a time), so everything lands on the thread's own track,
//! and anything else (damaged or synthetic traces) still nests. Block requests in flight
//! together on a disk take lanes the same way.

use std::collections::HashMap;

use foldhash::fast::RandomState;
use latscope_event::{dev_major_minor, CgroupInfo, TraceHeader};

use super::intern::word;
use super::proto::{self, track};

/// What a track is, for its descriptor.
#[derive(Debug, Clone)]
enum Kind {
    Process {
        pid: u32,
    },
    Thread {
        pid: u32,
        tid: u32,
    },
    /// A named track (a disk, a lane), child of `parent` when it has one.
    Named,
    Counter {
        unit: u64,
        unit_name: &'static str,
    },
}

#[derive(Debug, Clone)]
struct Track {
    parent: u64,
    kind: Kind,
    name: String,
    description: &'static str,
    cmdline: Vec<String>,
    labels: Vec<String>,
    /// Bumped when the name changes: a file re-declares the track.
    version: u32,
}

/// Lanes of one thread or disk: each lane's track and the end of its last slice.
#[derive(Debug, Default)]
struct Lanes {
    lanes: Vec<(u64, u64)>,
}

impl Lanes {
    /// The first lane free strictly before `ts` (taken until `end`), or `None` (a new lane is needed).
    fn take(&mut self, ts: u64, end: u64) -> Option<u64> {
        for (uuid, last) in &mut self.lanes {
            if *last < ts {
                *last = end;
                return Some(*uuid);
            }
        }
        None
    }
}

struct ThreadState {
    uuid: u64,
    /// The command name the track has (a thread renamed, or its process exec'd, is renamed).
    comm: String,
    lanes: Lanes,
}

struct DiskState {
    name: String,
    lanes: Lanes,
    queue: Lanes,
}

/// The counter tracks, in the order of [`COUNTERS`].
#[derive(Debug, Clone, Copy)]
pub enum Counter {
    SyscallRate,
    SyscallP50,
    SyscallP99,
    SyscallBytes,
    BlockRate,
    BlockP50,
    BlockP99,
    BlockBytes,
    Lost,
}

/// Name, unit and unit name of each counter track.
pub const COUNTERS: [(&str, u64, &str); 9] = [
    ("latscope: syscalls/s", track::UNIT_COUNT, "calls/s"),
    ("latscope: syscall latency p50", track::UNIT_TIME_NS, "ns"),
    ("latscope: syscall latency p99", track::UNIT_TIME_NS, "ns"),
    ("latscope: syscall bytes/s", track::UNIT_SIZE_BYTES, "bytes/s"),
    ("latscope: block requests/s", track::UNIT_COUNT, "requests/s"),
    ("latscope: block latency p50", track::UNIT_TIME_NS, "ns"),
    ("latscope: block latency p99", track::UNIT_TIME_NS, "ns"),
    ("latscope: block bytes/s", track::UNIT_SIZE_BYTES, "bytes/s"),
    ("latscope: lost events", track::UNIT_COUNT, "events"),
];

/// Every track of the export, by uuid.
pub struct Tracks {
    /// By uuid - 1 (uuids are handed out from 1 up).
    tracks: Vec<Track>,
    procs: HashMap<u32, u64, RandomState>,
    threads: HashMap<(u32, u32), ThreadState, RandomState>,
    disks: HashMap<u32, DiskState, RandomState>,
    counters: [u64; COUNTERS.len()],
    /// The processes of the recording's start snapshot: name and command line.
    snapshot: HashMap<u32, (String, String), RandomState>,
    /// The trace's cgroups by id, and how many of the header's are in.
    cgroups: HashMap<u64, CgroupInfo, RandomState>,
    cgroups_seen: usize,
}

impl Tracks {
    pub fn new(header: &TraceHeader) -> Tracks {
        let mut t = Tracks {
            // Small numbers from 1: a uuid is written twice per slice.
            tracks: Vec::new(),
            procs: HashMap::default(),
            threads: HashMap::default(),
            disks: HashMap::default(),
            counters: [0; COUNTERS.len()],
            snapshot: header.processes.iter().map(|p| (p.pid, (p.comm.clone(), p.cmdline.clone()))).collect(),
            cgroups: HashMap::default(),
            cgroups_seen: 0,
        };
        t.learn_cgroups(header);
        for (i, (name, unit, unit_name)) in COUNTERS.iter().enumerate() {
            t.counters[i] = t.add(0, Kind::Counter { unit: *unit, unit_name }, (*name).to_string());
        }
        t
    }

    /// Takes in the cgroups the recording met since (containers started meanwhile).
    pub fn learn_cgroups(&mut self, header: &TraceHeader) {
        if header.cgroups.len() > self.cgroups_seen {
            for c in &header.cgroups[self.cgroups_seen..] {
                self.cgroups.insert(c.id, c.clone());
            }
            self.cgroups_seen = header.cgroups.len();
        }
    }

    fn add(&mut self, parent: u64, kind: Kind, name: String) -> u64 {
        let t = Track { parent, kind, name, description: "", cmdline: Vec::new(), labels: Vec::new(), version: 0 };
        self.tracks.push(t);
        self.tracks.len() as u64
    }

    fn get(&self, uuid: u64) -> Option<&Track> {
        self.tracks.get((uuid as usize).wrapping_sub(1))
    }

    fn by_uuid(tracks: &mut [Track], uuid: u64) -> Option<&mut Track> {
        tracks.get_mut((uuid as usize).wrapping_sub(1))
    }

    fn track_mut(&mut self, uuid: u64) -> Option<&mut Track> {
        Self::by_uuid(&mut self.tracks, uuid)
    }

    /// The counter track `c`.
    pub fn counter(&self, c: Counter) -> u64 {
        self.counters[c as usize]
    }

    /// The process track of `pid`, made with the name `comm` the first time (the snapshot's
    /// name and command line when the process was running at the start).
    pub fn process(&mut self, pid: u32, comm: &str, cgroup: u64) -> u64 {
        if let Some(&u) = self.procs.get(&pid) {
            return u;
        }
        let (name, cmdline) = match self.snapshot.get(&pid) {
            Some((c, cl)) => (c.clone(), cl.split(' ').filter(|s| !s.is_empty()).map(String::from).collect()),
            None => (comm.to_string(), Vec::new()),
        };
        let name = if name.is_empty() { format!("pid {pid}") } else { name };
        let labels = self.cgroups.get(&cgroup).map(container_labels).unwrap_or_default();
        let uuid = self.add(0, Kind::Process { pid }, name);
        if let Some(t) = self.track_mut(uuid) {
            t.cmdline = cmdline;
            t.labels = labels;
        }
        self.procs.insert(pid, uuid);
        uuid
    }

    /// Names process `pid` anew (an exec, or its main thread seen after another thread).
    pub fn rename_process(&mut self, pid: u32, name: &str, cmdline: Option<&str>) {
        let Some(t) = self.procs.get(&pid).and_then(|&u| Self::by_uuid(&mut self.tracks, u)) else { return };
        if name.is_empty() || (t.name == name && cmdline.is_none()) {
            return;
        }
        t.name = name.to_string();
        if let Some(c) = cmdline {
            t.cmdline = c.split(' ').filter(|s| !s.is_empty()).map(String::from).collect();
        }
        t.version += 1;
    }

    /// The track of a call of thread `tid` of `pid` from `ts` to `end`: the thread's own, or a
    /// lane beside it when the call overlaps another on that thread.
    pub fn thread_lane(&mut self, pid: u32, tid: u32, comm: &[u8], cgroup: u64, ts: u64, end: u64) -> u64 {
        if let Some(th) = self.threads.get_mut(&(pid, tid)) {
            if comm.is_empty() || same_comm(th.comm.as_bytes(), comm) {
                // The common case: one look-up.
                if let Some(u) = th.lanes.take(ts, end) {
                    return u;
                }
            } else {
                let comm = String::from_utf8_lossy(comm);
                th.comm = comm.to_string();
                if let Some(t) = Self::by_uuid(&mut self.tracks, th.uuid) {
                    t.name = comm.to_string();
                    t.version += 1;
                }
                if tid == pid {
                    // The main thread renamed (an exec): its process too.
                    self.rename_process(pid, &comm, None);
                }
                let th = self.threads.get_mut(&(pid, tid)).expect("looked up above");
                if let Some(u) = th.lanes.take(ts, end) {
                    return u;
                }
            }
        } else {
            let comm = &*String::from_utf8_lossy(comm);
            let p = self.process(pid, comm, cgroup);
            // The main thread names its process better than the first thread seen did.
            if tid == pid && !self.snapshot.contains_key(&pid) {
                self.rename_process(pid, comm, None);
            }
            let name = if comm.is_empty() { format!("tid {tid}") } else { comm.to_string() };
            let uuid = self.add(p, Kind::Thread { pid, tid }, name);
            let lanes = Lanes { lanes: vec![(uuid, end)] };
            self.threads.insert((pid, tid), ThreadState { uuid, comm: comm.to_string(), lanes });
            return uuid;
        }
        let (thread, k) = {
            let th = &self.threads[&(pid, tid)];
            (th.uuid, th.lanes.lanes.len())
        };
        let name = format!("{} {tid}: overlapping calls ({})", self.tracks[thread as usize - 1].name, k + 1);
        let uuid = self.add(thread, Kind::Named, name);
        if let Some(t) = self.track_mut(uuid) {
            t.description = "calls of this thread that overlap those on the thread's own track (not seen in recordings: a thread is in one call at a time)";
        }
        if let Some(th) = self.threads.get_mut(&(pid, tid)) {
            th.lanes.lanes.push((uuid, end));
        }
        uuid
    }

    /// The track of a block request of disk `dev` on the device from `ts` to `end` (`queue`:
    /// its time queued before, on the disk's queue lanes).
    pub fn disk_lane(&mut self, header: &TraceHeader, dev: u32, ts: u64, end: u64, queue: bool) -> u64 {
        if !self.disks.contains_key(&dev) {
            let (ma, mi) = dev_major_minor(dev);
            let name = match header.disk_name(dev) {
                Some(n) => format!("disk {n} ({ma}:{mi})"),
                None => format!("disk {ma}:{mi}"),
            };
            let uuid = self.add(0, Kind::Named, name.clone());
            if let Some(t) = self.track_mut(uuid) {
                t.description =
                    "block requests on the device, issue to completion (one lane per request in flight at once)";
            }
            self.disks
                .insert(dev, DiskState { name, lanes: Lanes { lanes: vec![(uuid, 0)] }, queue: Lanes::default() });
        }
        let d = self.disks.get_mut(&dev).expect("just added");
        let lanes = if queue { &mut d.queue } else { &mut d.lanes };
        if let Some(u) = lanes.take(ts, end) {
            return u;
        }
        let parent = d.lanes.lanes[0].0;
        let k = if queue { d.queue.lanes.len() + 1 } else { d.lanes.lanes.len() + 1 };
        let name = if queue { format!("{}: queued ({k})", d.name) } else { format!("{}: on the device ({k})", d.name) };
        let uuid = self.add(parent, Kind::Named, name);
        if let Some(t) = self.track_mut(uuid) {
            t.description = if queue {
                "block requests queued: inserted into the scheduler to issued to the driver"
            } else {
                "block requests on the device at the same time as those of the lanes above"
            };
        }
        let d = self.disks.get_mut(&dev).expect("just added");
        if queue { &mut d.queue } else { &mut d.lanes }.lanes.push((uuid, end));
        uuid
    }

    /// The parent of `uuid` (0: none) and its version.
    #[inline]
    pub fn parent_and_version(&self, uuid: u64) -> (u64, u32) {
        self.get(uuid).map_or((0, 0), |t| (t.parent, t.version))
    }

    /// Writes the `TrackDescriptor` of `uuid` as the body of a packet's `track_descriptor`.
    pub fn encode(&self, uuid: u64, b: &mut Vec<u8>) {
        let Some(t) = self.get(uuid) else { return };
        let m = proto::begin(b, super::proto::packet::TRACK_DESCRIPTOR);
        proto::uint(b, track::UUID, uuid);
        if t.parent != 0 {
            proto::uint(b, track::PARENT_UUID, t.parent);
        }
        match &t.kind {
            Kind::Process { pid } => {
                let p = proto::begin(b, track::PROCESS);
                proto::int(b, track::PROCESS_PID, i64::from(*pid));
                for c in &t.cmdline {
                    proto::string(b, track::PROCESS_CMDLINE, c);
                }
                proto::string(b, track::PROCESS_NAME, &t.name);
                for l in &t.labels {
                    proto::string(b, track::PROCESS_LABELS, l);
                }
                proto::end(b, p);
            }
            Kind::Thread { pid, tid } => {
                let th = proto::begin(b, track::THREAD);
                proto::int(b, track::THREAD_PID, i64::from(*pid));
                proto::int(b, track::THREAD_TID, i64::from(*tid));
                proto::string(b, track::THREAD_NAME, &t.name);
                proto::end(b, th);
            }
            Kind::Named => proto::string(b, track::NAME, &t.name),
            Kind::Counter { unit, unit_name } => {
                proto::string(b, track::NAME, &t.name);
                let c = proto::begin(b, track::COUNTER);
                proto::uint(b, track::COUNTER_UNIT, *unit);
                proto::string(b, track::COUNTER_UNIT_NAME, unit_name);
                proto::end(b, c);
            }
        }
        if !t.description.is_empty() {
            proto::string(b, track::DESCRIPTION, t.description);
        }
        proto::end(b, m);
    }

    /// Processes and threads that have a track.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.procs.len(), self.threads.len(), self.disks.len())
    }
}

/// Whether two command names are the same: compared as two words when short (a thread's name
/// is at most 15 bytes), without a call, once per call exported.
#[inline]
fn same_comm(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.len() > 16 {
        return a == b;
    }
    let (a0, a1) = a.split_at(a.len().min(8));
    let (b0, b1) = b.split_at(b.len().min(8));
    word(a0) == word(b0) && word(a1) == word(b1)
}

/// A container's process labels: `container=NAME`, `image=...`, `pod=NAMESPACE/NAME`.
fn container_labels(c: &CgroupInfo) -> Vec<String> {
    let mut v = Vec::new();
    if !c.container_id.is_empty() {
        v.push(format!("container={}", c.container_label()));
        if !c.image.is_empty() {
            v.push(format!("image={}", c.image));
        }
    }
    if let Some(p) = c.pod_label() {
        v.push(format!("pod={p}"));
    }
    if !c.path.is_empty() && c.path != "/" {
        v.push(format!("cgroup={}", c.path));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_that_follow_each_other_share_the_threads_track_and_overlaps_take_lanes() {
        let h = TraceHeader::default();
        let mut t = Tracks::new(&h);
        let a = t.thread_lane(10, 11, b"app", 0, 100, 200);
        assert_eq!(t.thread_lane(10, 11, b"app", 0, 201, 300), a);
        // Touching is overlapping for Perfetto's nesting (an end and a begin at one instant).
        let b = t.thread_lane(10, 11, b"app", 0, 300, 400);
        assert_ne!(b, a);
        // The thread's own track is free again after 300.
        assert_eq!(t.thread_lane(10, 11, b"app", 0, 350, 360), a);
        let c = t.thread_lane(10, 11, b"app", 0, 355, 358);
        assert!(c != a && c != b);
        assert_eq!(t.parent_and_version(b).0, a, "a lane is a child of its thread's track");
        let p = t.parent_and_version(a).0;
        assert_eq!(p, t.process(10, "", 0));
        let mut d = Vec::new();
        t.encode(a, &mut d);
        assert!(!d.is_empty());
    }

    #[test]
    fn command_names_compare_as_their_bytes() {
        let names: [&[u8]; 8] =
            [b"", b"a", b"ab", b"app", b"appx", b"kworker/0:1H", b"0123456789abcdef", b"a name of twenty"];
        for a in names {
            for b in names {
                assert_eq!(same_comm(a, b), a == b, "{a:?} {b:?}");
            }
            let mut c = a.to_vec();
            if let Some(l) = c.last_mut() {
                *l ^= 1;
                assert!(!same_comm(a, &c));
            }
        }
    }

    #[test]
    fn requests_in_flight_together_take_lanes_of_their_disk() {
        let h = TraceHeader::default();
        let mut t = Tracks::new(&h);
        let x = t.disk_lane(&h, 8 << 20, 0, 100, false);
        let y = t.disk_lane(&h, 8 << 20, 50, 150, false);
        assert_ne!(x, y);
        assert_eq!(t.disk_lane(&h, 8 << 20, 120, 130, false), x);
        let q = t.disk_lane(&h, 8 << 20, 0, 10, true);
        assert!(q != x && q != y);
        assert_eq!(t.counts(), (0, 0, 1));
    }
}

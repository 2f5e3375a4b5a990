//! The events table's values from a trace's event batches: each trace's context (host, clock,
//! disks), the names of kinds, operations and file types, and the selection of a block's rows.
//! The encoder (`chunk`) reads event batches through them directly.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arrow_array::{ArrayRef, StringArray};
use latscope_event::waits::WaitKind;
use latscope_event::{op_name, CgroupInfo, EventBatch, FdType, TraceHeader, WHY_PART_NAMES};

/// Syscall numbers given their own `op` entry; others are `unknown`.
const SYSCALL_SLOTS: usize = 1024;
/// Block op codes given their own entry.
const BLOCK_SLOTS: usize = 64;
/// Process op codes given their own entry.
const PROC_SLOTS: usize = 8;
const KIND_NAMES: [&str; 4] = ["syscall", "block", "proc", "unknown"];
/// `waker_kind` by the trace's `waker_ctx` (0 none, 1 a thread, 2 a timer, 3 a softirq).
const WAKER_KINDS: [&str; 4] = ["", "thread", "timer", "softirq"];
/// Names of the softirqs (the kernel's order, stable since 2.6), for `waker_comm`.
const SOFTIRQS: [&str; 10] =
    ["hi", "timer", "net_tx", "net_rx", "block", "irq_poll", "tasklet", "sched", "hrtimer", "rcu"];

/// Which rows of a batch to write.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sel<'a> {
    /// Rows `a..b`.
    Range(usize, usize),
    /// These rows, ascending.
    Idx(&'a [u32]),
}

impl<'a> Sel<'a> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Sel::Range(a, b) => b - a,
            Sel::Idx(r) => r.len(),
        }
    }

    /// `f` of the selected values of `col`, appended to `out` (a range as a slice, which the
    /// compiler vectorizes).
    #[inline]
    pub(crate) fn gather<T: Copy, U>(&self, col: &[T], out: &mut Vec<U>, mut f: impl FnMut(T) -> U) {
        match *self {
            Sel::Range(a, b) => out.extend(col[a..b].iter().map(|&v| f(v))),
            Sel::Idx(r) => out.extend(r.iter().map(|&i| f(col[i as usize]))),
        }
    }

    /// The selection's rows `from..to` (positions in the selection, not in the batch).
    pub(crate) fn part(&self, from: usize, to: usize) -> Sel<'a> {
        match *self {
            Sel::Range(a, _) => Sel::Range(a + from, a + to),
            Sel::Idx(r) => Sel::Idx(&r[from..to]),
        }
    }
}

/// Dictionary values shared by every trace.
pub(crate) struct Dictionaries {
    pub(crate) kind: ArrayRef,
    pub(crate) op: ArrayRef,
    pub(crate) fd_type: ArrayRef,
    pub(crate) waker_kind: ArrayRef,
    /// `""`, then `WHY_PART_NAMES` (key `1 + part`).
    pub(crate) waker_was_in: ArrayRef,
    /// The wait kinds, in the order of `WaitKind::ALL` (key: the kind's index).
    pub(crate) wait: ArrayRef,
}

pub(crate) fn dictionaries() -> &'static Dictionaries {
    static D: OnceLock<Dictionaries> = OnceLock::new();
    D.get_or_init(|| {
        let mut ops: Vec<String> = Vec::with_capacity(SYSCALL_SLOTS + BLOCK_SLOTS + PROC_SLOTS + 1);
        ops.extend((0..SYSCALL_SLOTS).map(|nr| op_name(0, nr as u16)));
        ops.extend((0..BLOCK_SLOTS).map(|nr| op_name(1, nr as u16)));
        ops.extend((0..PROC_SLOTS).map(|nr| op_name(2, nr as u16)));
        ops.push("unknown".into());
        Dictionaries {
            kind: Arc::new(StringArray::from(KIND_NAMES.to_vec())),
            op: Arc::new(StringArray::from(ops)),
            fd_type: Arc::new(StringArray::from(FdType::ALL.iter().map(|t| t.name()).collect::<Vec<_>>())),
            waker_kind: Arc::new(StringArray::from(WAKER_KINDS.to_vec())),
            waker_was_in: Arc::new(StringArray::from([""].iter().chain(&WHY_PART_NAMES).copied().collect::<Vec<_>>())),
            wait: Arc::new(StringArray::from(WaitKind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>())),
        }
    })
}

/// Index of `(kind, nr)` in the `op` dictionary.
#[inline]
pub(crate) fn op_key(kind: u8, nr: u16) -> i16 {
    let nr = nr as usize;
    let k = match kind {
        0 if nr < SYSCALL_SLOTS => nr,
        1 if nr < BLOCK_SLOTS => SYSCALL_SLOTS + nr,
        2 if nr < PROC_SLOTS => SYSCALL_SLOTS + BLOCK_SLOTS + nr,
        _ => SYSCALL_SLOTS + BLOCK_SLOTS + PROC_SLOTS,
    };
    k as i16
}

/// What the rows of one trace share: its host, clock and disks.
pub(crate) struct TraceContext {
    pub(crate) host: ArrayRef,
    offset_ns: i64,
    /// `""` then the block devices' names.
    pub(crate) disk_names: ArrayRef,
    /// Device number of each name after the first.
    disk_devs: Vec<u32>,
    /// Per column of `CGROUP_COLUMNS`: `""`, then that column's value for each cgroup of the
    /// trace's cgroup table, in the table's order.
    pub(crate) cgroup_values: Vec<ArrayRef>,
    /// The key (1 + position in the table) of each cgroup id.
    cgroup_keys: HashMap<u64, i32>,
    /// Entries of the header's cgroup table when this context was made.
    cgroups_known: usize,
    /// Mixed into the trace's stack ids to make them unique across traces (see
    /// [`TraceContext::stack_key`]).
    stack_tag: u64,
}

impl TraceContext {
    /// From a trace header; `host` overrides its host name.
    pub(crate) fn new(header: &TraceHeader, host: &str) -> TraceContext {
        let mut names = vec![String::new()];
        let mut devs = Vec::new();
        for d in header.block_devices.iter().take(i16::MAX as usize - 1) {
            names.push(d.name.clone());
            devs.push(d.dev);
        }
        // Every cgroup of the table (at most MAX_CGROUPS, which readers keep) has a key.
        let cgroups = &header.cgroups[..header.cgroups.len().min(latscope_event::bounds::MAX_CGROUPS)];
        let column = |f: &dyn Fn(&CgroupInfo) -> &str| -> ArrayRef {
            Arc::new(StringArray::from_iter_values(std::iter::once("").chain(cgroups.iter().map(f))))
        };
        let cgroup_values = vec![
            column(&|c| &c.container_id),
            column(&|c| &c.container_name),
            column(&|c| &c.image),
            column(&|c| &c.pod_name),
            column(&|c| &c.pod_namespace),
            column(&|c| &c.path),
        ];
        debug_assert_eq!(cgroup_values.len(), super::schema::CGROUP_COLUMNS.len());
        // A cgroup listed twice keeps its first entry.
        let mut cgroup_keys = HashMap::with_capacity(cgroups.len());
        for (i, c) in cgroups.iter().enumerate() {
            cgroup_keys.entry(c.id).or_insert(i as i32 + 1);
        }
        TraceContext {
            host: Arc::new(StringArray::from(vec![host])),
            offset_ns: header.realtime_offset_ns,
            disk_names: Arc::new(StringArray::from(names)),
            disk_devs: devs,
            cgroup_values,
            cgroup_keys,
            cgroups_known: header.cgroups.len(),
            stack_tag: stack_tag(host, header.wall_ns(header.start_ns)),
        }
    }

    /// How many entries of the trace's cgroup table this context names (the header's, as known
    /// when it was made).
    pub(crate) fn cgroups_known(&self) -> usize {
        self.cgroups_known
    }

    /// The `stack_id` of the trace's stack `id` (0 stays 0: no stack). Ids are per trace; an
    /// export holds many, so each is mixed with the trace's host and start: the same trace gives
    /// the same ids in every export, two traces (practically) never share one.
    #[inline]
    pub(crate) fn stack_key(&self, id: u32) -> i64 {
        stack_key(self.stack_tag, id)
    }

    /// Wall-clock ns since the epoch of a CLOCK_MONOTONIC time.
    #[inline]
    pub(crate) fn wall_ns(&self, mono: u64) -> i64 {
        (mono as i64).wrapping_add(self.offset_ns)
    }

    /// The key of each selected row's disk in `disk_names` (0: none, or not a known disk),
    /// appended to `out`.
    pub(crate) fn disk_keys(&self, dev: &[u32], sel: Sel<'_>, out: &mut Vec<i32>) {
        let mut last = (0u32, 0i32);
        let key = |dev: u32| {
            if dev == 0 {
                return 0;
            }
            if dev != last.0 {
                let k = self.disk_devs.iter().position(|&x| x == dev).map_or(0, |p| p as i32 + 1);
                last = (dev, k);
            }
            last.1
        };
        sel.gather(dev, out, key);
    }
}

impl TraceContext {
    /// The key of each selected row's cgroup in `cgroup_values` (0: a cgroup the trace's table
    /// does not list), appended to `out`.
    pub(crate) fn cgroup_keys(&self, cgroup: &[u64], sel: Sel<'_>, out: &mut Vec<i32>) {
        // Consecutive events mostly come from the same task: one lookup per change of cgroup.
        let mut last = (u64::MAX, 0i32);
        let key = |id: u64| {
            if id != last.0 {
                last = (id, self.cgroup_keys.get(&id).copied().unwrap_or(0));
            }
            last.1
        };
        sel.gather(cgroup, out, key);
    }
}

/// A trace's stack tag: a hash of its host name and start (wall-clock ns).
pub(crate) fn stack_tag(host: &str, start_wall_ns: i64) -> u64 {
    // FNV-1a: stable across versions and machines (a std hasher is not).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in host.bytes().chain(start_wall_ns.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// `stack_id` of stack `id` of the trace tagged `tag`: splitmix64 of both (a bijection of `id`
/// for one tag), positive (a BIGINT every engine reads alike), never 0.
#[inline]
pub(crate) fn stack_key(tag: u64, id: u32) -> i64 {
    if id == 0 {
        return 0;
    }
    let mut z = tag.wrapping_add(u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((z >> 1) as i64).max(1)
}

/// The `waker_kind` dictionary's key of a `waker_ctx` code.
#[inline]
pub(crate) fn waker_kind_key(ctx: u8) -> i16 {
    i16::from(if ctx < 4 { ctx } else { 0 })
}

/// The `waker_was_in` dictionary's key of event `i` (`1 +` its waker's part in
/// `WHY_PART_NAMES`), 0 when no cascade was seen: the views' rule (a waking thread, blocked a
/// while in a known part).
#[inline]
pub(crate) fn waker_was_in_key(b: &EventBatch, i: usize) -> i16 {
    let p = b.waker_wait_part[i] as usize;
    if b.waker_ctx[i] == 1 && b.waker_wait_ns[i] > 0 && p < WHY_PART_NAMES.len() {
        p as i16 + 1
    } else {
        0
    }
}

/// `waker_was_in_ns` of event `i`: 0 whenever `waker_was_in` is empty.
#[inline]
pub(crate) fn waker_was_in_ns(b: &EventBatch, i: usize) -> i64 {
    if waker_was_in_key(b, i) > 0 {
        b.waker_wait_ns[i] as i64
    } else {
        0
    }
}

/// `waker_comm` of event `i`: the waking thread's command name, the softirq's name, or empty.
pub(crate) fn waker_comm(b: &EventBatch, i: usize, out: &mut Vec<u8>) {
    out.clear();
    match b.waker_ctx[i] {
        1 => {
            let (c, n) = latscope_event::comm_bytes(b.waker_comm_lo[i], b.waker_comm_hi[i]);
            out.extend_from_slice(&c[..n]);
            // Kernel names are bytes: keep them valid UTF-8, as the trace reader does for comm.
            if std::str::from_utf8(out).is_err() {
                let s = String::from_utf8_lossy(out).into_owned();
                out.clear();
                out.extend_from_slice(s.as_bytes());
            }
        }
        3 => out.extend_from_slice(SOFTIRQS.get(b.waker_tid[i] as usize).copied().unwrap_or("?").as_bytes()),
        _ => {}
    }
}

/// The `kind` dictionary's key of a kind code.
#[inline]
pub(crate) fn kind_key(kind: u8) -> i16 {
    i16::from(kind.min(3))
}

/// The `fd_type` dictionary's key of a file type code.
#[inline]
pub(crate) fn fd_type_key(t: u8) -> i16 {
    if (t as usize) < FdType::ALL.len() {
        i16::from(t)
    } else {
        0
    }
}

#[cfg(test)]
pub(crate) mod reference;

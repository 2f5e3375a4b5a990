//! The idle rule: whether a call's latency was idle time (left out of the rankings) or time it
//! worked or waited on someone (ranked), decided by how its wait ended, not by the syscall's name
//! (docs/WHY.md, "Idle time or waiting on someone").
//!
//! A wait that another thread or process of the recording ended (a mutex's release, a condition
//! signalled, a pipe or socket written, a child's exit) is time the caller waited on someone:
//! ranked with the work and attributed to that someone. A wait its own timeout ended, or the
//! arrival of outside work (a thread outside the recording, packets from a network device: a
//! listening socket, a client's request), is idle. Without a breakdown that says how the wait
//! ended (recorded without `--why`, faster than `--why-above`, or before the recordings knew),
//! the syscall decides, as before: the blocking waits (poll, epoll_wait, futex, sleeps, wait4,
//! ...) are idle.

use crate::batch::wake_flags;
use crate::syscalls::desc;
use crate::{syscall_name, EventBatch, EventKind, SysClass, WHY_PARTS};

/// What a call's latency was, for the rankings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitKind {
    /// Not mostly a wait: on CPU, run queue, block I/O, page faults (or a call that is no wait).
    Work,
    /// A wait another thread or process of the recording ended (or a kernel thread working for
    /// it, or a lock its holder kept while the wait's timeout ran out): ranked with the work.
    OnSomeone,
    /// Idle: a wait its own timeout ended.
    Timeout,
    /// Idle: a wait outside work ended (a thread outside the recording, packets from a network
    /// device).
    Outside,
    /// Idle by the syscall: a blocking wait with no breakdown that says how it ended.
    ByName,
}

impl WaitKind {
    /// Every kind, in the order the notes list them.
    pub const ALL: [WaitKind; 5] =
        [WaitKind::Work, WaitKind::OnSomeone, WaitKind::Timeout, WaitKind::Outside, WaitKind::ByName];

    /// Whether the rankings leave it out by default.
    pub fn is_idle(self) -> bool {
        matches!(self, WaitKind::Timeout | WaitKind::Outside | WaitKind::ByName)
    }

    /// Short name (JSON keys, the `evt.wait` filter field).
    pub fn name(self) -> &'static str {
        match self {
            WaitKind::Work => "work",
            WaitKind::OnSomeone => "on_someone",
            WaitKind::Timeout => "idle_timeout",
            WaitKind::Outside => "idle_outside",
            WaitKind::ByName => "idle_by_syscall",
        }
    }

    /// What a person reads: `waited on another thread`, `idle: its own timeout`, ...
    pub fn label(self) -> &'static str {
        match self {
            WaitKind::Work => "work",
            WaitKind::OnSomeone => "waited on another thread",
            WaitKind::Timeout => "idle: ended by its own timeout",
            WaitKind::Outside => "idle: ended by outside work",
            WaitKind::ByName => "idle: a blocking wait (no breakdown says how it ended)",
        }
    }

    /// The kind named `s` ([`WaitKind::name`]).
    pub fn from_name(s: &str) -> Option<WaitKind> {
        WaitKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Whether syscall `nr` is a blocking wait by its name: its class is [`SysClass::Wait`] (poll,
/// epoll_wait, select, futex, nanosleep, ...) or it waits for a child or a signal (wait4,
/// waitid, pause). The rule for calls without a breakdown.
#[inline]
pub fn is_wait_syscall(nr: u16) -> bool {
    wait_syscall_table().get(nr as usize).copied().unwrap_or(false)
}

/// [`is_wait_syscall`] of every syscall number, indexed by it (numbers past its end are no
/// waits): a loop over many events fetches it once and looks each one up.
#[inline]
pub fn wait_syscall_table() -> &'static [bool] {
    // Asked for every syscall a view counts: a table, not the names compared each time.
    static WAITS: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
    WAITS.get_or_init(|| {
        (0..crate::syscalls::syscall_count())
            .map(|n| {
                let nr = n as u16;
                desc(nr).class == SysClass::Wait || matches!(syscall_name(nr), Some("wait4" | "waitid" | "pause"))
            })
            .collect()
    })
}

/// Index of the first waiting part (lock) and the parts that are waits for an event: lock,
/// pipe/socket, timer/sleep, other wait, unknown (see `WHY_PART_NAMES`).
const WAITING_PARTS: [usize; 5] = [3, 4, 5, 7, 8];

/// The kind of event `i`'s latency (see the module's documentation).
#[inline]
pub fn wait_kind(b: &EventBatch, i: usize) -> WaitKind {
    if b.kind[i] != EventKind::Syscall as u8 {
        return WaitKind::Work;
    }
    // Most calls have no breakdown: the syscall alone decides, inlined in the views' loops.
    if b.wake_flags[i] & wake_flags::KNOWN == 0 {
        return by_name(b.nr[i]);
    }
    wait_kind_known(b, i)
}

/// A call without a breakdown: idle when its syscall is a blocking wait.
#[inline]
fn by_name(nr: u16) -> WaitKind {
    if is_wait_syscall(nr) {
        WaitKind::ByName
    } else {
        WaitKind::Work
    }
}

/// [`wait_kind`] of event `i` whose breakdown `parts` (`b.why_parts(i)`) the caller has read
/// already (a writer of the breakdown): the same answer without reading it again.
#[inline]
pub fn wait_kind_of(b: &EventBatch, i: usize, parts: &[u64; WHY_PARTS]) -> WaitKind {
    if b.kind[i] != EventKind::Syscall as u8 {
        return WaitKind::Work;
    }
    if b.wake_flags[i] & wake_flags::KNOWN == 0 {
        return by_name(b.nr[i]);
    }
    known_with(b, i, parts)
}

/// [`wait_kind`] of a syscall whose wake-up flags say how its wait ended.
fn wait_kind_known(b: &EventBatch, i: usize) -> WaitKind {
    known_with(b, i, &b.why_parts(i))
}

/// [`wait_kind_known`] with the call's breakdown read.
fn known_with(b: &EventBatch, i: usize, parts: &[u64; WHY_PARTS]) -> WaitKind {
    let flags = b.wake_flags[i];
    if parts.iter().all(|&p| p == 0) {
        return by_name(b.nr[i]);
    }
    let waiting: u64 = WAITING_PARTS.iter().map(|&k| parts[k]).sum();
    if waiting.saturating_mul(2) <= b.lat[i] {
        return WaitKind::Work;
    }
    match b.waker_ctx[i] {
        // A thread: of the recording, or a kernel thread, is someone; any other is outside.
        1 if flags & (wake_flags::TRACED | wake_flags::KTHREAD) != 0 => WaitKind::OnSomeone,
        1 => WaitKind::Outside,
        2 if flags & wake_flags::HELD != 0 => WaitKind::OnSomeone,
        2 => WaitKind::Timeout,
        // The network receive softirq: packets from a device.
        3 if b.waker_tid[i] == 3 => WaitKind::Outside,
        3 => WaitKind::OnSomeone,
        // No wake-up seen: the part the recording gave the wait by the call alone (a futex's
        // is lock time, a sleep's timer time), else the syscall.
        _ if parts[3] * 2 > b.lat[i] => WaitKind::OnSomeone,
        _ if parts[5] * 2 > b.lat[i] => WaitKind::Timeout,
        _ => by_name(b.nr[i]),
    }
}

/// Whether the rankings leave event `i` out by default ([`wait_kind`] is idle).
#[inline]
pub fn is_idle(b: &EventBatch, i: usize) -> bool {
    b.kind[i] == EventKind::Syscall as u8 && wait_kind(b, i).is_idle()
}

/// The calls whose blocked waits are lock time by the call alone (futexes, file locks,
/// semaphores): the part `record --why` gives a wait of theirs whose wake-up it did not see.
pub const LOCK_CALLS: [&str; 6] = ["futex", "futex_waitv", "flock", "fcntl", "semop", "semtimedop"];
/// The calls whose blocked waits are pipe/socket time by the call alone (waits for fds, message
/// queues).
pub const IPC_CALLS: [&str; 11] = [
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "msgrcv",
    "msgsnd",
    "mq_timedreceive",
    "mq_timedsend",
];
/// The calls whose blocked waits are timer time by the call alone (sleeps).
pub const SLEEP_CALLS: [&str; 2] = ["nanosleep", "clock_nanosleep"];

/// The part (an index of `WHY_PART_NAMES`) a blocked wait of syscall `nr` belongs to by the call
/// alone ([`LOCK_CALLS`], [`IPC_CALLS`], [`SLEEP_CALLS`]); other wait for the other blocking
/// waits (wait4, pause, ...), unknown for the rest: for time in a call whose breakdown was not
/// recorded (one begun before the recording).
pub fn part_of_call(nr: u16) -> usize {
    let part = |name: &str| crate::WHY_PART_NAMES.iter().position(|p| *p == name).unwrap_or(crate::WHY_PARTS - 1);
    match syscall_name(nr) {
        Some(n) if LOCK_CALLS.contains(&n) => part("lock"),
        Some(n) if IPC_CALLS.contains(&n) => part("ipc"),
        Some(n) if SLEEP_CALLS.contains(&n) => part("timer"),
        _ if is_wait_syscall(nr) => part("other"),
        _ => part("unknown"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{syscall_nr, Event};

    fn call(name: &str, lat: u64, wait_part: usize, ctx: u8, flags: u8) -> Event {
        let mut e =
            Event { nr: syscall_nr(name).unwrap(), lat, waker_ctx: ctx, wake_flags: flags, ..Default::default() };
        e.why_cpu = lat / 10;
        let w = lat - lat / 10;
        match wait_part {
            2 => e.why_io = w,
            3 => e.why_lock = w,
            4 => e.why_ipc = w,
            5 => e.why_timer = w,
            7 => e.why_other = w,
            _ => {}
        }
        e
    }

    #[test]
    fn a_wait_is_idle_by_how_it_ended_not_by_its_name() {
        use wake_flags::*;
        let k = KNOWN;
        let cases = [
            // a mutex released by a thread of the recording: waited on it
            (call("futex", 1000, 3, 1, k | TRACED), WaitKind::OnSomeone),
            // a client outside the recording sent the request: idle
            (call("recvfrom", 1000, 4, 1, k), WaitKind::Outside),
            // packets from a network device
            (Event { waker_tid: 3, ..call("recvfrom", 1000, 4, 3, k) }, WaitKind::Outside),
            // a poll its timeout ended; a futex its timeout ended while a thread held it
            (call("poll", 1000, 5, 2, k), WaitKind::Timeout),
            (call("futex", 1000, 3, 2, k | HELD), WaitKind::OnSomeone),
            // a pipe read the writer (of the recording) ended: a read is a wait too
            (call("read", 1000, 4, 1, k | TRACED), WaitKind::OnSomeone),
            // an fsync waiting for the journal thread
            (call("fsync", 1000, 7, 1, k | KTHREAD), WaitKind::OnSomeone),
            // block I/O is work, whoever ended it
            (call("pread64", 1000, 2, 3, k), WaitKind::Work),
            // no wake-up seen: a futex's wait is lock time, a poll's goes by its syscall
            (call("futex", 1000, 3, 0, k), WaitKind::OnSomeone),
            (call("poll", 1000, 4, 0, k), WaitKind::ByName),
            // no breakdown flags (an older recording, or none): by the syscall
            (call("futex", 1000, 3, 1, 0), WaitKind::ByName),
            (Event { nr: syscall_nr("epoll_wait").unwrap(), lat: 5, ..Default::default() }, WaitKind::ByName),
            (Event { nr: syscall_nr("read").unwrap(), lat: 5, ..Default::default() }, WaitKind::Work),
            // a futex call that never blocked (a wake): work
            (Event { why_cpu: 950, why_lock: 50, ..call("futex", 1000, 0, 0, k) }, WaitKind::Work),
        ];
        let mut b = EventBatch::default();
        for (e, _) in &cases {
            b.push(e);
        }
        for (i, (e, want)) in cases.iter().enumerate() {
            assert_eq!(wait_kind(&b, i), *want, "{i}: {e:?}");
            assert_eq!(wait_kind_of(&b, i, &b.why_parts(i)), *want, "{i}: {e:?}");
        }
        assert!(is_idle(&b, 1) && !is_idle(&b, 0));
        assert_eq!(WaitKind::from_name("idle_timeout"), Some(WaitKind::Timeout));
    }
}

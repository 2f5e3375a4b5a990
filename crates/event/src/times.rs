//! A thread's times as the scheduler counts them (a [`ProcOp::Times`] event): recordings with
//! attribution read every traced thread's at their start, at the thread's exit and at their end,
//! so that the difference of two bounds the thread's whole time over the recording, in and
//! outside its calls. The counters are cumulative since the thread started.
//!
//! The event's columns hold them as docs/TRACE_FORMAT.md lists: `bytes` on-CPU ns, `qtime`
//! runnable ns, `addr` user and `off` system CPU ns, `ino` minor and `off2` major page faults,
//! `dev` voluntary and `flags` involuntary switches, `ret` the thread's start (CLOCK_MONOTONIC
//! ns), `mode` where it was read ([`TimesAt`]), `fd` the call it was in (-1: none) and `lat` how
//! long it had been in it (a recorded call not yet returned).

use crate::{EventBatch, EventKind, ProcOp};

/// Where a thread's times were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimesAt {
    /// When the recording started (every thread alive then).
    Start,
    /// At the thread's exit.
    Exit,
    /// When the recording ended (every thread alive then).
    End,
    /// When a call the thread was blocked in at the start (begun before the recording, never
    /// recorded itself) returned: the reading's `call` is its number.
    Resumed,
}

impl TimesAt {
    /// From the event's `mode` column.
    pub fn from_u32(v: u32) -> Option<TimesAt> {
        match v {
            0 => Some(TimesAt::Start),
            1 => Some(TimesAt::Exit),
            2 => Some(TimesAt::End),
            3 => Some(TimesAt::Resumed),
            _ => None,
        }
    }
    /// Lower-case name used in output.
    pub fn name(self) -> &'static str {
        match self {
            TimesAt::Start => "start",
            TimesAt::Exit => "exit",
            TimesAt::End => "end",
            TimesAt::Resumed => "resumed",
        }
    }
}

/// One reading of a thread's cumulative times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThreadTimes {
    /// When read, CLOCK_MONOTONIC ns.
    pub ts: u64,
    /// When the thread started, CLOCK_MONOTONIC ns.
    pub started: u64,
    /// Process and thread.
    pub pid: u32,
    pub tid: u32,
    /// On a CPU (the scheduler's sum_exec_runtime), ns.
    pub cpu: u64,
    /// Runnable, waiting for a CPU (sched_info.run_delay), ns.
    pub runq: u64,
    /// User and system CPU (the kernel's utime and stime: sampled at ticks unless the kernel
    /// accounts precisely), ns.
    pub user: u64,
    pub sys: u64,
    /// Page faults, minor and major (that waited for I/O).
    pub min_flt: u64,
    pub maj_flt: u64,
    /// Context switches: voluntary (it blocked) and involuntary (preempted).
    pub vcsw: u32,
    pub ivcsw: u32,
    /// The call it was in when read (a syscall number), if any: at the start, one it was blocked
    /// in (begun before the recording); at the start or the end, a recorded call it had not
    /// returned from, for `in_call` ns so far; at a [`TimesAt::Resumed`] reading, the call that
    /// returned.
    pub call: Option<u16>,
    pub in_call: u64,
}

impl ThreadTimes {
    /// Event `i` of `b` as thread times, with where it was read; `None` for any other event.
    pub fn from_row(b: &EventBatch, i: usize) -> Option<(ThreadTimes, TimesAt)> {
        if EventKind::from_u8(b.kind[i]) != Some(EventKind::Proc) || ProcOp::from_u16(b.nr[i]) != Some(ProcOp::Times) {
            return None;
        }
        let at = TimesAt::from_u32(b.mode[i])?;
        Some((
            ThreadTimes {
                ts: b.ts[i],
                started: u64::try_from(b.ret[i]).unwrap_or(0),
                pid: b.pid[i],
                tid: b.tid[i],
                cpu: b.bytes[i],
                runq: b.qtime[i],
                user: b.addr[i],
                sys: u64::try_from(b.off[i]).unwrap_or(0),
                min_flt: b.ino[i],
                maj_flt: u64::try_from(b.off2[i]).unwrap_or(0),
                vcsw: b.dev[i],
                ivcsw: b.flags[i],
                call: u16::try_from(b.fd[i]).ok(),
                in_call: b.lat[i],
            },
            at,
        ))
    }

    /// The thread as it was when it started: every counter 0.
    pub fn at_birth(&self) -> ThreadTimes {
        ThreadTimes { ts: self.started, started: self.started, pid: self.pid, tid: self.tid, ..Default::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Event;

    #[test]
    fn a_times_event_reads_back_and_other_events_do_not() {
        let mut b = EventBatch::default();
        let e = Event {
            kind: EventKind::Proc as u8,
            nr: ProcOp::Times as u16,
            ts: 5_000,
            ret: 1_000,
            pid: 7,
            tid: 8,
            bytes: 300,
            qtime: 20,
            addr: 200,
            off: 100,
            ino: 9,
            off2: 1,
            dev: 3,
            flags: 4,
            mode: 1,
            fd: -1,
            ..Default::default()
        };
        b.push(&e);
        b.push(&Event { nr: ProcOp::Exit as u16, ..e.clone() });
        b.push(&Event { mode: 7, ..e.clone() });
        let (t, at) = ThreadTimes::from_row(&b, 0).unwrap();
        assert_eq!(at, TimesAt::Exit);
        assert_eq!((t.ts, t.started, t.pid, t.tid), (5_000, 1_000, 7, 8));
        assert_eq!(
            (t.cpu, t.runq, t.user, t.sys, t.min_flt, t.maj_flt, t.vcsw, t.ivcsw),
            (300, 20, 200, 100, 9, 1, 3, 4)
        );
        assert_eq!(t.at_birth(), ThreadTimes { ts: 1_000, started: 1_000, pid: 7, tid: 8, ..Default::default() });
        assert!(ThreadTimes::from_row(&b, 1).is_none());
        assert!(ThreadTimes::from_row(&b, 2).is_none(), "an unknown point is not read");
        assert_eq!(t.call, None);
        b.push(&Event { mode: 0, fd: 202, lat: 1_500, ..e.clone() });
        let (t, at) = ThreadTimes::from_row(&b, 3).unwrap();
        assert_eq!((at, t.call, t.in_call), (TimesAt::Start, Some(202), 1_500));
    }
}

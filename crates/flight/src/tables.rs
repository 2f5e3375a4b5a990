//! What a file that starts in the middle of a recording needs from before its first block:
//! the cgroups and processes met since the start, and the stack table entries earlier blocks
//! brought. Learned from the batches as they pass, so a dump or a rotated file has them even
//! when the blocks that brought them are long gone.

use latscope_event::{CgroupInfo, EventBatch, EventKind, ProcessInfo, TraceHeader};
use std::collections::HashMap;

/// Process events by `nr` (`ProcOp`).
const FORK: u16 = 0;
const EXEC: u16 = 1;
const EXIT: u16 = 2;

/// Processes that exited are forgotten this long after (their events may still be in a window).
const EXITED_KEPT_NS: u64 = 3600 * 1_000_000_000;

/// The recording's tables as learned so far.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    /// The session's header at the start, with the cgroups met since.
    header: TraceHeader,
    /// Processes seen starting or exec'ing since, by pid, with the time they exited.
    procs: HashMap<u32, (ProcessInfo, Option<u64>)>,
}

impl Tables {
    pub(crate) fn new(header: &TraceHeader) -> Tables {
        Tables { header: header.clone(), procs: HashMap::new() }
    }

    /// Learn from a batch handed to the ring: its cgroup table entries, its process events.
    pub(crate) fn observe(&mut self, b: &EventBatch) {
        for l in b.cgroups.lines().filter(|l| !l.trim().is_empty()) {
            if let Ok(c) = serde_json::from_str::<CgroupInfo>(l) {
                if !self.header.cgroups.iter().any(|k| k.id == c.id) {
                    self.header.cgroups.push(c);
                }
            }
        }
        let proc = EventKind::Proc as u8;
        if !b.kind.iter().fold(false, |a, &k| a | (k == proc)) {
            return;
        }
        for i in (0..b.len()).filter(|&i| b.kind[i] == proc) {
            let pid = b.pid[i];
            match b.nr[i] {
                FORK => {
                    let ppid = u32::try_from(b.ret[i]).unwrap_or(0);
                    // A child starts as its parent: same program, command line, directory.
                    let parent = self.process(ppid);
                    let p = ProcessInfo {
                        pid,
                        ppid,
                        comm: b.comm.get(i).to_string(),
                        uid: b.uid[i],
                        exe: parent.as_ref().map(|p| p.exe.clone()).unwrap_or_default(),
                        cmdline: parent.as_ref().map(|p| p.cmdline.clone()).unwrap_or_default(),
                        cwd: parent.map(|p| p.cwd).unwrap_or_default(),
                    };
                    self.procs.insert(pid, (p, None));
                }
                EXEC => {
                    let mut p = self.process(pid).unwrap_or(ProcessInfo { pid, ..Default::default() });
                    p.comm = b.comm.get(i).to_string();
                    p.exe = b.path.get(i).to_string();
                    p.cmdline = b.path2.get(i).to_string();
                    p.uid = b.uid[i];
                    self.procs.insert(pid, (p, None));
                }
                EXIT => {
                    let at = b.ts[i];
                    match self.procs.get_mut(&pid) {
                        Some(e) => e.1 = Some(at),
                        None => {
                            if let Some(p) = self.header.processes.iter().find(|p| p.pid == pid) {
                                self.procs.insert(pid, (p.clone(), Some(at)));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        // Bounded: processes that exited long ago go.
        if self.procs.len() > 4096 {
            let newest = b.ts.iter().copied().max().unwrap_or(0);
            self.procs.retain(|_, (_, exit)| exit.is_none_or(|t| t + EXITED_KEPT_NS > newest));
        }
    }

    fn process(&self, pid: u32) -> Option<ProcessInfo> {
        match self.procs.get(&pid) {
            Some((p, _)) => Some(p.clone()),
            None => self.header.processes.iter().find(|p| p.pid == pid).cloned(),
        }
    }

    /// The header of a file whose first event is at `start_ns`: the start's, with the cgroups
    /// met since; processes: the start's, those learned from process events (the newest
    /// word), and `now` (a snapshot of the running processes and their open files, taken when
    /// the file is begun), except those that exited before `start_ns`.
    pub(crate) fn header_at(
        &self,
        start_ns: u64,
        now: Option<(Vec<ProcessInfo>, Vec<latscope_event::FdInfo>)>,
    ) -> TraceHeader {
        let mut h = self.header.clone();
        h.start_ns = start_ns;
        // A file that starts mid-recording is no complete capture of file I/O.
        h.capture.retain(|c| c != latscope_event::CAPTURE_REPLAY_V1);
        let mut by_pid: HashMap<u32, ProcessInfo> = h.processes.drain(..).map(|p| (p.pid, p)).collect();
        for (pid, (p, exit)) in &self.procs {
            match exit {
                Some(t) if *t < start_ns => {
                    by_pid.remove(pid);
                }
                _ => {
                    by_pid.insert(*pid, p.clone());
                }
            }
        }
        if let Some((procs, fds)) = now {
            for p in procs {
                by_pid.entry(p.pid).or_insert(p);
            }
            let have: std::collections::HashSet<(u32, i32)> = h.fds.iter().map(|f| (f.pid, f.fd)).collect();
            h.fds.extend(fds.into_iter().filter(|f| !have.contains(&(f.pid, f.fd))));
        }
        let mut procs: Vec<ProcessInfo> = by_pid.into_values().collect();
        procs.sort_by_key(|p| p.pid);
        h.processes = procs;
        h
    }
}

/// The running processes and their open files, as the start snapshot reads them.
pub(crate) fn snapshot_now() -> (Vec<ProcessInfo>, Vec<latscope_event::FdInfo>) {
    use latscope_probe::snapshot;
    let pids = snapshot::pids();
    let procs: Vec<ProcessInfo> = pids.iter().filter_map(|&p| snapshot::process(p)).collect();
    let socks = snapshot::sockets();
    let fds = pids.iter().flat_map(|&p| snapshot::fds_of(p, &socks)).collect();
    (procs, fds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::Event;

    #[test]
    fn processes_started_and_exec_d_since_the_start_are_in_a_later_header() {
        let start = TraceHeader {
            processes: vec![
                ProcessInfo { pid: 1, comm: "init".into(), exe: "/sbin/init".into(), ..Default::default() },
                ProcessInfo { pid: 5, comm: "old".into(), ..Default::default() },
            ],
            ..Default::default()
        };
        let mut t = Tables::new(&start);
        let mut b = EventBatch::with_capacity(4);
        let proc = EventKind::Proc as u8;
        b.push(&Event { kind: proc, nr: FORK, ts: 10, pid: 7, ret: 1, comm: "init".into(), ..Default::default() });
        b.push(&Event {
            kind: proc,
            nr: EXEC,
            ts: 20,
            pid: 7,
            comm: "pg".into(),
            path: "/usr/bin/pg".into(),
            path2: "pg -D /data".into(),
            ..Default::default()
        });
        b.push(&Event { kind: proc, nr: EXIT, ts: 30, pid: 5, ..Default::default() });
        b.cgroups = "{\"id\":42,\"path\":\"/x\"}\n".into();
        t.observe(&b);
        let h = t.header_at(25, None);
        let p7 = h.processes.iter().find(|p| p.pid == 7).unwrap();
        assert_eq!(
            (p7.ppid, p7.comm.as_str(), p7.exe.as_str(), p7.cmdline.as_str()),
            (1, "pg", "/usr/bin/pg", "pg -D /data")
        );
        assert!(h.processes.iter().any(|p| p.pid == 5), "exited after the window's start: kept");
        assert!(h.cgroups.iter().any(|c| c.id == 42));
        assert_eq!(h.start_ns, 25);
        let later = t.header_at(31, None);
        assert!(!later.processes.iter().any(|p| p.pid == 5), "exited before the start: gone");
    }
}

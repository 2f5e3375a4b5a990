//! From what a user asked for (a syscall set, block requests, processes, a filter) to what the
//! probes are told: the filter's kernel-testable clauses folded into the probe configuration.

use latscope_event::syscalls::{desc, SysDesc};
use latscope_event::{syscall_name, EventKind, SyscallSet, TraceHeader};
use latscope_filter::{Exactness, Filter, Pushdown};
use latscope_probe::{ProbeConfig, SyscallSel};

/// The probe configuration for a syscall set, block requests and process events.
pub(crate) fn base(syscalls: SyscallSet, block: bool) -> ProbeConfig {
    ProbeConfig {
        syscalls: match syscalls {
            SyscallSet::All => SyscallSel::All,
            SyscallSet::Io => SyscallSel::Io,
            SyscallSet::None => SyscallSel::Off,
        },
        block,
        ..Default::default()
    }
}

/// Fold the filter's push-down into `cfg`. When the filter (or the caller, `need_fd_names`)
/// tests file names, the calls that name fds stay enabled in the kernel (see [`keep_fd_naming`]).
/// When `cfg` follows children, the kernel's pid filter is the followed set, which grows as they
/// fork: the filter's pids are not intersected with it (they may name a child to come) and are
/// tested in user space only.
pub(crate) fn apply_filter(cfg: &mut ProbeConfig, filter: &Filter, header: &TraceHeader, need_fd_names: bool) {
    let mut p = filter.pushdown();
    p.resolve_disks(|name| header.block_devices.iter().find(|d| d.name == name).map(|d| d.dev));
    if cfg.follow_children {
        p.pids = None;
    }
    merge_pushdown(cfg, &p);
    if need_fd_names || filter.tests_fd_names() {
        keep_fd_naming(cfg);
    }
    if matches!(&cfg.syscalls, SyscallSel::Only(v) if v.is_empty()) {
        cfg.syscalls = SyscallSel::Off;
    }
}

/// Merge a pushdown into a probe configuration (intersecting with what the options already
/// limit). The kernel may test less than the pushdown allows (thread ids are not tested there):
/// the full filter still runs in user space, so this only ever removes events that cannot match.
pub(crate) fn merge_pushdown(cfg: &mut ProbeConfig, p: &Pushdown) {
    if let Some(pids) = &p.pids {
        cfg.pids = if cfg.pids.is_empty() {
            pids.clone()
        } else {
            cfg.pids.iter().copied().filter(|x| pids.contains(x)).collect()
        };
        if cfg.pids.is_empty() {
            // Contradictory limits: keep a pid that cannot exist rather than tracing everyone.
            cfg.pids.push(u32::MAX);
        }
    }
    if let Some(comms) = &p.comms {
        cfg.comms = if cfg.comms.is_empty() {
            comms.clone()
        } else {
            cfg.comms.iter().filter(|c| comms.contains(*c)).cloned().collect()
        };
        if cfg.comms.is_empty() {
            cfg.comms.push("\u{1}".into());
        }
    }
    if let Some(nrs) = &p.syscalls {
        cfg.syscalls = match &cfg.syscalls {
            SyscallSel::All => SyscallSel::Only(nrs.clone()),
            SyscallSel::Io => SyscallSel::Only(nrs.iter().copied().filter(|&n| desc(n).is_io_related()).collect()),
            SyscallSel::Only(v) => SyscallSel::Only(v.iter().copied().filter(|n| nrs.contains(n)).collect()),
            SyscallSel::Off => SyscallSel::Off,
        };
    }
    if let Some(m) = p.min_latency_ns {
        cfg.min_lat_ns = cfg.min_lat_ns.max(m);
    }
    if let Some(t) = &p.fd_types {
        cfg.fd_types = t.clone();
    }
    if let Some(d) = &p.block_devs {
        cfg.devs = d.clone();
    }
    if let Some(k) = &p.kinds {
        if !k.syscall {
            cfg.syscalls = SyscallSel::Off;
        }
        if !k.block {
            cfg.block = false;
        }
    }
}

/// Let the kernel pass the calls that name file descriptors (open, dup, accept, connect, close,
/// chdir, fcntl...) even when the filter does not want them: user space needs them to name the
/// fds of the calls it does want, and drops them afterwards. The minimum latency is not pushed
/// down for the same reason (a fast open names the fd of a slow write).
pub(crate) fn keep_fd_naming(cfg: &mut ProbeConfig) {
    if let SyscallSel::Only(v) = &mut cfg.syscalls {
        for nr in 0..512u16 {
            let Some(name) = syscall_name(nr) else { continue };
            let d = desc(nr);
            let names_fds = d.has(SysDesc::RET_FD)
                || d.has(SysDesc::CLOSE)
                || d.has(SysDesc::SOCK)
                || matches!(name, "chdir" | "fchdir" | "fcntl");
            if names_fds && !v.contains(&nr) {
                v.push(nr);
            }
        }
    }
    cfg.min_lat_ns = 0;
    cfg.fd_types.clear();
}

/// Why counting in the kernel would not give exactly the events `filter` keeps among events
/// of `kind` (disk names resolved from `header`), or `None` when it would. `following`: the
/// kernel's pid filter holds followed processes, not the filter's pids (see [`apply_filter`]).
pub(crate) fn inexact(filter: &Filter, header: &TraceHeader, kind: EventKind, following: bool) -> Option<String> {
    let mut p = filter.pushdown();
    p.resolve_disks(|name| header.block_devices.iter().find(|d| d.name == name).map(|d| d.dev));
    if following && p.pids.is_some() {
        return Some("the filter's process ids are tested in user space while children are followed".into());
    }
    match p.exactness(kind) {
        Exactness::Exact => None,
        Exactness::Inexact(why) => Some(why.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg_for(f: &str, set: SyscallSet) -> ProbeConfig {
        let mut c = base(set, true);
        apply_filter(&mut c, &Filter::parse(f).unwrap(), &TraceHeader::default(), false);
        c
    }

    #[test]
    fn syscall_clauses_narrow_the_syscall_set() {
        let openat = latscope_event::syscall_nr("openat").unwrap();
        let read = latscope_event::syscall_nr("read").unwrap();
        assert_eq!(cfg_for("evt.type = openat", SyscallSet::All).syscalls, SyscallSel::Only(vec![openat]));
        // An io set intersected with a non-io syscall leaves nothing: no syscall probes at all.
        let c = cfg_for("evt.type = getppid", SyscallSet::Io);
        assert_eq!(c.syscalls, SyscallSel::Off);
        let c = cfg_for("evt.type in (openat, read)", SyscallSet::Io);
        assert!(matches!(&c.syscalls, SyscallSel::Only(v) if v.contains(&openat) && v.contains(&read)));
    }

    #[test]
    fn contradictory_process_limits_trace_nobody_rather_than_everybody() {
        let mut c = base(SyscallSet::All, false);
        c.pids = vec![10];
        merge_pushdown(&mut c, &Filter::parse("proc.pid = 11").unwrap().pushdown());
        assert_eq!(c.pids, vec![u32::MAX]);
        let mut c = base(SyscallSet::All, false);
        c.comms = vec!["a".into()];
        merge_pushdown(&mut c, &Filter::parse("proc.name = b").unwrap().pushdown());
        assert_eq!(c.comms, vec!["\u{1}".to_string()]);
    }

    #[test]
    fn file_name_filters_keep_the_calls_that_name_fds() {
        let c = cfg_for("evt.type = write and fd.name contains /mnt and evt.latency > 1ms", SyscallSet::All);
        let openat = latscope_event::syscall_nr("openat").unwrap();
        assert!(matches!(&c.syscalls, SyscallSel::Only(v) if v.contains(&openat)));
        assert_eq!(c.min_lat_ns, 0, "a fast open names the fd of a slow write");
    }

    #[test]
    fn socket_filters_keep_connect_and_accept() {
        let c = cfg_for("evt.type = sendto and fd.sport = 80", SyscallSet::All);
        for name in ["connect", "accept", "accept4", "sendto"] {
            let nr = latscope_event::syscall_nr(name).unwrap();
            assert!(matches!(&c.syscalls, SyscallSel::Only(v) if v.contains(&nr)), "{name}");
        }
        assert!(!Filter::parse("proc.name = 'fd.name'").unwrap().tests_fd_names());
    }

    #[test]
    fn followed_pids_are_not_narrowed_by_the_filter_s_pids() {
        let mut c = base(SyscallSet::All, false);
        c.pids = vec![10];
        c.follow_children = true;
        apply_filter(&mut c, &Filter::parse("proc.pid = 11").unwrap(), &TraceHeader::default(), false);
        assert_eq!(c.pids, vec![10], "11 may be a child of 10 to come: user space tests it");
        let why = inexact(&Filter::parse("proc.pid = 11").unwrap(), &TraceHeader::default(), EventKind::Syscall, true);
        assert!(why.is_some_and(|w| w.contains("followed")));
        assert_eq!(inexact(&Filter::parse("").unwrap(), &TraceHeader::default(), EventKind::Syscall, true), None);
    }

    #[test]
    fn kind_clauses_switch_probes_off() {
        let c = cfg_for("evt.kind = block", SyscallSet::All);
        assert_eq!(c.syscalls, SyscallSel::Off);
        assert!(c.block);
        let c = cfg_for("evt.kind = syscall", SyscallSet::All);
        assert!(!c.block);
    }
}

#[cfg(test)]
mod exactness {
    use super::*;

    fn inexact_for(s: &str, kind: EventKind) -> Option<String> {
        let header = TraceHeader {
            block_devices: vec![latscope_event::BlockDevice {
                dev: 253 << 20,
                name: "vda".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        inexact(&Filter::parse(s).unwrap(), &header, kind, false)
    }

    #[test]
    fn the_seed_filters_are_applied_exactly_in_the_kernel() {
        let sys = EventKind::Syscall;
        assert_eq!(inexact_for("", sys), None);
        assert_eq!(inexact_for("proc.name=httpd", sys), None);
        assert_eq!(inexact_for("proc.name=httpd and fd.type=file", sys), None);
        assert_eq!(inexact_for("proc.name=httpd and fd.type=file and evt.latency > 1000000", sys), None);
        assert_eq!(inexact_for("evt.latency > 1000000", sys), None);
        assert_eq!(inexact_for("evt.is_io_write=true", sys), None);
        assert_eq!(inexact_for("evt.latency >= 1ms", EventKind::Block), None);
    }

    #[test]
    fn filters_the_kernel_cannot_apply_exactly_say_why() {
        let sys = EventKind::Syscall;
        let why = inexact_for("proc.name=test and evt.is_io_write=true and fd.name contains /mnt", sys);
        assert!(why.as_deref().is_some_and(|w| w.contains("fd.name")), "{why:?}");
        assert!(inexact_for("evt.latency = 5ms", sys).is_some());
        assert!(inexact_for("proc.name=a or proc.name=b", sys).is_some());
        assert!(inexact_for("thread.tid=5", sys).is_some());
        assert!(inexact_for("proc.name=dd", EventKind::Block).is_some());
        // Block requests are told apart by type in user space; disks the header names are exact.
        assert!(inexact_for("evt.type = block_write", EventKind::Block).is_some());
        assert_eq!(inexact_for("blk.disk = vda and evt.latency > 1ms", EventKind::Block), None);
        assert!(inexact_for("blk.disk = sdz", EventKind::Block).is_some());
    }
}

//! Pushing a filter's kernel-testable parts into the probe configuration, shared by every
//! command that runs the probes (record, spectrogram, top).

use latscope_event::{syscall_name, TraceHeader};
use latscope_filter::Filter;
use latscope_probe::{ProbeConfig, SyscallSel};

/// Fold the filter's push-down into `cfg`. When the filter (or the caller, `need_fd_names`)
/// tests file names, the calls that name fds stay enabled in the kernel (see [`keep_fd_naming`]).
pub fn apply(cfg: &mut ProbeConfig, filter: &Filter, header: &TraceHeader, need_fd_names: bool) {
    let mut p = filter.pushdown();
    p.resolve_disks(|name| header.block_devices.iter().find(|d| d.name == name).map(|d| d.dev));
    merge_pushdown(cfg, &p);
    if need_fd_names || needs_fd_names(filter) {
        keep_fd_naming(cfg);
    }
}

/// Merge a pushdown into a probe configuration (intersecting with what the flags already limit).
/// The kernel may test less than the pushdown allows (thread ids are not tested there): the full
/// filter still runs in user space, so this only ever removes events that cannot match.
pub fn merge_pushdown(cfg: &mut ProbeConfig, p: &latscope_filter::Pushdown) {
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
            SyscallSel::Io => SyscallSel::Only(
                nrs.iter().copied().filter(|&n| latscope_event::syscalls::desc(n).is_io_related()).collect(),
            ),
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

/// Does the filter test file names (which the decoder learns from the calls that open files)?
pub fn needs_fd_names(filter: &Filter) -> bool {
    let src = filter.source();
    ["fd.name", "fd.directory", "fd.filename", "fd.sip", "fd.cip", "fd.sport", "fd.cport"]
        .iter()
        .any(|f| src.contains(f))
}

/// Let the kernel pass the calls that name file descriptors (open, dup, accept, close, chdir,
/// fcntl...) even when the filter does not want them: user space needs them to name the fds of
/// the calls it does want, and drops them afterwards. The minimum latency is not pushed down
/// for the same reason (a fast open names the fd of a slow write).
pub fn keep_fd_naming(cfg: &mut ProbeConfig) {
    use latscope_event::syscalls::{desc, SysDesc};
    if let SyscallSel::Only(v) = &mut cfg.syscalls {
        for nr in 0..512u16 {
            let Some(name) = syscall_name(nr) else { continue };
            let d = desc(nr);
            let names_fds =
                d.has(SysDesc::RET_FD) || d.has(SysDesc::CLOSE) || matches!(name, "chdir" | "fchdir" | "fcntl");
            if names_fds && !v.contains(&nr) {
                v.push(nr);
            }
        }
    }
    cfg.min_lat_ns = 0;
    cfg.fd_types.clear();
}

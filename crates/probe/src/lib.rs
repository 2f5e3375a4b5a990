//! latscope's eBPF probes.
//!
//! [`Probe::start`] loads the BPF programs in `src/bpf/` (syscall enter/exit,
//! block insert/issue/complete, process fork/exec/exit), pushes the filter
//! parts the kernel can test into maps, and either streams every event through
//! a ring buffer ([`Probe::poll`] returns them as [`EventBatch`]es with paths
//! resolved) or aggregates latencies into per-CPU histograms in the kernel
//! ([`Probe::read_agg`]), which is what live views use when they can.

pub mod containers;
mod decode;
pub mod features;
mod merge;
pub mod procmaps;
pub mod snapshot;
mod stackstore;
pub mod starttimes;

pub use decode::{join, Decoder, UserCopy};

/// The longest an event waits in the probes before a poll hands it on: the per-CPU rings'
/// records are held back this long to be merged in time order with the shared ring buffer's. A
/// reader that must have every event that completed before an instant (a refresh of counts)
/// polls no sooner than this after it.
pub const HANDOFF_DELAY: Duration = Duration::from_nanos(merge::MARGIN_NS);

use latscope_event::syscalls::{self, SysClass};
use latscope_event::{EventBatch, FdType, TraceHeader};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject, RingBuffer, RingBufferBuilder};
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::rc::Rc;
use std::time::Duration;

#[allow(clippy::all, missing_docs, non_camel_case_types, dead_code, unused_imports)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/latscope.skel.rs"));
}
use skel::*;

use types::{ls_limits, ls_stack_limits, ls_ucopy_limits, ls_ufiles_limits};

/// Number of histogram buckets per group in in-kernel aggregation (LS_AGG_BUCKETS, from BTF).
pub const AGG_BUCKETS: usize = ls_limits::LS_AGG_BUCKETS.0 as usize;
/// Most histogram groups of in-kernel aggregation (LS_AGG_GROUPS, from BTF); the map holds only
/// the groups its grouping uses ([`ProbeConfig::agg_groups`]).
pub const AGG_GROUPS: usize = ls_limits::LS_AGG_GROUPS.0 as usize;
/// In an [`AggLayout`]: the syscall counts in no group of that factor (LS_AGG_NONE, from BTF).
pub const AGG_NONE: u16 = ls_limits::LS_AGG_NONE.0 as u16;
/// Syscall numbers covered by the kernel's tables (LS_NR_MAX, from BTF).
const NR_MAX: usize = ls_limits::LS_NR_MAX.0 as usize;
/// Frames kept per stack captured with attribution (deeper stacks are cut there).
pub const STACK_DEPTH: usize = ls_stack_limits::LS_STACK_DEPTH.0 as usize;
/// Distinct stacks each stack map holds (kernel, user); later new ones are missing.
const STACK_ENTRIES: u32 = ls_stack_limits::LS_STACK_ENTRIES.0;
/// Processes the pid filter holds, given and followed (LS_PIDS_MAX, from BTF).
pub const PIDS_MAX: usize = ls_limits::LS_PIDS_MAX.0 as usize;
/// Cgroups the cgroup filter holds (LS_CGROUPS_MAX, from BTF).
pub const CGROUPS_MAX: usize = ls_limits::LS_CGROUPS_MAX.0 as usize;
/// Levels below the root at which the cgroup filter finds a task's ancestors (LS_CGROUP_DEPTH,
/// from BTF): a task deeper than this is tested against its upper ancestors only.
pub const CGROUP_DEPTH: usize = ls_limits::LS_CGROUP_DEPTH.0 as usize;

/// Errors from loading or running the probes.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Something the probes need is missing on this machine.
    #[error("{0}")]
    Unsupported(String),
    /// libbpf failed.
    #[error("{context}: {source}")]
    Bpf {
        /// What was being done.
        context: String,
        /// The libbpf error.
        source: libbpf_rs::Error,
    },
    /// Reading the ring buffer failed.
    #[error("reading the ring buffer: {0}")]
    Ring(std::io::Error),
}

/// Which point of a recording a thread's times were read at (`enum ls_times_when`, the `mode`
/// of a [`latscope_event::ProcOp::Times`] event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadTimesAt {
    /// When the recording started (every thread alive then).
    Start = 0,
    /// At the thread's exit.
    Exit = 1,
    /// When the recording ended (every thread alive then).
    End = 2,
}

/// Attaches the on-CPU sampling program to a CPU-clock perf event of `hz` samples a second on
/// each online CPU (as `perf record -F HZ -a` does).
fn attach_sampling(prog: &libbpf_rs::ProgramMut<'_>, hz: u32) -> Result<Vec<libbpf_rs::Link>, ProbeError> {
    use std::os::fd::FromRawFd;
    // struct perf_event_attr (include/uapi/linux/perf_event.h), as far as PERF_ATTR_SIZE_VER5.
    #[repr(C)]
    #[derive(Default)]
    struct PerfEventAttr {
        kind: u32,
        size: u32,
        config: u64,
        sample_freq: u64,
        sample_type: u64,
        read_format: u64,
        flags: u64,
        wakeup_events: u32,
        bp_type: u32,
        config1: u64,
        config2: u64,
        branch_sample_type: u64,
        sample_regs_user: u64,
        sample_stack_user: u32,
        clockid: i32,
        sample_regs_intr: u64,
        aux_watermark: u32,
        sample_max_stack: u16,
        reserved: u16,
    }
    const PERF_TYPE_SOFTWARE: u32 = 1;
    const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
    const FLAG_FREQ: u64 = 1 << 10;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    let attr = PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_CPU_CLOCK,
        sample_freq: u64::from(hz.max(1)),
        flags: FLAG_FREQ,
        ..Default::default()
    };
    let cpus =
        libbpf_rs::num_possible_cpus().map_err(|e| ProbeError::Bpf { context: "counting CPUs".into(), source: e })?;
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut links = Vec::new();
    for cpu in 0..cpus {
        if !online.trim().is_empty() && !cpu_listed(online.trim(), cpu) {
            continue;
        }
        // SAFETY: perf_event_open with a valid attr of the size it says; the fd it returns is
        // owned here (closed by the OwnedFd once the link holds the event).
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                -1i32,
                cpu as i32,
                -1i32,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            return Err(ProbeError::Bpf {
                context: format!("opening a CPU-clock perf event on CPU {cpu} for --profile ({err})"),
                source: libbpf_rs::Error::from(err),
            });
        }
        // libbpf's link owns the event's fd from here (it disables and closes it when the link
        // is dropped); on failure it is closed here.
        match prog.attach_perf_event(fd as i32) {
            Ok(link) => links.push(link),
            Err(e) => {
                // SAFETY: fd is ours: the failed attach took no ownership of it.
                drop(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) });
                return Err(ProbeError::Bpf { context: "attaching the on-CPU sampler".into(), source: e });
            }
        }
    }
    Ok(links)
}

/// Whether `cpu` is in a CPU list as sysfs writes them (`0-3,5,7-8`).
fn cpu_listed(list: &str, cpu: usize) -> bool {
    list.split(',').any(|r| match r.split_once('-') {
        Some((a, b)) => {
            a.trim().parse::<usize>().is_ok_and(|a| a <= cpu) && b.trim().parse::<usize>().is_ok_and(|b| cpu <= b)
        }
        None => r.trim().parse::<usize>() == Ok(cpu),
    })
}

/// The part of a call's blocked waits that the call alone decides, by syscall number (what
/// `why_nr_part` in why.bpf.h holds): lock for futexes, file locks and semaphores; pipe/socket for
/// waits for fds and message queues; timer for sleeps, used only for a wait whose wake-up the
/// probes did not see (a sleep a signal ends is other wait). A timer's wake-up or an I/O wait
/// still takes precedence.
fn why_nr_parts() -> [u8; 512] {
    use latscope_event::waits::{IPC_CALLS, LOCK_CALLS, SLEEP_CALLS};
    let mut t = why_nr_table(&[
        (&LOCK_CALLS, why_part("lock")),
        (&IPC_CALLS, why_part("ipc")),
        (&SLEEP_CALLS, why_part("timer")),
    ]);
    // WHY_NR_TIMEOUT0 in why.bpf.h: these return 0 when their timeout ended them.
    for n in ["poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2"] {
        if let Some(nr) = syscalls::syscall_nr(n).filter(|&nr| (nr as usize) < t.len()) {
            t[nr as usize] |= WHY_NR_TIMEOUT0;
        }
    }
    t
}

/// The flag `WHY_NR_TIMEOUT0` of why.bpf.h, beside a call's part in `why_nr_part`.
const WHY_NR_TIMEOUT0: u8 = 0x80;

/// The index of attribution part `name`.
fn why_part(name: &str) -> u8 {
    latscope_event::WHY_PART_NAMES.iter().position(|p| *p == name).unwrap_or(0) as u8
}

/// What the lock fields of a call's attribution describe, by syscall number (`why_nr_lock` in
/// why.bpf.h, `enum ls_lock_kind`): which of its arguments name the lock it waits for.
fn why_nr_locks() -> [u8; 512] {
    use types::ls_lock_kind as k;
    why_nr_table(&[
        (&["futex"], k::LS_LOCK_FUTEX.0 as u8),
        (&["futex_waitv"], k::LS_LOCK_FUTEXV.0 as u8),
        (&["flock"], k::LS_LOCK_FLOCK.0 as u8),
        (&["fcntl"], k::LS_LOCK_FCNTL.0 as u8),
        (&["semop", "semtimedop"], k::LS_LOCK_SEM.0 as u8),
    ])
}

/// A table by syscall number: `value` for each syscall named with it, 0 for the rest.
fn why_nr_table(classes: &[(&[&str], u8)]) -> [u8; 512] {
    let mut t = [0u8; 512];
    for (names, v) in classes {
        for n in names.iter() {
            if let Some(nr) = syscalls::syscall_nr(n).filter(|&nr| (nr as usize) < t.len()) {
                t[nr as usize] = *v;
            }
        }
    }
    t
}

/// For benchmarks: the environment variable naming parts of the per-call work to switch off
/// at load (comma-separated `ring`, `fd`, `task`, `filter`), to measure what each costs
/// (bench/record.sh). A recording made so is incomplete: never for real use.
pub const ABLATE_ENV: &str = "LATSCOPE_ABLATE";

/// [`ABLATE_ENV`]'s `pcpu`: every event through the shared ring buffer.
const ABLATE_PCPU: u8 = 16;

/// Bytes of the per-CPU rings' slots, per CPU, at most and at least: the shared ring buffer's
/// size shared out (half of it, over the CPUs), within these bounds. 5.6 MiB (32 Ki events)
/// holds 10 ms of 3 M events/s, [`PCPU_POLL`] apart.
const PCPU_BYTES_MAX: usize = 8 << 20;
const PCPU_BYTES_MIN: usize = 256 << 10;
/// The longest a poll waits with per-CPU rings: their programs never wake the reader.
const PCPU_POLL: Duration = Duration::from_millis(10);

/// Slots per CPU of the per-CPU rings, or None where they are not used: only x86 (whose store
/// order publishes an event written in place; see `pcpu_commit`), and only for plain events
/// (no attribution: its decoder matches records across threads in ring order).
fn pcpu_slots(ring: usize, ncpus: usize, streaming: bool, why: bool, ablate: u8) -> Option<u64> {
    if !cfg!(target_arch = "x86_64") || !streaming || why || ablate & (1 | ABLATE_PCPU) != 0 {
        return None;
    }
    let bytes = (ring / 2 / ncpus.max(1)).clamp(PCPU_BYTES_MIN, PCPU_BYTES_MAX);
    let slots = (bytes / decode::RECORD_SIZE.next_multiple_of(8)).max(2);
    // A power of two, rounded down: the programs index with a mask.
    Some(1u64 << (63 - (slots as u64).leading_zeros()))
}

/// The `ablate` bits of [`ABLATE_ENV`] (LS_ABLATE_* in latscope.bpf.c).
fn ablate_bits() -> u8 {
    let v = std::env::var(ABLATE_ENV).unwrap_or_default();
    v.split(',').fold(0, |b, p| {
        b | match p.trim() {
            "ring" => 1,
            "fd" => 2,
            "task" => 4,
            "filter" => 8,
            // Not a switch of the programs: the per-CPU rings left off (see `pcpu_slots`).
            "pcpu" => ABLATE_PCPU,
            _ => 0,
        }
    })
}

fn bpf<T>(r: libbpf_rs::Result<T>, context: &str) -> Result<T, ProbeError> {
    r.map_err(|source| ProbeError::Bpf { context: context.to_string(), source })
}

/// Check that this process can trace: x86_64, root (or CAP_BPF+CAP_PERFMON), and the kernel
/// features every probe needs ([`features::KernelFeatures`]; what only some probes need is
/// checked as they load). The error is one line saying what is missing.
pub fn check_environment() -> Result<features::KernelFeatures, ProbeError> {
    let (_, release, machine) = snapshot::uname();
    if machine != "x86_64" {
        return Err(ProbeError::Unsupported(format!(
            "latscope's probes support x86_64 only (this machine is {machine}): the syscall table and argument layouts are x86_64's"
        )));
    }
    let missing = missing_capabilities();
    if !missing.is_empty() {
        return Err(ProbeError::Unsupported(format!(
            "latscope needs root to load eBPF programs and read other processes' open files: run it with sudo \
             (or give it {}; missing: {})",
            CAPS.iter().map(|c| c.1).collect::<Vec<_>>().join(", "),
            missing.join(", ")
        )));
    }
    let kf = features::KernelFeatures::probe();
    if let Some(f) = kf.missing_for_all().next() {
        return Err(ProbeError::Unsupported(format!(
            "{}; this kernel is {release} (`latscope check` lists every feature)",
            f.describe_missing()
        )));
    }
    Ok(kf)
}

/// The capabilities that let a non-root user run the probes: load BPF programs and attach them
/// to tracepoints, read kernel memory from them, and read any process's /proc fd table.
const CAPS: [(u32, &str); 4] =
    [(39, "CAP_BPF"), (38, "CAP_PERFMON"), (19, "CAP_SYS_PTRACE"), (2, "CAP_DAC_READ_SEARCH")];

/// The capabilities loading and running the probes needs (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE,
/// CAP_DAC_READ_SEARCH) that this process lacks: none for root.
pub fn missing_capabilities() -> Vec<&'static str> {
    let eff = snapshot::read_text("/proc/self/status", snapshot::SMALL)
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("CapEff:").map(|v| v.trim().to_string())))
        .and_then(|v| u64::from_str_radix(&v, 16).ok())
        .unwrap_or(0);
    CAPS.iter().filter(|(bit, _)| eff & (1 << bit) == 0).map(|c| c.1).collect()
}

/// Which syscalls to trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyscallSel {
    /// Every syscall.
    All,
    /// Those that take or return an fd or a path, and syncs ([`syscalls::SysDesc::is_io_related`]).
    Io,
    /// Exactly these numbers.
    Only(Vec<u16>),
    /// None (block or process events only).
    Off,
}

/// How in-kernel aggregation groups latencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggGroup {
    /// One histogram for everything.
    All,
    /// By the fd's I/O class: group 0 other, 1 file, 2 net, 3 ipc ([`fd_class_group`]).
    FdClass,
    /// One histogram per syscall number.
    Syscall,
    /// By [`SysClass`] code.
    SysClass,
    /// Several groupings at once, laid out by [`ProbeConfig::agg_layout`].
    Composite,
}

/// The groups of [`AggGroup::Composite`]: a syscall counts in `sys_group[nr]` (unless
/// [`AGG_NONE`]) and, with `g = fd_group[fd type]`, for each of the two fd factors `k` where bit
/// `g` of `sys_fd_mask[k][nr]` is set, in `sys_fd_base[k][nr]` + the number of bits of the mask
/// below `g`; a block request on device
/// `devs[i]` of the [`ProbeConfig`] counts in `dev_base + i`. User space
/// sums the groups into the views it serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AggLayout {
    /// Per syscall number: the group it counts in whatever its fd, or [`AGG_NONE`].
    pub sys_group: Vec<u16>,
    /// Per fd factor and syscall number: the first of its groups by fd group, or [`AGG_NONE`].
    pub sys_fd_base: [Vec<u16>; 2],
    /// Per fd factor and syscall number: the fd groups (bits) it has a group for, from
    /// `sys_fd_base` on.
    pub sys_fd_mask: [Vec<u32>; 2],
    /// Per fd type ([`FdType`] as a number): its fd group.
    pub fd_group: Vec<u32>,
    /// Group of the first block device.
    pub dev_base: u32,
    /// Group of block requests on devices not in the [`ProbeConfig`]'s `devs` (disks that
    /// appear later), or [`AGG_NONE`] to leave them out.
    pub dev_other: u16,
    /// Groups in use (at most [`AGG_GROUPS`]).
    pub groups: usize,
}

/// Group number of an fd type under [`AggGroup::FdClass`].
pub fn fd_class_group(t: FdType) -> u32 {
    match t.io_class() {
        "file" => 1,
        "net" => 2,
        "ipc" => 3,
        _ => 0,
    }
}

/// Names of the [`AggGroup::FdClass`] groups, by group number.
pub const FD_CLASS_NAMES: [&str; 4] = ["other", "file", "net", "ipc"];

/// What to trace and how.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// Syscalls to trace.
    pub syscalls: SyscallSel,
    /// Trace block requests.
    pub block: bool,
    /// Trace process fork/exec/exit (cheap; needed to name processes that start later).
    pub procs: bool,
    /// Only these processes (thread group ids); empty means all.
    pub pids: Vec<u32>,
    /// Follow the processes of [`ProbeConfig::pids`]: each child they fork (and its children) is
    /// added to the pid filter in the kernel as it forks, and every process leaves the filter
    /// when its last thread exits. Children that do not fit ([`PIDS_MAX`]) are counted in
    /// [`ProbeStats::not_followed`].
    pub follow_children: bool,
    /// Only tasks in these cgroup v2 cgroups or below them, by id (the directory's inode
    /// number, as `bpf_get_current_cgroup_id` gives it); empty means all. At most
    /// [`CGROUPS_MAX`]. Block requests are not tested (they complete in interrupt context).
    pub cgroups: Vec<u64>,
    /// Only these command names; empty means all.
    pub comms: Vec<String>,
    /// Drop events faster than this (ns).
    pub min_lat_ns: u64,
    /// Only syscalls whose fd has one of these types; empty means any.
    pub fd_types: Vec<FdType>,
    /// Only block requests on these devices (`major << 20 | minor`); empty means all.
    /// With aggregation, device `devs[i]` is histogram group `i`.
    pub devs: Vec<u32>,
    /// Aggregate in the kernel instead of streaming events.
    pub aggregate: Option<AggGroup>,
    /// The groups of [`AggGroup::Composite`].
    pub agg_layout: Option<AggLayout>,
    /// Ring buffer size in bytes (rounded up to a power of two).
    pub ring_bytes: usize,
    /// Name fds with probe reads even where the kernel has `bpf_rdonly_cast` (the way kernels
    /// before 6.2 do it): lets tests compare the two variants of the syscall programs.
    pub compat_fd_naming: bool,
    /// Keep per-thread state in hash maps by thread id even where the kernel has task storage
    /// in tracing programs (the way kernels before 5.13 do it): lets tests run that variant.
    pub compat_task_maps: bool,
    /// Per-call attribution: syscalls at least this slow (ns) carry the breakdown of their latency
    /// into causes (on CPU, run queue, I/O, lock, ...; see docs/WHY.md). `None`: off. Streaming only.
    pub why_above_ns: Option<u64>,
    /// With attribution: also capture, for each call that carries it, the kernel stack where it
    /// blocked (its longest blocked interval) and its user stack (read back with
    /// [`Probe::stack`]).
    pub why_stacks: bool,
    /// With attribution and stacks: sample every traced thread on its CPU this many times a
    /// second (a CPU-clock perf event on each CPU), each sample a
    /// [`latscope_event::ProcOp::Sample`] event with its kernel and user stacks. `None`: off.
    pub profile_hz: Option<u32>,
    /// With attribution and stacks: copy this many bytes of the user stack (from its pointer
    /// up; a power of two, 256 to 16384) beside each user stack, for unwinding in user space
    /// from the binaries' unwind tables ([`Probe::stack_copy`]). 0: frame pointers only.
    pub ucopy_bytes: u32,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        Self {
            syscalls: SyscallSel::All,
            block: true,
            procs: true,
            pids: Vec::new(),
            follow_children: false,
            cgroups: Vec::new(),
            comms: Vec::new(),
            min_lat_ns: 0,
            fd_types: Vec::new(),
            devs: Vec::new(),
            aggregate: None,
            agg_layout: None,
            ring_bytes: 64 << 20,
            compat_fd_naming: false,
            compat_task_maps: false,
            why_above_ns: None,
            why_stacks: false,
            profile_hz: None,
            ucopy_bytes: 0,
        }
    }
}

impl ProbeConfig {
    /// Histogram groups the aggregation uses: the in-kernel map holds this many (at least one,
    /// also when events are streamed), so that memory follows the grouping (each group is
    /// [`AGG_BUCKETS`] counters of 8 bytes per CPU).
    pub fn agg_groups(&self) -> usize {
        match self.aggregate {
            None => 1,
            Some(AggGroup::All) => self.devs.len().max(1),
            Some(AggGroup::FdClass) => FD_CLASS_NAMES.len(),
            Some(AggGroup::Syscall) => NR_MAX,
            Some(AggGroup::SysClass) => 16,
            Some(AggGroup::Composite) => self.agg_layout.as_ref().map_or(1, |l| l.groups.max(1)),
        }
    }

    /// Whether the probes record every syscall that touches files or fds, unfiltered, with what
    /// a replay needs ([`latscope_event::CAPTURE_REPLAY_V1`]): every syscall or the `io` set,
    /// process events, no command-name, latency or fd-type filter, no aggregation. A pid filter
    /// limits the processes, not their calls, and keeps the capture complete for them.
    pub fn captures_for_replay(&self) -> bool {
        matches!(self.syscalls, SyscallSel::All | SyscallSel::Io)
            && self.procs
            && self.comms.is_empty()
            && self.min_lat_ns == 0
            && self.fd_types.is_empty()
            && self.aggregate.is_none()
    }
}

/// Counters kept by the probes in the kernel, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeStats {
    /// Events written to the ring buffer.
    pub events: u64,
    /// Events lost because the ring buffer was full.
    pub lost: u64,
    /// Path arguments that could not be read from user memory.
    pub path_faults: u64,
    /// Block completions whose issue was not seen (in flight when tracing started).
    pub blk_unpaired: u64,
    /// Completions without data that the kernel's flush machinery reports for a request whose
    /// data completed already, or for an empty flush whose device work is a flush request of
    /// its own (recorded as `block_flush`): not requests missed, not counted as unpaired.
    pub blk_flush_ends: u64,
    /// Children of followed processes that were not followed: the pid filter was full.
    pub not_followed: u64,
    /// With attribution: blocked intervals of traced calls whose wake-up no program saw (found
    /// ended when the thread was switched in); attributed from the call alone, with no waker.
    pub wakeups_unseen: u64,
}

/// Cumulative in-kernel histograms: `counts[group][bucket]`, summed over CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AggSnapshot {
    /// One row of [`AGG_BUCKETS`] counts per group that has any count; (group, counts).
    pub groups: Vec<(u32, Vec<u64>)>,
    /// The totals of each group of [`AggSnapshot::groups`], in the same order.
    pub sums: Vec<AggSums>,
    /// Block requests by group and operation, for the groups that have any: (group, one
    /// [`BlockAgg`] per [`AGG_OPS`] operation).
    pub block: Vec<(u32, Vec<BlockAgg>)>,
}

/// What a group's bucket counts cannot give, kept apart in the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AggSums {
    /// The exact sum of the latencies counted, ns.
    pub lat_ns: u64,
    /// Syscalls counted that returned a negative value (failed).
    pub errors: u64,
}

/// The block operations the in-kernel block aggregates tell apart, by index (LS_AGG_OP_*):
/// `read`, `write`, and every other operation (flush, discard, ...).
pub const AGG_OPS: [&str; 3] = ["read", "write", "other"];

/// The index in [`AGG_OPS`] of a block request's operation (the kernel's REQ_OP code), as the
/// probes count it.
pub fn agg_op(code: u16) -> usize {
    match code {
        0 => types::ls_agg_ops::LS_AGG_OP_READ.0 as usize,
        1 => types::ls_agg_ops::LS_AGG_OP_WRITE.0 as usize,
        _ => types::ls_agg_ops::LS_AGG_OP_OTHER.0 as usize,
    }
}

/// Block requests of one group and operation, counted in the kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockAgg {
    /// Bytes completed (the exact sum of `size`).
    pub bytes: u64,
    /// Queue times (insert to issue), ns (the exact sum of `queue`).
    pub queue_ns: u64,
    /// Queue time per in-kernel bucket ([`agg_bucket_bounds`]); 0 for requests issued without
    /// passing a scheduler queue.
    pub queue: Vec<u64>,
    /// Bytes of each completion per in-kernel bucket (the same bounds, in bytes).
    pub size: Vec<u64>,
}

impl BlockAgg {
    /// Requests (completions) counted.
    pub fn requests(&self) -> u64 {
        self.size.iter().sum()
    }
}

impl AggSnapshot {
    /// Counts added since `earlier` (a previous snapshot of the same probe).
    pub fn since(&self, earlier: &AggSnapshot) -> AggSnapshot {
        let sub = |c: &[u64], p: Option<&[u64]>| -> Vec<u64> {
            c.iter().enumerate().map(|(i, v)| v - p.map_or(0, |p| p.get(i).copied().unwrap_or(0).min(*v))).collect()
        };
        let mut groups = Vec::with_capacity(self.groups.len());
        let mut sums = Vec::with_capacity(self.groups.len());
        for (i, (g, c)) in self.groups.iter().enumerate() {
            let prev = earlier.groups.iter().position(|(pg, _)| pg == g);
            groups.push((*g, sub(c, prev.map(|j| earlier.groups[j].1.as_slice()))));
            let (now, before) = (self.sums.get(i).copied().unwrap_or_default(), prev.and_then(|j| earlier.sums.get(j)));
            let before = before.copied().unwrap_or_default();
            sums.push(AggSums {
                lat_ns: now.lat_ns.saturating_sub(before.lat_ns),
                errors: now.errors.saturating_sub(before.errors),
            });
        }
        let block = self
            .block
            .iter()
            .map(|(g, ops)| {
                let prev = earlier.block.iter().find(|(pg, _)| pg == g).map(|(_, p)| p);
                let ops = ops
                    .iter()
                    .enumerate()
                    .map(|(o, b)| {
                        let p = prev.and_then(|p| p.get(o));
                        BlockAgg {
                            bytes: b.bytes.saturating_sub(p.map_or(0, |p| p.bytes)),
                            queue_ns: b.queue_ns.saturating_sub(p.map_or(0, |p| p.queue_ns)),
                            queue: sub(&b.queue, p.map(|p| p.queue.as_slice())),
                            size: sub(&b.size, p.map(|p| p.size.as_slice())),
                        }
                    })
                    .collect();
                (*g, ops)
            })
            .collect();
        AggSnapshot { groups, sums, block }
    }
}

/// Turns on the kernel's run-time statistics of BPF programs (`BPF_ENABLE_STATS`) for as long as
/// the returned descriptor is open, so that [`Probe::run_time_ns`] counts. Unlike the
/// `kernel.bpf_stats_enabled` sysctl, nothing stays switched on when the process ends. The cost is
/// two clock reads per program run.
pub fn enable_run_time_stats() -> Result<std::os::fd::OwnedFd, ProbeError> {
    use std::os::fd::FromRawFd;
    // SAFETY: a plain syscall wrapper; a non-negative result is a new descriptor we own.
    let fd = unsafe { libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        return Err(ProbeError::Unsupported(format!(
            "cannot enable BPF run-time statistics: {}",
            std::io::Error::from_raw_os_error(-fd)
        )));
    }
    // SAFETY: fd is a fresh descriptor returned by the kernel.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// The latency range `[low, high)` in ns of in-kernel aggregation bucket `idx`
/// (16 linear sub-buckets per power of two; mirrors `lat_bucket()` in the BPF code).
pub fn agg_bucket_bounds(idx: usize) -> (u64, u64) {
    if idx < 16 {
        return (idx as u64, idx as u64 + 1);
    }
    let e = (idx / 16 + 3) as u32;
    let sub = (idx % 16) as u64;
    let low = (16 + sub) << (e - 4);
    (low, low + (1u64 << (e - 4)))
}

/// The in-kernel bucket of a latency (the Rust twin of the BPF `lat_bucket()`; used by tests and fallbacks).
pub fn agg_bucket(v: u64) -> usize {
    if v < 16 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let idx = (e as usize - 3) * 16 + ((v >> (e - 4)) & 15) as usize;
    idx.min(AGG_BUCKETS - 1)
}

/// Loaded and attached probes. Dropping it detaches everything.
pub struct Probe {
    // Field order is drop order: the ring buffer and links go before the skeleton, the skeleton before its storage.
    rb: Option<RingBuffer<'static>>,
    links: Vec<Link>,
    /// Ring-buffer records consumed so far.
    consumed: u64,
    skel: LatscopeSkel<'static>,
    _obj: Box<MaybeUninit<OpenObject>>,
    decoder: Rc<RefCell<Decoder>>,
    ncpus: usize,
    aggregating: bool,
    agg_groups: usize,
    /// The first group of block requests, and the block groups the block aggregates hold.
    blk_base: usize,
    blk_groups: usize,
    attached_ns: u64,
    /// How long each step of [`Probe::start`] took.
    start_times: starttimes::StartTimes,
    /// With stacks: what was drained from the stack maps (see `stackstore`).
    stacks: Option<stackstore::StackStore>,
    /// Recording with attribution: thread times can be read (see `read_thread_times`).
    why: bool,
    /// With per-CPU rings: the rings, and the shared ring buffer's records waiting for their
    /// turn (see `merge`).
    merge: Option<Rc<RefCell<merge::Merge>>>,
    /// Detached: nothing more is written, so every record can be handed on.
    detached: bool,
}

/// Most ring-buffer records one poll consumes: under a sustained event rate the producers can
/// keep the buffer non-empty forever, and a consumer that reads until it is empty never returns
/// to flush its blocks or notice a stop request.
pub const MAX_RECORDS_PER_POLL: usize = 16_384;

/// Threads that can be switched out inside a syscall at once where the kernel lacks task
/// storage in tracing programs (the hash map by thread id that stands in for it).
pub const TID_MAP_THREADS: u32 = 32_768;
/// Execs in progress at once, likewise.
const TID_MAP_EXECS: u32 = 4_096;

impl Probe {
    /// Load, configure and attach the probes. `header` is the start snapshot (for naming open files).
    pub fn start(cfg: &ProbeConfig, header: &TraceHeader) -> Result<Probe, ProbeError> {
        let mut times = starttimes::StartTimes::begin();
        let kf = check_environment()?;
        times.step("checking the environment");
        let mut obj: Box<MaybeUninit<OpenObject>> = Box::new(MaybeUninit::uninit());
        // SAFETY: the skeleton borrows `obj`, which is boxed (stable address) and kept in the same
        // struct, declared after the skeleton so that it is dropped last.
        let obj_ref: &'static mut MaybeUninit<OpenObject> = unsafe { &mut *(obj.as_mut() as *mut _) };
        let builder = LatscopeSkelBuilder::default();
        let mut open = bpf(builder.open(obj_ref), "opening the BPF object")?;
        times.step("opening the BPF object");

        let ro = open.maps.rodata_data.as_deref_mut().expect("the BPF object has read-only data");
        ro.self_tgid = std::process::id();
        ro.filter_pids = u8::from(!cfg.pids.is_empty());
        ro.filter_comms = u8::from(!cfg.comms.is_empty());
        ro.filter_devs = u8::from(!cfg.devs.is_empty());
        ro.filter_cgroups = u8::from(!cfg.cgroups.is_empty());
        ro.follow_children = u8::from(cfg.follow_children);
        ro.min_lat = cfg.min_lat_ns;
        ro.fdtype_mask = cfg.fd_types.iter().fold(0u32, |m, t| m | (1 << (*t as u32 & 31)));
        ro.agg_mode = u8::from(cfg.aggregate.is_some());
        ro.agg_group = match cfg.aggregate {
            None | Some(AggGroup::All) => types::ls_agg_group::LS_AGG_ALL,
            Some(AggGroup::FdClass) => types::ls_agg_group::LS_AGG_FDCLASS,
            Some(AggGroup::Syscall) => types::ls_agg_group::LS_AGG_SYSCALL,
            Some(AggGroup::SysClass) => types::ls_agg_group::LS_AGG_SYSCLASS,
            Some(AggGroup::Composite) => types::ls_agg_group::LS_AGG_COMPOSITE,
        }
        .0 as u8;
        let ring = cfg.ring_bytes.max(1 << 20).next_power_of_two();
        ro.wake_bytes = (ring / 8) as u64;
        ro.proc_events = u8::from(cfg.procs);
        ro.ablate = ablate_bits();
        // The exec program keeps its path for the execve event (the syscall's own argument is
        // gone by its exit): only when syscall events are streamed.
        let want_sys = cfg.syscalls != SyscallSel::Off;
        if want_sys {
            if let Some(f) = kf.missing_for_syscalls().next() {
                return Err(ProbeError::Unsupported(format!(
                    "{}; block and process probes still run here: record with --syscalls none \
                     (`latscope check` lists every feature)",
                    f.describe_missing()
                )));
            }
        }
        // Fd naming reads through bpf_rdonly_cast where the kernel has it, else through probe
        // reads: two variants of the syscall programs, one loaded (see compat.bpf.h).
        let fast = kf.has(features::key::RDONLY_CAST) && !cfg.compat_fd_naming;
        // What the programs keep per thread: task storage where tracing programs have it, else
        // hash maps by thread id, sized here (see compat.bpf.h).
        let task_storage = kf.has(features::key::TASK_STORAGE) && !cfg.compat_task_maps;
        let why_wanted = want_sys && cfg.aggregate.is_none() && cfg.why_above_ns.is_some();
        if why_wanted && !task_storage {
            let f = kf.get(features::key::TASK_STORAGE).expect("a known feature");
            return Err(ProbeError::Unsupported(format!(
                "per-call attribution (--why) needs {} (Linux {} and later), which this kernel {}; \
                 record without --why here",
                f.what,
                f.since,
                if cfg.compat_task_maps { "has, but the hash-map variant was asked for" } else { "lacks" }
            )));
        }
        open.maps.rodata_data.as_deref_mut().expect("the BPF object has read-only data").task_storage =
            u8::from(task_storage);
        let (starts_tid, exec_tid) = if task_storage { (1, 1) } else { (TID_MAP_THREADS, TID_MAP_EXECS) };
        bpf(open.maps.starts_tid.set_max_entries(starts_tid), "sizing the per-thread hash map")?;
        bpf(open.maps.exec_paths_tid.set_max_entries(exec_tid), "sizing the per-thread hash map")?;
        let ro = open.maps.rodata_data.as_deref_mut().expect("the BPF object has read-only data");
        ro.stash_exec = u8::from(want_sys && cfg.aggregate.is_none());
        let want_exec = cfg.procs || ro.stash_exec != 0;
        bpf(open.maps.events.set_max_entries(ring as u32), "sizing the ring buffer")?;
        let layout = match cfg.aggregate {
            Some(AggGroup::Composite) => Some(cfg.agg_layout.clone().ok_or_else(|| {
                ProbeError::Unsupported("composite aggregation without a layout of its groups".into())
            })?),
            _ => None,
        };
        let agg_groups = cfg.agg_groups();
        if agg_groups > AGG_GROUPS {
            return Err(ProbeError::Unsupported(format!(
                "{agg_groups} in-kernel histogram groups asked for: the probes hold at most {AGG_GROUPS}"
            )));
        }
        ro.agg_dev_other = layout.as_ref().map_or(AGG_NONE, |l| l.dev_other) as u32;
        ro.agg_blk_base = layout.as_ref().map_or(0, |l| l.dev_base);
        ro.agg_fd = u8::from(layout.as_ref().is_some_and(|l| l.sys_fd_base.iter().flatten().any(|&b| b != AGG_NONE)));
        bpf(open.maps.agg.set_max_entries((agg_groups * AGG_BUCKETS) as u32), "sizing the in-kernel histograms")?;
        bpf(open.maps.agg_sums.set_max_entries(agg_groups as u32), "sizing the in-kernel sums")?;
        // Block requests count in the groups from the first disk's on (all of them but a
        // composite layout's syscall groups): only those have block aggregates.
        let blk_base = layout.as_ref().map_or(0, |l| l.dev_base as usize).min(agg_groups);
        let blk_groups = if cfg.block && cfg.aggregate.is_some() { (agg_groups - blk_base).max(1) } else { 0 };
        bpf(
            open.maps.agg_blk.set_max_entries((blk_groups.max(1) * AGG_OPS.len()) as u32),
            "sizing the in-kernel block aggregates",
        )?;

        open.progs.ls_sys_enter.set_autoload(want_sys && fast);
        open.progs.ls_sys_exit.set_autoload(want_sys && fast);
        open.progs.ls_sys_enter_compat.set_autoload(want_sys && !fast);
        open.progs.ls_sys_exit_compat.set_autoload(want_sys && !fast);
        open.progs.ls_switch.set_autoload(want_sys);
        for p in [&mut open.progs.ls_rq_insert, &mut open.progs.ls_rq_issue, &mut open.progs.ls_rq_complete] {
            p.set_autoload(cfg.block);
        }
        // Fork and exit tracking is needed to follow children even when proc events are not wanted.
        let follow = cfg.follow_children && !cfg.pids.is_empty();
        open.progs.ls_fork.set_autoload(cfg.procs || follow);
        open.progs.ls_exec.set_autoload(want_exec);
        // Without task storage, exit also drops the hash entries of a thread that dies mid-call.
        open.progs.ls_exit.set_autoload(cfg.procs || follow || (want_sys && !task_storage));
        // Attribution: the wake-up and context programs run only when asked for.
        let why = want_sys && cfg.aggregate.is_none() && cfg.why_above_ns.is_some();
        let ro = open.maps.rodata_data.as_deref_mut().expect("the BPF object has read-only data");
        ro.why_mode = u8::from(why);
        ro.why_min = cfg.why_above_ns.unwrap_or(0);
        // On a KVM guest, the time the host takes from a call on its CPU is run queue, not on CPU.
        ro.steal_off = if why { features::steal_clock_offset().unwrap_or(0) } else { 0 };
        ro.why_nr_part = why_nr_parts();
        ro.why_nr_lock = why_nr_locks();
        // The futex holders map (an LRU hash, preallocated): one entry without attribution.
        bpf(open.maps.why_fxs.set_max_entries(if why { 4096 } else { 1 }), "sizing the futex holders map")?;
        let stacks = why && cfg.why_stacks;
        ro.why_stacks = u8::from(stacks);
        // The stack maps are preallocated: one entry each when stacks are off.
        let entries = if stacks { STACK_ENTRIES } else { 1 };
        bpf(open.maps.why_kstacks.set_max_entries(entries), "sizing the kernel stack map")?;
        bpf(open.maps.why_ustacks.set_max_entries(entries), "sizing the user stack map")?;
        let ufiles = if stacks { ls_ufiles_limits::LS_UFILES_ENTRIES.0 } else { 1 };
        bpf(open.maps.why_ufiles.set_max_entries(ufiles), "sizing the user stack files map")?;
        ro.why_ucopy = if stacks { cfg.ucopy_bytes.min(ls_ucopy_limits::LS_UCOPY_MAX.0) } else { 0 };
        bpf(
            open.maps.why_ucopy_buf.set_max_entries(if ro.why_ucopy > 0 { 2 } else { 1 }),
            "sizing the stack copy buffer",
        )?;
        let lastu = if stacks { ls_ufiles_limits::LS_LASTU_ENTRIES.0 } else { 1 };
        bpf(open.maps.why_lastu.set_max_entries(lastu), "sizing the last user stacks map")?;
        let ncpus = bpf(libbpf_rs::num_possible_cpus(), "counting CPUs")?;
        let pcpu = pcpu_slots(ring, ncpus, want_sys && cfg.aggregate.is_none(), why, ablate_bits());
        let ro = open.maps.rodata_data.as_deref_mut().expect("the BPF object has read-only data");
        ro.pcpu_on = u8::from(pcpu.is_some());
        if let Some(n) = pcpu {
            ro.pcpu_mask = (n - 1) as u32;
            ro.pcpu_shift = n.trailing_zeros();
        }
        let (ctl_entries, slot_entries) = pcpu.map_or((1, 1), |n| (ncpus, ncpus * n as usize));
        bpf(open.maps.pcpu_ctl.set_max_entries(ctl_entries as u32), "sizing the per-CPU rings")?;
        bpf(open.maps.pcpu_slots.set_max_entries(slot_entries as u32), "sizing the per-CPU rings")?;
        for p in [
            &mut open.progs.ls_why_waking,
            &mut open.progs.ls_why_fault,
            &mut open.progs.ls_why_hrtimer_in,
            &mut open.progs.ls_why_hrtimer_out,
            &mut open.progs.ls_why_timer_in,
            &mut open.progs.ls_why_timer_out,
            &mut open.progs.ls_why_softirq_in,
            &mut open.progs.ls_why_softirq_out,
            &mut open.progs.ls_why_softirq_raise,
            &mut open.progs.ls_why_irq_in,
            &mut open.progs.ls_why_irq_out,
        ] {
            p.set_autoload(why);
        }
        // Each thread's times at the start and the end (read_thread_times): with --why only.
        open.progs.ls_times_iter.set_autoload(why);
        let profile_hz = cfg.profile_hz.filter(|_| why && cfg.why_stacks);
        open.progs.ls_sample.set_autoload(profile_hz.is_some());
        // The tests' way into why_cause (BPF_PROG_TEST_RUN), never part of a recording.
        open.progs.ls_why_cause_test.set_autoload(false);
        open.progs.ls_why_steal_test.set_autoload(false);

        let verifier = starttimes::VerifierLog::install(open.open_object_mut().progs_mut());
        let skel = bpf(open.load(), "loading the BPF programs (`latscope check` lists the kernel features they need)")?;
        times.step("loading (BTF, maps, programs)");
        if let Some(v) = verifier {
            times.verifier = v.finish();
        }

        // The syscall layout table, shared with user space through latscope-event.
        for nr in 0..NR_MAX.min(syscalls::syscall_count()) {
            let d = syscalls::desc(nr as u16);
            let want = match &cfg.syscalls {
                SyscallSel::All => syscalls::syscall_name(nr as u16).is_some(),
                SyscallSel::Io => d.is_io_related(),
                SyscallSel::Only(v) => v.contains(&(nr as u16)),
                SyscallSel::Off => false,
            };
            let v = types::ls_sys_desc {
                fd: d.fd,
                dirfd: d.dirfd,
                path: d.path,
                dirfd2: d.dirfd2,
                path2: d.path2,
                count: d.count,
                off: d.off,
                flags: d.flags,
                mode: d.mode,
                addr: d.addr,
                iovcnt: d.iovcnt,
                want: u8::from(want),
                bits: d.bits,
                class: d.class as u8,
                off2: d.off2,
                agg0: layout.as_ref().and_then(|l| l.sys_group.get(nr).copied()).unwrap_or(AGG_NONE),
                agg1: layout.as_ref().and_then(|l| l.sys_fd_base[0].get(nr).copied()).unwrap_or(AGG_NONE),
                agg2: layout.as_ref().and_then(|l| l.sys_fd_base[1].get(nr).copied()).unwrap_or(AGG_NONE),
                agg_pad: 0,
                agg1_fds: layout.as_ref().and_then(|l| l.sys_fd_mask[0].get(nr).copied()).unwrap_or(0),
                agg2_fds: layout.as_ref().and_then(|l| l.sys_fd_mask[1].get(nr).copied()).unwrap_or(0),
                infoarg: d.infoarg,
                info: d.info,
                info_pad: 0,
            };
            bpf(
                skel.maps.sys_desc.update(&(nr as u32).to_ne_bytes(), as_bytes(&v), MapFlags::ANY),
                "filling the syscall table",
            )?;
        }
        for t in FdType::ALL {
            let g = match &layout {
                Some(l) => l.fd_group.get(t as usize).copied().unwrap_or(0),
                None => fd_class_group(t),
            };
            bpf(
                skel.maps.fdclass.update(&(t as u32).to_ne_bytes(), &g.to_ne_bytes(), MapFlags::ANY),
                "filling the fd class table",
            )?;
        }
        for &p in &cfg.pids {
            bpf(skel.maps.pids.update(&p.to_ne_bytes(), &[1u8], MapFlags::ANY), "filling the pid filter")?;
        }
        if cfg.cgroups.len() > CGROUPS_MAX {
            return Err(ProbeError::Unsupported(format!(
                "{} cgroups given: the cgroup filter holds at most {CGROUPS_MAX}",
                cfg.cgroups.len()
            )));
        }
        for &id in &cfg.cgroups {
            bpf(skel.maps.cgroups.update(&id.to_ne_bytes(), &[1u8], MapFlags::ANY), "filling the cgroup filter")?;
        }
        for c in &cfg.comms {
            let mut k = [0u8; 16];
            let b = c.as_bytes();
            k[..b.len().min(15)].copy_from_slice(&b[..b.len().min(15)]);
            bpf(skel.maps.comms.update(&k, &[1u8], MapFlags::ANY), "filling the command filter")?;
        }
        let dev_base = layout.as_ref().map_or(0, |l| l.dev_base);
        for (i, &d) in cfg.devs.iter().enumerate() {
            bpf(
                skel.maps.devs.update(&d.to_ne_bytes(), &(dev_base + i as u32).to_ne_bytes(), MapFlags::ANY),
                "filling the device filter",
            )?;
        }

        times.step("filling the tables");
        // Time zero of the recording: the probes are loaded and about to attach. Taken here, not
        // before loading, so that views do not show the load time as an idle stretch.
        let attached_ns = snapshot::monotonic_ns();
        let mut links = Vec::new();
        let progs = [
            // Attribution's context and wake-up programs before the switch program starts states;
            // the ends of contexts before their starts (an end without its start is ignored, a
            // start without its end would mark the CPU for good).
            (&skel.progs.ls_why_hrtimer_out, why),
            (&skel.progs.ls_why_timer_out, why),
            (&skel.progs.ls_why_softirq_out, why),
            (&skel.progs.ls_why_irq_out, why),
            (&skel.progs.ls_why_hrtimer_in, why),
            (&skel.progs.ls_why_timer_in, why),
            (&skel.progs.ls_why_softirq_in, why),
            (&skel.progs.ls_why_irq_in, why),
            (&skel.progs.ls_why_softirq_raise, why),
            (&skel.progs.ls_why_fault, why),
            (&skel.progs.ls_why_waking, why),
            // First: entries in per-CPU slots must move with their task from the start.
            (&skel.progs.ls_switch, want_sys),
            (&skel.progs.ls_sys_enter, want_sys && fast),
            (&skel.progs.ls_sys_exit, want_sys && fast),
            (&skel.progs.ls_sys_enter_compat, want_sys && !fast),
            (&skel.progs.ls_sys_exit_compat, want_sys && !fast),
            (&skel.progs.ls_rq_insert, cfg.block),
            (&skel.progs.ls_rq_issue, cfg.block),
            (&skel.progs.ls_rq_complete, cfg.block),
            (&skel.progs.ls_fork, cfg.procs || follow),
            (&skel.progs.ls_exec, want_exec),
            (&skel.progs.ls_exit, cfg.procs || follow || why),
        ];
        for (p, on) in progs {
            if on {
                let name = p.name().to_string_lossy().into_owned();
                links.push(bpf(p.attach(), &format!("attaching {name}"))?);
            }
        }
        if let Some(hz) = profile_hz {
            links.extend(attach_sampling(&skel.progs.ls_sample, hz)?);
        }
        times.step("attaching");

        let mut decoder = Decoder::new(header, true);
        decoder.follow_maps = stacks && cfg.ucopy_bytes > 0;
        if why {
            // Files mapped before now name the page faults in them (docs/WHY.md).
            decoder.name_mapped_files(header.processes.iter().map(|p| p.pid));
        }
        let decoder = Rc::new(RefCell::new(decoder));
        let mut probe = Probe {
            rb: None,
            links,
            consumed: 0,
            skel,
            _obj: obj,
            decoder,
            ncpus,
            aggregating: cfg.aggregate.is_some(),
            agg_groups,
            blk_base,
            blk_groups,
            attached_ns,
            start_times: times,
            stacks: stacks.then(stackstore::StackStore::default),
            why,
            merge: None,
            detached: false,
        };
        if let Some(n) = pcpu {
            use std::os::fd::{AsFd, AsRawFd};
            let m = merge::Merge::new(
                probe.skel.maps.pcpu_ctl.as_fd().as_raw_fd(),
                probe.skel.maps.pcpu_slots.as_fd().as_raw_fd(),
                ncpus,
                n,
            )
            .map_err(ProbeError::Ring)?;
            probe.merge = Some(Rc::new(RefCell::new(m)));
        }
        if !probe.aggregating {
            let mut b = RingBufferBuilder::new();
            // SAFETY: the map lives in the skeleton, which outlives the ring buffer (field order).
            let events: &'static libbpf_rs::MapMut<'static> =
                unsafe { &*(&probe.skel.maps.events as *const libbpf_rs::MapMut<'static>) };
            // With per-CPU rings a record waits for its turn (see `merge`); else it is decoded
            // as it is read.
            let added = if let Some(m) = probe.merge.clone() {
                b.add(events, move |data: &[u8]| {
                    m.borrow_mut().stage(data);
                    0
                })
            } else {
                let dec = probe.decoder.clone();
                b.add(events, move |data: &[u8]| {
                    dec.borrow_mut().record(data);
                    0
                })
            };
            bpf(added, "setting up the ring buffer")?;
            probe.rb = Some(bpf(b.build(), "setting up the ring buffer")?);
        }
        probe.start_times.step("setting up the ring buffer");
        Ok(probe)
    }

    /// Every traced thread's times so far (on CPU, runnable, user and system CPU, page faults,
    /// switches: a [`latscope_event::ProcOp::Times`] event each), into the ring buffer, read with
    /// the next polls; `at` says which point of the recording this is. Read at its start and at
    /// its end (a thread's exit gives its own), they bound each thread's whole time, in and
    /// outside its calls. Only with attribution (`why_above_ns`); a no-op otherwise.
    pub fn read_thread_times(&mut self, at: ThreadTimesAt) -> Result<(), ProbeError> {
        use std::io::Read;
        if !self.why {
            return Ok(());
        }
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            bss.times_when = at as u32;
        }
        let link = bpf(self.skel.progs.ls_times_iter.attach(), "attaching the thread-times iterator")?;
        let mut it = bpf(libbpf_rs::Iter::new(&link), "opening the thread-times iterator")?;
        // The program writes nothing to the file: its events go to the ring buffer.
        let mut sink = Vec::new();
        it.read_to_end(&mut sink).map_err(ProbeError::Ring)?;
        Ok(())
    }

    /// Add a process to the pid filter (a command started after the probes are attached, the
    /// descendants a followed process had at the start). `Ok(false)`: the filter is full
    /// ([`PIDS_MAX`]) and the process was not added.
    pub fn add_pid(&mut self, pid: u32) -> Result<bool, ProbeError> {
        match self.skel.maps.pids.update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY) {
            Ok(()) => {}
            Err(e) if e.kind() == libbpf_rs::ErrorKind::TooBig => return Ok(false),
            Err(source) => return Err(ProbeError::Bpf { context: format!("adding pid {pid}"), source }),
        }
        // Verdicts the programs cached per task are stale now: make them look again. The
        // programs bump the generation too (as they follow forks and exits): atomically.
        if let Some(data) = self.skel.maps.data_data.as_deref_mut() {
            // SAFETY: the pointer is to the u32 in the mapped .data section, which lives as long
            // as the skeleton; the BPF side changes it only with atomic adds too.
            let gen = unsafe { std::sync::atomic::AtomicU32::from_ptr(&mut data.filter_gen as *mut u32) };
            gen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(true)
    }

    /// The key of the stack an event of the last poll refers to, and the generation of its
    /// process then (for [`Probe::normalize_user`]): `r` is its `kstack`/`ustack` as decoded
    /// (positive: captured; see [`Probe::stack_frames`]). Valid until the next poll.
    pub fn stack_key(&self, r: u32) -> Option<(u64, u32)> {
        let i = (r as i32).checked_sub(1).filter(|&i| i >= 0)? as usize;
        self.decoder.borrow().stack_keys.get(i).copied()
    }

    /// The copy of the user stack sent beside user stack reference `r` of an event of the last
    /// poll (`record --call-graph dwarf`), if one was. Valid until the next poll.
    pub fn stack_copy(&self, r: u32) -> Option<std::sync::Arc<UserCopy>> {
        let i = (r as i32).checked_sub(1).filter(|&i| i >= 0)? as usize;
        self.decoder.borrow().stack_copies.get(&i).cloned()
    }

    /// User stack copies read so far, and those matched with their event.
    pub fn stack_copies(&self) -> (u64, u64) {
        self.decoder.borrow().copies
    }

    /// The frames (innermost first) of the stack with key `key` captured with attribution,
    /// kernel or user, drained from the kernel's maps after the poll that read its event.
    /// `None` when it is not held (any more: the store keeps the recent stacks by key, bounded).
    pub fn stack_frames(&self, user: bool, key: u64) -> Option<std::sync::Arc<[u64]>> {
        self.stacks.as_ref()?.get(user, key)
    }

    /// What each of `addrs` is in process `pid` (file, offset and build id) for a stack taken
    /// at `at_ns` in generation `gen` of the process ([`Probe::stack_key`]), from its /proc maps
    /// read within the bounds of [`procmaps`]; [`procmaps::Gone`] when it exited or exec'd.
    pub fn normalize_user(
        &self,
        pid: u32,
        gen: u32,
        at_ns: u64,
        addrs: &[u64],
    ) -> Result<procmaps::Normalized, procmaps::Gone> {
        self.decoder.borrow_mut().procmaps.normalize(pid, gen, at_ns, addrs)
    }

    /// The processes whose maps the last poll read again, as they exec'd or mapped a file
    /// (`--call-graph dwarf`).
    pub fn maps_reread(&self) -> Vec<u32> {
        self.decoder.borrow().maps_reread.clone()
    }

    /// Process `pid`'s file mappings for unwinding a stack whose instruction pointer is `ip`,
    /// taken at `at_ns` (see [`procmaps::MapsCache::file_mappings`]).
    pub fn file_mappings(&self, pid: u32, ip: u64, at_ns: u64) -> Option<(u64, Vec<procmaps::FileMapping>)> {
        self.decoder.borrow_mut().procmaps.file_mappings(pid, ip, at_ns)
    }

    /// What the frames of user stack `key` were as files (device, inode, offset), when its
    /// process exited or exec'd before its maps were read and the kernel named them then:
    /// each file named by the path the recording knows for it (the opens recorded, processes'
    /// maps read), with its build id when the file at that path is still that inode.
    pub fn user_stack_files(&self, key: u64) -> Option<Vec<procmaps::UserAddr>> {
        let store = self.stacks.as_ref()?;
        // Not drained yet: the process exited after this poll's drain. The kernel names the
        // frames on entering exit_group, before the process's memory goes, so a maps read that
        // failed for the exit finds them in the map.
        let files = store.files(key).or_else(|| {
            let v = self.skel.maps.why_ufiles.lookup(&key.to_ne_bytes(), libbpf_rs::MapFlags::ANY).ok()??;
            stackstore::file_frames(&v)
        })?;
        let mut d = self.decoder.borrow_mut();
        Some(files.iter().map(|&(dev, ino, off)| d.user_addr_of_file(dev, ino, off)).collect())
    }

    /// The processes that exec'd or exited in the events of the last poll: what their
    /// addresses meant is gone (a stack table forgets it).
    pub fn maps_changed(&self) -> Vec<u32> {
        self.decoder.borrow().maps_changed.clone()
    }

    /// What reading processes' /proc maps cost so far (see [`procmaps`]).
    pub fn maps_stats(&self) -> procmaps::MapsStats {
        self.decoder.borrow().procmaps.stats()
    }

    /// Move the stacks stored since the last call out of the kernel's maps (they hold only new
    /// stacks, so that nobody fills them for good), and start the users' quotas again.
    fn drain_stacks(&mut self) {
        let Some(store) = self.stacks.as_mut() else { return };
        store.drain(&self.skel.maps.why_kstacks, false);
        store.drain(&self.skel.maps.why_ustacks, true);
        store.drain_files(&self.skel.maps.why_ufiles);
        if let Some(data) = self.skel.maps.data_data.as_deref_mut() {
            // SAFETY: the u32 in the mapped .data section, which lives as long as the skeleton;
            // the programs only read it.
            let epoch = unsafe { std::sync::atomic::AtomicU32::from_ptr(&mut data.why_stack_epoch as *mut u32) };
            epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Processes in the kernel's pid filter now: the given ones and, when following, the
    /// children forked since that have not exited.
    pub fn pid_filter_len(&self) -> usize {
        self.skel.maps.pids.keys().count()
    }

    /// Wait up to `timeout` for events and return what was decoded (possibly nothing).
    pub fn poll(&mut self, timeout: Duration) -> Result<EventBatch, ProbeError> {
        self.poll_raw(timeout)?;
        Ok(self.decoder.borrow_mut().take())
    }

    /// Like [`Probe::poll`], but appends the events to `out`: a recorder decodes straight into
    /// the block it is filling, with no intermediate batch to allocate, grow and copy.
    pub fn poll_into(&mut self, out: &mut EventBatch, timeout: Duration) -> Result<(), ProbeError> {
        std::mem::swap(&mut self.decoder.borrow_mut().batch, out);
        let r = self.poll_raw(timeout);
        std::mem::swap(&mut self.decoder.borrow_mut().batch, out);
        r
    }

    /// Like [`Probe::poll_into`], but block requests and process events go to `other`: a
    /// recorder writes them in blocks of their own, so that a reader wanting one kind of event
    /// never decodes the `kind` column and skips the other kind's blocks whole.
    pub fn poll_into_split(
        &mut self,
        syscalls: &mut EventBatch,
        other: &mut EventBatch,
        timeout: Duration,
    ) -> Result<(), ProbeError> {
        {
            let mut d = self.decoder.borrow_mut();
            std::mem::swap(&mut d.batch, syscalls);
            d.other = Some(std::mem::take(other));
        }
        let r = self.poll_raw(timeout);
        let mut d = self.decoder.borrow_mut();
        std::mem::swap(&mut d.batch, syscalls);
        *other = d.other.take().unwrap_or_default();
        r
    }

    /// Consume up to [`MAX_RECORDS_PER_POLL`] records into the decoder's batch, waiting up to
    /// `timeout` for the first when there are none.
    fn poll_raw(&mut self, timeout: Duration) -> Result<(), ProbeError> {
        self.decoder.borrow_mut().begin_poll();
        let before = self.consumed;
        let r = self.consume(timeout);
        if self.consumed == before {
            self.decoder.borrow_mut().release_held();
        }
        self.decoder.borrow_mut().reread_grown_maps();
        self.decoder.borrow_mut().settle();
        // Every event read refers to stacks stored before it was written: drained now, they
        // are in the store when its stack references are resolved.
        self.drain_stacks();
        r
    }

    fn consume(&mut self, timeout: Duration) -> Result<(), ProbeError> {
        if self.merge.is_some() {
            if self.consume_merged()? > 0 {
                return Ok(());
            }
            // The per-CPU rings wake no one: wait at most PCPU_POLL for the shared ring buffer.
            self.wait(timeout.min(PCPU_POLL));
            self.consume_merged()?;
            return Ok(());
        }
        let Some(rb) = &self.rb else {
            std::thread::sleep(timeout);
            return Ok(());
        };
        let n = rb.consume_raw_n(MAX_RECORDS_PER_POLL);
        if n < 0 {
            return Err(ProbeError::Ring(std::io::Error::from_raw_os_error(-n)));
        }
        if n > 0 {
            self.consumed += n as u64;
            return Ok(());
        }
        // Nothing yet: wait on the ring buffer's epoll fd (which consumes nothing). Producers
        // skip wakeups until the buffer is 1/8 full (cheaper per event), so the wait may time out
        // with data waiting: consume afterwards either way. A signal (Ctrl-C) interrupts the
        // wait: the caller decides whether to stop.
        self.wait(timeout);
        let n = rb.consume_raw_n(MAX_RECORDS_PER_POLL);
        if n < 0 {
            return Err(ProbeError::Ring(std::io::Error::from_raw_os_error(-n)));
        }
        self.consumed += n as u64;
        Ok(())
    }

    /// Wait up to `timeout` on the shared ring buffer (its wake-ups; a signal ends the wait).
    fn wait(&self, timeout: Duration) {
        let Some(rb) = &self.rb else { return };
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: epoll_wait on the ring buffer's own epoll fd with one valid event slot.
        unsafe { libc::epoll_wait(rb.epoll_fd(), &mut ev, 1, ms) };
    }

    /// With per-CPU rings: read the shared ring buffer's new records and the rings' heads, and
    /// decode, in time order, what can no longer be preceded by a record not read yet (see
    /// `merge`). Returns how many were decoded.
    fn consume_merged(&mut self) -> Result<usize, ProbeError> {
        let Some(m) = self.merge.clone() else { return Ok(0) };
        // The time first: every record of an earlier time is in a ring once the heads are read
        // and the shared ring buffer is read to its end.
        let mut watermark =
            if self.detached { u64::MAX } else { snapshot::monotonic_ns().saturating_sub(merge::MARGIN_NS) };
        m.borrow_mut().begin();
        // At most MAX_RECORDS_PER_POLL records wait here: beyond, they wait in the kernel.
        let room = MAX_RECORDS_PER_POLL.saturating_sub(m.borrow().staged());
        let n = match (&self.rb, room) {
            (Some(rb), r) if r > 0 => rb.consume_raw_n(r),
            _ => 0,
        };
        if n < 0 {
            return Err(ProbeError::Ring(std::io::Error::from_raw_os_error(-n)));
        }
        if n as usize >= room {
            // Not read to its end: what it still holds may be earlier than the rings' records.
            watermark = watermark.min(m.borrow().shared_newest());
        }
        let mut dec = self.decoder.borrow_mut();
        let k = m.borrow_mut().emit(watermark, MAX_RECORDS_PER_POLL, |d| dec.record(d));
        self.consumed += k as u64;
        Ok(k)
    }

    /// Detaches every program: nothing more is produced, and what the ring buffer holds stays
    /// there to be read (to its end: see [`Probe::poll_into_split`]). Ends a recording without
    /// leaving events behind that were neither read nor counted as lost.
    pub fn detach(&mut self) {
        self.links.clear();
        self.detached = true;
    }

    /// Ring-buffer records consumed so far (events, and records the decoder could not read).
    pub fn records_consumed(&self) -> u64 {
        self.consumed
    }

    /// Read what is already in the ring buffer (at most [`MAX_RECORDS_PER_POLL`] records)
    /// without waiting.
    pub fn drain(&mut self) -> Result<EventBatch, ProbeError> {
        self.decoder.borrow_mut().begin_poll();
        if self.merge.is_some() {
            self.consume_merged()?;
        } else if let Some(rb) = &self.rb {
            let n = rb.consume_raw_n(MAX_RECORDS_PER_POLL);
            if n < 0 {
                return Err(ProbeError::Ring(std::io::Error::from_raw_os_error(-n)));
            }
            self.consumed += n as u64;
            if n == 0 {
                self.decoder.borrow_mut().release_held();
            }
        }
        self.drain_stacks();
        Ok(self.decoder.borrow_mut().take())
    }

    /// CPU time the attached programs have run, in ns (the kernel's `run_time_ns`, summed). It
    /// only grows while run-time statistics are enabled: see [`enable_run_time_stats`].
    pub fn run_time_ns(&self) -> u64 {
        use std::os::fd::{AsFd, AsRawFd};
        let progs = [
            &self.skel.progs.ls_switch,
            &self.skel.progs.ls_sys_enter,
            &self.skel.progs.ls_sys_exit,
            &self.skel.progs.ls_rq_insert,
            &self.skel.progs.ls_rq_issue,
            &self.skel.progs.ls_rq_complete,
            &self.skel.progs.ls_fork,
            &self.skel.progs.ls_exec,
            &self.skel.progs.ls_exit,
        ];
        let mut total = 0;
        for p in progs {
            let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of_val(&info) as u32;
            // SAFETY: the fd is the program's, `info` is a zeroed bpf_prog_info of `len` bytes
            // (no pointer fields set, so the kernel writes only into it).
            let r =
                unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(p.as_fd().as_raw_fd(), &mut info, &mut len) };
            if r == 0 {
                total += info.run_time_ns;
            }
        }
        total
    }

    /// Name what a start snapshot brought up to date after the probes attached
    /// ([`snapshot::reconcile`]) holds: processes started and fds opened before the attach
    /// that the snapshot taken before it missed. Call before the first poll.
    pub fn learn(&mut self, processes: &[latscope_event::ProcessInfo], fds: &[latscope_event::FdInfo]) {
        self.decoder.borrow_mut().learn(processes, fds);
    }

    /// How long each step of loading and attaching the probes took (and, with
    /// [`starttimes::ENV`] set, how long the kernel's verifier took per program).
    pub fn start_times(&self) -> &starttimes::StartTimes {
        &self.start_times
    }

    /// CLOCK_MONOTONIC ns at which the probes were attached: time zero of what they saw.
    pub fn attached_ns(&self) -> u64 {
        self.attached_ns
    }

    /// The in-kernel counters (`struct ls_stats` per CPU, summed).
    pub fn stats(&self) -> ProbeStats {
        let mut t = ProbeStats::default();
        let Ok(Some(per_cpu)) = self.skel.maps.stats.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY) else {
            return t;
        };
        for b in per_cpu.iter().filter(|b| b.len() >= std::mem::size_of::<types::ls_stats>()) {
            // SAFETY: length checked; ls_stats is plain old data; no alignment promise.
            let s: types::ls_stats = unsafe { std::ptr::read_unaligned(b.as_ptr() as *const types::ls_stats) };
            t.events += s.events;
            t.lost += s.lost;
            t.path_faults += s.path_faults;
            t.blk_unpaired += s.blk_unpaired;
            t.blk_flush_ends += s.blk_flush_ends;
            t.not_followed += s.not_followed;
            t.wakeups_unseen += s.wakeups_unseen;
        }
        t
    }

    /// Runs of the loaded programs that the kernel skipped because the same program was already
    /// running on that CPU (it does not re-enter a program: an interrupt's tracepoint while the
    /// program runs), summed: the kernel's `recursion_misses`. `None` when the kernel does not
    /// count them (before Linux 5.12).
    pub fn recursion_misses(&self) -> Option<u64> {
        use std::os::fd::{AsFd, AsRawFd};
        let field_end = std::mem::offset_of!(libbpf_rs::libbpf_sys::bpf_prog_info, recursion_misses) + 8;
        let mut total = 0;
        let mut counted = false;
        for p in self.skel.object().progs().filter(|p| p.autoload()) {
            let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of_val(&info) as u32;
            // SAFETY: the fd is the program's (loaded), `info` is a zeroed bpf_prog_info of `len`
            // bytes (no pointer fields set, so the kernel writes only into it).
            let r =
                unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(p.as_fd().as_raw_fd(), &mut info, &mut len) };
            // The kernel says how much of the structure it knows: without the field, nothing.
            if r == 0 && len as usize >= field_end {
                total += info.recursion_misses;
                counted = true;
            }
        }
        counted.then_some(total)
    }

    /// Records the decoder found malformed (never expected; reported with the stats).
    pub fn malformed(&self) -> u64 {
        self.decoder.borrow().malformed
    }

    /// The cumulative in-kernel histograms (only with [`ProbeConfig::aggregate`]), with their
    /// exact sums and, for block requests, their queue times, sizes and bytes.
    pub fn read_agg(&self) -> Result<AggSnapshot, ProbeError> {
        let counts = self.read_percpu(&self.skel.maps.agg, self.agg_groups * AGG_BUCKETS, 1)?;
        let sum_words = std::mem::size_of::<types::ls_agg_sum>() / 8;
        let sums = self.read_percpu(&self.skel.maps.agg_sums, self.agg_groups, sum_words)?;
        let mut snap = AggSnapshot::default();
        for (g, c) in counts.chunks(AGG_BUCKETS).enumerate() {
            if c.iter().any(|&v| v > 0) {
                snap.groups.push((g as u32, c.to_vec()));
                let s: types::ls_agg_sum = from_words(&sums[g * sum_words..(g + 1) * sum_words]);
                snap.sums.push(AggSums { lat_ns: s.lat, errors: s.errors });
            }
        }
        if self.blk_groups > 0 {
            let words = std::mem::size_of::<types::ls_agg_blk>() / 8;
            let blk = self.read_percpu(&self.skel.maps.agg_blk, self.blk_groups * AGG_OPS.len(), words)?;
            for (i, per_group) in blk.chunks(words * AGG_OPS.len()).enumerate() {
                let ops: Vec<BlockAgg> = per_group
                    .chunks(words)
                    .map(|w| {
                        let b: types::ls_agg_blk = from_words(w);
                        BlockAgg { bytes: b.bytes, queue_ns: b.qtime, queue: b.queue.to_vec(), size: b.size.to_vec() }
                    })
                    .collect();
                if ops.iter().any(|o| o.requests() > 0) {
                    snap.block.push(((self.blk_base + i) as u32, ops));
                }
            }
        }
        Ok(snap)
    }

    /// The values of a per-CPU array of `entries` values of `words` u64 each, summed over CPUs
    /// word by word (batched lookups: a few syscalls for the whole map).
    fn read_percpu(&self, map: &libbpf_rs::MapMut, entries: usize, words: usize) -> Result<Vec<u64>, ProbeError> {
        let mut sums = vec![0u64; entries * words];
        let chunk = (8192 / words).clamp(1, entries.max(1));
        let mut keys = vec![0u32; chunk];
        let mut vals = vec![0u64; chunk * self.ncpus * words];
        let mut in_batch: u32 = 0;
        let mut out_batch: u32 = 0;
        let mut first = true;
        loop {
            let mut count = chunk as u32;
            let opts = libbpf_rs::libbpf_sys::bpf_map_batch_opts {
                sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_batch_opts>() as _,
                ..Default::default()
            };
            // SAFETY: keys and vals have room for `count` entries of this per-CPU map (values of
            // `words` u64 per CPU).
            let ret = unsafe {
                libbpf_rs::libbpf_sys::bpf_map_lookup_batch(
                    std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(map)),
                    if first { std::ptr::null_mut() } else { &mut in_batch as *mut u32 as *mut _ },
                    &mut out_batch as *mut u32 as *mut _,
                    keys.as_mut_ptr() as *mut _,
                    vals.as_mut_ptr() as *mut _,
                    &mut count,
                    &opts,
                )
            };
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            for i in 0..count as usize {
                let k = keys[i] as usize;
                if k < entries {
                    let out = &mut sums[k * words..(k + 1) * words];
                    for cpu in vals[i * self.ncpus * words..(i + 1) * self.ncpus * words].chunks(words) {
                        for (o, v) in out.iter_mut().zip(cpu) {
                            *o += v;
                        }
                    }
                }
            }
            if ret != 0 {
                if errno == libc::ENOENT {
                    break;
                }
                // ENOTSUPP (524): batch lookups of per-CPU arrays came after some kernels the
                // probes run on (Ubuntu's 5.11 has none); one key at a time there.
                if first && (errno == 524 || errno == libc::EINVAL) {
                    read_percpu_each(map, words, &mut sums)?;
                    break;
                }
                return Err(ProbeError::Unsupported(format!(
                    "reading in-kernel histograms failed: {}",
                    std::io::Error::from_raw_os_error(errno)
                )));
            }
            in_batch = out_batch;
            first = false;
        }
        Ok(sums)
    }
}

/// [`Probe::read_percpu`]'s sums, read one key at a time (`sums` holds `words` u64 per entry).
fn read_percpu_each(map: &libbpf_rs::MapMut, words: usize, sums: &mut [u64]) -> Result<(), ProbeError> {
    for (k, out) in sums.chunks_mut(words).enumerate() {
        let key = (k as u32).to_ne_bytes();
        let per_cpu = bpf(map.lookup_percpu(&key, MapFlags::ANY), "reading in-kernel histograms")?;
        for cpu in per_cpu.iter().flatten() {
            for (o, v) in out.iter_mut().zip(cpu.chunks_exact(8)) {
                *o += u64::from_ne_bytes(v.try_into().unwrap_or([0; 8]));
            }
        }
    }
    Ok(())
}

/// A value of a BTF type from the words a per-CPU map read gave for it (summed over CPUs: every
/// field of the aggregates is a u64 count).
fn from_words<T>(w: &[u64]) -> T {
    assert!(std::mem::size_of_val(w) >= std::mem::size_of::<T>(), "a short value");
    // SAFETY: `w` holds at least size_of::<T>() bytes; T is a plain #[repr(C)] struct of u64
    // fields generated from BTF, valid for any bit pattern; the read is unaligned-safe.
    unsafe { std::ptr::read_unaligned(w.as_ptr() as *const T) }
}

fn as_bytes<T>(v: &T) -> &[u8] {
    // SAFETY: T is a plain #[repr(C)] struct generated from BTF, read as bytes.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
}

/// Name of a [`SysClass`] code as stored in aggregation groups.
pub fn sys_class_name(code: u32) -> &'static str {
    const ALL: [SysClass; 9] = [
        SysClass::Other,
        SysClass::Read,
        SysClass::Write,
        SysClass::FileMeta,
        SysClass::Net,
        SysClass::Wait,
        SysClass::Memory,
        SysClass::Process,
        SysClass::Sync,
    ];
    ALL.iter().find(|c| **c as u32 == code).map(|c| c.name()).unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The object opened for one test program (BPF_PROG_TEST_RUN): no program loads and no map
    /// is made but the read-only data; the test turns its program on.
    fn nothing_but_read_only_data(open: &mut OpenLatscopeSkel<'_>) {
        for mut p in open.open_object_mut().progs_mut() {
            p.set_autoload(false);
        }
        for mut m in open.open_object_mut().maps_mut() {
            if !m.name().to_string_lossy().contains(".rodata") {
                m.set_autocreate(false).unwrap();
            }
        }
    }

    /// The time the hypervisor took from a stretch on CPU (why.bpf.h's why_steal_in, run in the
    /// kernel through its test program): what the steal clock advanced over it, never more than
    /// the stretch, nothing without a reading at its start.
    #[test]
    fn steal_time_of_a_stretch_on_cpu_is_the_clock_s_advance_within_it() {
        if !latscope_testkit::require_bpf("steal_time_of_a_stretch_on_cpu_is_the_clock_s_advance_within_it") {
            return;
        }
        let mut obj = MaybeUninit::uninit();
        let mut open = LatscopeSkelBuilder::default().open(&mut obj).unwrap();
        nothing_but_read_only_data(&mut open);
        open.progs.ls_why_steal_test.set_autoload(true);
        let skel = open.load().unwrap();
        let stolen = |d: u64, from: u64, steal: u64| -> u32 {
            // struct ls_why_steal_case
            let mut ctx = [0u8; 24];
            for (k, v) in [d, from, steal].into_iter().enumerate() {
                ctx[k * 8..k * 8 + 8].copy_from_slice(&v.to_ne_bytes());
            }
            let input = libbpf_rs::ProgramInput { context_in: Some(&mut ctx), ..Default::default() };
            skel.progs.ls_why_steal_test.test_run(input).unwrap().return_value
        };
        assert_eq!(stolen(10_000, 5_000_000, 5_003_000), 3_000, "the clock's advance");
        assert_eq!(stolen(10_000, 5_000_000, 5_000_000), 0, "nothing taken");
        assert_eq!(stolen(10_000, 5_000_000, 5_900_000), 10_000, "never more than the stretch");
        assert_eq!(stolen(10_000, 0, 5_003_000), 0, "no reading at the start (no clock)");
        assert_eq!(stolen(10_000, 5_003_000, 5_000_000), 0, "a clock that went back");
    }

    /// The cause of a blocked interval (why.bpf.h's why_cause, run in the kernel through its
    /// test program with BPF_PROG_TEST_RUN), with the table user space gives it: a wake-up's
    /// context first (after I/O waits), and, for an interval whose wake-up no program saw, what
    /// the call says by itself (its I/O-wait hint, syscall number, fd type), else unknown.
    #[test]
    fn why_cause_of_a_wait_whose_wake_up_was_not_seen_is_the_call_s_own() {
        if !latscope_testkit::require_bpf("why_cause_of_a_wait_whose_wake_up_was_not_seen_is_the_call_s_own") {
            return;
        }
        let mut obj = MaybeUninit::uninit();
        let mut open = LatscopeSkelBuilder::default().open(&mut obj).unwrap();
        // Only its read-only data (the table) is needed.
        nothing_but_read_only_data(&mut open);
        open.progs.ls_why_cause_test.set_autoload(true);
        open.maps.rodata_data.as_deref_mut().unwrap().why_nr_part = why_nr_parts();
        let skel = open.load().unwrap();
        const UNSEEN: u8 = 0;
        const TASK: u8 = 1;
        const TIMER: u8 = 2;
        const NET_RX: u8 = 3;
        let (iowait, fault) = (1u8, 2u8);
        let cause = |call: &str, fd: FdType, hint: u8, by: u8| -> &'static str {
            let nr = syscalls::syscall_nr(call).unwrap() as u32;
            // struct ls_why_cause_case
            let mut ctx = [0u8; 8];
            ctx[..4].copy_from_slice(&nr.to_ne_bytes());
            ctx[4] = hint;
            ctx[5] = fd as u8;
            ctx[6] = by;
            let input = libbpf_rs::ProgramInput { context_in: Some(&mut ctx), ..Default::default() };
            let out = skel.progs.ls_why_cause_test.test_run(input).unwrap();
            latscope_event::WHY_PART_NAMES[out.return_value as usize]
        };
        use FdType::*;
        // Not seen: the call alone.
        assert_eq!(cause("nanosleep", Unknown, 0, UNSEEN), "timer");
        assert_eq!(cause("clock_nanosleep", Unknown, 0, UNSEEN), "timer");
        for call in ["futex", "flock", "fcntl", "semop"] {
            assert_eq!(cause(call, Unknown, 0, UNSEEN), "lock", "{call}");
        }
        for call in ["poll", "epoll_wait", "select", "msgrcv"] {
            assert_eq!(cause(call, Unknown, 0, UNSEEN), "ipc", "{call}");
        }
        for fd in [Pipe, Unix, Ipv4, Ipv6, Netlink, Socket] {
            assert_eq!(cause("read", fd, 0, UNSEEN), "ipc", "{fd:?}");
        }
        assert_eq!(cause("fsync", File, iowait, UNSEEN), "io");
        assert_eq!(cause("write", File, iowait | fault, UNSEEN), "fault");
        assert_eq!(cause("read", File, 0, UNSEEN), "unknown");
        assert_eq!(cause("wait4", Unknown, 0, UNSEEN), "unknown");
        // Seen: the wake-up's context comes first, after I/O waits; a sleep a task ends (a
        // signal) is other wait, a futex wait a timer ends is timer.
        assert_eq!(cause("nanosleep", Unknown, 0, TIMER), "timer");
        assert_eq!(cause("nanosleep", Unknown, 0, TASK), "other");
        assert_eq!(cause("futex", Unknown, 0, TIMER), "timer");
        assert_eq!(cause("futex", Unknown, 0, TASK), "lock");
        assert_eq!(cause("fsync", File, iowait, TIMER), "io");
        assert_eq!(cause("read", File, 0, NET_RX), "ipc");
        assert_eq!(cause("read", File, 0, TASK), "other");
        assert_eq!(cause("read", Pipe, 0, TASK), "ipc");
    }

    #[test]
    fn block_ops_are_the_kernel_s() {
        assert_eq!(AGG_OPS.len(), types::ls_agg_ops::LS_AGG_OPS.0 as usize);
        assert_eq!(AGG_OPS[types::ls_agg_ops::LS_AGG_OP_WRITE.0 as usize], "write");
        assert_eq!(AGG_OPS[types::ls_agg_ops::LS_AGG_OP_OTHER.0 as usize], "other");
        assert_eq!(std::mem::size_of::<types::ls_agg_blk>(), (2 + 2 * AGG_BUCKETS) * 8);
        assert_eq!(std::mem::size_of::<types::ls_agg_sum>(), 16);
    }

    #[test]
    fn agg_buckets_match_bounds() {
        for v in [0u64, 1, 7, 8, 9, 15, 16, 17, 100, 1000, 123_456, 10_000_000, 1 << 40] {
            let (lo, hi) = agg_bucket_bounds(agg_bucket(v));
            assert!(lo <= v && v < hi, "{v} not in [{lo},{hi})");
        }
        // relative width of a bucket is at most 1/16
        for i in 16..AGG_BUCKETS {
            let (lo, hi) = agg_bucket_bounds(i);
            assert!((hi - lo) as f64 / lo as f64 <= 0.0625 + 1e-9);
            assert_eq!(agg_bucket_bounds(i - 1).1, lo);
        }
    }

    #[test]
    fn record_layout_is_the_c_one() {
        assert_eq!(std::mem::size_of::<types::ls_event>(), 168);
        assert_eq!(std::mem::size_of::<types::ls_sys_desc>(), 36);
        assert_eq!(std::mem::size_of::<types::ls_stats>(), 56);
        assert_eq!(std::mem::size_of_val(&types::ls_event::default().comm), ls_limits::LS_COMM_LEN.0 as usize);
    }

    /// What latscope-event mirrors of the C side (it cannot depend on the BPF object) has the
    /// values of the object's BTF.
    #[test]
    fn event_crate_constants_are_the_c_ones() {
        use latscope_event::{syscalls::SysDesc, EventKind, ProcOp, Rwbs};
        use types::{ls_desc_bits as b, ls_fd_type as f, ls_kind as k, ls_proc_op as p, ls_rwbs as r};
        assert_eq!(syscalls::NONE as u32, ls_limits::LS_ARG_NONE.0);
        assert_eq!(NR_MAX, 512);
        assert!(syscalls::syscall_count() <= NR_MAX);
        for (rust, c) in [
            (SysDesc::IO, b::LS_IO),
            (SysDesc::READ, b::LS_READ),
            (SysDesc::WRITE, b::LS_WRITE),
            (SysDesc::RET_FD, b::LS_RET_FD),
            (SysDesc::IOV, b::LS_IOV),
            (SysDesc::OPENAT2, b::LS_OPENAT2),
            (SysDesc::OFF_PTR, b::LS_OFF_PTR),
            (SysDesc::FILE_POS, b::LS_FILE_POS),
            (SysDesc::CLOSE, b::LS_CLOSE),
            (SysDesc::ADDR_FD, b::LS_ADDR_FD),
            (SysDesc::SOCK, b::LS_SOCK),
            (SysDesc::FD_PAIR, b::LS_FD_PAIR),
            (SysDesc::CLONE_ARGS, b::LS_CLONE_ARGS),
            (SysDesc::RENAMES, b::LS_RENAMES),
            (SysDesc::FD_TABLE, b::LS_FD_TABLE),
            (SysDesc::CLONE_RANGE, b::LS_CLONE_RANGE),
        ] {
            assert_eq!(rust as u32, c.0, "SysDesc bit {rust}");
        }
        for (rust, c) in [
            (FdType::Unknown, f::LS_FD_UNKNOWN),
            (FdType::File, f::LS_FD_FILE),
            (FdType::Directory, f::LS_FD_DIR),
            (FdType::Ipv4, f::LS_FD_IPV4),
            (FdType::Ipv6, f::LS_FD_IPV6),
            (FdType::Unix, f::LS_FD_UNIX),
            (FdType::Pipe, f::LS_FD_PIPE),
            (FdType::Event, f::LS_FD_EVENT),
            (FdType::Signalfd, f::LS_FD_SIGNALFD),
            (FdType::Eventpoll, f::LS_FD_EVENTPOLL),
            (FdType::Inotify, f::LS_FD_INOTIFY),
            (FdType::Timerfd, f::LS_FD_TIMERFD),
            (FdType::Memfd, f::LS_FD_MEMFD),
            (FdType::Chardev, f::LS_FD_CHR),
            (FdType::Blockdev, f::LS_FD_BLK),
            (FdType::Netlink, f::LS_FD_NETLINK),
            (FdType::Socket, f::LS_FD_SOCKET),
            (FdType::Anon, f::LS_FD_ANON),
        ] {
            assert_eq!(rust as u32, c.0, "{rust:?}");
        }
        assert_eq!(FdType::ALL.len(), 18, "every FdType is pinned above");
        for (rust, c) in [(Rwbs::SYNC, r::LS_RWBS_SYNC), (Rwbs::META, r::LS_RWBS_META), (Rwbs::FUA, r::LS_RWBS_FUA)]
            .into_iter()
            .chain([(Rwbs::PREFLUSH, r::LS_RWBS_PREFLUSH), (Rwbs::RAHEAD, r::LS_RWBS_RAHEAD)])
        {
            assert_eq!(rust, c.0, "Rwbs bit {rust}");
        }
        assert_eq!(EventKind::Syscall as u32, k::LS_SYSCALL.0);
        assert_eq!(EventKind::Block as u32, k::LS_BLOCK.0);
        assert_eq!(EventKind::Proc as u32, k::LS_PROC.0);
        assert_eq!(ProcOp::Fork as u32, p::LS_FORK.0);
        assert_eq!(ProcOp::Exec as u32, p::LS_EXEC.0);
        assert_eq!(ProcOp::Exit as u32, p::LS_EXIT.0);
        assert_eq!(SysClass::Process as u32, types::ls_sys_class::LS_CLASS_PROCESS.0);
    }

    #[test]
    fn replay_capture_needs_every_file_call_unfiltered() {
        let all = ProbeConfig::default();
        assert!(all.captures_for_replay());
        assert!(ProbeConfig { syscalls: SyscallSel::Io, pids: vec![1], ..Default::default() }.captures_for_replay());
        for c in [
            ProbeConfig { syscalls: SyscallSel::Off, ..Default::default() },
            ProbeConfig { syscalls: SyscallSel::Only(vec![0]), ..Default::default() },
            ProbeConfig { comms: vec!["x".into()], ..Default::default() },
            ProbeConfig { min_lat_ns: 1, ..Default::default() },
            ProbeConfig { fd_types: vec![FdType::File], ..Default::default() },
            ProbeConfig { aggregate: Some(AggGroup::All), ..Default::default() },
        ] {
            assert!(!c.captures_for_replay(), "{c:?}");
        }
    }

    #[test]
    fn agg_diff() {
        let s = |lat_ns, errors| AggSums { lat_ns, errors };
        let a = AggSnapshot { groups: vec![(1, vec![1, 2, 3])], sums: vec![s(10, 1)], ..Default::default() };
        let b = AggSnapshot {
            groups: vec![(1, vec![2, 2, 5]), (2, vec![1, 0, 0])],
            sums: vec![s(25, 1), s(7, 1)],
            ..Default::default()
        };
        let d = b.since(&a);
        assert_eq!(d.groups, vec![(1, vec![1, 0, 2]), (2, vec![1, 0, 0])]);
        assert_eq!(d.sums, vec![s(15, 0), s(7, 1)]);
    }
}

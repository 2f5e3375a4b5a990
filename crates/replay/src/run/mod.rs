//! `run`: the executor.
//!
//! One worker per lane (recorded threads that never overlapped share one); each runs its
//! threads' operations in order, waiting at dependency markers for other threads' progress
//! counters. Nothing is shared on the hot path but those counters and the fd slots (plain
//! atomics, written by the operation that fills a slot and read after the dependency that
//! orders them); each worker counts its own statistics, merged at the end.

mod exec;
mod sync;

use crate::cpaths::CPaths;
use crate::error::{ReplayError, Result};
use crate::init::sandbox_spec;
use crate::op::{Compare, OpKind};
use crate::pattern::{AlignedBuf, Pattern};
use crate::plan::Plan;
use crate::sandbox::{check_tree_at, Sandbox};
use crate::stats::{Collector, Skip, Stats};
use crate::sys;
use crate::xattrs::{XattrLimits, XattrPolicy};
use exec::{NotDone, Worker};
use latscope_hist::Histogram;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use sync::{Progress, StartGate};

/// Options of [`run`].
#[derive(Default)]
pub struct RunOptions<'a> {
    /// Use this sandbox directory instead of the plan's (`root` plans).
    pub root: Option<PathBuf>,
    /// Speed factor: 0 as fast as dependencies allow, 1 the recorded pace, 2 twice as fast...
    pub speed: f64,
    /// Drop the page cache (after a sync) before starting.
    pub drop_caches: bool,
    /// Run the workers of a timed run (`speed` above 0) under the real-time policy SCHED_FIFO
    /// (priority 1), so that other load on the machine does not make operations late (needs
    /// root or CAP_SYS_NICE; the kernel still keeps 5 % of each second for other tasks).
    pub realtime: bool,
    /// Run as this user (uid, gid) once the sandbox and preopened files are open.
    pub user: Option<(u32, u32)>,
    /// The user's name, for the report.
    pub user_name: Option<String>,
    /// Raised to stop the run (Ctrl-C); the statistics cover what was done.
    pub stop: Option<&'a AtomicBool>,
    /// Called about ten times a second with the run's progress.
    pub on_tick: Option<&'a mut dyn FnMut(&Live)>,
    /// The plan file's name, for the report.
    pub plan_name: String,
    /// Namespaces of extended attributes set besides `user.*` (never `security.capability`);
    /// sets of others are skipped.
    pub xattrs: XattrPolicy,
    /// Bounds on the extended attributes set, checked before anything is written.
    pub xattr_limits: XattrLimits,
}

/// A running replay's counters (for progress lines and live export).
#[derive(Debug, Clone, Default)]
pub struct Live {
    /// Time since the start (ns).
    pub elapsed_ns: u64,
    /// Operations done (recorded and implicit).
    pub done: u64,
    /// Operations in the plan (recorded and implicit).
    pub total: u64,
    /// Divergences so far.
    pub divergences: u64,
    /// Operations that failed in the replay so far (recorded failures included).
    pub errors: u64,
    /// Largest lateness since the previous tick (ns; timed runs).
    pub max_lateness_ns: u64,
    /// Lateness of the operations started since the previous tick (ns; timed runs, else
    /// `None`): what [`crate::LiveMetrics`] turns into an interval's percentiles.
    pub lateness: Option<Histogram>,
    /// The last tick: every worker has finished (or stopped).
    pub finished: bool,
}

/// Per-worker counters the main thread reads while the run goes on.
#[repr(align(64))]
#[derive(Default)]
struct WorkerLive {
    done: AtomicU64,
    divergences: AtomicU64,
    errors: AtomicU64,
    max_late: AtomicU64,
    /// Lateness since the main thread last took it (timed runs). The worker only ever
    /// `try_lock`s it: a real-time worker must not wait for the main thread.
    late: Mutex<Histogram>,
    /// CLOCK_MONOTONIC when the worker finished (0 while running).
    finished_ns: AtomicU64,
    /// The worker's thread (0 until it started), to interrupt it once the run is stopped.
    thread: AtomicU64,
}

/// What every worker shares.
pub(crate) struct Shared<'a> {
    pub paths: CPaths,
    pub roots: &'a [i32],
    pub slots: Vec<AtomicI32>,
    pub maps: Vec<AtomicUsize>,
    pub map_off: Vec<AtomicU64>,
    pub pattern: Pattern,
    /// Recorded extended-attribute values (setxattr of a recorded value).
    pub values: &'a [Vec<u8>],
    /// Per literal id: whether an attribute of that name may be set.
    pub xattr_ok: Vec<bool>,
    /// Bumped by directory renames and removals: cached directory fds are looked up again.
    pub dir_gen: AtomicU64,
    /// Some operation diverged (msync stops writing into mappings).
    pub diverged: AtomicBool,
}

/// Replay `plan` in its initialised sandbox; statistics of what was done.
pub fn run(plan: &Plan, opts: &mut RunOptions) -> Result<Stats> {
    if !(opts.speed >= 0.0 && opts.speed.is_finite()) {
        return Err(ReplayError::Usage(format!(
            "--speed {}: give 0 (as fast as possible) or a positive factor",
            opts.speed
        )));
    }
    if opts.realtime && opts.speed == 0.0 {
        return Err(ReplayError::Usage(
            "--realtime is for timed runs: give --speed 1 (or another factor above 0)".into(),
        ));
    }
    if opts.realtime && !sys::can_realtime() {
        return Err(ReplayError::Usage(
            "--realtime needs root (or CAP_SYS_NICE, or an RLIMIT_RTPRIO of 1 or more): run as root or leave it out"
                .into(),
        ));
    }
    let spec = sandbox_spec(plan, opts.root.as_deref())?;
    // Messages name the paths under the roots in use (`--root` when given), not the plan's.
    let mut shown_meta = plan.meta.clone();
    shown_meta.sandbox = spec.clone();
    crate::xattrs::budget(plan, &opts.xattrs, &opts.xattr_limits)?;
    let sb = Sandbox::open_ready(&spec, plan.id)?;
    sb.check_owner(opts.user)?;
    for (r, fd) in spec.roots.iter().zip(&sb.roots) {
        check_tree_at(fd.as_raw_fd(), std::path::Path::new(&r.dir))?;
    }
    sb.mark(plan.id, "used")?;
    let roots: Vec<i32> = sb.roots.iter().map(|f| f.as_raw_fd()).collect();
    let paths = CPaths::new(plan);
    let slots: Vec<AtomicI32> = (0..plan.meta.slots).map(|_| AtomicI32::new(-1)).collect();
    // Files open before the recording: opened now, at their recorded position.
    for p in &plan.preopen {
        let flags = (p.flags & !(libc::O_CREAT | libc::O_TRUNC | libc::O_EXCL) as u32) as u64 | libc::O_CLOEXEC as u64;
        // Without blocking: a FIFO put there since the tree was checked must not hang the run.
        let nb = libc::O_NONBLOCK as u64;
        let mut fd = sys::openat2(roots[paths.root(p.path)], paths.rel(p.path), flags | nb, 0, sys::RESOLVE_SANDBOX);
        if fd >= 0 && !preopened_file(fd as i32, flags & nb == 0) {
            // SAFETY: closing the fd just opened.
            unsafe { libc::close(fd as i32) };
            fd = -(libc::EINVAL as i64);
        }
        if fd < 0 {
            close_slots(&slots);
            return Err(ReplayError::Sys {
                what: format!(
                    "cannot open {} (open before the recording): run 'latscope replay init' again",
                    plan.paths.display(&shown_meta, p.path)
                ),
                source: std::io::Error::from_raw_os_error((-fd) as i32),
            });
        }
        // SAFETY: lseek on the fd just opened.
        unsafe { libc::lseek(fd as i32, p.pos, libc::SEEK_SET) };
        slots[p.slot as usize].store(fd as i32, Ordering::Relaxed);
    }
    if opts.drop_caches {
        // SAFETY: sync has no preconditions.
        unsafe { libc::sync() };
        std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|e| ReplayError::Sys {
            what: "cannot drop the page cache (writing /proc/sys/vm/drop_caches needs root)".into(),
            source: e,
        })?;
    }
    if let Some((uid, gid)) = opts.user {
        // SAFETY: plain credential calls, before any worker exists (glibc applies them to
        // every thread anyway).
        let ok =
            unsafe { libc::setgroups(0, std::ptr::null()) == 0 && libc::setgid(gid) == 0 && libc::setuid(uid) == 0 };
        if !ok {
            close_slots(&slots);
            return Err(ReplayError::sys(format!("cannot switch to uid {uid} gid {gid} (needs root)")));
        }
    }
    if let Err(e) = sb.check_writable() {
        close_slots(&slots);
        return Err(e);
    }
    let env = crate::env::collect(&roots);
    let sh = Shared {
        paths,
        roots: &roots,
        slots,
        maps: (0..plan.meta.maps).map(|_| AtomicUsize::new(0)).collect(),
        map_off: (0..plan.meta.maps).map(|_| AtomicU64::new(0)).collect(),
        pattern: Pattern::new(plan.meta.max_write),
        values: &plan.values,
        xattr_ok: crate::xattrs::allowed_names(plan, &opts.xattrs),
        dir_gen: AtomicU64::new(0),
        diverged: AtomicBool::new(false),
    };
    let progress: Vec<Progress> = (0..plan.threads.len()).map(|_| Progress::default()).collect();
    // Only threads another one waits for publish their progress (a SeqCst store per operation).
    let mut waited = vec![false; plan.threads.len()];
    for op in plan.ops.iter().filter(|o| o.kind == OpKind::Wait) {
        waited[op.slot as usize] = true;
    }
    let nworkers = plan.meta.lanes as usize;
    let live: Vec<WorkerLive> = (0..nworkers).map(|_| WorkerLive::default()).collect();
    let mut lanes: Vec<Vec<usize>> = vec![Vec::new(); nworkers];
    for (i, t) in plan.threads.iter().enumerate() {
        lanes[t.lane as usize].push(i);
    }
    for l in &mut lanes {
        l.sort_by_key(|&i| plan.thread_ops(i).first().map(|o| o.seq).unwrap_or(0));
    }
    sys::install_interrupt_handler();
    let local_stop = AtomicBool::new(false);
    let stop = opts.stop.unwrap_or(&local_stop);
    let total: u64 = plan.threads.iter().map(|t| t.ops as u64).sum();
    let timed = opts.speed > 0.0;
    let speed = opts.speed;
    let realtime = opts.realtime;
    // Workers set up (buffers, statistics) before the clock starts, and wait at the gate.
    let gate = StartGate::default();
    let mut start = 0u64;
    let mut max_load = 0f64;
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let cols: Vec<Collector> = std::thread::scope(|s| {
        let handles: Vec<_> = lanes
            .iter()
            .enumerate()
            .map(|(w, threads)| {
                let (sh, progress, live, plan, tx, waited, gate) =
                    (&sh, &progress, &live[w], plan, done_tx.clone(), &waited, &gate);
                std::thread::Builder::new()
                    .name(format!("replay-{w}"))
                    .spawn_scoped(s, move || {
                        live.thread.store(sys::this_thread(), Ordering::Release);
                        if realtime {
                            sys::set_realtime();
                        }
                        let c = worker(sh, plan, threads, progress, waited, live, stop, gate, timed, speed);
                        live.finished_ns.store(sys::now_ns(), Ordering::Release);
                        let _ = tx.send(());
                        c
                    })
                    .expect("spawn a replay worker")
            })
            .collect();
        while gate.ready() < nworkers && !handles.iter().any(|h| h.is_finished()) {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        // A timed run starts a little ahead, so that every worker is awake when the clock starts.
        start = sys::now_ns() + if timed { 2_000_000 } else { 0 };
        gate.open(start);
        let mut ticks = 0u64;
        let mut stopping_ticks = 0u32;
        let mut finished = 0usize;
        let tick = std::time::Duration::from_millis(100);
        let mut next = std::time::Instant::now() + tick;
        loop {
            // Woken by each finishing worker, else every 100 ms.
            while finished < nworkers {
                match done_rx.recv_timeout(next.saturating_duration_since(std::time::Instant::now())) {
                    Ok(()) => finished += 1,
                    Err(_) => break,
                }
            }
            next = std::time::Instant::now() + tick;
            ticks += 1;
            if ticks % 10 == 1 {
                max_load = max_load.max(sys::loadavg1().unwrap_or(0.0));
            }
            let finished = finished == nworkers;
            if stop.load(Ordering::Relaxed) {
                for p in &progress {
                    p.wake();
                }
                // A worker still busy a tick after the stop may be blocked in a system call
                // (an open waiting for a FIFO's writer): interrupted, it sees the stop.
                stopping_ticks += 1;
                if stopping_ticks > 2 {
                    for w in &live {
                        let t = w.thread.load(Ordering::Acquire);
                        if t != 0 && w.finished_ns.load(Ordering::Acquire) == 0 {
                            sys::interrupt(t);
                        }
                    }
                }
            }
            if let Some(f) = opts.on_tick.as_mut() {
                let mut l = Live {
                    elapsed_ns: sys::now_ns().saturating_sub(start),
                    total,
                    finished,
                    lateness: timed.then(Histogram::new),
                    ..Default::default()
                };
                for w in &live {
                    l.done += w.done.load(Ordering::Relaxed);
                    l.divergences += w.divergences.load(Ordering::Relaxed);
                    l.errors += w.errors.load(Ordering::Relaxed);
                    l.max_lateness_ns = l.max_lateness_ns.max(w.max_late.swap(0, Ordering::Relaxed));
                    if let Some(h) = &mut l.lateness {
                        let mut wl = w.late.lock().unwrap_or_else(|e| e.into_inner());
                        h.merge(&wl);
                        wl.reset();
                    }
                }
                f(&l);
            }
            if finished {
                break;
            }
        }
        handles.into_iter().map(|h| h.join().expect("a replay worker panicked")).collect()
    });
    let end = live.iter().map(|l| l.finished_ns.load(Ordering::Acquire)).max().unwrap_or(start);
    let wall = end.saturating_sub(start);
    max_load = max_load.max(sys::loadavg1().unwrap_or(0.0));
    close_slots(&sh.slots);
    let mut stats = Stats::merge(plan, cols, wall);
    stats.plan = opts.plan_name.clone();
    stats.speed = opts.speed;
    stats.drop_caches = opts.drop_caches;
    stats.realtime = opts.realtime;
    stats.user = opts.user_name.clone();
    stats.interrupted = stop.load(Ordering::Relaxed);
    stats.max_loadavg = max_load;
    stats.env = env;
    Ok(stats)
}

/// Whether `fd` (opened with O_NONBLOCK) is a regular file or a directory, as a file open
/// before the recording is; O_NONBLOCK is then cleared unless the recording had it.
fn preopened_file(fd: i32, clear_nonblock: bool) -> bool {
    // SAFETY: fstat into a zeroed struct, fcntl on the fd just opened.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 || !matches!(st.st_mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFDIR) {
            return false;
        }
        if clear_nonblock {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    true
}

fn close_slots(slots: &[AtomicI32]) {
    for s in slots {
        let fd = s.swap(-1, Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: closing an fd the replay opened.
            unsafe { libc::close(fd) };
        }
    }
}

/// One worker: its lane's threads, one after the other.
#[allow(clippy::too_many_arguments)]
fn worker(
    sh: &Shared,
    plan: &Plan,
    threads: &[usize],
    progress: &[Progress],
    waited: &[bool],
    live: &WorkerLive,
    stop: &AtomicBool,
    gate: &StartGate,
    timed: bool,
    speed: f64,
) -> Collector {
    let mut col = Collector::new(timed);
    let max_read =
        threads.iter().flat_map(|&t| plan.thread_ops(t)).filter(|o| o.reads_data()).map(|o| o.size).max().unwrap_or(0);
    let mut buf = AlignedBuf::new(max_read as usize);
    let mut w = Worker::new(sh, buf.as_mut_slice());
    if timed {
        sys::set_timer_slack_ns(1);
    }
    let start = gate.arrive();
    while sys::now_ns() < start {
        std::hint::spin_loop();
        std::thread::yield_now();
    }
    let mut stopped = false;
    let mut total_done = 0u64;
    // How late timer wake-ups come on this machine, learnt as the run goes (ns).
    let mut oversleep = 20_000u64;
    // Lateness the main thread could not be given yet (its histogram was busy).
    let mut spill = Histogram::new();
    for &t in threads {
        let publish = waited[t];
        let ops = plan.thread_ops(t);
        let mut done = 0u32;
        for (k, op) in ops.iter().enumerate() {
            if stopped || stop.load(Ordering::Relaxed) {
                stopped = true;
                for op in &ops[k..] {
                    if op.kind != OpKind::Wait {
                        col.skip(op, Skip::Stopped);
                    }
                }
                break;
            }
            if op.kind == OpKind::Wait {
                if !progress[op.slot as usize].wait_for(op.size as u32, stop) {
                    stopped = true;
                    for op in &ops[k..] {
                        if op.kind != OpKind::Wait {
                            col.skip(op, Skip::Stopped);
                        }
                    }
                    break;
                }
                continue;
            }
            let mut t0 = sys::now_ns();
            if timed {
                let due = start + (op.ts as f64 / speed) as u64;
                t0 = wait_until(due, t0, &mut oversleep, stop);
                let late = t0.saturating_sub(due);
                if let Some(h) = &mut col.lateness {
                    h.record(late);
                }
                live.max_late.fetch_max(late, Ordering::Relaxed);
                match live.late.try_lock() {
                    Ok(mut h) => {
                        if !spill.is_empty() {
                            h.merge(&spill);
                            spill.reset();
                        }
                        h.record(late);
                    }
                    Err(_) => spill.record(late),
                }
            }
            let r = w.exec(op);
            let t1 = sys::now_ns();
            match r {
                Ok(got) => {
                    col.done(op, got, t1 - t0, t1.saturating_sub(start));
                    if w.clone_copied {
                        w.clone_copied = false;
                        col.clones_copied += 1;
                    }
                    if op.kind == OpKind::Msync && w.msync_bytes > 0 {
                        col.bytes[OpKind::Msync as usize] += std::mem::take(&mut w.msync_bytes);
                    }
                    if got < 0 {
                        live.errors.fetch_add(1, Ordering::Relaxed);
                        if got == -(libc::EXDEV as i64) && op.ret != got && op.uses_path() {
                            col.refused += 1;
                        }
                    }
                    let same = match op.compare_mode() {
                        Compare::Value => got == op.ret,
                        Compare::Success => (got >= 0) == (op.ret >= 0) && (got >= 0 || got == op.ret),
                    };
                    if !same {
                        col.diverged(t as u32, done, op, got);
                        sh.diverged.store(true, Ordering::Relaxed);
                        live.divergences.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(NotDone::NoFd) => col.skip(op, Skip::NoFd),
                Err(NotDone::NoMapping) => col.skip(op, Skip::NoMapping),
                Err(NotDone::Privileged) => col.skip(op, Skip::Privileged),
            }
            done += 1;
            if publish {
                progress[t].publish(done);
            }
            total_done += 1;
            live.done.store(total_done, Ordering::Relaxed);
        }
        if stopped {
            // Threads waiting for this one must not wait for ever.
            progress[t].publish(u32::MAX);
        }
    }
    if !spill.is_empty() {
        live.late.lock().unwrap_or_else(|e| e.into_inner()).merge(&spill);
    }
    w.close_dirs();
    drop(w);
    drop(buf);
    col
}

/// Wait until CLOCK_MONOTONIC reaches `due` (now is `now`), returning the time waited to.
///
/// A timer wake-up comes late by the scheduler's latency; sleeping until `due` minus the
/// typical lateness (`oversleep`, an average of what was seen) and spinning the few µs left
/// starts operations on time without keeping a core busy between them.
fn wait_until(due: u64, mut now: u64, oversleep: &mut u64, stop: &AtomicBool) -> u64 {
    const SPIN_MAX: u64 = 200_000;
    while now < due {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let early = (*oversleep).min(SPIN_MAX);
        if due - now > early {
            // Long waits in slices, to notice a stop.
            let want = (due - early).min(now + 50_000_000);
            sys::sleep_until(want);
            now = sys::now_ns();
            if want < due.saturating_sub(early) {
                continue;
            }
            // Learn from the wake-up: late by now - want (an average over the last ~8).
            let late = now.saturating_sub(want);
            *oversleep = (*oversleep * 7 + late) / 8;
        } else {
            std::hint::spin_loop();
            if due - now > 20_000 {
                std::thread::yield_now();
            }
            now = sys::now_ns();
        }
    }
    now
}

//! The agent's flight recorders (`[[recorder]]`): each a live session on a thread of its own
//! recording into a [`FlightRecorder`], its dumps kept in its directory; their counters for
//! `/metrics`, their messages for the agent's log.

use crate::config::RecorderConfig;
#[cfg(test)]
use latscope_flight::Outcome;
use latscope_flight::{FlightHandle, FlightRecorder, FlightStats};
use latscope_live::{Recorder, RecorderOptions, SessionBuilder};
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// One recorder running (or to be restarted).
pub(crate) struct RecorderRun {
    pub cfg: RecorderConfig,
    handle: Option<FlightHandle>,
    stop: Option<Arc<AtomicBool>>,
    thread: Option<JoinHandle<Result<(), String>>>,
    log: Receiver<String>,
    log_tx: Sender<String>,
    /// Counters of the runs before a restart, added to the current one's.
    earlier: FlightStats,
    pub restarts: u64,
}

fn add(a: &FlightStats, b: &FlightStats) -> FlightStats {
    FlightStats {
        events: a.events + b.events,
        ring_bytes: b.ring_bytes,
        ring_blocks: b.ring_blocks,
        ring_span_ns: b.ring_span_ns,
        fired: a.fired + b.fired,
        dumps: a.dumps + b.dumps,
        suppressed: a.suppressed + b.suppressed,
        failed: a.failed + b.failed,
        deleted: a.deleted + b.deleted,
        bytes_written: a.bytes_written + b.bytes_written,
    }
}

impl RecorderRun {
    pub(crate) fn new(cfg: RecorderConfig) -> RecorderRun {
        let (log_tx, log) = mpsc::channel();
        RecorderRun {
            cfg,
            handle: None,
            stop: None,
            thread: None,
            log,
            log_tx,
            earlier: FlightStats::default(),
            restarts: 0,
        }
    }

    /// Start the session and the recorder (on a thread of their own: a session stays on the
    /// thread that started it); waits until the probes are attached or failed.
    pub(crate) fn start(&mut self) -> Result<(), String> {
        let cfg = self.cfg.clone();
        let name = cfg.name.clone();
        if !cfg.dir.exists() {
            std::fs::create_dir_all(&cfg.dir)
                .and_then(|()| std::fs::set_permissions(&cfg.dir, std::fs::Permissions::from_mode(0o700)))
                .map_err(|e| format!("recorder {name}: cannot create {}: {e}", cfg.dir.display()))?;
        }
        let filter = latscope_filter::Filter::parse(&cfg.filter).map_err(|e| format!("recorder {name}: {e}"))?;
        let (ready_tx, ready) = mpsc::sync_channel(1);
        let log = self.log_tx.clone();
        let thread = std::thread::Builder::new()
            .name(format!("latscope-rec-{name}"))
            .spawn(move || {
                let started = SessionBuilder::new()
                    .syscalls(cfg.syscalls)
                    .block(cfg.block)
                    .filter(filter)
                    .why(cfg.why_above_ns)
                    .why_stacks(cfg.stacks)
                    // As record --ring: the kernel's buffer sized from the ring.
                    .ring_bytes(usize::try_from(latscope_flight::default_kernel_buffer(&cfg.ring)).unwrap_or(64 << 20))
                    .stop_on(&[])
                    .start()
                    .map_err(|e| format!("recorder {}: {e}", cfg.name))
                    .and_then(|s| {
                        let n = cfg.name.clone();
                        let offset = s.header().realtime_offset_ns;
                        FlightRecorder::start(s.header(), cfg.flight_options(), &cfg.name, move |e| {
                            let _ = log.send(format!("recorder {n}: {}", e.line(offset)));
                        })
                        .map(|r| (s, r))
                        .map_err(|e| format!("recorder {}: {e}", cfg.name))
                    });
                let (session, ring) = match started {
                    Ok(x) => x,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.clone()));
                        return Err(e);
                    }
                };
                let stop = session.stop_flag();
                let _ = ready_tx.send(Ok((ring.handle(), stop)));
                let opts = RecorderOptions { block_events: latscope_flight::RING_BLOCK_EVENTS, ..Default::default() };
                Recorder::new(session, ring, opts)
                    .run(|_| {})
                    .map(|_| ())
                    .map_err(|e| format!("recorder {}: {e}", cfg.name))
            })
            .map_err(|e| format!("recorder {name}: cannot start its thread: {e}"))?;
        match ready.recv() {
            Ok(Ok((handle, stop))) => {
                self.handle = Some(handle);
                self.stop = Some(stop);
                self.thread = Some(thread);
                Ok(())
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(format!("recorder {name}: its thread ended before starting")),
        }
    }

    /// Whether its thread is still recording.
    pub(crate) fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// If its thread ended, why; the counters are kept for the next run.
    pub(crate) fn reap(&mut self) -> Option<String> {
        if self.thread.as_ref().is_none_or(|t| !t.is_finished()) {
            return None;
        }
        let t = self.thread.take()?;
        if let Some(h) = self.handle.take() {
            self.earlier = add(&self.earlier, &h.stats());
        }
        self.stop = None;
        Some(match t.join() {
            Ok(Ok(())) => format!("recorder {}: stopped", self.cfg.name),
            Ok(Err(e)) => e,
            Err(_) => format!("recorder {}: its thread panicked", self.cfg.name),
        })
    }

    /// Stop recording (a dump in progress ends with what the ring holds) and wait.
    pub(crate) fn stop(&mut self) {
        if let Some(s) = &self.stop {
            s.store(true, Ordering::Relaxed);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// The handle to fire its triggers.
    pub(crate) fn handle(&self) -> Option<FlightHandle> {
        self.handle.clone()
    }

    /// Its counters, across restarts.
    pub(crate) fn stats(&self) -> FlightStats {
        match &self.handle {
            Some(h) => add(&self.earlier, &h.stats()),
            None => self.earlier.clone(),
        }
    }

    /// Dumps in its directory now.
    pub(crate) fn dumps_kept(&self) -> usize {
        latscope_flight::files::list(&self.cfg.dir, latscope_flight::files::DUMP_PREFIX).len()
    }

    /// Its log lines since the last call.
    pub(crate) fn take_log(&self) -> Vec<String> {
        self.log.try_iter().collect()
    }

    /// Fire trigger `name` by hand.
    #[cfg(test)]
    pub(crate) fn fire(&self, name: &str) -> Result<Outcome, String> {
        self.handle.as_ref().ok_or("not running")?.fire(name, "fired by the agent")
    }
}

impl Drop for RecorderRun {
    fn drop(&mut self) {
        self.stop();
    }
}

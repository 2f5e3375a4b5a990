//! Per-thread progress counters: the only synchronisation between replay workers.
//!
//! A thread publishes how many operations it has completed; a dependency waits until another
//! thread's counter reaches a value. No locks: the producer stores its counter and wakes
//! sleepers only while someone waits on it; a waiter spins briefly, then sleeps on the counter
//! (a futex) after registering itself.

use crate::sys;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// One thread's counter, on its own cache line.
#[repr(align(64))]
#[derive(Default)]
pub struct Progress {
    /// Operations completed.
    pub done: AtomicU32,
    /// Threads sleeping on `done`.
    waiters: AtomicU32,
}

impl Progress {
    /// Publish `n` completed operations.
    #[inline]
    pub fn publish(&self, n: u32) {
        // SeqCst store then load, against the waiter's SeqCst increment then load: one of the
        // two sees the other, so a sleeper is never missed.
        self.done.store(n, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) != 0 {
            sys::futex_wake_all(&self.done);
        }
    }

    /// Wait until `need` operations are done; false if `stop` was raised first.
    #[inline]
    pub fn wait_for(&self, need: u32, stop: &AtomicBool) -> bool {
        if self.done.load(Ordering::Acquire) >= need {
            return true;
        }
        self.wait_slow(need, stop)
    }

    #[cold]
    fn wait_slow(&self, need: u32, stop: &AtomicBool) -> bool {
        // The producer is usually running: let it, briefly, before sleeping.
        for i in 0..64 {
            if self.done.load(Ordering::Acquire) >= need {
                return true;
            }
            if i % 8 == 7 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let ok = loop {
            let v = self.done.load(Ordering::SeqCst);
            if v >= need {
                break true;
            }
            if stop.load(Ordering::Relaxed) {
                break false;
            }
            sys::futex_wait(&self.done, v);
        };
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        ok
    }

    /// Wake every sleeper (to notice a stop).
    pub fn wake(&self) {
        sys::futex_wake_all(&self.done);
    }
}

/// Where the workers wait, ready, for the run to start: setting up (buffers, statistics) does
/// not count in the replay's time, and no worker burns a core waiting for the others.
#[derive(Default)]
pub struct StartGate {
    /// 0 until the gate opens.
    open: AtomicU32,
    /// CLOCK_MONOTONIC the run starts at.
    start_ns: AtomicU64,
    /// Workers waiting at the gate.
    ready: AtomicUsize,
}

impl StartGate {
    /// Arrive ready and wait until the gate opens; the start time.
    pub fn arrive(&self) -> u64 {
        self.ready.fetch_add(1, Ordering::SeqCst);
        // futex_wait returns at once if the gate opened in between (its word is no longer 0).
        while self.open.load(Ordering::Acquire) == 0 {
            sys::futex_wait(&self.open, 0);
        }
        self.start_ns.load(Ordering::Acquire)
    }

    /// Workers at the gate.
    pub fn ready(&self) -> usize {
        self.ready.load(Ordering::SeqCst)
    }

    /// Open the gate: the run starts at `start_ns`.
    pub fn open(&self, start_ns: u64) {
        self.start_ns.store(start_ns, Ordering::Release);
        self.open.store(1, Ordering::Release);
        sys::futex_wake_all(&self.open);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn waiters_see_every_publish_and_stop() {
        let p = Arc::new(Progress::default());
        let stop = Arc::new(AtomicBool::new(false));
        let n = 20_000u32;
        let waiter = {
            let (p, stop) = (p.clone(), stop.clone());
            std::thread::spawn(move || (1..=n).step_by(7).all(|k| p.wait_for(k, &stop)))
        };
        for k in 1..=n {
            p.publish(k);
        }
        assert!(waiter.join().unwrap());
        let blocked = {
            let (p, stop) = (p.clone(), stop.clone());
            std::thread::spawn(move || p.wait_for(n + 1, &stop))
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        stop.store(true, Ordering::SeqCst);
        p.wake();
        assert!(!blocked.join().unwrap(), "a stop ends a wait");
    }

    #[test]
    fn the_gate_holds_every_worker_until_it_opens() {
        let gate = Arc::new(StartGate::default());
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let g = gate.clone();
                std::thread::spawn(move || g.arrive())
            })
            .collect();
        while gate.ready() < 4 {
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(workers.iter().all(|w| !w.is_finished()), "nobody passes a closed gate");
        gate.open(12_345);
        assert!(workers.into_iter().all(|w| w.join().unwrap() == 12_345));
        assert_eq!(gate.arrive(), 12_345, "an open gate lets a late worker through");
    }
}

//! Locks by identity (`top --by lock`, the lock of a call in `events --why`): the waits that
//! blocked on each lock a recording with `record --why` saw, grouped by the lock (a futex by its
//! address in its process, a file lock by its file and range, a semaphore by its set and
//! number), with their contended time and latency percentiles, who waited and who held it, where
//! (their user stacks at the wait and at the release, with stacks recorded), and what the holders
//! did while they held it (their own parts, through the chain of waits).

use crate::stacks::StackNames;
use crate::text::clean;
use crate::why::waited_on;
use latscope_chain::{ChainIndex, RUNNING};
pub use latscope_event::locks::{futex_op, lock_json, lock_key, lock_text, LockKey};
use latscope_event::units::fmt_ns;
use latscope_event::{EventBatch, EventKind, StackKind, WHY_PARTS, WHY_PART_NAMES};
use latscope_hist::Histogram;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt::Write as _;

/// What one lock's waits add up to.
#[derive(Debug, Clone, Default)]
pub struct LockSum {
    /// How a person reads the lock (the first wait's [`lock_text`], without the operation).
    pub label: String,
    /// The process that waited (futexes: the lock's process; its command name).
    pub owner: String,
    /// Waits that blocked on it (calls with lock time).
    pub waits: u64,
    /// Their lock time, ns (contended time).
    pub contended_ns: u64,
    /// Their latencies.
    pub lat: Histogram,
    /// Lock time by waiting thread (`comm/tid`).
    pub waiters: HashMap<String, u64>,
    /// Lock time by holder (the thread that released it, or held it), with what the holders did
    /// meanwhile: their parts (through the chain of waits; the last entry, [`RUNNING`], outside
    /// calls), and the recording's one level of cascade (what each was blocked in).
    pub holders: HashMap<String, HolderSum>,
    /// Lock time by the waiters' user stack (stack table id; 0: none).
    pub waiter_stacks: HashMap<u32, u64>,
    /// Lock time by the holders' user stack at the release (stack table id; 0: none).
    pub holder_stacks: HashMap<u32, u64>,
}

/// A holder's share of a lock's waits.
#[derive(Debug, Clone, Default)]
pub struct HolderSum {
    /// Lock time of the waits it held them in, ns.
    pub ns: u64,
    /// Waits.
    pub waits: u64,
    /// What it did while the waiters waited, ns by part ([`WHY_PART_NAMES`], then running
    /// outside calls), from the chains of waits.
    pub parts: [u64; WHY_PARTS + 1],
}

/// The waits of many calls by lock.
#[derive(Debug, Clone, Default)]
pub struct LockAgg {
    /// By lock.
    pub locks: HashMap<LockKey, LockSum>,
    /// Calls that waited on a lock without its identity (recorded before it was kept, or
    /// without --why).
    pub unnamed: u64,
}

impl LockAgg {
    /// Adds rows `rows` of `b`; `chains` (the calls of the whole recording, indexed) tells what
    /// the holders did meanwhile.
    pub fn add(&mut self, b: &EventBatch, rows: &[u32], chains: Option<&ChainIndex>) {
        for &r in rows {
            let i = r as usize;
            if b.kind[i] != EventKind::Syscall as u8 || b.why_lock[i] == 0 {
                continue;
            }
            let Some(key) = lock_key(b, i) else {
                self.unnamed += 1;
                continue;
            };
            let t = b.why_lock[i];
            let s = self.locks.entry(key).or_default();
            if s.label.is_empty() {
                let text = lock_text(b, i).unwrap_or_default();
                s.label = text.split(" (").next().unwrap_or_default().to_string();
                s.owner = format!("{}[{}]", b.comm.get(i), b.pid[i]);
            }
            s.waits += 1;
            s.contended_ns += t;
            s.lat.record(b.lat[i]);
            *s.waiters.entry(format!("{}/{}", b.comm.get(i), b.tid[i])).or_default() += t;
            *s.waiter_stacks.entry(b.ustack[i]).or_default() += t;
            if b.waker_ustack[i] != 0 {
                *s.holder_stacks.entry(b.waker_ustack[i]).or_default() += t;
            }
            let holder = waited_on(b, i).unwrap_or_else(|| "(not known)".into());
            let h = s.holders.entry(holder).or_default();
            h.ns += t;
            h.waits += 1;
            if let Some(p) = chains.and_then(|c| c.chain(b, i)).and_then(|c| c.links.get(1).and_then(|l| l.parts)) {
                for (a, v) in h.parts.iter_mut().zip(p) {
                    *a += v;
                }
            }
        }
    }

    /// Locks by contended time, largest first, at most `n`.
    pub fn ranked(&self, n: usize) -> Vec<(&LockKey, &LockSum)> {
        let mut v: Vec<_> = self.locks.iter().collect();
        v.sort_by(|a, b| b.1.contended_ns.cmp(&a.1.contended_ns).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }

    /// As text: per lock its waits, contended time, p50, p99 and max, waiters, holders (with what
    /// they did meanwhile) and the top stacks; `names` names the stacks.
    pub fn render_text(&self, names: &mut StackNames, n: usize) -> String {
        let mut s = String::new();
        if self.locks.is_empty() {
            let _ = writeln!(
                s,
                "no wait on a lock with its identity{}: record with `latscope record --why` (futex, flock, fcntl, semop)",
                if self.unnamed > 0 { format!(" ({} lock waits without one)", self.unnamed) } else { String::new() }
            );
            return s;
        }
        let _ = writeln!(s, "locks by contended time (waits that blocked on them):");
        for (k, (_, l)) in self.ranked(n).into_iter().enumerate() {
            let _ = writeln!(
                s,
                "\n{}. {} in {}: {} waits, {} contended, p50 {}, p99 {}, max {}",
                k + 1,
                clean(&l.label),
                clean(&l.owner),
                l.waits,
                fmt_ns(l.contended_ns),
                fmt_ns(l.lat.value_at_quantile(0.5).unwrap_or(0)),
                fmt_ns(l.lat.value_at_quantile(0.99).unwrap_or(0)),
                fmt_ns(l.lat.max().unwrap_or(0))
            );
            let list = |m: &HashMap<String, u64>| {
                largest(m, 3)
                    .into_iter()
                    .map(|(w, t)| format!("{} ({})", clean(&w), fmt_ns(t)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(s, "   waiters: {}", list(&l.waiters));
            let mut hs: Vec<(&String, &HolderSum)> = l.holders.iter().collect();
            hs.sort_by(|a, b| b.1.ns.cmp(&a.1.ns).then(a.0.cmp(b.0)));
            for (h, sum) in hs.into_iter().take(3) {
                let did = holder_parts_text(&sum.parts);
                let _ = writeln!(s, "   held by {}: {} in {} waits{did}", clean(h), fmt_ns(sum.ns), sum.waits);
            }
            for (label, m, kind) in
                [("waiting at", &l.waiter_stacks, StackKind::User), ("released at", &l.holder_stacks, StackKind::User)]
            {
                if let Some((id, t)) = largest(m, 1).into_iter().find(|(id, _)| *id != 0) {
                    let frames = names.frames(id, kind);
                    let _ = writeln!(s, "   {label}: {} ({})", short_stack(&frames), fmt_ns(t));
                }
            }
        }
        clean_lines(&s)
    }

    /// As JSON (times in ns).
    pub fn to_json(&self, names: &mut StackNames, n: usize) -> Value {
        let locks: Vec<Value> = self
            .ranked(n)
            .into_iter()
            .map(|(key, l)| {
                let (kind, addr) = match key {
                    LockKey::Futex { addr, .. } => ("futex", Some(format!("{addr:#x}"))),
                    LockKey::File { fcntl: true, .. } => ("fcntl", None),
                    LockKey::File { .. } => ("flock", None),
                    LockKey::Sem { .. } => ("sem", None),
                };
                let mut hs: Vec<(&String, &HolderSum)> = l.holders.iter().collect();
                hs.sort_by(|a, b| b.1.ns.cmp(&a.1.ns).then(a.0.cmp(b.0)));
                let mut stacks = |m: &HashMap<u32, u64>| -> Vec<Value> {
                    largest(m, 3)
                        .into_iter()
                        .filter(|(id, _)| *id != 0)
                        .map(|(id, t)| json!({"frames": names.frames(id, StackKind::User), "lock_ns": t}))
                        .collect()
                };
                json!({
                    "lock": l.label, "kind": kind, "addr": addr, "process": l.owner, "waits": l.waits,
                    "contended_ns": l.contended_ns, "p50_ns": l.lat.value_at_quantile(0.5).unwrap_or(0), "p99_ns": l.lat.value_at_quantile(0.99).unwrap_or(0),
                    "max_ns": l.lat.max().unwrap_or(0),
                    "waiters": largest(&l.waiters, 5).into_iter().map(|(w, t)| json!({"waiter": w, "lock_ns": t})).collect::<Vec<_>>(),
                    "holders": hs.into_iter().take(5).map(|(h, sum)| json!({"holder": h, "lock_ns": sum.ns, "waits": sum.waits,
                        "meanwhile_ns": parts_json(&sum.parts)})).collect::<Vec<_>>(),
                    "waiter_stacks": stacks(&l.waiter_stacks),
                    "holder_stacks": stacks(&l.holder_stacks),
                })
            })
            .collect();
        json!({"locks": locks, "lock_waits_without_identity": self.unnamed})
    }
}

/// A holder's parts as JSON: `{"io": ns, ..., "running": ns}` (non-zero ones).
fn parts_json(p: &[u64; WHY_PARTS + 1]) -> Value {
    let mut m: serde_json::Map<String, Value> =
        WHY_PART_NAMES.iter().zip(p).filter(|(_, v)| **v > 0).map(|(k, v)| ((*k).into(), json!(v))).collect();
    if p[RUNNING] > 0 {
        m.insert("running".into(), json!(p[RUNNING]));
    }
    Value::Object(m)
}

/// `; meanwhile block I/O 190ms, running 8ms`: what a holder did, its two largest parts.
fn holder_parts_text(p: &[u64; WHY_PARTS + 1]) -> String {
    let mut v: Vec<(usize, u64)> = p.iter().copied().enumerate().filter(|&(_, x)| x > 0).collect();
    if v.is_empty() {
        return String::new();
    }
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let name = |k: usize| if k == RUNNING { "running" } else { crate::why::PART_LABELS[k] };
    let items: Vec<String> = v.iter().take(2).map(|&(k, t)| format!("{} {}", name(k), fmt_ns(t))).collect();
    format!("; meanwhile {}", items.join(", "))
}

/// The innermost frames of a stack: `a <- b <- c` (at most 4).
fn short_stack(frames: &[String]) -> String {
    let mut s = frames.iter().take(4).map(|f| clean(f)).collect::<Vec<_>>().join(" <- ");
    if frames.len() > 4 {
        s.push_str(" <- ...");
    }
    s
}

fn largest<K: Clone + Ord>(m: &HashMap<K, u64>, n: usize) -> Vec<(K, u64)> {
    let mut v: Vec<(K, u64)> = m.iter().map(|(k, &t)| (k.clone(), t)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

/// Text with control characters escaped line by line. Names are escaped where they are written,
/// as a newline in one would have split its line before this sees it; this catches what is left.
fn clean_lines(s: &str) -> String {
    s.lines().map(|l| clean(l).into_owned() + "\n").collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{comm_to_words, syscall_nr, wake_flags, Event, StackTable};

    fn wait(tid: u32, addr: u64, lock: u64, holder: u32) -> Event {
        let (lo, hi) = comm_to_words("app");
        Event {
            nr: syscall_nr("futex").unwrap(),
            pid: 10,
            tid,
            comm: "app".into(),
            lat: lock + 1000,
            why_cpu: 1000,
            why_lock: lock,
            waker_ctx: 1,
            waker_tid: holder,
            waker_comm_lo: lo,
            waker_comm_hi: hi,
            wake_flags: wake_flags::KNOWN | wake_flags::TRACED,
            lock_kind: 1,
            lock_addr: addr,
            lock_op: 128,
            ..Default::default()
        }
    }

    /// Waits on two futexes (one of them at two adjacent words of a condition variable) and on
    /// an fcntl range: grouped by lock, ranked by contended time, with waiters and holders.
    #[test]
    fn waits_are_grouped_by_lock() {
        let mut b = EventBatch::default();
        b.push(&wait(11, 0x1000, 5_000_000, 12));
        b.push(&wait(13, 0x1004, 3_000_000, 12));
        b.push(&wait(11, 0x2000, 1_000_000, 13));
        let mut f = Event {
            lock_kind: 3,
            lock_op: 7,
            lock_start: 100,
            lock_len: 50,
            lock_word: 1,
            path: "/db".into(),
            ..wait(14, 0, 2_000_000, 15)
        };
        f.nr = syscall_nr("fcntl").unwrap();
        b.push(&f);
        let mut a = LockAgg::default();
        a.add(&b, &[0, 1, 2, 3], None);
        let r = a.ranked(5);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].0, &LockKey::Futex { pid: 10, addr: 0x1000 });
        assert_eq!((r[0].1.waits, r[0].1.contended_ns), (2, 8_000_000));
        assert_eq!(r[0].1.holders["app/12"].ns, 8_000_000);
        assert_eq!(lock_text(&b, 3).unwrap(), "fcntl write lock /db bytes 100-149 (F_SETLKW)");
        assert_eq!(lock_text(&b, 0).unwrap(), "futex 0x1000 (FUTEX_WAIT_PRIVATE)");
        let mut names = StackNames::new(StackTable::default(), None);
        let t = a.render_text(&mut names, 5);
        assert!(t.contains("1. futex 0x1000 in app[10]: 2 waits, 8.00ms contended"), "{t}");
        assert!(t.contains("held by app/12: 8.00ms in 2 waits"), "{t}");
        let j = a.to_json(&mut names, 5);
        assert_eq!(j["locks"][1]["lock"], "fcntl write lock /db bytes 100-149");
    }

    /// A newline in the locked file's path, the process's name or a waiter's or holder's name
    /// split `top --by lock`'s lines before they were escaped, so the rest read as a line of
    /// latscope's own. Each name is now escaped where it is written.
    #[test]
    fn a_newline_in_a_name_forges_no_line_of_the_locks() {
        let (lo, hi) = comm_to_words("h\nFORGED h");
        let mut f = Event {
            comm: "a\nFORGED a".into(),
            waker_comm_lo: lo,
            waker_comm_hi: hi,
            lock_kind: 3,
            lock_op: 7,
            lock_len: 1,
            lock_word: 1,
            path: "/db\nFORGED db".into(),
            ..wait(14, 0, 2_000_000, 15)
        };
        f.nr = syscall_nr("fcntl").unwrap();
        let mut b = EventBatch::default();
        b.push(&f);
        let mut a = LockAgg::default();
        a.add(&b, &[0], None);
        let t = a.render_text(&mut StackNames::new(StackTable::default(), None), 5);
        assert!(!t.lines().any(|l| l.trim_start().starts_with("FORGED")), "{t}");
        for name in [r"/db\nFORGED db", r"a\nFORGED a", r"h\nFORGED h/15"] {
            assert!(t.contains(name), "{name} in {t}");
        }
    }
}

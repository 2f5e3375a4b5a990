//! Shared resources and the dependencies they impose between threads (after ARTC, SOSP'13:
//! keep the recorded order of operations on the same resource, and no other order).
//!
//! A [`Res`] is a readers-writer resource: a writer depends on the previous writer and on every
//! reader since; a reader depends on the previous writer. Readers commute with each other. What
//! counts as reading or writing depends on the resource (for a directory's listing, creating
//! entries "reads" and listing it "writes": creations commute, a listing does not).

use std::collections::BTreeMap;

/// An operation of a plan thread: its index among the thread's operations (waits excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpRef {
    /// Plan thread index.
    pub thread: u32,
    /// Operation index in the thread.
    pub idx: u32,
}

/// A readers-writer resource.
#[derive(Debug, Clone, Default)]
pub struct Res {
    last_write: Option<OpRef>,
    /// Readers since the last write (per thread, the latest; compacted when it grows).
    readers: Vec<OpRef>,
}

impl Res {
    /// `me` reads: depends on the last writer.
    pub fn read(&mut self, me: OpRef, deps: &mut Vec<OpRef>) {
        if let Some(w) = self.last_write {
            deps.push(w);
        }
        match self.readers.last_mut() {
            Some(l) if l.thread == me.thread => *l = me,
            _ => {
                self.readers.push(me);
                if self.readers.len() > 64 && self.readers.len().is_power_of_two() {
                    self.compact();
                }
            }
        }
    }

    /// `me` writes: depends on the last writer and every reader since.
    pub fn write(&mut self, me: OpRef, deps: &mut Vec<OpRef>) {
        if let Some(w) = self.last_write {
            deps.push(w);
        }
        deps.append(&mut self.readers);
        self.last_write = Some(me);
    }

    /// Keep the latest reader per thread.
    fn compact(&mut self) {
        self.readers.sort_unstable();
        let mut out: Vec<OpRef> = Vec::with_capacity(self.readers.len());
        for r in self.readers.drain(..) {
            match out.last_mut() {
                Some(l) if l.thread == r.thread => *l = r,
                _ => out.push(r),
            }
        }
        self.readers = out;
    }
}

/// The last writer of each byte range of a file: reads depend on the writes they overlap.
#[derive(Debug, Clone, Default)]
pub struct Writers {
    /// start -> (end, writer); disjoint ranges.
    map: BTreeMap<u64, (u64, OpRef)>,
}

impl Writers {
    /// Record `me` as the writer of `[a, b)`.
    pub fn write(&mut self, a: u64, b: u64, me: OpRef) {
        if a >= b {
            return;
        }
        // The range that starts before `a` and reaches into it keeps its head (and its tail
        // past `b` when it spans the whole write).
        if let Some((&s, &(e, w))) = self.map.range(..a).next_back() {
            if e > a {
                self.map.insert(s, (a, w));
                if e > b {
                    self.map.insert(b, (e, w));
                }
            }
        }
        let inside: Vec<u64> = self.map.range(a..b).map(|(&s, _)| s).collect();
        for s in inside {
            if let Some((e, w)) = self.map.remove(&s) {
                if e > b {
                    self.map.insert(b, (e, w));
                }
            }
        }
        self.map.insert(a, (b, me));
    }

    /// The writers of any byte of `[a, b)`.
    pub fn readers_deps(&self, a: u64, b: u64, deps: &mut Vec<OpRef>) {
        if a >= b {
            return;
        }
        if let Some((_, &(e, w))) = self.map.range(..a).next_back() {
            if e > a {
                deps.push(w);
            }
        }
        for (_, &(_, w)) in self.map.range(a..b) {
            deps.push(w);
        }
    }

    /// Bytes beyond `len` are gone (truncate).
    pub fn truncate(&mut self, len: u64) {
        let tail: Vec<u64> = self.map.range(len..).map(|(&s, _)| s).collect();
        for s in tail {
            self.map.remove(&s);
        }
        if let Some((&s, &(e, w))) = self.map.range(..len).next_back() {
            if e > len {
                self.map.insert(s, (len, w));
            }
        }
    }

    /// Number of ranges (for tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn r(thread: u32, idx: u32) -> OpRef {
        OpRef { thread, idx }
    }

    #[test]
    fn readers_writer_order() {
        let mut x = Res::default();
        let mut d = Vec::new();
        x.read(r(0, 0), &mut d);
        x.read(r(1, 0), &mut d);
        x.read(r(1, 1), &mut d);
        assert!(d.is_empty(), "readers commute");
        x.write(r(2, 0), &mut d);
        d.sort();
        assert_eq!(d, vec![r(0, 0), r(1, 1)], "a writer waits for every reader since the last write");
        d.clear();
        x.read(r(0, 5), &mut d);
        assert_eq!(d, vec![r(2, 0)]);
    }

    #[test]
    fn compaction_keeps_the_latest_reader_per_thread() {
        let mut x = Res::default();
        let mut d = Vec::new();
        for i in 0..1000u32 {
            x.read(r(i % 3, i), &mut d);
        }
        assert!(x.readers.len() <= 130, "{}", x.readers.len());
        x.write(r(9, 0), &mut d);
        for t in 0..3 {
            let latest = d.iter().filter(|o| o.thread == t).map(|o| o.idx).max().unwrap();
            assert!(latest >= 997, "thread {t}: {latest}");
        }
    }

    #[test]
    fn reads_depend_on_the_writes_they_overlap() {
        let mut w = Writers::default();
        w.write(0, 100, r(0, 0));
        w.write(50, 60, r(1, 0));
        w.write(200, 300, r(2, 0));
        fn deps(w: &Writers, a: u64, b: u64) -> Vec<OpRef> {
            let mut d = Vec::new();
            w.readers_deps(a, b, &mut d);
            d.sort();
            d
        }
        assert_eq!(deps(&w, 0, 10), vec![r(0, 0)]);
        assert_eq!(deps(&w, 55, 56), vec![r(1, 0)]);
        assert_eq!(deps(&w, 59, 61), vec![r(0, 0), r(1, 0)]);
        assert_eq!(deps(&w, 100, 200), vec![]);
        assert_eq!(deps(&w, 0, 1000), vec![r(0, 0), r(0, 0), r(1, 0), r(2, 0)]);
        w.truncate(55);
        assert_eq!(deps(&w, 0, 1000), vec![r(0, 0), r(1, 0)]);
        assert_eq!(w.len(), 2);
    }
}

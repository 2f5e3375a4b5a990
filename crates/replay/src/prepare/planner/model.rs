//! The process, fd-table, open-file-description and address-space model, and process events.

use super::*;

impl Planner<'_> {
    pub(super) fn note(&mut self, what: &'static str) {
        *self.notes.entry(what).or_default() += 1;
    }
    pub(super) fn new_table(&mut self) -> u32 {
        self.tables.push(Table { users: 1, ..Default::default() });
        self.tables.len() as u32 - 1
    }
    pub(super) fn new_mm(&mut self) -> u32 {
        self.mms.push(Mm { users: 1, ..Default::default() });
        self.mms.len() as u32 - 1
    }
    pub(super) fn new_slot(&mut self) -> u32 {
        self.slots.push(Slot::default());
        self.slots.len() as u32 - 1
    }
    pub(super) fn new_ofd(&mut self, what: What, path: u32, flags: u32) -> u32 {
        self.ofds.push(Ofd { what, path, obj: NONE, append: flags & O_APPEND != 0, pos: 0, pos_res: Res::default() });
        self.ofds.len() as u32 - 1
    }
    /// Processes running when the recording started, with the files they had open.
    pub(super) fn seed_snapshot(&mut self) {
        let h = &self.ev.header;
        for p in &h.processes {
            self.proc_entry(p.pid);
        }
        for f in &h.fds {
            let table = self.proc_entry(f.pid).table;
            let t = FdType::from_u8(f.fd_type);
            let what = match t {
                FdType::File | FdType::Directory => match self.m.map(&f.path) {
                    Ok(_) if t == FdType::Directory => What::Dir,
                    Ok(_) => What::File,
                    Err(u) => What::Dropped(u.reason()),
                },
                other => What::Other(other),
            };
            let path = if matches!(what, What::File | What::Dir) { self.m.map(&f.path).unwrap_or(NONE) } else { NONE };
            // The snapshot's position and open flags, where it could read them (a position of -1:
            // an older trace or an unreadable fdinfo; its flags of 0 then mean unknown too).
            let known = f.pos >= 0;
            let ofd = self.new_ofd(what, path, if known { f.flags } else { 0 });
            if known {
                self.ofds[ofd as usize].pos = f.pos;
            }
            let slot = if path != NONE {
                let s = self.new_slot();
                self.slots[s as usize].pre = Some((path, known.then_some(f.flags), known.then_some(f.pos)));
                s
            } else {
                NONE
            };
            self.tables[table as usize].fds.insert(f.fd, Fd { ofd, slot, cloexec: false });
        }
    }
    pub(super) fn proc_entry(&mut self, pid: u32) -> Proc {
        if let Some(p) = self.procs.get(&pid) {
            return *p;
        }
        let p = Proc { table: self.new_table(), mm: self.new_mm(), by_clone: false };
        self.procs.insert(pid, p);
        p
    }
    /// The model of thread `tid` of process `pid` (a new one when the tid was reused).
    pub(super) fn thread(&mut self, tid: u32, pid: u32) -> &mut ThreadModel {
        let fresh = match self.threads.get(&tid) {
            Some(t) => t.pid != pid || !t.alive,
            None => true,
        };
        if fresh {
            self.threads.insert(tid, ThreadModel { pid, plan: None, spawn_dep: None, alive: true });
        }
        self.threads.get_mut(&tid).expect("inserted")
    }
    pub(super) fn fd_of(&self, pid: u32, fd: i32) -> Option<Fd> {
        let p = self.procs.get(&pid)?;
        self.tables[p.table as usize].fds.get(&fd).copied()
    }
    /// Why an fd cannot be replayed on, or its slot.
    pub(super) fn usable(&self, f: Option<Fd>) -> Result<Fd, &'static str> {
        let Some(f) = f else { return Err(why::UNKNOWN_FD) };
        match self.ofds[f.ofd as usize].what {
            What::File | What::Dir if f.slot != NONE => Ok(f),
            What::File | What::Dir => Err(why::FD_NOT_REPLAYED),
            What::Other(_) => Err(why::NOT_FILE),
            What::Dropped(r) => Err(r),
        }
    }
    /// The world object behind an fd (a file open before the recording is looked up at its
    /// first use).
    pub(super) fn obj_of(&mut self, f: Fd) -> u32 {
        let o = self.ofds[f.ofd as usize].obj;
        if o != NONE {
            return o;
        }
        let path = self.ofds[f.ofd as usize].path;
        if path == NONE {
            return NONE;
        }
        let o = self.w.present(&mut self.m, path);
        let k = if self.ofds[f.ofd as usize].what == What::Dir { ObjKind::Dir } else { ObjKind::File };
        self.w.refine(o, k);
        self.ofds[f.ofd as usize].obj = o;
        o
    }
    /// Install `fd` in `table` (replacing what was there, which is closed implicitly).
    pub(super) fn install(&mut self, table: u32, fd: i32, entry: Fd, tid: u32, pid: u32) {
        if let Some(old) = self.tables[table as usize].fds.insert(fd, entry) {
            self.note("an fd number was reused without a recorded close");
            self.implicit_close(old, tid, pid);
        }
    }
    /// Close a slot the recording closed without a replayed close (exec, exit, close_range, an
    /// unselected close).
    pub(super) fn implicit_close(&mut self, f: Fd, tid: u32, pid: u32) {
        if f.slot == NONE || !self.slots[f.slot as usize].real() {
            return;
        }
        let me = self.begin_close(f, tid, pid);
        self.finish(me, Op { kind: OpKind::Close, slot: f.slot, bits: Op::IMPLICIT, ..Op::blank() });
    }
    /// Begins the close of slot `f` (recorded or implicit) in the stream of `tid`.
    pub(super) fn begin_close(&mut self, f: Fd, tid: u32, pid: u32) -> OpRef {
        // A file open before the recording that is only ever closed must still exist for the
        // run to open it: its first use makes it part of the starting tree.
        if self.slots[f.slot as usize].pre.is_some() {
            self.obj_of(f);
        }
        let me = self.begin(tid, pid);
        self.slots[f.slot as usize].res.write(me, &mut self.deps);
        self.slots[f.slot as usize].used = true;
        me
    }
    /// A copy of `table` for a new process: every replayable fd is duplicated (fork's
    /// inheritance), in the stream of `tid`.
    pub(super) fn copy_table(&mut self, table: u32, tid: u32, pid: u32) -> u32 {
        let nt = self.new_table();
        let mut fds: Vec<(i32, Fd)> = self.tables[table as usize].fds.iter().map(|(&k, &v)| (k, v)).collect();
        fds.sort_by_key(|(k, _)| *k);
        for (n, f) in fds {
            let mut g = f;
            if f.slot != NONE && self.slots[f.slot as usize].real() {
                let ns = self.new_slot();
                let me = self.begin(tid, pid);
                self.slots[f.slot as usize].res.read(me, &mut self.deps);
                self.slots[ns as usize].res.write(me, &mut self.deps);
                self.finish(me, Op { kind: OpKind::Dup, slot: f.slot, slot2: ns, bits: Op::IMPLICIT, ..Op::blank() });
                g.slot = ns;
            } else if f.slot != NONE {
                // A file open before the recording and not yet used: the child gets its own
                // preopened slot if it uses it.
                let ns = self.new_slot();
                self.slots[ns as usize].pre = self.slots[f.slot as usize].pre;
                g.slot = ns;
            }
            self.tables[nt as usize].fds.insert(n, g);
        }
        nt
    }
    pub(super) fn copy_mm(&mut self, mm: u32) -> u32 {
        let n = self.new_mm();
        let maps = self.mms[mm as usize].maps.clone();
        for m in &maps {
            if m.map != NONE {
                self.maps[m.map as usize].refs += 1;
            }
        }
        self.mms[n as usize].maps = maps;
        n
    }
    /// Drop a process's reference to its fd table (closing everything when it was the last).
    pub(super) fn release_table(&mut self, table: u32, tid: u32, pid: u32) {
        let t = &mut self.tables[table as usize];
        t.users = t.users.saturating_sub(1);
        if t.users > 0 {
            return;
        }
        let mut fds: Vec<(i32, Fd)> = t.fds.drain().collect();
        fds.sort_by_key(|(k, _)| *k);
        for (_, f) in fds {
            self.implicit_close(f, tid, pid);
        }
    }
    pub(super) fn release_mm(&mut self, mm: u32, tid: u32, pid: u32) {
        let m = &mut self.mms[mm as usize];
        m.users = m.users.saturating_sub(1);
        if m.users > 0 {
            return;
        }
        let maps = std::mem::take(&mut m.maps);
        for mp in maps {
            self.unmap_slot(mp.map, 0, mp.len, tid, pid, true);
        }
    }
    /// One reference to a mapping slot is dropped; the last one unmaps for real.
    pub(super) fn unmap_slot(&mut self, map: u32, off: u64, len: u64, tid: u32, pid: u32, implicit: bool) {
        if map == NONE {
            return;
        }
        let ms = &mut self.maps[map as usize];
        ms.refs = ms.refs.saturating_sub(1);
        let noop = ms.refs > 0;
        if implicit && noop {
            return;
        }
        let me = self.begin(tid, pid);
        self.maps[map as usize].res.write(me, &mut self.deps);
        let mut bits = if implicit { Op::IMPLICIT } else { 0 };
        if noop {
            bits |= Op::NOOP;
        }
        self.finish(me, Op { kind: OpKind::Munmap, slot2: map, off: off as i64, size: len, bits, ..Op::blank() });
    }
    pub(super) fn proc_event(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret) = (b.pid[i], b.tid[i], b.ret[i]);
        match ProcOp::from_u16(b.nr[i]) {
            Some(ProcOp::Fork) => {
                if self.procs.get(&pid).is_some_and(|p| p.by_clone) {
                    if let Some(p) = self.procs.get_mut(&pid) {
                        p.by_clone = false;
                    }
                    return;
                }
                let parent = self.proc_entry(ret as u32);
                // No recorded clone: the child copies its parent's fds as its first operations.
                if let Some(old) = self.procs.remove(&pid) {
                    self.release_table(old.table, tid, pid);
                    self.release_mm(old.mm, tid, pid);
                }
                self.threads.remove(&pid);
                let table = self.copy_table(parent.table, pid, pid);
                let mm = self.copy_mm(parent.mm);
                self.procs.insert(pid, Proc { table, mm, by_clone: false });
            }
            Some(ProcOp::Exec) => {
                let p = self.proc_entry(pid);
                let mut table = p.table;
                if self.tables[table as usize].users > 1 {
                    // exec unshares an fd table shared with another process.
                    let nt = self.copy_table(table, tid, pid);
                    self.tables[table as usize].users -= 1;
                    table = nt;
                }
                let mut close: Vec<(i32, Fd)> =
                    self.tables[table as usize].fds.iter().filter(|(_, f)| f.cloexec).map(|(&k, &v)| (k, v)).collect();
                close.sort_by_key(|(k, _)| *k);
                for (n, f) in close {
                    self.tables[table as usize].fds.remove(&n);
                    self.implicit_close(f, tid, pid);
                }
                self.release_mm(p.mm, tid, pid);
                let mm = self.new_mm();
                self.procs.insert(pid, Proc { table, mm, by_clone: false });
                for (t, th) in self.threads.iter_mut() {
                    if th.pid == pid && *t != tid {
                        th.alive = false;
                    }
                }
            }
            Some(ProcOp::Exit) => {
                if let Some(p) = self.procs.remove(&pid) {
                    self.release_table(p.table, tid, pid);
                    self.release_mm(p.mm, tid, pid);
                }
                for th in self.threads.values_mut() {
                    if th.pid == pid {
                        th.alive = false;
                    }
                }
            }
            // A thread's CPU and scheduling counters: nothing to replay.
            Some(ProcOp::Times | ProcOp::Sample) | None => {}
        }
    }
    pub(super) fn clone_(&mut self, i: usize, flags: u32) {
        let b = &self.ev.events;
        let (pid, tid, ret) = (b.pid[i], b.tid[i], b.ret[i]);
        self.drop_op(why::NOT_IO);
        if ret <= 0 {
            return;
        }
        let child = ret as u32;
        let parent = self.proc_entry(pid);
        // A clone whose flags were not recorded: the fork event (for a process) does the work.
        if flags == 0 && self.handlers[b.nr[i] as usize] == H::Clone {
            return;
        }
        // The child's first operation comes after everything its parent did before the clone.
        let spawn = self.last_op(tid);
        if flags & CLONE_THREAD != 0 {
            self.threads.insert(child, ThreadModel { pid, plan: None, spawn_dep: spawn, alive: true });
            return;
        }
        let table = if flags & CLONE_FILES != 0 {
            self.tables[parent.table as usize].users += 1;
            parent.table
        } else {
            self.copy_table(parent.table, tid, pid)
        };
        let mm = if flags & CLONE_VM != 0 {
            self.mms[parent.mm as usize].users += 1;
            parent.mm
        } else {
            self.copy_mm(parent.mm)
        };
        if let Some(old) = self.procs.insert(child, Proc { table, mm, by_clone: true }) {
            self.release_table(old.table, tid, pid);
            self.release_mm(old.mm, tid, pid);
        }
        let spawn = self.last_op(tid).or(spawn);
        self.threads.insert(child, ThreadModel { pid: child, plan: None, spawn_dep: spawn, alive: true });
    }
    /// The last operation emitted for `tid`.
    pub(super) fn last_op(&self, tid: u32) -> Option<OpRef> {
        let t = self.threads.get(&tid)?.plan?;
        let real = self.out[t as usize].real;
        (real > 0).then(|| OpRef { thread: t, idx: real - 1 })
    }
    pub(super) fn new_other(&mut self, i: usize, fd: i32, t: FdType) {
        let b = &self.ev.events;
        let (pid, tid) = (b.pid[i], b.tid[i]);
        let ofd = self.new_ofd(What::Other(t), NONE, 0);
        let table = self.proc_entry(pid).table;
        self.install(table, fd, Fd { ofd, slot: NONE, cloexec: false }, tid, pid);
    }
}

//! Operations on fds: opens, reads, writes, positions, syncs, sizes, dups.

use super::*;

impl Planner<'_> {
    pub(super) fn open(&mut self, i: usize, creat: bool) {
        let b = &self.ev.events;
        let (pid, tid, ret) = (b.pid[i], b.tid[i], b.ret[i]);
        let flags = if creat { O_CREAT | 1 | O_TRUNC } else { b.flags[i] };
        let mode = b.mode[i];
        let ok = ret >= 0;
        let t = FdType::from_u8(b.fd_type[i]);
        let table = self.proc_entry(pid).table;
        let tmpfile = flags & O_TMPFILE_DIR == O_TMPFILE_DIR;
        let dir = !tmpfile && (t == FdType::Directory || flags & O_DIRECTORY != 0);
        let mapped = self.m.map(b.path.get(i));
        let refused: Option<&'static str> = match mapped {
            Err(u) => Some(u.reason()),
            Ok(_) if ok && matches!(t, FdType::Chardev | FdType::Blockdev) => Some(why::DEVICE),
            Ok(_) if ok && t == FdType::Pipe => Some(why::FIFO),
            Ok(_) => None,
        };
        if let Some(r) = refused {
            self.drop_op(r);
            if ok {
                let ofd = self.new_ofd(What::Dropped(r), NONE, flags);
                self.install(table, ret as i32, Fd { ofd, slot: NONE, cloexec: flags & O_CLOEXEC != 0 }, tid, pid);
            }
            return;
        }
        let p = mapped.unwrap_or(NONE);
        let what = if dir { What::Dir } else { What::File };
        if !self.sel {
            if ok {
                let ofd = self.new_ofd(what, p, flags);
                self.install(table, ret as i32, Fd { ofd, slot: NONE, cloexec: flags & O_CLOEXEC != 0 }, tid, pid);
            }
            return;
        }
        let me = self.begin(tid, pid);
        let mut op = Op { kind: OpKind::Open, path: p, flags, mode, ret, ..Op::blank() };
        if !ok {
            self.w.path_deps(&mut self.m, p, false, me, &mut self.deps);
            match errno(ret) {
                ENOENT if flags & O_CREAT == 0 => self.w.absent(&mut self.m, p),
                EEXIST => {
                    self.w.present(&mut self.m, p);
                }
                ENOTDIR => {}
                _ => self.w.ancestors_are_dirs(&mut self.m, p),
            }
            self.finish(me, op);
            return;
        }
        let existed = self.w.known(p).is_some();
        let creates = flags & O_CREAT != 0 && !tmpfile && (flags & O_EXCL != 0 || !existed);
        self.w.path_deps(&mut self.m, p, creates, me, &mut self.deps);
        let obj = if tmpfile {
            let d = self.w.present(&mut self.m, p);
            self.w.refine(d, ObjKind::Dir);
            self.w.anon_file()
        } else if creates {
            self.w.create(&mut self.m, p, if dir { ObjKind::Dir } else { ObjKind::File }, flags & O_EXCL == 0)
        } else {
            let o = self.w.present(&mut self.m, p);
            self.w.refine(o, if dir { ObjKind::Dir } else { ObjKind::File });
            o
        };
        if !tmpfile {
            // The file's mode and size when the open returned (recorded since this version).
            self.w.stat_evidence(obj, b.addr[i] as u32, b.off2[i] as u64, flags & libc::O_NOFOLLOW as u32 != 0);
        }
        if flags & O_TRUNC != 0 && flags & O_ACCMODE != 0 && !dir {
            self.w.objs[obj as usize].size_res.write(me, &mut self.deps);
            self.w.truncate(obj, 0);
        }
        let ofd = self.new_ofd(what, p, flags);
        self.ofds[ofd as usize].obj = obj;
        let slot = self.new_slot();
        self.slots[slot as usize].res.write(me, &mut self.deps);
        self.slots[slot as usize].used = true;
        self.tables[table as usize].fdnum.entry(ret as i32).or_default().write(me, &mut self.deps);
        op.slot2 = slot;
        self.finish(me, op);
        self.install(table, ret as i32, Fd { ofd, slot, cloexec: flags & O_CLOEXEC != 0 }, tid, pid);
    }
    pub(super) fn close(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret, fd) = (b.pid[i], b.tid[i], b.ret[i], b.fd[i]);
        let table = self.proc_entry(pid).table;
        let entry = self.tables[table as usize].fds.remove(&fd);
        if errno(ret) == EBADF {
            if entry.is_some() {
                self.note("close failed with EBADF on an fd the model had open");
            }
            self.drop_op(why::EBADF);
            return;
        }
        let f = match self.usable(entry) {
            Ok(f) => f,
            Err(r) => {
                self.drop_op(r);
                return;
            }
        };
        if !self.sel {
            self.implicit_close(f, tid, pid);
            return;
        }
        let me = self.begin_close(f, tid, pid);
        self.tables[table as usize].fdnum.entry(fd).or_default().write(me, &mut self.deps);
        self.finish(me, Op { kind: OpKind::Close, slot: f.slot, ret, ..Op::blank() });
    }
    pub(super) fn close_range(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret) = (b.pid[i], b.tid[i], b.ret[i]);
        let (first, last, flags) = (b.fd[i], b.addr[i].min(i32::MAX as u64) as i32, b.flags[i]);
        self.drop_op("close_range is replayed as the closes it implies");
        if ret != 0 || first < 0 {
            return;
        }
        let mut table = self.proc_entry(pid).table;
        if flags & CLOSE_RANGE_UNSHARE != 0 && self.tables[table as usize].users > 1 {
            let nt = self.copy_table(table, tid, pid);
            self.tables[table as usize].users -= 1;
            table = nt;
            if let Some(p) = self.procs.get_mut(&pid) {
                p.table = nt;
            }
        }
        let mut hit: Vec<i32> =
            self.tables[table as usize].fds.keys().copied().filter(|&n| n >= first && n <= last).collect();
        hit.sort_unstable();
        for n in hit {
            if flags & CLOSE_RANGE_CLOEXEC != 0 {
                if let Some(f) = self.tables[table as usize].fds.get_mut(&n) {
                    f.cloexec = true;
                }
            } else if let Some(f) = self.tables[table as usize].fds.remove(&n) {
                self.implicit_close(f, tid, pid);
            }
        }
    }
    /// The fd of event `i` if it can be replayed on (else the op is dropped).
    pub(super) fn fd_for(&mut self, i: usize) -> Option<Fd> {
        let b = &self.ev.events;
        let (pid, fd, ret) = (b.pid[i], b.fd[i], b.ret[i]);
        let f = self.fd_of(pid, fd);
        if errno(ret) == EBADF {
            if f.is_some() {
                self.note("a call failed with EBADF on an fd the model had open");
            }
            self.drop_op(why::EBADF);
            return None;
        }
        match self.usable(f) {
            Ok(f) => Some(f),
            Err(r) => {
                self.drop_op(r);
                None
            }
        }
    }
    /// Common start of an operation on an fd: its reference, the slot read, the slot marked used.
    pub(super) fn begin_fd(&mut self, i: usize, f: Fd) -> OpRef {
        let b = &self.ev.events;
        let me = self.begin(b.tid[i], b.pid[i]);
        let s = &mut self.slots[f.slot as usize];
        s.res.read(me, &mut self.deps);
        s.used = true;
        me
    }
    /// Op `me` reads `[at, at + got)` of object `obj`: it depends on that range's writers and
    /// on the size. `asked`: the bytes asked for, when the result is evidence of the file's size.
    pub(super) fn read_range(&mut self, me: OpRef, obj: u32, at: u64, got: u64, asked: Option<u64>) {
        let o = &mut self.w.objs[obj as usize];
        o.writers.readers_deps(at, at + got, &mut self.deps);
        o.size_res.read(me, &mut self.deps);
        if let Some(asked) = asked {
            self.w.read_evidence(obj, at, asked, got);
        }
    }
    /// Op `me` writes `[at, at + n)` of object `obj`, which is `cur` bytes long: an append or a
    /// write past the end changes the size, any other only depends on it.
    pub(super) fn write_range(&mut self, me: OpRef, obj: u32, at: u64, n: u64, cur: u64, append: bool) {
        let o = &mut self.w.objs[obj as usize];
        if append || at + n > cur {
            o.size_res.write(me, &mut self.deps);
        } else {
            o.size_res.read(me, &mut self.deps);
        }
        o.writers.write(at, at + n, me);
        self.w.wrote(obj, at, n);
    }
    pub(super) fn first_pos(&mut self, f: Fd, off: i64) {
        let s = &mut self.slots[f.slot as usize];
        if s.first_pos.is_none() && off >= 0 {
            s.first_pos = Some(off);
        }
    }
    /// The fd of event `i` when it is replayed; otherwise `None`, after moving the file position a
    /// positional read or write of a known fd moved (later calls on that fd depend on it).
    fn fd_or_advance(&mut self, i: usize, positional: bool) -> Option<Fd> {
        if let Some(f) = self.fd_for(i) {
            return Some(f);
        }
        let b = &self.ev.events;
        let (ret, roff) = (b.ret[i], b.off[i]);
        if positional && ret > 0 {
            if let Some(f) = self.fd_of(b.pid[i], b.fd[i]) {
                let o = &mut self.ofds[f.ofd as usize];
                o.pos = if roff >= 0 { roff + ret } else { o.pos + ret };
            }
        }
        None
    }
    pub(super) fn read(&mut self, i: usize, k: OpKind) {
        let b = &self.ev.events;
        let (ret, bytes, roff) = (b.ret[i], b.bytes[i], b.off[i]);
        // preadv2 with offset -1 reads at the file position, as readv does.
        let k = if k == OpKind::Preadv && roff < 0 { OpKind::Readv } else { k };
        let positional = matches!(k, OpKind::Read | OpKind::Readv);
        let Some(f) = self.fd_or_advance(i, positional) else { return };
        let off = if positional && roff < 0 { self.ofds[f.ofd as usize].pos } else { roff };
        if positional {
            self.first_pos(f, off);
            if ret > 0 {
                self.ofds[f.ofd as usize].pos = off + ret;
            }
        }
        if !self.sel {
            return;
        }
        if bytes > MAX_IO_BYTES {
            self.drop_op(why::TOO_LARGE);
            return;
        }
        let me = self.begin_fd(i, f);
        if positional {
            self.ofds[f.ofd as usize].pos_res.write(me, &mut self.deps);
        }
        let obj = self.obj_of(f);
        if obj != NONE && self.ofds[f.ofd as usize].what == What::File && off >= 0 {
            self.read_range(me, obj, off as u64, ret.max(0) as u64, (ret >= 0).then_some(bytes));
        }
        self.finish(me, Op { kind: k, slot: f.slot, size: bytes, off, ret, ..Op::blank() });
    }
    pub(super) fn write(&mut self, i: usize, k: OpKind) {
        let b = &self.ev.events;
        let (ret, bytes, roff) = (b.ret[i], b.bytes[i], b.off[i]);
        let k = if k == OpKind::Pwritev && roff < 0 { OpKind::Writev } else { k };
        let positional = matches!(k, OpKind::Write | OpKind::Writev);
        let Some(f) = self.fd_or_advance(i, positional) else { return };
        let append = self.ofds[f.ofd as usize].append;
        if !self.sel {
            if positional && ret > 0 {
                let o = &mut self.ofds[f.ofd as usize];
                o.pos = if roff >= 0 && !append { roff + ret } else { o.pos + ret };
            }
            return;
        }
        if bytes > MAX_IO_BYTES {
            self.drop_op(why::TOO_LARGE);
            return;
        }
        let me = self.begin_fd(i, f);
        let obj = self.obj_of(f);
        let cur = if obj != NONE { self.w.size(obj) } else { 0 };
        // Where the data lands: the end of the file for O_APPEND, else the offset.
        let off = if append && obj != NONE {
            cur as i64
        } else if positional && roff < 0 {
            self.ofds[f.ofd as usize].pos
        } else {
            roff
        };
        if positional {
            self.first_pos(f, roff);
            self.ofds[f.ofd as usize].pos_res.write(me, &mut self.deps);
            if ret > 0 {
                self.ofds[f.ofd as usize].pos = off + ret;
            }
        }
        if obj != NONE && off >= 0 {
            self.write_range(me, obj, off as u64, ret.max(0) as u64, cur, append);
        }
        self.slots[f.slot as usize].written = true;
        self.finish(me, Op { kind: k, slot: f.slot, size: bytes, off, ret, ..Op::blank() });
    }
    pub(super) fn lseek(&mut self, i: usize) {
        let b = &self.ev.events;
        let (ret, off, whence) = (b.ret[i], b.off[i], b.flags[i]);
        let Some(f) = self.fd_for(i) else {
            if ret >= 0 {
                if let Some(f) = self.fd_of(b.pid[i], b.fd[i]) {
                    self.ofds[f.ofd as usize].pos = ret;
                }
            }
            return;
        };
        if ret >= 0 {
            self.ofds[f.ofd as usize].pos = ret;
        }
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        self.ofds[f.ofd as usize].pos_res.write(me, &mut self.deps);
        let obj = self.obj_of(f);
        if obj != NONE && whence >= SEEK_END && self.ofds[f.ofd as usize].what == What::File {
            self.w.objs[obj as usize].size_res.read(me, &mut self.deps);
            if whence == SEEK_END && ret >= 0 && ret >= off {
                self.w.size_evidence(obj, (ret - off) as u64);
            }
        }
        self.finish(me, Op { kind: OpKind::Lseek, slot: f.slot, off, flags: whence, ret, ..Op::blank() });
    }
    pub(super) fn fd_simple(&mut self, i: usize, k: OpKind) {
        let b = &self.ev.events;
        let Some(f) = self.fd_for(i) else { return };
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        let op = Op {
            kind: k,
            slot: f.slot,
            off: b.off[i],
            size: b.bytes[i],
            flags: b.flags[i],
            mode: b.mode[i],
            ret: b.ret[i],
            ..Op::blank()
        };
        self.finish(me, op);
    }
    pub(super) fn ftruncate(&mut self, i: usize) {
        let b = &self.ev.events;
        let (ret, len) = (b.ret[i], b.bytes[i]);
        let Some(f) = self.fd_for(i) else { return };
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        let obj = self.obj_of(f);
        if obj != NONE {
            self.w.objs[obj as usize].size_res.write(me, &mut self.deps);
            if ret == 0 {
                self.w.truncate(obj, len);
            }
        }
        self.finish(me, Op { kind: OpKind::Ftruncate, slot: f.slot, size: len, ret, ..Op::blank() });
    }
    pub(super) fn fallocate(&mut self, i: usize) {
        let b = &self.ev.events;
        let (ret, mode, off, len) = (b.ret[i], b.mode[i], b.off[i], b.bytes[i]);
        let Some(f) = self.fd_for(i) else { return };
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        let obj = self.obj_of(f);
        // The file's size after the call (recorded since the probes read it; -1 before).
        let after = b.off2[i];
        if obj != NONE && off >= 0 {
            let o = &mut self.w.objs[obj as usize];
            let shifts = mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE) != 0;
            if mode & FALLOC_FL_KEEP_SIZE == 0 || shifts {
                o.size_res.write(me, &mut self.deps);
            } else {
                o.size_res.read(me, &mut self.deps);
            }
            if ret == 0 && after >= 0 {
                let after = after as u64;
                if mode & FALLOC_FL_COLLAPSE_RANGE != 0 {
                    // It was `len` bytes longer; the data after the range moved down.
                    self.w.size_evidence(obj, after + len);
                    self.w.truncate(obj, after);
                } else if mode & FALLOC_FL_INSERT_RANGE != 0 {
                    self.w.size_evidence(obj, after.saturating_sub(len));
                    self.w.truncate(obj, after);
                } else if mode & FALLOC_FL_KEEP_SIZE != 0 {
                    self.w.size_evidence(obj, after);
                } else {
                    self.w.wrote(obj, off as u64, len);
                    // Larger than the allocated range: that was its size before.
                    self.w.size_evidence(obj, after);
                }
            } else if ret == 0 && mode & FALLOC_FL_KEEP_SIZE == 0 && !shifts {
                self.w.wrote(obj, off as u64, len);
            }
        }
        self.finish(me, Op { kind: OpKind::Fallocate, slot: f.slot, mode, off, size: len, ret, ..Op::blank() });
    }
    pub(super) fn fstat(&mut self, i: usize, statx: bool) {
        let b = &self.ev.events;
        let Some(f) = self.fd_for(i) else { return };
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        let obj = self.obj_of(f);
        if obj != NONE && self.ofds[f.ofd as usize].what == What::File {
            self.w.objs[obj as usize].size_res.read(me, &mut self.deps);
        }
        if obj != NONE && b.ret[i] == 0 {
            self.w.stat_evidence(obj, b.addr[i] as u32, b.off2[i] as u64, true);
        }
        let bits = if statx { Op::STATX } else { 0 };
        self.finish(me, Op { kind: OpKind::Fstat, slot: f.slot, mode: b.mode[i], bits, ret: b.ret[i], ..Op::blank() });
    }
    pub(super) fn getdents(&mut self, i: usize) {
        let b = &self.ev.events;
        let Some(f) = self.fd_for(i) else { return };
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        self.ofds[f.ofd as usize].pos_res.write(me, &mut self.deps);
        let path = self.ofds[f.ofd as usize].path;
        let mut bits = 0;
        if path != NONE {
            self.w.listing_deps(path, me, &mut self.deps);
            let obj = self.obj_of(f);
            if obj == NONE || self.w.is_pre_existing(obj) {
                // A directory that existed before the replay has entries nobody touched.
                bits |= Op::SIZE_UNKNOWN;
            }
        }
        self.finish(
            me,
            Op { kind: OpKind::Getdents, slot: f.slot, size: b.bytes[i], ret: b.ret[i], bits, ..Op::blank() },
        );
    }
    pub(super) fn dup(&mut self, i: usize, old: i32, ret: i64, target: i32, flags: u32) {
        let b = &self.ev.events;
        let (pid, tid) = (b.pid[i], b.tid[i]);
        let table = self.proc_entry(pid).table;
        let newfd = ret as i32;
        if ret >= 0 && target == newfd && old == newfd {
            self.drop_op(why::SELF_DUP);
            return;
        }
        let src = self.fd_of(pid, old);
        if ret < 0 {
            if let Ok(f) = self.usable(src) {
                if self.sel {
                    let me = self.begin_fd(i, f);
                    self.finish(me, Op { kind: OpKind::Dup, slot: f.slot, flags, ret, ..Op::blank() });
                    return;
                }
            }
            self.drop_op(why::EBADF);
            return;
        }
        let cloexec = flags & O_CLOEXEC != 0;
        let Some(sf) = src else {
            self.drop_op(why::UNKNOWN_FD);
            // The new fd is as unknown as the old one.
            let ofd = self.new_ofd(What::Dropped(why::UNKNOWN_FD), NONE, 0);
            self.install(table, newfd, Fd { ofd, slot: NONE, cloexec }, tid, pid);
            return;
        };
        let replaced = self.tables[table as usize].fds.remove(&newfd);
        match self.usable(src) {
            Ok(f) if self.sel => {
                let me = self.begin_fd(i, f);
                let ns = self.new_slot();
                self.slots[ns as usize].res.write(me, &mut self.deps);
                self.slots[ns as usize].used = true;
                let mut rs = NONE;
                if let Some(r) = replaced {
                    if r.slot != NONE && self.slots[r.slot as usize].real() {
                        self.slots[r.slot as usize].res.write(me, &mut self.deps);
                        rs = r.slot;
                    }
                }
                self.tables[table as usize].fdnum.entry(newfd).or_default().write(me, &mut self.deps);
                self.finish(me, Op { kind: OpKind::Dup, slot: f.slot, slot2: ns, path: rs, flags, ret, ..Op::blank() });
                self.tables[table as usize].fds.insert(newfd, Fd { ofd: f.ofd, slot: ns, cloexec });
            }
            r => {
                if let Err(reason) = r {
                    self.drop_op(reason);
                }
                if let Some(r) = replaced {
                    self.implicit_close(r, tid, pid);
                }
                self.tables[table as usize].fds.insert(newfd, Fd { ofd: sf.ofd, slot: NONE, cloexec });
            }
        }
    }
    pub(super) fn fcntl(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, fd, cmd, arg, ret) = (b.pid[i], b.fd[i], b.flags[i], b.mode[i], b.ret[i]);
        match cmd as i32 {
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
                let fl = if cmd as i32 == libc::F_DUPFD_CLOEXEC { O_CLOEXEC } else { 0 };
                self.dup(i, fd, ret, NONE as i32, fl)
            }
            libc::F_GETFD | libc::F_SETFD | libc::F_GETFL | libc::F_SETFL => {
                let table = self.proc_entry(pid).table;
                if ret >= 0 {
                    if cmd as i32 == libc::F_SETFD {
                        if let Some(f) = self.tables[table as usize].fds.get_mut(&fd) {
                            f.cloexec = arg & 1 != 0;
                        }
                    }
                    if cmd as i32 == libc::F_SETFL {
                        if let Some(f) = self.fd_of(pid, fd) {
                            self.ofds[f.ofd as usize].append = arg & O_APPEND != 0;
                        }
                    }
                }
                let Some(f) = self.fd_for(i) else { return };
                if !self.sel {
                    return;
                }
                let me = self.begin_fd(i, f);
                self.finish(me, Op { kind: OpKind::Fcntl, slot: f.slot, flags: cmd, mode: arg, ret, ..Op::blank() });
            }
            _ => {
                let r = self.usable(self.fd_of(pid, fd)).err();
                self.drop_op(if r == Some(why::NOT_FILE) { why::NOT_FILE } else { why::LOCKS });
            }
        }
    }
}

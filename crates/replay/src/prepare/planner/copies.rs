//! Calls that move data between two fds (copy_file_range, sendfile, FICLONE) or change the
//! tree in other ways (mknod, xattrs, linking an open file), and the marker for changes the
//! replay cannot make.

use super::*;

const FICLONE: u32 = 0x4004_9409;
const FICLONERANGE: u32 = 0x4020_940d;

impl Planner<'_> {
    /// A change to the tree the replay cannot make: an operation that always diverges, on
    /// `path` (or the file of `fd` in the recording) if known.
    pub(super) fn unreplayed(&mut self, i: usize, path: u32, reason: &'static str) {
        self.drop_op(reason);
        if !self.sel {
            return;
        }
        let b = &self.ev.events;
        let (pid, tid, ret, nr, bytes) = (b.pid[i], b.tid[i], b.ret[i], b.nr[i], b.bytes[i]);
        let path = if path != NONE {
            path
        } else {
            self.fd_of(pid, b.fd[i]).map(|f| self.ofds[f.ofd as usize].path).unwrap_or(NONE)
        };
        let me = self.begin(tid, pid);
        self.finish(
            me,
            Op { kind: OpKind::Unreplayed, flags: nr as u32, size: bytes, ret: ret.max(0), path, ..Op::blank() },
        );
    }

    /// Whether the fd of event `i` is a file the replay writes (a change to it matters).
    fn writes_replayed_file(&self, i: usize) -> bool {
        let b = &self.ev.events;
        self.usable(self.fd_of(b.pid[i], b.fd[i])).is_ok_and(|f| self.ofds[f.ofd as usize].what == What::File)
    }

    /// The output and input of a call that moves data between two fds (event `i`), when both
    /// are replayed regular files. Otherwise `None`, with the call dropped, or marked a change
    /// the replay cannot make when it `moved` data from another kind of fd into a replayed file.
    fn file_pair(&mut self, i: usize, out: Option<Fd>, inp: Option<Fd>, moved: bool) -> Option<(Fd, Fd)> {
        match (self.usable(out), self.usable(inp)) {
            (Ok(o), Ok(n))
                if self.ofds[o.ofd as usize].what == What::File && self.ofds[n.ofd as usize].what == What::File =>
            {
                Some((o, n))
            }
            (o, n) => {
                let reason = match (o, n) {
                    (Err(r), _) | (_, Err(r)) => r,
                    _ => why::NOT_FILE,
                };
                if moved && self.writes_replayed_file(i) {
                    // Data from a pipe, socket or unknown fd into a replayed file.
                    self.unreplayed(i, NONE, why::COPY_FROM_OTHER);
                } else {
                    self.drop_op(reason);
                }
                None
            }
        }
    }

    /// Begins event `i` on output `fo`, reading input `fi` (see [`Planner::begin_fd`]).
    fn begin_pair(&mut self, i: usize, fo: Fd, fi: Fd) -> OpRef {
        let me = self.begin_fd(i, fo);
        let s = &mut self.slots[fi.slot as usize];
        s.res.read(me, &mut self.deps);
        s.used = true;
        me
    }

    /// copy_file_range, sendfile: `fd` is the output, `addr` the input.
    pub(super) fn copy(&mut self, i: usize, k: OpKind) {
        let b = &self.ev.events;
        let (pid, ret, bytes, roff, roff2) = (b.pid[i], b.ret[i], b.bytes[i], b.off[i], b.off2[i]);
        let out = self.fd_of(pid, b.fd[i]);
        let inp = self.fd_of(pid, b.addr[i] as i32);
        // Positions the call used and moved, whether replayed or not.
        let in_pos = inp.map(|f| self.ofds[f.ofd as usize].pos);
        let in_off = if roff2 >= 0 { roff2 } else { in_pos.unwrap_or(-1) };
        let out_pos = out.map(|f| self.ofds[f.ofd as usize].pos);
        // The probe gives the output's file position when the call used it; an explicit offset
        // equal to it is taken for the position (the two cannot be told apart).
        let out_uses_pos = k == OpKind::Sendfile || out_pos == Some(roff);
        if ret > 0 {
            if let (Some(f), true) = (inp, roff2 < 0) {
                self.ofds[f.ofd as usize].pos = in_off + ret;
            }
            if let (Some(f), true) = (out, out_uses_pos) {
                let o = &mut self.ofds[f.ofd as usize];
                o.pos = if o.append { o.pos + ret } else { roff.max(0) + ret };
            }
        }
        if errno(ret) == EBADF {
            self.drop_op(why::EBADF);
            return;
        }
        let Some((fo, fi)) = self.file_pair(i, out, inp, ret > 0) else { return };
        if !self.sel {
            return;
        }
        // No buffer: the kernel moves the data, so any length is replayed as recorded.
        let me = self.begin_pair(i, fo, fi);
        if roff2 < 0 {
            self.ofds[fi.ofd as usize].pos_res.write(me, &mut self.deps);
        }
        if out_uses_pos {
            self.ofds[fo.ofd as usize].pos_res.write(me, &mut self.deps);
        }
        let got = ret.max(0) as u64;
        let (io, oo) = (self.obj_of(fi), self.obj_of(fo));
        if io != NONE && in_off >= 0 {
            self.read_range(me, io, in_off as u64, got, (ret >= 0).then_some(bytes));
        }
        let append = self.ofds[fo.ofd as usize].append;
        let at = if append && oo != NONE { self.w.size(oo) as i64 } else { roff };
        if oo != NONE && at >= 0 {
            let cur = self.w.size(oo);
            self.write_range(me, oo, at as u64, got, cur, append);
        }
        self.slots[fo.slot as usize].written = true;
        let mut op = Op {
            kind: k,
            slot: fo.slot,
            slot2: fi.slot,
            size: bytes,
            off: if out_uses_pos { -1 } else { roff },
            ret,
            ..Op::blank()
        };
        op.set_off2(if roff2 < 0 { -1 } else { roff2 });
        self.finish(me, op);
    }

    /// splice between a file and a pipe the model knows: file to pipe is replayed as a read of
    /// the file's range, pipe to file as a write of the bytes it moved (generated data, as
    /// every replayed write), so a copy through a pipe leaves the destination as large as it
    /// was. tee and vmsplice touch no file. Data spliced into a file from a pipe the model does
    /// not know is a change the replay cannot make.
    pub(super) fn splice(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, ret, roff, roff2) = (b.pid[i], b.ret[i], b.off[i], b.off2[i]);
        if syscall_name(b.nr[i]) != Some("splice") {
            self.drop_op(why::TEE);
            return;
        }
        let out = self.fd_of(pid, b.fd[i]);
        let inp = self.fd_of(pid, b.addr[i] as i32);
        let pipe = |f: Option<Fd>| f.is_some_and(|f| self.ofds[f.ofd as usize].what == What::Other(FdType::Pipe));
        let file = |f: Option<Fd>| self.usable(f).is_ok_and(|f| self.ofds[f.ofd as usize].what == What::File);
        let (f, write, off) = match (file(inp), file(out)) {
            (true, false) if pipe(out) => (inp, false, roff2),
            (false, true) if pipe(inp) => (out, true, roff),
            _ => {
                if ret > 0 && self.writes_replayed_file(i) {
                    self.unreplayed(i, NONE, why::SPLICE_UNKNOWN);
                } else {
                    let r = [out, inp].into_iter().find_map(|f| self.usable(f).err());
                    self.drop_op(if r == Some(why::NOT_FILE) || r.is_none() {
                        why::NOT_FILE
                    } else {
                        why::SPLICE_UNKNOWN
                    });
                }
                return;
            }
        };
        let Some(f) = f else { return };
        // The probe gives the output's file position when the call used it (an explicit offset
        // equal to it is taken for the position); a NULL input offset is -1.
        let pos = self.ofds[f.ofd as usize].pos;
        let positional = if write { off == pos } else { off < 0 };
        let at = if positional { pos } else { off };
        if positional && ret > 0 {
            self.ofds[f.ofd as usize].pos = at + ret;
        }
        if ret <= 0 || !self.sel {
            self.drop_op(why::SPLICE_NOTHING);
            return;
        }
        let n = ret as u64;
        if n > MAX_IO_BYTES {
            if write {
                self.unreplayed(i, NONE, why::TOO_LARGE);
            } else {
                self.drop_op(why::TOO_LARGE);
            }
            return;
        }
        let me = self.begin_fd(i, f);
        if positional {
            self.first_pos(f, at);
            self.ofds[f.ofd as usize].pos_res.write(me, &mut self.deps);
        }
        let obj = self.obj_of(f);
        if write {
            let append = self.ofds[f.ofd as usize].append;
            let cur = if obj != NONE { self.w.size(obj) } else { 0 };
            let at = if append && obj != NONE { cur as i64 } else { at };
            if obj != NONE && at >= 0 {
                self.write_range(me, obj, at as u64, n, cur, append);
            }
            self.slots[f.slot as usize].written = true;
        } else if obj != NONE && at >= 0 {
            self.read_range(me, obj, at as u64, n, Some(n));
        }
        let kind = match (write, positional) {
            (true, true) => OpKind::Write,
            (true, false) => OpKind::Pwrite,
            (false, true) => OpKind::Read,
            (false, false) => OpKind::Pread,
        };
        self.finish(me, Op { kind, slot: f.slot, size: n, off: at, ret, ..Op::blank() });
    }

    /// ioctl: FIOCLEX / FIONCLEX change close-on-exec; FICLONE / FICLONERANGE are replayed.
    pub(super) fn ioctl(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, fd, req, ret) = (b.pid[i], b.fd[i], b.flags[i], b.ret[i]);
        if ret == 0 && (req == FIOCLEX || req == FIONCLEX) {
            let table = self.proc_entry(pid).table;
            if let Some(f) = self.tables[table as usize].fds.get_mut(&fd) {
                f.cloexec = req == FIOCLEX;
            }
        }
        if req != FICLONE && req != FICLONERANGE {
            let r = self.usable(self.fd_of(pid, fd)).err();
            self.drop_op(if r == Some(why::NOT_FILE) { why::NOT_FILE } else { why::IOCTL });
            return;
        }
        let src = b.addr[i] as i32;
        let Some((fo, fi)) = self.file_pair(i, self.fd_of(pid, fd), self.fd_of(pid, src), ret == 0) else { return };
        if !self.sel {
            return;
        }
        let me = self.begin_pair(i, fo, fi);
        let (io, oo) = (self.obj_of(fi), self.obj_of(fo));
        let whole = req == FICLONE;
        let (src_off, len, dst_off) = if whole { (0, 0, 0) } else { (b.off2[i].max(0), b.bytes[i], b.off[i].max(0)) };
        if io != NONE {
            let o = &mut self.w.objs[io as usize];
            o.size_res.read(me, &mut self.deps);
            let end = if whole || len == 0 { u64::MAX } else { src_off as u64 + len };
            o.writers.readers_deps(src_off as u64, end, &mut self.deps);
        }
        if oo != NONE {
            self.w.objs[oo as usize].size_res.write(me, &mut self.deps);
            if ret == 0 {
                let src_size = if io != NONE { self.w.size(io) } else { 0 };
                if whole {
                    self.w.truncate(oo, src_size);
                } else {
                    let n = if len == 0 { src_size.saturating_sub(src_off as u64) } else { len };
                    self.w.wrote(oo, dst_off as u64, n);
                }
            }
        }
        self.slots[fo.slot as usize].written = true;
        let mut op = Op { kind: OpKind::Ficlone, slot: fo.slot, slot2: fi.slot, flags: req, ret, ..Op::blank() };
        if !whole {
            op.off = dst_off;
            op.size = len;
            op.set_off2(src_off);
        }
        self.finish(me, op);
    }

    /// mknod, mknodat: FIFOs and regular files are made; devices are refused.
    pub(super) fn mknod(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret, mode) = (b.pid[i], b.tid[i], b.ret[i], b.mode[i]);
        let p = match self.m.map(b.path.get(i)) {
            Ok(p) => p,
            Err(u) => {
                self.drop_op(u.reason());
                return;
            }
        };
        let fmt = mode & libc::S_IFMT;
        if !matches!(fmt, libc::S_IFIFO | libc::S_IFREG | 0) {
            if ret == 0 {
                self.unreplayed(i, p, why::MKNOD);
            } else {
                self.drop_op(why::MKNOD);
            }
            return;
        }
        if !self.sel {
            return;
        }
        let me = self.begin(tid, pid);
        self.w.path_deps(&mut self.m, p, ret == 0, me, &mut self.deps);
        if ret == 0 {
            self.w.create(&mut self.m, p, if fmt == libc::S_IFIFO { ObjKind::Fifo } else { ObjKind::File }, false);
        } else if errno(ret) == EEXIST {
            self.w.present(&mut self.m, p);
        } else if errno(ret) == ENOENT {
            self.w.ancestors_are_dirs(&mut self.m, p);
        }
        self.finish(me, Op { kind: OpKind::Mknod, path: p, mode, ret, ..Op::blank() });
    }

    /// Extended attributes, on a path or an fd. The recording holds the names, the names a
    /// list returned, and values up to 256 bytes: a set writes the recorded value, or
    /// generated bytes of the recorded size; a minimal POSIX ACL is a mode (a chmod); names
    /// the kernel checks (`system.`, `security.`) cannot take generated values, so setting them
    /// without a recorded value is a change the replay cannot make. What the calls found
    /// before the replay changed an attribute is part of the starting tree.
    pub(super) fn xattr(&mut self, i: usize, k: OpKind) {
        let b = &self.ev.events;
        let (pid, tid, ret, flags, mode, bytes) = (b.pid[i], b.tid[i], b.ret[i], b.flags[i], b.mode[i], b.bytes[i]);
        let name = syscall_name(b.nr[i]).unwrap_or("");
        let (attr, value) = if k == OpKind::Listxattr {
            (b.path2.get(i).to_string(), None)
        } else {
            let (a, v) = SysDesc::split_xattr(b.path2.get(i));
            (a.to_string(), v)
        };
        let on_fd = name.starts_with('f');
        let nofollow = name.starts_with('l');
        let (f, p) = if on_fd {
            match self.fd_for(i) {
                Some(f) => (Some(f), NONE),
                None => return,
            }
        } else {
            match self.m.map(b.path.get(i)) {
                Ok(p) => (None, p),
                Err(u) => {
                    self.drop_op(u.reason());
                    return;
                }
            }
        };
        let acl = k == OpKind::Setxattr && mode & SysDesc::ACL_MODE != 0 && attr == "system.posix_acl_access";
        let checked = attr.starts_with("system.") || attr.starts_with("security.");
        let set_value = if k == OpKind::Setxattr { value.clone().filter(|v| v.len() as u64 == bytes) } else { None };
        if k != OpKind::Listxattr && attr.is_empty() || k == OpKind::Setxattr && checked && !acl && set_value.is_none()
        {
            // Recorded without the name (an older trace), or a value the kernel checks.
            if ret >= 0 && matches!(k, OpKind::Setxattr | OpKind::Removexattr) {
                self.unreplayed(i, p, why::XATTR);
            } else {
                self.drop_op(why::XATTR);
            }
            return;
        }
        if !self.sel {
            return;
        }
        if bytes > MAX_IO_BYTES {
            self.drop_op(why::TOO_LARGE);
            return;
        }
        let me = match f {
            Some(f) => self.begin_fd(i, f),
            None => {
                let me = self.begin(tid, pid);
                self.w.path_deps(&mut self.m, p, false, me, &mut self.deps);
                me
            }
        };
        let obj = match f {
            Some(f) => self.obj_of(f),
            None if ret >= 0 || errno(ret) == 61 => self.w.present(&mut self.m, p),
            None => {
                if errno(ret) == ENOENT {
                    self.w.absent(&mut self.m, p);
                }
                NONE
            }
        };
        if obj != NONE {
            let x = &mut self.w.objs[obj as usize].xattrs;
            if matches!(k, OpKind::Setxattr | OpKind::Removexattr) {
                x.write(me, &mut self.deps);
            } else {
                x.read(me, &mut self.deps);
            }
            self.xattr_evidence(obj, k, &attr, ret, flags, bytes, value);
        }
        let slot = f.map(|f| f.slot).unwrap_or(NONE);
        if acl {
            // Setting a minimal access ACL sets the mode and stores nothing.
            if obj != NONE && ret == 0 {
                self.w.mode_changed(obj);
            }
            let kind = if slot != NONE { OpKind::Fchmod } else { OpKind::Chmod };
            self.finish(me, Op { kind, slot, path: p, mode: mode & 0o7777, ret, ..Op::blank() });
            return;
        }
        let lit = if k == OpKind::Listxattr {
            NONE
        } else {
            self.literals.push(attr);
            self.literals.len() as u32 - 1
        };
        let size = if k == OpKind::Removexattr { 0 } else { bytes };
        // A set's recorded value, by id (-1: generated bytes).
        let off = match set_value {
            Some(v) => {
                self.values.push(v);
                self.values.len() as i64 - 1
            }
            None => -1,
        };
        let op = Op {
            kind: k,
            slot,
            path: p,
            path2: lit,
            size,
            off,
            flags: if k == OpKind::Setxattr { flags } else { 0 },
            mode: u32::from(nofollow),
            ret,
            ..Op::blank()
        };
        self.finish(me, op);
    }

    /// What an attribute call found, for the starting tree.
    #[allow(clippy::too_many_arguments)]
    fn xattr_evidence(
        &mut self,
        obj: u32,
        k: OpKind,
        attr: &str,
        ret: i64,
        flags: u32,
        bytes: u64,
        value: Option<Vec<u8>>,
    ) {
        use super::super::world::XattrEvidence as X;
        const XATTR_REPLACE: u32 = 2;
        const ENODATA: i64 = 61;
        match k {
            OpKind::Getxattr if ret >= 0 => {
                // A size query (no buffer) gets the size alone.
                let value = value.filter(|v| bytes > 0 && v.len() as i64 == ret);
                self.w.xattr_evidence(obj, attr, X::Had(Some(ret as u64), value));
            }
            OpKind::Listxattr if ret > 0 && bytes > 0 => {
                for n in attr.split('\0').filter(|n| !n.is_empty()) {
                    self.w.xattr_evidence(obj, n, X::Had(None, None));
                }
            }
            OpKind::Setxattr | OpKind::Removexattr => {
                let existed = match k {
                    OpKind::Setxattr => ret == 0 && flags & XATTR_REPLACE != 0 || errno(ret) == EEXIST,
                    _ => ret == 0,
                };
                if existed {
                    self.w.xattr_evidence(obj, attr, X::Had(None, None));
                }
                if ret == 0 {
                    self.w.xattr_evidence(obj, attr, X::Changed);
                }
            }
            _ => {}
        }
        if k != OpKind::Listxattr && errno(ret) == ENODATA {
            self.w.xattr_evidence(obj, attr, X::Missing);
        }
    }

    /// linkat(fd, "", dir, name, AT_EMPTY_PATH) and linkat(AT_FDCWD, "/proc/self/fd/N", ...,
    /// AT_SYMLINK_FOLLOW): a name for an open file (an `O_TMPFILE` made visible). `None` if the
    /// event is not one of those.
    pub(super) fn link_fd(&mut self, i: usize) -> Option<()> {
        let b = &self.ev.events;
        let (pid, ret, flags) = (b.pid[i], b.ret[i], b.flags[i]);
        let src = b.path.get(i);
        let fd = if src.is_empty() && flags & AT_EMPTY_PATH != 0 {
            b.dirfd[i]
        } else {
            let rest = src.strip_prefix("/proc/")?;
            let (who, n) = rest.split_once("/fd/")?;
            if who != "self" && who != "thread-self" && who.parse::<u32>().ok() != Some(pid) {
                return None;
            }
            n.parse::<i32>().ok()?
        };
        let f = match self.usable(self.fd_of(pid, fd)) {
            Ok(f) if self.ofds[f.ofd as usize].what == What::File => f,
            Ok(_) => {
                self.drop_op(why::NOT_FILE);
                return Some(());
            }
            Err(r) => {
                self.drop_op(r);
                return Some(());
            }
        };
        let dst = match self.m.map(b.path2.get(i)) {
            Ok(p) => p,
            Err(u) => {
                self.drop_op(u.reason());
                return Some(());
            }
        };
        if !self.sel {
            return Some(());
        }
        let me = self.begin_fd(i, f);
        self.w.path_deps(&mut self.m, dst, ret == 0, me, &mut self.deps);
        let obj = self.obj_of(f);
        if ret == 0 && obj != NONE {
            self.w.link_obj(&mut self.m, obj, dst);
        } else if errno(ret) == EEXIST {
            self.w.present(&mut self.m, dst);
        }
        self.finish(me, Op { kind: OpKind::LinkFd, slot: f.slot, path: dst, ret, ..Op::blank() });
        Some(())
    }
}

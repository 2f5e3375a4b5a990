//! Operations on paths: stats, namespace changes, symlinks.

use super::*;

impl Planner<'_> {
    /// `*at` calls on the directory fd itself (AT_EMPTY_PATH, futimens): the fd, if that is what
    /// the event is.
    pub(super) fn at_fd(&self, i: usize) -> Option<Fd> {
        let b = &self.ev.events;
        let dirfd = b.dirfd[i];
        if dirfd < 0 {
            return None;
        }
        let f = self.fd_of(b.pid[i], dirfd)?;
        let o = &self.ofds[f.ofd as usize];
        let name = b.path.get(i);
        let same = o.path != NONE && self.m.paths.get(o.path).is_some() && name.is_empty();
        let nr_name = syscall_name(b.nr[i]).unwrap_or("");
        let empty = b.flags[i] & AT_EMPTY_PATH != 0 || nr_name == "utimensat";
        (empty && (same || self.path_is(i, o.path))).then_some(f)
    }
    pub(super) fn path_is(&self, i: usize, p: u32) -> bool {
        if p == NONE {
            return false;
        }
        let b = &self.ev.events;
        let e = &self.m.paths.entries[p as usize];
        let Some(r) = self.m.spec.roots.get(e.root as usize) else { return false };
        let rec = b.path.get(i).trim_end_matches('/');
        let mount = r.mount.trim_end_matches('/');
        let expect = if e.rel == "." { mount.to_string() } else { format!("{mount}/{}", e.rel) };
        rec == expect || (rec.is_empty() && expect.is_empty())
    }
    pub(super) fn path_op(&mut self, i: usize, h: H) {
        let b = &self.ev.events;
        let (pid, tid, ret, flags) = (b.pid[i], b.tid[i], b.ret[i], b.flags[i]);
        let name = syscall_name(b.nr[i]).unwrap_or("");
        // chmod("/proc/self/fd/N"), ...: an operation on fd N (an O_PATH fd, usually).
        if matches!(h, H::Stat { .. } | H::Utimens | H::Chown { .. } | H::Chmod) {
            if let Some(fd) = self.proc_fd(i) {
                let k = match h {
                    H::Stat { .. } => OpKind::Fstat,
                    H::Utimens => OpKind::Futimens,
                    H::Chown { .. } => OpKind::Fchown,
                    _ => OpKind::Fchmod,
                };
                let statx = if matches!(h, H::Stat { statx: true, .. }) { Op::STATX } else { 0 };
                return self.fd_at(i, fd, k, statx | Op::PROC_FD);
            }
        }
        // fstatat(fd, "", AT_EMPTY_PATH), futimens(fd): an operation on the fd.
        if matches!(h, H::Stat { at: true, .. } | H::Utimens | H::Chown { .. } | H::Chmod) && self.at_fd(i).is_some() {
            let dirfd = self.ev.events.dirfd[i];
            return match h {
                H::Stat { statx, .. } => self.fd_at(i, dirfd, OpKind::Fstat, if statx { Op::STATX } else { 0 }),
                // utimensat(fd, NULL) (futimens) and utimensat(fd, ".") look the same in
                // the recording; the AT_EMPTY_PATH form does what either did, also on an
                // O_PATH fd (where futimens fails).
                H::Utimens => self.fd_at(i, dirfd, OpKind::Futimens, Op::AT_FORM),
                H::Chown { .. } => self.fd_at(i, dirfd, OpKind::Fchown, 0),
                _ => self.fd_at(i, dirfd, OpKind::Fchmod, 0),
            };
        }
        let p = match self.m.map(b.path.get(i)) {
            Ok(p) => p,
            Err(u) => {
                self.drop_op(u.reason());
                return;
            }
        };
        if !self.sel {
            return;
        }
        let ok = ret >= 0;
        let e = errno(ret);
        let rmdir = h == H::Rmdir || h == H::Unlinkat && flags & AT_REMOVEDIR != 0;
        let unlink = h == H::Unlink || h == H::Unlinkat && !rmdir;
        let mutates = ok && (rmdir || unlink || h == H::Mkdir);
        let me = self.begin(tid, pid);
        self.w.path_deps(&mut self.m, p, mutates, me, &mut self.deps);
        let mut op = Op { path: p, ret, ..Op::blank() };
        match h {
            H::Truncate => {
                op.kind = OpKind::Truncate;
                op.size = b.bytes[i];
                if ok {
                    let o = self.w.present(&mut self.m, p);
                    self.w.objs[o as usize].size_res.write(me, &mut self.deps);
                    self.w.truncate(o, b.bytes[i]);
                }
            }
            H::Stat { nofollow, statx, .. } => {
                op.kind = OpKind::Stat;
                if statx {
                    op.bits |= Op::STATX;
                    op.mode = b.mode[i];
                }
                if nofollow || flags & AT_SYMLINK_NOFOLLOW != 0 {
                    op.flags = AT_SYMLINK_NOFOLLOW;
                }
                if ok {
                    let o = self.w.present(&mut self.m, p);
                    self.w.stat_evidence(o, b.addr[i] as u32, b.off2[i] as u64, op.flags != 0);
                    if self.w.objs[o as usize].kind == ObjKind::File {
                        self.w.objs[o as usize].size_res.read(me, &mut self.deps);
                    }
                }
            }
            H::Access => {
                op.kind = OpKind::Access;
                op.mode = b.mode[i];
                op.flags = if name == "faccessat2" { flags } else { 0 };
                if ok {
                    let o = self.w.present(&mut self.m, p);
                    if op.mode & 1 != 0 {
                        self.w.executable(o);
                    }
                }
            }
            H::Statfs => {
                op.kind = OpKind::Statfs;
                if ok {
                    self.w.present(&mut self.m, p);
                }
            }
            H::Mkdir => {
                op.kind = OpKind::Mkdir;
                op.mode = b.mode[i];
                if ok {
                    self.w.create(&mut self.m, p, ObjKind::Dir, false);
                } else if e == EEXIST {
                    let o = self.w.present(&mut self.m, p);
                    self.w.refine(o, ObjKind::Dir);
                }
            }
            _ if rmdir => {
                op.kind = OpKind::Rmdir;
                op.bits |= Op::DIR_NS;
                self.w.listing_deps(p, me, &mut self.deps);
                if ok {
                    self.w.remove(&mut self.m, p, ObjKind::Dir);
                } else if e == ENOTEMPTY {
                    // Its entries are not known: one the replay does not touch keeps it non-empty.
                    let o = self.w.present(&mut self.m, p);
                    self.w.refine(o, ObjKind::Dir);
                    let keep = self.m.child(p, "latscope-keep");
                    self.w.present(&mut self.m, keep);
                }
            }
            _ if unlink => {
                op.kind = OpKind::Unlink;
                if ok {
                    let k = match self.w.known(p).map(|o| self.w.objs[o as usize].kind) {
                        Some(ObjKind::Symlink) => ObjKind::Symlink,
                        _ => ObjKind::File,
                    };
                    self.w.remove(&mut self.m, p, k);
                } else if e == EISDIR {
                    let o = self.w.present(&mut self.m, p);
                    self.w.refine(o, ObjKind::Dir);
                }
            }
            H::Readlink => {
                op.kind = OpKind::Readlink;
                op.size = b.bytes[i];
                if ok {
                    let o = self.w.present(&mut self.m, p);
                    let raw = b.path2.get(i);
                    if !raw.is_empty() && !self.symlink_len.contains_key(&o) && self.w.is_pre_existing(o) {
                        // The target the recording read (probes since this version record it),
                        // made relative to the link when absolute, as for created symlinks.
                        let depth = self.m.paths.entries[p as usize].rel.matches('/').count();
                        let t = if raw.starts_with('/') {
                            self.m.relative_target(p, raw)
                        } else {
                            crate::plan::target_stays_inside(raw, depth).then(|| raw.to_string())
                        };
                        if let Some(t) = t {
                            self.symlink_len.insert(o, t.len() as u64);
                            self.w.link_target(o, t);
                        }
                    }
                    match self.symlink_len.get(&o) {
                        // Created by the replay with a rewritten target: the length may differ.
                        Some(&l) if l != ret as u64 => op.bits |= Op::SIZE_UNKNOWN,
                        Some(_) => {}
                        None => self.w.link_len(o, ret as u64),
                    }
                } else if e == EINVAL {
                    // Not a symlink, but there.
                    self.w.present(&mut self.m, p);
                }
            }
            H::Chmod => {
                op.kind = OpKind::Chmod;
                op.mode = b.mode[i];
                op.flags = flags & AT_SYMLINK_NOFOLLOW;
                if ok {
                    let o = self.w.present(&mut self.m, p);
                    self.w.mode_changed(o);
                }
            }
            H::Chown { nofollow } => {
                op.kind = OpKind::Chown;
                op.flags = if nofollow { AT_SYMLINK_NOFOLLOW } else { flags & AT_SYMLINK_NOFOLLOW };
                if ok {
                    self.w.present(&mut self.m, p);
                }
            }
            H::Utimens => {
                op.kind = OpKind::Utimens;
                op.flags = if name == "utimensat" { flags & AT_SYMLINK_NOFOLLOW } else { 0 };
                if ok {
                    self.w.present(&mut self.m, p);
                }
            }
            _ => {}
        }
        if e == ENOENT && !matches!(h, H::Mkdir) {
            self.w.absent(&mut self.m, p);
        } else if e != 0 && e != ENOTDIR {
            self.w.ancestors_are_dirs(&mut self.m, p);
        }
        self.finish(me, op);
    }
    /// A successful exec: the program, if the replay world has it, is executable.
    pub(super) fn exec(&mut self, i: usize) {
        self.drop_op(why::EXEC);
        let b = &self.ev.events;
        // The program is part of the tree the workload found (its size is not recorded).
        if b.ret[i] == 0 && self.sel {
            if let Ok(p) = self.m.map(b.path.get(i)) {
                let o = self.w.present(&mut self.m, p);
                self.w.executable(o);
            }
        }
    }
    /// The fd N of a path `/proc/self/fd/N` (`/proc/thread-self/fd/N`, `/proc/PID/fd/N` of the
    /// caller, `/dev/fd/N`): what programs use to reach an `O_PATH` fd by path.
    pub(super) fn proc_fd(&self, i: usize) -> Option<i32> {
        let b = &self.ev.events;
        let path = b.path.get(i);
        let n = if let Some(n) = path.strip_prefix("/dev/fd/") {
            n
        } else {
            let (who, n) = path.strip_prefix("/proc/")?.split_once("/fd/")?;
            if who != "self" && who != "thread-self" && who.parse::<u32>().ok() != Some(b.pid[i]) {
                return None;
            }
            n
        };
        n.parse::<i32>().ok().filter(|&fd| fd >= 0)
    }
    /// An `*at` call on fd `dirfd` itself (or through `/proc/self/fd/N`), as an fd operation.
    pub(super) fn fd_at(&mut self, i: usize, dirfd: i32, k: OpKind, bits: u8) {
        let b = &self.ev.events;
        let pid = b.pid[i];
        let f = match self.usable(self.fd_of(pid, dirfd)) {
            Ok(f) => f,
            Err(r) => {
                self.drop_op(r);
                return;
            }
        };
        if !self.sel {
            return;
        }
        let me = self.begin_fd(i, f);
        // The *at(fd, "", AT_EMPTY_PATH) form works on O_PATH fds, where fchmod, fchown and
        // futimens fail: replayed in the same form.
        let bits = if b.flags[i] & AT_EMPTY_PATH != 0 && k != OpKind::Fstat && bits & Op::PROC_FD == 0 {
            bits | Op::AT_FORM
        } else {
            bits
        };
        // Through /proc/self/fd/N: the path call's flags (a final symlink is followed or not).
        let flags = if bits & Op::PROC_FD != 0 { b.flags[i] & AT_SYMLINK_NOFOLLOW } else { 0 };
        let obj = self.obj_of(f);
        if k == OpKind::Fstat && obj != NONE {
            if self.ofds[f.ofd as usize].what == What::File {
                self.w.objs[obj as usize].size_res.read(me, &mut self.deps);
            }
            if b.ret[i] == 0 {
                self.w.stat_evidence(obj, b.addr[i] as u32, b.off2[i] as u64, true);
            }
        }
        if k == OpKind::Fchmod && obj != NONE && b.ret[i] == 0 {
            self.w.mode_changed(obj);
        }
        self.finish(me, Op { kind: k, slot: f.slot, mode: b.mode[i], flags, bits, ret: b.ret[i], ..Op::blank() });
    }
    pub(super) fn two_paths(&mut self, i: usize, h: H) {
        let b = &self.ev.events;
        let (pid, tid, ret, flags) = (b.pid[i], b.tid[i], b.ret[i], b.flags[i]);
        let (src, dst) = match (self.m.map(b.path.get(i)), self.m.map(b.path2.get(i))) {
            (Ok(s), Ok(d)) => (s, d),
            (Err(u), _) | (_, Err(u)) => {
                self.drop_op(u.reason());
                return;
            }
        };
        if !self.sel {
            return;
        }
        let ok = ret == 0;
        let me = self.begin(tid, pid);
        let rename = h == H::Rename;
        self.w.path_deps(&mut self.m, src, ok && rename, me, &mut self.deps);
        self.w.path_deps(&mut self.m, dst, ok, me, &mut self.deps);
        let mut op =
            Op { kind: if rename { OpKind::Rename } else { OpKind::Link }, path: src, path2: dst, ret, ..Op::blank() };
        if rename {
            op.flags = flags;
            let is_dir = |w: &World, p| w.known(p).is_some_and(|o| w.objs[o as usize].kind == ObjKind::Dir);
            if ok {
                // What was moved, as the recorder saw it at its new name.
                let t = match b.mode[i] & libc::S_IFMT {
                    libc::S_IFDIR => Some(ObjKind::Dir),
                    libc::S_IFREG => Some(ObjKind::File),
                    libc::S_IFLNK => Some(ObjKind::Symlink),
                    _ => None,
                };
                if let (Some(t), true) = (t, flags & RENAME_EXCHANGE == 0) {
                    let o = self.w.present(&mut self.m, src);
                    self.w.refine(o, t);
                }
                if is_dir(&self.w, src) || is_dir(&self.w, dst) {
                    op.bits |= Op::DIR_NS;
                }
                if flags & RENAME_EXCHANGE != 0 {
                    self.w.exchange(&mut self.m, src, dst);
                } else {
                    self.w.rename(&mut self.m, src, dst);
                }
            } else if errno(ret) == ENOENT {
                self.w.absent(&mut self.m, src);
            }
        } else {
            op.flags = 0;
            if ok {
                self.w.link(&mut self.m, src, dst);
            } else if errno(ret) == ENOENT {
                self.w.absent(&mut self.m, src);
            }
        }
        self.finish(me, op);
    }
    pub(super) fn symlink(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret) = (b.pid[i], b.tid[i], b.ret[i]);
        let link = match self.m.map(b.path2.get(i)) {
            Ok(p) => p,
            Err(u) => {
                self.drop_op(u.reason());
                return;
            }
        };
        // A relative target is kept as given (it is relative to the link's directory); an
        // absolute one is rewritten relative to the link, inside the same root.
        let raw = b.path.get(i);
        let depth = self.m.paths.entries[link as usize].rel.matches('/').count();
        let target = if raw.starts_with('/') {
            self.m.relative_target(link, raw)
        } else {
            crate::plan::target_stays_inside(raw, depth).then(|| raw.to_string())
        };
        let Some(target) = target else {
            self.drop_op(why::SYMLINK_OUT);
            return;
        };
        if !self.sel {
            return;
        }
        let me = self.begin(tid, pid);
        self.w.path_deps(&mut self.m, link, ret == 0, me, &mut self.deps);
        if ret == 0 {
            let o = self.w.create(&mut self.m, link, ObjKind::Symlink, false);
            self.symlink_len.insert(o, target.len() as u64);
        } else if errno(ret) == EEXIST {
            self.w.present(&mut self.m, link);
        }
        self.literals.push(target);
        let lit = self.literals.len() as u32 - 1;
        self.finish(me, Op { kind: OpKind::Symlink, path: link, path2: lit, ret, ..Op::blank() });
    }
}

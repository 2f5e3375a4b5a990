//! File mappings: mmap, munmap, msync.

use super::*;

impl Planner<'_> {
    pub(super) fn mmap(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret, len, prot, flags, off) =
            (b.pid[i], b.tid[i], b.ret[i], b.bytes[i], b.mode[i], b.flags[i], b.off[i]);
        if flags & MAP_ANONYMOUS != 0 || b.fd[i] < 0 {
            self.drop_op(why::ANON);
            return;
        }
        let mm = self.proc_entry(pid).mm;
        let ok = !(-4095..0).contains(&ret);
        let Some(f) = self.fd_for(i) else {
            if ok {
                self.mms[mm as usize].maps.push(Mapping { addr: ret as u64, len, map: NONE });
            }
            return;
        };
        if !self.sel {
            if ok {
                self.mms[mm as usize].maps.push(Mapping { addr: ret as u64, len, map: NONE });
            }
            return;
        }
        let me = self.begin_fd(i, f);
        let obj = self.obj_of(f);
        if obj != NONE {
            self.w.objs[obj as usize].size_res.read(me, &mut self.deps);
        }
        let mut op = Op {
            kind: OpKind::Mmap,
            slot: f.slot,
            size: len,
            mode: prot,
            flags: flags & !(MAP_FIXED | MAP_FIXED_NOREPLACE),
            off,
            ret,
            ..Op::blank()
        };
        if ok {
            let map = self.maps.len() as u32;
            self.maps.push(MapSlot {
                addr0: ret as u64,
                refs: 1,
                obj,
                file_off: off,
                shared_writable: flags & MAP_SHARED != 0 && prot & PROT_WRITE != 0,
                res: Res::default(),
                path: self.ofds[f.ofd as usize].path,
                synced: false,
            });
            self.maps[map as usize].res.write(me, &mut self.deps);
            self.mms[mm as usize].maps.push(Mapping { addr: ret as u64, len, map });
            op.slot2 = map;
        } else {
            // A failed mmap needs a mapping slot to name (the executor stores nothing in it).
            op.slot2 = self.maps.len() as u32;
            self.maps.push(MapSlot {
                addr0: 0,
                refs: 0,
                obj: NONE,
                file_off: 0,
                shared_writable: false,
                res: Res::default(),
                path: NONE,
                synced: false,
            });
        }
        let _ = tid;
        self.finish(me, op);
    }
    pub(super) fn munmap(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret, addr, len) = (b.pid[i], b.tid[i], b.ret[i], b.addr[i], b.bytes[i]);
        let mm = self.proc_entry(pid).mm;
        let end = addr.saturating_add(len);
        let hits: Vec<usize> = self.mms[mm as usize]
            .maps
            .iter()
            .enumerate()
            .filter(|(_, m)| m.addr < end && addr < m.addr + m.len)
            .map(|(k, _)| k)
            .collect();
        if hits.is_empty() || ret != 0 {
            self.drop_op(why::NO_MAPPING);
            return;
        }
        let mut dropped_any = false;
        for &k in hits.iter().rev() {
            let m = self.mms[mm as usize].maps[k].clone();
            let (a, z) = (addr.max(m.addr), end.min(m.addr + m.len));
            if m.map == NONE {
                dropped_any = true;
                self.mms[mm as usize].maps.remove(k);
                continue;
            }
            if a == m.addr && z == m.addr + m.len {
                self.mms[mm as usize].maps.remove(k);
                if self.sel {
                    self.unmap_slot(m.map, 0, m.len, tid, pid, false);
                } else {
                    self.unmap_slot(m.map, 0, m.len, tid, pid, true);
                }
            } else {
                // Part of a mapping: unmapped for real only if no other process shares it.
                let shared = self.maps[m.map as usize].refs > 1;
                if self.sel {
                    let me = self.begin(tid, pid);
                    self.maps[m.map as usize].res.write(me, &mut self.deps);
                    let bits = if shared { Op::NOOP } else { 0 };
                    let off = (a - self.maps[m.map as usize].addr0) as i64;
                    let op = Op { kind: OpKind::Munmap, slot2: m.map, off, size: z - a, bits, ..Op::blank() };
                    self.finish(me, op);
                }
                let maps = &mut self.mms[mm as usize].maps;
                if a == m.addr {
                    maps[k] = Mapping { addr: z, len: m.addr + m.len - z, map: m.map };
                } else if z == m.addr + m.len {
                    maps[k] = Mapping { addr: m.addr, len: a - m.addr, map: m.map };
                } else {
                    maps[k] = Mapping { addr: m.addr, len: a - m.addr, map: m.map };
                    maps.push(Mapping { addr: z, len: m.addr + m.len - z, map: m.map });
                }
            }
        }
        if dropped_any && hits.len() == 1 {
            self.drop_op(why::FD_NOT_REPLAYED);
        }
    }
    pub(super) fn msync(&mut self, i: usize) {
        let b = &self.ev.events;
        let (pid, tid, ret, addr, len, flags) = (b.pid[i], b.tid[i], b.ret[i], b.addr[i], b.bytes[i], b.flags[i]);
        let mm = self.proc_entry(pid).mm;
        let Some(m) = self.mms[mm as usize].maps.iter().find(|m| m.addr <= addr && addr < m.addr + m.len).cloned()
        else {
            self.drop_op(why::NO_MAPPING);
            return;
        };
        if m.map == NONE {
            self.drop_op(why::FD_NOT_REPLAYED);
            return;
        }
        if !self.sel {
            return;
        }
        let me = self.begin(tid, pid);
        self.maps[m.map as usize].res.read(me, &mut self.deps);
        if ret == 0 {
            self.maps[m.map as usize].synced = true;
        }
        let ms = self.maps[m.map as usize].clone();
        let moff = addr - ms.addr0;
        let len = len.min(m.addr + m.len - addr);
        let mut dirty = 0u64;
        if ms.shared_writable && ms.obj != NONE && ret == 0 {
            // The stores before an msync are not recorded: the replay makes them, with
            // generated data, over the part of the range inside the file.
            let file_at = ms.file_off.max(0) as u64 + moff;
            let size = self.w.size(ms.obj);
            dirty = len.min(size.saturating_sub(file_at)).min(u32::MAX as u64);
            if dirty > 0 {
                let o = &mut self.w.objs[ms.obj as usize];
                o.size_res.read(me, &mut self.deps);
                o.writers.write(file_at, file_at + dirty, me);
            }
        }
        let op = Op {
            kind: OpKind::Msync,
            slot2: m.map,
            off: moff as i64,
            size: len,
            flags,
            mode: dirty as u32,
            ret,
            ..Op::blank()
        };
        self.finish(me, op);
    }
}

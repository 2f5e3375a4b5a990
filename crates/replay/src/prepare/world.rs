//! The replay world: the sandbox's namespace and files as the planned operations change them,
//! from which the starting tree is derived (after TBBT, FAST'05: what is used before it is
//! created must exist at the start, as big as what is read of it).
//!
//! Only operations that are replayed change this world; the fd model (which recorded fd is
//! which file) follows every recorded event.

use super::mapping::Mapper;
use super::res::{OpRef, Res, Writers};
use crate::op::NONE;
use crate::plan::{InitEntry, InitKind, InitXattr};
use std::collections::{BTreeMap, BTreeSet};

/// What an object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjKind {
    /// Not known yet (stat'ed, renamed): a file unless something says otherwise.
    Unknown,
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symlink.
    Symlink,
    /// A FIFO (made by the replay only).
    Fifo,
}

/// Whether an object exists before the replay starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pre {
    /// Created by a replayed operation.
    No,
    /// Exists at the start, at this path.
    Yes(u32),
    /// Created by an `O_CREAT` open without `O_EXCL` at this path: it may have existed; it does
    /// if data is read from it that nobody wrote.
    Maybe(u32),
}

/// A file, directory or symlink of the replay world.
#[derive(Debug, Clone)]
pub struct Obj {
    /// Its kind.
    pub kind: ObjKind,
    pre: Pre,
    /// Bytes it must have at the start (reads of unwritten data before any truncation).
    init_size: u64,
    /// Size from replayed writes and truncations alone (the size once `detached`).
    size_wo: u64,
    /// Truncated since the start: the initial size no longer matters.
    detached: bool,
    /// Length of a pre-existing symlink's target (from readlink).
    link_len: u64,
    /// A pre-existing symlink's target as recorded by readlink (rewritten to stay inside).
    link_target: Option<String>,
    /// Permission bits a stat found before the replay changed them.
    init_mode: Option<u32>,
    /// A chmod was replayed on it: later stats say nothing about its starting mode.
    mode_changed: bool,
    /// Executed, or found executable (`access(X_OK)`).
    exec: bool,
    /// What a stat following a final symlink found while the kind was unknown (mode, size):
    /// the object's own if nothing shows it is a symlink.
    followed: Option<(u32, u64)>,
    /// Last writer of each byte range.
    pub writers: Writers,
    /// Reading the size (reads, stats, non-extending writes) vs changing it.
    pub size_res: Res,
    /// Reading its extended attributes (get, list) vs changing them (set, remove): orders
    /// them across threads and processes as recorded.
    pub xattrs: Res,
    /// Extended attributes it had at the start, by name: (value size, value) where recorded.
    xstart: BTreeMap<String, (Option<u64>, Option<Vec<u8>>)>,
    /// Attribute names whose state the replay's own operations decide (set, removed, or found
    /// missing): later calls say nothing about the start.
    xknown: BTreeSet<String>,
}

/// What an extended-attribute call says about one attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XattrEvidence {
    /// It existed (with this size and value, where recorded).
    Had(Option<u64>, Option<Vec<u8>>),
    /// It did not exist.
    Missing,
    /// The call set or removed it.
    Changed,
}

impl Obj {
    fn new(kind: ObjKind, pre: Pre) -> Obj {
        Obj {
            kind,
            pre,
            init_size: 0,
            size_wo: 0,
            detached: false,
            link_len: 0,
            link_target: None,
            init_mode: None,
            mode_changed: false,
            exec: false,
            followed: None,
            writers: Writers::default(),
            size_res: Res::default(),
            xattrs: Res::default(),
            xstart: BTreeMap::new(),
            xknown: BTreeSet::new(),
        }
    }
    fn refine(&mut self, k: ObjKind) {
        if self.kind == ObjKind::Unknown {
            self.kind = k;
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum State {
    #[default]
    Unknown,
    Present(u32),
    Absent,
}

#[derive(Debug, Clone, Default)]
struct Node {
    state: State,
    /// Its name: looked up (read) or created, removed, renamed (write).
    ns: Res,
    /// A directory's entries: created or removed (read: they commute), listed or the directory
    /// removed (write).
    listing: Res,
    /// Children with a known state (for directory renames).
    children: Vec<u32>,
    /// A lookup below it got past it: if it exists, it is a directory.
    dir_hint: bool,
}

/// The replay world.
#[derive(Default)]
pub struct World {
    nodes: Vec<Node>,
    /// Every object.
    pub objs: Vec<Obj>,
    /// Model disagreements with the recording, by message.
    pub disagreements: std::collections::BTreeMap<&'static str, u64>,
}

impl World {
    fn node(&mut self, p: u32) -> &mut Node {
        if p as usize >= self.nodes.len() {
            self.nodes.resize_with(p as usize + 1, Node::default);
        }
        &mut self.nodes[p as usize]
    }

    fn disagree(&mut self, what: &'static str) {
        *self.disagreements.entry(what).or_default() += 1;
    }

    fn new_obj(&mut self, kind: ObjKind, pre: Pre) -> u32 {
        self.objs.push(Obj::new(kind, pre));
        self.objs.len() as u32 - 1
    }

    fn set(&mut self, m: &mut Mapper, p: u32, s: State) {
        let was = self.node(p).state;
        self.node(p).state = s;
        if was == State::Unknown && s != State::Unknown {
            if let Some(par) = m.parent(p) {
                self.node(par).children.push(p);
            }
        }
    }

    /// The object at `p`, which the recording says exists; unknown ancestors become directories
    /// of the starting tree.
    pub fn present(&mut self, m: &mut Mapper, p: u32) -> u32 {
        match self.node(p).state {
            State::Present(o) => o,
            State::Absent => {
                self.disagree("a path the replay removed or never created was used successfully");
                let o = self.new_obj(ObjKind::Unknown, Pre::No);
                self.set(m, p, State::Present(o));
                o
            }
            State::Unknown => {
                let pre = match m.parent(p) {
                    None => Pre::Yes(p),
                    Some(par) => {
                        let po = self.present(m, par);
                        let parent = &mut self.objs[po as usize];
                        parent.refine(ObjKind::Dir);
                        match parent.pre {
                            Pre::Yes(ip) | Pre::Maybe(ip) => {
                                parent.pre = Pre::Yes(ip);
                                let base = m.paths.entries[p as usize].base().to_string();
                                Pre::Yes(m.child(ip, &base))
                            }
                            Pre::No => {
                                self.disagree("a path used before anything replayed created it, inside a directory the replay created (created by an operation left out?)");
                                Pre::No
                            }
                        }
                    }
                };
                let kind = if m.parent(p).is_none() || self.node(p).dir_hint { ObjKind::Dir } else { ObjKind::Unknown };
                let o = self.new_obj(kind, pre);
                self.set(m, p, State::Present(o));
                o
            }
        }
    }

    /// The object at `p` if the world knows one (without creating anything).
    pub fn known(&self, p: u32) -> Option<u32> {
        match self.nodes.get(p as usize).map(|n| n.state) {
            Some(State::Present(o)) => Some(o),
            _ => None,
        }
    }

    /// A lookup of `p` got past its existing ancestors (it did not fail with ENOTDIR): those
    /// the world knows are directories.
    pub fn ancestors_are_dirs(&mut self, m: &mut Mapper, p: u32) {
        let mut a = m.parent(p);
        while let Some(x) = a {
            match self.known(x) {
                Some(o) => self.objs[o as usize].refine(ObjKind::Dir),
                None => self.node(x).dir_hint = true,
            }
            a = m.parent(x);
        }
    }

    /// A lookup of `p` failed with ENOENT: absent at the start if never seen.
    pub fn absent(&mut self, m: &mut Mapper, p: u32) {
        self.ancestors_are_dirs(m, p);
        match self.node(p).state {
            State::Unknown => self.set(m, p, State::Absent),
            State::Absent => {}
            State::Present(_) => self.disagree("a path the replay has was not found in the recording"),
        }
    }

    /// `p` is created (mkdir, O_CREAT, symlink, mknod); `maybe`: an O_CREAT open without
    /// O_EXCL, which may have found the file.
    pub fn create(&mut self, m: &mut Mapper, p: u32, kind: ObjKind, maybe: bool) -> u32 {
        let was = self.node(p).state;
        if let Some(par) = m.parent(p) {
            let po = self.present(m, par);
            self.objs[po as usize].refine(ObjKind::Dir);
        }
        if let State::Present(o) = was {
            if !maybe {
                self.disagree("a path the replay has was created in the recording");
            }
            return o;
        }
        let pre = if maybe && was == State::Unknown { Pre::Maybe(p) } else { Pre::No };
        let o = self.new_obj(kind, pre);
        self.set(m, p, State::Present(o));
        o
    }

    /// `p` is removed (unlink, rmdir).
    pub fn remove(&mut self, m: &mut Mapper, p: u32, kind: ObjKind) {
        let o = self.present(m, p);
        self.objs[o as usize].refine(kind);
        self.set(m, p, State::Absent);
    }

    /// `src` is renamed to `dst` (replacing what `dst` was); a directory's known children move.
    pub fn rename(&mut self, m: &mut Mapper, src: u32, dst: u32) {
        let o = self.present(m, src);
        if let Some(par) = m.parent(dst) {
            let po = self.present(m, par);
            self.objs[po as usize].refine(ObjKind::Dir);
        }
        if src == dst {
            return;
        }
        self.set(m, dst, State::Present(o));
        self.set(m, src, State::Absent);
        let kids = std::mem::take(&mut self.node(src).children);
        for c in kids {
            let st = self.node(c).state;
            if st == State::Unknown {
                continue;
            }
            let base = m.paths.entries[c as usize].base().to_string();
            let nc = m.child(dst, &base);
            if let State::Present(_) = st {
                self.rename(m, c, nc);
            } else {
                self.set(m, nc, st);
                self.set(m, c, State::Unknown);
            }
        }
    }

    /// A new name `dst` for the object at `src`.
    pub fn link(&mut self, m: &mut Mapper, src: u32, dst: u32) {
        let o = self.present(m, src);
        self.objs[o as usize].refine(ObjKind::File);
        if let Some(par) = m.parent(dst) {
            self.present(m, par);
        }
        self.set(m, dst, State::Present(o));
    }

    /// A file no name refers to yet (`O_TMPFILE`).
    pub fn anon_file(&mut self) -> u32 {
        self.new_obj(ObjKind::File, Pre::No)
    }

    /// A name `dst` for object `o` (linking an open file).
    pub fn link_obj(&mut self, m: &mut Mapper, o: u32, dst: u32) {
        if let Some(par) = m.parent(dst) {
            let po = self.present(m, par);
            self.objs[po as usize].refine(ObjKind::Dir);
        }
        self.set(m, dst, State::Present(o));
    }

    /// `a` and `b` swap places (renameat2 RENAME_EXCHANGE).
    pub fn exchange(&mut self, m: &mut Mapper, a: u32, b: u32) {
        let (oa, ob) = (self.present(m, a), self.present(m, b));
        self.set(m, a, State::Present(ob));
        self.set(m, b, State::Present(oa));
    }

    /// Whether an object exists before the replay starts (or may).
    pub fn is_pre_existing(&self, o: u32) -> bool {
        !matches!(self.objs[o as usize].pre, Pre::No)
    }

    /// Say what kind an object is.
    pub fn refine(&mut self, o: u32, k: ObjKind) {
        self.objs[o as usize].refine(k);
    }

    /// A pre-existing symlink was read: its target is `len` bytes.
    pub fn link_len(&mut self, o: u32, len: u64) {
        let ob = &mut self.objs[o as usize];
        ob.refine(ObjKind::Symlink);
        ob.link_len = ob.link_len.max(len);
    }

    /// What executed or executable symlinks lead to is executable too (`access(X_OK)` follows
    /// them): called once every event is planned.
    pub fn executable_targets(&mut self, m: &mut Mapper) {
        for _ in 0..8 {
            let mut changed = false;
            for o in 0..self.objs.len() {
                let ob = &self.objs[o];
                let (Pre::Yes(p), true, ObjKind::Symlink) = (ob.pre, ob.exec, ob.kind) else { continue };
                let Some(t) = ob.link_target.clone() else { continue };
                let mut at = m.parent(p);
                for c in t.split('/') {
                    at = match (c, at) {
                        ("" | ".", a) => a,
                        ("..", Some(a)) => m.parent(a).or(Some(a)),
                        (name, Some(a)) => Some(m.child(a, name)),
                        (_, None) => None,
                    };
                }
                let Some(q) = at else { continue };
                if matches!(self.nodes.get(q as usize).map(|n| n.state), Some(State::Absent)) {
                    continue;
                }
                let to = self.present(m, q);
                if !self.objs[to as usize].exec {
                    self.objs[to as usize].exec = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// A pre-existing symlink's target (as the replay will create it).
    pub fn link_target(&mut self, o: u32, target: String) {
        let ob = &mut self.objs[o as usize];
        ob.refine(ObjKind::Symlink);
        ob.link_len = ob.link_len.max(target.len() as u64);
        ob.link_target = Some(target);
    }

    /// Dependencies of an operation on path `p`: it looks up every ancestor; it reads or
    /// (`mutates`) writes `p`'s name, and a mutation changes the parent's listing.
    pub fn path_deps(&mut self, m: &mut Mapper, p: u32, mutates: bool, me: OpRef, deps: &mut Vec<OpRef>) {
        let mut a = m.parent(p);
        while let Some(x) = a {
            self.node(x).ns.read(me, deps);
            a = m.parent(x);
        }
        if mutates {
            self.node(p).ns.write(me, deps);
            if let Some(par) = m.parent(p) {
                self.node(par).listing.read(me, deps);
            }
        } else {
            self.node(p).ns.read(me, deps);
        }
    }

    /// Dependencies of listing directory `p` (getdents) or removing it (rmdir).
    pub fn listing_deps(&mut self, p: u32, me: OpRef, deps: &mut Vec<OpRef>) {
        self.node(p).listing.write(me, deps);
    }

    /// The current size of a file.
    pub fn size(&self, o: u32) -> u64 {
        let ob = &self.objs[o as usize];
        if ob.detached {
            ob.size_wo
        } else {
            ob.size_wo.max(ob.init_size)
        }
    }

    /// `got` bytes were read at `off` (asking for `req`): the file had that much data; a short
    /// read means it ended there.
    pub fn read_evidence(&mut self, o: u32, off: u64, req: u64, got: u64) {
        let ob = &mut self.objs[o as usize];
        ob.refine(ObjKind::File);
        if ob.detached {
            return;
        }
        let end = off.saturating_add(got);
        // A read that got bytes says the file reached its end; a read that got none says
        // nothing about the start (the file may have been shorter).
        let _ = req;
        if got > 0 && end > ob.size_wo {
            ob.init_size = ob.init_size.max(end);
        }
    }

    /// The file was `size` bytes long (lseek SEEK_END).
    pub fn size_evidence(&mut self, o: u32, size: u64) {
        let ob = &mut self.objs[o as usize];
        if !ob.detached && size > ob.size_wo {
            ob.init_size = ob.init_size.max(size);
        }
    }

    /// A stat found `mode` (type and permissions, 0 if not recorded) and `size`.
    pub fn stat_evidence(&mut self, o: u32, mode: u32, size: u64, nofollow: bool) {
        let k = match mode & libc::S_IFMT {
            libc::S_IFDIR => ObjKind::Dir,
            libc::S_IFREG => ObjKind::File,
            libc::S_IFLNK => ObjKind::Symlink,
            _ => return,
        };
        let ob = &mut self.objs[o as usize];
        // Following a final symlink describes its target: the object's own only once known
        // not to be a symlink (else at the end, if nothing said otherwise).
        if !nofollow && ob.kind == ObjKind::Unknown {
            if ob.followed.is_none() {
                ob.followed = Some((mode, size));
            }
            return;
        }
        if !nofollow && ob.kind == ObjKind::Symlink {
            return;
        }
        ob.refine(k);
        if ob.kind != k {
            return;
        }
        if ob.init_mode.is_none() && !ob.mode_changed {
            ob.init_mode = Some(mode & 0o7777);
        }
        match k {
            ObjKind::File => self.size_evidence(o, size),
            ObjKind::Symlink => ob.link_len = ob.link_len.max(size),
            _ => {}
        }
    }

    /// A chmod was replayed on the object.
    pub fn mode_changed(&mut self, o: u32) {
        self.objs[o as usize].mode_changed = true;
    }

    /// The object was executed or found executable.
    pub fn executable(&mut self, o: u32) {
        // Not a kind: exec and access follow symlinks.
        self.objs[o as usize].exec = true;
    }

    /// `[off, off + len)` was written.
    pub fn wrote(&mut self, o: u32, off: u64, len: u64) {
        let ob = &mut self.objs[o as usize];
        ob.refine(ObjKind::File);
        ob.size_wo = ob.size_wo.max(off.saturating_add(len));
    }

    /// The file was truncated (or opened with O_TRUNC) to `len` bytes.
    pub fn truncate(&mut self, o: u32, len: u64) {
        let ob = &mut self.objs[o as usize];
        ob.refine(ObjKind::File);
        ob.detached = true;
        ob.size_wo = len;
        ob.writers.truncate(len);
    }

    /// What an extended-attribute call on object `o` says about attribute `name`: an
    /// attribute found before the replay changed it existed at the start (if the object did).
    pub fn xattr_evidence(&mut self, o: u32, name: &str, ev: XattrEvidence) {
        let ob = &mut self.objs[o as usize];
        if ob.xknown.contains(name) {
            return;
        }
        match ev {
            XattrEvidence::Had(size, value) => {
                if ob.pre == Pre::No {
                    return;
                }
                let e = ob.xstart.entry(name.to_string()).or_default();
                e.0 = size.or(e.0);
                if value.is_some() {
                    e.1 = value;
                }
            }
            XattrEvidence::Missing | XattrEvidence::Changed => {
                ob.xknown.insert(name.to_string());
            }
        }
    }

    /// The path an object has in the starting tree, if it is part of it.
    fn init_path(ob: &Obj) -> Option<u32> {
        match ob.pre {
            Pre::Yes(p) => Some(p),
            Pre::Maybe(p) if ob.init_size > 0 || !ob.xstart.is_empty() => Some(p),
            _ => None,
        }
    }

    /// The extended attributes of the starting tree (recorded values go into `values`).
    pub fn init_xattrs(&self, m: &Mapper, literals: &mut Vec<String>, values: &mut Vec<Vec<u8>>) -> Vec<InitXattr> {
        let mut out = Vec::new();
        for ob in &self.objs {
            let Some(path) = Self::init_path(ob) else { continue };
            if m.paths.entries[path as usize].rel == "." || ob.kind == ObjKind::Fifo {
                continue;
            }
            for (name, (size, value)) in &ob.xstart {
                literals.push(name.clone());
                let name = literals.len() as u32 - 1;
                let x = match value {
                    Some(v) => {
                        values.push(v.clone());
                        InitXattr { path, name, value: values.len() as u32 - 1, size: v.len() as u32 }
                    }
                    None => InitXattr {
                        path,
                        name,
                        value: NONE,
                        size: size.unwrap_or(0).min(crate::plan::MAX_XATTR_VALUE as u64) as u32,
                    },
                };
                out.push(x);
            }
        }
        out.sort_by_key(|x| x.path);
        out
    }

    /// The starting tree: objects that exist before the replay, parents first.
    pub fn init_entries(&self, m: &Mapper, literals: &mut Vec<String>) -> Vec<InitEntry> {
        let mut v: Vec<(usize, u32, InitEntry)> = Vec::new();
        for ob in &self.objs {
            let Some(path) = Self::init_path(ob) else { continue };
            let e = &m.paths.entries[path as usize];
            if e.rel == "." {
                continue;
            }
            let (mut okind, mut init_mode, mut init_size) = (ob.kind, ob.init_mode, ob.init_size);
            if let (ObjKind::Unknown, Some((mode, size))) = (ob.kind, ob.followed) {
                okind = if mode & libc::S_IFMT == libc::S_IFDIR { ObjKind::Dir } else { ObjKind::File };
                init_mode = init_mode.or(Some(mode & 0o7777));
                if okind == ObjKind::File && !ob.detached && size > ob.size_wo {
                    init_size = init_size.max(size);
                }
            }
            let kind = match okind {
                ObjKind::Fifo => continue,
                ObjKind::Dir => InitKind::Dir,
                ObjKind::Symlink => InitKind::Symlink,
                _ => InitKind::File,
            };
            // The mode a stat found (setuid and setgid bits left out), else a default.
            let mode = |dflt: u32| init_mode.map(|m| m & 0o1777).unwrap_or(dflt);
            let mut entry = InitEntry { path, kind, mode: mode(0o644), size: 0, target: NONE };
            if kind == InitKind::File && ob.exec {
                entry.mode = if init_mode.is_some() { entry.mode | 0o100 } else { 0o755 };
            }
            match kind {
                InitKind::Dir => entry.mode = mode(0o755),
                InitKind::File => entry.size = init_size,
                InitKind::Symlink => {
                    // The target is not recorded, only its length: a name of that length in
                    // the link's own directory, which does not exist.
                    let n = ob.link_len.clamp(1, 255) as usize;
                    literals.push(ob.link_target.clone().unwrap_or_else(|| "_".repeat(n)));
                    entry.target = literals.len() as u32 - 1;
                    entry.mode = 0o777;
                }
            }
            v.push((e.rel.matches('/').count(), path, entry));
        }
        v.sort_by_key(|(d, p, _)| (*d, *p));
        v.into_iter().map(|(_, _, e)| e).collect()
    }
}

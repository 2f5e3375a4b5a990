//! Naming user frames: a file as recorded (its path, GNU build id and an offset in it) to the
//! function there, with the functions inlined at that address and the source file and line
//! where the debug information has them.
//!
//! [blazesym](https://github.com/libbpf/blazesym) reads the symbol tables (`.symtab`, and
//! `.dynsym` for stripped libraries) and DWARF, compressed or not, and finds separate debug
//! files by build id (`/usr/lib/debug/.build-id/xx/yyyy.debug`) and by `.gnu_debuglink` in the
//! debug directories. On top of that, a debug file a debuginfod client left in its cache on disk
//! (`<cache>/<build id>/debuginfo`) is used, and where the debug information and the symbol
//! table name the same function differently (glibc's `__GI___clock_nanosleep` for the
//! exported `clock_nanosleep`), the symbol table's name is shown: it is what `nm -D`, the
//! headers and the documentation call it.

use crate::elf::{hex, vaddr_of, ElfInfo, Load};
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Sym, Symbolized, Symbolizer};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One named frame: a function, innermost first when several functions were inlined at the
/// same address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameName {
    /// The function (demangled).
    pub function: String,
    /// The source file of the instruction in that function, when the debug information says.
    pub file: Option<String>,
    /// Its line.
    pub line: Option<u32>,
    /// The function was inlined into the next frame (the address is in that function's code).
    pub inlined: bool,
}

impl FrameName {
    /// `file:line` (the file's last path component), when known.
    pub fn source(&self) -> Option<String> {
        let f = self.file.as_deref()?;
        let base = f.rsplit('/').next().unwrap_or(f);
        Some(match self.line {
            Some(l) => format!("{base}:{l}"),
            None => base.to_string(),
        })
    }
}

/// Names user frames from the binaries at hand (see the module documentation).
pub struct Symbols {
    symbolizer: Symbolizer,
    root: Option<PathBuf>,
    caches: Vec<PathBuf>,
    /// (path, build id) -> the file to read, None when not at hand or not the recorded one.
    usable: HashMap<(String, String), Option<PathBuf>>,
    /// Loadable segments per file (for debuginfod files, which are read by virtual address).
    loads: HashMap<PathBuf, Option<Vec<Load>>>,
    /// A debuginfod cache's debug file per build id.
    debuginfod: HashMap<String, Option<PathBuf>>,
    names: HashMap<(PathBuf, u64), Option<Vec<FrameName>>>,
    /// What the user should know: files not at hand, not the recorded ones.
    pub notes: Vec<String>,
}

/// The debuginfod caches on disk, as the elfutils client places them: `$DEBUGINFOD_CACHE_PATH`,
/// `$XDG_CACHE_HOME/debuginfod_client`, `~/.cache/debuginfod_client` (and that of the user
/// who ran `sudo`).
pub fn debuginfod_caches() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = std::env::var_os("DEBUGINFOD_CACHE_PATH") {
        v.push(PathBuf::from(p));
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME") {
        v.push(PathBuf::from(p).join("debuginfod_client"));
    }
    if let Some(h) = std::env::var_os("HOME") {
        v.push(PathBuf::from(h).join(".cache/debuginfod_client"));
    }
    if let Some(u) = std::env::var_os("SUDO_USER") {
        let u = u.to_string_lossy();
        if !u.contains('/') && !u.is_empty() {
            v.push(PathBuf::from(format!("/home/{u}/.cache/debuginfod_client")));
        }
    }
    v.dedup();
    v
}

impl Symbols {
    /// Names frames from the recorded files as they are on this machine, or under `root` (a
    /// copy of the recording machine's files: the recorded paths below it, its debug
    /// directories first).
    pub fn new(root: Option<&Path>) -> Symbols {
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Some(r) = root {
            dirs.push(r.join("usr/lib/debug"));
            dirs.push(r.join("lib/debug"));
        }
        dirs.push("/usr/lib/debug".into());
        dirs.push("/lib/debug".into());
        Symbols {
            symbolizer: Symbolizer::builder()
                .enable_code_info(true)
                .enable_inlined_fns(true)
                .set_debug_dirs(Some(dirs))
                .build(),
            root: root.map(Path::to_path_buf),
            caches: debuginfod_caches(),
            usable: HashMap::new(),
            loads: HashMap::new(),
            debuginfod: HashMap::new(),
            names: HashMap::new(),
            notes: Vec::new(),
        }
    }

    /// The debuginfod caches looked in (for tests and messages).
    pub fn set_debuginfod_caches(&mut self, caches: Vec<PathBuf>) {
        self.caches = caches;
        self.debuginfod.clear();
    }

    /// The file to read for `file` as recorded: under the root if given; None (and a note) when
    /// it is not at hand or its build id is not the recorded one.
    pub fn usable(&mut self, file: &str, build_id: Option<&str>) -> Option<PathBuf> {
        let key = (file.to_string(), build_id.unwrap_or("").to_string());
        if let Some(v) = self.usable.get(&key) {
            return v.clone();
        }
        let p = match &self.root {
            Some(r) => r.join(file.trim_start_matches('/')),
            None => PathBuf::from(file),
        };
        let v = match (blazesym::helper::read_elf_build_id(&p), build_id) {
            (Err(_), _) => {
                self.notes.push(format!("{} is not at hand: its frames are shown as file offsets", p.display()));
                None
            }
            (Ok(have), Some(want)) => {
                let have = have.map(|b| hex(&b));
                if have.as_deref() != Some(want) {
                    self.notes.push(format!(
                        "{} is not the recorded binary (build id {} here, {want} recorded): its frames are shown as file offsets",
                        p.display(),
                        have.as_deref().unwrap_or("none")
                    ));
                    None
                } else {
                    Some(p)
                }
            }
            (Ok(_), None) => Some(p),
        };
        self.usable.insert(key, v.clone());
        v
    }

    /// The names at file offset `off` of `file` (as recorded, with its build id), innermost
    /// first: the functions inlined there, then the function itself. `None` when the file is
    /// not at hand or no symbol covers the offset. The caller passes the address of the call
    /// for a return address (one byte before it).
    pub fn name(&mut self, file: &str, build_id: Option<&str>, off: u64) -> Option<Vec<FrameName>> {
        let p = self.usable(file, build_id)?;
        let key = (p.clone(), off);
        if let Some(v) = self.names.get(&key) {
            return v.clone();
        }
        let v = self.lookup(&p, build_id, off);
        self.names.insert(key, v.clone());
        v
    }

    fn lookup(&mut self, p: &Path, build_id: Option<&str>, off: u64) -> Option<Vec<FrameName>> {
        // A debug file from a debuginfod cache, read by virtual address.
        let from_cache = build_id.and_then(|b| self.debuginfod_file(b)).and_then(|dbg| {
            let va = self.vaddr(p, off)?;
            let mut src = Elf::new(dbg);
            src.debug_syms = true;
            one(self.symbolizer.symbolize(&Source::Elf(src), Input::VirtOffset(&[va])).ok()?)
        });
        let dwarf = from_cache.or_else(|| {
            let src = Elf::new(p);
            one(self.symbolizer.symbolize(&Source::Elf(src), Input::FileOffset(&[off])).ok()?)
        });
        // The symbol table alone (also when the debug information could not be read).
        let mut plain = Elf::new(p);
        plain.debug_syms = false;
        let elf = one(self.symbolizer.symbolize(&Source::Elf(plain), Input::FileOffset(&[off])).ok()?);
        let sym = match (dwarf, elf) {
            (Some(mut d), Some(e)) => {
                // The same function under two names: the exported one.
                if d.addr == e.addr && d.name != e.name {
                    d.name = e.name;
                }
                d
            }
            (Some(d), None) => d,
            (None, Some(e)) => e,
            (None, None) => return None,
        };
        Some(frames_of(sym))
    }

    fn debuginfod_file(&mut self, build_id: &str) -> Option<PathBuf> {
        if let Some(v) = self.debuginfod.get(build_id) {
            return v.clone();
        }
        let f = (build_id.len() >= 8 && build_id.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| self.caches.iter().map(|c| c.join(build_id).join("debuginfo")).find(|f| f.is_file()))
            .flatten();
        self.debuginfod.insert(build_id.to_string(), f.clone());
        f
    }

    fn vaddr(&mut self, p: &Path, off: u64) -> Option<u64> {
        let loads = self.loads.entry(p.to_path_buf()).or_insert_with(|| ElfInfo::read(p).ok().map(|i| i.loads));
        vaddr_of(loads.as_deref()?, off)
    }
}

fn one(v: Vec<Symbolized<'_>>) -> Option<Sym<'static>> {
    match v.into_iter().next()? {
        Symbolized::Sym(s) => Some(s.into_owned()),
        Symbolized::Unknown(_) => None,
    }
}

/// A symbol with its inlined calls as frames, innermost first. blazesym gives the function and
/// the calls inlined into it outermost first, each with the location of the address in it.
fn frames_of(s: Sym<'static>) -> Vec<FrameName> {
    let loc = |c: Option<&blazesym::symbolize::CodeInfo<'_>>| match c {
        Some(c) => (Some(c.to_path().to_string_lossy().into_owned()), c.line),
        None => (None, None),
    };
    let mut v = Vec::with_capacity(1 + s.inlined.len());
    let (file, line) = loc(s.code_info.as_deref());
    v.push(FrameName { function: s.name.to_string(), file, line, inlined: false });
    for i in s.inlined.iter() {
        let (file, line) = loc(i.code_info.as_ref());
        v.push(FrameName { function: i.name.to_string(), file, line, inlined: true });
    }
    v.reverse();
    v
}

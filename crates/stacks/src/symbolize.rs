//! Naming user frames: an offset in a binary to the function there, with the functions inlined
//! at that address and the source file and line where the debug information has them.
//!
//! [blazesym](https://github.com/libbpf/blazesym) reads the symbol tables (`.symtab`, and
//! `.dynsym` for stripped libraries) and the DWARF in the file itself, compressed or not, or in
//! its separate debug file when the caller found one ([`crate::debugfile`]; blazesym's own
//! search is off: the caller opens what it reads). Where the debug information and the symbol table name the same
//! function differently (glibc's `__GI___clock_nanosleep` for the exported `clock_nanosleep`),
//! the symbol table's name is shown: it is what `nm -D`, the headers and the documentation call
//! it.

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

/// Names user frames from binaries (see the module documentation); each answer is cached.
pub struct Symbols {
    symbolizer: Symbolizer,
    names: HashMap<(PathBuf, u64), Option<Vec<FrameName>>>,
    split: HashMap<(PathBuf, u64), Option<Vec<FrameName>>>,
    symtab: HashMap<(PathBuf, u64), Option<Vec<FrameName>>>,
}

impl Default for Symbols {
    fn default() -> Symbols {
        Symbols::new()
    }
}

impl Symbols {
    /// A namer reading only the binaries it is given.
    pub fn new() -> Symbols {
        Symbols {
            symbolizer: Symbolizer::builder()
                .enable_code_info(true)
                .enable_inlined_fns(true)
                .set_debug_dirs(Some(Vec::<PathBuf>::new()))
                .build(),
            names: HashMap::new(),
            split: HashMap::new(),
            symtab: HashMap::new(),
        }
    }

    /// The names at file offset `off` of the ELF file `path`, innermost first: the functions
    /// inlined there, then the function itself. `None` when no symbol covers the offset or the
    /// file cannot be read. The caller passes the address of the instruction (one byte before
    /// a return address).
    pub fn name(&mut self, path: &Path, off: u64) -> Option<Vec<FrameName>> {
        let key = (path.to_path_buf(), off);
        if let Some(v) = self.names.get(&key) {
            return v.clone();
        }
        let v = self.lookup(path, off);
        self.names.insert(key, v.clone());
        v
    }

    /// [`Symbols::name`] from the symbol tables of `path` alone: its DWARF (and the debug files
    /// it names, which blazesym would follow by their names) is not read.
    pub fn name_symtab(&mut self, path: &Path, off: u64) -> Option<Vec<FrameName>> {
        let key = (path.to_path_buf(), off);
        if let Some(v) = self.symtab.get(&key) {
            return v.clone();
        }
        let v = self.merge(path, off, None);
        self.symtab.insert(key, v.clone());
        v
    }

    /// [`Symbols::name`] for a binary whose symbols and DWARF are (also) in the separate debug
    /// file `debug`: `vaddr` is the address, as linked, of file offset `off` in the binary (the
    /// debug file holds no code to take offsets in). The binary's own symbol table still gives
    /// the exported names.
    pub fn name_split(&mut self, path: &Path, off: u64, debug: &Path, vaddr: u64) -> Option<Vec<FrameName>> {
        let key = (debug.join(path.strip_prefix("/").unwrap_or(path)), off);
        if let Some(v) = self.split.get(&key) {
            return v.clone();
        }
        // Its DWARF, else its symbol table (DWARF that needs a file the debug file names, as
        // dwz's alternate debug file, is not read); a debug file that cannot be read leaves the
        // binary's own names.
        let mut plain = Elf::new(debug);
        plain.debug_syms = false;
        let from_debug = [Elf::new(debug), plain]
            .into_iter()
            .find_map(|e| self.symbolizer.symbolize(&Source::Elf(e), Input::VirtOffset(&[vaddr])).ok().and_then(one));
        let v = match from_debug {
            Some(d) => self.merge(path, off, Some(d)),
            None => self.lookup(path, off),
        };
        self.split.insert(key, v.clone());
        v
    }

    fn lookup(&mut self, p: &Path, off: u64) -> Option<Vec<FrameName>> {
        let dwarf = one(self.symbolizer.symbolize(&Source::Elf(Elf::new(p)), Input::FileOffset(&[off])).ok()?);
        self.merge(p, off, dwarf)
    }

    /// `dwarf` (a symbol from debug information, if any) named as the binary `p`'s symbol table
    /// names the same function, or that table's symbol alone.
    fn merge(&mut self, p: &Path, off: u64, dwarf: Option<Sym<'static>>) -> Option<Vec<FrameName>> {
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

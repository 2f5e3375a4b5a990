//! Finding a binary's separate debug file: where Debian's `-dbg` and `-dbgsym` packages, Fedora's
//! `debuginfo` packages and `debuginfod` clients put the symbols and DWARF a stripped binary
//! leaves out (glibc's `start_thread`, every static function, file and line).
//!
//! Where gdb, perf and elfutils look, in this order:
//!
//! 1. by the binary's GNU build id: `DIR/.build-id/ab/cdef….debug` for each debug directory
//!    (`/usr/lib/debug` by default);
//! 2. in the `debuginfod` clients' cache on disk: `$DEBUGINFOD_CACHE_PATH`, else
//!    `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client`, as
//!    `BUILDID/debuginfo` (nothing is downloaded: `debuginfod-find debuginfo FILE` fills it);
//! 3. by the binary's `.gnu_debuglink` name: next to the binary, in its `.debug` directory, and
//!    under each debug directory at the binary's own directory.
//!
//! A binary is anyone's, and so is the name its debug link gives: a link name is used only when
//! it is one plain path component, and a file found by any route is used only when it has the
//! binary's build id (or, for a binary without one, the CRC-32 its debug link records). Opening
//! the candidates safely is the caller's business.

use object::read::elf::ElfFile64;
use object::read::ReadCache;
use object::Object;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::elf::{hex, loads_of, Load};

/// Where separate debug files are looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugSearch {
    /// Debug directories (each with its `.build-id` tree), as paths on the machine the binaries
    /// are read on (the caller resolves them under its `--binaries` directory if it has one).
    pub dirs: Vec<PathBuf>,
    /// `debuginfod` client caches (`BUILDID/debuginfo` inside).
    pub debuginfod: Vec<PathBuf>,
}

impl DebugSearch {
    /// `/usr/lib/debug` and the `debuginfod` cache of this user's environment.
    pub fn system() -> DebugSearch {
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let cache = env("DEBUGINFOD_CACHE_PATH")
            .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("debuginfod_client")))
            .or_else(|| env("HOME").map(|h| h.join(".cache/debuginfod_client")));
        DebugSearch { dirs: vec![PathBuf::from("/usr/lib/debug")], debuginfod: cache.into_iter().collect() }
    }

    /// The places to try, in order, for the binary recorded at `binary` (absolute) with GNU
    /// build id `build_id` and debug link `link` (see the module documentation).
    pub fn candidates(&self, binary: &Path, build_id: Option<&[u8]>, link: Option<&DebugLink>) -> Vec<Candidate> {
        let mut out = Vec::new();
        let recorded = |path: PathBuf| Candidate { path, cache: false };
        if let Some(id) = build_id.filter(|id| id.len() >= 2) {
            let h = hex(id);
            for d in &self.dirs {
                out.push(recorded(d.join(".build-id").join(&h[..2]).join(format!("{}.debug", &h[2..]))));
            }
            for c in &self.debuginfod {
                out.push(Candidate { path: c.join(&h).join("debuginfo"), cache: true });
            }
        }
        if let (Some(l), Some(dir)) = (link, binary.parent()) {
            out.push(recorded(dir.join(&l.name)));
            out.push(recorded(dir.join(".debug").join(&l.name)));
            let rel = dir.strip_prefix("/").unwrap_or(dir);
            for d in &self.dirs {
                out.push(recorded(d.join(rel).join(&l.name)));
            }
        }
        // A debug link naming the binary itself would find the binary, not its debug file.
        out.retain(|c| c.path != binary);
        out
    }
}

/// A place a debug file may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its path.
    pub path: PathBuf,
    /// In a `debuginfod` cache: a path on the machine reading the binaries, wherever they come
    /// from (the others are paths of the binaries' machine, like the binaries' own).
    pub cache: bool,
}

/// A binary's `.gnu_debuglink`: the debug file's name and the CRC-32 of its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugLink {
    /// One plain path component (others are not used).
    pub name: String,
    /// CRC-32 (the zlib polynomial) of the whole debug file.
    pub crc: u32,
}

/// What naming frames through a debug file needs of the binary: its loadable segments (to turn
/// a file offset in the binary into the address the debug file knows), its build id and its
/// debug link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BinaryInfo {
    /// The loadable segments.
    pub loads: Vec<Load>,
    /// The GNU build id.
    pub build_id: Option<Vec<u8>>,
    /// The debug link, when it names one plain file.
    pub link: Option<DebugLink>,
    /// The binary holds DWARF of its own (`.debug_info`): no debug file is needed.
    pub has_dwarf: bool,
}

impl BinaryInfo {
    /// Reads what it needs of the ELF file `f` (its headers, notes and small sections, not
    /// the whole file). An error when it is not a 64-bit ELF file.
    pub fn read(f: &File) -> Result<BinaryInfo, String> {
        let cache = ReadCache::new(f);
        let elf =
            ElfFile64::<object::Endianness, _>::parse(&cache).map_err(|e| format!("not a 64-bit ELF file: {e}"))?;
        let loads = loads_of(&elf);
        let build_id = elf.build_id().ok().flatten().map(<[u8]>::to_vec);
        let link = elf.gnu_debuglink().ok().flatten().and_then(|(name, crc)| {
            let name = std::str::from_utf8(name).ok()?;
            plain_component(name).then(|| DebugLink { name: name.to_string(), crc })
        });
        let has_dwarf = object::Object::section_by_name(&elf, ".debug_info").is_some_and(|s| {
            object::ObjectSection::size(&s) > 0
                && !matches!(object::ObjectSection::kind(&s), object::SectionKind::UninitializedData)
        });
        Ok(BinaryInfo { loads, build_id, link, has_dwarf })
    }

    /// Whether `f`, a candidate found for this binary, is its debug file: the same build id,
    /// or, for a binary without one, the CRC-32 of its debug link (`f` read whole, at most
    /// `max` bytes).
    pub fn is_debug_file(&self, f: &mut File, max: u64) -> bool {
        match &self.build_id {
            Some(id) => {
                let cache = ReadCache::new(&*f);
                let found = ElfFile64::<object::Endianness, _>::parse(&cache)
                    .ok()
                    .and_then(|e| e.build_id().ok().flatten().map(<[u8]>::to_vec));
                found.as_deref() == Some(id.as_slice())
            }
            None => self.link.as_ref().is_some_and(|l| crc32_of(f, max) == Some(l.crc)),
        }
    }
}

/// A name used as one path component: not empty, no `/`, not `.` or `..`, no NUL.
fn plain_component(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

/// CRC-32 of the whole file (from its start), `None` past `max` bytes or on a read error.
fn crc32_of(f: &mut File, max: u64) -> Option<u32> {
    f.seek(SeekFrom::Start(0)).ok()?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            return Some(h.finalize());
        }
        total += n as u64;
        if total > max {
            return None;
        }
        h.update(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_by_build_id_cache_and_link_in_order() {
        let s = DebugSearch {
            dirs: vec!["/usr/lib/debug".into()],
            debuginfod: vec!["/root/.cache/debuginfod_client".into()],
        };
        let link = DebugLink { name: "libfoo.so.debug".into(), crc: 1 };
        let c = s.candidates(Path::new("/usr/lib/libfoo.so"), Some(&[0xab, 0xcd, 0xef]), Some(&link));
        assert_eq!(c.iter().map(|c| c.cache).collect::<Vec<_>>(), [false, true, false, false, false]);
        let c: Vec<String> = c.iter().map(|c| c.path.display().to_string()).collect();
        assert_eq!(
            c,
            [
                "/usr/lib/debug/.build-id/ab/cdef.debug",
                "/root/.cache/debuginfod_client/abcdef/debuginfo",
                "/usr/lib/libfoo.so.debug",
                "/usr/lib/.debug/libfoo.so.debug",
                "/usr/lib/debug/usr/lib/libfoo.so.debug",
            ]
        );
        // No build id, no link: nowhere to look.
        assert!(s.candidates(Path::new("/bin/x"), None, None).is_empty());
        // A link naming the binary itself is not a candidate next to it.
        let me = DebugLink { name: "x".into(), crc: 0 };
        assert!(s.candidates(Path::new("/bin/x"), None, Some(&me)).iter().all(|c| c.path != Path::new("/bin/x")));
    }

    #[test]
    fn only_plain_link_names_are_used() {
        for bad in ["", ".", "..", "../../etc/shadow", "a/b", "/etc/passwd", "a\0b"] {
            assert!(!plain_component(bad), "{bad:?}");
        }
        assert!(plain_component("libc.so.6.debug"));
    }

    #[test]
    fn a_debug_file_is_known_by_its_build_id_or_its_crc() {
        let tmp = tempfile::tempdir().unwrap();
        let me = std::env::current_exe().unwrap();
        let info = BinaryInfo::read(&File::open(&me).unwrap()).unwrap();
        assert!(info.build_id.is_some() && info.loads.iter().any(|l| l.exec));
        // The binary has its own build id: it is its own "debug file", another file is not.
        assert!(info.is_debug_file(&mut File::open(&me).unwrap(), u64::MAX));
        let other = tmp.path().join("other");
        std::fs::write(&other, b"\x7fELF not really").unwrap();
        assert!(!info.is_debug_file(&mut File::open(&other).unwrap(), u64::MAX));
        // Without a build id, the link's CRC decides, within the size bound.
        let data = b"some debug file contents".to_vec();
        std::fs::write(&other, &data).unwrap();
        let crc = crc32fast::hash(&data);
        let mut no_id = BinaryInfo { link: Some(DebugLink { name: "other".into(), crc }), ..Default::default() };
        assert!(no_id.is_debug_file(&mut File::open(&other).unwrap(), 1 << 20));
        assert!(!no_id.is_debug_file(&mut File::open(&other).unwrap(), 4), "past the bound");
        no_id.link.as_mut().unwrap().crc ^= 1;
        assert!(!no_id.is_debug_file(&mut File::open(&other).unwrap(), 1 << 20));
    }
}

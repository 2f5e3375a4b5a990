//! An ELF file's loadable segments (file offsets to virtual addresses) and build id, parsed with
//! the `object` crate (for tests and tools that place a symbol's address in the file).

use object::read::elf::{ElfFile64, ProgramHeader};
use object::Object;
use std::path::Path;

/// A loadable segment (`PT_LOAD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Its offset in the file.
    pub offset: u64,
    /// Its bytes in the file.
    pub filesz: u64,
    /// Its virtual address as linked (svma).
    pub vaddr: u64,
    /// Executable (`PF_X`).
    pub exec: bool,
}

/// An ELF file's segments and build id.
#[derive(Debug, Clone, Default)]
pub struct ElfInfo {
    /// The loadable segments.
    pub loads: Vec<Load>,
    /// The GNU build id (`NT_GNU_BUILD_ID`).
    pub build_id: Option<Vec<u8>>,
}

impl ElfInfo {
    /// Reads `path` (64-bit ELF only).
    pub fn read(path: &Path) -> std::io::Result<ElfInfo> {
        let data = std::fs::read(path)?;
        Self::parse(&data).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    /// Parses the bytes of an ELF file.
    pub fn parse(data: &[u8]) -> Result<ElfInfo, String> {
        let f = ElfFile64::<object::Endianness>::parse(data).map_err(|e| format!("not a 64-bit ELF file: {e}"))?;
        let build_id = f.build_id().ok().flatten().map(<[u8]>::to_vec);
        Ok(ElfInfo { loads: loads_of(&f), build_id })
    }

    /// The virtual address (as linked) of file offset `off`, if a loadable segment holds it.
    pub fn vaddr_of(&self, off: u64) -> Option<u64> {
        vaddr_of(&self.loads, off)
    }
}

/// The loadable segments of a parsed ELF file.
pub(crate) fn loads_of<'data, R: object::ReadRef<'data>>(f: &ElfFile64<'data, object::Endianness, R>) -> Vec<Load> {
    let endian = f.endian();
    f.elf_program_headers()
        .iter()
        .filter(|ph| ph.p_type(endian) == object::elf::PT_LOAD)
        .map(|ph| Load {
            offset: ph.p_offset(endian),
            filesz: ph.p_filesz(endian),
            vaddr: ph.p_vaddr(endian),
            exec: ph.p_flags(endian).0 & object::elf::PF_X.0 != 0,
        })
        .collect()
}

/// The virtual address of file offset `off` in `loads`.
pub fn vaddr_of(loads: &[Load], off: u64) -> Option<u64> {
    loads.iter().find(|l| off >= l.offset && off < l.offset + l.filesz.max(1)).map(|l| l.vaddr + (off - l.offset))
}

/// Lower-case hex of a build id.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_has_loads_and_a_build_id() {
        let me = std::env::current_exe().unwrap();
        let info = ElfInfo::read(&me).unwrap();
        assert!(info.loads.iter().any(|l| l.exec), "{:?}", info.loads);
        assert!(info.build_id.is_some());
        // The first loadable segment maps offset 0 at its vaddr.
        let l = info.loads[0];
        assert_eq!(info.vaddr_of(l.offset), Some(l.vaddr));
        assert_eq!(vaddr_of(&info.loads, u64::MAX), None);
    }
}

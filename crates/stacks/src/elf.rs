//! What the stages need from an ELF file: its loadable segments (file offsets to virtual
//! addresses), its build id, and the sections unwinding reads. Parsed with the `object` crate;
//! compressed sections (`SHF_COMPRESSED`, zlib or zstd) are decompressed.

use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Object, ObjectSection};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

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

/// The parts of an ELF file the unwinder needs, read once per file.
#[derive(Debug, Clone, Default)]
pub struct UnwindSections {
    /// `.text`: its address range and bytes (prologue and epilogue analysis).
    pub text: Option<(Range<u64>, Arc<[u8]>)>,
    /// `.eh_frame`.
    pub eh_frame: Option<(Range<u64>, Arc<[u8]>)>,
    /// `.eh_frame_hdr` (the index of `.eh_frame`).
    pub eh_frame_hdr: Option<(Range<u64>, Arc<[u8]>)>,
    /// `.debug_frame` (uncompressed).
    pub debug_frame: Option<Arc<[u8]>>,
    /// `.got`'s address range.
    pub got: Option<Range<u64>>,
}

impl UnwindSections {
    /// True when the file has unwind tables of either kind.
    pub fn has_tables(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }
}

/// An ELF file's segments, build id and unwind sections.
#[derive(Debug, Clone, Default)]
pub struct ElfInfo {
    /// The loadable segments.
    pub loads: Vec<Load>,
    /// The GNU build id (`NT_GNU_BUILD_ID`).
    pub build_id: Option<Vec<u8>>,
    /// What unwinding needs.
    pub unwind: UnwindSections,
}

impl ElfInfo {
    /// Reads `path` (64-bit ELF only). `sections`: read the unwind sections too.
    pub fn read(path: &Path, sections: bool) -> std::io::Result<ElfInfo> {
        let data = std::fs::read(path)?;
        Self::parse(&data, sections).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    /// Parses the bytes of an ELF file.
    pub fn parse(data: &[u8], sections: bool) -> Result<ElfInfo, String> {
        let f = ElfFile64::<object::Endianness>::parse(data).map_err(|e| format!("not a 64-bit ELF file: {e}"))?;
        let endian = f.endian();
        let mut loads = Vec::new();
        for ph in f.elf_program_headers() {
            if ph.p_type(endian) == object::elf::PT_LOAD {
                loads.push(Load {
                    offset: ph.p_offset(endian),
                    filesz: ph.p_filesz(endian),
                    vaddr: ph.p_vaddr(endian),
                    exec: ph.p_flags(endian).0 & object::elf::PF_X.0 != 0,
                });
            }
        }
        let build_id = f.build_id().ok().flatten().map(<[u8]>::to_vec);
        let mut unwind = UnwindSections::default();
        if sections {
            let get = |name: &str| -> Option<(Range<u64>, Arc<[u8]>)> {
                let s = f.section_by_name(name)?;
                let data = s.uncompressed_data().ok()?;
                Some((s.address()..s.address() + s.size(), Arc::from(&*data)))
            };
            unwind.text = get(".text");
            unwind.eh_frame = get(".eh_frame");
            unwind.eh_frame_hdr = get(".eh_frame_hdr");
            unwind.debug_frame = get(".debug_frame").map(|(_, d)| d);
            unwind.got = f.section_by_name(".got").map(|s| s.address()..s.address() + s.size());
        }
        Ok(ElfInfo { loads, build_id, unwind })
    }

    /// The virtual address (as linked) of file offset `off`, if a loadable segment holds it.
    pub fn vaddr_of(&self, off: u64) -> Option<u64> {
        vaddr_of(&self.loads, off)
    }
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
    fn this_test_binary_has_loads_a_build_id_and_eh_frame() {
        let me = std::env::current_exe().unwrap();
        let info = ElfInfo::read(&me, true).unwrap();
        assert!(info.loads.iter().any(|l| l.exec), "{:?}", info.loads);
        assert!(info.unwind.eh_frame.is_some());
        // The first loadable segment maps offset 0 at its vaddr.
        let l = info.loads[0];
        assert_eq!(info.vaddr_of(l.offset), Some(l.vaddr));
        assert_eq!(vaddr_of(&info.loads, u64::MAX), None);
    }
}

//! Naming the user frames of latscope's stacks (`why --stacks`, `export --parquet`):
//!
//! - [`symbolize`]: an offset in a binary to the function there, with the functions inlined at
//!   it and source lines, from the binary's symbol tables and DWARF;
//! - [`debugfile`]: where a stripped binary's separate debug file is (by build id, in the
//!   `debuginfod` cache, by debug link), and whether a file found is it;
//! - [`elf`]: an ELF file's segments and build id;
//! - [`unwind`]: user stacks unwound from a copy of their top and the binaries' unwind tables.

#![warn(missing_docs)]

pub mod debugfile;
pub mod elf;
pub mod symbolize;
pub mod unwind;

pub use symbolize::{FrameName, Symbols};

/// The GNU build id of an ELF file, reading only its headers and notes (blazesym's).
pub use blazesym::helper::read_elf_build_id;

//! latscope's user stacks (`record --why --stacks`, `--profile`):
//!
//! - [`symbolize`]: a recorded frame (file, build id, offset) to the function there, with the
//!   functions inlined at it and source lines, from the binaries and their debug files;
//! - [`elf`]: what the other parts read from ELF files.

#![warn(missing_docs)]

pub mod elf;
pub mod symbolize;

pub use symbolize::{FrameName, Symbols};

//! The probes, by what they touch: the CPU and clocks, files, processes.

pub(crate) mod command;
pub(crate) mod file;
pub(crate) mod timing;

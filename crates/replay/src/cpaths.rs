//! The plan's paths as NUL-terminated strings in one buffer, so that the executor passes them
//! to the kernel without allocating.

use crate::plan::{PathTable, Plan};
use std::ffi::CStr;

/// Relative paths, their last components, parents and roots, by path id.
pub struct CPaths {
    blob: Vec<u8>,
    /// Start of each path's bytes in `blob`.
    off: Vec<u32>,
    /// Start of each path's last component in `blob`.
    base: Vec<u32>,
    parent: Vec<u32>,
    root: Vec<u16>,
    /// Literals (symlink targets), NUL-terminated.
    lit_blob: Vec<u8>,
    lit_off: Vec<u32>,
}

impl CPaths {
    /// Build from a plan (validated: no path holds a NUL byte).
    pub fn new(plan: &Plan) -> CPaths {
        let t: &PathTable = &plan.paths;
        let mut c = CPaths {
            blob: Vec::new(),
            off: Vec::with_capacity(t.len()),
            base: Vec::with_capacity(t.len()),
            parent: Vec::with_capacity(t.len()),
            root: Vec::with_capacity(t.len()),
            lit_blob: Vec::new(),
            lit_off: Vec::new(),
        };
        for e in &t.entries {
            let start = c.blob.len() as u32;
            c.off.push(start);
            let b = e.rel.rfind('/').map(|i| i + 1).unwrap_or(0);
            c.base.push(start + b as u32);
            c.blob.extend_from_slice(e.rel.as_bytes());
            c.blob.push(0);
            c.parent.push(e.parent);
            c.root.push(e.root);
        }
        for l in &plan.literals {
            c.lit_off.push(c.lit_blob.len() as u32);
            c.lit_blob.extend_from_slice(l.as_bytes());
            c.lit_blob.push(0);
        }
        c
    }

    fn cstr(blob: &[u8], start: usize) -> &CStr {
        let end = blob[start..].iter().position(|&b| b == 0).map(|p| start + p + 1).unwrap_or(blob.len());
        CStr::from_bytes_with_nul(&blob[start..end]).unwrap_or(c".")
    }

    /// The relative path of `id`.
    #[inline]
    pub fn rel(&self, id: u32) -> &CStr {
        Self::cstr(&self.blob, self.off[id as usize] as usize)
    }

    /// The last component of `id`.
    #[inline]
    pub fn base(&self, id: u32) -> &CStr {
        Self::cstr(&self.blob, self.base[id as usize] as usize)
    }

    /// The parent directory's id ([`NONE`]: the root).
    #[inline]
    pub fn parent(&self, id: u32) -> u32 {
        self.parent[id as usize]
    }

    /// The root index of `id`.
    #[inline]
    pub fn root(&self, id: u32) -> usize {
        self.root[id as usize] as usize
    }

    /// Literal `id`.
    #[inline]
    pub fn literal(&self, id: u32) -> &CStr {
        match self.lit_off.get(id as usize) {
            Some(&o) => Self::cstr(&self.lit_blob, o as usize),
            None => c".",
        }
    }
}

//! The trace's stack table: the stacks of calls recorded with attribution (`record --why`),
//! each stored once and referred to by id from the `kstack` and `ustack` columns.
//!
//! Kernel frames carry their symbol as resolved when recording (kernel addresses mean nothing
//! outside the boot that produced them). User frames are normalized when recording: the file
//! they are in, its build id and the offset in that file, so that they can be symbolized after
//! the process has exited, or on another machine with the same binaries.

use crate::bounds::{
    cut_opt, json_len, Truncation, MAX_ENTRY_JSON, MAX_FRAMES, MAX_NAME, MAX_PATH, MAX_STACKS, MAX_STACK_FRAMES,
    MAX_STACK_TABLE_BYTES, MAX_TEXT,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Whether a stack is a kernel or a user one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StackKind {
    /// Where a call blocked, in the kernel.
    Kernel,
    /// The user stack of the call, at its entry.
    User,
}

/// One frame, innermost first in [`StackEntry::frames`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// The address as captured (kernel: the kernel address; user: the virtual address in the
    /// process when recording).
    pub addr: u64,
    /// Kernel frames: `function+0xoff`, resolved from kallsyms when recording (absent if the
    /// address was in no symbol).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sym: Option<String>,
    /// User frames: the file mapped at `addr` (absent: not file-backed, e.g. JIT code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// User frames: the GNU build id of `file`, lower-case hex (absent: the file has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// User frames: the offset of `addr` in `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<u64>,
    /// User frames: `file` had been deleted (removed, or replaced by another file at its path)
    /// while the process still mapped it, what `/proc/PID/maps` writes as `PATH (deleted)`;
    /// `file` is the path it had.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

impl Frame {
    /// The file as the views name it: `file`, with ` (deleted)` after it for a deleted one.
    pub fn file_label(&self) -> Option<String> {
        self.file.as_ref().map(|f| if self.deleted { format!("{f} (deleted)") } else { f.clone() })
    }
}

/// One stack of the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackEntry {
    /// The id the `kstack` / `ustack` columns use (from 1; 0 there means no stack).
    pub id: u32,
    /// Kernel or user.
    pub kind: StackKind,
    /// The frames, innermost first (empty when the stack is missing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<Frame>,
    /// The capture stopped at its depth limit: outer frames may be cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Why there are no frames (the capture failed, the process exited before its addresses
    /// could be read, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
    /// Where and why the unwinding of a copied user stack stopped before the stack's end (the
    /// copy's end, a frame in no known mapping, no unwind information), when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

impl StackEntry {
    /// Keep the entry within its bounds ([`crate::bounds`]): at most
    /// [`crate::bounds::MAX_FRAMES`] frames (outer ones cut, the entry marked truncated), each
    /// name cut to its bound, and the whole line within [`crate::bounds::MAX_ENTRY_JSON`].
    pub fn bound(&mut self, t: &mut Truncation) {
        if self.frames.len() > MAX_FRAMES {
            self.frames.truncate(MAX_FRAMES);
            self.truncated = true;
            t.values += 1;
        }
        for f in &mut self.frames {
            cut_opt(&mut f.sym, MAX_TEXT, t);
            cut_opt(&mut f.file, MAX_PATH, t);
            cut_opt(&mut f.build_id, MAX_NAME, t);
        }
        cut_opt(&mut self.missing, MAX_TEXT, t);
        cut_opt(&mut self.cut, MAX_TEXT, t);
        // Escaped as JSON, names can take six bytes per byte: outer frames go until it fits.
        let mut len = json_len(self);
        if len > MAX_ENTRY_JSON {
            t.values += 1;
            self.truncated = true;
            while len > MAX_ENTRY_JSON {
                let Some(f) = self.frames.pop() else { break };
                len -= json_len(&f) + 1;
            }
        }
    }

    /// One JSON line of the table (as stored in the trace).
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// The stack table of a trace, gathered from its blocks.
///
/// Bounded whatever the trace says: at most [`crate::bounds::MAX_STACKS`] stacks,
/// [`crate::bounds::MAX_STACK_FRAMES`] frames and [`crate::bounds::MAX_STACK_TABLE_BYTES`] of
/// JSON lines; entries past a bound are left out (their calls show a missing stack) and counted
/// ([`StackTable::truncation`]), and each entry is kept within its own bounds
/// ([`StackEntry::bound`]). An id given twice keeps its first entry.
#[derive(Debug, Clone, Default)]
pub struct StackTable {
    stacks: HashMap<u32, StackEntry>,
    frames: usize,
    bytes: usize,
    truncated: Truncation,
}

impl StackTable {
    /// Add the entries of one block (JSON lines); an unreadable line is an error naming it.
    pub fn add_lines(&mut self, text: &str) -> Result<(), String> {
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            if self.stacks.len() >= MAX_STACKS || self.bytes + line.len() > MAX_STACK_TABLE_BYTES {
                self.truncated.entries += 1;
                continue;
            }
            let mut e: StackEntry =
                serde_json::from_str(line).map_err(|err| format!("stack table line {}: {err}", i + 1))?;
            if self.stacks.contains_key(&e.id) {
                continue;
            }
            e.bound(&mut self.truncated);
            if self.frames + e.frames.len() > MAX_STACK_FRAMES {
                self.truncated.entries += 1;
                continue;
            }
            self.frames += e.frames.len();
            self.bytes += line.len();
            e.frames.shrink_to_fit();
            self.stacks.insert(e.id, e);
        }
        Ok(())
    }
    /// What was left out or cut to keep the table within its bounds.
    pub fn truncation(&self) -> Truncation {
        self.truncated
    }
    /// The stack with this id (`None` for 0 or an id the table lacks).
    pub fn get(&self, id: u32) -> Option<&StackEntry> {
        self.stacks.get(&id)
    }
    /// Number of stacks.
    pub fn len(&self) -> usize {
        self.stacks.len()
    }
    /// True when the table is empty (a trace recorded without stacks).
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }
    /// Every stack, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &StackEntry> {
        self.stacks.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_roundtrip() {
        let k = StackEntry {
            id: 1,
            kind: StackKind::Kernel,
            frames: vec![Frame {
                addr: 0xffff_ffff_8100_0000,
                sym: Some("schedule+0x2d".into()),
                ..Default::default()
            }],
            truncated: false,
            missing: None,
            cut: None,
        };
        let u = StackEntry {
            id: 2,
            kind: StackKind::User,
            frames: vec![],
            truncated: false,
            missing: Some("gone".into()),
            cut: None,
        };
        let mut t = StackTable::default();
        t.add_lines(&(k.to_line() + &u.to_line())).unwrap();
        assert_eq!(t.get(1), Some(&k));
        assert_eq!(t.get(2), Some(&u));
        assert!(t.add_lines("{not json").unwrap_err().contains("line 1"));
    }
}

//! The stack and cgroup table entries blocks carry in their metadata, kept within what readers
//! accept whatever the recorded machine made of them.

use latscope_event::bounds::{Truncation, MAX_ENTRY_JSON, MAX_PATH};
use latscope_event::{CgroupInfo, StackEntry};

/// Most bytes of table entries (stacks and cgroups together) in one block's metadata: readers
/// accept 1 MiB of block metadata, and the block's other keys take a few KiB.
pub(crate) const MAX_BLOCK_TABLES: usize = 512 << 10;

/// A batch's new stack and cgroup table entries (JSON lines), each within its bounds, as parts of
/// at most [`MAX_BLOCK_TABLES`] bytes, `(stacks, cgroups)` each, in order: the last goes with the
/// batch's first block, the others in blocks of their own before it. Empty when there are none.
/// What was cut or left out (a line that is no entry) is counted in `t`.
pub(crate) fn split(stacks: &str, cgroups: &str, t: &mut Truncation) -> Vec<(String, String)> {
    if stacks.is_empty() && cgroups.is_empty() {
        return Vec::new();
    }
    // The recorder's entries are within their bounds already: a batch of them is passed as it is.
    if cgroups.is_empty() && stacks.len() <= MAX_ENTRY_JSON {
        return vec![(stacks.to_string(), String::new())];
    }
    let mut parts: Vec<(String, String)> = vec![Default::default()];
    let mut add = |line: &str, stack: bool| {
        let last = parts.last_mut().expect("one part at least");
        if last.0.len() + last.1.len() + line.len() + 1 > MAX_BLOCK_TABLES {
            parts.push(Default::default());
        }
        let last = parts.last_mut().expect("one part at least");
        let to = if stack { &mut last.0 } else { &mut last.1 };
        to.push_str(line);
        to.push('\n');
    };
    for line in stacks.lines().filter(|l| !l.trim().is_empty()) {
        if line.len() <= MAX_ENTRY_JSON {
            add(line, true);
            continue;
        }
        match serde_json::from_str::<StackEntry>(line) {
            Ok(mut e) => {
                e.bound(t);
                add(e.to_line().trim_end(), true);
            }
            Err(_) => t.entries += 1,
        }
    }
    // Cgroups are few (met during the recording): each is checked.
    for line in cgroups.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<CgroupInfo>(line) {
            Ok(mut c) => {
                let before = *t;
                c.bound(MAX_PATH, t);
                if *t == before {
                    add(line, false);
                } else if let Ok(j) = serde_json::to_string(&c) {
                    add(&j, false);
                }
            }
            Err(_) => t.entries += 1,
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{Frame, StackKind};

    #[test]
    fn entries_past_their_bounds_are_cut_and_parts_fit_a_block() {
        let mut t = Truncation::default();
        // An 80 MB container name, and enough big stacks for several blocks.
        let c = CgroupInfo { id: 7, path: "/x".into(), container_name: "n".repeat(80 << 20), ..Default::default() };
        let frame = Frame { addr: 1, file: Some("/lib/".to_string() + &"f".repeat(4000)), ..Default::default() };
        let mut stacks = String::new();
        for id in 1..=60 {
            let e = StackEntry {
                id,
                kind: StackKind::User,
                frames: vec![frame.clone(); 64],
                truncated: false,
                missing: None,
                cut: None,
            };
            stacks.push_str(&e.to_line());
        }
        let parts = split(&stacks, &(serde_json::to_string(&c).unwrap() + "\n"), &mut t);
        assert!(parts.len() > 1, "{}", parts.len());
        assert!(parts.iter().all(|(s, c)| s.len() + c.len() <= MAX_BLOCK_TABLES));
        let n: usize = parts.iter().map(|(s, _)| s.lines().count()).sum();
        assert_eq!(n, 60);
        let (_, cg) = parts.last().unwrap();
        let back: CgroupInfo = serde_json::from_str(cg.trim_end()).unwrap();
        assert!(back.container_name.len() <= latscope_event::bounds::MAX_NAME, "{}", back.container_name.len());
        assert!(latscope_event::bounds::is_cut(&back.container_name));
        assert_eq!(t.values, 61, "60 stacks cut, 1 cgroup");
    }
}

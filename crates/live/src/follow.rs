//! The processes below the followed ones at the start, from /proc: a service's workers forked
//! before the probes attached are followed from the beginning, like those it forks later.

use std::collections::{HashMap, HashSet};

/// The parent of every live process: pid -> ppid. Zombies (and dead tasks) are left out: their
/// exit has passed, and the kernel would never take them out of the filter.
fn parents() -> HashMap<u32, u32> {
    let mut m = HashMap::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return m };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        // Regular files only, a bounded size (latscope_trace::safe_read): a stat line is short.
        let Ok(stat) = latscope_trace::safe_read::read_file(format!("/proc/{pid}/stat"), 4096) else { continue };
        let stat = stat.text();
        if let Some((state, ppid)) = parse_stat(&stat) {
            if state != 'Z' && state != 'X' {
                m.insert(pid, ppid);
            }
        }
    }
    m
}

/// State and parent pid from /proc/PID/stat (`pid (comm) S ppid ...`; the command name may hold
/// spaces and parentheses, so the fields are counted from the last `)`).
fn parse_stat(stat: &str) -> Option<(char, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace();
    let state = f.next()?.chars().next()?;
    Some((state, f.next()?.parse().ok()?))
}

/// The live processes whose ancestry reaches one of `roots` (not the roots themselves).
fn descendants_in(tree: &HashMap<u32, u32>, roots: &HashSet<u32>) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, &ppid) in tree {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut stack: Vec<u32> = roots.iter().copied().collect();
    let mut seen: HashSet<u32> = roots.clone();
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if seen.insert(c) {
                out.push(c);
                stack.push(c);
            }
        }
    }
    out.sort_unstable();
    out
}

/// Adds the descendants of `followed` to the kernel's filter with `add` until a walk of /proc
/// finds none missing. The probes follow forks from the moment they attach, but a descendant
/// not yet in the filter forks unseen: the walk after it was added finds that child (the kernel
/// makes a child visible in /proc before its fork tracepoint runs). Returns the pids added.
pub(crate) fn add_descendants<E>(followed: &[u32], mut add: impl FnMut(u32) -> Result<(), E>) -> Result<Vec<u32>, E> {
    let mut known: HashSet<u32> = followed.iter().copied().collect();
    let mut added = Vec::new();
    loop {
        let new: Vec<u32> = descendants_in(&parents(), &known).into_iter().filter(|p| !known.contains(p)).collect();
        if new.is_empty() {
            return Ok(added);
        }
        for p in new {
            add(p)?;
            known.insert(p);
            added.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        assert_eq!(parse_stat("12 (a) b) S 7 12 12 0"), Some(('S', 7)));
        assert_eq!(parse_stat("5 (sh) Z 1 5"), Some(('Z', 1)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn descendants_reach_grandchildren_and_not_siblings() {
        let tree: HashMap<u32, u32> = [(10, 1), (11, 10), (12, 11), (13, 1), (14, 12), (20, 13)].into();
        let roots: HashSet<u32> = [10].into();
        assert_eq!(descendants_in(&tree, &roots), vec![11, 12, 14]);
        assert!(descendants_in(&tree, &[99].into()).is_empty());
    }

    #[test]
    fn this_process_s_children_are_found_in_proc() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let me = std::process::id();
        let mut got = Vec::new();
        add_descendants::<()>(&[me], |p| {
            got.push(p);
            Ok(())
        })
        .unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(got.contains(&child.id()), "{got:?} lacks {}", child.id());
    }
}

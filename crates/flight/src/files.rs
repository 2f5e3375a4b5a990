//! The files a flight recorder or a rotating capture writes in its directory: their names (by
//! time), listing them, deleting the oldest, and the space left.

use std::path::{Path, PathBuf};

/// Prefix of a flight recorder's dumps: `flight-20261122T223013.250Z-slowpg.lst`.
pub const DUMP_PREFIX: &str = "flight-";
/// Prefix of a rotating capture's files: `trace-20261122T223013.250Z.lst`.
pub const ROTATE_PREFIX: &str = "trace-";

/// `20261122T223013.250Z` for wall-clock ns since the epoch.
pub fn stamp(wall_ns: i64) -> String {
    let secs = wall_ns.div_euclid(1_000_000_000);
    let ms = (wall_ns.rem_euclid(1_000_000_000) / 1_000_000) as u32;
    chrono::DateTime::from_timestamp(secs, ms * 1_000_000)
        .map(|t| t.format("%Y%m%dT%H%M%S%.3fZ").to_string())
        .unwrap_or_else(|| format!("{secs}"))
}

/// Whether `name` is one of the files `prefix` names (`PREFIX` + a stamp, then `-...` or
/// nothing, then `.lst`).
pub fn is_ours(name: &str, prefix: &str) -> bool {
    let Some(rest) = name.strip_prefix(prefix) else { return false };
    let Some(rest) = rest.strip_suffix(".lst") else { return false };
    let b = rest.as_bytes();
    // 20261122T223013.250Z
    b.len() >= 20
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'.'
        && b[16..19].iter().all(u8::is_ascii_digit)
        && b[19] == b'Z'
        && (b.len() == 20 || b[20] == b'-')
}

/// One of our files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its path.
    pub path: PathBuf,
    /// Its size, bytes.
    pub bytes: u64,
}

/// Our files in `dir` (regular files only: a symlink with our name is not ours), oldest first
/// (names sort by time).
pub fn list(dir: &Path, prefix: &str) -> Vec<Listed> {
    let mut v: Vec<Listed> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if !is_ours(&name, prefix) {
                return None;
            }
            let md = e.path().symlink_metadata().ok()?;
            md.is_file().then(|| Listed { path: e.path(), bytes: md.len() })
        })
        .collect();
    // By the name without `.lst`: a second file begun within the same millisecond (`NAME-2.lst`)
    // sorts after the first (`NAME.lst`; '-' sorts before '.').
    v.sort_by_cached_key(|l| l.path.with_extension(""));
    v
}

/// A new name in `dir` for `prefix` at `wall_ns`, with `suffix` (`-slowpg`): none of that name
/// exists yet (`-2`, `-3`, ... appended if needed).
pub fn new_name(dir: &Path, prefix: &str, wall_ns: i64, suffix: &str) -> PathBuf {
    let base = format!("{prefix}{}{suffix}", stamp(wall_ns));
    let mut p = dir.join(format!("{base}.lst"));
    let mut n = 2;
    while p.symlink_metadata().is_ok() {
        p = dir.join(format!("{base}-{n}.lst"));
        n += 1;
    }
    p
}

/// Bytes free for an unprivileged writer on the file system of `dir` (`None`: unknown).
pub fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a zeroed statvfs to fill.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Whether an error is the file system being full (or a quota reached).
pub fn is_full(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = cur {
        if let Some(io) = x.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) {
                return true;
            }
        }
        cur = x.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_time_and_only_ours_are_listed() {
        let t = 1_795_000_000_123_456_789i64;
        assert_eq!(stamp(t), "20261118T110640.123Z");
        assert!(is_ours("flight-20261019T091320.123Z-slowpg.lst", DUMP_PREFIX));
        assert!(is_ours("trace-20261019T091320.123Z.lst", ROTATE_PREFIX));
        for not in
            ["flight-2026.lst", "flight-20261019T091320.123Z-x.lst.old", "trace-20261019T091320.123Zx.lst", "x.lst"]
        {
            assert!(!is_ours(not, DUMP_PREFIX) && !is_ours(not, ROTATE_PREFIX), "{not}");
        }
        let dir = tempfile::tempdir().unwrap();
        for n in ["flight-20261019T091321.000Z-b.lst", "flight-20261019T091320.000Z-a.lst", "other.lst"] {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("flight-20261019T091319.000Z-c.lst")).unwrap();
        let l = list(dir.path(), DUMP_PREFIX);
        let names: Vec<String> = l.iter().map(|x| x.path.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["flight-20261019T091320.000Z-a.lst", "flight-20261019T091321.000Z-b.lst"]);
        let n = new_name(dir.path(), DUMP_PREFIX, 1_795_000_000_000_000_000 + 1_000_000_000 * 60, "-a");
        assert!(!n.exists());
        // Two files begun in the same millisecond: the second is newer.
        let (a, b) = (new_name(dir.path(), ROTATE_PREFIX, t, ""), dir.path().join("trace-20261118T110640.123Z.lst"));
        assert_eq!(a, b);
        std::fs::write(&a, b"x").unwrap();
        let second = new_name(dir.path(), ROTATE_PREFIX, t, "");
        std::fs::write(&second, b"x").unwrap();
        let l: Vec<PathBuf> = list(dir.path(), ROTATE_PREFIX).into_iter().map(|x| x.path).collect();
        assert_eq!(l, [a, second]);
        assert!(free_bytes(dir.path()).is_some_and(|b| b > 0));
    }
}

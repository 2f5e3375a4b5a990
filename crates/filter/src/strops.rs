//! String operators: substring search, glob and path-prefix matching, without allocating.

/// Does `hay` contain `needle`?
#[inline]
pub(crate) fn contains(hay: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else { return true };
    if hay.len() < needle.len() {
        return false;
    }
    let last_start = hay.len() - needle.len();
    let mut i = 0;
    while i <= last_start {
        match hay[i..=last_start].iter().position(|&b| b == first) {
            None => return false,
            Some(off) => {
                let s = i + off;
                if &hay[s + 1..s + needle.len()] == rest {
                    return true;
                }
                i = s + 1;
            }
        }
    }
    false
}

/// Does `hay` contain `lower_needle` (already lower-case), ignoring ASCII case?
#[inline]
pub(crate) fn icontains(hay: &[u8], lower_needle: &[u8]) -> bool {
    if lower_needle.is_empty() {
        return true;
    }
    hay.windows(lower_needle.len()).any(|w| w.iter().zip(lower_needle).all(|(a, b)| a.to_ascii_lowercase() == *b))
}

/// Is `value` the directory `dir` or under it? `dir` has no trailing slash; the root is "".
#[inline]
pub(crate) fn under(value: &[u8], dir: &[u8]) -> bool {
    value.starts_with(dir) && (value.len() == dir.len() && !dir.is_empty() || value.get(dir.len()) == Some(&b'/'))
}

/// `pmatch`: is `value` the directory `dir` or under it, where each component of `dir` may be a
/// glob (`*`, `?`, `[...]`) matching one component of `value` (libsinsp's path prefix search:
/// `/opt/*/subdir` takes `/opt/dir/subdir/file`)? `dir` is normalized ([`normalize_dir`]).
#[inline]
pub(crate) fn pmatch(value: &[u8], dir: &[u8]) -> bool {
    if !dir.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
        return under(value, dir);
    }
    let mut v = value.split(|&b| b == b'/');
    for p in dir.split(|&b| b == b'/') {
        match v.next() {
            Some(c) if glob(p, c) => {}
            _ => return false,
        }
    }
    true
}

/// A `pmatch` directory as stored: trailing slashes removed (so `/` becomes "").
pub(crate) fn normalize_dir(d: &str) -> Vec<u8> {
    d.trim_end_matches('/').as_bytes().to_vec()
}

/// Length of the UTF-8 sequence starting with byte `b` (1 for stray continuation bytes).
#[inline]
fn char_len(b: u8) -> usize {
    match b {
        0xf0..=0xff => 4,
        0xe0..=0xef => 3,
        0xc0..=0xdf => 2,
        _ => 1,
    }
}

/// The char at byte `i` of `s` (U+FFFD when not valid UTF-8) and its length.
#[inline]
fn char_at(s: &[u8], i: usize) -> (char, usize) {
    let n = char_len(s[i]).min(s.len() - i);
    match std::str::from_utf8(&s[i..i + n]).ok().and_then(|t| t.chars().next()) {
        Some(c) => (c, n),
        None => ('\u{fffd}', 1),
    }
}

/// Match a `[...]` class at `pat[p]` (the `[`) against char `c`. Returns whether it matched and
/// the index after the class, or `None` if the class is not closed (then `[` is literal).
fn class(pat: &[u8], p: usize, c: char) -> Option<(bool, usize)> {
    let mut i = p + 1;
    let negate = matches!(pat.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let &b = pat.get(i)?;
        if b == b']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        let (lo, n) = char_at(pat, i);
        i += n;
        if pat.get(i) == Some(&b'-') && pat.get(i + 1).is_some_and(|&x| x != b']') {
            let (hi, n2) = char_at(pat, i + 1);
            i += 1 + n2;
            matched |= lo <= c && c <= hi;
        } else {
            matched |= lo == c;
        }
    }
}

/// Shell-style glob: `*` any run (including `/`), `?` one character, `[abc]`, `[a-z]`, `[!x]`,
/// and `\` to quote the next character.
pub(crate) fn glob(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if let Some(&pc) = pat.get(p) {
            match pc {
                b'*' => {
                    star = Some((p, i));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += char_at(s, i).1;
                    continue;
                }
                b'[' => {
                    let (c, n) = char_at(s, i);
                    match class(pat, p, c) {
                        Some((true, np)) => {
                            p = np;
                            i += n;
                            continue;
                        }
                        Some((false, _)) => {}
                        None if s[i] == b'[' => {
                            p += 1;
                            i += 1;
                            continue;
                        }
                        None => {}
                    }
                }
                b'\\' if p + 1 < pat.len() => {
                    let (pc2, n) = char_at(pat, p + 1);
                    let (c, m) = char_at(s, i);
                    if pc2 == c && n == m {
                        p += 1 + n;
                        i += m;
                        continue;
                    }
                }
                _ => {
                    if pc == s[i] {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
            }
        }
        // Mismatch: let the last `*` swallow one more character.
        match star {
            Some((sp, si)) => {
                let next = si + char_at(s, si).1;
                star = Some((sp, next));
                p = sp + 1;
                i = next;
            }
            None => return false,
        }
    }
    pat[p.min(pat.len())..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substring() {
        assert!(contains(b"/mnt/data", b"/mnt"));
        assert!(contains(b"abcabd", b"abd"));
        assert!(!contains(b"abc", b"abcd"));
        assert!(contains(b"x", b""));
        assert!(icontains(b"HeLLo", b"ll"));
        assert!(!icontains(b"HeLLo", b"lo!"));
    }

    #[test]
    fn pmatch() {
        let d = normalize_dir("/etc/");
        assert!(under(b"/etc", &d));
        assert!(under(b"/etc/passwd", &d));
        assert!(!under(b"/etcx", &d));
        let root = normalize_dir("/");
        assert!(under(b"/anything", &root));
        assert!(!under(b"relative", &root));
        assert!(!under(b"", &root));
    }

    #[test]
    fn globs() {
        let g = |p: &str, s: &str| glob(p.as_bytes(), s.as_bytes());
        assert!(g("*.log", "/var/log/x.log"));
        assert!(!g("*.log", "/var/log/x.log1"));
        assert!(g("/var/*/x?log", "/var/log/x.log"));
        assert!(g("a*b*c", "aXXbYYc"));
        assert!(!g("a*b*c", "aXXbYY"));
        assert!(g("[a-c]x", "bx"));
        assert!(!g("[!a-c]x", "bx"));
        assert!(g("[^a-c]x", "dx"));
        assert!(g("[]]", "]"));
        assert!(g("[", "["));
        assert!(g("a[", "a["));
        assert!(g("\\*", "*"));
        assert!(!g("\\*", "a"));
        assert!(g("?", "é"));
        assert!(g("*é", "aé"));
        assert!(g("[é]", "é"));
        assert!(g("", ""));
        assert!(!g("", "a"));
        assert!(g("**", ""));
        assert!(g("h*d", "httpd"));
        assert!(!g("x", ""));
    }
}

//! Text for terminals: names that come from the traced system are escaped before they are shown.
//!
//! Process names, paths, command lines and host names are chosen by whoever runs on the traced
//! machine. Written to a terminal as they are, an ESC could move the cursor, retitle the window or
//! hide lines, and a newline could forge an output line. Every text view passes such strings
//! through [`clean`], which writes control characters as escapes, as `ls -b` and sysdig do:
//! `\n`, `\r`, `\t`, `\x1b` (other C0 characters and DEL likewise), `\u{85}` for C1 controls and
//! for the Unicode bidirectional controls (which can reorder what a line appears to say): the rule
//! of [`latscope_event::escape`], which every output format starts from. Folded stacks, SVG and
//! JSON add their own syntax's escapes ([`crate::stacks::folded_frame`], [`crate::svg::esc`],
//! `serde_json`).

use std::borrow::Cow;

/// `s` with every control character escaped ([`latscope_event::escape::escape_controls`]);
/// borrowed when there is none (the common case).
pub fn clean(s: &str) -> Cow<'_, str> {
    latscope_event::escape::escape_controls(s)
}

/// Rows of cells as aligned columns: each column as wide as its widest cell (in characters),
/// left-aligned unless `right[c]`, separated by `gap` spaces, lines indented by `indent`, trailing
/// spaces trimmed. Cells should be [`clean`] already.
pub fn table(rows: &[Vec<String>], right: &[bool], indent: usize, gap: usize) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> =
        (0..cols).map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in rows {
        let mut line = " ".repeat(indent);
        for (c, cell) in r.iter().enumerate() {
            if c > 0 {
                line.push_str(&" ".repeat(gap));
            }
            let pad = widths[c].saturating_sub(cell.chars().count());
            if right.get(c).copied().unwrap_or(false) {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `n` and `word`, plural unless `n` is 1: `1 event`, `0 events`, `3 events`.
pub fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// A count with an SI suffix and no trailing zeros: `950`, `1k`, `12.5k`, `10k`, `2M`.
pub fn short_count(v: f64) -> String {
    crate::svg::trim_zeros(&latscope_event::units::fmt_count(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align() {
        let rows = vec![
            vec!["NAME".to_string(), "COUNT".into()],
            vec!["vda".into(), "12".into()],
            vec!["nvme0n1".into(), "12345".into()],
        ];
        assert_eq!(table(&rows, &[false, true], 2, 2), "  NAME     COUNT\n  vda         12\n  nvme0n1  12345\n");
    }

    #[test]
    fn counts() {
        assert_eq!(plural(1, "event"), "1 event");
        assert_eq!(plural(0, "event"), "0 events");
        assert_eq!(short_count(1000.0), "1k");
        assert_eq!(short_count(10_000.0), "10k");
        assert_eq!(short_count(12_500.0), "12.5k");
        assert_eq!(short_count(950.0), "950");
        assert_eq!(short_count(2_000_000.0), "2M");
    }

    #[test]
    fn control_characters_are_escaped_and_nothing_else() {
        assert!(matches!(clean("/usr/lib/x86_64-linux-gnu/libc.so.6 ü → 日本"), Cow::Borrowed(_)));
        assert_eq!(clean("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(clean("evil\nfake line\r\t"), "evil\\nfake line\\r\\t");
        assert_eq!(clean("\0\x07\x7f"), "\\x00\\x07\\x7f");
        assert_eq!(clean("c1\u{85}\u{9b}31m"), "c1\\u{85}\\u{9b}31m");
        assert_eq!(clean("abc\u{202e}gpj.exe"), "abc\\u{202e}gpj.exe");
        // Every code point below 0x100 and the bidi range: escapes contain no control character.
        for u in (0u32..0x100).chain(0x2000..0x2100) {
            let c = char::from_u32(u).unwrap();
            let out = clean(&c.to_string()).into_owned();
            assert!(!out.chars().any(latscope_event::escape::is_control), "U+{u:04X} -> {out:?}");
            assert_eq!(out == c.to_string(), !latscope_event::escape::is_control(c), "U+{u:04X}");
        }
    }
}

//! Names from the traced system, made safe to show.
//!
//! Process names, paths, command lines, container names and library names are chosen by whoever
//! runs on the traced machine. Written as they are, an ESC could move a terminal's cursor or
//! retitle its window, a newline could forge an output line, a bidirectional override could
//! reorder what a line appears to say. [`escape_controls`] is the one rule every output format
//! starts from: control characters become visible escapes, as `ls -b` and sysdig write them
//! (`\n`, `\r`, `\t`, `\x1b` for the other C0 characters and DEL, `\u{85}` for C1 controls and the
//! bidirectional controls). Each format adds what its own syntax needs on top: folded stacks
//! (`latscope_view::stacks`), XML (`latscope_view::svg::esc`), Prometheus label values and
//! Graphite paths (`latscope_export`); JSON keeps the exact value (serde escapes C0 characters)
//! with the others written as `\u` escapes ([`json_ascii_controls`]).

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is written as an escape: C0 controls, DEL, C1 controls, the bidirectional
/// embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), the implicit direction
/// marks (U+200E, U+200F, U+061C), the line and paragraph separators (U+2028, U+2029) and the
/// two code points XML forbids (U+FFFE, U+FFFF).
pub fn is_control(c: char) -> bool {
    let u = c as u32;
    u < 0x20
        || (0x7f..=0x9f).contains(&u)
        || (0x202a..=0x202e).contains(&u)
        || (0x2066..=0x2069).contains(&u)
        || matches!(u, 0x200e | 0x200f | 0x061c | 0x2028 | 0x2029 | 0xfffe | 0xffff)
}

/// Whether `s` may hold a character [`is_control`] escapes: every such character's UTF-8
/// encoding starts with a byte below 0x20, 0x7f, 0xc2 (C1), 0xd8 (U+061C), 0xe2 (U+200E..U+2069)
/// or 0xef (U+FFFE, U+FFFF). A byte scan finds the clean strings (the common case) without
/// decoding them.
#[inline]
fn may_hold_control(s: &str) -> bool {
    s.bytes().any(|b| b < 0x20 || matches!(b, 0x7f | 0xc2 | 0xd8 | 0xe2 | 0xef))
}

/// `s` with every control character ([`is_control`]) written as an escape: `\n`, `\r`, `\t`,
/// `\xHH` for the other C0 characters and DEL, `\u{H}` for the rest. Borrowed when there is none.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !may_hold_control(s) || !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

/// Push `c`, as an escape when it is a control character.
pub fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if is_control(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    }
}

/// JSON text with the control characters serde writes raw (DEL, C1, the bidirectional and
/// separator characters of [`is_control`]) written as `\uXXXX` escapes: the same JSON value,
/// which no terminal acts on when the text is shown as it is. Such characters only occur inside
/// JSON strings, where a `\u` escape means the character itself.
pub fn json_ascii_controls(json: String) -> String {
    // C0 characters are escaped by serde inside strings; outside them they are the document's
    // own whitespace (pretty printing's newlines), left as they are.
    let raw = |c: char| c as u32 >= 0x7f && is_control(c);
    if !json.bytes().any(|b| matches!(b, 0x7f | 0xc2 | 0xd8 | 0xe2 | 0xef)) || !json.chars().any(raw) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if raw(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_nothing_else() {
        assert!(matches!(escape_controls("/usr/lib/x86_64-linux-gnu/libc.so.6 ü → 日本 ½ ï"), Cow::Borrowed(_)));
        assert_eq!(escape_controls("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(escape_controls("evil\nfake line\r\t"), "evil\\nfake line\\r\\t");
        assert_eq!(escape_controls("\0\x07\x7f"), "\\x00\\x07\\x7f");
        assert_eq!(escape_controls("c1\u{85}\u{9b}31m"), "c1\\u{85}\\u{9b}31m");
        assert_eq!(escape_controls("abc\u{202e}gpj.exe"), "abc\\u{202e}gpj.exe");
        assert_eq!(escape_controls("a\u{2028}b\u{fffe}"), "a\\u{2028}b\\u{fffe}");
        // Every code point of the ranges that hold controls: escapes contain no control character.
        for u in (0u32..0x800).chain(0x2000..0x2100).chain(0xfff0..0x10000) {
            let Some(c) = char::from_u32(u) else { continue };
            let out = escape_controls(&c.to_string()).into_owned();
            assert!(!out.chars().any(is_control), "U+{u:04X} -> {out:?}");
            assert_eq!(out == c.to_string(), !is_control(c), "U+{u:04X}");
        }
    }

    #[test]
    fn json_keeps_the_value_and_shows_no_control() {
        let v = "lib/\x1b[31mEVIL\u{9b}\u{202e}\u{7f}.so";
        let j = json_ascii_controls(serde_json::to_string(v).unwrap());
        assert!(!j.chars().any(is_control), "{j}");
        assert!(j.contains("\\u009b") && j.contains("\\u202e") && j.contains("\\u001b"), "{j}");
        assert_eq!(serde_json::from_str::<String>(&j).unwrap(), v);
        let plain = serde_json::to_string("plain ü").unwrap();
        assert_eq!(json_ascii_controls(plain.clone()), plain);
        // Pretty-printed: its newlines and indentation stay.
        let pretty = serde_json::to_string_pretty(&serde_json::json!({"a": v, "b": [1]})).unwrap();
        let out = json_ascii_controls(pretty.clone());
        assert_eq!(out.lines().count(), pretty.lines().count());
        assert_eq!(serde_json::from_str::<serde_json::Value>(&out).unwrap()["a"], v);
    }
}

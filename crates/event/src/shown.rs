//! Names from the machine (paths, cgroup names, command names) as messages may print them:
//! anyone who can name a file or a cgroup chooses its bytes, and a terminal obeys the escape
//! sequences among them.

use std::borrow::Cow;

/// `s` with what a terminal would act on escaped as Rust escapes it (`\u{1b}`, `\u{7}`, `\n`,
/// `\r`): control characters, and the format characters that reorder the text around them
/// (bidi embeddings, overrides and isolates, the direction marks). The rest is unchanged.
pub fn escaped(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if needs_escape(c) {
            o.extend(c.escape_default());
        } else {
            o.push(c);
        }
    }
    Cow::Owned(o)
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_bidi_controls_are_escaped_the_rest_kept() {
        assert!(matches!(escaped("/system.slice/nginx.service"), Cow::Borrowed(_)));
        assert_eq!(escaped("a\u{1b}[31mb\u{7}\n"), "a\\u{1b}[31mb\\u{7}\\n");
        assert_eq!(escaped("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(escaped("été/日本"), "été/日本");
    }
}

//! Filter errors that point at the offending place in the expression.

use std::fmt;

/// A filter that could not be parsed or type-checked.
///
/// [`Display`](fmt::Display) prints three lines: the message, the expression, and a caret line
/// under the offending part:
///
/// ```text
/// unknown field 'proc.nme' at column 1; did you mean proc.name?
///   proc.nme=httpd
///   ^^^^^^^^
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    message: String,
    expr: String,
    /// Byte range of the offending text in `expr`.
    start: usize,
    end: usize,
}

impl FilterError {
    pub(crate) fn new(message: impl Into<String>, expr: &str, start: usize, end: usize) -> Self {
        let start = clamp_to_boundary(expr, start.min(expr.len()));
        let end = clamp_to_boundary(expr, end.clamp(start, expr.len()));
        Self { message: message.into(), expr: expr.to_string(), start, end }
    }

    /// The one-line message (without the expression and caret lines).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// 1-based column (in characters) where the offending text starts.
    pub fn column(&self) -> usize {
        column_of(&self.expr, self.start)
    }

    /// The expression the error is about.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// Where the offending text is in [`FilterError::expr`], in characters (not bytes): the
    /// 0-based index of its first character and how many characters it spans (at least 1), so
    /// that a caret can be drawn under it by any program that counts characters.
    pub fn char_span(&self) -> (usize, usize) {
        let pad = self.expr[..self.start].chars().count();
        (pad, self.expr[self.start..self.end].chars().count().max(1))
    }
}

/// Largest char boundary at or before `i`.
fn clamp_to_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// 1-based character column of byte offset `byte` in `s`.
pub(crate) fn column_of(s: &str, byte: usize) -> usize {
    let byte = clamp_to_boundary(s, byte.min(s.len()));
    s[..byte].chars().count() + 1
}

/// Characters of the expression shown around the error, and of the message line: a huge
/// filter (or field name) is echoed as a window with `…`, not in full.
const MAX_SHOWN: usize = 120;
const MAX_MESSAGE: usize = 240;

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Control characters (tabs, newlines, escapes) would break the caret alignment or drive
        // the terminal: spaces in the expression line, escaped in the message.
        let chars: Vec<char> = self.expr.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        let (pad, width) = self.char_span();
        let (from, to) = if chars.len() <= MAX_SHOWN {
            (0, chars.len())
        } else {
            let from = pad.saturating_sub(MAX_SHOWN / 3);
            (from, (from + MAX_SHOWN).min(chars.len()))
        };
        let mut line: String = if from > 0 { "…".into() } else { String::new() };
        line.extend(&chars[from..to]);
        if to < chars.len() {
            line.push('…');
        }
        let caret_pad = pad - from + usize::from(from > 0);
        let width = width.min(to.saturating_sub(pad)).max(1);
        let more = if width < self.char_span().1 { "…" } else { "" };
        let mut message = String::new();
        for (i, c) in self.message.chars().enumerate() {
            if i == MAX_MESSAGE {
                message.push('…');
                break;
            }
            if c.is_control() {
                message.extend(c.escape_default());
            } else {
                message.push(c);
            }
        }
        writeln!(f, "{message}")?;
        writeln!(f, "  {line}")?;
        write!(f, "  {}{}{more}", " ".repeat(caret_pad), "^".repeat(width))
    }
}

impl std::error::Error for FilterError {}

/// Levenshtein distance on bytes (names here are ASCII).
fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(!ca.eq_ignore_ascii_case(&cb));
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The candidate closest to `word`, if it is close enough to be a plausible typo.
pub(crate) fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    if word.len() > 64 {
        return None;
    }
    let limit = (word.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| (distance(word, c), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, c)| (d, c.len()))
        .map(|(_, c)| c)
}

/// `"; did you mean X?"` or nothing.
pub(crate) fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    suggest(word, candidates).map(|s| format!("; did you mean {s}?")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 100 KB field name with escape bytes is echoed as a short window and an escaped,
    /// shortened message, not 100,000 carets and raw escapes.
    #[test]
    fn huge_and_hostile_expressions_are_echoed_short_and_escaped() {
        let name = format!("\x1b[31m{}", "x".repeat(100_000));
        let expr = format!("{name} = 1");
        let e = FilterError::new(format!("unknown field '{name}' at column 1"), &expr, 0, name.len());
        let shown = e.to_string();
        assert!(shown.len() < 1200, "{} bytes", shown.len());
        assert!(!shown.contains('\x1b'), "{shown:?}");
        assert!(shown.contains("\\u{1b}[31m") && shown.contains('…'), "{shown:?}");
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[2].trim_start().starts_with('^') && lines[2].ends_with('…'), "{:?}", lines[2]);
        // An error at the end of a long expression: the caret is still under it.
        let long = format!("proc.name = {} and", "a".repeat(500));
        let e = FilterError::new("expected a condition", &long, long.len(), long.len());
        let shown = e.to_string();
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines[2].chars().count(), lines[1].chars().count() + 1, "{shown}");
        assert!(lines[1].starts_with("  …") && lines[1].ends_with("and"), "{shown}");
    }

    #[test]
    fn display_has_caret_under_span() {
        let e = FilterError::new("bad", "ab cd", 3, 5);
        assert_eq!(e.to_string(), "bad\n  ab cd\n     ^^");
        assert_eq!(e.column(), 4);
        assert_eq!((e.expr(), e.char_span()), ("ab cd", (3, 2)));
        // Multi-byte characters count as one column; out-of-range spans are clamped.
        let e = FilterError::new("x", "é=1", 2, 99);
        assert_eq!(e.column(), 2);
        assert_eq!(e.to_string(), "x\n  é=1\n   ^^");
        assert_eq!(e.char_span(), (1, 2));
        let e = FilterError::new("end", "a", 1, 1);
        assert_eq!(e.to_string(), "end\n  a\n   ^");
    }

    #[test]
    fn suggestions() {
        assert_eq!(distance("proc.nme", "proc.name"), 1);
        assert_eq!(suggest("proc.nme", ["proc.name", "proc.pid"]), Some("proc.name"));
        assert_eq!(suggest("zzzzzz", ["proc.name"]), None);
        assert_eq!(did_you_mean("fiel", ["file", "pipe"]), "; did you mean file?");
    }
}

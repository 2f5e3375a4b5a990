//! Tokens of the filter language.

use crate::error::{column_of, FilterError};

/// A comparison operator written with symbols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sym {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    LParen,
    RParen,
    Comma,
    Sym(Sym),
    /// A bare word: field name, keyword, or unquoted value.
    Word(String),
    /// A quoted string, escapes resolved.
    Quoted(String),
    Eof,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    pub tok: Tok,
    /// Byte range in the source.
    pub start: usize,
    pub end: usize,
}

impl Token {
    /// Is this a bare word equal (ignoring ASCII case) to `kw`?
    pub fn is_kw(&self, kw: &str) -> bool {
        matches!(&self.tok, Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }
    /// How the token reads in an error message.
    pub fn describe(&self, src: &str) -> String {
        match self.tok {
            Tok::Eof => "end of filter".to_string(),
            _ => format!("'{}'", src.get(self.start..self.end).unwrap_or("?")),
        }
    }
}

/// Characters that end a bare word (besides white space).
fn ends_word(c: char, next: Option<char>) -> bool {
    matches!(c, '(' | ')' | ',' | '=' | '<' | '>' | '\'' | '"') || (c == '!' && next == Some('='))
}

/// Split `src` into tokens; the last one is always [`Tok::Eof`].
pub(crate) fn lex(src: &str) -> Result<Vec<Token>, FilterError> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = src.char_indices().collect();
    let at = |i: usize| chars.get(i).map(|&(_, c)| c);
    let pos = |i: usize| chars.get(i).map(|&(p, _)| p).unwrap_or(src.len());
    let mut i = 0;
    while i < chars.len() {
        let (start, c) = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let (tok, len) = match (c, at(i + 1)) {
            ('(', _) => (Tok::LParen, 1),
            (')', _) => (Tok::RParen, 1),
            (',', _) => (Tok::Comma, 1),
            ('=', Some('=')) => (Tok::Sym(Sym::Eq), 2),
            ('=', _) => (Tok::Sym(Sym::Eq), 1),
            ('!', Some('=')) => (Tok::Sym(Sym::Ne), 2),
            ('<', Some('=')) => (Tok::Sym(Sym::Le), 2),
            ('<', _) => (Tok::Sym(Sym::Lt), 1),
            ('>', Some('=')) => (Tok::Sym(Sym::Ge), 2),
            ('>', _) => (Tok::Sym(Sym::Gt), 1),
            ('\'' | '"', _) => {
                let (s, next) = quoted(src, &chars, i)?;
                out.push(Token { tok: Tok::Quoted(s), start, end: pos(next) });
                i = next;
                continue;
            }
            _ => {
                let mut j = i;
                while let Some(c) = at(j) {
                    if c.is_whitespace() || ends_word(c, at(j + 1)) {
                        break;
                    }
                    j += 1;
                }
                out.push(Token { tok: Tok::Word(src[start..pos(j)].to_string()), start, end: pos(j) });
                i = j;
                continue;
            }
        };
        out.push(Token { tok, start, end: pos(i + len) });
        i += len;
    }
    out.push(Token { tok: Tok::Eof, start: src.len(), end: src.len() });
    Ok(out)
}

/// Read a quoted string starting at char index `i` (the quote); returns the text and the index after it.
///
/// `\xHH` escapes give bytes: several may spell one UTF-8 character (`\xc3\xa9` is é). A NUL
/// byte is refused, as libsinsp refuses it: no field value can hold one.
fn quoted(src: &str, chars: &[(usize, char)], i: usize) -> Result<(String, usize), FilterError> {
    let (start, q) = chars[i];
    let mut s: Vec<u8> = Vec::new();
    let mut j = i + 1;
    let push = |s: &mut Vec<u8>, c: char| s.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    let nul = |p: usize, end: usize| {
        FilterError::new(
            format!("NUL byte in a string at column {}: no field value can hold one", column_of(src, p)),
            src,
            p,
            end,
        )
    };
    while let Some(&(p, c)) = chars.get(j) {
        if c == q {
            return match String::from_utf8(s) {
                Ok(s) => Ok((s, j + 1)),
                Err(_) => Err(FilterError::new(
                    format!(
                        "the string starting at column {} is not UTF-8 once its \\x escapes are read; latscope compares text",
                        column_of(src, start)
                    ),
                    src,
                    start,
                    p + 1,
                )),
            };
        }
        if c == '\0' {
            return Err(nul(p, p + 1));
        }
        if c != '\\' {
            push(&mut s, c);
            j += 1;
            continue;
        }
        let Some(&(_, e)) = chars.get(j + 1) else { break };
        j += 2;
        match e {
            'n' => s.push(b'\n'),
            't' => s.push(b'\t'),
            'r' => s.push(b'\r'),
            '0' => return Err(nul(p, p + 2)),
            '\\' | '\'' | '"' => push(&mut s, e),
            'x' => {
                let hex: String = chars.get(j..j + 2).unwrap_or(&[]).iter().map(|&(_, c)| c).collect();
                let end = chars.get(j + 2).map(|&(p, _)| p).unwrap_or(src.len());
                match u8::from_str_radix(&hex, 16) {
                    Ok(0) if hex.len() == 2 => return Err(nul(p, end)),
                    Ok(v) if hex.len() == 2 && hex.chars().all(|c| c.is_ascii_hexdigit()) => {
                        s.push(v);
                        j += 2;
                    }
                    _ => {
                        return Err(FilterError::new(
                            format!("bad escape at column {}: \\x needs two hex digits (\\x41)", column_of(src, p)),
                            src,
                            p,
                            end,
                        ));
                    }
                }
            }
            // Unknown escapes keep the backslash (handy for globs and Windows-style paths).
            other => {
                s.push(b'\\');
                push(&mut s, other);
            }
        }
    }
    Err(FilterError::new(
        format!("unterminated string starting at column {}; add the closing {q}", column_of(src, start)),
        src,
        start,
        src.len(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|t| t.tok).collect()
    }
    fn w(s: &str) -> Tok {
        Tok::Word(s.into())
    }

    #[test]
    fn words_and_symbols() {
        assert_eq!(toks("proc.name=httpd"), vec![w("proc.name"), Tok::Sym(Sym::Eq), w("httpd"), Tok::Eof]);
        assert_eq!(
            toks("a==b != c<=d>=e<f>g"),
            vec![
                w("a"),
                Tok::Sym(Sym::Eq),
                w("b"),
                Tok::Sym(Sym::Ne),
                w("c"),
                Tok::Sym(Sym::Le),
                w("d"),
                Tok::Sym(Sym::Ge),
                w("e"),
                Tok::Sym(Sym::Lt),
                w("f"),
                Tok::Sym(Sym::Gt),
                w("g"),
                Tok::Eof
            ]
        );
        assert_eq!(
            toks("x in (a,b)"),
            vec![w("x"), w("in"), Tok::LParen, w("a"), Tok::Comma, w("b"), Tok::RParen, Tok::Eof]
        );
        assert_eq!(toks("fd.name contains /mnt/a*b!c"), vec![w("fd.name"), w("contains"), w("/mnt/a*b!c"), Tok::Eof]);
        assert_eq!(toks("blk.dev=8:0"), vec![w("blk.dev"), Tok::Sym(Sym::Eq), w("8:0"), Tok::Eof]);
    }

    #[test]
    fn quoted_strings() {
        assert_eq!(
            toks(r#"'a b' "c\"d" 'e\'f' "\n\t\\\x41\q""#)[..4],
            [
                Tok::Quoted("a b".into()),
                Tok::Quoted("c\"d".into()),
                Tok::Quoted("e'f".into()),
                Tok::Quoted("\n\t\\A\\q".into())
            ]
        );
        let e = lex("proc.name = 'abc").unwrap_err();
        assert!(e.message().starts_with("unterminated string starting at column 13"), "{e}");
        assert!(lex(r#""\x""#).is_err());
        assert!(lex(r#""\xff""#).is_err());
        assert_eq!(toks(r#""\xc3\xa9""#)[0], Tok::Quoted("é".into()));
        for nul in [r#""a\x00""#, r#""\0""#, "'a\0b'"] {
            assert!(lex(nul).unwrap_err().message().starts_with("NUL byte in a string"), "{nul}");
        }
        assert!(lex("'\\").is_err());
    }

    #[test]
    fn spans_are_bytes() {
        let t = lex("é = 'ü'").unwrap();
        assert_eq!((t[0].start, t[0].end), (0, 2));
        assert_eq!((t[2].start, t[2].end), (5, 9));
    }
}

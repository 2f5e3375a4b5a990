//! trace2heatmap.pl's input: two numeric columns, "time latency", one event per line.
//!
//! Rules (those of trace2heatmap.pl, except that a bad line is an error rather than a silent
//! skip or a zero):
//!
//! * the first line is skipped if it contains an ASCII letter (a header);
//! * blank lines and lines starting with `#` are skipped;
//! * fields are separated by white space; the first two are the time and the value, further
//!   fields are ignored;
//! * numbers are decimal, optionally signed, with an optional fraction and exponent (`12`,
//!   `-3.5`, `1.2e6`); anything else is an error naming the file, the line and the field.

use super::Points;
use std::fmt;

/// A line that is not "time value".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// File name as given.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// What was wrong and what was expected.
    pub msg: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.msg)
    }
}

impl std::error::Error for InputError {}

const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

/// Parses a decimal number. Plain decimals of up to 15 significant digits take an exact fast path
/// (an integer mantissa and one correctly rounded division by a power of ten); everything else goes
/// through the standard library's correctly rounded parser, so the result is the nearest double
/// either way.
#[inline]
pub fn parse_num(s: &[u8]) -> Option<f64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let mut mant: u64 = 0;
    let mut nd = 0u32;
    let mut frac = 0usize;
    let mut seen_dot = false;
    let mut any = false;
    for &c in digits {
        match c {
            b'0'..=b'9' => {
                any = true;
                if mant == 0 && c == b'0' {
                    if seen_dot {
                        frac += 1;
                    }
                    continue;
                }
                if nd >= 15 {
                    return slow(s);
                }
                mant = mant * 10 + u64::from(c - b'0');
                nd += 1;
                if seen_dot {
                    frac += 1;
                }
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => return slow(s),
        }
    }
    if !any {
        return None;
    }
    if frac >= POW10.len() {
        return slow(s);
    }
    let v = mant as f64 / POW10[frac];
    Some(if neg { -v } else { v })
}

#[cold]
fn slow(s: &[u8]) -> Option<f64> {
    let st = std::str::from_utf8(s).ok()?;
    // Only plain decimal syntax: Rust would also take "inf", "NaN", "infinity".
    if !st.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'+' | b'e' | b'E')) {
        return None;
    }
    st.parse::<f64>().ok().filter(|v| v.is_finite())
}

#[inline]
fn is_space(c: u8) -> bool {
    c == b' ' || c == b'\t' || c == b'\r' || c == 0x0b || c == 0x0c
}

/// Parses two-column text (see the module docs). `name` is used in errors.
///
/// Returns the points in input order.
pub fn parse_two_columns(data: &[u8], name: &str) -> Result<Points, InputError> {
    let mut pts = Points { x: Vec::with_capacity(data.len() / 16), y: Vec::with_capacity(data.len() / 16) };
    let mut lineno = 0usize;
    let mut pos = 0usize;
    let err = |line: usize, msg: String| InputError { file: name.to_string(), line, msg };
    while pos < data.len() {
        let end = match data[pos..].iter().position(|&c| c == b'\n') {
            Some(k) => pos + k,
            None => data.len(),
        };
        let line = &data[pos..end];
        pos = end + 1;
        lineno += 1;
        if lineno == 1 && line.iter().any(|c| c.is_ascii_alphabetic()) {
            continue;
        }
        // Fields.
        let mut i = 0;
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i == line.len() || line[i] == b'#' {
            continue;
        }
        let a0 = i;
        while i < line.len() && !is_space(line[i]) {
            i += 1;
        }
        let f1 = &line[a0..i];
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        let b0 = i;
        while i < line.len() && !is_space(line[i]) {
            i += 1;
        }
        let f2 = &line[b0..i];
        let t = parse_num(f1).ok_or_else(|| {
            err(lineno, format!("the time '{}' is not a number (expected two numbers: TIME VALUE)", show(f1)))
        })?;
        if f2.is_empty() {
            return Err(err(lineno, format!("only one field '{}' (expected two numbers: TIME VALUE)", show(f1))));
        }
        let v = parse_num(f2).ok_or_else(|| {
            err(lineno, format!("the value '{}' is not a number (expected two numbers: TIME VALUE)", show(f2)))
        })?;
        pts.push(t, v);
    }
    Ok(pts)
}

fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    if s.chars().count() > 40 {
        format!("{}...", s.chars().take(40).collect::<String>())
    } else {
        s.into_owned()
    }
}

/// The multiplier from a time unit name to seconds' subdivisions (`--unitstime`): `s` 1, `ms` 1e3,
/// `us` 1e6, `ns` 1e9.
pub fn units_per_sec(unit: &str) -> Result<f64, String> {
    Ok(match unit {
        "s" => 1.0,
        "ms" => 1e3,
        "us" | "µs" => 1e6,
        "ns" => 1e9,
        _ => return Err(format!("unknown time unit '{unit}' (use s, ms, us or ns)")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_num(b"12"), Some(12.0));
        assert_eq!(parse_num(b"-3.5"), Some(-3.5));
        assert_eq!(parse_num(b"+0.25"), Some(0.25));
        assert_eq!(parse_num(b"2199495.030133"), Some(2199495.030133));
        assert_eq!(parse_num(b"0.000000000000000000000001"), Some(1e-24));
        assert_eq!(parse_num(b"1.5e3"), Some(1500.0));
        assert_eq!(parse_num(b"17442020318913123456"), Some(17442020318913123456.0));
        assert_eq!(parse_num(b"00012.50"), Some(12.5));
        assert_eq!(parse_num(b"5."), Some(5.0));
        assert_eq!(parse_num(b".5"), Some(0.5));
        for bad in [&b"abc"[..], b"", b"-", b".", b"1.2.3", b"inf", b"NaN", b"12x", b"1e999"] {
            assert_eq!(parse_num(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        // The fast path agrees with the correctly rounded parser.
        let mut x: u64 = 0x9e3779b97f4a7c15;
        for _ in 0..20000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let int = x % 1_000_000_000;
            let frac = (x >> 30) % 1_000_000;
            let s = format!("{int}.{frac:06}");
            assert_eq!(parse_num(s.as_bytes()), Some(s.parse::<f64>().unwrap()), "{s}");
        }
    }

    #[test]
    fn two_columns() {
        let p = parse_two_columns(b"time latency\n1 10\n\n# comment\n2\t20 extra\r\n3 30", "f").unwrap();
        assert_eq!(p.x, vec![1.0, 2.0, 3.0]);
        assert_eq!(p.y, vec![10.0, 20.0, 30.0]);
        // Only the first line may be a header.
        let e = parse_two_columns(b"1 10\ntime latency\n", "f.txt").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.to_string(), "f.txt:2: the time 'time' is not a number (expected two numbers: TIME VALUE)");
        let e = parse_two_columns(b"1 10\n2\n", "f").unwrap_err();
        assert!(e.to_string().contains("f:2: only one field '2'"), "{e}");
        let e = parse_two_columns(b"1 10\n2 x\n", "f").unwrap_err();
        assert!(e.to_string().contains("the value 'x'"), "{e}");
        assert!(parse_two_columns(b"", "f").unwrap().is_empty());
    }

    #[test]
    fn units() {
        assert_eq!(units_per_sec("us"), Ok(1e6));
        assert!(units_per_sec("parsec").is_err());
    }
}

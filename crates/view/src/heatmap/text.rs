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

pub use latscope_event::InputError;

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

/// Fast path for a plain decimal at `d[start..]` (sign, digits, optional fraction) whose digits
/// form an integer below 2^53 with at most 22 of them after the point, ending at white space, a
/// newline or the end: exact, as [`parse_num`]. `None` sends the token to [`parse_num`].
#[inline(always)]
fn fast_num(d: &[u8], start: usize) -> Option<(f64, usize)> {
    let n = d.len();
    let mut i = start;
    let neg = i < n && d[i] == b'-';
    if i < n && (d[i] == b'-' || d[i] == b'+') {
        i += 1;
    }
    let mut m: u64 = 0;
    let int_digits = take_digits(d, &mut i, &mut m);
    let mut frac = 0usize;
    if i < n && d[i] == b'.' {
        i += 1;
        frac = take_digits(d, &mut i, &mut m) as usize;
    }
    let digits = int_digits + frac as u32;
    if digits == 0 || digits > 19 || m >= (1u64 << 53) || frac >= POW10.len() {
        return None;
    }
    if i < n && !(is_space(d[i]) || d[i] == b'\n') {
        return None;
    }
    let v = if frac == 0 { m as f64 } else { m as f64 / POW10[frac] };
    Some((if neg { -v } else { v }, i))
}

/// The token (up to white space) at `d[i..]`, and its end.
fn token(d: &[u8], mut i: usize) -> (&[u8], usize) {
    let a = i;
    while i < d.len() && !is_space(d[i]) && d[i] != b'\n' {
        i += 1;
    }
    (&d[a..i], i)
}

/// Parses one chunk of whole lines; errors carry the line number within the chunk.
fn parse_chunk(d: &[u8], first: bool) -> Result<Points, (usize, String)> {
    let mut pts = Points { x: Vec::with_capacity(d.len() / 16 + 16), y: Vec::with_capacity(d.len() / 16 + 16) };
    let n = d.len();
    let mut i = 0usize;
    let mut lineno = 0usize;
    while i < n {
        lineno += 1;
        if first && lineno == 1 {
            let end = d.iter().position(|&c| c == b'\n').unwrap_or(n);
            if d[..end].iter().any(|c| c.is_ascii_alphabetic()) {
                i = end + 1;
                continue;
            }
        }
        while i < n && is_space(d[i]) {
            i += 1;
        }
        if i >= n {
            break;
        }
        if d[i] == b'\n' {
            i += 1;
            continue;
        }
        if d[i] == b'#' {
            while i < n && d[i] != b'\n' {
                i += 1;
            }
            i += 1;
            continue;
        }
        let (t, e) = match fast_num(d, i) {
            Some(x) => x,
            None => {
                let (tok, e) = token(d, i);
                let t = parse_num(tok).ok_or_else(|| {
                    (lineno, format!("the time '{}' is not a number (expected two numbers: TIME VALUE)", show(tok)))
                })?;
                (t, e)
            }
        };
        let t_start = i;
        i = e;
        while i < n && is_space(d[i]) {
            i += 1;
        }
        if i >= n || d[i] == b'\n' {
            let (tok, _) = token(d, t_start);
            return Err((lineno, format!("only one field '{}' (expected two numbers: TIME VALUE)", show(tok))));
        }
        let (v, e) = match fast_num(d, i) {
            Some(x) => x,
            None => {
                let (tok, e) = token(d, i);
                let v = parse_num(tok).ok_or_else(|| {
                    (lineno, format!("the value '{}' is not a number (expected two numbers: TIME VALUE)", show(tok)))
                })?;
                (v, e)
            }
        };
        i = e;
        // Further fields are ignored.
        while i < n && d[i] != b'\n' {
            i += 1;
        }
        i += 1;
        pts.push(t, v);
    }
    Ok(pts)
}

/// Parses two-column text (see the module docs). `name` is used in errors.
///
/// Large inputs are split at line boundaries and parsed on up to 4 threads. Returns the points in
/// input order.
pub fn parse_two_columns(data: &[u8], name: &str) -> Result<Points, InputError> {
    let threads = if data.len() >= 4 << 20 {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(4)
    } else {
        1
    };
    // Chunk boundaries just after a newline.
    let mut bounds = vec![0usize];
    for k in 1..threads {
        let at = data.len() * k / threads;
        let prev = *bounds.last().unwrap_or(&0);
        let cut = match data[at.max(prev)..].iter().position(|&c| c == b'\n') {
            Some(p) => at.max(prev) + p + 1,
            None => data.len(),
        };
        bounds.push(cut);
    }
    bounds.push(data.len());
    bounds.dedup();
    let chunks: Vec<&[u8]> = bounds.windows(2).map(|w| &data[w[0]..w[1]]).collect();
    let results: Vec<Result<Points, (usize, String)>> = if chunks.len() == 1 {
        vec![parse_chunk(chunks[0], true)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> =
                chunks.iter().enumerate().map(|(k, c)| s.spawn(move || parse_chunk(c, k == 0))).collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err((0, "parser thread failed".into())))).collect()
        })
    };
    let total: usize = results.iter().map(|r| r.as_ref().map(|p| p.len()).unwrap_or(0)).sum();
    let mut pts = Points { x: Vec::with_capacity(total), y: Vec::with_capacity(total) };
    let mut lines_before = 0usize;
    for (k, r) in results.into_iter().enumerate() {
        match r {
            Ok(p) => {
                if pts.is_empty() {
                    pts = Points { x: p.x, y: p.y };
                    pts.x.reserve(total - pts.x.len());
                    pts.y.reserve(total - pts.y.len());
                } else {
                    pts.x.extend_from_slice(&p.x);
                    pts.y.extend_from_slice(&p.y);
                }
            }
            Err((line, msg)) => {
                return Err(InputError { file: name.to_string(), line: lines_before + line, msg });
            }
        }
        lines_before += chunks[k].iter().filter(|&&c| c == b'\n').count();
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

/// Append the decimal digits at `d[*i..]` to `m`, advancing `*i`; returns how many there were.
#[inline]
fn take_digits(d: &[u8], i: &mut usize, m: &mut u64) -> u32 {
    let mut count = 0;
    while let Some(&b) = d.get(*i) {
        let c = b.wrapping_sub(b'0');
        if c > 9 {
            break;
        }
        *m = m.wrapping_mul(10).wrapping_add(u64::from(c));
        count += 1;
        *i += 1;
    }
    count
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
    fn parallel_chunks_keep_order_and_line_numbers() {
        let mut text = String::from("t v\n");
        for k in 0..400_000u64 {
            text.push_str(&format!("{k} {}.25\n", k % 977));
        }
        let p = parse_two_columns(text.as_bytes(), "big").unwrap();
        assert_eq!(p.len(), 400_000);
        assert!(p.x.iter().enumerate().all(|(k, &x)| x == k as f64));
        assert!(p.y.iter().enumerate().all(|(k, &y)| y == (k % 977) as f64 + 0.25));
        // An error late in the file names its line (header is line 1).
        text.push_str("5 oops\n");
        let e = parse_two_columns(text.as_bytes(), "big").unwrap_err();
        assert_eq!(e.line, 400_002, "{e}");
        // Tokens the fast path declines still parse.
        let p = parse_two_columns(b"time value\n1e3 +2.5e-1\n123456789012345678901 -7\n", "f").unwrap();
        assert_eq!(p.x, vec![1000.0, 123456789012345678901.0]);
        assert_eq!(p.y, vec![0.25, -7.0]);
    }

    #[test]
    fn units() {
        assert_eq!(units_per_sec("us"), Ok(1e6));
        assert!(units_per_sec("parsec").is_err());
    }
}

/// How to draw trace2heatmap.pl's two columns.
#[derive(Debug, Clone)]
pub struct TextMapOptions {
    /// Unit of the first column (`--unitstime`: s, ms, us, ns).
    pub time_unit: String,
    /// Time units per second of the first column.
    pub units_per_sec: f64,
    /// Unit label of the second column (`--unitslat`).
    pub value_unit: String,
    /// Draw the offset of each time within its second instead of the value.
    pub subsecond: bool,
    /// Rows (the unit is filled in here).
    pub yspec: super::YSpec,
    /// Seconds per column (`None`: chosen for the time the data span).
    pub step_sec: Option<f64>,
    /// Keep only the columns up to this one.
    pub max_col: Option<usize>,
    /// Title (default "Latency Heat Map" / "Subsecond Offset Heat Map").
    pub title: Option<String>,
}

/// The heat map of parsed two-column text, binned exactly as trace2heatmap.pl does (plus the
/// column and row it drops).
pub fn text_map(mut pts: Points, o: &TextMapOptions) -> Result<(super::HeatMap, super::Binning), String> {
    let ups = o.units_per_sec;
    let mut y = o.yspec.clone();
    if o.subsecond {
        // x: whole seconds; y: offset within the second, in the time unit.
        for k in 0..pts.len() {
            let t = pts.x[k];
            let sec = (t / ups).floor();
            pts.x[k] = sec * ups;
            pts.y[k] = t - sec * ups;
        }
        y.unit = super::YUnit::Raw(o.time_unit.clone());
        y.min = Some(y.min.unwrap_or(0.0));
        y.max = Some(y.max.unwrap_or(ups).min(ups));
        y.max_exclusive = y.max == Some(ups);
        y.label = "Offset within the second".into();
    } else {
        y.unit = super::YUnit::Raw(o.value_unit.clone());
        // trace2heatmap.pl's `||=`: a zero --maxlat or --steplat means "not given".
        y.max = y.max.filter(|&m| m != 0.0);
        y.step = y.step.filter(|&st| st != 0.0);
        y.label = "Latency".into();
    }
    let x = super::XSpec {
        units_per_sec: ups,
        step_sec: o.step_sec,
        origin: None,
        max_col: o.max_col,
        col_limit: 10_000,
        wall_ns_at_zero: None,
    };
    let bins = super::Binning::plan(&[&pts], &x, &y)?;
    let default = if o.subsecond { "Subsecond Offset Heat Map" } else { "Latency Heat Map" };
    let map = bins.build(&pts, o.title.as_deref().unwrap_or(default), None);
    Ok((map, bins))
}

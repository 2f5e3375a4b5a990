//! Numbers with units: formatting for output, parsing for filters and flags.

use std::fmt::{self, Write};

/// Format nanoseconds with a unit that keeps 3 significant digits: `812ns`, `1.50us`, `12.3ms`, `2.00s`.
pub fn fmt_ns(ns: u64) -> String {
    fmt_ns_f(ns as f64)
}

/// [`fmt_ns`] for fractional values (means, bucket bounds).
pub fn fmt_ns_f(ns: f64) -> String {
    let mut s = String::new();
    let _ = write_ns_f(&mut s, ns);
    s
}

/// [`fmt_ns`] into a writer, without allocating.
pub fn write_ns(w: &mut impl Write, ns: u64) -> fmt::Result {
    write_ns_f(w, ns as f64)
}

/// [`fmt_ns_f`] into a writer, without allocating.
pub fn write_ns_f(w: &mut impl Write, ns: f64) -> fmt::Result {
    // Whole nanoseconds (every event's latency) take the integer path, which writes the same
    // text without formatting floats.
    if ns >= 0.0 && ns < EXACT_LIMIT as f64 && ns.fract() == 0.0 {
        let n = ns as u64;
        if n < 1000 {
            write_u64(w, n)?;
            return w.write_str("ns");
        }
        let (d, u) = if n < 1_000_000 {
            (1_000, "us")
        } else if n < 1_000_000_000 {
            (1_000_000, "ms")
        } else {
            (1_000_000_000, "s")
        };
        if let Some(r) = write_sig3_int(w, n, d) {
            r?;
            return w.write_str(u);
        }
    }
    let (v, u) = if ns < 1e3 {
        return write!(w, "{ns:.0}ns");
    } else if ns < 1e6 {
        (ns / 1e3, "us")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    write_sig3(w, v)?;
    w.write_str(u)
}

/// Below this, `n / d` and `n * 100` are exact or close enough in `f64` that [`write_sig3_int`]
/// rounds as the float formatting does (2^51: 26 days in ns, 2 PiB).
const EXACT_LIMIT: u64 = 1 << 51;

/// An integer in decimal, without the formatting machinery.
#[inline]
pub(crate) fn write_u64(w: &mut impl Write, n: u64) -> fmt::Result {
    // Two digits per division (itoa): offsets and sizes run to ten digits.
    w.write_str(itoa::Buffer::new().format(n))
}

/// [`write_sig3`] of `n / d` (`n >= d`, `n` below [`EXACT_LIMIT`]) in integers: the same text, as
/// the float formatting rounds the correctly rounded quotient to the nearest. `None` on an exact
/// decimal tie (`1.125` to two places), which the float path decides as it always has.
fn write_sig3_int(w: &mut impl Write, n: u64, d: u64) -> Option<fmt::Result> {
    if n >= EXACT_LIMIT {
        return None;
    }
    let places = if n >= 100 * d {
        0
    } else if n >= 10 * d {
        1
    } else {
        2
    };
    let scale = [1u64, 10, 100][places];
    let (mut q, r) = ((n * scale) / d, (n * scale) % d);
    match (2 * r).cmp(&d) {
        std::cmp::Ordering::Greater => q += 1,
        // A decimal tie: the float formatting rounds the quotient in `f64`, which lies above or
        // below it unless the tie is exact in binary.
        std::cmp::Ordering::Equal => match f64_quotient_vs_exact(n, d) {
            std::cmp::Ordering::Greater => q += 1,
            std::cmp::Ordering::Less => {}
            std::cmp::Ordering::Equal => return None,
        },
        std::cmp::Ordering::Less => {}
    }
    Some((|| {
        write_u64(w, q / scale)?;
        if places > 0 {
            let f = q % scale;
            let digits = [b'.', b'0' + (f / 10 % 10) as u8, b'0' + (f % 10) as u8];
            // `.d` or `.dd`: the last `places` digits.
            let text = if places == 1 { [digits[0], digits[2]] } else { [digits[0], digits[1]] };
            // SAFETY (both): a dot and ASCII digits (valid UTF-8).
            w.write_str(unsafe { std::str::from_utf8_unchecked(&text) })?;
            if places == 2 {
                w.write_str(unsafe { std::str::from_utf8_unchecked(&digits[2..]) })?;
            }
        }
        Ok(())
    })())
}

/// Whether `n as f64 / d as f64` (`n >= d`, both below 2^53) is above, below or equal to the
/// exact quotient `n / d`: its mantissa and exponent compared in integers.
fn f64_quotient_vs_exact(n: u64, d: u64) -> std::cmp::Ordering {
    let bits = (n as f64 / d as f64).to_bits();
    let (m, e) = (bits & ((1 << 52) - 1) | 1 << 52, ((bits >> 52) & 0x7ff) as i32 - 1075);
    // The quotient is at least 1 and below 2^53: a normal number with -52 <= e < 0.
    if !(-64..0).contains(&e) {
        return std::cmp::Ordering::Equal;
    }
    // m * 2^e against n / d: m * d against n * 2^-e.
    (u128::from(m) * u128::from(d)).cmp(&(u128::from(n) << -e))
}

fn write_sig3(w: &mut impl Write, v: f64) -> fmt::Result {
    if v >= 100.0 {
        write!(w, "{v:.0}")
    } else if v >= 10.0 {
        write!(w, "{v:.1}")
    } else {
        write!(w, "{v:.2}")
    }
}

fn sig3(v: f64) -> String {
    let mut s = String::new();
    let _ = write_sig3(&mut s, v);
    s
}

/// Format a byte count with binary units: `512B`, `4.00KiB`, `1.50MiB`.
pub fn fmt_bytes(b: u64) -> String {
    let mut s = String::new();
    let _ = write_bytes(&mut s, b);
    s
}

/// [`fmt_bytes`] into a writer, without allocating.
pub fn write_bytes(w: &mut impl Write, b: u64) -> fmt::Result {
    if b < 1024 {
        write_u64(w, b)?;
        return w.write_str("B");
    }
    if b < EXACT_LIMIT {
        let (d, u) = if b < 1 << 20 {
            (1u64 << 10, "KiB")
        } else if b < 1 << 30 {
            (1 << 20, "MiB")
        } else if b < 1 << 40 {
            (1 << 30, "GiB")
        } else {
            (1 << 40, "TiB")
        };
        if let Some(r) = write_sig3_int(w, b, d) {
            r?;
            return w.write_str(u);
        }
    }
    let f = b as f64;
    const K: f64 = 1024.0;
    let (v, u) = if f < K {
        return write!(w, "{b}B");
    } else if f < K * K {
        (f / K, "KiB")
    } else if f < K * K * K {
        (f / (K * K), "MiB")
    } else if f < K * K * K * K {
        (f / (K * K * K), "GiB")
    } else {
        (f / (K * K * K * K), "TiB")
    };
    write_sig3(w, v)?;
    w.write_str(u)
}

/// Format a rate with an SI suffix: `950`, `12.3k`, `1.20M`.
pub fn fmt_count(v: f64) -> String {
    if v < 1e3 {
        if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    } else if v < 1e6 {
        format!("{}k", sig3(v / 1e3))
    } else if v < 1e9 {
        format!("{}M", sig3(v / 1e6))
    } else {
        format!("{}G", sig3(v / 1e9))
    }
}

fn split_num(s: &str) -> Result<(f64, &str), String> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || (i == 0 && (c == '-' || c == '+')) || c == '_'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let v: f64 = num.parse().map_err(|_| format!("'{s}' does not start with a number"))?;
    Ok((v, unit.trim()))
}

/// Parse a duration to ns: `1500`, `250us`, `1.5ms`, `2s`, `1m`, `10ns`. A bare number is ns.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let (v, unit) = split_num(s)?;
    let mul = match unit {
        "" | "ns" => 1.0,
        "us" | "µs" | "usec" => 1e3,
        "ms" | "msec" => 1e6,
        "s" | "sec" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        u => return Err(format!("unknown duration unit '{u}' in '{s}' (use ns, us, ms, s, m, h)")),
    };
    if v < 0.0 {
        return Err(format!("negative duration '{s}'"));
    }
    in_u64(v * mul, s, "duration", "about 584 years")
}

/// `x` rounded to a u64, or an out-of-range error (a float cast would saturate silently).
fn in_u64(x: f64, s: &str, what: &str, max: &str) -> Result<u64, String> {
    let r = x.round();
    // 2^64 is the first f64 above u64::MAX.
    if !r.is_finite() || r >= 18_446_744_073_709_551_616.0 {
        return Err(format!("{what} '{s}' out of range (at most {max})"));
    }
    Ok(r as u64)
}

/// Parse a duration given in seconds by default: `10` is 10 s, `500ms` is 0.5 s.
pub fn parse_duration_secs_default(s: &str) -> Result<u64, String> {
    if s.trim().chars().all(|c| c.is_ascii_digit() || c == '.') {
        let v: f64 = s.trim().parse().map_err(|_| format!("'{s}' is not a number"))?;
        return in_u64(v * 1e9, s, "duration", "about 584 years");
    }
    parse_duration_ns(s)
}

/// Parse a size to bytes: `4096`, `4k`, `4KiB`, `1.5MB`, `1G`. k/K/KiB/KB all mean 1024.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (v, unit) = split_num(s)?;
    let mul: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0f64.powi(4),
        "s" | "sectors" => 512.0,
        _ => return Err(format!("unknown size unit '{unit}' in '{s}' (use B, KiB, MiB, GiB, TiB)")),
    };
    if v < 0.0 {
        return Err(format!("negative size '{s}'"));
    }
    in_u64(v * mul, s, "size", "16 EiB")
}

#[cfg(test)]
mod tests {

    /// The float formatting the integer paths stand in for.
    fn float_ns(ns: f64) -> String {
        let (v, u) = if ns < 1e3 {
            return format!("{ns:.0}ns");
        } else if ns < 1e6 {
            (ns / 1e3, "us")
        } else if ns < 1e9 {
            (ns / 1e6, "ms")
        } else {
            (ns / 1e9, "s")
        };
        format!("{}{u}", sig3(v))
    }

    fn float_bytes(b: u64) -> String {
        let f = b as f64;
        let k = 1024f64;
        let (v, u) = if f < k {
            return format!("{b}B");
        } else if f < k * k {
            (f / k, "KiB")
        } else if f < k * k * k {
            (f / (k * k), "MiB")
        } else if f < k * k * k * k {
            (f / (k * k * k), "GiB")
        } else {
            (f / (k * k * k * k), "TiB")
        };
        format!("{}{u}", sig3(v))
    }

    #[test]
    fn integer_formatting_writes_what_float_formatting_wrote() {
        // Every value up to 2 M, every boundary of every unit, ties, and a spread of large values.
        let mut values: Vec<u64> = (0..2_000_000).collect();
        for p in 3..16 {
            let b = 10u64.pow(p);
            values.extend(b.saturating_sub(3000)..b + 3000);
            values.extend([b * 99995 / 100000, b * 9995 / 10000, b / 1000 * 1125, b + b / 200]);
        }
        for k in 1..5u32 {
            let b = 1u64 << (10 * k);
            values.extend(b.saturating_sub(3000)..b + 3000);
            values.extend((1..2000).map(|m| b / 1000 * m + b / 2000));
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1_000_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (x % 60));
        }
        values.extend([EXACT_LIMIT - 1, EXACT_LIMIT, u64::MAX]);
        for v in values {
            assert_eq!(fmt_ns(v), float_ns(v as f64), "{v} ns");
            assert_eq!(fmt_bytes(v), float_bytes(v), "{v} bytes");
        }
        assert_eq!(fmt_ns_f(812.5), "812ns");
        assert_eq!(fmt_ns_f(1500.4), "1.50us");
    }
    use super::*;
    #[test]
    fn formats() {
        assert_eq!(fmt_ns(812), "812ns");
        assert_eq!(fmt_ns(1500), "1.50us");
        assert_eq!(fmt_ns(12_300_000), "12.3ms");
        assert_eq!(fmt_ns(2_000_000_000), "2.00s");
        assert_eq!(fmt_bytes(512), "512B");
        assert_eq!(fmt_bytes(4096), "4.00KiB");
        assert_eq!(fmt_count(12_300.0), "12.3k");
    }
    #[test]
    fn parses() {
        assert_eq!(parse_duration_ns("250us"), Ok(250_000));
        assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("1000000"), Ok(1_000_000));
        assert!(parse_duration_ns("5 parsecs").is_err());
        assert!(parse_duration_ns("ms").is_err());
        assert_eq!(parse_duration_secs_default("10"), Ok(10_000_000_000));
        assert_eq!(parse_duration_secs_default("500ms"), Ok(500_000_000));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("1_000"), Ok(1000));
        assert_eq!(parse_size("1.5M"), Ok(1_572_864));
        assert!(parse_size("-1").is_err());
    }
}

//! Compact binary encoding ([`Histogram::to_bytes`] / [`Histogram::from_bytes`]) and serde support.
//!
//! Both decoders go through one validation ([`assemble`]) so that no input, however crafted, yields a
//! histogram whose invariants (count = sum of buckets, min/max inside the first/last non-empty bucket,
//! clamp counters consistent) are broken.

use crate::histogram::{buckets_for_bits, raw_bounds, raw_index, Histogram, MIN_MAX_BITS, SUB_BUCKET_BITS};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

const MAGIC: [u8; 2] = *b"LH";
const VERSION: u8 = 1;
/// Magic (2), version, sub-bucket bits, range bits.
const HEADER_LEN: usize = 5;
const CRC_LEN: usize = 4;

/// Why [`Histogram::from_bytes`] (or deserialization) rejected its input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than the fixed header and checksum.
    #[error("histogram encoding too short: {0} bytes, at least {min} needed", min = HEADER_LEN + CRC_LEN)]
    TooShort(usize),
    /// The first two bytes are not `LH`.
    #[error("not a latscope histogram encoding (bad magic bytes)")]
    BadMagic,
    /// A version this build cannot read (a newer latscope wrote it).
    #[error("unsupported histogram encoding version {0} (this build reads version {VERSION})")]
    UnsupportedVersion(u8),
    /// The trailing CRC-32 does not match: the bytes were truncated or corrupted.
    #[error("histogram checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// CRC-32 found in the input.
        stored: u32,
        /// CRC-32 of the bytes before it.
        computed: u32,
    },
    /// Structurally invalid content; the message says what.
    #[error("malformed histogram: {0}")]
    Malformed(String),
}

fn malformed<T>(msg: impl Into<String>) -> Result<T, DecodeError> {
    Err(DecodeError::Malformed(msg.into()))
}

impl Histogram {
    /// Compact sparse encoding, typically a few KiB for millions of values.
    ///
    /// Layout (version 1); varints are unsigned LEB128:
    ///
    /// ```text
    /// "LH"  version=1  sub_bucket_bits=7  range_bits      5 bytes
    /// min  max  sum(u128)  clamped_low  clamped_high     varints (empty: min = u64::MAX, max = 0)
    /// run_count                                           varint
    /// per run: gap  len  first  delta * (len - 1)          varints; start = previous run's end + gap;
    ///                                                     first = the run's first count, each delta =
    ///                                                     zigzag(count - previous count); counts >= 1
    /// CRC-32 (IEEE) of all preceding bytes                4 bytes, little endian
    /// ```
    ///
    /// Runs skip empty buckets; deltas keep the counts of a smooth distribution, where neighbours
    /// differ little, to one byte each (about 8 KB for 1 M log-uniform values over 37 octaves).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.counts.iter().filter(|&&c| c > 0).count() * 2);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&[VERSION, SUB_BUCKET_BITS as u8, self.max_bits as u8]);
        for v in [self.min, self.max] {
            put_varint(&mut out, u128::from(v));
        }
        put_varint(&mut out, self.sum);
        put_varint(&mut out, u128::from(self.clamped_low));
        put_varint(&mut out, u128::from(self.clamped_high));
        let runs = runs(&self.counts);
        put_varint(&mut out, runs.len() as u128);
        let mut prev_end = 0;
        for (start, end) in runs {
            put_varint(&mut out, (start - prev_end) as u128);
            put_varint(&mut out, (end - start) as u128);
            let run = &self.counts[start..end];
            put_varint(&mut out, u128::from(run[0]));
            for w in run.windows(2) {
                put_varint(&mut out, zigzag(i128::from(w[1]) - i128::from(w[0])));
            }
            prev_end = end;
        }
        let crc = crc32(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes [`to_bytes`](Self::to_bytes) output. Any other input — truncated, corrupted, random — is
    /// an `Err` saying why, never a panic; allocation is bounded by the 58 KiB of the largest range.
    pub fn from_bytes(bytes: &[u8]) -> Result<Histogram, DecodeError> {
        if bytes.len() < HEADER_LEN + CRC_LEN {
            return Err(DecodeError::TooShort(bytes.len()));
        }
        if bytes[..2] != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        if bytes[2] != VERSION {
            return Err(DecodeError::UnsupportedVersion(bytes[2]));
        }
        let (body, crc) = bytes.split_at(bytes.len() - CRC_LEN);
        let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        let computed = crc32(body);
        if stored != computed {
            return Err(DecodeError::Checksum { stored, computed });
        }
        if u32::from(body[3]) != SUB_BUCKET_BITS {
            return malformed(format!("sub-bucket bits {} (only {SUB_BUCKET_BITS} is defined)", body[3]));
        }
        let max_bits = u32::from(body[4]);
        if !(MIN_MAX_BITS..=64).contains(&max_bits) {
            return malformed(format!("range of {max_bits} bits (supported: {MIN_MAX_BITS}..=64)"));
        }
        let mut r = Reader { buf: &body[HEADER_LEN..], pos: 0 };
        let parts = Parts {
            max_bits,
            min: r.u64("min")?,
            max: r.u64("max")?,
            sum: r.u128("sum")?,
            clamped_low: r.u64("clamped_low")?,
            clamped_high: r.u64("clamped_high")?,
        };
        let n_buckets = buckets_for_bits(max_bits);
        let run_count = r.u64("run count")?;
        if run_count > n_buckets as u64 {
            return malformed(format!("{run_count} runs for {n_buckets} buckets"));
        }
        let mut buckets = Vec::new();
        let mut prev_end = 0u64;
        for _ in 0..run_count {
            let start = prev_end.checked_add(r.u64("run gap")?);
            let len = r.u64("run length")?;
            let end = start.and_then(|s| s.checked_add(len));
            let (Some(start), Some(end)) = (start, end) else {
                return malformed("run position overflows");
            };
            if len == 0 || end > n_buckets as u64 {
                return malformed(format!("run {start}..{end} outside 0..{n_buckets} or empty"));
            }
            let mut count = r.u64("bucket count")?;
            buckets.push((start as usize, count));
            for index in start + 1..end {
                let delta = unzigzag(r.u128("count delta")?);
                let next = i128::from(count).checked_add(delta).and_then(|c| u64::try_from(c).ok());
                let Some(next) = next else {
                    return malformed(format!("bucket {index}: count {count} {delta:+} out of range"));
                };
                count = next;
                buckets.push((index as usize, count));
            }
            prev_end = end;
        }
        if r.pos != r.buf.len() {
            return malformed(format!("{} trailing bytes", r.buf.len() - r.pos));
        }
        assemble(&parts, buckets)
    }
}

/// `[start, end)` index ranges of consecutive non-empty buckets.
fn runs(counts: &[u64]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < counts.len() {
        if counts[i] == 0 {
            i += 1;
            continue;
        }
        let start = i;
        while i < counts.len() && counts[i] > 0 {
            i += 1;
        }
        runs.push((start, i));
    }
    runs
}

/// The scalar fields of an encoded histogram, before validation.
struct Parts {
    max_bits: u32,
    min: u64,
    max: u64,
    sum: u128,
    clamped_low: u64,
    clamped_high: u64,
}

/// Builds a histogram from decoded parts and `(index, count)` pairs in increasing index order, checking
/// every invariant the rest of the crate relies on.
fn assemble(p: &Parts, buckets: Vec<(usize, u64)>) -> Result<Histogram, DecodeError> {
    if !(MIN_MAX_BITS..=64).contains(&p.max_bits) {
        return malformed(format!("range of {} bits (supported: {MIN_MAX_BITS}..=64)", p.max_bits));
    }
    let mut h = Histogram::with_max_bits(p.max_bits);
    let mut total = 0u64;
    let mut prev: Option<usize> = None;
    for &(index, count) in &buckets {
        if index >= h.counts.len() {
            return malformed(format!("bucket {index} beyond the last bucket {}", h.counts.len() - 1));
        }
        if prev.is_some_and(|p| index <= p) {
            return malformed("buckets out of order or repeated");
        }
        if count == 0 {
            return malformed(format!("bucket {index} listed with count 0"));
        }
        h.counts[index] = count;
        total = total.checked_add(count).ok_or_else(|| DecodeError::Malformed("total count overflows".into()))?;
        prev = Some(index);
    }
    h.total = total;
    h.min = p.min;
    h.max = p.max;
    h.sum = p.sum;
    h.clamped_low = p.clamped_low;
    h.clamped_high = p.clamped_high;
    if total == 0 {
        if (p.min, p.max, p.sum, p.clamped_low, p.clamped_high) != (u64::MAX, 0, 0, 0, 0) {
            return malformed("empty histogram with non-empty statistics");
        }
        return Ok(h);
    }
    let (first, last) = (buckets[0].0, buckets[buckets.len() - 1].0);
    if p.min > p.max || h.bucket_index(p.min) != first || h.bucket_index(p.max) != last {
        return malformed(format!("min {} / max {} do not match buckets {first}..={last}", p.min, p.max));
    }
    if p.sum < u128::from(p.min) * u128::from(total) || p.sum > u128::from(p.max) * u128::from(total) {
        return malformed(format!("sum {} impossible for {total} values in {}..={}", p.sum, p.min, p.max));
    }
    let top = h.counts.len() - 1;
    let low_ok = p.clamped_low == 0 || (p.min == 0 && h.counts[0] >= p.clamped_low);
    let high_ok = if p.max > h.max_trackable {
        p.clamped_high >= 1 && h.counts[top] >= p.clamped_high
    } else {
        p.clamped_high == 0
    };
    if !low_ok || !high_ok || p.clamped_low.checked_add(p.clamped_high).is_none_or(|c| c > total) {
        return malformed(format!(
            "clamp counters (low {}, high {}) inconsistent with the buckets",
            p.clamped_low, p.clamped_high
        ));
    }
    Ok(h)
}

/// Maps signed to unsigned so that small magnitudes of either sign give short varints.
fn zigzag(v: i128) -> u128 {
    ((v << 1) ^ (v >> 127)) as u128
}

fn unzigzag(v: u128) -> i128 {
    ((v >> 1) as i128) ^ -((v & 1) as i128)
}

fn put_varint(out: &mut Vec<u8>, mut v: u128) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bounds-checked varint reader: every read names what it reads, for the error message.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn u128(&mut self, what: &str) -> Result<u128, DecodeError> {
        let mut v = 0u128;
        for shift in (0..128).step_by(7) {
            let Some(&b) = self.buf.get(self.pos) else {
                return malformed(format!("input ends inside {what}"));
            };
            self.pos += 1;
            let bits = u128::from(b & 0x7f);
            if shift > 0 && bits.leading_zeros() < shift {
                return malformed(format!("{what} overflows"));
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        malformed(format!("{what} is too long a varint"))
    }

    fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        let v = self.u128(what)?;
        u64::try_from(v).or_else(|_| malformed(format!("{what} overflows 64 bits")))
    }
}

/// CRC-32 (IEEE 802.3, as in zlib/PNG) lookup table, built at compile time.
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

fn crc32(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |c, &b| CRC_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8))
}

/// The serde form: self-describing, with buckets as inclusive `(low, high, count)` so that JSON readers
/// (the web view, scripts) need not know the index scheme.
#[derive(Serialize, Deserialize)]
struct Repr {
    sub_bucket_bits: u32,
    max_trackable: u64,
    count: u64,
    min: Option<u64>,
    max: Option<u64>,
    sum: u128,
    clamped_low: u64,
    clamped_high: u64,
    buckets: Vec<(u64, u64, u64)>,
}

impl Serialize for Histogram {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Repr {
            sub_bucket_bits: SUB_BUCKET_BITS,
            max_trackable: self.max_trackable,
            count: self.total,
            min: self.min(),
            max: self.max(),
            sum: self.sum,
            clamped_low: self.clamped_low,
            clamped_high: self.clamped_high,
            buckets: self.iter().collect(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Histogram {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let r = Repr::deserialize(deserializer)?;
        from_repr(r).map_err(serde::de::Error::custom)
    }
}

fn from_repr(r: Repr) -> Result<Histogram, DecodeError> {
    if r.sub_bucket_bits != SUB_BUCKET_BITS {
        return malformed(format!("sub_bucket_bits {} (only {SUB_BUCKET_BITS} is defined)", r.sub_bucket_bits));
    }
    if r.max_trackable != u64::MAX && !(r.max_trackable + 1).is_power_of_two() {
        return malformed(format!("max_trackable {} is not 2^b - 1", r.max_trackable));
    }
    let max_bits = 64 - r.max_trackable.leading_zeros();
    let mut buckets = Vec::with_capacity(r.buckets.len());
    for &(low, high, count) in &r.buckets {
        let index = raw_index(low);
        if raw_bounds(index) != (low, high) {
            return malformed(format!("({low}, {high}) is not a bucket"));
        }
        buckets.push((index, count));
    }
    let parts = Parts {
        max_bits,
        min: r.min.unwrap_or(u64::MAX),
        max: r.max.unwrap_or(0),
        sum: r.sum,
        clamped_low: r.clamped_low,
        clamped_high: r.clamped_high,
    };
    if r.min.is_some() != r.max.is_some() {
        return malformed("min and max must both be present or both absent");
    }
    let h = assemble(&parts, buckets)?;
    if h.total != r.count {
        return malformed(format!("count {} but buckets hold {}", r.count, h.total));
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::SplitMix as Rng;
    use proptest::prelude::*;

    fn sample(seed: u64, n: usize, max_value: u64) -> Histogram {
        let mut rng = Rng(seed);
        let mut h = Histogram::with_max_value(max_value);
        for _ in 0..n {
            h.record(rng.log_value(44));
        }
        if seed.is_multiple_of(3) {
            h.record_signed(-5);
        }
        h
    }

    /// Re-signs a mutated body so the parser, not the checksum, has to reject it.
    fn with_crc(mut body: Vec<u8>) -> Vec<u8> {
        let crc = crc32(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }

    #[test]
    fn zigzag_round_trips() {
        for v in [0i128, 1, -1, 63, -64, i128::from(u64::MAX), -i128::from(u64::MAX)] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!((zigzag(0), zigzag(-1), zigzag(1), zigzag(-2)), (0, 1, 2, 3));
    }

    #[test]
    fn crc_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn round_trip_empty_and_full() {
        for h in [Histogram::new(), Histogram::with_max_value(0), sample(3, 10_000, u64::MAX), sample(4, 500, 1 << 30)]
        {
            assert_eq!(Histogram::from_bytes(&h.to_bytes()).unwrap(), h);
            let json = serde_json::to_string(&h).unwrap();
            assert_eq!(serde_json::from_str::<Histogram>(&json).unwrap(), h, "{json}");
        }
    }

    #[test]
    fn size_is_compact() {
        let h = sample(1, 1_000_000, 1 << 40);
        let n = h.to_bytes().len();
        // ~4600 non-empty buckets of ~220 each, neighbours differing by ~20: one byte per bucket.
        assert!(n < 7_000, "{n} bytes");
        assert_eq!(Histogram::new().to_bytes().len(), HEADER_LEN + 10 + 1 + 1 + 1 + 1 + 1 + CRC_LEN);
    }

    #[test]
    fn errors_say_why() {
        let good = sample(2, 100, 1 << 40).to_bytes();
        assert_eq!(Histogram::from_bytes(&good[..3]), Err(DecodeError::TooShort(3)));
        assert_eq!(Histogram::from_bytes(b"XX\x01\x07\x28\0\0\0\0"), Err(DecodeError::BadMagic));
        let mut v2 = good.clone();
        v2[2] = 2;
        assert_eq!(Histogram::from_bytes(&v2), Err(DecodeError::UnsupportedVersion(2)));
        let mut flipped = good.clone();
        flipped[10] ^= 1;
        assert!(matches!(Histogram::from_bytes(&flipped), Err(DecodeError::Checksum { .. })));
        let truncated = with_crc(good[..good.len() - 6].to_vec());
        let err = Histogram::from_bytes(&truncated).unwrap_err();
        assert!(matches!(err, DecodeError::Malformed(_)), "{err}");
        let mut trailing = good[..good.len() - CRC_LEN].to_vec();
        trailing.push(0);
        assert_eq!(Histogram::from_bytes(&with_crc(trailing)), Err(DecodeError::Malformed("1 trailing bytes".into())));
        let mut bits = good[..good.len() - CRC_LEN].to_vec();
        bits[4] = 65;
        let err = Histogram::from_bytes(&with_crc(bits)).unwrap_err().to_string();
        assert!(err.contains("range of 65 bits"), "{err}");
    }

    #[test]
    fn inconsistent_statistics_are_rejected() {
        let h = sample(5, 1000, 1 << 40);
        let mut bad = h.clone();
        bad.min += 100_000_000; // no longer in the first bucket
        assert!(Histogram::from_bytes(&bad.to_bytes()).is_err());
        let mut bad = h.clone();
        bad.sum = 1;
        assert!(Histogram::from_bytes(&bad.to_bytes()).is_err());
        let mut bad = sample(5, 1000, u64::MAX);
        bad.clamped_high = 1; // nothing exceeds the range
        assert!(Histogram::from_bytes(&bad.to_bytes()).is_err());
        let mut bad = Histogram::new();
        bad.sum = 3;
        assert!(Histogram::from_bytes(&bad.to_bytes()).is_err());
        let json = r#"{"sub_bucket_bits":7,"max_trackable":255,"count":1,"min":3,"max":3,"sum":3,
                       "clamped_low":0,"clamped_high":0,"buckets":[[3,4,1]]}"#;
        let err = serde_json::from_str::<Histogram>(json).unwrap_err().to_string();
        assert!(err.contains("(3, 4) is not a bucket"), "{err}");
    }

    proptest! {
        #[test]
        fn round_trips(seed in any::<u64>(), n in 0usize..3000, bits in 8u32..=64) {
            let h = sample(seed, n, u64::MAX >> (64 - bits));
            let bytes = h.to_bytes();
            prop_assert_eq!(&Histogram::from_bytes(&bytes).unwrap(), &h);
            let json = serde_json::to_string(&h).unwrap();
            prop_assert_eq!(serde_json::from_str::<Histogram>(&json).unwrap(), h);
        }

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = Histogram::from_bytes(&bytes);
            // Also past the magic/version/checksum gates, straight into the parser.
            let mut body = b"LH\x01\x07".to_vec();
            body.extend_from_slice(&bytes);
            let _ = Histogram::from_bytes(&with_crc(body));
        }

        #[test]
        fn mutated_encodings_never_panic_and_stay_consistent(seed in any::<u64>(), n in 0usize..300,
                                                              edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
                                                              cut in any::<usize>()) {
            let bytes = sample(seed, n, 1 << 40).to_bytes();
            let mut body = bytes[..bytes.len() - CRC_LEN].to_vec();
            for (at, b) in edits {
                let at = at % body.len();
                body[at] = b;
            }
            body.truncate(HEADER_LEN.max(cut % (body.len() + 1)));
            if let Ok(h) = Histogram::from_bytes(&with_crc(body)) {
                // Whatever was accepted is a valid histogram: it re-encodes and decodes to itself.
                prop_assert_eq!(Histogram::from_bytes(&h.to_bytes()).unwrap(), h.clone());
                prop_assert_eq!(h.iter().map(|(_, _, c)| c).sum::<u64>(), h.count());
            }
        }
    }
}

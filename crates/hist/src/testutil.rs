//! Deterministic value generators shared by the unit tests (no RNG crate, reproducible failures).

/// splitmix64.
pub(crate) struct SplitMix(pub u64);

impl SplitMix {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Log-uniform over `1 ..= 2^bits`: every octave equally likely, like latencies.
    pub(crate) fn log_value(&mut self, bits: u32) -> u64 {
        let octave = self.next_u64() % u64::from(bits.clamp(1, 64));
        let v = self.next_u64() >> (63 - octave);
        v.max(1)
    }

    /// Uniform in `(0, 1]`: never 0, so `ln()` is finite.
    pub(crate) fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Log-normal around `median` with `sigma` decades of spread (Box-Muller).
    pub(crate) fn lognormal(&mut self, median: f64, sigma: f64) -> u64 {
        let z: f64 = (-2.0 * self.unit().ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos();
        (median * 10f64.powf(sigma * z)).round() as u64
    }
}

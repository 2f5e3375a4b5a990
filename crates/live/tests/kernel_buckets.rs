//! The spectrogram draws in-kernel counts with `Buckets::KERNEL`: it must be the probes' scheme.

use latscope_view::spectrogram::Buckets;

#[test]
fn the_spectrogram_reads_kernel_counts_with_the_probes_bucket_scheme() {
    for i in 0..latscope_probe::AGG_BUCKETS - 1 {
        assert_eq!(Buckets::KERNEL.bounds(i), latscope_probe::agg_bucket_bounds(i), "bucket {i}");
    }
    for v in [1u64, 9, 100, 12_345, 99_999_999] {
        assert_eq!(Buckets::KERNEL.index(v), latscope_probe::agg_bucket(v));
    }
}

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * In-kernel aggregation: per-CPU log-linear latency histograms, LS_AGG_GROUPS groups of
 * LS_AGG_BUCKETS buckets, which live views read instead of streaming events. Included by
 * latscope.bpf.c; needs vmlinux.h, the libbpf headers and latscope.h first.
 */
#ifndef LATSCOPE_AGG_BPF_H
#define LATSCOPE_AGG_BPF_H

/* In-kernel histograms: [group][bucket] counts, per CPU; user space sizes the map to the groups
 * its grouping uses (one entry when events are streamed). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LS_AGG_GROUPS * LS_AGG_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} agg SEC(".maps");

/* fd type -> aggregation group for LS_AGG_FDCLASS, fd group for LS_AGG_COMPOSITE (filled by
 * user space). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 32);
	__type(key, __u32);
	__type(value, __u32);
} fdclass SEC(".maps");

/* floor(log2(v)) for v > 0, without a loop (the BPF ISA has no clz). */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, shift;
	shift = (v > 0xffffffffULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xffff) << 4; v >>= shift; r |= shift;
	shift = (v > 0xff) << 3; v >>= shift; r |= shift;
	shift = (v > 0xf) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

/* Log-linear bucket: 16 linear sub-buckets per power of two (mirrored by agg_bucket_bounds in Rust).
 * 16 rather than 8 so that a bucket is narrower than half a column of a terminal spectrogram:
 * with 12.5% buckets, calls of 10.1 ms shared a bucket with 9.5 ms ones and were drawn left of
 * the 10 ms tick. */
static __always_inline __u32 lat_bucket(__u64 v)
{
	if (v < 16)
		return v;
	__u32 e = log2_u64(v);
	__u32 idx = (e - 3) * 16 + ((v >> (e - 4)) & 15);
	return idx < LS_AGG_BUCKETS ? idx : LS_AGG_BUCKETS - 1;
}

/* Bits set in v. */
static __always_inline __u32 popcount32(__u32 v)
{
	v = v - ((v >> 1) & 0x55555555);
	v = (v & 0x33333333) + ((v >> 2) & 0x33333333);
	return (((v + (v >> 4)) & 0x0F0F0F0F) * 0x01010101) >> 24;
}

static __always_inline void agg_add(__u32 group, __u64 lat)
{
	__u32 key = (group % LS_AGG_GROUPS) * LS_AGG_BUCKETS + lat_bucket(lat);
	__u64 *v = bpf_map_lookup_elem(&agg, &key);
	if (v)
		(*v)++; /* no separate event counter: user space sums the histograms */
}

#endif

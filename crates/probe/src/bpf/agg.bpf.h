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

/* Per group: exact latency sum and failed syscalls (sized by user space to the groups in use). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LS_AGG_GROUPS);
	__type(key, __u32);
	__type(value, struct ls_agg_sum);
} agg_sums SEC(".maps");

/* Per block group and operation: queue time, size and bytes (sized by user space to the block
 * groups, which are the groups from agg_blk_base on). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LS_AGG_OPS);
	__type(key, __u32);
	__type(value, struct ls_agg_blk);
} agg_blk SEC(".maps");

/* The first group block requests count in (set by user space before load). */
const volatile __u32 agg_blk_base = 0;

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

/* Counts a latency in a group; `failed`: a syscall that returned a negative value. The exact sum
 * is kept apart because a bucket's middle is up to 3 % off its values (the mean would be too). */
static __always_inline void agg_add(__u32 group, __u64 lat, bool failed)
{
	group %= LS_AGG_GROUPS;
	__u32 key = group * LS_AGG_BUCKETS + lat_bucket(lat);
	__u64 *v = bpf_map_lookup_elem(&agg, &key);
	if (v)
		(*v)++; /* no separate event counter: user space sums the histograms */
	struct ls_agg_sum *s = bpf_map_lookup_elem(&agg_sums, &group);
	if (s) {
		s->lat += lat;
		s->errors += failed;
	}
}

/* A block request's queue time, size and bytes, by group and operation (REQ_OP_*). */
static __always_inline void agg_blk_add(__u32 group, __u32 op, __u64 qtime, __u64 bytes)
{
	__u32 key = (group - agg_blk_base) * LS_AGG_OPS +
		    (op == 0 ? LS_AGG_OP_READ : op == 1 ? LS_AGG_OP_WRITE : LS_AGG_OP_OTHER);
	struct ls_agg_blk *b = bpf_map_lookup_elem(&agg_blk, &key);
	if (!b)
		return;
	b->bytes += bytes;
	b->qtime += qtime;
	__u32 i = lat_bucket(qtime);
	if (i < LS_AGG_BUCKETS)
		b->queue[i]++;
	i = lat_bucket(bytes);
	if (i < LS_AGG_BUCKETS)
		b->size[i]++;
}

#endif

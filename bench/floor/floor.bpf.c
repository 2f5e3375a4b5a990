// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The cost floor of a syscall-latency tracer, for bench/spectrogram.sh: what any tool that
 * measures every syscall's latency on raw_syscalls enter/exit pays before doing anything useful.
 *   variant 0: two empty programs (the tracepoint and BPF trampoline cost alone);
 *   variant 1: the least a latency histogram needs: the entry time in task storage, the exit
 *              time, one per-CPU counter bumped (the design of latscope's in-kernel spectrogram,
 *              without its syscall table, pid/comm filter or log-linear bucketing);
 *   variant 2: the least a recorder of every call needs: variant 1's two clock reads, and a
 *              32-byte record (start, latency, result, thread, syscall) reserved and submitted
 *              in a ring buffer per call, which the loader drains.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile int variant = 0;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20);
} ring SEC(".maps");

struct rec {
	__u64 ts, lat;
	__s64 ret;
	__u32 tid, nr;
};

SEC("tp_btf/sys_enter")
int BPF_PROG(floor_enter, struct pt_regs *regs, long id)
{
	if (variant == 0)
		return 0;
	__u64 *ts = bpf_task_storage_get(&start, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (ts)
		*ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(floor_exit, struct pt_regs *regs, long ret)
{
	if (variant == 0)
		return 0;
	__u64 *ts = bpf_task_storage_get(&start, bpf_get_current_task_btf(), 0, 0);
	if (!ts || !*ts)
		return 0;
	__u64 start = *ts, lat = bpf_ktime_get_ns() - start;
	*ts = 0;
	if (variant == 2) {
		struct rec *r = bpf_ringbuf_reserve(&ring, sizeof(*r), 0);
		if (!r) {
			__u32 lost = 63; /* the last counter doubles as the count of records lost */
			__u64 *c = bpf_map_lookup_elem(&counts, &lost);
			if (c)
				(*c)++;
			return 0;
		}
		r->ts = start;
		r->lat = lat;
		r->ret = ret;
		r->tid = (__u32)bpf_get_current_pid_tgid();
		r->nr = regs->orig_ax;
		/* Woken by the loader's clock, not per record (as latscope batches its wake-ups). */
		bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
		return 0;
	}
	__u32 k = lat >> 10; /* 1 us wide buckets: the bucketing's few instructions do not matter here */
	if (k > 63)
		k = 63;
	__u64 *c = bpf_map_lookup_elem(&counts, &k);
	if (c)
		(*c)++;
	return 0;
}

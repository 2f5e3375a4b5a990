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
 *              in a ring buffer per call, which the loader drains;
 *   variant 3: variant 2's record written in place in a per-CPU ring that user space maps, with
 *              no helper call to reserve or submit it (x86 only: see floor_exit_pcpu): the
 *              cheapest output that can be lossless, since a full ring is counted, not
 *              overwritten. Its sys_exit program is floor_exit_pcpu (the loader loads one of
 *              the two), so that variants 0-2's code stays as it was.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "floor.h"

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

/* Variant 3's rings (floor.h): one array element per possible CPU (the loader sets max_entries),
 * mapped by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pcpu_ring);
} pcpu_ring SEC(".maps");

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

SEC("tp_btf/sys_exit")
int BPF_PROG(floor_exit_pcpu, struct pt_regs *regs, long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 *ts = bpf_task_storage_get(&start, task, 0, 0);
	if (!ts || !*ts)
		return 0;
	__u64 start = *ts, lat = bpf_ktime_get_ns() - start;
	*ts = 0;
	/* An array map's lookup and get_smp_processor_id are inlined by the verifier (x86, 6.10+):
	 * no call here; nor for the thread id, read from the task itself. */
	__u32 cpu = bpf_get_smp_processor_id();
	struct pcpu_ring *pr = bpf_map_lookup_elem(&pcpu_ring, &cpu);
	if (!pr)
		return 0;
	__u64 head = pr->head, tail = *(volatile __u64 *)&pr->tail;
	if (head - tail >= PCPU_SLOTS) {
		__u32 lost = 63; /* as variant 2 */
		__u64 *c = bpf_map_lookup_elem(&counts, &lost);
		if (c)
			(*c)++;
		return 0;
	}
	struct rec *r = &pr->slot[head & (PCPU_SLOTS - 1)];
	r->ts = start;
	r->lat = lat;
	r->ret = ret;
	r->tid = task->pid;
	r->nr = regs->orig_ax;
	/* Published by a plain store after the record's: x86 (TSO) keeps stores in order, and the
	 * barrier keeps the compiler from moving them. Other architectures would need a
	 * store-release here (and a load-acquire of tail above). */
	asm volatile("" ::: "memory");
	*(volatile __u64 *)&pr->head = head + 1;
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The records and per-CPU rings floor.bpf.c writes and floor.c reads (after vmlinux.h or
 * linux/types.h). */
#ifndef FLOOR_H
#define FLOOR_H

struct rec {
	__u64 ts, lat;
	__s64 ret;
	__u32 tid, nr;
};

/* Variant 3's ring, one per possible CPU. head is written only by BPF on that CPU (one writer: the
 * syscall tracepoints run their programs with preemption off, and the kernel skips rather than
 * nests a program's second run on a CPU), tail only by user space; each on its own cache line
 * so that the reader's polling does not take the writer's line away at every store. */
#define PCPU_SLOTS (1u << 16)
struct pcpu_ring {
	__u64 head;
	__u64 pad0[7];
	__u64 tail;
	__u64 pad1[7];
	struct rec slot[PCPU_SLOTS];
};

#endif

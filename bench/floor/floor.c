// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Loads floor.bpf.c's variant N, attaches it and waits for SIGINT/SIGTERM (variants 2 and 3:
 * draining their rings every 10 ms, then saying how many records they read and lost).
 * usage: floor N */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <linux/types.h>
#include "floor.h"
#include "floor.skel.h"

static unsigned long long records;
static int on_record(void *ctx, void *data, size_t size)
{
	(void)ctx, (void)data, (void)size;
	records++;
	return 0;
}

/* Variant 3: reads each CPU's ring from tail to head, then gives the slots back (tail = head).
 * x86 only, as the BPF side: loads are not reordered with loads, nor stores with earlier loads,
 * so the barriers need only hold the compiler. */
unsigned long long pcpu_sum; /* of the fields read, global so that the reads stay real */
static void pcpu_drain(char *base, size_t stride, int ncpu)
{
	for (int i = 0; i < ncpu; i++) {
		struct pcpu_ring *pr = (struct pcpu_ring *)(base + i * stride);
		__u64 head = *(volatile __u64 *)&pr->head, tail = pr->tail;
		__asm__ volatile("" ::: "memory");
		for (; tail != head; tail++) {
			const struct rec *r = &pr->slot[tail & (PCPU_SLOTS - 1)];
			pcpu_sum += r->ts + r->lat + r->ret + r->tid + r->nr;
			records++;
		}
		__asm__ volatile("" ::: "memory");
		*(volatile __u64 *)&pr->tail = head;
	}
}

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv)
{
	struct floor_bpf *skel = floor_bpf__open();
	if (!skel) {
		fprintf(stderr, "floor: cannot open the BPF object\n");
		return 1;
	}
	int variant = argc > 1 ? atoi(argv[1]) : 0, ncpu = libbpf_num_possible_cpus();
	skel->rodata->variant = variant;
	/* One sys_exit program of the two: variant 3's is a program of its own. */
	bpf_program__set_autoload(variant == 3 ? skel->progs.floor_exit : skel->progs.floor_exit_pcpu, false);
	if (variant == 3 && ncpu > 0)
		bpf_map__set_max_entries(skel->maps.pcpu_ring, ncpu); /* a ring per possible CPU */
	if (floor_bpf__load(skel) || floor_bpf__attach(skel)) {
		fprintf(stderr, "floor: cannot load or attach the programs (root? BTF?)\n");
		floor_bpf__destroy(skel);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	struct ring_buffer *rb = NULL;
	char *pcpu = NULL;
	/* An mmapable array's elements are 8-byte aligned and laid out from the mapping's start. */
	size_t stride = (sizeof(struct pcpu_ring) + 7) & ~(size_t)7, len = stride * (ncpu > 0 ? ncpu : 1);
	if (variant == 3) {
		pcpu = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(skel->maps.pcpu_ring), 0);
		if (pcpu == MAP_FAILED) {
			fprintf(stderr, "floor: cannot map the per-CPU rings\n");
			floor_bpf__destroy(skel);
			return 1;
		}
	}
	if (variant == 2) {
		rb = ring_buffer__new(bpf_map__fd(skel->maps.ring), on_record, NULL, NULL);
		if (!rb) {
			fprintf(stderr, "floor: cannot map the ring buffer\n");
			floor_bpf__destroy(skel);
			return 1;
		}
	}
	while (!stop) {
		if (rb) {
			usleep(10000);
			ring_buffer__consume(rb);
		} else if (pcpu) {
			usleep(10000);
			pcpu_drain(pcpu, stride, ncpu);
		} else {
			pause();
		}
	}
	if (rb || pcpu) {
		if (rb)
			ring_buffer__consume(rb);
		else
			pcpu_drain(pcpu, stride, ncpu);
		unsigned long long lost = 0, per[ncpu > 0 ? ncpu : 1];
		__u32 key = 63;
		if (ncpu > 0 && !bpf_map__lookup_elem(skel->maps.counts, &key, sizeof(key), per, sizeof(per), 0))
			for (int i = 0; i < ncpu; i++)
				lost += per[i];
		fprintf(stderr, "floor: %llu records read, %llu lost\n", records, lost);
		ring_buffer__free(rb);
		if (pcpu)
			munmap(pcpu, len);
	}
	floor_bpf__destroy(skel);
	return 0;
}

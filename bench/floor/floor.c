// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Loads floor.bpf.c's variant N, attaches it and waits for SIGINT/SIGTERM (variant 2: draining
 * its ring buffer every 10 ms, then saying how many records it read and lost). usage: floor N */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "floor.skel.h"

static unsigned long long records;
static int on_record(void *ctx, void *data, size_t size)
{
	(void)ctx, (void)data, (void)size;
	records++;
	return 0;
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
	skel->rodata->variant = argc > 1 ? atoi(argv[1]) : 0;
	if (floor_bpf__load(skel) || floor_bpf__attach(skel)) {
		fprintf(stderr, "floor: cannot load or attach the programs (root? BTF?)\n");
		floor_bpf__destroy(skel);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	struct ring_buffer *rb = NULL;
	if (skel->rodata->variant == 2) {
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
		} else {
			pause();
		}
	}
	if (rb) {
		ring_buffer__consume(rb);
		int ncpu = libbpf_num_possible_cpus();
		unsigned long long lost = 0, per[ncpu > 0 ? ncpu : 1];
		__u32 key = 63;
		if (ncpu > 0 && !bpf_map__lookup_elem(skel->maps.counts, &key, sizeof(key), per, sizeof(per), 0))
			for (int i = 0; i < ncpu; i++)
				lost += per[i];
		fprintf(stderr, "floor: %llu records read, %llu lost\n", records, lost);
		ring_buffer__free(rb);
	}
	floor_bpf__destroy(skel);
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Loads floor.bpf.c's variant N, attaches it and waits for SIGINT/SIGTERM. usage: floor N */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "floor.skel.h"

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
	while (!stop)
		pause();
	floor_bpf__destroy(skel);
	return 0;
}

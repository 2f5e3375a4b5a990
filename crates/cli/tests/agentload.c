/*
 * Known workload for the agent tests.
 *
 * usage: agentload sleep N     N x clock_nanosleep(10 ms); prints each call's duration in ns
 *                              (CLOCK_MONOTONIC around the call), one per line
 *        agentload calls K     one call each of K different cheap syscalls (K <= 12)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 3) { fprintf(stderr, "usage: agentload sleep|calls N\n"); return 2; }
	int n = atoi(argv[2]);
	if (!strcmp(argv[1], "sleep")) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		for (int i = 0; i < n; i++) {
			long long t0 = now_ns();
			syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, NULL);
			printf("%lld\n", now_ns() - t0);
		}
		return 0;
	}
	long calls[] = { SYS_getpid, SYS_getppid, SYS_getuid, SYS_getgid, SYS_geteuid, SYS_getegid,
			 SYS_gettid, SYS_getpgrp, SYS_getsid, SYS_sched_yield, SYS_getpriority, SYS_umask };
	for (int i = 0; i < n && i < 12; i++) {
		if (calls[i] == SYS_getpriority)
			syscall(calls[i], 0, 0);
		else if (calls[i] == SYS_umask)
			syscall(calls[i], 022);
		else if (calls[i] == SYS_getsid)
			syscall(calls[i], 0);
		else
			syscall(calls[i]);
	}
	return 0;
}

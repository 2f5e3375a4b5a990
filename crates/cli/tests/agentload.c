/*
 * Known workload for the agent tests.
 *
 * usage: agentload sleep N [MS] N x clock_nanosleep(MS ms, default 10); prints each call's duration in ns
 *                              (CLOCK_MONOTONIC around the call), one per line; under SCHED_FIFO
 *                              when allowed, so that nothing runs between the call's return and
 *                              the clock read
 *        agentload calls K     one call each of K different cheap syscalls (K <= 12)
 *        agentload fail N      N x fchdir(-1) (fails: EBADF) and N x fchdir on a directory (succeeds)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
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
	if (argc != 3 && argc != 4) { fprintf(stderr, "usage: agentload sleep|calls|fail N [MS]\n"); return 2; }
	int n = atoi(argv[2]);
	if (!strcmp(argv[1], "fail")) {
		int dir = open(".", O_RDONLY | O_DIRECTORY);
		if (dir < 0) { perror("open ."); return 1; }
		for (int i = 0; i < n; i++) {
			if (syscall(SYS_fchdir, -1) != -1) { fprintf(stderr, "fchdir(-1) succeeded\n"); return 1; }
			if (syscall(SYS_fchdir, dir) != 0) { perror("fchdir"); return 1; }
		}
		return 0;
	}
	if (!strcmp(argv[1], "sleep")) {
		long ms = argc == 4 ? atol(argv[3]) : 10;
		struct timespec ts = { ms / 1000, (ms % 1000) * 1000 * 1000 };
		struct sched_param sp = { .sched_priority = 1 };
		sched_setscheduler(0, SCHED_FIFO, &sp); /* best effort */
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

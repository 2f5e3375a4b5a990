/*
 * The two workloads of bench/why.sh (what attribution costs), each printing
 * "wall_ns cpu_ns calls" (totals: CLOCK_MONOTONIC, the process's user + system CPU time, and
 * the syscalls made):
 *
 *   whyloop short N   N 1-byte read()s of /dev/zero: short calls that never block
 *   whyloop block N   two threads pinned to one CPU pass a byte back and forth through two
 *                     pipes N times: every read blocks, so each call is switched out, woken
 *                     and switched in (4 syscalls per round trip)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long cpu_ns(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000000000LL +
	       (r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1000LL;
}

static int ping[2], pong[2];
static long rounds;

static void pin(void)
{
	/* Both threads on the CPU the program started on: each blocking read switches to the other. */
	static int cpu = -1;
	if (cpu < 0)
		cpu = sched_getcpu();
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

static void *echo(void *arg)
{
	(void)arg;
	pin();
	char c;
	for (long i = 0; i < rounds; i++) {
		if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1)
			exit(1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: whyloop short|block N\n");
		return 2;
	}
	long n = atol(argv[2]);
	long long w0, c0, calls;
	if (!strcmp(argv[1], "short")) {
		int fd = open("/dev/zero", O_RDONLY);
		char c;
		w0 = now_ns();
		c0 = cpu_ns();
		for (long i = 0; i < n; i++)
			if (read(fd, &c, 1) != 1)
				return 1;
		calls = n;
	} else if (!strcmp(argv[1], "block")) {
		if (pipe(ping) || pipe(pong))
			return 1;
		rounds = n;
		pin();
		pthread_t t;
		pthread_create(&t, NULL, echo, NULL);
		char c = 'x';
		w0 = now_ns();
		c0 = cpu_ns();
		for (long i = 0; i < n; i++)
			if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
				return 1;
		pthread_join(t, NULL);
		calls = 4 * n;
	} else {
		fprintf(stderr, "unknown workload %s\n", argv[1]);
		return 2;
	}
	printf("%lld %lld %lld\n", now_ns() - w0, cpu_ns() - c0, calls);
	return 0;
}

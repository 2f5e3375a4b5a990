/*
 * On-CPU samples against the CPU clock (tests/why_stacks.rs): the main thread runs two leaf
 * functions, hot_a with 7 parts of the work and hot_b with 3, for SECS seconds of CPU, and
 * prints the CPU time each took by its own clock (`a_ns`, `b_ns`). Built without frame pointers,
 * as most programs are.
 *
 *   profile SECS
 *   profile -n ROUNDS    a fixed amount of work instead (bench/profile.sh): ROUNDS rounds of the
 *                        two, whatever samples it, so that what a profiler adds to its CPU time
 *                        is the profiler's
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) void hot_a(long n)
{
	for (long i = 0; i < n; i++)
		sink += i * 3;
}

__attribute__((noinline)) void hot_b(long n)
{
	for (long i = 0; i < n; i++)
		sink ^= i * 7;
}

static long long cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "-n")) {
		for (long r = atol(argv[2]); r > 0; r--) {
			hot_a(7000000);
			hot_b(3000000);
		}
		return 0;
	}
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	long long a = 0, b = 0, t0 = cpu_ns(), end = t0 + (long long)(secs * 1e9);
	while (cpu_ns() < end) {
		long long t1 = cpu_ns();
		hot_a(7000000);
		long long t2 = cpu_ns();
		hot_b(3000000);
		a += t2 - t1;
		b += cpu_ns() - t2;
	}
	printf("a_ns %lld\nb_ns %lld\n", a, b);
	return 0;
}

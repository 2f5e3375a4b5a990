/*
 * A fixed amount of CPU work for bench/profile.sh: ROUNDS rounds of two leaf functions (7 parts
 * of work to 3), whatever samples it: what a profiler adds to its CPU time is the profiler's.
 *
 *   profile-work ROUNDS
 */
#include <stdlib.h>

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

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 100;
	for (long r = 0; r < rounds; r++) {
		hot_a(7000000);
		hot_b(3000000);
	}
	return 0;
}

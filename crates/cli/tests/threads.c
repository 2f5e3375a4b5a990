/*
 * Many threads on few CPUs, so that syscalls are preempted, block and migrate while traced:
 * THREADS threads each make CALLS getppid() calls and SLEEPS nanosleep(1 ms) calls, interleaved.
 * The recording must hold exactly those calls per thread, each with its own latency (a sleep
 * never shorter than asked, a getppid never as long as a sleep). Needs -pthread.
 * usage: threads THREADS CALLS SLEEPS
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long calls, sleeps;

static void *run(void *arg)
{
	(void)arg;
	struct timespec ms = { 0, 1000000 };
	long every = calls / (sleeps ? sleeps : 1);
	for (long i = 0; i < calls; i++) {
		getppid();
		if (sleeps && i % every == every - 1 && i / every < sleeps)
			nanosleep(&ms, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 8;
	calls = argc > 2 ? atol(argv[2]) : 20000;
	sleeps = argc > 3 ? atol(argv[3]) : 20;
	pthread_t t[64];
	if (n > 64)
		n = 64;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/*
 * User stacks of code built without frame pointers (tests/why_stacks.rs): the main thread
 * sleeps three functions deep, twice, while a second thread waits for a lock it holds, two
 * functions deep; then the process exits at once (before the recorder has read its stacks).
 * Built with -O2 -fomit-frame-pointer, as most distributions build: only the binaries' unwind
 * tables (.eh_frame) lead from the C library's frames back to main. Prints `main TID`.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) void leaf_sleep(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, 0);
	__asm__ volatile("");
}

__attribute__((noinline)) void middle_layer(long ms)
{
	volatile char pad[256];
	pad[0] = 1;
	leaf_sleep(ms);
	__asm__ volatile("" ::"r"(pad));
}

__attribute__((noinline)) void outer_layer(long ms)
{
	volatile char pad[64];
	pad[0] = 1;
	middle_layer(ms);
	__asm__ volatile("" ::"r"(pad));
}

__attribute__((noinline)) void wait_for_lock(void)
{
	pthread_mutex_lock(&lock);
	pthread_mutex_unlock(&lock);
	__asm__ volatile("");
}

__attribute__((noinline)) void *lock_thread(void *arg)
{
	(void)arg;
	wait_for_lock();
	return 0;
}

int main(void)
{
	pthread_t t;
	pthread_mutex_lock(&lock);
	pthread_create(&t, 0, lock_thread, 0);
	outer_layer(40);
	pthread_mutex_unlock(&lock);
	pthread_join(t, 0);
	outer_layer(40);
	printf("main %d\n", (int)gettid());
	return 0;
}

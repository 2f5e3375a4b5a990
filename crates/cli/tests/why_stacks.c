/*
 * Workload for the stack tests of `record --why` (tests/why_stacks.rs), built with frame
 * pointers. The main thread waits, in functions of its own, for two known causes:
 *
 *   why_stacks N MS   N rounds: a thread holds a lock MS ms while the main thread waits for it in
 *                     futex (wait_for_holder), then the main thread sleeps MS/4 ms (take_a_nap)
 *
 * Meanwhile a third thread (napper) naps 5 times in two ways: in a function inlined into another
 * (nap_inline into nap_outer, a `syscall` instruction), and in libc's clock_nanosleep (from
 * libc_nap; libc, built without frame pointers, is named through its dynamic symbol table).
 *
 * Prints `main TID`, `napper TID`, `lock_ns` (release minus wait start, summed over the waits the
 * release ended), `lock_waits` (their number) and `nap_ns`
 * (the sleeps' wall time, summed). The futex wait is a `syscall` instruction inside wait_for_holder itself, so
 * that its frame is the user stack's first whatever libc's wrappers do with frame pointers.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long long ns_of(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&t, &t))
		;
}

static atomic_int word;   /* 0 free, 1 held */
static atomic_int round_; /* the holder takes the lock for round r when round_ == r */
static atomic_int waiting; /* the main thread is about to wait for round r's lock */
static long hold_ms, rounds;
static long long released[1000];

static void *holder(void *arg)
{
	(void)arg;
	for (long r = 1; r <= rounds; r++) {
		while (atomic_load(&round_) != r)
			sleep_ms(1);
		atomic_store(&word, 1);
		atomic_store(&round_, -r);
		/* The hold starts once the main thread is at its wait, so that a busy host delaying it
		 * shortens no wait to nothing. */
		while (atomic_load(&waiting) != r)
			sched_yield();
		sleep_ms(hold_ms);
		atomic_store(&word, 0);
		released[r - 1] = ns_of(CLOCK_MONOTONIC);
		syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	return NULL;
}

/* futex(&word, FUTEX_WAIT_PRIVATE, 1) with the syscall instruction here. */
__attribute__((noinline)) long wait_for_holder(void)
{
	register long r10 asm("r10") = 0;
	long ret;
	asm volatile("syscall"
		     : "=a"(ret)
		     : "0"((long)SYS_futex), "D"(&word), "S"((long)FUTEX_WAIT_PRIVATE), "d"(1L), "r"(r10)
		     : "rcx", "r11", "memory");
	return ret;
}

/* nanosleep, likewise from here. */
__attribute__((noinline)) void take_a_nap(long ms)
{
	struct timespec t = { 0, ms * 1000000L };
	register long r10 asm("r10") = 0;
	long ret;
	asm volatile("syscall"
		     : "=a"(ret)
		     : "0"((long)SYS_nanosleep), "D"(&t), "S"(0L), "d"(0L), "r"(r10)
		     : "rcx", "r11", "memory");
	(void)ret;
}

/* A nanosleep of `ms` with the syscall instruction here, inlined into its caller. */
static inline __attribute__((always_inline)) void nap_inline(long ms)
{
	struct timespec t = { 0, ms * 1000000L };
	register long r10 asm("r10") = 0;
	long ret;
	asm volatile("syscall" /* nap_inline's syscall */
		     : "=a"(ret)
		     : "0"((long)SYS_nanosleep), "D"(&t), "S"(0L), "d"(0L), "r"(r10)
		     : "rcx", "r11", "memory");
	(void)ret;
}

__attribute__((noinline)) void nap_outer(long ms)
{
	nap_inline(ms);
	asm volatile("" ::: "memory");
}

/* libc's clock_nanosleep, which the recorded stack names from libc's .dynsym. */
__attribute__((noinline)) void libc_nap(long ms)
{
	struct timespec t = { 0, ms * 1000000L };
	clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
	asm volatile("" ::: "memory");
}

static void *napper(void *arg)
{
	long ms = (long)arg;
	printf("napper %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	for (int i = 0; i < 5; i++) {
		nap_outer(ms);
		libc_nap(ms);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: why_stacks N MS\n");
		return 2;
	}
	rounds = atol(argv[1]);
	hold_ms = atol(argv[2]);
	if (rounds < 1 || rounds > 1000 || hold_ms < 4)
		return 2;
	printf("main %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	pthread_t t, n;
	pthread_create(&n, NULL, napper, (void *)(hold_ms / 4));
	pthread_create(&t, NULL, holder, NULL);
	long long lock_ns = 0, nap_ns = 0, lock_waits = 0;
	for (long r = 1; r <= rounds; r++) {
		atomic_store(&round_, r);
		while (atomic_load(&round_) != -r)
			sched_yield();
		/* Only a wait the release ended counts: one the main thread reached after the release
		 * (EAGAIN, a busy host) did not wait for the lock. */
		while (atomic_load(&word) == 1) {
			atomic_store(&waiting, r);
			long long start = ns_of(CLOCK_MONOTONIC);
			if (wait_for_holder() == 0) {
				lock_ns += released[r - 1] > start ? released[r - 1] - start : 0;
				lock_waits++;
			}
		}
		long long n0 = ns_of(CLOCK_MONOTONIC);
		take_a_nap(hold_ms / 4);
		nap_ns += ns_of(CLOCK_MONOTONIC) - n0;
	}
	pthread_join(t, NULL);
	pthread_join(n, NULL);
	printf("lock_ns %lld\nnap_ns %lld\nlock_waits %lld\n", lock_ns, nap_ns, lock_waits);
	return 0;
}

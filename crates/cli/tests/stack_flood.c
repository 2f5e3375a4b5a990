/*
 * An unprivileged process that tries to blind `record --why --stacks` (tests/why_stacks.rs):
 * it maps PAGES executable pages, each alone between two inaccessible ones (2 x PAGES mappings,
 * a /proc/PID/maps of megabytes), puts in each a function of its own that makes a 20 us
 * nanosleep system call itself, and calls them in turn ROUNDS times: every call blocks (a
 * timer) from an address no call used before, so every call has a new user stack.
 *
 *   stack_flood PAGES ROUNDS UID   drops to UID (and its group) once its pages are ready
 *
 * Prints `ready PID` once set up, `flooded` once it has made 10,000 calls (more new stacks
 * than a stack map of 8192 entries holds), and `calls N` at the end.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static struct timespec one_ns = { 0, 20000 };

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: stack_flood PAGES ROUNDS UID\n");
		return 2;
	}
	long pages = atol(argv[1]), rounds = atol(argv[2]);
	uid_t uid = (uid_t)atol(argv[3]);
	long pg = sysconf(_SC_PAGESIZE);
	/* Short sleeps: no timer slack (each still blocks, for a timer). */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	uint8_t *base = mmap(NULL, 2 * pages * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	uint64_t ts = (uint64_t)(uintptr_t)&one_ns;
	for (long i = 0; i < pages; i++) {
		uint8_t *p = base + 2 * i * pg;
		if (mprotect(p, pg, PROT_READ | PROT_WRITE)) {
			perror("mprotect");
			return 1;
		}
		/* mov eax, SYS_nanosleep; mov rdi, &one_ns; xor esi, esi; syscall; ret */
		uint8_t code[] = { 0xb8, 35, 0, 0, 0, 0x48, 0xbf, 0, 0, 0, 0, 0, 0, 0, 0, 0x31, 0xf6, 0x0f, 0x05, 0xc3 };
		memcpy(code + 7, &ts, 8);
		memcpy(p, code, sizeof(code));
		if (mprotect(p, pg, PROT_READ | PROT_EXEC)) {
			perror("mprotect");
			return 1;
		}
	}
	if (setgid(uid) || setuid(uid)) {
		perror("setuid");
		return 1;
	}
	printf("ready %d\n", getpid());
	fflush(stdout);
	long calls = 0;
	for (long r = 0; r < rounds; r++) {
		for (long i = 0; i < pages; i++) {
			((void (*)(void))(base + 2 * i * pg))();
			if (++calls == 10000) {
				printf("flooded\n");
				fflush(stdout);
			}
		}
	}
	printf("calls %ld\n", calls);
	return 0;
}

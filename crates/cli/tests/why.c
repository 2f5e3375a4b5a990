/*
 * Hidden-cause workloads with a known answer, for the attribution tests (tests/why.rs).
 * Each mode makes calls whose latency has one dominant cause and prints what the test needs
 * (thread ids of wakers) on stdout as `key value` lines.
 *
 *   why runq N           two busy threads pinned to the CPU of a thread that makes N reads of 32 MiB of
 *                        /dev/zero; prints the wall and CPU time the calls took (ground truth)
 *   why futex N MS       a thread holds a lock MS ms while the main thread waits in futex, N times
 *   why pipe N MS        a writer sleeps MS ms then writes; the main thread reads, N times
 *   why sleep N MS       nanosleep MS ms, N times
 *   why fault FILE N     write()s to a pipe from N uncached pages of a mmap'd FILE
 *   why fsync FILE N     N times: write 64 KiB to FILE (a block device or a file) and fsync it
 *   why fsynclock FILE N a thread holds a lock while it writes 64 KiB to FILE and fsyncs it; the
 *                        main thread waits for the lock, N times; prints the fsyncs' time
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

/* ---- run queue ---- */
static atomic_int stop;

static atomic_int nspin;

static void *spin(void *arg)
{
	pin((int)(long)arg);
	printf("spinner%d %ld\n", atomic_fetch_add(&nspin, 1), (long)syscall(SYS_gettid));
	volatile unsigned long x = 0;
	while (!atomic_load(&stop))
		x++;
	return NULL;
}

static long long ns_of(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void do_runq(long n)
{
	int cpu = sched_getcpu();
	pin(cpu);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, spin, (void *)(long)cpu);
	sleep_ms(50);
	/* Reads of 32 MiB of /dev/zero: kernel work that yields to the spinners at its
	 * rescheduling points. The thread's own CPU time in the calls is the ground truth of the
	 * on-CPU part; the rest of their wall time it waited for the CPU. */
	int z = open("/dev/zero", O_RDONLY);
	static char buf[32 << 20];
	long long wall = 0, cpu_ns = 0;
	for (long i = 0; i < n; i++) {
		long long c0 = ns_of(CLOCK_THREAD_CPUTIME_ID), w0 = ns_of(CLOCK_MONOTONIC);
		if (read(z, buf, sizeof(buf)) != sizeof(buf))
			die("read");
		long long w1 = ns_of(CLOCK_MONOTONIC), c1 = ns_of(CLOCK_THREAD_CPUTIME_ID);
		wall += w1 - w0;
		cpu_ns += c1 - c0;
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("wall_ns %lld\ncpu_ns %lld\n", wall, cpu_ns);
}

/* ---- futex ---- */
#define MAXN 1000
static long long wait_start[MAXN], released[MAXN]; /* ground truth, per round */
static atomic_int word;   /* 0 free, 1 held */
static atomic_int round_; /* the holder takes the lock for round r when round_ == r */
static long hold_ms;

static void *holder(void *arg)
{
	long n = (long)arg;
	printf("holder %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	for (long r = 1; r <= n; r++) {
		while (atomic_load(&round_) != r)
			sleep_ms(1);
		atomic_store(&word, 1);
		atomic_store(&round_, -r); /* tell the waiter the lock is held */
		sleep_ms(hold_ms);
		atomic_store(&word, 0);
		released[r - 1] = ns_of(CLOCK_MONOTONIC);
		syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	return NULL;
}

static void do_futex(long n, long ms)
{
	hold_ms = ms;
	pthread_t t;
	pthread_create(&t, NULL, holder, (void *)n);
	for (long r = 1; r <= n; r++) {
		atomic_store(&round_, r);
		while (atomic_load(&round_) != -r)
			sched_yield();
		wait_start[r - 1] = ns_of(CLOCK_MONOTONIC);
		while (atomic_load(&word) == 1)
			syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
	}
	pthread_join(t, NULL);
	long long truth = 0;
	for (long r = 0; r < n; r++)
		truth += released[r] > wait_start[r] ? released[r] - wait_start[r] : 0;
	printf("blocked_ns %lld\n", truth);
}

/* ---- pipe ---- */
static int pfd[2];

static void *writer(void *arg)
{
	long n = (long)arg;
	printf("writer %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	char c = 'x';
	for (long i = 0; i < n; i++) {
		sleep_ms(hold_ms);
		released[i] = ns_of(CLOCK_MONOTONIC);
		if (write(pfd[1], &c, 1) != 1)
			die("write");
	}
	return NULL;
}

static void do_pipe(long n, long ms)
{
	hold_ms = ms;
	if (pipe(pfd))
		die("pipe");
	pthread_t t;
	pthread_create(&t, NULL, writer, (void *)n);
	char c;
	for (long i = 0; i < n; i++) {
		wait_start[i] = ns_of(CLOCK_MONOTONIC);
		if (read(pfd[0], &c, 1) != 1)
			die("read");
	}
	pthread_join(t, NULL);
	long long truth = 0;
	for (long i = 0; i < n; i++)
		truth += released[i] > wait_start[i] ? released[i] - wait_start[i] : 0;
	printf("blocked_ns %lld\n", truth);
}

/* ---- page faults ---- */
static void do_fault(const char *path, long n)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die("open");
	struct stat st;
	fstat(fd, &st);
	long pg = sysconf(_SC_PAGESIZE);
	if (st.st_size < n * pg * 64)
		die("file too small");
	/* Out of the page cache, and no read-ahead: each touched page is a major fault. */
	fdatasync(fd);
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		die("fadvise");
	char *m = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		die("mmap");
	madvise(m, st.st_size, MADV_RANDOM);
	int p[2];
	if (pipe(p))
		die("pipe");
	char buf[64];
	struct rusage ru0, ru1;
	getrusage(RUSAGE_THREAD, &ru0);
	for (long i = 0; i < n; i++) {
		/* write() copies from the mapping: the copy faults the page in, inside the call. */
		if (write(p[1], m + i * 64 * pg, 64) != 64)
			die("write");
		if (read(p[0], buf, sizeof(buf)) != 64)
			die("read");
	}
	getrusage(RUSAGE_THREAD, &ru1);
	printf("majflt %ld\n", ru1.ru_majflt - ru0.ru_majflt);
}

/* ---- fsync ---- */
static void do_fsync(const char *path, long n)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0600);
	if (fd < 0)
		die("open");
	static char buf[65536];
	memset(buf, 'a', sizeof(buf));
	for (long i = 0; i < n; i++) {
		if (pwrite(fd, buf, sizeof(buf), i * (off_t)sizeof(buf)) != sizeof(buf))
			die("pwrite");
		if (fsync(fd))
			die("fsync");
	}
	close(fd);
}

/* ---- a lock held across an fsync (the cascade through block I/O) ---- */
static int lock_fd;
static long long fsync_ns; /* ground truth: the holder's time in fsync */

static void *fsync_holder(void *arg)
{
	long n = (long)arg;
	printf("holder %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	static char buf[65536];
	memset(buf, 'b', sizeof(buf));
	for (long r = 1; r <= n; r++) {
		while (atomic_load(&round_) != r)
			sleep_ms(1);
		atomic_store(&word, 1);
		atomic_store(&round_, -r); /* tell the waiter the lock is held */
		if (pwrite(lock_fd, buf, sizeof(buf), r * (off_t)sizeof(buf)) != sizeof(buf))
			die("pwrite");
		long long t0 = ns_of(CLOCK_MONOTONIC);
		if (fsync(lock_fd))
			die("fsync");
		fsync_ns += ns_of(CLOCK_MONOTONIC) - t0;
		atomic_store(&word, 0);
		syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	return NULL;
}

static void do_fsynclock(const char *path, long n)
{
	lock_fd = open(path, O_WRONLY | O_CREAT, 0600);
	if (lock_fd < 0)
		die("open");
	pthread_t t;
	pthread_create(&t, NULL, fsync_holder, (void *)n);
	for (long r = 1; r <= n; r++) {
		atomic_store(&round_, r);
		while (atomic_load(&round_) != -r)
			sched_yield();
		while (atomic_load(&word) == 1)
			syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
	}
	pthread_join(t, NULL);
	printf("fsync_ns %lld\n", fsync_ns);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: why MODE ARGS\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("main %ld\n", (long)syscall(SYS_gettid));
	const char *m = argv[1];
	if (argc > 2 && atol(argv[2]) > MAXN) {
		fprintf(stderr, "at most %d rounds\n", MAXN);
		return 2;
	}
	if (!strcmp(m, "runq"))
		do_runq(atol(argv[2]));
	else if (!strcmp(m, "futex") && argc > 3)
		do_futex(atol(argv[2]), atol(argv[3]));
	else if (!strcmp(m, "pipe") && argc > 3)
		do_pipe(atol(argv[2]), atol(argv[3]));
	else if (!strcmp(m, "sleep") && argc > 3) {
		for (long i = 0; i < atol(argv[2]); i++)
			sleep_ms(atol(argv[3]));
	} else if (!strcmp(m, "fault") && argc > 3)
		do_fault(argv[2], atol(argv[3]));
	else if (!strcmp(m, "fsync") && argc > 3)
		do_fsync(argv[2], atol(argv[3]));
	else if (!strcmp(m, "fsynclock") && argc > 3)
		do_fsynclock(argv[2], atol(argv[3]));
	else {
		fprintf(stderr, "unknown mode %s\n", m);
		return 2;
	}
	return 0;
}

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
 *   why lowat N MS1 MS2  recv of 2 bytes (SO_RCVLOWAT 2) on a unix socket whose writer sends one
 *                        byte after MS1 ms and the other MS2 ms later, N times; prints round
 *                        I's start and sends (`startI`, `firstI`, `secondI`: CLOCK_MONOTONIC ns)
 *   why fault FILE N [GATE]  write()s to a pipe from N uncached pages of a mmap'd FILE (page
 *                        i*64); with GATE: maps it, closes its fd, makes GATE.ready, and
 *                        waits for GATE to exist before the writes
 *   why fsync FILE N     N times: write 64 KiB to FILE (a block device or a file) and fsync it
 *   why fsyncnew DIR N   N times: create a file in DIR, write 64 KiB to it and fsync it (a
 *                        journalling file system commits the new blocks for the fsync)
 *   why dread FILE N KIB N O_DIRECT reads of KIB KiB from FILE, 1 MiB apart; prints their CPU time
 *   why bread FILE N     N reads of 256 KiB from FILE, 1 MiB apart, out of the page cache first;
 *                        prints the major faults of the calls; then N sequential reads of 1 MiB
 *                        (read-ahead on) into freshly mapped memory, with their faults
 *   why bwrite FILE N    N buffered writes of 256 KiB to FILE (no sync)
 *   why flock FILE N MS  a child process holds flock(FILE) MS ms while the main thread waits for
 *                        it, N times (fcntl: the same with fcntl(F_SETLKW) on bytes 4096-8191)
 *   why wait N MS        N times: fork a child that sleeps MS ms and exits; wait4 for it
 *   why poll KIND N MS   a writer sleeps MS ms then writes to a pipe; the main thread waits in KIND
 *                        (poll, select, epoll) for it, N times; with MS 0 nobody writes and the
 *                        waits time out after 20 ms
 *   why tcp N MS         a peer sleeps MS ms then sends one byte over loopback TCP; recv, N times
 *   why accept N MS      a peer sleeps MS ms then connects over loopback TCP; accept, N times
 *   why sem N MS         a thread holds a SysV semaphore MS ms while the main thread waits in
 *                        semop, N times
 *   why cpu N            N reads of 16 MiB of /dev/zero (run it in a CPU-throttled cgroup);
 *                        prints the wall and CPU time of the calls
 *   why wakeq N MS CPU   on CPU, a thread spins while the main thread sleeps MS ms, N times
 *   why fsynclock FILE N a thread holds a lock while it writes 64 KiB to FILE and fsyncs it; the
 *                        main thread waits for the lock, N times; prints the fsyncs' time
 *   why srv N MS PORTFILE a server: an acceptor polls (30 ms timeouts) and accepts N connections,
 *                        which it queues for two workers (a condition variable); each worker reads
 *                        the request, then takes a lock it holds MS ms (a sleep), and replies;
 *                        writes its port to PORTFILE; prints the workers' time in the lock and
 *                        in the queue (ground truth)
 *   why cli N PORTFILE   two threads, N connections in all to the server of PORTFILE: each
 *                        connects, works 20 ms (a sleep), sends a request and waits for the reply
 *   why gil N MS         three threads share a GIL as CPython passes it (ceval_gil.c: a condition
 *                        variable waited on with 5 ms timeouts, after which the waiter asks the
 *                        holder to drop it, which waits for the switch); each holds it for N
 *                        slices of MS ms of CPU; prints their time waiting for it
 *   why whole MS         three threads over their whole lives: one burns MS ms of CPU in user space,
 *                        one sleeps MS ms, one waits MS ms for a mutex the main thread holds;
 *                        prints each one's tid and its own count of that time (ground truth)
 *   why chain FILE N     N rounds of a chain of three threads: the main thread waits for lock 1,
 *                        held by a thread that waits for lock 2, held by a thread that writes 64
 *                        KiB to FILE and fsyncs it; prints the main thread's waits and the fsyncs'
 *                        time (each fsync within a wait)
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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

/* N reads of LEN bytes of /dev/zero: kernel work with no wait of its own. Their wall time and
 * the thread's CPU time in them (the ground truth of their on-CPU part). */
struct times {
	long long wall, cpu;
};

static struct times zero_reads(size_t len, long n)
{
	static char buf[32 << 20];
	struct times tm = { 0, 0 };
	int z = open("/dev/zero", O_RDONLY);
	if (z < 0 || len > sizeof(buf))
		die("zero_reads");
	for (long i = 0; i < n; i++) {
		long long c0 = ns_of(CLOCK_THREAD_CPUTIME_ID), w0 = ns_of(CLOCK_MONOTONIC);
		if (read(z, buf, len) != (ssize_t)len)
			die("read");
		tm.wall += ns_of(CLOCK_MONOTONIC) - w0;
		tm.cpu += ns_of(CLOCK_THREAD_CPUTIME_ID) - c0;
	}
	close(z);
	return tm;
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
	struct times tm = zero_reads(32 << 20, n);
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("wall_ns %lld\ncpu_ns %lld\n", tm.wall, tm.cpu);
}


/* ---- run queue after a wake-up ---- */
static void do_wakeq(long n, long ms, int cpu)
{
	pin(cpu);
	pthread_t t;
	pthread_create(&t, NULL, spin, (void *)(long)cpu);
	sleep_ms(50);
	/* Each sleep ends with a wake-up onto a CPU the spinner holds. */
	for (long i = 0; i < n; i++)
		sleep_ms(ms);
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
}
/* ---- futex ---- */
#define MAXN 1000
static long long wait_start[MAXN], released[MAXN]; /* ground truth, per round */
static atomic_int word;   /* 0 free, 1 held */
static atomic_int round_; /* the holder takes the lock for round r when round_ == r */
static long hold_ms;

/* The ground truth of n rounds: from each wait's start to the release that ended it, summed. */
static long long blocked_truth(long n)
{
	long long truth = 0;
	for (long r = 0; r < n; r++)
		truth += released[r] > wait_start[r] ? released[r] - wait_start[r] : 0;
	return truth;
}

/* A lock another thread (the holder) takes in each round, then holds while the main thread waits
 * for it. */
struct held_lock {
	void (*take)(void);    /* the holder takes it */
	void (*hold)(long r);  /* what the holder does with it in round r */
	void (*release)(void); /* the holder releases it */
	void (*wait)(void);    /* the main thread waits for it (and lets it go) */
};
static const struct held_lock *held;

static void *holder(void *arg)
{
	long n = (long)arg;
	printf("holder %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	for (long r = 1; r <= n; r++) {
		while (atomic_load(&round_) != r)
			sleep_ms(1);
		held->take();
		atomic_store(&round_, -r); /* tell the waiter the lock is held */
		held->hold(r);
		released[r - 1] = ns_of(CLOCK_MONOTONIC);
		held->release();
	}
	return NULL;
}

/* n rounds of `l`, each waited for by the main thread once the holder has it; returns their
 * ground truth. */
static long long held_rounds(const struct held_lock *l, long n)
{
	held = l;
	pthread_t t;
	pthread_create(&t, NULL, holder, (void *)n);
	for (long r = 1; r <= n; r++) {
		atomic_store(&round_, r);
		while (atomic_load(&round_) != -r)
			sched_yield();
		wait_start[r - 1] = ns_of(CLOCK_MONOTONIC);
		l->wait();
	}
	pthread_join(t, NULL);
	return blocked_truth(n);
}

static void sleep_hold(long r)
{
	(void)r;
	sleep_ms(hold_ms);
}

static void futex_take(void)
{
	atomic_store(&word, 1);
}

static void futex_release(void)
{
	atomic_store(&word, 0);
	syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void futex_wait(void)
{
	while (atomic_load(&word) == 1)
		syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
}

static void do_futex(long n, long ms)
{
	static const struct held_lock futex_lock = { futex_take, sleep_hold, futex_release, futex_wait };
	hold_ms = ms;
	printf("blocked_ns %lld\n", held_rounds(&futex_lock, n));
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
	printf("blocked_ns %lld\n", blocked_truth(n));
}

/* ---- two waits in one call ---- */
static int lw[2];
static long lw_ms2;
static long long sent2[MAXN];

static void *lw_writer(void *arg)
{
	long n = (long)arg;
	printf("writer %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	char b[2] = { 'x', 'y' };
	for (long i = 0; i < n; i++) {
		sleep_ms(hold_ms);
		released[i] = ns_of(CLOCK_MONOTONIC);
		if (send(lw[1], b, 1, 0) != 1)
			die("send");
		sleep_ms(lw_ms2);
		sent2[i] = ns_of(CLOCK_MONOTONIC);
		if (send(lw[1], b + 1, 1, 0) != 1)
			die("send");
	}
	return NULL;
}

/* recv of 2 bytes with SO_RCVLOWAT 2 on a unix stream socket: the first byte wakes the call,
 * which waits again for the second: two pipe/socket waits in one call, MS1 then MS2 ms. */
static void do_lowat(long n, long ms1, long ms2)
{
	hold_ms = ms1;
	lw_ms2 = ms2;
	int two = 2;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, lw) || setsockopt(lw[0], SOL_SOCKET, SO_RCVLOWAT, &two, sizeof(two)))
		die("socketpair");
	pthread_t t;
	pthread_create(&t, NULL, lw_writer, (void *)n);
	char b[2];
	for (long i = 0; i < n; i++) {
		wait_start[i] = ns_of(CLOCK_MONOTONIC);
		if (recv(lw[0], b, 2, 0) != 2)
			die("recv");
	}
	pthread_join(t, NULL);
	for (long i = 0; i < n; i++)
		printf("start%ld %lld\nfirst%ld %lld\nsecond%ld %lld\n", i, wait_start[i], i, released[i], i, sent2[i]);
}

/* ---- page faults ---- */
static void do_fault(const char *path, long n, const char *gate)
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
	printf("pgsize %ld\n", pg);
	if (gate) {
		/* Mapped before the recording: the fd closed, GATE.ready made; then wait for GATE. */
		close(fd);
		char ready[4096];
		snprintf(ready, sizeof(ready), "%s.ready", gate);
		int r = open(ready, O_WRONLY | O_CREAT, 0600);
		if (r < 0)
			die("open ready");
		close(r);
		while (access(gate, F_OK))
			sleep_ms(10);
	}
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

/* New files: each fsync also waits for the commit of the file system's metadata. */
static void do_fsyncnew(const char *dir, long n)
{
	char path[4096];
	for (long i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/f%ld", dir, i);
		do_fsync(path, 1);
	}
}

/* ---- O_DIRECT reads ---- */
static void do_dread(const char *path, long n, long kib)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0)
		die("open");
	void *buf;
	size_t len = kib << 10;
	if (kib < 4 || kib > 1024 || posix_memalign(&buf, 4096, len))
		die("dread size");
	long long cpu_ns = 0;
	for (long i = 0; i < n; i++) {
		long long c0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
		if (pread(fd, buf, len, i * (1L << 20)) != (ssize_t)len)
			die("pread");
		cpu_ns += ns_of(CLOCK_THREAD_CPUTIME_ID) - c0;
	}
	printf("cpu_ns %lld\n", cpu_ns);
	close(fd);
}

/* ---- buffered reads of an uncached file ---- */
static void do_bread(const char *path, long n)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die("open");
	/* Out of the page cache (written back first: dirty pages stay), and no read-ahead beyond
	 * each read. */
	fdatasync(fd);
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) || posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM))
		die("fadvise");
	static char buf[256 << 10];
	struct rusage ru0, ru1;
	getrusage(RUSAGE_THREAD, &ru0);
	for (long i = 0; i < n; i++)
		if (pread(fd, buf, sizeof(buf), i * (1L << 20)) != sizeof(buf))
			die("pread");
	getrusage(RUSAGE_THREAD, &ru1);
	printf("majflt %ld\n", ru1.ru_majflt - ru0.ru_majflt);
	/* Then N sequential reads of 1 MiB, out of the page cache again and with read-ahead, each
	 * into freshly mapped memory: the copy's first touch of each page is a minor fault between
	 * the read's I/O waits, and read-ahead requests are queued before the waits they end. */
	fdatasync(fd);
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) || posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL))
		die("fadvise");
	long minflt = 0, majflt = 0;
	for (long i = 0; i < n; i++) {
		char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			die("mmap");
		getrusage(RUSAGE_THREAD, &ru0);
		if (read(fd, m, 1 << 20) != 1 << 20)
			die("read");
		getrusage(RUSAGE_THREAD, &ru1);
		minflt += ru1.ru_minflt - ru0.ru_minflt;
		majflt += ru1.ru_majflt - ru0.ru_majflt;
		munmap(m, 1 << 20);
	}
	printf("fresh_minflt %ld\nfresh_majflt %ld\n", minflt, majflt);
	close(fd);
}

/* ---- buffered writes (dirty pages) ---- */
static void do_bwrite(const char *path, long n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		die("open");
	static char buf[256 << 10];
	memset(buf, 'w', sizeof(buf));
	for (long i = 0; i < n; i++)
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			die("write");
	close(fd);
}

/* ---- file locks held by another process ---- */
static void file_lock(int fd, int fcntl_lock, int lock)
{
	if (fcntl_lock) {
		/* A range: bytes 4096-8191. */
		struct flock fl = { .l_type = lock ? F_WRLCK : F_UNLCK, .l_whence = SEEK_SET, .l_start = 4096, .l_len = 4096 };
		if (fcntl(fd, F_SETLKW, &fl))
			die("fcntl");
	} else if (flock(fd, lock ? LOCK_EX : LOCK_UN)) {
		die("flock");
	}
}

static void do_flock(const char *path, long n, long ms, int fcntl_lock)
{
	/* The holder's release times, shared with the child. */
	long long *rel = mmap(NULL, MAXN * sizeof(long long), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int go[2], held[2];
	if (rel == MAP_FAILED || pipe(go) || pipe(held))
		die("setup");
	pid_t child = fork();
	if (child == 0) {
		int fd = open(path, O_RDWR | O_CREAT, 0600);
		char c;
		for (long r = 0; r < n; r++) {
			if (read(go[0], &c, 1) != 1)
				die("read");
			file_lock(fd, fcntl_lock, 1);
			if (write(held[1], &c, 1) != 1)
				die("write");
			sleep_ms(ms);
			rel[r] = ns_of(CLOCK_MONOTONIC);
			file_lock(fd, fcntl_lock, 0);
		}
		_exit(0);
	}
	printf("holder %d\n", child);
	int fd = open(path, O_RDWR | O_CREAT, 0600);
	char c = 'x';
	for (long r = 0; r < n; r++) {
		if (write(go[1], &c, 1) != 1 || read(held[0], &c, 1) != 1)
			die("handshake");
		wait_start[r] = ns_of(CLOCK_MONOTONIC);
		file_lock(fd, fcntl_lock, 1);
		file_lock(fd, fcntl_lock, 0);
	}
	waitpid(child, NULL, 0);
	long long truth = 0;
	for (long r = 0; r < n; r++)
		truth += rel[r] > wait_start[r] ? rel[r] - wait_start[r] : 0;
	printf("blocked_ns %lld\n", truth);
}

/* ---- wait4 for a child that sleeps ---- */
static void do_wait(long n, long ms)
{
	long long *ends = mmap(NULL, MAXN * sizeof(long long), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ends == MAP_FAILED)
		die("mmap");
	long long truth = 0;
	for (long i = 0; i < n; i++) {
		pid_t child = fork();
		if (child == 0) {
			sleep_ms(ms);
			ends[i] = ns_of(CLOCK_MONOTONIC);
			_exit(0);
		}
		printf("child%ld %d\n", i, child);
		long long t0 = ns_of(CLOCK_MONOTONIC);
		if (wait4(child, NULL, 0, NULL) != child)
			die("wait4");
		truth += ends[i] > t0 ? ends[i] - t0 : 0;
	}
	printf("blocked_ns %lld\n", truth);
}

/* ---- poll, select, epoll_wait on a pipe ---- */
static void do_poll(const char *kind, long n, long ms)
{
	hold_ms = ms;
	if (pipe(pfd))
		die("pipe");
	pthread_t t;
	if (ms)
		pthread_create(&t, NULL, writer, (void *)n);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = pfd[0] };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev))
		die("epoll_ctl");
	int timeout = ms ? -1 : 20;
	for (long i = 0; i < n; i++) {
		wait_start[i] = ns_of(CLOCK_MONOTONIC);
		int r;
		if (!strcmp(kind, "poll")) {
			struct pollfd p = { .fd = pfd[0], .events = POLLIN };
			r = poll(&p, 1, timeout);
		} else if (!strcmp(kind, "select")) {
			fd_set s;
			FD_ZERO(&s);
			FD_SET(pfd[0], &s);
			struct timeval tv = { 0, 20000 };
			r = select(pfd[0] + 1, &s, NULL, NULL, ms ? NULL : &tv);
		} else {
			struct epoll_event out;
			r = epoll_wait(ep, &out, 1, timeout);
		}
		if (r < 0)
			die(kind);
		char c;
		if (r > 0 && read(pfd[0], &c, 1) != 1)
			die("read");
	}
	if (ms)
		pthread_join(t, NULL);
	printf("blocked_ns %lld\n", ms ? blocked_truth(n) : n * 20000000LL);
}

/* ---- loopback TCP: recv from a peer that sleeps, accept of a peer that connects late ---- */
static int listener(struct sockaddr_in *a)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	socklen_t len = sizeof(*a);
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)a, sizeof(*a)) || listen(l, 16) ||
	    getsockname(l, (struct sockaddr *)a, &len))
		die("listen");
	return l;
}

static struct sockaddr_in peer_addr;
static long peer_n;
static int peer_accepts; /* the peer connects late (accept) instead of sending late (recv) */

static void *tcp_peer(void *arg)
{
	printf("peer %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	char c = 'x';
	int s = -1;
	for (long i = 0; i < peer_n; i++) {
		if (peer_accepts || s < 0) {
			if (s >= 0)
				close(s);
			s = socket(AF_INET, SOCK_STREAM, 0);
			if (peer_accepts) {
				sleep_ms(hold_ms);
				released[i] = ns_of(CLOCK_MONOTONIC);
			}
			if (connect(s, (struct sockaddr *)&peer_addr, sizeof(peer_addr)))
				die("connect");
			if (peer_accepts)
				continue;
		}
		sleep_ms(hold_ms);
		released[i] = ns_of(CLOCK_MONOTONIC);
		if (write(s, &c, 1) != 1)
			die("write");
	}
	if (s >= 0)
		close(s);
	return NULL;
}

static void do_tcp(long n, long ms, int accepts)
{
	hold_ms = ms;
	peer_n = n;
	peer_accepts = accepts;
	int l = listener(&peer_addr);
	pthread_t t;
	pthread_create(&t, NULL, tcp_peer, NULL);
	int s = -1;
	char c;
	for (long i = 0; i < n; i++) {
		if (accepts) {
			wait_start[i] = ns_of(CLOCK_MONOTONIC);
			s = accept(l, NULL, NULL);
			if (s < 0)
				die("accept");
			close(s);
			continue;
		}
		if (s < 0 && (s = accept(l, NULL, NULL)) < 0)
			die("accept");
		wait_start[i] = ns_of(CLOCK_MONOTONIC);
		if (recv(s, &c, 1, 0) != 1)
			die("recv");
	}
	pthread_join(t, NULL);
	printf("blocked_ns %lld\n", blocked_truth(n));
}

/* ---- SysV semaphore held by another thread ---- */
static int semid;

static void sem_op(int op)
{
	struct sembuf b = { 0, op, 0 };
	while (semop(semid, &b, 1))
		if (errno != EINTR)
			die("semop");
}

static void sem_take(void)
{
	sem_op(-1);
}

static void sem_release(void)
{
	sem_op(1);
}

static void sem_wait_for(void)
{
	sem_op(-1);
	sem_op(1);
}

static void do_sem(long n, long ms)
{
	static const struct held_lock sem_lock = { sem_take, sleep_hold, sem_release, sem_wait_for };
	hold_ms = ms;
	semid = semget(IPC_PRIVATE, 1, 0600);
	if (semid < 0 || semctl(semid, 0, SETVAL, 1))
		die("semget");
	long long truth = held_rounds(&sem_lock, n);
	semctl(semid, 0, IPC_RMID);
	printf("blocked_ns %lld\n", truth);
}

/* ---- CPU-bound calls (under a CPU quota) ---- */
static void do_cpu(long n)
{
	struct times tm = zero_reads(16 << 20, n);
	printf("wall_ns %lld\ncpu_ns %lld\n", tm.wall, tm.cpu);
}

/* ---- three threads' whole lives: CPU in user space, a sleep, a lock (time outside calls) ---- */
static long whole_ms;
static pthread_mutex_t whole_m = PTHREAD_MUTEX_INITIALIZER;
static long whole_tid[3];
static long long whole_ns[3];

static void *whole_burn(void *a)
{
	(void)a;
	whole_tid[0] = syscall(SYS_gettid);
	volatile unsigned long sink = 0;
	/* Its CPU clock is a call (no vDSO for it): read once a million additions (about 1 ms). */
	while (ns_of(CLOCK_THREAD_CPUTIME_ID) < whole_ms * 1000000LL)
		for (int i = 0; i < 1000000; i++)
			sink += i;
	whole_ns[0] = ns_of(CLOCK_THREAD_CPUTIME_ID);
	return NULL;
}

static void *whole_sleep(void *a)
{
	(void)a;
	whole_tid[1] = syscall(SYS_gettid);
	struct timespec t = { whole_ms / 1000, (whole_ms % 1000) * 1000000L };
	long long t0 = ns_of(CLOCK_MONOTONIC);
	nanosleep(&t, NULL);
	whole_ns[1] = ns_of(CLOCK_MONOTONIC) - t0;
	return NULL;
}

static void *whole_lock(void *a)
{
	(void)a;
	whole_tid[2] = syscall(SYS_gettid);
	long long t0 = ns_of(CLOCK_MONOTONIC);
	pthread_mutex_lock(&whole_m);
	whole_ns[2] = ns_of(CLOCK_MONOTONIC) - t0;
	pthread_mutex_unlock(&whole_m);
	return NULL;
}

static void do_whole(long ms)
{
	whole_ms = ms;
	pthread_t t[3];
	pthread_mutex_lock(&whole_m);
	void *(*fn[3])(void *) = { whole_burn, whole_sleep, whole_lock };
	for (int i = 0; i < 3; i++)
		if (pthread_create(&t[i], NULL, fn[i], NULL))
			die("pthread_create");
	struct timespec hold = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&hold, NULL);
	pthread_mutex_unlock(&whole_m);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	printf("burner %ld\nburner_cpu_ns %lld\nsleeper %ld\nsleeper_ns %lld\nlocker %ld\nlocker_ns %lld\n", whole_tid[0],
	       whole_ns[0], whole_tid[1], whole_ns[1], whole_tid[2], whole_ns[2]);
}

/* ---- a lock held across an fsync (the cascade through block I/O) ---- */
static int lock_fd;
static long long fsync_ns; /* ground truth: the holder's time in fsync */

/* The holder writes 64 KiB and fsyncs them while it holds the lock. */
static void fsync_hold(long r)
{
	static char buf[65536];
	memset(buf, 'b', sizeof(buf));
	if (pwrite(lock_fd, buf, sizeof(buf), r * (off_t)sizeof(buf)) != sizeof(buf))
		die("pwrite");
	long long t0 = ns_of(CLOCK_MONOTONIC);
	if (fsync(lock_fd))
		die("fsync");
	fsync_ns += ns_of(CLOCK_MONOTONIC) - t0;
}

static void do_fsynclock(const char *path, long n)
{
	static const struct held_lock fsync_lock = { futex_take, fsync_hold, futex_release, futex_wait };
	lock_fd = open(path, O_WRONLY | O_CREAT, 0600);
	if (lock_fd < 0)
		die("open");
	held_rounds(&fsync_lock, n);
	printf("fsync_ns %lld\n", fsync_ns);
}

/* ---- a server: an acceptor, a queue, workers that share a lock (the idle rule) ---- */
#define SRV_WORKERS 2
static pthread_mutex_t srv_qm = PTHREAD_MUTEX_INITIALIZER, srv_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t srv_qc = PTHREAD_COND_INITIALIZER;
static int srv_q[MAXN + SRV_WORKERS], srv_head, srv_tail;
static long long srv_lock_ns, srv_queue_ns; /* ground truth, summed over the workers */
static long srv_hold;
static long srv_tid[SRV_WORKERS]; /* printed at the end: printing meanwhile takes stdout's lock */

static void *srv_worker(void *arg)
{
	srv_tid[(long)arg] = (long)syscall(SYS_gettid);
	long long lock_ns = 0, queue_ns = 0;
	for (;;) {
		long long t0 = ns_of(CLOCK_MONOTONIC);
		pthread_mutex_lock(&srv_qm);
		while (srv_head == srv_tail)
			pthread_cond_wait(&srv_qc, &srv_qm);
		int fd = srv_q[srv_head++];
		pthread_mutex_unlock(&srv_qm);
		queue_ns += ns_of(CLOCK_MONOTONIC) - t0;
		if (fd < 0)
			break;
		char c;
		if (recv(fd, &c, 1, 0) != 1)
			die("recv");
		t0 = ns_of(CLOCK_MONOTONIC);
		pthread_mutex_lock(&srv_lock);
		lock_ns += ns_of(CLOCK_MONOTONIC) - t0;
		sleep_ms(srv_hold);
		pthread_mutex_unlock(&srv_lock);
		if (send(fd, &c, 1, 0) != 1)
			die("send");
		close(fd);
	}
	pthread_mutex_lock(&srv_qm);
	srv_lock_ns += lock_ns;
	srv_queue_ns += queue_ns;
	pthread_mutex_unlock(&srv_qm);
	return NULL;
}

static void srv_push(int fd)
{
	pthread_mutex_lock(&srv_qm);
	srv_q[srv_tail++] = fd;
	pthread_cond_signal(&srv_qc);
	pthread_mutex_unlock(&srv_qm);
}

static void do_srv(long n, long ms, const char *portfile)
{
	srv_hold = ms;
	printf("acceptor %ld\n", (long)syscall(SYS_gettid));
	struct sockaddr_in a;
	int l = listener(&a);
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", portfile);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%d\n", ntohs(a.sin_port)) < 0 || fclose(f) || rename(tmp, portfile))
		die("portfile");
	pthread_t t[SRV_WORKERS];
	for (int i = 0; i < SRV_WORKERS; i++)
		pthread_create(&t[i], NULL, srv_worker, (void *)(long)i);
	for (long i = 0; i < n; i++) {
		struct pollfd p = { .fd = l, .events = POLLIN };
		while (poll(&p, 1, 30) == 0)
			;
		int c = accept(l, NULL, NULL);
		if (c < 0)
			die("accept");
		srv_push(c);
	}
	for (int i = 0; i < SRV_WORKERS; i++)
		srv_push(-1);
	for (int i = 0; i < SRV_WORKERS; i++)
		pthread_join(t[i], NULL);
	printf("worker %ld\nworker1 %ld\n", srv_tid[0], srv_tid[1]);
	/* The locks' addresses: the mutex's futex word, and the condition variable's (an 8-byte
	 * word at its end: glibc waits on one of its halves). */
	printf("srv_lock %lu\nsrv_cond %lu\n", (unsigned long)&srv_lock, (unsigned long)&srv_qc + sizeof(srv_qc) - 8);
	printf("lock_ns %lld\nqueue_ns %lld\n", srv_lock_ns, srv_queue_ns);
}

static struct sockaddr_in cli_addr;

static void *cli_thread(void *arg)
{
	long n = (long)arg;
	for (long i = 0; i < n; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&cli_addr, sizeof(cli_addr)))
			die("connect");
		sleep_ms(20);
		char c = 'r';
		if (send(s, &c, 1, 0) != 1 || recv(s, &c, 1, 0) != 1)
			die("request");
		close(s);
	}
	return NULL;
}

static void do_cli(long n, const char *portfile)
{
	int port = 0;
	for (int i = 0; i < 6000 && !port; i++) {
		FILE *f = fopen(portfile, "r");
		if (!f || fscanf(f, "%d", &port) != 1)
			sleep_ms(10);
		if (f)
			fclose(f);
	}
	if (!port)
		die("no server");
	memset(&cli_addr, 0, sizeof(cli_addr));
	cli_addr.sin_family = AF_INET;
	cli_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cli_addr.sin_port = htons(port);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, cli_thread, (void *)(n / 2 + (i == 0 ? n % 2 : 0)));
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}

/* ---- a GIL, as CPython passes it (Python/ceval_gil.c, FORCE_SWITCHING) ---- */
#define GIL_THREADS 3
static pthread_mutex_t gil_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gil_c, gil_sw = PTHREAD_COND_INITIALIZER;
static int gil_locked;
static unsigned long gil_switch;
static atomic_int gil_drop;
static long long gil_wait_ns[GIL_THREADS];
static long gil_tid[GIL_THREADS];

static void take_gil(int id)
{
	long long t0 = ns_of(CLOCK_MONOTONIC);
	pthread_mutex_lock(&gil_m);
	while (gil_locked) {
		unsigned long saved = gil_switch;
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_nsec += 5000000;
		if (dl.tv_nsec >= 1000000000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000;
		}
		int r = pthread_cond_timedwait(&gil_c, &gil_m, &dl);
		/* Timed out with the GIL still held by the same thread: ask it to drop it. */
		if (r == ETIMEDOUT && gil_locked && gil_switch == saved)
			atomic_store(&gil_drop, 1);
	}
	gil_locked = 1;
	gil_switch++;
	atomic_store(&gil_drop, 0);
	pthread_cond_signal(&gil_sw);
	pthread_mutex_unlock(&gil_m);
	gil_wait_ns[id] += ns_of(CLOCK_MONOTONIC) - t0;
}

/* Drop it and, asked to, wait until another thread took it (FORCE_SWITCHING). */
static void drop_gil(int id)
{
	long long t0 = ns_of(CLOCK_MONOTONIC);
	pthread_mutex_lock(&gil_m);
	gil_locked = 0;
	pthread_cond_signal(&gil_c);
	unsigned long s = gil_switch;
	while (gil_switch == s)
		pthread_cond_wait(&gil_sw, &gil_m);
	pthread_mutex_unlock(&gil_m);
	gil_wait_ns[id] += ns_of(CLOCK_MONOTONIC) - t0;
}

static long gil_slices, gil_ms;

static void *gil_thread(void *arg)
{
	int id = (int)(long)arg;
	gil_tid[id] = (long)syscall(SYS_gettid);
	take_gil(id);
	for (long i = 0; i < gil_slices; i++) {
		long long cpu0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
		volatile unsigned long x = 0;
		/* MS ms of CPU, checking for a drop request as the eval loop does. */
		while (ns_of(CLOCK_THREAD_CPUTIME_ID) - cpu0 < gil_ms * 1000000LL) {
			for (int k = 0; k < 2000; k++)
				x++;
			if (atomic_load(&gil_drop)) {
				drop_gil(id);
				take_gil(id);
			}
		}
	}
	/* Done: released without waiting for a switch (the others may be done too). */
	pthread_mutex_lock(&gil_m);
	gil_locked = 0;
	pthread_cond_signal(&gil_c);
	pthread_mutex_unlock(&gil_m);
	return NULL;
}

static void do_gil(long n, long ms)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&gil_c, &ca);
	gil_slices = n;
	gil_ms = ms;
	pthread_t t[GIL_THREADS];
	for (int i = 0; i < GIL_THREADS; i++)
		pthread_create(&t[i], NULL, gil_thread, (void *)(long)i);
	long long total = 0;
	for (int i = 0; i < GIL_THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < GIL_THREADS; i++) {
		total += gil_wait_ns[i];
		printf("gil%d %ld\n", i, gil_tid[i]);
	}
	printf("gil_wait_ns %lld\n", total);
}

/* ---- a chain of waits: lock 1, held by a thread waiting for lock 2, held across an fsync ---- */
static pthread_mutex_t chain_l1 = PTHREAD_MUTEX_INITIALIZER, chain_l2 = PTHREAD_MUTEX_INITIALIZER;
static atomic_int chain_stage; /* 3r+1: the fsyncer holds lock 2; 3r+2: the middle holds lock 1 */
static int chain_fd;
static long chain_n;
static long long chain_fsync_ns;

static void *chain_fsyncer(void *arg)
{
	(void)arg;
	printf("fsyncer %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	static char buf[65536];
	memset(buf, 'c', sizeof(buf));
	for (long r = 0; r < chain_n; r++) {
		while (atomic_load(&chain_stage) != 3 * r)
			sleep_ms(1);
		pthread_mutex_lock(&chain_l2);
		atomic_store(&chain_stage, 3 * r + 1);
		/* Until both others wait. */
		while (atomic_load(&chain_stage) != 3 * r + 2)
			sched_yield();
		sleep_ms(5);
		if (pwrite(chain_fd, buf, sizeof(buf), r * (off_t)sizeof(buf)) != sizeof(buf))
			die("pwrite");
		long long t0 = ns_of(CLOCK_MONOTONIC);
		if (fsync(chain_fd))
			die("fsync");
		chain_fsync_ns += ns_of(CLOCK_MONOTONIC) - t0;
		pthread_mutex_unlock(&chain_l2);
	}
	return NULL;
}

static void *chain_middle(void *arg)
{
	(void)arg;
	printf("middle %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	for (long r = 0; r < chain_n; r++) {
		while (atomic_load(&chain_stage) != 3 * r + 1)
			sched_yield();
		pthread_mutex_lock(&chain_l1);
		atomic_store(&chain_stage, 3 * r + 2);
		pthread_mutex_lock(&chain_l2);
		pthread_mutex_unlock(&chain_l2);
		pthread_mutex_unlock(&chain_l1);
	}
	return NULL;
}

static void do_chain(const char *path, long n)
{
	chain_fd = open(path, O_WRONLY | O_CREAT, 0600);
	if (chain_fd < 0)
		die("open");
	chain_n = n;
	pthread_t t[2];
	pthread_create(&t[0], NULL, chain_fsyncer, NULL);
	pthread_create(&t[1], NULL, chain_middle, NULL);
	long long waited = 0;
	for (long r = 0; r < n; r++) {
		while (atomic_load(&chain_stage) != 3 * r + 2)
			sched_yield();
		long long t0 = ns_of(CLOCK_MONOTONIC);
		pthread_mutex_lock(&chain_l1);
		waited += ns_of(CLOCK_MONOTONIC) - t0;
		pthread_mutex_unlock(&chain_l1);
		atomic_store(&chain_stage, 3 * (r + 1));
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("waited_ns %lld\nfsync_ns %lld\n", waited, chain_fsync_ns);
	printf("lock1 %lu\nlock2 %lu\n", (unsigned long)&chain_l1, (unsigned long)&chain_l2);
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
	else if (!strcmp(m, "wakeq") && argc > 4)
		do_wakeq(atol(argv[2]), atol(argv[3]), atoi(argv[4]));
	else if (!strcmp(m, "futex") && argc > 3)
		do_futex(atol(argv[2]), atol(argv[3]));
	else if (!strcmp(m, "pipe") && argc > 3)
		do_pipe(atol(argv[2]), atol(argv[3]));
	else if (!strcmp(m, "lowat") && argc > 4)
		do_lowat(atol(argv[2]), atol(argv[3]), atol(argv[4]));
	else if (!strcmp(m, "sleep") && argc > 3) {
		for (long i = 0; i < atol(argv[2]); i++)
			sleep_ms(atol(argv[3]));
	} else if (!strcmp(m, "fault") && argc > 3)
		do_fault(argv[2], atol(argv[3]), argc > 4 ? argv[4] : NULL);
	else if (!strcmp(m, "fsync") && argc > 3)
		do_fsync(argv[2], atol(argv[3]));
	else if (!strcmp(m, "fsyncnew") && argc > 3)
		do_fsyncnew(argv[2], atol(argv[3]));
	else if (!strcmp(m, "dread") && argc > 4)
		do_dread(argv[2], atol(argv[3]), atol(argv[4]));
	else if (!strcmp(m, "bwrite") && argc > 3)
		do_bwrite(argv[2], atol(argv[3]));
	else if (!strcmp(m, "bread") && argc > 3)
		do_bread(argv[2], atol(argv[3]));
	else if ((!strcmp(m, "flock") || !strcmp(m, "fcntl")) && argc > 4)
		do_flock(argv[2], atol(argv[3]), atol(argv[4]), !strcmp(m, "fcntl"));
	else if (!strcmp(m, "wait") && argc > 3)
		do_wait(atol(argv[2]), atol(argv[3]));
	else if (!strcmp(m, "poll") && argc > 4)
		do_poll(argv[2], atol(argv[3]), atol(argv[4]));
	else if (!strcmp(m, "tcp") && argc > 3)
		do_tcp(atol(argv[2]), atol(argv[3]), 0);
	else if (!strcmp(m, "accept") && argc > 3)
		do_tcp(atol(argv[2]), atol(argv[3]), 1);
	else if (!strcmp(m, "sem") && argc > 3)
		do_sem(atol(argv[2]), atol(argv[3]));
	else if (!strcmp(m, "cpu"))
		do_cpu(atol(argv[2]));
	else if (!strcmp(m, "fsynclock") && argc > 3)
		do_fsynclock(argv[2], atol(argv[3]));
	else if (!strcmp(m, "srv") && argc > 4)
		do_srv(atol(argv[2]), atol(argv[3]), argv[4]);
	else if (!strcmp(m, "cli") && argc > 3)
		do_cli(atol(argv[2]), argv[3]);
	else if (!strcmp(m, "gil") && argc > 3)
		do_gil(atol(argv[2]), atol(argv[3]));
	else if (!strcmp(m, "whole") && argc > 2)
		do_whole(atol(argv[2]));
	else if (!strcmp(m, "chain") && argc > 3)
		do_chain(argv[2], atol(argv[3]));
	else {
		fprintf(stderr, "unknown mode %s\n", m);
		return 2;
	}
	return 0;
}

/*
 * A request passing through a queue, a lock and a disk, across three threads, for the Perfetto
 * export's flows:
 *
 *   client  puts request i on a queue (mutex + condition variable) and waits for the answer on a
 *           pipe;
 *   worker  waits on the queue (woken by the client), takes a lock the holder keeps for a while
 *           (woken by the holder's unlock), reads 4 KiB of DEVICE with O_DIRECT (woken by the
 *           request's completion), and writes the answer to the pipe (waking the client);
 *   holder  takes the lock before the client queues each request and keeps it until 5 ms after
 *           the worker has dequeued it.
 *
 * Each wait is made sure to block (flags polled every millisecond, then 5 ms more), so that
 * every hand-over is a wake-up even on a loaded machine.
 *
 * Prints "client TID", "worker TID", "holder TID", then one line per step as it happens:
 * "step REQUEST NAME MONOTONIC_NS" with NAME queued, dequeued, locked, read, answered, received.
 * usage: pipeline DEVICE REQUESTS
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static int queued = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t outlock = PTHREAD_MUTEX_INITIALIZER;
static int answer[2];
static int dev_fd;
static int requests;
/* The holder takes the lock for request i when turn reaches i; the worker waits for request i
 * when waiting reaches i, and has dequeued it when dequeued reaches i. */
static volatile int turn = -1, held = -1, waiting = -1, dequeued = -1;

static long long now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void step(int req, const char *name)
{
	long long t = now();
	pthread_mutex_lock(&outlock);
	printf("step %d %s %lld\n", req, name, t);
	fflush(stdout);
	pthread_mutex_unlock(&outlock);
}

static void sleep_ms(int ms)
{
	struct timespec t = { 0, ms * 1000000L };
	nanosleep(&t, NULL);
}

static void *holder(void *arg)
{
	(void)arg;
	printf("holder %ld\n", (long)syscall(SYS_gettid));
	for (int i = 0; i < requests; i++) {
		while (turn < i)
			sleep_ms(1);
		pthread_mutex_lock(&lock);
		held = i;
		while (dequeued < i)
			sleep_ms(1);
		sleep_ms(5);
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

static void *worker(void *arg)
{
	(void)arg;
	printf("worker %ld\n", (long)syscall(SYS_gettid));
	void *buf;
	if (posix_memalign(&buf, 4096, 4096))
		exit(1);
	for (int i = 0; i < requests; i++) {
		pthread_mutex_lock(&qlock);
		waiting = i;
		while (queued < i)
			pthread_cond_wait(&qcond, &qlock);
		pthread_mutex_unlock(&qlock);
		step(i, "dequeued");
		dequeued = i;
		pthread_mutex_lock(&lock);
		step(i, "locked");
		pthread_mutex_unlock(&lock);
		if (pread(dev_fd, buf, 4096, (off_t)i * 65536) != 4096)
			exit(2);
		step(i, "read");
		char c = 'a';
		step(i, "answered");
		if (write(answer[1], &c, 1) != 1)
			exit(3);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: pipeline DEVICE REQUESTS\n");
		return 2;
	}
	dev_fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (dev_fd < 0) {
		perror(argv[1]);
		return 1;
	}
	requests = atoi(argv[2]);
	if (pipe(answer))
		return 1;
	printf("client %ld\n", (long)syscall(SYS_gettid));
	pthread_t h, w;
	pthread_create(&h, NULL, holder, NULL);
	pthread_create(&w, NULL, worker, NULL);
	for (int i = 0; i < requests; i++) {
		/* Let the worker wait on the queue, and the holder take the lock first. */
		turn = i;
		while (held < i || waiting < i)
			sleep_ms(1);
		sleep_ms(5);
		pthread_mutex_lock(&qlock);
		queued = i;
		step(i, "queued");
		pthread_cond_signal(&qcond);
		pthread_mutex_unlock(&qlock);
		char c;
		if (read(answer[0], &c, 1) != 1)
			return 3;
		step(i, "received");
	}
	pthread_join(w, NULL);
	pthread_join(h, NULL);
	return 0;
}

/*
 * Tight syscall loop for the spectrogram overhead benchmark: N 1-byte read()s of /dev/zero.
 * Prints the thread's CPU time per call in ns (user + system, so time spent in the tracing
 * programs counts, but not time spent waiting for a CPU: stable on a busy machine).
 * usage: spectrogram-loop N
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	int fd = open("/dev/zero", O_RDONLY);
	if (fd < 0) {
		perror("open /dev/zero");
		return 1;
	}
	char c;
	double t0 = cpu_now();
	for (long i = 0; i < n; i++) {
		if (read(fd, &c, 1) != 1) {
			perror("read");
			return 1;
		}
	}
	printf("%.1f\n", (cpu_now() - t0) / n);
	return 0;
}

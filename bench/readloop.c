/*
 * Tight syscall loop for overhead benchmarks: N 1-byte read()s of /dev/zero,
 * optionally paced to a target rate. Prints wall-clock ns per call and CPU ns per call (user +
 * system time of this process: includes the tracers' in-kernel work but not time other
 * processes took from this core, so it is the fairer figure on a busy machine).
 * usage: readloop N [CALLS_PER_SEC [mix]]
 * With "mix", every other call is getppid() instead of read() (two kinds of event, as a
 * program that does more than one thing).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	double rate = argc > 2 ? atof(argv[2]) : 0;
	int mix = argc > 3 && strcmp(argv[3], "mix") == 0;
	int fd = open("/dev/zero", O_RDONLY);
	if (fd < 0) { perror("open /dev/zero"); return 1; }
	char c;
	double t0 = now();
	for (long i = 0; i < n; i++) {
		if (mix && (i & 1))
			syscall(SYS_getppid);
		else if (read(fd, &c, 1) != 1) { perror("read"); return 1; }
		if (rate > 0 && (i & 1023) == 0) {
			/* pace in chunks of 1024 calls */
			double due = t0 + i / rate, t;
			while ((t = now()) < due)
				;
		}
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	printf("%.1f %.1f\n", (now() - t0) * 1e9 / n, cpu * 1e9 / n);
	return 0;
}

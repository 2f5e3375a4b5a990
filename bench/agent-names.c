/*
 * Many distinct process names, cheaply, for the agent's memory benchmark: one process renames
 * itself (prctl PR_SET_NAME, the comm the kernel reports) and makes one getppid() under each
 * name. N names, in batches of 10000 with a 50 ms pause (the agent drains its ring buffer).
 * usage: agent-names N
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	struct timespec pause = { 0, 50 * 1000 * 1000 };
	char name[16];
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "lsnm%ld", i);
		prctl(PR_SET_NAME, name, 0, 0, 0);
		syscall(SYS_getppid);
		if (i % 10000 == 9999)
			nanosleep(&pause, NULL);
	}
	return 0;
}

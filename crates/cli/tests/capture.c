/*
 * Ground truth for what a trace holds for replay: makes the fd- and file-changing calls whose
 * argument placement docs/TRACE_FORMAT.md promises, with known arguments, and writes what it
 * did (the fds the kernel returned, addresses, child ids) as "name key=value ..." lines to the
 * file given as argv[2]. usage: capture DIR TRUTH_FILE
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static FILE *truth;

static void check(long r, const char *what)
{
	if (r < 0) {
		perror(what);
		exit(1);
	}
}

static void *thread_main(void *arg)
{
	(void)arg;
	fprintf(truth, "thread tid=%ld\n", (long)syscall(SYS_gettid));
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: capture DIR TRUTH_FILE\n");
		return 2;
	}
	char a[4096], b[4096], link[4096];
	snprintf(a, sizeof(a), "%s/a", argv[1]);
	snprintf(b, sizeof(b), "%s/b", argv[1]);
	snprintf(link, sizeof(link), "%s/link", argv[1]);
	truth = fopen(argv[2], "w");
	if (!truth)
		return 1;
	setvbuf(truth, NULL, _IOLBF, 0);

	int p[2], q[2], sv[2];
	check(pipe2(p, O_CLOEXEC | O_NONBLOCK), "pipe2");
	fprintf(truth, "pipe2 fd0=%d fd1=%d flags=%d\n", p[0], p[1], O_CLOEXEC | O_NONBLOCK);
	check(syscall(SYS_pipe, q), "pipe");
	fprintf(truth, "pipe fd0=%d fd1=%d\n", q[0], q[1]);
	check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), "socketpair");
	fprintf(truth, "socketpair fd0=%d fd1=%d type=%d\n", sv[0], sv[1], SOCK_STREAM | SOCK_CLOEXEC);

	int f = open(a, O_RDWR | O_CREAT | O_TRUNC, 0644);
	check(f, "open a");
	int g = open(b, O_RDWR | O_CREAT | O_TRUNC, 0644);
	check(g, "open b");
	char buf[256];
	memset(buf, 'x', sizeof(buf));
	check(write(f, buf, sizeof(buf)), "write");

	int d1 = dup(f);
	check(d1, "dup");
	fprintf(truth, "dup old=%d new=%d\n", f, d1);
	check(dup2(f, 50), "dup2");
	check(dup3(f, 51, O_CLOEXEC), "dup3");
	int d4 = fcntl(f, F_DUPFD_CLOEXEC, 60);
	check(d4, "fcntl");
	fprintf(truth, "fcntl_dupfd old=%d new=%d\n", f, d4);
	check(fcntl(d1, F_SETFD, FD_CLOEXEC), "fcntl setfd");
	check(ioctl(d1, FIONCLEX), "ioctl");
	check(syscall(SYS_close_range, 50, 51, 0), "close_range");

	check(ftruncate(f, 12345), "ftruncate");
	check(truncate(b, 8192), "truncate");
	check(fallocate(g, FALLOC_FL_KEEP_SIZE, 4096, 65536), "fallocate");
	check(lseek(f, 100, SEEK_SET), "lseek");

	void *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, f, 4096);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	fprintf(truth, "mmap addr=%lu\n", (unsigned long)m);
	check(msync(m, 8192, MS_SYNC), "msync");
	check(munmap(m, 8192), "munmap");

	off_t in = 5;
	check(sendfile(sv[0], f, &in, 10), "sendfile");
	loff_t off_in = 3, off_out = 100;
	check(copy_file_range(f, &off_in, g, &off_out, 50, 0), "copy_file_range");
	loff_t soff = 7;
	check(splice(f, &soff, p[1], NULL, 20, 0), "splice");
	struct iovec iov = { buf, 64 };
	check(pwritev2(g, &iov, 1, 512, RWF_DSYNC), "pwritev2");

	check(symlink("rel/target", link), "symlink");

	pid_t child = fork();
	check(child, "fork");
	if (child == 0) {
		/* The child's first calls carry its own pid. */
		close(d1);
		_exit(0);
	}
	fprintf(truth, "fork child=%d\n", child);
	waitpid(child, NULL, 0);

	pthread_t t;
	if (pthread_create(&t, NULL, thread_main, NULL) != 0)
		return 1;
	pthread_join(t, NULL);

	check(unshare(CLONE_FILES), "unshare");
	fprintf(truth, "done\n");
	return 0;
}

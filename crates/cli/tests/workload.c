/*
 * Ground-truth workload for latscope's recording tests: does exactly known
 * operations so that the trace can be checked event by event.
 *
 * usage: workload DIR DIRECT_DIR N
 *   mkdir DIR/sub, rmdir DIR/sub
 *   N times: openat(DIR/data, O_CREAT|O_RDWR, 0640) -> pwrite 4096 B at i*4096 -> pread 1000+i B at 0
 *            -> fsync -> close
 *   rename DIR/data -> DIR/renamed
 *   open DIR/renamed: fcntl(F_SETLK, write lock), posix_fadvise(POSIX_FADV_DONTNEED), close
 *   futex(&word, FUTEX_WAIT_PRIVATE, 1) on a word holding 0 (EAGAIN at once); the word's
 *   address written to DIR/futex_addr ("0x..." as printf's %p)
 *   5 x nanosleep(10 ms), 5 x nanosleep(1 ms)
 *   open DIRECT_DIR/direct with O_DIRECT, 8 x pwrite 64 KiB at k*64 KiB, fsync, close
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) { perror(what); exit(1); }

int main(int argc, char **argv)
{
	if (argc != 4) { fprintf(stderr, "usage: workload DIR DIRECT_DIR N\n"); return 2; }
	const char *dir = argv[1], *ddir = argv[2];
	int n = atoi(argv[3]);
	char path[4096], path2[4096], sub[4096];
	static char buf[8192];
	memset(buf, 'x', sizeof(buf));

	snprintf(sub, sizeof(sub), "%s/sub", dir);
	if (mkdir(sub, 0750)) die("mkdir");
	if (rmdir(sub)) die("rmdir");

	snprintf(path, sizeof(path), "%s/data", dir);
	for (int i = 0; i < n; i++) {
		int fd = openat(AT_FDCWD, path, O_CREAT | O_RDWR, 0640);
		if (fd < 0) die("openat");
		if (pwrite(fd, buf, 4096, (off_t)i * 4096) != 4096) die("pwrite");
		if (pread(fd, buf, 1000 + i, 0) != 1000 + i) die("pread");
		if (fsync(fd)) die("fsync");
		if (close(fd)) die("close");
	}
	snprintf(path2, sizeof(path2), "%s/renamed", dir);
	if (rename(path, path2)) die("rename");
	{
		int fd = open(path2, O_RDWR);
		if (fd < 0) die("open renamed");
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
		if (fcntl(fd, F_SETLK, &fl)) die("fcntl F_SETLK");
		if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)) die("posix_fadvise");
		if (close(fd)) die("close renamed");
		static int word;
		if (syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0) != -1) die("futex did not fail");
		char ap[4096];
		snprintf(ap, sizeof(ap), "%s/futex_addr", dir);
		FILE *f = fopen(ap, "w");
		if (!f) die("futex_addr");
		fprintf(f, "%p", (void *)&word);
		fclose(f);
	}

	for (int i = 0; i < 10; i++) {
		struct timespec ts = { 0, i < 5 ? 10000000 : 1000000 };
		nanosleep(&ts, NULL);
	}

	char dpath[4096];
	snprintf(dpath, sizeof(dpath), "%s/direct", ddir);
	int fd = open(dpath, O_CREAT | O_WRONLY | O_DIRECT, 0600);
	if (fd < 0) die("open O_DIRECT");
	void *abuf;
	if (posix_memalign(&abuf, 4096, 65536)) die("posix_memalign");
	memset(abuf, 'd', 65536);
	for (int k = 0; k < 8; k++)
		if (pwrite(fd, abuf, 65536, (off_t)k * 65536) != 65536) die("pwrite O_DIRECT");
	if (fsync(fd)) die("fsync");
	if (close(fd)) die("close");
	return 0;
}

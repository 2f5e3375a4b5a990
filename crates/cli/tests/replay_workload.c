/*
 * Workload for latscope's replay fidelity tests: file operations of every kind the replay
 * models, each writing latscope's generated pattern (byte(o) at file offset o), so that the
 * replayed tree can be compared byte for byte with the recorded one.
 *
 * usage: replay_workload DIR     (DIR/input must exist: read before anything writes it)
 *
 * creates a tree; writes, appends, renames (a file and a directory), truncates, reads back;
 * dups fds (dup, dup2) and writes through both; forks a child that writes to an inherited fd;
 * openat/mkdirat/fstatat relative to a directory fd; pread/pwrite; lseek; mmap + msync;
 * four threads sharing a file (each writes its blocks, then reads a neighbour's) and each
 * writing its own; O_DIRECT writes and reads from aligned buffers (where the file system
 * supports O_DIRECT).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *dir;
static char buf[1 << 17];

static unsigned char pat(unsigned long long o)
{
	unsigned int x = (unsigned int)(o & ((1u << 20) - 1)) * 2654435761u;
	return 1 + (x >> 16) % 255;
}

static void fillp(char *b, unsigned long long off, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)pat(off + i);
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static const char *P(const char *rel)
{
	static char paths[16][4096];
	static int next;
	char *p = paths[next++ % 16];
	snprintf(p, 4096, "%s/%s", dir, rel);
	return p;
}

/* write n pattern bytes that land at file offset `at` */
static void wpat(int fd, unsigned long long at, size_t n)
{
	char *b = malloc(n);
	fillp(b, at, n);
	if (write(fd, b, n) != (ssize_t)n)
		die("write");
	free(b);
}

static void pwpat(int fd, unsigned long long at, size_t n)
{
	char *b = malloc(n);
	fillp(b, at, n);
	if (pwrite(fd, b, n, at) != (ssize_t)n)
		die("pwrite");
	free(b);
}

static int shared_fd;
static pthread_barrier_t barrier;

static void *worker(void *arg)
{
	long k = (long)arg;
	for (int round = 0; round < 8; round++)
		pwpat(shared_fd, (unsigned long long)(round * 4 + k) * 4096, 4096);
	pthread_barrier_wait(&barrier);
	long other = (k + 1) % 4;
	for (int round = 0; round < 8; round++)
		if (pread(shared_fd, buf + k * 4096, 4096, (off_t)(round * 4 + other) * 4096) != 4096)
			die("pread shared");
	/* A path of its own: P()'s shared buffers are for one thread (the workers would race for
	 * a slot, and one open a path another is still writing). */
	char path[4096];
	snprintf(path, sizeof(path), "%s/tree/t%ld", dir, k);
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
	if (fd < 0)
		die("open own");
	for (int i = 0; i < 16; i++)
		wpat(fd, (unsigned long long)i * 1000, 1000);
	if (lseek(fd, 0, SEEK_SET) != 0)
		die("lseek own");
	char local[1000];
	for (int i = 0; i < 16; i++)
		if (read(fd, local, sizeof(local)) != sizeof(local))
			die("read own");
	close(fd);
	return NULL;
}

static void read_all(const char *rel)
{
	int fd = open(P(rel), O_RDONLY);
	if (fd < 0)
		die(rel);
	while (read(fd, buf, 4096) > 0)
		;
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: replay_workload DIR\n");
		return 2;
	}
	dir = argv[1];
	int fd, fd2;

	/* a file that existed before: read from offset 0 on */
	read_all("input");

	if (mkdir(P("tree"), 0755) || mkdir(P("tree/sub"), 0755) || mkdir(P("tree/sub/deep"), 0750))
		die("mkdir");

	/* sequential writes, lseek, read, pread, pwrite past the end (a hole), fsync */
	fd = open(P("tree/a"), O_CREAT | O_RDWR, 0644);
	if (fd < 0)
		die("open a");
	for (int i = 0; i < 3; i++)
		wpat(fd, (unsigned long long)i * 8192, 8192);
	if (lseek(fd, 0, SEEK_SET) != 0)
		die("lseek");
	if (read(fd, buf, 8192) != 8192)
		die("read a");
	if (pread(fd, buf, 100, 5000) != 100)
		die("pread a");
	pwpat(fd, 32768, 4096);
	if (lseek(fd, 0, SEEK_END) != 36864)
		die("lseek end");
	fsync(fd);
	close(fd);

	/* appends, by two opens */
	fd = open(P("tree/log"), O_CREAT | O_WRONLY | O_APPEND, 0644);
	for (int i = 0; i < 10; i++)
		wpat(fd, (unsigned long long)i * 100, 100);
	close(fd);
	fd = open(P("tree/log"), O_WRONLY | O_APPEND);
	wpat(fd, 1000, 50);
	close(fd);

	/* dup and dup2 share the position */
	fd = open(P("tree/dupped"), O_CREAT | O_RDWR, 0644);
	fd2 = dup(fd);
	wpat(fd, 0, 1000);
	wpat(fd2, 1000, 1000);
	if (dup2(fd, 10) != 10)
		die("dup2");
	wpat(10, 2000, 500);
	close(fd);
	close(fd2);
	close(10);

	/* a child writes through the fd it inherited (shared position) */
	fd = open(P("tree/forked"), O_CREAT | O_WRONLY, 0644);
	wpat(fd, 0, 100);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		wpat(fd, 100, 100);
		close(fd);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	wpat(fd, 200, 100);
	close(fd);

	/* *at calls relative to a directory fd */
	int dfd = open(P("tree/sub"), O_RDONLY | O_DIRECTORY);
	if (dfd < 0)
		die("open sub");
	fd = openat(dfd, "viaat", O_CREAT | O_WRONLY, 0644);
	wpat(fd, 0, 777);
	close(fd);
	struct stat sb;
	if (fstatat(dfd, "viaat", &sb, 0) || sb.st_size != 777)
		die("fstatat");
	if (mkdirat(dfd, "deep2", 0755))
		die("mkdirat");
	close(dfd);

	/* renames: a file, then a directory */
	if (rename(P("tree/a"), P("tree/sub/a2")) || rename(P("tree/sub/deep"), P("tree/moved")))
		die("rename");
	fd = open(P("tree/moved/inside"), O_CREAT | O_WRONLY, 0600);
	wpat(fd, 0, 333);
	close(fd);

	/* truncation, then a read that ends at the new end */
	fd = open(P("tree/sub/a2"), O_RDWR);
	if (ftruncate(fd, 20000))
		die("ftruncate");
	if (pread(fd, buf, 4096, 16384) != 20000 - 16384)
		die("pread after truncate");
	close(fd);

	/* a shared mapping, synced */
	fd = open(P("tree/mapped"), O_CREAT | O_RDWR, 0644);
	if (ftruncate(fd, 65536))
		die("ftruncate mapped");
	char *m = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		die("mmap");
	fillp(m, 0, 65536);
	if (msync(m, 65536, MS_SYNC))
		die("msync");
	munmap(m, 65536);
	close(fd);

	/* O_DIRECT, aligned */
	fd = open(P("tree/direct"), O_CREAT | O_RDWR | O_DIRECT, 0644);
	if (fd >= 0) {
		char *ab;
		if (posix_memalign((void **)&ab, 4096, 16384))
			die("posix_memalign");
		for (int i = 0; i < 4; i++) {
			fillp(ab, (unsigned long long)i * 16384, 16384);
			if (pwrite(fd, ab, 16384, (off_t)i * 16384) != 16384)
				die("pwrite O_DIRECT");
		}
		if (pread(fd, ab, 16384, 16384) != 16384)
			die("pread O_DIRECT");
		free(ab);
		close(fd);
	}

	/* threads sharing a file */
	shared_fd = open(P("tree/shared"), O_CREAT | O_RDWR, 0644);
	pthread_barrier_init(&barrier, NULL, 4);
	pthread_t th[4];
	for (long k = 0; k < 4; k++)
		pthread_create(&th[k], NULL, worker, (void *)k);
	for (int k = 0; k < 4; k++)
		pthread_join(th[k], NULL);
	close(shared_fd);

	/* failures the replay must reproduce, a removal, and everything read back */
	if (stat(P("tree/nonexistent"), &sb) == 0)
		die("stat should fail");
	if (rmdir(P("tree/sub/deep2")))
		die("rmdir");
	if (unlink(P("tree/sub/viaat")))
		die("unlink");
	read_all("tree/sub/a2");
	read_all("tree/log");
	read_all("tree/dupped");
	read_all("tree/forked");
	read_all("tree/mapped");
	read_all("tree/shared");
	return 0;
}

/*
 * The capture bench/replay.sh replays: T threads, each with its own file of F MiB (sized with
 * ftruncate first), doing N random 4 KiB pwrites then N random 4 KiB preads (page cache), the
 * offsets from a fixed per-thread sequence.
 *
 * usage: replay-load DIR THREADS OPS_PER_THREAD FILE_MIB [IOLOG_DIR]
 *   With IOLOG_DIR, does nothing but write the same operations as fio iologs (version 2), one
 *   per thread: IOLOG_DIR/t<k>.iolog, on DIR/f<k>.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *dir, *iolog_dir;
static long nops, file_blocks;

static uint64_t next(uint64_t *s)
{
	/* xorshift64* */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void *worker(void *arg)
{
	long k = (long)arg;
	char path[4096];
	snprintf(path, sizeof(path), "%s/f%ld", dir, k);
	uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1);
	if (iolog_dir) {
		char lp[4096];
		snprintf(lp, sizeof(lp), "%s/t%ld.iolog", iolog_dir, k);
		FILE *f = fopen(lp, "w");
		if (!f) {
			perror(lp);
			exit(1);
		}
		fprintf(f, "fio version 2 iolog\n%s add\n%s open\n", path, path);
		for (long i = 0; i < nops; i++)
			fprintf(f, "%s write %llu 4096\n", path, (unsigned long long)(next(&seed) % file_blocks) * 4096);
		for (long i = 0; i < nops; i++)
			fprintf(f, "%s read %llu 4096\n", path, (unsigned long long)(next(&seed) % file_blocks) * 4096);
		fprintf(f, "%s close\n", path);
		fclose(f);
		return NULL;
	}
	int fd = open(path, O_CREAT | O_RDWR, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)file_blocks * 4096)) {
		perror(path);
		exit(1);
	}
	static __thread char buf[4096];
	memset(buf, 'x', sizeof(buf));
	for (long i = 0; i < nops; i++)
		if (pwrite(fd, buf, 4096, (off_t)(next(&seed) % file_blocks) * 4096) != 4096) {
			perror("pwrite");
			exit(1);
		}
	for (long i = 0; i < nops; i++)
		if (pread(fd, buf, 4096, (off_t)(next(&seed) % file_blocks) * 4096) < 0) {
			perror("pread");
			exit(1);
		}
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: replay-load DIR THREADS OPS_PER_THREAD FILE_MIB [IOLOG_DIR]\n");
		return 2;
	}
	dir = argv[1];
	long threads = atol(argv[2]);
	nops = atol(argv[3]);
	file_blocks = atol(argv[4]) * 256;
	iolog_dir = argc > 5 ? argv[5] : NULL;
	pthread_t th[256];
	if (threads < 1 || threads > 256 || nops < 1 || file_blocks < 1)
		return 2;
	for (long k = 0; k < threads; k++)
		pthread_create(&th[k], NULL, worker, (void *)k);
	for (long k = 0; k < threads; k++)
		pthread_join(th[k], NULL);
	return 0;
}

/* Opens a new file in DIR every INTERVAL ms (up to MAX, kept open) and writes one byte to every
 * file it holds open each round; exits after ROUNDS rounds (0: never). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	int max = atoi(argv[2]), interval = atoi(argv[3]), rounds = atoi(argv[4]);
	int fds[1024], n = 0;
	struct timespec ts = { 0, interval * 1000000L };
	for (int r = 0; rounds == 0 || r < rounds; r++) {
		if (n < max && n < 1024) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/f%04d", argv[1], n);
			int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
			if (fd < 0)
				return 1;
			fds[n++] = fd;
		}
		for (int i = 0; i < n; i++)
			if (write(fds[i], "x", 1) != 1)
				return 1;
		nanosleep(&ts, NULL);
	}
	return 0;
}

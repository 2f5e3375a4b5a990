/*
 * A sustained syscall load: THREADS threads calling getppid() as fast as they can until killed.
 * usage: spin THREADS
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *run(void *arg)
{
	(void)arg;
	for (;;)
		getppid();
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2;
	pthread_t t[64];
	for (int i = 0; i < n && i < 64; i++)
		pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < n && i < 64; i++)
		pthread_join(t[i], NULL);
	return 0;
}

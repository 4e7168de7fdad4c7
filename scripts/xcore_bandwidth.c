/* Cross-core bandwidth probe: how fast one core reads what the other just
 * wrote, the traffic of every shm all-reduce and of DDP at world 2.
 *
 * Build and run:  gcc -O3 -ffast-math -march=native -o /tmp/xcore scripts/xcore_bandwidth.c -lpthread && /tmp/xcore
 *
 * Thread 0 (pinned to CPU 0) writes a 2 MiB buffer, thread 1 (CPU 1) reads
 * it, in turn, 50 times; the line prints the rate of 8 such runs. On the
 * 2-core VM this project is measured on, the rate moves in phases of
 * seconds between about 1.7 GB/s and 9-13 GB/s, as the host moves our two
 * vCPUs; in the slow phases a 2.7 MB shm all-reduce takes about 1 ms
 * instead of 0.2, and DDP at world 2 loses a quarter of its speed. Compare
 * figures taken in the same phase, or interleave many rounds. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define N (2 << 20)
#define ITERS 50
static float *buf;
static atomic_int turn;
static volatile float sink;

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *reader(void *arg) {
	(void)arg;
	pin(1);
	for (int i = 0; i < ITERS; i++) {
		while (atomic_load(&turn) != 2 * i + 1)
			;
		float s = 0;
		for (int j = 0; j < N / 4; j++)
			s += buf[j];
		sink = s;
		atomic_store(&turn, 2 * i + 2);
	}
	return 0;
}

int main(void) {
	pin(0);
	buf = mmap(0, N, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(buf, 1, N);
	for (int rep = 0; rep < 8; rep++) {
		pthread_t t;
		atomic_store(&turn, 0);
		pthread_create(&t, 0, reader, 0);
		double t0 = now();
		for (int i = 0; i < ITERS; i++) {
			while (atomic_load(&turn) != 2 * i)
				;
			for (int j = 0; j < N / 4; j++)
				buf[j] = j + i;
			atomic_store(&turn, 2 * i + 1);
		}
		while (atomic_load(&turn) != 2 * ITERS)
			;
		double dt = now() - t0;
		pthread_join(t, 0);
		printf("%.2f GB/s  ", (double)N * ITERS / dt / 1e9);
		fflush(stdout);
	}
	printf("\n");
	return 0;
}

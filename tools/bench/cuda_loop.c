// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A tight loop of CUDA runtime calls for tools/bench/prog_cost.py: the wall time per call of
 * the functions pipeprof probes, with and without probes on them.
 *
 *   cuda_loop LIBCUDART
 *
 * Loads the runtime (the fake one of tools/fakecuda: its calls cost a few hundred ns, so a
 * probe's cost shows in full), warms every call up, prints `READY pid=<pid>`, then answers each
 * line `API N` on its standard input with `API N WALL_NS CPU_NS`: the CLOCK_MONOTONIC and the
 * thread's CPU-time nanoseconds that N back-to-back calls took, on the calling (main) thread.
 * The CPU time holds what the probes cost the thread (the trap and the handlers run in its
 * context) but not the time other tasks had its CPU. API is one of
 *
 *   sync    cudaStreamSynchronize(NULL), on an idle stream
 *   launch  cudaLaunchKernel of a 1-thread kernel (1 ns on the fake device) on NULL
 *   memcpy  cudaMemcpy of 64 bytes host to device (synchronous)
 *
 * End of input ends it.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct dim3 {
	unsigned int x, y, z;
};

typedef int (*sync_fn)(void *stream);
typedef int (*launch_fn)(const void *func, struct dim3 grid, struct dim3 block, void **args,
			 size_t shared, void *stream);
typedef int (*memcpy_fn)(void *dst, const void *src, size_t count, int kind);
typedef int (*malloc_fn)(void **p, size_t size);

static sync_fn sync_call;
static launch_fn launch_call;
static memcpy_fn memcpy_call;
static void *dev;
static char host[64];

static unsigned long long now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* N calls of api; nonzero when a call fails. */
static int run(const char *api, long n)
{
	struct dim3 one = { 1, 1, 1 };
	int err = 0;

	if (!strcmp(api, "sync")) {
		for (long i = 0; i < n; i++)
			err |= sync_call(NULL);
	} else if (!strcmp(api, "launch")) {
		for (long i = 0; i < n; i++)
			err |= launch_call((const void *)run, one, one, NULL, 0, NULL);
		/* Kernels of 1 ns: the stream is idle again by the next command. */
		err |= sync_call(NULL);
	} else if (!strcmp(api, "memcpy")) {
		for (long i = 0; i < n; i++)
			err |= memcpy_call(dev, host, sizeof(host), 1 /* cudaMemcpyHostToDevice */);
	} else {
		return -1;
	}
	return err;
}

int main(int argc, char **argv)
{
	char line[128], api[32];
	malloc_fn malloc_call;
	void *rt;
	long n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s LIBCUDART\n", argv[0]);
		return 2;
	}
	rt = dlopen(argv[1], RTLD_NOW);
	if (!rt) {
		fprintf(stderr, "cuda_loop: %s\n", dlerror());
		return 1;
	}
	sync_call = (sync_fn)dlsym(rt, "cudaStreamSynchronize");
	launch_call = (launch_fn)dlsym(rt, "cudaLaunchKernel");
	memcpy_call = (memcpy_fn)dlsym(rt, "cudaMemcpy");
	malloc_call = (malloc_fn)dlsym(rt, "cudaMalloc");
	if (!sync_call || !launch_call || !memcpy_call || !malloc_call ||
	    malloc_call(&dev, sizeof(host))) {
		fprintf(stderr, "cuda_loop: %s is not a CUDA runtime\n", argv[1]);
		return 1;
	}
	if (run("sync", 1000) || run("launch", 1000) || run("memcpy", 1000)) {
		fprintf(stderr, "cuda_loop: a warm-up call failed\n");
		return 1;
	}
	printf("READY pid=%d\n", getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		unsigned long long t0, t1, c0, c1;
		int err;

		if (sscanf(line, "%31s %ld", api, &n) != 2 || n < 1) {
			printf("ERROR bad command\n");
			fflush(stdout);
			continue;
		}
		c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
		t0 = now_ns(CLOCK_MONOTONIC);
		err = run(api, n);
		t1 = now_ns(CLOCK_MONOTONIC);
		c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
		if (err)
			printf("ERROR %s failed (%d)\n", api, err);
		else
			printf("%s %ld %llu %llu\n", api, n, t1 - t0, c1 - c0);
		fflush(stdout);
	}
	return 0;
}

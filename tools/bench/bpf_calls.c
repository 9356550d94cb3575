// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * LD_PRELOAD shim for tools/bench/attach_time.py --bpf-calls: the CPU time of each bpf()
 * command a process makes (the calling thread's clock, so a call's wait for a grace period or
 * another CPU is not counted), written at its exit to $PIPEPROF_BENCH_BPF_CALLS as lines of
 * "bpf CMD CALLS NS". libbpf makes every bpf() call through libc's syscall(), which this
 * replaces; a program that calls the kernel some other way is not seen.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>

#define MAX_CMD 64

static unsigned long long cmd_ns[MAX_CMD], cmd_calls[MAX_CMD];
static char out_path[4096];

static unsigned long long thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

__attribute__((constructor)) static void bpf_calls_init(void)
{
	const char *path = getenv("PIPEPROF_BENCH_BPF_CALLS");

	if (path)
		snprintf(out_path, sizeof(out_path), "%s", path);
	/* Not into the processes it starts (bpftool, a launched command). */
	unsetenv("LD_PRELOAD");
	unsetenv("PIPEPROF_BENCH_BPF_CALLS");
}

long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	unsigned long long t0;
	long a[6], ret;
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (!real)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	if (nr != __NR_bpf || a[0] < 0 || a[0] >= MAX_CMD)
		return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	t0 = thread_cpu_ns();
	ret = real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	__atomic_fetch_add(&cmd_ns[a[0]], thread_cpu_ns() - t0, __ATOMIC_RELAXED);
	__atomic_fetch_add(&cmd_calls[a[0]], 1, __ATOMIC_RELAXED);
	return ret;
}

__attribute__((destructor)) static void bpf_calls_write(void)
{
	FILE *f;

	if (!out_path[0] || !(f = fopen(out_path, "w")))
		return;
	for (int i = 0; i < MAX_CMD; i++)
		if (cmd_calls[i])
			fprintf(f, "bpf %d %llu %llu\n", i, cmd_calls[i], cmd_ns[i]);
	fclose(f);
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A native call chain of known shape, built with frame pointers, for the CPU sampler's native
 * frames: fp_outer -> fp_middle -> fp_inner_spin, which spins until its thread has used the
 * CPU time asked for. Each call is followed by work of its caller's own, so no call becomes a
 * jump (a tail call would leave its caller out of the stack, as it does in real code).
 */
#include <time.h>

static volatile unsigned long sink;

static double thread_cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) unsigned long fp_inner_spin(double ms)
{
	double end = thread_cpu_ms() + ms;
	unsigned long x = 1;

	do {
		for (int i = 0; i < 20000; i++)
			x = x * 6364136223846793005UL + 1442695040888963407UL;
		sink = x;
	} while (thread_cpu_ms() < end);
	return x;
}

__attribute__((noinline)) unsigned long fp_middle(double ms)
{
	unsigned long x = fp_inner_spin(ms);

	sink += x;
	return x ^ sink;
}

__attribute__((noinline)) unsigned long fp_outer(double ms)
{
	unsigned long x = fp_middle(ms);

	sink -= x;
	return x + sink;
}

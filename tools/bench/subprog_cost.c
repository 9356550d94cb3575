// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What a BPF subprogram costs the load of a program that calls it, on this machine: loads
 * subprog_cost.bpf.c's three programs (16 map updates inlined, as 16 static subprograms, as 16
 * global ones) one at a time, alternating, ROUNDS times each, and prints the median CPU time of
 * a load and, per subprogram, the difference from the inlined one. pipeprof's programs hold
 * about 70 subprograms between them (`sudo make bench-attach` runs this after the attach).
 *
 *   sudo .output/bench/subprog_cost [ROUNDS]      (default 15)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/libbpf.h>
#include "subprog_cost.skel.h"

#define NR_KINDS 3
#define SUBPROGS 16

static const char *const kinds[NR_KINDS] = { "inlined", "static_calls", "global_calls" };

static double thread_cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* CPU ms to load program `kind` of a fresh object, or -errno. */
static double load_once(int kind)
{
	struct subprog_cost_bpf *skel = subprog_cost_bpf__open();
	struct bpf_program *prog;
	double t0, took;
	int err;

	if (!skel)
		return -errno;
	bpf_object__for_each_program(prog, skel->obj)
		bpf_program__set_autoload(prog, !strcmp(bpf_program__name(prog), kinds[kind]));
	t0 = thread_cpu_ms();
	err = subprog_cost_bpf__load(skel);
	took = thread_cpu_ms() - t0;
	subprog_cost_bpf__destroy(skel);
	return err ? err : took;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 15;
	double *ms[NR_KINDS] = {}, median[NR_KINDS];
	int err = 0;

	if (rounds < 1 || rounds > 10000) {
		fprintf(stderr, "subprog_cost: ROUNDS must be 1-10000, not '%s'\n", argv[1]);
		return 2;
	}
	for (int k = 0; k < NR_KINDS; k++)
		if (!(ms[k] = calloc(rounds, sizeof(double)))) {
			err = -ENOMEM;
			goto cleanup;
		}
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < NR_KINDS; k++) {
			ms[k][r] = load_once(k);
			if (ms[k][r] < 0) {
				err = (int)ms[k][r];
				fprintf(stderr, "subprog_cost: cannot load %s: %s\n", kinds[k],
					strerror(-err));
				goto cleanup;
			}
		}
	for (int k = 0; k < NR_KINDS; k++) {
		qsort(ms[k], rounds, sizeof(double), by_value);
		median[k] = ms[k][rounds / 2];
	}
	printf("load, CPU ms (median of %d): inlined %.3f, 16 static subprograms %.3f, "
	       "16 global %.3f\n", rounds, median[0], median[1], median[2]);
	printf("per subprogram: static %.0f us, global %.0f us\n",
	       (median[1] - median[0]) * 1e3 / SUBPROGS, (median[2] - median[0]) * 1e3 / SUBPROGS);
cleanup:
	for (int k = 0; k < NR_KINDS; k++)
		free(ms[k]);
	return err ? 1 : 0;
}

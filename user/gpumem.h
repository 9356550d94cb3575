/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The report's device memory: what each process allocated and freed through the CUDA
 * runtime and driver while traced (devmem.bpf.c), and growth of the trainer's process's
 * outstanding bytes across steps, flagged as a probable leak when it never levels off. Pure.
 */
#ifndef PIPEPROF_GPUMEM_H
#define PIPEPROF_GPUMEM_H

#include <stdbool.h>
#include <stdint.h>

/* Growth across steps is a probable leak when a straight line fits the outstanding bytes at
 * the step boundaries this well (R^2), they grew at least this much over the steps, and the
 * later half of them grew at least GPUMEM_LEAK_LATE_SHARE of the whole's rate. An allocator
 * warming up adds segments and levels off; one new segment in the window is a single jump,
 * which a line fits at R^2 0.75 at best. */
#define GPUMEM_LEAK_MIN_R2	0.9
#define GPUMEM_LEAK_MIN_BYTES	(4ull << 20)
#define GPUMEM_LEAK_LATE_SHARE	0.5
#define GPUMEM_LEAK_MIN_POINTS	10

struct gpumem_fit {
	int points;		/* step boundaries fitted */
	int steps;		/* the steps between the first and the last of them */
	double bytes_per_step;	/* the line's slope */
	double r2;
	double late_bytes_per_step;	/* the slope over the later half of the boundaries */
	double growth_bytes;	/* first to last boundary, along the line */
	bool leak;
};

/* Fits y[i] (outstanding bytes at boundary i, in order) against step[i], the boundary's step
 * number (NULL: i; boundaries lost leave gaps in it). */
void gpumem_fit_steps(const double *step, const double *y, int n, struct gpumem_fit *out);

/* One process's device memory over the window, relative to the attach: memory allocated
 * before it is not seen, so outstanding may be negative once such memory is freed. */
struct gpumem_proc {
	uint32_t pid;
	bool root;
	int64_t start_bytes, end_bytes, peak_bytes;	/* outstanding */
	uint64_t allocs, frees, alloc_bytes, free_bytes;	/* in the window */
	uint64_t frees_unseen;		/* frees of memory not seen allocated */
};

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The report's steps: training steps of the trainer thread, from the starts of its outermost
 * autograd backward passes (a record each, with the thread's state time so far), and the
 * stall model's breakdown of each. Pure: no BPF, no /proc.
 */
#ifndef PIPEPROF_STEPS_H
#define PIPEPROF_STEPS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "gpumem.h"
#include "pipeprof.h"
#include "step_store.h"

/* --step-symbol FILE:SYMBOL's parts, with their NULs. */
#define STEP_FILE_MAX 128
#define STEP_SYMBOL_MAX 256

#define STEPS_SLOWEST 3
#define STEPS_TIMED_MIN_SHARE 0.9
/* A step this many times the median is one of "the slowest" worth naming. */
#define STEPS_SLOW_RATIO 1.5

struct step_breakdown {
	int index;			/* 1 for the first whole step in the window */
	/* Steps between its two boundaries: more than one where the records of those between
	 * were lost (steps.c's steps_spanned()), and seconds is then all of theirs. */
	int spanned;
	double seconds;
	double share[PP_NR_STATES];	/* of the step's time */
};

/* Syncs a step at or above which the report names the pattern that makes them: a read of a
 * GPU value on the host (`.item()`, `.cpu()`, `print(t)`) or a blocking copy in the loop. One
 * is the usual loss read; a pageable `.cuda()` copy is a second. */
#define STEPS_MANY_SYNCS 3
/* H2D bytes from pageable memory, as a share of all, at or above which pin_memory is advised. */
#define STEPS_PAGEABLE_ADVICE 0.5

/* The trainer's GPU API calls over the whole steps, from the counts in the step records. */
struct step_gpu {
	uint64_t launches, launch_gap_ns, launch_gaps;
	uint64_t launches_min, launches_max;	/* in one step */
	/* The steps whose every launch was probed (all of them unless launches were probed in
	 * bursts, launch_sample.h), and their time: the launch figures are over these alone. */
	int launch_steps;
	int launch_timed;	/* of them, timed one by one: launches_min and _max's */
	double launch_seconds;
	uint64_t syncs, syncs_min, syncs_max;
	uint64_t sync_calls[PP_MAX_SYNC_APIS];	/* by api id (gpu_apis.c) */
	struct pp_copy_counts copies;		/* by enum pp_copy_dir */
	/* Device memory: the trainer's allocations and frees, and its process's outstanding
	 * bytes at each boundary fitted across the steps. */
	struct pp_dev_counts dev;
	uint64_t dev_allocs_min, dev_allocs_max, dev_frees_min, dev_frees_max;
	struct gpumem_fit dev_growth;
	/* NCCL (nccl.bpf.c): the trainer's calls by enum pp_nccl_op, their bytes where known,
	 * and the fewest and most calls of any one step. */
	uint64_t nccl_calls[PP_NR_NCCL_CALLS];
	uint64_t nccl_bytes;
	uint64_t nccl_min, nccl_max;
};

/*
 * Launch-bound (CPU-side): a trainer mostly on-CPU that spends much of its step issuing many
 * kernel launches in quick succession. Its GPU waits for work the host has not launched yet;
 * fewer, larger launches (CUDA graphs, fused kernels) are the fix, not a faster GPU.
 */
#define STEPS_LAUNCH_BOUND_MIN_LAUNCHES	50	/* a step */
#define STEPS_LAUNCH_BOUND_MAX_GAP_S	100e-6	/* between launches */
#define STEPS_LAUNCH_BOUND_MIN_SHARE	0.3	/* of the steps' time between launches */
#define STEPS_LAUNCH_BOUND_MIN_RUNNING	0.5	/* the trainer's on-CPU share of its steps */

struct step_summary {
	unsigned int source;		/* enum pp_step_source of the boundaries used */
	int count;			/* whole steps: between two boundaries inside the window */
	/* Those timed one by one: both their boundaries recorded. The step times (p50, p90,
	 * max, the median and slow steps) are theirs; count, the rate, the mean and the
	 * breakdown of every step are over all. */
	int timed;
	/* The step times are given: at least STEPS_TIMED_MIN_SHARE of the steps were timed one
	 * by one. Records are lost where the loop runs fastest, so those timed are the slower
	 * stretches' (a busy machine's loop read p50 0.184 ms for 0.137), and the times of a
	 * few are no estimate of the rest's. */
	bool times;
	double per_second;		/* over those steps' span */
	double p50_s, p90_s, max_s, mean_s;
	struct step_breakdown median;	/* the step of median time */
	struct step_breakdown all;	/* every whole step summed (index 0) */
	int nr_slowest;
	struct step_breakdown slowest[STEPS_SLOWEST];	/* >= STEPS_SLOW_RATIO x the median */
	int slow_count;			/* every step >= STEPS_SLOW_RATIO x the median ... */
	struct step_breakdown slow;	/* ... summed (index 0) */
	int other_threads;		/* threads other than the trainer with backward passes */
	struct step_gpu gpu;		/* over every whole step */
};

/* The steps of thread tid from the records in store (any order, any threads): between its
 * probe's boundaries where there are two, else between the ends of its waits for batches.
 * Returns 0, or -ENOMEM. */
int steps_summarize(const struct step_store *store, uint32_t tid, struct step_summary *out);

/* Every whole step of thread tid, as steps_summarize() finds them, in time order, into *out
 * (from malloc, NULL with none; free it). Returns how many, or -ENOMEM. */
int steps_each(const struct step_store *store, uint32_t tid, struct step_breakdown **out);
/* The times of the boundaries those steps lie between, in order, into *ts, and the number of
 * the step each begins into *numbers (from 1; records lost leave gaps): both from malloc, NULL
 * with none. Returns how many, or -ENOMEM. */
int steps_boundary_times(const struct step_store *store, uint32_t tid, uint64_t **ts,
			 int **numbers);

/* The records of mine[0..nr) (one thread's data-wait ends, by time) that start a batch's burst
 * of waits, kept at the front; returns how many. */
int steps_batch_bursts(const struct step_point **mine, int nr);
/* Per step, over s's whole steps: total / count, 0 without steps. */
double steps_per_step(const struct step_summary *s, uint64_t total);
/* Launches per step, over the steps whose launches were all probed (gpu.launch_steps). */
double steps_launches_per_step(const struct step_summary *s);
/* Whether launches were counted in only some of the steps (probed in bursts). */
bool steps_launches_sampled(const struct step_summary *s);
/* The trainer's launches per second of its steps, and its mean gap between launches with no
 * sync between, in seconds (0 when none). */
double steps_launch_rate(const struct step_summary *s);
double steps_launch_gap_s(const struct step_summary *s);
/* The share of direction dir's bytes copied from or to memory not seen pinned; -1 with none. */
double steps_pageable_share(const struct pp_copy_counts *c, unsigned int dir);
/* Whether the steps sync often enough to name the `.item()` pattern. */
bool steps_many_syncs(const struct step_summary *s);
/* The share of the steps' time spent between one launch and the next (no sync between). */
double steps_launch_share(const struct step_summary *s);
/* Whether the steps are launch-bound, given that the verdict found no stall (CPU-BOUND or
 * NO DOMINANT STALL): mostly_running. */
bool steps_launch_bound(const struct step_summary *s, bool mostly_running);

#endif

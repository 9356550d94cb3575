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
#include "pipeprof.h"

#define STEPS_SLOWEST 3
/* A step this many times the median is one of "the slowest" worth naming. */
#define STEPS_SLOW_RATIO 1.5

struct step_breakdown {
	int index;			/* 1 for the first whole step in the window */
	double seconds;
	double share[PP_NR_STATES];	/* of the step's time */
};

struct step_summary {
	int count;			/* whole steps: between two boundaries inside the window */
	double per_second;		/* over those steps' span */
	double p50_s, p90_s, max_s, mean_s;
	struct step_breakdown median;	/* the step of median time */
	struct step_breakdown all;	/* every whole step summed (index 0) */
	int nr_slowest;
	struct step_breakdown slowest[STEPS_SLOWEST];	/* >= STEPS_SLOW_RATIO x the median */
	int slow_count;			/* every step >= STEPS_SLOW_RATIO x the median ... */
	struct step_breakdown slow;	/* ... summed (index 0) */
	int other_threads;		/* threads other than the trainer with backward passes */
};

/* The steps of thread tid from recs[] (any order, any threads). Returns 0, or -ENOMEM. */
int steps_summarize(const struct pp_step_record *recs, int n, uint32_t tid,
		    struct step_summary *out);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The daemon's step-time regression rule: a window's median step against the median of the
 * job's trailing windows. Pure: unit-tested without root. */
#ifndef PIPEPROF_STEP_BASELINE_H
#define PIPEPROF_STEP_BASELINE_H

#include <stdbool.h>

#define STEP_BASELINE_WINDOWS 6

struct step_baseline {
	double medians[STEP_BASELINE_WINDOWS];	/* oldest first */
	int n;
};

/*
 * Feed one window's median step time. Once STEP_BASELINE_WINDOWS earlier windows are known,
 * returns true when median exceeds their median by more than threshold (0.2: 20%), with that
 * median in *baseline. The window then joins the baseline either way: a lasting slowdown is
 * flagged in the windows where it starts, not forever.
 */
bool step_baseline_feed(struct step_baseline *b, double median, double threshold, double *baseline);

#endif

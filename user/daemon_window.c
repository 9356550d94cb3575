// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "daemon_window.h"

/*
 * Each thread's time since the last window. A phase still open at the window's end counts in
 * the state it reads as now (an unwoken sleep is OTHER until its waker names it), so a thread
 * blocked for many windows shows in each. When the wakeup later names that time, the totals
 * move from the provisional state to the real one: the window where that happens takes the
 * gain, its other states' losses are dropped, and its states are scaled back to its length,
 * so that counters only grow and each window still sums to its wall time.
 */
void window_delta(const __u64 *now, __u64 *prev, __u64 *out, __u64 *wall)
{
	double gain = 0, net = 0;

	for (int s = 0; s < PP_NR_STATES; s++) {
		double d = (double)now[s] - (double)prev[s];

		net += d;
		gain += d > 0 ? d : 0;
	}
	*wall = 0;
	for (int s = 0; s < PP_NR_STATES; s++) {
		__u64 cumulative = now[s];	/* out may be now */
		double d = (double)cumulative - (double)prev[s];

		out[s] = d > 0 && net > 0 ? (__u64)(d * net / gain) : 0;
		*wall += out[s];
		prev[s] = cumulative;
	}
}

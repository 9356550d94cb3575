// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "daemon_window.h"
#include "report.h"

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

/* A counter since the attach, less its last reading; one that went back (the map was made
 * anew) counts from zero. */
static __u64 since(__u64 now, __u64 *seen)
{
	__u64 d = now >= *seen ? now - *seen : now;

	*seen = now;
	return d;
}

void window_calls_delta(struct report *r, struct window_calls_seen *seen)
{
	for (int i = 0; i < r->nr_apis && i < PP_MAX_GPU_APIS; i++) {
		struct api_result *a = &r->apis[i];

		a->calls = since(a->calls, &seen->apis[i].calls);
		a->total_ns = since(a->total_ns, &seen->apis[i].total_ns);
		for (int s = 0; s < PP_HIST_SLOTS; s++)
			a->slots[s] = since(a->slots[s], &seen->apis[i].slots[s]);
	}
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++) {
		struct nccl_result *n = &r->nccl[op];

		n->calls = since(n->calls, &seen->nccl[op].calls);
		n->bytes = since(n->bytes, &seen->nccl[op].bytes);
		n->unsized = since(n->unsized, &seen->nccl[op].unsized);
		n->total_ns = since(n->total_ns, &seen->nccl[op].total_ns);
		for (int s = 0; s < PP_HIST_SLOTS; s++)
			n->slots[s] = since(n->slots[s], &seen->nccl[op].slots[s]);
	}
}

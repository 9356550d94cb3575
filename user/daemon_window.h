/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The daemon's per-window arithmetic on cumulative per-state counters. Pure: unit-tested
 * without root. */
#ifndef PIPEPROF_DAEMON_WINDOW_H
#define PIPEPROF_DAEMON_WINDOW_H

#include <linux/types.h>
#include "pipeprof.h"

/* now and prev hold PP_NR_STATES cumulative counters; out may be now. prev becomes now. */
void window_delta(const __u64 *now, __u64 *prev, __u64 *out, __u64 *wall);

/* What the GPU API and NCCL counters, cumulative since the attach, held at the last window. */
struct window_calls_seen {
	struct {
		__u64 calls, total_ns, slots[PP_HIST_SLOTS];
	} apis[PP_MAX_GPU_APIS];
	struct {
		__u64 calls, bytes, unsized, total_ns, slots[PP_HIST_SLOTS];
	} nccl[PP_NR_NCCL_CALLS];
};

struct report;
/* Turns r's GPU API and NCCL calls since the attach into this window's, so that a window's
 * report says calls a second of that window; seen becomes r's reading. Each call's longest
 * (max_ns) stays the longest since the attach: a window's own cannot be told from it. */
void window_calls_delta(struct report *r, struct window_calls_seen *seen);

#endif

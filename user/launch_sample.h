/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * When to probe kernel launches. A probed launch costs its thread a uprobe trap, or two where
 * the runtime reaches its driver twin (~1 us each, ~5 us where the first instruction is
 * single-stepped): on the 2-CPU VM a loop launching 44k kernels a second ran 1.5x slower with
 * every launch probed. So by default launches are probed all along while the probes are hit
 * at most LAUNCH_HIT_BUDGET times a second, and in bursts above that: a burst lasts until it
 * holds LAUNCH_BURST_STEPS step boundaries (at least LAUNCH_BURST_MIN_NS, at most
 * LAUNCH_BURST_MAX_NS; LAUNCH_BURST_MIN_NS where no step was ever seen, LAUNCH_BURST_MAX_NS
 * where the steps are only known from the trainer's waits for batches, which come several to a
 * batch and so cannot be counted as they arrive), then the probes come
 * off for as long as keeps the average under the budget. Pure logic: tracer_launches.c does
 * the attaching.
 */
#ifndef PIPEPROF_LAUNCH_SAMPLE_H
#define PIPEPROF_LAUNCH_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#define LAUNCH_HIT_BUDGET	1000		/* probe hits a second, on average */
#define LAUNCH_BURST_MIN_NS	250000000ULL
#define LAUNCH_BURST_MAX_NS	2000000000ULL
#define LAUNCH_BURST_STEPS	3
/* Under the budget, the rate is measured afresh each period: a job that starts launching
 * more is caught within one. */
#define LAUNCH_RATE_PERIOD_NS	1000000000ULL

enum launch_action { LAUNCH_KEEP, LAUNCH_DETACH, LAUNCH_ATTACH };

struct launch_sampler {
	bool on;		/* the probes are attached */
	uint64_t since_ns;	/* on: measured since; off: paused since */
	uint64_t hits_at;	/* probe hits at since_ns */
	uint64_t steps_at;	/* step boundaries at since_ns */
	uint64_t resume_ns;	/* off: attach again then */
	unsigned int pauses;	/* detaches so far */
	uint64_t off_ns;	/* time paused, closed pauses */
	bool long_bursts;	/* set by the caller: steps only from data waits */
};

/* The probes were just attached, at now, with hits and steps the counts so far. */
void launch_sampler_init(struct launch_sampler *s, uint64_t now, uint64_t hits, uint64_t steps);
/* What to do at now: hits and steps are the totals since the attach. The caller detaches or
 * attaches as told (a failed attach is a pause too: call again at the next tick). */
enum launch_action launch_sampler_tick(struct launch_sampler *s, uint64_t now, uint64_t hits,
				       uint64_t steps);
/* Time the probes were off from start_ns to now. */
uint64_t launch_sampler_off_ns(const struct launch_sampler *s, uint64_t now);

#endif

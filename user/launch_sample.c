// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "launch_sample.h"

void launch_sampler_init(struct launch_sampler *s, uint64_t now, uint64_t hits, uint64_t steps)
{
	*s = (struct launch_sampler){ .on = true, .since_ns = now, .hits_at = hits,
				      .steps_at = steps };
}

enum launch_action launch_sampler_tick(struct launch_sampler *s, uint64_t now, uint64_t hits,
				       uint64_t steps)
{
	uint64_t elapsed = now > s->since_ns ? now - s->since_ns : 0;
	double rate, pause;

	if (!s->on) {
		if (now < s->resume_ns)
			return LAUNCH_KEEP;
		s->off_ns += elapsed;
		s->on = true;
		s->since_ns = now;
		s->hits_at = hits;
		s->steps_at = steps;
		return LAUNCH_ATTACH;
	}
	if (elapsed < LAUNCH_BURST_MIN_NS)
		return LAUNCH_KEEP;
	rate = (double)(hits > s->hits_at ? hits - s->hits_at : 0) * 1e9 / elapsed;
	if (rate <= LAUNCH_HIT_BUDGET) {
		if (elapsed >= LAUNCH_RATE_PERIOD_NS) {
			s->since_ns = now;
			s->hits_at = hits;
			s->steps_at = steps;
		}
		return LAUNCH_KEEP;
	}
	/* Over the budget: the burst is long enough once it holds whole steps to count, or
	 * when the job shows no steps at all. */
	if ((steps || s->long_bursts) && steps - s->steps_at < LAUNCH_BURST_STEPS &&
	    elapsed < LAUNCH_BURST_MAX_NS)
		return LAUNCH_KEEP;
	pause = elapsed * (rate / LAUNCH_HIT_BUDGET - 1);
	s->on = false;
	s->since_ns = now;
	s->resume_ns = now + (uint64_t)pause;
	s->pauses++;
	return LAUNCH_DETACH;
}

uint64_t launch_sampler_off_ns(const struct launch_sampler *s, uint64_t now)
{
	return s->off_ns + (!s->on && now > s->since_ns ? now - s->since_ns : 0);
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* When the kernel launch probes come off and on again (launch_sample.c). */
#include "launch_sample.h"
#include "unit.h"

#define MS 1000000ULL

/* Few launches: the probes stay on all along, the rate measured afresh each period. */
TEST(test_under_budget_stays_on)
{
	struct launch_sampler s;
	uint64_t hits = 0;

	launch_sampler_init(&s, 0, 0, 0);
	for (uint64_t t = 100 * MS; t <= 30000 * MS; t += 100 * MS) {
		hits += LAUNCH_HIT_BUDGET / 10;	/* exactly the budget */
		CHECK_EQ_INT(launch_sampler_tick(&s, t, hits, t / (500 * MS)), LAUNCH_KEEP);
	}
	CHECK(s.on);
	CHECK_EQ_INT(s.pauses, 0);
	CHECK_EQ_U64(launch_sampler_off_ns(&s, 30000 * MS), 0);
}

/* 100k hits a second and no step probe: a minimal burst, then a pause that brings the
 * average down to the budget; then a burst again. */
TEST(test_over_budget_without_steps)
{
	struct launch_sampler s;
	uint64_t t = 0, hits = 0;
	enum launch_action a;

	launch_sampler_init(&s, 0, 0, 0);
	for (a = LAUNCH_KEEP; a == LAUNCH_KEEP; ) {
		t += 100 * MS;
		hits += 10000;
		a = launch_sampler_tick(&s, t, hits, 0);
	}
	CHECK_EQ_INT(a, LAUNCH_DETACH);
	CHECK_EQ_U64(t, 300 * MS);	/* the first tick past LAUNCH_BURST_MIN_NS */
	/* 30000 hits in 0.3 s: off for 0.3 x 99 s, so 30000 hits in 30 s */
	CHECK_EQ_U64(s.resume_ns, 300 * MS + 29700 * MS);
	CHECK_EQ_INT(launch_sampler_tick(&s, 29000 * MS, hits, 0), LAUNCH_KEEP);
	CHECK_EQ_U64(launch_sampler_off_ns(&s, 29000 * MS), 28700 * MS);
	CHECK_EQ_INT(launch_sampler_tick(&s, 30000 * MS, hits, 0), LAUNCH_ATTACH);
	CHECK(s.on);
	CHECK_EQ_INT(s.pauses, 1);
	CHECK_EQ_U64(launch_sampler_off_ns(&s, 31000 * MS), 29700 * MS);
}

/* Over the budget with steps: the burst waits for LAUNCH_BURST_STEPS boundaries, but no
 * longer than LAUNCH_BURST_MAX_NS. */
TEST(test_burst_holds_steps)
{
	struct launch_sampler s;
	uint64_t t = 0, hits = 0, steps = 5;
	enum launch_action a = LAUNCH_KEEP;

	launch_sampler_init(&s, 0, 0, steps);
	while (a == LAUNCH_KEEP) {
		t += 100 * MS;
		hits += 10000;
		if (t % (400 * MS) == 0)
			steps++;	/* a step every 400 ms */
		a = launch_sampler_tick(&s, t, hits, steps);
	}
	CHECK_EQ_INT(a, LAUNCH_DETACH);
	CHECK_EQ_U64(t, 1200 * MS);	/* the third boundary */
	/* Steps of 10 s: the burst ends at its longest. */
	launch_sampler_init(&s, 0, 0, 5);
	for (a = LAUNCH_KEEP, t = 0; a == LAUNCH_KEEP; ) {
		t += 100 * MS;
		hits += 10000;
		a = launch_sampler_tick(&s, t, hits, 5);
	}
	CHECK_EQ_U64(t, LAUNCH_BURST_MAX_NS);
}

/* Steps known only from data waits: a burst runs its longest, as their count cannot tell a
 * step from a batch's several wakeups. */
TEST(test_data_wait_steps_burst_long)
{
	struct launch_sampler s;
	uint64_t t = 0, hits = 0;
	enum launch_action a = LAUNCH_KEEP;

	launch_sampler_init(&s, 0, 0, 0);
	s.long_bursts = true;
	while (a == LAUNCH_KEEP) {
		t += 100 * MS;
		hits += 10000;
		a = launch_sampler_tick(&s, t, hits, 0);
	}
	CHECK_EQ_INT(a, LAUNCH_DETACH);
	CHECK_EQ_U64(t, LAUNCH_BURST_MAX_NS);
}

int main(void)
{
	RUN_TEST(test_under_budget_stays_on);
	RUN_TEST(test_over_budget_without_steps);
	RUN_TEST(test_burst_holds_steps);
	RUN_TEST(test_data_wait_steps_burst_long);
	return unit_summary();
}

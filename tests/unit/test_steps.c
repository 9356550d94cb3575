// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Steps from step records (steps.c): durations, rate, quantiles, breakdowns, the slowest. */
#include <math.h>
#include "steps.h"
#include "unit.h"

#define MS 1000000ULL

static bool near(double a, double b, double eps)
{
	return fabs(a - b) < eps;
}

/* A record at ts with `running` and `data` ns closed so far, on-CPU since phase_start. */
static struct pp_step_record rec(uint32_t tid, uint64_t ts, uint64_t running, uint64_t data,
				 uint64_t phase_start)
{
	struct pp_step_record r = { .tid = tid, .ts = ts, .phase = PP_PHASE_ONCPU,
				    .phase_start_ns = phase_start };

	r.ns[PP_RUNNING] = running;
	r.ns[PP_DATA_WAIT] = data;
	return r;
}

TEST(test_steps_of_one_thread)
{
	/* Steps of 10, 10, 10, 40 ms (given out of order, with another thread's passes): each
	 * 10 ms step 2 ms on-CPU and 8 in DATA_WAIT, the 40 ms one 4 and 36. The on-CPU phase
	 * open at each boundary began 1 ms before it. */
	struct pp_step_record r[] = {
		rec(7, 100 * MS, 10 * MS, 0, 99 * MS),
		rec(7, 130 * MS, 16 * MS, 24 * MS, 129 * MS),
		rec(7, 110 * MS, 12 * MS, 8 * MS, 109 * MS),
		rec(9, 115 * MS, 0, 0, 115 * MS),
		rec(7, 120 * MS, 14 * MS, 16 * MS, 119 * MS),
		rec(7, 170 * MS, 20 * MS, 60 * MS, 169 * MS),
		rec(9, 125 * MS, 0, 0, 125 * MS),
	};
	struct step_summary s;

	CHECK_EQ_INT(steps_summarize(r, 7, 7, &s), 0);
	CHECK_EQ_INT(s.count, 4);
	CHECK_EQ_INT(s.other_threads, 1);
	CHECK(near(s.mean_s, 0.0175, 1e-9) && near(s.per_second, 1 / 0.0175, 1e-6));
	CHECK(near(s.p50_s, 0.010, 1e-9) && near(s.max_s, 0.040, 1e-9));
	CHECK(near(s.median.share[PP_RUNNING], 0.2, 1e-9) && near(s.median.share[PP_DATA_WAIT], 0.8, 1e-9));
	/* Every step: (2 + 2 + 2 + 4) ms of 70 on-CPU. */
	CHECK_MSG(near(s.all.share[PP_RUNNING], 10.0 / 70, 1e-9), "%f", s.all.share[PP_RUNNING]);
	CHECK_EQ_INT(s.nr_slowest, 1);
	CHECK(s.slowest[0].index == 4 && near(s.slowest[0].seconds, 0.040, 1e-9));
	CHECK(near(s.slowest[0].share[PP_DATA_WAIT], 0.9, 1e-9));
}

/* Every 5th step of ten sleeps 30 ms after 10 ms of work (a checkpoint): the slow steps
 * together name the sleep, more than the three slowest can when there are many. */
TEST(test_slow_steps_together)
{
	struct pp_step_record r[11];
	uint64_t ts = 100 * MS, running = 0, other = 0;
	struct step_summary s;

	for (int i = 0; i <= 10; i++) {
		r[i] = rec(7, ts, running, 0, ts);
		r[i].ns[PP_OTHER] = other;
		running += 10 * MS;
		ts += 10 * MS;
		if (i % 5 == 4) {
			other += 30 * MS;
			ts += 30 * MS;
		}
	}
	CHECK_EQ_INT(steps_summarize(r, 11, 7, &s), 0);
	CHECK_EQ_INT(s.count, 10);
	CHECK(near(s.p50_s, 0.010, 1e-9) && near(s.median.share[PP_RUNNING], 1.0, 1e-9));
	CHECK_EQ_INT(s.slow_count, 2);
	CHECK_MSG(near(s.slow.seconds, 0.080, 1e-9), "%f", s.slow.seconds);
	CHECK(near(s.slow.share[PP_OTHER], 0.75, 1e-9) && near(s.slow.share[PP_RUNNING], 0.25, 1e-9));
	CHECK(s.nr_slowest == 2 && s.slowest[0].index % 5 == 0 && s.slowest[1].index % 5 == 0);
	/* Uniform steps: none slow. */
	for (int i = 0; i <= 10; i++) {
		r[i] = rec(7, 100 * MS + i * 10 * MS, i * 10 * MS, 0, 100 * MS + i * 10 * MS);
	}
	CHECK_EQ_INT(steps_summarize(r, 11, 7, &s), 0);
	CHECK(s.slow_count == 0 && s.nr_slowest == 0 && s.slow.seconds == 0);
}

/* Attached while the trainer ran: no switch of it seen before the first boundary, 20 ms into
 * the window. The step after it slept 30 of its 40 ms: its share of RUNNING is 25%, not the
 * 75% it reads if those first 20 ms are taken for its own. */
TEST(test_first_step_after_attach)
{
	struct pp_step_record r[2] = { rec(7, 120 * MS, 0, 0, 100 * MS),
				       rec(7, 160 * MS, 30 * MS, 0, 160 * MS) };
	struct step_summary s;

	r[0].phase = PP_PHASE_UNKNOWN;
	r[1].ns[PP_OTHER] = 30 * MS;
	CHECK_EQ_INT(steps_summarize(r, 2, 7, &s), 0);
	CHECK_EQ_INT(s.count, 1);
	CHECK_MSG(near(s.median.share[PP_RUNNING], 0.25, 1e-9), "%f", s.median.share[PP_RUNNING]);
	CHECK(near(s.median.share[PP_OTHER], 0.75, 1e-9));
}

TEST(test_steps_edge_cases)
{
	struct pp_step_record one = rec(7, 100 * MS, 0, 0, 100 * MS);
	struct step_summary s;

	CHECK_EQ_INT(steps_summarize(NULL, 0, 7, &s), 0);
	CHECK(s.count == 0 && s.per_second == 0);
	CHECK_EQ_INT(steps_summarize(&one, 1, 7, &s), 0);
	CHECK(s.count == 0 && s.nr_slowest == 0);
	CHECK_EQ_INT(steps_summarize(&one, 1, 8, &s), 0);
	CHECK(s.count == 0 && s.other_threads == 1);
	/* A boundary inside a GPU call counts its open time as GPU_WAIT. */
	{
		struct pp_step_record g[2] = { rec(7, 100 * MS, 0, 0, 100 * MS),
					       rec(7, 110 * MS, 0, 0, 100 * MS) };

		g[1].gpu_depth = 1;
		CHECK_EQ_INT(steps_summarize(g, 2, 7, &s), 0);
		CHECK(s.count == 1 && near(s.median.share[PP_GPU_WAIT], 1.0, 1e-9));
	}
}

int main(void)
{
	RUN_TEST(test_steps_of_one_thread);
	RUN_TEST(test_steps_edge_cases);
	RUN_TEST(test_slow_steps_together);
	RUN_TEST(test_first_step_after_attach);
	return unit_summary();
}

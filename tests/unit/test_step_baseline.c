// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "step_baseline.h"
#include "unit.h"

TEST(test_needs_a_full_baseline)
{
	struct step_baseline b = {};
	double base = -1;

	/* The first windows have nothing to compare with, however slow. */
	for (int i = 0; i < STEP_BASELINE_WINDOWS; i++)
		CHECK(!step_baseline_feed(&b, i == 3 ? 10.0 : 0.040, 0.2, &base));
	CHECK(base == -1);
}

TEST(test_flags_a_regression_against_the_median)
{
	struct step_baseline b = {};
	const double steady[] = { 0.040, 0.041, 0.039, 0.200, 0.040, 0.040 };	/* one outlier */
	double base = 0;

	for (int i = 0; i < STEP_BASELINE_WINDOWS; i++)
		step_baseline_feed(&b, steady[i], 0.2, &base);
	CHECK(!step_baseline_feed(&b, 0.047, 0.2, &base));	/* +17.5%: under 20% */
	CHECK(base > 0.0399 && base < 0.0401);			/* the outlier did not move it */
	CHECK(step_baseline_feed(&b, 0.060, 0.2, &base));	/* +50% */
	CHECK(base > 0.0399 && base < 0.0411);
}

TEST(test_lasting_slowdown_becomes_the_baseline)
{
	struct step_baseline b = {};
	double base = 0;
	int flagged = 0;

	for (int i = 0; i < STEP_BASELINE_WINDOWS; i++)
		step_baseline_feed(&b, 0.040, 0.2, &base);
	for (int i = 0; i < 2 * STEP_BASELINE_WINDOWS; i++)
		flagged += step_baseline_feed(&b, 0.080, 0.2, &base);
	/* Flagged until slow windows are most of the baseline: with 0-2 of 6 the median is the
	 * old 40 ms, with 3 of 6 it is 60 ms and 80 ms is still 33% over; from 4 on it is 80 ms. */
	CHECK_EQ_INT(flagged, STEP_BASELINE_WINDOWS / 2 + 1);
	CHECK(base > 0.0799 && base < 0.0801);
}

int main(void)
{
	RUN_TEST(test_needs_a_full_baseline);
	RUN_TEST(test_flags_a_regression_against_the_median);
	RUN_TEST(test_lasting_slowdown_becomes_the_baseline);
	return unit_summary();
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "daemon_window.h"
#include "unit.h"

#define MS 1000000ULL

TEST(test_plain_delta)
{
	__u64 prev[PP_NR_STATES] = { [PP_RUNNING] = 100 * MS, [PP_OTHER] = 50 * MS };
	__u64 now[PP_NR_STATES] = { [PP_RUNNING] = 700 * MS, [PP_OTHER] = 450 * MS };
	__u64 out[PP_NR_STATES], wall;

	window_delta(now, prev, out, &wall);
	CHECK_EQ_U64(out[PP_RUNNING], 600 * MS);
	CHECK_EQ_U64(out[PP_OTHER], 400 * MS);
	CHECK_EQ_U64(wall, 1000 * MS);
	/* prev now holds the cumulative counters for the next window. */
	CHECK_EQ_U64(prev[PP_RUNNING], 700 * MS);
	CHECK_EQ_U64(prev[PP_OTHER], 450 * MS);
}

TEST(test_time_moved_by_a_late_wakeup)
{
	/* 2 s of sleep shown as OTHER is named DATA_WAIT by its wakeup in this 1 s window: OTHER
	 * shrinks by 2 s, DATA_WAIT grows by 2.5 s, RUNNING by 0.5 s. The window keeps its 1 s
	 * length, every counter only grows, and the gains share it in proportion. */
	__u64 prev[PP_NR_STATES] = { [PP_RUNNING] = 1000 * MS, [PP_OTHER] = 2000 * MS };
	__u64 now[PP_NR_STATES] = { [PP_RUNNING] = 1500 * MS, [PP_DATA_WAIT] = 2500 * MS };
	__u64 out[PP_NR_STATES], wall;

	window_delta(now, prev, out, &wall);
	CHECK_EQ_U64(out[PP_OTHER], 0);
	CHECK_EQ_U64(out[PP_RUNNING], 1000 * MS / 6);
	CHECK_EQ_U64(out[PP_DATA_WAIT], 5000 * MS / 6);
	CHECK(wall >= 1000 * MS - 1 && wall <= 1000 * MS);
	CHECK_EQ_U64(prev[PP_OTHER], 0);
}

TEST(test_in_place_and_no_time)
{
	__u64 prev[PP_NR_STATES] = { [PP_RUNQ] = 5 * MS };
	__u64 now[PP_NR_STATES] = { [PP_RUNQ] = 5 * MS };
	__u64 wall = 1;

	/* out may be now; a thread that did nothing has an empty window. */
	window_delta(now, prev, now, &wall);
	CHECK_EQ_U64(wall, 0);
	for (int s = 0; s < PP_NR_STATES; s++)
		CHECK_EQ_U64(now[s], 0);
	CHECK_EQ_U64(prev[PP_RUNQ], 5 * MS);
}

int main(void)
{
	RUN_TEST(test_plain_delta);
	RUN_TEST(test_time_moved_by_a_late_wakeup);
	RUN_TEST(test_in_place_and_no_time);
	return unit_summary();
}

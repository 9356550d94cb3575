// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "daemon_window.h"
#include "report.h"
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

/* A window's report counts the calls of that window: the second reading less the first, the
 * longest call still the longest since the attach; a counter that went back counts from 0. */
TEST(test_calls_per_window)
{
	static struct report r;
	static struct window_calls_seen seen;

	r.nr_apis = 2;
	r.apis[1] = (struct api_result){ .calls = 10, .total_ns = 1000, .max_ns = 300 };
	r.apis[1].slots[3] = 10;
	r.nccl[PP_NCCL_ALL_REDUCE] = (struct nccl_result){ .calls = 5, .bytes = 5 << 20,
							   .total_ns = 500, .max_ns = 200 };
	window_calls_delta(&r, &seen);
	CHECK_EQ_U64(r.apis[1].calls, 10);
	CHECK_EQ_U64(r.nccl[PP_NCCL_ALL_REDUCE].bytes, 5 << 20);

	r.apis[1] = (struct api_result){ .calls = 14, .total_ns = 1600, .max_ns = 300 };
	r.apis[1].slots[3] = 12;
	r.apis[1].slots[4] = 2;
	r.nccl[PP_NCCL_ALL_REDUCE] = (struct nccl_result){ .calls = 8, .bytes = 8 << 20,
							   .unsized = 1, .total_ns = 800,
							   .max_ns = 200 };
	window_calls_delta(&r, &seen);
	CHECK_EQ_U64(r.apis[1].calls, 4);
	CHECK_EQ_U64(r.apis[1].total_ns, 600);
	CHECK_EQ_U64(r.apis[1].slots[3], 2);
	CHECK_EQ_U64(r.apis[1].slots[4], 2);
	CHECK_EQ_U64(r.apis[1].max_ns, 300);
	CHECK_EQ_U64(r.apis[0].calls, 0);
	CHECK_EQ_U64(r.nccl[PP_NCCL_ALL_REDUCE].calls, 3);
	CHECK_EQ_U64(r.nccl[PP_NCCL_ALL_REDUCE].bytes, 3 << 20);
	CHECK_EQ_U64(r.nccl[PP_NCCL_ALL_REDUCE].unsized, 1);
	CHECK_EQ_U64(r.nccl[PP_NCCL_ALL_REDUCE].total_ns, 300);

	r.nccl[PP_NCCL_ALL_REDUCE] = (struct nccl_result){ .calls = 2, .bytes = 2 << 20 };
	window_calls_delta(&r, &seen);
	CHECK_EQ_U64(r.nccl[PP_NCCL_ALL_REDUCE].calls, 2);
	CHECK_EQ_U64(r.nccl[PP_NCCL_ALL_REDUCE].bytes, 2 << 20);
}

int main(void)
{
	RUN_TEST(test_plain_delta);
	RUN_TEST(test_time_moved_by_a_late_wakeup);
	RUN_TEST(test_in_place_and_no_time);
	RUN_TEST(test_calls_per_window);
	return unit_summary();
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Steps from step records (steps.c): durations, rate, quantiles, breakdowns, the slowest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "step_recs.h"
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

	CHECK_EQ_INT(summarize_recs(r, 7, 7, &s), 0);
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

/* steps_each(): the same steps as the summary, each whole, in time order. */
TEST(test_each_step)
{
	struct pp_step_record r[] = {
		rec(7, 100 * MS, 10 * MS, 0, 99 * MS),
		rec(7, 130 * MS, 16 * MS, 24 * MS, 129 * MS),
		rec(7, 110 * MS, 12 * MS, 8 * MS, 109 * MS),
		rec(9, 115 * MS, 0, 0, 115 * MS),
		rec(7, 120 * MS, 14 * MS, 16 * MS, 119 * MS),
		rec(7, 170 * MS, 20 * MS, 60 * MS, 169 * MS),
	};
	struct step_breakdown *each = NULL;
	struct step_summary s;
	int n;

	CHECK_EQ_INT(summarize_recs(r, 6, 7, &s), 0);
	n = each_recs(r, 6, 7, &each);
	CHECK_EQ_INT(n, s.count);
	if (n != 4 || !each)
		return;
	for (int i = 0; i < n; i++)
		CHECK_EQ_INT(each[i].index, i + 1);
	CHECK(near(each[0].seconds, 0.010, 1e-9) && near(each[3].seconds, 0.040, 1e-9));
	CHECK(near(each[1].share[PP_RUNNING], 0.2, 1e-9) && near(each[1].share[PP_DATA_WAIT], 0.8, 1e-9));
	CHECK(near(each[3].share[PP_DATA_WAIT], 0.9, 1e-9));
	free(each);
	/* One boundary: no whole step, nothing allocated. */
	CHECK_EQ_INT(each_recs(r, 1, 7, &each), 0);
	CHECK(each == NULL);
	CHECK_EQ_INT(each_recs(NULL, 0, 7, &each), 0);
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
	CHECK_EQ_INT(summarize_recs(r, 11, 7, &s), 0);
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
	CHECK_EQ_INT(summarize_recs(r, 11, 7, &s), 0);
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
	CHECK_EQ_INT(summarize_recs(r, 2, 7, &s), 0);
	CHECK_EQ_INT(s.count, 1);
	CHECK_MSG(near(s.median.share[PP_RUNNING], 0.25, 1e-9), "%f", s.median.share[PP_RUNNING]);
	CHECK(near(s.median.share[PP_OTHER], 0.75, 1e-9));
}

TEST(test_steps_edge_cases)
{
	struct pp_step_record one = rec(7, 100 * MS, 0, 0, 100 * MS);
	struct step_summary s;

	CHECK_EQ_INT(summarize_recs(NULL, 0, 7, &s), 0);
	CHECK(s.count == 0 && s.per_second == 0);
	CHECK_EQ_INT(summarize_recs(&one, 1, 7, &s), 0);
	CHECK(s.count == 0 && s.nr_slowest == 0);
	CHECK_EQ_INT(summarize_recs(&one, 1, 8, &s), 0);
	CHECK(s.count == 0 && s.other_threads == 1);
	/* A boundary inside a GPU call counts its open time as GPU_WAIT. */
	{
		struct pp_step_record g[2] = { rec(7, 100 * MS, 0, 0, 100 * MS),
					       rec(7, 110 * MS, 0, 0, 100 * MS) };

		g[1].gpu_depth = 1;
		CHECK_EQ_INT(summarize_recs(g, 2, 7, &s), 0);
		CHECK(s.count == 1 && near(s.median.share[PP_GPU_WAIT], 1.0, 1e-9));
		/* ... and inside an NCCL call, COMM_WAIT. */
		g[1].call_state = PP_COMM_WAIT;
		CHECK_EQ_INT(summarize_recs(g, 2, 7, &s), 0);
		CHECK(s.count == 1 && near(s.median.share[PP_COMM_WAIT], 1.0, 1e-9));
	}
}

/* NCCL per step: cumulative counts per API and bytes; two AllReduces and a group of a Send and
 * a Recv in the first step, one AllReduce in the second; what came before the first boundary
 * is no step's. */
TEST(test_nccl_calls_per_step)
{
	struct pp_step_record r[3];
	struct step_summary s;

	for (int i = 0; i < 3; i++)
		r[i] = rec(7, 100 * MS + i * 50 * MS, i * 50 * MS, 0, 100 * MS + i * 50 * MS);
	r[0].nccl.calls[PP_NCCL_ALL_REDUCE] = 5;
	r[0].nccl.bytes = 1000;
	r[1].nccl.calls[PP_NCCL_ALL_REDUCE] = 7;
	r[1].nccl.calls[PP_NCCL_GROUP_START] = r[1].nccl.calls[PP_NCCL_GROUP_END] = 1;
	r[1].nccl.calls[PP_NCCL_SEND] = r[1].nccl.calls[PP_NCCL_RECV] = 1;
	r[1].nccl.bytes = 1000 + 2 * 4096 + 2 * 512;
	r[2] = r[1];
	r[2].ts = 200 * MS;
	r[2].ns[PP_RUNNING] = 100 * MS;
	r[2].nccl.calls[PP_NCCL_ALL_REDUCE] = 8;
	r[2].nccl.bytes += 4096;
	CHECK_EQ_INT(summarize_recs(r, 3, 7, &s), 0);
	CHECK_EQ_INT(s.count, 2);
	CHECK_EQ_U64(s.gpu.nccl_calls[PP_NCCL_ALL_REDUCE], 3);
	CHECK_EQ_U64(s.gpu.nccl_calls[PP_NCCL_SEND], 1);
	CHECK_EQ_U64(s.gpu.nccl_calls[PP_NCCL_GROUP_END], 1);
	CHECK_EQ_U64(s.gpu.nccl_bytes, 3 * 4096 + 2 * 512);
	CHECK_EQ_U64(s.gpu.nccl_min, 1);
	CHECK_EQ_U64(s.gpu.nccl_max, 6);
}

/* Three steps of a trainer that launches 400, 400 and 401 kernels (the last with a gap
 * after a sync, not counted as a launch gap), syncs through cudaStreamSynchronize (api 0) once
 * a step and cuMemcpyDtoH (api 20) twice in the second, and copies 12 MB a step H2D in three
 * copies, one of them from pinned memory, and 4 kB D2H. Counters are cumulative since the
 * window opened: what came before the first boundary (and after the last) is no step's. */
TEST(test_gpu_calls_per_step)
{
	struct pp_step_record r[4];
	struct step_summary s;
	uint64_t launches = 1000, gaps = 50, gap_ns = 7 * MS;

	for (int i = 0; i < 4; i++) {
		r[i] = rec(7, 100 * MS + i * 50 * MS, i * 50 * MS, 0, 100 * MS + i * 50 * MS);
		r[i].launches = launches;
		r[i].launch_gaps = gaps;
		r[i].launch_gap_ns = gap_ns;
		r[i].sync_calls[0] = 9 + i;
		r[i].sync_calls[20] = i >= 2 ? 2 : 0;
		r[i].copies.calls[PP_COPY_HTOD] = 5 + 3 * i;
		r[i].copies.bytes[PP_COPY_HTOD] = 11 + 12000000ULL * i;
		r[i].copies.pinned_calls[PP_COPY_HTOD] = i;
		r[i].copies.pinned_bytes[PP_COPY_HTOD] = 3000000ULL * i;
		r[i].copies.calls[PP_COPY_DTOH] = i;
		r[i].copies.bytes[PP_COPY_DTOH] = 4096ULL * i;
		launches += i < 2 ? 400 : 401;
		gaps += 399;
		gap_ns += 399 * 20000;	/* 20 us between launches */
	}
	CHECK_EQ_INT(summarize_recs(r, 4, 7, &s), 0);
	CHECK_EQ_INT(s.count, 3);
	CHECK_EQ_U64(s.gpu.launches, 1201);
	CHECK_EQ_U64(s.gpu.launches_min, 400);
	CHECK_EQ_U64(s.gpu.launches_max, 401);
	CHECK_MSG(near(steps_per_step(&s, s.gpu.launches), 1201 / 3.0, 1e-9), "%f",
		  steps_per_step(&s, s.gpu.launches));
	/* 1201 launches over 150 ms of steps */
	CHECK_MSG(near(steps_launch_rate(&s), 1201 / 0.150, 1e-6), "%f", steps_launch_rate(&s));
	CHECK_MSG(near(steps_launch_gap_s(&s), 20e-6, 1e-12), "%g", steps_launch_gap_s(&s));
	CHECK_EQ_U64(s.gpu.syncs, 5);
	CHECK_EQ_U64(s.gpu.sync_calls[0], 3);
	CHECK_EQ_U64(s.gpu.sync_calls[20], 2);
	CHECK(s.gpu.syncs_min == 1 && s.gpu.syncs_max == 3);
	CHECK(!steps_many_syncs(&s));
	CHECK_EQ_U64(s.gpu.copies.calls[PP_COPY_HTOD], 9);
	CHECK_EQ_U64(s.gpu.copies.bytes[PP_COPY_HTOD], 36000000);
	CHECK_EQ_U64(s.gpu.copies.pinned_bytes[PP_COPY_HTOD], 9000000);
	CHECK(near(steps_pageable_share(&s.gpu.copies, PP_COPY_HTOD), 0.75, 1e-12));
	CHECK_EQ_U64(s.gpu.copies.bytes[PP_COPY_DTOH], 3 * 4096);
	CHECK(near(steps_pageable_share(&s.gpu.copies, PP_COPY_DTOH), 1.0, 1e-12));
	CHECK(steps_pageable_share(&s.gpu.copies, PP_COPY_DTOD) == -1);
	/* Three syncs in every step name the pattern. */
	for (int i = 0; i < 4; i++)
		r[i].sync_calls[5] = 3 * i;
	CHECK_EQ_INT(summarize_recs(r, 4, 7, &s), 0);
	CHECK(s.gpu.syncs == 14 && steps_many_syncs(&s));
	/* A thread whose counts start after its first boundary (its thread_gpu entry made then)
	 * never reads negative. */
	r[0].copies.bytes[PP_COPY_HTOD] = 1ULL << 60;
	CHECK_EQ_INT(summarize_recs(r, 4, 7, &s), 0);
	CHECK_EQ_U64(s.gpu.copies.bytes[PP_COPY_HTOD], 24000000);
}

/* Launches probed in bursts (tracer_launches.c): a step counts its launches only when one
 * burst (the same odd launch_epoch) spans it; its syncs count in every step. Steps of 50 ms:
 * the first in a pause, the second and third in burst 1, the fourth straddles into a pause,
 * the fifth in burst 3. */
TEST(test_launches_counted_in_bursts)
{
	uint32_t epoch[6] = { 2, 3, 3, 3, 4, 5 };
	struct pp_step_record r[6];
	struct step_summary s;
	uint64_t launches = 0;

	for (int i = 0; i < 6; i++) {
		r[i] = rec(7, 100 * MS + i * 50 * MS, i * 50 * MS, 0, 100 * MS + i * 50 * MS);
		r[i].launch_epoch = epoch[i];
		r[i].launches = launches;
		r[i].sync_calls[0] = i;
		launches += i == 3 ? 7 : 100;	/* the straddling step saw only part */
	}
	r[5].launch_epoch = 5;
	r[4].launch_epoch = 5;	/* steps 4-5 in one burst */
	CHECK_EQ_INT(summarize_recs(r, 6, 7, &s), 0);
	CHECK_EQ_INT(s.count, 5);
	CHECK_EQ_INT(s.gpu.launch_steps, 3);	/* 1-2, 2-3, 4-5 */
	CHECK_EQ_U64(s.gpu.launches, 300);
	CHECK_EQ_U64(s.gpu.launches_min, 100);
	CHECK_EQ_U64(s.gpu.launches_max, 100);
	CHECK(near(steps_launches_per_step(&s), 100, 1e-9));
	CHECK(near(steps_launch_rate(&s), 100 / 0.05, 1e-6));
	CHECK(steps_launches_sampled(&s));
	CHECK_EQ_U64(s.gpu.syncs, 5);
	/* Never in bursts (epoch 0 throughout): every step counts. */
	for (int i = 0; i < 6; i++)
		r[i].launch_epoch = 0;
	CHECK_EQ_INT(summarize_recs(r, 6, 7, &s), 0);
	CHECK_EQ_INT(s.gpu.launch_steps, 5);
	CHECK(!steps_launches_sampled(&s));
	CHECK_EQ_U64(s.gpu.launches_min, 7);
	/* No burst spans a step: nothing counted, nothing divided by zero. */
	for (int i = 0; i < 6; i++)
		r[i].launch_epoch = i;
	CHECK_EQ_INT(summarize_recs(r, 6, 7, &s), 0);
	CHECK_EQ_INT(s.gpu.launch_steps, 0);
	CHECK(steps_launches_per_step(&s) == 0 && steps_launch_rate(&s) == 0);
	CHECK(!steps_launch_bound(&s, true));
}

/* A data-wait end of thread 7 at ts, its DATA_WAIT and RUNNING so far, on-CPU since ts. */
static struct pp_step_record wait_end(uint64_t ts, uint64_t data, uint64_t running)
{
	struct pp_step_record r = rec(7, ts, running, data, ts);

	r.source = PP_STEP_FROM_DATA_WAIT;
	return r;
}

/* Batches handed over in bursts: a 40 ms wait for the worker, a 1 ms step, then three
 * handshakes of 0.1 ms wait and 0.1 ms unpickling. Ten batches make nine whole steps of
 * 41.6 ms: the first end follows 41 ms of the thread's time since the window opened, so the
 * first burst starts one too. */
TEST(test_steps_from_bursts_of_data_waits)
{
	struct pp_step_record r[64];
	uint64_t ts = 100 * MS, data = 0, running = 0;
	struct step_summary s;
	int n = 0;

	for (int b = 0; b < 10; b++) {
		ts += MS, running += MS;			/* the step */
		ts += 40 * MS, data += 40 * MS;			/* the worker makes the batch */
		r[n++] = wait_end(ts, data, running);
		for (int h = 0; h < 3; h++) {
			ts += MS / 10, running += MS / 10;
			ts += MS / 10, data += MS / 10;
			r[n++] = wait_end(ts, data, running);
		}
	}
	CHECK_EQ_INT(summarize_recs(r, n, 7, &s), 0);
	CHECK_EQ_INT(s.source, PP_STEP_FROM_DATA_WAIT);
	CHECK_EQ_INT(s.count, 9);
	CHECK_MSG(near(s.p50_s, 0.0416, 1e-9), "%f", s.p50_s);
	/* Each step: 40 ms of DATA_WAIT and 0.3 of handshakes, 1.3 ms on-CPU. */
	CHECK_MSG(near(s.all.share[PP_DATA_WAIT], 40.3 / 41.6, 1e-9), "%f", s.all.share[PP_DATA_WAIT]);

	/* One wait a batch, with a slow batch of 4 times the rest: every end is a step. */
	n = 0, ts = 100 * MS;
	for (int b = 0; b < 12; b++) {
		ts += (b == 6 ? 40 : 10) * MS;
		r[n++] = wait_end(ts, ts - 100 * MS, 0);
	}
	CHECK_EQ_INT(summarize_recs(r, n, 7, &s), 0);
	CHECK_EQ_INT(s.count, 11);
	CHECK(near(s.max_s, 0.040, 1e-9));

	/* Two backward passes of the trainer outrank its data waits; one does not. */
	r[n++] = rec(7, 300 * MS, 0, 0, 300 * MS);
	CHECK_EQ_INT(summarize_recs(r, n, 7, &s), 0);
	CHECK_EQ_INT(s.source, PP_STEP_FROM_DATA_WAIT);
	CHECK_EQ_INT(s.count, 11);
	r[n++] = rec(7, 350 * MS, 0, 0, 350 * MS);
	CHECK_EQ_INT(summarize_recs(r, n, 7, &s), 0);
	CHECK_EQ_INT(s.source, PP_STEP_FROM_PROBE);
	CHECK_EQ_INT(s.count, 1);
	CHECK(near(s.p50_s, 0.050, 1e-9));
}

/* A step longer than the window (`-d 1` on a 2.4 s step): the window holds one burst, its four
 * ends 80 us apart after a second of waiting. One end, no step: not three steps of 80 us, read
 * as 12,500 steps/s (the report once said 7,596/s). Two such ends alike. */
TEST(test_one_burst_is_no_step)
{
	struct pp_step_record r[4];
	uint64_t ts = 100 * MS, data = 990 * MS, running = 0;
	struct step_summary s;

	for (int i = 0; i < 4; i++) {
		r[i] = wait_end(ts + 990 * MS, data, running);
		ts += MS / 25, data += MS / 25, running += MS / 25;
	}
	CHECK_EQ_INT(summarize_recs(r, 4, 7, &s), 0);
	CHECK_EQ_INT(s.source, PP_STEP_FROM_DATA_WAIT);
	CHECK_EQ_INT(s.count, 0);
	CHECK_EQ_INT(summarize_recs(r, 2, 7, &s), 0);
	CHECK_EQ_INT(s.count, 0);

	/* The window opened just before a burst's end (gap 0.1 ms): that end starts no step,
	 * and the bursts after it are counted as before. */
	data = MS / 10, running = 0, ts = 100 * MS;
	r[0] = wait_end(ts, data, running);
	ts += 30 * MS, running += 10 * MS, data += 20 * MS;
	r[1] = wait_end(ts, data, running);
	ts += MS / 10, data += MS / 10;
	r[2] = wait_end(ts, data, running);
	ts += 30 * MS, running += 10 * MS, data += 20 * MS;
	r[3] = wait_end(ts, data, running);
	CHECK_EQ_INT(summarize_recs(r, 4, 7, &s), 0);
	CHECK_EQ_INT(s.count, 1);
	CHECK_MSG(near(s.p50_s, 0.0301, 1e-9), "%f", s.p50_s);
}

static bool keep_odd_tid(const struct step_point *p)
{
	return p->tid & 1;
}

/* The store gives each record back whole, bit for bit, and keeps a CPU-only one's zero GPU
 * counts as nothing. */
TEST(test_store_gives_records_back)
{
	struct pp_step_record r[64], back;
	struct step_store st = { 0 };
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	bool same = true;

	for (int i = 0; i < 64; i++) {
		r[i] = (struct pp_step_record){ .tid = 7 + i % 3, .tgid = 7, .ts = (i + 1) * MS,
						.phase = i % 4, .gpu_depth = i % 2,
						.phase_start_ns = i * MS, .source = i % 2,
						.call_state = i, .launch_epoch = 2 * i + 1,
						.seq = 1000u * i + 1 };
		for (int s = 0; s < PP_NR_STATES; s++)
			r[i].ns[s] = (uint64_t)i * 1000 + s;
		if (i < 16)
			continue;	/* no GPU counts */
		/* GPU counts: a few fields, then (from i 48) every word, the last included */
		r[i].launches = 400 * i;
		r[i].sync_calls[3] = i;
		r[i].copies.bytes[PP_COPY_HTOD] = (uint64_t)i << 40;
		r[i].dev_outstanding = -(int64_t)i;
		if (i >= 48) {
			uint64_t *w = (uint64_t *)&r[i].launches;

			for (; w < (uint64_t *)&r[i].source; w++) {
				seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
				*w = seed | 1;
			}
		}
	}
	for (int i = 0; i < 16; i++)
		CHECK_EQ_INT(step_store_add(&st, &r[i]), 0);
	CHECK_EQ_INT(st.nr_words, 0);
	CHECK(st.points[0].gpu_at == STEP_NO_GPU);
	for (int i = 16; i < 64; i++)
		CHECK_EQ_INT(step_store_add(&st, &r[i]), 0);
	/* 32 records with 5 words set (sync_calls[3] shares a word), 16 with all 50 */
	CHECK_EQ_INT(st.nr_words, 32 * (1 + 4) + 16 * (1 + 50));
	CHECK_EQ_INT(st.nr, 64);
	for (int i = 0; i < 64; i++) {
		step_store_record(&st, &st.points[i], &back);
		same = same && !memcmp(&back, &r[i], sizeof(back));
	}
	CHECK_MSG(same, "every record given back as it was added");
	/* Filtering keeps the others' counts where they were. */
	step_store_filter(&st, keep_odd_tid);
	CHECK_EQ_INT(st.nr, 43);	/* tids 7 and 9 */
	for (int i = 0, k = 0; i < 64; i++) {
		if (!(r[i].tid & 1))
			continue;
		step_store_record(&st, &st.points[k++], &back);
		same = same && !memcmp(&back, &r[i], sizeof(back));
	}
	CHECK_MSG(same, "the records kept are given back whole");
	step_store_free(&st);
	CHECK(!st.points && !st.words && !st.nr);
}

/*
 * Records lost between two of the probe's: its count (seq) says how many steps the gap holds.
 * Steps of 10 ms each, the records of the passes numbered 4 and 5 lost: the count and rate
 * hold all six, and the GPU counts per step come from the three timed one by one. Half timed
 * is too few for step times: records are lost where the loop runs fastest. Device memory
 * grows 1000 bytes a step, fitted by step.
 */
TEST(test_lost_boundaries_counted)
{
	uint16_t seq[5] = { 1, 2, 3, 6, 7 };
	struct pp_step_record r[5];
	struct step_breakdown *each = NULL;
	struct step_summary s;
	int n;

	for (int i = 0; i < 5; i++) {
		uint64_t ts = 100 * MS + (seq[i] - 1) * 10 * MS;

		r[i] = rec(7, ts, (seq[i] - 1) * 10 * MS, 0, ts);
		r[i].seq = seq[i];
		r[i].launches = 100 * seq[i];
		r[i].dev_outstanding = 1000 * seq[i];
	}
	CHECK_EQ_INT(summarize_recs(r, 5, 7, &s), 0);
	CHECK_EQ_INT(s.count, 6);
	CHECK_EQ_INT(s.timed, 3);
	CHECK(near(s.mean_s, 0.010, 1e-9) && near(s.per_second, 100, 1e-6));
	CHECK(!s.times && s.p50_s == 0 && s.max_s == 0 && s.slow_count == 0 && !s.nr_slowest);
	CHECK(near(s.all.seconds, 0.060, 1e-9) && near(s.all.share[PP_RUNNING], 1, 1e-9));
	CHECK_EQ_INT(s.gpu.launch_steps, 6);
	CHECK_EQ_U64(s.gpu.launches, 600);
	CHECK(s.gpu.launches_min == 100 && s.gpu.launches_max == 100);
	CHECK(near(steps_launches_per_step(&s), 100, 1e-9) && !steps_launches_sampled(&s));
	CHECK_MSG(near(s.gpu.dev_growth.bytes_per_step, 1000, 1e-6), "%f",
		  s.gpu.dev_growth.bytes_per_step);
	CHECK(near(s.gpu.dev_growth.growth_bytes, 6000, 1e-6));
	CHECK_EQ_INT(s.gpu.dev_growth.steps, 6);
	CHECK_EQ_INT(s.gpu.dev_growth.points, 5);
	/* Each interval with its first step's number and how many it holds. */
	n = each_recs(r, 5, 7, &each);
	CHECK_EQ_INT(n, 4);
	if (n == 4 && each) {
		CHECK(each[2].index == 3 && each[2].spanned == 3 && near(each[2].seconds, 0.030, 1e-9));
		CHECK(each[3].index == 6 && each[3].spanned == 1);
	}
	free(each);
	/* The trace's step slices (pipeprof record): each boundary with the step it begins. */
	{
		uint64_t *ts = NULL;
		int *numbers = NULL;

		n = boundary_recs(r, 5, 7, &ts, &numbers);
		CHECK_EQ_INT(n, 5);
		if (n == 5 && ts && numbers)
			CHECK(numbers[0] == 1 && numbers[2] == 3 && numbers[3] == 6 &&
			      numbers[4] == 7 && ts[3] == 150 * MS);
		free(ts);
		free(numbers);
	}
	/* The count wraps at 2^16: 65530, 65531, 65532, then 65535 (3 steps) and 1 (2). */
	for (int i = 0; i < 3; i++)
		r[i].seq = (uint16_t)(65530 + i);
	r[3].seq = 65535;
	r[4].seq = 1;
	CHECK_EQ_INT(summarize_recs(r, 5, 7, &s), 0);
	CHECK_EQ_INT(s.count, 7);
	CHECK_EQ_INT(s.timed, 2);
	/* None timed: every gap lost a record. The count and mean stand; no step time. */
	for (int i = 0; i < 5; i++)
		r[i].seq = (uint16_t)(1 + 2 * i);
	CHECK_EQ_INT(summarize_recs(r, 5, 7, &s), 0);
	CHECK_EQ_INT(s.count, 8);
	CHECK_EQ_INT(s.timed, 0);
	CHECK(s.p50_s == 0 && s.max_s == 0 && s.nr_slowest == 0 && s.slow_count == 0);
	CHECK(near(s.mean_s, 0.060 / 8, 1e-9));
	/* A new thread of the tid counts from 0 again: its closed time is less than the last
	 * record's, and the gap is one step, not 65,533. */
	for (int i = 0; i < 5; i++)
		r[i].seq = (uint16_t)(i + 1);
	r[4].seq = 1;
	r[4].ns[PP_RUNNING] = 0;
	CHECK_EQ_INT(summarize_recs(r, 5, 7, &s), 0);
	CHECK_EQ_INT(s.count, 4);
}

/* One record lost in 21 steps: 19 of 21 timed one by one, enough for step times, which are
 * theirs (the 20 ms gap is two steps, not one slow one). */
TEST(test_step_times_with_few_lost)
{
	struct pp_step_record r[21];
	struct step_summary s;
	int i, k = 0;

	for (i = 1; i <= 22; i++) {
		uint64_t ts = 100 * MS + (i - 1) * 10 * MS;

		if (i == 11)
			continue;
		r[k] = rec(7, ts, (i - 1) * 10 * MS, 0, ts);
		r[k++].seq = (uint16_t)i;
	}
	CHECK_EQ_INT(summarize_recs(r, 21, 7, &s), 0);
	CHECK_EQ_INT(s.count, 21);
	CHECK_EQ_INT(s.timed, 19);
	CHECK(s.times && near(s.p50_s, 0.010, 1e-9) && near(s.max_s, 0.010, 1e-9));
	CHECK_EQ_INT(s.slow_count, 0);
	/* Two more lost: 16 of 19, under 90%. */
	for (i = 4; i < 21; i++)	/* passes 5 and 6 lost between r[3] and r[4] */
		r[i].seq = (uint16_t)(r[i].seq + 2);
	CHECK_EQ_INT(summarize_recs(r, 21, 7, &s), 0);
	CHECK(s.count == 23 && s.timed == 18 && !s.times && s.p50_s == 0);
}

int main(void)
{
	RUN_TEST(test_lost_boundaries_counted);
	RUN_TEST(test_step_times_with_few_lost);
	RUN_TEST(test_store_gives_records_back);
	RUN_TEST(test_gpu_calls_per_step);
	RUN_TEST(test_launches_counted_in_bursts);
	RUN_TEST(test_nccl_calls_per_step);
	RUN_TEST(test_steps_of_one_thread);
	RUN_TEST(test_each_step);
	RUN_TEST(test_steps_edge_cases);
	RUN_TEST(test_slow_steps_together);
	RUN_TEST(test_first_step_after_attach);
	RUN_TEST(test_steps_from_bursts_of_data_waits);
	RUN_TEST(test_one_burst_is_no_step);
	return unit_summary();
}

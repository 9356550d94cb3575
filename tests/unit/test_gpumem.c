// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Device memory across steps (gpumem.c, steps.c): the growth fit and its leak verdict, the
 * allocations and frees a step from step records; launch-bound steps; and their advice. */
#include <math.h>
#include <string.h>
#include "classify.h"
#include "gpumem.h"
#include "step_recs.h"
#include "unit.h"

#define MS 1000000ULL
#define MB 1000000.0

static bool near(double a, double b, double eps)
{
	return fabs(a - b) < eps;
}

TEST(test_growth_fit)
{
	double y[200];
	struct gpumem_fit f;

	/* 256 kB a step over 100 steps, on top of 12 MB from before the window: a leak. */
	for (int i = 0; i < 101; i++)
		y[i] = 12 * MB + 262144.0 * i;
	gpumem_fit_steps(NULL, y, 101, &f);
	CHECK_EQ_INT(f.points, 101);
	CHECK_EQ_INT(f.steps, 100);
	CHECK_MSG(near(f.bytes_per_step, 262144, 1e-6), "%f", f.bytes_per_step);
	CHECK(near(f.r2, 1, 1e-9) && near(f.late_bytes_per_step, 262144, 1e-6));
	CHECK(near(f.growth_bytes, 26214400, 1e-3) && f.leak);

	/* Steady: the same outstanding bytes at every boundary. */
	for (int i = 0; i < 101; i++)
		y[i] = 40 * MB;
	gpumem_fit_steps(NULL, y, 101, &f);
	CHECK(!f.leak && f.bytes_per_step == 0 && f.r2 == 0);

	/* A caching allocator warming up: 20 MB segments over the first 30 steps, then none. A
	 * line fits it fairly well (R^2 over 0.5), and the later half does not grow. */
	for (int i = 0; i < 101; i++)
		y[i] = 20 * MB * (i < 30 ? i / 6 : 5);
	gpumem_fit_steps(NULL, y, 101, &f);
	CHECK_MSG(!f.leak && f.late_bytes_per_step == 0 && f.r2 > 0.5, "r2 %f late %f", f.r2,
		  f.late_bytes_per_step);

	/* Growth for two thirds of the window, then none: a line fits it well (R^2 0.915), but
	 * the later half grew at under a third of the whole's rate. It levelled off. */
	for (int i = 0; i < 101; i++)
		y[i] = MB * (i < 65 ? i : 65);
	gpumem_fit_steps(NULL, y, 101, &f);
	CHECK_MSG(!f.leak && f.r2 > 0.9 && f.late_bytes_per_step < 0.5 * f.bytes_per_step,
		  "r2 %f late %f", f.r2, f.late_bytes_per_step);

	/* One new segment in the window: a single jump, R^2 0.75 at best. */
	for (int i = 0; i < 101; i++)
		y[i] = i < 50 ? 0 : 20 * MB;
	gpumem_fit_steps(NULL, y, 101, &f);
	CHECK_MSG(!f.leak && f.r2 <= 0.76, "r2 %f", f.r2);

	/* A leak that the caching allocator serves in 20 MB segments, one every 10 steps: a
	 * staircase all window long is still a leak, at the segments' rate. */
	for (int i = 0; i < 200; i++)
		y[i] = 20 * MB * (i / 10);
	gpumem_fit_steps(NULL, y, 200, &f);
	CHECK_MSG(f.leak && near(f.bytes_per_step, 2 * MB, 0.05 * MB), "%f r2 %f", f.bytes_per_step,
		  f.r2);

	/* Too little growth (3 MB over the window), too few steps, or shrinking: no leak. */
	for (int i = 0; i < 101; i++)
		y[i] = 30000.0 * i;
	gpumem_fit_steps(NULL, y, 101, &f);
	CHECK(f.r2 > 0.99 && !f.leak);
	for (int i = 0; i < 9; i++)
		y[i] = 10 * MB * i;
	gpumem_fit_steps(NULL, y, 9, &f);
	CHECK(!f.leak);
	for (int i = 0; i < 101; i++)
		y[i] = 500 * MB - MB * i;
	gpumem_fit_steps(NULL, y, 101, &f);
	CHECK(f.bytes_per_step < 0 && !f.leak);
	gpumem_fit_steps(NULL, y, 1, &f);
	CHECK(f.points == 1 && !f.leak && f.bytes_per_step == 0);
	gpumem_fit_steps(NULL, y, 0, &f);
	CHECK(f.points == 0 && !f.leak);
}

/* Step records with device allocations: 3 allocations and 2 frees of 1 MB a step, the third
 * allocation kept, and one step with an extra allocation and free. */
TEST(test_allocations_per_step)
{
	struct pp_step_record r[21] = {};
	struct step_summary s;
	int64_t outstanding = 5000000;
	uint64_t allocs = 7, frees = 3;

	for (int i = 0; i < 21; i++) {
		r[i].tid = 7;
		r[i].ts = 100 * MS + i * 10 * MS;
		r[i].phase = PP_PHASE_ONCPU;
		r[i].phase_start_ns = r[i].ts;
		r[i].ns[PP_RUNNING] = i * 10 * MS;
		r[i].dev.allocs = allocs;
		r[i].dev.frees = frees;
		r[i].dev.alloc_bytes = allocs * 1000000;
		r[i].dev.free_bytes = frees * 1000000;
		r[i].dev_outstanding = outstanding;
		allocs += i == 4 ? 4 : 3;
		frees += i == 4 ? 3 : 2;
		outstanding += 1000000;
	}
	CHECK_EQ_INT(summarize_recs(r, 21, 7, &s), 0);
	CHECK_EQ_INT(s.count, 20);
	CHECK_EQ_U64(s.gpu.dev.allocs, 61);
	CHECK_EQ_U64(s.gpu.dev.frees, 41);
	CHECK_EQ_U64(s.gpu.dev.alloc_bytes, 61000000);
	CHECK_EQ_U64(s.gpu.dev.free_bytes, 41000000);
	CHECK(s.gpu.dev_allocs_min == 3 && s.gpu.dev_allocs_max == 4);
	CHECK(s.gpu.dev_frees_min == 2 && s.gpu.dev_frees_max == 3);
	CHECK_EQ_INT(s.gpu.dev_growth.points, 21);
	CHECK_MSG(near(s.gpu.dev_growth.bytes_per_step, 1000000, 1e-3), "%f",
		  s.gpu.dev_growth.bytes_per_step);
	CHECK(s.gpu.dev_growth.leak);

	/* Every allocation freed within its step: outstanding stays put, whatever it was. */
	for (int i = 0; i < 21; i++)
		r[i].dev_outstanding = -3000000;
	CHECK_EQ_INT(summarize_recs(r, 21, 7, &s), 0);
	CHECK(!s.gpu.dev_growth.leak && s.gpu.dev_growth.bytes_per_step == 0);
	CHECK_EQ_U64(s.gpu.dev.allocs, 61);
}

/* 400 launches a step, 20 us apart, in 10 ms steps: 80% of the steps' time between launches. */
static void launch_steps(struct pp_step_record *r, int n, uint64_t launches_per_step,
			 uint64_t gap_ns, double running)
{
	memset(r, 0, n * sizeof(*r));
	for (int i = 0; i < n; i++) {
		r[i].tid = 7;
		r[i].ts = 100 * MS + i * 10 * MS;
		r[i].phase = PP_PHASE_OFFCPU;
		r[i].phase_start_ns = r[i].ts;
		r[i].ns[PP_RUNNING] = (uint64_t)(i * 10 * MS * running);
		r[i].ns[PP_GPU_WAIT] = i * 10 * MS - r[i].ns[PP_RUNNING];
		r[i].launches = i * launches_per_step;
		r[i].launch_gaps = i * (launches_per_step - 1);
		r[i].launch_gap_ns = i * (launches_per_step - 1) * gap_ns;
		r[i].sync_calls[0] = i;
	}
}

TEST(test_launch_bound)
{
	struct pp_step_record r[11];
	struct step_summary s;

	launch_steps(r, 11, 400, 20000, 0.9);
	CHECK_EQ_INT(summarize_recs(r, 11, 7, &s), 0);
	CHECK_MSG(near(steps_launch_share(&s), 399 * 20e-6 / 10e-3, 1e-9), "%f", steps_launch_share(&s));
	CHECK(steps_launch_bound(&s, true));
	/* The verdict found a stall: bound by what the trainer waits for. */
	CHECK(!steps_launch_bound(&s, false));
	/* Mostly waiting on the GPU in its steps. */
	launch_steps(r, 11, 400, 20000, 0.3);
	CHECK_EQ_INT(summarize_recs(r, 11, 7, &s), 0);
	CHECK(!steps_launch_bound(&s, true));
	/* A GPU-bound loop's one launch a step. */
	launch_steps(r, 11, 1, 20000, 0.9);
	CHECK_EQ_INT(summarize_recs(r, 11, 7, &s), 0);
	CHECK(!steps_launch_bound(&s, true));
	/* Many launches far apart: the host is busy with something else between them. */
	launch_steps(r, 11, 60, 150000, 0.9);
	CHECK_EQ_INT(summarize_recs(r, 11, 7, &s), 0);
	CHECK(!steps_launch_bound(&s, true));
	/* Many launches in a burst that takes a small part of the step. */
	launch_steps(r, 11, 100, 5000, 0.9);
	CHECK_EQ_INT(summarize_recs(r, 11, 7, &s), 0);
	CHECK_MSG(!steps_launch_bound(&s, true), "%f", steps_launch_share(&s));
	/* No step at all. */
	CHECK_EQ_INT(summarize_recs(r, 1, 7, &s), 0);
	CHECK(!steps_launch_bound(&s, true));
}

static const struct recommendation *find(const struct analysis *a, const char *id)
{
	for (int i = 0; i < a->nr_recs; i++)
		if (!strcmp(a->recs[i].id, id))
			return &a->recs[i];
	return NULL;
}

TEST(test_gpu_steps_advice)
{
	struct pp_step_record r[21];
	struct analysis a;
	struct step_summary s;
	const struct recommendation *rec;

	launch_steps(r, 21, 400, 20000, 0.9);
	CHECK_EQ_INT(summarize_recs(r, 21, 7, &s), 0);
	memset(&a, 0, sizeof(a));
	recommend_gpu_steps(&a, &s, true);
	rec = find(&a, "launch_bound");
	CHECK_MSG(rec && strstr(rec->text, "CUDA graphs") && strstr(rec->text, "reduce-overhead"),
		  "%s", rec ? rec->text : "");
	CHECK_MSG(rec && strstr(rec->evidence, "400 launches a step, one every 20.0 us"), "%s",
		  rec ? rec->evidence : "");
	CHECK(!find(&a, "device_memory_leak"));

	/* Not launch-bound, and device memory growing 2 MB a step. */
	for (int i = 0; i < 21; i++)
		r[i].dev_outstanding = 2000000LL * i;
	CHECK_EQ_INT(summarize_recs(r, 21, 7, &s), 0);
	memset(&a, 0, sizeof(a));
	recommend_gpu_steps(&a, &s, false);
	CHECK(!find(&a, "launch_bound"));
	rec = find(&a, "device_memory_leak");
	CHECK_MSG(rec && strstr(rec->text, "2.00 MB a step") && strstr(rec->text, "caching allocator"),
		  "%s", rec ? rec->text : "");
	CHECK_MSG(rec && strstr(rec->evidence, "rose 40.0 MB over 20 steps"), "%s",
		  rec ? rec->evidence : "");
}

int main(void)
{
	RUN_TEST(test_growth_fit);
	RUN_TEST(test_allocations_per_step);
	RUN_TEST(test_launch_bound);
	RUN_TEST(test_gpu_steps_advice);
	return unit_summary();
}

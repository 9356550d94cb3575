// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The pipeline model (predict.c) and the rules that withhold advice (recommend.c). */
#include <math.h>
#include <stdlib.h>
#include "classify.h"
#include "predict.h"
#include "report.h"
#include "unit.h"

#define MS 1000000ULL

static bool near(double a, double b, double eps)
{
	return fabs(a - b) < eps;
}

/* A DataLoader job on 2 CPUs: one worker loop on-CPU 97%, the trainer 10%, 0.9 CPU idle. */
static struct pipeline_inputs loader_job(void)
{
	struct pipeline_inputs in = {
		.window_s = 5, .ncpus = 2, .cpu_busy = 0.55, .trainer_cpus = 0.10,
		.helper_cpus = 0.01, .worker_cpus = 1.00, .trainer_own = 0.10,
		.trainer_running = 0.10, .workers = 1, .worker_loop_cpus = 0.97,
		.compute_threads = 1,
	};
	return in;
}

TEST(test_model_limits)
{
	struct pipeline_inputs in = loader_job();
	struct pipeline_model m;
	const struct prediction *p;

	pipeline_model_build(&m, &in);
	CHECK(m.cpu_known);
	CHECK(near(m.idle_cpus, 0.9, 1e-9));
	CHECK(near(m.job_cpus, 1.11, 1e-9));
	/* /proc/stat's busy (1.10) is under the job's own 1.11: noise, not negative load. */
	CHECK(near(m.other_cpus, 0, 1e-9));
	CHECK(near(m.avail_cpus, 2.0, 1e-9));
	CHECK(near(m.limit_trainer, 10, 1e-9));
	CHECK(near(m.limit_workers, 1 / 0.97, 1e-9));
	CHECK(near(m.limit_cpus, 2 / 1.11, 1e-9));
	CHECK_EQ_INT(m.rate_limit, LIMIT_WORKERS);
	CHECK(m.fits);

	/* 2 workers: the two CPUs, shared by the trainer and both workers, are the limit. */
	p = pipeline_predict_workers(&m, 2);
	CHECK(p && !p->withheld[0]);
	CHECK_MSG(p && near(p->speedup, (2 / 1.11) / (1 / 0.97), 1e-9), "%f", p ? p->speedup : 0);
	CHECK(p && p->limit == LIMIT_CPUS);
	CHECK_STR(p ? p->knob : NULL, "num_workers");
	CHECK(p && p->from == 1 && p->to == 2);
	CHECK_EQ_INT(pipeline_workers_to_saturate(&m), 2);

	/* On 8 idle CPUs the workers stay the limit up to 7 of them: 8 CPUs / 1.11 per step. */
	in.ncpus = 8;
	in.cpu_busy = 1.11 / 8;
	pipeline_model_build(&m, &in);
	p = pipeline_predict_workers(&m, 2);
	CHECK(p && near(p->speedup, 2.0, 1e-9) && p->limit == LIMIT_WORKERS);
	CHECK_EQ_INT(pipeline_workers_to_saturate(&m), 7);
	p = pipeline_predict_workers(&m, 7);
	CHECK_MSG(p && p->speedup > 6.5 && p->speedup < 7.5, "%f", p ? p->speedup : 0);
	CHECK(p && p->limit == LIMIT_CPUS);
}

/* The job alone fills the machine: the model says more workers gain nothing, as a number. */
TEST(test_model_job_fills_machine)
{
	struct pipeline_inputs in = loader_job();
	struct pipeline_model m;
	const struct prediction *p;

	in.workers = 2;
	in.worker_loop_cpus = 1.88;
	in.worker_cpus = 1.90;
	in.cpu_busy = 1.0;
	pipeline_model_build(&m, &in);
	CHECK(pipeline_no_idle_cpu(&m));
	CHECK(near(m.other_cpus, 0, 1e-9));
	CHECK(m.fits);
	p = pipeline_predict_workers(&m, 3);
	CHECK(p && !p->withheld[0] && near(p->speedup, 1.0, 1e-9) && p->limit == LIMIT_CPUS);
}

/* No number where the model cannot see the answer. */
TEST(test_model_withholds)
{
	struct pipeline_inputs in = loader_job();
	struct pipeline_model m;
	const struct prediction *p;

	/* Other processes hold the CPUs: what another worker gets is the scheduler's call, and
	 * only the bound of the whole machine stands. */
	in.cpu_busy = 1.0;
	pipeline_model_build(&m, &in);
	CHECK(near(m.other_cpus, 2 - 1.11, 1e-9));
	p = pipeline_predict_workers(&m, 2);
	CHECK(p && p->speedup == 0);
	CHECK_MSG(p && strstr(p->withheld, "other processes use 0.9"), "%s", p ? p->withheld : "");
	CHECK_MSG(p && near(p->bound, 2 / 1.11, 1e-9), "%f", p ? p->bound : 0);

	/* Idle CPUs and some other load: as long as the CPUs do not become the limit, the
	 * others keep what they use and the number stands. */
	in = loader_job();
	in.ncpus = 4;
	in.cpu_busy = (1.11 + 0.5) / 4;
	pipeline_model_build(&m, &in);
	CHECK(near(m.other_cpus, 0.5, 1e-9));
	p = pipeline_predict_workers(&m, 2);
	CHECK(p && near(p->speedup, 2.0, 1e-9) && p->limit == LIMIT_WORKERS && !p->bound);
	/* ...and once they do, the bound. */
	p = pipeline_predict_workers(&m, 4);
	CHECK(p && p->speedup == 0 && near(p->bound, 4 / 1.11 / (1 / 0.97), 1e-9));

	/* The machine's load unknown. */
	in = loader_job();
	in.cpu_busy = -1;
	pipeline_model_build(&m, &in);
	CHECK(!m.cpu_known && !pipeline_no_idle_cpu(&m));
	p = pipeline_predict_workers(&m, 2);
	CHECK(p && p->speedup == 0 && strstr(p->withheld, "unknown"));

	/* Workers mostly idle while the trainer waits: the hand-off, not their CPU, limits. */
	in = loader_job();
	in.worker_loop_cpus = 0.40;
	in.worker_cpus = 0.42;
	in.cpu_busy = 0.27;
	pipeline_model_build(&m, &in);
	CHECK(!m.fits && m.rate > PREDICT_FIT_HI);
	p = pipeline_predict_workers(&m, 2);
	CHECK(p && p->speedup == 0 && strstr(p->withheld, "unmodelled"));
	CHECK_EQ_INT(pipeline_workers_to_saturate(&m), 0);

	/* Workers waiting on storage. */
	in = loader_job();
	in.worker_loop_io = 0.30;
	pipeline_model_build(&m, &in);
	p = pipeline_predict_workers(&m, 2);
	CHECK(p && p->speedup == 0 && strstr(p->withheld, "storage"));

	/* No worker at all. */
	in = loader_job();
	in.workers = 0;
	in.worker_loop_cpus = in.worker_cpus = 0;
	pipeline_model_build(&m, &in);
	p = pipeline_predict_workers(&m, 1);
	CHECK(p && p->speedup == 0 && p->withheld[0]);
}

/* Intra-op threads: a bound, never a number, from one compute thread. */
TEST(test_model_threads)
{
	struct pipeline_inputs in = { .window_s = 5, .ncpus = 2, .cpu_busy = 0.5,
				      .trainer_cpus = 0.98, .trainer_own = 1.0,
				      .trainer_running = 0.98, .compute_threads = 1 };
	struct pipeline_model m;
	const struct prediction *p;

	pipeline_model_build(&m, &in);
	CHECK(m.fits && m.rate_limit == LIMIT_TRAINER);
	p = pipeline_predict_threads(&m, 2);
	CHECK(p && p->speedup == 0);
	CHECK_MSG(p && near(p->bound, 1 / (0.02 + 0.49), 1e-9), "%f", p ? p->bound : 0);
	CHECK_MSG(p && strstr(p->withheld, "one compute thread"), "%s", p ? p->withheld : "");
	CHECK_STR(p ? p->knob : NULL, "torch.set_num_threads");

	in.cpu_busy = 0.99;
	pipeline_model_build(&m, &in);
	p = pipeline_predict_threads(&m, 2);
	CHECK(p && p->speedup == 0 && near(p->bound, 1.0, 1e-9) && strstr(p->withheld, "no CPU"));

	/* The table is bounded. */
	for (int i = 0; i < MAX_PREDICTIONS + 2; i++)
		pipeline_predict_threads(&m, 2);
	CHECK_EQ_INT(m.nr_predictions, MAX_PREDICTIONS);
	CHECK(!pipeline_predict_workers(&m, 2));
	CHECK_STR(predict_limit_name(LIMIT_CPUS), "cpus");
	CHECK_STR(predict_limit_name(NR_LIMITS), "?");
}

/* ---- the rules that withhold advice, through analyse() ---- */

static struct thread_result mk(__u32 tid, __u32 tgid, const __u64 ms[PP_NR_STATES])
{
	struct thread_result t = { .tid = tid, .tgid = tgid };

	for (int s = 0; s < PP_NR_STATES; s++) {
		t.ns[s] = ms[s] * MS;
		t.wall_ns += t.ns[s];
	}
	return t;
}

static struct analysis_input input(int ncpus, double busy)
{
	struct analysis_input in = {
		.root_pid = 100, .threshold = 0.20, .ncpus = ncpus, .cpu_busy = busy,
		.runnable_avg = 1.0, .window_ns = 1000 * MS,
	};
	return in;
}

static const struct recommendation *rec(const struct analysis *a, const char *id)
{
	for (int i = 0; i < a->nr_recs; i++)
		if (!strcmp(a->recs[i].id, id))
			return &a->recs[i];
	return NULL;
}

/* Any advice about the GPU (the job maps no GPU library: none may be given). */
static const char *gpu_advice(const struct analysis *a)
{
	static const char *const words[] = { "CUDA", "pin_memory", "GPU", "autocast" };

	for (int i = 0; i < a->nr_recs; i++)
		for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++)
			if (strstr(a->recs[i].text, words[k]))
				return a->recs[i].text;
	return NULL;
}

static void check_every_rec_has_evidence(const struct analysis *a)
{
	for (int i = 0; i < a->nr_recs; i++)
		CHECK_MSG(a->recs[i].evidence[0], "%s has no evidence: %s", a->recs[i].id,
			  a->recs[i].text);
}

/* A GPU-bound trainer copying its batches from pageable memory is told to pin them, with the
 * copies as evidence; from pinned memory, or with no copies, it is not. */
TEST(test_pin_memory_from_copies)
{
	__u64 trainer[PP_NR_STATES] = { [PP_RUNNING] = 300, [PP_GPU_WAIT] = 700 };
	struct thread_result th[1] = { mk(100, 100, trainer) };
	struct analysis_input in = input(2, 0.55);
	const struct recommendation *r;
	struct analysis a;

	in.gpu_mapped = true;
	in.gpu_sync_mean_us = 1000;
	in.h2d_traced = true;
	in.h2d_bytes = 3000000;
	analyse(th, 1, &in, &a);
	r = rec(&a, "pin_memory");
	CHECK_MSG(r && strstr(r->text, "pin_memory=True") && strstr(r->evidence, "100% of it"),
		  "%s", r ? r->evidence : "(none)");
	check_every_rec_has_evidence(&a);
	in.h2d_pinned_bytes = 3000000;
	analyse(th, 1, &in, &a);
	CHECK(!rec(&a, "pin_memory"));
	in.h2d_bytes = in.h2d_pinned_bytes = 0;
	analyse(th, 1, &in, &a);
	CHECK(!rec(&a, "pin_memory"));
	/* Copies not traced: nothing said from them. */
	in.h2d_traced = false;
	in.h2d_bytes = 3000000;
	analyse(th, 1, &in, &a);
	CHECK(!rec(&a, "pin_memory"));
}

TEST(test_rules_data_loading)
{
	__u64 trainer[PP_NR_STATES] = { [PP_RUNNING] = 100, [PP_DATA_WAIT] = 900 };
	__u64 worker[PP_NR_STATES] = { [PP_RUNNING] = 970, [PP_OTHER] = 30 };
	struct thread_result th[2] = { mk(100, 100, trainer), mk(200, 200, worker) };
	struct analysis_input in = input(2, 0.55);
	const struct recommendation *r;
	const struct prediction *p;
	struct analysis a;

	analyse(th, 2, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING);
	r = rec(&a, "more_workers");
	CHECK(r != NULL);
	if (r) {
		CHECK(r->prediction >= 0);
		p = &a.model.predictions[r->prediction];
		CHECK(p->speedup > 1.5 && p->speedup < 2.0);
		CHECK_MSG(strstr(r->text, "Raise num_workers from 1 to 2: predicted 1."), "%s", r->text);
		CHECK_MSG(strstr(r->evidence, "1 of 2 CPUs idle") || strstr(r->evidence, "0.9 of 2"),
			  "%s", r->evidence);
		CHECK(near(r->speedup_bound, 10, 1e-9));
	}
	/* A CPU-only job: nothing about the GPU, pin_memory included. */
	CHECK_MSG(!gpu_advice(&a), "%s", gpu_advice(&a));
	CHECK(!rec(&a, "persistent_workers"));
	check_every_rec_has_evidence(&a);

	/* The same job mapping libcudart: pin_memory is fair advice... */
	in.gpu_mapped = true;
	analyse(th, 2, &in, &a);
	CHECK(rec(&a, "pin_memory") != NULL);
	/* ...unless the copies to the GPU were traced and none came from pageable memory... */
	in.h2d_traced = true;
	in.h2d_bytes = in.h2d_pinned_bytes = 36000000;
	analyse(th, 2, &in, &a);
	CHECK(!rec(&a, "pin_memory"));
	for (int i = 0; i < a.nr_recs; i++)
		CHECK_MSG(!strstr(a.recs[i].text, "pin_memory"), "%s", a.recs[i].text);
	in.h2d_bytes = 0;
	in.h2d_pinned_bytes = 0;
	analyse(th, 2, &in, &a);
	CHECK(!rec(&a, "pin_memory"));
	/* ...and with them mostly pageable it says so. */
	in.h2d_bytes = 36000000;
	in.h2d_pinned_bytes = 9000000;
	analyse(th, 2, &in, &a);
	r = rec(&a, "pin_memory");
	CHECK_MSG(r && strstr(r->evidence, "36.0 MB in the window, 75% of it from host memory not "
			      "seen pinned"), "%s", r ? r->evidence : "(none)");
	in.h2d_traced = false;
	in.h2d_bytes = in.h2d_pinned_bytes = 0;
	in.gpu_mapped = false;

	/* ...and workers re-forked inside the window earn persistent_workers. */
	in.workers_forked = 1;
	analyse(th, 2, &in, &a);
	CHECK(rec(&a, "persistent_workers") != NULL);
	in.workers_forked = 0;

	/* Under half a CPU idle, yet more than the model's noise: its number decides. */
	{
		__u64 tr[PP_NR_STATES] = { [PP_RUNNING] = 300, [PP_DATA_WAIT] = 700 };
		__u64 loop[PP_NR_STATES] = { [PP_RUNNING] = 990, [PP_OTHER] = 10 };
		__u64 feeder[PP_NR_STATES] = { [PP_RUNNING] = 200, [PP_THREAD_WAIT] = 800 };
		struct thread_result t3[3] = { mk(100, 100, tr), mk(200, 200, loop),
					       mk(201, 200, feeder) };

		in = input(2, 0.78);
		analyse(t3, 3, &in, &a);
		CHECK_MSG(near(a.model.idle_cpus, 0.44, 1e-9), "%f", a.model.idle_cpus);
		CHECK(!pipeline_no_idle_cpu(&a.model));
		r = rec(&a, "more_workers");
		CHECK_MSG(r && strstr(r->text, "predicted 1."), "%s", r ? r->text : "(none)");
		CHECK(!rec(&a, "cheaper_transforms"));
	}

	/* No idle CPU: never "more workers". */
	in = input(2, 1.0);
	analyse(th, 2, &in, &a);
	CHECK(!rec(&a, "more_workers"));
	r = rec(&a, "cheaper_transforms");
	CHECK(r != NULL);
	CHECK_MSG(r && strstr(r->text, "no idle CPU"), "%s", r ? r->text : "");
	CHECK_MSG(r && !strstr(r->text, "GPU"), "%s", r ? r->text : "");
	for (int i = 0; i < a.nr_recs; i++)
		CHECK_MSG(!strstr(a.recs[i].text, "more workers to keep") &&
			  !strstr(a.recs[i].text, "Raise num_workers"), "%s", a.recs[i].text);
	check_every_rec_has_evidence(&a);
}

TEST(test_rules_cpu_bound)
{
	__u64 trainer[PP_NR_STATES] = { [PP_RUNNING] = 990, [PP_RUNQ] = 10 };
	__u64 pool[PP_NR_STATES] = { [PP_RUNNING] = 700, [PP_THREAD_WAIT] = 300 };
	struct thread_result th[2] = { mk(100, 100, trainer), mk(101, 100, pool) };
	struct analysis_input in = input(2, 0.5);
	const struct recommendation *r;
	struct analysis a;

	/* One compute thread, a CPU idle, no GPU library: intra-op threads, a bound, no number. */
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_CPU);
	r = rec(&a, "intra_op_threads");
	CHECK(r != NULL);
	if (r) {
		CHECK_MSG(strstr(r->text, "torch.set_num_threads(2)"), "%s", r->text);
		CHECK_MSG(strstr(r->text, "No predicted speedup"), "%s", r->text);
		CHECK(r->prediction >= 0 && a.model.predictions[r->prediction].speedup == 0);
		CHECK(r->speedup_bound > 1.9 && r->speedup_bound <= 2.0);
	}
	r = rec(&a, "less_work_per_step");
	CHECK(r && !strstr(r->text, "CUDA"));
	CHECK_MSG(!gpu_advice(&a), "%s", gpu_advice(&a));
	CHECK(rec(&a, "inputs_in_workers") != NULL);
	check_every_rec_has_evidence(&a);

	/* A GPU job bound on the CPU: intra-op threads do not help, and CUDA graphs wait for
	 * the steps' launch counts (recommend_gpu_steps()): none was measured here. */
	in.gpu_mapped = true;
	analyse(th, 1, &in, &a);
	CHECK(!rec(&a, "intra_op_threads"));
	r = rec(&a, "less_work_per_step");
	CHECK_MSG(r && !strstr(r->text, "CUDA graphs"), "%s", r ? r->text : "");
	in.gpu_mapped = false;

	/* No idle CPU: no more threads, no more workers. */
	in = input(2, 0.995);
	analyse(th, 1, &in, &a);
	CHECK(!rec(&a, "intra_op_threads") && !rec(&a, "inputs_in_workers"));

	/* Two compute threads, spinning at OpenMP barriers, with about one CPU for the job:
	 * fewer threads. */
	in = input(2, 1.0);
	{
		__u64 spin[PP_NR_STATES] = { [PP_RUNNING] = 800, [PP_RUNQ] = 150, [PP_THREAD_WAIT] = 50 };
		__u64 queued[PP_NR_STATES] = { [PP_RUNNING] = 400, [PP_RUNQ] = 300, [PP_THREAD_WAIT] = 300 };

		th[0] = mk(100, 100, spin);
		th[1] = mk(101, 100, queued);
	}
	analyse(th, 2, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_CPU);
	CHECK_EQ_INT(a.model.in.compute_threads, 2);
	r = rec(&a, "fewer_compute_threads");
	CHECK_MSG(r != NULL, "model: avail %.2f", a.model.avail_cpus);
	CHECK_MSG(r && strstr(r->text, "torch.set_num_threads(1)"), "%s", r ? r->text : "");
	CHECK(!rec(&a, "intra_op_threads"));
	check_every_rec_has_evidence(&a);
}

/* The predicted speed-up a recommendation links to, 0 when none. */
static double predicted(const struct analysis *a, const struct recommendation *r)
{
	return r->prediction >= 0 ? a->model.predictions[r->prediction].speedup : 0;
}

/* The intra-op threads advice held against where the trainer's CPU goes (where.c). */
TEST(test_threads_against_samples)
{
	__u64 trainer[PP_NR_STATES] = { [PP_RUNNING] = 990, [PP_RUNQ] = 10 };
	struct thread_result th[1] = { mk(100, 100, trainer) };
	struct analysis_input in = input(2, 0.5);
	struct report *r = calloc(1, sizeof(*r));
	const struct recommendation *adv;
	int blas;

	CHECK(near(pipeline_threads_bound(1.0, 0.0, 2), 2.0, 1e-9));
	CHECK(near(pipeline_threads_bound(1.0, 1.0, 8), 1.0, 1e-9));
	CHECK(near(pipeline_threads_bound(0.5, 0.5, 2), 1 / (0.5 + 0.5 * 0.75), 1e-9));
	if (!r)
		return;
	blas = where_name_id(&r->where_names, "sgemm_ (libblas.so.3)");
	/* 90% of 200 samples in a BLAS with no threads: the advice turns to the BLAS. */
	analyse(th, 1, &in, &r->analysis);
	r->where[ROLE_TRAINER] = (struct where_role){ .samples = 200, .serial_library = 180,
						      .serial_top = { .name = blas, .samples = 180 } };
	where_annotate(r);
	CHECK(!rec(&r->analysis, "intra_op_threads"));
	adv = rec(&r->analysis, "serial_code");
	CHECK_MSG(adv && strstr(adv->text, "would not help") && strstr(adv->text, "sgemm_") &&
		  strstr(adv->text, "threaded BLAS"), "%s", adv ? adv->text : "");
	CHECK(adv && adv->speedup_bound < PREDICT_THREADS_NO_GAIN &&
	      near(adv->speedup_bound, pipeline_threads_bound(0.99, 0.9, 2), 1e-9));
	CHECK(adv && strstr(adv->evidence, "200 CPU samples"));
	CHECK(adv && near(predicted(&r->analysis, adv), adv->speedup_bound, 1e-9));

	/* 30% in the interpreter: a prediction from the samples, the advice stays. */
	analyse(th, 1, &in, &r->analysis);
	r->where[ROLE_TRAINER] = (struct where_role){ .samples = 200, .serial_interpreter = 60,
						      .serial_top = { .name = -1 } };
	where_annotate(r);
	adv = rec(&r->analysis, "intra_op_threads");
	CHECK_MSG(adv && strstr(adv->text, "predicted 1.53x") && strstr(adv->text, "split evenly"),
		  "%s", adv ? adv->text : "");
	CHECK(adv && near(adv->speedup_bound, pipeline_threads_bound(0.99, 0.3, 2), 1e-9));
	CHECK(adv && near(predicted(&r->analysis, adv), adv->speedup_bound, 1e-9));

	/* Nothing of it on one thread: the whole on-CPU share is taken to split. */
	analyse(th, 1, &in, &r->analysis);
	r->where[ROLE_TRAINER] = (struct where_role){ .samples = 200, .serial_top = { .name = -1 } };
	where_annotate(r);
	adv = rec(&r->analysis, "intra_op_threads");
	CHECK(adv && near(predicted(&r->analysis, adv), pipeline_threads_bound(0.99, 0, 2), 1e-9));

	/* Too few samples to say: no number, only the loose bound. */
	analyse(th, 1, &in, &r->analysis);
	r->where[ROLE_TRAINER] = (struct where_role){ .samples = 20, .serial_library = 20,
						      .serial_top = { .name = blas, .samples = 20 } };
	where_annotate(r);
	adv = rec(&r->analysis, "intra_op_threads");
	CHECK(adv && adv->speedup_bound > 1.9 && strstr(adv->text, "No predicted speedup"));
	CHECK(adv && !predicted(&r->analysis, adv));
	where_names_free(&r->where_names);
	free(r);
}

/* Every verdict's advice says what it rests on. */
TEST(test_rules_evidence_everywhere)
{
	static const __u64 cases[][PP_NR_STATES] = {
		{ [PP_RUNNING] = 300, [PP_GPU_WAIT] = 700 },
		{ [PP_RUNNING] = 300, [PP_IO_WAIT] = 600, [PP_RUNQ] = 100 },
		{ [PP_RUNNING] = 400, [PP_RUNQ] = 600 },
		{ [PP_RUNNING] = 400, [PP_COMM_WAIT] = 500, [PP_OTHER] = 100 },
		{ [PP_RUNNING] = 400, [PP_THREAD_WAIT] = 600 },
		{ [PP_RUNNING] = 50, [PP_OTHER] = 950 },
		{ [PP_RUNNING] = 200, [PP_DATA_WAIT] = 450, [PP_IO_WAIT] = 350 },
	};
	struct analysis_input in = input(4, 0.5);
	struct analysis a;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct thread_result th[1] = { mk(100, 100, cases[c]) };

		th[0].gpu_calls = c == 0 ? 5000 : 0;
		in.gpu_mapped = c == 0;
		in.gpu_sync_mean_us = 100;
		analyse(th, 1, &in, &a);
		CHECK(a.nr_recs > 0);
		check_every_rec_has_evidence(&a);
		if (c)
			CHECK_MSG(!gpu_advice(&a), "case %zu: %s", c, gpu_advice(&a));
	}
	/* Nobody to advise about. */
	in.tid_override = 999;
	{
		__u64 ms[PP_NR_STATES] = { [PP_RUNNING] = 1000 };
		struct thread_result th[1] = { mk(100, 100, ms) };

		analyse(th, 1, &in, &a);
		CHECK(rec(&a, "no_trainer") != NULL);
		check_every_rec_has_evidence(&a);
	}
}

int main(void)
{
	RUN_TEST(test_model_limits);
	RUN_TEST(test_model_job_fills_machine);
	RUN_TEST(test_model_withholds);
	RUN_TEST(test_model_threads);
	RUN_TEST(test_rules_data_loading);
	RUN_TEST(test_pin_memory_from_copies);
	RUN_TEST(test_rules_cpu_bound);
	RUN_TEST(test_rules_evidence_everywhere);
	RUN_TEST(test_threads_against_samples);
	return unit_summary();
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <json-c/json.h>
#include "report.h"
#include "unit.h"

#define MS 1000000ULL

static struct thread_result threads[3];
static struct proc_result procs[2];
static struct lib_result libs[1];

static void fill(struct report *r)
{
	memset(r, 0, sizeof(*r));
	r->root_pid = 100;
	snprintf(r->cmdline, sizeof(r->cmdline), "python3 train.py");
	r->start_ns = 1000 * MS;
	r->end_ns = 3000 * MS;
	threads[0] = (struct thread_result){ .tid = 100, .tgid = 100, .comm = "python3",
					     .wall_ns = 2000 * MS };
	threads[0].ns[PP_RUNNING] = 500 * MS;
	threads[0].ns[PP_DATA_WAIT] = 1500 * MS;
	threads[1] = (struct thread_result){ .tid = 101, .tgid = 100, .comm = "python3",
					     .wall_ns = 2000 * MS };
	threads[1].ns[PP_OTHER] = 2000 * MS;
	threads[2] = (struct thread_result){ .tid = 200, .tgid = 200, .comm = "python3",
					     .wall_ns = 2000 * MS };
	threads[2].ns[PP_RUNNING] = 1900 * MS;
	threads[2].ns[PP_RUNQ] = 100 * MS;
	r->threads = threads;
	r->nr_threads = 3;
	procs[0] = (struct proc_result){ .pid = 100, .root = true, .comm = "python3" };
	procs[1] = (struct proc_result){ .pid = 200, .parent = 100, .comm = "python3" };
	r->procs = procs;
	r->nr_procs = 2;
	libs[0] = (struct lib_result){ .pid = 100, .kind = LIB_CUDART, .path = "/x/libcudart.so.13",
				       .nr_probes = 1 };
	libs[0].probes[0] = (struct probe_result){ .api = "cudaStreamSynchronize", .value = 0x74190,
						   .offset = 0x74190, .attached = true };
	r->libs = libs;
	r->nr_libs = 1;
	r->gpu_traced = true;
	r->nr_apis = 1;
	r->apis[0] = (struct api_result){ .name = "cudaStreamSynchronize", .calls = 3, .total_ns = 3000 };
	r->apis[0].slots[0] = 3;
	r->io.count = 2;
	r->io.slots[8] = 2;
	r->input = (struct analysis_input){ .root_pid = 100, .threshold = 0.2, .ncpus = 2,
					    .cpu_busy = 0.5, .runnable_avg = 1, .window_ns = 2000 * MS };
	analyse(r->threads, r->nr_threads, &r->input, &r->analysis);
}

static json_object *render_json(const struct report *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_object *o;

	CHECK_EQ_INT(report_print_json(f, r), 0);
	fclose(f);
	o = json_tokener_parse(buf);
	CHECK_MSG(o, "report JSON does not parse: %.200s", buf);
	free(buf);
	return o;
}

static json_object *at(json_object *o, const char *path)
{
	char key[128], *save = NULL, *tok;

	snprintf(key, sizeof(key), "%s", path);
	for (tok = strtok_r(key, ".", &save); o && tok; tok = strtok_r(NULL, ".", &save))
		if (!json_object_object_get_ex(o, tok, &o))
			return NULL;
	return o;
}

TEST(test_json_schema)
{
	struct report r;
	json_object *o, *v;

	fill(&r);
	o = render_json(&r);
	if (!o)
		return;
	CHECK_STR(json_object_get_string(at(o, "schema")), "pipeprof.report/v1");
	CHECK_EQ_INT(json_object_get_int(at(o, "pid")), 100);
	CHECK_STR(json_object_get_string(at(o, "verdict.name")), "DATA-LOADING BOUND");
	CHECK_STR(json_object_get_string(at(o, "verdict.state")), "DATA_WAIT");
	CHECK(json_object_get_double(at(o, "verdict.fraction")) == 0.75);
	CHECK(json_object_get_double(at(o, "verdict.speedup_bound")) == 4.0);
	CHECK_EQ_U64(json_object_get_int64(at(o, "window.start_ns")), 1000 * MS);
	CHECK_EQ_U64(json_object_get_int64(at(o, "window.end_ns")), 3000 * MS);
	CHECK_EQ_INT(json_object_get_int(at(o, "trainer.tid")), 100);
	CHECK(json_object_get_double(at(o, "trainer.states.DATA_WAIT.fraction")) == 0.75);
	CHECK(json_object_get_double(at(o, "trainer.states.DATA_WAIT.seconds")) == 1.5);
	/* Every state is present, in seconds and as a fraction, for every role. */
	for (int role = 0; role < NR_ROLES; role++)
		for (int s = 0; s < PP_NR_STATES; s++) {
			char path[128];

			snprintf(path, sizeof(path), "roles.%s.states.%s.fraction", role_name(role),
				 state_name(s));
			CHECK_MSG(at(o, path), "missing %s", path);
		}
	CHECK_EQ_INT(json_object_get_int(at(o, "roles.WORKER.processes")), 1);
	CHECK(json_object_get_double(at(o, "roles.WORKER.states.RUNNING.fraction")) == 0.95);
	CHECK(json_object_get_double(at(o, "evidence.worker_loops.states.RUNNING.fraction")) == 0.95);
	CHECK_EQ_INT(json_object_array_length(at(o, "threads")), 3);
	CHECK_EQ_INT(json_object_array_length(at(o, "processes")), 2);
	CHECK(json_object_get_boolean(at(o, "gpu.traced")));
	v = json_object_array_get_idx(at(o, "gpu.libraries"), 0);
	CHECK_STR(json_object_get_string(at(v, "kind")), "cudart");
	v = json_object_array_get_idx(at(v, "probes"), 0);
	CHECK_EQ_U64(json_object_get_int64(at(v, "value")), 0x74190);
	v = json_object_array_get_idx(at(o, "gpu.apis"), 0);
	CHECK_EQ_INT(json_object_get_int(at(v, "calls")), 3);
	CHECK_EQ_INT(json_object_get_int(at(o, "io.requests")), 2);
	CHECK(json_object_array_length(at(o, "recommendations")) >= 1);
	v = json_object_array_get_idx(at(o, "recommendations"), 0);
	CHECK(json_object_get_double(at(v, "speedup_bound")) == 4.0);
	/* A bound is either a real speed-up or null, never a 0 or 1 a dashboard would plot. */
	for (size_t i = 0; i < json_object_array_length(at(o, "recommendations")); i++) {
		json_object *rec = json_object_array_get_idx(at(o, "recommendations"), i);

		CHECK(json_object_object_get_ex(rec, "speedup_bound", &v));
		CHECK(v == NULL || json_object_get_double(v) > 1.0);
	}
	/* Each recommendation's evidence, and its prediction held in the model whole. */
	v = json_object_array_get_idx(at(o, "recommendations"), 0);
	CHECK_STR(json_object_get_string(at(v, "id")), "more_workers");
	CHECK(strlen(json_object_get_string(at(v, "evidence"))) > 10);
	CHECK_EQ_INT(json_object_get_int(at(v, "prediction")), 0);
	{
		json_object *p = json_object_array_get_idx(at(o, "model.predictions"), 0);

		CHECK(json_object_get_double(at(v, "predicted_speedup")) ==
		      json_object_get_double(at(p, "speedup")));
		CHECK(json_object_get_double(at(p, "speedup")) > 1.5);
		CHECK_STR(json_object_get_string(at(p, "knob")), "num_workers");
		CHECK_EQ_INT(json_object_get_int(at(p, "from")), 1);
		CHECK_EQ_INT(json_object_get_int(at(p, "to")), 2);
		CHECK_STR(json_object_get_string(at(p, "limit")), "cpus");
		CHECK(json_object_object_get_ex(p, "withheld", &v) && v == NULL);
	}
	CHECK_EQ_INT(json_object_get_int(at(o, "model.inputs.ncpus")), 2);
	CHECK_EQ_INT(json_object_get_int(at(o, "model.inputs.workers")), 1);
	CHECK(json_object_get_double(at(o, "model.inputs.worker_loop_cpus")) == 0.95);
	CHECK(json_object_get_boolean(at(o, "model.derived.fits")));
	CHECK_STR(json_object_get_string(at(o, "model.derived.rate_limit")), "workers");
	CHECK(json_object_get_double(at(o, "model.derived.idle_cpus")) == 1.0);
	/* A process there before the window has no fork time. */
	v = json_object_array_get_idx(at(o, "processes"), 0);
	CHECK(json_object_object_get_ex(v, "fork_ns", &v) && v == NULL);
	CHECK(at(o, "counters.threads_lost_map_full") != NULL);
	CHECK(!json_object_get_boolean(at(o, "target_exited")));
	json_object_put(o);

	r.gpu_traced = false;
	snprintf(r.gpu_why_not, sizeof(r.gpu_why_not), "no libcudart");
	report_not_traced(&r, "GPU_WAIT: %s", r.gpu_why_not);
	r.target_exited = true;
	r.target_exit_ns = 2500 * MS;
	o = render_json(&r);
	if (!o)
		return;
	CHECK_STR(json_object_get_string(at(o, "gpu.why_not")), "no libcudart");
	json_object_put(o);

	/* Unknowns are null: no bound for "no dominant stall", no load /proc could not give. */
	for (int i = 0; i < r.nr_threads; i++) {
		memset(threads[i].ns, 0, sizeof(threads[i].ns));
		threads[i].ns[PP_OTHER] = threads[i].wall_ns;
	}
	r.input.cpu_busy = -1;
	r.input.runnable_avg = -1;
	analyse(r.threads, r.nr_threads, &r.input, &r.analysis);
	o = render_json(&r);
	if (!o)
		return;
	CHECK_STR(json_object_get_string(at(o, "verdict.name")), "NO DOMINANT STALL");
	CHECK(json_object_object_get_ex(at(o, "verdict"), "speedup_bound", &v) && v == NULL);
	CHECK(json_object_object_get_ex(at(o, "cpu"), "busy_fraction", &v) && v == NULL);
	CHECK(json_object_object_get_ex(at(o, "cpu"), "runnable_avg", &v) && v == NULL);
	CHECK_STR(json_object_get_string(json_object_array_get_idx(at(o, "not_traced"), 0)),
		  "GPU_WAIT: no libcudart");
	CHECK(json_object_get_boolean(at(o, "target_exited")));
	json_object_put(o);
}

TEST(test_text_layout)
{
	char *buf = NULL;
	size_t len = 0;
	struct report r;
	FILE *f;

	fill(&r);
	f = open_memstream(&buf, &len);
	report_print_text(f, &r);
	fclose(f);
	CHECK_MSG(strstr(buf, "pipeprof: PID 100 (python3 train.py) traced 2.00 s: 2 processes, 3 threads\n"),
		  "%s", buf);
	CHECK(strstr(buf, "\nVerdict: DATA-LOADING BOUND: DATA_WAIT is 75.0% of the trainer's time; "
			  "removing it entirely would speed the loop up by at most 4.00x\n"));
	CHECK(strstr(buf, "  DATA_WAIT        1.500 s   75.0%  ##############################\n"));
	CHECK_MSG(strstr(buf, "                    TRAINER (1t)   WORKER (1p, 1t)       HELPER (1t)\n"),
		  "%s", buf);
	CHECK_MSG(strstr(buf, "  RUNNING                  25.0%             95.0%              0.0%\n"),
		  "%s", buf);
	CHECK(strstr(buf, "  OTHER                     0.0%              0.0%            100.0%\n"));
	CHECK(strstr(buf, "DataLoader workers (1 process, main threads): on-CPU 95.0%"));
	CHECK(strstr(buf, "cudaStreamSynchronize: 3 calls (1.5/s)"));
	CHECK(strstr(buf, "Recommendations:\n  1. "));
	/* The model's prediction beside the bound, and the facts under the advice. */
	CHECK_MSG(strstr(buf, "Raise num_workers from 1 to 2: predicted 1.58x steps/s"), "%s", buf);
	CHECK_MSG(strstr(buf, "the CPUs are the limit. [at most 4.00x]\n     measured: the worker "
			 "loop is on-CPU 95% (0.95 CPUs), the trainer uses 0.25 CPUs: a batch costs "
			 "the workers 3.8x the CPU a step costs the trainer; 1.0 of 2 CPUs idle\n"),
		  "%s", buf);
	CHECK(strstr(buf, "nothing: every probe attached, no events lost"));
	free(buf);

	report_not_traced(&r, "3 threads not tracked");
	r.target_exited = true;
	r.target_exit_ns = 2500 * MS;
	buf = NULL;
	f = open_memstream(&buf, &len);
	report_print_text(f, &r);
	fclose(f);
	CHECK(strstr(buf, "  - 3 threads not tracked\n"));
	CHECK(strstr(buf, "note: the target exited 1.50 s into the trace"));
	free(buf);
}

/* A report whose maps overflowed says so in both renderings; one with too many "not traced"
 * lines says how many it could not show. */
TEST(test_partial_and_overflow)
{
	char *buf = NULL, line[64];
	size_t len = 0;
	struct report r;
	json_object *o, *v;
	FILE *f;

	fill(&r);
	o = render_json(&r);
	if (!o)
		return;
	CHECK(!json_object_get_boolean(at(o, "partial")));
	CHECK(json_object_object_get_ex(o, "partial_why", &v) && v == NULL);
	CHECK_EQ_INT(json_object_get_int(at(o, "counters.threads_not_traced")), 0);
	json_object_put(o);

	r.partial = true;
	snprintf(r.partial_why, sizeof(r.partial_why), "400 threads did not fit the thread map");
	r.threads_missed = 400;
	r.procs_missed = 3;
	o = render_json(&r);
	if (!o)
		return;
	CHECK(json_object_get_boolean(at(o, "partial")));
	CHECK_STR(json_object_get_string(at(o, "partial_why")), "400 threads did not fit the thread map");
	CHECK_EQ_INT(json_object_get_int(at(o, "counters.threads_not_traced")), 400);
	CHECK_EQ_INT(json_object_get_int(at(o, "counters.processes_not_traced")), 3);
	json_object_put(o);
	f = open_memstream(&buf, &len);
	report_print_text(f, &r);
	fclose(f);
	CHECK_MSG(strstr(buf, "\nnote: the figures are partial: 400 threads did not fit the thread "
			  "map (see Not traced / lost)\n"), "%s", buf);
	free(buf);

	for (int i = 0; i < MAX_NOT_TRACED + 3; i++)
		report_not_traced(&r, "loss %d", i);
	CHECK_EQ_INT(r.nr_not_traced, MAX_NOT_TRACED);
	CHECK_STR(r.not_traced[MAX_NOT_TRACED - 2], "loss 22");
	snprintf(line, sizeof(line), "%d more lines not shown", 4);
	CHECK_STR(r.not_traced[MAX_NOT_TRACED - 1], line);
}

/* Whether o has key and its value is JSON null. */
static bool is_null(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) && !v;
}

/* What a report says when it kept a draw of its samples, stopped keeping step boundaries, or
 * lost some of the probe's step records: in the text, and the counts in JSON. */
TEST(test_draws_caps_and_lost_steps)
{
	char buf[256], *text = NULL;
	size_t len = 0;
	struct report r;
	json_object *o;
	FILE *f;

	fill(&r);
	where_draw_text(buf, sizeof(buf), &r);
	CHECK_STR(buf, "");
	r.samples_seen = 100000;
	r.nr_where_samples = 32767;	/* one short of the cap: memory ran out once */
	r.samples_cap = 32768;
	where_draw_text(buf, sizeof(buf), &r);
	CHECK_STR(buf, "the counts are a uniform draw of 32767 of the window's 100000 samples (a "
		  "report keeps 32768)");
	steps_unkept_text(buf, sizeof(buf), &r);
	CHECK_STR(buf, "");
	r.step_recs_unkept = 117772;
	r.step_unkept_from_ns = r.start_ns + 13012 * MS;
	steps_unkept_text(buf, sizeof(buf), &r);
	CHECK_STR(buf, "the step figures are over the window's first 13.0 s: the report keeps 32768 "
		  "step boundaries, and 117772 more came after them");

	r.steps_on = r.steps_probed = true;
	r.steps = (struct step_summary){ .source = PP_STEP_FROM_PROBE, .count = 6, .timed = 3,
					 .times = true,
					 .per_second = 100, .mean_s = 0.010, .p50_s = 0.010,
					 .p90_s = 0.010, .max_s = 0.010 };
	r.steps.all.share[PP_RUNNING] = r.steps.median.share[PP_RUNNING] = 1;
	r.step_recs_lost = 2;
	f = open_memstream(&text, &len);
	steps_print_text(f, &r);
	fclose(f);
	CHECK_MSG(strstr(text, "  6 steps, 100.00 steps/s; step time p50 10.0 ms, p90 10.0 ms, "
			 "max 10.0 ms\n  step times are over the 3 steps timed one by one: the "
			 "records of the others' boundaries were lost (ring buffer full)\n  the step "
			 "figures are over the window's first 13.0 s"), "%s", text);
	CHECK_MSG(strstr(text, "  2 step boundaries lost (ring buffer full): the probe numbers the "
			 "steps, so the count and rate hold those between the records kept\n"),
		  "%s", text);
	free(text);
	o = steps_json(&r);
	CHECK_EQ_INT(json_object_get_int(at(o, "timed")), 3);
	CHECK_EQ_U64(json_object_get_int64(at(o, "unkept")), 117772);
	CHECK(json_object_get_double(at(o, "unkept_from_s")) > 13.01);
	json_object_put(o);
	/* None timed: no step time is given, in text or JSON. */
	r.steps.timed = 0;
	r.steps.times = false;
	r.steps.p50_s = r.steps.p90_s = r.steps.max_s = 0;
	text = NULL;
	f = open_memstream(&text, &len);
	steps_print_text(f, &r);
	fclose(f);
	CHECK_MSG(strstr(text, "  6 steps, 100.00 steps/s, 10.00 ms each on average; no step time: "
			 "none timed one by one (records lost between every two)\n") &&
		  !strstr(text, "median step"), "%s", text);
	free(text);
	o = steps_json(&r);
	CHECK(is_null(o, "p50_s") && is_null(o, "max_s") && is_null(o, "median_step"));
	json_object_put(o);
	o = where_json(&r);
	CHECK_EQ_U64(json_object_get_int64(at(o, "samples_seen")), 100000);
	CHECK_EQ_INT(json_object_get_int(at(o, "samples_kept")), 32767);
	json_object_put(o);
}

/* The daemon's steps from a window's histogram: what the slots and the sum tell, null for what
 * they cannot, and -p's steps as they were (no resolution key) when it is not set. */
TEST(test_steps_from_histogram)
{
	__u64 slots[PP_HIST_SLOTS] = {};
	char *buf = NULL;
	size_t len = 0;
	struct report r;
	json_object *o, *st;
	FILE *f;

	fill(&r);
	o = render_json(&r);
	if (!o)
		return;
	st = at(o, "steps");
	CHECK(st && !json_object_object_get_ex(st, "resolution", NULL));
	CHECK_EQ_INT(json_object_get_int(at(st, "count")), 0);
	CHECK(!json_object_is_type(at(st, "max_s"), json_type_null));
	json_object_put(o);

	/* 40 steps of 40-50 ms (slot 15: [32768, 65536) usecs) and 10 of 70 ms (slot 16) in the
	 * 2 s window; the mean from the sum, 46 ms. */
	slots[15] = 40;
	slots[16] = 10;
	r.steps_probed = true;
	r.steps_tid = 100;
	steps_from_hist(&r, slots, 2.3, 1);
	CHECK_EQ_U64(r.steps_hist.count, 50);
	CHECK(r.steps_hist.per_second == 25);
	CHECK_MSG(r.steps_hist.p50_s > 0.032768 && r.steps_hist.p50_s < 0.065536, "%f",
		  r.steps_hist.p50_s);
	CHECK_MSG(r.steps_hist.p90_s >= 0.065536 && r.steps_hist.p90_s < 0.131072, "%f",
		  r.steps_hist.p90_s);
	CHECK_MSG(r.steps_hist.mean_s > 0.04599 && r.steps_hist.mean_s < 0.04601, "%f",
		  r.steps_hist.mean_s);
	CHECK_STR(steps_source_name(&r), "autograd_engine");
	o = render_json(&r);
	if (!o)
		return;
	st = at(o, "steps");
	CHECK_STR(json_object_get_string(at(st, "resolution")), "log2_histogram");
	CHECK_STR(json_object_get_string(at(st, "source")), "autograd_engine");
	CHECK(is_null(st, "why_not"));
	CHECK_EQ_INT(json_object_get_int(at(st, "count")), 50);
	CHECK_EQ_INT(json_object_get_int(at(st, "tid")), 100);
	CHECK_EQ_INT(json_object_get_int(at(st, "other_threads")), 1);
	CHECK(json_object_get_double(at(st, "mean_s")) == r.steps_hist.mean_s);
	for (const char *const *k = (const char *const[]){ "max_s", "every_step", "median_step",
		"slowest", "slow_count", "slow_steps", "lost", "gpu", "nccl", NULL }; *k; k++)
		CHECK_MSG(is_null(st, *k), "steps.%s not null", *k);
	json_object_put(o);

	/* No step probe: no count at all, and why. */
	r.steps_probed = false;
	snprintf(r.steps_why_not, sizeof(r.steps_why_not), "libtorch_cpu is not mapped");
	steps_from_hist(&r, (__u64[PP_HIST_SLOTS]){}, 0, 0);
	o = render_json(&r);
	if (!o)
		return;
	st = at(o, "steps");
	CHECK(is_null(st, "source") && is_null(st, "count") && is_null(st, "p50_s"));
	CHECK_STR(json_object_get_string(at(st, "why_not")), "libtorch_cpu is not mapped");
	json_object_put(o);

	/* The text report has no Steps section for it, as before. */
	f = open_memstream(&buf, &len);
	report_print_text(f, &r);
	fclose(f);
	CHECK_MSG(!strstr(buf, "\nSteps"), "%s", buf);
	free(buf);
}

int main(void)
{
	RUN_TEST(test_json_schema);
	RUN_TEST(test_text_layout);
	RUN_TEST(test_partial_and_overflow);
	RUN_TEST(test_steps_from_histogram);
	RUN_TEST(test_draws_caps_and_lost_steps);
	return unit_summary();
}

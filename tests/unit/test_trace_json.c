// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `pipeprof record`'s trace (trace_json.c): valid JSON whatever the names, slices of a thread
 * that never overlap and add up to its states, flows from a waker's slice to the wait. */
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "classify.h"
#include "trace_json.h"
#include "unit.h"

#define US 1000ULL
#define T0 1000000000ULL

static struct pp_episode ep(__u32 tid, __u32 tgid, __u32 state, __u64 from_us, __u64 to_us)
{
	return (struct pp_episode){ .tid = tid, .tgid = tgid, .state = state,
				    .start_ns = T0 + from_us * US, .end_ns = T0 + to_us * US };
}

/* The trace of in, parsed; NULL (and a failed check) when it is not JSON. */
static json_object *write_parse(struct trace_input *in, struct trace_stats *st)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_object *o;

	CHECK_EQ_INT(trace_json_write(f, in, st), 0);
	fclose(f);
	o = json_tokener_parse(buf);
	CHECK_MSG(o != NULL, "not JSON: %s", buf);
	free(buf);
	return o;
}

static json_object *events(json_object *o)
{
	json_object *ev = NULL;

	json_object_object_get_ex(o, "traceEvents", &ev);
	return ev;
}

static const char *str(json_object *e, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(e, key, &v) ? json_object_get_string(v) : "";
}

static double num(json_object *e, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(e, key, &v) ? json_object_get_double(v) : -1;
}

static bool near(double a, double b)
{
	return a - b < 1e-6 && b - a < 1e-6;
}

TEST(test_hostile_names)
{
	/* A quote, a backslash, a newline, an ESC and a byte that is not UTF-8. */
	struct trace_thread th[] = {
		{ .tid = 7, .tgid = 7, .comm = "a\"b\\c\n\x1b[2J\xff", .role = ROLE_TRAINER,
		  .open_state = PP_RUNNING, .open_from = T0, .open_to = T0 + 10 * US },
	};
	struct trace_proc procs[] = { { .pid = 7, .comm = "\x01\"}]", .root = 1 } };
	struct trace_input in = { .threads = th, .nr_threads = 1, .procs = procs, .nr_procs = 1,
				  .start_ns = T0, .end_ns = T0 + 10 * US, .cmdline = "x\"\\\t" };
	struct trace_stats st;
	json_object *o = write_parse(&in, &st), *ev = o ? events(o) : NULL;
	bool named = false, proc_named = false;

	for (size_t i = 0; ev && i < json_object_array_length(ev); i++) {
		json_object *e = json_object_array_get_idx(ev, i), *args, *name;

		if (!json_object_object_get_ex(e, "args", &args) ||
		    !json_object_object_get_ex(args, "name", &name))
			continue;
		if (!strcmp(str(e, "name"), "thread_name")) {
			CHECK_STR(json_object_get_string(name), "TRAINER a\"b\\c\n\x1b[2J\xef\xbf\xbd");
			named = true;
		} else if (!strcmp(str(e, "name"), "process_name")) {
			CHECK_STR(json_object_get_string(name), "\x01\"}]");
			proc_named = true;
		}
	}
	CHECK(named && proc_named);
	CHECK_EQ_INT(st.slices, 1);
	json_object_put(o);
}

/* Per thread, in the order written: no slice starts before the one before it ended. */
TEST(test_slices_never_overlap)
{
	struct trace_thread th[] = {
		{ .tid = 7, .tgid = 7, .comm = "t", .role = ROLE_TRAINER, .open_state = PP_RUNNING,
		  .open_from = T0 + 90 * US, .open_to = T0 + 100 * US },
		{ .tid = 8, .tgid = 7, .comm = "h", .role = ROLE_HELPER, .open_state = PP_NR_STATES },
	};
	struct pp_episode eps[] = {
		ep(7, 7, PP_RUNNING, 0, 20),
		ep(7, 7, PP_OTHER, 40, 90),
		ep(7, 7, PP_RUNQ, 15, 40),	/* placed 5 us into the one before */
		ep(8, 7, PP_RUNNING, 0, 50),
		ep(8, 7, PP_RUNNING, 50, 100),	/* joined with the one before */
		ep(9, 9, PP_RUNNING, 0, 100),	/* a thread the report does not have */
	};
	struct trace_input in = { .threads = th, .nr_threads = 2, .eps = eps, .nr_eps = 6,
				  .start_ns = T0, .end_ns = T0 + 100 * US };
	struct trace_stats st;
	json_object *o = write_parse(&in, &st), *ev = o ? events(o) : NULL;
	double end[10] = { 0 }, sum[10][PP_NR_STATES] = { { 0 } };
	int slices = 0;

	for (size_t i = 0; ev && i < json_object_array_length(ev); i++) {
		json_object *e = json_object_array_get_idx(ev, i);
		int tid = (int)num(e, "tid");

		if (strcmp(str(e, "ph"), "X"))
			continue;
		CHECK(tid == 7 || tid == 8);
		if (tid != 7 && tid != 8)
			continue;
		CHECK_MSG(num(e, "ts") >= end[tid] - 1e-9, "tid %d: %f before %f", tid, num(e, "ts"),
			  end[tid]);
		end[tid] = num(e, "ts") + num(e, "dur");
		for (int s = 0; s < PP_NR_STATES; s++)
			if (!strcmp(str(e, "name"), state_name(s)))
				sum[tid][s] += num(e, "dur");
		slices++;
	}
	CHECK_EQ_INT(slices, 5);
	CHECK_EQ_U64(st.overlap_ns, 5 * US);
	CHECK_EQ_INT(st.episodes_unknown, 1);
	CHECK(near(sum[7][PP_RUNNING], 30) && near(sum[7][PP_RUNQ], 20) && near(sum[7][PP_OTHER], 50));
	CHECK(near(sum[8][PP_RUNNING], 100));
	json_object_put(o);
}

/* A worker's wakeup ends the trainer's DATA_WAIT: the flow starts in the worker's slice at the
 * wakeup and ends in the trainer's wait, just before the RUNQ that follows it. */
TEST(test_flows_join_waker_and_wait)
{
	struct trace_thread th[] = {
		{ .tid = 7, .tgid = 7, .comm = "python3", .role = ROLE_TRAINER, .open_state = PP_NR_STATES },
		{ .tid = 20, .tgid = 20, .comm = "pt_data_worker", .role = ROLE_WORKER,
		  .open_state = PP_NR_STATES },
	};
	struct pp_episode eps[] = {
		ep(7, 7, PP_DATA_WAIT, 0, 31),
		ep(7, 7, PP_RUNQ, 31, 35),
		ep(7, 7, PP_RUNNING, 35, 60),
		ep(7, 7, PP_THREAD_WAIT, 60, 80),	/* its waker, 99, is not traced */
		ep(7, 7, PP_RUNNING, 80, 100),
		ep(20, 20, PP_OTHER, 0, 10),
		ep(20, 20, PP_RUNNING, 10, 50),
		ep(20, 20, PP_OTHER, 50, 100),
	};
	struct trace_input in = { .threads = th, .nr_threads = 2, .eps = eps, .nr_eps = 8,
				  .start_ns = T0, .end_ns = T0 + 100 * US };
	struct trace_stats st;
	json_object *o, *ev;
	int starts = 0, ends = 0;

	eps[0].waker_tid = 20;
	eps[0].wake_ns = T0 + 30 * US;
	eps[3].waker_tid = 99;
	eps[3].wake_ns = T0 + 79 * US;
	o = write_parse(&in, &st);
	ev = o ? events(o) : NULL;
	CHECK_EQ_INT(st.flows, 1);
	for (size_t i = 0; ev && i < json_object_array_length(ev); i++) {
		json_object *e = json_object_array_get_idx(ev, i);

		if (!strcmp(str(e, "ph"), "s")) {
			/* In the worker's RUNNING slice [10, 50), at the wakeup. */
			CHECK(num(e, "tid") == 20 && near(num(e, "ts"), 30));
			CHECK_STR(str(e, "bp"), "e");
			starts++;
		} else if (!strcmp(str(e, "ph"), "f")) {
			/* In the trainer's DATA_WAIT [0, 31), a nanosecond before it gives way to
			 * RUNQ. */
			CHECK(num(e, "tid") == 7 && near(num(e, "ts"), 30.999));
			CHECK_STR(str(e, "bp"), "e");
			CHECK_STR(str(e, "name"), "DATA_WAIT");
			ends++;
		}
	}
	CHECK(starts == 1 && ends == 1);
	json_object_put(o);
}

/* No thread and no episode: still a trace the viewers open. */
/* Synchronising GPU calls: a slice named by the API on the thread's GPU track, over the same
 * time as its GPU_WAIT slices; two calls back to back stay two. */
TEST(test_gpu_calls_track)
{
	static const char *const names[] = { "cudaStreamSynchronize", "cudaDeviceSynchronize" };
	struct trace_thread th[] = {
		{ .tid = 9, .tgid = 9, .comm = "python3", .role = ROLE_TRAINER,
		  .open_state = PP_NR_STATES },
	};
	struct trace_proc procs[] = { { .pid = 9, .comm = "python3", .root = 1 } };
	struct pp_episode eps[] = {
		ep(9, 9, PP_RUNNING, 0, 10),
		ep(9, 9, PP_GPU_WAIT, 10, 30),
		ep(9, 9, PP_GPU_WAIT, 30, 40),	/* the same call, split at a switch: one slice */
		ep(9, 9, PP_GPU_WAIT, 40, 45),	/* the next call, another API */
		ep(9, 9, PP_RUNNING, 45, 60),
	};
	struct trace_input in = { .threads = th, .nr_threads = 1, .procs = procs, .nr_procs = 1,
				  .eps = eps, .nr_eps = 5, .start_ns = T0, .end_ns = T0 + 60 * US,
				  .api_names = names, .nr_api_names = 2 };
	struct trace_stats st;
	json_object *o, *ev;
	int gpu = 0, named = 0;
	double gpu_us = 0, wait_us = 0;

	eps[1].api = eps[2].api = 1;
	eps[3].api = 2;
	o = write_parse(&in, &st);
	ev = o ? events(o) : NULL;
	for (size_t i = 0; ev && i < json_object_array_length(ev); i++) {
		json_object *e = json_object_array_get_idx(ev, i), *args, *name;

		if (!strcmp(str(e, "ph"), "X") && !strcmp(str(e, "cat"), "gpu")) {
			gpu++;
			gpu_us += num(e, "dur");
			CHECK(num(e, "tid") == (9 | TRACE_GPU_TID_BIT));
			CHECK_STR(str(e, "name"), gpu == 1 ? names[0] : names[1]);
		}
		if (!strcmp(str(e, "ph"), "X") && !strcmp(str(e, "name"), "GPU_WAIT"))
			wait_us += num(e, "dur");
		if (!strcmp(str(e, "ph"), "M") && num(e, "tid") == (9 | TRACE_GPU_TID_BIT) &&
		    json_object_object_get_ex(e, "args", &args) &&
		    json_object_object_get_ex(args, "name", &name))
			named += !strcmp(json_object_get_string(name), "GPU calls of 9");
	}
	CHECK_EQ_INT(gpu, 2);
	CHECK_EQ_INT((int)st.gpu_calls, 2);
	CHECK_EQ_INT(named, 1);
	CHECK(near(gpu_us, 35) && near(wait_us, 35));
	json_object_put(o);

	/* Without the names, no GPU track. */
	in.api_names = NULL;
	o = write_parse(&in, &st);
	CHECK_EQ_INT((int)st.gpu_calls, 0);
	json_object_put(o);
}

TEST(test_launches_are_instants)
{
	static const char *const names[] = { "cudaStreamSynchronize", "cudaLaunchKernel" };
	struct trace_thread th[] = {
		{ .tid = 9, .tgid = 9, .comm = "python3", .role = ROLE_TRAINER,
		  .open_state = PP_NR_STATES },
		{ .tid = 12, .tgid = 9, .comm = "launcher", .role = ROLE_HELPER,
		  .open_state = PP_NR_STATES },
	};
	struct trace_proc procs[] = { { .pid = 9, .comm = "python3", .root = 1 } };
	struct pp_episode eps[] = {
		ep(12, 9, PP_EP_LAUNCH, 7, 7),	/* out of order: sorted by thread and time */
		ep(9, 9, PP_RUNNING, 0, 10),
		ep(9, 9, PP_EP_LAUNCH, 4, 4),
		ep(9, 9, PP_EP_LAUNCH, 2, 2),
		ep(9, 9, PP_GPU_WAIT, 10, 30),
		ep(9, 9, PP_RUNNING, 30, 60),
		ep(12, 9, PP_RUNNING, 0, 60),
		ep(77, 77, PP_EP_LAUNCH, 5, 5),	/* a thread the report does not have */
		ep(9, 9, PP_EP_LAUNCH, 61, 61),	/* after the window */
	};
	struct trace_input in = { .threads = th, .nr_threads = 2, .procs = procs, .nr_procs = 1,
				  .eps = eps, .nr_eps = 9, .start_ns = T0, .end_ns = T0 + 60 * US,
				  .api_names = names, .nr_api_names = 2 };
	struct trace_stats st;
	json_object *o, *ev;
	int instants = 0, named9 = 0, named12 = 0, state_slices = 0;
	double last_ts = -1;

	eps[0].api = eps[2].api = eps[3].api = eps[7].api = eps[8].api = 2;
	eps[4].api = 1;
	o = write_parse(&in, &st);
	ev = o ? events(o) : NULL;
	for (size_t i = 0; ev && i < json_object_array_length(ev); i++) {
		json_object *e = json_object_array_get_idx(ev, i), *args, *name;

		if (!strcmp(str(e, "ph"), "i")) {
			instants++;
			CHECK_STR(str(e, "s"), "t");
			CHECK_STR(str(e, "name"), "cudaLaunchKernel");
			CHECK(!json_object_object_get_ex(e, "dur", NULL));
			/* Thread 9's two, in time order, then thread 12's. */
			if (instants <= 2) {
				CHECK(num(e, "tid") == (9 | TRACE_GPU_TID_BIT));
				CHECK(num(e, "ts") > last_ts);
				CHECK(near(num(e, "ts"), instants == 1 ? 2 : 4));
				last_ts = num(e, "ts");
			} else {
				CHECK(num(e, "tid") == (12 | TRACE_GPU_TID_BIT));
				CHECK(near(num(e, "ts"), 7));
			}
		}
		/* A launch is no state: no slice of its own on the thread's track. */
		if (!strcmp(str(e, "ph"), "X") && !strcmp(str(e, "cat"), "state"))
			state_slices++;
		if (!strcmp(str(e, "ph"), "M") && json_object_object_get_ex(e, "args", &args) &&
		    json_object_object_get_ex(args, "name", &name)) {
			named9 += num(e, "tid") == (9 | TRACE_GPU_TID_BIT) &&
				  !strcmp(json_object_get_string(name), "GPU calls of 9");
			named12 += num(e, "tid") == (12 | TRACE_GPU_TID_BIT) &&
				   !strcmp(json_object_get_string(name), "GPU calls of 12");
		}
	}
	CHECK_EQ_INT(instants, 3);
	CHECK_EQ_INT((int)st.launches, 3);
	CHECK_EQ_INT((int)st.gpu_calls, 1);
	/* One name a track, whether it holds calls and launches (9) or launches only (12). */
	CHECK_EQ_INT(named9, 1);
	CHECK_EQ_INT(named12, 1);
	CHECK_EQ_INT(state_slices, 4);
	CHECK_EQ_INT((int)st.slices, 4);
	json_object_put(o);
}

TEST(test_empty_trace)
{
	struct trace_input in = { .start_ns = T0, .end_ns = T0 };
	struct trace_stats st;
	json_object *o = write_parse(&in, &st);

	CHECK(o && events(o) && json_object_array_length(events(o)) == 1);
	json_object_put(o);
}

/* The steps' track: a slice from each boundary to the next, named by the step it is, or by the
 * steps it holds where the records between were lost. */
TEST(test_steps_track)
{
	__u64 ts[4] = { T0 + 100 * US, T0 + 200 * US, T0 + 300 * US, T0 + 600 * US };
	int numbers[4] = { 1, 2, 3, 6 };
	struct trace_input in = { .start_ns = T0, .end_ns = T0 + 1000 * US, .step_ts = ts,
				  .step_numbers = numbers, .nr_steps = 4, .step_tgid = 7 };
	const char *want[] = { "step 1", "step 2", "steps 3 to 5" };
	struct trace_stats st;
	json_object *o = write_parse(&in, &st);
	int found = 0;

	for (size_t i = 0; o && i < json_object_array_length(events(o)); i++) {
		json_object *e = json_object_array_get_idx(events(o), i);

		if (strcmp(str(e, "cat"), "step") || found >= 3)
			continue;
		CHECK_STR(str(e, "name"), want[found]);
		CHECK(near(num(e, "ts"), 100 + 100 * found));
		found++;
	}
	CHECK_EQ_INT(found, 3);
	json_object_put(o);
	/* Without numbers, 1, 2, 3. */
	in.step_numbers = NULL;
	want[2] = "step 3";
	o = write_parse(&in, &st);
	found = 0;
	for (size_t i = 0; o && i < json_object_array_length(events(o)); i++) {
		json_object *e = json_object_array_get_idx(events(o), i);

		if (!strcmp(str(e, "cat"), "step") && found < 3)
			CHECK_STR(str(e, "name"), want[found++]);
	}
	CHECK_EQ_INT(found, 3);
	json_object_put(o);
}

int main(void)
{
	RUN_TEST(test_steps_track);
	RUN_TEST(test_hostile_names);
	RUN_TEST(test_slices_never_overlap);
	RUN_TEST(test_flows_join_waker_and_wait);
	RUN_TEST(test_gpu_calls_track);
	RUN_TEST(test_launches_are_instants);
	RUN_TEST(test_empty_trace);
	return unit_summary();
}

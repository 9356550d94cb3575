// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `pipeprof record`: the report's tracing with every state episode kept (tracer_record.c),
 * written at the end as a Chrome trace-event JSON timeline (trace_json.c) that
 * ui.perfetto.dev and chrome://tracing open; the JSON report of the same window on request,
 * so the two can be read (and checked) side by side.
 */
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "classify.h"
#include "pipeprof.h"
#include "pipeprof.skel.h"
#include "proctree.h"
#include "record_cmd.h"
#include "gpu_apis.h"
#include "report.h"
#include "report_cmd.h"
#include "steps.h"
#include "trace_json.h"
#include "tracer.h"

static const char record_doc[] =
	"Record a timeline of a training job: every thread's stall-model states\n"
	"(RUNNING, RUNQ, GPU_WAIT, IO_WAIT, DATA_WAIT, THREAD_WAIT, COMM_WAIT, OTHER)\n"
	"as the report accounts them, one slice per episode on one track per thread\n"
	"(named TRAINER, WORKER or HELPER), with an arrow from the thread whose wakeup\n"
	"ended a wait (a DataLoader worker handing the trainer a batch) to that wait,\n"
	"and the trainer's steps on a track of their own. The file is Chrome\n"
	"trace-event JSON: open it in https://ui.perfetto.dev or chrome://tracing.\n"
	"Each thread's GPU calls are on a track beside it: a slice per synchronising\n"
	"call (its time is also the thread's GPU_WAIT), a mark per kernel launch.\v"
	"At most 200000 episodes (launches included) a second are recorded (a job\n"
	"switching faster loses the excess, counted as dropped_episodes in the trace's\n"
	"otherData), and at most 4 Mi episodes in all (160 MB of memory). A\n"
	"data-loading job switching a few thousand times a second makes a few MB for\n"
	"10 s.\n"
	"\n"
	"EXAMPLES:\n"
	"  sudo pipeprof record -p 4242 -d 10 -o trace.json\n"
	"  sudo pipeprof record -p 4242 -d 10 -o trace.json --report report.json\n"
	"  sudo pipeprof record -p 4242 -d 5 -o trace.json -j > report.json\n"
	"  sudo pipeprof record -p 4242 -d 10 -o trace.json --html report.html\n"
	"  sudo pipeprof record -d 10 -o trace.json -- /usr/bin/python3 train.py\n"
	"\n"
	"Exit status: 0 written, 1 tracing or writing failed, 2 bad arguments or no\n"
	"such process.";

enum { OPT_REPORT = 0x100, OPT_HTML };

static const struct argp_option record_options[] = {
	{ "pid", 'p', "PID", 0, "Process to trace (with its descendants)", 0 },
	{ "duration", 'd', "SECS", 0, "Trace this long (default: until Ctrl-C or exit)", 0 },
	{ "output", 'o', "FILE", 0, "Where the trace goes (Chrome trace-event JSON)", 0 },
	{ "report", OPT_REPORT, "FILE", 0, "Also write the JSON report (pipeprof.report/v1) of "
	  "the same window to FILE", 0 },
	{ "json", 'j', NULL, 0, "Also print the JSON report of the same window", 0 },
	{ "html", OPT_HTML, "FILE", 0, "Also write the report of the same window as one "
	  "self-contained HTML page to FILE", 0 },
	{ "tid", 't', "TID", 0, "The trainer thread (default: most GPU calls, else the main thread)", 0 },
	{ "verbose", 'v', NULL, 0, "Verbose: libbpf logs and every probe attached", 0 },
	{},
};

static error_t record_parse(int key, char *arg, struct argp_state *state)
{
	struct report_opts *o = state->input;
	int err = cli_parse_target_opt(key, arg, state, o);

	if (err != ARGP_ERR_UNKNOWN)
		return err;
	switch (key) {
	case 'o':
		/* Standard output is the report's (-j). */
		if (!*arg || !strcmp(arg, "-")) {
			argp_error(state, "-o needs a file name");
			return EINVAL;
		}
		o->record = arg;
		break;
	case OPT_REPORT:
		if (!*arg || !strcmp(arg, "-")) {
			argp_error(state, "--report needs a file name (-j prints the report)");
			return EINVAL;
		}
		o->record_report = arg;
		break;
	case OPT_HTML:
		if (!*arg || !strcmp(arg, "-")) {
			argp_error(state, "--html needs a file name (not -)");
			return EINVAL;
		}
		o->html = arg;
		break;
	case 'j':
		o->json = true;
		break;
	case 'v':
		o->verbose = true;
		break;
	case ARGP_KEY_ARG:
		/* The first operand starts the command to launch; argp stops parsing at "--". */
		o->argv = &state->argv[state->next - 1];
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
		if (o->pid && o->argv) {
			argp_error(state, "give either -p PID or -- COMMAND, not both");
			return EINVAL;
		}
		if (!o->pid && !o->argv) {
			argp_error(state, "nothing to trace: give -p PID or -- COMMAND");
			return EINVAL;
		}
		if (!o->record) {
			argp_error(state, "give -o FILE for the trace");
			return EINVAL;
		}
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int record_cmd_parse(int argc, char **argv, unsigned int flags, struct report_opts *o)
{
	const struct argp argp = {
		.options = record_options,
		.parser = record_parse,
		.args_doc = "-p PID -o FILE\n-o FILE -- COMMAND [ARGS...]",
		.doc = record_doc,
	};
	error_t err;

	/* No CPU samples: the timeline is the states'; the report's "where" is left out. */
	*o = (struct report_opts){ .threshold = 0.20, .sample_hz = 0, .folded_role = -1 };
	argp_err_exit_status = 2;
	err = argp_parse(&argp, argc, argv, flags, NULL, o);
	return err ? -(int)err : 0;
}

int record_cmd_main(int argc, char **argv)
{
	struct report_opts o;

	if (record_cmd_parse(argc, argv, 0, &o))
		return 2;
	return report_cmd_run(&o);
}

/* Each thread of the report, with the phase still open at the close as thread_close() gave
 * it to the report: no episode closed it. */
static struct trace_thread *trace_threads(struct tracer *t, const struct report *r)
{
	struct trace_thread *out = calloc(r->nr_threads ? r->nr_threads : 1, sizeof(*out));
	int fd = bpf_map__fd(t->skel->maps.threads);

	for (int i = 0; out && i < r->nr_threads; i++) {
		const struct thread_result *th = &r->threads[i];
		struct pp_thread bt;
		__u32 tid = th->tid;
		char proc_state = 0;
		__u64 woke;

		out[i] = (struct trace_thread){ .tid = th->tid, .tgid = th->tgid, .comm = th->comm,
						.role = th->role, .open_state = PP_NR_STATES };
		if (bpf_map_lookup_elem(fd, &tid, &bt))
			continue;
		if (bt.phase == PP_PHASE_UNKNOWN) {
			proc_state = tracer_close_state_of(t, tid);
			if (!proc_state)
				proc_state = proc_thread_state(PROCFS, bt.tgid, tid);
		}
		out[i].open_state = thread_open_state(&bt, proc_state);
		out[i].open_from = bt.phase_start_ns;
		out[i].open_to = bt.exit_ns && bt.exit_ns < r->end_ns ? bt.exit_ns : r->end_ns;
		if (thread_woken_unswitched(&bt, out[i].open_to, &out[i].named_state, &woke)) {
			out[i].named_from = bt.phase_start_ns;
			out[i].named_to = out[i].open_from = woke;
			out[i].open_state = PP_RUNNING;
		}
	}
	return out;
}

static int write_trace(const struct report_opts *o, struct tracer *t, const struct report *r)
{
	struct trace_proc *procs = calloc(r->nr_procs ? r->nr_procs : 1, sizeof(*procs));
	struct trace_thread *threads = trace_threads(t, r);
	struct trace_input in = {
		.threads = threads, .nr_threads = r->nr_threads, .procs = procs,
		.nr_procs = r->nr_procs, .eps = t->eps, .nr_eps = t->nr_eps,
		.start_ns = r->start_ns, .end_ns = r->end_ns, .cmdline = r->cmdline,
		.episodes_dropped = tracer_counter(t, PP_CNT_EPISODES_DROPPED) + t->eps_over_cap,
	};
	const char **api_names = calloc(gpu_api_count ? gpu_api_count : 1, sizeof(*api_names));
	const struct thread_result *trainer = NULL;
	struct trace_stats st;
	uint64_t *steps = NULL;
	int *step_numbers = NULL;
	FILE *f = NULL;
	int err = -ENOMEM;

	if (!procs || !threads || !api_names)
		goto cleanup;
	for (int i = 0; i < gpu_api_count; i++)
		api_names[i] = gpu_apis[i].name;
	in.api_names = api_names;
	in.nr_api_names = gpu_api_count;
	for (int i = 0; i < r->nr_procs; i++)
		procs[i] = (struct trace_proc){ .pid = r->procs[i].pid, .comm = r->procs[i].comm,
						.root = r->procs[i].root };
	if (r->analysis.trainer_index >= 0)
		trainer = &r->threads[r->analysis.trainer_index];
	if (trainer && r->step_points.nr) {
		int n = steps_boundary_times(&r->step_points, trainer->tid, &steps, &step_numbers);

		if (n < 0)
			goto cleanup;
		in.step_ts = (const __u64 *)steps;
		in.step_numbers = step_numbers;
		in.nr_steps = n;
		in.step_tid = trainer->tid;
		in.step_tgid = trainer->tgid;
	}
	f = fopen(o->record, "we");
	if (!f) {
		err = -errno;
		goto cleanup;
	}
	err = trace_json_write(f, &in, &st);
	if (fclose(f) && !err)
		err = -errno;
	if (!err)
		fprintf(stderr, "pipeprof: %zu slices of %d threads, %zu wakeup flows, %zu steps, "
			"%zu GPU calls, %zu kernel launches written to %s (%llu episodes dropped)\n",
			st.slices, r->nr_threads, st.flows, st.steps, st.gpu_calls, st.launches, o->record,
			(unsigned long long)in.episodes_dropped);
cleanup:
	free(api_names);
	free(steps);
	free(step_numbers);
	free(threads);
	free(procs);
	return err;
}

static int write_report(const char *path, const struct report *r)
{
	FILE *f = fopen(path, "we");
	int err;

	if (!f)
		return -errno;
	err = report_print_json(f, r);
	if (fclose(f) && !err)
		err = -errno;
	return err;
}

int record_finish(const struct report_opts *o, struct tracer *t, const struct report *r)
{
	int err;

	/* The last episodes: the programs have stopped accounting (tracer_close_window()). */
	tracer_record_poll(t);
	err = write_trace(o, t, r);
	if (err) {
		fprintf(stderr, "pipeprof: cannot write the trace %s: %s\n", o->record, strerror(-err));
		return err;
	}
	if (o->record_report) {
		err = write_report(o->record_report, r);
		if (err) {
			fprintf(stderr, "pipeprof: cannot write the report %s: %s\n", o->record_report,
				strerror(-err));
			return err;
		}
	}
	if (o->json) {
		err = report_print_json(stdout, r);
		if (err)
			fprintf(stderr, "pipeprof: cannot write the report: %s\n", strerror(-err));
	}
	return err;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <json-c/json.h>
#include "hist.h"
#include "report.h"
#include "ranks.h"
#include "sanitize.h"

void report_not_traced(struct report *r, const char *fmt, ...)
{
	va_list ap;

	if (r->nr_not_traced >= MAX_NOT_TRACED) {
		/* The last line says how many more there were rather than hiding them. */
		r->not_traced_dropped++;
		snprintf(r->not_traced[MAX_NOT_TRACED - 1], sizeof(r->not_traced[0]),
			 "%d more lines not shown", r->not_traced_dropped + 1);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(r->not_traced[r->nr_not_traced++], sizeof(r->not_traced[0]), fmt, ap);
	va_end(ap);
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * part / whole : 0;
}

/* A percentile read off log2 slots, bounded by the longest call: a slot spans 2x, so on its
 * own it can put the median of calls that all took 38 ms at 49 ms. */
double report_percentile_us(const __u64 *slots, uint64_t max_ns, double p)
{
	double v = hist_percentile(slots, PP_HIST_SLOTS, p);

	return max_ns && v > max_ns / 1e3 ? max_ns / 1e3 : v;
}

static double api_percentile_us(const struct api_result *api, double p)
{
	return report_percentile_us(api->slots, api->max_ns, p);
}

const struct thread_result *report_trainer(const struct report *r)
{
	int i = r->analysis.trainer_index;

	return i >= 0 && i < r->nr_threads ? &r->threads[i] : NULL;
}

const char *trainer_choice_text(enum trainer_choice how)
{
	switch (how) {
	case TRAINER_BY_GPU_CALLS:
		return "most GPU calls";
	case TRAINER_BY_OPTION:
		return "--tid";
	default:
		return "main thread";
	}
}

static void print_bar(FILE *out, double percent)
{
	int n = (int)(percent * 40 / 100 + 0.5);

	if (n > 0)
		fputs("  ", out);
	for (int i = 0; i < n; i++)
		fputc('#', out);
}

/* Pauses of the interpreter's garbage collector, per role: a pause is on-CPU time of the
 * thread that ran it, so the trainer's is also given as a share of its RUNNING. */
static void print_gc(FILE *out, const struct report *r)
{
	static const char *const who[NR_ROLES] = { "trainer", "workers", "helpers" };
	const struct analysis *a = &r->analysis;
	const struct role_result *tr = &a->roles[ROLE_TRAINER];

	fprintf(out, "  Python GC: trainer %llu collection%s, %.1f ms (%.1f%% of its on-CPU time)",
		(unsigned long long)tr->gc_count, tr->gc_count == 1 ? "" : "s", tr->gc_ns / 1e6,
		pct(tr->gc_ns, tr->ns[PP_RUNNING]));
	for (int k = ROLE_WORKER; k < NR_ROLES; k++)
		if (a->roles[k].threads)
			fprintf(out, "; %s %llu, %.1f ms", who[k],
				(unsigned long long)a->roles[k].gc_count, a->roles[k].gc_ns / 1e6);
	fprintf(out, "\n");
}

static void print_evidence(FILE *out, const struct report *r)
{
	const struct analysis *a = &r->analysis;
	const struct role_result *w = &a->worker_loops;
	const struct analysis_input *in = &r->input;
	double secs = (r->end_ns - r->start_ns) / 1e9;

	fprintf(out, "\nEvidence:\n");
	if (w->processes) {
		double net = role_network_fraction(w);
		char net_text[48] = "";

		if (net >= 0.0005)
			snprintf(net_text, sizeof(net_text), ", network %.1f%%", 100 * net);
		fprintf(out, "  DataLoader workers (%d process%s, %s): on-CPU %.1f%%, I/O %.1f%%%s, "
			"runnable %.1f%%, idle %.1f%% of their time\n",
			w->processes, w->processes == 1 ? "" : "es",
			a->worker_loops_are_main_threads ? "main threads" : "all threads",
			pct(w->ns[PP_RUNNING], w->wall_ns), pct(w->ns[PP_IO_WAIT], w->wall_ns), net_text,
			pct(w->ns[PP_RUNQ], w->wall_ns), 100 * role_idle_fraction(w));
	} else {
		fprintf(out, "  DataLoader workers: none seen (no child processes in the window)\n");
	}
	if (in->cpu_busy >= 0)
		fprintf(out, "  CPUs: %d, %.0f%% busy machine-wide, %.1f runnable tasks on average\n",
			in->ncpus, in->cpu_busy * 100, in->runnable_avg);
	if (r->gc_traced)
		print_gc(out, r);
	if (r->gpu_traced) {
		for (int i = 0; i < r->nr_apis; i++) {
			const struct api_result *api = &r->apis[i];

			if (!api->calls)
				continue;
			fprintf(out, "  %s: %llu calls (%.1f/s), mean %.1f us, p50 %.0f us, p99 %.0f us, "
				"max %.0f us\n", api->name, (unsigned long long)api->calls,
				secs > 0 ? api->calls / secs : 0, api->total_ns / 1e3 / api->calls,
				api_percentile_us(api, 50), api_percentile_us(api, 99), api->max_ns / 1e3);
		}
	}
	if (r->io.count) {
		fprintf(out, "  block I/O issued by the job: %llu requests, mean %.0f us, p50 %.0f us, "
			"p99 %.0f us\n", (unsigned long long)r->io.count, r->io.total_ns / 1e3 / r->io.count,
			hist_percentile(r->io.slots, PP_HIST_SLOTS, 50),
			hist_percentile(r->io.slots, PP_HIST_SLOTS, 99));
		if (a->verdict == VERDICT_IO)
			hist_print_log2(out, r->io.slots, PP_HIST_SLOTS, "usecs");
	}
}

const struct thread_result *report_waker_thread(const struct report *r, const struct waited_on *w)
{
	return w->thread_index >= 0 && w->thread_index < r->nr_threads ? &r->threads[w->thread_index] : NULL;
}

const char *report_waker_role(const struct report *r, const struct waited_on *w)
{
	const struct thread_result *t = report_waker_thread(r, w);

	if (w->ctx != PP_WAKE_TASK)
		return "INTERRUPT";
	return t ? role_name(t->role) : "UNTRACKED";
}

/* The GIL's waits are THREAD_WAIT although a timer ended most of them: they are under the
 * timer in the table above. */
static void print_gil_waits(FILE *out, const struct thread_result *tr)
{
	if (!tr || !tr->gil_ns)
		return;
	fprintf(out, "  (%.3f s of the trainer's THREAD_WAIT was waiting for Python's GIL: timed waits "
		"at the calls where it was seen taking the GIL over from another thread, most of them "
		"ended by a timer and counted under it above)\n", tr->gil_ns / 1e9);
}

static void print_waited_on(FILE *out, const struct report *r)
{
	const struct analysis *a = &r->analysis;
	char who[64], shown_who[SAN_TEXT_SIZE(sizeof(who))];

	if (!a->nr_waited_on)
		return;
	fprintf(out, "\nWaited on (what ended the trainer's waits, share of its %.3f s woken off-CPU):\n",
		a->waited_total_ns / 1e9);
	for (int i = 0; i < a->nr_waited_on && i < 5; i++) {
		const struct waited_on *w = &a->waited_on[i];
		const struct thread_result *t = report_waker_thread(r, w);
		int shown = 0;

		format_waker_name(who, sizeof(who), w);
		fprintf(out, "  %5.1f%%  %s", pct(w->ns, a->waited_total_ns),
			san_text(shown_who, sizeof(shown_who), who, sizeof(who)));
		if (w->ctx == PP_WAKE_TASK)
			fprintf(out, ", %s pid %u", report_waker_role(r, w), w->tgid);
		fprintf(out, ", %llu wakeups:", (unsigned long long)w->wakeups);
		for (int s = 0; s < PP_NR_STATES; s++)
			if (w->cause_ns[s])
				fprintf(out, "%s %s %.3f s", shown++ ? "," : "", state_name(s), w->cause_ns[s] / 1e9);
		fputc('\n', out);
		if (t && t->wall_ns) {
			fprintf(out, "          its own time:");
			shown = 0;
			for (int s = 0; s < PP_NR_STATES; s++)
				if (pct(t->ns[s], t->wall_ns) >= 0.5)
					fprintf(out, "%s %s %.0f%%", shown++ ? "," : "", state_name(s),
						pct(t->ns[s], t->wall_ns));
			fputc('\n', out);
		}
	}
	print_gil_waits(out, report_trainer(r));
}

static double predicted(const struct analysis *a, const struct recommendation *rec)
{
	return rec->prediction >= 0 && rec->prediction < a->model.nr_predictions ?
	       a->model.predictions[rec->prediction].speedup : 0;
}

/* Each with the facts it rests on, and the bound in brackets. */
static void print_recommendations(FILE *out, const struct analysis *a, char *shown, size_t size)
{
	if (!a->nr_recs)
		return;
	fprintf(out, "\nRecommendations:\n");
	for (int i = 0; i < a->nr_recs; i++) {
		const struct recommendation *rec = &a->recs[i];

		fprintf(out, "  %d. %s", i + 1, san_text(shown, size, rec->text, sizeof(rec->text)));
		/* A prediction is in the advice's own words; the bound is the stall's. */
		if (rec->speedup_bound > 1.0)
			fprintf(out, " [at most %.2fx]", rec->speedup_bound);
		fputc('\n', out);
		if (rec->evidence[0])
			fprintf(out, "     measured: %s\n", san_text(shown, size, rec->evidence,
								sizeof(rec->evidence)));
	}
}

/*
 * Every string here that holds a name, a command line or a path of the target's goes through
 * san_text(): its owner chose those bytes, and a terminal would act on their escapes.
 */
void report_print_text(FILE *out, const struct report *r)
{
	const struct analysis *a = &r->analysis;
	const struct thread_result *tr = report_trainer(r);
	double secs = (r->end_ns - r->start_ns) / 1e9;
	char label[64], shown[SAN_TEXT_SIZE(sizeof(a->recs[0].text))];

	/* shown holds each string escaped whole: a recommendation's text is the largest. */
	_Static_assert(sizeof(a->verdict_line) <= sizeof(a->recs[0].text) &&
		       sizeof(r->cmdline) <= sizeof(a->recs[0].text) &&
		       sizeof(a->recs[0].evidence) <= sizeof(a->recs[0].text) &&
		       sizeof(r->not_traced[0]) <= sizeof(a->recs[0].text), "shown is too small");

	fprintf(out, "pipeprof: PID %d (%s) traced %.2f s: %d process%s, %d thread%s\n", r->root_pid,
		r->cmdline[0] ? san_text(shown, sizeof(shown), r->cmdline, sizeof(r->cmdline)) : "?",
		secs, r->nr_procs, r->nr_procs == 1 ? "" : "es",
		r->job ? r->job_threads : r->nr_threads,
		(r->job ? r->job_threads : r->nr_threads) == 1 ? "" : "s");
	if (r->target_exited)
		fprintf(out, "note: the target exited %.2f s into the trace; the report covers what was "
			"seen until then\n", (r->target_exit_ns - r->start_ns) / 1e9);
	if (r->partial)
		fprintf(out, "note: the figures are partial: %s (see Not traced / lost)\n",
			r->partial_why);

	fputc('\n', out);
	ranks_print_text(out, r->job);
	fprintf(out, "Verdict: %s\n",
		san_text(shown, sizeof(shown), a->verdict_line, sizeof(a->verdict_line)));

	if (tr) {
		fprintf(out, "\nTrainer thread %u (%s, chosen by %s), %.2f s:\n", tr->tid,
			san_text(shown, sizeof(shown), tr->comm, sizeof(tr->comm)),
			trainer_choice_text(a->trainer_choice), tr->wall_ns / 1e9);
		for (int s = 0; s < PP_NR_STATES; s++) {
			double p = pct(tr->ns[s], tr->wall_ns);

			fprintf(out, "  %-12s %9.3f s %6.1f%%", state_name(s), tr->ns[s] / 1e9, p);
			print_bar(out, p);
			fputc('\n', out);
		}
	}

	/* States as rows, roles as columns: state names stay whole within 80 columns. */
	fprintf(out, "\nPer role (share of each role's summed thread time):\n  %-12s", "");
	for (int role = 0; role < NR_ROLES; role++) {
		const struct role_result *rr = &a->roles[role];

		if (!rr->threads)
			continue;
		if (role == ROLE_WORKER)
			snprintf(label, sizeof(label), "%s (%dp, %dt)", role_name(role), rr->processes,
				 rr->threads);
		else
			snprintf(label, sizeof(label), "%s (%dt)", role_name(role), rr->threads);
		fprintf(out, " %17s", label);
	}
	fputc('\n', out);
	for (int s = 0; s < PP_NR_STATES; s++) {
		fprintf(out, "  %-12s", state_name(s));
		for (int role = 0; role < NR_ROLES; role++)
			if (a->roles[role].threads)
				fprintf(out, " %16.1f%%", pct(a->roles[role].ns[s], a->roles[role].wall_ns));
		fputc('\n', out);
	}

	print_waited_on(out, r);
	print_evidence(out, r);
	nccl_print_text(out, r);
	steps_print_text(out, r);
	gpumem_print_text(out, r);
	memory_print_text(out, r);
	where_print_text(out, r);

	print_recommendations(out, a, shown, sizeof(shown));

	fprintf(out, "\nNot traced / lost:\n");
	if (!r->nr_not_traced)
		fprintf(out, "  nothing: every probe attached, no events lost\n");
	for (int i = 0; i < r->nr_not_traced; i++)
		fprintf(out, "  - %s\n", san_text(shown, sizeof(shown), r->not_traced[i],
						  sizeof(r->not_traced[i])));
}

static json_object *states_json(const __u64 *ns, uint64_t wall)
{
	json_object *o = json_object_new_object();

	for (int s = 0; s < PP_NR_STATES; s++) {
		json_object *st = json_object_new_object();

		json_object_object_add(st, "seconds", json_object_new_double(ns[s] / 1e9));
		json_object_object_add(st, "fraction", json_object_new_double(wall ? (double)ns[s] / wall : 0));
		json_object_object_add(o, state_name(s), st);
	}
	return o;
}

json_object *report_hist_json(const __u64 *slots)
{
	json_object *arr = json_object_new_array();
	int last = -1;

	for (int i = 0; i < PP_HIST_SLOTS; i++)
		if (slots[i])
			last = i;
	for (int i = 0; i <= last; i++) {
		json_object *slot = json_object_new_object();

		json_object_object_add(slot, "low", json_object_new_int64(hist_slot_low(i)));
		json_object_object_add(slot, "high", json_object_new_int64(hist_slot_high(i)));
		json_object_object_add(slot, "count", json_object_new_int64(slots[i]));
		json_object_array_add(arr, slot);
	}
	return arr;
}

static json_object *thread_json(const struct thread_result *t)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "tid", json_object_new_int(t->tid));
	json_object_object_add(o, "pid", json_object_new_int(t->tgid));
	json_object_object_add(o, "comm", json_object_new_string(t->comm));
	json_object_object_add(o, "role", json_object_new_string(role_name(t->role)));
	json_object_object_add(o, "exited", json_object_new_boolean(t->exited));
	json_object_object_add(o, "wall_s", json_object_new_double(t->wall_ns / 1e9));
	json_object_object_add(o, "gpu_sync_calls", json_object_new_int64(t->gpu_calls));
	json_object_object_add(o, "states", states_json(t->ns, t->wall_ns));
	/* Of its THREAD_WAIT: waiting for the GIL (print_gil_waits). */
	json_object_object_add(o, "thread_wait_gil_s", json_object_new_double(t->gil_ns / 1e9));
	return o;
}

static json_object *waited_on_json(const struct report *r)
{
	const struct analysis *a = &r->analysis;
	json_object *arr = json_object_new_array();

	for (int i = 0; i < a->nr_waited_on; i++) {
		const struct waited_on *w = &a->waited_on[i];
		const struct thread_result *t = report_waker_thread(r, w);
		json_object *o = json_object_new_object(), *causes = json_object_new_object();
		char who[64];

		json_object_object_add(o, "tid", w->ctx == PP_WAKE_TASK ? json_object_new_int(w->tid) : NULL);
		json_object_object_add(o, "pid", w->ctx == PP_WAKE_TASK ? json_object_new_int(w->tgid) : NULL);
		if (w->ctx == PP_WAKE_TASK)
			snprintf(who, sizeof(who), "%.*s", (int)sizeof(w->comm), w->comm);
		else
			snprintf(who, sizeof(who), "[%s]", wake_ctx_name(w->ctx));
		json_object_object_add(o, "comm", json_object_new_string(who));
		json_object_object_add(o, "role", json_object_new_string(report_waker_role(r, w)));
		json_object_object_add(o, "seconds", json_object_new_double(w->ns / 1e9));
		json_object_object_add(o, "share", json_object_new_double(
			a->waited_total_ns ? (double)w->ns / a->waited_total_ns : 0));
		json_object_object_add(o, "wakeups", json_object_new_int64(w->wakeups));
		for (int s = 0; s < PP_NR_STATES; s++)
			if (w->cause_ns[s])
				json_object_object_add(causes, state_name(s), json_object_new_double(w->cause_ns[s] / 1e9));
		json_object_object_add(o, "causes", causes);
		json_object_object_add(o, "states", t ? states_json(t->ns, t->wall_ns) : NULL);
		json_object_array_add(arr, o);
	}
	return arr;
}

static json_object *gc_json(const struct report *r)
{
	const struct analysis *a = &r->analysis;
	json_object *o = json_object_new_object(), *roles = json_object_new_object();

	json_object_object_add(o, "traced", json_object_new_boolean(r->gc_traced));
	/* The daemon does not probe interpreters: say so rather than give an empty reason. */
	json_object_object_add(o, "why_not", r->gc_traced ? NULL :
			       json_object_new_string(r->gc_why_not[0] ? r->gc_why_not :
						      "not probed by this command"));
	for (int k = 0; k < NR_ROLES; k++) {
		json_object *ro = json_object_new_object();

		json_object_object_add(ro, "collections", json_object_new_int64(a->roles[k].gc_count));
		json_object_object_add(ro, "seconds", json_object_new_double(a->roles[k].gc_ns / 1e9));
		json_object_object_add(ro, "share_of_running", json_object_new_double(
			pct(a->roles[k].gc_ns, a->roles[k].ns[PP_RUNNING]) / 100));
		json_object_object_add(roles, role_name(k), ro);
	}
	json_object_object_add(o, "roles", r->gc_traced ? roles : NULL);
	if (!r->gc_traced)
		json_object_put(roles);
	return o;
}

json_object *lib_result_json(const struct lib_result *lib)
{
	json_object *l = json_object_new_object(), *probes = json_object_new_array();
	json_object *missing = json_object_new_array();

	json_object_object_add(l, "pid", json_object_new_int(lib->pid));
	json_object_object_add(l, "kind", json_object_new_string(lib_kind_name(lib->kind)));
	json_object_object_add(l, "path", json_object_new_string(lib->path));
	json_object_object_add(l, "deleted", json_object_new_boolean(lib->deleted));
	for (int k = 0; k < lib->nr_probes; k++) {
		const struct probe_result *p = &lib->probes[k];
		json_object *po = json_object_new_object();

		json_object_object_add(po, "name", json_object_new_string(p->api));
		json_object_object_add(po, "value", json_object_new_int64(p->value));
		json_object_object_add(po, "offset", json_object_new_int64(p->offset));
		json_object_object_add(po, "skipped_endbr64", json_object_new_boolean(p->skipped_endbr64));
		json_object_object_add(po, "attached", json_object_new_boolean(p->attached));
		if (!p->attached)
			json_object_object_add(po, "error", json_object_new_string(strerror(-p->err)));
		json_object_array_add(probes, po);
	}
	json_object_object_add(l, "probes", probes);
	for (int k = 0; k < lib->nr_missing; k++)
		json_object_array_add(missing, json_object_new_string(lib->missing[k]));
	json_object_object_add(l, "missing", missing);
	return l;
}

static json_object *gpu_json(const struct report *r)
{
	json_object *o = json_object_new_object(), *libs = json_object_new_array();
	json_object *apis = json_object_new_array();

	json_object_object_add(o, "traced", json_object_new_boolean(r->gpu_traced));
	json_object_object_add(o, "copies", gpu_copies_json(r));
	if (!r->gpu_traced)
		json_object_object_add(o, "why_not", json_object_new_string(r->gpu_why_not));
	for (int i = 0; i < r->nr_libs; i++)
		json_object_array_add(libs, lib_result_json(&r->libs[i]));
	json_object_object_add(o, "libraries", libs);
	for (int i = 0; i < r->nr_apis; i++) {
		const struct api_result *api = &r->apis[i];
		json_object *a;

		if (!api->calls)
			continue;
		a = json_object_new_object();
		json_object_object_add(a, "name", json_object_new_string(api->name));
		json_object_object_add(a, "calls", json_object_new_int64(api->calls));
		json_object_object_add(a, "total_ns", json_object_new_int64(api->total_ns));
		json_object_object_add(a, "max_ns", json_object_new_int64(api->max_ns));
		json_object_object_add(a, "p50_us", json_object_new_double(api_percentile_us(api, 50)));
		json_object_object_add(a, "p99_us", json_object_new_double(api_percentile_us(api, 99)));
		json_object_object_add(a, "hist_usecs", report_hist_json(api->slots));
		json_object_array_add(apis, a);
	}
	json_object_object_add(o, "apis", apis);
	return o;
}

/* A limit or bound the model did not set (0) is null, never 0: "no limit", not "no speed". */
static json_object *positive(double v)
{
	return v > 0 ? json_object_new_double(v) : NULL;
}

/* The pipeline model: its inputs, what it derives, and every prediction (predict.h); rates
 * are in units of the window's own steps/s. */
static json_object *model_json(const struct pipeline_model *m)
{
	const struct pipeline_inputs *in = &m->in;
	json_object *o = json_object_new_object(), *i = json_object_new_object();
	json_object *d = json_object_new_object(), *arr = json_object_new_array();

	json_object_object_add(i, "window_s", json_object_new_double(in->window_s));
	json_object_object_add(i, "ncpus", json_object_new_int(in->ncpus));
	json_object_object_add(i, "busy_fraction", in->cpu_busy >= 0 ?
			       json_object_new_double(in->cpu_busy) : NULL);
	json_object_object_add(i, "trainer_cpus", json_object_new_double(in->trainer_cpus));
	json_object_object_add(i, "helper_cpus", json_object_new_double(in->helper_cpus));
	json_object_object_add(i, "worker_cpus", json_object_new_double(in->worker_cpus));
	json_object_object_add(i, "trainer_own_share", json_object_new_double(in->trainer_own));
	json_object_object_add(i, "trainer_running_share", json_object_new_double(in->trainer_running));
	json_object_object_add(i, "workers", json_object_new_int(in->workers));
	json_object_object_add(i, "worker_loop_cpus", json_object_new_double(in->worker_loop_cpus));
	json_object_object_add(i, "worker_loop_io", json_object_new_double(in->worker_loop_io));
	json_object_object_add(i, "compute_threads", json_object_new_int(in->compute_threads));
	json_object_object_add(i, "gpu_library_mapped", json_object_new_boolean(in->gpu_mapped));
	json_object_object_add(o, "inputs", i);

	json_object_object_add(d, "idle_cpus", m->cpu_known ? json_object_new_double(m->idle_cpus) : NULL);
	json_object_object_add(d, "job_cpus", json_object_new_double(m->job_cpus));
	json_object_object_add(d, "other_cpus", m->cpu_known ? json_object_new_double(m->other_cpus) : NULL);
	json_object_object_add(d, "available_cpus", m->cpu_known ?
			       json_object_new_double(m->avail_cpus) : NULL);
	json_object_object_add(d, "limit_trainer", positive(m->limit_trainer));
	json_object_object_add(d, "limit_workers", positive(m->limit_workers));
	json_object_object_add(d, "limit_cpus", positive(m->limit_cpus));
	json_object_object_add(d, "rate", positive(m->rate));
	json_object_object_add(d, "rate_limit", json_object_new_string(predict_limit_name(m->rate_limit)));
	json_object_object_add(d, "fits", json_object_new_boolean(m->fits));
	json_object_object_add(o, "derived", d);

	for (int k = 0; k < m->nr_predictions; k++) {
		const struct prediction *p = &m->predictions[k];
		json_object *po = json_object_new_object();

		json_object_object_add(po, "id", json_object_new_string(p->id));
		json_object_object_add(po, "knob", json_object_new_string(p->knob));
		json_object_object_add(po, "from", json_object_new_int(p->from));
		json_object_object_add(po, "to", json_object_new_int(p->to));
		json_object_object_add(po, "speedup", positive(p->speedup));
		json_object_object_add(po, "bound", positive(p->bound));
		json_object_object_add(po, "limit", json_object_new_string(predict_limit_name(p->limit)));
		json_object_object_add(po, "withheld", p->withheld[0] ?
				       json_object_new_string(p->withheld) : NULL);
		json_object_array_add(arr, po);
	}
	json_object_object_add(o, "predictions", arr);
	return o;
}

static const char *const counter_names[PP_NR_COUNTERS] = {
	[PP_CNT_SCHED_EVENTS] = "sched_switch_events",
	[PP_CNT_THREADS_FULL] = "threads_lost_map_full",
	[PP_CNT_PROCS_FULL] = "processes_lost_map_full",
	[PP_CNT_RQ_FULL] = "io_requests_lost_map_full",
	[PP_CNT_UPROBE_HITS] = "gpu_uprobe_hits",
	[PP_CNT_URETPROBE_ORPHANS] = "gpu_returns_without_entry",
	[PP_CNT_FORKS] = "processes_forked",
	[PP_CNT_PROC_EXITS] = "processes_exited",
	[PP_CNT_SELFTEST_HITS] = "selftest_uprobe_hits",
	[PP_CNT_GPU_DEPTH_OVERFLOW] = "gpu_nesting_overflow",
	[PP_CNT_HIST_FULL] = "hist_samples_lost_map_full",
	[PP_CNT_WAKERS_FULL] = "waits_lost_wakers_map_full",
	[PP_CNT_PCOUNT_OK] = "preempt_count_checks_ok",
	[PP_CNT_PCOUNT_BAD] = "preempt_count_checks_bad",
	[PP_CNT_UNRETURNED_CALLS] = "probed_calls_never_returned",
	[PP_CNT_WAITS_UNWOKEN] = "waits_ended_without_wakeup",
	[PP_CNT_SWITCH_IN_MISSED] = "switch_ins_missed",
	[PP_CNT_NOTES_LOST] = "library_notes_lost",
	[PP_CNT_NOTES] = "library_notes",
	[PP_CNT_SAMPLES] = "cpu_samples",
	[PP_CNT_SAMPLES_LOST] = "cpu_samples_lost",
	[PP_CNT_PY_THREAD_UNFOUND] = "samples_without_thread_state",
	[PP_CNT_WAIT_STACKS] = "wait_stacks",
	[PP_CNT_WAIT_STACKS_LOST] = "wait_stacks_lost",
	[PP_CNT_STEP_RECORDS_LOST] = "step_records_lost",
	[PP_CNT_SWITCH_IN_UNPLACED] = "switch_ins_unplaced",
	[PP_CNT_PINNED_FULL] = "pinned_regions_lost_map_full",
	[PP_CNT_THREAD_GPU_FULL] = "gpu_counts_lost_map_full",
	[PP_CNT_DEV_ALLOCS_FULL] = "device_allocations_lost_map_full",
	[PP_CNT_EPISODES] = "episodes_recorded",
	[PP_CNT_EPISODES_DROPPED] = "episodes_dropped",
	[PP_CNT_LAUNCH_HITS] = "launch_probe_hits",
	[PP_CNT_PY_FRAMES] = "python_frames_walked",
	[PP_CNT_PY_FRAMES_WINDOWED] = "python_frames_from_window",
};

int report_print_json(FILE *out, const struct report *r)
{
	const struct analysis *a = &r->analysis;
	const struct thread_result *tr = report_trainer(r);
	json_object *root = json_object_new_object(), *o, *arr;
	const char *text;
	int err = 0;

	if (!root)
		return -ENOMEM;
	json_object_object_add(root, "schema", json_object_new_string(REPORT_SCHEMA));
	json_object_object_add(root, "pid", json_object_new_int(r->root_pid));
	json_object_object_add(root, "command", json_object_new_string(r->cmdline));
	json_object_object_add(root, "launched", json_object_new_boolean(r->launched));

	o = json_object_new_object();
	json_object_object_add(o, "start_ns", json_object_new_int64(r->start_ns));
	json_object_object_add(o, "end_ns", json_object_new_int64(r->end_ns));
	json_object_object_add(o, "seconds", json_object_new_double((r->end_ns - r->start_ns) / 1e9));
	json_object_object_add(o, "clock", json_object_new_string("CLOCK_MONOTONIC"));
	json_object_object_add(root, "window", o);
	json_object_object_add(root, "target_exited", json_object_new_boolean(r->target_exited));
	if (r->target_exited)
		json_object_object_add(root, "target_exit_ns", json_object_new_int64(r->target_exit_ns));
	json_object_object_add(root, "interrupted", json_object_new_boolean(r->interrupted));
	json_object_object_add(root, "partial", json_object_new_boolean(r->partial));
	json_object_object_add(root, "partial_why", r->partial ?
			       json_object_new_string(r->partial_why) : NULL);

	o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(verdict_name(a->verdict)));
	json_object_object_add(o, "id", json_object_new_string(verdict_id(a->verdict)));
	json_object_object_add(o, "state", json_object_new_string(state_name(a->verdict_state)));
	json_object_object_add(o, "fraction", json_object_new_double(a->verdict_fraction));
	json_object_object_add(o, "speedup_bound", a->speedup_bound > 1.0 ?
			       json_object_new_double(a->speedup_bound) : NULL);
	json_object_object_add(o, "threshold", json_object_new_double(r->input.threshold));
	json_object_object_add(o, "near_threshold", json_object_new_boolean(a->near_threshold));
	json_object_object_add(o, "line", json_object_new_string(a->verdict_line));
	arr = json_object_new_array();
	for (int i = 0; i < a->nr_stalls; i++) {
		json_object *st = json_object_new_object();

		json_object_object_add(st, "state", json_object_new_string(state_name(a->stalls[i].state)));
		json_object_object_add(st, "fraction", json_object_new_double(a->stalls[i].fraction));
		json_object_object_add(st, "near_threshold", json_object_new_boolean(a->stalls[i].near_threshold));
		json_object_array_add(arr, st);
	}
	json_object_object_add(o, "stalls", arr);
	if (a->verdict_waited_on >= 0) {
		const struct waited_on *w = &a->waited_on[a->verdict_waited_on];
		json_object *wo = json_object_new_object();

		json_object_object_add(wo, "tid", json_object_new_int(w->tid));
		json_object_object_add(wo, "pid", json_object_new_int(w->tgid));
		json_object_object_add(wo, "comm", json_object_new_string(w->comm));
		json_object_object_add(o, "waited_on", wo);
	} else {
		json_object_object_add(o, "waited_on", NULL);
	}
	json_object_object_add(root, "verdict", o);
	json_object_object_add(root, "job", ranks_json(r->job));

	if (tr) {
		o = thread_json(tr);
		json_object_object_add(o, "chosen_by",
				       json_object_new_string(trainer_choice_text(a->trainer_choice)));
		json_object_object_add(root, "trainer", o);
	} else {
		json_object_object_add(root, "trainer", NULL);
	}

	o = json_object_new_object();
	for (int role = 0; role < NR_ROLES; role++) {
		const struct role_result *rr = &a->roles[role];
		json_object *ro = json_object_new_object();

		json_object_object_add(ro, "threads", json_object_new_int(rr->threads));
		json_object_object_add(ro, "processes", json_object_new_int(rr->processes));
		json_object_object_add(ro, "thread_seconds", json_object_new_double(rr->wall_ns / 1e9));
		json_object_object_add(ro, "states", states_json(rr->ns, rr->wall_ns));
		json_object_object_add(o, role_name(role), ro);
	}
	json_object_object_add(root, "roles", o);

	o = json_object_new_object();
	{
		json_object *wl = json_object_new_object();

		json_object_object_add(wl, "processes", json_object_new_int(a->worker_loops.processes));
		json_object_object_add(wl, "main_threads_only",
				       json_object_new_boolean(a->worker_loops_are_main_threads));
		json_object_object_add(wl, "states", states_json(a->worker_loops.ns, a->worker_loops.wall_ns));
		json_object_object_add(o, "worker_loops", wl);
	}
	json_object_object_add(root, "evidence", o);

	json_object_object_add(root, "waited_on", waited_on_json(r));

	arr = json_object_new_array();
	for (int i = 0; i < r->nr_threads; i++)
		json_object_array_add(arr, thread_json(&r->threads[i]));
	json_object_object_add(root, "threads", arr);

	arr = json_object_new_array();
	for (int i = 0; i < r->nr_procs; i++) {
		const struct proc_result *p = &r->procs[i];

		o = json_object_new_object();
		json_object_object_add(o, "pid", json_object_new_int(p->pid));
		json_object_object_add(o, "parent", json_object_new_int(p->parent));
		json_object_object_add(o, "root", json_object_new_boolean(p->root));
		json_object_object_add(o, "comm", json_object_new_string(p->comm));
		json_object_object_add(o, "forked_while_tracing", json_object_new_boolean(p->forked_while_tracing));
		json_object_object_add(o, "exited", json_object_new_boolean(p->exited));
		json_object_object_add(o, "fork_ns", p->fork_ns ? json_object_new_int64(p->fork_ns) : NULL);
		json_object_object_add(o, "exit_ns", p->exit_ns ? json_object_new_int64(p->exit_ns) : NULL);
		json_object_array_add(arr, o);
	}
	json_object_object_add(root, "processes", arr);

	json_object_object_add(root, "gpu", gpu_json(r));
	/* Always there: traced false and no libraries where no libnccl is mapped. */
	json_object_object_add(root, "nccl", nccl_json(r));
	json_object_object_add(root, "python_gc", gc_json(r));
	/* Always there, so every report has the same keys: sample_hz 0 when not sampled. */
	json_object_object_add(root, "where", where_json(r));
	/* Always there too: count 0 and source null where no step was found or looked for (the
	 * daemon's count null where it had no probe to count with). */
	json_object_object_add(root, "steps", steps_json(r));
	/* Always there too: readings 0 where memory was not read (the daemon). */
	json_object_object_add(root, "memory", memory_json(r));
	/* Always there too: traced false where allocations were not probed. */
	json_object_object_add(root, "gpu_memory", gpumem_json(r));

	o = json_object_new_object();
	json_object_object_add(o, "requests", json_object_new_int64(r->io.count));
	json_object_object_add(o, "total_ns", json_object_new_int64(r->io.total_ns));
	json_object_object_add(o, "hist_usecs", report_hist_json(r->io.slots));
	json_object_object_add(root, "io", o);

	o = json_object_new_object();
	json_object_object_add(o, "ncpus", json_object_new_int(r->input.ncpus));
	/* null, not a negative number, when /proc could not tell. */
	json_object_object_add(o, "busy_fraction", r->input.cpu_busy >= 0 ?
			       json_object_new_double(r->input.cpu_busy) : NULL);
	json_object_object_add(o, "runnable_avg", r->input.runnable_avg >= 0 ?
			       json_object_new_double(r->input.runnable_avg) : NULL);
	json_object_object_add(root, "cpu", o);

	json_object_object_add(root, "model", model_json(&a->model));
	arr = json_object_new_array();
	for (int i = 0; i < a->nr_recs; i++) {
		const struct recommendation *rec = &a->recs[i];
		double p = predicted(a, rec);

		o = json_object_new_object();
		json_object_object_add(o, "id", json_object_new_string(rec->id));
		json_object_object_add(o, "text", json_object_new_string(rec->text));
		json_object_object_add(o, "evidence", json_object_new_string(rec->evidence));
		/* Context lines (the compute share) remove no stall: no bound. */
		json_object_object_add(o, "speedup_bound", rec->speedup_bound > 1.0 ?
				       json_object_new_double(rec->speedup_bound) : NULL);
		json_object_object_add(o, "predicted_speedup", p > 0 ? json_object_new_double(p) : NULL);
		json_object_object_add(o, "prediction", rec->prediction >= 0 ?
				       json_object_new_int(rec->prediction) : NULL);
		json_object_array_add(arr, o);
	}
	json_object_object_add(root, "recommendations", arr);

	arr = json_object_new_array();
	for (int i = 0; i < r->nr_not_traced; i++)
		json_object_array_add(arr, json_object_new_string(r->not_traced[i]));
	json_object_object_add(root, "not_traced", arr);

	o = json_object_new_object();
	for (int c = 0; c < PP_NR_COUNTERS; c++)
		if (counter_names[c])	/* a counter added without a name must not crash the report */
			json_object_object_add(o, counter_names[c], json_object_new_int64(r->counters[c]));
	json_object_object_add(o, "threads_not_traced", json_object_new_int(r->threads_missed));
	json_object_object_add(o, "processes_not_traced", json_object_new_int(r->procs_missed));
	json_object_object_add(o, "probe_attach_failures", json_object_new_int(r->probe_attach_failures));
	json_object_object_add(o, "launch_probes_in_bursts", json_object_new_boolean(r->launches_in_bursts));
	json_object_object_add(o, "launch_probe_pauses", json_object_new_int(r->launch_pauses));
	json_object_object_add(o, "launch_probes_off_s", json_object_new_double(r->launch_off_s));
	json_object_object_add(o, "launch_probe_reattach_failures",
			       json_object_new_int(r->launch_reattach_failures));
	json_object_object_add(o, "bpf_recursion_misses", json_object_new_int64(r->bpf_recursion_misses));
	json_object_object_add(o, "bpf_run_ns", json_object_new_int64(r->bpf_run_ns));
	json_object_object_add(o, "bpf_run_count", json_object_new_int64(r->bpf_run_count));
	json_object_object_add(o, "maps_full_scans", json_object_new_int(r->maps_full_scans));
	json_object_object_add(o, "maps_reads_notes", json_object_new_int(r->maps_reads_notes));
	json_object_object_add(o, "maps_reads_naming", json_object_new_int(r->maps_reads_naming));
	json_object_object_add(root, "counters", o);

	/* json-c escapes quotes and control characters but copies other bytes as they are: the
	 * names and paths in here may not be UTF-8, so the document is repaired as it goes out. */
	text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
	errno = 0;
	if (!text)
		err = -ENOMEM;
	else if (san_fputs_utf8(out, text) || fputc('\n', out) == EOF)
		err = errno ? -errno : -EIO;
	json_object_put(root);
	return err;
}

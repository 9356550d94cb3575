// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The report's "where" section: what the CPU samples of each role's threads were running, as
 * shares of that role's samples, in text and JSON. Pure: fed a filled struct report. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "report.h"
#include "sanitize.h"

int where_finish(struct report *r)
{
	int err;

	for (int i = 0; i < r->nr_where_samples; i++) {
		struct where_sample *s = &r->where_samples[i];

		s->role = -1;
		for (int k = 0; k < r->nr_threads; k++)
			if (r->threads[k].tid == s->tid) {
				s->role = r->threads[k].role;
				break;
			}
	}
	for (int i = 0; i < r->nr_waits; i++) {
		struct where_wait *w = &r->waits[i];

		w->role = w->waker_role = -1;
		for (int k = 0; k < r->nr_threads; k++)
			if (r->threads[k].tid == w->tid) {
				w->role = r->threads[k].role;
				break;
			}
		for (int k = 0; w->waker_tid && k < r->nr_threads; k++)
			if (r->threads[k].tid == w->waker_tid) {
				w->waker_role = r->threads[k].role;
				break;
			}
	}
	err = where_aggregate_waits(r->waits, r->nr_waits, &r->where_names, r->wait_states);
	if (err)
		return err;
	return where_aggregate(r->where_samples, r->nr_where_samples, NR_ROLES, r->where);
}

/* A role's hottest Python function is named in advice only with this much behind it. */
#define NAMED_MIN_SAMPLES 50
#define NAMED_MIN_SHARE 0.20
#define NAMED_SECOND_SHARE 0.10

/* The role whose code a recommendation is about, or -1. */
static int advice_role(const char *id)
{
	static const char *const worker_code[] = { "cheaper_transforms", "more_workers",
						   "more_workers_or_cheaper_transforms" };
	static const char *const trainer_code[] = { "less_work_per_step", "intra_op_threads",
						    "inputs_in_workers", "serial_code" };

	for (size_t i = 0; i < sizeof(worker_code) / sizeof(worker_code[0]); i++)
		if (!strcmp(id, worker_code[i]))
			return ROLE_WORKER;
	for (size_t i = 0; i < sizeof(trainer_code) / sizeof(trainer_code[0]); i++)
		if (!strcmp(id, trainer_code[i]))
			return ROLE_TRAINER;
	return -1;
}

/*
 * The intra-op threads advice, held against where the trainer's CPU goes: code that runs on
 * one thread whatever torch.set_num_threads says (the interpreter, a BLAS with no threads of
 * its own) is Amdahl's serial part, and the model takes the rest to split evenly over the
 * threads, as torch's parallel loops over large tensors do. That is a prediction, as good as
 * its assumption (small tensors stay on one thread, below torch's grain size), and the text
 * says so; with too few samples there is only the loose bound. When the prediction leaves
 * nothing worth having, the advice becomes what would help instead.
 */
static void refine_threads(struct report *r)
{
	const struct where_role *w = &r->where[ROLE_TRAINER];
	struct pipeline_model *m = &r->analysis.model;
	struct recommendation *rec = NULL;
	struct prediction *p;
	double serial, lib, predicted;
	const char *top;

	for (int i = 0; i < r->analysis.nr_recs && !rec; i++)
		if (!strcmp(r->analysis.recs[i].id, "intra_op_threads"))
			rec = &r->analysis.recs[i];
	if (!rec || rec->prediction < 0 || w->samples < NAMED_MIN_SAMPLES)
		return;
	p = &m->predictions[rec->prediction];
	if (!p->bound)
		return;
	serial = (double)(w->serial_interpreter + w->serial_library) / w->samples;
	lib = (double)w->serial_library / w->samples;
	predicted = pipeline_threads_bound(m->in.trainer_running, serial, p->to);
	if (predicted > p->bound)
		predicted = p->bound;
	top = w->serial_top.name >= 0 ? r->where_names.names[w->serial_top.name] : "";
	p->bound = rec->speedup_bound = predicted;
	p->speedup = predicted;
	snprintf(p->withheld, sizeof(p->withheld), "%.0f%% of the trainer's CPU runs on one thread "
		 "whatever the setting (%.0f%% in the interpreter, %.0f%% in a BLAS with no threads), "
		 "the rest taken to split evenly", 100 * serial, 100 * (serial - lib), 100 * lib);
	text_append(rec->evidence, sizeof(rec->evidence), "; %.0f%% of %llu CPU samples of the "
		    "trainer in code that runs on one thread%s%s%s", 100 * serial,
		    (unsigned long long)w->samples, *top ? " (most: " : "", top, *top ? ")" : "");
	if (predicted >= PREDICT_THREADS_NO_GAIN) {
		snprintf(rec->text, sizeof(rec->text), "Try torch.set_num_threads(%d) (or "
			 "OMP_NUM_THREADS=%d) so tensor ops use the idle CPUs: predicted %.2fx steps/s, "
			 "as %.0f%% of the trainer's CPU runs on one thread whatever the setting and the "
			 "rest is taken to split evenly (large tensor ops do; ops on small tensors stay "
			 "on one thread).", p->to, p->to, predicted, 100 * serial);
		return;
	}
	rec->id = "serial_code";
	snprintf(rec->text, sizeof(rec->text), "More intra-op threads would not help: predicted "
		 "%.2fx steps/s with torch.set_num_threads(%d), as %s.", predicted, p->to, p->withheld);
	if (lib >= serial / 2 && *top)
		text_append(rec->text, sizeof(rec->text), " The BLAS, %s, starts no threads of its "
			    "own, and torch calls it outside its parallel loops: a threaded BLAS "
			    "(OpenBLAS or MKL; update-alternatives --config libblas.so.3 on Debian) "
			    "would use the idle CPU.", top);
	else
		text_append(rec->text, sizeof(rec->text), " It is the Python interpreter's own work: "
			    "fewer, larger tensor operations per step (or torch.compile) cut it.");
}

void where_annotate(struct report *r)
{
	refine_threads(r);
	for (int i = 0; i < r->analysis.nr_recs; i++) {
		struct recommendation *rec = &r->analysis.recs[i];
		int role = advice_role(rec->id);
		const struct where_role *w;
		double first, second;

		if (role < 0)
			continue;
		w = &r->where[role];
		if (w->samples < NAMED_MIN_SAMPLES || !w->nr_py)
			continue;
		first = (double)w->py[0].samples / w->samples;
		if (first < NAMED_MIN_SHARE)
			continue;
		second = w->nr_py > 1 ? (double)w->py[1].samples / w->samples : 0;
		text_append(rec->text, sizeof(rec->text), " The %s CPU goes %.0f%% to %s",
		       role == ROLE_WORKER ? "workers'" : "trainer's", 100 * first,
		       r->where_names.names[w->py[0].name]);
		if (second >= NAMED_SECOND_SHARE)
			text_append(rec->text, sizeof(rec->text), ", %.0f%% to %s", 100 * second,
			       r->where_names.names[w->py[1].name]);
		text_append(rec->text, sizeof(rec->text), ".");
		text_append(rec->evidence, sizeof(rec->evidence), "; %llu CPU samples of the %s",
		       (unsigned long long)w->samples, role == ROLE_WORKER ? "workers" : "trainer");
	}
}

static const char *py_why_not(int err)
{
	switch (err) {
	case -EPROTONOSUPPORT:
		return "a version pipeprof has no frame layout for";
	case -ENOENT:
		return "no _PyRuntime or PyCode_Type symbol";
	case -EPROTO:
		return "its memory does not match the layout (a build pipeprof does not know)";
	default:
		return strerror(-err);
	}
}

static double share(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * part / whole : 0;
}

static void print_entries(FILE *out, const char *label, const struct where_entry *e, int n,
			  uint64_t whole, const struct where_names *names)
{
	char shown[SAN_TEXT_SIZE(512)];

	for (int i = 0; i < n; i++)
		fprintf(out, "    %-7s %5.1f%%  %s\n", i ? "" : label, share(e[i].samples, whole),
			san_text(shown, sizeof(shown), names->names[e[i].name], 512));
}

const char *where_name_of(const struct report *r, int id)
{
	return id >= 0 ? r->where_names.names[id] : "no Python frame";
}

static void print_waits(FILE *out, const struct report *r)
{
	char shown[SAN_TEXT_SIZE(512)], inner[SAN_TEXT_SIZE(512)];
	uint64_t total = 0, count = 0;

	for (int s = 0; s < PP_NR_STATES; s++) {
		total += r->wait_states[s].ns;
		count += r->wait_states[s].count;
	}
	if (!count)
		return;
	fprintf(out, "  The trainer's waits (its Python stack as each began, by wait time; %llu waits, "
		"%.2f s):\n", (unsigned long long)count, total / 1e9);
	for (int s = 0; s < PP_NR_STATES; s++) {
		const struct where_wait_state *st = &r->wait_states[s];

		if (!st->count || st->ns < WHERE_WAIT_STATE_MIN_SHARE * total)
			continue;
		fprintf(out, "    %s %.2f s in %llu waits:\n", state_name(s), st->ns / 1e9,
			(unsigned long long)st->count);
		for (int k = 0; k < st->nr_sites; k++) {
			const struct wait_site *w = &st->sites[k];

			fprintf(out, "      %5.1f%%  %s", share(w->ns, st->ns),
				san_text(shown, sizeof(shown), where_name_of(r, w->site), 512));
			if (w->inner != w->site && w->inner >= 0)
				fprintf(out, ", in %s", san_text(inner, sizeof(inner), where_name_of(r, w->inner), 512));
			fputc('\n', out);
		}
		for (int k = 0; k < st->nr_wakers; k++) {
			const struct waker_site *w = &st->wakers[k];

			fprintf(out, "      %s %5.1f%%  ", k ? "        " : "ended by", share(w->ns, st->ns));
			if (!w->tid)
				fprintf(out, "an interrupt or a task outside the job\n");
			else
				fprintf(out, "%s thread %u, in %s\n", w->role >= 0 ? role_name(w->role) :
					"untraced", w->tid, san_text(shown, sizeof(shown),
								      where_name_of(r, w->site), 512));
		}
	}
	if (r->wait_records_lost)
		fprintf(out, "    %llu waits lost (ring buffer full)\n",
			(unsigned long long)r->wait_records_lost);
}

void where_draw_text(char *buf, size_t size, const struct report *r)
{
	buf[0] = '\0';
	if (r->samples_cap > 0 && r->samples_seen > (uint64_t)r->samples_cap)
		snprintf(buf, size, "the counts are a uniform draw of %d of the window's %llu samples "
			 "(a report keeps %d)", r->nr_where_samples,
			 (unsigned long long)r->samples_seen, r->samples_cap);
}

void where_print_text(FILE *out, const struct report *r)
{
	uint64_t total = 0;
	char draw[160];

	if (!r->sample_hz)
		return;
	for (int k = 0; k < NR_ROLES; k++)
		total += r->where[k].samples;
	fprintf(out, "\nWhere the CPU goes (samples at %u Hz on each CPU: %llu of the job's threads; "
		"shares of each role's samples):\n", r->sample_hz, (unsigned long long)total);
	if (r->sample_err[0])
		fprintf(out, "  not sampled: %s\n", r->sample_err);
	where_draw_text(draw, sizeof(draw), r);
	if (draw[0])
		fprintf(out, "  %s\n", draw);
	for (int k = 0; k < NR_ROLES; k++) {
		const struct where_role *w = &r->where[k];

		if (!w->samples)
			continue;
		fprintf(out, "  %s: %llu samples, %.0f%% in the kernel, %.0f%% with a Python stack\n",
			role_name(k), (unsigned long long)w->samples, share(w->kernel, w->samples),
			share(w->py_samples, w->samples));
		print_entries(out, "Python", w->py, w->nr_py, w->samples, &r->where_names);
		print_entries(out, "native", w->native, w->nr_native, w->samples, &r->where_names);
	}
	print_waits(out, r);
	for (int i = 0; i < r->nr_py_procs; i++)
		if (r->py_procs[i].err)
			fprintf(out, "  Python stacks not walked in pid %d (CPython %d.%d): %s\n",
				r->py_procs[i].pid, r->py_procs[i].major, r->py_procs[i].minor,
				py_why_not(r->py_procs[i].err));
	if (r->samples_lost)
		fprintf(out, "  %llu samples lost (ring buffer full)\n",
			(unsigned long long)r->samples_lost);
	if (r->samples_truncated)
		fprintf(out, "  %llu samples with Python stacks deeper than %d frames: their outermost "
			"frames are left out\n", (unsigned long long)r->samples_truncated,
			PP_PY_MAX_DEPTH);
}

static struct json_object *entries_json(const struct where_entry *e, int n, uint64_t whole,
					const struct where_names *names)
{
	struct json_object *a = json_object_new_array();

	for (int i = 0; i < n; i++) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "function", json_object_new_string(names->names[e[i].name]));
		json_object_object_add(o, "samples", json_object_new_int64(e[i].samples));
		json_object_object_add(o, "share", json_object_new_double(whole ? (double)e[i].samples / whole : 0));
		json_object_array_add(a, o);
	}
	return a;
}

static struct json_object *waits_json(const struct report *r)
{
	struct json_object *o = json_object_new_object(), *states = json_object_new_object();

	json_object_object_add(o, "lost", json_object_new_int64(r->wait_records_lost));
	for (int s = 0; s < PP_NR_STATES; s++) {
		const struct where_wait_state *st = &r->wait_states[s];
		struct json_object *so, *sites, *wakers;

		if (!st->count)
			continue;
		so = json_object_new_object();
		sites = json_object_new_array();
		wakers = json_object_new_array();
		json_object_object_add(so, "seconds", json_object_new_double(st->ns / 1e9));
		json_object_object_add(so, "count", json_object_new_int64(st->count));
		for (int k = 0; k < st->nr_sites; k++) {
			struct json_object *e = json_object_new_object();

			json_object_object_add(e, "site", st->sites[k].site >= 0 ?
					       json_object_new_string(where_name_of(r, st->sites[k].site)) : NULL);
			json_object_object_add(e, "innermost", st->sites[k].inner >= 0 ?
					       json_object_new_string(where_name_of(r, st->sites[k].inner)) : NULL);
			json_object_object_add(e, "seconds", json_object_new_double(st->sites[k].ns / 1e9));
			json_object_object_add(e, "share", json_object_new_double(
				st->ns ? (double)st->sites[k].ns / st->ns : 0));
			json_object_array_add(sites, e);
		}
		for (int k = 0; k < st->nr_wakers; k++) {
			const struct waker_site *w = &st->wakers[k];
			struct json_object *e = json_object_new_object();

			json_object_object_add(e, "tid", json_object_new_int64(w->tid));
			json_object_object_add(e, "role", w->tid && w->role >= 0 ?
					       json_object_new_string(role_name(w->role)) : NULL);
			json_object_object_add(e, "site", w->site >= 0 ?
					       json_object_new_string(where_name_of(r, w->site)) : NULL);
			json_object_object_add(e, "seconds", json_object_new_double(w->ns / 1e9));
			json_object_object_add(e, "share", json_object_new_double(
				st->ns ? (double)w->ns / st->ns : 0));
			json_object_array_add(wakers, e);
		}
		json_object_object_add(so, "sites", sites);
		json_object_object_add(so, "wakers", wakers);
		json_object_object_add(states, state_name(s), so);
	}
	json_object_object_add(o, "states", states);
	return o;
}

struct json_object *where_json(const struct report *r)
{
	struct json_object *o = json_object_new_object(), *roles, *interps;

	json_object_object_add(o, "sample_hz", json_object_new_int(r->sample_hz));
	json_object_object_add(o, "error", r->sample_err[0] ? json_object_new_string(r->sample_err) : NULL);
	json_object_object_add(o, "samples_lost", json_object_new_int64(r->samples_lost));
	/* Past what a report keeps, the roles' counts are a uniform draw of the window's. */
	json_object_object_add(o, "samples_seen", json_object_new_int64(r->samples_seen));
	json_object_object_add(o, "samples_kept", json_object_new_int(r->nr_where_samples));
	json_object_object_add(o, "samples_truncated", json_object_new_int64(r->samples_truncated));
	roles = json_object_new_object();
	for (int k = 0; k < NR_ROLES; k++) {
		const struct where_role *w = &r->where[k];
		struct json_object *ro = json_object_new_object();

		json_object_object_add(ro, "samples", json_object_new_int64(w->samples));
		json_object_object_add(ro, "kernel_samples", json_object_new_int64(w->kernel));
		json_object_object_add(ro, "python_samples", json_object_new_int64(w->py_samples));
		/* Samples whose code runs on one thread whatever the intra-op thread count. */
		json_object_object_add(ro, "interpreter_samples",
				       json_object_new_int64(w->serial_interpreter));
		json_object_object_add(ro, "single_threaded_library_samples",
				       json_object_new_int64(w->serial_library));
		json_object_object_add(ro, "python", entries_json(w->py, w->nr_py, w->samples, &r->where_names));
		json_object_object_add(ro, "native", entries_json(w->native, w->nr_native, w->samples,
								  &r->where_names));
		json_object_object_add(roles, role_name(k), ro);
	}
	json_object_object_add(o, "roles", roles);
	interps = json_object_new_array();
	for (int i = 0; i < r->nr_py_procs; i++) {
		const struct py_proc_result *p = &r->py_procs[i];
		struct json_object *po = json_object_new_object();
		char version[16];

		snprintf(version, sizeof(version), "%d.%d", p->major, p->minor);
		json_object_object_add(po, "pid", json_object_new_int(p->pid));
		json_object_object_add(po, "version", json_object_new_string(version));
		json_object_object_add(po, "walked", json_object_new_boolean(!p->err));
		json_object_object_add(po, "why_not", p->err ? json_object_new_string(py_why_not(p->err)) : NULL);
		json_object_array_add(interps, po);
	}
	json_object_object_add(o, "interpreters", interps);
	json_object_object_add(o, "waits", waits_json(r));
	return o;
}

void where_free(struct report *r)
{
	free(r->where_samples);
	r->where_samples = NULL;
	r->nr_where_samples = 0;
	intern_free(&r->name_stacks);
	free(r->waits);
	r->waits = NULL;
	r->nr_waits = 0;
	where_names_free(&r->where_names);
}

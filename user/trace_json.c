// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The Chrome trace-event JSON of `pipeprof record` (trace_json.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "classify.h"
#include "sanitize.h"
#include "trace_json.h"

/* Colours chrome://tracing knows by name (Perfetto picks its own). */
static const char *const state_cname[PP_NR_STATES] = {
	[PP_RUNNING] = "thread_state_running",	[PP_RUNQ] = "thread_state_runnable",
	[PP_GPU_WAIT] = "rail_animation",	[PP_IO_WAIT] = "thread_state_iowait",
	[PP_DATA_WAIT] = "terrible",		[PP_THREAD_WAIT] = "thread_state_sleeping",
	[PP_COMM_WAIT] = "rail_load",		[PP_OTHER] = "grey",
};

void trace_json_string(FILE *out, const char *s, size_t max)
{
	size_t len = strnlen(s, max);
	char buf[3 * 64 + 1], *fixed = len < 64 ? buf : malloc(3 * len + 1);

	/* JSON must be UTF-8: a name that is not is repaired, never written raw. */
	if (!fixed) {
		fputs("\"?\"", out);
		return;
	}
	san_utf8_repair(fixed, s, len);
	fputc('"', out);
	for (const unsigned char *c = (const unsigned char *)fixed; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(out, "\\%c", *c);
		else if (*c < 0x20 || *c == 0x7f)
			fprintf(out, "\\u%04x", *c);
		else
			fputc(*c, out);
	}
	fputc('"', out);
	if (fixed != buf)
		free(fixed);
}

/* Microseconds since the window opened, to the nanosecond, as the format wants them. */
static void put_us(FILE *out, const char *key, __u64 ns)
{
	fprintf(out, ",\"%s\":%llu.%03llu", key, (unsigned long long)(ns / 1000),
		(unsigned long long)(ns % 1000));
}

static int by_thread_time(const void *a, const void *b)
{
	const struct pp_episode *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	return (x->end_ns > y->end_ns) - (x->end_ns < y->end_ns);
}

static int by_tid(const void *a, const void *b)
{
	const struct trace_thread *x = *(const struct trace_thread *const *)a;
	const struct trace_thread *y = *(const struct trace_thread *const *)b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

static const struct trace_thread *find_thread(const struct trace_thread **sorted, int n, __u32 tid)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (sorted[mid]->tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && sorted[lo]->tid == tid ? sorted[lo] : NULL;
}

/* The slice of thread tid that holds ts, [start, end], in slices sorted by thread and time;
 * NULL when none does. */
static const struct pp_episode *slice_at(const struct pp_episode *s, size_t n, __u32 tid, __u64 ts)
{
	size_t lo = 0, hi = n;

	/* The last slice at or before (tid, ts). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s[mid].tid < tid || (s[mid].tid == tid && s[mid].start_ns <= ts))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || s[lo - 1].tid != tid || ts > s[lo - 1].end_ns)
		return NULL;
	return &s[lo - 1];
}

/*
 * The slices: the episodes of the threads the report has, and each one's open phase, sorted;
 * a thread's clipped so none overlaps the one before (a switch-in placed from the CPU clock
 * can land inside the stretch before it), and adjacent ones of the same state joined unless
 * a flow ends at the first.
 */
static struct pp_episode *build_slices(struct trace_input *in, const struct trace_thread **sorted,
				       size_t *nr, struct trace_stats *st)
{
	size_t n = 0, cap = in->nr_eps + 2 * (size_t)in->nr_threads;
	struct pp_episode *s = malloc((cap ? cap : 1) * sizeof(*s)), *last = NULL;

	if (!s)
		return NULL;
	for (size_t i = 0; i < in->nr_eps; i++) {
		if (!find_thread(sorted, in->nr_threads, in->eps[i].tid)) {
			st->episodes_unknown++;
			continue;
		}
		s[n++] = in->eps[i];
	}
	for (int i = 0; i < in->nr_threads; i++) {
		const struct trace_thread *t = &in->threads[i];

		if (t->named_state < PP_NR_STATES && t->named_to > t->named_from)
			s[n++] = (struct pp_episode){ .tid = t->tid, .tgid = t->tgid,
						      .state = t->named_state,
						      .start_ns = t->named_from, .end_ns = t->named_to };
		if (t->open_state < PP_NR_STATES && t->open_to > t->open_from)
			s[n++] = (struct pp_episode){ .tid = t->tid, .tgid = t->tgid,
						      .state = t->open_state,
						      .start_ns = t->open_from, .end_ns = t->open_to };
	}
	qsort(s, n, sizeof(*s), by_thread_time);

	*nr = 0;
	for (size_t i = 0; i < n; i++) {
		struct pp_episode e = s[i];

		if (e.start_ns < in->start_ns)
			e.start_ns = in->start_ns;
		if (e.end_ns > in->end_ns)
			e.end_ns = in->end_ns;
		if (last && last->tid == e.tid && e.start_ns < last->end_ns) {
			st->overlap_ns += (e.end_ns < last->end_ns ? e.end_ns : last->end_ns) - e.start_ns;
			e.start_ns = last->end_ns;
		}
		if (e.end_ns <= e.start_ns || e.state >= PP_NR_STATES)
			continue;
		if (last && last->tid == e.tid && last->end_ns == e.start_ns &&
		    last->state == e.state && !last->waker_tid && !e.waker_tid &&
		    last->api == e.api) {
			last->end_ns = e.end_ns;
			continue;
		}
		s[*nr] = e;
		last = &s[(*nr)++];
	}
	return s;
}

/* A GPU API's name (from a trusted table: no escaping), or NULL. */
static const char *api_name(const struct trace_input *in, __u32 api)
{
	return in->api_names && api > 0 && (int)api <= in->nr_api_names ? in->api_names[api - 1] :
		NULL;
}

static void write_metadata(FILE *out, const struct trace_input *in, bool *first)
{
	static const int sort_of_role[NR_ROLES] = { [ROLE_TRAINER] = 0, [ROLE_WORKER] = 1,
						    [ROLE_HELPER] = 2 };

	for (int i = 0; i < in->nr_procs; i++) {
		const struct trace_proc *p = &in->procs[i];

		fprintf(out, "%s\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":%u,"
			"\"args\":{\"name\":", *first ? "" : ",", p->pid, p->pid);
		trace_json_string(out, p->comm ? p->comm : "?", 16);
		fprintf(out, "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%u,"
			"\"tid\":%u,\"args\":{\"sort_index\":%d}}", p->pid, p->pid, p->root ? 0 : 1);
		*first = false;
	}
	for (int i = 0; i < in->nr_threads; i++) {
		const struct trace_thread *t = &in->threads[i];
		int role = t->role >= 0 && t->role < NR_ROLES ? t->role : ROLE_HELPER;
		char name[32];

		fprintf(out, "%s\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,"
			"\"args\":{\"name\":", *first ? "" : ",", t->tgid, t->tid);
		/* The role first: Perfetto shows the track's name, not its args. */
		snprintf(name, sizeof(name), "%s %.16s", role_name(role), t->comm ? t->comm : "?");
		trace_json_string(out, name, sizeof(name));
		fprintf(out, ",\"role\":\"%s\"}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\","
			"\"pid\":%u,\"tid\":%u,\"args\":{\"sort_index\":%d}}", role_name(role),
			t->tgid, t->tid, sort_of_role[role]);
		*first = false;
	}
	if (in->nr_steps > 1) {
		fprintf(out, "%s\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,"
			"\"args\":{\"name\":\"steps of TRAINER %u\"}},\n{\"ph\":\"M\","
			"\"name\":\"thread_sort_index\",\"pid\":%u,\"tid\":%u,\"args\":"
			"{\"sort_index\":-1}}", *first ? "" : ",", in->step_tgid, TRACE_STEPS_TID,
			in->step_tid, in->step_tgid, TRACE_STEPS_TID);
		*first = false;
	}
}

static void write_slices(FILE *out, const struct trace_input *in, const struct pp_episode *s,
			 size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fprintf(out, ",\n{\"ph\":\"X\",\"cat\":\"state\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u",
			state_name(s[i].state), s[i].tgid, s[i].tid);
		put_us(out, "ts", s[i].start_ns - in->start_ns);
		put_us(out, "dur", s[i].end_ns - s[i].start_ns);
		fprintf(out, ",\"cname\":\"%s\"", state_cname[s[i].state]);
		if (s[i].waker_tid)
			fprintf(out, ",\"args\":{\"waker_tid\":%u}", s[i].waker_tid);
		else if (api_name(in, s[i].api))
			fprintf(out, ",\"args\":{\"api\":\"%s\"}", api_name(in, s[i].api));
		fputc('}', out);
	}
}

/*
 * The launches of the threads the report has inside the window, sorted by thread and time;
 * *nr of them. Kept apart from the slices: an instant has no duration to clip or join.
 */
static struct pp_episode *build_launches(const struct trace_input *in,
					 const struct trace_thread **sorted, size_t *nr)
{
	struct pp_episode *l;
	size_t n = 0;

	for (size_t i = 0; i < in->nr_eps; i++)
		n += in->eps[i].state == PP_EP_LAUNCH;
	l = malloc((n ? n : 1) * sizeof(*l));
	if (!l)
		return NULL;
	n = 0;
	for (size_t i = 0; i < in->nr_eps; i++) {
		const struct pp_episode *e = &in->eps[i];

		if (e->state == PP_EP_LAUNCH && e->start_ns >= in->start_ns &&
		    e->start_ns <= in->end_ns && find_thread(sorted, in->nr_threads, e->tid))
			l[n++] = *e;
	}
	qsort(l, n, sizeof(*l), by_thread_time);
	*nr = n;
	return l;
}

/* Whether the episode goes on its thread's GPU track: a synchronising call or a launch. */
static bool on_gpu_track(const struct trace_input *in, const struct pp_episode *e)
{
	return api_name(in, e->api) && (e->state == PP_GPU_WAIT || e->state == PP_EP_LAUNCH);
}

/* The name of each thread's GPU track, once: the tids with calls or launches, both lists
 * sorted by thread, merged. */
static void name_gpu_tracks(FILE *out, const struct trace_input *in, const struct pp_episode *s,
			    size_t n, const struct pp_episode *l, size_t nl)
{
	size_t i = 0, k = 0;
	bool named = false;
	__u32 last = 0;

	while (i < n || k < nl) {
		const struct pp_episode *e = k >= nl || (i < n && s[i].tid <= l[k].tid) ? &s[i++] :
					     &l[k++];

		if (!on_gpu_track(in, e) || (named && e->tid == last))
			continue;
		named = true;
		last = e->tid;
		fprintf(out, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,"
			"\"args\":{\"name\":\"GPU calls of %u\"}}", e->tgid, e->tid | TRACE_GPU_TID_BIT,
			e->tid);
	}
}

/* Each thread's synchronising GPU calls, as slices named by the API on the thread's GPU track
 * (the same intervals as its GPU_WAIT slices, which the state track keeps). */
static size_t write_gpu_calls(FILE *out, const struct trace_input *in,
			      const struct pp_episode *s, size_t n)
{
	size_t calls = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i].state != PP_GPU_WAIT || !on_gpu_track(in, &s[i]))
			continue;
		fprintf(out, ",\n{\"ph\":\"X\",\"cat\":\"gpu\",\"name\":\"%s\",\"pid\":%u,"
			"\"tid\":%u", api_name(in, s[i].api), s[i].tgid, s[i].tid | TRACE_GPU_TID_BIT);
		put_us(out, "ts", s[i].start_ns - in->start_ns);
		put_us(out, "dur", s[i].end_ns - s[i].start_ns);
		fputc('}', out);
		calls++;
	}
	return calls;
}

/* Kernel launches, instants ("ph":"i", thread scope) named by the API on the GPU track: the
 * probe sees the call's entry only, so a launch has a time and no duration. */
static size_t write_launches(FILE *out, const struct trace_input *in, const struct pp_episode *l,
			     size_t n)
{
	size_t launches = 0;

	for (size_t i = 0; i < n; i++) {
		if (!on_gpu_track(in, &l[i]))
			continue;
		fprintf(out, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"launch\",\"name\":\"%s\","
			"\"pid\":%u,\"tid\":%u", api_name(in, l[i].api), l[i].tgid,
			l[i].tid | TRACE_GPU_TID_BIT);
		put_us(out, "ts", l[i].start_ns - in->start_ns);
		fputc('}', out);
		launches++;
	}
	return launches;
}

/* Flow v1 events, each bound to its enclosing slice ("bp":"e"): the start at the wakeup in
 * the waker's slice, the end a nanosecond before the wait ends, inside the wait's slice, so
 * the arrow lands where the wait gives way to the run queue. */
static size_t write_flows(FILE *out, const struct trace_input *in, const struct pp_episode *s,
			  size_t n)
{
	size_t flows = 0;

	for (size_t i = 0; i < n; i++) {
		const struct pp_episode *w;
		__u64 from, to;

		if (!s[i].waker_tid || s[i].wake_ns < in->start_ns || s[i].wake_ns > s[i].end_ns)
			continue;
		w = slice_at(s, n, s[i].waker_tid, s[i].wake_ns);
		if (!w)
			continue;	/* a waker not traced, or not in the window then */
		from = s[i].wake_ns < w->end_ns ? s[i].wake_ns : w->end_ns - 1;
		to = s[i].end_ns - 1 > s[i].start_ns ? s[i].end_ns - 1 : s[i].start_ns;
		flows++;
		fprintf(out, ",\n{\"ph\":\"s\",\"cat\":\"wakeup\",\"name\":\"%s\",\"id\":%zu,"
			"\"pid\":%u,\"tid\":%u,\"bp\":\"e\"", state_name(s[i].state), flows, w->tgid,
			w->tid);
		put_us(out, "ts", from - in->start_ns);
		fprintf(out, "},\n{\"ph\":\"f\",\"cat\":\"wakeup\",\"name\":\"%s\",\"id\":%zu,"
			"\"pid\":%u,\"tid\":%u,\"bp\":\"e\"", state_name(s[i].state), flows, s[i].tgid,
			s[i].tid);
		put_us(out, "ts", to - in->start_ns);
		fputc('}', out);
	}
	return flows;
}

/* The trainer's steps, one slice from each boundary to the next, on a track of their own. */
static size_t write_steps(FILE *out, const struct trace_input *in)
{
	size_t steps = 0;

	for (int i = 0; i + 1 < in->nr_steps; i++) {
		__u64 from = in->step_ts[i], to = in->step_ts[i + 1];
		int first = in->step_numbers ? in->step_numbers[i] : i + 1;
		int last = in->step_numbers ? in->step_numbers[i + 1] - 1 : i + 1;

		if (from < in->start_ns || to > in->end_ns || to <= from)
			continue;
		/* Records lost between two boundaries: one slice for the steps they hold. */
		if (last > first)
			fprintf(out, ",\n{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"steps %d to %d\","
				"\"pid\":%u,\"tid\":%u", first, last, in->step_tgid, TRACE_STEPS_TID);
		else
			fprintf(out, ",\n{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"step %d\","
				"\"pid\":%u,\"tid\":%u", first, in->step_tgid, TRACE_STEPS_TID);
		put_us(out, "ts", from - in->start_ns);
		put_us(out, "dur", to - from);
		fputc('}', out);
		steps++;
	}
	return steps;
}

int trace_json_write(FILE *out, struct trace_input *in, struct trace_stats *st)
{
	const struct trace_thread **sorted;
	struct pp_episode *slices, *launches;
	size_t nr_slices = 0, nr_launches = 0;
	bool first = true;

	memset(st, 0, sizeof(*st));
	sorted = malloc((in->nr_threads ? in->nr_threads : 1) * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	for (int i = 0; i < in->nr_threads; i++)
		sorted[i] = &in->threads[i];
	qsort(sorted, in->nr_threads, sizeof(*sorted), by_tid);
	slices = build_slices(in, sorted, &nr_slices, st);
	launches = build_launches(in, sorted, &nr_launches);
	free(sorted);
	if (!slices || !launches) {
		free(slices);
		free(launches);
		return -ENOMEM;
	}
	st->slices = nr_slices;

	fputs("{\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"generator\":\"pipeprof record\",", out);
	fputs("\"cmdline\":", out);
	trace_json_string(out, in->cmdline ? in->cmdline : "", 4096);
	fprintf(out, ",\"window_start_monotonic_ns\":%llu,\"window_ns\":%llu,"
		"\"dropped_episodes\":%llu,\"overlap_clipped_ns\":%llu,"
		"\"episodes_of_unknown_threads\":%zu},\n\"traceEvents\":[",
		(unsigned long long)in->start_ns, (unsigned long long)(in->end_ns - in->start_ns),
		(unsigned long long)in->episodes_dropped, (unsigned long long)st->overlap_ns,
		st->episodes_unknown);
	write_metadata(out, in, &first);
	if (first)	/* no thread at all: the array still takes a comma-led event list */
		fputs("\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"tid\":0,\"args\":"
		      "{\"name\":\"nothing traced\"}}", out);
	write_slices(out, in, slices, nr_slices);
	name_gpu_tracks(out, in, slices, nr_slices, launches, nr_launches);
	st->gpu_calls = write_gpu_calls(out, in, slices, nr_slices);
	st->launches = write_launches(out, in, launches, nr_launches);
	st->flows = write_flows(out, in, slices, nr_slices);
	st->steps = write_steps(out, in);
	fputs("\n]}\n", out);
	free(slices);
	free(launches);
	return ferror(out) ? -EIO : 0;
}

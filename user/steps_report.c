// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The report's "Steps" section, text and JSON, from the step summary (steps.c). */
#include <errno.h>
#include <string.h>
#include <json-c/json.h>
#include "gpu_apis.h"
#include "hist.h"
#include "report.h"
#include "sanitize.h"

static const char *const dir_label[PP_NR_COPY_DIRS] = { "H2H", "H2D", "D2H", "D2D", "default" };

/* States shown for one step: the largest first, those of 1% or more, at most four. */
void steps_shares_text(char *buf, size_t size, const double share[PP_NR_STATES])
{
	bool used[PP_NR_STATES] = {};

	buf[0] = '\0';
	for (int k = 0; k < 4; k++) {
		int best = -1;

		for (int s = 0; s < PP_NR_STATES; s++)
			if (!used[s] && share[s] >= 0.01 && (best < 0 || share[s] > share[best]))
				best = s;
		if (best < 0)
			break;
		used[best] = true;
		text_append(buf, size, "%s%s %.0f%%", k ? ", " : "", state_name(best), 100 * share[best]);
	}
}

static void print_shares(FILE *out, const double share[PP_NR_STATES])
{
	char buf[160];

	steps_shares_text(buf, sizeof(buf), share);
	fputs(buf, out);
}

const char *copy_dir_label(unsigned int dir)
{
	return dir < PP_NR_COPY_DIRS ? dir_label[dir] : "?";
}

/* A count per step: whole where it is, else two decimals ("3", "0.25"). */
const char *report_fmt_count(char *buf, size_t size, double v)
{
	snprintf(buf, size, v == (double)(long long)v ? "%.0f" : "%.2f", v);
	return buf;
}

const char *report_fmt_bytes(char *buf, size_t size, double v)
{
	static const char *const unit[] = { "B", "kB", "MB", "GB", "TB" };
	const char *sign = v < 0 ? "-" : "";
	int k = 0;

	if (v < 0)
		v = -v;
	while (v >= 1000 && k < 4) {
		v /= 1000;
		k++;
	}
	snprintf(buf, size, k ? "%s%.1f %s" : "%s%.0f %s", sign, v, unit[k]);
	return buf;
}

const char *report_fmt_rate(char *buf, size_t size, double v)
{
	snprintf(buf, size, v >= 1000 ? "%.1fk" : "%.0f", v >= 1000 ? v / 1000 : v);
	return buf;
}

/* The trainer's GPU API calls per step: launches, syncs by API, copies by direction. */
static void print_gpu(FILE *out, const struct report *r)
{
	const struct step_summary *s = &r->steps;
	const struct step_gpu *g = &s->gpu;
	char a[32], b[32], c[32], d[32];
	bool used[PP_MAX_SYNC_APIS] = {}, pageable = false;

	if (!g->launch_steps) {
		/* Probed in bursts, none of which spanned a whole step. */
		fprintf(out, "  GPU per step: launches not counted (probed in bursts, none spanning "
			"a step; --all-launches counts every one)");
	} else {
		fprintf(out, "  GPU per step: %s launch%s",
			report_fmt_count(a, sizeof(a), steps_launches_per_step(s)),
			steps_launches_per_step(s) == 1 ? "" : "es");
		if (g->launches_min != g->launches_max)
			fprintf(out, " (%llu to %llu)", (unsigned long long)g->launches_min,
				(unsigned long long)g->launches_max);
		fprintf(out, " (%s/s", report_fmt_rate(a, sizeof(a), steps_launch_rate(s)));
		if (g->launch_gaps)
			fprintf(out, ", %.1f us apart", steps_launch_gap_s(s) * 1e6);
		if (steps_launches_sampled(s))
			fprintf(out, "; counted in %d of the %d steps: probed in bursts",
				g->launch_steps, s->count);
		fprintf(out, ")");
	}
	fprintf(out, ", %s sync%s", report_fmt_count(a, sizeof(a), steps_per_step(s, g->syncs)),
		steps_per_step(s, g->syncs) == 1 ? "" : "s");
	for (int k = 0; ; k++) {
		int best = -1;

		for (int api = 0; api < PP_MAX_SYNC_APIS && api < gpu_sync_api_count; api++)
			if (!used[api] && g->sync_calls[api] &&
			    (best < 0 || g->sync_calls[api] > g->sync_calls[best]))
				best = api;
		if (best < 0)
			break;
		used[best] = true;
		fprintf(out, "%s %s %s", k ? "," : ":", gpu_apis[best].name,
			report_fmt_count(a, sizeof(a), steps_per_step(s, g->sync_calls[best])));
	}
	fputc('\n', out);
	for (int d = 0; d < PP_NR_COPY_DIRS; d++) {
		double share = steps_pageable_share(&g->copies, d);

		if (!g->copies.calls[d])
			continue;
		fprintf(out, "  %s %s/step in %s cop%s", dir_label[d],
			report_fmt_bytes(b, sizeof(b), steps_per_step(s, g->copies.bytes[d])),
			report_fmt_count(c, sizeof(c), steps_per_step(s, g->copies.calls[d])),
			steps_per_step(s, g->copies.calls[d]) == 1 ? "y" : "ies");
		if ((d == PP_COPY_HTOD || d == PP_COPY_DTOH) && share >= 0) {
			fprintf(out, ", %.0f%% pageable", 100 * share);
			pageable |= share > 0;
		}
		fputc('\n', out);
	}
	if (pageable)
		fprintf(out, "  (pageable: host memory not seen pinned by cudaHostAlloc, cudaMallocHost "
			"or cudaHostRegister since the attach, nor in the %d region%s the driver had "
			"pinned before it%s)\n", r->pinned_before_attach,
			r->pinned_before_attach == 1 ? "" : "s",
			r->pinned_before_attach_lost ? ", some of them not tracked" : "");
	if (r->launch_bound)
		fprintf(out, "  launch-bound (CPU-side): %.0f launches a step, one every %.1f us, %.0f%% "
			"of the steps' time between launches: the host spends its step issuing "
			"launches, and the GPU waits for them\n", steps_launches_per_step(s),
			steps_launch_gap_s(s) * 1e6, 100 * steps_launch_share(s));
	if (r->devmem_traced && (g->dev.allocs || g->dev.frees || g->dev_growth.leak)) {
		fprintf(out, "  device memory: %s allocation%s (%s) and %s free%s (%s) a step",
			report_fmt_count(a, sizeof(a), steps_per_step(s, g->dev.allocs)),
			steps_per_step(s, g->dev.allocs) == 1 ? "" : "s",
			report_fmt_bytes(b, sizeof(b), steps_per_step(s, g->dev.alloc_bytes)),
			report_fmt_count(c, sizeof(c), steps_per_step(s, g->dev.frees)),
			steps_per_step(s, g->dev.frees) == 1 ? "" : "s",
			report_fmt_bytes(d, sizeof(d), steps_per_step(s, g->dev.free_bytes)));
		if (g->dev_growth.leak)
			fprintf(out, "; outstanding grows %s/step, steadily: a probable device-memory "
				"leak", report_fmt_bytes(b, sizeof(b), g->dev_growth.bytes_per_step));
		fputc('\n', out);
	}
	if (steps_many_syncs(s))
		fprintf(out, "  %s syncs a step: each makes the host wait until the GPU has caught up. "
			"A `.item()`, `.cpu()`, `.tolist()` or `print()` of a GPU tensor in the loop, or "
			"a blocking copy, does this; read such values every N steps, or keep them on the "
			"GPU\n", report_fmt_count(a, sizeof(a), steps_per_step(s, g->syncs)));
}

static uint64_t nccl_calls(const struct step_gpu *g)
{
	uint64_t n = 0;

	for (int op = 0; op < PP_NR_NCCL_CALLS; op++)
		n += g->nccl_calls[op];
	return n;
}

static void print_nccl(FILE *out, const struct step_summary *s)
{
	const struct step_gpu *g = &s->gpu;
	char a[32];

	fprintf(out, "  NCCL per step: %s call%s", report_fmt_count(a, sizeof(a), steps_per_step(s, nccl_calls(g))),
		steps_per_step(s, nccl_calls(g)) == 1 ? "" : "s");
	if (g->nccl_min != g->nccl_max)
		fprintf(out, " (%llu to %llu)", (unsigned long long)g->nccl_min,
			(unsigned long long)g->nccl_max);
	for (int op = 0, k = 0; op < PP_NR_NCCL_CALLS; op++)
		if (g->nccl_calls[op])
			fprintf(out, "%s %s %s", k++ ? "," : ":", nccl_op_name(op),
				report_fmt_count(a, sizeof(a), steps_per_step(s, g->nccl_calls[op])));
	fprintf(out, "; %s/step\n", report_fmt_bytes(a, sizeof(a), steps_per_step(s, g->nccl_bytes)));
}

/* The fewest or most of something in one step: from the steps timed one by one (of_steps of
 * them), null where there were none (every step's records lost between two kept). */
static json_object *per_step_extreme(uint64_t v, int of_steps)
{
	return of_steps ? json_object_new_int64(v) : NULL;
}

static json_object *nccl_json_steps(const struct step_summary *s)
{
	const struct step_gpu *g = &s->gpu;
	json_object *o = json_object_new_object(), *by_api = json_object_new_object();

	json_object_object_add(o, "calls", json_object_new_int64(nccl_calls(g)));
	json_object_object_add(o, "calls_per_step", json_object_new_double(steps_per_step(s, nccl_calls(g))));
	json_object_object_add(o, "calls_min", per_step_extreme(g->nccl_min, s->timed));
	json_object_object_add(o, "calls_max", per_step_extreme(g->nccl_max, s->timed));
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++)
		if (g->nccl_calls[op])
			json_object_object_add(by_api, nccl_op_name(op),
					       json_object_new_double(steps_per_step(s, g->nccl_calls[op])));
	json_object_object_add(o, "calls_by_api", by_api);
	json_object_object_add(o, "bytes", json_object_new_int64(g->nccl_bytes));
	json_object_object_add(o, "bytes_per_step", json_object_new_double(steps_per_step(s, g->nccl_bytes)));
	return o;
}

int steps_finish(struct report *r)
{
	const struct analysis *a = &r->analysis;
	int err;

	if (!r->steps_on || a->trainer_index < 0)
		return 0;
	r->steps_tid = r->threads[a->trainer_index].tid;
	err = steps_summarize(&r->step_points, r->steps_tid, &r->steps);
	if (err)
		return err;
	/* Only where the verdict found no stall: a trainer that waits is bound by what it
	 * waits for, however many launches it makes. */
	r->launch_bound = r->gpu_traced && steps_launch_bound(&r->steps, a->verdict == VERDICT_CPU ||
							   a->verdict == VERDICT_UNDETERMINED);
	return 0;
}

void steps_from_hist(struct report *r, const __u64 *slots, double sum_s, int other_threads)
{
	struct step_hist_summary *h = &r->steps_hist;
	double window_s = r->end_ns > r->start_ns ? (r->end_ns - r->start_ns) / 1e9 : 0;

	*h = (struct step_hist_summary){ .on = true, .other_threads = other_threads };
	h->count = hist_total(slots, PP_HIST_SLOTS);
	if (!h->count)
		return;
	h->per_second = window_s > 0 ? h->count / window_s : 0;
	/* The slots are usecs (the daemon's hist_time_div); the sum is exact, so the mean is. */
	h->p50_s = hist_percentile(slots, PP_HIST_SLOTS, 50) / 1e6;
	h->p90_s = hist_percentile(slots, PP_HIST_SLOTS, 90) / 1e6;
	h->mean_s = sum_s / h->count;
}

const char *steps_source_name(const struct report *r)
{
	/* The histogram has only the probe's passes: the daemon finds no steps in data waits. */
	if (r->steps_hist.on)
		return !r->steps_probed ? NULL : r->step_symbol[0] ? "symbol" : "autograd_engine";
	if (!r->steps_on)
		return NULL;
	if (r->steps.count && r->steps.source == PP_STEP_FROM_DATA_WAIT)
		return "data_waits";
	if (!r->steps_probed)
		return NULL;
	return r->step_symbol[0] ? "symbol" : "autograd_engine";
}

void steps_print_text(FILE *out, const struct report *r)
{
	const struct step_summary *s = &r->steps;
	const char *source = steps_source_name(r);
	char shown[sizeof(r->step_symbol) * 4], unkept[160];

	if (!r->steps_on)
		return;
	san_text(shown, sizeof(shown), r->step_symbol, sizeof(r->step_symbol));
	if (source && !strcmp(source, "data_waits"))
		fprintf(out, "\nSteps (one a batch: the ends of the trainer's waits for data; %s):\n",
			r->steps_probed ? "the step probe marked fewer than two" :
			r->step_symbol[0] ? "--step-symbol was not probed" : "no backward pass to probe");
	else if (r->step_symbol[0])
		fprintf(out, "\nSteps (the trainer's outermost calls of --step-symbol %s):\n", shown);
	else
		fprintf(out, "\nSteps (the trainer's backward passes, from libtorch's autograd engine; "
			"with gradient accumulation, micro-steps):\n");
	if (!source) {
		san_text(shown, sizeof(shown), r->steps_why_not, sizeof(r->steps_why_not));
		fprintf(out, "  none found: %s, and the trainer waited for no batch\n", shown);
		return;
	}
	if (!s->count && !strcmp(source, "data_waits")) {
		/* A step longer than the window: at most one batch arrives in it. */
		fprintf(out, "  no whole step in the window: fewer than two of the trainer's batches "
			"arrived in it\n");
		return;
	}
	if (!s->count) {
		fprintf(out, "  no whole step in the window: fewer than two %s of the trainer%s\n",
			r->step_symbol[0] ? "calls" : "backward passes",
			s->other_threads ? " (other threads made some)" : "");
		return;
	}
	if (s->times)
		fprintf(out, "  %d steps, %.2f steps/s; step time p50 %.1f ms, p90 %.1f ms, max %.1f ms\n",
			s->count, s->per_second, s->p50_s * 1e3, s->p90_s * 1e3, s->max_s * 1e3);
	else
		fprintf(out, "  %d steps, %.2f steps/s, %.2f ms each on average; no step time: %s\n",
			s->count, s->per_second, s->mean_s * 1e3, steps_untimed_why(s));
	if (s->times && s->timed < s->count)
		fprintf(out, "  step times are over the %d steps timed one by one: the records of the "
			"others' boundaries were lost (ring buffer full)\n", s->timed);
	steps_unkept_text(unkept, sizeof(unkept), r);
	if (unkept[0])
		fprintf(out, "  %s\n", unkept);
	fprintf(out, "  every step  ");
	print_shares(out, s->all.share);
	fputc('\n', out);
	if (s->times) {
		fprintf(out, "  median step ");
		print_shares(out, s->median.share);
		fputc('\n', out);
	}
	if (s->slow_count) {
		fprintf(out, "  %d slow step%s (%.1fx the median or more), %.0f%% of the steps' time: ",
			s->slow_count, s->slow_count == 1 ? "" : "s", STEPS_SLOW_RATIO,
			100 * s->slow.seconds / s->all.seconds);
		print_shares(out, s->slow.share);
		fputc('\n', out);
	}
	for (int i = 0; i < s->nr_slowest; i++) {
		fprintf(out, "  step %d took %.1fx the median (%.1f ms): ", s->slowest[i].index,
			s->slowest[i].seconds / s->p50_s, s->slowest[i].seconds * 1e3);
		print_shares(out, s->slowest[i].share);
		fputc('\n', out);
	}
	if (r->gpu_traced)
		print_gpu(out, r);
	if (r->nccl_traced)
		print_nccl(out, s);
	if (r->step_recs_lost)
		fprintf(out, "  %llu step boundaries lost (ring buffer full): %s\n",
			(unsigned long long)r->step_recs_lost, steps_lost_effect(s));
}

const char *steps_untimed_why(const struct step_summary *s)
{
	return s->timed ? "too few timed one by one (records lost, ring buffer full), and those "
			  "the slower stretches'" :
			  "none timed one by one (records lost between every two)";
}

const char *steps_lost_effect(const struct step_summary *s)
{
	if (s->source != PP_STEP_FROM_PROBE)
		return "the figures miss them";
	/* The probe's count says how many steps each gap holds (steps.c's steps_spanned()). */
	return s->timed < s->count ? "the probe numbers the steps, so the count and rate hold "
				     "those between the records kept" :
				     "none fell between two of the trainer's records kept";
}

static double unkept_from_s(const struct report *r)
{
	return r->step_unkept_from_ns > r->start_ns ? (r->step_unkept_from_ns - r->start_ns) / 1e9 : 0;
}

void steps_unkept_text(char *buf, size_t size, const struct report *r)
{
	buf[0] = '\0';
	if (r->step_recs_unkept)
		snprintf(buf, size, "the step figures are over the window's first %.1f s: the report "
			 "keeps %d step boundaries, and %llu more came after them", unkept_from_s(r),
			 STEP_STORE_MAX, (unsigned long long)r->step_recs_unkept);
}

static json_object *gpu_json(const struct step_summary *s, bool launch_bound);

static json_object *breakdown_json(const struct step_breakdown *b, double median_s)
{
	json_object *o = json_object_new_object(), *states = json_object_new_object();

	if (b->index)
		json_object_object_add(o, "index", json_object_new_int(b->index));
	json_object_object_add(o, "seconds", json_object_new_double(b->seconds));
	if (median_s > 0)
		json_object_object_add(o, "ratio_to_median", json_object_new_double(b->seconds / median_s));
	for (int s = 0; s < PP_NR_STATES; s++)
		json_object_object_add(states, state_name(s), json_object_new_double(b->share[s]));
	json_object_object_add(o, "states", states);
	return o;
}

/*
 * The daemon's steps: the keys of -p's, with null wherever a histogram cannot tell (the
 * longest step, every breakdown, which steps were slow), since a zero there would read as
 * measured; and resolution, so that a reader knows p50_s and p90_s are interpolated inside
 * log2 slots (within a factor of 2), where -p's are exact.
 */
static json_object *steps_hist_json(const struct report *r)
{
	const struct step_hist_summary *h = &r->steps_hist;
	json_object *o = json_object_new_object();
	const char *source = steps_source_name(r);

	json_object_object_add(o, "source", source ? json_object_new_string(source) : NULL);
	json_object_object_add(o, "resolution", json_object_new_string("log2_histogram"));
	json_object_object_add(o, "symbol", r->step_symbol[0] ?
			       json_object_new_string(r->step_symbol) : NULL);
	json_object_object_add(o, "why_not", !r->steps_probed ?
			       json_object_new_string(r->steps_why_not) : NULL);
	json_object_object_add(o, "tid", json_object_new_int64(r->steps_tid));
	/* With no probe nothing was counted: null, not a count of 0 steps. */
	json_object_object_add(o, "count", r->steps_probed ? json_object_new_int64(h->count) : NULL);
	json_object_object_add(o, "per_second", r->steps_probed ?
			       json_object_new_double(h->per_second) : NULL);
	json_object_object_add(o, "p50_s", h->count ? json_object_new_double(h->p50_s) : NULL);
	json_object_object_add(o, "p90_s", h->count ? json_object_new_double(h->p90_s) : NULL);
	json_object_object_add(o, "max_s", NULL);
	json_object_object_add(o, "mean_s", h->count ? json_object_new_double(h->mean_s) : NULL);
	json_object_object_add(o, "every_step", NULL);
	json_object_object_add(o, "median_step", NULL);
	json_object_object_add(o, "slowest", NULL);
	json_object_object_add(o, "slow_count", NULL);
	json_object_object_add(o, "slow_steps", NULL);
	json_object_object_add(o, "other_threads", r->steps_probed ?
			       json_object_new_int(h->other_threads) : NULL);
	/* No records to lose: a histogram entry the map had no room for is counted in counters. */
	json_object_object_add(o, "lost", NULL);
	json_object_object_add(o, "timed", NULL);
	json_object_object_add(o, "unkept", NULL);
	json_object_object_add(o, "unkept_from_s", NULL);
	/* The daemon follows no pinned memory, copies or NCCL calls per step. */
	json_object_object_add(o, "pinned_regions_before_attach", NULL);
	json_object_object_add(o, "pinned_regions_before_attach_lost", NULL);
	json_object_object_add(o, "gpu", NULL);
	json_object_object_add(o, "nccl", NULL);
	return o;
}

json_object *steps_json(const struct report *r)
{
	const struct step_summary *s = &r->steps;
	json_object *o, *arr;

	if (r->steps_hist.on)
		return steps_hist_json(r);
	o = json_object_new_object();
	json_object_object_add(o, "source", steps_source_name(r) ?
			       json_object_new_string(steps_source_name(r)) : NULL);
	json_object_object_add(o, "symbol", r->step_symbol[0] ?
			       json_object_new_string(r->step_symbol) : NULL);
	json_object_object_add(o, "why_not", r->steps_on && !r->steps_probed ?
			       json_object_new_string(r->steps_why_not) : NULL);
	json_object_object_add(o, "tid", json_object_new_int64(r->steps_tid));
	json_object_object_add(o, "count", json_object_new_int(s->count));
	json_object_object_add(o, "per_second", json_object_new_double(s->per_second));
	/* Steps, none timed one by one: no step time to give. */
	json_object_object_add(o, "p50_s", s->times || !s->count ?
			       json_object_new_double(s->p50_s) : NULL);
	json_object_object_add(o, "p90_s", s->times || !s->count ?
			       json_object_new_double(s->p90_s) : NULL);
	json_object_object_add(o, "max_s", s->times || !s->count ?
			       json_object_new_double(s->max_s) : NULL);
	json_object_object_add(o, "mean_s", json_object_new_double(s->mean_s));
	json_object_object_add(o, "every_step", s->count ? breakdown_json(&s->all, 0) : NULL);
	json_object_object_add(o, "median_step", s->times ? breakdown_json(&s->median, 0) : NULL);
	arr = json_object_new_array();
	for (int i = 0; i < s->nr_slowest; i++)
		json_object_array_add(arr, breakdown_json(&s->slowest[i], s->p50_s));
	json_object_object_add(o, "slowest", arr);
	json_object_object_add(o, "slow_count", json_object_new_int(s->slow_count));
	json_object_object_add(o, "slow_steps", s->slow_count ? breakdown_json(&s->slow, 0) : NULL);
	json_object_object_add(o, "other_threads", json_object_new_int(s->other_threads));
	json_object_object_add(o, "lost", json_object_new_int64(r->step_recs_lost));
	/* Of count, those between two recorded boundaries: the step times' population. */
	json_object_object_add(o, "timed", json_object_new_int(s->timed));
	/* Past the store's cap: the figures cover the window up to unkept_from_s. */
	json_object_object_add(o, "unkept", json_object_new_int64(r->step_recs_unkept));
	json_object_object_add(o, "unkept_from_s", r->step_recs_unkept ?
			       json_object_new_double(unkept_from_s(r)) : NULL);
	json_object_object_add(o, "pinned_regions_before_attach",
			       json_object_new_int(r->pinned_before_attach));
	json_object_object_add(o, "pinned_regions_before_attach_lost",
			       json_object_new_int(r->pinned_before_attach_lost));
	json_object_object_add(o, "gpu", r->gpu_traced && s->count ? gpu_json(s, r->launch_bound) : NULL);
	json_object_object_add(o, "nccl", r->nccl_traced && s->count ? nccl_json_steps(s) : NULL);
	return o;
}

static json_object *copy_json(const struct pp_copy_counts *c, int d, const struct step_summary *s)
{
	json_object *o = json_object_new_object();
	double share = steps_pageable_share(c, d);

	if (s) {
		json_object_object_add(o, "calls_per_step",
				       json_object_new_double(steps_per_step(s, c->calls[d])));
		json_object_object_add(o, "bytes_per_step",
				       json_object_new_double(steps_per_step(s, c->bytes[d])));
	}
	json_object_object_add(o, "calls", json_object_new_int64(c->calls[d]));
	json_object_object_add(o, "bytes", json_object_new_int64(c->bytes[d]));
	json_object_object_add(o, "pinned_calls", json_object_new_int64(c->pinned_calls[d]));
	json_object_object_add(o, "pinned_bytes", json_object_new_int64(c->pinned_bytes[d]));
	/* Only a host side can be pageable; null with no bytes. */
	json_object_object_add(o, "pageable_share", (d == PP_COPY_HTOD || d == PP_COPY_DTOH) &&
			       share >= 0 ? json_object_new_double(share) : NULL);
	return o;
}

static json_object *copies_json(const struct pp_copy_counts *c, const struct step_summary *s)
{
	json_object *o = json_object_new_object();

	for (int d = 0; d < PP_NR_COPY_DIRS; d++)
		json_object_object_add(o, copy_dir_name(d), copy_json(c, d, s));
	return o;
}

/* steps.gpu.device_memory: the trainer's allocations and frees a step, and its process's
 * outstanding device bytes across the steps. */
static json_object *dev_json(const struct step_summary *s)
{
	const struct step_gpu *g = &s->gpu;
	const struct gpumem_fit *f = &g->dev_growth;
	json_object *o = json_object_new_object();

	json_object_object_add(o, "allocations", json_object_new_int64(g->dev.allocs));
	json_object_object_add(o, "frees", json_object_new_int64(g->dev.frees));
	json_object_object_add(o, "allocated_bytes", json_object_new_int64(g->dev.alloc_bytes));
	json_object_object_add(o, "freed_bytes", json_object_new_int64(g->dev.free_bytes));
	json_object_object_add(o, "allocations_per_step",
			       json_object_new_double(steps_per_step(s, g->dev.allocs)));
	json_object_object_add(o, "frees_per_step", json_object_new_double(steps_per_step(s, g->dev.frees)));
	json_object_object_add(o, "allocated_bytes_per_step",
			       json_object_new_double(steps_per_step(s, g->dev.alloc_bytes)));
	json_object_object_add(o, "freed_bytes_per_step",
			       json_object_new_double(steps_per_step(s, g->dev.free_bytes)));
	json_object_object_add(o, "allocations_min", per_step_extreme(g->dev_allocs_min, s->timed));
	json_object_object_add(o, "allocations_max", per_step_extreme(g->dev_allocs_max, s->timed));
	json_object_object_add(o, "frees_min", per_step_extreme(g->dev_frees_min, s->timed));
	json_object_object_add(o, "frees_max", per_step_extreme(g->dev_frees_max, s->timed));
	json_object_object_add(o, "growth_bytes_per_step", json_object_new_double(f->bytes_per_step));
	json_object_object_add(o, "growth_bytes_per_s",
			       json_object_new_double(f->bytes_per_step * s->per_second));
	json_object_object_add(o, "growth_r2", json_object_new_double(f->r2));
	json_object_object_add(o, "late_growth_bytes_per_step",
			       json_object_new_double(f->late_bytes_per_step));
	json_object_object_add(o, "leak", json_object_new_boolean(f->leak));
	return o;
}

/* steps.gpu: the trainer's GPU API calls over its whole steps, totals and per step. */
static json_object *gpu_json(const struct step_summary *s, bool launch_bound)
{
	const struct step_gpu *g = &s->gpu;
	json_object *o = json_object_new_object(), *by_api = json_object_new_object();
	char lb[160];

	snprintf(lb, sizeof(lb), "launch-bound (CPU-side): %.0f launches a step, one every %.1f us, "
		 "%.0f%% of the steps' time between launches", steps_launches_per_step(s),
		 steps_launch_gap_s(s) * 1e6, 100 * steps_launch_share(s));

	json_object_object_add(o, "launches", json_object_new_int64(g->launches));
	json_object_object_add(o, "launches_per_step", g->launch_steps ?
			       json_object_new_double(steps_launches_per_step(s)) : NULL);
	/* The steps the launch figures are over: fewer than the steps where the launch
	 * probes came on in bursts (launch_sample.h). */
	json_object_object_add(o, "launch_steps", json_object_new_int(g->launch_steps));
	json_object_object_add(o, "launches_sampled", json_object_new_boolean(steps_launches_sampled(s)));
	json_object_object_add(o, "launches_min", per_step_extreme(g->launches_min, g->launch_timed));
	json_object_object_add(o, "launches_max", per_step_extreme(g->launches_max, g->launch_timed));
	json_object_object_add(o, "launches_per_second", json_object_new_double(steps_launch_rate(s)));
	json_object_object_add(o, "launch_gap_s", g->launch_gaps ?
			       json_object_new_double(steps_launch_gap_s(s)) : NULL);
	json_object_object_add(o, "syncs", json_object_new_int64(g->syncs));
	json_object_object_add(o, "syncs_per_step", json_object_new_double(steps_per_step(s, g->syncs)));
	json_object_object_add(o, "syncs_min", per_step_extreme(g->syncs_min, s->timed));
	json_object_object_add(o, "syncs_max", per_step_extreme(g->syncs_max, s->timed));
	for (int api = 0; api < PP_MAX_SYNC_APIS && api < gpu_sync_api_count; api++)
		if (g->sync_calls[api])
			json_object_object_add(by_api, gpu_apis[api].name,
					       json_object_new_double(steps_per_step(s, g->sync_calls[api])));
	json_object_object_add(o, "syncs_by_api", by_api);
	json_object_object_add(o, "many_syncs", json_object_new_boolean(steps_many_syncs(s)));
	json_object_object_add(o, "copies", copies_json(&g->copies, s));
	json_object_object_add(o, "launch_share", json_object_new_double(steps_launch_share(s)));
	json_object_object_add(o, "launch_bound", json_object_new_boolean(launch_bound));
	json_object_object_add(o, "launch_bound_text", launch_bound ? json_object_new_string(lb) : NULL);
	json_object_object_add(o, "device_memory", dev_json(s));
	return o;
}

json_object *gpu_copies_json(const struct report *r)
{
	json_object *o;

	if (!r->copies_traced)
		return NULL;
	o = copies_json(&r->copies, NULL);
	return o;
}

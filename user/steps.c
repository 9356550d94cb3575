// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "steps.h"

/* The thread's state time up to the record, the open phase counted as classify.c's
 * thread_close() counts it (a backward pass starts on-CPU, so it is RUNNING, or the blocking call's GPU_WAIT or
 * COMM_WAIT). A
 * thread no switch has shown since the window opened is running at the record, so it ran all
 * along: the first step after an attach would otherwise get that time as its own. */
static void state_time(const struct step_point *r, uint64_t out[PP_NR_STATES])
{
	memcpy(out, r->ns, sizeof(r->ns));
	if (r->ts <= r->phase_start_ns)
		return;
	switch (r->phase) {
	case PP_PHASE_ONCPU:
	case PP_PHASE_UNKNOWN:
		out[r->gpu_depth ? pp_call_state(r->call_state) : PP_RUNNING] += r->ts - r->phase_start_ns;
		break;
	case PP_PHASE_RUNNABLE:
		out[r->gpu_depth ? pp_call_state(r->call_state) : PP_RUNQ] += r->ts - r->phase_start_ns;
		break;
	default:
		break;
	}
}

static uint64_t diff(uint64_t after, uint64_t before)
{
	return after > before ? after - before : 0;
}

/* Whether every launch between a and b was probed: one burst of the launch probes spans
 * them (tracer_launches.c), or launches were never probed in bursts (epoch 0). */
static bool launches_counted(const struct pp_step_record *a, const struct pp_step_record *b)
{
	return a->launch_epoch == b->launch_epoch && (a->launch_epoch & 1 || !a->launch_epoch);
}

/* The fewest and most of one step come from the steps timed one by one (spanned 1). */
static void launches_between(const struct pp_step_record *a, const struct pp_step_record *b,
			     int spanned, struct step_gpu *g)
{
	uint64_t launches = diff(b->launches, a->launches);

	if (!launches_counted(a, b))
		return;
	if (spanned == 1 && (!g->launch_timed++ || launches < g->launches_min))
		g->launches_min = launches;
	if (spanned == 1 && launches > g->launches_max)
		g->launches_max = launches;
	g->launch_steps += spanned;
	g->launch_seconds += (b->ts - a->ts) / 1e9;
	g->launches += launches;
	g->launch_gap_ns += diff(b->launch_gap_ns, a->launch_gap_ns);
	g->launch_gaps += diff(b->launch_gaps, a->launch_gaps);
}

/* Adds the GPU API calls between records a and b (spanned steps) to g; the fewest and most of
 * one step come from the steps timed one by one, first the first of them. */
static void gpu_between(const struct pp_step_record *a, const struct pp_step_record *b,
			int spanned, bool first, struct step_gpu *g)
{
	uint64_t syncs = 0;
	bool one = spanned == 1;

	launches_between(a, b, spanned, g);
	for (int k = 0; k < PP_MAX_SYNC_APIS; k++) {
		uint64_t n = diff(b->sync_calls[k], a->sync_calls[k]);

		g->sync_calls[k] += n;
		syncs += n;
	}
	g->syncs += syncs;
	for (int d = 0; d < PP_NR_COPY_DIRS; d++) {
		g->copies.calls[d] += diff(b->copies.calls[d], a->copies.calls[d]);
		g->copies.bytes[d] += diff(b->copies.bytes[d], a->copies.bytes[d]);
		g->copies.pinned_calls[d] += diff(b->copies.pinned_calls[d], a->copies.pinned_calls[d]);
		g->copies.pinned_bytes[d] += diff(b->copies.pinned_bytes[d], a->copies.pinned_bytes[d]);
	}
	{
		uint64_t allocs = diff(b->dev.allocs, a->dev.allocs), frees = diff(b->dev.frees, a->dev.frees);

		g->dev.allocs += allocs;
		g->dev.frees += frees;
		g->dev.alloc_bytes += diff(b->dev.alloc_bytes, a->dev.alloc_bytes);
		g->dev.free_bytes += diff(b->dev.free_bytes, a->dev.free_bytes);
		if (one && (first || allocs < g->dev_allocs_min))
			g->dev_allocs_min = allocs;
		if (one && allocs > g->dev_allocs_max)
			g->dev_allocs_max = allocs;
		if (one && (first || frees < g->dev_frees_min))
			g->dev_frees_min = frees;
		if (one && frees > g->dev_frees_max)
			g->dev_frees_max = frees;
	}
	{
		uint64_t calls = 0;

		for (int op = 0; op < PP_NR_NCCL_CALLS; op++) {
			uint64_t n = diff(b->nccl.calls[op], a->nccl.calls[op]);

			g->nccl_calls[op] += n;
			calls += n;
		}
		g->nccl_bytes += diff(b->nccl.bytes, a->nccl.bytes);
		if (one && (first || calls < g->nccl_min))
			g->nccl_min = calls;
		if (one && calls > g->nccl_max)
			g->nccl_max = calls;
	}
	if (one && (first || syncs < g->syncs_min))
		g->syncs_min = syncs;
	if (one && syncs > g->syncs_max)
		g->syncs_max = syncs;
}

double steps_per_step(const struct step_summary *s, uint64_t total)
{
	return s->count ? (double)total / s->count : 0;
}

double steps_launches_per_step(const struct step_summary *s)
{
	return s->gpu.launch_steps ? (double)s->gpu.launches / s->gpu.launch_steps : 0;
}

bool steps_launches_sampled(const struct step_summary *s)
{
	return s->gpu.launch_steps < s->count;
}

double steps_launch_rate(const struct step_summary *s)
{
	return s->gpu.launch_seconds > 0 ? s->gpu.launches / s->gpu.launch_seconds : 0;
}

double steps_launch_gap_s(const struct step_summary *s)
{
	return s->gpu.launch_gaps ? s->gpu.launch_gap_ns / 1e9 / s->gpu.launch_gaps : 0;
}

double steps_pageable_share(const struct pp_copy_counts *c, unsigned int dir)
{
	if (dir >= PP_NR_COPY_DIRS || !c->bytes[dir])
		return -1;
	return (double)diff(c->bytes[dir], c->pinned_bytes[dir]) / c->bytes[dir];
}

bool steps_many_syncs(const struct step_summary *s)
{
	return s->count && steps_per_step(s, s->gpu.syncs) >= STEPS_MANY_SYNCS;
}

double steps_launch_share(const struct step_summary *s)
{
	return s->gpu.launch_seconds > 0 ? s->gpu.launch_gap_ns / 1e9 / s->gpu.launch_seconds : 0;
}

bool steps_launch_bound(const struct step_summary *s, bool mostly_running)
{
	return mostly_running && s->count &&
	       s->all.share[PP_RUNNING] >= STEPS_LAUNCH_BOUND_MIN_RUNNING &&
	       steps_launches_per_step(s) >= STEPS_LAUNCH_BOUND_MIN_LAUNCHES &&
	       s->gpu.launch_gaps && steps_launch_gap_s(s) <= STEPS_LAUNCH_BOUND_MAX_GAP_S &&
	       steps_launch_share(s) >= STEPS_LAUNCH_BOUND_MIN_SHARE;
}

static int by_ts(const void *a, const void *b)
{
	const struct step_point *x = *(const struct step_point *const *)a;
	const struct step_point *y = *(const struct step_point *const *)b;

	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* A step's length and place: what ranking the steps needs. Their breakdowns are made again for
 * the few the report shows, not kept for every step (80 bytes each, 14,000 in a 10-minute
 * report of a loop of 24 steps a second). */
struct step_time {
	double seconds;
	int interval;	/* between boundaries interval - 1 and interval */
	int number;	/* the step's, from 1: boundaries lost leave gaps in the intervals' */
};

static int by_seconds(const void *a, const void *b)
{
	const struct step_time *x = a, *y = b;

	return x->seconds < y->seconds ? -1 : x->seconds > y->seconds ? 1 : x->number - y->number;
}

/*
 * How many steps lie between boundaries a and b. The probe counts a thread's passes as they
 * begin (pp_step_record.seq), whether or not their records fit the ring buffer: a loop of a
 * tiny model, 8,000 steps a second, lost two records in three between two 100 ms reads, and
 * each step then spanned three. The batches' waits carry no count: one.
 */
static int steps_spanned(const struct step_point *a, const struct step_point *b)
{
	uint16_t n = (uint16_t)(b->seq - a->seq);
	uint64_t before = 0, after = 0;

	if (a->source != PP_STEP_FROM_PROBE || b->source != PP_STEP_FROM_PROBE || !n ||
	    a->tgid != b->tgid)
		return 1;
	/* A thread's closed time only grows: less is a new thread of the tid, counting afresh. */
	for (int s = 0; s < PP_NR_STATES; s++) {
		before += a->ns[s];
		after += b->ns[s];
	}
	return after < before ? 1 : n;
}

/* The step (or steps) between records a and b, index the first's number. */
static void breakdown(const struct step_point *a, const struct step_point *b, int index,
		      struct step_breakdown *out, uint64_t sums[PP_NR_STATES])
{
	uint64_t before[PP_NR_STATES], after[PP_NR_STATES], whole = 0, d[PP_NR_STATES];

	state_time(a, before);
	state_time(b, after);
	for (int s = 0; s < PP_NR_STATES; s++) {
		d[s] = after[s] > before[s] ? after[s] - before[s] : 0;
		whole += d[s];
		if (sums)
			sums[s] += d[s];
	}
	out->index = index;
	out->spanned = steps_spanned(a, b);
	out->seconds = (b->ts - a->ts) / 1e9;
	for (int s = 0; s < PP_NR_STATES; s++)
		out->share[s] = whole ? (double)d[s] / whole : 0;
}

/* Ranked step st's breakdown again. */
static void breakdown_of(const struct step_point *const *mine, const struct step_time *st,
			 struct step_breakdown *out, uint64_t sums[PP_NR_STATES])
{
	breakdown(mine[st->interval - 1], mine[st->interval], st->number, out, sums);
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * A DataLoader hands one batch over in several wakeups (the pickled batch, then each tensor's
 * shared-memory handle through the worker's resource sharer), so the ends of the trainer's
 * data waits come in bursts, one burst a batch: a short wait and a short unpickling between
 * the ends of a burst; the step's compute, and the wait for the worker to make the batch,
 * before a burst's first end. The time since the end before, less any on a run queue (gap),
 * tells them apart: the longest gaps, those that hold BURST_STEP_SHARE of the time, are
 * steps, and so is any gap within BURST_RATIO of the shortest of them; shorter ones are the
 * inside of a burst. A loop with one wait a batch (behind a pin-memory thread) keeps every end,
 * slow steps and all, as long as its steps are within that ratio of each other.
 *
 * The first end's gap is known only from the window's opening: the thread's time since then
 * (less its run queue), a lower bound. It counts among the gaps, so that a window that holds
 * one burst of a step longer than itself keeps one end (no step), not each end of that burst
 * as a step of microseconds (thousands of steps a second); and it keeps the first end only
 * when long enough, as the others. Keeps the boundaries in mine[] (sorted by time) at the
 * front and returns how many.
 */
#define BURST_STEP_SHARE 0.75
#define BURST_RATIO 4.0

/* The thread's time, less its run queue, from record a to record b (NULL: the window's
 * opening). */
static double busy_span(const struct step_point *a, const struct step_point *b)
{
	uint64_t before[PP_NR_STATES] = {0}, after[PP_NR_STATES], span = 0;

	/* Time on a run queue is the machine's, not the loop's: a busy machine stretches a
	 * burst's short gaps with it. */
	if (a)
		state_time(a, before);
	state_time(b, after);
	for (int st = 0; st < PP_NR_STATES; st++)
		if (st != PP_RUNQ && after[st] > before[st])
			span += after[st] - before[st];
	return (double)span;
}

int steps_batch_bursts(const struct step_point **mine, int nr)
{
	double *gap, *sorted, total = 0, sum = 0, split = 0, shortest_known = -1;
	int kept = 0;

	if (nr < 2)
		return nr;
	gap = malloc(2 * nr * sizeof(*gap));
	if (!gap)
		return nr;
	sorted = gap + nr;
	/* gap[i]: the gap before end i; gap[0] from the window's opening. */
	for (int i = 0; i < nr; i++) {
		gap[i] = sorted[i] = busy_span(i ? mine[i - 1] : NULL, mine[i]);
		total += gap[i];
		if (i && (shortest_known < 0 || gap[i] < shortest_known))
			shortest_known = gap[i];
	}
	qsort(sorted, nr, sizeof(*sorted), by_value);
	for (int k = nr - 1; k >= 0; k--) {
		sum += sorted[k];
		if (sum >= BURST_STEP_SHARE * total) {
			split = sorted[k] / BURST_RATIO;
			break;
		}
	}
	/* No burst among the known gaps: every end starts a step. */
	if (shortest_known >= split) {
		free(gap);
		return nr;
	}
	for (int i = 0; i < nr; i++)
		if (gap[i] >= split)
			mine[kept++] = mine[i];
	free(gap);
	return kept;
}

/*
 * The thread's step boundaries from recs[], by time, in *out (from malloc; free it): the
 * probe's where it marked two, else the starts of its batches' bursts of data waits. Sets
 * *source and *other_threads (threads other than tid with backward passes). Returns how
 * many, or -ENOMEM.
 */
static int boundaries(const struct step_point *recs, int n, uint32_t tid,
		      const struct step_point ***out, unsigned int *source, int *other_threads)
{
	const struct step_point **mine = malloc((n ? n : 1) * sizeof(*mine));
	uint32_t others[16];
	int nr = 0, nr_others = 0, probed = 0;

	*out = mine;
	if (!mine)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		probed += recs[i].tid == tid && recs[i].source == PP_STEP_FROM_PROBE;
	*source = probed >= 2 ? PP_STEP_FROM_PROBE : PP_STEP_FROM_DATA_WAIT;
	for (int i = 0; i < n; i++) {
		if (recs[i].source == PP_STEP_FROM_DATA_WAIT) {
			if (recs[i].tid == tid && *source == PP_STEP_FROM_DATA_WAIT)
				mine[nr++] = &recs[i];
			continue;
		}
		if (recs[i].tid == tid) {
			if (*source == PP_STEP_FROM_PROBE)
				mine[nr++] = &recs[i];
			continue;
		}
		/* Other threads' passes (a second trainer, torch.autograd.grad in a helper). */
		bool seen = false;

		for (int k = 0; k < nr_others && !seen; k++)
			seen = others[k] == recs[i].tid;
		if (!seen && nr_others < (int)(sizeof(others) / sizeof(others[0])))
			others[nr_others++] = recs[i].tid;
	}
	*other_threads = nr_others;
	qsort(mine, nr, sizeof(*mine), by_ts);
	if (*source == PP_STEP_FROM_DATA_WAIT)
		nr = steps_batch_bursts(mine, nr);
	return nr;
}

int steps_boundary_times(const struct step_store *store, uint32_t tid, uint64_t **ts,
			 int **numbers)
{
	const struct step_point **mine;
	unsigned int source;
	int nr, others;

	*ts = NULL;
	*numbers = NULL;
	nr = boundaries(store->points, store->nr, tid, &mine, &source, &others);
	if (nr <= 0) {
		free(mine);
		return nr;
	}
	*ts = malloc(nr * sizeof(**ts));
	*numbers = malloc(nr * sizeof(**numbers));
	if (!*ts || !*numbers) {
		free(*ts);
		free(*numbers);
		*ts = NULL;
		*numbers = NULL;
		free(mine);
		return -ENOMEM;
	}
	for (int i = 0; i < nr; i++) {
		(*ts)[i] = mine[i]->ts;
		(*numbers)[i] = i ? (*numbers)[i - 1] + steps_spanned(mine[i - 1], mine[i]) : 1;
	}
	free(mine);
	return nr;
}

int steps_each(const struct step_store *store, uint32_t tid, struct step_breakdown **out)
{
	const struct step_point **mine;
	unsigned int source;
	int nr, others, count, number = 1;

	*out = NULL;
	nr = boundaries(store->points, store->nr, tid, &mine, &source, &others);
	if (nr < 0)
		return nr;
	count = nr > 1 ? nr - 1 : 0;
	if (count && !(*out = calloc(count, sizeof(**out)))) {
		free(mine);
		return -ENOMEM;
	}
	for (int i = 0; i < count; i++) {
		breakdown(mine[i], mine[i + 1], number, &(*out)[i], NULL);
		number += (*out)[i].spanned;
	}
	free(mine);
	return count;
}

int steps_summarize(const struct step_store *store, uint32_t tid, struct step_summary *out)
{
	const struct step_point **mine;
	struct step_time *sorted;
	struct step_breakdown step;
	struct pp_step_record before, after;
	uint64_t sums[PP_NR_STATES] = {}, whole = 0;
	double *dev, *at;
	int nr, intervals, timed = 0, count = 0;

	memset(out, 0, sizeof(*out));
	nr = boundaries(store->points, store->nr, tid, &mine, &out->source, &out->other_threads);
	if (nr < 0)
		return nr;
	intervals = nr > 1 ? nr - 1 : 0;
	if (!intervals) {
		free(mine);
		return 0;
	}
	sorted = calloc(intervals, sizeof(*sorted));
	dev = malloc(2 * nr * sizeof(*dev));
	if (!sorted || !dev) {
		free(mine);
		free(sorted);
		free(dev);
		return -ENOMEM;
	}
	at = dev + nr;
	/* Each boundary's whole record read back once: its GPU counts, and its process's
	 * outstanding device bytes, fitted across the steps. */
	step_store_record(store, mine[0], &after);
	dev[0] = (double)after.dev_outstanding;
	at[0] = 0;
	for (int i = 0; i < intervals; i++) {
		before = after;
		step_store_record(store, mine[i + 1], &after);
		breakdown(mine[i], mine[i + 1], count + 1, &step, sums);
		dev[i + 1] = (double)after.dev_outstanding;
		at[i + 1] = at[i] + step.spanned;
		gpu_between(&before, &after, step.spanned, !timed, &out->gpu);
		if (step.spanned == 1)
			sorted[timed++] = (struct step_time){ .seconds = step.seconds,
							     .interval = i + 1, .number = count + 1 };
		count += step.spanned;
	}
	gpumem_fit_steps(count > intervals ? at : NULL, dev, nr, &out->gpu.dev_growth);
	free(dev);
	out->count = count;
	out->timed = timed;
	out->mean_s = (mine[nr - 1]->ts - mine[0]->ts) / 1e9 / count;
	out->per_second = out->mean_s > 0 ? 1 / out->mean_s : 0;
	for (int s = 0; s < PP_NR_STATES; s++)
		whole += sums[s];
	out->all.seconds = out->mean_s * count;
	out->all.spanned = count;
	for (int s = 0; s < PP_NR_STATES; s++)
		out->all.share[s] = whole ? (double)sums[s] / whole : 0;
	out->times = timed && timed >= STEPS_TIMED_MIN_SHARE * count;
	if (!out->times) {
		free(mine);
		free(sorted);
		return 0;
	}
	qsort(sorted, timed, sizeof(*sorted), by_seconds);
	breakdown_of(mine, &sorted[(timed - 1) / 2], &out->median, NULL);
	out->p50_s = out->median.seconds;
	out->p90_s = sorted[(int)((timed - 1) * 0.9 + 0.5)].seconds;
	out->max_s = sorted[timed - 1].seconds;
	/* The slow steps, slowest first: the report names the first few, and what they have in
	 * common (one checkpoint in a hundred steps is named by the three slowest, a stall that
	 * recurs by all of them together). */
	memset(sums, 0, sizeof(sums));
	for (int i = timed - 1; i >= 0 && sorted[i].seconds >= STEPS_SLOW_RATIO * out->p50_s; i--) {
		breakdown_of(mine, &sorted[i], &step, sums);
		if (out->nr_slowest < STEPS_SLOWEST)
			out->slowest[out->nr_slowest++] = step;
		out->slow_count++;
		out->slow.seconds += sorted[i].seconds;
	}
	out->slow.spanned = out->slow_count;
	whole = 0;
	for (int s = 0; s < PP_NR_STATES; s++)
		whole += sums[s];
	for (int s = 0; s < PP_NR_STATES; s++)
		out->slow.share[s] = whole ? (double)sums[s] / whole : 0;
	free(mine);
	free(sorted);
	return 0;
}

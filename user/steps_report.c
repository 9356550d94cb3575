// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The report's "Steps" section, text and JSON, from the step summary (steps.c). */
#include <errno.h>
#include <string.h>
#include <json-c/json.h>
#include "report.h"

/* States shown for one step: the largest first, those of 1% or more, at most four. */
static void print_shares(FILE *out, const double share[PP_NR_STATES])
{
	bool used[PP_NR_STATES] = {};

	for (int k = 0; k < 4; k++) {
		int best = -1;

		for (int s = 0; s < PP_NR_STATES; s++)
			if (!used[s] && share[s] >= 0.01 && (best < 0 || share[s] > share[best]))
				best = s;
		if (best < 0)
			break;
		used[best] = true;
		fprintf(out, "%s%s %.0f%%", k ? ", " : "", state_name(best), 100 * share[best]);
	}
}

int steps_finish(struct report *r)
{
	const struct analysis *a = &r->analysis;

	if (!r->steps_on || a->trainer_index < 0)
		return 0;
	r->steps_tid = r->threads[a->trainer_index].tid;
	return steps_summarize(r->step_recs, r->nr_step_recs, r->steps_tid, &r->steps);
}

void steps_print_text(FILE *out, const struct report *r)
{
	const struct step_summary *s = &r->steps;

	if (!r->steps_on)
		return;
	fprintf(out, "\nSteps (the trainer's backward passes, from libtorch's autograd engine):\n");
	if (!r->steps_probed) {
		fprintf(out, "  none found: %s\n", r->steps_why_not);
		return;
	}
	if (!s->count) {
		fprintf(out, "  no whole step in the window: fewer than two backward passes of the "
			"trainer%s\n", s->other_threads ? " (other threads ran some)" : "");
		return;
	}
	fprintf(out, "  %d steps, %.2f steps/s; step time p50 %.1f ms, p90 %.1f ms, max %.1f ms\n",
		s->count, s->per_second, s->p50_s * 1e3, s->p90_s * 1e3, s->max_s * 1e3);
	fprintf(out, "  every step  ");
	print_shares(out, s->all.share);
	fprintf(out, "\n  median step ");
	print_shares(out, s->median.share);
	fputc('\n', out);
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
	if (r->step_recs_lost)
		fprintf(out, "  %llu step boundaries lost (ring buffer full): the figures miss them\n",
			(unsigned long long)r->step_recs_lost);
}

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

json_object *steps_json(const struct report *r)
{
	const struct step_summary *s = &r->steps;
	json_object *o = json_object_new_object(), *arr;

	json_object_object_add(o, "source", r->steps_on && r->steps_probed ?
			       json_object_new_string("autograd_engine") : NULL);
	json_object_object_add(o, "why_not", r->steps_on && !r->steps_probed ?
			       json_object_new_string(r->steps_why_not) : NULL);
	json_object_object_add(o, "tid", json_object_new_int64(r->steps_tid));
	json_object_object_add(o, "count", json_object_new_int(s->count));
	json_object_object_add(o, "per_second", json_object_new_double(s->per_second));
	json_object_object_add(o, "p50_s", json_object_new_double(s->p50_s));
	json_object_object_add(o, "p90_s", json_object_new_double(s->p90_s));
	json_object_object_add(o, "max_s", json_object_new_double(s->max_s));
	json_object_object_add(o, "mean_s", json_object_new_double(s->mean_s));
	json_object_object_add(o, "every_step", s->count ? breakdown_json(&s->all, 0) : NULL);
	json_object_object_add(o, "median_step", s->count ? breakdown_json(&s->median, 0) : NULL);
	arr = json_object_new_array();
	for (int i = 0; i < s->nr_slowest; i++)
		json_object_array_add(arr, breakdown_json(&s->slowest[i], s->p50_s));
	json_object_object_add(o, "slowest", arr);
	json_object_object_add(o, "slow_count", json_object_new_int(s->slow_count));
	json_object_object_add(o, "slow_steps", s->slow_count ? breakdown_json(&s->slow, 0) : NULL);
	json_object_object_add(o, "other_threads", json_object_new_int(s->other_threads));
	json_object_object_add(o, "lost", json_object_new_int64(r->step_recs_lost));
	return o;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `pipeprof diff`'s output (diff.h): the comparison as text and as pipeprof.diff/v1. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <json-c/json.h>
#include "classify.h"
#include "diff.h"
#include "sanitize.h"

/* Terminal-safe text of a string from a report (any bytes a traced job chose). */
static const char *shown(char *buf, size_t size, const char *s)
{
	return s ? san_text(buf, size, s, strlen(s)) : "?";
}

/* A cell of the steps' table: seconds in ms below 1 s; "-" when not measured. */
static const char *secs_cell(char *buf, size_t size, double s)
{
	if (s <= 0)
		snprintf(buf, size, "-");
	else if (s < 1)
		snprintf(buf, size, "%.1f ms", s * 1e3);
	else
		snprintf(buf, size, "%.3f s", s);
	return buf;
}

static const char *rate_cell(char *buf, size_t size, double v)
{
	if (v <= 0)
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%.2f", v);
	return buf;
}

static const char *change_cell(char *buf, size_t size, double before, double after)
{
	if (before <= 0 || after <= 0)
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%+.1f%%", diff_relative_pct(before, after));
	return buf;
}

static void print_header(FILE *out, const struct diff_side *s)
{
	char file[256], cmd[512], why[1024];

	fprintf(out, "%-7s %s:", s->label[0] ? s->label : "?", shown(file, sizeof(file), s->file));
	if (s->pid > 0)
		fprintf(out, " pid %d,", s->pid);
	if (s->window_s > 0)
		fprintf(out, " %.1f s traced", s->window_s);
	else
		fprintf(out, " window not in the report");
	if (s->command && *s->command)
		fprintf(out, ": %s", shown(cmd, sizeof(cmd), s->command));
	fputc('\n', out);
	if (s->partial_why)
		fprintf(out, "        its figures are partial: %s\n", shown(why, sizeof(why), s->partial_why));
}

static void print_verdict(FILE *out, const struct diff_side *b, const struct diff_side *a)
{
	char vb[256], va[256], line[2048];

	if (b->verdict && a->verdict && !strcmp(b->verdict, a->verdict))
		fprintf(out, "\nVerdict: %s, unchanged\n", shown(vb, sizeof(vb), b->verdict));
	else
		fprintf(out, "\nVerdict: %s -> %s\n", shown(vb, sizeof(vb), b->verdict),
			shown(va, sizeof(va), a->verdict));
	for (const struct diff_side *s = b; s; s = s == b ? a : NULL)
		fprintf(out, "  %-7s %s\n", s->label, s->verdict_line ?
			shown(line, sizeof(line), s->verdict_line) : "(no verdict line in the report)");
}

static void print_states(FILE *out, const struct diff_side *b, const struct diff_side *a,
			 bool verbose)
{
	int quiet = 0;

	fprintf(out, "\nTrainer's states (share of its wall time):\n");
	for (const struct diff_side *s = b; s; s = s == b ? a : NULL)
		if (!s->has_states) {
			fprintf(out, "  no trainer's states in %s: no trainer thread was found\n", s->label);
			return;
		}
	for (int k = 0; k < PP_NR_STATES; k++) {
		double d = a->share[k] - b->share[k];

		/* The slack keeps a move of exactly 0.5 points, as printed, in. */
		if (!verbose && fabs(d) < DIFF_MOVED_PT - 1e-9) {
			quiet++;
			continue;
		}
		if (k - quiet == 0)
			fprintf(out, "  %-12s %9s %9s %9s\n", "", b->label, a->label, "change");
		fprintf(out, "  %-12s %8.1f%% %8.1f%% %+6.1f pt\n", state_name(k), b->share[k],
			a->share[k], d);
	}
	if (quiet == PP_NR_STATES)
		fprintf(out, "  no state moved %.1f points or more\n", DIFF_MOVED_PT);
	else if (quiet)
		fprintf(out, "  (%d other state%s moved less than %.1f points: -v lists them)\n", quiet,
			quiet == 1 ? "" : "s", DIFF_MOVED_PT);
}

static void print_steps(FILE *out, const struct diff_side *b, const struct diff_side *a)
{
	char c1[32], c2[32], c3[32], why[1024];

	fprintf(out, "\nSteps:\n");
	fprintf(out, "  %-12s %9s %9s %9s\n", "", b->label, a->label, "change");
	fprintf(out, "  %-12s %9s %9s %9s\n", "p50", secs_cell(c1, sizeof(c1), b->p50_s),
		secs_cell(c2, sizeof(c2), a->p50_s), change_cell(c3, sizeof(c3), b->p50_s, a->p50_s));
	fprintf(out, "  %-12s %9s %9s %9s\n", "p90", secs_cell(c1, sizeof(c1), b->p90_s),
		secs_cell(c2, sizeof(c2), a->p90_s), change_cell(c3, sizeof(c3), b->p90_s, a->p90_s));
	fprintf(out, "  %-12s %9s %9s %9s\n", "steps/s", rate_cell(c1, sizeof(c1), b->per_second),
		rate_cell(c2, sizeof(c2), a->per_second),
		change_cell(c3, sizeof(c3), b->per_second, a->per_second));
	fprintf(out, "  %-12s %9d %9d\n", "count", b->steps, a->steps);
	for (const struct diff_side *s = b; s; s = s == b ? a : NULL)
		if (!s->steps)
			fprintf(out, "  no steps in %s: %s\n", s->label, s->steps_why_not ?
				shown(why, sizeof(why), s->steps_why_not) : "none detected in its window");
}

/* AFTER's steps/s over BEFORE's: what a prediction of BEFORE is held against; 0 when either
 * lacks them. */
static double measured_speedup(const struct diff_side *b, const struct diff_side *a)
{
	return b->per_second > 0 && a->per_second > 0 ? a->per_second / b->per_second : 0;
}

/* A num_workers prediction says what k workers would do: a run with another k does not test it. */
static bool tests_prediction(const struct diff_prediction *p, const struct diff_side *a)
{
	return !p->id || strcmp(p->id, "num_workers") || a->workers < 0 || a->workers == p->to;
}

static void print_predictions(FILE *out, const struct diff_side *b, const struct diff_side *a)
{
	double m = measured_speedup(b, a);
	char knob[256];

	if (!b->nr_predictions) {
		fprintf(out, "\nPredictions: none in %s with a predicted speed-up\n", b->label);
		return;
	}
	if (m > 0)
		fprintf(out, "\nPredictions of %s, against the measured steps/s ratio %s/%s = %.2fx:\n",
			b->label, a->label, b->label, m);
	else
		fprintf(out, "\nPredictions of %s (no measured ratio: %s has no steps/s):\n", b->label,
			b->per_second > 0 ? a->label : b->label);
	for (int i = 0; i < b->nr_predictions; i++) {
		const struct diff_prediction *p = &b->predictions[i];
		double err = m > 0 ? 100 * (m / p->speedup - 1) : 0;

		fprintf(out, "  %s %d -> %d: predicted %.2fx", shown(knob, sizeof(knob), p->knob),
			p->from, p->to, p->speedup);
		if (!tests_prediction(p, a)) {
			if (m > 0)
				fprintf(out, ", measured %.2fx", m);
			fprintf(out, "; not a test of it: %s has %d worker%s, not %d", a->label,
				a->workers, a->workers == 1 ? "" : "s", p->to);
		} else if (m > 0 && fabs(err) < 0.05) {
			fprintf(out, ", measured %.2fx, as predicted", m);
		} else if (m > 0) {
			fprintf(out, ", measured %.2fx (%.1f%% %s the prediction)", m, fabs(err),
				err < 0 ? "under" : "over");
		}
		fputc('\n', out);
	}
}

void diff_print_text(FILE *out, const struct diff_side *b, const struct diff_side *a,
		     const struct diff_rule *rules, const struct diff_check *checks, int nr_rules,
		     bool verbose)
{
	int rule_lines = 0;

	print_header(out, b);
	print_header(out, a);
	print_verdict(out, b, a);
	print_states(out, b, a, verbose);
	print_steps(out, b, a);
	print_predictions(out, b, a);
	for (int i = 0; i < nr_rules; i++) {
		if (!checks[i].fired && !verbose)
			continue;
		if (!rule_lines++)
			fputc('\n', out);
		fprintf(out, "%s\n", checks[i].line);
	}
}

/* A number as diff prints it (six significant digits), or null when not finite. */
static json_object *jnum(double v)
{
	char buf[32];

	if (!isfinite(v))
		return NULL;
	snprintf(buf, sizeof(buf), "%.6g", v);
	return json_object_new_double_s(v, buf);
}

static json_object *jstr(const char *s)
{
	return s ? json_object_new_string(s) : NULL;
}

static json_object *side_json(const struct diff_side *s)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "file", jstr(s->file));
	json_object_object_add(o, "pid", s->pid > 0 ? json_object_new_int(s->pid) : NULL);
	json_object_object_add(o, "command", jstr(s->command));
	json_object_object_add(o, "window_s", s->window_s > 0 ? jnum(s->window_s) : NULL);
	json_object_object_add(o, "partial_why", jstr(s->partial_why));
	return o;
}

/* {before, after, change_pct}: the change relative to BEFORE, null where either is missing. */
static json_object *pair_json(double before, double after)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "before", before > 0 ? jnum(before) : NULL);
	json_object_object_add(o, "after", after > 0 ? jnum(after) : NULL);
	json_object_object_add(o, "change_pct", before > 0 && after > 0 ?
			       jnum(diff_relative_pct(before, after)) : NULL);
	return o;
}

static json_object *steps_json_of(const struct diff_side *b, const struct diff_side *a)
{
	json_object *o = json_object_new_object(), *count = json_object_new_object();

	json_object_object_add(count, "before", json_object_new_int(b->steps));
	json_object_object_add(count, "after", json_object_new_int(a->steps));
	json_object_object_add(o, "count", count);
	json_object_object_add(o, "p50_s", pair_json(b->p50_s, a->p50_s));
	json_object_object_add(o, "p90_s", pair_json(b->p90_s, a->p90_s));
	json_object_object_add(o, "per_second", pair_json(b->per_second, a->per_second));
	json_object_object_add(o, "before_why_not", b->steps ? NULL : jstr(b->steps_why_not));
	json_object_object_add(o, "after_why_not", a->steps ? NULL : jstr(a->steps_why_not));
	return o;
}

/* Every state, as fractions like the report's, and the change in points; null for a report
 * without the trainer's states. */
static json_object *states_json_of(const struct diff_side *b, const struct diff_side *a)
{
	json_object *o = json_object_new_object();

	for (int k = 0; k < PP_NR_STATES; k++) {
		json_object *st = json_object_new_object();

		json_object_object_add(st, "before", b->has_states ? jnum(b->share[k] / 100) : NULL);
		json_object_object_add(st, "after", a->has_states ? jnum(a->share[k] / 100) : NULL);
		json_object_object_add(st, "change_pt", b->has_states && a->has_states ?
				       jnum(a->share[k] - b->share[k]) : NULL);
		json_object_object_add(o, state_name(k), st);
	}
	return o;
}

static json_object *predictions_json(const struct diff_side *b, const struct diff_side *a)
{
	json_object *arr = json_object_new_array();
	double m = measured_speedup(b, a);

	for (int i = 0; i < b->nr_predictions; i++) {
		const struct diff_prediction *p = &b->predictions[i];
		bool tested = tests_prediction(p, a);
		json_object *o = json_object_new_object();

		json_object_object_add(o, "id", jstr(p->id));
		json_object_object_add(o, "knob", jstr(p->knob));
		json_object_object_add(o, "from", json_object_new_int(p->from));
		json_object_object_add(o, "to", json_object_new_int(p->to));
		json_object_object_add(o, "predicted_speedup", jnum(p->speedup));
		json_object_object_add(o, "measured_speedup", m > 0 ? jnum(m) : NULL);
		/* A run that did not turn the knob to the predicted value says nothing of the error. */
		json_object_object_add(o, "tested", json_object_new_boolean(tested));
		json_object_object_add(o, "error_pct", m > 0 && tested ?
				       jnum(100 * (m / p->speedup - 1)) : NULL);
		json_object_array_add(arr, o);
	}
	return arr;
}

json_object *diff_json(const struct diff_side *b, const struct diff_side *a,
		       const struct diff_rule *rules, const struct diff_check *checks, int nr_rules)
{
	json_object *root = json_object_new_object(), *o, *arr;
	bool failed = false;
	char text[64];

	if (!root)
		return NULL;
	json_object_object_add(root, "schema", json_object_new_string(DIFF_SCHEMA));
	json_object_object_add(root, "before", side_json(b));
	json_object_object_add(root, "after", side_json(a));

	o = json_object_new_object();
	json_object_object_add(o, "before", jstr(b->verdict));
	json_object_object_add(o, "after", jstr(a->verdict));
	json_object_object_add(o, "changed", b->verdict && a->verdict ?
			       json_object_new_boolean(strcmp(b->verdict, a->verdict) != 0) : NULL);
	json_object_object_add(o, "before_line", jstr(b->verdict_line));
	json_object_object_add(o, "after_line", jstr(a->verdict_line));
	json_object_object_add(root, "verdict", o);

	json_object_object_add(root, "states", states_json_of(b, a));
	json_object_object_add(root, "steps", steps_json_of(b, a));
	json_object_object_add(root, "predictions", predictions_json(b, a));

	arr = json_object_new_array();
	for (int i = 0; i < nr_rules; i++) {
		o = json_object_new_object();
		json_object_object_add(o, "rule", json_object_new_string(
			diff_rule_format(&rules[i], text, sizeof(text))));
		json_object_object_add(o, "fired", json_object_new_boolean(checks[i].fired));
		json_object_object_add(o, "measured", json_object_new_boolean(checks[i].measured));
		json_object_object_add(o, "change", jnum(checks[i].change));
		json_object_object_add(o, "line", json_object_new_string(checks[i].line));
		json_object_array_add(arr, o);
		failed |= checks[i].fired;
	}
	json_object_object_add(root, "rules", arr);
	json_object_object_add(root, "failed", json_object_new_boolean(failed));
	return root;
}

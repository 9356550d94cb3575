// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `pipeprof diff` (diff.h): reading two reports, and the --fail-if rules held against them;
 * diff_report.c prints the comparison. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <json-c/json.h>
#include "classify.h"
#include "diff.h"
#include "report.h"
#include "sanitize.h"

static const struct {
	const char *name;
	enum diff_metric metric;
} step_metrics[] = {
	{ "step_p50", DIFF_STEP_P50 },
	{ "step_p90", DIFF_STEP_P90 },
	{ "steps_per_s", DIFF_STEPS_PER_S },
};

#define NR_STEP_METRICS (sizeof(step_metrics) / sizeof(step_metrics[0]))

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, size, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static const char *skip_space(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

/* The metric named by len bytes at name, in any case, into rule. */
static bool metric_lookup(const char *name, size_t len, struct diff_rule *rule)
{
	for (size_t k = 0; k < NR_STEP_METRICS; k++)
		if (strlen(step_metrics[k].name) == len && !strncasecmp(name, step_metrics[k].name, len)) {
			rule->metric = step_metrics[k].metric;
			return true;
		}
	for (int s = 0; s < PP_NR_STATES; s++)
		if (strlen(state_name(s)) == len && !strncasecmp(name, state_name(s), len)) {
			rule->metric = DIFF_STATE;
			rule->state = s;
			return true;
		}
	if (len == strlen("verdict") && !strncasecmp(name, "verdict", len)) {
		rule->metric = DIFF_VERDICT;
		return true;
	}
	return false;
}

/* A decimal, its exponent too ("%g" writes one): strtod alone would take "inf", "nan" and hex. */
static size_t decimal_len(const char *p)
{
	size_t n = 0, digits = 0, exp;
	bool dot = false;

	if (p[n] == '+' || p[n] == '-')
		n++;
	for (;; n++) {
		if (isdigit((unsigned char)p[n]))
			digits++;
		else if (p[n] == '.' && !dot)
			dot = true;
		else
			break;
	}
	if (!digits)
		return 0;
	if (p[n] != 'e' && p[n] != 'E')
		return n;
	exp = n + 1;
	if (p[exp] == '+' || p[exp] == '-')
		exp++;
	if (!isdigit((unsigned char)p[exp]))
		return n;
	while (isdigit((unsigned char)p[exp]))
		exp++;
	return exp;
}

int diff_rule_parse(const char *text, struct diff_rule *rule, char *err, size_t err_size)
{
	const char *p, *name;
	size_t len;
	char num[64];

	*rule = (struct diff_rule){};
	p = skip_space(text);
	name = p;
	while (*p && !isspace((unsigned char)*p) && !strchr("<>!=", *p))
		p++;
	if (p == name)
		return fail(err, err_size, "no metric: give METRIC OP VALUE, e.g. step_p50>+10%%");
	if (!metric_lookup(name, p - name, rule))
		return fail(err, err_size, "unknown metric '%.*s' (step_p50, step_p90, steps_per_s, "
			    "verdict, or a state: running, runq, gpu_wait, io_wait, data_wait, "
			    "thread_wait, comm_wait, other)", (int)(p - name), name);
	p = skip_space(p);
	if (rule->metric == DIFF_VERDICT) {
		if (strncmp(p, "!=", 2))
			return fail(err, err_size, "verdict takes only verdict!=SAME");
		p = skip_space(p + 2);
		if (strncasecmp(p, "SAME", 4) || *skip_space(p + 4))
			return fail(err, err_size, "verdict takes only verdict!=SAME");
		rule->op = '!';
		rule->unit = DIFF_CHANGED;
		return 0;
	}
	if (*p != '>' && *p != '<')
		return fail(err, err_size, "no operator after the metric: give > or <");
	rule->op = *p++;
	if (*p == '=' || *p == '>' || *p == '<')
		return fail(err, err_size, "the operator is > or <, alone");
	p = skip_space(p);
	len = decimal_len(p);
	if (!len || len >= sizeof(num))
		return fail(err, err_size, "no number after '%c': give e.g. +10%% or +3pt", rule->op);
	memcpy(num, p, len);
	num[len] = '\0';
	rule->value = strtod(num, NULL);
	if (!isfinite(rule->value))
		return fail(err, err_size, "%s is out of range", num);
	p = skip_space(p + len);
	if (*p == '%') {
		rule->unit = DIFF_PERCENT;
		p++;
	} else if (!strncmp(p, "pt", 2)) {
		rule->unit = DIFF_POINTS;
		p += 2;
	} else {
		return fail(err, err_size, "the value needs a unit: %% (change relative to BEFORE) "
			    "or pt (points of a state's share)");
	}
	if (*skip_space(p))
		return fail(err, err_size, "unexpected text after the value: '%s'", skip_space(p));
	if (rule->unit == DIFF_POINTS && rule->metric != DIFF_STATE)
		return fail(err, err_size, "pt is for a state's share; step_p50, step_p90 and "
			    "steps_per_s change in %%");
	return 0;
}

static const char *metric_name(const struct diff_rule *rule, char *buf, size_t size)
{
	const char *name = "verdict";

	if (rule->metric == DIFF_STATE) {
		snprintf(buf, size, "%s", state_name(rule->state));
		for (char *c = buf; *c; c++)
			*c = tolower((unsigned char)*c);
		return buf;
	}
	for (size_t k = 0; k < NR_STEP_METRICS; k++)
		if (step_metrics[k].metric == rule->metric)
			name = step_metrics[k].name;
	snprintf(buf, size, "%s", name);
	return buf;
}

static const char *unit_suffix(enum diff_unit unit)
{
	return unit == DIFF_POINTS ? "pt" : "%";
}

const char *diff_rule_format(const struct diff_rule *rule, char *buf, size_t size)
{
	char name[32];

	metric_name(rule, name, sizeof(name));
	if (rule->unit == DIFF_CHANGED)
		snprintf(buf, size, "%s!=SAME", name);
	else
		snprintf(buf, size, "%s%c%+g%s", name, rule->op, rule->value, unit_suffix(rule->unit));
	return buf;
}

int diff_parse_json(const char *text, size_t len, struct json_object **doc, char *err,
		    size_t err_size)
{
	struct json_tokener *tok;
	enum json_tokener_error jerr;
	json_object *o;
	size_t end;

	*doc = NULL;
	if (!*skip_space(text))
		return fail(err, err_size, "empty: not a JSON document");
	if (len >= INT_MAX)
		return fail(err, err_size, "too large for a report (%zu bytes)", len);
	tok = json_tokener_new();
	if (!tok)
		return -ENOMEM;
	/* The terminating NUL goes in too: it ends a document that is a bare number. */
	o = json_tokener_parse_ex(tok, text, (int)len + 1);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!o || jerr != json_tokener_success) {
		json_object_put(o);
		if (jerr == json_tokener_continue || end >= len)
			return fail(err, err_size, "invalid JSON: it ends early (a truncated file?)");
		return fail(err, err_size, "invalid JSON at byte %zu: %s", end,
			    json_tokener_error_desc(jerr));
	}
	for (size_t i = end; i < len; i++)
		if (!isspace((unsigned char)text[i])) {
			json_object_put(o);
			return fail(err, err_size, "invalid JSON: more after the document, at byte %zu", i);
		}
	*doc = o;
	return 0;
}

/* o[key], or NULL when o is no object or lacks it. */
static json_object *member(json_object *o, const char *key)
{
	json_object *v;

	if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
		return NULL;
	return v;
}

static const char *string_of(json_object *o)
{
	return o && json_object_is_type(o, json_type_string) ? json_object_get_string(o) : NULL;
}

/* A finite number (json-c reads NaN and Infinity where JSON has none). */
static bool number_of(json_object *o, double *v)
{
	if (!o || !(json_object_is_type(o, json_type_double) || json_object_is_type(o, json_type_int)))
		return false;
	*v = json_object_get_double(o);
	return isfinite(*v);
}

static bool int_of(json_object *o, int *v)
{
	int64_t i;

	if (!o || !json_object_is_type(o, json_type_int))
		return false;
	i = json_object_get_int64(o);
	if (i < INT_MIN || i > INT_MAX)
		return false;
	*v = (int)i;
	return true;
}

static double positive_of(json_object *o)
{
	double v;

	return number_of(o, &v) && v > 0 ? v : 0;
}

static void read_states(json_object *states, struct diff_side *s)
{
	double f;

	for (int k = 0; k < PP_NR_STATES; k++) {
		if (!number_of(member(member(states, state_name(k)), "fraction"), &f))
			return;
		s->share[k] = 100 * f;
	}
	s->has_states = true;
}

static void read_predictions(json_object *arr, struct diff_side *s)
{
	size_t n;

	if (!arr || !json_object_is_type(arr, json_type_array))
		return;
	n = json_object_array_length(arr);
	for (size_t i = 0; i < n && s->nr_predictions < DIFF_MAX_PREDICTIONS; i++) {
		json_object *po = json_object_array_get_idx(arr, i);
		struct diff_prediction *p = &s->predictions[s->nr_predictions];

		*p = (struct diff_prediction){ .speedup = positive_of(member(po, "speedup")) };
		if (!p->speedup)
			continue;	/* withheld: nothing to hold against the next run */
		p->id = string_of(member(po, "id"));
		p->knob = string_of(member(po, "knob"));
		if (!p->knob)
			p->knob = p->id ? p->id : "?";
		int_of(member(po, "from"), &p->from);
		int_of(member(po, "to"), &p->to);
		s->nr_predictions++;
	}
}

int diff_side_read(struct json_object *doc, const char *label, const char *file,
		   struct diff_side *s, char *err, size_t err_size)
{
	const char *schema = string_of(member(doc, "schema"));
	json_object *steps, *o;

	*s = (struct diff_side){ .label = label, .file = file, .workers = -1 };
	if (!doc || !json_object_is_type(doc, json_type_object)) {
		fail(err, err_size, "not a pipeprof report: a JSON %s, not an object",
		     json_type_to_name(json_object_get_type(doc)));
		return -EPROTO;
	}
	if (!schema) {
		fail(err, err_size, "not a pipeprof report: no schema (want %s)", REPORT_SCHEMA);
		return -EPROTO;
	}
	if (strcmp(schema, REPORT_SCHEMA)) {
		fail(err, err_size, "schema is %.64s, not %s (write it with pipeprof -p PID -j)",
		     schema, REPORT_SCHEMA);
		return -EPROTO;
	}
	int_of(member(doc, "pid"), &s->pid);
	s->command = string_of(member(doc, "command"));
	s->window_s = positive_of(member(member(doc, "window"), "seconds"));
	o = member(doc, "partial");
	if (o && json_object_is_type(o, json_type_boolean) && json_object_get_boolean(o)) {
		s->partial_why = string_of(member(doc, "partial_why"));
		if (!s->partial_why)
			s->partial_why = "the report gives no reason";
	}
	o = member(doc, "verdict");
	s->verdict = string_of(member(o, "name"));
	s->verdict_line = string_of(member(o, "line"));
	read_states(member(member(doc, "trainer"), "states"), s);

	steps = member(doc, "steps");
	if (int_of(member(steps, "count"), &s->steps) && s->steps > 0) {
		s->p50_s = positive_of(member(steps, "p50_s"));
		s->p90_s = positive_of(member(steps, "p90_s"));
		s->per_second = positive_of(member(steps, "per_second"));
	} else {
		s->steps = 0;
	}
	s->steps_why_not = string_of(member(steps, "why_not"));

	o = member(doc, "model");
	if (!int_of(member(member(o, "inputs"), "workers"), &s->workers))
		s->workers = -1;
	read_predictions(member(o, "predictions"), s);
	return 0;
}

/* The metric's value in one report, or false with why it has none. */
static bool side_value(const struct diff_side *s, const struct diff_rule *rule, double *v,
		       char *why, size_t size)
{
	switch (rule->metric) {
	case DIFF_STEP_P50:
	case DIFF_STEP_P90:
	case DIFF_STEPS_PER_S:
		*v = rule->metric == DIFF_STEP_P50 ? s->p50_s :
		     rule->metric == DIFF_STEP_P90 ? s->p90_s : s->per_second;
		if (*v > 0)
			return true;
		if (s->steps)
			snprintf(why, size, "%s (%s) lacks it", s->label, s->file);
		else
			snprintf(why, size, "no steps in %s (%s)", s->label, s->file);
		return false;
	case DIFF_STATE:
		if (!s->has_states) {
			snprintf(why, size, "no trainer's states in %s (%s)", s->label, s->file);
			return false;
		}
		*v = s->share[rule->state];
		return true;
	case DIFF_VERDICT:
		break;
	}
	snprintf(why, size, "not a number");
	return false;
}

double diff_relative_pct(double before, double after)
{
	if (before == 0)
		return after == 0 ? 0 : after > 0 ? INFINITY : -INFINITY;
	return 100 * (after - before) / before;
}

bool diff_change(const struct diff_side *before, const struct diff_side *after,
		 const struct diff_rule *rule, double *change, char *why, size_t why_size)
{
	double b, a;

	if (!side_value(before, rule, &b, why, why_size) || !side_value(after, rule, &a, why, why_size))
		return false;
	*change = rule->unit == DIFF_POINTS ? a - b : diff_relative_pct(b, a);
	return true;
}

/* Terminal-safe text of a string from a report (any bytes a traced job chose). */
static const char *shown(char *buf, size_t size, const char *s)
{
	return s ? san_text(buf, size, s, strlen(s)) : "?";
}

void diff_rule_check(const struct diff_rule *rule, const struct diff_side *before,
		     const struct diff_side *after, struct diff_check *c)
{
	char text[64], name[32], why[256], vb[128], va[128];

	*c = (struct diff_check){ .change = NAN };
	diff_rule_format(rule, text, sizeof(text));
	metric_name(rule, name, sizeof(name));
	if (rule->metric == DIFF_VERDICT) {
		const struct diff_side *lacking = !before->verdict ? before : !after->verdict ? after : NULL;

		if (lacking) {
			c->fired = true;
			snprintf(c->line, sizeof(c->line), "FAIL: %s cannot be checked: no verdict in %s (%s)",
				 text, lacking->label, shown(vb, sizeof(vb), lacking->file));
			return;
		}
		c->measured = true;
		c->fired = strcmp(before->verdict, after->verdict) != 0;
		if (c->fired)
			snprintf(c->line, sizeof(c->line), "FAIL: verdict changed: %s -> %s",
				 shown(vb, sizeof(vb), before->verdict), shown(va, sizeof(va), after->verdict));
		else
			snprintf(c->line, sizeof(c->line), "pass: verdict unchanged: %s",
				 shown(vb, sizeof(vb), before->verdict));
		return;
	}
	if (!diff_change(before, after, rule, &c->change, why, sizeof(why))) {
		c->fired = true;
		c->change = NAN;
		snprintf(c->line, sizeof(c->line), "FAIL: %s cannot be checked: %s", text,
			 shown(vb, sizeof(vb), why));
		return;
	}
	c->measured = true;
	c->fired = rule->op == '>' ? c->change > rule->value : c->change < rule->value;
	snprintf(c->line, sizeof(c->line), "%s: %s %+.1f%s %s%c %+g%s", c->fired ? "FAIL" : "pass",
		 name, c->change, unit_suffix(rule->unit), c->fired ? "" : "not ", rule->op,
		 rule->value, unit_suffix(rule->unit));
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <json-c/json.h>
#include "diff.h"
#include "unit.h"

/* A report with the trainer's states and steps that diff reads; fmt fills the variable parts. */
#define REPORT_FMT "{\"schema\": \"pipeprof.report/v1\", \"pid\": %d, \"command\": \"%s\", " \
	"\"window\": {\"seconds\": 10.0}, \"partial\": false, " \
	"\"verdict\": {\"name\": \"%s\", \"line\": \"%s: the line\"}, " \
	"\"trainer\": {\"states\": {\"RUNNING\": {\"fraction\": %g}, \"RUNQ\": {\"fraction\": 0.01}, " \
	"\"GPU_WAIT\": {\"fraction\": 0}, \"IO_WAIT\": {\"fraction\": 0}, " \
	"\"DATA_WAIT\": {\"fraction\": %g}, \"THREAD_WAIT\": {\"fraction\": 0}, " \
	"\"COMM_WAIT\": {\"fraction\": 0}, \"OTHER\": {\"fraction\": 0.01}}}, " \
	"\"steps\": {\"count\": %d, \"why_not\": null, \"per_second\": %g, \"p50_s\": %g, " \
	"\"p90_s\": %g}, " \
	"\"model\": {\"inputs\": {\"workers\": %d}, \"predictions\": [" \
	"{\"id\": \"num_workers\", \"knob\": \"num_workers\", \"from\": 1, \"to\": 2, " \
	"\"speedup\": 1.5, \"withheld\": null}, " \
	"{\"id\": \"intra_op_threads\", \"knob\": \"torch.set_num_threads\", \"from\": 1, " \
	"\"to\": 2, \"speedup\": null, \"withheld\": \"one compute thread\"}]}}"

struct fixture {
	json_object *doc;
	struct diff_side side;
};

static bool load(struct fixture *f, const char *label, const char *text)
{
	char err[256] = "";
	int ret;

	*f = (struct fixture){};
	ret = diff_parse_json(text, strlen(text), &f->doc, err, sizeof(err));
	if (!CHECK_MSG(ret == 0, "parse: %d %s", ret, err))
		return false;
	ret = diff_side_read(f->doc, label, label[0] == 'B' ? "b.json" : "a.json", &f->side, err,
			     sizeof(err));
	return CHECK_MSG(ret == 0, "read: %d %s", ret, err);
}

static bool load_report(struct fixture *f, const char *label, const char *verdict, double running,
			double data_wait, int steps, double per_s, double p50, double p90, int workers)
{
	char text[4096];

	snprintf(text, sizeof(text), REPORT_FMT, 4242, "python3 train.py", verdict, verdict,
		 running, data_wait, steps, per_s, p50, p90, workers);
	return load(f, label, text);
}

static void unload(struct fixture *f)
{
	json_object_put(f->doc);
	f->doc = NULL;
}

static int parse(const char *text, struct diff_rule *r, char *err, size_t size)
{
	err[0] = '\0';
	return diff_rule_parse(text, r, err, size);
}

TEST(test_rules_that_parse)
{
	static const struct {
		const char *text, *canonical;
		enum diff_metric metric;
		int state;
		char op;
		enum diff_unit unit;
		double value;
	} cases[] = {
		{ "step_p50>+10%", "step_p50>+10%", DIFF_STEP_P50, 0, '>', DIFF_PERCENT, 10 },
		{ "step_p90>10%", "step_p90>+10%", DIFF_STEP_P90, 0, '>', DIFF_PERCENT, 10 },
		{ "steps_per_s<-10%", "steps_per_s<-10%", DIFF_STEPS_PER_S, 0, '<', DIFF_PERCENT, -10 },
		{ "data_wait>+5pt", "data_wait>+5pt", DIFF_STATE, PP_DATA_WAIT, '>', DIFF_POINTS, 5 },
		{ "DATA_WAIT>+2.5%", "data_wait>+2.5%", DIFF_STATE, PP_DATA_WAIT, '>', DIFF_PERCENT, 2.5 },
		{ " gpu_wait < -3 pt ", "gpu_wait<-3pt", DIFF_STATE, PP_GPU_WAIT, '<', DIFF_POINTS, -3 },
		{ "running<-.5pt", "running<-0.5pt", DIFF_STATE, PP_RUNNING, '<', DIFF_POINTS, -0.5 },
		{ "other>0pt", "other>+0pt", DIFF_STATE, PP_OTHER, '>', DIFF_POINTS, 0 },
		{ "thread_wait>+1pt", "thread_wait>+1pt", DIFF_STATE, PP_THREAD_WAIT, '>', DIFF_POINTS, 1 },
		{ "verdict!=SAME", "verdict!=SAME", DIFF_VERDICT, 0, '!', DIFF_CHANGED, 0 },
		{ "verdict != same", "verdict!=SAME", DIFF_VERDICT, 0, '!', DIFF_CHANGED, 0 },
		/* What the canonical form writes of small and large values parses back. */
		{ "step_p50>1e-05%", "step_p50>+1e-05%", DIFF_STEP_P50, 0, '>', DIFF_PERCENT, 1e-5 },
		{ "step_p50<-2E+6%", "step_p50<-2e+06%", DIFF_STEP_P50, 0, '<', DIFF_PERCENT, -2e6 },
	};
	char err[256], buf[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct diff_rule r;

		if (!CHECK_MSG(parse(cases[i].text, &r, err, sizeof(err)) == 0, "%s: %s",
			       cases[i].text, err))
			continue;
		CHECK_EQ_INT(r.metric, cases[i].metric);
		if (r.metric == DIFF_STATE)
			CHECK_EQ_INT(r.state, cases[i].state);
		CHECK_EQ_INT(r.op, cases[i].op);
		CHECK_EQ_INT(r.unit, cases[i].unit);
		CHECK_MSG(r.value == cases[i].value, "%s: value %g", cases[i].text, r.value);
		CHECK_STR(diff_rule_format(&r, buf, sizeof(buf)), cases[i].canonical);
	}
}

TEST(test_rules_refused)
{
	static const struct {
		const char *text, *why;
	} cases[] = {
		{ "", "no metric" },
		{ ">+10%", "no metric" },
		{ "step_p99>+10%", "unknown metric 'step_p99'" },
		{ "data-wait>+1pt", "unknown metric 'data-wait'" },
		{ "step_p50 +10%", "no operator" },
		{ "step_p50", "no operator" },
		{ "step_p50=+10%", "no operator" },
		{ "step_p50>=+10%", "> or <, alone" },
		{ "step_p50>>10%", "> or <, alone" },
		{ "step_p50>", "no number" },
		{ "step_p50>+%", "no number" },
		{ "step_p50>inf%", "no number" },
		{ "step_p50>nan%", "no number" },
		{ "step_p50>0x10%", "unit" },
		{ "step_p50>1e%", "unit" },
		{ "step_p50>1e999%", "1e999 is out of range" },
		{ "step_p50>+10", "unit" },
		{ "step_p50>+10ms", "unit" },
		{ "step_p50>+10%%", "unexpected text after the value: '%'" },
		{ "step_p50>+10% junk", "unexpected text" },
		{ "step_p50>+3pt", "pt is for a state's share" },
		{ "steps_per_s<-3pt", "pt is for a state's share" },
		{ "verdict>+1%", "verdict!=SAME" },
		{ "verdict!=GPU-BOUND", "verdict!=SAME" },
		{ "verdict!=SAMEX", "verdict!=SAME" },
		{ "step_p50>1111111111111111111111111111111111111111111111111111111111111111111%",
		  "no number" },
	};
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct diff_rule r;

		CHECK_MSG(parse(cases[i].text, &r, err, sizeof(err)) == -EINVAL, "%s parsed",
			  cases[i].text);
		CHECK_MSG(strstr(err, cases[i].why), "%s: \"%s\" lacks \"%s\"", cases[i].text, err,
			  cases[i].why);
	}
}

TEST(test_json_documents)
{
	static const struct {
		const char *text, *why;	/* NULL: parses */
	} cases[] = {
		{ "{}", NULL },
		{ "  {\"a\": [1, 2]}\n\n", NULL },
		{ "3", NULL },
		{ "", "empty" },
		{ " \n", "empty" },
		{ "{\"a\": ", "ends early" },
		{ "{\"a\": 1", "ends early" },
		{ "{\"a\": 1} x", "more after the document, at byte 9" },
		{ "{} {}", "more after the document" },
		{ "{\"a\" 1}", "invalid JSON at byte" },
		{ "[1, }", "invalid JSON at byte" },
	};
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_object *doc = (json_object *)1;
		int ret;

		err[0] = '\0';
		ret = diff_parse_json(cases[i].text, strlen(cases[i].text), &doc, err, sizeof(err));
		if (!cases[i].why) {
			CHECK_MSG(ret == 0 && doc, "\"%s\": %d %s", cases[i].text, ret, err);
		} else {
			CHECK_MSG(ret == -EINVAL && !doc, "\"%s\" parsed", cases[i].text);
			CHECK_MSG(strstr(err, cases[i].why), "\"%s\": \"%s\" lacks \"%s\"",
				  cases[i].text, err, cases[i].why);
		}
		if (ret == 0)
			json_object_put(doc);
	}
}

TEST(test_other_documents_refused)
{
	static const struct {
		const char *text, *why;
	} cases[] = {
		{ "[]", "a JSON array, not an object" },
		{ "3", "a JSON int, not an object" },
		{ "{}", "no schema" },
		{ "{\"schema\": 1}", "no schema" },
		{ "{\"schema\": \"pipeprof.hist/v1\"}", "schema is pipeprof.hist/v1, not pipeprof.report/v1" },
		{ "{\"schema\": \"pipeprof.report/v2\"}", "schema is pipeprof.report/v2" },
	};
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct diff_side s;
		json_object *doc;

		if (!CHECK(diff_parse_json(cases[i].text, strlen(cases[i].text), &doc, err,
					   sizeof(err)) == 0))
			continue;
		err[0] = '\0';
		CHECK_EQ_INT(diff_side_read(doc, "BEFORE", "x.json", &s, err, sizeof(err)), -EPROTO);
		CHECK_MSG(strstr(err, cases[i].why), "%s: \"%s\" lacks \"%s\"", cases[i].text, err,
			  cases[i].why);
		json_object_put(doc);
	}
}

TEST(test_side_read)
{
	struct fixture f;

	if (load_report(&f, "BEFORE", "DATA-LOADING BOUND", 0.30, 0.67, 121, 12.03, 0.08, 0.112, 1)) {
		const struct diff_side *s = &f.side;

		CHECK_EQ_INT(s->pid, 4242);
		CHECK_STR(s->command, "python3 train.py");
		CHECK(s->window_s == 10.0);
		CHECK(!s->partial_why);
		CHECK_STR(s->verdict, "DATA-LOADING BOUND");
		CHECK_STR(s->verdict_line, "DATA-LOADING BOUND: the line");
		CHECK(s->has_states);
		CHECK(fabs(s->share[PP_RUNNING] - 30) < 1e-9);
		CHECK(fabs(s->share[PP_DATA_WAIT] - 67) < 1e-9);
		CHECK(fabs(s->share[PP_OTHER] - 1) < 1e-9);
		CHECK_EQ_INT(s->steps, 121);
		CHECK(s->p50_s == 0.08 && s->p90_s == 0.112 && s->per_second == 12.03);
		CHECK_EQ_INT(s->workers, 1);
		/* The withheld thread prediction has no speed-up to hold against anything. */
		CHECK_EQ_INT(s->nr_predictions, 1);
		CHECK_STR(s->predictions[0].id, "num_workers");
		CHECK_EQ_INT(s->predictions[0].from, 1);
		CHECK_EQ_INT(s->predictions[0].to, 2);
		CHECK(s->predictions[0].speedup == 1.5);
	}
	unload(&f);

	/* Steps counted 0: their figures are not measurements, whatever the numbers say. */
	if (load_report(&f, "AFTER", "CPU-BOUND", 0.9, 0.05, 0, 12, 0.08, 0.1, 2)) {
		CHECK_EQ_INT(f.side.steps, 0);
		CHECK(f.side.p50_s == 0 && f.side.p90_s == 0 && f.side.per_second == 0);
	}
	unload(&f);

	/* A report of its schema with nothing else: every field unset, nothing refused. */
	if (load(&f, "AFTER", "{\"schema\": \"pipeprof.report/v1\", \"trainer\": null, "
		 "\"partial\": true, \"steps\": {\"count\": \"many\"}, \"model\": {\"inputs\": "
		 "{\"workers\": 2.5}, \"predictions\": {}}}")) {
		const struct diff_side *s = &f.side;

		CHECK(!s->pid && !s->command && !s->verdict && !s->verdict_line);
		CHECK(!s->has_states);
		CHECK_STR(s->partial_why, "the report gives no reason");
		CHECK_EQ_INT(s->steps, 0);
		CHECK_EQ_INT(s->workers, -1);
		CHECK_EQ_INT(s->nr_predictions, 0);
	}
	unload(&f);

	/* One state missing: no shares at all rather than a 0 that was not measured. */
	if (load(&f, "AFTER", "{\"schema\": \"pipeprof.report/v1\", \"trainer\": {\"states\": "
		 "{\"RUNNING\": {\"fraction\": 1}}}, \"steps\": {\"count\": 3, \"p50_s\": NaN, "
		 "\"p90_s\": -1, \"per_second\": 2}}")) {
		CHECK(!f.side.has_states);
		CHECK_EQ_INT(f.side.steps, 3);
		CHECK(f.side.p50_s == 0 && f.side.p90_s == 0 && f.side.per_second == 2);
	}
	unload(&f);
}

static void check_rule(const char *text, const struct diff_side *b, const struct diff_side *a,
		       bool fired, const char *line)
{
	struct diff_rule r;
	struct diff_check c;
	char err[256];

	if (!CHECK_MSG(parse(text, &r, err, sizeof(err)) == 0, "%s: %s", text, err))
		return;
	diff_rule_check(&r, b, a, &c);
	CHECK_MSG(c.fired == fired, "%s: fired %d", text, c.fired);
	CHECK_STR(c.line, line);
}

TEST(test_rule_checks)
{
	struct fixture b, a, none;

	if (!load_report(&b, "BEFORE", "DATA-LOADING BOUND", 0.30, 0.672, 121, 12.03, 0.08, 0.112, 1) ||
	    !load_report(&a, "AFTER", "DATA-LOADING BOUND", 0.21, 0.762, 98, 9.79, 0.0985, 0.1391, 1) ||
	    !load_report(&none, "AFTER", "CPU-BOUND", 0.9, 0.0, 0, 0, 0, 0, 1))
		goto cleanup;
	check_rule("step_p50>+10%", &b.side, &a.side, true, "FAIL: step_p50 +23.1% > +10%");
	check_rule("step_p50>+25%", &b.side, &a.side, false, "pass: step_p50 +23.1% not > +25%");
	check_rule("step_p90>+20%", &b.side, &a.side, true, "FAIL: step_p90 +24.2% > +20%");
	check_rule("steps_per_s<-10%", &b.side, &a.side, true, "FAIL: steps_per_s -18.6% < -10%");
	check_rule("steps_per_s<-20%", &b.side, &a.side, false, "pass: steps_per_s -18.6% not < -20%");
	check_rule("data_wait>+5pt", &b.side, &a.side, true, "FAIL: data_wait +9.0pt > +5pt");
	check_rule("data_wait>+10pt", &b.side, &a.side, false, "pass: data_wait +9.0pt not > +10pt");
	check_rule("running<-5pt", &b.side, &a.side, true, "FAIL: running -9.0pt < -5pt");
	check_rule("data_wait>+10%", &b.side, &a.side, true, "FAIL: data_wait +13.4% > +10%");
	/* From 0 any share is an infinite change, and nothing to nothing none. */
	check_rule("data_wait>+1000%", &none.side, &a.side, true, "FAIL: data_wait +inf% > +1000%");
	check_rule("gpu_wait>+0%", &b.side, &a.side, false, "pass: gpu_wait +0.0% not > +0%");
	check_rule("verdict!=SAME", &b.side, &a.side, false, "pass: verdict unchanged: DATA-LOADING BOUND");
	check_rule("verdict!=SAME", &b.side, &none.side, true,
		   "FAIL: verdict changed: DATA-LOADING BOUND -> CPU-BOUND");
	/* A gate does not pass on a run it cannot measure. */
	check_rule("step_p50>+10%", &b.side, &none.side, true,
		   "FAIL: step_p50>+10% cannot be checked: no steps in AFTER (a.json)");
	check_rule("steps_per_s<-10%", &none.side, &b.side, true,
		   "FAIL: steps_per_s<-10% cannot be checked: no steps in AFTER (a.json)");
	none.side.verdict = NULL;
	check_rule("verdict!=SAME", &b.side, &none.side, true,
		   "FAIL: verdict!=SAME cannot be checked: no verdict in AFTER (a.json)");
	none.side.has_states = false;
	check_rule("data_wait>+1pt", &b.side, &none.side, true,
		   "FAIL: data_wait>+1pt cannot be checked: no trainer's states in AFTER (a.json)");
cleanup:
	unload(&b);
	unload(&a);
	unload(&none);
}

static char *text_of(const struct diff_side *b, const struct diff_side *a,
		     const struct diff_rule *rules, const struct diff_check *checks, int n,
		     bool verbose)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	diff_print_text(f, b, a, rules, checks, n, verbose);
	fclose(f);
	return buf;
}

TEST(test_text)
{
	struct fixture b, a, none;
	struct diff_rule rules[2];
	struct diff_check checks[2];
	char err[256], *t = NULL;

	if (!load_report(&b, "BEFORE", "DATA-LOADING BOUND", 0.30, 0.672, 121, 12.03, 0.08, 0.112, 1) ||
	    !load_report(&a, "AFTER", "CPU-BOUND", 0.79, 0.18, 176, 17.6, 0.055, 0.0712, 2) ||
	    !load_report(&none, "AFTER", "CPU-BOUND", 0.30, 0.672, 0, 0, 0, 0, 1))
		goto cleanup;
	parse("step_p50>+10%", &rules[0], err, sizeof(err));
	parse("verdict!=SAME", &rules[1], err, sizeof(err));
	for (int i = 0; i < 2; i++)
		diff_rule_check(&rules[i], &b.side, &a.side, &checks[i]);

	t = text_of(&b.side, &a.side, rules, checks, 2, false);
	if (!CHECK(t))
		goto cleanup;
	CHECK(strstr(t, "BEFORE  b.json: pid 4242, 10.0 s traced: python3 train.py\n"));
	CHECK(strstr(t, "Verdict: DATA-LOADING BOUND -> CPU-BOUND\n"));
	CHECK(strstr(t, "  DATA_WAIT        67.2%     18.0%  -49.2 pt\n"));
	CHECK(!strstr(t, "  RUNQ "));
	CHECK(strstr(t, "(6 other states moved less than 0.5 points: -v lists them)"));
	CHECK(strstr(t, "  p50            80.0 ms   55.0 ms    -31.2%\n"));
	CHECK(strstr(t, "  steps/s          12.03     17.60    +46.3%\n"));
	CHECK(strstr(t, "num_workers 1 -> 2: predicted 1.50x, measured 1.46x (2.5% under the prediction)\n"));
	/* Only the rule that fired, unless -v. */
	CHECK(strstr(t, "\nFAIL: verdict changed: DATA-LOADING BOUND -> CPU-BOUND\n"));
	CHECK(!strstr(t, "pass:"));
	free(t);

	t = text_of(&b.side, &a.side, rules, checks, 2, true);
	if (!CHECK(t))
		goto cleanup;
	CHECK(strstr(t, "  RUNQ              1.0%      1.0%   +0.0 pt\n"));
	CHECK(!strstr(t, "other states"));
	CHECK(strstr(t, "pass: step_p50 -31.2% not > +10%\n"));
	free(t);

	/* No steps after: said, with dashes where a figure would be, and no ratio. */
	t = text_of(&b.side, &none.side, NULL, NULL, 0, false);
	if (!CHECK(t))
		goto cleanup;
	CHECK(strstr(t, "  p50            80.0 ms         -         -\n"));
	CHECK(strstr(t, "  count              121         0\n"));
	CHECK(strstr(t, "  no steps in AFTER: none detected in its window\n"));
	CHECK(strstr(t, "no state moved 0.5 points or more"));
	CHECK(strstr(t, "num_workers 1 -> 2: predicted 1.50x; not a test of it: AFTER has 1 worker, not 2\n"));
	free(t);

	/* What a traced job named itself reaches the terminal inert. */
	none.side.command = "evil\x1b[2Jjob";
	none.side.has_states = false;
	t = text_of(&b.side, &none.side, NULL, NULL, 0, false);
	if (!CHECK(t))
		goto cleanup;
	CHECK(strstr(t, "evil\\x1b[2Jjob"));
	CHECK(!strchr(t, '\x1b'));
	CHECK(strstr(t, "no trainer's states in AFTER"));
cleanup:
	free(t);
	unload(&b);
	unload(&a);
	unload(&none);
}

TEST(test_json)
{
	struct fixture b, a;
	struct diff_rule rule;
	struct diff_check check;
	json_object *o = NULL, *v;
	char err[256];

	if (!load_report(&b, "BEFORE", "DATA-LOADING BOUND", 0.30, 0.672, 121, 12.03, 0.08, 0.112, 1) ||
	    !load_report(&a, "AFTER", "DATA-LOADING BOUND", 0.21, 0.762, 98, 9.79, 0.0985, 0.1391, 2))
		goto cleanup;
	parse("step_p50>+10%", &rule, err, sizeof(err));
	diff_rule_check(&rule, &b.side, &a.side, &check);
	o = diff_json(&b.side, &a.side, &rule, &check, 1);
	if (!CHECK(o))
		goto cleanup;
	CHECK(json_object_object_get_ex(o, "schema", &v) && !strcmp(json_object_get_string(v), DIFF_SCHEMA));
	CHECK(json_object_object_get_ex(o, "failed", &v) && json_object_get_boolean(v));
	CHECK(json_object_object_get_ex(o, "verdict", &v) && json_object_object_get_ex(v, "changed", &v) &&
	      !json_object_get_boolean(v));
	CHECK(json_object_object_get_ex(o, "states", &v) && json_object_object_get_ex(v, "DATA_WAIT", &v) &&
	      json_object_object_get_ex(v, "change_pt", &v) && fabs(json_object_get_double(v) - 9) < 1e-9);
	CHECK(json_object_object_get_ex(o, "steps", &v) && json_object_object_get_ex(v, "p50_s", &v) &&
	      json_object_object_get_ex(v, "change_pct", &v) && fabs(json_object_get_double(v) - 23.125) < 1e-9);
	/* Six significant digits, not json-c's seventeen. */
	CHECK(strstr(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
		      "\"before\":12.03,"));
	CHECK(json_object_object_get_ex(o, "predictions", &v) && json_object_array_length(v) == 1);
	v = json_object_array_get_idx(v, 0);
	CHECK(json_object_object_get_ex(v, "tested", &v) && json_object_get_boolean(v));
	CHECK(json_object_object_get_ex(o, "rules", &v) && json_object_array_length(v) == 1);
	v = json_object_array_get_idx(v, 0);
	CHECK(json_object_object_get_ex(v, "rule", &v) && !strcmp(json_object_get_string(v), "step_p50>+10%"));
cleanup:
	json_object_put(o);
	unload(&b);
	unload(&a);
}

int main(void)
{
	RUN_TEST(test_rules_that_parse);
	RUN_TEST(test_rules_refused);
	RUN_TEST(test_json_documents);
	RUN_TEST(test_other_documents_refused);
	RUN_TEST(test_side_read);
	RUN_TEST(test_rule_checks);
	RUN_TEST(test_text);
	RUN_TEST(test_json);
	return unit_summary();
}

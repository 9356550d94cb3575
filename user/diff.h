/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `pipeprof diff`: two pipeprof.report/v1 documents side by side (verdict, the trainer's state
 * shares, step time, steps/s, BEFORE's predictions against AFTER's rate), and the --fail-if
 * rules a CI job holds them to. Pure: fed parsed documents, writes a stream; diff_cmd.c reads
 * the files.
 */
#ifndef PIPEPROF_DIFF_H
#define PIPEPROF_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "pipeprof.h"

#define DIFF_SCHEMA "pipeprof.diff/v1"
/* A state's share that moved less than this (points) is left out of the text unless -v. */
#define DIFF_MOVED_PT 0.5
/* A report holds at most MAX_PREDICTIONS (predict.h); room for a later version's few more. */
#define DIFF_MAX_PREDICTIONS 16
#define DIFF_MAX_RULES 32
/* Reports of jobs with tens of thousands of threads run to tens of MB; no report is this big. */
#define DIFF_MAX_FILE_BYTES (512UL << 20)

enum diff_metric {
	DIFF_STEP_P50,		/* steps.p50_s */
	DIFF_STEP_P90,		/* steps.p90_s */
	DIFF_STEPS_PER_S,	/* steps.per_second */
	DIFF_STATE,		/* trainer.states.STATE.fraction, in percent */
	DIFF_VERDICT,		/* verdict.name */
};

enum diff_unit {
	DIFF_PERCENT,		/* "+10%": the metric's change relative to BEFORE */
	DIFF_POINTS,		/* "+3pt": a share's change in percentage points */
	DIFF_CHANGED,		/* "verdict!=SAME" */
};

/* METRIC OP VALUE: fires when the metric's change is beyond value in op's direction. */
struct diff_rule {
	enum diff_metric metric;
	enum pp_state state;	/* DIFF_STATE's */
	char op;		/* '>' or '<'; '!' for verdict!=SAME */
	enum diff_unit unit;
	double value;		/* percent or points, signed */
};

struct diff_prediction {
	const char *id;		/* "num_workers", "intra_op_threads" */
	const char *knob;	/* what the user changes: "num_workers", "torch.set_num_threads" */
	int from, to;
	double speedup;		/* predicted steps/s over BEFORE's */
};

/*
 * What diff reads of one report. Strings point into the parsed document, which must outlive
 * this; NULL and 0 stand for what the report does not hold.
 */
struct diff_side {
	const char *label;		/* "BEFORE", "AFTER" */
	const char *file;
	int pid;
	const char *command;
	double window_s;
	const char *partial_why;	/* the report's figures are partial: why; else NULL */
	const char *verdict, *verdict_line;
	bool has_states;		/* trainer.states was there */
	double share[PP_NR_STATES];	/* percent of the trainer's wall time */
	int steps;			/* steps.count */
	const char *steps_why_not;
	double p50_s, p90_s, per_second;	/* 0: not measured */
	int workers;			/* model.inputs.workers; -1: not in the report */
	int nr_predictions;		/* those with a speedup; withheld ones are left out */
	struct diff_prediction predictions[DIFF_MAX_PREDICTIONS];
};

/* One rule held against two reports. */
struct diff_check {
	bool fired;
	bool measured;		/* false: a report lacks the metric, and the rule fires */
	double change;		/* percent or points; NaN when not measured or for the verdict */
	char line[320];		/* "FAIL: step_p50 +23.1% > +10%", or "pass: ..." */
};

/*
 * Parses RULE (METRIC OP VALUE, spaces allowed between them): METRIC step_p50, step_p90,
 * steps_per_s, a trainer state's name in any case (data_wait) or verdict; OP '>' or '<';
 * VALUE a signed number and '%' (relative change) or 'pt' (points, shares only);
 * verdict takes only "!=SAME". Returns 0, or -EINVAL with the reason in err.
 */
int diff_rule_parse(const char *text, struct diff_rule *rule, char *err, size_t err_size);
/* The rule in its canonical form: "step_p50>+10%", "data_wait>+5pt", "verdict!=SAME". */
const char *diff_rule_format(const struct diff_rule *rule, char *buf, size_t size);

/*
 * Parses a whole document (JSON, nothing after it but white space) into *doc, to be freed with
 * json_object_put(). Returns 0, or -EINVAL with "invalid JSON ..." in err.
 */
struct json_object;
int diff_parse_json(const char *text, size_t len, struct json_object **doc, char *err,
		    size_t err_size);
/*
 * Fills *side from a pipeprof.report/v1 document; any other document (another schema, not an
 * object) is -EPROTO with the reason in err. Fields the report lacks are left unset, not errors.
 */
int diff_side_read(struct json_object *doc, const char *label, const char *file,
		   struct diff_side *side, char *err, size_t err_size);

/* The metric's change from BEFORE to AFTER (percent or points, as rule->unit says); false when
 * either report lacks it, with the reason in why. */
bool diff_change(const struct diff_side *before, const struct diff_side *after,
		 const struct diff_rule *rule, double *change, char *why, size_t why_size);
/* AFTER's change relative to BEFORE, in percent; from 0 any other value is an infinite
 * change. */
double diff_relative_pct(double before, double after);
/* Holds rule against the two reports; a rule whose metric either lacks fires. */
void diff_rule_check(const struct diff_rule *rule, const struct diff_side *before,
		     const struct diff_side *after, struct diff_check *check);

/* diff_report.c. The comparison as text; verbose lists every state, and rules that pass. */
void diff_print_text(FILE *out, const struct diff_side *before, const struct diff_side *after,
		     const struct diff_rule *rules, const struct diff_check *checks, int nr_rules,
		     bool verbose);
/* The same as a pipeprof.diff/v1 object (NULL when out of memory). */
struct json_object *diff_json(const struct diff_side *before, const struct diff_side *after,
			      const struct diff_rule *rules, const struct diff_check *checks,
			      int nr_rules);

#endif

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `pipeprof diff`: two JSON reports compared, and a gate for CI. No tracing, no privilege. */
#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "diff.h"
#include "diff_cmd.h"
#include "sanitize.h"

static const char diff_doc[] =
	"Compare two reports written by 'pipeprof -p PID -j' (schema\n"
	"pipeprof.report/v1): the verdict, the trainer's state shares (in points), step\n"
	"time and steps/s (relative), and each of BEFORE's predictions beside the\n"
	"ratio of AFTER's steps/s to BEFORE's. With --fail-if, a gate for CI.\v"
	"RULES (--fail-if, repeatable): METRIC OP VALUE\n"
	"  METRIC  step_p50, step_p90, steps_per_s, or a state of the trainer:\n"
	"          running, runq, gpu_wait, io_wait, data_wait, thread_wait,\n"
	"          comm_wait, other\n"
	"  OP      > or <\n"
	"  VALUE   +10% or -5%: the change relative to BEFORE; +3pt: the change of a\n"
	"          state's share in percentage points\n"
	"  verdict!=SAME fires when the verdict changed. A rule whose metric either\n"
	"  report lacks (no steps found) fires too: a gate does not pass unmeasured.\n"
	"\n"
	"EXAMPLES:\n"
	"  sudo pipeprof -p 4242 -d 30 -j > before.json\n"
	"  sudo pipeprof -p 4377 -d 30 -j > after.json\n"
	"  pipeprof diff before.json after.json\n"
	"  pipeprof diff -j before.json after.json    # JSON (pipeprof.diff/v1)\n"
	"  pipeprof diff before.json after.json --fail-if 'step_p50>+10%' \\\n"
	"      --fail-if 'data_wait>+5pt' --fail-if 'steps_per_s<-10%'\n"
	"\n"
	"Exit status: 0 no rule fired, 1 a rule fired (each printed as a line FAIL:\n"
	"...; on standard error with -j), 2 bad arguments, a file that is not a\n"
	"readable pipeprof.report/v1 document, or output that could not be written.";

enum { OPT_FAIL_IF = 0x100 };

static const struct argp_option diff_options[] = {
	{ "fail-if", OPT_FAIL_IF, "RULE", 0, "Exit 1 when RULE holds (METRIC OP VALUE, e.g. "
	  "'step_p50>+10%'; repeatable)", 0 },
	{ "json", 'j', NULL, 0, "Print the comparison as JSON (schema pipeprof.diff/v1)", 0 },
	{ "verbose", 'v', NULL, 0, "Every state, moved or not, and the rules that pass", 0 },
	{},
};

/* Terminal-safe: a file name or a rule is whatever bytes the caller gave. */
static const char *shown(char *buf, size_t size, const char *s)
{
	return san_text(buf, size, s, strlen(s));
}

static error_t diff_parse(int key, char *arg, struct argp_state *state)
{
	struct diff_cmd_opts *o = state->input;
	char err[256], text[128], why[SAN_TEXT_SIZE(256)];

	switch (key) {
	case OPT_FAIL_IF:
		if (o->nr_rules == DIFF_MAX_RULES) {
			argp_failure(state, 2, 0, "at most %d --fail-if rules", DIFF_MAX_RULES);
			return EINVAL;
		}
		if (diff_rule_parse(arg, &o->rules[o->nr_rules], err, sizeof(err))) {
			/* One line, without argp's "Try --help": the rule and what is wrong with it. */
			argp_failure(state, 2, 0, "--fail-if '%s': %s", shown(text, sizeof(text), arg),
				     shown(why, sizeof(why), err));
			return EINVAL;
		}
		o->nr_rules++;
		break;
	case 'j':
		o->json = true;
		break;
	case 'v':
		o->verbose = true;
		break;
	case ARGP_KEY_ARG:
		if (!*arg) {
			argp_error(state, "an empty file name");
			return EINVAL;
		}
		if (!o->before) {
			o->before = arg;
		} else if (!o->after) {
			o->after = arg;
		} else {
			argp_error(state, "two reports, not more: %s", shown(text, sizeof(text), arg));
			return EINVAL;
		}
		break;
	case ARGP_KEY_END:
		if (!o->after) {
			argp_error(state, "give two reports: BEFORE.json AFTER.json");
			return EINVAL;
		}
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int diff_cmd_parse(int argc, char **argv, unsigned int flags, struct diff_cmd_opts *o)
{
	const struct argp argp = {
		.options = diff_options,
		.parser = diff_parse,
		.args_doc = "BEFORE.json AFTER.json",
		.doc = diff_doc,
	};
	error_t err;

	*o = (struct diff_cmd_opts){};
	argp_err_exit_status = 2;
	err = argp_parse(&argp, argc, argv, flags, NULL, o);
	return err ? -(int)err : 0;
}

/* The whole file, NUL-terminated (diff_parse_json() wants that), from malloc(). */
static int read_report(const char *path, char **text, size_t *len)
{
	FILE *in, *mem;
	char buf[65536];
	size_t n;
	int err = 0;

	*text = NULL;
	*len = 0;
	in = fopen(path, "re");
	if (!in)
		return -errno;
	mem = open_memstream(text, len);
	if (!mem) {
		err = -ENOMEM;
		goto cleanup;
	}
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
		if (*len + n > DIFF_MAX_FILE_BYTES) {
			err = -EFBIG;
			break;
		}
		if (fwrite(buf, 1, n, mem) != n) {
			err = -ENOMEM;
			break;
		}
		/* open_memstream() updates *len only at a flush. */
		if (fflush(mem)) {
			err = -ENOMEM;
			break;
		}
	}
	if (!err && ferror(in))
		err = errno ? -errno : -EIO;
	if (fclose(mem) && !err)
		err = -ENOMEM;
cleanup:
	fclose(in);
	if (err) {
		free(*text);
		*text = NULL;
	}
	return err;
}

/* Reads, parses and checks one report; on error says why, naming the file, and returns -errno. */
static int load_side(const char *path, const char *label, struct json_object **doc,
		     struct diff_side *side)
{
	char name[SAN_TEXT_SIZE(256)], err[512], why[SAN_TEXT_SIZE(512)];
	char *text = NULL;
	size_t len;
	int ret;

	shown(name, sizeof(name), path);
	ret = read_report(path, &text, &len);
	if (ret) {
		fprintf(stderr, "pipeprof diff: %s: cannot read: %s\n", name,
			ret == -EFBIG ? "larger than any report" : strerror(-ret));
		return ret;
	}
	ret = diff_parse_json(text, len, doc, err, sizeof(err));
	free(text);
	if (!ret)
		ret = diff_side_read(*doc, label, path, side, err, sizeof(err));
	if (ret)
		fprintf(stderr, "pipeprof diff: %s: %s\n", name, shown(why, sizeof(why), err));
	return ret;
}

int diff_cmd_main(int argc, char **argv)
{
	struct json_object *docs[2] = {}, *out = NULL;
	struct diff_check checks[DIFF_MAX_RULES];
	struct diff_side before, after;
	struct diff_cmd_opts o;
	const char *text;
	int ret = 2, fired = 0;

	if (diff_cmd_parse(argc, argv, 0, &o))
		return 2;
	if (load_side(o.before, "BEFORE", &docs[0], &before) ||
	    load_side(o.after, "AFTER", &docs[1], &after))
		goto cleanup;
	for (int i = 0; i < o.nr_rules; i++) {
		diff_rule_check(&o.rules[i], &before, &after, &checks[i]);
		fired += checks[i].fired;
	}
	if (o.json) {
		out = diff_json(&before, &after, o.rules, checks, o.nr_rules);
		text = out ? json_object_to_json_string_ext(out, JSON_C_TO_STRING_PRETTY |
							    JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
		if (!text) {
			fprintf(stderr, "pipeprof diff: out of memory\n");
			goto cleanup;
		}
		/* The reports' strings are as their files had them: repaired to UTF-8 here. */
		san_fputs_utf8(stdout, text);
		fputc('\n', stdout);
		/* Standard output stays one JSON document; the firing rules go beside it. */
		for (int i = 0; i < o.nr_rules; i++)
			if (checks[i].fired)
				fprintf(stderr, "%s\n", checks[i].line);
	} else {
		diff_print_text(stdout, &before, &after, o.rules, checks, o.nr_rules, o.verbose);
	}
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "pipeprof diff: cannot write the comparison: %s\n", strerror(errno));
		goto cleanup;
	}
	ret = fired ? 1 : 0;
cleanup:
	json_object_put(out);
	json_object_put(docs[0]);
	json_object_put(docs[1]);
	return ret;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pipeprof's command line: the input is argv[1..], NUL-separated, dispatched as main() does
 * ("hist", "top", "profile", "flamegraph", "daemon" and "diff" pick their subcommand, anything else is the report's). Each argument
 * is an allocation of its own, so a read past one is caught rather than landing in the next.
 * ARGP_NO_EXIT keeps a usage error or --help from exiting; the parsers then return the error.
 */
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include "classify.h"
#include "daemon_cmd.h"
#include "diff_cmd.h"
#include "flamegraph_cmd.h"
#include "fuzz.h"
#include "hist_cmd.h"
#include "pipeprof.h"
#include "report_cmd.h"
#include "steps.h"
#include "top_cmd.h"

#define MAX_ARGS 24

/* main.c's, which is not linked here: --version must print something. */
const char *argp_program_version = "pipeprof fuzz";

static void check_report(const struct report_opts *o)
{
	FUZZ_CHECK(!o->pid != !o->argv);
	FUZZ_CHECK(o->pid >= 0 && o->tid >= 0);
	FUZZ_CHECK(o->duration == 0 || (o->duration >= 0.001 && o->duration <= 1e7));
	FUZZ_CHECK(o->threshold >= 0.01 && o->threshold <= 1);
	FUZZ_CHECK(o->sample_hz <= 1000 && (!o->folded || o->sample_hz));
	FUZZ_CHECK(o->folded_role >= -1 && o->folded_role < NR_ROLES);
	/* FILE:SYMBOL, both parts there, no directory, sized for the tracer's buffers. */
	if (o->step_symbol) {
		const char *colon = strchr(o->step_symbol, ':');

		FUZZ_CHECK(colon && colon > o->step_symbol && colon[1] && !strchr(o->step_symbol, '/'));
		FUZZ_CHECK(colon - o->step_symbol < STEP_FILE_MAX && strlen(colon + 1) < STEP_SYMBOL_MAX);
	}
}

static void check_profile(const struct report_opts *o)
{
	FUZZ_CHECK(o->profile && o->pid > 0 && !o->argv && o->folded && *o->folded);
	FUZZ_CHECK(o->sample_hz >= 1 && o->sample_hz <= 1000);
	FUZZ_CHECK(o->folded_role >= -1 && o->folded_role < NR_ROLES);
}

static void check_hist(const struct hist_opts *o)
{
	FUZZ_CHECK(o->pid > 0 && o->tid >= 0 && o->kinds);
	FUZZ_CHECK(!o->keying || o->keying == PP_HKEY_THREAD || o->keying == PP_HKEY_PROCESS);
	FUZZ_CHECK(o->interval >= 0 && o->interval <= INT_MAX);
	FUZZ_CHECK(o->count >= 0 && o->count <= INT_MAX);
	FUZZ_CHECK(o->nr_numbers >= 0 && o->nr_numbers <= 2);
}

static void check_top(const struct top_opts *o)
{
	FUZZ_CHECK(o->pid >= 0 && o->tid >= 0 && (!o->tid || o->pid));
	FUZZ_CHECK(o->iterations >= 0 && o->iterations <= INT_MAX);
}

static void check_daemon(const struct daemon_config *c)
{
	FUZZ_CHECK(FUZZ_TERMINATED(c->listen) && c->listen[0]);
	FUZZ_CHECK(FUZZ_TERMINATED(c->config) && FUZZ_TERMINATED(c->match));
	FUZZ_CHECK(c->window_s >= 1 && c->window_s <= 86400);
}

static void check_diff(const struct diff_cmd_opts *o)
{
	char buf[64];

	FUZZ_CHECK(o->before && *o->before && o->after && *o->after);
	FUZZ_CHECK(o->nr_rules >= 0 && o->nr_rules <= DIFF_MAX_RULES);
	for (int i = 0; i < o->nr_rules; i++) {
		const struct diff_rule *r = &o->rules[i];
		struct diff_rule again;
		char err[256];

		FUZZ_CHECK(r->op == '>' || r->op == '<' || (r->op == '!' && r->metric == DIFF_VERDICT));
		FUZZ_CHECK(r->unit != DIFF_POINTS || r->metric == DIFF_STATE);
		FUZZ_CHECK(r->metric != DIFF_STATE || r->state < PP_NR_STATES);
		/* The canonical form parses back to the same rule. */
		FUZZ_CHECK(!diff_rule_parse(diff_rule_format(r, buf, sizeof(buf)), &again, err,
					    sizeof(err)));
		FUZZ_CHECK(again.metric == r->metric && again.op == r->op && again.unit == r->unit);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *args[MAX_ARGS + 2], *argv[MAX_ARGS + 2];
	const uint8_t *p = data, *end = data + size, *nul;
	struct daemon_config cli;
	struct report_opts ropts;
	struct hist_opts hopts;
	struct flamegraph_cmd_opts fopts;
	struct diff_cmd_opts dopts;
	struct top_opts topts;
	struct fuzz_quiet q;
	int argc = 1, ret;

	args[0] = fuzz_strndup((const uint8_t *)"pipeprof", 8);
	while (p < end && argc <= MAX_ARGS) {
		nul = memchr(p, '\0', end - p);
		args[argc++] = fuzz_strndup(p, (nul ? nul : end) - p);
		p = nul ? nul + 1 : end;
		/*
		 * argp's own hidden --HANG[=SECS] (any abbreviation: "--H") sleeps an hour, on
		 * purpose, and --program-name points glibc's program_invocation_name into argv,
		 * which is freed below: leave both to glibc.
		 */
		if (!strncmp(args[argc - 1], "--H", 3) || !strncmp(args[argc - 1], "--pr", 4)) {
			for (int i = 0; i < argc; i++)
				free(args[i]);
			return 0;
		}
	}
	args[argc] = NULL;
	/* argp permutes argv: keep the pointers to free. */
	memcpy(argv, args, sizeof(args[0]) * (argc + 1));

	fuzz_quiet_begin(&q);
	if (argc > 1 && !strcmp(argv[1], "hist")) {
		ret = hist_cmd_parse(argc - 1, argv + 1, ARGP_NO_EXIT, &hopts);
		fuzz_quiet_end(&q);
		if (!ret)
			check_hist(&hopts);
	} else if (argc > 1 && !strcmp(argv[1], "top")) {
		ret = top_cmd_parse(argc - 1, argv + 1, ARGP_NO_EXIT, &topts);
		fuzz_quiet_end(&q);
		if (!ret)
			check_top(&topts);
	} else if (argc > 1 && !strcmp(argv[1], "profile")) {
		ret = profile_cmd_parse(argc - 1, argv + 1, ARGP_NO_EXIT, &ropts);
		fuzz_quiet_end(&q);
		if (!ret)
			check_profile(&ropts);
	} else if (argc > 1 && !strcmp(argv[1], "record")) {
		ret = record_cmd_parse(argc - 1, argv + 1, ARGP_NO_EXIT, &ropts);
		fuzz_quiet_end(&q);
		/* A trace file always, never standard output (the report's, with -j). */
		if (!ret)
			FUZZ_CHECK(ropts.record && *ropts.record && strcmp(ropts.record, "-") &&
				   (!ropts.record_report || (*ropts.record_report &&
							     strcmp(ropts.record_report, "-"))) &&
				   !ropts.pid != !ropts.argv);
	} else if (argc > 1 && !strcmp(argv[1], "flamegraph")) {
		ret = flamegraph_cmd_parse(argc - 1, argv + 1, ARGP_NO_EXIT, &fopts);
		fuzz_quiet_end(&q);
		if (!ret)
			FUZZ_CHECK(fopts.output && *fopts.output &&
				   (!fopts.unit || (*fopts.unit && strlen(fopts.unit) <= 32)));
	} else if (argc > 1 && !strcmp(argv[1], "diff")) {
		ret = diff_cmd_parse(argc - 1, argv + 1, ARGP_NO_EXIT, &dopts);
		fuzz_quiet_end(&q);
		if (!ret)
			check_diff(&dopts);
	} else if (argc > 1 && !strcmp(argv[1], "daemon")) {
		ret = daemon_cmd_parse(argc - 1, argv + 1, ARGP_NO_EXIT, &cli);
		fuzz_quiet_end(&q);
		if (!ret)
			check_daemon(&cli);
	} else {
		ret = report_cmd_parse(argc, argv, ARGP_NO_EXIT, &ropts);
		fuzz_quiet_end(&q);
		if (!ret)
			check_report(&ropts);
	}
	FUZZ_CHECK(ret <= 0);

	for (int i = 0; i < argc; i++)
		free(args[i]);
	return 0;
}

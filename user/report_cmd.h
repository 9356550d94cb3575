/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef PIPEPROF_REPORT_CMD_H
#define PIPEPROF_REPORT_CMD_H

#include <argp.h>
#include <stdbool.h>
#include <sys/types.h>

struct report_opts {
	pid_t pid;		/* -p; 0 when launching */
	char **argv;		/* -- CMD ARGS..., NULL-terminated; NULL when attaching */
	double duration;	/* -d seconds; 0 = until Ctrl-C or exit */
	bool json;
	bool verbose;
	pid_t tid;		/* --tid */
	double threshold;	/* fraction */
	unsigned int sample_hz;	/* -F: CPU samples a second per CPU for "where"; 0: none */
	const char *folded;	/* --folded FILE: the samples as folded stacks ('-': stdout) */
	int folded_role;	/* enum role of the samples written, -1: all */
	bool folded_offcpu;	/* the trainer's waits instead of CPU samples */
	bool folded_svg;	/* a flame graph (SVG) of them instead of their text */
	bool profile;		/* `pipeprof profile`: folded stacks only, no report */
	const char *step_symbol;	/* --step-symbol FILE:SYMBOL; NULL: the autograd engine */
	const char *html;	/* --html FILE: the report as an HTML page too; NULL: none */
	bool all_launches;	/* --all-launches: every launch probed, never in bursts */
	const char *record;	/* `pipeprof record -o FILE`: the trace goes there, not the report */
	const char *record_report;	/* record --report FILE: the JSON report of that window */
};

/*
 * `pipeprof [-p PID] [-- COMMAND...]`'s options into *o, defaults first. flags are added to
 * argp_parse()'s: without ARGP_NO_EXIT a usage error or --help exits as the command does.
 * Returns 0 or -errno (-EINVAL for a usage error).
 */
int report_cmd_parse(int argc, char **argv, unsigned int flags, struct report_opts *o);

/* A whole-string number in [min, max] (NaN refused), or -EINVAL: the commands' option values. */
int cli_parse_long(const char *arg, long min, long max, long *out);
/* -p PID, -t TID and -d SECS, as the commands that trace a job take them: 0 when parsed,
 * EINVAL after argp_error() for a bad value, ARGP_ERR_UNKNOWN for any other key. */
int cli_parse_target_opt(int key, const char *arg, struct argp_state *state,
			 struct report_opts *o);
int cli_parse_double(const char *arg, double min, double max, double *out);

/* `pipeprof profile`'s options (argv[0] is the subcommand's name), into the same options. */
int profile_cmd_parse(int argc, char **argv, unsigned int flags, struct report_opts *o);
int profile_cmd_main(int argc, char **argv);

/* `pipeprof record`'s options (record_cmd.c), into the same options; its command. */
int record_cmd_parse(int argc, char **argv, unsigned int flags, struct report_opts *o);
int record_cmd_main(int argc, char **argv);

/* `pipeprof -p PID`: trace, then print the report. Returns the process exit status. */
int report_cmd_run(const struct report_opts *opts);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef PIPEPROF_DIFF_CMD_H
#define PIPEPROF_DIFF_CMD_H

#include <stdbool.h>
#include "diff.h"

struct diff_cmd_opts {
	const char *before, *after;	/* pipeprof.report/v1 files */
	bool json;
	bool verbose;
	int nr_rules;
	struct diff_rule rules[DIFF_MAX_RULES];	/* --fail-if, in the order given */
};

/* `pipeprof diff`'s options (argv[0] is the subcommand's name); flags as report_cmd_parse()'s.
 * Returns 0 or -errno (-EINVAL for a usage error). */
int diff_cmd_parse(int argc, char **argv, unsigned int flags, struct diff_cmd_opts *o);
/* Returns the process exit status: 0 no rule fired, 1 one did, 2 an error. */
int diff_cmd_main(int argc, char **argv);

#endif

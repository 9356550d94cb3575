/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef PIPEPROF_HIST_CMD_H
#define PIPEPROF_HIST_CMD_H

#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>

struct hist_opts {
	pid_t pid;
	pid_t tid;
	bool msecs, timestamps, json, verbose;
	__u32 keying;
	__u32 kinds;
	long interval;	/* seconds; 0: one histogram at the end */
	long count;	/* intervals; 0: until Ctrl-C or exit */
	int nr_numbers;
};

/*
 * `pipeprof hist`'s options into *o (argv[0] is the subcommand's name). flags are added to
 * argp_parse()'s: without ARGP_NO_EXIT a usage error or --help exits as the command does.
 * Returns 0 or -errno (-EINVAL for a usage error, its message already on stderr).
 */
int hist_cmd_parse(int argc, char **argv, unsigned int flags, struct hist_opts *o);

/* `pipeprof hist ...`: argv[0] is the subcommand's name. Returns the exit status. */
int hist_cmd_main(int argc, char **argv);

#endif

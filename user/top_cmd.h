/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef PIPEPROF_TOP_CMD_H
#define PIPEPROF_TOP_CMD_H

#include <stdbool.h>
#include <sys/types.h>

struct top_opts {
	pid_t pid;
	pid_t tid;
	long iterations;	/* frames, then exit; 0: until q, a signal or the job's exit */
	bool verbose;
};

/*
 * `pipeprof top`'s options into *o (argv[0] is the subcommand's name). flags are added to
 * argp_parse()'s: without ARGP_NO_EXIT a usage error or --help exits as the command does.
 * Returns 0 or -errno (-EINVAL for a usage error, its message already on stderr).
 */
int top_cmd_parse(int argc, char **argv, unsigned int flags, struct top_opts *o);

/* `pipeprof top ...`: argv[0] is the subcommand's name. Returns the exit status. */
int top_cmd_main(int argc, char **argv);

#endif

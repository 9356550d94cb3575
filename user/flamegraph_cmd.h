/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef PIPEPROF_FLAMEGRAPH_CMD_H
#define PIPEPROF_FLAMEGRAPH_CMD_H

struct flamegraph_cmd_opts {
	const char *input;	/* folded stacks; "-" or NULL: standard input */
	const char *output;	/* the SVG; "-": standard output */
	const char *title;
	const char *unit;
};

int flamegraph_cmd_parse(int argc, char **argv, unsigned int flags, struct flamegraph_cmd_opts *o);
int flamegraph_cmd_main(int argc, char **argv);

#endif

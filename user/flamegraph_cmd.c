// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `pipeprof flamegraph`: folded stacks (pipeprof's, or any tool's) drawn as an SVG flame graph,
 * for a machine without flamegraph.pl. No tracing, no privilege. */
#include <argp.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "flamegraph.h"
#include "flamegraph_cmd.h"

static const char flamegraph_doc[] =
	"Draw folded stacks (frame;frame;frame count, one stack a line: what\n"
	"'pipeprof profile' and 'pipeprof --folded' write) as a flame graph: one\n"
	"self-contained SVG file.\v"
	"EXAMPLES:\n"
	"  sudo pipeprof -p 4242 -d 10 --folded out.folded\n"
	"  pipeprof flamegraph out.folded -o out.svg\n"
	"  pipeprof flamegraph --unit us --title 'waits' waits.folded -o waits.svg\n"
	"\n"
	"Exit status: 0 written, 1 a file could not be read or written, or it held no\n"
	"folded stacks (an empty graph is written), 2 bad arguments.";

enum { OPT_TITLE = 0x100, OPT_UNIT };

static const struct argp_option flamegraph_options[] = {
	{ "output", 'o', "FILE", 0, "Where the SVG goes ('-': standard output)", 0 },
	{ "title", OPT_TITLE, "TEXT", 0, "The graph's title (default: the input's name)", 0 },
	{ "unit", OPT_UNIT, "UNIT", 0, "What a count is (default: samples; us for "
	  "'profile --offcpu')", 0 },
	{},
};

static error_t flamegraph_parse(int key, char *arg, struct argp_state *state)
{
	struct flamegraph_cmd_opts *o = state->input;

	switch (key) {
	case 'o':
		if (!*arg) {
			argp_error(state, "-o needs a file name");
			return EINVAL;
		}
		o->output = arg;
		break;
	case OPT_TITLE:
		o->title = arg;
		break;
	case OPT_UNIT:
		if (!*arg || strlen(arg) > 32) {
			argp_error(state, "--unit needs a short word (samples, us)");
			return EINVAL;
		}
		o->unit = arg;
		break;
	case ARGP_KEY_ARG:
		if (o->input) {
			argp_error(state, "one input file at most: %s", arg);
			return EINVAL;
		}
		o->input = arg;
		break;
	case ARGP_KEY_END:
		if (!o->output) {
			argp_error(state, "give -o FILE.svg (or -o - for standard output)");
			return EINVAL;
		}
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int flamegraph_cmd_parse(int argc, char **argv, unsigned int flags, struct flamegraph_cmd_opts *o)
{
	const struct argp argp = {
		.options = flamegraph_options,
		.parser = flamegraph_parse,
		.args_doc = "[FOLDED] -o FILE.svg",
		.doc = flamegraph_doc,
	};
	error_t err;

	*o = (struct flamegraph_cmd_opts){};
	argp_err_exit_status = 2;
	err = argp_parse(&argp, argc, argv, flags, NULL, o);
	return err ? -(int)err : 0;
}

static int read_all(FILE *in, char **text, size_t *len)
{
	FILE *mem = open_memstream(text, len);
	char buf[65536];
	size_t n;

	if (!mem)
		return -ENOMEM;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		if (fwrite(buf, 1, n, mem) != n)
			break;
	if (ferror(in)) {
		fclose(mem);
		return -EIO;
	}
	return fclose(mem) ? -ENOMEM : 0;
}

int flamegraph_cmd_main(int argc, char **argv)
{
	struct flamegraph_cmd_opts o;
	bool from_stdin, to_stdout;
	const char *in_name;
	FILE *in = NULL, *out = NULL;
	struct flamegraph_counts counts = {};
	char *text = NULL;
	size_t len = 0;
	int err, ret = 1;

	if (flamegraph_cmd_parse(argc, argv, 0, &o))
		return 2;
	from_stdin = !o.input || !strcmp(o.input, "-");
	to_stdout = !strcmp(o.output, "-");
	in_name = from_stdin ? "standard input" : o.input;
	in = from_stdin ? stdin : fopen(o.input, "re");
	if (!in) {
		fprintf(stderr, "pipeprof: cannot read %s: %s\n", in_name, strerror(errno));
		goto cleanup;
	}
	err = read_all(in, &text, &len);
	if (err) {
		fprintf(stderr, "pipeprof: cannot read %s: %s\n", in_name, strerror(-err));
		goto cleanup;
	}
	out = to_stdout ? stdout : fopen(o.output, "we");
	if (!out) {
		fprintf(stderr, "pipeprof: cannot write %s: %s\n", o.output, strerror(errno));
		goto cleanup;
	}
	err = flamegraph_svg(out, text, len, &(struct flamegraph_opts){
		.title = o.title ? o.title : in_name, .unit = o.unit }, &counts);
	if ((to_stdout ? fflush(out) : fclose(out)) && !err)
		err = -errno;
	out = NULL;
	if (err) {
		fprintf(stderr, "pipeprof: cannot write %s: %s\n", o.output, strerror(-err));
		goto cleanup;
	}
	if (counts.skipped)
		fprintf(stderr, "pipeprof: %lu line%s of %s %s not folded stacks (frame;frame count): "
			"left out\n", counts.skipped, counts.skipped == 1 ? "" : "s", in_name,
			counts.skipped == 1 ? "is" : "are");
	if (!counts.stacks) {
		fprintf(stderr, "pipeprof: no folded stacks in %s: the graph is empty\n", in_name);
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (in && !from_stdin)
		fclose(in);
	free(text);
	return ret;
}

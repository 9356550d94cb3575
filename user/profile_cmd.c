// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `pipeprof profile`: the report's tracing, written as folded stacks instead of a report: the
 * CPU samples of one role or all, or the trainer's waits weighted by their time. */
#include <argp.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "classify.h"
#include "report_cmd.h"

static const char profile_doc[] =
	"Sample a training job from outside and write folded stacks (Brendan Gregg's\n"
	"format: frame;frame;frame count) for flamegraph.pl or speedscope: the CPU\n"
	"samples of the job's threads, role first, then the Python frames outermost\n"
	"first, then the native callers frame pointers give and the native leaf; with\n"
	"--offcpu the trainer's waits instead (with --role, every wait of that role's\n"
	"threads), each weighted by its time in microseconds, its Python stack as it\n"
	"began, and ending in its stall state.\v"
	"EXAMPLES:\n"
	"  sudo pipeprof profile -p 4242 -d 10 -o out.folded\n"
	"  sudo pipeprof profile -p 4242 -d 10 --role worker -o workers.folded\n"
	"  sudo pipeprof profile -p 4242 -d 10 --offcpu -o waits.folded\n"
	"  sudo pipeprof profile -p 4242 -d 10 --offcpu --role worker -o worker.folded\n"
	"  sudo pipeprof profile -p 4242 -d 10 --format svg -o flame.svg\n"
	"  flamegraph.pl out.folded > out.svg\n"
	"\n"
	"Exit status: 0 written, 1 tracing or writing failed, 2 bad arguments or no\n"
	"such process.";

enum { OPT_ROLE = 0x100, OPT_OFFCPU, OPT_FORMAT };

static const struct argp_option profile_options[] = {
	{ "pid", 'p', "PID", 0, "Process to sample (with its descendants)", 0 },
	{ "duration", 'd', "SECS", 0, "Sample this long (default: until Ctrl-C or exit)", 0 },
	{ "frequency", 'F', "HZ", 0, "Samples a second on each CPU (default 49)", 0 },
	{ "output", 'o', "FILE", 0, "Where the stacks go ('-': standard output)", 0 },
	{ "role", OPT_ROLE, "ROLE", 0, "Only one role's samples (or waits): trainer, worker or "
	  "helper", 0 },
	{ "offcpu", OPT_OFFCPU, NULL, 0, "Waits (the thread's stack as each began) instead of "
	  "CPU samples: the trainer's, or --role's", 0 },
	{ "format", OPT_FORMAT, "FORMAT", 0, "folded (default) or svg: a flame graph, one "
	  "self-contained file", 0 },
	{ "tid", 't', "TID", 0, "The trainer thread (default: most GPU calls, else the main thread)", 0 },
	{ "verbose", 'v', NULL, 0, "Verbose: libbpf logs and every probe attached", 0 },
	{},
};

static error_t profile_parse(int key, char *arg, struct argp_state *state)
{
	struct report_opts *o = state->input;
	int err = cli_parse_target_opt(key, arg, state, o);
	long v;

	if (err != ARGP_ERR_UNKNOWN)
		return err;
	switch (key) {
	case 'F':
		if (cli_parse_long(arg, 1, 1000, &v)) {
			argp_error(state, "invalid sampling frequency (1-1000 Hz): %s", arg);
			return EINVAL;
		}
		o->sample_hz = (unsigned int)v;
		break;
	case 'o':
		if (!*arg) {
			argp_error(state, "-o needs a file name");
			return EINVAL;
		}
		o->folded = arg;
		break;
	case OPT_ROLE:
		if (!strcasecmp(arg, "trainer"))
			o->folded_role = ROLE_TRAINER;
		else if (!strcasecmp(arg, "worker"))
			o->folded_role = ROLE_WORKER;
		else if (!strcasecmp(arg, "helper"))
			o->folded_role = ROLE_HELPER;
		else {
			argp_error(state, "unknown role '%s' (trainer, worker or helper)", arg);
			return EINVAL;
		}
		break;
	case OPT_OFFCPU:
		o->folded_offcpu = true;
		break;
	case OPT_FORMAT:
		if (!strcmp(arg, "svg"))
			o->folded_svg = true;
		else if (!strcmp(arg, "folded"))
			o->folded_svg = false;
		else {
			argp_error(state, "unknown format '%s' (folded or svg)", arg);
			return EINVAL;
		}
		break;
	case 'v':
		o->verbose = true;
		break;
	case ARGP_KEY_ARG:
		argp_error(state, "unexpected argument: %s", arg);
		return EINVAL;
	case ARGP_KEY_END:
		if (!o->pid) {
			argp_error(state, "nothing to sample: give -p PID");
			return EINVAL;
		}
		if (!o->folded) {
			argp_error(state, "give -o FILE (or -o - for standard output)");
			return EINVAL;
		}
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int profile_cmd_parse(int argc, char **argv, unsigned int flags, struct report_opts *o)
{
	const struct argp argp = {
		.options = profile_options,
		.parser = profile_parse,
		.args_doc = "-p PID -o FILE",
		.doc = profile_doc,
	};
	error_t err;

	*o = (struct report_opts){ .threshold = 0.20, .sample_hz = 49, .profile = true,
				   .folded_role = -1 };
	argp_err_exit_status = 2;
	err = argp_parse(&argp, argc, argv, flags, NULL, o);
	return err ? -(int)err : 0;
}

int profile_cmd_main(int argc, char **argv)
{
	struct report_opts o;

	if (profile_cmd_parse(argc, argv, 0, &o))
		return 2;
	return report_cmd_run(&o);
}

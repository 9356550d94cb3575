// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* pipeprof: why is this training job slow? Dispatches to one file per subcommand. */
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "daemon_cmd.h"
#include "hist_cmd.h"
#include "report_cmd.h"

const char *argp_program_version = "pipeprof 0.1";

static const char report_doc[] =
	"Attach to a running training job and say where its wall time goes.\n"
	"\n"
	"COMMANDS:\n"
	"  pipeprof -p PID             the report: a verdict on where the time goes\n"
	"  pipeprof hist -p PID KIND   BCC-style histograms of one job\n"
	"                              (see 'pipeprof hist --help' for the kinds)\n"
	"  pipeprof daemon             trace every training job on the host and\n"
	"                              serve Prometheus metrics (see 'pipeprof daemon\n"
	"                              --help')\n"
	"\n"
	"Options of the report:\v"
	"The trainer thread's time is split into the stall model's states (RUNNING,\n"
	"RUNQ, GPU_WAIT, IO_WAIT, DATA_WAIT, THREAD_WAIT, COMM_WAIT, OTHER); the\n"
	"verdict names the largest stall, with the DataLoader workers' and helper\n"
	"threads' own breakdowns as evidence.\n"
	"\n"
	"EXAMPLES:\n"
	"  sudo pipeprof -p 4242           # trace until Ctrl-C, then report\n"
	"  sudo pipeprof -p 4242 -d 10     # trace 10 seconds\n"
	"  sudo pipeprof -p 4242 -d 10 -j  # JSON report (pipeprof.report/v1)\n"
	"  sudo pipeprof -d 10 -- /usr/bin/python3 train.py  # launch and follow\n"
	"\n"
	"A launched command is sent SIGTERM if it still runs when tracing ends.\n"
	"Exit status: 0 report printed, 1 tracing failed, 2 bad arguments or no\n"
	"such process.";

static const struct argp_option report_options[] = {
	{ "pid", 'p', "PID", 0, "Process to trace (with its descendants)", 0 },
	{ "duration", 'd', "SECS", 0, "Trace this long, then report (default: until Ctrl-C or exit)", 0 },
	{ "json", 'j', NULL, 0, "Print the report as JSON (schema pipeprof.report/v1)", 0 },
	{ "tid", 't', "TID", 0, "The trainer thread (default: most GPU calls, else the main thread)", 0 },
	{ "threshold", 'T', "PCT", 0, "Share of wall time a stall needs for a verdict (default 20)", 0 },
	{ "verbose", 'v', NULL, 0, "Verbose: libbpf logs and every probe attached", 0 },
	{},
};

static int parse_long(const char *arg, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_double(const char *arg, double min, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	/* Written so that NaN, which compares false with everything, is refused too. */
	if (errno || end == arg || *end || !(v >= min && v <= max))
		return -EINVAL;
	*out = v;
	return 0;
}

static error_t report_parse(int key, char *arg, struct argp_state *state)
{
	struct report_opts *o = state->input;
	long v;

	switch (key) {
	case 'p':
		if (parse_long(arg, 1, INT_MAX, &v))
			argp_error(state, "invalid PID: %s", arg);
		o->pid = v;
		break;
	case 'd':
		if (parse_double(arg, 0.001, 1e7, &o->duration))
			argp_error(state, "invalid duration (seconds > 0): %s", arg);
		break;
	case 'j':
		o->json = true;
		break;
	case 't':
		if (parse_long(arg, 1, INT_MAX, &v))
			argp_error(state, "invalid TID: %s", arg);
		o->tid = v;
		break;
	case 'T':
		if (parse_double(arg, 1, 100, &o->threshold))
			argp_error(state, "invalid threshold (1-100 percent): %s", arg);
		o->threshold /= 100;
		break;
	case 'v':
		o->verbose = true;
		break;
	case ARGP_KEY_ARG:
		/* The first operand starts the command to launch; argp stops parsing at "--". */
		o->argv = &state->argv[state->next - 1];
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
		if (o->pid && o->argv)
			argp_error(state, "give either -p PID or -- COMMAND, not both");
		if (!o->pid && !o->argv)
			argp_error(state, "nothing to trace: give -p PID or -- COMMAND");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct report_opts opts = { .threshold = 0.20 };
	const struct argp argp = {
		.options = report_options,
		.parser = report_parse,
		.args_doc = "-p PID\n[-- COMMAND [ARGS...]]\nhist -p PID KIND... [INTERVAL [COUNT]]\n"
			    "daemon [OPTION...]",
		.doc = report_doc,
	};

	if (argc > 1 && !strcmp(argv[1], "hist")) {
		argv[1] = "pipeprof hist";	/* how argp names the command in messages */
		return hist_cmd_main(argc - 1, argv + 1);
	}
	if (argc > 1 && !strcmp(argv[1], "daemon")) {
		argv[1] = "pipeprof daemon";
		return daemon_cmd_main(argc - 1, argv + 1);
	}
	/* argp exits with status 64 on usage errors; the report's contract says 2. */
	argp_err_exit_status = 2;
	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, &opts))
		return 2;
	return report_cmd_run(&opts);
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* pipeprof: why is this training job slow? Dispatches to one file per subcommand. */
#include <argp.h>
#include <string.h>
#include "daemon_cmd.h"
#include "diff_cmd.h"
#include "flamegraph_cmd.h"
#include "hist_cmd.h"
#include "report_cmd.h"
#include "top_cmd.h"

const char *argp_program_version = "pipeprof 0.1";

int main(int argc, char **argv)
{
	struct report_opts opts;

	if (argc > 1 && !strcmp(argv[1], "hist")) {
		argv[1] = "pipeprof hist";	/* how argp names the command in messages */
		return hist_cmd_main(argc - 1, argv + 1);
	}
	if (argc > 1 && !strcmp(argv[1], "daemon")) {
		argv[1] = "pipeprof daemon";
		return daemon_cmd_main(argc - 1, argv + 1);
	}
	if (argc > 1 && !strcmp(argv[1], "profile")) {
		argv[1] = "pipeprof profile";
		return profile_cmd_main(argc - 1, argv + 1);
	}
	if (argc > 1 && !strcmp(argv[1], "flamegraph")) {
		argv[1] = "pipeprof flamegraph";
		return flamegraph_cmd_main(argc - 1, argv + 1);
	}
	if (argc > 1 && !strcmp(argv[1], "record")) {
		argv[1] = "pipeprof record";
		return record_cmd_main(argc - 1, argv + 1);
	}
	if (argc > 1 && !strcmp(argv[1], "diff")) {
		argv[1] = "pipeprof diff";
		return diff_cmd_main(argc - 1, argv + 1);
	}
	if (argc > 1 && !strcmp(argv[1], "top")) {
		argv[1] = "pipeprof top";
		return top_cmd_main(argc - 1, argv + 1);
	}
	if (report_cmd_parse(argc, argv, 0, &opts))
		return 2;
	return report_cmd_run(&opts);
}

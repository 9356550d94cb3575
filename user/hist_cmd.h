/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef PIPEPROF_HIST_CMD_H
#define PIPEPROF_HIST_CMD_H

/* `pipeprof hist ...`: argv[0] is the subcommand's name. Returns the exit status. */
int hist_cmd_main(int argc, char **argv);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef PIPEPROF_DAEMON_CMD_H
#define PIPEPROF_DAEMON_CMD_H

/* `pipeprof daemon ...`: argv[0] is the subcommand's name. Returns the exit status. */
int daemon_cmd_main(int argc, char **argv);

#endif

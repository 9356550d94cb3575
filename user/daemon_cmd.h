/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef PIPEPROF_DAEMON_CMD_H
#define PIPEPROF_DAEMON_CMD_H

#include "daemon_config.h"

/*
 * The settings `pipeprof daemon`'s command line gives, into *cli over the defaults (argv[0]
 * is the subcommand's name). flags are added to argp_parse()'s: without ARGP_NO_EXIT a usage
 * error or --help exits as the command does. Returns 0 or -errno (-EINVAL for a usage error).
 */
int daemon_cmd_parse(int argc, char **argv, unsigned int flags, struct daemon_config *cli);

/* `pipeprof daemon ...`: argv[0] is the subcommand's name. Returns the exit status. */
int daemon_cmd_main(int argc, char **argv);

#endif

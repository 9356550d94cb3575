/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* `pipeprof daemon` settings: command-line options and the --config file (re-read on SIGHUP)
 * share one set of names. Pure: unit-tested without root. */
#ifndef PIPEPROF_DAEMON_CONFIG_H
#define PIPEPROF_DAEMON_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

struct daemon_config {
	char listen[128];		/* ADDR:PORT */
	char jsonl[PATH_MAX];		/* "" for none */
	long long jsonl_max_bytes;
	int jsonl_keep;
	long window_s;
	char match[256];		/* extended regex on the command name, "" for any */
	char match_cgroup[PATH_MAX];	/* cgroup path prefix, "" for any */
	double step_regression;		/* fraction: 0.2 flags a median step 20% over baseline */
	char config[PATH_MAX];		/* the file itself, "" for none */
	bool verbose;
};

void daemon_config_defaults(struct daemon_config *c);

/* Sets one setting by its name (the long option without dashes, '-' or '_' alike). Returns 0,
 * or -EINVAL with why in err; c is then left as it was. */
int daemon_config_set(struct daemon_config *c, const char *key, const char *value, char *err,
		      size_t errlen);

/* "key = value" lines; '#' starts a comment; blank lines are skipped. Returns 0, or -EINVAL
 * with "line N: why" in err; c is then left as it was. */
int daemon_config_parse(FILE *f, struct daemon_config *c, char *err, size_t errlen);

#endif

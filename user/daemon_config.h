/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* `pipeprof daemon` settings: command-line options and the --config file (re-read on SIGHUP)
 * share one set of names. Pure: unit-tested without root. */
#ifndef PIPEPROF_DAEMON_CONFIG_H
#define PIPEPROF_DAEMON_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

/* What the HTTP endpoint gives away: see the daemon's --help. */
enum serve_mode {
	SERVE_ALL,		/* /metrics, /healthz, /api/v1/report with command lines */
	SERVE_NO_CMDLINE,	/* the reports name each job by its command name only */
	SERVE_METRICS,		/* /metrics and /healthz; no reports */
	NR_SERVE_MODES,
};

struct daemon_config {
	char listen[128];		/* ADDR:PORT */
	char jsonl[PATH_MAX];		/* "" for none */
	long long jsonl_max_bytes;
	int jsonl_keep;
	long window_s;
	char match[256];		/* extended regex on the command name, "" for any */
	char match_cgroup[PATH_MAX];	/* cgroup path prefix, "" for any */
	double step_regression;		/* fraction: 0.2 flags a median step 20% over baseline */
	enum serve_mode serve;
	char config[PATH_MAX];		/* the file itself, "" for none */
	bool verbose;
};

void daemon_config_defaults(struct daemon_config *c);

/* Sets one setting by its name (the long option without dashes, '-' or '_' alike). Returns 0,
 * or -EINVAL with why in err; c is then left as it was. */
int daemon_config_set(struct daemon_config *c, const char *key, const char *value, char *err,
		      size_t errlen);

/* "all", "no-cmdline", "metrics" to a serve_mode, or -EINVAL; and back. */
int daemon_serve_parse(const char *name);
const char *daemon_serve_name(enum serve_mode mode);

/* "key = value" lines; '#' starts a comment; blank lines are skipped. Returns 0, or -EINVAL
 * with "line N: why" in err, or -errno with "cannot read: why" when reading fails (a
 * directory); c is then left as it was. */
int daemon_config_parse(FILE *f, struct daemon_config *c, char *err, size_t errlen);

#endif

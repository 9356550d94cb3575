// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The daemon's --config file (daemon_config_parse(), re-read on SIGHUP), and one setting by
 * name as the command line sets it (daemon_config_set(), from the input's first line split at
 * its first '=').
 */
#include <errno.h>
#include <regex.h>
#include "daemon_config.h"
#include "fuzz.h"

/* The daemon matches every new process's name (15 characters at most) against it. */
static void match_names(const char *match)
{
	static const char *const names[] = { "python3", "pt_data_worker0", "", "aaaaaaaaaaaaaaa" };
	regex_t re;

	if (!*match)
		return;
	FUZZ_CHECK(!regcomp(&re, match, REG_EXTENDED | REG_NOSUB));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		regexec(&re, names[i], 0, NULL, 0);
	regfree(&re);
}

/* What daemon_config_set() accepts is what the daemon may be run with. */
static void check_config(const struct daemon_config *c)
{
	FUZZ_CHECK(FUZZ_TERMINATED(c->listen) && c->listen[0]);
	FUZZ_CHECK(FUZZ_TERMINATED(c->jsonl));
	FUZZ_CHECK(FUZZ_TERMINATED(c->match));
	FUZZ_CHECK(FUZZ_TERMINATED(c->match_cgroup));
	FUZZ_CHECK(FUZZ_TERMINATED(c->config));
	FUZZ_CHECK(c->jsonl_max_bytes >= 4096 && c->jsonl_max_bytes <= 1LL << 50);
	FUZZ_CHECK(c->jsonl_keep >= 0 && c->jsonl_keep <= 1000);
	FUZZ_CHECK(c->window_s >= 1 && c->window_s <= 86400);
	FUZZ_CHECK(c->step_regression >= 0.01 && c->step_regression <= 10);
	match_names(c->match);
}

static void parse_file(const uint8_t *data, size_t size)
{
	struct daemon_config c, before;
	char err[256];
	FILE *f;
	int ret;

	daemon_config_defaults(&c);
	before = c;
	/* fmemopen() refuses an empty buffer; an empty file is an empty stream. */
	f = size ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
	if (!f)
		abort();
	err[0] = '\0';
	ret = daemon_config_parse(f, &c, err, sizeof(err));
	fclose(f);
	if (ret) {
		FUZZ_CHECK(ret == -EINVAL || ret == -EIO);
		FUZZ_CHECK(err[0] && FUZZ_TERMINATED(err));
		/* A file that does not parse changes nothing. */
		FUZZ_CHECK(!memcmp(&c, &before, sizeof(c)));
	}
	check_config(&c);
}

static void set_one(const uint8_t *data, size_t size)
{
	char *line = fuzz_strndup(data, size), *eq, err[256];
	struct daemon_config c, before;

	line[strcspn(line, "\n")] = '\0';
	eq = strchr(line, '=');
	if (eq) {
		*eq = '\0';
		daemon_config_defaults(&c);
		before = c;
		err[0] = '\0';
		if (daemon_config_set(&c, line, eq + 1, err, sizeof(err))) {
			FUZZ_CHECK(err[0] && FUZZ_TERMINATED(err));
			/* A refused value changes nothing. */
			FUZZ_CHECK(!memcmp(&c, &before, sizeof(c)));
		}
		check_config(&c);
	}
	free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	parse_file(data, size);
	set_one(data, size);
	return 0;
}

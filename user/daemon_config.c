// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include "daemon_config.h"
#include "http.h"
#include "ere_cost.h"

/* Ample for a command name of 15 characters; glibc takes a few MB to compile this much. */
#define MATCH_MAX_COST 10000

void daemon_config_defaults(struct daemon_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->listen, sizeof(c->listen), "127.0.0.1:9464");
	c->jsonl_max_bytes = 100LL << 20;
	c->jsonl_keep = 5;
	c->window_s = 10;
	c->step_regression = 0.20;
}

static const char *const serve_names[] = {
	[SERVE_ALL] = "all", [SERVE_NO_CMDLINE] = "no-cmdline", [SERVE_METRICS] = "metrics",
};

int daemon_serve_parse(const char *name)
{
	for (int i = 0; i < NR_SERVE_MODES; i++)
		if (!strcmp(name, serve_names[i]))
			return i;
	return -EINVAL;
}

const char *daemon_serve_name(enum serve_mode mode)
{
	return mode >= 0 && mode < NR_SERVE_MODES ? serve_names[mode] : "?";
}

static int parse_ll(const char *s, long long min, long long max, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int copy_value(char *dst, size_t size, const char *value)
{
	if (strlen(value) >= size)
		return -EINVAL;
	snprintf(dst, size, "%s", value);
	return 0;
}

/* "listen" and "match-cgroup" name the same settings as "listen" and "match_cgroup". */
static bool key_is(const char *key, const char *name)
{
	for (; *key && *name; key++, name++)
		if (*key != *name && !(*key == '-' && *name == '_'))
			return false;
	return !*key && !*name;
}

int daemon_config_set(struct daemon_config *c, const char *key, const char *value, char *err,
		      size_t errlen)
{
	long long v;
	double d;
	char *end;

	if (key_is(key, "listen")) {
		struct sockaddr_storage ss;
		socklen_t len;

		/* Checked here, so that a typo is a usage error before anything is started. */
		if (http_parse_listen(value, &ss, &len) ||
		    copy_value(c->listen, sizeof(c->listen), value)) {
			snprintf(err, errlen, "invalid value for %s: %s (expected ADDR:PORT or "
				 "[IPV6]:PORT, numeric)", key, value);
			return -EINVAL;
		}
	} else if (key_is(key, "jsonl")) {
		if (copy_value(c->jsonl, sizeof(c->jsonl), value))
			goto bad;
	} else if (key_is(key, "jsonl_max_bytes")) {
		if (parse_ll(value, 4096, 1LL << 50, &v))
			goto bad;
		c->jsonl_max_bytes = v;
	} else if (key_is(key, "jsonl_keep")) {
		if (parse_ll(value, 0, 1000, &v))
			goto bad;
		c->jsonl_keep = v;
	} else if (key_is(key, "window")) {
		if (parse_ll(value, 1, 86400, &v))
			goto bad;
		c->window_s = v;
	} else if (key_is(key, "match")) {
		regex_t re;

		if (strlen(value) >= sizeof(c->match))
			goto bad;
		/* regcomp() itself would take seconds and gigabytes over some patterns. */
		if (ere_cost(value, MATCH_MAX_COST) > MATCH_MAX_COST) {
			snprintf(err, errlen, "regular expression for match too complex: %s", value);
			return -EINVAL;
		}
		if (*value && regcomp(&re, value, REG_EXTENDED | REG_NOSUB)) {
			snprintf(err, errlen, "invalid regular expression for match: %s", value);
			return -EINVAL;
		}
		if (*value)
			regfree(&re);
		/* Only once it compiles: a refused expression must not stay in c. */
		copy_value(c->match, sizeof(c->match), value);
	} else if (key_is(key, "match_cgroup")) {
		/* As /proc/PID/cgroup spells it; whether it exists is daemon_cmd.c's to check. */
		if ((*value && *value != '/') ||
		    copy_value(c->match_cgroup, sizeof(c->match_cgroup), value)) {
			snprintf(err, errlen, "invalid value for %s: %s (a cgroup path as in "
				 "/proc/PID/cgroup, starting with /)", key, value);
			return -EINVAL;
		}
	} else if (key_is(key, "serve")) {
		int mode = daemon_serve_parse(value);

		if (mode < 0) {
			snprintf(err, errlen, "invalid value for %s: %s (all, no-cmdline or metrics)",
				 key, value);
			return -EINVAL;
		}
		c->serve = mode;
	} else if (key_is(key, "step_regression")) {
		errno = 0;
		d = strtod(value, &end);
		/* Written so that NaN, which compares false with everything, is refused too. */
		if (errno || end == value || *end || !(d >= 1 && d <= 1000))
			goto bad;
		c->step_regression = d / 100;
	} else {
		snprintf(err, errlen, "unknown setting: %s", key);
		return -EINVAL;
	}
	return 0;
bad:
	snprintf(err, errlen, "invalid value for %s: %s", key, value);
	return -EINVAL;
}

static char *trim(char *s)
{
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = 0;
	return s;
}

int daemon_config_parse(FILE *f, struct daemon_config *c, char *err, size_t errlen)
{
	struct daemon_config next = *c;
	char line[PATH_MAX + 64], why[256];
	int nr = 0;

	errno = 0;
	while (fgets(line, sizeof(line), f)) {
		char *key, *value, *eq, *hash;

		nr++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "line %d: too long", nr);
			return -EINVAL;
		}
		hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		key = trim(line);
		if (!*key)
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			snprintf(err, errlen, "line %d: expected key = value", nr);
			return -EINVAL;
		}
		*eq = 0;
		value = trim(eq + 1);
		key = trim(key);
		if (daemon_config_set(&next, key, value, why, sizeof(why))) {
			snprintf(err, errlen, "line %d: %s", nr, why);
			return -EINVAL;
		}
	}
	if (ferror(f)) {
		int ret = errno ? -errno : -EIO;

		snprintf(err, errlen, "cannot read: %s", strerror(-ret));
		return ret;
	}
	*c = next;
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include "daemon_config.h"
#include "unit.h"

static int parse_text(const char *text, struct daemon_config *c, char *err, size_t errlen)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int ret = daemon_config_parse(f, c, err, errlen);

	fclose(f);
	return ret;
}

TEST(test_defaults)
{
	struct daemon_config c;

	daemon_config_defaults(&c);
	CHECK_STR(c.listen, "127.0.0.1:9464");	/* loopback unless told otherwise */
	CHECK_EQ_INT(c.window_s, 10);
	CHECK_EQ_INT(c.jsonl_keep, 5);
	CHECK(c.step_regression == 0.20);
	CHECK_STR(c.jsonl, "");
}

TEST(test_file)
{
	struct daemon_config c;
	char err[256] = "";

	daemon_config_defaults(&c);
	CHECK_EQ_INT(parse_text("# pipeprof daemon\n\nwindow = 30\n  match=^python  # trailing comment\n"
				"match-cgroup = /system.slice/train.service\njsonl = /var/log/pp.jsonl\n"
				"jsonl_max_bytes = 1048576\njsonl_keep = 2\nstep_regression = 12.5\n",
				&c, err, sizeof(err)), 0);
	CHECK_STR(err, "");
	CHECK_EQ_INT(c.window_s, 30);
	CHECK_STR(c.match, "^python");
	CHECK_STR(c.match_cgroup, "/system.slice/train.service");
	CHECK_STR(c.jsonl, "/var/log/pp.jsonl");
	CHECK_EQ_INT(c.jsonl_max_bytes, 1048576);
	CHECK_EQ_INT(c.jsonl_keep, 2);
	CHECK(c.step_regression > 0.1249 && c.step_regression < 0.1251);
}

TEST(test_errors_leave_settings_alone)
{
	static const struct {
		const char *text, *why;
	} bad[] = {
		{ "window = 0\n", "line 1: invalid value for window: 0" },
		{ "window = 10s\n", "line 1: invalid value for window: 10s" },
		{ "\nwindow\n", "line 2: expected key = value" },
		{ "colour = blue\n", "line 1: unknown setting: colour" },
		{ "match = (\n", "line 1: invalid regular expression for match: (" },
		{ "step_regression = nan\n", "line 1: invalid value for step_regression: nan" },
		{ "jsonl_keep = -1\n", "line 1: invalid value for jsonl_keep: -1" },
		{ "listen =\n", "line 1: invalid value for listen:  (expected ADDR:PORT or [IPV6]:PORT, numeric)" },
		/* The address is checked when it is read, not when the daemon binds it. */
		{ "listen = garbage\n", "line 1: invalid value for listen: garbage (expected ADDR:PORT or [IPV6]:PORT, numeric)" },
		{ "listen = localhost:9464\n", "line 1: invalid value for listen: localhost:9464 (expected ADDR:PORT or [IPV6]:PORT, numeric)" },
		{ "match_cgroup = system.slice\n", "line 1: invalid value for match_cgroup: system.slice (a cgroup path as in /proc/PID/cgroup, starting with /)" },
		{ "serve = everything\n", "line 1: invalid value for serve: everything (all, no-cmdline or metrics)" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct daemon_config c;
		char err[256] = "";

		daemon_config_defaults(&c);
		CHECK_EQ_INT(parse_text(bad[i].text, &c, err, sizeof(err)), -EINVAL);
		CHECK_STR(err, bad[i].why);
		CHECK_EQ_INT(c.window_s, 10);
	}
	/* A valid line before a bad one is not applied either: all or nothing. */
	{
		struct daemon_config c;
		char err[256];

		daemon_config_defaults(&c);
		CHECK_EQ_INT(parse_text("window = 5\nnope = 1\n", &c, err, sizeof(err)), -EINVAL);
		CHECK_EQ_INT(c.window_s, 10);
	}
}

TEST(test_set_names)
{
	struct daemon_config c;
	char err[256];

	daemon_config_defaults(&c);
	CHECK_EQ_INT(daemon_config_set(&c, "jsonl-keep", "3", err, sizeof(err)), 0);
	CHECK_EQ_INT(daemon_config_set(&c, "jsonl_keep", "4", err, sizeof(err)), 0);
	CHECK_EQ_INT(c.jsonl_keep, 4);
	CHECK_EQ_INT(daemon_config_set(&c, "listen", "[::1]:9464", err, sizeof(err)), 0);
	CHECK_STR(c.listen, "[::1]:9464");
	CHECK_EQ_INT(daemon_config_set(&c, "listen", "0.0.0.0:9464", err, sizeof(err)), 0);
	CHECK_EQ_INT(daemon_config_set(&c, "listen", "127.0.0.1:99999", err, sizeof(err)), -EINVAL);
	CHECK_STR(c.listen, "0.0.0.0:9464");
	CHECK_EQ_INT(c.serve, SERVE_ALL);
	CHECK_EQ_INT(daemon_config_set(&c, "serve", "metrics", err, sizeof(err)), 0);
	CHECK_EQ_INT(c.serve, SERVE_METRICS);
	CHECK_EQ_INT(daemon_config_set(&c, "serve", "no-cmdline", err, sizeof(err)), 0);
	CHECK_EQ_INT(c.serve, SERVE_NO_CMDLINE);
	CHECK_STR(daemon_serve_name(c.serve), "no-cmdline");
	CHECK_EQ_INT(daemon_config_set(&c, "match-cgroup", "/system.slice", err, sizeof(err)), 0);
	CHECK_EQ_INT(daemon_config_set(&c, "match-cgroup", "", err, sizeof(err)), 0);
	CHECK_STR(c.match_cgroup, "");
	CHECK_EQ_INT(daemon_config_set(&c, "window", "86401", err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(daemon_config_set(&c, "jsonl_max_bytes", "100", err, sizeof(err)), -EINVAL);
	/* A refused expression leaves the one in force. */
	CHECK_EQ_INT(daemon_config_set(&c, "match", "^python", err, sizeof(err)), 0);
	CHECK_EQ_INT(daemon_config_set(&c, "match", "(py", err, sizeof(err)), -EINVAL);
	CHECK_STR(c.match, "^python");
}

/* glibc's regcomp() would spend seconds and gigabytes on these: refused before it runs. */
TEST(test_match_cost)
{
	static const char *const fine[] = {
		"^python", "^(python[0-9.]*|torchrun|pt_main_thread)$", "[a-z_]{1,15}",
		"^[[:alpha:]]+[0-9]*$", "a++", "((a|b)+c?)*", "[]a-z{]+x{3}",
		"python.*train.*", "(a*)+", "(worker|b*)+", "x*{5}", "[a-z]{1,64}", "a{1,300}",
		"a{4000,}",
	};
	static const char *const costly[] = {
		"a++++++++++++++++++++++++", "((a{1,100}){1,100}){1,10}",
		"((((((((((((((a+)+)+)+)+)+)+)+)+)+)+)+)+)+)+", "x{32767}",
		/* copies of a star: 1.4 s and 110 MB in regcomp (found by fuzz_daemon_config) */
		"a\243++*++++++++++", "a++*++++++++++", "a*+++++++++", "(a{0,3})+++++++++",
		/* nested optional copies: 2.2 s and 756 MB (found by fuzz_daemon_config) */
		"ch {1,09900}", "a{0,4000}", "(a|b){1,2000}", "(a{1,100}){1,100}",
	};
	struct daemon_config c;
	char err[256];

	daemon_config_defaults(&c);
	for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++)
		CHECK_MSG(!daemon_config_set(&c, "match", fine[i], err, sizeof(err)), "%s: %s",
			  fine[i], err);
	for (size_t i = 0; i < sizeof(costly) / sizeof(costly[0]); i++) {
		CHECK_EQ_INT(daemon_config_set(&c, "match", costly[i], err, sizeof(err)), -EINVAL);
		CHECK(strstr(err, "too complex") != NULL);
	}
}

/* A directory opens for reading but cannot be read: the cause, not "read error". */
TEST(test_unreadable)
{
	struct daemon_config c;
	char err[256] = "";
	FILE *f = fopen("/", "r");

	if (!CHECK(f))
		return;
	daemon_config_defaults(&c);
	CHECK_EQ_INT(daemon_config_parse(f, &c, err, sizeof(err)), -EISDIR);
	CHECK_STR(err, "cannot read: Is a directory");
	fclose(f);
}

/* The file `make install` puts in /etc/pipeprof must be one the daemon accepts. */
TEST(test_shipped_config)
{
	struct daemon_config c;
	char path[512], err[256] = "";
	FILE *f = fopen(UNIT_SRC_PATH(path, "tools/daemon.conf"), "r");

	if (!CHECK_MSG(f, "%s missing", path))
		return;
	daemon_config_defaults(&c);
	CHECK_EQ_INT(daemon_config_parse(f, &c, err, sizeof(err)), 0);
	CHECK_STR(err, "");
	CHECK_STR(c.listen, "127.0.0.1:9464");
	CHECK_STR(c.jsonl, "/var/log/pipeprof/events.jsonl");
	fclose(f);
}

int main(void)
{
	RUN_TEST(test_defaults);
	RUN_TEST(test_file);
	RUN_TEST(test_errors_leave_settings_alone);
	RUN_TEST(test_set_names);
	RUN_TEST(test_match_cost);
	RUN_TEST(test_unreadable);
	RUN_TEST(test_shipped_config);
	return unit_summary();
}

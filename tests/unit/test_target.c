// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "target.h"
#include "unit.h"

static char root[] = "/tmp/pipeprof-target-XXXXXX";

static void put(const char *rel, const char *text)
{
	char path[512], dir[512], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	for (slash = strchr(dir + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = 0;
		mkdir(dir, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	if (!CHECK_MSG(f, "cannot write %s", path))
		return;
	fputs(text, f);
	fclose(f);
}

/* A task as procfs shows it: /PID/status, and /TGID/task/TID/{stat,comm}; the process's own
 * /PID/stat too when it is a group leader. */
static void task(int tgid, int tid, int ppid, const char *comm, char state, unsigned int flags)
{
	char rel[96], text[256];

	snprintf(rel, sizeof(rel), "%d/status", tid);
	snprintf(text, sizeof(text), "Name:\t%s\nState:\t%c\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\n",
		 comm, state, tgid, tid, ppid);
	put(rel, text);
	snprintf(text, sizeof(text), "%d (%s) %c %d %d %d 0 -1 %u 1 0 0 0 5 3\n", tid, comm, state,
		 ppid, tgid, tgid, flags);
	snprintf(rel, sizeof(rel), "%d/task/%d/stat", tgid, tid);
	put(rel, text);
	if (tgid == tid) {
		snprintf(rel, sizeof(rel), "%d/stat", tid);
		put(rel, text);
	}
	snprintf(rel, sizeof(rel), "%d/task/%d/comm", tgid, tid);
	snprintf(text, sizeof(text), "%s\n", comm);
	put(rel, text);
}

TEST(test_parse_stat)
{
	unsigned int flags = 0;
	pid_t ppid = 0;
	char st = 0;

	CHECK_EQ_INT(target_parse_stat("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0", &st, &ppid, &flags), 0);
	CHECK_EQ_INT(st, 'S');
	CHECK_EQ_INT(ppid, 0);
	CHECK(flags & 0x00200000);
	/* A hostile comm with ") Z 1" inside must not shift the fields. */
	CHECK_EQ_INT(target_parse_stat("7 (a) Z 1 0 0 0 0 0 x) R 3 7 7 0 -1 4194560 1", &st, &ppid,
				       &flags), 0);
	CHECK_EQ_INT(st, 'R');
	CHECK_EQ_INT(ppid, 3);
	CHECK_EQ_INT(target_parse_stat("7 (a) R 3", &st, &ppid, &flags), -EINVAL);
	CHECK_EQ_INT(target_parse_stat("no parenthesis", &st, &ppid, &flags), -EINVAL);
}

TEST(test_kinds)
{
	struct target_info ti;
	char line[512];

	task(100, 100, 1, "python3", 'S', 0x400000);
	task(100, 101, 1, "pt_data_worker", 'S', 0x400040);
	task(2, 2, 0, "kthreadd", 'S', 0x208040);
	task(50, 50, 40, "python3", 'Z', 0x40040c);
	/* A leader that called pthread_exit() while a thread still runs is alive. */
	task(60, 60, 1, "trainer", 'Z', 0x400000);
	task(60, 61, 1, "loader", 'R', 0x400040);
	task(1, 1, 0, "systemd", 'S', 0x400100);
	task(900, 900, 1, "sh", 'S', 0x400000);

	CHECK_EQ_INT(target_inspect(root, 100, 900, &ti), 0);
	CHECK_EQ_INT(ti.kind, TARGET_PROCESS);

	CHECK_EQ_INT(target_inspect(root, 101, 900, &ti), 0);
	CHECK_EQ_INT(ti.kind, TARGET_THREAD);
	CHECK_EQ_INT(ti.tgid, 100);
	CHECK_STR(ti.comm, "pt_data_worker");
	CHECK_STR(ti.process_comm, "python3");
	CHECK(strstr(target_describe(&ti, line, sizeof(line)), "tracing process 100"));

	CHECK_EQ_INT(target_inspect(root, 2, 900, &ti), 0);
	CHECK_EQ_INT(ti.kind, TARGET_KERNEL_THREAD);
	CHECK(strstr(target_describe(&ti, line, sizeof(line)), "kernel thread"));

	CHECK_EQ_INT(target_inspect(root, 50, 900, &ti), 0);
	CHECK_EQ_INT(ti.kind, TARGET_ZOMBIE);
	CHECK_EQ_INT(ti.ppid, 40);
	CHECK(strstr(target_describe(&ti, line, sizeof(line)), "has exited"));

	CHECK_EQ_INT(target_inspect(root, 60, 900, &ti), 0);
	CHECK_EQ_INT(ti.kind, TARGET_PROCESS);

	CHECK_EQ_INT(target_inspect(root, 4242, 900, &ti), 0);
	CHECK_EQ_INT(ti.kind, TARGET_GONE);
}

TEST(test_init)
{
	struct target_info ti;

	/* An init system as PID 1 is refused whoever asks. */
	CHECK_EQ_INT(target_inspect(root, 1, 900, &ti), 0);
	CHECK_EQ_INT(ti.kind, TARGET_INIT);

	/* A job that is its container's PID 1 is traced by a tool entered from outside (its
	 * parent chain ends at 0 without reaching 1)... */
	task(1, 1, 0, "python3", 'S', 0x400100);
	task(800, 800, 0, "pipeprof", 'R', 0x400000);
	CHECK_EQ_INT(target_inspect(root, 1, 800, &ti), 0);
	CHECK_EQ_INT(ti.kind, TARGET_PROCESS);
	/* ...and refused from a shell below it, where it is the ancestor of everything. */
	CHECK_EQ_INT(target_inspect(root, 1, 900, &ti), 0);
	CHECK_EQ_INT(ti.kind, TARGET_INIT);

	CHECK(target_is_init_system("tini"));
	CHECK(!target_is_init_system("python3"));
}

TEST(test_describe_is_terminal_safe)
{
	struct target_info ti = { .kind = TARGET_KERNEL_THREAD, .pid = 9 };
	char line[512];

	snprintf(ti.comm, sizeof(ti.comm), "a\x1b[31m\xff\tz");
	target_describe(&ti, line, sizeof(line));
	CHECK(!strchr(line, '\x1b'));
	CHECK(!strchr(line, '\t'));
	CHECK(strstr(line, "\\x1b[31m\\xff\\x09z"));
}

int main(void)
{
	int status;

	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	RUN_TEST(test_parse_stat);
	RUN_TEST(test_kinds);
	RUN_TEST(test_init);
	RUN_TEST(test_describe_is_terminal_safe);
	status = unit_summary();
	if (fork() == 0)
		execlp("rm", "rm", "-rf", root, (char *)NULL);
	return status;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include "cgroup.h"
#include "unit.h"

static char tmp[] = "/tmp/pipeprof-cgroup-XXXXXX";
static char mountinfo[PATH_MAX];

static void mkdir_in(const char *rel)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	CHECK_MSG(!mkdir(path, 0755) || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
}

/* A mountinfo whose cgroup file systems are directories under tmp. */
static void write_mountinfo(const char *lines)
{
	FILE *f = fopen(mountinfo, "w");

	if (!CHECK(f))
		return;
	fputs(lines, f);
	fclose(f);
}

static int find(const char *path, char *where)
{
	return cgroup_find(mountinfo, path, where, PATH_MAX);
}

TEST(test_unified)
{
	char text[4096], where[PATH_MAX], want[PATH_MAX];

	mkdir_in("cg2");
	mkdir_in("cg2/system.slice");
	mkdir_in("cg2/system.slice/train.service");
	snprintf(text, sizeof(text),
		 "22 1 0:21 / /proc rw - proc proc rw\n"
		 "30 22 0:27 / %s/cg2 rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", tmp);
	write_mountinfo(text);
	CHECK_EQ_INT(find("/system.slice/train.service", where), 1);
	snprintf(want, sizeof(want), "%s/cg2/system.slice/train.service", tmp);
	CHECK_STR(where, want);
	CHECK_EQ_INT(find("/system.slice/", where), 1);
	CHECK_EQ_INT(find("/", where), 1);
	CHECK_EQ_INT(find("/system.slice/nope.service", where), 0);
	snprintf(want, sizeof(want), "%s/cg2", tmp);
	CHECK_STR(where, want);
}

TEST(test_v1_hierarchies_and_escapes)
{
	char text[4096], where[PATH_MAX], want[PATH_MAX];

	mkdir_in("v1");
	mkdir_in("v1/cpu");
	mkdir_in("v1/mem ory");
	mkdir_in("v1/mem ory/jobs");
	mkdir_in("v1/mem ory/jobs/a");
	snprintf(text, sizeof(text),
		 "31 30 0:28 / %s/v1/cpu rw,relatime - cgroup cgroup rw,cpu\n"
		 "34 30 0:31 / %s/v1/mem\\040ory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
		 "40 30 0:99 / %s/v1/other rw - tmpfs tmpfs rw\n", tmp, tmp, tmp);
	write_mountinfo(text);
	/* Only the memory hierarchy has it: enough. */
	CHECK_EQ_INT(find("/jobs/a", where), 1);
	snprintf(want, sizeof(want), "%s/v1/mem ory/jobs/a", tmp);
	CHECK_STR(where, want);
	/* Not found: the directory holding both hierarchies is named. */
	CHECK_EQ_INT(find("/jobs/b", where), 0);
	snprintf(want, sizeof(want), "%s/v1", tmp);
	CHECK_STR(where, want);
}

TEST(test_subtree_mount)
{
	char text[4096], where[PATH_MAX];

	/* A container's view: the mount's top directory is the cgroup /kubepods/pod1. */
	mkdir_in("pod");
	mkdir_in("pod/trainer");
	snprintf(text, sizeof(text), "50 40 0:30 /kubepods/pod1 %s/pod ro - cgroup2 cgroup2 rw\n",
		 tmp);
	write_mountinfo(text);
	CHECK_EQ_INT(find("/kubepods/pod1/trainer", where), 1);
	CHECK_EQ_INT(find("/kubepods/pod1", where), 1);
	CHECK_EQ_INT(find("/kubepods/pod12/trainer", where), 0);
	CHECK_EQ_INT(find("/trainer", where), 0);
}

TEST(test_nothing_mounted)
{
	char where[PATH_MAX] = "x";

	write_mountinfo("22 1 0:21 / /proc rw - proc proc rw\n");
	CHECK_EQ_INT(find("/", where), 0);
	CHECK_STR(where, "");
	CHECK_EQ_INT(cgroup_find("/nonexistent/mountinfo", "/", where, sizeof(where)), -ENOENT);
}

TEST(test_this_machine)
{
	char where[PATH_MAX];
	int ret = cgroup_find(CGROUP_MOUNTINFO, "/", where, sizeof(where));

	/* Every Linux this runs on mounts some cgroup file system. */
	CHECK_MSG(ret == 1, "/: %d (%s)", ret, where);
	CHECK_EQ_INT(cgroup_find(CGROUP_MOUNTINFO, "/pipeprof-no-such-cgroup", where,
				 sizeof(where)), 0);
}

int main(void)
{
	char cmd[PATH_MAX + 16];

	if (!CHECK(mkdtemp(tmp)))
		return unit_summary();
	snprintf(mountinfo, sizeof(mountinfo), "%s/mountinfo", tmp);
	RUN_TEST(test_unified);
	RUN_TEST(test_v1_hierarchies_and_escapes);
	RUN_TEST(test_subtree_mount);
	RUN_TEST(test_nothing_mounted);
	RUN_TEST(test_this_machine);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	CHECK_EQ_INT(system(cmd), 0);
	return unit_summary();
}

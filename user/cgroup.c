// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "cgroup.h"

/* mountinfo writes space, tab, newline and backslash as \ooo. In place. */
static void unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0');
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = 0;
}

/* A mount's root, as the cgroup path of its top directory: "/" unless a subtree is mounted. */
static bool under(const char *path, const char *root, const char **rest)
{
	size_t len = strlen(root);

	if (!strcmp(root, "/")) {
		*rest = path;
		return true;
	}
	if (strncmp(path, root, len) || (path[len] && path[len] != '/'))
		return false;
	*rest = path + len;
	return true;
}

/* where becomes the directory that holds both it and mnt (v1 hierarchies share a parent). */
static void common_dir(char *where, size_t size, const char *mnt, bool looked)
{
	size_t i = 0, cut = 0;

	if (!looked) {
		snprintf(where, size, "%s", mnt);
		return;
	}
	for (; where[i] && where[i] == mnt[i]; i++)
		if (where[i] == '/')
			cut = i;
	/* One is the other, or the other's parent. */
	if ((!where[i] && (!mnt[i] || mnt[i] == '/')) || (!mnt[i] && where[i] == '/'))
		cut = i;
	where[cut ? cut : 1] = 0;
}

int cgroup_find(const char *mountinfo, const char *path, char *where, size_t size)
{
	char line[2 * PATH_MAX + 256], root[PATH_MAX], mnt[PATH_MAX], dir[2 * PATH_MAX];
	bool looked = false;
	int ret = 0;
	FILE *f;

	if (size)
		where[0] = 0;
	f = fopen(mountinfo, "re");
	if (!f)
		return -errno;
	while (ret == 0 && fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - "), *rest;
		char fstype[32];
		struct stat st;

		/* ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE ... */
		if (!sep || sscanf(line, "%*d %*d %*s %4095s %4095s", root, mnt) != 2 ||
		    sscanf(sep + 3, "%31s", fstype) != 1)
			continue;
		if (strcmp(fstype, "cgroup2") && strcmp(fstype, "cgroup"))
			continue;
		unescape(root);
		unescape(mnt);
		if (size)
			common_dir(where, size, mnt, looked);
		looked = true;
		if (!under(path, root, &rest))
			continue;
		snprintf(dir, sizeof(dir), "%s%s", mnt, rest);
		if (!stat(dir, &st) && S_ISDIR(st.st_mode)) {
			if (size)
				snprintf(where, size, "%s", dir);
			ret = 1;
		}
	}
	fclose(f);
	return ret;
}

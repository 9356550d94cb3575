// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cache.h"
#include "grow.h"

bool cache_dir_safe(const struct stat *st, uid_t euid)
{
	if (!S_ISDIR(st->st_mode) || (st->st_uid != 0 && st->st_uid != euid))
		return false;
	if (!(st->st_mode & (S_IWGRP | S_IWOTH)))
		return true;
	return st->st_uid == 0 && (st->st_mode & S_ISVTX);
}

bool cache_file_safe(const struct stat *st, uid_t euid)
{
	return S_ISREG(st->st_mode) && (st->st_uid == 0 || st->st_uid == euid) &&
	       st->st_nlink == 1 && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

bool cache_name_ok(const char *name)
{
	size_t len = strlen(name);

	if (!len || len > 128 || name[0] == '.')
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

/* Walks path from / one component at a time without following links, checking each directory
 * before trusting what it holds; the last one is made when missing. */
static int open_dir_chain(const char *path, uid_t euid)
{
	char copy[PATH_MAX], *save = NULL, *comp;
	int fd, err = 0;
	struct stat st;

	if (path[0] != '/' || strlen(path) >= sizeof(copy))
		return -EINVAL;
	snprintf(copy, sizeof(copy), "%s", path);
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (comp = strtok_r(copy, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		const char *rest = save ? save : "";
		int next;

		if (fstat(fd, &st)) {
			err = -errno;
			goto cleanup;
		}
		if (!cache_dir_safe(&st, euid)) {
			err = -EPERM;
			goto cleanup;
		}
		next = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		while (*rest == '/')
			rest++;
		if (next < 0 && errno == ENOENT && !*rest) {
			/* Only the cache directory itself is ever made, never its parents. */
			if (mkdirat(fd, comp, 0700) && errno != EEXIST) {
				err = -errno;
				goto cleanup;
			}
			next = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (next < 0) {
			struct stat lst;

			err = -errno;
			/* a symlink on the way: O_DIRECTORY makes it ENOTDIR rather than ELOOP */
			if (err == -ELOOP || (!fstatat(fd, comp, &lst, AT_SYMLINK_NOFOLLOW) &&
					      S_ISLNK(lst.st_mode)))
				err = -EPERM;
			goto cleanup;
		}
		close(fd);
		fd = next;
	}
	if (fstat(fd, &st)) {
		err = -errno;
		goto cleanup;
	}
	if (!cache_dir_safe(&st, euid) || (st.st_mode & (S_IWGRP | S_IWOTH)))
		err = -EPERM;
cleanup:
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

int cache_open(void)
{
	const char *path = getenv("PIPEPROF_CACHE_DIR");

	if (!path || !*path)
		path = CACHE_DEFAULT_DIR;
	if (!strcmp(path, "off"))
		return -ENOENT;
	return open_dir_chain(path, geteuid());
}

int cache_get(int dirfd, const char *name, char *buf, size_t size)
{
	struct stat st;
	ssize_t len;
	int fd, err = 0;

	if (!cache_name_ok(name) || size < 2)
		return -EINVAL;
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -EPERM : -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto cleanup;
	}
	if (!cache_file_safe(&st, geteuid())) {
		err = -EPERM;
		goto cleanup;
	}
	if ((size_t)st.st_size >= size) {
		err = -EFBIG;
		goto cleanup;
	}
	len = pread(fd, buf, size - 1, 0);
	if (len < 0) {
		err = -errno;
		goto cleanup;
	}
	buf[len] = '\0';
	err = (int)len;
cleanup:
	close(fd);
	return err;
}

int cache_put(int dirfd, const char *name, const char *data, size_t len)
{
	char tmp[160];
	int fd, err = 0;
	ssize_t n;

	if (!cache_name_ok(name))
		return -EINVAL;
	snprintf(tmp, sizeof(tmp), ".%s.%d", name, (int)getpid());
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	n = write(fd, data, len);
	if (n < 0 || (size_t)n != len)
		err = n < 0 ? -errno : -EIO;
	if (close(fd) && !err)
		err = -errno;
	if (!err && renameat(dirfd, tmp, dirfd, name))
		err = -errno;
	if (err)
		unlinkat(dirfd, tmp, 0);
	return err;
}

/* readdir needs a descriptor opened for reading, not the O_PATH one. */
static DIR *open_entries(int dir_fd)
{
	int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir;

	if (fd < 0)
		return NULL;
	dir = fdopendir(fd);
	if (!dir)
		close(fd);
	return dir;
}

void cache_prune(int dir_fd, const char *prefix, const char *keep)
{
	size_t plen = strlen(prefix), klen = strlen(keep);
	DIR *dir = open_entries(dir_fd);
	struct dirent *de;

	if (!dir)
		return;
	while ((de = readdir(dir)))
		if (!strncmp(de->d_name, prefix, plen) && strncmp(de->d_name, keep, klen))
			unlinkat(dirfd(dir), de->d_name, 0);
	closedir(dir);
}

struct aged_name {
	struct timespec mtime;
	char name[NAME_MAX + 1];
};

static int newest_first(const void *a, const void *b)
{
	const struct aged_name *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? 1 : -1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? 1 : -1;
	return strcmp(x->name, y->name);
}

void cache_trim(int dir_fd, const char *prefix, int max)
{
	size_t plen = strlen(prefix);
	struct aged_name *names = NULL;
	DIR *dir = open_entries(dir_fd);
	struct dirent *de;
	int n = 0, cap = 0;

	if (!dir)
		return;
	while ((de = readdir(dir))) {
		struct stat st;

		if (strncmp(de->d_name, prefix, plen) ||
		    fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (grow_array(&names, &cap, n, sizeof(*names), 64))
			break;
		names[n].mtime = st.st_mtim;
		snprintf(names[n].name, sizeof(names[n].name), "%s", de->d_name);
		n++;
	}
	if (n > max) {
		qsort(names, n, sizeof(*names), newest_first);
		for (int i = max; i < n; i++)
			unlinkat(dirfd(dir), names[i].name, 0);
	}
	free(names);
	closedir(dir);
}

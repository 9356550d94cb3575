// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "jsonl.h"
#include "sanitize.h"

static int fail(struct jsonl *j, int err, const char *what)
{
	snprintf(j->error, sizeof(j->error), "%s %s: %s", what, j->path, strerror(-err));
	return err;
}

static int open_live(struct jsonl *j)
{
	char dir[PATH_MAX], *slash;
	struct stat st;
	int err;

	j->fd = open(j->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (j->fd < 0) {
		err = -errno;
		/* O_CREAT turns "no such file" into "no such directory": say which one. */
		if (err == -ENOENT) {
			snprintf(dir, sizeof(dir), "%s", j->path);
			slash = strrchr(dir, '/');
			if (slash && slash != dir) {
				*slash = '\0';
				if (stat(dir, &st) && errno == ENOENT) {
					snprintf(j->error, sizeof(j->error),
						 "directory %s does not exist", dir);
					return err;
				}
			}
		}
		return fail(j, err, "cannot open");
	}
	if (fstat(j->fd, &st)) {
		err = fail(j, -errno, "cannot stat");
		close(j->fd);
		j->fd = -1;
		return err;
	}
	/* Renaming /dev/stdout or a FIFO away would not start a new file. */
	j->regular = S_ISREG(st.st_mode);
	j->size = st.st_size;
	return 0;
}

int jsonl_open(struct jsonl *j, const char *path, off_t max_bytes, int keep)
{
	memset(j, 0, sizeof(*j));
	j->fd = -1;
	if (!path || !*path || max_bytes < 0 || keep < 0) {
		snprintf(j->error, sizeof(j->error), "bad arguments");
		return -EINVAL;
	}
	/* Room for the oldest rotated name, so rotation cannot fail on length later. */
	if (snprintf(j->path, sizeof(j->path), "%s", path) >= (int)sizeof(j->path) - 12)
		return fail(j, -ENAMETOOLONG, "cannot use");
	j->max_bytes = max_bytes;
	j->keep = keep;
	return open_live(j);
}

static void old_name(const struct jsonl *j, char *buf, int i)
{
	/* jsonl_open() checked the length. */
	if (snprintf(buf, PATH_MAX, "%s.%d", j->path, i) >= PATH_MAX)
		buf[0] = '\0';
}

int jsonl_rotate(struct jsonl *j)
{
	char from[PATH_MAX], to[PATH_MAX];
	int err;

	if (j->fd < 0) {
		err = open_live(j);
		if (err)
			return err;
	}
	if (!j->regular)
		return 0;
	if (!j->keep) {
		if (unlink(j->path) && errno != ENOENT)
			return fail(j, -errno, "cannot remove");
	} else {
		/* Oldest first, so each rename lands on a name already moved on (or dropped). */
		for (int i = j->keep - 1; i >= 1; i--) {
			old_name(j, from, i);
			old_name(j, to, i + 1);
			if (rename(from, to) && errno != ENOENT)
				return fail(j, -errno, "cannot rotate");
		}
		old_name(j, to, 1);
		/* ENOENT: moved away already (logrotate, an operator); just start afresh. */
		if (rename(j->path, to) && errno != ENOENT)
			return fail(j, -errno, "cannot rotate");
	}
	close(j->fd);
	j->fd = -1;
	return open_live(j);
}

/* The whole buffer or nothing: a fragment left by a failed write is cut off again, so the
 * file never ends in half a line. */
static int write_all(struct jsonl *j, const char *buf, size_t len)
{
	off_t start = j->size;
	size_t done = 0;
	ssize_t n;
	int err;

	while (done < len) {
		n = write(j->fd, buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			if (done && ftruncate(j->fd, start))
				err = -errno;
			return fail(j, err, "cannot write");
		}
		done += n;
	}
	j->size = start + len;
	return 0;
}

int jsonl_write(struct jsonl *j, json_object *o)
{
	const char *text;
	size_t len, need;
	struct stat st;
	bool valid;
	int err;

	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
					      JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!text)
		return fail(j, -ENOMEM, "cannot format a line for");
	len = strlen(text);
	/* Room for a repair: json-c copies bytes that are not UTF-8 (a hostile comm) as they
	 * are, and each may become U+FFFD's three. */
	valid = san_utf8_valid(text, len);
	need = (valid ? len : 3 * len) + 2;
	if (need > j->buf_cap) {
		char *grown = realloc(j->buf, need);

		if (!grown)
			return fail(j, -ENOMEM, "cannot format a line for");
		j->buf = grown;
		j->buf_cap = need;
	}
	/* One write(2) of line and newline: a reader never sees the line without its end. */
	if (valid)
		memcpy(j->buf, text, len);
	else
		len = san_utf8_repair(j->buf, text, len);
	j->buf[len] = '\n';

	if (j->fd < 0) {
		err = open_live(j);
		if (err)
			return err;
	}
	/* The file may have been truncated (copytruncate) or appended to behind our back. */
	if (!fstat(j->fd, &st))
		j->size = st.st_size;
	if (j->max_bytes && j->size > 0 && j->size + (off_t)(len + 1) > j->max_bytes) {
		err = jsonl_rotate(j);
		if (err)
			return err;
	}
	return write_all(j, j->buf, len + 1);
}

int jsonl_reopen(struct jsonl *j)
{
	if (j->fd >= 0)
		close(j->fd);
	j->fd = -1;
	return open_live(j);
}

void jsonl_close(struct jsonl *j)
{
	if (j->fd >= 0)
		close(j->fd);
	j->fd = -1;
	free(j->buf);
	j->buf = NULL;
	j->buf_cap = 0;
}

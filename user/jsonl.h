/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* An append-only JSON-lines file with size-based rotation, numbered as logrotate numbers:
 * path is the live file, path.1 the newest old one, path.KEEP the oldest kept. One writer;
 * readers (tail -F, log shippers) only ever see whole lines. */
#ifndef PIPEPROF_JSONL_H
#define PIPEPROF_JSONL_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>
#include <json-c/json.h>

struct jsonl {
	int fd;			/* -1 after a failed rotation or reopen; the next write retries */
	char path[PATH_MAX];
	off_t max_bytes;	/* rotate before a line would take the file past this; 0: never */
	off_t size;		/* of the live file, as far as this writer knows */
	int keep;		/* old files kept; 0: a rotation just starts the file afresh */
	bool regular;		/* a FIFO or /dev/stdout is never rotated */
	char *buf;		/* one line and its '\n', reused */
	size_t buf_cap;
	char error[PATH_MAX + 64];	/* why the last call failed, for the caller's message */
};

/* Open (create, mode 0644) path for appending. The parent directory is not created: a missing
 * one is -ENOENT with j->error naming it. Returns 0 or -errno; j needs jsonl_close() either
 * way. */
int jsonl_open(struct jsonl *j, const char *path, off_t max_bytes, int keep);

/* Append o as one line (plain, '/' unescaped), rotating first when the line would take a
 * non-empty file past max_bytes; a line longer than max_bytes gets a file to itself. The line
 * reaches the file in full or not at all. Returns 0 or -errno. */
int jsonl_write(struct jsonl *j, json_object *o);

/* Rotate now: path.(keep-1) -> path.keep, ..., path -> path.1, then a fresh path. */
int jsonl_rotate(struct jsonl *j);

/* Close and open path again: for SIGHUP once something else has moved the file away. */
int jsonl_reopen(struct jsonl *j);

void jsonl_close(struct jsonl *j);

#endif

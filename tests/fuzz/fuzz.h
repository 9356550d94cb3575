/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Shared by the libFuzzer targets in this directory. A target checks what the parser promises
 * on top of what the sanitizers catch: a broken promise aborts, which libFuzzer reports as a
 * crash with the input that caused it.
 */
#ifndef PIPEPROF_FUZZ_H
#define PIPEPROF_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond) do {							\
	if (!(cond)) {								\
		fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
		abort();							\
	}									\
} while (0)

/* The input as a C string, in an allocation of its own so that ASan sees a read past it. */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* Whether a string ends inside its array: a parser that forgot to terminate one fails this. */
#define FUZZ_TERMINATED(arr) (memchr((arr), '\0', sizeof(arr)) != NULL)

/*
 * The parsers report errors on stdout and stderr, which would bury libFuzzer's own output.
 * stdio's streams are swapped rather than their descriptors closed, so that libFuzzer, which
 * holds its own FILE for stderr, and the sanitizers, which write to fd 2, still speak.
 */
struct fuzz_quiet {
	FILE *out, *err;
};

static inline void fuzz_quiet_begin(struct fuzz_quiet *q)
{
	static FILE *null;

	if (!null)
		null = fopen("/dev/null", "w");
	if (!null)
		abort();
	q->out = stdout;
	q->err = stderr;
	stdout = null;
	stderr = null;
}

static inline void fuzz_quiet_end(struct fuzz_quiet *q)
{
	fflush(stdout);
	stdout = q->out;
	stderr = q->err;
}

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A minimal unit-test harness: one header, no library. Every CHECK counts once; a failure
 * prints file:line and carries on, so one run shows every broken expectation. main() calls
 * RUN_TEST() for each test and returns unit_summary(), whose last line
 * "N passed, N failed" is what tools/run-unit-tests.sh adds up.
 */
#ifndef PIPEPROF_UNIT_H
#define PIPEPROF_UNIT_H

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static unsigned int unit_passed __attribute__((unused));
static unsigned int unit_failed __attribute__((unused));
static const char *unit_current __attribute__((unused)) = "";

__attribute__((format(printf, 4, 5)))
static inline bool unit_check(bool ok, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		unit_passed++;
		return true;
	}
	unit_failed++;
	printf("FAIL %s:%d: [%s] ", file, line, unit_current);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	/* A crash later on must not swallow this line in a pipe's buffer. */
	fflush(stdout);
	return false;
}

static inline bool unit_check_u64(uint64_t a, uint64_t b, const char *sa, const char *sb,
				  const char *file, int line)
{
	return unit_check(a == b, file, line, "%s == %s: 0x%" PRIx64 " (%" PRIu64 ") != 0x%"
			  PRIx64 " (%" PRIu64 ")", sa, sb, a, a, b, b);
}

static inline bool unit_check_int(long long a, long long b, const char *sa, const char *sb,
				  const char *file, int line)
{
	return unit_check(a == b, file, line, "%s == %s: %lld != %lld", sa, sb, a, b);
}

static inline bool unit_check_str(const char *a, const char *b, const char *sa, const char *sb,
				  const char *file, int line)
{
	bool ok = a && b ? !strcmp(a, b) : a == b;

	return unit_check(ok, file, line, "%s == %s: \"%s\" != \"%s\"", sa, sb,
			  a ? a : "(null)", b ? b : "(null)");
}

/* Each evaluates its arguments once and yields whether the check passed. */
#define CHECK(cond) unit_check(!!(cond), __FILE__, __LINE__, "%s", #cond)
#define CHECK_MSG(cond, ...) unit_check(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_EQ_U64(a, b) unit_check_u64((a), (b), #a, #b, __FILE__, __LINE__)
#define CHECK_EQ_INT(a, b) unit_check_int((a), (b), #a, #b, __FILE__, __LINE__)
#define CHECK_STR(a, b) unit_check_str((a), (b), #a, #b, __FILE__, __LINE__)

/* Not a failure and not counted: for inputs this machine does not have. */
#define SKIP(...) do {						\
	printf("SKIP [%s] ", unit_current);			\
	printf(__VA_ARGS__);					\
	putchar('\n');						\
} while (0)

#define TEST(name) static void name(void)

static inline void unit_run(const char *name, void (*fn)(void))
{
	unsigned int failed = unit_failed;

	unit_current = name;
	fn();
	printf("%s %s\n", unit_failed == failed ? "ok  " : "FAIL", name);
	fflush(stdout);
	unit_current = "";
}

#define RUN_TEST(name) unit_run(#name, name)

/* The last line of output, and main()'s exit status. */
static inline int unit_summary(void)
{
	printf("%u passed, %u failed\n", unit_passed, unit_failed);
	fflush(stdout);
	return unit_failed ? 1 : 0;
}

/*
 * Path of a file in the source tree. The Makefile compiles "tests/unit/test_x.c", so
 * __FILE__ is relative to the repository root, which is the working directory under
 * `make unit-test`. Started from elsewhere, the binary finds the root from its own place
 * in .output/tests/ instead.
 */
static inline const char *unit_src_path(char *buf, size_t size, const char *this_file,
					const char *rel)
{
	const char *p, *unit_dir = NULL;
	char exe[PATH_MAX], *slash;
	ssize_t n;
	int len;

	for (p = this_file; (p = strstr(p, "tests/unit/")); p++)
		unit_dir = p;
	len = unit_dir ? (int)(unit_dir - this_file) : 0;
	snprintf(buf, size, "%.*s%s", len, this_file, rel);
	if (this_file[0] == '/' || access(buf, F_OK) == 0)
		return buf;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return buf;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash) {
		*slash = '\0';
		if (snprintf(buf, size, "%s/../../%.*s%s", exe, len, this_file, rel) < (int)size &&
		    access(buf, F_OK) == 0)
			return buf;
	}
	/* Neither exists: report the path relative to the root, as the build sees it. */
	snprintf(buf, size, "%.*s%s", len, this_file, rel);
	return buf;
}

#define UNIT_SRC_PATH(buf, rel) unit_src_path((buf), sizeof(buf), __FILE__, (rel))

#endif

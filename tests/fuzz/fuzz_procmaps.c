// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * /proc/PID/maps: the input is one line for procmaps_parse_line(), and a whole maps file for
 * procmaps_find_libs_in(), which is how the tracer and the daemon read it.
 */
#include <errno.h>
#include "fuzz.h"
#include "procmaps.h"

#define ML_KINDS (1u << LIB_CUDART | 1u << LIB_CUDA | 1u << LIB_TORCH | 1u << LIB_NCCL)

static void check_entry(const struct maps_entry *e)
{
	FUZZ_CHECK(e->start <= e->end);
	FUZZ_CHECK(strlen(e->perms) == 4);
	FUZZ_CHECK(strchr("r-", e->perms[0]) && strchr("w-", e->perms[1]) &&
		   strchr("x-", e->perms[2]) && strchr("ps", e->perms[3]));
	FUZZ_CHECK(FUZZ_TERMINATED(e->path));
	FUZZ_CHECK(!strchr(e->path, '\n'));
}

static void check_libs(const struct mapped_lib *libs, int n, int max, unsigned int mask)
{
	FUZZ_CHECK(n >= 0 && n <= max);
	for (int i = 0; i < n; i++) {
		FUZZ_CHECK(FUZZ_TERMINATED(libs[i].path));
		FUZZ_CHECK(libs[i].inode != 0);
		FUZZ_CHECK(mask & (1u << libs[i].kind));
		FUZZ_CHECK(lib_kind_of_path(libs[i].path) == libs[i].kind);
		/* One entry per file, however many times it is mapped. */
		for (int j = 0; j < i; j++)
			FUZZ_CHECK(libs[j].inode != libs[i].inode ||
				   libs[j].dev_major != libs[i].dev_major ||
				   libs[j].dev_minor != libs[i].dev_minor);
	}
}

static void find_libs(const uint8_t *data, size_t size, unsigned int mask, int max)
{
	static struct mapped_lib libs[8];
	FILE *f;
	int n;

	/* fmemopen() refuses an empty buffer; an empty maps file is an empty stream. */
	f = size ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
	if (!f)
		abort();
	n = procmaps_find_libs_in(f, mask, libs, max);
	fclose(f);
	check_libs(libs, n, max, mask);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct maps_entry e;
	char *line = fuzz_strndup(data, size);
	enum lib_kind kind;

	if (!procmaps_parse_line(line, &e))
		check_entry(&e);
	kind = lib_kind_of_path(line);
	FUZZ_CHECK(kind >= LIB_NONE && kind <= LIB_LOADER);
	FUZZ_CHECK(lib_kind_name(kind) != NULL);
	free(line);

	find_libs(data, size, ML_KINDS, 8);
	/* Every mapped file, LIB_NONE included, into a table that fills up. */
	find_libs(data, size, ~0u, 2);
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The flame graph from folded stacks: any input gives valid UTF-8 whose only markup is the
 * graph's own (no '<' from a frame name reaches the output unescaped).
 */
#include <errno.h>
#include "flamegraph.h"
#include "fuzz.h"
#include "sanitize.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = NULL, *copy = fuzz_strndup(data, size);
	struct flamegraph_counts counts = {};
	unsigned long lines = 0;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int err;

	FUZZ_CHECK(f);
	err = flamegraph_svg(f, copy, size, &(struct flamegraph_opts){ .title = copy }, &counts);
	fclose(f);
	FUZZ_CHECK(err == 0 || err == -ENOMEM);
	if (!err) {
		for (size_t i = 0; i < size; i++)
			lines += data[i] == '\n';
		FUZZ_CHECK(counts.skipped + counts.stacks <= lines + 1);
		FUZZ_CHECK(!counts.stacks == !counts.total);
		FUZZ_CHECK(san_utf8_valid(text, len));
		FUZZ_CHECK(strstr(text, "</svg>\n") == text + len - 7);
		/* Every '<' opens one of the graph's own elements. */
		for (const char *p = strchr(text, '<'); p; p = strchr(p + 1, '<'))
			FUZZ_CHECK(!strncmp(p, "<?xml", 5) || !strncmp(p, "<svg", 4) ||
				   !strncmp(p, "<style>", 7) || !strncmp(p, "<rect", 5) ||
				   !strncmp(p, "<text", 5) || !strncmp(p, "<g>", 3) ||
				   !strncmp(p, "<title>", 7) || !strncmp(p, "</", 2));
		/* ...and a "</" closes one of them, never a name's. */
		for (const char *p = strstr(text, "</"); p; p = strstr(p + 1, "</"))
			FUZZ_CHECK(!strncmp(p, "</svg>", 6) || !strncmp(p, "</style>", 8) ||
				   !strncmp(p, "</text>", 7) || !strncmp(p, "</g>", 4) ||
				   !strncmp(p, "</title>", 8));
	}
	free(text);
	free(copy);
	return 0;
}

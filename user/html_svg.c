// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "classify.h"
#include "hist.h"
#include "html_svg.h"
#include "sanitize.h"

/* Okabe and Ito's palette, which readers with the common colour-vision deficiencies still
 * tell apart; grey for OTHER, the state the model could not name. The ink is the text colour
 * that contrasts more with each (WCAG's contrast ratio: black on all but the dark blue). */
static const struct {
	const char *fill, *ink;
} state_colors[PP_NR_STATES] = {
	[PP_RUNNING] = { "#009e73", "#000" },
	[PP_RUNQ] = { "#f0e442", "#000" },
	[PP_GPU_WAIT] = { "#cc79a7", "#000" },
	[PP_IO_WAIT] = { "#d55e00", "#000" },
	[PP_DATA_WAIT] = { "#0072b2", "#fff" },
	[PP_THREAD_WAIT] = { "#e69f00", "#000" },
	[PP_COMM_WAIT] = { "#56b4e9", "#000" },
	[PP_OTHER] = { "#9a9a9a", "#000" },
};

/* Every chart is drawn in this many user units across and scales to its container. */
#define SVG_W 960
/* A 12 px glyph of the system's sans-serif, rounded up: labels are spaced by it. */
#define CHAR_W 7.0
/* A histogram shows at least this many buckets. */
#define HIST_MIN_SLOTS 12

void html_escape(FILE *out, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		switch (s[i]) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		case '\'':
			fputs("&#39;", out);
			break;
		default:
			fputc(s[i], out);
		}
	}
}

void html_text(FILE *out, const char *s, size_t max)
{
	char shown[SAN_TEXT_SIZE(HTML_TEXT_MAX)];

	san_text(shown, sizeof(shown), s, max < HTML_TEXT_MAX ? max : HTML_TEXT_MAX);
	html_escape(out, shown, strlen(shown));
}

const char *html_state_color(int state)
{
	return state >= 0 && state < PP_NR_STATES ? state_colors[state].fill : "#000000";
}

const char *html_state_ink(int state)
{
	return state >= 0 && state < PP_NR_STATES ? state_colors[state].ink : "#fff";
}

/* How many of a row of slots wide one label needs, at least 1: labels under bars keep
 * that far apart and never touch. */
static int label_every(double label_w, double slot)
{
	int every = (int)(label_w / slot);

	if (every * slot < label_w)
		every++;
	return every < 1 ? 1 : every;
}

static void svg_open(FILE *out, const char *id, const char *label, int width, int height)
{
	fputs("<svg class=\"plot\" id=\"", out);
	html_escape(out, id, strlen(id));
	fprintf(out, "\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
		"aria-label=\"", width, height, width, height);
	html_text(out, label, SIZE_MAX);
	fputs("\">\n", out);
}

void svg_state_columns(FILE *out, const char *id, const char *label, const struct svg_bar *bars,
		       int n)
{
	const int left = 48, right = 8, strip_top = 20, strip_h = 40, plot_top = 78, plot_h = 210;
	const int height = plot_top + plot_h + 40;
	double plot_w = SVG_W - left - right, slot = n > 0 ? plot_w / n : plot_w, bar_w, max_s = 0;
	size_t longest = 1;
	int every;

	bar_w = slot >= 5 ? slot * 0.8 : slot;
	for (int i = 0; i < n; i++) {
		if (bars[i].seconds > max_s)
			max_s = bars[i].seconds;
		if (strlen(bars[i].label) > longest)
			longest = strlen(bars[i].label);
	}
	every = label_every(longest * CHAR_W + 10, slot);
	svg_open(out, id, label, SVG_W, height);
	for (int p = 0; p <= 100; p += 25) {
		double y = plot_top + plot_h * (1 - p / 100.0);

		fprintf(out, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>"
			"<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>\n", left,
			SVG_W - right, y, y, p ? "#e2e5ea" : "#8a919c", left - 6, y + 4, p);
	}
	if (max_s > 0)
		fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">time</text>"
			"<text x=\"%d\" y=\"%d\" class=\"muted\">longest %.1f ms</text>"
			"<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#8a919c\"/>\n",
			left - 6, strip_top + strip_h - 2, left, strip_top - 6, max_s * 1e3, left,
			SVG_W - right, strip_top + strip_h, strip_top + strip_h);
	for (int i = 0; i < n; i++) {
		double x = left + i * slot + (slot - bar_w) / 2, y = plot_top + plot_h;

		fputs("<g><title>", out);
		html_text(out, bars[i].title, sizeof(bars[i].title));
		fputs("</title>", out);
		for (int s = 0; s < PP_NR_STATES; s++) {
			double h = bars[i].share[s] * plot_h;

			if (h <= 0)
				continue;
			y -= h;
			fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
				"fill=\"%s\"/>", x, y, bar_w, h, state_colors[s].fill);
		}
		if (max_s > 0 && bars[i].seconds > 0) {
			double h = strip_h * bars[i].seconds / max_s;

			fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
				"fill=\"#7d8796\"/>", x, strip_top + strip_h - h, bar_w, h);
		}
		/* A label that would run past the right edge is left out: its neighbours say it. */
		if (i % every == 0 && x + bar_w / 2 + strlen(bars[i].label) * CHAR_W / 2 <= SVG_W) {
			fprintf(out, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">", x + bar_w / 2,
				plot_top + plot_h + 16);
			html_text(out, bars[i].label, sizeof(bars[i].label));
			fputs("</text>", out);
		}
		fputs("</g>\n", out);
	}
	fprintf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"muted\">step</text>\n"
		"</svg>\n", left + plot_w / 2, height - 6);
}

void svg_state_rows(FILE *out, const char *id, const char *label, const struct svg_bar *bars,
		    int n)
{
	const int left = 170, right = 24, top = 8, row = 30, gap = 12;
	const int height = top + n * (row + gap) + 22;
	double plot_w = SVG_W - left - right;

	svg_open(out, id, label, SVG_W, height);
	for (int p = 0; p <= 100; p += 25) {
		double x = left + plot_w * p / 100.0;

		fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#e2e5ea\"/>"
			"<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"muted\">%d%%</text>\n",
			x, x, top - 4, top + n * (row + gap) - gap + 4, x, height - 4, p);
	}
	for (int i = 0; i < n; i++) {
		double x = left, y = top + i * (row + gap);

		fputs("<g>", out);
		if (bars[i].title[0]) {
			fputs("<title>", out);
			html_text(out, bars[i].title, sizeof(bars[i].title));
			fputs("</title>", out);
		}
		fprintf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" class=\"label\">",
			left - 10, y + row / 2.0 + 4);
		html_text(out, bars[i].label, sizeof(bars[i].label));
		fputs("</text>", out);
		for (int s = 0; s < PP_NR_STATES; s++) {
			double w = bars[i].share[s] * plot_w;

			if (w <= 0)
				continue;
			fprintf(out, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
				"<title>", x, y, w, row, state_colors[s].fill);
			html_text(out, bars[i].label, sizeof(bars[i].label));
			fprintf(out, ": %s %.1f%%</title></rect>", state_name(s), 100 * bars[i].share[s]);
			if (bars[i].share[s] >= 0.06)
				/* style, not fill=: the page's CSS for text outranks an attribute. */
				fprintf(out, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" "
					"style=\"fill:%s\" class=\"in\">%.0f%%</text>", x + w / 2,
					y + row / 2.0 + 4,
					state_colors[s].ink, 100 * bars[i].share[s]);
			x += w;
		}
		fputs("</g>\n", out);
	}
	fputs("</svg>\n", out);
}

/* A bucket's lower bound in microseconds, short enough to sit under a narrow bar. */
static void fmt_us(char *buf, size_t size, double us)
{
	if (us >= 1e6)
		snprintf(buf, size, us < 1e7 ? "%.1fs" : "%.0fs", us / 1e6);
	else if (us >= 1e3)
		snprintf(buf, size, us < 1e4 ? "%.1fms" : "%.0fms", us / 1e3);
	else
		snprintf(buf, size, "%.0f\xc2\xb5s", us);
}

void svg_log2_hist(FILE *out, const char *id, const char *label, const __u64 *slots,
		   unsigned int nr_slots, const char *color, const char *what)
{
	const int left = 24, right = 24, top = 22, plot_h = 150, height = top + plot_h + 30;
	int first = -1, last = -1, n, every;
	uint64_t max = 0, total = hist_total(slots, nr_slots);
	double slot, bar_w, plot_w = SVG_W - left - right;
	char low[24], high[24];

	for (unsigned int i = 0; i < nr_slots; i++) {
		if (!slots[i])
			continue;
		if (first < 0)
			first = i;
		last = i;
		if (slots[i] > max)
			max = slots[i];
	}
	if (first < 0)
		first = last = 0;
	/* A few empty buckets on either side: calls all in one bucket still read as a
	 * distribution, not as a wall of colour. */
	while (last - first + 1 < HIST_MIN_SLOTS && (first > 0 || last + 1 < (int)nr_slots)) {
		if (last + 1 < (int)nr_slots)
			last++;
		if (last - first + 1 < HIST_MIN_SLOTS && first > 0)
			first--;
	}
	n = last - first + 1;
	slot = plot_w / n;
	bar_w = slot * 0.9;
	every = label_every(6 * CHAR_W + 8, slot);
	svg_open(out, id, label, SVG_W, height);
	fprintf(out, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#8a919c\"/>\n", left,
		SVG_W - right, top + plot_h, top + plot_h);
	for (int k = 0; k <= n; k++) {
		unsigned int i = first + k;
		double edge = left + k * slot, x = edge + (slot - bar_w) / 2, h;
		char count[24];

		/* Each bound under the edge it is: a bar spans from one to the next. */
		if (k % every == 0) {
			fmt_us(low, sizeof(low), k < n ? hist_slot_low(i) : hist_slot_high(i - 1) + 1);
			fprintf(out, "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%d\" y2=\"%d\" stroke=\"#8a919c\"/>"
				"<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", edge, edge,
				top + plot_h, top + plot_h + 4, edge, top + plot_h + 17, low);
		}
		if (k == n)
			break;
		h = max ? (double)slots[i] / max * plot_h : 0;
		if (slots[i] && h < 1)
			h = 1;	/* one call among millions still shows */
		fmt_us(low, sizeof(low), hist_slot_low(i));
		fmt_us(high, sizeof(high), hist_slot_high(i) + 1);
		snprintf(count, sizeof(count), "%" PRIu64, (uint64_t)slots[i]);
		fprintf(out, "<g><title>%s to %s: %s ", low, high, count);
		html_escape(out, what, strlen(what));
		fprintf(out, " (%.1f%%)</title>", total ? 100.0 * slots[i] / total : 0);
		fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>",
			x, top + plot_h - h, bar_w, h, color);
		if (slots[i] && strlen(count) * CHAR_W <= slot)
			fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" class=\"muted\">"
				"%s</text>", x + bar_w / 2, top + plot_h - h - 4, count);
		fputs("</g>\n", out);
	}
	fputs("</svg>\n", out);
}

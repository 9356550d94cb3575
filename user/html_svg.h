/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the HTML report (html_report.c) is drawn with: text made safe for HTML, one fixed colour
 * per stall state, and inline SVG charts (stacked bars of state shares, log2 histograms). The
 * SVGs are elements for an HTML page: no XML declaration, no xmlns (the HTML parser puts <svg>
 * in its namespace), nothing fetched, no script. Pure: writes to a FILE.
 */
#ifndef PIPEPROF_HTML_SVG_H
#define PIPEPROF_HTML_SVG_H

#include <stddef.h>
#include <stdio.h>
#include <linux/types.h>
#include "pipeprof.h"

/* html_text() shows at most this many bytes of a string. */
#define HTML_TEXT_MAX 1024

/* Writes len bytes of s with &, <, >, " and ' as character references, every other byte as
 * it is: for text that is otherwise safe (fixed strings, san_text()'s output). */
void html_escape(FILE *out, const char *s, size_t len);

/*
 * Writes a string the target chose (a thread name, a command line, a path, a Python function
 * name), at most max bytes of it (a NUL ends it sooner) and at most HTML_TEXT_MAX: as the text
 * report shows it (san_text(): control characters, bidirectional overrides and bytes that are
 * not UTF-8 as \xNN, '\' as "\\"), then escaped (html_escape()). The result is valid UTF-8 HTML
 * text, and valid inside an attribute value in quotes.
 */
void html_text(FILE *out, const char *s, size_t max);

/* The state's colour, "#rrggbb"; black for a state out of range. */
const char *html_state_color(int state);
/* The text colour that reads better on the state's colour: black or white. */
const char *html_state_ink(int state);

/* One bar of state shares. label and title are text for html_text() (a tooltip: title). */
struct svg_bar {
	char label[40];
	char title[200];
	double share[PP_NR_STATES];	/* of the bar's time: sums to 1, or all 0 */
	double seconds;			/* the time it stands for; 0: not shown */
};

/* Bars of state shares side by side (one a step), the first state at the bottom, each bar's
 * seconds as a strip of grey bars above them. */
void svg_state_columns(FILE *out, const char *id, const char *label, const struct svg_bar *bars,
		       int n);
/* Bars of state shares one under the other (one a role), the label at the left, each
 * segment of 6% or more with its share written in; a bar's title, where it has one, is the
 * tooltip of its row, each segment's its label, state and share. */
void svg_state_rows(FILE *out, const char *id, const char *label, const struct svg_bar *bars,
		    int n);
/* A log2 histogram of microseconds (hist.h's slots), the slots from the first to the last
 * that holds anything, each bar in color with its count; what: what a count is ("calls"). */
void svg_log2_hist(FILE *out, const char *id, const char *label, const __u64 *slots,
		   unsigned int nr_slots, const char *color, const char *what);

#endif

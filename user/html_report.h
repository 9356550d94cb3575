/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `pipeprof -p PID --html FILE`: the report as one self-contained HTML page, to read in a
 * browser, print or attach to a ticket: the verdict, the trainer's state shares step by step,
 * each role's, the latency histograms, the flame graph of the CPU samples, the text report's
 * tables (html_sections.c: ranks, waited on, GPU API per step, GPU and host memory), the
 * advice and what was not traced. Everything is inline (CSS, SVG): no script, no font, nothing fetched. Every
 * string the target chose is escaped (html_svg.h). Pure: fed a finished struct report.
 */
#ifndef PIPEPROF_HTML_REPORT_H
#define PIPEPROF_HTML_REPORT_H

#include <stdio.h>

struct report;

/* Writes the page; the report is as report_print_text() takes it (analysed, steps_finish()
 * and where_finish() done). Returns 0, -ENOMEM, or -EIO when out fails. */
int report_print_html(FILE *out, const struct report *r);

#endif

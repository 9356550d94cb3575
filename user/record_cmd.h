/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef PIPEPROF_RECORD_CMD_H
#define PIPEPROF_RECORD_CMD_H

struct report_opts;
struct tracer;
struct report;

/* `pipeprof record`, once the report of its window is made: the trace to o->record, and the
 * JSON report to standard output (-j) and/or o->record_report. Says on stderr what failed.
 * Returns 0 or -errno. */
int record_finish(const struct report_opts *o, struct tracer *t, const struct report *r);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The HTML page's sections beside its plots (html_sections.c): each writes one <section> from
 * a finished struct report, as html_report.c's own do. */
#ifndef PIPEPROF_HTML_SECTIONS_H
#define PIPEPROF_HTML_SECTIONS_H

#include <stdio.h>

struct report;

/* The ranks of a distributed job and the straggler; nothing for a job of one trainer. */
void html_put_job(FILE *out, const struct report *r);
/* Who ended the trainer's waits (the text report's "Waited on"). */
void html_put_waited_on(FILE *out, const struct report *r);
/* The trainer's kernel launches, syncs by API and copies per step. */
void html_put_gpu_steps(FILE *out, const struct report *r);
/* Device memory each process allocated and freed, and the trainer's growth across steps. */
void html_put_gpumem(FILE *out, const struct report *r);
/* NCCL's calls, as the text report's NCCL section: nothing where no libnccl is mapped. */
void html_put_nccl(FILE *out, const struct report *r);
/* Host RSS per role, its growth and the leak verdict. */
void html_put_memory(FILE *out, const struct report *r);
/* The trainer's waits by state: its Python stack as each began and who ended them. */
void html_put_waits(FILE *out, const struct report *r);

#endif

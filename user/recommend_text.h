/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Building a recommendation (recommend.c, recommend_steps.c): each NULL-safe, as rec_add()
 * returns NULL once the analysis holds MAX_RECOMMENDATIONS. */
#ifndef PIPEPROF_RECOMMEND_TEXT_H
#define PIPEPROF_RECOMMEND_TEXT_H

#include "classify.h"

struct recommendation *rec_add(struct analysis *a, const char *id, double bound);
/* Appends to its advice. */
void rec_say(struct recommendation *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends to the facts it rests on. */
void rec_because(struct recommendation *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif

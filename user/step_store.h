/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The step records of a report, kept small: a record is 512 bytes as BPF sends it, 400 of them
 * the thread's GPU counts, which are zero on a CPU-only job and mostly zero on a GPU one (a few
 * APIs and copy directions of the many counted). A report of a DataLoader job kept 24 records
 * a second whole, ~3.6 MB after 5 minutes. Each is kept as its head (state time, phase) and
 * its GPU counts' non-zero words behind a mask: 112 bytes and 8 per non-zero word. Pure.
 */
#ifndef PIPEPROF_STEP_STORE_H
#define PIPEPROF_STEP_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "pipeprof.h"

/* The boundaries a report keeps, the first that come: 3.7 MB of points (more with GPU counts),
 * 22 minutes of a DataLoader loop of 24 steps a second, 13 s of a tiny model's loop whose
 * records reach the tracer at 2,500 a second. Kept whole, that loop grew a report by 280 KB a
 * second (tracer_steps.c counts the rest). */
#define STEP_STORE_MAX 32768

/* pp_step_record less its GPU counts, which stay in the store. */
struct step_point {
	uint32_t tid, tgid;
	uint64_t ts;
	uint32_t phase, gpu_depth;
	uint64_t phase_start_ns;
	uint64_t ns[PP_NR_STATES];
	uint16_t source;	/* enum pp_step_source */
	uint16_t seq;		/* pp_step_record's */
	uint32_t call_state, launch_epoch;
	uint32_t gpu_at;	/* the GPU counts' mask in the store's words, or STEP_NO_GPU */
};
#define STEP_NO_GPU UINT32_MAX	/* every GPU count zero */

struct step_store {
	struct step_point *points;
	int nr, cap;
	uint64_t *words;	/* per point with GPU counts: a mask, then its non-zero words */
	int nr_words, cap_words;
};

/* r kept at the end of s. 0, or -ENOMEM (s unchanged). */
int step_store_add(struct step_store *s, const struct pp_step_record *r);
/* The record p was made from, whole. */
void step_store_record(const struct step_store *s, const struct step_point *p,
		       struct pp_step_record *out);
/* The points that keep(p) accepts, in order; the words of the others stay until the end. */
void step_store_filter(struct step_store *s, bool (*keep)(const struct step_point *p));
void step_store_free(struct step_store *s);

#endif

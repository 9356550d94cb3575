/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The steps' functions on arrays of records as BPF sends them: each call puts them in a store
 * of its own, as the tracer does one by one. */
#ifndef PIPEPROF_TEST_STEP_RECS_H
#define PIPEPROF_TEST_STEP_RECS_H

#include <errno.h>
#include "steps.h"

static inline int store_recs(struct step_store *st, const struct pp_step_record *r, int n)
{
	*st = (struct step_store){ 0 };
	for (int i = 0; i < n; i++)
		if (step_store_add(st, &r[i]))
			return -ENOMEM;
	return 0;
}

static inline int summarize_recs(const struct pp_step_record *r, int n, uint32_t tid,
				 struct step_summary *s)
{
	struct step_store st;
	int err = store_recs(&st, r, n);

	if (!err)
		err = steps_summarize(&st, tid, s);
	step_store_free(&st);
	return err;
}

static inline int each_recs(const struct pp_step_record *r, int n, uint32_t tid,
			    struct step_breakdown **out)
{
	struct step_store st;
	int err = store_recs(&st, r, n);

	if (!err)
		err = steps_each(&st, tid, out);
	step_store_free(&st);
	return err;
}

static inline int boundary_recs(const struct pp_step_record *r, int n, uint32_t tid,
				uint64_t **ts, int **numbers)
{
	struct step_store st;
	int err = store_recs(&st, r, n);

	if (!err)
		err = steps_boundary_times(&st, tid, ts, numbers);
	step_store_free(&st);
	return err;
}

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The daemon's NCCL counters per job and API (pipeprof_job_nccl_*_total): kept across
 * windows and written as Prometheus samples. Pure: fed the counts nccl_stats held at each
 * window's close. */
#ifndef PIPEPROF_NCCL_PROM_H
#define PIPEPROF_NCCL_PROM_H

#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>
#include "pipeprof.h"

/* One API's calls that returned, the bytes they moved, those of unknown size, time inside. */
struct nccl_counts {
	__u64 calls, bytes, unsized, total_ns;
};

enum nccl_metric {
	NCCL_METRIC_CALLS,
	NCCL_METRIC_BYTES,	/* not for the group calls, which move none */
	NCCL_METRIC_UNSIZED,	/* idem */
	NCCL_METRIC_SECONDS,
};

/*
 * Adds what each API's counts grew by since seen (the last window's reading of the same
 * cumulative map) to total, and makes now the new seen. A count below its last reading (a
 * map that started again) counts from zero: total never goes down, as a Prometheus counter
 * must not while its series lives.
 */
void nccl_accumulate(struct nccl_counts total[PP_NR_NCCL_CALLS],
		     struct nccl_counts seen[PP_NR_NCCL_CALLS],
		     const struct nccl_counts now[PP_NR_NCCL_CALLS]);

/*
 * One job's samples of the family name (metric m): one per API probed, labelled pid, comm and
 * op (the NCCL name, as the report's "nccl" section names it); none for an API never probed,
 * whose zero would read as "not called". 0, or the first of prom_sample's errors.
 */
int nccl_prom_samples(FILE *out, const char *name, enum nccl_metric m, const char *pid,
		      const char *comm, const struct nccl_counts c[PP_NR_NCCL_CALLS],
		      const bool probed[PP_NR_NCCL_CALLS]);

#endif

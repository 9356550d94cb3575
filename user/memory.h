/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Host memory per role over the window: resident memory and major faults of the job's
 * processes, read from /proc at a fixed interval (no per-allocation tracing), and growth that
 * holds up through the window flagged as a probable leak. Pure: fed the readings.
 */
#ifndef PIPEPROF_MEMORY_H
#define PIPEPROF_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

/* One reading of one process. */
struct mem_reading {
	uint64_t ts_ns;
	uint32_t pid;
	bool root;		/* the target process (TRAINER and HELPER threads), else a WORKER's */
	uint64_t rss_bytes;
	uint64_t major_faults;	/* since the process started */
};

enum mem_group { MEM_TRAINER, MEM_WORKERS, NR_MEM_GROUPS };

/* A process's growth counts towards a leak when a straight line fits its readings this well
 * (R^2) and it grew at least this much over them: an allocator's caches warming up jump
 * and level off, a leak climbs steadily. */
#define MEM_LEAK_MIN_R2 0.9
#define MEM_LEAK_MIN_BYTES (4ull << 20)

struct mem_group_summary {
	int processes;			/* with readings in the window, exited ones too */
	uint64_t rss_bytes;		/* summed over the last round of readings */
	uint64_t peak_bytes;		/* the largest sum over one round of readings */
	double growth_bytes_per_s;	/* summed slopes of the processes whose growth counts */
	int growing;			/* processes whose growth counts */
	uint64_t major_faults;		/* over the window, summed */
	bool leak;			/* growth that held all window: a probable leak */
};

struct mem_summary {
	int readings;
	double interval_s;		/* between rounds of readings */
	double span_s;			/* first to last reading */
	struct mem_group_summary group[NR_MEM_GROUPS];
};

/* Sums up readings (any order; each round's readings share a ts_ns). Returns 0 or -ENOMEM. */
int mem_summarize(const struct mem_reading *r, int n, struct mem_summary *out);
const char *mem_group_name(enum mem_group g);

#endif

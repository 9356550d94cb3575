// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "memory.h"

const char *mem_group_name(enum mem_group g)
{
	return g == MEM_TRAINER ? "TRAINER" : "WORKERS";
}

static int by_pid_then_ts(const void *a, const void *b)
{
	const struct mem_reading *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->ts_ns < y->ts_ns ? -1 : x->ts_ns > y->ts_ns;
}

static int by_ts(const void *a, const void *b)
{
	const struct mem_reading *x = a, *y = b;

	return x->ts_ns < y->ts_ns ? -1 : x->ts_ns > y->ts_ns;
}

/* Least squares over one process's readings r[0..n): slope in bytes/s, and R^2 (0 when the
 * readings do not vary: nothing to fit). */
static void fit(const struct mem_reading *r, int n, double *slope, double *r2)
{
	double t0 = r[0].ts_ns / 1e9, st = 0, sy = 0, stt = 0, sty = 0, syy = 0, var_t, var_y, cov;

	*slope = *r2 = 0;
	if (n < 3)
		return;
	for (int i = 0; i < n; i++) {
		double t = r[i].ts_ns / 1e9 - t0, y = (double)r[i].rss_bytes;

		st += t;
		sy += y;
		stt += t * t;
		sty += t * y;
		syy += y * y;
	}
	var_t = stt - st * st / n;
	var_y = syy - sy * sy / n;
	cov = sty - st * sy / n;
	if (var_t <= 0)
		return;
	*slope = cov / var_t;
	*r2 = var_y > 0 ? cov * cov / (var_t * var_y) : 0;
}

int mem_summarize(const struct mem_reading *in, int n, struct mem_summary *out)
{
	struct mem_reading *r;
	uint64_t first_ts, last_ts, rounds = 0;

	memset(out, 0, sizeof(*out));
	if (n <= 0)
		return 0;
	r = malloc(n * sizeof(*r));
	if (!r)
		return -ENOMEM;
	memcpy(r, in, n * sizeof(*r));
	out->readings = n;

	/* Rounds: the sums per group at each reading time, for the peak. */
	qsort(r, n, sizeof(*r), by_ts);
	first_ts = r[0].ts_ns;
	last_ts = r[n - 1].ts_ns;
	for (int i = 0; i < n;) {
		uint64_t sum[NR_MEM_GROUPS] = {};
		int j = i;

		for (; j < n && r[j].ts_ns == r[i].ts_ns; j++)
			sum[r[j].root ? MEM_TRAINER : MEM_WORKERS] += r[j].rss_bytes;
		for (int g = 0; g < NR_MEM_GROUPS; g++) {
			if (sum[g] > out->group[g].peak_bytes)
				out->group[g].peak_bytes = sum[g];
			/* The last round's: processes that exited before it are no longer there. */
			out->group[g].rss_bytes = sum[g];
		}
		rounds++;
		i = j;
	}
	out->span_s = (last_ts - first_ts) / 1e9;
	out->interval_s = rounds > 1 ? out->span_s / (rounds - 1) : 0;

	/* Per process: its last size, its faults over the window, and whether it grew steadily. */
	qsort(r, n, sizeof(*r), by_pid_then_ts);
	for (int i = 0; i < n;) {
		struct mem_group_summary *g = &out->group[r[i].root ? MEM_TRAINER : MEM_WORKERS];
		double slope, r2, grew;
		int j = i;

		while (j < n && r[j].pid == r[i].pid)
			j++;
		g->processes++;
		if (r[j - 1].major_faults > r[i].major_faults)
			g->major_faults += r[j - 1].major_faults - r[i].major_faults;
		fit(&r[i], j - i, &slope, &r2);
		grew = slope * (r[j - 1].ts_ns - r[i].ts_ns) / 1e9;
		if (slope > 0 && r2 >= MEM_LEAK_MIN_R2 && grew >= (double)MEM_LEAK_MIN_BYTES) {
			g->growth_bytes_per_s += slope;
			g->growing++;
		}
		i = j;
	}
	for (int k = 0; k < NR_MEM_GROUPS; k++)
		out->group[k].leak = out->group[k].growing > 0;
	free(r);
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The daemon's NCCL counters (nccl_prom.c): accumulated across windows so that they never go
 * down, and written one sample per probed API, with escaped labels. */
#include <errno.h>
#include <stdlib.h>
#include "nccl_prom.h"
#include "prom.h"
#include "unit.h"

static struct nccl_counts counts(__u64 calls, __u64 bytes, __u64 unsized, __u64 ns)
{
	return (struct nccl_counts){ .calls = calls, .bytes = bytes, .unsized = unsized,
				     .total_ns = ns };
}

static bool same(struct nccl_counts a, struct nccl_counts b)
{
	return a.calls == b.calls && a.bytes == b.bytes && a.unsized == b.unsized &&
	       a.total_ns == b.total_ns;
}

TEST(test_accumulate_follows_the_map)
{
	struct nccl_counts total[PP_NR_NCCL_CALLS] = {}, seen[PP_NR_NCCL_CALLS] = {};
	struct nccl_counts now[PP_NR_NCCL_CALLS] = {};

	/* The first window: the map since the attach is the total. */
	now[PP_NCCL_ALL_REDUCE] = counts(10, 10 << 20, 0, 5000000);
	now[PP_NCCL_ALL_GATHER] = counts(10, 0, 10, 2000000);
	nccl_accumulate(total, seen, now);
	CHECK(same(total[PP_NCCL_ALL_REDUCE], counts(10, 10 << 20, 0, 5000000)));
	CHECK(same(total[PP_NCCL_ALL_GATHER], counts(10, 0, 10, 2000000)));
	CHECK(same(total[PP_NCCL_SEND], counts(0, 0, 0, 0)));

	/* The map grows: the total is still the map. */
	now[PP_NCCL_ALL_REDUCE] = counts(25, 25 << 20, 0, 9000000);
	now[PP_NCCL_ALL_GATHER] = counts(25, 15 * 131072, 10, 5000000);
	now[PP_NCCL_GROUP_END] = counts(3, 0, 0, 600000);
	nccl_accumulate(total, seen, now);
	CHECK(same(total[PP_NCCL_ALL_REDUCE], counts(25, 25 << 20, 0, 9000000)));
	CHECK(same(total[PP_NCCL_ALL_GATHER], counts(25, 15 * 131072, 10, 5000000)));
	CHECK(same(total[PP_NCCL_GROUP_END], counts(3, 0, 0, 600000)));

	/* A window with no calls changes nothing. */
	nccl_accumulate(total, seen, now);
	CHECK(same(total[PP_NCCL_ALL_REDUCE], counts(25, 25 << 20, 0, 9000000)));
}

TEST(test_accumulate_never_goes_down)
{
	struct nccl_counts total[PP_NR_NCCL_CALLS] = {}, seen[PP_NR_NCCL_CALLS] = {};
	struct nccl_counts now[PP_NR_NCCL_CALLS] = {};

	now[PP_NCCL_BROADCAST] = counts(100, 10000000, 2, 30000000);
	nccl_accumulate(total, seen, now);
	/* A map that started again (4 calls since): they add to what was counted. */
	now[PP_NCCL_BROADCAST] = counts(4, 400000, 0, 1000000);
	nccl_accumulate(total, seen, now);
	CHECK(same(total[PP_NCCL_BROADCAST], counts(104, 10400000, 2, 31000000)));
	CHECK(same(seen[PP_NCCL_BROADCAST], counts(4, 400000, 0, 1000000)));
	/* And grows from the new reading, not from the old one. */
	now[PP_NCCL_BROADCAST] = counts(6, 600000, 1, 1500000);
	nccl_accumulate(total, seen, now);
	CHECK(same(total[PP_NCCL_BROADCAST], counts(106, 10600000, 3, 31500000)));
	/* Fields apart: calls read after a return, bytes before it (one field behind). */
	now[PP_NCCL_BROADCAST] = counts(7, 600000, 1, 1500000);
	nccl_accumulate(total, seen, now);
	now[PP_NCCL_BROADCAST] = counts(7, 700000, 1, 1700000);
	nccl_accumulate(total, seen, now);
	CHECK(same(total[PP_NCCL_BROADCAST], counts(107, 10700000, 3, 31700000)));
}

static char *render(enum nccl_metric m, const char *comm, const struct nccl_counts *c,
		    const bool *probed, int *err)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	*err = nccl_prom_samples(f, "pipeprof_job_nccl_x_total", m, "4242", comm, c, probed);
	fclose(f);
	return buf;
}

TEST(test_samples_per_probed_api)
{
	struct nccl_counts c[PP_NR_NCCL_CALLS] = {};
	bool probed[PP_NR_NCCL_CALLS] = {};
	char *out;
	int err;

	c[PP_NCCL_ALL_REDUCE] = counts(3, 3ULL << 20, 0, 1500000000);
	c[PP_NCCL_ALL_GATHER] = counts(5, 18446744073709551000ULL, 2, 250000);
	c[PP_NCCL_GROUP_END] = counts(7, 0, 0, 1000);
	c[PP_NCCL_SEND] = counts(9, 36864, 0, 9000);	/* not probed: no series */

	/* No libnccl probed: nothing at all. */
	out = render(NCCL_METRIC_CALLS, "train", c, probed, &err);
	CHECK_EQ_INT(err, 0);
	CHECK_STR(out, "");
	free(out);

	probed[PP_NCCL_ALL_REDUCE] = probed[PP_NCCL_ALL_GATHER] = probed[PP_NCCL_GROUP_END] = true;
	out = render(NCCL_METRIC_CALLS, "train", c, probed, &err);
	CHECK_EQ_INT(err, 0);
	CHECK_STR(out,
		  "pipeprof_job_nccl_x_total{pid=\"4242\",comm=\"train\",op=\"ncclAllReduce\"} 3\n"
		  "pipeprof_job_nccl_x_total{pid=\"4242\",comm=\"train\",op=\"ncclAllGather\"} 5\n"
		  "pipeprof_job_nccl_x_total{pid=\"4242\",comm=\"train\",op=\"ncclGroupEnd\"} 7\n");
	free(out);

	/* Bytes: exact past 2^53; none for the group calls, which move none. */
	out = render(NCCL_METRIC_BYTES, "train", c, probed, &err);
	CHECK_STR(out,
		  "pipeprof_job_nccl_x_total{pid=\"4242\",comm=\"train\",op=\"ncclAllReduce\"} 3145728\n"
		  "pipeprof_job_nccl_x_total{pid=\"4242\",comm=\"train\",op=\"ncclAllGather\"} "
		  "18446744073709551000\n");
	free(out);

	out = render(NCCL_METRIC_UNSIZED, "train", c, probed, &err);
	CHECK_STR(out,
		  "pipeprof_job_nccl_x_total{pid=\"4242\",comm=\"train\",op=\"ncclAllReduce\"} 0\n"
		  "pipeprof_job_nccl_x_total{pid=\"4242\",comm=\"train\",op=\"ncclAllGather\"} 2\n");
	free(out);

	out = render(NCCL_METRIC_SECONDS, "train", c, probed, &err);
	CHECK_STR(out,
		  "pipeprof_job_nccl_x_total{pid=\"4242\",comm=\"train\",op=\"ncclAllReduce\"} 1.5\n"
		  "pipeprof_job_nccl_x_total{pid=\"4242\",comm=\"train\",op=\"ncclAllGather\"} 0.00025\n"
		  "pipeprof_job_nccl_x_total{pid=\"4242\",comm=\"train\",op=\"ncclGroupEnd\"} 1e-06\n");
	free(out);
}

TEST(test_labels_escaped)
{
	struct nccl_counts c[PP_NR_NCCL_CALLS] = {};
	bool probed[PP_NR_NCCL_CALLS] = { [PP_NCCL_RECV] = true };
	char *out;
	int err;

	c[PP_NCCL_RECV] = counts(1, 4096, 0, 1000);
	out = render(NCCL_METRIC_CALLS, "a\"b\\c\nd", c, probed, &err);
	CHECK_EQ_INT(err, 0);
	CHECK_STR(out, "pipeprof_job_nccl_x_total{pid=\"4242\",comm=\"a\\\"b\\\\c\\nd\","
		       "op=\"ncclRecv\"} 1\n");
	free(out);
}

TEST(test_invalid_name_writes_nothing)
{
	struct nccl_counts c[PP_NR_NCCL_CALLS] = {};
	bool probed[PP_NR_NCCL_CALLS] = { [PP_NCCL_ALL_REDUCE] = true };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK_EQ_INT(nccl_prom_samples(f, "bad name", NCCL_METRIC_CALLS, "1", "x", c, probed),
		     -EINVAL);
	fclose(f);
	CHECK_STR(buf, "");
	free(buf);
}

int main(void)
{
	RUN_TEST(test_accumulate_follows_the_map);
	RUN_TEST(test_accumulate_never_goes_down);
	RUN_TEST(test_samples_per_probed_api);
	RUN_TEST(test_labels_escaped);
	RUN_TEST(test_invalid_name_writes_nothing);
	return unit_summary();
}

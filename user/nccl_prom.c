// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The daemon's NCCL counters: accumulated across windows, written as Prometheus samples. */
#include <errno.h>
#include "gpu_apis.h"
#include "nccl_prom.h"
#include "prom.h"

static void grow(__u64 *total, __u64 *seen, __u64 now)
{
	*total += now >= *seen ? now - *seen : now;
	*seen = now;
}

void nccl_accumulate(struct nccl_counts total[PP_NR_NCCL_CALLS],
		     struct nccl_counts seen[PP_NR_NCCL_CALLS],
		     const struct nccl_counts now[PP_NR_NCCL_CALLS])
{
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++) {
		/* Each field on its own: the BPF side adds to them one at a time. */
		grow(&total[op].calls, &seen[op].calls, now[op].calls);
		grow(&total[op].bytes, &seen[op].bytes, now[op].bytes);
		grow(&total[op].unsized, &seen[op].unsized, now[op].unsized);
		grow(&total[op].total_ns, &seen[op].total_ns, now[op].total_ns);
	}
}

int nccl_prom_samples(FILE *out, const char *name, enum nccl_metric m, const char *pid,
		      const char *comm, const struct nccl_counts c[PP_NR_NCCL_CALLS],
		      const bool probed[PP_NR_NCCL_CALLS])
{
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++) {
		const struct prom_label labels[] = {
			{ "pid", pid }, { "comm", comm }, { "op", nccl_op_name(op) }, { NULL, NULL },
		};
		bool group = op == PP_NCCL_GROUP_START || op == PP_NCCL_GROUP_END;
		int err;

		if (!probed[op])
			continue;
		switch (m) {
		case NCCL_METRIC_CALLS:
			err = prom_sample_u64(out, name, labels, c[op].calls);
			break;
		case NCCL_METRIC_BYTES:
			err = group ? 0 : prom_sample_u64(out, name, labels, c[op].bytes);
			break;
		case NCCL_METRIC_UNSIZED:
			err = group ? 0 : prom_sample_u64(out, name, labels, c[op].unsized);
			break;
		case NCCL_METRIC_SECONDS:
			err = prom_sample(out, name, labels, c[op].total_ns / 1e9);
			break;
		default:
			err = -EINVAL;
		}
		if (err)
			return err;
	}
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Block requests issued by the tracked processes, timed from issue to completion. */
#include "pipeprof.bpf.h"

static __always_inline bool current_tracked(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	return pid_tracked(tgid);
}

static __always_inline void rq_mark(struct request *rq, __u64 ts)
{
	__u64 key = (__u64)rq, id = bpf_get_current_pid_tgid();
	struct inflight_rq val = { .issue_ns = ts, .tid = (__u32)id, .tgid = id >> 32 };

	if (bpf_map_update_elem(&inflight_rq, &key, &val, BPF_ANY))
		count(PP_CNT_RQ_FULL);
	else if (dispatch_id) {
		/* Its completion runs in whichever task the interrupt found. */
		__u32 job = dispatch_id;

		bpf_map_update_elem(&rq_job, &key, &job, BPF_ANY);
	}
}

/* 5a80bd075f3b ("block: introduce block_io_start/block_io_done tracepoints", 6.5) fires in
 * the submitter's context; block_rq_issue may run from kblockd, so it attributes only where
 * block_io_start is missing. */
SEC("tp_btf/block_io_start")
int BPF_PROG(on_block_io_start, struct request *rq)
{
	if (current_tracked())
		rq_mark(rq, 0);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(on_block_rq_issue, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct inflight_rq *in = bpf_map_lookup_elem(&inflight_rq, &key);

	if (in)
		in->issue_ns = bpf_ktime_get_ns();
	else if (!has_block_io_start && current_tracked())
		rq_mark(rq, bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(on_block_rq_complete, struct request *rq)
{
	__u64 key = (__u64)rq, took, now;
	struct inflight_rq *in = bpf_map_lookup_elem(&inflight_rq, &key);
	struct pp_io_stats *stats;
	__u32 zero = 0;

	if (!in) {
		/* The dispatcher's entry for it outlived this job's (the LRU let it go). */
		if (dispatch_id)
			bpf_map_delete_elem(&rq_job, &key);
		return 0;
	}
	now = bpf_ktime_get_ns();
	if (in->issue_ns && accounting(now)) {
		took = now - in->issue_ns;
		stats = bpf_map_lookup_elem(&io_stats, &zero);
		if (stats) {
			__sync_fetch_and_add(&stats->count, 1);
			__sync_fetch_and_add(&stats->total_ns, took);
			hist_add(stats->slots, took / 1000);
		}
		hist_time(PP_HK_IO, request_disk_dev(rq), in->tid, in->tgid, took);
	}
	bpf_map_delete_elem(&inflight_rq, &key);
	if (dispatch_id)
		bpf_map_delete_elem(&rq_job, &key);
	return 0;
}


/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Which job follows a process, as the dispatcher and the jobs' own programs both read it: each
 * object names the dispatcher's maps pid_job, big_pid_job and dispatch_lost (dispatch.h). */
#ifndef PIPEPROF_DISPATCH_BPF_H
#define PIPEPROF_DISPATCH_BPF_H

#include "dispatch.h"

static __always_inline __u32 dispatched_job(__u32 tgid)
{
	__u32 key = tgid / PP_JOB_PIDS_PER_BLOCK, *big;
	struct pp_job_block *b = bpf_map_lookup_elem(&pid_job, &key);

	if (b)
		return b->job[tgid % PP_JOB_PIDS_PER_BLOCK];
	big = bpf_map_lookup_elem(&big_pid_job, &tgid);
	return big ? *big : 0;
}

/* After a tail call that came back: no program in that slot. */
static __always_inline void dispatch_missed(void)
{
	__u32 zero = 0;
	__u64 *lost = bpf_map_lookup_elem(&dispatch_lost, &zero);

	if (lost)
		*lost += 1;
}

#endif

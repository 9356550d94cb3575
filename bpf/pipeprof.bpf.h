/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* BPF-only helpers shared by pipeprof's programs. */
#ifndef PIPEPROF_BPF_H
#define PIPEPROF_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "pipeprof.h"

/* The last slot is open-ended. */
static __always_inline __u32 hist_slot(__u64 value)
{
	__u32 slot = pp_log2_u64(value);

	return slot < PP_HIST_SLOTS ? slot : PP_HIST_SLOTS - 1;
}

static __always_inline void hist_add(__u64 *slots, __u64 value)
{
	__u32 slot = hist_slot(value);

	if (slot < PP_HIST_SLOTS)
		__sync_fetch_and_add(&slots[slot], 1);
}

#endif

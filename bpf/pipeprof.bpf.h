/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* BPF-only helpers shared by pipeprof's programs. */
#ifndef PIPEPROF_BPF_H
#define PIPEPROF_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "pipeprof.h"

/* The BPF side's one log2 histogram primitive; userspace's twin is in user/hist.c. */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;

	/* Bounded loop: the verifier needs a constant trip count. */
	for (int i = 32; i > 0; i >>= 1) {
		if (v >> i) {
			v >>= i;
			r += i;
		}
	}
	return r;
}

/* BCC's layout: slot k holds [2^k, 2^(k+1)), slot 0 holds 0 and 1; the last is open-ended. */
static __always_inline __u32 hist_slot(__u64 value)
{
	__u32 slot = log2_u64(value);

	return slot < PP_HIST_SLOTS ? slot : PP_HIST_SLOTS - 1;
}

static __always_inline void hist_add(__u64 *slots, __u64 value)
{
	__u32 slot = hist_slot(value);

	if (slot < PP_HIST_SLOTS)
		__sync_fetch_and_add(&slots[slot], 1);
}

#endif

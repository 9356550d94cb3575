/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Blocking calls a thread makes into a probed library: a GPU sync (gpu.bpf.c) or an NCCL
 * collective (nccl.bpf.c). From the outermost one's entry to its return the thread's time, on
 * or off a CPU, reads the state it was entered with (GPU_WAIT, COMM_WAIT): the scheduler's
 * programs look at gpu_depth and call_state. A nested probed call (the runtime's sync calling
 * the driver's, a collective syncing a stream) is part of the outermost one.
 */
#ifndef PIPEPROF_BLOCKING_BPF_H
#define PIPEPROF_BLOCKING_BPF_H

#include "pipeprof.bpf.h"

/* The tracked thread making a probed call now, if the window is open. */
static __always_inline struct pp_thread *caller_thread(__u64 now)
{
	struct pp_thread *t;

	if (!accounting(now))
		return NULL;
	t = thread_of((struct task_struct *)bpf_get_current_task_btf());
	return t && t->phase != PP_PHASE_EXITED ? t : NULL;
}

/* gpu.bpf.c: 1 when this call is the thread's outermost one; 0 for a nested call or no thread. */
int blocking_call_enter(struct pt_regs *ctx, __u32 api, __u32 state);

/* The thread, when the call returning is its outermost one, with the time inside it. */
static __always_inline struct pp_thread *blocking_call_return(__u32 tid, __u64 *took)
{
	__u64 now = 0;
	struct pp_thread *t;

	/* As at the entry: a nested call's return reads no clock. */
	if (!window_open()) {
		now = bpf_ktime_get_ns();
		if (!accounting(now))
			return NULL;
	}
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || t->phase == PP_PHASE_EXITED)
		return NULL;
	if (t->gpu_depth == 0) {
		/* Attached while this call was already running. */
		count(PP_CNT_URETPROBE_ORPHANS);
		return NULL;
	}
	if (--t->gpu_depth)
		return NULL;
	if (!now)
		now = bpf_ktime_get_ns();
	add_state(t, tid, pp_call_state(t->call_state), t->phase_start_ns, now);
	/* A wait in the call whose switch-in went untraced ends here, as the call's. */
	next_wake_settled(t);
	t->phase = PP_PHASE_ONCPU;
	t->phase_start_ns = now;
	/* A thread back from a blocking call may relay that wait (stall model's chains). */
	wait_ended_on_cpu(t, pp_call_state(t->call_state), now);
	*took = now - t->gpu_enter_ns;
	return t;
}

#endif

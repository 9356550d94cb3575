/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared between the daemon's dispatcher (dispatch.bpf.c), pipeprof's object and userspace. */
#ifndef PIPEPROF_DISPATCH_H
#define PIPEPROF_DISPATCH_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/*
 * The daemon traces each job with a BPF object of its own, but attaches the tracepoints every
 * task of the host fires (sched switch, waking and wakeup; TCP receives; block requests) once:
 * the dispatcher looks the task's process up in pid_job and tail-calls that job's program, so
 * an event costs one program run however many jobs are traced, and a job's accounting stays
 * its own object's.
 *
 * pid_job: which job follows each pid, as its dispatch id (slot + 1; 0: none), one byte per pid,
 * PP_JOB_PIDS_PER_BLOCK to an entry, sized to pid_max when the dispatcher loads; a pid past it
 * (pid_max raised since) is looked up in big_pid_job instead.
 */
#define PP_DISPATCH_SLOTS	254
#define PP_JOB_PIDS_PER_BLOCK	64
#define PP_DISPATCH_BIG_PIDS	4096

struct pp_job_block {
	__u8 job[PP_JOB_PIDS_PER_BLOCK];
};

/* dispatch_lost (per CPU, one entry): events a marked pid's job did not get because its slot
 * was empty (a job attaching or detaching), counted by the dispatcher and by a job's
 * sched_switch passing the switch on. */

/* Block requests a job issued, for their completions, which run in whatever task the
 * interrupt found: request pointer to dispatch id. */
#define PP_DISPATCH_RQS		16384

/*
 * Per CPU: the softirq vector being served, and the fallback's hardirq nesting. A wakeup
 * raised inside an interrupt runs with `current` set to whichever task was interrupted, which
 * is not the waker. One map for every job under the dispatcher, whose softirq_entry program
 * keeps the vector for them all.
 */
struct irq_ctx {
	__u32 hardirq_depth;	/* fallback only: device handlers and hrtimer callbacks; each job
				 * under the dispatcher adds its own count, so only 0 or not counts */
	__u32 softirq_vec;	/* vector being served, plus one; 0 before the first seen */
	/* This CPU's preempt count, found once through the current task's run queue: a wakeup
	 * then pays one probed read for it, not four and a helper call. */
	__u64 preempt_count_addr;
};

#endif

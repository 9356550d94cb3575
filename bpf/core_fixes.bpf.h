/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Every kernel-version difference pipeprof's BPF side copes with, each with the commit that
 * forced it. Nothing else in bpf/ may test kernel versions or optional fields. */
#ifndef PIPEPROF_CORE_FIXES_BPF_H
#define PIPEPROF_CORE_FIXES_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

/* 2f064a59a11f ("sched: Change task_struct::state") renamed state to __state in 5.14. */
struct task_struct___pre_5_14 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline __s64 task_state(struct task_struct *task)
{
	struct task_struct___pre_5_14 *old = (void *)task;

	if (bpf_core_field_exists(task->__state))
		return BPF_CORE_READ(task, __state);
	return BPF_CORE_READ(old, state);
}

/* in_iowait is a bitfield; its byte offset moves between builds, so read it probed. */
static __always_inline bool task_in_iowait(struct task_struct *task)
{
	return BPF_CORE_READ_BITFIELD_PROBED(task, in_iowait);
}

/* Whether the whole thread group is gone with this exit. Newer kernels pass group_dead to
 * sched_process_exit, older ones do not; do_exit() has always decremented signal->live before
 * the event fires, so reading it works on both without depending on the argument list. */
static __always_inline bool task_group_dead(struct task_struct *task)
{
	return BPF_CORE_READ(task, signal, live.counter) == 0;
}

/* d152c682f03c ("block: add an explicit ->disk backpointer to the request_queue", 5.15) and
 * f3fa33acca9f ("block: remove the ->rq_disk field in struct request", 5.17) moved a request's
 * disk from the request to its queue. */
struct request_queue___x {
	struct gendisk *disk;
} __attribute__((preserve_access_index));

struct request___x {
	struct request_queue___x *q;
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

/* The disk's dev_t in the kernel's encoding (major << 20 | minor), as /sys/dev/block names it. */
static __always_inline __u32 request_disk_dev(struct request *rq)
{
	struct request___x *r = (void *)rq;
	struct gendisk *disk;

	if (bpf_core_field_exists(r->rq_disk))
		disk = BPF_CORE_READ(r, rq_disk);
	else
		disk = BPF_CORE_READ(r, q, disk);
	if (!disk)
		return 0;
	return (__u32)BPF_CORE_READ(disk, major) << 20 | (__u32)BPF_CORE_READ(disk, first_minor);
}

/*
 * Interrupt context is not read from preempt_count: on x86 it lives in a per-CPU variable
 * (__preempt_count, or pcpu_hot.preempt_count between 64701838bf05 "x86/percpu: Move
 * preempt_count next to current_task" in 6.2 and 46e8fff6d45f "x86: Remove pcpu_hot" in
 * 6.15), and a BPF program can only take a per-CPU variable's address through kallsyms,
 * which lists data symbols only with CONFIG_KALLSYMS_ALL; distribution kernels often lack
 * it. pipeprof.bpf.c instead counts interrupt nesting per CPU from the irq, hrtimer and
 * softirq entry/exit tracepoints, which exist on every kernel it supports.
 */

/*
 * fa2c3254d7cf ("sched/tracing: Don't re-read p->state when emitting sched_switch event")
 * added prev_state as the tracepoint's 4th argument in 5.18, because re-reading the task's
 * state races with a concurrent wakeup. Userspace checks the tracepoint's BTF prototype and
 * sets sched_switch_has_prev_state; older kernels fall back to the racy read.
 */

#endif

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

/* Whether a task is asleep: off every CPU, and queued to run on none. 152e11f6df29
 * ("sched/fair: Implement delayed dequeue", 6.12) leaves a task that blocked with negative lag
 * on its run queue (se.sched_delayed) while it sleeps. */
static __always_inline bool task_asleep(struct task_struct *task)
{
	if (task->on_cpu)
		return false;
	if (!task->on_rq)
		return true;
	return bpf_core_field_exists(task->se.sched_delayed) && task->se.sched_delayed;
}

/* in_iowait is a bitfield whose byte offset moves between builds: CO-RE relocates a direct
 * load of its byte (the task is a BTF pointer of the tracepoint), which costs the context
 * switch no helper call. */
static __always_inline bool task_in_iowait(struct task_struct *task)
{
	return BPF_CORE_READ_BITFIELD(task, in_iowait);
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
 * Interrupt context comes from the CPU's own preempt count, as bpf_experimental.h's
 * bpf_in_interrupt() reads it, not from interrupt entry/exit counters (a program attached
 * between an interrupt's entry and exit leaves such a counter wrong for good). On x86 the count
 * is a per-CPU variable: __preempt_count, or pcpu_hot.preempt_count between 64701838bf05
 * ("x86/percpu: Move preempt_count next to current_task", 6.2) and 46e8fff6d45f ("x86: Remove
 * pcpu_hot", 6.15). bpf_this_cpu_ptr() needs its address from kallsyms, which lists data only
 * with CONFIG_KALLSYMS_ALL, off on many kernels (this project's CI among them). Every per-CPU
 * variable sits at the same distance from another on every CPU, so userspace takes the
 * distance from the run queue (`runqueues`) to the count out of the kernel's BTF (the
 * .data..percpu DATASEC) and the program adds it to this CPU's run queue, reached from the
 * current task. The run queue pointer in the task's sched_entity exists only with
 * CONFIG_FAIR_GROUP_SCHED; without it userspace finds no distance and the tracepoint nesting,
 * healed at every context switch, stands in. The start-up check proves the reading before it
 * is used.
 */
static __always_inline struct rq *task_cpu_rq(struct task_struct *task)
{
	struct rq *rq;

	if (!bpf_core_field_exists(task->se.cfs_rq))
		return NULL;
	/* Probed reads, not direct loads through the task's BTF pointer: the verifier checks each
	 * pointer loaded from a trusted one against the kernel's BTF by name, a scan of every
	 * type (6.18: ~1 ms each, on every path it walks), which made this walk 2.5 ms of the
	 * 64-instruction softirq program's load and 5 ms of sched_waking's; the helper calls
	 * it saves at run time did not show beside the clock read (~55-160 ns here). */
	rq = BPF_CORE_READ(task, se.cfs_rq, rq);
	/* The current task's cfs_rq is its CPU's; anything else is not a run queue we know. */
	if (!rq || BPF_CORE_READ(rq, cpu) != (int)bpf_get_smp_processor_id())
		return NULL;
	return rq;
}

/* The thread pointer of a task's user mode, which glibc makes pthread_self() and CPython
 * records as each thread state's thread_id: fsbase on x86-64, tpidr_el0 (thread.uw.tp_value)
 * on arm64. An architecture difference, not a kernel version's. */
struct thread_struct___x86 {
	unsigned long fsbase;
} __attribute__((preserve_access_index));

struct thread_struct___arm64 {
	struct {
		unsigned long tp_value;
	} uw;
} __attribute__((preserve_access_index));

static __always_inline __u64 task_user_tls(struct task_struct *task)
{
	struct thread_struct___x86 *x86 = (void *)&task->thread;
	struct thread_struct___arm64 *arm64 = (void *)&task->thread;

	if (bpf_core_field_exists(x86->fsbase))
		return BPF_CORE_READ(x86, fsbase);
	if (bpf_core_field_exists(arm64->uw.tp_value))
		return BPF_CORE_READ(arm64, uw.tp_value);
	return 0;
}

/* Whether the registers a perf event sampled (its context's, read directly) are user mode's:
 * the privilege level in the code segment on x86, the exception level in pstate on arm64.
 * The context allows only whole 8-byte loads of them, and newer kernels declare cs narrower
 * than its slot: the slot is read whole (pt_regs is ptrace's ABI, so it does not move). */
#if defined(__TARGET_ARCH_x86)
#define perf_sample_in_user_mode(ctx) \
	((((const __u64 *)&(ctx)->regs)[__builtin_offsetof(struct pt_regs, cs) / 8] & 3) != 0)
#elif defined(__TARGET_ARCH_arm64)
#define perf_sample_in_user_mode(ctx) (((ctx)->regs.pstate & 0xf) == 0)
#else
#define perf_sample_in_user_mode(ctx) true
#endif

/*
 * fa2c3254d7cf ("sched/tracing: Don't re-read p->state when emitting sched_switch event")
 * added prev_state as the tracepoint's 4th argument in 5.18, because re-reading the task's
 * state races with a concurrent wakeup. Userspace checks the tracepoint's BTF prototype and
 * sets sched_switch_has_prev_state; older kernels fall back to the racy read.
 */

#endif

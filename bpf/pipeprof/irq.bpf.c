// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Interrupt tracepoints: the softirq vector being served, the fallback's hardirq nesting, and
 * the start-up check of the preempt count (pipeprof.bpf.h's wake_context() reads them). Once
 * the check passes, userspace detaches all but softirq_entry (tracer.c). */
#include "pipeprof.bpf.h"

SEC("tp_btf/softirq_entry")
int BPF_PROG(on_softirq_entry, unsigned int vec_nr)
{
	struct irq_ctx *irq = irq_ctx_here();
	__u32 pc;

	if (irq)
		irq->softirq_vec = vec_nr + 1;
	/* Start-up check, before the window opens: serving a softirq, not in a hard interrupt
	 * (softirqs run with interrupts on and do not nest in them). */
	if (!window_start_ns && preempt_count_rq_delta) {
		count(cpu_preempt_count(&pc) && (pc & SOFTIRQ_OFFSET) && !(pc & (HARDIRQ_MASK | NMI_MASK)) ?
		      PP_CNT_PCOUNT_OK : PP_CNT_PCOUNT_BAD);
	}
	return 0;
}

/* Fallback only: once the preempt count is trusted, a vector is read only while the count says
 * a softirq is being served, and softirqs do not nest, so the last entry's vector is right. */
SEC("tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit, unsigned int vec_nr)
{
	struct irq_ctx *irq = irq_ctx_here();

	if (irq)
		irq->softirq_vec = 0;
	return 0;
}

static __always_inline void hardirq_enter(void)
{
	struct irq_ctx *irq = irq_ctx_here();

	if (irq)
		irq->hardirq_depth++;
}

static __always_inline void hardirq_exit(void)
{
	struct irq_ctx *irq = irq_ctx_here();

	/* An exit without its entry: we attached inside the interrupt. */
	if (irq && irq->hardirq_depth)
		irq->hardirq_depth--;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(on_irq_handler_entry)
{
	__u32 pc;

	hardirq_enter();
	if (!window_start_ns && preempt_count_rq_delta)
		count(cpu_preempt_count(&pc) && (pc & HARDIRQ_MASK) ? PP_CNT_PCOUNT_OK : PP_CNT_PCOUNT_BAD);
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(on_irq_handler_exit)
{
	hardirq_exit();
	return 0;
}

/* Sleep, poll and futex timeouts wake their tasks from hrtimer callbacks in hardirq. */
SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(on_hrtimer_expire_entry)
{
	__u32 pc;

	hardirq_enter();
	/* Start-up check: hrtimers expire in hard interrupt, or in the hrtimer softirq. */
	if (!window_start_ns && preempt_count_rq_delta)
		count(cpu_preempt_count(&pc) && (pc & (HARDIRQ_MASK | SOFTIRQ_OFFSET)) ?
		      PP_CNT_PCOUNT_OK : PP_CNT_PCOUNT_BAD);
	return 0;
}

SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(on_hrtimer_expire_exit)
{
	hardirq_exit();
	return 0;
}


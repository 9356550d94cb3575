// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The baselines of tools/bench/prog_cost.py: programs that do nothing (`return 0`), attached by
 * tools/bench/empty_progs.c to the instructions pipeprof's uprobes probe and to the scheduler
 * tracepoints pipeprof's handlers run on, so what the hook itself costs (the trap or the
 * tracepoint, the dispatch, the run-time statistics) can be told from what pipeprof's
 * handlers add to it. The clock_* programs read the clock once, as pipeprof's handlers do for
 * every event of a traced task, and nothing else: the floor of such an event on this machine,
 * whose share of a handler's cost depends on the clocksource (a TSC read is a few ns, a
 * paravirtual clock several times that). */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>

SEC("uprobe")
int empty_uprobe(void *ctx)
{
	return 0;
}

SEC("uretprobe")
int empty_uretprobe(void *ctx)
{
	return 0;
}

SEC("tp_btf/sched_switch")
int empty_switch(void *ctx)
{
	return 0;
}

SEC("tp_btf/sched_waking")
int empty_waking(void *ctx)
{
	return 0;
}

SEC("tp_btf/sched_wakeup")
int empty_wakeup(void *ctx)
{
	return 0;
}

SEC("tp_btf/sched_process_fork")
int empty_fork(void *ctx)
{
	return 0;
}

SEC("tp_btf/sched_process_exec")
int empty_exec(void *ctx)
{
	return 0;
}

SEC("tp_btf/sched_process_exit")
int empty_exit(void *ctx)
{
	return 0;
}

/* Written, so the reads are not optimised away. */
__u64 last_clock;

SEC("tp_btf/sched_switch")
int clock_switch(void *ctx)
{
	last_clock = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sched_waking")
int clock_waking(void *ctx)
{
	last_clock = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sched_wakeup")
int clock_wakeup(void *ctx)
{
	last_clock = bpf_ktime_get_ns();
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The tracepoints every task of the host fires, attached once for all the jobs the daemon (or
 * top) traces (dispatch.h says why): a task no job follows costs one array load; one a job
 * follows goes to that job's own program by tail call. A switch between two jobs' tasks
 * reaches the previous task's job first, whose program passes it on to the next task's
 * (sched.bpf.c); a block completion finds its job by the request (rq_job).
 */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "dispatch.h"

/* Sized to pid_max by userspace before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pp_job_block);
} pid_job SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_DISPATCH_BIG_PIDS);
	__type(key, __u32);
	__type(value, __u32);
} big_pid_job SEC(".maps");

#define PROG_ARRAY(name)						\
	struct {							\
		__uint(type, BPF_MAP_TYPE_PROG_ARRAY);			\
		__uint(max_entries, PP_DISPATCH_SLOTS);			\
		__uint(key_size, sizeof(__u32));			\
		__uint(value_size, sizeof(__u32));			\
	} name SEC(".maps")

PROG_ARRAY(switch_progs);
PROG_ARRAY(waking_progs);
PROG_ARRAY(wakeup_progs);
PROG_ARRAY(tcp_rcv_progs);
PROG_ARRAY(io_start_progs);
PROG_ARRAY(rq_issue_progs);
PROG_ARRAY(rq_complete_progs);

/* Written by the jobs' programs as they take a request, deleted as it completes. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PP_DISPATCH_RQS);
	__type(key, __u64);
	__type(value, __u32);
} rq_job SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct irq_ctx);
} irq_ctx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dispatch_lost SEC(".maps");

/* The start-up check: set by the first switch, read by userspace (written once, so no CPU
 * writes a shared cache line on every switch). */
bool switch_seen = false;

#include "dispatch.bpf.h"
#define job_of dispatched_job

static __always_inline void pass_to(void *ctx, void *progs, __u32 job)
{
	bpf_tail_call(ctx, progs, job - 1);
	dispatch_missed();
}

SEC("tp_btf/sched_switch")
int BPF_PROG(dispatch_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 prev_job = job_of(prev->tgid), next_job;

	if (!switch_seen)
		switch_seen = true;
	if (prev_job)
		pass_to(ctx, &switch_progs, prev_job);
	/* Here only when prev's job has no program (none, or it is attaching or detaching):
	 * next's job still gets its switch-in. */
	next_job = job_of(next->tgid);
	if (next_job && next_job != prev_job)
		pass_to(ctx, &switch_progs, next_job);
	return 0;
}

/* To the job that follows process tgid, if one does. */
static __always_inline void pass_process(void *ctx, void *progs, __u32 tgid)
{
	__u32 job = job_of(tgid);

	if (job)
		pass_to(ctx, progs, job);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(dispatch_waking, struct task_struct *p)
{
	pass_process(ctx, &waking_progs, p->tgid);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(dispatch_wakeup, struct task_struct *p)
{
	pass_process(ctx, &wakeup_progs, p->tgid);
	return 0;
}

/* The tracks of the current task: a TCP receive, a block request submitted. */
static __always_inline void pass_current(void *ctx, void *progs)
{
	pass_process(ctx, progs, bpf_get_current_pid_tgid() >> 32);
}

/* Which job issued rq, else the current task's (a request issued where its submission was
 * not seen: block_rq_issue without block_io_start, before 6.5). */
static __always_inline void pass_request(void *ctx, void *progs, struct request *rq, bool current)
{
	__u64 key = (__u64)rq;
	__u32 *job = bpf_map_lookup_elem(&rq_job, &key);

	if (job && *job)
		pass_to(ctx, progs, *job);
	else if (current)
		pass_current(ctx, progs);
}

SEC("tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(dispatch_tcp_rcv, struct sock *sk)
{
	pass_current(ctx, &tcp_rcv_progs);
	return 0;
}

SEC("tp_btf/block_io_start")
int BPF_PROG(dispatch_io_start, struct request *rq)
{
	pass_current(ctx, &io_start_progs);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(dispatch_rq_issue, struct request *rq)
{
	pass_request(ctx, &rq_issue_progs, rq, true);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(dispatch_rq_done, struct request *rq)
{
	pass_request(ctx, &rq_complete_progs, rq, false);
	return 0;
}

/* Every job's wakeups read the vector from the shared irq_ctx: one program keeps it for all. */
SEC("tp_btf/softirq_entry")
int BPF_PROG(softirq_vector, unsigned int vec_nr)
{
	__u32 zero = 0;
	struct irq_ctx *irq = bpf_map_lookup_elem(&irq_ctx, &zero);

	if (irq)
		irq->softirq_vec = vec_nr + 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";

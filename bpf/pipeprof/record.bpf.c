// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `pipeprof record`: every state episode add_state() closes, sent to userspace as it closes,
 * for a timeline (Chrome trace-event JSON). Only linked into the scheduler programs' paths
 * behind the record_on rodata flag, so the report's own tracing pays nothing for it.
 */
#include "pipeprof.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);	/* sized by userspace */
} episodes SEC(".maps");

/* Per CPU: episodes sent in the current PP_EPISODE_SLOT_NS slot. A per-CPU budget needs no
 * atomics, and a job that switches faster than anyone can read a timeline of loses episodes
 * (counted) rather than the machine's time to sending them. */
struct ep_budget {
	__u64 slot;
	__u32 sent;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ep_budget);
} ep_budgets SEC(".maps");

/* A ring-buffer slot for an event at `to`, within this CPU's budget; NULL: dropped, counted. */
static __always_inline struct pp_episode *ep_reserve(__u64 to)
{
	struct pp_episode *e;
	struct ep_budget *b;
	__u32 zero = 0;
	__u64 slot;

	b = bpf_map_lookup_elem(&ep_budgets, &zero);
	if (!b)
		return NULL;
	slot = to / PP_EPISODE_SLOT_NS;
	if (b->slot != slot) {
		b->slot = slot;
		b->sent = 0;
	}
	if (b->sent >= record_cap) {
		count(PP_CNT_EPISODES_DROPPED);
		return NULL;
	}
	e = bpf_ringbuf_reserve(&episodes, sizeof(*e), 0);
	if (!e) {
		count(PP_CNT_EPISODES_DROPPED);
		return NULL;
	}
	b->sent++;
	return e;
}

/* Global: verified once, shared by the scheduler and GPU programs that close episodes. */
__noinline int record_episode(struct pp_thread *t, __u32 tid, __u32 state, __u64 from, __u64 to)
{
	struct pp_episode *e;

	if (!t)
		return 0;
	e = ep_reserve(to);
	if (!e)
		return 0;
	e->tid = tid;
	e->tgid = t->tgid;
	e->state = STATE_IDX(state);
	e->start_ns = from;
	e->end_ns = to;
	e->waker_tid = 0;
	e->wake_ns = 0;
	/* GPU_WAIT is only ever inside a synchronising call: the last one entered. */
	e->api = e->state == PP_GPU_WAIT ? t->gpu_api + 1 : 0;
	e->pad = 0;
	/* A wait a task ended: judge_wakeup() named it from that task's context. */
	if ((state & PP_EP_WOKEN) && t->wake_ctx == PP_WAKE_TASK && t->waker_tid &&
	    t->waker_tid != tid) {
		e->waker_tid = t->waker_tid;
		e->wake_ns = t->woken_ns;
	}
	bpf_ringbuf_submit(e, 0);
	count(PP_CNT_EPISODES);
	return 1;
}

/* A kernel launch: an instant (the probe is entry-only), under the episodes' budget, as a
 * launch-bound loop must not flood the ring buffer the state episodes share. */
__noinline int record_launch(struct pp_thread *t, __u32 tid, __u32 api, __u64 now)
{
	struct pp_episode *e;

	if (!t)
		return 0;
	e = ep_reserve(now);
	if (!e)
		return 0;
	e->tid = tid;
	e->tgid = t->tgid;
	e->state = PP_EP_LAUNCH;
	e->start_ns = now;
	e->end_ns = now;
	e->waker_tid = 0;
	e->wake_ns = 0;
	e->api = api + 1;
	e->pad = 0;
	bpf_ringbuf_submit(e, 0);
	count(PP_CNT_EPISODES);
	return 1;
}

/* switch_in() (sched.bpf.c) that also sends the episodes; here, not beside it, so that clang
 * compiles switch_in() as it would without `record`. */
__noinline int switch_in_rec(struct pp_thread *t, __u32 tid, __u64 now)
{
	return do_switch_in(t, tid, now, true);
}

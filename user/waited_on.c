// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What the trainer waited on: the threads and interrupt contexts whose wakeups ended its
 * waits (stall model: every attributed wait records who ended it). Pure logic. */
#include <stdlib.h>
#include <string.h>
#include "classify.h"

const char *wake_ctx_name(__u32 ctx)
{
	switch (ctx) {
	case PP_WAKE_TASK:
		return "thread";
	case PP_WAKE_HARDIRQ:
		return "hardirq";
	case PP_WAKE_SOFTIRQ_NET:
		return "softirq NET_RX";
	case PP_WAKE_SOFTIRQ:
		return "softirq";
	}
	return "?";
}

static int by_time_desc(const void *a, const void *b)
{
	const struct waited_on *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? 1 : -1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Interrupts are one waker per context: `current` there is whichever task was interrupted. */
static bool same_waker(const struct waited_on *w, const struct wake_record *r)
{
	if (w->ctx != r->ctx)
		return false;
	return r->ctx != PP_WAKE_TASK || w->tid == r->waker;
}

static __u32 trainer_tgid(const struct thread_result *threads, int n, __u32 trainer_tid)
{
	for (int i = 0; i < n; i++)
		if (threads[i].tid == trainer_tid)
			return threads[i].tgid;
	return 0;
}

void waited_on_collect(struct analysis *a, const struct thread_result *threads, int nr_threads,
		       __u32 trainer_tid, const struct wake_record *wakes, int nr_wakes)
{
	struct waited_on *all = NULL;
	__u32 trainer;
	int n = 0;

	a->nr_waited_on = 0;
	a->waited_total_ns = 0;
	if (nr_wakes > 0)
		all = calloc(nr_wakes, sizeof(*all));
	for (int i = 0; all && i < nr_wakes; i++) {
		const struct wake_record *r = &wakes[i];
		struct waited_on *w = NULL;

		if (r->wakee != trainer_tid || r->cause >= PP_NR_STATES)
			continue;
		for (int k = 0; k < n && !w; k++)
			if (same_waker(&all[k], r))
				w = &all[k];
		if (!w) {
			w = &all[n++];
			w->ctx = r->ctx;
			w->tid = r->ctx == PP_WAKE_TASK ? r->waker : 0;
			w->tgid = r->ctx == PP_WAKE_TASK ? r->waker_tgid : 0;
			w->thread_index = -1;
		}
		w->ns += r->ns;
		w->cause_ns[r->cause] += r->ns;
		w->wakeups += r->count;
		a->waited_total_ns += r->ns;
	}
	if (!n) {
		free(all);
		return;
	}
	qsort(all, n, sizeof(*all), by_time_desc);
	a->children_exit_ns = 0;
	a->children_exit_procs = 0;
	trainer = trainer_tgid(threads, nr_threads, trainer_tid);
	for (int k = 0; k < n; k++) {
		const struct thread_result *t = NULL;

		for (int i = 0; all[k].ctx == PP_WAKE_TASK && i < nr_threads && !t; i++)
			if (threads[i].tid == all[k].tid)
				t = &threads[i];
		if (!t || !t->exited || !all[k].cause_ns[PP_OTHER] || t->tgid == trainer)
			continue;
		if (!a->children_exit_procs++)
			memcpy(a->children_comm, t->comm, sizeof(a->children_comm));
		a->children_exit_ns += all[k].cause_ns[PP_OTHER];
	}
	for (int k = 0; k < n && k < MAX_WAITED_ON; k++) {
		struct waited_on *w = &a->waited_on[a->nr_waited_on++];

		*w = all[k];
		for (int i = 0; w->ctx == PP_WAKE_TASK && i < nr_threads; i++)
			if (threads[i].tid == w->tid) {
				w->thread_index = i;
				memcpy(w->comm, threads[i].comm, sizeof(w->comm));
			}
	}
	free(all);
}

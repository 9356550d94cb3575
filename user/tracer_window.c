// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Closing the report's window: waits still open at its end are given a grace to be named by
 * their wakeup before the maps are read. BPF plumbing, beside tracer.c. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "pipeprof.h"	/* the types the skeleton's globals use */
#include "pipeprof.skel.h"
#include "proctree.h"
#include "tracer.h"

/* Whether a thread the verdict may rest on is still in a wait that began before end_ns. */
static bool open_wait_pending(struct tracer *t, __u64 end_ns, pid_t tid)
{
	int fd = bpf_map__fd(t->skel->maps.threads);
	__u32 key, next, *prev = NULL;
	struct pp_thread th;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &th))
			continue;
		/* The trainer candidates as analyse() picks them: --tid wherever it lives, else the
		 * root's main thread and its GPU-calling threads. */
		if (tid ? key != (__u32)tid :
		    th.tgid != (__u32)t->root || (key != (__u32)t->root && !th.gpu_calls))
			continue;
		if ((th.phase == PP_PHASE_OFFCPU || th.phase == PP_PHASE_UNKNOWN) &&
		    th.phase_start_ns < end_ns)
			return true;
	}
	return false;
}

static int by_tid(const void *a, const void *b)
{
	__u32 x = ((const struct tracer_close_state *)a)->tid;
	__u32 y = ((const struct tracer_close_state *)b)->tid;

	return x < y ? -1 : x > y;
}

/*
 * A thread no event has shown since the attach was in one state all along, and /proc says
 * which: asleep, running, in I/O. Read at the close, not when the maps are read: that comes
 * after the naming grace, seconds later for a long wait, by when a thread asleep all through
 * the window may have been woken and be running.
 */
static void snapshot_unknown(struct tracer *t)
{
	int fd = bpf_map__fd(t->skel->maps.threads), cap = 0;
	__u32 key, next, *prev = NULL;
	struct pp_thread th;

	t->nr_close_states = 0;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &th) || th.phase != PP_PHASE_UNKNOWN)
			continue;
		if (t->nr_close_states == cap) {
			int grown_cap = cap ? 2 * cap : 64;
			void *grown = realloc(t->close_states, grown_cap * sizeof(*t->close_states));

			if (!grown)
				return;
			t->close_states = grown;
			cap = grown_cap;
		}
		t->close_states[t->nr_close_states++] = (struct tracer_close_state){
			.tid = key, .state = proc_thread_state(PROCFS, th.tgid, key),
		};
	}
	/* Sorted for bsearch: a job may have tens of thousands of idle threads. */
	qsort(t->close_states, t->nr_close_states, sizeof(*t->close_states), by_tid);
}

char tracer_close_state_of(const struct tracer *t, __u32 tid)
{
	struct tracer_close_state key = { .tid = tid }, *found;

	if (!t->nr_close_states)
		return 0;
	found = bsearch(&key, t->close_states, t->nr_close_states, sizeof(key), by_tid);
	return found ? found->state : 0;
}

int tracer_close_window(struct tracer *t, __u64 end_ns, pid_t tid, int naming_ms, int max_naming_ms,
			const volatile sig_atomic_t *stop, bool quiet)
{
	__u64 deadline = end_ns + (__u64)naming_ms * 1000000, now;
	__u64 last = end_ns + (__u64)(max_naming_ms > naming_ms ? max_naming_ms : naming_ms) * 1000000;
	bool pending;

	t->skel->bss->naming_until_ns = last;
	__atomic_store_n(&t->skel->bss->window_end_ns, end_ns, __ATOMIC_SEQ_CST);
	snapshot_unknown(t);
	while ((pending = open_wait_pending(t, end_ns, tid)) && (now = monotonic_ns()) < deadline)
		usleep(5000);
	/* A step longer than the window leaves the trainer waiting at its close for most of it:
	 * the wakeup that ends that wait is what names it, so it is worth waiting for. */
	if (pending && last > deadline && !(stop && *stop)) {
		if (!quiet)
			fprintf(stderr, "pipeprof: the trainer is in a wait that began before the window "
				"closed; only its wakeup names its cause: waiting up to %.1f s more "
				"(Ctrl-C: report now)\n", (last - deadline) / 1e9);
		while ((pending = open_wait_pending(t, end_ns, tid)) &&
		       (now = monotonic_ns()) < last && !(stop && *stop))
			usleep(20000);
	}
	/* Stop, and let any program still naming finish before the maps are read. */
	__atomic_store_n(&t->skel->bss->naming_until_ns, end_ns, __ATOMIC_SEQ_CST);
	tracer_wait_programs();
	now = monotonic_ns();
	return now > end_ns ? (int)((now - end_ns) / 1000000) : 0;
}

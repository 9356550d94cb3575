// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The report's window: its edges, stored before they come; waits still open at its end given
 * a grace to be named by their wakeup before the maps are read; and the live front-ends'
 * windows (the daemon's, top's), each thread's figures since the last. BPF plumbing, beside
 * tracer.c. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "pipeprof.h"	/* the types the skeleton's globals use */
#include "pipeprof.skel.h"
#include "daemon_window.h"
#include "proctree.h"
#include "tracer.h"
#include "grow.h"

/* Whether tgid is the root or a rank of a distributed job under it: a process whose main
 * thread or GPU-calling threads are trainer candidates. */
static bool trainer_process(struct tracer *t, __u32 tgid)
{
	struct pp_proc proc;

	if (tgid == (__u32)t->root)
		return true;
	return !bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.tracked_procs), &tgid, &proc) &&
	       proc.rank_tgid == tgid;
}

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
		 * main thread and the GPU-calling threads of the root and of each rank under it
		 * (every rank's verdict rests on its own trainer). */
		if (tid ? key != (__u32)tid :
		    (key != th.tgid && !th.gpu_calls) || !trainer_process(t, th.tgid))
			continue;
		if ((th.phase == PP_PHASE_OFFCPU || th.phase == PP_PHASE_UNKNOWN) &&
		    th.phase_start_ns < end_ns)
			return true;
		/* A wait open at the close that timed out, retried or about to be (on a CPU for
		 * milliseconds in between, or woken and not yet on one): the retry's waker names
		 * it, at the retry's switch-in. Through the GIL's timeouts on the way and the
		 * retry's own (a 2.5 s batch behind a 1 s timeout takes three): a thread that loops
		 * on timeouts (`while t.is_alive(): t.join(1)`) is a wait that has not ended, and
		 * is followed up to the limit, as any other. */
		if (pp_retry_pending(&th) && th.timed_out_from_ns < end_ns &&
		    (th.phase == PP_PHASE_OFFCPU || th.phase == PP_PHASE_RUNNABLE ||
		     (th.phase == PP_PHASE_ONCPU &&
		      monotonic_ns() - th.oncpu_since_ns <= pp_held_run_budget(&th))))
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
		if (grow_array(&t->close_states, &cap, t->nr_close_states, sizeof(*t->close_states),
			       64))
			return;
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

/* How far ahead of the clock an edge of the window is set: far more than a store takes,
 * little beside a window. */
#define EDGE_LEAD_NS 2000000ULL

/* The tests' stand-in for pipeprof preempted between choosing an edge and storing it. */
static void test_edge_delay(const char *env)
{
	const char *ms = getenv(env);

	if (ms)
		usleep((useconds_t)(atoi(ms) * 1000));
}

/*
 * An edge is a few stores and clock reads, which are right only if they land before the time
 * they name: a preemption of milliseconds between two of them (a busy 2-CPU machine beside
 * the job's ranks) would spread them over the job's calls. At real-time priority (the lowest:
 * above every ordinary task, below the kernel's own) no task of the job's can take the CPU
 * meanwhile. Where pipeprof may not (no CAP_SYS_NICE, a cgroup without real-time time), the
 * stores still check their own lateness.
 */
struct edge_priority {
	int policy;
	struct sched_param param;
	bool raised;
};

static void edge_priority_raise(struct edge_priority *p)
{
	struct sched_param fifo = { .sched_priority = sched_get_priority_min(SCHED_FIFO) };

	p->raised = false;
	p->policy = sched_getscheduler(0);
	if (p->policy < 0 || sched_getparam(0, &p->param))
		return;
	p->raised = !sched_setscheduler(0, SCHED_FIFO, &fifo);
}

static void edge_priority_restore(const struct edge_priority *p)
{
	if (p->raised)
		sched_setscheduler(0, p->policy, &p->param);
}

/* Stores an edge a little ahead of the clock, before it comes, and returns it; moved to when
 * the store landed should that be after its own time. */
static __u64 store_edge_ahead(volatile __u64 *edge, const char *test_delay_env)
{
	__u64 at = monotonic_ns() + EDGE_LEAD_NS, landed;

	test_edge_delay(test_delay_env);
	__atomic_store_n(edge, at, __ATOMIC_SEQ_CST);
	landed = monotonic_ns();
	if (landed > at) {
		at = landed;
		__atomic_store_n(edge, at, __ATOMIC_SEQ_CST);
	}
	return at;
}

static void sleep_until(__u64 when_ns)
{
	__u64 now;

	while ((now = monotonic_ns()) <= when_ns) {
		struct timespec pause = { .tv_nsec = (long)(when_ns - now) + 1000 };

		nanosleep(&pause, NULL);
	}
}

/*
 * The start, stored before it comes: a program that found no start read its clock before the
 * store, so before the start, and one that finds it reads its clock against it until
 * userspace says it has passed. Stamped first and stored after, a call made in between would
 * be inside the window the report states and never counted. Should the store land after its
 * own time, the start moves to when it landed: the calls begun before that were not seen,
 * and are outside. Threads are seeded (seed, with t->start_ns set) before the programs may
 * account.
 */
void tracer_begin_accounting(struct tracer *t, void (*seed)(struct tracer *t))
{
	struct edge_priority prio;

	edge_priority_raise(&prio);
	t->start_ns = store_edge_ahead(&t->skel->bss->window_start_ns, "PIPEPROF_TEST_OPEN_DELAY_MS");
	edge_priority_restore(&prio);
	seed(t);
	sleep_until(t->start_ns);
	__atomic_store_n(&t->skel->bss->window_start_passed, true, __ATOMIC_SEQ_CST);
}

/*
 * First an end that never comes: from then on every program reads its clock and counts only
 * up to the end it loads. Then the real end, a little ahead, stored before it comes: a program
 * that still loaded the far end read its clock before that store, so before the end. Should
 * the store land after its own time (pipeprof preempted between the two lines), the end moves
 * to when it landed, where the counts taken against the far end all lie before it.
 */
__u64 tracer_end_accounting(struct tracer *t)
{
	volatile __u64 *end = &t->skel->bss->window_end_ns;
	struct edge_priority prio;
	__u64 end_ns;

	edge_priority_raise(&prio);
	__atomic_store_n(end, UINT64_MAX, __ATOMIC_SEQ_CST);
	end_ns = store_edge_ahead(end, "PIPEPROF_TEST_CLOSE_DELAY_MS");
	edge_priority_restore(&prio);
	sleep_until(end_ns);
	return end_ns;
}

int tracer_close_window(struct tracer *t, __u64 end_ns, pid_t tid, int naming_ms, int max_naming_ms,
			const volatile sig_atomic_t *stop, bool quiet)
{
	__u64 deadline = end_ns + (__u64)naming_ms * 1000000, now;
	__u64 last = end_ns + (__u64)(max_naming_ms > naming_ms ? max_naming_ms : naming_ms) * 1000000;
	bool pending;

	t->skel->bss->naming_until_ns = last;
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

/* ---- per-window thread deltas (the daemon, top) ---- */

static struct thread_snap *snap_of(struct thread_snaps *snaps, __u32 tid)
{
	for (int i = 0; i < snaps->nr; i++)
		if (snaps->v[i].tid == tid)
			return &snaps->v[i];
	if (grow_array(&snaps->v, &snaps->cap, snaps->nr, sizeof(*snaps->v), 64))
		return NULL;
	memset(&snaps->v[snaps->nr], 0, sizeof(snaps->v[0]));
	snaps->v[snaps->nr].tid = tid;
	return &snaps->v[snaps->nr++];
}

static void forget_snap(struct thread_snaps *snaps, __u32 tid)
{
	for (int i = 0; i < snaps->nr; i++)
		if (snaps->v[i].tid == tid) {
			snaps->v[i] = snaps->v[--snaps->nr];
			return;
		}
}

/* What a cumulative counter gained since *prev, which it then becomes. */
static __u64 counter_delta(__u64 now, __u64 *prev)
{
	__u64 d = now - *prev;

	*prev = now;
	return d;
}

/* Exited threads and processes leave the maps here: one caller reads a tracer's windows. */
int tracer_window_threads(struct tracer *t, struct thread_snaps *snaps, __u64 now_ns,
			  struct thread_result **out, int *nr)
{
	int tfd = bpf_map__fd(t->skel->maps.threads), n = 0, cap = 64;
	int pfd = bpf_map__fd(t->skel->maps.tracked_procs);
	struct thread_result *res = calloc(cap, sizeof(*res));
	__u32 key, next, *prev = NULL, *gone = NULL;
	int nr_gone = 0;
	struct pp_thread th;
	struct pp_proc proc;

	if (!res)
		return -ENOMEM;
	while (!bpf_map_get_next_key(tfd, prev, &next)) {
		struct thread_snap *s;
		struct thread_result *r;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(tfd, &key, &th))
			continue;
		s = snap_of(snaps, key);
		if (!s)
			continue;
		if (grow_array(&res, &cap, n, sizeof(*res), 64))
			break;
		r = &res[n++];
		/* Cumulative since the tracer started, the open phase included. */
		thread_close(&th, t->start_ns, now_ns, 0, r);
		r->tid = key;
		window_delta(r->ns, s->ns, r->ns, &r->wall_ns);
		/* The window's own, as the states: the counters are cumulative too. */
		r->gpu_calls = counter_delta(th.gpu_calls, &s->gpu_calls);
		r->gc_ns = counter_delta(th.gc_ns, &s->gc_ns);
		r->gc_count = counter_delta(th.gc_count, &s->gc_count);
		r->gil_ns = counter_delta(th.gil_ns, &s->gil_ns);
		if (r->exited) {
			void *grown = realloc(gone, (nr_gone + 1) * sizeof(*gone));

			if (grown) {
				gone = grown;
				gone[nr_gone++] = key;
			}
		}
	}
	for (int i = 0; i < nr_gone; i++) {
		bpf_map_delete_elem(tfd, &gone[i]);
		forget_snap(snaps, gone[i]);
	}
	free(gone);

	prev = NULL;
	nr_gone = 0;
	gone = NULL;
	while (!bpf_map_get_next_key(pfd, prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(pfd, &key, &proc) && proc.exit_ns && !proc.is_root) {
			void *grown = realloc(gone, (nr_gone + 1) * sizeof(*gone));

			if (grown) {
				gone = grown;
				gone[nr_gone++] = key;
			}
		}
	}
	for (int i = 0; i < nr_gone; i++)
		bpf_map_delete_elem(pfd, &gone[i]);
	free(gone);
	*out = res;
	*nr = n;
	return 0;
}

void thread_snaps_free(struct thread_snaps *s)
{
	free(s->v);
	*s = (struct thread_snaps){};
}

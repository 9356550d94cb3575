/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared between pipeprof's BPF object (bpf/pipeprof/) and userspace: plain fixed-width types
 * only. */
#ifndef PIPEPROF_H
#define PIPEPROF_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* The stall model's states (../shared/stall-model.md); order is ABI between both sides. */
enum pp_state {
	PP_RUNNING = 0,
	PP_RUNQ,
	PP_GPU_WAIT,
	PP_IO_WAIT,
	PP_DATA_WAIT,
	PP_THREAD_WAIT,
	PP_COMM_WAIT,
	PP_OTHER,
	PP_NR_STATES,
};

/* Where a thread is right now, as far as the scheduler events tell. */
enum pp_phase {
	PP_PHASE_UNKNOWN = 0,	/* seen at attach, no event yet */
	PP_PHASE_ONCPU,
	PP_PHASE_RUNNABLE,	/* woken or preempted, waiting for a CPU */
	PP_PHASE_OFFCPU,	/* asleep; cause decided by the wakeup */
	PP_PHASE_EXITED,
};

#define PP_MAX_THREADS	32768
#define PP_MAX_PROCS	4096
#define PP_MAX_INFLIGHT_RQ 8192
#define PP_HIST_SLOTS	32
#define PP_MAX_GPU_APIS	128
/* Attach cookie of the start-up self-test probe on pipeprof's own function. */
#define PP_SELFTEST_API	(PP_MAX_GPU_APIS - 1)
#define PP_MAX_GPU_DEPTH 8

/* Where a wakeup was raised, read from the CPU's preempt count. */
enum pp_wake_ctx {
	PP_WAKE_TASK = 0,	/* a task's own context: the current task is the waker */
	PP_WAKE_HARDIRQ,	/* hard interrupt or NMI: timers, device completions, IPIs */
	PP_WAKE_SOFTIRQ_NET,	/* NET_RX softirq: a packet arrived */
	PP_WAKE_SOFTIRQ,	/* any other softirq */
	PP_NR_WAKE_CTX,
};

/*
 * Wait chains (stall model, "Wait chains"): a thread woken from a wait of cause C that wakes
 * another thread soon after, having run only briefly since, is relaying C. Bounded so a chain
 * cannot carry a cause through real work or around a cycle for long.
 */
#define PP_CHAIN_MAX_DEPTH	4
#define PP_CHAIN_MAX_RUN_NS	(5ULL * 1000000)	/* on-CPU since the relay's own wait */
/* A lock taken back before a retry, by its wakeup: the GIL's 5 ms timed wait, ended by its
 * holder before its timer (give or take the timer's slack). Judged at the enqueueing after the
 * wakeup, 5 ms, a holder preempted beside CPU hogs that signalled at 4.998 ms read a thread's
 * held Queue.get(timeout=1) waits as OTHER (3 s of a window, one attach in 30). */
#define PP_LOCK_HANDOFF_MAX_NS	(6ULL * 1000000)
#define PP_ON_THE_WAY_MAX_NS	(10ULL * 1000000)	/* the GIL's 5 ms timed wait, and its wakeup */
#define PP_CHAIN_MAX_AGE_NS	(100ULL * 1000000)	/* wall time since it */
#define PP_NO_CAUSE		0xffffffffu

/* The cause a waker passes on, or PP_NO_CAUSE. last_wait is the waker's last completed wait,
 * depth its relay hops, ran_ns its on-CPU time and age_ns the wall time since that wait. */
static inline __u32 pp_chain_cause(__u32 last_wait, __u32 depth, __u64 ran_ns, __u64 age_ns)
{
	switch (last_wait) {
	case PP_DATA_WAIT:
	case PP_COMM_WAIT:
	case PP_IO_WAIT:
	case PP_GPU_WAIT:
		break;
	default:
		return PP_NO_CAUSE;
	}
	if (depth >= PP_CHAIN_MAX_DEPTH || ran_ns > PP_CHAIN_MAX_RUN_NS || age_ns > PP_CHAIN_MAX_AGE_NS)
		return PP_NO_CAUSE;
	return last_wait;
}

/*
 * Timed-out waits. torch's DataLoader waits for a batch in Queue.get(timeout=5 s) and, on the
 * timeout, checks its workers and waits again: a batch slower than 5 s is a chain of waits the
 * timer ends and one the worker ends. A timer names none of them, so each waited with a
 * timeout on an object (poll, select, epoll, futex) and ended by an interrupt, then retried
 * after a brief run (pp_retry_run_budget), takes the cause of the retry that a waker ends.
 * A deliberate sleep (nanosleep, or select and poll on no descriptor) is no retry and stays
 * OTHER.
 *
 * A retry is the same call: the same syscall with the same timeout argument, its value where it
 * is a number of milliseconds (poll, epoll_wait; give or take what a preemption took of it,
 * below), its address where it is a pointer (futex,
 * ppoll, select: the deadline in it changes, its place on the stack is the call site's), and
 * for futex the same operation. A pause is not a retry: asyncio's `await asyncio.sleep(0.1)` is
 * epoll_wait(fd, .., 100) and the read it awaits next epoll_wait(fd, .., -1); `stop.wait(0.1)`
 * then `q.get()` is a futex with a deadline, then one with none. Compared by syscall alone, each
 * pause read as the wait after it. The object waited on is left out: multiprocessing builds a
 * new poll set at each call, and a Condition a new lock for each waiter.
 *
 * Between a timed-out wait and its retry the thread may wait on something else on the way, as
 * Python takes the GIL back from the thread that holds it: 5 ms waits on its condition that
 * time out, then one that thread ends, then its mutex, unlocked at once. A wait of another call
 * that times out within PP_ON_THE_WAY_MAX_NS is added to the held ones, and one a task ends
 * within PP_LOCK_HANDOFF_MAX_NS leaves them held; anything else ends them (OTHER), and a longer
 * wait of another call that timed out is held in their place. Ending them at the GIL read 5 s
 * of a thread's Queue.get(timeout=5) as OTHER in some batches (THREAD_WAIT 21-93% where it was
 * 100%).
 *
 * A timeout in milliseconds (poll, epoll_wait) is what remains of the caller's deadline,
 * rounded up: Python's Queue.get(timeout=5) takes a lock, then polls for 5000 ms less the time
 * since it read the clock. Preempted in between, it polls for 4998, and its retry for 5000.
 * Compared exactly, they were two calls, and about one attach in 50 on a DataLoader whose
 * batches outlast its timeout read a whole timed-out wait as OTHER. So millisecond timeouts
 * within an eighth of the longer, plus 1 ms, are one call (pp_same_call); a pause of 100 ms
 * before a wait of 200 ms is not. A shorter timeout is also what remained of its retry's when
 * the thread spent at least the difference since its previous wait or its birth (its lead,
 * less PP_LEAD_SLACK_MS), or when that time is unseen: the wait began before the attach, or no
 * wait of the thread came before it since (pp_retry_of). A step that reads the clock, computes,
 * then polls for what remains had its deadline shortened past that eighth by a busy machine:
 * poll(869) before a retry's 1000 after 131 ms of a 50 ms compute, preempted (two CPU hogs,
 * one attach in 3); and pipeprof's own attach, using the CPU just before the window, did the
 * same to a wait open at the attach (CI, OTHER 26.7%). A pause of 100 ms after 100 ms of work,
 * then a wait of 200 ms, the same call, now reads as that wait.
 *
 * Not told apart: a pause and a wait with a timeout made from one place with the same kind of
 * deadline. CPython's `stop.wait(0.1)` and `q.get(timeout=1)` both reach the futex from one
 * line of Condition.wait, their timespec at one place on the stack: the pause before such a
 * q.get() reads as its wait. (The deadline in the timespec would tell them apart; it is not
 * read.)
 *
 * pp_retry_call(): the call's signature hashed into the upper 32 bits (a collision, about
 * 2^-32, would take one call for another), its timeout in the lower where that is a number of
 * milliseconds (else 0); or 0 where it is no retryable wait. Arguments as the x86-64 syscall
 * ABI passes them (di, si, dx, r10, r8); another architecture holds nothing back, and its
 * timed-out waits stay OTHER as before.
 */
static inline __u64 pp_retry_call(long nr, unsigned long di, unsigned long si, unsigned long dx,
				  unsigned long r10, unsigned long r8)
{
#if defined(__x86_64__) || defined(__TARGET_ARCH_x86)
	__u64 timeout = 0, op = 0, h;
	__u32 ms = 0;

	switch (nr) {
	case 7:		/* poll(fds, nfds, int ms): on no descriptor, a sleep */
		if (!si)
			return 0;
		ms = (__u32)dx;
		break;
	case 271:	/* ppoll(fds, nfds, timespec *, ..): likewise */
		if (!si)
			return 0;
		timeout = dx;
		break;
	case 23:	/* select, pselect6(nfds, .., timeval *): on no descriptor, Python 3.10's
			 * time.sleep */
	case 270:
		if (!di)
			return 0;
		timeout = r8;
		break;
	case 232:	/* epoll_wait, epoll_pwait(epfd, events, max, int ms) */
	case 281:
		ms = (__u32)r10;
		break;
	case 202:	/* futex(uaddr, op, val, timespec *) */
		timeout = r10;
		op = (__u32)si;
		break;
	case 441:	/* epoll_pwait2(epfd, events, max, timespec *) */
	case 449:	/* futex_waitv(waiters, nr, flags, timespec *) */
		timeout = r10;
		break;
	default:
		return 0;
	}
	h = ((__u64)(nr + 1) * 0x9E3779B97F4A7C15ULL) ^ (timeout * 0xC2B2AE3D27D4EB4FULL) ^
	    ((op + 1) * 0x165667B19E3779F9ULL);
	h ^= h >> 32;
	/* A pointer to no deadline waits for ever, as a timeout of -1 ms does. */
	if (nr != 7 && nr != 232 && nr != 281 && !timeout)
		ms = 0xffffffffU;
	return (__u64)((__u32)h ? (__u32)h : 1) << 32 | ms;
#else
	return 0;
#endif
}

/* Whether a wait's pp_retry_call() has a deadline: a timer may end it. */
static inline int pp_call_has_deadline(__u64 call)
{
	return call && (__s32)(__u32)call >= 0;
}

/* Whether two waits' pp_retry_call() are one call: the same signature, and millisecond timeouts
 * within an eighth of the longer plus 1 ms (none: the same). */
static inline __attribute__((always_inline)) int pp_same_call(__u64 a, __u64 b)
{
	__u32 x = (__u32)a, y = (__u32)b, longer, shorter;

	if (!a || a >> 32 != b >> 32)
		return 0;
	if (x == y)
		return 1;
	if ((__s32)x < 0 || (__s32)y < 0)	/* an infinite timeout is no remainder */
		return 0;
	longer = x > y ? x : y;
	shorter = x > y ? y : x;
	return longer - shorter <= longer / 8 + 1;
}

/* A thread's lead before its first held wait unseen (pp_retry_of): it began before the attach. */
#define PP_LEAD_UNSEEN	0xffffU
/* What a lead may fall short of the difference: the timeout's rounding up to milliseconds, and
 * a scheduler tick (4 ms at HZ=250) by which a switch-in placed from the CPU clock (a host that
 * traces none for some tasks) may end the previous wait late. */
#define PP_LEAD_SLACK_MS	5

/* The lead in milliseconds (PP_LEAD_UNSEEN - 1 at most) from a previous wait's end (or the
 * thread's birth) to a wait's start: PP_LEAD_UNSEEN where neither was seen (0), 0 where the
 * start comes first. */
static inline __u16 pp_lead_ms(__u64 prev_end_ns, __u64 start_ns)
{
	__u64 ms;

	if (!prev_end_ns)
		return PP_LEAD_UNSEEN;
	if (start_ns < prev_end_ns)
		return 0;
	ms = (start_ns - prev_end_ns) / 1000000;
	return ms < PP_LEAD_UNSEEN - 1 ? (__u16)ms : PP_LEAD_UNSEEN - 1;
}

/* Whether call retries held, the first held wait: one call (pp_same_call), or milliseconds
 * where held's are fewer by no more than lead_ms (+ PP_LEAD_SLACK_MS), the time the thread had
 * before it (any, with PP_LEAD_UNSEEN): what remained of the retry's deadline. */
static inline __attribute__((always_inline)) int pp_retry_of(__u64 held, __u64 call,
							     __u32 lead_ms)
{
	__u32 x = (__u32)held, y = (__u32)call;

	if (pp_same_call(held, call))
		return 1;
	if (!held || held >> 32 != call >> 32 || (__s32)x < 0 || (__s32)y < 0 || x > y)
		return 0;
	return lead_ms == PP_LEAD_UNSEEN || y - x <= lead_ms + PP_LEAD_SLACK_MS;
}

/* What the end of a wait does to the timed-out waits a thread holds (retry_after_timeouts()). */
enum pp_retry_action {
	PP_RETRY_DROP,	/* they stay OTHER; this wait, if it timed out, is held instead */
	PP_RETRY_NAME,	/* the retry, ended by a waker: their cause is its (pp_retry_names) */
	PP_RETRY_ADD,	/* the retry, or a wait on the way to it, timed out too: held with them */
	PP_RETRY_KEEP,	/* a lock taken back on the way: they stay held */
};

/* holding: waits are held and the thread ran at most pp_retry_run_budget() since; call: this
 * wait's pp_retry_call(); held_call: that of the first wait held, the one a retry makes;
 * held_lead_ms: the thread's lead before it (pp_retry_of); timed_out: an interrupt ended it,
 * named nothing; brief: it ended within PP_ON_THE_WAY_MAX_NS; handoff: a task ended it within
 * PP_LOCK_HANDOFF_MAX_NS. */
static inline int pp_retry_action_of(int holding, int retry, int timed_out, int brief, int handoff)
{
	if (!holding)
		return PP_RETRY_DROP;
	if (timed_out)
		return retry || brief ? PP_RETRY_ADD : PP_RETRY_DROP;
	if (retry)
		return PP_RETRY_NAME;
	return handoff ? PP_RETRY_KEEP : PP_RETRY_DROP;
}

static inline int pp_retry_action(int holding, __u64 call, __u64 held_call, __u32 held_lead_ms,
				  int timed_out, int brief, int handoff)
{
	return pp_retry_action_of(holding, holding && pp_retry_of(held_call, call, held_lead_ms),
				  timed_out, brief, handoff);
}

/*
 * A wait no wakeup was seen to end (PP_CNT_WAITS_UNWOKEN). This guest loses a wakeup now and then
 * beside CPU hogs, with its switch-in (placed from the CPU clock) or without (the switch-in
 * traced, no sched_waking nor sched_wakeup before it: a GIL wait's 5 ms timer, seen with a trace
 * of every event of the thread, 2026-11-29). A timer or a waker may have ended it. While timed-out
 * waits are held (holding: pp_retry_pending) it is taken for one more of them where it is their
 * call (retry_of: pp_retry_of, its call read at the switch-out into it), or lasted no longer than
 * they did (within_held; its call unread: a wait open at the attach). Ending them there, one lost
 * wakeup read a thread's whole chain of Queue.get(timeout=1) waits as OTHER: 83-100% of a window
 * (2 attaches in 80 beside two CPU hogs) where its call went unread; 31.9% in CI (one attach in 3
 * of a group: two 1 s waits) where it did not. One not taken for them is held itself where its
 * call has a deadline (pp_call_has_deadline: a timer may have ended it, as it ends most waits of a
 * chain), for a retry a waker ends to name, as a timed-out wait; left OTHER at once, a lost wakeup
 * of a chain's first wait read it as OTHER however the chain ended.
 */
static inline int pp_unseen_end_held(int holding, int retry_of, int within_held)
{
	return holding && (retry_of || within_held);
}

/* Whether a retry ended with cause names the timed-out waits before it. */
static inline int pp_retry_names(__u32 cause)
{
	return cause == PP_DATA_WAIT || cause == PP_COMM_WAIT || cause == PP_IO_WAIT ||
	       cause == PP_THREAD_WAIT || cause == PP_GPU_WAIT;
}

/*
 * Whether held timed-out waits whose chain's end went unseen read as cause_before, the cause a
 * retry of the same call named last. Unseen: still retried at the close, past the naming wait
 * (the batch came between a timeout and its retry, which then never waited, and the chain ran
 * on into the next batch's: OTHER 20.7% of a thread's Queue.get(timeout=1) chain beside two CPU
 * hogs, one attach in 25); or ended by a wait no wakeup was seen to end, then a run past the
 * retry's budget (held_end_unseen: the waker's wakeup lost, or a timer's that the thread gave up
 * after; the DataLoader deadline loop read OTHER +21-27 pts at every attach with one wakeup in
 * five lost). A chain whose last wait a timer was seen to end, then left, stays OTHER.
 */
static inline int pp_held_named_before(__u64 held_call, __u64 named_call, __u32 cause_before)
{
	return held_call && pp_same_call(named_call, held_call) && pp_retry_names(cause_before);
}

/* Per (wakee, waker): the wakee's off-CPU time that this waker's wakeups ended. */
struct pp_waker_key {
	__u32 wakee;		/* tid */
	__u32 waker;		/* tid; 0 for an interrupt */
	__u32 waker_tgid;
	__u32 ctx;		/* enum pp_wake_ctx */
	__u32 cause;		/* enum pp_state the wait was given */
	__u32 pad;
};

struct pp_waker_val {
	__u64 ns;
	__u64 count;
};

#define PP_MAX_WAKERS	16384

/* warm_grown_maps(): inserts per map per run, under keys (tids) above any pid_max (4M). */
#define PP_WARM_INSERTS		4
#define PP_WARM_KEY_BASE	0xfff00000u

/*
 * tracked_pids: whether each pid is a process pipeprof follows (enum pp_pid_kind, below), one
 * byte per pid (a byte store needs no atomics and races with no neighbour), PP_PIDS_PER_BLOCK
 * pids to an entry.
 * It is what every scheduler event of an unrelated task is turned away by, without a hash
 * lookup; tracked_procs holds the records. Userspace sizes it to pid_max and writes its bytes
 * through a shared mapping of the map.
 */
#define PP_PIDS_PER_BLOCK 64
struct pp_pid_block {
	__u8 live[PP_PIDS_PER_BLOCK];	/* enum pp_pid_kind */
};

/* tracked_procs value */
#define PP_TAKEOVER_CALLS 4	/* a power of 2 */

struct pp_proc {
	__u32 parent_tgid;	/* tracked parent, 0 for a root */
	__u32 is_root;		/* the target itself (-p PID or the launched command) */
	/* The rank of a distributed job this process is or belongs to (its tgid; the highest
	 * process on its branch whose environment names a RANK), 0 for none. Set by userspace,
	 * inherited at fork. */
	__u32 rank_tgid;
	/* Where its threads wait for the GIL: the calls (pp_retry_call) of held waits that a
	 * takeover named (pp_takeover_call_known). */
	__u32 pad;
	__u64 takeover_calls[PP_TAKEOVER_CALLS];
	__u64 fork_ns;		/* 0 when it existed at attach */
	__u64 exit_ns;		/* 0 while alive */
};

/*
 * A tracked_pids byte: 0 for a pid pipeprof does not follow, else what sched_waking needs of the
 * process's record to judge a wakeup it raised (stall model's wake rules), so that the common
 * wakers are judged without a hash lookup: a live process that is neither the root nor a
 * rank's (a DataLoader worker) wakes as a WORKER, the live root as the job's own process.
 * Anything else (a rank, an exited process) has its record read.
 */
enum pp_pid_kind {
	PP_PID_UNTRACKED = 0,
	PP_PID_PLAIN,		/* live, not the root, no rank */
	PP_PID_LOOKUP,		/* read its tracked_procs record */
	PP_PID_ROOT,		/* live root, no rank */
};

static inline __u8 pp_pid_kind(const struct pp_proc *p)
{
	if (p->exit_ns || p->rank_tgid)
		return PP_PID_LOOKUP;
	return p->is_root ? PP_PID_ROOT : PP_PID_PLAIN;
}

/* A wakeup as judge_wakeup() reads it: what it ends a wait as, and who ended it. */
struct pp_wake {
	__u32 cause;		/* enum pp_state the waker context implies */
	__u32 waker_tid;	/* 0 for an interrupt */
	__u32 waker_tgid;
	__u16 depth;		/* relay hops behind cause */
	__u8 ctx;		/* enum pp_wake_ctx */
	__u8 pad;
};

/* PIPEPROF_TEST_DROP_WAKEUPS (tests only): of the last thread of a slot (tid %
 * PP_TEST_WAKE_SLOTS) a wakeup from a task was ignored of, the calls of the waits those ended,
 * a bit each by the call's signature (mod 64), until a wakeup of that call is spared for it. */
#define PP_TEST_WAKE_SLOTS 64
struct pp_dropped_wake {
	__u64 calls;
	__u32 tid;
	__u32 pad;
};

/* threads value: cumulative time per state since the window opened */
struct pp_thread {
	/* First, together, what a switch or a wakeup of the thread reads or writes: each cache
	 * line of it that another CPU wrote last is a miss, and a DataLoader job's wakeups cross
	 * CPUs (spread over the record, they cost its sched_wakeup 9-13% more and its
	 * sched_waking 4-5%, interleaved runs of 6 and 8 rounds). */
	__u32 tgid;
	__u32 phase;		/* enum pp_phase */
	__u64 phase_start_ns;	/* when the current phase (or its unaccounted part) began */
	__u64 oncpu_since_ns;	/* last switch-in (or first sighting) */
	__u64 woken_ns;		/* last sched_waking of this thread */
	__u64 enqueued_ns;	/* last sched_wakeup: on a run queue from here (RUNQ starts) */
	__u64 exec_at_out_ns;	/* the task's own CPU clock (se.sum_exec_runtime) at its last
				 * switch-out, or at the wakeup of a thread first seen asleep
				 * (pp_switch_in_unseen); 0 before either */
	/* A wakeup seen while the record holds a wait another wakeup ended already: the thread
	 * runs, its switch-in untraced, and this one is of the wait it enters next. Taken up
	 * once that switch-in is placed (take_next_wake()); next_woken_ns 0: none. */
	__u64 next_woken_ns;
	__u32 wake_cause;	/* enum pp_state the waker context implies, at woken_ns */
	__u32 waker_tid;	/* who ended the wait at woken_ns: 0 for an interrupt */
	__u32 waker_tgid;
	__u32 wake_ctx;		/* enum pp_wake_ctx at woken_ns */
	__u16 wake_depth;	/* relay hops behind wake_cause */
	/* Small fields packed: warm_threads() builds a record on a stack whose frames the
	 * verifier caps at 512 bytes. */
	__u16 last_wait_depth;	/* relay hops behind last_wait (0: the cause itself) */
	__u32 last_wait;	/* enum pp_state of the last completed off-CPU wait */
	__u64 last_wait_end_ns;	/* when that wait (or a GPU sync call) ended */
	__u64 ran_since_wait_ns; /* on-CPU time since then, up to the last switch-out */
	__u32 gpu_depth;	/* nested blocking calls (GPU syncs, NCCL) in progress */
	__u32 call_state;	/* enum pp_state its time reads: GPU_WAIT, or COMM_WAIT for NCCL */
	__u64 gpu_calls;	/* top-level synchronising calls entered */
	__u64 ns[PP_NR_STATES];
	/* The call of the wait being closed when it waits on an object with a timeout
	 * (pp_retry_call), 0 otherwise or unread; read at the switch-out into it, or for a wait
	 * open at the attach at its wakeup or switch-in where an interrupt woke it or no wakeup
	 * was seen. */
	__u64 wait_call;
	/* OTHER, inside the window, of the timed-out waits the thread retried at once since its
	 * last named wait: the cause of the retry that succeeds is theirs (pp_retry_names). */
	__u64 timed_out_ns;
	__u64 held_call;	/* wait_call of the first timed-out wait held: its retry names
				 * them (the GIL's 5 ms waits are on the way to it) */
	__u16 held_lead_ms;	/* pp_lead_ms() before the first held wait (pp_retry_of) */
	__u8 held_one_call;	/* 1 while every held wait is of held_call */
	__u8 offcpu_iowait;	/* task->in_iowait at the last switch-out */
	__u32 held_end_unseen;	/* 1: the last held wait ended with no wakeup seen */
	/* Its waits' waker of late, summed here and added to the wakers map only when another
	 * waker (or its exit) follows: a thread woken over and over by the same one then pays
	 * no hash lookup and no atomics at each switch-in. Userspace adds it to the map's. */
	struct pp_waker_key waker_key;
	struct pp_waker_val waker_sum;	/* count 0: nothing held */

	__u64 timed_out_from_ns;	/* start of the first held wait */
	/* THREAD_WAIT, inside the window, of held waits at the calls where the process waits for
	 * the GIL (pp_takeover_call_known), however they were named. */
	__u64 gil_ns;
	/* The call of the last held waits a retry named (pp_retry_names), and its cause: held
	 * waits of that call whose end went unseen read as those did (pp_held_named_before). */
	__u64 named_call;
	__u32 named_cause;
	__u32 gpu_api;		/* api id (attach cookie) of the outermost call in progress */
	struct pp_wake next_wake;	/* the wakeup at next_woken_ns */
	__u64 first_ns;		/* start of this thread's life inside the window */
	__u64 exit_ns;		/* 0 while alive */
	__u32 nccl_op;		/* enum pp_nccl_op of the outermost NCCL call in progress */
	__u32 gc_count;		/* Python collections that began inside the window (gc_ns: their
				 * pauses), in what would be a hole */
	__u64 nccl_bytes;	/* ... and its bytes, PP_NCCL_UNSIZED when unknown */
	__u64 nccl_comm_out;	/* communicator being created: where NCCL stores its handle */
	__u64 nccl_comm_ranks;	/* ... and how many ranks it has */
	__u64 gpu_enter_sp;	/* stack pointer at the outermost call's entry */
	__u64 step_enter_sp;	/* likewise for the outermost backward pass */
	__u64 gpu_enter_ns;	/* entry time of the outermost call in progress */
	__u64 last_launch_ns;	/* previous kernel launch (hist launch gaps) */
	__u64 copy_enter_ns;	/* synchronous copy in progress (hist memcpy throughput) */
	__u64 copy_bytes;
	__u8 copy_dir;		/* enum pp_copy_dir */
	__u8 step_depth;	/* nested autograd Engine::execute calls in progress */
	__u16 step_seq;		/* outermost passes begun: pp_step_record.seq */
	__u32 launch_epoch;	/* launch_epoch at the previous launch: no gap spans a pause */
	__u64 last_step_ns;	/* start of the previous backward pass (hist step) */
	__u64 gc_start_ns;	/* Python garbage collection in progress since, 0 when none */
	__u64 gc_ns;		/* its pauses inside the window */
	/* Kernel launches since the window opened, kept here rather than in thread_gpu: the
	 * launch probe is the hot one, and this record is already in hand there. */
	__u64 launches;
	__u64 launch_gap_ns;	/* between consecutive launches with no sync call between */
	__u64 launch_gaps;
	__u64 launch_sync_mark;	/* gpu_calls at the previous launch */
	char comm[16];
};

/*
 * On-CPU between timed-out waits held_ns long and their retry (pp_retry_pending): a relay's
 * 5 ms, or a sixty-fourth of them where that is more. torch's DataLoader runs 3.3-8.2 ms
 * between its 5 s timeout and its retry (bpftrace on the trainer's switches, nothing else
 * attached; its poll alone 0.4 ms after a long timeout): held to 5 ms, its timed-out waits read
 * OTHER in 3 attaches of 12 on a quiet machine (92.6% of the window in CI). Python's 5 ms waits
 * for the GIL, each followed by the switch interval's 5 ms of work, keep 5 ms: a flat 25 ms
 * chained them past the 10 ms a takeover names (pp_takeover_names_held), and one attach in 3
 * of a helper computing in bursts read 6.4% OTHER (gil_bursts, a CI rehearsal).
 */
static inline __u64 pp_retry_run_budget(__u64 held_ns)
{
	__u64 share = held_ns >> 6;

	return share > PP_CHAIN_MAX_RUN_NS ? share : PP_CHAIN_MAX_RUN_NS;
}

/*
 * The length pp_retry_run_budget() takes for a thread's held waits: their time inside the
 * window, or where their call has a deadline at least one whole wait of it, as long as a wait a
 * timer ended lasted. A wait the window's end (or its start) cut held only its part inside, and
 * its budget shrank with it: a poll for the 943 ms left of a 1 s deadline, 541 ms of it in the
 * window, had 8.5 ms to its retry where the loop took 10-13 ms from the timeout's switch-in to
 * the retry (3-5 ms of CPU untraced), and the close gave up on it: 17.8% and 19.9% OTHER at 2
 * attaches of deadline_remainder in 3, quiet.
 */
static inline __u64 pp_held_length_ns(__u64 held_ns, __u64 held_call)
{
	__u64 whole = pp_call_has_deadline(held_call) ? (__u64)(__u32)held_call * 1000000 : 0;

	return held_ns > whole ? held_ns : whole;
}

/* The CPU the thread may spend between its held waits and their retry. */
static inline __u64 pp_held_run_budget(const struct pp_thread *t)
{
	return pp_retry_run_budget(pp_held_length_ns(t->timed_out_ns, t->held_call));
}

/* Timed-out waits are held, and the thread has run at most pp_held_run_budget() since its last
 * wait ended: a retry may yet name them (retry_after_timeouts(), and userspace's reading of a
 * record the programs may not have closed yet). */
static inline int pp_retry_pending(const struct pp_thread *t)
{
	return t->timed_out_ns && t->ran_since_wait_ns <= pp_held_run_budget(t);
}

/*
 * Python's forced GIL switch. A thread that wants the GIL waits on its condition for the switch
 * interval (5 ms) and, when the timer ends that wait, asks the holder to drop it; the holder
 * drops it and sleeps until the thread has taken it, and the thread, on taking it, wakes the
 * holder. No waker names the wait and no retry follows it: the thread runs. Measured on a
 * trainer beside a Python thread that never sleeps (each holding the GIL half the time): 85%
 * of its 5 ms waits were followed within 8-256 us of CPU by its wakeup of the holder, which had
 * been out of any wait through them and went into one after they ended. Unnamed, the trainer's
 * 50% of GIL waits read OTHER and THREAD_WAIT only 8-18%, a different share at each attach.
 *
 * So held waits that are short (PP_ON_THE_WAY_MAX_NS in all: a pause of 100 ms before a q.get()
 * is no GIL wait, whatever the GIL adds to it) are named THREAD_WAIT by the thread this one
 * wakes within PP_TAKEOVER_MAX_RUN_NS of CPU after them, where that thread went into a wait
 * after they ended and into none while they lasted: it held what this one waited for, and gave
 * it up because this one asked. held_end_ns: when they ended, at the earliest (their start and
 * length: the lock handed over on the way to the GIL, pp_retry_action's KEEP, may end later, and
 * the holder sleeps before that).
 */
#define PP_TAKEOVER_MAX_RUN_NS	(1ULL * 1000000)

static inline int pp_takeover_names_held(__u64 held_ns, __u64 held_from_ns, __u64 held_end_ns,
					 __u64 ran_ns, __u32 wakee_phase, __u64 wakee_slept_ns,
					 __u64 wakee_last_wait_end_ns)
{
	if (!held_ns || held_ns > PP_ON_THE_WAY_MAX_NS || ran_ns > PP_TAKEOVER_MAX_RUN_NS ||
	    wakee_last_wait_end_ns > held_from_ns)
		return 0;
	/* Woken on a CPU: it is going to sleep now, the wakeup racing its switch-out (4 in 10
	 * of the handovers above). */
	if (wakee_phase == PP_PHASE_ONCPU || wakee_phase == PP_PHASE_RUNNABLE)
		return 1;
	return wakee_phase == PP_PHASE_OFFCPU && wakee_slept_ns >= held_end_ns;
}

/*
 * The handover is not always seen: the waiter may take the GIL before the holder sleeps (and
 * wake no one), or the holder may have waited briefly while the waiter did (on the GIL's
 * mutex); a takeover named 40-75% of the trainer's GIL waits above, a different share at each
 * attach, the rest read OTHER after the waiter ran on. So the process keeps the calls (syscall,
 * operation, the timespec's place on the stack) of the waits a takeover named, and short held
 * waits of one of those calls that end with no takeover seen are named THREAD_WAIT too: the
 * same call is the same wait for the GIL. Only held waits of one call teach theirs: a pause
 * of 2 ms before a GIL wait is named with it, and its call is no wait for the GIL. Read and
 * written without atomics: two threads learning at once lose one call, learnt again at its
 * next takeover.
 */
static inline __attribute__((always_inline)) int pp_takeover_call_known(const __u64 *calls,
									   __u64 call)
{
	if (!call)
		return 0;
	for (int k = 0; k < PP_TAKEOVER_CALLS; k++)
		if (pp_same_call(calls[k], call))
			return 1;
	return 0;
}

/* A call not known yet (pp_takeover_call_known) into the first free slot, else over the slot its
 * signature hashes to. */
static inline void pp_takeover_call_store(__u64 *calls, __u64 call)
{
	for (int k = 0; k < PP_TAKEOVER_CALLS; k++)
		if (!calls[k]) {
			calls[k] = call;
			return;
		}
	calls[(call >> 32) & (PP_TAKEOVER_CALLS - 1)] = call;
}

static inline void pp_takeover_call_learn(__u64 *calls, __u64 call)
{
	if (call && !pp_takeover_call_known(calls, call))
		pp_takeover_call_store(calls, call);
}

/* The one log2 histogram slot function, compiled into the BPF programs and into userspace
 * (and its unit tests) alike. BCC's layout: slot k holds [2^k, 2^(k+1)), slot 0 holds 0 and 1.
 * A bounded loop, not __builtin_clzll: the verifier needs a constant trip count. */
static inline __u32 pp_log2_u64(__u64 v)
{
	__u64 r = 0, bit;

	/* Without branches: each bit of the result is 1 when the upper half of what is left is
	 * non-zero, ((v >> w) + 2^w - 1) >> w, exact while v < 2^(2w). A loop of ifs here gave
	 * the verifier 2^6 paths to walk in every program that fills a histogram. */
#define PP_LOG2_STEP(w)								\
	bit = (((v >> (w)) + ((1ull << (w)) - 1)) >> (w)) * (w);		\
	v >>= bit;								\
	r |= bit;
	PP_LOG2_STEP(32) PP_LOG2_STEP(16) PP_LOG2_STEP(8)
	PP_LOG2_STEP(4) PP_LOG2_STEP(2) PP_LOG2_STEP(1)
#undef PP_LOG2_STEP
	return (__u32)r;
}

/* The state of a thread's time inside its outermost blocking call (pp_thread.call_state):
 * GPU_WAIT unless it is an NCCL call's COMM_WAIT. */
static inline __u32 pp_call_state(__u32 call_state)
{
	return call_state == PP_COMM_WAIT ? PP_COMM_WAIT : PP_GPU_WAIT;
}

/* A thread's first record, whichever side writes it (fork, first sighting, seeding). */
static inline void pp_thread_init(struct pp_thread *t, __u32 tgid, __u32 phase, __u64 start_ns)
{
	t->tgid = tgid;
	t->phase = phase;
	t->first_ns = start_ns;
	t->phase_start_ns = start_ns;
	t->oncpu_since_ns = start_ns;
	t->last_wait = PP_OTHER;
	t->wake_cause = PP_OTHER;
}

/*
 * When a thread got the CPU it was not seen to get. Some switch-ins emit no sched_switch at all
 * (seen on a Firecracker guest: no switch-out of the guest agent's threads is ever traced, so
 * the task it hands the CPU back to reappears unannounced, ftrace and BPF alike). The thread
 * ran for what its own CPU clock gained since its last switch-out, and in one stretch ending
 * at this switch-out, since each of its switch-outs is seen; the rest of the gap was the wait
 * it was in. 0: the clock cannot place it (no switch-out of it seen yet, nor a wakeup of it
 * first seen asleep: pp_switch_in_unseen).
 */
static inline __u64 pp_missed_switch_in_ns(__u64 since_ns, __u64 now_ns, __u64 exec_at_out_ns,
					   __u64 exec_now_ns)
{
	__u64 ran;

	if (!exec_at_out_ns || exec_now_ns < exec_at_out_ns || now_ns < since_ns)
		return 0;
	ran = exec_now_ns - exec_at_out_ns;
	/* The clock leaves out stolen time, so it never overshoots the gap on its own; clamp
	 * anyway against a switch-out seen late. */
	return ran >= now_ns - since_ns ? since_ns : now_ns - ran;
}

/* Whether the thread's record holds a wait still open (asleep, as far as the events show) with
 * a CPU clock to place its end by: seen going to sleep, or first seen asleep and since woken. */
static inline int pp_asleep_with_clock(__u32 phase, __u64 exec_at_out_ns)
{
	return phase == PP_PHASE_OFFCPU || (phase == PP_PHASE_UNKNOWN && exec_at_out_ns);
}

/*
 * Whether a wakeup is of a wait after the one the thread's record holds open. A task is woken
 * once per sleep: the wakeup makes it runnable, and only the task itself goes back to sleep.
 * A second wakeup while the record holds a wait the first one ended means the thread has run
 * since, its switch-in untraced (pp_missed_switch_in_ns), and is entering its next wait; it is
 * put aside until that switch-in is placed (pp_next_wake_due). Taken as the end of the wait
 * held open, it gave a timer's wakeup a waker: Python's GIL, signalled to a thread as it waited
 * on it again, dropped the Queue.get(timeout=1) waits held before it to OTHER (25-54% of a
 * window in one attach in 15, one switch-in in three untraced).
 */
static inline int pp_wake_is_next_waits(__u32 phase, __u64 exec_at_out_ns, __u64 woken_ns,
					__u64 phase_start_ns, __u64 oncpu_since_ns, __u64 enqueued_ns)
{
	if (!pp_asleep_with_clock(phase, exec_at_out_ns))
		return 0;
	/* Or its wakeup raced the switch-out (before it, yet after the thread's last switch-in)
	 * and queued the thread after it: what a lock's holder that unlocks at once does. */
	return woken_ns > phase_start_ns ||
	       (woken_ns >= oncpu_since_ns && enqueued_ns > phase_start_ns);
}

/*
 * Whether a thread found waking another runs with its switch-in untraced, to be placed there
 * (judge_wakeup()): its record holds a wait, and a wakeup since it went into that wait says it
 * may run. One not woken since cannot be running; a wakeup in its context then comes from its
 * own way off the CPU, after the switch-out was traced, and a switch-in placed there would read
 * its whole sleep as RUNNING. Runnable (preempted), it is left to its next switch-out.
 */
static inline int pp_waker_switch_in_unseen(__u32 phase, __u64 exec_at_out_ns, __u64 woken_ns,
					    __u64 phase_start_ns)
{
	return pp_asleep_with_clock(phase, exec_at_out_ns) && woken_ns > phase_start_ns;
}

/* Whether the wakeup put aside at next_woken_ns is the record's now: once the wait held open is
 * closed (closed), or before the close of a wait the record's wakeup predates, its last
 * switch-in placed after it (the wakeup put aside raced the switch-out that placed it). */
static inline int pp_next_wake_due(__u64 next_woken_ns, __u64 woken_ns, __u64 oncpu_since_ns,
				   int closed)
{
	return next_woken_ns > woken_ns && (closed || woken_ns < oncpu_since_ns);
}

/*
 * Whether a thread found on a CPU got it without a switch-in traced, and its CPU clock can place
 * that switch-in (pp_missed_switch_in_ns). A thread seen leaving a CPU, runnable or asleep,
 * must have got one. One first seen asleep (PP_PHASE_UNKNOWN) has no switch-out to count its
 * CPU time from; its wakeup gives one (or, for a main thread asleep then, the attach:
 * seed_threads()), and without that it may have been running since the attach. Miss it, and a trainer woken after the window closed, its switch-in untraced, read
 * its whole window as RUNNING: a confident CPU-BOUND for a job starved of data.
 */
static inline int pp_switch_in_unseen(__u32 phase, __u64 exec_at_out_ns)
{
	/* pp_asleep_with_clock() or runnable, spelled out: the verifier walks ~600 instructions
	 * more over the scheduler and probe programs when clang compiles it as that call. */
	return phase == PP_PHASE_RUNNABLE || phase == PP_PHASE_OFFCPU ||
	       (phase == PP_PHASE_UNKNOWN && exec_at_out_ns);
}

/* Global counters; index into the counters array map. */
enum pp_counter {
	PP_CNT_SCHED_EVENTS = 0,	/* every sched_switch seen (self-check) */
	PP_CNT_THREADS_FULL,		/* thread could not be added: map full */
	PP_CNT_PROCS_FULL,		/* process could not be added: map full */
	PP_CNT_RQ_FULL,			/* block request not tracked: map full */
	PP_CNT_UPROBE_HITS,		/* any GPU sync or NCCL call entry for a tracked task */
	PP_CNT_URETPROBE_ORPHANS,	/* return without a matching entry */
	PP_CNT_FORKS,			/* tracked processes forked while tracing */
	PP_CNT_PROC_EXITS,		/* tracked processes exited while tracing */
	PP_CNT_SELFTEST_HITS,		/* uprobe self-test hits on pipeprof itself */
	PP_CNT_GPU_DEPTH_OVERFLOW,	/* nesting deeper than PP_MAX_GPU_DEPTH */
	PP_CNT_HIST_FULL,		/* hist samples dropped: histogram map full */
	PP_CNT_WAKERS_FULL,		/* waits whose waker was not recorded: map full */
	PP_CNT_PCOUNT_OK,		/* start-up check: preempt count read right in a known context */
	PP_CNT_PCOUNT_BAD,		/* ... and read wrong: interrupt context falls back */
	PP_CNT_UNRETURNED_CALLS,	/* probed calls left without a return (longjmp, attach) */
	PP_CNT_WAITS_UNWOKEN,		/* off-CPU waits that ended with no wakeup seen: OTHER */
	PP_CNT_SWITCH_IN_MISSED,	/* a thread left a CPU it was not seen to get */
	PP_CNT_NOTES_LOST,		/* library notes dropped: ring buffer full (a full scan follows) */
	PP_CNT_NOTES,			/* library notes sent: forks, execs and loader events */
	PP_CNT_SAMPLES,			/* CPU samples of the job's threads sent (pystack.bpf.c) */
	PP_CNT_SAMPLES_LOST,		/* ... dropped: sample ring buffer full */
	PP_CNT_PY_THREAD_UNFOUND,	/* samples of an interpreter's thread with no thread state */
	PP_CNT_WAIT_STACKS,		/* the trainer's waits sent with their Python stacks */
	PP_CNT_WAIT_STACKS_LOST,	/* ... dropped: ring buffer full */
	PP_CNT_STEP_RECORDS_LOST,	/* step boundaries dropped: ring buffer full */
	PP_CNT_SWITCH_IN_UNPLACED,	/* a missed switch-in its CPU clock could not place: time lost */
	PP_CNT_PINNED_FULL,		/* pinned host regions not tracked: map full */
	PP_CNT_THREAD_GPU_FULL,		/* threads whose syncs and copies went uncounted: map full */
	PP_CNT_DEV_ALLOCS_FULL,		/* device allocations not tracked: map full */
	PP_CNT_EPISODES,		/* `record`: state episodes sent */
	PP_CNT_EPISODES_DROPPED,	/* ... dropped: over the rate cap or ring buffer full */
	PP_CNT_LAUNCH_HITS,		/* launch probe hits, any process (the sampler's budget) */
	PP_CNT_PY_FRAMES,		/* Python frames walked (samples and wait stacks) */
	PP_CNT_PY_FRAMES_WINDOWED,	/* ... of them read from their data stack's window (3.11+) */
	PP_NR_COUNTERS,
};

/* Why userspace should look at a tracked process's mappings now, rather than on a timer: it
 * was forked (the parent's probes do not cover it), it exec'd, or its dynamic loader just
 * changed its link map (dlopen/dlclose: glibc's and musl's _dl_debug_state). */
enum pp_note_kind {
	PP_NOTE_FORK = 1,
	PP_NOTE_EXEC,
	PP_NOTE_LOADER,
};

struct pp_note {
	__u32 tgid;
	__u32 kind;	/* enum pp_note_kind */
};

/* Per GPU API (attach cookie = api id): calls and a log2 latency histogram in usecs. */
struct pp_gpu_api_stats {
	__u64 calls;
	__u64 total_ns;
	__u64 max_ns;		/* the longest call: bounds percentiles read off log2 slots */
	__u64 slots[PP_HIST_SLOTS];
};

/*
 * NCCL (nccl.bpf.c): the APIs probed, in the second byte of the attach cookie (PP_COOKIE_DIR's
 * place). The collectives and group calls, up to PP_NR_NCCL_CALLS, index nccl_stats; the rest
 * only learn communicator sizes (an AllGather's bytes received are sendcount x ranks).
 */
enum pp_nccl_op {
	PP_NCCL_ALL_REDUCE = 0,	/* (send, recv, count, type, op, comm, stream) */
	PP_NCCL_ALL_GATHER,	/* (send, recv, sendcount, type, comm, stream) */
	PP_NCCL_REDUCE_SCATTER,	/* (send, recv, recvcount, type, op, comm, stream) */
	PP_NCCL_BROADCAST,	/* (send, recv, count, type, root, comm, stream) */
	PP_NCCL_REDUCE,		/* (send, recv, count, type, op, root, comm, stream) */
	PP_NCCL_SEND,		/* (send, count, type, peer, comm, stream) */
	PP_NCCL_RECV,		/* (recv, count, type, peer, comm, stream) */
	PP_NCCL_GROUP_START,	/* () */
	PP_NCCL_GROUP_END,	/* (): where a group's collectives run */
	PP_NR_NCCL_CALLS,
	PP_NCCL_COMM_INIT = PP_NR_NCCL_CALLS,	/* (comm *out, nranks, ...) */
	PP_NCCL_COMM_INIT_ALL,	/* (comm *out[ndev], ndev, devlist) */
	PP_NCCL_COMM_FREE,	/* (comm): destroy, abort */
};

/* pp_thread.nccl_bytes: an AllGather on a communicator whose size pipeprof never saw (made
 * before the attach, or by ncclCommSplit). */
#define PP_NCCL_UNSIZED		(~0ULL)
#define PP_NCCL_MAX_COMMS	4096

/* nccl_stats value, per enum pp_nccl_op below PP_NR_NCCL_CALLS. */
struct pp_nccl_stats {
	__u64 calls;
	__u64 bytes;		/* count x type size, for AllGather x ranks: the bytes received */
	__u64 unsized;		/* calls whose bytes are unknown (PP_NCCL_UNSIZED), not in bytes */
	__u64 total_ns;		/* time inside the call, as the outermost probed call */
	__u64 max_ns;
	__u64 slots[PP_HIST_SLOTS];	/* log2 usecs */
};

/* nccl_comms key: a communicator handle in a process; the value is its number of ranks. */
struct pp_nccl_comm_key {
	__u32 tgid;
	__u32 pad;
	__u64 comm;
};

/* Block device latency of requests issued by the tracked set, log2 usecs. */
struct pp_io_stats {
	__u64 count;
	__u64 total_ns;
	__u64 slots[PP_HIST_SLOTS];
};

/* `pipeprof hist`: bit k of the hist_kinds rodata mask turns on histogram k. */
enum pp_hist_kind {
	PP_HK_OFFCPU = 0,	/* sub: the episode's cause, enum pp_state; switch-out to wakeup */
	PP_HK_RUNQ,		/* wakeup or preemption to switch-in */
	PP_HK_IO,		/* sub: the disk, major << 20 | minor; issue to completion */
	PP_HK_GPU_SYNC,		/* sub: api id */
	PP_HK_LAUNCH,		/* sub: api id; count: launches, slots: gap since the thread's last */
	PP_HK_COPY_BYTES,	/* sub: enum pp_copy_dir; every copy */
	PP_HK_COPY_RATE,	/* sub: enum pp_copy_dir; synchronous copies, MB/s; sum bytes, aux ns */
	PP_HK_BATCH_WAIT,	/* DATA_WAIT episodes of the job's own threads; keyed by tid */
	PP_HK_STEP,		/* time between backward passes (autograd Engine::execute); by tid */
	PP_NR_HIST_KINDS,
};

/* What a histogram is kept per, beyond kind and sub (hist_keying rodata). */
enum pp_hist_keying {
	PP_HKEY_NONE = 0,
	PP_HKEY_THREAD,
	PP_HKEY_PROCESS,
};

enum pp_copy_dir {
	PP_COPY_HTOH = 0,
	PP_COPY_HTOD,
	PP_COPY_DTOH,
	PP_COPY_DTOD,
	PP_COPY_DEFAULT,	/* cudaMemcpyDefault / cuMemcpy: unified addressing decides */
	PP_NR_COPY_DIRS,
};

/* Histograms per interval, by default: the map holds two intervals' (epochs). */
#define PP_MAX_HISTS	8192

struct pp_hist_key {
	__u32 kind;		/* enum pp_hist_kind */
	__u32 sub;
	__u32 id;		/* tid or tgid as keyed, else 0 */
	__u32 epoch;		/* hist_epoch when recorded: 0 or 1 */
};

/*
 * The switch-in's histograms (off-CPU by cause, run queue) when none is kept per thread or
 * process live in a per-CPU array instead: entry epoch * PP_SWITCH_HISTS + the off-CPU cause
 * (enum pp_state), or + PP_SWITCH_HIST_RUNQ for the run queue. Userspace sums the CPUs.
 */
#define PP_SWITCH_HIST_RUNQ	PP_NR_STATES
#define PP_SWITCH_HISTS		(PP_NR_STATES + 1)

/* Time samples are slotted in rodata's hist_time_div units (usecs or msecs); sum stays in ns. */
struct pp_hist {
	__u64 count;		/* events */
	__u64 sum;		/* ns for time kinds, bytes for copies */
	__u64 aux;		/* COPY_RATE: ns spent in the copies */
	__u64 slots[PP_HIST_SLOTS];
};

/*
 * Attach cookies of the launch and copy probes: the api id in the low byte, and for copies
 * where the byte count and direction are: PP_COPY_DIR_FROM_ARG for the runtime's
 * (dst, src, count, kind) layout, else a fixed enum pp_copy_dir with the count in arg 3.
 */
#define PP_COOKIE_API(c)	((c) & 0xff)
#define PP_COOKIE_DIR(c)	(((c) >> 8) & 0xff)
#define PP_COPY_DIR_FROM_ARG	0xff
#define PP_COOKIE(api, dir)	((api) | (dir) << 8)
/* A launch probe on the driver: a call from inside the runtime is the runtime's own launch,
 * already counted at its entry. */
#define PP_COOKIE_DRIVER	(1u << 16)
/* An NCCL call, on the GPU syncs' programs (gpu.bpf.c): its API and op as PP_COOKIE's. */
#define PP_COOKIE_NCCL		(1u << 17)
/* The training step's probe (autograd's backward pass), on the same programs. */
#define PP_COOKIE_STEP		(1u << 18)

/*
 * CPU samples (pystack.bpf.c): a perf event per CPU at a low frequency; a sample of a thread of
 * the job goes to userspace with the user-mode instruction pointer and, in a process whose
 * interpreter pipeprof can walk, the code objects of its Python frames, innermost first.
 * Userspace resolves them (qualified name, file, first line) through the target's memory.
 */
#define PP_PY_MAX_DEPTH		64	/* frames kept per sample; a power of two */
#define PP_PY_MAX_THREADS	128	/* thread states walked to find the sampled thread's */
#define PP_PY_SPAN_MAX		128	/* bytes of a frame read at once (pystack.bpf.c) */
/* Bytes of the top of a thread's data stack read at once (3.11+): the innermost frames'
 * fields come from that one read; a power of two. */
#define PP_PY_STACK_WINDOW	8192
#define PP_PY_CHUNK_DATA	0x18	/* _PyStackChunk: previous, size, top, then its frames */
#define PP_PY_NONE		0xffff	/* a layout field this version does not have */
/* User-mode addresses kept per sample: the leaf, then return addresses as deep as the frame
 * pointer chain goes (userspace keeps those that follow a call instruction). */
#define PP_USTACK_MAX_DEPTH	32

/* Where an interpreter version keeps what the walk reads, as offsets into its own structs
 * (user/pystack.c holds the table, with the source of each). */
struct pp_py_layout {
	__u16 runtime_interp;		/* _PyRuntimeState: the main interpreter */
	__u16 interp_threads;		/* PyInterpreterState: its newest thread state */
	__u16 tstate_next;		/* PyThreadState: the next (older) one */
	__u16 tstate_thread_id;		/* PyThreadState: pthread_self() of its thread */
	__u16 tstate_frame;		/* PyThreadState: the frame, or the _PyCFrame holding it */
	__u16 cframe_frame;		/* _PyCFrame: the current frame; PP_PY_NONE without one */
	__u16 frame_code;		/* frame: its code object */
	__u16 frame_previous;		/* frame: its caller's */
	__u16 frame_owner;		/* frame: who owns it (a byte); PP_PY_NONE when absent */
	__u16 owner_cstack;		/* owner of the C-stack shim frames to skip; PP_PY_NONE */
	/* PyThreadState: datastack_chunk, then datastack_top (3.11+: the frames' own stack, a
	 * chunk at a time); PP_PY_NONE where frames are heap objects (3.10). */
	__u16 tstate_datastack;
	__u16 pad;
};

/* The bytes of a frame that hold its code, previous and owner fields, read in one go by the
 * walker (pystack.bpf.c): sets *from to the first, returns how many (at most PP_PY_SPAN_MAX for
 * a layout the walker can use). */
static inline __u32 pp_py_frame_span(const struct pp_py_layout *l, __u32 *from)
{
	__u32 lo = l->frame_code < l->frame_previous ? l->frame_code : l->frame_previous;
	__u32 hi = (l->frame_code > l->frame_previous ? l->frame_code : l->frame_previous) + 8;

	if (l->frame_owner != PP_PY_NONE) {
		if (l->frame_owner < lo)
			lo = l->frame_owner;
		if (l->frame_owner + 1u > hi)
			hi = l->frame_owner + 1u;
	}
	*from = lo;
	return hi - lo;
}

/* py_procs value: a process of the job whose interpreter can be walked. */
struct pp_py_proc {
	__u64 runtime;			/* address of _PyRuntime in the process */
	struct pp_py_layout layout;
};

enum pp_sample_py {
	PP_SAMPLE_NO_PY = 0,		/* no interpreter walked in this process */
	PP_SAMPLE_PY_OK,		/* frames walked (depth may be 0: between frames) */
	PP_SAMPLE_PY_NO_THREAD,		/* a thread the interpreter has no state for */
};

/* The trainer's Python stack as a wait began, and its waker's as it ended the wait (the
 * waker's own stack at the wakeup): one record per wait, sent as the trainer gets a CPU again. */
/* Whose waits are sent with their Python stacks (pystack.bpf.c). */
enum pp_wait_stack_scope {
	PP_WAIT_STACKS_TID = 0,		/* wait_stack_tid's only (the trainer's) */
	PP_WAIT_STACKS_ROOT,		/* every thread of the root process */
	PP_WAIT_STACKS_DESCENDANTS,	/* every thread of the other processes (the workers) */
};

struct pp_wait_stack {
	__u32 tid, tgid;		/* the thread that waited */
	__u32 cause;			/* enum pp_state the wait was given */
	__u32 begun;			/* a wait is open (the record is being filled) */
	__u64 wait_ns;			/* off-CPU until the wakeup */
	__u32 depth, truncated;
	__u32 waker_tid, waker_tgid;
	__u32 waker_depth;
	__u32 unused;
	/* The thread's frames, then from frames[depth] its waker's. What goes out is the header
	 * and the frames used (PP_WAIT_RECORD_BYTES): ~230 bytes for a wait ~13 frames deep
	 * that a thread ~10 deep ended, rather than all 1,072. */
	__u64 frames[2 * PP_PY_MAX_DEPTH];
};
#define PP_WAIT_RECORD_HEADER	__builtin_offsetof(struct pp_wait_stack, frames)
#define PP_WAIT_RECORD_BYTES(depth, waker_depth) \
	(PP_WAIT_RECORD_HEADER + ((depth) + (waker_depth)) * sizeof(__u64))

struct pp_sample {
	__u32 tid, tgid;
	__u32 kernel;			/* the sample hit kernel mode */
	__u32 ustack_depth;		/* addresses in ustack[] */
	__u32 py;			/* enum pp_sample_py */
	__u32 depth;			/* code objects in code[] */
	__u32 truncated;		/* more frames than PP_PY_MAX_DEPTH */
	__u64 code[PP_PY_MAX_DEPTH];
	/* Where user mode was (the leaf, or the syscall's caller), then its callers. */
	__u64 ustack[PP_USTACK_MAX_DEPTH];
};

/*
 * The report's per-step GPU API figures: a thread's counts since the window opened, copied
 * into each step record, so a step's are the difference of two records. Syncs by the api id of
 * the outermost call (a runtime call that waits in its driver twin is one); copies by
 * direction, and those from or to host memory the job pinned (cudaHostAlloc, cudaMallocHost,
 * cudaHostRegister and the driver's twins, tracked while tracing) counted again as pinned.
 */
#define PP_MAX_SYNC_APIS	32	/* a power of two: indexes are masked */
struct pp_copy_counts {
	__u64 calls[PP_NR_COPY_DIRS];
	__u64 bytes[PP_NR_COPY_DIRS];
	__u64 pinned_calls[PP_NR_COPY_DIRS];
	__u64 pinned_bytes[PP_NR_COPY_DIRS];
};

/* A thread's device allocations and frees (devmem.bpf.c), since the attach. Frees count
 * those of memory seen allocated; free_bytes is their size. */
struct pp_dev_counts {
	__u64 allocs, frees;
	__u64 alloc_bytes, free_bytes;
};

/* A thread's NCCL calls (nccl.bpf.c) since the attach: per enum pp_nccl_op, and their bytes
 * where known. */
struct pp_nccl_counts {
	__u32 calls[PP_NR_NCCL_CALLS];
	__u32 pad;
	__u64 bytes;
};

/* thread_gpu value: what a thread's sync, copy and allocation probes counted. */
struct pp_thread_gpu {
	struct pp_copy_counts copies;
	__u32 sync_calls[PP_MAX_SYNC_APIS];
	struct pp_nccl_counts nccl;
	__u64 alloc_out;	/* host allocation in progress: where it will store the pointer */
	__u64 alloc_bytes;
	struct pp_dev_counts dev;
	/* Device allocation in progress: where it will store the pointer, and its size, or for
	 * a pitched one where it will store the pitch and the rows (the size is their product). */
	__u64 dev_out;
	__u64 dev_bytes;
	__u64 dev_pitch_out;
};

/*
 * Device memory (devmem.bpf.c): every allocation seen since the attach, (tgid, device pointer)
 * -> bytes, until its free; and per process what is outstanding, so growth across steps can be
 * read from the step records. Memory allocated before the attach is not seen: its frees count
 * apart (frees_unseen), and outstanding is relative to the attach, so it can go below zero.
 */
struct pp_dev_alloc_key {
	__u32 tgid;
	__u32 pad;
	__u64 ptr;
};
#define PP_MAX_DEV_ALLOCS	16384

/* dev_mem value, per process. */
struct pp_dev_mem {
	__s64 outstanding;	/* allocated since the attach, less what of it was freed */
	__s64 window_start;	/* outstanding as the window opened (set at its first event) */
	__s64 window_peak;	/* the most outstanding at any time in the window */
	__u32 window_seen;	/* window_start is set */
	__u32 pad;
	struct pp_dev_counts window;	/* allocations and frees in the window */
	__u64 frees_unseen;	/* frees in the window of memory not seen allocated */
};

/* pinned_regions key: a range of host memory a process pinned; the value is its end. */
struct pp_pinned_key {
	__u32 tgid;
	__u32 pad;
	__u64 start;
};
#define PP_MAX_PINNED_REGIONS	1024

/* runtime_text value: the span of a process's mappings of its CUDA runtime. */
struct pp_text_range {
	__u64 start, end;
};

/* A training step boundary (the start of an outermost autograd backward pass), with the
 * thread's state time so far: userspace takes each step's breakdown from two of them. */
/* What marked a step boundary (pp_step_record.source). */
enum pp_step_source {
	PP_STEP_FROM_PROBE = 0,		/* the autograd engine's backward pass, or --step-symbol */
	PP_STEP_FROM_DATA_WAIT,		/* the end of a wait of the trainer's for its next batch */
};

struct pp_step_record {
	__u32 tid, tgid;
	__u64 ts;
	__u32 phase;			/* enum pp_phase at ts */
	__u32 gpu_depth;
	__u64 phase_start_ns;		/* the open phase's time is ts - phase_start_ns */
	__u64 ns[PP_NR_STATES];		/* closed state time */
	/* GPU API counts so far (pp_thread, pp_thread_gpu) */
	__u64 launches, launch_gap_ns, launch_gaps;
	struct pp_copy_counts copies;
	__u32 sync_calls[PP_MAX_SYNC_APIS];
	struct pp_nccl_counts nccl;
	struct pp_dev_counts dev;	/* the thread's device allocations and frees */
	__s64 dev_outstanding;		/* its process's outstanding device bytes */
	__u32 source;			/* enum pp_step_source */
	__u32 call_state;		/* pp_thread's, for the open phase when gpu_depth */
	__u32 launch_epoch;		/* launch_epoch at ts: odd while launches are probed */
	/* PP_STEP_FROM_PROBE: the thread's outermost passes so far, modulo 2^16, counted
	 * whether or not their records fitted the ring buffer; so a gap between two records
	 * says how many steps lie between them. 0 for other sources. */
	__u32 seq;
};

/*
 * `pipeprof record`: one record per state episode a thread closed, [start_ns, end_ns) in one
 * state of the stall model, exactly the interval add_state() adds to the thread's total. An
 * off-CPU wait whose cause a task's wakeup decided names that waker and when it woke the
 * thread (the trace's flow from the waker's slice to the wait's end).
 */
struct pp_episode {
	__u32 tid, tgid;
	__u32 state;			/* enum pp_state */
	__u32 waker_tid;		/* 0: no task's wakeup ended it */
	__u64 start_ns, end_ns;
	__u64 wake_ns;			/* the waker's sched_waking, when waker_tid */
	__u32 api;			/* GPU_WAIT: the synchronising call's id + 1; else 0 */
	__u32 pad;
};

/* pp_episode.state of a kernel launch (`record`): no state, an instant (start_ns == end_ns),
 * api the launch API's id + 1. Launches share the episodes' ring buffer and rate cap. */
#define PP_EP_LAUNCH	0xffu

/* The rate cap: episodes each CPU may send per PP_EPISODE_SLOT_NS; userspace sets the count
 * (record_cap rodata) from the job-wide cap and the number of CPUs. */
#define PP_EPISODE_SLOT_NS	(10ULL * 1000000)

#endif /* PIPEPROF_H */

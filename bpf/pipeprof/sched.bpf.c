// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Per-thread state accounting for a training job's process tree (../shared/stall-model.md).
 *
 * Each tracked thread carries a phase (on-CPU, runnable, off-CPU) and the time it entered it.
 * Time is added to a state only when the thread leaves a phase, so every nanosecond of a
 * thread's life in the window lands in exactly one state. An off-CPU episode's cause is known
 * only at its wakeup, so it is accounted at switch-in from what the waker looked like.
 */
#include "pipeprof.bpf.h"

/*
 * Global, so the verifier checks the switch-in's accounting once per program rather than once
 * per call site (its cost at attach), and the other files' programs share it: a switch-in no
 * sched_switch showed is placed by a program that saw the thread on a CPU (seen_on_cpu).
 * switch_in_rec() (record.bpf.c) is the same for `record`, which also sends the episodes: in
 * a file of its own, so that clang compiles this one exactly as it would without it.
 */
__noinline int switch_in(struct pp_thread *t, __u32 tid, __u64 now)
{
	return do_switch_in(t, tid, now, false);
}

/* Global: its cases walked once per program. Inlined at the switch-out into a wait, each
 * case's answer split the paths after it (+1,266 instructions walked in on_sched_switch). */
__noinline __u64 retry_call_of(const struct pp_syscall_regs *r)
{
	if (!r)
		return 0;
	return pp_retry_call(r->nr, r->di, r->si, r->dx, r->r10, r->r8);
}

/* What the thread holds of its waker (pp_thread.waker_sum) into the wakers map. Global, as
 * record_waker(): verified once per program rather than on each path to them. */
__noinline int flush_waker(struct pp_thread *t)
{
	struct pp_waker_key key;
	struct pp_waker_val *v, zero = {};

	if (!t || !t->waker_sum.count)
		return 0;
	key = t->waker_key;
	v = map_lookup_or_init(&wakers, &key, &zero, PP_CNT_WAKERS_FULL);
	if (v) {
		__sync_fetch_and_add(&v->ns, t->waker_sum.ns);
		__sync_fetch_and_add(&v->count, t->waker_sum.count);
	} else {
		/* The counter is of waits, and that counted one. */
		__u32 c = PP_CNT_WAKERS_FULL;
		__u64 *lost = bpf_map_lookup_elem(&counters, &c);

		if (lost)
			*lost += t->waker_sum.count - 1;
	}
	t->waker_sum.ns = t->waker_sum.count = 0;
	return 0;
}

/* The wait of tid that ended after off_ns off-CPU was ended by the waker sched_waking saw. Only
 * the thread's own switch-ins write its sum, one at a time: plain adds. */
__noinline int record_waker(struct pp_thread *t, __u32 tid, __u32 cause, __u64 off_ns)
{
	struct pp_waker_key key = {};

	if (!t)
		return 0;
	key.wakee = tid;
	key.waker = t->waker_tid;
	key.waker_tgid = t->waker_tgid;
	key.ctx = t->wake_ctx;
	key.cause = cause;
	if (t->waker_sum.count && (t->waker_key.wakee != key.wakee ||
				   t->waker_key.waker != key.waker ||
				   t->waker_key.waker_tgid != key.waker_tgid ||
				   t->waker_key.ctx != key.ctx || t->waker_key.cause != key.cause))
		flush_waker(t);
	if (!t->waker_sum.count)
		t->waker_key = key;
	t->waker_sum.ns += off_ns;
	t->waker_sum.count++;
	return 0;
}

/* The held waits read as cause: their OTHER moves to it. False where the states hold less
 * OTHER than they do (the window cut them off). */
static __always_inline bool held_named(struct pp_thread *t, __u32 cause)
{
	if (t->ns[PP_OTHER] < t->timed_out_ns)
		return false;
	t->ns[PP_OTHER] -= t->timed_out_ns;
	t->ns[STATE_IDX(cause)] += t->timed_out_ns;
	return true;
}

/* The held waits were the GIL's: THREAD_WAIT (pp_takeover_names_held). */
static __always_inline void held_taken_over(struct pp_thread *t)
{
	if (held_named(t, PP_THREAD_WAIT))
		t->gil_ns += t->timed_out_ns;
}

/* pp_takeover_call_known() and pp_takeover_call_learn() of a process. Global: their loops over
 * the slots were walked on every path to them (held_at_takeover_call() 1.7x its size,
 * takeover_names_held() 3.2x). The learning calls the known test rather than inlining it,
 * whose matches split the store's paths (718 instructions walked for its 193, 3.7x). */
__noinline int takeover_call_known(struct pp_proc *proc, __u64 call)
{
	return proc && pp_takeover_call_known(proc->takeover_calls, call);
}

__noinline int takeover_call_learn(struct pp_proc *proc, __u64 call)
{
	if (proc && call && !takeover_call_known(proc, call))
		pp_takeover_call_store(proc->takeover_calls, call);
	return 0;
}

/* Whether the held waits' call is one where the thread's process waits for the GIL
 * (pp_takeover_call_known). */
static __always_inline bool held_at_gil_call(struct pp_thread *t)
{
	__u32 tgid = t->tgid;

	return takeover_call_known(bpf_map_lookup_elem(&tracked_procs, &tgid), t->held_call);
}

/* The waker's held waits were for what the thread it wakes handed over
 * (pp_takeover_names_held), and their call is where its process waits for the GIL. The waker
 * runs this on its own record, as its switch-ins do the rest of it. Global, as
 * retry_after_timeouts(). */
__noinline int takeover_names_held(struct pp_thread *waker, struct pp_thread *wakee, __u64 now)
{
	__u32 tgid;

	if (!waker || !wakee || waker->phase != PP_PHASE_ONCPU || waker->gpu_depth ||
	    !pp_takeover_names_held(waker->timed_out_ns, waker->timed_out_from_ns,
				    waker->timed_out_from_ns + waker->timed_out_ns,
				    waker->ran_since_wait_ns + now - relay_run_from(waker),
				    wakee->phase, wakee->phase_start_ns, wakee->last_wait_end_ns))
		return 0;
	held_taken_over(waker);
	if (waker->held_one_call) {
		tgid = waker->tgid;
		takeover_call_learn(bpf_map_lookup_elem(&tracked_procs, &tgid), waker->held_call);
	}
	waker->timed_out_ns = 0;
	waker->held_call = 0;
	return 1;
}

/* Held waits that end unnamed: a takeover unseen, where their call is one that took over.
 * All of that call, they are the GIL's however long (a holder preempted on a busy machine
 * leaves its waiter to time out again and again); with other waits among them, at most
 * PP_ON_THE_WAY_MAX_NS of them, as for a takeover. */
__noinline int held_at_takeover_call(struct pp_thread *t)
{
	if (!t || !t->timed_out_ns || t->gpu_depth ||
	    (t->timed_out_ns > PP_ON_THE_WAY_MAX_NS && !t->held_one_call) || !held_at_gil_call(t))
		return 0;
	held_taken_over(t);
	return 1;
}

/* What retry_after_timeouts() plans for a wait's end: a pp_retry_action, and what else it needs
 * of the wait. */
#define PLAN_ACTION		0x3
#define PLAN_RETRY_OF		0x4	/* ADD: the wait is the held waits' call (pp_retry_of) */
#define PLAN_TIMED_OUT		0x8	/* a timer ended it, or may have: it is held if nothing
					 * holds it */
#define PLAN_UNSEEN_END		0x10	/* no wakeup was seen to end it */

/* retry_action()'s flags: pp_retry_action()'s inputs, and for a wait no wakeup was seen to end
 * those of pp_unseen_end_held(). */
#define ACT_HOLDING		0x1
#define ACT_TIMED_OUT		0x2
#define ACT_BRIEF		0x4
#define ACT_HANDOFF		0x8
#define ACT_UNSEEN_END		0x10
#define ACT_WITHIN_HELD		0x20

/* pp_retry_action() behind a call, or pp_unseen_end_held() (ACT_UNSEEN_END), and
 * PLAN_RETRY_OF; for an unseen end, PLAN_TIMED_OUT where its call has a deadline. */
__noinline int retry_action(__u64 call, __u64 held_call, __u32 held_lead_ms, __u32 flags)
{
	int retry_of = pp_retry_of(held_call, call, held_lead_ms), action;

	if (flags & ACT_UNSEEN_END) {
		retry_of = retry_of && (flags & ACT_HOLDING);
		if (pp_unseen_end_held(flags & ACT_HOLDING, retry_of, flags & ACT_WITHIN_HELD))
			return PP_RETRY_ADD | PLAN_UNSEEN_END | (retry_of ? PLAN_RETRY_OF : 0);
		return PP_RETRY_DROP | PLAN_UNSEEN_END |
		       (pp_call_has_deadline(call) ? PLAN_TIMED_OUT : 0);
	}
	action = pp_retry_action_of(flags & ACT_HOLDING, retry_of, flags & ACT_TIMED_OUT,
				    flags & ACT_BRIEF, flags & ACT_HANDOFF);
	if (action == PP_RETRY_ADD && retry_of)
		action |= PLAN_RETRY_OF;
	return action;
}

/*
 * retry_action()'s flags for the end of a wait from since to end (its wakeup, or now), what it
 * does to the timed-out waits the thread holds. Global, and apart from retry_action(): each
 * flag is a constant on the paths that computed it, and a later test of it split every path
 * after it, so the verifier walked what followed once for each combination of their values
 * (retry_plan(), which also called retry_action(), 3.8x its size in every program that closes
 * a wait). Here the paths end at the return, and the caller has one unknown word.
 */
__noinline __u32 retry_flags(struct pp_thread *t, __u32 cause, __u64 since, __u64 end, __u64 call)
{
	__u32 holding;
	bool timed_out, handoff;

	if (!t)
		return 0;
	holding = pp_retry_pending(t) ? ACT_HOLDING : 0;
	/* A wait open at the attach too: its wakeup lost, its call read at the switch-in. */
	if (cause == PP_OTHER && !t->gpu_depth &&
	    (t->phase == PP_PHASE_OFFCPU || t->phase == PP_PHASE_UNKNOWN) &&
	    t->woken_ns < t->oncpu_since_ns)
		return ACT_UNSEEN_END | holding |
		       (window_part_ns(since, end) <= t->timed_out_ns ? ACT_WITHIN_HELD : 0);
	timed_out = !t->gpu_depth && cause == PP_OTHER && call && t->wake_ctx != PP_WAKE_TASK &&
		    t->woken_ns > since;
	/* Woken as it slept, or as it went to sleep (the holder unlocks at once), soon: by the
	 * wakeup, not the queueing after it that a busy machine drags out. */
	handoff = !timed_out && t->wake_ctx == PP_WAKE_TASK && t->woken_ns >= t->oncpu_since_ns &&
		  t->woken_ns <= since + PP_LOCK_HANDOFF_MAX_NS;
	return holding | (timed_out ? ACT_TIMED_OUT : 0) |
	       (end <= since + PP_ON_THE_WAY_MAX_NS ? ACT_BRIEF : 0) | (handoff ? ACT_HANDOFF : 0);
}

/*
 * A timed-out wait retried at once is held back, OTHER in the meantime, and given the cause of
 * the retry a waker ends (pp_retry_call says why, and what may come between: a timeout of the
 * GIL, a lock handed over); one followed by anything else stays OTHER. The part of the wait
 * that reads as cause ends at its wakeup's enqueueing (runq_from, as account_switch_in()
 * splits it) or now. `record` holds nothing: its trace has sent each wait as OTHER already.
 * Global, as record_waker(): its branches would otherwise multiply the paths of every program
 * that closes a wait (+1,100 verified instructions each). Returns the pp_retry_action taken.
 */
__noinline int retry_after_timeouts(struct pp_thread *t, __u32 cause, __u64 since, __u64 runq_from,
				    __u64 now)
{
	__u64 end, waited, call;
	int plan, action;
	__u32 flags;

	if (!t)
		return 0;
	end = t->woken_ns > since && runq_from <= now ? runq_from : now;
	waited = window_part_ns(since, end);
	call = t->wait_call;
	t->wait_call = 0;
	flags = retry_flags(t, cause, since, end, call);
	/* For an unseen end retry_action() says whether it is held (PLAN_TIMED_OUT). */
	plan = retry_action(call, t->held_call, t->held_lead_ms, flags) |
	       (flags & ACT_TIMED_OUT ? PLAN_TIMED_OUT : 0);
	action = plan & PLAN_ACTION;
	if (action == PP_RETRY_KEEP)
		return action;
	if (action == PP_RETRY_ADD) {
		t->timed_out_ns += waited;
		t->held_end_unseen = !!(plan & PLAN_UNSEEN_END);
		if (!(plan & PLAN_RETRY_OF))
			t->held_one_call = 0;	/* its call went unread, or is another */
		return action;
	}
	if (action == PP_RETRY_NAME && !t->gpu_depth && pp_retry_names(cause)) {
		/* A holder slow to hand the GIL over (preempted on a busy machine) ends the retry
		 * itself: at a GIL call, the held waits and that retry are the GIL's. */
		if (held_named(t, cause) && cause == PP_THREAD_WAIT && held_at_gil_call(t))
			t->gil_ns += t->timed_out_ns + waited;
		t->named_call = t->held_call;
		t->named_cause = cause;
	} else if (action == PP_RETRY_DROP && t->timed_out_ns && t->held_end_unseen &&
		   !t->gpu_depth && pp_held_named_before(t->held_call, t->named_call, t->named_cause)) {
		/* The chain's end went unseen, and the thread has moved on. */
		held_named(t, t->named_cause);
	} else if (t->timed_out_ns) {
		held_at_takeover_call(t);
	}
	t->timed_out_ns = 0;
	t->held_call = 0;
	if (plan & PLAN_TIMED_OUT) {
		t->timed_out_ns = waited;
		t->held_end_unseen = !!(plan & PLAN_UNSEEN_END);
		t->timed_out_from_ns = since;
		t->held_call = call;
		t->held_one_call = 1;
		/* A wait open at the attach had a lead unseen; last_wait_end_ns is still the
		 * previous wait's (account_switch_in() moves it on after this), else the lead runs
		 * from the thread's birth inside the window, or is unseen (running at the attach). */
		t->held_lead_ms = t->phase == PP_PHASE_UNKNOWN ? PP_LEAD_UNSEEN :
				  pp_lead_ms(t->last_wait_end_ns ? t->last_wait_end_ns :
					     t->first_ns > window_start_ns ? t->first_ns : 0, since);
	}
	return action;
}

/* Whether the call of the wait a thread is in is still to be read, and matters: the wait was
 * open at the attach (no switch-out into it was seen, where every other wait's is read), and a
 * timer ended it (a timed-out wait, to hold). */
static __always_inline bool wait_call_unread(struct pp_thread *t)
{
	return t->phase == PP_PHASE_UNKNOWN && t->wake_ctx != PP_WAKE_TASK;
}

/* A wait open at the attach that no wakeup was seen to end (one lost): its call is read at
 * the switch-in, still in it, as for one a timer ended. Unread, its unseen end read the wait as
 * OTHER whatever the chain after it was (one wakeup of the job in five lost: the GIL's 5 ms wait
 * open at the attach read OTHER at 7 attaches of thread_retry in 10, 2 after). Its switch-in
 * lost too, nothing reads it: that is placed later, the thread in another call by then. */
static __always_inline bool open_wait_unwoken(struct pp_thread *t)
{
	return t->phase == PP_PHASE_UNKNOWN && t->woken_ns < t->oncpu_since_ns;
}

/* Two builds of one program: rec is a constant, and userspace loads the one it needs, so the
 * report's program has no instruction of `record` (not even a test of record_on). */
static __always_inline int sched_switch(unsigned long long *ctx, bool preempt,
					struct task_struct *prev, struct task_struct *next,
					const bool rec)
{
	struct pp_thread *t;
	__s64 prev_state;
	__u64 now = 0, exec_now;

	count(PP_CNT_SCHED_EVENTS);
	if (!irq_from_preempt_count) {
		/* No CPU switches tasks inside an interrupt: whatever nesting the fallback counted
		 * here (an exit it never saw) is over. */
		struct irq_ctx *irq = irq_ctx_here();

		if (irq)
			irq->hardirq_depth = irq->softirq_vec = 0;
	}
	if (!window_start_ns)
		return 0;

	/* The clock is read only once either task is the job's. */
	t = thread_of(prev);
	if (t && t->phase != PP_PHASE_EXITED) {
		now = bpf_ktime_get_ns();
		if (!naming(now))
			return 0;
		if (sched_switch_has_prev_state)
			prev_state = (__s64)ctx[3];
		else
			prev_state = task_state(prev);
		exec_now = prev->se.sum_exec_runtime;
		if (pp_switch_in_unseen(t->phase, t->exec_at_out_ns)) {
			/* Its switch-in never reached us: its CPU clock says when it was. */
			__u64 in = pp_missed_switch_in_ns(t->phase_start_ns, now, t->exec_at_out_ns,
							  exec_now);

			count(PP_CNT_SWITCH_IN_MISSED);
			if (in) {
				if (rec)
					switch_in_rec(t, prev->pid, in);
				else
					switch_in(t, prev->pid, in);
			} else {
				/* The time since its last event goes unclaimed (OTHER). */
				count(PP_CNT_SWITCH_IN_UNPLACED);
			}
		}
		if (t->phase == PP_PHASE_ONCPU)
			t->ran_since_wait_ns += now - relay_run_from(t);
		t->exec_at_out_ns = exec_now;
		account_oncpu_ep(t, prev->pid, now, rec);
		t->phase_start_ns = now;
		if (preempt || prev_state == TASK_RUNNING) {
			t->phase = PP_PHASE_RUNNABLE;
		} else {
			t->phase = PP_PHASE_OFFCPU;
			/* Its call now, as it goes to sleep in it: read at its wakeup or its
			 * switch-in instead, a wait whose wakeup this guest lost and whose
			 * switch-in it left untraced (placed from the CPU clock) had none, and a
			 * chain of Queue.get(timeout=1) read 1-2 s of OTHER, one attach in 7 beside
			 * two CPU hogs. */
			t->wait_call = rec ? 0 : retryable_wait_call(prev);
			t->offcpu_iowait = task_in_iowait(prev);
			/* prev is still the current task: its stack is readable here. */
			if (wants_wait_stack(prev->pid, prev->tgid))
				py_wait_begins(prev->pid, prev->tgid);
		}
	}

	t = thread_of(next);
	if (t && t->phase != PP_PHASE_EXITED) {
		if (!now) {
			now = bpf_ktime_get_ns();
			if (!naming(now))
				return 0;
		}
		if (drop_switch_in_every &&
		    __sync_fetch_and_add(&switch_ins_counted, 1) % drop_switch_in_every == 0)
			return 0;
		if ((drop_woken_switch_in || drop_open_wait_end) &&
		    switch_in_dropped_tid == next->pid) {
			switch_in_dropped_tid = 0;
			return 0;
		}
		/* Read at its wakeup (on_sched_waking) where that was seen. */
		if (!rec && !t->wait_call && (wait_call_unread(t) || open_wait_unwoken(t)))
			t->wait_call = retryable_wait_call(next);
		if (rec)
			switch_in_rec(t, next->pid, now);
		else
			switch_in(t, next->pid, now);
	}
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	sched_switch(ctx, preempt, prev, next, false);
	if (dispatch_id) {
		/* The dispatcher sent the switch to prev's job: next may be another job's. */
		__u32 job = dispatched_job(next->tgid);

		if (job && job != dispatch_id) {
			bpf_tail_call(ctx, &switch_progs, job - 1);
			dispatch_missed();
		}
	}
	return 0;
}

/* `record`'s build (loaded instead of on_sched_switch: tracer_record.c). */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_sched_switch_rec, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return sched_switch(ctx, preempt, prev, next, true);
}

/* The trainer hands out work, not data: its wakeups never relay. Where --tid does not name it,
 * its candidates (the main thread, any thread that calls the GPU) are taken for it. */
static __always_inline bool may_relay(struct pp_thread *waker, __u32 waker_tid, __u32 waker_tgid)
{
	if (trainer_tid)
		return waker_tid != trainer_tid;
	return waker_tid != waker_tgid && !waker->gpu_calls;
}

/* A descendant that wakes its parent by exiting delivered nothing: the loop waited in wait()
 * for a command it ran (subprocess.run of a shell tool) or for a worker it shut down. */
static __always_inline bool waker_is_exiting(void)
{
	return bpf_get_current_task_btf()->flags & PF_EXITING;
}

/* Which stall an off-CPU wait ends as, judged in the waker's context (stall model), and who
 * ended it, into w (zeroed). */
static __always_inline void judge_wakeup(struct pp_thread *wakee, __u32 wakee_tid, __u64 now,
					 struct pp_wake *w)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 waker_tid = (__u32)id, waker_tgid = id >> 32, ctx = wake_context(), relayed, depth;
	__u64 ran = 0;
	struct pp_proc *waker_proc;
	struct pp_thread *waker;
	__u8 kind;

	w->ctx = ctx;
	if (ctx != PP_WAKE_TASK) {
		w->cause = ctx == PP_WAKE_SOFTIRQ_NET ? network_cause() : PP_OTHER;
		return;
	}
	w->waker_tid = waker_tid;
	w->waker_tgid = waker_tgid;
	w->cause = PP_OTHER;
	if (waker_tid == wakee_tid)
		return;
	kind = pid_kind(waker_tgid);
	if (kind == PP_PID_UNTRACKED)
		return;
	if (kind == PP_PID_PLAIN) {
		/* As its record would say below: a live descendant of no rank. */
		if (!waker_is_exiting())
			w->cause = PP_DATA_WAIT;
		return;
	}
	/* The live root (PP_PID_ROOT) is the job's own process: not a worker, not a rank's. */
	if (kind != PP_PID_ROOT) {
		waker_proc = bpf_map_lookup_elem(&tracked_procs, &waker_tgid);
		if (!waker_proc)
			return;
		/* Ranks of a distributed job under one launcher: a wakeup from another rank is
		 * a collective's peer delivering (gloo over loopback wakes its peer from its own
		 * context), not a worker's batch. */
		if (waker_proc->rank_tgid) {
			struct pp_proc *wakee_proc = bpf_map_lookup_elem(&tracked_procs, &wakee->tgid);

			if (wakee_proc && wakee_proc->rank_tgid &&
			    wakee_proc->rank_tgid != waker_proc->rank_tgid) {
				w->cause = PP_COMM_WAIT;
				return;
			}
		}
		/* Any thread of a descendant process is a WORKER: a DataLoader worker delivering
		 * a batch, or feeding its own loop; a rank's own process is that rank's trainer. */
		if (!waker_proc->is_root && waker_proc->rank_tgid != waker_tgid) {
			if (!waker_is_exiting())
				w->cause = PP_DATA_WAIT;
			return;
		}
	}
	w->cause = PP_THREAD_WAIT;
	if (waker_tgid != wakee->tgid)
		return;	/* the job's process handing work to a worker */
	waker = bpf_map_lookup_elem(&threads, &waker_tid);
	if (!waker)
		return;
	/* It runs, this wakeup in its context, woken since it slept: a switch-in of it untraced
	 * is placed now, as its next switch-out would, so that the waits it ended are closed and
	 * held before a takeover is judged. Left to that switch-out, a Python thread's GIL waits
	 * ended by the takeover read OTHER (THREAD_WAIT 1.3-6.3 pts short of a thread loader's
	 * 44%, one switch-in in three untraced). */
	if (pp_waker_switch_in_unseen(waker->phase, waker->exec_at_out_ns, waker->woken_ns,
				      waker->phase_start_ns))
		seen_on_cpu(waker, waker_tid, now);
	if (waker->timed_out_ns)
		takeover_names_held(waker, wakee, now);
	if (!may_relay(waker, waker_tid, waker_tgid))
		return;
	if (pp_switch_in_unseen(waker->phase, waker->exec_at_out_ns)) {
		/* It runs, so a switch-in of it went untraced: it has run since for what its CPU
		 * clock gained (up to a tick short: the clock moves at ticks). */
		__u64 exec_now = bpf_get_current_task_btf()->se.sum_exec_runtime;

		ran = exec_now > waker->exec_at_out_ns ? exec_now - waker->exec_at_out_ns : 0;
	}
	if (pp_asleep_with_clock(waker->phase, waker->exec_at_out_ns)) {
		/* Nothing of it seen since it slept, yet it runs: its untraced switch-in ended the
		 * wait its record still holds open, and that is the wait it relays (else the relay
		 * failed and a third of a reader thread's batches read THREAD_WAIT, one switch-in
		 * in three untraced). It ended after its wakeup, if one was seen. */
		__u32 open = waker->gpu_depth ? pp_call_state(waker->call_state) :
						 open_wait_cause(waker, false);

		depth = waker->gpu_depth || open != waker->wake_cause ? 0 : waker->wake_depth;
		relayed = pp_chain_cause(open, depth, ran,
					 waker->woken_ns >= waker->oncpu_since_ns && now > waker->woken_ns ?
					 now - waker->woken_ns : ran);
	} else {
		/* On a CPU since its last wait ended; or preempted since, and back on one
		 * untraced: then what it ran before and since, not its time queued. */
		depth = waker->last_wait_depth;
		relayed = pp_chain_cause(waker->last_wait, depth,
					 waker->ran_since_wait_ns + (waker->phase == PP_PHASE_RUNNABLE ?
					 ran : now - relay_run_from(waker)),
					 now - waker->last_wait_end_ns);
	}
	if (relayed == PP_NO_CAUSE)
		return;
	w->cause = relayed;
	w->depth = depth + 1;
}

/*
 * PIPEPROF_TEST_DROP_WAKEUPS: whether this wakeup of thread t (tid) is ignored. One in
 * drop_wakeup_every of the job's (every one at 1), but with N above 1 never two in a row from a
 * task of waits of one call of a thread (its signature only, mod 64; the waits of no call read
 * share a bit): the job's wakeups repeat in a cycle (a producer's batch every 2.5 s, the
 * timeouts and the GIL's handovers between), and one in N by a counter alone lost the same one
 * every cycle in some attaches (each batch's delivery: a chain of timed-out waits no waker was
 * ever seen to end, 2 to 4 attaches in 12), which no guest does. A wakeup spared is not counted,
 * which moves the cycle on. With PIPEPROF_TEST_DROP_WOKEN_SWITCH_INS (and N above 1), a task's
 * wakeup of a thread holding timed-out waits is spared too: lost with its switch-in, nothing is
 * left to say what ended the chain, and where the next batch came after the naming wait the
 * chain read OTHER whatever pipeprof did (3 attaches in 24 where batches came slower than the
 * window).
 */
static __always_inline bool wakeup_drop_due(const struct pp_thread *t, __u32 tid)
{
	struct pp_dropped_wake *slot = &task_wakeups_dropped[tid % PP_TEST_WAKE_SLOTS];
	__u64 call_bit = 1ULL << ((t->wait_call >> 32) & 63);
	bool from_task = drop_wakeup_every > 1 && wake_context() == PP_WAKE_TASK;

	if (from_task && drop_woken_switch_in && t->timed_out_ns)
		return false;
	if (from_task && slot->tid == tid && (slot->calls & call_bit)) {
		slot->calls &= ~call_bit;
		return false;
	}
	if ((__sync_fetch_and_add(&wakeups_counted, 1) + 1) % drop_wakeup_every)
		return false;
	if (from_task) {
		if (slot->tid != tid) {
			slot->tid = tid;
			slot->calls = 0;
		}
		slot->calls |= call_bit;
	}
	return true;
}

/* PIPEPROF_TEST_DROP_OPEN_WAIT_ENDS: the end of a wait open at the attach, a timer's (a thread
 * seeded asleep and seen in no event since). */
static __always_inline bool open_wait_end_drop_due(const struct pp_thread *t,
						   struct task_struct *p)
{
	return t->phase == PP_PHASE_UNKNOWN && t->exec_at_out_ns && task_asleep(p) &&
	       wake_context() != PP_WAKE_TASK;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(on_sched_waking, struct task_struct *p)
{
	struct pp_wake w = {};
	struct pp_thread *t;
	__u64 now;

	if (!window_start_ns)
		return 0;
	t = thread_of(p);
	if (!t || t->phase == PP_PHASE_EXITED)
		return 0;
	now = bpf_ktime_get_ns();
	if (!naming(now))
		return 0;
	if ((drop_wakeup_every && wakeup_drop_due(t, p->pid)) ||
	    (drop_open_wait_end && open_wait_end_drop_due(t, p))) {
		wakeup_dropped_tid = p->pid;
		if (drop_woken_switch_in || drop_open_wait_end)
			switch_in_dropped_tid = p->pid;
		return 0;
	}
	judge_wakeup(t, p->pid, now, &w);
	/* Of the wait the thread enters next, its switch-in untraced: put aside until that
	 * switch-in is placed (do_switch_in()). */
	if (pp_wake_is_next_waits(t->phase, t->exec_at_out_ns, t->woken_ns, t->phase_start_ns,
				  t->oncpu_since_ns, t->enqueued_ns)) {
		t->next_wake = w;
		/* The time last: it says the rest is there (take_next_wake() on another CPU). */
		asm volatile("" ::: "memory");
		t->next_woken_ns = now;
		return 0;
	}
	wake_set(t, &w);
	/* A wait open at the attach: its call now, while it is still in it (a host that traces
	 * no switch-in for a task handed a CPU back, a Firecracker guest, leaves none to read it
	 * at). Only if asleep: one whose switch-in went untraced may be on a CPU, entering its
	 * next wait. */
	if (!record_on && wait_call_unread(t) && task_asleep(p))
		t->wait_call = retryable_wait_call(p);
	/* Asleep since before the attach: its clock now starts the run this wakeup begins,
	 * should its switch-in go untraced. One still on a CPU (racing its own switch-out) or
	 * queued to run (preempted) was never in this wait, and may have run since the attach. */
	if (t->phase == PP_PHASE_UNKNOWN && task_asleep(p))
		t->exec_at_out_ns = p->se.sum_exec_runtime;
	t->woken_ns = now;
	if (t->wake_ctx == PP_WAKE_TASK && wants_wait_stack(p->pid, t->tgid))
		py_wait_woken(p->pid);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_sched_wakeup, struct task_struct *p)
{
	__u32 tid = p->pid;
	struct pp_thread *t;
	__u64 now;

	if (!window_start_ns || !pid_tracked(p->tgid))
		return 0;
	/* Only threads sched_waking already saw: this may run on the target CPU in the
	 * wakeup IPI, where nothing about the waker is known. */
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || t->phase == PP_PHASE_EXITED)
		return 0;
	if ((drop_wakeup_every || drop_open_wait_end) && wakeup_dropped_tid == tid) {
		wakeup_dropped_tid = 0;
		return 0;
	}
	now = bpf_ktime_get_ns();
	/* Not for a wakeup put aside (pp_wake_is_next_waits): the wait held open is still to
	 * be closed, up to its own. */
	if (naming(now) && !t->next_woken_ns)
		t->enqueued_ns = now;
	return 0;
}

/* A thread's first record: phase from start_ns, comm the task's, built in fresh_threads. A
 * thread seen at its fork replaces the record of an exited thread of its tid; one first seen
 * later (PP_PHASE_UNKNOWN) keeps a record another CPU has just made. Non-zero where it made
 * none: the map full, or every slot of fresh_threads in use (the callers count either as a
 * full map). Global: inlined, the verifier walked it on every path to a thread's first
 * sighting, twice in each switch (1,900 instructions of on_sched_switch's 10,900). */
__noinline int thread_record_new(const struct pp_comm *comm, __u32 tid, __u32 tgid, __u32 phase,
				__u64 start_ns)
{
	__u32 zero = 0, slot = PP_FRESH_SLOTS;
	struct pp_fresh_threads *fresh = bpf_map_lookup_elem(&fresh_threads, &zero);
	struct pp_thread *rec;
	int err;

	if (!fresh)
		return 1;
	for (__u32 i = 0; i < PP_FRESH_SLOTS; i++) {
		if (!__sync_val_compare_and_swap(&fresh->busy[i], 0, 1)) {
			slot = i;
			break;
		}
	}
	if (slot >= PP_FRESH_SLOTS)
		return 1;
	/* Each slot claimed above is a path of its own: known to the verifier, it walked the rest
	 * once per slot (592 instructions in each of the 8 programs that build records, 211 now, less
	 * the check added: 2,944 fewer of an attach's 32,417). The test below never holds:
	 * verifier_blind_zero is 0. */
	slot ^= verifier_blind_zero;
	if (slot >= PP_FRESH_SLOTS)
		return 1;
	rec = &fresh->rec[slot];
	__builtin_memset(rec, 0, sizeof(*rec));
	pp_thread_init(rec, tgid, phase, start_ns);
	if (comm)
		__builtin_memcpy(rec->comm, comm->comm, sizeof(rec->comm));
	err = bpf_map_update_elem(&threads, &tid, rec,
				  phase == PP_PHASE_UNKNOWN ? BPF_NOEXIST : BPF_ANY);
	__sync_lock_test_and_set(&fresh->busy[slot], 0);
	return err;
}

static __noinline int thread_born(struct task_struct *parent, __u32 tid, __u32 tgid, __u64 now)
{
	struct pp_comm comm = {};

	BPF_CORE_READ_STR_INTO(&comm.comm, parent, comm);
	return thread_record_new(&comm, tid, tgid, PP_PHASE_RUNNABLE, now);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tgid = BPF_CORE_READ(parent, tgid);
	__u32 tid = BPF_CORE_READ(child, pid), tgid = BPF_CORE_READ(child, tgid);
	struct pp_proc proc = {}, *old;
	__u8 kind;
	__u64 now;

	if (!pid_tracked(parent_tgid)) {
		/* The pid of a process of the job that exited, reused by one that is not. */
		if (tid == tgid && pid_tracked(tgid))
			pid_set_tracked(tgid, PP_PID_UNTRACKED, false);
		return 0;
	}
	now = bpf_ktime_get_ns();

	if (tid == tgid) {
		struct pp_proc *parent_proc = bpf_map_lookup_elem(&tracked_procs, &parent_tgid);

		proc.parent_tgid = parent_tgid;
		proc.fork_ns = now;
		/* A rank's DataLoader workers are that rank's. */
		if (parent_proc)
			proc.rank_tgid = parent_proc->rank_tgid;
		old = bpf_map_lookup_elem(&tracked_procs, &tgid);
		if (old && !old->exit_ns) {
			/* Userspace's /proc walk at attach saw the child before this event. */
			if (!old->fork_ns)
				old->fork_ns = now;
			kind = pp_pid_kind(old);
		} else if (bpf_map_update_elem(&tracked_procs, &tgid, &proc, BPF_ANY)) {
			/* An exited process's record under this pid is replaced: the pid was
			 * reused. */
			count(PP_CNT_PROCS_FULL);
			return 0;
		} else {
			kind = pp_pid_kind(&proc);
		}
		/* Before the child can run: wake_up_new_task() follows this event. */
		pid_set_tracked(tgid, kind, true);
		count(PP_CNT_FORKS);
		send_note(tgid, PP_NOTE_FORK);
	}
	if (!accounting(now))
		return 0;

	/* New tasks start runnable: wake_up_new_task() follows. */
	if (thread_born(parent, tid, tgid, now))
		count(PP_CNT_THREADS_FULL);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_sched_process_exec, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid), tgid = BPF_CORE_READ(p, tgid);
	struct pp_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (t)
		BPF_CORE_READ_STR_INTO(&t->comm, p, comm);
	/* A new program: none of the old probes apply to its address space. */
	if (pid_tracked(tgid))
		send_note(tgid, PP_NOTE_EXEC);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_sched_process_exit, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid), tgid = BPF_CORE_READ(p, tgid);
	__u64 now = bpf_ktime_get_ns();
	struct pp_thread *t;
	struct pp_proc *proc;

	t = bpf_map_lookup_elem(&threads, &tid);
	if (t && t->phase != PP_PHASE_EXITED && accounting(now)) {
		account_oncpu(t, tid, now);
		t->phase = PP_PHASE_EXITED;
		t->phase_start_ns = now;
		t->exit_ns = now;
	}
	/* Before its tid can be reused, and its record replaced with it. */
	if (record_wakers && t)
		flush_waker(t);
	if (!task_group_dead(p))
		return 0;
	proc = bpf_map_lookup_elem(&tracked_procs, &tgid);
	if (proc && !proc->exit_ns) {
		proc->exit_ns = now;
		/* Its record, exit_ns set, is what judges the wakeups left (its parent's). */
		pid_set_tracked(tgid, PP_PID_LOOKUP, false);
		/* Still marked: its exit wakes its parent (waitpid) after this event, and that
		 * wakeup is the job's. A fork that reuses the pid outside the job clears it. */
		count(PP_CNT_PROC_EXITS);
	}
	return 0;
}


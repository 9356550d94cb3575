// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "classify.h"

static const char *const state_names[PP_NR_STATES] = {
	[PP_RUNNING] = "RUNNING",	[PP_RUNQ] = "RUNQ",
	[PP_GPU_WAIT] = "GPU_WAIT",	[PP_IO_WAIT] = "IO_WAIT",
	[PP_DATA_WAIT] = "DATA_WAIT",	[PP_THREAD_WAIT] = "THREAD_WAIT",
	[PP_COMM_WAIT] = "COMM_WAIT",	[PP_OTHER] = "OTHER",
};

static const char *const role_names[NR_ROLES] = { "TRAINER", "WORKER", "HELPER" };

static const struct {
	const char *name, *id;
} verdicts[NR_VERDICTS] = {
	[VERDICT_DATA_LOADING] = { "DATA-LOADING BOUND", "data_loading_bound" },
	[VERDICT_GPU] = { "GPU-BOUND", "gpu_bound" },
	[VERDICT_CPU] = { "CPU-BOUND", "cpu_bound" },
	[VERDICT_IO] = { "I/O BOUND", "io_bound" },
	[VERDICT_CONTENTION] = { "CPU CONTENTION", "cpu_contention" },
	[VERDICT_COMM] = { "COMMUNICATION BOUND", "communication_bound" },
	[VERDICT_UNDETERMINED] = { "NO DOMINANT STALL", "undetermined" },
	[VERDICT_DATA_LOADING_THREAD] = { "DATA-LOADING BOUND (thread loader)", "data_loading_thread" },
	[VERDICT_WAITING_ON_THREAD] = { "WAITING ON A THREAD", "waiting_on_thread" },
	[VERDICT_GPU_UNOBSERVED] = { "NO VERDICT: GPU NOT OBSERVED", "gpu_unobserved" },
	[VERDICT_WAIT_NOT_ENDED] = { "NO VERDICT: THE TRAINER'S WAIT DID NOT END", "wait_not_ended" },
	[VERDICT_GPU_BACKLOG] = { "NO VERDICT: THE GPU RUNS BEHIND", "gpu_backlog" },
};

/* Stalls that can carry a verdict, and the verdict each one carries. */
static const struct {
	enum pp_state state;
	enum verdict verdict;
} stall_verdicts[] = {
	{ PP_DATA_WAIT, VERDICT_DATA_LOADING }, { PP_GPU_WAIT, VERDICT_GPU },
	{ PP_IO_WAIT, VERDICT_IO },		{ PP_RUNQ, VERDICT_CONTENTION },
	{ PP_COMM_WAIT, VERDICT_COMM },		{ PP_THREAD_WAIT, VERDICT_WAITING_ON_THREAD },
};

#define NR_STALL_VERDICTS (sizeof(stall_verdicts) / sizeof(stall_verdicts[0]))

enum verdict verdict_of_stall(enum pp_state state)
{
	for (size_t k = 0; k < NR_STALL_VERDICTS; k++)
		if (stall_verdicts[k].state == state)
			return stall_verdicts[k].verdict;
	return NR_VERDICTS;
}

/* "Step after step": a feeding thread ends the trainer's waits at least this often. */
#define FEEDER_MIN_WAKEUPS 5
#define FEEDER_MIN_WAKEUPS_PER_S 1.0

/* A synchronising call waits for all the GPU work queued before it: waits this long on
 * average mean the GPU had that much work queued, i.e. it runs behind the CPU. A loop whose CPU
 * side is the bottleneck keeps the queue near empty (its syncs wait for the last kernel). */
#define GPU_BACKLOG_US 50000.0

/* Verdicts that name no stall to remove, and compute, which is none: no 1/(1-f) to give. */
static bool verdict_has_bound(enum verdict v)
{
	return v != VERDICT_CPU && v != VERDICT_UNDETERMINED && v != VERDICT_GPU_UNOBSERVED &&
	       v != VERDICT_WAIT_NOT_ENDED && v != VERDICT_GPU_BACKLOG;
}

const char *state_name(enum pp_state state)
{
	return state < PP_NR_STATES ? state_names[state] : "?";
}

const char *role_name(enum role role)
{
	return role < NR_ROLES ? role_names[role] : "?";
}

const char *verdict_name(enum verdict verdict)
{
	return verdict < NR_VERDICTS ? verdicts[verdict].name : "?";
}

const char *verdict_id(enum verdict verdict)
{
	return verdict < NR_VERDICTS ? verdicts[verdict].id : "?";
}

double speedup_bound(double f)
{
	if (f <= 0)
		return 1.0;
	if (f >= 0.99)
		return 100.0;
	return 1.0 / (1.0 - f);
}

enum pp_state thread_open_state(const struct pp_thread *t, char proc_state)
{
	switch (t->phase) {
	case PP_PHASE_ONCPU:
		return t->gpu_depth ? pp_call_state(t->call_state) : PP_RUNNING;
	case PP_PHASE_RUNNABLE:
		return t->gpu_depth ? pp_call_state(t->call_state) : PP_RUNQ;
	case PP_PHASE_OFFCPU:
		/* The wakeup that would name the cause has not happened yet. */
		return t->gpu_depth ? pp_call_state(t->call_state) : t->offcpu_iowait ? PP_IO_WAIT : PP_OTHER;
	case PP_PHASE_UNKNOWN:
		return proc_state == 'R' ? PP_RUNNING : proc_state == 'D' ? PP_IO_WAIT : PP_OTHER;
	default:
		return PP_NR_STATES;
	}
}

bool thread_woken_unswitched(const struct pp_thread *t, __u64 last, __u32 *cause, __u64 *woke)
{
	__u64 since = t->phase_start_ns;

	if (t->gpu_depth || !pp_asleep_with_clock(t->phase, t->exec_at_out_ns) ||
	    t->woken_ns < t->oncpu_since_ns || t->woken_ns <= since || last <= since)
		return false;
	*woke = t->woken_ns < last ? t->woken_ns : last;
	*cause = t->phase == PP_PHASE_OFFCPU && t->offcpu_iowait ? PP_IO_WAIT :
		 t->wake_cause < PP_NR_STATES ? t->wake_cause : PP_OTHER;
	return true;
}

/* The held OTHER of the waits a retry's waker named (retry_after_timeouts()) becomes cause. */
static void name_timed_out(struct thread_result *out, const struct pp_thread *t, __u32 cause)
{
	out->ns[PP_OTHER] -= t->timed_out_ns;
	out->ns[cause] += t->timed_out_ns;
}

void thread_close(const struct pp_thread *t, __u64 window_start_ns, __u64 end_ns, char proc_state,
		  struct thread_result *out)
{
	__u64 first = t->first_ns > window_start_ns ? t->first_ns : window_start_ns;
	__u64 last = t->exit_ns && t->exit_ns < end_ns ? t->exit_ns : end_ns;
	__u64 since = t->phase_start_ns, sum = 0, woke, retry_open = 0;
	enum pp_state open_state;
	bool retrying;
	__u32 named;

	memset(out, 0, sizeof(*out));
	out->tgid = t->tgid;
	memcpy(out->comm, t->comm, sizeof(out->comm));
	out->comm[sizeof(out->comm) - 1] = 0;
	out->exited = t->phase == PP_PHASE_EXITED;
	out->gpu_calls = t->gpu_calls;
	out->gc_ns = t->gc_ns;
	out->gc_count = t->gc_count;
	out->gil_ns = t->gil_ns;
	memcpy(out->ns, t->ns, sizeof(out->ns));

	open_state = thread_open_state(t, proc_state);
	/* In the retry of waits that timed out (retry_after_timeouts()): its waker names them. */
	retrying = pp_retry_pending(t) && t->phase == PP_PHASE_OFFCPU &&
		   out->ns[PP_OTHER] >= t->timed_out_ns;
	if (retrying && since >= last && t->woken_ns > since && pp_retry_names(t->wake_cause)) {
		/* A retry begun after the close, woken since, its switch-in not seen. */
		name_timed_out(out, t, t->wake_cause);
		retrying = false;
	} else if (thread_woken_unswitched(t, last, &named, &woke)) {
		if (retrying && pp_retry_names(named)) {
			name_timed_out(out, t, named);
			retrying = false;
		} else if (retrying && named == PP_OTHER && t->wake_ctx != PP_WAKE_TASK) {
			retry_open += woke - since;	/* timed out again: unnamed */
		} else {
			retrying = false;	/* named: not what the thread waited for */
		}
		out->ns[named] += woke - since;
		since = woke;
		open_state = PP_RUNNING;
	}
	if (open_state < PP_NR_STATES && last > since) {
		out->ns[open_state] += last - since;
		if (open_state == PP_OTHER && t->phase != PP_PHASE_ONCPU && t->phase != PP_PHASE_RUNNABLE) {
			if (retrying)
				retry_open += last - since;
			else
				out->open_wait_ns += last - since;
		}
	}
	/* Not woken yet: they are as unnamed as an open wait, and as long; unless a retry of
	 * their call named the last ones held. So are those whose last wait ended unseen, the
	 * thread on a CPU since (retry_after_timeouts() names them at its next wait, where it
	 * ran past the retry's budget: the naming wait ends there, before that wait). */
	if (retrying && pp_held_named_before(t->held_call, t->named_call, t->named_cause)) {
		out->named_before_ns = t->timed_out_ns + retry_open;
	} else if (retrying) {
		out->open_wait_ns += t->timed_out_ns + retry_open;
	} else if (t->timed_out_ns && t->held_end_unseen && !t->gpu_depth &&
		   out->ns[PP_OTHER] >= t->timed_out_ns &&
		   pp_held_named_before(t->held_call, t->named_call, t->named_cause)) {
		out->named_before_ns = t->timed_out_ns;
	}
	if (out->named_before_ns) {
		out->named_before_state = t->named_cause;
		out->ns[PP_OTHER] -= out->named_before_ns;
		out->ns[t->named_cause] += out->named_before_ns;
	}

	for (int s = 0; s < PP_NR_STATES; s++)
		sum += out->ns[s];
	/* Events in flight while the window closed can overshoot by a few microseconds;
	 * the states are the truth, and the wall is what they add up to. */
	out->wall_ns = last > first ? last - first : 0;
	if (sum > out->wall_ns)
		out->wall_ns = sum;
	else if (sum < out->wall_ns)
		/* Time no event explains is not claimed for any stall. */
		out->ns[PP_OTHER] += out->wall_ns - sum;
}

static double frac(const __u64 *ns, __u64 wall, enum pp_state s)
{
	return wall ? (double)ns[s] / wall : 0;
}

/* A worker's wait for what the network delivers: a streaming dataset's read (DATA_WAIT in a job
 * of one trainer, COMM_WAIT in a rank's, where workers run no collectives). */
double role_network_fraction(const struct role_result *r)
{
	if (!r->wall_ns)
		return 0;
	return frac(r->ns, r->wall_ns, PP_DATA_WAIT) + frac(r->ns, r->wall_ns, PP_COMM_WAIT);
}

/* Not working, not waiting on storage, the network, a CPU or the GPU: blocked on a queue or
 * IPC. */
double role_idle_fraction(const struct role_result *r)
{
	double idle;

	if (!r->wall_ns)
		return 0;
	idle = 1.0 - frac(r->ns, r->wall_ns, PP_RUNNING) - frac(r->ns, r->wall_ns, PP_RUNQ) -
	       frac(r->ns, r->wall_ns, PP_IO_WAIT) - frac(r->ns, r->wall_ns, PP_GPU_WAIT) -
	       role_network_fraction(r);
	/* The four shares can sum a rounding error past 1: no "-0.0%" idle. */
	return idle > 0 ? idle : 0;
}

static int pick_trainer(const struct thread_result *threads, int n, const struct analysis_input *in,
			enum trainer_choice *how)
{
	int best = -1, main_thread = -1;

	for (int i = 0; i < n; i++) {
		if (in->tid_override && threads[i].tid == in->tid_override) {
			*how = TRAINER_BY_OPTION;
			return i;
		}
		if (threads[i].tgid != in->root_pid)
			continue;
		if (threads[i].tid == in->root_pid)
			main_thread = i;
		if (threads[i].gpu_calls && (best < 0 || threads[i].gpu_calls > threads[best].gpu_calls))
			best = i;
	}
	if (in->tid_override)
		return -1;
	if (best >= 0) {
		*how = TRAINER_BY_GPU_CALLS;
		return best;
	}
	*how = TRAINER_MAIN_THREAD;
	return main_thread;
}

/* The thread that ended most of the trainer's THREAD_WAIT, or -1. */
static int top_thread_waker(const struct analysis *a)
{
	int best = -1;

	for (int k = 0; k < a->nr_waited_on; k++) {
		const struct waited_on *w = &a->waited_on[k];

		if (w->ctx == PP_WAKE_TASK && w->cause_ns[PP_THREAD_WAIT] &&
		    (best < 0 || w->cause_ns[PP_THREAD_WAIT] > a->waited_on[best].cause_ns[PP_THREAD_WAIT]))
			best = k;
	}
	return best;
}

/* THREAD_WAIT carries the verdict: a trainer whose waits are ended, step after step, by one
 * helper that is itself mostly on-CPU is waiting for the input that helper computes (a
 * thread-based loader); any other pattern waits on a lock, the GIL or a slow thread. */
static void judge_thread_wait(struct analysis *a, const struct thread_result *threads,
			      const struct analysis_input *in)
{
	const struct thread_result *trainer = &threads[a->trainer_index];
	int k = top_thread_waker(a);
	const struct waited_on *w;
	double secs = in->window_ns / 1e9;

	if (k < 0)
		return;
	a->verdict_waited_on = k;
	w = &a->waited_on[k];
	if (w->thread_index < 0 || threads[w->thread_index].role != ROLE_HELPER)
		return;
	/* Its wakeups ended most of the trainer's THREAD_WAIT themselves. Waits a timer ended and
	 * that a retry or a takeover named are not counted here (they are under the timer): a
	 * holder handing the GIL over at last ends a brief retry after each 5 ms (on a busy
	 * machine, most of the GIL's waits), hundreds of wakeups a second of ~1 ms in all. */
	if (w->cause_ns[PP_THREAD_WAIT] * 2 < trainer->ns[PP_THREAD_WAIT])
		return;
	if (w->wakeups < FEEDER_MIN_WAKEUPS || (secs > 0 && w->wakeups < secs * FEEDER_MIN_WAKEUPS_PER_S))
		return;
	/* Most of it the GIL, taken back from its holder at each switch interval: the helper
	 * ends those waits ~100 times a second whatever it computes, a holder, not a loader. */
	if (trainer->gil_ns * 2 >= trainer->ns[PP_THREAD_WAIT])
		return;
	/* Busy: on-CPU, or runnable and waiting for a CPU. A producer starved of CPU by other
	 * jobs is still the loader the trainer waits on; on-CPU alone flipped the verdict with the
	 * machine's load (27-41% on-CPU, the rest runnable, under a load of 6 on 2 CPUs). */
	if (frac(threads[w->thread_index].ns, threads[w->thread_index].wall_ns, PP_RUNNING) +
	    frac(threads[w->thread_index].ns, threads[w->thread_index].wall_ns, PP_RUNQ) < 0.5)
		return;
	a->verdict = VERDICT_DATA_LOADING_THREAD;
}

static void note_stalls(struct analysis *a, const struct analysis_input *in,
			const struct thread_result *tr)
{
	for (size_t k = 0; k < NR_STALL_VERDICTS; k++) {
		double f = frac(tr->ns, tr->wall_ns, stall_verdicts[k].state);
		struct stall_note *sn;
		int at;

		if (f < NOTABLE_STALL || a->nr_stalls >= MAX_STALL_NOTES)
			continue;
		/* insertion, largest first */
		for (at = a->nr_stalls; at > 0 && a->stalls[at - 1].fraction < f; at--)
			a->stalls[at] = a->stalls[at - 1];
		sn = &a->stalls[at];
		sn->state = stall_verdicts[k].state;
		sn->fraction = f;
		sn->near_threshold = f >= in->threshold - NEAR_THRESHOLD && f < in->threshold + NEAR_THRESHOLD;
		a->nr_stalls++;
	}
	a->near_threshold = a->nr_stalls && a->stalls[0].near_threshold;
}

void text_append(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strlen(buf);
	va_list ap;

	if (len + 1 >= size)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

void format_waker_name(char *buf, size_t size, const struct waited_on *w)
{
	if (w->ctx != PP_WAKE_TASK)
		snprintf(buf, size, "%s", wake_ctx_name(w->ctx));
	else
		snprintf(buf, size, "thread %u (%.*s)", w->tid, (int)sizeof(w->comm),
			 w->comm[0] ? w->comm : "?");
}

/* The verdict and every notable stall in one line, so that two attaches on either side of the
 * threshold name the same stalls and say they are close to it. */
static void format_verdict_line(struct analysis *a, const struct thread_result *threads,
				const struct analysis_input *in)
{
	const struct thread_result *tr = a->trainer_index >= 0 ? &threads[a->trainer_index] : NULL;
	char *buf = a->verdict_line, who[64];
	size_t size = sizeof(a->verdict_line);
	int shown = 0;

	buf[0] = 0;
	text_append(buf, size, "%s", verdict_name(a->verdict));
	if (a->verdict == VERDICT_CPU)
		text_append(buf, size, ": the trainer computes on the CPU %.1f%% of the time",
		       a->verdict_fraction * 100);
	else if (a->verdict == VERDICT_GPU_UNOBSERVED)
		text_append(buf, size, ": a GPU library is mapped but its calls are not timed, so the "
		       "trainer's %.1f%% %s may be GPU wait", a->verdict_fraction * 100,
		       state_name(a->verdict_state));
	else if (a->verdict == VERDICT_GPU_BACKLOG && tr)
		text_append(buf, size, ": the trainer's GPU syncs wait %.0f ms on average, so the GPU has "
		       "that much work queued; launches blocked on a full queue read as RUNNING (%.1f%%) "
		       "and may make this loop GPU-BOUND", in->gpu_sync_mean_us / 1e3,
		       100 * frac(tr->ns, tr->wall_ns, PP_RUNNING));
	else if (a->verdict == VERDICT_WAIT_NOT_ENDED)
		text_append(buf, size, ": the trainer was off-CPU for the last %.1f%% of the window and "
		       "nothing woke it, so that time's cause is unknown", a->verdict_fraction * 100);
	else if (a->verdict != VERDICT_UNDETERMINED)
		text_append(buf, size, ": %s is %.1f%% of the trainer's time", state_name(a->verdict_state),
		       a->verdict_fraction * 100);
	if (a->verdict_waited_on >= 0) {
		const struct waited_on *w = &a->waited_on[a->verdict_waited_on];

		format_waker_name(who, sizeof(who), w);
		text_append(buf, size, ", ended by %s", who);
		if (w->thread_index >= 0)
			text_append(buf, size, ", itself on-CPU %.0f%%",
			       100 * frac(threads[w->thread_index].ns, threads[w->thread_index].wall_ns,
					  PP_RUNNING));
	}
	if (a->near_threshold && a->verdict_state == a->stalls[0].state)
		text_append(buf, size, " (near the threshold)");
	for (int i = 0; i < a->nr_stalls; i++) {
		const struct stall_note *sn = &a->stalls[i];

		if (sn->state == a->verdict_state && a->verdict != VERDICT_CPU)
			continue;
		text_append(buf, size, "%s%s %.1f%%%s", shown++ ? ", " : "; also ", state_name(sn->state),
		       sn->fraction * 100, sn->near_threshold ? " (near the threshold)" : "");
	}
	if (verdict_has_bound(a->verdict))
		text_append(buf, size, "; removing it entirely would speed the loop up by at most %.2fx",
		       a->speedup_bound);
}

void analyse(struct thread_result *threads, int n, const struct analysis_input *in,
	     struct analysis *a)
{
	const struct thread_result *tr = NULL;
	__u32 seen_tgids[PP_MAX_PROCS];
	int nr_tgids = 0;
	double best = -1, unnamed;

	memset(a, 0, sizeof(*a));
	a->verdict_waited_on = -1;
	a->trainer_index = pick_trainer(threads, n, in, &a->trainer_choice);

	for (int i = 0; i < n; i++) {
		struct thread_result *t = &threads[i];
		struct role_result *r;
		bool new_tgid = true;

		t->role = i == a->trainer_index ? ROLE_TRAINER :
			  t->tgid == in->root_pid ? ROLE_HELPER : ROLE_WORKER;
		r = &a->roles[t->role];
		r->threads++;
		r->wall_ns += t->wall_ns;
		r->gc_ns += t->gc_ns;
		r->gc_count += t->gc_count;
		for (int s = 0; s < PP_NR_STATES; s++)
			r->ns[s] += t->ns[s];
		for (int k = 0; k < nr_tgids; k++)
			if (seen_tgids[k] == t->tgid)
				new_tgid = false;
		if (new_tgid && t->role == ROLE_WORKER && nr_tgids < PP_MAX_PROCS) {
			seen_tgids[nr_tgids++] = t->tgid;
			r->processes++;
		}
		if (t->role == ROLE_WORKER && t->tid == t->tgid) {
			a->worker_loops.threads++;
			a->worker_loops.processes++;
			a->worker_loops.wall_ns += t->wall_ns;
			for (int s = 0; s < PP_NR_STATES; s++)
				a->worker_loops.ns[s] += t->ns[s];
		}
	}
	for (int r = 0; r < NR_ROLES; r++)
		if (r != ROLE_WORKER && a->roles[r].threads)
			a->roles[r].processes = 1;
	/* Worker main threads lost (thread map full): their process totals are all there is. */
	a->worker_loops_are_main_threads = a->worker_loops.wall_ns != 0;
	if (!a->worker_loops_are_main_threads)
		a->worker_loops = a->roles[ROLE_WORKER];

	a->verdict = VERDICT_UNDETERMINED;
	a->verdict_state = PP_OTHER;
	if (a->trainer_index < 0 || !threads[a->trainer_index].wall_ns) {
		a->speedup_bound = 1.0;
		format_verdict_line(a, threads, in);
		recommend(a, in, NULL, threads, n);
		return;
	}
	tr = &threads[a->trainer_index];
	if (in->wakes)
		waited_on_collect(a, threads, n, tr->tid, in->wakes, in->nr_wakes);

	for (size_t k = 0; k < NR_STALL_VERDICTS; k++) {
		double f = frac(tr->ns, tr->wall_ns, stall_verdicts[k].state);

		if (f >= in->threshold && f > best) {
			best = f;
			a->verdict = stall_verdicts[k].verdict;
			a->verdict_state = stall_verdicts[k].state;
		}
	}
	/* No stall over the threshold: compute dominates only if the trainer is on-CPU most of
	 * the time. Idle waiting on threads is a stall, never compute. */
	if (best < 0 && frac(tr->ns, tr->wall_ns, PP_RUNNING) >= 0.5) {
		a->verdict = VERDICT_CPU;
		a->verdict_state = PP_RUNNING;
	}
	a->verdict_fraction = frac(tr->ns, tr->wall_ns, a->verdict_state);
	a->verdict_waited_on = -1;
	/* A wait no wakeup named could be any stall: when it is over the threshold and larger
	 * than every named stall, it could carry another verdict, and a wrong verdict is worse
	 * than none. (Compute cannot hide in it: the thread was off-CPU.) */
	unnamed = tr->wall_ns ? (double)tr->open_wait_ns / tr->wall_ns : 0;
	if (unnamed >= in->threshold && unnamed > best) {
		a->verdict = VERDICT_WAIT_NOT_ENDED;
		a->verdict_state = PP_OTHER;
		a->verdict_fraction = unnamed;
	}
	if (a->verdict == VERDICT_WAITING_ON_THREAD)
		judge_thread_wait(a, threads, in);
	/* Time inside an unprobed GPU synchronise is RUNNING (spinning) or a wait the driver's own
	 * thread ends: these verdicts may be GPU-BOUND in disguise, and a wrong verdict is worse
	 * than none. Data, I/O and communication waits are not made of GPU time. */
	if (in->gpu_unprobed && (a->verdict == VERDICT_CPU || a->verdict == VERDICT_UNDETERMINED ||
				 a->verdict == VERDICT_WAITING_ON_THREAD)) {
		a->verdict = VERDICT_GPU_UNOBSERVED;
		a->verdict_waited_on = -1;
	}
	/* The GPU runs far behind, yet GPU_WAIT is no stall over the threshold: the loop syncs
	 * rarely, and in between a launch on a full queue blocks (spinning: RUNNING), as do the
	 * threads waiting on the launching thread. Those verdicts may be GPU-BOUND in disguise. */
	if (tr->gpu_calls && in->gpu_sync_mean_us >= GPU_BACKLOG_US &&
	    (a->verdict == VERDICT_CPU || a->verdict == VERDICT_UNDETERMINED ||
	     a->verdict == VERDICT_WAITING_ON_THREAD || a->verdict == VERDICT_DATA_LOADING_THREAD)) {
		a->verdict = VERDICT_GPU_BACKLOG;
		a->verdict_state = PP_GPU_WAIT;
		a->verdict_fraction = frac(tr->ns, tr->wall_ns, PP_GPU_WAIT);
		a->verdict_waited_on = -1;
	}
	note_stalls(a, in, tr);
	/* Unattributed sleep is no stall a fix is known for, and compute none at all: no bound
	 * to promise. */
	a->speedup_bound = verdict_has_bound(a->verdict) ? speedup_bound(a->verdict_fraction) : 1.0;
	format_verdict_line(a, threads, in);
	recommend(a, in, tr, threads, n);
}

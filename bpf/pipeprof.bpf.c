// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Per-thread state accounting for a training job's process tree (../shared/stall-model.md).
 *
 * Each tracked thread carries a phase (on-CPU, runnable, off-CPU) and the time it entered it.
 * Time is added to a state only when the thread leaves a phase, so every nanosecond of a
 * thread's life in the window lands in exactly one state. An off-CPU episode's cause is known
 * only at its wakeup, so it is accounted at switch-in from what the waker looked like.
 */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "pipeprof.h"
#include "pipeprof.bpf.h"
#include "core_fixes.bpf.h"

#define TASK_RUNNING	0
#define NET_RX_VEC	3
/* include/linux/preempt.h */
#define SOFTIRQ_OFFSET	(1U << 8)
#define HARDIRQ_MASK	(0xfU << 16)
#define NMI_MASK	(0xfU << 20)

const volatile bool sched_switch_has_prev_state = true;
const volatile bool has_block_io_start = true;
/* --tid: the trainer, when the user named it; 0 lets the wake rules guess. */
const volatile __u32 trainer_tid = 0;
/* `pipeprof hist`: which histograms to keep (bit per enum pp_hist_kind), per what, and the
 * time unit of their slots in ns (1000: usecs, 1000000: msecs, as BCC's -m). */
const volatile __u32 hist_kinds = 0;
const volatile __u32 hist_keying = PP_HKEY_NONE;
const volatile __u64 hist_time_div = 1000;
/* Record who ended each wait (the wakers map), for the report's "waited on". */
const volatile bool record_wakers = false;
/* Where this CPU's preempt count lies relative to its run queue (core_fixes.bpf.h); 0 when
 * userspace could not find both in the kernel's BTF. */
const volatile __s64 preempt_count_rq_delta = 0;

/* 0 while pipeprof is still attaching: processes are followed but no time is accounted, so
 * the window opens only once every probe is in place. Threads first seen later are taken to
 * have existed since then. */
__u64 window_start_ns = 0;
/* Set when the report is taken: nothing after it is accounted while the maps are read (the
 * probes themselves take seconds to detach), so every thread's states sum to the window. */
__u64 window_end_ns = 0;
/* Which half of the hists map events go to. Userspace flips it, waits for a grace period,
 * then drains the other half, which no program can be writing any more. */
__u32 hist_epoch = 0;
/* Set by userspace once the start-up check proved the preempt count reads right; until then
 * (and for good where it does not) interrupt context comes from the tracepoint nesting. */
bool irq_from_preempt_count = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct pp_proc);
} tracked_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct pp_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PP_NR_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PP_MAX_GPU_APIS);
	__type(key, __u32);
	__type(value, struct pp_gpu_api_stats);
} gpu_api_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pp_io_stats);
} io_stats SEC(".maps");

struct inflight_rq {
	__u64 issue_ns;		/* 0 until issued */
	__u32 tid, tgid;	/* the submitter */
};

/* Keyed by request pointer. LRU: a request merged into another never completes under its own
 * pointer, and its entry must not fill the map for good. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PP_MAX_INFLIGHT_RQ);
	__type(key, __u64);
	__type(value, struct inflight_rq);
} inflight_rq SEC(".maps");

/* Preallocated: a map that allocates on insert fails inserts from a program that interrupts
 * another allocation on the same CPU, and did under load. Deleted entries are recycled, which
 * is safe only because userspace deletes those of the epoch no program writes any more.
 * Userspace sizes it (2 epochs) before load. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * PP_MAX_HISTS);
	__type(key, struct pp_hist_key);
	__type(value, struct pp_hist);
} hists SEC(".maps");

static struct pp_hist zero_hist;

/* Preallocated for the same reason as hists: inserts come from the scheduler's hot path. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_MAX_WAKERS);
	__type(key, struct pp_waker_key);
	__type(value, struct pp_waker_val);
} wakers SEC(".maps");

/* Per CPU: the softirq vector being served, and the fallback's hardirq nesting. A wakeup
 * raised inside an interrupt runs with `current` set to whichever task was interrupted, which
 * is not the waker. */
struct irq_ctx {
	__u32 hardirq_depth;	/* fallback only: device handlers and hrtimer callbacks */
	__u32 softirq_vec;	/* vector being served, plus one; 0 before the first seen */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct irq_ctx);
} irq_ctx SEC(".maps");

static __always_inline struct irq_ctx *irq_ctx_here(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&irq_ctx, &zero);
}

static __always_inline void count(enum pp_counter c)
{
	__u32 key = c;
	__u64 *v = bpf_map_lookup_elem(&counters, &key);

	if (v)
		*v += 1;
}

/* The interrupt state of this CPU as the CPU itself keeps it, or false when it cannot be read.
 * x86 folds an inverted need-resched flag into bit 31, so no value is out of band. */
static __always_inline bool cpu_preempt_count(__u32 *pc)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct rq *rq = task_cpu_rq(task);

	if (!rq || !preempt_count_rq_delta)
		return false;
	return !bpf_probe_read_kernel(pc, sizeof(*pc), (void *)((__u64)rq + preempt_count_rq_delta));
}

/* Where the event that runs this program was raised. The softirq vector is trusted only while
 * the preempt count says a softirq is being served, and every serving starts with an entry
 * event that sets it, so a softirq in flight at attach cannot leave it wrong for later ones. */
static __always_inline __u32 wake_context(void)
{
	struct irq_ctx *irq = irq_ctx_here();
	bool net = irq && irq->softirq_vec == NET_RX_VEC + 1;
	__u32 pc;

	if (irq_from_preempt_count) {
		if (cpu_preempt_count(&pc)) {
			if (pc & (NMI_MASK | HARDIRQ_MASK))
				return PP_WAKE_HARDIRQ;
			if (!(pc & SOFTIRQ_OFFSET))
				return PP_WAKE_TASK;
			return net ? PP_WAKE_SOFTIRQ_NET : PP_WAKE_SOFTIRQ;
		}
	}
	if (irq && irq->hardirq_depth)
		return PP_WAKE_HARDIRQ;
	if (irq && irq->softirq_vec)
		return net ? PP_WAKE_SOFTIRQ_NET : PP_WAKE_SOFTIRQ;
	return PP_WAKE_TASK;
}

/* Masking, not comparing, keeps the index provably in bounds after clang's register moves. */
#define STATE_IDX(s) ((s) & (PP_NR_STATES - 1))
_Static_assert((PP_NR_STATES & (PP_NR_STATES - 1)) == 0, "state count must be a power of two");

static __always_inline bool hist_on(__u32 kind)
{
	return hist_kinds & (1u << kind);
}

/*
 * One event of histogram (kind, sub) for thread tid of process tgid: count it, add sum and aux,
 * and put sample in its log2 slot when slotted (a kernel launch with no previous one to
 * measure a gap from is counted but has no sample).
 */
static __always_inline void hist_record(__u32 kind, __u32 sub, __u32 tid, __u32 tgid,
					__u64 sample, bool slotted, __u64 sum, __u64 aux)
{
	struct pp_hist_key key = { .kind = kind, .sub = sub, .epoch = hist_epoch };
	struct pp_hist *h;

	if (kind == PP_HK_BATCH_WAIT || kind == PP_HK_STEP || hist_keying == PP_HKEY_THREAD)
		key.id = tid;	/* userspace picks the trainer's */
	else if (hist_keying == PP_HKEY_PROCESS)
		key.id = tgid;
	h = bpf_map_lookup_elem(&hists, &key);
	if (!h) {
		bpf_map_update_elem(&hists, &key, &zero_hist, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&hists, &key);
		if (!h) {
			count(PP_CNT_HIST_FULL);
			return;
		}
	}
	__sync_fetch_and_add(&h->count, 1);
	if (sum)
		__sync_fetch_and_add(&h->sum, sum);
	if (aux)
		__sync_fetch_and_add(&h->aux, aux);
	if (slotted)
		hist_add(h->slots, sample);
}

static __always_inline void hist_time(__u32 kind, __u32 sub, __u32 tid, __u32 tgid, __u64 ns)
{
	if (hist_on(kind))
		hist_record(kind, sub, tid, tgid, ns / hist_time_div, true, ns, 0);
}

static __always_inline bool in_root_process(__u32 tgid)
{
	struct pp_proc *proc = bpf_map_lookup_elem(&tracked_procs, &tgid);

	return proc && proc->is_root;
}

static __always_inline bool accounting(__u64 now)
{
	return window_start_ns && (!window_end_ns || now <= window_end_ns);
}

static __always_inline void add_state(struct pp_thread *t, __u32 state, __u64 from, __u64 to)
{
	/* An event that read the clock just before the window closed. */
	if (window_end_ns && to > window_end_ns)
		to = window_end_ns;
	if (to > from)
		t->ns[STATE_IDX(state)] += to - from;
}

static __always_inline __u32 oncpu_state(struct pp_thread *t)
{
	return t->gpu_depth ? PP_GPU_WAIT : PP_RUNNING;
}

/* First sighting of a thread of a tracked process that predates the attach: its phase until
 * this first event is unknown. Out of line, so the zeroed record is built only here and not
 * on every switch of every task on the machine. */
static __noinline struct pp_thread *thread_first_seen(struct task_struct *task, __u32 tid)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct pp_thread fresh = {};

	if (!bpf_map_lookup_elem(&tracked_procs, &tgid))
		return NULL;
	pp_thread_init(&fresh, tgid, PP_PHASE_UNKNOWN, window_start_ns);
	BPF_CORE_READ_STR_INTO(&fresh.comm, task, comm);
	if (bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&threads, &tid)) {
		count(PP_CNT_THREADS_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}

static __always_inline struct pp_thread *thread_of(struct task_struct *task)
{
	__u32 tid = task->pid;	/* a trusted BTF pointer: a plain load, no helper call */
	struct pp_thread *t;

	if (!tid)	/* the idle task: a large share of all switches */
		return NULL;
	t = bpf_map_lookup_elem(&threads, &tid);
	return t ? t : thread_first_seen(task, tid);
}

/* The histograms of an off-CPU episode [since, woke) and the run-queue wait [queued, now)
 * that followed it; a thread first seen asleep has no known start. */
static __always_inline void hist_switch_in(struct pp_thread *t, __u32 tid, __u32 cause, __u64 since,
					   __u64 woke, __u64 queued, __u64 now)
{
	if (t->phase == PP_PHASE_OFFCPU && woke > since) {
		hist_time(PP_HK_OFFCPU, STATE_IDX(cause), tid, t->tgid, woke - since);
		if (cause == PP_DATA_WAIT && hist_on(PP_HK_BATCH_WAIT) && in_root_process(t->tgid))
			hist_time(PP_HK_BATCH_WAIT, 0, tid, t->tgid, woke - since);
	}
	if (queued && queued <= now)
		hist_time(PP_HK_RUNQ, 0, tid, t->tgid, now - queued);
}

/* The wait of tid that ended after off_ns off-CPU was ended by the waker sched_waking saw. */
static __noinline void record_waker(struct pp_thread *t, __u32 tid, __u32 cause, __u64 off_ns)
{
	struct pp_waker_key key = {
		.wakee = tid, .waker = t->waker_tid, .waker_tgid = t->waker_tgid,
		.ctx = t->wake_ctx, .cause = cause,
	};
	struct pp_waker_val *v, zero = {};

	v = bpf_map_lookup_elem(&wakers, &key);
	if (!v) {
		bpf_map_update_elem(&wakers, &key, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&wakers, &key);
		if (!v) {
			count(PP_CNT_WAKERS_FULL);
			return;
		}
	}
	__sync_fetch_and_add(&v->ns, off_ns);
	__sync_fetch_and_add(&v->count, 1);
}

/* Close the off-CPU (or unknown) stretch that ends now with the thread getting a CPU. */
static void account_switch_in(struct pp_thread *t, __u32 tid, __u64 now)
{
	__u64 since = t->phase_start_ns, runq_from;
	__u32 cause;

	if (t->phase == PP_PHASE_RUNNABLE) {
		add_state(t, t->gpu_depth ? PP_GPU_WAIT : PP_RUNQ, since, now);
		if (hist_kinds)
			hist_switch_in(t, tid, PP_RUNQ, since, since, since, now);
		return;
	}
	if (t->phase != PP_PHASE_OFFCPU && t->phase != PP_PHASE_UNKNOWN)
		return;

	if (t->phase == PP_PHASE_OFFCPU && t->offcpu_iowait)
		cause = PP_IO_WAIT;
	else if (t->woken_ns >= t->oncpu_since_ns)
		/* Woken during this sleep, or raced with its switch-out. */
		cause = t->wake_cause;
	else if (t->phase == PP_PHASE_UNKNOWN)
		/* Runnable at attach (preempted before we looked). */
		cause = PP_RUNQ;
	else
		cause = PP_OTHER;

	/* RUNQ starts when the thread is on a run queue, as the kernel's run_delay does; a
	 * remote wakeup is queued to the target CPU by IPI, and that latency (an idle CPU
	 * waking up) is part of the wait, not CPU contention. */
	runq_from = t->enqueued_ns >= t->woken_ns ? t->enqueued_ns : t->woken_ns;
	if (t->gpu_depth) {
		add_state(t, PP_GPU_WAIT, since, now);
	} else if (cause != PP_RUNQ && t->woken_ns > since && runq_from <= now) {
		add_state(t, cause, since, runq_from);
		add_state(t, PP_RUNQ, runq_from, now);
	} else {
		add_state(t, cause, since, now);
	}
	if (hist_kinds) {
		bool woken = t->woken_ns > since && runq_from <= now;

		hist_switch_in(t, tid, t->gpu_depth ? PP_GPU_WAIT : cause, since,
			       woken ? runq_from : now, woken ? runq_from : 0, now);
	}
	if (cause == PP_RUNQ)
		return;
	if (record_wakers && t->phase == PP_PHASE_OFFCPU && t->woken_ns >= t->oncpu_since_ns &&
	    t->woken_ns > since)
		record_waker(t, tid, t->gpu_depth ? PP_GPU_WAIT : cause, t->woken_ns - since);
	/* A blocking GPU sync is a GPU wait whoever woke it; a relay passes that on too. */
	t->last_wait = t->gpu_depth ? PP_GPU_WAIT : cause;
	t->last_wait_depth = t->gpu_depth || cause != t->wake_cause ? 0 : t->wake_depth;
	t->last_wait_end_ns = now;
	t->ran_since_wait_ns = 0;
}

/* On-CPU time counts towards a relay's budget from its switch-in or the end of its wait,
 * whichever is later (a GPU sync returns while the thread is on-CPU). */
static __always_inline __u64 relay_run_from(struct pp_thread *t)
{
	return t->last_wait_end_ns > t->oncpu_since_ns ? t->last_wait_end_ns : t->oncpu_since_ns;
}

static __always_inline void account_oncpu(struct pp_thread *t, __u64 now)
{
	if (t->phase == PP_PHASE_ONCPU || t->phase == PP_PHASE_UNKNOWN)
		add_state(t, oncpu_state(t), t->phase_start_ns, now);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 now = bpf_ktime_get_ns();
	struct pp_thread *t;
	__s64 prev_state;

	count(PP_CNT_SCHED_EVENTS);
	if (!irq_from_preempt_count) {
		/* No CPU switches tasks inside an interrupt: whatever nesting the fallback counted
		 * here (an exit it never saw) is over. */
		struct irq_ctx *irq = irq_ctx_here();

		if (irq)
			irq->hardirq_depth = irq->softirq_vec = 0;
	}
	if (!accounting(now))
		return 0;

	t = thread_of(prev);
	if (t && t->phase != PP_PHASE_EXITED) {
		if (sched_switch_has_prev_state)
			prev_state = (__s64)ctx[3];
		else
			prev_state = task_state(prev);
		if (t->phase == PP_PHASE_ONCPU)
			t->ran_since_wait_ns += now - relay_run_from(t);
		account_oncpu(t, now);
		t->phase_start_ns = now;
		if (preempt || prev_state == TASK_RUNNING) {
			t->phase = PP_PHASE_RUNNABLE;
		} else {
			t->phase = PP_PHASE_OFFCPU;
			t->offcpu_iowait = task_in_iowait(prev);
		}
	}

	t = thread_of(next);
	if (t && t->phase != PP_PHASE_EXITED) {
		account_switch_in(t, next->pid, now);
		t->phase = PP_PHASE_ONCPU;
		t->phase_start_ns = now;
		t->oncpu_since_ns = now;
	}
	return 0;
}

/* The trainer hands out work, not data: its wakeups never relay. Where --tid does not name it,
 * its candidates (the main thread, any thread that calls the GPU) are taken for it. */
static __always_inline bool may_relay(struct pp_thread *waker, __u32 waker_tid, __u32 waker_tgid)
{
	if (trainer_tid)
		return waker_tid != trainer_tid;
	return waker_tid != waker_tgid && !waker->gpu_calls;
}

/* Which stall an off-CPU wait ends as, judged in the waker's context (stall model), and who
 * ended it. */
static __always_inline void judge_wakeup(struct pp_thread *wakee, __u32 wakee_tid, __u64 now)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 waker_tid = (__u32)id, waker_tgid = id >> 32, ctx = wake_context(), relayed;
	struct pp_proc *waker_proc;
	struct pp_thread *waker;

	wakee->wake_ctx = ctx;
	wakee->wake_depth = 0;
	wakee->waker_tid = wakee->waker_tgid = 0;
	if (ctx != PP_WAKE_TASK) {
		wakee->wake_cause = ctx == PP_WAKE_SOFTIRQ_NET ? PP_COMM_WAIT : PP_OTHER;
		return;
	}
	wakee->waker_tid = waker_tid;
	wakee->waker_tgid = waker_tgid;
	wakee->wake_cause = PP_OTHER;
	if (waker_tid == wakee_tid)
		return;
	waker_proc = bpf_map_lookup_elem(&tracked_procs, &waker_tgid);
	if (!waker_proc)
		return;
	/* Any thread of a descendant process is a WORKER: a DataLoader worker delivering a
	 * batch, or feeding its own loop. */
	if (!waker_proc->is_root) {
		wakee->wake_cause = PP_DATA_WAIT;
		return;
	}
	wakee->wake_cause = PP_THREAD_WAIT;
	if (waker_tgid != wakee->tgid)
		return;	/* the job's process handing work to a worker */
	waker = bpf_map_lookup_elem(&threads, &waker_tid);
	if (!waker || !may_relay(waker, waker_tid, waker_tgid))
		return;
	relayed = pp_chain_cause(waker->last_wait, waker->last_wait_depth,
				 waker->ran_since_wait_ns + (now - relay_run_from(waker)),
				 now - waker->last_wait_end_ns);
	if (relayed == PP_NO_CAUSE)
		return;
	wakee->wake_cause = relayed;
	wakee->wake_depth = waker->last_wait_depth + 1;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(on_sched_waking, struct task_struct *p)
{
	__u64 now = bpf_ktime_get_ns();
	struct pp_thread *t;

	if (!accounting(now))
		return 0;
	t = thread_of(p);
	if (!t || t->phase == PP_PHASE_EXITED)
		return 0;
	judge_wakeup(t, p->pid, now);
	t->woken_ns = now;
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_sched_wakeup, struct task_struct *p)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = p->pid;
	struct pp_thread *t;

	if (!accounting(now))
		return 0;
	/* Only threads sched_waking already saw: this may run on the target CPU in the
	 * wakeup IPI, where nothing about the waker is known. */
	t = bpf_map_lookup_elem(&threads, &tid);
	if (t && t->phase != PP_PHASE_EXITED)
		t->enqueued_ns = now;
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tgid = BPF_CORE_READ(parent, tgid);
	__u32 tid = BPF_CORE_READ(child, pid), tgid = BPF_CORE_READ(child, tgid);
	__u64 now = bpf_ktime_get_ns();
	struct pp_thread fresh = {};
	struct pp_proc proc = {};

	if (!bpf_map_lookup_elem(&tracked_procs, &parent_tgid))
		return 0;

	if (tid == tgid) {
		proc.parent_tgid = parent_tgid;
		proc.fork_ns = now;
		if (bpf_map_update_elem(&tracked_procs, &tgid, &proc, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&tracked_procs, &tgid)) {
			count(PP_CNT_PROCS_FULL);
			return 0;
		}
		count(PP_CNT_FORKS);
	}
	if (!accounting(now))
		return 0;

	/* New tasks start runnable: wake_up_new_task() follows. */
	pp_thread_init(&fresh, tgid, PP_PHASE_RUNNABLE, now);
	BPF_CORE_READ_STR_INTO(&fresh.comm, parent, comm);
	if (bpf_map_update_elem(&threads, &tid, &fresh, BPF_ANY))
		count(PP_CNT_THREADS_FULL);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_sched_process_exec, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	struct pp_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (t)
		BPF_CORE_READ_STR_INTO(&t->comm, p, comm);
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
		account_oncpu(t, now);
		t->phase = PP_PHASE_EXITED;
		t->phase_start_ns = now;
		t->exit_ns = now;
	}
	if (!task_group_dead(p))
		return 0;
	proc = bpf_map_lookup_elem(&tracked_procs, &tgid);
	if (proc && !proc->exit_ns) {
		proc->exit_ns = now;
		count(PP_CNT_PROC_EXITS);
	}
	return 0;
}

/* Whether a probed call entered with stack pointer sp runs inside the outermost call in
 * progress, entered at outer_sp: the stack grows down, so a nested call's frame is below. A
 * call at or above it is a new call, and the one in progress never returned. */
static __always_inline bool nested_call(__u64 outer_sp, __u64 sp)
{
	return sp < outer_sp;
}

/* GPU API uprobes: the attach cookie is the API's id in userspace's table. */
SEC("uprobe")
int BPF_KPROBE(on_gpu_enter)
{
	__u32 api = bpf_get_attach_cookie(ctx);
	__u64 now = bpf_ktime_get_ns();
	struct task_struct *task;
	struct pp_thread *t;

	if (api == PP_SELFTEST_API) {
		count(PP_CNT_SELFTEST_HITS);
		return 0;
	}
	if (!accounting(now))
		return 0;
	task = (struct task_struct *)bpf_get_current_task_btf();
	t = thread_of(task);
	if (!t || t->phase == PP_PHASE_EXITED)
		return 0;
	count(PP_CNT_UPROBE_HITS);
	if (t->gpu_depth && !nested_call(t->gpu_enter_sp, PT_REGS_SP(ctx))) {
		/* The call in progress never returned (longjmp, or its return probe attached
		 * after it began): its wait ended when this call began. */
		count(PP_CNT_UNRETURNED_CALLS);
		add_state(t, PP_GPU_WAIT, t->phase_start_ns, now);
		t->phase_start_ns = now;
		t->gpu_depth = 0;
	}
	if (t->gpu_depth == 0) {
		account_oncpu(t, now);
		t->phase = PP_PHASE_ONCPU;
		t->phase_start_ns = now;
		t->gpu_enter_ns = now;
		t->gpu_enter_sp = PT_REGS_SP(ctx);
		t->gpu_api = api;
		t->gpu_calls++;
	}
	if (t->gpu_depth < PP_MAX_GPU_DEPTH)
		t->gpu_depth++;
	else
		count(PP_CNT_GPU_DEPTH_OVERFLOW);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(on_gpu_return)
{
	__u32 api = bpf_get_attach_cookie(ctx);
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns(), took;
	struct pp_gpu_api_stats *stats;
	struct pp_thread *t;

	if (api == PP_SELFTEST_API) {
		count(PP_CNT_SELFTEST_HITS);
		return 0;
	}
	if (!accounting(now))
		return 0;
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || t->phase == PP_PHASE_EXITED)
		return 0;
	if (t->gpu_depth == 0) {
		/* Attached while this call was already running. */
		count(PP_CNT_URETPROBE_ORPHANS);
		return 0;
	}
	if (--t->gpu_depth)
		return 0;

	add_state(t, PP_GPU_WAIT, t->phase_start_ns, now);
	t->phase = PP_PHASE_ONCPU;
	t->phase_start_ns = now;
	/* A thread back from waiting on the GPU may relay that wait (stall model's chains). */
	t->last_wait = PP_GPU_WAIT;
	t->last_wait_depth = 0;
	t->last_wait_end_ns = now;
	t->ran_since_wait_ns = 0;

	api = t->gpu_api;
	took = now - t->gpu_enter_ns;
	stats = bpf_map_lookup_elem(&gpu_api_stats, &api);
	if (stats) {
		__sync_fetch_and_add(&stats->calls, 1);
		__sync_fetch_and_add(&stats->total_ns, took);
		hist_add(stats->slots, took / 1000);
	}
	hist_time(PP_HK_GPU_SYNC, api, tid, t->tgid, took);
	return 0;
}

/* The tracked thread making a probed call now, if the window is open. */
static __always_inline struct pp_thread *caller_thread(__u64 now)
{
	struct pp_thread *t;

	if (!accounting(now))
		return NULL;
	t = thread_of((struct task_struct *)bpf_get_current_task_btf());
	return t && t->phase != PP_PHASE_EXITED ? t : NULL;
}

/* Kernel launches (hist launch): entry only, the gap since the thread's previous launch. */
SEC("uprobe")
int BPF_KPROBE(on_launch)
{
	__u32 api = PP_COOKIE_API(bpf_get_attach_cookie(ctx));
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns(), last;
	struct pp_thread *t = caller_thread(now);

	if (!t)
		return 0;
	last = t->last_launch_ns;
	t->last_launch_ns = now;
	hist_record(PP_HK_LAUNCH, api, tid, t->tgid, (now - last) / hist_time_div, last != 0,
		    last ? now - last : 0, 0);
	return 0;
}

/* cudaMemcpyKind -> enum pp_copy_dir; they agree, and anything else is unified addressing. */
static __always_inline __u32 copy_dir_of_kind(__u64 kind)
{
	return kind < PP_NR_COPY_DIRS ? kind : PP_COPY_DEFAULT;
}

/* Host/device copies (hist memcpy): bytes at entry; a synchronous copy's return, below, gives
 * its throughput. */
SEC("uprobe")
int BPF_KPROBE(on_copy, void *dst, const void *src, __u64 bytes, __u64 kind)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), now = bpf_ktime_get_ns();
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), dir = PP_COOKIE_DIR(cookie);
	struct pp_thread *t = caller_thread(now);

	if (!t)
		return 0;
	dir = dir == PP_COPY_DIR_FROM_ARG ? copy_dir_of_kind(kind) : dir;
	hist_record(PP_HK_COPY_BYTES, dir, tid, t->tgid, bytes, true, bytes, 0);
	t->copy_enter_ns = now;
	t->copy_bytes = bytes;
	t->copy_dir = dir;
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(on_copy_return)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns(), took;
	struct pp_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (!t || !t->copy_enter_ns || !accounting(now))
		return 0;
	took = now - t->copy_enter_ns;
	t->copy_enter_ns = 0;
	if (!took)
		return 0;
	/* bytes per microsecond is MB/s */
	hist_record(PP_HK_COPY_RATE, t->copy_dir, tid, t->tgid, t->copy_bytes * 1000 / took, true,
		    t->copy_bytes, took);
	return 0;
}

/* Training steps (hist step): one autograd backward pass per step; the time between the
 * starts of consecutive outermost passes of a thread is its step time. */
SEC("uprobe")
int BPF_KPROBE(on_step)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns(), last;
	struct pp_thread *t = caller_thread(now);

	if (!t)
		return 0;
	if (t->step_depth && !nested_call(t->step_enter_sp, PT_REGS_SP(ctx))) {
		count(PP_CNT_UNRETURNED_CALLS);
		t->step_depth = 0;
	}
	if (t->step_depth++)
		return 0;
	t->step_enter_sp = PT_REGS_SP(ctx);
	last = t->last_step_ns;
	t->last_step_ns = now;
	if (last)
		hist_time(PP_HK_STEP, 0, tid, t->tgid, now - last);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(on_step_return)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pp_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (t && t->step_depth)
		t->step_depth--;
	return 0;
}

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

static __always_inline bool current_tracked(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	return bpf_map_lookup_elem(&tracked_procs, &tgid);
}

static __always_inline void rq_mark(struct request *rq, __u64 ts)
{
	__u64 key = (__u64)rq, id = bpf_get_current_pid_tgid();
	struct inflight_rq val = { .issue_ns = ts, .tid = (__u32)id, .tgid = id >> 32 };

	if (bpf_map_update_elem(&inflight_rq, &key, &val, BPF_ANY))
		count(PP_CNT_RQ_FULL);
}

/* 5a80bd075f3b ("block: introduce block_io_start/block_io_done tracepoints", 6.5) fires in
 * the submitter's context; block_rq_issue may run from kblockd, so it attributes only where
 * block_io_start is missing. */
SEC("tp_btf/block_io_start")
int BPF_PROG(on_block_io_start, struct request *rq)
{
	if (current_tracked())
		rq_mark(rq, 0);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(on_block_rq_issue, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct inflight_rq *in = bpf_map_lookup_elem(&inflight_rq, &key);

	if (in)
		in->issue_ns = bpf_ktime_get_ns();
	else if (!has_block_io_start && current_tracked())
		rq_mark(rq, bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(on_block_rq_complete, struct request *rq)
{
	__u64 key = (__u64)rq, took, now;
	struct inflight_rq *in = bpf_map_lookup_elem(&inflight_rq, &key);
	struct pp_io_stats *stats;
	__u32 zero = 0;

	if (!in)
		return 0;
	now = bpf_ktime_get_ns();
	if (in->issue_ns && accounting(now)) {
		took = now - in->issue_ns;
		stats = bpf_map_lookup_elem(&io_stats, &zero);
		if (stats) {
			__sync_fetch_and_add(&stats->count, 1);
			__sync_fetch_and_add(&stats->total_ns, took);
			hist_add(stats->slots, took / 1000);
		}
		hist_time(PP_HK_IO, request_disk_dev(rq), in->tid, in->tgid, took);
	}
	bpf_map_delete_elem(&inflight_rq, &key);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* BPF-only helpers shared by pipeprof's programs. */
#ifndef PIPEPROF_BPF_H
#define PIPEPROF_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "pipeprof.h"
#include "dispatch.h"
#include "core_fixes.bpf.h"

/* The last slot is open-ended. */
static __always_inline __u32 hist_slot(__u64 value)
{
	__u32 slot = pp_log2_u64(value);

	return slot < PP_HIST_SLOTS ? slot : PP_HIST_SLOTS - 1;
}

static __always_inline void hist_add(__u64 *slots, __u64 value)
{
	__u32 slot = hist_slot(value);

	/* clang would index with the unclamped log2 on the path where the clamp changed
	 * nothing, which the verifier cannot bound: check the register that indexes. */
	asm volatile("" : "+r"(slot));
	if (slot < PP_HIST_SLOTS)
		__sync_fetch_and_add(&slots[slot], 1);
}

/*
 * The programs are split by concern (the .bpf.c files of bpf/pipeprof/) and linked into one
 * object. Maps and globals are defined once, in state.bpf.c, and declared here for all.
 */
#ifdef PP_DEFINE_STATE
#define PP_STATE
#else
#define PP_STATE extern
#endif

#define TASK_RUNNING	0
#define NET_RX_VEC	3
#define PF_EXITING	0x00000004	/* include/linux/sched.h: set in do_exit() */
/* include/linux/preempt.h */
#define SOFTIRQ_OFFSET	(1U << 8)
#define HARDIRQ_MASK	(0xfU << 16)
#define NMI_MASK	(0xfU << 20)

extern const volatile bool sched_switch_has_prev_state;
/* Under the daemon's dispatcher (dispatch.h): this job's id in pid_job; 0 under any other
 * command, whose object attaches its own scheduler programs. */
extern const volatile __u8 dispatch_id;
extern const volatile bool has_block_io_start;
/* --tid: the trainer, when the user named it; 0 lets the wake rules guess. */
extern const volatile __u32 trainer_tid;
/* `pipeprof hist`: which histograms to keep (bit per enum pp_hist_kind), per what, and the
 * time unit of their slots in ns (1000: usecs, 1000000: msecs, as BCC's -m). */
extern const volatile __u32 hist_kinds;
extern const volatile __u32 hist_keying;
extern const volatile __u64 hist_time_div;
extern const volatile __u32 wait_stack_tid;
extern const volatile __u32 wait_stack_scope;
extern __u32 verifier_blind_zero;
/* 1 once a pinned host region has been stored: until then no copy can be from one. */
extern __u32 pinned_regions_stored;
extern const volatile bool step_records_on;
extern const volatile bool step_probe_on;
extern const volatile __u32 step_wait_tid;
/* pystack.bpf.c: the trainer's wait stacks, and who ended each wait. */
int py_wait_begins(__u32 tid, __u32 tgid);
int py_wait_woken(__u32 wakee_tid);
int py_wait_ends(__u32 tid, __u32 cause, __u64 wait_ns);
/* sched.bpf.c; switch_in_rec() also sends the episodes (`record`). */
int switch_in(struct pp_thread *t, __u32 tid, __u64 now);
int switch_in_rec(struct pp_thread *t, __u32 tid, __u64 now);
/* gpu.bpf.c */
int record_step(struct pp_thread *t, __u32 tid, __u64 now, __u32 source);
/* Record who ended each wait (the wakers map), for the report's "waited on". */
extern const volatile bool record_wakers;
/* `pipeprof record`: every state episode goes to the episodes ring buffer (record.bpf.c),
 * at most record_cap per CPU per PP_EPISODE_SLOT_NS. False everywhere else: the verifier
 * then prunes every trace of it from the scheduler programs. */
extern const volatile bool record_on;
extern const volatile __u32 record_cap;
/* record.bpf.c; state may carry PP_EP_WOKEN: the thread's waker fields name who ended it. */
#define PP_EP_WOKEN 0x100
int record_episode(struct pp_thread *t, __u32 tid, __u32 state, __u64 from, __u64 to);
/* record.bpf.c: a kernel launch of api (a gpu_apis id) at now, as a PP_EP_LAUNCH record. */
int record_launch(struct pp_thread *t, __u32 tid, __u32 api, __u64 now);
/* Where this CPU's preempt count lies relative to its run queue (core_fixes.bpf.h); 0 when
 * userspace could not find both in the kernel's BTF. */
extern const volatile __s64 preempt_count_rq_delta;
extern const volatile __u32 drop_switch_in_every;
extern __u64 switch_ins_counted;
extern const volatile __u32 drop_wakeup_every;
extern __u64 wakeups_counted;
extern __u32 wakeup_dropped_tid;
extern struct pp_dropped_wake task_wakeups_dropped[PP_TEST_WAKE_SLOTS];
extern const volatile bool drop_woken_switch_in;
extern __u32 switch_in_dropped_tid;
extern const volatile bool drop_open_wait_end;

/* 0 while pipeprof is still attaching: processes are followed but no time is accounted, so
 * the window opens only once every probe is in place. Threads first seen later are taken to
 * have existed since then. */
extern __u64 window_start_ns;
extern bool window_start_passed;
extern bool job_is_distributed;
extern __u32 launch_epoch;
/* Set when the report is taken: nothing after it is accounted while the maps are read (the
 * probes themselves take seconds to detach), so every thread's states sum to the window. */
extern __u64 window_end_ns;
/* Which half of the hists map events go to. Userspace flips it, waits for a grace period,
 * then drains the other half, which no program can be writing any more. */
extern __u32 hist_epoch;
/* Set by userspace once the start-up check proved the preempt count reads right; until then
 * (and for good where it does not) interrupt context comes from the tracepoint nesting. */
extern bool irq_from_preempt_count;
extern __u64 naming_until_ns;


struct inflight_rq {
	__u64 issue_ns;		/* 0 until issued */
	__u32 tid, tgid;	/* the submitter */
};

PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct pp_proc);
} tracked_procs SEC(".maps");

/* Sized to pid_max by userspace before load (pipeprof.h says why it exists). */
PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pp_pid_block);
} tracked_pids SEC(".maps");

/* The dispatcher's, shared through their fds when dispatch_id is set (with irq_ctx): which job
 * follows each pid, the events a job's empty slot lost, every job's sched_switch program, and
 * which job issued each block request in flight. Small and unused otherwise. */
PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pp_job_block);
} pid_job SEC(".maps");

PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} big_pid_job SEC(".maps");

PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dispatch_lost SEC(".maps");
#include "dispatch.bpf.h"

PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, PP_DISPATCH_SLOTS);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} switch_progs SEC(".maps");

PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16);
	__type(key, __u64);
	__type(value, __u32);
} rq_job SEC(".maps");

PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct pp_thread);
} threads SEC(".maps");

PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PP_NR_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PP_MAX_GPU_APIS);
	__type(key, __u32);
	__type(value, struct pp_gpu_api_stats);
} gpu_api_stats SEC(".maps");

PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pp_io_stats);
} io_stats SEC(".maps");

/* Keyed by request pointer. LRU: a request merged into another never completes under its own
 * pointer, and its entry must not fill the map for good. */
PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PP_MAX_INFLIGHT_RQ);
	__type(key, __u64);
	__type(value, struct inflight_rq);
} inflight_rq SEC(".maps");

/* Preallocated: a map that allocates on insert fails inserts from a program that interrupts
 * another allocation on the same CPU, and did under load. Deleted entries are recycled, which
 * is safe only because userspace deletes those of the epoch no program writes any more.
 * Userspace sizes it (2 epochs) before load. */
PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * PP_MAX_HISTS);
	__type(key, struct pp_hist_key);
	__type(value, struct pp_hist);
} hists SEC(".maps");

/* The switch-in's histograms, unkeyed (PP_SWITCH_HISTS). Kept in the hash map, the two a
 * switch-in adds to took the switch program from ~103 to ~148 ns a run in a ping-pong between
 * two CPUs (tools/bench/prog_cost.py, ctxload): two hashed lookups, and each add a locked one
 * on a line the other CPU had just written. Per CPU, ~124 ns. Userspace sizes it (2 epochs, or
 * 1 entry where unused) before load. */
PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * PP_SWITCH_HISTS);
	__type(key, __u32);
	__type(value, struct pp_hist);
} switch_hists SEC(".maps");


/* Preallocated for the same reason as hists: inserts come from the scheduler's hot path. */
PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_MAX_WAKERS);
	__type(key, struct pp_waker_key);
	__type(value, struct pp_waker_val);
} wakers SEC(".maps");

PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct irq_ctx);
} irq_ctx SEC(".maps");

/* Where a thread's first record is built (thread_record_new()): a pp_thread on a program's
 * frame takes most of the 512 bytes its calls may use between them. A few slots on each CPU,
 * each claimed while in use: a hard interrupt's wakeup may come as a uprobe builds one, and a
 * uprobe's program may be preempted by another task's on its CPU. */
#define PP_FRESH_SLOTS	4
struct pp_fresh_threads {
	__u64 busy[PP_FRESH_SLOTS];	/* 64-bit: the BPF atomics clang has without -mcpu=v3 */
	struct pp_thread rec[PP_FRESH_SLOTS];
};

PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pp_fresh_threads);
} fresh_threads SEC(".maps");

/* Library notes to userspace: a few a second at most, so a small buffer holds them. */
PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} notes SEC(".maps");

/* The report's per-step GPU API counts of each thread that syncs or copies (struct
 * pp_thread_gpu); sized by userspace, one entry when steps are off. Preallocated: inserts
 * come from uprobes that may interrupt an allocation on the same CPU. */
PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct pp_thread_gpu);
} thread_gpu SEC(".maps");

/* Host memory the job pinned while traced: (tgid, start) -> end (gpumem.bpf.c). */
PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_MAX_PINNED_REGIONS);
	__type(key, struct pp_pinned_key);
	__type(value, __u64);
} pinned_regions SEC(".maps");

/* Where each process maps its CUDA runtime, written by userspace as it probes it: a driver
 * launch called from there is the runtime's own (gpumem.bpf.c). */
PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct pp_text_range);
} runtime_text SEC(".maps");

/* Device memory the job allocated while traced: (tgid, pointer) -> bytes (devmem.bpf.c);
 * sized by userspace, one entry when steps are off. */
PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_MAX_DEV_ALLOCS);
	__type(key, struct pp_dev_alloc_key);
	__type(value, __u64);
} dev_allocs SEC(".maps");

/* Each process's outstanding device memory (struct pp_dev_mem), read by on_step too. */
PP_STATE struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct pp_dev_mem);
} dev_mem SEC(".maps");

/* One zeroed histogram to insert from: too large for the stack. */
extern struct pp_hist zero_hist;
extern struct pp_thread_gpu zero_thread_gpu;
extern struct pp_dev_mem zero_dev_mem;

/* gpumem.bpf.c: global, so each is verified once whichever probes call it. */
int in_runtime(__u32 tgid, __u64 addr);
int called_from_runtime(__u32 tgid, __u64 sp);
int count_copy(__u32 tid, __u32 tgid, __u32 dir, __u64 bytes, __u64 host);
int count_sync(__u32 tid, __u32 api);
int count_nccl(__u32 tid, __u32 op, __u64 bytes);
/* nccl.bpf.c: an NCCL call's bytes at its entry, its figures at its return. */
int nccl_call_entered(struct pt_regs *ctx, __u32 tid, __u32 op);
int nccl_call_returned(__u32 tid, __u64 took);

static __always_inline struct irq_ctx *irq_ctx_here(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&irq_ctx, &zero);
}

static __always_inline void count_add(enum pp_counter c, __u64 n)
{
	__u32 key = c;
	__u64 *v = bpf_map_lookup_elem(&counters, &key);

	if (v)
		*v += n;
}

static __always_inline void count(enum pp_counter c)
{
	count_add(c, 1);
}

/* Tell userspace to look at tgid's mappings; a lost note is counted, and userspace answers a
 * count that grew with a full scan. */
static __always_inline void send_note(__u32 tgid, __u32 kind)
{
	struct pp_note *n = bpf_ringbuf_reserve(&notes, sizeof(*n), 0);

	if (!n) {
		count(PP_CNT_NOTES_LOST);
		return;
	}
	n->tgid = tgid;
	n->kind = kind;
	bpf_ringbuf_submit(n, 0);
	count(PP_CNT_NOTES);
}

/* The interrupt state of this CPU as the CPU itself keeps it, or false when it cannot be read.
 * x86 folds an inverted need-resched flag into bit 31, so no value is out of band. */
static __always_inline bool cpu_preempt_count(__u32 *pc)
{
	struct irq_ctx *irq = irq_ctx_here();
	struct task_struct *task;
	struct rq *rq;
	__u64 addr;

	if (!preempt_count_rq_delta || !irq)
		return false;
	addr = irq->preempt_count_addr;
	if (!addr) {
		/* A run queue never moves, and task_cpu_rq() answers only this CPU's. */
		task = bpf_get_current_task_btf();
		rq = task_cpu_rq(task);
		if (!rq)
			return false;
		addr = (__u64)rq + preempt_count_rq_delta;
		irq->preempt_count_addr = addr;
	}
	return !bpf_probe_read_kernel(pc, sizeof(*pc), (void *)addr);
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

/* What a network receive delivers to the job: a collective's message in a distributed job,
 * else data (a streaming dataset, a sample server). */
static __always_inline __u32 network_cause(void)
{
	return job_is_distributed ? PP_COMM_WAIT : PP_DATA_WAIT;
}

/* Masking, not comparing, keeps the index provably in bounds after clang's register moves. */
#define STATE_IDX(s) ((s) & (PP_NR_STATES - 1))
_Static_assert((PP_NR_STATES & (PP_NR_STATES - 1)) == 0, "state count must be a power of two");

static __always_inline bool hist_on(__u32 kind)
{
	return hist_kinds & (1u << kind);
}

/* The entry of key in a hash map, inserted as zero when new; NULL (counted as full) when
 * the map has no room (or, grown as it fills, no element cached). Another CPU may insert the
 * same key first: then its entry. */
static __always_inline void *map_lookup_or_init(void *map, const void *key, const void *zero,
						enum pp_counter full)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
	v = bpf_map_lookup_elem(map, key);
	if (!v)
		count(full);
	return v;
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
	h = map_lookup_or_init(&hists, &key, &zero_hist, PP_CNT_HIST_FULL);
	if (!h)
		return;
	__sync_fetch_and_add(&h->count, 1);
	if (sum)
		__sync_fetch_and_add(&h->sum, sum);
	if (aux)
		__sync_fetch_and_add(&h->aux, aux);
	if (slotted)
		hist_add(h->slots, sample);
}

/* Entry idx of this CPU's switch-in histograms. Only the switch program writes them, and it
 * runs with interrupts off: nothing on this CPU comes between a read and its write. */
static __always_inline void switch_hist_add(__u32 idx, __u64 ns)
{
	__u32 key = (hist_epoch & 1) * PP_SWITCH_HISTS + idx;
	struct pp_hist *h = bpf_map_lookup_elem(&switch_hists, &key);
	__u32 slot;

	if (!h)
		return;
	h->count++;
	h->sum += ns;
	slot = hist_slot(ns / hist_time_div);
	asm volatile("" : "+r"(slot));	/* as in hist_add() */
	if (slot < PP_HIST_SLOTS)
		h->slots[slot]++;
}

static __always_inline void hist_time(__u32 kind, __u32 sub, __u32 tid, __u32 tgid, __u64 ns)
{
	if (!hist_on(kind))
		return;
	if (hist_keying == PP_HKEY_NONE && (kind == PP_HK_OFFCPU || kind == PP_HK_RUNQ))
		switch_hist_add(kind == PP_HK_RUNQ ? PP_SWITCH_HIST_RUNQ : STATE_IDX(sub), ns);
	else
		hist_record(kind, sub, tid, tgid, ns / hist_time_div, true, ns, 0);
}

static __always_inline bool in_root_process(__u32 tgid)
{
	struct pp_proc *proc = bpf_map_lookup_elem(&tracked_procs, &tgid);

	return proc && proc->is_root;
}

/* Whether a thread's waits go out with its Python stacks: the trainer's for the report (or
 * those of one thread), every thread of the root process or of its descendants for `profile
 * --offcpu --role`. */
static __always_inline bool wants_wait_stack(__u32 tid, __u32 tgid)
{
	if (wait_stack_scope == PP_WAIT_STACKS_TID)
		return wait_stack_tid && tid == wait_stack_tid;
	return in_root_process(tgid) == (wait_stack_scope == PP_WAIT_STACKS_ROOT);
}

/* Both edges are stored a little before their time (tracer_window.c), so that a call made
 * while pipeprof stamps an edge and stores it is on the side of the edge its clock says. */
static __always_inline bool accounting(__u64 now)
{
	return window_start_ns && (window_start_passed || now >= window_start_ns) &&
	       (!window_end_ns || now <= window_end_ns);
}

/* accounting() whatever the time: opened and not yet closed. Where it holds, a probe that has
 * no use for the time itself need not read the clock to know it may account. */
static __always_inline bool window_open(void)
{
	return window_start_passed && !window_end_ns;
}

/* A wait still open when the window closed is named by its wakeup, which may come after: the
 * scheduler programs run on until naming_until_ns, and add_state() keeps every contribution
 * inside the window, so only the part of such a wait before the close is counted, as the
 * cause its wakeup reveals. */
static __always_inline bool naming(__u64 now)
{
	return accounting(now) || (window_start_ns && now <= naming_until_ns);
}

/*
 * woken and rec: constants at each call site. The scheduler programs come in two builds
 * (sched.bpf.c), rec false and true, so that without `record` not one instruction of it is
 * left in them; the others pass record_on, which the verifier prunes.
 */
static __always_inline void add_state_ep(struct pp_thread *t, __u32 tid, __u32 state, __u64 from,
					 __u64 to, bool woken, bool rec)
{
	/* An event that read the clock just before the window closed. */
	if (window_end_ns && to > window_end_ns)
		to = window_end_ns;
	if (to > from) {
		t->ns[STATE_IDX(state)] += to - from;
		/* Exactly what the total got: the trace's slices sum to the report's states. */
		if (rec)
			record_episode(t, tid, woken ? state | PP_EP_WOKEN : state, from, to);
	}
}

/* What the window holds of the stretch from since to end. */
static __always_inline __u64 window_part_ns(__u64 since, __u64 end)
{
	if (window_end_ns && end > window_end_ns)
		end = window_end_ns;
	return end > since ? end - since : 0;
}

static __always_inline void add_state(struct pp_thread *t, __u32 tid, __u32 state, __u64 from,
				      __u64 to)
{
	add_state_ep(t, tid, state, from, to, false, record_on);
}

static __always_inline __u32 oncpu_state(struct pp_thread *t)
{
	return t->gpu_depth ? pp_call_state(t->call_state) : PP_RUNNING;
}

/*
 * For a program in the thread's own context (a uprobe): it is on a CPU now, whatever its phase
 * says. Runnable, off-CPU, or first seen asleep and since woken means its switch-in was never
 * traced (pp_switch_in_unseen): place it from its CPU clock now, before the time is split at a
 * step boundary or a GPU call. Between
 * switches the clock advances only at scheduler ticks, so this places the switch-in up to a
 * tick late, and that tick reads RUNQ.
 */
static __always_inline void seen_on_cpu(struct pp_thread *t, __u32 tid, __u64 now)
{
	struct task_struct *task;
	__u64 in;

	if (!pp_switch_in_unseen(t->phase, t->exec_at_out_ns))
		return;
	task = bpf_get_current_task_btf();
	in = pp_missed_switch_in_ns(t->phase_start_ns, now, t->exec_at_out_ns,
				    task->se.sum_exec_runtime);
	if (!in)
		return;
	count(PP_CNT_SWITCH_IN_MISSED);
	if (record_on)
		switch_in_rec(t, tid, in);
	else
		switch_in(t, tid, in);
}

/* The record of a live process pipeprof follows, or NULL. An exited one's pid may have been
 * reused by a process that has nothing to do with the job. */
static __always_inline struct pp_proc *live_proc(__u32 tgid)
{
	struct pp_proc *proc = bpf_map_lookup_elem(&tracked_procs, &tgid);

	return proc && !proc->exit_ns ? proc : NULL;
}

/* What tracked_pids says of tgid (enum pp_pid_kind): one array load (the verifier inlines the
 * lookup) for the common answer, not followed. */
static __always_inline __u8 pid_kind(__u32 tgid)
{
	__u32 key = tgid / PP_PIDS_PER_BLOCK;
	struct pp_pid_block *b = bpf_map_lookup_elem(&tracked_pids, &key);

	if (b)
		return b->live[tgid % PP_PIDS_PER_BLOCK];
	/* Beyond the pid_max the map was sized for: pid_max was raised since. */
	return live_proc(tgid) ? PP_PID_LOOKUP : PP_PID_UNTRACKED;
}

/* Whether tgid is a live process pipeprof follows. */
static __always_inline bool pid_tracked(__u32 tgid)
{
	return pid_kind(tgid) != PP_PID_UNTRACKED;
}

/* The dispatcher's byte for tgid follows whether this job follows it. A fork (forked) makes a
 * new process, whatever an exited one of the same pid left; otherwise another job's mark stays:
 * the jobs' fork programs run one after another for one fork, in either order, and a pid one
 * job let go or saw exit may be another's. */
static __always_inline void dispatch_mark(__u32 tgid, bool ours, bool forked)
{
	__u32 key = tgid / PP_JOB_PIDS_PER_BLOCK, id = dispatch_id, *big;
	struct pp_job_block *b = bpf_map_lookup_elem(&pid_job, &key);
	__u8 *job;

	if (b) {
		job = &b->job[tgid % PP_JOB_PIDS_PER_BLOCK];
		if (ours ? forked || !*job : *job == dispatch_id)
			*job = ours ? dispatch_id : 0;
		return;
	}
	/* Past pid_max as it was when the dispatcher loaded. */
	if (ours) {
		if (bpf_map_update_elem(&big_pid_job, &tgid, &id, forked ? BPF_ANY : BPF_NOEXIST) &&
		    forked)
			count(PP_CNT_PROCS_FULL);
	} else {
		big = bpf_map_lookup_elem(&big_pid_job, &tgid);
		if (big && *big == id)
			bpf_map_delete_elem(&big_pid_job, &tgid);
	}
}

/* forked: tgid is a process the job just forked. */
static __always_inline void pid_set_tracked(__u32 tgid, __u8 kind, bool forked)
{
	__u32 key = tgid / PP_PIDS_PER_BLOCK;
	struct pp_pid_block *b = bpf_map_lookup_elem(&tracked_pids, &key);

	if (b)
		b->live[tgid % PP_PIDS_PER_BLOCK] = kind;
	if (dispatch_id)
		dispatch_mark(tgid, kind != PP_PID_UNTRACKED, forked);
}

/* A task's comm, read by the caller of a global function: before 6.8 (__arg_trusted) a global
 * function takes no pointer to a kernel object. */
struct pp_comm {
	char comm[16];
};

/* sched.bpf.c: a thread's first record (thread_born(), thread_first_seen()). */
int thread_record_new(const struct pp_comm *comm, __u32 tid, __u32 tgid, __u32 phase,
		      __u64 start_ns);

/* First sighting of a thread of a tracked process that predates the attach: its phase until
 * this first event is unknown. */
static __noinline struct pp_thread *thread_first_seen(struct task_struct *task, __u32 tid,
						      __u32 tgid)
{
	struct pp_comm comm = {};

	/* Born after the window closed: nothing of it is in the report. */
	if (window_end_ns && bpf_ktime_get_ns() > window_end_ns)
		return NULL;
	BPF_CORE_READ_STR_INTO(&comm.comm, task, comm);
	if (thread_record_new(&comm, tid, tgid, PP_PHASE_UNKNOWN, window_start_ns) &&
	    !bpf_map_lookup_elem(&threads, &tid)) {
		count(PP_CNT_THREADS_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}

/*
 * The record of a thread of the traced job, or NULL for any other task: most events on a busy
 * machine are other tasks', so they leave after one byte read by process, with no hash lookup,
 * no helper call to read the clock (costly under some hypervisors) and no probed read.
 */
static __always_inline struct pp_thread *thread_of(struct task_struct *task)
{
	/* Trusted BTF pointer: plain loads, no helper call. */
	__u32 tid = task->pid, tgid = task->tgid;
	struct pp_thread *t;

	if (!tid || !pid_tracked(tgid))	/* tid 0: the idle task, a large share of all switches */
		return NULL;
	t = bpf_map_lookup_elem(&threads, &tid);
	return t ? t : thread_first_seen(task, tid, tgid);
}

/* A syscall's number and arguments, as its task saved them. */
struct pp_syscall_regs {
	__u64 nr, di, si, dx, r10, r8;
};

/* sched.bpf.c: pp_retry_call() of them. */
__u64 retry_call_of(const struct pp_syscall_regs *r);

/* The call of task's wait, getting a CPU, when it waits on an object with a timeout
 * (pp_retry_call), else 0: its number and arguments are still in its saved registers
 * (x86-64's orig_ax, di, si, dx, r10, r8). bpf_task_pt_regs() came in 5.15 (dd6e10fbd9fb). */
static __always_inline __u64 retryable_wait_call(struct task_struct *task)
{
#if defined(__TARGET_ARCH_x86)
	struct pp_syscall_regs args;
	struct pt_regs *regs;

	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return 0;
	args.nr = regs->orig_ax;
	args.di = regs->di;
	args.si = regs->si;
	args.dx = regs->dx;
	args.r10 = regs->r10;
	args.r8 = regs->r8;
	return retry_call_of(&args);
#endif
	return 0;
}

/* On-CPU time counts towards a relay's budget from its switch-in or the end of its wait,
 * whichever is later (a GPU sync returns while the thread is on-CPU). */
static __always_inline __u64 relay_run_from(struct pp_thread *t)
{
	return t->last_wait_end_ns > t->oncpu_since_ns ? t->last_wait_end_ns : t->oncpu_since_ns;
}

/* A wait of cause `cause` ended at `now` with the thread on a CPU (a GPU sync returned, a TCP
 * receive copied what a peer sent): from here it may relay that cause (stall model's chains). */
static __always_inline void wait_ended_on_cpu(struct pp_thread *t, __u32 cause, __u64 now)
{
	/* Then it did something else: no timed-out wait before it is retried. */
	t->timed_out_ns = 0;
	t->last_wait = cause;
	t->last_wait_depth = 0;
	t->last_wait_end_ns = now;
	t->ran_since_wait_ns = 0;
}

static __always_inline void account_oncpu_ep(struct pp_thread *t, __u32 tid, __u64 now, bool rec)
{
	if (t->phase == PP_PHASE_ONCPU || t->phase == PP_PHASE_UNKNOWN)
		add_state_ep(t, tid, oncpu_state(t), t->phase_start_ns, now, false, rec);
}

static __always_inline void account_oncpu(struct pp_thread *t, __u32 tid, __u64 now)
{
	account_oncpu_ep(t, tid, now, record_on);
}

/* Whether a probed call entered with stack pointer sp runs inside the outermost call in
 * progress, entered at outer_sp: the stack grows down, so a nested call's frame is below. A
 * call at or above it is a new call, and the one in progress never returned. */
static __always_inline bool nested_call(__u64 outer_sp, __u64 sp)
{
	return sp < outer_sp;
}

/* A thread's per-step GPU API counts, inserted as zero on its first counted call. */
static __always_inline struct pp_thread_gpu *thread_gpu_of(__u32 tid)
{
	return map_lookup_or_init(&thread_gpu, &tid, &zero_thread_gpu, PP_CNT_THREAD_GPU_FULL);
}

/*
 * The switch-in's accounting (sched.bpf.c): here, so that switch_in() and `record`'s
 * switch_in_rec() (record.bpf.c) are built from one body, each in its own file.
 */
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

/* sched.bpf.c: who ended a thread's waits, summed in its record and flushed to the wakers map. */
int flush_waker(struct pp_thread *t);
int record_waker(struct pp_thread *t, __u32 tid, __u32 cause, __u64 off_ns);

/* What the off-CPU (or unknown) stretch the thread is in reads as once it gets a CPU, a
 * blocking GPU call aside: PP_OTHER for a wait nothing was seen to end, counted where it is
 * accounted (ending). */
static __always_inline __u32 open_wait_cause(struct pp_thread *t, const bool ending)
{
	if (t->phase == PP_PHASE_OFFCPU && t->offcpu_iowait)
		return PP_IO_WAIT;
	if (t->woken_ns >= t->oncpu_since_ns)
		/* Woken during this sleep, or raced with its switch-out. */
		return t->wake_cause;
	if (t->phase == PP_PHASE_UNKNOWN && !t->exec_at_out_ns)
		/* Runnable at attach (preempted before we looked); not one seen asleep then
		 * (seed_threads()), its wakeup untraced. */
		return PP_RUNQ;
	if (ending)
		count(PP_CNT_WAITS_UNWOKEN);
	return PP_OTHER;
}

/* sched.bpf.c: a timed-out wait retried at once takes the cause of its retry. */
int retry_after_timeouts(struct pp_thread *t, __u32 cause, __u64 since, __u64 runq_from,
			 __u64 now);

/* Close the off-CPU (or unknown) stretch that ends now with the thread getting a CPU. */
static __always_inline void account_switch_in(struct pp_thread *t, __u32 tid, __u64 now,
					      const bool rec)
{
	__u64 since = t->phase_start_ns, runq_from;
	bool handed_over = false;
	__u32 cause;

	if (t->phase == PP_PHASE_RUNNABLE) {
		add_state_ep(t, tid, t->gpu_depth ? pp_call_state(t->call_state) : PP_RUNQ, since, now, false, rec);
		if (hist_kinds)
			hist_switch_in(t, tid, PP_RUNQ, since, since, since, now);
		return;
	}
	if (t->phase != PP_PHASE_OFFCPU && t->phase != PP_PHASE_UNKNOWN)
		return;

	cause = open_wait_cause(t, true);

	/* RUNQ starts when the thread is on a run queue, as the kernel's run_delay does; a
	 * remote wakeup is queued to the target CPU by IPI, and that latency (an idle CPU
	 * waking up) is part of the wait, not CPU contention. */
	runq_from = t->enqueued_ns >= t->woken_ns ? t->enqueued_ns : t->woken_ns;
	if (t->gpu_depth) {
		add_state_ep(t, tid, pp_call_state(t->call_state), since, now, false, rec);
	} else if (cause != PP_RUNQ && t->woken_ns > since && runq_from <= now) {
		/* The one place a wait ends at its wakeup: the trace's flow from its waker. */
		add_state_ep(t, tid, cause, since, runq_from, true, rec);
		add_state_ep(t, tid, PP_RUNQ, runq_from, now, false, rec);
	} else {
		add_state_ep(t, tid, cause, since, now, false, rec);
	}
	/* A lock handed over on the way to a retry (the GIL's mutex) is part of the held wait,
	 * not a wakeup of its own: counted, the holder of a thread's Queue.get(timeout=1) read as
	 * a feeder ending its waits step after step in some attaches and not in others. */
	if (!rec)
		handed_over = retry_after_timeouts(t, cause, since, runq_from, now) == PP_RETRY_KEEP;
	if (hist_kinds) {
		bool woken = t->woken_ns > since && runq_from <= now;

		hist_switch_in(t, tid, t->gpu_depth ? pp_call_state(t->call_state) : cause, since,
			       woken ? runq_from : now, woken ? runq_from : 0, now);
	}
	if (cause == PP_RUNQ)
		return;
	if (record_wakers && !handed_over && t->phase == PP_PHASE_OFFCPU &&
	    t->woken_ns >= t->oncpu_since_ns) {
		/* Only the part inside the window, as for the states. */
		__u64 woke = window_end_ns && t->woken_ns > window_end_ns ? window_end_ns : t->woken_ns;

		if (woke > since)
			record_waker(t, tid, t->gpu_depth ? pp_call_state(t->call_state) : cause, woke - since);
	}
	if (t->phase == PP_PHASE_OFFCPU && wants_wait_stack(tid, t->tgid)) {
		/* The wait up to its wakeup, inside the window, as the states count it. */
		__u64 end = t->woken_ns > since ? t->woken_ns : now;

		if (window_end_ns && end > window_end_ns)
			end = window_end_ns;
		py_wait_ends(tid, t->gpu_depth ? pp_call_state(t->call_state) : cause, end > since ? end - since : 0);
	}
	/* A blocking GPU sync (an NCCL call) is a GPU (comm) wait whoever woke it; a relay passes
	 * that on too. */
	t->last_wait = t->gpu_depth ? pp_call_state(t->call_state) : cause;
	t->last_wait_depth = t->gpu_depth || cause != t->wake_cause ? 0 : t->wake_depth;
	t->last_wait_end_ns = now;
	t->ran_since_wait_ns = 0;
}

/* The record's wakeup is w (its time, woken_ns, apart). */
static __always_inline void wake_set(struct pp_thread *t, const struct pp_wake *w)
{
	t->wake_cause = w->cause;
	t->waker_tid = w->waker_tid;
	t->waker_tgid = w->waker_tgid;
	t->wake_depth = w->depth;
	t->wake_ctx = w->ctx;
}

/* The wakeup put aside for the wait after the one the record held (pp_wake_is_next_waits)
 * becomes the record's. */
static __always_inline void take_next_wake(struct pp_thread *t)
{
	wake_set(t, &t->next_wake);
	t->woken_ns = t->next_woken_ns;
	t->next_woken_ns = 0;
}

/* The wait the record held is closed: a wakeup put aside is the record's, unless a later one
 * is already. */
static __always_inline void next_wake_settled(struct pp_thread *t)
{
	if (!t->next_woken_ns)
		return;
	if (pp_next_wake_due(t->next_woken_ns, t->woken_ns, t->oncpu_since_ns, 1))
		take_next_wake(t);
	t->next_woken_ns = 0;
}

/* The thread gets a CPU at `now`. */
static __always_inline int do_switch_in(struct pp_thread *t, __u32 tid, __u64 now, const bool rec)
{
	if (!t)
		return 0;
	if (t->next_woken_ns && pp_next_wake_due(t->next_woken_ns, t->woken_ns, t->oncpu_since_ns, 0))
		take_next_wake(t);
	account_switch_in(t, tid, now, rec);
	next_wake_settled(t);
	t->phase = PP_PHASE_ONCPU;
	t->phase_start_ns = now;
	t->oncpu_since_ns = now;
	/* A batch arrived: one step each, where no backward pass marks them (userspace picks). */
	if (step_wait_tid && tid == step_wait_tid && t->last_wait_end_ns == now &&
	    t->last_wait == PP_DATA_WAIT)
		record_step(t, tid, now, PP_STEP_FROM_DATA_WAIT);
	return 1;
}

#endif

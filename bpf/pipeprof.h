/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared between pipeprof.bpf.c and userspace: plain fixed-width types only. */
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
#define PP_MAX_GPU_APIS	64
/* Attach cookie of the start-up self-test probe on pipeprof's own function. */
#define PP_SELFTEST_API	(PP_MAX_GPU_APIS - 1)
#define PP_MAX_GPU_DEPTH 8

/* tracked_procs value */
struct pp_proc {
	__u32 parent_tgid;	/* tracked parent, 0 for a root */
	__u32 is_root;		/* the target itself (-p PID or the launched command) */
	__u64 fork_ns;		/* 0 when it existed at attach */
	__u64 exit_ns;		/* 0 while alive */
};

/* threads value: cumulative time per state since the window opened */
struct pp_thread {
	__u32 tgid;
	__u32 phase;		/* enum pp_phase */
	__u64 phase_start_ns;	/* when the current phase (or its unaccounted part) began */
	__u64 ns[PP_NR_STATES];
	__u64 first_ns;		/* start of this thread's life inside the window */
	__u64 exit_ns;		/* 0 while alive */
	__u64 oncpu_since_ns;	/* last switch-in (or first sighting) */
	__u64 woken_ns;		/* last sched_waking of this thread */
	__u64 enqueued_ns;	/* last sched_wakeup: on a run queue from here (RUNQ starts) */
	__u32 wake_cause;	/* enum pp_state the waker context implies, at woken_ns */
	__u32 gpu_depth;	/* nested synchronising GPU calls in progress */
	__u32 gpu_api;		/* api id (attach cookie) of the outermost call in progress */
	__u32 offcpu_iowait;	/* task->in_iowait at the last switch-out */
	__u32 last_wait;	/* enum pp_state of the last completed off-CPU wait */
	__u32 pad;
	__u64 gpu_calls;	/* top-level synchronising calls entered */
	__u64 gpu_enter_ns;	/* entry time of the outermost call in progress */
	char comm[16];
};

/* The one log2 histogram slot function, compiled into the BPF programs and into userspace
 * (and its unit tests) alike. BCC's layout: slot k holds [2^k, 2^(k+1)), slot 0 holds 0 and 1.
 * A bounded loop, not __builtin_clzll: the verifier needs a constant trip count. */
static inline __u32 pp_log2_u64(__u64 v)
{
	__u32 r = 0;

	for (int i = 32; i > 0; i >>= 1) {
		if (v >> i) {
			v >>= i;
			r += i;
		}
	}
	return r;
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

/* Global counters; index into the counters array map. */
enum pp_counter {
	PP_CNT_SCHED_EVENTS = 0,	/* every sched_switch seen (self-check) */
	PP_CNT_THREADS_FULL,		/* thread could not be added: map full */
	PP_CNT_PROCS_FULL,		/* process could not be added: map full */
	PP_CNT_RQ_FULL,			/* block request not tracked: map full */
	PP_CNT_UPROBE_HITS,		/* any GPU uprobe entry for a tracked task */
	PP_CNT_URETPROBE_ORPHANS,	/* return without a matching entry */
	PP_CNT_FORKS,			/* tracked processes forked while tracing */
	PP_CNT_PROC_EXITS,		/* tracked processes exited while tracing */
	PP_CNT_SELFTEST_HITS,		/* uprobe self-test hits on pipeprof itself */
	PP_CNT_GPU_DEPTH_OVERFLOW,	/* nesting deeper than PP_MAX_GPU_DEPTH */
	PP_NR_COUNTERS,
};

/* Per GPU API (attach cookie = api id): calls and a log2 latency histogram in usecs. */
struct pp_gpu_api_stats {
	__u64 calls;
	__u64 total_ns;
	__u64 slots[PP_HIST_SLOTS];
};

/* Block device latency of requests issued by the tracked set, log2 usecs. */
struct pp_io_stats {
	__u64 count;
	__u64 total_ns;
	__u64 slots[PP_HIST_SLOTS];
};

#endif /* PIPEPROF_H */

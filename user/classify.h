/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The stall model's userspace half: closing each thread's accounting at the window's end,
 * roles, the verdict and the recommendations. Pure logic: no BPF, no /proc. */
#ifndef PIPEPROF_CLASSIFY_H
#define PIPEPROF_CLASSIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "pipeprof.h"
#include "predict.h"

enum role { ROLE_TRAINER, ROLE_WORKER, ROLE_HELPER, NR_ROLES };

enum verdict {
	VERDICT_DATA_LOADING,
	VERDICT_GPU,
	VERDICT_CPU,
	VERDICT_IO,
	VERDICT_CONTENTION,
	VERDICT_COMM,
	VERDICT_UNDETERMINED,	/* the trainer mostly sleeps for reasons the model does not name */
	VERDICT_DATA_LOADING_THREAD,	/* THREAD_WAIT on a busy helper that feeds it */
	VERDICT_WAITING_ON_THREAD,	/* THREAD_WAIT of any other pattern: locks, the GIL */
	VERDICT_GPU_UNOBSERVED,	/* GPU libraries mapped but not probed: CPU-BOUND could be GPU wait */
	VERDICT_WAIT_NOT_ENDED,	/* a wait no wakeup named is larger than any stall it could beat */
	VERDICT_GPU_BACKLOG,	/* syncs show the GPU far behind: blocked launches read as compute */
	NR_VERDICTS,
};

enum trainer_choice { TRAINER_BY_GPU_CALLS, TRAINER_MAIN_THREAD, TRAINER_BY_OPTION };

struct thread_result {
	__u32 tid, tgid;
	char comm[16];
	enum role role;
	bool exited;
	__u64 wall_ns;			/* life inside the window */
	__u64 ns[PP_NR_STATES];		/* sums to wall_ns */
	__u64 gpu_calls;
	__u64 open_wait_ns;		/* OTHER from a wait no wakeup named before the maps were read */
	/* Timed-out waits open at the close named as the last ones of their call were
	 * (pp_held_named_before), and as what. */
	__u64 named_before_ns;
	enum pp_state named_before_state;
	__u64 gc_ns, gc_count;		/* Python garbage collections: pause time, how many */
	__u64 gil_ns;		/* THREAD_WAIT waiting for the GIL (pp_thread) */
};

struct role_result {
	__u64 wall_ns;
	__u64 ns[PP_NR_STATES];
	__u64 gc_ns, gc_count;
	int threads;
	int processes;
};

#define MAX_RECOMMENDATIONS 8
#define MAX_WAITED_ON 8
#define MAX_STALL_NOTES 8
/* Stalls this large are named in the verdict line, whichever carries the verdict. */
#define NOTABLE_STALL 0.10
/* A stall this close to the threshold is said to be, so that attaches on either side of it
 * tell the same story. */
#define NEAR_THRESHOLD 0.03

/* One wakers-map record: off-CPU time of wakee that waker's wakeups ended, as cause. */
struct wake_record {
	__u32 wakee, waker, waker_tgid;
	__u32 ctx;		/* enum pp_wake_ctx */
	__u32 cause;		/* enum pp_state */
	__u64 ns, count;
};

/* A thread (or interrupt context) whose wakeups ended the trainer's waits. */
struct waited_on {
	__u32 tid, tgid;	/* 0 for an interrupt */
	__u32 ctx;		/* enum pp_wake_ctx */
	int thread_index;	/* into the thread array; -1 when not traced */
	char comm[16];		/* traced threads' here; the caller fills in the others' */
	__u64 ns;		/* trainer off-CPU time its wakeups ended */
	__u64 cause_ns[PP_NR_STATES];
	__u64 wakeups;
};

struct stall_note {
	enum pp_state state;
	double fraction;
	bool near_threshold;
};

struct recommendation {
	const char *id;		/* stable key for JSON consumers */
	char text[768];
	/* The measured facts the advice rests on: every recommendation has some. */
	char evidence[320];
	/* 1/(1-f) of the stall it addresses, or an Amdahl bound; 0 when not applicable. */
	double speedup_bound;
	int prediction;		/* into analysis.model.predictions, or -1 */
};

/* What the analysis needs beyond per-thread states. */
struct analysis_input {
	__u32 root_pid;
	__u32 tid_override;	/* --tid, 0 for none */
	double threshold;	/* fraction, default 0.20 */
	int ncpus;
	double cpu_busy;	/* machine-wide busy fraction over the window, <0 when unknown */
	double runnable_avg;	/* mean runnable tasks machine-wide, <0 when unknown */
	double gpu_sync_mean_us; /* mean duration of a synchronising call */
	__u64 window_ns;
	__u64 io_requests;
	/* A GPU library is mapped and no synchronising call is timed: a spinning sync reads as
	 * RUNNING, a blocking one as a wait on the driver's thread. */
	bool gpu_unprobed;
	/* A GPU library (libcudart, libcuda) is mapped by the job, probed or not: without one,
	 * no advice may be about the GPU. */
	bool gpu_mapped;
	int workers_forked;	/* worker processes started inside the window (an epoch's re-fork) */
	/* The job's host-to-device copies were probed (the report's steps): their bytes, and
	 * those from host memory seen pinned. Traced with no bytes from pageable memory, no
	 * advice to pin. */
	bool h2d_traced;
	__u64 h2d_bytes, h2d_pinned_bytes;
	const struct wake_record *wakes;	/* NULL when not recorded (the daemon) */
	int nr_wakes;
};

struct analysis {
	int trainer_index;	/* into the thread array; -1 when the trainer was never seen */
	enum trainer_choice trainer_choice;
	struct role_result roles[NR_ROLES];
	/* The main thread of each worker process, where a DataLoader worker runs its loop;
	 * the role total also holds the workers' idle queue-feeder threads. */
	struct role_result worker_loops;
	bool worker_loops_are_main_threads;	/* else the whole WORKER role stands in */
	enum verdict verdict;
	enum pp_state verdict_state;
	double verdict_fraction;
	double speedup_bound;
	int nr_recs;
	struct recommendation recs[MAX_RECOMMENDATIONS];
	/* The pipeline model the recommendations' predictions come from (predict.h). */
	struct pipeline_model model;
	/* What ended the trainer's waits, most time first; shares are of waited_total_ns. */
	int nr_waited_on;
	struct waited_on waited_on[MAX_WAITED_ON];
	__u64 waited_total_ns;
	/* Of it, what processes other than the trainer's ended by exiting (OTHER: a command the
	 * loop ran and waited for), over every waker, not only the MAX_WAITED_ON longest. */
	__u64 children_exit_ns;
	int children_exit_procs;
	char children_comm[16];		/* the one that ended the most */
	int verdict_waited_on;	/* into waited_on: the thread a thread verdict names, or -1 */
	/* Every stall of NOTABLE_STALL or more, largest first. */
	int nr_stalls;
	struct stall_note stalls[MAX_STALL_NOTES];
	bool near_threshold;	/* the largest stall is within NEAR_THRESHOLD of the threshold */
	char verdict_line[512];
};

const char *state_name(enum pp_state state);
const char *role_name(enum role role);
const char *verdict_name(enum verdict verdict);
const char *verdict_id(enum verdict verdict);
/* The verdict a stall carries when it is the largest (NR_VERDICTS: not a stall). */
enum verdict verdict_of_stall(enum pp_state state);

/* The state the phase open at the window's close counts as, from its last event to the
 * close (PP_NR_STATES: none, the thread exited); proc_state as for thread_close(). */
enum pp_state thread_open_state(const struct pp_thread *t, char proc_state);

/* Whether the wait t was in at the close was woken, with no switch-in after: one untraced (the
 * thread then ran on unseen, or was first seen asleep and has not left the CPU since), or one
 * after the naming stopped. The wakeup names the wait up to *woke (at most last) as *cause,
 * as a switch-in would have; from then the thread was running, or queued to. */
bool thread_woken_unswitched(const struct pp_thread *t, __u64 last, __u32 *cause, __u64 *woke);

/* Time after the last event, up to end_ns, goes to the state the thread's phase implies;
 * a thread never seen off its initial unknown phase is taken as asleep unless proc_state
 * (its /proc state letter, 0 if unknown) says it runs. */
void thread_close(const struct pp_thread *t, __u64 window_start_ns, __u64 end_ns, char proc_state,
		  struct thread_result *out);

/* 1/(1-f), capped so a stall of ~100% does not print infinity. */
double speedup_bound(double f);
const char *wake_ctx_name(__u32 ctx);
/* "thread 1234 (comm)" or the interrupt context's name. */
void format_waker_name(char *buf, size_t size, const struct waited_on *w);

/* Aggregates the records whose wakee is trainer_tid into a->waited_on, most time first, and
 * links traced wakers to their thread_result. */
void waited_on_collect(struct analysis *a, const struct thread_result *threads, int nr_threads,
		       __u32 trainer_tid, const struct wake_record *wakes, int nr_wakes);
double role_idle_fraction(const struct role_result *r);
double role_network_fraction(const struct role_result *r);
/* Appends to a fixed buffer; truncates rather than overflows. */
void text_append(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Roles, trainer, verdict and recommendations. threads[i].role is filled in. */
void analyse(struct thread_result *threads, int nr_threads, const struct analysis_input *in,
	     struct analysis *out);

/* recommend.c: the pipeline model's inputs from the analysis, the model, and the
 * recommendations of a->verdict, each with its evidence (tr: the trainer, never NULL). */
void pipeline_inputs_of(const struct analysis *a, const struct thread_result *threads, int n,
			const struct analysis_input *in, const struct thread_result *tr,
			struct pipeline_inputs *out);
struct mem_summary;
/* A probable memory leak's advice, per group that grew steadily all window (memory.c). */
void recommend_memory(struct analysis *a, const struct mem_summary *m, double step_s);
struct step_summary;
/* From the trainer's steps' GPU figures: launch-bound advice where launch_bound (steps.c
 * decided it), and a probable device-memory leak's where its outstanding bytes grew. */
void recommend_gpu_steps(struct analysis *a, const struct step_summary *s, bool launch_bound);
void recommend(struct analysis *a, const struct analysis_input *in, const struct thread_result *tr,
	       const struct thread_result *threads, int n);

#endif

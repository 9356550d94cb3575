/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The stall model's userspace half: closing each thread's accounting at the window's end,
 * roles, the verdict and the recommendations. Pure logic: no BPF, no /proc. */
#ifndef PIPEPROF_CLASSIFY_H
#define PIPEPROF_CLASSIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "pipeprof.h"

enum role { ROLE_TRAINER, ROLE_WORKER, ROLE_HELPER, NR_ROLES };

enum verdict {
	VERDICT_DATA_LOADING,
	VERDICT_GPU,
	VERDICT_CPU,
	VERDICT_IO,
	VERDICT_CONTENTION,
	VERDICT_COMM,
	VERDICT_UNDETERMINED,	/* the trainer mostly sleeps for reasons the model does not name */
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
};

struct role_result {
	__u64 wall_ns;
	__u64 ns[PP_NR_STATES];
	int threads;
	int processes;
};

#define MAX_RECOMMENDATIONS 8

struct recommendation {
	const char *id;		/* stable key for JSON consumers */
	char text[320];
	double speedup_bound;	/* 1/(1-f) of the stall it addresses; 0 when not applicable */
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
};

const char *state_name(enum pp_state state);
const char *role_name(enum role role);
const char *verdict_name(enum verdict verdict);
const char *verdict_id(enum verdict verdict);

/* Time after the last event, up to end_ns, goes to the state the thread's phase implies;
 * a thread never seen off its initial unknown phase is taken as asleep unless proc_state
 * (its /proc state letter, 0 if unknown) says it runs. */
void thread_close(const struct pp_thread *t, __u64 window_start_ns, __u64 end_ns, char proc_state,
		  struct thread_result *out);

/* 1/(1-f), capped so a stall of ~100% does not print infinity. */
double speedup_bound(double f);
double role_idle_fraction(const struct role_result *r);

/* Roles, trainer, verdict and recommendations. threads[i].role is filled in. */
void analyse(struct thread_result *threads, int nr_threads, const struct analysis_input *in,
	     struct analysis *out);

#endif

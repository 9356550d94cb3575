/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* `pipeprof top`'s tracing of one job: its tracer, the figures of its last seconds, and the
 * view they make. The single-job view has one; the host's view one per job found. */
#ifndef PIPEPROF_TOP_JOB_H
#define PIPEPROF_TOP_JOB_H

#include <stdbool.h>
#include <sys/types.h>
#include "top_view.h"
#include "tracer.h"

struct dispatcher;

struct top_job {
	pid_t pid, tid;		/* tid: the trainer given by -t; 0: found by the analysis */
	struct tracer tracer;
	struct thread_snaps snaps;
	int pidfd;		/* readable when the job exits; -1 where pidfds are missing */
	bool started;		/* the tracer is attached (until top_job_stop()) */
	bool gone;		/* the job exited */
	/* The last TOP_VERDICT_SECONDS seconds' threads, steps and CPU readings, oldest first. */
	struct thread_result *secs[TOP_VERDICT_SECONDS];
	int nr_threads[TOP_VERDICT_SECONDS];
	__u64 steps[TOP_VERDICT_SECONDS];
	double secs_ns[TOP_VERDICT_SECONDS];
	int nr_secs;
	unsigned long long busy[TOP_VERDICT_SECONDS + 1], total[TOP_VERDICT_SECONDS + 1];
	bool cpu_ok[TOP_VERDICT_SECONDS + 1];
	double runnable[TOP_VERDICT_SECONDS];
	__u64 last_tick_ns;
	__u32 trainer_tid;
	struct top_view view;
};

/* Attaches to pid (and its descendants); tid: the trainer, or 0. The view gets the job's name
 * and command line. Returns 0 or -errno (-ESRCH: no such process); either way, call
 * top_job_stop(). */
/* dispatcher: the host's scheduler tracepoints, shared by the jobs (dispatcher.h); NULL: the job
 * attaches its own. */
int top_job_start(struct top_job *j, pid_t pid, pid_t tid, bool verbose,
		  struct dispatcher *dispatcher);

/* Waits up to timeout_ms for the job's notes (new processes, libraries); sets j->gone when the
 * job exited. Returns 0 or -errno. */
int top_job_wait(struct top_job *j, int timeout_ms);

/* Takes the second that ended at now: each role's states, then the verdict and steps of the
 * last TOP_VERDICT_SECONDS. Returns 0 or -errno. */
int top_job_tick(struct top_job *j, __u64 now);

/* Detaches and frees what the figures held; the view stays. Safe to call twice. */
void top_job_stop(struct top_job *j);

#endif

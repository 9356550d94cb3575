/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The pipeline model behind the recommendations' predictions. Pure arithmetic on what the
 * window measured: no BPF, no /proc, no text beyond the reasons a number is withheld.
 *
 * A training loop is a pipeline: DataLoader workers make batches, the trainer turns each
 * batch into a step, and both run on the machine's CPUs beside whatever else runs there. No
 * step or batch is counted, so every quantity is a rate: CPU-seconds per second of the
 * window ("CPUs"). Per step they are the same ratios: a worker on-CPU 0.97 CPUs while the
 * trainer uses 0.10 needs 9.7 times the trainer's CPU per batch. The loop's steps/s today is
 * the unit: each part bounds the rate at
 *
 *   trainer  1 / (its share of the window not spent waiting for a batch or a CPU)
 *   workers  k / (the worker loops' summed on-CPU share)       (one batch at a time each)
 *   CPUs     (idle CPUs + the job's own CPUs) / (the job's CPUs)   (the CPUs other
 *            processes use stay theirs)
 *
 * and the model's rate is the smallest. It must account for today's rate (FIT_LO..FIT_HI)
 * before it predicts another: when it does not, something it does not model limits the loop
 * (the hand-off, storage, a lock) and no number is given. A prediction is the model's rate
 * with the knob changed over its rate today. Where the CPUs would then be the limit and other
 * processes use some, how much of theirs the job would get, and how long its own threads would
 * queue behind each other, is the scheduler's call: only the bound of the whole machine is given.
 */
#ifndef PIPEPROF_PREDICT_H
#define PIPEPROF_PREDICT_H

#include <stdbool.h>

/* The model explains today's rate when its own account of it is within these. */
#define PREDICT_FIT_LO 0.85
#define PREDICT_FIT_HI 1.20
/* Less than this many idle CPUs is "no idle CPU": a window's /proc/stat reading is good to a
 * few hundredths, and the model turns any more into a predicted gain. */
#define PREDICT_IDLE_CPU 0.25
/* Other processes using this many CPUs compete with the job once the CPUs are its limit. */
#define PREDICT_OTHER_CPU 0.25
/* A thread on-CPU this share of the window runs compute (an intra-op pool thread, say). */
#define PREDICT_COMPUTE_THREAD 0.10
/* Workers in I/O wait this share of their time are not CPU-bound: the model has no storage. */
#define PREDICT_WORKER_IO 0.10
#define MAX_PREDICTIONS 4
/* A thread count whose bound stays under this is no advice worth giving. */
#define PREDICT_THREADS_NO_GAIN 1.10
/* Workers the saturation search goes up to. */
#define PREDICT_MAX_WORKERS 64

/* What bounds a predicted rate. */
enum predict_limit { LIMIT_NONE, LIMIT_TRAINER, LIMIT_WORKERS, LIMIT_CPUS, NR_LIMITS };

/* The measurements, over one window. CPUs: CPU-seconds per second of the window. */
struct pipeline_inputs {
	double window_s;
	int ncpus;
	double cpu_busy;		/* machine-wide busy share, < 0 when unknown */
	double trainer_cpus;		/* the trainer thread on-CPU */
	double helper_cpus;		/* the other threads of its process */
	double worker_cpus;		/* every thread of the worker processes */
	/* The trainer's own part of a step: its share of the window neither waiting for a batch
	 * (DATA_WAIT) nor for a CPU (RUNQ). Compute, GPU waits, sleeps all stay per step. */
	double trainer_own;
	double trainer_running;		/* share of the window on-CPU */
	int workers;			/* DataLoader worker processes */
	double worker_loop_cpus;	/* their loop (main) threads on-CPU, summed */
	double worker_loop_io;		/* the same threads' I/O wait, summed */
	int compute_threads;		/* threads of the trainer's process on-CPU >= PREDICT_COMPUTE_THREAD */
	bool gpu_mapped;		/* a GPU library is mapped by the job */
};

struct prediction {
	const char *id;		/* "num_workers", "intra_op_threads" */
	const char *knob;	/* what the user changes */
	int from, to;
	double speedup;		/* predicted steps/s over today's; 0 when withheld */
	/* An upper bound in place of a number, or 0: Amdahl's for threads; for workers where the
	 * CPUs would be the limit and other processes use some, the rate with the whole machine. */
	double bound;
	enum predict_limit limit;	/* what bounds the predicted rate */
	char withheld[240];	/* why there is no number, when speedup is 0 */
};

struct pipeline_model {
	struct pipeline_inputs in;
	bool cpu_known;		/* the machine's busy share was measured */
	double idle_cpus;	/* CPUs no task used */
	double job_cpus;	/* trainer + helpers + workers */
	double other_cpus;	/* what everything else used */
	double avail_cpus;	/* idle + the job's: what the job could use */
	/* Rates each part allows, in units of today's steps/s; 0: that part sets no limit. */
	double limit_trainer, limit_workers, limit_cpus;
	double rate;		/* the model's account of today's rate: their minimum */
	enum predict_limit rate_limit;
	bool fits;		/* rate within PREDICT_FIT_LO..PREDICT_FIT_HI */
	int nr_predictions;
	struct prediction predictions[MAX_PREDICTIONS];
};

const char *predict_limit_name(enum predict_limit limit);

/* The model of one window, with no prediction yet. */
void pipeline_model_build(struct pipeline_model *m, const struct pipeline_inputs *in);

/* Whether the machine had less than PREDICT_IDLE_CPU idle (false when unknown). */
bool pipeline_no_idle_cpu(const struct pipeline_model *m);

/* The model's steps/s with k workers and everything else as measured, in today's units. */
double pipeline_rate_with_workers(const struct pipeline_model *m, int k, enum predict_limit *limit);

/* Adds the prediction for num_workers = to (from today's worker count) and returns it, or
 * NULL when the table is full. Its speedup is 0, with the reason, when the model does not
 * account for today's rate or cannot see what more workers would do. */
const struct prediction *pipeline_predict_workers(struct pipeline_model *m, int to);

/* The fewest workers beyond which more add nothing (the trainer or the CPUs are the limit),
 * at least today's count; 0 when the model does not fit. */
int pipeline_workers_to_saturate(const struct pipeline_model *m);

/* Adds the intra-op threads entry: torch.set_num_threads(to) from the threads computing
 * today. A trace of one compute thread does not show how much of the step would run in
 * parallel, so it carries Amdahl's bound with every on-CPU moment parallel, and no number. */
const struct prediction *pipeline_predict_threads(struct pipeline_model *m, int to);

/* Amdahl's bound for `to` intra-op threads when a share `serial` of the trainer's CPU is in
 * code that runs on one thread whatever their number, the trainer on-CPU `running` of its
 * time: 1 / ((1 - running) + running * (serial + (1 - serial) / to)). */
double pipeline_threads_bound(double running, double serial, int to);

#endif

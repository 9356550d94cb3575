// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The recommendations: what to change, fitted to what the window measured. Each says the
 * facts it rests on (its evidence), none is given that those facts rule out (no GPU advice
 * without a GPU library, no more workers or threads without an idle CPU, no pin_memory for a
 * CPU-only job), and where the pipeline model (predict.c) accounts for today's rate, it
 * predicts the change's effect. Pure logic.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "classify.h"
#include "memory.h"
#include "recommend_text.h"
#include "steps.h"

/* The trainer's sync rate above which short syncs are the host draining the queue. */
#define MANY_SYNCS_PER_S 100
#define SHORT_SYNC_US 2000
/* A predicted gain smaller than this is "will not help". */
#define WORTHWHILE 1.05

static double share(const __u64 *ns, __u64 wall, enum pp_state s)
{
	return wall ? (double)ns[s] / wall : 0;
}

struct recommendation *rec_add(struct analysis *a, const char *id, double bound)
{
	struct recommendation *r;

	if (a->nr_recs >= MAX_RECOMMENDATIONS)
		return NULL;
	r = &a->recs[a->nr_recs++];
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->speedup_bound = bound;
	r->prediction = -1;
	return r;
}

static void vappend(char *buf, size_t size, const char *fmt, va_list ap)
{
	size_t len = strlen(buf);

	if (len + 1 < size)
		vsnprintf(buf + len, size - len, fmt, ap);
}

void rec_say(struct recommendation *r, const char *fmt, ...)
{
	va_list ap;

	if (!r)
		return;
	va_start(ap, fmt);
	vappend(r->text, sizeof(r->text), fmt, ap);
	va_end(ap);
}

void rec_because(struct recommendation *r, const char *fmt, ...)
{
	va_list ap;

	if (!r)
		return;
	va_start(ap, fmt);
	vappend(r->evidence, sizeof(r->evidence), fmt, ap);
	va_end(ap);
}

static void link_prediction(struct recommendation *r, const struct analysis *a,
			    const struct prediction *p)
{
	if (r && p)
		r->prediction = (int)(p - a->model.predictions);
}

/* "0.9 of 2 CPUs idle, other processes use 0.1" */
static void because_cpus(struct recommendation *r, const struct pipeline_model *m)
{
	if (!m->cpu_known) {
		rec_because(r, "; the machine's CPU use is unknown");
		return;
	}
	rec_because(r, "; %.1f of %d CPUs idle", m->idle_cpus, m->in.ncpus);
	if (m->other_cpus >= 0.05)
		rec_because(r, ", other processes use %.1f", m->other_cpus);
}

void pipeline_inputs_of(const struct analysis *a, const struct thread_result *threads, int n,
			const struct analysis_input *in, const struct thread_result *tr,
			struct pipeline_inputs *out)
{
	double window = in->window_ns ? (double)in->window_ns : 0;
	const struct role_result *wl = &a->worker_loops;

	memset(out, 0, sizeof(*out));
	out->window_s = window / 1e9;
	out->ncpus = in->ncpus;
	out->cpu_busy = in->cpu_busy;
	out->gpu_mapped = in->gpu_mapped || in->gpu_unprobed;
	out->workers = a->roles[ROLE_WORKER].processes;
	if (!window || !tr)
		return;
	out->trainer_cpus = tr->ns[PP_RUNNING] / window;
	out->helper_cpus = a->roles[ROLE_HELPER].ns[PP_RUNNING] / window;
	out->worker_cpus = a->roles[ROLE_WORKER].ns[PP_RUNNING] / window;
	out->trainer_running = share(tr->ns, tr->wall_ns, PP_RUNNING);
	out->trainer_own = tr->wall_ns ? 1.0 - share(tr->ns, tr->wall_ns, PP_DATA_WAIT) -
					 share(tr->ns, tr->wall_ns, PP_RUNQ) : 0;
	out->worker_loop_cpus = wl->ns[PP_RUNNING] / window;
	out->worker_loop_io = wl->ns[PP_IO_WAIT] / window;
	/* The trainer's process's threads that compute: itself, an intra-op pool, a busy helper. */
	for (int i = 0; i < n; i++)
		if (threads[i].tgid == tr->tgid &&
		    threads[i].ns[PP_RUNNING] >= PREDICT_COMPUTE_THREAD * window)
			out->compute_threads++;
}

/* The trainer's DATA waits ended by a helper thread: a pin-memory thread relays the batches,
 * so pin_memory is on already. */
static bool batches_pinned(const struct analysis *a, const struct thread_result *threads)
{
	for (int k = 0; k < a->nr_waited_on; k++) {
		const struct waited_on *w = &a->waited_on[k];

		if (w->thread_index >= 0 && threads[w->thread_index].role == ROLE_HELPER &&
		    w->cause_ns[PP_DATA_WAIT] * 2 > w->ns)
			return true;
	}
	return false;
}

/* Pinning could help: copies to the GPU were seen, mostly from pageable memory, or copies
 * were not traced at all (then the other evidence must carry the advice alone). */
static bool h2d_pageable(const struct analysis_input *in)
{
	if (!in->h2d_traced)
		return true;
	return in->h2d_bytes && in->h2d_bytes - in->h2d_pinned_bytes >=
				STEPS_PAGEABLE_ADVICE * in->h2d_bytes;
}

static void because_h2d(struct recommendation *r, const struct analysis_input *in)
{
	if (in->h2d_traced && in->h2d_bytes)
		rec_because(r, "; copies to the GPU moved %.1f MB in the window, %.0f%% of it from host "
			    "memory not seen pinned", in->h2d_bytes / 1e6,
			    100.0 * (in->h2d_bytes - in->h2d_pinned_bytes) / in->h2d_bytes);
}

/* Busy workers: more of them where CPUs are idle and the model predicts a gain, cheaper work
 * per batch where they are not. */
static void recommend_busy_workers(struct analysis *a, double bound, double run,
				   const struct prediction *next)
{
	struct pipeline_model *m = &a->model;
	const struct pipeline_inputs *in = &m->in;
	int k = in->workers, sat = pipeline_workers_to_saturate(m);
	const struct prediction *far = NULL;
	struct recommendation *r;

	if (!m->cpu_known) {
		/* Machine load unknown: both remedies stay possible. */
		r = rec_add(a, "more_workers_or_cheaper_transforms", bound);
		rec_say(r, "Raise num_workers if CPUs are idle, else make transforms cheaper or cache "
		        "preprocessed samples.");
		rec_because(r, "the workers are on-CPU %.0f%% of their time", run * 100);
		because_cpus(r, m);
		return;
	}
	/* The model's number decides where it gives one; else the idle CPUs do. */
	if (next && next->speedup ? next->speedup < WORTHWHILE :
	    pipeline_no_idle_cpu(m) || (next && next->bound && next->bound < WORTHWHILE)) {
		r = rec_add(a, "cheaper_transforms", bound);
		if (next && next->speedup)
			rec_say(r, "More workers would not be faster (the model predicts %.2fx)",
			        next->speedup);
		else if (!pipeline_no_idle_cpu(m))
			rec_say(r, "More workers would not be faster (the model predicts no gain)");
		else if (m->other_cpus >= PREDICT_OTHER_CPU)
			rec_say(r, "The machine has no idle CPU: more workers would only take CPU time "
			        "from other processes");
		else
			rec_say(r, "The machine has no idle CPU: more workers will not help");
		rec_say(r, ". Make the transforms cheaper, or cache decoded or preprocessed samples%s.",
		        in->gpu_mapped ? ", or move augmentation to the GPU" : "");
		rec_because(r, "the workers' preprocessing uses %.2f CPUs, %.1fx the trainer's %.2f",
			    in->worker_loop_cpus, in->trainer_cpus > 0 ? in->worker_loop_cpus /
			    in->trainer_cpus : 0, in->trainer_cpus);
		because_cpus(r, m);
		if (next && next->speedup)
			rec_because(r, "; the model predicts %.2fx with %d workers", next->speedup, k + 1);
		else if (next && next->bound)
			rec_because(r, "; with %d workers the model gives at most %.2fx, the gain taken from "
				    "the other processes", k + 1, next->bound);
		return;
	}
	r = rec_add(a, "more_workers", bound);
	link_prediction(r, a, next);
	if (next && next->speedup) {
		rec_say(r, "Raise num_workers from %d to %d: predicted %.2fx steps/s", k, k + 1,
		        next->speedup);
		if (sat > k + 1) {
			far = pipeline_predict_workers(m, sat);
			if (far && far->speedup)
				rec_say(r, "; with %d: %.2fx, beyond which the %s", sat, far->speedup,
				        far->limit == LIMIT_CPUS ? "CPUs are the limit" : "trainer is the limit");
		} else {
			rec_say(r, "; beyond that the %s",
			        next->limit == LIMIT_WORKERS ? "workers remain the limit" :
			        next->limit == LIMIT_CPUS ? "CPUs are the limit" : "trainer is the limit");
		}
		rec_say(r, ".");
	} else {
		rec_say(r, "Raise num_workers from %d to %d. No predicted speedup: %s.", k, k + 1,
		        next ? next->withheld : "no room for the prediction");
	}
	rec_because(r, "the worker loop%s on-CPU %.0f%% (%.2f CPUs), the trainer uses %.2f CPUs", k == 1 ?
		    " is" : "s are", run * 100, in->worker_loop_cpus, in->trainer_cpus);
	if (in->trainer_cpus > 0)
		rec_because(r, ": a batch costs the workers %.1fx the CPU a step costs the trainer",
			    in->worker_loop_cpus / in->trainer_cpus);
	because_cpus(r, m);
}

/*
 * With no worker process a data wait can only be the network's (stall model): a receive ended
 * it, or a thread of the trainer's process that had just received handed it on. The data comes
 * from remote storage or a sample server, whose latency more reads in flight hide.
 */
static void recommend_network_data(struct analysis *a, double f)
{
	struct recommendation *r = rec_add(a, "network_data", speedup_bound(f));
	__u64 by_net = 0, by_thread = 0;

	for (int i = 0; i < a->nr_waited_on; i++) {
		const struct waited_on *w = &a->waited_on[i];

		if (w->tid)
			by_thread += w->cause_ns[PP_DATA_WAIT];
		else if (w->ctx == PP_WAKE_SOFTIRQ_NET)
			by_net += w->cause_ns[PP_DATA_WAIT];
	}
	rec_say(r, "The trainer's data arrives over the network (a streaming dataset, a sample "
	        "server): keep more reads in flight, in DataLoader workers (num_workers>0) or more "
	        "reader threads with a connection each, or cache the dataset on local storage.");
	rec_because(r, "no DataLoader worker process was seen; the trainer waits for data %.0f%% of "
		    "its time", f * 100);
	if (by_net && !by_thread)
		rec_because(r, ", each wait ended by a network receive");
	else if (by_thread && !by_net)
		rec_because(r, ", each wait ended by a thread of its process that had just received "
			    "from the network");
	else if (by_net)
		rec_because(r, ", %.0f%% of it ended by a network receive and the rest by a thread of its "
			    "process that had just received", by_net * 100.0 / (by_net + by_thread));
}

static void recommend_data(struct analysis *a, const struct analysis_input *in,
			   const struct thread_result *threads, double f)
{
	const struct role_result *w = &a->worker_loops;
	const struct pipeline_model *m = &a->model;
	double bound = speedup_bound(f);
	double run = share(w->ns, w->wall_ns, PP_RUNNING);
	double io = share(w->ns, w->wall_ns, PP_IO_WAIT);
	double runq = share(w->ns, w->wall_ns, PP_RUNQ);
	double idle = role_idle_fraction(w);
	double net = role_network_fraction(w);
	const struct prediction *next;
	struct recommendation *r;

	if (!a->roles[ROLE_WORKER].processes) {
		recommend_network_data(a, f);
		return;
	}
	/* What one more worker would do is in the model (and the JSON) whatever the advice. */
	next = pipeline_predict_workers(&a->model, a->model.in.workers + 1);
	if (run >= 0.5)
		recommend_busy_workers(a, bound, run, next);
	if (io >= 0.2) {
		r = rec_add(a, "faster_storage", bound);
		rec_say(r, "Cache the dataset locally or in RAM, use faster storage or larger sequential "
		        "reads%s.", pipeline_no_idle_cpu(m) ? "" :
		        ", or more workers to keep more reads in flight");
		rec_because(r, "the workers wait on storage %.0f%% of their time", io * 100);
		because_cpus(r, &a->model);
	}
	if (net >= 0.2) {
		r = rec_add(a, "network_data", bound);
		rec_say(r, "The workers wait for data arriving over the network (a streaming dataset, a "
		        "sample server): %skeep more reads in flight per worker, or cache the dataset on "
		        "local storage.", pipeline_no_idle_cpu(m) ? "" : "more workers, ");
		rec_because(r, "the workers wait on network receives %.0f%% of their time", net * 100);
		because_cpus(r, m);
	}
	if (runq >= 0.2) {
		r = rec_add(a, "oversubscribed_workers", bound);
		rec_say(r, "The CPUs are oversubscribed:");
		if (m->other_cpus >= 0.5)
			rec_say(r, " move the other processes away or give the job its own CPUs;");
		if (m->in.workers > 1)
			rec_say(r, " use fewer workers;");
		rec_say(r, " call torch.set_num_threads(1) in worker_init_fn so each worker computes on "
		        "one thread.");
		rec_because(r, "the workers are runnable but not running %.0f%% of their time", runq * 100);
		because_cpus(r, m);
	}
	if (idle >= 0.5) {
		r = rec_add(a, "ipc_collate", bound);
		rec_say(r, "The hand-off is the bottleneck (IPC, collate): try a higher prefetch_factor, a "
		        "cheaper collate_fn or more samples per fetch%s.", in->gpu_mapped &&
		        !batches_pinned(a, threads) && h2d_pageable(in) ? ", pin_memory=True" : "");
		rec_because(r, "the workers are idle %.0f%% of their time while the trainer waits for data "
			    "%.0f%% of its", idle * 100, f * 100);
	}
	if ((in->gpu_mapped || in->gpu_unprobed) && !batches_pinned(a, threads) && h2d_pageable(in)) {
		r = rec_add(a, "pin_memory", bound);
		rec_say(r, "Set pin_memory=True: batches in pinned memory reach the GPU without a staging "
		        "copy, and the copy can overlap compute.");
		rec_because(r, "the job maps a GPU library, and no pin-memory thread handed the trainer its "
			    "batches");
		because_h2d(r, in);
	}
	if (in->workers_forked > 0) {
		r = rec_add(a, "persistent_workers", bound);
		rec_say(r, "Set persistent_workers=True so that each epoch does not start its workers "
		        "anew (importing, forking, warming up their caches).");
		rec_because(r, "%d worker process%s started during the window", in->workers_forked,
			    in->workers_forked == 1 ? " was" : "es were");
	}
}

/* The thread a thread verdict names, with its own breakdown. */
static void recommend_thread(struct analysis *a, const struct thread_result *threads, double f)
{
	const struct waited_on *w = a->verdict_waited_on >= 0 ? &a->waited_on[a->verdict_waited_on] : NULL;
	const struct thread_result *t = w && w->thread_index >= 0 ? &threads[w->thread_index] : NULL;
	double bound = speedup_bound(f);
	struct recommendation *r;
	char who[64];

	if (!w) {
		r = rec_add(a, "find_thread_waited_on", bound);
		rec_say(r, "Find what the trainer waits for (a lock, the GIL, a queue): run `pipeprof -p "
		        "PID` for the threads that end its waits.");
		rec_because(r, "the trainer waits %.0f%% of its time for other threads of its process; "
			    "which ones was not recorded", f * 100);
		return;
	}
	format_waker_name(who, sizeof(who), w);
	if (a->verdict == VERDICT_DATA_LOADING_THREAD) {
		r = rec_add(a, "loader_thread_to_workers", bound);
		rec_say(r, "Move that work into DataLoader worker processes (num_workers>0)%s.",
		        pipeline_no_idle_cpu(&a->model) ? "" : ", or run more loader threads if the work "
		        "releases the GIL (torch/NumPy ops, I/O)");
		rec_because(r, "the trainer waits %.0f%% of its time for %s, which computes its input "
			    "(on-CPU %.0f%%)", f * 100, who,
			    t ? 100 * share(t->ns, t->wall_ns, PP_RUNNING) : 0);
		return;
	}
	r = rec_add(a, "thread_contention", bound);
	if (t) {
		rec_say(r, "%s holds something the trainer needs (a lock, the GIL, a queue): do not hold "
		        "it across slow work (sleeps, I/O, long computations), or stop the trainer "
		        "depending on it.", who);
		rec_because(r, "the trainer waits %.0f%% of its time for %s (%s), itself on-CPU %.0f%%, "
			    "sleeping %.0f%%, in I/O %.0f%%", f * 100, who, role_name(t->role),
			    100 * share(t->ns, t->wall_ns, PP_RUNNING),
			    100 * (share(t->ns, t->wall_ns, PP_OTHER) + share(t->ns, t->wall_ns, PP_THREAD_WAIT) +
			           share(t->ns, t->wall_ns, PP_DATA_WAIT) + share(t->ns, t->wall_ns, PP_COMM_WAIT)),
			    100 * share(t->ns, t->wall_ns, PP_IO_WAIT));
	} else {
		rec_say(r, "Remove the contention on what the trainer shares with %s.", who);
		rec_because(r, "the trainer waits %.0f%% of its time for %s, which pipeprof does not trace "
			    "(another process)", f * 100, who);
	}
}

/* Compute on the trainer thread: intra-op threads where CPUs are idle, fewer where none is,
 * less work per step everywhere. No bound: removing compute is no stall removed. */
static void recommend_cpu(struct analysis *a, double f)
{
	struct pipeline_model *m = &a->model;
	const struct pipeline_inputs *in = &m->in;
	const struct prediction *p;
	struct recommendation *r;
	int to;

	/* A CPU-bound GPU job is bound by launches and Python, which intra-op threads do not
	 * spread. */
	/* A thread more per idle CPU, counting one idle from half of one on. */
	to = in->compute_threads + (int)(m->idle_cpus + 0.5);
	if (to > in->ncpus)
		to = in->ncpus;
	if (!in->gpu_mapped && in->compute_threads <= 1 && m->cpu_known &&
	    !pipeline_no_idle_cpu(m) && to > in->compute_threads) {
		p = pipeline_predict_threads(m, to);
		r = rec_add(a, "intra_op_threads", p ? p->bound : 0);
		link_prediction(r, a, p);
		rec_say(r, "Try torch.set_num_threads(%d) (or OMP_NUM_THREADS=%d) so tensor ops use the idle "
		        "CPUs. No predicted speedup: %s.", to, to, p ? p->withheld : "no room for it");
		rec_because(r, "one thread of the trainer's process computes (on-CPU %.0f%%), no intra-op "
			    "pool thread ran, no GPU library is mapped", f * 100);
		because_cpus(r, m);
	} else if (in->compute_threads > 1 && pipeline_no_idle_cpu(m) &&
		   m->avail_cpus + 0.5 < in->compute_threads) {
		to = (int)(m->avail_cpus + 0.5);
		if (to < 1)
			to = 1;
		r = rec_add(a, "fewer_compute_threads", 0);
		rec_say(r, "Try torch.set_num_threads(%d): intra-op threads that wait for a CPU hold the "
		        "others up at every barrier (OpenMP spins while it waits).", to);
		rec_because(r, "%d threads of the trainer's process compute on about %.1f CPUs the job can "
			    "have", in->compute_threads, m->avail_cpus);
		because_cpus(r, m);
	}
	if (!in->workers && m->cpu_known && !pipeline_no_idle_cpu(m)) {
		r = rec_add(a, "inputs_in_workers", 0);
		rec_say(r, "If the loop prepares its inputs on this thread (decoding, augmentation), "
		        "DataLoader workers (num_workers>0) would do it on the idle CPUs.");
		rec_because(r, "no DataLoader worker process was seen");
		because_cpus(r, m);
	}
	/* CUDA graphs only where launches were counted and found to be the cost: the steps'
	 * launch-bound advice (recommend_gpu_steps()) says so with its figures. */
	r = rec_add(a, "less_work_per_step", 0);
	rec_say(r, "Cut the Python and operator overhead of each step with torch.compile.");
	rec_because(r, "the trainer thread is on-CPU %.0f%% of the window%s", f * 100,
		    in->gpu_mapped ? " and the job maps a GPU library" : "");
}

static void recommend_contention(struct analysis *a, const struct analysis_input *in, double f,
				 double bound)
{
	const struct pipeline_model *m = &a->model;
	struct recommendation *r = rec_add(a, "fewer_threads", bound);

	/* Fewer of the job's own threads only where it runs several of a kind. */
	rec_say(r, "Give the trainer a CPU of its own:");
	if (m->in.compute_threads > 1)
		rec_say(r, " fewer intra-op threads (torch.set_num_threads, OMP_NUM_THREADS),");
	if (m->in.workers > 1)
		rec_say(r, " fewer workers,");
	if (!m->cpu_known || m->other_cpus >= 0.5)
		rec_say(r, " move competing jobs away,");
	rec_say(r, " or pin CPUs (taskset, cpusets).");
	rec_because(r, "the trainer is runnable but waiting for a CPU %.0f%% of the time", f * 100);
	if (in->cpu_busy >= 0 && in->runnable_avg >= 0)
		rec_because(r, "; CPUs %.0f%% busy, %.1f runnable tasks on %d CPUs on average",
			    in->cpu_busy * 100, in->runnable_avg, in->ncpus);
	if (m->cpu_known)
		rec_because(r, "; the job uses %.1f CPUs (%d compute thread%s, %d worker%s), other "
			    "processes %.1f", m->job_cpus, m->in.compute_threads,
			    m->in.compute_threads == 1 ? "" : "s", m->in.workers,
			    m->in.workers == 1 ? "" : "s", m->other_cpus);
}

/*
 * A trainer whose waits are ended by a process outside the job waits on it: a data service on
 * the host feeding it through a Unix socket or a pipe, a parameter server, a lock file's owner.
 * The model gives such waits no cause (OTHER); the process is still worth naming.
 */
static void recommend_outside_waker(struct analysis *a, const struct thread_result *tr,
				    const struct thread_result *threads, int n)
{
	const struct waited_on *w = a->nr_waited_on ? &a->waited_on[0] : NULL;
	double f;
	struct recommendation *r;

	if (!w || w->ctx != PP_WAKE_TASK || w->thread_index >= 0 || !w->tgid || !tr->wall_ns ||
	    !a->waited_total_ns || w->ns * 2 < a->waited_total_ns || w->cause_ns[PP_OTHER] * 2 < w->ns)
		return;
	/* A thread of the job's own processes gone before they were read is no stranger. */
	for (int i = 0; i < n; i++)
		if (threads[i].tgid == w->tgid)
			return;
	f = (double)w->ns / tr->wall_ns;
	if (f < 0.2)
		return;
	r = rec_add(a, "outside_waker", speedup_bound(f));
	rec_say(r, "The trainer waits on process %u, outside the traced job: if it feeds the job (a "
	        "data service, a parameter server), trace it too (pipeprof -p %u) to see why it is "
	        "slow to answer.", w->tgid, w->tgid);
	rec_because(r, "its wakeups ended %.0f%% of the trainer's time off-CPU, %.0f%% of the "
		    "trainer's time", 100.0 * w->ns / a->waited_total_ns, f * 100);
}

/*
 * A child's exit ends no DATA wait (sched.bpf.c): a loop that runs a command and waits for it
 * (subprocess.run of a shell tool, a checkpoint upload) waits on its children, which the model
 * gives no cause (OTHER). Named here, with the children's own name.
 */
static void recommend_children(struct analysis *a, const struct thread_result *tr)
{
	double f = tr->wall_ns ? (double)a->children_exit_ns / tr->wall_ns : 0;
	struct recommendation *r;

	if (!a->waited_total_ns || a->children_exit_ns * 2 < a->waited_total_ns || f < 0.2)
		return;
	r = rec_add(a, "waits_on_children", speedup_bound(f));
	rec_say(r, "The trainer waits for child processes it runs to finish (%s%s): start them without "
	        "waiting (subprocess.Popen, a thread), run them less often, or do their work in the "
	        "process.", a->children_comm, a->children_exit_procs > 1 ? " and others" : "");
	rec_because(r, "%d child process%s ended by exiting %.0f%% of the trainer's time off-CPU, %.0f%% "
		    "of its time", a->children_exit_procs, a->children_exit_procs == 1 ? "" : "es",
		    100.0 * a->children_exit_ns / a->waited_total_ns, f * 100);
}

/*
 * A loop run in a thread of its own while the main thread waits in join() (a notebook's
 * background training, a framework's runner thread): the main thread, taken for the trainer,
 * was blocked all window. Which other thread is the loop cannot be told safely (a queue's
 * feeder thread waits on the same workers), so the busiest are named for --tid.
 */
static void recommend_loop_thread(struct analysis *a, const struct analysis_input *in,
				  const struct thread_result *tr, const struct thread_result *threads,
				  int n)
{
	int pick[3] = { -1, -1, -1 };
	struct recommendation *r;

	if (a->trainer_choice != TRAINER_MAIN_THREAD || tr->open_wait_ns * 10 < tr->wall_ns * 9)
		return;
	for (int i = 0; i < n; i++) {
		const struct thread_result *t = &threads[i];
		__u64 busy = t->wall_ns - t->ns[PP_OTHER];

		if (t == tr || t->tgid != in->root_pid || busy * 10 < t->wall_ns)
			continue;
		for (int k = 0; k < 3; k++) {
			const struct thread_result *o = pick[k] >= 0 ? &threads[pick[k]] : NULL;

			if (!o || busy > o->wall_ns - o->ns[PP_OTHER]) {
				memmove(&pick[k + 1], &pick[k], (2 - k) * sizeof(pick[0]));
				pick[k] = i;
				break;
			}
		}
	}
	if (pick[0] < 0)
		return;
	r = rec_add(a, "loop_in_thread", 0);
	rec_say(r, "If the training loop runs in a thread other than the main one, trace again with "
	        "--tid naming it: threads of this process at work in the window were");
	for (int k = 0; k < 3 && pick[k] >= 0; k++) {
		const struct thread_result *t = &threads[pick[k]];
		int top = PP_RUNNING;

		for (int s = 0; s < PP_NR_STATES; s++)
			if (s != PP_OTHER && t->ns[s] > t->ns[top])
				top = s;
		rec_say(r, "%s %u (%s %.0f%%)", k ? "," : "", t->tid, state_name(top),
		        100.0 * t->ns[top] / t->wall_ns);
	}
	rec_say(r, ".");
	rec_because(r, "the main thread, taken for the trainer, was blocked %.0f%% of the window and "
		    "nothing woke it (a join() or an event loop)", 100.0 * tr->open_wait_ns / tr->wall_ns);
}

static void recommend_verdict(struct analysis *a, const struct analysis_input *in,
			      const struct thread_result *tr, const struct thread_result *threads,
			      int n)
{
	double f = a->verdict_fraction, bound = speedup_bound(f);
	double secs = in->window_ns / 1e9;
	struct recommendation *r;

	switch (a->verdict) {
	case VERDICT_DATA_LOADING:
		recommend_data(a, in, threads, f);
		break;
	case VERDICT_GPU:
		r = rec_add(a, "gpu_healthy", bound);
		rec_say(r, "The GPU is the bottleneck, which is what a GPU job should be; to go faster, "
		        "make the GPU work cheaper: mixed precision where the model still runs in fp32 "
		        "(torch.autocast, bf16/fp16; pipeprof cannot see kernels' precision), a larger "
		        "batch if memory allows.");
		rec_because(r, "the trainer waits for the GPU %.0f%% of its time, %.0f synchronising "
			    "calls, mean %.0f us", f * 100, (double)tr->gpu_calls, in->gpu_sync_mean_us);
		/* Many short waits mean the host keeps draining the queue, not a slow GPU. */
		if (secs > 0 && tr->gpu_calls / secs > MANY_SYNCS_PER_S &&
		    in->gpu_sync_mean_us < SHORT_SYNC_US) {
			r = rec_add(a, "fewer_host_syncs", bound);
			rec_say(r, "Remove host syncs in the loop (.item(), .cpu(), printing tensors, "
			        "torch.cuda.synchronize()).");
			rec_because(r, "the trainer synchronises with the GPU %.0f times a second, each "
				    "waiting %.0f us on average", tr->gpu_calls / secs, in->gpu_sync_mean_us);
		}
		break;
	case VERDICT_CPU:
		recommend_cpu(a, f);
		break;
	case VERDICT_IO:
		r = rec_add(a, "load_in_workers", bound);
		if (a->roles[ROLE_WORKER].processes)
			rec_say(r, "Move the reads into the Dataset (the DataLoader workers) so they overlap "
			        "compute; ");
		else
			rec_say(r, "Load data in DataLoader workers (num_workers>0) so reads overlap compute; ");
		rec_say(r, "cache the dataset in RAM or on local NVMe, read larger sequential chunks.");
		rec_because(r, "the trainer itself blocks on storage %.0f%% of the time", f * 100);
		if (in->io_requests)
			rec_because(r, "; the job issued %llu block requests (see the device latency "
				    "histogram)", (unsigned long long)in->io_requests);
		break;
	case VERDICT_CONTENTION:
		recommend_contention(a, in, f, bound);
		break;
	case VERDICT_COMM:
		r = rec_add(a, "find_straggler", bound);
		rec_say(r, "Run pipeprof on the other ranks and fix the straggler's own stall first: in a "
		        "job whose network is not saturated, collective waits are waits for a slower rank.");
		rec_because(r, "the trainer waits on collectives %.0f%% of the time", f * 100);
		r = rec_add(a, "overlap_comm", bound);
		rec_say(r, "Overlap communication with compute and tune bucket sizes (DDP bucket_cap_mb); "
		        "check the network.");
		rec_because(r, "the trainer waits on collectives %.0f%% of the time", f * 100);
		break;
	case VERDICT_DATA_LOADING_THREAD:
	case VERDICT_WAITING_ON_THREAD:
		recommend_thread(a, threads, f);
		break;
	case VERDICT_WAIT_NOT_ENDED:
		recommend_loop_thread(a, in, tr, threads, n);
		r = rec_add(a, "trace_longer", 0);
		rec_say(r, "Trace for longer than one step: -d at least twice the time between the "
		        "trainer's wakeups.");
		rec_because(r, "the trainer's last wait (%.1f s) outlasted the window and the grace after "
			    "it, and a wait's cause is known only when it ends", tr->open_wait_ns / 1e9);
		r = rec_add(a, "check_hang", 0);
		rec_say(r, "If the trainer never wakes, the job may be hung or starved: see where it "
		        "blocks (/proc/%u/task/%u/wchan, py-spy dump --pid %u) and whether the threads "
		        "that should wake it are running (the per-role breakdown).", tr->tgid, tr->tid,
		        tr->tgid);
		rec_because(r, "nothing woke the trainer for the last %.0f%% of the window", f * 100);
		break;
	case VERDICT_GPU_BACKLOG:
		r = rec_add(a, "sync_to_measure", 0);
		rec_say(r, "To see how much of the loop waits for the GPU, trace a window in which it "
		        "synchronises every step (a loss.item() or torch.cuda.synchronize() per step): "
		        "then that wait is timed as GPU_WAIT instead of hiding in blocked launches.");
		rec_because(r, "the trainer's %.0f GPU sync%s waited %.0f ms on average: the GPU had that "
			    "much work queued, so it runs behind the CPU", (double)tr->gpu_calls,
			    tr->gpu_calls == 1 ? "" : "s", in->gpu_sync_mean_us / 1e3);
		r = rec_add(a, "gpu_healthy", 0);
		rec_say(r, "If the GPU is the bottleneck, which is what a GPU job should be, make its work "
		        "cheaper: mixed precision where the model still runs in fp32 (torch.autocast, "
		        "bf16/fp16), a larger batch if memory "
		        "allows.");
		rec_because(r, "a GPU that runs %.0f ms behind the CPU is busy all that time",
			    in->gpu_sync_mean_us / 1e3);
		break;
	case VERDICT_GPU_UNOBSERVED:
		r = rec_add(a, "probe_gpu", 0);
		rec_say(r, "Make the GPU library readable to pipeprof and trace again: until its "
		        "synchronising calls are timed, GPU wait cannot be told from compute.");
		rec_because(r, "a GPU library is mapped but not probed (\"Not traced\" says why); the "
			    "trainer's %s is %.0f%%", state_name(a->verdict_state), f * 100);
		break;
	default:
		recommend_outside_waker(a, tr, threads, n);
		recommend_children(a, tr);
		r = rec_add(a, "undetermined", 0);
		rec_say(r, "Check --tid names the training thread; the waits' causes are under \"Waited on\".");
		rec_because(r, "no stall reaches the threshold and the trainer is on-CPU only %.0f%%, "
			    "off-CPU for reasons the model does not attribute (timers, locks, unrelated "
			    "wakers)", 100 * share(tr->ns, tr->wall_ns, PP_RUNNING));
		break;
	}
}

void recommend(struct analysis *a, const struct analysis_input *in, const struct thread_result *tr,
	       const struct thread_result *threads, int n)
{
	struct pipeline_inputs pin;
	struct recommendation *r;

	pipeline_inputs_of(a, threads, n, in, tr, &pin);
	pipeline_model_build(&a->model, &pin);
	if (!tr) {
		r = rec_add(a, "no_trainer", 0);
		rec_say(r, "Check the PID, or name the training thread with --tid.");
		rec_because(r, "the trainer thread was not seen running in the window");
		return;
	}
	recommend_verdict(a, in, tr, threads, n);
	/* Whatever the verdict: copies to the GPU seen to come mostly from pageable memory. */
	if (in->gpu_mapped && in->h2d_traced && in->h2d_bytes && h2d_pageable(in) &&
	    !batches_pinned(a, threads)) {
		bool given = false;

		for (int i = 0; i < a->nr_recs; i++)
			given |= !strcmp(a->recs[i].id, "pin_memory");
		if (!given) {
			r = rec_add(a, "pin_memory", 0);
			rec_say(r, "Copy to the GPU from pinned memory: pin_memory=True in the DataLoader, "
			        "or tensor.pin_memory() on buffers copied every step. The driver stages a "
			        "pageable copy through a pinned buffer of its own, and it cannot overlap "
			        "compute.");
			rec_because(r, "the job maps a GPU library");
			because_h2d(r, in);
		}
	}

	/* A second stall over the threshold deserves its own line. */
	for (int s = 0; s < PP_NR_STATES; s++) {
		double f = share(tr->ns, tr->wall_ns, s);
		enum verdict v = verdict_of_stall(s);

		/* Behind a GPU backlog, thread waits are waits on the blocked launching thread. */
		if (v == NR_VERDICTS || (enum pp_state)s == a->verdict_state || f < in->threshold ||
		    a->verdict == VERDICT_GPU_BACKLOG)
			continue;
		r = rec_add(a, "secondary_stall", speedup_bound(f));
		rec_say(r, "Then %s: it would follow once the first is fixed.", verdict_name(v));
		rec_because(r, "%s also takes %.0f%% of the trainer's time", state_name(s), f * 100);
	}
	/* Behind a GPU backlog, RUNNING holds launches blocked on the queue: no compute to bound. */
	if (a->verdict != VERDICT_CPU && a->verdict != VERDICT_GPU_BACKLOG &&
	    share(tr->ns, tr->wall_ns, PP_RUNNING) >= in->threshold) {
		r = rec_add(a, "compute_share", 0);
		rec_say(r, "After the stall is removed, the trainer's compute bounds the step time.");
		rec_because(r, "the trainer computes on the CPU %.0f%% of the time",
			    share(tr->ns, tr->wall_ns, PP_RUNNING) * 100);
	}
}

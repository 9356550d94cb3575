// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `pipeprof top`: one job's tracer and the figures of its last seconds. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "classify.h"
#include "daemon.h"
#include "pipeprof.h"
#include "proctree.h"
#include "top_job.h"

/* Step histograms: one per thread running backward passes, a few per job. */
#define TOP_STEP_HISTS 256

struct step_count {
	__u32 tid;
	__u64 count;
};

static void count_steps(const struct pp_hist_key *key, const struct pp_hist *h, void *ctx)
{
	struct step_count *sc = ctx;

	if (key->kind == PP_HK_STEP && (!sc->tid || key->id == sc->tid))
		sc->count += h->count;
}

/* Drops the oldest second when the ring is full, making room at its end. */
static void shift_seconds(struct top_job *s)
{
	if (s->nr_secs < TOP_VERDICT_SECONDS)
		return;
	free(s->secs[0]);
	memmove(s->secs, s->secs + 1, (TOP_VERDICT_SECONDS - 1) * sizeof(s->secs[0]));
	memmove(s->nr_threads, s->nr_threads + 1, (TOP_VERDICT_SECONDS - 1) * sizeof(int));
	memmove(s->steps, s->steps + 1, (TOP_VERDICT_SECONDS - 1) * sizeof(s->steps[0]));
	memmove(s->secs_ns, s->secs_ns + 1, (TOP_VERDICT_SECONDS - 1) * sizeof(s->secs_ns[0]));
	memmove(s->runnable, s->runnable + 1, (TOP_VERDICT_SECONDS - 1) * sizeof(s->runnable[0]));
	memmove(s->busy, s->busy + 1, TOP_VERDICT_SECONDS * sizeof(s->busy[0]));
	memmove(s->total, s->total + 1, TOP_VERDICT_SECONDS * sizeof(s->total[0]));
	memmove(s->cpu_ok, s->cpu_ok + 1, TOP_VERDICT_SECONDS * sizeof(s->cpu_ok[0]));
	s->nr_secs--;
}

static void base_input(struct top_job *s, struct analysis_input *in)
{
	*in = (struct analysis_input){
		.root_pid = s->pid, .tid_override = s->tid, .threshold = 0.20,
		.ncpus = sysconf(_SC_NPROCESSORS_ONLN), .cpu_busy = -1, .runnable_avg = -1,
	};
	gpu_io_input(&s->tracer, in);
	in->gpu_unprobed = tracer_gpu_unprobed(&s->tracer);
	in->gpu_mapped = tracer_gpu_mapped(&s->tracer);
}

/* The verdict and steps over the seconds the ring holds. */
static int analyse_recent(struct top_job *s)
{
	struct thread_result *merged;
	struct analysis_input in;
	struct analysis *an;
	double span_ns = 0, runnable = 0;
	__u64 steps = 0;
	int total = 0, n;

	for (int i = 0; i < s->nr_secs; i++) {
		total += s->nr_threads[i];
		span_ns += s->secs_ns[i];
		steps += s->steps[i];
		runnable += s->runnable[i];
	}
	merged = calloc(total ? total : 1, sizeof(*merged));
	an = calloc(1, sizeof(*an));
	if (!merged || !an) {
		free(merged);
		free(an);
		return -ENOMEM;
	}
	n = top_merge_seconds((const struct thread_result *const *)s->secs, s->nr_threads,
			      s->nr_secs, merged);
	base_input(s, &in);
	in.window_ns = span_ns;
	if (s->cpu_ok[0] && s->cpu_ok[s->nr_secs] && s->total[s->nr_secs] > s->total[0]) {
		in.cpu_busy = (double)(s->busy[s->nr_secs] - s->busy[0]) /
			      (s->total[s->nr_secs] - s->total[0]);
		in.runnable_avg = runnable / s->nr_secs;
	}
	analyse(merged, n, &in, an);
	s->view.have_verdict = true;
	s->view.verdict = an->verdict;
	s->view.verdict_state = an->verdict_state;
	s->view.verdict_seconds = s->nr_secs;
	snprintf(s->view.verdict_line, sizeof(s->view.verdict_line), "%s", an->verdict_line);
	s->view.steps_per_s = steps && span_ns > 0 ? steps / (span_ns / 1e9) : -1;
	snprintf(s->view.steps_note, sizeof(s->view.steps_note), "%s",
		 tracer_probed(&s->tracer, TRACER_STEP_PROBE) ?
		 "no backward pass (torch autograd) in these seconds" :
		 "libtorch_cpu is not mapped by the traced processes");
	free(merged);
	free(an);
	return 0;
}

int top_job_tick(struct top_job *s, __u64 now)
{
	struct step_count sc = {};
	struct analysis_input in;
	struct analysis *an = calloc(1, sizeof(*an));
	struct thread_result *threads = NULL;
	int nr = 0, running = 0, err;
	unsigned long long busy, total;

	if (!an)
		return -ENOMEM;
	err = tracer_window_threads(&s->tracer, &s->snaps, now, &threads, &nr);
	if (err)
		goto cleanup;
	/* Roles and the trainer as the second shows them; analyse() gives each thread its role. */
	base_input(s, &in);
	in.window_ns = now - s->last_tick_ns;
	analyse(threads, nr, &in, an);
	if (an->trainer_index >= 0)
		s->trainer_tid = threads[an->trainer_index].tid;
	for (int r = 0; r < NR_ROLES; r++)
		top_push_second(&s->view.roles[r], &an->roles[r]);
	sc.tid = s->trainer_tid;
	tracer_drain_hists(&s->tracer, count_steps, &sc);

	shift_seconds(s);
	s->secs[s->nr_secs] = threads;
	s->nr_threads[s->nr_secs] = nr;
	s->steps[s->nr_secs] = sc.count;
	s->secs_ns[s->nr_secs] = now - s->last_tick_ns;
	s->cpu_ok[s->nr_secs + 1] = !proc_cpu_times(PROCFS, &busy, &total, &running);
	s->busy[s->nr_secs + 1] = busy;
	s->total[s->nr_secs + 1] = total;
	/* procs_running counts this reader, which runs as it reads. */
	s->runnable[s->nr_secs] = running > 0 ? running - 1 : 0;
	s->nr_secs++;
	threads = NULL;
	s->last_tick_ns = now;
	s->view.seconds++;
	s->view.trainer_tid = s->trainer_tid;
	s->view.elapsed_s = (now - s->tracer.start_ns) / 1e9;
	err = analyse_recent(s);
cleanup:
	free(threads);
	free(an);
	return err;
}

int top_job_start(struct top_job *j, pid_t pid, pid_t tid, bool verbose,
		  struct dispatcher *dispatcher)
{
	struct tracer_opts topts = {
		.root = pid, .trainer_tid = tid, .verbose = verbose,
		.hist_kinds = 1u << PP_HK_STEP, .hist_keying = PP_HKEY_NONE, .hist_time_div = 1000,
		.hist_entries = TOP_STEP_HISTS,
	};
	unsigned long long busy, total;
	int running, err;

	topts.dispatcher = dispatcher;
	j->pid = pid;
	j->tid = tid;
	j->pidfd = -1;
	j->started = true;
	j->view.pid = pid;
	j->view.steps_per_s = -1;
	proc_comm(PROCFS, pid, pid, j->view.comm, sizeof(j->view.comm));
	proc_cmdline(PROCFS, pid, j->view.cmdline, sizeof(j->view.cmdline));
	err = tracer_start(&j->tracer, &topts);
	if (err)
		return err;
	j->pidfd = syscall(SYS_pidfd_open, pid, 0);
	j->last_tick_ns = j->tracer.start_ns;
	j->cpu_ok[0] = !proc_cpu_times(PROCFS, &busy, &total, &running);
	j->busy[0] = busy;
	j->total[0] = total;
	return 0;
}

int top_job_wait(struct top_job *j, int timeout_ms)
{
	int err = tracer_wait(&j->tracer, j->pidfd, timeout_ms);

	if (err < 0)
		return err;
	if (err || (j->pidfd < 0 && kill(j->pid, 0) && errno == ESRCH))
		j->gone = true;
	return 0;
}

void top_job_stop(struct top_job *j)
{
	if (!j->started)
		return;
	tracer_stop(&j->tracer);
	thread_snaps_free(&j->snaps);
	for (int i = 0; i < j->nr_secs; i++)
		free(j->secs[i]);
	j->nr_secs = 0;
	if (j->pidfd >= 0)
		close(j->pidfd);
	j->pidfd = -1;
	j->started = false;
}

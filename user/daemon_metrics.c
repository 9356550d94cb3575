// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The daemon's Prometheus exposition, rebuilt by the main loop, and its HTTP callbacks. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "classify.h"
#include "daemon.h"
#include "ranks.h"
#include "discover.h"
#include "discover.skel.h"
#include "gpu_apis.h"
#include "pipeprof.skel.h"
#include "prom.h"

/* ---- metrics ---- */

void gpu_sync_hist(struct tracer *t, __u64 *slots, double *sum_s)
{
	int fd = bpf_map__fd(t->skel->maps.gpu_api_stats);

	for (__u32 api = 0; api < (__u32)gpu_sync_api_count; api++) {
		struct pp_gpu_api_stats s;

		if (bpf_map_lookup_elem(fd, &api, &s))
			continue;
		for (int k = 0; k < PP_HIST_SLOTS; k++)
			slots[k] += s.slots[k];
		*sum_s += s.total_ns / 1e9;
	}
}

void io_hist(struct tracer *t, __u64 *slots, double *sum_s)
{
	struct pp_io_stats s;
	__u32 zero = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.io_stats), &zero, &s))
		return;
	memcpy(slots, s.slots, sizeof(s.slots));
	*sum_s = s.total_ns / 1e9;
}

#define LABELS(...) ((const struct prom_label[]){ __VA_ARGS__, { NULL, NULL } })

/* One sample per role and state of a job, as the two role/state families have them. */
static void role_state_samples(FILE *f, const char *name, const struct job *j,
			       const double values[NR_ROLES][PP_NR_STATES])
{
	char pid[16];

	snprintf(pid, sizeof(pid), "%d", j->pid);
	for (int r = 0; r < NR_ROLES; r++)
		for (int s = 0; s < PP_NR_STATES; s++)
			prom_sample(f, name, LABELS({ "pid", pid }, { "comm", j->comm },
						      { "role", role_name(r) }, { "state", state_name(s) }),
				    values[r][s]);
}

/*
 * The ranks of each distributed job (jobs whose environment names a RANK, grouped by
 * dist_job), and over the last window the straggler: the rank whose trainer waited least in
 * collectives while every other rank's waited there over the threshold and well more
 * (ranks.c). Each rank is traced as a job of its own, so its workers stay its own.
 */
static void rank_samples(FILE *f, struct daemon *d)
{
	char pid[16], rank[16];

	prom_family(f, "pipeprof_rank_info", "gauge",
		    "A traced job that is a rank of a distributed job (dist_job: its rendezvous "
		    "address, else its launcher)");
	for (struct job *j = d->jobs; j; j = j->next) {
		if (j->rank < 0)
			continue;
		snprintf(pid, sizeof(pid), "%d", j->pid);
		snprintf(rank, sizeof(rank), "%d", j->rank);
		prom_sample(f, "pipeprof_rank_info", LABELS({ "pid", pid }, { "comm", j->comm },
							    { "dist_job", j->dist_job },
							    { "rank", rank }), 1);
	}
	prom_family(f, "pipeprof_rank_straggler", "gauge",
		    "1 for the rank the others waited for in collectives over the last window, 0 "
		    "for the others (only for a job of two or more ranks with a window each)");
	for (struct job *j = d->jobs; j; j = j->next) {
		struct job *members[MAX_RANKS];
		double comm[MAX_RANKS];
		bool first = true;
		int n = 0, s;

		if (j->rank < 0 || !j->have_window)
			continue;
		/* Each job's ranks once: from its first member in the list. */
		for (struct job *k = d->jobs; k != j && first; k = k->next)
			first = !(k->rank >= 0 && k->have_window && !strcmp(k->dist_job, j->dist_job));
		if (!first)
			continue;
		for (struct job *k = j; k && n < MAX_RANKS; k = k->next)
			if (k->rank >= 0 && k->have_window && !strcmp(k->dist_job, j->dist_job)) {
				members[n] = k;
				comm[n++] = k->fraction[ROLE_TRAINER][PP_COMM_WAIT];
			}
		if (n < 2)
			continue;
		s = ranks_pick_straggler(comm, n, 0.20, NULL);
		for (int i = 0; i < n; i++) {
			snprintf(pid, sizeof(pid), "%d", members[i]->pid);
			snprintf(rank, sizeof(rank), "%d", members[i]->rank);
			prom_sample(f, "pipeprof_rank_straggler",
				    LABELS({ "pid", pid }, { "comm", members[i]->comm },
					   { "dist_job", members[i]->dist_job }, { "rank", rank }),
				    i == s);
		}
	}
}

/*
 * NCCL per job and API, since the attach, as of the last window (as the state seconds are):
 * only for jobs with a probed libnccl, and only the APIs probed. Each rank is a job, so these
 * are per rank; pipeprof_rank_info joins them to their rank and dist_job on pid.
 */
static void nccl_family(FILE *f, struct daemon *d, const char *name, enum nccl_metric m)
{
	char pid[16];

	for (struct job *j = d->jobs; j; j = j->next) {
		snprintf(pid, sizeof(pid), "%d", j->pid);
		nccl_prom_samples(f, name, m, pid, j->comm, j->nccl, j->nccl_probed);
	}
}

static void nccl_families(FILE *f, struct daemon *d)
{
	prom_family(f, "pipeprof_job_nccl_calls_total", "counter",
		    "NCCL calls that returned, per API (op: its NCCL name), since the attach, as "
		    "of the last window");
	nccl_family(f, d, "pipeprof_job_nccl_calls_total", NCCL_METRIC_CALLS);
	prom_family(f, "pipeprof_job_nccl_bytes_total", "counter",
		    "Bytes of the NCCL calls of known size, per API: count x type size; for "
		    "ncclAllGather, the bytes received");
	nccl_family(f, d, "pipeprof_job_nccl_bytes_total", NCCL_METRIC_BYTES);
	prom_family(f, "pipeprof_job_nccl_unsized_calls_total", "counter",
		    "NCCL calls whose bytes are unknown, not in the bytes: an AllGather on a "
		    "communicator made before the attach, or an unknown data type");
	nccl_family(f, d, "pipeprof_job_nccl_unsized_calls_total", NCCL_METRIC_UNSIZED);
	prom_family(f, "pipeprof_job_nccl_seconds_total", "counter",
		    "Time inside NCCL calls, per API (COMM_WAIT to the calling thread)");
	nccl_family(f, d, "pipeprof_job_nccl_seconds_total", NCCL_METRIC_SECONDS);
}

/* The whole exposition, rebuilt each second; the HTTP thread only copies it. */
static char *build_metrics(struct daemon *d)
{
	struct rusage ru;
	char *buf = NULL, pid[16];
	size_t len = 0;
	__u64 lost = 0;
	double bpf_s = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;

	prom_family(f, "pipeprof_job_info", "gauge", "A traced job (pid, command name)");
	for (struct job *j = d->jobs; j; j = j->next) {
		snprintf(pid, sizeof(pid), "%d", j->pid);
		prom_sample(f, "pipeprof_job_info", LABELS({ "pid", pid }, { "comm", j->comm }), 1);
	}
	rank_samples(f, d);
	prom_family(f, "pipeprof_job_state_seconds_total", "counter",
		    "Thread time per role and stall-model state, summed over the role's threads");
	for (struct job *j = d->jobs; j; j = j->next)
		role_state_samples(f, "pipeprof_job_state_seconds_total", j, j->seconds);
	prom_family(f, "pipeprof_job_state_fraction", "gauge",
		    "Share of the role's thread time in each state over the last window");
	for (struct job *j = d->jobs; j; j = j->next)
		if (j->have_window)
			role_state_samples(f, "pipeprof_job_state_fraction", j, j->fraction);
	prom_family(f, "pipeprof_job_verdict", "gauge",
		    "1 for the job's verdict over the last window, 0 for the others");
	for (struct job *j = d->jobs; j; j = j->next) {
		snprintf(pid, sizeof(pid), "%d", j->pid);
		for (int v = 0; j->have_window && v < NR_VERDICTS; v++)
			prom_sample(f, "pipeprof_job_verdict",
				    LABELS({ "pid", pid }, { "comm", j->comm }, { "verdict", verdict_id(v) }),
				    j->verdict == (enum verdict)v);
	}
	prom_family(f, "pipeprof_job_step_seconds", "histogram",
		    "Training step time: between the trainer's backward passes");
	for (struct job *j = d->jobs; j; j = j->next) {
		snprintf(pid, sizeof(pid), "%d", j->pid);
		prom_log2_histogram(f, "pipeprof_job_step_seconds",
				    LABELS({ "pid", pid }, { "comm", j->comm }), j->step_slots,
				    PP_HIST_SLOTS, 1e-6, j->step_sum_s);
	}
	prom_family(f, "pipeprof_job_gpu_sync_seconds", "histogram",
		    "Synchronising GPU API calls (GPU_WAIT episodes)");
	for (struct job *j = d->jobs; j; j = j->next) {
		__u64 slots[PP_HIST_SLOTS] = {};
		double sum = 0;

		gpu_sync_hist(&j->tracer, slots, &sum);
		snprintf(pid, sizeof(pid), "%d", j->pid);
		prom_log2_histogram(f, "pipeprof_job_gpu_sync_seconds",
				    LABELS({ "pid", pid }, { "comm", j->comm }), slots, PP_HIST_SLOTS,
				    1e-6, sum);
	}
	prom_family(f, "pipeprof_job_io_latency_seconds", "histogram",
		    "Block requests issued by the job, issue to completion");
	for (struct job *j = d->jobs; j; j = j->next) {
		__u64 slots[PP_HIST_SLOTS] = {};
		double sum = 0;

		io_hist(&j->tracer, slots, &sum);
		snprintf(pid, sizeof(pid), "%d", j->pid);
		prom_log2_histogram(f, "pipeprof_job_io_latency_seconds",
				    LABELS({ "pid", pid }, { "comm", j->comm }), slots, PP_HIST_SLOTS,
				    1e-6, sum);
	}

	nccl_families(f, d);

	for (struct job *j = d->jobs; j; j = j->next) {
		double run_s;
		__u64 job_lost;

		job_costs(j, &job_lost, &run_s);
		bpf_s += run_s;
		lost += job_lost;
	}
	if (d->dispatching) {
		uint64_t misses = 0, run_ns = 0, runs = 0;

		/* The jobs' scheduler programs run inside the dispatcher's: their time is its. */
		dispatcher_prog_stats(&d->dispatcher, &misses, &run_ns, &runs);
		bpf_s += run_ns / 1e9;
		lost += misses + dispatcher_lost(&d->dispatcher);
	}
	if (d->discover) {
		struct bpf_prog_info info = {};
		__u32 info_len = sizeof(info), key = DISCOVER_DROPPED;
		__u64 dropped = 0;

		if (!bpf_obj_get_info_by_fd(bpf_program__fd(d->discover->progs.on_exec), &info, &info_len))
			bpf_s += info.run_time_ns / 1e9;
		bpf_map_lookup_elem(bpf_map__fd(d->discover->maps.dropped), &key, &dropped);
		lost += dropped;
	}
	lost += d->candidates_dropped;
	getrusage(RUSAGE_SELF, &ru);
	prom_family(f, "pipeprof_jobs_attached", "gauge", "Jobs traced now");
	prom_sample(f, "pipeprof_jobs_attached", NULL, d->nr_jobs);
	prom_family(f, "pipeprof_attach_failures_total", "counter", "Jobs that could not be attached");
	prom_sample_u64(f, "pipeprof_attach_failures_total", NULL, d->attach_failures);
	prom_family(f, "pipeprof_events_lost_total", "counter",
		    "Events dropped: maps full, BPF re-entry, exec notifications without room");
	prom_sample_u64(f, "pipeprof_events_lost_total", NULL, lost + d->events_lost_exited);
	prom_family(f, "pipeprof_cpu_seconds_total", "counter", "pipeprof's own CPU time, user and system");
	prom_sample(f, "pipeprof_cpu_seconds_total", NULL,
		    ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
		    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	prom_family(f, "pipeprof_bpf_run_seconds_total", "counter",
		    "CPU time of pipeprof's BPF programs, from the kernel's BPF statistics");
	prom_sample(f, "pipeprof_bpf_run_seconds_total", NULL, bpf_s + d->bpf_run_s_exited);
	prom_family(f, "pipeprof_windows_total", "counter", "Job windows completed");
	prom_sample_u64(f, "pipeprof_windows_total", NULL, d->windows);
#undef LABELS
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

char *http_metrics(void *ctx, int *status, const char **content_type)
{
	struct daemon *d = ctx;
	char *body;

	pthread_mutex_lock(&d->lock);
	body = d->metrics ? strdup(d->metrics) : strdup("");
	pthread_mutex_unlock(&d->lock);
	*status = 200;
	*content_type = "text/plain; version=0.0.4; charset=utf-8";
	return body;
}

char *http_report(void *ctx, long pid, int *status, const char **content_type)
{
	struct daemon *d = ctx;
	struct job *j;
	char *body = NULL;

	*content_type = "application/json";
	pthread_mutex_lock(&d->lock);
	if (d->serve == SERVE_METRICS) {
		pthread_mutex_unlock(&d->lock);
		*status = 403;
		return strdup("{\"error\": \"reports are not served here (serve = metrics)\"}\n");
	}
	j = find_job(d, pid);
	if (j && j->report_json) {
		body = strdup(j->report_json);
		*status = 200;
	}
	pthread_mutex_unlock(&d->lock);
	if (body)
		return body;
	*status = 404;
	if (asprintf(&body, "{\"error\": \"%s %ld\"}\n", j ? "no complete window yet for PID" :
		     "no traced job with PID", pid) < 0)
		return NULL;
	return body;
}

void refresh_metrics(struct daemon *d)
{
	char *text;

	/* Built outside the lock: it reads BPF maps, which the HTTP thread does not need. */
	text = build_metrics(d);
	if (!text)
		return;
	pthread_mutex_lock(&d->lock);
	free(d->metrics);
	d->metrics = text;
	pthread_mutex_unlock(&d->lock);
}

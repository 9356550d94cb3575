// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The daemon's jobs: attach, detach, and each job's windows (analysis, report, events). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <json-c/json.h>
#include "classify.h"
#include "daemon.h"
#include "gpu_apis.h"
#include "hist.h"
#include "pipeprof.skel.h"
#include "proctree.h"
#include "sanitize.h"
#include "report.h"

/* ---- jobs ---- */

struct job *find_job(struct daemon *d, pid_t pid)
{
	for (struct job *j = d->jobs; j; j = j->next)
		if (j->pid == pid)
			return j;
	return NULL;
}

/* A process some job already follows: a DataLoader worker, or the job itself. */
bool part_of_a_job(struct daemon *d, pid_t pid)
{
	for (struct job *j = d->jobs; j; j = j->next) {
		struct pp_proc proc;

		if (j->pid == pid ||
		    !bpf_map_lookup_elem(bpf_map__fd(j->tracer.skel->maps.tracked_procs), &pid, &proc))
			return true;
	}
	return false;
}

void detach_jobs_holding(struct daemon *d, pid_t pid, const char *why)
{
	struct job *next;

	for (struct job *j = d->jobs; j; j = next) {
		struct pp_proc proc;

		next = j->next;
		if (j->pid != pid &&
		    !bpf_map_lookup_elem(bpf_map__fd(j->tracer.skel->maps.tracked_procs), &pid, &proc))
			detach_job(d, j, why);
	}
}

static void log_event(struct daemon *d, json_object *o)
{
	json_object_object_add(o, "time", json_object_new_double(time(NULL)));
	if (d->jsonl_open && jsonl_write(&d->jsonl, o))
		fprintf(stderr, "pipeprof: cannot write %s: %s\n", d->cfg.jsonl, d->jsonl.error);
	json_object_put(o);
}

static json_object *event(const char *type, const struct job *j)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "schema", json_object_new_string("pipeprof.daemon/v1"));
	json_object_object_add(o, "pid", json_object_new_int(j->pid));
	json_object_object_add(o, "comm", json_object_new_string(j->comm));
	return o;
}

/* Which rank of which distributed job a process is, from what its launcher put in its
 * environment, else rank_hint (>= 0: its place among ranks that name none); the ranks of one job
 * share its rendezvous address, or at least their launcher. */
static void job_rank(struct job *j, int rank_hint)
{
	char addr[48], port[16];

	j->rank = proc_env_rank(PROCFS, j->pid);
	if (j->rank < 0)
		j->rank = rank_hint;
	if (j->rank < 0)
		return;
	if (!proc_env_value(PROCFS, j->pid, "MASTER_ADDR", addr, sizeof(addr)) &&
	    !proc_env_value(PROCFS, j->pid, "MASTER_PORT", port, sizeof(port))) {
		snprintf(j->dist_job, sizeof(j->dist_job), "%s:%s", addr, port);
		return;
	}
	snprintf(j->dist_job, sizeof(j->dist_job), "launcher-%d", (int)proc_ppid(PROCFS, j->pid));
}

void attach_job(struct daemon *d, pid_t pid)
{
	attach_job_ranked(d, pid, -1);
}

/* pids ascending, for numbering ranks by pid. */
static int by_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * A job whose tracer found ranks inside it (tracer_mark_rank: their environment names a RANK,
 * or they joined a process group with each other, as torch.multiprocessing.spawn's do) is their
 * launcher: judged by its own main thread, idle in join(), it would read as no training at all.
 * Each rank becomes a job of its own, numbered by pid where its environment names no rank, and
 * the launcher none. Returns whether j was replaced (and freed).
 */
bool split_ranks(struct daemon *d, struct job *j)
{
	int fd = bpf_map__fd(j->tracer.skel->maps.tracked_procs), n = 0;
	__u32 key, next, *prev = NULL;
	pid_t ranks[MAX_RANKS_PER_JOB];
	struct pp_proc proc;

	if (!j->tracer.ranks_marked)
		return false;
	while (!bpf_map_get_next_key(fd, prev, &next) && n < MAX_RANKS_PER_JOB) {
		key = next;
		prev = &key;
		/* A rank's own process carries itself as its rank. */
		if (!bpf_map_lookup_elem(fd, &key, &proc) && !proc.exit_ns && proc.rank_tgid == key)
			ranks[n++] = key;
	}
	if (n < 2)
		return false;
	qsort(ranks, n, sizeof(ranks[0]), by_pid);
	detach_job(d, j, "a launcher of ranks: each rank is a job of its own");
	for (int i = 0; i < n; i++)
		attach_job_ranked(d, ranks[i], i);
	return true;
}

void attach_job_ranked(struct daemon *d, pid_t pid, int rank_hint)
{
	struct tracer_opts opts = {
		.root = pid, .verbose = d->cfg.verbose,
		.hist_kinds = 1u << PP_HK_STEP, .hist_keying = PP_HKEY_NONE, .hist_time_div = 1000,
		.hist_entries = STEP_HISTS_PER_JOB,
	};
	struct job *j = calloc(1, sizeof(*j));
	int err;

	if (!j)
		return;
	j->pid = pid;
	proc_comm(PROCFS, pid, pid, j->comm, sizeof(j->comm));
	job_rank(j, rank_hint);
	opts.distributed = j->rank >= 0;
	opts.dispatcher = d->dispatching ? &d->dispatcher : NULL;
	err = tracer_start(&j->tracer, &opts);
	if (err) {
		tracer_stop(&j->tracer);
		free(j);
		if (err != -ESRCH) {	/* a process gone already is no failure */
			pthread_mutex_lock(&d->lock);
			d->attach_failures++;
			pthread_mutex_unlock(&d->lock);
			fprintf(stderr, "pipeprof: cannot attach PID %d: %s\n", pid, strerror(-err));
		}
		return;
	}
	j->window_start_ns = j->tracer.start_ns;
	cpu_window_open(&j->cpu, PROCFS);
	j->verdict = NR_VERDICTS;
	pthread_mutex_lock(&d->lock);
	j->next = d->jobs;
	d->jobs = j;
	d->nr_jobs++;
	pthread_mutex_unlock(&d->lock);
	/* Its owner chose the name: escaped, lest it drive the terminal of whoever reads the log. */
	char shown[SAN_TEXT_SIZE(sizeof(j->comm))];

	fprintf(stderr, "pipeprof: attached PID %d (%s)\n", pid,
		san_text(shown, sizeof(shown), j->comm, sizeof(j->comm)));
	log_event(d, event("attach", j));
	/* The ranks the attach found in it; ranks that join their group later, at a refresh. */
	split_ranks(d, j);
}

/* What a job's tracer lost and what its BPF programs cost: the self-metrics add these up.
 * One read of the programs' info serves both. */
void job_costs(struct job *j, __u64 *lost, double *bpf_run_s)
{
	uint64_t misses, run_ns, runs;

	tracer_prog_stats(&j->tracer, &misses, &run_ns, &runs);
	*lost = misses + tracer_counter(&j->tracer, PP_CNT_THREADS_FULL) +
		tracer_counter(&j->tracer, PP_CNT_PROCS_FULL) +
		tracer_counter(&j->tracer, PP_CNT_RQ_FULL) +
		tracer_counter(&j->tracer, PP_CNT_HIST_FULL);
	*bpf_run_s = run_ns / 1e9;
}

static void free_job(struct job *j)
{
	tracer_stop(&j->tracer);
	thread_snaps_free(&j->snaps);
	free(j->report_json);
	free(j);
}

void detach_job(struct daemon *d, struct job *j, const char *why)
{
	double run_s;
	__u64 lost;

	job_costs(j, &lost, &run_s);
	pthread_mutex_lock(&d->lock);
	for (struct job **p = &d->jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
	d->nr_jobs--;
	d->events_lost_exited += lost;
	d->bpf_run_s_exited += run_s;
	pthread_mutex_unlock(&d->lock);
	fprintf(stderr, "pipeprof: detached PID %d (%s)\n", j->pid, why);
	log_event(d, event("detach", j));
	free_job(j);
}

/* ---- windows ---- */

struct step_drain {
	__u32 trainer_tid;	/* 0: any thread's */
	__u64 slots[PP_HIST_SLOTS];	/* log2 usecs */
	double sum_s;
	int other_threads;	/* with passes of their own: a trainer chosen wrongly shows here */
};

static void add_steps(const struct pp_hist_key *key, const struct pp_hist *h, void *ctx)
{
	struct step_drain *sd = ctx;

	if (key->kind != PP_HK_STEP)
		return;
	/* One key per thread in a drained epoch, so each counts once. */
	if (sd->trainer_tid && key->id != sd->trainer_tid) {
		sd->other_threads += h->count > 0;
		return;
	}
	for (int s = 0; s < PP_HIST_SLOTS; s++)
		sd->slots[s] += h->slots[s];
	sd->sum_s += h->sum / 1e9;
}

/* This window's step histogram of the trainer (its backward passes), drained from the map. */
static void window_steps(struct job *j, struct step_drain *sd)
{
	tracer_drain_hists(&j->tracer, add_steps, sd);
}

static void check_step_regression(struct daemon *d, struct job *j, const __u64 *slots)
{
	__u64 steps = hist_total(slots, PP_HIST_SLOTS);
	double median, baseline;
	json_object *o;

	if (steps < MIN_STEPS_FOR_MEDIAN)
		return;
	median = hist_percentile(slots, PP_HIST_SLOTS, 50) / 1e6;
	if (step_baseline_feed(&j->baseline, median, d->cfg.step_regression, &baseline)) {
		o = event("step_regression", j);
		json_object_object_add(o, "median_step_s", json_object_new_double(median));
		json_object_object_add(o, "baseline_s", json_object_new_double(baseline));
		json_object_object_add(o, "threshold", json_object_new_double(d->cfg.step_regression));
		log_event(d, o);
	}
}

/* The same document `pipeprof -p PID -j` prints, over this window's threads; its steps from
 * the window's histogram, as the daemon keeps no step record. */
static char *window_report(struct job *j, struct thread_result *threads, int nr,
			   const struct analysis_input *in, const struct analysis *an,
			   const struct step_drain *steps, __u64 end_ns, bool cmdline,
			   struct nccl_counts nccl[PP_NR_NCCL_CALLS], bool *have_nccl)
{
	struct report r = {};
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (tracer_collect(&j->tracer, end_ns, &r))
		goto cleanup;
	/* The metrics' NCCL counts are the report's own reading of nccl_stats. */
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++)
		nccl[op] = (struct nccl_counts){ .calls = r.nccl[op].calls, .bytes = r.nccl[op].bytes,
						 .unsized = r.nccl[op].unsized,
						 .total_ns = r.nccl[op].total_ns };
	*have_nccl = true;
	window_calls_delta(&r, &j->calls_seen);
	free(r.threads);
	r.threads = threads;
	r.nr_threads = nr;
	r.root_pid = j->pid;
	r.start_ns = j->window_start_ns;
	r.end_ns = end_ns;
	r.input = *in;
	r.analysis = *an;
	tracer_steps_probe_state(&j->tracer, &r);
	r.steps_tid = steps->trainer_tid;
	steps_from_hist(&r, steps->slots, steps->sum_s, steps->other_threads);
	/* serve = no-cmdline: arguments may hold secrets; the command name is what metrics show. */
	if (cmdline)
		proc_cmdline(PROCFS, j->pid, r.cmdline, sizeof(r.cmdline));
	else
		snprintf(r.cmdline, sizeof(r.cmdline), "%s", j->comm);
	f = open_memstream(&buf, &len);
	if (f) {
		if (report_print_json(f, &r)) {
			fclose(f);
			free(buf);
			buf = NULL;
		} else {
			fclose(f);
		}
	}
	r.threads = NULL;
cleanup:
	free(r.threads);
	free(r.procs);
	free(r.libs);
	return buf;
}

void gpu_io_input(struct tracer *t, struct analysis_input *in)
{
	__u64 slots[PP_HIST_SLOTS] = {}, calls;
	double sum = 0;

	gpu_sync_hist(t, slots, &sum);
	calls = hist_total(slots, PP_HIST_SLOTS);
	in->gpu_sync_mean_us = calls ? sum * 1e6 / calls : 0;
	memset(slots, 0, sizeof(slots));
	io_hist(t, slots, &sum);
	in->io_requests = hist_total(slots, PP_HIST_SLOTS);
}

static json_object *roles_json(const struct analysis *an)
{
	json_object *roles = json_object_new_object();

	for (int r = 0; r < NR_ROLES; r++) {
		json_object *o = json_object_new_object();

		for (int s = 0; s < PP_NR_STATES; s++)
			json_object_object_add(o, state_name(s),
					       json_object_new_double(an->roles[r].ns[s] / 1e9));
		json_object_object_add(roles, role_name(r), o);
	}
	return roles;
}

void process_window(struct daemon *d, struct job *j, __u64 now)
{
	struct analysis_input in = {
		.root_pid = j->pid, .threshold = 0.20, .ncpus = sysconf(_SC_NPROCESSORS_ONLN),
		.window_ns = now - j->window_start_ns,
	};
	unsigned long long busy = 0, total = 0;
	int running;
	bool cpu_ok = !proc_cpu_times(PROCFS, &busy, &total, &running);
	struct analysis an = {};
	struct thread_result *threads = NULL;
	struct step_drain steps = {};
	struct nccl_counts nccl[PP_NR_NCCL_CALLS] = {};
	bool have_nccl = false, probed[PP_NR_NCCL_CALLS];
	enum verdict before = j->verdict;
	char *report;
	json_object *o;
	int nr = 0;

	cpu_window_result(&j->cpu, cpu_ok, busy, total, &in.cpu_busy, &in.runnable_avg);
	cpu_window_start(&j->cpu, cpu_ok, busy, total);
	if (tracer_window_threads(&j->tracer, &j->snaps, now, &threads, &nr))
		return;
	gpu_io_input(&j->tracer, &in);
	in.gpu_unprobed = tracer_gpu_unprobed(&j->tracer);
	in.gpu_mapped = tracer_gpu_mapped(&j->tracer);
	analyse(threads, nr, &in, &an);
	steps.trainer_tid = an.trainer_index >= 0 ? threads[an.trainer_index].tid : 0;
	window_steps(j, &steps);
	report = window_report(j, threads, nr, &in, &an, &steps, now, d->cfg.serve == SERVE_ALL,
			       nccl, &have_nccl);
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++)
		probed[op] = tracer_probed(&j->tracer, nccl_op_name(op));

	pthread_mutex_lock(&d->lock);
	for (int r = 0; r < NR_ROLES; r++)
		for (int s = 0; s < PP_NR_STATES; s++) {
			j->seconds[r][s] += an.roles[r].ns[s] / 1e9;
			j->fraction[r][s] = an.roles[r].wall_ns ?
					    (double)an.roles[r].ns[s] / an.roles[r].wall_ns : 0;
		}
	j->have_window = true;
	j->verdict = an.verdict;
	for (int s = 0; s < PP_HIST_SLOTS; s++)
		j->step_slots[s] += steps.slots[s];
	j->step_sum_s += steps.sum_s;
	if (have_nccl)
		nccl_accumulate(j->nccl, j->nccl_seen, nccl);
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++)
		j->nccl_probed[op] |= probed[op];
	free(j->report_json);
	j->report_json = report;
	d->windows++;
	pthread_mutex_unlock(&d->lock);

	o = event("snapshot", j);
	json_object_object_add(o, "window_s", json_object_new_double((now - j->window_start_ns) / 1e9));
	json_object_object_add(o, "verdict", json_object_new_string(verdict_id(an.verdict)));
	json_object_object_add(o, "verdict_name", json_object_new_string(verdict_name(an.verdict)));
	json_object_object_add(o, "trainer_tid", an.trainer_index >= 0 ?
				json_object_new_int(threads[an.trainer_index].tid) : NULL);
	json_object_object_add(o, "seconds", roles_json(&an));
	json_object_object_add(o, "steps", json_object_new_uint64(hist_total(steps.slots, PP_HIST_SLOTS)));
	json_object_object_add(o, "median_step_s", hist_total(steps.slots, PP_HIST_SLOTS) ?
				json_object_new_double(hist_percentile(steps.slots, PP_HIST_SLOTS, 50) / 1e6) :
				NULL);
	log_event(d, o);
	if (before != NR_VERDICTS && before != an.verdict) {
		o = event("verdict_change", j);
		json_object_object_add(o, "from", json_object_new_string(verdict_id(before)));
		json_object_object_add(o, "to", json_object_new_string(verdict_id(an.verdict)));
		log_event(d, o);
	}
	check_step_regression(d, j, steps.slots);
	free(threads);
	j->window_start_ns = now;
}

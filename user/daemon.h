/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* `pipeprof daemon`'s state, shared by its parts: daemon_cmd.c (options, settings, main
 * loop), daemon_discover.c (which processes are jobs), daemon_job.c (attach, detach, windows),
 * daemon_metrics.c (the exposition and the HTTP callbacks). Not a library: one daemon. */
#ifndef PIPEPROF_DAEMON_H
#define PIPEPROF_DAEMON_H

#include <pthread.h>
#include <regex.h>
#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>
#include "classify.h"
#include "daemon_config.h"
#include "daemon_window.h"
#include "http.h"
#include "jsonl.h"
#include "nccl_prom.h"
#include "proctree.h"
#include "step_baseline.h"
#include "dispatcher.h"
#include "tracer.h"

#define TICK_NS 1000000000ULL
/* A job's libraries (CUDA loaded late, new workers) are looked for every few seconds: reading
 * every tracked process's maps each second cost more CPU than everything else together. */
#define REFRESH_EVERY_TICKS 5
#define CANDIDATE_TTL_NS (120 * 1000000000ULL)
#define MAX_CANDIDATES 4096
#define MIN_STEPS_FOR_MEDIAN 3
/* Step histograms are per thread running backward passes: a few per job. The map is
 * preallocated in the kernel for each job, so it is kept small. */
#define STEP_HISTS_PER_JOB 256

struct job {
	pid_t pid;
	char comm[16];
	/* A rank of a distributed job: the RANK its environment names (-1: none) and the job it
	 * belongs to, MASTER_ADDR:MASTER_PORT as torchrun sets them, else its launcher's pid. */
	int rank;
	char dist_job[80];
	struct tracer tracer;
	struct thread_snaps snaps;			/* state times at the last window */
	__u64 window_start_ns;
	struct cpu_window cpu;				/* the host's CPUs over this window */
	double seconds[NR_ROLES][PP_NR_STATES];		/* cumulative, closed episodes */
	double fraction[NR_ROLES][PP_NR_STATES];	/* the last window */
	bool have_window;
	enum verdict verdict;
	__u64 step_slots[PP_HIST_SLOTS];		/* cumulative, usecs */
	double step_sum_s;
	struct step_baseline baseline;			/* per-window median steps, seconds */
	char *report_json;				/* the last window's pipeprof.report/v1 */
	/* NCCL per API since the attach, as of the last window, and nccl_stats as it read then;
	 * the APIs a probe has been on (their series stay while the job does). */
	struct nccl_counts nccl[PP_NR_NCCL_CALLS], nccl_seen[PP_NR_NCCL_CALLS];
	bool nccl_probed[PP_NR_NCCL_CALLS];
	struct window_calls_seen calls_seen;		/* for the window's report */
	struct job *next;
};

struct candidate {
	pid_t pid;
	__u64 until_ns;
};

struct daemon {
	struct daemon_config cfg;
	struct daemon_config cli;	/* what the command line set wins over the file */
	bool cli_set[16];
	regex_t match_re;
	bool have_re;
	struct job *jobs;
	int nr_jobs;
	struct candidate candidates[MAX_CANDIDATES];
	int nr_candidates;
	struct discover_bpf *discover;
	/* The scheduler tracepoints, attached once for every job (dispatcher.h); not dispatching
	 * where it could not load: each job then attaches its own. */
	struct dispatcher dispatcher;
	bool dispatching;
	struct ring_buffer *execs;
	struct jsonl jsonl;
	bool jsonl_open;
	struct http_server *http;
	int stats_fd;			/* kernel BPF run-time stats, on while held */

	pthread_mutex_t lock;		/* guards what the HTTP thread reads below */
	enum serve_mode serve;		/* cfg.serve, for the HTTP thread */
	char *metrics;
	__u64 windows, attach_failures, events_lost_exited, candidates_dropped;
	double bpf_run_s_exited;
};

/* daemon_discover.c */
/* The host's jobs as the daemon finds them at start: each process that maps an ML library
 * (libtorch, libcudart, libcuda, libnccl) and has no ancestor that does, this one aside; no
 * --match or cgroup filter. Up to max into pids; returns how many, or -errno. */
int discover_jobs(pid_t *pids, int max);
void check_candidates(struct daemon *d);
void scan_existing(struct daemon *d);
int start_discovery(struct daemon *d);

/* daemon_job.c */
struct job *find_job(struct daemon *d, pid_t pid);
bool part_of_a_job(struct daemon *d, pid_t pid);
/* Detaches every job, but pid's own, whose tracer follows pid. */
void detach_jobs_holding(struct daemon *d, pid_t pid, const char *why);
void attach_job(struct daemon *d, pid_t pid);
/* attach_job() with the rank its environment may not name (-1: none). */
void attach_job_ranked(struct daemon *d, pid_t pid, int rank_hint);
/* Replaces a job whose tracer found ranks inside it by a job per rank; whether it did (j is
 * then freed). */
#define MAX_RANKS_PER_JOB 64
bool split_ranks(struct daemon *d, struct job *j);
void job_costs(struct job *j, __u64 *lost, double *bpf_run_s);
void detach_job(struct daemon *d, struct job *j, const char *why);
void process_window(struct daemon *d, struct job *j, __u64 now);
/* The GPU and I/O evidence the verdict and the advice weigh, over the tracer's life so far
 * (the daemon's windows, top's seconds). */
void gpu_io_input(struct tracer *t, struct analysis_input *in);

/* daemon_metrics.c */
/* Synchronising GPU calls and block requests since the attach, summed over APIs and disks. */
void gpu_sync_hist(struct tracer *t, __u64 *slots, double *sum_s);
void io_hist(struct tracer *t, __u64 *slots, double *sum_s);
char *http_metrics(void *ctx, int *status, const char **content_type);
char *http_report(void *ctx, long pid, int *status, const char **content_type);
void refresh_metrics(struct daemon *d);

#endif

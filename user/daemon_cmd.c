// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pipeprof daemon: every training job on the host, from its start, in rolling windows;
 * Prometheus metrics over HTTP and JSON lines.
 *
 * Each job gets its own tracer (BPF object): attaching and detaching a job then cannot
 * disturb another, and a job's exit frees everything it held. New jobs are found from exec
 * events (discover.bpf.c) and a once-a-second look at the new process's maps until it loads
 * an ML library or two minutes pass.
 */
#include <argp.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <json-c/json.h>
#include "classify.h"
#include "daemon_cmd.h"
#include "daemon_config.h"
#include "discover.h"
#include "discover.skel.h"
#include "gpu_apis.h"
#include "hist.h"
#include "http.h"
#include "jsonl.h"
#include "pipeprof.skel.h"
#include "procmaps.h"
#include "prom.h"
#include "proctree.h"
#include "report.h"
#include "sanitize.h"
#include "step_baseline.h"
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

struct thread_snap {
	__u32 tid;
	__u64 ns[PP_NR_STATES];
	__u64 gpu_calls;
};

struct job {
	pid_t pid;
	char comm[16];
	struct tracer tracer;
	struct thread_snap *snaps;
	int nr_snaps, cap_snaps;
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
	struct ring_buffer *execs;
	struct jsonl jsonl;
	bool jsonl_open;
	struct http_server *http;
	int stats_fd;			/* kernel BPF run-time stats, on while held */

	pthread_mutex_t lock;		/* guards what the HTTP thread reads below */
	char *metrics;
	__u64 windows, attach_failures, events_lost_exited, candidates_dropped;
	double bpf_run_s_exited;
};

static volatile sig_atomic_t exiting, reload;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		reload = 1;
	else
		exiting = sig;
}

/* ---- options ---- */

enum {
	OPT_LISTEN = 1000, OPT_JSONL, OPT_JSONL_MAX, OPT_JSONL_KEEP, OPT_WINDOW, OPT_MATCH,
	OPT_MATCH_CGROUP, OPT_STEP_REGRESSION, OPT_CONFIG,
};

static const char *const opt_keys[] = {
	[OPT_LISTEN - OPT_LISTEN] = "listen", [OPT_JSONL - OPT_LISTEN] = "jsonl",
	[OPT_JSONL_MAX - OPT_LISTEN] = "jsonl_max_bytes", [OPT_JSONL_KEEP - OPT_LISTEN] = "jsonl_keep",
	[OPT_WINDOW - OPT_LISTEN] = "window", [OPT_MATCH - OPT_LISTEN] = "match",
	[OPT_MATCH_CGROUP - OPT_LISTEN] = "match_cgroup",
	[OPT_STEP_REGRESSION - OPT_LISTEN] = "step_regression",
};

static const char daemon_doc[] =
	"Trace every training job on this host continuously; Prometheus metrics over HTTP.\v"
	"Jobs are processes that map libtorch, libcudart, libcuda or libnccl: those running at\n"
	"start and new ones (found from exec events). DataLoader workers belong to their job.\n"
	"Per job and rolling window: the stall model's seconds per role and state, the\n"
	"verdict, step time, GPU sync and block I/O latency.\n"
	"\n"
	"HTTP (loopback by default): /metrics (Prometheus text), /healthz,\n"
	"/api/v1/report?pid=N (the job's last window as pipeprof -p N -j prints it).\n"
	"\n"
	"SIGHUP re-reads --config (key = value, the long options' names) and reopens the\n"
	"JSON lines file; options given on the command line win over the file.\n"
	"\n"
	"EXAMPLES:\n"
	"  sudo pipeprof daemon --listen 127.0.0.1:9464 --jsonl /var/log/pipeprof/events.jsonl\n"
	"  curl -s 127.0.0.1:9464/metrics\n"
	"  sudo pipeprof daemon --match '^python' --window 30\n"
	"  systemctl enable --now pipeprof   # tools/pipeprof.service, installed by make install";

static const struct argp_option daemon_options[] = {
	{ "listen", OPT_LISTEN, "ADDR:PORT", 0, "HTTP address (default 127.0.0.1:9464)", 0 },
	{ "jsonl", OPT_JSONL, "PATH", 0, "Append window snapshots and events as JSON lines", 0 },
	{ "jsonl-max-bytes", OPT_JSONL_MAX, "BYTES", 0, "Rotate the JSON lines file at this size (default 100 MiB)", 0 },
	{ "jsonl-keep", OPT_JSONL_KEEP, "N", 0, "Rotated files kept (default 5)", 0 },
	{ "window", OPT_WINDOW, "SECS", 0, "Rolling window length (default 10)", 0 },
	{ "match", OPT_MATCH, "REGEX", 0, "Only jobs whose command name matches", 0 },
	{ "match-cgroup", OPT_MATCH_CGROUP, "PATH", 0, "Only jobs in this cgroup or below", 0 },
	{ "step-regression", OPT_STEP_REGRESSION, "PCT", 0, "Flag a median step time this much over its trailing baseline (default 20)", 0 },
	{ "config", OPT_CONFIG, "FILE", 0, "Settings file, re-read on SIGHUP", 0 },
	{ "verbose", 'v', NULL, 0, "Verbose: libbpf logs, every probe, every discovery", 0 },
	{},
};

/* With ARGP_NO_EXIT (the fuzzer's), argp_error() returns: stop here all the same. */
static error_t daemon_parse(int key, char *arg, struct argp_state *state)
{
	struct daemon *d = state->input;
	char err[256];

	switch (key) {
	case 'v':
		d->cli.verbose = true;
		break;
	case OPT_CONFIG:
		snprintf(d->cli.config, sizeof(d->cli.config), "%s", arg);
		break;
	case ARGP_KEY_ARG:
		argp_error(state, "unexpected argument: %s", arg);
		return EINVAL;
	default:
		if (key < OPT_LISTEN || key > OPT_STEP_REGRESSION)
			return ARGP_ERR_UNKNOWN;
		if (daemon_config_set(&d->cli, opt_keys[key - OPT_LISTEN], arg, err, sizeof(err))) {
			argp_error(state, "%s", err);
			return EINVAL;
		}
		d->cli_set[key - OPT_LISTEN] = true;
		break;
	}
	return 0;
}

/* The file's settings, then the command line's on top. */
static int load_config(struct daemon *d, struct daemon_config *out)
{
	struct daemon_config c;
	char err[512], why[256];
	FILE *f;

	daemon_config_defaults(&c);
	if (d->cli.config[0]) {
		f = fopen(d->cli.config, "r");
		if (!f) {
			fprintf(stderr, "pipeprof: cannot read %s: %s\n", d->cli.config, strerror(errno));
			return -errno;
		}
		if (daemon_config_parse(f, &c, err, sizeof(err))) {
			fprintf(stderr, "pipeprof: %s: %s\n", d->cli.config, err);
			fclose(f);
			return -EINVAL;
		}
		fclose(f);
	}
	for (int i = 0; i <= OPT_STEP_REGRESSION - OPT_LISTEN; i++) {
		char value[PATH_MAX];

		if (!d->cli_set[i])
			continue;
		switch (i + OPT_LISTEN) {
		case OPT_LISTEN: snprintf(value, sizeof(value), "%s", d->cli.listen); break;
		case OPT_JSONL: snprintf(value, sizeof(value), "%s", d->cli.jsonl); break;
		case OPT_JSONL_MAX: snprintf(value, sizeof(value), "%lld", d->cli.jsonl_max_bytes); break;
		case OPT_JSONL_KEEP: snprintf(value, sizeof(value), "%d", d->cli.jsonl_keep); break;
		case OPT_WINDOW: snprintf(value, sizeof(value), "%ld", d->cli.window_s); break;
		case OPT_MATCH: snprintf(value, sizeof(value), "%s", d->cli.match); break;
		case OPT_MATCH_CGROUP: snprintf(value, sizeof(value), "%s", d->cli.match_cgroup); break;
		case OPT_STEP_REGRESSION:
			snprintf(value, sizeof(value), "%.17g", d->cli.step_regression * 100);
			break;
		}
		if (daemon_config_set(&c, opt_keys[i], value, why, sizeof(why))) {
			fprintf(stderr, "pipeprof: %s\n", why);
			return -EINVAL;
		}
	}
	snprintf(c.config, sizeof(c.config), "%s", d->cli.config);
	c.verbose = d->cli.verbose;
	*out = c;
	return 0;
}

static int apply_config(struct daemon *d, const struct daemon_config *c)
{
	regex_t re;
	int err;

	if (c->match[0] && regcomp(&re, c->match, REG_EXTENDED | REG_NOSUB))
		return -EINVAL;	/* daemon_config_set compiled it once already */
	if (d->have_re)
		regfree(&d->match_re);
	d->have_re = c->match[0] != 0;
	if (d->have_re)
		d->match_re = re;
	if (d->jsonl_open && (strcmp(c->jsonl, d->cfg.jsonl) || !c->jsonl[0])) {
		jsonl_close(&d->jsonl);
		d->jsonl_open = false;
	}
	if (c->jsonl[0] && !d->jsonl_open) {
		err = jsonl_open(&d->jsonl, c->jsonl, c->jsonl_max_bytes, c->jsonl_keep);
		if (err) {
			fprintf(stderr, "pipeprof: cannot open %s: %s\n", c->jsonl,
				d->jsonl.error[0] ? d->jsonl.error : strerror(-err));
			return err;
		}
		d->jsonl_open = true;
	} else if (d->jsonl_open) {
		d->jsonl.max_bytes = c->jsonl_max_bytes;
		d->jsonl.keep = c->jsonl_keep;
		jsonl_reopen(&d->jsonl);	/* after logrotate moved it away */
	}
	d->cfg = *c;
	return 0;
}

/* ---- discovery ---- */

/* Parent and start time (clock ticks after boot) from /proc/PID/stat; -ENOENT when gone. */
static int proc_stat(pid_t pid, pid_t *ppid, unsigned long long *start_ticks)
{
	char path[64], buf[1024];
	unsigned long long start = 0;
	int ret = -ENOENT;
	pid_t parent = 0;
	FILE *f;

	snprintf(path, sizeof(path), PROCFS "/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -ENOENT;
	if (fgets(buf, sizeof(buf), f) && !proc_parse_stat_start(buf, &parent, &start))
		ret = 0;
	fclose(f);
	if (ppid)
		*ppid = parent;
	if (start_ticks)
		*start_ticks = start;
	return ret;
}

static pid_t parent_of(pid_t pid)
{
	pid_t ppid = 0;

	proc_stat(pid, &ppid, NULL);
	return ppid;
}

/* How long ago the process started, in ns; 0 when unknown. */
static __u64 process_age_ns(pid_t pid)
{
	unsigned long long start;
	double uptime;
	FILE *f;

	if (proc_stat(pid, NULL, &start))
		return 0;
	f = fopen(PROCFS "/uptime", "r");
	if (!f)
		return 0;
	if (fscanf(f, "%lf", &uptime) != 1)
		uptime = 0;
	fclose(f);
	uptime -= (double)start / sysconf(_SC_CLK_TCK);
	return uptime > 0 ? uptime * 1e9 : 0;
}

static bool in_cgroup(pid_t pid, const char *prefix)
{
	char path[64], line[PATH_MAX + 32];
	bool found = false;
	size_t len = strlen(prefix);
	FILE *f;

	snprintf(path, sizeof(path), PROCFS "/%d/cgroup", pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *cg = strchr(line, ':');

		cg = cg ? strchr(cg + 1, ':') : NULL;
		if (!cg)
			continue;
		cg++;
		cg[strcspn(cg, "\n")] = 0;
		found = !strncmp(cg, prefix, len) && (cg[len] == 0 || cg[len] == '/' ||
						       (len && prefix[len - 1] == '/'));
	}
	fclose(f);
	return found;
}

static bool maps_ml_library(pid_t pid)
{
	unsigned int mask = 1u << LIB_CUDART | 1u << LIB_CUDA | 1u << LIB_TORCH | 1u << LIB_NCCL;
	struct mapped_lib libs[4];

	return procmaps_find_libs(pid, mask, libs, 4) > 0;
}

static bool wanted(struct daemon *d, pid_t pid)
{
	char comm[16];

	if (d->have_re) {
		proc_comm(PROCFS, pid, pid, comm, sizeof(comm));
		if (regexec(&d->match_re, comm, 0, NULL, 0))
			return false;
	}
	if (d->cfg.match_cgroup[0] && !in_cgroup(pid, d->cfg.match_cgroup))
		return false;
	return maps_ml_library(pid);
}

static struct job *find_job(struct daemon *d, pid_t pid)
{
	for (struct job *j = d->jobs; j; j = j->next)
		if (j->pid == pid)
			return j;
	return NULL;
}

/* A process some job already follows: a DataLoader worker, or the job itself. */
static bool part_of_a_job(struct daemon *d, pid_t pid)
{
	for (struct job *j = d->jobs; j; j = j->next) {
		struct pp_proc proc;

		if (j->pid == pid ||
		    !bpf_map_lookup_elem(bpf_map__fd(j->tracer.skel->maps.tracked_procs), &pid, &proc))
			return true;
	}
	return false;
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

static void attach_job(struct daemon *d, pid_t pid)
{
	struct tracer_opts opts = {
		.root = pid, .verbose = d->cfg.verbose,
		.hist_kinds = 1u << PP_HK_STEP, .hist_keying = PP_HKEY_NONE, .hist_time_div = 1000,
		.hist_entries = STEP_HISTS_PER_JOB,
	};
	struct job *j = calloc(1, sizeof(*j));
	char shown[SAN_TEXT_SIZE(sizeof(j->comm))];
	int err;

	if (!j)
		return;
	j->pid = pid;
	proc_comm(PROCFS, pid, pid, j->comm, sizeof(j->comm));
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
	fprintf(stderr, "pipeprof: attached PID %d (%s)\n", pid,
		san_text(shown, sizeof(shown), j->comm, sizeof(j->comm)));
	log_event(d, event("attach", j));
}

/* What a job's tracer lost and what its BPF programs cost: the self-metrics add these up.
 * One read of the programs' info serves both. */
static void job_costs(struct job *j, __u64 *lost, double *bpf_run_s)
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
	free(j->snaps);
	free(j->report_json);
	free(j);
}

static void detach_job(struct daemon *d, struct job *j, const char *why)
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

static void add_candidate(struct daemon *d, pid_t pid, __u64 age_ns)
{
	if (d->nr_candidates == MAX_CANDIDATES) {
		d->candidates_dropped++;	/* an exec storm: these are never looked at */
		return;
	}
	d->candidates[d->nr_candidates++] = (struct candidate){
		.pid = pid, .until_ns = monotonic_ns() + CANDIDATE_TTL_NS - age_ns,
	};
}

static int on_exec(void *ctx, void *data, size_t size)
{
	const struct discover_exec *e = data;

	if (size >= sizeof(*e))
		add_candidate(ctx, e->pid, 0);
	return 0;
}

/* A new process usually execs long before it imports torch: look again each second. */
static void check_candidates(struct daemon *d)
{
	__u64 now = monotonic_ns();
	int kept = 0;

	for (int i = 0; i < d->nr_candidates; i++) {
		struct candidate c = d->candidates[i];

		if (now > c.until_ns || (kill(c.pid, 0) && errno == ESRCH) || part_of_a_job(d, c.pid))
			continue;
		if (wanted(d, c.pid)) {
			attach_job(d, c.pid);
			continue;
		}
		d->candidates[kept++] = c;
	}
	d->nr_candidates = kept;
}

/* At start: every process mapping an ML library, except those whose ancestor does (workers);
 * a process started in the last two minutes may still be importing torch: watch it. */
static void scan_existing(struct daemon *d)
{
	DIR *dir = opendir(PROCFS);
	struct dirent *de;

	if (!dir)
		return;
	while ((de = readdir(dir))) {
		pid_t pid = atoi(de->d_name), up;
		bool under_job = false;

		if (pid <= 0 || pid == getpid() || part_of_a_job(d, pid))
			continue;
		if (!wanted(d, pid)) {
			__u64 age = process_age_ns(pid);

			if (age && age < CANDIDATE_TTL_NS)
				add_candidate(d, pid, age);
			continue;
		}
		for (up = parent_of(pid); up > 1 && !under_job; up = parent_of(up))
			under_job = maps_ml_library(up);
		if (!under_job)
			attach_job(d, pid);
	}
	closedir(dir);
}

/* ---- windows ---- */

static struct thread_snap *snap_of(struct job *j, __u32 tid)
{
	for (int i = 0; i < j->nr_snaps; i++)
		if (j->snaps[i].tid == tid)
			return &j->snaps[i];
	if (j->nr_snaps == j->cap_snaps) {
		int cap = j->cap_snaps ? 2 * j->cap_snaps : 64;
		void *grown = realloc(j->snaps, cap * sizeof(*j->snaps));

		if (!grown)
			return NULL;
		j->snaps = grown;
		j->cap_snaps = cap;
	}
	memset(&j->snaps[j->nr_snaps], 0, sizeof(j->snaps[0]));
	j->snaps[j->nr_snaps].tid = tid;
	return &j->snaps[j->nr_snaps++];
}

static void forget_snap(struct job *j, __u32 tid)
{
	for (int i = 0; i < j->nr_snaps; i++)
		if (j->snaps[i].tid == tid) {
			j->snaps[i] = j->snaps[--j->nr_snaps];
			return;
		}
}

/*
 * Each thread's time since the last window. A phase still open at the window's end counts in
 * the state it reads as now (an unwoken sleep is OTHER until its waker names it), so a thread
 * blocked for many windows shows in each. When the wakeup later names that time, the totals
 * move from the provisional state to the real one: the window where that happens takes the
 * gain, its other states' losses are dropped, and its states are scaled back to its length,
 * so that counters only grow and each window still sums to its wall time.
 */
static void window_delta(const __u64 *now, __u64 *prev, __u64 *out, __u64 *wall)
{
	double gain = 0, net = 0;

	for (int s = 0; s < PP_NR_STATES; s++) {
		double d = (double)now[s] - (double)prev[s];

		net += d;
		gain += d > 0 ? d : 0;
	}
	*wall = 0;
	for (int s = 0; s < PP_NR_STATES; s++) {
		__u64 cumulative = now[s];	/* out may be now */
		double d = (double)cumulative - (double)prev[s];

		out[s] = d > 0 && net > 0 ? (__u64)(d * net / gain) : 0;
		*wall += out[s];
		prev[s] = cumulative;
	}
}

/* Exited threads and processes leave the maps here. */
static int window_threads(struct job *j, __u64 now_ns, struct thread_result **out, int *nr)
{
	int tfd = bpf_map__fd(j->tracer.skel->maps.threads), n = 0, cap = 64;
	int pfd = bpf_map__fd(j->tracer.skel->maps.tracked_procs);
	struct thread_result *res = calloc(cap, sizeof(*res));
	__u32 key, next, *prev = NULL, *gone = NULL;
	int nr_gone = 0;
	struct pp_thread th;
	struct pp_proc proc;

	if (!res)
		return -ENOMEM;
	while (!bpf_map_get_next_key(tfd, prev, &next)) {
		struct thread_snap *s;
		struct thread_result *r;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(tfd, &key, &th))
			continue;
		s = snap_of(j, key);
		if (!s)
			continue;
		if (n == cap) {
			void *grown = realloc(res, 2 * cap * sizeof(*res));

			if (!grown)
				break;
			res = grown;
			cap *= 2;
		}
		r = &res[n++];
		/* Cumulative since the tracer started, the open phase included. */
		thread_close(&th, j->tracer.start_ns, now_ns, 0, r);
		r->tid = key;
		window_delta(r->ns, s->ns, r->ns, &r->wall_ns);
		r->gpu_calls = th.gpu_calls - s->gpu_calls;
		s->gpu_calls = th.gpu_calls;
		if (r->exited) {
			void *grown = realloc(gone, (nr_gone + 1) * sizeof(*gone));

			if (grown) {
				gone = grown;
				gone[nr_gone++] = key;
			}
		}
	}
	for (int i = 0; i < nr_gone; i++) {
		bpf_map_delete_elem(tfd, &gone[i]);
		forget_snap(j, gone[i]);
	}
	free(gone);

	prev = NULL;
	nr_gone = 0;
	gone = NULL;
	while (!bpf_map_get_next_key(pfd, prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(pfd, &key, &proc) && proc.exit_ns && !proc.is_root) {
			void *grown = realloc(gone, (nr_gone + 1) * sizeof(*gone));

			if (grown) {
				gone = grown;
				gone[nr_gone++] = key;
			}
		}
	}
	for (int i = 0; i < nr_gone; i++)
		bpf_map_delete_elem(pfd, &gone[i]);
	free(gone);
	*out = res;
	*nr = n;
	return 0;
}

struct step_drain {
	__u32 trainer_tid;	/* 0: any thread's */
	__u64 *slots;
	double sum_s;
};

static void add_steps(const struct pp_hist_key *key, const struct pp_hist *h, void *ctx)
{
	struct step_drain *sd = ctx;

	if (key->kind != PP_HK_STEP || (sd->trainer_tid && key->id != sd->trainer_tid))
		return;
	for (int s = 0; s < PP_HIST_SLOTS; s++)
		sd->slots[s] += h->slots[s];
	sd->sum_s += h->sum / 1e9;
}

/* This window's step histogram of the trainer (its backward passes), drained from the map. */
static void window_steps(struct job *j, __u32 trainer_tid, __u64 *slots, double *sum_s)
{
	struct step_drain sd = { .trainer_tid = trainer_tid, .slots = slots };

	tracer_drain_hists(&j->tracer, add_steps, &sd);
	*sum_s += sd.sum_s;
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

/* The same document `pipeprof -p PID -j` prints, over this window's threads. */
static char *window_report(struct job *j, struct thread_result *threads, int nr,
			   const struct analysis_input *in, const struct analysis *an, __u64 end_ns)
{
	struct report r = {};
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (tracer_collect(&j->tracer, end_ns, &r))
		goto cleanup;
	free(r.threads);
	r.threads = threads;
	r.nr_threads = nr;
	r.root_pid = j->pid;
	r.start_ns = j->window_start_ns;
	r.end_ns = end_ns;
	r.input = *in;
	r.analysis = *an;
	proc_cmdline(PROCFS, j->pid, r.cmdline, sizeof(r.cmdline));
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

static void gpu_sync_hist(struct job *j, __u64 *slots, double *sum_s);
static void io_hist(struct job *j, __u64 *slots, double *sum_s);

/* The GPU and I/O evidence the recommendations weigh, over the job's life so far. */
static void job_gpu_io_input(struct job *j, struct analysis_input *in)
{
	__u64 slots[PP_HIST_SLOTS] = {}, calls;
	double sum = 0;

	gpu_sync_hist(j, slots, &sum);
	calls = hist_total(slots, PP_HIST_SLOTS);
	in->gpu_sync_mean_us = calls ? sum * 1e6 / calls : 0;
	memset(slots, 0, sizeof(slots));
	io_hist(j, slots, &sum);
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

static void process_window(struct daemon *d, struct job *j, __u64 now)
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
	__u64 step_slots[PP_HIST_SLOTS] = {};
	double step_sum = 0;
	enum verdict before = j->verdict;
	char *report;
	json_object *o;
	int nr = 0;

	cpu_window_result(&j->cpu, cpu_ok, busy, total, &in.cpu_busy, &in.runnable_avg);
	cpu_window_start(&j->cpu, cpu_ok, busy, total);
	if (window_threads(j, now, &threads, &nr))
		return;
	job_gpu_io_input(j, &in);
	analyse(threads, nr, &in, &an);
	window_steps(j, an.trainer_index >= 0 ? threads[an.trainer_index].tid : 0, step_slots,
		     &step_sum);
	report = window_report(j, threads, nr, &in, &an, now);

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
		j->step_slots[s] += step_slots[s];
	j->step_sum_s += step_sum;
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
	json_object_object_add(o, "steps", json_object_new_uint64(hist_total(step_slots, PP_HIST_SLOTS)));
	json_object_object_add(o, "median_step_s", hist_total(step_slots, PP_HIST_SLOTS) ?
				json_object_new_double(hist_percentile(step_slots, PP_HIST_SLOTS, 50) / 1e6) :
				NULL);
	log_event(d, o);
	if (before != NR_VERDICTS && before != an.verdict) {
		o = event("verdict_change", j);
		json_object_object_add(o, "from", json_object_new_string(verdict_id(before)));
		json_object_object_add(o, "to", json_object_new_string(verdict_id(an.verdict)));
		log_event(d, o);
	}
	check_step_regression(d, j, step_slots);
	free(threads);
	j->window_start_ns = now;
}

/* ---- metrics ---- */

static void gpu_sync_hist(struct job *j, __u64 *slots, double *sum_s)
{
	int fd = bpf_map__fd(j->tracer.skel->maps.gpu_api_stats);

	for (__u32 api = 0; api < (__u32)gpu_sync_api_count; api++) {
		struct pp_gpu_api_stats s;

		if (bpf_map_lookup_elem(fd, &api, &s))
			continue;
		for (int k = 0; k < PP_HIST_SLOTS; k++)
			slots[k] += s.slots[k];
		*sum_s += s.total_ns / 1e9;
	}
}

static void io_hist(struct job *j, __u64 *slots, double *sum_s)
{
	struct pp_io_stats s;
	__u32 zero = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(j->tracer.skel->maps.io_stats), &zero, &s))
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

		gpu_sync_hist(j, slots, &sum);
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

		io_hist(j, slots, &sum);
		snprintf(pid, sizeof(pid), "%d", j->pid);
		prom_log2_histogram(f, "pipeprof_job_io_latency_seconds",
				    LABELS({ "pid", pid }, { "comm", j->comm }), slots, PP_HIST_SLOTS,
				    1e-6, sum);
	}

	for (struct job *j = d->jobs; j; j = j->next) {
		double run_s;
		__u64 job_lost;

		job_costs(j, &job_lost, &run_s);
		bpf_s += run_s;
		lost += job_lost;
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

static char *http_metrics(void *ctx, int *status, const char **content_type)
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

static char *http_report(void *ctx, long pid, int *status, const char **content_type)
{
	struct daemon *d = ctx;
	struct job *j;
	char *body = NULL;

	*content_type = "application/json";
	pthread_mutex_lock(&d->lock);
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

static void refresh_metrics(struct daemon *d)
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

/* ---- main loop ---- */

static int start_discovery(struct daemon *d)
{
	int err;

	d->discover = discover_bpf__open_and_load();
	if (!d->discover) {
		err = -errno;
		fprintf(stderr, "pipeprof: cannot load the exec watcher: %s%s\n", strerror(-err),
			errno_is_privilege(err) ? " (run as root)" : "");
		return err;
	}
	err = discover_bpf__attach(d->discover);
	if (err) {
		fprintf(stderr, "pipeprof: cannot attach the exec watcher: %s\n", strerror(-err));
		return err;
	}
	d->execs = ring_buffer__new(bpf_map__fd(d->discover->maps.execs), on_exec, d, NULL);
	if (!d->execs) {
		err = -errno;
		fprintf(stderr, "pipeprof: cannot read exec events: %s\n", strerror(-err));
		return err;
	}
	return 0;
}

static void do_reload(struct daemon *d)
{
	struct daemon_config c;

	if (load_config(d, &c)) {
		fprintf(stderr, "pipeprof: SIGHUP: settings unchanged\n");
		return;
	}
	if (strcmp(c.listen, d->cfg.listen)) {
		fprintf(stderr, "pipeprof: SIGHUP: listen %s needs a restart; still on %s\n",
			c.listen, d->cfg.listen);
		snprintf(c.listen, sizeof(c.listen), "%s", d->cfg.listen);
	}
	if (apply_config(d, &c))
		fprintf(stderr, "pipeprof: SIGHUP: settings partly applied\n");
	else
		fprintf(stderr, "pipeprof: SIGHUP: settings reloaded (window %ld s)\n", d->cfg.window_s);
}

/* One reading of the run queue a second serves every job's window. */
static void sample_cpus(struct daemon *d)
{
	unsigned long long busy, total;
	int running;

	if (d->jobs && !proc_cpu_times(PROCFS, &busy, &total, &running))
		for (struct job *j = d->jobs; j; j = j->next)
			cpu_window_sample(&j->cpu, running);
}

static __u64 window_end_ns(const struct daemon *d, const struct job *j)
{
	return j->window_start_ns + d->cfg.window_s * 1000000000ULL;
}

static int daemon_run(struct daemon *d)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct http_handlers handlers = {
		.metrics = http_metrics, .report = http_report, .ctx = d, .verbose = d->cli.verbose,
	};
	struct daemon_config c;
	char err_text[256];
	__u64 next_tick, ticks = 0;
	int err, status = 1;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	d->stats_fd = -1;

	err = load_config(d, &c);
	if (err)
		return 2;
	err = apply_config(d, &c);
	if (err)
		return 1;
	err = start_discovery(d);
	if (err)
		goto cleanup;
	/* Self-metrics report the BPF programs' cost: ask the kernel to measure it while we run. */
	d->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	scan_existing(d);
	refresh_metrics(d);
	err = http_start(&d->http, d->cfg.listen, &handlers, err_text, sizeof(err_text));
	if (err) {
		fprintf(stderr, "pipeprof: cannot listen on %s: %s\n", d->cfg.listen, err_text);
		goto cleanup;
	}
	{
		/* With port 0 the kernel chose one: say which, so clients can find it. */
		char shown[sizeof(d->cfg.listen) + 8];
		char *colon = strrchr(d->cfg.listen, ':');

		snprintf(shown, sizeof(shown), "%.*s:%d", colon ? (int)(colon - d->cfg.listen) : 0,
			 d->cfg.listen, http_port(d->http));
		fprintf(stderr, "pipeprof: daemon listening on %s\n", shown);
	}

	next_tick = monotonic_ns() + TICK_NS;
	while (!exiting) {
		__u64 now = monotonic_ns(), wake = next_tick;
		bool changed = false, windows_due = false;

		/* Each job's windows run from its own attach, so a job's first window is as long
		 * as the others; wake for the nearest window end, not only on the tick. */
		for (struct job *j = d->jobs; j; j = j->next)
			if (window_end_ns(d, j) < wake)
				wake = window_end_ns(d, j);
		ring_buffer__poll(d->execs, wake > now ? (int)((wake - now + 999999) / 1000000) : 0);
		if (exiting)
			break;
		if (reload) {
			reload = 0;
			do_reload(d);
		}
		/* An exec storm returns from the poll at every event: the per-second work keeps
		 * to the clock, not to the number of wakeups. */
		now = monotonic_ns();
		if (now >= next_tick) {
			check_candidates(d);
			ticks++;
			sample_cpus(d);
			for (struct job *j = d->jobs, *next; j; j = next) {
				next = j->next;
				if (kill(j->pid, 0) && errno == ESRCH)
					detach_job(d, j, "exited");
				else if (ticks % REFRESH_EVERY_TICKS == 0)
					tracer_refresh(&j->tracer);
			}
			next_tick += TICK_NS;
			if (next_tick <= now)
				next_tick = now + TICK_NS;
			changed = true;
		}
		/* Every job whose window ends now starts its next step interval, and one wait
		 * for in-flight BPF programs serves them all. */
		now = monotonic_ns();
		for (struct job *j = d->jobs; j; j = j->next)
			if (now >= window_end_ns(d, j)) {
				tracer_flip_hists(&j->tracer);
				windows_due = true;
			}
		if (windows_due) {
			tracer_wait_programs();
			changed = true;
			for (struct job *j = d->jobs; j; j = j->next)
				if (j->tracer.hist_flipped)
					process_window(d, j, now);
		}
		if (changed)
			refresh_metrics(d);
	}
	fprintf(stderr, "pipeprof: %s: detaching %d job(s)\n", strsignal(exiting), d->nr_jobs);
	status = 0;
cleanup:
	http_stop(d->http);
	while (d->jobs)
		detach_job(d, d->jobs, "pipeprof exiting");
	ring_buffer__free(d->execs);
	discover_bpf__destroy(d->discover);
	if (d->stats_fd >= 0)
		close(d->stats_fd);
	if (d->jsonl_open)
		jsonl_close(&d->jsonl);
	if (d->have_re)
		regfree(&d->match_re);
	free(d->metrics);
	return status;
}

static int parse_args(struct daemon *d, int argc, char **argv, unsigned int flags)
{
	const struct argp argp = {
		.options = daemon_options,
		.parser = daemon_parse,
		.args_doc = "",
		.doc = daemon_doc,
	};
	error_t err;

	daemon_config_defaults(&d->cli);
	argp_err_exit_status = 2;
	err = argp_parse(&argp, argc, argv, flags, NULL, d);
	return err ? -err : 0;
}

int daemon_cmd_parse(int argc, char **argv, unsigned int flags, struct daemon_config *cli)
{
	/* Too big for a stack: it holds the candidate table. */
	struct daemon *d = calloc(1, sizeof(*d));
	int err;

	if (!d)
		return -ENOMEM;
	err = parse_args(d, argc, argv, flags);
	if (!err)
		*cli = d->cli;
	free(d);
	return err;
}

int daemon_cmd_main(int argc, char **argv)
{
	static struct daemon d;

	pthread_mutex_init(&d.lock, NULL);
	if (parse_args(&d, argc, argv, 0))
		return 2;
	return daemon_run(&d);
}

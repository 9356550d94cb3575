// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The daemon's discovery: which processes are jobs, at start and from exec events. */
#include <dirent.h>
#include <errno.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "daemon.h"
#include "discover.h"
#include "discover.skel.h"
#include "procmaps.h"
#include "proctree.h"
#include "tp_btf.h"

/* ---- discovery ---- */

/* Parent and start time (clock ticks after boot) from /proc/PID/stat; -ENOENT when gone. */
static int proc_stat(pid_t pid, pid_t *ppid, unsigned long long *start_ticks)
{
	char path[64], buf[1024];
	int ret = -ENOENT;
	unsigned long long start = 0;
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

/* A DataLoader worker's parent maps the same libraries: the job is the topmost process. */
static bool under_a_job(pid_t pid)
{
	for (pid_t up = parent_of(pid); up > 1; up = parent_of(up))
		if (maps_ml_library(up))
			return true;
	return false;
}

/*
 * A rank of a distributed job whose launcher imports torch itself, as torchrun's agent and
 * accelerate's do: its environment names a RANK, and no process above it that maps an ML
 * library names one (such a process would be the rank, this its DataLoader worker, which
 * inherited the variable). The launcher is then no job: each rank is one of its own.
 */
static bool rank_under_launcher(pid_t pid)
{
	if (proc_env_rank(PROCFS, pid) < 0)
		return false;
	for (pid_t up = parent_of(pid); up > 1; up = parent_of(up))
		if (maps_ml_library(up) && proc_env_rank(PROCFS, up) >= 0)
			return false;
	return true;
}

static bool is_ancestor(pid_t ancestor, pid_t pid)
{
	for (pid_t up = parent_of(pid); up > 1; up = parent_of(up))
		if (up == ancestor)
			return true;
	return false;
}

int discover_jobs(pid_t *pids, int max)
{
	DIR *dir = opendir(PROCFS);
	bool *rank = calloc(max > 0 ? max : 1, sizeof(*rank));
	struct dirent *de;
	int n = 0, kept = 0;

	if (!dir || !rank) {
		n = dir ? -ENOMEM : -errno;
		goto cleanup;
	}
	while ((de = readdir(dir)) && n < max) {
		pid_t pid = atoi(de->d_name);

		if (pid <= 0 || pid == getpid() || !maps_ml_library(pid))
			continue;
		rank[n] = under_a_job(pid) && rank_under_launcher(pid);
		if (rank[n] || !under_a_job(pid))
			pids[n++] = pid;
	}
	/* Launchers of ranks out. */
	for (int i = 0; i < n; i++) {
		bool launcher = false;

		for (int k = 0; k < n && !launcher; k++)
			launcher = rank[k] && is_ancestor(pids[i], pids[k]);
		if (!launcher)
			pids[kept++] = pids[i];
	}
	n = kept;
cleanup:
	if (dir)
		closedir(dir);
	free(rank);
	return n;
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

/* A rank found inside a job: that job is its launcher, which each rank's own job replaces
 * (traced twice otherwise, and the launcher's idle main thread judged as a trainer). */
static void attach_rank(struct daemon *d, pid_t pid)
{
	detach_jobs_holding(d, pid, "a launcher of ranks: each rank is a job of its own");
	attach_job(d, pid);
}

/* Whether pid is already one of the jobs (not only inside one). */
static bool is_a_job(struct daemon *d, pid_t pid)
{
	for (struct job *j = d->jobs; j; j = j->next)
		if (j->pid == pid)
			return true;
	return false;
}

/* A new process usually execs long before it imports torch: look again each second. A rank
 * started by a launcher that is a job already is looked at too. */
void check_candidates(struct daemon *d)
{
	__u64 now = monotonic_ns();
	int kept = 0;

	for (int i = 0; i < d->nr_candidates; i++) {
		struct candidate c = d->candidates[i];
		bool inside;

		if (now > c.until_ns || (kill(c.pid, 0) && errno == ESRCH) || is_a_job(d, c.pid))
			continue;
		inside = part_of_a_job(d, c.pid);
		if (inside && !rank_under_launcher(c.pid))
			continue;
		if (wanted(d, c.pid)) {
			if (inside)
				attach_rank(d, c.pid);
			else
				attach_job(d, c.pid);
			continue;
		}
		d->candidates[kept++] = c;
	}
	d->nr_candidates = kept;
}

/* At start: every process mapping an ML library, except those whose ancestor does (workers)
 * but for ranks under a launcher that does; a process started in the last two minutes may
 * still be importing torch: watch it. */
void scan_existing(struct daemon *d)
{
	DIR *dir = opendir(PROCFS);
	struct dirent *de;

	if (!dir)
		return;
	while ((de = readdir(dir))) {
		pid_t pid = atoi(de->d_name);

		if (pid <= 0 || pid == getpid() || is_a_job(d, pid))
			continue;
		if (part_of_a_job(d, pid) && !rank_under_launcher(pid))
			continue;
		if (!wanted(d, pid)) {
			__u64 age = process_age_ns(pid);

			if (age && age < CANDIDATE_TTL_NS)
				add_candidate(d, pid, age);
			continue;
		}
		if (rank_under_launcher(pid))
			attach_rank(d, pid);
		else if (!under_a_job(pid))
			attach_job(d, pid);
	}
	closedir(dir);
}

int start_discovery(struct daemon *d)
{
	int err;

	tp_btf_register();	/* best effort: without it, libbpf's own lookups */
	d->discover = discover_bpf__open_and_load();
	tp_btf_release();
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

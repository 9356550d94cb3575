// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The sizes of pipeprof's maps, and what did not fit them: the pid filter sized to pid_max and
 * written through a shared mapping, a test hook that shrinks the thread and process maps, and
 * the census at collection that turns "an insert failed" into how many of the job's threads
 * and processes the figures lack. BPF plumbing, beside tracer.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "pipeprof.h"	/* the types the skeleton's globals use */
#include "pipeprof.skel.h"
#include "proctree.h"
#include "dispatcher.h"
#include "tracer.h"

/* PID_MAX_LIMIT on 64-bit: where pid_max cannot be read, every possible pid. */
#define PID_MAX_LIMIT	(4 * 1024 * 1024)
#define MAX_CENSUS_PIDS	65536
#define MAX_CENSUS_TIDS	65536

long tracer_pid_max(void)
{
	FILE *f = fopen(PROCFS "/sys/kernel/pid_max", "re");
	long v = 0;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v > 0 && v <= PID_MAX_LIMIT ? v : PID_MAX_LIMIT;
}

/*
 * PIPEPROF_TEST_MAP_ENTRIES="threads=N,procs=M,samples=B,waits=B": shrink the thread or process
 * map, so that tests can fill them with a job of a few hundred threads, or the CPU samples' or
 * wait stacks' ring buffer to B bytes (a power of two, a page at least), so that they overflow
 * between two reads. Not an option: a smaller map only loses data.
 */
static int apply_test_sizes(struct tracer *t)
{
	const char *env = getenv("PIPEPROF_TEST_MAP_ENTRIES");
	char buf[128], *tok, *save = NULL;

	if (!env || !*env)
		return 0;
	snprintf(buf, sizeof(buf), "%s", env);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct bpf_map *map = NULL;
		bool ring = false;
		char *end;
		long v;

		if (!strncmp(tok, "threads=", 8))
			map = t->skel->maps.threads;
		else if (!strncmp(tok, "procs=", 6))
			map = t->skel->maps.tracked_procs;
		else if (!strncmp(tok, "samples=", 8))
			map = t->skel->maps.samples, ring = true;
		else if (!strncmp(tok, "waits=", 6))
			map = t->skel->maps.wait_records, ring = true;
		v = map ? strtol(strchr(tok, '=') + 1, &end, 10) : 0;
		if (!map || *end || v < 1 ||
		    (ring ? v < sysconf(_SC_PAGESIZE) || (v & (v - 1)) || v > 1L << 30 :
			    v > (long)bpf_map__max_entries(map))) {
			fprintf(stderr, "pipeprof: PIPEPROF_TEST_MAP_ENTRIES: bad entry '%s' (threads=N or "
				"procs=N, N at most the built-in size; samples=B or waits=B, B a power "
				"of two of a page or more)\n", tok);
			return -EINVAL;
		}
		bpf_map__set_max_entries(map, v);
	}
	return 0;
}

/* One test hook's count from the environment into *every (0: unset); -EINVAL, said, if bad. */
static int test_drop_every(const char *name, const char *what, __u32 *every)
{
	const char *env = getenv(name);
	char *end;
	long n;

	*every = 0;
	if (!env || !*env)
		return 0;
	n = strtol(env, &end, 10);
	if (*end || n < 1 || n > 1000000) {
		fprintf(stderr, "pipeprof: %s: '%s' is not a count from 1 to 1000000 (drop one %s "
			"in N)\n", name, env, what);
		return -EINVAL;
	}
	*every = n;
	return 0;
}

/*
 * PIPEPROF_TEST_DROP_SWITCH_INS=N: ignore one in N of the job's switch-ins, as some hosts trace
 * none for a task handed a CPU back (a Firecracker guest's agent), so that tests meet the
 * placement of untraced switch-ins at every attach rather than at one attach in dozens.
 * PIPEPROF_TEST_DROP_WAKEUPS=N: likewise one in N of its wakeups, which the same guest loses
 * now and then beside CPU hogs; with PIPEPROF_TEST_DROP_WOKEN_SWITCH_INS=1 the switch-in after
 * each of them too, as that guest loses both for a task at times.
 * PIPEPROF_TEST_DROP_OPEN_WAIT_ENDS=1: both for the timer that ends a wait open at the attach.
 */
static int apply_test_drops(struct tracer *t)
{
	const char *woken = getenv("PIPEPROF_TEST_DROP_WOKEN_SWITCH_INS");
	const char *open_ends = getenv("PIPEPROF_TEST_DROP_OPEN_WAIT_ENDS");
	__u32 every;
	int err;

	err = test_drop_every("PIPEPROF_TEST_DROP_SWITCH_INS", "switch-in", &every);
	if (err)
		return err;
	t->skel->rodata->drop_switch_in_every = every;
	err = test_drop_every("PIPEPROF_TEST_DROP_WAKEUPS", "wakeup", &every);
	if (err)
		return err;
	t->skel->rodata->drop_wakeup_every = every;
	if (woken && *woken && strcmp(woken, "0")) {
		if (strcmp(woken, "1") || !every) {
			fprintf(stderr, "pipeprof: PIPEPROF_TEST_DROP_WOKEN_SWITCH_INS: '%s' is not 0 or "
				"1, or PIPEPROF_TEST_DROP_WAKEUPS is unset\n", woken);
			return -EINVAL;
		}
		t->skel->rodata->drop_woken_switch_in = true;
	}
	if (open_ends && *open_ends && strcmp(open_ends, "0")) {
		if (strcmp(open_ends, "1")) {
			fprintf(stderr, "pipeprof: PIPEPROF_TEST_DROP_OPEN_WAIT_ENDS: '%s' is not 0 or "
				"1\n", open_ends);
			return -EINVAL;
		}
		t->skel->rodata->drop_open_wait_end = true;
	}
	return 0;
}

int tracer_size_maps(struct tracer *t)
{
	long blocks = (tracer_pid_max() + PP_PIDS_PER_BLOCK - 1) / PP_PIDS_PER_BLOCK;
	int err = bpf_map__set_max_entries(t->skel->maps.tracked_pids, blocks);

	if (err)
		return err;
	err = apply_test_drops(t);
	if (err)
		return err;
	return apply_test_sizes(t);
}

/* Runs warm_grown_maps() (state.bpf.c, which says why) on every online CPU until each of its
 * maps took every insert: the first run on a CPU only starts the refill that its irq_work does
 * once the call returns. Counts the CPUs warmed and those whose caches stayed short (the first
 * events there right after the attach may still be lost, and counted). */
#define WARM_TRIES 4

static int warm_map_caches(struct tracer *t, int *warmed, int *short_cpus, int *runs)
{
	int prog_fd = bpf_program__fd(t->skel->progs.warm_grown_maps);
	int ncpus = libbpf_num_possible_cpus(), err;
	__u32 wakers = bpf_map__max_entries(t->skel->maps.wakers);
	__u32 want = PP_WARM_INSERTS |
		     (wakers < PP_WARM_INSERTS ? wakers : PP_WARM_INSERTS) << 8;

	*warmed = *short_cpus = *runs = 0;
	if (ncpus < 0)
		return ncpus;
	for (int cpu = 0; cpu < ncpus; cpu++) {
		LIBBPF_OPTS(bpf_test_run_opts, run, .flags = BPF_F_TEST_RUN_ON_CPU, .cpu = cpu);
		int tries = 0;

		do {
			err = bpf_prog_test_run_opts(prog_fd, &run);
			*runs += !err;
		} while (!err && run.retval != want && ++tries < WARM_TRIES);
		if (err == -ENXIO)	/* offline */
			continue;
		if (err)
			return err;
		if (run.retval == want)
			(*warmed)++;
		else
			(*short_cpus)++;
	}
	return 0;
}

void tracer_warm_grown_maps(struct tracer *t)
{
	int warmed, short_cpus, runs, err;

	if (!(bpf_map__map_flags(t->skel->maps.threads) & BPF_F_NO_PREALLOC))
		return;
	err = warm_map_caches(t, &warmed, &short_cpus, &runs);
	if (err)
		fprintf(stderr, "pipeprof: cannot warm the thread records' caches: %s (a thread's "
			"first event right after the attach may be lost, and counted)\n",
			strerror(-err));
	else if (t->verbose)
		fprintf(stderr, "pipeprof: thread records' caches warmed on %d CPUs in %d runs, "
			"%d CPUs still short\n", warmed, runs, short_cpus);
}

int tracer_mark_pid(struct tracer *t, pid_t pid, __u8 kind)
{
	size_t blocks = bpf_map__max_entries(t->skel->maps.tracked_pids);

	if (!t->pids_mem) {
		size_t page = sysconf(_SC_PAGESIZE);
		size_t len = (blocks * sizeof(struct pp_pid_block) + page - 1) / page * page;
		void *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
				 bpf_map__fd(t->skel->maps.tracked_pids), 0);

		if (mem == MAP_FAILED)
			return -errno;
		t->pids_mem = mem;
		t->pids_len = len;
	}
	if (t->dispatcher)
		dispatcher_mark(t->dispatcher, pid, t->dispatch_id, kind != PP_PID_UNTRACKED);
	/* Past the map (pid_max raised since): the programs look such pids up in tracked_procs. */
	if ((size_t)pid / PP_PIDS_PER_BLOCK < blocks)
		__atomic_store_n(&t->pids_mem[pid / PP_PIDS_PER_BLOCK].live[pid % PP_PIDS_PER_BLOCK],
				 kind, __ATOMIC_RELEASE);
	return 0;
}

void tracer_unmap_pids(struct tracer *t)
{
	if (t->pids_mem)
		munmap(t->pids_mem, t->pids_len);
	t->pids_mem = NULL;
	t->pids_len = 0;
}

/* A thread's start, in clock ticks since boot (field 22 of its stat), or 0 when unknown. */
static unsigned long long thread_start_ticks(pid_t tgid, pid_t tid)
{
	char path[64], line[1024], *p;
	unsigned long long start = 0;
	FILE *f;

	snprintf(path, sizeof(path), PROCFS "/%d/task/%d/stat", tgid, tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(line, sizeof(line), f) && (p = strrchr(line, ')'))) {
		/* Field 3 (state) follows the comm; starttime is field 22. */
		for (int field = 2; p && field < 21; field++)
			p = strchr(p + 1, ' ');
		if (p)
			start = strtoull(p + 1, NULL, 10);
	}
	fclose(f);
	return start;
}

/* end_ns (CLOCK_MONOTONIC) in the clock ticks of /proc's start times (boot time). */
static unsigned long long ticks_at(__u64 end_ns)
{
	struct timespec boot;
	long hz = sysconf(_SC_CLK_TCK);

	clock_gettime(CLOCK_BOOTTIME, &boot);
	end_ns += (__u64)boot.tv_sec * 1000000000ULL + boot.tv_nsec - monotonic_ns();
	return end_ns / (1000000000ULL / (hz > 0 ? hz : 100));
}

/* Live threads of the tracked processes that began before end_ns and have no record. */
static int census_threads(struct tracer *t, const struct report *r, __u64 end_ns)
{
	int tfd = bpf_map__fd(t->skel->maps.threads), missed = 0;
	unsigned long long end_ticks = ticks_at(end_ns);
	pid_t *tids = calloc(MAX_CENSUS_TIDS, sizeof(*tids));
	struct pp_thread th;

	if (!tids)
		return 0;
	for (int i = 0; i < r->nr_procs; i++) {
		int n;

		if (r->procs[i].exited)
			continue;
		n = proc_threads(PROCFS, r->procs[i].pid, tids, MAX_CENSUS_TIDS);
		for (int k = 0; k < n; k++) {
			unsigned long long start;

			if (!bpf_map_lookup_elem(tfd, &tids[k], &th))
				continue;
			/* Started after the window closed: no record is owed. */
			start = thread_start_ticks(r->procs[i].pid, tids[k]);
			if (start && start > end_ticks)
				continue;
			missed++;
		}
	}
	free(tids);
	return missed;
}

static int count_threads(pid_t pid)
{
	pid_t *tids = calloc(MAX_CENSUS_TIDS, sizeof(*tids));
	int n;

	if (!tids)
		return 0;
	n = proc_threads(PROCFS, pid, tids, MAX_CENSUS_TIDS);
	free(tids);
	return n > 0 ? n : 0;
}

/* Live descendants of the root that are not followed, and how many threads they have. */
static int census_procs(struct tracer *t, int *threads)
{
	int pfd = bpf_map__fd(t->skel->maps.tracked_procs), n, missed = 0;
	pid_t *pids = calloc(MAX_CENSUS_PIDS, sizeof(*pids));
	struct pp_proc proc;

	*threads = 0;
	if (!pids)
		return 0;
	n = proc_descendants(PROCFS, t->root, pids, NULL, MAX_CENSUS_PIDS);
	for (int i = 0; i < n; i++) {
		if (!bpf_map_lookup_elem(pfd, &pids[i], &proc) && !proc.exit_ns)
			continue;
		missed++;
		*threads += count_threads(pids[i]);
	}
	free(pids);
	return missed;
}

void tracer_mark_partial(struct report *r, const char *why)
{
	size_t len = strlen(r->partial_why);

	r->partial = true;
	snprintf(r->partial_why + len, sizeof(r->partial_why) - len, "%s%s", len ? "; " : "", why);
}

void tracer_note_limits(struct tracer *t, __u64 end_ns, struct report *r)
{
	int tcap = bpf_map__max_entries(t->skel->maps.threads);
	int pcap = bpf_map__max_entries(t->skel->maps.tracked_procs);
	__u64 threads_full = r->counters[PP_CNT_THREADS_FULL], procs_full = r->counters[PP_CNT_PROCS_FULL];
	int unrecorded = 0, unfollowed_threads = 0;
	char why[160];

	if (threads_full || t->seed_failures)
		unrecorded = census_threads(t, r, end_ns);
	if (procs_full || t->seed_proc_failures || t->seed_truncated)
		r->procs_missed = census_procs(t, &unfollowed_threads);
	r->threads_missed = unrecorded + unfollowed_threads;

	if (threads_full)
		report_not_traced(r, "%llu events of threads beyond the thread map's %d entries dropped",
				  (unsigned long long)threads_full, tcap);
	if (t->seed_failures)
		report_not_traced(r, "%d threads seen at attach did not fit the thread map",
				  t->seed_failures);
	if (unrecorded) {
		report_not_traced(r, "%d threads of the traced processes have no figures: the thread map "
				  "(%d entries) was full", unrecorded, tcap);
		snprintf(why, sizeof(why), "%d threads did not fit the thread map (%d entries)",
			 unrecorded, tcap);
		tracer_mark_partial(r, why);
	} else if (threads_full || t->seed_failures) {
		/* Gone by now, but they were there and their time is not. */
		tracer_mark_partial(r, "threads were lost: the thread map was full");
	}

	if (procs_full)
		report_not_traced(r, "%llu processes not followed: process map full (%d entries)",
				  (unsigned long long)procs_full, pcap);
	if (t->seed_proc_failures)
		report_not_traced(r, "%d processes seen at attach did not fit the process map",
				  t->seed_proc_failures);
	if (t->seed_truncated)
		report_not_traced(r, "more than %d processes or threads at attach: the rest were found "
				  "only when they ran", TRACER_MAX_SEED);
	if (r->procs_missed) {
		report_not_traced(r, "%d processes of the job (%d threads) are not followed: the process "
				  "map (%d entries) was full; their children are not followed either",
				  r->procs_missed, unfollowed_threads, pcap);
		snprintf(why, sizeof(why), "%d processes (%d threads) did not fit the process map "
			 "(%d entries)", r->procs_missed, unfollowed_threads, pcap);
		tracer_mark_partial(r, why);
	} else if (procs_full || t->seed_proc_failures || t->seed_truncated) {
		tracer_mark_partial(r, "processes were lost: the process map was full");
	}
	if (r->bpf_recursion_misses) {
		report_not_traced(r, "%llu events lost: a BPF program was re-entered on the same CPU",
				  (unsigned long long)r->bpf_recursion_misses);
		tracer_mark_partial(r, "events were lost: a BPF program was re-entered");
	}
	if (r->counters[PP_CNT_WAKERS_FULL])
		tracer_mark_partial(r, "the wakers map was full: \"waited on\" lacks some waits");
	if (r->counters[PP_CNT_RQ_FULL])
		tracer_mark_partial(r, "the in-flight I/O map was full: some block requests are not timed");
}

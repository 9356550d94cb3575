// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The dispatcher's plumbing: its object, the jobs' ids, and their entries in its maps. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "dispatch.skel.h"
#include "pipeprof.h"	/* the types the skeleton's globals use */
#include "pipeprof.skel.h"
#include "dispatcher.h"
#include "tp_btf.h"
#include "tracer.h"

int dispatcher_open(struct dispatcher *d)
{
	size_t len;
	void *mem;
	int err;

	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->lock, NULL);
	tp_btf_register();	/* best effort: without it, libbpf's own lookups */
	d->skel = dispatch_bpf__open();
	if (!d->skel) {
		err = -errno;
		fprintf(stderr, "pipeprof: cannot open the scheduler dispatcher: %s\n", strerror(-err));
		return err;
	}
	/* A pid past pid_max as it is now goes to big_pid_job. */
	err = bpf_map__set_max_entries(d->skel->maps.pid_job,
				       (tracer_pid_max() + PP_JOB_PIDS_PER_BLOCK - 1) /
				       PP_JOB_PIDS_PER_BLOCK);
	if (err)
		return err;
	/* 5a80bd075f3b ("block: introduce block_io_start/block_io_done tracepoints", 6.5) */
	if (libbpf_find_vmlinux_btf_id("block_io_start", BPF_TRACE_RAW_TP) < 0)
		bpf_program__set_autoload(d->skel->progs.dispatch_io_start, false);
	err = dispatch_bpf__load(d->skel);
	tp_btf_release();
	if (err) {
		fprintf(stderr, "pipeprof: cannot load the scheduler dispatcher: %s\n", strerror(-err));
		return err;
	}
	len = bpf_map__max_entries(d->skel->maps.pid_job) * sizeof(struct pp_job_block);
	len = (len + sysconf(_SC_PAGESIZE) - 1) / sysconf(_SC_PAGESIZE) * sysconf(_SC_PAGESIZE);
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(d->skel->maps.pid_job), 0);
	if (mem == MAP_FAILED) {
		err = -errno;
		fprintf(stderr, "pipeprof: cannot map the dispatcher's pids: %s\n", strerror(-err));
		return err;
	}
	d->pids = mem;
	d->pids_len = len;
	err = dispatch_bpf__attach(d->skel);
	if (err) {
		fprintf(stderr, "pipeprof: cannot attach the scheduler dispatcher: %s\n", strerror(-err));
		return err;
	}
	/* Every job's state accounting rests on it: prove it fires before any job trusts it. */
	for (int i = 0; i < 50 && !__atomic_load_n(&d->skel->bss->switch_seen, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	if (!d->skel->bss->switch_seen) {
		fprintf(stderr, "pipeprof: self-check failed: the dispatcher's sched_switch never fired\n");
		return -EIO;
	}
	return 0;
}

bool dispatcher_start(struct dispatcher *d)
{
	if (!getenv("PIPEPROF_NO_DISPATCH") && !dispatcher_open(d))
		return true;
	dispatcher_close(d);
	return false;
}

void dispatcher_close(struct dispatcher *d)
{
	if (d->pids)
		munmap(d->pids, d->pids_len);
	d->pids = NULL;
	dispatch_bpf__destroy(d->skel);
	d->skel = NULL;
}

__u8 dispatcher_claim(struct dispatcher *d)
{
	__u8 id = 0;

	pthread_mutex_lock(&d->lock);
	for (int i = 0; i < PP_DISPATCH_SLOTS && !id; i++)
		if (!d->used[i]) {
			d->used[i] = true;
			id = i + 1;
		}
	pthread_mutex_unlock(&d->lock);
	return id;
}

int dispatcher_prepare(const struct dispatcher *d, struct pipeprof_bpf *skel, __u8 id)
{
	const struct { struct bpf_map *mine, *shared; } maps[] = {
		{ skel->maps.pid_job, d->skel->maps.pid_job },
		{ skel->maps.big_pid_job, d->skel->maps.big_pid_job },
		{ skel->maps.switch_progs, d->skel->maps.switch_progs },
		{ skel->maps.rq_job, d->skel->maps.rq_job },
		{ skel->maps.irq_ctx, d->skel->maps.irq_ctx },
		{ skel->maps.dispatch_lost, d->skel->maps.dispatch_lost },
	};
	struct bpf_program *dispatched[] = {
		skel->progs.on_sched_switch, skel->progs.on_sched_waking, skel->progs.on_sched_wakeup,
		skel->progs.on_tcp_rcv_space_adjust, skel->progs.on_block_io_start,
		skel->progs.on_block_rq_issue, skel->progs.on_block_rq_complete,
	};

	for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		int err = bpf_map__reuse_fd(maps[i].mine, bpf_map__fd(maps[i].shared));

		if (err)
			return err;
	}
	skel->rodata->dispatch_id = id;
	for (size_t i = 0; i < sizeof(dispatched) / sizeof(dispatched[0]); i++)
		bpf_program__set_autoattach(dispatched[i], false);
	return 0;
}

int dispatcher_enter(struct dispatcher *d, struct pipeprof_bpf *skel, __u8 id)
{
	const struct { struct bpf_map *progs; struct bpf_program *prog; } to[] = {
		{ d->skel->maps.switch_progs, skel->progs.on_sched_switch },
		{ d->skel->maps.waking_progs, skel->progs.on_sched_waking },
		{ d->skel->maps.wakeup_progs, skel->progs.on_sched_wakeup },
		{ d->skel->maps.tcp_rcv_progs, skel->progs.on_tcp_rcv_space_adjust },
		{ d->skel->maps.io_start_progs, skel->progs.on_block_io_start },
		{ d->skel->maps.rq_issue_progs, skel->progs.on_block_rq_issue },
		{ d->skel->maps.rq_complete_progs, skel->progs.on_block_rq_complete },
	};
	__u32 slot = id - 1;

	for (size_t i = 0; i < sizeof(to) / sizeof(to[0]); i++) {
		int fd = bpf_program__fd(to[i].prog);

		if (fd < 0)
			continue;	/* not loaded: block_io_start before 6.5 */
		if (bpf_map_update_elem(bpf_map__fd(to[i].progs), &slot, &fd, BPF_ANY)) {
			int err = -errno;

			dispatcher_leave(d, id);
			return err;
		}
	}
	return 0;
}

/* A process another job follows already stays that job's: `top` may trace a launcher that came
 * to map torch after its ranks were taken for jobs of their own. Each refusal is counted. */
void dispatcher_mark(struct dispatcher *d, pid_t pid, __u8 id, bool ours)
{
	int big = bpf_map__fd(d->skel->maps.big_pid_job);
	__u32 key = pid, val = id, was;
	__u8 *job, none = 0;

	if (pid <= 0)
		return;
	if ((size_t)pid / PP_JOB_PIDS_PER_BLOCK >= bpf_map__max_entries(d->skel->maps.pid_job)) {
		/* Past pid_max as it was at load. */
		if (ours && bpf_map_update_elem(big, &key, &val, BPF_NOEXIST) &&
		    (errno != EEXIST || bpf_map_lookup_elem(big, &key, &was) || was != val))
			__atomic_fetch_add(&d->marks_refused, 1, __ATOMIC_RELAXED);
		else if (!ours && !bpf_map_lookup_elem(big, &key, &was) && was == val)
			bpf_map_delete_elem(big, &key);
		return;
	}
	job = &d->pids[pid / PP_JOB_PIDS_PER_BLOCK].job[pid % PP_JOB_PIDS_PER_BLOCK];
	if (ours) {
		if (!__atomic_compare_exchange_n(job, &none, id, false, __ATOMIC_RELEASE,
						 __ATOMIC_RELAXED) && none != id)
			__atomic_fetch_add(&d->marks_refused, 1, __ATOMIC_RELAXED);
	} else {
		__atomic_compare_exchange_n(job, &id, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
	}
}

void dispatcher_leave(struct dispatcher *d, __u8 id)
{
	struct bpf_map *arrays[] = {
		d->skel->maps.switch_progs, d->skel->maps.waking_progs, d->skel->maps.wakeup_progs,
		d->skel->maps.tcp_rcv_progs, d->skel->maps.io_start_progs,
		d->skel->maps.rq_issue_progs, d->skel->maps.rq_complete_progs,
	};
	__u32 slot = id - 1;

	for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
		bpf_map_delete_elem(bpf_map__fd(arrays[i]), &slot);
}

/* Deletes the entries of a map with keys of up to 8 bytes and __u32 values that keep()
 * refuses (or, keep NULL, whose value is id). Keys first: deleting while walking would make
 * get_next_key start over. */
static void delete_entries(int fd, __u32 id, bool (*keep)(const void *key))
{
	__u64 key = 0, next = 0, gone[64];
	void *prev;
	__u32 val;
	int nr_gone;

	do {
		nr_gone = 0;
		prev = NULL;
		while (nr_gone < 64 && !bpf_map_get_next_key(fd, prev, &next)) {
			key = next;
			prev = &key;
			if (bpf_map_lookup_elem(fd, &key, &val))
				continue;
			if (keep ? !keep(&key) : val == id)
				gone[nr_gone++] = key;
		}
		for (int i = 0; i < nr_gone; i++)
			bpf_map_delete_elem(fd, &gone[i]);
	} while (nr_gone == 64);
}

void dispatcher_unmark(struct dispatcher *d, __u8 id)
{
	size_t blocks = bpf_map__max_entries(d->skel->maps.pid_job);

	/* Until its object is closed its fork program may mark more: dispatcher_release() comes
	 * back for those. */
	for (size_t b = 0; b < blocks; b++)
		for (int k = 0; k < PP_JOB_PIDS_PER_BLOCK; k++)
			if (d->pids[b].job[k] == id) {
				__u8 was = id;

				/* Another job's fork may mark it meanwhile. */
				__atomic_compare_exchange_n(&d->pids[b].job[k], &was, 0, false,
							    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
			}
	delete_entries(bpf_map__fd(d->skel->maps.big_pid_job), id, NULL);
	/* A request in flight keeps its entry until it completes: the next job with this id must
	 * not be handed it. */
	delete_entries(bpf_map__fd(d->skel->maps.rq_job), id, NULL);
}

void dispatcher_release(struct dispatcher *d, __u8 id)
{
	dispatcher_unmark(d, id);
	pthread_mutex_lock(&d->lock);
	d->used[id - 1] = false;
	pthread_mutex_unlock(&d->lock);
}

void dispatcher_prog_stats(const struct dispatcher *d, uint64_t *recursion_misses,
			   uint64_t *run_ns, uint64_t *run_count)
{
	object_prog_stats(d->skel->obj, recursion_misses, run_ns, run_count);
}

uint64_t dispatcher_lost(const struct dispatcher *d)
{
	int ncpus = libbpf_num_possible_cpus();
	__u64 vals[ncpus > 0 ? ncpus : 1], sum = __atomic_load_n(&d->marks_refused, __ATOMIC_RELAXED);
	__u32 zero = 0;

	if (ncpus > 0 && !bpf_map_lookup_elem(bpf_map__fd(d->skel->maps.dispatch_lost), &zero, vals))
		for (int i = 0; i < ncpus; i++)
			sum += vals[i];
	return sum;
}

static bool pid_alive(const void *key)
{
	return !(kill(*(const __u32 *)key, 0) && errno == ESRCH);
}

void dispatcher_sweep(struct dispatcher *d)
{
	/* An exited process's mark outlives it (its parent's wakeup by its exit is still its
	 * job's), until a fork reuses the pid; past the old pid_max that is slow, and the
	 * overflow map is bounded. A pid reused between the check and the delete loses its mark:
	 * the window is microseconds wide, for pids past pid_max only. */
	delete_entries(bpf_map__fd(d->skel->maps.big_pid_job), 0, pid_alive);
}

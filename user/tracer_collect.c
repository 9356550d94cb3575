// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reading the results out of the BPF maps at the window's close: every thread's states and
 * its close, the processes, the GPU calls, who ended each wait, and what each of the
 * tracer's other parts (samples, steps, memory, GC) kept. BPF plumbing, beside tracer.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "gpu_apis.h"
#include "pipeprof.h"	/* the types the skeleton's globals use */
#include "pipeprof.skel.h"
#include "proctree.h"
#include "tracer.h"
#include "grow.h"

static void collect_nccl(struct tracer *t, struct report *r)
{
	int fd = bpf_map__fd(t->skel->maps.nccl_stats);

	for (__u32 op = 0; op < PP_NR_NCCL_CALLS; op++) {
		struct nccl_result *n = &r->nccl[op];
		struct pp_nccl_stats stats = {};

		n->name = nccl_op_name(op);
		if (bpf_map_lookup_elem(fd, &op, &stats))
			continue;
		n->calls = stats.calls;
		n->bytes = stats.bytes;
		n->unsized = stats.unsized;
		n->total_ns = stats.total_ns;
		n->max_ns = stats.max_ns;
		memcpy(n->slots, stats.slots, sizeof(stats.slots));
	}
	for (int i = 0; i < r->nr_nccl_libs; i++) {
		const struct lib_result *lib = &r->nccl_libs[i];
		char names[160] = "";
		size_t len = 0;

		for (int k = 0; k < lib->nr_missing && len < sizeof(names); k++)
			len += snprintf(names + len, sizeof(names) - len, "%s%s", k ? ", " : "",
					lib->missing[k]);
		if (lib->nr_missing)
			report_not_traced(r, "NCCL: %.120s (pid %d) has no %s: those calls are not "
					  "counted", lib->path, lib->pid, names);
	}
}

static void collect_gpu(struct tracer *t, struct report *r)
{
	int fd = bpf_map__fd(t->skel->maps.gpu_api_stats);
	int probes_ok = 0;

	/* GPU libraries only: libtorch (probed for `step`) says nothing about GPU_WAIT. */
	r->libs = calloc(t->nr_attached ? t->nr_attached : 1, sizeof(*r->libs));
	for (int i = 0; r->libs && i < t->nr_attached; i++) {
		if (t->attached[i].result.kind != LIB_CUDART && t->attached[i].result.kind != LIB_CUDA)
			continue;
		r->libs[r->nr_libs++] = t->attached[i].result;
		probes_ok += t->attached[i].nr_links + t->attached[i].nr_fds +
			     (t->attached[i].launch != NULL);
	}
	/* libnccl's after them, in the same allocation (struct report). */
	r->nccl_libs = r->libs ? r->libs + r->nr_libs : NULL;
	for (int i = 0; r->libs && i < t->nr_attached; i++) {
		if (t->attached[i].result.kind != LIB_NCCL)
			continue;
		r->nccl_libs[r->nr_nccl_libs++] = t->attached[i].result;
		for (int k = 0; k < t->attached[i].result.nr_probes; k++)
			r->nccl_traced |= t->attached[i].result.probes[k].attached;
	}
	r->probe_attach_failures = t->probe_attach_failures;
	r->launches_in_bursts = t->launches_sampled;
	r->launch_pauses = t->launch_sampler.pauses;
	r->launch_reattach_failures = t->launch_attach_failures;
	if (t->launches_sampled)
		r->launch_off_s = launch_sampler_off_ns(&t->launch_sampler, t->skel->bss->window_end_ns) / 1e9;
	r->nr_apis = gpu_sync_api_count;
	for (int i = 0; i < gpu_sync_api_count; i++) {
		struct pp_gpu_api_stats stats = {};
		__u32 key = i;

		r->apis[i].name = gpu_apis[i].name;
		if (bpf_map_lookup_elem(fd, &key, &stats))
			continue;
		r->apis[i].calls = stats.calls;
		r->apis[i].total_ns = stats.total_ns;
		r->apis[i].max_ns = stats.max_ns;
		memcpy(r->apis[i].slots, stats.slots, sizeof(stats.slots));
	}

	collect_nccl(t, r);
	r->gpu_traced = probes_ok > 0;
	r->gpu_libs_unprobed = tracer_gpu_unprobed(t);
	if (r->gpu_traced)
		return;
	tracer_gpu_why_not(t, r->gpu_why_not, sizeof(r->gpu_why_not));
	report_not_traced(r, "GPU_WAIT: %s; GPU_WAIT reads 0", r->gpu_why_not);
}

/* Summed over our programs: re-entries the kernel skipped (a wakeup from an interrupt that
 * arrived while a program ran), each a lost event; and, when kernel.bpf_stats_enabled is on,
 * the programs' own run time. */
void object_prog_stats(struct bpf_object *obj, uint64_t *recursion_misses, uint64_t *run_ns,
		       uint64_t *run_count)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
			continue;
		*recursion_misses += info.recursion_misses;
		*run_ns += info.run_time_ns;
		*run_count += info.run_cnt;
	}
}

void tracer_prog_stats(struct tracer *t, uint64_t *recursion_misses, uint64_t *run_ns, uint64_t *run_count)
{
	*recursion_misses = *run_ns = *run_count = 0;
	object_prog_stats(t->skel->obj, recursion_misses, run_ns, run_count);
}


/* One more of the report's waker records; room grows with them (the maps' sizes would take
 * 1.9 MB for a few hundred). */
static int add_wake(struct report *r, int *cap, const struct wake_record *w)
{
	if (grow_array(&r->wakes, cap, r->nr_wakes, sizeof(*r->wakes), 256))
		return -ENOMEM;
	r->wakes[r->nr_wakes++] = *w;
	return 0;
}

/* What each thread holds of its latest waker, not yet in the wakers map (pp_thread.waker_sum):
 * one more record each, which the report sums with the map's under the same key. The walks
 * stop at their maps' sizes: a key deleted under one (a thread exiting) restarts it. */
static int collect_held_wakers(struct tracer *t, struct report *r, int *cap)
{
	int fd = bpf_map__fd(t->skel->maps.threads), most = bpf_map__max_entries(t->skel->maps.threads);
	__u32 key, next, *prev = NULL;
	struct pp_thread th;
	int err = 0;

	for (int n = 0; !err && n < most && !bpf_map_get_next_key(fd, prev, &next); n++) {
		const struct pp_waker_key *k = &th.waker_key;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &th) || !th.waker_sum.count)
			continue;
		err = add_wake(r, cap, &(struct wake_record){
			.wakee = k->wakee, .waker = k->waker, .waker_tgid = k->waker_tgid,
			.ctx = k->ctx, .cause = k->cause, .ns = th.waker_sum.ns,
			.count = th.waker_sum.count });
	}
	return err;
}

/* Who ended each wait; recorded only where the front-end asked for it. */
static int collect_wakers(struct tracer *t, struct report *r)
{
	int fd = bpf_map__fd(t->skel->maps.wakers), most = bpf_map__max_entries(t->skel->maps.wakers);
	struct pp_waker_key key, *prev = NULL, next;
	struct pp_waker_val val;
	int cap = 0, err = 0;

	if (!t->skel->rodata->record_wakers)
		return 0;
	for (int n = 0; !err && n < most && !bpf_map_get_next_key(fd, prev, &next); n++) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &val))
			continue;
		err = add_wake(r, &cap, &(struct wake_record){
			.wakee = key.wakee, .waker = key.waker, .waker_tgid = key.waker_tgid,
			.ctx = key.ctx, .cause = key.cause, .ns = val.ns, .count = val.count });
	}
	return err ? err : collect_held_wakers(t, r, &cap);
}

int tracer_collect(struct tracer *t, __u64 end_ns, struct report *r)
{
	int tfd = bpf_map__fd(t->skel->maps.threads), pfd = bpf_map__fd(t->skel->maps.tracked_procs);
	__u32 key, next, *prev = NULL;
	int cap = 64, err = 0;
	struct pp_thread th;
	struct pp_proc proc;

	r->start_ns = t->start_ns;
	r->end_ns = end_ns;
	for (int c = 0; c < PP_NR_COUNTERS; c++)
		r->counters[c] = tracer_counter(t, c);

	r->procs = calloc(PP_MAX_PROCS, sizeof(*r->procs));
	r->threads = calloc(cap, sizeof(*r->threads));
	if (!r->procs || !r->threads)
		return -ENOMEM;

	while (!bpf_map_get_next_key(pfd, prev, &next)) {
		struct proc_result *p;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(pfd, &key, &proc) || r->nr_procs >= PP_MAX_PROCS)
			continue;
		p = &r->procs[r->nr_procs++];
		p->pid = key;
		p->parent = proc.parent_tgid;
		p->root = proc.is_root;
		p->forked_while_tracing = proc.fork_ns != 0;
		p->exited = proc.exit_ns != 0;
		p->fork_ns = proc.fork_ns;
		p->exit_ns = proc.exit_ns;
		proc_comm(PROCFS, key, key, p->comm, sizeof(p->comm));
		if (proc.is_root && proc.exit_ns) {
			r->target_exited = true;
			r->target_exit_ns = proc.exit_ns;
		}
	}

	prev = NULL;
	while (!bpf_map_get_next_key(tfd, prev, &next)) {
		char state = 0;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(tfd, &key, &th) || bpf_map_lookup_elem(pfd, &th.tgid, &proc))
			continue;
		if (grow_array(&r->threads, &cap, r->nr_threads, sizeof(*r->threads), 64))
			return -ENOMEM;
		if (th.phase == PP_PHASE_UNKNOWN) {
			state = tracer_close_state_of(t, key);
			if (!state)
				state = proc_thread_state(PROCFS, th.tgid, key);
		}
		thread_close(&th, t->start_ns, end_ns, state, &r->threads[r->nr_threads]);
		r->threads[r->nr_threads].tid = key;
		r->nr_threads++;
	}

	{
		struct pp_io_stats io = {};
		__u32 zero = 0;

		if (!bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.io_stats), &zero, &io))
			r->io = io;
	}
	collect_gpu(t, r);
	err = tracer_collect_samples(t, r);
	if (err)
		return err;
	err = tracer_collect_steps(t, r);
	if (err)
		return err;
	err = tracer_collect_memory(t, r);
	if (err)
		return err;
	if (t->python_gc)
		tracer_collect_python(t, r);
	err = collect_wakers(t, r);
	if (err)
		return err;
	if (t->irq_fallback[0])
		report_not_traced(r, "interrupt context read from interrupt tracepoints, not the CPU's "
				  "preempt count (%s): wakeups from IPIs and irq_work read as the "
				  "interrupted task's", t->irq_fallback);
	if (r->counters[PP_CNT_WAKERS_FULL])
		report_not_traced(r, "%llu waits not credited to their waker: wakers map full (%d entries)",
				  (unsigned long long)r->counters[PP_CNT_WAKERS_FULL], PP_MAX_WAKERS);
	if (r->counters[PP_CNT_SWITCH_IN_UNPLACED])
		report_not_traced(r, "%llu times a thread left a CPU it was not seen to get, before "
				  "its CPU clock was known: the time since its previous event is "
				  "unclaimed (OTHER)",
				  (unsigned long long)r->counters[PP_CNT_SWITCH_IN_UNPLACED]);
	if (r->counters[PP_CNT_WAITS_UNWOKEN])
		report_not_traced(r, "%llu waits ended with no wakeup traced (some hosts drop a few "
				  "scheduler events under load): their cause is unknown and they count "
				  "as OTHER, unless they retried timed-out waits a waker then named",
				  (unsigned long long)r->counters[PP_CNT_WAITS_UNWOKEN]);
	if (r->counters[PP_CNT_UNRETURNED_CALLS])
		report_not_traced(r, "%llu probed calls never returned (longjmp or an exception through "
				  "them): their time ends at the next call",
				  (unsigned long long)r->counters[PP_CNT_UNRETURNED_CALLS]);
	if (r->counters[PP_CNT_GPU_DEPTH_OVERFLOW])
		report_not_traced(r, "%llu GPU calls nested deeper than %d: their GPU_WAIT may end early",
				  (unsigned long long)r->counters[PP_CNT_GPU_DEPTH_OVERFLOW],
				  PP_MAX_GPU_DEPTH);
	if (r->counters[PP_CNT_RQ_FULL])
		report_not_traced(r, "%llu block requests not timed: in-flight map full",
				  (unsigned long long)r->counters[PP_CNT_RQ_FULL]);
	if (r->counters[PP_CNT_URETPROBE_ORPHANS])
		report_not_traced(r, "%llu GPU or NCCL calls were already running at attach and were "
				  "not timed",
				  (unsigned long long)r->counters[PP_CNT_URETPROBE_ORPHANS]);
	tracer_prog_stats(t, &r->bpf_recursion_misses, &r->bpf_run_ns, &r->bpf_run_count);
	r->maps_full_scans = t->full_scans;
	r->maps_reads_notes = t->pid_scans;
	tracer_note_limits(t, end_ns, r);
	if (t->probe_attach_failures)
		report_not_traced(r, "%d GPU probes could not be attached (-v lists them)",
				  t->probe_attach_failures);
	return err;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The report's step boundaries: the step probe (gpu.bpf.c's step_enter()) sends a record per
 * outermost backward pass, with the thread's state time so far, through the step_records ring
 * buffer; they are taken at every tick and handed to the report (steps.c makes steps of them).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include "gpu_apis.h"
#include "pipeprof.h"
#include "pipeprof.skel.h"
#include "report.h"
#include "tracer.h"

void tracer_size_step_buffer(struct tracer *t)
{
	/* Read every 100 ms tick: room for 2000 steps a second; a page when steps are off. */
	size_t want = t->steps ? 256 * sizeof(struct pp_step_record) : 0;
	__u32 size = (__u32)sysconf(_SC_PAGESIZE);

	while (size < want)
		size <<= 1;
	bpf_map__set_max_entries(t->skel->maps.step_records, size);
	/* Preallocated: only what the steps' GPU counts need. */
	if (!t->steps) {
		bpf_map__set_max_entries(t->skel->maps.thread_gpu, 1);
		bpf_map__set_max_entries(t->skel->maps.pinned_regions, 1);
	}
	if (!t->steps && !(t->hist_kinds & 1u << PP_HK_LAUNCH))
		bpf_map__set_max_entries(t->skel->maps.runtime_text, 1);
	tracer_gpumem_size(t);
}

/* Pinned host memory serves only the steps' copy figures, device memory only the steps'. */
void tracer_steps_skip_probes(struct tracer *t)
{
	if (t->steps)
		return;
	bpf_program__set_autoload(t->skel->progs.on_host_alloc, false);
	bpf_program__set_autoload(t->skel->progs.on_host_alloc_return, false);
	bpf_program__set_autoload(t->skel->progs.on_host_register, false);
	bpf_program__set_autoload(t->skel->progs.on_host_free, false);
	tracer_gpumem_skip_probes(t);
}

static bool not_a_data_wait(const struct step_point *p)
{
	return p->source != PP_STEP_FROM_DATA_WAIT;
}

static int on_step_record(void *ctx, void *data, size_t size)
{
	const struct pp_step_record *rec = data;
	struct tracer *t = ctx;

	if (size < sizeof(*rec))
		return 0;
	/* The launch bursts' clock (tracer_launches.c) goes on past the cap. */
	t->probe_steps_seen += rec->source == PP_STEP_FROM_PROBE;
	t->data_steps_seen += rec->source == PP_STEP_FROM_DATA_WAIT;
	/*
	 * The batches' waits mark steps only for a thread with fewer than two backward passes
	 * (steps.c's boundaries()), and only step_wait_tid's are sent: past its second pass they
	 * are never read. A DataLoader trainer ends ~10 such waits a step: kept, and copied at
	 * the close, they were about a third of a minute's 44 MB of peak RSS.
	 */
	if (rec->source == PP_STEP_FROM_DATA_WAIT && t->wait_tid_passes >= 2)
		return 0;
	/* The trainer's second pass drops its waits' records: room for it at the cap. */
	if (t->step_points.nr >= STEP_STORE_MAX && rec->source == PP_STEP_FROM_PROBE &&
	    rec->tid == t->skel->rodata->step_wait_tid && t->wait_tid_passes == 1)
		step_store_filter(&t->step_points, not_a_data_wait);
	if (t->step_points.nr >= STEP_STORE_MAX) {
		if (!t->step_recs_unkept++)
			t->step_unkept_from_ns = rec->ts;
		return 0;
	}
	if (step_store_add(&t->step_points, rec)) {
		t->step_recs_over_cap++;
		return 0;
	}
	/* Counted once kept: boundaries() counts the passes it is given. Then the batches'
	 * waits' records go. */
	if (rec->source == PP_STEP_FROM_PROBE && rec->tid == t->skel->rodata->step_wait_tid &&
	    ++t->wait_tid_passes == 2)
		step_store_filter(&t->step_points, not_a_data_wait);
	return 0;
}

int tracer_steps_start(struct tracer *t)
{
	if (!t->steps)
		return 0;
	t->steps_rb = ring_buffer__new(bpf_map__fd(t->skel->maps.step_records), on_step_record, t,
				       NULL);
	if (!t->steps_rb) {
		int err = -errno;

		fprintf(stderr, "pipeprof: cannot read the step records: %s\n", strerror(-err));
		return err;
	}
	return 0;
}

void tracer_steps_poll(struct tracer *t)
{
	if (t->steps_rb)
		ring_buffer__consume(t->steps_rb);
}

/* The job's copies over the window: every thread's counts summed. */
static void collect_copies(struct tracer *t, struct report *r)
{
	int fd = bpf_map__fd(t->skel->maps.thread_gpu);
	__u32 key, next, *prev = NULL;
	struct pp_thread_gpu g;

	for (int i = 0; i < gpu_api_count && !r->copies_traced; i++)
		r->copies_traced = (gpu_apis[i].class == GPU_COPY || gpu_apis[i].class == GPU_COPY_SYNC) &&
				   tracer_probed(t, gpu_apis[i].name);
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &g))
			continue;
		for (int d = 0; d < PP_NR_COPY_DIRS; d++) {
			r->copies.calls[d] += g.copies.calls[d];
			r->copies.bytes[d] += g.copies.bytes[d];
			r->copies.pinned_calls[d] += g.copies.pinned_calls[d];
			r->copies.pinned_bytes[d] += g.copies.pinned_bytes[d];
		}
	}
	if (r->counters[PP_CNT_THREAD_GPU_FULL])
		report_not_traced(r, "%llu threads' GPU syncs and copies not counted per step: map full",
				  (unsigned long long)r->counters[PP_CNT_THREAD_GPU_FULL]);
	if (r->counters[PP_CNT_PINNED_FULL])
		report_not_traced(r, "%llu pinned host regions not tracked (map full, %d entries): "
				  "copies from them read as pageable",
				  (unsigned long long)r->counters[PP_CNT_PINNED_FULL],
				  PP_MAX_PINNED_REGIONS);
}

void tracer_steps_probe_state(struct tracer *t, struct report *r)
{
	bool torch = false;

	r->steps_probed = tracer_probed(t, tracer_step_api(t));
	if (t->step_file[0])
		snprintf(r->step_symbol, sizeof(r->step_symbol), "%s:%s", t->step_file, t->step_func);
	for (int i = 0; i < t->nr_attached && !torch; i++)
		torch = t->step_file[0] ? lib_name_matches(t->attached[i].result.path, t->step_file) :
			t->attached[i].result.kind == LIB_TORCH;
	if (!r->steps_probed && t->step_file[0])
		snprintf(r->steps_why_not, sizeof(r->steps_why_not), "--step-symbol %s: %s",
			 r->step_symbol, torch ? "the file is mapped, but has no such symbol or it "
			 "could not be probed" : "no file of that name is mapped by the traced processes");
	else if (!r->steps_probed)
		snprintf(r->steps_why_not, sizeof(r->steps_why_not), "%s", torch ?
			 "libtorch_cpu is mapped but its autograd engine "
			 "(" TRACER_STEP_PROBE ") could not be probed" :
			 "libtorch_cpu is not mapped: no autograd backward pass to find");
}

int tracer_collect_steps(struct tracer *t, struct report *r)
{
	r->steps_on = t->steps;
	if (!t->steps)
		return 0;
	collect_copies(t, r);
	tracer_collect_gpumem(t, r);
	tracer_steps_probe_state(t, r);
	tracer_steps_poll(t);
	r->pinned_before_attach = t->pinned_seeded;
	r->pinned_before_attach_lost = t->pinned_seed_lost;
	r->step_recs_lost = tracer_counter(t, PP_CNT_STEP_RECORDS_LOST) + t->step_recs_over_cap;
	r->step_recs_unkept = t->step_recs_unkept;
	r->step_unkept_from_ns = t->step_unkept_from_ns;
	/* Handed over, not copied: the report is collected once (the daemon keeps no record). */
	r->step_points = t->step_points;
	t->step_points = (struct step_store){ 0 };
	return 0;
}

void tracer_steps_close(struct tracer *t)
{
	ring_buffer__free(t->steps_rb);
	t->steps_rb = NULL;
	step_store_free(&t->step_points);
}

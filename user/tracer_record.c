// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `pipeprof record`: record.bpf.c sends each state episode a thread closes through the
 * episodes ring buffer; they are taken at every tick and kept for the trace (record_cmd.c).
 * BPF plumbing, beside tracer.c; the same pattern as tracer_steps.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include "pipeprof.h"
#include "pipeprof.skel.h"
#include "tracer.h"

/* The job-wide cap on episodes a second the BPF side sends: a few microseconds of a CPU
 * each, so at most a few per cent of a machine goes to recording. */
#define RECORD_MAX_RATE 200000
/* Kept in memory: 40 bytes each, 160 MB; 20 s at the cap. The rest are counted as dropped. */
#define RECORD_MAX_EPISODES (4u << 20)

void tracer_record_size(struct tracer *t)
{
	/* Read every 100 ms tick: room for a second at the cap, as the ticks can be late. */
	size_t want = t->record ? (size_t)RECORD_MAX_RATE * (sizeof(struct pp_episode) + 8) : 0;
	__u32 size = (__u32)sysconf(_SC_PAGESIZE);
	long ncpus = libbpf_num_possible_cpus();
	__u64 per_slot;

	while (size < want)
		size <<= 1;
	bpf_map__set_max_entries(t->skel->maps.episodes, size);
	t->skel->rodata->record_on = t->record;
	/* The scheduler's program in the build that sends episodes, or the one with none of it. */
	bpf_program__set_autoload(t->skel->progs.on_sched_switch, !t->record);
	bpf_program__set_autoload(t->skel->progs.on_sched_switch_rec, t->record);
	if (ncpus < 1)
		ncpus = 1;
	per_slot = (__u64)RECORD_MAX_RATE * PP_EPISODE_SLOT_NS / 1000000000ULL / ncpus;
	t->skel->rodata->record_cap = per_slot ? (__u32)per_slot : 1;
}

static int on_episode(void *ctx, void *data, size_t size)
{
	struct tracer *t = ctx;

	if (size < sizeof(struct pp_episode))
		return 0;
	if (t->nr_eps >= RECORD_MAX_EPISODES) {
		t->eps_over_cap++;
		return 0;
	}
	if (t->nr_eps == t->cap_eps) {
		size_t cap = t->cap_eps ? 2 * t->cap_eps : 65536;
		void *grown = realloc(t->eps, cap * sizeof(*t->eps));

		if (!grown) {
			t->eps_over_cap++;
			return 0;
		}
		t->eps = grown;
		t->cap_eps = cap;
	}
	memcpy(&t->eps[t->nr_eps++], data, sizeof(struct pp_episode));
	return 0;
}

int tracer_record_start(struct tracer *t)
{
	if (!t->record)
		return 0;
	t->record_rb = ring_buffer__new(bpf_map__fd(t->skel->maps.episodes), on_episode, t, NULL);
	if (!t->record_rb) {
		int err = -errno;

		fprintf(stderr, "pipeprof: cannot read the state episodes: %s\n", strerror(-err));
		return err;
	}
	return 0;
}

void tracer_record_poll(struct tracer *t)
{
	if (t->record_rb)
		ring_buffer__consume(t->record_rb);
}

void tracer_record_close(struct tracer *t)
{
	ring_buffer__free(t->record_rb);
	t->record_rb = NULL;
	free(t->eps);
	t->eps = NULL;
	t->nr_eps = t->cap_eps = 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `pipeprof hist`'s maps: the hash map of every histogram by (kind, sub, id, epoch), and the
 * per-CPU array the switch-in's unkeyed histograms use instead (PP_SWITCH_HISTS); each interval
 * flips the epoch and drains the closed half of both. BPF plumbing, beside tracer.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "hist.h"
#include "pipeprof.h"	/* the types the skeleton's globals use */
#include "pipeprof.skel.h"
#include "dispatcher.h"
#include "tracer.h"

static bool uses_switch_hists(const struct tracer_opts *o)
{
	return o->hist_keying == PP_HKEY_NONE &&
	       (o->hist_kinds & (1u << PP_HK_OFFCPU | 1u << PP_HK_RUNQ));
}

void tracer_size_hists(struct tracer *t, const struct tracer_opts *o)
{
	/* Preallocated, so sized to what is asked: one entry when no histogram is kept. */
	bpf_map__set_max_entries(t->skel->maps.hists, !o->hist_kinds ? 1 :
				 2 * (o->hist_entries ? o->hist_entries : PP_MAX_HISTS));
	bpf_map__set_max_entries(t->skel->maps.switch_hists,
				 uses_switch_hists(o) ? 2 * PP_SWITCH_HISTS : 1);
}

void tracer_flip_hists(struct tracer *t)
{
	t->hist_drain_epoch = t->skel->bss->hist_epoch;
	__atomic_store_n(&t->skel->bss->hist_epoch, t->hist_drain_epoch ^ 1, __ATOMIC_SEQ_CST);
	t->hist_flipped = true;
}

int tracer_hist_capacity(const struct tracer *t)
{
	return bpf_map__max_entries(t->skel->maps.hists);
}

/* The closed epoch's half of the per-CPU switch-in histograms, summed over the CPUs and zeroed
 * for the interval after next. */
static int drain_switch_hists(struct tracer *t,
			      void (*fn)(const struct pp_hist_key *key, const struct pp_hist *h,
					 void *ctx),
			      void *ctx)
{
	int fd = bpf_map__fd(t->skel->maps.switch_hists), nr_cpus = libbpf_num_possible_cpus();
	size_t stride = (sizeof(struct pp_hist) + 7) & ~(size_t)7;
	void *copies;
	int err = 0;

	if (bpf_map__max_entries(t->skel->maps.switch_hists) < 2 * PP_SWITCH_HISTS)
		return 0;
	if (nr_cpus < 0)
		return nr_cpus;
	copies = calloc(nr_cpus, stride);
	if (!copies)
		return -ENOMEM;
	for (__u32 idx = 0; idx < PP_SWITCH_HISTS; idx++) {
		__u32 key = (t->hist_drain_epoch & 1) * PP_SWITCH_HISTS + idx;
		struct pp_hist_key hkey;
		struct pp_hist sum;

		if (bpf_map_lookup_elem(fd, &key, copies)) {
			err = -errno;
			break;
		}
		hist_sum_cpus(copies, nr_cpus, stride, &sum);
		if (!sum.count)
			continue;
		memset(copies, 0, nr_cpus * stride);
		if (bpf_map_update_elem(fd, &key, copies, BPF_ANY)) {
			err = -errno;
			break;
		}
		hist_switch_key(idx, t->hist_drain_epoch, &hkey);
		fn(&hkey, &sum, ctx);
	}
	free(copies);
	return err;
}

int tracer_drain_hists(struct tracer *t,
		       void (*fn)(const struct pp_hist_key *key, const struct pp_hist *h, void *ctx),
		       void *ctx)
{
	int fd = bpf_map__fd(t->skel->maps.hists), cap = tracer_hist_capacity(t), n = 0;
	struct pp_hist_key *keys, *prev = NULL;

	keys = calloc(cap, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	if (!t->hist_flipped) {
		tracer_flip_hists(t);
		tracer_wait_programs();
	}
	t->hist_flipped = false;
	/* Keys first: deleting while walking would make get_next_key start over. */
	while (n < cap && !bpf_map_get_next_key(fd, prev, &keys[n])) {
		prev = &keys[n];
		n++;
	}
	for (int i = 0; i < n; i++) {
		struct pp_hist h;

		/* No program writes this epoch any more: the entry can be recycled safely. */
		if (keys[i].epoch == t->hist_drain_epoch &&
		    !bpf_map_lookup_and_delete_elem(fd, &keys[i], &h))
			fn(&keys[i], &h, ctx);
	}
	free(keys);
	return drain_switch_hists(t, fn, ctx);
}


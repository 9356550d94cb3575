// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The report's device memory (devmem.bpf.c): the maps sized and the programs loaded only
 * where the report asks for steps, and each process's figures read at collection.
 */
#include <errno.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "gpu_apis.h"
#include "pipeprof.h"
#include "pipeprof.skel.h"
#include "report.h"
#include "tracer.h"

void tracer_gpumem_size(struct tracer *t)
{
	if (t->steps)
		return;
	bpf_map__set_max_entries(t->skel->maps.dev_allocs, 1);
	bpf_map__set_max_entries(t->skel->maps.dev_mem, 1);
}

void tracer_gpumem_skip_probes(struct tracer *t)
{
	if (t->steps)
		return;
	bpf_program__set_autoload(t->skel->progs.on_dev_alloc, false);
	bpf_program__set_autoload(t->skel->progs.on_dev_alloc_pitch, false);
	bpf_program__set_autoload(t->skel->progs.on_dev_alloc_return, false);
	bpf_program__set_autoload(t->skel->progs.on_dev_free, false);
}

static void add_proc(struct report *r, __u32 pid, const struct pp_dev_mem *m, bool root)
{
	struct gpumem_proc *p;

	if (r->nr_devmem >= MAX_GPUMEM_PROCS)
		return;
	/* The root process first: the report's headline figures are its. */
	if (root && r->nr_devmem) {
		memmove(&r->devmem[1], &r->devmem[0], r->nr_devmem * sizeof(r->devmem[0]));
		p = &r->devmem[0];
	} else {
		p = &r->devmem[r->nr_devmem];
	}
	r->nr_devmem++;
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->root = root;
	/* A process with no event in the window kept what it had all along. */
	p->start_bytes = m->window_seen ? m->window_start : m->outstanding;
	p->end_bytes = m->outstanding;
	p->peak_bytes = m->window_seen ? m->window_peak : m->outstanding;
	if (p->end_bytes > p->peak_bytes)
		p->peak_bytes = p->end_bytes;
	p->allocs = m->window.allocs;
	p->frees = m->window.frees;
	p->alloc_bytes = m->window.alloc_bytes;
	p->free_bytes = m->window.free_bytes;
	p->frees_unseen = m->frees_unseen;
}

void tracer_collect_gpumem(struct tracer *t, struct report *r)
{
	int fd = bpf_map__fd(t->skel->maps.dev_mem);
	__u32 key, next, *prev = NULL;
	struct pp_dev_mem m;

	if (!t->steps)
		return;
	for (int i = 0; i < gpu_api_count && !r->devmem_traced; i++)
		r->devmem_traced = (gpu_apis[i].class == GPU_DEV_ALLOC ||
				    gpu_apis[i].class == GPU_DEV_FREE) && tracer_probed(t, gpu_apis[i].name);
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(fd, &key, &m))
			add_proc(r, key, &m, key == (__u32)t->root);
	}
	r->devmem_lost = r->counters[PP_CNT_DEV_ALLOCS_FULL];
	if (r->devmem_lost)
		report_not_traced(r, "%llu device allocations not followed (map full, %d entries): "
				  "outstanding device memory misses them",
				  (unsigned long long)r->devmem_lost, PP_MAX_DEV_ALLOCS);
}

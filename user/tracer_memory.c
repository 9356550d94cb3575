// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The report's host memory: every MEM_INTERVAL_MS, the resident size and major faults of each
 * live process of the job, from /proc/PID/statm and /proc/PID/stat (neither takes the
 * process's mmap_lock, unlike its maps), handed to memory.c at collection.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "pipeprof.h"
#include "pipeprof.skel.h"
#include "proctree.h"
#include "report.h"
#include "tracer.h"
#include "grow.h"

#define MEM_INTERVAL_NS (250ull * 1000 * 1000)
/* An hour of a 64-process job at 4 rounds a second; the readings after it are counted. */
#define MAX_MEM_READINGS (64 * 4 * 3600)

/* rss from statm (pages), major faults from stat (field 12, after the command's ')'). */
static int read_process(pid_t pid, uint64_t *rss, uint64_t *majflt)
{
	char path[64], buf[1024], *p;
	unsigned long long size, resident, flt;
	long page = sysconf(_SC_PAGESIZE);

	snprintf(path, sizeof(path), PROCFS "/%d/statm", (int)pid);
	if (proc_read_line(path, buf, sizeof(buf)) || sscanf(buf, "%llu %llu", &size, &resident) != 2)
		return -ENOENT;
	snprintf(path, sizeof(path), PROCFS "/%d/stat", (int)pid);
	if (proc_read_line(path, buf, sizeof(buf)) || !(p = strrchr(buf, ')')) ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %llu", &flt) != 1)
		return -ENOENT;
	*rss = resident * (uint64_t)page;
	*majflt = flt;
	return 0;
}

static void add_reading(struct tracer *t, const struct mem_reading *m)
{
	if (t->nr_mem >= MAX_MEM_READINGS) {
		t->mem_over_cap++;
		return;
	}
	if (grow_array(&t->mem, &t->cap_mem, t->nr_mem, sizeof(*t->mem), 256)) {
		t->mem_over_cap++;
		return;
	}
	t->mem[t->nr_mem++] = *m;
}

void tracer_memory_poll(struct tracer *t, bool now_or_never)
{
	int fd = bpf_map__fd(t->skel->maps.tracked_procs);
	__u32 key, next, *prev = NULL;
	struct pp_proc proc;
	__u64 now;

	if (!t->memory)
		return;
	now = monotonic_ns();
	if (!now_or_never && now - t->last_mem_ns < MEM_INTERVAL_NS)
		return;
	t->last_mem_ns = now;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		struct mem_reading m = { .ts_ns = now, .pid = next };

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &proc) || proc.exit_ns)
			continue;
		m.root = proc.is_root;
		if (!read_process(key, &m.rss_bytes, &m.major_faults))
			add_reading(t, &m);
	}
}

int tracer_collect_memory(struct tracer *t, struct report *r)
{
	r->memory_on = t->memory;
	r->mem_readings_lost = t->mem_over_cap;
	if (!t->memory)
		return 0;
	/* The readings of the window only: the naming grace after it may have added some. */
	while (t->nr_mem && t->mem[t->nr_mem - 1].ts_ns > r->end_ns)
		t->nr_mem--;
	return mem_summarize(t->mem, t->nr_mem, &r->mem);
}

void tracer_memory_close(struct tracer *t)
{
	free(t->mem);
	t->mem = NULL;
	t->nr_mem = t->cap_mem = 0;
}

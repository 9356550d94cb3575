// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The sizes of pipeprof's maps: the pid filter (tracked_pids) sized to pid_max and written
 * through a shared mapping. BPF plumbing, beside tracer.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "pipeprof.h"	/* the types the skeleton's globals use */
#include "pipeprof.skel.h"
#include "proctree.h"
#include "tracer.h"

/* PID_MAX_LIMIT on 64-bit: where pid_max cannot be read, every possible pid. */
#define PID_MAX_LIMIT	(4 * 1024 * 1024)

static long read_pid_max(void)
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

int tracer_size_maps(struct tracer *t)
{
	long blocks = (read_pid_max() + PP_PIDS_PER_BLOCK - 1) / PP_PIDS_PER_BLOCK;
	return bpf_map__set_max_entries(t->skel->maps.tracked_pids, blocks);
}

int tracer_mark_pid(struct tracer *t, pid_t pid, bool live)
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
	/* Past the map (pid_max raised since): the programs look such pids up in tracked_procs. */
	if ((size_t)pid / PP_PIDS_PER_BLOCK < blocks)
		__atomic_store_n(&t->pids_mem[pid / PP_PIDS_PER_BLOCK].live[pid % PP_PIDS_PER_BLOCK],
				 live, __ATOMIC_RELEASE);
	return 0;
}

void tracer_unmap_pids(struct tracer *t)
{
	if (t->pids_mem)
		munmap(t->pids_mem, t->pids_len);
	t->pids_mem = NULL;
	t->pids_len = 0;
}

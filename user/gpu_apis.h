/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The synchronising GPU API functions pipeprof probes (GPU_WAIT); an entry's index is its
 * BPF attach cookie. */
#ifndef PIPEPROF_GPU_APIS_H
#define PIPEPROF_GPU_APIS_H

#include <stdbool.h>
#include "procmaps.h"

enum gpu_probe_class {
	GPU_SYNC = 0,	/* entry and return: GPU_WAIT, hist gpu-sync */
	GPU_LAUNCH,	/* entry: hist launch */
	GPU_COPY,	/* entry, and return where the copy is synchronous: hist memcpy */
	GPU_COPY_SYNC,
	/* The report's steps: pinned host memory, to tell pinned copies from pageable ones. */
	GPU_HOST_ALLOC,		/* (void **out, size_t bytes, ...): entry and return */
	GPU_HOST_REGISTER,	/* (void *ptr, size_t bytes, ...): entry */
	GPU_HOST_FREE,		/* (void *ptr): entry */
	/* The report's steps: device memory, allocated and freed (devmem.bpf.c). */
	GPU_DEV_ALLOC,		/* (void **out, size_t bytes, ...): entry and return */
	GPU_DEV_ALLOC_PITCH,	/* (void **out, size_t *pitch, size_t width, size_t rows, ...) */
	GPU_DEV_FREE,		/* (void *ptr, ...): entry */
	/* libnccl (nccl.bpf.c): collectives, point-to-point and group calls (COMM_WAIT), and
	 * the communicator calls that tell a communicator's size. */
	NCCL_CALL,		/* entry and return */
	NCCL_COMM_INIT,		/* entry and return */
	NCCL_COMM_FREE,		/* entry */
};

struct gpu_api {
	const char *name;
	enum lib_kind lib;
	enum gpu_probe_class class;
	unsigned int copy_dir;	/* enum pp_copy_dir, or PP_COPY_DIR_FROM_ARG */
	unsigned int nccl_op;	/* enum pp_nccl_op */
};

/* The GPU_SYNC entries come first: ids 0 .. gpu_sync_api_count-1 index gpu_api_stats. */
extern const struct gpu_api gpu_apis[];
extern const int gpu_api_count;
extern const int gpu_sync_api_count;

const char *copy_dir_name(unsigned int dir);
/* The NCCL API of a call (enum pp_nccl_op below PP_NR_NCCL_CALLS): "ncclAllReduce"... */
const char *nccl_op_name(unsigned int op);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The GPU API functions pipeprof probes; an entry's index is its BPF attach cookie. */
#ifndef PIPEPROF_GPU_APIS_H
#define PIPEPROF_GPU_APIS_H

#include <stdbool.h>
#include "procmaps.h"

enum gpu_api_kind {
	GPU_API_SYNC,	/* the calling thread waits for the GPU: GPU_WAIT */
};

struct gpu_api {
	const char *name;
	enum lib_kind lib;
	enum gpu_api_kind kind;
};

extern const struct gpu_api gpu_apis[];
extern const int gpu_api_count;

/* Index of name in gpu_apis, or -1. */
int gpu_api_find(const char *name);

#endif

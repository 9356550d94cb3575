/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The synchronising GPU API functions pipeprof probes (GPU_WAIT); an entry's index is its
 * BPF attach cookie. */
#ifndef PIPEPROF_GPU_APIS_H
#define PIPEPROF_GPU_APIS_H

#include <stdbool.h>
#include "procmaps.h"

struct gpu_api {
	const char *name;
	enum lib_kind lib;
};

extern const struct gpu_api gpu_apis[];
extern const int gpu_api_count;

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The daemon's per-window arithmetic on cumulative per-state counters. Pure: unit-tested
 * without root. */
#ifndef PIPEPROF_DAEMON_WINDOW_H
#define PIPEPROF_DAEMON_WINDOW_H

#include <linux/types.h>
#include "pipeprof.h"

/* now and prev hold PP_NR_STATES cumulative counters; out may be now. prev becomes now. */
void window_delta(const __u64 *now, __u64 *prev, __u64 *out, __u64 *wall);

#endif

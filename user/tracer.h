/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The BPF session behind every front-end: load, follow a process tree, attach GPU probes to
 * whatever libraries it maps, and read the per-thread accounting back. */
#ifndef PIPEPROF_TRACER_H
#define PIPEPROF_TRACER_H

#include <stdbool.h>
#include <sys/types.h>
#include "report.h"

struct pipeprof_bpf;

struct tracer_lib_attach;

struct tracer {
	struct pipeprof_bpf *skel;
	pid_t root;
	__u64 start_ns;
	bool verbose;

	/* One per (process, library file) we have looked at. */
	struct tracer_lib_attach *attached;
	int nr_attached, cap_attached;
	int probe_attach_failures;
	int libs_unreadable;
	int seed_failures;	/* threads seen at attach that did not fit the thread map */
	bool seed_truncated;	/* a process or thread list at attach hit its bound */
	char last_lib_error[256];
};

__u64 monotonic_ns(void);

/* Fails with a message on stderr and -errno: -EPERM (not root), -ENOENT (no BTF), -ESRCH.
 * trainer_tid: the user's --tid, or 0. */
int tracer_start(struct tracer *t, pid_t root, pid_t trainer_tid, bool verbose);

/* Picks up processes and libraries that appeared since the last call. */
int tracer_refresh(struct tracer *t);

/* Fills every measured part of r except the analysis. Call before tracer_stop(). */
int tracer_collect(struct tracer *t, __u64 end_ns, struct report *r);

/* From end_ns on nothing more is accounted, while tracer_collect() reads the maps. */
void tracer_close_window(struct tracer *t, __u64 end_ns);

/* Detaches and frees everything; safe on a partly started tracer. */
void tracer_stop(struct tracer *t);

/* Whether an error from bpf/perf means missing privileges. */
bool errno_is_privilege(int err);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `pipeprof record`'s output: a Chrome trace-event JSON file (the {"traceEvents": [...]} form
 * that ui.perfetto.dev and chrome://tracing open) of the window. One track per traced thread,
 * named by its role and comm; a complete ("X") slice per state episode; a flow (ph "s" then
 * "f", both bound to their enclosing slices) from the waker's slice, at its wakeup, to the
 * wait it ended, on the wakee's track, just before that wait's end; each thread's GPU calls on
 * a track beside it: a slice per synchronising call, an instant ("i") per kernel launch.
 *
 * Pure: fed the episodes the BPF programs sent and the threads the report closed; no BPF.
 */
#ifndef PIPEPROF_TRACE_JSON_H
#define PIPEPROF_TRACE_JSON_H

#include <stddef.h>
#include <stdio.h>
#include <linux/types.h>
#include "pipeprof.h"

struct trace_thread {
	__u32 tid, tgid;
	const char *comm;	/* as the thread named itself: any bytes, up to 16 */
	int role;		/* enum role */
	/* The phase open when the window closed, as thread_close() counts it: no episode
	 * closed it. open_state PP_NR_STATES: none. */
	__u32 open_state;
	__u64 open_from, open_to;
	/* Before it, the part of that wait a wakeup named with no switch-in after it
	 * (thread_woken_unswitched): none where named_to <= named_from. */
	__u32 named_state;
	__u64 named_from, named_to;
};

struct trace_proc {
	__u32 pid;
	const char *comm;
	int root;		/* the traced process itself */
};

struct trace_input {
	const struct trace_thread *threads;
	int nr_threads;
	const struct trace_proc *procs;
	int nr_procs;
	/* Sorted in place by thread and time. */
	struct pp_episode *eps;
	size_t nr_eps;
	__u64 start_ns, end_ns;		/* the window, CLOCK_MONOTONIC */
	__u64 episodes_dropped;		/* by the BPF rate cap, a full ring buffer, or memory */
	const char *cmdline;
	/* The report's steps of the trainer (start times), drawn on a track of their own; may
	 * be 0. */
	const __u64 *step_ts;
	const int *step_numbers;	/* the step each begins (steps.h); NULL: 1, 2, ... */
	int nr_steps;
	__u32 step_tid, step_tgid;
	/* The GPU API names by id (pp_episode.api - 1): each thread's synchronising calls and
	 * kernel launches (PP_EP_LAUNCH) go on a track of their own beside it; NULL: none drawn. */
	const char *const *api_names;
	int nr_api_names;
};

struct trace_stats {
	size_t slices, flows, steps, gpu_calls;
	size_t launches;		/* kernel launches, instants on the GPU tracks */
	size_t episodes_unknown;	/* of threads the report does not have */
	__u64 overlap_ns;		/* clipped so a thread's slices never overlap */
};

/* The synthetic tid of the steps track: beyond any pid_max (2^22). */
#define TRACE_STEPS_TID 0x40000000u
/* A thread's GPU calls track: its tid with this bit set. */
#define TRACE_GPU_TID_BIT 0x20000000u

/* Writes the trace. Returns 0, -ENOMEM or -EIO. */
int trace_json_write(FILE *out, struct trace_input *in, struct trace_stats *st);

/* Writes s (at most max bytes; a NUL ends it sooner) as a JSON string: ill-formed UTF-8
 * repaired, quotes, backslashes and control characters escaped. */
void trace_json_string(FILE *out, const char *s, size_t max);

#endif

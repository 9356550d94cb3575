/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The scheduler tracepoints attached once for many jobs (bpf/dispatch.h says why): the daemon
 * and `top` hand the dispatcher to each job's tracer, which claims an id in it, and only the
 * dispatcher's programs run on a context switch. */
#ifndef PIPEPROF_DISPATCHER_H
#define PIPEPROF_DISPATCHER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "dispatch.h"

struct dispatch_bpf;
struct pipeprof_bpf;

struct dispatcher {
	struct dispatch_bpf *skel;
	struct pp_job_block *pids;	/* pid_job, mapped */
	size_t pids_len;
	pthread_mutex_t lock;		/* guards used[] */
	bool used[PP_DISPATCH_SLOTS];
	uint64_t marks_refused;		/* processes another job follows already */
};

/* Loads and attaches the dispatcher, and proves its sched_switch program fires. -errno. */
int dispatcher_open(struct dispatcher *d);
/* dispatcher_open() unless PIPEPROF_NO_DISPATCH is set; whether it is open (else closed). */
bool dispatcher_start(struct dispatcher *d);
void dispatcher_close(struct dispatcher *d);
/* A free dispatch id (1..PP_DISPATCH_SLOTS), or 0 when every one is taken. */
__u8 dispatcher_claim(struct dispatcher *d);
/* Before a job's object is loaded: it shares the dispatcher's maps, knows its id, and leaves
 * the three dispatched tracepoints to the dispatcher. -errno. */
int dispatcher_prepare(const struct dispatcher *d, struct pipeprof_bpf *skel, __u8 id);
/* Once the job's object is loaded and its pids marked: its programs take its events. */
int dispatcher_enter(struct dispatcher *d, struct pipeprof_bpf *skel, __u8 id);
/* pid is the job's (ours), or no longer is: then a mark another job made since stays. */
void dispatcher_mark(struct dispatcher *d, pid_t pid, __u8 id, bool ours);
/* Unmarks the job's pids and its block requests in flight. */
void dispatcher_unmark(struct dispatcher *d, __u8 id);
/* Before the job's object is closed: no event reaches its programs any more. */
void dispatcher_leave(struct dispatcher *d, __u8 id);
/* After it is closed and its programs have returned: unmarks it again (its fork program may
 * have marked pids since) and lets its id be claimed again. */
void dispatcher_release(struct dispatcher *d, __u8 id);
/* Once a second or so: forgets the overflow map's pids that exited. */
void dispatcher_sweep(struct dispatcher *d);
/* The dispatcher's programs' kernel statistics, added to the sums (tracer_prog_stats()'s):
 * the run time of the jobs' programs that it tail-calls is counted in its own. */
void dispatcher_prog_stats(const struct dispatcher *d, uint64_t *recursion_misses,
			   uint64_t *run_ns, uint64_t *run_count);
/* Events lost: a marked pid's job had no program in its slot (attaching or detaching), or a
 * job could not mark a process another job follows already. */
uint64_t dispatcher_lost(const struct dispatcher *d);

#endif

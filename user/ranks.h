/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Distributed jobs: the ranks under a launcher, each analysed as a trainer of its own, and the
 * rank the others wait for (the straggler). Pure: fed the report's processes and threads. */
#ifndef PIPEPROF_RANKS_H
#define PIPEPROF_RANKS_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include "classify.h"

struct report;

#define MAX_RANKS 64
/* Ranks whose trainers wait this much more in collectives than the least waiting one wait
 * for it: it is the straggler. */
#define STRAGGLER_MARGIN 0.10

/* What a process says of itself: its RANK (or LOCAL_RANK) from its environment, -1 if none;
 * and whether it joined a process group (a TCP connection to another process of the job:
 * procnet.h), as ranks started without those variables (mp.spawn, a hand-written launcher)
 * do. */
struct rank_hint {
	pid_t pid;
	int rank;
	bool joined;
};

struct rank_result {
	pid_t pid;
	int rank;		/* RANK from its environment, else its place by pid among the
				 * ranks that name none */
	bool rank_from_env;
	__u32 trainer_tid;
	int workers;		/* its own worker processes */
	enum verdict verdict;
	double share[PP_NR_STATES];	/* its trainer's time */
	char verdict_line[512];
};

struct job_ranks {
	int nr;
	struct rank_result ranks[MAX_RANKS];
	int straggler;		/* into ranks, -1: none the others wait for */
	double others_comm;	/* the other ranks' mean COMM_WAIT share */
	int focus;		/* the rank the report's own sections are about */
	char summary[512];
};

/* The straggler among n ranks whose trainers waited comm[i] of their time in collectives: the
 * one waiting least, when every other waits over threshold and STRAGGLER_MARGIN more than it;
 * -1 for none. *others_mean (may be NULL): the others' mean. */
int ranks_pick_straggler(const double *comm, int n, double threshold, double *others_mean);

/* The ranks under the root: each descendant (not root) whose environment names a rank or that
 * joined a process group with another descendant, the highest such process on each branch;
 * what runs under it is its own. Ranks that name a rank come first, by it; the others after
 * them, numbered by pid. Returns how many. */
int ranks_find(const struct report *r, const struct rank_hint *hints, int nr_hints,
	       struct job_ranks *out);

/* Analyses each rank found as a trainer of its own (its process the root, its descendants its
 * workers), names the straggler and the focus (the straggler, else the lowest rank), and fills
 * the summary. Returns 0 or -ENOMEM. */
int ranks_analyse(const struct report *r, struct job_ranks *job);

/* The threads of pid and of its descendants, copied into out (room for r->nr_threads);
 * returns how many. */
int ranks_subtree_threads(const struct report *r, pid_t pid, struct thread_result *out);

/* The job's summary and a line per rank (nothing without ranks); the "job" JSON object
 * (NULL without ranks). */
void ranks_print_text(FILE *out, const struct job_ranks *job);
struct json_object *ranks_json(const struct job_ranks *job);

#endif

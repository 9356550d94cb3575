/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* `pipeprof top`'s screen: what the last seconds measured, and one frame of it as text.
 * Pure: fed figures, writes a stream; unit-tested without root. */
#ifndef PIPEPROF_TOP_VIEW_H
#define PIPEPROF_TOP_VIEW_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include "classify.h"

/* Seconds of history each role's strip shows, one column a second. */
#define TOP_HISTORY 30
/* Seconds the verdict and the step rate are taken over: long enough that one slow batch does
 * not flip it, short enough to follow a job that changes. */
#define TOP_VERDICT_SECONDS 5

/* One second of one role: each state's share of the role's thread time. */
struct top_second {
	bool seen;			/* the role had a thread that second */
	double share[PP_NR_STATES];
};

struct top_role {
	int threads, processes;		/* in the last second */
	struct top_second hist[TOP_HISTORY];	/* oldest first: hist[TOP_HISTORY - 1] is the last */
};

struct top_view {
	pid_t pid;
	char comm[16];
	char cmdline[256];
	double elapsed_s;		/* since the attach */
	__u32 trainer_tid;		/* 0: not found yet */
	struct top_role roles[NR_ROLES];
	int seconds;			/* seconds measured so far */
	/* The analysis of the last TOP_VERDICT_SECONDS (fewer at first). */
	bool have_verdict;
	enum verdict verdict;
	enum pp_state verdict_state;	/* the state the verdict rests on */
	int verdict_seconds;
	char verdict_line[512];
	/* Steps (the trainer's backward passes) a second over verdict_seconds; < 0: none seen,
	 * steps_note says why. */
	double steps_per_s;
	char steps_note[160];
	bool target_exited;
	char failed[96];		/* why the job is not traced; "" when it is */
};

/* What the host's view says besides its jobs. */
struct top_jobs_frame {
	double elapsed_s;		/* since the first attach */
	int not_traced;			/* jobs found past the cap, not traced */
	int cap;			/* the most jobs traced at once */
	int rescan_s;			/* how often new jobs are looked for; 0: never */
};

/* Shifts role's history one second left and appends the second r measured. */
void top_push_second(struct top_role *role, const struct role_result *r);

/* The letter a state's time is drawn with in the strips and bars. */
char top_state_letter(enum pp_state s);

/*
 * Sums per-thread results of several seconds by thread id into out (room for the sum of
 * nr[]): each thread's states, wall time, GPU calls and GC; a thread takes the name and role
 * of its latest second, and is exited if it exited in any. Returns how many threads out holds.
 */
int top_merge_seconds(const struct thread_result *const *secs, const int *nr, int nr_secs,
		      struct thread_result *out);

/*
 * One frame, at most width columns and height rows. ansi: starts at the top-left corner,
 * clears what the last frame left, and colours the states; else plain lines, for a pipe.
 */
void top_view_render(FILE *out, const struct top_view *v, int width, int height, bool ansi);

/*
 * The host's jobs in one frame, as top_view_render() draws one: per job a header (PID, name,
 * steps a second, command line), its verdict and a row per role. Only whole jobs are drawn;
 * those that do not fit in height are counted on the last line.
 */
void top_view_render_jobs(FILE *out, const struct top_view *const *views, int n,
			  const struct top_jobs_frame *f, int width, int height, bool ansi);

#endif

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "proctree.h"
#include "ranks.h"
#include "report.h"
#include "unit.h"

/* A launcher (100) with two ranks: 200 (RANK=0) and 300 (RANK=1), whose DataLoader worker 301
 * inherited RANK=1; each rank's main thread is its trainer. */
static struct proc_result procs[] = {
	{ .pid = 100, .root = true },
	{ .pid = 200, .parent = 100 },
	{ .pid = 300, .parent = 100 },
	{ .pid = 301, .parent = 300 },
};

static struct thread_result th(__u32 tid, __u32 tgid, double running, double comm, double data)
{
	struct thread_result t = { .tid = tid, .tgid = tgid, .wall_ns = 1000000000 };

	t.ns[PP_RUNNING] = running * 1e9;
	t.ns[PP_COMM_WAIT] = comm * 1e9;
	t.ns[PP_DATA_WAIT] = data * 1e9;
	t.ns[PP_OTHER] = t.wall_ns - t.ns[PP_RUNNING] - t.ns[PP_COMM_WAIT] - t.ns[PP_DATA_WAIT];
	return t;
}

static void job(struct report *r, struct thread_result *threads, int n)
{
	memset(r, 0, sizeof(*r));
	r->root_pid = 100;
	r->procs = procs;
	r->nr_procs = sizeof(procs) / sizeof(procs[0]);
	r->threads = threads;
	r->nr_threads = n;
	r->input.root_pid = 100;
	r->input.threshold = 0.20;
	r->input.ncpus = 4;
	r->input.cpu_busy = 0.5;
	r->input.runnable_avg = 1;
}

TEST(test_ranks_under_a_launcher)
{
	struct thread_result threads[] = {
		th(100, 100, 0.0, 0, 0),		/* the launcher, asleep */
		th(200, 200, 0.55, 0.45, 0),		/* rank 0: waits for rank 1 */
		th(201, 200, 0.05, 0, 0),		/* rank 0's gloo thread */
		th(300, 300, 0.30, 0.05, 0.65),		/* rank 1: waits for its worker */
		th(301, 301, 0.95, 0, 0),		/* rank 1's worker */
	};
	struct rank_hint hints[] = { { 100, -1 }, { 200, 0 }, { 300, 1 }, { 301, 1 } };
	struct report r;
	struct job_ranks *j = calloc(1, sizeof(*j));
	struct thread_result sub[5];

	if (!CHECK(j != NULL))
		return;
	job(&r, threads, 5);
	/* The worker inherited RANK=1, but it is rank 1's own. */
	CHECK_EQ_INT(ranks_find(&r, hints, 4, j), 2);
	CHECK_EQ_INT(j->ranks[0].pid, 200);
	CHECK_EQ_INT(j->ranks[1].pid, 300);
	CHECK_EQ_INT(ranks_subtree_threads(&r, 300, sub), 2);
	CHECK_EQ_INT(ranks_subtree_threads(&r, 200, sub), 2);
	CHECK_EQ_INT(ranks_analyse(&r, j), 0);
	CHECK_EQ_INT(j->ranks[0].verdict, VERDICT_COMM);
	CHECK_EQ_INT(j->ranks[1].verdict, VERDICT_DATA_LOADING);
	CHECK_EQ_INT(j->ranks[1].workers, 1);
	CHECK_EQ_INT(j->straggler, 1);
	CHECK_EQ_INT(j->focus, 1);
	CHECK_MSG(strstr(j->summary, "rank 0 waits 45% in collectives (COMM_WAIT) for rank 1, "
			 "which is DATA-LOADING BOUND") != NULL, "%s", j->summary);
	free(j);
}

TEST(test_no_straggler_when_ranks_are_even)
{
	struct thread_result threads[] = {
		th(200, 200, 0.70, 0.30, 0),
		th(300, 300, 0.72, 0.28, 0),
	};
	struct rank_hint hints[] = { { 200, 0 }, { 300, 1 } };
	struct report r;
	struct job_ranks *j = calloc(1, sizeof(*j));

	if (!CHECK(j != NULL))
		return;
	job(&r, threads, 2);
	CHECK_EQ_INT(ranks_find(&r, hints, 2, j), 2);
	CHECK_EQ_INT(ranks_analyse(&r, j), 0);
	CHECK_EQ_INT(j->straggler, -1);
	CHECK_EQ_INT(j->focus, 0);
	CHECK(strstr(j->summary, "no rank waits on another") != NULL);
	free(j);
}

TEST(test_a_target_that_is_a_rank_has_none_below)
{
	struct thread_result threads[] = { th(100, 100, 1, 0, 0) };
	struct rank_hint hints[] = { { 100, 3 }, { 200, 3 }, { 300, 3 } };
	struct report r;
	struct job_ranks *j = calloc(1, sizeof(*j));

	if (!CHECK(j != NULL))
		return;
	job(&r, threads, 1);
	CHECK_EQ_INT(ranks_find(&r, hints, 3, j), 0);
	/* Nor without any variable. */
	CHECK_EQ_INT(ranks_find(&r, NULL, 0, j), 0);
	free(j);
}

TEST(test_rank_from_environment)
{
	static const char env[] = "PATH=/bin\0LOCAL_RANK=2\0RANK=5\0WORLD_SIZE=8";
	static const char local[] = "LOCAL_RANK=1\0HOME=/root";
	static const char none[] = "RANKS=3\0MY_RANK=4\0RANK=";

	CHECK_EQ_INT(proc_env_rank_text(env, sizeof(env)), 5);
	CHECK_EQ_INT(proc_env_rank_text(local, sizeof(local)), 1);
	CHECK_EQ_INT(proc_env_rank_text(none, sizeof(none)), -1);
	CHECK_EQ_INT(proc_env_rank_text("", 0), -1);
	CHECK_EQ_INT(proc_env_rank(PROCFS, 0x7fffffff), -1);
}

/* mp.spawn's ranks name no rank: they are known by their connections to each other. A
 * launcher (100), ranks 300 and 200 joined to each other, 301 rank 300's DataLoader worker,
 * which holds no connection. */
TEST(test_ranks_by_their_connections)
{
	struct thread_result threads[] = {
		th(200, 200, 0.55, 0.45, 0),
		th(300, 300, 0.30, 0.05, 0.65),
		th(301, 301, 0.95, 0, 0),
	};
	struct rank_hint hints[] = { { 100, -1, false }, { 300, -1, true }, { 200, -1, true },
				     { 301, -1, false } };
	struct report r;
	struct job_ranks *j = calloc(1, sizeof(*j));

	if (!CHECK(j != NULL))
		return;
	job(&r, threads, 3);
	CHECK_EQ_INT(ranks_find(&r, hints, 4, j), 2);
	/* Numbered by pid, and said to be. */
	CHECK_EQ_INT(j->ranks[0].pid, 200);
	CHECK_EQ_INT(j->ranks[0].rank, 0);
	CHECK_EQ_INT(j->ranks[1].pid, 300);
	CHECK_EQ_INT(j->ranks[1].rank, 1);
	CHECK(!j->ranks[0].rank_from_env && !j->ranks[1].rank_from_env);
	CHECK_EQ_INT(ranks_analyse(&r, j), 0);
	CHECK_EQ_INT(j->ranks[1].workers, 1);
	CHECK_EQ_INT(j->straggler, 1);
	CHECK_MSG(strstr(j->summary, "2 ranks (numbered by pid: no RANK in their environment") ==
		  j->summary, "%s", j->summary);
	/* A worker that joined its own rank's connections is still that rank's. */
	hints[3].joined = true;
	CHECK_EQ_INT(ranks_find(&r, hints, 4, j), 2);
	/* One process alone, joined to nothing else under the root, is no job of ranks. */
	hints[2].joined = false;
	hints[3].joined = false;
	CHECK_EQ_INT(ranks_find(&r, hints, 4, j), 0);
	/* Ranks that name theirs come first, by it; the rest after them, numbered by pid. */
	hints[2] = (struct rank_hint){ 200, 7, false };
	CHECK_EQ_INT(ranks_find(&r, hints, 4, j), 2);
	CHECK_EQ_INT(j->ranks[0].pid, 200);
	CHECK_EQ_INT(j->ranks[0].rank, 7);
	CHECK_EQ_INT(j->ranks[1].pid, 300);
	CHECK_EQ_INT(j->ranks[1].rank, 0);
	free(j);
}

/* What sched_waking may skip reading of a waker's process: only a live one with no rank. */
TEST(test_pid_kind)
{
	struct pp_proc worker = { .parent_tgid = 100 }, root = { .is_root = 1 };
	struct pp_proc ranked = { .parent_tgid = 100, .rank_tgid = 200 };
	struct pp_proc ranked_root = { .is_root = 1, .rank_tgid = 100 };
	struct pp_proc gone = { .parent_tgid = 100, .exit_ns = 5 }, gone_root = { .is_root = 1, .exit_ns = 5 };

	CHECK_EQ_INT(pp_pid_kind(&worker), PP_PID_PLAIN);
	CHECK_EQ_INT(pp_pid_kind(&root), PP_PID_ROOT);
	CHECK_EQ_INT(pp_pid_kind(&ranked), PP_PID_LOOKUP);
	CHECK_EQ_INT(pp_pid_kind(&ranked_root), PP_PID_LOOKUP);
	CHECK_EQ_INT(pp_pid_kind(&gone), PP_PID_LOOKUP);
	CHECK_EQ_INT(pp_pid_kind(&gone_root), PP_PID_LOOKUP);
	/* Every kind but 0 reads as followed to the programs' pid_tracked(). */
	CHECK(PP_PID_PLAIN && PP_PID_LOOKUP && PP_PID_ROOT && !PP_PID_UNTRACKED);
}

int main(void)
{
	RUN_TEST(test_pid_kind);
	RUN_TEST(test_ranks_under_a_launcher);
	RUN_TEST(test_no_straggler_when_ranks_are_even);
	RUN_TEST(test_a_target_that_is_a_rank_has_none_below);
	RUN_TEST(test_rank_from_environment);
	RUN_TEST(test_ranks_by_their_connections);
	return unit_summary();
}

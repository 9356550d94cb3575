// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ranks.h"
#include "report.h"
#include <json-c/json.h>

static const struct proc_result *proc_of(const struct report *r, pid_t pid)
{
	for (int i = 0; i < r->nr_procs; i++)
		if (r->procs[i].pid == pid)
			return &r->procs[i];
	return NULL;
}

/* Whether pid is ancestor or lies under it; the walk is bounded, as a parent may be a reused
 * pid that leads anywhere. */
static bool under(const struct report *r, pid_t pid, pid_t ancestor)
{
	for (int depth = 0; depth < 64 && pid > 0; depth++) {
		const struct proc_result *p;

		if (pid == ancestor)
			return true;
		p = proc_of(r, pid);
		if (!p || p->root)
			return false;
		pid = p->parent;
	}
	return false;
}

static const struct rank_hint *hint_of(const struct rank_hint *hints, int nr, pid_t pid)
{
	for (int i = 0; i < nr; i++)
		if (hints[i].pid == pid)
			return &hints[i];
	return NULL;
}

static bool rank_like(const struct rank_hint *hints, int nr, pid_t pid)
{
	const struct rank_hint *h = hint_of(hints, nr, pid);

	return h && (h->rank >= 0 || h->joined);
}

static int by_rank(const void *a, const void *b)
{
	const struct rank_result *x = a, *y = b;

	if (x->rank_from_env != y->rank_from_env)
		return x->rank_from_env ? -1 : 1;
	if (x->rank_from_env && x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

int ranks_find(const struct report *r, const struct rank_hint *hints, int nr_hints,
	       struct job_ranks *out)
{
	const struct rank_hint *root = hint_of(hints, nr_hints, r->root_pid);
	int unnamed = 0;

	memset(out, 0, sizeof(*out));
	out->straggler = out->focus = -1;
	/* The root names a rank itself: it is the trainer, as without any rank. */
	if (root && root->rank >= 0)
		return 0;
	for (int i = 0; i < r->nr_procs && out->nr < MAX_RANKS; i++) {
		const struct proc_result *p = &r->procs[i];
		const struct rank_hint *h = hint_of(hints, nr_hints, p->pid);
		bool nested = false;

		if (p->root || !rank_like(hints, nr_hints, p->pid))
			continue;
		/* A process under another rank-like one is that rank's own (a worker a rank's
		 * code started with the variables it inherited). */
		const struct proc_result *q = proc_of(r, p->parent);

		for (int depth = 0; q && !q->root && !nested && depth < 64; depth++) {
			nested = rank_like(hints, nr_hints, q->pid);
			q = proc_of(r, q->parent);
		}
		if (nested)
			continue;
		out->ranks[out->nr].pid = p->pid;
		out->ranks[out->nr].rank = h->rank;
		out->ranks[out->nr].rank_from_env = h->rank >= 0;
		out->nr++;
	}
	/* One rank alone is a trainer under a wrapper, not a distributed job. */
	if (out->nr < 2 && !(out->nr == 1 && out->ranks[0].rank_from_env)) {
		out->nr = 0;
		return 0;
	}
	qsort(out->ranks, out->nr, sizeof(out->ranks[0]), by_rank);
	for (int i = 0; i < out->nr; i++)
		if (!out->ranks[i].rank_from_env)
			out->ranks[i].rank = unnamed++;
	return out->nr;
}

int ranks_subtree_threads(const struct report *r, pid_t pid, struct thread_result *out)
{
	int n = 0;

	for (int i = 0; i < r->nr_threads; i++)
		if (under(r, r->threads[i].tgid, pid))
			out[n++] = r->threads[i];
	return n;
}

static void append(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void append(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strlen(buf);
	va_list ap;

	if (len >= size)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

int ranks_pick_straggler(const double *comm, int n, double threshold, double *others_mean)
{
	int least = 0;
	double others = 0;

	if (n < 2)
		return -1;
	for (int i = 1; i < n; i++)
		if (comm[i] < comm[least])
			least = i;
	for (int i = 0; i < n; i++) {
		if (i == least)
			continue;
		if (comm[i] < threshold || comm[i] < comm[least] + STRAGGLER_MARGIN)
			return -1;
		others += comm[i];
	}
	if (others_mean)
		*others_mean = others / (n - 1);
	return least;
}

static void name_straggler(struct job_ranks *job, double threshold)
{
	double comm[MAX_RANKS];

	for (int i = 0; i < job->nr; i++)
		comm[i] = job->ranks[i].share[PP_COMM_WAIT];
	job->straggler = ranks_pick_straggler(comm, job->nr, threshold, &job->others_comm);
}

static void summarise(struct job_ranks *job)
{
	const struct rank_result *s;
	int shown = 0;

	snprintf(job->summary, sizeof(job->summary), "%d ranks", job->nr);
	for (int i = 0; i < job->nr; i++)
		if (!job->ranks[i].rank_from_env) {
			append(job->summary, sizeof(job->summary), " (%s by pid: no RANK in their "
			       "environment, found by their connections to each other)",
			       i ? "the last numbered" : "numbered");
			break;
		}
	if (job->straggler < 0) {
		append(job->summary, sizeof(job->summary), "; no rank waits on another in its "
		       "collectives over the threshold: the report below is rank %d's",
		       job->ranks[job->focus].rank);
		return;
	}
	s = &job->ranks[job->straggler];
	append(job->summary, sizeof(job->summary), "; rank%s ", job->nr > 2 ? "s" : "");
	for (int i = 0; i < job->nr; i++)
		if (i != job->straggler)
			append(job->summary, sizeof(job->summary), "%s%d", shown++ ? "," : "",
			       job->ranks[i].rank);
	append(job->summary, sizeof(job->summary), " wait%s %.0f%% in collectives (COMM_WAIT) "
	       "for rank %d, which is %s (", job->nr > 2 ? "" : "s", 100 * job->others_comm,
	       s->rank, verdict_name(s->verdict));
	shown = 0;
	for (int st = 0; st < PP_NR_STATES; st++)
		if (s->share[st] >= 0.05)
			append(job->summary, sizeof(job->summary), "%s%s %.0f%%", shown++ ? ", " : "",
			       state_name(st), 100 * s->share[st]);
	append(job->summary, sizeof(job->summary), "): the report below is rank %d's", s->rank);
}

int ranks_analyse(const struct report *r, struct job_ranks *job)
{
	struct thread_result *sub;
	struct analysis *an;
	int err = 0;

	if (!job->nr)
		return 0;
	sub = calloc(r->nr_threads ? r->nr_threads : 1, sizeof(*sub));
	an = malloc(sizeof(*an));
	if (!sub || !an) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (int i = 0; i < job->nr; i++) {
		struct rank_result *rk = &job->ranks[i];
		struct analysis_input in = r->input;
		int n = ranks_subtree_threads(r, rk->pid, sub);
		const struct thread_result *tr;

		in.root_pid = rk->pid;
		in.tid_override = 0;
		analyse(sub, n, &in, an);
		rk->verdict = an->verdict;
		rk->workers = an->roles[ROLE_WORKER].processes;
		snprintf(rk->verdict_line, sizeof(rk->verdict_line), "%s", an->verdict_line);
		if (an->trainer_index < 0)
			continue;
		tr = &sub[an->trainer_index];
		rk->trainer_tid = tr->tid;
		for (int s = 0; s < PP_NR_STATES; s++)
			rk->share[s] = tr->wall_ns ? (double)tr->ns[s] / tr->wall_ns : 0;
	}
	name_straggler(job, r->input.threshold);
	job->focus = job->straggler >= 0 ? job->straggler : 0;
	summarise(job);
cleanup:
	free(sub);
	free(an);
	return err;
}

void ranks_print_text(FILE *out, const struct job_ranks *job)
{
	if (!job || !job->nr)
		return;
	fprintf(out, "Job: %s\n", job->summary);
	for (int i = 0; i < job->nr; i++) {
		const struct rank_result *rk = &job->ranks[i];
		int shown = 0;

		fprintf(out, "  rank %-3d pid %-7d %-22s", rk->rank, (int)rk->pid,
			verdict_name(rk->verdict));
		for (int s = 0; s < PP_NR_STATES; s++)
			if (rk->share[s] >= 0.005)
				fprintf(out, "%s%s %.1f%%", shown++ ? ", " : "", state_name(s),
					100 * rk->share[s]);
		fprintf(out, " (%d worker process%s)%s\n", rk->workers, rk->workers == 1 ? "" : "es",
			i == job->straggler ? "  <- the straggler" : "");
	}
	fputc('\n', out);
}

json_object *ranks_json(const struct job_ranks *job)
{
	json_object *o, *arr;

	if (!job || !job->nr)
		return NULL;
	o = json_object_new_object();
	arr = json_object_new_array();
	for (int i = 0; i < job->nr; i++) {
		const struct rank_result *rk = &job->ranks[i];
		json_object *e = json_object_new_object(), *st = json_object_new_object();

		json_object_object_add(e, "rank", json_object_new_int(rk->rank));
		json_object_object_add(e, "rank_from_env", json_object_new_boolean(rk->rank_from_env));
		json_object_object_add(e, "pid", json_object_new_int(rk->pid));
		json_object_object_add(e, "trainer_tid", rk->trainer_tid ?
				       json_object_new_int64(rk->trainer_tid) : NULL);
		json_object_object_add(e, "workers", json_object_new_int(rk->workers));
		json_object_object_add(e, "verdict", json_object_new_string(verdict_name(rk->verdict)));
		json_object_object_add(e, "verdict_line", json_object_new_string(rk->verdict_line));
		for (int s = 0; s < PP_NR_STATES; s++)
			json_object_object_add(st, state_name(s), json_object_new_double(rk->share[s]));
		json_object_object_add(e, "states", st);
		json_object_array_add(arr, e);
	}
	json_object_object_add(o, "ranks", arr);
	json_object_object_add(o, "straggler_rank", job->straggler >= 0 ?
			       json_object_new_int(job->ranks[job->straggler].rank) : NULL);
	json_object_object_add(o, "others_comm_wait", job->straggler >= 0 ?
			       json_object_new_double(job->others_comm) : NULL);
	json_object_object_add(o, "focus_rank", job->focus >= 0 ?
			       json_object_new_int(job->ranks[job->focus].rank) : NULL);
	json_object_object_add(o, "summary", json_object_new_string(job->summary));
	return o;
}

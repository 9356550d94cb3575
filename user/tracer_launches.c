// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The kernel launch probes, all along or in bursts (launch_sample.h says when). Each library's
 * launch probes are kept apart from its other probes, so that they alone come off between
 * bursts. launch_epoch (state.bpf.c) is odd while all of them are attached: it turns even
 * before the first comes off and odd again only once the last is back, so a step whose two
 * boundaries carry the same odd epoch had every launch of it probed (steps.c).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "pipeprof.h"
#include "pipeprof.skel.h"
#include "tracer.h"

static void set_epoch(struct tracer *t, __u32 epoch)
{
	__atomic_store_n(&t->skel->bss->launch_epoch, epoch, __ATOMIC_SEQ_CST);
}

/* Returns how many of lp's specs are attached now. */
static int attach_set(struct tracer *t, struct launch_probes *lp)
{
	int ok = 0;

	if (t->uprobe_multi)
		lp->nr_fds = uprobe_multi_attach_all(lp->specs, lp->nr, lp->pid, lp->path, lp->fds,
						     MAX_LIB_PROBES);
	else
		tracer_attach_singly(lp->specs, lp->nr, lp->pid, lp->path, lp->links, &lp->nr_links);
	for (int i = 0; i < lp->nr; i++)
		ok += lp->specs[i].attached;
	return ok;
}

static void detach_set(struct launch_probes *lp)
{
	for (int i = 0; i < lp->nr_links; i++)
		bpf_link__destroy(lp->links[i]);
	for (int i = 0; i < lp->nr_fds; i++)
		close(lp->fds[i]);
	lp->nr_links = lp->nr_fds = 0;
}

/* The launch sets the detacher thread closes. Nothing else touches them until it is joined:
 * the next burst and the tracer's close join it first. */
struct detach_batch {
	int nr;
	struct launch_probes *sets[];
};

/* A link's close waits out a grace period (~40 ms each here): one process's pair took 75 ms,
 * and a job of many processes would keep the tick from its ring buffers for a second. */
static void *close_batch(void *arg)
{
	struct detach_batch *b = arg;

	for (int i = 0; i < b->nr; i++)
		detach_set(b->sets[i]);
	free(b);
	return NULL;
}

/* Waits for the links of the last pause to be gone: none may still fire beside new ones. */
static void join_detacher(struct tracer *t)
{
	if (!t->launch_detaching)
		return;
	pthread_join(t->launch_detacher, NULL);
	t->launch_detaching = false;
}

/* Every launch link off: in a thread of its own, else here. */
static void detach_all(struct tracer *t)
{
	struct detach_batch *b;

	join_detacher(t);
	b = malloc(sizeof(*b) + t->nr_attached * sizeof(b->sets[0]));
	if (!b) {
		for (int i = 0; i < t->nr_attached; i++)
			if (t->attached[i].launch)
				detach_set(t->attached[i].launch);
		return;
	}
	b->nr = 0;
	for (int i = 0; i < t->nr_attached; i++)
		if (t->attached[i].launch)
			b->sets[b->nr++] = t->attached[i].launch;
	if (pthread_create(&t->launch_detacher, NULL, close_batch, b))
		close_batch(b);
	else
		t->launch_detaching = true;
}

void tracer_launches_add(struct tracer *t, struct tracer_lib_attach *a, struct uprobe_spec *specs,
			 const int *idx, int n, const char *path)
{
	struct launch_probes *lp = calloc(1, sizeof(*lp));

	if (!lp) {
		for (int k = 0; k < n; k++)
			specs[idx[k]].err = -ENOMEM;
		return;
	}
	for (int k = 0; k < n; k++)
		lp->specs[k] = specs[idx[k]];
	lp->nr = n;
	lp->pid = a->pid;
	snprintf(lp->path, sizeof(lp->path), "%s", path);
	a->launch = lp;
	if (t->launches_on) {
		attach_set(t, lp);
		/* A library probed in the middle of a burst: the steps it spans missed the
		 * launches made through it before now. */
		if (t->skel->bss->launch_epoch & 1)
			set_epoch(t, t->skel->bss->launch_epoch + 2);
	} else {
		/* In a pause: attached at the next burst, and said to be probed. */
		for (int k = 0; k < n; k++)
			lp->specs[k].attached = true;
	}
	for (int k = 0; k < n; k++) {
		specs[idx[k]].attached = lp->specs[k].attached;
		specs[idx[k]].err = lp->specs[k].err;
	}
}

static bool launches_probed(const struct tracer *t)
{
	return t->steps || t->hist_kinds & 1u << PP_HK_LAUNCH;
}

void tracer_launches_start(struct tracer *t)
{
	if (!launches_probed(t))
		return;
	set_epoch(t, 1);
	if (t->launches_sampled)
		launch_sampler_init(&t->launch_sampler, monotonic_ns(),
				    tracer_counter(t, PP_CNT_LAUNCH_HITS), t->probe_steps_seen);
}

void tracer_launches_tick(struct tracer *t)
{
	__u32 epoch = t->skel->bss->launch_epoch;
	__u64 t0 = monotonic_ns();

	/* Epoch 0: not started yet. */
	if (!t->launches_sampled || !epoch)
		return;
	t->launch_sampler.long_bursts = !t->probe_steps_seen && t->data_steps_seen;
	switch (launch_sampler_tick(&t->launch_sampler, monotonic_ns(),
				    tracer_counter(t, PP_CNT_LAUNCH_HITS), t->probe_steps_seen)) {
	case LAUNCH_KEEP:
		break;
	case LAUNCH_DETACH:
		set_epoch(t, epoch + 1);
		detach_all(t);
		t->launches_on = false;
		if (t->verbose)
			fprintf(stderr, "pipeprof: launch probes off for %.2f s (%.1f ms to detach)\n",
				(t->launch_sampler.resume_ns - t->launch_sampler.since_ns) / 1e9,
				(monotonic_ns() - t0) / 1e6);
		break;
	case LAUNCH_ATTACH:
		join_detacher(t);
		for (int i = 0; i < t->nr_attached; i++) {
			struct launch_probes *lp = t->attached[i].launch;

			if (!lp || attach_set(t, lp) == lp->nr)
				continue;
			/* A process gone: nothing to count there, ever again. */
			if (kill(lp->pid, 0) && errno == ESRCH) {
				detach_set(lp);
				free(lp);
				t->attached[i].launch = NULL;
				continue;
			}
			t->launch_attach_failures++;
		}
		t->launches_on = true;
		set_epoch(t, (epoch + 1) | 1);
		if (t->verbose)
			fprintf(stderr, "pipeprof: launch probes on again (%.1f ms to attach)\n",
				(monotonic_ns() - t0) / 1e6);
		break;
	}
}

void tracer_launches_close(struct tracer *t)
{
	detach_all(t);
	join_detacher(t);
	for (int i = 0; i < t->nr_attached; i++) {
		free(t->attached[i].launch);
		t->attached[i].launch = NULL;
	}
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The CPU samples' and the trainer's waits' records, taken from their ring buffers at each tick:
 * their stacks kept once each (t->stacks), the waits summed by key.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "intern.h"
#include "pipeprof.h"
#include "tracer.h"
#include "tracer_pyrecords.h"
#include "grow.h"

/* Drops the empty slots of the walk (C-stack shim frames); returns how many are left. */
static int compact_codes(uint64_t *code, int depth)
{
	int n = 0;

	for (int d = 0; d < depth; d++)
		if (code[d])
			code[n++] = code[d];
	return n;
}

/* The set's copy of a walk's first depth slots, shim frames dropped; *depth becomes what is
 * left. False when out of memory. */
static bool intern_codes(struct tracer *t, const __u64 *walked, __u32 *depth,
			 const uint64_t **out)
{
	uint64_t code[PP_PY_MAX_DEPTH];
	int n = *depth > PP_PY_MAX_DEPTH ? PP_PY_MAX_DEPTH : (int)*depth;

	memcpy(code, walked, n * sizeof(code[0]));
	n = compact_codes(code, n);
	*depth = n;
	*out = intern(&t->stacks, code, n * sizeof(code[0]));
	return !n || *out;
}

/* The sums of key's waits, zeroed on its first sight; NULL when they cannot be kept. The cap
 * is on distinct keys: past it, only the keys held add up. */
static struct tracer_wait *wait_sums(struct tracer *t, const struct tracer_wait_key *key)
{
	bool fresh = false;
	long i;

	if (t->nr_waits >= MAX_WAIT_KEYS) {
		i = intern_find(&t->wait_keys, key, sizeof(*key));
	} else {
		if (grow_array(&t->waits, &t->cap_waits, t->nr_waits, sizeof(*t->waits), 64))
			return NULL;
		i = intern_index(&t->wait_keys, key, sizeof(*key), &fresh);
	}
	if (i < 0 || i >= t->nr_waits + fresh)
		return NULL;
	if (fresh)
		t->waits[t->nr_waits++] = (struct tracer_wait){ .key = *key };
	return &t->waits[i];
}

int tracer_on_wait(void *ctx, void *data, size_t size)
{
	struct tracer *t = ctx;
	const struct pp_wait_stack *rec = data;
	struct tracer_wait_key key;
	struct tracer_wait *w;
	__u32 depth, waker_depth;

	/* The header and the frames used (pystack.bpf.c's py_wait_ends()). */
	if (size < PP_WAIT_RECORD_HEADER)
		return 0;
	depth = rec->depth;
	waker_depth = rec->waker_tid ? rec->waker_depth : 0;
	if (depth > PP_PY_MAX_DEPTH || waker_depth > PP_PY_MAX_DEPTH ||
	    size < PP_WAIT_RECORD_BYTES(depth, waker_depth))
		return 0;
	key = (struct tracer_wait_key){ .tid = rec->tid, .tgid = rec->tgid, .cause = rec->cause,
					.waker_tid = rec->waker_tid, .waker_tgid = rec->waker_tgid };
	if (!intern_codes(t, rec->frames, &depth, &key.code) ||
	    !intern_codes(t, rec->frames + rec->depth, &waker_depth, &key.waker_code)) {
		t->waits_over_cap++;
		return 0;
	}
	key.depth = depth;
	key.waker_depth = waker_depth;
	w = wait_sums(t, &key);
	if (!w) {
		t->waits_over_cap++;
		return 0;
	}
	w->count++;
	w->ns += rec->wait_ns;
	w->us += rec->wait_ns / 1000;
	return 0;
}

/* s as kept; false when out of memory. */
static bool sample_of(struct tracer *t, const struct pp_sample *s, struct tracer_sample *out)
{
	__u32 depth = s->depth;

	*out = (struct tracer_sample){ .tid = s->tid, .tgid = s->tgid,
				       .kernel = !!s->kernel, .py = (uint8_t)s->py,
				       .truncated = !!s->truncated,
				       .ustack_depth = s->ustack_depth > PP_USTACK_MAX_DEPTH ?
						       PP_USTACK_MAX_DEPTH : s->ustack_depth };
	if (!intern_codes(t, s->code, &depth, &out->code))
		return false;
	out->depth = depth;
	if (out->ustack_depth) {
		out->leaf = s->ustack[0];
		out->callers = intern(&t->stacks, s->ustack + 1,
				      (out->ustack_depth - 1) * sizeof(*out->callers));
		if (out->ustack_depth > 1 && !out->callers)
			return false;
	}
	return true;
}

int tracer_on_sample(void *ctx, void *data, size_t size)
{
	struct tracer *t = ctx;
	const struct pp_sample *s = data;
	struct tracer_sample kept;
	long slot;

	if (size < sizeof(*s))
		return 0;
	slot = reservoir_slot(&t->sample_draw, SAMPLES_KEPT);
	if (slot < 0)
		return 0;	/* not drawn */
	/* Appended while the draw fills (where memory ran short, at the end of those held). */
	if (slot >= t->nr_samples) {
		slot = t->nr_samples;
		if (grow_array(&t->samples, &t->cap_samples, t->nr_samples, sizeof(*t->samples),
			       1024)) {
			t->samples_over_cap++;
			return 0;
		}
	} else if (grow_array(&t->samples_redrawn, &t->cap_samples_redrawn,
			      t->nr_samples_redrawn, sizeof(*t->samples_redrawn), 256)) {
		t->samples_over_cap++;
		return 0;
	}
	if (!sample_of(t, s, &kept)) {
		t->samples_over_cap++;
		return 0;
	}
	t->samples[slot] = kept;
	if (slot == t->nr_samples)
		t->nr_samples++;
	else
		t->samples_redrawn[t->nr_samples_redrawn++] = (int)slot;
	return 0;
}

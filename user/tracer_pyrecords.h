/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The CPU samples and the trainer's waits as the tracer keeps them between the ring buffers
 * (tracer_pyrecords.c takes them in) and the close (tracer_pystack.c names them).
 */
#ifndef PIPEPROF_TRACER_PYRECORDS_H
#define PIPEPROF_TRACER_PYRECORDS_H

#include <stddef.h>
#include <stdint.h>

/* Samples kept: a uniform draw of the window's past it (reservoir.h), 1.3 MB here and 1.6 MB of
 * named samples at the close; a role's share of 10% is then known within 0.5 points (three
 * standard deviations) whatever the window's length. */
#define SAMPLES_KEPT 32768
/* Distinct waits kept: past them, only the keys held add up. */
#define MAX_WAIT_KEYS 200000

struct tracer_sample {
	uint32_t tid, tgid;
	uint8_t kernel, py;
	uint16_t depth;
	uint8_t truncated;		/* the Python stack was deeper than PP_PY_MAX_DEPTH */
	uint16_t ustack_depth;		/* the leaf and its callers */
	uint64_t leaf;			/* the user-mode instruction sampled */
	/* Both in t->stacks, one copy of each distinct array. The leaf is not among the
	 * callers: an instruction pointer differs from one sample to the next, and with it
	 * every sample's array did (~100 bytes a sample). */
	const uint64_t *code;
	const uint64_t *callers;	/* return addresses as the walk found them */
};

/* What tells the trainer's waits apart: who waited, who woke it, and both stacks (compacted:
 * no shim frames), the arrays' copies in t->stacks compared by address. No padding: its bytes
 * are the key of t->wait_keys. */
struct tracer_wait_key {
	uint32_t tid, tgid;
	uint32_t waker_tid, waker_tgid;
	uint32_t cause;
	uint16_t depth, waker_depth;
	const uint64_t *code, *waker_code;
};
_Static_assert(sizeof(struct tracer_wait_key) == 40, "tracer_wait_key has padding");

/* The waits of one key, summed as they come: a DataLoader trainer waits ~240 times a second at
 * a handful of sites, and a record kept per wait (with the report's copy and the sites' arrays
 * sized by it) was ~14 MB of a 5-minute report's peak. */
struct tracer_wait {
	struct tracer_wait_key key;
	uint64_t count, ns;
	uint64_t us;	/* each wait's whole microseconds, summed: the folded output's weight */
};

/* Ring buffer callbacks, ctx the tracer: a pp_sample, a wait's record (pp_wait_stack). */
int tracer_on_sample(void *ctx, void *data, size_t size);
int tracer_on_wait(void *ctx, void *data, size_t size);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef PIPEPROF_INTERN_H
#define PIPEPROF_INTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One copy of each distinct array: a trainer's waits and a job's CPU samples repeat a few
 * stacks thousands of times, and a copy each grew the tracer by ~1 KB a wait (44 MB of peak RSS
 * after a minute of a DataLoader job). A copy lives as long as the set.
 */
struct intern_slot {
	uint64_t hash;
	size_t bytes;
	void *data;		/* NULL: an empty slot */
	size_t index;		/* distinct arrays before it (intern_index) */
};

struct intern_set {
	struct intern_slot *slots;
	size_t cap, used;	/* cap: 0 or a power of two */
	size_t bytes;		/* held by the copies */
};

/* 64-bit FNV-1a of data, continuing from h (FNV1A_SEED to start): the set's hash, and the one
 * the attach cache's entry names are made of. */
#define FNV1A_SEED 0xcbf29ce484222325ULL
uint64_t fnv1a(uint64_t h, const void *data, size_t len);

/* The set's copy of data[0..bytes), made on its first sight; NULL for bytes 0, or when out of
 * memory (errno ENOMEM). */
const void *intern(struct intern_set *s, const void *data, size_t bytes);
/* The same, as the copy's ordinal in the order of first sight (0 for the first): an index into
 * the caller's array of what it keeps per distinct array (the trainer's waits, summed by their
 * key). *fresh says this call made the copy. -EINVAL for 0 bytes, -ENOMEM when out of
 * memory. */
long intern_index(struct intern_set *s, const void *data, size_t bytes, bool *fresh);
/* data's ordinal where the set holds a copy of it, else -ENOENT: nothing is added. */
long intern_find(const struct intern_set *s, const void *data, size_t bytes);
void intern_free(struct intern_set *s);

#endif

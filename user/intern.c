// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "intern.h"

uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

static struct intern_slot *slot_of(struct intern_slot *slots, size_t cap, uint64_t hash,
				   const void *data, size_t bytes)
{
	for (size_t i = hash & (cap - 1);; i = (i + 1) & (cap - 1)) {
		struct intern_slot *slot = &slots[i];

		if (!slot->data || (slot->hash == hash && slot->bytes == bytes &&
				    !memcmp(slot->data, data, bytes)))
			return slot;
	}
}

/* Kept at most half full, so that a probe ends soon and always finds an empty slot. */
static int grow(struct intern_set *s)
{
	size_t cap = s->cap ? 2 * s->cap : 64;
	struct intern_slot *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++) {
		const struct intern_slot *old = &s->slots[i];

		if (old->data)
			*slot_of(slots, cap, old->hash, old->data, old->bytes) = *old;
	}
	free(s->slots);
	s->slots = slots;
	s->cap = cap;
	return 0;
}

/* The slot holding data's copy, made on its first sight (*fresh); NULL when out of memory. */
static struct intern_slot *intern_slot(struct intern_set *s, const void *data, size_t bytes,
				       bool *fresh)
{
	struct intern_slot *slot;
	uint64_t hash;

	*fresh = false;
	if (2 * (s->used + 1) > s->cap && grow(s))
		return NULL;
	/* Stacks differ in a few words, which every byte of FNV-1a mixes in. */
	hash = fnv1a(FNV1A_SEED, data, bytes);
	slot = slot_of(s->slots, s->cap, hash, data, bytes);
	if (slot->data)
		return slot;
	slot->data = malloc(bytes);
	if (!slot->data)
		return NULL;
	memcpy(slot->data, data, bytes);
	slot->hash = hash;
	slot->bytes = bytes;
	slot->index = s->used++;
	s->bytes += bytes;
	*fresh = true;
	return slot;
}

const void *intern(struct intern_set *s, const void *data, size_t bytes)
{
	struct intern_slot *slot;
	bool fresh;

	if (!bytes)
		return NULL;
	slot = intern_slot(s, data, bytes, &fresh);
	if (!slot) {
		errno = ENOMEM;
		return NULL;
	}
	return slot->data;
}

long intern_index(struct intern_set *s, const void *data, size_t bytes, bool *fresh)
{
	struct intern_slot *slot;

	*fresh = false;
	if (!bytes)
		return -EINVAL;
	slot = intern_slot(s, data, bytes, fresh);
	return slot ? (long)slot->index : -ENOMEM;
}

long intern_find(const struct intern_set *s, const void *data, size_t bytes)
{
	const struct intern_slot *slot;

	if (!bytes || !s->cap)
		return -ENOENT;
	slot = slot_of(s->slots, s->cap, fnv1a(FNV1A_SEED, data, bytes), data, bytes);
	return slot->data ? (long)slot->index : -ENOENT;
}

void intern_free(struct intern_set *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slots[i].data);
	free(s->slots);
	*s = (struct intern_set){ 0 };
}

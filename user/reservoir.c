// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "reservoir.h"

static uint64_t next_random(struct reservoir *r)
{
	uint64_t x = r->rng ? r->rng : 0x9e3779b97f4a7c15ULL;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->rng = x;
	return x * 0x2545f4914f6cdd1dULL;
}

long reservoir_slot(struct reservoir *r, long cap)
{
	uint64_t k = r->seen++, j;

	if (cap <= 0)
		return -1;
	if (k < (uint64_t)cap)
		return (long)k;
	/* The modulo's bias is k / 2^64: below 2^-28 for 2^36 samples, a day at 1000 Hz on 800
	 * CPUs. */
	j = next_random(r) % (k + 1);
	return j < (uint64_t)cap ? (long)j : -1;
}

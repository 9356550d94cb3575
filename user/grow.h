/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef PIPEPROF_GROW_H
#define PIPEPROF_GROW_H

#include <stddef.h>

/*
 * Room for element nr of an array that grows by doubling: items is the address of the array's
 * pointer, *cap how many elements of size bytes it holds (0: none yet, first_cap on the first
 * growth). Returns 0 with at least nr + 1 elements allocated, or -ENOMEM (also where the size
 * would overflow) with the array and *cap as they were.
 *
 *	if (grow_array(&t->samples, &t->cap_samples, t->nr_samples, sizeof(*t->samples), 1024))
 *		return -ENOMEM;
 *	t->samples[t->nr_samples++] = sample;
 */
int grow_array(void *items, int *cap, int nr, size_t size, int first_cap);

#endif

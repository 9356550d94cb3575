// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The arrays' append-with-doubling (grow.c). */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include "grow.h"
#include "unit.h"

struct item {
	uint64_t a, b;
};

/* Appends keep every element, allocate from first_cap, and double only when full. */
TEST(test_appends_double)
{
	struct item *items = NULL;
	int nr = 0, cap = 0;

	for (int i = 0; i < 1000; i++) {
		CHECK_EQ_INT(grow_array(&items, &cap, nr, sizeof(*items), 16), 0);
		CHECK(cap > nr);
		items[nr++] = (struct item){ .a = i, .b = 3 * i };
	}
	CHECK_EQ_INT(cap, 1024);
	for (int i = 0; i < nr; i++)
		CHECK(items[i].a == (uint64_t)i && items[i].b == 3 * (uint64_t)i);
	/* Room left: nothing moves. */
	struct item *before = items;

	CHECK_EQ_INT(grow_array(&items, &cap, 1000, sizeof(*items), 16), 0);
	CHECK(items == before && cap == 1024);
	free(items);
}

/* A first growth past first_cap doubles until nr fits; an array already allocated doubles its
 * own size, whatever first_cap says. */
TEST(test_first_and_later_growths)
{
	char *bytes = NULL;
	int cap = 0;

	CHECK_EQ_INT(grow_array(&bytes, &cap, 40, 1, 16), 0);
	CHECK_EQ_INT(cap, 64);
	CHECK_EQ_INT(grow_array(&bytes, &cap, 64, 1, 1000), 0);
	CHECK_EQ_INT(cap, 128);
	free(bytes);
}

/* A size that would overflow, or nonsense, leaves the array as it was. */
TEST(test_overflow_and_bad_input)
{
	uint64_t *words = NULL;
	int cap = 0;

	CHECK_EQ_INT(grow_array(&words, &cap, 0, sizeof(*words), 4), 0);
	uint64_t *kept = words;

	words[0] = 7;
	cap = INT_MAX / 2 + 1;	/* as if that many were allocated: doubling would pass INT_MAX */
	CHECK_EQ_INT(grow_array(&words, &cap, INT_MAX / 2 + 1, sizeof(*words), 4), -ENOMEM);
	CHECK(words == kept && cap == INT_MAX / 2 + 1 && words[0] == 7);
	cap = 4;
	CHECK_EQ_INT(grow_array(&words, &cap, 4, SIZE_MAX / 4, 4), -ENOMEM);
	CHECK(words == kept && cap == 4);
	CHECK_EQ_INT(grow_array(&words, &cap, -1, sizeof(*words), 4), -EINVAL);
	CHECK_EQ_INT(grow_array(&words, &cap, 0, 0, 4), -EINVAL);
	CHECK_EQ_INT(grow_array(&words, &cap, 0, sizeof(*words), 0), -EINVAL);
	CHECK(words == kept);
	free(words);
}

int main(void)
{
	RUN_TEST(test_appends_double);
	RUN_TEST(test_first_and_later_growths);
	RUN_TEST(test_overflow_and_bad_input);
	return unit_summary();
}

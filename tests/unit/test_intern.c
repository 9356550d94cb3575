// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* One copy of each distinct array (intern.c): the tracer's samples and waits share them. */
#include <errno.h>
#include <stdlib.h>
#include "intern.h"
#include "unit.h"

TEST(test_one_copy_each)
{
	struct intern_set set = { 0 };
	uint64_t a[3] = { 1, 2, 3 }, b[3] = { 1, 2, 4 }, again[3] = { 1, 2, 3 };
	const void *pa = intern(&set, a, sizeof(a)), *pb = intern(&set, b, sizeof(b));

	CHECK(pa && pb && pa != a && pa != pb);
	CHECK(!memcmp(pa, a, sizeof(a)) && !memcmp(pb, b, sizeof(b)));
	/* Same bytes, same copy; a prefix is an array of its own. */
	CHECK(intern(&set, again, sizeof(again)) == pa);
	CHECK(intern(&set, a, 2 * sizeof(a[0])) != pa);
	CHECK_EQ_INT(set.used, 3);
	CHECK_EQ_INT(set.bytes, 2 * sizeof(a) + 2 * sizeof(a[0]));
	/* The caller's array may change after: the copy does not. */
	a[0] = 99;
	CHECK(((const uint64_t *)pa)[0] == 1);
	CHECK(!intern(&set, a, 0));
	intern_free(&set);
	CHECK(!set.slots && !set.cap && !set.used);
}

/* Past many growths every copy is still found, and distinct arrays stay distinct. */
TEST(test_growth_keeps_every_copy)
{
	struct intern_set set = { 0 };
	const void **first = calloc(5000, sizeof(*first));
	bool ok = first != NULL;

	for (uint64_t i = 0; ok && i < 5000; i++) {
		uint64_t v[2] = { i, i * 7 };

		first[i] = intern(&set, v, sizeof(v));
		ok = first[i] != NULL;
	}
	CHECK(ok);
	CHECK_EQ_INT(set.used, 5000);
	CHECK(set.cap >= 10000 && (set.cap & (set.cap - 1)) == 0);
	for (uint64_t i = 0; ok && i < 5000; i++) {
		uint64_t v[2] = { i, i * 7 };

		ok = intern(&set, v, sizeof(v)) == first[i];
	}
	CHECK_MSG(ok, "every array found again after growing");
	CHECK_EQ_INT(set.used, 5000);
	free(first);
	intern_free(&set);
}

/* The ordinal of each distinct array in the order of first sight, kept through growth: the
 * tracer indexes its summed waits by it. */
TEST(test_index_of_first_sight)
{
	struct intern_set set = { 0 };
	uint64_t a[2] = { 1, 2 }, b[2] = { 3, 4 };
	bool fresh = false, ok = true;

	CHECK_EQ_INT(intern_find(&set, a, sizeof(a)), -ENOENT);
	CHECK_EQ_INT(intern_index(&set, a, sizeof(a), &fresh), 0);
	CHECK(fresh);
	CHECK_EQ_INT(intern_index(&set, b, sizeof(b), &fresh), 1);
	CHECK(fresh);
	CHECK_EQ_INT(intern_index(&set, a, sizeof(a), &fresh), 0);
	CHECK(!fresh);
	CHECK_EQ_INT(intern_index(&set, a, 0, &fresh), -EINVAL);
	/* intern() shares the numbering. */
	CHECK(intern(&set, (uint64_t[]){ 5 }, sizeof(uint64_t)) != NULL);
	CHECK_EQ_INT(intern_find(&set, (uint64_t[]){ 5 }, sizeof(uint64_t)), 2);
	for (uint64_t i = 0; i < 3000; i++) {
		uint64_t v[2] = { i, ~i };

		ok = ok && intern_index(&set, v, sizeof(v), &fresh) == (long)(3 + i) && fresh;
	}
	CHECK_MSG(ok, "each new array numbered after the last");
	for (uint64_t i = 0; i < 3000; i++) {
		uint64_t v[2] = { i, ~i };

		ok = ok && intern_find(&set, v, sizeof(v)) == (long)(3 + i);
	}
	CHECK_MSG(ok, "every number found again after growing");
	CHECK_EQ_INT(intern_find(&set, b, sizeof(b)), 1);
	/* A find adds nothing. */
	CHECK_EQ_INT(intern_find(&set, (uint64_t[]){ 9, 9 }, 2 * sizeof(uint64_t)), -ENOENT);
	CHECK_EQ_INT(set.used, 3003);
	intern_free(&set);
}

int main(void)
{
	RUN_TEST(test_one_copy_each);
	RUN_TEST(test_index_of_first_sight);
	RUN_TEST(test_growth_keeps_every_copy);
	return unit_summary();
}

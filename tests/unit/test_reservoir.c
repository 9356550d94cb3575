// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The uniform draw a report keeps of its CPU samples (reservoir.c). */
#include <stdlib.h>
#include "reservoir.h"
#include "unit.h"

TEST(test_fills_in_order)
{
	struct reservoir r = { 0 };
	bool in_order = true;

	for (long i = 0; i < 100; i++)
		in_order = in_order && reservoir_slot(&r, 100) == i;
	CHECK_MSG(in_order, "the first cap items take slots 0..cap-1 in order");
	CHECK_EQ_U64(r.seen, 100);
	for (int i = 0; i < 1000; i++) {
		long slot = reservoir_slot(&r, 100);

		CHECK(slot >= -1 && slot < 100);
	}
	CHECK_EQ_U64(r.seen, 1100);
	CHECK_EQ_INT((int)reservoir_slot(&r, 0), -1);
}

/*
 * Every item of a stream is held at the end with the same probability, wherever it came: 400
 * draws of 1,000 from 20,000 items (fixed seeds), the holds of each tenth of the stream
 * within 3% of a tenth of all (a standard deviation is ~0.5%). Keeping the first 1,000, or
 * replacing with a fixed probability, puts nearly all holds in one tenth.
 */
TEST(test_every_item_equally_likely)
{
	enum { CAP = 1000, ITEMS = 20000, DRAWS = 400 };
	static int held[CAP];
	uint64_t tenth[10] = { 0 };

	for (int d = 0; d < DRAWS; d++) {
		struct reservoir r = { .rng = 0x1234567ULL + (uint64_t)d * 0x9e3779b97f4a7c15ULL };

		for (int i = 0; i < ITEMS; i++) {
			long slot = reservoir_slot(&r, CAP);

			if (slot >= 0)
				held[slot] = i;
		}
		for (int k = 0; k < CAP; k++)
			tenth[held[k] / (ITEMS / 10)]++;
	}
	for (int k = 0; k < 10; k++)
		CHECK_MSG(tenth[k] > 0.97 * DRAWS * CAP / 10 && tenth[k] < 1.03 * DRAWS * CAP / 10,
			  "tenth %d of the stream: %llu holds of %d", k, (unsigned long long)tenth[k],
			  DRAWS * CAP / 10);
}

int main(void)
{
	RUN_TEST(test_fills_in_order);
	RUN_TEST(test_every_item_equally_likely);
	return unit_summary();
}

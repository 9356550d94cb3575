/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A uniform draw of at most cap items from a stream of unknown length (Vitter's algorithm R):
 * what a report keeps of its CPU samples. A multi-worker job on a large host takes hundreds of
 * samples a second; kept whole up to 200,000 they were ~8 MB, and more again at the close.
 * Pure.
 */
#ifndef PIPEPROF_RESERVOIR_H
#define PIPEPROF_RESERVOIR_H

#include <stdint.h>

struct reservoir {
	uint64_t seen;		/* items offered so far */
	uint64_t rng;		/* xorshift64* state; 0 is taken as a fixed seed */
};

/*
 * Where the next item offered goes: its slot in [0, cap), taken in order until cap are held,
 * then a random one (the item it replaces is dropped); or -1 to drop the new item. After n
 * items, each is held with probability cap / n.
 */
long reservoir_slot(struct reservoir *r, long cap);

#endif

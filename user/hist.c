// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "hist.h"
#include "pipeprof.h"

unsigned int hist_slot_of(uint64_t value, unsigned int nr_slots)
{
	unsigned int slot = pp_log2_u64(value);

	return slot < nr_slots ? slot : nr_slots - 1;
}

uint64_t hist_slot_low(unsigned int slot)
{
	return slot ? 1ULL << slot : 0;
}

uint64_t hist_slot_high(unsigned int slot)
{
	return slot >= 63 ? UINT64_MAX : (1ULL << (slot + 1)) - 1;
}

uint64_t hist_total(const __u64 *slots, unsigned int nr_slots)
{
	uint64_t total = 0;

	for (unsigned int i = 0; i < nr_slots; i++)
		total += slots[i];
	return total;
}

double hist_percentile(const __u64 *slots, unsigned int nr_slots, double p)
{
	uint64_t total = hist_total(slots, nr_slots), seen = 0;
	double rank = p / 100.0 * total;

	if (!total)
		return 0;
	for (unsigned int i = 0; i < nr_slots; i++) {
		if (!slots[i])
			continue;
		if (seen + slots[i] >= rank) {
			double lo = hist_slot_low(i), hi = hist_slot_high(i) + 1.0;
			double within = (rank - seen) / slots[i];

			return lo + within * (hi - lo);
		}
		seen += slots[i];
	}
	return hist_slot_high(nr_slots - 1);
}

static void print_stars(FILE *out, uint64_t val, uint64_t val_max, int width)
{
	int num_stars = val_max ? (int)(val * width / val_max) : 0;
	int i;

	for (i = 0; i < num_stars && i < width; i++)
		fputc('*', out);
	if (val > val_max)
		fputc('+', out);
	for (; i < width; i++)
		fputc(' ', out);
}

void hist_print_log2(FILE *out, const __u64 *slots, unsigned int nr_slots, const char *unit)
{
	int idx_max = -1, stars = 40, width = 10;
	uint64_t val_max = 0;

	for (unsigned int i = 0; i < nr_slots; i++) {
		if (slots[i] > 0)
			idx_max = i;
		if (slots[i] > val_max)
			val_max = slots[i];
	}
	if (idx_max < 0)
		return;
	if (idx_max > 32)
		width = 20;
	fprintf(out, "%*s%-*s : count    distribution\n", idx_max <= 32 ? 5 : 15, "",
		idx_max <= 32 ? 19 : 29, unit);
	for (int i = 0; i <= idx_max; i++) {
		uint64_t low = hist_slot_low(i), high = hist_slot_high(i);

		fprintf(out, "%*llu -> %-*llu : %-8llu |", width, (unsigned long long)low, width,
			(unsigned long long)high, (unsigned long long)slots[i]);
		print_stars(out, slots[i], val_max, stars);
		fputs("|\n", out);
	}
}

void hist_switch_key(unsigned int idx, __u32 epoch, struct pp_hist_key *key)
{
	memset(key, 0, sizeof(*key));
	key->epoch = epoch;
	if (idx == PP_SWITCH_HIST_RUNQ) {
		key->kind = PP_HK_RUNQ;
	} else {
		key->kind = PP_HK_OFFCPU;
		key->sub = idx;
	}
}

void hist_sum_cpus(const void *copies, int nr_cpus, size_t stride, struct pp_hist *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (int cpu = 0; cpu < nr_cpus; cpu++) {
		const struct pp_hist *h = (const void *)((const char *)copies + cpu * stride);

		sum->count += h->count;
		sum->sum += h->sum;
		sum->aux += h->aux;
		for (int i = 0; i < PP_HIST_SLOTS; i++)
			sum->slots[i] += h->slots[i];
	}
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "hist.h"
#include "pipeprof.h"
#include "unit.h"

/* The slot function the BPF programs run, checked against the compiler's bit scan. */
TEST(test_shared_log2_matches_bit_scan)
{
	CHECK_EQ_INT(pp_log2_u64(0), 0);
	CHECK_EQ_INT(pp_log2_u64(1), 0);
	for (int bit = 0; bit < 64; bit++) {
		__u64 p = 1ULL << bit;

		CHECK_EQ_INT(pp_log2_u64(p), bit);
		CHECK_EQ_INT(pp_log2_u64(p | (p - 1)), bit);
		if (bit)
			CHECK_EQ_INT(pp_log2_u64(p - 1), bit - 1);
	}
	__u64 x = 88172645463325252ULL;

	for (int n = 0; n < 2048; n++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;	/* xorshift: values of every width */
		if (!CHECK_MSG(pp_log2_u64(x >> (n % 64)) == (__u32)(63 - __builtin_clzll((x >> (n % 64)) | 1)),
			       "%llx", (unsigned long long)(x >> (n % 64))))
			break;
	}
}

TEST(test_slots_match_bcc_layout)
{
	CHECK_EQ_INT(hist_slot_of(0, 32), 0);
	CHECK_EQ_INT(hist_slot_of(1, 32), 0);
	CHECK_EQ_INT(hist_slot_of(2, 32), 1);
	CHECK_EQ_INT(hist_slot_of(3, 32), 1);
	CHECK_EQ_INT(hist_slot_of(4, 32), 2);
	CHECK_EQ_INT(hist_slot_of(1023, 32), 9);
	CHECK_EQ_INT(hist_slot_of(1024, 32), 10);
	CHECK_EQ_INT(hist_slot_of(UINT64_MAX, 32), 31);
	CHECK_EQ_U64(hist_slot_low(0), 0);
	CHECK_EQ_U64(hist_slot_high(0), 1);
	CHECK_EQ_U64(hist_slot_low(1), 2);
	CHECK_EQ_U64(hist_slot_high(1), 3);
	CHECK_EQ_U64(hist_slot_low(10), 1024);
	CHECK_EQ_U64(hist_slot_high(10), 2047);
	/* Every value lands in the slot whose bounds hold it. */
	for (uint64_t v = 0; v < 5000; v += 7) {
		unsigned int s = hist_slot_of(v, 32);

		if (!CHECK_MSG(v >= hist_slot_low(s) && v <= hist_slot_high(s), "value %llu slot %u",
			       (unsigned long long)v, s))
			break;
	}
}

TEST(test_percentiles)
{
	__u64 slots[32] = {};

	CHECK(hist_percentile(slots, 32, 50) == 0);
	/* 100 samples in [1024, 2048): the median interpolates to the slot's middle. */
	slots[10] = 100;
	CHECK_MSG(hist_percentile(slots, 32, 50) == 1536.0, "p50 %f", hist_percentile(slots, 32, 50));
	CHECK(hist_percentile(slots, 32, 99) > 2000 && hist_percentile(slots, 32, 99) <= 2048);
	/* 90 fast, 10 slow: p50 is among the fast, p99 among the slow. */
	memset(slots, 0, sizeof(slots));
	slots[3] = 90;
	slots[12] = 10;
	CHECK(hist_percentile(slots, 32, 50) >= 8 && hist_percentile(slots, 32, 50) < 16);
	CHECK(hist_percentile(slots, 32, 99) >= 4096 && hist_percentile(slots, 32, 99) < 8192);
	CHECK_EQ_U64(hist_total(slots, 32), 100);
}

static char *render(const __u64 *slots, const char *unit)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	hist_print_log2(f, slots, 32, unit);
	fclose(f);
	return buf;
}

TEST(test_bcc_text_layout)
{
	__u64 slots[32] = { [0] = 1, [2] = 4, [3] = 20, [5] = 10 };
	char path[512], *got = render(slots, "usecs"), expected[4096] = {};
	FILE *f = fopen(UNIT_SRC_PATH(path, "tests/golden/hist_usecs.txt"), "r");
	size_t n = 0;

	if (CHECK_MSG(f, "golden file %s missing", path)) {
		n = fread(expected, 1, sizeof(expected) - 1, f);
		fclose(f);
	}
	expected[n] = 0;
	CHECK_STR(got, expected);
	free(got);

	/* An empty histogram prints nothing, as BCC's tools do. */
	memset(slots, 0, sizeof(slots));
	got = render(slots, "usecs");
	CHECK_STR(got, "");
	free(got);
}

/* The per-CPU switch-in histograms come back under the keys the hash map would have had. */
TEST(test_switch_hist_keys)
{
	struct pp_hist_key key;

	for (unsigned int idx = 0; idx < PP_SWITCH_HISTS; idx++) {
		hist_switch_key(idx, 1, &key);
		CHECK_EQ_INT(key.epoch, 1);
		CHECK_EQ_INT(key.id, 0);
		if (idx == PP_SWITCH_HIST_RUNQ) {
			CHECK_EQ_INT(key.kind, PP_HK_RUNQ);
			CHECK_EQ_INT(key.sub, 0);
		} else {
			CHECK_EQ_INT(key.kind, PP_HK_OFFCPU);
			CHECK_EQ_INT(key.sub, idx);	/* the cause, enum pp_state */
		}
	}
	/* Every cause has its entry, and the run queue one past them. */
	CHECK_EQ_INT(PP_SWITCH_HIST_RUNQ, PP_NR_STATES);
	CHECK_EQ_INT(PP_SWITCH_HISTS, PP_NR_STATES + 1);
}

/* CPUs' copies are summed field by field, each at its stride, padding skipped. */
TEST(test_switch_hist_sum_cpus)
{
	const int nr_cpus = 3;
	size_t stride = sizeof(struct pp_hist) + 8;	/* as if the value were padded */
	char *copies = calloc(nr_cpus, stride);
	struct pp_hist sum;

	if (!CHECK(copies))
		return;
	for (int cpu = 0; cpu < nr_cpus; cpu++) {
		struct pp_hist *h = (void *)(copies + cpu * stride);

		h->count = cpu + 1;
		h->sum = 1000 * (cpu + 1);
		h->aux = cpu;
		h->slots[cpu] = 10;
		h->slots[PP_HIST_SLOTS - 1] = 1;
		memset((char *)h + sizeof(*h), 0xff, stride - sizeof(*h));	/* never read */
	}
	hist_sum_cpus(copies, nr_cpus, stride, &sum);
	CHECK_EQ_U64(sum.count, 6);
	CHECK_EQ_U64(sum.sum, 6000);
	CHECK_EQ_U64(sum.aux, 3);
	CHECK_EQ_U64(sum.slots[0], 10);
	CHECK_EQ_U64(sum.slots[1], 10);
	CHECK_EQ_U64(sum.slots[2], 10);
	CHECK_EQ_U64(sum.slots[3], 0);
	CHECK_EQ_U64(sum.slots[PP_HIST_SLOTS - 1], 3);
	free(copies);
}

int main(void)
{
	RUN_TEST(test_shared_log2_matches_bit_scan);
	RUN_TEST(test_slots_match_bcc_layout);
	RUN_TEST(test_percentiles);
	RUN_TEST(test_bcc_text_layout);
	RUN_TEST(test_switch_hist_keys);
	RUN_TEST(test_switch_hist_sum_cpus);
	return unit_summary();
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Host memory from /proc readings (memory.c): sizes, peaks, faults, and which growth is a
 * probable leak. */
#include <math.h>
#include "memory.h"
#include "unit.h"

#define MB (1ull << 20)
#define MS 1000000ULL

static struct mem_reading readings[512];
static int nr;

static void add(uint64_t ts_ms, uint32_t pid, bool root, uint64_t rss, uint64_t faults)
{
	readings[nr++] = (struct mem_reading){ .ts_ns = 1000 * MS + ts_ms * MS, .pid = pid,
					       .root = root, .rss_bytes = rss,
					       .major_faults = faults };
}

TEST(test_steady_growth_is_a_leak)
{
	struct mem_summary m;

	/* Four seconds at 250 ms: the trainer flat with noise, one worker growing 10 MB/s
	 * steadily, another flat; readings given out of order. */
	nr = 0;
	for (int i = 16; i >= 0; i--) {
		add(250 * i, 100, true, 800 * MB + (i % 2) * 3 * MB, 5 + i);
		add(250 * i, 101, false, 200 * MB + (uint64_t)(i * 2.5 * MB), 0);
		add(250 * i, 102, false, 150 * MB, 7);
	}
	CHECK_EQ_INT(mem_summarize(readings, nr, &m), 0);
	CHECK_EQ_INT(m.readings, 51);
	CHECK(fabs(m.interval_s - 0.25) < 1e-9 && fabs(m.span_s - 4.0) < 1e-9);
	CHECK_EQ_INT(m.group[MEM_TRAINER].processes, 1);
	CHECK(!m.group[MEM_TRAINER].leak);
	CHECK_EQ_U64(m.group[MEM_TRAINER].rss_bytes, 800 * MB);
	CHECK_EQ_U64(m.group[MEM_TRAINER].peak_bytes, 803 * MB);
	CHECK_EQ_U64(m.group[MEM_TRAINER].major_faults, 16);
	CHECK_EQ_INT(m.group[MEM_WORKERS].processes, 2);
	CHECK(m.group[MEM_WORKERS].leak);
	CHECK_EQ_INT(m.group[MEM_WORKERS].growing, 1);
	CHECK_MSG(fabs(m.group[MEM_WORKERS].growth_bytes_per_s - 10.0 * MB) < 0.01 * MB, "%f",
		  m.group[MEM_WORKERS].growth_bytes_per_s / MB);
	CHECK_EQ_U64(m.group[MEM_WORKERS].rss_bytes, (200 + 40 + 150) * MB);
	CHECK_EQ_U64(m.group[MEM_WORKERS].peak_bytes, (200 + 40 + 150) * MB);
	CHECK_EQ_U64(m.group[MEM_WORKERS].major_faults, 0);
}

TEST(test_jumps_and_small_growth_are_not)
{
	struct mem_summary m;

	/* A warm-up jump of 60 MB that then levels off (a straight line fits it badly), and a
	 * steady 0.5 MB/s over 4 s (2 MB: under what a leak must grow in a window). */
	nr = 0;
	for (int i = 0; i <= 16; i++) {
		add(250 * i, 100, true, (i < 3 ? 300 : 360) * MB, 0);
		add(250 * i, 101, false, 100 * MB + (uint64_t)(i * 0.125 * MB), 0);
	}
	CHECK_EQ_INT(mem_summarize(readings, nr, &m), 0);
	CHECK(!m.group[MEM_TRAINER].leak && !m.group[MEM_WORKERS].leak);
	CHECK(m.group[MEM_TRAINER].growth_bytes_per_s == 0);
	CHECK_EQ_U64(m.group[MEM_TRAINER].peak_bytes, 360 * MB);
}

TEST(test_processes_that_come_and_go)
{
	struct mem_summary m;

	/* A worker that exits after 1 s and its successor forked at 2 s, each flat: the sum
	 * jumps, no process grows. Two readings are too few to fit. */
	nr = 0;
	for (int i = 0; i <= 4; i++)
		add(250 * i, 201, false, 500 * MB, 0);
	for (int i = 8; i <= 16; i++)
		add(250 * i, 202, false, 520 * MB, 3);
	add(0, 203, false, 10 * MB, 0);
	add(4000, 203, false, 90 * MB, 0);
	CHECK_EQ_INT(mem_summarize(readings, nr, &m), 0);
	CHECK_EQ_INT(m.group[MEM_WORKERS].processes, 3);
	CHECK(!m.group[MEM_WORKERS].leak);
	CHECK_EQ_U64(m.group[MEM_WORKERS].peak_bytes, 610 * MB);
	/* Now: the processes of the last round, not the one that exited. */
	CHECK_EQ_U64(m.group[MEM_WORKERS].rss_bytes, 610 * MB);
	CHECK_EQ_INT(m.group[MEM_TRAINER].processes, 0);

	CHECK_EQ_INT(mem_summarize(readings, 0, &m), 0);
	CHECK_EQ_INT(m.readings, 0);
	CHECK(m.interval_s == 0 && !m.group[MEM_WORKERS].processes);
}

int main(void)
{
	RUN_TEST(test_steady_growth_is_a_leak);
	RUN_TEST(test_jumps_and_small_growth_are_not);
	RUN_TEST(test_processes_that_come_and_go);
	return unit_summary();
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <linux/capability.h>
#include "caps.h"
#include "unit.h"

#define BIT(c) (1ULL << (c))

TEST(test_missing)
{
	char buf[512];

	/* What the README once promised is not enough: uprobes need CAP_SYS_ADMIN. */
	CHECK_EQ_INT(caps_missing(BIT(38) | BIT(39), buf, sizeof(buf)), 1);
	CHECK(strstr(buf, "CAP_SYS_ADMIN (uprobes need it"));
	CHECK(!strstr(buf, "CAP_BPF"));
	/* CAP_SYS_ADMIN alone covers the rest. */
	CHECK_EQ_INT(caps_missing(BIT(CAP_SYS_ADMIN), buf, sizeof(buf)), 0);
	CHECK_STR(buf, "");
	CHECK_EQ_INT(caps_missing(0, buf, sizeof(buf)), 3);
	CHECK(strstr(buf, "CAP_BPF (needed to load BPF programs), CAP_PERFMON"));
	/* A short buffer truncates, never overflows, and the count stays right. */
	CHECK_EQ_INT(caps_missing(0, buf, 8), 3);
	CHECK_EQ_INT((int)strlen(buf), 7);
}

TEST(test_effective_reads)
{
	uint64_t eff = 0;

	CHECK_EQ_INT(caps_effective(&eff), 0);
}

int main(void)
{
	RUN_TEST(test_missing);
	RUN_TEST(test_effective_reads);
	return unit_summary();
}

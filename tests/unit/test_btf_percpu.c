// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <bpf/btf.h>
#include "kfeatures.h"
#include "unit.h"

/* A BTF with a .data..percpu DATASEC holding the given layout, as pahole writes it. */
static struct btf *percpu_btf(bool pcpu_hot)
{
	struct btf *btf = btf__new_empty();
	int i32 = btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
	int rq = btf__add_struct(btf, "rq", 64), hot = -1, v_rq, v_pc, sec;

	btf__add_field(btf, "cpu", i32, 0, 0);
	if (pcpu_hot) {
		hot = btf__add_struct(btf, "pcpu_hot", 64);
		btf__add_field(btf, "current_task", i32, 0, 0);
		btf__add_field(btf, "preempt_count", i32, 64, 0);
	}
	v_pc = pcpu_hot ? btf__add_var(btf, "pcpu_hot", BTF_VAR_GLOBAL_ALLOCATED, hot) :
			  btf__add_var(btf, "__preempt_count", BTF_VAR_GLOBAL_ALLOCATED, i32);
	v_rq = btf__add_var(btf, "runqueues", BTF_VAR_GLOBAL_ALLOCATED, rq);
	sec = btf__add_datasec(btf, ".data..percpu", 8192);
	if (sec < 0 || v_pc < 0 || v_rq < 0)
		return NULL;
	btf__add_datasec_var_info(btf, v_pc, 1024, pcpu_hot ? 64 : 4);
	btf__add_datasec_var_info(btf, v_rq, 4096, 64);
	return btf;
}

TEST(test_preempt_count_var)
{
	struct btf *btf = percpu_btf(false);

	CHECK(btf != NULL);
	CHECK_EQ_INT(btf_percpu_offset(btf, "runqueues", NULL), 4096);
	CHECK_EQ_INT(btf_percpu_offset(btf, "__preempt_count", NULL), 1024);
	CHECK_EQ_INT(btf_percpu_offset(btf, "nosuch", NULL), -1);
	CHECK_EQ_INT(preempt_count_rq_delta(btf), 1024 - 4096);
	btf__free(btf);
}

/* 6.2 .. 6.14 kept the count in pcpu_hot. */
TEST(test_preempt_count_in_pcpu_hot)
{
	struct btf *btf = percpu_btf(true);

	CHECK(btf != NULL);
	CHECK_EQ_INT(btf_percpu_offset(btf, "pcpu_hot", "preempt_count"), 1024 + 8);
	CHECK_EQ_INT(btf_percpu_offset(btf, "pcpu_hot", "nosuch"), -1);
	CHECK_EQ_INT(preempt_count_rq_delta(btf), 1024 + 8 - 4096);
	btf__free(btf);
}

/* No DATASEC, or no run queue in it: no distance, and the tracepoint fallback stands in. */
TEST(test_no_percpu_section)
{
	struct btf *btf = btf__new_empty();

	btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
	CHECK_EQ_INT(btf_percpu_offset(btf, "runqueues", NULL), -1);
	CHECK_EQ_INT(preempt_count_rq_delta(btf), 0);
	btf__free(btf);
}

/* A name offset past the strings (libbpf 1.1 loads such BTF unchecked) names nothing. */
TEST(test_name_out_of_range)
{
	struct btf *btf = percpu_btf(true);
	struct btf_type *hot, *var;
	int id;

	CHECK(btf != NULL);
	id = btf__find_by_name_kind(btf, "pcpu_hot", BTF_KIND_STRUCT);
	hot = (struct btf_type *)btf__type_by_id(btf, id);
	btf_members(hot)[1].name_off = 0xfffffff0;
	CHECK_EQ_INT(btf_percpu_offset(btf, "pcpu_hot", "preempt_count"), -1);
	id = btf__find_by_name_kind(btf, "runqueues", BTF_KIND_VAR);
	var = (struct btf_type *)btf__type_by_id(btf, id);
	var->name_off = 0xfffffff0;
	CHECK_EQ_INT(btf_percpu_offset(btf, "runqueues", NULL), -1);
	CHECK_EQ_INT(preempt_count_rq_delta(btf), 0);
	btf__free(btf);
}

/* A header one byte longer than its struct leaves every type unaligned: no answer, no UB. */
TEST(test_types_unaligned)
{
	struct btf *good = percpu_btf(false), *btf;
	const size_t hdr = sizeof(struct btf_header);
	const char *raw;
	__u32 size;
	char *buf;

	CHECK(good != NULL);
	raw = btf__raw_data(good, &size);
	buf = calloc(1, size + 1);
	memcpy(buf, raw, hdr);
	memcpy(buf + hdr + 1, raw + hdr, size - hdr);
	((struct btf_header *)buf)->hdr_len = hdr + 1;
	btf = btf__new(buf, size + 1);
	if (btf) {
		CHECK_EQ_INT(btf_percpu_offset(btf, "runqueues", NULL), -1);
		CHECK_EQ_INT(preempt_count_rq_delta(btf), 0);
	} else {
		SKIP("this libbpf refuses the unaligned header");
	}
	btf__free(btf);
	btf__free(good);
	free(buf);
}

/* The running kernel's own BTF, where it has one: both variables are there. */
TEST(test_running_kernel)
{
	struct btf *btf = btf__parse("/sys/kernel/btf/vmlinux", NULL);

	if (!btf) {
		printf("skip test_running_kernel: no /sys/kernel/btf/vmlinux\n");
		return;
	}
	CHECK(btf_percpu_offset(btf, "runqueues", NULL) >= 0);
	CHECK(preempt_count_rq_delta(btf) != 0);
	btf__free(btf);
}

int main(void)
{
	RUN_TEST(test_preempt_count_var);
	RUN_TEST(test_preempt_count_in_pcpu_hot);
	RUN_TEST(test_no_percpu_section);
	RUN_TEST(test_name_out_of_range);
	RUN_TEST(test_types_unaligned);
	RUN_TEST(test_running_kernel);
	return unit_summary();
}

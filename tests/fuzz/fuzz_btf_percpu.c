// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Kernel BTF as btf_percpu.c reads it to find per-CPU variables: the input is raw BTF (what
 * /sys/kernel/btf/vmlinux holds), loaded with btf__new() as libbpf loads the kernel's. The
 * seeds are btf__raw_data() of layouts built the way tests/unit/test_btf_percpu.c builds them.
 */
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "fuzz.h"
#include "kfeatures.h"

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	libbpf_set_print(quiet);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct btf *btf = btf__new(data, size);
	long long rq;

	if (!btf)
		return 0;
	rq = btf_percpu_offset(btf, "runqueues", NULL);
	FUZZ_CHECK(rq >= -1);
	btf_percpu_offset(btf, "pcpu_hot", "preempt_count");
	btf_percpu_offset(btf, "__preempt_count", NULL);
	preempt_count_rq_delta(btf);
	btf__free(btf);
	return 0;
}

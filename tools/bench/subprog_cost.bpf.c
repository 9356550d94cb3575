// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tools/bench/subprog_cost.c loads these one at a time: the same 16 map updates, inlined, as
 * 16 static subprograms, and as 16 global ones. The difference in load time is what a BPF
 * subprogram costs a program that calls it, whatever its body: the JIT compiles and finalizes
 * each function on its own.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} slots SEC(".maps");

#define BODY(n)								\
	{								\
		__u64 *v = bpf_map_lookup_elem(&slots, &k);		\
		if (v)							\
			*v += n;					\
		return 0;						\
	}
#define DEFINE(attr, prefix, n) attr int prefix##n(__u32 k) BODY(n)
#define SIXTEEN(attr, prefix)									\
	DEFINE(attr, prefix, 0) DEFINE(attr, prefix, 1) DEFINE(attr, prefix, 2)			\
	DEFINE(attr, prefix, 3) DEFINE(attr, prefix, 4) DEFINE(attr, prefix, 5)			\
	DEFINE(attr, prefix, 6) DEFINE(attr, prefix, 7) DEFINE(attr, prefix, 8)			\
	DEFINE(attr, prefix, 9) DEFINE(attr, prefix, 10) DEFINE(attr, prefix, 11)		\
	DEFINE(attr, prefix, 12) DEFINE(attr, prefix, 13) DEFINE(attr, prefix, 14)		\
	DEFINE(attr, prefix, 15)
#define CALL_SIXTEEN(prefix, k)									\
	prefix##0(k); prefix##1(k); prefix##2(k); prefix##3(k); prefix##4(k); prefix##5(k);	\
	prefix##6(k); prefix##7(k); prefix##8(k); prefix##9(k); prefix##10(k); prefix##11(k);	\
	prefix##12(k); prefix##13(k); prefix##14(k); prefix##15(k)

SIXTEEN(static __always_inline, inl_)
SIXTEEN(static __noinline, sta_)
SIXTEEN(__noinline, glo_)

SEC("raw_tp")
int inlined(void *ctx)
{
	__u32 k = bpf_get_prandom_u32() & 63;

	CALL_SIXTEEN(inl_, k);
	return 0;
}

SEC("raw_tp")
int static_calls(void *ctx)
{
	__u32 k = bpf_get_prandom_u32() & 63;

	CALL_SIXTEEN(sta_, k);
	return 0;
}

SEC("raw_tp")
int global_calls(void *ctx)
{
	__u32 k = bpf_get_prandom_u32() & 63;

	CALL_SIXTEEN(glo_, k);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";

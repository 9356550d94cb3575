// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Per-CPU variables' places, from the kernel's BTF (core_fixes.bpf.h says why the BPF side
 * needs them). Pure: reads a struct btf, whichever way it was loaded or built. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <bpf/btf.h>
#include "kfeatures.h"

/* libbpf 1.1 loads BTF without checking its name offsets: one past the strings is NULL. */
static bool name_is(const struct btf *btf, __u32 name_off, const char *name)
{
	const char *s = btf__name_by_offset(btf, name_off);

	return s && !strcmp(s, name);
}

/* Byte offset of a named member of a struct, or -1. */
static long long member_offset(const struct btf *btf, __u32 type_id, const char *member)
{
	const struct btf_type *t = btf__type_by_id(btf, btf__resolve_type(btf, type_id));
	const struct btf_member *m;

	if (!t || !btf_is_struct(t))
		return -1;
	m = btf_members(t);
	for (int i = 0; i < btf_vlen(t); i++, m++)
		if (name_is(btf, m->name_off, member))
			return btf_member_bit_offset(t, i) / 8;
	return -1;
}

long long btf_percpu_offset(const struct btf *btf, const char *var, const char *member)
{
	int sec = btf__find_by_name_kind(btf, ".data..percpu", BTF_KIND_DATASEC);
	const struct btf_var_secinfo *vs;
	const struct btf_type *t;

	if (sec < 0)
		return -1;
	t = btf__type_by_id(btf, sec);
	/*
	 * libbpf 1.1 accepts a header length that leaves the type section unaligned, and reading
	 * a type through btf.h's helpers is then undefined. Every type is a multiple of 4 bytes
	 * long, so one aligned type means all are; the kernel's BTF always is.
	 */
	if ((uintptr_t)t % __alignof__(*t))
		return -1;
	vs = btf_var_secinfos(t);
	for (int i = 0; i < btf_vlen(t); i++, vs++) {
		const struct btf_type *v = btf__type_by_id(btf, vs->type);
		long long off;

		if (!v || !btf_is_var(v) || !name_is(btf, v->name_off, var))
			continue;
		if (!member)
			return vs->offset;
		off = member_offset(btf, v->type, member);
		return off < 0 ? -1 : vs->offset + off;
	}
	return -1;
}

long long preempt_count_rq_delta(const struct btf *btf)
{
	long long rq = btf_percpu_offset(btf, "runqueues", NULL);
	long long pc = btf_percpu_offset(btf, "__preempt_count", NULL);

	if (pc < 0)	/* 6.2 .. 6.14: inside pcpu_hot */
		pc = btf_percpu_offset(btf, "pcpu_hot", "preempt_count");
	if (rq < 0 || pc < 0 || rq == pc)
		return 0;
	return pc - rq;
}


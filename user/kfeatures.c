// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "kfeatures.h"
#include "pipeprof.skel.h"

/* Number of parameters of a tracepoint's BTF prototype, or -1 when it does not exist. */
static int tracepoint_nr_args(const struct btf *btf, const char *tp)
{
	char name[128];
	const struct btf_type *t;
	int id;

	snprintf(name, sizeof(name), "btf_trace_%s", tp);
	id = btf__find_by_name_kind(btf, name, BTF_KIND_TYPEDEF);
	if (id < 0)
		return -1;
	t = btf__type_by_id(btf, id);			/* typedef */
	t = btf__type_by_id(btf, t->type);		/* pointer */
	if (!t || !btf_is_ptr(t))
		return -1;
	t = btf__type_by_id(btf, t->type);		/* func proto */
	if (!t || !btf_is_func_proto(t))
		return -1;
	return btf_vlen(t) - 1;	/* the first is the tracepoint's void *__data */
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
		if (!strcmp(btf__name_by_offset(btf, m->name_off), member))
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
	vs = btf_var_secinfos(t);
	for (int i = 0; i < btf_vlen(t); i++, vs++) {
		const struct btf_type *v = btf__type_by_id(btf, vs->type);
		long long off;

		if (!v || !btf_is_var(v) || strcmp(btf__name_by_offset(btf, v->name_off), var))
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

int kfeatures_probe(struct pipeprof_bpf *skel)
{
	struct btf *btf = btf__load_vmlinux_btf();

	if (!btf) {
		int err = -errno;

		fprintf(stderr, "pipeprof: cannot read kernel BTF (/sys/kernel/btf/vmlinux): %s; "
			"pipeprof needs a kernel built with CONFIG_DEBUG_INFO_BTF=y\n", strerror(-err));
		return err;
	}
	skel->rodata->sched_switch_has_prev_state = tracepoint_nr_args(btf, "sched_switch") >= 4;
	skel->rodata->has_block_io_start = tracepoint_nr_args(btf, "block_io_start") >= 0;
	if (!skel->rodata->has_block_io_start)
		bpf_program__set_autoload(skel->progs.on_block_io_start, false);
	skel->rodata->preempt_count_rq_delta = preempt_count_rq_delta(btf);
	btf__free(btf);
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "kfeatures.h"
#include "pipeprof.h"	/* the types the skeleton's globals use */
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

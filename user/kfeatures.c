// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "kfeatures.h"
#include "uprobe_multi.h"
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

/* Every uprobe program of the object is made for multi-uprobe links: attach type is fixed at
 * load, and one program cannot serve both kinds of attachment. */
static void use_uprobe_multi(struct pipeprof_bpf *skel)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, skel->obj) {
		const char *sec = bpf_program__section_name(prog);

		if (!strncmp(sec, "uprobe", 6) || !strncmp(sec, "uretprobe", 9))
			bpf_program__set_expected_attach_type(prog,
				(enum bpf_attach_type)PP_BPF_TRACE_UPROBE_MULTI);
	}
}

int kfeatures_probe(struct pipeprof_bpf *skel, bool *uprobe_multi)
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
	*uprobe_multi = uprobe_multi_supported(btf) && !getenv("PIPEPROF_NO_UPROBE_MULTI");
	if (*uprobe_multi)
		use_uprobe_multi(skel);
	btf__free(btf);
	return 0;
}

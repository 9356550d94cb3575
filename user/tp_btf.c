// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* libbpf's "tp_btf" sections, with their targets' type ids from the cache (tp_btf.h). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "kfeatures.h"
#include "tp_btf.h"

/* libbpf reads no kernel BTF for a tracing program that "attaches to another program"
 * (attach_prog_fd set). It only stores the descriptor, and load_ids() clears it before the
 * program reaches the kernel, so no real descriptor is named. */
#define NOT_A_PROGRAM_FD INT_MAX

static struct kfeatures known;
static bool known_set;
static struct btf *kernel_btf;	/* read only for an id not known */

void tp_btf_use_ids(const struct kfeatures *kf)
{
	known_set = kf != NULL;
	if (kf)
		known = *kf;
}

void tp_btf_release(void)
{
	btf__free(kernel_btf);
	kernel_btf = NULL;
}

static int lookup_id(const char *tp)
{
	int id;

	if (!kernel_btf) {
		kernel_btf = kernel_btf_load();
		if (!kernel_btf)
			return -errno;
	}
	id = tracepoint_btf_id(kernel_btf, tp);
	return id > 0 ? id : -ESRCH;
}

static int setup_prog(struct bpf_program *prog, long cookie)
{
	return bpf_program__set_attach_target(prog, NOT_A_PROGRAM_FD, NULL);
}

static int load_ids(struct bpf_program *prog, struct bpf_prog_load_opts *opts, long cookie)
{
	const char *tp = strchr(bpf_program__section_name(prog), '/');
	int id;

	if (!tp || !tp[1]) {
		fprintf(stderr, "pipeprof: program %s: a tp_btf section names no tracepoint\n",
			bpf_program__name(prog));
		return -EINVAL;
	}
	tp++;
	id = known_set ? kfeatures_tp_btf_id(&known, tp) : 0;
	if (!id)
		id = lookup_id(tp);
	if (id < 0) {
		fprintf(stderr, "pipeprof: program %s: no tracepoint %s in the kernel's BTF: %s\n",
			bpf_program__name(prog), tp, strerror(-id));
		return id;
	}
	opts->attach_prog_fd = 0;
	opts->attach_btf_obj_fd = 0;	/* vmlinux */
	opts->attach_btf_id = id;
	return 0;
}

static int attach_prog(const struct bpf_program *prog, long cookie, struct bpf_link **link)
{
	*link = bpf_program__attach_trace(prog);
	return *link ? 0 : -errno;
}

int tp_btf_register(void)
{
	static bool tried;
	static int err;
	LIBBPF_OPTS(libbpf_prog_handler_opts, opts, .prog_setup_fn = setup_prog,
		    .prog_prepare_load_fn = load_ids, .prog_attach_fn = attach_prog);

	if (!tried) {
		int id = libbpf_register_prog_handler("tp_btf+", BPF_PROG_TYPE_TRACING,
						      BPF_TRACE_RAW_TP, &opts);

		err = id < 0 ? id : 0;
		tried = true;
	}
	return err;
}

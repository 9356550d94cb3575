// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "uprobe_multi.h"

/* BPF_F_UPROBE_MULTI_RETURN (uapi, 6.6). */
#define PP_BPF_F_UPROBE_MULTI_RETURN 1U

/* union bpf_attr's link_create as 6.6 lays it out for uprobe_multi: older uapi headers (the
 * build machine's) do not have the member. The kernel requires every byte past what it knows
 * to be zero, and this is a prefix of what it knows. */
struct link_create_uprobe_multi {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t multi_flags;
	uint32_t pid;
	uint32_t pad;
};

bool uprobe_multi_supported(const struct btf *vmlinux)
{
	int id = btf__find_by_name_kind(vmlinux, "bpf_attach_type", BTF_KIND_ENUM);
	const struct btf_type *t = id > 0 ? btf__type_by_id(vmlinux, id) : NULL;
	const struct btf_enum *e;

	if (!t)
		return false;
	e = btf_enum(t);
	for (int i = 0; i < btf_vlen(t); i++, e++)
		if (e->val == PP_BPF_TRACE_UPROBE_MULTI &&
		    !strcmp(btf__name_by_offset(vmlinux, e->name_off), "BPF_TRACE_UPROBE_MULTI"))
			return true;
	return false;
}

static int link_create(const struct bpf_program *prog, pid_t pid, const char *path,
		       const uint64_t *offsets, const uint64_t *ref_ctr_offsets,
		       const uint64_t *cookies, unsigned int cnt, bool ret)
{
	union {
		struct link_create_uprobe_multi lc;
		char bytes[sizeof(union bpf_attr)];
	} attr;
	int fd;

	_Static_assert(sizeof(struct link_create_uprobe_multi) <= sizeof(union bpf_attr),
		       "link_create layout outgrew union bpf_attr");
	memset(&attr, 0, sizeof(attr));
	attr.lc.prog_fd = bpf_program__fd(prog);
	attr.lc.attach_type = PP_BPF_TRACE_UPROBE_MULTI;
	attr.lc.path = (uintptr_t)path;
	attr.lc.offsets = (uintptr_t)offsets;
	attr.lc.ref_ctr_offsets = (uintptr_t)ref_ctr_offsets;
	attr.lc.cookies = (uintptr_t)cookies;
	attr.lc.cnt = cnt;
	attr.lc.multi_flags = ret ? PP_BPF_F_UPROBE_MULTI_RETURN : 0;
	attr.lc.pid = pid;
	fd = syscall(SYS_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
}

int uprobe_multi_attach(const struct bpf_program *prog, pid_t pid, const char *path,
			const uint64_t *offsets, const uint64_t *cookies, unsigned int cnt, bool ret)
{
	return link_create(prog, pid, path, offsets, NULL, cookies, cnt, ret);
}

int uprobe_multi_attach_usdt(const struct bpf_program *prog, pid_t pid, const char *path,
			     uint64_t offset, uint64_t semaphore_offset)
{
	uint64_t cookie = 0;

	return link_create(prog, pid, path, &offset, semaphore_offset ? &semaphore_offset : NULL,
			   &cookie, 1, false);
}

/* Every spec of one program in one direction, in one link; one by one if that fails. */
static int attach_group(struct uprobe_spec *specs, int n, int first, bool ret, pid_t pid,
			const char *path, int *fds, int max)
{
	const struct bpf_program *prog = ret ? specs[first].ret : specs[first].enter;
	uint64_t offsets[n], cookies[n];
	int idx[n], cnt = 0, added = 0, fd;

	for (int i = first; i < n; i++) {
		const struct bpf_program *p = ret ? specs[i].ret : specs[i].enter;

		/* An entry goes in only once its return is in: no open call without an end. */
		if (p != prog || specs[i].err || (!ret && specs[i].ret && !specs[i].attached))
			continue;
		offsets[cnt] = specs[i].offset;
		cookies[cnt] = specs[i].cookie;
		idx[cnt++] = i;
	}
	if (!cnt || added >= max)
		return 0;
	fd = uprobe_multi_attach(prog, pid, path, offsets, cookies, cnt, ret);
	if (fd >= 0) {
		fds[added++] = fd;
		for (int k = 0; k < cnt; k++)
			specs[idx[k]].attached = ret ? true : specs[idx[k]].attached || !specs[idx[k]].ret;
		return added;
	}
	for (int k = 0; k < cnt && added < max; k++) {
		fd = uprobe_multi_attach(prog, pid, path, &offsets[k], &cookies[k], 1, ret);
		if (fd < 0) {
			specs[idx[k]].err = fd;
			specs[idx[k]].attached = false;
			continue;
		}
		fds[added++] = fd;
		if (ret || !specs[idx[k]].ret)
			specs[idx[k]].attached = true;
	}
	return added;
}

int uprobe_multi_attach_all(struct uprobe_spec *specs, int n, pid_t pid, const char *path,
			    int *fds, int max)
{
	int nr = 0;

	for (int i = 0; i < n; i++)
		specs[i].attached = false, specs[i].err = 0;
	/* Returns first, each program's group once (at its first spec)... */
	for (int i = 0; i < n; i++) {
		bool first = specs[i].ret != NULL;

		for (int k = 0; first && k < i; k++)
			first = specs[k].ret != specs[i].ret;
		if (first)
			nr += attach_group(specs, n, i, true, pid, path, fds + nr, max - nr);
	}
	/* ...then the entries. A spec with a return is "attached" once both are. */
	for (int i = 0; i < n; i++) {
		bool first = true;

		for (int k = 0; k < i; k++)
			first &= specs[k].enter != specs[i].enter;
		if (first)
			nr += attach_group(specs, n, i, false, pid, path, fds + nr, max - nr);
	}
	return nr;
}

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Multi-uprobe links (kernel 6.6+): every offset one program probes in one file of one process,
 * in one link. Each uprobe detach waits out an RCU grace period, one after another (~70-130 ms
 * each measured here and on a GPU host), so a CUDA process with 52 single probes took 7 s to
 * detach; with one link per program it takes a few grace periods. libbpf 1.1 has no API for
 * them, so the link is made with the bpf() syscall directly. */
#ifndef PIPEPROF_UPROBE_MULTI_H
#define PIPEPROF_UPROBE_MULTI_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct btf;
struct bpf_program;

/* enum bpf_attach_type's BPF_TRACE_UPROBE_MULTI (uapi, stable since 6.6). */
#define PP_BPF_TRACE_UPROBE_MULTI 48

/* Whether the kernel described by vmlinux BTF offers multi-uprobe links. */
bool uprobe_multi_supported(const struct btf *vmlinux);

/* Attach prog (loaded with expected attach type PP_BPF_TRACE_UPROBE_MULTI) to cnt offsets of
 * path in process pid, each with its cookie; as return probes when ret. Returns the link's fd
 * (close it to detach) or -errno. */
int uprobe_multi_attach(const struct bpf_program *prog, pid_t pid, const char *path,
			const uint64_t *offsets, const uint64_t *cookies, unsigned int cnt, bool ret);

/* One USDT probe site of path, with its is-enabled counter (0: none), which the kernel raises
 * in every process the link covers for as long as it lives. Returns the link's fd or -errno. */
int uprobe_multi_attach_usdt(const struct bpf_program *prog, pid_t pid, const char *path,
			     uint64_t offset, uint64_t semaphore_offset);

/* One function to probe: its entry program, its return program (or NULL), where, and the
 * cookie both get. attach fills in err and attached. */
struct uprobe_spec {
	const struct bpf_program *enter, *ret;
	uint64_t offset, cookie;
	int err;
	bool attached;
};

/* Attach every spec with one link per (program, direction): all return probes before any
 * entry, so that no call is seen to start without its end being seen. When a group's link
 * fails, its specs are tried one by one so that one bad offset does not cost the others.
 * Appends link fds to fds (at most max). Returns the number of fds appended. */
int uprobe_multi_attach_all(struct uprobe_spec *specs, int n, pid_t pid, const char *path,
			    int *fds, int max);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the running kernel offers, read from its BTF before the BPF object loads: each answer
 * sets rodata (core_fixes.bpf.h documents every difference and the commit behind it). */
#ifndef PIPEPROF_KFEATURES_H
#define PIPEPROF_KFEATURES_H

#include <stdbool.h>

struct btf;
struct pipeprof_bpf;

/* Sets the skeleton's kernel-dependent rodata and autoload flags, and says whether the uprobe
 * programs load for multi-uprobe links (unless PIPEPROF_NO_UPROBE_MULTI is set, which keeps
 * the older one-perf-event-per-probe path testable on new kernels). Fails with a message and
 * -errno when the kernel has no BTF. */
int kfeatures_probe(struct pipeprof_bpf *skel, bool *uprobe_multi);

/* Offset of per-CPU variable var (plus its member, when not NULL) inside the per-CPU area, from
 * the .data..percpu DATASEC of btf; -1 when BTF does not describe it. */
long long btf_percpu_offset(const struct btf *btf, const char *var, const char *member);

/* Distance from a CPU's run queue to its preempt count, or 0 when BTF does not tell. */
long long preempt_count_rq_delta(const struct btf *btf);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the running kernel offers, read from its BTF before the BPF object loads: each answer
 * sets rodata (core_fixes.bpf.h documents every difference and the commit behind it). */
#ifndef PIPEPROF_KFEATURES_H
#define PIPEPROF_KFEATURES_H

#include <stdbool.h>
#include <stddef.h>

struct btf;
struct pipeprof_bpf;

/* Every tracepoint a tp_btf program of pipeprof's objects attaches to. Its BTF type id (the
 * btf_trace_NAME typedef) is cached with the rest, so that a load can name each program's
 * target without libbpf reading the kernel's whole BTF (tp_btf.h); one missing here is looked
 * up at load, at that cost. */
#define KF_TRACEPOINTS 16
extern const char *const kfeatures_tracepoints[KF_TRACEPOINTS];

/* What is learnt of the kernel: from its BTF (~15 ms even with the reads pre-faulted), or from
 * the cache entry of this boot (kernel-BOOT_ID), which holds the same answers. */
struct kfeatures {
	bool sched_switch_has_prev_state;
	bool has_block_io_start;
	long long preempt_count_rq_delta;
	bool uprobe_multi;		/* the kernel has multi-uprobe links */
	/* The self-check saw the preempt count right in interrupts during this boot: later runs
	 * need not attach the interrupt programs to prove it again. */
	bool preempt_count_proven;
	bool from_cache;
	/* Type id of btf_trace_<kfeatures_tracepoints[i]> in the kernel's BTF; 0 where it has
	 * none (a tracepoint this kernel lacks). */
	int tp_btf_ids[KF_TRACEPOINTS];
};

/* What the kernel offers, from this boot's cache entry: -errno when there is none usable. */
int kfeatures_read_cached(struct kfeatures *kf);
/* The kernel's BTF, parsed from a read-only mapping of /sys/kernel/btf/vmlinux where the
 * kernel allows one (6.18 here does), so that libbpf's parsed copy is the only one in
 * pipeprof's memory: libbpf's own read (btf__load_vmlinux_btf(), the fallback) holds the
 * file's 5.5 MB twice while it copies them, the peak of a boot's first attach. NULL with errno
 * set on failure. */
struct btf *kernel_btf_load(void);

/* The same read from the kernel's BTF, which then makes the entry. Fails with a message and
 * -errno when the kernel has no BTF. */
int kfeatures_read_btf(struct kfeatures *kf);
/* Sets the skeleton's kernel-dependent rodata and autoload flags, and says whether the uprobe
 * programs load for multi-uprobe links (unless PIPEPROF_NO_UPROBE_MULTI is set, which keeps the
 * older one-perf-event-per-probe path testable on new kernels). */
void kfeatures_apply(struct pipeprof_bpf *skel, const struct kfeatures *kf, bool *uprobe_multi);

/* Records in this boot's cache entry that the preempt count proved right. */
void kfeatures_remember_preempt_count(struct kfeatures *kf);

/* The cache entry's text, pure for the unit tests: format returns its length (or -ENOSPC);
 * parse accepts only a complete entry written for this boot id and kernel release. */
int kfeatures_format(const struct kfeatures *kf, const char *boot_id, const char *release,
		     char *buf, size_t size);
int kfeatures_parse(const char *text, const char *boot_id, const char *release,
		    struct kfeatures *kf);
/* The cached type id of tracepoint tp's btf_trace typedef; 0 when not known. */
int kfeatures_tp_btf_id(const struct kfeatures *kf, const char *tp);

/* Type id of tracepoint tp's btf_trace_<tp> typedef in btf (what a tp_btf program attaches
 * to), or a negative error when btf has none. */
int tracepoint_btf_id(const struct btf *btf, const char *tp);

/* Offset of per-CPU variable var (plus its member, when not NULL) inside the per-CPU area, from
 * the .data..percpu DATASEC of btf; -1 when BTF does not describe it. */
long long btf_percpu_offset(const struct btf *btf, const char *var, const char *member);

/* Distance from a CPU's run queue to its preempt count, or 0 when BTF does not tell. */
long long preempt_count_rq_delta(const struct btf *btf);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* `pipeprof hist`: kind names, and one interval's histograms printed BCC's way or as JSON
 * (pipeprof.hist/v1). Pure: the plumbing in hist_cmd.c fills the structs from the BPF maps. */
#ifndef PIPEPROF_HIST_FMT_H
#define PIPEPROF_HIST_FMT_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <linux/types.h>
#include "pipeprof.h"

/* A kind as the user names it, and the BPF histograms (bits of enum pp_hist_kind) behind it. */
struct hist_user_kind {
	const char *name;
	__u32 bpf_mask;
	const char *what;
};

extern const struct hist_user_kind hist_user_kinds[];
extern const int hist_user_kind_count;

/* The BPF mask of a user kind name, 0 when unknown. */
__u32 hist_kind_parse(const char *name);

struct hist_entry {
	__u32 kind, sub, id;	/* the BPF key */
	__u64 count, sum, aux;
	__u64 slots[PP_HIST_SLOTS];
	char label[64];		/* cause, API, disk or copy direction; "" when the kind has none */
	pid_t pid;		/* the process, when the entry is per thread or per process */
	char comm[16];
};

struct hist_interval {
	pid_t root;
	double interval_s;	/* measured length of this interval */
	char timestamp[16];	/* "HH:MM:SS" at its end */
	bool timestamps;	/* -T */
	bool msecs;		/* -m: time slots are msecs */
	__u32 keying;		/* enum pp_hist_keying */
	__u32 kinds;		/* BPF mask asked for */
	pid_t trainer_tid;	/* whose batch-wait and step histograms show, 0 when unknown */
	struct hist_entry *entries;
	int nr_entries;
	/* Cumulative losses since the start; each is printed, zero or not. */
	__u64 lost_hist_full, lost_threads_full, lost_recursion, lost_rq_full;
	int probe_failures;
	const char *step_note;	/* why there are no step samples, when there are none */
	const char *gpu_note;	/* why there are no GPU samples, when no GPU library is probed */
};

/* Orders entries for printing: kind, then label, then id. */
void hist_sort(struct hist_entry *entries, int n);

/* Whether the interval shows entry e (batch-wait and step show the trainer's, unless per thread). */
bool hist_entry_shown(const struct hist_interval *iv, const struct hist_entry *e);

void hist_print_interval_text(FILE *out, const struct hist_interval *iv);

/* One JSON object on one line. Returns 0 or -ENOMEM. */
int hist_print_interval_json(FILE *out, const struct hist_interval *iv);

#endif

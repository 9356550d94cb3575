/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Userspace's one log2 histogram primitive, BCC's layout: slot k holds [2^k, 2^(k+1)),
 * slot 0 holds 0 and 1 (bpf/pipeprof.bpf.h is the BPF twin). */
#ifndef PIPEPROF_HIST_H
#define PIPEPROF_HIST_H

#include <stdint.h>
#include <linux/types.h>
#include <stdio.h>

unsigned int hist_slot_of(uint64_t value, unsigned int nr_slots);
uint64_t hist_slot_low(unsigned int slot);
uint64_t hist_slot_high(unsigned int slot);
uint64_t hist_total(const __u64 *slots, unsigned int nr_slots);

/* Estimate the p-th percentile (0 < p < 100) by linear interpolation inside the slot that
 * holds it; returns 0 for an empty histogram. */
double hist_percentile(const __u64 *slots, unsigned int nr_slots, double p);

/* BCC's print_log2_hist: "     usecs               : count    distribution" with 40-star bars. */
void hist_print_log2(FILE *out, const __u64 *slots, unsigned int nr_slots, const char *unit);

struct pp_hist;
struct pp_hist_key;

/* Entry idx of the per-CPU switch-in histograms (PP_SWITCH_HISTS in pipeprof.h) under the key
 * the hash map keeps every other histogram by: kind and sub from idx, id 0. */
void hist_switch_key(unsigned int idx, __u32 epoch, struct pp_hist_key *key);

/* sum = the nr_cpus copies of one per-CPU entry, stride bytes apart as libbpf lays them out. */
void hist_sum_cpus(const void *copies, int nr_cpus, size_t stride, struct pp_hist *sum);

#endif

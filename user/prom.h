/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Prometheus text exposition format 0.0.4 onto a stdio stream (a socket's, or an
 * open_memstream buffer that is then served whole). Stateless: the caller writes each family's
 * prom_family() once, followed by all of that family's samples, as the format requires. */
#ifndef PIPEPROF_PROM_H
#define PIPEPROF_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <linux/types.h>

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Big enough for any value prom_format_value() writes ("-2.2250738585072014e-308"). */
#define PROM_VALUE_MAX 32

/* One label; an array of them ends with a { NULL, NULL } entry. A NULL array is no labels. */
struct prom_label {
	const char *key;
	const char *value;
};

/* Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*. */
bool prom_valid_name(const char *name);

/* Label names: [a-zA-Z_][a-zA-Z0-9_]*, without the "__" prefix Prometheus reserves. */
bool prom_valid_label_name(const char *name);

/* A sample value as Prometheus spells it: integral values without a fraction or exponent
 * ("42", not "42.000000" or "4.2e+01"), others in the fewest digits that read back to the
 * same double, and "NaN", "+Inf", "-Inf". Returns buf. */
char *prom_format_value(char *buf, size_t size, double value);

/* Escapes for HELP text (\\ and \n) and for label values (\\, \" and \n). What the format
 * cannot carry, bytes that are not UTF-8 and control characters other than tab, becomes U+FFFD. */
void prom_write_help_escaped(FILE *out, const char *text);
void prom_write_label_value_escaped(FILE *out, const char *value);

/*
 * Each returns 0, -EINVAL for an invalid metric name, label name or type (nothing is written
 * then), or -EIO when the stream has failed.
 */

/* "# HELP name help" and "# TYPE name type"; type is "counter", "gauge", "histogram",
 * "summary" or "untyped". A histogram's family takes its base name, without _bucket. */
int prom_family(FILE *out, const char *name, const char *type, const char *help);

/* One sample line: name{key="value",...} value */
int prom_sample(FILE *out, const char *name, const struct prom_label *labels, double value);

/* The same for a count that has outgrown a double's 53 bits of exact integers. */
int prom_sample_u64(FILE *out, const char *name, const struct prom_label *labels,
		    uint64_t value);

/*
 * A log2 histogram (BCC's layout: slot k holds [2^k, 2^(k+1)), slot 0 holds 0 and 1) as a
 * Prometheus histogram: name_bucket lines with cumulative counts, slot k's bound being
 * le = 2^(k+1) * scale (scale 1e-6 turns usecs into seconds), then le="+Inf", name_sum and
 * name_count. Buckets stop at the highest non-empty slot, so an idle histogram costs three
 * series, not nr_slots + 3. The last slot also holds everything above it (the BPF side
 * clamps), so its count only appears under +Inf. sum is the observations' total, already in
 * the exposed unit (seconds for scale 1e-6): callers often keep it in a finer unit than the
 * slots. labels must not hold "le" (-EINVAL).
 */
int prom_log2_histogram(FILE *out, const char *name, const struct prom_label *labels,
			const __u64 *slots, unsigned int nr_slots, double scale, double sum);

#endif

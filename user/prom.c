// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "prom.h"
#include "sanitize.h"

static bool is_name_start(char c, bool colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}

static bool is_name_char(char c, bool colon)
{
	return is_name_start(c, colon) || (c >= '0' && c <= '9');
}

static bool valid_name(const char *name, bool colon)
{
	if (!name || !is_name_start(*name, colon))
		return false;
	for (name++; *name; name++)
		if (!is_name_char(*name, colon))
			return false;
	return true;
}

bool prom_valid_name(const char *name)
{
	return valid_name(name, true);
}

bool prom_valid_label_name(const char *name)
{
	return valid_name(name, false) && strncmp(name, "__", 2);
}

char *prom_format_value(char *buf, size_t size, double value)
{
	if (isnan(value)) {
		snprintf(buf, size, "NaN");
	} else if (isinf(value)) {
		snprintf(buf, size, value > 0 ? "+Inf" : "-Inf");
	} else if (value >= -0x1p63 && value < 0x1p63 && value == (double)(int64_t)value) {
		/* Exact, and no "-0": a counter must read as the integer it is. */
		snprintf(buf, size, "%" PRId64, (int64_t)value);
	} else {
		/* %g drops trailing zeros, so the first precision that reads back is the shortest. */
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(buf, size, "%.*g", prec, value);
			if (strtod(buf, NULL) == value)
				break;
		}
	}
	return buf;
}

/*
 * The format's three escapes, on text that must be UTF-8 (a parser rejects anything else, and
 * with it the whole scrape): an ill-formed sequence becomes U+FFFD, as in the JSON outputs. So
 * do the control characters the format has no escape for but a tab: raw, they would reach the
 * terminal of whoever reads /metrics with curl.
 */
static void write_escaped(FILE *out, const char *s, bool quote)
{
	size_t len = strlen(s);
	uint32_t cp;
	int n;

	for (; len; s += n, len -= n) {
		n = san_utf8_next(s, len, &cp);
		if (n < 0) {
			n = -n;
			fputs(SAN_REPLACEMENT, out);
		} else if (cp == '\\') {
			fputs("\\\\", out);
		} else if (cp == '\n') {
			fputs("\\n", out);
		} else if (cp == '"' && quote) {
			fputs("\\\"", out);
		} else if (san_is_control(cp) && cp != '\t') {
			fputs(SAN_REPLACEMENT, out);
		} else {
			fwrite(s, 1, n, out);
		}
	}
}

void prom_write_help_escaped(FILE *out, const char *text)
{
	write_escaped(out, text, false);
}

void prom_write_label_value_escaped(FILE *out, const char *value)
{
	write_escaped(out, value, true);
}

static const char *const types[] = { "counter", "gauge", "histogram", "summary", "untyped" };

int prom_family(FILE *out, const char *name, const char *type, const char *help)
{
	bool known = false;

	for (size_t i = 0; type && i < sizeof(types) / sizeof(types[0]); i++)
		known |= !strcmp(type, types[i]);
	if (!prom_valid_name(name) || !known)
		return -EINVAL;
	fprintf(out, "# HELP %s ", name);
	prom_write_help_escaped(out, help ? help : "");
	fprintf(out, "\n# TYPE %s %s\n", name, type);
	return ferror(out) ? -EIO : 0;
}

static bool valid_labels(const struct prom_label *labels, bool histogram)
{
	for (; labels && labels->key; labels++)
		if (!prom_valid_label_name(labels->key) || !labels->value ||
		    (histogram && !strcmp(labels->key, "le")))
			return false;
	return true;
}

/* name{k="v",...,le="bound"}: le, when given, goes last, after the caller's labels. */
static void write_series(FILE *out, const char *name, const char *suffix,
			 const struct prom_label *labels, const char *le)
{
	const char *sep = "{";

	fprintf(out, "%s%s", name, suffix);
	for (; labels && labels->key; labels++) {
		fprintf(out, "%s%s=\"", sep, labels->key);
		prom_write_label_value_escaped(out, labels->value);
		fputc('"', out);
		sep = ",";
	}
	if (le) {
		fprintf(out, "%sle=\"%s\"", sep, le);
		sep = ",";
	}
	if (*sep == ',')
		fputc('}', out);
}

int prom_sample(FILE *out, const char *name, const struct prom_label *labels, double value)
{
	char buf[PROM_VALUE_MAX];

	if (!prom_valid_name(name) || !valid_labels(labels, false))
		return -EINVAL;
	write_series(out, name, "", labels, NULL);
	fprintf(out, " %s\n", prom_format_value(buf, sizeof(buf), value));
	return ferror(out) ? -EIO : 0;
}

int prom_sample_u64(FILE *out, const char *name, const struct prom_label *labels,
		    uint64_t value)
{
	if (!prom_valid_name(name) || !valid_labels(labels, false))
		return -EINVAL;
	write_series(out, name, "", labels, NULL);
	fprintf(out, " %" PRIu64 "\n", value);
	return ferror(out) ? -EIO : 0;
}

int prom_log2_histogram(FILE *out, const char *name, const struct prom_label *labels,
			const __u64 *slots, unsigned int nr_slots, double scale, double sum)
{
	char le[PROM_VALUE_MAX], buf[PROM_VALUE_MAX];
	uint64_t cumulative = 0, total = 0;
	int top = -1;

	if (!prom_valid_name(name) || !valid_labels(labels, true) || !nr_slots || nr_slots > 64 ||
	    !(scale > 0) || isinf(scale))
		return -EINVAL;
	for (unsigned int i = 0; i < nr_slots; i++) {
		total += slots[i];
		if (slots[i])
			top = i;
	}
	/* The last slot is open-ended: +Inf is its only honest bound. */
	if (top >= (int)nr_slots - 1)
		top = nr_slots - 2;
	for (int i = 0; i <= top; i++) {
		cumulative += slots[i];
		write_series(out, name, "_bucket", labels,
			     prom_format_value(le, sizeof(le), (double)(2ULL << i) * scale));
		fprintf(out, " %" PRIu64 "\n", cumulative);
	}
	write_series(out, name, "_bucket", labels, "+Inf");
	fprintf(out, " %" PRIu64 "\n", total);
	write_series(out, name, "_sum", labels, NULL);
	fprintf(out, " %s\n", prom_format_value(buf, sizeof(buf), sum));
	write_series(out, name, "_count", labels, NULL);
	fprintf(out, " %" PRIu64 "\n", total);
	return ferror(out) ? -EIO : 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "hist.h"
#include "hist_fmt.h"
#include "sanitize.h"

const struct hist_user_kind hist_user_kinds[] = {
	{ "offcpu", 1u << PP_HK_OFFCPU, "off-CPU episodes by cause, switch-out to wakeup" },
	{ "runq", 1u << PP_HK_RUNQ, "wakeup or preemption to running" },
	{ "io", 1u << PP_HK_IO, "block request latency, issue to completion, per disk" },
	{ "gpu-sync", 1u << PP_HK_GPU_SYNC, "synchronising GPU API calls, per API" },
	{ "launch", 1u << PP_HK_LAUNCH, "kernel launches: rate, gap between a thread's launches" },
	{ "memcpy", 1u << PP_HK_COPY_BYTES | 1u << PP_HK_COPY_RATE,
	  "host/device copies: bytes per direction, throughput of synchronous ones" },
	{ "batch-wait", 1u << PP_HK_BATCH_WAIT, "the trainer waiting for its next batch (DATA_WAIT)" },
	{ "step", 1u << PP_HK_STEP, "training step time, between backward passes" },
};

const int hist_user_kind_count = sizeof(hist_user_kinds) / sizeof(hist_user_kinds[0]);

__u32 hist_kind_parse(const char *name)
{
	for (int i = 0; i < hist_user_kind_count; i++)
		if (!strcmp(name, hist_user_kinds[i].name))
			return hist_user_kinds[i].bpf_mask;
	return 0;
}

static const char *user_kind_of(__u32 kind)
{
	for (int i = 0; i < hist_user_kind_count; i++)
		if (hist_user_kinds[i].bpf_mask & 1u << kind)
			return hist_user_kinds[i].name;
	return "?";
}

static const char *metric_of(__u32 kind)
{
	switch (kind) {
	case PP_HK_LAUNCH:
		return "gap";
	case PP_HK_COPY_BYTES:
		return "bytes";
	case PP_HK_COPY_RATE:
		return "throughput";
	case PP_HK_STEP:
		return "duration";
	default:
		return "latency";
	}
}

static const char *unit_of(const struct hist_interval *iv, __u32 kind)
{
	if (kind == PP_HK_COPY_BYTES)
		return "bytes";
	if (kind == PP_HK_COPY_RATE)
		return "MB/s";
	return iv->msecs ? "msecs" : "usecs";
}

/* The samples' total in the slots' unit; NAN where a total means nothing (throughputs). */
static double sum_in_unit(const struct hist_interval *iv, const struct hist_entry *e)
{
	if (e->kind == PP_HK_COPY_RATE)
		return NAN;
	if (e->kind == PP_HK_COPY_BYTES)
		return e->sum;
	return e->sum / (iv->msecs ? 1e6 : 1e3);
}

static int cmp_entry(const void *a, const void *b)
{
	const struct hist_entry *x = a, *y = b;
	int c;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	c = strcmp(x->label, y->label);
	if (c)
		return c;
	if (x->sub != y->sub)
		return x->sub < y->sub ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

void hist_sort(struct hist_entry *entries, int n)
{
	qsort(entries, n, sizeof(*entries), cmp_entry);
}

bool hist_entry_shown(const struct hist_interval *iv, const struct hist_entry *e)
{
	if (!(iv->kinds & 1u << e->kind))
		return false;
	if (e->kind != PP_HK_BATCH_WAIT && e->kind != PP_HK_STEP)
		return true;
	return iv->keying == PP_HKEY_THREAD || (iv->trainer_tid && e->id == (__u32)iv->trainer_tid);
}

static void print_whose(FILE *out, const struct hist_interval *iv, const struct hist_entry *e)
{
	bool by_tid = iv->keying == PP_HKEY_THREAD || e->kind == PP_HK_BATCH_WAIT ||
		      e->kind == PP_HK_STEP;
	char comm[SAN_TEXT_SIZE(sizeof(e->comm))];

	/* The thread's owner named it: escapes for a terminal are shown, not sent. */
	if (by_tid)
		fprintf(out, ", tid = %u %s (pid %d)", e->id,
			san_text(comm, sizeof(comm), e->comm, sizeof(e->comm)), e->pid);
	else if (iv->keying == PP_HKEY_PROCESS)
		fprintf(out, ", pid = %u %s", e->id,
			san_text(comm, sizeof(comm), e->comm, sizeof(e->comm)));
}

static void print_header(FILE *out, const struct hist_interval *iv, const struct hist_entry *e)
{
	__u64 samples = hist_total(e->slots, PP_HIST_SLOTS);
	char label[SAN_TEXT_SIZE(sizeof(e->label))];

	fputs(user_kind_of(e->kind), out);
	if (e->label[0])
		fprintf(out, " %s", san_text(label, sizeof(label), e->label, sizeof(e->label)));
	print_whose(out, iv, e);
	switch (e->kind) {
	case PP_HK_LAUNCH:
		fprintf(out, ": %llu launches, %.1f/s; gap since the thread's previous launch",
			(unsigned long long)e->count, iv->interval_s > 0 ? e->count / iv->interval_s : 0);
		break;
	case PP_HK_COPY_BYTES:
		fprintf(out, ": bytes per copy, %llu copies, %.1f MB", (unsigned long long)e->count,
			e->sum / 1e6);
		break;
	case PP_HK_COPY_RATE:
		fprintf(out, ": throughput of %llu synchronous copies, %.1f MB/s overall",
			(unsigned long long)samples, e->aux ? e->sum * 1e3 / e->aux : 0);
		break;
	default:
		break;
	}
	fputs("\n", out);
}

static void print_totals(FILE *out, const struct hist_interval *iv, const struct hist_entry *e)
{
	__u64 samples = hist_total(e->slots, PP_HIST_SLOTS);
	const char *unit = unit_of(iv, e->kind);
	double sum = sum_in_unit(iv, e);

	fprintf(out, "count %llu", (unsigned long long)samples);
	if (!isnan(sum))
		fprintf(out, ", sum %.1f %s, average %.1f", sum, unit, samples ? sum / samples : 0);
	fprintf(out, ", p50 %.1f, p90 %.1f, p99 %.1f %s (estimated within log2 slots)\n",
		hist_percentile(e->slots, PP_HIST_SLOTS, 50), hist_percentile(e->slots, PP_HIST_SLOTS, 90),
		hist_percentile(e->slots, PP_HIST_SLOTS, 99), unit);
}

static bool kind_has_entries(const struct hist_interval *iv, __u32 bpf_mask)
{
	for (int i = 0; i < iv->nr_entries; i++)
		if ((bpf_mask & 1u << iv->entries[i].kind) && hist_entry_shown(iv, &iv->entries[i]))
			return true;
	return false;
}

static const char *empty_note(const struct hist_interval *iv, const struct hist_user_kind *k)
{
	if (k->bpf_mask & 1u << PP_HK_STEP)
		return iv->step_note ? iv->step_note : "no steps detected";
	if (k->bpf_mask & (1u << PP_HK_GPU_SYNC | 1u << PP_HK_LAUNCH | 1u << PP_HK_COPY_BYTES) &&
	    iv->gpu_note)
		return iv->gpu_note;
	if (k->bpf_mask & (1u << PP_HK_BATCH_WAIT | 1u << PP_HK_STEP) && !iv->trainer_tid)
		return "no trainer thread found";
	return "no events";
}

void hist_print_interval_text(FILE *out, const struct hist_interval *iv)
{
	if (iv->timestamps)
		fprintf(out, "%-8s\n", iv->timestamp);
	for (int i = 0; i < iv->nr_entries; i++) {
		const struct hist_entry *e = &iv->entries[i];

		if (!hist_entry_shown(iv, e))
			continue;
		fputs("\n", out);
		print_header(out, iv, e);
		if (hist_total(e->slots, PP_HIST_SLOTS))
			hist_print_log2(out, e->slots, PP_HIST_SLOTS, unit_of(iv, e->kind));
		print_totals(out, iv, e);
	}
	for (int k = 0; k < hist_user_kind_count; k++) {
		const struct hist_user_kind *kind = &hist_user_kinds[k];

		if ((iv->kinds & kind->bpf_mask) && !kind_has_entries(iv, kind->bpf_mask))
			fprintf(out, "\n%s: %s\n", kind->name, empty_note(iv, kind));
	}
	fflush(out);
}

static json_object *json_double(double v)
{
	return isnan(v) ? NULL : json_object_new_double(v);
}

static json_object *entry_json(const struct hist_interval *iv, const struct hist_entry *e)
{
	json_object *o = json_object_new_object(), *slots = json_object_new_array();
	bool by_tid = iv->keying == PP_HKEY_THREAD || e->kind == PP_HK_BATCH_WAIT ||
		      e->kind == PP_HK_STEP;
	__u64 samples = hist_total(e->slots, PP_HIST_SLOTS);
	int top = -1;

	json_object_object_add(o, "kind", json_object_new_string(user_kind_of(e->kind)));
	json_object_object_add(o, "label", json_object_new_string(e->label));
	json_object_object_add(o, "metric", json_object_new_string(metric_of(e->kind)));
	json_object_object_add(o, "unit", json_object_new_string(unit_of(iv, e->kind)));
	json_object_object_add(o, "pid", by_tid || iv->keying == PP_HKEY_PROCESS ?
				json_object_new_int(by_tid ? e->pid : (int)e->id) : NULL);
	json_object_object_add(o, "tid", by_tid ? json_object_new_int(e->id) : NULL);
	json_object_object_add(o, "comm", by_tid || iv->keying == PP_HKEY_PROCESS ?
				json_object_new_string(e->comm) : NULL);
	json_object_object_add(o, "events", json_object_new_uint64(e->count));
	json_object_object_add(o, "count", json_object_new_uint64(samples));
	/* bytes are whole numbers, and doubles would round past 2^53 */
	json_object_object_add(o, "sum", e->kind == PP_HK_COPY_BYTES ? json_object_new_uint64(e->sum) :
				json_double(sum_in_unit(iv, e)));
	json_object_object_add(o, "p50", json_object_new_double(hist_percentile(e->slots, PP_HIST_SLOTS, 50)));
	json_object_object_add(o, "p90", json_object_new_double(hist_percentile(e->slots, PP_HIST_SLOTS, 90)));
	json_object_object_add(o, "p99", json_object_new_double(hist_percentile(e->slots, PP_HIST_SLOTS, 99)));
	if (e->kind == PP_HK_LAUNCH)
		json_object_object_add(o, "rate_per_s", json_object_new_double(
			iv->interval_s > 0 ? e->count / iv->interval_s : 0));
	if (e->kind == PP_HK_COPY_RATE)
		json_object_object_add(o, "aggregate_mb_s", json_object_new_double(
			e->aux ? e->sum * 1e3 / e->aux : 0));
	for (int s = 0; s < PP_HIST_SLOTS; s++)
		if (e->slots[s])
			top = s;
	for (int s = 0; s <= top; s++) {
		json_object *slot = json_object_new_object();

		json_object_object_add(slot, "low", json_object_new_uint64(hist_slot_low(s)));
		json_object_object_add(slot, "high", json_object_new_uint64(hist_slot_high(s)));
		json_object_object_add(slot, "count", json_object_new_uint64(e->slots[s]));
		json_object_array_add(slots, slot);
	}
	json_object_object_add(o, "slots", slots);
	return o;
}

int hist_print_interval_json(FILE *out, const struct hist_interval *iv)
{
	static const char *const keyings[] = { "none", "thread", "process" };
	json_object *root = json_object_new_object(), *hists, *kinds, *lost, *notes;
	const char *text;
	int err = 0;

	if (!root)
		return -ENOMEM;
	json_object_object_add(root, "schema", json_object_new_string("pipeprof.hist/v1"));
	json_object_object_add(root, "pid", json_object_new_int(iv->root));
	json_object_object_add(root, "interval_s", json_object_new_double(iv->interval_s));
	json_object_object_add(root, "timestamp", json_object_new_string(iv->timestamp));
	json_object_object_add(root, "per", json_object_new_string(
		iv->keying < 3 ? keyings[iv->keying] : "?"));
	json_object_object_add(root, "trainer_tid", iv->trainer_tid ?
				json_object_new_int(iv->trainer_tid) : NULL);

	kinds = json_object_new_array();
	notes = json_object_new_object();
	for (int k = 0; k < hist_user_kind_count; k++) {
		const struct hist_user_kind *kind = &hist_user_kinds[k];

		if (!(iv->kinds & kind->bpf_mask))
			continue;
		json_object_array_add(kinds, json_object_new_string(kind->name));
		if (!kind_has_entries(iv, kind->bpf_mask))
			json_object_object_add(notes, kind->name,
					       json_object_new_string(empty_note(iv, kind)));
	}
	json_object_object_add(root, "kinds", kinds);

	hists = json_object_new_array();
	for (int i = 0; i < iv->nr_entries; i++)
		if (hist_entry_shown(iv, &iv->entries[i]))
			json_object_array_add(hists, entry_json(iv, &iv->entries[i]));
	json_object_object_add(root, "histograms", hists);
	json_object_object_add(root, "notes", notes);

	lost = json_object_new_object();
	json_object_object_add(lost, "hist_map_full", json_object_new_uint64(iv->lost_hist_full));
	json_object_object_add(lost, "thread_map_full", json_object_new_uint64(iv->lost_threads_full));
	json_object_object_add(lost, "bpf_recursion_misses", json_object_new_uint64(iv->lost_recursion));
	json_object_object_add(lost, "block_requests_untimed", json_object_new_uint64(iv->lost_rq_full));
	json_object_object_add(lost, "probe_attach_failures", json_object_new_int(iv->probe_failures));
	json_object_object_add(root, "lost", lost);

	text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!text)
		err = -ENOMEM;
	else if (san_fputs_utf8(out, text) || fputc('\n', out) == EOF)	/* comms may not be UTF-8 */
		err = -EIO;
	fflush(out);
	json_object_put(root);
	return err;
}

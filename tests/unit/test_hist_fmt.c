// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <math.h>
#include <stdlib.h>
#include <json-c/json.h>
#include "gpu_apis.h"
#include "hist.h"
#include "hist_fmt.h"
#include "unit.h"

static char *render_text(const struct hist_interval *iv)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	hist_print_interval_text(f, iv);
	fclose(f);
	return buf;
}

static json_object *render_json(const struct hist_interval *iv)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_object *o;

	CHECK_EQ_INT(hist_print_interval_json(f, iv), 0);
	fclose(f);
	/* One object on one line. */
	CHECK(len > 0 && buf[len - 1] == '\n' && !memchr(buf, '\n', len - 1));
	o = json_tokener_parse(buf);
	free(buf);
	return o;
}

/* The expected text; PIPEPROF_UPDATE_GOLDEN=1 rewrites it from got instead (review the diff). */
static char *golden(const char *rel, const char *got)
{
	char path[512], *text = calloc(1, 65536);
	FILE *f;

	if (getenv("PIPEPROF_UPDATE_GOLDEN")) {
		f = fopen(UNIT_SRC_PATH(path, rel), "w");
		if (f) {
			fputs(got, f);
			fclose(f);
		}
	}
	f = fopen(UNIT_SRC_PATH(path, rel), "r");

	if (CHECK_MSG(f, "golden file %s missing", path)) {
		size_t n = fread(text, 1, 65535, f);

		text[n] = 0;
		fclose(f);
	}
	return text;
}

TEST(test_kind_names)
{
	CHECK_EQ_U64(hist_kind_parse("offcpu"), 1u << PP_HK_OFFCPU);
	CHECK_EQ_U64(hist_kind_parse("runq"), 1u << PP_HK_RUNQ);
	CHECK_EQ_U64(hist_kind_parse("io"), 1u << PP_HK_IO);
	CHECK_EQ_U64(hist_kind_parse("gpu-sync"), 1u << PP_HK_GPU_SYNC);
	CHECK_EQ_U64(hist_kind_parse("launch"), 1u << PP_HK_LAUNCH);
	CHECK_EQ_U64(hist_kind_parse("memcpy"), 1u << PP_HK_COPY_BYTES | 1u << PP_HK_COPY_RATE);
	CHECK_EQ_U64(hist_kind_parse("batch-wait"), 1u << PP_HK_BATCH_WAIT);
	CHECK_EQ_U64(hist_kind_parse("step"), 1u << PP_HK_STEP);
	CHECK_EQ_U64(hist_kind_parse("gpu"), 0);
	CHECK_EQ_U64(hist_kind_parse(""), 0);
	CHECK_EQ_U64(hist_kind_parse("RUNQ"), 0);
	/* Every BPF histogram belongs to exactly one user kind. */
	for (int k = 0; k < PP_NR_HIST_KINDS; k++) {
		int owners = 0;

		for (int i = 0; i < hist_user_kind_count; i++)
			owners += !!(hist_user_kinds[i].bpf_mask & 1u << k);
		CHECK_MSG(owners == 1, "BPF kind %d has %d user kinds", k, owners);
	}
}

/* gpu_api_stats is indexed by the synchronising APIs' ids, which must come first. */
TEST(test_gpu_api_table)
{
	CHECK(gpu_api_count < PP_SELFTEST_API);
	CHECK(gpu_api_count <= 0xff);	/* the cookie keeps the id in its low byte */
	for (int i = 0; i < gpu_api_count; i++)
		CHECK_MSG((gpu_apis[i].class == GPU_SYNC) == (i < gpu_sync_api_count), "%s at %d",
			  gpu_apis[i].name, i);
	CHECK_STR(copy_dir_name(PP_COPY_HTOD), "HtoD");
	CHECK_STR(copy_dir_name(PP_COPY_DEFAULT), "default");
	CHECK_STR(copy_dir_name(99), "?");
}

static struct hist_entry entry(__u32 kind, const char *label, __u32 id, __u64 count, __u64 sum)
{
	struct hist_entry e = { .kind = kind, .id = id, .count = count, .sum = sum };

	snprintf(e.label, sizeof(e.label), "%s", label);
	return e;
}

/* One interval of every shape: time slots, a launch with its rate, copies, the trainer filter. */
static void sample_interval(struct hist_interval *iv, struct hist_entry *e)
{
	memset(iv, 0, sizeof(*iv));
	iv->root = 4242;
	iv->interval_s = 5;
	snprintf(iv->timestamp, sizeof(iv->timestamp), "12:34:56");
	iv->timestamps = true;
	iv->kinds = hist_kind_parse("runq") | hist_kind_parse("launch") | hist_kind_parse("memcpy") |
		    hist_kind_parse("batch-wait") | hist_kind_parse("io");
	iv->trainer_tid = 4242;

	e[0] = entry(PP_HK_RUNQ, "", 0, 35, 0);
	e[0].slots[0] = 1, e[0].slots[2] = 4, e[0].slots[3] = 20, e[0].slots[5] = 10;
	e[0].sum = 35 * 6000;	/* ns: 6 usecs on average */
	e[1] = entry(PP_HK_LAUNCH, "cudaLaunchKernel", 0, 200, 199 * 1000000ULL);
	e[1].slots[9] = 199;	/* 199 gaps of 1 ms: the first launch has none */
	e[2] = entry(PP_HK_COPY_BYTES, "HtoD", 0, 3, 3 << 20);
	e[2].slots[20] = 3;
	e[3] = entry(PP_HK_COPY_RATE, "HtoD", 0, 2, 2 << 20);
	e[3].aux = 200000;	/* 2 MiB in 200 us: 10485.76 MB/s */
	e[3].slots[13] = 2;
	e[4] = entry(PP_HK_BATCH_WAIT, "", 4242, 2, 3000000);
	e[4].slots[10] = 2;
	snprintf(e[4].comm, sizeof(e[4].comm), "python3");
	e[4].pid = 4242;
	e[5] = entry(PP_HK_BATCH_WAIT, "", 4250, 7, 7000);	/* not the trainer: hidden */
	e[5].slots[0] = 7;
	e[5].pid = 4242;
	iv->entries = e;
	iv->nr_entries = 6;
	hist_sort(e, 6);
}

TEST(test_text_layout)
{
	struct hist_entry e[6];
	struct hist_interval iv;
	char *got, *want;

	sample_interval(&iv, e);
	got = render_text(&iv);
	want = golden("tests/golden/hist_interval.txt", got);
	CHECK_STR(got, want);
	free(got);
	free(want);
}

TEST(test_text_per_process_msecs)
{
	struct hist_entry e[2] = {
		entry(PP_HK_OFFCPU, "DATA_WAIT", 4242, 3, 3 * 40000000ULL),
		entry(PP_HK_OFFCPU, "IO_WAIT", 4250, 1, 5000000),
	};
	struct hist_interval iv = {
		.root = 4242, .interval_s = 1, .msecs = true, .keying = PP_HKEY_PROCESS,
		.kinds = hist_kind_parse("offcpu") | hist_kind_parse("step"), .entries = e,
		.nr_entries = 2, .step_note = "no steps detected: because",
	};
	char *got, *want;

	e[0].slots[5] = 3;	/* 40 ms */
	e[1].slots[2] = 1;	/* 5 ms */
	snprintf(e[0].comm, sizeof(e[0].comm), "python3");
	snprintf(e[1].comm, sizeof(e[1].comm), "pt_data_worker");
	got = render_text(&iv);
	want = golden("tests/golden/hist_per_process_msecs.txt", got);
	CHECK_STR(got, want);
	free(got);
	free(want);
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;

	json_object_object_get_ex(o, key, &v);
	return v;
}

TEST(test_json)
{
	struct hist_entry e[6];
	struct hist_interval iv;
	json_object *o, *hists, *h, *slots;
	int nr_launch = 0, nr_batch = 0;

	sample_interval(&iv, e);
	iv.lost_hist_full = 3;
	o = render_json(&iv);
	if (!CHECK(o))
		return;
	CHECK_STR(json_object_get_string(get(o, "schema")), "pipeprof.hist/v1");
	CHECK_EQ_INT(json_object_get_int(get(o, "pid")), 4242);
	CHECK_STR(json_object_get_string(get(o, "per")), "none");
	CHECK_EQ_INT(json_object_get_int(get(get(o, "lost"), "hist_map_full")), 3);
	/* io was asked for and saw nothing: said so, not left out silently */
	CHECK_STR(json_object_get_string(get(get(o, "notes"), "io")), "no events");
	hists = get(o, "histograms");
	CHECK_EQ_INT(json_object_array_length(hists), 5);	/* the non-trainer batch-wait is hidden */
	for (size_t i = 0; i < json_object_array_length(hists); i++) {
		const char *kind;

		h = json_object_array_get_idx(hists, i);
		kind = json_object_get_string(get(h, "kind"));
		if (!strcmp(kind, "runq")) {
			CHECK_EQ_INT(json_object_get_int(get(h, "count")), 35);
			CHECK(fabs(json_object_get_double(get(h, "sum")) - 210.0) < 1e-9);
			CHECK_STR(json_object_get_string(get(h, "unit")), "usecs");
			CHECK(get(h, "pid") == NULL && get(h, "tid") == NULL);
			slots = get(h, "slots");
			/* every slot up to the highest used one, as the text shows them */
			CHECK_EQ_INT(json_object_array_length(slots), 6);
			CHECK_EQ_INT(json_object_get_int(get(json_object_array_get_idx(slots, 3), "count")), 20);
			CHECK_EQ_INT(json_object_get_int(get(json_object_array_get_idx(slots, 3), "low")), 8);
			CHECK_EQ_INT(json_object_get_int(get(json_object_array_get_idx(slots, 3), "high")), 15);
		} else if (!strcmp(kind, "launch")) {
			nr_launch++;
			CHECK_EQ_INT(json_object_get_int(get(h, "events")), 200);
			CHECK_EQ_INT(json_object_get_int(get(h, "count")), 199);
			CHECK(fabs(json_object_get_double(get(h, "rate_per_s")) - 40.0) < 1e-9);
			CHECK_STR(json_object_get_string(get(h, "metric")), "gap");
		} else if (!strcmp(kind, "memcpy") &&
			   !strcmp(json_object_get_string(get(h, "metric")), "throughput")) {
			CHECK(fabs(json_object_get_double(get(h, "aggregate_mb_s")) - 10485.76) < 1e-6);
			CHECK(get(h, "sum") == NULL);	/* a sum of rates means nothing */
			CHECK_STR(json_object_get_string(get(h, "unit")), "MB/s");
		} else if (!strcmp(kind, "memcpy")) {
			/* bytes stay integers, exact past 2^53 */
			CHECK(json_object_is_type(get(h, "sum"), json_type_int));
			CHECK_EQ_U64(json_object_get_uint64(get(h, "sum")), 3 << 20);
		} else if (!strcmp(kind, "batch-wait")) {
			nr_batch++;
			CHECK_EQ_INT(json_object_get_int(get(h, "tid")), 4242);
			CHECK_STR(json_object_get_string(get(h, "comm")), "python3");
		}
	}
	CHECK_EQ_INT(nr_launch, 1);
	CHECK_EQ_INT(nr_batch, 1);
	json_object_put(o);

	/* Per thread, every thread's batch-wait shows. */
	iv.keying = PP_HKEY_THREAD;
	o = render_json(&iv);
	if (CHECK(o))
		CHECK_EQ_INT(json_object_array_length(get(o, "histograms")), 6);
	json_object_put(o);
}

TEST(test_sort_order)
{
	struct hist_entry e[4] = {
		entry(PP_HK_IO, "vdb", 0, 1, 1),
		entry(PP_HK_RUNQ, "", 9, 1, 1),
		entry(PP_HK_IO, "vda", 0, 1, 1),
		entry(PP_HK_RUNQ, "", 3, 1, 1),
	};

	hist_sort(e, 4);
	CHECK_EQ_INT(e[0].kind, PP_HK_RUNQ);
	CHECK_EQ_INT(e[0].id, 3);
	CHECK_EQ_INT(e[1].id, 9);
	CHECK_STR(e[2].label, "vda");
	CHECK_STR(e[3].label, "vdb");
}

int main(void)
{
	RUN_TEST(test_kind_names);
	RUN_TEST(test_gpu_api_table);
	RUN_TEST(test_text_layout);
	RUN_TEST(test_text_per_process_msecs);
	RUN_TEST(test_json);
	RUN_TEST(test_sort_order);
	return unit_summary();
}

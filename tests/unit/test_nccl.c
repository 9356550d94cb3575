// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* NCCL: the APIs' table (gpu_apis.c), their symbols in the fake libnccl (weak nccl* with a
 * pnccl* alias, as NCCL exports them), the state of a blocking call's time, and the report's
 * NCCL section in text and JSON (nccl_report.c). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <json-c/json.h>
#include "elfsym.h"
#include "gpu_apis.h"
#include "report.h"
#include "unit.h"

static const char *const names[PP_NR_NCCL_CALLS] = {
	"ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclReduce",
	"ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd",
};

TEST(test_table)
{
	int seen[PP_NR_NCCL_CALLS] = { 0 };

	for (int op = 0; op < PP_NR_NCCL_CALLS; op++)
		CHECK_STR(nccl_op_name(op), names[op]);
	CHECK_STR(nccl_op_name(PP_NR_NCCL_CALLS), "?");
	for (int i = 0; i < gpu_api_count; i++) {
		if (gpu_apis[i].lib != LIB_NCCL)
			continue;
		/* ids fit the cookie's low byte below the self-test's; ops its second byte */
		CHECK(i < PP_SELFTEST_API);
		if (gpu_apis[i].class == NCCL_CALL && gpu_apis[i].nccl_op < PP_NR_NCCL_CALLS)
			seen[gpu_apis[i].nccl_op]++;
		else
			CHECK_MSG(gpu_apis[i].class != NCCL_CALL, "%s", gpu_apis[i].name);
	}
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++)
		CHECK_MSG(seen[op] == 1, "%s probed %d times", names[op], seen[op]);
}

TEST(test_call_state)
{
	CHECK_EQ_INT(pp_call_state(PP_COMM_WAIT), PP_COMM_WAIT);
	CHECK_EQ_INT(pp_call_state(PP_GPU_WAIT), PP_GPU_WAIT);
	/* A thread record written before the field existed, or zeroed: a GPU sync. */
	CHECK_EQ_INT(pp_call_state(0), PP_GPU_WAIT);
	CHECK_EQ_INT(pp_call_state(0xdead), PP_GPU_WAIT);
}

static void resolve(const char *rel, struct elf_func *funcs, int n, int *found)
{
	char path[PATH_MAX];

	UNIT_SRC_PATH(path, rel);
	if (access(path, R_OK)) {
		*found = -1;
		return;
	}
	*found = elf_resolve_funcs(path, funcs, n);
}

TEST(test_fake_library_symbols)
{
	struct elf_func funcs[2 * PP_NR_NCCL_CALLS] = {};
	char pnames[PP_NR_NCCL_CALLS][32];
	int found;

	for (int op = 0; op < PP_NR_NCCL_CALLS; op++) {
		snprintf(pnames[op], sizeof(pnames[op]), "p%s", names[op]);
		funcs[op].name = names[op];
		funcs[PP_NR_NCCL_CALLS + op].name = pnames[op];
	}
	resolve(".output/fakecuda/libnccl.so.2", funcs, 2 * PP_NR_NCCL_CALLS, &found);
	if (found < 0) {
		SKIP("the fake libnccl is not built (make fixtures)");
		return;
	}
	CHECK_EQ_INT(found, 2 * PP_NR_NCCL_CALLS);
	/* The weak name and its alias are one function: one probe serves both. */
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++)
		CHECK_MSG(funcs[op].offset == funcs[PP_NR_NCCL_CALLS + op].offset, "%s", names[op]);

	memset(funcs, 0, sizeof(funcs));
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++)
		funcs[op].name = names[op];
	resolve(".output/fakecuda/noreduce/libnccl.so.2", funcs, PP_NR_NCCL_CALLS, &found);
	if (found < 0)
		return;
	CHECK_EQ_INT(found, PP_NR_NCCL_CALLS - 1);
	CHECK(!funcs[PP_NCCL_REDUCE].found && funcs[PP_NCCL_REDUCE_SCATTER].found);
}

static struct report *nccl_report(void)
{
	struct report *r = calloc(1, sizeof(*r));
	struct lib_result *lib = calloc(1, sizeof(*lib));

	r->start_ns = 1000000000ULL;
	r->end_ns = 3000000000ULL;
	r->nr_nccl_libs = 1;
	r->nccl_libs = lib;
	r->nccl_traced = true;
	lib->pid = 42;
	lib->kind = LIB_NCCL;
	snprintf(lib->path, sizeof(lib->path), "/opt/nccl/lib/libnccl.so.2");
	lib->nr_probes = 1;
	lib->probes[0] = (struct probe_result){ .api = "ncclAllReduce", .attached = true };
	lib->nr_missing = 1;
	lib->missing[0] = "ncclReduce";
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++)
		r->nccl[op].name = names[op];
	r->nccl[PP_NCCL_ALL_REDUCE] = (struct nccl_result){ .name = "ncclAllReduce", .calls = 200,
		.bytes = 200ULL << 20, .total_ns = 400000000, .max_ns = 5000000 };
	r->nccl[PP_NCCL_ALL_REDUCE].slots[10] = 200;	/* 1024..2047 us */
	r->nccl[PP_NCCL_ALL_GATHER] = (struct nccl_result){ .name = "ncclAllGather", .calls = 10,
		.bytes = 0, .unsized = 10, .total_ns = 1000000, .max_ns = 200000 };
	r->nccl[PP_NCCL_ALL_GATHER].slots[6] = 10;
	return r;
}

static char *text_of(const struct report *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	nccl_print_text(f, r);
	fclose(f);
	return buf;
}

TEST(test_text)
{
	struct report *r = nccl_report(), none = {};
	char *text = text_of(r);

	CHECK_MSG(strstr(text, "NCCL (1 library probed: /opt/nccl/lib/libnccl.so.2)"), "%s", text);
	CHECK_MSG(strstr(text, "ncclAllReduce: 200 calls (100.0/s), 209.7 MB, 0.400 s inside, "
			 "mean 2000.0 us"), "%s", text);
	CHECK_MSG(strstr(text, "ncclAllGather: 10 calls (5.0/s), 0 B received"), "%s", text);
	CHECK_MSG(strstr(text, "10 of them not in the bytes"), "%s", text);
	CHECK_MSG(!strstr(text, "ncclBroadcast"), "%s", text);
	free(text);

	r->nccl_traced = false;
	text = text_of(r);
	CHECK_MSG(strstr(text, "no collective could be probed"), "%s", text);
	free(text);

	text = text_of(&none);
	CHECK_STR(text, "");
	free(text);
	free(r->nccl_libs);
	free(r);
}

TEST(test_json)
{
	struct report *r = nccl_report();
	json_object *o = nccl_json(r), *calls, *c, *v, *lib;

	CHECK(json_object_object_get_ex(o, "traced", &v) && json_object_get_boolean(v));
	CHECK(json_object_object_get_ex(o, "calls", &calls) &&
	      json_object_array_length(calls) == 2);
	c = json_object_array_get_idx(calls, 1);
	CHECK(json_object_object_get_ex(c, "name", &v) &&
	      !strcmp(json_object_get_string(v), "ncclAllGather"));
	CHECK(json_object_object_get_ex(c, "unsized_calls", &v) && json_object_get_int64(v) == 10);
	CHECK(json_object_object_get_ex(c, "bytes", &v) && json_object_get_int64(v) == 0);
	c = json_object_array_get_idx(calls, 0);
	CHECK(json_object_object_get_ex(c, "mean_ns", &v) && json_object_get_int64(v) == 2000000);
	CHECK(json_object_object_get_ex(o, "libraries", &v) && json_object_array_length(v) == 1);
	lib = json_object_array_get_idx(v, 0);
	CHECK(json_object_object_get_ex(lib, "missing", &v) && json_object_array_length(v) == 1 &&
	      !strcmp(json_object_get_string(json_object_array_get_idx(v, 0)), "ncclReduce"));
	CHECK(json_object_object_get_ex(lib, "kind", &v) &&
	      !strcmp(json_object_get_string(v), "nccl"));
	json_object_put(o);
	free(r->nccl_libs);
	free(r);
}

int main(void)
{
	RUN_TEST(test_table);
	RUN_TEST(test_call_state);
	RUN_TEST(test_fake_library_symbols);
	RUN_TEST(test_text);
	RUN_TEST(test_json);
	return unit_summary();
}

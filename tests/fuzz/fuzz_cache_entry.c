// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The attach cache's entries, read back from /var/cache/pipeprof: the kernel-features entry and
 * an entry of symbol offsets, and the cached CO-RE types' frame. Whatever the text, a parse
 * either refuses it or gives answers inside what the entry may say: flags 0 or 1, a bounded
 * preempt-count distance, tracepoint type ids in the range of a kernel's BTF, and offsets in
 * the library's code; and what it accepts formats back to the same answers.
 */
#include <errno.h>
#include "cache.h"
#include "core_btf.h"
#include "fuzz.h"
#include "kfeatures.h"
#include "symcache.h"

#define BOOT "d54065d9-d8ae-4680-adb0-4dd16716ba42"
#define RELEASE "6.18.44"

static void kernel_entry(const char *text)
{
	struct kfeatures kf, again;
	char out[1024];
	int len;

	if (kfeatures_parse(text, BOOT, RELEASE, &kf))
		return;
	FUZZ_CHECK(kf.from_cache);
	FUZZ_CHECK(kf.preempt_count_rq_delta <= (1 << 24) && kf.preempt_count_rq_delta >= -(1 << 24));
	for (int i = 0; i < KF_TRACEPOINTS; i++)
		FUZZ_CHECK(kf.tp_btf_ids[i] >= 0 && kf.tp_btf_ids[i] <= (1 << 24));
	len = kfeatures_format(&kf, BOOT, RELEASE, out, sizeof(out));
	FUZZ_CHECK(len > 0);
	FUZZ_CHECK(!kfeatures_parse(out, BOOT, RELEASE, &again));
	FUZZ_CHECK(kf.sched_switch_has_prev_state == again.sched_switch_has_prev_state &&
		   kf.has_block_io_start == again.has_block_io_start &&
		   kf.preempt_count_rq_delta == again.preempt_count_rq_delta &&
		   kf.uprobe_multi == again.uprobe_multi &&
		   kf.preempt_count_proven == again.preempt_count_proven &&
		   !memcmp(kf.tp_btf_ids, again.tp_btf_ids, sizeof(kf.tp_btf_ids)));
}

static void symbol_entry(const char *text)
{
	static const char *names[] = { "cudaStreamSynchronize", "cuMemcpy", "_ZN5torch8autograd6Engine7executeE*" };
	struct elf_identity id = { .build_id_len = 20, .file_size = 704288, .nr_exec = 2 };
	struct elf_func funcs[3], again[3];
	char out[4096];
	int found;

	id.exec[0].start = 0x1000;
	id.exec[0].end = 0x8000;
	id.exec[1].start = 0x20000;
	id.exec[1].end = 0x21000;
	memset(funcs, 0, sizeof(funcs));
	for (int i = 0; i < 3; i++)
		funcs[i].name = names[i];
	found = symcache_parse(text, &id, funcs, 3);
	if (found < 0)
		return;
	FUZZ_CHECK(found <= 3);
	for (int i = 0; i < 3; i++) {
		FUZZ_CHECK(funcs[i].name == names[i]);
		if (!funcs[i].found)
			continue;
		FUZZ_CHECK((funcs[i].offset >= 0x1000 && funcs[i].offset < 0x8000) ||
			   (funcs[i].offset >= 0x20000 && funcs[i].offset < 0x21000));
	}
	FUZZ_CHECK(symcache_format(&id, funcs, 3, out, sizeof(out)) > 0);
	memcpy(again, funcs, sizeof(again));
	FUZZ_CHECK(symcache_parse(out, &id, again, 3) == found);
	FUZZ_CHECK(!memcmp(funcs, again, sizeof(again)));
}

static void core_btf_entry(const uint8_t *data, size_t size)
{
	static char again[CACHE_MAX_ENTRY];
	const char *btf;
	size_t len;
	int n;

	if (core_btf_unwrap((const char *)data, size, &btf, &len))
		return;
	FUZZ_CHECK(btf > (const char *)data && btf + len == (const char *)data + size);
	n = core_btf_wrap(again, sizeof(again), btf, len);
	FUZZ_CHECK(n > 0 && (size_t)n == size && !memcmp(again, data, size));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_strndup(data, size);

	core_btf_entry(data, size);
	kernel_entry(text);
	symbol_entry(text);
	free(text);
	return 0;
}

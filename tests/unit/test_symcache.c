// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Symbol lookups through the caches: the entry's text, what it refuses, and the real path on
 * libc (memory, then disk, each answer the same as reading the file). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "symcache.h"
#include "unit.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

static struct elf_identity fake_identity(void)
{
	struct elf_identity id = { .build_id_len = 20, .file_size = 123456, .owner = 0, .nr_exec = 1 };

	for (int i = 0; i < 20; i++)
		id.build_id[i] = i * 13;
	id.exec[0].start = 0x1000;
	id.exec[0].end = 0x9000;
	return id;
}

TEST(test_entry_text)
{
	struct elf_identity id = fake_identity(), other;
	struct elf_func funcs[3] = {
		{ .name = "cudaStreamSynchronize", .found = true, .value = 0x4d90, .size = 0x80,
		  .offset = 0x4d90, .starts_with_endbr64 = true },
		{ .name = "cudaNope" },
		{ .name = "_ZN5torch8autograd6Engine7executeE*", .found = true, .value = 0x2000,
		  .size = 0x40, .offset = 0x2000 },
	}, back[3] = { { .name = funcs[0].name }, { .name = funcs[1].name }, { .name = funcs[2].name } };
	char text[2048], edit[2048], name[256], name2[256], *at;
	int len = symcache_format(&id, funcs, 3, text, sizeof(text));

	CHECK(len > 0);
	CHECK_EQ_INT(symcache_format(&id, funcs, 3, text, 40), -ENOSPC);
	len = symcache_format(&id, funcs, 3, text, sizeof(text));
	CHECK_EQ_INT(symcache_parse(text, &id, back, 3), 2);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ_INT(back[i].found, funcs[i].found);
		CHECK_EQ_INT(back[i].offset, funcs[i].offset);
		CHECK_EQ_INT(back[i].value, funcs[i].value);
		CHECK_EQ_INT(back[i].size, funcs[i].size);
		CHECK_EQ_INT(back[i].starts_with_endbr64, funcs[i].starts_with_endbr64);
	}
	/* Other names, in another order, or fewer: not this lookup's entry. */
	back[1].name = "cudaOther";
	CHECK_EQ_INT(symcache_parse(text, &id, back, 3), -EINVAL);
	back[1].name = funcs[1].name;
	CHECK_EQ_INT(symcache_parse(text, &id, back, 2), -EINVAL);
	/* Another file size. */
	other = id;
	other.file_size++;
	CHECK_EQ_INT(symcache_parse(text, &other, back, 3), -EINVAL);
	/* An offset that is not in this file's code. */
	other = id;
	other.exec[0].end = 0x3000;
	CHECK_EQ_INT(symcache_parse(text, &other, back, 3), -EINVAL);
	/* Torn anywhere. */
	for (int cut = 0; cut < len; cut++) {
		snprintf(edit, sizeof(edit), "%.*s", cut, text);
		CHECK_EQ_INT(symcache_parse(edit, &id, back, 3), -EINVAL);
	}
	/* Anything after the end, or trailing bytes on a line. */
	snprintf(edit, sizeof(edit), "%sx\n", text);
	CHECK_EQ_INT(symcache_parse(edit, &id, back, 3), -EINVAL);
	snprintf(edit, sizeof(edit), "%s", text);
	at = strstr(edit, "cudaNope");
	at[-2] = '7';	/* the endbr flag */
	CHECK_EQ_INT(symcache_parse(edit, &id, back, 3), -EINVAL);

	/* The key: build-id, names and owner. */
	symcache_entry_name(&id, funcs, 3, name, sizeof(name));
	CHECK(!strncmp(name, "elf-000d1a27", 12));
	CHECK(strstr(name, "-u0") != NULL);
	other = id;
	other.owner = 1000;
	symcache_entry_name(&other, funcs, 3, name2, sizeof(name2));
	CHECK(strcmp(name, name2) != 0);
	symcache_entry_name(&id, funcs, 2, name2, sizeof(name2));
	CHECK(strcmp(name, name2) != 0);
}

static int resolve_libc(struct elf_func *funcs)
{
	static const char *names[] = { "malloc", "free", "no_such_function_here", "memcpy" };

	for (int i = 0; i < 4; i++) {
		memset(&funcs[i], 0, sizeof(funcs[i]));
		funcs[i].name = names[i];
	}
	return symcache_resolve(LIBC, funcs, 4);
}

TEST(test_resolve_through_caches)
{
	char dir[] = "/tmp/pipeprof-symcache-test-XXXXXX", cache[256], copy[256];
	struct elf_func direct[4], cached[4];
	struct symcache_stats st;
	int found;

	if (access(LIBC, R_OK)) {
		printf("skip: %s is not here\n", LIBC);
		return;
	}
	CHECK(mkdtemp(dir) != NULL);
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	setenv("PIPEPROF_CACHE_DIR", cache, 1);
	symcache_clear();

	found = resolve_libc(direct);
	CHECK_EQ_INT(found, 3);
	symcache_stats(&st);
	CHECK_EQ_INT(st.reads, 1);
	CHECK_EQ_INT(resolve_libc(cached), 3);
	symcache_stats(&st);
	CHECK_EQ_INT(st.memory_hits, 1);
	symcache_clear();	/* a new run: the disk entry answers */
	CHECK_EQ_INT(resolve_libc(cached), 3);
	symcache_stats(&st);
	CHECK_EQ_INT(st.disk_hits, 1);
	CHECK_EQ_INT(st.reads, 0);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ_INT(cached[i].found, direct[i].found);
		CHECK_EQ_INT(cached[i].offset, direct[i].offset);
		CHECK_EQ_INT(cached[i].starts_with_endbr64, direct[i].starts_with_endbr64);
	}

	/* A copy others may write is read every time and never cached. */
	snprintf(copy, sizeof(copy), "cp %s %s/libc-copy.so && chmod 666 %s/libc-copy.so", LIBC,
		 dir, dir);
	CHECK_EQ_INT(system(copy), 0);
	snprintf(copy, sizeof(copy), "%s/libc-copy.so", dir);
	symcache_clear();
	memset(cached, 0, sizeof(cached));
	cached[0].name = "malloc";
	CHECK_EQ_INT(symcache_resolve(copy, cached, 1), 1);
	symcache_clear();
	CHECK_EQ_INT(symcache_resolve(copy, cached, 1), 1);
	symcache_stats(&st);
	CHECK_EQ_INT(st.reads, 1);
	CHECK_EQ_INT(st.disk_hits, 0);
	unlink(copy);

	snprintf(copy, sizeof(copy), "rm -rf %s", dir);
	CHECK_EQ_INT(system(copy), 0);
	symcache_clear();
	unsetenv("PIPEPROF_CACHE_DIR");
}

int main(void)
{
	RUN_TEST(test_entry_text);
	RUN_TEST(test_resolve_through_caches);
	return unit_summary();
}

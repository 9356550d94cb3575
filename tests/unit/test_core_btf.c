// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The cached CO-RE types' entry (core_btf_entry.c): its name per boot and object, and a frame
 * that refuses a torn or altered payload, since the payload decides which kernel offsets the
 * programs read. */
#include <errno.h>
#include "cache.h"
#include "core_btf.h"
#include "unit.h"

#define BOOT "7ebca1a4-6828-4787-9028-320f5cab9004"

TEST(test_entry_name)
{
	char name[160], other[160];
	const char obj_a[] = "object a", obj_b[] = "object b";

	CHECK_EQ_INT(core_btf_entry_name(name, sizeof(name), BOOT,
					 core_btf_object_hash(obj_a, sizeof(obj_a))), 0);
	CHECK(!strncmp(name, CORE_BTF_PREFIX BOOT "-", strlen(CORE_BTF_PREFIX BOOT "-")));
	CHECK(cache_name_ok(name));
	/* Another build of the BPF object is another entry: its relocations differ. */
	CHECK_EQ_INT(core_btf_entry_name(other, sizeof(other), BOOT,
					 core_btf_object_hash(obj_b, sizeof(obj_b))), 0);
	CHECK(strcmp(name, other));
	/* FNV-1a's published value for "a": the hash is the same on every machine. */
	CHECK(core_btf_object_hash("a", 1) == 0xaf63dc4c8601ec8cULL);
	CHECK_EQ_INT(core_btf_entry_name(name, sizeof(name), "", 1), -EINVAL);
	CHECK_EQ_INT(core_btf_entry_name(name, sizeof(name), "../etc", 1), -EINVAL);
	CHECK_EQ_INT(core_btf_entry_name(name, sizeof(name), "ABCD", 1), -EINVAL);
	CHECK_EQ_INT(core_btf_entry_name(name, 20, BOOT, 1), -ENAMETOOLONG);
}

TEST(test_frame)
{
	const char btf[] = "\x9f\xeb\x01\0 raw types \0 with NULs";
	char entry[256], edit[256];
	const char *payload;
	size_t len;
	int n = core_btf_wrap(entry, sizeof(entry), btf, sizeof(btf));

	CHECK(n > (int)sizeof(btf));
	CHECK(!strncmp(entry, CORE_BTF_MAGIC " ", sizeof(CORE_BTF_MAGIC)));
	CHECK_EQ_INT(core_btf_unwrap(entry, n, &payload, &len), 0);
	CHECK(len == sizeof(btf) && !memcmp(payload, btf, len) && payload > entry);

	/* torn: shorter than its header says, or longer */
	CHECK_EQ_INT(core_btf_unwrap(entry, n - 1, &payload, &len), -EINVAL);
	memcpy(edit, entry, n);
	edit[n] = 'x';
	CHECK_EQ_INT(core_btf_unwrap(edit, n + 1, &payload, &len), -EINVAL);
	/* one byte of the payload changed */
	memcpy(edit, entry, n);
	edit[n - 3] ^= 1;
	CHECK_EQ_INT(core_btf_unwrap(edit, n, &payload, &len), -EINVAL);
	/* another format's header, or none */
	memcpy(edit, entry, n);
	edit[strlen(CORE_BTF_MAGIC) - 1] = '2';
	CHECK_EQ_INT(core_btf_unwrap(edit, n, &payload, &len), -EINVAL);
	CHECK_EQ_INT(core_btf_unwrap("no header at all", 16, &payload, &len), -EINVAL);
	/* the same numbers, spelled otherwise: a NUL before the newline (found by fuzzing) */
	{
		const char *nl = memchr(entry, '\n', n);
		size_t at = nl - entry;

		memcpy(edit, entry, at);
		edit[at] = '\0';
		memcpy(edit + at + 1, entry + at, n - at);
		CHECK_EQ_INT(core_btf_unwrap(edit, n + 1, &payload, &len), -EINVAL);
	}
	CHECK_EQ_INT(core_btf_unwrap(CORE_BTF_MAGIC " 0 cbf29ce484222325\n", 40, &payload, &len),
		     -EINVAL);
	/* no room */
	CHECK_EQ_INT(core_btf_wrap(entry, 20, btf, sizeof(btf)), -EFBIG);
}

int main(void)
{
	RUN_TEST(test_entry_name);
	RUN_TEST(test_frame);
	return unit_summary();
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The cached CO-RE types' entry: its name and its framing (core_btf.h). Pure, unit-tested. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core_btf.h"
#include "intern.h"

uint64_t core_btf_object_hash(const void *obj, size_t size)
{
	return fnv1a(FNV1A_SEED, obj, size);
}

int core_btf_entry_name(char *buf, size_t size, const char *boot_id, uint64_t object_hash)
{
	int n;

	if (!boot_id[0])
		return -EINVAL;
	for (const char *c = boot_id; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') || *c == '-'))
			return -EINVAL;
	n = snprintf(buf, size, CORE_BTF_PREFIX "%s-%016" PRIx64, boot_id, object_hash);
	return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

int core_btf_wrap(char *buf, size_t size, const void *btf, size_t len)
{
	int n = snprintf(buf, size, CORE_BTF_MAGIC " %zu %016" PRIx64 "\n", len,
			 core_btf_object_hash(btf, len));

	if (n < 0 || (size_t)n + len > size)
		return -EFBIG;
	memcpy(buf + n, btf, len);
	return n + (int)len;
}

int core_btf_unwrap(const char *entry, size_t len, const char **btf, size_t *btf_len)
{
	const char *nl = memchr(entry, '\n', len < 128 ? len : 128);
	char header[128], canon[128], tail;
	unsigned long long want_len;
	uint64_t want_hash;
	size_t hlen;

	if (!nl)
		return -EINVAL;
	hlen = nl - entry;
	memcpy(header, entry, hlen);
	header[hlen] = '\0';
	/* The magic holds a space: compared whole, then the two numbers after it. */
	if (strncmp(header, CORE_BTF_MAGIC " ", sizeof(CORE_BTF_MAGIC)) ||
	    sscanf(header + sizeof(CORE_BTF_MAGIC), "%llu %16" SCNx64 "%c", &want_len, &want_hash,
		   &tail) != 2)
		return -EINVAL;
	/* One spelling only, byte for byte: what core_btf_wrap() writes (no sign, case, padding or
	 * NUL variants). */
	snprintf(canon, sizeof(canon), CORE_BTF_MAGIC " %llu %016" PRIx64, want_len, want_hash);
	if (strlen(canon) != hlen || memcmp(entry, canon, hlen) || want_len == 0 ||
	    want_len != len - hlen - 1)
		return -EINVAL;
	if (core_btf_object_hash(nl + 1, want_len) != want_hash)
		return -EINVAL;
	*btf = nl + 1;
	*btf_len = want_len;
	return 0;
}

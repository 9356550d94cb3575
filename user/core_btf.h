/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CO-RE against a small copy of the kernel's types. libbpf finds each relocated type's
 * candidates by walking every type of the kernel's BTF (126k on 6.18), once per local type: a
 * dozen walks, ~10 ms of every attach. bpftool's `gen min_core_btf` keeps only the types and
 * members this object relocates against, about 1 KB; cached per boot and per build of the BPF
 * object (cache.h's trust rules), it is handed to libbpf as btf_custom_path. A run that found
 * none makes it as it ends, so the next attach on this boot is the cheaper one.
 */
#ifndef PIPEPROF_CORE_BTF_H
#define PIPEPROF_CORE_BTF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CORE_BTF_PREFIX "corebtf-"
/* Builds of the BPF object whose entries a boot keeps (the most recently written). */
#define CORE_BTF_BUILDS_KEPT 4
#define CORE_BTF_MAGIC "pipeprof-core-btf 1"

struct core_btf {
	int fd;			/* a memfd holding the types, or -1 */
	char path[32];		/* /proc/self/fd/N: libbpf takes a path */
	bool missing;		/* none cached for this boot and object: core_btf_save() makes it */
};

/* Pure (core_btf_entry.c). The object's identity: FNV-1a over its bytes. */
uint64_t core_btf_object_hash(const void *obj, size_t size);
/* The entry's name for this boot and object; -EINVAL for a boot id that is not one. */
int core_btf_entry_name(char *buf, size_t size, const char *boot_id, uint64_t object_hash);
/* An entry is a header line, CORE_BTF_MAGIC, the payload's length and its FNV-1a, then the
 * payload: a torn or altered file reads as none rather than as wrong offsets. */
int core_btf_wrap(char *buf, size_t size, const void *btf, size_t len);
/* The payload of an entry (a pointer into it) and its length; -EINVAL when malformed. */
int core_btf_unwrap(const char *entry, size_t len, const char **btf, size_t *btf_len);

/* The cached types for the BPF object obj: cb->path when found (cb->fd >= 0), else
 * cb->missing when a cache is there to fill. Never an error: without it CO-RE reads the
 * kernel's whole BTF, as before. */
void core_btf_find(struct core_btf *cb, const void *obj, size_t size, bool verbose);
/* Closes what core_btf_find() opened; safe on a zeroed struct and twice. */
void core_btf_release(struct core_btf *cb);
/* Makes and caches the types with bpftool when none are cached; once a process. */
void core_btf_save(const void *obj, size_t size, bool verbose);

#endif

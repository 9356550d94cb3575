/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* elf_resolve_funcs() behind two caches: in memory, so a library mapped by many processes of
 * the job is read once a run; on disk by build-id (cache.h), so libtorch_cpu's 33k symbols are
 * not searched again on every attach. */
#ifndef PIPEPROF_SYMCACHE_H
#define PIPEPROF_SYMCACHE_H

#include <stddef.h>
#include <stdint.h>
#include "elfsym.h"

#define SYMCACHE_MAX_RANGES 8

/* What ties an entry to a file: its build-id, its size, and where its code is, to check every
 * offset read back against. */
struct elf_identity {
	unsigned char build_id[64];
	size_t build_id_len;
	uint64_t file_size;
	uint32_t owner;		/* the file's uid: an entry serves only files of the same owner */
	struct { uint64_t start, end; } exec[SYMCACHE_MAX_RANGES];	/* file offsets */
	int nr_exec;
};

/* As elf_resolve_funcs(), through the caches. */
int symcache_resolve(const char *path, struct elf_func *funcs, int n);

/* Drops the in-memory cache (tests, and the end of a run). */
void symcache_clear(void);

/* Counters for -v and the tests: lookups answered from memory, from disk, and by reading the
 * symbol tables. */
struct symcache_stats {
	int memory_hits, disk_hits, reads;
};
void symcache_stats(struct symcache_stats *out);

/* The disk entry, pure for the unit tests. Format returns the length or -ENOSPC. Parse fills
 * funcs[] (names given) from text and returns how many were found, or -EINVAL when the text is
 * not a whole entry for exactly these names and this identity, or an offset is not in code. */
int symcache_format(const struct elf_identity *id, const struct elf_func *funcs, int n,
		    char *buf, size_t size);
int symcache_parse(const char *text, const struct elf_identity *id, struct elf_func *funcs, int n);

/* The entry's name: elf-BUILDID-NAMESHASH-uOWNER (the names asked for are part of the key, and
 * the owner too, so that a file with a forged build-id moves no one's probes but its owner's). */
void symcache_entry_name(const struct elf_identity *id, const struct elf_func *funcs, int n,
			 char *buf, size_t size);

#endif

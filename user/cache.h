/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A small on-disk cache (/var/cache/pipeprof) of what is dear to learn at attach: the kernel's
 * features for this boot, and resolved symbol offsets per library build-id. Anything read back
 * steers where uprobes go, so an entry counts only when the directory chain and the file could
 * have been written by no one but root (or pipeprof's own user); otherwise it is ignored. */
#ifndef PIPEPROF_CACHE_H
#define PIPEPROF_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#define CACHE_DEFAULT_DIR "/var/cache/pipeprof"
#define CACHE_MAX_ENTRY (64 * 1024)

/* The cache directory as an O_PATH descriptor, created (mode 0700) when missing. Its path is
 * PIPEPROF_CACHE_DIR when set ("off" turns the cache off). -ENOENT when off, -EPERM when a
 * directory on the way could be written by another user, or another -errno. */
int cache_open(void);

/* Reads entry name into buf (NUL-terminated); its length, or -errno: -ENOENT (none), -EPERM (an
 * entry someone else could have written), -EFBIG (larger than size - 1). */
int cache_get(int dirfd, const char *name, char *buf, size_t size);

/* Replaces entry name atomically (a temporary file renamed over it). */
int cache_put(int dirfd, const char *name, const char *data, size_t len);

/* Removes the entries whose names start with prefix, but those that start with keep. */
void cache_prune(int dirfd, const char *prefix, const char *keep);

/* Keeps at most max entries whose names start with prefix, removing the least recently
 * written first. */
void cache_trim(int dirfd, const char *prefix, int max);

/* Pure rules, unit-tested. A directory on the path may be written only by its owner, root or
 * euid, unless it is a root-owned sticky directory (/tmp): there, no one else can replace what
 * root made inside it. */
bool cache_dir_safe(const struct stat *st, uid_t euid);
/* An entry: a regular file of euid's (or root's), one link, writable by its owner only. */
bool cache_file_safe(const struct stat *st, uid_t euid);
/* An entry name: letters, digits, '-', '_' and '.', not starting with '.', at most 128 bytes. */
bool cache_name_ok(const char *name);

#endif

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "cache.h"
#include "intern.h"
#include "symcache.h"

#define SYMCACHE_MAGIC "pipeprof-elf-symbols 1"
#define MEMO_MAX 64
/* Entries a cache keeps: a host's libraries times the lookups made of them, with room to spare;
 * a few hundred bytes each. */
#define DISK_MAX 512

/* One resolved lookup of this run. */
struct memo {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	uint64_t names_hash;
	int n, found;
	struct elf_func *funcs;	/* names point into names */
	char *names;
};

static struct memo memos[MEMO_MAX];
static int nr_memos;
static struct symcache_stats stats;

static uint64_t names_hash(const struct elf_func *funcs, int n)
{
	uint64_t h = FNV1A_SEED;

	for (int i = 0; i < n; i++)
		h = fnv1a(h, funcs[i].name, strlen(funcs[i].name) + 1);
	return h;
}

void symcache_entry_name(const struct elf_identity *id, const struct elf_func *funcs, int n,
			 char *buf, size_t size)
{
	size_t len = snprintf(buf, size, "elf-");

	for (size_t i = 0; i < id->build_id_len && len + 3 < size; i++)
		len += snprintf(buf + len, size - len, "%02x", id->build_id[i]);
	snprintf(buf + len, size - len, "-%016" PRIx64 "-u%u", names_hash(funcs, n), id->owner);
}

int symcache_format(const struct elf_identity *id, const struct elf_func *funcs, int n,
		    char *buf, size_t size)
{
	size_t len = 0;
	int w;

	w = snprintf(buf, size, SYMCACHE_MAGIC "\nsize %" PRIu64 "\n", id->file_size);
	if (w < 0 || (size_t)w >= size)
		return -ENOSPC;
	len = w;
	for (int i = 0; i < n; i++) {
		const struct elf_func *f = &funcs[i];

		w = snprintf(buf + len, size - len, "sym %d %" PRIx64 " %" PRIx64 " %" PRIx64 " %d %s\n",
			     f->found, f->value, f->size, f->offset, f->starts_with_endbr64, f->name);
		if (w < 0 || (size_t)w >= size - len)
			return -ENOSPC;
		len += w;
	}
	w = snprintf(buf + len, size - len, "end\n");
	if (w < 0 || (size_t)w >= size - len)
		return -ENOSPC;
	return len + w;
}

static bool in_code(const struct elf_identity *id, uint64_t offset)
{
	for (int i = 0; i < id->nr_exec; i++)
		if (offset >= id->exec[i].start && offset < id->exec[i].end)
			return true;
	return false;
}

/* Reads one line of text into line; the rest after it, or NULL at a line that does not end. */
static const char *next_line(const char *p, char *line, size_t size)
{
	const char *nl = strchr(p, '\n');

	if (!nl || (size_t)(nl - p) >= size)
		return NULL;
	memcpy(line, p, nl - p);
	line[nl - p] = '\0';
	return nl + 1;
}

int symcache_parse(const char *text, const struct elf_identity *id, struct elf_func *funcs, int n)
{
	char line[1024], name[900];
	const char *p = text;
	uint64_t size;
	int found = 0;

	p = next_line(p, line, sizeof(line));
	if (!p || strcmp(line, SYMCACHE_MAGIC))
		return -EINVAL;
	p = next_line(p, line, sizeof(line));
	if (!p || sscanf(line, "size %" SCNu64, &size) != 1 || size != id->file_size)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		uint64_t value, fsize, offset;
		int is_found, endbr, used = 0;

		p = next_line(p, line, sizeof(line));
		if (!p || sscanf(line, "sym %d %" SCNx64 " %" SCNx64 " %" SCNx64 " %d %899s%n",
				 &is_found, &value, &fsize, &offset, &endbr, name, &used) != 6 ||
		    line[used] || strcmp(name, funcs[i].name) ||
		    (is_found != 0 && is_found != 1) || (endbr != 0 && endbr != 1))
			return -EINVAL;
		/* An offset outside the file's code would put a breakpoint into data. */
		if (is_found && (!in_code(id, offset) || (endbr && !in_code(id, offset + 4))))
			return -EINVAL;
		funcs[i].found = is_found;
		funcs[i].value = is_found ? value : 0;
		funcs[i].size = is_found ? fsize : 0;
		funcs[i].offset = is_found ? offset : 0;
		funcs[i].starts_with_endbr64 = is_found && endbr;
		found += is_found;
	}
	p = next_line(p, line, sizeof(line));
	if (!p || strcmp(line, "end") || *p)
		return -EINVAL;
	return found;
}

/* The build-id note and the executable segments, from the program headers alone. */
static int read_identity(int fd, const struct stat *st, struct elf_identity *id)
{
	size_t phnum;
	GElf_Phdr ph;
	Elf *elf;
	int err = -ENOENT;

	memset(id, 0, sizeof(*id));
	id->file_size = st->st_size;
	id->owner = st->st_uid;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &phnum)) {
		err = -EINVAL;
		goto cleanup;
	}
	for (size_t i = 0; i < phnum; i++) {
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getphdr(elf, i, &ph))
			continue;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && id->nr_exec < SYMCACHE_MAX_RANGES) {
			id->exec[id->nr_exec].start = ph.p_offset;
			id->exec[id->nr_exec].end = ph.p_offset + ph.p_filesz;
			id->nr_exec++;
		}
		if (ph.p_type != PT_NOTE || id->build_id_len)
			continue;
		data = elf_getdata_rawchunk(elf, ph.p_offset, ph.p_filesz, ELF_T_NHDR);
		while (data && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp((char *)data->d_buf + name_off, "GNU", 4) &&
			    nh.n_descsz >= 8 && nh.n_descsz <= sizeof(id->build_id)) {
				memcpy(id->build_id, (char *)data->d_buf + desc_off, nh.n_descsz);
				id->build_id_len = nh.n_descsz;
				break;
			}
		}
	}
	err = id->build_id_len && id->nr_exec ? 0 : -ENOENT;
cleanup:
	if (elf)
		elf_end(elf);
	return err;
}

static struct memo *memo_find(const struct stat *st, uint64_t hash)
{
	for (int i = 0; i < nr_memos; i++) {
		struct memo *m = &memos[i];

		if (m->dev == st->st_dev && m->ino == st->st_ino && m->size == st->st_size &&
		    m->mtime.tv_sec == st->st_mtim.tv_sec && m->mtime.tv_nsec == st->st_mtim.tv_nsec &&
		    m->names_hash == hash)
			return m;
	}
	return NULL;
}

static void memo_add(const struct stat *st, uint64_t hash, const struct elf_func *funcs, int n,
		     int found)
{
	struct memo *m;
	size_t names_len = 0, at = 0;

	if (nr_memos == MEMO_MAX)
		return;
	for (int i = 0; i < n; i++)
		names_len += strlen(funcs[i].name) + 1;
	m = &memos[nr_memos];
	m->funcs = calloc(n, sizeof(*m->funcs));
	m->names = malloc(names_len);
	if (!m->funcs || !m->names) {
		free(m->funcs);
		free(m->names);
		return;
	}
	for (int i = 0; i < n; i++) {
		size_t len = strlen(funcs[i].name) + 1;

		m->funcs[i] = funcs[i];
		memcpy(m->names + at, funcs[i].name, len);
		m->funcs[i].name = m->names + at;
		at += len;
	}
	m->dev = st->st_dev;
	m->ino = st->st_ino;
	m->size = st->st_size;
	m->mtime = st->st_mtim;
	m->names_hash = hash;
	m->n = n;
	m->found = found;
	nr_memos++;
}

/* Copies a memo's answers, provided it was for these very names (a hash is not proof). */
static int memo_use(const struct memo *m, struct elf_func *funcs, int n)
{
	if (m->n != n)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		if (strcmp(m->funcs[i].name, funcs[i].name))
			return -EINVAL;
	for (int i = 0; i < n; i++) {
		const char *name = funcs[i].name;

		funcs[i] = m->funcs[i];
		funcs[i].name = name;
	}
	return m->found;
}

static int disk_get(const struct elf_identity *id, struct elf_func *funcs, int n)
{
	char name[256], *text;
	int dirfd, err;

	dirfd = cache_open();
	if (dirfd < 0)
		return dirfd;
	text = malloc(CACHE_MAX_ENTRY);
	if (!text) {
		close(dirfd);
		return -ENOMEM;
	}
	symcache_entry_name(id, funcs, n, name, sizeof(name));
	err = cache_get(dirfd, name, text, CACHE_MAX_ENTRY);
	if (err >= 0)
		err = symcache_parse(text, id, funcs, n);
	free(text);
	close(dirfd);
	return err;
}

static void disk_put(const struct elf_identity *id, const struct elf_func *funcs, int n)
{
	char name[256], *text;
	int dirfd, len;

	text = malloc(CACHE_MAX_ENTRY);
	if (!text)
		return;
	len = symcache_format(id, funcs, n, text, CACHE_MAX_ENTRY);
	dirfd = len > 0 ? cache_open() : -1;
	if (dirfd >= 0) {
		symcache_entry_name(id, funcs, n, name, sizeof(name));
		if (!cache_put(dirfd, name, text, len))
			cache_trim(dirfd, "elf-", DISK_MAX);
		close(dirfd);
	}
	free(text);
}

int symcache_resolve(const char *path, struct elf_func *funcs, int n)
{
	struct elf_identity id;
	char fdpath[64];
	struct memo *m;
	struct stat st;
	uint64_t hash = names_hash(funcs, n);
	int fd, found;
	bool have_id;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		found = -errno;
		goto cleanup;
	}
	m = memo_find(&st, hash);
	if (m && (found = memo_use(m, funcs, n)) >= 0) {
		stats.memory_hits++;
		goto cleanup;
	}
	have_id = !read_identity(fd, &st, &id);
	if (have_id && (found = disk_get(&id, funcs, n)) >= 0) {
		stats.disk_hits++;
		memo_add(&st, hash, funcs, n, found);
		goto cleanup;
	}
	/* The very file opened above, whatever its path leads to by now. */
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	found = elf_resolve_funcs(fdpath, funcs, n);
	stats.reads++;
	if (found < 0)
		goto cleanup;
	memo_add(&st, hash, funcs, n, found);
	/* A file others may write could change under the entry; a file's owner is in the entry's
	 * name, so one user's file, build-id forged or not, steers no one else's probes. */
	if (have_id && !(st.st_mode & (S_IWGRP | S_IWOTH)))
		disk_put(&id, funcs, n);
cleanup:
	close(fd);
	return found;
}

void symcache_clear(void)
{
	for (int i = 0; i < nr_memos; i++) {
		free(memos[i].funcs);
		free(memos[i].names);
	}
	nr_memos = 0;
	memset(&stats, 0, sizeof(stats));
}

void symcache_stats(struct symcache_stats *out)
{
	*out = stats;
}

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "procmaps.h"

#define DELETED_SUFFIX " (deleted)"

int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * strtoull() would accept leading blanks, a sign and a "0x" prefix, none of which the kernel
 * ever prints, so a garbled line could parse as something plausible. Take digits only, at
 * least one, reject overflow, and insist on the expected separator right after them.
 */
static int parse_num(const char **pp, unsigned int base, char sep, uint64_t *out)
{
	const char *p = *pp;
	uint64_t v = 0;
	int d, nr = 0;

	while ((d = hexval(*p)) >= 0 && (unsigned int)d < base) {
		if (v > (UINT64_MAX - d) / base)
			return -EINVAL;
		v = v * base + d;
		p++;
		nr++;
	}
	if (!nr)
		return -EINVAL;
	/* The inode is the last field when there is no path: end of line is fine there. */
	if (*p != sep && !(sep == ' ' && (*p == '\0' || *p == '\n')))
		return -EINVAL;
	*out = v;
	*pp = *p == sep ? p + 1 : p;
	return 0;
}

int procmaps_parse_line(const char *line, struct maps_entry *out)
{
	static const char perm_chars[4][2] = { "r-", "w-", "x-", "ps" };
	uint64_t start, end, pgoff, major, minor, inode;
	const char *p = line;
	size_t len;
	int i;

	if (!line || !out)
		return -EINVAL;
	if (parse_num(&p, 16, '-', &start) || parse_num(&p, 16, ' ', &end) || end < start)
		return -EINVAL;
	for (i = 0; i < 4; i++)
		if (p[i] != perm_chars[i][0] && p[i] != perm_chars[i][1])
			return -EINVAL;
	if (p[4] != ' ')
		return -EINVAL;
	memcpy(out->perms, p, 4);
	out->perms[4] = '\0';
	p += 5;
	if (parse_num(&p, 16, ' ', &pgoff) || parse_num(&p, 16, ':', &major) ||
	    parse_num(&p, 16, ' ', &minor) || parse_num(&p, 10, ' ', &inode))
		return -EINVAL;
	if (major > UINT_MAX || minor > UINT_MAX)
		return -EINVAL;

	/* The path is padded into a column; everything after the padding is the name, spaces
	 * included. Only the line terminator is not part of it. */
	while (*p == ' ')
		p++;
	len = strcspn(p, "\n");
	if (p[len] == '\n' && p[len + 1] != '\0')
		return -EINVAL;
	/* Truncating would risk classifying a different name; a real path never gets here. */
	if (len >= sizeof(out->path))
		return -EINVAL;
	memcpy(out->path, p, len);
	out->path[len] = '\0';

	out->start = start;
	out->end = end;
	out->pgoff = pgoff;
	out->dev_major = major;
	out->dev_minor = minor;
	out->inode = inode;
	return 0;
}

/* "<stem>.so" or "<stem>.so.<version>": the unversioned dev symlink and any soname. */
static bool is_soname_of(const char *base, size_t len, const char *stem)
{
	size_t n = strlen(stem);

	if (len < n + 3 || strncmp(base, stem, n) || strncmp(base + n, ".so", 3))
		return false;
	base += n + 3;
	len -= n + 3;
	return len == 0 || (len >= 2 && base[0] == '.');
}

/* "python", "python3", "python3.11", "python3.13t", "python3.6m": an interpreter executable
 * (the ABI flags d, m, t, u may follow the version). */
static bool is_python_name(const char *base, size_t len, size_t stem_len)
{
	size_t i = stem_len;

	while (i < len && ((base[i] >= '0' && base[i] <= '9') || base[i] == '.'))
		i++;
	while (i < len && strchr("dmtu", base[i]))
		i++;
	return i == len;
}

/* The file that holds CPython's interpreter loop: the executable, or libpythonX.Y[abi].so[.N]
 * for a shared build. */
static bool is_python(const char *base, size_t len)
{
	const char *so;

	if (len >= 6 && !strncmp(base, "python", 6))
		return is_python_name(base, len, 6);
	if (len < 12 || strncmp(base, "libpython", 9) || !(so = memmem(base, len, ".so", 3)))
		return false;
	return so > base + 9 && is_python_name(base, so - base, 9) &&
	       (so + 3 == base + len || so[3] == '.');
}

enum lib_kind lib_kind_of_path(const char *path)
{
	static const char *const torch_stems[] = {
		"libtorch", "libtorch_cpu", "libtorch_cuda", "libtorch_python",
		"libtorch_global_deps",
	};
	const char *base;
	size_t len, sfx = strlen(DELETED_SUFFIX);
	unsigned int i;

	if (!path)
		return LIB_NONE;
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	len = strlen(base);
	/* A library upgraded under a running job keeps its old, unlinked mapping. */
	if (len > sfx && !strcmp(base + len - sfx, DELETED_SUFFIX))
		len -= sfx;

	if (is_soname_of(base, len, "libcudart"))
		return LIB_CUDART;
	if (is_soname_of(base, len, "libcuda"))
		return LIB_CUDA;
	if (is_soname_of(base, len, "libnccl"))
		return LIB_NCCL;
	for (i = 0; i < sizeof(torch_stems) / sizeof(torch_stems[0]); i++)
		if (is_soname_of(base, len, torch_stems[i]))
			return LIB_TORCH;
	/* The loader's name carries its ABI and version in ways that vary by libc and release. */
	if (len > 3 && !strncmp(base, "ld-", 3) && memmem(base, len, ".so", 3))
		return LIB_LOADER;
	if (is_python(base, len))
		return LIB_PYTHON;
	return LIB_NONE;
}

const char *lib_kind_name(enum lib_kind kind)
{
	switch (kind) {
	case LIB_NONE:
		return "none";
	case LIB_CUDART:
		return "cudart";
	case LIB_CUDA:
		return "cuda";
	case LIB_TORCH:
		return "torch";
	case LIB_NCCL:
		return "nccl";
	case LIB_LOADER:
		return "loader";
	case LIB_PYTHON:
		return "python";
	}
	return "unknown";
}

static bool strip_deleted(char *path)
{
	size_t len = strlen(path), sfx = strlen(DELETED_SUFFIX);

	if (len <= sfx || strcmp(path + len - sfx, DELETED_SUFFIX))
		return false;
	path[len - sfx] = '\0';
	return true;
}

bool lib_name_matches(const char *path, const char *name)
{
	const char *base = strrchr(path, '/');
	size_t len = strlen(name);

	base = base ? base + 1 : path;
	return len && !strncmp(base, name, len) && (base[len] == '\0' || base[len] == '.');
}

int procmaps_find_libs_in(FILE *maps, unsigned int kind_mask, struct mapped_lib *libs, int max)
{
	return procmaps_find_libs_in_named(maps, kind_mask, NULL, libs, max);
}

bool procmaps_driver_pinned(const struct maps_entry *e)
{
	return e->perms[0] == 'r' && e->perms[3] == 's' && !strcmp(e->path, "/dev/zero" DELETED_SUFFIX);
}

static void add_pinned(struct pinned_ranges *pinned, const struct maps_entry *e)
{
	if (pinned->nr >= PROCMAPS_PINNED_MAX) {
		pinned->truncated = true;
		return;
	}
	pinned->start[pinned->nr] = e->start;
	pinned->end[pinned->nr++] = e->end;
}

int procmaps_find_libs_in_named(FILE *maps, unsigned int kind_mask, const char *other_name,
				struct mapped_lib *libs, int max)
{
	return procmaps_find_libs_in_pinned(maps, kind_mask, other_name, libs, max, NULL);
}

int procmaps_find_libs_in_pinned(FILE *maps, unsigned int kind_mask, const char *other_name,
				 struct mapped_lib *libs, int max, struct pinned_ranges *pinned)
{
	struct maps_entry *e;
	char *line = NULL;
	size_t cap = 0;
	int i, nr = 0, err = 0;
	enum lib_kind kind;
	bool deleted;

	if (!maps || max < 0 || (max && !libs))
		return -EINVAL;
	/* struct maps_entry holds a PATH_MAX buffer: too big to put on every caller's stack. */
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;

	while (nr < max) {
		errno = 0;
		if (getline(&line, &cap, maps) < 0) {
			if (ferror(maps))
				err = errno ? -errno : -EIO;
			break;
		}
		/* Skip what we cannot parse rather than give up on a whole process. */
		if (procmaps_parse_line(line, e) || !e->inode)
			continue;
		if (pinned && procmaps_driver_pinned(e)) {
			add_pinned(pinned, e);
			continue;
		}
		/* The kind from the path as it is kept, so the two always agree (a file really
		 * named "libcuda.so (deleted)" and then deleted read otherwise). */
		deleted = strip_deleted(e->path);
		kind = lib_kind_of_path(e->path);
		if (!(kind_mask & (1u << kind)))
			continue;
		if (kind == LIB_NONE && other_name && !lib_name_matches(e->path, other_name))
			continue;
		/* A library is mapped several times (text, rodata, data): count the file once. */
		for (i = 0; i < nr; i++)
			if (lib_is_file(&libs[i], e->inode, e->dev_major, e->dev_minor))
				break;
		if (i < nr) {
			if (e->start < libs[i].span_start)
				libs[i].span_start = e->start;
			if (e->end > libs[i].span_end)
				libs[i].span_end = e->end;
			if (e->pgoff < libs[i].base_pgoff) {
				libs[i].base_start = e->start;
				libs[i].base_pgoff = e->pgoff;
			}
			continue;
		}
		libs[nr].kind = kind;
		libs[nr].inode = e->inode;
		libs[nr].dev_major = e->dev_major;
		libs[nr].dev_minor = e->dev_minor;
		libs[nr].map_start = e->start;
		libs[nr].map_end = e->end;
		libs[nr].base_start = e->start;
		libs[nr].base_pgoff = e->pgoff;
		libs[nr].span_start = e->start;
		libs[nr].span_end = e->end;
		memcpy(libs[nr].path, e->path, sizeof(libs[nr].path));
		libs[nr].deleted = deleted;
		nr++;
	}

	free(line);
	free(e);
	return err ? err : nr;
}

int procmaps_find_libs(pid_t pid, unsigned int kind_mask, struct mapped_lib *libs, int max)
{
	return procmaps_find_libs_named(pid, kind_mask, NULL, libs, max);
}

int procmaps_find_libs_named(pid_t pid, unsigned int kind_mask, const char *other_name,
			     struct mapped_lib *libs, int max)
{
	return procmaps_find_libs_pinned(pid, kind_mask, other_name, libs, max, NULL);
}

/* stdio asks /proc for 1 KB at a time (its st_blksize), where the kernel would fill a page: a
 * 64 KB buffer reads a torch job's ~1,700 lines in ~50 calls rather than ~200, each of which
 * walks the address space anew. Best effort: without it the reads are only smaller. */
FILE *procmaps_open(pid_t pid, char **buf)
{
	char path[64];
	FILE *f;

	*buf = NULL;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	*buf = malloc(MAPS_READ_BYTES);
	if (*buf && setvbuf(f, *buf, _IOFBF, MAPS_READ_BYTES)) {
		free(*buf);
		*buf = NULL;
	}
	return f;
}

int procmaps_find_libs_pinned(pid_t pid, unsigned int kind_mask, const char *other_name,
			      struct mapped_lib *libs, int max, struct pinned_ranges *pinned)
{
	char *buf;
	FILE *f;
	int ret;

	if (pid <= 0)
		return -EINVAL;
	f = procmaps_open(pid, &buf);
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	/* A process that exits after the open reads as an empty file: 0 libraries, not an error. */
	ret = procmaps_find_libs_in_pinned(f, kind_mask, other_name, libs, max, pinned);
	fclose(f);
	free(buf);
	return ret;
}

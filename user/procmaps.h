/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* /proc/PID/maps parsing and GPU/ML library discovery. Pure parsing is separate from I/O
 * so it can be unit-tested without root. */
#ifndef PIPEPROF_PROCMAPS_H
#define PIPEPROF_PROCMAPS_H

#include <limits.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum lib_kind {
	LIB_NONE = 0,
	LIB_CUDART,	/* libcudart.so, libcudart.so.13, libcudart.so.12.4.127, ... (not libcudart_static) */
	LIB_CUDA,	/* the driver: libcuda.so, libcuda.so.1, libcuda.so.580.65.06 */
	LIB_TORCH,	/* libtorch.so, libtorch_cpu.so, libtorch_cuda.so, libtorch_python.so */
	LIB_NCCL,	/* libnccl.so, libnccl.so.2 */
	LIB_LOADER,	/* the dynamic loader: ld-linux-x86-64.so.2, ld-musl-x86_64.so.1, ld-2.31.so */
	LIB_PYTHON,	/* the interpreter: python3.11, python3, libpython3.12.so.1.0, libpython3.6m.so */
};

/* stdio's buffer for /proc/PID/maps: the read size, and so how many reads a long file takes. */
#define MAPS_READ_BYTES (64 << 10)

/* /proc/PID/maps opened for reading through a MAPS_READ_BYTES buffer, *buf, to free after
 * fclose(); NULL with errno set. */
FILE *procmaps_open(pid_t pid, char **buf);

struct maps_entry {
	uint64_t start, end, pgoff;
	uint64_t inode;
	unsigned int dev_major, dev_minor;
	char perms[5];
	char path[PATH_MAX];	/* "" for anonymous mappings; may end in " (deleted)" */
};

/* A distinct library file mapped by a process (one entry per inode). */
struct mapped_lib {
	enum lib_kind kind;
	uint64_t inode;
	unsigned int dev_major, dev_minor;
	char path[PATH_MAX];	/* as the process sees it (maps column 6), less " (deleted)" */
	bool deleted;		/* unlinked (upgraded, replaced) while mapped */
	/* One mapping of it: /proc/PID/map_files/START-END opens that very file, whatever has
	 * become of its path. */
	uint64_t map_start, map_end;
	/* Its mapping at the lowest file offset, where the file is loaded: the bias of its
	 * symbols, with no second read of the maps. */
	uint64_t base_start, base_pgoff;
	/* From its lowest mapping's start to its highest's end: where its code can be. */
	uint64_t span_start, span_end;
};

/* Whether lib is the file (inode on device major:minor) a record was made for. */
static inline bool lib_is_file(const struct mapped_lib *lib, uint64_t inode, unsigned int dev_major,
			       unsigned int dev_minor)
{
	return lib->inode == inode && lib->dev_major == dev_major && lib->dev_minor == dev_minor;
}

/* Parse one line of /proc/PID/maps. Returns 0, or -EINVAL when the line is malformed. */
int procmaps_parse_line(const char *line, struct maps_entry *out);
/* A hex digit's value, -1 for any other character (procfs files spell numbers in hex). */
int hexval(char c);

/* Classify a library by the basename of its path; any directory, any soname version. */
enum lib_kind lib_kind_of_path(const char *path);
const char *lib_kind_name(enum lib_kind kind);

/* Read /proc/PID/maps and collect the distinct libraries of the kinds in kind_mask
 * (bit (1 << kind)), deduplicated by (dev, inode). Returns the number found (at most max),
 * -ENOENT/-ESRCH when the process is gone, or another -errno. */
int procmaps_find_libs(pid_t pid, unsigned int kind_mask, struct mapped_lib *libs, int max);

/* The same on an already-open stream (unit tests feed fixture files). */
int procmaps_find_libs_in(FILE *maps, unsigned int kind_mask, struct mapped_lib *libs, int max);
/* The same, with files of no kind (LIB_NONE in kind_mask) kept only where their name is
 * other_name (lib_name_matches); other_name NULL keeps them all. */
int procmaps_find_libs_named(pid_t pid, unsigned int kind_mask, const char *other_name,
			     struct mapped_lib *libs, int max);
int procmaps_find_libs_in_named(FILE *maps, unsigned int kind_mask, const char *other_name,
				struct mapped_lib *libs, int max);
/*
 * Host memory the CUDA driver pinned (cudaHostAlloc, cudaMallocHost and PyTorch's pinned-memory
 * allocator over them) is a shared mapping of /dev/zero in the process, "rw-s ... /dev/zero
 * (deleted)", in 2 MB regions it suballocates (seen with driver 580 on an H200). Memory pinned
 * before the attach is known only this way. A shared anonymous mmap reads the same, so a
 * caller uses these only in a process that maps the driver.
 */
#define PROCMAPS_PINNED_MAX 64
struct pinned_ranges {
	int nr;
	bool truncated;		/* more than PROCMAPS_PINNED_MAX */
	uint64_t start[PROCMAPS_PINNED_MAX], end[PROCMAPS_PINNED_MAX];
};
bool procmaps_driver_pinned(const struct maps_entry *e);
/* procmaps_find_libs_named that also collects those mappings into *pinned (NULL: none). */
int procmaps_find_libs_pinned(pid_t pid, unsigned int kind_mask, const char *other_name,
			      struct mapped_lib *libs, int max, struct pinned_ranges *pinned);
int procmaps_find_libs_in_pinned(FILE *maps, unsigned int kind_mask, const char *other_name,
				 struct mapped_lib *libs, int max, struct pinned_ranges *pinned);
/* Whether path's file is name, or name with a version after a dot ("libfoo.so" names
 * "libfoo.so.1.2"; "libtorch_cpu" names "libtorch_cpu.so"). */
bool lib_name_matches(const char *path, const char *name);

#endif

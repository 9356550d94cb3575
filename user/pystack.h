/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* CPython as the CPU sampler reads it from outside: where each interpreter version keeps its
 * frames and code objects, how its str objects are stored, and what the samples add up to per
 * role. Pure: no BPF, no /proc. */
#ifndef PIPEPROF_PYSTACK_H
#define PIPEPROF_PYSTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "pipeprof.h"

struct py_layout {
	int major, minor;
	struct pp_py_layout walk;	/* what the BPF walker reads */
	uint16_t code_name;		/* PyCodeObject: co_qualname, co_name before 3.11 */
	uint16_t code_filename;
	uint16_t code_firstlineno;	/* an int */
	uint16_t str_ascii_size;	/* sizeof(PyASCIIObject): compact ASCII text follows */
	uint16_t str_compact_size;	/* sizeof(PyCompactUnicodeObject): other compact text */
};

/* The layout of CPython major.minor, or NULL for a version pipeprof cannot walk. */
const struct py_layout *py_layout_for(int major, int minor);

/* The version an interpreter file's name says: python3.11, libpython3.11.so.1.0,
 * libpython3.8d.so; -EINVAL for another name. */
int py_version_of_path(const char *path, int *major, int *minor);

/* A str object's text as UTF-8, NUL-terminated in out (truncated to size): state is the
 * object's state word (kind, compact, ascii), data its characters (length of them, of the
 * kind's width). -EINVAL for a state that is not a compact str. */
int py_str_to_utf8(uint32_t state, const void *data, size_t length, char *out, size_t size);
/* Where the characters of a str object with state begin, from the object's start. */
int py_str_data_offset(const struct py_layout *l, uint32_t state, size_t *offset);
#define PY_STR_STATE_OFFSET 32	/* after ob_refcnt, ob_type, length and hash */
#define PY_STR_LENGTH_OFFSET 16

/* Interned names: a function ("qualname (file:line)") or a native symbol. */
struct where_names {
	char **names;
	bool *library;		/* a function of the standard library or an installed package */
	int nr, cap;
};
int where_name_id(struct where_names *n, const char *name);
/* The same, marking the name as library code when its file is one (where_is_library_file). */
int where_name_id_in(struct where_names *n, const char *name, const char *file);
/* A file of the standard library or of an installed package, not the job's own code:
 * under site-packages, dist-packages or lib/pythonX.Y, or frozen. */
bool where_is_library_file(const char *file);
void where_names_free(struct where_names *n);

/* One sample, resolved. One per sample of a report (30,000 in ten minutes): its fields are
 * ordered to leave no padding. */
struct where_sample {
	const int *callers;		/* native frames' name ids, innermost first; -1 unknown */
	const int *py;			/* name ids, innermost first; -1 for a frame not resolved */
	uint32_t tid, tgid;
	int role;			/* enum role, or -1: not in the report */
	int native;			/* name id of the user-mode leaf, -1 unknown */
	int nr_callers;			/* native frames below the Python ones, found by frame pointers */
	int py_depth;			/* -1: no interpreter walked in this thread */
	/* The leaf runs on one thread whatever torch.set_num_threads says: the interpreter, or a
	 * library that starts no threads (a reference BLAS), which torch calls outside its
	 * parallel loops. */
	enum serial_code { CODE_NOT_SERIAL, CODE_INTERPRETER, CODE_SERIAL_LIBRARY } serial;
	bool kernel;
};

#define WHERE_TOP 5

/* The trainer's waits of one cause at one Python stack (as each wait began), woken by one
 * thread at one stack (the waker's), summed. */
struct where_wait {
	int cause;			/* enum pp_state */
	uint64_t ns;
	uint64_t count;			/* waits */
	uint64_t us;			/* each wait's whole microseconds, summed */
	uint32_t tid;			/* the thread that waited */
	int role;			/* its enum role, or -1 */
	int depth;
	const int *py;			/* name ids, innermost first */
	uint32_t waker_tid;		/* 0: an interrupt or an untraced task */
	int waker_role;			/* enum role, or -1 */
	int waker_depth;
	const int *waker_py;
};

/* Where a stack stands in the job's own code: the innermost frame outside the library, else
 * the innermost frame; -1 for an empty stack. */
int where_site(const int *py, int depth, const struct where_names *names);

#define WAIT_TOP 3

struct wait_site {
	int site, inner;		/* name ids: the job's frame, the innermost one */
	uint64_t ns, count;
};

struct waker_site {
	uint32_t tid;
	int role, site;			/* site -1: no Python stack */
	uint64_t ns, count;
};

/* The trainer's waits of one stall state. */
struct where_wait_state {
	uint64_t ns, count;
	int nr_sites, nr_wakers;
	struct wait_site sites[WAIT_TOP];
	struct waker_site wakers[WAIT_TOP];
};

/* The waits as folded stacks, weighted by their time in microseconds:
 * TRAINER;outermost;...;innermost;[STATE] us. */
int where_write_folded_waits(FILE *out, const struct where_wait *waits, int nr, int role,
			     const struct where_names *names);

/* Sums waits[] per state (out[PP_NR_STATES]), their sites and wakers by wait time. */
int where_aggregate_waits(const struct where_wait *waits, int nr, const struct where_names *names,
			  struct where_wait_state *out);

struct where_entry {
	int name;			/* name id */
	uint64_t samples;
};

struct where_role {
	uint64_t samples;		/* on-CPU samples of the role's threads */
	uint64_t kernel;		/* ... in kernel mode */
	uint64_t py_samples;		/* ... of threads with a Python stack (depth > 0) */
	int nr_py, nr_native;
	struct where_entry py[WHERE_TOP];	/* innermost Python function, most first */
	struct where_entry native[WHERE_TOP];	/* user-mode leaf symbol, most first */
	uint64_t serial_interpreter;	/* samples in the interpreter (enum serial_code) */
	uint64_t serial_library;	/* ... in a library that starts no threads */
	struct where_entry serial_top;	/* the library leaf most sampled; name -1 for none */
};

/* Counts samples[] per role (0..nr_roles-1) into roles[]. */
int where_aggregate(const struct where_sample *samples, int nr, int nr_roles,
		    struct where_role *roles);

/* Brendan Gregg's folded stacks, outermost frame first, one line per distinct stack with its
 * count; role < 0 takes every role. Frames: the role, Python functions, then in brackets the
 * native callers the frame pointers gave and the native leaf, then [kernel] for a sample in
 * kernel mode. */
int where_write_folded(FILE *out, const struct where_sample *samples, int nr, int role,
		       const struct where_names *names);

#endif

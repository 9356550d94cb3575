// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "classify.h"
#include "pystack.h"

#define N PP_PY_NONE

/*
 * Offsets read off CPython's own structs (gdb `print &((T *)0)->field` on builds with debug
 * information, pyenv's 3.10.13, 3.11.7, 3.12.1 and 3.13.0), checked against the running
 * interpreters in tests/test_pystack.py. Fields, by version (Include/internal/pycore_*.h):
 *  - _PyRuntimeState.interpreters.main (pycore_runtime.h); 3.13 puts _Py_DebugOffsets first.
 *  - PyInterpreterState.tstate_head (3.10) / .threads.head (3.11+) (pycore_interp.h).
 *  - PyThreadState.next, .thread_id (= pthread_self()) (cpython/pystate.h).
 *  - 3.10: PyThreadState.frame -> PyFrameObject (f_code, f_back; cpython/frameobject.h).
 *  - 3.11, 3.12: PyThreadState.cframe -> _PyCFrame.current_frame -> _PyInterpreterFrame
 *    (f_code, previous, owner; pycore_frame.h).
 *  - 3.13: PyThreadState.current_frame -> _PyInterpreterFrame (f_executable, previous,
 *    owner); 3.12+ push shim frames owned by the C stack (FRAME_OWNED_BY_CSTACK = 3).
 *  - 3.11+: PyThreadState.datastack_chunk and .datastack_top, next to each other: the chunk of
 *    the thread's data stack its newest frames are in (_PyStackChunk, frames from 0x18 in
 *    all three; pycore_frame.h) and the end of what they use.
 *  - PyCodeObject.co_qualname (co_name in 3.10), .co_filename, .co_firstlineno (cpython/code.h).
 *  - sizeof(PyASCIIObject) and sizeof(PyCompactUnicodeObject): 48/72 up to 3.11 (wstr),
 *    40/56 from 3.12 (cpython/unicodeobject.h).
 */
static const struct py_layout layouts[] = {
	{ 3, 10, { .runtime_interp = 0x28, .interp_threads = 0x8, .tstate_next = 0x8,
		   .tstate_thread_id = 0xb0, .tstate_frame = 0x18, .cframe_frame = N,
		   .frame_code = 0x20, .frame_previous = 0x18, .frame_owner = N,
		   .owner_cstack = N, .tstate_datastack = N }, 0x70, 0x68, 0x28, 48, 72 },
	{ 3, 11, { .runtime_interp = 0x30, .interp_threads = 0x10, .tstate_next = 0x8,
		   .tstate_thread_id = 0x98, .tstate_frame = 0x38, .cframe_frame = 0x8,
		   .frame_code = 0x20, .frame_previous = 0x30, .frame_owner = 0x45,
		   .owner_cstack = N, .tstate_datastack = 0x128 }, 0x80, 0x70, 0x48, 48, 72 },
	{ 3, 12, { .runtime_interp = 0x30, .interp_threads = 0x48, .tstate_next = 0x8,
		   .tstate_thread_id = 0x88, .tstate_frame = 0x38, .cframe_frame = 0x0,
		   .frame_code = 0x0, .frame_previous = 0x8, .frame_owner = 0x46,
		   .owner_cstack = 3, .tstate_datastack = 0xe8 }, 0x80, 0x70, 0x44, 40, 56 },
	{ 3, 13, { .runtime_interp = 0x280, .interp_threads = 0x1cb0, .tstate_next = 0x8,
		   .tstate_thread_id = 0x98, .tstate_frame = 0x48, .cframe_frame = N,
		   .frame_code = 0x0, .frame_previous = 0x8, .frame_owner = 0x46,
		   .owner_cstack = 3, .tstate_datastack = 0xe8 }, 0x80, 0x70, 0x44, 40, 56 },
};

const struct py_layout *py_layout_for(int major, int minor)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].major == major && layouts[i].minor == minor)
			return &layouts[i];
	return NULL;
}

int py_version_of_path(const char *path, int *major, int *minor)
{
	const char *base = strrchr(path, '/');
	char *end;
	long ma, mi;

	base = base ? base + 1 : path;
	if (!strncmp(base, "libpython", 9))
		base += 9;
	else if (!strncmp(base, "python", 6))
		base += 6;
	else
		return -EINVAL;
	ma = strtol(base, &end, 10);
	if (end == base || *end != '.' || ma < 2 || ma > 9)
		return -EINVAL;
	base = end + 1;
	mi = strtol(base, &end, 10);
	if (end == base || mi < 0 || mi > 99)
		return -EINVAL;
	*major = (int)ma;
	*minor = (int)mi;
	return 0;
}

/* state: interned (2 bits), kind (3: 1, 2 or 4 bytes a character), compact, ascii. */
#define STR_KIND(s)	(((s) >> 2) & 7)
#define STR_COMPACT(s)	(((s) >> 5) & 1)
#define STR_ASCII(s)	(((s) >> 6) & 1)

int py_str_data_offset(const struct py_layout *l, uint32_t state, size_t *offset)
{
	if (!STR_COMPACT(state))
		return -EINVAL;
	*offset = STR_ASCII(state) ? l->str_ascii_size : l->str_compact_size;
	return 0;
}

static size_t put_utf8(char *out, size_t at, size_t size, uint32_t c)
{
	char buf[4];
	size_t n;

	if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		c = 0xfffd;	/* a lone surrogate has no UTF-8 */
	if (c < 0x80) {
		buf[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		buf[0] = (char)(0xc0 | c >> 6);
		buf[1] = (char)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		buf[0] = (char)(0xe0 | c >> 12);
		buf[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		buf[2] = (char)(0x80 | (c & 0x3f));
		n = 3;
	} else {
		buf[0] = (char)(0xf0 | c >> 18);
		buf[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		buf[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		buf[3] = (char)(0x80 | (c & 0x3f));
		n = 4;
	}
	if (at + n >= size)
		return 0;	/* a character is never cut in half */
	memcpy(out + at, buf, n);
	return n;
}

int py_str_to_utf8(uint32_t state, const void *data, size_t length, char *out, size_t size)
{
	unsigned int kind = STR_KIND(state);
	size_t at = 0, n;

	if (!size)
		return -EINVAL;
	out[0] = '\0';
	if (!STR_COMPACT(state) || (kind != 1 && kind != 2 && kind != 4) ||
	    (STR_ASCII(state) && kind != 1))
		return -EINVAL;
	for (size_t i = 0; i < length; i++) {
		uint32_t c;

		if (kind == 1)
			c = ((const uint8_t *)data)[i];
		else if (kind == 2)
			c = ((const uint16_t *)data)[i];
		else
			c = ((const uint32_t *)data)[i];
		if (STR_ASCII(state) && c > 0x7f)
			return -EINVAL;
		n = put_utf8(out, at, size, c);
		if (!n)
			break;
		at += n;
	}
	out[at] = '\0';
	return 0;
}

bool where_is_library_file(const char *file)
{
	const char *p;

	if (strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") ||
	    !strncmp(file, "<frozen ", 8))
		return true;
	for (p = strstr(file, "/lib/python"); p; p = strstr(p + 1, "/lib/python"))
		if (p[11] >= '2' && p[11] <= '9')
			return true;
	return false;
}

int where_name_id_in(struct where_names *n, const char *name, const char *file)
{
	for (int i = n->nr - 1; i >= 0; i--)
		if (!strcmp(n->names[i], name))
			return i;
	if (n->nr == n->cap) {
		int cap = n->cap ? 2 * n->cap : 64;
		char **grown = realloc(n->names, cap * sizeof(*grown));
		bool *lib;

		if (!grown)
			return -ENOMEM;
		n->names = grown;
		lib = realloc(n->library, cap * sizeof(*lib));
		if (!lib)
			return -ENOMEM;
		n->library = lib;
		n->cap = cap;
	}
	n->names[n->nr] = strdup(name);
	if (!n->names[n->nr])
		return -ENOMEM;
	n->library[n->nr] = file && where_is_library_file(file);
	return n->nr++;
}

int where_name_id(struct where_names *n, const char *name)
{
	return where_name_id_in(n, name, NULL);
}

int where_site(const int *py, int depth, const struct where_names *names)
{
	for (int d = 0; d < depth; d++)
		if (py[d] >= 0 && !names->library[py[d]])
			return py[d];
	return depth > 0 ? py[0] : -1;
}

static int by_ns_site(const void *a, const void *b)
{
	const struct wait_site *x = a, *y = b;

	return x->ns != y->ns ? (x->ns < y->ns ? 1 : -1) : x->site - y->site;
}

static int by_ns_waker(const void *a, const void *b)
{
	const struct waker_site *x = a, *y = b;

	return x->ns != y->ns ? (x->ns < y->ns ? 1 : -1) : (int)x->tid - (int)y->tid;
}

int where_aggregate_waits(const struct where_wait *waits, int nr, const struct where_names *names,
			  struct where_wait_state *out)
{
	struct wait_site *sites = calloc(nr ? nr : 1, sizeof(*sites));
	struct waker_site *wakers = calloc(nr ? nr : 1, sizeof(*wakers));
	int err = 0;

	memset(out, 0, PP_NR_STATES * sizeof(*out));
	if (!sites || !wakers) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (int s = 0; s < PP_NR_STATES; s++) {
		struct where_wait_state *o = &out[s];
		int ns = 0, nw = 0;

		for (int i = 0; i < nr; i++) {
			const struct where_wait *w = &waits[i];
			int site, inner, wsite, k;

			if (w->cause != s)
				continue;
			o->ns += w->ns;
			o->count += w->count;
			site = where_site(w->py, w->depth, names);
			inner = w->depth > 0 ? w->py[0] : -1;
			for (k = 0; k < ns && !(sites[k].site == site && sites[k].inner == inner); k++)
				;
			if (k == ns)
				sites[ns++] = (struct wait_site){ .site = site, .inner = inner };
			sites[k].ns += w->ns;
			sites[k].count += w->count;
			wsite = where_site(w->waker_py, w->waker_depth, names);
			for (k = 0; k < nw && !(wakers[k].tid == w->waker_tid && wakers[k].site == wsite); k++)
				;
			if (k == nw)
				wakers[nw++] = (struct waker_site){ .tid = w->waker_tid,
								    .role = w->waker_role, .site = wsite };
			wakers[k].ns += w->ns;
			wakers[k].count += w->count;
		}
		qsort(sites, ns, sizeof(*sites), by_ns_site);
		qsort(wakers, nw, sizeof(*wakers), by_ns_waker);
		o->nr_sites = ns < WAIT_TOP ? ns : WAIT_TOP;
		o->nr_wakers = nw < WAIT_TOP ? nw : WAIT_TOP;
		memcpy(o->sites, sites, o->nr_sites * sizeof(*sites));
		memcpy(o->wakers, wakers, o->nr_wakers * sizeof(*wakers));
	}
cleanup:
	free(sites);
	free(wakers);
	return err;
}

void where_names_free(struct where_names *n)
{
	for (int i = 0; i < n->nr; i++)
		free(n->names[i]);
	free(n->names);
	free(n->library);
	*n = (struct where_names){ 0 };
}

static int by_samples(const void *a, const void *b)
{
	const struct where_entry *x = a, *y = b;

	if (x->samples != y->samples)
		return x->samples < y->samples ? 1 : -1;
	return x->name - y->name;
}

/* The WHERE_TOP largest counts of counts[0..nr) into top[], most first. */
static int top_of(const uint64_t *counts, int nr, struct where_entry *top)
{
	struct where_entry *all = malloc((nr ? nr : 1) * sizeof(*all));
	int n = 0;

	if (!all)
		return -ENOMEM;
	for (int i = 0; i < nr; i++)
		if (counts[i])
			all[n++] = (struct where_entry){ .name = i, .samples = counts[i] };
	qsort(all, n, sizeof(*all), by_samples);
	if (n > WHERE_TOP)
		n = WHERE_TOP;
	memcpy(top, all, n * sizeof(*top));
	free(all);
	return n;
}

int where_aggregate(const struct where_sample *samples, int nr, int nr_roles,
		    struct where_role *roles)
{
	int max_name = 0, err = 0;
	uint64_t *py = NULL, *native = NULL, *serial = NULL;

	for (int i = 0; i < nr; i++) {
		if (samples[i].native + 1 > max_name)
			max_name = samples[i].native + 1;
		for (int d = 0; d < samples[i].py_depth; d++)
			if (samples[i].py[d] + 1 > max_name)
				max_name = samples[i].py[d] + 1;
	}
	memset(roles, 0, nr_roles * sizeof(*roles));
	py = calloc(max_name ? max_name : 1, sizeof(*py));
	native = calloc(max_name ? max_name : 1, sizeof(*native));
	serial = calloc(max_name ? max_name : 1, sizeof(*serial));
	if (!py || !native || !serial) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (int r = 0; r < nr_roles; r++) {
		struct where_role *out = &roles[r];
		int n;

		memset(py, 0, max_name * sizeof(*py));
		memset(native, 0, max_name * sizeof(*native));
		memset(serial, 0, max_name * sizeof(*serial));
		out->serial_top = (struct where_entry){ .name = -1 };
		for (int i = 0; i < nr; i++) {
			const struct where_sample *s = &samples[i];

			if (s->role != r)
				continue;
			out->samples++;
			out->kernel += s->kernel;
			out->serial_interpreter += s->serial == CODE_INTERPRETER;
			out->serial_library += s->serial == CODE_SERIAL_LIBRARY;
			if (s->native >= 0)
				native[s->native]++;
			if (s->native >= 0 && s->serial == CODE_SERIAL_LIBRARY)
				serial[s->native]++;
			if (s->py_depth > 0) {
				out->py_samples++;
				if (s->py[0] >= 0)
					py[s->py[0]]++;
			}
		}
		n = top_of(py, max_name, out->py);
		if (n < 0) {
			err = n;
			goto cleanup;
		}
		out->nr_py = n;
		for (int id = 0; id < max_name; id++)
			if (serial[id] > out->serial_top.samples)
				out->serial_top = (struct where_entry){ .name = id, .samples = serial[id] };
		n = top_of(native, max_name, out->native);
		if (n < 0) {
			err = n;
			goto cleanup;
		}
		out->nr_native = n;
	}
cleanup:
	free(py);
	free(native);
	free(serial);
	return err;
}

/* A frame's name as folded stacks can carry it: ';' separates frames, a newline ends the
 * line. */
static void put_frame(FILE *out, const char *name)
{
	for (const char *p = name; *p; p++)
		fputc(*p == ';' ? ':' : (*p == '\n' || *p == '\r') ? ' ' : *p, out);
}

struct folded_line {
	char *text;
	uint64_t count;
};

static int by_text(const void *a, const void *b)
{
	return strcmp(((const struct folded_line *)a)->text, ((const struct folded_line *)b)->text);
}

/* Sorts lines, merges equal ones (adding their counts), writes them, frees them. */
static void write_merged(FILE *out, struct folded_line *lines, int nr_lines)
{
	qsort(lines, nr_lines, sizeof(*lines), by_text);
	for (int i = 0; i < nr_lines;) {
		int j = i + 1;
		uint64_t count = lines[i].count;

		while (j < nr_lines && !strcmp(lines[j].text, lines[i].text))
			count += lines[j++].count;
		fprintf(out, "%s %llu\n", lines[i].text, (unsigned long long)count);
		i = j;
	}
}

static void free_lines(struct folded_line *lines, int nr_lines)
{
	for (int i = 0; i < nr_lines; i++)
		free(lines[i].text);
	free(lines);
}

/* The Python frames of py[0..depth), outermost first, each after a ';'. */
static void put_py(FILE *f, const int *py, int depth, const struct where_names *names)
{
	for (int d = depth - 1; d >= 0; d--) {
		fputc(';', f);
		put_frame(f, py[d] >= 0 ? names->names[py[d]] : "[unknown frame]");
	}
}

int where_write_folded(FILE *out, const struct where_sample *samples, int nr, int role,
		       const struct where_names *names)
{
	struct folded_line *lines = calloc(nr ? nr : 1, sizeof(*lines));
	int nr_lines = 0, err = 0;

	if (!lines)
		return -ENOMEM;
	for (int i = 0; i < nr; i++) {
		const struct where_sample *s = &samples[i];
		char *text = NULL;
		size_t len = 0;
		FILE *f;

		if (s->role < 0 || (role >= 0 && s->role != role))
			continue;
		f = open_memstream(&text, &len);
		if (!f) {
			err = -ENOMEM;
			goto cleanup;
		}
		fputs(role_name(s->role), f);
		put_py(f, s->py, s->py_depth, names);
		for (int d = s->nr_callers - 1; d >= 0; d--) {
			fputs(";[", f);
			put_frame(f, s->callers[d] >= 0 ? names->names[s->callers[d]] : "unknown");
			fputc(']', f);
		}
		fputc(';', f);
		if (s->native >= 0) {
			fputc('[', f);
			put_frame(f, names->names[s->native]);
			fputc(']', f);
		} else {
			fputs("[unknown]", f);
		}
		if (s->kernel)
			fputs(";[kernel]", f);
		if (fclose(f)) {
			free(text);
			err = -ENOMEM;
			goto cleanup;
		}
		lines[nr_lines++] = (struct folded_line){ .text = text, .count = 1 };
	}
	write_merged(out, lines, nr_lines);
cleanup:
	free_lines(lines, nr_lines);
	return err;
}

int where_write_folded_waits(FILE *out, const struct where_wait *waits, int nr, int role,
			     const struct where_names *names)
{
	struct folded_line *lines = calloc(nr ? nr : 1, sizeof(*lines));
	int nr_lines = 0, err = 0;

	if (!lines)
		return -ENOMEM;
	for (int i = 0; i < nr; i++) {
		const struct where_wait *w = &waits[i];
		char *text = NULL;
		size_t len = 0;
		FILE *f;

		if (!w->us)
			continue;	/* each under a microsecond: no weight to give them */
		if (role >= 0 && w->role != role)
			continue;
		f = open_memstream(&text, &len);
		if (!f) {
			err = -ENOMEM;
			goto cleanup;
		}
		fputs(role_name(role >= 0 ? role : ROLE_TRAINER), f);
		put_py(f, w->py, w->depth, names);
		fprintf(f, ";[%s]", state_name(w->cause));
		if (fclose(f)) {
			free(text);
			err = -ENOMEM;
			goto cleanup;
		}
		lines[nr_lines++] = (struct folded_line){ .text = text, .count = w->us };
	}
	write_merged(out, lines, nr_lines);
cleanup:
	free_lines(lines, nr_lines);
	return err;
}

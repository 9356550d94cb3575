// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The CPU sampler's plumbing (pystack.bpf.c): a perf event per CPU, the registration of each
 * process whose interpreter can be walked, the ring buffers of the samples and the waits (their
 * records kept by tracer_pyrecords.c), and at collection the
 * naming of what was sampled: Python code objects read from the target's memory and checked
 * against its own code type, native addresses through the mapped file's symbols. The pure
 * parts (layouts, str decoding, aggregation) are pystack.c.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "elfsym.h"
#include "intern.h"
#include "pipeprof.h"
#include "pipeprof.skel.h"
#include "pystack.h"
#include "report.h"
#include "symbolize.h"
#include "tracer.h"
#include "tracer_pyrecords.h"

/* Threads of one role whose waits can be open at once (profile --offcpu --role); the others'
 * waits are counted lost. */
#define MAX_WAIT_STACK_THREADS 1024
#define NAME_MAX_BYTES 200

struct tracer_pyproc {
	pid_t pid;
	const struct py_layout *layout;	/* NULL: a version pipeprof cannot walk */
	int major, minor;
	uint64_t code_type;		/* &PyCode_Type in the process */
	int err;
};

/*
 * A sampler at a fixed period locks onto a loop whose step is a multiple of it (199 Hz on a
 * 10 ms loop read one function 39% against a truth of 30%, 27% at the next attach): every CPU's
 * period is drawn again, within +-25% of the nominal one, at each 100 ms tick, so the samples'
 * phase against any loop wanders and the shares converge on the truth.
 */
#define DITHER_PCT 25

static uint64_t dithered_period(struct tracer *t)
{
	uint64_t nominal = 1000000000ULL / t->sample_hz, x = t->dither_state;

	/* xorshift64: a different phase each draw is all this needs. */
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	t->dither_state = x;
	return nominal * (100 - DITHER_PCT) / 100 + x % (nominal * 2 * DITHER_PCT / 100 + 1);
}

static int perf_event_open_cpu(uint64_t period_ns, int cpu)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = period_ns,
	};

	return (int)syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

int tracer_sampler_start(struct tracer *t)
{
	int ncpus = libbpf_num_possible_cpus(), err = 0;

	if (!t->sample_hz)
		return 0;
	t->dither_state = monotonic_ns() | 1;
	t->sample_draw = (struct reservoir){ .rng = t->dither_state * 0x9e3779b97f4a7c15ULL };
	if (ncpus <= 0)
		return ncpus ? ncpus : -EINVAL;
	t->sample_fds = calloc(ncpus, sizeof(*t->sample_fds));
	t->sample_links = calloc(ncpus, sizeof(*t->sample_links));
	if (!t->sample_fds || !t->sample_links)
		return -ENOMEM;
	t->sample_ncpus = ncpus;
	for (int cpu = 0; cpu < ncpus; cpu++)
		t->sample_fds[cpu] = -1;
	for (int cpu = 0; cpu < ncpus; cpu++) {
		int fd = perf_event_open_cpu(dithered_period(t), cpu);

		if (fd < 0) {
			if (errno == ENODEV)	/* a possible CPU that is offline */
				continue;
			err = -errno;
			break;
		}
		t->sample_fds[cpu] = fd;
		t->sample_links[cpu] = bpf_program__attach_perf_event(t->skel->progs.on_cpu_sample, fd);
		if (!t->sample_links[cpu]) {
			err = -errno;
			break;
		}
		t->nr_sample_cpus++;
	}
	if (!err) {
		t->samples_rb = ring_buffer__new(bpf_map__fd(t->skel->maps.samples), tracer_on_sample, t, NULL);
		if (!t->samples_rb)
			err = -errno;
		else if (ring_buffer__add(t->samples_rb, bpf_map__fd(t->skel->maps.wait_records),
					  tracer_on_wait, t))
			err = -errno;
	}
	if (err)
		snprintf(t->sample_err, sizeof(t->sample_err), "cannot sample the CPUs: %s",
			 strerror(-err));
	return err;
}

/* A power of two of pages, at least one. */
static __u32 ringbuf_size(size_t bytes)
{
	__u32 size = (__u32)sysconf(_SC_PAGESIZE);

	while (size < bytes && size < (1u << 30))
		size <<= 1;
	return size;
}

/* The largest power of two of pages that bytes fills, at least one page. */
static __u32 ringbuf_size_within(size_t bytes)
{
	__u32 size = ringbuf_size(bytes);

	return size > bytes && size > (__u32)sysconf(_SC_PAGESIZE) ? size / 2 : size;
}

void tracer_size_sample_buffers(struct tracer *t)
{
	int ncpus = libbpf_num_possible_cpus();
	/* Read every 100 ms tick: room for a second's samples of every CPU, and for about a
	 * thousand waits with full stacks, 64 frames and 64 of the waker's (~970 records in 1 MB;
	 * four thousand for a role's threads), or ~4,000 of a trainer ~13 frames deep woken by a
	 * thread ~10 deep (~240 bytes a record, PP_WAIT_RECORD_BYTES and the ring's header).
	 * The waits' ring is rounded down: a ring's data pages are mapped twice into pipeprof,
	 * and once the records have gone round it, each counts twice in its resident memory
	 * (1,000 records rounded up to 2 MB were 4 MB of it). Every page of a ring buffer is
	 * allocated and mapped at load, so without samples they are a page each. */
	size_t samples = t->sample_hz ? (size_t)(ncpus > 0 ? ncpus : 1) * t->sample_hz *
			 sizeof(struct pp_sample) : 0;
	size_t waits = !t->sample_hz ? 0 : (t->wait_stack_scope == PP_WAIT_STACKS_TID ? 1000 : 4000) *
		       sizeof(struct pp_wait_stack);

	bpf_map__set_max_entries(t->skel->maps.samples, ringbuf_size(samples));
	bpf_map__set_max_entries(t->skel->maps.wait_records, ringbuf_size_within(waits));
	/* A wait being filled per thread: the trainer's, or every thread of a role's. */
	bpf_map__set_max_entries(t->skel->maps.wait_stack,
				 t->wait_stack_scope == PP_WAIT_STACKS_TID ? 1 : MAX_WAIT_STACK_THREADS);
}

static void name_new(struct tracer *t);

void tracer_sampler_poll(struct tracer *t)
{
	if (!t->samples_rb)
		return;
	ring_buffer__consume(t->samples_rb);
	name_new(t);
	for (int cpu = 0; cpu < t->sample_ncpus; cpu++) {
		uint64_t period = dithered_period(t);

		if (t->sample_fds[cpu] >= 0)
			ioctl(t->sample_fds[cpu], PERF_EVENT_IOC_PERIOD, &period);
	}
}

static int read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)addr, .iov_len = len };

	if (!addr)
		return -EFAULT;
	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

/* What one interpreter file says, read once however many processes map it (a DataLoader
 * forks a copy of the trainer per worker). */
struct py_file {
	uint64_t inode;
	unsigned int dev_major, dev_minor;
	uint64_t runtime, code_type;	/* symbol values */
	int err;
};

static int file_symbols(struct tracer *t, pid_t pid, const struct mapped_lib *lib,
			const struct py_file **out)
{
	struct elf_func syms[2] = { { .name = "_PyRuntime", .object = true },
				    { .name = "PyCode_Type", .object = true } };
	char path[PATH_MAX + 64];
	struct py_file *f;
	void *grown;
	int n;

	for (int i = 0; i < t->nr_pyfiles; i++)
		if (lib_is_file(lib, t->pyfiles[i].inode, t->pyfiles[i].dev_major,
				t->pyfiles[i].dev_minor)) {
			*out = &t->pyfiles[i];
			return t->pyfiles[i].err;
		}
	grown = realloc(t->pyfiles, (t->nr_pyfiles + 1) * sizeof(*t->pyfiles));
	if (!grown)
		return -ENOMEM;
	t->pyfiles = grown;
	f = &t->pyfiles[t->nr_pyfiles++];
	*f = (struct py_file){ .inode = lib->inode, .dev_major = lib->dev_major,
			       .dev_minor = lib->dev_minor };
	lib_open_path(pid, lib, path, sizeof(path));
	n = elf_resolve_funcs(path, syms, 2);
	if (n < 0)
		f->err = n;
	else if (!syms[0].found || !syms[1].found)
		f->err = -ENOENT;
	f->runtime = syms[0].value;
	f->code_type = syms[1].value;
	*out = f;
	return f->err;
}

static int register_proc(struct tracer *t, pid_t pid, const struct mapped_lib *lib,
			 struct tracer_pyproc *p)
{
	const struct py_file *file;
	struct pp_py_proc rec = {};
	char path[PATH_MAX + 64], tp_name[8] = {};
	uint64_t vaddr, bias = 0, interp = 0, name_ptr = 0;
	bool relocatable;
	int err;

	if (py_version_of_path(lib->path, &p->major, &p->minor))
		return -EPROTONOSUPPORT;
	p->layout = py_layout_for(p->major, p->minor);
	if (!p->layout)
		return -EPROTONOSUPPORT;
	err = file_symbols(t, pid, lib, &file);
	if (err)
		return err;
	lib_open_path(pid, lib, path, sizeof(path));
	err = elf_offset_to_vaddr(path, lib->base_pgoff, &vaddr, &relocatable);
	if (err)
		return err;
	if (relocatable)
		bias = lib->base_start - vaddr;
	rec.runtime = bias + file->runtime;
	p->code_type = bias + file->code_type;
	/* Proof that the layout and the addresses are right before a program relies on them:
	 * the code type's tp_name reads "code" and the main interpreter is there. */
	if (read_mem(pid, p->code_type + 0x18, &name_ptr, sizeof(name_ptr)) ||
	    read_mem(pid, name_ptr, tp_name, 5) || strcmp(tp_name, "code") ||
	    read_mem(pid, rec.runtime + p->layout->walk.runtime_interp, &interp, sizeof(interp)) ||
	    !interp)
		return -EPROTO;
	rec.layout = p->layout->walk;
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.py_procs), &pid, &rec, BPF_ANY))
		return -errno;
	return 0;
}

void tracer_sampler_add_process(struct tracer *t, pid_t pid, const struct mapped_lib *lib)
{
	struct tracer_pyproc *p = NULL, tried = { .pid = pid };
	void *grown;

	if (!t->sample_hz)
		return;
	for (int i = 0; i < t->nr_pyprocs; i++)
		if (t->pyprocs[i].pid == pid)
			p = &t->pyprocs[i];
	/* A process maps its executable and, in a shared build, libpython: the runtime lives in
	 * one of them, and the one that has it wins. */
	if (p && !p->err)
		return;
	tried.err = register_proc(t, pid, lib, &tried);
	if (!p) {
		grown = realloc(t->pyprocs, (t->nr_pyprocs + 1) * sizeof(*t->pyprocs));
		if (!grown)
			return;
		t->pyprocs = grown;
		p = &t->pyprocs[t->nr_pyprocs++];
		*p = tried;
	} else if (!tried.err || tried.err != -ENOENT) {
		*p = tried;
	}
	if (t->verbose)
		fprintf(stderr, "pipeprof: pid %d: Python %d.%d stacks %s%s\n", pid, tried.major,
			tried.minor, tried.err ? "not walked: " : "walked",
			tried.err ? strerror(-tried.err) : "");
}

static const struct tracer_pyproc *pyproc_of(const struct tracer *t, pid_t pid)
{
	for (int i = 0; i < t->nr_pyprocs; i++)
		if (t->pyprocs[i].pid == pid)
			return &t->pyprocs[i];
	return NULL;
}

/* A str object's text, or -errno. */
static int read_str(pid_t pid, const struct py_layout *l, uint64_t addr, char *out, size_t size)
{
	uint8_t head[64], data[NAME_MAX_BYTES * 4];
	uint32_t state;
	int64_t length;
	size_t off, width;

	if (read_mem(pid, addr, head, l->str_ascii_size))
		return -EFAULT;
	memcpy(&state, head + PY_STR_STATE_OFFSET, sizeof(state));
	memcpy(&length, head + PY_STR_LENGTH_OFFSET, sizeof(length));
	if (length < 0 || py_str_data_offset(l, state, &off))
		return -EINVAL;
	if (length > NAME_MAX_BYTES)
		length = NAME_MAX_BYTES;
	width = (state >> 2) & 7;
	if (width != 1 && width != 2 && width != 4)
		return -EINVAL;
	if (length && read_mem(pid, addr + off, data, length * width))
		return -EFAULT;
	return py_str_to_utf8(state, data, length, out, size);
}

/* "qualname (file.py:line)" of a code object and its file, or -errno when it is not one. */
static int code_name(const struct tracer_pyproc *p, uint64_t code, char *out, size_t size,
		     char *file, size_t file_size)
{
	const struct py_layout *l = p->layout;
	char name[NAME_MAX_BYTES * 4 + 1];
	uint64_t type = 0, name_ptr = 0, file_ptr = 0;
	const char *base;
	int line = 0;

	if (read_mem(p->pid, code + 8, &type, sizeof(type)) || type != p->code_type)
		return -EINVAL;
	if (read_mem(p->pid, code + l->code_name, &name_ptr, sizeof(name_ptr)) ||
	    read_mem(p->pid, code + l->code_filename, &file_ptr, sizeof(file_ptr)) ||
	    read_mem(p->pid, code + l->code_firstlineno, &line, sizeof(line)) ||
	    read_str(p->pid, l, name_ptr, name, sizeof(name)) ||
	    read_str(p->pid, l, file_ptr, file, file_size))
		return -EFAULT;
	base = strrchr(file, '/');
	/* A name too long for out is cut, not refused. */
	return snprintf(out, size, "%s (%s:%d)", name, base ? base + 1 : file, line) < 0 ? -EINVAL : 0;
}

/* Open-addressed cache of (pid, address) -> name id. */
struct addr_cache {
	struct addr_slot {
		uint64_t pid_plus_one, addr;
		int id;
		bool tried;
		bool kept;		/* return addresses: one a native stack keeps */
		uint8_t serial;		/* leaves: enum serial_code */
	} *slots;
	size_t cap, used;
};

static struct addr_slot *cache_slot(struct addr_cache *c, pid_t pid, uint64_t addr, bool *fresh)
{
	size_t h;

	if (c->used * 2 >= c->cap) {
		struct addr_cache grown = { .cap = c->cap ? 2 * c->cap : 1024 };

		grown.slots = calloc(grown.cap, sizeof(*grown.slots));
		if (!grown.slots)
			return NULL;
		for (size_t i = 0; i < c->cap; i++) {
			struct addr_slot *s = &c->slots[i];
			bool dummy;

			if (s->pid_plus_one)
				*cache_slot(&grown, (pid_t)(s->pid_plus_one - 1), s->addr, &dummy) = *s;
		}
		free(c->slots);
		*c = grown;
		c->used = 0;
		for (size_t i = 0; i < c->cap; i++)
			c->used += !!c->slots[i].pid_plus_one;
	}
	h = (addr * 0x9e3779b97f4a7c15ULL ^ (uint64_t)pid) & (c->cap - 1);
	while (c->slots[h].pid_plus_one && !(c->slots[h].pid_plus_one == (uint64_t)pid + 1 &&
					      c->slots[h].addr == addr))
		h = (h + 1) & (c->cap - 1);
	*fresh = !c->slots[h].pid_plus_one;
	if (*fresh) {
		c->slots[h] = (struct addr_slot){ .pid_plus_one = (uint64_t)pid + 1, .addr = addr,
						  .id = -1 };
		c->used++;
	}
	return &c->slots[h];
}

/* Name ids of code[0..depth) of process pid into ids[], innermost first (-1: not a code
 * object). */
static void resolve_stack(struct addr_cache *codes, const struct tracer_pyproc *p, pid_t pid,
			  const uint64_t *code, int depth, struct where_names *names, int *ids)
{
	char name[PATH_MAX + NAME_MAX_BYTES * 4], file[PATH_MAX];

	for (int d = 0; d < depth; d++) {
		struct addr_slot *slot = p && p->layout ? cache_slot(codes, pid, code[d], &(bool){ 0 }) : NULL;
		bool fresh = slot && slot->id == -1 && !slot->tried;

		ids[d] = -1;
		if (!slot)
			continue;
		if (fresh) {
			slot->tried = true;
			if (!code_name(p, code[d], name, sizeof(name), file, sizeof(file)))
				slot->id = where_name_id_in(names, name, file);
		}
		ids[d] = slot->id;
	}
}

/* The native callers of a sample's leaf, innermost first, as far as the frame pointer walk
 * gave return addresses: it stops at the first word that does not follow a call (a library
 * without frame pointers) and, in a walked Python thread, at the interpreter, whose part the
 * Python frames tell. A return address is named by the call before it (ret - 1), which can
 * be the last instruction of its function. */
static int resolve_callers(struct symbolizer *z, struct addr_cache *rets,
			   const struct tracer_sample *s, struct where_sample *w,
			   struct where_names *names, struct intern_set *stacks)
{
	char name[PATH_MAX + NAME_MAX_BYTES * 4];
	int ids[PP_USTACK_MAX_DEPTH];

	for (int d = 1; d < s->ustack_depth && d <= PP_USTACK_MAX_DEPTH; d++) {
		uint64_t ret = s->callers[d - 1];
		struct addr_slot *slot;
		bool fresh;

		if (!ret || !(slot = cache_slot(rets, s->tgid, ret, &fresh)))
			break;
		if (fresh) {
			slot->kept = symbolizer_is_return_address(z, s->tgid, ret) &&
				     !(s->py == PP_SAMPLE_PY_OK &&
				       symbolizer_in_interpreter(z, s->tgid, ret - 1));
			if (slot->kept && !symbolizer_name(z, s->tgid, ret - 1, name, sizeof(name)))
				slot->id = where_name_id(names, name);
		}
		if (!slot->kept)
			break;
		ids[w->nr_callers++] = slot->id;
	}
	w->callers = intern(stacks, ids, w->nr_callers * sizeof(ids[0]));
	return !w->nr_callers || w->callers ? 0 : -ENOMEM;
}

/* The report's one copy of code[0..depth)'s name ids into *out; false when out of memory. */
static bool resolve_once(struct intern_set *stacks, struct addr_cache *codes,
			 const struct tracer_pyproc *p, pid_t pid, const uint64_t *code, int depth,
			 struct where_names *names, const int **out)
{
	int ids[PP_PY_MAX_DEPTH];

	resolve_stack(codes, p, pid, code, depth, names, ids);
	*out = intern(stacks, ids, depth * sizeof(ids[0]));
	return !depth || *out;
}

static int collect_waits(struct tracer *t, struct report *r, struct addr_cache *codes,
			 struct where_names *names)
{
	r->waits = calloc(t->nr_waits ? t->nr_waits : 1, sizeof(*r->waits));
	if (!r->waits)
		return -ENOMEM;
	for (int i = 0; i < t->nr_waits; i++) {
		const struct tracer_wait *sum = &t->waits[i];
		const struct tracer_wait_key *k = &sum->key;
		struct where_wait *w = &r->waits[r->nr_waits++];

		*w = (struct where_wait){ .cause = k->cause < PP_NR_STATES ? (int)k->cause : PP_OTHER,
					  .ns = sum->ns, .count = sum->count, .us = sum->us,
					  .tid = k->tid, .role = -1, .waker_tid = k->waker_tid,
					  .waker_role = -1 };
		if (!resolve_once(&r->name_stacks, codes, pyproc_of(t, k->tgid), k->tgid, k->code,
				  k->depth, names, &w->py))
			return -ENOMEM;
		w->depth = k->depth;
		if (!k->waker_tid)
			continue;
		if (!resolve_once(&r->name_stacks, codes, pyproc_of(t, k->waker_tgid), k->waker_tgid,
				  k->waker_code, k->waker_depth, names, &w->waker_py))
			return -ENOMEM;
		w->waker_depth = k->waker_depth;
	}
	return 0;
}

/* Names kept through the window: a Python frame is named while its process runs, and its
 * maps are kept, so the samples of a worker that exits before the close (an epoch's end) keep
 * their names. */
struct tracer_naming {
	struct addr_cache codes, ips, rets;
	struct symbolizer z;
	struct where_names names;
	int samples, waits;		/* named up to */
};

/* Sample s's native leaf, callers and Python frames into w, through the caches. */
static int name_sample(struct tracer *t, struct tracer_naming *n, const struct tracer_sample *s,
		       struct where_sample *w, struct intern_set *stacks)
{
	char name[PATH_MAX + NAME_MAX_BYTES * 4];
	struct addr_slot *slot;
	bool fresh;
	int err;

	*w = (struct where_sample){ .tid = s->tid, .tgid = s->tgid, .role = -1,
				    .kernel = s->kernel, .native = -1,
				    .py_depth = s->py == PP_SAMPLE_PY_OK ? s->depth : -1 };
	if (s->ustack_depth && s->leaf &&
	    (slot = cache_slot(&n->ips, s->tgid, s->leaf, &fresh))) {
		if (fresh) {
			if (!symbolizer_name(&n->z, s->tgid, s->leaf, name, sizeof(name)))
				slot->id = where_name_id(&n->names, name);
			slot->serial = symbolizer_serial_code(&n->z, s->tgid, s->leaf);
		}
		w->native = slot->id;
		w->serial = slot->serial;
	}
	if (s->ustack_depth > 1) {
		err = resolve_callers(&n->z, &n->rets, s, w, &n->names, stacks);
		if (err)
			return err;
	}
	if (w->py_depth <= 0)
		return 0;
	if (w->py_depth > PP_PY_MAX_DEPTH)
		w->py_depth = PP_PY_MAX_DEPTH;
	return resolve_once(stacks, &n->codes, pyproc_of(t, s->tgid), s->tgid, s->code, w->py_depth,
			    &n->names, &w->py) ? 0 : -ENOMEM;
}

/* Python frames are named at the tick after they came (a read of the process's memory each,
 * once); native ones at the close, from the maps read now: a library's symbol tables take tens
 * of ms of CPU to load, which a job whose processes hold every CPU would lose in the window. */
static void name_sample_frames(struct tracer *t, struct tracer_naming *n,
			       const struct tracer_sample *ts)
{
	int ids[PP_PY_MAX_DEPTH];

	if (ts->py == PP_SAMPLE_PY_OK && ts->depth > 0)
		resolve_stack(&n->codes, pyproc_of(t, ts->tgid), ts->tgid, ts->code, ts->depth,
			      &n->names, ids);
	if (ts->ustack_depth)
		symbolizer_snapshot(&n->z, ts->tgid);
}

/* At each tick: names what the samples and waits that came since hold. */
static void name_new(struct tracer *t)
{
	struct tracer_naming *n = t->naming;
	int ids[PP_PY_MAX_DEPTH];

	if (!n && !(n = t->naming = calloc(1, sizeof(*n)))) {
		t->nr_samples_redrawn = 0;
		return;
	}
	for (; n->samples < t->nr_samples; n->samples++)
		name_sample_frames(t, n, &t->samples[n->samples]);
	/* Past SAMPLES_KEPT, new samples replace some of those held. */
	for (int i = 0; i < t->nr_samples_redrawn; i++)
		name_sample_frames(t, n, &t->samples[t->samples_redrawn[i]]);
	t->nr_samples_redrawn = 0;
	for (; n->waits < t->nr_waits; n->waits++) {
		const struct tracer_wait_key *k = &t->waits[n->waits].key;

		resolve_stack(&n->codes, pyproc_of(t, k->tgid), k->tgid, k->code, k->depth,
			      &n->names, ids);
		if (k->waker_tid)
			resolve_stack(&n->codes, pyproc_of(t, k->waker_tgid), k->waker_tgid,
				      k->waker_code, k->waker_depth, &n->names, ids);
	}
}

void tracer_sampler_maps_changed(struct tracer *t, pid_t pid)
{
	if (t->naming)
		symbolizer_maps_changed(&t->naming->z, pid);
}

static void naming_free(struct tracer *t)
{
	struct tracer_naming *n = t->naming;

	if (!n)
		return;
	free(n->codes.slots);
	free(n->ips.slots);
	free(n->rets.slots);
	symbolizer_free(&n->z);
	where_names_free(&n->names);
	free(n);
	t->naming = NULL;
}

int tracer_collect_samples(struct tracer *t, struct report *r)
{
	struct tracer_naming *n;
	int err = 0;

	r->sample_hz = t->sample_hz;
	if (!t->sample_hz)
		return 0;
	tracer_sampler_poll(t);
	n = t->naming;
	if (!n)
		return -ENOMEM;
	/* Before the names below, which may read the maps of a process whose address missed. */
	r->maps_reads_naming = n->z.maps_reads;
	snprintf(r->sample_err, sizeof(r->sample_err), "%s", t->sample_err);
	r->samples_lost = tracer_counter(t, PP_CNT_SAMPLES_LOST) + t->samples_over_cap;
	r->samples_seen = t->sample_draw.seen;
	r->samples_cap = SAMPLES_KEPT;
	/* Of the samples kept, as the counts beside it are. */
	r->samples_truncated = 0;
	for (int i = 0; i < t->nr_samples; i++)
		r->samples_truncated += t->samples[i].truncated;
	r->nr_py_procs = 0;
	for (int i = 0; i < t->nr_pyprocs && r->nr_py_procs < MAX_PY_PROCS; i++) {
		const struct tracer_pyproc *p = &t->pyprocs[i];

		r->py_procs[r->nr_py_procs++] = (struct py_proc_result){
			.pid = p->pid, .major = p->major, .minor = p->minor, .err = p->err };
	}
	r->where_samples = calloc(t->nr_samples ? t->nr_samples : 1, sizeof(*r->where_samples));
	if (!r->where_samples)
		return -ENOMEM;
	/* Every frame was looked up at a tick: this pass finds each in the caches. */
	for (int i = 0; i < t->nr_samples && !err; i++)
		err = name_sample(t, n, &t->samples[i], &r->where_samples[r->nr_where_samples++],
				  &r->name_stacks);
	if (!err)
		err = collect_waits(t, r, &n->codes, &n->names);
	r->wait_records_lost = tracer_counter(t, PP_CNT_WAIT_STACKS_LOST) + t->waits_over_cap;
	/* The report takes the names; the caches' ids index them. */
	r->where_names = n->names;
	memset(&n->names, 0, sizeof(n->names));
	return err;
}

void tracer_sampler_close(struct tracer *t)
{
	naming_free(t);
	for (int i = 0; i < t->sample_ncpus; i++) {
		if (t->sample_links)
			bpf_link__destroy(t->sample_links[i]);
		if (t->sample_fds && t->sample_fds[i] >= 0)
			close(t->sample_fds[i]);
	}
	free(t->sample_links);
	free(t->sample_fds);
	t->sample_links = NULL;
	t->sample_fds = NULL;
	t->sample_ncpus = t->nr_sample_cpus = 0;
	ring_buffer__free(t->samples_rb);
	t->samples_rb = NULL;
	intern_free(&t->stacks);
	intern_free(&t->wait_keys);
	free(t->waits);
	t->waits = NULL;
	t->nr_waits = t->cap_waits = 0;
	free(t->samples);
	t->samples = NULL;
	t->nr_samples = t->cap_samples = 0;
	free(t->samples_redrawn);
	t->samples_redrawn = NULL;
	t->nr_samples_redrawn = t->cap_samples_redrawn = 0;
	t->sample_draw = (struct reservoir){ 0 };
	free(t->pyprocs);
	t->pyprocs = NULL;
	t->nr_pyprocs = 0;
	free(t->pyfiles);
	t->pyfiles = NULL;
	t->nr_pyfiles = 0;
}

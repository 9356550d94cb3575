// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The Python interpreter's garbage collections, from its USDT probes (python.bpf.c): one probe
 * per interpreter file serves every process that maps it, as for the loader. BPF plumbing,
 * beside tracer_notes.c. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "elfsym.h"
#include "pipeprof.h"	/* the types the skeleton's globals use */
#include "pipeprof.skel.h"
#include "sanitize.h"
#include "tracer.h"
#include "uprobe_multi.h"

enum { GC_START, GC_DONE, NR_GC_PROBES };

struct tracer_interp {
	uint64_t inode;
	unsigned int dev_major, dev_minor;
	char path[PATH_MAX];	/* as the first process that mapped it sees it */
	int fds[NR_GC_PROBES];	/* multi-uprobe links, -1 when not */
	struct bpf_link *links[NR_GC_PROBES];
	int err;		/* 0 when probed */
};

static struct tracer_interp *find_interp(struct tracer *t, const struct mapped_lib *lib)
{
	for (int i = 0; i < t->nr_interps; i++) {
		struct tracer_interp *in = &t->interps[i];

		if (lib_is_file(lib, in->inode, in->dev_major, in->dev_minor))
			return in;
	}
	return NULL;
}

static int attach_probe(struct tracer *t, struct tracer_interp *in, int k,
			const struct bpf_program *prog, const char *path,
			const struct elf_usdt *probe)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .ref_ctr_offset = probe->semaphore_offset);

	/* pid 0 (-1 for libbpf): every process that maps this interpreter; the programs keep
	 * the tracked ones. A process started later gets its counter raised as it maps it. */
	if (t->uprobe_multi) {
		in->fds[k] = uprobe_multi_attach_usdt(prog, 0, path, probe->offset,
						      probe->semaphore_offset);
		return in->fds[k] < 0 ? in->fds[k] : 0;
	}
	in->links[k] = bpf_program__attach_uprobe_opts(prog, -1, path, probe->offset, &opts);
	return in->links[k] ? 0 : -errno;
}

void tracer_attach_python(struct tracer *t, pid_t pid, const struct mapped_lib *lib)
{
	struct elf_usdt probes[NR_GC_PROBES] = {
		[GC_START] = { .provider = "python", .name = "gc__start" },
		[GC_DONE] = { .provider = "python", .name = "gc__done" },
	};
	char path[PATH_MAX + 64], shown[SAN_TEXT_SIZE(sizeof(lib->path))];
	struct tracer_interp *in;
	void *grown;
	int n;

	if (find_interp(t, lib))
		return;
	grown = realloc(t->interps, (t->nr_interps + 1) * sizeof(*t->interps));
	if (!grown)
		return;
	t->interps = grown;
	in = &t->interps[t->nr_interps++];
	*in = (struct tracer_interp){ .inode = lib->inode, .dev_major = lib->dev_major,
				      .dev_minor = lib->dev_minor, .fds = { -1, -1 } };
	memcpy(in->path, lib->path, sizeof(in->path));

	lib_open_path(pid, lib, path, sizeof(path));
	n = elf_find_usdt(path, probes, NR_GC_PROBES);
	if (n < 0)
		in->err = n;
	else if (n < NR_GC_PROBES)
		in->err = -ENOENT;
	/* The end first: a collection seen to start is seen to end. */
	else if (!(in->err = attach_probe(t, in, GC_DONE, t->skel->progs.on_gc_done, path,
					  &probes[GC_DONE])))
		in->err = attach_probe(t, in, GC_START, t->skel->progs.on_gc_start, path,
				       &probes[GC_START]);
	if (t->verbose) {
		san_text(shown, sizeof(shown), lib->path, sizeof(lib->path));
		if (in->err)
			fprintf(stderr, "pipeprof: Python GC not traced in %s: %s\n", shown,
				in->err == -ENOENT ? "no gc__start/gc__done USDT probes (built "
				"without --with-dtrace)" : strerror(-in->err));
		else
			fprintf(stderr, "pipeprof: Python GC probes in %s: gc__start 0x%llx, gc__done "
				"0x%llx\n", shown, (unsigned long long)probes[GC_START].offset,
				(unsigned long long)probes[GC_DONE].offset);
	}
}

const char *tracer_python_gc_why_not(struct tracer *t, char *buf, size_t size)
{
	char shown[SAN_TEXT_SIZE(PATH_MAX)];
	int probed = 0;

	for (int i = 0; i < t->nr_interps; i++)
		probed += !t->interps[i].err;
	if (probed)
		return NULL;
	if (!t->nr_interps) {
		snprintf(buf, size, "no Python interpreter is mapped by the traced processes");
		return buf;
	}
	san_text(shown, sizeof(shown), t->interps[0].path, sizeof(t->interps[0].path));
	if (t->interps[0].err == -ENOENT)
		snprintf(buf, size, "%s has no gc__start/gc__done USDT probes (built without "
			 "--with-dtrace)", shown);
	else
		snprintf(buf, size, "cannot probe %s: %s", shown, strerror(-t->interps[0].err));
	return buf;
}

void tracer_collect_python(struct tracer *t, struct report *r)
{
	r->gc_traced = !tracer_python_gc_why_not(t, r->gc_why_not, sizeof(r->gc_why_not));
	if (!r->gc_traced && t->nr_interps)
		report_not_traced(r, "Python GC: %s; no GC pauses are counted", r->gc_why_not);
}

void tracer_python_close(struct tracer *t)
{
	for (int i = 0; i < t->nr_interps; i++) {
		for (int k = 0; k < NR_GC_PROBES; k++) {
			bpf_link__destroy(t->interps[i].links[k]);
			if (t->interps[i].fds[k] >= 0)
				close(t->interps[i].fds[k]);
		}
	}
	free(t->interps);
	t->interps = NULL;
	t->nr_interps = 0;
}

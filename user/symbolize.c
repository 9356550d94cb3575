// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "callsite.h"
#include "elfsym.h"
#include "procmaps.h"
#include "pystack.h"
#include "symbolize.h"
#include "grow.h"

/* A file's symbols, loaded once however many processes map it. */
struct sym_file {
	uint64_t inode;
	unsigned int dev_major, dev_minor;
	struct elf_syms syms;
	int err;
	int threads;		/* elf_imports_threads(), or -2 before it is asked */
};

struct sym_map {
	uint64_t start, end, pgoff, inode;
	unsigned int dev_major, dev_minor;
	bool exec;
	char *path;
};

/* A process's mappings as they were when last read, in address order. */
struct sym_proc {
	pid_t pid;
	struct sym_map *maps;
	int nr_maps;
	uint64_t loaded_ns;
	bool stale;		/* the process has mapped a library since: the next snapshot reads */
};

/* A miss re-reads the maps (a library loaded since), at most this often: each read takes the
 * process's mmap_lock, and an address in no mapping stays a miss. */
#define RELOAD_NS (1000ull * 1000 * 1000)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void proc_free(struct sym_proc *p)
{
	for (int i = 0; i < p->nr_maps; i++)
		free(p->maps[i].path);
	free(p->maps);
}

static int proc_load(struct symbolizer *z, struct sym_proc *p, pid_t pid)
{
	char line[PATH_MAX + 128], *buf;
	struct maps_entry e;
	int cap = 0, err = 0;
	FILE *f;

	*p = (struct sym_proc){ .pid = pid, .loaded_ns = now_ns() };
	f = procmaps_open(pid, &buf);
	if (!f)
		return 0;	/* gone: an empty map, asked once */
	z->maps_reads++;
	while (fgets(line, sizeof(line), f)) {
		if (procmaps_parse_line(line, &e))
			continue;
		if (grow_array(&p->maps, &cap, p->nr_maps, sizeof(*p->maps), 64)) {
			err = -ENOMEM;
			break;
		}
		p->maps[p->nr_maps] = (struct sym_map){
			.start = e.start, .end = e.end, .pgoff = e.pgoff, .inode = e.inode,
			.dev_major = e.dev_major, .dev_minor = e.dev_minor, .exec = e.perms[2] == 'x',
			.path = strdup(e.path) };
		if (!p->maps[p->nr_maps].path) {
			err = -ENOMEM;
			break;
		}
		p->nr_maps++;
	}
	fclose(f);
	free(buf);
	return err;
}

static const struct sym_map *find_map(const struct sym_proc *p, uint64_t addr)
{
	int lo = 0, hi = p->nr_maps - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;

		if (addr < p->maps[mid].start)
			hi = mid - 1;
		else if (addr >= p->maps[mid].end)
			lo = mid + 1;
		else
			return &p->maps[mid];
	}
	return NULL;
}

static struct sym_proc *find_proc(struct symbolizer *z, pid_t pid)
{
	for (int i = 0; i < z->nr_procs; i++)
		if (z->procs[i].pid == pid)
			return &z->procs[i];
	return NULL;
}

/* Replaces p's maps with pid's now; keeps them where the process is gone or unreadable. */
static void proc_reload(struct symbolizer *z, struct sym_proc *p, pid_t pid)
{
	struct sym_proc fresh;

	if (proc_load(z, &fresh, pid) || !fresh.nr_maps) {
		proc_free(&fresh);
		p->loaded_ns = now_ns();
		p->stale = false;
		return;
	}
	proc_free(p);
	*p = fresh;
}

/* pid's maps, read now and kept; NULL on ENOMEM. */
static struct sym_proc *proc_add(struct symbolizer *z, pid_t pid)
{
	void *grown = realloc(z->procs, (z->nr_procs + 1) * sizeof(*z->procs));
	struct sym_proc *p;

	if (!grown)
		return NULL;
	z->procs = grown;
	p = &z->procs[z->nr_procs];
	if (proc_load(z, p, pid)) {
		proc_free(p);
		return NULL;
	}
	z->nr_procs++;
	return p;
}

static const struct sym_map *map_of(struct symbolizer *z, pid_t pid, uint64_t addr)
{
	struct sym_proc *p = find_proc(z, pid);
	const struct sym_map *m;

	if (!p && !(p = proc_add(z, pid)))
		return NULL;
	m = find_map(p, addr);
	/* Named while the job runs: a library mapped after the last read. A process gone since
	 * reads as empty, and keeps what it had. */
	if (!m && now_ns() - p->loaded_ns >= RELOAD_NS) {
		proc_reload(z, p, pid);
		m = find_map(p, addr);
	}
	return m;
}

/* Not map_of(z, pid, 0), as it was: address 0 is a miss in every process, and re-read its
 * maps each second while samples came, ~10 ms of a torch process's mmap_lock each (0.6-0.9% of
 * the CPU-bound loop's speed under -p, tools/bench/targets.py). */
void symbolizer_snapshot(struct symbolizer *z, pid_t pid)
{
	struct sym_proc *p = find_proc(z, pid);

	if (!p)
		proc_add(z, pid);
	else if (p->stale)
		proc_reload(z, p, pid);
}

void symbolizer_maps_changed(struct symbolizer *z, pid_t pid)
{
	for (int i = 0; i < z->nr_procs; i++)
		if (!pid || z->procs[i].pid == pid)
			z->procs[i].stale = true;
}

static const char *demangled(struct symbolizer *z, const char *name, char **owned)
{
	int status = 0;

	*owned = NULL;
	if (strncmp(name, "_Z", 2))
		return name;
	/* libstdc++ only when a C++ name is to be shown: pipeprof itself does not link it. */
	if (!z->libstdcxx) {
		z->libstdcxx = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
		if (z->libstdcxx)
			*(void **)&z->demangle = dlsym(z->libstdcxx, "__cxa_demangle");
	}
	if (z->demangle)
		*owned = z->demangle(name, NULL, NULL, &status);
	return *owned && !status ? *owned : name;
}

/*
 * Where to open the file of mapping m: through map_files, the file the process maps whatever
 * its path now names; for a process gone since its maps were read, the path, while it still
 * names that file (its inode: on an overlay the device the maps show is the lower one's, not
 * stat's).
 */
static const char *map_path(pid_t pid, const struct sym_map *m, char *buf, size_t size)
{
	struct stat st;

	snprintf(buf, size, "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)m->start,
		 (unsigned long long)m->end);
	if (!access(buf, F_OK) || m->path[0] != '/' || stat(m->path, &st) || st.st_ino != m->inode)
		return buf;
	return m->path;
}

static struct sym_file *file_of(struct symbolizer *z, pid_t pid, const struct sym_map *m)
{
	char file[96];
	struct sym_file *sf;
	void *grown;

	for (int i = 0; i < z->nr_files; i++)
		if (z->files[i].inode == m->inode && z->files[i].dev_major == m->dev_major &&
		    z->files[i].dev_minor == m->dev_minor)
			return &z->files[i];
	grown = realloc(z->files, (z->nr_files + 1) * sizeof(*z->files));
	if (!grown)
		return NULL;
	z->files = grown;
	sf = &z->files[z->nr_files++];
	*sf = (struct sym_file){ .inode = m->inode, .dev_major = m->dev_major,
				 .dev_minor = m->dev_minor, .threads = -2 };
	sf->err = elf_syms_load(map_path(pid, m, file, sizeof(file)), &sf->syms);
	return sf;
}

int symbolizer_name(struct symbolizer *z, pid_t pid, uint64_t ip, char *out, size_t size)
{
	const struct sym_map *m = map_of(z, pid, ip);
	struct sym_file *sf;
	const char *sym, *base;
	char file[96], sym_buf[4096];
	bool relocatable;
	uint64_t vaddr;
	char *owned;

	if (!m)
		return -ENOENT;
	if (!m->inode) {
		/* The vDSO, a JIT's code: the mapping's own name ("[vdso]") is all there is. */
		size_t len = strlen(m->path);

		if (len > 2 && m->path[0] == '[' && m->path[len - 1] == ']')
			snprintf(out, size, "%.*s", (int)(len - 2), m->path + 1);
		else
			snprintf(out, size, "%s", len ? m->path : "JIT code (anonymous memory)");
		return 0;
	}
	sf = file_of(z, pid, m);
	base = strrchr(m->path, '/');
	base = base ? base + 1 : m->path;
	if (!sf || sf->err ||
	    elf_offset_to_vaddr(map_path(pid, m, file, sizeof(file)), ip - m->start + m->pgoff, &vaddr,
				&relocatable) ||
	    !(sym = elf_syms_find(&sf->syms, vaddr, sym_buf, sizeof(sym_buf)))) {
		snprintf(out, size, "%s+0x%llx", base, (unsigned long long)(ip - m->start + m->pgoff));
		return 0;
	}
	snprintf(out, size, "%s (%s)", demangled(z, sym, &owned), base);
	free(owned);
	return 0;
}

bool symbolizer_is_return_address(struct symbolizer *z, pid_t pid, uint64_t ret)
{
	const struct sym_map *m = map_of(z, pid, ret - 1);
	uint8_t before[CALLSITE_BYTES];
	struct iovec local = { before, sizeof(before) };
	struct iovec remote = { (void *)(uintptr_t)(ret - sizeof(before)), sizeof(before) };

	if (!m || !m->exec || ret - sizeof(before) < m->start)
		return false;
	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == sizeof(before) &&
	       x86_call_ends_at(before);
}

bool symbolizer_in_interpreter(struct symbolizer *z, pid_t pid, uint64_t ip)
{
	const struct sym_map *m = map_of(z, pid, ip);
	const char *base;

	if (!m || !m->inode)
		return false;
	base = strrchr(m->path, '/');
	base = base ? base + 1 : m->path;
	return !strncmp(base, "python", 6) || !strncmp(base, "libpython", 9);
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

int symbolizer_serial_code(struct symbolizer *z, pid_t pid, uint64_t ip)
{
	/* The BLAS libraries torch may be linked with, by file name. */
	static const char *const blas[] = { "libblas.so", "libopenblas", "libcblas.so", "libblis",
					    "libmkl_rt", "libflexiblas" };
	const struct sym_map *m = map_of(z, pid, ip);
	struct sym_file *sf;
	const char *base;
	char file[96];
	bool is_blas = false;

	if (!m || !m->inode)
		return CODE_NOT_SERIAL;
	base = base_name(m->path);
	if (!strncmp(base, "python", 6) || !strncmp(base, "libpython", 9))
		return CODE_INTERPRETER;
	for (size_t i = 0; i < sizeof(blas) / sizeof(blas[0]) && !is_blas; i++)
		is_blas = !strncmp(base, blas[i], strlen(blas[i]));
	if (!is_blas || !(sf = file_of(z, pid, m)))
		return CODE_NOT_SERIAL;
	if (sf->threads == -2) {
		sf->threads = elf_imports_threads(map_path(pid, m, file, sizeof(file)));
	}
	/* A BLAS that cannot be read is not known to be serial. */
	return sf->threads == 0 ? CODE_SERIAL_LIBRARY : CODE_NOT_SERIAL;
}

void symbolizer_free(struct symbolizer *z)
{
	for (int i = 0; i < z->nr_files; i++)
		elf_syms_free(&z->files[i].syms);
	free(z->files);
	for (int i = 0; i < z->nr_procs; i++)
		proc_free(&z->procs[i]);
	free(z->procs);
	if (z->libstdcxx)
		dlclose(z->libstdcxx);
	*z = (struct symbolizer){};
}

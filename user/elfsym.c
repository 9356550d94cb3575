/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include "elfsym.h"

#define VERSYM_HIDDEN 0x8000

/* How good a match is: a hidden version (name@VER) only counts when there is no default. */
enum sym_rank {
	RANK_NONE = 0,
	RANK_HIDDEN,
	RANK_DEFAULT,
};

static bool libelf_ready;

static int libelf_init(void)
{
	/* elf_version() is idempotent, so two threads racing here is harmless. */
	if (libelf_ready)
		return 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	libelf_ready = true;
	return 0;
}

static int elf_open(const char *path, int *fdp, Elf **elfp)
{
	Elf *elf;
	int fd, err;

	err = libelf_init();
	if (err)
		return err;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	/* Archives (libcudart_static.a) are not something a uprobe can attach to either. */
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		if (elf)
			elf_end(elf);
		close(fd);
		return -EINVAL;
	}
	*fdp = fd;
	*elfp = elf;
	return 0;
}

/*
 * Only the file-backed part of a segment (p_filesz) has a file offset; .bss does not.
 * Segments do not normally overlap, but if they did the code is in the executable one.
 */
static int load_offset(Elf *elf, uint64_t vaddr, uint64_t *offset)
{
	bool have = false;
	size_t i, phnum;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &phnum))
		return -EINVAL;
	for (i = 0; i < phnum; i++) {
		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr < ph.p_vaddr || vaddr - ph.p_vaddr >= ph.p_filesz)
			continue;
		if (!have || (ph.p_flags & PF_X)) {
			*offset = vaddr - ph.p_vaddr + ph.p_offset;
			have = true;
		}
		if (ph.p_flags & PF_X)
			break;
	}
	return have ? 0 : -ENOENT;
}

/*
 * Drops [p, p + len) of the file's mapping from pipeprof's resident memory: pages of a
 * library's symbol and string tables that one pass has read (libtorch_cpu's are ~100 MB) would
 * otherwise count until the file is closed; they stay in the page cache, and a later read
 * faults them back. Only inside libelf's read-only image of the file, never a copy it made.
 */
static void release_pages(Elf *elf, const void *p, size_t len)
{
	size_t size, page = sysconf(_SC_PAGESIZE);
	const char *image = elf_rawfile(elf, &size);
	uintptr_t from = (uintptr_t)p, to = from + len;

	if (!image || !p || from < (uintptr_t)image || to > (uintptr_t)image + size)
		return;
	from &= ~(page - 1);
	to &= ~(page - 1);
	if (to > from)
		madvise((void *)from, to - from, MADV_DONTNEED);
}

/* The .gnu.version table that parallels a symbol table, if the object has one. */
static Elf_Data *versym_of(Elf *elf, size_t symtab_ndx)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_GNU_versym &&
		    sh.sh_link == symtab_ndx)
			return elf_getdata(scn, NULL);
	}
	return NULL;
}

/* "name" matches name exactly; "prefix*" any name that starts with prefix (a C++ function
 * whose mangled parameter list changes between releases). */
static bool name_matches(const char *want, const char *name, size_t blen)
{
	size_t wlen = strlen(want);

	if (wlen && want[wlen - 1] == '*')
		return blen >= wlen - 1 && !strncmp(want, name, wlen - 1);
	return wlen == blen && !strncmp(want, name, blen);
}

/* A defined symbol of a scanned type: where its name is, and its index in the table. */
struct sym_ref {
	uint32_t name, index;
};

static int by_name_offset(const void *a, const void *b)
{
	const struct sym_ref *x = a, *y = b;

	if (x->name != y->name)
		return x->name < y->name ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

#define RELEASE_EVERY (1 << 20)	/* bytes of a table read before they are released */

/*
 * Record in funcs[] the best candidate of this table for every name not already settled by
 * an earlier table. Names in .symtab may carry the version in the string itself
 * (memcpy@GLIBC_2.2.5, memcpy@@GLIBC_2.14); .dynsym keeps it in .gnu.version. Among equals
 * the first in the table wins.
 *
 * The names are read in the string table's order, not the symbols': .dynsym is laid out by
 * hash bucket, so reading its names in its own order touches the whole string table at once,
 * and libtorch's is tens of MB. In order, what was read is released as the pass goes on.
 */
static int scan_symtab(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, struct elf_func *funcs,
		       int n, enum sym_rank *rank, const bool *settled)
{
	Elf_Data *data, *versym, *names;
	size_t j, nr_syms, nr_refs = 0, released = 0, blen;
	uint32_t *best = NULL;
	struct sym_ref *refs = NULL;
	const char *name, *at;
	enum sym_rank r;
	GElf_Versym vs;
	GElf_Sym sym;
	int i, type, err = 0;

	data = elf_getdata(scn, NULL);
	names = elf_getdata(elf_getscn(elf, sh->sh_link), NULL);
	/* A string table with no bytes in the file (SHT_NOBITS) names nothing. */
	if (!data || !names || !names->d_buf || !sh->sh_entsize)
		return 0;
	versym = versym_of(elf, elf_ndxscn(scn));
	nr_syms = sh->sh_size / sh->sh_entsize;
	refs = malloc((nr_syms ? nr_syms : 1) * sizeof(*refs));
	best = calloc(n ? n : 1, sizeof(*best));
	if (!refs || !best) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (j = 0; j < nr_syms && j <= UINT32_MAX; j++) {
		if (!gelf_getsym(data, j, &sym))
			break;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_OBJECT) &&
		    sym.st_shndx != SHN_UNDEF && sym.st_name && sym.st_name < names->d_size)
			refs[nr_refs++] = (struct sym_ref){ sym.st_name, j };
		if ((j + 1) * sh->sh_entsize - released >= RELEASE_EVERY) {
			release_pages(elf, (char *)data->d_buf + released, (j + 1) * sh->sh_entsize -
				      released);
			released = (j + 1) * sh->sh_entsize;
		}
	}
	release_pages(elf, data->d_buf, data->d_size);
	qsort(refs, nr_refs, sizeof(*refs), by_name_offset);

	released = 0;
	for (size_t k = 0; k < nr_refs; k++) {
		if (refs[k].name - released >= RELEASE_EVERY) {
			release_pages(elf, (char *)names->d_buf + released, refs[k].name - released);
			released = refs[k].name;
		}
		name = (const char *)names->d_buf + refs[k].name;
		if (!memchr(name, 0, names->d_size - refs[k].name) || !*name)
			continue;
		at = strchr(name, '@');
		blen = at ? (size_t)(at - name) : strlen(name);
		for (i = 0; i < n; i++) {
			if (settled[i] || !name_matches(funcs[i].name, name, blen) ||
			    !gelf_getsym(data, refs[k].index, &sym) ||
			    funcs[i].object != (GELF_ST_TYPE(sym.st_info) == STT_OBJECT))
				continue;
			if (at)
				r = at[1] == '@' ? RANK_DEFAULT : RANK_HIDDEN;
			else if (versym && gelf_getversym(versym, refs[k].index, &vs))
				r = (vs & VERSYM_HIDDEN) ? RANK_HIDDEN : RANK_DEFAULT;
			else
				r = RANK_DEFAULT;	/* cannot tell: the first one wins */
			if (r < rank[i] || (r == rank[i] && refs[k].index > best[i]))
				continue;
			rank[i] = r;
			best[i] = refs[k].index;
			funcs[i].value = sym.st_value;
			funcs[i].size = sym.st_size;
		}
	}
	release_pages(elf, names->d_buf, names->d_size);
	release_pages(elf, data->d_buf, data->d_size);
	if (versym)
		release_pages(elf, versym->d_buf, versym->d_size);
cleanup:
	free(best);
	free(refs);
	return err;
}

static Elf_Scn *find_section(Elf *elf, Elf64_Word type, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, sh) && sh->sh_type == type)
			return scn;
	return NULL;
}

int elf_resolve_funcs(const char *path, struct elf_func *funcs, int n)
{
	static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
	static const Elf64_Word tables[] = { SHT_DYNSYM, SHT_SYMTAB };
	enum sym_rank *rank = NULL;
	bool *settled = NULL;
	Elf *elf = NULL;
	uint8_t insn[4];
	unsigned int t;
	int i, fd = -1, err, nr = 0;
	Elf_Scn *scn;
	GElf_Shdr sh;

	if (n < 0 || (n && !funcs))
		return -EINVAL;
	for (i = 0; i < n; i++) {
		funcs[i].found = false;
		funcs[i].value = funcs[i].size = funcs[i].offset = 0;
		funcs[i].starts_with_endbr64 = false;
	}

	err = elf_open(path, &fd, &elf);
	if (err)
		return err;
	rank = calloc(n ? n : 1, sizeof(*rank));
	settled = calloc(n ? n : 1, sizeof(*settled));
	if (!rank || !settled) {
		err = -ENOMEM;
		goto cleanup;
	}

	/* .dynsym is what the dynamic linker binds to; .symtab only fills in the gaps. */
	for (t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		scn = find_section(elf, tables[t], &sh);
		if (!scn)
			continue;
		err = scan_symtab(elf, scn, &sh, funcs, n, rank, settled);
		if (err)
			goto cleanup;
		for (i = 0; i < n; i++)
			settled[i] = rank[i] != RANK_NONE;
	}

	for (i = 0; i < n; i++) {
		if (rank[i] == RANK_NONE)
			continue;
		/* Outside every PT_LOAD there is nothing a uprobe could attach to. */
		if (load_offset(elf, funcs[i].value, &funcs[i].offset)) {
			funcs[i].value = funcs[i].size = funcs[i].offset = 0;
			continue;
		}
		funcs[i].found = true;
		funcs[i].starts_with_endbr64 =
			pread(fd, insn, sizeof(insn), funcs[i].offset) == sizeof(insn) &&
			!memcmp(insn, endbr64, sizeof(insn));
		nr++;
	}
	err = nr;

cleanup:
	free(settled);
	free(rank);
	elf_end(elf);
	close(fd);
	return err;
}

int elf_vaddr_to_offset(const char *path, uint64_t vaddr, uint64_t *offset)
{
	Elf *elf;
	int fd, err;

	if (!offset)
		return -EINVAL;
	err = elf_open(path, &fd, &elf);
	if (err)
		return err;
	err = load_offset(elf, vaddr, offset);
	elf_end(elf);
	close(fd);
	return err;
}

#define NT_STAPSDT 3

/* One stapsdt note's descriptor: three addresses (the site, the link-time address of
 * .stapsdt.base, the semaphore), then provider, name and argument strings. */
static void match_usdt_note(Elf *elf, const uint8_t *desc, size_t len, int addr_size,
			    bool have_base, uint64_t base_addr, struct elf_usdt *probes, int n,
			    int *nr)
{
	uint64_t addr[3] = {};
	const char *provider, *name, *end = (const char *)desc + len;

	if (len < (size_t)addr_size * 3)
		return;
	for (int i = 0; i < 3; i++) {
		if (addr_size == 8) {
			memcpy(&addr[i], desc + 8 * i, 8);
		} else {
			uint32_t a32;

			memcpy(&a32, desc + 4 * i, 4);
			addr[i] = a32;
		}
	}
	provider = (const char *)desc + addr_size * 3;
	name = memchr(provider, 0, end - provider);
	if (!name++ || name >= end || !memchr(name, 0, end - name))
		return;
	/* A prelinked object moved its sections: the note holds the base's address at link time. */
	if (have_base && addr[1]) {
		addr[0] += base_addr - addr[1];
		if (addr[2])
			addr[2] += base_addr - addr[1];
	}
	for (int i = 0; i < n; i++) {
		struct elf_usdt *p = &probes[i];

		if (p->found || !p->provider || !p->name || strcmp(p->provider, provider) ||
		    strcmp(p->name, name))
			continue;
		if (load_offset(elf, addr[0], &p->offset))
			continue;
		if (addr[2] && load_offset(elf, addr[2], &p->semaphore_offset))
			continue;
		p->found = true;
		(*nr)++;
	}
}

int elf_find_usdt(const char *path, struct elf_usdt *probes, int n)
{
	uint64_t base_addr = 0;
	bool have_base = false;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	int fd, err, nr = 0, addr_size;
	Elf *elf;
	GElf_Shdr sh;

	if (n < 0 || (n && !probes))
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		probes[i].found = false;
		probes[i].offset = probes[i].semaphore_offset = 0;
	}
	err = elf_open(path, &fd, &elf);
	if (err)
		return err;
	addr_size = gelf_getclass(elf) == ELFCLASS32 ? 4 : 8;
	if (elf_getshdrstrndx(elf, &shstrndx)) {
		err = -EINVAL;
		goto cleanup;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		const char *sname;

		if (!gelf_getshdr(scn, &sh))
			continue;
		sname = elf_strptr(elf, shstrndx, sh.sh_name);
		if (sname && !strcmp(sname, ".stapsdt.base")) {
			base_addr = sh.sh_addr;
			have_base = true;
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off, next;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf)
			continue;
		while (off < data->d_size &&
		       (next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > off) {
			off = next;
			if (nh.n_type != NT_STAPSDT || nh.n_namesz != sizeof("stapsdt") ||
			    memcmp((const char *)data->d_buf + name_off, "stapsdt", sizeof("stapsdt")))
				continue;
			match_usdt_note(elf, (const uint8_t *)data->d_buf + desc_off, nh.n_descsz,
					addr_size, have_base, base_addr, probes, n, &nr);
		}
	}
	err = nr;

cleanup:
	elf_end(elf);
	close(fd);
	return err;
}

int elf_offset_to_vaddr(const char *path, uint64_t offset, uint64_t *vaddr, bool *relocatable)
{
	size_t i, phnum;
	GElf_Ehdr eh;
	GElf_Phdr ph;
	Elf *elf;
	int fd, err;

	err = elf_open(path, &fd, &elf);
	if (err)
		return err;
	err = -ENOENT;
	if (!gelf_getehdr(elf, &eh) || elf_getphdrnum(elf, &phnum)) {
		err = -EINVAL;
		goto cleanup;
	}
	*relocatable = eh.e_type == ET_DYN;
	for (i = 0; i < phnum; i++) {
		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		/* A mapping starts at the page holding the segment's first byte. */
		if (offset >= (ph.p_offset & ~0xfffULL) && offset < ph.p_offset + ph.p_filesz) {
			*vaddr = offset + ph.p_vaddr - ph.p_offset;
			err = 0;
			break;
		}
	}
cleanup:
	elf_end(elf);
	close(fd);
	return err;
}

static int by_addr(const void *a, const void *b)
{
	const struct elf_sym_entry *x = a, *y = b;

	return x->addr_off < y->addr_off ? -1 : x->addr_off > y->addr_off;
}

static bool is_named_func(const Elf64_Sym *sym)
{
	int type = ELF64_ST_TYPE(sym->st_info);

	return (type == STT_FUNC || type == STT_GNU_IFUNC) && sym->st_shndx != SHN_UNDEF &&
	       sym->st_value && sym->st_name;
}

/*
 * Reads the table in chunks with pread rather than through a mapping of the file: a mapping's
 * pages, once touched, count in pipeprof's resident memory until it is unmapped, and
 * libtorch_cpu's table alone is tens of MB. Two passes: the lowest address and the count of
 * functions, then the entries, into an array allocated once at its size (grown by doubling,
 * a table of 400k functions peaked at three times that as realloc copied it).
 */
static int scan_table(int fd, struct elf_syms *out)
{
	enum { CHUNK = 2048 };
	Elf64_Sym *buf = malloc(CHUNK * sizeof(*buf));
	uint64_t lowest = UINT64_MAX;
	size_t funcs = 0;
	int err = 0;

	if (!buf)
		return -ENOMEM;
	for (int pass = 0; pass < 2 && !err; pass++) {
		for (uint64_t at = 0; at < out->table_entries && !err; at += CHUNK) {
			uint64_t want = out->table_entries - at < CHUNK ? out->table_entries - at : CHUNK;
			ssize_t got = pread(fd, buf, want * sizeof(*buf),
					    out->table_off + at * sizeof(*buf));

			if (got != (ssize_t)(want * sizeof(*buf))) {
				err = got < 0 ? -errno : -EINVAL;
				break;
			}
			for (uint64_t j = 0; j < want; j++) {
				const Elf64_Sym *sym = &buf[j];

				if (!is_named_func(sym))
					continue;
				if (!pass) {
					if (sym->st_value < lowest)
						lowest = sym->st_value;
					funcs++;
					continue;
				}
				/* Past 4 GB of the lowest, or past what the first pass counted (the
				 * file changed in between). */
				if (sym->st_value - out->base > UINT32_MAX || (size_t)out->nr == funcs)
					continue;
				out->e[out->nr].addr_off = sym->st_value - out->base;
				out->e[out->nr].index = at + j;
				out->nr++;
			}
		}
		out->base = lowest;
		if (!pass && funcs && !err) {
			out->e = malloc(funcs * sizeof(*out->e));
			if (!out->e)
				err = -ENOMEM;
		}
	}
	free(buf);
	if (!out->nr) {
		free(out->e);
		out->e = NULL;
	}
	return err;
}

int elf_syms_load(const char *path, struct elf_syms *out)
{
	GElf_Shdr sh, names;
	GElf_Ehdr eh;
	Elf_Scn *scn;
	Elf *elf;
	int fd, err;

	*out = (struct elf_syms){ .fd = -1 };
	err = elf_open(path, &fd, &elf);
	if (err)
		return err;
	/* The entries are read as the x86-64 ABI lays them out. */
	if (!gelf_getehdr(elf, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB) {
		err = -EINVAL;
		goto cleanup;
	}
	scn = find_section(elf, SHT_SYMTAB, &sh);
	if (!scn)
		scn = find_section(elf, SHT_DYNSYM, &sh);
	if (!scn || sh.sh_entsize != sizeof(Elf64_Sym) || sh.sh_type == SHT_NOBITS)
		goto cleanup;	/* no symbols: every address is named by its offset */
	if (!gelf_getshdr(elf_getscn(elf, sh.sh_link), &names) || names.sh_type != SHT_STRTAB) {
		err = -EINVAL;
		goto cleanup;
	}
	out->table_off = sh.sh_offset;
	out->table_entries = sh.sh_size / sizeof(Elf64_Sym);
	out->names_off = names.sh_offset;
	out->names_size = names.sh_size;
	err = scan_table(fd, out);
	if (err)
		goto cleanup;
	if (out->nr) {
		qsort(out->e, out->nr, sizeof(*out->e), by_addr);
		out->fd = fd;
		fd = -1;
	}
cleanup:
	if (err)
		elf_syms_free(out);
	elf_end(elf);
	if (fd >= 0)
		close(fd);
	return err;
}

const char *elf_syms_find(const struct elf_syms *s, uint64_t vaddr, char *buf, size_t size)
{
	int lo = 0, hi = s->nr - 1, best = -1;
	uint64_t off = vaddr - s->base;
	Elf64_Sym sym;
	ssize_t got;

	if (vaddr < s->base || !size)
		return NULL;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;

		if (s->e[mid].addr_off <= off) {
			best = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	if (best < 0 || pread(s->fd, &sym, sizeof(sym), s->table_off + (uint64_t)s->e[best].index *
			      sizeof(sym)) != sizeof(sym))
		return NULL;
	/* Aliases share an address: any of them names it. A sized symbol must hold vaddr. */
	if (sym.st_size && off - s->e[best].addr_off >= sym.st_size)
		return NULL;
	if (sym.st_name >= s->names_size)
		return NULL;
	if (size > s->names_size - sym.st_name + 1)
		size = s->names_size - sym.st_name + 1;
	got = pread(s->fd, buf, size - 1, s->names_off + sym.st_name);
	if (got <= 0)
		return NULL;
	buf[got] = 0;
	buf[strcspn(buf, "@")] = 0;
	return *buf ? buf : NULL;
}

void elf_syms_free(struct elf_syms *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->e);
	*s = (struct elf_syms){ .fd = -1 };
}

int elf_imports_threads(const char *path)
{
	Elf_Data *data;
	Elf_Scn *scn;
	GElf_Shdr sh;
	int fd, err, found = 0;
	Elf *elf;

	err = elf_open(path, &fd, &elf);
	if (err)
		return err;
	scn = find_section(elf, SHT_DYNSYM, &sh);
	data = scn ? elf_getdata(scn, NULL) : NULL;
	if (data && sh.sh_entsize) {
		for (size_t j = 0; j < sh.sh_size / sh.sh_entsize && !found; j++) {
			const char *name;
			GElf_Sym sym;

			if (!gelf_getsym(data, j, &sym))
				break;
			if (sym.st_shndx != SHN_UNDEF ||
			    !(name = elf_strptr(elf, sh.sh_link, sym.st_name)))
				continue;
			found = !strncmp(name, "pthread_create", 14) ||
				!strncmp(name, "GOMP_parallel", 13) ||
				!strncmp(name, "__kmpc_fork_call", 16);
		}
	}
	elf_end(elf);
	close(fd);
	return found;
}

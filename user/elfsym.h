/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Resolve function symbols of an ELF shared object to uprobe file offsets (libelf). */
#ifndef PIPEPROF_ELFSYM_H
#define PIPEPROF_ELFSYM_H

#include <stdbool.h>
#include <stdint.h>

struct elf_func {
	const char *name;	/* in: symbol name without version ("cudaStreamSynchronize"), or a
				 * prefix ending in '*' (the first match wins) */
	bool found;		/* out */
	uint64_t value;		/* out: st_value, what `nm -D` prints */
	uint64_t size;		/* out: st_size */
	uint64_t offset;	/* out: file offset of the first instruction (via PT_LOAD) */
	bool starts_with_endbr64; /* out: first 4 bytes are f3 0f 1e fa */
	bool object;		/* in: a data object (STT_OBJECT), not a function */
};

/* Look every name up in .dynsym (then .symtab), STT_FUNC/STT_GNU_IFUNC defined symbols only;
 * a versioned name (cudaMemcpy@@libcudart.so.13) matches the plain name; the default
 * version wins over hidden ones. Returns how many were found, or -errno when the file cannot be
 * read or is not ELF. */
int elf_resolve_funcs(const char *path, struct elf_func *funcs, int n);

/* A USDT probe (a SystemTap "stapsdt" note, as sys/sdt.h and CPython's --with-dtrace make). */
struct elf_usdt {
	const char *provider, *name;	/* in: "python", "gc__start" */
	bool found;			/* out */
	uint64_t offset;		/* out: file offset of the probe site */
	uint64_t semaphore_offset;	/* out: file offset of its is-enabled counter, 0 for none
					 * (the kernel's uprobe ref_ctr_offset) */
};

/* Find the probes in the .note.stapsdt notes of path: addresses adjusted for prelinking (the
 * .stapsdt.base section) and turned into file offsets. A probe site listed several times
 * (inlined) gives its first. Returns how many were found, or -errno when the file cannot be
 * read or is not ELF. */
int elf_find_usdt(const char *path, struct elf_usdt *probes, int n);

/* File offset for a virtual address using the PT_LOAD program headers; -ENOENT if none covers it. */
int elf_vaddr_to_offset(const char *path, uint64_t vaddr, uint64_t *offset);

/* Virtual address (as the symbols use them) of a file offset, through the PT_LOAD headers;
 * -ENOENT if no segment holds it. relocatable: the object is position-independent (ET_DYN),
 * so its symbols move with where it is mapped. */
int elf_offset_to_vaddr(const char *path, uint64_t offset, uint64_t *vaddr, bool *relocatable);

/* The function symbols of a file, to name addresses: .symtab where the file has one, else
 * .dynsym. Kept small, since a library such as libtorch_cpu exports hundreds of thousands of
 * functions with long C++ names and a report names a few dozen: 8 bytes a function (its
 * address from the lowest one, and its index in the table), sorted by address, and the file
 * kept open to read a name when one is asked for. A file whose functions span over 4 GiB keeps
 * those within 4 GiB of its lowest. */
struct elf_syms {
	int nr;
	int fd;			/* -1 when nothing was loaded */
	uint64_t base;		/* the lowest function address */
	uint64_t table_off, table_entries;	/* the symbol table's file offset and length */
	uint64_t names_off, names_size;		/* its string table's */
	struct elf_sym_entry {
		uint32_t addr_off;	/* address - base */
		uint32_t index;		/* in the symbol table */
	} *e;
};
int elf_syms_load(const char *path, struct elf_syms *out);
/* The name (without its version) of the symbol whose [addr, addr + size) holds vaddr, or of
 * the nearest one below it when that has no size, into buf; NULL when none holds it or its
 * name cannot be read. A name longer than the buffer is cut. */
const char *elf_syms_find(const struct elf_syms *s, uint64_t vaddr, char *buf, size_t size);
void elf_syms_free(struct elf_syms *s);

/* 1 when the file imports a way to start threads (pthread_create, OpenMP's GOMP_parallel* or
 * __kmpc_fork_call), 0 when it imports none, -errno when it cannot be read. */
int elf_imports_threads(const char *path);

#endif

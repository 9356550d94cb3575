// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ELF shared objects as the tracer reads them before attaching uprobes: symbol tables, symbol
 * versions, program headers and USDT notes, of any file a process maps, truncated or hostile. elfsym takes
 * paths, so the input is written to a memfd and opened as /proc/self/fd/N.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "elfsym.h"
#include "fuzz.h"
#include "gpu_apis.h"

/* Every API the tracer probes, and the prefix forms (C++ names) a caller may ask for. */
#define NR_EXTRA 5
static const char *const extra[NR_EXTRA] = { "cuda*", "_Z*", "*", "main", "" };

static struct elf_func *funcs;
static int nr_funcs;
static char path[64];
static int fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nr_funcs = gpu_api_count + NR_EXTRA;
	funcs = calloc(nr_funcs, sizeof(*funcs));
	if (!funcs)
		abort();
	for (int i = 0; i < gpu_api_count; i++)
		funcs[i].name = gpu_apis[i].name;
	for (int i = 0; i < NR_EXTRA; i++)
		funcs[gpu_api_count + i].name = extra[i];
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t vaddr = 0, offset;
	int n, found = 0;

	if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();

	n = elf_resolve_funcs(path, funcs, nr_funcs);
	FUZZ_CHECK(n <= nr_funcs);
	for (int i = 0; i < nr_funcs; i++) {
		if (!funcs[i].found) {
			FUZZ_CHECK(!funcs[i].value && !funcs[i].offset);
			continue;
		}
		found++;
		/* Both entry points map addresses through the same program headers. */
		FUZZ_CHECK(!elf_vaddr_to_offset(path, funcs[i].value, &offset));
		FUZZ_CHECK(offset == funcs[i].offset);
	}
	FUZZ_CHECK(n < 0 || n == found);

	/* USDT notes, as the Python GC probes are found: the ones asked for, and names that
	 * could run past a note's end. */
	{
		struct elf_usdt usdt[3] = {
			{ .provider = "python", .name = "gc__start" },
			{ .provider = "python", .name = "gc__done" },
			{ .provider = "", .name = "" },
		};

		n = elf_find_usdt(path, usdt, 3);
		found = 0;
		for (int i = 0; i < 3; i++)
			found += usdt[i].found;
		FUZZ_CHECK(n < 0 || n == found);
	}

	/* An address out of the input itself, as a uprobe's offset lookup would get it. */
	if (size >= sizeof(vaddr))
		memcpy(&vaddr, data + size - sizeof(vaddr), sizeof(vaddr));
	elf_vaddr_to_offset(path, vaddr, &offset);

	/* The CPU sampler's lookups: a file offset back to an address, and that address (or
	 * the input's own) to the symbol holding it. */
	{
		struct elf_syms syms;
		bool relocatable;
		uint64_t back;

		if (!elf_offset_to_vaddr(path, vaddr, &back, &relocatable))
			vaddr = back;
		if (!elf_syms_load(path, &syms)) {
			char buf[64];
			const char *name = elf_syms_find(&syms, vaddr, buf, sizeof(buf));

			for (int i = 1; i < syms.nr; i++)
				FUZZ_CHECK(syms.e[i - 1].addr_off <= syms.e[i].addr_off);
			/* Names come back cut to the buffer, whatever the file's string table says. */
			FUZZ_CHECK(!name || (name == buf && strlen(name) < sizeof(buf)));
			elf_syms_free(&syms);
			FUZZ_CHECK(syms.fd == -1);
		}
		{
			int threads = elf_imports_threads(path);

			FUZZ_CHECK(threads == 0 || threads == 1 || threads < 0);
		}
	}
	return 0;
}

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * elfsym is checked against binutils rather than against constants, so the expectations
 * hold for whatever CUDA or libc build the machine has: values against `nm`, file offsets
 * against `readelf -lW` program headers, endbr64 against the bytes read back from the file.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "elfsym.h"
#include "unit.h"

#define REAL_CUDART "/usr/local/cuda/lib64/libcudart.so.13"
#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define MAX_LOADS 16

struct nm_sym {
	bool found;
	uint64_t value;		/* default version (name@@VER or unversioned), else the first */
	bool has_hidden;
	uint64_t hidden;	/* first name@VER: what a version-blind lookup might pick */
};

struct load_seg {
	uint64_t offset, vaddr, filesz, memsz;
	bool exec;
};

#if defined(__x86_64__)
/* One function that starts with endbr64 and one that does not, whatever -fcf-protection is. */
__asm__(".text\n"
	".globl unit_endbr_probe\n"
	".type unit_endbr_probe, @function\n"
	"unit_endbr_probe:\n"
	".byte 0xf3, 0x0f, 0x1e, 0xfa\n"
	"ret\n"
	".size unit_endbr_probe, .-unit_endbr_probe\n"
	".globl unit_plain_probe\n"
	".type unit_plain_probe, @function\n"
	"unit_plain_probe:\n"
	"nop\n"
	"nop\n"
	"nop\n"
	"nop\n"
	"ret\n"
	".size unit_plain_probe, .-unit_plain_probe\n");
#endif

static bool exists(const char *path)
{
	return access(path, R_OK) == 0;
}

/*
 * What `nm [-D] --defined-only` says about a function: "VALUE TYPE NAME[@[@]VERSION]".
 * Returns false when nm itself could not be run.
 */
static bool nm_lookup(const char *path, bool dynamic, const char *name, struct nm_sym *out)
{
	char cmd[PATH_MAX + 64], line[1024], sym[512], type;
	bool have_default = false;
	unsigned long long value;
	size_t len = strlen(name);
	FILE *p;

	memset(out, 0, sizeof(*out));
	snprintf(cmd, sizeof(cmd), "nm %s --defined-only '%s' 2>/dev/null",
		 dynamic ? "-D" : "", path);
	p = popen(cmd, "r");
	if (!p)
		return false;
	while (fgets(line, sizeof(line), p)) {
		if (sscanf(line, "%llx %c %511s", &value, &type, sym) != 3)
			continue;
		if (!strchr("TtWwi", type) || strncmp(sym, name, len) ||
		    (sym[len] != '\0' && sym[len] != '@'))
			continue;
		if (!out->found) {
			out->found = true;
			out->value = value;
		}
		if (!have_default && (sym[len] == '\0' || !strncmp(sym + len, "@@", 2))) {
			have_default = true;
			out->value = value;
		} else if (!out->has_hidden && sym[len] == '@' && sym[len + 1] != '@') {
			out->has_hidden = true;
			out->hidden = value;
		}
	}
	return pclose(p) == 0;
}

static int readelf_loads(const char *path, struct load_seg *segs, int max)
{
	char cmd[PATH_MAX + 64], line[512], flags[16];
	unsigned long long off, va, pa, fsz, msz;
	int nr = 0, n;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -lW '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	if (!p)
		return -errno;
	while (fgets(line, sizeof(line), p) && nr < max) {
		if (sscanf(line, " LOAD %llx %llx %llx %llx %llx %n", &off, &va, &pa, &fsz, &msz,
			   &n) != 5)
			continue;
		/* Flags are "R E", "RW ", ...: up to the alignment column. */
		snprintf(flags, sizeof(flags), "%.*s", (int)strcspn(line + n, "0"), line + n);
		segs[nr].offset = off;
		segs[nr].vaddr = va;
		segs[nr].filesz = fsz;
		segs[nr].memsz = msz;
		segs[nr].exec = strchr(flags, 'E') != NULL;
		nr++;
	}
	if (pclose(p) != 0)
		return -EIO;
	return nr;
}

/* The PT_LOAD arithmetic done the long way, from readelf's table. */
static bool readelf_offset(const struct load_seg *segs, int nr, uint64_t vaddr, uint64_t *offset)
{
	bool have = false;
	int i;

	for (i = 0; i < nr; i++) {
		if (vaddr < segs[i].vaddr || vaddr >= segs[i].vaddr + segs[i].filesz)
			continue;
		if (!have || segs[i].exec)
			*offset = vaddr - segs[i].vaddr + segs[i].offset;
		have = true;
		if (segs[i].exec)
			break;
	}
	return have;
}

static bool file_has_endbr64(const char *path, uint64_t offset)
{
	unsigned char b[4];
	bool ret = false;
	FILE *f = fopen(path, "rb");

	if (!f)
		return false;
	if (!fseeko(f, (off_t)offset, SEEK_SET) && fread(b, 1, 4, f) == 4)
		ret = b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa;
	fclose(f);
	return ret;
}

/*
 * Every name nm knows must resolve to nm's value (default version), and to the file offset
 * that readelf's PT_LOADs give; every name nm does not know must come back not found.
 * Returns how many nm knew.
 */
static int check_against_binutils(const char *path, bool dynamic, struct elf_func *funcs, int n)
{
	struct load_seg segs[MAX_LOADS];
	struct nm_sym nm;
	uint64_t off, want_off;
	int i, ret, nr_segs, nr_known = 0;

	nr_segs = readelf_loads(path, segs, MAX_LOADS);
	if (!CHECK_MSG(nr_segs > 0, "readelf -lW %s: %d", path, nr_segs))
		return -1;
	ret = elf_resolve_funcs(path, funcs, n);
	for (i = 0; i < n; i++) {
		if (!CHECK_MSG(nm_lookup(path, dynamic, funcs[i].name, &nm), "nm failed on %s",
			       path))
			return -1;
		if (!nm.found) {
			CHECK_MSG(!funcs[i].found, "%s: found %s, nm does not list it", path,
				  funcs[i].name);
			continue;
		}
		nr_known++;
		if (!CHECK_MSG(funcs[i].found, "%s: %s not found", path, funcs[i].name))
			continue;
		CHECK_MSG(funcs[i].value == nm.value, "%s: %s value 0x%" PRIx64 ", nm 0x%" PRIx64,
			  path, funcs[i].name, funcs[i].value, nm.value);
		CHECK_MSG(funcs[i].size > 0, "%s: %s has size 0", path, funcs[i].name);
		off = ~0ULL;
		CHECK_EQ_INT(elf_vaddr_to_offset(path, funcs[i].value, &off), 0);
		CHECK_EQ_U64(funcs[i].offset, off);
		if (CHECK_MSG(readelf_offset(segs, nr_segs, nm.value, &want_off),
			      "%s: 0x%" PRIx64 " in no PT_LOAD per readelf", path, nm.value))
			CHECK_EQ_U64(funcs[i].offset, want_off);
		CHECK_MSG(funcs[i].starts_with_endbr64 == file_has_endbr64(path, funcs[i].offset),
			  "%s: %s endbr64 %d", path, funcs[i].name, funcs[i].starts_with_endbr64);
	}
	CHECK_EQ_INT(ret, nr_known);
	return nr_known;
}

/* Program-header lookups on their own, including where offset and vaddr differ. */
static void check_vaddr_lookups(const char *path)
{
	struct load_seg segs[MAX_LOADS];
	uint64_t off, want;
	int i, nr;

	nr = readelf_loads(path, segs, MAX_LOADS);
	if (!CHECK_MSG(nr > 0, "readelf -lW %s: %d", path, nr))
		return;
	for (i = 0; i < nr; i++) {
		uint64_t va = segs[i].vaddr + (segs[i].filesz > 0x10 ? 0x10 : 0);

		if (!segs[i].filesz)
			continue;
		off = ~0ULL;
		CHECK_EQ_INT(elf_vaddr_to_offset(path, va, &off), 0);
		if (readelf_offset(segs, nr, va, &want))
			CHECK_EQ_U64(off, want);
		/* The last byte backed by the file, and the first of .bss beyond it. */
		va = segs[i].vaddr + segs[i].filesz - 1;
		CHECK_EQ_INT(elf_vaddr_to_offset(path, va, &off), 0);
		if (readelf_offset(segs, nr, va, &want))
			CHECK_EQ_U64(off, want);
		va = segs[i].vaddr + segs[i].filesz;
		if (segs[i].memsz > segs[i].filesz && !readelf_offset(segs, nr, va, &want))
			CHECK_EQ_INT(elf_vaddr_to_offset(path, va, &off), -ENOENT);
	}
	CHECK_EQ_INT(elf_vaddr_to_offset(path, 0x7ffffffff000ULL, &off), -ENOENT);
	CHECK_EQ_INT(elf_vaddr_to_offset(path, 0, NULL), -EINVAL);
}

TEST(real_libcudart)
{
	struct elf_func funcs[] = {
		{ .name = "cudaStreamSynchronize" },
		{ .name = "cudaDeviceSynchronize" },
		{ .name = "cudaEventSynchronize" },
		{ .name = "cudaMemcpy" },
		{ .name = "cudaStreamSynchronize_ptsz" },
		{ .name = "cudaLaunchKernel" },
		{ .name = "cudaNoSuchFunction" },
		{ .name = "cudaStreamSync" },		/* a prefix of a real name */
		{ .name = "libcudart.so.13" },		/* the version definition (absolute) */
	};
	int i, n = sizeof(funcs) / sizeof(funcs[0]);

	if (!exists(REAL_CUDART)) {
		SKIP("%s not installed", REAL_CUDART);
		return;
	}
	CHECK_EQ_INT(check_against_binutils(REAL_CUDART, true, funcs, n), 6);
	for (i = 0; i < 6; i++)
		CHECK_MSG(funcs[i].found, "%s missing from %s", funcs[i].name, REAL_CUDART);
	for (; i < n; i++)
		CHECK_MSG(!funcs[i].found && !funcs[i].value && !funcs[i].offset,
			  "%s resolved", funcs[i].name);
	check_vaddr_lookups(REAL_CUDART);
}

TEST(fake_libcudart)
{
	struct elf_func funcs[] = {
		{ .name = "cudaStreamSynchronize" },
		{ .name = "cudaDeviceSynchronize" },
		{ .name = "cudaEventSynchronize" },
		{ .name = "cudaMemcpy" },
		{ .name = "cudaStreamSynchronize_ptsz" },
		{ .name = "cudaLaunchKernel" },
		{ .name = "cudaNoSuchFunction" },
	};
	char path[PATH_MAX];
	int ret;

	UNIT_SRC_PATH(path, ".output/fakecuda/libcudart.so.13");
	if (!exists(path)) {
		SKIP("%s not built (make fixtures)", path);
		return;
	}
	ret = check_against_binutils(path, true, funcs, sizeof(funcs) / sizeof(funcs[0]));
	CHECK_MSG(ret > 0, "the fake libcudart exports none of the synchronizing calls");
	check_vaddr_lookups(path);
}

TEST(libc)
{
	struct elf_func funcs[] = {
		{ .name = "malloc" },
		{ .name = "write" },		/* weak */
		{ .name = "memcpy" },		/* ifunc @@GLIBC_2.14 over plain @GLIBC_2.2.5 */
		{ .name = "realpath" },		/* @@GLIBC_2.3 over @GLIBC_2.2.5 */
		{ .name = "stdout" },		/* data, not a function */
	};
	struct nm_sym nm;
	int n = sizeof(funcs) / sizeof(funcs[0]);

	if (!exists(LIBC)) {
		SKIP("%s not present", LIBC);
		return;
	}
	CHECK_EQ_INT(check_against_binutils(LIBC, true, funcs, n), 4);
	CHECK(funcs[0].found && funcs[1].found && funcs[2].found && funcs[3].found);
	CHECK(!funcs[4].found);

	/* The value checks above would pass by luck if both versions shared an address. */
	if (CHECK(nm_lookup(LIBC, true, "memcpy", &nm)) && nm.has_hidden)
		CHECK_MSG(nm.hidden != nm.value && funcs[2].value != nm.hidden,
			  "memcpy: default 0x%" PRIx64 ", hidden 0x%" PRIx64 ", got 0x%" PRIx64,
			  nm.value, nm.hidden, funcs[2].value);
	if (CHECK(nm_lookup(LIBC, true, "realpath", &nm)) && nm.has_hidden)
		CHECK_MSG(nm.hidden != nm.value && funcs[3].value != nm.hidden,
			  "realpath: default 0x%" PRIx64 ", hidden 0x%" PRIx64 ", got 0x%" PRIx64,
			  nm.value, nm.hidden, funcs[3].value);
	check_vaddr_lookups(LIBC);
}

TEST(symtab_fallback)
{
	/* This test's own functions are in .symtab only: PIE without -rdynamic. */
	struct elf_func funcs[] = {
		{ .name = "main" },
#if defined(__x86_64__)
		{ .name = "unit_endbr_probe" },
		{ .name = "unit_plain_probe" },
#endif
		{ .name = "unit_summary_does_not_exist" },
	};
	int n = sizeof(funcs) / sizeof(funcs[0]);
	char path[64];
	struct nm_sym nm;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)getpid());
	if (nm_lookup(path, true, "main", &nm) && nm.found)
		SKIP("main is exported in .dynsym: .symtab fallback not exercised");
	CHECK_EQ_INT(check_against_binutils(path, false, funcs, n), n - 1);
	CHECK(funcs[0].found);
#if defined(__x86_64__)
	CHECK(funcs[1].found && funcs[1].starts_with_endbr64);
	CHECK(funcs[2].found && !funcs[2].starts_with_endbr64);
	CHECK_EQ_U64(funcs[1].size, 5);
#endif
	CHECK(!funcs[n - 1].found);
}

TEST(relocatable_object)
{
	/* No .dynsym and no program headers: symbols exist but have nowhere to attach. */
	static const char *const crt1 = "/usr/lib/x86_64-linux-gnu/crt1.o";
	struct elf_func funcs[] = { { .name = "_start" } };
	uint64_t off;

	if (!exists(crt1)) {
		SKIP("%s not present", crt1);
		return;
	}
	CHECK_EQ_INT(elf_resolve_funcs(crt1, funcs, 1), 0);
	CHECK(!funcs[0].found);
	CHECK_EQ_INT(elf_vaddr_to_offset(crt1, 0, &off), -ENOENT);
}

TEST(errors)
{
	struct elf_func funcs[] = { { .name = "malloc", .found = true, .value = 1 } };
	char tmp[] = "/tmp/pipeprof-elfsym-XXXXXX";
	uint64_t off;
	int fd;

	CHECK_EQ_INT(elf_resolve_funcs("/nonexistent/libcudart.so.13", funcs, 1), -ENOENT);
	CHECK(!funcs[0].found && !funcs[0].value);
	CHECK_EQ_INT(elf_vaddr_to_offset("/nonexistent/libcudart.so.13", 0, &off), -ENOENT);
	if (exists("/etc/hostname")) {
		CHECK_EQ_INT(elf_resolve_funcs("/etc/hostname", funcs, 1), -EINVAL);
		CHECK_EQ_INT(elf_vaddr_to_offset("/etc/hostname", 0, &off), -EINVAL);
	}
	if (exists("/usr/local/cuda/lib64/libcudart_static.a"))
		CHECK_EQ_INT(elf_resolve_funcs("/usr/local/cuda/lib64/libcudart_static.a",
					       funcs, 1), -EINVAL);

	/* Not ELF, and empty: both within our control whatever the machine has in /etc. */
	fd = mkstemp(tmp);
	if (!CHECK_MSG(fd >= 0, "mkstemp: %s", strerror(errno)))
		return;
	CHECK_EQ_INT(elf_resolve_funcs(tmp, funcs, 1), -EINVAL);
	CHECK(pwrite(fd, "#!/bin/sh\necho not an ELF file\n", 31, 0) == 31);
	CHECK_EQ_INT(elf_resolve_funcs(tmp, funcs, 1), -EINVAL);
	CHECK_EQ_INT(elf_vaddr_to_offset(tmp, 0, &off), -EINVAL);
	/* The magic alone, cut short before the rest of the identification. */
	CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, "\x7f" "ELF\x02\x01\x01", 7, 0) == 7);
	CHECK_EQ_INT(elf_resolve_funcs(tmp, funcs, 1), -EINVAL);
	close(fd);
	unlink(tmp);

	CHECK(elf_resolve_funcs("/", funcs, 1) < 0);
	if (exists(LIBC)) {
		CHECK_EQ_INT(elf_resolve_funcs(LIBC, funcs, 0), 0);
		CHECK_EQ_INT(elf_resolve_funcs(LIBC, NULL, 1), -EINVAL);
		CHECK_EQ_INT(elf_resolve_funcs(LIBC, funcs, -1), -EINVAL);
	}
}

/* "prefix*" finds a C++ function whose mangled parameter list changes between releases. */
TEST(prefix_names)
{
	struct elf_func funcs[] = {
		{ .name = "realpath" },
		{ .name = "realpat*" },
		{ .name = "realpat" },			/* no '*': exact only */
		{ .name = "pipeprof_no_such_prefix*" },
	};
	struct elf_func engine = { .name = "_ZN5torch8autograd6Engine7executeE*" };
	const char *torch = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so";

	if (!exists(LIBC)) {
		SKIP("%s not present", LIBC);
		return;
	}
	CHECK_EQ_INT(elf_resolve_funcs(LIBC, funcs, 4), 2);
	CHECK(funcs[0].found && funcs[1].found && !funcs[2].found && !funcs[3].found);
	CHECK_EQ_U64(funcs[1].value, funcs[0].value);
	CHECK_EQ_U64(funcs[1].offset, funcs[0].offset);
	/* The step probe's symbol, in Debian's libtorch (a test dependency). */
	if (!exists(torch)) {
		SKIP("%s not present", torch);
		return;
	}
	CHECK_EQ_INT(elf_resolve_funcs(torch, &engine, 1), 1);
	CHECK(engine.value && engine.offset);
}

/*
 * A USDT probe as sys/sdt.h lays it out (the header is not installed here): a nop at the probe
 * site, a "stapsdt" note holding its address, the .stapsdt.base anchor and a semaphore in
 * .probes. The test finds it in its own executable and checks the offsets against where the
 * kernel mapped the site and the semaphore.
 */
unsigned short pp_test_semaphore __attribute__((section(".probes"), used));

__attribute__((noinline)) static void usdt_site(void)
{
	__asm__ __volatile__(
		".globl pp_test_site\n"
		"pp_test_site: nop\n"
		".pushsection .note.stapsdt,\"?\",\"note\"\n"
		".balign 4\n"
		".4byte 992f-991f, 994f-993f, 3\n"
		"991: .asciz \"stapsdt\"\n"
		"992: .balign 4\n"
		"993: .8byte pp_test_site\n"
		".8byte _.stapsdt.base\n"
		".8byte pp_test_semaphore\n"
		".asciz \"pptest\"\n"
		".asciz \"probe__one\"\n"
		".asciz \"-4@%%eax\"\n"
		"994: .balign 4\n"
		".popsection\n"
		".ifndef _.stapsdt.base\n"
		".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n"
		".weak _.stapsdt.base\n"
		".hidden _.stapsdt.base\n"
		"_.stapsdt.base: .space 1\n"
		".size _.stapsdt.base, 1\n"
		".popsection\n"
		".endif\n");
}

/* The file offset at which /proc/self/maps says addr is mapped from the executable. */
static uint64_t self_file_offset(const void *addr)
{
	uint64_t start, end, off, a = (uintptr_t)addr, found = UINT64_MAX;
	char line[512], self[PATH_MAX], path[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	FILE *f = fopen("/proc/self/maps", "r");

	if (len <= 0 || !f)
		return UINT64_MAX;
	self[len] = 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %*s %*u %4095s", &start, &end,
			   &off, path) == 4 && !strcmp(path, self) && a >= start && a < end)
			found = a - start + off;
	}
	fclose(f);
	return found;
}

TEST(usdt_notes)
{
	extern char pp_test_site[];
	struct elf_usdt p[3] = {
		{ .provider = "pptest", .name = "probe__one" },
		{ .provider = "pptest", .name = "probe__two" },
		{ .provider = "other", .name = "probe__one" },
	};

	usdt_site();
	CHECK_EQ_INT(elf_find_usdt("/proc/self/exe", p, 3), 1);
	CHECK(p[0].found && !p[1].found && !p[2].found);
	CHECK_EQ_U64(p[0].offset, self_file_offset(pp_test_site));
	CHECK_EQ_U64(p[0].semaphore_offset, self_file_offset(&pp_test_semaphore));
	CHECK(p[0].semaphore_offset != 0);

	/* No notes at all, a missing file, a file that is not ELF. */
	CHECK_EQ_INT(elf_find_usdt("/proc/self/exe", p + 1, 2), 0);
	CHECK_EQ_INT(elf_find_usdt("/nonexistent/x", p, 1), -ENOENT);
	CHECK_EQ_INT(elf_find_usdt("/proc/self/cmdline", p, 1), -EINVAL);
	CHECK(!p[0].found);
	CHECK_EQ_INT(elf_find_usdt("/proc/self/exe", NULL, 1), -EINVAL);
}

/* Whether binutils sees the file import a way to start threads. */
static int nm_imports_threads(const char *path)
{
	char cmd[PATH_MAX + 160];
	int found;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm -D --undefined-only '%s' 2>/dev/null | grep -cE "
		 "' (pthread_create|GOMP_parallel[A-Za-z_]*|__kmpc_fork_call)(@|$)'", path);
	p = popen(cmd, "r");
	if (!p || fscanf(p, "%d", &found) != 1)
		found = -1;
	if (p)
		pclose(p);
	return found > 0 ? 1 : found;
}

TEST(thread_imports)
{
	static const char *const files[] = {
		LIBC, REAL_CUDART, "/lib/x86_64-linux-gnu/libgomp.so.1",
		"/usr/lib/x86_64-linux-gnu/blas/libblas.so.3", "/lib/x86_64-linux-gnu/libdnnl.so.2",
		".output/fakecuda/libcudart.so.13", ".output/workloads/libfpchain.so",
	};
	int checked = 0, yes = 0, no = 0;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		int want, got;

		if (access(files[i], R_OK))
			continue;
		want = nm_imports_threads(files[i]);
		got = elf_imports_threads(files[i]);
		CHECK_MSG(want >= 0 && got == want, "%s: %d, nm says %d", files[i], got, want);
		checked++;
		yes += got == 1;
		no += got == 0;
	}
	/* libc imports none (pthread_create is its own); CUDA's runtime and torch's oneDNN,
	 * installed on every machine of this project, import one. */
	CHECK_MSG(checked >= 2 && yes >= 1 && no >= 1, "%d files checked: %d yes, %d no", checked,
		  yes, no);
	CHECK_EQ_INT(elf_imports_threads("/nonexistent"), -ENOENT);
}


/* Every sized function in the table elf_syms_load reads (.symtab, else .dynsym) is
 * named at its first and last byte by one of the names at its address; past its end, by no
 * name or another symbol's. */
struct nm_func {
	uint64_t value, size;
	char name[256];
};

/* The defined functions (FUNC, IFUNC) readelf lists in .symtab, else .dynsym. nm cannot say: its
 * letter is the section's, and a NOTYPE label in .text reads 't' like a function. */
static int nm_funcs(const char *path, struct nm_func **out)
{
	char cmd[PATH_MAX + 96], line[4096], type[32], ndx[32], sym[4096];
	unsigned long long value;
	char size[64];
	int n[2] = { 0, 0 }, cap[2] = { 0, 0 }, table = -1;
	struct nm_func *lists[2] = { NULL, NULL };
	FILE *p;

	*out = NULL;
	snprintf(cmd, sizeof(cmd), "readelf -sW '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		if (strstr(line, "Symbol table '.dynsym'"))
			table = 0;
		else if (strstr(line, "Symbol table '.symtab'"))
			table = 1;
		if (table < 0 || sscanf(line, " %*u: %llx %63s %31s %*s %*s %31s %4095s", &value, size,
					type, ndx, sym) != 5 ||
		    (strcmp(type, "FUNC") && strcmp(type, "IFUNC")) || !strcmp(ndx, "UND") || !value)
			continue;
		if (n[table] == cap[table]) {
			void *grown = realloc(lists[table], (cap[table] = cap[table] ? 2 * cap[table] :
							     1024) * sizeof(**out));

			if (!grown)
				break;
			lists[table] = grown;
		}
		lists[table][n[table]].value = value;
		lists[table][n[table]].size = strtoull(size, NULL, 0);
		snprintf(lists[table][n[table]].name, sizeof(lists[table][0].name), "%.*s",
			 (int)strcspn(sym, "@"), sym);
		n[table]++;
	}
	pclose(p);
	table = n[1] ? 1 : 0;
	free(lists[!table]);
	*out = lists[table];
	return n[table];
}

static bool named_at(const struct nm_func *f, int n, uint64_t value, const char *name)
{
	for (int i = 0; i < n; i++)
		if (f[i].value == value && !strncmp(f[i].name, name, sizeof(f[i].name) - 1))
			return true;
	return false;
}

static void check_names(const char *path, int max_checked)
{
	struct nm_func *f;
	struct elf_syms s;
	char buf[4096];
	int n = nm_funcs(path, &f), checked = 0, step;

	CHECK_MSG(n > 0, "%s: readelf listed no function", path);
	CHECK_EQ_INT(elf_syms_load(path, &s), 0);
	step = n / max_checked > 1 ? n / max_checked : 1;
	for (int i = 0; i < n; i += step) {
		const char *first, *last;

		if (!f[i].size)
			continue;
		first = elf_syms_find(&s, f[i].value, buf, sizeof(buf));
		CHECK_MSG(first && named_at(f, n, f[i].value, first), "%s: 0x%" PRIx64
			  " (%s) named %s", path, f[i].value, f[i].name, first ? first : "nothing");
		last = elf_syms_find(&s, f[i].value + f[i].size - 1, buf, sizeof(buf));
		CHECK_MSG(last && named_at(f, n, f[i].value, last), "%s: 0x%" PRIx64
			  " (%s), its last byte, named %s", path, f[i].value + f[i].size - 1,
			  f[i].name, last ? last : "nothing");
		checked++;
	}
	CHECK_MSG(checked >= (n < max_checked ? 1 : max_checked / 2), "%s: %d of %d checked", path,
		  checked, n);
	/* A short buffer cuts the name rather than overrunning. */
	for (int i = 0; i < n; i++) {
		if (f[i].size && strlen(f[i].name) > 4) {
			const char *cut = elf_syms_find(&s, f[i].value, buf, 4);

			CHECK_MSG(cut && strlen(cut) == 3, "%s: a 4-byte buffer gave %s", path,
				  cut ? cut : "nothing");
			break;
		}
	}
	CHECK(!elf_syms_find(&s, 0, buf, sizeof(buf)));
	elf_syms_free(&s);
	CHECK_EQ_INT(s.fd, -1);
	free(f);
}

TEST(symbol_names)
{
	char self[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

	/* By its path: nm, run through popen, has a /proc/self of its own. */
	if (CHECK(len > 0)) {
		self[len] = 0;
		check_names(self, 1000);
	}
	check_names(LIBC, 400);
	if (exists(REAL_CUDART))
		check_names(REAL_CUDART, 200);
	if (exists("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0"))
		check_names("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0", 400);
}

/* No file, a file that is not ELF, a library cut short: an error, no crash. */
TEST(symbol_names_damaged)
{
	char cut[] = "/tmp/pipeprof-unit-cutXXXXXX", cmd[PATH_MAX + 64];
	struct elf_syms s;
	int fd;

	CHECK_EQ_INT(elf_syms_load("/nonexistent/x", &s), -ENOENT);
	CHECK_EQ_INT(s.fd, -1);
	CHECK_EQ_INT(elf_syms_load("/proc/self/cmdline", &s), -EINVAL);
	CHECK_EQ_INT(s.fd, -1);
	fd = mkstemp(cut);
	if (!CHECK(fd >= 0))
		return;
	close(fd);
	snprintf(cmd, sizeof(cmd), "head -c 100000 '%s' > %s", LIBC, cut);
	CHECK_EQ_INT(system(cmd), 0);
	/* Its section headers are gone: no table, so nothing is named and nothing is kept open. */
	fd = elf_syms_load(cut, &s);
	CHECK_MSG(fd < 0 || !s.nr, "a cut library: %d, %d symbols", fd, s.nr);
	CHECK_EQ_INT(s.fd, -1);
	unlink(cut);
}

int main(void)
{
	RUN_TEST(real_libcudart);
	RUN_TEST(fake_libcudart);
	RUN_TEST(libc);
	RUN_TEST(prefix_names);
	RUN_TEST(symtab_fallback);
	RUN_TEST(relocatable_object);
	RUN_TEST(errors);
	RUN_TEST(usdt_notes);
	RUN_TEST(thread_imports);
	RUN_TEST(symbol_names);
	RUN_TEST(symbol_names_damaged);
	return unit_summary();
}

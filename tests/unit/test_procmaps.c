/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "procmaps.h"
#include "unit.h"

#define ALL_GPU_KINDS ((1u << LIB_CUDART) | (1u << LIB_CUDA) | (1u << LIB_TORCH) | \
		       (1u << LIB_NCCL))
#define MAX_LIBS 64

/* struct maps_entry and mapped_lib carry PATH_MAX buffers: keep them off the stack. */
static struct maps_entry e;
static struct mapped_lib libs[MAX_LIBS];

static FILE *mem_stream(const char *text)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");

	CHECK_MSG(f != NULL, "fmemopen: %s", strerror(errno));
	return f;
}

static int find_in_text(const char *text, unsigned int mask, int max)
{
	FILE *f = mem_stream(text);
	int ret;

	if (!f)
		return -EIO;
	ret = procmaps_find_libs_in(f, mask, libs, max);
	fclose(f);
	return ret;
}

TEST(parse_file_backed)
{
	const char *line = "7f2e9000a000-7f2e90062000 r-xp 0000a000 103:02 3932090"
		"                   /opt/venv/lib/libcudart.so.12\n";

	memset(&e, 0xaa, sizeof(e));
	if (!CHECK_EQ_INT(procmaps_parse_line(line, &e), 0))
		return;
	CHECK_EQ_U64(e.start, 0x7f2e9000a000);
	CHECK_EQ_U64(e.end, 0x7f2e90062000);
	CHECK_EQ_U64(e.pgoff, 0xa000);
	CHECK_EQ_U64(e.dev_major, 0x103);
	CHECK_EQ_U64(e.dev_minor, 2);
	CHECK_EQ_U64(e.inode, 3932090);
	CHECK_STR(e.perms, "r-xp");
	CHECK_STR(e.path, "/opt/venv/lib/libcudart.so.12");

	/* The same without a line terminator (callers may strip it). */
	CHECK_EQ_INT(procmaps_parse_line("00400000-00452000 r--s 00001000 fd:01 12 /bin/x", &e), 0);
	CHECK_STR(e.path, "/bin/x");
	CHECK_STR(e.perms, "r--s");
	CHECK_EQ_U64(e.dev_major, 0xfd);
	CHECK_EQ_U64(e.dev_minor, 1);
	CHECK_EQ_U64(e.pgoff, 0x1000);
}

TEST(parse_anonymous)
{
	/* Old kernels leave a blank after the inode, new ones do not. */
	static const char *const lines[] = {
		"7f2e10000000-7f2e10021000 rw-p 00000000 00:00 0 \n",
		"7f2e10000000-7f2e10021000 rw-p 00000000 00:00 0\n",
		"7f2e10000000-7f2e10021000 rw-p 00000000 00:00 0",
		"7f2e10000000-7f2e10021000 rw-p 00000000 00:00 0                          \n",
	};
	unsigned int i;

	for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		strcpy(e.path, "stale");
		CHECK_MSG(procmaps_parse_line(lines[i], &e) == 0, "line %u rejected", i);
		CHECK_STR(e.path, "");
		CHECK_EQ_U64(e.inode, 0);
		CHECK_EQ_U64(e.start, 0x7f2e10000000);
		CHECK_EQ_U64(e.end, 0x7f2e10021000);
	}
}

TEST(parse_pseudo_paths)
{
	CHECK_EQ_INT(procmaps_parse_line("55a4c5a1e000-55a4cc2f3000 rw-p 00000000 00:00 0"
					 "                          [heap]\n", &e), 0);
	CHECK_STR(e.path, "[heap]");
	CHECK_EQ_U64(e.inode, 0);
	CHECK_EQ_INT(procmaps_parse_line("7ffc3b3dc000-7ffc3b3de000 r-xp 00000000 00:00 0"
					 "                          [vdso]\n", &e), 0);
	CHECK_STR(e.path, "[vdso]");
	CHECK_STR(e.perms, "r-xp");
	CHECK_EQ_INT(procmaps_parse_line("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0"
					 "                  [vsyscall]\n", &e), 0);
	CHECK_EQ_U64(e.start, 0xffffffffff600000ULL);
	CHECK_EQ_U64(e.end, 0xffffffffff601000ULL);
	CHECK_STR(e.perms, "--xp");
	CHECK_STR(e.path, "[vsyscall]");
	CHECK_EQ_INT(lib_kind_of_path(e.path), LIB_NONE);
}

TEST(parse_path_with_spaces)
{
	CHECK_EQ_INT(procmaps_parse_line("7f2ea3000000-7f2ea3001000 r--p 00000000 00:2e 77"
					 "                         /home/ml user/my  envs/cuda 13 /"
					 "libcudart.so.13\n", &e), 0);
	CHECK_STR(e.path, "/home/ml user/my  envs/cuda 13 /libcudart.so.13");
	CHECK_EQ_U64(e.dev_major, 0);
	CHECK_EQ_U64(e.dev_minor, 0x2e);
	CHECK_EQ_INT(lib_kind_of_path(e.path), LIB_CUDART);
}

TEST(parse_deleted)
{
	CHECK_EQ_INT(procmaps_parse_line("7f2e9a1f0000-7f2e9b6c0000 r-xp 001f0000 103:02 2490817"
					 "  /usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06 (deleted)\n",
					 &e), 0);
	CHECK_STR(e.path, "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06 (deleted)");
	CHECK_EQ_U64(e.pgoff, 0x1f0000);
	CHECK_EQ_INT(lib_kind_of_path(e.path), LIB_CUDA);
	CHECK_EQ_INT(procmaps_parse_line("7f2e3a000000-7f2e3a200000 rw-s 00000000 00:01 4123"
					 "  /memfd:cuda-ipc (deleted)\n", &e), 0);
	CHECK_STR(e.path, "/memfd:cuda-ipc (deleted)");
	CHECK_EQ_U64(e.inode, 4123);
}

TEST(parse_limits)
{
	CHECK_EQ_INT(procmaps_parse_line("0-ffffffffffffffff rw-p ffffffffffffffff "
					 "fff:fffff 18446744073709551615 /x\n", &e), 0);
	CHECK_EQ_U64(e.start, 0);
	CHECK_EQ_U64(e.end, UINT64_MAX);
	CHECK_EQ_U64(e.pgoff, UINT64_MAX);
	CHECK_EQ_U64(e.dev_major, 0xfff);
	CHECK_EQ_U64(e.dev_minor, 0xfffff);
	CHECK_EQ_U64(e.inode, UINT64_MAX);
	/* Upper-case hex is not what the kernel prints, but it is unambiguous. */
	CHECK_EQ_INT(procmaps_parse_line("7F00-7FFF r--p 0000 FD:0A 5 /y", &e), 0);
	CHECK_EQ_U64(e.start, 0x7f00);
	CHECK_EQ_U64(e.dev_minor, 0xa);
}

TEST(parse_malformed)
{
	static const char *const bad[] = {
		"",
		"\n",
		"garbage\n",
		"7f00 7fff r--p 00000000 fd:01 5 /x\n",			/* no dash */
		"7f00-7fff\n",						/* truncated */
		"7f00-7fff r--p\n",
		"7f00-7fff r--p 00000000 fd:01\n",			/* no inode */
		"7f00-7fff r--p 00000000 fd01 5 /x\n",			/* no colon */
		"7f00-7fff r--p 00000000 fd: 5 /x\n",			/* no minor */
		"7f00-7fff r--p 00000000 :01 5 /x\n",			/* no major */
		"7f00-7fff rwxq 00000000 fd:01 5 /x\n",			/* bad share flag */
		"7f00-7fff xr-p 00000000 fd:01 5 /x\n",			/* perms out of order */
		"7f00-7fff r--pp 00000000 fd:01 5 /x\n",		/* five perm chars */
		"7f00-7fff r-p 00000000 fd:01 5 /x\n",			/* three perm chars */
		"zz00-7fff r--p 00000000 fd:01 5 /x\n",			/* not hex */
		"0x7f00-0x7fff r--p 00000000 fd:01 5 /x\n",		/* prefix */
		"-7f00-7fff r--p 00000000 fd:01 5 /x\n",		/* sign */
		" 7f00-7fff r--p 00000000 fd:01 5 /x\n",		/* leading blank */
		"7f00-7fff  r--p 00000000 fd:01 5 /x\n",		/* double blank */
		"7f00-7fff\tr--p 00000000 fd:01 5 /x\n",		/* tab */
		"7fff-7f00 r--p 00000000 fd:01 5 /x\n",			/* end before start */
		"10000000000000000-1ffffffffffffffff r--p 0 fd:01 5 /x\n", /* > 64 bits */
		"7f00-7fff r--p 00000000 100000000:01 5 /x\n",		/* major > 32 bits */
		"7f00-7fff r--p 00000000 fd:01 12a /x\n",		/* inode not decimal */
		"7f00-7fff r--p 00000000 fd:01 -5 /x\n",		/* negative inode */
		"7f00-7fff r--p 00000000 fd:01 18446744073709551616 /x\n", /* inode overflow */
		"7f00-7fff r--p 0000g000 fd:01 5 /x\n",			/* bad offset */
		"7f00-7fff r--p 00000000 fd:01 5 /x\nextra\n",		/* two lines */
	};
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_MSG(procmaps_parse_line(bad[i], &e) == -EINVAL, "accepted bad line %u: %s",
			  i, bad[i]);
	CHECK_EQ_INT(procmaps_parse_line(NULL, &e), -EINVAL);
	CHECK_EQ_INT(procmaps_parse_line("7f00-7fff r--p 00000000 fd:01 5 /x", NULL), -EINVAL);
}

TEST(parse_path_too_long)
{
	static char line[PATH_MAX + 128];
	int n = snprintf(line, sizeof(line), "7f00-7fff r--p 00000000 fd:01 5 /");

	memset(line + n, 'a', sizeof(line) - n - 1);
	line[sizeof(line) - 1] = '\0';
	CHECK_EQ_INT(procmaps_parse_line(line, &e), -EINVAL);
	/* The longest path that fits is still taken whole. */
	line[n + PATH_MAX - 2] = '\0';
	CHECK_EQ_INT(procmaps_parse_line(line, &e), 0);
	CHECK_EQ_U64(strlen(e.path), PATH_MAX - 1);
}

TEST(classify)
{
	static const struct {
		const char *path;
		enum lib_kind kind;
	} table[] = {
		{ "libcudart.so", LIB_CUDART },
		{ "libcudart.so.13", LIB_CUDART },
		{ "/usr/local/cuda/lib64/libcudart.so.13", LIB_CUDART },
		{ "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcudart.so.13.0.48", LIB_CUDART },
		{ "/opt/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/"
		  "libcudart.so.12.4.127", LIB_CUDART },
		{ "/opt/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
		  LIB_CUDART },
		{ "/usr/lib/libcudart.so.12 (deleted)", LIB_CUDART },
		{ "libcudart_static.a", LIB_NONE },
		{ "/usr/local/cuda/lib64/libcudart_static.a", LIB_NONE },
		{ "libcudart.so-something-else", LIB_NONE },
		{ "libcudart.so.", LIB_NONE },
		{ "libcudart.sox", LIB_NONE },
		{ "libcudart.a", LIB_NONE },
		{ "libcudart", LIB_NONE },
		{ "xlibcudart.so", LIB_NONE },
		{ "/usr/lib/libcudart.so/other.so", LIB_NONE },

		{ "libcuda.so", LIB_CUDA },
		{ "libcuda.so.1", LIB_CUDA },
		{ "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06", LIB_CUDA },
		{ "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06 (deleted)", LIB_CUDA },
		{ "/usr/local/cuda/lib64/stubs/libcuda.so", LIB_CUDA },
		{ "/usr/lib/libcuda.so (deleted)", LIB_CUDA },
		{ "/usr/lib/x86_64-linux-gnu/libcudnn.so.9", LIB_NONE },
		{ "libcudnn.so", LIB_NONE },
		{ "libcudnn_ops.so.9", LIB_NONE },
		{ "libcuda_something.so", LIB_NONE },
		{ "libcuda_something.so.1", LIB_NONE },
		{ "libcudadebugger.so.1", LIB_NONE },
		{ "libcuda.so (deleted) (deleted)", LIB_NONE },

		{ "libtorch.so", LIB_TORCH },
		{ "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so", LIB_TORCH },
		{ "libtorch_cuda.so", LIB_TORCH },
		{ "libtorch_python.so", LIB_TORCH },
		{ "libtorch_global_deps.so", LIB_TORCH },
		{ "libtorch_cpu.so.2", LIB_TORCH },
		{ "/opt/torch/lib/libtorch_cpu.so (deleted)", LIB_TORCH },
		{ "/usr/lib/libtorch.so.2.5 (deleted)", LIB_TORCH },
		{ "libtorchaudio.so", LIB_NONE },
		{ "libtorch_xyz.so", LIB_NONE },
		{ "libtorch_cpu.a", LIB_NONE },

		{ "libnccl.so", LIB_NCCL },
		{ "libnccl.so.2", LIB_NCCL },
		{ "/opt/nccl/libnccl.so (deleted)", LIB_NCCL },
		{ "/opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2.21.5",
		  LIB_NCCL },
		{ "libnccl-net.so", LIB_NONE },
		{ "libnccl_static.a", LIB_NONE },

		{ "/usr/lib/x86_64-linux-gnu/libc.so.6", LIB_NONE },
		{ "/usr/bin/python3.11", LIB_PYTHON },
		{ "/usr/bin/python3", LIB_PYTHON },
		{ "/opt/py/bin/python", LIB_PYTHON },
		{ "python3.13t", LIB_PYTHON },
		{ "/root/.pyenv/versions/3.6.15/lib/libpython3.6m.so.1.0", LIB_PYTHON },
		{ "libpython3.12.so", LIB_PYTHON },
		{ "libpython3.11d.so.1.0 (deleted)", LIB_PYTHON },
		{ "python3-config", LIB_NONE },
		{ "python3.11.py", LIB_NONE },
		{ "pythonista", LIB_NONE },
		{ "libpython.so", LIB_NONE },
		{ "libpython3.11.a", LIB_NONE },
		{ "libpython3.11.sox", LIB_NONE },
		{ "[heap]", LIB_NONE },
		{ "[vdso]", LIB_NONE },
		{ "", LIB_NONE },
		{ "/", LIB_NONE },
		{ " (deleted)", LIB_NONE },
	};
	unsigned int i;
	enum lib_kind got;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		got = lib_kind_of_path(table[i].path);
		CHECK_MSG(got == table[i].kind, "\"%s\": %s, want %s", table[i].path,
			  lib_kind_name(got), lib_kind_name(table[i].kind));
	}
	CHECK_EQ_INT(lib_kind_of_path(NULL), LIB_NONE);
}

TEST(kind_names)
{
	CHECK_STR(lib_kind_name(LIB_NONE), "none");
	CHECK_STR(lib_kind_name(LIB_CUDART), "cudart");
	CHECK_STR(lib_kind_name(LIB_CUDA), "cuda");
	CHECK_STR(lib_kind_name(LIB_TORCH), "torch");
	CHECK_STR(lib_kind_name(LIB_NCCL), "nccl");
	CHECK_STR(lib_kind_name(LIB_PYTHON), "python");
	CHECK_STR(lib_kind_name((enum lib_kind)42), "unknown");
}

TEST(find_in_fixture)
{
	static const struct {
		enum lib_kind kind;
		uint64_t inode;
		unsigned int major, minor;
		const char *path;
	} want[] = {
		{ LIB_NCCL, 3932211, 0x103, 2,
		  "/opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2" },
		{ LIB_TORCH, 3932615, 0x103, 2,
		  "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so" },
		{ LIB_TORCH, 3932610, 0x103, 2,
		  "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so" },
		{ LIB_CUDART, 3932090, 0x103, 2,
		  "/opt/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12" },
		{ LIB_CUDA, 2490817, 0x103, 2,
		  "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06" },
		{ LIB_TORCH, 3932600, 0x103, 2,
		  "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_python.so" },
		{ LIB_TORCH, 3932598, 0x103, 2,
		  "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch.so" },
		{ LIB_CUDART, 77, 0, 0x2e, "/home/ml user/my envs/cuda 13/libcudart.so.13" },
	};
	char path[PATH_MAX];
	unsigned int i;
	FILE *f;
	int ret;

	UNIT_SRC_PATH(path, "tests/fixtures/maps/torch_ddp_rank0.maps");
	f = fopen(path, "re");
	if (!CHECK_MSG(f != NULL, "%s: %s", path, strerror(errno)))
		return;
	ret = procmaps_find_libs_in(f, ALL_GPU_KINDS, libs, MAX_LIBS);
	fclose(f);
	if (!CHECK_EQ_INT(ret, sizeof(want) / sizeof(want[0])))
		return;
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		CHECK_EQ_INT(libs[i].kind, want[i].kind);
		CHECK_EQ_U64(libs[i].inode, want[i].inode);
		CHECK_EQ_U64(libs[i].dev_major, want[i].major);
		CHECK_EQ_U64(libs[i].dev_minor, want[i].minor);
		CHECK_STR(libs[i].path, want[i].path);
		/* Unlinked while mapped: the path is the file's old name, the flag says so, and a
		 * mapping of it is kept to open it through map_files. */
		CHECK_EQ_INT(libs[i].deleted, want[i].inode == 2490817);
		CHECK(libs[i].map_end > libs[i].map_start);
	}

	/* The interpreter, found once though mapped several times. */
	f = fopen(path, "re");
	if (!CHECK(f != NULL))
		return;
	ret = procmaps_find_libs_in(f, 1u << LIB_PYTHON, libs, MAX_LIBS);
	fclose(f);
	if (CHECK_EQ_INT(ret, 1))
		CHECK_STR(libs[0].path, "/usr/bin/python3.11");

	/* Everything file-backed that is not an ML library: devices, memfd, cudnn, libc. */
	f = fopen(path, "re");
	if (!CHECK(f != NULL))
		return;
	ret = procmaps_find_libs_in(f, 1u << LIB_NONE, libs, MAX_LIBS);
	fclose(f);
	if (CHECK_EQ_INT(ret, 5)) {
		CHECK_STR(libs[0].path, "/dev/nvidiactl");
		CHECK_STR(libs[1].path, "/memfd:cuda-ipc");
		CHECK(libs[1].deleted);
		CHECK_STR(libs[2].path,
			  "/opt/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9");
		CHECK_STR(libs[3].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
		CHECK_STR(libs[4].path, "/dev/nvidia0");
		CHECK_EQ_INT(libs[4].kind, LIB_NONE);
	}
}

TEST(dedup)
{
	/* Same inode on another device is another file; a replaced file is a new inode. */
	static const char text[] =
		"7f00000-7f01000 r--p 00000000 103:02 500 /lib/libcudart.so.13\n"
		"7f01000-7f05000 r-xp 00001000 103:02 500 /lib/libcudart.so.13\n"
		"7f05000-7f06000 r--p 00005000 103:02 500 /lib/libcudart.so.13\n"
		"7f06000-7f07000 rw-p 00006000 103:02 500 /lib/libcudart.so.13\n"
		"7f07000-7f08000 rw-p 00000000 00:00 0 \n"
		"8f00000-8f01000 r-xp 00001000 103:03 500 /mnt/libcudart.so.13\n"
		"8f01000-8f02000 r-xp 00001000 104:02 500 /mnt2/libcudart.so.13\n"
		"9f00000-9f01000 r-xp 00001000 103:02 501 /lib/libcudart.so.13\n"
		"af00000-af01000 r-xp 00001000 103:02 500 /lib/libcudart.so.13\n"
		"bf00000-bf01000 r-xp 00001000 103:02 501 /lib/libcudart.so.13\n";

	if (!CHECK_EQ_INT(find_in_text(text, 1u << LIB_CUDART, MAX_LIBS), 4))
		return;
	CHECK_EQ_U64(libs[0].inode, 500);
	CHECK_EQ_U64(libs[0].dev_minor, 2);
	CHECK_EQ_U64(libs[1].dev_minor, 3);
	CHECK_EQ_U64(libs[2].dev_major, 0x104);
	CHECK_EQ_U64(libs[3].inode, 501);
	CHECK_STR(libs[1].path, "/mnt/libcudart.so.13");
	/* Where each file is loaded: its mapping at the lowest offset, wherever it stands. */
	CHECK_EQ_U64(libs[0].base_start, 0x7f00000);
	CHECK_EQ_U64(libs[0].base_pgoff, 0);
	CHECK_EQ_U64(libs[1].base_start, 0x8f00000);
	CHECK_EQ_U64(libs[1].base_pgoff, 0x1000);
}

TEST(load_base_is_the_lowest_offset)
{
	/* A text mapping listed before the file's first page (a loader that maps segments out
	 * of order, or a reused range): the base is still the offset-0 mapping. */
	static const char text[] =
		"7f01000-7f05000 r-xp 00001000 103:02 600 /usr/lib/libpython3.12.so.1.0\n"
		"7f05000-7f06000 r--p 00005000 103:02 600 /usr/lib/libpython3.12.so.1.0\n"
		"6f00000-6f01000 r--p 00000000 103:02 600 /usr/lib/libpython3.12.so.1.0\n";

	if (!CHECK_EQ_INT(find_in_text(text, 1u << LIB_PYTHON, MAX_LIBS), 1))
		return;
	CHECK_EQ_U64(libs[0].base_start, 0x6f00000);
	CHECK_EQ_U64(libs[0].base_pgoff, 0);
	CHECK_EQ_U64(libs[0].map_start, 0x7f01000);
}

TEST(kind_mask)
{
	static const char text[] =
		"1000-2000 r-xp 00000000 08:01 11 /a/libcudart.so.13\n"
		"2000-3000 r-xp 00000000 08:01 12 /a/libcuda.so.1\n"
		"3000-4000 r-xp 00000000 08:01 13 /a/libtorch_cuda.so\n"
		"4000-5000 r-xp 00000000 08:01 14 /a/libnccl.so.2\n"
		"5000-6000 r-xp 00000000 08:01 15 /a/libc.so.6\n"
		"6000-7000 r-xp 00000000 08:01 16 /a/libtorch_cpu.so\n";

	CHECK_EQ_INT(find_in_text(text, 0, MAX_LIBS), 0);
	CHECK_EQ_INT(find_in_text(text, 1u << LIB_CUDA, MAX_LIBS), 1);
	CHECK_EQ_U64(libs[0].inode, 12);
	CHECK_EQ_INT(libs[0].kind, LIB_CUDA);
	CHECK_EQ_INT(find_in_text(text, 1u << LIB_TORCH, MAX_LIBS), 2);
	CHECK_EQ_U64(libs[0].inode, 13);
	CHECK_EQ_U64(libs[1].inode, 16);
	CHECK_EQ_INT(find_in_text(text, (1u << LIB_CUDART) | (1u << LIB_NCCL), MAX_LIBS), 2);
	CHECK_EQ_INT(libs[0].kind, LIB_CUDART);
	CHECK_EQ_INT(libs[1].kind, LIB_NCCL);
	CHECK_EQ_INT(find_in_text(text, ALL_GPU_KINDS, MAX_LIBS), 5);
	CHECK_EQ_INT(find_in_text(text, ALL_GPU_KINDS | (1u << LIB_NONE), MAX_LIBS), 6);
	CHECK_EQ_INT(find_in_text(text, 1u << LIB_NONE, MAX_LIBS), 1);
	CHECK_STR(libs[0].path, "/a/libc.so.6");
}

TEST(max_and_args)
{
	static const char text[] =
		"1000-2000 r-xp 00000000 08:01 11 /a/libcudart.so.13\n"
		"2000-3000 r-xp 00000000 08:01 12 /a/libcuda.so.1\n"
		"3000-4000 r-xp 00000000 08:01 13 /a/libnccl.so.2\n";
	FILE *f;

	CHECK_EQ_INT(find_in_text(text, ALL_GPU_KINDS, 2), 2);
	CHECK_EQ_U64(libs[1].inode, 12);
	CHECK_EQ_INT(find_in_text(text, ALL_GPU_KINDS, 1), 1);
	CHECK_EQ_INT(find_in_text(text, ALL_GPU_KINDS, 0), 0);
	CHECK_EQ_INT(find_in_text("", ALL_GPU_KINDS, MAX_LIBS), 0);
	CHECK_EQ_INT(find_in_text(text, ALL_GPU_KINDS, -1), -EINVAL);
	CHECK_EQ_INT(procmaps_find_libs_in(NULL, ALL_GPU_KINDS, libs, MAX_LIBS), -EINVAL);
	f = mem_stream(text);
	if (f) {
		CHECK_EQ_INT(procmaps_find_libs_in(f, ALL_GPU_KINDS, NULL, 4), -EINVAL);
		fclose(f);
	}
}

TEST(malformed_lines_skipped)
{
	/* One bad line must not hide the libraries around it; nor may a line without "\n". */
	static const char text[] =
		"1000-2000 r-xp 00000000 08:01 11 /a/libcudart.so.13\n"
		"this is not a maps line /a/libcuda.so.1\n"
		"2000-3000 r-xp 0000000 08:01 /a/libtorch.so\n"
		"\n"
		"3000-4000 r-xp 00000000 08:01 13 /a/libnccl.so.2";

	if (CHECK_EQ_INT(find_in_text(text, ALL_GPU_KINDS, MAX_LIBS), 2)) {
		CHECK_EQ_INT(libs[0].kind, LIB_CUDART);
		CHECK_EQ_INT(libs[1].kind, LIB_NCCL);
		CHECK_STR(libs[1].path, "/a/libnccl.so.2");
	}
}

TEST(find_libs_self)
{
	int i, j, ret;
	bool libc = false, dup = false, anon = false;

	/* This binary links libc and nothing from CUDA, torch or NCCL. */
	CHECK_EQ_INT(procmaps_find_libs(getpid(), ALL_GPU_KINDS, libs, MAX_LIBS), 0);

	ret = procmaps_find_libs(getpid(), 1u << LIB_NONE, libs, MAX_LIBS);
	if (!CHECK_MSG(ret > 0, "ret %d", ret))
		return;
	for (i = 0; i < ret; i++) {
		const char *base = strrchr(libs[i].path, '/');

		if (base && !strncmp(base + 1, "libc.so", 7))
			libc = true;
		if (!libs[i].inode)
			anon = true;
		for (j = 0; j < i; j++)
			if (libs[j].inode == libs[i].inode && libs[j].dev_major == libs[i].dev_major &&
			    libs[j].dev_minor == libs[i].dev_minor)
				dup = true;
	}
	CHECK_MSG(libc, "libc.so not among %d mapped files", ret);
	CHECK(!dup);
	CHECK(!anon);
}

TEST(find_libs_gone)
{
	pid_t child;

	CHECK_EQ_INT(procmaps_find_libs(INT_MAX, ALL_GPU_KINDS, libs, MAX_LIBS), -ESRCH);
	CHECK_EQ_INT(procmaps_find_libs(0, ALL_GPU_KINDS, libs, MAX_LIBS), -EINVAL);
	CHECK_EQ_INT(procmaps_find_libs(-1, ALL_GPU_KINDS, libs, MAX_LIBS), -EINVAL);

	/* A process that has exited and been reaped: the usual race with a short-lived job. */
	fflush(stdout);
	child = fork();
	if (!CHECK(child >= 0))
		return;
	if (child == 0)
		_exit(0);
	if (!CHECK_EQ_INT(waitpid(child, NULL, 0), child))
		return;
	CHECK_EQ_INT(procmaps_find_libs(child, ALL_GPU_KINDS, libs, MAX_LIBS), -ESRCH);
}

/* Lines as a CUDA process on driver 580 has them: its pinned host memory is the shared /dev/zero
 * mappings; a DataLoader's shared-memory tensors, a private /dev/zero mapping and the device
 * files are not pinned host memory. */
TEST(driver_pinned_regions)
{
	const char *text =
		"7f605c800000-7f605cc00000 rw-s 00000000 00:01 2052                       /dev/zero (deleted)\n"
		"7f6057e00000-7f6058000000 rw-s 00000000 00:01 2053                       /dev/zero (deleted)\n"
		"7f6058000000-7f6058200000 rw-p 00000000 00:05 6                          /dev/zero\n"
		"7f6058200000-7f6058400000 rw-s 00000000 00:1a 31                         /dev/shm/torch_1_2\n"
		"7f6058400000-7f6058600000 rw-s 00000000 00:01 2060                       /memfd:x (deleted)\n"
		"7f6058600000-7f6058800000 rw-s 00000000 00:05 502                        /dev/nvidiactl\n"
		"7f6058800000-7f6058a00000 r--s 00000000 00:01 2061                       /dev/zero (deleted)\n"
		"7f2e9000a000-7f2e90062000 r-xp 0000a000 103:02 3932090                   /opt/venv/lib/libcudart.so.13\n";
	struct pinned_ranges pinned = { 0 };
	FILE *f = mem_stream(text);
	int ret;

	if (!f)
		return;
	ret = procmaps_find_libs_in_pinned(f, ALL_GPU_KINDS, NULL, libs, MAX_LIBS, &pinned);
	fclose(f);
	/* The library is still found beside them. */
	if (CHECK_EQ_INT(ret, 1))
		CHECK_STR(libs[0].path, "/opt/venv/lib/libcudart.so.13");
	if (!CHECK_EQ_INT(pinned.nr, 3))
		return;
	CHECK_EQ_U64(pinned.start[0], 0x7f605c800000ull);
	CHECK_EQ_U64(pinned.end[0], 0x7f605cc00000ull);
	CHECK_EQ_U64(pinned.start[1], 0x7f6057e00000ull);
	CHECK_EQ_U64(pinned.start[2], 0x7f6058800000ull);
	CHECK(!pinned.truncated);

	/* Past PROCMAPS_PINNED_MAX they are counted as lost, never written past the array. */
	{
		char *many = malloc(128 * (PROCMAPS_PINNED_MAX + 2));
		size_t off = 0;

		if (!CHECK(many != NULL))
			return;
		for (int i = 0; i < PROCMAPS_PINNED_MAX + 2; i++)
			off += sprintf(many + off, "%llx-%llx rw-s 00000000 00:01 %d /dev/zero (deleted)\n",
				       0x100000ull * (i + 1), 0x100000ull * (i + 2), 3000 + i);
		memset(&pinned, 0, sizeof(pinned));
		f = mem_stream(many);
		if (f) {
			procmaps_find_libs_in_pinned(f, ALL_GPU_KINDS, NULL, libs, MAX_LIBS, &pinned);
			fclose(f);
		}
		CHECK_EQ_INT(pinned.nr, PROCMAPS_PINNED_MAX);
		CHECK(pinned.truncated);
		free(many);
	}
}

int main(void)
{
	RUN_TEST(parse_file_backed);
	RUN_TEST(parse_anonymous);
	RUN_TEST(parse_pseudo_paths);
	RUN_TEST(parse_path_with_spaces);
	RUN_TEST(parse_deleted);
	RUN_TEST(parse_limits);
	RUN_TEST(parse_malformed);
	RUN_TEST(parse_path_too_long);
	RUN_TEST(classify);
	RUN_TEST(kind_names);
	RUN_TEST(find_in_fixture);
	RUN_TEST(dedup);
	RUN_TEST(load_base_is_the_lowest_offset);
	RUN_TEST(kind_mask);
	RUN_TEST(max_and_args);
	RUN_TEST(malformed_lines_skipped);
	RUN_TEST(find_libs_self);
	RUN_TEST(find_libs_gone);
	RUN_TEST(driver_pinned_regions);
	return unit_summary();
}

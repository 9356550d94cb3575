/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Names of user-mode addresses of the job's processes, through the symbols of the files they
 * map (each file's symbols loaded once), read after the window from /proc (each process's
 * maps read once) and the processes' memory.
 */
#ifndef PIPEPROF_SYMBOLIZE_H
#define PIPEPROF_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct sym_file;
struct sym_proc;

struct symbolizer {
	struct sym_file *files;
	int nr_files;
	struct sym_proc *procs;
	int nr_procs;
	int maps_reads;
	char *(*demangle)(const char *, char *, size_t *, int *);
	void *libstdcxx;
};

/* Reads pid's maps now if they were not, or if they changed since (a process may be gone by
 * when its addresses are named); otherwise reads nothing. */
void symbolizer_snapshot(struct symbolizer *z, pid_t pid);
/* pid (0: any process) has mapped a library: its next snapshot reads its maps again. */
void symbolizer_maps_changed(struct symbolizer *z, pid_t pid);
/* "function (file)", C++ demangled; "file+0xOFFSET" where no symbol covers ip; the mapping's
 * own name for the vDSO and anonymous (JIT) code. -ENOENT where nothing is mapped at ip. */
int symbolizer_name(struct symbolizer *z, pid_t pid, uint64_t ip, char *out, size_t size);
/* ret is in executable memory of pid, just after a call instruction. */
bool symbolizer_is_return_address(struct symbolizer *z, pid_t pid, uint64_t ret);
/* ip is in the Python interpreter: its executable or libpython. */
bool symbolizer_in_interpreter(struct symbolizer *z, pid_t pid, uint64_t ip);
/* Whether the code at ip runs on one thread whatever the job's intra-op thread count: the
 * interpreter (CODE_INTERPRETER), or a BLAS that starts no threads of its own
 * (CODE_SERIAL_LIBRARY), which torch calls outside its parallel loops. */
int symbolizer_serial_code(struct symbolizer *z, pid_t pid, uint64_t ip);
void symbolizer_free(struct symbolizer *z);

#endif

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * procfs as proctree.c reads it: the input becomes a small procfs tree on tmpfs, and the real
 * readers run over it. Records are separated by RS (0x1e):
 *   0   /proc/stat                 proc_cpu_times()
 *   1   /proc/1/cmdline            proc_cmdline(), into a large and a tiny buffer
 *   2   /proc/1/task/1/comm        proc_comm()
 *   3.. /proc/N/stat and /proc/1/task/N/stat for N = 1, 2, ...: proc_parse_stat(),
 *       proc_parse_stat_start(), proc_parse_stat_comm(), proc_descendants(), proc_threads(),
 *       proc_thread_state(), proc_thread_stat()
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fuzz.h"
#include "proctree.h"

#define MAX_PIDS 12
#define SEP 0x1e

static char root[64];

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void remove_root(void)
{
	nftw(root, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

static void mkdirf(const char *fmt, int a, int b)
{
	char path[256];

	snprintf(path, sizeof(path), fmt, root, a, b);
	if (mkdir(path, 0755) && errno != EEXIST)
		abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* tmpfs when there is one: every input writes a dozen files. */
	snprintf(root, sizeof(root), "/dev/shm/pipeprof-fuzz-XXXXXX");
	if (!mkdtemp(root)) {
		snprintf(root, sizeof(root), "/tmp/pipeprof-fuzz-XXXXXX");
		if (!mkdtemp(root))
			abort();
	}
	atexit(remove_root);
	for (int pid = 1; pid <= MAX_PIDS; pid++) {
		mkdirf("%s/%d", pid, 0);
		mkdirf("%s/%d/task", pid, 0);
	}
	for (int tid = 2; tid <= MAX_PIDS; tid++)
		mkdirf("%s/%d/task/%d", 1, tid);
	mkdirf("%s/%d/task/%d", 1, 1);
	return 0;
}

/* Write the file, or remove it when the record is absent (len < 0). */
static void put(const char *rel, const uint8_t *data, long len)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if (len < 0) {
		unlink(path);
		return;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, data, len) != len)
		abort();
	close(fd);
}

static void check_descendants(void)
{
	pid_t out[MAX_PIDS + 4], ppid[MAX_PIDS + 4];
	int n;

	/* Room for fewer than there may be: the walk must stop at max. */
	for (int max = 3; max <= MAX_PIDS + 4; max += MAX_PIDS + 1) {
		n = proc_descendants(root, 1, out, ppid, max);
		FUZZ_CHECK(n >= 0 && n <= max);
		for (int i = 0; i < n; i++) {
			bool parent_seen = ppid[i] == 1;

			FUZZ_CHECK(out[i] != 1);
			/* Parents come before their children. */
			for (int j = 0; j < i && !parent_seen; j++)
				parent_seen = out[j] == ppid[i];
			FUZZ_CHECK(parent_seen);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *rec[3 + MAX_PIDS] = {};
	long len[3 + MAX_PIDS];
	unsigned long long busy, total, start;
	char rel[64], buf[4096], tiny[6], *line;
	const uint8_t *p = data, *end = data + size, *sep;
	int nr = 0, running;
	pid_t tids[MAX_PIDS + 1], ppid;
	char state;

	while (nr < 3 + MAX_PIDS) {
		sep = memchr(p, SEP, end - p);
		rec[nr] = p;
		len[nr++] = (sep ? sep : end) - p;
		if (!sep)
			break;
		p = sep + 1;
	}
	for (int i = nr; i < 3 + MAX_PIDS; i++)
		len[i] = -1;

	put("stat", rec[0], len[0]);
	proc_cpu_times(root, &busy, &total, &running);

	put("1/cmdline", rec[1], len[1]);
	proc_cmdline(root, 1, buf, sizeof(buf));
	FUZZ_CHECK(strlen(buf) < sizeof(buf));
	for (char *c = buf; *c; c++)
		FUZZ_CHECK((unsigned char)*c >= ' ');
	proc_cmdline(root, 1, tiny, sizeof(tiny));
	FUZZ_CHECK(FUZZ_TERMINATED(tiny));

	put("1/task/1/comm", rec[2], len[2]);
	proc_comm(root, 1, 1, tiny, sizeof(tiny));
	/* Only the kernel's trailing newline goes: a name may hold others (prctl allows it), and
	 * every output escapes them. */
	FUZZ_CHECK(FUZZ_TERMINATED(tiny));

	for (int pid = 1; pid <= MAX_PIDS; pid++) {
		long n = len[2 + pid];

		snprintf(rel, sizeof(rel), "%d/stat", pid);
		put(rel, rec[2 + pid], n);
		snprintf(rel, sizeof(rel), "1/task/%d/stat", pid);
		put(rel, rec[2 + pid], n);
		if (n < 0)
			continue;
		/* The same line straight into the parsers, in an allocation of its own. */
		line = fuzz_strndup(rec[2 + pid], n);
		if (!proc_parse_stat_start(line, &ppid, &start))
			FUZZ_CHECK(!proc_parse_stat(line, NULL, NULL));
		proc_parse_stat(line, &ppid, &state);
		free(line);
		proc_thread_state(root, 1, pid);
		/* Unterminated bytes: the file's text as read, NULs and all. */
		{
			uint8_t *text = malloc(n ? n : 1);
			char comm[16];

			memcpy(text, rec[2 + pid], n);
			if (!proc_parse_stat_comm((const char *)text, n, comm, sizeof(comm), &state))
				FUZZ_CHECK(FUZZ_TERMINATED(comm));
			free(text);
			if (!proc_thread_stat(root, 1, pid, tiny, sizeof(tiny), &state))
				FUZZ_CHECK(FUZZ_TERMINATED(tiny));
		}
	}
	check_descendants();
	FUZZ_CHECK(proc_threads(root, 1, tids, MAX_PIDS + 1) <= MAX_PIDS + 1);
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The cached CO-RE types (core_btf.h): found before the object opens, made with bpftool. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <bpf/btf.h>
#include "cache.h"
#include "core_btf.h"
#include "proctree.h"

extern char **environ;

/* bpftool takes a minute fraction of a second; one that hangs must not hold the exit. */
#define BPFTOOL_TIMEOUT_MS 5000

/* The object is the binary's own, the same for the process's life: hashed once (0.3 ms for
 * its 270 KB), not at every job's attach and again at the save. */
static uint64_t object_hash(const void *obj, size_t size)
{
	static const void *hashed;
	static size_t hashed_size;
	static uint64_t hash;

	if (obj != hashed || size != hashed_size) {
		hash = core_btf_object_hash(obj, size);
		hashed = obj;
		hashed_size = size;
	}
	return hash;
}

static int entry_name(char *name, size_t size, const void *obj, size_t obj_size)
{
	char boot_id[64];
	int err = proc_read_line("/proc/sys/kernel/random/boot_id", boot_id, sizeof(boot_id));

	if (err)
		return err;
	boot_id[strcspn(boot_id, "\n")] = '\0';
	return core_btf_entry_name(name, size, boot_id, object_hash(obj, obj_size));
}

/* The entry's name, the cache directory and a buffer for the entry; -errno when there is no
 * cache (off, unsafe) or no memory, and then nothing to release. */
static int open_entry(const void *obj, size_t size, char *name, size_t name_size, int *dirfd,
		      char **entry)
{
	int err = entry_name(name, name_size, obj, size);

	if (err)
		return err;
	*dirfd = cache_open();
	if (*dirfd < 0)
		return *dirfd;
	*entry = malloc(CACHE_MAX_ENTRY);
	if (!*entry) {
		close(*dirfd);
		return -ENOMEM;
	}
	return 0;
}

/* The payload must be BTF libbpf reads: a file that is not would fail the whole load. */
static bool btf_usable(const char *data, size_t len)
{
	struct btf *btf = btf__new(data, len);

	if (!btf)
		return false;
	btf__free(btf);
	return true;
}

/* The entry's types, read into entry (CACHE_MAX_ENTRY bytes): a pointer into it, or NULL
 * when there is none usable. */
static const char *read_entry(int dirfd, const char *name, char *entry, size_t *btf_len,
			      bool verbose)
{
	int len = cache_get(dirfd, name, entry, CACHE_MAX_ENTRY);
	const char *btf;

	if (len >= 0 && !core_btf_unwrap(entry, len, &btf, btf_len) && btf_usable(btf, *btf_len))
		return btf;
	if (verbose && len >= 0)
		fprintf(stderr, "pipeprof: cached CO-RE types %s unreadable: ignored\n", name);
	return NULL;
}

void core_btf_find(struct core_btf *cb, const void *obj, size_t size, bool verbose)
{
	char name[160], *entry = NULL;
	const char *btf;
	size_t btf_len;
	int dirfd = -1;

	memset(cb, 0, sizeof(*cb));
	cb->fd = -1;
	if (open_entry(obj, size, name, sizeof(name), &dirfd, &entry))
		return;
	btf = read_entry(dirfd, name, entry, &btf_len, verbose);
	if (!btf) {
		/* Remade in its place at the end, as kernel features are: a malformed entry, or
		 * one another user could have written, is replaced rather than trusted. */
		cb->missing = true;
		goto cleanup;
	}
	cb->fd = memfd_create("pipeprof-core-btf", MFD_CLOEXEC);
	if (cb->fd >= 0 && write(cb->fd, btf, btf_len) != (ssize_t)btf_len) {
		close(cb->fd);
		cb->fd = -1;
	}
	if (cb->fd < 0)
		goto cleanup;
	snprintf(cb->path, sizeof(cb->path), "/proc/self/fd/%d", cb->fd);
	if (verbose)
		fprintf(stderr, "pipeprof: CO-RE against the cached kernel types (%zu bytes)\n",
			btf_len);
cleanup:
	free(entry);
	close(dirfd);
}

void core_btf_release(struct core_btf *cb)
{
	/* path, not fd: a zeroed struct (a tracer that never got this far) holds fd 0. */
	if (cb->path[0])
		close(cb->fd);
	cb->fd = -1;
	cb->path[0] = '\0';
}

/* Debian's place first; a root tool does not run whatever PATH names first. */
static const char *find_bpftool(void)
{
	static const char *const places[] = { "/usr/sbin/bpftool", "/usr/bin/bpftool",
					      "/sbin/bpftool", "/usr/local/sbin/bpftool" };

	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++)
		if (!access(places[i], X_OK))
			return places[i];
	return NULL;
}

static int wait_child(pid_t pid)
{
	int status;

	for (int ms = 0; ms < BPFTOOL_TIMEOUT_MS; ms += 5) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : -ECHILD;
		if (r < 0 && errno != EINTR)
			return -errno;
		nanosleep(&(struct timespec){ .tv_nsec = 5000000 }, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -ETIMEDOUT;
}

/* A memfd bpftool inherits, above its standard streams: a report that closed stdout has
 * left fd 1 free, and the child's stdout would take its place. */
static int inherited_memfd(const char *name)
{
	int fd = memfd_create(name, 0), above;

	if (fd < 0 || fd > STDERR_FILENO)
		return fd < 0 ? -errno : fd;
	above = fcntl(fd, F_DUPFD, STDERR_FILENO + 1);
	close(fd);
	return above < 0 ? -errno : above;
}

/* bpftool reads the object from one memfd and writes the types into another, through
 * /dev/fd: nothing of it touches a file system another user could reach. */
static int run_bpftool(const char *bpftool, const void *obj, size_t size, int out_fd)
{
	char obj_path[32], out_path[32];
	posix_spawn_file_actions_t actions;
	int obj_fd, err;
	pid_t pid;

	obj_fd = inherited_memfd("pipeprof-bpf-object");
	if (obj_fd < 0)
		return obj_fd;
	if (write(obj_fd, obj, size) != (ssize_t)size) {
		close(obj_fd);
		return -EIO;
	}
	snprintf(obj_path, sizeof(obj_path), "/dev/fd/%d", obj_fd);
	snprintf(out_path, sizeof(out_path), "/dev/fd/%d", out_fd);
	char *argv[] = { (char *)bpftool, "gen", "min_core_btf", "/sys/kernel/btf/vmlinux",
			 out_path, obj_path, NULL };

	posix_spawn_file_actions_init(&actions);
	posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	err = -posix_spawn(&pid, bpftool, &actions, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&actions);
	close(obj_fd);
	return err ? err : wait_child(pid);
}

void core_btf_save(const void *obj, size_t size, bool verbose)
{
	static bool tried;
	char name[160], *data = NULL, *entry = NULL;
	const char *bpftool = find_bpftool();
	int dirfd = -1, out_fd = -1, err = 0, len;
	struct stat st;

	if (tried)
		return;
	tried = true;
	if (open_entry(obj, size, name, sizeof(name), &dirfd, &entry))
		return;
	if (read_entry(dirfd, name, entry, &(size_t){ 0 }, false))
		goto cleanup;		/* the daemon's and top's start, on a boot that has it */
	if (!bpftool) {
		err = -ENOENT;
		goto cleanup;
	}
	out_fd = inherited_memfd("pipeprof-core-btf");
	if (out_fd < 0) {
		err = out_fd;
		goto cleanup;
	}
	err = run_bpftool(bpftool, obj, size, out_fd);
	if (err)
		goto cleanup;
	if (fstat(out_fd, &st)) {
		err = -errno;
		goto cleanup;
	}
	data = malloc(st.st_size + 1);
	if (!data) {
		err = -ENOMEM;
		goto cleanup;
	}
	if (!st.st_size || pread(out_fd, data, st.st_size, 0) != st.st_size ||
	    !btf_usable(data, st.st_size)) {
		err = -EBADMSG;
		goto cleanup;
	}
	len = core_btf_wrap(entry, CACHE_MAX_ENTRY, data, st.st_size);
	err = len < 0 ? len : cache_put(dirfd, name, entry, len);
	if (!err) {
		/* Earlier boots' entries go. This boot's newest few builds stay: two builds in
		 * use side by side (a daemon and a newer CLI) must not evict each other's at
		 * every run, each then paying the whole BTF and a bpftool run. */
		char *hash = strrchr(name, '-');

		if (hash) {
			hash[1] = '\0';
			cache_prune(dirfd, CORE_BTF_PREFIX, name);
			cache_trim(dirfd, name, CORE_BTF_BUILDS_KEPT);
		}
	}
	if (!err && verbose)
		fprintf(stderr, "pipeprof: cached the kernel types CO-RE needs (%lld bytes) for "
			"the next attach\n", (long long)st.st_size);
cleanup:
	if (err && verbose)
		fprintf(stderr, "pipeprof: kernel types for CO-RE not cached (%s%s): attaches read "
			"the kernel's whole BTF\n", bpftool ? "bpftool gen min_core_btf: " :
			"no bpftool", bpftool ? strerror(-err) : "");
	free(data);
	free(entry);
	if (out_fd >= 0)
		close(out_fd);
	close(dirfd);
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Learning of new libraries from the target itself. A fork, an exec and every dlopen send a
 * note (loader.bpf.c, sched.bpf.c); userspace then reads that one process's maps, so a GPU
 * library is probed within milliseconds of being mapped, and nothing re-reads every tracked
 * process's maps twice a second (each read takes the target's mmap_lock, which its own
 * allocations then wait for). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "elfsym.h"
#include "symcache.h"
#include "pipeprof.h"
#include "pipeprof.skel.h"
#include "procmaps.h"
#include "sanitize.h"
#include "tracer.h"
#include "uprobe_multi.h"
#include "grow.h"

#define LOADER_HOOK "_dl_debug_state"
/* The safety net under the notes: a loader pipeprof cannot probe (static binaries, a custom
 * loader), a library mapped by hand. Measured here: reading a torch process's maps (1,700
 * lines) takes ~10 ms, under its mmap_lock; twice a second per process, as before the notes,
 * that was 2% of a CPU. */
#define SAFETY_SCAN_NS (5ULL * 1000000000)

struct tracer_loader {
	uint64_t inode;
	unsigned int dev_major, dev_minor;
	struct bpf_link *link;
	int fd;			/* the multi-uprobe link; -1 when link is used instead */
	int err;		/* why it is not probed; 0 when it is */
};

static struct tracer_loader *find_loader(struct tracer *t, const struct mapped_lib *lib)
{
	for (int i = 0; i < t->nr_loaders; i++) {
		struct tracer_loader *l = &t->loaders[i];

		if (lib_is_file(lib, l->inode, l->dev_major, l->dev_minor))
			return l;
	}
	return NULL;
}

void tracer_attach_loader(struct tracer *t, pid_t pid, const struct mapped_lib *lib)
{
	struct elf_func fn = { .name = LOADER_HOOK };
	char path[PATH_MAX + 64];
	struct tracer_loader *l;
	void *grown;

	if (find_loader(t, lib))
		return;
	grown = realloc(t->loaders, (t->nr_loaders + 1) * sizeof(*t->loaders));
	if (!grown)
		return;
	t->loaders = grown;
	l = &t->loaders[t->nr_loaders++];
	*l = (struct tracer_loader){ .inode = lib->inode, .dev_major = lib->dev_major,
				     .dev_minor = lib->dev_minor, .fd = -1 };

	lib_open_path(pid, lib, path, sizeof(path));
	if (symcache_resolve(path, &fn, 1) != 1) {
		l->err = -ENOENT;
	} else if (t->uprobe_multi) {
		uint64_t offset = fn.offset, cookie = 0;

		/* pid 0: every process that maps this loader; the program keeps tracked ones. */
		l->fd = uprobe_multi_attach(t->skel->progs.on_loader_change, 0, path, &offset,
					    &cookie, 1, false);
		l->err = l->fd < 0 ? l->fd : 0;
	} else {
		l->link = bpf_program__attach_uprobe(t->skel->progs.on_loader_change, false, -1,
						     path, fn.offset);
		l->err = l->link ? 0 : -errno;
	}
	if (t->verbose) {
		char shown[SAN_TEXT_SIZE(sizeof(lib->path))];

		san_text(shown, sizeof(shown), lib->path, sizeof(lib->path));
		if (l->err)
			fprintf(stderr, "pipeprof: cannot probe the loader %s:%s: %s (libraries loaded "
				"later are found by the periodic scan)\n", shown, LOADER_HOOK,
				strerror(-l->err));
		else
			fprintf(stderr, "pipeprof: loader %s:%s offset 0x%llx\n", shown, LOADER_HOOK,
				(unsigned long long)fn.offset);
	}
}

static int on_note(void *ctx, void *data, size_t size)
{
	struct tracer *t = ctx;
	const struct pp_note *n = data;

	if (size < sizeof(*n))
		return 0;
	for (int i = 0; i < t->nr_noted; i++)
		if (t->noted[i] == n->tgid)
			return 0;
	if (grow_array(&t->noted, &t->cap_noted, t->nr_noted, sizeof(*t->noted), 16))
		return -ENOMEM;
	t->noted[t->nr_noted++] = n->tgid;
	return 0;
}

int tracer_notes_open(struct tracer *t)
{
	t->notes = ring_buffer__new(bpf_map__fd(t->skel->maps.notes), on_note, t, NULL);
	return t->notes ? 0 : -errno;
}

int tracer_notes_fd(const struct tracer *t)
{
	return t->notes ? ring_buffer__epoll_fd(t->notes) : -1;
}

int tracer_handle_notes(struct tracer *t)
{
	__u64 lost;
	int err;

	if (!t->notes)
		return 0;
	err = ring_buffer__consume(t->notes);
	if (err < 0)
		return err;
	lost = tracer_counter(t, PP_CNT_NOTES_LOST);
	if (lost != t->notes_lost_seen) {
		t->notes_lost_seen = lost;
		t->nr_noted = 0;
		tracer_sampler_maps_changed(t, 0);
		return tracer_refresh(t);
	}
	for (int i = 0; i < t->nr_noted; i++) {
		t->pid_scans++;
		tracer_sampler_maps_changed(t, t->noted[i]);
		err = tracer_refresh_pid(t, t->noted[i]);
		/* A process gone by now has nothing left to probe. */
		if (err && err != -ESRCH && err != -ENOENT)
			return err;
	}
	t->nr_noted = 0;
	return 0;
}

void tracer_notes_close(struct tracer *t)
{
	ring_buffer__free(t->notes);
	t->notes = NULL;
	for (int i = 0; i < t->nr_loaders; i++) {
		bpf_link__destroy(t->loaders[i].link);
		if (t->loaders[i].fd >= 0)
			close(t->loaders[i].fd);
	}
	free(t->loaders);
	t->loaders = NULL;
	t->nr_loaders = 0;
	free(t->noted);
	t->noted = NULL;
	t->nr_noted = t->cap_noted = 0;
}

int tracer_wait(struct tracer *t, int pidfd, int timeout_ms)
{
	struct pollfd pfd[2] = {
		{ .fd = pidfd, .events = POLLIN },		/* poll skips a negative fd */
		{ .fd = tracer_notes_fd(t), .events = POLLIN },
	};
	__u64 now;
	int err;

	if (poll(pfd, 2, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	tracer_sampler_poll(t);
	tracer_steps_poll(t);
	tracer_record_poll(t);
	tracer_memory_poll(t, false);
	tracer_launches_tick(t);
	if (pfd[1].revents & POLLIN) {
		err = tracer_handle_notes(t);
		if (err)
			return err;
	}
	now = monotonic_ns();
	if (!t->last_scan_ns)
		t->last_scan_ns = now;
	if (now - t->last_scan_ns >= SAFETY_SCAN_NS) {
		t->last_scan_ns = now;
		err = tracer_refresh(t);
		if (err)
			return err;
	}
	return pfd[0].revents & POLLIN ? 1 : 0;
}

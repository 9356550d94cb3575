// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "cache.h"
#include "kfeatures.h"
#include "proctree.h"
#include "uprobe_multi.h"
#include "pipeprof.h"	/* the types the skeleton's globals use */
#include "pipeprof.skel.h"

int tracepoint_btf_id(const struct btf *btf, const char *tp)
{
	char name[128];

	snprintf(name, sizeof(name), "btf_trace_%s", tp);
	return btf__find_by_name_kind(btf, name, BTF_KIND_TYPEDEF);
}

/* Number of parameters of a tracepoint's BTF prototype, or -1 when it does not exist. */
static int tracepoint_nr_args(const struct btf *btf, const char *tp)
{
	const struct btf_type *t;
	int id = tracepoint_btf_id(btf, tp);

	if (id < 0)
		return -1;
	t = btf__type_by_id(btf, id);			/* typedef */
	t = btf__type_by_id(btf, t->type);		/* pointer */
	if (!t || !btf_is_ptr(t))
		return -1;
	t = btf__type_by_id(btf, t->type);		/* func proto */
	if (!t || !btf_is_func_proto(t))
		return -1;
	return btf_vlen(t) - 1;	/* the first is the tracepoint's void *__data */
}

/* Every uprobe program of the object is made for multi-uprobe links: attach type is fixed at
 * load, and one program cannot serve both kinds of attachment. */
static void use_uprobe_multi(struct pipeprof_bpf *skel)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, skel->obj) {
		const char *sec = bpf_program__section_name(prog);

		if (!strncmp(sec, "uprobe", 6) || !strncmp(sec, "uretprobe", 9))
			bpf_program__set_expected_attach_type(prog,
				(enum bpf_attach_type)PP_BPF_TRACE_UPROBE_MULTI);
	}
}

/* The names that key and check this boot's entry. */
static int boot_identity(char *boot_id, size_t id_size, char *release, size_t rel_size)
{
	struct utsname u;
	int err = proc_read_line("/proc/sys/kernel/random/boot_id", boot_id, id_size);

	if (err)
		return err;
	boot_id[strcspn(boot_id, "\n")] = '\0';
	if (uname(&u))
		return -errno;
	snprintf(release, rel_size, "%s", u.release);
	/* the entry's name is made of the id */
	for (const char *c = boot_id; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') || *c == '-'))
			return -EINVAL;
	return boot_id[0] ? 0 : -EINVAL;
}

int kfeatures_read_cached(struct kfeatures *kf)
{
	char boot_id[64], release[sizeof(((struct utsname *)0)->release)], name[96], text[1024];
	int dirfd, err;

	err = boot_identity(boot_id, sizeof(boot_id), release, sizeof(release));
	if (err)
		return err;
	dirfd = cache_open();
	if (dirfd < 0)
		return dirfd;
	snprintf(name, sizeof(name), "kernel-%s", boot_id);
	err = cache_get(dirfd, name, text, sizeof(text));
	close(dirfd);
	return err < 0 ? err : kfeatures_parse(text, boot_id, release, kf);
}

static void write_cached(const struct kfeatures *kf)
{
	char boot_id[64], release[sizeof(((struct utsname *)0)->release)], name[96], text[1024];
	int dirfd, len;

	if (boot_identity(boot_id, sizeof(boot_id), release, sizeof(release)))
		return;
	len = kfeatures_format(kf, boot_id, release, text, sizeof(text));
	if (len < 0)
		return;
	dirfd = cache_open();
	if (dirfd < 0)
		return;
	snprintf(name, sizeof(name), "kernel-%s", boot_id);
	/* Best effort: a read-only /var still traces, at the cost of the BTF read. */
	if (!cache_put(dirfd, name, text, len))
		cache_prune(dirfd, "kernel-", name);	/* earlier boots' entries */
	close(dirfd);
}

struct btf *kernel_btf_load(void)
{
	int fd = open("/sys/kernel/btf/vmlinux", O_RDONLY | O_CLOEXEC);
	struct btf *btf = NULL;
	struct stat st;
	void *data;
	int err;

	if (fd < 0 || fstat(fd, &st) || st.st_size <= 0 || st.st_size > UINT32_MAX)
		goto read;
	data = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (data == MAP_FAILED)
		goto read;
	btf = btf__new(data, st.st_size);
	err = errno;
	munmap(data, st.st_size);
	close(fd);
	errno = err;
	return btf;
read:
	if (fd >= 0)
		close(fd);
	return btf__load_vmlinux_btf();
}

int kfeatures_read_btf(struct kfeatures *kf)
{
	struct btf *btf = kernel_btf_load();

	if (!btf) {
		int err = -errno;

		fprintf(stderr, "pipeprof: cannot read kernel BTF (/sys/kernel/btf/vmlinux): %s; "
			"pipeprof needs a kernel built with CONFIG_DEBUG_INFO_BTF=y\n", strerror(-err));
		return err;
	}
	memset(kf, 0, sizeof(*kf));
	kf->sched_switch_has_prev_state = tracepoint_nr_args(btf, "sched_switch") >= 4;
	kf->has_block_io_start = tracepoint_nr_args(btf, "block_io_start") >= 0;
	kf->preempt_count_rq_delta = preempt_count_rq_delta(btf);
	kf->uprobe_multi = uprobe_multi_supported(btf);
	for (int i = 0; i < KF_TRACEPOINTS; i++) {
		int id = tracepoint_btf_id(btf, kfeatures_tracepoints[i]);

		kf->tp_btf_ids[i] = id > 0 ? id : 0;
	}
	btf__free(btf);
	write_cached(kf);
	return 0;
}

void kfeatures_apply(struct pipeprof_bpf *skel, const struct kfeatures *kf, bool *uprobe_multi)
{
	skel->rodata->sched_switch_has_prev_state = kf->sched_switch_has_prev_state;
	skel->rodata->has_block_io_start = kf->has_block_io_start;
	if (!kf->has_block_io_start)
		bpf_program__set_autoload(skel->progs.on_block_io_start, false);
	skel->rodata->preempt_count_rq_delta = kf->preempt_count_rq_delta;
	*uprobe_multi = kf->uprobe_multi && !getenv("PIPEPROF_NO_UPROBE_MULTI");
	if (*uprobe_multi)
		use_uprobe_multi(skel);
}

void kfeatures_remember_preempt_count(struct kfeatures *kf)
{
	if (kf->preempt_count_proven)
		return;
	kf->preempt_count_proven = true;
	write_cached(kf);
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Probing the GPU libraries (and libtorch for steps) a tracked process maps: symbols resolved in
 * one ELF pass per file, multi-uprobe links where the kernel has them, and the truth about
 * what could not be probed. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "elfsym.h"
#include "symcache.h"
#include "gpu_apis.h"
#include "pipeprof.h"
#include "pipeprof.skel.h"
#include "procmaps.h"
#include "procnet.h"
#include "proctree.h"
#include "sanitize.h"
#include "tracer.h"
#include "uprobe_multi.h"
#include "grow.h"

static struct tracer_lib_attach *find_attached(struct tracer *t, pid_t pid, const struct mapped_lib *lib)
{
	for (int i = 0; i < t->nr_attached; i++) {
		struct tracer_lib_attach *a = &t->attached[i];

		if (a->pid == pid && lib_is_file(lib, a->inode, a->dev_major, a->dev_minor))
			return a;
	}
	return NULL;
}

/* The autograd engine's entry point: one outermost call per backward pass. */
#define STEP_PROBE_SYMBOL "_ZN5torch8autograd6Engine7executeE*"
#define STEP_PROBE_ID (-1)

static bool want_probe(struct tracer *t, const struct gpu_api *api, enum lib_kind kind,
		       bool runtime_mapped)
{
	if (api->lib != kind)
		return false;
	switch (api->class) {
	case GPU_SYNC:
		return true;
	case GPU_LAUNCH:
		return (t->hist_kinds & 1u << PP_HK_LAUNCH) || t->steps;
	case GPU_COPY:
	case GPU_COPY_SYNC:
		return ((t->hist_kinds & 1u << PP_HK_COPY_BYTES) || t->steps) &&
		       !(kind == LIB_CUDA && runtime_mapped);
	case GPU_HOST_ALLOC:
	case GPU_HOST_REGISTER:
	case GPU_HOST_FREE:
	case GPU_DEV_ALLOC:
	case GPU_DEV_ALLOC_PITCH:
	case GPU_DEV_FREE:
		return t->steps;
	case NCCL_CALL:
	case NCCL_COMM_INIT:
	case NCCL_COMM_FREE:
		return true;
	}
	return false;
}

/* The entry program, the return program (or NULL) and the cookie of probe api (an index into
 * gpu_apis, or STEP_PROBE_ID). */
static void probe_programs(struct tracer *t, int api, struct bpf_program **enter,
			   struct bpf_program **ret, __u64 *cookie)
{
	struct pipeprof_bpf *skel = t->skel;

	*enter = *ret = NULL;
	*cookie = api;
	if (api == STEP_PROBE_ID) {
		*enter = skel->progs.on_gpu_enter;
		*ret = skel->progs.on_gpu_return;
		*cookie = PP_COOKIE_STEP;
		return;
	}
	switch (gpu_apis[api].class) {
	case GPU_SYNC:
		*enter = skel->progs.on_gpu_enter;
		*ret = skel->progs.on_gpu_return;
		break;
	case GPU_LAUNCH:
		*enter = skel->progs.on_launch;
		*ret = NULL;
		if (gpu_apis[api].lib == LIB_CUDA)
			*cookie |= PP_COOKIE_DRIVER;
		break;
	case GPU_COPY:
	case GPU_COPY_SYNC:
		*enter = skel->progs.on_copy;
		/* The return gives a synchronous copy's throughput, which only hist memcpy shows. */
		*ret = gpu_apis[api].class == GPU_COPY_SYNC && t->hist_kinds & 1u << PP_HK_COPY_BYTES ?
		       skel->progs.on_copy_return : NULL;
		*cookie = PP_COOKIE(api, gpu_apis[api].copy_dir);
		break;
	case GPU_HOST_ALLOC:
		*enter = skel->progs.on_host_alloc;
		*ret = skel->progs.on_host_alloc_return;
		break;
	case GPU_HOST_REGISTER:
		*enter = skel->progs.on_host_register;
		break;
	case GPU_HOST_FREE:
		*enter = skel->progs.on_host_free;
		break;
	case GPU_DEV_ALLOC:
	case GPU_DEV_ALLOC_PITCH:
		*enter = gpu_apis[api].class == GPU_DEV_ALLOC ? skel->progs.on_dev_alloc :
			 skel->progs.on_dev_alloc_pitch;
		*ret = skel->progs.on_dev_alloc_return;
		break;
	case GPU_DEV_FREE:
		*enter = skel->progs.on_dev_free;
		break;
	case NCCL_CALL:
		*enter = skel->progs.on_gpu_enter;
		*ret = skel->progs.on_gpu_return;
		*cookie = PP_COOKIE(api, gpu_apis[api].nccl_op) | PP_COOKIE_NCCL;
		break;
	case NCCL_COMM_INIT:
		*enter = skel->progs.on_nccl_comm_init;
		*ret = skel->progs.on_nccl_comm_init_return;
		*cookie = PP_COOKIE(api, gpu_apis[api].nccl_op);
		break;
	case NCCL_COMM_FREE:
		*enter = skel->progs.on_nccl_comm_free;
		break;
	}
	/* The driver's device-memory probes leave the runtime's nested calls to the runtime's. */
	if (gpu_apis[api].lib == LIB_CUDA &&
	    (gpu_apis[api].class == GPU_DEV_ALLOC || gpu_apis[api].class == GPU_DEV_ALLOC_PITCH ||
	     gpu_apis[api].class == GPU_DEV_FREE))
		*cookie |= PP_COOKIE_DRIVER;
}

static struct bpf_link *attach_one(struct bpf_program *prog, pid_t pid, const char *path,
				   uint64_t offset, __u64 cookie, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = ret);

	return bpf_program__attach_uprobe_opts(prog, pid, path, offset, &opts);
}

static bool is_libtorch_cpu(const char *path)
{
	const char *base = strrchr(path, '/');

	return !strncmp(base ? base + 1 : path, "libtorch_cpu.", 13);
}

/*
 * Where to open the very file the process maps. Through its own root, so libraries inside
 * containers resolve; through map_files when that path no longer leads to the mapped inode: a
 * library deleted or replaced on disk while mapped (an upgrade under a running job).
 */
void lib_open_path(pid_t pid, const struct mapped_lib *lib, char *path, size_t size)
{
	struct stat st;

	snprintf(path, size, PROCFS "/%d/root%s", pid, lib->path);
	if (!lib->deleted && !stat(path, &st) && st.st_ino == lib->inode)
		return;
	snprintf(path, size, PROCFS "/%d/map_files/%llx-%llx", pid,
		 (unsigned long long)lib->map_start, (unsigned long long)lib->map_end);
}

/* One perf-event uprobe per function and direction: kernels before multi-uprobe links (6.6). */
void tracer_attach_singly(struct uprobe_spec *specs, int n, pid_t pid, const char *path,
			  struct bpf_link **links, int *nr_links)
{
	for (int i = 0; i < n; i++) {
		struct uprobe_spec *sp = &specs[i];
		struct bpf_link *enter = NULL, *ret = NULL;

		/* Return probe first: a return whose entry was missed is harmless, an entry whose
		 * return is missed would leave the call open. */
		if (sp->ret)
			ret = attach_one((struct bpf_program *)sp->ret, pid, path, sp->offset,
					 sp->cookie, true);
		if (!sp->ret || ret)
			enter = attach_one((struct bpf_program *)sp->enter, pid, path, sp->offset,
					   sp->cookie, false);
		if (!enter || (sp->ret && !ret)) {
			sp->err = -errno;
			bpf_link__destroy(ret);
			continue;
		}
		sp->attached = true;
		links[(*nr_links)++] = enter;
		if (ret)
			links[(*nr_links)++] = ret;
	}
}

static int attach_lib(struct tracer *t, pid_t pid, const struct mapped_lib *lib, bool runtime_mapped)
{
	struct uprobe_spec specs[MAX_LIB_PROBES] = {}, main_specs[MAX_LIB_PROBES];
	int launch_idx[MAX_LIB_PROBES], nr_launch = 0, nr_main = 0;
	struct elf_func funcs[MAX_LIB_PROBES];
	int api_of[MAX_LIB_PROBES], n = 0, found;
	struct tracer_lib_attach *a;
	/* shown: the path as logged; its owner named it, and a terminal must not act on it */
	char path[PATH_MAX + 64], shown[SAN_TEXT_SIZE(sizeof(lib->path))];

	if (grow_array(&t->attached, &t->cap_attached, t->nr_attached, sizeof(*t->attached), 8))
		return -ENOMEM;
	a = &t->attached[t->nr_attached++];
	memset(a, 0, sizeof(*a));
	a->pid = pid;
	a->inode = lib->inode;
	a->dev_major = lib->dev_major;
	a->dev_minor = lib->dev_minor;
	a->result.pid = pid;
	a->result.kind = lib->kind;
	snprintf(a->result.path, sizeof(a->result.path), "%s", lib->path);
	a->result.deleted = lib->deleted;

	lib_open_path(pid, lib, path, sizeof(path));
	for (int i = 0; i < gpu_api_count && n < MAX_LIB_PROBES; i++) {
		if (!want_probe(t, &gpu_apis[i], lib->kind, runtime_mapped))
			continue;
		memset(&funcs[n], 0, sizeof(funcs[n]));
		funcs[n].name = gpu_apis[i].name;
		api_of[n++] = i;
	}
	if (t->step_file[0] ? lib_name_matches(lib->path, t->step_file) :
	    (t->steps || t->hist_kinds & 1u << PP_HK_STEP) && lib->kind == LIB_TORCH &&
	    is_libtorch_cpu(lib->path)) {
		memset(&funcs[n], 0, sizeof(funcs[n]));
		funcs[n].name = t->step_file[0] ? t->step_func : STEP_PROBE_SYMBOL;
		api_of[n++] = STEP_PROBE_ID;
	}
	if (!n)
		return 0;
	found = symcache_resolve(path, funcs, n);
	if (found < 0) {
		t->libs_unreadable++;
		snprintf(t->last_lib_error, sizeof(t->last_lib_error), "%.160s%s (pid %d, opened as %.80s): %s",
			 lib->path, lib->deleted ? " (deleted)" : "", pid, path, strerror(-found));
		if (t->verbose)
			fprintf(stderr, "pipeprof: cannot read %s\n",
				san_text(shown, sizeof(shown), t->last_lib_error, sizeof(t->last_lib_error)));
		return 0;
	}
	for (int i = 0; i < n; i++)
		if (!funcs[i].found && api_of[i] != STEP_PROBE_ID &&
		    gpu_apis[api_of[i]].class == NCCL_CALL)
			a->result.missing[a->result.nr_missing++] = funcs[i].name;
	for (int i = 0; i < n; i++) {
		struct bpf_program *enter_prog, *ret_prog;
		struct probe_result *p;
		__u64 cookie;

		if (!funcs[i].found)
			continue;
		probe_programs(t, api_of[i], &enter_prog, &ret_prog, &cookie);
		p = &a->result.probes[a->result.nr_probes];
		p->api = api_of[i] == STEP_PROBE_ID ? tracer_step_api(t) : funcs[i].name;
		p->value = funcs[i].value;
		p->offset = funcs[i].offset;
		/* endbr64 is single-stepped (~5 us a hit); the instruction after it is usually an
		 * emulated push. The return address is still on top of the stack there, so the
		 * uretprobe works from the same spot. */
		if (funcs[i].starts_with_endbr64 && funcs[i].size > 4) {
			p->offset += 4;
			p->skipped_endbr64 = true;
		}
		specs[a->result.nr_probes++] = (struct uprobe_spec){
			.enter = enter_prog, .ret = ret_prog, .offset = p->offset, .cookie = cookie,
		};
	}
	/* The launch probes apart, so that they can come off between bursts. */
	for (int i = 0; i < a->result.nr_probes; i++) {
		if (specs[i].enter == t->skel->progs.on_launch)
			launch_idx[nr_launch++] = i;
		else
			main_specs[nr_main++] = specs[i];
	}
	if (t->uprobe_multi)
		a->nr_fds = uprobe_multi_attach_all(main_specs, nr_main, pid, path, a->fds,
						    sizeof(a->fds) / sizeof(a->fds[0]));
	else
		tracer_attach_singly(main_specs, nr_main, pid, path, a->links, &a->nr_links);
	for (int i = 0, k = 0; i < a->result.nr_probes; i++)
		if (specs[i].enter != t->skel->progs.on_launch)
			specs[i] = main_specs[k++];
	if (nr_launch)
		tracer_launches_add(t, a, specs, launch_idx, nr_launch, path);
	for (int i = 0; i < a->result.nr_probes; i++) {
		struct probe_result *p = &a->result.probes[i];

		p->attached = specs[i].attached;
		p->err = specs[i].attached ? 0 : (specs[i].err ? specs[i].err : -EINVAL);
		if (!p->attached)
			t->probe_attach_failures++;
		if (t->verbose && !p->attached)
			fprintf(stderr, "pipeprof: cannot attach %s in %s (pid %d): %s\n", p->api,
				san_text(shown, sizeof(shown), lib->path, sizeof(lib->path)), pid,
				strerror(-p->err));
		else if (t->verbose)
			fprintf(stderr, "pipeprof: pid %d %s:%s value 0x%llx offset 0x%llx%s%s\n", pid,
				san_text(shown, sizeof(shown), lib->path, sizeof(lib->path)), p->api,
				(unsigned long long)p->value, (unsigned long long)p->offset,
				p->skipped_endbr64 ? " (after endbr64)" : "",
				t->uprobe_multi ? " (multi link)" : "");
	}
	return 0;
}

/*
 * Host memory the driver pinned before the attach (a DataLoader's pin_memory batches come from
 * PyTorch's caching host allocator, which pinned its blocks long before): known only from the
 * maps (procmaps_driver_pinned), taken as pinned in a process that maps the driver. A region
 * seen here is keyed by its mapping, so its later cudaFreeHost (keyed by the pointer) leaves
 * it: the driver keeps such regions cached for reuse anyway.
 */
static void seed_pinned(struct tracer *t, pid_t pid, struct pinned_ranges *pinned)
{
	int fd = bpf_map__fd(t->skel->maps.pinned_regions);

	for (int i = 0; i < pinned->nr; i++) {
		struct pp_pinned_key key = { .tgid = pid, .start = pinned->start[i] };
		__u64 end = pinned->end[i];

		if (!bpf_map_update_elem(fd, &key, &end, BPF_NOEXIST))
			t->pinned_seeded++;
		else if (errno != EEXIST)
			t->pinned_seed_lost++;
	}
	/* The copy probes look the regions up only once one is stored. */
	if (t->pinned_seeded)
		__atomic_store_n(&t->skel->bss->pinned_regions_stored, 1, __ATOMIC_RELAXED);
	if (pinned->truncated)
		t->pinned_seed_lost++;
	pinned->nr = 0;
}

/*
 * A rank traced alone whose environment names neither a rank nor a rendezvous (its launcher
 * passed both on its command line) is in a process group when it is connected to a sibling,
 * another child of its launcher. Not under init, where every process is a sibling.
 */
#define SIBLINGS_MAX 256
static bool connected_to_sibling(pid_t root)
{
	pid_t ppid = proc_ppid(PROCFS, root), pids[SIBLINGS_MAX + 1], ppids[SIBLINGS_MAX];
	bool joined[SIBLINGS_MAX + 1] = { false };
	int n, m = 1;

	if (ppid <= 1)
		return false;
	n = proc_descendants(PROCFS, ppid, pids + 1, ppids, SIBLINGS_MAX);
	for (int i = 0; i < n; i++)
		if (ppids[i] == ppid && pids[i + 1] != root)
			pids[m++] = pids[i + 1];
	pids[0] = root;
	return m > 1 && proc_joined_peers(PROCFS, root, pids, m, joined) > 0 && joined[0];
}

/* A target that is itself a rank is the trainer: its workers inherit its RANK. */
static void read_root_rank(struct tracer *t)
{
	char value[64];

	if (!t->root_rank_read) {
		t->root_rank = proc_env_rank(PROCFS, t->root);
		t->root_rank_read = true;
		/* A rank of mp.spawn names no rank but inherits its parent's rendezvous. */
		t->root_in_group |= t->root_rank >= 0 ||
				    !proc_env_value(PROCFS, t->root, "MASTER_ADDR", value, sizeof(value)) ||
				    !proc_env_value(PROCFS, t->root, "WORLD_SIZE", value, sizeof(value));
	}
}

static bool joined_group(const struct tracer *t, pid_t pid)
{
	for (int i = 0; i < t->nr_joined; i++)
		if (t->joined[i] == pid)
			return true;
	return false;
}

/*
 * Ranks that name no rank in their environment (mp.spawn, a hand-written launcher) are known
 * by what they do: they connect to one another to form their process group, which no
 * DataLoader worker does. Read at each full scan (the attach, and the safety scan, which
 * catches a rank that joined its group after the attach), and only while two processes under
 * the root are not in a rank yet. The host's TCP table may be long (tens of thousands of lines
 * on a server), so the same processes are looked at again only for JOINED_RECHECKS scans after
 * they changed: long enough for a rank started after the attach to import torch and join.
 */
#define JOINED_RECHECKS 6
static void find_joined(struct tracer *t)
{
	int fd = bpf_map__fd(t->skel->maps.tracked_procs), n = 0, cap = 0, marked;
	__u32 key, next, *prev = NULL;
	pid_t *pids = NULL, *grown;
	bool *joined = NULL;
	struct pp_proc proc;
	__u64 sig = 0;

	t->nr_joined = 0;
	if (t->root_rank >= 0)
		return;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &proc) || proc.exit_ns || proc.is_root ||
		    proc.rank_tgid)
			continue;
		if (grow_array(&pids, &cap, n, sizeof(*pids), 16))
			goto cleanup;
		pids[n++] = key;
	}
	for (int i = 0; i < n; i++)
		sig += (__u64)pids[i] * 0x9E3779B97F4A7C15ULL;	/* whatever the order */
	if (sig != t->joined_set_sig) {
		t->joined_set_sig = sig;
		t->joined_rechecks = JOINED_RECHECKS;
	}
	joined = calloc(n ? n : 1, sizeof(*joined));
	if (n < 2 || !joined || t->joined_rechecks <= 0)
		goto cleanup;
	t->joined_rechecks--;
	marked = proc_joined_peers(PROCFS, t->root, pids, n, joined);
	if (marked <= 0)
		goto cleanup;
	grown = realloc(t->joined, marked * sizeof(*t->joined));
	if (!grown)
		goto cleanup;
	t->joined = grown;
	for (int i = 0; i < n; i++)
		if (joined[i])
			t->joined[t->nr_joined++] = pids[i];
cleanup:
	free(joined);
	free(pids);
}

/*
 * A distributed job's ranks under the traced launcher: a process is a rank when its
 * environment names one, or it joined a process group (find_joined), and no process above it
 * (below the root) does; what runs under a rank is its own, which the fork program copies from
 * the parent. A rank exec'd after the attach is marked at its exec's note, its children still
 * to come; one that names no rank, at the full scan after it joined its group.
 */
void tracer_mark_rank(struct tracer *t, pid_t pid)
{
	int fd = bpf_map__fd(t->skel->maps.tracked_procs);
	struct pp_proc proc, up;
	__u32 rank = 0, cur = pid;

	read_root_rank(t);
	if (t->root_rank >= 0)
		return;
	if (bpf_map_lookup_elem(fd, &cur, &proc) || proc.is_root || proc.rank_tgid)
		return;
	/* The highest process of the branch, root excluded, that names a rank. */
	for (int depth = 0; depth < 32; depth++) {
		if (bpf_map_lookup_elem(fd, &cur, &up) || up.is_root)
			break;
		if (up.rank_tgid) {
			rank = up.rank_tgid;
			break;
		}
		if (proc_env_rank(PROCFS, cur) >= 0 || joined_group(t, cur))
			rank = cur;
		if (!up.parent_tgid)
			break;
		cur = up.parent_tgid;
	}
	if (!rank)
		return;
	proc.rank_tgid = rank;
	if (!bpf_map_update_elem(fd, &pid, &proc, BPF_EXIST)) {
		t->ranks_marked++;
		/* sched_waking reads a rank's record. */
		tracer_mark_pid(t, pid, pp_pid_kind(&proc));
	}
}

int tracer_refresh_pid(struct tracer *t, pid_t pid)
{
	unsigned int mask = 1u << LIB_CUDART | 1u << LIB_CUDA | 1u << LIB_NCCL | 1u << LIB_LOADER |
			    (t->hist_kinds & 1u << PP_HK_STEP || t->steps ? 1u << LIB_TORCH : 0) |
			    (t->python_gc || t->sample_hz ? 1u << LIB_PYTHON : 0);
	struct mapped_lib libs[16];
	struct pinned_ranges pinned = { 0 };
	bool runtime_mapped = false;
	int n, err;

	tracer_mark_rank(t, pid);
	/* --step-symbol's file, whatever its kind: files of no kind only by that name. */
	if (t->step_file[0])
		mask |= 1u << lib_kind_of_path(t->step_file);
	n = procmaps_find_libs_pinned(pid, mask, t->step_file[0] ? t->step_file : NULL, libs, 16,
				      t->steps ? &pinned : NULL);
	for (int i = 0; i < n; i++) {
		struct pp_text_range rt = { libs[i].span_start, libs[i].span_end };

		if (libs[i].kind == LIB_CUDA)
			seed_pinned(t, pid, &pinned);
		if (libs[i].kind != LIB_CUDART)
			continue;
		runtime_mapped = true;
		/* Before any probe on its driver: a launch the runtime makes there is its own.
		 * The first runtime mapped is the one; two in one process is not a real setup. */
		if (t->steps || t->hist_kinds & 1u << PP_HK_LAUNCH)
			bpf_map_update_elem(bpf_map__fd(t->skel->maps.runtime_text), &pid, &rt,
					    BPF_NOEXIST);
	}
	for (int i = 0; i < n; i++) {
		bool step_file = t->step_file[0] && lib_name_matches(libs[i].path, t->step_file);

		if (libs[i].kind == LIB_LOADER) {
			tracer_attach_loader(t, pid, &libs[i]);
			if (!step_file)
				continue;
		}
		if (libs[i].kind == LIB_PYTHON) {
			if (t->python_gc)
				tracer_attach_python(t, pid, &libs[i]);
			tracer_sampler_add_process(t, pid, &libs[i]);
			if (!step_file)
				continue;
		}
		if (find_attached(t, pid, &libs[i]))
			continue;
		err = attach_lib(t, pid, &libs[i], runtime_mapped);
		if (err)
			return err;
	}
	return 0;
}

int tracer_refresh(struct tracer *t)
{
	int fd = bpf_map__fd(t->skel->maps.tracked_procs), err;
	__u32 key, next, *prev = NULL;
	struct pp_proc proc;

	t->full_scans++;
	read_root_rank(t);
	find_joined(t);
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &proc) || proc.exit_ns)
			continue;
		err = tracer_refresh_pid(t, key);
		if (err)
			return err;
	}
	/* A rank started with neither in its environment joins its group after the attach, if
	 * not before: looked for at the attach and the scans of the next half minute. */
	if (!t->root_in_group && !t->ranks_marked && t->sibling_checks < JOINED_RECHECKS) {
		t->sibling_checks++;
		t->root_in_group = connected_to_sibling(t->root);
	}
	/* Until then, what the network delivers is data (a streaming dataset), not a collective's
	 * message: a job of one trainer that names no rendezvous has no peer to wait for. */
	t->skel->bss->job_is_distributed = t->root_in_group || t->ranks_marked > 0;
	return 0;
}

bool tracer_gpu_mapped(struct tracer *t)
{
	if (t->libs_unreadable > 0)
		return true;
	for (int i = 0; i < t->nr_attached; i++)
		if (t->attached[i].result.kind == LIB_CUDART || t->attached[i].result.kind == LIB_CUDA)
			return true;
	return false;
}

bool tracer_gpu_unprobed(struct tracer *t)
{
	bool mapped = t->libs_unreadable > 0;

	for (int i = 0; i < t->nr_attached; i++) {
		const struct tracer_lib_attach *a = &t->attached[i];

		if (a->result.kind != LIB_CUDART && a->result.kind != LIB_CUDA)
			continue;
		if (a->nr_links + a->nr_fds || a->launch)
			return false;
		mapped = true;
	}
	return mapped;
}

const char *tracer_gpu_why_not(struct tracer *t, char *buf, size_t size)
{
	int libs = 0;

	for (int i = 0; i < t->nr_attached; i++)
		libs += t->attached[i].result.kind == LIB_CUDART || t->attached[i].result.kind == LIB_CUDA;
	/* An unreadable library is named first: it is the one a user can do something about. */
	if (t->libs_unreadable)
		snprintf(buf, size, "a GPU library is mapped but cannot be read, so it is not probed: %s",
			 t->last_lib_error);
	else if (libs && t->probe_attach_failures)
		snprintf(buf, size, "libcudart/libcuda are mapped but none of their synchronising "
			 "functions could be probed (%d attach failures; -v names them)",
			 t->probe_attach_failures);
	else if (libs)
		snprintf(buf, size, "libcudart/libcuda are mapped but none of the synchronising "
			 "functions pipeprof knows is in their symbol tables");
	else
		snprintf(buf, size, "no libcudart or libcuda is mapped by the traced processes (a "
			 "CPU-only job, or CUDA not loaded yet)");
	return buf;
}

const char *tracer_step_api(const struct tracer *t)
{
	return t->step_file[0] ? t->step_func : TRACER_STEP_PROBE;
}

bool tracer_probed(struct tracer *t, const char *api)
{
	for (int i = 0; i < t->nr_attached; i++)
		for (int k = 0; k < t->attached[i].result.nr_probes; k++) {
			const struct probe_result *p = &t->attached[i].result.probes[k];

			if (p->attached && (!api || !strcmp(p->api, api)))
				return true;
		}
	return false;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The report's per-step GPU API counts: syncs by API and copies by direction per thread
 * (thread_gpu), and the host memory the job pins, so a copy from it can be told from one out
 * of pageable memory, which the driver must first stage through a pinned buffer of its own.
 */
#include "pipeprof.bpf.h"

/*
 * Whether a driver call entered with stack pointer sp was made by the process's CUDA runtime:
 * the return address on top of the stack (the probe sits at the entry, or just after an
 * endbr64) lies in the runtime's mappings. The runtime reaching its driver twin is one call,
 * counted at the runtime's entry; and an entry probe has no return to tell nesting by.
 */
__noinline int called_from_runtime(__u32 tgid, __u64 sp)
{
	__u64 ret;

	if (bpf_probe_read_user(&ret, sizeof(ret), (void *)sp))
		return 0;
	return in_runtime(tgid, ret);
}

/* Whether addr lies in the process's CUDA runtime. A driver call's return probe sees its
 * return address as the instruction pointer: from the runtime, the call was the runtime's. */
__noinline int in_runtime(__u32 tgid, __u64 addr)
{
	struct pp_text_range *rt = bpf_map_lookup_elem(&runtime_text, &tgid);

	return rt && addr >= rt->start && addr < rt->end;
}

struct pinned_find {
	__u32 tgid;
	__u32 found;
	__u64 addr;
};

static long pinned_match(struct bpf_map *map, struct pp_pinned_key *k, __u64 *end,
			 struct pinned_find *f)
{
	if (k->tgid != f->tgid || f->addr < k->start || f->addr >= *end)
		return 0;
	f->found = 1;
	return 1;
}

/* A pinned buffer is usually copied from its start (a pinned tensor's storage); a slice of one
 * from inside, found by walking the job's few regions. */
static __always_inline bool pinned_host(__u32 tgid, __u64 addr)
{
	struct pp_pinned_key key = { .tgid = tgid, .start = addr };
	struct pinned_find f = { .tgid = tgid, .addr = addr };

	/* The walk visits every bucket of the map, full or empty: 1.8 us a copy on the VM, for a
	 * job that pinned nothing (tools/bench/prog_cost.py, -p memcpy). */
	if (!pinned_regions_stored)
		return false;
	if (bpf_map_lookup_elem(&pinned_regions, &key))
		return true;
	bpf_for_each_map_elem(&pinned_regions, pinned_match, &f, 0);
	return f.found;
}

/* One copy by thread tid; host is its host-side address (H2D source, D2H destination), 0 when
 * the direction has none. Only the thread itself writes its counts. */
__noinline int count_copy(__u32 tid, __u32 tgid, __u32 dir, __u64 bytes, __u64 host)
{
	struct pp_thread_gpu *g = thread_gpu_of(tid);

	/* Checked here, next to the use, and kept in the register checked: clang otherwise
	 * indexes with an unbounded copy of it. */
	asm volatile("" : "+r"(dir));
	if (!g || dir >= PP_NR_COPY_DIRS)
		return 0;
	g->copies.calls[dir]++;
	g->copies.bytes[dir] += bytes;
	if (host && pinned_host(tgid, host)) {
		g->copies.pinned_calls[dir]++;
		g->copies.pinned_bytes[dir] += bytes;
	}
	return 0;
}

/* A synchronising call returned: api is its outermost call's id. */
__noinline int count_sync(__u32 tid, __u32 api)
{
	struct pp_thread_gpu *g = thread_gpu_of(tid);

	asm volatile("" : "+r"(api));	/* as in count_copy() */
	if (g && api < PP_MAX_SYNC_APIS)
		g->sync_calls[api]++;
	return 0;
}

/* An NCCL call returned (nccl.bpf.c): its bytes, 0 when unknown. */
__noinline int count_nccl(__u32 tid, __u32 op, __u64 bytes)
{
	struct pp_thread_gpu *g = thread_gpu_of(tid);

	asm volatile("" : "+r"(op));	/* as in count_copy() */
	if (g && op < PP_NR_NCCL_CALLS) {
		g->nccl.calls[op]++;
		g->nccl.bytes += bytes;
	}
	return 0;
}

static __always_inline void pin_region(__u32 tgid, __u64 start, __u64 bytes)
{
	struct pp_pinned_key key = { .tgid = tgid, .start = start };
	__u64 end = start + bytes;

	if (!start || !bytes)
		return;
	if (bpf_map_update_elem(&pinned_regions, &key, &end, BPF_ANY))
		count(PP_CNT_PINNED_FULL);
	else if (!pinned_regions_stored)
		pinned_regions_stored = 1;
}

/*
 * Pinned host memory is followed from attach on, window open or not: a region allocated while
 * pipeprof attaches is used in the window. cudaHostAlloc, cudaMallocHost, cuMemHostAlloc and
 * cuMemAllocHost(_v2) all take (where to store the pointer, bytes): the pointer is read at the
 * return. A runtime call nested over its driver twin stores the same region twice, harmlessly.
 */
SEC("uprobe")
int BPF_KPROBE(on_host_alloc, void **out, __u64 bytes)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct pp_thread_gpu *g;

	if (!pid_tracked(id >> 32))
		return 0;
	g = thread_gpu_of((__u32)id);
	if (!g)
		return 0;
	g->alloc_out = (__u64)out;
	g->alloc_bytes = bytes;
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(on_host_alloc_return, long err)
{
	__u64 id = bpf_get_current_pid_tgid(), start = 0;
	__u32 tid = (__u32)id;
	struct pp_thread_gpu *g = bpf_map_lookup_elem(&thread_gpu, &tid);
	__u64 out;

	if (!g || !g->alloc_out)
		return 0;
	out = g->alloc_out;
	g->alloc_out = 0;
	if ((int)err || bpf_probe_read_user(&start, sizeof(start), (void *)out))
		return 0;
	pin_region(id >> 32, start, g->alloc_bytes);
	return 0;
}

/* cudaHostRegister(ptr, bytes, flags), cuMemHostRegister(_v2): the range is known at entry. */
SEC("uprobe")
int BPF_KPROBE(on_host_register, void *ptr, __u64 bytes)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (pid_tracked(tgid))
		pin_region(tgid, (__u64)ptr, bytes);
	return 0;
}

/* cudaFreeHost, cudaHostUnregister, cuMemFreeHost, cuMemHostUnregister: (ptr). */
SEC("uprobe")
int BPF_KPROBE(on_host_free, void *ptr)
{
	struct pp_pinned_key key = { .tgid = bpf_get_current_pid_tgid() >> 32,
				     .start = (__u64)ptr };

	bpf_map_delete_elem(&pinned_regions, &key);
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Device memory for the report's steps: allocations through cudaMalloc* / cuMemAlloc* and
 * frees through cudaFree* / cuMemFree*, as a hash of live allocations per process and each
 * process's outstanding bytes. A step record copies its process's outstanding bytes, so growth
 * across steps is read from the records. PyTorch's caching allocator keeps freed blocks for
 * reuse and calls cudaMalloc only for new segments: what these probes see is its segments.
 *
 * A runtime call reaches its driver twin (cudaMalloc -> cuMemAlloc_v2): the driver's probes
 * leave a call made from inside the runtime to the runtime's, at entry by the return address
 * on the stack and at return by the address returned to.
 */
#include "pipeprof.bpf.h"

/* Nothing is recorded after the window closed: the report reads the records then. Before it
 * opens (while attaching), allocations are followed but not counted as the window's. */
static __always_inline bool devmem_open(__u64 now)
{
	return !window_end_ns || now <= window_end_ns;
}

/* The window's part of a process's record, set up at its first event in the window: what was
 * outstanding until then is what was outstanding as the window opened. */
static __always_inline bool in_window(struct pp_dev_mem *m, __u64 now)
{
	if (!accounting(now))
		return false;
	if (!m->window_seen) {
		m->window_start = m->outstanding;
		m->window_peak = m->outstanding;
		m->window_seen = 1;
	}
	return true;
}

static __always_inline struct pp_dev_mem *dev_mem_of(__u32 tgid)
{
	return map_lookup_or_init(&dev_mem, &tgid, &zero_dev_mem, PP_CNT_DEV_ALLOCS_FULL);
}

/* An allocation of bytes at ptr returned to thread tid. Global: verified once for every
 * return probe that calls it. */
__noinline int dev_alloc_done(__u32 tgid, __u32 tid, __u64 ptr, __u64 bytes)
{
	struct pp_dev_alloc_key key = { .tgid = tgid, .ptr = ptr };
	struct pp_thread_gpu *g = bpf_map_lookup_elem(&thread_gpu, &tid);
	__u64 now = bpf_ktime_get_ns(), *old;
	struct pp_dev_mem *m;
	__s64 delta = bytes;
	bool window;

	if (!ptr || !bytes || !devmem_open(now))
		return 0;
	/* The call counts in the thread's steps whether or not its memory can be followed. */
	if (g) {
		g->dev.allocs++;
		g->dev.alloc_bytes += bytes;
	}
	m = dev_mem_of(tgid);
	if (!m)
		return 0;
	/* An address handed out again whose free was not seen: the old block is gone. */
	old = bpf_map_lookup_elem(&dev_allocs, &key);
	if (old)
		delta -= *old;
	if (bpf_map_update_elem(&dev_allocs, &key, &bytes, BPF_ANY)) {
		count(PP_CNT_DEV_ALLOCS_FULL);
		return 0;
	}
	window = in_window(m, now);
	__sync_fetch_and_add(&m->outstanding, delta);
	if (!window)
		return 0;
	__sync_fetch_and_add(&m->window.allocs, 1);
	__sync_fetch_and_add(&m->window.alloc_bytes, bytes);
	/* Racy against another thread of the process allocating at once: a peak may be missed
	 * by one allocation, never invented. */
	if (m->outstanding > m->window_peak)
		m->window_peak = m->outstanding;
	return 0;
}

/* A free of ptr by thread tid: every call counts in its steps, the bytes only where the
 * allocation was seen. */
__noinline int dev_free_done(__u32 tgid, __u32 tid, __u64 ptr)
{
	struct pp_dev_alloc_key key = { .tgid = tgid, .ptr = ptr };
	struct pp_thread_gpu *g = thread_gpu_of(tid);
	__u64 now = bpf_ktime_get_ns(), *size, bytes;
	struct pp_dev_mem *m;
	bool window;

	if (!ptr || !devmem_open(now))
		return 0;
	if (g)
		g->dev.frees++;
	m = bpf_map_lookup_elem(&dev_mem, &tgid);
	size = bpf_map_lookup_elem(&dev_allocs, &key);
	if (!size) {
		if (m && in_window(m, now))
			__sync_fetch_and_add(&m->frees_unseen, 1);
		return 0;
	}
	bytes = *size;
	bpf_map_delete_elem(&dev_allocs, &key);
	if (g)
		g->dev.free_bytes += bytes;
	if (!m)
		return 0;
	window = in_window(m, now);
	__sync_fetch_and_add(&m->outstanding, -(__s64)bytes);
	if (window) {
		__sync_fetch_and_add(&m->window.frees, 1);
		__sync_fetch_and_add(&m->window.free_bytes, bytes);
	}
	return 0;
}

/* A driver call made from inside the runtime, seen at its entry: the runtime's own. */
static __always_inline bool runtime_nested(struct pt_regs *ctx, __u32 tgid)
{
	return (bpf_get_attach_cookie(ctx) & PP_COOKIE_DRIVER) &&
	       called_from_runtime(tgid, PT_REGS_SP(ctx));
}

static __always_inline int alloc_enter(struct pt_regs *ctx, __u64 out, __u64 bytes, __u64 pitch_out)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct pp_thread_gpu *g;

	if (!pid_tracked(id >> 32) || runtime_nested(ctx, id >> 32))
		return 0;
	g = thread_gpu_of((__u32)id);
	if (!g)
		return 0;
	g->dev_out = out;
	g->dev_bytes = bytes;
	g->dev_pitch_out = pitch_out;
	return 0;
}

/*
 * cudaMalloc, cudaMallocAsync, cudaMallocFromPoolAsync, cudaMallocManaged and the driver's
 * cuMemAlloc_v2, cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemAllocManaged all take (where
 * to store the pointer, bytes, ...): the size is known here, the pointer at the return.
 */
SEC("uprobe")
int BPF_KPROBE(on_dev_alloc, void **out, __u64 bytes)
{
	return alloc_enter(ctx, (__u64)out, bytes, 0);
}

/* cudaMallocPitch(out, &pitch, width, height), cuMemAllocPitch_v2(out, &pitch, width, height,
 * element size): the size is the pitch the call picks times the rows. */
SEC("uprobe")
int BPF_KPROBE(on_dev_alloc_pitch, void **out, __u64 *pitch, __u64 width, __u64 height)
{
	return alloc_enter(ctx, (__u64)out, height, (__u64)pitch);
}

SEC("uretprobe")
int BPF_KRETPROBE(on_dev_alloc_return, long err)
{
	__u64 id = bpf_get_current_pid_tgid(), ptr = 0, pitch = 0, out, bytes, pitch_out;
	__u32 tid = (__u32)id, tgid = id >> 32;
	struct pp_thread_gpu *g;

	if ((bpf_get_attach_cookie(ctx) & PP_COOKIE_DRIVER) && in_runtime(tgid, PT_REGS_IP(ctx)))
		return 0;
	g = bpf_map_lookup_elem(&thread_gpu, &tid);
	if (!g || !g->dev_out)
		return 0;
	out = g->dev_out;
	bytes = g->dev_bytes;
	pitch_out = g->dev_pitch_out;
	g->dev_out = 0;
	/* Both APIs return 0 for success. */
	if ((int)err || bpf_probe_read_user(&ptr, sizeof(ptr), (void *)out))
		return 0;
	if (pitch_out) {
		if (bpf_probe_read_user(&pitch, sizeof(pitch), (void *)pitch_out))
			return 0;
		bytes *= pitch;
	}
	dev_alloc_done(tgid, tid, ptr, bytes);
	return 0;
}

/* cudaFree, cudaFreeAsync, cuMemFree_v2, cuMemFreeAsync: (pointer, ...). */
SEC("uprobe")
int BPF_KPROBE(on_dev_free, void *ptr)
{
	__u64 id = bpf_get_current_pid_tgid();

	if (!pid_tracked(id >> 32) || runtime_nested(ctx, id >> 32))
		return 0;
	dev_free_done(id >> 32, (__u32)id, (__u64)ptr);
	return 0;
}

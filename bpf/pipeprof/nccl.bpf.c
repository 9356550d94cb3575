// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Uprobes on libnccl: its collectives, point-to-point and group calls block the rank's host
 * thread (COMM_WAIT, blocking.bpf.h), on the GPU syncs' programs (gpu.bpf.c), and move bytes;
 * its communicator calls tell how many ranks a communicator has, which an AllGather's bytes
 * received need. The attach cookie holds the API's id in userspace's table and its enum
 * pp_nccl_op (PP_COOKIE).
 */
#include "pipeprof.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PP_NR_NCCL_CALLS);
	__type(key, __u32);
	__type(value, struct pp_nccl_stats);
} nccl_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_NCCL_MAX_COMMS);
	__type(key, struct pp_nccl_comm_key);
	__type(value, __u64);
} nccl_comms SEC(".maps");

/* ncclDataType_t's size, nccl.h's values: Int8 0, Uint8 1, Int32 2, Uint32 3, Int64 4,
 * Uint64 5, Float16 6, Float32 7, Float64 8, Bfloat16 9, Float8e4m3 10, Float8e5m2 11. */
static __always_inline __u64 nccl_type_size(__u64 type)
{
	switch (type) {
	case 0: case 1: case 10: case 11:
		return 1;
	case 6: case 9:
		return 2;
	case 2: case 3: case 7:
		return 4;
	case 4: case 5: case 8:
		return 8;
	}
	return 0;
}

static __always_inline __u64 nccl_comm_ranks(__u32 tgid, __u64 comm)
{
	struct pp_nccl_comm_key key = { .tgid = tgid, .comm = comm };
	__u64 *ranks = bpf_map_lookup_elem(&nccl_comms, &key);

	return ranks ? *ranks : 0;
}

/* The bytes a call moves, from its arguments (enum pp_nccl_op's layouts). */
static __always_inline __u64 nccl_call_bytes(struct pt_regs *ctx, __u32 op, __u32 tgid)
{
	__u64 count, size, ranks;

	switch (op) {
	case PP_NCCL_ALL_REDUCE:
	case PP_NCCL_REDUCE_SCATTER:
	case PP_NCCL_BROADCAST:
	case PP_NCCL_REDUCE:
		count = PT_REGS_PARM3(ctx);
		size = nccl_type_size(PT_REGS_PARM4(ctx));
		break;
	case PP_NCCL_ALL_GATHER:
		ranks = nccl_comm_ranks(tgid, PT_REGS_PARM5(ctx));
		if (!ranks)
			return PP_NCCL_UNSIZED;
		count = PT_REGS_PARM3(ctx) * ranks;
		size = nccl_type_size(PT_REGS_PARM4(ctx));
		break;
	case PP_NCCL_SEND:
	case PP_NCCL_RECV:
		count = PT_REGS_PARM2(ctx);
		size = nccl_type_size(PT_REGS_PARM3(ctx));
		break;
	default:
		return 0;
	}
	return size ? count * size : PP_NCCL_UNSIZED;
}

/* An NCCL call's entry, where it is the thread's outermost blocking call (on_gpu_enter):
 * its op and the bytes it moves. Global, like the return's, so the verifier checks it once. */
__noinline int nccl_call_entered(struct pt_regs *ctx, __u32 tid, __u32 op)
{
	struct pp_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (!ctx || !t)
		return 0;
	t->nccl_op = op;
	t->nccl_bytes = nccl_call_bytes(ctx, op, t->tgid);
	return 0;
}

/* Its return (on_gpu_return), took after its entry: the op's calls, bytes and time. */
__noinline int nccl_call_returned(__u32 tid, __u64 took)
{
	struct pp_thread *t = bpf_map_lookup_elem(&threads, &tid);
	struct pp_nccl_stats *stats;
	__u64 bytes;
	__u32 op;

	if (!t)
		return 0;
	op = t->nccl_op;
	bytes = t->nccl_bytes;
	stats = bpf_map_lookup_elem(&nccl_stats, &op);
	if (!stats)
		return 0;
	__sync_fetch_and_add(&stats->calls, 1);
	if (bytes == PP_NCCL_UNSIZED)
		__sync_fetch_and_add(&stats->unsized, 1);
	else
		__sync_fetch_and_add(&stats->bytes, bytes);
	__sync_fetch_and_add(&stats->total_ns, took);
	/* Two CPUs racing here may keep the smaller: a bound, never a made-up value. */
	if (took > stats->max_ns)
		stats->max_ns = took;
	hist_add(stats->slots, took / 1000);
	if (step_records_on)
		count_nccl(tid, op, bytes == PP_NCCL_UNSIZED ? 0 : bytes);
	return 0;
}

/* ncclCommInitRank(Config)(comm *out, nranks, ...), ncclCommInitAll(comm *out, ndev, ...):
 * the handles are known at the return. Not a window matter: a communicator made before the
 * window opens is used inside it. */
SEC("uprobe")
int BPF_KPROBE(on_nccl_comm_init, void *out, int nranks)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pp_thread *t;

	/* Once a start is set, a thread userspace has not seeded yet gets its record here, as at
	 * its first event: a communicator made then, inside the window, is used inside it. */
	if (window_start_ns)
		t = thread_of((struct task_struct *)bpf_get_current_task_btf());
	else
		t = bpf_map_lookup_elem(&threads, &tid);
	if (!t)
		return 0;
	t->nccl_comm_out = (__u64)out;
	t->nccl_comm_ranks = nranks > 0 ? nranks : 0;
	return 0;
}

#define NCCL_INIT_ALL_MAX 16	/* handles read from ncclCommInitAll's array */

SEC("uretprobe")
int BPF_KRETPROBE(on_nccl_comm_init_return, long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), n;
	struct pp_thread *t = bpf_map_lookup_elem(&threads, &tid);
	struct pp_nccl_comm_key key = {};
	__u64 ranks, out;

	if (!t || !t->nccl_comm_out)
		return 0;
	out = t->nccl_comm_out;
	ranks = t->nccl_comm_ranks;
	t->nccl_comm_out = 0;
	if ((int)ret != 0 || !ranks)	/* ncclSuccess */
		return 0;
	key.tgid = t->tgid;
	/* InitAll fills one handle per device, each a communicator of ndev ranks. */
	n = PP_COOKIE_DIR(bpf_get_attach_cookie(ctx)) == PP_NCCL_COMM_INIT_ALL ? ranks : 1;
	for (__u32 i = 0; i < NCCL_INIT_ALL_MAX && i < n; i++) {
		if (bpf_probe_read_user(&key.comm, sizeof(key.comm), (void *)(out + i * 8)) ||
		    !key.comm)
			break;
		bpf_map_update_elem(&nccl_comms, &key, &ranks, BPF_ANY);
	}
	return 0;
}

/* ncclCommDestroy / ncclCommAbort (comm): its handle may be reused by the next one. */
SEC("uprobe")
int BPF_KPROBE(on_nccl_comm_free, void *comm)
{
	struct pp_nccl_comm_key key = {
		.tgid = (__u32)(bpf_get_current_pid_tgid() >> 32), .comm = (__u64)comm,
	};

	bpf_map_delete_elem(&nccl_comms, &key);
	return 0;
}

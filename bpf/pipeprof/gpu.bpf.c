// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Uprobes on the GPU libraries and libtorch: synchronising calls (GPU_WAIT), and for `hist`
 * and the report's steps kernel launches, host/device copies and training steps. */
#include "pipeprof.bpf.h"
#include "blocking.bpf.h"

/*
 * 1 when this call is the thread's outermost one; 0 for a nested call or no thread. Global,
 * so the verifier walks it once with the API and state unknown, rather than once for each
 * constant state its caller passes and each state index it computes (~1,200 of the ~4,000
 * instructions it processed in on_gpu_enter); a BPF call more on a uprobe's microseconds.
 */
__noinline int blocking_call_enter(struct pt_regs *ctx, __u32 api, __u32 state)
{
	__u64 now = 0;
	struct task_struct *task;
	struct pp_thread *t;
	int outer = 0;

	if (!window_open()) {
		now = bpf_ktime_get_ns();
		if (!accounting(now))
			return 0;
	}
	task = (struct task_struct *)bpf_get_current_task_btf();
	t = thread_of(task);
	if (!t || t->phase == PP_PHASE_EXITED)
		return 0;
	count(PP_CNT_UPROBE_HITS);
	/* A nested call (the driver's twin inside the runtime's sync) reads no clock, nor does its
	 * return: half of a sync's four probe hits, which took on_gpu_enter from 81 to 67 ns a run
	 * and on_gpu_return from 85 to 72 on the VM (tools/bench/prog_cost.py, -p sync). */
	if (t->gpu_depth && nested_call(t->gpu_enter_sp, PT_REGS_SP(ctx)))
		goto deeper;
	if (!now)
		now = bpf_ktime_get_ns();
	if (t->gpu_depth) {
		/* The call in progress never returned (longjmp, or its return probe attached
		 * after it began): its wait ended when this call began. */
		count(PP_CNT_UNRETURNED_CALLS);
		add_state(t, task->pid, pp_call_state(t->call_state), t->phase_start_ns, now);
		t->phase_start_ns = now;
		t->gpu_depth = 0;
	}
	/* The thread's outermost call. */
	seen_on_cpu(t, (__u32)bpf_get_current_pid_tgid(), now);
	account_oncpu(t, task->pid, now);
	t->phase = PP_PHASE_ONCPU;
	t->phase_start_ns = now;
	t->gpu_enter_ns = now;
	t->gpu_enter_sp = PT_REGS_SP(ctx);
	t->gpu_api = api;
	t->call_state = state;
	/* Synchronising calls only: the trainer's choice, the sync advice and the launch gaps
	 * count them. */
	if (state == PP_GPU_WAIT)
		t->gpu_calls++;
	outer = 1;
deeper:
	if (t->gpu_depth < PP_MAX_GPU_DEPTH)
		t->gpu_depth++;
	else
		count(PP_CNT_GPU_DEPTH_OVERFLOW);
	return outer;
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);	/* sized by userspace */
} step_records SEC(".maps");

/* A step boundary of tid at now, with its state time and GPU counts so far. Global: the
 * scheduler's programs send the data-wait boundaries (sched.bpf.c). */
__noinline int record_step(struct pp_thread *t, __u32 tid, __u64 now, __u32 source)
{
	struct pp_step_record *r;
	struct pp_thread_gpu *g;
	struct pp_dev_mem *m;

	if (!t)
		return 0;
	r = bpf_ringbuf_reserve(&step_records, sizeof(*r), 0);
	if (!r) {
		count(PP_CNT_STEP_RECORDS_LOST);
		return 0;
	}
	r->source = source;
	r->tid = tid;
	r->tgid = t->tgid;
	r->ts = now;
	r->phase = t->phase;
	r->gpu_depth = t->gpu_depth;
	r->call_state = t->call_state;
	r->launch_epoch = launch_epoch;
	r->seq = source == PP_STEP_FROM_PROBE ? t->step_seq : 0;
	r->phase_start_ns = t->phase_start_ns;
	__builtin_memcpy(r->ns, t->ns, sizeof(r->ns));
	r->launches = t->launches;
	r->launch_gap_ns = t->launch_gap_ns;
	r->launch_gaps = t->launch_gaps;
	g = bpf_map_lookup_elem(&thread_gpu, &tid);
	if (g) {
		__builtin_memcpy(&r->copies, &g->copies, sizeof(r->copies));
		__builtin_memcpy(r->sync_calls, g->sync_calls, sizeof(r->sync_calls));
		__builtin_memcpy(&r->nccl, &g->nccl, sizeof(r->nccl));
		__builtin_memcpy(&r->dev, &g->dev, sizeof(r->dev));
	} else {
		__builtin_memset(&r->copies, 0, sizeof(r->copies));
		__builtin_memset(r->sync_calls, 0, sizeof(r->sync_calls));
		__builtin_memset(&r->nccl, 0, sizeof(r->nccl));
		__builtin_memset(&r->dev, 0, sizeof(r->dev));
	}
	m = bpf_map_lookup_elem(&dev_mem, &t->tgid);
	r->dev_outstanding = m ? m->outstanding : 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 1;
}

/*
 * Training steps (hist step, the report's steps): one autograd backward pass per step; the
 * time between the starts of consecutive outermost passes of a thread is its step time. On the
 * blocking calls' programs (cookie PP_COOKIE_STEP): a program pair of their own had the
 * verifier walk switch_in(), record_step() and what they call once more, ~2,000 instructions
 * of every attach. step_probe_on (rodata) prunes it where no step probe is attached.
 */
static __always_inline void step_enter(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns(), last;
	struct pp_thread *t = caller_thread(now);

	if (!t)
		return;
	if (t->step_depth && !nested_call(t->step_enter_sp, PT_REGS_SP(ctx))) {
		count(PP_CNT_UNRETURNED_CALLS);
		t->step_depth = 0;
	}
	if (t->step_depth) {
		/* Saturates: a spurious boundary rather than a wrap to 0 at depth 256. */
		if (t->step_depth < 255)
			t->step_depth++;
		return;
	}
	t->step_depth = 1;
	t->step_seq++;
	t->step_enter_sp = PT_REGS_SP(ctx);
	last = t->last_step_ns;
	t->last_step_ns = now;
	if (last)
		hist_time(PP_HK_STEP, 0, tid, t->tgid, now - last);
	if (step_records_on) {
		seen_on_cpu(t, tid, now);
		record_step(t, tid, now, PP_STEP_FROM_PROBE);
	}
}

static __always_inline void step_return(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pp_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (t && t->step_depth)
		t->step_depth--;
}

/*
 * The blocking calls' uprobes: GPU syncs (GPU_WAIT), NCCL's calls (COMM_WAIT, nccl.bpf.c) and
 * the training step's backward pass, in one program pair, as the verifier's pass over what they
 * share is most of what a program costs at attach (~3 ms each). The attach cookie is the API's
 * id in userspace's table, for NCCL PP_COOKIE_NCCL and the op (PP_COOKIE), for the step
 * PP_COOKIE_STEP.
 */
SEC("uprobe")
int BPF_KPROBE(on_gpu_enter)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	bool nccl = cookie & PP_COOKIE_NCCL;

	if (cookie == PP_SELFTEST_API) {
		count(PP_CNT_SELFTEST_HITS);
		return 0;
	}
	if (step_probe_on && (cookie & PP_COOKIE_STEP)) {
		step_enter(ctx);
		return 0;
	}
	if (blocking_call_enter(ctx, PP_COOKIE_API(cookie), nccl ? PP_COMM_WAIT : PP_GPU_WAIT) &&
	    nccl)
		nccl_call_entered(ctx, (__u32)bpf_get_current_pid_tgid(), PP_COOKIE_DIR(cookie));
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(on_gpu_return)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), api = cookie;
	struct pp_gpu_api_stats *stats;
	struct pp_thread *t;
	__u64 took;

	if (cookie == PP_SELFTEST_API) {
		count(PP_CNT_SELFTEST_HITS);
		return 0;
	}
	if (step_probe_on && (cookie & PP_COOKIE_STEP)) {
		step_return();
		return 0;
	}
	t = blocking_call_return(tid, &took);
	if (!t)
		return 0;
	api = t->gpu_api;
	/* The outermost call's: a sync nested in an NCCL call is the collective's time, and an
	 * NCCL call nested in a sync the sync's. */
	if (pp_call_state(t->call_state) == PP_COMM_WAIT) {
		nccl_call_returned(tid, took);
		return 0;
	}
	if (pp_call_state(t->call_state) != PP_GPU_WAIT)
		return 0;
	stats = bpf_map_lookup_elem(&gpu_api_stats, &api);
	if (stats) {
		__sync_fetch_and_add(&stats->calls, 1);
		__sync_fetch_and_add(&stats->total_ns, took);
		/* Two CPUs racing here may keep the smaller: a bound, never a made-up value. */
		if (took > stats->max_ns)
			stats->max_ns = took;
		hist_add(stats->slots, took / 1000);
	}
	hist_time(PP_HK_GPU_SYNC, api, tid, t->tgid, took);
	if (step_records_on)
		count_sync(tid, api);
	return 0;
}

/*
 * Kernel launches (hist launch, the report's steps): entry only, as a launch-bound loop must
 * not pay for a return probe too. The count, and the host's gap since the thread's previous
 * launch where no sync call came between (a gap that holds a wait says nothing of how fast the
 * host launches).
 */
SEC("uprobe")
int BPF_KPROBE(on_launch)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 api = PP_COOKIE_API(cookie);
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns(), last;
	struct pp_thread *t;

	/* Every hit, counted or not, is a trap the job paid for. */
	count(PP_CNT_LAUNCH_HITS);
	t = caller_thread(now);
	if (!t)
		return 0;
	if ((cookie & PP_COOKIE_DRIVER) && called_from_runtime(t->tgid, PT_REGS_SP(ctx)))
		return 0;
	last = t->last_launch_ns;
	/* The gap since a launch before a pause in the probing is not one gap. */
	if (t->launch_epoch != launch_epoch) {
		t->launch_epoch = launch_epoch;
		last = 0;
	}
	t->last_launch_ns = now;
	t->launches++;
	if (last && t->launch_sync_mark == t->gpu_calls) {
		t->launch_gap_ns += now - last;
		t->launch_gaps++;
	}
	t->launch_sync_mark = t->gpu_calls;
	if (record_on)
		record_launch(t, tid, api, now);
	if (hist_on(PP_HK_LAUNCH))
		hist_record(PP_HK_LAUNCH, api, tid, t->tgid, (now - last) / hist_time_div, last != 0,
			    last ? now - last : 0, 0);
	return 0;
}

/* cudaMemcpyKind -> enum pp_copy_dir; they agree, and anything else is unified addressing. */
static __always_inline __u32 copy_dir_of_kind(__u64 kind)
{
	return kind < PP_NR_COPY_DIRS ? kind : PP_COPY_DEFAULT;
}

/* Host/device copies (hist memcpy): bytes at entry; a synchronous copy's return, below, gives
 * its throughput. */
SEC("uprobe")
int BPF_KPROBE(on_copy, void *dst, const void *src, __u64 bytes, __u64 kind)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), now = bpf_ktime_get_ns();
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), dir = PP_COOKIE_DIR(cookie);
	struct pp_thread *t = caller_thread(now);

	if (!t)
		return 0;
	dir = dir == PP_COPY_DIR_FROM_ARG ? copy_dir_of_kind(kind) : dir;
	if (step_records_on)
		count_copy(tid, t->tgid, dir, bytes, dir == PP_COPY_HTOD ? (__u64)src :
			   dir == PP_COPY_DTOH ? (__u64)dst : 0);
	if (!hist_on(PP_HK_COPY_BYTES))
		return 0;
	hist_record(PP_HK_COPY_BYTES, dir, tid, t->tgid, bytes, true, bytes, 0);
	t->copy_enter_ns = now;
	t->copy_bytes = bytes;
	t->copy_dir = dir;
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(on_copy_return)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns(), took;
	struct pp_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (!t || !t->copy_enter_ns || !accounting(now))
		return 0;
	took = now - t->copy_enter_ns;
	t->copy_enter_ns = 0;
	if (!took)
		return 0;
	/* bytes per microsecond is MB/s */
	hist_record(PP_HK_COPY_RATE, t->copy_dir, tid, t->tgid, t->copy_bytes * 1000 / took, true,
		    t->copy_bytes, took);
	return 0;
}

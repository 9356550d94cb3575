// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where the job's threads spend their CPU: a perf event per CPU fires this at a low frequency
 * on whatever runs there; a thread of the job is sampled with its user-mode instruction
 * pointer and, in a process whose interpreter userspace registered in py_procs, the code
 * objects of its Python frames. The interpreter is read as it is, without the GIL: a frame
 * pushed or popped under the sample can tear one stack, which userspace checks each code
 * object's type against (never a garbage name).
 */
#include "pipeprof.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct pp_py_proc);
} py_procs SEC(".maps");

/* The thread state last found for a thread: checked against its thread id at every use, so
 * a stale entry (a thread state freed and reused) costs one read, never a wrong stack. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} py_tstates SEC(".maps");

/* Read by userspace every 100 ms tick, so nothing wakes it per sample; sized by userspace
 * (tracer_size_sample_buffers) to the CPUs and the rate. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} samples SEC(".maps");

static __always_inline __u64 read_ptr(__u64 addr)
{
	__u64 v = 0;

	if (!addr || bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

/* bpf_loop() callbacks: verified once each, where unrolled loops of loops would make the
 * verifier walk every combination of their branches. */
struct thread_walk {
	const struct pp_py_layout *l;
	__u64 tls;
	__u64 ts;		/* in: the newest thread state; out: this thread's, or 0 */
};

static long thread_step(__u64 i, void *ctx)
{
	struct thread_walk *w = ctx;

	if (!w->ts)
		return 1;
	if (read_ptr(w->ts + w->l->tstate_thread_id) == w->tls)
		return 1;
	w->ts = read_ptr(w->ts + w->l->tstate_next);
	return 0;
}

/* The thread state whose thread_id is this thread's, or 0. */
static __always_inline __u64 find_tstate(const struct pp_py_proc *p, __u32 tid, __u64 tls)
{
	const struct pp_py_layout *l = &p->layout;
	__u64 *cached = bpf_map_lookup_elem(&py_tstates, &tid);
	struct thread_walk w = { .l = l, .tls = tls };

	if (!tls)
		return 0;
	if (cached && *cached && read_ptr(*cached + l->tstate_thread_id) == tls)
		return *cached;
	w.ts = read_ptr(read_ptr(p->runtime + l->runtime_interp) + l->interp_threads);
	bpf_loop(PP_PY_MAX_THREADS, thread_step, &w, 0);
	if (!w.ts || read_ptr(w.ts + l->tstate_thread_id) != tls)
		return 0;
	bpf_map_update_elem(&py_tstates, &tid, &w.ts, BPF_ANY);
	return w.ts;
}

struct frame_walk {
	const struct pp_py_layout *l;
	__u64 *code;		/* PP_PY_MAX_DEPTH slots */
	__u64 frame;
	__u32 n;
};

/* One frame per call, into the slot of the call's own index: the verifier knows nothing of
 * the index, so it verifies the body once rather than once per count of frames kept (a
 * counter carried from call to call would be a new state at every call). A C-stack shim
 * frame's slot holds 0, which userspace drops. */
static long frame_step(__u64 i, void *ctx)
{
	struct frame_walk *w = ctx;
	const struct pp_py_layout *l = w->l;
	__u8 owner = 0;
	__u64 code = 0;

	if (!w->frame)
		return 1;
	if (l->frame_owner != PP_PY_NONE &&
	    bpf_probe_read_user(&owner, sizeof(owner), (void *)(w->frame + l->frame_owner)))
		return 1;
	if (l->owner_cstack == PP_PY_NONE || owner != l->owner_cstack)
		code = read_ptr(w->frame + l->frame_code);
	w->code[i & (PP_PY_MAX_DEPTH - 1)] = code;
	w->n = i + 1;
	w->frame = read_ptr(w->frame + l->frame_previous);
	return 0;
}

/* The code objects of thread state ts's frames into code[], innermost first; returns how
 * many, and sets *truncated when there were more. */
static __always_inline __u32 walk_frames(const struct pp_py_layout *l, __u64 ts, __u64 *code,
					 __u32 *truncated)
{
	struct frame_walk w = { .l = l, .code = code, .frame = read_ptr(ts + l->tstate_frame) };

	if (l->cframe_frame != PP_PY_NONE)
		w.frame = read_ptr(w.frame + l->cframe_frame);
	bpf_loop(PP_PY_MAX_DEPTH, frame_step, &w, 0);
	*truncated = w.frame != 0;
	return w.n > PP_PY_MAX_DEPTH ? PP_PY_MAX_DEPTH : w.n;
}

/* The current task's Python stack into code[], or 0 frames where it has none walkable. */
static __always_inline __u32 walk_current(__u32 tid, __u32 tgid, __u64 *code, __u32 *truncated)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pp_py_proc *p = bpf_map_lookup_elem(&py_procs, &tgid);
	__u64 ts;

	*truncated = 0;
	if (!p)
		return 0;
	ts = find_tstate(p, tid, task_user_tls(task));
	return ts ? walk_frames(&p->layout, ts, code, truncated) : 0;
}

/* The wait being filled of each thread whose waits go out with their stacks (wants_wait_stack):
 * one entry for the trainer, one per thread of a role for `profile --offcpu --role`. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);		/* sized by userspace */
	__type(key, __u32);
	__type(value, struct pp_wait_stack);
} wait_stack SEC(".maps");

/* A zeroed record to start a thread's entry from: too large for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pp_wait_stack);
} wait_stack_zero SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 512 * 1024);
} wait_records SEC(".maps");

/* Called from sched_switch as the thread leaves its CPU to sleep (it is still current). */
__noinline int py_wait_begins(__u32 tid, __u32 tgid)
{
	__u32 zero = 0;
	struct pp_wait_stack *w, *fresh = bpf_map_lookup_elem(&wait_stack_zero, &zero);

	if (!fresh)
		return 0;
	w = map_lookup_or_init(&wait_stack, &tid, fresh, PP_CNT_WAIT_STACKS_LOST);
	if (!w)
		return 0;
	w->tid = tid;
	w->tgid = tgid;
	w->waker_tid = w->waker_tgid = w->waker_depth = 0;
	w->depth = walk_current(tid, tgid, w->code, &w->truncated);
	w->begun = 1;
	return 0;
}

/* Called from sched_waking in the waker's own context: what the waker was running. */
__noinline int py_wait_woken(__u32 wakee_tid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tid = task->pid, tgid = task->tgid, truncated;
	struct pp_wait_stack *w = bpf_map_lookup_elem(&wait_stack, &wakee_tid);

	if (!w || !w->begun || w->tid != wakee_tid || !pid_tracked(tgid))
		return 0;
	w->waker_tid = tid;
	w->waker_tgid = tgid;
	w->waker_depth = walk_current(tid, tgid, w->waker_code, &truncated);
	return 0;
}

/* Called as the thread gets a CPU back: the wait, its cause and both stacks go out. */
__noinline int py_wait_ends(__u32 tid, __u32 cause, __u64 wait_ns)
{
	struct pp_wait_stack *w = bpf_map_lookup_elem(&wait_stack, &tid), *out;

	if (!w || !w->begun || w->tid != tid)
		return 0;
	w->begun = 0;
	w->cause = cause;
	w->wait_ns = wait_ns;
	out = bpf_ringbuf_reserve(&wait_records, sizeof(*out), 0);
	if (!out) {
		count(PP_CNT_WAIT_STACKS_LOST);
		return 0;
	}
	bpf_probe_read_kernel(out, sizeof(*out), w);
	bpf_ringbuf_submit(out, BPF_RB_NO_WAKEUP);
	count(PP_CNT_WAIT_STACKS);
	return 0;
}

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tid = task->pid, tgid = task->tgid;
	struct pp_py_proc *p;
	struct pp_sample *s;
	long bytes;
	__u64 ts;

	/* Only inside the window, and only the job's threads (the idle task is pid 0). */
	if (!tid || !window_start_ns || window_end_ns || !pid_tracked(tgid))
		return 0;
	s = bpf_ringbuf_reserve(&samples, sizeof(*s), 0);
	if (!s) {
		count(PP_CNT_SAMPLES_LOST);
		return 0;
	}
	s->tid = tid;
	s->tgid = tgid;
	s->kernel = !perf_sample_in_user_mode(ctx);
	s->py = PP_SAMPLE_NO_PY;
	s->depth = s->truncated = 0;
	/* The user stack's first frame is where user mode was, wherever the sample hit; the
	 * rest follow the frame pointers, garbage where a library omits them (userspace checks
	 * each against the call before it). */
	bytes = bpf_get_stack(ctx, s->ustack, sizeof(s->ustack), BPF_F_USER_STACK);
	s->ustack_depth = bytes > 0 ? bytes / sizeof(s->ustack[0]) : 0;
	p = bpf_map_lookup_elem(&py_procs, &tgid);
	if (p) {
		ts = find_tstate(p, tid, task_user_tls(task));
		if (ts) {
			s->py = PP_SAMPLE_PY_OK;
			s->depth = walk_frames(&p->layout, ts, s->code, &s->truncated);
		} else {
			s->py = PP_SAMPLE_PY_NO_THREAD;
			count(PP_CNT_PY_THREAD_UNFOUND);
		}
	}
	bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
	count(PP_CNT_SAMPLES);
	return 0;
}

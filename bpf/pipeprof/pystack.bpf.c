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

/* A frame's fields read in one go: the span from the lowest of code, previous and owner to the
 * end of the highest (16-71 bytes in CPython 3.10-3.13), one user-memory read where there were
 * three, for each frame of each wait the trainer begins. Slot PP_SPAN_WAITS serves the
 * scheduler's walks, PP_SPAN_SAMPLES the sampler's, which may interrupt one of them (an NMI). */
enum { PP_SPAN_WAITS, PP_SPAN_SAMPLES, PP_SPAN_SLOTS };

struct frame_span {
	/* What window holds of the data stack (len 0: nothing). Here, not in the walk's own
	 * state on the stack, where the verifier would check the frames' loop once for a walk
	 * with a window and again for one without (~750 instructions more at each walk). */
	__u64 window_from, window_len;
	__u64 windowed;			/* frames of this walk read from the window */
	__u8 bytes[PP_PY_SPAN_MAX];
	/* The top PP_PY_STACK_WINDOW bytes of the data stack (3.11+), and room for a span that
	 * starts in its last byte, so that no bound the verifier checks depends on the span. */
	__u8 window[PP_PY_STACK_WINDOW + PP_PY_SPAN_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PP_SPAN_SLOTS);
	__type(key, __u32);
	__type(value, struct frame_span);
} frame_spans SEC(".maps");

struct frame_walk {
	const struct pp_py_layout *l;
	__u64 *code;		/* PP_PY_MAX_DEPTH slots */
	struct frame_span *span;	/* NULL: no walk (userspace's layouts all fit) */
	__u64 frame;
	__u32 n;
	__u32 span_from, span_len;	/* the span, from the frame's start */
	__u32 code_at, previous_at, owner_at;	/* in the span; owner_at PP_PY_NONE: none */
};

static __always_inline void span_layout(struct frame_walk *w, const struct pp_py_layout *l,
					__u32 slot)
{
	__u32 from, len = pp_py_frame_span(l, &from);

	if (len > PP_PY_SPAN_MAX)
		return;
	w->span_from = from;
	w->span_len = len;
	w->code_at = l->frame_code - from;
	w->previous_at = l->frame_previous - from;
	w->owner_at = l->frame_owner == PP_PY_NONE ? PP_PY_NONE : l->frame_owner - from;
	w->span = bpf_map_lookup_elem(&frame_spans, &slot);
}

/* The frame's code object (0 for a C-stack shim frame) and its caller's frame, from the span
 * read in one go; false where the read failed or the span is not one the checks allow. */
static __always_inline bool frame_fields_spanned(struct frame_walk *w, __u64 *code,
						 __u64 *previous)
{
	const struct pp_py_layout *l = w->l;
	__u8 *bytes = w->span->bytes;
	__u32 len = w->span_len, code_at = w->code_at, previous_at = w->previous_at;
	__u32 owner_at = w->owner_at;

	__u64 at = w->frame + w->span_from, window_len = w->span->window_len;
	__u64 in_window = at - w->span->window_from;

	if (!len || len > PP_PY_SPAN_MAX || code_at > PP_PY_SPAN_MAX - 8 ||
	    previous_at > PP_PY_SPAN_MAX - 8)
		return false;
	if (at >= w->span->window_from && in_window < window_len && len <= window_len - in_window) {
		/* In the window read at the walk's start: no read of its own. */
		bytes = w->span->window + (in_window & (PP_PY_STACK_WINDOW - 1));
		w->span->windowed++;
	} else if (bpf_probe_read_user(bytes, len, (void *)at)) {
		return false;
	}
	*previous = *(__u64 *)(bytes + previous_at);
	*code = 0;
	if (owner_at != PP_PY_NONE && owner_at < PP_PY_SPAN_MAX &&
	    l->owner_cstack != PP_PY_NONE && bytes[owner_at] == l->owner_cstack)
		return true;
	*code = *(__u64 *)(bytes + code_at);
	return true;
}

/* One frame per call, into the slot of the call's own index: the verifier knows nothing of
 * the index, so it verifies the body once rather than once per count of frames kept (a
 * counter carried from call to call would be a new state at every call). A C-stack shim
 * frame's slot holds 0, which userspace drops. */
static long frame_step(__u64 i, void *ctx)
{
	struct frame_walk *w = ctx;
	__u64 code, previous;

	if (!w->frame || !w->span || !frame_fields_spanned(w, &code, &previous))
		return 1;
	w->code[i & (PP_PY_MAX_DEPTH - 1)] = code;
	w->n = i + 1;
	w->frame = previous;
	return 0;
}

/*
 * 3.11+ keep a thread's frames on a stack of their own (its data stack), one chunk at a time,
 * each frame just above its caller's: one read of the top of the current chunk holds the
 * innermost frames' fields, where a read a frame cost ~55 ns. 8 KB holds about the 64 frames
 * a walk keeps (frames of 80-300 bytes); only what the stack uses is read. A frame outside it
 * (a generator's, a C-stack shim, one in an older chunk) is read on its own.
 */
static __always_inline void read_stack_window(struct frame_walk *w, const struct pp_py_layout *l,
					      __u64 ts)
{
	__u64 chunk_and_top[2], from, top, len;

	if (!w->span)
		return;
	w->span->window_len = w->span->windowed = 0;
	if (l->tstate_datastack == PP_PY_NONE ||
	    bpf_probe_read_user(chunk_and_top, sizeof(chunk_and_top),
				(void *)(ts + l->tstate_datastack)))
		return;
	if (!chunk_and_top[0])
		return;
	from = chunk_and_top[0] + PP_PY_CHUNK_DATA;
	top = chunk_and_top[1];
	if (top <= from)
		return;
	if (top - from > PP_PY_STACK_WINDOW)
		from = top - PP_PY_STACK_WINDOW;
	len = top - from;
	if (len > PP_PY_STACK_WINDOW || bpf_probe_read_user(w->span->window, len, (void *)from))
		return;
	w->span->window_from = from;
	w->span->window_len = len;
}

/* The code objects of thread state ts's frames into code[], innermost first; returns how
 * many, and sets *truncated when there were more. span_slot: whose scratch span (PP_SPAN_*). */
static __always_inline __u32 walk_frames(const struct pp_py_layout *l, __u64 ts, __u64 *code,
					 __u32 *truncated, __u32 span_slot)
{
	struct frame_walk w = { .l = l, .code = code, .frame = read_ptr(ts + l->tstate_frame) };

	if (l->cframe_frame != PP_PY_NONE)
		w.frame = read_ptr(w.frame + l->cframe_frame);
	span_layout(&w, l, span_slot);
	read_stack_window(&w, l, ts);
	bpf_loop(PP_PY_MAX_DEPTH, frame_step, &w, 0);
	*truncated = w.frame != 0;
	if (w.span) {
		count_add(PP_CNT_PY_FRAMES, w.n);
		count_add(PP_CNT_PY_FRAMES_WINDOWED, w.span->windowed);
	}
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
	return ts ? walk_frames(&p->layout, ts, code, truncated, PP_SPAN_WAITS) : 0;
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
	w->depth = walk_current(tid, tgid, w->frames, &w->truncated);
	w->begun = 1;
	return 0;
}

/* Called from sched_waking in the waker's own context: what the waker was running. */
__noinline int py_wait_woken(__u32 wakee_tid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tid = task->pid, tgid = task->tgid, truncated, depth;
	struct pp_wait_stack *w = bpf_map_lookup_elem(&wait_stack, &wakee_tid);

	if (!w || !w->begun || w->tid != wakee_tid || !pid_tracked(tgid))
		return 0;
	depth = w->depth;
	if (depth > PP_PY_MAX_DEPTH)
		return 0;
	w->waker_tid = tid;
	w->waker_tgid = tgid;
	w->waker_depth = walk_current(tid, tgid, w->frames + depth, &truncated);
	return 0;
}

/* Called as the thread gets a CPU back: the wait, its cause and both stacks go out. */
__noinline int py_wait_ends(__u32 tid, __u32 cause, __u64 wait_ns)
{
	struct pp_wait_stack *w = bpf_map_lookup_elem(&wait_stack, &tid);
	__u64 bytes;

	if (!w || !w->begun || w->tid != tid)
		return 0;
	w->begun = 0;
	w->cause = cause;
	w->wait_ns = wait_ns;
	bytes = PP_WAIT_RECORD_BYTES((__u64)w->depth, w->waker_tid ? (__u64)w->waker_depth : 0);
	/* The bound on the sum itself: on each term, clang checks one copy and adds another. */
	barrier_var(bytes);
	if (bytes > sizeof(*w))
		return 0;
	if (bpf_ringbuf_output(&wait_records, w, bytes, BPF_RB_NO_WAKEUP)) {
		count(PP_CNT_WAIT_STACKS_LOST);
		return 0;
	}
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
	if (!window_start_passed && bpf_ktime_get_ns() < window_start_ns)
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
			s->depth = walk_frames(&p->layout, ts, s->code, &s->truncated,
					       PP_SPAN_SAMPLES);
		} else {
			s->py = PP_SAMPLE_PY_NO_THREAD;
			count(PP_CNT_PY_THREAD_UNFOUND);
		}
	}
	bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
	count(PP_CNT_SAMPLES);
	return 0;
}

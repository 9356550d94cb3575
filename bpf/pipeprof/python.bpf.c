// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The Python interpreter's own probes: its USDT points gc__start and gc__done (CPython built
 * --with-dtrace, as Debian's is) bracket every garbage collection, a pause of the thread that
 * runs it. Attached per interpreter file for every process that maps it; untracked processes
 * leave at once. */
#include "pipeprof.bpf.h"

SEC("uprobe")
int BPF_KPROBE(on_gc_start)
{
	__u64 now = bpf_ktime_get_ns();
	struct pp_thread *t;

	if (!accounting(now))
		return 0;
	t = thread_of((struct task_struct *)bpf_get_current_task_btf());
	if (!t || t->phase == PP_PHASE_EXITED)
		return 0;
	t->gc_start_ns = now;
	t->gc_count++;
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(on_gc_done)
{
	__u64 now = bpf_ktime_get_ns(), since;
	struct pp_thread *t;

	if (!window_start_ns)
		return 0;
	t = thread_of((struct task_struct *)bpf_get_current_task_btf());
	if (!t || !t->gc_start_ns)
		return 0;
	since = t->gc_start_ns;
	t->gc_start_ns = 0;
	/* Only the part inside the window, as for the states. */
	if (window_end_ns && now > window_end_ns)
		now = window_end_ns;
	if (now > since)
		t->gc_ns += now - since;
	return 0;
}

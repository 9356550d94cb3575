// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pipeprof daemon's discovery: every exec on the machine, so a new training job is looked at
 * as soon as it starts instead of by rescanning /proc. Execs are rare next to scheduler
 * events; the ring buffer is read once a second.
 */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "discover.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, DISCOVER_RINGBUF_BYTES);
} execs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p)
{
	struct discover_exec *e = bpf_ringbuf_reserve(&execs, sizeof(*e), 0);
	__u32 key = DISCOVER_DROPPED;
	__u64 *lost;

	if (!e) {
		lost = bpf_map_lookup_elem(&dropped, &key);
		if (lost)
			__sync_fetch_and_add(lost, 1);
		return 0;
	}
	e->pid = p->tgid;
	e->pad = 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";

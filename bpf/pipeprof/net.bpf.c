// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * TCP receives by the job's threads, for the wait chains (stall model): a thread that copies
 * what a peer sent is relaying the network from that moment, as one just woken by it is.
 *
 * A collective's I/O thread (gloo's tcp::Loop) reading a stream that keeps arriving never
 * sleeps between its reads: one wait, then milliseconds on a CPU reading, then the wakeup of
 * the thread that waits for the message. Measured from its wait alone, that run spent the relay
 * budget on the receive itself, and the trainer's wait read THREAD_WAIT.
 *
 * What it relays is a collective's message only in a distributed job (job_is_distributed):
 * elsewhere a thread reading TCP is a loader streaming samples from remote storage or a sample
 * server, whose hand-off is data. Such a reader is as busy between its reads as gloo's.
 */
#include "pipeprof.bpf.h"

/* tcp_recvmsg_locked() fires it after each copy to the reader, in the reader's context. */
SEC("tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(on_tcp_rcv_space_adjust, struct sock *sk)
{
	__u64 id = bpf_get_current_pid_tgid(), now;
	__u32 tid = (__u32)id;
	struct pp_thread *t;

	if (!window_start_ns || !pid_tracked(id >> 32))
		return 0;
	/* A socket read for the kernel (strparser, TLS) runs in whatever task it interrupted. */
	if (wake_context() != PP_WAKE_TASK)
		return 0;
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || t->phase != PP_PHASE_ONCPU || t->gpu_depth)
		return 0;
	now = bpf_ktime_get_ns();
	if (!naming(now))
		return 0;
	wait_ended_on_cpu(t, network_cause(), now);
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <math.h>
#include "classify.h"
#include "unit.h"

#define MS 1000000ULL

static bool near(double a, double b)
{
	return fabs(a - b) < 1e-6;
}

static bool has_rec(const struct analysis *a, const char *id)
{
	for (int i = 0; i < a->nr_recs; i++)
		if (!strcmp(a->recs[i].id, id))
			return true;
	return false;
}

/* A thread of `tgid` with the given per-state milliseconds and the window it filled. */
static struct thread_result mk(__u32 tid, __u32 tgid, const __u64 ms[PP_NR_STATES], __u64 gpu_calls)
{
	struct thread_result t = { .tid = tid, .tgid = tgid, .gpu_calls = gpu_calls };

	for (int s = 0; s < PP_NR_STATES; s++) {
		t.ns[s] = ms[s] * MS;
		t.wall_ns += t.ns[s];
	}
	return t;
}

static struct analysis_input input(void)
{
	struct analysis_input in = {
		.root_pid = 100, .threshold = 0.20, .ncpus = 8, .cpu_busy = 0.30,
		.runnable_avg = 1.0, .window_ns = 1000 * MS,
	};
	return in;
}

TEST(test_names)
{
	CHECK_STR(state_name(PP_DATA_WAIT), "DATA_WAIT");
	CHECK_STR(state_name(PP_OTHER), "OTHER");
	CHECK_STR(role_name(ROLE_HELPER), "HELPER");
	CHECK_STR(verdict_name(VERDICT_DATA_LOADING), "DATA-LOADING BOUND");
	CHECK_STR(verdict_name(VERDICT_IO), "I/O BOUND");
	CHECK_STR(verdict_id(VERDICT_CONTENTION), "cpu_contention");
}

TEST(test_speedup_bound)
{
	CHECK(near(speedup_bound(0.5), 2.0));
	CHECK(near(speedup_bound(0.75), 4.0));
	CHECK(near(speedup_bound(0), 1.0));
	CHECK(near(speedup_bound(1.0), 100.0));
}

TEST(test_close_oncpu)
{
	struct pp_thread t = { .tgid = 7, .phase = PP_PHASE_ONCPU, .first_ns = 0,
			       .phase_start_ns = 600 * MS };
	struct thread_result r;

	t.ns[PP_RUNNING] = 400 * MS;
	t.ns[PP_DATA_WAIT] = 200 * MS;
	thread_close(&t, 0, 1000 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_RUNNING], 800 * MS);
	CHECK_EQ_U64(r.ns[PP_DATA_WAIT], 200 * MS);
	CHECK_EQ_U64(r.wall_ns, 1000 * MS);
	CHECK_EQ_U64(r.tgid, 7);
	CHECK(!r.exited);

	/* A gap no event explains is not pinned on any stall. */
	t.ns[PP_DATA_WAIT] = 0;
	thread_close(&t, 0, 1000 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 200 * MS);
	CHECK_EQ_U64(r.ns[PP_RUNNING], 800 * MS);
}

TEST(test_close_gpu_and_iowait)
{
	struct pp_thread t = { .phase = PP_PHASE_OFFCPU, .gpu_depth = 1, .phase_start_ns = 500 * MS };
	struct thread_result r;

	t.ns[PP_RUNNING] = 500 * MS;
	thread_close(&t, 0, 1000 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_GPU_WAIT], 500 * MS);

	/* The same inside an NCCL call (blocking.bpf.h): COMM_WAIT. */
	t.call_state = PP_COMM_WAIT;
	thread_close(&t, 0, 1000 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_COMM_WAIT], 500 * MS);
	CHECK_EQ_U64(r.ns[PP_GPU_WAIT], 0);
	t.call_state = 0;

	t.gpu_depth = 0;
	t.offcpu_iowait = 1;
	thread_close(&t, 0, 1000 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_IO_WAIT], 500 * MS);
	CHECK_EQ_U64(r.ns[PP_GPU_WAIT], 0);

	/* Asleep with no wakeup yet: the cause is unknown. */
	t.offcpu_iowait = 0;
	thread_close(&t, 0, 1000 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 500 * MS);

	t.phase = PP_PHASE_RUNNABLE;
	thread_close(&t, 0, 1000 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_RUNQ], 500 * MS);
}

TEST(test_close_unknown_uses_proc_state)
{
	struct pp_thread t = { .phase = PP_PHASE_UNKNOWN, .first_ns = 100 * MS, .phase_start_ns = 100 * MS };
	struct thread_result r;

	thread_close(&t, 100 * MS, 1100 * MS, 'R', &r);
	CHECK_EQ_U64(r.ns[PP_RUNNING], 1000 * MS);
	thread_close(&t, 100 * MS, 1100 * MS, 'S', &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 1000 * MS);
	thread_close(&t, 100 * MS, 1100 * MS, 'D', &r);
	CHECK_EQ_U64(r.ns[PP_IO_WAIT], 1000 * MS);
	CHECK_EQ_U64(r.wall_ns, 1000 * MS);
}

/* Woken, and no switch-in seen since: the wakeup names the wait up to it, and after it the
 * thread ran. First seen asleep, woken at 900 ms (its clock read then) and running unseen since;
 * or woken after the close: the whole window is that wait. */
TEST(test_close_woken_without_switch_in)
{
	struct pp_thread t = { .phase = PP_PHASE_UNKNOWN, .first_ns = 100 * MS,
			       .phase_start_ns = 100 * MS, .oncpu_since_ns = 100 * MS,
			       .exec_at_out_ns = 7 * MS, .woken_ns = 900 * MS,
			       .wake_cause = PP_DATA_WAIT };
	struct thread_result r;

	thread_close(&t, 100 * MS, 1100 * MS, 'R', &r);
	CHECK_EQ_U64(r.ns[PP_DATA_WAIT], 800 * MS);
	CHECK_EQ_U64(r.ns[PP_RUNNING], 200 * MS);
	CHECK_EQ_U64(r.open_wait_ns, 0);
	t.woken_ns = 1300 * MS;
	thread_close(&t, 100 * MS, 1100 * MS, 'S', &r);
	CHECK_EQ_U64(r.ns[PP_DATA_WAIT], 1000 * MS);
	CHECK_EQ_U64(r.open_wait_ns, 0);

	/* No clock: it may have run since the attach, and /proc says so. */
	t.exec_at_out_ns = 0;
	t.woken_ns = 900 * MS;
	thread_close(&t, 100 * MS, 1100 * MS, 'R', &r);
	CHECK_EQ_U64(r.ns[PP_RUNNING], 1000 * MS);

	/* Seen going to sleep at 500 ms (in I/O), woken at 700 ms, switch-in unseen. */
	t.phase = PP_PHASE_OFFCPU;
	t.phase_start_ns = 500 * MS;
	t.woken_ns = 700 * MS;
	t.offcpu_iowait = 1;
	t.ns[PP_RUNNING] = 400 * MS;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_IO_WAIT], 200 * MS);
	CHECK_EQ_U64(r.ns[PP_RUNNING], 800 * MS);
	/* Not woken in this wait (an older wakeup): still open, cause unknown. */
	t.woken_ns = 300 * MS;
	t.offcpu_iowait = 0;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 600 * MS);
	CHECK_EQ_U64(r.open_wait_ns, 600 * MS);
}

/* The DataLoader's Queue.get(timeout=5 s) for a batch slower than that: the trainer's wait
 * timed out at 600 ms (500 ms of the window held back as OTHER), it polled again at 600.1 ms,
 * and the worker's batch woke it at 1,050 ms, after the window, before its switch-in. */
TEST(test_close_retry_of_timed_out_wait)
{
	struct pp_thread t = { .phase = PP_PHASE_OFFCPU, .first_ns = 100 * MS,
			       .phase_start_ns = 600 * MS + 100000, .oncpu_since_ns = 600 * MS,
			       .exec_at_out_ns = 7 * MS, .woken_ns = 1050 * MS,
			       .wake_cause = PP_DATA_WAIT, .ran_since_wait_ns = 100000,
			       .timed_out_ns = 500 * MS };
	struct thread_result r;

	t.ns[PP_OTHER] = 500 * MS;
	t.ns[PP_RUNNING] = 100000;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 0);
	CHECK_EQ_U64(r.ns[PP_DATA_WAIT], 950 * MS - 100000);
	CHECK_EQ_U64(r.ns[PP_RUNNING], 50 * MS + 100000);
	CHECK_EQ_U64(r.open_wait_ns, 0);
	/* The retry began after the close (at 1,200 ms) and its worker woke it at 1,300 ms, its
	 * switch-in not seen: the held part is named all the same. */
	t.phase_start_ns = 1200 * MS;
	t.woken_ns = 1300 * MS;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_DATA_WAIT], 500 * MS);
	CHECK_EQ_U64(r.open_wait_ns, 0);
	/* Not woken yet: held, unnamed, open (what the record leaves of the window, 499.9 ms,
	 * is OTHER too). */
	t.woken_ns = 1000 * MS;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_DATA_WAIT], 0);
	CHECK_EQ_U64(r.ns[PP_OTHER], 1000 * MS - 100000);
	CHECK_EQ_U64(r.open_wait_ns, 500 * MS);
	t.phase_start_ns = 600 * MS + 100000;
	t.woken_ns = 1050 * MS;
	/* Not woken by the read: the timed-out part is as unnamed as the retry's own. */
	t.woken_ns = 0;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 1000 * MS - 100000);
	CHECK_EQ_U64(r.open_wait_ns, 1000 * MS - 100000);
	/* Timed out again, its switch-in not seen yet: still unnamed, all of it open. */
	t.woken_ns = 1050 * MS;
	t.wake_cause = PP_OTHER;
	t.wake_ctx = PP_WAKE_HARDIRQ;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 950 * MS - 100000);
	CHECK_EQ_U64(r.ns[PP_RUNNING], 50 * MS + 100000);
	CHECK_EQ_U64(r.open_wait_ns, 950 * MS - 100000);
	/* Ended by a task the model does not name (OTHER): named, not open. */
	t.wake_ctx = PP_WAKE_TASK;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 950 * MS - 100000);
	CHECK_EQ_U64(r.open_wait_ns, 0);
	/* A timer ending a wait that held nothing back (a plain sleep): named OTHER, not open. */
	t.wake_ctx = PP_WAKE_HARDIRQ;
	t.timed_out_ns = 0;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.open_wait_ns, 0);
	/* 7 ms on a CPU in between, more than a relay's 5 ms and less than a sixty-fourth of the
	 * 500 ms held: still its retry. */
	t.wake_cause = PP_DATA_WAIT;
	t.wake_ctx = PP_WAKE_TASK;
	t.timed_out_ns = 500 * MS;
	t.ran_since_wait_ns = 7 * MS;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 0);
	CHECK_EQ_U64(r.ns[PP_DATA_WAIT], 950 * MS - 100000);
	/* It ran more than briefly before waiting again: no retry, the timeout stays OTHER. */
	t.ran_since_wait_ns = pp_held_run_budget(&t) + 1;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 500 * MS);
	CHECK_EQ_U64(r.ns[PP_DATA_WAIT], 450 * MS - 100000);
}

/* A thread's Queue.get(timeout=1) chain still retried when the maps were read: its batch came
 * between a timeout and its retry, and the chain went on into the next one's. Held 600 ms, the
 * retry open for the window's last 400 ms: unnamed, unless the last waits held at that call
 * were named, and then as they were. */
TEST(test_close_chain_named_before)
{
	const __u64 queue_get = (13ULL << 32) | 0xffffffffU, gil = 14ULL << 32;
	struct pp_thread t = { .phase = PP_PHASE_OFFCPU, .first_ns = 100 * MS,
			       .phase_start_ns = 700 * MS, .oncpu_since_ns = 699 * MS,
			       .exec_at_out_ns = 7 * MS, .woken_ns = 699 * MS - 10000,
			       .wake_cause = PP_THREAD_WAIT, .ran_since_wait_ns = 100000,
			       .timed_out_ns = 600 * MS, .held_call = queue_get };
	struct thread_result r;

	t.ns[PP_OTHER] = 600 * MS;
	t.ns[PP_RUNNING] = 1 * MS;
	t.ns[PP_THREAD_WAIT] = 1 * MS - 10000;
	t.ns[PP_RUNQ] = 10000;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 1000 * MS);
	CHECK_EQ_U64(r.open_wait_ns, 1000 * MS);
	CHECK_EQ_U64(r.named_before_ns, 0);
	/* The chain before it at that call was named THREAD_WAIT by the producer. */
	t.named_call = queue_get;
	t.named_cause = PP_THREAD_WAIT;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 0);
	CHECK_EQ_U64(r.ns[PP_THREAD_WAIT], 1001 * MS - 10000);
	CHECK_EQ_U64(r.open_wait_ns, 0);
	CHECK_EQ_U64(r.named_before_ns, 1000 * MS);
	CHECK_EQ_U64(r.named_before_state, PP_THREAD_WAIT);
	/* Timed out again after the close, its switch-in not seen: the window's part still is. */
	t.woken_ns = 1300 * MS;
	t.wake_cause = PP_OTHER;
	t.wake_ctx = PP_WAKE_HARDIRQ;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 0);
	CHECK_EQ_U64(r.named_before_ns, 1000 * MS);
	/* Another call named last (the GIL's), or nothing that names: unnamed, open. */
	t.named_call = gil;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 1000 * MS);
	CHECK_EQ_U64(r.open_wait_ns, 1000 * MS);
	t.named_call = queue_get;
	t.named_cause = PP_OTHER;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.named_before_ns, 0);
	CHECK_EQ_U64(r.open_wait_ns, 1000 * MS);
	/* It ran its step since (no retry pending): the held waits stay OTHER, and the wait
	 * open at the close, not woken yet, is its own. */
	t.named_cause = PP_THREAD_WAIT;
	t.woken_ns = 699 * MS - 10000;
	t.ran_since_wait_ns = pp_held_run_budget(&t) + 1;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.named_before_ns, 0);
	CHECK_EQ_U64(r.ns[PP_OTHER], 1000 * MS);
	CHECK_EQ_U64(r.open_wait_ns, 400 * MS);
	/* Unless the last of them ended with no wakeup seen: the producer's, lost, for all
	 * that shows. Also while it is on a CPU after it, within the retry's budget or not. */
	t.held_end_unseen = 1;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.named_before_ns, 600 * MS);
	CHECK_EQ_U64(r.ns[PP_THREAD_WAIT], 601 * MS - 10000);
	CHECK_EQ_U64(r.ns[PP_OTHER], 400 * MS);
	CHECK_EQ_U64(r.open_wait_ns, 400 * MS);
	t.phase = PP_PHASE_ONCPU;
	t.ran_since_wait_ns = 0;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.named_before_ns, 600 * MS);
	CHECK_EQ_U64(r.ns[PP_OTHER], 0);
	CHECK_EQ_U64(r.ns[PP_RUNNING], 401 * MS);
	/* Its last wait a timer was seen to end: they stay OTHER. */
	t.held_end_unseen = 0;
	thread_close(&t, 100 * MS, 1100 * MS, 0, &r);
	CHECK_EQ_U64(r.named_before_ns, 0);
	CHECK_EQ_U64(r.ns[PP_OTHER], 600 * MS);
	CHECK(pp_held_named_before(queue_get, queue_get, PP_DATA_WAIT));
	CHECK(!pp_held_named_before(0, 0, PP_DATA_WAIT));
	CHECK(!pp_held_named_before(queue_get, 0, PP_DATA_WAIT));
}

/* The CPU a thread may spend between timed-out waits and their retry. */
TEST(test_retry_run_budget)
{
	/* The GIL's 5 ms waits: a relay's 5 ms, as the switch interval's work between them. */
	CHECK_EQ_U64(pp_retry_run_budget(5 * MS), PP_CHAIN_MAX_RUN_NS);
	CHECK_EQ_U64(pp_retry_run_budget(0), PP_CHAIN_MAX_RUN_NS);
	/* The DataLoader's 5 s: 78 ms, past the 3.3-8.2 ms its own check runs. */
	CHECK_EQ_U64(pp_retry_run_budget(5000 * MS), 78125000);
	CHECK_EQ_U64(pp_retry_run_budget(1000 * MS), 15625000);
}

/* A held wait the window's end cut: its budget is a whole wait's of its call, not the part the
 * window holds. deadline_remainder's poll for the 943 ms left of its deadline, 541 ms of it in
 * the window, then 12.7 ms on a CPU to its retry. */
TEST(test_held_run_budget_of_a_cut_wait)
{
	const __u64 poll_943 = (21ULL << 32) | 943, gil = (14ULL << 32) | 5,
		    queue_get = (13ULL << 32) | 0xffffffffU;
	struct pp_thread t = { .timed_out_ns = 541 * MS, .held_call = poll_943,
			       .ran_since_wait_ns = 12700 * 1000 };

	CHECK_EQ_U64(pp_held_length_ns(541 * MS, poll_943), 943 * MS);
	CHECK_EQ_U64(pp_held_run_budget(&t), pp_retry_run_budget(943 * MS));
	CHECK(pp_retry_pending(&t));
	/* Past a sixty-fourth of the whole wait: not its retry. */
	t.ran_since_wait_ns = pp_retry_run_budget(943 * MS) + 1;
	CHECK(!pp_retry_pending(&t));
	/* A chain held longer than one wait of its call: the chain's time. */
	CHECK_EQ_U64(pp_held_length_ns(2941 * MS, poll_943), 2941 * MS);
	/* No deadline to go by (no timeout, none read): the held time. */
	CHECK_EQ_U64(pp_held_length_ns(541 * MS, queue_get), 541 * MS);
	CHECK_EQ_U64(pp_held_length_ns(541 * MS, 0), 541 * MS);
	/* The GIL's 5 ms waits keep a relay's 5 ms. */
	t.timed_out_ns = 2 * MS;
	t.held_call = gil;
	CHECK_EQ_U64(pp_held_run_budget(&t), PP_CHAIN_MAX_RUN_NS);
	t.timed_out_ns = 0;
	CHECK(!pp_retry_pending(&t));
}

/* The decision once the match is known (the BPF side works the match out once for both of its
 * rules): every combination of its inputs. */
TEST(test_retry_action_of_a_known_match)
{
	for (int retry = 0; retry < 2; retry++)
		for (int brief = 0; brief < 2; brief++)
			for (int handoff = 0; handoff < 2; handoff++) {
				CHECK_EQ_INT(pp_retry_action_of(0, retry, 1, brief, handoff), PP_RETRY_DROP);
				CHECK_EQ_INT(pp_retry_action_of(0, retry, 0, brief, handoff), PP_RETRY_DROP);
				CHECK_EQ_INT(pp_retry_action_of(1, retry, 1, brief, handoff),
					     retry || brief ? PP_RETRY_ADD : PP_RETRY_DROP);
				CHECK_EQ_INT(pp_retry_action_of(1, retry, 0, brief, handoff),
					     retry ? PP_RETRY_NAME : handoff ? PP_RETRY_KEEP : PP_RETRY_DROP);
			}
}

/* What each wait does to the held ones, on the shapes the rules were made on. */
TEST(test_retry_actions)
{
	/* Signatures in the upper half, as pp_retry_call() gives them; poll's timeout below. */
	const __u64 poll = 11ULL << 32, poll5000 = poll | 5000, queue_lock = 12ULL << 32,
		    gil = 13ULL << 32, mutex = 14ULL << 32, pause = 15ULL << 32, get = 16ULL << 32;

	/* Nothing held: a wait drops nothing (and, timed out, is held itself). */
	CHECK_EQ_INT(pp_retry_action(0, poll5000, 0, 0, 1, 0, 0), PP_RETRY_DROP);
	/* The DataLoader: poll(5000) timed out, then again, then the worker's batch. */
	CHECK_EQ_INT(pp_retry_action(1, poll5000, poll5000, 0, 1, 0, 0), PP_RETRY_ADD);
	CHECK_EQ_INT(pp_retry_action(1, poll5000, poll5000, 0, 0, 0, 0), PP_RETRY_NAME);
	/* Its Queue.get preempted between reading the clock and polling: poll(4998) timed out,
	 * the retry polls for 5000 (or the other way round). One call. */
	CHECK_EQ_INT(pp_retry_action(1, poll5000, poll | 4998, 0, 0, 0, 0), PP_RETRY_NAME);
	CHECK_EQ_INT(pp_retry_action(1, poll | 4998, poll5000, 0, 1, 0, 0), PP_RETRY_ADD);
	/* A thread's q.get(timeout=1): the GIL's 5 ms wait times out, its mutex is handed over,
	 * or the GIL soon after, and the queue's lock again, the producer's put ending it. */
	CHECK_EQ_INT(pp_retry_action(1, gil, queue_lock, 0, 1, 1, 0), PP_RETRY_ADD);
	CHECK_EQ_INT(pp_retry_action(1, mutex, queue_lock, 0, 0, 1, 1), PP_RETRY_KEEP);
	CHECK_EQ_INT(pp_retry_action(1, gil, queue_lock, 0, 0, 1, 1), PP_RETRY_KEEP);
	CHECK_EQ_INT(pp_retry_action(1, queue_lock, queue_lock, 0, 0, 0, 0), PP_RETRY_NAME);
	CHECK_EQ_INT(pp_retry_action(1, queue_lock, queue_lock, 0, 0, 1, 1), PP_RETRY_NAME);
	/* The GIL timed out after a batch, and the queue's lock later: that long wait of another
	 * call is held in the GIL's place (the GIL's 5 ms stay OTHER), and its retry names it. */
	CHECK_EQ_INT(pp_retry_action(1, queue_lock, gil, 0, 1, 0, 0), PP_RETRY_DROP);
	/* stop.wait(0.1), the GIL on the way (its condition signalled by the thread that held
	 * it), then q.get() for 100 ms: the pause stays OTHER. */
	CHECK_EQ_INT(pp_retry_action(1, gil, pause, 0, 1, 1, 0), PP_RETRY_ADD);
	CHECK_EQ_INT(pp_retry_action(1, gil, pause, 0, 0, 1, 1), PP_RETRY_KEEP);
	CHECK_EQ_INT(pp_retry_action(1, get, pause, 0, 0, 0, 0), PP_RETRY_DROP);
	/* A pause, then another call's 5 s timeout: not on the way; the pause stays OTHER. */
	CHECK_EQ_INT(pp_retry_action(1, poll5000, pause, 0, 1, 0, 0), PP_RETRY_DROP);
	/* A sleep (no retryable call) ends them; a quick handover of anything keeps them. */
	CHECK_EQ_INT(pp_retry_action(1, 0, pause, 0, 0, 0, 0), PP_RETRY_DROP);
	CHECK_EQ_INT(pp_retry_action(1, 0, pause, 0, 0, 1, 1), PP_RETRY_KEEP);
	/* A step that read the clock, computed 50 ms and was preempted for 81 ms: poll(869) timed
	 * out, its retry polls for 1000. Its lead of 131 ms covers the difference (126 ms do, with
	 * PP_LEAD_SLACK_MS); 100 ms do not. A wait open at the attach had a lead unseen: any
	 * shorter timeout may be a remainder. */
	CHECK_EQ_INT(pp_retry_action(1, poll | 1000, poll | 869, 131, 1, 0, 0), PP_RETRY_ADD);
	CHECK_EQ_INT(pp_retry_action(1, poll | 1000, poll | 869, 126, 0, 0, 0), PP_RETRY_NAME);
	CHECK_EQ_INT(pp_retry_action(1, poll | 1000, poll | 869, 100, 1, 0, 0), PP_RETRY_DROP);
	CHECK_EQ_INT(pp_retry_action(1, poll | 1000, poll | 869, 100, 0, 0, 0), PP_RETRY_DROP);
	CHECK_EQ_INT(pp_retry_action(1, poll | 1000, poll | 50, PP_LEAD_UNSEEN, 0, 0, 0),
		     PP_RETRY_NAME);
	/* A remainder is never longer than the full timeout, nor of another call, whatever the
	 * lead. */
	CHECK_EQ_INT(pp_retry_action(1, poll | 1000, poll | 2000, PP_LEAD_UNSEEN, 0, 0, 0),
		     PP_RETRY_DROP);
	CHECK_EQ_INT(pp_retry_action(1, poll5000, pause, PP_LEAD_UNSEEN, 1, 0, 0), PP_RETRY_DROP);
	/* Ran too long since (holding 0): the retry names nothing. */
	CHECK_EQ_INT(pp_retry_action(0, queue_lock, queue_lock, 0, 0, 0, 0), PP_RETRY_DROP);
}

/* Python's forced GIL switch: held waits named by the thread the waiter wakes as it takes
 * over, and the calls that teaches. Times in microseconds from the first held wait's start. */
TEST(test_takeover)
{
	const __u64 us = 1000, from = 1000 * us, held = 5000 * us, end = from + held;
	__u64 calls[PP_TAKEOVER_CALLS] = { 0 };

	/* The holder stayed out of any wait through the 5 ms and sleeps after it, woken 30 us in;
	 * or is woken on its CPU, going to sleep. */
	CHECK(pp_takeover_names_held(held, from, end, 30 * us, PP_PHASE_OFFCPU, end + 20 * us,
				     from - 10 * us));
	CHECK(pp_takeover_names_held(held, from, end, 30 * us, PP_PHASE_ONCPU, from - 10 * us,
				     from - 10 * us));
	/* Nothing held; the waiter ran too long since; the held waits too long (a 100 ms pause
	 * before the GIL's wait is no wait for the GIL). */
	CHECK(!pp_takeover_names_held(0, from, end, 30 * us, PP_PHASE_OFFCPU, end + 20 * us, 0));
	CHECK(!pp_takeover_names_held(held, from, end, PP_TAKEOVER_MAX_RUN_NS + 1, PP_PHASE_OFFCPU,
				      end + 20 * us, 0));
	CHECK(!pp_takeover_names_held(PP_ON_THE_WAY_MAX_NS + 1, from, end, 30 * us, PP_PHASE_OFFCPU,
				      end + 20 * us, 0));
	/* It slept before they ended (it was waiting too, not holding anything), or it waited
	 * while they lasted; or its record is no live thread's. */
	CHECK(!pp_takeover_names_held(held, from, end, 30 * us, PP_PHASE_OFFCPU, end - 1, 0));
	CHECK(!pp_takeover_names_held(held, from, end, 30 * us, PP_PHASE_OFFCPU, end + 20 * us,
				      from + 1));
	CHECK(!pp_takeover_names_held(held, from, end, 30 * us, PP_PHASE_UNKNOWN, end + 20 * us, 0));
	CHECK(!pp_takeover_names_held(held, from, end, 30 * us, PP_PHASE_EXITED, end + 20 * us, 0));

	/* Calls learnt: none is 0, each once, then over the slot each hashes to. */
	CHECK(!pp_takeover_call_known(calls, 0));
	pp_takeover_call_learn(calls, 0);
	CHECK_EQ_U64(calls[0], 0);
	for (__u64 c = 1; c <= PP_TAKEOVER_CALLS; c++) {
		pp_takeover_call_learn(calls, (0x100 + c) << 32);
		pp_takeover_call_learn(calls, (0x100 + c) << 32);
	}
	for (__u64 c = 1; c <= PP_TAKEOVER_CALLS; c++)
		CHECK(pp_takeover_call_known(calls, (0x100 + c) << 32));
	CHECK(!pp_takeover_call_known(calls, 0x200ULL << 32));
	pp_takeover_call_learn(calls, 0x200ULL << 32);
	CHECK(pp_takeover_call_known(calls, 0x200ULL << 32));
	CHECK(!pp_takeover_call_known(calls, 0x101ULL << 32));
	CHECK(pp_takeover_call_known(calls, 0x102ULL << 32));
	/* A call known is known by its remainder too (a GIL wait on poll, retried). */
	pp_takeover_call_learn(calls, 0x102ULL << 32 | 5000);
	CHECK(pp_takeover_call_known(calls, 0x102ULL << 32 | 4990));
}

/* Which timeouts are one call's: what remains of a deadline, never a pause before a wait. */
TEST(test_same_call)
{
	const __u64 poll = 7ULL << 32, epoll = 9ULL << 32, futex_ts = 5ULL << 32;

	CHECK(pp_same_call(poll | 5000, poll | 5000));
	CHECK(pp_same_call(poll | 4998, poll | 5000) && pp_same_call(poll | 5000, poll | 4998));
	/* An eighth of the longer, plus 1 ms: up to 626 ms of 5 s lost between clock and call. */
	CHECK(pp_same_call(poll | 4374, poll | 5000) && !pp_same_call(poll | 4373, poll | 5000));
	CHECK(pp_same_call(poll | 1, poll | 2) && pp_same_call(poll | 9, poll | 10));
	CHECK(!pp_same_call(poll | 3, poll | 5));
	/* asyncio's sleep(0.1) before a read with no timeout, or one of 200 ms: other calls. */
	CHECK(!pp_same_call(epoll | 100, epoll | 0xffffffff));
	CHECK(!pp_same_call(epoll | 0xffffffff, epoll | 0x7ffffff0));
	CHECK(pp_same_call(epoll | 0xffffffff, epoll | 0xffffffff));
	CHECK(!pp_same_call(epoll | 100, epoll | 200));
	/* Another signature (syscall, operation, the timespec's place) is another call. */
	CHECK(!pp_same_call(poll | 5000, epoll | 5000));
	CHECK(pp_same_call(futex_ts, futex_ts) && !pp_same_call(futex_ts, futex_ts + (1ULL << 32)));
	/* No call is none. */
	CHECK(!pp_same_call(0, 0));
	/* A shorter timeout within the lead before it, or any where that is unseen; an infinite
	 * one is no remainder. */
	CHECK(pp_retry_of(poll | 869, poll | 1000, 131) && !pp_retry_of(poll | 869, poll | 1000, 125));
	CHECK(pp_retry_of(poll | 869, poll | 1000, 131 - PP_LEAD_SLACK_MS));
	CHECK(pp_retry_of(poll | 1, poll | 5000, PP_LEAD_UNSEEN));
	CHECK(!pp_retry_of(epoll | 100, epoll | 0xffffffff, PP_LEAD_UNSEEN));
	CHECK(!pp_retry_of(poll | 869, epoll | 1000, PP_LEAD_UNSEEN));
	CHECK(!pp_retry_of(0, 0, PP_LEAD_UNSEEN));
	CHECK_EQ_INT(pp_lead_ms(0, 5000000), PP_LEAD_UNSEEN);
	CHECK_EQ_INT(pp_lead_ms(1000000, 132999999), 131);
	CHECK_EQ_INT(pp_lead_ms(1, 1ULL << 40), PP_LEAD_UNSEEN - 1);
	CHECK_EQ_INT(pp_lead_ms(5, 4), 0);
}

/* Which waits a timeout may hold back (x86-64 numbers), and what makes a retry the same call. */
TEST(test_retryable_wait_syscalls)
{
#if defined(__x86_64__)
	static const long retryable[] = { 7, 23, 202, 232, 270, 271, 281, 441, 449 };
	static const long not_retryable[] = { 0, 35, 230, 34, 61, -1, 1000 };
	const unsigned long ts = 0x7ffd1000, other_ts = 0x7ffd2000;
	const unsigned long wait_bitset = 0x89, wait_bitset_realtime = 0x189;

	/* A descriptor to wait on (poll's count is its second argument, select's its first). */
	for (size_t i = 0; i < sizeof(retryable) / sizeof(retryable[0]); i++)
		CHECK(pp_retry_call(retryable[i], 1, 1, ts, ts, ts));
	for (size_t i = 0; i < sizeof(not_retryable) / sizeof(not_retryable[0]); i++)
		CHECK(!pp_retry_call(not_retryable[i], 1, 1, ts, ts, ts));
	/* Python 3.10's time.sleep is select() on no descriptor; poll() on none sleeps too. */
	CHECK(!pp_retry_call(23, 0, 0, 0, 0, ts));
	CHECK(!pp_retry_call(270, 0, 0, 0, 0, ts));
	CHECK(!pp_retry_call(7, 0x7ffd0000, 0, 5000, 0, 0));
	CHECK(!pp_retry_call(271, 0x7ffd0000, 0, ts, 0, 0));
	CHECK(pp_retry_call(202, 0x7ffd0000, wait_bitset, 0, ts, 0));
	/* The DataLoader's Queue.get(timeout=5) again, on a new poll set: the same call; and
	 * with what remained of its deadline after a preemption. */
	CHECK_EQ_U64(pp_retry_call(7, 0x1000, 1, 5000, 0, 0), pp_retry_call(7, 0x2000, 1, 5000, 7, 9));
	CHECK(pp_same_call(pp_retry_call(7, 0x1000, 1, 5000, 0, 0),
			   pp_retry_call(7, 0x2000, 1, 4998, 0, 0)));
	CHECK(pp_same_call(pp_retry_call(232, 3, 0x1000, 2, 996, 0),
			   pp_retry_call(232, 3, 0x1000, 2, 1000, 0)));
	/* asyncio's sleep, then the read it awaits: epoll_wait(fd, .., 100) then (fd, .., -1). */
	CHECK(!pp_same_call(pp_retry_call(232, 3, 0x1000, 2, 100, 0),
			    pp_retry_call(232, 3, 0x1000, 2, -1, 0)));
	CHECK(!pp_same_call(pp_retry_call(281, 3, 0x1000, 2, 100, 0),
			    pp_retry_call(281, 3, 0x1000, 2, 0, 0)));
	CHECK(!pp_same_call(pp_retry_call(7, 0x1000, 1, 100, 0, 0),
			    pp_retry_call(7, 0x1000, 1, -1, 0, 0)));
	/* An int's upper half is not the caller's. */
	CHECK_EQ_U64(pp_retry_call(232, 3, 0x1000, 2, 0xdead0000ffffffffUL, 0),
		     pp_retry_call(232, 3, 0x1000, 2, 0xffffffffUL, 0));
	/* A deadline by pointer: its place is the call site's. The queue's lock, twice (each
	 * Condition.wait locks a new one), is one call; the GIL's condition, with its timespec
	 * elsewhere on the stack, another. */
	CHECK_EQ_U64(pp_retry_call(202, 0x5000, wait_bitset, 0, ts, 0),
		     pp_retry_call(202, 0x6000, wait_bitset, 0, ts, 0));
	CHECK(pp_retry_call(202, 0x5000, wait_bitset, 0, ts, 0) !=
	      pp_retry_call(202, 0x5000, wait_bitset, 0, other_ts, 0));
	/* stop.wait(0.1), then q.get(): a deadline, then none and another clock. */
	CHECK(pp_retry_call(202, 0x5000, wait_bitset, 0, ts, 0) !=
	      pp_retry_call(202, 0x5000, wait_bitset_realtime, 0, 0, 0));
	CHECK(pp_retry_call(202, 0x5000, wait_bitset, 0, ts, 0) !=
	      pp_retry_call(202, 0x5000, wait_bitset, 0, 0, 0));
	CHECK(pp_retry_call(271, 0x1000, 1, ts, 0, 0) != pp_retry_call(271, 0x1000, 1, 0, 0, 0));
	CHECK(pp_retry_call(23, 4, 0, 0, 0, ts) != pp_retry_call(23, 4, 0, 0, 0, 0));
	CHECK_EQ_U64(pp_retry_call(23, 4, 0, 0, 0, ts), pp_retry_call(23, 5, 0, 0, 0, ts));
	CHECK(pp_retry_call(23, 4, 0, 0, 0, ts) != pp_retry_call(23, 4, 0, 0, 0, other_ts));
	CHECK(pp_retry_call(441, 3, 0, 0, ts, 0) != pp_retry_call(441, 3, 0, 0, 0, 0));
	/* Another syscall with the same timeout is another call. */
	CHECK(!pp_same_call(pp_retry_call(7, 0x1000, 1, 100, 0, 0),
			    pp_retry_call(232, 3, 0x1000, 2, 100, 0)));
	CHECK(pp_retry_call(23, 4, 0, 0, 0, ts) != pp_retry_call(270, 4, 0, 0, 0, ts));
	CHECK(pp_retry_call(441, 1, 0, 0, ts, 0) != pp_retry_call(449, 1, 0, 0, ts, 0));
	/* A deadline, which a timer may end a wait at, or none (a pointer to none, -1 ms). */
	CHECK(pp_call_has_deadline(pp_retry_call(202, 0x5000, wait_bitset, 0, ts, 0)));
	CHECK(!pp_call_has_deadline(pp_retry_call(202, 0x5000, wait_bitset_realtime, 0, 0, 0)));
	CHECK(pp_call_has_deadline(pp_retry_call(7, 0x1000, 1, 100, 0, 0)));
	CHECK(!pp_call_has_deadline(pp_retry_call(7, 0x1000, 1, -1, 0, 0)));
	CHECK(pp_call_has_deadline(pp_retry_call(232, 3, 0x1000, 2, 1000, 0)));
	CHECK(!pp_call_has_deadline(pp_retry_call(281, 3, 0x1000, 2, -1, 0)));
	CHECK(pp_call_has_deadline(pp_retry_call(23, 4, 0, 0, 0, ts)));
	CHECK(!pp_call_has_deadline(pp_retry_call(23, 4, 0, 0, 0, 0)));
	CHECK(!pp_call_has_deadline(pp_retry_call(441, 3, 0, 0, 0, 0)));
	CHECK(!pp_call_has_deadline(0));
	/* Two waits with no deadline at one place are still one call. */
	CHECK(pp_same_call(pp_retry_call(202, 0x5000, wait_bitset, 0, 0, 0),
			   pp_retry_call(202, 0x6000, wait_bitset, 0, 0, 0)));
#else
	CHECK(!pp_retry_call(7, 1, 1, 5000, 0, 0));	/* held back nowhere else yet */
#endif
	CHECK(pp_retry_names(PP_DATA_WAIT) && pp_retry_names(PP_THREAD_WAIT) &&
	      pp_retry_names(PP_COMM_WAIT) && pp_retry_names(PP_IO_WAIT) && pp_retry_names(PP_GPU_WAIT));
	CHECK(!pp_retry_names(PP_OTHER) && !pp_retry_names(PP_RUNQ) && !pp_retry_names(PP_RUNNING));
}

TEST(test_close_exited_thread_wall_is_its_life)
{
	struct pp_thread t = { .phase = PP_PHASE_EXITED, .first_ns = 200 * MS, .exit_ns = 700 * MS,
			       .phase_start_ns = 700 * MS };
	struct thread_result r;

	t.ns[PP_RUNNING] = 300 * MS;
	t.ns[PP_DATA_WAIT] = 200 * MS;
	thread_close(&t, 0, 1000 * MS, 0, &r);
	CHECK(r.exited);
	CHECK_EQ_U64(r.wall_ns, 500 * MS);
	CHECK_EQ_U64(r.ns[PP_RUNNING] + r.ns[PP_DATA_WAIT], 500 * MS);
}

TEST(test_close_states_always_sum_to_wall)
{
	struct pp_thread t = { .phase = PP_PHASE_ONCPU, .phase_start_ns = 900 * MS };
	struct thread_result r;
	__u64 sum = 0;

	/* Slightly over-full, as when an event lands after the window's end was taken. */
	t.ns[PP_RUNNING] = 950 * MS;
	thread_close(&t, 0, 1000 * MS, 0, &r);
	for (int s = 0; s < PP_NR_STATES; s++)
		sum += r.ns[s];
	CHECK_EQ_U64(sum, r.wall_ns);
}

TEST(test_verdict_data_loading)
{
	__u64 trainer[PP_NR_STATES] = { [PP_RUNNING] = 250, [PP_DATA_WAIT] = 700, [PP_OTHER] = 50 };
	__u64 worker[PP_NR_STATES] = { [PP_RUNNING] = 900, [PP_RUNQ] = 50, [PP_OTHER] = 50 };
	struct thread_result th[3] = { mk(100, 100, trainer, 0), mk(201, 201, worker, 0),
				       mk(202, 202, worker, 0) };
	struct analysis_input in = input();
	struct analysis a;

	analyse(th, 3, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING);
	CHECK_EQ_INT(a.verdict_state, PP_DATA_WAIT);
	CHECK(near(a.verdict_fraction, 0.7));
	CHECK(near(a.speedup_bound, 1 / 0.3));
	CHECK_EQ_INT(a.trainer_index, 0);
	CHECK_EQ_INT(a.trainer_choice, TRAINER_MAIN_THREAD);
	CHECK_EQ_INT(th[1].role, ROLE_WORKER);
	CHECK_EQ_INT(a.roles[ROLE_WORKER].processes, 2);
	CHECK_EQ_INT(a.roles[ROLE_WORKER].threads, 2);
	CHECK(has_rec(&a, "more_workers"));
	CHECK(!has_rec(&a, "cheaper_transforms"));
	CHECK_EQ_INT(a.worker_loops.processes, 2);
	CHECK(has_rec(&a, "compute_share"));

	in.cpu_busy = 0.97;
	analyse(th, 3, &in, &a);
	CHECK(has_rec(&a, "cheaper_transforms"));
	CHECK(!has_rec(&a, "more_workers"));
}

TEST(test_verdict_data_loading_worker_evidence)
{
	__u64 trainer[PP_NR_STATES] = { [PP_RUNNING] = 100, [PP_DATA_WAIT] = 900 };
	__u64 io_worker[PP_NR_STATES] = { [PP_RUNNING] = 100, [PP_IO_WAIT] = 800, [PP_OTHER] = 100 };
	__u64 idle_worker[PP_NR_STATES] = { [PP_RUNNING] = 100, [PP_OTHER] = 900 };
	struct thread_result th[2] = { mk(100, 100, trainer, 0), mk(201, 201, io_worker, 0) };
	struct analysis_input in = input();
	struct analysis a;

	analyse(th, 2, &in, &a);
	CHECK(has_rec(&a, "faster_storage"));
	CHECK(!has_rec(&a, "ipc_collate"));

	th[1] = mk(201, 201, idle_worker, 0);
	analyse(th, 2, &in, &a);
	CHECK(has_rec(&a, "ipc_collate"));

	/* Workers waiting on network receives are not idle: their data is slow to come, and no
	 * hand-off tuning helps that. */
	__u64 net_worker[PP_NR_STATES] = { [PP_RUNNING] = 20, [PP_DATA_WAIT] = 970, [PP_OTHER] = 10 };
	th[1] = mk(201, 201, net_worker, 0);
	analyse(th, 2, &in, &a);
	CHECK(has_rec(&a, "network_data"));
	CHECK(!has_rec(&a, "ipc_collate"));
	CHECK(role_network_fraction(&a.worker_loops) > 0.96);
	CHECK(role_idle_fraction(&a.worker_loops) < 0.02);

	/* Without workers the data came over the network: more reads in flight, or a local
	 * copy. */
	analyse(th, 1, &in, &a);
	CHECK(has_rec(&a, "network_data"));
	CHECK(!has_rec(&a, "more_workers"));
}

TEST(test_verdict_gpu_by_gpu_calls)
{
	__u64 main_thread[PP_NR_STATES] = { [PP_OTHER] = 1000 };
	__u64 loop[PP_NR_STATES] = { [PP_RUNNING] = 300, [PP_GPU_WAIT] = 700 };
	struct thread_result th[2] = { mk(100, 100, main_thread, 0), mk(105, 100, loop, 5000) };
	struct analysis_input in = input();
	struct analysis a;

	analyse(th, 2, &in, &a);
	CHECK_EQ_INT(a.trainer_index, 1);
	CHECK_EQ_INT(a.trainer_choice, TRAINER_BY_GPU_CALLS);
	CHECK_EQ_INT(a.verdict, VERDICT_GPU);
	CHECK_EQ_INT(th[0].role, ROLE_HELPER);
	CHECK(has_rec(&a, "gpu_healthy"));

	in.gpu_sync_mean_us = 100;
	analyse(th, 2, &in, &a);
	CHECK(has_rec(&a, "fewer_host_syncs"));
	/* As many syncs, but each waits long for real GPU work: not the problem. */
	in.gpu_sync_mean_us = 6000;
	analyse(th, 2, &in, &a);
	CHECK(!has_rec(&a, "fewer_host_syncs"));

	in.tid_override = 100;
	analyse(th, 2, &in, &a);
	CHECK_EQ_INT(a.trainer_index, 0);
	CHECK_EQ_INT(a.trainer_choice, TRAINER_BY_OPTION);

	in.tid_override = 999;
	analyse(th, 2, &in, &a);
	CHECK_EQ_INT(a.trainer_index, -1);
	CHECK(has_rec(&a, "no_trainer"));
}

TEST(test_verdict_io_contention_comm)
{
	__u64 io[PP_NR_STATES] = { [PP_RUNNING] = 300, [PP_IO_WAIT] = 600, [PP_RUNQ] = 100 };
	__u64 runq[PP_NR_STATES] = { [PP_RUNNING] = 400, [PP_RUNQ] = 600 };
	__u64 comm[PP_NR_STATES] = { [PP_RUNNING] = 400, [PP_COMM_WAIT] = 500, [PP_OTHER] = 100 };
	struct thread_result th[1] = { mk(100, 100, io, 0) };
	struct analysis_input in = input();
	struct analysis a;

	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_IO);
	CHECK(has_rec(&a, "load_in_workers"));
	th[0] = mk(100, 100, runq, 0);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_CONTENTION);
	CHECK(has_rec(&a, "fewer_threads"));
	th[0] = mk(100, 100, comm, 0);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_COMM);
}

TEST(test_verdict_threshold_and_cpu)
{
	__u64 cpu[PP_NR_STATES] = { [PP_RUNNING] = 810, [PP_DATA_WAIT] = 190 };
	__u64 idle[PP_NR_STATES] = { [PP_RUNNING] = 100, [PP_OTHER] = 850, [PP_DATA_WAIT] = 50 };
	struct thread_result th[1] = { mk(100, 100, cpu, 0) };
	struct analysis_input in = input();
	struct analysis a;

	/* 19% data wait is under the 20% threshold: compute dominates. */
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_CPU);
	CHECK(near(a.verdict_fraction, 0.81));
	CHECK(has_rec(&a, "less_work_per_step"));
	/* Compute is no stall: no 1/(1-f) promise, on the line or beside the advice. */
	CHECK(near(a.speedup_bound, 1.0));
	CHECK_MSG(!strstr(a.verdict_line, "at most"), "%s", a.verdict_line);
	for (int i = 0; i < a.nr_recs; i++)
		CHECK_MSG(a.recs[i].speedup_bound <= 1.0 || !strcmp(a.recs[i].id, "intra_op_threads") ||
			  !strcmp(a.recs[i].id, "secondary_stall"), "%s", a.recs[i].id);

	in.threshold = 0.15;
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING);

	in.threshold = 0.20;
	th[0] = mk(100, 100, idle, 0);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_UNDETERMINED);
}

/* GPU libraries mapped but not probed: a spinning synchronise reads as compute, so neither
 * CPU-BOUND nor "no dominant stall" may be claimed; a data wait is still a data wait. */
TEST(test_gpu_unprobed)
{
	__u64 spin[PP_NR_STATES] = { [PP_RUNNING] = 950, [PP_OTHER] = 50 };
	__u64 idle[PP_NR_STATES] = { [PP_RUNNING] = 100, [PP_OTHER] = 900 };
	__u64 data[PP_NR_STATES] = { [PP_RUNNING] = 300, [PP_DATA_WAIT] = 700 };
	struct thread_result th[1] = { mk(100, 100, spin, 0) };
	struct analysis_input in = input();
	struct analysis a;

	in.gpu_unprobed = true;
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_GPU_UNOBSERVED);
	CHECK_STR(verdict_id(a.verdict), "gpu_unobserved");
	CHECK(near(a.speedup_bound, 1.0));
	CHECK(has_rec(&a, "probe_gpu"));
	CHECK(!has_rec(&a, "less_work_per_step"));
	CHECK(strstr(a.verdict_line, "may be GPU wait"));
	CHECK(!strstr(a.verdict_line, "at most"));

	th[0] = mk(100, 100, idle, 0);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_GPU_UNOBSERVED);

	th[0] = mk(100, 100, data, 0);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING);

	in.gpu_unprobed = false;
	th[0] = mk(100, 100, spin, 0);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_CPU);
}

TEST(test_secondary_stall)
{
	__u64 mixed[PP_NR_STATES] = { [PP_RUNNING] = 200, [PP_DATA_WAIT] = 450, [PP_IO_WAIT] = 350 };
	struct thread_result th[1] = { mk(100, 100, mixed, 0) };
	struct analysis_input in = input();
	struct analysis a;

	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING);
	CHECK(has_rec(&a, "secondary_stall"));
	for (int i = 0; i < a.nr_recs; i++)
		if (!strcmp(a.recs[i].id, "secondary_stall")) {
			CHECK_MSG(strstr(a.recs[i].evidence, "IO_WAIT also takes 35%"), "%s",
				  a.recs[i].evidence);
			CHECK_MSG(strstr(a.recs[i].text, "I/O BOUND"), "%s", a.recs[i].text);
			CHECK(near(a.recs[i].speedup_bound, 1 / 0.65));
		}
}

/* The largest stall carries the verdict, wherever it sits in the list of stall kinds. */
TEST(test_largest_stall_wins)
{
	__u64 gpu_over_data[PP_NR_STATES] = { [PP_RUNNING] = 150, [PP_DATA_WAIT] = 250, [PP_GPU_WAIT] = 600 };
	__u64 runq_over_io[PP_NR_STATES] = { [PP_RUNNING] = 200, [PP_IO_WAIT] = 300, [PP_RUNQ] = 500 };
	struct thread_result th[1] = { mk(100, 100, gpu_over_data, 0) };
	struct analysis_input in = input();
	struct analysis a;

	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_GPU);
	CHECK(near(a.verdict_fraction, 0.6));
	CHECK(near(a.speedup_bound, 2.5));
	th[0] = mk(100, 100, runq_over_io, 0);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_CONTENTION);
}

/* /proc could not tell the machine's load: no advice may quote a made-up figure. */
TEST(test_unknown_cpu_load)
{
	__u64 trainer[PP_NR_STATES] = { [PP_RUNNING] = 200, [PP_DATA_WAIT] = 800 };
	__u64 busy_worker[PP_NR_STATES] = { [PP_RUNNING] = 950, [PP_OTHER] = 50 };
	__u64 contended[PP_NR_STATES] = { [PP_RUNNING] = 400, [PP_RUNQ] = 600 };
	struct thread_result th[2] = { mk(100, 100, trainer, 0), mk(200, 200, busy_worker, 0) };
	struct analysis_input in = input();
	struct analysis a;

	in.cpu_busy = -1;
	in.runnable_avg = -1;
	analyse(th, 2, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING);
	CHECK(has_rec(&a, "more_workers_or_cheaper_transforms"));
	CHECK(!has_rec(&a, "more_workers") && !has_rec(&a, "cheaper_transforms"));
	th[0] = mk(100, 100, contended, 0);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_CONTENTION);
	for (int i = 0; i < a.nr_recs; i++)
		CHECK_MSG(!strstr(a.recs[i].text, "-1"), "%s", a.recs[i].text);
	CHECK(has_rec(&a, "fewer_threads") && !strstr(a.recs[0].text, "busy"));
}

/* No stall to remove: the verdict promises no speed-up. */
TEST(test_no_dominant_stall_has_no_bound)
{
	__u64 sleeper[PP_NR_STATES] = { [PP_RUNNING] = 50, [PP_OTHER] = 950 };
	struct thread_result th[1] = { mk(100, 100, sleeper, 0) };
	struct analysis_input in = input();
	struct analysis a;

	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_UNDETERMINED);
	CHECK(near(a.speedup_bound, 1.0));
}

/* Worker main threads lost to a full thread map: the worker role still counts as workers. */
TEST(test_worker_main_thread_missing)
{
	__u64 trainer[PP_NR_STATES] = { [PP_RUNNING] = 200, [PP_DATA_WAIT] = 800 };
	__u64 busy[PP_NR_STATES] = { [PP_RUNNING] = 900, [PP_OTHER] = 100 };
	struct thread_result th[2] = { mk(100, 100, trainer, 0), mk(201, 200, busy, 0) };
	struct analysis_input in = input();
	struct analysis a;

	analyse(th, 2, &in, &a);
	CHECK(!a.worker_loops_are_main_threads);
	CHECK_EQ_INT(a.worker_loops.processes, 1);
	CHECK(!has_rec(&a, "network_data"));
	CHECK(has_rec(&a, "more_workers"));
	CHECK(!has_rec(&a, "ipc_collate"));
}

/* A wakers-map record: wakee's off-CPU ms that waker's wakeups ended as cause. */
static struct wake_record wk(__u32 wakee, __u32 waker, __u32 tgid, __u32 ctx, __u32 cause,
			     __u64 ms, __u64 count)
{
	struct wake_record r = { .wakee = wakee, .waker = waker, .waker_tgid = tgid, .ctx = ctx,
				 .cause = cause, .ns = ms * MS, .count = count };
	return r;
}

/* The stall model's chain rule: relays pass on DATA, COMM, IO and GPU, briefly and shallowly. */
TEST(test_chain_rule)
{
	const __u64 us = 1000;

	CHECK_EQ_U64(pp_chain_cause(PP_DATA_WAIT, 0, 100 * us, 200 * us), PP_DATA_WAIT);
	CHECK_EQ_U64(pp_chain_cause(PP_COMM_WAIT, 1, 100 * us, 200 * us), PP_COMM_WAIT);
	CHECK_EQ_U64(pp_chain_cause(PP_IO_WAIT, 0, 0, 0), PP_IO_WAIT);
	CHECK_EQ_U64(pp_chain_cause(PP_GPU_WAIT, 3, PP_CHAIN_MAX_RUN_NS, PP_CHAIN_MAX_AGE_NS),
		     PP_GPU_WAIT);
	/* Only the four causes a relay can carry. */
	CHECK_EQ_U64(pp_chain_cause(PP_THREAD_WAIT, 0, 0, 0), PP_NO_CAUSE);
	CHECK_EQ_U64(pp_chain_cause(PP_OTHER, 0, 0, 0), PP_NO_CAUSE);
	CHECK_EQ_U64(pp_chain_cause(PP_RUNQ, 0, 0, 0), PP_NO_CAUSE);
	/* Bounded in depth, in work done since, and in time. */
	CHECK_EQ_U64(pp_chain_cause(PP_DATA_WAIT, PP_CHAIN_MAX_DEPTH, 0, 0), PP_NO_CAUSE);
	CHECK_EQ_U64(pp_chain_cause(PP_DATA_WAIT, 0, PP_CHAIN_MAX_RUN_NS + 1, 0), PP_NO_CAUSE);
	CHECK_EQ_U64(pp_chain_cause(PP_DATA_WAIT, 0, 0, PP_CHAIN_MAX_AGE_NS + 1), PP_NO_CAUSE);
}

/* What ended the trainer's waits: per waker, interrupts per context, most time first. */
/* A trainer whose waits a process outside the job ends (a data service over a Unix socket):
 * no stall the model names, but the advice names that process. A minor outside waker does not
 * get it. */
TEST(test_outside_waker)
{
	__u64 trainer[PP_NR_STATES] = { [PP_RUNNING] = 220, [PP_OTHER] = 780 };
	struct thread_result th[1] = { mk(100, 100, trainer, 0) };
	struct wake_record w[] = {
		wk(100, 555, 555, PP_WAKE_TASK, PP_OTHER, 760, 300),
		wk(100, 0, 0, PP_WAKE_HARDIRQ, PP_OTHER, 20, 20),
	};
	struct analysis_input in = input();
	struct analysis a;

	in.wakes = w;
	in.nr_wakes = 2;
	analyse(th, 1, &in, &a);
	CHECK(has_rec(&a, "outside_waker"));
	CHECK(has_rec(&a, "undetermined"));

	/* A thread gone from one of the job's own processes (pid 555 traced) is no stranger. */
	{
		__u64 worker[PP_NR_STATES] = { [PP_RUNNING] = 500, [PP_OTHER] = 500 };
		struct thread_result th2[2] = { th[0], mk(556, 555, worker, 0) };

		analyse(th2, 2, &in, &a);
		CHECK(!has_rec(&a, "outside_waker"));
	}

	w[0] = wk(100, 555, 555, PP_WAKE_TASK, PP_OTHER, 100, 30);
	w[1] = wk(100, 0, 0, PP_WAKE_HARDIRQ, PP_OTHER, 680, 300);
	analyse(th, 1, &in, &a);
	CHECK(!has_rec(&a, "outside_waker"));
}

/* A loop that runs a command each step and waits for it: its children's exits end its waits
 * (OTHER, sched.bpf.c), summed over every child, not only the longest wakers. */
TEST(test_waits_on_children)
{
	__u64 trainer[PP_NR_STATES] = { [PP_RUNNING] = 250, [PP_OTHER] = 750 };
	__u64 child[PP_NR_STATES] = { [PP_RUNNING] = 5, [PP_OTHER] = 25 };
	struct thread_result th[21];
	struct wake_record w[20];
	struct analysis_input in = input();
	struct analysis a;

	th[0] = mk(100, 100, trainer, 0);
	for (int i = 0; i < 20; i++) {
		th[i + 1] = mk(300 + i, 300 + i, child, 0);
		th[i + 1].exited = true;
		w[i] = wk(100, 300 + i, 300 + i, PP_WAKE_TASK, PP_OTHER, 37, 1);
	}
	in.wakes = w;
	in.nr_wakes = 20;
	analyse(th, 21, &in, &a);
	CHECK_EQ_INT(a.children_exit_procs, 20);
	CHECK_EQ_U64(a.children_exit_ns, 740 * MS);
	CHECK(has_rec(&a, "waits_on_children"));

	/* Children still running that wake it (a pipe's output) are not waited for by exit. */
	for (int i = 0; i < 20; i++)
		th[i + 1].exited = false;
	analyse(th, 21, &in, &a);
	CHECK_EQ_INT(a.children_exit_procs, 0);
	CHECK(!has_rec(&a, "waits_on_children"));
}

TEST(test_waited_on)
{
	__u64 trainer[PP_NR_STATES] = { [PP_RUNNING] = 300, [PP_DATA_WAIT] = 600, [PP_OTHER] = 100 };
	__u64 worker[PP_NR_STATES] = { [PP_RUNNING] = 950, [PP_OTHER] = 50 };
	struct thread_result th[2] = { mk(100, 100, trainer, 0), mk(201, 201, worker, 0) };
	struct wake_record w[] = {
		wk(100, 201, 201, PP_WAKE_TASK, PP_DATA_WAIT, 550, 50),
		wk(100, 201, 201, PP_WAKE_TASK, PP_DATA_WAIT, 50, 5),	/* summed */
		wk(100, 0, 0, PP_WAKE_HARDIRQ, PP_OTHER, 60, 30),
		wk(100, 0, 0, PP_WAKE_HARDIRQ, PP_OTHER, 40, 10),	/* one hardirq waker */
		wk(100, 0, 0, PP_WAKE_SOFTIRQ_NET, PP_COMM_WAIT, 1, 1),
		wk(201, 100, 100, PP_WAKE_TASK, PP_THREAD_WAIT, 500, 50),	/* not the trainer's */
	};
	struct analysis_input in = input();
	struct analysis a;

	in.wakes = w;
	in.nr_wakes = 6;
	analyse(th, 2, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING);
	CHECK_EQ_INT(a.nr_waited_on, 3);
	CHECK_EQ_U64(a.waited_total_ns, 701 * MS);
	CHECK_EQ_U64(a.waited_on[0].tid, 201);
	CHECK_EQ_INT(a.waited_on[0].thread_index, 1);
	CHECK_EQ_U64(a.waited_on[0].ns, 600 * MS);
	CHECK_EQ_U64(a.waited_on[0].cause_ns[PP_DATA_WAIT], 600 * MS);
	CHECK_EQ_U64(a.waited_on[0].wakeups, 55);
	CHECK_EQ_U64(a.waited_on[1].ctx, PP_WAKE_HARDIRQ);
	CHECK_EQ_U64(a.waited_on[1].ns, 100 * MS);
	CHECK_EQ_INT(a.waited_on[1].thread_index, -1);
	CHECK_EQ_U64(a.waited_on[2].ctx, PP_WAKE_SOFTIRQ_NET);
	CHECK_EQ_INT(a.verdict_waited_on, -1);

	/* Without records (the daemon) nothing is claimed. */
	in.wakes = NULL;
	in.nr_wakes = 0;
	analyse(th, 2, &in, &a);
	CHECK_EQ_INT(a.nr_waited_on, 0);
}

/* THREAD_WAIT is a stall: fed step after step by a busy helper, the trainer is data-loading
 * bound on a thread loader; the same wait on a mostly sleeping thread is waiting on it. */
TEST(test_thread_verdicts)
{
	__u64 trainer[PP_NR_STATES] = { [PP_RUNNING] = 270, [PP_THREAD_WAIT] = 700, [PP_OTHER] = 30 };
	__u64 busy[PP_NR_STATES] = { [PP_RUNNING] = 900, [PP_THREAD_WAIT] = 100 };
	__u64 sleepy[PP_NR_STATES] = { [PP_RUNNING] = 50, [PP_OTHER] = 900, [PP_THREAD_WAIT] = 50 };
	struct thread_result th[3] = { mk(100, 100, trainer, 0), mk(101, 100, busy, 0),
				       mk(102, 100, sleepy, 0) };
	struct wake_record w[] = {
		wk(100, 101, 100, PP_WAKE_TASK, PP_THREAD_WAIT, 650, 40),
		wk(100, 102, 100, PP_WAKE_TASK, PP_THREAD_WAIT, 50, 3),
	};
	struct analysis_input in = input();
	struct analysis a;

	memcpy(th[1].comm, "prefetch", 9);
	in.wakes = w;
	in.nr_wakes = 2;
	analyse(th, 3, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING_THREAD);
	CHECK_EQ_INT(a.verdict_state, PP_THREAD_WAIT);
	CHECK(near(a.verdict_fraction, 0.7));
	CHECK_EQ_INT(a.verdict_waited_on, 0);
	CHECK_EQ_U64(a.waited_on[0].tid, 101);
	CHECK(has_rec(&a, "loader_thread_to_workers"));
	CHECK_MSG(strstr(a.verdict_line, "ended by thread 101 (prefetch)"), "%s", a.verdict_line);
	CHECK_STR(verdict_name(a.verdict), "DATA-LOADING BOUND (thread loader)");

	/* The producer starved of CPU by other jobs (on-CPU 30%, runnable 60%) is still the
	 * loader: busy is on-CPU or waiting for a CPU. */
	{
		__u64 starved[PP_NR_STATES] = { [PP_RUNNING] = 300, [PP_RUNQ] = 600,
						[PP_THREAD_WAIT] = 100 };

		th[1] = mk(101, 100, starved, 0);
		analyse(th, 3, &in, &a);
		CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING_THREAD);
		th[1] = mk(101, 100, busy, 0);
		memcpy(th[1].comm, "prefetch", 9);
	}

	/* The same busy thread, most of the THREAD_WAIT the GIL taken back from it after
	 * timeouts (its wakeups at the handovers are many and brief): a holder, not a loader. */
	th[0].gil_ns = 360 * MS;
	analyse(th, 3, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_WAITING_ON_THREAD);
	CHECK_EQ_U64(a.waited_on[a.verdict_waited_on].tid, 101);
	th[0].gil_ns = 300 * MS;
	analyse(th, 3, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING_THREAD);
	th[0].gil_ns = 0;
	/* Its wakeups ended little of the THREAD_WAIT themselves (brief retries after waits a
	 * timer ended, named by them): many wakeups are no feeder's. */
	w[0].ns = 10 * MS;
	w[1].ns = 5 * MS;
	analyse(th, 3, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_WAITING_ON_THREAD);
	CHECK_EQ_U64(a.waited_on[a.verdict_waited_on].tid, 101);
	w[0].ns = 650 * MS;
	w[1].ns = 50 * MS;

	/* The same waits ended by a thread that mostly sleeps: a lock or GIL holder. */
	w[0].waker = 102;
	w[1].waker = 101;
	analyse(th, 3, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_WAITING_ON_THREAD);
	CHECK_EQ_U64(a.waited_on[a.verdict_waited_on].tid, 102);
	CHECK(has_rec(&a, "thread_contention"));

	/* A busy thread that ended the waits only twice is no feeder, step after step. */
	w[0].waker = 101;
	w[0].count = 2;
	w[1].waker = 102;
	analyse(th, 3, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_WAITING_ON_THREAD);

	/* A trainer idle on its threads is never CPU-BOUND, even under the threshold. */
	{
		__u64 idle[PP_NR_STATES] = { [PP_RUNNING] = 400, [PP_THREAD_WAIT] = 190,
					     [PP_IO_WAIT] = 150, [PP_OTHER] = 260 };

		th[0] = mk(100, 100, idle, 0);
		in.wakes = NULL;
		in.nr_wakes = 0;
		analyse(th, 3, &in, &a);
		CHECK_EQ_INT(a.verdict, VERDICT_UNDETERMINED);
	}
}

/* Every stall of 10% or more is named in the verdict line, and one within a few points of the
 * threshold is flagged as such, so attaches on either side of it tell the same story. */
TEST(test_near_threshold)
{
	__u64 under[PP_NR_STATES] = { [PP_RUNNING] = 770, [PP_IO_WAIT] = 190, [PP_RUNQ] = 40 };
	__u64 over[PP_NR_STATES] = { [PP_RUNNING] = 750, [PP_IO_WAIT] = 210, [PP_RUNQ] = 40 };
	__u64 far[PP_NR_STATES] = { [PP_RUNNING] = 600, [PP_IO_WAIT] = 400 };
	__u64 two[PP_NR_STATES] = { [PP_RUNNING] = 500, [PP_DATA_WAIT] = 300, [PP_THREAD_WAIT] = 120,
				    [PP_OTHER] = 80 };
	struct thread_result th[1] = { mk(100, 100, under, 0) };
	struct analysis_input in = input();
	struct analysis a;

	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_CPU);
	CHECK_EQ_INT(a.nr_stalls, 1);
	CHECK_EQ_INT(a.stalls[0].state, PP_IO_WAIT);
	CHECK(a.stalls[0].near_threshold);
	CHECK(a.near_threshold);
	CHECK_MSG(strstr(a.verdict_line, "IO_WAIT 19.0% (near the threshold)"), "%s", a.verdict_line);

	th[0] = mk(100, 100, over, 0);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_IO);
	CHECK(a.near_threshold);
	CHECK_MSG(strstr(a.verdict_line, "IO_WAIT is 21.0% of the trainer's time (near the threshold)"),
		  "%s", a.verdict_line);

	th[0] = mk(100, 100, far, 0);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_IO);
	CHECK(!a.near_threshold);
	CHECK_MSG(!strstr(a.verdict_line, "near"), "%s", a.verdict_line);

	/* Both notable stalls, largest first; the one carrying the verdict is not repeated. */
	th[0] = mk(100, 100, two, 0);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING);
	CHECK_EQ_INT(a.nr_stalls, 2);
	CHECK_EQ_INT(a.stalls[0].state, PP_DATA_WAIT);
	CHECK_EQ_INT(a.stalls[1].state, PP_THREAD_WAIT);
	CHECK_MSG(strstr(a.verdict_line, "; also THREAD_WAIT 12.0%;"), "%s", a.verdict_line);
}

/* A wait no wakeup named by the time the maps were read is OTHER, and said to be open. */
TEST(test_close_open_wait)
{
	struct pp_thread t = { .tgid = 7, .phase = PP_PHASE_OFFCPU, .phase_start_ns = 900 * MS };
	struct thread_result r;

	t.ns[PP_DATA_WAIT] = 900 * MS;
	thread_close(&t, 0, 1000 * MS, 0, &r);
	CHECK_EQ_U64(r.ns[PP_OTHER], 100 * MS);
	CHECK_EQ_U64(r.open_wait_ns, 100 * MS);

	/* Storage waits are known at switch-out: not open. Nor is a thread that runs. */
	t.offcpu_iowait = 1;
	thread_close(&t, 0, 1000 * MS, 0, &r);
	CHECK_EQ_U64(r.open_wait_ns, 0);
	t.offcpu_iowait = 0;
	t.phase = PP_PHASE_ONCPU;
	thread_close(&t, 0, 1000 * MS, 0, &r);
	CHECK_EQ_U64(r.open_wait_ns, 0);
}

/* A wait no wakeup named could be any stall: it withholds the verdict only when it could
 * change it, i.e. when it is over the threshold and larger than every named stall. */
TEST(test_verdict_wait_not_ended)
{
	/* RUNNING, RUNQ, GPU, IO, DATA, THREAD, COMM, OTHER (ms) */
	const __u64 all_open[PP_NR_STATES] = { 0, 0, 0, 0, 0, 0, 0, 1000 };
	const __u64 data_then_open[PP_NR_STATES] = { 10, 0, 0, 0, 690, 0, 0, 300 };
	const __u64 data_under_open[PP_NR_STATES] = { 10, 0, 0, 0, 400, 0, 0, 590 };
	const __u64 compute_then_open[PP_NR_STATES] = { 700, 0, 0, 0, 0, 0, 0, 300 };
	const __u64 compute_small_open[PP_NR_STATES] = { 850, 0, 0, 0, 0, 0, 0, 150 };
	struct analysis_input in = input();
	struct thread_result th[1];
	struct analysis a;

	th[0] = mk(100, 100, all_open, 0);
	th[0].open_wait_ns = 1000 * MS;
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_WAIT_NOT_ENDED);
	CHECK_STR(verdict_id(a.verdict), "wait_not_ended");
	CHECK(near(a.speedup_bound, 1.0));
	CHECK(has_rec(&a, "trace_longer"));
	CHECK(has_rec(&a, "check_hang"));
	CHECK_MSG(strstr(a.verdict_line, "last 100.0% of the window") &&
		  !strstr(a.verdict_line, "speed the loop"), "%s", a.verdict_line);

	CHECK(!has_rec(&a, "loop_in_thread"));	/* no other thread did anything */

	/* The loop in a thread of its own, the main thread in join(): the thread is named. */
	{
		const __u64 loop[PP_NR_STATES] = { [PP_RUNNING] = 100, [PP_DATA_WAIT] = 900 };
		const __u64 idle[PP_NR_STATES] = { [PP_OTHER] = 1000 };
		struct thread_result th3[3] = { th[0], mk(102, 100, loop, 0), mk(103, 100, idle, 0) };
		const char *text = NULL;

		analyse(th3, 3, &in, &a);
		CHECK_EQ_INT(a.verdict, VERDICT_WAIT_NOT_ENDED);
		for (int i = 0; i < a.nr_recs; i++)
			if (!strcmp(a.recs[i].id, "loop_in_thread"))
				text = a.recs[i].text;
		CHECK_MSG(text && strstr(text, "102 (DATA_WAIT 90%)") && !strstr(text, "103"), "%s",
			  text ? text : "no loop_in_thread");
	}

	/* Closed waits alone are no reason: the same OTHER, named (timers), is undetermined. */
	th[0].open_wait_ns = 0;
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_UNDETERMINED);

	/* 69% named data wait: whatever the open 30% was, the data wait is the largest stall. */
	th[0] = mk(100, 100, data_then_open, 0);
	th[0].open_wait_ns = 300 * MS;
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING);

	/* 59% open beside 40% data: it could be a larger stall of another kind. */
	th[0] = mk(100, 100, data_under_open, 0);
	th[0].open_wait_ns = 590 * MS;
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_WAIT_NOT_ENDED);
	CHECK_MSG(strstr(a.verdict_line, "also DATA_WAIT 40.0%"), "%s", a.verdict_line);

	/* On-CPU 70% with 30% open: a 30% stall would beat compute, so no CPU-BOUND... */
	th[0] = mk(100, 100, compute_then_open, 0);
	th[0].open_wait_ns = 300 * MS;
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_WAIT_NOT_ENDED);
	/* ...but 15% open is under the threshold: no stall can come of it. */
	th[0] = mk(100, 100, compute_small_open, 0);
	th[0].open_wait_ns = 150 * MS;
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_CPU);
}

/* Syncs that wait long mean a GPU far behind the CPU: the verdicts that blocked launches
 * could fake are withheld; a loop whose syncs are short, or a stall of its own, keeps its own. */
TEST(test_gpu_backlog)
{
	/* the loop that syncs every 500 steps: spinning launches, waits on the autograd thread */
	__u64 nosync[PP_NR_STATES] = { [PP_RUNNING] = 613, [PP_GPU_WAIT] = 150,
				       [PP_THREAD_WAIT] = 237 };
	__u64 compute[PP_NR_STATES] = { [PP_RUNNING] = 900, [PP_GPU_WAIT] = 100 };
	__u64 data[PP_NR_STATES] = { [PP_RUNNING] = 100, [PP_GPU_WAIT] = 150, [PP_DATA_WAIT] = 750 };
	struct thread_result th[1] = { mk(100, 100, nosync, 1) };
	struct analysis_input in = input();
	struct analysis a;

	in.gpu_sync_mean_us = 451783;
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_GPU_BACKLOG);
	CHECK_STR(verdict_id(a.verdict), "gpu_backlog");
	CHECK(near(a.speedup_bound, 1.0));
	CHECK(has_rec(&a, "sync_to_measure"));
	CHECK(!has_rec(&a, "compute_share") && !has_rec(&a, "secondary_stall"));
	CHECK_MSG(strstr(a.verdict_line, "wait 452 ms on average") &&
		  strstr(a.verdict_line, "RUNNING (61.3%)"), "%s", a.verdict_line);

	th[0] = mk(100, 100, compute, 3);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_GPU_BACKLOG);
	/* Short syncs: the queue is near empty, the CPU side is the bottleneck. */
	in.gpu_sync_mean_us = 800;
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_CPU);
	/* Nor is a data wait made of GPU time; and no trainer syncs, no evidence. */
	in.gpu_sync_mean_us = 451783;
	th[0] = mk(100, 100, data, 2);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_DATA_LOADING);
	th[0] = mk(100, 100, compute, 0);
	analyse(th, 1, &in, &a);
	CHECK_EQ_INT(a.verdict, VERDICT_CPU);
}

/* Shares that sum past 1 by a rounding error give no negative idle. */
TEST(test_idle_never_negative)
{
	struct role_result r = { .wall_ns = 5 };

	/* 1 - 0.4 - 0.2 - 0.4 is -5.6e-17 in doubles */
	r.ns[PP_RUNNING] = 2;
	r.ns[PP_RUNQ] = 1;
	r.ns[PP_IO_WAIT] = 2;
	CHECK(role_idle_fraction(&r) >= 0);
	CHECK(!signbit(role_idle_fraction(&r)));
}

int main(void)
{
	RUN_TEST(test_names);
	RUN_TEST(test_speedup_bound);
	RUN_TEST(test_close_oncpu);
	RUN_TEST(test_close_gpu_and_iowait);
	RUN_TEST(test_close_unknown_uses_proc_state);
	RUN_TEST(test_close_exited_thread_wall_is_its_life);
	RUN_TEST(test_close_states_always_sum_to_wall);
	RUN_TEST(test_verdict_data_loading);
	RUN_TEST(test_verdict_data_loading_worker_evidence);
	RUN_TEST(test_verdict_gpu_by_gpu_calls);
	RUN_TEST(test_verdict_io_contention_comm);
	RUN_TEST(test_verdict_threshold_and_cpu);
	RUN_TEST(test_secondary_stall);
	RUN_TEST(test_largest_stall_wins);
	RUN_TEST(test_unknown_cpu_load);
	RUN_TEST(test_no_dominant_stall_has_no_bound);
	RUN_TEST(test_worker_main_thread_missing);
	RUN_TEST(test_close_open_wait);
	RUN_TEST(test_verdict_wait_not_ended);
	RUN_TEST(test_idle_never_negative);
	RUN_TEST(test_gpu_unprobed);
	RUN_TEST(test_gpu_backlog);
	RUN_TEST(test_chain_rule);
	RUN_TEST(test_close_woken_without_switch_in);
	RUN_TEST(test_close_retry_of_timed_out_wait);
	RUN_TEST(test_close_chain_named_before);
	RUN_TEST(test_retry_run_budget);
	RUN_TEST(test_held_run_budget_of_a_cut_wait);
	RUN_TEST(test_retry_action_of_a_known_match);
	RUN_TEST(test_retry_actions);
	RUN_TEST(test_takeover);
	RUN_TEST(test_same_call);
	RUN_TEST(test_retryable_wait_syscalls);
	RUN_TEST(test_waited_on);
	RUN_TEST(test_outside_waker);
	RUN_TEST(test_waits_on_children);
	RUN_TEST(test_thread_verdicts);
	RUN_TEST(test_near_threshold);
	return unit_summary();
}

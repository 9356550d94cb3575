// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The maps and globals every part of pipeprof's BPF object shares (pipeprof.bpf.h declares
 * them for the others), and the licence. */
#define PP_DEFINE_STATE
#include "pipeprof.bpf.h"

const volatile bool sched_switch_has_prev_state = true;
const volatile bool has_block_io_start = true;
const volatile __u8 dispatch_id = 0;
/* --tid: the trainer, when the user named it; 0 lets the wake rules guess. */
const volatile __u32 trainer_tid = 0;
/* `pipeprof hist`: which histograms to keep (bit per enum pp_hist_kind), per what, and the
 * time unit of their slots in ns (1000: usecs, 1000000: msecs, as BCC's -m). */
const volatile __u32 hist_kinds = 0;
const volatile __u32 hist_keying = PP_HKEY_NONE;
const volatile __u64 hist_time_div = 1000;
/* The thread whose waits are sent with their Python stacks (pystack.bpf.c); 0: none. */
const volatile __u32 wait_stack_tid = 0;
/* Or every thread of the root process, or of its descendants (enum pp_wait_stack_scope). */
const volatile __u32 wait_stack_scope = PP_WAIT_STACKS_TID;
/* The report's steps: a record per outermost backward pass. */
const volatile bool step_records_on = false;
/* The step probe is attached (hist step, the report's steps): on the blocking calls' programs. */
const volatile bool step_probe_on = false;
/* Whose waits for a batch mark step boundaries too, for jobs with no backward pass; 0: none. */
const volatile __u32 step_wait_tid = 0;
/* Record who ended each wait (the wakers map), for the report's "waited on". */
const volatile bool record_wakers = false;
/* `pipeprof record`: episodes to the episodes ring buffer, at most record_cap per CPU per
 * PP_EPISODE_SLOT_NS (userspace derives it from the job-wide rate cap). */
const volatile bool record_on = false;
const volatile __u32 record_cap = 1000;
/* Where this CPU's preempt count lies relative to its run queue (core_fixes.bpf.h); 0 when
 * userspace could not find both in the kernel's BTF. */
const volatile __s64 preempt_count_rq_delta = 0;
/* PIPEPROF_TEST_DROP_SWITCH_INS=N (tests only): one in N of the job's switch-ins is ignored, as
 * the kernel emits none on some hosts (pp_missed_switch_in_ns). 0, the default, and the verifier
 * prunes the test along with it. */
const volatile __u32 drop_switch_in_every = 0;
__u64 switch_ins_counted = 0;
/* PIPEPROF_TEST_DROP_WAKEUPS=N (tests only): likewise one in N of the job's wakeups, its
 * sched_waking and the sched_wakeup after it, as this guest loses a few beside CPU hogs
 * (pp_unseen_end_held). */
const volatile __u32 drop_wakeup_every = 0;
__u64 wakeups_counted = 0;
__u32 wakeup_dropped_tid = 0;
/* The calls whose wakeups from a task were last dropped, by thread (wakeup_drop_due()). */
struct pp_dropped_wake task_wakeups_dropped[PP_TEST_WAKE_SLOTS];
/* PIPEPROF_TEST_DROP_WOKEN_SWITCH_INS=1 (tests only, with the above): the switch-in after each
 * wakeup lost is lost too, as this guest loses both for a task now and then beside CPU hogs. */
const volatile bool drop_woken_switch_in = false;
__u32 switch_in_dropped_tid = 0;
/* PIPEPROF_TEST_DROP_OPEN_WAIT_ENDS=1 (tests only): a timer's wakeup of a thread asleep since
 * before the attach is lost, with its switch-in, as the same guest loses both beside CPU hogs
 * at times: the wait open at the attach then ends unseen at every attach. */
const volatile bool drop_open_wait_end = false;

/* 0 while pipeprof is still attaching: processes are followed but no time is accounted, so
 * the window opens only once every probe is in place. Threads first seen later are taken to
 * have existed since then. */
__u64 window_start_ns = 0;
/* Set by userspace once the clock has passed window_start_ns, which is stored a little ahead of
 * its time (tracer_begin_accounting()): until then a program reads its clock against it. */
bool window_start_passed = false;
/* Set when the report is taken: nothing after it is accounted while the maps are read (the
 * probes themselves take seconds to detach), so every thread's states sum to the window. */
__u64 window_end_ns = 0;
/* Which half of the hists map events go to. Userspace flips it, waits for a grace period,
 * then drains the other half, which no program can be writing any more. */
__u32 hist_epoch = 0;
/* Set by userspace once the start-up check proved the preempt count reads right; until then
 * (and for good where it does not) interrupt context comes from the tracepoint nesting. */
bool irq_from_preempt_count = false;
/* Set with window_end_ns: until then, wakeups still name the waits open at the close. */
__u64 naming_until_ns = 0;
/* Set by userspace once the job is known to be distributed (the target names a RANK, or ranks
 * were found under it): only then is what the network delivers a collective's (COMM_WAIT). In a
 * job of one trainer it is data: a streaming dataset, a sample server (DATA_WAIT). */
bool job_is_distributed = false;
/* Odd while every launch probe is attached: userspace samples launches in bursts when they are
 * many (launch_sample.c), and a step counts its launches only if one burst spans it whole. */
__u32 launch_epoch = 0;

/* 0, and never written. Loaded from .bss, which the verifier does not read ahead as it reads
 * .rodata, it turns a value the verifier knows into one it does not: paths that differ only in
 * that value are then verified once (thread_record_new()'s slot). */
__u32 verifier_blind_zero = 0;

/* 1 once a pinned host region has been stored (gpumem.bpf.c): until then no copy can be from
 * one, and the walk over the regions map is skipped. */
__u32 pinned_regions_stored = 0;

struct pp_hist zero_hist;
struct pp_thread_gpu zero_thread_gpu;
struct pp_dev_mem zero_dev_mem;

/*
 * Never attached: userspace runs it on each CPU once the programs are loaded
 * (BPF_F_TEST_RUN_ON_CPU: a cross-CPU call, so no thread of ours has to be scheduled there; a
 * thread pinned to each CPU in turn once waited a minute behind a runnable queue that never let
 * it in). A hash map that grows as it fills starts each CPU with one cached element for records
 * over 256 B and refills from an irq_work once an insert finds the cache low
 * (kernel/bpf/memalloc.c); a program that inserted twice before interrupts came back (a switch
 * between two threads no event had shown yet, right after the attach) got -ENOMEM for the
 * second and lost that thread's event. An insert here starts the refill; the deletes leave the
 * elements in this CPU's cache. Returns the inserts that succeeded into each map: the thread
 * records' in the low byte, the wakers' in the next.
 */
static __noinline int warm_threads(void)
{
	struct pp_thread fresh = {};
	int inserted = 0;

	for (__u32 i = 0; i < PP_WARM_INSERTS; i++) {
		__u32 key = PP_WARM_KEY_BASE + i;

		if (!bpf_map_update_elem(&threads, &key, &fresh, BPF_NOEXIST))
			inserted++;
	}
	for (__u32 i = 0; i < PP_WARM_INSERTS; i++) {
		__u32 key = PP_WARM_KEY_BASE + i;

		bpf_map_delete_elem(&threads, &key);
	}
	return inserted;
}

static __noinline int warm_wakers(void)
{
	struct pp_waker_val zero = {};
	int inserted = 0;

	for (__u32 i = 0; i < PP_WARM_INSERTS; i++) {
		struct pp_waker_key key = { .wakee = PP_WARM_KEY_BASE + i };

		if (!bpf_map_update_elem(&wakers, &key, &zero, BPF_NOEXIST))
			inserted++;
	}
	for (__u32 i = 0; i < PP_WARM_INSERTS; i++) {
		struct pp_waker_key key = { .wakee = PP_WARM_KEY_BASE + i };

		bpf_map_delete_elem(&wakers, &key);
	}
	return inserted;
}

SEC("raw_tp")
int warm_grown_maps(void *ctx)
{
	return warm_threads() | warm_wakers() << 8;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";

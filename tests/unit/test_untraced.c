// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Switch-ins the kernel did not trace (a Firecracker guest's), and the wakeups that come while
 * a thread's record still holds the wait before one: pipeprof.h's pure rules. */
#include "pipeprof.h"
#include "unit.h"

#define MS 1000000ULL
#define US 1000ULL

/* A switch-in the kernel never traced, placed from the thread's CPU clock: the ftrace of a
 * preempted trainer on a Firecracker guest, out at 425.719 ms, out again at 478.553 ms with no
 * switch-in between, having run 20 ms by its clock. */
TEST(test_missed_switch_in)
{
	const __u64 out = 425719000, again = 478553000, exec = 7734000695ULL;

	CHECK_EQ_U64(pp_missed_switch_in_ns(out, again, exec, exec + 20 * MS), again - 20 * MS);
	/* It ran the whole gap: no wait at all. */
	CHECK_EQ_U64(pp_missed_switch_in_ns(out, again, exec, exec + (again - out)), out);
	/* Its clock gained more than the gap (a switch-out seen late): clamped to the gap. */
	CHECK_EQ_U64(pp_missed_switch_in_ns(out, again, exec, exec + 60 * MS), out);
	/* It never ran: the switch-in is now (a zero-length run). */
	CHECK_EQ_U64(pp_missed_switch_in_ns(out, again, exec, exec), again);
	/* No switch-out seen yet, a clock going back (a pid reused), time going back: unplaced. */
	CHECK_EQ_U64(pp_missed_switch_in_ns(out, again, 0, exec), 0);
	CHECK_EQ_U64(pp_missed_switch_in_ns(out, again, exec, exec - 1), 0);
	CHECK_EQ_U64(pp_missed_switch_in_ns(again, out, exec, exec + MS), 0);
}

/* Which threads found on a CPU had a switch-in the kernel did not trace, and a clock to place
 * it by: one seen leaving a CPU always; one first seen asleep only once its wakeup gave it a
 * clock (else it may have run since the attach). The long_step scenario's CPU-BOUND for a
 * trainer starved of data came from a thread first seen asleep, woken, and read as running
 * since the attach. */
TEST(test_switch_in_unseen)
{
	CHECK(pp_switch_in_unseen(PP_PHASE_RUNNABLE, 0));
	CHECK(pp_switch_in_unseen(PP_PHASE_OFFCPU, 7734000695ULL));
	CHECK(pp_switch_in_unseen(PP_PHASE_UNKNOWN, 7734000695ULL));
	CHECK(!pp_switch_in_unseen(PP_PHASE_UNKNOWN, 0));
	CHECK(!pp_switch_in_unseen(PP_PHASE_ONCPU, 7734000695ULL));
	CHECK(!pp_switch_in_unseen(PP_PHASE_EXITED, 7734000695ULL));
	/* Of those, the ones whose record holds a wait still open: not a preempted one. */
	CHECK(!pp_asleep_with_clock(PP_PHASE_RUNNABLE, 7734000695ULL));
	CHECK(pp_asleep_with_clock(PP_PHASE_OFFCPU, 7734000695ULL));
	CHECK(pp_asleep_with_clock(PP_PHASE_UNKNOWN, 7734000695ULL));
	CHECK(!pp_asleep_with_clock(PP_PHASE_UNKNOWN, 0));
}

/*
 * The CI trace that read a quarter of a window as OTHER (thread_retry, one switch-in in three
 * untraced): the trainer's GIL wait (a 5 ms timed wait) out at 900 ms, its timer's wakeup
 * 5.07 ms in, its switch-in untraced; on a CPU again, it waits on the GIL once more, and the
 * holder's signal comes 5.25 ms in, before the switch-out that places the first switch-in.
 * That second wakeup is of the wait it enters, not of the one its record holds.
 */
TEST(test_wake_of_next_wait)
{
	const __u64 out = 900 * MS, exec = 7734000695ULL;
	const __u64 timer = out + 5070 * US, signal = out + 5250 * US;

	const __u64 last_in = out - 3 * MS, placed = out + 5100 * US;

	/* The timer's wakeup is the first of the wait: the record's (the one before it ended the
	 * wait before, queued before the switch-in). */
	CHECK(!pp_wake_is_next_waits(PP_PHASE_OFFCPU, exec, last_in - MS, out, last_in,
				     last_in - MS));
	/* The holder's signal, with the timer's already in the record: put aside. */
	CHECK(pp_wake_is_next_waits(PP_PHASE_OFFCPU, exec, timer, out, last_in, timer));
	/* A thread first seen asleep, woken once with its clock read: likewise. */
	CHECK(pp_wake_is_next_waits(PP_PHASE_UNKNOWN, exec, timer, out, last_in, timer));
	/* Without a clock its switch-in cannot be placed: nothing would take the wakeup up. */
	CHECK(!pp_wake_is_next_waits(PP_PHASE_UNKNOWN, 0, timer, out, last_in, timer));
	/* On a CPU or preempted, the record holds no wait: every wakeup is the record's. */
	CHECK(!pp_wake_is_next_waits(PP_PHASE_ONCPU, exec, timer, out, last_in, timer));
	CHECK(!pp_wake_is_next_waits(PP_PHASE_RUNNABLE, exec, timer, out, last_in, timer));
	/* A first wakeup that raced the switch-out (a lock's holder unlocking at once) ended the
	 * wait too: after the last switch-in, queued after the switch-out. */
	CHECK(pp_wake_is_next_waits(PP_PHASE_OFFCPU, exec, out - 2 * US, out, last_in,
				    out + 3 * US));
	/* One that came while the thread ran on, and never slept, did not: queued before. */
	CHECK(!pp_wake_is_next_waits(PP_PHASE_OFFCPU, exec, out - 2 * MS, out, last_in,
				     out - 2 * MS));

	/* The switch-out places the switch-in 5.1 ms in: the held wait is closed with the
	 * timer's wakeup (its last switch-in long before), then the signal is the record's. */

	CHECK(!pp_next_wake_due(signal, timer, last_in, 0));
	CHECK(pp_next_wake_due(signal, timer, last_in, 1));
	/* The signal raced that switch-out and was put aside after it: the record's wakeup,
	 * the timer's, predates the placed switch-in, so the signal ends the next wait. */
	CHECK(pp_next_wake_due(signal, timer, placed, 0));
	/* A wakeup put aside that a later one overtook is dropped, before or after. */
	CHECK(!pp_next_wake_due(signal, signal + MS, placed, 0));
	CHECK(!pp_next_wake_due(signal, signal + MS, placed, 1));
}

/* A thread that wakes another runs: where its record holds a wait its wakeup ended, its
 * switch-in went untraced and is placed there. Not where no wakeup came since it slept (a
 * wakeup from its own way off the CPU would read its sleep as RUNNING), nor preempted. */
TEST(test_waker_switch_in_unseen)
{
	const __u64 exec = 7 * MS, out = 100 * MS;

	CHECK(pp_waker_switch_in_unseen(PP_PHASE_OFFCPU, exec, out + 5 * MS, out));
	CHECK(pp_waker_switch_in_unseen(PP_PHASE_UNKNOWN, exec, out + 5 * MS, out));
	CHECK(!pp_waker_switch_in_unseen(PP_PHASE_OFFCPU, exec, out - 2 * MS, out));
	CHECK(!pp_waker_switch_in_unseen(PP_PHASE_OFFCPU, exec, out, out));
	CHECK(!pp_waker_switch_in_unseen(PP_PHASE_UNKNOWN, 0, out + 5 * MS, out));
	CHECK(!pp_waker_switch_in_unseen(PP_PHASE_RUNNABLE, exec, out + 5 * MS, out));
	CHECK(!pp_waker_switch_in_unseen(PP_PHASE_ONCPU, exec, out + 5 * MS, out));
}

/* The wait whose end no event showed, in a chain of Queue.get(timeout=1) waits held beside two
 * CPU hogs: 1.0005 s after 3.03 s held. Taken for one more of them; one longer than all of them
 * is not (a wait of something else, for all that shows), unless its call is theirs: 1.0039 s
 * after 0.26 s held (the first of them cut by the window's start), its call read at its
 * switch-in. Nothing held, nothing to add it to. */
TEST(test_unseen_end_held)
{
	CHECK(pp_unseen_end_held(1, 0, 1000500 * US <= 3032354 * US));
	CHECK(pp_unseen_end_held(1, 0, 1003897 * US <= 1549198 * US));
	CHECK(!pp_unseen_end_held(1, 0, 1003897 * US <= 262301 * US));
	CHECK(pp_unseen_end_held(1, 1, 1003897 * US <= 262301 * US));
	CHECK(!pp_unseen_end_held(0, 0, 1000500 * US <= 3032354 * US));
	CHECK(!pp_unseen_end_held(0, 1, 1000500 * US <= 3032354 * US));
}

int main(void)
{
	RUN_TEST(test_missed_switch_in);
	RUN_TEST(test_switch_in_unseen);
	RUN_TEST(test_wake_of_next_wait);
	RUN_TEST(test_unseen_end_held);
	RUN_TEST(test_waker_switch_in_unseen);
	return unit_summary();
}

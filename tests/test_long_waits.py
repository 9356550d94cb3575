# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Windows shorter than a step: the trainer's wait open when the window closes.

A wait's cause is named by the wakeup that ends it. With `-d 1` on a loop whose steps take
~2.4 s, the trainer is waiting for a batch for most of every window and nothing wakes it before
the window closes: pipeprof then waits for that wakeup (up to the window's length, at least 5 s)
and gives the verdict the truth has, where it once read the whole window as OTHER and said NO
DOMINANT STALL. A trainer that never wakes gets no verdict at all, says why, and Ctrl-C ends
that wait at once.

The same job is attached again with every other switch-in of the job left untraced
(PIPEPROF_TEST_DROP_SWITCH_INS=2), as a Firecracker guest leaves some: a trainer asleep since the
attach and woken by the batch after the close, its switch-in untraced, once read its whole window
as RUNNING and got CPU-BOUND (CI, one attach in three).
"""
import json
import signal
import subprocess
import time

import pytest

from conftest import (PIPEPROF, PYTHON, ROOT, attach_repeatedly, finish_workload, groundtruth,
                      keep_report, lost_wakeups, lost_wakeups_unplaced, open_wait_ends_unseen,
                      start_workload,
                      untraced_switch_ins)
from test_scenarios import check_attaches, start_hogs, trainer_fractions, workload_duration

ATTACHES = 3
# Attaches with every other switch-in of the job untraced (every second one by a counter, so
# about a coin's chance for the trainer's first): in most, the trainer's first event after the
# attach is a switch-out after an untraced switch-in, the case that read RUNNING. The unfixed
# build failed 3 of 5 and 4 of 8 such attaches.
UNTRACED_ATTACHES = 5
WINDOW_S = 1
# 8 items of 300 ms of worker CPU: a 2.4 s step, 2.4 windows.
SLOW_ARGS = ["--item-ms", "300"]
# The longest wait for a wakeup after a 1 s window, and slack for attach and exit.
MAX_NAMING_S = 5
SLACK_S = 3


def test_step_longer_than_window(procs, tmp_path):
    truth_path = str(tmp_path / "long_step.truth.json")
    w, pid, tid = start_workload(procs, "data_bound.py", SLOW_ARGS, truth_path,
                                 duration=workload_duration(ATTACHES + UNTRACED_ATTACHES,
                                                            WINDOW_S + MAX_NAMING_S))
    runs = attach_repeatedly(w, pid, ATTACHES, WINDOW_S)
    untraced = attach_repeatedly(w, pid, UNTRACED_ATTACHES, WINDOW_S,
                                 env=untraced_switch_ins(2))
    truth = finish_workload(w, truth_path)
    slow = [r["wall_s"] for r in runs + untraced
            if r["wall_s"] > WINDOW_S + MAX_NAMING_S + SLACK_S]
    failures = []
    for name, group in (("long_step", runs), ("long_step_untraced_switch_ins", untraced)):
        try:
            check_attaches(name, group, truth, tid, "DATA-LOADING BOUND", [],
                           extra={"window_s": WINDOW_S})
        except pytest.fail.Exception as e:
            failures.append(str(e))
    missed = [r["report"]["counters"]["switch_ins_missed"] for r in untraced if r["report"]]
    # A 1 s window holds at most one of the 2.4 s steps' batch arrivals: no whole step, where
    # the ends of that one arrival's waits once read as steps of microseconds (~7,600/s).
    steps = [(r["report"]["steps"]["count"], r["report"]["steps"]["per_second"])
             for r in runs + untraced if r["report"]]
    if any(count for count, _ in steps):
        failures.append("steps (count, per second) per attach: %s (want no whole step)" % steps)
    assert not failures, "\n\n".join(failures)
    # The hook did what it says: switch-ins were placed from the clock at each of those attaches.
    assert missed and min(missed) > 0, "switch-ins placed from the clock per attach: %s" % missed
    assert not slow, "attaches took %s s: more than the window, the naming wait and %d s" % (
        slow, SLACK_S)


def attach_and_check(procs, tmp_path, name, script, args, window_s, verdict, span_s=None,
                     harder=False, untraced=False, busy_window_s=None, unwoken=False,
                     unplaced=False, open_unseen=False):
    """script started with args, attached ATTACHES times for window_s each (its run sized for
    windows of span_s, default window_s), and every attach checked against the workload's truth
    (check_attaches under name). untraced: as many attaches again with one switch-in of the job
    in three untraced; unwoken: as many with one wakeup of the job in LOST_WAKEUP_EVERY lost;
    unplaced: as many with one in UNPLACED_WAKEUP_EVERY lost, each with its switch-in;
    open_unseen: as many with the timer's wakeup and switch-in that end the wait open at the
    attach lost;
    harder: the untraced ones, then as many beside two CPU hogs, for busy_window_s each
    (default window_s). Each group is checked on its own. Returns the groups ({name: attaches},
    the first the plain one) and the truth."""
    truth_path = str(tmp_path / (name + ".truth.json"))
    untraced = untraced or harder
    busy_window_s = busy_window_s or window_s
    duration = workload_duration((1 + untraced + unwoken + unplaced + open_unseen) * ATTACHES,
                                 span_s or window_s)
    if harder:
        duration += workload_duration(ATTACHES, max(span_s or window_s, 2 * busy_window_s))
    w, pid, tid = start_workload(procs, script, args, truth_path, duration=duration)
    runs = attach_repeatedly(w, pid, ATTACHES, window_s)
    checked = [(name, runs)]
    if untraced:
        checked.append((name + "_untraced_switch_ins",
                        attach_repeatedly(w, pid, ATTACHES, window_s,
                                          env=untraced_switch_ins(3))))
    if unwoken:
        checked.append((name + "_lost_wakeups",
                        attach_repeatedly(w, pid, ATTACHES, window_s,
                                          env=lost_wakeups(LOST_WAKEUP_EVERY))))
    if unplaced:
        checked.append((name + "_lost_wakeups_unplaced",
                        attach_repeatedly(w, pid, ATTACHES, window_s,
                                          env=lost_wakeups_unplaced(UNPLACED_WAKEUP_EVERY))))
    if open_unseen:
        checked.append((name + "_open_wait_end_unseen",
                        attach_repeatedly(w, pid, ATTACHES, window_s, env=open_wait_ends_unseen())))
    if harder:
        start_hogs(procs, 2)
        checked.append((name + "_busy", attach_repeatedly(w, pid, ATTACHES, busy_window_s)))
    truth = finish_workload(w, truth_path)
    failures = []
    for group, attaches in checked:
        try:
            check_attaches(group, attaches, truth, tid, verdict, [],
                           extra={"window_s": busy_window_s if group.endswith("_busy")
                                  else window_s})
        except pytest.fail.Exception as e:
            failures.append(str(e))
    assert not failures, "\n\n".join(failures)
    return dict(checked), truth


def mean_share_error(attaches, truth, state):
    """pipeprof's share of state less the truth's, averaged over the attaches (signed): a bias
    each attach's tolerance lets through."""
    errors = []
    for r in attaches:
        w = r["report"]["window"]
        errors.append(trainer_fractions(r["report"])[state] -
                      groundtruth.shares(truth, w["start_ns"], w["end_ns"])[state])
    return sum(errors) / len(errors), errors


# 8 items of 700 ms of worker CPU: 5.6 s between batches, past the 5 s timeout of the
# DataLoader's Queue.get (torch's MP_STATUS_CHECK_INTERVAL), after which the trainer checks its
# workers and polls again: each batch is a wait the timer ends, then one the worker ends.
TIMEOUT_ARGS = ["--item-ms", "700"]
# A window longer than a batch's wait: its naming grace (the window's length) then reaches the
# retry's end while a batch takes under 8 s, so every attach can name every wait. With 6 s,
# batches slowed to ~7.7 s beside two CPU hogs left the last wait open past the grace in 3 of
# 15 attaches (reported as such, and counted OTHER: 14% of the window).
TIMEOUT_WINDOW_S = 8


def test_batch_slower_than_the_loaders_timeout(procs, tmp_path):
    """Waits the DataLoader's own 5 s timeout ends, each retried at once, are DATA_WAIT: the
    build before read them as OTHER, ~90% of the trainer's time, and said NO DOMINANT STALL for a
    job starved of data (and all of it, in windows inside one such wait)."""
    attach_and_check(procs, tmp_path, "loader_timeout", "data_bound.py", TIMEOUT_ARGS,
                     TIMEOUT_WINDOW_S, "DATA-LOADING BOUND", span_s=2 * TIMEOUT_WINDOW_S,
                     untraced=True)


# A batch every 2.5 s, asked for as the step begins. The trainer computes for 50 ms, polls for
# what remains of its 1 s deadline (poll(.., 950)) and, timed out, for the whole 1 s at once:
# each batch is a 950 ms wait, a 1 s one, and a last one the worker ends. Beside CPU hogs the
# compute takes longer and the first poll is shorter (poll(.., 869) after 131 ms); so is one
# open at the attach, which pipeprof's own start-up delays (CI: OTHER 26.7%, one attach in 3).
# A host that traces no switch-in for some tasks left the chain without the calls read there
# (OTHER 49-82% with one switch-in in three untraced). That guest, beside CPU hogs, once lost
# the timer's wakeup and the switch-in that ended the poll open at the attach: with no call
# read, the wait could not be held for its retry and read OTHER (19%, one attach of ~300 in 20
# runs of this test). Seeded with the call it was in; the hook makes it every attach.
DEADLINE_ARGS = ["--item-ms", "2500", "--work-ms", "50", "--timeout", "1"]
DEADLINE_WINDOW_S = 3


def test_retry_for_what_remains_of_a_deadline(procs, tmp_path):
    """A wait that polls for what remains of a deadline and its retry, which polls for the whole
    timeout, are one call: the DataLoader's poll(5000) is one for 4998 when the trainer is
    preempted between reading the clock and polling, and the build that compared timeouts
    exactly read that whole wait as OTHER (about one attach in 50 on the DataLoader). Here every
    batch starts with such a wait, on a quiet machine, on one that traces some switch-ins not,
    on one that loses some wakeups, and on a busy one. Losing the worker's wakeup (each one in
    five lost here is a worker's), the chain's end was unseen, and the 50 ms of compute after
    it ended the chain as OTHER: +21-27 pts at every attach, until it read as the chain before
    it at the same call was named."""
    groups, _ = attach_and_check(procs, tmp_path, "deadline_remainder", "deadline_loader.py",
                                 DEADLINE_ARGS, DEADLINE_WINDOW_S, "DATA-LOADING BOUND",
                                 span_s=2 * DEADLINE_WINDOW_S, harder=True, unwoken=True,
                                 open_unseen=True)
    for group in ("deadline_remainder_lost_wakeups", "deadline_remainder_open_wait_end_unseen"):
        unwoken = [r["report"]["counters"]["waits_ended_without_wakeup"] for r in groups[group]]
        assert min(unwoken) > 0, "%s: waits ended with no wakeup per attach: %s" % (group, unwoken)


# A pause on an asyncio event loop, then a batch from a worker: 100 ms each per step.
EVENT_LOOP_WINDOW_S = 2


def test_event_loop_pause_is_no_retry(procs, tmp_path):
    """asyncio's `await asyncio.sleep(0.1)` is epoll_wait(fd, .., 100), ended by the timer; the
    batch awaited next is epoll_wait(fd, .., -1), ended by the worker. The pause is no timed-out
    wait retried (its timeout is not the next call's): it stays OTHER, half the trainer's time.
    Taken for a retry, as the build that compared syscalls alone took it, it read as the batch's
    wait: DATA_WAIT 95-98% and "at most 20-61x faster" for a loop that data could speed up 2x."""
    attach_and_check(procs, tmp_path, "event_loop_pause", "async_loader.py", [],
                     EVENT_LOOP_WINDOW_S, "DATA-LOADING BOUND")


# A Python thread's batches: 2.5 s of its CPU with the GIL held, the trainer in q.get(timeout=1)
# retried at once (one wakeup in 2.5 s: no feeder, a thread waited on); or batches of 200 ms
# from a producer busy all the time, the trainer pausing 100 ms in stop.wait(0.1) before each
# q.get() (a thread loader).
THREAD_RETRY_ARGS = ["--mode", "retry", "--item-ms", "2500", "--timeout", "1"]
THREAD_PAUSE_ARGS = ["--mode", "pause", "--item-ms", "200", "--pause-ms", "100"]
THREAD_WINDOW_S = 3
# Beside two CPU hogs the producer's 2.5 s of CPU take 5-9 s: a window of 3 s and the 5 s grace
# after it left the chain open at the attach unnamed (NO VERDICT: THE TRAINER'S WAIT DID NOT END,
# one attach in 30). 6 s windows wait up to 6 s more: chains up to 12 s.
THREAD_BUSY_WINDOW_S = 6
# One wakeup of the job in 5 lost (5-11 waits of the trainer's in a 3 s window): a chain's
# waits whose wakeup is lost, a timer's or the producer's, are still the chain's. Ended there
# (its call read, or its first wait), the unfixed rule read 84-100% of 2 windows in 8 as OTHER
# (NO DOMINANT STALL in one). thread_pause is not attached so: its q.get() has no deadline, and
# one with no wakeup seen has no cause to read (OTHER, counted and said).
LOST_WAKEUP_EVERY = 5
# One wakeup of the job in 3 lost with its switch-in, so that the thread's next switch-out
# places the wait's end from its CPU clock: thread_retry's chains of q.get(timeout=1) read
# 37-77% OTHER at 7 attaches in 8 with the wait's call read at its wakeup or switch-in (none
# seen; beside two CPU hogs without the hook, 1-2 s of OTHER at 3 attaches in 21 and once in
# CI), and DATA-LOADING BOUND (thread loader) at one. Read at the switch-out into the wait: 8
# in 8 within 0.2 pts of the truth. The hook never loses the batch's delivery that ends a held
# chain this way (nothing would be left to name it); the chain's own timer wakeups it does.
UNPLACED_WAKEUP_EVERY = 3
# thread_pause's THREAD_WAIT, pipeprof's less the truth's averaged over a group's attaches:
# -1.0 to +0.6 pts at any attach, quiet or with some switch-ins untraced (4 runs of this test).
PAUSE_BIAS_MAX = 0.015


@pytest.mark.parametrize("name, args, verdict", [
    ("thread_retry", THREAD_RETRY_ARGS, "WAITING ON A THREAD"),
    ("thread_pause", THREAD_PAUSE_ARGS, "DATA-LOADING BOUND (thread loader)")])
def test_thread_waits_with_timeouts(procs, tmp_path, name, args, verdict):
    """Futex waits with deadlines. retry: each batch is two q.get(timeout=1) that time out and
    the one the producer ends, and between them the trainer takes the GIL back (a 5 ms timed
    wait, then the mutex the producer unlocks): all THREAD_WAIT. Ending the held waits at that
    mutex read 5 s of such a batch as OTHER (THREAD_WAIT 21-93% where it was 100%). pause: the
    stop.wait(0.1) before each q.get() is a pause, not a timed-out wait retried (a deadline on
    one lock, then no timeout on another): OTHER, half the time; comparing syscalls alone read
    it as THREAD_WAIT, all of it. Each also with some switch-ins untraced, and beside CPU hogs;
    retry also with some wakeups lost, and with some lost along with their switch-ins."""
    groups, truth = attach_and_check(procs, tmp_path, name, "thread_timeouts.py", args,
                                     THREAD_WINDOW_S, verdict, span_s=2 * THREAD_WINDOW_S,
                                     harder=True,
                                     busy_window_s=THREAD_BUSY_WINDOW_S
                                     if name == "thread_retry" else None,
                                     unwoken=name == "thread_retry",
                                     unplaced=name == "thread_retry",
                                     open_unseen=name == "thread_retry")
    runs = groups[name]
    if name == "thread_pause":
        # The GIL taken back after each q.get() is the batch's wait too: two 5 ms waits the
        # timer ends, then the trainer wakes the producer it took the GIL from (a takeover).
        # With the trainer's switch-in untraced, the takeover was judged on a record that
        # still said asleep and those waits read OTHER: THREAD_WAIT 1.3-6.3 pts short at every
        # attach (-2.4 to -2.9 on average over a group), within each attach's tolerance but
        # for about one attach in ten.
        for group in (name, name + "_untraced_switch_ins"):
            mean, errors = mean_share_error(groups[group], truth, "THREAD_WAIT")
            assert abs(mean) <= PAUSE_BIAS_MAX, (
                "%s: THREAD_WAIT off by %+.1f pts on average (per attach: %s; at most %.1f)" % (
                    group, 100 * mean, ", ".join("%+.1f" % (100 * e) for e in errors),
                    100 * PAUSE_BIAS_MAX))
    if name == "thread_retry":
        # The producer ends the trainer's waits once a batch: at most two batches end in a
        # window, and one more wakeup is slack. The GIL's mutex it handed over on the way to
        # each retry once counted too (4-5 in a window, a feeder "step after step" in some
        # attaches: DATA-LOADING BOUND (thread loader), 1 attach in 3 in CI).
        producer = truth["extra"]["producer_tid"]
        wakeups = [sum(x["wakeups"] for x in r["report"]["waited_on"] if x.get("tid") == producer)
                   for r in runs]
        limit = int(THREAD_WINDOW_S * 1000 // 2500) + 2
        assert max(wakeups) <= limit, "the producer's wakeups per attach: %s (at most %d)" % (
            wakeups, limit)
        # The hook did what it says: waits ended unwoken at each of those attaches.
        unwoken = [r["report"]["counters"]["waits_ended_without_wakeup"]
                   for r in groups[name + "_lost_wakeups"]]
        assert min(unwoken) > 0, "waits ended with no wakeup per attach: %s" % unwoken
        # And there, placed from the CPU clock at a switch-out.
        placed = [(r["report"]["counters"]["waits_ended_without_wakeup"],
                   r["report"]["counters"]["switch_ins_missed"])
                  for r in groups[name + "_lost_wakeups_unplaced"]]
        assert min(min(p) for p in placed) > 0, (
            "(waits ended with no wakeup, switch-ins placed) per attach: %s" % placed)


@pytest.mark.parametrize("trainer", ["main", "thread"])
def test_sleep_at_attach_never_reads_running(procs, tmp_path, trainer):
    """Every wakeup and every switch-in of the job untraced (both test hooks at 1): each wait is
    placed from the CPU clock at the switch-out after it, and read as a wait nothing was seen to
    end (OTHER). The trainer's first wait, asleep since before the attach, has no switch-out of
    it to count the clock from: seeded with the clock at the attach, it is placed too. Without
    that it read RUNNING, from the attach to the trainer's first switch-out (what one lost
    wakeup and switch-in did on a quiet machine, one attach in 25: +25 pts of RUNNING). The
    same with the trainer a thread of its own (`--tid`), not the main thread, which the seed
    once left out (RUNNING +23 pts at 2 attaches in 3), and there also with wakeups alone
    untraced: its first wait read RUNQ (+14 to +24 pts at every attach)."""
    truth_path = str(tmp_path / "all_lost.truth.json")
    args = THREAD_RETRY_ARGS + (["--trainer-thread"] if trainer == "thread" else [])
    groups = [("RUNNING", dict(lost_wakeups(1), PIPEPROF_TEST_DROP_SWITCH_INS="1"))]
    if trainer == "thread":
        groups.append(("RUNQ", lost_wakeups(1)))
    w, pid, tid = start_workload(procs, "thread_timeouts.py", args, truth_path,
                                 duration=workload_duration(len(groups) * ATTACHES,
                                                            2 * THREAD_WINDOW_S))
    extra = ("--tid", str(tid)) if trainer == "thread" else ()
    runs = [(state, env, r) for state, env in groups
            for r in attach_repeatedly(w, pid, ATTACHES, THREAD_WINDOW_S, extra=extra, env=env)]
    truth = finish_workload(w, truth_path)
    assert (truth["tid"] == pid) == (trainer == "main"), (truth["tid"], pid)
    bad = []
    for i, (state, env, r) in enumerate(runs, 1):
        rep = r["report"]
        assert rep, "attach %d: %s" % (i, r["error"])
        window = rep["window"]
        want = groundtruth.shares(truth, window["start_ns"], window["end_ns"])[state]
        got = trainer_fractions(rep)[state]
        c = rep["counters"]
        placed = c["switch_ins_missed"] or "PIPEPROF_TEST_DROP_SWITCH_INS" not in env
        if got > want + 0.05 or not placed or not c["waits_ended_without_wakeup"]:
            bad.append("attach %d: %s %.3f vs truth %.3f, verdict %r, switch-ins placed %d, "
                       "waits unwoken %d" % (i, state, got, want, rep["verdict"]["name"],
                                             c["switch_ins_missed"],
                                             c["waits_ended_without_wakeup"]))
    assert not bad, "\n".join(bad)


BLOCKED = "import os, sys; r, w = os.pipe(); print('READY', flush=True); os.read(r, 1)"


def start_blocked(procs):
    p = procs([PYTHON, "-c", BLOCKED], name="blocked")
    if p.wait_line(r"^READY", 30) is None:
        pytest.fail("the blocked job did not start\n" + p.output(), pytrace=False)
    time.sleep(0.3)
    return p


def test_trainer_never_woken(procs):
    p = start_blocked(procs)
    t0 = time.monotonic()
    r = subprocess.run([PIPEPROF, "-p", str(p.p.pid), "-d", str(WINDOW_S), "-j"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    rep = keep_report(json.loads(r.stdout))
    v = rep["verdict"]
    assert v["id"] == "wait_not_ended", v
    assert v["name"] == "NO VERDICT: THE TRAINER'S WAIT DID NOT END", v
    assert v["speedup_bound"] is None, v
    assert v["fraction"] > 0.95, v
    ids = [x["id"] for x in rep["recommendations"]]
    assert ids[:2] == ["trace_longer", "check_hang"], ids
    notes = " ".join(rep["not_traced"])
    assert "the trainer's last wait" in notes and "had not ended" in notes, notes
    # It did wait for the wakeup (the window, then ~5 s), and no longer.
    assert MAX_NAMING_S - 0.5 <= took <= WINDOW_S + MAX_NAMING_S + SLACK_S, took
    # -j keeps stderr free of the progress line; the text report says what it waits for.
    assert "waiting up to" not in r.stderr, r.stderr


def test_ctrl_c_ends_the_naming_wait(procs):
    p = start_blocked(procs)
    pp = subprocess.Popen([PIPEPROF, "-p", str(p.p.pid), "-d", str(WINDOW_S)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        # The progress line comes once the base grace (0.5 s) has passed with the wait open.
        deadline = time.monotonic() + 30
        seen = ""
        while time.monotonic() < deadline:
            line = pp.stderr.readline()
            if not line:
                break
            seen += line
            if "waiting up to" in line:
                break
        assert "waiting up to" in seen and "Ctrl-C: report now" in seen, seen
        t0 = time.monotonic()
        pp.send_signal(signal.SIGINT)
        out, err = pp.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if pp.poll() is None:
            pp.kill()
            pp.wait()
    assert pp.returncode == 0, seen + err
    assert "Verdict: NO VERDICT: THE TRAINER'S WAIT DID NOT END" in out, out
    assert took < 1.5, "the report came %.2f s after Ctrl-C" % took

# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Repeated attaches under interrupt and timer load.

One data-loading job (tools/workloads/data_bound.py) is attached STRESS_ATTACHES times in a row
with short windows (`pipeprof -p PID -d 2 -j`) while tools/workloads/load_gen.py, started in
its own session (not a descendant of the job), keeps loopback TCP traffic (NET_RX softirqs
waking blocked receivers) and a 200 us sleeper (hrtimer interrupts) running: attaching while an
interrupt is in flight on some CPU is then the common case, not the rare one. Every attach must
give DATA-LOADING BOUND and every state of the trainer within 5 points of the workload's truth
(plus that attach's hypervisor steal), as the scenarios check. Prints
`attach stress: N of 20 right` and fails unless all are.

The load is measured, so the test cannot pass without it: load_gen must still be running after
the last attach, and the loopback message rate, the sleeper's rate and the host's NET_RX softirq
rate over the attaches must each reach a floor.
"""
import os
import signal
import time

import pytest

from conftest import (PYTHON, WORKLOADS, attach_repeatedly, finish_workload, start_workload)
from test_scenarios import check_attaches, workload_duration

STRESS_ATTACHES = 20
STRESS_WINDOW_S = 2
VERDICT = "DATA-LOADING BOUND"
# Floors for the load actually generated over the attaches (measured on this 2-CPU VM beside
# data_bound.py: ~43k messages/s each way, ~2.2-2.7k sleeps/s, ~86k NET_RX softirqs/s); far
# below what it does, far above what an idle or stuck generator does.
MIN_MSGS_PER_S = 2000
MIN_SLEEPS_PER_S = 500
MIN_NET_RX_PER_S = 2000
# SCHED_IDLE: the load takes every idle moment of both CPUs, and its interrupts land on both,
# but the job's tasks preempt it when woken. Unrestrained (LOAD_ARGS = []), its two TCP
# processes take ~1.4 of the 2 CPUs and the trainer's own truth is CPU-bound-by-contention in
# some windows (measured: true RUNQ 9-65%, above DATA_WAIT in 6 of 20 windows, so the right
# verdict there is CPU CONTENTION; pipeprof's RUNQ stayed within ~1 point of it). SCHED_IDLE alone
# is not enough: this kernel does not preempt in kernel mode, and the TCP pair spends most of its
# time there, so the trainer still queued behind it (true RUNQ 47-57% in 3 of 20 windows). The
# TCP pair therefore runs on the CPU of data_bound.py's worker (it pins its trainer to CPU 0 and
# its worker to CPU 1): the NET_RX softirqs land where the worker wakes the trainer, the timer
# sleeper's interrupts on both CPUs, and the trainer's CPU is left to it.
LOAD_ARGS = ["--sched-idle"] + (["--tcp-cpu", "1"] if (os.cpu_count() or 1) >= 2 else [])


def softirq_totals():
    """{softirq name: count summed over CPUs} from /proc/softirqs."""
    out = {}
    with open("/proc/softirqs") as f:
        f.readline()
        for line in f:
            parts = line.split()
            if parts:
                out[parts[0].rstrip(":")] = sum(int(x) for x in parts[1:] if x.isdigit())
    return out


def local_timer_interrupts():
    """Local timer interrupts (LOC), summed over CPUs, from /proc/interrupts (None if absent)."""
    with open("/proc/interrupts") as f:
        ncpu = len(f.readline().split())
        for line in f:
            parts = line.split()
            if parts and parts[0] == "LOC:":
                return sum(int(x) for x in parts[1:1 + ncpu] if x.isdigit())
    return None


def test_attach_stress(procs, pipeprof_bin, tmp_path):
    truth_path = str(tmp_path / "attach_stress.truth.json")
    duration = workload_duration(STRESS_ATTACHES, STRESS_WINDOW_S)
    # The load first: SCHED_IDLE on the CPU where data_bound.py's worker is busy all the time,
    # it got too little CPU to even start within 30 s once in a clean-clone run.
    # Its own session (procs starts every process in a new one): not a descendant of the job.
    load = procs([PYTHON, os.path.join(WORKLOADS, "load_gen.py"), "--duration", str(duration)]
                 + LOAD_ARGS, name="load_gen.py")
    if load.wait_line(r"^READY pid=\d+ port=\d+", 30) is None:
        pytest.fail("load_gen.py did not print READY within 30 s (exit status %s)\n%s" % (
            load.p.poll(), load.output()), pytrace=False)
    w, pid, tid = start_workload(procs, "data_bound.py", [], truth_path, duration=duration)
    time.sleep(0.5)

    irq0, loc0, t0 = softirq_totals(), local_timer_interrupts(), time.monotonic()
    runs = attach_repeatedly(w, pid, STRESS_ATTACHES, STRESS_WINDOW_S)
    irq1, loc1, t1 = softirq_totals(), local_timer_interrupts(), time.monotonic()
    load_alive = load.alive()

    load.signal(signal.SIGTERM)
    load.wait(15)
    m = load.wait_line(r"^load_gen: (\d+) msgs/s each way, (\d+) sleeps/s over ([\d.]+) s", 5)
    truth = finish_workload(w, truth_path)

    secs = t1 - t0
    rates = {k: (irq1.get(k, 0) - irq0.get(k, 0)) / secs for k in ("NET_RX", "TIMER", "HRTIMER")}
    if loc0 is not None and loc1 is not None:
        rates["LOC"] = (loc1 - loc0) / secs
    msgs = float(m.group(1)) if m else 0.0
    sleeps = float(m.group(2)) if m else 0.0
    load_line = "load over the %d attaches (%.1f s): %.0f msgs/s each way on loopback, " \
        "%.0f sleeps/s; host interrupts/s: %s" % (
            STRESS_ATTACHES, secs, msgs, sleeps,
            ", ".join("%s %.0f" % (k, v) for k, v in sorted(rates.items())))
    print("\n" + load_line)

    load_problems = []
    if not load_alive:
        load_problems.append("load_gen.py exited before the last attach finished")
    if m is None:
        load_problems.append("load_gen.py printed no rate line at exit")
    if msgs < MIN_MSGS_PER_S:
        load_problems.append("loopback traffic %.0f msgs/s < %d" % (msgs, MIN_MSGS_PER_S))
    if sleeps < MIN_SLEEPS_PER_S:
        load_problems.append("sleeper %.0f sleeps/s < %d" % (sleeps, MIN_SLEEPS_PER_S))
    if rates["NET_RX"] < MIN_NET_RX_PER_S:
        load_problems.append("NET_RX softirqs %.0f/s < %d" % (rates["NET_RX"], MIN_NET_RX_PER_S))

    extra = {"load": {"msgs_per_s": msgs, "sleeps_per_s": sleeps, "interrupts_per_s": rates,
                      "seconds": secs, "problems": load_problems},
             "window_s": STRESS_WINDOW_S}
    attach_failure = None
    try:
        check_attaches("attach_stress", runs, truth, tid, VERDICT, [], extra=extra,
                       headline="attach stress: %(right)d of %(n)d right")
    except pytest.fail.Exception as e:
        attach_failure = str(e)
    if load_problems:
        pytest.fail("the interrupt and timer load did not run as it must, so the attaches "
                    "prove nothing:\n  - %s\n%s\n%s\n\n%s" % (
                        "\n  - ".join(load_problems), load_line, load.output(),
                        attach_failure or "(every attach was right)"), pytrace=False)
    if attach_failure:
        pytest.fail("%s\n\n%s" % (load_line, attach_failure), pytrace=False)
